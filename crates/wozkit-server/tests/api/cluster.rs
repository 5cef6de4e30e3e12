//! Several server instances on one store, for the scale-out tests (`instances.rs`,
//! `relay.rs`): starting and stopping an instance, a pair on one instance, a participant
//! reaching another instance, the room's lease, and the two-store setups (one SQLite store
//! shared in this process, or one PostgreSQL database with a connection pool per instance).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wozkit_core::event::Event;
use wozkit_server::{
    ClusterSecret, Config, MetricsToken, StartError, Tunables, launch_with_listener,
};
use wozkit_store::Store;
use wozkit_store::testing::TestDatabase;

use crate::client::{Client, Ws};
use crate::helpers::{Tiny, fast, pair_links_at};

/// Lease length of the test instances: short, so a takeover comes soon.
pub const LEASE_MS: u64 = 600;

/// The bearer token that opens each test instance's `/metrics`.
pub const METRICS_TOKEN: &str = "cluster-metrics-token";

/// One server instance on a shared store.
pub struct Instance {
    pub addr: SocketAddr,
    pub stop: Option<oneshot::Sender<()>>,
    pub handle: JoinHandle<Result<(), StartError>>,
}

/// Starts instance `id` of the tiny study on `store`, with leases of [`LEASE_MS`], the
/// cluster secret `secret` (none: the relay route is closed) and `/metrics` open to
/// [`METRICS_TOKEN`].
pub async fn instance(
    id: &str,
    store: Arc<dyn Store>,
    tiny: &Tiny,
    secret: Option<&str>,
) -> Instance {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let config = Config {
        studies: vec![tiny.study()],
        tunables: Tunables {
            instance_id: id.to_owned(),
            room_lease_ms: LEASE_MS,
            sole_instance: false,
            cluster_secret: secret.and_then(ClusterSecret::new),
            metrics_token: MetricsToken::new(METRICS_TOKEN),
            ..fast()
        },
    };
    let handle = tokio::spawn(launch_with_listener(config, store, listener, async {
        let _ = stopped.await;
    }));
    Instance {
        addr,
        stop: Some(stop),
        handle,
    }
}

/// Stops an instance cleanly and checks that it stopped.
pub async fn stop(mut i: Instance) {
    if let Some(stop) = i.stop.take() {
        let _ = stop.send(());
    }
    let stopped = tokio::time::timeout(Duration::from_secs(10), &mut i.handle).await;
    assert!(
        matches!(stopped, Ok(Ok(Ok(())))),
        "the instance at {} did not stop: {stopped:?}",
        i.addr
    );
}

/// The same participant (cookie and seat) reaching the instance at `addr`.
pub fn at(c: &Client, addr: SocketAddr) -> Client {
    Client {
        addr,
        cookie: c.cookie.clone(),
        seat: c.seat.clone(),
    }
}

/// A user and a wizard paired on one instance.
pub struct Pair {
    pub user: Client,
    pub wizard: Client,
    pub session: String,
    /// Their waiting-room sockets (user, wizard), still open.
    pub waiting: (Ws, Ws),
}

/// Joins participant `user` as the user and `wizard` as the wizard on the instance at `addr`,
/// accepts their pages, opens both waiting rooms and waits until both are told of the pairing
/// (see [`pair_links_at`]).
pub async fn pair_on(addr: SocketAddr, user: &str, wizard: &str) -> Pair {
    let (user, wizard, session, waiting) = pair_links_at(
        addr,
        &format!("participant={user}&role=user"),
        &format!("participant={wizard}&role=wizard"),
    )
    .await;
    Pair {
        user,
        wizard,
        session,
        waiting,
    }
}

/// The wizard and the user reconnecting to the instance at `addr`, each saying hello with the
/// last sequence number it saw, once the wizard has the room's view: (wizard, user).
pub async fn reconnect_at(
    addr: SocketAddr,
    (wizard, wizard_seen): (&Client, u64),
    (user, user_seen): (&Client, u64),
) -> (Ws, Ws) {
    let mut ww = at(wizard, addr).ws().await;
    ww.hello(wizard_seen).await;
    let mut wu = at(user, addr).ws().await;
    wu.hello(user_seen).await;
    ww.until_type("view").await;
    (ww, wu)
}

/// Checks that a room's log `events` starts with `earlier` (the log at some earlier moment) and
/// numbers its events from 1 with no gap.
pub fn assert_log_goes_on(events: &[Event], earlier: &[Event]) {
    assert_eq!(
        &events[..earlier.len()],
        earlier,
        "the earlier log is not a prefix"
    );
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
}

/// The instance holding the room's lease, if any.
pub async fn owner(store: &dyn Store, session: &str) -> Option<String> {
    store
        .room_owner(session)
        .await
        .expect("room owner")
        .map(|l| l.instance_id)
}

/// Polls until the room's lease names `want` (or nobody, for `None`).
pub async fn wait_owner(store: &dyn Store, session: &str, want: Option<&str>) {
    for _ in 0..200 {
        if owner(store, session).await.as_deref() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the lease of {session} never came to {want:?}: {:?}",
        store.room_owner(session).await
    );
}

/// Runs `case` with one SQLite store (in a fresh directory) as both instances' store.
pub async fn on_one_sqlite_store(case: impl AsyncFnOnce(Arc<dyn Store>, Arc<dyn Store>)) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    case(store.clone(), store).await;
}

/// Runs `case` with two stores (a connection pool each) on a fresh PostgreSQL database named
/// after `name`, then drops the database; does nothing without `WOZKIT_TEST_PG_URL`.
pub async fn on_one_postgres_database(
    name: &str,
    case: impl AsyncFnOnce(Arc<dyn Store>, Arc<dyn Store>),
) {
    let Some(db) = TestDatabase::create(name).await else {
        return;
    };
    let a = wozkit_store::open(&db.url).await.expect("store A opens");
    let b = wozkit_store::open(&db.url).await.expect("store B opens");
    case(a.clone(), b).await;
    a.close().await;
    db.drop_database().await;
}
