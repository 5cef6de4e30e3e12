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
//!  [--seconds 10] [--rate 1.0] [--events 1] [--sync full|normal] [--pace-us 2000]
//!  [--cache-kib 65536] [--page-size 4096] [--checkpoint-ms 500] [--pg postgres://…]`
//!
//! `--events` is the events per append request (a room's command appends one to a few);
//! `--pace-us` and `--cache-kib` set [`SqliteOptions::commit_pace`] and
//! [`SqliteOptions::cache_kib`] (defaults: the store's).
//!
//! Latency is measured from the call to its acknowledgement (durable commit included). Besides
//! the process's CPU per event, each phase prints SQLite's group commits (commits/s, events per
//! commit) and the CPU of SQLite's connection threads (`sqlx-sqlite-worker-*`; the writer's is
//! the busiest), and the end of the run prints the process's resident memory.

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
    events: usize,
    sync: Synchronous,
    pace: Option<Duration>,
    cache_kib: Option<u32>,
    page_size: Option<u32>,
    checkpoint_ms: Option<u64>,
    pg: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sessions: 5000,
        appends: 20,
        seconds: 10,
        rate: 1.0,
        events: 1,
        sync: Synchronous::Full,
        pace: None,
        cache_kib: None,
        page_size: None,
        checkpoint_ms: None,
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
            "--events" => args.events = value.parse().map_err(|_| bad.clone())?,
            "--pace-us" => {
                args.pace = Some(Duration::from_micros(
                    value.parse().map_err(|_| bad.clone())?,
                ))
            }
            "--cache-kib" => args.cache_kib = Some(value.parse().map_err(|_| bad.clone())?),
            "--page-size" => args.page_size = Some(value.parse().map_err(|_| bad.clone())?),
            "--checkpoint-ms" => {
                args.checkpoint_ms = Some(value.parse().map_err(|_| bad.clone())?);
            }
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

/// CPU time (user + system) of each of SQLite's connection threads (sqlx names them
/// `sqlx-sqlite-worker-N`), busiest first. Empty where `/proc` is missing.
fn sqlite_threads() -> Vec<(String, Duration)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return vec![];
    };
    let mut threads = vec![];
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        if !name.starts_with("sqlx-sqlite") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let id = task.file_name().to_string_lossy().into_owned();
        threads.push((
            format!("{name}/{id}"),
            Duration::from_millis((ticks(11) + ticks(12)) * 10),
        ));
    }
    threads.sort_by_key(|t| std::cmp::Reverse(t.1));
    threads
}

/// CPU used by each SQLite thread since `before`, busiest first, as "µs/event" figures.
fn thread_report(before: &[(String, Duration)], events: u64) -> String {
    let mut used: Vec<(String, Duration)> = sqlite_threads()
        .into_iter()
        .map(|(name, now)| {
            let was = before
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(Duration::ZERO, |(_, d)| *d);
            (name, now.saturating_sub(was))
        })
        .collect();
    used.sort_by_key(|t| std::cmp::Reverse(t.1));
    let per = |d: Duration| d.as_secs_f64() * 1e6 / events.max(1) as f64;
    let total: Duration = used.iter().map(|(_, d)| *d).sum();
    let writer = used.first().map_or(0.0, |(_, d)| per(*d));
    format!(
        "SQLite threads {:.1} µs/event (busiest, the writer: {writer:.1})",
        per(total)
    )
}

/// The process's resident memory and its peak, from `/proc/self/status`, in MiB.
fn memory() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<f64>().ok()
    };
    Some((kib("VmRSS:")? / 1024.0, kib("VmHWM:")? / 1024.0))
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
    let mut sqlite = None;
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
            let defaults = SqliteOptions::default();
            let options = SqliteOptions {
                synchronous: args.sync,
                commit_pace: args.pace.unwrap_or(defaults.commit_pace),
                cache_kib: args.cache_kib.unwrap_or(defaults.cache_kib),
                page_size: args.page_size.unwrap_or(defaults.page_size),
                checkpoint_every: args
                    .checkpoint_ms
                    .map_or(defaults.checkpoint_every, Duration::from_millis),
                ..defaults
            };
            println!(
                "sqlite commit pace {} µs, cache {} KiB, page size {}",
                options.commit_pace.as_micros(),
                options.cache_kib,
                options.page_size
            );
            let opened = Arc::new(SqliteStore::open_with(path, options).await.expect("open"));
            sqlite = Some(Arc::clone(&opened));
            opened
        }
    };
    println!(
        "backend {}, {} sessions, {} event(s) per append",
        match (&args.pg, args.sync) {
            (Some(_), _) => "postgres",
            (None, Synchronous::Full) => "sqlite synchronous=FULL",
            (None, Synchronous::Normal) => "sqlite synchronous=NORMAL",
        },
        args.sessions,
        args.events
    );
    let commits = || sqlite.as_ref().map_or(0, |s| s.commits());
    let groups = |phase: &str,
                  before: u64,
                  threads: &[(String, Duration)],
                  events: u64,
                  elapsed: Duration| {
        let made = commits().saturating_sub(before);
        if made > 0 {
            println!(
                "  {phase}: {made} commits = {:.0}/s, {:.1} events per commit; {}",
                made as f64 / elapsed.as_secs_f64(),
                events as f64 / made as f64,
                thread_report(threads, events)
            );
        }
    };
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

    let batch = args.events.max(1);
    // Phase 1: saturation.
    let start = Instant::now();
    let cpu_start = cpu_time();
    let (commits_start, threads_start) = (commits(), sqlite_threads());
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (store, id, appends) = (Arc::clone(&store), id.clone(), args.appends);
            tokio::spawn(async move {
                let mut latency = histogram();
                for i in 0..appends {
                    let t = Instant::now();
                    let events = (0..batch).map(|k| wizard_message(i * batch + k)).collect();
                    store.append(&id, events).await.expect("append");
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
    let elapsed = start.elapsed();
    let events = latency.len() * batch as u64;
    report(
        "saturation",
        events,
        elapsed,
        cpu_since(cpu_start),
        &latency,
    );
    groups("saturation", commits_start, &threads_start, events, elapsed);

    // Phase 2: paced at `rate` appends per session per second.
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let window = Duration::from_secs(args.seconds);
    let deadline = tokio::time::Instant::now() + window;
    let cpu_start = cpu_time();
    let (commits_start, threads_start) = (commits(), sqlite_threads());
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
                    let events = (0..batch).map(|k| wizard_message(i * batch + k)).collect();
                    store.append(&id, events).await.expect("append");
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
    let events = latency.len() * batch as u64;
    report(
        &format!(
            "paced {:.0} events/s offered",
            args.rate * (args.sessions * batch) as f64
        ),
        events,
        window,
        cpu_since(cpu_start),
        &latency,
    );
    groups("paced", commits_start, &threads_start, events, window);
    if let Some((rss, peak)) = memory() {
        println!("resident memory {rss:.1} MiB (peak {peak:.1} MiB)");
    }
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
