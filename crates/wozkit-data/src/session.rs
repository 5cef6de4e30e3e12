//! Sessions as the importers produce them and the exporters read them: an id plus the events of
//! one dialogue, and the conventions that let a dataset's extra fields ride along as annotations.
//!
//! Conventions (shared by every format module):
//! - Messages are [`EventKind::Message`] events with actor `Participant { role }`, `at_ms` 0
//!   (datasets carry no server time) and `seq` from 1.
//! - `"<format>.dialogue"`: one annotation before the first message, holding the record's fields in
//!   file order; the field that holds the turn list is kept with the value `null` to mark its place
//!   (the turns are the messages).
//! - `"<format>.turn"`: an annotation right after a message, holding that turn's fields other than
//!   the speaker and the text, in file order.
//! - `"vote"`: a pairwise vote, with the columns of the votes CSV (see [`crate::votes`](mod@crate::votes)).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wozkit_core::event::{Actor, EVENT_SCHEMA_VERSION, Event, EventKind, MessageSource, Role};

/// One dialogue: its id and its events in log order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportedSession {
    pub id: String,
    pub events: Vec<Event>,
}

impl ImportedSession {
    /// The chat messages in order: role and text.
    pub fn messages(&self) -> impl Iterator<Item = (Role, &str)> {
        wozkit_core::event::messages(&self.events)
    }

    /// The values of every annotation with this key, in log order.
    pub fn annotations<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Value> {
        self.events.iter().filter_map(move |e| match &e.kind {
            EventKind::Annotation { key: k, value } if k == key => Some(value),
            _ => None,
        })
    }

    /// The messages, each with the annotations that follow it.
    pub(crate) fn turns(&self) -> Vec<Turn<'_>> {
        let mut turns: Vec<Turn<'_>> = Vec::new();
        for event in &self.events {
            match &event.kind {
                EventKind::Message { role, text, source } => turns.push(Turn {
                    role: *role,
                    text: Cow::Borrowed(text),
                    source,
                    notes: Vec::new(),
                    messages: vec![turns.len()],
                    joins: Vec::new(),
                }),
                EventKind::Annotation { key, value } => {
                    if let Some(turn) = turns.last_mut() {
                        turn.notes.push((key, value));
                    }
                }
                _ => {}
            }
        }
        turns
    }

    /// The `"<format>.dialogue"` annotation, if the session came from that format.
    pub(crate) fn dialogue_note(&self, format: Format) -> Option<&Value> {
        self.annotations(format.dialogue_key()).next()
    }

    /// Whether an export to `format` writes this session: it has messages or came from `format`.
    pub(crate) fn is_dialogue_for(&self, format: Format) -> bool {
        self.messages().next().is_some() || self.dialogue_note(format).is_some()
    }
}

/// One message and the annotations placed right after it, or several consecutive messages of
/// one speaker merged into one turn (see [`Turn::merge`]).
pub(crate) struct Turn<'a> {
    pub role: Role,
    pub text: Cow<'a, str>,
    /// The source of the turn's last message (the one whose state the turn ends in).
    pub source: &'a MessageSource,
    notes: Vec<(&'a str, &'a Value)>,
    /// The positions among the session's messages of the messages this turn holds.
    pub messages: Vec<usize>,
    /// What joins each message's text to the one before it in `text`.
    pub joins: Vec<&'static str>,
}

impl<'a> Turn<'a> {
    /// The last annotation with this key placed after the turn's messages.
    pub fn note(&self, key: &str) -> Option<&'a Value> {
        self.notes
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// Appends `next` (the same speaker's following message) to this turn: the texts joined by
    /// `join` (a space joins nothing where either side is Chinese or Japanese text, which runs
    /// on), the notes and messages of both, the source of `next`. Returns the join used.
    pub fn merge(&mut self, next: Turn<'a>, join: &'static str) -> &'static str {
        let mut text = std::mem::take(&mut self.text).into_owned();
        let cjk = |c: Option<char>| c.is_some_and(is_cjk);
        let join = if join == " " && (cjk(text.chars().last()) || cjk(next.text.chars().next())) {
            ""
        } else {
            join
        };
        text.push_str(join);
        text.push_str(&next.text);
        self.text = Cow::Owned(text);
        self.source = next.source;
        self.notes.extend(next.notes);
        self.messages.extend(next.messages);
        self.joins.push(join);
        join
    }
}

/// Whether `c` is a CJK character or punctuation mark (text written without spaces).
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3000..=0x303f | 0x3040..=0x30ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xff00..=0xffef)
}

/// The dataset formats wozkit imports and exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Taskmaster1,
    CrossWoz,
    MultiWoz21,
    ConvLab3,
    CrsArena,
    CrsArenaEval,
    Crwiz,
}

impl Format {
    pub const ALL: [Format; 7] = [
        Format::Taskmaster1,
        Format::CrossWoz,
        Format::MultiWoz21,
        Format::ConvLab3,
        Format::CrsArena,
        Format::CrsArenaEval,
        Format::Crwiz,
    ];

    /// The name used on the command line and as the annotation key prefix.
    pub fn name(self) -> &'static str {
        self.keys().0
    }

    /// Key of the annotation holding a record's own fields.
    pub fn dialogue_key(self) -> &'static str {
        self.keys().1
    }

    /// Key of the annotation holding a turn's extra fields.
    pub fn turn_key(self) -> &'static str {
        self.keys().2
    }

    fn keys(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Format::Taskmaster1 => ("taskmaster1", "taskmaster1.dialogue", "taskmaster1.turn"),
            Format::CrossWoz => ("crosswoz", "crosswoz.dialogue", "crosswoz.turn"),
            Format::MultiWoz21 => ("multiwoz21", "multiwoz21.dialogue", "multiwoz21.turn"),
            Format::ConvLab3 => ("convlab3", "convlab3.dialogue", "convlab3.turn"),
            Format::CrsArena => ("crsarena", "crsarena.dialogue", "crsarena.turn"),
            Format::CrsArenaEval => (
                "crsarena_eval",
                "crsarena_eval.dialogue",
                "crsarena_eval.turn",
            ),
            Format::Crwiz => ("crwiz", "crwiz.dialogue", "crwiz.turn"),
        }
    }

    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Appends events with the importer conventions (seq from 1, no server time).
pub(crate) struct SessionBuilder {
    id: String,
    events: Vec<Event>,
}

impl SessionBuilder {
    pub fn new(id: impl Into<String>) -> Self {
        SessionBuilder {
            id: id.into(),
            events: Vec::new(),
        }
    }

    fn push(&mut self, actor: Actor, kind: EventKind) {
        self.events.push(Event {
            v: EVENT_SCHEMA_VERSION,
            session: self.id.clone(),
            seq: self.events.len() as u64 + 1,
            at_ms: 0,
            actor,
            kind,
        });
    }

    pub fn annotate(&mut self, key: &str, value: Value) {
        let kind = EventKind::Annotation {
            key: key.to_string(),
            value,
        };
        self.push(Actor::System, kind);
    }

    /// Annotates unless `fields` is empty.
    pub fn annotate_fields(&mut self, key: &str, fields: Map<String, Value>) {
        if !fields.is_empty() {
            self.annotate(key, Value::Object(fields));
        }
    }

    pub fn message(&mut self, role: Role, text: &str, source: MessageSource) {
        let actor = Actor::Participant {
            role,
            participant: None,
        };
        let kind = EventKind::Message {
            role,
            text: text.to_string(),
            source,
        };
        self.push(actor, kind);
    }

    pub fn finish(self) -> ImportedSession {
        ImportedSession {
            id: self.id,
            events: self.events,
        }
    }
}

/// Whether the importer of a format that stores no timing, participant or label gives this
/// message event back unchanged.
pub(crate) fn is_plain_message(event: &Event) -> bool {
    let EventKind::Message { role, source, .. } = &event.kind else {
        return false;
    };
    let plain_actor = matches!(
        &event.actor,
        Actor::Participant { role: r, participant: None } if r == role
    );
    plain_actor && event.at_ms == 0 && *source == MessageSource::Free
}
