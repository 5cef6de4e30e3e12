//! Live rooms: one tokio task per session in progress, owning its engine `Session`.
//!
//! Connections talk to a room through its inbox ([`RoomMsg`]); the room runs the engine, appends
//! what it emitted to the store, and only then sends the events (and a fresh per-role view) to
//! every connection and the ack to the sender. Timers (robot actions, the time limit, a partner's
//! grace period, bot moves) are the room's `select!` on the next wake-up time.
//!
//! The registry maps session ids to inboxes. A room not in memory (after a restart, or after its
//! task stopped) is rebuilt from its log the next time somebody needs it; at startup every live
//! session is rebuilt so that its timers resume even if nobody comes back.

mod actor;
mod bot;
pub mod view;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use wozkit_core::engine::{Command, Session, replay};
use wozkit_core::event::{EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::OnNoPartner;
use wozkit_store::{SessionFilter, SessionStatus, StoreError};

use crate::app::AppState;
use actor::{Origin, RoomActor};

/// Messages to a room.
pub enum RoomMsg {
    /// A participant's connection joins: it is sent the events after `last_seq`, then a view.
    Connect {
        conn: u64,
        role: Role,
        /// The participant's id (a participant whose seat was taken over is refused).
        participant: String,
        last_seq: u64,
        /// Where the participant's page goes when the session ends (`/p`, with its seat).
        next: String,
        out: mpsc::Sender<Arc<str>>,
    },
    /// An intent from a participant: the role and id come from the cookie, never the frame.
    Cmd {
        conn: u64,
        role: Role,
        participant: String,
        id: String,
        cmd: Command,
    },
    /// The participant is typing (relayed to the partner, not logged).
    Typing { role: Role },
    /// The connection closed.
    Leave {
        conn: u64,
        role: Role,
        participant: String,
    },
    /// A researcher's read-only connection: it is sent both roles' welcome, the events after
    /// `last_seq` and views (as `observed` frames), then everything both roles are sent, and
    /// `seats` after every change. Nothing is logged and the participants are not told.
    Observe {
        conn: u64,
        last_seq: u64,
        out: mpsc::Sender<Arc<str>>,
    },
    /// An observer's connection closed.
    Unobserve { conn: u64 },
    /// A researcher takes the seat of `role`, whose participant is not connected: from now on
    /// `participant` (the researcher's own participant record) plays it. The reply says why not.
    TakeOver {
        role: Role,
        /// The researcher's account id.
        researcher: String,
        participant: String,
        reply: tokio::sync::oneshot::Sender<Result<(), TakeOverRefused>>,
    },
}

/// Why a room refused a takeover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeOverRefused {
    /// The session has ended.
    Ended,
    /// A bot plays that role.
    Bot,
    /// The role's participant is connected.
    Present,
    /// The takeover could not be stored.
    Store,
}

impl TakeOverRefused {
    /// The reason in words, for the researcher.
    pub fn message(self) -> &'static str {
        match self {
            TakeOverRefused::Ended => "The session has ended: there is no seat to take.",
            TakeOverRefused::Bot => "A bot plays this role: there is no participant to replace.",
            TakeOverRefused::Present => {
                "The participant in this role is connected: a seat can only be taken over while its participant is away."
            }
            TakeOverRefused::Store => "The takeover could not be saved; please try again.",
        }
    }
}

/// Outbound frames queued per connection before it counts as too slow and is dropped.
pub const OUTBOX: usize = 512;
/// Inbound messages queued per room.
const INBOX: usize = 256;

/// The rooms in memory.
#[derive(Default)]
pub struct Rooms {
    /// A std mutex: held for a map lookup or insert, never across an await.
    map: Mutex<HashMap<String, mpsc::Sender<RoomMsg>>>,
}

impl Rooms {
    fn get(&self, id: &str) -> Option<mpsc::Sender<RoomMsg>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(id).filter(|tx| !tx.is_closed()).cloned()
    }

    /// Inserts `tx` unless a live room is already registered; returns the one to use and
    /// whether it is `tx`.
    fn insert(&self, id: &str, tx: mpsc::Sender<RoomMsg>) -> (mpsc::Sender<RoomMsg>, bool) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = map.get(id).filter(|t| !t.is_closed()) {
            return (existing.clone(), false);
        }
        map.insert(id.to_string(), tx.clone());
        (tx, true)
    }

    /// Drops the entry of a room whose task has stopped.
    fn remove_closed(&self, id: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(id).is_some_and(mpsc::Sender::is_closed) {
            map.remove(id);
        }
    }

    /// Number of rooms in memory.
    pub fn len(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().filter(|t| !t.is_closed()).count()
    }
}

/// Starts the room of a session that was just created (by pairing): its task starts the session
/// and seats the bots.
pub(crate) fn start_new(
    app: &AppState,
    study: Arc<LoadedStudy>,
    session_id: &str,
    seed: u64,
    humans: Vec<(Role, String)>,
    bots: Vec<Role>,
) -> mpsc::Sender<RoomMsg> {
    let session = Session::new(&study, session_id);
    let actor = RoomActor::new(app.clone(), study, session, seed, 0, humans, bots);
    spawn(app, session_id, actor, Origin::Fresh)
}

fn spawn(app: &AppState, id: &str, actor: RoomActor, origin: Origin) -> mpsc::Sender<RoomMsg> {
    let (tx, rx) = mpsc::channel(INBOX);
    let (tx, ours) = app.rooms.insert(id, tx);
    if ours {
        tokio::spawn(actor.run(rx, origin));
    }
    tx
}

/// The room of a session, rebuilding it from the log if it is not in memory. `None` when the
/// session does not exist or its study is not served by this server.
pub(crate) async fn open(
    app: &AppState,
    session_id: &str,
) -> Result<Option<mpsc::Sender<RoomMsg>>, StoreError> {
    if let Some(tx) = app.rooms.get(session_id) {
        return Ok(Some(tx));
    }
    let Some(record) = app.store.session(session_id).await? else {
        return Ok(None);
    };
    let Some(study) = app.study(Some(&record.study_id)) else {
        tracing::warn!(
            session = session_id,
            study = record.study_id,
            "session of a study this server does not serve"
        );
        return Ok(None);
    };
    let events = app.store.events(session_id, 0).await?;
    let session = replay(&study, session_id, &events);
    let last_seq = events.last().map_or(0, |e| e.seq);
    let mut bots: Vec<Role> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Joined { role, bot: true } => Some(*role),
            _ => None,
        })
        .collect();
    let mut humans: Vec<(Role, String)> = app
        .store
        .participants_in_session(session_id)
        .await?
        .into_iter()
        .filter_map(|p| p.role.map(|r| (r, p.id)))
        .collect();
    // A seat taken over belongs to the researcher who took it (the last takeover wins), not to
    // the participant who left it.
    for e in &events {
        if let EventKind::TakenOver {
            role, participant, ..
        } = &e.kind
        {
            humans.retain(|(r, p)| r != role || p == participant);
            if !humans.iter().any(|(r, _)| r == role) {
                humans.push((*role, participant.clone()));
            }
        }
    }
    // Killed before the room stored anything: whether a bot was to play the other role is not
    // in the log. A study that backfills with bots gives a lone participant one (either it was
    // paired with a bot, or its partner was never seated).
    if events.is_empty()
        && study.study.pairing.on_timeout == OnNoPartner::Bot
        && let [(role, _)] = humans.as_slice()
    {
        bots.push(role.other());
    }
    let actor = RoomActor::new(
        app.clone(),
        study,
        session,
        record.seed,
        last_seq,
        humans,
        bots,
    );
    Ok(Some(spawn(app, session_id, actor, Origin::Log)))
}

/// Sends `msg` to the session's room, rebuilding the room once if its task has just stopped.
pub(crate) async fn send(
    app: &AppState,
    session_id: &str,
    msg: RoomMsg,
) -> Result<bool, StoreError> {
    let Some(tx) = open(app, session_id).await? else {
        return Ok(false);
    };
    match tx.send(msg).await {
        Ok(()) => Ok(true),
        Err(mpsc::error::SendError(msg)) => {
            app.rooms.remove_closed(session_id);
            let Some(tx) = open(app, session_id).await? else {
                return Ok(false);
            };
            Ok(tx.send(msg).await.is_ok())
        }
    }
}

/// Sends `msg` to the session's room only if it is in memory (a closing connection has nothing
/// to tell a room that is gone).
pub(crate) async fn notify(app: &AppState, session_id: &str, msg: RoomMsg) {
    if let Some(tx) = app.rooms.get(session_id) {
        let _ = tx.send(msg).await;
    }
}

/// Rebuilds every live session's room in the background, so that timers that ran out while the
/// server was down fire now and the grace periods of absent participants start.
pub(crate) fn resume_live_rooms(app: AppState) {
    tokio::spawn(async move {
        let filter = SessionFilter {
            status: Some(SessionStatus::Live),
            ..SessionFilter::default()
        };
        let live = match app.store.list_sessions(&filter).await {
            Ok(live) => live,
            Err(e) => {
                tracing::error!("cannot list live sessions to resume them: {e}");
                return;
            }
        };
        for record in live {
            if *app.shutdown.borrow() {
                return;
            }
            if let Err(e) = open(&app, &record.id).await {
                tracing::error!(session = record.id, "cannot resume session: {e}");
            }
        }
    });
}
