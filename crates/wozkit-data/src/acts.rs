//! Adjudicated dialogue acts of turns (from the judgments of a `turn_acts` annotation study),
//! and the pass that writes them into a session's turns before a dataset export.
//!
//! **Adjudication.** For each labelled turn (an item `SESSION#TURN`), the counted judgments of
//! the item vote: an act is kept when more than half of them ticked it; an act ticked by exactly
//! half is not kept and is listed as tied. A slot-value pair is kept when its act is kept and
//! more than half of the judgments gave the same act, slot and value. Kept acts and pairs are in
//! name order, so the result does not depend on submission order.
//!
//! **Export.** [`TurnActs::apply`] rewrites the events of a stored session: after each message
//! with adjudicated acts it puts (or replaces) the format's turn annotation, holding the turn's
//! fields exactly as the format would write them, with the act field replaced:
//! - MultiWOZ 2.1 `dialog_act`: `{"Domain-Intent": [[slot, value], …]}`, `[["none", "none"]]`
//!   for an act without pairs;
//! - ConvLab-3 `dialogue_acts`: `{categorical: [], non-categorical: [{intent, domain, slot,
//!   value}…], binary: [{intent, domain, slot: ""}…]}` (acts without pairs are binary);
//! - CrossWOZ `dialog_act`: `[[intent, domain, slot, value], …]`, `[intent, domain, "none",
//!   "none"]` for an act without pairs; a general act is `["General", act, …]`, as the corpus
//!   writes `["General", "greet", "none", "none"]`.
//!
//! An act named `Domain-Intent` (MultiWOZ's style) is split at its first `-`; a bare act `intent`
//! is in the general domain (`general-intent` in MultiWOZ). The format files stay as they are:
//! the pass only writes annotations they already read back.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};
use wozkit_core::evaluation::{ActLabel, ActPair, parse_turn_item};
use wozkit_core::event::{Actor, EventKind, ItemPool, Judgment};

use crate::error::ExportError;
use crate::formats;
use crate::session::{Format, ImportedSession};
use crate::stored::StoredSession;

/// The adjudicated label of one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AdjudicatedActs {
    /// Acts ticked by more than half of the judgments, in name order.
    pub acts: Vec<String>,
    /// Pairs given by more than half of the judgments, under a kept act.
    pub pairs: Vec<ActPair>,
    /// Acts ticked by exactly half of the judgments (not kept).
    pub tied: Vec<String>,
    /// Judgments of the turn.
    pub of: usize,
}

/// The majority label of one turn from its annotators' labels (see the module documentation).
pub fn adjudicate_acts(labels: &[ActLabel]) -> AdjudicatedActs {
    let of = labels.len();
    let mut acts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut pairs: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    for label in labels {
        let mut own: Vec<&str> = label.acts.iter().map(String::as_str).collect();
        own.sort_unstable();
        own.dedup();
        for a in own {
            *acts.entry(a).or_default() += 1;
        }
        let mut own: Vec<(&str, &str, &str)> = label
            .pairs
            .iter()
            .map(|p| (p.act.as_str(), p.slot.as_str(), p.value.as_str()))
            .collect();
        own.sort_unstable();
        own.dedup();
        for p in own {
            *pairs.entry(p).or_default() += 1;
        }
    }
    let kept: Vec<String> = acts
        .iter()
        .filter(|(_, n)| 2 * **n > of)
        .map(|(a, _)| a.to_string())
        .collect();
    AdjudicatedActs {
        tied: acts
            .iter()
            .filter(|(_, n)| 2 * **n == of)
            .map(|(a, _)| a.to_string())
            .collect(),
        pairs: pairs
            .iter()
            .filter(|((act, _, _), n)| 2 * **n > of && kept.iter().any(|k| k == act))
            .map(|((act, slot, value), _)| ActPair {
                act: act.to_string(),
                slot: slot.to_string(),
                value: value.to_string(),
            })
            .collect(),
        acts: kept,
        of,
    }
}

/// The label a `turn_acts` judgment carries (its `acts` and `pairs` answers); `None` for other
/// judgments.
pub fn label_of(judgment: &Judgment) -> Option<ActLabel> {
    let acts = judgment.answers.get("acts")?.as_array()?;
    Some(ActLabel {
        acts: acts
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        pairs: judgment
            .answers
            .get("pairs")
            .and_then(|p| serde_json::from_value(p.clone()).ok())
            .unwrap_or_default(),
    })
}

/// Adjudicated acts by store session id, then turn index (the position of the message among
/// the session's messages, from 0).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnActs {
    pub sessions: BTreeMap<String, BTreeMap<usize, AdjudicatedActs>>,
}

impl TurnActs {
    /// Adjudicates the counted judgments (item pool, not surplus, not void) of `turn_acts`
    /// items among `judgments` (e.g. from [`crate::stored::span_judgments`], which reads any
    /// study's judgments).
    pub fn from_judgments(judgments: &[Judgment]) -> TurnActs {
        let mut labels: BTreeMap<(String, usize), Vec<ActLabel>> = BTreeMap::new();
        for j in judgments {
            if !j.counted || j.surplus || j.void || j.pool != ItemPool::Item {
                continue;
            }
            let (Some((session, turn)), Some(label)) = (parse_turn_item(&j.item), label_of(j))
            else {
                continue;
            };
            labels
                .entry((session.to_string(), turn))
                .or_default()
                .push(label);
        }
        let mut out = TurnActs::default();
        for ((session, turn), labels) in labels {
            out.sessions
                .entry(session)
                .or_default()
                .insert(turn, adjudicate_acts(&labels));
        }
        out
    }

    /// Whether no turn has a label.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Writes the adjudicated acts of `session`'s turns into its events for `format` (see the
    /// module documentation). Returns whether the session has any; formats without dialogue
    /// acts (Taskmaster-1, CRSArena, CRWIZ) are left as they are.
    pub fn apply(&self, format: Format, session: &mut StoredSession) -> Result<bool, ExportError> {
        let Some(turns) = self.sessions.get(&session.store_id) else {
            return Ok(false);
        };
        let Some((turns_key, text_key, speaker_key, act_key)) = layout(format) else {
            return Ok(false);
        };
        let view = session.dataset_view();
        let Some(record) = formats::record(format, &view, 0)? else {
            return Ok(false);
        };
        let positions = turn_positions(format, &view);
        drop(view);
        let written: Vec<Value> = record
            .get(turns_key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let turn_key = format.turn_key();
        let mut events = Vec::with_capacity(session.events.len() + turns.len());
        let mut message: Option<usize> = None;
        // The fields to write after the current message, until its annotation is met.
        let mut pending: Option<Map<String, Value>> = None;
        let flush = |events: &mut Vec<wozkit_core::event::Event>,
                     pending: &mut Option<Map<String, Value>>| {
            if let (Some(fields), Some(like)) = (pending.take(), events.last().cloned()) {
                let mut e = like;
                e.actor = Actor::System;
                e.kind = EventKind::Annotation {
                    key: turn_key.to_string(),
                    value: Value::Object(fields),
                };
                events.push(e);
            }
        };
        for event in session.events.drain(..) {
            match &event.kind {
                EventKind::Message { .. } => {
                    flush(&mut events, &mut pending);
                    let n = message.map_or(0, |m| m + 1);
                    message = Some(n);
                    if let (Some(acts), Some(position)) =
                        (turns.get(&n), positions.get(n).copied().flatten())
                    {
                        let mut fields = match written.get(position) {
                            Some(Value::Object(f)) => f.clone(),
                            _ => Map::new(),
                        };
                        fields.remove(text_key);
                        if let Some(k) = speaker_key {
                            fields.remove(k);
                        }
                        fields.insert(act_key.to_string(), acts_value(format, acts));
                        pending = Some(fields);
                    }
                    events.push(event);
                }
                EventKind::Annotation { key, .. } if key == turn_key && pending.is_some() => {
                    let mut e = event;
                    if let Some(fields) = pending.take() {
                        e.kind = EventKind::Annotation {
                            key: turn_key.to_string(),
                            value: Value::Object(fields),
                        };
                    }
                    events.push(e);
                }
                _ => events.push(event),
            }
        }
        flush(&mut events, &mut pending);
        session.events = events;
        Ok(true)
    }
}

/// The written turn of each message of `view` in `format` (its turn position; none when the
/// shape left it out).
fn turn_positions(format: Format, view: &ImportedSession) -> Vec<Option<usize>> {
    let mut positions: Vec<Option<usize>> = vec![None; view.messages().count()];
    if let Some(layout) = formats::layout(format) {
        for (p, (_, turn)) in formats::shaped(layout, view).iter().enumerate() {
            for m in turn.iter().flat_map(|t| &t.messages) {
                if let Some(slot) = positions.get_mut(*m) {
                    *slot = Some(p);
                }
            }
        }
    }
    positions
}

/// Per format: the record's turn list key, the text key, the speaker key (`None`: speakers
/// alternate) and the act key; `None` for formats without acts.
fn layout(
    format: Format,
) -> Option<(
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
)> {
    match format {
        Format::MultiWoz21 => Some(("log", "text", None, "dialog_act")),
        Format::ConvLab3 => Some(("turns", "utterance", Some("speaker"), "dialogue_acts")),
        Format::CrossWoz => Some(("messages", "content", Some("role"), "dialog_act")),
        _ => None,
    }
}

/// The domain and intent of an act name: `Domain-Intent` split at the first `-`, a bare name
/// in the general domain (`general`).
pub fn domain_intent(act: &str) -> (&str, &str) {
    match act.split_once('-') {
        Some((d, i)) if !d.is_empty() && !i.is_empty() => (d, i),
        _ => ("general", act),
    }
}

/// The adjudicated acts in the act field of `format` (see the module documentation).
pub fn acts_value(format: Format, a: &AdjudicatedActs) -> Value {
    let pairs_of =
        |act: &String| -> Vec<&ActPair> { a.pairs.iter().filter(|p| &p.act == act).collect() };
    match format {
        Format::MultiWoz21 => {
            let mut out = Map::new();
            for act in &a.acts {
                let (domain, intent) = domain_intent(act);
                let name = format!("{domain}-{intent}");
                let mut list: Vec<Value> = pairs_of(act)
                    .into_iter()
                    .map(|p| json!([p.slot, p.value]))
                    .collect();
                if list.is_empty() {
                    list.push(json!(["none", "none"]));
                }
                out.insert(name, Value::Array(list));
            }
            Value::Object(out)
        }
        Format::ConvLab3 => {
            let (mut non_categorical, mut binary) = (vec![], vec![]);
            for act in &a.acts {
                let (domain, intent) = domain_intent(act);
                let mut any = false;
                for p in pairs_of(act) {
                    any = true;
                    non_categorical.push(
                        json!({"intent": intent, "domain": domain, "slot": p.slot, "value": p.value}),
                    );
                }
                if !any {
                    binary.push(json!({"intent": intent, "domain": domain, "slot": ""}));
                }
            }
            json!({"categorical": [], "non-categorical": non_categorical, "binary": binary})
        }
        Format::CrossWoz => {
            let mut out = vec![];
            for act in &a.acts {
                // CrossWOZ writes a general act as `["General", act, …]`.
                let (domain, intent) = match domain_intent(act) {
                    ("general", intent) => (intent, "General"),
                    other => other,
                };
                let mut any = false;
                for p in pairs_of(act) {
                    any = true;
                    out.push(json!([intent, domain, p.slot, p.value]));
                }
                if !any {
                    out.push(json!([intent, domain, "none", "none"]));
                }
            }
            Value::Array(out)
        }
        _ => Value::Null,
    }
}
