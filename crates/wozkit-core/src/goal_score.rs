//! Goal-based scores of one session: whether the dialogue met its user goal (success), how well
//! the wizard told what was asked (inform precision, recall and F1) and how many turns it took.
//! The rules, with a worked example, are in `docs/goal-scores.md`.
//!
//! [`score`] is a pure function of a session's events: it folds the log as the engine does
//! ([`GoalTrack`], the rules of *User goals* in `docs/engine-semantics.md`), so a log scores the
//! same whether or not its `turn_state` events are present, and never reads the database (the
//! selected rows are in the `db_selected` events). Grouping sessions into systems, intervals and
//! pass^k belong to the report (`wozkit-data`), not here.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde::Serialize;

use crate::database::{Row, value_text};
use crate::event::{Event, EventKind, Role};
use crate::goals::{Belief, EntryKind, Goal, GoalEntry, GoalTrack, SubGoal, items};

/// The goal-based scores of one session (see `docs/goal-scores.md`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalScore {
    /// Every constraint informed, every requested slot answered, and every sub-goal's selected
    /// row consistent with its constraints, at the end of the log.
    pub success: bool,
    /// Constraints of the goal, and how many were informed (expressed by the user or searched
    /// with by the wizard).
    pub constraints: u32,
    pub constraints_informed: u32,
    /// Requested slots of the goal, and how many the wizard answered.
    pub requests: u32,
    pub requests_answered: u32,
    /// Sub-goals, and how many have a selected row that meets all their constraints.
    pub subgoals: u32,
    pub subgoals_matched: u32,
    /// Slots of a sub-goal's selected row the wizard told that the sub-goal neither requested nor
    /// constrained (the false positives of the inform scores).
    pub unrequested_informs: u32,
    /// Answered requests over everything informed (answered + unrequested); `None` when the
    /// wizard informed nothing.
    pub inform_precision: Option<f64>,
    /// Answered requests over requests; `None` when the goal requests nothing.
    pub inform_recall: Option<f64>,
    /// The harmonic mean of precision and recall (0 when both are 0); `None` when either is.
    pub inform_f1: Option<f64>,
    /// Chat messages in the session.
    pub turns: u32,
    /// Chat messages up to the one after which the goal was met and stayed met to the end;
    /// `None` without success.
    pub turns_to_success: Option<u32>,
    /// The goal's [`fingerprint`]: sessions sharing it were given the same task.
    pub fingerprint: String,
}

/// The session's scores; `None` when it has no `goal_generated` event.
pub fn score(events: &[Event]) -> Option<GoalScore> {
    let goal = events.iter().find_map(|e| match &e.kind {
        EventKind::GoalGenerated { goal, .. } => Some(goal),
        _ => None,
    })?;
    let mut fold = Fold::new(goal.clone());
    for event in events {
        match &event.kind {
            EventKind::DbQueried { table, filters, .. } => {
                fold.track.on_query(table, filters, &fold.selected);
            }
            EventKind::DbSelected { table, key, row } => {
                // A message is scored against the rows selected when it was said.
                fold.flush();
                fold.selected.insert(table.clone(), row.clone());
                fold.keys.insert(table.clone(), key.clone());
                fold.track.on_select(table, key, row, &fold.selected);
            }
            EventKind::Message { role, text, .. } => {
                fold.track.on_message(*role, text, &fold.selected);
                fold.turns += 1;
                fold.flush();
                if *role == Role::Wizard {
                    fold.pending = Some(text.clone());
                }
                fold.check();
            }
            EventKind::TurnState {
                user_state,
                sys_state,
                ..
            } => {
                fold.logged = Some(user_state.clone());
                fold.names = sys_state.clone();
                fold.flush();
                fold.check();
            }
            _ => {}
        }
    }
    fold.flush();
    Some(fold.finish())
}

/// A goal's fingerprint: 16 hex digits of a 64-bit FNV-1a hash of the goal as JSON with the
/// requests' values cleared (the generated goal, whatever was told since). Two sessions share it
/// when they were given the same sub-goals, rows, constraints and requests, whichever seed drew
/// them.
pub fn fingerprint(goal: &Goal) -> String {
    let mut goal = goal.clone();
    for sg in &mut goal.subgoals {
        for r in &mut sg.requests {
            r.value.clear();
        }
    }
    let text = serde_json::to_string(&goal).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The state [`score`] folds from the log.
struct Fold {
    /// The engine's fold of the user and belief states.
    track: GoalTrack,
    /// The last logged user state, if the log has `turn_state` events: an entry it marks is
    /// satisfied even if the fold does not (a log whose searches were not kept).
    logged: Option<Vec<GoalEntry>>,
    /// The last logged belief, for the names of the selected results.
    names: Belief,
    /// The row selected last in each table, and its key.
    selected: IndexMap<String, Row>,
    keys: IndexMap<String, String>,
    /// (sub-goal id, column) the wizard told that the sub-goal neither requests nor constrains.
    unrequested: BTreeSet<(u32, String)>,
    /// The last wizard message, until its `turn_state` (whose belief names the results the
    /// message may name) or the next message.
    pending: Option<String>,
    turns: u32,
    /// The turn count from which the goal has been met, while it is.
    since: Option<u32>,
}

impl Fold {
    fn new(goal: Goal) -> Fold {
        Fold {
            track: GoalTrack::new(goal, None, None),
            logged: None,
            names: Belief::new(),
            selected: IndexMap::new(),
            keys: IndexMap::new(),
            unrequested: BTreeSet::new(),
            pending: None,
            turns: 0,
            since: None,
        }
    }

    /// Whether goal entry `i` is satisfied, by the fold or the logged user state.
    fn satisfied(&self, i: usize) -> bool {
        let fold = self.track.entries.get(i).is_some_and(|e| e.satisfied);
        let logged = self
            .logged
            .as_ref()
            .and_then(|l| l.get(i))
            .is_some_and(|e| e.satisfied);
        fold || logged
    }

    /// Counts the informs of the pending wizard message.
    fn flush(&mut self) {
        if let Some(text) = self.pending.take() {
            self.informs(&text);
        }
    }

    /// Records the slots of each sub-goal's selected row a wizard message tells (its text
    /// contains the value, case aside, as the engine's rule for answering a request) that the
    /// sub-goal neither requests nor constrains; the row's key and name are never counted.
    fn informs(&mut self, text: &str) {
        let lower = text.to_lowercase();
        for sg in &self.track.goal.subgoals {
            let Some(row) = self.selected.get(&sg.table) else {
                continue;
            };
            let key = self.keys.get(&sg.table).map(|k| k.trim().to_lowercase());
            let names: Vec<String> = self
                .names
                .get(&sg.domain)
                .map(|d| {
                    d.selected_results
                        .iter()
                        .map(|n| n.trim().to_lowercase())
                        .collect()
                })
                .unwrap_or_default();
            for (column, value) in row {
                let v = value_text(value).trim().to_lowercase();
                let asked = sg
                    .requests
                    .iter()
                    .chain(&sg.constraints)
                    .any(|s| s.slot == *column);
                if v.is_empty()
                    || asked
                    || key.as_deref() == Some(v.as_str())
                    || names.contains(&v)
                    || !lower.contains(&v)
                {
                    continue;
                }
                self.unrequested.insert((sg.id, column.clone()));
            }
        }
    }

    /// Counts of the entries satisfied by kind, and of the sub-goals matched, now.
    fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for (i, e) in self.track.entries.iter().enumerate() {
            let yes = u32::from(self.satisfied(i));
            match e.kind {
                EntryKind::Constraint => {
                    c.constraints += 1;
                    c.constraints_informed += yes;
                }
                EntryKind::Request => {
                    c.requests += 1;
                    c.requests_answered += yes;
                }
            }
        }
        let goal = &self.track.goal;
        c.subgoals = goal.subgoals.len() as u32;
        c.subgoals_matched = goal
            .subgoals
            .iter()
            .filter(|sg| matched(goal, sg, &self.selected))
            .count() as u32;
        c
    }

    /// Notes whether the goal is met after the current turn.
    fn check(&mut self) {
        if self.counts().success() {
            self.since.get_or_insert(self.turns);
        } else {
            self.since = None;
        }
    }

    fn finish(self) -> GoalScore {
        let c = self.counts();
        let success = c.success();
        let fp = self.unrequested.len() as u32;
        let tp = c.requests_answered;
        let ratio = |num: u32, den: u32| (den > 0).then(|| f64::from(num) / f64::from(den));
        let precision = ratio(tp, tp + fp);
        let recall = ratio(tp, c.requests);
        let f1 = precision.zip(recall).map(|(p, r)| {
            if p + r > 0.0 {
                2.0 * p * r / (p + r)
            } else {
                0.0
            }
        });
        GoalScore {
            success,
            constraints: c.constraints,
            constraints_informed: c.constraints_informed,
            requests: c.requests,
            requests_answered: c.requests_answered,
            subgoals: c.subgoals,
            subgoals_matched: c.subgoals_matched,
            unrequested_informs: fp,
            inform_precision: precision,
            inform_recall: recall,
            inform_f1: f1,
            turns: self.turns,
            // Met by a selection after the last message: met at the last turn.
            turns_to_success: success.then(|| self.since.unwrap_or(self.turns)),
            fingerprint: fingerprint(&self.track.goal),
        }
    }
}

#[derive(Default)]
struct Counts {
    constraints: u32,
    constraints_informed: u32,
    requests: u32,
    requests_answered: u32,
    subgoals: u32,
    subgoals_matched: u32,
}

impl Counts {
    fn success(&self) -> bool {
        self.constraints_informed == self.constraints
            && self.requests_answered == self.requests
            && self.subgoals_matched == self.subgoals
    }
}

/// Whether the row selected last in the sub-goal's table meets every constraint of the
/// sub-goal: a plain constraint when the row's value equals it (case aside; numbers by value; or
/// one item of a listed value), a range when the row's number lies in it, a reference when the
/// row's value is listed in the referenced sub-goal's selected row. No selection: not matched.
pub fn matched(goal: &Goal, sg: &SubGoal, selected: &IndexMap<String, Row>) -> bool {
    let Some(row) = selected.get(&sg.table) else {
        return false;
    };
    sg.constraints.iter().all(|c| {
        let have = cell(row, &c.slot);
        if let Some(r) = &c.reference {
            let listing = goal
                .subgoals
                .iter()
                .find(|other| other.id == r.subgoal)
                .and_then(|other| selected.get(&other.table))
                .map(|other| cell(other, &r.column));
            listing.is_some_and(|l| items(&l).iter().any(|i| same(i, &have)))
        } else if let Some(g) = &c.range {
            have.trim().parse::<f64>().is_ok_and(|x| g.holds(x))
        } else {
            same(&have, &c.value) || items(&have).iter().any(|i| same(i, &c.value))
        }
    })
}

/// Equal as text (trimmed, case aside) or as numbers; an empty value equals nothing.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() || b.is_empty() {
        return false;
    }
    a.to_lowercase() == b.to_lowercase()
        || a.parse::<f64>()
            .ok()
            .zip(b.parse::<f64>().ok())
            .is_some_and(|(x, y)| x == y)
}

fn cell(row: &Row, column: &str) -> String {
    row.get(column).map(value_text).unwrap_or_default()
}
