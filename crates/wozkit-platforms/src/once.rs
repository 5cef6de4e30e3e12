//! Paying once: a bonus payment recorded before and after every request that moves money, so
//! that timeouts, retries, restarts and two researchers pressing Send at once never pay a
//! worker twice.
//!
//! A payment is a [`PaymentRecord`] under one key of a [`Ledger`] (the store's meta table in
//! wozkit). It goes through these stages, each written with an atomic compare-and-set, so of
//! two callers only one moves it on:
//!
//! - `claimed`: someone ([`PaymentRecord::claimant`]) took it; nothing was sent yet.
//! - `set_up`: the platform's first step that pays nothing is done and its id recorded
//!   (Prolific's bulk bonus payment id); a retry pays that one instead of setting up another.
//! - `sending`: the pay request is about to go out; recorded first, with what the platform
//!   showed of each bonus before ([`RecordedBonus::before`]).
//! - `sent`: settled; each bonus says whether it was paid. `refused`: the platform refused
//!   the payment for certain and paid nothing.
//!
//! An uncertain answer (a timeout or a lost connection after sending, a 5xx) leaves the record
//! `sending`, and is resolved by asking the platform ([`Payer::bonuses_paid`]): a bonus whose
//! count of payments of its amount grew since `before` was paid. Nothing is sent again while
//! the platform does not show it and [`Policy::settle_ms`] has not passed since the request
//! (a claimant may still be waiting for its answer; Prolific pays bulk bonuses in the
//! background, in the minutes after the request). After that, a payment of which nothing
//! shows is sent again (the same set-up payment); one that shows partly is settled as it
//! shows, and the caller pays what is still owed under a new record.
//!
//! A claim that is neither `sending` nor settled and older than `settle_ms` was abandoned (its
//! claimant died before sending) and may be taken over.

/// For implementing [`Ledger`] without depending on `async-trait` directly.
pub use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Bonus, Payer, PlatformError};

/// Where payment records are kept: string values under keys, with an atomic compare-and-set.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// The value under `key`.
    async fn get(&self, key: &str) -> Result<Option<String>, String>;
    /// Sets `key` to `new` only if it holds `expected` now (`None`: absent); whether it did.
    async fn swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool, String>;
}

/// Where a payment stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Claimed,
    SetUp,
    Sending,
    Sent,
    Refused,
}

impl Stage {
    /// Whether the payment is over (nothing of it can still happen).
    pub fn settled(self) -> bool {
        matches!(self, Stage::Sent | Stage::Refused)
    }
}

/// One bonus of a payment and what is known of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedBonus {
    pub worker_id: String,
    pub submission_id: String,
    pub cents: u64,
    pub reason: String,
    /// Payments of exactly `cents` the platform showed on the submission before sending.
    #[serde(default)]
    pub before: Option<u64>,
    /// Paid (`true`), not paid (`false`), or not known yet.
    #[serde(default)]
    pub paid: Option<bool>,
}

impl RecordedBonus {
    fn bonus(&self) -> Bonus {
        Bonus {
            worker_id: self.worker_id.clone(),
            submission_id: self.submission_id.clone(),
            cents: self.cents,
            reason: self.reason.clone(),
        }
    }
}

/// A payment as the ledger holds it (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaymentRecord {
    /// The platform (`prolific`, `mturk`).
    pub platform: String,
    pub stage: Stage,
    pub bonuses: Vec<RecordedBonus>,
    /// The id of the platform's first step (Prolific's bulk bonus payment).
    #[serde(default)]
    pub prepared: Option<String>,
    /// Who moved it to its stage (a researcher, a command run), and when (ms since the epoch).
    pub claimant: String,
    pub since_ms: u64,
    /// The caller's own words about it (what it pays for).
    #[serde(default)]
    pub tag: String,
    /// The platform's last answer that was not a success.
    #[serde(default)]
    pub note: String,
    /// Which payment under its key this is: 1 for the first, one more than the payment it
    /// replaced for each later one. With the key, it names the payment (see [`PaymentRecord::id`]).
    #[serde(default)]
    pub number: u64,
    /// Cents paid under the same key by the payments this one replaced (each settled): with
    /// [`PaymentRecord::paid_cents`], everything ever paid under the key.
    #[serde(default)]
    pub paid_before: u64,
}

impl PaymentRecord {
    /// The payment's name: its key and number (`<key>#<number>`), unique under the key.
    pub fn id(&self, key: &str) -> String {
        format!("{key}#{}", self.number)
    }

    /// Cents paid under the key in all, this payment included as far as it is known paid.
    pub fn total_paid_cents(&self) -> u64 {
        self.paid_before + self.paid_cents()
    }

    /// Cents paid under the key in all, counting this payment's bonuses that may be paid.
    pub fn total_maybe_paid_cents(&self) -> u64 {
        self.paid_before + self.maybe_paid_cents()
    }

    /// Cents of the bonuses known paid.
    pub fn paid_cents(&self) -> u64 {
        self.bonuses
            .iter()
            .filter(|b| b.paid == Some(true))
            .map(|b| b.cents)
            .sum()
    }

    /// Cents of the bonuses that are paid or may be (not known to be unpaid).
    pub fn maybe_paid_cents(&self) -> u64 {
        self.bonuses
            .iter()
            .filter(|b| b.paid != Some(false) && self.stage != Stage::Refused)
            .map(|b| b.cents)
            .sum()
    }

    fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// How long a claim or an unresolved send is left to its claimant.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Milliseconds after a claim or a pay request during which nobody else moves the payment
    /// on, and an unresolved send is not sent again: longer than a request may take (the
    /// clients time out after a minute) and than the platform takes to show a payment.
    pub settle_ms: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            settle_ms: 15 * 60 * 1000,
        }
    }
}

/// What [`pay_once`] came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The payment is settled (`sent` or `refused`): the record says what was paid.
    Settled(PaymentRecord),
    /// Nothing was sent now: the payment is another claimant's, or its last send is not
    /// resolved yet. `why` says which.
    Pending { record: PaymentRecord, why: String },
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Reads the record under `key`.
pub async fn read(ledger: &dyn Ledger, key: &str) -> Result<Option<PaymentRecord>, String> {
    match ledger.get(key).await? {
        None => Ok(None),
        Some(raw) => serde_json::from_str(&raw)
            .map(Some)
            .map_err(|e| format!("payment record {key}: {e}")),
    }
}

/// A payment to start under a key (see [`pay_once`]).
#[derive(Clone, Copy, Debug)]
pub struct NewPayment<'a> {
    pub bonuses: &'a [Bonus],
    /// The caller's words about it, kept in the record (what it pays for).
    pub tag: &'a str,
    /// The settled record the caller read under the key and computed this payment after
    /// (`None`: the key was free). The new payment replaces it only if it is still there, so a
    /// payment settled meanwhile by someone else is never paid again on stale reckoning.
    pub replaces: Option<&'a PaymentRecord>,
}

/// Pays once under `key`: carries on the payment recorded there if it is not settled, else
/// starts `new` (when given, and the key holds what `new.replaces` says). `claimant` names who
/// is paying (it must differ between concurrent callers). Ledger failures are errors; platform
/// failures are in the record's `note`.
pub async fn pay_once(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    new: Option<NewPayment<'_>>,
    claimant: &str,
    policy: Policy,
) -> Result<Outcome, String> {
    let mut new = new.filter(|n| !n.bonuses.is_empty());
    // Every pass moves the record one stage on (or finds it moved by someone else); bounded
    // so that a ledger that never keeps a swap cannot loop forever.
    for _ in 0..16 {
        let raw = ledger.get(key).await?;
        let rec: Option<PaymentRecord> = match &raw {
            None => None,
            Some(r) => {
                Some(serde_json::from_str(r).map_err(|e| format!("payment record {key}: {e}"))?)
            }
        };
        let now = now_ms();
        let fresh = |r: &PaymentRecord| now.saturating_sub(r.since_ms) < policy.settle_ms;
        let start = match (&rec, &new) {
            (None, Some(n)) => n.replaces.is_none(),
            (Some(r), Some(n)) => r.stage.settled() && n.replaces == Some(r),
            _ => false,
        };
        if let (true, Some(n)) = (start, new.take()) {
            let record = claimed_payment(payer, n, claimant, now);
            ledger.swap(key, raw.as_deref(), &record.to_json()).await?;
            continue;
        }
        let Some(rec) = rec else {
            return Err(format!("no payment record {key}"));
        };
        let raw = raw.unwrap_or_default();
        let mine = rec.claimant == claimant;
        let pass = match rec.stage {
            Stage::Sent | Stage::Refused => Pass::Done(Outcome::Settled(rec)),
            Stage::Claimed | Stage::SetUp if !mine && fresh(&rec) => Pass::Done(Outcome::Pending {
                why: format!("{} is paying it", rec.claimant),
                record: rec,
            }),
            Stage::Claimed | Stage::SetUp if !mine => {
                // Abandoned before anything was paid: take it over.
                let mut next = rec.clone();
                next.claimant = claimant.to_string();
                next.since_ms = now;
                ledger.swap(key, Some(&raw), &next.to_json()).await?;
                Pass::Again
            }
            Stage::Claimed => prepare_payment(payer, ledger, key, rec, &raw).await?,
            Stage::SetUp => send_payment(payer, ledger, key, rec, &raw, now, policy).await?,
            Stage::Sending => match resolve(payer, ledger, key, rec, policy, false).await? {
                Some(outcome) => Pass::Done(outcome),
                None => Pass::Again,
            },
        };
        if let Pass::Done(outcome) = pass {
            return Ok(outcome);
        }
    }
    Err(format!(
        "payment record {key} keeps changing under this caller"
    ))
}

/// What one pass over a record leaves: another pass, or the answer.
enum Pass<T> {
    Again,
    Done(T),
}

/// The record of `new` claimed by `claimant` at `now`, nothing of it paid yet.
fn claimed_payment(
    payer: &dyn Payer,
    n: NewPayment<'_>,
    claimant: &str,
    now: u64,
) -> PaymentRecord {
    PaymentRecord {
        platform: payer.platform().to_string(),
        stage: Stage::Claimed,
        bonuses: n
            .bonuses
            .iter()
            .map(|b| RecordedBonus {
                worker_id: b.worker_id.clone(),
                submission_id: b.submission_id.clone(),
                cents: b.cents,
                reason: b.reason.clone(),
                before: None,
                paid: None,
            })
            .collect(),
        prepared: None,
        claimant: claimant.to_string(),
        since_ms: now,
        tag: n.tag.to_string(),
        note: String::new(),
        number: n.replaces.map_or(1, |r| r.number + 1),
        paid_before: n.replaces.map_or(0, PaymentRecord::total_paid_cents),
    }
}

/// Sets up a claimed payment on the platform (`set_up`), or records its refusal; a set-up
/// without a certain answer is left pending (it pays nothing: it is left unused).
async fn prepare_payment(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    rec: PaymentRecord,
    raw: &str,
) -> Result<Pass<Outcome>, String> {
    let all: Vec<Bonus> = rec.bonuses.iter().map(RecordedBonus::bonus).collect();
    let mut next = rec.clone();
    match payer.prepare_bonus(&all).await {
        Ok(prepared) => {
            next.prepared = prepared;
            next.stage = Stage::SetUp;
        }
        // A set-up that may have happened pays nothing: it is left unused.
        Err(e) if e.is_uncertain() => {
            return Ok(Pass::Done(Outcome::Pending {
                why: e.to_string(),
                record: rec,
            }));
        }
        Err(e) => {
            next.stage = Stage::Refused;
            next.note = e.to_string();
            for b in &mut next.bonuses {
                b.paid = Some(false);
            }
        }
    }
    ledger.swap(key, Some(raw), &next.to_json()).await?;
    Ok(Pass::Again)
}

/// Sends a payment that is set up: reads the platform's counts of bonuses paid first (so that
/// an uncertain send can be looked up), records it as `sending`, sends it and records the
/// answers. What is left uncertain is asked of the platform at once, never sent again here.
async fn send_payment(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    rec: PaymentRecord,
    raw: &str,
    now: u64,
    policy: Policy,
) -> Result<Pass<Outcome>, String> {
    let all: Vec<Bonus> = rec.bonuses.iter().map(RecordedBonus::bonus).collect();
    let before = match payer.bonuses_paid(&all).await {
        Ok(counts) if counts.len() == all.len() => counts.into_iter().map(Some).collect(),
        Ok(_) => vec![None; all.len()],
        Err(e) if e.is_unsupported() => vec![None; all.len()],
        Err(e) => {
            return Ok(Pass::Done(Outcome::Pending {
                why: format!(
                    "not sent: the platform's record of bonuses could not be read first: {e}"
                ),
                record: rec,
            }));
        }
    };
    let mut sending = rec.clone();
    sending.stage = Stage::Sending;
    sending.since_ms = now;
    for (b, n) in sending.bonuses.iter_mut().zip(before) {
        b.before = n;
        b.paid = None;
    }
    let sending_raw = sending.to_json();
    if !ledger.swap(key, Some(raw), &sending_raw).await? {
        return Ok(Pass::Again);
    }
    let results = payer.pay_prepared(sending.prepared.as_deref(), &all).await;
    let done = answered(&sending, &results);
    ledger
        .swap(key, Some(&sending_raw), &done.to_json())
        .await?;
    if !done.stage.settled() {
        // Uncertain: ask the platform at once (the next pass), but never re-send
        // in this call.
        return Ok(Pass::Done(
            resolve(payer, ledger, key, done, policy, true)
                .await?
                .unwrap_or_else(|| unreachable_pending(key)),
        ));
    }
    Ok(Pass::Again)
}

/// The `sending` record with the platform's answer to each bonus: paid, refused, or (an
/// uncertain answer, or none) still unknown; settled when every bonus is known.
fn answered(sending: &PaymentRecord, results: &[Result<(), PlatformError>]) -> PaymentRecord {
    let mut done = sending.clone();
    let mut notes = vec![];
    for (i, b) in done.bonuses.iter_mut().enumerate() {
        match results.get(i) {
            Some(Ok(())) => b.paid = Some(true),
            Some(Err(e)) if !e.is_uncertain() => {
                b.paid = Some(false);
                notes.push(e.to_string());
            }
            Some(Err(e)) => notes.push(e.to_string()),
            None => notes.push("no answer for this bonus".into()),
        }
    }
    notes.dedup();
    done.note = notes.join("; ");
    if done.bonuses.iter().all(|b| b.paid.is_some()) {
        done.stage = if done.bonuses.iter().any(|b| b.paid == Some(true)) {
            Stage::Sent
        } else {
            Stage::Refused
        };
    }
    done
}

fn unreachable_pending(key: &str) -> Outcome {
    Outcome::Pending {
        why: format!("payment record {key}: the send just made is not resolved"),
        record: PaymentRecord {
            platform: String::new(),
            stage: Stage::Sending,
            bonuses: vec![],
            prepared: None,
            claimant: String::new(),
            since_ms: 0,
            tag: String::new(),
            note: String::new(),
            number: 0,
            paid_before: 0,
        },
    }
}

/// Asks the platform what became of a payment left `sending`, and records what it shows.
/// Sends nothing itself: a payment of which nothing shows after [`Policy::settle_ms`] goes back
/// to `set_up` and `None` is answered, for [`pay_once`] to send it again (never when
/// `just_sent`).
async fn resolve(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    rec: PaymentRecord,
    policy: Policy,
    just_sent: bool,
) -> Result<Option<Outcome>, String> {
    let raw = rec.to_json();
    let stored = ledger.get(key).await?;
    if stored.as_deref() != Some(raw.as_str()) {
        return changed_meanwhile(ledger, key).await.map(Some);
    }
    let all: Vec<Bonus> = rec.bonuses.iter().map(RecordedBonus::bonus).collect();
    let mut next = rec.clone();
    match payer.bonuses_paid(&all).await {
        Ok(counts) if counts.len() == all.len() => {
            for (b, n) in next.bonuses.iter_mut().zip(counts) {
                if b.paid.is_none()
                    && let Some(before) = b.before
                    && n > before
                {
                    b.paid = Some(true);
                }
            }
        }
        Ok(_) => {}
        Err(e) => {
            return Ok(Some(Outcome::Pending {
                why: format!(
                    "the last send had no certain answer and the platform could not be asked: {e}"
                ),
                record: rec,
            }));
        }
    }
    let unknown = next.bonuses.iter().filter(|b| b.paid.is_none()).count();
    let elapsed = now_ms().saturating_sub(rec.since_ms);
    if unknown == 0 {
        next.stage = if next.bonuses.iter().any(|b| b.paid == Some(true)) {
            Stage::Sent
        } else {
            Stage::Refused
        };
    } else if just_sent
        || elapsed < policy.settle_ms
        || next.bonuses.iter().any(|b| b.before.is_none())
    {
        if next != rec {
            ledger.swap(key, Some(&raw), &next.to_json()).await?;
        }
        return Ok(Some(Outcome::Pending {
            why: not_shown_yet(unknown, &rec, policy),
            record: next,
        }));
    } else if unknown == next.bonuses.len() {
        // Nothing of it shows long after: it was not paid; send the same one again.
        next.stage = Stage::SetUp;
        next.since_ms = now_ms();
        for b in &mut next.bonuses {
            b.before = None;
        }
    } else {
        // Part shows: settle as shown; the caller pays the rest under a new record.
        for b in &mut next.bonuses {
            b.paid.get_or_insert(false);
        }
        next.stage = Stage::Sent;
    }
    ledger.swap(key, Some(&raw), &next.to_json()).await?;
    match read(ledger, key).await? {
        Some(r) if r.stage.settled() => Ok(Some(Outcome::Settled(r))),
        // Back to `set_up` (by this call or another): the caller's next pass carries on.
        Some(_) => Ok(None),
        None => Err(format!("payment record {key} vanished")),
    }
}

/// What a payment record changed to while it was being resolved (re-read instead of guessed).
async fn changed_meanwhile(ledger: &dyn Ledger, key: &str) -> Result<Outcome, String> {
    match read(ledger, key).await? {
        Some(r) if r.stage.settled() => Ok(Outcome::Settled(r)),
        Some(r) => Ok(Outcome::Pending {
            why: "the payment record changed while it was being resolved".into(),
            record: r,
        }),
        None => Err(format!("payment record {key} vanished")),
    }
}

/// Why a send is still pending when the platform does not show `unknown` of its bonuses yet.
fn not_shown_yet(unknown: usize, rec: &PaymentRecord, policy: Policy) -> String {
    format!(
        "the platform does not show {unknown} bonus(es) of the last send yet ({}); \
         it is asked again on the next send and nothing is sent again before it shows \
         or {} min have passed",
        if rec.note.is_empty() {
            "no certain answer"
        } else {
            rec.note.as_str()
        },
        policy.settle_ms / 60_000
    )
}

/// A decision on a submission (approve, reject) as the ledger holds it (JSON): the same
/// stages as a payment without `set_up` (`claimed`, `sending`, then `sent` or `refused`).
/// Approving pays the study's reward, so a decision is sent by one caller at a time and an
/// uncertain answer is settled by reading the submission's status before it is sent again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub platform: String,
    pub submission_id: String,
    /// `approve` or `reject`.
    pub action: String,
    /// The reason sent with a rejection.
    #[serde(default)]
    pub reason: String,
    pub stage: Stage,
    pub claimant: String,
    pub since_ms: u64,
    /// The platform's last answer that was not a success; on a `sending` record, that its
    /// sender is done with it (the answer was uncertain), so anyone may settle it at once.
    #[serde(default)]
    pub note: String,
    /// Which decision under its key this is (1, then one more than the one it replaced).
    #[serde(default)]
    pub number: u64,
}

impl DecisionRecord {
    /// The decision's name: its key and number (`<key>#<number>`).
    pub fn id(&self, key: &str) -> String {
        format!("{key}#{}", self.number)
    }

    fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A decision to start under a key (see [`decide_once`]).
#[derive(Clone, Copy, Debug)]
pub struct NewDecision<'a> {
    pub submission_id: &'a str,
    /// `approve` or `reject`.
    pub action: &'a str,
    pub reason: &'a str,
    /// The settled record read under the key (`None`: the key was free); replaced only if it
    /// is still there.
    pub replaces: Option<&'a DecisionRecord>,
}

/// What [`decide_once`] came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    Settled(DecisionRecord),
    Pending { record: DecisionRecord, why: String },
}

/// Reads the decision record under `key`.
pub async fn read_decision(
    ledger: &dyn Ledger,
    key: &str,
) -> Result<Option<DecisionRecord>, String> {
    match ledger.get(key).await? {
        None => Ok(None),
        Some(raw) => serde_json::from_str(&raw)
            .map(Some)
            .map_err(|e| format!("decision record {key}: {e}")),
    }
}

/// Whether a platform's status word says the submission is decided as `action`.
fn status_is(status: &str, action: &str) -> bool {
    let s = status.to_ascii_lowercase();
    match action {
        "approve" => s.contains("approved"),
        _ => s.contains("rejected"),
    }
}

/// Sends a decision once under `key`: carries on the one recorded there if it is not settled,
/// else starts `new` (when the key holds what `new.replaces` says). A `sending` record whose
/// sender got no certain answer is settled by the submission's status on the platform: decided
/// as wanted is `sent`, still undecided is sent again (platforms take the same decision twice
/// as one), decided otherwise is `refused`.
pub async fn decide_once(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    new: Option<NewDecision<'_>>,
    claimant: &str,
    policy: Policy,
) -> Result<Decided, String> {
    let mut new = new;
    for _ in 0..16 {
        let raw = ledger.get(key).await?;
        let rec: Option<DecisionRecord> = match &raw {
            None => None,
            Some(r) => {
                Some(serde_json::from_str(r).map_err(|e| format!("decision record {key}: {e}"))?)
            }
        };
        let now = now_ms();
        let start = match (&rec, &new) {
            (None, Some(n)) => n.replaces.is_none(),
            (Some(r), Some(n)) => r.stage.settled() && n.replaces == Some(r),
            _ => false,
        };
        if let (true, Some(n)) = (start, new.take()) {
            let record = DecisionRecord {
                platform: payer.platform().to_string(),
                submission_id: n.submission_id.to_string(),
                action: n.action.to_string(),
                reason: n.reason.to_string(),
                stage: Stage::Claimed,
                claimant: claimant.to_string(),
                since_ms: now,
                note: String::new(),
                number: n.replaces.map_or(1, |r| r.number + 1),
            };
            ledger.swap(key, raw.as_deref(), &record.to_json()).await?;
            continue;
        }
        let Some(rec) = rec else {
            return Err(format!("no decision record {key}"));
        };
        let raw = raw.unwrap_or_default();
        let busy = rec.claimant != claimant
            && now.saturating_sub(rec.since_ms) < policy.settle_ms
            && (rec.stage == Stage::Claimed || rec.note.is_empty());
        let pass = match rec.stage {
            Stage::Sent | Stage::Refused => Pass::Done(Decided::Settled(rec)),
            _ if busy => Pass::Done(Decided::Pending {
                why: format!("{} is sending it", rec.claimant),
                record: rec,
            }),
            Stage::Sending => {
                look_up_decision(payer, ledger, key, rec, &raw, claimant, now).await?
            }
            Stage::Claimed | Stage::SetUp => {
                send_decision(payer, ledger, key, rec, &raw, claimant, now).await?
            }
        };
        if let Pass::Done(decided) = pass {
            return Ok(decided);
        }
    }
    Err(format!(
        "decision record {key} keeps changing under this caller"
    ))
}

/// Settles a decision left `sending` (its sender is done with it or gone) by the submission's
/// status on the platform: decided as wanted is `sent`, decided otherwise `refused`, undecided
/// (or not listed) is claimed again to be sent again.
async fn look_up_decision(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    rec: DecisionRecord,
    raw: &str,
    claimant: &str,
    now: u64,
) -> Result<Pass<Decided>, String> {
    // Its sender is done with it or gone: ask the platform what became of it.
    let subs = match payer.submissions().await {
        Ok(s) => s,
        Err(e) => {
            return Ok(Pass::Done(Decided::Pending {
                why: format!(
                    "the last send had no certain answer and the platform could not be asked: {e}"
                ),
                record: rec,
            }));
        }
    };
    let status = subs
        .iter()
        .find(|s| s.id == rec.submission_id)
        .map(|s| s.status.clone());
    let mut next = rec.clone();
    next.claimant = claimant.to_string();
    next.since_ms = now;
    match status {
        Some(s) if status_is(&s, &rec.action) => next.stage = Stage::Sent,
        Some(s) if status_is(&s, "approve") || status_is(&s, "reject") => {
            next.stage = Stage::Refused;
            next.note = format!("the submission is {s} on the platform already");
        }
        // Undecided (or not listed): send it again.
        _ => {
            next.stage = Stage::Claimed;
            next.note = String::new();
        }
    }
    ledger.swap(key, Some(raw), &next.to_json()).await?;
    Ok(Pass::Again)
}

/// Sends a claimed decision: records it as `sending`, sends it, and records the answer (an
/// uncertain one leaves it pending, to be looked up).
async fn send_decision(
    payer: &dyn Payer,
    ledger: &dyn Ledger,
    key: &str,
    rec: DecisionRecord,
    raw: &str,
    claimant: &str,
    now: u64,
) -> Result<Pass<Decided>, String> {
    let mut sending = rec.clone();
    sending.stage = Stage::Sending;
    sending.claimant = claimant.to_string();
    sending.since_ms = now;
    sending.note = String::new();
    let sending_raw = sending.to_json();
    if !ledger.swap(key, Some(raw), &sending_raw).await? {
        return Ok(Pass::Again);
    }
    let result = match rec.action.as_str() {
        "approve" => payer.approve(&rec.submission_id).await,
        _ => payer.reject(&rec.submission_id, &rec.reason).await,
    };
    let mut done = sending.clone();
    match result {
        Ok(()) => done.stage = Stage::Sent,
        Err(e) if e.is_uncertain() => done.note = e.to_string(),
        Err(e) => {
            done.stage = Stage::Refused;
            done.note = e.to_string();
        }
    }
    ledger
        .swap(key, Some(&sending_raw), &done.to_json())
        .await?;
    Ok(Pass::Done(if done.stage.settled() {
        Decided::Settled(done)
    } else {
        Decided::Pending {
            why: done.note.clone(),
            record: done,
        }
    }))
}

/// A [`Ledger`] in memory, for tests and dry runs.
#[derive(Default)]
pub struct MemoryLedger {
    values: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

#[async_trait]
impl Ledger for MemoryLedger {
    async fn get(&self, key: &str) -> Result<Option<String>, String> {
        let v = self.values.lock().unwrap_or_else(|p| p.into_inner());
        Ok(v.get(key).cloned())
    }
    async fn swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool, String> {
        let mut v = self.values.lock().unwrap_or_else(|p| p.into_inner());
        if v.get(key).map(String::as_str) != expected {
            return Ok(false);
        }
        v.insert(key.to_string(), new.to_string());
        Ok(true)
    }
}
