//! The SQLite writer: one task owns the only write connection and applies every write request
//! (appends, session and participant changes, settings) in group commits. It waits for a
//! request, takes whatever else is already queued (up to `max_batch`), applies them all in ONE
//! `BEGIN IMMEDIATE` transaction, commits, then answers each request once the commit is on disk
//! (one fsync for the whole batch, or fewer: see "Durability" below). Under load batches grow
//! by themselves, so the fsync cost is shared by many callers; when idle a lone request is
//! committed at once.
//!
//! Pacing: when requests were queued while a commit ran (the writer is under load), the next
//! commit does not start at once but waits until `pace` after the previous one began (unless a
//! full batch is already queued). Fewer, larger commits share the fixed costs of a commit (the
//! fsync, the WAL header, the page-cache truncation SQLite does on every commit, interior b-tree
//! pages written once for many rows). When nothing was queued at the end of a commit the writer
//! is idle, and whatever arrives next is committed at once: pacing never delays a lone request.
//!
//! A batch made only of event appends (the live rooms' writes, by far the most common) needs no
//! statement before its rows are inserted: each session's last `seq` is known (or read, which the
//! single writer may do outside a transaction). Such a batch sends `BEGIN IMMEDIATE`, its inserts
//! and `COMMIT` to SQLite's thread as one multi-statement query: one round trip (two thread
//! wake-ups) per batch instead of three.
//!
//! Durability, off the writer's path: with `synchronous = FULL` SQLite would fsync the WAL inside
//! every `COMMIT`, and the writer could not start the next batch until the disk answered, so the
//! ceiling of the group commit was the sum of SQLite's work and the fsync. Instead the writer's
//! connection commits with `synchronous = NORMAL` (no fsync at commit; still safe from
//! corruption in WAL mode) and hands each committed batch to the syncer thread ([`Syncer`]),
//! which fsyncs the WAL file once for every batch that reached it meanwhile and only then answers
//! their requests, while the writer already applies the next batch. The promise is unchanged: an
//! answered write is on disk. What changes is visibility: a reader may see a commit up to one
//! fsync before its writer is answered (were the machine to lose power in between, that commit
//! would be gone with nobody told it was kept).
//!
//! Owning the only write connection is also what makes `seq` assignment simple: the writer keeps
//! each session's last `seq` in memory (read lazily from `MAX(seq)`), and nothing else can insert
//! events behind its back (the data directory lock keeps out other processes).

use std::any::TypeId;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use sqlx::{AssertSqlSafe, Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant, MissedTickBehavior};
use wozkit_core::event::EVENT_SCHEMA_VERSION;

use super::ops::{AppendEvents, Apply};
use crate::codec::EncodedEvent;
use crate::error::{Result, StoreError};

/// What the store handle sends to the writer.
pub(super) enum Msg {
    Write(Box<dyn WriteOp>),
    /// Commit everything sent before, then stop; the sender is answered once the connection is
    /// closed and the data directory unlocked.
    Close(oneshot::Sender<()>),
}

/// A write request with its reply channel, type-erased so one queue carries every kind.
#[async_trait]
pub(super) trait WriteOp: Send {
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<(), sqlx::Error>;
    /// Replaces the outcome with `err`; called when the batch could not be committed.
    fn failed(&mut self, err: StoreError);
    /// Sends the outcome; called once the batch's commit ended (an answer promises durability:
    /// the outcome of a request whose batch failed is the batch's error).
    fn answer(self: Box<Self>);
    /// Whether the request is a plain append of events, which only reads before the batch's
    /// rows are inserted (see the module notes).
    fn appends_only(&self) -> bool {
        false
    }
}

/// A request and where its answer goes.
pub(super) struct Request<A: Apply> {
    action: A,
    reply: oneshot::Sender<Result<A::Output>>,
    /// Set by `apply` (or `failed`), sent by `answer` (only after the commit: an answer promises
    /// durability).
    outcome: Option<Result<A::Output>>,
}

impl<A: Apply> Request<A> {
    pub(super) fn boxed(action: A, reply: oneshot::Sender<Result<A::Output>>) -> Box<dyn WriteOp> {
        Box::new(Request {
            action,
            reply,
            outcome: None,
        })
    }
}

#[async_trait]
impl<A: Apply> WriteOp for Request<A> {
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<(), sqlx::Error> {
        self.outcome = Some(self.action.apply(conn, state).await?);
        Ok(())
    }

    fn failed(&mut self, err: StoreError) {
        self.outcome = Some(Err(err));
    }

    fn answer(self: Box<Self>) {
        // `apply` or `failed` always ran before `answer`; `Closed` only guards against a logic
        // slip.
        let outcome = self.outcome.unwrap_or(Err(StoreError::Closed));
        // The caller may have given up waiting; the write stands regardless.
        let _ = self.reply.send(outcome);
    }

    fn appends_only(&self) -> bool {
        TypeId::of::<A>() == TypeId::of::<AppendEvents>()
    }
}

/// What the writer carries from one request to the next: each session's last `seq` (as
/// committed, and as advanced by the open batch) and the batch's event rows, inserted together
/// just before the commit.
#[derive(Default)]
pub(super) struct BatchState {
    /// Last `seq` per session as committed. Dropped for ended sessions to bound memory.
    committed: HashMap<String, u64>,
    /// Advances made by the batch in progress; merged on commit, discarded on rollback.
    batch: HashMap<String, u64>,
    /// Sessions ended in this batch, forgotten after the commit.
    ended: Vec<String>,
    /// Event rows of the batch, numbered, waiting for the multi-row inserts in `flush_rows`.
    rows: Vec<EventRow>,
}

/// One numbered event waiting to be inserted.
pub(super) struct EventRow {
    pub session: Arc<str>,
    pub seq: i64,
    pub event: EncodedEvent,
}

impl BatchState {
    /// The session's last `seq` (0 for an empty log), or `None` if the session does not exist.
    pub(super) async fn last_seq(
        &mut self,
        conn: &mut SqliteConnection,
        session: &str,
    ) -> Result<Option<u64>, sqlx::Error> {
        if let Some(&last) = self.batch.get(session).or(self.committed.get(session)) {
            return Ok(Some(last));
        }
        let (known, last): (i64, i64) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1), \
                    COALESCE((SELECT MAX(seq) FROM events WHERE session_id = ?1), 0)",
        )
        .bind(session)
        .fetch_one(&mut *conn)
        .await?;
        if known == 0 {
            return Ok(None);
        }
        let last = u64::try_from(last).unwrap_or(0);
        self.batch.insert(session.to_owned(), last);
        Ok(Some(last))
    }

    pub(super) fn advance(&mut self, session: &str, last: u64) {
        self.batch.insert(session.to_owned(), last);
    }

    /// Queues numbered rows for the insert that precedes the commit.
    pub(super) fn push_rows(&mut self, session: &str, first_seq: i64, events: Vec<EncodedEvent>) {
        let session: Arc<str> = Arc::from(session);
        self.rows
            .extend((first_seq..).zip(events).map(|(seq, event)| EventRow {
                session: Arc::clone(&session),
                seq,
                event,
            }));
    }

    pub(super) fn forget_after_commit(&mut self, session: &str) {
        self.ended.push(session.to_owned());
    }

    fn commit(&mut self) {
        self.committed.extend(self.batch.drain());
        for session in self.ended.drain(..) {
            self.committed.remove(&session);
        }
    }

    fn rollback(&mut self) {
        self.batch.clear();
        self.ended.clear();
        self.rows.clear();
    }
}

/// Copies committed WAL frames into the database file every `period` until `stop` fires. On
/// its own connection so the copying (and its fsync of the database file) stays off the
/// writer's path: PASSIVE checkpoints never block the writer or the readers. A tick is skipped
/// while `commits` (the writer's count) has not moved since a checkpoint that copied every
/// frame; a failed or partial checkpoint (a reader still on old frames) is tried again on the
/// next tick.
pub(super) async fn checkpoints(
    mut conn: SqliteConnection,
    period: Duration,
    commits: Arc<AtomicU64>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The commit count when a checkpoint last copied everything; `None` before the first.
    let mut copied_at: Option<u64> = None;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = ticks.tick() => {
                let now = commits.load(Ordering::Relaxed);
                if copied_at == Some(now) {
                    continue;
                }
                // (busy, frames in the WAL, frames copied): all copied when not busy and equal.
                let done = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
                    .fetch_one(&mut conn)
                    .await
                    .is_ok_and(|(busy, log, copied)| busy == 0 && log == copied);
                copied_at = done.then_some(now);
            }
        }
    }
    let _ = conn.close().await;
}

/// How the writer groups requests into commits (see the module notes).
pub(super) struct Grouping {
    /// Most requests in one commit.
    pub max_batch: usize,
    /// Under load, the least time from the start of one commit to the start of the next.
    pub pace: Duration,
    /// Counts the group commits made (successful or not), for [`super::SqliteStore::commits`].
    pub commits: Arc<AtomicU64>,
    /// Answers after the WAL's fsync (see the module notes); `None` answers after the commit
    /// itself (the connection's own `synchronous` setting decides what that promises).
    pub syncer: Option<Syncer>,
}

/// A committed batch whose requests wait for the WAL's fsync.
type Committed = Vec<Box<dyn WriteOp>>;

/// Batches committed and not yet synced that may wait for the syncer before the writer waits.
const SYNC_QUEUE: usize = 64;

/// Answers committed batches once the WAL that holds them is on disk, from a thread of its own
/// (an fsync blocks). One fsync covers every batch that reached the thread before it began, so
/// when the disk is slower than the commits, syncs grow by themselves as commits do.
pub(super) struct Syncer {
    batches: mpsc::Sender<Committed>,
    /// Fires when the thread has answered everything and stopped.
    done: oneshot::Receiver<()>,
}

impl Syncer {
    /// Starts the thread that fsyncs `wal`, the writer connection's WAL file.
    pub(super) fn start(wal: PathBuf) -> std::io::Result<Syncer> {
        let (batches, mut inbox) = mpsc::channel::<Committed>(SYNC_QUEUE);
        let (finished, done) = oneshot::channel();
        std::thread::Builder::new()
            .name("wozkit-wal-sync".to_owned())
            .spawn(move || {
                // Opened at the first sync: the WAL exists once the writer's connection wrote
                // (the migrations did), and lives as long as that connection.
                let mut file: Option<File> = None;
                let mut group: Vec<Committed> = vec![];
                while let Some(first) = inbox.blocking_recv() {
                    group.push(first);
                    while let Ok(more) = inbox.try_recv() {
                        group.push(more);
                    }
                    let synced = sync(&wal, &mut file);
                    for batch in group.drain(..) {
                        answer(batch, synced.as_ref().err());
                    }
                }
                let _ = finished.send(());
            })?;
        Ok(Syncer { batches, done })
    }

    /// Answers every batch handed over so far, then stops the thread.
    async fn finish(self) {
        drop(self.batches);
        let _ = self.done.await;
    }
}

/// fsyncs the WAL file, opening it on first use (a failed open is tried again next time).
fn sync(wal: &Path, file: &mut Option<File>) -> Result<(), Arc<sqlx::Error>> {
    let result = match file {
        Some(open) => open.sync_data(),
        None => File::open(wal).and_then(|open| {
            let synced = open.sync_data();
            *file = Some(open);
            synced
        }),
    };
    result.map_err(|err| {
        let what = format!("fsync of {}: {err}", wal.display());
        Arc::new(sqlx::Error::Io(std::io::Error::new(err.kind(), what)))
    })
}

/// Answers a batch's requests; `failed` replaces their outcomes with a failed sync's error (the
/// batch is committed but not known to be on disk, so nothing of it may be promised).
fn answer(batch: Committed, failed: Option<&Arc<sqlx::Error>>) {
    for mut op in batch {
        if let Some(err) = failed {
            op.failed(StoreError::Database(Arc::clone(err)));
        }
        op.answer();
    }
}

/// Runs until every store handle is gone or a [`Msg::Close`] arrives, then stops the
/// checkpoint task and releases the data directory.
pub(super) async fn run(
    mut conn: SqliteConnection,
    mut inbox: mpsc::Receiver<Msg>,
    grouping: Grouping,
    checkpoints: (oneshot::Sender<()>, JoinHandle<()>),
    dir_lock: Option<File>,
) {
    let max_batch = grouping.max_batch.max(1);
    let mut syncer = grouping.syncer;
    let mut state = BatchState::default();
    let mut batch: Vec<Box<dyn WriteOp>> = Vec::with_capacity(max_batch);
    let mut close_reply = None;
    // When the previous commit began, if requests were queued by the time it ended.
    let mut busy_since: Option<Instant> = None;
    while close_reply.is_none() {
        let mut first = None;
        if let Some(began) = busy_since.take() {
            let due = began + grouping.pace;
            if inbox.len() < max_batch && Instant::now() < due {
                tokio::time::sleep_until(due).await;
            }
            first = inbox.try_recv().ok();
        }
        let first = match first {
            Some(msg) => msg,
            None => match inbox.recv().await {
                Some(msg) => msg,
                None => break,
            },
        };
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Write(op) => batch.push(op),
                Msg::Close(reply) => {
                    close_reply = Some(reply);
                    break;
                }
            }
            if batch.len() < max_batch {
                next = inbox.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            let began = Instant::now();
            commit_batch(&mut conn, &mut state, &mut batch).await;
            grouping.commits.fetch_add(1, Ordering::Relaxed);
            // Checked before the answers go out: a caller waiting for one of them cannot have
            // sent its next request yet, so a queue found empty here means the writer is idle.
            if !inbox.is_empty() {
                busy_since = Some(began);
            }
            hand_over(syncer.as_ref(), &mut batch, max_batch).await;
        }
    }
    if let Some(syncer) = syncer.take() {
        syncer.finish().await;
    }
    // Requests still queued behind a close are refused: their senders see `Closed`.
    inbox.close();
    let _ = conn.close().await;
    let (stop_checkpoints, checkpoint_task) = checkpoints;
    let _ = stop_checkpoints.send(());
    let _ = checkpoint_task.await;
    drop(dir_lock);
    if let Some(reply) = close_reply {
        let _ = reply.send(());
    }
}

/// Passes a committed batch on to be answered: to the syncer, which answers once it is on
/// disk, or (without one) answers it at once. Leaves `batch` empty.
async fn hand_over(syncer: Option<&Syncer>, batch: &mut Committed, max_batch: usize) {
    match syncer {
        Some(syncer) => {
            let committed = std::mem::replace(batch, Vec::with_capacity(max_batch));
            if let Err(mpsc::error::SendError(committed)) = syncer.batches.send(committed).await {
                // The thread is gone (it panicked): nothing can be promised durable.
                let err = Arc::new(sqlx::Error::WorkerCrashed);
                answer(committed, Some(&err));
            }
        }
        None => answer(std::mem::take(batch), None),
    }
}

/// Applies and commits one batch, leaving each request's outcome (or the batch's error) in it
/// for [`WriteOp::answer`].
async fn commit_batch(
    conn: &mut SqliteConnection,
    state: &mut BatchState,
    batch: &mut [Box<dyn WriteOp>],
) {
    let applied = if batch.iter().all(|op| op.appends_only()) {
        apply_appends(conn, state, batch).await
    } else {
        apply_all(conn, state, batch).await
    };
    match applied {
        Ok(()) => state.commit(),
        Err(err) => {
            state.rollback();
            let err = Arc::new(err);
            for op in batch.iter_mut() {
                op.failed(StoreError::Database(Arc::clone(&err)));
            }
        }
    }
}

async fn apply_all(
    conn: &mut SqliteConnection,
    state: &mut BatchState,
    batch: &mut [Box<dyn WriteOp>],
) -> Result<(), sqlx::Error> {
    // IMMEDIATE takes the write lock up front, so the batch never fails half-way on a lock
    // upgrade. Plain statements rather than sqlx's `Transaction`: after some errors (a full
    // disk, an I/O error) SQLite has already rolled the transaction back itself, so the
    // ROLLBACK that follows fails; sqlx would then count the transaction as still open and
    // refuse every later `BEGIN` on this connection, poisoning the writer.
    sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
    let applied = async {
        for op in batch.iter_mut() {
            op.apply(conn, state).await?;
        }
        flush_rows(conn, &mut state.rows, Wrap::Inside).await?;
        sqlx::query("COMMIT").execute(&mut *conn).await?;
        Ok(())
    }
    .await;
    if applied.is_err() {
        abandon(conn).await;
    }
    applied
}

/// Rolls back whatever the failed batch left open. The transaction may be gone already (SQLite
/// rolls back by itself on a full disk, an I/O error or a lost lock); the ROLLBACK then fails
/// harmlessly, and the next batch begins on a clean connection either way.
async fn abandon(conn: &mut SqliteConnection) {
    let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
}

/// A batch of event appends only: the requests run outside any transaction (they at most read
/// a session's last `seq`; this writer is the only one, so what it reads cannot change behind
/// it), then the rows go in with `BEGIN IMMEDIATE` and `COMMIT` in the same queries. The
/// answers still wait for the commit, so every answered append is durable.
async fn apply_appends(
    conn: &mut SqliteConnection,
    state: &mut BatchState,
    batch: &mut [Box<dyn WriteOp>],
) -> Result<(), sqlx::Error> {
    for op in batch.iter_mut() {
        op.apply(conn, state).await?;
    }
    if state.rows.is_empty() {
        return Ok(());
    }
    if let Err(err) = flush_rows(conn, &mut state.rows, Wrap::Transaction).await {
        // The transaction is open if the failure came after `BEGIN` (and SQLite did not roll
        // it back itself).
        abandon(conn).await;
        return Err(err);
    }
    Ok(())
}

/// Rows per multi-row INSERT, largest first. Every statement is prepared once and cached by
/// the connection; any count of rows is covered with at most a few statements of each size,
/// instead of one statement (and one round trip to SQLite's thread) per event.
const CHUNK_SIZES: [usize; 4] = [64, 16, 4, 1];

/// How the inserts of [`flush_rows`] relate to the transaction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wrap {
    /// Inside a transaction the caller opened and commits.
    Inside,
    /// The first insert opens the transaction (`BEGIN IMMEDIATE; INSERT …`) and the last one
    /// commits it (`INSERT …; COMMIT`).
    Transaction,
}

/// The multi-row INSERT of `rows` rows (one of [`CHUNK_SIZES`]), preceded by `BEGIN IMMEDIATE`
/// and followed by `COMMIT` as asked.
fn insert_sql(rows: usize, begin: bool, commit: bool) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        let mut all = vec![];
        for &n in &CHUNK_SIZES {
            let values = vec!["(?, ?, ?, ?, ?, ?)"; n].join(", ");
            let insert = format!(
                "INSERT INTO events (session_id, seq, v, at_ms, actor, payload) VALUES {values}"
            );
            for (b, c) in [(false, false), (false, true), (true, false), (true, true)] {
                let begin = if b { "BEGIN IMMEDIATE; " } else { "" };
                let commit = if c { "; COMMIT" } else { "" };
                all.push(format!("{begin}{insert}{commit}"));
            }
        }
        all
    });
    let size = CHUNK_SIZES
        .iter()
        .position(|&n| n == rows)
        .unwrap_or(CHUNK_SIZES.len() - 1);
    all[size * 4 + usize::from(begin) * 2 + usize::from(commit)].as_str()
}

async fn flush_rows(
    conn: &mut SqliteConnection,
    rows: &mut Vec<EventRow>,
    wrap: Wrap,
) -> Result<(), sqlx::Error> {
    let mut rest = &rows[..];
    let mut first = true;
    for size in CHUNK_SIZES {
        while rest.len() >= size {
            let (chunk, tail) = rest.split_at(size);
            let begin = wrap == Wrap::Transaction && first;
            let commit = wrap == Wrap::Transaction && tail.is_empty();
            first = false;
            let mut query = sqlx::query(AssertSqlSafe(insert_sql(size, begin, commit)));
            for row in chunk {
                query = query
                    .bind(&*row.session)
                    .bind(row.seq)
                    .bind(i64::from(EVENT_SCHEMA_VERSION))
                    .bind(row.event.at_ms)
                    .bind(row.event.actor.as_str())
                    .bind(row.event.payload.as_str());
            }
            query.execute(&mut *conn).await?;
            rest = tail;
        }
    }
    rows.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request that reports how it was answered: `None` for success, or the error it got.
    struct Probe {
        failed: Option<String>,
        told: std::sync::mpsc::Sender<Option<String>>,
    }

    #[async_trait]
    impl WriteOp for Probe {
        async fn apply(
            &mut self,
            _conn: &mut SqliteConnection,
            _state: &mut BatchState,
        ) -> Result<(), sqlx::Error> {
            Ok(())
        }

        fn failed(&mut self, err: StoreError) {
            self.failed = Some(err.to_string());
        }

        fn answer(self: Box<Self>) {
            let _ = self.told.send(self.failed);
        }
    }

    fn probes(n: usize) -> (Committed, std::sync::mpsc::Receiver<Option<String>>) {
        let (told, answers) = std::sync::mpsc::channel();
        let batch = (0..n)
            .map(|_| {
                Box::new(Probe {
                    failed: None,
                    told: told.clone(),
                }) as Box<dyn WriteOp>
            })
            .collect();
        (batch, answers)
    }

    /// Hands `n` requests to a syncer of `wal`, lets it finish, and returns how each was answered.
    async fn synced(wal: PathBuf, n: usize) -> Vec<Option<String>> {
        let syncer = Syncer::start(wal).expect("start the thread");
        let (batch, answers) = probes(n);
        syncer
            .batches
            .send(batch)
            .await
            .expect("hand the batch over");
        syncer.finish().await;
        answers.try_iter().collect()
    }

    #[tokio::test]
    async fn the_syncer_answers_after_the_fsync_and_passes_its_failure_on() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let wal = dir.path().join("db-wal");
        std::fs::write(&wal, b"frames").expect("write a file to sync");
        assert_eq!(
            synced(wal, 3).await,
            vec![None, None, None],
            "every request answered, none failed"
        );

        // A WAL that cannot be opened (or synced) fails every request of the batch: nothing of
        // it is promised durable.
        let got = synced(dir.path().join("missing-wal"), 2).await;
        assert_eq!(got.len(), 2);
        for answer in got {
            let err = answer.expect("the request failed");
            assert!(
                err.contains("fsync of") && err.contains("missing-wal"),
                "the error names the sync and the file: {err}"
            );
        }
    }
}
