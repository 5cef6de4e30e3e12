//! The review log of a study, read: what researchers decided about each participant (see the
//! server's `review` module for how decisions are taken and sent). Every decision is an
//! [`EventKind::Reviewed`] event of the log `review-<study>` ([`log_id`]); [`fold`] turns its
//! events into one [`Reviewed`] per participant, the last decision and bonus counting.

use std::collections::{HashMap, HashSet};

use wozkit_core::event::{Event, EventKind, ReviewAction};
use wozkit_store::{SessionFilter, SessionKind, Store, StoreError};

/// Prefix of the review logs' ids.
pub const LOG_PREFIX: &str = "review-";

/// The id of a study's review log.
pub fn log_id(study: &str) -> String {
    format!("{LOG_PREFIX}{study}")
}

/// What the review log says about one participant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reviewed {
    /// The current decision (`Approve` or `Reject`) and its sequence number in the log.
    pub decision: Option<(ReviewAction, u64)>,
    /// The current bonus in cents and its sequence number (none when no bonus was given).
    pub bonus: Option<(u64, u64)>,
    /// The block, with its reason and sequence number.
    pub blocked: Option<(String, u64)>,
    /// Notes, oldest first.
    pub notes: Vec<String>,
    /// Every review event about the participant, oldest first.
    pub history: Vec<Event>,
    /// The decision the platform was sent, if any.
    pub sent_decision: Option<ReviewAction>,
    /// Cents of bonus the platform paid so far.
    pub bonus_sent_cents: u64,
    /// Whether the block was sent to the platform.
    pub block_sent: bool,
    /// The platform's message of the last failed send (cleared by a later successful one).
    pub last_failure: Option<String>,
    /// Decisions the platform's API cannot take (their sequence numbers), with what the
    /// researcher does instead; never sent.
    pub not_sendable: Vec<(u64, String)>,
    /// Cents of [`Reviewed::bonus_sent_cents`] paid through payment records (the `sent` events
    /// that name one); the rest was paid before there were records.
    pub record_sent_cents: u64,
    /// The records (`<key>#<number>`) whose success is logged, and those whose refusal is.
    pub logged_sent: HashSet<String>,
    pub logged_failed: HashSet<String>,
}

impl Reviewed {
    /// Whether the decision at `seq` is one the platform's API cannot take.
    pub fn is_not_sendable(&self, seq: u64) -> bool {
        self.not_sendable.iter().any(|(s, _)| *s == seq)
    }

    /// The current decision's name (`approve`, `reject`), empty when none.
    pub fn decision_str(&self) -> &'static str {
        self.decision.map_or("", |(a, _)| a.as_str())
    }

    /// The current bonus in cents (0 when none).
    pub fn bonus_cents(&self) -> u64 {
        self.bonus.map_or(0, |(c, _)| c)
    }
}

/// The decision of each participant (by participant id), from a review log's events.
pub fn fold(events: &[Event]) -> HashMap<String, Reviewed> {
    let mut out: HashMap<String, Reviewed> = HashMap::new();
    let mut by_seq: HashMap<u64, (ReviewAction, Option<u64>)> = HashMap::new();
    // The decision each participant's last failure was about.
    let mut failed_of: HashMap<String, Option<u64>> = HashMap::new();
    for e in events {
        let EventKind::Reviewed(d) = &e.kind else {
            continue;
        };
        let r = out.entry(d.participant.clone()).or_default();
        r.history.push(e.clone());
        by_seq.insert(e.seq, (d.action, d.cents));
        match d.action {
            ReviewAction::Approve | ReviewAction::Reject => r.decision = Some((d.action, e.seq)),
            ReviewAction::Bonus => {
                r.bonus = match d.cents.unwrap_or(0) {
                    0 => None,
                    c => Some((c, e.seq)),
                }
            }
            ReviewAction::Block => r.blocked = Some((d.reason.clone(), e.seq)),
            ReviewAction::Note => r.notes.push(d.reason.clone()),
            ReviewAction::Sent => {
                r.last_failure = None;
                // A record's outcome logged again (by two instances at once) counts once.
                if let Some(id) = &d.payment
                    && !r.logged_sent.insert(id.clone())
                {
                    continue;
                }
                match d.of_seq.and_then(|s| by_seq.get(&s)) {
                    Some((a @ (ReviewAction::Approve | ReviewAction::Reject), _)) => {
                        r.sent_decision = Some(*a)
                    }
                    Some((ReviewAction::Bonus, _)) => {
                        r.bonus_sent_cents += d.cents.unwrap_or(0);
                        if d.payment.is_some() {
                            r.record_sent_cents += d.cents.unwrap_or(0);
                        }
                    }
                    Some((ReviewAction::Block, _)) => r.block_sent = true,
                    _ => {}
                }
            }
            ReviewAction::SendFailed => {
                r.last_failure = Some(d.reason.clone());
                failed_of.insert(d.participant.clone(), d.of_seq);
                if let Some(id) = &d.payment {
                    r.logged_failed.insert(id.clone());
                }
            }
            ReviewAction::NotSendable => {
                if let Some(of) = d.of_seq {
                    r.not_sendable.push((of, d.reason.clone()));
                    // The earlier failures of this decision are settled by it.
                    if r.last_failure.is_some() && failed_of.get(&d.participant) == Some(&Some(of))
                    {
                        r.last_failure = None;
                    }
                }
            }
        }
    }
    out
}

/// The review of a study's participants, read from its log (empty when nothing was decided).
pub async fn read(store: &dyn Store, study: &str) -> Result<HashMap<String, Reviewed>, StoreError> {
    let id = log_id(study);
    if store.session(&id).await?.is_none() {
        return Ok(HashMap::new());
    }
    Ok(fold(&store.events(&id, 0).await?))
}

/// Every review log's id and study.
pub async fn review_logs(store: &dyn Store) -> Result<Vec<(String, String)>, StoreError> {
    Ok(store
        .list_sessions(&SessionFilter {
            kind: SessionKind::Participant,
            ..SessionFilter::default()
        })
        .await?
        .into_iter()
        .filter(|s| s.id.starts_with(LOG_PREFIX))
        .map(|s| (s.id, s.study_id))
        .collect())
}
