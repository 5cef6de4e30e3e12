//! What a run measures, shared by every participant task.
//!
//! Delivery latency is "the sender sent a command → the partner received the event it caused".
//! The sender knows its send instant (by command id) and, once the `ack` arrives, which `seq`
//! the command's first event got; the partner knows when an event with that `seq` arrived from
//! the other role. Either may come first (the server sends the events to both before the ack),
//! so both sides meet in a small per-session map ([`Pairing`]): whoever comes second records
//! the sample. The server stores events before sending them, so every sample includes the
//! durable write.
//!
//! Only what happens inside the measurement window counts (samples by their send instant,
//! acks by their arrival); errors are counted over the whole run, ramp-up included.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Entries of a [`Pairing`] older than this were never matched (a lost ack, a dropped
/// connection) and are forgotten.
const STALE: Duration = Duration::from_secs(60);
/// A [`Pairing`] is swept for stale entries when it grows past this.
const SWEEP_AT: usize = 128;
/// Highest latency the histogram tracks, in microseconds (larger samples are clamped).
const MAX_LATENCY_US: u64 = 600_000_000;

/// Locks a std mutex; a panic elsewhere leaves the counters usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The two halves of latency samples of one session, keyed by event `seq`.
#[derive(Debug, Default)]
pub struct Pairing {
    sent: HashMap<u64, Instant>,
    received: HashMap<u64, Instant>,
}

impl Pairing {
    /// The sender learnt (from its ack) that its command sent at `at` produced event `seq`.
    /// Returns the latency if the partner already has the event.
    pub fn sent(&mut self, seq: u64, at: Instant) -> Option<(Instant, Duration)> {
        if let Some(got) = self.received.remove(&seq) {
            return Some((at, got.saturating_duration_since(at)));
        }
        self.sent.insert(seq, at);
        self.sweep(at);
        None
    }

    /// The partner received event `seq` at `at`. Returns the send instant and the latency if
    /// the sender's ack already came.
    pub fn received(&mut self, seq: u64, at: Instant) -> Option<(Instant, Duration)> {
        if let Some(sent) = self.sent.remove(&seq) {
            return Some((sent, at.saturating_duration_since(sent)));
        }
        self.received.insert(seq, at);
        self.sweep(at);
        None
    }

    fn sweep(&mut self, now: Instant) {
        if self.sent.len() + self.received.len() < SWEEP_AT {
            return;
        }
        let fresh = |t: &mut Instant| now.saturating_duration_since(*t) < STALE;
        self.sent.retain(|_, t| fresh(t));
        self.received.retain(|_, t| fresh(t));
    }

    pub fn len(&self) -> usize {
        self.sent.len() + self.received.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Every run-wide counter and the latency histogram.
pub struct Stats {
    /// Start and end of the measurement window (set once each by the run).
    window_start: OnceLock<Instant>,
    window_end: OnceLock<Instant>,
    /// Microseconds, 3 significant digits.
    latency: Mutex<Histogram<u64>>,
    /// Commands sent inside the window, and those of them acknowledged (counted by the instant
    /// the command was sent, like the latency samples, so a command sent before the window and
    /// acknowledged in it counts in neither: `acked` never exceeds `sent`).
    pub sent: AtomicU64,
    pub acked: AtomicU64,
    /// Acks whose command could not be matched to an event (a command that stored nothing).
    pub uncorrelated: AtomicU64,
    /// Event frames received inside the window, by every participant.
    pub events: AtomicU64,
    /// Ticks skipped because the previous command was not acknowledged yet.
    pub skipped_busy: AtomicU64,
    /// Error codes (the server's and the load generator's), whole run.
    errors: Mutex<BTreeMap<String, u64>>,
    /// Why sessions ended (each participant reports its own `ended`), whole run.
    ended: Mutex<BTreeMap<String, u64>>,
    /// Distinct sessions that reached a room.
    sessions: Mutex<std::collections::HashSet<String>>,
    /// Participants with an open room connection now, and the most at once.
    pub connected: AtomicUsize,
    pub peak_connected: AtomicUsize,
    /// Participants that reached a room at least once / gave up after repeated failures.
    pub reached_room: AtomicUsize,
    pub gave_up: AtomicUsize,
    /// The latency half-samples of each live session.
    pairings: Mutex<HashMap<String, Arc<Mutex<Pairing>>>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            window_start: OnceLock::new(),
            window_end: OnceLock::new(),
            // Constant, valid bounds: this cannot fail.
            latency: Mutex::new(
                Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds"),
            ),
            sent: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            uncorrelated: AtomicU64::new(0),
            events: AtomicU64::new(0),
            skipped_busy: AtomicU64::new(0),
            errors: Mutex::default(),
            ended: Mutex::default(),
            sessions: Mutex::default(),
            connected: AtomicUsize::new(0),
            peak_connected: AtomicUsize::new(0),
            reached_room: AtomicUsize::new(0),
            gave_up: AtomicUsize::new(0),
            pairings: Mutex::default(),
        }
    }
}

/// The latency figures, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    pub samples: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Stats {
    pub fn start_window(&self, at: Instant) {
        let _ = self.window_start.set(at);
    }

    pub fn end_window(&self, at: Instant) {
        let _ = self.window_end.set(at);
    }

    /// Whether `t` falls inside the measurement window.
    pub fn in_window(&self, t: Instant) -> bool {
        self.window_start.get().is_some_and(|s| t >= *s)
            && self.window_end.get().is_none_or(|e| t < *e)
    }

    pub fn count_in_window(&self, counter: &AtomicU64, at: Instant) {
        if self.in_window(at) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn error(&self, code: &str) {
        *lock(&self.errors).entry(code.to_string()).or_default() += 1;
    }

    pub fn ended(&self, reason: &str) {
        *lock(&self.ended).entry(reason.to_string()).or_default() += 1;
    }

    pub fn errors(&self) -> BTreeMap<String, u64> {
        lock(&self.errors).clone()
    }

    pub fn endings(&self) -> BTreeMap<String, u64> {
        lock(&self.ended).clone()
    }

    pub fn sessions(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// A participant's room connection opened in `session`.
    pub fn joined_room(&self, session: &str, first_time: bool) {
        lock(&self.sessions).insert(session.to_string());
        let now = self.connected.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak_connected.fetch_max(now, Ordering::Relaxed);
        if first_time {
            self.reached_room.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn left_room(&self) {
        self.connected.fetch_sub(1, Ordering::Relaxed);
    }

    /// The meeting point of a session's two participants.
    pub fn pairing(&self, session: &str) -> Arc<Mutex<Pairing>> {
        lock(&self.pairings)
            .entry(session.to_string())
            .or_default()
            .clone()
    }

    /// The session is over for this participant; the map goes when both have let go.
    pub fn release_pairing(&self, session: &str, mine: Arc<Mutex<Pairing>>) {
        let mut all = lock(&self.pairings);
        drop(mine);
        if all.get(session).is_some_and(|p| Arc::strong_count(p) == 1) {
            all.remove(session);
        }
    }

    /// Records a sample if its command was sent inside the window.
    pub fn sample(&self, sent: Instant, latency: Duration) {
        if !self.in_window(sent) {
            return;
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        lock(&self.latency).saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    pub fn latency(&self) -> Latency {
        let h = lock(&self.latency);
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            samples: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            mean_ms: (h.mean() / 10.0).round() / 100.0,
        }
    }
}

/// Where one participant's figures go: the run's overall [`Stats`] and those of the URL the
/// participant was sent to (`Config::urls`). The meeting point of latency halves is the overall
/// one, so a pair split across two URLs (instances sharing a lobby) is still measured; a sample
/// counts for the URL of the participant who completed it.
#[derive(Clone, Copy)]
pub struct Recorder<'a> {
    pub all: &'a Stats,
    pub url: &'a Stats,
}

impl Recorder<'_> {
    pub fn error(&self, code: &str) {
        self.all.error(code);
        self.url.error(code);
    }

    pub fn ended(&self, reason: &str) {
        self.all.ended(reason);
        self.url.ended(reason);
    }

    /// Counts `at` in the `counter` (a field of [`Stats`]) of both, if inside the window.
    pub fn count_in_window(&self, counter: fn(&Stats) -> &AtomicU64, at: Instant) {
        self.all.count_in_window(counter(self.all), at);
        self.url.count_in_window(counter(self.url), at);
    }

    pub fn gave_up(&self) {
        self.all.gave_up.fetch_add(1, Ordering::Relaxed);
        self.url.gave_up.fetch_add(1, Ordering::Relaxed);
    }

    pub fn joined_room(&self, session: &str, first_time: bool) {
        self.all.joined_room(session, first_time);
        self.url.joined_room(session, first_time);
    }

    pub fn left_room(&self) {
        self.all.left_room();
        self.url.left_room();
    }

    pub fn sample(&self, sent: Instant, latency: Duration) {
        self.all.sample(sent, latency);
        self.url.sample(sent, latency);
    }

    /// The session's meeting point, shared by the whole run.
    pub fn pairing(&self, session: &str) -> Arc<Mutex<Pairing>> {
        self.all.pairing(session)
    }

    pub fn release_pairing(&self, session: &str, mine: Arc<Mutex<Pairing>>) {
        self.all.release_pairing(session, mine);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_side_may_come_first() {
        let t0 = Instant::now();
        let mut p = Pairing::default();
        // Partner first, ack later.
        assert_eq!(p.received(5, t0 + Duration::from_millis(3)), None);
        assert_eq!(p.sent(5, t0), Some((t0, Duration::from_millis(3))));
        // Ack first, partner later.
        assert_eq!(p.sent(9, t0), None);
        assert_eq!(
            p.received(9, t0 + Duration::from_millis(7)),
            Some((t0, Duration::from_millis(7)))
        );
        assert!(p.is_empty());
    }

    #[test]
    fn unmatched_halves_are_forgotten_after_a_while() {
        let t0 = Instant::now();
        let mut p = Pairing::default();
        for seq in 0..SWEEP_AT as u64 {
            p.received(seq, t0);
        }
        let later = t0 + STALE + Duration::from_secs(1);
        p.received(10_000, later);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn only_the_window_counts() {
        let s = Stats::default();
        let t0 = Instant::now();
        s.sample(t0, Duration::from_millis(1));
        assert_eq!(s.latency().samples, 0);
        s.start_window(t0);
        s.sample(t0, Duration::from_millis(2));
        s.sample(t0 + Duration::from_millis(1), Duration::from_millis(40));
        s.end_window(t0 + Duration::from_secs(1));
        s.sample(t0 + Duration::from_secs(2), Duration::from_millis(9));
        let l = s.latency();
        assert_eq!(l.samples, 2);
        assert!((l.max_ms - 40.0).abs() < 0.1, "{l:?}");
        assert!((l.p50_ms - 2.0).abs() < 0.01, "{l:?}");
    }

    #[test]
    fn a_recorder_counts_for_the_run_and_its_url() {
        let (all, a, b) = (Stats::default(), Stats::default(), Stats::default());
        let t0 = Instant::now();
        for s in [&all, &a, &b] {
            s.start_window(t0);
        }
        let ra = Recorder { all: &all, url: &a };
        let rb = Recorder { all: &all, url: &b };
        ra.joined_room("s1", true);
        rb.joined_room("s2", true);
        rb.joined_room("s3", false);
        ra.count_in_window(|s| &s.acked, t0);
        rb.count_in_window(|s| &s.acked, t0);
        rb.count_in_window(|s| &s.acked, t0);
        rb.sample(t0, Duration::from_millis(5));
        ra.error("x");
        assert_eq!(all.reached_room.load(Ordering::Relaxed), 2);
        assert_eq!(a.reached_room.load(Ordering::Relaxed), 1);
        assert_eq!((all.sessions(), a.sessions(), b.sessions()), (3, 1, 2));
        assert_eq!(all.acked.load(Ordering::Relaxed), 3);
        assert_eq!(b.acked.load(Ordering::Relaxed), 2);
        assert_eq!(
            (
                all.latency().samples,
                a.latency().samples,
                b.latency().samples
            ),
            (1, 0, 1)
        );
        assert_eq!(a.errors().get("x"), Some(&1));
        assert!(b.errors().is_empty());
        // One meeting point per session for the whole run.
        assert!(Arc::ptr_eq(&ra.pairing("s9"), &rb.pairing("s9")));
    }

    #[test]
    fn pairings_go_when_both_sides_let_go() {
        let s = Stats::default();
        let a = s.pairing("s1");
        let b = s.pairing("s1");
        assert!(Arc::ptr_eq(&a, &b));
        s.release_pairing("s1", a);
        assert_eq!(lock(&s.pairings).len(), 1);
        s.release_pairing("s1", b);
        assert_eq!(lock(&s.pairings).len(), 0);
    }
}
