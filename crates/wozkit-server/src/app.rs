//! The shared state every handler, connection and room holds: a cheap-to-clone handle around an
//! `Arc`. It owns no dialogue state itself: live sessions belong to their room tasks, the waiting
//! queues to the lobby, and everything durable to the store.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indexmap::IndexMap;
use tokio::sync::{mpsc, watch};
use wozkit_core::load::LoadedStudy;
use wozkit_store::Store;

use crate::auth::ResearcherSessions;
use crate::error::StartError;
use crate::lobby::Lobby;
use crate::room::Rooms;
use crate::security::KeyedLimiter;
use wozkit_data::completion::CodeKey;

/// What to serve and how.
pub struct Config {
    /// Studies served; the first is used when an entry link names none.
    pub studies: Vec<LoadedStudy>,
    pub tunables: Tunables,
}

/// Timings and limits that tests shrink and deployments rarely change.
#[derive(Clone, Debug)]
pub struct Tunables {
    /// The simulated user that takes the user's seat when a test participant arrives as the
    /// wizard (`serve --simulated-user`), so a researcher pilots a study alone.
    pub simulated_user: Option<Arc<crate::room::ModelUser>>,
    /// Lab links may carry `simulated=NAME` (with `test=1`): their participant is played by
    /// simulated user NAME through the pages (`wozkit simulate-users` on a chat study). Off in
    /// `serve`, where such a link is refused.
    pub simulated_joins: bool,
    /// A built-in bot waits between these many milliseconds before each move, so that it reads
    /// like a person typing rather than an instant answer.
    pub bot_pace_ms: (u64, u64),
    /// How often the waiting room tells a participant their place and waiting time.
    pub waiting_update_ms: u64,
    /// A WebSocket must send `hello` within this time.
    pub hello_timeout_ms: u64,
    /// An ended room stays alive this long for late connections before its task stops.
    pub room_linger_ms: u64,
    /// Entry links (`/join`) one client address may open per minute, in bursts of as many;
    /// each may create a participant. 0 turns the limit off (load tests from one address).
    pub join_per_minute: u32,
    /// How often the waiting room pings a waiting participant's socket (a WebSocket ping,
    /// answered by the browser itself).
    pub heartbeat_ms: u64,
    /// A waiter not heard from for this long is not paired and its place is given up: its
    /// socket died without closing (a laptop lid, a lost network).
    pub stale_after_ms: u64,
    /// Worker ids not admitted to any study (each study may list more in
    /// `evaluation.blocklist`).
    pub blocklist: std::collections::HashSet<String>,
    /// The crowd platforms' clients the review page sends decisions through, per study and
    /// platform (how they are built, from environment variables, is the caller's business).
    pub payers: Payers,
    /// The bearer token that opens `GET /metrics` on the main address (`WOZKIT_METRICS_TOKEN`);
    /// without one the main address has no `/metrics` (see [`crate::metrics`]).
    pub metrics_token: Option<crate::metrics::MetricsToken>,
    /// This instance's id among the instances sharing the store (`--instance-id`): the owner
    /// named in the leases of the rooms it runs, and the instance named in the lobby's places
    /// and notices. Random per process by default.
    pub instance_id: String,
    /// The base URL other instances reach this one at (`--advertise-url`), stored with its
    /// room leases. Empty: `http://` and the address the server listens on.
    pub advertise_url: String,
    /// How long a room lease lasts without renewal (`--room-lease-ms`); the heartbeat renews
    /// every third of it, and a room whose owner stopped renewing is taken over once its lease
    /// has run out.
    pub room_lease_ms: u64,
    /// This is the only instance on its store (always so on SQLite, which one process holds):
    /// leases left by any other instance id are stale (an earlier run of this server), so its
    /// rooms are resumed at start without waiting for those leases to expire.
    pub sole_instance: bool,
    /// The secret instances sharing a store authenticate relayed connections with
    /// (`--cluster-secret`): a participant reaching an instance that does not run their room
    /// is relayed to the one that does. `None`: no relaying either way.
    pub cluster_secret: Option<crate::ws::relay::ClusterSecret>,
    /// The reverse proxies whose `Forwarded`, `X-Forwarded-For` and `X-Forwarded-Proto`
    /// headers are believed (`--trusted-proxy`): the client address that keys the rate limits
    /// and whether the site is reached over HTTPS. From any other peer those headers are
    /// ignored. Empty: the socket's peer is the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Sites other than MTurk's worker sites that may show participant pages in a frame
    /// (`--frame-ancestors`, e.g. `https://survey.example.org`). Researcher pages are never
    /// framed by another site.
    pub frame_ancestors: Vec<String>,
    /// How long the review's Send leaves a payment or decision to the caller that claimed or
    /// sent it before another carries it on, and waits before paying again a payment of which
    /// the platform shows nothing ([`wozkit_platforms::once::Policy`]; 15 minutes).
    pub pay_policy: wozkit_platforms::once::Policy,
}

/// Crowd platform clients by (study id, platform name as entry links record it: `prolific`,
/// `mturk`).
#[derive(Clone, Default)]
pub struct Payers(
    pub std::collections::HashMap<(String, String), Arc<dyn wozkit_platforms::Payer>>,
);

impl Payers {
    /// Adds the client of `study` on its platform ([`Payer::platform`](wozkit_platforms::Payer::platform)).
    pub fn insert(&mut self, study: &str, payer: Arc<dyn wozkit_platforms::Payer>) {
        self.0
            .insert((study.to_string(), payer.platform().to_string()), payer);
    }

    /// The client of `study` on `platform`, if one was given.
    pub fn get(&self, study: &str, platform: &str) -> Option<Arc<dyn wozkit_platforms::Payer>> {
        self.0
            .get(&(study.to_string(), platform.to_string()))
            .cloned()
    }
}

impl std::fmt::Debug for Payers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            bot_pace_ms: (2500, 5000),
            waiting_update_ms: 5000,
            hello_timeout_ms: 15_000,
            room_linger_ms: 60_000,
            join_per_minute: 120,
            heartbeat_ms: 5000,
            stale_after_ms: 15_000,
            blocklist: std::collections::HashSet::new(),
            payers: Payers::default(),
            metrics_token: None,
            instance_id: wozkit_store::new_id(),
            pay_policy: wozkit_platforms::once::Policy::default(),
            advertise_url: String::new(),
            room_lease_ms: 10_000,
            sole_instance: true,
            cluster_secret: None,
            trusted_proxies: Vec::new(),
            frame_ancestors: Vec::new(),
            simulated_user: None,
            simulated_joins: false,
        }
    }
}

/// The handle to the shared state.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

/// What the handle points to.
pub struct Inner {
    /// Every event, session and participant.
    pub store: Arc<dyn Store>,
    /// Studies by id, in the order given (the default first).
    pub studies: IndexMap<String, Arc<LoadedStudy>>,
    /// Waiting participants, per study and role.
    pub(crate) lobby: Lobby,
    /// Live room tasks by session id.
    pub(crate) rooms: Rooms,
    /// Key of the completion codes (kept in the store's meta table, so codes stay verifiable).
    pub(crate) code_key: CodeKey,
    /// Logged-in researchers.
    pub(crate) researchers: ResearcherSessions,
    /// The dialogue systems under test, and their replies in flight.
    pub(crate) systems: crate::chat::Systems,
    /// Review decisions: workers blocked from the review logs, and the lock that keeps review
    /// writes and platform sends one at a time.
    pub(crate) review: crate::review::ReviewState,
    /// Arena leaderboards computed lately.
    pub(crate) leaderboards: crate::http::leaderboard::LeaderboardCache,
    /// Entry links opened per client address: bounds how fast participants can be created.
    pub(crate) joins: KeyedLimiter,
    pub tunables: Tunables,
    /// Turns true when the server stops; rooms and connections end their loops on it.
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Dropped with the last handle: tells `launch_with_listener` that every task has ended.
    _alive: mpsc::Sender<()>,
    /// Numbers connections so a room can tell two tabs of one participant apart.
    next_conn: AtomicU64,
    /// The figures `/metrics` serves (the store above already counts into them).
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// The console's figures and the per-session parts they are summed from.
    pub(crate) console_figures: crate::http::console::Figures,
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    pub(crate) async fn new(
        config: Config,
        store: Arc<dyn Store>,
        shutdown: watch::Receiver<bool>,
        alive: mpsc::Sender<()>,
    ) -> Result<AppState, StartError> {
        if config.studies.is_empty() {
            return Err(StartError::NoStudy);
        }
        let metrics = Arc::new(crate::metrics::Metrics::new(&config.studies));
        let store: Arc<dyn Store> = Arc::new(crate::metered_store::MeteredStore::new(
            store,
            metrics.clone(),
        ));
        let mut studies = IndexMap::new();
        for mut s in config.studies {
            crate::evaluation::load_stored_dialogues(store.as_ref(), &mut s).await?;
            let id = s.study.id.clone();
            if studies.insert(id.clone(), Arc::new(s)).is_some() {
                return Err(StartError::DuplicateStudy(id));
            }
        }
        let code_key = CodeKey::load_or_create(store.as_ref()).await?;
        for s in studies.values() {
            crate::evaluation::register_items(store.as_ref(), s).await?;
        }
        let review = crate::review::ReviewState::load(store.as_ref()).await?;
        let systems = crate::chat::Systems::new(studies.values().map(|s| s.as_ref()))?;
        let app = AppState(Arc::new(Inner {
            store,
            studies,
            lobby: Lobby::new(config.tunables.instance_id.clone()),
            rooms: Rooms::default(),
            code_key,
            researchers: ResearcherSessions,
            systems,
            leaderboards: Default::default(),
            review,
            joins: KeyedLimiter::per_minute(config.tunables.join_per_minute),
            tunables: config.tunables,
            shutdown,
            _alive: alive,
            next_conn: AtomicU64::new(1),
            metrics,
            console_figures: Default::default(),
        }));
        crate::chat::listen_unprompted(&app);
        Ok(app)
    }

    /// The study with this id, or the default one when `id` is `None`.
    pub fn study(&self, id: Option<&str>) -> Option<Arc<LoadedStudy>> {
        match id {
            Some(id) => self.studies.get(id).cloned(),
            None => self.studies.values().next().cloned(),
        }
    }

    pub(crate) fn conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Resolves when the server is stopping.
    pub(crate) async fn stopping(&self) {
        let mut rx = self.shutdown.clone();
        // An error means the sender is gone, which also means stop.
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Server time in milliseconds since the Unix epoch: the time of every event.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Sleeps until the epoch time `at_ms` (at once if it has passed).
pub(crate) async fn sleep_until_ms(at_ms: u64) {
    tokio::time::sleep(Duration::from_millis(at_ms.saturating_sub(now_ms()))).await;
}
