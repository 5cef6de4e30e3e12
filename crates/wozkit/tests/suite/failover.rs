//! Failover: three `wozkit serve` instances on one PostgreSQL database behind a real reverse
//! proxy (nginx, started by the test with its own configuration), one of them killed with
//! SIGKILL under load.
//!
//! Scripted pairs (`common/play.rs`, the crash test's participants) enter and play through the
//! proxy only. Once every pair is in its room, the instance running the most rooms is killed
//! (the wizards keep talking past their turns until the killed instance's rooms have moved, so
//! that on a slow machine the first pairs are still live when the last ones start).
//! The test then watches the room leases: every room of the dead instance must be taken over by
//! a surviving instance once its lease has run out (the measured delay after expiry is printed,
//! not asserted). The participants reconnect through the proxy and finish their sessions, and
//! the store is checked as in the crash test: no acknowledged command lost or stored twice,
//! every log gap-free, every event a client received stored under that `seq`, every session
//! ended.
//!
//! Routing: the proxy sends each request and socket to any live instance (round-robin), and
//! the instances share a cluster secret, so a socket reaching an instance that does not run
//! its room is relayed to the one that does. While the dead instance's leases are live, a
//! socket relayed to it gets `unavailable` and the participant connects again.
//! `WOZKIT_FAILOVER_ROUTING=sticky` hashes the `X-Route` header (the pair) instead, and
//! `WOZKIT_FAILOVER_ROUTING=no-relay` runs round-robin without the secret (a participant told
//! `not_in_room` connects again until the proxy sends it to the room's instance).
//!
//! Needs `WOZKIT_TEST_PG_URL` (skipped with a note otherwise, failing when
//! `WOZKIT_TEST_PG_REQUIRED` is set) and nginx (Debian's `nginx-light`; `scripts/test-all.sh`
//! installs it): skipped with a note when it is missing, failing when PostgreSQL is required.

use crate::common;
use crate::play;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wozkit_store::testing::{TestDatabase, pg_required};
use wozkit_store::{SessionFilter, Store};

use common::{Server, free_port, healthy};
use play::{STUDY, Transcript, Via, check, join, participant};

const INSTANCES: usize = 3;
const PAIRS: usize = 24;
/// Room lease of the instances: short, so the dead instance's rooms move within the run.
const LEASE_MS: u64 = 2000;
/// The whole run must be over by then (a bound for a hung run, not a timing: a loaded machine
/// takes twice as long as a quiet one).
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// nginx as the current user, in the foreground, with everything it writes in `dir`.
struct Proxy {
    addr: SocketAddr,
    dir: PathBuf,
    child: Option<Child>,
}

/// The nginx binary on `PATH` or where Debian puts it.
fn nginx_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("nginx"));
    on_path
        .chain([PathBuf::from("/usr/sbin/nginx")])
        .find(|p| p.is_file())
}

/// The proxy's configuration: one upstream of `instances`, WebSocket upgrades passed on, a
/// failed connection retried on the next instance, the instances' internal route not served.
fn nginx_conf(dir: &Path, listen: SocketAddr, instances: &[SocketAddr], sticky: bool) -> String {
    let d = dir.display();
    let balance = if sticky {
        "hash $http_x_route consistent;"
    } else {
        ""
    };
    let servers: String = instances
        .iter()
        .map(|a| format!("    server {a} max_fails=1 fail_timeout=2s;\n"))
        .collect();
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  upstream wozkit {{
    {balance}
{servers}  }}
  server {{
    listen {listen};
    # The instances relay to each other directly, at their advertised URLs.
    location /internal/ {{ return 404; }}
    location / {{
      proxy_pass http://wozkit;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_connect_timeout 1s;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
      proxy_next_upstream error timeout http_502;
    }}
  }}
}}
"#
    )
}

impl Proxy {
    /// Writes the configuration into `dir` and starts nginx; waits until it answers.
    fn start(nginx: &Path, dir: &Path, instances: &[SocketAddr], sticky: bool) -> Proxy {
        let addr = free_port();
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(dir, addr, instances, sticky)).expect("nginx.conf");
        let log = std::fs::File::create(dir.join("nginx.out")).expect("nginx output file");
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("nginx output file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", nginx.display()));
        let mut proxy = Proxy {
            addr,
            dir: dir.to_path_buf(),
            child: Some(child),
        };
        let t = Instant::now();
        while !healthy(addr) {
            if let Some(Ok(Some(status))) = proxy.child.as_mut().map(Child::try_wait) {
                panic!("nginx exited ({status}):\n{}", proxy.log_text());
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "nginx on {addr} does not pass /healthz on:\n{}",
                proxy.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }

    /// The status of `GET path` through the proxy.
    fn status(&self, path: &str) -> u16 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.addr).expect("connect to nginx");
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        s.write_all(req.as_bytes()).expect("request to nginx");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    fn log_text(&self) -> String {
        ["nginx.out", "error.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default())
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// The live sessions and their owners: instance id → sessions.
async fn owners(store: &dyn Store) -> BTreeMap<String, BTreeSet<String>> {
    let sessions = store
        .list_sessions(&SessionFilter::default())
        .await
        .expect("sessions");
    let mut by_owner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sessions.iter().filter(|s| s.ended.is_none()) {
        if let Some(lease) = store.room_owner(&s.id).await.expect("room owner") {
            by_owner
                .entry(lease.instance_id)
                .or_default()
                .insert(s.id.clone());
        }
    }
    by_owner
}

/// Milliseconds as seconds with one decimal.
fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The turn is held across awaits on purpose: for the whole test, on the test's own thread.
#[allow(clippy::await_holding_lock)]
async fn sigkill_of_one_of_three_instances_behind_nginx_loses_nothing() {
    let _turn = common::one_load_test_at_a_time();
    let Some(nginx) = nginx_binary() else {
        assert!(
            !pg_required(),
            "failover: nginx is not installed (apt-get install nginx-light; scripts/test-all.sh \
             does) and WOZKIT_TEST_PG_REQUIRED asks the multi-instance tests to run"
        );
        eprintln!("skipped failover: nginx is not installed (apt-get install nginx-light)");
        return;
    };
    let Some(pg) = TestDatabase::create("failover").await else {
        return;
    };
    let routing = std::env::var("WOZKIT_FAILOVER_ROUTING").unwrap_or_default();
    let sticky = routing == "sticky";
    let relay = routing != "no-relay";
    let tmp = tempfile::tempdir().expect("temp dir");
    let study_file = tmp.path().join("crash.yaml");
    std::fs::write(&study_file, STUDY).expect("study file");

    let mut instances: Vec<(String, Server)> = (0..INSTANCES)
        .map(|i| {
            let id = format!("node{i}");
            let server = Server::new(
                study_file.clone(),
                pg.url.clone(),
                tmp.path().join(format!("{id}.log")),
            );
            (id, server)
        })
        .collect();
    for (id, server) in &mut instances {
        let mut args = vec![
            "--instance-id".to_string(),
            id.clone(),
            "--advertise-url".into(),
            format!("http://{}", server.addr),
            "--room-lease-ms".into(),
            LEASE_MS.to_string(),
        ];
        if relay {
            args.extend(["--cluster-secret".into(), "failover-test-secret".into()]);
        }
        server.start_with(&args);
    }
    let addrs: Vec<SocketAddr> = instances.iter().map(|(_, s)| s.addr).collect();
    let proxy_dir = tmp.path().join("nginx");
    std::fs::create_dir_all(&proxy_dir).expect("nginx dir");
    let proxy = Proxy::start(&nginx, &proxy_dir, &addrs, sticky);
    assert_eq!(
        proxy.status("/internal/relay"),
        404,
        "the relay route is public"
    );
    let logs = |instances: &[(String, Server)], proxy: &Proxy| -> String {
        let mut all: String = instances
            .iter()
            .map(|(id, s)| format!("--- {id}\n{}", s.log_text()))
            .collect();
        all.push_str(&format!("--- nginx\n{}", proxy.log_text()));
        all
    };

    // Everyone enters through the proxy. The wizards keep talking until the rooms of the killed
    // instance have moved: every pair is live at the kill, however slowly the pairs started.
    let hold = Arc::new(AtomicBool::new(true));
    let mut clients = vec![];
    for i in 0..PAIRS {
        for role in ["user", "wizard"] {
            let name = format!("{role}{i}");
            let via = Via::new(vec![proxy.addr], 0, &format!("pair{i}")).held(hold.clone());
            let cookie = join(&via, &format!("participant={name}&role={role}&pair=f{i}")).await;
            let wizard = role == "wizard";
            clients.push(tokio::spawn(tokio::time::timeout(
                RUN_LIMIT,
                participant(via, cookie, name, wizard),
            )));
        }
    }
    let started = Instant::now();

    // Once every pair is in its room and talking, the instance with the most rooms is killed.
    let store: Arc<dyn Store> = wozkit_store::open(&pg.url).await.expect("store");
    let rooms = loop {
        let by_owner = owners(store.as_ref()).await;
        let leased: usize = by_owner.values().map(BTreeSet::len).sum();
        if leased == PAIRS {
            break by_owner;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {leased} of {PAIRS} rooms leased after two minutes: {by_owner:?}\n{}",
            logs(&instances, &proxy)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let spread: Vec<String> = rooms
        .iter()
        .map(|(id, r)| format!("{id}: {}", r.len()))
        .collect();
    let (victim, _) = rooms
        .iter()
        .max_by_key(|(_, r)| r.len())
        .expect("rooms are leased");
    let victim = victim.clone();
    let index = instances
        .iter()
        .position(|(id, _)| *id == victim)
        .expect("the owner is one of the instances");
    instances[index].1.kill();
    let killed_at = Instant::now();
    let killed_ms = now_ms();

    // Its rooms as the leases left them: when each runs out.
    let mut expiry: HashMap<String, u64> = HashMap::new();
    for s in owners(store.as_ref())
        .await
        .remove(&victim)
        .unwrap_or_default()
    {
        if let Some(lease) = store.room_owner(&s).await.expect("room owner") {
            expiry.insert(s, lease.expires_at_ms);
        }
    }
    assert!(
        !expiry.is_empty(),
        "the killed instance {victim} held no room"
    );
    // Watch every room move to a survivor (or end, if it was ending as the kill came).
    let mut moved: HashMap<String, (String, u64)> = HashMap::new();
    while moved.len() < expiry.len() {
        let waiting: Vec<String> = expiry
            .keys()
            .filter(|s| !moved.contains_key(*s))
            .cloned()
            .collect();
        for s in &waiting {
            let now = now_ms();
            match store.room_owner(s).await.expect("room owner") {
                Some(lease) if lease.instance_id != victim => {
                    moved.insert(s.clone(), (lease.instance_id, now));
                }
                None => {
                    moved.insert(s.clone(), (String::new(), now));
                }
                Some(_) => {}
            }
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(60),
            "rooms of {victim} not taken over a minute after the kill: {} of {}\n{}",
            moved.len(),
            expiry.len(),
            logs(&instances, &proxy)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    hold.store(false, Ordering::Relaxed);
    let mut transcripts: Vec<Transcript> = vec![];
    for c in clients {
        match c.await.expect("client task") {
            Ok(t) => transcripts.push(t),
            Err(_) => panic!(
                "a participant did not reach the end of its session in {RUN_LIMIT:?}:\n{}",
                logs(&instances, &proxy)
            ),
        }
    }
    let run = started.elapsed();
    let log = logs(&instances, &proxy);
    for (id, server) in &mut instances {
        assert!(server.stop(), "instance {id} did not stop cleanly:\n{log}");
    }
    drop(proxy);

    // A room that moved resumed there: its log goes on after the kill with the survivor's
    // events (the dead instance stores nothing after it).
    let mut takeover_after_expiry = vec![];
    let mut first_event_after_kill = vec![];
    for (s, (owner, seen_ms)) in &moved {
        let events = store.events(s, 0).await.expect("events");
        let later = events.iter().find(|e| e.at_ms > killed_ms);
        if owner.is_empty() {
            // Its lease row is gone: the session ended, before the kill or after a takeover.
            let ended = store
                .session(s)
                .await
                .expect("session")
                .and_then(|r| r.ended);
            assert!(ended.is_some(), "{s}: no lease and not ended");
            continue;
        }
        let later = later.unwrap_or_else(|| {
            panic!("{s}: taken over by {owner} but nothing stored after the kill\n{log}")
        });
        takeover_after_expiry.push(seen_ms.saturating_sub(expiry[s]));
        first_event_after_kill.push(later.at_ms - killed_ms);
    }
    assert!(
        !takeover_after_expiry.is_empty(),
        "no room of {victim} was taken over by another instance: {moved:?}"
    );
    // Every participant of a dead room reconnected (through the proxy) and was served by the
    // room again: how long after the kill.
    let dead: BTreeSet<&String> = expiry.keys().collect();
    let mut back = vec![];
    for t in &transcripts {
        if t.session.as_ref().is_some_and(|s| dead.contains(s)) {
            let at = t
                .entered
                .iter()
                .find(|at| **at > killed_at)
                .unwrap_or_else(|| panic!("{}: not back in its room after the kill", t.name));
            back.push(at.duration_since(killed_at).as_millis() as u64);
        }
    }
    check(&pg.url, &transcripts, &log).await;
    store.close().await;

    let max = |v: &[u64]| v.iter().copied().max().unwrap_or_default();
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or_default()
    };
    let acks: usize = transcripts.iter().map(|t| t.acks.len()).sum();
    let elsewhere: u32 = transcripts.iter().map(|t| t.not_in_room).sum();
    let unavailable: u32 = transcripts.iter().map(|t| t.unavailable).sum();
    let connections: u32 = transcripts.iter().map(|t| t.connections).sum();
    println!(
        "failover ({} routing): {INSTANCES} instances, lease {LEASE_MS} ms, {PAIRS} pairs \
         (rooms {}); killed {victim} with {} rooms {} after the start",
        match (sticky, relay) {
            (true, _) => "sticky",
            (false, true) => "round-robin, relay",
            (false, false) => "round-robin, no relay",
        },
        spread.join(", "),
        expiry.len(),
        secs(killed_at.duration_since(started).as_millis() as u64),
    );
    println!(
        "  taken over {} after lease expiry (median; max {}), first event stored {} after the \
         kill (median; max {}); {} participants back in their rooms {} after the kill \
         (median; max {})",
        secs(median(&mut takeover_after_expiry.clone())),
        secs(max(&takeover_after_expiry)),
        secs(median(&mut first_event_after_kill.clone())),
        secs(max(&first_event_after_kill)),
        back.len(),
        secs(median(&mut back.clone())),
        secs(max(&back)),
    );
    println!(
        "  {acks} acknowledged commands, all stored; {connections} connections ({elsewhere} \
         told not_in_room, {unavailable} unavailable); run {}",
        secs(run.as_millis() as u64)
    );
    pg.drop_database().await;
}
