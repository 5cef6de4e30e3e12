//! The latency wozkit adds to a chat with a system under test, and the server's memory per
//! chat: `wozkit bench --chats N`.
//!
//! The bench starts a [mock system](crate::mock_system) that answers every request after a
//! fixed delay (200 ms by default), writes a one-page chat study that declares it, and starts
//! the real `wozkit serve` as a child process on a free port of 127.0.0.1 with a data
//! directory of its own (`--join-limit 0`: every simulated worker comes from 127.0.0.1). One
//! warm-up chat runs first; then N crowd workers chat at once, each sending the same number of
//! messages with the plain form post, which returns once the reply is stored.
//!
//! A turn's time runs from sending the message to the server's answer (the reply stored); the
//! time wozkit adds is that minus the mock's delay. The memory per chat is the server's peak
//! resident memory during the chats minus its memory before them, divided by N.
//!
//! The study sets the system's `limits.concurrency` to 1024 and its `queue` to 100000: the
//! defaults (8 calls at once, 64 waiting) would make most of the chats wait for, or be refused,
//! a slot, which measures the limit and not the server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::crowd::{self, CrowdConfig, percentile_ms};
use crate::error::LoadgenError;
use crate::machine::{self, MachineFigures};
use crate::mock_system::{MockOptions, MockSystem};
use crate::report::not_quiet_warning;
use crate::server_proc;

/// Study id of the bench's study.
const STUDY: &str = "chat-bench";
/// How long the server may take to answer its health check after starting.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Clone, Debug)]
pub struct ChatBenchConfig {
    /// The `wozkit` executable to start the server with.
    pub wozkit: PathBuf,
    /// Chats at once.
    pub chats: usize,
    /// Messages each worker sends.
    pub turns: u32,
    /// The mock system's time to answer.
    pub delay: Duration,
    /// Ask the mock for streamed replies (server-sent events) and the server for NDJSON.
    pub stream: bool,
    /// Seed of the workers' choices.
    pub seed: u64,
    /// Milliseconds each worker pauses before each message, drawn from this range; `(0, 0)`
    /// makes every chat send at the same instant (the worst case).
    pub typing_ms: (u64, u64),
}

/// The figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChatBenchReport {
    pub chats: usize,
    pub turns_per_chat: u32,
    pub delay_ms: u64,
    pub stream: bool,
    /// The workers' pause before each message, milliseconds (low, high).
    pub typing_ms: (u64, u64),
    pub duration_s: f64,
    /// Turns answered, out of `chats × turns_per_chat`.
    pub turns: u64,
    pub turn_p50_ms: Option<f64>,
    pub turn_p99_ms: Option<f64>,
    pub turn_max_ms: Option<f64>,
    /// A turn's time minus the mock's delay.
    pub added_p50_ms: Option<f64>,
    pub added_p99_ms: Option<f64>,
    pub added_max_ms: Option<f64>,
    /// The server's resident memory before the chats and at its peak during them.
    pub rss_before_kib: Option<u64>,
    pub rss_peak_kib: Option<u64>,
    pub rss_per_chat_kib: Option<f64>,
    /// CPU seconds the server used during the chats.
    pub server_cpu_s: Option<f64>,
    /// The server's CPU over the turns answered, microseconds: everything the chats made the
    /// server do (joins, pages, the questions after) counted against their turns. The cost of
    /// a turn alone is the difference between two runs with different `--turns`, over the
    /// difference in turns (see `docs/performance.md`).
    pub server_cpu_us_per_turn: Option<f64>,
    /// The server's busiest single thread during the chats.
    pub busiest_thread: Option<server_proc::ThreadShare>,
    /// The server's CPU by thread name during the chats, busiest first.
    pub threads: Vec<server_proc::ThreadShare>,
    /// Whether the machine was quiet during the chats (foreign CPU, steal, iowait); `None`
    /// where it could not be measured (not Linux).
    pub machine: Option<MachineFigures>,
    /// Requests the mock system received.
    pub system_requests: usize,
    /// Workers whose walk failed, and the failures by code.
    pub failed_workers: u64,
    pub errors: std::collections::BTreeMap<String, u64>,
}

impl ChatBenchReport {
    /// The figures as a few lines of text.
    pub fn text(&self) -> String {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.2} ms"));
        let mib = |v: Option<u64>| {
            v.map_or_else(|| "-".into(), |v| format!("{:.1} MiB", v as f64 / 1024.0))
        };
        let mut out = format!(
            "chat bench: {} chats at once, {} turns each, pause before each {}-{} ms, system answers in {} ms ({}), {:.1} s\n\
             turns answered:   {} of {}\n\
             turn time:        p50 {}, p99 {}, max {}\n\
             added by wozkit:  p50 {}, p99 {}, max {}\n\
             server memory:    {} before, {} peak, {} per chat\n\
             server CPU:       {}\n\
             system requests:  {}\n\
             failed workers:   {}\n",
            self.chats,
            self.turns_per_chat,
            self.typing_ms.0,
            self.typing_ms.1,
            self.delay_ms,
            if self.stream { "streamed" } else { "whole" },
            self.duration_s,
            self.turns,
            self.chats as u64 * u64::from(self.turns_per_chat),
            ms(self.turn_p50_ms),
            ms(self.turn_p99_ms),
            ms(self.turn_max_ms),
            ms(self.added_p50_ms),
            ms(self.added_p99_ms),
            ms(self.added_max_ms),
            mib(self.rss_before_kib),
            mib(self.rss_peak_kib),
            self.rss_per_chat_kib
                .map_or_else(|| "-".into(), |v| format!("{v:.1} KiB")),
            match (self.server_cpu_s, self.server_cpu_us_per_turn) {
                (Some(s), Some(us)) => format!("{s:.1} s, {us:.0} µs per turn"),
                (Some(s), None) => format!("{s:.1} s"),
                _ => "-".into(),
            },
            self.system_requests,
            self.failed_workers,
        );
        if let Some(b) = &self.busiest_thread {
            out.push_str(&format!(
                "server threads:   {}\n",
                crate::report::threads_text(b, &self.threads)
            ));
        }
        match &self.machine {
            Some(m) => {
                out.push_str(&format!(
                    "machine:          {} CPUs; busy {:.0}%, other processes {} (100% = one core); steal {:.1}%, iowait {:.1}%\n",
                    m.cpus,
                    m.busy_cpu_percent,
                    m.foreign_cpu_percent
                        .map_or_else(|| "-".into(), |f| format!("{f:.0}%")),
                    m.steal_percent,
                    m.iowait_percent,
                ));
                if !m.quiet {
                    out.push_str(&format!("WARNING: {}\n", not_quiet_warning(m)));
                }
            }
            None => out.push_str("machine:          not measured (needs Linux's /proc/stat)\n"),
        }
        for (code, n) in &self.errors {
            out.push_str(&format!("error {code}: {n}\n"));
        }
        out
    }
}

/// The bench's study: one chat page with the mock system, `turns` messages exactly.
pub fn study_yaml(base_url: &str, chats: usize, turns: u32, stream: bool) -> String {
    format!(
        "id: {STUDY}\ntitle: Chat bench\nversion: \"1\"\n\
         flow:\n  user:\n    - kind: chat\n    - kind: completion\n  wizard: []\n\
         systems:\n  mock:\n    kind: openai\n    base_url: \"{base_url}\"\n    model: mock\n    stream: {stream}\n\
         \x20   # The defaults (8 at once, 64 waiting) would throttle the chats.\n\
         \x20   limits: {{concurrency: 1024, queue: 100000, timeout_s: 60, retries: 0}}\n\
         evaluation:\n  task: chat\n  judgments_per_item: {judgments}\n  items_per_worker: 1\n  lease_s: 3600\n\
         \x20 conversation: {{min_turns: {turns}, max_turns: {turns}, max_chars: 500}}\n",
        judgments = chats + 1,
    )
}

/// The server child; killed when dropped.
struct ServerChild(Child);

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the bench to its end.
pub async fn run(config: ChatBenchConfig) -> Result<ChatBenchReport, LoadgenError> {
    if config.chats == 0 || config.turns == 0 {
        return Err(LoadgenError::BadConfig(
            "chats and turns must be at least 1",
        ));
    }
    let mock = MockSystem::start(MockOptions {
        delay: config.delay,
        fail_every: 0,
    })
    .await
    .map_err(|e| LoadgenError::NoServer {
        url: "the mock system".into(),
        reason: e.to_string(),
    })?;
    let dir = std::env::temp_dir().join(format!(
        "wozkit-chat-bench-{}-{}",
        std::process::id(),
        config.seed
    ));
    let io = |what: &str, e: std::io::Error| LoadgenError::NoServer {
        url: dir.display().to_string(),
        reason: format!("{what}: {e}"),
    };
    std::fs::create_dir_all(&dir).map_err(|e| io("cannot create the bench's folder", e))?;
    let result = bench(&config, &mock, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Starts the server, plays one chat to warm it up, then the bench's chats, measuring the
/// server's memory and CPU meanwhile.
async fn bench(
    config: &ChatBenchConfig,
    mock: &MockSystem,
    dir: &std::path::Path,
) -> Result<ChatBenchReport, LoadgenError> {
    let (server, url) = start_server(config, mock, dir).await?;
    let pid = server.0.id();

    let crowd_config = |workers: usize, prefix: &str| {
        let mut c = CrowdConfig::new(url.clone(), STUDY, workers);
        c.concurrency = workers;
        c.seed = config.seed;
        c.stream = config.stream;
        c.typing_ms = config.typing_ms;
        c.worker_prefix = format!("{prefix}-{}", config.seed);
        c
    };
    // One chat first, so that what the server sets up once is not counted per chat.
    crowd::run(crowd_config(1, "warmup")).await?;
    let before = server_proc::rss_kib(pid);
    let cpu_before = server_proc::cpu_seconds(pid);
    let threads_before = server_proc::thread_ticks(pid);
    let started = Instant::now();
    let machine_before = machine::Snapshot::read(Some(pid));
    let requests_before = mock.requests().len();

    let peak = Arc::new(AtomicU64::new(before.unwrap_or(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kib) = server_proc::rss_kib(pid) {
                    peak.fetch_max(kib, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let report = crowd::run(crowd_config(config.chats, "chat")).await?;
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    if let Some(kib) = server_proc::rss_kib(pid) {
        peak.fetch_max(kib, Ordering::Relaxed);
    }
    let cpu_after = server_proc::cpu_seconds(pid);
    let threads = threads_before
        .zip(server_proc::thread_ticks(pid))
        .and_then(|(a, b)| server_proc::thread_shares(&a, &b, started.elapsed().as_secs_f64()));
    let machine = machine_before
        .zip(machine::Snapshot::read(Some(pid)))
        .and_then(|(a, b)| machine::figures(&a, &b));
    drop(server);

    let server_cpu_s = cpu_before.zip(cpu_after).map(|(b, a)| a - b);
    let delay_us = config.delay.as_micros() as u64;
    let turns = &report.turn_latencies_us;
    let added: Vec<u64> = turns.iter().map(|t| t.saturating_sub(delay_us)).collect();
    let peak = before.map(|_| peak.load(Ordering::Relaxed));
    Ok(ChatBenchReport {
        chats: config.chats,
        turns_per_chat: config.turns,
        typing_ms: config.typing_ms,
        delay_ms: config.delay.as_millis() as u64,
        stream: config.stream,
        duration_s: report.duration_s,
        turns: report.chat_turns,
        turn_p50_ms: percentile_ms(turns, 0.50),
        turn_p99_ms: percentile_ms(turns, 0.99),
        turn_max_ms: turns.last().map(|t| *t as f64 / 1000.0),
        added_p50_ms: percentile_ms(&added, 0.50),
        added_p99_ms: percentile_ms(&added, 0.99),
        added_max_ms: added.last().map(|t| *t as f64 / 1000.0),
        rss_before_kib: before,
        rss_peak_kib: peak,
        rss_per_chat_kib: before
            .zip(peak)
            .map(|(b, p)| p.saturating_sub(b) as f64 / config.chats as f64),
        server_cpu_s,
        server_cpu_us_per_turn: server_cpu_s
            .filter(|_| report.chat_turns > 0)
            .map(|s| s * 1e6 / report.chat_turns as f64),
        busiest_thread: threads.as_ref().map(|t| t.0.clone()),
        threads: threads.map(|t| t.1).unwrap_or_default(),
        machine,
        system_requests: mock.requests().len() - requests_before,
        failed_workers: report.failed,
        errors: report.errors,
    })
}

/// Writes the bench's study into `dir` and starts `wozkit serve` on it (its data and log in
/// `dir` too), on a free port: the server, once it answers, and its URL.
async fn start_server(
    config: &ChatBenchConfig,
    mock: &MockSystem,
    dir: &std::path::Path,
) -> Result<(ServerChild, String), LoadgenError> {
    let io = |what: &str, e: std::io::Error| LoadgenError::NoServer {
        url: dir.display().to_string(),
        reason: format!("{what}: {e}"),
    };
    let study = dir.join("study.yaml");
    std::fs::write(
        &study,
        study_yaml(&mock.base_url(), config.chats, config.turns, config.stream),
    )
    .map_err(|e| io("cannot write the bench's study", e))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| io("no free port", e))?
        .port();
    let log = std::fs::File::create(dir.join("server.log"))
        .map_err(|e| io("cannot create the server log", e))?;
    let err = log
        .try_clone()
        .map_err(|e| io("cannot create the server log", e))?;
    let child = Command::new(&config.wozkit)
        .arg("serve")
        .arg(&study)
        .args(["--addr", &format!("127.0.0.1:{port}"), "--join-limit", "0"])
        .arg("--data")
        .arg(dir.join("data"))
        .env_remove("WOZKIT_DATA")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| io(&format!("cannot start {}", config.wozkit.display()), e))?;
    let mut server = ServerChild(child);
    let url = format!("http://127.0.0.1:{port}");
    let target = crate::target::Target::parse(&url)?;
    let started = Instant::now();
    while crate::health(&target).await.is_err() {
        if started.elapsed() > START_TIMEOUT || matches!(server.0.try_wait(), Ok(Some(_))) {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            return Err(LoadgenError::NoServer {
                url,
                reason: format!("the server did not start; its log:\n{log}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((server, url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_study_lifts_the_system_limits() {
        let y = study_yaml("http://127.0.0.1:9/v1", 500, 4, false);
        assert!(y.contains("concurrency: 1024"), "{y}");
        assert!(y.contains("queue: 100000"), "{y}");
        assert!(y.contains("judgments_per_item: 501"), "{y}");
        assert!(y.contains("min_turns: 4, max_turns: 4"), "{y}");
    }
}
