//! wozkit-loadgen: a load generator for a running wozkit server. It simulates participant pairs
//! the way browsers drive the server: each participant opens an entry link, accepts the consent
//! and instructions pages through their forms, waits in the waiting room over a WebSocket, is
//! paired, and plays the study in its room (the wizard picks offered options and starts robot
//! actions the panel allows, searches and selects rows of a study's tables; the user chats, writes
//! its goal's constraints and answers approvals) at a set message rate, for a
//! bounded time. It reports delivery latency (sender's send → partner's receipt), message rates,
//! errors by code, and the server's memory and CPU read from `/proc`.
//!
//! It must only talk to the server through its public HTTP and WebSocket protocol
//! (docs/protocol.md), and only to a server on this machine: anything but 127.0.0.1 or
//! localhost is refused.
//!
//! Map of the crate:
//! - [`target`]: the server URLs, checked to be local (several instances, or a proxy in front
//!   of them: pairs are spread round-robin over the URLs, figures reported per URL and overall).
//! - `http`: a minimal HTTP/1.1 client whose connection is handed over to the WebSocket.
//! - `pages`: the page flow (entry link, forms, the room page, WebSocket handshakes).
//! - `journey`: one participant's life: enter, wait, play, join again after a session ends.
//! - `room`: the room loop: frames in, moves out, latency bookkeeping.
//! - [`policy`]: which move to make from a `view` (pure).
//! - [`stats`]: counters, the latency histogram and the send/receipt meeting point.
//! - [`server_proc`]: the server's PID, memory and CPU from `/proc`.
//! - [`machine`]: whether the machine was quiet during the window (foreign CPU, steal).
//! - [`report`]: the figures, as text or JSON.
//! - [`crowd`]: a crowd of evaluation workers walking a judging study's forms.
//! - [`launch`]: a live study's launch: a burst of arrivals, reading times, leavers, pairing.
//! - `crowd_chat`: the crowd's workers on `chat` and `arena` pages (messages, retries, votes).
//! - [`mock_system`]: an OpenAI-compatible stand-in for a system under test, on 127.0.0.1.
//! - [`chat_bench`]: the latency wozkit adds to chats with a system (`wozkit bench --chats`).

#![forbid(unsafe_code)]

pub mod chat_bench;
pub mod crowd;
mod crowd_chat;
pub mod error;
mod frames;
mod http;
mod journey;
pub mod launch;
pub mod machine;
pub mod mock_system;
mod pages;
pub mod policy;
pub mod report;
mod room;
pub mod server_proc;
pub mod stats;
pub mod target;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

pub use error::{Failure, LoadgenError};
pub use report::{Report, ServerFigures, UrlFigures};
use stats::Stats;
use target::Target;

/// Sockets kept free for everything that is not a participant (the runtime, stdio, /proc).
const SPARE_FDS: u64 = 256;
/// The server allows 10 frames per second per connection.
const MAX_RATE: f64 = 10.0;
/// How long stopping waits for participants to close their connections.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// `http://127.0.0.1:PORT` or `http://localhost:PORT`, one or more: several instances (or
    /// a proxy and instances). Pairs of participants go to them in turn, pair `p` to URL
    /// `p mod n`, so each URL gets whole pairs.
    pub urls: Vec<String>,
    /// Simulated participants (an even number: they come in pairs).
    pub participants: usize,
    /// Length of the measurement window, after every participant reached a room.
    pub duration: Duration,
    /// Commands per second per participant (0.5: one every 2 s).
    pub rate: f64,
    /// The server's process, when it cannot be found from the listening port (with several URLs
    /// it is not looked up: give it to have server figures).
    pub server_pid: Option<u32>,
    /// Participants walking the HTTP pages at once.
    pub connect_concurrency: usize,
    /// Longest ramp-up; the window starts then even if some participants are not in a room.
    pub ramp_timeout: Duration,
    /// Prints progress lines on standard error.
    pub progress: bool,
    /// Loopback source addresses to connect from (127.0.0.1 up to 127.0.0.N); 0 chooses one per
    /// [`PER_SOURCE`] participants, as one address's ephemeral ports allow.
    pub source_addresses: u8,
}

/// Participants per loopback source address when the load generator chooses: well under the
/// 28,232 ephemeral ports Linux gives one address by default.
pub const PER_SOURCE: usize = 20_000;

impl Config {
    /// The defaults for `participants` over `duration` against `url` (push more onto `urls`).
    pub fn new(url: impl Into<String>, participants: usize, duration: Duration) -> Config {
        Config {
            urls: vec![url.into()],
            participants,
            duration,
            rate: 0.5,
            server_pid: None,
            connect_concurrency: 64,
            // A generous bound: a server takes tens of seconds to seat 10,000 participants.
            ramp_timeout: Duration::from_secs(120)
                + Duration::from_millis(30) * participants as u32,
            progress: false,
            source_addresses: 0,
        }
    }
}

/// What every participant task shares.
pub(crate) struct Ctx {
    /// The URLs, each with the figures of the participants sent to it.
    targets: Vec<UrlTarget>,
    /// Names this run's participants (`bench-<run>-<i>`), so runs never collide.
    run_id: String,
    /// Seed of the participants' random moves.
    seed: u64,
    /// Time between two moves of one participant.
    period: Duration,
    stats: Stats,
    /// Bounds the participants walking the pages at once; closed when the run stops.
    gate: Semaphore,
    /// Turns true when the run stops.
    stop: watch::Receiver<bool>,
    progress: bool,
}

impl Ctx {
    /// The first failures of a run are worth seeing in full; after that the counts tell.
    fn log_failure(&self, who: &str, f: &Failure) {
        let n: u64 = self.stats.errors().values().sum();
        if self.progress && n <= 5 {
            eprintln!("  {who}: {f}");
        }
    }
}

/// One URL of the run and what its participants measured.
pub(crate) struct UrlTarget {
    target: Target,
    stats: Stats,
}

/// The URL (index into `Config::urls`) of participant `index`: pairs in turn.
pub(crate) fn url_of(index: usize, urls: usize) -> usize {
    (index / 2) % urls.max(1)
}

/// Raises this process's soft limit of open files to its hard limit; returns the new limit.
/// Ten thousand participants need ten thousand sockets on each side.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

fn check(config: &Config) -> Result<Vec<Target>, LoadgenError> {
    if config.participants < 2 || !config.participants.is_multiple_of(2) {
        return Err(LoadgenError::BadConfig(
            "participants come in pairs: give an even number, at least 2",
        ));
    }
    if !(config.rate > 0.0 && config.rate <= MAX_RATE) {
        return Err(LoadgenError::BadConfig(
            "the rate is commands per second per participant: above 0 and at most 10 (the server's limit)",
        ));
    }
    if config.duration < Duration::from_secs(1) {
        return Err(LoadgenError::BadConfig("the duration is at least 1 second"));
    }
    if config.connect_concurrency == 0 {
        return Err(LoadgenError::BadConfig(
            "connect concurrency must be at least 1",
        ));
    }
    if config.urls.is_empty() {
        return Err(LoadgenError::BadConfig("give at least one server URL"));
    }
    if config.participants < 2 * config.urls.len() {
        return Err(LoadgenError::BadConfig(
            "several URLs need at least one pair of participants each",
        ));
    }
    let sources = match config.source_addresses {
        0 => u8::try_from(config.participants.div_ceil(PER_SOURCE).clamp(1, 250)).unwrap_or(250),
        n => n.min(250),
    };
    config
        .urls
        .iter()
        .map(|u| {
            Target::parse(u).map(|mut t| {
                t.sources = sources;
                t
            })
        })
        .collect()
}

async fn health(target: &Target) -> Result<(), LoadgenError> {
    let no = |reason: String| LoadgenError::NoServer {
        url: target.origin(),
        reason,
    };
    let mut conn = http::Conn::connect(target)
        .await
        .map_err(|f| no(f.to_string()))?;
    let res = conn
        .get("/healthz", None)
        .await
        .map_err(|f| no(f.to_string()))?;
    if res.status != 200 {
        return Err(no(format!("status {}", res.status)));
    }
    Ok(())
}

/// Runs the load: ramp-up, the measurement window, then every participant leaves.
pub async fn run(config: Config) -> Result<Report, LoadgenError> {
    let targets = prepare(&config).await?;
    let pid = config.server_pid.or_else(|| match targets.as_slice() {
        [one] => server_proc::pid_listening_on(one.port),
        _ => None,
    });
    let origins = targets
        .iter()
        .map(Target::origin)
        .collect::<Vec<_>>()
        .join(", ");
    let rss_before = pid.and_then(server_proc::rss_kib);
    let epoch_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Arc::new(new_ctx(&config, targets, epoch_ms, stop_rx));
    if config.progress {
        eprintln!(
            "bench: {} participants against {} (server pid {}), run {}",
            config.participants,
            origins,
            pid.map_or_else(|| "unknown".into(), |p| p.to_string()),
            ctx.run_id
        );
    }
    let ramp_start = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..config.participants {
        let ctx = ctx.clone();
        tasks.spawn(async move { journey::participant(&ctx, i).await });
    }
    ramp(&ctx, &config, ramp_start).await;
    let ramp_s = ramp_start.elapsed().as_secs_f64();

    let measured = measure(&ctx, &config, pid, rss_before).await;

    let _ = stop_tx.send(true);
    ctx.gate.close();
    if config.progress {
        eprintln!(
            "bench: window over; closing {} connections",
            measured.connected
        );
    }
    let all_done = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(STOP_WAIT, all_done).await.is_err() {
        tasks.abort_all();
    }
    Ok(build_report(&ctx, &config, origins, ramp_s, measured))
}

/// Checks the configuration and the open-file limit (raised to the hard limit), and that a
/// server answers at every target: the targets.
async fn prepare(config: &Config) -> Result<Vec<Target>, LoadgenError> {
    let targets = check(config)?;
    let limit = raise_fd_limit().map_err(LoadgenError::FdLimit)?;
    let needed = config.participants as u64 + SPARE_FDS;
    if limit < needed {
        return Err(LoadgenError::TooFewFds { needed, limit });
    }
    if config.progress {
        let sources = targets.first().map_or(1, |t| t.sources);
        eprintln!(
            "bench: open-file limit {limit} (raised to the hard limit; {needed} needed); connecting from {sources} source address(es), 127.0.0.1{}",
            if sources > 1 {
                format!(" to 127.0.0.{sources}")
            } else {
                String::new()
            }
        );
    }
    for target in &targets {
        health(target).await?;
    }
    Ok(targets)
}

/// The run's shared state: the targets with their figures, the run's name and seed (from its
/// start time), and the pace and gate of the participants.
fn new_ctx(
    config: &Config,
    targets: Vec<Target>,
    epoch_ms: u64,
    stop: watch::Receiver<bool>,
) -> Ctx {
    Ctx {
        targets: targets
            .into_iter()
            .map(|target| UrlTarget {
                target,
                stats: Stats::default(),
            })
            .collect(),
        run_id: format!("{epoch_ms:x}"),
        seed: epoch_ms,
        period: Duration::from_secs_f64(1.0 / config.rate),
        stats: Stats::default(),
        gate: Semaphore::new(config.connect_concurrency),
        stop,
        progress: config.progress,
    }
}

/// What the measurement window read of the server, this process and the machine.
struct Measured {
    /// The server's process, when known.
    pid: Option<u32>,
    /// The server's resident memory before the run, after the window and at its peak (KiB).
    rss_before: Option<u64>,
    rss_end: Option<u64>,
    rss_peak: Option<u64>,
    /// The window's length in seconds.
    secs: f64,
    /// Participants connected at the window's end.
    connected: usize,
    /// The server's CPU over the window, in percent of one core.
    cpu: Option<f64>,
    /// The server's busiest thread, and the CPU by thread name.
    threads: Option<(server_proc::ThreadShare, Vec<server_proc::ThreadShare>)>,
    /// This process's CPU over the window, in percent of one core.
    own_cpu: Option<f64>,
    machine: Option<machine::MachineFigures>,
}

/// Runs the measurement window: starts the figures' window, samples the server's memory each
/// second until `config.duration` is over, ends the window and reads the CPU used meanwhile.
async fn measure(
    ctx: &Ctx,
    config: &Config,
    pid: Option<u32>,
    rss_before: Option<u64>,
) -> Measured {
    let start = Instant::now();
    ctx.stats.start_window(start);
    for t in &ctx.targets {
        t.stats.start_window(start);
    }
    let cpu_start = pid.and_then(server_proc::cpu_seconds);
    let threads_start = pid.and_then(server_proc::thread_ticks);
    let own_cpu_start = server_proc::cpu_seconds(std::process::id());
    let machine_start = machine::Snapshot::read(pid);
    let mut rss_peak = rss_before;
    let end = start + config.duration;
    while Instant::now() < end {
        let step = end
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(1));
        tokio::time::sleep(step).await;
        if let Some(now) = pid.and_then(server_proc::rss_kib) {
            rss_peak = Some(rss_peak.map_or(now, |p| p.max(now)));
        }
    }
    let window = start.elapsed();
    let end = Instant::now();
    ctx.stats.end_window(end);
    for t in &ctx.targets {
        t.stats.end_window(end);
    }
    let secs = window.as_secs_f64();
    let connected = ctx.stats.connected.load(Ordering::Relaxed);
    let rss_end = pid.and_then(server_proc::rss_kib);
    let percent = |a: Option<f64>, b: Option<f64>| Some((b? - a?) / secs * 100.0);
    let cpu = percent(cpu_start, pid.and_then(server_proc::cpu_seconds));
    let threads = threads_start
        .zip(pid.and_then(server_proc::thread_ticks))
        .and_then(|(a, b)| server_proc::thread_shares(&a, &b, secs));
    let own_cpu = percent(own_cpu_start, server_proc::cpu_seconds(std::process::id()));
    let machine = machine_start
        .zip(machine::Snapshot::read(pid))
        .and_then(|(a, b)| machine::figures(&a, &b));
    if config.progress
        && let Some(m) = machine.as_ref().filter(|m| !m.quiet)
    {
        eprintln!("bench: {}", report::not_quiet_warning(m));
    }
    Measured {
        pid,
        rss_before,
        rss_end,
        rss_peak,
        secs,
        connected,
        cpu,
        threads,
        own_cpu,
        machine,
    }
}

/// The run's report from its figures and what the window measured.
fn build_report(
    ctx: &Ctx,
    config: &Config,
    origins: String,
    ramp_s: f64,
    measured: Measured,
) -> Report {
    let Measured {
        pid,
        rss_before,
        rss_end,
        rss_peak,
        secs,
        connected,
        cpu,
        threads,
        own_cpu,
        machine,
    } = measured;
    let s = &ctx.stats;
    let per_participant = match (rss_before, rss_end) {
        (Some(b), Some(e)) if connected > 0 => Some(e.saturating_sub(b) as f64 / connected as f64),
        _ => None,
    };
    let acked = s.acked.load(Ordering::Relaxed);
    let cpu_us_per_command = cpu
        .filter(|_| acked > 0)
        .map(|c| c / 100.0 * secs * 1e6 / acked as f64);
    Report {
        url: origins,
        participants: config.participants,
        rate_per_participant: config.rate,
        duration_s: secs,
        ramp_s,
        reached_room: s.reached_room.load(Ordering::Relaxed),
        gave_up: s.gave_up.load(Ordering::Relaxed),
        connected,
        peak_connected: s.peak_connected.load(Ordering::Relaxed),
        sessions: s.sessions(),
        commands_sent: s.sent.load(Ordering::Relaxed),
        commands_acked: acked,
        messages_per_s: acked as f64 / secs,
        events_per_s: s.events.load(Ordering::Relaxed) as f64 / secs,
        latency: s.latency(),
        uncorrelated_acks: s.uncorrelated.load(Ordering::Relaxed),
        skipped_busy: s.skipped_busy.load(Ordering::Relaxed),
        errors: s.errors(),
        endings: s.endings(),
        server: pid.map(|pid| ServerFigures {
            pid,
            rss_before_kib: rss_before,
            rss_end_kib: rss_end,
            rss_peak_kib: rss_peak,
            kib_per_participant: per_participant,
            cpu_percent: cpu,
            cpu_us_per_command,
            busiest_thread: threads.as_ref().map(|t| t.0.clone()),
            threads: threads.map(|t| t.1).unwrap_or_default(),
        }),
        loadgen_cpu_percent: own_cpu,
        machine,
        per_url: per_url(ctx, config, secs),
    }
}

/// The figures of each URL's participants over a window of `secs`.
fn per_url(ctx: &Ctx, config: &Config, secs: f64) -> Vec<UrlFigures> {
    ctx.targets
        .iter()
        .enumerate()
        .map(|(n, t)| {
            let s = &t.stats;
            let acked = s.acked.load(Ordering::Relaxed);
            UrlFigures {
                url: t.target.origin(),
                participants: (0..config.participants)
                    .filter(|i| url_of(*i, ctx.targets.len()) == n)
                    .count(),
                reached_room: s.reached_room.load(Ordering::Relaxed),
                gave_up: s.gave_up.load(Ordering::Relaxed),
                connected: s.connected.load(Ordering::Relaxed),
                sessions: s.sessions(),
                commands_acked: acked,
                messages_per_s: acked as f64 / secs,
                latency: s.latency(),
                errors: s.errors(),
            }
        })
        .collect()
}

/// Waits until every participant reached a room or gave up, or the ramp-up timed out.
async fn ramp(ctx: &Ctx, config: &Config, start: Instant) {
    let n = config.participants;
    let mut last_print = Instant::now();
    loop {
        let reached = ctx.stats.reached_room.load(Ordering::Relaxed);
        let gave_up = ctx.stats.gave_up.load(Ordering::Relaxed);
        if reached + gave_up >= n {
            break;
        }
        if start.elapsed() >= config.ramp_timeout {
            if config.progress {
                eprintln!(
                    "bench: ramp-up timed out after {:.0} s with {reached}/{n} in a room",
                    start.elapsed().as_secs_f64()
                );
            }
            break;
        }
        if config.progress && last_print.elapsed() >= Duration::from_secs(2) {
            last_print = Instant::now();
            eprintln!(
                "bench: {reached}/{n} participants in a room ({gave_up} gave up), {:.0} s",
                start.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if config.progress {
        eprintln!(
            "bench: ramp-up done in {:.1} s; measuring for {} s",
            start.elapsed().as_secs_f64(),
            config.duration.as_secs()
        );
    }
}
