//! View 6, Review (manual: The review after a release): open exceptions by age as a bar chart (the buckets past
//! `warn_after` and `critical_after` in their colours), opened against resolved per day, a table
//! per workflow and per destination, and the duplicates. Drawn from the last review the ledger
//! answered; a spinner in the title while the next loads, never a wait.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Block, Borders, Paragraph, Row, Sparkline, Table};

use crate::console::app::{App, REVIEW_WINDOWS};
use crate::console::theme::{Meaning, SPINNER, Theme};
use crate::domain::{escape_text, format_age};
use crate::ledger::{GroupReview, Review};

/// The age buckets' lower bounds in seconds (for their colours).
const BUCKET_FROM: [i64; 6] = [0, 3_600, 4 * 3_600, 86_400, 3 * 86_400, 7 * 86_400];

pub(super) fn draw(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let [title, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    draw_title(f, app, theme, title);
    let Some(r) = &app.review.shown else {
        f.render_widget(
            Paragraph::new(format!(" {} loading the review…", SPINNER[app.spinner % 4])),
            rest,
        );
        return;
    };
    let chart_height = if rest.height >= 30 { 12 } else { 7 };
    let [charts, tables, runs, dupes] = Layout::vertical([
        Constraint::Length(chart_height),
        Constraint::Min(4),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(rest);
    // the age chart as wide as its six labelled bars need, the days the rest
    let [ages, days_area] = Layout::horizontal([
        Constraint::Length(43.min(charts.width / 2 + 3)),
        Constraint::Min(20),
    ])
    .areas(charts);
    draw_ages(f, app, theme, r, ages);
    draw_days(f, theme, r, days_area);
    let [by_workflow, by_destination] = if tables.width >= 150 {
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .spacing(2)
            .areas(tables)
    } else {
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(tables)
    };
    draw_table(
        f,
        theme,
        "workflow",
        &r.by_workflow,
        app.review.scroll,
        by_workflow,
    );
    draw_table(
        f,
        theme,
        "destination",
        &r.by_destination,
        app.review.scroll,
        by_destination,
    );
    draw_runs(f, theme, r, runs);
    draw_duplicates(f, theme, r, dupes);
}

/// The runs line (manual: Runs): started, done, stalled (now), closed, then the step transitions'
/// times, the slowest first, as many as the width holds.
fn draw_runs(f: &mut Frame, theme: &Theme, r: &Review, area: Rect) {
    let runs = &r.runs;
    let mut spans = vec![
        Span::styled(" runs ", theme.style(Meaning::Title)),
        Span::raw(format!("{} started · {} done · ", runs.started, runs.done)),
        Span::styled(
            format!("{} stalled ({} now)", runs.stalled, runs.stalled_now),
            if runs.stalled_now > 0 {
                theme.style(Meaning::Critical)
            } else {
                theme.style(Meaning::Normal)
            },
        ),
        Span::raw(format!(" · {} closed", runs.closed)),
    ];
    let mut slowest: Vec<_> = runs.transitions.iter().collect();
    slowest.sort_by_key(|t| std::cmp::Reverse(t.p90_seconds));
    let age = |s: Option<i64>| {
        s.map_or("-".into(), |s| {
            crate::domain::format_age(chrono::TimeDelta::seconds(s))
        })
    };
    for t in slowest {
        spans.push(Span::styled(
            format!(
                " · {}→{} p50 {} p90 {}",
                escape_text(&t.from),
                escape_text(&t.to),
                age(t.p50_seconds),
                age(t.p90_seconds)
            ),
            theme.style(Meaning::Muted),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The review's title line: its window, its scope, the windows [ and ] go round.
fn draw_title(f: &mut Frame, app: &App, theme: &Theme, title: Rect) {
    let days = REVIEW_WINDOWS[app.review.window];
    let windows: Vec<String> = REVIEW_WINDOWS
        .iter()
        .map(|d| {
            if *d == days {
                format!("[{d}d]")
            } else {
                format!("{d}d")
            }
        })
        .collect();
    let scope = &app.review.of;
    let of = match (&scope.workflow, &scope.destination) {
        (Some(w), _) => format!("workflow {}", escape_text(w)),
        (None, Some(d)) => format!("destination {}", escape_text(d)),
        _ => "all workflows".into(),
    };
    let loading = if app.review.seq.is_some() {
        format!(" {}", SPINNER[app.spinner % 4])
    } else {
        String::new()
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                format!(
                    " Review · last {days} day{} · {of}",
                    if days == 1 { "" } else { "s" }
                ),
                theme.style(Meaning::Title),
            ),
            Span::styled(
                format!("  [ ] {}{loading}", windows.join(" ")),
                theme.style(Meaning::Muted),
            ),
        ])),
        title,
    );
}

/// The duplicates line: cleaned up, conflicts, prevented; and the requests corrected.
fn draw_duplicates(f: &mut Frame, theme: &Theme, r: &Review, dupes: Rect) {
    let d = &r.duplicates;
    let mut spans = vec![
        Span::styled(" duplicates ", theme.style(Meaning::Title)),
        Span::raw(format!(
            "{} cleaned up · {} conflict{} · ",
            d.cleaned_up,
            d.conflicts,
            if d.conflicts == 1 { "" } else { "s" }
        )),
        Span::styled(
            format!("{} prevented", d.prevented),
            theme.style(Meaning::Good),
        ),
    ];
    // the explanation where the line has room for it
    if dupes.width >= 100 {
        spans.push(Span::styled(
            " (found done, not resent)",
            theme.style(Meaning::Muted),
        ));
    }
    spans.push(Span::raw(format!(" · {} corrected", r.corrections)));
    f.render_widget(Paragraph::new(Line::from(spans)), dupes);
}

fn draw_ages(f: &mut Frame, app: &App, theme: &Theme, r: &Review, area: Rect) {
    let (warn, critical) = app.age_thresholds;
    let bars: Vec<Bar> = r
        .age_buckets
        .iter()
        .zip(BUCKET_FROM)
        .map(|(b, from)| {
            let meaning = if from >= critical {
                Meaning::Critical
            } else if from >= warn {
                Meaning::Warning
            } else {
                Meaning::Accent
            };
            Bar::default()
                .value(b.count.max(0) as u64)
                .label(Line::from(b.bucket))
                .style(theme.style(meaning))
        })
        .collect();
    let inner = area.width.saturating_sub(2);
    let width = ((inner.saturating_sub(5)) / 6).clamp(1, 12);
    f.render_widget(
        BarChart::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" open {} by age ", r.open_exceptions)),
            )
            .data(BarGroup::default().bars(&bars))
            .bar_width(width)
            .bar_gap(1),
        area,
    );
}

/// Opened and resolved per day, side by side (a backlog that grows shows at a glance); when the
/// days do not fit as pairs of bars, two sparklines over the window.
fn draw_days(f: &mut Frame, theme: &Theme, r: &Review, area: Rect) {
    let inner = area.width.saturating_sub(2);
    let opened: u64 = r.per_day.iter().map(|d| d.opened.max(0) as u64).sum();
    let resolved: u64 = r.per_day.iter().map(|d| d.resolved.max(0) as u64).sum();
    let title = format!(" opened {opened} ▌ resolved {resolved} ▐ per day ");
    let fits = r.per_day.len() as u16 * 3 <= inner;
    if fits {
        let groups: Vec<BarGroup> = r
            .per_day
            .iter()
            .map(|d| {
                // the day of the month (the bars are narrow; the window says which month)
                let label = d.day.get(8..).unwrap_or(&d.day).to_string();
                BarGroup::default().label(Line::from(label)).bars(&[
                    Bar::default()
                        .value(d.opened.max(0) as u64)
                        .text_value(String::new())
                        .style(theme.style(Meaning::Warning)),
                    Bar::default()
                        .value(d.resolved.max(0) as u64)
                        .text_value(String::new())
                        .style(theme.style(Meaning::Good)),
                ])
            })
            .collect();
        let width = ((inner / r.per_day.len().max(1) as u16).saturating_sub(1) / 2).clamp(1, 4);
        let mut chart = BarChart::default()
            .block(Block::default().borders(Borders::ALL).title(title))
            .bar_width(width)
            .bar_gap(0)
            .group_gap(1);
        for g in groups {
            chart = chart.data(g);
        }
        f.render_widget(chart, area);
        return;
    }
    let block = Block::default().borders(Borders::ALL).title(title);
    let inside = block.inner(area);
    f.render_widget(block, area);
    let [o, rz] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(inside);
    let series = |f: &mut Frame, values: Vec<u64>, meaning: Meaning, at: Rect, name: &str| {
        let [label, line] =
            Layout::horizontal([Constraint::Length(9), Constraint::Min(1)]).areas(at);
        f.render_widget(Paragraph::new(name.to_string()), label);
        f.render_widget(
            Sparkline::default()
                .data(values)
                .style(theme.style(meaning)),
            line,
        );
    };
    series(
        f,
        r.per_day.iter().map(|d| d.opened.max(0) as u64).collect(),
        Meaning::Warning,
        o,
        "opened",
    );
    series(
        f,
        r.per_day.iter().map(|d| d.resolved.max(0) as u64).collect(),
        Meaning::Good,
        rz,
        "resolved",
    );
}

fn draw_table(
    f: &mut Frame,
    theme: &Theme,
    title: &str,
    lines: &std::collections::BTreeMap<String, GroupReview>,
    scroll: usize,
    area: Rect,
) {
    let age = |s: Option<i64>| {
        s.map_or("-".to_string(), |s| {
            format_age(chrono::TimeDelta::seconds(s))
        })
    };
    // scrolled by j/k; the title says what is above
    let shown = scroll.min(lines.len().saturating_sub(1));
    let title = if shown > 0 {
        format!("{title} (↑{shown})")
    } else {
        title.to_string()
    };
    let header = Row::new(vec![
        title,
        "open".into(),
        "oldest".into(),
        "unk".into(),
        "resolved".into(),
        "p50".into(),
        "p90".into(),
        "paused".into(),
    ])
    .style(theme.style(Meaning::Title));
    let rows: Vec<Row> = lines
        .iter()
        .skip(shown)
        .map(|(name, g)| {
            Row::new(vec![
                escape_text(name).into_owned(),
                g.open.to_string(),
                age(g.oldest_seconds),
                g.unknown.to_string(),
                g.resolved.to_string(),
                age(g.resolve_p50_seconds),
                age(g.resolve_p90_seconds),
                g.auto_pauses.to_string(),
            ])
        })
        .collect();
    let widths = [
        Constraint::Min(12),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(4),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(6),
    ];
    f.render_widget(Table::new(rows, widths).header(header), area);
}
