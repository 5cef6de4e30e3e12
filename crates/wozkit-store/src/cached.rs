//! Event logs, participants and leases read again and again, answered from memory.
//!
//! A participant's page and a chat turn read the same rows on every request: the participant
//! by their token, their lease, their own log (answers and claims) and each conversation's log.
//! [`CachedReads`] keeps the logs that are read more than once in memory, and every write that
//! goes through it extends the log it holds, so a read after the first costs a copy instead of
//! a query (a round trip to a connection thread) and the decoding of every event in the log.
//! Participants and leases are kept once read, and dropped by every write to them.
//!
//! It is correct only over a store this process alone writes to: a SQLite data directory,
//! which one process holds ([`crate::open`] wraps those). Over PostgreSQL, where several
//! instances append to the same logs, a log in memory could miss another instance's events, so
//! PostgreSQL stores are never wrapped.
//!
//! What keeps the memory true:
//! - Every write of events goes through [`EventStore`]'s appends or [`ClaimStore::submit`]; each
//!   extends a log in memory only when its events follow the log's last one, and otherwise
//!   drops the log (two appends to one log that finished out of order), as does a failed write
//!   (it may have been stored all the same), except an `append_after` refused because the log
//!   moved on, which stored nothing.
//! - A log read from the store is kept only when no write to a log of its shard finished while
//!   it was read (a generation per shard, counted under the same lock), so a read that raced
//!   with a write never keeps a log without that write's events.
//! - An empty log is never kept (the session may be created after the read).
//! - A log is kept on its second read in a while (the first only marks it): a room reads its log
//!   once when it is built and keeps its own state, so rooms' logs do not fill the memory.
//! - At most [`CachedReads::capacity`] events are held; past that the least recently read logs
//!   go.
//! - A participant or lease read from the store is kept only when no write to any participant
//!   (or lease) finished while it was read; a write drops the record it changed (a participant:
//!   `update_participant`, `switch_lobby_role`; a lease: `submit`, `return_lease`; a worker's
//!   open lease: their `claim`, and the submit or return of the open lease remembered). At most as
//!   many records as events are kept, and all go at once past that.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use wozkit_core::event::Event;

use crate::error::{Result, StoreError};
use crate::model::{
    ClaimRequest, EvalItem, EventCursor, ItemCount, Lease, NewEvent, NewParticipant, NewSession,
    Participant, ParticipantPatch, Platform, SessionRecord, SubmitOutcome,
};
use crate::store::{
    ClaimStore, EventStore, Forward, ForwardAccounts, ForwardMeta, ForwardRoomLeases,
    ForwardSessions, JoinedLobby, LobbyStore, NewWaiter, ParticipantStore, RoleCounts, RoleSwitch,
    Store, Waiter,
};

/// Write generations are counted per shard of session ids.
const SHARDS: usize = 64;

/// The events held by default.
pub const DEFAULT_CAPACITY: usize = 100_000;

/// The environment variable that sets how many events [`crate::open`] holds (`0`: none).
pub const CAPACITY_ENV: &str = "WOZKIT_LOG_CACHE_EVENTS";

/// A store whose logs read more than once are answered from memory (see the module's notes).
pub struct CachedReads {
    inner: Arc<dyn Store>,
    memory: Mutex<Memory>,
    participants: Mutex<Records<Participant>>,
    leases: Mutex<Records<Lease>>,
}

/// Records read by id (participants also by token hash), each dropped by a write to it.
struct Records<V> {
    by_id: HashMap<String, V>,
    /// Token hash to id (participants only).
    by_token: HashMap<String, String>,
    /// The record found by another key, or that none was (leases: a worker's open lease in a
    /// study, by `study NUL worker`).
    by_key: HashMap<String, Option<V>>,
    /// The id of each record in `by_key`, to its key.
    key_of: HashMap<String, String>,
    /// Writes finished.
    generation: u64,
    capacity: usize,
}

impl<V: Clone> Records<V> {
    fn new(capacity: usize) -> Records<V> {
        Records {
            by_id: HashMap::new(),
            by_token: HashMap::new(),
            by_key: HashMap::new(),
            key_of: HashMap::new(),
            generation: 0,
            capacity,
        }
    }

    fn by_token(&self, token_hash: &str) -> Option<V> {
        self.by_id.get(self.by_token.get(token_hash)?).cloned()
    }

    /// Keeps a record read from the store (`token_hash`: the token it was found by), unless a
    /// write finished since `generation`.
    fn keep(&mut self, generation: u64, id: &str, token_hash: Option<&str>, record: &V) {
        if generation != self.generation {
            return;
        }
        if self.by_id.len() >= self.capacity {
            self.by_id.clear();
            self.by_token.clear();
        }
        self.by_id.insert(id.to_string(), record.clone());
        if let Some(hash) = token_hash {
            self.by_token.insert(hash.to_string(), id.to_string());
        }
    }

    /// Keeps what a read by `key` found (`id`: the record's), unless a write finished since
    /// `generation`.
    fn keep_by_key(&mut self, generation: u64, key: &str, found: Option<(&str, &V)>) {
        if generation != self.generation {
            return;
        }
        if self.by_key.len() >= self.capacity {
            self.by_key.clear();
            self.key_of.clear();
        }
        if let Some((id, _)) = found {
            self.key_of.insert(id.to_string(), key.to_string());
        }
        self.by_key
            .insert(key.to_string(), found.map(|(_, v)| v.clone()));
    }

    /// A write to record `id` finished (or failed).
    fn wrote(&mut self, id: &str) {
        self.generation = self.generation.wrapping_add(1);
        self.by_id.remove(id);
        if let Some(key) = self.key_of.remove(id) {
            self.by_key.remove(&key);
        }
    }

    /// A write that changes what key `key` finds finished (or failed).
    fn wrote_key(&mut self, key: &str) {
        self.generation = self.generation.wrapping_add(1);
        self.by_key.remove(key);
    }
}

/// The logs in memory and what guards them.
struct Memory {
    logs: HashMap<String, Log>,
    /// Logs read once lately: read again, they are kept.
    seen: HashSet<String>,
    /// Finished writes, per shard of session ids.
    generations: [u64; SHARDS],
    hasher: RandomState,
    /// Events in `logs`.
    held: usize,
    capacity: usize,
    /// Counts reads, to order logs by their last one.
    clock: u64,
    hits: u64,
    misses: u64,
}

struct Log {
    events: Vec<Event>,
    read_at: u64,
}

/// How a read from the store may be kept.
enum Admit {
    /// The log's shard generation when the read started.
    Keep(u64),
    /// Read once now; not kept.
    No,
}

impl Memory {
    fn shard(&self, session: &str) -> usize {
        (self.hasher.hash_one(session) % SHARDS as u64) as usize
    }

    /// The log's events after `after` when it is held.
    fn read(&mut self, session: &str, after: u64) -> Option<Vec<Event>> {
        self.clock += 1;
        let clock = self.clock;
        let log = self.logs.get_mut(session)?;
        log.read_at = clock;
        self.hits += 1;
        let from = log.events.partition_point(|e| e.seq <= after);
        Some(log.events[from..].to_vec())
    }

    /// A read that missed: whether what the store returns may be kept.
    fn admit(&mut self, session: &str) -> Admit {
        self.misses += 1;
        if self.seen.remove(session) {
            return Admit::Keep(self.generations[self.shard(session)]);
        }
        // Bounded like the logs: forgetting who was seen only delays keeping a log.
        if self.seen.len() >= self.capacity {
            self.seen.clear();
        }
        self.seen.insert(session.to_string());
        Admit::No
    }

    /// Keeps a log read from the store, unless a write to its shard finished meanwhile.
    fn keep(&mut self, session: &str, generation: u64, events: &[Event]) {
        if events.is_empty()
            || events.len() > self.capacity / 4
            || self.generations[self.shard(session)] != generation
            || self.logs.contains_key(session)
        {
            return;
        }
        self.held += events.len();
        self.logs.insert(
            session.to_string(),
            Log {
                events: events.to_vec(),
                read_at: self.clock,
            },
        );
        self.evict();
    }

    /// A write to `session` finished with `stored` (`None`: it failed, and may have stored
    /// something all the same).
    fn wrote(&mut self, session: &str, stored: Option<&[Event]>) {
        let shard = self.shard(session);
        self.generations[shard] = self.generations[shard].wrapping_add(1);
        let Some(log) = self.logs.get_mut(session) else {
            return;
        };
        let last = log.events.last().map_or(0, |e| e.seq);
        match stored {
            Some([]) => {}
            Some(new) if new[0].seq == last + 1 => {
                log.events.extend_from_slice(new);
                self.held += new.len();
                self.evict();
            }
            _ => {
                if let Some(log) = self.logs.remove(session) {
                    self.held -= log.events.len();
                }
            }
        }
    }

    /// Lets the least recently read logs go until at most `capacity` events are held, and then
    /// an eighth fewer, so that eviction runs once in many writes.
    fn evict(&mut self) {
        if self.held <= self.capacity {
            return;
        }
        let goal = self.capacity - self.capacity / 8;
        let mut by_age: Vec<(u64, String)> = self
            .logs
            .iter()
            .map(|(id, log)| (log.read_at, id.clone()))
            .collect();
        by_age.sort_unstable();
        for (_, id) in by_age {
            if self.held <= goal {
                break;
            }
            if let Some(log) = self.logs.remove(&id) {
                self.held -= log.events.len();
            }
        }
    }
}

/// Counters of a [`CachedReads`]'s event logs, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheFigures {
    /// Log reads answered from memory.
    pub hits: u64,
    /// Log reads that went to the store.
    pub misses: u64,
    /// Logs and events held now.
    pub logs: usize,
    pub events: usize,
}

impl CachedReads {
    /// Wraps `inner`, which only this process writes to, holding at most `capacity` events.
    pub fn new(inner: Arc<dyn Store>, capacity: usize) -> CachedReads {
        CachedReads {
            inner,
            participants: Mutex::new(Records::new(capacity.max(1))),
            leases: Mutex::new(Records::new(capacity.max(1))),
            memory: Mutex::new(Memory {
                logs: HashMap::new(),
                seen: HashSet::new(),
                generations: [0; SHARDS],
                hasher: RandomState::new(),
                held: 0,
                capacity: capacity.max(1),
                clock: 0,
                hits: 0,
                misses: 0,
            }),
        }
    }

    /// The most events held.
    pub fn capacity(&self) -> usize {
        self.memory().capacity
    }

    /// What the memory has done so far and holds now.
    pub fn figures(&self) -> CacheFigures {
        let m = self.memory();
        CacheFigures {
            hits: m.hits,
            misses: m.misses,
            logs: m.logs.len(),
            events: m.held,
        }
    }

    /// A std mutex, held for map work only, never across an await.
    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn participants(&self) -> MutexGuard<'_, Records<Participant>> {
        self.participants.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn leases(&self) -> MutexGuard<'_, Records<Lease>> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the memory that a write to `session` finished with `out`, whose stored events
    /// `stored` gives.
    /// A refused `append_after` stored nothing; other failures may have stored something.
    fn wrote<T>(&self, session: &str, out: &Result<T>, stored: impl Fn(&T) -> &[Event]) {
        let stored = match out {
            Ok(v) => Some(stored(v)),
            Err(StoreError::LogMoved { .. }) => Some(&[][..]),
            Err(_) => None,
        };
        self.memory().wrote(session, stored);
    }
}

impl Forward for CachedReads {
    type To = dyn Store;
    fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }
}
impl ForwardSessions for CachedReads {}
impl ForwardAccounts for CachedReads {}
impl ForwardRoomLeases for CachedReads {}
impl ForwardMeta for CachedReads {}

#[async_trait]
impl Store for CachedReads {
    async fn close(&self) {
        self.inner.close().await
    }
    fn memory(&self) -> Option<CacheFigures> {
        Some(self.figures())
    }
}

#[async_trait]
impl EventStore for CachedReads {
    async fn append(&self, session: &str, events: Vec<NewEvent>) -> Result<Vec<Event>> {
        let out = self.inner.append(session, events).await;
        self.wrote(session, &out, |v| v.as_slice());
        out
    }

    async fn append_after(
        &self,
        session: &str,
        after_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>> {
        let out = self.inner.append_after(session, after_seq, events).await;
        self.wrote(session, &out, |v| v.as_slice());
        out
    }

    async fn append_once(
        &self,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>> {
        let out = self.inner.append_once(session, key, events).await;
        self.wrote(session, &out, |v| v.as_deref().unwrap_or(&[]));
        out
    }

    async fn events(&self, session: &str, after_seq: u64) -> Result<Vec<Event>> {
        let admit = {
            let mut m = self.memory();
            if let Some(events) = m.read(session, after_seq) {
                return Ok(events);
            }
            m.admit(session)
        };
        let Admit::Keep(generation) = admit else {
            return self.inner.events(session, after_seq).await;
        };
        let mut all = self.inner.events(session, 0).await?;
        self.memory().keep(session, generation, &all);
        all.retain(|e| e.seq > after_seq);
        Ok(all)
    }

    async fn events_page(
        &self,
        study_id: Option<&str>,
        after: Option<&EventCursor>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        self.inner.events_page(study_id, after, limit).await
    }
}

/// Claims are forwarded; a judgment's events extend the participant's log in memory.
#[async_trait]
impl ClaimStore for CachedReads {
    async fn register_items(&self, study_id: &str, items: &[EvalItem]) -> Result<()> {
        self.inner.register_items(study_id, items).await
    }
    async fn claim(&self, req: ClaimRequest) -> Result<Option<Lease>> {
        let key = open_key(&req.study_id, &req.worker);
        let out = self.inner.claim(req).await;
        self.leases().wrote_key(&key);
        out
    }
    async fn lease(&self, lease_id: &str) -> Result<Option<Lease>> {
        read_through(
            &self.leases,
            |r| r.by_id.get(lease_id).cloned().map(Some),
            self.inner.lease(lease_id),
            |r, generation, found| {
                if let Some(l) = found {
                    r.keep(generation, &l.id, None, l);
                }
            },
        )
        .await
    }
    async fn open_lease(&self, study_id: &str, worker: &str) -> Result<Option<Lease>> {
        let key = open_key(study_id, worker);
        read_through(
            &self.leases,
            |r| r.by_key.get(&key).cloned(),
            self.inner.open_lease(study_id, worker),
            |r, generation, found: &Option<Lease>| {
                r.keep_by_key(generation, &key, found.as_ref().map(|l| (l.id.as_str(), l)));
            },
        )
        .await
    }
    async fn submit(
        &self,
        lease_id: &str,
        now_ms: u64,
        session: &str,
        events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
    ) -> Result<(SubmitOutcome, Vec<Event>)> {
        let out = self.inner.submit(lease_id, now_ms, session, events).await;
        self.leases().wrote(lease_id);
        self.wrote(session, &out, |(_, stored)| stored.as_slice());
        out
    }
    async fn return_lease(&self, lease_id: &str, now_ms: u64) -> Result<bool> {
        let out = self.inner.return_lease(lease_id, now_ms).await;
        self.leases().wrote(lease_id);
        out
    }
    async fn leases(&self, study_id: &str) -> Result<Vec<Lease>> {
        self.inner.leases(study_id).await
    }
    async fn item_counts(&self, study_id: &str, now_ms: u64) -> Result<Vec<ItemCount>> {
        self.inner.item_counts(study_id, now_ms).await
    }
}

/// A read of records: answered from `records` when `held` finds it there; otherwise `read` (a
/// query not started until awaited) asks the store, and `keep` may keep its answer, given the
/// generation seen before the query (so that a write finished meanwhile keeps nothing).
async fn read_through<V, T>(
    records: &Mutex<Records<V>>,
    held: impl FnOnce(&Records<V>) -> Option<T>,
    read: impl Future<Output = Result<T>>,
    keep: impl FnOnce(&mut Records<V>, u64, &T),
) -> Result<T> {
    let lock = || records.lock().unwrap_or_else(|e| e.into_inner());
    let generation = {
        let r = lock();
        if let Some(found) = held(&r) {
            return Ok(found);
        }
        r.generation
    };
    let found = read.await?;
    keep(&mut lock(), generation, &found);
    Ok(found)
}

/// The key of a worker's open lease in a study.
fn open_key(study_id: &str, worker: &str) -> String {
    format!("{study_id}\u{0}{worker}")
}

/// Participants by id and token from memory once read; every write to one drops it.
#[async_trait]
impl ParticipantStore for CachedReads {
    async fn create_participant(&self, new: NewParticipant) -> Result<Participant> {
        let out = self.inner.create_participant(new).await;
        if let Ok(p) = &out {
            self.participants().wrote(&p.id);
        }
        out
    }
    async fn participant(&self, id: &str) -> Result<Option<Participant>> {
        read_through(
            &self.participants,
            |r| r.by_id.get(id).cloned().map(Some),
            self.inner.participant(id),
            |r, generation, found| {
                if let Some(p) = found {
                    r.keep(generation, &p.id, None, p);
                }
            },
        )
        .await
    }
    async fn participant_by_token_hash(&self, token_hash: &str) -> Result<Option<Participant>> {
        read_through(
            &self.participants,
            |r| r.by_token(token_hash).map(Some),
            self.inner.participant_by_token_hash(token_hash),
            |r, generation, found| {
                if let Some(p) = found {
                    r.keep(generation, &p.id, Some(token_hash), p);
                }
            },
        )
        .await
    }
    async fn participant_by_worker(
        &self,
        study_id: &str,
        platform: Platform,
        worker_id: &str,
    ) -> Result<Option<Participant>> {
        self.inner
            .participant_by_worker(study_id, platform, worker_id)
            .await
    }
    async fn participants_in_session(&self, session_id: &str) -> Result<Vec<Participant>> {
        self.inner.participants_in_session(session_id).await
    }
    async fn list_participants(&self, study_id: Option<&str>) -> Result<Vec<Participant>> {
        self.inner.list_participants(study_id).await
    }
    async fn update_participant(&self, id: &str, patch: ParticipantPatch) -> Result<Participant> {
        let out = self.inner.update_participant(id, patch).await;
        self.participants().wrote(id);
        out
    }
    async fn open_participant_log(&self, new: NewSession) -> Result<SessionRecord> {
        self.inner.open_participant_log(new).await
    }
}

/// The lobby is forwarded; a role switch drops the participant it changed.
#[async_trait]
impl LobbyStore for CachedReads {
    async fn join_lobby(&self, entry: NewWaiter, live_since_ms: u64) -> Result<JoinedLobby> {
        self.inner.join_lobby(entry, live_since_ms).await
    }
    async fn lobby_heard(
        &self,
        participant: &str,
        instance: &str,
        conn: u64,
        at_ms: u64,
    ) -> Result<bool> {
        self.inner
            .lobby_heard(participant, instance, conn, at_ms)
            .await
    }
    async fn leave_lobby(&self, participant: &str, instance: &str, conn: u64) -> Result<bool> {
        self.inner.leave_lobby(participant, instance, conn).await
    }
    async fn waiters(&self, study_id: Option<&str>) -> Result<Vec<Waiter>> {
        self.inner.waiters(study_id).await
    }
    async fn lobby_presence(
        &self,
        study_id: &str,
        arrived_since_ms: u64,
        live_since_ms: u64,
    ) -> Result<RoleCounts> {
        self.inner
            .lobby_presence(study_id, arrived_since_ms, live_since_ms)
            .await
    }
    async fn switch_lobby_role(&self, req: RoleSwitch) -> Result<bool> {
        let participant = req.participant.clone();
        let out = self.inner.switch_lobby_role(req).await;
        self.participants().wrote(&participant);
        out
    }
    async fn notify_lobby(&self, notice: &str) -> Result<bool> {
        self.inner.notify_lobby(notice).await
    }
    async fn listen_lobby(&self) -> Result<Option<tokio::sync::mpsc::Receiver<String>>> {
        self.inner.listen_lobby().await
    }
}

#[cfg(test)]
mod tests {
    use wozkit_core::event::{Actor, EventKind, MessageSource, Role};

    use super::*;
    use crate::model::NewSession;
    use crate::sqlite::SqliteStore;

    fn message(text: &str) -> NewEvent {
        NewEvent {
            actor: Actor::System,
            kind: EventKind::Message {
                role: Role::User,
                text: text.to_string(),
                source: MessageSource::Free,
            },
            at_ms: 1,
        }
    }

    /// A cached store over a fresh SQLite store, the store itself, and its directory.
    async fn setup(capacity: usize) -> (CachedReads, Arc<dyn Store>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open_dir(dir.path()).await.expect("store"));
        (CachedReads::new(store.clone(), capacity), store, dir)
    }

    /// A patch that moves the participant to `step`.
    fn to_step(step: &str) -> ParticipantPatch {
        ParticipantPatch {
            flow_step: Some(step.into()),
            ..Default::default()
        }
    }

    /// Participant `p1`'s flow step as read by token `h1` and by id.
    async fn flow_steps(cached: &CachedReads) -> (String, String) {
        let by_token = cached.participant_by_token_hash("h1").await.expect("read");
        let by_id = cached.participant("p1").await.expect("read");
        (
            by_token.expect("p1 by token").flow_step,
            by_id.expect("p1 by id").flow_step,
        )
    }

    async fn session(store: &dyn Store, id: &str) {
        store
            .create_session(NewSession {
                id: id.into(),
                study_id: "study".into(),
                study_version: "1".into(),
                seed: 1,
                created_at_ms: 0,
            })
            .await
            .expect("session");
    }

    #[tokio::test]
    async fn a_log_read_twice_is_answered_from_memory_and_follows_every_write() {
        let (cached, store, _dir) = setup(1000).await;
        session(&cached, "s").await;
        cached
            .append("s", vec![message("a"), message("b")])
            .await
            .expect("append");
        let first = cached.events("s", 0).await.expect("read");
        let second = cached.events("s", 0).await.expect("read");
        assert_eq!(first, second);
        assert_eq!(
            cached.figures().hits,
            0,
            "the second read is the one that keeps it"
        );
        assert_eq!(cached.figures().logs, 1);

        cached
            .append("s", vec![message("c")])
            .await
            .expect("append");
        cached
            .append_once("s", "k", vec![message("d")])
            .await
            .expect("once");
        assert!(
            cached
                .append_once("s", "k", vec![message("e")])
                .await
                .expect("once")
                .is_none()
        );
        cached
            .append_after("s", 4, vec![message("f")])
            .await
            .expect("after");
        assert!(
            cached
                .append_after("s", 1, vec![message("g")])
                .await
                .is_err()
        );

        for after in [0, 2, 5, 9] {
            let held = cached.events("s", after).await.expect("read");
            assert_eq!(
                held,
                store.events("s", after).await.expect("read"),
                "after {after}"
            );
        }
        let f = cached.figures();
        assert_eq!((f.hits, f.logs, f.events), (4, 1, 5));
    }

    #[tokio::test]
    async fn empty_logs_are_not_kept_and_a_write_during_a_read_is_not_missed() {
        let (cached, store, _dir) = setup(1000).await;
        // Read twice before the session exists: nothing is kept.
        cached.events("s", 0).await.expect("read");
        cached.events("s", 0).await.expect("read");
        assert_eq!(cached.figures().logs, 0);
        session(&cached, "s").await;
        cached
            .append("s", vec![message("a")])
            .await
            .expect("append");

        // A read admitted before a write finished, returning the log without that write, is
        // not kept.
        let generation = {
            let mut m = cached.memory();
            m.admit("s");
            match m.admit("s") {
                Admit::Keep(g) => g,
                Admit::No => panic!("the second read is admitted"),
            }
        };
        let before = store.events("s", 0).await.expect("read");
        cached
            .append("s", vec![message("b")])
            .await
            .expect("append");
        cached.memory().keep("s", generation, &before);
        assert_eq!(cached.figures().logs, 0, "kept a log that misses a write");
        assert_eq!(cached.events("s", 0).await.expect("read").len(), 2);
    }

    #[tokio::test]
    async fn writes_finishing_out_of_order_drop_the_log() {
        let (cached, store, _dir) = setup(1000).await;
        session(&cached, "s").await;
        cached
            .append("s", vec![message("a")])
            .await
            .expect("append");
        cached.events("s", 0).await.expect("read");
        cached.events("s", 0).await.expect("read");
        assert_eq!(cached.figures().logs, 1);
        // Two appends whose answers reach the memory in the other order.
        let second = store.append("s", vec![message("b")]).await.expect("append");
        let third = store.append("s", vec![message("c")]).await.expect("append");
        cached.memory().wrote("s", Some(&third));
        assert_eq!(cached.figures().logs, 0);
        cached.memory().wrote("s", Some(&second));
        assert_eq!(cached.events("s", 0).await.expect("read").len(), 3);
    }

    #[tokio::test]
    async fn concurrent_writers_and_readers_see_the_store() {
        let (cached, store, _dir) = setup(1000).await;
        let cached = Arc::new(cached);
        for s in ["s0", "s1", "s2"] {
            session(cached.as_ref(), s).await;
        }
        let mut tasks = Vec::new();
        for t in 0..6 {
            let cached = cached.clone();
            tasks.push(tokio::spawn(async move {
                let s = format!("s{}", t % 3);
                for i in 0..20 {
                    cached
                        .append(&s, vec![message(&format!("{t}/{i}"))])
                        .await
                        .expect("append");
                    let read = cached.events(&s, 0).await.expect("read");
                    assert!(read.iter().any(|e| matches!(&e.kind,
                        EventKind::Message { text, .. } if *text == format!("{t}/{i}"))));
                    assert!(read.windows(2).all(|w| w[1].seq == w[0].seq + 1));
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        for s in ["s0", "s1", "s2"] {
            let from_store = store.events(s, 0).await.expect("read");
            assert_eq!(from_store.len(), 40);
            assert_eq!(cached.events(s, 0).await.expect("read"), from_store);
        }
        assert!(cached.figures().hits > 0);
    }

    #[tokio::test]
    async fn the_least_recently_read_logs_go_past_the_capacity() {
        let (cached, _store, _dir) = setup(40).await;
        for n in 0..10 {
            let s = format!("s{n}");
            session(&cached, &s).await;
            let batch: Vec<NewEvent> = (0..8).map(|i| message(&i.to_string())).collect();
            cached.append(&s, batch).await.expect("append");
            cached.events(&s, 0).await.expect("read");
            cached.events(&s, 0).await.expect("read");
            assert!(cached.figures().events <= 40, "{:?}", cached.figures());
        }
        let f = cached.figures();
        assert!(f.logs >= 3, "{f:?}");
        // The latest log is held; the first went.
        let hits = f.hits;
        cached.events("s9", 0).await.expect("read");
        assert_eq!(cached.figures().hits, hits + 1);
        cached.events("s0", 0).await.expect("read");
        assert_eq!(cached.figures().hits, hits + 1);
    }

    #[tokio::test]
    async fn participants_and_leases_are_read_once_and_dropped_by_their_writes() {
        let (cached, store, _dir) = setup(1000).await;
        let p = cached
            .create_participant(NewParticipant {
                id: "p1".into(),
                token_hash: "h1".into(),
                study_id: "study".into(),
                platform: Platform::Lab,
                worker_id: None,
                external_ids: Default::default(),
                flow_step: "0".into(),
                created_at_ms: 0,
            })
            .await
            .expect("participant");
        let read = cached.participant_by_token_hash("h1").await.expect("read");
        assert_eq!(read.as_ref(), Some(&p));
        // Changed behind the memory's back: the memory still answers (which is why only a
        // store this process alone writes to may be wrapped), so the answer shows a hit.
        store
            .update_participant("p1", to_step("1"))
            .await
            .expect("update");
        assert_eq!(
            flow_steps(&cached).await,
            ("0".into(), "0".into()),
            "answered from memory"
        );
        // A write through the memory drops it.
        cached
            .update_participant("p1", to_step("2"))
            .await
            .expect("update");
        assert_eq!(flow_steps(&cached).await, ("2".into(), "2".into()));

        // A read that started before a write finished is not kept.
        let generation = cached.participants().generation;
        let stale = store.participant("p1").await.expect("read").expect("p1");
        cached
            .update_participant("p1", to_step("3"))
            .await
            .expect("update");
        cached
            .participants()
            .keep(generation, "p1", Some("h1"), &stale);
        assert_eq!(
            cached
                .participant("p1")
                .await
                .expect("read")
                .expect("p1")
                .flow_step,
            "3"
        );

        // Leases: kept once read, dropped by a submit.
        session(&cached, "log").await;
        cached
            .register_items(
                "study",
                &[EvalItem {
                    id: "i1".into(),
                    pool: wozkit_core::event::ItemPool::Item,
                    dialogues: vec!["d1".into()],
                    needed: 1,
                }],
            )
            .await
            .expect("items");
        let lease = cached
            .claim(ClaimRequest {
                study_id: "study".into(),
                worker: "p1".into(),
                pool: wozkit_core::event::ItemPool::Item,
                lease_id: "l1".into(),
                now_ms: 10,
                lease_ms: 60_000,
                max_per_worker: None,
                prefer: vec![],
            })
            .await
            .expect("claim")
            .expect("a lease");
        assert_eq!(
            cached.lease("l1").await.expect("read").as_ref(),
            Some(&lease)
        );
        assert!(cached.leases().by_id.contains_key("l1"));
        assert_eq!(
            cached
                .open_lease("study", "p1")
                .await
                .expect("read")
                .as_ref(),
            Some(&lease)
        );
        assert_eq!(cached.leases().by_key.len(), 1);
        cached
            .submit("l1", 20, "log", Box::new(|_| vec![message("judged")]))
            .await
            .expect("submit");
        assert!(!cached.leases().by_id.contains_key("l1"));
        assert!(
            cached.leases().by_key.is_empty(),
            "the open lease is dropped"
        );
        assert!(
            cached
                .open_lease("study", "p1")
                .await
                .expect("read")
                .is_none()
        );
        // None is remembered too, until the worker claims again.
        assert!(
            cached
                .open_lease("study", "p1")
                .await
                .expect("read")
                .is_none()
        );
        assert_eq!(cached.leases().by_key.len(), 1);
        cached
            .register_items(
                "study",
                &[EvalItem {
                    id: "i2".into(),
                    pool: wozkit_core::event::ItemPool::Item,
                    dialogues: vec!["d2".into()],
                    needed: 1,
                }],
            )
            .await
            .expect("items");
        let second = cached
            .claim(ClaimRequest {
                study_id: "study".into(),
                worker: "p1".into(),
                pool: wozkit_core::event::ItemPool::Item,
                lease_id: "l2".into(),
                now_ms: 30,
                lease_ms: 60_000,
                max_per_worker: None,
                prefer: vec![],
            })
            .await
            .expect("claim")
            .expect("a second lease");
        assert_eq!(
            cached.open_lease("study", "p1").await.expect("read"),
            Some(second)
        );
        assert!(cached.return_lease("l2", 40).await.expect("return"));
        assert!(
            cached
                .open_lease("study", "p1")
                .await
                .expect("read")
                .is_none()
        );
        let closed = cached.lease("l1").await.expect("read").expect("l1");
        assert_eq!(closed, store.lease("l1").await.expect("read").expect("l1"));
        assert_ne!(closed.state, lease.state);
    }
}
