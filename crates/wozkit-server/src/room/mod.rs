//! Live rooms: one tokio task per session in progress, owning its engine `Session`.
//!
//! Connections talk to a room through its inbox ([`RoomMsg`]); the room runs the engine, appends
//! what it emitted to the store, and only then sends the events (and a fresh per-role view) to
//! every connection and the ack to the sender. Timers (robot actions, the time limit, a partner's
//! grace period, bot moves) are the room's `select!` on the next wake-up time.
//!
//! The registry maps session ids to inboxes. A room not in memory (after a restart, or after its
//! task stopped) is rebuilt from its log the next time somebody needs it; at startup every live
//! session this instance may run is rebuilt so that its timers resume even if nobody comes back.
//!
//! Several instances may share one store: a room runs only on the instance holding its lease
//! (`lease.rs`), which is taken before the room is started or rebuilt.

mod actor;
mod bot;
pub mod lease;
pub mod model_user;
pub mod view;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};
use wozkit_core::engine::{Command, Session, replay};
use wozkit_core::event::{Event, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::OnNoPartner;
use wozkit_store::{NewEvent, StoreError};

use crate::app::AppState;
use actor::{Origin, RoomActor};
pub use model_user::{ModelUser, SystemWizard};

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
        /// Boxed: the inbox allocates its slots in blocks of 32 messages, each as large as the
        /// largest message, and a command is the largest part by far.
        cmd: Box<Command>,
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
    /// The simulated user's answer came back (see `model_user.rs`).
    SimulatedUser { outcome: model_user::Outcome },
    /// The system wizard's reply came back (see `model_user.rs`).
    SystemWizard { outcome: model_user::WizardOutcome },
    /// Events of a participant after the dialogue (questionnaire answers, a completion code),
    /// appended once under `key` by the room, the log's one writer while it is in memory (see
    /// [`Rooms::append_once`]).
    Append {
        key: String,
        events: Vec<NewEvent>,
        reply: oneshot::Sender<Result<Option<Vec<Event>>, StoreError>>,
    },
    /// The copilot's suggestion came back, asked when the session had `asked_at` messages (see
    /// `model_user.rs`).
    Copilot {
        outcome: model_user::WizardOutcome,
        asked_at: u32,
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

/// A room in memory: its inbox, and the switch that stops its task at once.
struct Entry {
    tx: mpsc::Sender<RoomMsg>,
    stop: Option<oneshot::Sender<()>>,
}

/// The rooms in memory.
#[derive(Default)]
pub struct Rooms {
    /// A std mutex: held for a map lookup or insert, never across an await.
    map: Mutex<HashMap<String, Entry>>,
}

impl Rooms {
    fn get(&self, id: &str) -> Option<mpsc::Sender<RoomMsg>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(id)
            .map(|e| &e.tx)
            .filter(|tx| !tx.is_closed())
            .cloned()
    }

    /// Inserts `tx` unless a live room is already registered; returns the one to use and, if
    /// it is `tx`, the receiver of its stop switch.
    fn insert(
        &self,
        id: &str,
        tx: mpsc::Sender<RoomMsg>,
    ) -> (mpsc::Sender<RoomMsg>, Option<oneshot::Receiver<()>>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = map.get(id).filter(|e| !e.tx.is_closed()) {
            return (existing.tx.clone(), None);
        }
        let (stop, stopped) = oneshot::channel();
        map.insert(
            id.to_string(),
            Entry {
                tx: tx.clone(),
                stop: Some(stop),
            },
        );
        (tx, Some(stopped))
    }

    /// Drops the entry of a room whose task has stopped.
    fn remove_closed(&self, id: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(id).is_some_and(|e| e.tx.is_closed()) {
            map.remove(id);
        }
    }

    /// Forgets a room whose task ended without closing (it panicked).
    fn remove(&self, id: &str) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// Stops a room's task at once, storing nothing more (its lease went to another instance).
    fn stop(&self, id: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stop) = map.get_mut(id).and_then(|e| e.stop.take()) {
            let _ = stop.send(());
        }
    }

    /// The sessions whose rooms are in memory.
    fn ids(&self) -> Vec<String> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .filter(|(_, e)| !e.tx.is_closed())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Appends `events` to the log of room session `session` once under `key` (a participant's
    /// questionnaire answers or completion code): through the room while its task is in memory
    /// on this instance, so that the room stays the log's one writer and its fold the log's
    /// (it lingers a while after the end), else straight to the store, which then has no other
    /// writer for this log here. `Ok(None)`: appended under `key` before.
    pub async fn append_once(
        &self,
        store: &dyn wozkit_store::EventStore,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>, StoreError> {
        if let Some(tx) = self.get(session) {
            let (reply, answer) = oneshot::channel();
            let msg = RoomMsg::Append {
                key: key.to_string(),
                events: events.clone(),
                reply,
            };
            // A room that stopped meanwhile (its inbox closed, or it ended without answering)
            // stored nothing of these: the store takes them. So does a room whose log another
            // instance took over: it no longer owns the log, and the keyed append cannot be
            // stored twice.
            if tx.send(msg).await.is_ok()
                && let Ok(stored) = answer.await
                && !matches!(stored, Err(StoreError::LogMoved { .. }))
            {
                return stored;
            }
        }
        store.append_once(session, key, events).await
    }

    /// Number of rooms in memory.
    pub fn len(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().filter(|e| !e.tx.is_closed()).count()
    }
}

/// Starts the room of a session that was just created (by pairing, which leased the room
/// before seating anyone): its task renews the lease for this instance, then starts the session
/// and seats the bots.
pub(crate) fn start_new(
    app: &AppState,
    study: Arc<LoadedStudy>,
    session_id: &str,
    seed: u64,
    humans: Vec<(Role, String)>,
    bots: Vec<Role>,
) -> mpsc::Sender<RoomMsg> {
    start_with_models(
        app,
        study,
        session_id,
        seed,
        humans,
        bots,
        Models::default(),
    )
}

/// Models in a new room's seats: a simulated user in the user's, a system under test in the
/// wizard's.
#[derive(Default)]
pub(crate) struct Models {
    pub user: Option<Arc<ModelUser>>,
    pub wizard: Option<Arc<SystemWizard>>,
}

/// [`start_new`], with the `models` given playing their seats (then `bots` holds the other
/// bots, if any).
pub(crate) fn start_with_models(
    app: &AppState,
    study: Arc<LoadedStudy>,
    session_id: &str,
    seed: u64,
    humans: Vec<(Role, String)>,
    bots: Vec<Role>,
    models: Models,
) -> mpsc::Sender<RoomMsg> {
    let session = Session::new(&study, session_id);
    let mut actor = RoomActor::new(app.clone(), study, session, seed, 0, humans, bots);
    if let Some(user) = models.user {
        actor.seat_model_user(user);
    }
    if let Some(wizard) = models.wizard {
        actor.seat_system_wizard(wizard);
    }
    spawn(app, session_id, actor, Origin::Fresh)
}

/// Registers the room and runs its task: the room stops at once, storing nothing more, if its
/// lease is found taken by another instance; a room that ends gives its lease back.
fn spawn(app: &AppState, id: &str, mut actor: RoomActor, origin: Origin) -> mpsc::Sender<RoomMsg> {
    let (tx, rx) = mpsc::channel(INBOX);
    actor.set_inbox(tx.downgrade());
    let (tx, stopped) = app.rooms.insert(id, tx);
    let Some(stopped) = stopped else {
        return tx;
    };
    let app = app.clone();
    let id = id.to_string();
    let fresh = matches!(origin, Origin::Fresh);
    tokio::spawn(async move {
        // A logged room was leased by `open`; a new one was leased by the pairing, and is
        // checked (renewed) again before it stores anything.
        if fresh {
            match lease::acquire(&app, &id).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::error!(
                        session = id,
                        "another instance holds the lease of this new room; not starting it"
                    );
                    return;
                }
                Err(e) => {
                    tracing::error!(session = id, "cannot lease the new room: {e}");
                    return;
                }
            }
        }
        // A panic in the room's code ends this room's task only: it is logged and counted,
        // the room leaves the registry (its log is intact: a participant's next connection
        // rebuilds it), and every other room goes on.
        let run = std::panic::AssertUnwindSafe(actor.run(rx, origin)).catch_unwind();
        tokio::select! {
            ran = run => match ran {
                Ok(()) => lease::release_if_ended(&app, &id).await,
                Err(panic) => {
                    app.metrics.panicked("room");
                    tracing::error!(session = id, "the room's task panicked: {}", panic_message(&panic));
                    app.rooms.remove(&id);
                }
            },
            Ok(()) = stopped => app.rooms.remove_closed(&id),
        }
    });
    tx
}

/// The message of a caught panic, when it is a string.
pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Whether a session of `study` with these events is a dialogue room: the study has one, and
/// the log is empty (killed before the room stored anything) or starts as a room starts.
fn is_room(study: &LoadedStudy, events: &[Event]) -> bool {
    study.study.has_room()
        && events
            .first()
            .is_none_or(|e| matches!(e.kind, EventKind::SessionStarted { .. }))
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
    // Only the instance holding the room's lease runs it (and fires its timers, disconnects
    // and endings); reaching the room on its owner is `lease::owner_of`'s business.
    if !lease::acquire(app, session_id).await? {
        let owner = lease::owner_of(app, session_id).await?;
        tracing::debug!(
            session = session_id,
            owner = owner.as_ref().map(|o| o.instance_id.as_str()),
            at = owner.as_ref().map(|o| o.address.as_str()),
            "another instance runs this room; not rebuilding it here"
        );
        return Ok(None);
    }
    let events = app.store.events(session_id, 0).await?;
    // Sessions of the store that are not rooms (a conversation with a system under test, a
    // self-dialog) are live too, and the lease sweep claims them like any orphan: they are
    // never rebuilt as rooms (a chat study has no dialogue states to replay). The lease stays
    // with this instance, so the sweep does not claim them again.
    if !is_room(&study, &events) {
        tracing::debug!(
            session = session_id,
            "not a dialogue room; nothing to rebuild"
        );
        return Ok(None);
    }
    let session = replay(&study, session_id, &events);
    let last_seq = events.last().map_or(0, |e| e.seq);
    let (mut bots, model_user) = logged_bots(app, &events);
    let mut humans: Vec<(Role, String)> = app
        .store
        .participants_in_session(session_id)
        .await?
        .into_iter()
        .filter_map(|p| p.role.map(|r| (r, p.id)))
        .collect();
    seat_takeovers(&mut humans, &events);
    // Killed before the room stored anything: whether a bot was to play the other role is not
    // in the log. A study that backfills with bots gives a lone participant one (either it was
    // paired with a bot, or its partner was never seated).
    if events.is_empty()
        && study.study.pairing.on_timeout == OnNoPartner::Bot
        && let [(role, _)] = humans.as_slice()
    {
        bots.push(role.other());
    }
    let mut actor = RoomActor::new(
        app.clone(),
        study,
        session,
        record.seed,
        last_seq,
        humans,
        bots,
    );
    if let Some(user) = model_user {
        actor.seat_model_user(user);
    }
    Ok(Some(spawn(app, session_id, actor, Origin::Log)))
}

/// The roles bots joined in the log as, and the simulated user among them if this server runs
/// it: a simulated user's seat is its again when this server runs that simulated user; else
/// the built-in user bot takes it over.
fn logged_bots(app: &AppState, events: &[Event]) -> (Vec<Role>, Option<Arc<ModelUser>>) {
    let mut model_user = None;
    let bots: Vec<Role> = events
        .iter()
        .filter_map(|e| match (&e.kind, &e.actor) {
            (
                EventKind::Joined { role, bot: true },
                wozkit_core::event::Actor::Bot { name, .. },
            ) => {
                let running = app.tunables.simulated_user.as_ref();
                match running.filter(|u| *role == Role::User && u.spec.actor_name() == *name) {
                    Some(user) => {
                        model_user = Some(user.clone());
                        None
                    }
                    None => Some(*role),
                }
            }
            _ => None,
        })
        .collect();
    (bots, model_user)
}

/// Gives each seat taken over in the log to the researcher who took it (the last takeover
/// wins), not to the participant who left it.
fn seat_takeovers(humans: &mut Vec<(Role, String)>, events: &[Event]) {
    for e in events {
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

/// The inbox of the session's room if it is in memory on this instance (no store access).
pub(crate) fn inbox(app: &AppState, session_id: &str) -> Option<mpsc::Sender<RoomMsg>> {
    app.rooms.get(session_id)
}

/// Sends `msg` to the session's room only if it is in memory (a closing connection has nothing
/// to tell a room that is gone).
pub(crate) async fn notify(app: &AppState, session_id: &str, msg: RoomMsg) {
    if let Some(tx) = app.rooms.get(session_id) {
        let _ = tx.send(msg).await;
    }
}

/// Rebuilds, in the background, every live session's room this instance may run (unowned,
/// its own, or whose owner's lease ran out), so that timers that ran out while the server was
/// down fire now and the grace periods of absent participants start; then keeps the leases
/// alive and takes over the rooms of instances that stop (see `lease.rs`).
pub(crate) fn resume_live_rooms(app: AppState) {
    lease::start(app);
}

#[cfg(test)]
mod tests {
    use wozkit_core::event::Actor;
    use wozkit_store::{EventStore, NewSession, SessionStore, SqliteStore};

    use super::*;

    fn joined() -> NewEvent {
        NewEvent {
            actor: Actor::System,
            kind: EventKind::Joined {
                role: Role::User,
                bot: false,
            },
            at_ms: 1,
        }
    }

    /// A room whose log another instance took over answers `LogMoved`: the append is not lost
    /// but goes to the store, once.
    #[tokio::test]
    async fn an_append_a_moved_room_refuses_goes_to_the_store() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = SqliteStore::open_dir(dir.path()).await.expect("store");
        store
            .create_session(NewSession {
                id: "s1".into(),
                study_id: "study".into(),
                study_version: "1".into(),
                seed: 1,
                created_at_ms: 0,
            })
            .await
            .expect("session");
        let rooms = Rooms::default();
        let (tx, mut rx) = mpsc::channel(1);
        let (_, stopped) = rooms.insert("s1", tx);
        assert!(stopped.is_some());
        // The stale room: every append is refused because its log moved on.
        let room = tokio::spawn(async move {
            let mut asked = 0;
            while let Some(msg) = rx.recv().await {
                if let RoomMsg::Append { reply, .. } = msg {
                    asked += 1;
                    let _ = reply.send(Err(StoreError::LogMoved {
                        session: "s1".into(),
                        after: 0,
                        last: 0,
                    }));
                }
            }
            asked
        });

        let stored = rooms
            .append_once(&store, "s1", "code", vec![joined()])
            .await
            .expect("stored by the store");
        assert_eq!(stored.map(|e| e.len()), Some(1));
        let again = rooms
            .append_once(&store, "s1", "code", vec![joined()])
            .await
            .expect("the second append under the key");
        assert!(again.is_none(), "stored twice under one key");
        assert_eq!(store.events("s1", 0).await.expect("events").len(), 1);

        rooms.remove("s1");
        assert_eq!(room.await.expect("the room task"), 2);
    }
}
