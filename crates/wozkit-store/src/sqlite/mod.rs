//! The embedded backend: one SQLite file in WAL mode, `DATA_DIR/wozkit.sqlite3`. Reads go to a
//! small pool of connections, which WAL lets run alongside the writer; every write goes through
//! the single writer task in `writer.rs`, which group-commits.
//!
//! Durability: by default ([`Synchronous::Full`]) no request is answered before the WAL that
//! holds its commit has been fsynced, so an answered request survives power loss as well as the
//! process being killed. The fsync runs on a thread of its own after the commit, while the
//! writer applies the next batch, and one fsync covers every batch committed before it began
//! (see `writer.rs`), which keeps it affordable.
//! [`Synchronous::Normal`] skips the fsync on commit: still safe against SIGKILL (the WAL frames
//! are in the OS page cache and the next open replays them) but the last commits can be lost if
//! the machine itself loses power. The choice is [`SqliteOptions::synchronous`]; both are covered
//! by the SIGKILL test in `tests/crash.rs`.
//!
//! Checkpoints (copying WAL frames into the database file) run every 500 ms on a connection of
//! their own, so that I/O stays off the writer's path.
//!
//! One writing process per data directory: the writer's in-memory `seq` counters would be wrong
//! if another process inserted events, so `open` takes an exclusive lock on
//! `wozkit.sqlite3.lock` beside the database.
//!
//! Reading beside a writer: [`SqliteStore::open_snapshot`] takes no lock and starts no writer.
//! It reads through one read-only connection that holds a single read transaction from the
//! moment it opens, so every query sees the same committed state (WAL keeps that snapshot
//! readable while the server goes on committing). That is what `export`, `report` and
//! `payments` use, so a researcher can take data out of a running study. Every write on such a
//! store fails with [`StoreError::ReadOnly`]. While a snapshot is open the server's checkpoints
//! cannot recycle the WAL past it, so the WAL file grows until the snapshot closes.

mod accounts;
mod leases;
mod ops;
#[cfg(test)]
mod pacing_tests;
mod rooms;
mod waiting;
mod writer;

use crate::store::{
    AccountStore, ClaimStore, EventStore, LobbyStore, MetaStore, ParticipantStore, RoomLeaseStore,
    SessionStore,
};
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, ConnectOptions, SqliteConnection};
use tokio::sync::{mpsc, oneshot};
use wozkit_core::event::{EndReason, Event};

use self::ops::Apply;
use self::writer::{Msg, Request};
use crate::codec::{self, to_i64};
use crate::error::{Result, StoreError};
use crate::model::{
    Account, ClaimRequest, EvalItem, EventCursor, FailedLogins, ItemCount, Lease, LiveLogin,
    NewAccount, NewEvent, NewLogin, NewParticipant, NewSession, Participant, ParticipantPatch,
    Platform, SessionFilter, SessionKind, SessionRecord, SubmitOutcome,
};
use crate::store::{JoinedLobby, NewWaiter, RoleCounts, RoleSwitch, Store, Waiter};

/// The database file's name inside a data directory.
pub const DB_FILE: &str = "wozkit.sqlite3";

/// How often committed WAL frames are copied into the database file (skipped while nothing
/// was committed). Often, so each copy is small: see [`SqliteOptions::checkpoint_every`].
const CHECKPOINT_EVERY: Duration = Duration::from_millis(20);

/// When a commit is flushed to the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync after every (group) commit, before any of its requests is answered: survives
    /// process kill and power loss.
    #[default]
    Full,
    /// No fsync on commit: survives process kill; power loss may lose the last commits.
    Normal,
}

/// Tuning for [`SqliteStore::open_with`]; the defaults suit a server.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
    /// Most write requests committed in one transaction.
    pub max_batch: usize,
    /// Commit pacing under load: when write requests were queued while a commit ran, the next
    /// commit starts no sooner than this after the previous one began (sooner only if
    /// `max_batch` requests are already queued). A request that finds the writer idle is
    /// committed at once, so pacing adds nothing to the latency of a lone write. Under load it
    /// trades up to this much acknowledgement latency for fewer, larger commits, each with the
    /// fixed costs of a commit (the fsync, SQLite's page-cache truncation, interior b-tree pages
    /// written once for many rows) shared by more requests: less CPU and fewer fsyncs per write.
    /// `Duration::ZERO` commits whatever is queued as soon as the previous commit ends.
    pub commit_pace: Duration,
    /// The writer connection's page cache, in KiB (SQLite's `cache_size`). Pages are allocated
    /// as they are first used, up to this bound, and the writer touches new pages all the time
    /// (every append lands on its session's last leaf, and leaves split), so under load the
    /// cache fills to the bound within a minute and all of it counts in the process's resident
    /// memory. Bigger is not cheaper: while the database is smaller than 1 GiB, SQLite's
    /// `balance_nonroot` swaps page numbers through the pending-byte page (page 262,145 with
    /// 4 KiB pages), which makes the end of the next transaction scan the whole page-cache hash
    /// table (`pcache1TruncateUnsafe`), a cost proportional to the pages cached, paid on most
    /// commits under load. A miss only costs a read from the WAL or the OS's file cache. The
    /// default, 8 MiB, keeps the interior pages and the most recently used leaves; with 5,000
    /// live sessions it spent less writer CPU per append than 32 or 64 MiB, and the same as
    /// 16 MiB (13,500 events/s: 34–37 against 34–43 µs per event, p99 8.9 against 8.3–9.4 ms)
    /// with 8 MiB less resident (0.8 KiB per participant at 10,000).
    pub cache_kib: u32,
    /// Page size of a database file created now (SQLite's `page_size`; an existing file keeps
    /// its own).
    pub page_size: u32,
    /// How often committed WAL frames are copied into the database file (on a connection of
    /// their own, off the writer's path; a tick with no commit since the last copy does
    /// nothing). Small and frequent copies keep the tail of commit latency short: each copy
    /// ends with an fsync of the database file, and the next commit's fsync of the WAL waits
    /// on the same disk (on ext4, the same journal). With 5,000 sessions appending 13,500
    /// events/s (`cargo bench -p wozkit-store --bench append -- --rate 2.7`), a copy every
    /// 500 ms gave p99 71 ms per append, every 100 ms 46–55 ms, every 20 ms 10.5 ms, for
    /// about 1–4 µs more CPU per event.
    pub checkpoint_every: Duration,
    /// Write requests that may wait for the writer before senders are held back.
    pub queue: usize,
    /// Read connections.
    pub readers: u32,
    /// How long `open` waits for a previous store on the same file to release it.
    pub lock_wait: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            max_batch: 1024,
            commit_pace: Duration::from_millis(2),
            cache_kib: 8 * 1024,
            page_size: 4096,
            checkpoint_every: CHECKPOINT_EVERY,
            queue: 8192,
            readers: 4,
            lock_wait: Duration::from_secs(5),
        }
    }
}

/// The SQLite store. Cheap to share behind an `Arc`; dropping the last handle lets the writer
/// finish what is queued and stop, and [`Store::close`] waits for that.
pub struct SqliteStore {
    /// Read-only connections; WAL gives each read a consistent snapshot.
    reads: SqlitePool,
    /// The writer's queue. Bounded, so a burst beyond the disk's pace slows callers down
    /// instead of growing memory without limit. `None` for a read-only snapshot.
    writes: Option<mpsc::Sender<Msg>>,
    /// Lets `close` be called through a shared reference (e.g. on `Arc<dyn Store>`) and more
    /// than once; a std mutex because it is never held across an await.
    closed: Mutex<bool>,
    /// Opened beside the process holding the data directory: only [`Apply::SHARED`] writes.
    shared: bool,
    /// Group commits made by the writer.
    commits: Arc<AtomicU64>,
}

impl SqliteStore {
    /// Opens (creating if needed) `wozkit.sqlite3` in the data directory `dir`.
    pub async fn open_dir(dir: impl AsRef<Path>) -> Result<SqliteStore> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        SqliteStore::open_with(dir.join(DB_FILE), SqliteOptions::default()).await
    }

    /// Opens (creating if needed) the database file `path` and brings its schema up to date.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        let dir_lock = lock_file(&path, options.lock_wait).await?;
        let base = SqliteConnectOptions::new()
            .filename(&path)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5));
        let mut conn: SqliteConnection = base
            .clone()
            .create_if_missing(true)
            .page_size(options.page_size)
            // See `SqliteOptions::cache_kib` for why the writer's cache is small.
            .pragma("cache_size", format!("-{}", options.cache_kib.max(64)))
            .pragma("temp_store", "memory")
            // Checkpoints normally run on their own connection (see `writer::checkpoints`);
            // the writer checkpoints itself only if the WAL grows past ~40 MB regardless.
            .pragma("wal_autocheckpoint", "10000")
            // FULL is kept by the writer's sync thread, after the commit and off the writer's
            // path (see `writer`'s module notes): the connection itself never fsyncs at commit.
            .synchronous(SqliteSynchronous::Normal)
            .connect()
            .await?;
        crate::migrations::sqlite().run(&mut conn).await?;
        let reads = SqlitePoolOptions::new()
            .max_connections(options.readers.max(1))
            .connect_with(base.clone().read_only(true))
            .await?;
        let checkpoint_conn: SqliteConnection = base.connect().await?;
        let (stop_checkpoints, stop) = oneshot::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let checkpoints = tokio::spawn(writer::checkpoints(
            checkpoint_conn,
            options.checkpoint_every,
            Arc::clone(&commits),
            stop,
        ));
        let (writes, inbox) = mpsc::channel(options.queue.max(1));
        let syncer = match options.synchronous {
            Synchronous::Full => {
                let mut wal = path.clone().into_os_string();
                wal.push("-wal");
                let syncer =
                    writer::Syncer::start(wal.into()).map_err(|source| StoreError::Io {
                        path: path.display().to_string(),
                        source,
                    })?;
                Some(syncer)
            }
            Synchronous::Normal => None,
        };
        let grouping = writer::Grouping {
            max_batch: options.max_batch,
            pace: options.commit_pace,
            commits: Arc::clone(&commits),
            syncer,
        };
        tokio::spawn(writer::run(
            conn,
            inbox,
            grouping,
            (stop_checkpoints, checkpoints),
            Some(dir_lock),
        ));
        Ok(SqliteStore {
            reads,
            writes: Some(writes),
            closed: Mutex::new(false),
            shared: false,
            commits,
        })
    }

    /// Opens the database file `path` beside the process that holds its data directory (a
    /// running server), without its lock, for account administration: it reads everything,
    /// but writes only researcher accounts, logins and failed logins (rows no process keeps in
    /// memory); every other write fails with [`StoreError::ReadOnly`]. SQLite's own locking
    /// (WAL, a busy timeout) orders its writes with the server's. The file must exist with this
    /// build's schema; nothing is created or migrated.
    pub async fn open_shared(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(StoreError::Location {
                location: path.display().to_string(),
                reason: "no wozkit database there".to_owned(),
            });
        }
        let base = SqliteConnectOptions::new()
            .filename(&path)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        let reads = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone().read_only(true))
            .await?;
        check_schema(&reads, &path).await?;
        let conn: SqliteConnection = base.clone().connect().await?;
        let checkpoint_conn: SqliteConnection = base.connect().await?;
        let (stop_checkpoints, stop) = oneshot::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let checkpoints = tokio::spawn(writer::checkpoints(
            checkpoint_conn,
            CHECKPOINT_EVERY,
            Arc::clone(&commits),
            stop,
        ));
        let (writes, inbox) = mpsc::channel(64);
        let grouping = writer::Grouping {
            max_batch: 16,
            pace: Duration::ZERO,
            commits: Arc::clone(&commits),
            // This connection keeps sqlx's default, `synchronous = FULL`: each commit is synced
            // by SQLite itself (account writes are rare).
            syncer: None,
        };
        tokio::spawn(writer::run(
            conn,
            inbox,
            grouping,
            (stop_checkpoints, checkpoints),
            None,
        ));
        Ok(SqliteStore {
            reads,
            writes: Some(writes),
            closed: Mutex::new(false),
            shared: true,
            commits,
        })
    }

    /// Opens the database file `path` read-only, as one consistent snapshot, without taking the
    /// data directory's lock: safe beside a running server (see the module documentation).
    /// The file must exist and have this build's schema; nothing is created or migrated.
    pub async fn open_snapshot(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(StoreError::Location {
                location: path.display().to_string(),
                reason: "no wozkit database there (nothing was stored in this data directory yet)"
                    .to_owned(),
            });
        }
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .read_only(true)
            .busy_timeout(Duration::from_secs(5));
        // One connection, never recycled, so the read transaction begun on it below spans every
        // query made through this store.
        let reads = SqlitePoolOptions::new()
            .min_connections(0)
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::raw_sql("BEGIN DEFERRED").execute(&mut *conn).await?;
                    // A deferred transaction takes its snapshot at its first read.
                    sqlx::query("SELECT COUNT(*) FROM sqlite_master")
                        .fetch_one(&mut *conn)
                        .await?;
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        if let Err(e) = check_schema(&reads, &path).await {
            reads.close().await;
            return Err(e);
        }
        Ok(SqliteStore {
            reads,
            writes: None,
            closed: Mutex::new(false),
            shared: false,
            commits: Arc::default(),
        })
    }

    /// Group commits the writer has made since the store was opened (each holds one or more
    /// write requests; 0 for a snapshot). Write requests divided by commits is the group
    /// commit's batch size.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Write requests sent and not yet taken by the writer.
    #[cfg(test)]
    fn queued_writes(&self) -> usize {
        self.writes
            .as_ref()
            .map_or(0, |writes| writes.max_capacity() - writes.capacity())
    }

    /// Lets the database file grow by at most `headroom` more pages (`None`: as far as the disk
    /// allows again); returns the cap now in force, in pages. Past it every write fails as on a
    /// full disk (SQLite's `SQLITE_FULL`, "database or disk is full"), which is how the tests
    /// make a disk fill up without a small filesystem to fill. The cap belongs to this open
    /// store (it is a setting of the writer's connection), not to the file.
    pub async fn cap_pages(&self, headroom: Option<u64>) -> Result<u64> {
        self.write(ops::CapPages { headroom }).await
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
        let rows = codec::encode_events(&events)?;
        let first = self
            .write(ops::AppendEvents {
                session: session.to_owned(),
                rows,
                after,
            })
            .await?;
        Ok(codec::stored_events(session, first, events))
    }

    /// Sends a write request to the writer and waits for its commit.
    async fn write<A: Apply>(&self, action: A) -> Result<A::Output> {
        let writes = self.writes.as_ref().ok_or(StoreError::ReadOnly)?;
        if self.shared && !A::SHARED {
            return Err(StoreError::ReadOnly);
        }
        let (reply, answer) = oneshot::channel();
        writes
            .send(Msg::Write(Request::boxed(action, reply)))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
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
        match query.fetch_optional(&self.reads).await? {
            Some(row) => Ok(Some(codec::participant_from_row(&row)?)),
            None => Ok(None),
        }
    }
}

/// Fails with [`StoreError::SchemaVersion`] unless the database has this build's schema.
async fn check_schema(reads: &SqlitePool, path: &Path) -> Result<()> {
    let expected = crate::migrations::latest(&crate::migrations::sqlite());
    let migrated: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(reads)
    .await?;
    let found: i64 = if migrated == 0 {
        0
    } else {
        sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(reads)
            .await?
    };
    if found != expected {
        return Err(StoreError::SchemaVersion {
            path: path.display().to_string(),
            found,
            expected,
        });
    }
    Ok(())
}

/// Takes the lock beside the database, waiting up to `wait` for a store being closed.
async fn lock_file(db: &Path, wait: Duration) -> Result<File> {
    let mut lock_path: PathBuf = db.to_path_buf().into_os_string().into();
    lock_path.as_mut_os_string().push(".lock");
    let io_err = |source| StoreError::Io {
        path: lock_path.display().to_string(),
        source,
    };
    if let Some(parent) = lock_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_err)?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err)?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::Locked(db.display().to_string()));
            }
            Err(TryLockError::Error(source)) => return Err(io_err(source)),
        }
    }
}

/// A session query: the `sessions` columns plus `last_seq`, then `$tail` (WHERE, ORDER BY).
macro_rules! select_sessions {
    ($tail:literal) => {
        concat!(
            "SELECT s.id, s.study_id, s.study_version, s.seed, s.created_at_ms, ",
            "s.ended_at_ms, s.end_reason, s.kind, ",
            "COALESCE((SELECT MAX(seq) FROM events e WHERE e.session_id = s.id), 0) AS last_seq ",
            "FROM sessions s ",
            $tail
        )
    };
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.write(ops::CreateSession {
            new,
            kind: SessionKind::Dialogue,
        })
        .await
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>> {
        let row = sqlx::query(select_sessions!("WHERE s.id = ?1"))
            .bind(id)
            .fetch_optional(&self.reads)
            .await?;
        row.map(|r| codec::session_from_row(&r)).transpose()
    }

    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        let rows = sqlx::query(select_sessions!(
            "WHERE (?1 IS NULL OR s.study_id = ?1) \
               AND (?2 IS NULL OR (s.ended_at_ms IS NOT NULL) = ?2) AND s.kind = ?5 \
             ORDER BY s.created_at_ms, s.id LIMIT COALESCE(?3, -1) OFFSET ?4"
        ))
        .bind(filter.study_id.as_deref())
        .bind(filter.ended())
        .bind(filter.limit.map(i64::from))
        .bind(i64::from(filter.offset))
        .bind(filter.kind.as_str())
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(codec::session_from_row).collect()
    }

    async fn count_sessions(&self, filter: &SessionFilter) -> Result<u64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions s WHERE (?1 IS NULL OR s.study_id = ?1) \
               AND (?2 IS NULL OR (s.ended_at_ms IS NOT NULL) = ?2) AND s.kind = ?3",
        )
        .bind(filter.study_id.as_deref())
        .bind(filter.ended())
        .bind(filter.kind.as_str())
        .fetch_one(&self.reads)
        .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn end_session(&self, id: &str, reason: EndReason, at_ms: u64) -> Result<bool> {
        self.write(ops::EndSession {
            id: id.to_owned(),
            reason,
            at_ms,
        })
        .await
    }
}

#[async_trait]
impl EventStore for SqliteStore {
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
        let rows = codec::encode_events(&events)?;
        let first = self
            .write(ops::AppendOnce {
                key: key.to_owned(),
                append: ops::AppendEvents {
                    session: session.to_owned(),
                    rows,
                    after: None,
                },
            })
            .await?;
        Ok(first.map(|first| codec::stored_events(session, first, events)))
    }

    async fn events(&self, session: &str, after_seq: u64) -> Result<Vec<Event>> {
        let rows = sqlx::query(
            "SELECT session_id, seq, v, at_ms, actor, payload FROM events \
             WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
        )
        .bind(session)
        .bind(to_i64("seq", after_seq)?)
        .fetch_all(&self.reads)
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
             WHERE (?1 IS NULL OR e.session_id IN (SELECT id FROM sessions WHERE study_id = ?1)) \
               AND (e.session_id, e.seq) > (?2, ?3) \
             ORDER BY e.session_id, e.seq LIMIT ?4",
        )
        .bind(study_id)
        .bind(after_session)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(codec::event_from_row).collect()
    }
}

#[async_trait]
impl ParticipantStore for SqliteStore {
    async fn open_participant_log(&self, new: NewSession) -> Result<SessionRecord> {
        self.write(ops::CreateSession {
            new,
            kind: SessionKind::Participant,
        })
        .await
    }

    async fn create_participant(&self, new: NewParticipant) -> Result<Participant> {
        self.write(ops::CreateParticipant(new)).await
    }

    async fn participant(&self, id: &str) -> Result<Option<Participant>> {
        self.one_participant("SELECT * FROM participants WHERE id = ?1", &[id])
            .await
    }

    async fn participant_by_token_hash(&self, token_hash: &str) -> Result<Option<Participant>> {
        self.one_participant(
            "SELECT * FROM participants WHERE token_hash = ?1",
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
            "SELECT * FROM participants WHERE study_id = ?1 AND platform = ?2 AND worker_id = ?3",
            &[study_id, platform.as_str(), worker_id],
        )
        .await
    }

    async fn participants_in_session(&self, session_id: &str) -> Result<Vec<Participant>> {
        let rows = sqlx::query(
            "SELECT * FROM participants WHERE session_id = ?1 ORDER BY created_at_ms, id",
        )
        .bind(session_id)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(codec::participant_from_row).collect()
    }

    async fn list_participants(&self, study_id: Option<&str>) -> Result<Vec<Participant>> {
        let rows = sqlx::query(
            "SELECT * FROM participants WHERE ?1 IS NULL OR study_id = ?1 \
             ORDER BY created_at_ms, id",
        )
        .bind(study_id)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(codec::participant_from_row).collect()
    }

    async fn update_participant(&self, id: &str, patch: ParticipantPatch) -> Result<Participant> {
        self.write(ops::UpdateParticipant {
            id: id.to_owned(),
            patch,
        })
        .await
    }
}

#[async_trait]
impl ClaimStore for SqliteStore {
    async fn register_items(&self, study_id: &str, items: &[EvalItem]) -> Result<()> {
        let items = items
            .iter()
            .map(|item| Ok((item.clone(), codec::dialogues_json(&item.dialogues)?)))
            .collect::<Result<Vec<_>>>()?;
        self.write(leases::RegisterItems {
            study_id: study_id.to_owned(),
            items,
        })
        .await
    }

    async fn claim(&self, req: ClaimRequest) -> Result<Option<Lease>> {
        self.write(leases::Claim(req)).await
    }

    async fn lease(&self, lease_id: &str) -> Result<Option<Lease>> {
        let sql = format!("SELECT {} FROM leases WHERE id = ?1", leases::LEASE_COLUMNS);
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(lease_id)
            .fetch_optional(&self.reads)
            .await?;
        row.map(|r| codec::lease_from_row(&r)).transpose()
    }

    async fn open_lease(&self, study_id: &str, worker: &str) -> Result<Option<Lease>> {
        let sql = format!(
            "SELECT {} FROM leases WHERE study_id = ?1 AND worker = ?2 AND state = 'leased' \
             ORDER BY claimed_at_ms DESC, id DESC LIMIT 1",
            leases::LEASE_COLUMNS
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(study_id)
            .bind(worker)
            .fetch_optional(&self.reads)
            .await?;
        row.map(|r| codec::lease_from_row(&r)).transpose()
    }

    async fn submit(
        &self,
        lease_id: &str,
        now_ms: u64,
        session: &str,
        events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
    ) -> Result<(SubmitOutcome, Vec<Event>)> {
        let (outcome, first, events) = self
            .write(leases::Submit {
                lease_id: lease_id.to_owned(),
                now_ms,
                session: session.to_owned(),
                events: Some(events),
            })
            .await?;
        Ok((outcome, codec::stored_events(session, first, events)))
    }

    async fn return_lease(&self, lease_id: &str, now_ms: u64) -> Result<bool> {
        self.write(leases::ReturnLease {
            lease_id: lease_id.to_owned(),
            now_ms,
        })
        .await
    }

    async fn leases(&self, study_id: &str) -> Result<Vec<Lease>> {
        let sql = format!(
            "SELECT {} FROM leases WHERE study_id = ?1 ORDER BY claimed_at_ms, id",
            leases::LEASE_COLUMNS
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(study_id)
            .fetch_all(&self.reads)
            .await?;
        rows.iter().map(codec::lease_from_row).collect()
    }

    async fn item_counts(&self, study_id: &str, now_ms: u64) -> Result<Vec<ItemCount>> {
        let rows = sqlx::query(AssertSqlSafe(codec::item_counts_sql("?1", "?2")))
            .bind(study_id)
            .bind(to_i64("time", now_ms)?)
            .fetch_all(&self.reads)
            .await?;
        rows.iter().map(codec::item_count_from_row).collect()
    }
}

#[async_trait]
impl AccountStore for SqliteStore {
    async fn create_account(&self, new: NewAccount) -> Result<Account> {
        self.write(accounts::CreateAccount(new)).await
    }

    async fn account(&self, id: &str) -> Result<Option<Account>> {
        let row = sqlx::query(AssertSqlSafe(accounts::select_accounts("id = ?1")))
            .bind(id)
            .fetch_optional(&self.reads)
            .await?;
        row.map(|r| codec::account_from_row(&r)).transpose()
    }

    async fn account_by_name(&self, name: &str) -> Result<Option<Account>> {
        let row = sqlx::query(AssertSqlSafe(accounts::select_accounts(
            "name = ?1 AND removed_at_ms IS NULL",
        )))
        .bind(name)
        .fetch_optional(&self.reads)
        .await?;
        row.map(|r| codec::account_from_row(&r)).transpose()
    }

    async fn accounts(&self) -> Result<Vec<Account>> {
        let rows = sqlx::query(AssertSqlSafe(accounts::select_accounts(
            "removed_at_ms IS NULL ORDER BY name",
        )))
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(codec::account_from_row).collect()
    }

    async fn set_account_password(&self, id: &str, password_hash: &str) -> Result<bool> {
        self.write(accounts::SetPassword {
            id: id.to_owned(),
            hash: password_hash.to_owned(),
        })
        .await
    }

    async fn remove_account(&self, id: &str, at_ms: u64) -> Result<bool> {
        self.write(accounts::RemoveAccount {
            id: id.to_owned(),
            at_ms,
        })
        .await
    }

    async fn create_login(&self, login: NewLogin) -> Result<()> {
        self.write(accounts::CreateLogin(login)).await
    }

    async fn login(&self, token_hash: &str, now_ms: u64) -> Result<Option<LiveLogin>> {
        let row = sqlx::query(
            "SELECT a.id, a.name, a.access, a.password_hash, a.created_at_ms, a.removed_at_ms, \
                    l.created_at_ms AS login_created_ms, l.expires_at_ms AS login_expires_ms \
             FROM logins l JOIN accounts a ON a.id = l.account_id \
             WHERE l.token_hash = ?1 AND l.expires_at_ms > ?2 AND a.removed_at_ms IS NULL",
        )
        .bind(token_hash)
        .bind(to_i64("time", now_ms)?)
        .fetch_optional(&self.reads)
        .await?;
        row.map(|r| codec::live_login_from_row(&r)).transpose()
    }

    async fn end_login(&self, token_hash: &str) -> Result<bool> {
        let ended = self
            .write(accounts::EndLogins {
                key: token_hash.to_owned(),
                by_account: false,
            })
            .await?;
        Ok(ended > 0)
    }

    async fn end_logins(&self, account_id: &str) -> Result<u64> {
        self.write(accounts::EndLogins {
            key: account_id.to_owned(),
            by_account: true,
        })
        .await
    }

    async fn record_failed_login(
        &self,
        address: &str,
        name: &str,
        at_ms: u64,
        forget_before_ms: u64,
    ) -> Result<()> {
        self.write(accounts::RecordFailedLogin {
            address: address.to_owned(),
            name: name.to_owned(),
            at_ms,
            forget_before_ms,
        })
        .await
    }

    async fn failed_logins(
        &self,
        address: &str,
        name: &str,
        since_ms: u64,
    ) -> Result<FailedLogins> {
        let rows = sqlx::query(
            "SELECT kind, at_ms FROM failed_logins \
             WHERE ((kind = 'address' AND subject = ?1) OR (kind = 'name' AND subject = ?2)) \
               AND at_ms >= ?3 ORDER BY at_ms",
        )
        .bind(address)
        .bind(name)
        .bind(to_i64("time", since_ms)?)
        .fetch_all(&self.reads)
        .await?;
        codec::failed_logins_from_rows(&rows)
    }

    async fn clear_failed_logins(&self, name: &str) -> Result<()> {
        self.write(accounts::ClearFailedLogins(name.to_owned()))
            .await
    }
}

#[async_trait]
impl RoomLeaseStore for SqliteStore {
    async fn acquire_room(
        &self,
        session: &str,
        instance: &str,
        address: &str,
        now_ms: u64,
        expires_at_ms: u64,
    ) -> Result<bool> {
        self.write(rooms::Acquire {
            session: session.to_owned(),
            instance: instance.to_owned(),
            address: address.to_owned(),
            now_ms,
            expires_at_ms,
        })
        .await
    }

    async fn renew_rooms(&self, instance: &str, expires_at_ms: u64) -> Result<Vec<String>> {
        self.write(rooms::Renew {
            instance: instance.to_owned(),
            expires_at_ms,
        })
        .await
    }

    async fn release_room(&self, session: &str, instance: &str) -> Result<bool> {
        self.write(rooms::Release {
            session: session.to_owned(),
            instance: instance.to_owned(),
        })
        .await
    }

    async fn room_owner(&self, session: &str) -> Result<Option<crate::store::RoomLease>> {
        rooms::owner(&self.reads, session).await
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
        self.write(rooms::ClaimOrphans {
            instance: instance.to_owned(),
            address: address.to_owned(),
            now_ms,
            unowned_before_ms,
            expires_at_ms,
            limit,
        })
        .await
    }
}

#[async_trait]
impl LobbyStore for SqliteStore {
    async fn join_lobby(&self, entry: NewWaiter, live_since_ms: u64) -> Result<JoinedLobby> {
        self.write(waiting::Join {
            entry,
            live_since_ms,
        })
        .await
    }

    async fn lobby_heard(
        &self,
        participant: &str,
        instance: &str,
        conn: u64,
        at_ms: u64,
    ) -> Result<bool> {
        self.write(waiting::Touch {
            participant: participant.to_owned(),
            instance: instance.to_owned(),
            conn,
            heard_at_ms: Some(at_ms),
        })
        .await
    }

    async fn leave_lobby(&self, participant: &str, instance: &str, conn: u64) -> Result<bool> {
        self.write(waiting::Touch {
            participant: participant.to_owned(),
            instance: instance.to_owned(),
            conn,
            heard_at_ms: None,
        })
        .await
    }

    async fn waiters(&self, study_id: Option<&str>) -> Result<Vec<Waiter>> {
        let sql = format!(
            "SELECT {} FROM waiting WHERE (?1 IS NULL OR study_id = ?1) \
             ORDER BY study_id, pair_key, front DESC, since_ms, ord",
            waiting::COLUMNS
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(study_id)
            .fetch_all(&self.reads)
            .await?;
        rows.iter().map(waiting::waiter_from_row).collect()
    }

    async fn lobby_presence(
        &self,
        study_id: &str,
        arrived_since_ms: u64,
        live_since_ms: u64,
    ) -> Result<RoleCounts> {
        let mut conn = self.reads.acquire().await?;
        waiting::presence(&mut conn, study_id, arrived_since_ms, live_since_ms).await?
    }

    async fn switch_lobby_role(&self, req: RoleSwitch) -> Result<bool> {
        self.write(waiting::Switch { req }).await
    }

    async fn notify_lobby(&self, _notice: &str) -> Result<bool> {
        Ok(false)
    }

    async fn listen_lobby(&self) -> Result<Option<mpsc::Receiver<String>>> {
        Ok(None)
    }
}

#[async_trait]
impl MetaStore for SqliteStore {
    async fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar("SELECT value FROM meta WHERE key = ?1")
            .bind(key)
            .fetch_optional(&self.reads)
            .await?)
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.write(ops::SetMeta {
            key: key.to_owned(),
            value: value.to_owned(),
        })
        .await
    }

    async fn meta_increment(&self, key: &str) -> Result<i64> {
        self.write(ops::IncrementMeta {
            key: key.to_owned(),
        })
        .await
    }

    async fn meta_swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool> {
        self.write(ops::SwapMeta {
            key: key.to_owned(),
            expected: expected.map(str::to_owned),
            new: new.to_owned(),
        })
        .await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn close(&self) {
        {
            let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
            if *closed {
                return;
            }
            *closed = true;
        }
        if let Some(writes) = &self.writes {
            let (reply, done) = oneshot::channel();
            if writes.send(Msg::Close(reply)).await.is_ok() {
                let _ = done.await;
            }
        }
        self.reads.close().await;
    }
}
