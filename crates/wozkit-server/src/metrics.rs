//! `GET /metrics`: the server's figures in the Prometheus text exposition format (OpenMetrics
//! 1.0 text, which Prometheus scrapes natively), encoded by `prometheus-client`.
//!
//! Where it is served: on a separate address of its own, without a token (`wozkit serve
//! --metrics-addr`, see [`crate::launch_with_metrics_listener`]), and/or on the main address
//! behind a bearer token ([`Tunables::metrics_token`](crate::Tunables::metrics_token), from
//! `WOZKIT_METRICS_TOKEN`). Without a token the main address answers `/metrics` with 404.
//!
//! What is measured where (`docs/operations.md` lists the series):
//! - counts kept elsewhere are read at scrape time and never kept twice: live rooms from the room
//!   registry, waiting participants per study and role from the lobby;
//! - connections are counted by a guard each WebSocket loop holds ([`Metrics::connection`]);
//! - events appended and append latency by the metered store (`crate::metered_store`) that wraps
//!   the store once, so every append is timed in one place;
//! - view build time where a role's view frame is built (the room's `view_frame`);
//! - dialogue-system latency and errors where a reply is asked for (`crate::chat`);
//! - HTTP responses by route group and status class by a layer of the router
//!   ([`count_responses`]), keyed by the matched route template, never the raw path.
//!
//! Measuring costs atomics only: every labelled series the hot paths touch is created at start
//! (the label values are known then: groups, classes, operations, the studies' systems) and kept
//! as a plain handle, and histograms are arrays of atomic counters ([`Timing`]), not the
//! crate's mutex-guarded `Histogram`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};
use wozkit_core::load::LoadedStudy;
use wozkit_systems::SystemError;

use crate::app::AppState;

/// The content type of the exposition.
const CONTENT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of a series: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;

/// The bearer token that opens `/metrics` on the main address. Its `Debug` hides the value.
#[derive(Clone)]
pub struct MetricsToken(String);

impl MetricsToken {
    /// A token; `None` when it is empty (an empty token would open `/metrics` to anyone).
    pub fn new(token: &str) -> Option<MetricsToken> {
        let t = token.trim();
        (!t.is_empty()).then(|| MetricsToken(t.to_string()))
    }

    /// Whether the `Authorization` header carries this token (`Bearer TOKEN`), compared in time
    /// independent of where the first difference is.
    fn admits(&self, headers: &HeaderMap) -> bool {
        crate::security::bearer_is(headers, &self.0)
    }
}

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(…)")
    }
}

/// Bucket bounds (seconds) of a store append: an fsync is a fraction of a millisecond on a local
/// disk, a loaded PostgreSQL tens of milliseconds.
const APPEND_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];
/// Bucket bounds (seconds) of building a view frame: tens of microseconds usually.
const VIEW_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
];
/// Bucket bounds (seconds) of a dialogue system's reply: a model's answer takes seconds.
const SYSTEM_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];

/// A histogram of durations made of atomic counters: observing is two `fetch_add`s, no lock.
/// Clones share the counts.
#[derive(Clone, Debug)]
pub struct Timing(Arc<TimingInner>);

#[derive(Debug)]
struct TimingInner {
    /// Upper bounds in seconds, ascending; one more bucket (`+Inf`) follows.
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative), `bounds.len() + 1` of them.
    counts: Box<[AtomicU64]>,
    /// Sum of the observations in nanoseconds.
    sum_ns: AtomicU64,
}

impl Timing {
    fn new(bounds: &'static [f64]) -> Timing {
        Timing(Arc::new(TimingInner {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }))
    }

    /// Counts one duration.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = self.0.bounds.partition_point(|b| *b < s);
        self.0.counts[i].fetch_add(1, Ordering::Relaxed);
        self.0.sum_ns.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Observes the time until the returned guard is dropped.
    pub fn start(&self) -> Timer<'_> {
        Timer {
            timing: self,
            started: Instant::now(),
        }
    }
}

/// Times from [`Timing::start`] until dropped.
pub struct Timer<'a> {
    timing: &'a Timing,
    started: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.timing.observe(self.started.elapsed());
    }
}

impl TypedMetric for Timing {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Timing {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let t = &self.0;
        let buckets: Vec<(f64, u64)> = t
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(t.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        // The count is the buckets' sum, so the `+Inf` bucket always equals it.
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = t.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The store operations that write events, each timed: `append`, `append_once`, `submit`.
#[derive(Clone, Copy, Debug)]
pub enum AppendOp {
    Append = 0,
    AppendOnce = 1,
    Submit = 2,
}

const APPEND_OPS: [&str; 3] = ["append", "append_once", "submit"];

/// Kinds of WebSocket connection.
#[derive(Clone, Copy, Debug)]
pub enum ConnKind {
    /// A participant in the waiting room.
    Waiting = 0,
    /// A participant in a room.
    Room = 1,
    /// A researcher observing a room.
    Observer = 2,
    /// A participant's or observer's socket this instance relays to the instance that runs
    /// the room (`crate::ws::relay`); the owner counts it again under its own kind.
    Relayed = 3,
}

const CONN_KINDS: [&str; 4] = ["waiting", "room", "observer", "relayed"];

/// Route groups of the HTTP counts, from the matched route template's first segment.
const GROUPS: [&str; 11] = [
    "entry",
    "participant",
    "ws",
    "static",
    "leaderboard",
    "try",
    "researcher",
    "health",
    "metrics",
    "other",
    "unmatched",
];

/// The group of a matched route template (`None`: no route matched, a 404 of the fallback).
fn group_of(template: Option<&str>) -> usize {
    let Some(t) = template else {
        return GROUPS.len() - 1;
    };
    let first = t.trim_start_matches('/').split('/').next().unwrap_or("");
    let name = match first {
        "" | "join" => "entry",
        "p" => "participant",
        "ws" => "ws",
        "assets" | "study" => "static",
        "leaderboard" => "leaderboard",
        "try" => "try",
        "researcher" => "researcher",
        "healthz" => "health",
        "metrics" => "metrics",
        _ => "other",
    };
    GROUPS
        .iter()
        .position(|g| *g == name)
        .unwrap_or(GROUPS.len() - 2)
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Error kinds of a dialogue system's reply ([`SystemError`]'s variants).
const ERROR_KINDS: [&str; 7] = [
    "timeout",
    "connection",
    "status",
    "bad_response",
    "circuit_open",
    "queue_full",
    "config",
];

fn error_kind(e: &SystemError) -> usize {
    match e {
        SystemError::Timeout { .. } => 0,
        SystemError::Connection { .. } => 1,
        SystemError::Status { .. } => 2,
        SystemError::BadResponse { .. } => 3,
        SystemError::CircuitOpen { .. } => 4,
        SystemError::QueueFull { .. } => 5,
        SystemError::Config { .. } => 6,
    }
}

/// One dialogue system's series.
struct SystemSeries {
    latency: Timing,
    errors: [Counter; ERROR_KINDS.len()],
}

/// Every series the server keeps, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    events_appended: Counter,
    append: [Timing; APPEND_OPS.len()],
    view: Timing,
    connections: [Gauge; CONN_KINDS.len()],
    /// By group, then status class.
    http: Vec<[Counter; CLASSES.len()]>,
    /// By system name (the names the served studies declare).
    systems: HashMap<String, SystemSeries>,
    /// Studies served, in order: each has its waiting series even while nobody waits.
    studies: Vec<String>,
    /// Panics caught in a room's task or the lease sweep, by where.
    panics: [Counter; PANIC_SITES.len()],
}

/// Where a caught panic happened (`wozkit_task_panics{task=…}`).
pub const PANIC_SITES: [&str; 2] = ["room", "lease_sweep"];

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Registers what the store's memory of event logs has done and holds (SQLite stores only).
fn register_memory(now: &mut Registry, figures: wozkit_store::cached::CacheFigures) {
    let reads = Family::<Labels, Counter>::default();
    reads
        .get_or_create(&vec![("from", "memory".into())])
        .inc_by(figures.hits);
    reads
        .get_or_create(&vec![("from", "store".into())])
        .inc_by(figures.misses);
    now.register(
        "wozkit_store_log_reads",
        "Reads of a session's event log, answered from memory or from the store (SQLite only; see docs/architecture.md)",
        reads,
    );
    let held = Family::<Labels, Gauge>::default();
    held.get_or_create(&vec![("what", "logs".into())])
        .set(figures.logs as i64);
    held.get_or_create(&vec![("what", "events".into())])
        .set(figures.events as i64);
    now.register(
        "wozkit_store_memory_held",
        "Event logs and events held in memory now",
        held,
    );
}

/// Registers the HTTP responses' counters: per route group, one per status class.
fn register_http(registry: &mut Registry) -> Vec<[Counter; CLASSES.len()]> {
    let http_family = Family::<Labels, Counter>::default();
    let http = GROUPS
        .iter()
        .map(|g| {
            CLASSES.map(|c| {
                http_family
                    .get_or_create_owned(&vec![("group", g.to_string()), ("class", c.into())])
            })
        })
        .collect();
    registry.register(
        "wozkit_http_responses",
        "HTTP responses by route group (of the matched route template; unmatched for 404s of unknown paths) and status class",
        http_family,
    );
    http
}

/// Registers each system's reply time and errors, once per system name over `studies`.
fn register_systems(
    registry: &mut Registry,
    studies: &[LoadedStudy],
) -> HashMap<String, SystemSeries> {
    let latency_family = Family::<Labels, Timing, fn() -> Timing>::new_with_constructor(|| {
        Timing::new(SYSTEM_BUCKETS)
    });
    let error_family = Family::<Labels, Counter>::default();
    let mut systems = HashMap::new();
    for s in studies {
        for name in s.study.systems.keys() {
            if systems.contains_key(name) {
                continue;
            }
            let latency = latency_family.get_or_create_owned(&vec![("system", name.clone())]);
            let errors = ERROR_KINDS.map(|k| {
                error_family
                    .get_or_create_owned(&vec![("system", name.clone()), ("kind", k.into())])
            });
            systems.insert(name.clone(), SystemSeries { latency, errors });
        }
    }
    registry.register_with_unit(
        "wozkit_system_reply_duration",
        "Time a dialogue system under test took to reply (successful or not)",
        Unit::Seconds,
        latency_family,
    );
    registry.register(
        "wozkit_system_errors",
        "Replies a dialogue system under test failed to give, by kind of error",
        error_family,
    );
    systems
}

impl Metrics {
    /// Counts a panic caught in a task of kind `site` (one of [`PANIC_SITES`]).
    pub fn panicked(&self, site: &str) {
        if let Some(i) = PANIC_SITES.iter().position(|s| *s == site) {
            self.panics[i].inc();
        }
    }

    /// Registers every series of a server serving `studies` (their systems get their own
    /// series).
    pub fn new(studies: &[LoadedStudy]) -> Metrics {
        let mut registry = Registry::default();
        let events_appended = Counter::default();
        registry.register(
            "wozkit_events_appended",
            "Events appended to session logs (by appends, once-only appends and judgment submissions)",
            events_appended.clone(),
        );
        let append_family = Family::<Labels, Timing, fn() -> Timing>::new_with_constructor(|| {
            Timing::new(APPEND_BUCKETS)
        });
        let append =
            APPEND_OPS.map(|op| append_family.get_or_create_owned(&vec![("op", op.into())]));
        registry.register_with_unit(
            "wozkit_store_append_duration",
            "Time of one store write of events, until durable (op: append, append_once, submit)",
            Unit::Seconds,
            append_family,
        );
        let view = Timing::new(VIEW_BUCKETS);
        registry.register_with_unit(
            "wozkit_view_build_duration",
            "Time to build one role's view of a room and encode its frame",
            Unit::Seconds,
            view.clone(),
        );
        let conn_family = Family::<Labels, Gauge>::default();
        let connections =
            CONN_KINDS.map(|k| conn_family.get_or_create_owned(&vec![("kind", k.into())]));
        registry.register(
            "wozkit_connections_open",
            "Open WebSocket connections (kind: waiting, room, observer; relayed: sockets this instance relays to the room's instance)",
            conn_family,
        );
        let http = register_http(&mut registry);
        let systems = register_systems(&mut registry, studies);
        let panic_family = Family::<Labels, Counter>::default();
        let panics =
            PANIC_SITES.map(|t| panic_family.get_or_create_owned(&vec![("task", t.into())]));
        registry.register(
            "wozkit_task_panics",
            "Panics caught in a task (task: room, lease_sweep); the task ends, other rooms and the process go on",
            panic_family,
        );
        Metrics {
            panics,
            registry,
            events_appended,
            append,
            view,
            connections,
            http,
            systems,
            studies: studies.iter().map(|s| s.study.id.clone()).collect(),
        }
    }

    /// Counts a store write of `events` events that took `took`.
    pub(crate) fn appended(&self, op: AppendOp, events: usize, took: Duration) {
        self.append[op as usize].observe(took);
        if events > 0 {
            self.events_appended.inc_by(events as u64);
        }
    }

    /// Times building a view frame until the guard is dropped.
    pub(crate) fn view_timer(&self) -> Timer<'_> {
        self.view.start()
    }

    /// Counts an open connection of `kind` until the guard is dropped.
    pub(crate) fn connection(&self, kind: ConnKind) -> ConnGuard {
        let gauge = self.connections[kind as usize].clone();
        gauge.inc();
        ConnGuard(gauge)
    }

    /// Counts a dialogue system's reply (or failure) that took `took`.
    pub(crate) fn system_replied(&self, system: &str, took: Duration) {
        if let Some(s) = self.systems.get(system) {
            s.latency.observe(took);
        }
    }

    /// Counts a dialogue system's failure to reply.
    pub(crate) fn system_failed(&self, system: &str, e: &SystemError) {
        if let Some(s) = self.systems.get(system) {
            s.errors[error_kind(e)].inc();
        }
    }

    fn http_response(&self, group: usize, status: StatusCode) {
        let class = (status.as_u16() / 100).clamp(1, 5) as usize - 1;
        self.http[group][class].inc();
    }

    /// The whole exposition: the kept series, then those read from the lobby and the rooms now.
    fn encode(&self, app: &AppState) -> Result<String, std::fmt::Error> {
        let mut now = Registry::default();
        let rooms = Gauge::<i64>::default();
        rooms.set(app.rooms.len() as i64);
        now.register(
            "wozkit_rooms_live",
            "Rooms in memory whose task is running (live sessions, and ended ones lingering for late connections)",
            rooms,
        );
        let waiting = Family::<Labels, Gauge>::default();
        let mut per_study: HashMap<&str, (i64, i64)> =
            self.studies.iter().map(|s| (s.as_str(), (0, 0))).collect();
        let counts = app.lobby.counts();
        for c in &counts {
            let e = per_study.entry(c.key.study.as_str()).or_default();
            e.0 += c.users as i64;
            e.1 += c.wizards as i64;
        }
        for (study, (users, wizards)) in per_study {
            for (role, n) in [("user", users), ("wizard", wizards)] {
                waiting
                    .get_or_create(&vec![("study", study.to_string()), ("role", role.into())])
                    .set(n);
            }
        }
        now.register(
            "wozkit_waiting_participants",
            "Participants waiting in the waiting room for a partner, by study and role",
            waiting,
        );
        if let Some(figures) = app.store.memory() {
            register_memory(&mut now, figures);
        }
        let mut out = String::with_capacity(16 * 1024);
        text::encode_registry(&mut out, &self.registry)?;
        text::encode_registry(&mut out, &now)?;
        text::encode_eof(&mut out)?;
        Ok(out)
    }
}

/// Keeps a connection counted while held.
pub struct ConnGuard(Gauge);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The router layer counting every response by route group and status class.
pub(crate) async fn count_responses(
    State(app): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let group = group_of(
        req.extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str),
    );
    let res = next.run(req).await;
    app.metrics.http_response(group, res.status());
    res
}

fn exposition(app: &AppState) -> Response {
    match app.metrics.encode(app) {
        Ok(body) => ([(CONTENT_TYPE, HeaderValue::from_static(CONTENT))], body).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded",
        )
            .into_response(),
    }
}

/// `GET /metrics` on the main address: 404 without a configured token, 401 without the right
/// `Authorization: Bearer` header.
async fn scrape_main(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let Some(token) = &app.tunables.metrics_token else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if !token.admits(&headers) {
        return (
            StatusCode::UNAUTHORIZED,
            [(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"wozkit metrics\""),
            )],
            "/metrics needs the token of WOZKIT_METRICS_TOKEN as `Authorization: Bearer TOKEN`",
        )
            .into_response();
    }
    exposition(&app)
}

/// The `/metrics` route of the main router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(scrape_main))
}

/// The router of the separate metrics address: `GET /metrics` without a token, nothing else.
fn exporter(app: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(app): State<AppState>| async move { exposition(&app) }),
        )
        .with_state(app)
}

/// Serves the exporter on `listener` until the server stops.
pub(crate) fn serve_exporter(app: AppState, listener: tokio::net::TcpListener) {
    tokio::spawn(async move {
        let stop = app.clone();
        let served = axum::serve(listener, exporter(app))
            .with_graceful_shutdown(async move { stop.stopping().await })
            .await;
        if let Err(e) = served {
            tracing::error!("the metrics address stopped serving: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::AUTHORIZATION;

    #[test]
    fn route_templates_fall_in_their_groups() {
        let g = |t: Option<&str>| GROUPS[group_of(t)];
        assert_eq!(g(Some("/")), "entry");
        assert_eq!(g(Some("/join")), "entry");
        assert_eq!(g(Some("/p/chat/send")), "participant");
        assert_eq!(g(Some("/study/{study}/{*file}")), "static");
        assert_eq!(g(Some("/researcher/session/{id}/observe")), "researcher");
        assert_eq!(g(Some("/metrics")), "metrics");
        assert_eq!(g(Some("/something-new")), "other");
        assert_eq!(g(None), "unmatched");
    }

    #[test]
    fn a_timing_puts_each_duration_in_the_first_bucket_that_holds_it() {
        let t = Timing::new(&[0.001, 0.01]);
        t.observe(Duration::from_micros(500));
        t.observe(Duration::from_millis(1));
        t.observe(Duration::from_millis(5));
        t.observe(Duration::from_secs(3));
        let counts: Vec<u64> =
            t.0.counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
        assert_eq!(counts, [2, 1, 1]);
        assert_eq!(t.0.sum_ns.load(Ordering::Relaxed), 3_006_500_000);
    }

    #[test]
    fn the_token_is_compared_whole() {
        let token = MetricsToken::new(" s3cret ").expect("a token");
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            token.admits(&h)
        };
        assert!(with("Bearer s3cret"));
        assert!(!with("Bearer s3cre"));
        assert!(!with("Bearer s3cret2"));
        assert!(!with("Basic s3cret"));
        assert!(!token.admits(&HeaderMap::new()));
        assert!(MetricsToken::new("  ").is_none());
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
