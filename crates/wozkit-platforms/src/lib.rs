//! Crowd platforms through their own APIs, for paying and reviewing from wozkit: Prolific
//! ([`prolific`], its documented REST API with a token) and Amazon Mechanical Turk ([`mturk`],
//! the official AWS SDK for Rust, behind the `mturk` feature). Both implement [`Payer`], which
//! is what the researcher console and the command line use; both are tested against local mock
//! servers that follow the providers' documented requests and responses.

pub mod once;
pub mod prolific;

#[cfg(feature = "mturk")]
pub mod mturk;

use async_trait::async_trait;
use serde::Serialize;

/// Why a platform request failed: what was asked, of which platform, and what it answered.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PlatformError {
    /// Credentials are missing (names the environment variable to set).
    #[error("{0}")]
    NotConfigured(String),
    /// The platform could not be reached (connection, timeout).
    #[error("{platform}: {what}: cannot reach the platform: {detail}")]
    Unreachable {
        platform: &'static str,
        what: String,
        detail: String,
    },
    /// The request went out and no answer says what became of it (a timeout or a connection
    /// lost after sending): it may have been carried out. Only asking the platform tells; a
    /// payment is never sent again before that (see [`once`]).
    #[error("{platform}: {what}: no answer, the request may have been carried out: {detail}")]
    Uncertain {
        platform: &'static str,
        what: String,
        detail: String,
    },
    /// The platform refused the request (status and its own message).
    #[error("{platform}: {what}: refused ({status}): {message}")]
    Refused {
        platform: &'static str,
        what: String,
        status: u16,
        message: String,
    },
    /// The platform answered something this client cannot read.
    #[error("{platform}: {what}: unexpected answer: {detail}")]
    BadAnswer {
        platform: &'static str,
        what: String,
        detail: String,
    },
    /// The platform's API has no request for this (e.g. Prolific has no block): nothing was
    /// sent, and sending again cannot help; `instead` says where the researcher does it.
    #[error("{platform} has no {what} through its API: {instead}")]
    Unsupported {
        platform: &'static str,
        what: String,
        instead: String,
    },
}

impl PlatformError {
    /// Whether the platform's API cannot do what was asked at all (so it is not worth asking
    /// again).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, PlatformError::Unsupported { .. })
    }

    /// Whether the request may have been carried out although no success came back: no
    /// answer after sending ([`PlatformError::Uncertain`]), or a server error (5xx), after
    /// which the platform may have done the work.
    pub fn is_uncertain(&self) -> bool {
        match self {
            PlatformError::Uncertain { .. } => true,
            PlatformError::Refused { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// One worker's submission of a study on a platform (a Prolific submission, an MTurk
/// assignment).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Submission {
    /// The platform's id of the submission (Prolific submission id, MTurk AssignmentId).
    pub id: String,
    /// The platform's worker id (Prolific participant id, MTurk WorkerId).
    pub worker_id: String,
    /// The platform's status word, as it gives it (e.g. `AWAITING REVIEW`, `Submitted`).
    pub status: String,
    /// The completion code the worker entered, when the platform records one.
    pub completion_code: Option<String>,
}

/// A bonus to pay: an amount in cents of the study's currency, to one worker for one
/// submission, with the reason the worker sees (where the platform shows one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bonus {
    pub worker_id: String,
    pub submission_id: String,
    pub cents: u64,
    pub reason: String,
}

/// What wozkit asks of a crowd platform for one of its studies (a Prolific study, a set of
/// MTurk HITs).
#[async_trait]
pub trait Payer: Send + Sync {
    /// The platform's name as wozkit's entry links record it (`prolific`, `mturk`).
    fn platform(&self) -> &'static str;
    /// Every submission of the study.
    async fn submissions(&self) -> Result<Vec<Submission>, PlatformError>;
    /// Approves a submission (the worker is paid the study's reward).
    async fn approve(&self, submission_id: &str) -> Result<(), PlatformError>;
    /// Rejects a submission with the reason the worker is shown.
    async fn reject(&self, submission_id: &str, reason: &str) -> Result<(), PlatformError>;
    /// Pays bonuses, in one bulk request where the platform has one. Answers what became of
    /// each bonus, in the order given (as many results as bonuses): a platform that pays them
    /// one by one (MTurk) tells which were paid when some fail; one that pays them in one
    /// all-or-nothing request (Prolific) gives that request's result for each.
    async fn bonus(&self, bonuses: &[Bonus]) -> Vec<Result<(), PlatformError>>;
    /// The first step of paying `bonuses` where the platform has one that pays nothing
    /// (Prolific sets up a bulk bonus payment): the id to record before paying, so that a
    /// retry pays that one instead of setting up another. `None` where there is no such step.
    async fn prepare_bonus(&self, _bonuses: &[Bonus]) -> Result<Option<String>, PlatformError> {
        Ok(None)
    }
    /// Pays `bonuses`, prepared as `prepared` by [`Payer::prepare_bonus`]; one result per
    /// bonus, as [`Payer::bonus`].
    async fn pay_prepared(
        &self,
        _prepared: Option<&str>,
        bonuses: &[Bonus],
    ) -> Vec<Result<(), PlatformError>> {
        self.bonus(bonuses).await
    }
    /// For each bonus, how many bonus payments of exactly its amount the platform has made on
    /// its submission so far: asked before paying and again after an uncertain outcome, this
    /// tells whether the payment happened. [`PlatformError::Unsupported`] where the platform
    /// cannot tell.
    async fn bonuses_paid(&self, _bonuses: &[Bonus]) -> Result<Vec<u64>, PlatformError> {
        Err(PlatformError::Unsupported {
            platform: "this platform client",
            what: "look-up of bonus payments".into(),
            instead: "check the platform's own records".into(),
        })
    }
    /// Keeps a worker out of this researcher's future studies.
    async fn block(&self, worker_id: &str, reason: &str) -> Result<(), PlatformError>;
}
