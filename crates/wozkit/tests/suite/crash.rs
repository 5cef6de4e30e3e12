//! The real `wozkit serve` killed with SIGKILL in the middle of live sessions, several times.
//!
//! Pairs of scripted participants (`common/play.rs`) play a small study (short robot actions)
//! over the WebSocket protocol and keep sending commands; the server is killed at
//! random moments and restarted, and the participants reconnect with the last `seq` they saw.
//! After a clean stop the test opens the store and checks that nothing acknowledged was lost,
//! nothing was stored twice, every log is gap-free, every event a client received is the stored
//! event of that `seq`, and every session reached its end.
//!
//! Two variants: one server on a SQLite data directory with 500 live pairs (a command every 1–2
//! s each, about 600 commands/s), restarted on the same directory and port; and two instances on one PostgreSQL database (short room leases), killed in turn and
//! restarted with their instance id, some at once (the instance resumes its own rooms) and some
//! after their leases ran out (the other instance takes their rooms over). The instances share a
//! cluster secret, so a socket reaching the instance that does not run its room is relayed. A
//! participant of the two-instance run knows both addresses and tries the other one when its
//! instance is down or can neither serve nor relay it.

use crate::common;
use crate::play;

use std::time::{Duration, Instant};

use rand::RngExt;
use wozkit_store::testing::TestDatabase;

use common::{Server, free_port};
use play::{Kill, STUDY, Transcript, Via, check_killed, join, now_ms, participant_until};

/// Live pairs of the one-server run, and their pace (ms between two commands of one participant).
const SQLITE_PAIRS: usize = 500;
const SQLITE_PACE_MS: (u64, u64) = (1000, 2000);
/// Pairs of the two-instance run (at the default pace, 150–300 ms).
const PG_PAIRS: usize = 20;
const KILLS: usize = 4;

/// The whole run must be over by then: a generous bound (each participant's session is about 40
/// commands, and a loaded machine is slow), for a run that does not end at all.
fn run_limit(pairs: usize) -> Duration {
    Duration::from_secs(100) + Duration::from_millis(600) * pairs as u32
}
/// Room lease of the two-instance run: short, so a room moves within the run.
const LEASE_MS: u64 = 1500;

/// Enters every participant of `pairs` pairs (pair `i` through `via(i)`, 32 entering at once)
/// and starts playing them, each until [`run_limit`].
async fn start_pairs(
    pairs: usize,
    via: impl Fn(usize) -> Via,
) -> Vec<tokio::task::JoinHandle<Transcript>> {
    let entering = std::sync::Arc::new(tokio::sync::Semaphore::new(32));
    let mut joins = vec![];
    for i in 0..pairs {
        for role in ["user", "wizard"] {
            let name = format!("{role}{i}");
            let q = format!("participant={name}&role={role}&pair=crash{i}");
            let via = via(i);
            let entering = std::sync::Arc::clone(&entering);
            joins.push(tokio::spawn(async move {
                let _turn = entering.acquire_owned().await.expect("semaphore");
                let cookie = join(&via, &q).await;
                (via, name, role == "wizard", cookie)
            }));
        }
    }
    let mut cookies = vec![];
    for j in joins {
        cookies.push(j.await.expect("join task"));
    }
    let deadline = Instant::now() + run_limit(pairs);
    cookies
        .into_iter()
        .map(|(via, name, wizard, cookie)| {
            tokio::spawn(participant_until(via, cookie, name, wizard, Some(deadline)))
        })
        .collect()
}

/// Waits for every participant; `logs` is called for the servers' output when one is late.
async fn finish(
    clients: Vec<tokio::task::JoinHandle<Transcript>>,
    logs: impl Fn() -> String,
) -> Vec<Transcript> {
    let pairs = clients.len() / 2;
    let mut transcripts = vec![];
    for c in clients {
        transcripts.push(c.await.expect("client task"));
    }
    let late: Vec<&Transcript> = transcripts.iter().filter(|t| t.timed_out).collect();
    if !late.is_empty() {
        let what: String = late
            .iter()
            .map(|t| {
                let last: Vec<_> = t.events.iter().rev().take(3).collect();
                format!(
                    "{} (session {:?}, last events {last:?}), connections:\n{}",
                    t.name,
                    t.session,
                    t.conns
                        .iter()
                        .map(|c| format!("  {c:?}\n"))
                        .collect::<String>()
                )
            })
            .collect();
        panic!(
            "{} participants did not reach the end of their sessions in {:?}:\n{what}\
             server log:\n{}",
            late.len(),
            run_limit(pairs),
            logs()
        );
    }
    transcripts
}

/// What the run did; `log` is the servers' output.
fn summary(what: &str, transcripts: &[Transcript], run: Duration, log: &str) {
    // The waiting room's warning when it finds a participant seated without a notice.
    let unannounced: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("seated in a session without being told"))
        .collect();
    for line in &unannounced {
        println!("{line}");
    }
    let unannounced = unannounced.len();
    let acks: usize = transcripts.iter().map(|t| t.acks.len()).sum();
    let connections: u32 = transcripts.iter().map(|t| t.connections).sum();
    let elsewhere: u32 = transcripts.iter().map(|t| t.not_in_room).sum();
    let unavailable: u32 = transcripts.iter().map(|t| t.unavailable).sum();
    println!(
        "{what}: {} pairs, {KILLS} kills, {acks} acknowledged commands, {connections} \
         connections ({elsewhere} told not_in_room, {unavailable} unavailable, \
         {unannounced} found seated without a notice) in {run:?}",
        transcripts.len() / 2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The turn is held across awaits on purpose: for the whole test, on the test's own thread.
#[allow(clippy::await_holding_lock)]
async fn sigkill_loses_nothing_acknowledged() {
    let _turn = common::one_load_test_at_a_time();
    let tmp = tempfile::tempdir().expect("temp dir");
    let study_file = tmp.path().join("crash.yaml");
    std::fs::write(&study_file, STUDY).expect("study file");
    let mut server = Server {
        addr: free_port(),
        study: study_file,
        data: tmp.path().join("data"),
        log: tmp.path().join("server.log"),
        child: None,
    };
    // 1,000 participants enter from one address: no per-address entry limit.
    let no_limit = ["--join-limit".to_string(), "0".to_string()];
    server.start_with(&no_limit);
    let addr = server.addr;
    let clients = start_pairs(SQLITE_PAIRS, |i| {
        Via::new(vec![addr], 0, &format!("crash{i}")).paced(SQLITE_PACE_MS.0, SQLITE_PACE_MS.1)
    })
    .await;
    let started = Instant::now();

    // Kill at random moments while the sessions run, restarting at once on the same data.
    let (mut server, kills) = tokio::task::spawn_blocking(move || {
        let mut rng = rand::rng();
        let mut kills = vec![];
        for _ in 0..KILLS {
            std::thread::sleep(Duration::from_millis(rng.random_range(300..3000)));
            let from_ms = now_ms();
            server.kill();
            kills.push(Kill {
                addr: server.addr,
                from_ms,
                to_ms: now_ms(),
            });
            std::thread::sleep(Duration::from_millis(rng.random_range(0..300)));
            server.start_with(&no_limit);
        }
        (server, kills)
    })
    .await
    .expect("killer");

    let transcripts = finish(clients, || server.log_text()).await;
    let run = started.elapsed();
    let log = server.log_text();
    assert!(server.stop(), "the server did not stop cleanly:\n{log}");
    assert_eq!(kills.len(), KILLS);
    let data = server.data.to_str().expect("utf-8 path").to_string();
    check_killed(&data, &transcripts, &kills, &log).await;
    summary("one server on SQLite", &transcripts, run, &log);
}

/// `wozkit serve` arguments of instance `id` on `addr`, sharing a database (and the relay's
/// secret) with others.
pub fn instance_args(id: &str, addr: std::net::SocketAddr, lease_ms: u64) -> Vec<String> {
    vec![
        "--instance-id".into(),
        id.into(),
        "--advertise-url".into(),
        format!("http://{addr}"),
        "--room-lease-ms".into(),
        lease_ms.to_string(),
        "--cluster-secret".into(),
        "crash-test-secret".into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The turn is held across awaits on purpose: for the whole test, on the test's own thread.
#[allow(clippy::await_holding_lock)]
async fn sigkill_of_either_of_two_instances_on_postgres_loses_nothing_acknowledged() {
    let _turn = common::one_load_test_at_a_time();
    let Some(pg) = TestDatabase::create("crash test, two instances").await else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let study_file = tmp.path().join("crash.yaml");
    std::fs::write(&study_file, STUDY).expect("study file");
    let mut servers: Vec<(Server, Vec<String>)> = ["crash-a", "crash-b"]
        .into_iter()
        .map(|id| {
            let addr = free_port();
            let server = Server {
                addr,
                study: study_file.clone(),
                data: pg.url.clone().into(),
                log: tmp.path().join(format!("{id}.log")),
                child: None,
            };
            (server, instance_args(id, addr, LEASE_MS))
        })
        .collect();
    for (server, args) in &mut servers {
        server.start_with(args);
    }
    let addrs: Vec<_> = servers.iter().map(|(s, _)| s.addr).collect();
    let logs = |servers: &[(Server, Vec<String>)]| -> String {
        servers
            .iter()
            .map(|(s, _)| format!("--- {}\n{}", s.log.display(), s.log_text()))
            .collect()
    };
    let clients = start_pairs(PG_PAIRS, |i| {
        Via::new(addrs.clone(), i % 2, &format!("crash{i}"))
    })
    .await;
    let started = Instant::now();

    // Kill each instance in turn; some come back at once, some after their leases ran out.
    let (mut servers, downtimes, kills) = tokio::task::spawn_blocking(move || {
        let mut rng = rand::rng();
        let mut downtimes = vec![];
        let mut kills = vec![];
        for k in 0..KILLS {
            std::thread::sleep(Duration::from_millis(rng.random_range(300..3000)));
            let (server, args) = &mut servers[k % 2];
            let from_ms = now_ms();
            server.kill();
            kills.push(Kill {
                addr: server.addr,
                from_ms,
                to_ms: now_ms(),
            });
            let down = if k % 2 == 0 {
                rng.random_range(0..300)
            } else {
                rng.random_range(LEASE_MS + 300..2 * LEASE_MS)
            };
            std::thread::sleep(Duration::from_millis(down));
            server.start_with(args);
            downtimes.push(down);
        }
        (servers, downtimes, kills)
    })
    .await
    .expect("killer");

    let transcripts = finish(clients, || logs(&servers)).await;
    let run = started.elapsed();
    let log = logs(&servers);
    for (server, _) in &mut servers {
        assert!(server.stop(), "an instance did not stop cleanly:\n{log}");
    }
    check_killed(&pg.url, &transcripts, &kills, &log).await;
    summary(
        &format!("two instances on PostgreSQL, down for {downtimes:?} ms"),
        &transcripts,
        run,
        &log,
    );
    pg.drop_database().await;
}
