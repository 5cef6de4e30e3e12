//! Payments: one row per participant placed in a session, and one per participant of an
//! evaluation study (their own log, no session), priced by the study's payment scheme
//! (`payment:` in the study file, [`wozkit_core::model::Payment`]); and the check of a completion
//! code against the key in the data directory. Read-only.
//!
//! The rules of dialogue sessions, one test each in `tests/api/payments.rs`:
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
//!
//! The rules of evaluation participants (a participant log, `log-<participant>`, whose
//! participant has no session; one with a session is priced by the session), tested in
//! `tests/api/eval_payments.rs`. The platform treats a submitted code as a finished submission, so
//! a code is what the study gives to those it pays: whether one is given at each ending is the
//! study's word (`evaluation.no_items.code`, `onboarding.fail.code`, `gold.fail.code`).
//! 9. **Status**, first that applies: `screened_onboarding`, `screened_gold` or
//!    `screened_blocklist` when the log has `ScreenedOut` (its reason); `no_items` when no
//!    ordinary item was judged and either a code was issued before the completion page (the
//!    "nothing left to judge" page gives one) or, without a code, the participant stands on a
//!    judging page having never held an ordinary item nor holding any; `completed` when the
//!    participant has a completion code; otherwise `abandoned`.
//! 10. **Counts.** `judgments`: ordinary judgments counted towards their item; `surplus`:
//!     judgments kept after their lease expired when the item already had its N;
//!     `surplus_paid`: the study's `evaluation.pay_surplus`; `items_paid`: `judgments`, plus
//!     `surplus` when those are paid, plus void arena battles (a system failed, not the worker:
//!     the battle is owed again but the worker's time is paid); `gold_accuracy`: attention checks answered right over
//!     those judged, to three decimals (empty when none was judged). Dialogue rows leave these
//!     empty; an unknown study leaves `surplus_paid` and `items_paid` empty.
//! 11. **Full rate.** `completed`, and `screened_gold` with a code (they passed onboarding and
//!     judged in good faith until the check), get `base` + `per_minute` × minutes, minutes
//!     counted from entry (the participant's creation) to the code (`CompletionIssued`), or to
//!     `ScreenedOut` when screened, else to the log's last event; capped and rounded as rule 6;
//!     no bonus (its condition reads a dialogue's world); plus the scheme's `per_item` rate
//!     times `items_paid` (so `pay_surplus` decides whether surplus judgments are paid), in the
//!     total only: total = base + per_minute × minutes + per_item × items_paid.
//! 12. **Short rate.** `screened_onboarding` and `no_items` with a code get the scheme's
//!     `no_partner` rate (turned away before the task, as a participant with no partner: the
//!     platform's fixed screen-out payment); base, minutes and bonus are 0.
//! 13. **Unpaid.** Every other row (no code, `abandoned`, `screened_blocklist`) is 0, as rule 4:
//!     the researcher decides by hand (a worker screened on gold without a code may be rejected).
//!
//! The researchers' review (the study's review log, `review-<study>`; see [`crate::review`]),
//! on every row, tested in `tests/api/review.rs`:
//! 14. **Decision.** `decision` is the participant's current review decision, `approve` or
//!     `reject` (the later supersedes the earlier); empty when none was taken.
//! 15. **Review bonus.** `review_bonus` is the participant's current review bonus (the last one
//!     given; 0 when none, or when the last one was 0), in the study's currency to the cent: what
//!     sending the decisions pays on the platform in all. It is apart from the scheme's `bonus`.
//! 16. **Total with bonus.** `total_with_bonus` is `total` + `review_bonus`, in cents; a
//!     rejection changes no amount (the platform pays no reward for it; the table still shows
//!     what the scheme would pay, so the researcher sees what was turned down).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use serde::Serialize;
use wozkit_core::engine::{replay, vars};
use wozkit_core::event::{EndReason, Event, EventKind, ItemPool, Role, ScreenReason};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{ClockStart, Payment};
use wozkit_store::{
    Participant, Platform, SessionFilter, SessionKind, SessionRecord, Store, StoreError,
};

use super::{RecordsError, sessions};
use crate::completion::{CodeKey, normalize};

/// One line of the payment table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PaymentRow {
    pub participant: String,
    pub platform: String,
    /// The platform's ids, `key=value` joined with `;`.
    pub crowd_ids: String,
    /// The platform's worker id (Prolific PID, MTurk WorkerId); empty in the lab.
    pub worker_id: String,
    pub study: String,
    /// The dialogue session, or an evaluation participant's own log.
    pub session: String,
    pub role: String,
    /// Dialogue sessions: `completed`, `no_partner`, or `incomplete` (no completion code yet).
    /// Evaluation participants: `completed`, `screened_onboarding`, `screened_gold`,
    /// `screened_blocklist`, `no_items` or `abandoned`.
    pub status: String,
    /// The completion code (for a screened-out participant, the code of their ending).
    pub completion_code: String,
    /// Evaluation: ordinary judgments counted towards their items.
    pub judgments: Option<u32>,
    /// Evaluation: judgments kept after their lease expired, when the item had its N already.
    pub surplus: Option<u32>,
    /// Evaluation: whether surplus judgments are paid (the study's `evaluation.pay_surplus`).
    pub surplus_paid: Option<bool>,
    /// Evaluation: judgments paid, counted plus (when paid) surplus.
    pub items_paid: Option<u32>,
    /// Evaluation: share of attention checks answered right, to three decimals.
    pub gold_accuracy: Option<f64>,
    pub currency: String,
    pub base: f64,
    /// Minutes paid: from the clock start, capped, in hundredths.
    pub minutes: f64,
    pub bonus: f64,
    pub total: f64,
    /// The current review decision: `approve`, `reject`, or empty (rule 14).
    pub decision: String,
    /// The current review bonus (rule 15).
    pub review_bonus: f64,
    /// `total` + `review_bonus` (rule 16).
    pub total_with_bonus: f64,
}

/// Prices every participant of every session, then every evaluation participant without a
/// session (of `study_filter`, if given; test participants only when `include_test`).
/// `study_of` gives the loaded study for a study id (its payment scheme, clock rule, bonus
/// condition and evaluation settings).
pub async fn payments(
    store: &dyn Store,
    study_filter: Option<&str>,
    study_of: &(dyn Fn(&str) -> Option<Arc<LoadedStudy>> + Sync),
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
        // A simulated user's session (a researcher's pilot) is nobody's pay, tests or not.
        if wozkit_core::simulated_users::is_simulated(&events) {
            continue;
        }
        for p in people {
            // A researcher who played a role (took over a seat) is staff, not a worker.
            if p.platform == Platform::Researcher {
                continue;
            }
            rows.push(price(&record, &p, &events, study.as_deref()));
        }
    }
    for (log, p) in evaluation_participants(store, study_filter).await? {
        // A simulated user (a researcher's pilot) is nobody's pay, tests or not.
        if (!include_test && p.is_test()) || p.simulated_user().is_some() {
            continue;
        }
        let study = cache
            .entry(log.study_id.clone())
            .or_insert_with(|| study_of(&log.study_id))
            .clone();
        let events = store.events(&log.id, 0).await?;
        rows.push(price_evaluation(&log, &p, &events, study.as_deref()));
    }
    add_review(store, &mut rows).await?;
    Ok(rows)
}

/// Rules 14 to 16: the review decision and bonus of every row, from its study's review log.
async fn add_review(store: &dyn Store, rows: &mut [PaymentRow]) -> Result<(), StoreError> {
    let mut logs: HashMap<String, HashMap<String, super::review_log::Reviewed>> = HashMap::new();
    for row in rows {
        if !logs.contains_key(&row.study) {
            let review = super::review_log::read(store, &row.study).await?;
            logs.insert(row.study.clone(), review);
        }
        let Some(r) = logs.get(&row.study).and_then(|l| l.get(&row.participant)) else {
            continue;
        };
        let cents = r.bonus_cents();
        row.decision = r.decision_str().to_string();
        row.review_bonus = cents as f64 / 100.0;
        // In units of 10⁻⁸, as `by_time`: a cent is 10⁶ of them.
        row.total_with_bonus = cents_of(micros(row.total) * 100 + i128::from(cents) * 1_000_000);
    }
    Ok(())
}

/// Every participant log (of `study`, if given) with its participant, when that participant
/// has no session (one placed in a session is priced by the session).
async fn evaluation_participants(
    store: &dyn Store,
    study: Option<&str>,
) -> Result<Vec<(SessionRecord, Participant)>, StoreError> {
    let logs = store
        .list_sessions(&SessionFilter {
            study_id: study.map(str::to_string),
            kind: SessionKind::Participant,
            ..SessionFilter::default()
        })
        .await?;
    let mut out = Vec::with_capacity(logs.len());
    for log in logs {
        let Some(id) = log.id.strip_prefix("log-") else {
            continue;
        };
        if let Some(p) = store.participant(id).await?
            && p.session_id.is_none()
        {
            out.push((log, p));
        }
    }
    Ok(out)
}

/// Rule 2: where the participant stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Completed,
    NoPartner,
    Incomplete,
    ScreenedOnboarding,
    ScreenedGold,
    ScreenedBlocklist,
    NoItems,
    Abandoned,
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
            Status::ScreenedOnboarding => "screened_onboarding",
            Status::ScreenedGold => "screened_gold",
            Status::ScreenedBlocklist => "screened_blocklist",
            Status::NoItems => "no_items",
            Status::Abandoned => "abandoned",
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
        (Some((_, pay)), Status::NoPartner) => short_rate(pay),
        (Some((study, pay)), Status::Completed) => completed(record, events, study, pay),
        _ => Amounts::default(),
    };
    let mut row = row_of(record, p, status, amounts);
    row.currency = scheme.map_or_else(String::new, |(_, pay)| pay.currency.clone());
    row
}

/// The row of a participant with its status and amounts; no evaluation counts, no currency.
fn row_of(record: &SessionRecord, p: &Participant, status: Status, amounts: Amounts) -> PaymentRow {
    PaymentRow {
        participant: p.id.clone(),
        platform: p.platform.as_str().to_string(),
        crowd_ids: p
            .external_ids
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";"),
        worker_id: p.worker_id.clone().unwrap_or_default(),
        study: record.study_id.clone(),
        session: record.id.clone(),
        role: p.role.map_or("", |r| r.as_str()).to_string(),
        status: status.as_str().to_string(),
        completion_code: p.completion_code.clone().unwrap_or_default(),
        judgments: None,
        surplus: None,
        surplus_paid: None,
        items_paid: None,
        gold_accuracy: None,
        currency: String::new(),
        base: amounts.base,
        minutes: amounts.minutes,
        bonus: amounts.bonus,
        total: amounts.total,
        decision: String::new(),
        review_bonus: 0.0,
        total_with_bonus: amounts.total,
    }
}

/// Rule 3 and 12: the scheme's fixed rate for someone turned away before the task.
fn short_rate(pay: &Payment) -> Amounts {
    Amounts {
        total: cents_of(micros(pay.no_partner) * 100),
        ..Amounts::default()
    }
}

/// What an evaluation participant's log says (rules 9 and 10).
#[derive(Default)]
struct Tally {
    counted: u32,
    surplus: u32,
    /// Arena battles voided by a failing system.
    void: u32,
    /// Ordinary judgments of any kind (counted, surplus, or neither).
    ordinary_judged: u32,
    gold_judged: u32,
    gold_correct: u32,
    /// Claims of ordinary items.
    ordinary_claims: u32,
    /// Leases claimed and neither judged nor returned.
    open_claims: usize,
    /// The first screening, with its time.
    screened: Option<(ScreenReason, u64)>,
    /// When the completion code was first issued.
    code_at: Option<u64>,
    last_at: Option<u64>,
}

impl Tally {
    fn of(events: &[Event]) -> Tally {
        let mut t = Tally::default();
        let mut open: HashSet<&str> = HashSet::new();
        for e in events {
            t.last_at = Some(e.at_ms);
            match &e.kind {
                EventKind::ItemClaimed { lease, pool, .. } => {
                    open.insert(lease);
                    if *pool == ItemPool::Item {
                        t.ordinary_claims += 1;
                    }
                }
                EventKind::ItemReturned { lease, .. } => {
                    open.remove(lease.as_str());
                }
                EventKind::Judged(j) => {
                    open.remove(j.lease.as_str());
                    match j.pool {
                        ItemPool::Item => {
                            t.ordinary_judged += 1;
                            t.counted += u32::from(j.counted);
                            t.surplus += u32::from(j.surplus);
                            t.void += u32::from(j.void);
                        }
                        ItemPool::Gold => {
                            if let Some(right) = j.gold_correct {
                                t.gold_judged += 1;
                                t.gold_correct += u32::from(right);
                            }
                        }
                    }
                }
                EventKind::ScreenedOut { reason } if t.screened.is_none() => {
                    t.screened = Some((*reason, e.at_ms));
                }
                EventKind::CompletionIssued { .. } if t.code_at.is_none() => {
                    t.code_at = Some(e.at_ms);
                }
                _ => {}
            }
        }
        t.open_claims = open.len();
        t
    }

    /// Rule 9.
    fn status(&self, p: &Participant) -> Status {
        if let Some((reason, _)) = self.screened {
            return match reason {
                ScreenReason::Onboarding => Status::ScreenedOnboarding,
                ScreenReason::Gold => Status::ScreenedGold,
                ScreenReason::Blocklist => Status::ScreenedBlocklist,
            };
        }
        // The stored flow step is `<index>:<page kind>`.
        let page = p.flow_step.split_once(':').map_or("", |(_, kind)| kind);
        let judged = self.ordinary_judged > 0;
        match &p.completion_code {
            Some(_) if !judged && page != "completion" => Status::NoItems,
            Some(_) => Status::Completed,
            None if !judged
                && self.ordinary_claims == 0
                && self.open_claims == 0
                && matches!(page, "rate" | "compare") =>
            {
                Status::NoItems
            }
            None => Status::Abandoned,
        }
    }

    /// Rule 10: the share of attention checks answered right, to three decimals.
    fn gold_accuracy(&self) -> Option<f64> {
        (self.gold_judged > 0).then(|| {
            let thousandths = (u64::from(self.gold_correct) * 2000 + u64::from(self.gold_judged))
                / (2 * u64::from(self.gold_judged));
            thousandths as f64 / 1000.0
        })
    }
}

/// Rules 9 to 13: the row of an evaluation participant.
fn price_evaluation(
    log: &SessionRecord,
    p: &Participant,
    events: &[Event],
    study: Option<&LoadedStudy>,
) -> PaymentRow {
    let tally = Tally::of(events);
    let status = tally.status(p);
    let pay = study.and_then(|s| s.study.payment.as_ref());
    let paid_surplus = study
        .and_then(|s| s.study.evaluation.as_ref())
        .is_some_and(|ev| ev.pay_surplus);
    let has_code = p.completion_code.is_some();
    let amounts = match (pay, status) {
        (Some(pay), Status::Completed) | (Some(pay), Status::ScreenedGold) if has_code => {
            let end = tally
                .screened
                .map(|(_, at)| at)
                .or(tally.code_at)
                .or(tally.last_at)
                .unwrap_or(p.created_at_ms);
            let ms = i128::from(end.saturating_sub(p.created_at_ms));
            let items = u64::from(tally.counted)
                + u64::from(tally.void)
                + if paid_surplus {
                    u64::from(tally.surplus)
                } else {
                    0
                };
            by_time(pay, Some(ms), 0.0, items)
        }
        (Some(pay), Status::ScreenedOnboarding | Status::NoItems) if has_code => short_rate(pay),
        _ => Amounts::default(),
    };
    let pay_surplus = study
        .and_then(|s| s.study.evaluation.as_ref())
        .map(|ev| ev.pay_surplus);
    let mut row = row_of(log, p, status, amounts);
    row.currency = pay.map_or_else(String::new, |pay| pay.currency.clone());
    row.judgments = Some(tally.counted);
    row.surplus = Some(tally.surplus);
    row.surplus_paid = pay_surplus;
    row.items_paid =
        pay_surplus.map(|paid| tally.counted + tally.void + if paid { tally.surplus } else { 0 });
    row.gold_accuracy = tally.gold_accuracy();
    row
}

/// Rules 5 to 8: what a completed participant is paid.
fn completed(
    record: &SessionRecord,
    events: &[Event],
    study: &LoadedStudy,
    pay: &Payment,
) -> Amounts {
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
    by_time(pay, clocked_ms(record, events, study), bonus, 0)
}

/// Rules 5, 6 and 8 (and 11): base, the minutes of `ms` (none when `None`) capped and paid at
/// the scheme's rate, `bonus`, and `items` judged items at the scheme's `per_item` rate.
fn by_time(pay: &Payment, ms: Option<i128>, bonus: f64, items: u64) -> Amounts {
    let mut hundredths = ms.map_or(0, |ms| (ms + 300) / 600);
    if pay.max_minutes > 0.0 {
        hundredths = hundredths.min(micros(pay.max_minutes) / 10_000);
    }
    // In units of 10⁻⁸: millionths of a currency unit times hundredths of a minute.
    let units = micros(pay.base) * 100
        + micros(pay.per_minute) * hundredths
        + micros(bonus) * 100
        + micros(pay.per_item) * 100 * i128::from(items);
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

/// The columns of the table, as [`PaymentRow`] names its fields.
pub const COLUMNS: [&str; 22] = [
    "participant",
    "platform",
    "crowd_ids",
    "worker_id",
    "study",
    "session",
    "role",
    "status",
    "completion_code",
    "judgments",
    "surplus",
    "surplus_paid",
    "items_paid",
    "gold_accuracy",
    "currency",
    "base",
    "minutes",
    "bonus",
    "total",
    "decision",
    "review_bonus",
    "total_with_bonus",
];

/// Writes the rows as CSV with a header line.
pub fn write_csv(rows: &[PaymentRow], out: impl Write) -> Result<(), RecordsError> {
    let mut w = csv::Writer::from_writer(out);
    let csv_err = |e: csv::Error| RecordsError::Csv(e.to_string());
    if rows.is_empty() {
        w.write_record(COLUMNS).map_err(csv_err)?;
    }
    for r in rows {
        w.serialize(r).map_err(csv_err)?;
    }
    w.flush().map_err(|e| RecordsError::Csv(e.to_string()))
}

/// What a code check found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The code is this participant's, signed by this data directory's key; `session` is their
    /// dialogue session, or for an evaluation participant their own log.
    Valid {
        participant: Box<Participant>,
        session: Option<String>,
    },
    /// No participant of this data directory has this code.
    Unknown,
    /// The data directory has no code key (no server ever ran on it).
    NoKey,
}

/// Checks a completion code typed by a participant (case and look-alike letters forgiven): of a
/// participant placed in a session, or of an evaluation participant (completion or screening
/// code alike).
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
    for (log, p) in evaluation_participants(store, None).await? {
        if key.code(&p.id) == wanted {
            return Ok(Verdict::Valid {
                session: Some(log.id),
                participant: Box::new(p),
            });
        }
    }
    Ok(Verdict::Unknown)
}
