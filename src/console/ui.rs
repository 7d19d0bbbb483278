//! Drawing: a pure function of the app state. Never touches the database; every text that came
//! from the database goes through `escape_text` before it reaches a cell.

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, Wrap};

use super::app::{App, Focus, FormStep, Mode, View};
use super::keymap::KEYMAP;
use super::theme::{Meaning, Theme};
use crate::domain::{State, escape_text, format_age};
use crate::ledger::OperationView;

pub(super) const SPINNER: [&str; 4] = ["|", "/", "-", "\\"];

fn esc(s: &str) -> String {
    escape_text(s).into_owned()
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let area = f.area();
    let detail_height = if area.height >= 30 {
        area.height / 2 - 2
    } else {
        (area.height.saturating_sub(6)) / 2
    };
    // a status too long for its line (a refusal, a lookup's answer) is shown whole: it wraps
    // onto the footer's line until it clears (SPEC 13)
    let long_status = app.bulk.is_none()
        && !matches!(app.mode, Mode::Filter)
        && app
            .status
            .as_ref()
            .is_some_and(|(text, _)| esc(text).chars().count() + 1 > area.width as usize);
    let status_height = if long_status { 2 } else { 1 };
    let [header, tabs, list, detail, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(detail_height),
        Constraint::Length(status_height),
        Constraint::Length(2 - status_height),
    ])
    .areas(area);
    draw_header(f, app, theme, header);
    draw_tabs(f, app, theme, tabs);
    if app.view == View::Review {
        super::review::draw(f, app, theme, list.union(detail));
    } else if app.view == View::Activity && app.focus == Focus::Detail {
        draw_detail(f, app, theme, list.union(detail));
    } else if app.view == View::Activity {
        draw_activity(f, app, theme, list.union(detail));
    } else if app.detail_full && app.focus == Focus::Detail {
        draw_detail(f, app, theme, list.union(detail));
    } else {
        draw_list(f, app, theme, list);
        draw_detail(f, app, theme, detail);
    }
    draw_status(f, app, theme, status);
    draw_footer(f, app, theme, footer);
    match &app.mode {
        Mode::Help => draw_help(f, app, theme, area),
        Mode::Form(_) => draw_form(f, app, theme, area),
        _ => {}
    }
}

/// The header's right side at `level` 0 (words in full) to 3 (shortest): it abbreviates before it
/// drops anything (SPEC 13: at 80 columns it still holds the filter and its count, the
/// exceptions, the unknown ones, the oldest age, what is paused and the dispatcher's health).
/// The filter's text is cut last: to `filter_room` characters when given (with `…`).
fn header_right<'a>(
    app: &App,
    theme: &Theme,
    level: u8,
    filter_room: Option<usize>,
) -> Vec<Span<'a>> {
    let mut right: Vec<Span> = Vec::new();
    let sep = if level < 2 { " · " } else { "·" };
    // a filter that is on says so, itself, with how many of the view it keeps
    if let Some(text) = shown_filter(app) {
        let of = match (app.filter_count, view_count(app, app.view)) {
            (Some(n), Some(m)) => format!("{n} of {m}"),
            (Some(n), None) => format!("{n}"),
            _ => format!("{} shown", app.rows.len()),
        };
        let text = match filter_room {
            Some(room) => cut_text(&text, room),
            None => text,
        };
        let text = if level == 0 {
            format!("filter: {text} {of}")
        } else {
            format!("/{text} {of}")
        };
        right.push(Span::styled(text, theme.style(Meaning::Accent)));
        right.push(Span::raw(sep));
    }
    if !app.marks.is_empty() {
        right.push(Span::styled(
            format!("{} marked", app.marks.len()),
            theme.style(Meaning::Accent),
        ));
        right.push(Span::raw(sep));
    }
    if !app.online {
        right.push(Span::styled(
            if level < 2 {
                "DATABASE UNREACHABLE"
            } else {
                "DB DOWN"
            },
            theme.style(Meaning::Critical),
        ));
        right.push(Span::raw(sep));
    }
    if let Some(s) = &app.header.stats {
        let unknown = s.by_state.get(&State::Unknown).copied().unwrap_or(0);
        let (exc, unk, old) = match level {
            0 => ("exceptions", "unknown", "oldest "),
            1 => ("exc", "unk", "oldest "),
            _ => ("exc", "unk", "old "),
        };
        right.push(Span::styled(
            format!("{} {exc}", s.exceptions),
            theme.style(Meaning::Title),
        ));
        right.push(Span::raw(format!("{sep}{unknown} {unk}")));
        if let Some(secs) = s.oldest_exception_seconds {
            // as old as it is now, not as it was when the header was read
            let since = app
                .header
                .at
                .map_or(0, |at| (app.now - at).num_seconds().max(0));
            let secs = secs + since;
            right.push(Span::raw(format!("{sep}{old}")));
            let age = format_age(TimeDelta::seconds(secs));
            let age = if level < 2 { age } else { age.replace(' ', "") };
            right.push(Span::styled(age, age_style(app, theme, secs)));
        }
        // paused workflows by name, destinations as `dest:NAME` (the filter's spelling)
        let paused: Vec<String> = s
            .paused_workflows
            .iter()
            .cloned()
            .chain(s.paused_destinations.iter().map(|d| format!("dest:{d}")))
            .collect();
        if !paused.is_empty() {
            let paused = if level < 3 {
                format!(
                    "PAUSED: {}",
                    esc(&paused.join(if level < 2 { ", " } else { "," }))
                )
            } else {
                format!("PAUSED {}", paused.len())
            };
            right.push(Span::raw(sep));
            right.push(Span::styled(paused, theme.style(Meaning::Warning)));
        }
    }
    let dispatcher = if level == 0 { "dispatcher" } else { "disp" };
    match app.header.dispatcher_seen {
        Some(secs) if secs <= 10 => {
            right.push(Span::raw(sep));
            right.push(Span::styled(
                format!("{dispatcher} ok"),
                theme.style(Meaning::Good),
            ));
        }
        Some(secs) => {
            right.push(Span::raw(sep));
            right.push(Span::styled(
                format!(
                    "{dispatcher} silent {}",
                    format_age(TimeDelta::seconds(secs)).replace(' ', "")
                ),
                theme.style(Meaning::Warning),
            ));
        }
        None => {}
    }
    right.push(Span::raw(if app.loading {
        format!(" {}", SPINNER[app.spinner % 4])
    } else {
        "  ".into()
    }));
    right
}

/// The filter as the header shows it (escaped), when one is on in a list view.
fn shown_filter(app: &App) -> Option<String> {
    let text = app.filter.value().trim();
    (!text.is_empty() && app.view != View::Activity).then(|| esc(text))
}

/// `text` in at most `room` characters, ending in `…` when cut.
fn cut_text(text: &str, room: usize) -> String {
    if text.chars().count() <= room {
        return text.to_string();
    }
    let mut out: String = text.chars().take(room.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn draw_header(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let width = area.width as usize;
    let spans_width = |spans: &[Span]| spans.iter().map(|s| s.width()).sum::<usize>();
    let fits = |spans: &[Span], left: usize| spans_width(spans) + left + 2 <= width;
    let with_operator = " settle · ".len() + app.operator.chars().count();
    // The right side gives way first, down to what matters most; then the left side; the
    // filter's own text is cut last of all.
    let right = (0..4)
        .map(|d| header_right(app, theme, d, None))
        .find(|r| fits(r, with_operator))
        .or_else(|| {
            (0..4)
                .map(|d| header_right(app, theme, d, None))
                .find(|r| fits(r, " settle".len()))
        })
        .unwrap_or_else(|| {
            let text = shown_filter(app).map_or(0, |t| t.chars().count());
            let rest = spans_width(&header_right(app, theme, 3, Some(0)));
            let room = (width + 1).saturating_sub(rest + " settle".len() + 2);
            header_right(app, theme, 3, Some(room.min(text)))
        });
    let right_width: usize = right.iter().map(|s| s.width()).sum();
    let candidates = [
        format!(" settle · {} · {}", esc(&app.database), esc(&app.operator)),
        format!(" settle · {}", esc(&app.operator)),
        " settle".to_string(),
    ];
    let left = candidates
        .iter()
        .find(|l| l.chars().count() + 2 + right_width <= width)
        .cloned()
        .unwrap_or_else(|| candidates[2].clone());
    let left_width = left.chars().count() as u16;
    let [l, r] =
        Layout::horizontal([Constraint::Length(left_width), Constraint::Min(0)]).areas(area);
    f.render_widget(Paragraph::new(left).style(theme.style(Meaning::Title)), l);
    f.render_widget(
        Paragraph::new(Line::from(right)).alignment(ratatui::layout::Alignment::Right),
        r,
    );
}

fn age_style(app: &App, theme: &Theme, secs: i64) -> Style {
    let (warn, critical) = app.age_thresholds;
    if secs >= critical {
        theme.style(Meaning::Critical)
    } else if secs >= warn {
        theme.style(Meaning::Warning)
    } else {
        theme.style(Meaning::Normal)
    }
}

/// How many items a view holds, as the tabs show it.
fn view_count(app: &App, v: View) -> Option<i64> {
    let s = app.header.stats.as_ref();
    let count = |states: &[State]| -> Option<i64> {
        s.map(|s| {
            states
                .iter()
                .map(|st| s.by_state.get(st).copied().unwrap_or(0))
                .sum()
        })
    };
    match v {
        View::Exceptions => s.map(|s| s.exceptions),
        View::Mine => s.map(|_| app.header.mine),
        View::InProgress => count(&[State::Pending, State::InFlight, State::RetryWait]),
        View::Closed => count(&[State::Succeeded, State::Closed]),
        View::Activity | View::Review => None,
    }
}

fn draw_tabs(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let sort = (app.sort != crate::ledger::Sort::Age || app.reverse)
        .then(|| format!("sort: {} {}", app.sort.label(), sorted_column(app).1));
    let labels = |short: bool| -> Vec<String> {
        View::ALL
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let title = match (short, v) {
                    (true, View::Exceptions) => "Exc",
                    (true, View::InProgress) => "Prog",
                    (true, View::Activity) => "Act",
                    (true, View::Review) => "Rev",
                    _ => v.title(),
                };
                match view_count(app, *v) {
                    Some(n) => format!("[{} {title} {n}]", i + 1),
                    None => format!("[{} {title}]", i + 1),
                }
            })
            .collect()
    };
    // the sort label keeps its place: the tabs shorten their titles first
    let width = |l: &[String]| {
        1 + l.iter().map(|t| t.chars().count() + 1).sum::<usize>()
            + sort.as_ref().map_or(0, |s| s.chars().count())
    };
    let full = labels(false);
    let tabs = if width(&full) <= area.width as usize {
        full
    } else {
        labels(true)
    };
    let mut spans = vec![Span::raw(" ")];
    for (v, label) in View::ALL.iter().zip(tabs) {
        let style = if *v == app.view {
            theme.style(Meaning::Selected)
        } else {
            theme.style(Meaning::Normal)
        };
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    if let Some(sort) = sort {
        spans.push(Span::styled(sort, theme.style(Meaning::Accent)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Which columns fit: age, state, destination and key always (SPEC 13: every row at 80
/// columns), then the claim and the workflow while the next step keeps 30 columns.
fn columns(width: u16, marking: bool) -> Vec<(&'static str, u16)> {
    let mut essential = vec![("AGE", 7), ("STATE", 10), ("DEST", 9), ("KEY", 16)];
    if marking {
        essential.insert(0, ("", 1));
    }
    let optional = [("CLAIM", 8), ("WORKFLOW/STEP", 24)];
    let min_next = 30u16;
    let used = |c: &[(&str, u16)]| c.iter().map(|(_, w)| w + 1).sum::<u16>();
    let mut chosen = essential;
    for o in optional {
        if used(&chosen) + o.1 + 1 + min_next <= width {
            chosen.push(o);
        }
    }
    // keep the SPEC's order: AGE STATE WORKFLOW/STEP DEST KEY CLAIM
    let order = ["", "AGE", "STATE", "WORKFLOW/STEP", "DEST", "KEY", "CLAIM"];
    chosen.sort_by_key(|(n, _)| order.iter().position(|o| o == n));
    let next = width.saturating_sub(used(&chosen));
    chosen.push(("SAFE NEXT STEP", next));
    chosen
}

/// A cell's text within its width: what does not fit ends in `…`.
fn fit(text: String, width: u16) -> String {
    let width = width as usize;
    if text.chars().count() <= width {
        return text;
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

fn cell(v: &OperationView, name: &str, app: &App) -> String {
    match name {
        "" if app.marks.contains(&v.key) => "✓".into(),
        "" => " ".into(),
        "AGE" => format_age(TimeDelta::seconds(v.age_seconds)),
        "STATE" => v.state.as_str().to_string(),
        "WORKFLOW/STEP" => esc(&format!("{}/{}", v.workflow, v.step)),
        "DEST" => esc(&v.destination),
        "KEY" => esc(&v.key),
        "CLAIM" => match &v.claimed_by {
            Some(c) if *c == app.operator => "you".into(),
            Some(c) => esc(c),
            None => "-".into(),
        },
        _ => esc(&v.next_step),
    }
}

fn state_style(theme: &Theme, s: State) -> Style {
    match s {
        State::Unknown | State::Conflict => theme.style(Meaning::Critical),
        State::Rejected | State::Failed => theme.style(Meaning::Warning),
        State::Succeeded => theme.style(Meaning::Good),
        State::Closed => theme.style(Meaning::Muted),
        _ => theme.style(Meaning::Accent),
    }
}

/// The column the list is sorted by, and the arrow its title and the tabs' sort label carry.
fn sorted_column(app: &App) -> (&'static str, &'static str) {
    use crate::ledger::Sort;
    let column = match app.sort {
        Sort::Age => "AGE",
        Sort::State => "STATE",
        Sort::Workflow => "WORKFLOW/STEP",
        Sort::Destination => "DEST",
    };
    // which way the column's values run down the list: oldest first is ages falling
    let falling = (app.sort == Sort::Age) != app.reverse;
    (column, if falling { "↓" } else { "↑" })
}

fn draw_list(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let cols = columns(area.width, !app.marks.is_empty());
    let (sorted, arrow) = sorted_column(app);
    let header = Row::new(cols.iter().map(|(n, _)| {
        if *n == sorted {
            format!("{n} {arrow}")
        } else {
            n.to_string()
        }
    }))
    .style(theme.style(Meaning::Muted));
    let body_height = area.height.saturating_sub(1) as usize;
    let start = app
        .selected
        .saturating_sub(body_height.saturating_sub(1))
        .min(app.rows.len());
    let rows = app
        .rows
        .iter()
        .enumerate()
        .skip(start)
        .take(body_height)
        .map(|(i, v)| {
            let cells = cols.iter().map(|(name, width)| {
                let text = fit(cell(v, name, app), *width);
                let style = match *name {
                    "STATE" => state_style(theme, v.state),
                    "AGE" if v.state.is_exception() || v.exception_since.is_some() => {
                        age_style(app, theme, v.age_seconds)
                    }
                    "" => theme.style(Meaning::Accent),
                    _ => Style::default(),
                };
                ratatui::widgets::Cell::from(text).style(style)
            });
            let row = Row::new(cells);
            let changed = app.changed.contains_key(&v.key);
            if i == app.selected && app.focus == Focus::List && changed {
                // the selection keeps its look; the change shows as bold and underlined
                row.style(theme.style(Meaning::Selected).add_modifier(
                    ratatui::style::Modifier::BOLD | ratatui::style::Modifier::UNDERLINED,
                ))
            } else if i == app.selected && app.focus == Focus::List {
                row.style(theme.style(Meaning::Selected))
            } else if changed {
                row.style(theme.style(Meaning::Changed))
            } else {
                row
            }
        });
    let widths: Vec<Constraint> = cols.iter().map(|(_, w)| Constraint::Length(*w)).collect();
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    f.render_widget(table, area);
    if app.rows.is_empty() {
        let text = if !app.loaded_once {
            format!("{} loading…", SPINNER[app.spinner % 4])
        } else if !app.filter.value().is_empty() {
            "Nothing matches the filter (Esc clears it).".to_string()
        } else if app.view == View::Exceptions {
            "No exceptions: nothing needs a person right now.".to_string()
        } else {
            "Nothing here.".to_string()
        };
        let y = area.y + 1.min(area.height.saturating_sub(1));
        f.render_widget(
            Paragraph::new(format!(" {text}")).style(theme.style(Meaning::Muted)),
            Rect {
                y,
                height: 1,
                ..area
            },
        );
    }
}

fn draw_detail(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // a list's selected row, or the operation Activity opened
    let subject = match app.view {
        View::Activity => app.detail.as_ref().map(|d| &d.op),
        _ => app.selected_row(),
    };
    let title = match subject {
        Some(v) => format!(" {} ", esc(&v.key)),
        None => String::new(),
    };
    let border = if app.focus == Focus::Detail {
        theme.style(Meaning::Accent)
    } else {
        theme.style(Meaning::Muted)
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(title)
        .border_style(border);
    let Some(row) = subject else {
        f.render_widget(block, area);
        return;
    };
    let label = |s: &'static str| Span::styled(format!("{s:<9}"), theme.style(Meaning::Muted));
    let mut lines: Vec<Line> = Vec::new();
    // the detail's next step names what to search the destination by (when it is loaded)
    let next = app
        .detail
        .as_ref()
        .filter(|d| d.op.key == row.key)
        .map_or(&row.next_step, |d| &d.op.next_step);
    lines.push(Line::from(vec![
        label("next"),
        Span::styled(esc(next), theme.style(Meaning::Title)),
    ]));
    // a lead's reveal: on this pane only, until it closes (SPEC 8)
    if let Some((key, path, value)) = &app.revealed
        && *key == row.key
    {
        lines.push(Line::from(vec![
            label("revealed"),
            Span::styled(
                format!("{} = {}", esc(path), esc(value)),
                theme.style(Meaning::Warning),
            ),
            Span::styled(
                "  (this pane only; the reveal is in the history)",
                theme.style(Meaning::Muted),
            ),
        ]));
    }
    let mut state = vec![
        label("state"),
        Span::styled(
            row.state.as_str().to_string(),
            state_style(theme, row.state),
        ),
    ];
    if let Some(r) = &row.reason {
        state.push(Span::raw(format!(" ({})", esc(r))));
    }
    state.push(Span::raw(format!(
        " · {}/{} → {} {}",
        esc(&row.workflow),
        esc(&row.step),
        esc(&row.destination),
        esc(&row.action)
    )));
    lines.push(Line::from(state));
    if let Some(by) = &row.claimed_by {
        let until = row
            .claim_expires_at
            .map(|t| t.format("%H:%M UTC").to_string())
            .unwrap_or_default();
        lines.push(Line::from(vec![
            label("claim"),
            Span::raw(format!("{} until {until}", esc(by))),
        ]));
    }
    // SPEC 13: what a person acts on first: the error, the claim, the latest notes, the
    // resolution; then the attempts, the payload and the history
    if let Some(e) = row
        .last_error
        .as_ref()
        .filter(|e| row.reason.as_ref() != Some(*e))
    {
        lines.push(Line::from(vec![label("error"), Span::raw(esc(e))]));
    }
    match (&row.resolution, &row.superseded_by) {
        (Some(_), Some(k)) => lines.push(Line::from(vec![
            label("closed"),
            Span::raw(format!("superseded by {}", esc(k))),
        ])),
        (Some(r), None) => lines.push(Line::from(vec![
            label("closed"),
            Span::raw(r.as_str().replace('_', " ")),
        ])),
        _ => {}
    }
    if let Some(r) = &row.reference {
        lines.push(Line::from(vec![label("ref"), Span::raw(esc(r))]));
    }
    match app.detail.as_ref().filter(|d| d.op.key == row.key) {
        None => lines.push(Line::from(Span::styled(
            format!("{} loading…", SPINNER[app.spinner % 4]),
            theme.style(Meaning::Muted),
        ))),
        Some(d) => {
            let notes: Vec<String> = d
                .history
                .iter()
                .rev()
                .filter(|e| e.kind == "note")
                .filter_map(|e| {
                    let text = e.detail.get("text")?.as_str()?;
                    Some(format!(
                        "{} {}: {}",
                        e.at.format("%m-%d %H:%M"),
                        esc(&e.actor),
                        esc(text)
                    ))
                })
                .take(2)
                .collect();
            for (i, n) in notes.into_iter().enumerate() {
                lines.push(Line::from(vec![
                    if i == 0 {
                        label("notes")
                    } else {
                        Span::raw(" ".repeat(9))
                    },
                    Span::raw(n),
                ]));
            }
            if d.attempt_log.is_empty() {
                lines.push(Line::from(vec![label("attempts"), Span::raw("none yet")]));
            }
            for (i, a) in d.attempt_log.iter().enumerate() {
                let mut text = format!(
                    "#{} {} {}",
                    a.n,
                    a.started_at.format("%m-%d %H:%M"),
                    a.outcome.map_or("in flight", |o| o.as_str())
                );
                if let Some(s) = a.http_status {
                    text.push_str(&format!(" HTTP {s}"));
                }
                if let Some(r) = &a.reference {
                    text.push_str(&format!(" ref {}", esc(r)));
                }
                if let Some(e) = &a.error {
                    text.push_str(&format!(": {}", esc(e)));
                }
                lines.push(Line::from(vec![
                    if i == 0 {
                        label("attempts")
                    } else {
                        Span::raw(" ".repeat(9))
                    },
                    Span::raw(text),
                ]));
            }
            let payload = serde_json::to_string_pretty(&d.payload).unwrap_or_default();
            for (i, l) in payload.lines().enumerate() {
                lines.push(Line::from(vec![
                    if i == 0 {
                        label("payload")
                    } else {
                        Span::raw(" ".repeat(9))
                    },
                    Span::raw(esc(l)),
                ]));
            }
            if let Some(p) = &d.conflicting_payload {
                lines.push(Line::from(vec![
                    label("changed"),
                    Span::styled(esc(&p.to_string()), theme.style(Meaning::Warning)),
                ]));
            }
            for (i, e) in d.history.iter().enumerate() {
                let mut text = format!(
                    "{} {} {}",
                    e.at.format("%m-%d %H:%M"),
                    esc(&e.actor),
                    esc(&e.kind)
                );
                if let (Some(a), Some(b)) = (&e.from_state, &e.to_state)
                    && a != b
                {
                    text.push_str(&format!(" {a}→{b}"));
                }
                if let Some(note) = e
                    .detail
                    .get("text")
                    .or_else(|| e.detail.get("note"))
                    .and_then(|v| v.as_str())
                {
                    text.push_str(&format!(": {}", esc(note)));
                }
                lines.push(Line::from(vec![
                    if i == 0 {
                        label("history")
                    } else {
                        Span::raw(" ".repeat(9))
                    },
                    Span::raw(text),
                ]));
            }
        }
    }
    // scrolling stops at the end: the last lines stay in view, never a blank pane
    let last = (lines.len() as u16).saturating_sub(area.height.saturating_sub(1).max(1));
    let p = Paragraph::new(Text::from(lines))
        .block(block)
        .scroll((app.detail_scroll.min(last), 0))
        .wrap(Wrap { trim: false });
    f.render_widget(p, area);
}

fn draw_activity(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // narrow: the event's kind alone; wide: with its state change
    let wide = area.width >= 120;
    let shown = if app.automation {
        "DETAIL · +automation"
    } else {
        "DETAIL · people only"
    };
    let header =
        Row::new(["TIME", "ACTOR", "EVENT", "SUBJECT", shown]).style(theme.style(Meaning::Muted));
    let body = area.height.saturating_sub(1) as usize;
    let start = app.selected.saturating_sub(body.saturating_sub(1));
    let (event_width, subject_width) = if wide { (30, 24) } else { (15, 19) };
    let widths = [
        Constraint::Length(11),
        Constraint::Length(10),
        Constraint::Length(event_width),
        Constraint::Length(subject_width),
        Constraint::Min(10),
    ];
    let detail_width = area
        .width
        .saturating_sub(11 + 10 + event_width + subject_width + 4);
    let rows = app
        .activity
        .iter()
        .enumerate()
        .skip(start)
        .take(body)
        .map(|(i, e)| {
            let event = match (&e.from_state, &e.to_state) {
                (Some(a), Some(b)) if a != b && wide => format!("{} {a}→{b}", esc(&e.kind)),
                _ => esc(&e.kind),
            };
            let cells = vec![
                e.at.format("%m-%d %H:%M").to_string(),
                fit(esc(&e.actor), 10),
                fit(event, event_width),
                fit(esc(e.subject.as_deref().unwrap_or("-")), subject_width),
                fit(esc(&e.detail_words()), detail_width),
            ];
            let row = Row::new(cells);
            if i == app.selected {
                row.style(theme.style(Meaning::Selected))
            } else if e.is_automation() {
                row.style(theme.style(Meaning::Muted))
            } else {
                row
            }
        });
    f.render_widget(
        Table::new(rows, widths).header(header).column_spacing(1),
        area,
    );
    if app.activity.is_empty() && app.loaded_once {
        let text = if !app.filter.value().is_empty() {
            "No event matches the filter (Esc clears it)."
        } else if !app.automation {
            "No one has acted yet (a shows automation's events)."
        } else {
            "Nothing has happened yet."
        };
        f.render_widget(
            Paragraph::new(format!(" {text}")).style(theme.style(Meaning::Muted)),
            Rect {
                y: area.y + 1.min(area.height.saturating_sub(1)),
                height: 1,
                ..area
            },
        );
    }
}

/// A bulk action's progress as text (readable without colour): `[████░░░░] 45 of 180 ...`.
fn progress(b: &super::app::BulkRun, width: usize) -> String {
    let tail = format!(" {} of {} · {} · Esc stops", b.done, b.total, b.verb);
    let bar = width.saturating_sub(tail.chars().count() + 4).clamp(4, 40);
    let filled = (bar * b.done).checked_div(b.total).unwrap_or(0).min(bar);
    format!(
        " [{}{}]{tail}",
        "█".repeat(filled),
        "░".repeat(bar - filled)
    )
}

fn draw_status(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    if let Some(b) = &app.bulk {
        let text = progress(b, area.width as usize);
        f.render_widget(
            Paragraph::new(text).style(theme.style(Meaning::Accent)),
            area,
        );
        return;
    }
    let line = match (&app.mode, &app.status) {
        (Mode::Filter, _) => {
            // a term not whole yet (or wrong) is said; the list narrows by the others
            let problem = if app.view == View::Activity {
                crate::domain::filter::ActivityFilter::lenient(app.filter.value(), false).1
            } else {
                crate::domain::filter::Filter::lenient(app.filter.value()).1
            };
            let terms = if app.view == View::Activity {
                "▏  Enter keeps · Esc clears · actor:NAME kind:KIND words"
            } else {
                "▏  Enter keeps · Esc clears · state: wf: dest: claimed: age> key:"
            };
            let hint = match problem {
                Some(why) => {
                    Span::styled(format!("▏  {}", esc(&why)), theme.style(Meaning::Warning))
                }
                None => Span::styled(terms, theme.style(Meaning::Muted)),
            };
            Line::from(vec![
                Span::styled(" / ", theme.style(Meaning::Accent)),
                Span::raw(esc(app.filter.value())),
                hint,
            ])
        }
        (_, Some((text, error))) => Span::styled(
            format!(" {}", esc(text)),
            theme.style(if *error {
                Meaning::Critical
            } else {
                Meaning::Good
            }),
        )
        .into(),
        _ if !app.filter.value().is_empty() => Span::styled(
            format!(" filter: {} (Esc clears)", esc(app.filter.value())),
            theme.style(Meaning::Accent),
        )
        .into(),
        _ => Line::default(),
    };
    let line = Paragraph::new(line);
    // wrapped only where it was given the room (see `draw`)
    let line = if area.height > 1 {
        line.wrap(Wrap { trim: false })
    } else {
        line
    };
    f.render_widget(line, area);
}

fn draw_footer(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // The keys that apply now, in the keymap's order, as many as fit; `? help` and `q quit`
    // always keep their place at the end.
    let item =
        |b: &super::keymap::Binding| (b.keys, b.label, b.keys.chars().count() + b.label.len() + 3);
    let applicable: Vec<_> = KEYMAP
        .iter()
        .filter(|b| b.footer && app.applies(b))
        .collect();
    let tail: Vec<_> = applicable
        .iter()
        .filter(|b| matches!(b.keys, "?" | "q"))
        .map(|b| item(b))
        .collect();
    let mut room =
        (area.width as usize).saturating_sub(1 + tail.iter().map(|t| t.2).sum::<usize>());
    let mut shown = Vec::new();
    for b in applicable.iter().filter(|b| !matches!(b.keys, "?" | "q")) {
        let it = item(b);
        if it.2 <= room {
            room -= it.2;
            shown.push(it);
        }
    }
    shown.extend(tail);
    let mut spans = vec![Span::raw(" ")];
    for (keys, label, _) in shown {
        spans.push(Span::styled(keys, theme.style(Meaning::Accent)));
        spans.push(Span::raw(format!(" {label}  ")));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

fn draw_help(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // the box's title names it: every row of 24 is a key's
    let mut lines = Vec::new();
    for b in KEYMAP.iter().filter(|b| app.in_view(b)) {
        let applies = app.applies(b);
        let style = if applies {
            theme.style(Meaning::Normal)
        } else {
            theme.style(Meaning::Muted)
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:<12}", b.keys), theme.style(Meaning::Accent)),
            Span::styled(b.help, style),
        ]));
    }
    let last = if app.role.acts() {
        "Every action asks first (y/Enter confirms). Any key closes this help."
    } else {
        "You are a viewer: you read, and act on nothing. Any key closes this help."
    };
    lines.push(Line::from(Span::styled(last, theme.style(Meaning::Muted))));
    let r = centered(area, 76, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" keys ", theme.style(Meaning::Title))),
        ),
        r,
    );
}

/// A bulk preview, grouped (SPEC 16): what will be done, then what is left alone and why.
fn preview_lines<'a>(p: &crate::ledger::BulkPreview, verb: &str, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = vec![Line::from(Span::styled(
        format!("{verb} {}: {} will be done", p.matched, p.eligible.len()),
        theme.style(Meaning::Good),
    ))];
    if !p.refused.is_empty() {
        lines.push(Line::from("left alone:"));
    }
    for (why, keys) in &p.refused {
        lines.push(Line::from(Span::styled(
            format!("  {} {}", keys.len(), esc(why)),
            theme.style(Meaning::Warning),
        )));
    }
    lines
}

/// What a lookup answered, for its confirmation: one item's answer and what confirming does, or
/// marked items' answers in a tally (SPEC 16).
fn answer_lines<'a>(form: &super::app::Form, theme: &Theme) -> Vec<Line<'a>> {
    use crate::domain::LookupAnswer;
    match form.answers.as_slice() {
        [] => Vec::new(),
        [(_, dest, answer)] if form.bulk.is_none() => {
            let does = match answer {
                LookupAnswer::Found { reference, .. } => {
                    format!("reconcile as found, reference {}?", esc(reference))
                }
                _ => "reconcile as absent (confirmed not done)?".to_string(),
            };
            vec![
                Line::from(Span::styled(
                    esc(&answer.describe(dest)),
                    theme.style(Meaning::Good),
                )),
                Line::from(does),
            ]
        }
        answers => vec![Line::from(format!(
            "looked up {}: {}",
            answers.len(),
            super::app::lookup::tally(answers)
        ))],
    }
}

fn draw_form(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Mode::Form(form) = &app.mode else { return };
    let verb = match form.kind {
        super::app::ActionKind::Claim => "Claim",
        super::app::ActionKind::TakeOver => "Take over",
        super::app::ActionKind::Release => "Release",
        super::app::ActionKind::Reconcile => "Reconcile",
        super::app::ActionKind::Retry => "Retry",
        super::app::ActionKind::Close => "Close",
        super::app::ActionKind::Note => "Note on",
        super::app::ActionKind::Pause | super::app::ActionKind::Resume => match form.pausing {
            None => "Pause or resume, for",
            Some(crate::ledger::Pausable::Workflow)
                if form.kind == super::app::ActionKind::Pause =>
            {
                "Pause workflow"
            }
            Some(crate::ledger::Pausable::Workflow) => "Resume workflow",
            Some(_) if form.kind == super::app::ActionKind::Pause => "Pause destination",
            Some(_) => "Resume destination",
        },
        super::app::ActionKind::Reveal => "Reveal a field of",
        super::app::ActionKind::LookUp => "Look up",
    };
    let mut lines = vec![Line::from(Span::styled(
        format!("{verb} {}", esc(&form.target)),
        theme.style(Meaning::Title),
    ))];
    let mut summary = Vec::new();
    if let Some(found) = form.found {
        summary.push(if found {
            "found".to_string()
        } else {
            "absent (confirmed not done)".to_string()
        });
    }
    if let Some(r) = form.resolution {
        summary.push(format!("resolution: {}", r.as_str().replace('_', " ")));
    }
    if let Some(r) = &form.reference {
        summary.push(format!("reference {}", esc(r)));
    }
    if let Some(k) = &form.new_key {
        summary.push(format!("superseded by {}", esc(k)));
    }
    if let Some(t) = &form.text {
        summary.push(format!("\"{}\"", esc(t)));
    }
    if !summary.is_empty() {
        lines.push(Line::from(summary.join(" · ")));
    }
    match &form.step {
        FormStep::Choose(options) => {
            for (k, meaning) in options {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {k} "), theme.style(Meaning::Accent)),
                    Span::raw(esc(meaning)),
                ]));
            }
            lines.push(Line::from(Span::styled(
                "Esc cancels",
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::Text { label, .. } => {
            lines.push(Line::from(vec![
                Span::styled(format!("{label}: "), theme.style(Meaning::Muted)),
                Span::raw(esc(form.input.value())),
                Span::raw("▏"),
            ]));
            lines.push(Line::from(Span::styled(
                "Enter continues · Esc cancels",
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::Checking => {
            lines.extend(answer_lines(form, theme));
            lines.push(Line::from(Span::styled(
                format!("{} checking every item…", SPINNER[app.spinner % 4]),
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::LookingUp => {
            lines.push(Line::from(Span::styled(
                format!("{} asking its destination…", SPINNER[app.spinner % 4]),
                theme.style(Meaning::Muted),
            )));
            lines.push(Line::from(Span::styled(
                "Esc cancels",
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::Confirm => {
            lines.extend(answer_lines(form, theme));
            if let Some(p) = &form.preview {
                let verb = match form.kind {
                    super::app::ActionKind::LookUp if !form.answers.is_empty() => "reconcile",
                    _ => form.kind.verb(),
                };
                lines.extend(preview_lines(p, verb, theme));
                if let Some(pace) = form.pace {
                    let what = match form.kind {
                        super::app::ActionKind::LookUp => "lookups",
                        _ => "next attempts",
                    };
                    lines.push(Line::from(format!(
                        "paced: {what} {} ms apart",
                        pace.as_millis()
                    )));
                }
            }
            lines.push(Line::from(Span::styled(
                "y/Enter confirms · n/Esc cancels",
                theme.style(Meaning::Accent),
            )));
        }
    }
    if let Some(h) = &form.hint {
        lines.push(Line::from(Span::styled(
            esc(h),
            theme.style(Meaning::Warning),
        )));
    }
    let r = centered(area, 70, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL)),
        r,
    );
}
