//! The list of operations: its columns, fitted to the width, and the sorted one marked.

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Paragraph, Row, Table};

use crate::console::app::{App, Focus, View};
use crate::console::theme::SPINNER;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{age_style, esc, fit, state_style};
use crate::domain::format_age;
use crate::ledger::OperationView;

/// Which columns fit: age, state, destination and key always (manual: The console: every row at 80
/// columns), then the claim, the workflow and (where teams own workflows) the owner while the next
/// step keeps 30 columns. In view 2 (Mine) the claim is always there: it tells the items you
/// hold from your team's that nobody holds.
pub(super) fn columns(
    width: u16,
    marking: bool,
    owners: bool,
    claims: bool,
) -> Vec<(&'static str, u16)> {
    let mut essential = vec![("AGE", 7), ("STATE", 10), ("DEST", 9), ("KEY", 16)];
    if marking {
        essential.insert(0, ("", 1));
    }
    if claims {
        essential.push(("CLAIM", 5));
    }
    let mut optional = vec![("CLAIM", 8), ("WORKFLOW/STEP", 24)];
    optional.retain(|(n, _)| !(claims && *n == "CLAIM"));
    if owners {
        optional.push(("OWNER", 10));
    }
    let min_next = 30u16;
    let used = |c: &[(&str, u16)]| c.iter().map(|(_, w)| w + 1).sum::<u16>();
    let mut chosen = essential;
    for o in optional {
        if used(&chosen) + o.1 + 1 + min_next <= width {
            chosen.push(o);
        }
    }
    // keep the manual's order: AGE STATE WORKFLOW/STEP DEST KEY CLAIM
    let order = [
        "",
        "AGE",
        "STATE",
        "WORKFLOW/STEP",
        "DEST",
        "KEY",
        "CLAIM",
        "OWNER",
    ];
    chosen.sort_by_key(|(n, _)| order.iter().position(|o| o == n));
    let next = width.saturating_sub(used(&chosen));
    chosen.push(("SAFE NEXT STEP", next));
    chosen
}

pub(super) fn cell(v: &OperationView, name: &str, app: &App) -> String {
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
        "OWNER" => v.owner.as_deref().map_or("-".into(), esc),
        _ => esc(&v.next_step),
    }
}

/// A stalled run's cell (manual: Runs): KEY the run, DEST the step never recorded, age since it
/// stalled.
fn run_cell(r: &crate::ledger::RunSummary, name: &str, app: &App) -> String {
    match name {
        "" => " ".into(),
        "AGE" => format_age(app.now - r.since),
        "STATE" => "stalled".into(),
        "WORKFLOW/STEP" => esc(&format!("{} (run)", r.workflow)),
        "DEST" => esc(r.current_step.as_deref().unwrap_or("-")),
        "KEY" => esc(&r.run),
        "CLAIM" => match &r.claimed_by {
            Some(c) if *c == app.operator => "you".into(),
            Some(c) => esc(c),
            None => "-".into(),
        },
        "OWNER" => "-".into(),
        _ => esc(&r.next_step),
    }
}

/// The column the list is sorted by, and the arrow its title and the tabs' sort label carry.
pub(super) fn sorted_column(app: &App) -> (&'static str, &'static str) {
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

pub(super) fn draw_list(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let owners = app.rows.iter().any(|r| r.owner.is_some());
    let (marking, mine) = (!app.marks.is_empty(), app.view == View::Mine);
    let cols = columns(area.width, marking, owners, mine);
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
    // view 1's stalled runs stand above its operations (manual: Runs)
    let runs: &[crate::ledger::RunSummary] = if app.view == View::Exceptions {
        &app.stalled.runs
    } else {
        &[]
    };
    let chosen = app.stalled.on.unwrap_or(runs.len() + app.selected);
    let start = chosen
        .saturating_sub(body_height.saturating_sub(1))
        .min(runs.len() + app.rows.len());
    let run_rows = runs.iter().enumerate().map(|(i, r)| {
        let cells = cols.iter().map(|(name, width)| {
            let style = match *name {
                "STATE" => theme.style(Meaning::Critical),
                "AGE" => age_style(app, theme, (app.now - r.since).num_seconds()),
                _ => Style::default(),
            };
            ratatui::widgets::Cell::from(fit(run_cell(r, name, app), *width)).style(style)
        });
        let row = Row::new(cells);
        if app.stalled.on == Some(i) && app.focus == Focus::List {
            row.style(theme.style(Meaning::Selected))
        } else {
            row
        }
    });
    let op_rows = app.rows.iter().enumerate().map(|(i, v)| {
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
        let selected = app.stalled.on.is_none() && i == app.selected && app.focus == Focus::List;
        if selected && changed {
            // the selection keeps its look; the change shows as bold and underlined
            row.style(theme.style(Meaning::Selected).add_modifier(
                ratatui::style::Modifier::BOLD | ratatui::style::Modifier::UNDERLINED,
            ))
        } else if selected {
            row.style(theme.style(Meaning::Selected))
        } else if changed {
            row.style(theme.style(Meaning::Changed))
        } else {
            row
        }
    });
    let rows: Vec<Row> = run_rows
        .chain(op_rows)
        .skip(start)
        .take(body_height)
        .collect();
    let widths: Vec<Constraint> = cols.iter().map(|(_, w)| Constraint::Length(*w)).collect();
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    f.render_widget(table, area);
    if app.rows.is_empty() && runs.is_empty() {
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
