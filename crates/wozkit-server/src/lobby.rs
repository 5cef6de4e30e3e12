//! The waiting room's queues: per study (and optional private pair key), participants waiting
//! for the complementary role, first come first served — kept in the store's `waiting` table,
//! so every instance sharing a database has one lobby.
//!
//! Only participants with a live waiting-room connection are queued, so nobody is paired with a
//! partner who already closed the tab; and a connection that stopped answering its heartbeat
//! (a socket that died without closing) is skipped, so nobody is paired with a partner who will
//! never arrive. A participant whose partner never arrived anyway goes back to the front of the
//! queue. A participant is never paired with itself: a second tab replaces the first tab's
//! place (the first tab is told at once, on whichever instance it waits, and the wait counts
//! from it), and two entries of the same crowd worker never match. Pairing is one atomic store call
//! ([`LobbyStore::join_lobby`]): take the partner, or queue.
//!
//! The queue is ordered by waiting time (front places first, then the time the participant
//! first queued, then arrival), and a reload keeps that time for the grace period, so a waiter
//! who reloads keeps their place. Roles are balanced twice: at entry over everyone present
//! ([`Lobby::assign_role`]), and in the waiting room, where the last waiter of a role in lasting
//! surplus (nobody of the other role can still come for them) is moved to the other role
//! ([`Lobby::switch_role`]) to read its instructions and queue again, first.
//!
//! The participant who takes a partner creates the session and tells the partner through
//! [`Lobby::tell`]: in this process directly when the partner's connection is here, otherwise as
//! a lobby notice through the store (PostgreSQL `NOTIFY`), which the instance holding that
//! connection receives ([`listen`]) and delivers. One mechanism whatever the backend; on
//! SQLite (one process) every partner is local.
//!
//! What this instance remembers besides the table (a participant's waiting time across
//! reconnects, a place kept at the front, the connections waiting here) is dropped once they
//! leave for good (gone longer than their grace period), so its size follows the people actually
//! waiting. The counts on the researcher console and the role given to a newcomer read the
//! table (every instance's live places); only the metrics count this instance's waiting
//! connections. The instance is named by its instance id, the one of its room leases.
//!
//! Bookkeeping behind a std mutex (held for a few map operations, never across an await).
//! Instants are `tokio::time` instants, so tests pause the clock; times in the table are
//! milliseconds since the epoch.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use wozkit_store::prelude::*;

use tokio::sync::{OnceCell, oneshot};
use tokio::time::Instant;
use wozkit_core::event::Role;
use wozkit_store::store::{Joined, NewWaiter, RoleSwitch, Waiter};
use wozkit_store::{Store, StoreError};

use crate::app::AppState;

/// Expired entries are looked for at most this often (a sweep walks every entry).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Meta key prefix of each study's count of roles handed out on a tie ([`Lobby::assign_role`]).
const TIES_PREFIX: &str = "lobby/ties/";

/// Which queue: the study, and a private pair key (lab links and `/try` pair only with the same
/// key; crowd links have none).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueKey {
    pub study: String,
    pub pair: Option<String>,
}

/// Someone asking to be paired.
#[derive(Clone, Debug)]
pub struct Ticket {
    pub participant: String,
    /// `platform:worker id`, when the platform gave one.
    pub worker: Option<String>,
    pub role: Role,
    /// The waiting-room connection holding the place.
    pub conn: u64,
}

/// Where a partner waits: which instance, which connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub instance: String,
    pub conn: u64,
}

/// What a waiting participant is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Told {
    /// A partner took them: go to this session.
    Paired { session: String },
    /// A partner took them but could not create the session: queue again.
    Retry,
    /// Another tab of theirs took the place.
    Replaced,
}

/// The result of asking to be paired.
pub enum Enqueued {
    /// A partner was waiting: it is removed from the queue; tell it the session with
    /// [`Lobby::tell`] at `place`.
    Matched { partner: Ticket, place: Place },
    /// Nobody fits yet; `rx` fires when somebody takes this participant.
    Queued {
        since_ms: u64,
        rx: oneshot::Receiver<Told>,
    },
}

/// How many wait in one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueCount {
    pub key: QueueKey,
    pub users: usize,
    pub wizards: usize,
}

/// Where a waiter stands in their queue (see [`Lobby::standing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standing {
    /// 1-based place among the live waiters of their role in their queue.
    pub position: usize,
    /// The public queue holds at least two live waiters of their role, none of the other, and
    /// they are the last: the one a lasting surplus moves to the other role (the store decides,
    /// counting who else is on their way: [`Lobby::switch_role`]).
    pub may_switch: bool,
}

/// When a participant started waiting.
struct Since {
    ms: u64,
    /// Set when their connection closed: forgotten at this time unless they come back.
    forget_at: Option<Instant>,
}

/// A connection of this instance holding a place in the table.
struct Local {
    key: QueueKey,
    role: Role,
    conn: u64,
    notify: oneshot::Sender<Told>,
    /// When the table was last told that this connection is alive.
    stored_heard: Instant,
    /// The table was found without this connection's place (no notice having come): every
    /// later sign of life is answered "gone" without asking the table again.
    lost: bool,
}

#[derive(Default)]
struct Inner {
    /// The connections waiting here, by participant.
    local: HashMap<String, Local>,
    /// When each participant started waiting, kept across reconnects so the wait limit counts
    /// the whole wait.
    since: HashMap<String, Since>,
    /// Participants whose partner never arrived: queued first when they come back, if they
    /// come back before the given time.
    first: HashMap<String, Instant>,
    /// When expired entries were last looked for.
    swept_at: Option<Instant>,
}

impl Inner {
    /// Drops what was kept for participants who left for good (at most once per
    /// [`SWEEP_EVERY`], unless `force`).
    fn sweep(&mut self, now: Instant, force: bool) {
        if !force && self.swept_at.is_some_and(|t| now < t + SWEEP_EVERY) {
            return;
        }
        self.swept_at = Some(now);
        self.since
            .retain(|_, s| s.forget_at.is_none_or(|t| now < t));
        self.first.retain(|_, t| now < *t);
    }

    /// Delivers `told` to the connection `conn` of `participant` waiting here, if it still is.
    fn deliver(&mut self, participant: &str, conn: u64, told: Told) -> bool {
        match self.local.get(participant) {
            Some(l) if l.conn == conn => {}
            _ => return false,
        }
        let l = self.local.remove(participant).expect("checked above");
        l.notify.send(told).is_ok()
    }

    /// Holds a place here for `ticket` in the queue `key`: whether the participant is to go
    /// first, since when they have waited, the receiver of what they will be told and the place
    /// of another tab of theirs it replaces.
    fn hold(
        &mut self,
        key: &QueueKey,
        ticket: &Ticket,
        now: Instant,
        now_ms: u64,
    ) -> (bool, u64, oneshot::Receiver<Told>, Option<Local>) {
        self.sweep(now, false);
        let front = self.first.contains_key(&ticket.participant);
        let since = self
            .since
            .entry(ticket.participant.clone())
            .or_insert(Since {
                ms: now_ms,
                forget_at: None,
            });
        since.forget_at = None;
        let since_ms = since.ms;
        let (notify, rx) = oneshot::channel();
        let replaced = self.local.insert(
            ticket.participant.clone(),
            Local {
                key: key.clone(),
                role: ticket.role,
                conn: ticket.conn,
                notify,
                stored_heard: now,
                lost: false,
            },
        );
        (front, since_ms, rx, replaced)
    }

    /// Drops the place held here for `ticket`, if it is still this connection's.
    fn forget(&mut self, ticket: &Ticket) {
        if self
            .local
            .get(&ticket.participant)
            .is_some_and(|l| l.conn == ticket.conn)
        {
            self.local.remove(&ticket.participant);
        }
    }
}

/// The lobby as seen from one instance.
pub struct Lobby {
    /// This instance, as named in the table and in notices: the instance id of its room leases.
    instance: String,
    inner: Mutex<Inner>,
    /// Set once the notice listener runs (see [`listen`]).
    listener: OnceCell<()>,
}

/// A notice telling the instance `place` that `participant` was paired (or must queue again,
/// or was replaced). The instance id comes last, so it may hold any character.
fn notice(place: &Place, participant: &str, told: &Told) -> String {
    let (kind, session) = match told {
        Told::Paired { session } => ("paired", format!(" {session}")),
        Told::Retry => ("retry", String::new()),
        Told::Replaced => ("replaced", String::new()),
    };
    format!(
        "{kind} {} {participant}{session} {}",
        place.conn, place.instance
    )
}

/// Reads a notice made by [`notice`]: the place, the participant and what they are told.
fn parse_notice(text: &str) -> Option<(Place, String, Told)> {
    let mut words = text.splitn(4, ' ');
    let kind = words.next()?;
    let conn = words.next()?.parse().ok()?;
    let participant = words.next()?.to_string();
    let rest = words.next()?;
    let (told, instance) = match kind {
        "paired" => {
            let (session, instance) = rest.split_once(' ')?;
            (
                Told::Paired {
                    session: session.to_string(),
                },
                instance,
            )
        }
        "retry" => (Told::Retry, rest),
        "replaced" => (Told::Replaced, rest),
        _ => return None,
    };
    (!instance.is_empty() && !participant.is_empty()).then(|| {
        (
            Place {
                instance: instance.to_string(),
                conn,
            },
            participant,
            told,
        )
    })
}

impl Lobby {
    /// The lobby of the instance `instance` (the instance id it names in the table, in notices
    /// and in its room leases: one id per instance).
    pub fn new(instance: String) -> Self {
        Lobby {
            instance,
            inner: Mutex::default(),
            listener: OnceCell::new(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        // A poisoned lock only means a panic elsewhere; the maps are still consistent.
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// This instance's name in the table and in notices.
    #[cfg(test)]
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// A notice from some instance: delivered if it is about a connection waiting here.
    pub fn receive(&self, text: &str) {
        let Some((place, participant, told)) = parse_notice(text) else {
            tracing::warn!(notice = text, "lobby: unreadable notice");
            return;
        };
        if place.instance == self.instance {
            self.with(|inner| inner.deliver(&participant, place.conn, told));
        }
    }

    /// Tells the participant waiting at `place`: here directly, elsewhere through the store.
    pub async fn tell(
        &self,
        store: &dyn Store,
        place: &Place,
        participant: &str,
        told: Told,
    ) -> Result<(), StoreError> {
        if place.instance == self.instance {
            self.with(|inner| inner.deliver(participant, place.conn, told));
            return Ok(());
        }
        if !store
            .notify_lobby(&notice(place, participant, &told))
            .await?
        {
            // No notices on this backend: nobody else can be waiting.
            tracing::warn!(
                participant,
                "lobby: a partner on another instance without notices"
            );
        }
        Ok(())
    }

    /// Queues `ticket`, or takes the longest-waiting live partner of the other role (one heard
    /// from within `stale_after`), in one atomic store call.
    pub async fn enqueue(
        &self,
        store: &dyn Store,
        key: QueueKey,
        ticket: Ticket,
        now_ms: u64,
        stale_after: Duration,
    ) -> Result<Enqueued, StoreError> {
        let now = Instant::now();
        let (front, since_ms, rx, replaced) =
            self.with(|inner| inner.hold(&key, &ticket, now, now_ms));
        if let Some(old) = replaced {
            // Another tab here gives up its place to this one.
            let _ = old.notify.send(Told::Replaced);
        }
        let entry = NewWaiter {
            participant: ticket.participant.clone(),
            study_id: key.study.clone(),
            pair_key: key.pair.clone(),
            role: ticket.role,
            worker: ticket.worker.clone(),
            instance: self.instance.clone(),
            conn: ticket.conn,
            front,
            since_ms,
            heard_at_ms: now_ms,
        };
        let live_since = now_ms.saturating_sub(stale_after.as_millis() as u64);
        let joined = store.join_lobby(entry, live_since).await;
        let joined = match joined {
            Ok(j) => j,
            Err(e) => {
                self.with(|inner| inner.forget(&ticket));
                return Err(e);
            }
        };
        if let Some(old) = joined.replaced
            && old.instance != self.instance
        {
            self.tell_replaced(store, old, &ticket.participant).await;
        }
        Ok(self.settle(joined.joined, &ticket, since_ms, rx))
    }

    /// Tells the tab of `participant` on another instance, whose place `old` was, that it gave
    /// up its place to this one (a tab here is told when the new one takes its entry).
    async fn tell_replaced(&self, store: &dyn Store, old: Waiter, participant: &str) {
        let place = Place {
            instance: old.instance,
            conn: old.conn,
        };
        if let Err(e) = self.tell(store, &place, participant, Told::Replaced).await {
            tracing::warn!(
                participant,
                instance = place.instance,
                "lobby: cannot tell a replaced tab on another instance: {e}"
            );
        }
    }

    /// What the table's answer to `ticket` means here: a partner taken (the places of both
    /// forgotten), or the ticket queued since the earliest start among its tabs.
    fn settle(
        &self,
        joined: Joined,
        ticket: &Ticket,
        since_ms: u64,
        rx: oneshot::Receiver<Told>,
    ) -> Enqueued {
        match joined {
            Joined::Taken(w) => {
                self.with(|inner| {
                    inner.forget(ticket);
                    for p in [&w.participant, &ticket.participant] {
                        inner.since.remove(p);
                        inner.first.remove(p);
                    }
                });
                Enqueued::Matched {
                    place: Place {
                        instance: w.instance.clone(),
                        conn: w.conn,
                    },
                    partner: ticket_of(w),
                }
            }
            Joined::Queued(w) => {
                // The table keeps the earliest start among the participant's tabs, wherever
                // they waited.
                let since_ms = since_ms.min(w.since_ms);
                self.with(|inner| {
                    inner.first.remove(&ticket.participant);
                    if let Some(s) = inner.since.get_mut(&ticket.participant) {
                        s.ms = s.ms.min(since_ms);
                    }
                });
                Enqueued::Queued { since_ms, rx }
            }
        }
    }

    /// Connection `conn` of `participant` said something: it is alive. The table is told at most
    /// once per `every`. `false` when the table no longer holds this connection's place (taken
    /// by a partner whose notice is on its way, or replaced by another tab).
    pub async fn heard(
        &self,
        store: &dyn Store,
        participant: &str,
        conn: u64,
        now_ms: u64,
        every: Duration,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let known = self.with(|inner| match inner.local.get_mut(participant) {
            Some(l) if l.conn == conn && l.lost => Some(false),
            Some(l) if l.conn == conn && now >= l.stored_heard + every => {
                l.stored_heard = now;
                None
            }
            _ => Some(true),
        });
        if let Some(known) = known {
            return Ok(known);
        }
        let held = store
            .lobby_heard(participant, &self.instance, conn, now_ms)
            .await?;
        if !held {
            // Gone stays gone: until a notice comes or the place is resolved, each sign of life
            // is answered from here (answering "held" between two asks would restart the wait
            // for a notice every time).
            self.with(|inner| {
                if let Some(l) = inner.local.get_mut(participant)
                    && l.conn == conn
                {
                    l.lost = true;
                }
            });
        }
        Ok(held)
    }

    /// Removes the place held by connection `conn`; false if it is gone (taken by a partner,
    /// or replaced by another tab).
    pub async fn leave(
        &self,
        store: &dyn Store,
        participant: &str,
        conn: u64,
    ) -> Result<bool, StoreError> {
        let removed = store.leave_lobby(participant, &self.instance, conn).await?;
        if removed {
            self.with(|inner| {
                if inner.local.get(participant).is_some_and(|l| l.conn == conn) {
                    inner.local.remove(participant);
                }
            });
        }
        Ok(removed)
    }

    /// The table no longer holds the place of connection `conn` though no notice came (another
    /// tab took it on another instance, or a notice was lost): what to tell the connection, or
    /// `None` to wait a little longer. `lost_since` is when the place was first found gone; a
    /// notice gets `patience` to arrive before the participant's record is asked whether they
    /// were paired (or else they queue again).
    pub async fn resolve_lost(
        &self,
        store: &dyn Store,
        key: &QueueKey,
        participant: &str,
        conn: u64,
        lost_since: Instant,
        patience: Duration,
    ) -> Result<Option<Told>, StoreError> {
        let waiters = store.waiters(Some(&key.study)).await?;
        let elsewhere = waiters.iter().any(|w| {
            w.participant == participant && (w.instance != self.instance || w.conn != conn)
        });
        if elsewhere {
            self.gone(participant, conn, Instant::now());
            return Ok(Some(Told::Replaced));
        }
        if lost_since.elapsed() < patience {
            return Ok(None);
        }
        let session = store
            .participant(participant)
            .await?
            .and_then(|p| p.session_id);
        self.with(|inner| {
            if inner.local.get(participant).is_some_and(|l| l.conn == conn) {
                inner.local.remove(participant);
            }
        });
        Ok(Some(match session {
            Some(session) => Told::Paired { session },
            None => Told::Retry,
        }))
    }

    /// A participant's waiting connection is gone: their waiting time is kept until `forget_at`
    /// for a reconnect (a reload, a network blip), then dropped — unless another tab of theirs
    /// waits here, which keeps it.
    pub fn gone(&self, participant: &str, conn: u64, forget_at: Instant) {
        self.with(|inner| {
            match inner.local.get(participant) {
                Some(l) if l.conn == conn => {
                    inner.local.remove(participant);
                }
                Some(_) => return,
                None => {}
            }
            if let Some(s) = inner.since.get_mut(participant) {
                s.forget_at = Some(forget_at);
            }
        });
    }

    /// Forgets when a participant started waiting (after pairing or giving up).
    pub fn forget(&self, participant: &str) {
        self.with(|inner| {
            inner.since.remove(participant);
            inner.first.remove(participant);
        });
    }

    /// The partner of `participant` never arrived in the room: the next time they queue
    /// (before `until`), they are queued ahead of everyone else.
    pub fn put_first(&self, participant: &str, until: Instant) {
        self.with(|inner| {
            inner.first.insert(participant.to_string(), until);
        });
    }

    /// 1-based place among those waiting for the same role in the same queue, on every
    /// instance, counting only places heard from within `stale_after` (besides the
    /// participant's own). Places silent for twice that long belong to connections that are
    /// gone without giving them up (their instance was killed): they are removed.
    #[cfg(test)]
    pub async fn position(
        &self,
        store: &dyn Store,
        key: &QueueKey,
        participant: &str,
        now_ms: u64,
        stale_after: Duration,
    ) -> Result<Option<usize>, StoreError> {
        Ok(self
            .standing(store, key, participant, now_ms, stale_after)
            .await?
            .map(|s| s.position))
    }

    /// Where `participant` stands in their queue ([`position`](Lobby::position)), and whether
    /// they may be the one to switch roles ([`Standing::may_switch`]), from one read of the
    /// table.
    pub async fn standing(
        &self,
        store: &dyn Store,
        key: &QueueKey,
        participant: &str,
        now_ms: u64,
        stale_after: Duration,
    ) -> Result<Option<Standing>, StoreError> {
        let waiters = store.waiters(Some(&key.study)).await?;
        let stale_ms = stale_after.as_millis() as u64;
        let live_since = now_ms.saturating_sub(stale_ms);
        let dead_before = now_ms.saturating_sub(2 * stale_ms);
        for w in waiters.iter().filter(|w| w.heard_at_ms < dead_before) {
            // Exact place only: a participant queued again since then keeps the new one.
            if let Err(e) = store.leave_lobby(&w.participant, &w.instance, w.conn).await {
                tracing::warn!(
                    participant = w.participant,
                    instance = w.instance,
                    "lobby: cannot remove a place left by a dead connection: {e}"
                );
            }
        }
        let Some(me) = waiters.iter().find(|w| w.participant == participant) else {
            return Ok(None);
        };
        let live = |w: &&Waiter| w.participant == participant || w.heard_at_ms >= live_since;
        let mine: Vec<&Waiter> = waiters
            .iter()
            .filter(|w| w.pair_key == key.pair && w.role == me.role)
            .filter(live)
            .collect();
        let Some(position) = mine.iter().position(|w| w.participant == participant) else {
            return Ok(None);
        };
        let others = waiters
            .iter()
            .filter(|w| w.pair_key == key.pair && w.role == me.role.other())
            .filter(live)
            .count();
        Ok(Some(Standing {
            position: position + 1,
            may_switch: key.pair.is_none()
                && others == 0
                && mine.len() >= 2
                && position + 1 == mine.len(),
        }))
    }

    /// Moves the waiting connection `ticket.conn` of `ticket.participant` to the other role
    /// if its role is in lasting surplus ([`LobbyStore::switch_lobby_role`]): it is the last of at
    /// least two more waiters of its role than participants of the other role present
    /// (waiting, or entered within `arrival`). Then its place is gone, the participant's
    /// record has the other role and `flow_step` (that role's instructions), and when they
    /// queue again before `until` they are queued first, with a fresh wait limit. `false`
    /// when no switch is due (or the place is gone).
    #[allow(clippy::too_many_arguments)]
    pub async fn switch_role(
        &self,
        store: &dyn Store,
        key: &QueueKey,
        ticket: &Ticket,
        flow_step: String,
        now_ms: u64,
        stale_after: Duration,
        arrival: Duration,
        until: Instant,
    ) -> Result<bool, StoreError> {
        if key.pair.is_some() {
            return Ok(false);
        }
        let switched = store
            .switch_lobby_role(RoleSwitch {
                participant: ticket.participant.clone(),
                study_id: key.study.clone(),
                instance: self.instance.clone(),
                conn: ticket.conn,
                from: ticket.role,
                flow_step,
                at_ms: now_ms,
                live_since_ms: now_ms.saturating_sub(stale_after.as_millis() as u64),
                arrived_since_ms: now_ms.saturating_sub(arrival.as_millis() as u64),
            })
            .await?;
        if switched {
            self.with(|inner| {
                if inner
                    .local
                    .get(&ticket.participant)
                    .is_some_and(|l| l.conn == ticket.conn)
                {
                    inner.local.remove(&ticket.participant);
                }
                inner.since.remove(&ticket.participant);
                inner.first.insert(ticket.participant.clone(), until);
            });
        }
        Ok(switched)
    }

    /// Everyone waiting for a partner on every instance (in `study`, or in every study), per
    /// queue: the places in the store's table heard from within `stale_after` of `now_ms`, as
    /// [`position`](Lobby::position) counts them. For the researcher console.
    pub async fn waiting(
        &self,
        store: &dyn Store,
        study: Option<&str>,
        now_ms: u64,
        stale_after: Duration,
    ) -> Result<Vec<QueueCount>, StoreError> {
        let live_since = now_ms.saturating_sub(stale_after.as_millis() as u64);
        let waiters = store.waiters(study).await?;
        Ok(count_by_queue(
            waiters
                .iter()
                .filter(|w| w.heard_at_ms >= live_since)
                .map(|w| {
                    (
                        QueueKey {
                            study: w.study_id.clone(),
                            pair: w.pair_key.clone(),
                        },
                        w.role,
                    )
                }),
        ))
    }

    /// The role for a newcomer to `study`: the one with fewer participants present across
    /// every instance ([`LobbyStore::lobby_presence`]: those with a live place in the lobby, and
    /// those who entered, or were switched to a role, within `arrival` and are not yet in a
    /// session — still reading consent and instructions), so a burst of arrivals is split
    /// evenly before anyone reaches the waiting room. On a tie, alternating (the first is the
    /// wizard, whose instructions take longer to read) by a count of tie-broken roles kept in
    /// the store (meta key `lobby/ties/STUDY`), so instances sharing a database alternate
    /// together. The count is bumped in one atomic step ([`MetaStore::meta_increment`]), so two
    /// newcomers breaking a tie at the same moment, on one instance or two, get different
    /// roles. Newcomers counted at the same moment may still unbalance the roles by a few, as
    /// may people who leave before the waiting room: the waiting room resolves a lasting
    /// surplus ([`switch_role`](Lobby::switch_role)).
    pub async fn assign_role(
        &self,
        store: &dyn Store,
        study: &str,
        now_ms: u64,
        stale_after: Duration,
        arrival: Duration,
    ) -> Result<Role, StoreError> {
        let live_since = now_ms.saturating_sub(stale_after.as_millis() as u64);
        let arrived_since = now_ms.saturating_sub(arrival.as_millis() as u64);
        let present = store
            .lobby_presence(study, arrived_since, live_since)
            .await?;
        Ok(match present.users.cmp(&present.wizards) {
            std::cmp::Ordering::Greater => Role::Wizard,
            std::cmp::Ordering::Less => Role::User,
            std::cmp::Ordering::Equal => {
                let handed = store
                    .meta_increment(&format!("{TIES_PREFIX}{study}"))
                    .await?;
                // The first tie (count 1) goes to the wizard.
                if handed % 2 == 1 {
                    Role::Wizard
                } else {
                    Role::User
                }
            }
        })
    }

    /// Everyone waiting on this instance, per queue (its waiting connections, live or not; for
    /// this instance's metrics — the console counts every instance with [`waiting`](Lobby::waiting)).
    pub fn counts(&self) -> Vec<QueueCount> {
        self.with(|inner| count_by_queue(inner.local.values().map(|l| (l.key.clone(), l.role))))
    }

    /// How many entries this instance holds about participants (waiting connections, waiting
    /// times, places kept at the front), after dropping those of participants who left for
    /// good: 0 when nobody waits here or is expected back.
    pub fn size(&self, now: Instant) -> usize {
        self.with(|inner| {
            inner.sweep(now, true);
            inner.local.len() + inner.since.len() + inner.first.len()
        })
    }
}

/// How many wait per queue and role, sorted by study and pair key.
fn count_by_queue(places: impl Iterator<Item = (QueueKey, Role)>) -> Vec<QueueCount> {
    let mut by_key: HashMap<QueueKey, (usize, usize)> = HashMap::new();
    for (key, role) in places {
        let c = by_key.entry(key).or_default();
        match role {
            Role::User => c.0 += 1,
            Role::Wizard => c.1 += 1,
        }
    }
    let mut out: Vec<QueueCount> = by_key
        .into_iter()
        .map(|(key, (users, wizards))| QueueCount {
            key,
            users,
            wizards,
        })
        .collect();
    out.sort_by(|a, b| (&a.key.study, &a.key.pair).cmp(&(&b.key.study, &b.key.pair)));
    out
}

/// The ticket of a waiter taken from the table.
fn ticket_of(w: Waiter) -> Ticket {
    Ticket {
        participant: w.participant,
        worker: w.worker,
        role: w.role,
        conn: w.conn,
    }
}

/// Starts (once per instance) delivering lobby notices from other instances to the connections
/// waiting here, until the server stops. A backend without notices (SQLite, one process) needs
/// none. Returns once notices are being received, so a participant queued afterwards is told.
pub async fn listen(app: &AppState) {
    app.lobby
        .listener
        .get_or_init(|| async {
            // Before anybody queues here: places named after this instance are left from an
            // earlier run of it (killed before giving them up); on the store's only instance
            // every place is.
            match app.store.waiters(None).await {
                Ok(waiters) => {
                    for w in waiters
                        .iter()
                        .filter(|w| app.tunables.sole_instance || w.instance == app.lobby.instance)
                    {
                        if let Err(e) = app
                            .store
                            .leave_lobby(&w.participant, &w.instance, w.conn)
                            .await
                        {
                            tracing::warn!(
                                participant = w.participant,
                                "lobby: cannot remove a place left by an earlier run: {e}"
                            );
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!("lobby: cannot read the places left by an earlier run: {e}")
                }
            }
            let mut rx = match app.store.listen_lobby().await {
                Ok(Some(rx)) => rx,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(
                        "lobby: cannot listen for notices from other instances; partners found \
                         there will not reach participants waiting here: {e}"
                    );
                    return;
                }
            };
            let app = app.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        got = rx.recv() => match got {
                            Some(text) => app.lobby.receive(&text),
                            None => {
                                tracing::error!("lobby: the notice listener stopped");
                                return;
                            }
                        },
                        () = app.stopping() => return,
                    }
                }
            });
        })
        .await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use wozkit_store::SqliteStore;

    use super::*;

    const STALE: Duration = Duration::from_secs(15);

    /// A lobby on a fresh SQLite store (the directory lives as long as the store is used).
    async fn setup() -> (Lobby, Arc<SqliteStore>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = SqliteStore::open_dir(dir.path()).await.expect("store");
        (Lobby::new(wozkit_store::new_id()), Arc::new(store), dir)
    }

    fn key() -> QueueKey {
        QueueKey {
            study: "s".into(),
            pair: None,
        }
    }

    fn ticket(p: &str, worker: Option<&str>, role: Role, conn: u64) -> Ticket {
        Ticket {
            participant: p.into(),
            worker: worker.map(str::to_string),
            role,
            conn,
        }
    }

    async fn enqueue(lobby: &Lobby, store: &SqliteStore, t: Ticket, now_ms: u64) -> Enqueued {
        lobby
            .enqueue(store, key(), t, now_ms, STALE)
            .await
            .expect("enqueue")
    }

    fn partner(e: Enqueued) -> Option<String> {
        match e {
            Enqueued::Matched { partner, .. } => Some(partner.participant),
            Enqueued::Queued { .. } => None,
        }
    }

    async fn position(lobby: &Lobby, store: &SqliteStore, p: &str) -> Option<usize> {
        lobby
            .position(store, &key(), p, 0, STALE)
            .await
            .expect("position")
    }

    #[tokio::test]
    async fn complementary_roles_pair_first_come_first_served() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let u1 = enqueue(&lobby, s, ticket("u1", None, Role::User, 1), 0).await;
        let Enqueued::Queued { mut rx, .. } = u1 else {
            panic!("nobody to pair u1 with");
        };
        assert_eq!(
            partner(enqueue(&lobby, s, ticket("u2", None, Role::User, 2), 1).await),
            None
        );
        assert_eq!(position(&lobby, s, "u2").await, Some(2));
        let got = enqueue(&lobby, s, ticket("w1", None, Role::Wizard, 3), 2).await;
        let Enqueued::Matched { partner, place } = got else {
            panic!("w1 should take u1");
        };
        assert_eq!(partner.participant, "u1");
        assert_eq!(place.instance, lobby.instance());
        assert_eq!(position(&lobby, s, "u2").await, Some(1));
        // Telling a partner waiting here reaches its connection.
        let told = Told::Paired {
            session: "S".into(),
        };
        lobby
            .tell(s, &place, "u1", told.clone())
            .await
            .expect("tell");
        assert_eq!(rx.try_recv().expect("told"), told);
    }

    #[tokio::test]
    async fn never_pairs_a_worker_with_itself() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let _ = enqueue(&lobby, s, ticket("a", Some("prolific:X"), Role::User, 1), 0).await;
        let b = enqueue(
            &lobby,
            s,
            ticket("b", Some("prolific:X"), Role::Wizard, 2),
            0,
        )
        .await;
        assert_eq!(partner(b), None);
        // A second tab of the same participant replaces the first, which is told so.
        let first = enqueue(&lobby, s, ticket("c", Some("prolific:X"), Role::User, 3), 0).await;
        let Enqueued::Queued { mut rx, .. } = first else {
            panic!("c should wait: b is the same worker");
        };
        let second = enqueue(&lobby, s, ticket("c", Some("prolific:X"), Role::User, 4), 0).await;
        assert_eq!(partner(second), None);
        assert_eq!(rx.try_recv().expect("told"), Told::Replaced);
        assert!(!lobby.leave(s, "c", 3).await.expect("leave"));
        assert!(lobby.leave(s, "c", 4).await.expect("leave"));
        assert!(lobby.leave(s, "a", 1).await.expect("leave"));
    }

    #[tokio::test]
    async fn waiting_time_survives_reconnects() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let _ = enqueue(&lobby, s, ticket("a", None, Role::User, 1), 100).await;
        assert!(lobby.leave(s, "a", 1).await.expect("leave"));
        lobby.gone("a", 1, Instant::now() + Duration::from_secs(30));
        match enqueue(&lobby, s, ticket("a", None, Role::User, 2), 900).await {
            Enqueued::Queued { since_ms, .. } => assert_eq!(since_ms, 100),
            Enqueued::Matched { .. } => panic!("nobody to match"),
        }
    }

    /// How long a newcomer counts as on their way, in these tests.
    const ARRIVAL: Duration = Duration::from_secs(60);

    async fn role(lobby: &Lobby, store: &SqliteStore, now_ms: u64) -> Role {
        lobby
            .assign_role(store, "s", now_ms, STALE, ARRIVAL)
            .await
            .expect("assign a role")
    }

    /// A participant of study `s` who entered at `at_ms` with `role`.
    async fn arrive(store: &SqliteStore, id: &str, role: Role, at_ms: u64) {
        store
            .create_participant(wozkit_store::NewParticipant {
                id: id.into(),
                token_hash: format!("hash-{id}"),
                study_id: "s".into(),
                platform: wozkit_store::Platform::Prolific,
                worker_id: Some(id.into()),
                external_ids: Default::default(),
                flow_step: "0:consent".into(),
                created_at_ms: at_ms,
            })
            .await
            .expect("participant");
        let patch = wozkit_store::ParticipantPatch {
            role: Some(Some(role)),
            ..Default::default()
        };
        store.update_participant(id, patch).await.expect("role");
    }

    #[tokio::test]
    async fn roles_balance_over_everyone_on_their_way() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        assert_eq!(role(&lobby, s, 0).await, Role::Wizard);
        assert_eq!(role(&lobby, s, 0).await, Role::User);
        // A user still reading the consent page counts, as does a user waiting.
        arrive(s, "u", Role::User, 0).await;
        assert_eq!(role(&lobby, s, 0).await, Role::Wizard);
        arrive(s, "w", Role::Wizard, 0).await;
        arrive(s, "u2", Role::User, 0).await;
        let _ = enqueue(&lobby, s, ticket("u2", None, Role::User, 1), 0).await;
        assert_eq!(role(&lobby, s, 0).await, Role::Wizard);
        // Past the arrival window only the live place counts...
        let later = ARRIVAL.as_millis() as u64 + 1;
        assert!(
            lobby
                .heard(s, "u2", 1, later, Duration::ZERO)
                .await
                .expect("heard")
        );
        assert_eq!(role(&lobby, s, later).await, Role::Wizard);
        assert_eq!(role(&lobby, s, later).await, Role::Wizard);
        // ...and once it is silent too, nobody: a tie again, which goes on alternating.
        let silent = later + STALE.as_millis() as u64 + 1;
        assert_eq!(role(&lobby, s, silent).await, Role::Wizard);
        assert_eq!(role(&lobby, s, silent).await, Role::User);
    }

    #[tokio::test]
    async fn a_burst_of_newcomers_is_split_evenly() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let mut wizards = 0;
        for i in 0..41 {
            let r = role(&lobby, s, 1_000).await;
            arrive(s, &format!("p{i}"), r, 1_000).await;
            wizards += usize::from(r == Role::Wizard);
        }
        assert_eq!(wizards, 21);
    }

    #[tokio::test]
    async fn a_waiter_in_lasting_surplus_switches_and_is_queued_first() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        for (i, u) in ["u1", "u2", "u3"].into_iter().enumerate() {
            arrive(s, u, Role::User, 0).await;
            let _ = enqueue(&lobby, s, ticket(u, None, Role::User, i as u64), 1_000).await;
        }
        // A wizard entered and may still come: not yet.
        arrive(s, "w", Role::Wizard, 500).await;
        let standing = |p: &'static str, now_ms: u64| {
            let (lobby, s) = (&lobby, s);
            async move {
                lobby
                    .standing(s, &key(), p, now_ms, STALE)
                    .await
                    .expect("standing")
                    .expect("queued")
            }
        };
        assert!(!standing("u2", 1_000).await.may_switch);
        assert!(standing("u3", 1_000).await.may_switch);
        let until = Instant::now() + Duration::from_secs(30);
        let u3 = ticket("u3", None, Role::User, 2);
        let switch = |now_ms: u64| {
            let (lobby, s, u3) = (&lobby, s, u3.clone());
            async move {
                lobby
                    .switch_role(
                        s,
                        &key(),
                        &u3,
                        "1:instructions".into(),
                        now_ms,
                        STALE,
                        ARRIVAL,
                        until,
                    )
                    .await
                    .expect("switch")
            }
        };
        // Three users, one wizard on the way: two would be left, so the last one switches.
        assert!(switch(2_000).await);
        assert_eq!(lobby.counts()[0].users, 2);
        let p = s.participant("u3").await.expect("read").expect("u3");
        assert_eq!(
            (p.role, p.flow_step.as_str()),
            (Some(Role::Wizard), "1:instructions")
        );
        // Back from the instructions as a wizard: takes the first user.
        let back = enqueue(&lobby, s, ticket("u3", None, Role::Wizard, 9), 3_000).await;
        assert_eq!(partner(back).as_deref(), Some("u1"));
        // u2 is left with the wizard on the way: no switch until the wizard is overdue.
        assert!(!standing("u2", 3_000).await.may_switch);
    }

    #[tokio::test]
    async fn a_reload_keeps_the_place() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let _ = enqueue(&lobby, s, ticket("a", None, Role::User, 1), 100).await;
        let _ = enqueue(&lobby, s, ticket("b", None, Role::User, 2), 200).await;
        assert!(lobby.leave(s, "a", 1).await.expect("leave"));
        lobby.gone("a", 1, Instant::now() + Duration::from_secs(30));
        assert_eq!(position(&lobby, s, "b").await, Some(1));
        let _ = enqueue(&lobby, s, ticket("a", None, Role::User, 3), 900).await;
        assert_eq!(position(&lobby, s, "a").await, Some(1));
        assert_eq!(position(&lobby, s, "b").await, Some(2));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn newcomers_breaking_a_tie_at_once_get_alternate_roles() {
        let (a, store, _dir) = setup().await;
        let a = Arc::new(a);
        let b = Arc::new(Lobby::new(wozkit_store::new_id()));
        // Nobody waits, so every call breaks a tie; they all run at once, half on each lobby.
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let lobby = if i % 2 == 0 { a.clone() } else { b.clone() };
                let store = store.clone();
                tokio::spawn(async move { role(&lobby, &store, 0).await })
            })
            .collect();
        let mut wizards = 0;
        for task in tasks {
            if task.await.expect("task") == Role::Wizard {
                wizards += 1;
            }
        }
        assert_eq!(wizards, 20, "half the simultaneous newcomers are wizards");
    }

    #[tokio::test]
    async fn instances_on_one_store_count_and_alternate_together() {
        let (a, store, _dir) = setup().await;
        let b = Lobby::new(wozkit_store::new_id());
        let s = store.as_ref();
        // Ties alternate across the two instances.
        assert_eq!(role(&a, s, 0).await, Role::Wizard);
        assert_eq!(role(&b, s, 0).await, Role::User);
        assert_eq!(role(&a, s, 0).await, Role::Wizard);
        // A user waiting on b: a newcomer on a becomes a wizard, and both count it.
        arrive(s, "u", Role::User, 0).await;
        let _ = enqueue(&b, s, ticket("u", None, Role::User, 1), 0).await;
        assert_eq!(role(&a, s, 0).await, Role::Wizard);
        let _ = a
            .enqueue(
                s,
                QueueKey {
                    study: "s".into(),
                    pair: Some("k".into()),
                },
                ticket("w", None, Role::Wizard, 2),
                0,
                STALE,
            )
            .await
            .expect("enqueue");
        for lobby in [&a, &b] {
            let counts = lobby.waiting(s, None, 0, STALE).await.expect("waiting");
            assert_eq!(
                counts,
                [
                    QueueCount {
                        key: key(),
                        users: 1,
                        wizards: 0
                    },
                    QueueCount {
                        key: QueueKey {
                            study: "s".into(),
                            pair: Some("k".into())
                        },
                        users: 0,
                        wizards: 1
                    },
                ]
            );
        }
        // This instance's own connections only.
        assert_eq!(a.counts().len(), 1);
        assert_eq!(b.counts().len(), 1);
        // Only live places count.
        let later = STALE.as_millis() as u64 + 1;
        assert!(
            a.waiting(s, Some("s"), later, STALE)
                .await
                .expect("waiting")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_silent_waiter_is_not_paired_until_heard_again() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let _ = enqueue(&lobby, s, ticket("u", None, Role::User, 1), 0).await;
        let later = STALE.as_millis() as u64 + 1000;
        assert_eq!(
            partner(enqueue(&lobby, s, ticket("w", None, Role::Wizard, 2), later).await),
            None
        );
        // Still queued (its own connection gives the place up), but passed over.
        assert_eq!(position(&lobby, s, "u").await, Some(1));
        assert!(
            lobby
                .heard(s, "u", 1, later, Duration::ZERO)
                .await
                .expect("heard")
        );
        let got = enqueue(&lobby, s, ticket("w2", None, Role::Wizard, 3), later).await;
        assert_eq!(partner(got).as_deref(), Some("u"));
    }

    #[tokio::test]
    async fn places_count_live_waiters_and_dead_places_go() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let _ = enqueue(&lobby, s, ticket("ghost", None, Role::User, 1), 0).await;
        let stale = STALE.as_millis() as u64;
        let _ = enqueue(&lobby, s, ticket("u", None, Role::User, 2), stale).await;
        let k = key();
        let at = |now_ms| lobby.position(s, &k, "u", now_ms, STALE);
        assert_eq!(at(stale).await.expect("position"), Some(2));
        // Silent past the cut-off: not counted, still there (it may be heard again).
        assert_eq!(at(stale + 1).await.expect("position"), Some(1));
        assert_eq!(s.waiters(None).await.expect("waiters").len(), 2);
        // Silent twice as long: its connection is gone for good, and so is the place.
        assert_eq!(at(2 * stale + 1).await.expect("position"), Some(1));
        let left: Vec<String> = s
            .waiters(None)
            .await
            .expect("waiters")
            .into_iter()
            .map(|w| w.participant)
            .collect();
        assert_eq!(left, ["u"]);
    }

    #[tokio::test]
    async fn a_participant_whose_partner_never_came_is_queued_first() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        let _ = enqueue(&lobby, s, ticket("early", None, Role::User, 1), 0).await;
        let _ = enqueue(&lobby, s, ticket("early2", None, Role::User, 2), 0).await;
        lobby.put_first("stranded", Instant::now() + Duration::from_secs(30));
        let _ = enqueue(&lobby, s, ticket("stranded", None, Role::User, 3), 5).await;
        assert_eq!(position(&lobby, s, "stranded").await, Some(1));
        let got = enqueue(&lobby, s, ticket("w", None, Role::Wizard, 4), 6).await;
        assert_eq!(partner(got).as_deref(), Some("stranded"));
        let got = enqueue(&lobby, s, ticket("w2", None, Role::Wizard, 5), 7).await;
        assert_eq!(partner(got).as_deref(), Some("early"));
    }

    #[tokio::test]
    async fn notices_reach_only_the_connection_they_name() {
        let (lobby, store, _dir) = setup().await;
        let Enqueued::Queued { mut rx, .. } =
            enqueue(&lobby, &store, ticket("u", None, Role::User, 7), 0).await
        else {
            panic!("nobody to pair with");
        };
        let me = lobby.instance().to_string();
        // Another instance, another connection, garbage: ignored.
        lobby.receive("paired 7 u S other");
        lobby.receive(&format!("paired 8 u S {me}"));
        lobby.receive("paired");
        lobby.receive("paired 7 u S");
        assert!(rx.try_recv().is_err());
        lobby.receive(&format!("paired 7 u S {me}"));
        assert_eq!(
            rx.try_recv().expect("told"),
            Told::Paired {
                session: "S".into()
            }
        );
        // A notice names the place, the participant and what they are told.
        let place = Place {
            instance: "instance a".into(),
            conn: 3,
        };
        for told in [
            Told::Paired {
                session: "S".into(),
            },
            Told::Retry,
            Told::Replaced,
        ] {
            let text = notice(&place, "p", &told);
            assert_eq!(
                parse_notice(&text),
                Some((place.clone(), "p".to_string(), told))
            );
        }
    }

    #[tokio::test]
    async fn the_lobby_forgets_waiters_who_left_for_good() {
        let (lobby, store, _dir) = setup().await;
        let s = store.as_ref();
        // Real time: the store's pool has timeouts of its own, which a paused clock would fire.
        let grace = Duration::from_millis(300);
        for (i, p) in ["a", "b", "c"].into_iter().enumerate() {
            let _ = lobby
                .enqueue(
                    s,
                    QueueKey {
                        study: "s".into(),
                        pair: Some(p.into()),
                    },
                    ticket(p, None, Role::User, i as u64),
                    0,
                    STALE,
                )
                .await
                .expect("enqueue");
        }
        lobby.put_first("never-back", Instant::now() + grace);
        assert_eq!(lobby.size(Instant::now()), 7);
        for (i, p) in ["a", "b", "c"].into_iter().enumerate() {
            assert!(lobby.leave(s, p, i as u64).await.expect("leave"));
            lobby.gone(p, i as u64, Instant::now() + grace);
        }
        // Kept for a reconnect within the grace period...
        assert_eq!(lobby.size(Instant::now()), 4);
        tokio::time::sleep(grace).await;
        // ...and nothing is left after it.
        assert_eq!(lobby.size(Instant::now()), 0);
        // A pair leaves nothing behind either, once the partner is told.
        let _ = enqueue(&lobby, s, ticket("u", None, Role::User, 9), 0).await;
        let got = enqueue(&lobby, s, ticket("w", None, Role::Wizard, 10), 0).await;
        let Enqueued::Matched { place, .. } = got else {
            panic!("w should take u");
        };
        lobby.tell(s, &place, "u", Told::Retry).await.expect("tell");
        assert_eq!(lobby.size(Instant::now()), 0);
        assert!(lobby.counts().is_empty());
        assert!(s.waiters(None).await.expect("waiters").is_empty());
    }
}
