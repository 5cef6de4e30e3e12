//! The load generator against a real server (the built-in demo study, bound to 127.0.0.1:0
//! with a fresh data directory): participants walk the pages, pair, play, and the report counts
//! what happened. No timing is asserted, only that the figures exist and add up.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use wozkit_loadgen::{Config, run};
use wozkit_server::{Config as ServerConfig, Tunables, launch_with_listener};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairs_play_and_latency_is_measured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(dir.path().to_str().expect("utf-8 temp path"))
        .await
        .expect("store");
    let study = wozkit_core::load::load_builtin("offshore-emergency").expect("built-in study");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(launch_with_listener(
        ServerConfig {
            studies: vec![study],
            tunables: Tunables::default(),
        },
        store,
        listener,
        async {
            let _ = stopped.await;
        },
    ));

    let mut config = Config::new(
        format!("http://127.0.0.1:{port}"),
        6,
        Duration::from_secs(4),
    );
    config.rate = 2.0;
    let report = run(config).await.expect("the run starts");
    eprintln!("{}", report.text());

    assert_eq!(report.reached_room, 6, "{}", report.text());
    assert_eq!(report.gave_up, 0);
    assert_eq!(report.sessions, 3);
    assert_eq!(report.connected, 6);
    assert!(report.commands_acked > 0, "{}", report.text());
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
