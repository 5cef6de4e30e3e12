//! The [`Store`] trait: everything the server and the data crate may ask of persistence. Each
//! backend implements it once; the conformance suite in `tests/conformance.rs` holds them to the
//! same behaviour. It is object safe, so `Arc<dyn Store>` works where a backend is picked at run
//! time, and `Arc<S>` is itself a `Store`, so generic code (`AppState<S: Store>`) takes either.

use std::sync::Arc;

use async_trait::async_trait;
use wozkit_core::event::{EndReason, Event, Role};

use crate::error::Result;
use crate::model::{
    Account, ClaimRequest, EvalItem, EventCursor, FailedLogins, ItemCount, Lease, LiveLogin,
    NewAccount, NewEvent, NewLogin, NewParticipant, NewSession, Participant, ParticipantPatch,
    Platform, SessionFilter, SessionRecord, SubmitOutcome,
};

/// Persistence for sessions, their event logs, participants and settings: every capability
/// below in one object, as each backend implements them. A part that needs one capability
/// names it (`&dyn EventStore`, `&dyn ClaimStore`…); [`crate::prelude`] brings every
/// capability's methods into scope where a whole store is used.
#[async_trait]
pub trait Store:
    SessionStore
    + EventStore
    + ParticipantStore
    + ClaimStore
    + AccountStore
    + RoomLeaseStore
    + LobbyStore
    + MetaStore
    + Send
    + Sync
    + 'static
{
    /// Finishes pending writes and releases the database. Later writes fail with
    /// [`StoreError::Closed`](crate::StoreError::Closed) (on PostgreSQL, calls other than
    /// `append` get a closed-pool database error).
    async fn close(&self);

    /// What the reads answered from memory have done, when this store keeps any
    /// ([`crate::cached::CachedReads`]); `None` otherwise.
    fn memory(&self) -> Option<crate::cached::CacheFigures> {
        None
    }
}

/// Sessions: a dialogue session's record (created, read, listed, counted, ended).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a live session with an empty log. [`StoreError::Conflict`] if the id is taken.
    ///
    /// [`StoreError::Conflict`]: crate::StoreError::Conflict
    async fn create_session(&self, new: NewSession) -> Result<SessionRecord>;

    /// The session, or `None` if it was never created.
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>>;

    /// Sessions matching `filter`, by creation time then id.
    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>>;

    /// How many sessions match `filter` (its `limit` and `offset` are ignored).
    async fn count_sessions(&self, filter: &SessionFilter) -> Result<u64>;

    /// Marks the session ended. Returns `false` (and changes nothing) if it had already ended:
    /// the first end wins. [`StoreError::UnknownSession`] if it does not exist.
    ///
    /// [`StoreError::UnknownSession`]: crate::StoreError::UnknownSession
    async fn end_session(&self, id: &str, reason: EndReason, at_ms: u64) -> Result<bool>;
}

/// Event logs: appending to a session's log (durably, in order, with no gap) and reading it back.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Appends events to a session's log, numbering them after its last `seq` with no gap.
    /// All or nothing, and durable when it returns: an acknowledged event survives the process
    /// being killed. Returns the stored events in order.
    async fn append(&self, session: &str, events: Vec<NewEvent>) -> Result<Vec<Event>>;

    /// Like [`append`](EventStore::append), but only while the session's log still ends at
    /// `after_seq`: otherwise nothing is stored and the answer is [`StoreError::LogMoved`].
    /// For the one writer that folds the log into its state as it writes (a room): when
    /// another appended meanwhile (an instance that took the room over while this one stalled
    /// past its lease), its state no longer is the log's, and it must stop and be rebuilt.
    ///
    /// [`StoreError::LogMoved`]: crate::StoreError::LogMoved
    async fn append_after(
        &self,
        session: &str,
        after_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>>;

    /// Like [`append`](EventStore::append), but at most once per `(session, key)`: the key is stored
    /// in the same transaction as the events, under a unique constraint, so of any number of
    /// concurrent calls with the same key exactly one appends (even from several processes
    /// sharing a database). Returns `None`, having stored nothing, when the key was already
    /// used. For answers that must be recorded once (a questionnaire submitted twice at once).
    async fn append_once(
        &self,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>>;

    /// The session's events with `seq > after_seq`, in order (`after_seq = 0` for all; empty
    /// for a session that does not exist).
    async fn events(&self, session: &str, after_seq: u64) -> Result<Vec<Event>>;

    /// One page of every session's events (only `study_id`'s sessions when given), ordered by
    /// session id then `seq`, starting after `after`. An empty page means the end; pass the
    /// last event's position (see [`EventCursor::after`]) to get the next one.
    async fn events_page(
        &self,
        study_id: Option<&str>,
        after: Option<&EventCursor>,
        limit: u32,
    ) -> Result<Vec<Event>>;
}

/// Participants: their records, found by id, token, crowd worker or session, and their own logs.
#[async_trait]
pub trait ParticipantStore: Send + Sync {
    /// Stores a new participant with no role, session or completion code yet.
    /// [`StoreError::Conflict`] if the id, the token hash or the worker (per study and
    /// platform) is already known.
    ///
    /// [`StoreError::Conflict`]: crate::StoreError::Conflict
    async fn create_participant(&self, new: NewParticipant) -> Result<Participant>;

    /// The participant with this id.
    async fn participant(&self, id: &str) -> Result<Option<Participant>>;

    /// The participant holding the token whose [`hash_token`](crate::hash_token) is given.
    async fn participant_by_token_hash(&self, token_hash: &str) -> Result<Option<Participant>>;

    /// The participant a crowd worker already is in this study, so a returning worker resumes.
    async fn participant_by_worker(
        &self,
        study_id: &str,
        platform: Platform,
        worker_id: &str,
    ) -> Result<Option<Participant>>;

    /// Participants placed in a session.
    async fn participants_in_session(&self, session_id: &str) -> Result<Vec<Participant>>;

    /// Every participant (of `study_id`, if given), placed or not, ordered by creation time,
    /// then id: one read where a caller would otherwise ask session by session.
    async fn list_participants(&self, study_id: Option<&str>) -> Result<Vec<Participant>>;

    /// Applies `patch` and returns the participant as stored afterwards.
    /// [`StoreError::NotFound`] if there is no such participant.
    ///
    /// [`StoreError::NotFound`]: crate::StoreError::NotFound
    async fn update_participant(&self, id: &str, patch: ParticipantPatch) -> Result<Participant>;

    /// Creates a participant's own log: a session of kind [`SessionKind::Participant`] with id
    /// `id`, whose first event the caller appends. Returns the existing record, creating
    /// nothing, if the session already exists (so concurrent first answers are harmless).
    ///
    /// [`SessionKind::Participant`]: crate::SessionKind::Participant
    async fn open_participant_log(&self, new: NewSession) -> Result<SessionRecord>;
}

/// Evaluation items and their leases: registered, claimed exactly N times, submitted, returned, counted.
#[async_trait]
pub trait ClaimStore: Send + Sync {
    /// Registers a study's items. Idempotent: an item already known keeps its leases and
    /// takes the new `needed` and dialogues; items not given are left as they are.
    async fn register_items(&self, study_id: &str, items: &[EvalItem]) -> Result<()>;

    /// Atomically gives `req.worker` an item of `req.pool` under a new lease, or `None` when no
    /// item is left for them. An item is eligible when the worker has never had a lease on it,
    /// none of its dialogues was in any earlier lease of theirs in this study, the worker is
    /// under `max_per_worker`, and (for the `Item` pool) its done leases plus its live
    /// (unexpired, unsubmitted) leases are fewer than `needed`. Among eligible items the one
    /// with the fewest done plus open leases is given (an expired lease counts here until it is
    /// submitted or returned, though it no longer holds the item's place), ties broken by item
    /// id; with a non-empty `req.prefer`, the eligible item listed first there is given instead,
    /// and eligible items not listed come after every listed one in that usual order. Exact
    /// under any concurrency, including several processes sharing a PostgreSQL database.
    async fn claim(&self, req: ClaimRequest) -> Result<Option<Lease>>;

    /// The lease with this id.
    async fn lease(&self, lease_id: &str) -> Result<Option<Lease>>;

    /// The worker's open (`Leased`) lease in the study, expired or not: the item on their page.
    async fn open_lease(&self, study_id: &str, worker: &str) -> Result<Option<Lease>>;

    /// Closes a lease with a judgment, in one transaction: decides the outcome (a live lease, or
    /// an expired one whose item still needs a judgment — fewer done plus other live leases than
    /// `needed` — is `Counted`; another expired one is `Surplus`; a closed one is
    /// `AlreadyClosed`), then, unless already closed, stores the new state and appends
    /// `events(outcome)` to `session`'s log. [`StoreError::NotFound`] for an unknown lease.
    ///
    /// [`StoreError::NotFound`]: crate::StoreError::NotFound
    async fn submit(
        &self,
        lease_id: &str,
        now_ms: u64,
        session: &str,
        events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
    ) -> Result<(SubmitOutcome, Vec<Event>)>;

    /// Gives a `Leased` lease back (the item returns to the pool; the worker will not get it
    /// again). `false` if the lease was not open.
    async fn return_lease(&self, lease_id: &str, now_ms: u64) -> Result<bool>;

    /// Every lease of the study, by claim time then id.
    async fn leases(&self, study_id: &str) -> Result<Vec<Lease>>;

    /// Per item of the study: needed, done, surplus, live, returned and expired leases at
    /// `now_ms`, by item id.
    async fn item_counts(&self, study_id: &str, now_ms: u64) -> Result<Vec<ItemCount>>;
}

/// Researcher accounts, their logins, and the failed logins that limit guessing.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Stores a new account. [`StoreError::Conflict`] if the id is taken or an account that is
    /// not removed has the same name.
    ///
    /// [`StoreError::Conflict`]: crate::StoreError::Conflict
    async fn create_account(&self, new: NewAccount) -> Result<Account>;

    /// The account with this id, removed or not.
    async fn account(&self, id: &str) -> Result<Option<Account>>;

    /// The account (not removed) with this name.
    async fn account_by_name(&self, name: &str) -> Result<Option<Account>>;

    /// Every account not removed, by name.
    async fn accounts(&self) -> Result<Vec<Account>>;

    /// Replaces an account's password hash and ends all its logins, in one transaction.
    /// `false` (and nothing changed) if there is no such account or it was removed.
    async fn set_account_password(&self, id: &str, password_hash: &str) -> Result<bool>;

    /// Removes an account (its name becomes free, its hash is forgotten) and ends all its
    /// logins, in one transaction. `false` if there is no such account or it was removed.
    async fn remove_account(&self, id: &str, at_ms: u64) -> Result<bool>;

    /// Stores a login, forgetting logins that expired by `login.created_at_ms` on the way.
    /// [`StoreError::NotFound`] if the account does not exist or was removed.
    ///
    /// [`StoreError::NotFound`]: crate::StoreError::NotFound
    async fn create_login(&self, login: NewLogin) -> Result<()>;

    /// The login whose cookie token has this hash, with its account, if it has not expired by
    /// `now_ms` and its account is not removed.
    async fn login(&self, token_hash: &str, now_ms: u64) -> Result<Option<LiveLogin>>;

    /// Ends one login; `false` if there was none with this hash.
    async fn end_login(&self, token_hash: &str) -> Result<bool>;

    /// Ends every login of an account ("log out everywhere"); returns how many there were.
    async fn end_logins(&self, account_id: &str) -> Result<u64>;

    /// Records a failed login from `address` against the account name `name`, and forgets
    /// failures older than `forget_before_ms`.
    async fn record_failed_login(
        &self,
        address: &str,
        name: &str,
        at_ms: u64,
        forget_before_ms: u64,
    ) -> Result<()>;

    /// Failed logins at or after `since_ms` from `address` and against `name`.
    async fn failed_logins(&self, address: &str, name: &str, since_ms: u64)
    -> Result<FailedLogins>;

    /// Forgets the failed logins against the account name `name` (after a successful login).
    async fn clear_failed_logins(&self, name: &str) -> Result<()>;
}

/// Room leases: which instance runs a live session's room.
#[async_trait]
pub trait RoomLeaseStore: Send + Sync {
    // Times are wall-clock milliseconds of the calling instance; instances sharing a database
    // are expected to have clocks within a small fraction of the lease length of each other.
    // The defaults refuse with [`StoreError::ReadOnly`](crate::StoreError::ReadOnly): for
    // stores that only read (such as views over another store); both backends implement them.

    /// Gives `instance` (reachable at `address`) the lease of `session`'s room until
    /// `expires_at_ms`, if nobody holds it, its lease expired by `now_ms`, or `instance` holds
    /// it already (then it is renewed). Atomic: of any number of concurrent calls, from any
    /// number of processes, for a free room exactly one gets it. Returns whether `instance`
    /// holds the lease now.
    async fn acquire_room(
        &self,
        session: &str,
        instance: &str,
        address: &str,
        now_ms: u64,
        expires_at_ms: u64,
    ) -> Result<bool> {
        let _ = (session, instance, address, now_ms, expires_at_ms);
        Err(crate::StoreError::ReadOnly)
    }

    /// The heartbeat: moves every lease `instance` holds to `expires_at_ms` in one statement,
    /// and drops its leases of sessions that have ended (sessions not run by a room end without
    /// giving theirs back). Returns the live sessions it still holds; a room of this instance
    /// missing from the list was taken over by another instance after its lease expired, and
    /// must stop.
    async fn renew_rooms(&self, instance: &str, expires_at_ms: u64) -> Result<Vec<String>> {
        let _ = (instance, expires_at_ms);
        Err(crate::StoreError::ReadOnly)
    }

    /// Gives up `instance`'s lease of `session` (its session ended, or the instance stops).
    /// `false` if `instance` did not hold it.
    async fn release_room(&self, session: &str, instance: &str) -> Result<bool> {
        let _ = (session, instance);
        Err(crate::StoreError::ReadOnly)
    }

    /// Who holds the lease of `session`'s room, expired or not; `None` if nobody does.
    async fn room_owner(&self, session: &str) -> Result<Option<RoomLease>> {
        let _ = session;
        Err(crate::StoreError::ReadOnly)
    }

    /// Takes over, for `instance` until `expires_at_ms`, up to `limit` live dialogue sessions
    /// whose lease expired by `now_ms`, or whose room nobody holds and that were created at or
    /// before `unowned_before_ms` (a younger session is being started by the instance that
    /// paired it, which leases it at once), and returns their ids (by id). Atomic per room
    /// like [`acquire_room`](RoomLeaseStore::acquire_room): instances claiming at once never get the
    /// same room.
    async fn claim_orphan_rooms(
        &self,
        instance: &str,
        address: &str,
        now_ms: u64,
        unowned_before_ms: u64,
        expires_at_ms: u64,
        limit: u32,
    ) -> Result<Vec<String>> {
        let _ = (
            instance,
            address,
            now_ms,
            unowned_before_ms,
            expires_at_ms,
            limit,
        );
        Err(crate::StoreError::ReadOnly)
    }
}

/// The lobby: participants waiting for a partner, shared by every instance.
#[async_trait]
pub trait LobbyStore: Send + Sync {
    /// Pairs `entry`'s participant or queues them, atomically: first removes any earlier place
    /// of the same participant (another tab; returned in [`JoinedLobby::replaced`]), then takes
    /// the first live waiter of the complementary role in the same queue (study and pair key)
    /// that is neither this participant nor the same crowd worker — those put at the front
    /// first, then by order of arrival; live means heard from at or after `live_since_ms` —
    /// removing it and returning [`Joined::Taken`]. With nobody to take, stores `entry` at the
    /// back of its queue (or behind the others at the front, when `entry.front`) and returns
    /// [`Joined::Queued`]; the stored waiting time starts at the earlier of `entry.since_ms`
    /// and the replaced place's, so a wait counts from the participant's first tab.
    /// Exact under any concurrency, including several processes sharing a PostgreSQL database:
    /// a waiter is taken at most once, and two complementary participants joining at the same
    /// moment are paired, not both queued.
    async fn join_lobby(&self, entry: NewWaiter, live_since_ms: u64) -> Result<JoinedLobby>;

    /// The place held by connection `conn` of `instance` for `participant` was heard from at
    /// `at_ms`. `false` if that place is gone (taken by a partner, or replaced by another tab).
    async fn lobby_heard(
        &self,
        participant: &str,
        instance: &str,
        conn: u64,
        at_ms: u64,
    ) -> Result<bool>;

    /// Gives up the place held by connection `conn` of `instance`; `false` if it is gone.
    async fn leave_lobby(&self, participant: &str, instance: &str, conn: u64) -> Result<bool>;

    /// Everyone waiting (in `study_id`, if given), by study, pair key, front first, then order
    /// of arrival.
    async fn waiters(&self, study_id: Option<&str>) -> Result<Vec<Waiter>>;

    /// How many participants of `study_id` are present, per role: given a role, not seated in a
    /// session, without a completion code, and either entered (or switched role by
    /// [`switch_lobby_role`](LobbyStore::switch_lobby_role)) at or after `arrived_since_ms`, or
    /// holding a place in the study's lobby heard from at or after `live_since_ms`. Each
    /// participant counts once. The lobby balances newcomers' roles over these.
    async fn lobby_presence(
        &self,
        study_id: &str,
        arrived_since_ms: u64,
        live_since_ms: u64,
    ) -> Result<RoleCounts>;

    /// Moves a waiter of the public queue to the other role when its role is in lasting
    /// surplus, atomically with the queue's joins: the place held by `req.instance`/`req.conn`
    /// for `req.participant`, of role `req.from` in the study's public queue, is the last of the
    /// live places of that role (front first, then waiting time, then order of arrival; live as
    /// in [`join_lobby`](LobbyStore::join_lobby)), and those places outnumber the participants of
    /// the other role present ([`lobby_presence`](LobbyStore::lobby_presence)) by at least two (see
    /// [`switch_is_due`]). Then the place is removed and the participant gets the other role,
    /// `req.flow_step` and a role change at `req.at_ms` (present again from then); `true`.
    /// Otherwise nothing changes; `false`.
    async fn switch_lobby_role(&self, req: RoleSwitch) -> Result<bool>;

    /// Sends a short notice (at most [`LOBBY_NOTICE_MAX`] bytes) to every instance listening on
    /// this database through [`listen_lobby`](LobbyStore::listen_lobby) (PostgreSQL `NOTIFY`).
    /// `false` when the backend has no such channel (SQLite, one process): the caller delivers
    /// the notice in its own process.
    async fn notify_lobby(&self, notice: &str) -> Result<bool>;

    /// Notices sent by [`notify_lobby`](LobbyStore::notify_lobby) from any instance, including this
    /// one (PostgreSQL `LISTEN`, reconnecting after a lost connection); `None` when the backend
    /// has no such channel.
    async fn listen_lobby(&self) -> Result<Option<tokio::sync::mpsc::Receiver<String>>>;
}

/// Settings: small named values, read, written, counted and compare-and-set.
#[async_trait]
pub trait MetaStore: Send + Sync {
    /// A value from the key-value `meta` table (e.g. the researcher password hash).
    async fn meta(&self, key: &str) -> Result<Option<String>>;

    /// Sets (or replaces) a `meta` value.
    async fn set_meta(&self, key: &str, value: &str) -> Result<()>;

    /// Adds one to the integer `meta` value under `key` (a missing key counts as 0) in one
    /// atomic step, and returns the new value: concurrent calls, from this process or from
    /// other instances on the same database, each get a different number. A value that is not
    /// an integer is an error and is left as it is.
    async fn meta_increment(&self, key: &str) -> Result<i64>;

    /// Sets the `meta` value under `key` to `new` only if it is `expected` now (`None`: the key
    /// is absent), in one atomic step; answers whether it did. Of concurrent calls expecting
    /// the same value, from this process or other instances on the same database, exactly one
    /// succeeds: a claim on a record (e.g. a payment being sent) that two cannot both win.
    async fn meta_swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool>;
}

/// A store that hands calls on to another: `Arc<S>`, or a wrapper that changes a few calls
/// (metering writes, answering some reads from memory). It implements the capabilities it
/// changes itself and takes each other one from [`inner`](Forward::inner) by implementing that
/// capability's marker (`ForwardSessions`, `ForwardEvents`…): the forwarding is written once,
/// here, for every wrapper.
pub trait Forward: Send + Sync + 'static {
    /// The store the calls go to.
    type To: Store + ?Sized;
    fn inner(&self) -> &Self::To;
}

/// Takes [`SessionStore`] from [`Forward::inner`].
pub trait ForwardSessions: Forward {}

#[async_trait]
impl<T: ForwardSessions> SessionStore for T {
    async fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.inner().create_session(new).await
    }
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.inner().session(id).await
    }
    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        self.inner().list_sessions(filter).await
    }
    async fn count_sessions(&self, filter: &SessionFilter) -> Result<u64> {
        self.inner().count_sessions(filter).await
    }
    async fn end_session(&self, id: &str, reason: EndReason, at_ms: u64) -> Result<bool> {
        self.inner().end_session(id, reason, at_ms).await
    }
}

/// Takes [`EventStore`] from [`Forward::inner`].
pub trait ForwardEvents: Forward {}

#[async_trait]
impl<T: ForwardEvents> EventStore for T {
    async fn append(&self, session: &str, events: Vec<NewEvent>) -> Result<Vec<Event>> {
        self.inner().append(session, events).await
    }
    async fn append_after(
        &self,
        session: &str,
        after_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>> {
        self.inner().append_after(session, after_seq, events).await
    }
    async fn append_once(
        &self,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>> {
        self.inner().append_once(session, key, events).await
    }
    async fn events(&self, session: &str, after_seq: u64) -> Result<Vec<Event>> {
        self.inner().events(session, after_seq).await
    }
    async fn events_page(
        &self,
        study_id: Option<&str>,
        after: Option<&EventCursor>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        self.inner().events_page(study_id, after, limit).await
    }
}

/// Takes [`ParticipantStore`] from [`Forward::inner`].
pub trait ForwardParticipants: Forward {}

#[async_trait]
impl<T: ForwardParticipants> ParticipantStore for T {
    async fn create_participant(&self, new: NewParticipant) -> Result<Participant> {
        self.inner().create_participant(new).await
    }
    async fn participant(&self, id: &str) -> Result<Option<Participant>> {
        self.inner().participant(id).await
    }
    async fn participant_by_token_hash(&self, token_hash: &str) -> Result<Option<Participant>> {
        self.inner().participant_by_token_hash(token_hash).await
    }
    async fn participant_by_worker(
        &self,
        study_id: &str,
        platform: Platform,
        worker_id: &str,
    ) -> Result<Option<Participant>> {
        self.inner()
            .participant_by_worker(study_id, platform, worker_id)
            .await
    }
    async fn participants_in_session(&self, session_id: &str) -> Result<Vec<Participant>> {
        self.inner().participants_in_session(session_id).await
    }
    async fn list_participants(&self, study_id: Option<&str>) -> Result<Vec<Participant>> {
        self.inner().list_participants(study_id).await
    }
    async fn update_participant(&self, id: &str, patch: ParticipantPatch) -> Result<Participant> {
        self.inner().update_participant(id, patch).await
    }
    async fn open_participant_log(&self, new: NewSession) -> Result<SessionRecord> {
        self.inner().open_participant_log(new).await
    }
}

/// Takes [`ClaimStore`] from [`Forward::inner`].
pub trait ForwardClaims: Forward {}

#[async_trait]
impl<T: ForwardClaims> ClaimStore for T {
    async fn register_items(&self, study_id: &str, items: &[EvalItem]) -> Result<()> {
        self.inner().register_items(study_id, items).await
    }
    async fn claim(&self, req: ClaimRequest) -> Result<Option<Lease>> {
        self.inner().claim(req).await
    }
    async fn lease(&self, lease_id: &str) -> Result<Option<Lease>> {
        self.inner().lease(lease_id).await
    }
    async fn open_lease(&self, study_id: &str, worker: &str) -> Result<Option<Lease>> {
        self.inner().open_lease(study_id, worker).await
    }
    async fn submit(
        &self,
        lease_id: &str,
        now_ms: u64,
        session: &str,
        events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
    ) -> Result<(SubmitOutcome, Vec<Event>)> {
        self.inner().submit(lease_id, now_ms, session, events).await
    }
    async fn return_lease(&self, lease_id: &str, now_ms: u64) -> Result<bool> {
        self.inner().return_lease(lease_id, now_ms).await
    }
    async fn leases(&self, study_id: &str) -> Result<Vec<Lease>> {
        self.inner().leases(study_id).await
    }
    async fn item_counts(&self, study_id: &str, now_ms: u64) -> Result<Vec<ItemCount>> {
        self.inner().item_counts(study_id, now_ms).await
    }
}

/// Takes [`AccountStore`] from [`Forward::inner`].
pub trait ForwardAccounts: Forward {}

#[async_trait]
impl<T: ForwardAccounts> AccountStore for T {
    async fn create_account(&self, new: NewAccount) -> Result<Account> {
        self.inner().create_account(new).await
    }
    async fn account(&self, id: &str) -> Result<Option<Account>> {
        self.inner().account(id).await
    }
    async fn account_by_name(&self, name: &str) -> Result<Option<Account>> {
        self.inner().account_by_name(name).await
    }
    async fn accounts(&self) -> Result<Vec<Account>> {
        self.inner().accounts().await
    }
    async fn set_account_password(&self, id: &str, password_hash: &str) -> Result<bool> {
        self.inner().set_account_password(id, password_hash).await
    }
    async fn remove_account(&self, id: &str, at_ms: u64) -> Result<bool> {
        self.inner().remove_account(id, at_ms).await
    }
    async fn create_login(&self, login: NewLogin) -> Result<()> {
        self.inner().create_login(login).await
    }
    async fn login(&self, token_hash: &str, now_ms: u64) -> Result<Option<LiveLogin>> {
        self.inner().login(token_hash, now_ms).await
    }
    async fn end_login(&self, token_hash: &str) -> Result<bool> {
        self.inner().end_login(token_hash).await
    }
    async fn end_logins(&self, account_id: &str) -> Result<u64> {
        self.inner().end_logins(account_id).await
    }
    async fn record_failed_login(
        &self,
        address: &str,
        name: &str,
        at_ms: u64,
        forget_before_ms: u64,
    ) -> Result<()> {
        self.inner()
            .record_failed_login(address, name, at_ms, forget_before_ms)
            .await
    }
    async fn failed_logins(
        &self,
        address: &str,
        name: &str,
        since_ms: u64,
    ) -> Result<FailedLogins> {
        self.inner().failed_logins(address, name, since_ms).await
    }
    async fn clear_failed_logins(&self, name: &str) -> Result<()> {
        self.inner().clear_failed_logins(name).await
    }
}

/// Takes [`RoomLeaseStore`] from [`Forward::inner`].
pub trait ForwardRoomLeases: Forward {}

#[async_trait]
impl<T: ForwardRoomLeases> RoomLeaseStore for T {
    async fn acquire_room(
        &self,
        session: &str,
        instance: &str,
        address: &str,
        now_ms: u64,
        expires_at_ms: u64,
    ) -> Result<bool> {
        self.inner()
            .acquire_room(session, instance, address, now_ms, expires_at_ms)
            .await
    }
    async fn renew_rooms(&self, instance: &str, expires_at_ms: u64) -> Result<Vec<String>> {
        self.inner().renew_rooms(instance, expires_at_ms).await
    }
    async fn release_room(&self, session: &str, instance: &str) -> Result<bool> {
        self.inner().release_room(session, instance).await
    }
    async fn room_owner(&self, session: &str) -> Result<Option<RoomLease>> {
        self.inner().room_owner(session).await
    }
    async fn claim_orphan_rooms(
        &self,
        instance: &str,
        address: &str,
        now_ms: u64,
        unowned_before_ms: u64,
        expires_at_ms: u64,
        limit: u32,
    ) -> Result<Vec<String>> {
        self.inner()
            .claim_orphan_rooms(
                instance,
                address,
                now_ms,
                unowned_before_ms,
                expires_at_ms,
                limit,
            )
            .await
    }
}

/// Takes [`LobbyStore`] from [`Forward::inner`].
pub trait ForwardLobby: Forward {}

#[async_trait]
impl<T: ForwardLobby> LobbyStore for T {
    async fn join_lobby(&self, entry: NewWaiter, live_since_ms: u64) -> Result<JoinedLobby> {
        self.inner().join_lobby(entry, live_since_ms).await
    }
    async fn lobby_heard(
        &self,
        participant: &str,
        instance: &str,
        conn: u64,
        at_ms: u64,
    ) -> Result<bool> {
        self.inner()
            .lobby_heard(participant, instance, conn, at_ms)
            .await
    }
    async fn leave_lobby(&self, participant: &str, instance: &str, conn: u64) -> Result<bool> {
        self.inner().leave_lobby(participant, instance, conn).await
    }
    async fn waiters(&self, study_id: Option<&str>) -> Result<Vec<Waiter>> {
        self.inner().waiters(study_id).await
    }
    async fn lobby_presence(
        &self,
        study_id: &str,
        arrived_since_ms: u64,
        live_since_ms: u64,
    ) -> Result<RoleCounts> {
        self.inner()
            .lobby_presence(study_id, arrived_since_ms, live_since_ms)
            .await
    }
    async fn switch_lobby_role(&self, req: RoleSwitch) -> Result<bool> {
        self.inner().switch_lobby_role(req).await
    }
    async fn notify_lobby(&self, notice: &str) -> Result<bool> {
        self.inner().notify_lobby(notice).await
    }
    async fn listen_lobby(&self) -> Result<Option<tokio::sync::mpsc::Receiver<String>>> {
        self.inner().listen_lobby().await
    }
}

/// Takes [`MetaStore`] from [`Forward::inner`].
pub trait ForwardMeta: Forward {}

#[async_trait]
impl<T: ForwardMeta> MetaStore for T {
    async fn meta(&self, key: &str) -> Result<Option<String>> {
        self.inner().meta(key).await
    }
    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.inner().set_meta(key, value).await
    }
    async fn meta_increment(&self, key: &str) -> Result<i64> {
        self.inner().meta_increment(key).await
    }
    async fn meta_swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool> {
        self.inner().meta_swap(key, expected, new).await
    }
}

/// Which instance runs a live session's room, and until when (see [`RoomLeaseStore::acquire_room`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomLease {
    /// The session whose room it is.
    pub session_id: String,
    /// The owning instance's id.
    pub instance_id: String,
    /// The owner's advertised base URL, where other instances reach the room.
    pub address: String,
    /// When the lease ends unless renewed (wall-clock milliseconds).
    pub expires_at_ms: u64,
}

impl EventCursor {
    /// The position just after `event`.
    pub fn after(event: &Event) -> EventCursor {
        EventCursor {
            session: event.session.clone(),
            seq: event.seq,
        }
    }
}

impl<S: Store + ?Sized> Forward for Arc<S> {
    type To = S;
    fn inner(&self) -> &S {
        self
    }
}
impl<S: Store + ?Sized> ForwardSessions for Arc<S> {}
impl<S: Store + ?Sized> ForwardEvents for Arc<S> {}
impl<S: Store + ?Sized> ForwardParticipants for Arc<S> {}
impl<S: Store + ?Sized> ForwardClaims for Arc<S> {}
impl<S: Store + ?Sized> ForwardAccounts for Arc<S> {}
impl<S: Store + ?Sized> ForwardRoomLeases for Arc<S> {}
impl<S: Store + ?Sized> ForwardLobby for Arc<S> {}
impl<S: Store + ?Sized> ForwardMeta for Arc<S> {}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn close(&self) {
        (**self).close().await
    }
    fn memory(&self) -> Option<crate::cached::CacheFigures> {
        (**self).memory()
    }
}

// ----- lobby types -----

/// The longest notice [`LobbyStore::notify_lobby`] sends (PostgreSQL allows 8000 bytes; lobby notices
/// are ids only).
pub const LOBBY_NOTICE_MAX: usize = 1000;

/// A participant asking to be paired (see [`LobbyStore::join_lobby`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWaiter {
    pub participant: String,
    pub study_id: String,
    /// The private pair key (lab links and `/try`); `None` for the study's public queue.
    pub pair_key: Option<String>,
    /// The role the participant plays; they are paired with the other one.
    pub role: Role,
    /// `platform:worker id`, when the platform gave one.
    pub worker: Option<String>,
    /// The server instance holding the participant's waiting connection.
    pub instance: String,
    /// That connection, unique within the instance.
    pub conn: u64,
    /// Queued ahead of the others (their partner never arrived).
    pub front: bool,
    /// When the participant started waiting (kept across reconnects by the caller).
    pub since_ms: u64,
    /// Now: when the connection was last heard from.
    pub heard_at_ms: u64,
}

/// A place in the lobby.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub participant: String,
    pub study_id: String,
    pub pair_key: Option<String>,
    pub role: Role,
    pub worker: Option<String>,
    pub instance: String,
    pub conn: u64,
    pub front: bool,
    /// Order of arrival: larger for later arrivals, across every instance.
    pub order: u64,
    pub since_ms: u64,
    pub heard_at_ms: u64,
}

/// What [`LobbyStore::join_lobby`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedLobby {
    /// A partner taken, or the joiner queued.
    pub joined: Joined,
    /// The earlier place of the same participant (another tab, on this instance or another),
    /// removed: its connection is to be told that it was replaced.
    pub replaced: Option<Waiter>,
}

/// Whether [`LobbyStore::join_lobby`] took a partner or queued the joiner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Joined {
    /// A partner was waiting: their place is removed and returned; the joiner was not queued.
    Taken(Waiter),
    /// Nobody fits yet: the joiner's place, as stored.
    Queued(Waiter),
}

/// Participants per role (see [`LobbyStore::lobby_presence`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoleCounts {
    pub users: u64,
    pub wizards: u64,
}

impl RoleCounts {
    /// The count of `role`.
    pub fn of(&self, role: Role) -> u64 {
        match role {
            Role::User => self.users,
            Role::Wizard => self.wizards,
        }
    }

    /// Adds `n` to the count of `role`.
    pub fn add(&mut self, role: Role, n: u64) {
        match role {
            Role::User => self.users += n,
            Role::Wizard => self.wizards += n,
        }
    }
}

/// A waiter the lobby may move to the other role (see [`LobbyStore::switch_lobby_role`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleSwitch {
    pub participant: String,
    pub study_id: String,
    /// The instance and connection holding the place.
    pub instance: String,
    pub conn: u64,
    /// The role the place waits in; the participant gets the other one.
    pub from: Role,
    /// The participant's place in the page flow of the other role (its instructions).
    pub flow_step: String,
    /// Now: when the role changes.
    pub at_ms: u64,
    /// Places heard from at or after this are live.
    pub live_since_ms: u64,
    /// Participants who entered or changed role at or after this are present.
    pub arrived_since_ms: u64,
}

/// Whether the last of `waiting` live places of one role in a queue moves to the other role,
/// with `other_present` participants of that role present: only when, even if every one of
/// them paired with a waiter, two waiters would be left — the switch makes them a pair. A
/// waiter whose partner may still come (one of the other role on their way) is left waiting.
pub fn switch_is_due(waiting: u64, other_present: u64) -> bool {
    waiting >= other_present + 2
}
