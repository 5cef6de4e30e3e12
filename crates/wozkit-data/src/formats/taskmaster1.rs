//! Taskmaster-1 (`TM-1-2019`): a JSON array of conversations, or one conversation object as in
//! `sample.json`. Each utterance's `index` and `segments` ride in the `taskmaster1.turn`
//! annotation.
//!
//! Sessions from elsewhere get `conversation_id` = `"dlg-" + session id`, `instruction_id` =
//! `<domain>-<scenario>` of the study's `datasets.taskmaster1` mapping (`restaurant-table-1`, so a
//! reader takes the Taskmaster-1 domain from its prefix), else the study id of `SessionStarted`
//! (or `""`), and utterances without segments; Taskmaster-1 has no place for dialogue-act
//! labels, timestamps or other events, which go to the sidecar.

use std::io::Write;

use serde_json::Value;
use wozkit_core::evaluation::{Span, segments_of};
use wozkit_core::event::{Actor, Event, EventKind, Judgment, Role};

use super::record::{Defaults, Exporter, Fields, Layout, Shape, import_list};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::mapping::Mappings;
use crate::output::pretty;
use crate::session::{Format, ImportedSession, Turn};

pub(crate) const LAYOUT: Layout = Layout {
    format: Format::Taskmaster1,
    turns_key: "utterances",
    speaker: Some(("speaker", "USER", "ASSISTANT")),
    text_key: "text",
    head: &["index", "speaker", "text"],
    shape: Shape::AsSpoken,
};

/// Reads a Taskmaster-1 file: an array of conversations or a single conversation object.
pub fn import_taskmaster1(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    let value = match input.json()? {
        object @ Value::Object(_) => Value::Array(vec![object]),
        other => other,
    };
    import_list(&LAYOUT, input, &["conversation_id"], value)
}

/// Writes the dataset layout: a JSON array of conversations (indent 2), with the built-in
/// studies' dataset mappings.
pub fn export_taskmaster1(
    sessions: &[ImportedSession],
    out: impl Write,
) -> Result<(), ExportError> {
    super::export(Format::Taskmaster1, sessions, out)
}

/// The format's exporter with the dataset mappings `mappings`.
pub(crate) fn exporter(mappings: &Mappings) -> Exporter<impl Defaults + '_> {
    Exporter::new(&LAYOUT, TmDefaults { mappings })
}

/// Writes one conversation as a single object, the layout of `sample.json` (indent 4).
pub fn export_taskmaster1_conversation(
    session: &ImportedSession,
    mut out: impl Write,
) -> Result<(), ExportError> {
    let record = exporter(Mappings::builtin()).record(session, 0)?;
    out.write_all(&pretty(&Value::Object(record), 4)?)?;
    Ok(())
}

struct TmDefaults<'a> {
    mappings: &'a Mappings,
}

impl Defaults for TmDefaults<'_> {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        // The mapped scenario (`restaurant-table-1`), else the study id.
        let study = match self.mappings.taskmaster1_for(session) {
            Some(tm) => Some(tm.instruction_id()),
            None => session.events.iter().find_map(|e| match &e.kind {
                EventKind::SessionStarted { study, .. } => Some(study.clone()),
                _ => None,
            }),
        };
        let mut record = Fields::new();
        record.insert(
            "conversation_id".into(),
            format!("dlg-{}", session.id).into(),
        );
        record.insert("instruction_id".into(), study.unwrap_or_default().into());
        record.insert("utterances".into(), Value::Null);
        record
    }

    fn turn(
        &self,
        _session: &ImportedSession,
        position: usize,
        _role: Role,
        _turn: Option<&Turn<'_>>,
    ) -> Fields {
        let mut fields = Fields::new();
        fields.insert("index".into(), position.into());
        fields
    }
}

/// Puts the spans of span-annotation judgments into self-dialogs as Taskmaster-1 `segments`.
///
/// `dialogues` are the self-dialog sessions (`dlg-…`, each utterance a message followed by its
/// `taskmaster1.turn` annotation); `judgments` are the judgments of a `spans` study, whose first
/// dialogue names the session annotated. Every counted judgment is used, as the published data
/// keeps the segments of both its annotators: spans of several annotators with the same offsets
/// are one segment listing each annotator's name (a name may repeat), other spans are segments
/// of their own, in order of offsets. Utterances without spans get no `segments` key (the
/// dataset omits it). Returns how many judgments named no dialogue of `dialogues`.
///
/// The same as [`SpanSegments::from_judgments`] applied to each dialogue.
pub fn add_segments(dialogues: &mut [ImportedSession], judgments: &[Judgment]) -> usize {
    let segments = SpanSegments::from_judgments(judgments);
    for session in dialogues.iter_mut() {
        segments.apply(&session.id, &mut session.events);
    }
    judgments
        .iter()
        .filter(|j| j.counted)
        .filter(|j| {
            j.dialogues
                .first()
                .is_none_or(|id| !dialogues.iter().any(|d| &d.id == id))
        })
        .count()
}

/// The spans of span-annotation judgments by the dialogue they mark, to be put into the
/// dialogues one at a time as Taskmaster-1 `segments` (see [`add_segments`], which uses them
/// for a list of dialogues; a streamed export applies them to each session as it comes).
#[derive(Clone, Debug, Default)]
pub struct SpanSegments {
    spans: std::collections::HashMap<String, Vec<Span>>,
}

impl SpanSegments {
    /// The spans of the counted `judgments` (of a `spans` study), each under the first dialogue
    /// it names; judgments naming no dialogue are left out.
    pub fn from_judgments(judgments: &[Judgment]) -> SpanSegments {
        let mut spans: std::collections::HashMap<String, Vec<Span>> = Default::default();
        for j in judgments.iter().filter(|j| j.counted) {
            let Some(id) = j.dialogues.first() else {
                continue;
            };
            let marked: Vec<Span> = j
                .answers
                .get("spans")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default();
            spans.entry(id.clone()).or_default().extend(marked);
        }
        SpanSegments { spans }
    }

    /// Gives each span whose slot `names` maps (a span study's `datasets.taskmaster1.segments`)
    /// the Taskmaster-1 annotation name it maps to; other slots keep their names.
    pub fn rename(&mut self, names: &indexmap::IndexMap<String, String>) {
        for span in self.spans.values_mut().flatten() {
            if let Some(name) = names.get(&span.slot) {
                span.slot.clone_from(name);
            }
        }
    }

    /// How many dialogues have judgments (with spans or without).
    pub fn dialogues(&self) -> usize {
        self.spans.len()
    }

    /// Whether no judgment names a dialogue.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Rewrites the events of the dialogue `id` with the segments of its spans: each utterance's
    /// `taskmaster1.turn` annotation gets the `segments` of its spans (and loses any it had), an
    /// utterance with spans but without that annotation gets one after it; the events' `seq` are
    /// numbered
    /// again from 1. Returns whether any judgment names the dialogue (otherwise the events are
    /// left as they are).
    pub fn apply(&self, id: &str, session_events: &mut Vec<Event>) -> bool {
        let Some(marked) = self.spans.get(id) else {
            return false;
        };
        let turn_key = Format::Taskmaster1.turn_key();
        let mut events = Vec::with_capacity(session_events.len());
        let mut position: Option<u32> = None;
        let mut pending: Option<Vec<Value>> = None;
        let flush = |events: &mut Vec<Event>, pending: &mut Option<Vec<Value>>, like: &Event| {
            if let Some(segs) = pending.take().filter(|s| !s.is_empty()) {
                let mut e = like.clone();
                e.actor = Actor::System;
                e.kind = EventKind::Annotation {
                    key: turn_key.to_string(),
                    value: serde_json::json!({ "segments": segs }),
                };
                events.push(e);
            }
        };
        for event in session_events.drain(..) {
            match &event.kind {
                EventKind::Message { .. } => {
                    if let Some(last) = events.last().cloned() {
                        flush(&mut events, &mut pending, &last);
                    }
                    let n = position.map_or(0, |p| p + 1);
                    position = Some(n);
                    pending = Some(segments_of(marked, n));
                    events.push(event);
                }
                EventKind::Annotation { key, value } if key == turn_key && pending.is_some() => {
                    let (key, mut value) = (key.clone(), value.clone());
                    let segs = pending.take().unwrap_or_default();
                    if let Value::Object(fields) = &mut value {
                        fields.shift_remove("segments");
                        if !segs.is_empty() {
                            fields.insert("segments".into(), Value::Array(segs));
                        }
                    }
                    let mut e = event;
                    e.kind = EventKind::Annotation { key, value };
                    events.push(e);
                }
                _ => {
                    if let Some(last) = events.last().cloned() {
                        flush(&mut events, &mut pending, &last);
                    }
                    events.push(event);
                }
            }
        }
        if let Some(last) = events.last().cloned() {
            flush(&mut events, &mut pending, &last);
        }
        for (i, e) in events.iter_mut().enumerate() {
            e.seq = i as u64 + 1;
        }
        *session_events = events;
        true
    }
}
