//! Claim throughput and latency of a store when many workers of an evaluation study ask for
//! items at once, the evaluation flow's hot path. `--workers` workers (default 1,000) run
//! together; each one claims an item, submits a judgment to its participant log (one event),
//! and claims again until no item is left for it. Every item needs `--needed` judgments.
//!
//! `cargo bench -p wozkit-store --bench claims -- [--workers 1000] [--items 2000]
//!  [--needed 3] [--think MIN-MAX] [--pg postgres://…]`
//!
//! Without `--think` every worker claims again the moment it has submitted: the worst case, all
//! queueing. `--think 5-30` gives each worker a human's pace instead: it arrives at a random
//! moment within the first MAX seconds and spends a random 5–30 s (uniform, seeded per worker)
//! on each item between its claim and its submit, so claims arrive as they would from 1,000 people
//! reading dialogues, and their latency is that of the store under that load.
//!
//! Runs on SQLite (synchronous=FULL, as a server runs it), then on PostgreSQL when `--pg` is
//! given or `WOZKIT_TEST_PG_URL` is set (a fresh study in that database; tables are created if
//! missing). Latency is measured from the call to its acknowledgement (durable commit
//! included); the figures count every claim call, the final ones that find nothing included.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wozkit_core::event::{Actor, EventKind, ItemPool, MessageSource, Role};
use wozkit_store::{
    ClaimRequest, EvalItem, NewEvent, NewSession, PgOptions, PgStore, SqliteOptions, SqliteStore,
    Store,
};

struct Args {
    workers: usize,
    items: usize,
    needed: u32,
    /// Seconds a worker spends on an item (uniform in MIN..=MAX), `None` for none.
    think: Option<(f64, f64)>,
    pg: Option<String>,
}

/// `MIN-MAX` seconds, e.g. `5-30`.
fn parse_think(value: &str) -> Option<(f64, f64)> {
    let (min, max) = value.split_once('-')?;
    let (min, max): (f64, f64) = (min.trim().parse().ok()?, max.trim().parse().ok()?);
    (min >= 0.0 && max >= min).then_some((min, max))
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        workers: 1000,
        items: 2000,
        needed: 3,
        think: None,
        pg: std::env::var("WOZKIT_TEST_PG_URL").ok(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue; // passed by `cargo bench`
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = format!("bad value for {flag}: {value}");
        match flag.as_str() {
            "--workers" => args.workers = value.parse().map_err(|_| bad.clone())?,
            "--items" => args.items = value.parse().map_err(|_| bad.clone())?,
            "--needed" => args.needed = value.parse().map_err(|_| bad.clone())?,
            "--think" => args.think = Some(parse_think(&value).ok_or(bad.clone())?),
            "--pg" => args.pg = Some(value),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap_or_else(|e| panic!("histogram: {e}"))
}

/// CPU time (user + system) this process has used, from `/proc/self/stat` (Linux, USER_HZ =
/// 100). Printed because wall-clock figures on a shared machine depend on what else runs.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn judgment(worker: usize, n: usize) -> NewEvent {
    NewEvent {
        actor: Actor::Participant {
            role: Role::User,
            participant: Some(format!("w{worker}")),
        },
        kind: EventKind::Message {
            role: Role::User,
            text: format!("judgment {n} of worker {worker}"),
            source: MessageSource::Free,
        },
        at_ms: 1_700_000_000_000 + n as u64,
    }
}

/// What one worker measured: claim latencies (all, and those that found nothing: its last),
/// successful claims, and submit latencies.
struct WorkerFigures {
    claims: Histogram<u64>,
    empty: Histogram<u64>,
    granted: u64,
    submits: Histogram<u64>,
}

async fn worker(
    store: Arc<dyn Store>,
    study: String,
    w: usize,
    think: Option<(f64, f64)>,
) -> WorkerFigures {
    let log = format!("{study}-log-{w}");
    let mut figures = WorkerFigures {
        claims: histogram(),
        empty: histogram(),
        granted: 0,
        submits: histogram(),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(w as u64);
    if let Some((_, max)) = think {
        // Workers arrive over the first MAX seconds, not all at the same instant.
        tokio::time::sleep(Duration::from_secs_f64(rng.random_range(0.0..=max))).await;
    }
    for n in 0.. {
        let req = ClaimRequest {
            study_id: study.clone(),
            worker: format!("w{w}"),
            pool: ItemPool::Item,
            lease_id: format!("{study}-{w}-{n}"),
            now_ms: 1_000 + n as u64,
            lease_ms: 600_000,
            max_per_worker: None,
            prefer: vec![],
        };
        let t = Instant::now();
        let lease = store.claim(req).await.expect("claim");
        let _ = figures.claims.record(t.elapsed().as_micros() as u64);
        let Some(lease) = lease else {
            let _ = figures.empty.record(t.elapsed().as_micros() as u64);
            break;
        };
        figures.granted += 1;
        if let Some((min, max)) = think {
            tokio::time::sleep(Duration::from_secs_f64(rng.random_range(min..=max))).await;
        }
        let t = Instant::now();
        store
            .submit(
                &lease.id,
                2_000 + n as u64,
                &log,
                Box::new(move |_| vec![judgment(w, n)]),
            )
            .await
            .expect("submit");
        let _ = figures.submits.record(t.elapsed().as_micros() as u64);
    }
    figures
}

async fn run(store: Arc<dyn Store>, backend: &str, args: &Args) {
    let study = format!("bench-{}", wozkit_store::new_id());
    let items: Vec<EvalItem> = (0..args.items)
        .map(|i| EvalItem {
            id: format!("item-{i:05}"),
            pool: ItemPool::Item,
            dialogues: vec![format!("dialogue-{i:05}")],
            needed: args.needed,
        })
        .collect();
    store
        .register_items(&study, &items)
        .await
        .expect("register");
    for w in 0..args.workers {
        store
            .open_participant_log(NewSession {
                id: format!("{study}-log-{w}"),
                study_id: study.clone(),
                study_version: "1".to_owned(),
                seed: 7,
                created_at_ms: 0,
            })
            .await
            .expect("participant log");
    }
    let start = Instant::now();
    let cpu_start = cpu_time();
    let tasks: Vec<_> = (0..args.workers)
        .map(|w| tokio::spawn(worker(Arc::clone(&store), study.clone(), w, args.think)))
        .collect();
    let (mut claims, mut empty, mut submits, mut granted) =
        (histogram(), histogram(), histogram(), 0);
    for task in tasks {
        let figures = task.await.expect("worker task");
        let _ = claims.add(figures.claims);
        let _ = empty.add(figures.empty);
        let _ = submits.add(figures.submits);
        granted += figures.granted;
    }
    let elapsed = start.elapsed();
    let cpu = cpu_time()
        .zip(cpu_start)
        .map(|(end, start)| end.saturating_sub(start));
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{backend}: {} workers{}, {} items x {}: {granted} leases granted by {} claim calls in \
         {:.2} s = {:.0} claims/s ({:.0} granted/s, each followed by a submit)",
        args.workers,
        args.think.map_or(String::new(), |(min, max)| format!(
            " thinking {min}-{max} s per item"
        )),
        args.items,
        args.needed,
        claims.len(),
        elapsed.as_secs_f64(),
        claims.len() as f64 / elapsed.as_secs_f64(),
        granted as f64 / elapsed.as_secs_f64(),
    );
    println!(
        "{backend}: claim latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; submit latency p50 \
         {:.2} ms, p99 {:.2} ms{}",
        ms(&claims, 0.5),
        ms(&claims, 0.99),
        claims.max() as f64 / 1000.0,
        ms(&submits, 0.5),
        ms(&submits, 0.99),
        cpu.map_or(String::new(), |c| format!(
            "; CPU {:.0} µs per claim+submit",
            c.as_secs_f64() * 1e6 / claims.len().max(1) as f64
        )),
    );
    // The claims that found an item, apart from each worker's last (which found none and, to
    // prove it, looked at every item).
    let mut found = claims.clone();
    let _ = found.subtract(&empty);
    println!(
        "{backend}: claims that found an item: p50 {:.2} ms, p99 {:.2} ms; those that found none \
         (each worker's last): p50 {:.2} ms, p99 {:.2} ms",
        ms(&found, 0.5),
        ms(&found, 0.99),
        ms(&empty, 0.5),
        ms(&empty, 0.99),
    );
    let counts = store
        .item_counts(&study, 10_000_000)
        .await
        .expect("item counts");
    let short = counts.iter().filter(|c| c.done != args.needed).count();
    println!(
        "{backend}: items without exactly {} judgments: {short}",
        args.needed
    );
    store.close().await;
}

async fn main_async(args: Args) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join(wozkit_store::sqlite::DB_FILE);
    let sqlite = SqliteStore::open_with(path, SqliteOptions::default())
        .await
        .expect("open sqlite");
    run(Arc::new(sqlite), "sqlite synchronous=FULL", &args).await;
    if let Some(url) = &args.pg {
        // Every worker asks at once, so most wait for one of the 32 connections: the wait is
        // part of the latency measured, and must not fail the request as the default 10 s
        // acquire timeout would with 1,000 workers queued.
        let options = PgOptions {
            max_connections: 32,
            acquire_timeout: Duration::from_secs(300),
            ..PgOptions::default()
        };
        let pg = PgStore::connect_with(url, options)
            .await
            .expect("connect postgres");
        run(Arc::new(pg), "postgres (32 connections)", &args).await;
    }
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("claims bench: {e}");
            std::process::exit(2);
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(main_async(args));
}
