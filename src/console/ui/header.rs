//! The header (the counts, the filter, the dispatcher) and the view tabs.

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::{App, View};
use crate::console::theme::SPINNER;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{age_style, cut_text, esc};
use crate::console::ui::list::sorted_column;
use crate::domain::breaker::BreakerState;
use crate::domain::{State, format_age};

/// A replica's lag the header names, beyond this many seconds.
const LAG_SHOWN: i64 = 5;

/// The header's right side at `level` 0 (words in full) to 3 (shortest): it abbreviates before it
/// drops anything (manual: The console: at 80 columns it still holds the filter and its count, the
/// exceptions, the unknown ones, the oldest age, what is paused and the dispatcher's health).
/// The filter's text is cut last: to `filter_room` characters when given (with `…`).
pub(super) fn header_right<'a>(
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
    // the lists and counts come from a replica that is behind: say by how much
    if let Some(lag) = app.header.replica_lag.filter(|&s| s > LAG_SHOWN) {
        right.push(Span::styled(
            match level {
                0 | 1 => format!("replica {}s behind", lag),
                _ => format!("lag {}s", lag),
            },
            theme.style(Meaning::Warning),
        ));
        right.push(Span::raw(sep));
    }
    if let Some(stats) = &app.header.stats {
        stats_spans(app, theme, stats, level, sep, &mut right);
    }
    dispatcher_spans(app, theme, level, sep, &mut right);
    right.push(Span::raw(if app.loading {
        format!(" {}", SPINNER[app.spinner % 4])
    } else {
        "  ".into()
    }));
    right
}

/// The header's counts: exceptions, unknown, the oldest's age, what is paused.
pub(super) fn stats_spans<'a>(
    app: &App,
    theme: &Theme,
    s: &crate::ledger::Stats,
    level: u8,
    sep: &'static str,
    right: &mut Vec<Span<'a>>,
) {
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
    // a destination whose breaker is open: nothing is sent there but probes
    let down: Vec<String> = (s.breakers.iter())
        .filter(|b| b.is_down())
        .map(|b| {
            let name = esc(&b.destination);
            let since = app.header.at.map_or(0, |at| (app.now - at).num_seconds());
            let when = match (b.state, b.probe_in_seconds) {
                (_, Some(secs)) if secs - since > 0 => Some(secs - since),
                _ => None,
            };
            // held by a person; or a probe in some seconds, due (past its time: the next
            // dispatcher's round takes it), or under way
            let due = b.state == BreakerState::Open && !b.by_hand;
            match (level, when, b.by_hand, due) {
                (2.., ..) => name,
                (0, _, true, _) => format!("{name}, held by hand"),
                (0, Some(s), ..) => format!("{name}, probing in {s}s"),
                (0, None, _, true) => format!("{name}, probe due"),
                (0, None, ..) => format!("{name}, probing"),
                (_, _, true, _) => format!("{name} held"),
                (_, Some(s), ..) => format!("{name} probe {s}s"),
                (_, None, _, true) => format!("{name} probe due"),
                (_, None, ..) => format!("{name} probing"),
            }
        })
        .collect();
    if !down.is_empty() {
        let down = if level < 3 {
            format!("DOWN: {}", down.join(if level < 2 { "; " } else { "," }))
        } else {
            format!("DOWN {}", down.len())
        };
        right.push(Span::raw(sep));
        right.push(Span::styled(down, theme.style(Meaning::Warning)));
    }
    // a channel that cannot be reached: nobody is told until it answers
    if !s.notify_failing.is_empty() {
        let failing = if level < 3 {
            format!(
                "NOTIFY FAILING: {}",
                esc(&s.notify_failing.join(if level < 2 { ", " } else { "," }))
            )
        } else {
            format!("NOTIFY FAILING {}", s.notify_failing.len())
        };
        right.push(Span::raw(sep));
        right.push(Span::styled(failing, theme.style(Meaning::Warning)));
    }
}

/// Whether the dispatcher was seen lately (manual: The console).
pub(super) fn dispatcher_spans<'a>(
    app: &App,
    theme: &Theme,
    level: u8,
    sep: &'static str,
    right: &mut Vec<Span<'a>>,
) {
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
}

/// The filter as the header shows it (escaped), when one is on in a list view.
pub(super) fn shown_filter(app: &App) -> Option<String> {
    let text = app.filter.value().trim();
    (!text.is_empty() && app.view != View::Activity).then(|| esc(text))
}

pub(super) fn draw_header(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
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

/// How many items a view holds, as the tabs show it.
pub(super) fn view_count(app: &App, v: View) -> Option<i64> {
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

pub(super) fn draw_tabs(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
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
