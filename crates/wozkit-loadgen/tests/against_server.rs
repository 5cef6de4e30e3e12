//! The load generator against a real server (the built-in demo study, bound to 127.0.0.1:0
//! with a fresh data directory): participants walk the pages, pair, play, and the report counts
//! what happened. No timing is asserted, only that the figures exist and add up. Then against
//! two servers at once, each on its own store (two processes on one SQLite data directory would
//! not be safe; the point is the client side): pairs go to the URLs in turn, and the report
//! gives each URL's figures beside the overall ones.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wozkit_loadgen::{Config, run};
use wozkit_server::{Config as ServerConfig, Tunables, launch_with_listener};

/// A server for the built-in demo study on a fresh data directory: its URL, its stop switch,
/// its task and the directory (kept alive).
async fn server() -> (
    String,
    oneshot::Sender<()>,
    JoinHandle<()>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(dir.path().to_str().expect("utf-8 temp path"))
        .await
        .expect("store");
    let study = wozkit_core::load::load_builtin("offshore-emergency").expect("built-in study");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = launch_with_listener(
            ServerConfig {
                studies: vec![study],
                tunables: Tunables::default(),
            },
            store,
            listener,
            async {
                let _ = stopped.await;
            },
        )
        .await;
    });
    (format!("http://127.0.0.1:{port}"), stop, task, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairs_play_and_latency_is_measured() {
    let (url, stop, server, _dir) = server().await;
    let mut config = Config::new(url, 6, Duration::from_secs(4));
    config.rate = 2.0;
    let report = run(config).await.expect("the run starts");
    eprintln!("{}", report.text());

    assert_eq!(report.reached_room, 6, "{}", report.text());
    assert_eq!(report.gave_up, 0);
    assert_eq!(report.sessions, 3);
    assert_eq!(report.connected, 6);
    assert_eq!(report.per_url.len(), 1);
    assert_eq!(report.per_url[0].reached_room, 6);
    assert!(report.commands_acked > 0, "{}", report.text());
    assert!(
        report.commands_acked <= report.commands_sent,
        "{}",
        report.text()
    );
    assert!(report.latency.samples > 0, "{}", report.text());
    assert!(report.latency.p50_ms <= report.latency.max_ms);
    for code in [
        "connect",
        "ws_closed",
        "ws_handshake",
        "timeout",
        "unexpected_page",
    ] {
        assert!(!report.errors.contains_key(code), "{}", report.text());
    }
    assert!(
        !report.errors.keys().any(|k| k.starts_with("http_")),
        "{}",
        report.text()
    );
    // The server runs in this process, found through its listening port.
    let server_figures = report.server.as_ref().expect("server found by port");
    assert_eq!(server_figures.pid, std::process::id());
    assert!(server_figures.rss_end_kib.is_some());
    let json = serde_json::to_value(&report).expect("JSON");
    assert!(json["latency"]["p99_ms"].is_number());
    // Linux: the machine's figures for the window, with the server known.
    let machine = &json["machine"];
    assert!(machine["steal_percent"].is_number(), "{machine}");
    assert!(machine["foreign_cpu_percent"].is_number(), "{machine}");
    assert!(machine["quiet"].is_boolean(), "{machine}");
    assert!(report.text().contains("  machine  "), "{}", report.text());

    let _ = stop.send(());
    let _ = server.await;
}

#[tokio::test]
async fn only_local_servers_are_targeted() {
    let config = Config::new("http://example.com:80", 2, Duration::from_secs(1));
    let err = run(config).await.err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("this machine")));
    let config = Config::new("http://127.0.0.1:1", 3, Duration::from_secs(1));
    let err = run(config).await.err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("even")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairs_are_spread_over_two_servers_and_reported_per_url() {
    let (url_a, stop_a, task_a, _dir_a) = server().await;
    let (url_b, stop_b, task_b, _dir_b) = server().await;
    // Three pairs: the first and third to A, the second to B.
    let mut config = Config::new(url_a.clone(), 6, Duration::from_secs(4));
    config.urls.push(url_b.clone());
    config.rate = 2.0;
    let report = run(config).await.expect("the run starts");
    let text = report.text();
    eprintln!("{text}");

    assert_eq!(report.url, format!("{url_a}, {url_b}"));
    assert_eq!(report.reached_room, 6, "{text}");
    assert_eq!(report.sessions, 3, "{text}");
    assert_eq!(report.per_url.len(), 2);
    let (a, b) = (&report.per_url[0], &report.per_url[1]);
    assert_eq!(
        (a.url.as_str(), b.url.as_str()),
        (url_a.as_str(), url_b.as_str())
    );
    assert_eq!((a.participants, b.participants), (4, 2), "{text}");
    // Both servers received their participants, paired them among themselves and served them.
    assert_eq!((a.reached_room, b.reached_room), (4, 2), "{text}");
    assert_eq!((a.sessions, b.sessions), (2, 1), "{text}");
    assert!(a.commands_acked > 0 && b.commands_acked > 0, "{text}");
    assert_eq!(a.commands_acked + b.commands_acked, report.commands_acked);
    assert!(report.commands_acked <= report.commands_sent, "{text}");
    assert!(a.latency.samples > 0 && b.latency.samples > 0, "{text}");
    assert_eq!(
        a.latency.samples + b.latency.samples,
        report.latency.samples
    );
    assert!(
        !report.errors.contains_key("connect") && !report.errors.contains_key("ws_closed"),
        "{text}"
    );
    for u in [a, b] {
        assert!(text.contains(&u.url), "{text}");
    }
    // The JSON report carries the same per-URL figures.
    let json = serde_json::to_value(&report).expect("JSON");
    assert_eq!(json["per_url"][1]["reached_room"], 2);

    let _ = stop_a.send(());
    let _ = stop_b.send(());
    let _ = task_a.await;
    let _ = task_b.await;
}

#[tokio::test]
async fn every_url_needs_a_pair_and_must_be_local() {
    let mut config = Config::new("http://127.0.0.1:1", 2, Duration::from_secs(1));
    config.urls.push("http://127.0.0.1:2".into());
    let err = run(config).await.err().map(|e| e.to_string());
    assert!(
        err.as_deref().is_some_and(|e| e.contains("one pair")),
        "{err:?}"
    );
    let mut config = Config::new("http://127.0.0.1:1", 4, Duration::from_secs(1));
    config.urls.push("http://example.com:80".into());
    let err = run(config).await.err().map(|e| e.to_string());
    assert!(
        err.as_deref().is_some_and(|e| e.contains("this machine")),
        "{err:?}"
    );
}
