//! A mock OpenAI-compatible server (and JSON webhook) for the tests: configurable latency, error
//! statuses, failing N times then succeeding, truncated streams; it records every request and the
//! most requests it had in flight at once.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// How the mock answers.
#[derive(Debug, Clone)]
pub struct Behavior {
    /// The first this many requests fail with `fail_status`.
    pub fail_first: usize,
    pub fail_status: u16,
    /// The failing body; `{auth}` is replaced by the request's Authorization header.
    pub fail_body: String,
    /// Wait before answering.
    pub latency: Duration,
    /// End streamed replies without `data: [DONE]`.
    pub truncate: bool,
    /// The reply of the chat endpoint, streamed word by word.
    pub reply: String,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            fail_first: 0,
            fail_status: 500,
            fail_body: "internal error".into(),
            latency: Duration::ZERO,
            truncate: false,
            reply: "Lisbon is lovely in May.".into(),
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: &'static str,
    pub authorization: Option<String>,
    pub body: Value,
}

struct Shared {
    behavior: Mutex<Behavior>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

pub struct Mock {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Mock {
    /// Starts the mock on 127.0.0.1 with a free port.
    pub async fn start(behavior: Behavior) -> Mock {
        let shared = Arc::new(Shared {
            behavior: Mutex::new(behavior),
            requests: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/hook", post(hook))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Mock { addr, shared }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn hook_url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn set(&self, change: impl FnOnce(&mut Behavior)) {
        change(&mut self.shared.behavior.lock().unwrap());
    }
}

/// Counts a request in flight until dropped (also when the client hangs up).
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> InFlight {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Records the request, waits, and returns the failure to send if this request must fail.
async fn common(
    shared: &Arc<Shared>,
    path: &'static str,
    headers: &HeaderMap,
    body: &Value,
) -> (Behavior, Option<Response>) {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string());
    let index = {
        let mut requests = shared.requests.lock().unwrap();
        requests.push(Recorded {
            path,
            authorization: authorization.clone(),
            body: body.clone(),
        });
        requests.len() - 1
    };
    let behavior = shared.behavior.lock().unwrap().clone();
    tokio::time::sleep(behavior.latency).await;
    if index < behavior.fail_first {
        let status = StatusCode::from_u16(behavior.fail_status).unwrap();
        let text = behavior
            .fail_body
            .replace("{auth}", authorization.as_deref().unwrap_or(""));
        return (behavior, Some((status, text).into_response()));
    }
    (behavior, None)
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let (behavior, failure) = common(&shared, "chat", &headers, &body).await;
    if let Some(failure) = failure {
        return failure;
    }
    if body["stream"] != json!(true) {
        let reply = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": behavior.reply}}]});
        return Json(reply).into_response();
    }
    let mut events = vec![sse(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
    )];
    for (i, word) in behavior.reply.split(' ').enumerate() {
        let piece = if i == 0 {
            word.to_string()
        } else {
            format!(" {word}")
        };
        events.push(sse(
            json!({"choices": [{"index": 0, "delta": {"content": piece}}]}),
        ));
    }
    if !behavior.truncate {
        events.push(sse(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ));
        events.push("data: [DONE]\n\n".to_string());
    }
    let stream = futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

fn sse(event: Value) -> String {
    format!("data: {event}\n\n")
}

/// The webhook echoes what it saw: the number of turns and the last text.
async fn hook(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let _in_flight = InFlight::enter(&shared);
    if let (_, Some(failure)) = common(&shared, "hook", &headers, &body).await {
        return failure;
    }
    let turns = body["turns"].as_array().cloned().unwrap_or_default();
    let last = turns
        .last()
        .and_then(|t| t["text"].as_str())
        .unwrap_or("")
        .to_string();
    Json(json!({"reply": format!("{} turns; last: {last}", turns.len())})).into_response()
}
