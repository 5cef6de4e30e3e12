//! Durability across SIGKILL: a child process appends to the SQLite store and reports every
//! acknowledged event; the parent kills it mid-stream (no shutdown, no flush) and checks that
//! every acknowledged event is in the reopened database, in a gap-free log. Run for both
//! `synchronous` settings: NORMAL is the weaker one and must survive a process kill too.

mod harness;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use wozkit_store::prelude::*;

use harness::{message, new_session};
use wozkit_store::{SqliteOptions, SqliteStore, Store, Synchronous, sqlite::DB_FILE};

const CHILD_DIR: &str = "WOZKIT_CRASH_CHILD_DIR";
const CHILD_SYNC: &str = "WOZKIT_CRASH_CHILD_SYNC";
const SESSIONS: usize = 16;
/// Acknowledgements the parent waits for before killing the child.
const ACKS_BEFORE_KILL: usize = 400;

fn options(sync: &str) -> SqliteOptions {
    SqliteOptions {
        synchronous: if sync == "normal" {
            Synchronous::Normal
        } else {
            Synchronous::Full
        },
        ..SqliteOptions::default()
    }
}

/// The child's side: appends until killed. Does nothing in a normal test run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let sync = std::env::var(CHILD_SYNC).unwrap_or_default();
    let path = std::path::Path::new(&dir).join(DB_FILE);
    let store = Arc::new(
        SqliteStore::open_with(&path, options(&sync))
            .await
            .expect("open"),
    );
    for s in 0..SESSIONS {
        store
            .create_session(new_session(&format!("k{s}"), "study", 1))
            .await
            .expect("create");
    }
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let session = format!("k{s}");
                for i in 0u64.. {
                    let batch = (0..1 + i % 3)
                        .map(|j| message(&format!("{i}.{j}"), i))
                        .collect();
                    let stored = store.append(&session, batch).await.expect("append");
                    let last = stored.last().map_or(0, |e| e.seq);
                    println!("ACK {session} {last}");
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

fn kill_mid_append_loses_no_acknowledged_event(sync: &str) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .env(CHILD_SYNC, sync)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let mut acked: HashMap<String, u64> = HashMap::new();
    let mut acks = 0;
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        if words.next() != Some("ACK") {
            continue;
        }
        if let (Some(session), Some(Ok(last))) = (words.next(), words.next().map(str::parse)) {
            let entry = acked.entry(session.to_owned()).or_default();
            *entry = (*entry).max(last);
            acks += 1;
        }
        if acks >= ACKS_BEFORE_KILL && !killed {
            child.kill().expect("SIGKILL the child");
            killed = true;
            // Keep reading: lines already written before the kill were acknowledged too.
        }
    }
    let _ = child.wait();
    assert!(
        killed,
        "the child stopped by itself after {acks} acknowledgements"
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open_with(dir.path().join(DB_FILE), options(sync))
            .await
            .expect("reopen after kill");
        for (session, last_acked) in &acked {
            let log = store.events(session, 0).await.expect("events");
            let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
            assert_eq!(
                seqs,
                (1..=log.len() as u64).collect::<Vec<_>>(),
                "{session} gap-free"
            );
            assert!(
                log.len() as u64 >= *last_acked,
                "{session}: acknowledged up to {last_acked}, only {} stored",
                log.len()
            );
        }
        store.close().await;
    });
}

#[test]
fn sigkill_loses_nothing_with_synchronous_full() {
    kill_mid_append_loses_no_acknowledged_event("full");
}

#[test]
fn sigkill_loses_nothing_with_synchronous_normal() {
    kill_mid_append_loses_no_acknowledged_event("normal");
}
