//! The system clients against a mock OpenAI-compatible server and webhook: replies, streaming,
//! retries, timeouts, the circuit breaker, the concurrency limit and API key hygiene.

mod mock;

use std::time::Duration;

use mock::{Behavior, Mock};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use wozkit_systems::{Client, SystemError, SystemSpec, Turn};

/// A spec from JSON, as a study file would declare it.
fn spec(value: Value) -> SystemSpec {
    serde_json::from_value(value).expect("valid system spec")
}

/// An openai client for `mock` with fast limits, overridden by `limits`.
fn openai(mock: &Mock, stream: bool, limits: Value) -> Client {
    let mut all =
        json!({"timeout_s": 5, "retries": 0, "backoff_ms": 5, "concurrency": 4, "queue": 16});
    all.as_object_mut()
        .unwrap()
        .extend(limits.as_object().unwrap().clone());
    let spec = spec(json!({
        "kind": "openai", "base_url": mock.base_url(), "model": "m1", "stream": stream,
        "system_prompt": "Be brief.", "params": {"temperature": 0.5, "max_tokens": 50},
        "limits": all,
    }));
    Client::new("bot-a", &spec).unwrap()
}

fn history() -> Vec<Turn> {
    vec![
        Turn::user("Hi"),
        Turn::assistant("Hello! Where to?"),
        Turn::user("Lisbon"),
    ]
}

#[tokio::test]
async fn a_reply_and_the_request_it_came_from() {
    let mock = Mock::start(Behavior::default()).await;
    let client = openai(&mock, false, json!({}));
    let reply = client.reply("d1", &history()).await.unwrap();
    assert_eq!(reply.text, "Lisbon is lovely in May.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "chat");
    let body = &requests[0].body;
    assert_eq!(body["model"], "m1");
    assert_eq!(body["stream"], false);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["max_tokens"], 50);
    let expected = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! Where to?"},
        {"role": "user", "content": "Lisbon"},
    ]);
    assert_eq!(body["messages"], expected);
    assert_eq!(
        requests[0].authorization, None,
        "no key configured, no header"
    );
}

#[tokio::test]
async fn streamed_deltas_reassemble_to_the_final_reply() {
    let mock = Mock::start(Behavior::default()).await;
    let client = openai(&mock, true, json!({}));
    let (tx, mut rx) = mpsc::channel(100);
    let reply = client.reply_stream("d1", &history(), tx).await.unwrap();
    let mut deltas = Vec::new();
    while let Some(d) = rx.recv().await {
        deltas.push(d);
    }
    assert_eq!(deltas.len(), 5, "one delta per word: {deltas:?}");
    assert_eq!(deltas.concat(), "Lisbon is lovely in May.");
    assert_eq!(reply.text, "Lisbon is lovely in May.");
    assert_eq!(mock.requests()[0].body["stream"], true);
}

#[tokio::test]
async fn a_truncated_stream_is_an_error_and_not_retried_after_text_was_shown() {
    let mock = Mock::start(Behavior {
        truncate: true,
        ..Behavior::default()
    })
    .await;
    let client = openai(&mock, true, json!({"retries": 3}));
    let (tx, mut rx) = mpsc::channel(100);
    let err = client.reply_stream("d1", &history(), tx).await.unwrap_err();
    assert!(matches!(err, SystemError::BadResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("[DONE]"), "{err}");
    let mut shown = String::new();
    while let Some(d) = rx.recv().await {
        shown.push_str(&d);
    }
    assert_eq!(shown, "Lisbon is lovely in May.", "deltas were shown once");
    assert_eq!(mock.count(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let mock = Mock::start(Behavior {
        fail_first: 2,
        fail_status: 500,
        ..Behavior::default()
    })
    .await;
    let client = openai(&mock, false, json!({"retries": 2}));
    let reply = client.reply("d1", &history()).await.unwrap();
    assert_eq!(reply.text, "Lisbon is lovely in May.");
    assert_eq!(mock.count(), 3);
}

#[tokio::test]
async fn retries_give_up_after_the_limit() {
    let mock = Mock::start(Behavior {
        fail_first: 10,
        fail_status: 503,
        ..Behavior::default()
    })
    .await;
    let client = openai(&mock, false, json!({"retries": 2}));
    let err = client.reply("d1", &history()).await.unwrap_err();
    assert!(
        matches!(err, SystemError::Status { status: 503, .. }),
        "{err:?}"
    );
    assert_eq!(mock.count(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let behavior = Behavior {
        fail_first: 10,
        fail_status: 400,
        fail_body: "bad request".into(),
        ..Behavior::default()
    };
    let mock = Mock::start(behavior).await;
    let client = openai(&mock, false, json!({"retries": 3}));
    let err = client.reply("d1", &history()).await.unwrap_err();
    assert!(
        matches!(err, SystemError::Status { status: 400, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("bad request"), "{err}");
    assert_eq!(mock.count(), 1);
}

#[tokio::test]
async fn a_slow_system_times_out() {
    let mock = Mock::start(Behavior {
        latency: Duration::from_secs(5),
        ..Behavior::default()
    })
    .await;
    let client = openai(&mock, false, json!({"timeout_s": 0.2, "retries": 1}));
    let err = client.reply("d1", &history()).await.unwrap_err();
    assert!(matches!(err, SystemError::Timeout { .. }), "{err:?}");
    assert_eq!(mock.count(), 2, "a timeout is retried");
}

#[tokio::test]
async fn the_circuit_opens_refuses_and_half_opens_after_the_cool_down() {
    let mock = Mock::start(Behavior {
        fail_first: 1000,
        ..Behavior::default()
    })
    .await;
    let client = openai(
        &mock,
        false,
        json!({"breaker": {"failures": 2, "cooldown_s": 0.3}}),
    );
    for _ in 0..2 {
        let err = client.reply("d1", &history()).await.unwrap_err();
        assert!(
            matches!(err, SystemError::Status { status: 500, .. }),
            "{err:?}"
        );
    }
    let err = client.reply("d1", &history()).await.unwrap_err();
    assert!(matches!(err, SystemError::CircuitOpen { .. }), "{err:?}");
    assert_eq!(mock.count(), 2, "an open circuit sends nothing");

    // After the cool-down one trial goes through; it fails, so the circuit opens again.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let err = client.reply("d1", &history()).await.unwrap_err();
    assert!(matches!(err, SystemError::Status { .. }), "{err:?}");
    assert_eq!(mock.count(), 3);
    let err = client.reply("d1", &history()).await.unwrap_err();
    assert!(matches!(err, SystemError::CircuitOpen { .. }), "{err:?}");
    assert_eq!(mock.count(), 3);

    // The system recovers: the next trial succeeds and closes the circuit.
    mock.set(|b| b.fail_first = 0);
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(client.reply("d1", &history()).await.is_ok());
    assert!(client.reply("d1", &history()).await.is_ok());
    assert_eq!(mock.count(), 5);
}

#[tokio::test]
async fn client_errors_do_not_open_the_circuit() {
    let mock = Mock::start(Behavior {
        fail_first: 3,
        fail_status: 422,
        ..Behavior::default()
    })
    .await;
    let client = openai(
        &mock,
        false,
        json!({"breaker": {"failures": 1, "cooldown_s": 60}}),
    );
    for _ in 0..3 {
        let err = client.reply("d1", &history()).await.unwrap_err();
        assert!(
            matches!(err, SystemError::Status { status: 422, .. }),
            "{err:?}"
        );
    }
    assert!(client.reply("d1", &history()).await.is_ok());
}

#[tokio::test]
async fn the_concurrency_limit_holds() {
    let mock = Mock::start(Behavior {
        latency: Duration::from_millis(150),
        ..Behavior::default()
    })
    .await;
    let client = openai(&mock, false, json!({"concurrency": 2}));
    let h = history();
    let calls: Vec<_> = (0..5)
        .map(|i| client.reply(if i % 2 == 0 { "a" } else { "b" }, &h))
        .collect();
    for result in futures_util::future::join_all(calls).await {
        assert!(result.is_ok(), "{result:?}");
    }
    assert_eq!(mock.count(), 5);
    assert!(
        mock.max_in_flight() <= 2,
        "saw {} at once",
        mock.max_in_flight()
    );
    assert!(mock.max_in_flight() >= 1);
}

#[tokio::test]
async fn a_full_queue_refuses_at_once() {
    let mock = Mock::start(Behavior {
        latency: Duration::from_millis(150),
        ..Behavior::default()
    })
    .await;
    let client = openai(&mock, false, json!({"concurrency": 1, "queue": 1}));
    let h = history();
    let results = futures_util::future::join_all((0..3).map(|_| client.reply("d", &h))).await;
    let full = results
        .iter()
        .filter(|r| matches!(r, Err(SystemError::QueueFull { .. })))
        .count();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!((ok, full), (2, 1), "{results:?}");
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn the_api_key_is_sent_as_bearer_and_never_shown() {
    const VAR: &str = "WOZKIT_SYSTEMS_TEST_KEY";
    const KEY: &str = "sk-test-5f2c9e81d7";
    // SAFETY: no other test in this binary reads or writes this variable.
    unsafe { std::env::set_var(VAR, KEY) };
    // The mock echoes the Authorization header in its error body, as some servers do.
    let behavior = Behavior {
        fail_first: 2,
        fail_status: 401,
        fail_body: "invalid credentials: {auth}".into(),
        ..Behavior::default()
    };
    let mock = Mock::start(behavior).await;
    let spec = spec(json!({
        "kind": "openai", "base_url": mock.base_url(), "model": "m1", "api_key_env": VAR,
        "limits": {"retries": 0},
    }));
    assert!(!format!("{spec:?}").contains(KEY));
    assert!(!serde_json::to_string(&spec).unwrap().contains(KEY));
    let client = Client::new("keyed", &spec).unwrap();
    assert!(!format!("{client:?}").contains(KEY));

    let err = client.reply("d1", &history()).await.unwrap_err();
    assert_eq!(
        mock.requests()[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    let shown = format!("{err} {err:?}");
    assert!(shown.contains("invalid credentials"), "{shown}");
    assert!(!shown.contains(KEY), "key leaked: {shown}");

    let (tx, _rx) = mpsc::channel(10);
    let err = client.reply_stream("d1", &history(), tx).await.unwrap_err();
    assert!(!format!("{err} {err:?}").contains(KEY));
    assert!(client.reply("d1", &history()).await.is_ok());
}

#[tokio::test]
async fn a_missing_key_variable_is_a_clear_error() {
    let spec = spec(json!({
        "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "api_key_env": "WOZKIT_SYSTEMS_TEST_UNSET_VARIABLE",
    }));
    let err = Client::new("bot", &spec).unwrap_err();
    assert!(matches!(err, SystemError::Config { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("WOZKIT_SYSTEMS_TEST_UNSET_VARIABLE"),
        "{err}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spec = spec(json!({
        "kind": "http", "url": format!("http://127.0.0.1:{port}/hook"),
        "limits": {"retries": 1, "backoff_ms": 1},
    }));
    let err = Client::new("gone", &spec)
        .unwrap()
        .reply("d", &history())
        .await
        .unwrap_err();
    assert!(matches!(err, SystemError::Connection { .. }), "{err:?}");
}

#[tokio::test]
async fn the_webhook_round_trips() {
    let mock = Mock::start(Behavior::default()).await;
    let spec = spec(json!({"kind": "http", "url": mock.hook_url()}));
    let client = Client::new("hook-bot", &spec).unwrap();
    let reply = client.reply("dialogue-7", &history()).await.unwrap();
    assert_eq!(reply.text, "3 turns; last: Lisbon");
    let requests = mock.requests();
    assert_eq!(requests[0].path, "hook");
    let body = &requests[0].body;
    let expected = json!({
        "system": "hook-bot",
        "dialogue_id": "dialogue-7",
        "turns": [
            {"role": "user", "text": "Hi"},
            {"role": "assistant", "text": "Hello! Where to?"},
            {"role": "user", "text": "Lisbon"},
        ],
    });
    assert_eq!(body, &expected);

    // The default streaming path of a non-streaming system sends the whole reply once.
    let (tx, mut rx) = mpsc::channel(10);
    client
        .reply_stream("dialogue-7", &history(), tx)
        .await
        .unwrap();
    assert_eq!(rx.recv().await.as_deref(), Some("3 turns; last: Lisbon"));
    assert_eq!(rx.recv().await, None);
}

#[tokio::test]
async fn a_webhook_reply_without_the_reply_field_is_a_bad_response() {
    let mock = Mock::start(Behavior::default()).await;
    // The chat endpoint answers with a completion body, not {"reply": ...}.
    let spec =
        spec(json!({"kind": "http", "url": format!("{}/chat/completions", mock.base_url())}));
    let err = Client::new("hook-bot", &spec)
        .unwrap()
        .reply("d", &history())
        .await
        .unwrap_err();
    assert!(matches!(err, SystemError::BadResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("reply"), "{err}");
}
