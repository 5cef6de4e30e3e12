//! A mock OpenAI-compatible server for the chat and arena tests: `POST /v1/chat/completions`,
//! answered whole (`choices[0].message.content`) or streamed as server-sent events
//! (`data: {"choices":[{"delta":{"content":…}}]}` … `data: [DONE]`).
//!
//! It records every request (model, messages, whether a stream was asked for) and behaves per
//! model as the test says: a latency, 500 for the next K calls, 400 always, a hang (for
//! timeouts), a stream cut before `[DONE]` (cleanly or by a broken connection). Replies echo
//! the conversation: `"<model>: reply to <last user text> (turn n)"`, n counting the user
//! messages of the request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// How a stream is cut before `data: [DONE]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Two deltas, then the response ends normally (no `[DONE]`).
    Clean,
    /// Two deltas, then the connection breaks (the body ends in an error).
    Broken,
}

/// What the mock does for one model.
#[derive(Clone, Debug, Default)]
pub struct Behaviour {
    /// Milliseconds before answering.
    pub latency_ms: u64,
    /// Answer 500 to this many calls from now on (counted down per call).
    pub fail_500: u32,
    /// Answer 400 to every call.
    pub bad_request: bool,
    /// Never answer (until long after any test's timeout).
    pub hang: bool,
    /// Cut streamed replies before `[DONE]`.
    pub cut: Option<Cut>,
}

/// One request as received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub model: String,
    /// `(role, content)` of every message, in order.
    pub messages: Vec<(String, String)>,
    pub stream: bool,
}

#[derive(Default)]
struct Inner {
    behaviours: Mutex<HashMap<String, Behaviour>>,
    requests: Mutex<Vec<Recorded>>,
}

/// The running mock; it stops with the test's runtime.
pub struct MockOpenAi {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl MockOpenAi {
    /// Binds 127.0.0.1:0 and serves until the runtime stops.
    pub async fn start() -> MockOpenAi {
        let inner = Arc::new(Inner::default());
        let router = axum::Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(inner.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind mock");
        let addr = listener.local_addr().expect("mock addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        MockOpenAi { addr, inner }
    }

    /// The `base_url` a study gives its `openai` systems.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Sets the behaviour of `model`.
    pub fn set(&self, model: &str, b: Behaviour) {
        self.inner
            .behaviours
            .lock()
            .expect("mock lock")
            .insert(model.to_string(), b);
    }

    /// Every request for `model`, in the order received.
    pub fn requests(&self, model: &str) -> Vec<Recorded> {
        self.inner
            .requests
            .lock()
            .expect("mock lock")
            .iter()
            .filter(|r| r.model == model)
            .cloned()
            .collect()
    }

    /// How many requests `model` received.
    pub fn calls(&self, model: &str) -> usize {
        self.requests(model).len()
    }

    /// Waits (up to 10 s) until `model` has received at least `n` requests.
    pub async fn wait_calls(&self, model: &str, n: usize) {
        for _ in 0..200 {
            if self.calls(model) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "model {model} received {} requests, expected {n}",
            self.calls(model)
        );
    }
}

/// The echo reply to a request's messages.
pub fn echo(model: &str, messages: &[(String, String)]) -> String {
    let users: Vec<&str> = messages
        .iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text.as_str())
        .collect();
    format!(
        "{model}: reply to {} (turn {})",
        users.last().copied().unwrap_or_default(),
        users.len()
    )
}

/// The pieces a streamed reply is sent in: word by word, each with its trailing space.
pub fn pieces(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_string).collect()
}

fn sse(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

async fn completions(State(inner): State<Arc<Inner>>, Json(body): Json<Value>) -> Response {
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let messages: Vec<(String, String)> = body["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap_or_default().to_string(),
                        m["content"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let stream = body["stream"].as_bool().unwrap_or(false);
    inner.requests.lock().expect("mock lock").push(Recorded {
        model: model.clone(),
        messages: messages.clone(),
        stream,
    });
    let b = {
        let mut all = inner.behaviours.lock().expect("mock lock");
        let b = all.entry(model.clone()).or_default();
        let now = b.clone();
        b.fail_500 = b.fail_500.saturating_sub(1);
        now
    };
    if b.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(b.latency_ms)).await;
    }
    if b.bad_request {
        let error = json!({"error": {"message": "bad request from the mock", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    if b.fail_500 > 0 {
        let error = json!({"error": {"message": "mock failure", "type": "server_error"}});
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(error)).into_response();
    }
    if b.hang {
        tokio::time::sleep(Duration::from_secs(120)).await;
        return StatusCode::GATEWAY_TIMEOUT.into_response();
    }
    let reply = echo(&model, &messages);
    if !stream {
        let whole = json!({
            "id": "mock",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        });
        return Json(whole).into_response();
    }
    let mut chunks: Vec<Result<Bytes, std::io::Error>> = vec![Ok(sse(
        &json!({"choices": [{"delta": {"role": "assistant"}}]}),
    ))];
    let parts = pieces(&reply);
    let shown = match b.cut {
        Some(_) => parts.len().min(2),
        None => parts.len(),
    };
    for p in &parts[..shown] {
        chunks.push(Ok(sse(
            &json!({"choices": [{"index": 0, "delta": {"content": p}}]}),
        )));
    }
    match b.cut {
        None => {
            chunks.push(Ok(sse(
                &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            )));
            chunks.push(Ok(Bytes::from("data: [DONE]\n\n")));
        }
        Some(Cut::Clean) => {}
        Some(Cut::Broken) => chunks.push(Err(std::io::Error::other("mock cut the stream"))),
    }
    // A short pause between events, so that they arrive as separate reads.
    let events = futures_util::stream::unfold(chunks.into_iter(), |mut it| async move {
        let next = it.next()?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        Some((next, it))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(events))
        .expect("mock response")
}
