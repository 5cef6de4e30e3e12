//! Commit pacing never holds back a write that finds the writer idle, and a wait under load
//! ends as soon as a full batch is queued. Both are shown with a pace of one hour: a request
//! held back by it would not be answered within the test's generous bound at all, so nothing
//! here depends on how fast the machine is. Commits are counted with [`SqliteStore::commits`].
//!
//! The writer runs on a thread of its own, so a burst is only known to be queued in full when
//! the writer cannot take from its queue: the burst test holds SQLite's write lock from another
//! connection, waits until the writer has taken a first append (which then waits for the lock),
//! queues the burst, and lets go.

use crate::prelude::*;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};
use wozkit_core::model::ActType;

use sqlx::{Connection, SqliteConnection};

use super::{SqliteOptions, SqliteStore};
use crate::error::Result;
use crate::model::{NewEvent, NewSession};
use crate::store::Store;

/// One append in flight.
type Append<'a> = Pin<Box<dyn Future<Output = Result<Vec<Event>>> + Send + 'a>>;

/// Long enough that any pacing wait would outlast the test's bound by far.
const HOUR: Duration = Duration::from_secs(3600);
/// How long a write may take before the test calls it held back (a hang guard, not a speed
/// check: a normal commit takes milliseconds).
const BOUND: Duration = Duration::from_secs(60);

async fn open(dir: &tempfile::TempDir, max_batch: usize) -> SqliteStore {
    let options = SqliteOptions {
        commit_pace: HOUR,
        max_batch,
        ..SqliteOptions::default()
    };
    SqliteStore::open_with(dir.path().join(super::DB_FILE), options)
        .await
        .expect("open the store")
}

fn session(id: &str) -> NewSession {
    NewSession {
        id: id.to_owned(),
        study_id: "study".to_owned(),
        study_version: "1".to_owned(),
        seed: 1,
        created_at_ms: 0,
    }
}

fn message(i: u64) -> NewEvent {
    NewEvent {
        actor: Actor::Participant {
            role: Role::Wizard,
            participant: Some("p".to_owned()),
        },
        kind: EventKind::Message {
            role: Role::Wizard,
            text: format!("message {i}"),
            source: MessageSource::State {
                state: "s".to_owned(),
                label: "l".to_owned(),
                act_type: ActType::Update,
                template: 1,
            },
        },
        at_ms: i,
    }
}

#[tokio::test]
async fn a_lone_write_is_committed_at_once_and_alone() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(&dir, 1024).await;
    tokio::time::timeout(BOUND, store.create_session(session("s")))
        .await
        .expect("creating a session on an idle writer was held back")
        .expect("create the session");
    let before = store.commits();
    for i in 0..20 {
        let stored = tokio::time::timeout(BOUND, store.append("s", vec![message(i)]))
            .await
            .unwrap_or_else(|_| panic!("append {i} on an idle writer was held back"))
            .expect("append");
        assert_eq!(stored[0].seq, i + 1);
    }
    // One commit per append: each found the writer idle and went alone.
    assert_eq!(store.commits() - before, 20);
    store.close().await;
}

#[tokio::test]
async fn a_queued_burst_is_committed_in_full_batches_without_waiting() {
    const MAX_BATCH: usize = 8;
    const BATCHES: usize = 4;
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(&dir, MAX_BATCH).await;
    for s in 0..MAX_BATCH {
        tokio::time::timeout(BOUND, store.create_session(session(&format!("s{s}"))))
            .await
            .expect("creating a session on an idle writer was held back")
            .expect("create a session");
    }
    let before = store.commits();
    // Another connection holds the write lock: the writer's next commit waits for it (up to
    // its busy timeout, 5 s).
    let url = format!("sqlite://{}", dir.path().join(super::DB_FILE).display());
    let mut blocker = SqliteConnection::connect(&url)
        .await
        .expect("second connection");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut blocker)
        .await
        .expect("take the write lock");
    let shared = &store;
    let mut first = std::pin::pin!(shared.append("s0", vec![message(0)]));
    assert!(poll_once(first.as_mut()).await.is_pending());
    // The writer has taken the first append once nothing is queued (it now waits for the lock).
    while shared.queued_writes() > 0 {
        tokio::task::yield_now().await;
    }
    // Every append of the burst is sent in one poll, on this single-threaded runtime.
    let mut pending: Vec<Append<'_>> = (1..=MAX_BATCH * BATCHES)
        .map(|n| {
            let session = format!("s{}", n % MAX_BATCH);
            Box::pin(async move { shared.append(&session, vec![message(n as u64)]).await })
                as Append<'_>
        })
        .collect();
    let burst = poll_fn(|cx| {
        pending.retain_mut(|append| match append.as_mut().poll(cx) {
            Poll::Ready(stored) => {
                stored.expect("append");
                false
            }
            Poll::Pending => true,
        });
        if pending.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    let mut burst = std::pin::pin!(burst);
    // One poll queues the whole burst (the writer is held by the lock, so it answers none).
    assert!(poll_once(burst.as_mut()).await.is_pending());
    assert_eq!(shared.queued_writes(), MAX_BATCH * BATCHES);
    sqlx::query("ROLLBACK")
        .execute(&mut blocker)
        .await
        .expect("let go of the write lock");
    tokio::time::timeout(BOUND, burst)
        .await
        .expect("a burst of full batches waited for the pace");
    first.await.expect("the first append");
    // The first append's commit found the burst queued (the writer was busy), yet each wait
    // after it ended at once because a full batch was already queued.
    assert_eq!(store.commits() - before, 1 + BATCHES as u64);
    store.close().await;
}

/// Polls `future` once and reports whether it finished.
async fn poll_once<F: Future + Unpin>(mut future: F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut future).poll(cx))).await
}
