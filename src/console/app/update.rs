//! What each message does to the console's state, and the moves through the list.

use chrono::Utc;

use super::messages::Place;
use crate::console::app::{CHANGED_FOR, MAX_ROWS, PAGE, View, seen};
use crate::console::{App, Effect, Msg};
use crate::ledger::{EventView, OperationDetail, OperationView, Page, Position};

/// How often the page and header are read again while they come from a replica.
const REPLICA_REREAD: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

impl App {
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Key(key) => self.on_key(key),
            Msg::Tick => tick(self),
            Msg::Resized { rows } => {
                self.viewport = usize::from(rows).max(1);
                Vec::new()
            }
            Msg::Page { seq, place, page } => self.on_page(seq, place, page),
            Msg::Detail { key, detail } => self.on_detail(key, detail),
            Msg::Header(h) => {
                match h {
                    Ok(h) => self.header = h,
                    Err(e) => self.went_offline(e),
                }
                Vec::new()
            }
            Msg::Activity { seq, events } => self.on_activity(seq, events),
            Msg::Acted(result) => {
                match result {
                    Ok(text) => self.status.set(text, false, self.now),
                    Err(text) => self.status.set(text, true, self.now),
                }
                self.refresh()
            }
            Msg::Changed => vec![Effect::Poll],
            Msg::Reviewed { seq, review } => {
                match self.review.on_answer(seq, review) {
                    Some(Ok(())) => self.online = true,
                    Some(Err(e)) => self.status.set(format!("the review: {e}"), true, self.now),
                    None => {}
                }
                Vec::new()
            }
            Msg::Stalled { seq, runs } => {
                let at_top = self.selected == 0;
                match self.stalled.on_list(seq, runs, at_top) {
                    true => self.run_effect(),
                    false => Vec::new(),
                }
            }
            Msg::Groups { seq, groups } => {
                if let Err(e) = self.groups.on_list(seq, groups) {
                    self.status.set(format!("groups: {e}"), true, self.now);
                }
                Vec::new()
            }
            Msg::Run { run, view } => {
                if let Err(e) = self.stalled.on_view(&run, view) {
                    self.status.set(e, true, self.now);
                }
                Vec::new()
            }
            Msg::Marked { seq, keys } => {
                let Some(marked) = self.marks.on_answer(seq, keys) else {
                    return Vec::new();
                };
                self.loading = false;
                let (text, error) = match marked {
                    Ok(n) => (
                        format!("{n} marked · the action keys act on all of them · A unmarks"),
                        false,
                    ),
                    Err(e) => (format!("could not mark: {e}"), true),
                };
                self.status.set(text, error, self.now);
                Vec::new()
            }
            Msg::Previewed(preview) => self.on_previewed(preview),
            Msg::BulkProgress { done, total } => {
                if let Some(b) = self.bulk.as_mut() {
                    (b.done, b.total) = (done, total);
                }
                Vec::new()
            }
            Msg::BulkDone(report) => self.on_bulk_done(report),
            Msg::UndoPreviewed(report) => super::undo::on_previewed(self, report),
            Msg::LookedUp(answers) => self.on_looked_up(answers),
            Msg::Revealed { key, path, value } => self.on_revealed(key, path, value),
            Msg::Counted { seq, count } => {
                if seq == self.count_seq {
                    self.filter_count = count.ok().flatten();
                }
                Vec::new()
            }
            Msg::Polled(result) => self.on_polled(result),
        }
    }

    pub(crate) fn on_detail(
        &mut self,
        key: String,
        detail: Result<Box<OperationDetail>, String>,
    ) -> Vec<Effect> {
        let opened = self.view == View::Activity && self.opened() == Some(key.as_str());
        if opened || self.selected_row().is_some_and(|r| r.key == key) {
            match detail {
                Ok(d) => {
                    if self
                        .detail
                        .as_ref()
                        .is_none_or(|old| old.op.key != d.op.key)
                    {
                        self.detail_scroll = 0;
                    }
                    self.detail = Some(*d);
                }
                Err(e) => self.status.set(e, true, self.now),
            }
        }
        Vec::new()
    }

    pub(crate) fn on_activity(
        &mut self,
        seq: u64,
        events: Result<Vec<EventView>, String>,
    ) -> Vec<Effect> {
        if seq == self.seq {
            self.loading = false;
            match events {
                Ok(ev) => {
                    self.activity = ev;
                    self.selected = self.selected.min(self.activity.len().saturating_sub(1));
                    self.loaded_once = true;
                }
                Err(e) => self.went_offline(e),
            }
        }
        Vec::new()
    }

    pub(crate) fn on_revealed(
        &mut self,
        key: String,
        path: String,
        value: Result<String, String>,
    ) -> Vec<Effect> {
        match value {
            Ok(v) => {
                self.status.set(
                    format!("{key}: {path} revealed; the reveal is audited"),
                    false,
                    self.now,
                );
                self.revealed = Some((key, path, v));
            }
            Err(e) => self.status.set(format!("refused: {e}"), true, self.now),
        }
        self.refresh()
    }

    pub(crate) fn on_polled(&mut self, result: Result<i64, String>) -> Vec<Effect> {
        match result {
            Ok(id) => {
                let back = !self.online;
                self.online = true;
                let changed = self.last_event.is_some_and(|old| old != id);
                self.last_event = Some(id);
                if back {
                    self.status.set("database reachable again", false, self.now);
                }
                if back || changed {
                    self.refresh()
                } else {
                    Vec::new()
                }
            }
            Err(e) => {
                self.went_offline(e);
                Vec::new()
            }
        }
    }

    pub(crate) fn went_offline(&mut self, e: String) {
        self.online = false;
        self.loading = false;
        self.status.set(
            format!("database unreachable: {e} (retrying; actions are off)"),
            true,
            self.now,
        );
    }

    pub(crate) fn on_page(
        &mut self,
        seq: u64,
        place: Place,
        page: Result<Page, String>,
    ) -> Vec<Effect> {
        if seq != self.seq {
            return Vec::new(); // a newer request superseded this one
        }
        self.loading = false;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                self.went_offline(e);
                return Vec::new();
            }
        };
        self.loaded_once = true;
        let before_key = self.selected_row().map(|r| r.key.clone());
        match place {
            Place::Replace { select_last } => {
                let before: std::collections::HashMap<&str, &OperationView> =
                    self.rows.iter().map(|r| (r.key.as_str(), r)).collect();
                let changed: Vec<String> = page
                    .items
                    .iter()
                    .filter(|r| {
                        before
                            .get(r.key.as_str())
                            .is_some_and(|b| seen(b) != seen(r))
                    })
                    .map(|r| r.key.clone())
                    .collect();
                for k in changed {
                    self.changed.insert(k, self.now);
                }
                self.rows = page.items;
                self.more_before = page.more_before;
                self.more_after = page.more_after;
                self.selected = if select_last {
                    self.rows.len().saturating_sub(1)
                } else if std::mem::take(&mut self.to_top) {
                    0
                } else {
                    before_key
                        .and_then(|k| self.rows.iter().position(|r| r.key == k))
                        .unwrap_or(self.selected)
                        .min(self.rows.len().saturating_sub(1))
                };
            }
            Place::Append => {
                self.more_after = page.more_after;
                self.rows.extend(page.items);
                if self.rows.len() > MAX_ROWS {
                    let drop = self.rows.len() - MAX_ROWS;
                    self.rows.drain(..drop);
                    self.selected = self.selected.saturating_sub(drop);
                    self.more_before = true;
                }
            }
            Place::Prepend => {
                self.more_before = page.more_before;
                let added = page.items.len();
                let mut rows = page.items;
                rows.append(&mut self.rows);
                self.rows = rows;
                self.selected += added;
                if self.rows.len() > MAX_ROWS {
                    self.rows.truncate(MAX_ROWS);
                    self.more_after = true;
                }
                self.selected = self
                    .selected
                    .saturating_sub(1)
                    .min(self.rows.len().saturating_sub(1));
            }
        }
        self.after_move()
    }

    /// After the selection moved: load the detail, and more rows when near an edge.
    pub(crate) fn after_move(&mut self) -> Vec<Effect> {
        let mut fx = Vec::new();
        // a revealed value never follows the selection to another item
        if self
            .revealed
            .as_ref()
            .is_some_and(|(k, _, _)| self.selected_row().is_none_or(|r| r.key != *k))
        {
            self.revealed = None;
        }
        let key = self.selected_row().map(|r| r.key.clone());
        match key {
            Some(k) if self.detail.as_ref().is_none_or(|d| d.op.key != k) => {
                fx.push(Effect::Detail { key: k })
            }
            Some(_) => {}
            None => self.detail = None,
        }
        if self.view != View::Activity && !self.loading {
            let edge = if self.more_after && self.selected + 5 >= self.rows.len() {
                self.rows
                    .last()
                    .map(|r| (Position::After(r.cursor.clone()), Place::Append))
            } else if self.more_before && self.selected == 0 {
                self.rows
                    .first()
                    .map(|r| (Position::Before(r.cursor.clone()), Place::Prepend))
            } else {
                None
            };
            if let Some((position, place)) = edge {
                let seq = self.next_seq();
                self.loading = true;
                fx.push(Effect::Page {
                    seq,
                    filter: self.list_filter(),
                    position,
                    limit: PAGE,
                    place,
                });
            }
        }
        fx
    }

    pub(crate) fn len(&self) -> usize {
        if self.view == View::Activity {
            self.activity.len()
        } else {
            self.rows.len()
        }
    }

    pub(crate) fn move_by(&mut self, delta: isize) -> Vec<Effect> {
        self.stalled.on = None;
        let len = self.len();
        if len == 0 {
            return Vec::new();
        }
        let target = (self.selected as isize + delta).clamp(0, len as isize - 1) as usize;
        let at_top = self.selected == 0 && delta < 0;
        self.selected = target;
        if at_top && self.more_before {
            return self.after_move();
        }
        self.after_move()
    }
}

/// A tick of the clock: the spinner, the ages, what expires; read again from a replica.
fn tick(app: &mut App) -> Vec<Effect> {
    app.spinner = app.spinner.wrapping_add(1);
    app.now = Utc::now();
    app.status.expire(app.now);
    let now = app.now;
    app.changed.retain(|_, at| now - *at < CHANGED_FOR);
    // read from a replica, a change told of at once may show there only later: the
    // page and the header are read again every few seconds
    match (app.header.replica_lag, app.header.at) {
        (Some(_), Some(at)) if now - at >= REPLICA_REREAD && !app.loading => {
            app.header.at = Some(now);
            app.refresh()
        }
        _ => Vec::new(),
    }
}
