//! The studies' declared mappings onto the datasets' vocabularies (`datasets:` in a study file,
//! [`wozkit_core::datasets`]) as the exports use them: a live session's study (its
//! `session_started`) names its mapping; a wizard message said with a mapped state, label or
//! fixed option gets the mapped acts, the values of their columns read from the row the wizard
//! selected last before it; mapped domains and slots name the session's states in the format.
//! What has no mapping is written as before: only where its names are already the format's,
//! and otherwise it stays in the sidecar.
//!
//! The store keeps no study definitions, so an export finds a study's mapping among those it is
//! given ([`Mappings::with_study`], `wozkit export --mapping STUDY`), then among the built-in
//! studies' ([`Mappings::builtin`]), by study id.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use wozkit_core::database::{Row, value_text};
use wozkit_core::datasets::{ActMapping, Datasets, Taskmaster1Mapping, split_act};
use wozkit_core::event::{EventKind, MessageSource};
use wozkit_core::model::Study;

use crate::session::{Format, ImportedSession};

/// The mappings of studies by study id.
#[derive(Clone, Debug, Default)]
pub struct Mappings {
    by_study: HashMap<String, Arc<Datasets>>,
}

impl Mappings {
    /// No mappings: every session is written with the names it has.
    pub fn none() -> &'static Mappings {
        static NONE: OnceLock<Mappings> = OnceLock::new();
        NONE.get_or_init(Mappings::default)
    }

    /// The mappings of the built-in studies (loaded once).
    pub fn builtin() -> &'static Mappings {
        static BUILTIN: OnceLock<Mappings> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let mut m = Mappings::default();
            for name in wozkit_core::load::builtin_names() {
                if let Ok(study) = wozkit_core::load::load_builtin(&name) {
                    m.add(&study.study);
                }
            }
            m
        })
    }

    /// The built-in studies' mappings and `studies`' (which replace a built-in study's of the
    /// same id).
    pub fn with_studies<'a>(studies: impl IntoIterator<Item = &'a Study>) -> Mappings {
        let mut m = Mappings::builtin().clone();
        for s in studies {
            m.add(s);
        }
        m
    }

    /// Adds (or replaces) the mapping of `study`; a study without one removes any of its id.
    pub fn add(&mut self, study: &Study) {
        if study.datasets.is_empty() {
            self.by_study.remove(&study.id);
        } else {
            self.by_study
                .insert(study.id.clone(), Arc::new(study.datasets.clone()));
        }
    }

    /// The mapping of `study`'s sessions, if declared.
    pub fn of_study(&self, study: &str) -> Option<&Datasets> {
        self.by_study.get(study).map(Arc::as_ref)
    }

    /// The mapping of the session's study (from its `session_started`).
    pub fn of_session(&self, session: &ImportedSession) -> Option<&Datasets> {
        let study = session.events.iter().find_map(|e| match &e.kind {
            EventKind::SessionStarted { study, .. } => Some(study.as_str()),
            _ => None,
        })?;
        self.of_study(study)
    }

    /// The act mapping of the session's study for `format` (MultiWOZ 2.1, CrossWOZ, ConvLab-3).
    pub fn acts_for(&self, session: &ImportedSession, format: Format) -> Option<&ActMapping> {
        let d = self.of_session(session)?;
        match format {
            Format::MultiWoz21 => d.multiwoz.as_ref(),
            Format::CrossWoz => d.crosswoz.as_ref(),
            Format::ConvLab3 => d.convlab3.as_ref(),
            _ => None,
        }
    }

    /// The Taskmaster-1 scenario of the session's study.
    pub fn taskmaster1_for(&self, session: &ImportedSession) -> Option<&Taskmaster1Mapping> {
        self.of_session(session)?.taskmaster1.as_ref()
    }
}

/// One act a mapping gives a message, before a format writes it: `domain` and `intent` split
/// from the mapped `Domain-Intent`; `slot` and `value` `None` where the act has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MappedAct {
    pub domain: String,
    pub intent: String,
    pub slot: Option<String>,
    pub value: Option<String>,
}

/// The acts `mapping` gives the messages at `positions` (among the session's messages): for
/// each wizard message said with a mapped state (by id or label) or fixed option, its acts in
/// the mapping's order. An act reading a column is left out when no row of its table was
/// selected before the message (or the row lacks the column); acts repeated within the turn are
/// written once.
pub(crate) fn mapped_acts(
    session: &ImportedSession,
    positions: &[usize],
    mapping: &ActMapping,
) -> Vec<MappedAct> {
    let mut out: Vec<MappedAct> = vec![];
    // The last row selected in each table, in selection order (the last is the newest).
    let mut selected: Vec<(&str, &Row)> = vec![];
    let mut n = 0usize;
    for e in &session.events {
        match &e.kind {
            EventKind::DbSelected { table, row, .. } => {
                selected.retain(|(t, _)| t != table);
                selected.push((table, row));
            }
            EventKind::Message { source, .. } => {
                let here = positions.contains(&n);
                n += 1;
                if !here {
                    continue;
                }
                for act in acts_of(source, mapping, &selected) {
                    if !out.contains(&act) {
                        out.push(act);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The acts of one message said with `source`, over the rows selected before it.
fn acts_of(
    source: &MessageSource,
    mapping: &ActMapping,
    selected: &[(&str, &Row)],
) -> Vec<MappedAct> {
    let acts = match source {
        MessageSource::State { state, label, .. } => {
            mapping.acts.get(state).or_else(|| mapping.acts.get(label))
        }
        MessageSource::Fixed { id, label, .. } => {
            mapping.acts.get(id).or_else(|| mapping.acts.get(label))
        }
        MessageSource::Free => None,
    };
    let Some(acts) = acts else {
        return vec![];
    };
    let mut out = vec![];
    for (_, act) in acts.iter() {
        let spec = act.spec();
        let Some((domain, intent)) = split_act(&spec.act) else {
            continue;
        };
        let value = match &spec.column {
            Some(column) => {
                let row = selected
                    .iter()
                    .rev()
                    .find(|(t, _)| spec.table.as_deref().is_none_or(|x| x == *t))
                    .map(|(_, r)| *r);
                match row.and_then(|r| r.get(column)) {
                    Some(v) => Some(value_text(v)),
                    None => continue,
                }
            }
            None => spec.value.clone(),
        };
        out.push(MappedAct {
            domain: domain.to_string(),
            intent: intent.to_string(),
            slot: spec.slot.clone(),
            value,
        });
    }
    out
}

/// Whether `mapping` maps the state, label or fixed option of `source`.
pub(crate) fn is_mapped(source: &MessageSource, mapping: &ActMapping) -> bool {
    match source {
        MessageSource::State { state, label, .. } => {
            mapping.acts.contains_key(state) || mapping.acts.contains_key(label)
        }
        MessageSource::Fixed { id, label, .. } => {
            mapping.acts.contains_key(id) || mapping.acts.contains_key(label)
        }
        MessageSource::Free => false,
    }
}

/// The format's name of one of the study's domains: the mapped one, else the domain itself.
pub(crate) fn domain<'a>(mapping: Option<&'a ActMapping>, ours: &'a str) -> &'a str {
    mapping
        .and_then(|m| m.domains.get(ours))
        .map_or(ours, String::as_str)
}

/// The format's name of one of the study's slots: the mapped one, else the slot itself.
pub(crate) fn slot<'a>(mapping: Option<&'a ActMapping>, ours: &'a str) -> &'a str {
    mapping
        .and_then(|m| m.slots.get(ours))
        .map_or(ours, String::as_str)
}
