//! Payments: one row per participant placed in a session, priced by the study's payment scheme
//! (`payment:` in the study file, [`wozkit_core::model::Payment`]); and the check of a completion
//! code against the key in the data directory. Read-only.
//!
//! The rules, one test each in `tests/api/payments.rs`:
//! 1. **Scheme.** A session is priced by the scheme of its study (by the session's study id). A
//!    study that is not given, or has no `payment:`, pays 0 on every row with an empty currency.
//! 2. **Status.** `no_partner` when the session ended because no partner came (reason
//!    `no_partner`) or the participant's completion code was issued as a no-partner code;
//!    otherwise `completed` when the participant has a completion code; otherwise `incomplete`.
//! 3. **No partner.** The total is the scheme's `no_partner` rate; base, minutes and bonus are 0.
//! 4. **Incomplete.** Every amount is 0: the scheme pays for a finished task, and someone who
//!    never reached the completion page has no code to submit. The researcher decides by hand.
//! 5. **Base.** A completed participant gets `base`.
//! 6. **Minutes.** Counted from when the session's clock started to when the session ended:
//!    - the clock start is the `ClockStarted` event. A study without a time limit logs none; its
//!      clock starts where `session.clock_starts` says: the `SessionStarted` event (`start`) or
//!      the first wizard message (`first_wizard_message`). A clock that never started pays no
//!      minutes (waiting for a partner, or for the wizard's first word, is not paid by minute);
//!    - the end is the `SessionEnded` event; a session without one counts to the end the store
//!      recorded, else to its last event; an end before the clock start counts 0;
//!    - at most `max_minutes` are paid (0 means no cap);
//!    - minutes are shown in hundredths of a minute (rounded half up from milliseconds) and
//!      paid as shown, at `per_minute`, so each row can be recomputed from its own columns.
//! 7. **Bonus.** A completed participant gets `bonus.amount` when `bonus.when` holds over the
//!    session's final state (every event replayed), 0 otherwise.
//! 8. **Total.** base + per_minute × minutes + bonus, in exact decimal arithmetic (the scheme's
//!    amounts taken to millionths, so 0.15 is 0.15 and not the float nearest to it), rounded to
//!    cents, halves away from zero.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use serde::Serialize;
use wozkit_core::engine::{replay, vars};
use wozkit_core::event::{EndReason, Event, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{ClockStart, Payment};
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
    /// Minutes paid: from the clock start, capped, in hundredths.
    pub minutes: f64,
    pub bonus: f64,
    pub total: f64,
}

/// Prices every participant of every session (of `study_filter`, if given; test sessions only
/// when `include_test`). `study_of` gives the
/// loaded study for a study id (its payment scheme, clock rule and bonus condition).
pub async fn payments(
    store: &dyn Store,
    study_filter: Option<&str>,
    study_of: &dyn Fn(&str) -> Option<Arc<LoadedStudy>>,
    include_test: bool,
) -> Result<Vec<PaymentRow>, StoreError> {
    let mut rows = vec![];
    let mut cache: HashMap<String, Option<Arc<LoadedStudy>>> = HashMap::new();
    for record in sessions(store, study_filter).await? {
        let people = store.participants_in_session(&record.id).await?;
        // A test session (`/try`, a lab link with `test=1`) is nobody's pay.
        if people.is_empty() || (!include_test && people.iter().any(Participant::is_test)) {
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

/// Rule 2: where the participant stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Completed,
    NoPartner,
    Incomplete,
}

impl Status {
    fn of(record: &SessionRecord, p: &Participant, events: &[Event]) -> Status {
        let no_partner = record
            .ended
            .is_some_and(|e| e.reason == EndReason::NoPartner)
            || events.iter().any(|e| {
                matches!(&e.kind, EventKind::CompletionIssued { no_partner: true, role, .. }
                    if Some(*role) == p.role)
            });
        match (no_partner, &p.completion_code) {
            (true, _) => Status::NoPartner,
            (false, Some(_)) => Status::Completed,
            (false, None) => Status::Incomplete,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::NoPartner => "no_partner",
            Status::Incomplete => "incomplete",
        }
    }
}

/// The amounts of one row.
#[derive(Default)]
struct Amounts {
    base: f64,
    minutes: f64,
    bonus: f64,
    total: f64,
}

fn price(
    record: &SessionRecord,
    p: &Participant,
    events: &[Event],
    study: Option<&LoadedStudy>,
) -> PaymentRow {
    let status = Status::of(record, p, events);
    let scheme = study.and_then(|s| Some((s, s.study.payment.as_ref()?)));
    let amounts = match (scheme, status) {
        (None, _) | (Some(_), Status::Incomplete) => Amounts::default(),
        (Some((_, pay)), Status::NoPartner) => Amounts {
            total: cents_of(micros(pay.no_partner) * 100),
            ..Amounts::default()
        },
        (Some((study, pay)), Status::Completed) => completed(record, events, study, pay),
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
        status: status.as_str().to_string(),
        completion_code: p.completion_code.clone().unwrap_or_default(),
        currency: scheme.map_or_else(String::new, |(_, pay)| pay.currency.clone()),
        base: amounts.base,
        minutes: amounts.minutes,
        bonus: amounts.bonus,
        total: amounts.total,
    }
}

/// Rules 5 to 8: what a completed participant is paid.
fn completed(
    record: &SessionRecord,
    events: &[Event],
    study: &LoadedStudy,
    pay: &Payment,
) -> Amounts {
    let mut hundredths = clocked_ms(record, events, study).map_or(0, |ms| (ms + 300) / 600);
    if pay.max_minutes > 0.0 {
        hundredths = hundredths.min(micros(pay.max_minutes) / 10_000);
    }
    let holds = || {
        study.compiled.bonus_when.as_ref().is_some_and(|c| {
            let state = replay(study, &record.id, events);
            c.holds(&vars(study, &state))
        })
    };
    let bonus = match &pay.bonus {
        Some(b) if holds() => b.amount,
        _ => 0.0,
    };
    // In units of 10⁻⁸: millionths of a currency unit times hundredths of a minute.
    let units = micros(pay.base) * 100 + micros(pay.per_minute) * hundredths + micros(bonus) * 100;
    Amounts {
        base: pay.base,
        minutes: hundredths as f64 / 100.0,
        bonus,
        total: cents_of(units),
    }
}

/// Rule 6: milliseconds from the clock start to the session end; `None` when the clock never
/// started.
fn clocked_ms(record: &SessionRecord, events: &[Event], study: &LoadedStudy) -> Option<i128> {
    let at = |want: &dyn Fn(&EventKind) -> bool| events.iter().find(|e| want(&e.kind));
    let start = at(&|k| matches!(k, EventKind::ClockStarted { .. })).or_else(|| {
        match study.study.session.clock_starts {
            ClockStart::Start => at(&|k| matches!(k, EventKind::SessionStarted { .. })),
            ClockStart::FirstWizardMessage => at(&|k| {
                matches!(
                    k,
                    EventKind::Message {
                        role: Role::Wizard,
                        ..
                    }
                )
            }),
        }
    })?;
    let end = at(&|k| matches!(k, EventKind::SessionEnded { .. }))
        .map(|e| e.at_ms)
        .or(record.ended.map(|e| e.at_ms))
        .or(events.last().map(|e| e.at_ms))
        .unwrap_or(start.at_ms);
    Some(i128::from(end.saturating_sub(start.at_ms)))
}

/// An amount of the scheme in millionths (exact for any amount written with six decimals).
fn micros(amount: f64) -> i128 {
    (amount * 1e6).round() as i128
}

/// Rounds 10⁻⁸ units to cents, halves away from zero, as a currency amount.
fn cents_of(units: i128) -> f64 {
    let half = if units < 0 { -500_000 } else { 500_000 };
    ((units + half) / 1_000_000) as f64 / 100.0
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
