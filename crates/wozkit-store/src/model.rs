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

/// Which sessions [`Store::list_sessions`](crate::Store::list_sessions) and
/// [`Store::count_sessions`](crate::Store::count_sessions) return. The default selects all.
/// Listing is ordered by creation time, then id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionFilter {
    pub study_id: Option<String>,
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

/// Where an export page of [`Store::events_page`](crate::Store::events_page) resumes: just after
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
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Prolific => "prolific",
            Platform::Mturk => "mturk",
            Platform::Lab => "lab",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        match s {
            "prolific" => Some(Platform::Prolific),
            "mturk" => Some(Platform::Mturk),
            "lab" => Some(Platform::Lab),
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

impl Participant {
    /// Whether the participant is a test, left out of reports, exports and payments by default.
    pub fn is_test(&self) -> bool {
        self.external_ids.get(TEST_KEY).is_some_and(|v| v == "1")
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
