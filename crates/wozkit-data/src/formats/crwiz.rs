//! The CRWIZ-style processed format (`*.shcn.data.json`, MTurk and lab variants): one file per
//! dialogue, one `dialogue` entry per wizard message.
//!
//! Import: each entry's `prompt` becomes a wizard message whose source comes from its label
//! (`current_state`, see [`crwiz_act_type`](super::crwiz_labels::crwiz_act_type)); the entry's
//! other fields ride in `crwiz.turn`, with `user` kept as `null` to mark its place; the operator
//! text `user` is split on `". "` into the user messages that follow. File-level fields ride in
//! `crwiz.dialogue`. Export joins the user messages back with `". "`, so a file round-trips
//! byte for byte.
//!
//! Sessions from elsewhere: `current_state` is the message's label (`UNK` for free text),
//! `situation_db` the world variables set so far (sorted keys), `subtask` the last subtask
//! entered, `time` the seconds left on the clock, `image` a media file shown before the next
//! message, `gesture` `""`, and `action_mask` `[]` (the event log does not record the options
//! shown). Operator text is written as typed, not lower-cased. Operator messages before the first
//! wizard message, messages whose `". "` join would not split back the same, and every other
//! event go to the sidecar.

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};

use super::crwiz_labels::{label_of, source_for};
use super::record::{Fields, exported};
use crate::error::{ExportError, ImportError};
use crate::input::{Ctx, Input};
use crate::output::{pretty, python_style_sorted};
use crate::session::{Format, ImportedSession, SessionBuilder, is_plain_message};

const JOIN: &str = ". ";

/// Reads one CRWIZ processed dialogue file (one session).
pub fn import_crwiz(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    let value = input.json()?;
    let ctx = Ctx::new(input.name(), "-");
    let record = ctx.object(&value, "")?;
    let id = ctx.string(
        ctx.get(record, "dialogue_id", "dialogue_id")?,
        "dialogue_id",
    )?;
    let ctx = Ctx::new(input.name(), id);
    let entries = ctx.array(ctx.get(record, "dialogue", "dialogue")?, "dialogue")?;
    let mut session = SessionBuilder::new(id);
    let mut dialogue = record.clone();
    dialogue.insert("dialogue".into(), Value::Null);
    session.annotate(Format::Crwiz.dialogue_key(), Value::Object(dialogue));
    for (i, entry) in entries.iter().enumerate() {
        let path = format!("dialogue[{i}]");
        let entry = ctx.object(entry, &path)?;
        let field = |key: &str| format!("{path}.{key}");
        let label = ctx.string(
            ctx.get(entry, "current_state", &field("current_state"))?,
            &field("current_state"),
        )?;
        let prompt = ctx.string(
            ctx.get(entry, "prompt", &field("prompt"))?,
            &field("prompt"),
        )?;
        let user = match entry.get("user") {
            Some(user) => Some(ctx.string(user, &field("user"))?),
            None => None,
        };
        session.message(Role::Wizard, prompt, source_for(label));
        let extras: Fields = entry
            .iter()
            .filter(|(k, _)| *k != "prompt")
            .map(|(k, v)| (k.clone(), if k == "user" { Value::Null } else { v.clone() }))
            .collect();
        session.annotate(Format::Crwiz.turn_key(), Value::Object(extras));
        for text in user.into_iter().flat_map(|u| u.split(JOIN)) {
            session.message(Role::User, text, MessageSource::Free);
        }
    }
    Ok(vec![session.finish()])
}

/// Writes a CRWIZ file (indent 2, no trailing newline, like the corpus). The format holds one
/// dialogue per file, so `sessions` must hold exactly one session with messages.
pub fn export_crwiz(sessions: &[ImportedSession], mut out: impl Write) -> Result<(), ExportError> {
    let dialogues: Vec<&ImportedSession> =
        exported(Format::Crwiz, sessions).map(|(_, s)| s).collect();
    let [session] = dialogues.as_slice() else {
        let ids: Vec<&str> = dialogues.iter().map(|s| s.id.as_str()).collect();
        let problem = format!(
            "a CRWIZ file holds one dialogue, got {}; export each session to its own file",
            dialogues.len()
        );
        return Err(ExportError::field(&ids.join(","), "dialogue", problem));
    };
    let mut record = match session.dialogue_note(Format::Crwiz) {
        Some(Value::Object(fields)) => fields.clone(),
        Some(_) => {
            let problem = "annotation is not an object";
            return Err(ExportError::field(
                &session.id,
                Format::Crwiz.dialogue_key(),
                problem,
            ));
        }
        None => default_record(session),
    };
    let mut dialogue = Vec::new();
    for (i, entry) in entries(session).iter().enumerate() {
        dialogue.push(Value::Object(entry_fields(session, i, entry)?));
    }
    record.insert("dialogue".into(), Value::Array(dialogue));
    out.write_all(&pretty(&Value::Object(record), 2)?)?;
    Ok(())
}

/// One wizard message, the operator messages after it, and the situation when it was sent.
struct Entry<'a> {
    /// Position in the session's events, and the event.
    wizard: (usize, &'a Event),
    note: Option<&'a Value>,
    users: Vec<(usize, &'a Event)>,
    world: Fields,
    subtask: String,
    time_left: f64,
    image: Option<String>,
}

fn entries(session: &ImportedSession) -> Vec<Entry<'_>> {
    let mut out: Vec<Entry<'_>> = Vec::new();
    let (mut world, mut subtask, mut deadline) = (Fields::new(), String::new(), None::<u64>);
    for (i, event) in session.events.iter().enumerate() {
        match &event.kind {
            EventKind::Message {
                role: Role::Wizard, ..
            } => {
                let time_left = deadline.map_or(0.0, |d| (d as f64 - event.at_ms as f64) / 1000.0);
                out.push(Entry {
                    wizard: (i, event),
                    note: None,
                    users: Vec::new(),
                    world: world.clone(),
                    subtask: subtask.clone(),
                    time_left,
                    image: None,
                });
            }
            EventKind::Message {
                role: Role::User, ..
            } => {
                if let Some(entry) = out.last_mut() {
                    entry.users.push((i, event));
                }
            }
            EventKind::Annotation { key, value } if key == Format::Crwiz.turn_key() => {
                if let Some(entry) = out.last_mut().filter(|e| e.users.is_empty()) {
                    entry.note = Some(value);
                }
            }
            EventKind::WorldSet { values } => {
                world.extend(values.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            EventKind::SubtaskEntered { subtask: s } => subtask = s.clone(),
            EventKind::ClockStarted { deadline_ms } => deadline = Some(*deadline_ms),
            EventKind::MediaShown { file, .. } => {
                if let Some(entry) = out.last_mut().filter(|e| e.users.is_empty()) {
                    entry.image.get_or_insert_with(|| file.clone());
                }
            }
            _ => {}
        }
    }
    out
}

fn texts<'a>(events: &[(usize, &'a Event)]) -> Vec<&'a str> {
    events
        .iter()
        .filter_map(|(_, e)| match &e.kind {
            EventKind::Message { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn entry_fields(
    session: &ImportedSession,
    index: usize,
    entry: &Entry<'_>,
) -> Result<Fields, ExportError> {
    let EventKind::Message { text, source, .. } = &entry.wizard.1.kind else {
        return Ok(Fields::new());
    };
    let stored = match entry.note {
        Some(Value::Object(fields)) => fields.clone(),
        Some(_) => {
            let field = format!("dialogue[{index}]");
            return Err(ExportError::field(
                &session.id,
                field,
                "crwiz.turn annotation is not an object",
            ));
        }
        None => default_entry(entry, label_of(source)),
    };
    let users = texts(&entry.users);
    let user = (!users.is_empty()).then(|| Value::String(users.join(JOIN)));
    let mut fields = Fields::new();
    let mut user_written = false;
    for (key, value) in stored {
        match key.as_str() {
            "user" => {
                if let Some(user) = &user {
                    fields.insert(key, user.clone());
                    user_written = true;
                }
            }
            "action_mask" if !user_written => {
                if let Some(user) = &user {
                    fields.insert("user".into(), user.clone());
                    user_written = true;
                }
                fields.insert(key, value);
            }
            "current_state" => {
                fields.insert(key, value);
                fields.insert("prompt".into(), Value::String(text.clone()));
            }
            _ => {
                fields.insert(key, value);
            }
        }
    }
    if let (Some(user), false) = (user, user_written) {
        fields.insert("user".into(), user);
    }
    Ok(fields)
}

fn default_record(session: &ImportedSession) -> Fields {
    let study = session.events.iter().find_map(|e| match &e.kind {
        EventKind::SessionStarted { study, .. } => Some(study.clone()),
        _ => None,
    });
    let mut record = Fields::new();
    record.insert("condition".into(), json!(study.unwrap_or_default()));
    record.insert("dialogue_id".into(), json!(session.id));
    record.insert("dialogue".into(), Value::Null);
    record.insert("log_file".into(), json!(""));
    record.insert("processed_log_file".into(), json!(""));
    record.insert("user_id".into(), json!("UNK"));
    record
}

/// An entry's fields (without `prompt` and `user`) for a message from a live session.
fn default_entry(entry: &Entry<'_>, label: &str) -> Fields {
    let situation = python_style_sorted(&Value::Object(entry.world.clone()));
    let mut fields = Fields::new();
    fields.insert("situation_db".into(), json!(situation));
    fields.insert("current_state".into(), json!(label));
    fields.insert("gesture".into(), json!(""));
    fields.insert("subtask".into(), json!(entry.subtask));
    fields.insert("time".into(), json!(entry.time_left));
    if let Some(image) = &entry.image {
        fields.insert("image".into(), json!(image));
    }
    fields.insert("action_mask".into(), json!([]));
    fields
}

/// For each event of the session, whether an export to this format and a re-import give it back.
pub(crate) fn kept(session: &ImportedSession) -> Vec<bool> {
    let mut kept = vec![false; session.events.len()];
    for entry in entries(session) {
        let (index, wizard) = entry.wizard;
        let EventKind::Message { source, .. } = &wizard.kind else {
            continue;
        };
        let label = match entry.note.and_then(|n| n.get("current_state")) {
            Some(Value::String(label)) => label.as_str(),
            _ => label_of(source),
        };
        let plain_actor = matches!(
            &wizard.actor,
            Actor::Participant {
                role: Role::Wizard,
                participant: None
            }
        );
        kept[index] = plain_actor && wizard.at_ms == 0 && source_for(label) == *source;
        let users = texts(&entry.users);
        let joined = users.join(JOIN);
        let splits_back = users.is_empty() || joined.split(JOIN).eq(users.iter().copied());
        for &(i, user) in &entry.users {
            kept[i] = splits_back && is_plain_message(user);
        }
    }
    for (i, event) in session.events.iter().enumerate() {
        if let EventKind::Annotation { key, .. } = &event.kind {
            kept[i] = key.starts_with("crwiz.");
        }
    }
    kept
}
