//! The PostgreSQL backend, for several server instances sharing one database.
//!
//! Appends go through the group-committing writer task in `writer.rs` (see there for how `seq`
//! is assigned under a row lock, which keeps it gap-free across instances); evaluation items
//! and leases are in `leases.rs` (transactions with row locks, exact across instances);
//! everything else is a single statement on the pool.
//!
//! Durability: commits use PostgreSQL's default `synchronous_commit = on`, so an acknowledged
//! append is on disk; the group commit shares one WAL flush among all appends of a batch.

mod leases;
mod rooms;
mod waiting;
mod writer;

use crate::store::{
    AccountStore, ClaimStore, EventStore, LobbyStore, MetaStore, ParticipantStore, RoomLeaseStore,
    SessionStore,
};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::{mpsc, oneshot};
use wozkit_core::event::{EndReason, Event};

use self::writer::{Append, AppendRequest, Msg};

use crate::codec::{self, to_i64};
use crate::error::{Result, StoreError};
use crate::model::{
    Account, ClaimRequest, EvalItem, EventCursor, FailedLogins, ItemCount, Lease, LiveLogin,
    NewAccount, NewEvent, NewLogin, NewParticipant, NewSession, Participant, ParticipantPatch,
    Platform, SessionFilter, SessionKind, SessionRecord, SubmitOutcome,
};
use crate::store::{JoinedLobby, NewWaiter, RoleCounts, RoleSwitch, Store, Waiter};

/// Tuning for [`PgStore::connect_with`].
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Pool size: appends to different sessions run in parallel up to this many.
    pub max_connections: u32,
    /// How long a request waits for a free connection before failing.
    pub acquire_timeout: Duration,
    /// Most appends committed in one transaction.
    pub max_batch: usize,
    /// Appends that may wait for the writer before senders are held back.
    pub queue: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(10),
            max_batch: 1024,
            queue: 8192,
        }
    }
}

/// The PostgreSQL store: a connection pool and the append writer. Share it behind an `Arc`.
pub struct PgStore {
    pool: PgPool,
    /// The append writer's queue; bounded so a burst slows callers instead of growing memory.
    appends: mpsc::Sender<Msg>,
    /// Makes `close` idempotent through a shared reference; never held across an await.
    closed: Mutex<bool>,
}

impl PgStore {
    /// Queues an append for the writer and waits for its commit: the first `seq` assigned, or
    /// `None` when `once` was already used in the session.
    async fn send_append(
        &self,
        session: &str,
        once: Option<String>,
        after: Option<u64>,
        events: &[NewEvent],
    ) -> Result<Option<u64>> {
        let rows = codec::encode_events(events)?;
        let (reply, answer) = oneshot::channel();
        let request = AppendRequest {
            append: Append {
                session: session.to_owned(),
                rows,
                once,
                after,
            },
            reply,
        };
        self.appends
            .send(Msg::Append(request))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Appends `events` (only while the log ends at `after`, when given).
    async fn append_fenced(
        &self,
        session: &str,
        after: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let first = self.send_append(session, None, after, &events).await?;
        // Only a keyed append can be refused as a repeat.
        let first = first.ok_or(StoreError::Closed)?;
        Ok(codec::stored_events(session, first, events))
    }

    /// Connects to `url` (`postgres://user:pass@host:port/db`) and brings the schema up to date.
    pub async fn connect(url: &str) -> Result<PgStore> {
        PgStore::connect_with(url, PgOptions::default()).await
    }

    pub async fn connect_with(url: &str, options: PgOptions) -> Result<PgStore> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .connect(url)
            .await?;
        // Concurrent instances starting together are serialised by the migrator's advisory lock.
        crate::migrations::postgres().run(&pool).await?;
        let (appends, inbox) = mpsc::channel(options.queue.max(1));
        tokio::spawn(writer::run(pool.clone(), inbox, options.max_batch.max(1)));
        Ok(PgStore {
            pool,
            appends,
            closed: Mutex::new(false),
        })
    }

    /// Inserts a session of `kind`; `None` when the id is taken.
    async fn insert_session(
        &self,
        new: &NewSession,
        kind: SessionKind,
    ) -> Result<Option<SessionRecord>> {
        let row = sqlx::query(concat!(
            "INSERT INTO sessions (id, study_id, study_version, seed, created_at_ms, kind) ",
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING ",
            "id, study_id, study_version, seed, created_at_ms, ended_at_ms, end_reason, kind, ",
            "last_seq"
        ))
        .bind(new.id.as_str())
        .bind(new.study_id.as_str())
        .bind(new.study_version.as_str())
        .bind(new.seed.to_string())
        .bind(to_i64("session creation time", new.created_at_ms)?)
        .bind(kind.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| codec::session_from_row(&r)).transpose()
    }

    async fn one_participant(
        &self,
        sql: &'static str,
        keys: &[&str],
    ) -> Result<Option<Participant>> {
        let mut query = sqlx::query(sql);
        for key in keys {
            query = query.bind(*key);
        }
        match query.fetch_optional(&self.pool).await? {
            Some(row) => Ok(Some(codec::participant_from_row(&row)?)),
            None => Ok(None),
        }
    }
}

/// A session query: the session columns, then `$tail` (WHERE, ORDER BY).
macro_rules! select_sessions {
    ($tail:literal) => {
        concat!(
            "SELECT id, study_id, study_version, seed, created_at_ms, ended_at_ms, end_reason, ",
            "kind, last_seq FROM sessions ",
            $tail
        )
    };
}

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        match self.insert_session(&new, SessionKind::Dialogue).await? {
            Some(record) => Ok(record),
            None => Err(StoreError::Conflict {
                what: "session",
                key: new.id,
            }),
        }
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>> {
        let row = sqlx::query(select_sessions!("WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| codec::session_from_row(&r)).transpose()
    }

    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        let rows = sqlx::query(select_sessions!(
            "WHERE ($1::text IS NULL OR study_id = $1) \
               AND ($2::boolean IS NULL OR (ended_at_ms IS NOT NULL) = $2) AND kind = $5 \
             ORDER BY created_at_ms, id LIMIT $3 OFFSET $4"
        ))
        .bind(filter.study_id.as_deref())
        .bind(filter.ended())
        .bind(filter.limit.map(i64::from))
        .bind(i64::from(filter.offset))
        .bind(filter.kind.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(codec::session_from_row).collect()
    }

    async fn count_sessions(&self, filter: &SessionFilter) -> Result<u64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions WHERE ($1::text IS NULL OR study_id = $1) \
               AND ($2::boolean IS NULL OR (ended_at_ms IS NOT NULL) = $2) AND kind = $3",
        )
        .bind(filter.study_id.as_deref())
        .bind(filter.ended())
        .bind(filter.kind.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn end_session(&self, id: &str, reason: EndReason, at_ms: u64) -> Result<bool> {
        // One statement tells "ended now" from "already ended" from "no such session".
        let ended_now: Option<bool> = sqlx::query_scalar(
            "WITH ended AS ( \
                 UPDATE sessions SET ended_at_ms = $2, end_reason = $3 \
                 WHERE id = $1 AND ended_at_ms IS NULL RETURNING id) \
             SELECT EXISTS (SELECT 1 FROM ended) FROM sessions WHERE id = $1",
        )
        .bind(id)
        .bind(to_i64("session end time", at_ms)?)
        .bind(codec::end_reason_name(reason))
        .fetch_optional(&self.pool)
        .await?;
        ended_now.ok_or_else(|| StoreError::UnknownSession(id.to_owned()))
    }
}

#[async_trait]
impl EventStore for PgStore {
    async fn append(&self, session: &str, events: Vec<NewEvent>) -> Result<Vec<Event>> {
        self.append_fenced(session, None, events).await
    }

    async fn append_after(
        &self,
        session: &str,
        after_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>> {
        self.append_fenced(session, Some(after_seq), events).await
    }

    async fn append_once(
        &self,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>> {
        let first = self
            .send_append(session, Some(key.to_owned()), None, &events)
            .await?;
        Ok(first.map(|first| codec::stored_events(session, first, events)))
    }

    async fn events(&self, session: &str, after_seq: u64) -> Result<Vec<Event>> {
        let rows = sqlx::query(
            "SELECT session_id, seq, v, at_ms, actor, payload FROM events \
             WHERE session_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(session)
        .bind(to_i64("seq", after_seq)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(codec::event_from_row).collect()
    }

    async fn events_page(
        &self,
        study_id: Option<&str>,
        after: Option<&EventCursor>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        let (after_session, after_seq) = match after {
            Some(c) => (c.session.as_str(), to_i64("seq", c.seq)?),
            None => ("", 0),
        };
        let rows = sqlx::query(
            "SELECT e.session_id, e.seq, e.v, e.at_ms, e.actor, e.payload FROM events e \
             WHERE ($1::text IS NULL \
                    OR e.session_id IN (SELECT id FROM sessions WHERE study_id = $1)) \
               AND (e.session_id, e.seq) > ($2, $3) \
             ORDER BY e.session_id, e.seq LIMIT $4",
        )
        .bind(study_id)
        .bind(after_session)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(codec::event_from_row).collect()
    }
}

#[async_trait]
impl ParticipantStore for PgStore {
    async fn open_participant_log(&self, new: NewSession) -> Result<SessionRecord> {
        if let Some(record) = self.insert_session(&new, SessionKind::Participant).await? {
            return Ok(record);
        }
        self.session(&new.id)
            .await?
            .ok_or(StoreError::UnknownSession(new.id))
    }

    async fn create_participant(&self, new: NewParticipant) -> Result<Participant> {
        let row = sqlx::query(
            "INSERT INTO participants (id, token_hash, study_id, platform, worker_id, \
             external_ids, flow_step, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING *",
        )
        .bind(new.id.as_str())
        .bind(new.token_hash.as_str())
        .bind(new.study_id.as_str())
        .bind(new.platform.as_str())
        .bind(new.worker_id.as_deref())
        .bind(codec::external_ids_json(&new.external_ids)?)
        .bind(new.flow_step.as_str())
        .bind(to_i64("participant creation time", new.created_at_ms)?)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => codec::participant_from_row(&row),
            None => Err(codec::participant_conflict(&new)),
        }
    }

    async fn participant(&self, id: &str) -> Result<Option<Participant>> {
        self.one_participant("SELECT * FROM participants WHERE id = $1", &[id])
            .await
    }

    async fn participant_by_token_hash(&self, token_hash: &str) -> Result<Option<Participant>> {
        self.one_participant(
            "SELECT * FROM participants WHERE token_hash = $1",
            &[token_hash],
        )
        .await
    }

    async fn participant_by_worker(
        &self,
        study_id: &str,
        platform: Platform,
        worker_id: &str,
    ) -> Result<Option<Participant>> {
        self.one_participant(
            "SELECT * FROM participants WHERE study_id = $1 AND platform = $2 AND worker_id = $3",
            &[study_id, platform.as_str(), worker_id],
        )
        .await
    }

    async fn participants_in_session(&self, session_id: &str) -> Result<Vec<Participant>> {
        let rows = sqlx::query(
            "SELECT * FROM participants WHERE session_id = $1 ORDER BY created_at_ms, id",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(codec::participant_from_row).collect()
    }

    async fn list_participants(&self, study_id: Option<&str>) -> Result<Vec<Participant>> {
        let rows = sqlx::query(
            "SELECT * FROM participants WHERE $1 IS NULL OR study_id = $1 \
             ORDER BY created_at_ms, id",
        )
        .bind(study_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(codec::participant_from_row).collect()
    }

    async fn update_participant(&self, id: &str, patch: ParticipantPatch) -> Result<Participant> {
        let row = sqlx::query(
            "UPDATE participants SET \
               role = CASE WHEN $2 THEN $3 ELSE role END, \
               session_id = CASE WHEN $4 THEN $5 ELSE session_id END, \
               flow_step = COALESCE($6, flow_step), \
               completion_code = CASE WHEN $7 THEN $8 ELSE completion_code END \
             WHERE id = $1 RETURNING *",
        )
        .bind(id)
        .bind(patch.role.is_some())
        .bind(patch.role.flatten().map(|r| r.as_str()))
        .bind(patch.session_id.is_some())
        .bind(patch.session_id.flatten())
        .bind(patch.flow_step)
        .bind(patch.completion_code.is_some())
        .bind(patch.completion_code.flatten())
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => codec::participant_from_row(&row),
            None => Err(StoreError::NotFound {
                what: "participant",
                id: id.to_owned(),
            }),
        }
    }
}

#[async_trait]
impl ClaimStore for PgStore {
    async fn register_items(&self, study_id: &str, items: &[EvalItem]) -> Result<()> {
        leases::register_items(&self.pool, study_id, items).await
    }

    async fn claim(&self, req: ClaimRequest) -> Result<Option<Lease>> {
        leases::claim(&self.pool, &req).await
    }

    async fn lease(&self, lease_id: &str) -> Result<Option<Lease>> {
        leases::lease(&self.pool, lease_id).await
    }

    async fn open_lease(&self, study_id: &str, worker: &str) -> Result<Option<Lease>> {
        leases::open_lease(&self.pool, study_id, worker).await
    }

    async fn submit(
        &self,
        lease_id: &str,
        now_ms: u64,
        session: &str,
        events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
    ) -> Result<(SubmitOutcome, Vec<Event>)> {
        leases::submit(&self.pool, lease_id, now_ms, session, events).await
    }

    async fn return_lease(&self, lease_id: &str, now_ms: u64) -> Result<bool> {
        leases::return_lease(&self.pool, lease_id, now_ms).await
    }

    async fn leases(&self, study_id: &str) -> Result<Vec<Lease>> {
        leases::leases(&self.pool, study_id).await
    }

    async fn item_counts(&self, study_id: &str, now_ms: u64) -> Result<Vec<ItemCount>> {
        leases::item_counts(&self.pool, study_id, now_ms).await
    }
}

#[async_trait]
impl AccountStore for PgStore {
    async fn create_account(&self, new: NewAccount) -> Result<Account> {
        let done = sqlx::query(
            "INSERT INTO accounts (id, name, access, password_hash, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(new.id.as_str())
        .bind(new.name.as_str())
        .bind(new.access.as_str())
        .bind(new.password_hash.as_str())
        .bind(to_i64("account creation time", new.created_at_ms)?)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict {
                what: "account",
                key: new.name,
            });
        }
        Ok(Account {
            id: new.id,
            name: new.name,
            access: new.access,
            password_hash: new.password_hash,
            created_at_ms: new.created_at_ms,
            removed_at_ms: None,
        })
    }

    async fn account(&self, id: &str) -> Result<Option<Account>> {
        let sql = format!(
            "SELECT {} FROM accounts WHERE id = $1",
            codec::ACCOUNT_COLUMNS
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| codec::account_from_row(&r)).transpose()
    }

    async fn account_by_name(&self, name: &str) -> Result<Option<Account>> {
        let sql = format!(
            "SELECT {} FROM accounts WHERE name = $1 AND removed_at_ms IS NULL",
            codec::ACCOUNT_COLUMNS
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| codec::account_from_row(&r)).transpose()
    }

    async fn accounts(&self) -> Result<Vec<Account>> {
        let sql = format!(
            "SELECT {} FROM accounts WHERE removed_at_ms IS NULL ORDER BY name",
            codec::ACCOUNT_COLUMNS
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(codec::account_from_row).collect()
    }

    async fn set_account_password(&self, id: &str, password_hash: &str) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE accounts SET password_hash = $2 WHERE id = $1 AND removed_at_ms IS NULL",
        )
        .bind(id)
        .bind(password_hash)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query("DELETE FROM logins WHERE account_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn remove_account(&self, id: &str, at_ms: u64) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE accounts SET removed_at_ms = $2, password_hash = '' \
             WHERE id = $1 AND removed_at_ms IS NULL",
        )
        .bind(id)
        .bind(to_i64("account removal time", at_ms)?)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query("DELETE FROM logins WHERE account_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn create_login(&self, login: NewLogin) -> Result<()> {
        let created = to_i64("login creation time", login.created_at_ms)?;
        let expires = to_i64("login expiry time", login.expires_at_ms)?;
        sqlx::query("DELETE FROM logins WHERE expires_at_ms <= $1")
            .bind(created)
            .execute(&self.pool)
            .await?;
        // One statement, so an account removed at the same moment cannot gain a login.
        let done = sqlx::query(
            "INSERT INTO logins (token_hash, account_id, created_at_ms, expires_at_ms) \
             SELECT $1, id, $3, $4 FROM accounts WHERE id = $2 AND removed_at_ms IS NULL \
             FOR SHARE",
        )
        .bind(login.token_hash.as_str())
        .bind(login.account_id.as_str())
        .bind(created)
        .bind(expires)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "account",
                id: login.account_id,
            });
        }
        Ok(())
    }

    async fn login(&self, token_hash: &str, now_ms: u64) -> Result<Option<LiveLogin>> {
        let row = sqlx::query(
            "SELECT a.id, a.name, a.access, a.password_hash, a.created_at_ms, a.removed_at_ms, \
                    l.created_at_ms AS login_created_ms, l.expires_at_ms AS login_expires_ms \
             FROM logins l JOIN accounts a ON a.id = l.account_id \
             WHERE l.token_hash = $1 AND l.expires_at_ms > $2 AND a.removed_at_ms IS NULL",
        )
        .bind(token_hash)
        .bind(to_i64("time", now_ms)?)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| codec::live_login_from_row(&r)).transpose()
    }

    async fn end_login(&self, token_hash: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM logins WHERE token_hash = $1")
            .bind(token_hash)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn end_logins(&self, account_id: &str) -> Result<u64> {
        let done = sqlx::query("DELETE FROM logins WHERE account_id = $1")
            .bind(account_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn record_failed_login(
        &self,
        address: &str,
        name: &str,
        at_ms: u64,
        forget_before_ms: u64,
    ) -> Result<()> {
        sqlx::query("DELETE FROM failed_logins WHERE at_ms < $1")
            .bind(to_i64("failed login time", forget_before_ms)?)
            .execute(&self.pool)
            .await?;
        sqlx::query(
            "INSERT INTO failed_logins (kind, subject, at_ms) \
             VALUES ('address', $1, $3), ('name', $2, $3)",
        )
        .bind(address)
        .bind(name)
        .bind(to_i64("failed login time", at_ms)?)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn failed_logins(
        &self,
        address: &str,
        name: &str,
        since_ms: u64,
    ) -> Result<FailedLogins> {
        let rows = sqlx::query(
            "SELECT kind, at_ms FROM failed_logins \
             WHERE ((kind = 'address' AND subject = $1) OR (kind = 'name' AND subject = $2)) \
               AND at_ms >= $3 ORDER BY at_ms",
        )
        .bind(address)
        .bind(name)
        .bind(to_i64("time", since_ms)?)
        .fetch_all(&self.pool)
        .await?;
        codec::failed_logins_from_rows(&rows)
    }

    async fn clear_failed_logins(&self, name: &str) -> Result<()> {
        sqlx::query("DELETE FROM failed_logins WHERE kind = 'name' AND subject = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl RoomLeaseStore for PgStore {
    async fn acquire_room(
        &self,
        session: &str,
        instance: &str,
        address: &str,
        now_ms: u64,
        expires_at_ms: u64,
    ) -> Result<bool> {
        rooms::acquire(
            &self.pool,
            session,
            instance,
            address,
            now_ms,
            expires_at_ms,
        )
        .await
    }

    async fn renew_rooms(&self, instance: &str, expires_at_ms: u64) -> Result<Vec<String>> {
        rooms::renew(&self.pool, instance, expires_at_ms).await
    }

    async fn release_room(&self, session: &str, instance: &str) -> Result<bool> {
        rooms::release(&self.pool, session, instance).await
    }

    async fn room_owner(&self, session: &str) -> Result<Option<crate::store::RoomLease>> {
        rooms::owner(&self.pool, session).await
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
        rooms::claim_orphans(
            &self.pool,
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

#[async_trait]
impl LobbyStore for PgStore {
    async fn join_lobby(&self, entry: NewWaiter, live_since_ms: u64) -> Result<JoinedLobby> {
        waiting::join(&self.pool, &entry, live_since_ms).await
    }

    async fn lobby_heard(
        &self,
        participant: &str,
        instance: &str,
        conn: u64,
        at_ms: u64,
    ) -> Result<bool> {
        waiting::touch(&self.pool, participant, instance, conn, Some(at_ms)).await
    }

    async fn leave_lobby(&self, participant: &str, instance: &str, conn: u64) -> Result<bool> {
        waiting::touch(&self.pool, participant, instance, conn, None).await
    }

    async fn waiters(&self, study_id: Option<&str>) -> Result<Vec<Waiter>> {
        waiting::waiters(&self.pool, study_id).await
    }

    async fn lobby_presence(
        &self,
        study_id: &str,
        arrived_since_ms: u64,
        live_since_ms: u64,
    ) -> Result<RoleCounts> {
        let mut conn = self.pool.acquire().await?;
        waiting::presence(&mut conn, study_id, arrived_since_ms, live_since_ms).await
    }

    async fn switch_lobby_role(&self, req: RoleSwitch) -> Result<bool> {
        waiting::switch(&self.pool, &req).await
    }

    async fn notify_lobby(&self, notice: &str) -> Result<bool> {
        waiting::notify(&self.pool, notice).await
    }

    async fn listen_lobby(&self) -> Result<Option<mpsc::Receiver<String>>> {
        waiting::listen(&self.pool).await.map(Some)
    }
}

#[async_trait]
impl MetaStore for PgStore {
    async fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar("SELECT value FROM meta WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn meta_increment(&self, key: &str) -> Result<i64> {
        // One statement: the row lock of the conflicting row serialises concurrent calls, from
        // any instance. A value that is not an integer fails the cast and changes nothing.
        let value: String = sqlx::query_scalar(
            "INSERT INTO meta (key, value) VALUES ($1, '1') \
             ON CONFLICT (key) DO UPDATE SET value = (meta.value::bigint + 1)::text \
             RETURNING value",
        )
        .bind(key)
        .fetch_one(&self.pool)
        .await?;
        value.parse().map_err(|e| StoreError::Corrupt {
            what: "meta counter",
            detail: format!("{key:?} holds {value:?}, not an integer ({e})"),
        })
    }

    async fn meta_swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool> {
        // One statement each: the insert's unique key, or the update's row lock and its
        // re-checked condition, let exactly one of concurrent swaps from any instance win.
        let done =
            match expected {
                None => sqlx::query(
                    "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                )
                .bind(key)
                .bind(new)
                .execute(&self.pool)
                .await?,
                Some(old) => {
                    sqlx::query("UPDATE meta SET value = $2 WHERE key = $1 AND value = $3")
                        .bind(key)
                        .bind(new)
                        .bind(old)
                        .execute(&self.pool)
                        .await?
                }
            };
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl Store for PgStore {
    async fn close(&self) {
        {
            let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
            if *closed {
                return;
            }
            *closed = true;
        }
        let (reply, done) = oneshot::channel();
        if self.appends.send(Msg::Close(reply)).await.is_ok() {
            let _ = done.await;
        }
        self.pool.close().await;
    }
}
