//! The shared shape of a dialogue record: an object whose turn list holds one object per message
//! with a speaker field and a text field. Importing turns a record into a session (see the
//! conventions in [`crate::session`]); exporting puts the stored fields back where they were, so a
//! record read from a file is written again identically, key order included.

use std::collections::HashSet;
use std::io::Write;

use serde_json::{Map, Value};
use wozkit_core::event::{MessageSource, Role};

use super::Container;
use crate::error::{ExportError, ImportError};
use crate::input::{Ctx, Input, expected};
use crate::output::JsonStream;
use crate::session::{Format, ImportedSession, SessionBuilder, Turn};

pub(crate) type Fields = Map<String, Value>;

/// How one format lays out a record's turns.
pub(crate) struct Layout {
    pub format: Format,
    /// The record field holding the turn list.
    pub turns_key: &'static str,
    /// The turn field holding the speaker, with its values for the user and for the wizard.
    /// `None`: speakers alternate, the user first (MultiWOZ).
    pub speaker: Option<(&'static str, &'static str, &'static str)>,
    /// The turn field holding the text.
    pub text_key: &'static str,
    /// Turn fields written first, in this order; the other stored fields follow in stored order.
    pub head: &'static [&'static str],
    /// The turn shape the format expects of a session from elsewhere.
    pub shape: Shape,
}

/// The turn shape of a format, applied to sessions not read from that format (a record read
/// from the format keeps its turns as they were read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Every message is a turn, in the order spoken (Taskmaster-1, whose dialogues let a speaker
    /// talk twice in a row).
    AsSpoken,
    /// The user first, then strictly alternating: the wizard's messages before the user's first
    /// are left out (the sidecar keeps them), consecutive messages of one speaker are one turn
    /// with their texts joined by `join` (the sidecar records the join), and with `even` an empty
    /// system turn closes a dialogue that ends with the user.
    UserFirst { join: &'static str, even: bool },
}

impl Layout {
    fn speaker_value(&self, role: Role) -> Option<(&'static str, &'static str)> {
        self.speaker.map(|(key, user, wizard)| match role {
            Role::User => (key, user),
            Role::Wizard => (key, wizard),
        })
    }
}

/// Reads one record into a session called `id`.
pub(crate) fn import_record(
    layout: &Layout,
    ctx: &Ctx<'_>,
    id: &str,
    record: &Fields,
) -> Result<ImportedSession, ImportError> {
    let turns_key = layout.turns_key;
    let turns = ctx.array(ctx.get(record, turns_key, turns_key)?, turns_key)?;
    let mut session = SessionBuilder::new(id);
    let dialogue: Fields = record
        .iter()
        .map(|(k, v)| {
            let v = if k == turns_key {
                Value::Null
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    session.annotate(layout.format.dialogue_key(), Value::Object(dialogue));
    for (i, turn) in turns.iter().enumerate() {
        let path = format!("{turns_key}[{i}]");
        let turn = ctx.object(turn, &path)?;
        let role = match layout.speaker {
            Some((key, user, wizard)) => {
                let field = format!("{path}.{key}");
                match ctx.string(ctx.get(turn, key, &field)?, &field)? {
                    s if s == user => Role::User,
                    s if s == wizard => Role::Wizard,
                    other => {
                        let problem = format!("expected {user:?} or {wizard:?}, found {other:?}");
                        return Err(ctx.err(field, problem));
                    }
                }
            }
            None if i % 2 == 0 => Role::User,
            None => Role::Wizard,
        };
        let field = format!("{path}.{}", layout.text_key);
        let text = ctx.string(ctx.get(turn, layout.text_key, &field)?, &field)?;
        session.message(role, text, MessageSource::Free);
        let speaker_key = layout.speaker.map(|(k, _, _)| k);
        let extras: Fields = turn
            .iter()
            .filter(|(k, _)| *k != layout.text_key && Some(k.as_str()) != speaker_key)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        session.annotate_fields(layout.format.turn_key(), extras);
    }
    Ok(session.finish())
}

/// What a format supplies for sessions that were not imported from it.
pub(crate) trait Defaults {
    /// The record's own fields, with the turn-list field present (any value) to fix its place.
    fn record(&self, session: &ImportedSession, index: usize) -> Fields;
    /// A turn's extra fields. `turn` is `None` for an empty turn inserted to keep speakers
    /// alternating.
    fn turn(
        &self,
        session: &ImportedSession,
        position: usize,
        role: Role,
        turn: Option<&Turn<'_>>,
    ) -> Fields;
}

/// Builds the record of a session: stored fields where the session came from this format,
/// defaults elsewhere.
pub(crate) fn export_record(
    layout: &Layout,
    session: &ImportedSession,
    index: usize,
    defaults: &impl Defaults,
) -> Result<Fields, ExportError> {
    let imported = session.dialogue_note(layout.format).is_some();
    let mut record = match session.dialogue_note(layout.format) {
        Some(Value::Object(fields)) => fields.clone(),
        Some(_) => {
            let field = layout.format.dialogue_key();
            return Err(ExportError::field(
                &session.id,
                field,
                "annotation is not an object",
            ));
        }
        None => defaults.record(session, index),
    };
    let mut turns = Vec::new();
    for (role, turn) in shaped(layout, session) {
        let position = turns.len();
        let extras = match turn.as_ref().and_then(|t| t.note(layout.format.turn_key())) {
            Some(Value::Object(fields)) => fields.clone(),
            Some(_) => {
                let field = format!("{}[{position}]", layout.format.turn_key());
                return Err(ExportError::field(
                    &session.id,
                    field,
                    "annotation is not an object",
                ));
            }
            // A turn read from this format without an annotation had no extra fields.
            None if imported && turn.is_some() => Fields::new(),
            None => defaults.turn(session, position, role, turn.as_ref()),
        };
        let text = turn.as_ref().map_or("", |t| &t.text);
        turns.push(Value::Object(turn_fields(layout, role, text, extras)));
    }
    // `insert` keeps the position of an existing key, so the turn list lands where it was read.
    record.insert(layout.turns_key.to_string(), Value::Array(turns));
    Ok(record)
}

/// One turn of an exported record: its speaker and the message(s) it holds (`None` for an
/// empty turn inserted to keep speakers alternating).
pub(crate) type Shaped<'a> = (Role, Option<Turn<'a>>);

/// The turns of `session` as an export to `layout`'s format writes them: a record read from the
/// format as it was read (MultiWOZ's turns alternate by position), any other in the format's
/// [`Shape`].
pub(crate) fn shaped<'a>(layout: &Layout, session: &'a ImportedSession) -> Vec<Shaped<'a>> {
    let turns = session.turns();
    if session.dialogue_note(layout.format).is_some() || layout.shape == Shape::AsSpoken {
        return arranged(layout, turns);
    }
    let Shape::UserFirst { join, even } = layout.shape else {
        return arranged(layout, turns);
    };
    let mut out: Vec<Shaped<'a>> = Vec::new();
    for turn in turns.into_iter().skip_while(|t| t.role != Role::User) {
        match out.last_mut() {
            Some((role, Some(last))) if *role == turn.role => {
                last.merge(turn, join);
            }
            _ => out.push((turn.role, Some(turn))),
        }
    }
    if even && out.len() % 2 == 1 {
        out.push((Role::Wizard, None));
    }
    out
}

/// The turns of a record read from its format (or of a format that writes them as spoken):
/// where the format has no speaker field, empty turns fill any gap in the alternation and an
/// empty wizard turn closes an odd-length dialogue.
fn arranged<'a>(layout: &Layout, turns: Vec<Turn<'a>>) -> Vec<Shaped<'a>> {
    if layout.speaker.is_some() {
        return turns.into_iter().map(|t| (t.role, Some(t))).collect();
    }
    let mut out: Vec<Shaped<'a>> = Vec::new();
    let expected = |n: usize| {
        if n.is_multiple_of(2) {
            Role::User
        } else {
            Role::Wizard
        }
    };
    for turn in turns {
        if turn.role != expected(out.len()) {
            out.push((expected(out.len()), None));
        }
        out.push((turn.role, Some(turn)));
    }
    if out.len() % 2 == 1 {
        out.push((Role::Wizard, None));
    }
    out
}

fn turn_fields(layout: &Layout, role: Role, text: &str, mut extras: Fields) -> Fields {
    let mut fields = Fields::new();
    for &key in layout.head {
        if key == layout.text_key {
            fields.insert(key.to_string(), Value::String(text.to_string()));
        } else if let Some((speaker_key, value)) =
            layout.speaker_value(role).filter(|(k, _)| *k == key)
        {
            fields.insert(speaker_key.to_string(), Value::String(value.to_string()));
        } else if let Some(value) = extras.shift_remove(key) {
            fields.insert(key.to_string(), value);
        }
    }
    fields.extend(extras);
    fields
}

/// The label of a labelled wizard message, for formats that can state it as a general act.
pub(crate) fn wizard_label<'a>(turn: Option<&Turn<'a>>) -> Option<&'a str> {
    turn.and_then(|t| t.source.act()).map(|(label, _)| label)
}

/// The sessions an export to `format` writes, numbered from 0.
pub(crate) fn exported(
    format: Format,
    sessions: &[ImportedSession],
) -> impl Iterator<Item = (usize, &ImportedSession)> {
    sessions
        .iter()
        .filter(move |s| s.is_dialogue_for(format))
        .enumerate()
}

/// Reads a JSON object of records keyed by dialogue id (CrossWOZ, MultiWOZ).
pub(crate) fn import_keyed(
    layout: &Layout,
    input: &Input,
) -> Result<Vec<ImportedSession>, ImportError> {
    let value = input.json()?;
    let Value::Object(top) = value else {
        return Err(Ctx::new(input.name(), "-").err("", expected("an object", &value)));
    };
    // Records are consumed one by one, so the parsed file shrinks as the sessions grow.
    top.into_iter()
        .map(|(id, record)| {
            let ctx = Ctx::new(input.name(), id.as_str());
            import_record(layout, &ctx, &id, ctx.object(&record, "")?)
        })
        .collect()
}

/// Writes the records as one JSON object keyed by session id (CrossWOZ, MultiWOZ).
pub(crate) fn export_keyed(
    layout: &Layout,
    sessions: &[ImportedSession],
    out: impl Write,
    indent: usize,
    defaults: &impl Defaults,
) -> Result<(), ExportError> {
    let mut stream = JsonStream::object(out, indent)?;
    let mut seen = HashSet::new();
    for (index, session) in exported(layout.format, sessions) {
        if !seen.insert(session.id.as_str()) {
            let problem = "two sessions have this id, and the file is keyed by id";
            return Err(ExportError::field(&session.id, "id", problem));
        }
        let record = export_record(layout, session, index, defaults)?;
        stream.entry(&session.id, &Value::Object(record))?;
    }
    stream.finish()?;
    Ok(())
}

/// A format's record layout with its defaults for sessions from elsewhere: writes its file or
/// one record.
pub(crate) struct Exporter<D> {
    layout: &'static Layout,
    defaults: D,
}

impl<D: Defaults> Exporter<D> {
    pub(crate) fn new(layout: &'static Layout, defaults: D) -> Self {
        Exporter { layout, defaults }
    }

    /// Writes the file of `sessions` (see [`export_file`]).
    pub(crate) fn file(
        &self,
        sessions: &[ImportedSession],
        out: impl Write,
    ) -> Result<(), ExportError> {
        export_file(self.layout, sessions, out, &self.defaults)
    }

    /// The record of `session`, the `index`-th exported (see [`export_record`]).
    pub(crate) fn record(
        &self,
        session: &ImportedSession,
        index: usize,
    ) -> Result<Fields, ExportError> {
        export_record(self.layout, session, index, &self.defaults)
    }
}

/// Writes the records of `layout`'s format in the file layout of the released files: keyed by
/// dialogue id or listed, at their indent (see [`Format::container`]).
fn export_file(
    layout: &Layout,
    sessions: &[ImportedSession],
    out: impl Write,
    defaults: &impl Defaults,
) -> Result<(), ExportError> {
    match layout.format.container() {
        (Container::Object, indent) => export_keyed(layout, sessions, out, indent, defaults),
        (Container::Array | Container::FilePerDialogue, indent) => {
            export_list(layout, sessions, out, indent, defaults)
        }
    }
}

/// Reads a JSON array of records, each named by the first of `id_keys` it has.
pub(crate) fn import_list(
    layout: &Layout,
    input: &Input,
    id_keys: &[&str],
    value: Value,
) -> Result<Vec<ImportedSession>, ImportError> {
    let Value::Array(items) = value else {
        return Err(Ctx::new(input.name(), "-").err("", expected("an array", &value)));
    };
    // Records are consumed one by one, so the parsed file shrinks as the sessions grow.
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let ctx = Ctx::new(input.name(), i.to_string());
            let record = ctx.object(&item, "")?;
            let Some((key, id)) = id_keys.iter().find_map(|k| record.get(*k).map(|v| (*k, v)))
            else {
                return Err(ctx.err(id_keys.join(" | "), "missing (required by the format)"));
            };
            let id = ctx.string(id, key)?;
            import_record(layout, &Ctx::new(input.name(), id), id, record)
        })
        .collect()
}

/// Writes the records as a JSON array.
pub(crate) fn export_list(
    layout: &Layout,
    sessions: &[ImportedSession],
    out: impl Write,
    indent: usize,
    defaults: &impl Defaults,
) -> Result<(), ExportError> {
    let mut stream = JsonStream::array(out, indent)?;
    for (index, session) in exported(layout.format, sessions) {
        let record = export_record(layout, session, index, defaults)?;
        stream.item(&Value::Object(record))?;
    }
    stream.finish()?;
    Ok(())
}
