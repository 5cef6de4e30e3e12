//! Commit pacing never holds back a write that finds the writer idle, and a wait under load
//! ends as soon as a full batch is queued. Both are shown with a pace of one hour: a request
//! held back by it would not be answered within the test's generous bound at all, so nothing
//! here depends on how fast the machine is. Commits are counted with [`SqliteStore::commits`].

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};
use wozkit_core::model::ActType;

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
    let shared = &store;
    // Every append of the burst is sent in one poll, on this single-threaded runtime, so all
    // are queued before the writer takes the first one.
    let mut pending: Vec<Append<'_>> = (0..MAX_BATCH * BATCHES)
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
    tokio::time::timeout(BOUND, burst)
        .await
        .expect("a burst of full batches waited for the pace");
    // Requests were queued at the end of every commit but the last (the writer was busy), yet
    // each wait ended at once because a full batch was already queued.
    assert_eq!(store.commits() - before, BATCHES as u64);
    store.close().await;
}
