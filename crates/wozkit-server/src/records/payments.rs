//! Payments: one row per participant placed in a session, priced by the study's payment scheme
//! (the no-partner rate for someone who never got a partner, otherwise base, plus per minute up to
//! the cap, plus the bonus when its condition holds over the session's final state); and the
//! check of a completion code against the key in the data directory.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use serde::Serialize;
use wozkit_core::engine::{replay, vars};
use wozkit_core::event::{EndReason, EventKind};
use wozkit_core::load::LoadedStudy;
use wozkit_store::{Participant, SessionRecord, Store, StoreError};

use super::{RecordsError, sessions};
use crate::completion::{CodeKey, normalize};

/// One line of the payment table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PaymentRow {
    pub participant: String,
    pub platform: String,
    /// The platform's ids, `key=value` joined with `;`.
    pub crowd_ids: String,
    pub study: String,
    pub session: String,
    pub role: String,
    /// `completed`, `no_partner`, or `incomplete` (no completion code yet).
    pub status: String,
    pub completion_code: String,
    pub currency: String,
    pub base: f64,
    pub minutes: f64,
    pub bonus: f64,
    pub total: f64,
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Prices every participant of every session (of `study_filter`, if given). `study_of` gives the
/// loaded study for a study id (its payment scheme and bonus condition); without one, amounts
/// are 0.
pub async fn payments(
    store: &dyn Store,
    study_filter: Option<&str>,
    study_of: &dyn Fn(&str) -> Option<Arc<LoadedStudy>>,
) -> Result<Vec<PaymentRow>, StoreError> {
    let mut rows = vec![];
    let mut cache: HashMap<String, Option<Arc<LoadedStudy>>> = HashMap::new();
    for record in sessions(store, study_filter).await? {
        let people = store.participants_in_session(&record.id).await?;
        if people.is_empty() {
            continue;
        }
        let study = cache
            .entry(record.study_id.clone())
            .or_insert_with(|| study_of(&record.study_id))
            .clone();
        let events = store.events(&record.id, 0).await?;
        for p in people {
            rows.push(price(&record, &p, &events, study.as_deref()));
        }
    }
    Ok(rows)
}

fn price(
    record: &SessionRecord,
    p: &Participant,
    events: &[wozkit_core::event::Event],
    study: Option<&LoadedStudy>,
) -> PaymentRow {
    let no_partner = record.ended.is_some_and(|e| e.reason == EndReason::NoPartner)
        || events.iter().any(|e| matches!(&e.kind, EventKind::CompletionIssued { no_partner: true, role, .. } if Some(*role) == p.role));
    let status = match (&p.completion_code, no_partner) {
        (_, true) => "no_partner",
        (Some(_), false) => "completed",
        (None, false) => "incomplete",
    };
    let scheme = study.and_then(|s| s.study.payment.as_ref());
    let start = events.first().map_or(record.created_at_ms, |e| e.at_ms);
    let end = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::SessionEnded { .. }))
        .or(events.last())
        .map_or(start, |e| e.at_ms);
    let (base, minutes, bonus, total) = match (scheme, no_partner) {
        (None, _) => (0.0, 0.0, 0.0, 0.0),
        (Some(pay), true) => (0.0, 0.0, 0.0, cents(pay.no_partner)),
        (Some(pay), false) => {
            let mut minutes = end.saturating_sub(start) as f64 / 60_000.0;
            if pay.max_minutes > 0.0 {
                minutes = minutes.min(pay.max_minutes);
            }
            let bonus = match (study, &pay.bonus) {
                (Some(study), Some(b)) => {
                    let s = replay(study, &record.id, events);
                    let holds = study
                        .compiled
                        .bonus_when
                        .as_ref()
                        .is_some_and(|c| c.holds(&vars(study, &s)));
                    if holds { b.amount } else { 0.0 }
                }
                _ => 0.0,
            };
            let minutes = cents(minutes);
            (
                pay.base,
                minutes,
                bonus,
                cents(pay.base + pay.per_minute * minutes + bonus),
            )
        }
    };
    PaymentRow {
        participant: p.id.clone(),
        platform: p.platform.as_str().to_string(),
        crowd_ids: p
            .external_ids
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";"),
        study: record.study_id.clone(),
        session: record.id.clone(),
        role: p.role.map_or("", |r| r.as_str()).to_string(),
        status: status.to_string(),
        completion_code: p.completion_code.clone().unwrap_or_default(),
        currency: scheme.map_or_else(String::new, |s| s.currency.clone()),
        base,
        minutes,
        bonus,
        total,
    }
}

/// Writes the rows as CSV with a header line.
pub fn write_csv(rows: &[PaymentRow], out: impl Write) -> Result<(), RecordsError> {
    let mut w = csv::Writer::from_writer(out);
    let csv_err = |e: csv::Error| RecordsError::Csv(e.to_string());
    if rows.is_empty() {
        w.write_record([
            "participant",
            "platform",
            "crowd_ids",
            "study",
            "session",
            "role",
            "status",
            "completion_code",
            "currency",
            "base",
            "minutes",
            "bonus",
            "total",
        ])
        .map_err(csv_err)?;
    }
    for r in rows {
        w.serialize(r).map_err(csv_err)?;
    }
    w.flush().map_err(|e| RecordsError::Csv(e.to_string()))
}

/// What a code check found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The code is this participant's, signed by this data directory's key.
    Valid {
        participant: Box<Participant>,
        session: Option<String>,
    },
    /// No participant of this data directory has this code.
    Unknown,
    /// The data directory has no code key (no server ever ran on it).
    NoKey,
}

/// Checks a completion code typed by a participant (case and look-alike letters forgiven).
pub async fn verify(store: &dyn Store, code: &str) -> Result<Verdict, StoreError> {
    let Some(key) = CodeKey::load(store).await? else {
        return Ok(Verdict::NoKey);
    };
    let wanted = normalize(code);
    for record in sessions(store, None).await? {
        for p in store.participants_in_session(&record.id).await? {
            if key.code(&p.id) == wanted {
                return Ok(Verdict::Valid {
                    session: p.session_id.clone(),
                    participant: Box::new(p),
                });
            }
        }
    }
    Ok(Verdict::Unknown)
}
