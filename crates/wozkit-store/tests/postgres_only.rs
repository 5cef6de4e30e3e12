//! Behaviour only the PostgreSQL backend has: several instances (here two stores, each with its
//! own pool and writer) appending to the same sessions must still number every log 1..=n.
//! Skipped with a note unless `WOZKIT_TEST_PG_URL` is set (fails instead when
//! `WOZKIT_TEST_PG_REQUIRED` is set; see `wozkit_store::testing`).

mod harness;

use std::sync::Arc;

use harness::{Backend, message, new_session};
use wozkit_store::Store;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_gap_free_numbering() {
    const SESSIONS: usize = 10;
    const TASKS_PER_INSTANCE: usize = 20;
    const APPENDS: usize = 10;
    let Some(backend) = Backend::postgres("two_instances_share_gap_free_numbering").await else {
        return;
    };
    let instances = [backend.open().await, backend.open().await];
    for s in 0..SESSIONS {
        instances[0]
            .create_session(new_session(&format!("m{s}"), "study", 1))
            .await
            .expect("create");
    }
    let mut tasks = Vec::new();
    for (n, store) in instances.iter().enumerate() {
        for t in 0..TASKS_PER_INSTANCE {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                for i in 0..APPENDS {
                    // Sessions visited in different orders by different tasks and instances.
                    let s = (t * 3 + i * (n + 1)) % SESSIONS;
                    let batch = (0..1 + i % 2).map(|j| message(&format!("{n}.{t}.{i}.{j}"), 1));
                    store
                        .append(&format!("m{s}"), batch.collect())
                        .await
                        .expect("append");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task");
    }
    let mut total = 0;
    for s in 0..SESSIONS {
        let log = instances[1]
            .events(&format!("m{s}"), 0)
            .await
            .expect("events");
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=log.len() as u64).collect::<Vec<_>>(),
            "m{s} is gap-free"
        );
        total += log.len();
    }
    let per_task: usize = (0..APPENDS).map(|i| 1 + i % 2).sum();
    assert_eq!(total, 2 * TASKS_PER_INSTANCE * per_task);
    for store in &instances {
        store.close().await;
    }
    backend.cleanup().await;
}
