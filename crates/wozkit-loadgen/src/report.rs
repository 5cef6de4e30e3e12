//! The figures of a run, as one JSON object (`--json`) or a short text.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::machine::MachineFigures;
use crate::stats::Latency;

/// Everything a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The server's origin; with several URLs, every origin, comma-separated.
    pub url: String,
    /// Participants asked for.
    pub participants: usize,
    /// Commands per second per participant asked for.
    pub rate_per_participant: f64,
    /// Length of the measurement window, seconds.
    pub duration_s: f64,
    /// From the first entry link until every participant was in a room (or gave up).
    pub ramp_s: f64,
    /// Participants that reached a room at least once.
    pub reached_room: usize,
    /// Participants that never reached a room and gave up after repeated failures.
    pub gave_up: usize,
    /// Room connections open at the end of the window, and the most at once.
    pub connected: usize,
    pub peak_connected: usize,
    /// Distinct sessions that had a participant in the room.
    pub sessions: usize,
    /// Inside the window: commands sent and acknowledged, and their rate.
    pub commands_sent: u64,
    pub commands_acked: u64,
    pub messages_per_s: f64,
    /// Event frames received by all participants per second (the fan-out the server did).
    pub events_per_s: f64,
    /// Sender's send → partner's receipt of the command's event (window only).
    pub latency: Latency,
    /// Acks that could not be matched to an event.
    pub uncorrelated_acks: u64,
    /// Ticks skipped because the previous command was still unanswered.
    pub skipped_busy: u64,
    /// Error codes over the whole run (ramp-up included): the server's error frames and the
    /// load generator's own (`connect`, `http_503`, `ws_closed`, `timeout`, …).
    pub errors: BTreeMap<String, u64>,
    /// `ended` reasons seen (one per participant per session).
    pub endings: BTreeMap<String, u64>,
    pub server: Option<ServerFigures>,
    /// CPU used by the load generator itself during the window (100 = one core).
    pub loadgen_cpu_percent: Option<f64>,
    /// Whether the machine was quiet during the window (foreign CPU, steal, iowait); `None`
    /// where it could not be measured (not Linux).
    pub machine: Option<MachineFigures>,
    /// The figures of each URL, in the order given (one entry with a single URL).
    pub per_url: Vec<UrlFigures>,
}

/// What the participants sent to one URL measured (see `Config::urls`).
#[derive(Clone, Debug, Serialize)]
pub struct UrlFigures {
    pub url: String,
    /// Participants sent to this URL.
    pub participants: usize,
    pub reached_room: usize,
    pub gave_up: usize,
    /// Room connections open at the end of the window.
    pub connected: usize,
    pub sessions: usize,
    /// Commands acknowledged inside the window, and their rate.
    pub commands_acked: u64,
    pub messages_per_s: f64,
    /// Samples completed by this URL's participants (the partner's receipt, or the sender's
    /// ack when it came last).
    pub latency: Latency,
    pub errors: BTreeMap<String, u64>,
}

/// The server process, read from `/proc`.
#[derive(Clone, Debug, Serialize)]
pub struct ServerFigures {
    pub pid: u32,
    pub rss_before_kib: Option<u64>,
    /// At the end of the window, with every participant still connected.
    pub rss_end_kib: Option<u64>,
    pub rss_peak_kib: Option<u64>,
    /// (RSS at the end − RSS before) / participants connected at the end.
    pub kib_per_participant: Option<f64>,
    /// CPU used during the window (100 = one core).
    pub cpu_percent: Option<f64>,
    /// Server CPU time per command acknowledged in the window, microseconds.
    pub cpu_us_per_command: Option<f64>,
    /// The server's busiest single thread during the window: a share near 100 % of one core,
    /// or above a quarter of the server's CPU on a many-core machine, marks what serializes.
    pub busiest_thread: Option<crate::server_proc::ThreadShare>,
    /// The server's CPU by thread name (threads with at least 0.5 % of it), busiest first.
    pub threads: Vec<crate::server_proc::ThreadShare>,
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "?".to_string(), |v| v.to_string())
}

impl Report {
    /// A human-readable summary.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let l = &self.latency;
        let _ = writeln!(
            s,
            "wozkit bench against {}: {} participants, {:.2} msg/s each, {:.0} s measured",
            self.url, self.participants, self.rate_per_participant, self.duration_s
        );
        let _ = writeln!(
            s,
            "  ramp-up            {:.1} s; reached a room: {}, gave up: {}",
            self.ramp_s, self.reached_room, self.gave_up
        );
        let _ = writeln!(
            s,
            "  connected          {} at the end (peak {}), {} sessions",
            self.connected, self.peak_connected, self.sessions
        );
        let _ = writeln!(
            s,
            "  messages           {} sent, {} acked, {:.1}/s; events delivered {:.1}/s",
            self.commands_sent, self.commands_acked, self.messages_per_s, self.events_per_s
        );
        let _ = writeln!(
            s,
            "  delivery latency   p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({} samples)",
            l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms, l.samples
        );
        write_server(&mut s, self.server.as_ref());
        if let Some(c) = self.loadgen_cpu_percent {
            let _ = writeln!(s, "  load generator     CPU {c:.0}%");
        }
        write_machine(&mut s, self.machine.as_ref());
        let _ = writeln!(s, "  errors             {}", list(&self.errors));
        if self.per_url.len() > 1 {
            write_per_url(&mut s, &self.per_url);
        }
        let _ = writeln!(s, "  sessions ended     {}", list(&self.endings));
        if self.skipped_busy > 0 || self.uncorrelated_acks > 0 {
            let _ = writeln!(
                s,
                "  ticks skipped (previous command unanswered) {}, acks without a matching event {}",
                self.skipped_busy, self.uncorrelated_acks
            );
        }
        s
    }
}

/// A list of counts: `name n, …`, or `none`.
fn list(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        "none".to_string()
    } else {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Writes the server's lines of [`Report::text`]: memory, CPU and threads, or why there are
/// none.
fn write_server(s: &mut String, server: Option<&ServerFigures>) {
    if let Some(srv) = server {
        let _ = writeln!(
            s,
            "  server (pid {})    RSS {} KiB before, {} KiB at the end, peak {} KiB; {} KiB per participant; CPU {}%",
            srv.pid,
            opt(srv.rss_before_kib),
            opt(srv.rss_end_kib),
            opt(srv.rss_peak_kib),
            opt(srv.kib_per_participant.map(|k| format!("{k:.1}"))),
            opt(srv.cpu_percent.map(|c| format!("{c:.0}"))),
        );
        if let Some(us) = srv.cpu_us_per_command {
            let _ = writeln!(
                s,
                "  server CPU         {us:.0} µs per command acknowledged"
            );
        }
        if let Some(b) = &srv.busiest_thread {
            let _ = writeln!(s, "  server threads     {}", threads_text(b, &srv.threads));
        }
    } else {
        let _ = writeln!(
            s,
            "  server             process not found (give --server-pid for memory figures)"
        );
    }
}

/// Writes the machine's line of [`Report::text`] (and the warning when it was not quiet).
fn write_machine(s: &mut String, machine: Option<&MachineFigures>) {
    match machine {
        Some(m) => {
            let _ = writeln!(
                s,
                "  machine            {} CPUs; busy {:.0}%, other processes {} (100% = one core); steal {:.1}%, iowait {:.1}% of all CPU time",
                m.cpus,
                m.busy_cpu_percent,
                m.foreign_cpu_percent.map_or_else(
                    || "not measured (server process unknown)".to_string(),
                    |f| format!("{f:.0}%")
                ),
                m.steal_percent,
                m.iowait_percent,
            );
            if !m.quiet {
                let _ = writeln!(s, "  WARNING            {}", not_quiet_warning(m));
            }
        }
        None => {
            let _ = writeln!(
                s,
                "  machine            not measured (needs Linux's /proc/stat)"
            );
        }
    }
}

/// Writes one line of [`Report::text`] per URL.
fn write_per_url(s: &mut String, per_url: &[UrlFigures]) {
    for u in per_url {
        let _ = writeln!(
            s,
            "  {}: {} participants, {} reached a room ({} gave up), {} sessions; {:.1} msg/s acked; p50 {:.2} ms p99 {:.2} ms ({} samples); errors {}",
            u.url,
            u.participants,
            u.reached_room,
            u.gave_up,
            u.sessions,
            u.messages_per_s,
            u.latency.p50_ms,
            u.latency.p99_ms,
            u.latency.samples,
            list(&u.errors),
        );
    }
}

/// The server's busiest thread and its CPU by thread name, on one line.
pub fn threads_text(
    busiest: &crate::server_proc::ThreadShare,
    threads: &[crate::server_proc::ThreadShare],
) -> String {
    let groups: Vec<String> = threads
        .iter()
        .map(|g| {
            format!(
                "{} ×{} {:.0}% ({:.0}% of a core)",
                g.name, g.threads, g.share_percent, g.cpu_percent
            )
        })
        .collect();
    format!(
        "busiest: {} with {:.0}% of the server's CPU ({:.0}% of a core); by name: {}",
        busiest.name,
        busiest.share_percent,
        busiest.cpu_percent,
        groups.join(", ")
    )
}

/// The warning for a window during which the machine was not quiet.
pub fn not_quiet_warning(m: &MachineFigures) -> String {
    format!(
        "the machine was not quiet during the window: {}; these figures are not comparable \
         with runs on a quiet machine",
        m.warnings.join("; ")
    )
}
