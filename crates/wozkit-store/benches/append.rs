//! Append throughput and latency of a store under many concurrent sessions, the server's hot
//! path. Two phases on the same database:
//!
//! 1. saturation: every session appends one event after another as fast as acknowledgements
//!    come back (one request in flight per session), which shows the group commit's ceiling;
//! 2. paced: every session appends one event per `1/rate` seconds (default 1 per second, i.e.
//!    5,000 sessions of two participants each sending a message every 2 s = 5,000 events/s),
//!    which shows the latency a participant sees at the target load.
//!
//! `cargo bench -p wozkit-store --bench append -- [--sessions 5000] [--appends 20]
//!  [--seconds 10] [--rate 1.0] [--sync full|normal] [--pg postgres://…]`
//!
//! Latency is measured from the call to its acknowledgement (durable commit included).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::time::MissedTickBehavior;
use wozkit_core::event::{Actor, EventKind, MessageSource, Role};
use wozkit_core::model::ActType;
use wozkit_store::{
    NewEvent, NewSession, PgOptions, PgStore, SqliteOptions, SqliteStore, Store, Synchronous,
};

struct Args {
    sessions: usize,
    appends: usize,
    seconds: u64,
    rate: f64,
    sync: Synchronous,
    pg: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sessions: 5000,
        appends: 20,
        seconds: 10,
        rate: 1.0,
        sync: Synchronous::Full,
        pg: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue; // passed by `cargo bench`
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = format!("bad value for {flag}: {value}");
        match flag.as_str() {
            "--sessions" => args.sessions = value.parse().map_err(|_| bad.clone())?,
            "--appends" => args.appends = value.parse().map_err(|_| bad.clone())?,
            "--seconds" => args.seconds = value.parse().map_err(|_| bad.clone())?,
            "--rate" => args.rate = value.parse().map_err(|_| bad.clone())?,
            "--sync" => {
                args.sync = match value.as_str() {
                    "full" => Synchronous::Full,
                    "normal" => Synchronous::Normal,
                    _ => return Err(format!("--sync is full or normal, not {value}")),
                }
            }
            "--pg" => args.pg = Some(value),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

fn wizard_message(i: usize) -> NewEvent {
    NewEvent {
        actor: Actor::Participant {
            role: Role::Wizard,
            participant: Some("p-wizard".to_owned()),
        },
        kind: EventKind::Message {
            role: Role::Wizard,
            text: format!("Husky 1 is on its way to the east tower, ETA 40 seconds ({i})."),
            source: MessageSource::State {
                state: "send_husky_east".to_owned(),
                label: "inform_robot_moving".to_owned(),
                act_type: ActType::Update,
                template: 1,
            },
        },
        at_ms: 1_700_000_000_000 + i as u64,
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap_or_else(|e| panic!("histogram: {e}"))
}

/// CPU time (user + system) this process has used, from `/proc/self/stat` (Linux; its clock
/// ticks are USER_HZ = 100 per second). `None` elsewhere. Printed because wall-clock figures on a
/// shared 2-core machine depend on what else runs; CPU per event does much less.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn report(
    phase: &str,
    events: u64,
    elapsed: Duration,
    cpu: Option<Duration>,
    latency: &Histogram<u64>,
) {
    let ms = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    let cpu = cpu.map_or(String::new(), |c| {
        format!(
            "; CPU {:.1} µs/event",
            c.as_secs_f64() * 1e6 / events.max(1) as f64
        )
    });
    println!(
        "{phase}: {events} events in {:.2} s = {:.0} events/s; append latency p50 {:.2} ms, \
         p99 {:.2} ms, max {:.2} ms{cpu}",
        elapsed.as_secs_f64(),
        events as f64 / elapsed.as_secs_f64(),
        ms(0.5),
        ms(0.99),
        latency.max() as f64 / 1000.0,
    );
}

fn cpu_since(start: Option<Duration>) -> Option<Duration> {
    Some(cpu_time()?.saturating_sub(start?))
}

async fn run(args: Args) {
    let _dir; // keeps the temporary SQLite directory alive for the run
    let store: Arc<dyn Store> = match &args.pg {
        Some(url) => {
            let options = PgOptions {
                max_connections: 32,
                ..PgOptions::default()
            };
            Arc::new(PgStore::connect_with(url, options).await.expect("connect"))
        }
        None => {
            let dir = tempfile::tempdir().expect("temporary directory");
            let path = dir.path().join(wozkit_store::sqlite::DB_FILE);
            _dir = dir;
            let options = SqliteOptions {
                synchronous: args.sync,
                ..SqliteOptions::default()
            };
            Arc::new(SqliteStore::open_with(path, options).await.expect("open"))
        }
    };
    println!(
        "backend {}, {} sessions",
        match (&args.pg, args.sync) {
            (Some(_), _) => "postgres",
            (None, Synchronous::Full) => "sqlite synchronous=FULL",
            (None, Synchronous::Normal) => "sqlite synchronous=NORMAL",
        },
        args.sessions
    );
    let prefix = wozkit_store::new_id();
    let ids: Vec<String> = (0..args.sessions)
        .map(|s| format!("{prefix}-{s}"))
        .collect();
    let creates: Vec<_> = ids
        .iter()
        .map(|id| {
            let store = Arc::clone(&store);
            let new = NewSession {
                id: id.clone(),
                study_id: "bench".to_owned(),
                study_version: "1".to_owned(),
                seed: 7,
                created_at_ms: 0,
            };
            tokio::spawn(async move { store.create_session(new).await.map(|_| ()) })
        })
        .collect();
    for c in creates {
        c.await.expect("task").expect("create session");
    }

    // Phase 1: saturation.
    let start = Instant::now();
    let cpu_start = cpu_time();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (store, id, appends) = (Arc::clone(&store), id.clone(), args.appends);
            tokio::spawn(async move {
                let mut latency = histogram();
                for i in 0..appends {
                    let t = Instant::now();
                    store
                        .append(&id, vec![wizard_message(i)])
                        .await
                        .expect("append");
                    let _ = latency.record(t.elapsed().as_micros() as u64);
                }
                latency
            })
        })
        .collect();
    let mut latency = histogram();
    for t in tasks {
        let _ = latency.add(t.await.expect("task"));
    }
    report(
        "saturation",
        latency.len(),
        start.elapsed(),
        cpu_since(cpu_start),
        &latency,
    );

    // Phase 2: paced at `rate` appends per session per second.
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let window = Duration::from_secs(args.seconds);
    let deadline = tokio::time::Instant::now() + window;
    let cpu_start = cpu_time();
    let tasks: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| {
            let (store, id) = (Arc::clone(&store), id.clone());
            // Spread the sessions' ticks over one period instead of firing all at once.
            let phase = period.mul_f64(n as f64 / args.sessions as f64);
            tokio::spawn(async move {
                let mut latency = histogram();
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + phase, period);
                ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
                let mut i = 0;
                loop {
                    ticks.tick().await;
                    if tokio::time::Instant::now() >= deadline {
                        break;
                    }
                    let t = Instant::now();
                    store
                        .append(&id, vec![wizard_message(i)])
                        .await
                        .expect("append");
                    let _ = latency.record(t.elapsed().as_micros() as u64);
                    i += 1;
                }
                latency
            })
        })
        .collect();
    let mut latency = histogram();
    for t in tasks {
        let _ = latency.add(t.await.expect("task"));
    }
    report(
        &format!(
            "paced {:.0} events/s offered",
            args.rate * args.sessions as f64
        ),
        latency.len(),
        window,
        cpu_since(cpu_start),
        &latency,
    );
    store.close().await;
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("append bench: {e}");
            std::process::exit(2);
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(run(args));
}
