//! The ConvLab-3 unified format (`dialogues.json` / `dummy_data.json`): a JSON array of
//! dialogues. Goals, domains, ids and dataset-specific extras ride in `convlab3.dialogue`; each
//! turn's `utt_idx`, `dialogue_acts`, `state`, `db_results` and extras in `convlab3.turn`. The
//! session id is the `dialogue_id`.
//!
//! Sessions from elsewhere become `dataset` `"wozkit"`, `dialogue_id` `wozkit-<split>-<n>` with
//! `data_split` set per part of a split export (`train` without one) and `original_id` = the
//! session id, an empty goal, an empty `state` on user turns and empty `db_results` on system
//! turns. Turns start with the user and alternate: consecutive messages of one speaker are
//! merged (the join, the wizard's opening and the exact messages go to the sidecar; see
//! docs/datasets.md). A wizard's state-machine label is not an act of the format: it stays in the
//! sidecar, never becomes a made-up `general` act; the acts the study's `datasets.convlab3`
//! mapping gives the state are written (see [`crate::mapping`]). A session that drew a scenario gets its drawn and computed world
//! variables as sentences in `goal.description` and the extra dialogue key `scenario` between
//! `goal` and `turns` (see [`super::scenario`]). A session with a user goal gets it in `goal` and
//! `domains`, per-turn states, `db_results` and the derived `inform`, `recommend`, `nooffer`
//! and `request` acts (see `goal_state.rs`).
//! Timestamps, act types and every other event go to the sidecar.

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::Role;

use super::goal_state;
use super::record::{Defaults, Fields, Layout, Shape, export_record, exported, import_list};
use super::scenario::{self, SCENARIO_KEY};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::mapping::Mappings;
use crate::output::JsonStream;
use crate::session::{Format, ImportedSession, Turn};

pub(crate) const LAYOUT: Layout = Layout {
    format: Format::ConvLab3,
    turns_key: "turns",
    speaker: Some(("speaker", "user", "system")),
    text_key: "utterance",
    head: &["speaker", "utterance", "utt_idx"],
    shape: Shape::UserFirst {
        join: " ",
        even: false,
    },
};

pub mod ontology;

/// The `dataset` name of the dialogues of live sessions.
pub const DATASET: &str = "wozkit";

/// Reads a unified-format dialogue list.
pub fn import_convlab3(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_list(&LAYOUT, input, &["dialogue_id"], input.json()?)
}

/// Writes a unified-format dialogue list (indent 2, the layout of the released files), with
/// the built-in studies' dataset mappings.
pub fn export_convlab3(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    export_with(sessions, Mappings::builtin(), out)
}

/// Writes a unified-format dialogue list with the dataset mappings `mappings`.
pub(crate) fn export_with(
    sessions: &[ImportedSession],
    mappings: &Mappings,
    out: impl Write,
) -> Result<(), ExportError> {
    let mut stream = JsonStream::array(out, 2)?;
    for (index, session) in exported(Format::ConvLab3, sessions) {
        stream.item(&Value::Object(record_in(session, index, None, mappings)?))?;
    }
    stream.finish()?;
    Ok(())
}

/// One dialogue of the part `split` of a split export (`train` without one), the `index`-th
/// exported in that part.
pub(crate) fn record_in(
    session: &ImportedSession,
    index: usize,
    split: Option<&str>,
    mappings: &Mappings,
) -> Result<Fields, ExportError> {
    let split = data_split(split.unwrap_or("train"));
    let defaults = ConvLabDefaults {
        split: &split,
        mappings,
    };
    let mut record = export_record(&LAYOUT, session, index, &defaults)?;
    if session.dialogue_note(Format::ConvLab3).is_none() {
        add_spans_and_domains(&mut record);
    }
    Ok(record)
}

/// The `data_split` of a part: ConvLab-3's `validation` for `dev`, `val` and `valid`, any other
/// name with `-` made `_` (the dialogue id is split at `-`).
pub fn data_split(part: &str) -> String {
    match part {
        "dev" | "val" | "valid" => "validation".into(),
        other => other.replace('-', "_"),
    }
}

/// Gives each non-categorical act whose value occurs exactly once in its utterance the span of
/// that occurrence (`start`, exclusive `end`, in characters), and adds the domain of every act
/// to `domains` (the format's checker wants both).
fn add_spans_and_domains(record: &mut Fields) {
    let mut used: Vec<String> = vec![];
    if let Some(Value::Array(turns)) = record.get_mut("turns") {
        for turn in turns.iter_mut().filter_map(Value::as_object_mut) {
            let utterance = turn
                .get("utterance")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let Some(Value::Object(acts)) = turn.get_mut("dialogue_acts") else {
                continue;
            };
            for (kind, list) in acts.iter_mut() {
                for act in list.as_array_mut().into_iter().flatten() {
                    let Some(act) = act.as_object_mut() else {
                        continue;
                    };
                    if let Some(d) = act.get("domain").and_then(Value::as_str)
                        && !used.iter().any(|u| u == d)
                    {
                        used.push(d.to_string());
                    }
                    if kind != "non-categorical" || act.contains_key("start") {
                        continue;
                    }
                    let value = act.get("value").and_then(Value::as_str).unwrap_or_default();
                    if let Some((start, end)) = only_span(&utterance, value) {
                        act.insert("start".into(), start.into());
                        act.insert("end".into(), end.into());
                    }
                }
            }
        }
    }
    if let Some(Value::Array(domains)) = record.get_mut("domains") {
        for d in used {
            if !domains.iter().any(|x| x.as_str() == Some(&d)) {
                domains.push(d.into());
            }
        }
    }
}

/// The character span of `value` in `text` when it occurs there exactly once.
fn only_span(text: &str, value: &str) -> Option<(usize, usize)> {
    if value.is_empty() {
        return None;
    }
    let mut found = text.match_indices(value);
    let (byte, _) = found.next()?;
    if found.next().is_some() {
        return None;
    }
    let start = text[..byte].chars().count();
    Some((start, start + value.chars().count()))
}

struct ConvLabDefaults<'a> {
    split: &'a str,
    mappings: &'a Mappings,
}

impl Defaults for ConvLabDefaults<'_> {
    fn record(&self, session: &ImportedSession, index: usize) -> Fields {
        let split = self.split;
        let mut record = Fields::new();
        record.insert("dataset".into(), json!(DATASET));
        record.insert("data_split".into(), json!(split));
        record.insert(
            "dialogue_id".into(),
            json!(format!("{DATASET}-{split}-{index}")),
        );
        record.insert("original_id".into(), json!(session.id));
        record.insert("domains".into(), json!([]));
        let drawn = scenario::logged(session);
        let description = drawn
            .as_ref()
            .map(|d| d.lines(|v| v.to_string()).join(" "))
            .unwrap_or_default();
        let goal = json!({"description": description, "inform": {}, "request": {}});
        record.insert("goal".into(), goal);
        if let Some(drawn) = drawn {
            record.insert(SCENARIO_KEY.into(), drawn.to_value());
        }
        record.insert("turns".into(), Value::Null);
        goal_state::convlab3_record(session, &mut record);
        record
    }

    fn turn(
        &self,
        session: &ImportedSession,
        position: usize,
        role: Role,
        turn: Option<&Turn<'_>>,
    ) -> Fields {
        let acts = json!({"binary": [], "categorical": [], "non-categorical": []});
        let mut fields = Fields::new();
        fields.insert("utt_idx".into(), position.into());
        fields.insert("dialogue_acts".into(), acts);
        match role {
            Role::User => fields.insert("state".into(), json!({})),
            Role::Wizard => fields.insert("db_results".into(), json!({})),
        };
        let map = self.mappings.acts_for(session, Format::ConvLab3);
        goal_state::convlab3_turn(session, role, turn, &mut fields, map);
        if role == Role::Wizard {
            goal_state::convlab3_mapped(session, turn, map, &mut fields);
        }
        fields
    }
}
