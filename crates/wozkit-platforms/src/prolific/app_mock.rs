//! A local stand-in of the page Prolific sends a finished participant to,
//! `https://app.prolific.com/submissions/complete?cc=CODE`, for tests of the ending pages.
//!
//! Prolific serves it from its web application (`app.prolific.com`), not from the API, and
//! matches `cc` against the completion codes set on the study: a known code completes the
//! participant's submission with it (and runs the code's actions), an unknown one shows the
//! participant an error and completes nothing. The mock does the same with the codes it is
//! started with, and records each visit. Prolific knows the participant by their login; the
//! mock takes their id from the `prolific_pid` cookie, when a test sends one.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

/// One visit of the completion address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The `cc` of the visit (empty when it had none).
    pub code: String,
    /// The participant, from the `prolific_pid` cookie.
    pub participant: Option<String>,
    /// Whether the code is one of the study's (the submission was completed).
    pub accepted: bool,
}

struct App {
    codes: Vec<String>,
    visits: Vec<Completion>,
}

/// The running mock; the server stops when this is dropped.
pub struct MockProlificApp {
    addr: SocketAddr,
    state: Arc<Mutex<App>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockProlificApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Deserialize)]
struct CompleteQuery {
    cc: Option<String>,
}

impl MockProlificApp {
    /// Starts the mock on 127.0.0.1 (a free port) for a study with these completion codes.
    pub async fn start(codes: &[&str]) -> std::io::Result<MockProlificApp> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(App {
            codes: codes.iter().map(|c| c.to_string()).collect(),
            visits: vec![],
        }));
        let app = Router::new()
            .route("/submissions/complete", get(complete))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockProlificApp { addr, state, task })
    }

    /// The study's `flow.completion_url` pointing here:
    /// `http://127.0.0.1:PORT/submissions/complete?cc={code}`.
    pub fn completion_url(&self) -> String {
        format!("http://{}/submissions/complete?cc={{code}}", self.addr)
    }

    /// Every visit so far, in order.
    pub fn visits(&self) -> Vec<Completion> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .visits
            .clone()
    }
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then(|| v.to_string())
        })
}

async fn complete(
    State(state): State<Arc<Mutex<App>>>,
    Query(q): Query<CompleteQuery>,
    headers: HeaderMap,
) -> Response {
    let code = q.cc.unwrap_or_default();
    let mut app = state.lock().unwrap_or_else(|p| p.into_inner());
    // Prolific matches the code as set on the study: exactly.
    let accepted = app.codes.contains(&code);
    app.visits.push(Completion {
        code: code.clone(),
        participant: cookie(&headers, "prolific_pid"),
        accepted,
    });
    if accepted {
        Html("<h1>Submission completed</h1><p>Thank you, your submission is complete.</p>")
            .into_response()
    } else {
        (
            StatusCode::BAD_REQUEST,
            Html(
                "<h1>Something went wrong</h1><p>This completion code is not valid for this \
                 study. Please contact the researcher.</p>",
            ),
        )
            .into_response()
    }
}
