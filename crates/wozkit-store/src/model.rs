//! The records the store keeps besides events: sessions, participants, and the arguments used to
//! create, filter and change them. Plain data with no database types, so the server and the data
//! crate use them without depending on sqlx.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wozkit_core::event::{Actor, EndReason, EventKind, Role};

/// One event to append; the store adds the session id, `seq` and schema version.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub actor: Actor,
    pub kind: EventKind,
    /// Server time, milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// A session to create. The id is chosen by the caller (see [`new_id`](crate::new_id)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSession {
    pub id: String,
    pub study_id: String,
    pub study_version: String,
    /// Seeds every random choice of the session, so replaying its events reproduces it.
    pub seed: u64,
    pub created_at_ms: u64,
}

/// How and when a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEnd {
    pub reason: EndReason,
    pub at_ms: u64,
}

/// A stored session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub study_id: String,
    pub study_version: String,
    pub seed: u64,
    pub created_at_ms: u64,
    pub kind: SessionKind,
    /// `None` while the session is live.
    pub ended: Option<SessionEnd>,
    /// `seq` of the last event appended, 0 when the log is empty.
    pub last_seq: u64,
}

impl SessionRecord {
    pub fn is_live(&self) -> bool {
        self.ended.is_none()
    }
}

/// Whether a session is still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Live,
    Ended,
}

/// Which sessions [`SessionStore::list_sessions`](crate::SessionStore::list_sessions) and
/// [`SessionStore::count_sessions`](crate::SessionStore::count_sessions) return. The default selects all.
/// Listing is ordered by creation time, then id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionFilter {
    pub study_id: Option<String>,
    /// Dialogues by default; participant logs only when asked.
    pub kind: SessionKind,
    pub status: Option<SessionStatus>,
    /// Page size; `None` for all (ignored by `count_sessions`).
    pub limit: Option<u32>,
    /// Rows to skip before the page (ignored by `count_sessions`).
    pub offset: u32,
}

impl SessionFilter {
    /// `Some(true)` for ended only, `Some(false)` for live only: the form both backends bind.
    pub(crate) fn ended(&self) -> Option<bool> {
        self.status.map(|s| s == SessionStatus::Ended)
    }
}

/// Where an export page of [`EventStore::events_page`](crate::EventStore::events_page) resumes: just after
/// this event. Pages are ordered by session id, then `seq`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventCursor {
    pub session: String,
    pub seq: u64,
}

/// The crowd platform a participant came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Platform {
    Prolific,
    Mturk,
    /// Plain links, e.g. in a lab.
    Lab,
    /// A researcher seated in a room from the console (taking over a seat, or sent through the
    /// lobby); the worker id is the researcher's account id. Never paid.
    Researcher,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Prolific => "prolific",
            Platform::Mturk => "mturk",
            Platform::Lab => "lab",
            Platform::Researcher => "researcher",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        match s {
            "prolific" => Some(Platform::Prolific),
            "mturk" => Some(Platform::Mturk),
            "lab" => Some(Platform::Lab),
            "researcher" => Some(Platform::Researcher),
            _ => None,
        }
    }
}

/// A participant to create. Only the token's hash is stored (see
/// [`new_token`](crate::new_token)); the token itself goes to the browser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewParticipant {
    pub id: String,
    pub token_hash: String,
    pub study_id: String,
    pub platform: Platform,
    /// The platform's worker id (Prolific PID, MTurk worker id); lets a returning worker resume.
    /// `None` for anonymous lab links. Unique per study and platform.
    pub worker_id: Option<String>,
    /// Every id the platform passed (study, session, assignment, HIT…), kept for payment.
    pub external_ids: BTreeMap<String, String>,
    pub flow_step: String,
    pub created_at_ms: u64,
}

/// A stored participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    pub id: String,
    pub token_hash: String,
    pub study_id: String,
    pub platform: Platform,
    pub worker_id: Option<String>,
    pub external_ids: BTreeMap<String, String>,
    /// `None` until the lobby pairs the participant.
    pub role: Option<Role>,
    /// `None` until the participant is placed in a session.
    pub session_id: Option<String>,
    /// Where the participant is in the study's page flow.
    pub flow_step: String,
    /// Issued when the participant finishes (or times out of the waiting room).
    pub completion_code: Option<String>,
    pub created_at_ms: u64,
}

/// Key of [`Participant::external_ids`] that marks a test participant (a researcher on `/try`,
/// or a lab link with `test=1`): kept with the participant's other entry ids, so the mark needs
/// no schema change and lasts as long as the participant does.
pub const TEST_KEY: &str = "test";
/// The external id that names the simulated user playing a test participant (a lab link's
/// `simulated=NAME`, which only a server run by `wozkit simulate-users` takes).
pub const SIMULATED_KEY: &str = "simulated";

impl Participant {
    /// Whether the participant is a test, left out of reports, exports and payments by default.
    pub fn is_test(&self) -> bool {
        self.external_ids.get(TEST_KEY).is_some_and(|v| v == "1")
    }

    /// The simulated user playing this participant, if one does (see [`SIMULATED_KEY`]).
    pub fn simulated_user(&self) -> Option<&str> {
        self.external_ids.get(SIMULATED_KEY).map(String::as_str)
    }
}

/// Changes to a participant; a `None` field is left as it is. For the nullable fields the inner
/// option is the new value, so `Some(None)` clears it (e.g. a partner left before the session
/// began and the participant goes back to the waiting room).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParticipantPatch {
    pub role: Option<Option<Role>>,
    pub session_id: Option<Option<String>>,
    pub flow_step: Option<String>,
    pub completion_code: Option<Option<String>>,
}

/// What a session's log holds: a dialogue (live or imported), or one participant's own log of
/// an evaluation flow (page answers, claims and judgments). Listing sessions returns dialogues
/// unless a filter asks for participant logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    #[default]
    Dialogue,
    Participant,
}

impl SessionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Dialogue => "dialogue",
            SessionKind::Participant => "participant",
        }
    }
}

/// One evaluation item as a study declares it, registered with
/// [`ClaimStore::register_items`](crate::ClaimStore::register_items).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalItem {
    pub id: String,
    pub pool: wozkit_core::event::ItemPool,
    /// The dialogues the item shows (one to rate, two to compare). A worker is never given an
    /// item showing a dialogue they were given before, in any item of the study.
    pub dialogues: Vec<String>,
    /// Judgments the item needs (`judgments_per_item`); ignored for gold items, which any
    /// number of workers may be given.
    pub needed: u32,
}

/// A request for the next item of a study for one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    pub study_id: String,
    /// The worker: the participant id (one per worker and study).
    pub worker: String,
    pub pool: wozkit_core::event::ItemPool,
    /// The new lease's id, chosen by the caller (see [`new_id`](crate::new_id)).
    pub lease_id: String,
    pub now_ms: u64,
    pub lease_ms: u64,
    /// At most this many leases of the `Item` pool per worker (every state counted).
    pub max_per_worker: Option<u32>,
    /// Item ids to give first, best first. Among the eligible items the first one listed here
    /// is given; eligible items not listed come after every listed one, in the usual order
    /// (fewest done plus open leases, then id). Ids that are unknown, of another pool or not
    /// eligible are skipped, and a repeated id keeps its first place. Eligibility is unchanged.
    /// Empty (the usual case): the usual order alone.
    pub prefer: Vec<String>,
}

/// A worker's claim on an item until `expires_at_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    pub study_id: String,
    pub item_id: String,
    pub worker: String,
    pub pool: wozkit_core::event::ItemPool,
    pub dialogues: Vec<String>,
    pub claimed_at_ms: u64,
    pub expires_at_ms: u64,
    pub state: LeaseState,
}

/// Where a lease stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// Claimed and not yet submitted (it may have expired: expiry is by time).
    Leased,
    /// Submitted and counted towards the item's judgments.
    Done,
    /// Submitted after expiry when the item no longer needed it: kept, not counted.
    Surplus,
    /// Given back unjudged.
    Returned,
}

impl LeaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Leased => "leased",
            LeaseState::Done => "done",
            LeaseState::Surplus => "surplus",
            LeaseState::Returned => "returned",
        }
    }
}

/// What [`ClaimStore::submit`](crate::ClaimStore::submit) decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Counted towards the item (the lease was live, or had expired while the item still
    /// needed a judgment). Gold leases submit as `Counted` too (they count for nothing).
    Counted,
    /// Kept but not counted: the lease had expired and the item had all its judgments.
    Surplus,
    /// The lease was already submitted (or returned): nothing was stored this time.
    AlreadyClosed(LeaseState),
}

/// Judgments of one item, as [`ClaimStore::item_counts`](crate::ClaimStore::item_counts) reports them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemCount {
    pub item_id: String,
    pub pool: wozkit_core::event::ItemPool,
    pub needed: u32,
    pub done: u32,
    pub surplus: u32,
    /// Leases claimed, not submitted and not expired at the `now_ms` asked about.
    pub active: u32,
    pub returned: u32,
    /// Leases claimed, not submitted, expired.
    pub expired: u32,
}

/// A researcher account. The store keeps `access` as text; the server gives it meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Stable id: what logs record as the one who acted; never reused.
    pub id: String,
    /// Login name, unique among accounts not removed.
    pub name: String,
    /// `owner`, `researcher` or `observer`.
    pub access: String,
    /// The password's argon2 hash as a PHC string (empty once removed).
    pub password_hash: String,
    pub created_at_ms: u64,
    /// When the account was removed; it can no longer log in and its name is free again.
    pub removed_at_ms: Option<u64>,
}

/// An account to create. The id is chosen by the caller (see [`new_id`](crate::new_id)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAccount {
    pub id: String,
    pub name: String,
    pub access: String,
    pub password_hash: String,
    pub created_at_ms: u64,
}

/// A login to store: the hash of its cookie token (see [`hash_token`](crate::hash_token)),
/// never the token itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLogin {
    pub token_hash: String,
    pub account_id: String,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
}

/// A current login and its account, as [`AccountStore::login`](crate::AccountStore::login) finds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveLogin {
    pub account: Account,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
}

/// Failed logins since some time, for the rate limit: their times (oldest first) from one
/// client address and against one account name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailedLogins {
    pub by_address: Vec<u64>,
    pub by_name: Vec<u64>,
}
