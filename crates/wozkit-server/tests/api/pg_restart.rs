//! PostgreSQL restarted under load with two instances on it. The test runs its own PostgreSQL
//! server (initdb and pg_ctl in a temporary folder: the shared test server of
//! `WOZKIT_TEST_PG_URL` is not the test's to stop), pairs participants on both instances, and
//! stops the database with `pg_ctl -m immediate` (a crash: clients cut off, recovery at the
//! next start) while they play, then starts it again. Commands during the outage may be
//! refused (`not_saved`) or cut off with their socket, never acknowledged and lost; the
//! instances reconnect by themselves and every participant goes on acknowledging commands.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wozkit_core::event::EventKind;
use wozkit_store::Store;
use wozkit_store::testing::pg_required;

use crate::client::{Client, Ws};
use crate::cluster::{at, instance, pair_on, stop};
use crate::helpers::Tiny;

/// A PostgreSQL server of this test's own, in a temporary folder; stopped when dropped.
struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// initdb refuses to run as root: then the server runs as the `postgres` user.
    as_postgres: bool,
    url: String,
}

impl PrivatePostgres {
    /// Creates and starts the server, or `None` (with a note) when PostgreSQL's binaries are
    /// not installed; with `WOZKIT_TEST_PG_REQUIRED` set that is a failure instead.
    fn start() -> Option<PrivatePostgres> {
        let Some(bin) = postgres_bin() else {
            assert!(
                !pg_required(),
                "WOZKIT_TEST_PG_REQUIRED is set but no initdb and pg_ctl were found under \
                 /usr/lib/postgresql/*/bin (install Debian's postgresql package)"
            );
            eprintln!(
                "skipped the PostgreSQL restart test: no initdb and pg_ctl under \
                 /usr/lib/postgresql/*/bin (install Debian's postgresql package)"
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let as_postgres = run(Command::new("id").arg("-u")).stdout.trim_ascii() == b"0";
        if as_postgres {
            let owned = run(Command::new("chown").arg("postgres").arg(dir.path()));
            assert!(owned.status.success(), "chown: {owned:?}");
        }
        let data = dir.path().join("data");
        let mut pg = PrivatePostgres {
            bin,
            data,
            dir,
            port: 0,
            as_postgres,
            url: String::new(),
        };
        let init = pg.as_owner("initdb", |c| {
            c.arg("-D").arg(&pg.data).args([
                "-U",
                "wozkit",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ]);
        });
        assert!(init.status.success(), "initdb failed: {init:?}");
        // A port that binds now, below the ephemeral range where outgoing connections' local
        // ends could hold it; a start that still cannot bind tries the next.
        let mut port = 27_432 + (std::process::id() % 500) as u16;
        for _ in 0..20 {
            port = free_port_from(port);
            pg.port = port;
            if pg.start_server().status.success() {
                pg.url = format!("postgres://wozkit@127.0.0.1:{port}/postgres");
                return Some(pg);
            }
            port += 1;
        }
        panic!(
            "the test's PostgreSQL server did not start; its log:\n{}",
            pg.server_log()
        );
    }

    fn as_owner(&self, tool: &str, args: impl FnOnce(&mut Command)) -> Output {
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join(tool));
            c
        } else {
            Command::new(self.bin.join(tool))
        };
        args(&mut c);
        run(&mut c)
    }

    fn start_server(&self) -> Output {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        self.as_owner("pg_ctl", |c| {
            c.arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(self.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]);
        })
    }

    /// Stops the server as a crash would: every client is cut off and the next start recovers.
    fn crash(&self) {
        let out = self.as_owner("pg_ctl", |c| {
            c.arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "stop"]);
        });
        assert!(out.status.success(), "pg_ctl stop: {out:?}");
    }

    fn restart(&self) {
        let out = self.start_server();
        assert!(
            out.status.success(),
            "PostgreSQL did not start again: {out:?}\n{}",
            self.server_log()
        );
    }

    fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            self.crash();
        }
    }
}

fn run(c: &mut Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", c.get_program()))
}

/// The newest `/usr/lib/postgresql/N/bin` with initdb and pg_ctl.
fn postgres_bin() -> Option<PathBuf> {
    let mut bins: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            let usable = |tool: &str| Path::new(&bin.join(tool)).is_file();
            (usable("initdb") && usable("pg_ctl")).then_some((version, bin))
        })
        .collect();
    bins.sort();
    bins.pop().map(|(_, bin)| bin)
}

fn free_port_from(mut port: u16) -> u16 {
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        port += 1;
    }
    port
}

/// What one scripted participant saw.
#[derive(Default)]
struct Played {
    who: String,
    /// Commands acknowledged: (text sent, `seq` in the ack).
    acked: Vec<(String, u64)>,
    /// Acknowledged after the database came back.
    acked_after: usize,
    /// Commands refused with an error frame: (text sent, the frame).
    refused: Vec<(String, Value)>,
    /// Commands whose socket closed before their answer: stored at most once.
    cut_off: Vec<String>,
    /// Every event frame received: (seq, kind).
    events: Vec<(u64, String)>,
    reconnects: usize,
}

/// Plays one participant until `done`: opens the room socket on the instances in turn (again
/// whenever it closes or stays silent), sends a text every 150 ms after the previous answer.
async fn play(
    client: Client,
    who: String,
    addrs: [std::net::SocketAddr; 2],
    wizard: bool,
    restarted: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> Played {
    let mut p = Played {
        who: who.clone(),
        ..Played::default()
    };
    let mut ws: Option<Ws> = None;
    let mut last_seq = 0;
    let mut greeted = !wizard;
    let wait = Duration::from_secs(15);
    for i in 0.. {
        if done.load(Ordering::Relaxed) {
            break;
        }
        if ws.is_none() {
            let addr = addrs[(p.reconnects + usize::from(wizard)) % 2];
            p.reconnects += 1;
            let Ok(mut w) = at(&client, addr).ws_with(&[]).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let hello = json!({"type": "hello", "last_seq": last_seq});
            let mut in_room = w.try_send(hello).await;
            while in_room {
                match w.next_within(wait).await {
                    Some(f) if f["type"] == "event" => {
                        let seq = f["event"]["seq"].as_u64().expect("event seq");
                        last_seq = last_seq.max(seq);
                        let kind = f["event"]["kind"].as_str().unwrap_or_default();
                        p.events.push((seq, kind.to_owned()));
                    }
                    Some(f) if f["type"] == "view" => break,
                    Some(f) if f["type"] == "ended" => panic!("{who}: the session ended: {f}"),
                    Some(f) if f["type"] == "error" => in_room = false,
                    Some(_) => {}
                    None => in_room = false,
                }
            }
            if !in_room {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            ws = Some(w);
        }
        let Some(w) = ws.as_mut() else { continue };
        let id = format!("{who}-{i}");
        let (cmd, text) = if greeted {
            let text = format!("{id} says hello");
            (json!({"cmd": "text", "text": text}), text)
        } else {
            (json!({"cmd": "say", "state": "greet"}), String::new())
        };
        let mut answer = None;
        if w.try_send(json!({"type": "cmd", "id": id, "cmd": cmd}))
            .await
        {
            while let Some(f) = w.next_within(wait).await {
                if f["type"] == "event" {
                    let seq = f["event"]["seq"].as_u64().expect("event seq");
                    last_seq = last_seq.max(seq);
                    let kind = f["event"]["kind"].as_str().unwrap_or_default();
                    p.events.push((seq, kind.to_owned()));
                } else if (f["type"] == "ack" || f["type"] == "error") && f["id"] == id {
                    answer = Some(f);
                    break;
                }
            }
        }
        match answer {
            Some(a) if a["type"] == "ack" => {
                greeted = true;
                p.acked.push((text, a["seq"].as_u64().expect("ack seq")));
                if restarted.load(Ordering::Relaxed) {
                    p.acked_after += 1;
                }
            }
            Some(a) => p.refused.push((text, a)),
            None => {
                p.cut_off.push(text);
                ws = None;
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_nothing_acknowledged_and_pairs_resume() {
    let Some(pg) = tokio::task::spawn_blocking(PrivatePostgres::start)
        .await
        .expect("start PostgreSQL")
    else {
        return;
    };
    let pg = Arc::new(pg);
    let a_store = wozkit_store::open(&pg.url).await.expect("store A opens");
    let b_store = wozkit_store::open(&pg.url).await.expect("store B opens");
    let tiny = Tiny::default();
    let secret = Some("restart-cluster-secret-restart-cluster-secret");
    let a = instance("A", a_store.clone(), &tiny, secret).await;
    let b = instance("B", b_store.clone(), &tiny, secret).await;
    let addrs = [a.addr, b.addr];

    let restarted = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let mut sessions = vec![];
    let mut players = vec![];
    for n in 0..4 {
        let pair = pair_on(addrs[n % 2], &format!("u{n}"), &format!("w{n}")).await;
        sessions.push(pair.session.clone());
        for (client, who, wizard) in [
            (pair.user, format!("u{n}"), false),
            (pair.wizard, format!("w{n}"), true),
        ] {
            players.push(tokio::spawn(play(
                client,
                who,
                addrs,
                wizard,
                Arc::clone(&restarted),
                Arc::clone(&done),
            )));
        }
    }

    // Everybody plays a little, then the database crashes for a moment and comes back.
    let count = async |store: &Arc<dyn Store>| {
        let mut n = 0;
        for s in &sessions {
            n += store.events(s, 0).await.map_or(0, |e| e.len());
        }
        n
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&a_store).await < sessions.len() * 12 {
        assert!(Instant::now() < deadline, "the pairs do not play");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored_before = count(&a_store).await;
    let pg2 = Arc::clone(&pg);
    tokio::task::spawn_blocking(move || {
        pg2.crash();
        std::thread::sleep(Duration::from_millis(1500));
        pg2.restart();
    })
    .await
    .expect("restart PostgreSQL");
    restarted.store(true, Ordering::Relaxed);

    // Every participant must be acknowledged again, on whichever instance runs its room.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stored = count(&a_store).await;
        if stored >= stored_before + sessions.len() * 2 * 8 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pairs did not resume after the restart: {stored} events stored, \
             {stored_before} before it"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Give each player time for a few more answers, then stop them.
    tokio::time::sleep(Duration::from_secs(3)).await;
    done.store(true, Ordering::Relaxed);
    let mut played = vec![];
    for p in players {
        played.push(p.await.expect("player"));
    }

    for (n, session) in sessions.iter().enumerate() {
        let log = b_store.events(session, 0).await.expect("events");
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=log.len() as u64).collect::<Vec<_>>(),
            "gap in {session}"
        );
        let texts: Vec<&str> = log
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Message { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        for p in played.iter().filter(|p| p.who.ends_with(&n.to_string())) {
            assert!(
                p.acked_after >= 2,
                "{} was acknowledged {} times after the restart (refused {:?}, cut off {})",
                p.who,
                p.acked_after,
                p.refused
                    .iter()
                    .map(|(_, f)| &f["code"])
                    .collect::<Vec<_>>(),
                p.cut_off.len()
            );
            for (text, seq) in p.acked.iter().filter(|(t, _)| !t.is_empty()) {
                let stored: Vec<&wozkit_core::event::Event> = log
                    .iter()
                    .filter(|e| matches!(&e.kind, EventKind::Message { text: t, .. } if t == text))
                    .collect();
                assert_eq!(
                    stored.len(),
                    1,
                    "acknowledged {text:?} stored {} times",
                    stored.len()
                );
                assert!(stored[0].seq <= *seq, "{text:?} stored after its ack's seq");
            }
            for text in p.cut_off.iter().chain(p.refused.iter().map(|(t, _)| t)) {
                let times = texts.iter().filter(|t| *t == text).count();
                assert!(times <= 1, "{text:?} stored {times} times");
            }
            for (_, frame) in &p.refused {
                assert_eq!(frame["code"], "not_saved", "{}: {frame}", p.who);
            }
            for (seq, kind) in &p.events {
                let stored = log.iter().find(|e| e.seq == *seq);
                let stored_kind =
                    stored.map(|e| serde_json::to_value(e).expect("event json")["kind"].clone());
                assert_eq!(
                    stored_kind,
                    Some(Value::from(kind.as_str())),
                    "{} received seq {seq} ({kind}) which is not stored so",
                    p.who
                );
            }
        }
    }
    let total_acked: usize = played.iter().map(|p| p.acked.len()).sum();
    let refused: usize = played.iter().map(|p| p.refused.len()).sum();
    let cut_off: usize = played.iter().map(|p| p.cut_off.len()).sum();
    let reconnects: usize = played.iter().map(|p| p.reconnects).sum();
    eprintln!(
        "PostgreSQL restart: {total_acked} commands acknowledged and stored, {refused} refused \
         (not_saved), {cut_off} cut off with their socket, {reconnects} room connections"
    );

    stop(a).await;
    stop(b).await;
    a_store.close().await;
    b_store.close().await;
}
