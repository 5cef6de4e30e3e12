//! Sending the review's decisions to the crowd platforms, each at most once.
//!
//! Every call that moves money (an approval pays the study's reward, a rejection decides it is
//! not paid, a bonus pays) goes through a record of [`wozkit_platforms::once`] in the store's
//! meta table: per participant, [`bonus_key`] holds their latest review bonus payment and
//! [`decision_key`] their latest decision sent. A record is started only over what was read
//! under its key, so of two researchers (or two instances, or the console and
//! `wozkit prolific pay`) pressing at once one sends and the other is told it is in progress;
//! a send without a certain answer stays on its record and is settled by asking the platform
//! before anything is sent again.
//!
//! The review log stays the account researchers read: a settled record whose outcome is not in
//! the log yet (paid by the command line, or by a server stopped before it logged) is logged
//! before anything new is paid, each `sent` event naming its record so that it counts once.
//! What the records paid in all ([`PaymentRecord::total_paid_cents`]) is what the log must
//! show; a bonus owed is the review bonus minus that (and what was paid before records).
//! Blocks move no money and are sent as before.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use wozkit_core::event::{EventKind, ReviewAction, ReviewDecision};
use wozkit_core::load::LoadedStudy;
use wozkit_data::records::ledger::{StoreLedger, bonus_key, decision_key, review_bonus_paid};
use wozkit_platforms::once::{
    self, Decided, DecisionRecord, NewDecision, NewPayment, Outcome, PaymentRecord, Policy, Stage,
};
use wozkit_platforms::{Bonus, Payer};
use wozkit_store::{Store, StoreError};

use super::{Reviewed, append, read};
use crate::app::AppState;

/// What one press of "send decisions" did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendReport {
    pub sent: u32,
    /// Failed, or not settled yet (in progress elsewhere, no certain answer): sent again or
    /// settled on the next press.
    pub failed: u32,
    /// Decisions the platform's API cannot take, logged `not_sendable` this time.
    pub not_sendable: u32,
}

/// The platform's id of a participant's submission: from the entry link (Prolific's
/// `SESSION_ID`, MTurk's `assignmentId`), else from the platform's list of submissions by the
/// worker id.
async fn submission_id(
    store: &dyn Store,
    payer: &dyn Payer,
    listed: &mut Option<Vec<wozkit_platforms::Submission>>,
    participant: &str,
    worker: Option<&str>,
) -> Result<String, String> {
    if let Ok(Some(p)) = store.participant(participant).await
        && let Some(id) = p
            .external_ids
            .get("SESSION_ID")
            .or(p.external_ids.get("assignmentId"))
    {
        return Ok(id.clone());
    }
    let worker = worker.ok_or_else(|| "the participant has no worker id".to_string())?;
    if listed.is_none() {
        *listed = Some(payer.submissions().await.map_err(|e| e.to_string())?);
    }
    listed
        .iter()
        .flatten()
        .find(|s| s.worker_id == worker)
        .map(|s| s.id.clone())
        .ok_or_else(|| {
            format!(
                "{}: no submission of worker {worker} in this study",
                payer.platform()
            )
        })
}

/// The review log's outcome events of one participant, as one press writes them.
struct Outcomes<'a> {
    head: &'a ReviewDecision,
    by: &'a crate::auth::Researcher,
    log: &'a mut Vec<ReviewDecision>,
}

impl Outcomes<'_> {
    fn push(
        &mut self,
        of: u64,
        ok: Result<(), Unsent>,
        cents: Option<u64>,
        payment: Option<String>,
    ) {
        let (action, reason) = match ok {
            Ok(()) => (ReviewAction::Sent, String::new()),
            Err(Unsent::Failed(why)) => (ReviewAction::SendFailed, why),
            Err(Unsent::NotSendable(why)) => (ReviewAction::NotSendable, why),
        };
        self.log.push(ReviewDecision {
            participant: self.head.participant.clone(),
            worker: self.head.worker.clone(),
            platform: self.head.platform.clone(),
            action,
            reason,
            cents,
            researcher: self.by.id.clone(),
            researcher_name: self.by.name.clone(),
            of_seq: Some(of),
            payment,
        });
    }
}

/// Sends every decision, bonus and block of the study not sent yet to the participants'
/// platforms (see the module's documentation), logging each outcome as done by `by`.
pub async fn send(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    by: &crate::auth::Researcher,
) -> Result<SendReport, StoreError> {
    let _one_at_a_time = app.review.lock.lock().await;
    let store = app.store.as_ref();
    let ledger = StoreLedger(store);
    let policy = app.tunables.pay_policy;
    let study_id = &study.study.id;
    let claimant = format!(
        "researcher {} on instance {} (press {})",
        by.name,
        app.tunables.instance_id,
        wozkit_store::new_id()
    );
    let reviews = read(store, study_id).await?;
    let mut participants: Vec<&String> = reviews.keys().collect();
    participants.sort();
    let mut log = vec![];
    let mut listed: HashMap<String, Option<Vec<wozkit_platforms::Submission>>> = HashMap::new();
    for id in participants {
        let r = &reviews[id];
        let Some(EventKind::Reviewed(head)) = r.history.first().map(|e| &e.kind) else {
            continue;
        };
        let Some(payer) = app.tunables.payers.get(study_id, &head.platform) else {
            continue;
        };
        let mut out = Outcomes {
            head,
            by,
            log: &mut log,
        };
        let list = listed.entry(head.platform.clone()).or_default();
        let mut submission = None;
        let turn = Turn {
            store,
            ledger: &ledger,
            payer: payer.as_ref(),
            study: study_id,
            participant: id,
            r,
            claimant: &claimant,
            policy,
        };
        turn.decision(&mut out, list, &mut submission).await?;
        turn.bonus(&mut out, list, &mut submission).await?;
        if let Some((reason, seq)) = &r.blocked
            && !r.block_sent
            && !r.is_not_sendable(*seq)
        {
            let result = match head.worker.as_deref() {
                None => Err(Unsent::Failed(
                    "the participant has no worker id".to_string(),
                )),
                Some(w) => payer.block(w, reason).await.map_err(Unsent::from),
            };
            out.push(*seq, result, None, None);
        }
    }
    let count = |a: ReviewAction| log.iter().filter(|d| d.action == a).count() as u32;
    let report = SendReport {
        sent: count(ReviewAction::Sent),
        failed: count(ReviewAction::SendFailed),
        not_sendable: count(ReviewAction::NotSendable),
    };
    append(app, study, log).await?;
    Ok(report)
}

/// One participant's part of a press.
struct Turn<'a> {
    store: &'a dyn Store,
    ledger: &'a StoreLedger<'a>,
    payer: &'a dyn Payer,
    study: &'a str,
    participant: &'a str,
    r: &'a Reviewed,
    claimant: &'a str,
    policy: Policy,
}

impl Turn<'_> {
    /// The participant's submission, looked up once per press (an error says why not).
    async fn submission(
        &self,
        list: &mut Option<Vec<wozkit_platforms::Submission>>,
        found: &mut Option<Result<String, String>>,
        worker: Option<&str>,
    ) -> Result<String, String> {
        if found.is_none() {
            *found =
                Some(submission_id(self.store, self.payer, list, self.participant, worker).await);
        }
        found.clone().unwrap_or_else(|| Err(String::new()))
    }

    /// Settles the decision record, logs its outcome if the log lacks it, and sends the current
    /// decision if none was sent.
    async fn decision(
        &self,
        out: &mut Outcomes<'_>,
        list: &mut Option<Vec<wozkit_platforms::Submission>>,
        found: &mut Option<Result<String, String>>,
    ) -> Result<(), StoreError> {
        let r = self.r;
        let key = decision_key(self.study, self.participant);
        let ControlFlow::Continue((record, sent)) = self.settle_decision(out, &key).await? else {
            return Ok(());
        };
        let Some((action, seq)) = r
            .decision
            .filter(|(_, seq)| !sent && !r.is_not_sendable(*seq))
        else {
            return Ok(());
        };
        let sub = match self
            .submission(list, found, out.head.worker.as_deref())
            .await
        {
            Ok(s) => s,
            Err(e) => {
                out.push(seq, Err(Unsent::Failed(e)), None, None);
                return Ok(());
            }
        };
        let reason = reason_of(r, seq);
        let new = NewDecision {
            submission_id: &sub,
            action: action.as_str(),
            reason: &reason,
            replaces: record.as_ref(),
        };
        match once::decide_once(
            self.payer,
            self.ledger,
            &key,
            Some(new),
            self.claimant,
            self.policy,
        )
        .await
        .map_err(ledger_err)?
        {
            Decided::Settled(d) if d.stage == Stage::Sent => {
                out.push(seq, Ok(()), None, Some(d.id(&key)))
            }
            Decided::Settled(d) => {
                let id = d.id(&key);
                out.push(seq, Err(Unsent::Failed(d.note)), None, Some(id))
            }
            Decided::Pending { why, .. } => {
                out.push(seq, Err(Unsent::Failed(not_settled(&why))), None, None)
            }
        }
        Ok(())
    }

    /// Settles the decision record under `key` and logs its outcome if the log lacks it; the
    /// record and whether a decision was sent, or `Break` when nothing is to be sent on this
    /// press (the record is still pending, or its failure was logged now).
    async fn settle_decision(
        &self,
        out: &mut Outcomes<'_>,
        key: &str,
    ) -> Result<ControlFlow<(), (Option<DecisionRecord>, bool)>, StoreError> {
        let r = self.r;
        let mut record = once::read_decision(self.ledger, key)
            .await
            .map_err(ledger_err)?;
        if record.as_ref().is_some_and(|d| !d.stage.settled()) {
            match once::decide_once(
                self.payer,
                self.ledger,
                key,
                None,
                self.claimant,
                self.policy,
            )
            .await
            .map_err(ledger_err)?
            {
                Decided::Settled(d) => record = Some(d),
                Decided::Pending { record: d, why } => {
                    let of = decision_seq(r, &d.action);
                    out.push(of, Err(Unsent::Failed(not_settled(&why))), None, None);
                    return Ok(ControlFlow::Break(()));
                }
            }
        }
        let mut sent = r.sent_decision.is_some();
        if let Some(d) = &record {
            let id = d.id(key);
            let of = decision_seq(r, &d.action);
            if d.stage == Stage::Sent {
                sent = true;
                if !r.logged_sent.contains(&id) {
                    out.push(of, Ok(()), None, Some(id));
                }
            } else if !r.logged_failed.contains(&id) && !r.logged_sent.contains(&id) {
                out.push(of, Err(Unsent::Failed(d.note.clone())), None, Some(id));
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue((record, sent)))
    }

    /// Settles the bonus record, logs what it paid if the log lacks it, and pays what the
    /// review bonus still owes.
    async fn bonus(
        &self,
        out: &mut Outcomes<'_>,
        list: &mut Option<Vec<wozkit_platforms::Submission>>,
        found: &mut Option<Result<String, String>>,
    ) -> Result<(), StoreError> {
        let r = self.r;
        let key = bonus_key(self.study, self.participant);
        let Some(of) = bonus_seq(r) else {
            return Ok(());
        };
        let ControlFlow::Continue(record) = self.settle_bonus(out, &key, of).await? else {
            return Ok(());
        };
        let paid = review_bonus_paid(r, record.as_ref());
        let owed = r.bonus_cents().saturating_sub(paid);
        let Some((_, seq)) = r
            .bonus
            .filter(|(_, seq)| owed > 0 && !r.is_not_sendable(*seq))
        else {
            return Ok(());
        };
        let sub = match self
            .submission(list, found, out.head.worker.as_deref())
            .await
        {
            Ok(s) => s,
            Err(e) => {
                out.push(seq, Err(Unsent::Failed(e)), Some(owed), None);
                return Ok(());
            }
        };
        let bonuses = [Bonus {
            worker_id: out.head.worker.clone().unwrap_or_default(),
            submission_id: sub,
            cents: owed,
            reason: bonus_reason(r, seq, paid),
        }];
        let tag = format!("review bonus of {} (decision {seq})", self.participant);
        let new = NewPayment {
            bonuses: &bonuses,
            tag: &tag,
            replaces: record.as_ref(),
        };
        match once::pay_once(
            self.payer,
            self.ledger,
            &key,
            Some(new),
            self.claimant,
            self.policy,
        )
        .await
        .map_err(ledger_err)?
        {
            Outcome::Settled(p) if p.stage == Stage::Sent => {
                out.push(seq, Ok(()), Some(p.paid_cents()), Some(p.id(&key)))
            }
            Outcome::Settled(p) => {
                let id = p.id(&key);
                out.push(seq, Err(Unsent::Failed(p.note)), Some(owed), Some(id))
            }
            Outcome::Pending { why, .. } => out.push(
                seq,
                Err(Unsent::Failed(not_settled(&why))),
                Some(owed),
                None,
            ),
        }
        Ok(())
    }

    /// Settles the bonus record under `key` and logs (as outcomes of decision `of`) what it
    /// paid that the log does not show yet; the record, or `Break` when nothing more is to be
    /// paid on this press (the record is still pending, or was refused).
    async fn settle_bonus(
        &self,
        out: &mut Outcomes<'_>,
        key: &str,
        of: u64,
    ) -> Result<ControlFlow<(), Option<PaymentRecord>>, StoreError> {
        let r = self.r;
        let mut record = once::read(self.ledger, key).await.map_err(ledger_err)?;
        if record.as_ref().is_some_and(|p| !p.stage.settled()) {
            match once::pay_once(
                self.payer,
                self.ledger,
                key,
                None,
                self.claimant,
                self.policy,
            )
            .await
            .map_err(ledger_err)?
            {
                Outcome::Settled(p) => record = Some(p),
                Outcome::Pending { record: p, why } => {
                    let cents = p.bonuses.iter().map(|b| b.cents).sum();
                    out.push(
                        of,
                        Err(Unsent::Failed(not_settled(&why))),
                        Some(cents),
                        None,
                    );
                    return Ok(ControlFlow::Break(()));
                }
            }
        }
        // What the records paid and the log does not show yet is logged first.
        if let Some(p) = &record {
            let id = p.id(key);
            let missing = p.total_paid_cents().saturating_sub(r.record_sent_cents);
            if missing > 0 && !r.logged_sent.contains(&id) {
                out.push(of, Ok(()), Some(missing), Some(id.clone()));
            }
            if p.stage == Stage::Refused && !r.logged_failed.contains(&id) {
                let cents = p.bonuses.iter().map(|b| b.cents).sum();
                out.push(
                    of,
                    Err(Unsent::Failed(p.note.clone())),
                    Some(cents),
                    Some(id),
                );
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(record))
    }
}

fn not_settled(why: &str) -> String {
    format!("not settled yet, nothing sent again: {why}")
}

/// The sequence number of the last bonus decision (the one a payment is logged against).
fn bonus_seq(r: &Reviewed) -> Option<u64> {
    last_seq(r, |a| a == ReviewAction::Bonus)
}

/// The sequence number of the last decision `action` (`approve`, `reject`).
fn decision_seq(r: &Reviewed, action: &str) -> u64 {
    last_seq(r, |a| a.as_str() == action)
        .or(r.decision.map(|(_, s)| s))
        .unwrap_or(0)
}

fn last_seq(r: &Reviewed, is: impl Fn(ReviewAction) -> bool) -> Option<u64> {
    r.history.iter().rev().find_map(|e| match &e.kind {
        EventKind::Reviewed(d) if is(d.action) => Some(e.seq),
        _ => None,
    })
}

/// Why a decision was not sent.
#[derive(Clone, Debug)]
enum Unsent {
    /// The send failed (sent again on the next press); the message says why.
    Failed(String),
    /// The platform's API has no such request (never sent); the message says what to do.
    NotSendable(String),
}

impl From<wozkit_platforms::PlatformError> for Unsent {
    fn from(e: wozkit_platforms::PlatformError) -> Unsent {
        if e.is_unsupported() {
            Unsent::NotSendable(e.to_string())
        } else {
            Unsent::Failed(e.to_string())
        }
    }
}

/// The reason sent with the bonus at `seq`: the researcher's; for the difference of a raised
/// bonus (`paid` already), followed by what it was raised from and to. A platform that tells
/// bonuses apart by their worker, amount and reason (MTurk's UniqueRequestToken) would
/// otherwise take a raise by the amount already paid, with the same reason, for that earlier
/// payment and pay nothing.
fn bonus_reason(r: &Reviewed, seq: u64, paid: u64) -> String {
    let reason = reason_of(r, seq);
    if paid == 0 {
        return reason;
    }
    let money = |c: u64| format!("{}.{:02}", c / 100, c % 100);
    format!(
        "{reason} (bonus raised from {} to {})",
        money(paid),
        money(r.bonus_cents())
    )
}

/// The reason given with the decision at `seq`.
fn reason_of(r: &Reviewed, seq: u64) -> String {
    r.history
        .iter()
        .find(|e| e.seq == seq)
        .and_then(|e| match &e.kind {
            EventKind::Reviewed(d) => Some(d.reason.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A payment or decision record that could not be read or written (the meta table failed, or
/// a record is not what `once` writes).
fn ledger_err(detail: String) -> StoreError {
    StoreError::Corrupt {
        what: "payment record",
        detail,
    }
}
