//! A stand-in for a dialogue system under test: an OpenAI-compatible `POST …/chat/completions`
//! endpoint on 127.0.0.1 that waits a set time, then answers with a text naming the model and
//! the turn (`alpha answers turn 3: …`), whole or as server-sent events when the request asks
//! for `"stream": true`. Every request is recorded (model, messages, whether it was made to
//! fail), so a test can check what history each model was sent. Every `fail_every`-th request
//! is answered `400`, which the server's client never retries: the participant sees the failure.
//!
//! Plain HTTP/1.1 over tokio with keep-alive, parsed with `httparse`: nothing else is needed.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Largest request accepted (a long history is a few KiB).
const MAX_REQUEST: usize = 4 * 1024 * 1024;

/// Filler words of the replies: how many follow the reply's head depends on the request, so
/// replies differ in length.
const FILLER: &[&str] = &[
    "sure", "the", "museum", "opens", "at", "nine", "and", "trains", "leave", "hourly", "from",
    "the", "station", "near", "the", "old", "library",
];

/// How the mock answers.
#[derive(Clone, Debug)]
pub struct MockOptions {
    /// Time between reading a request and writing its answer.
    pub delay: Duration,
    /// Every `fail_every`-th request (counted over all models) is answered 400; 0 never.
    pub fail_every: u64,
}

impl Default for MockOptions {
    fn default() -> Self {
        MockOptions {
            delay: Duration::from_millis(200),
            fail_every: 0,
        }
    }
}

/// One request as the mock received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MockRequest {
    pub model: String,
    /// `(role, content)` of each message, in order.
    pub messages: Vec<(String, String)>,
    pub stream: bool,
    /// Answered 400 on purpose.
    pub failed: bool,
}

#[derive(Default)]
struct State {
    requests: Mutex<Vec<MockRequest>>,
    count: AtomicU64,
}

/// A running mock system; stops when dropped.
pub struct MockSystem {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl MockSystem {
    /// Starts listening on a free port of 127.0.0.1.
    pub async fn start(options: MockOptions) -> std::io::Result<MockSystem> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, shared.clone(), options.clone()));
            }
        });
        Ok(MockSystem { addr, state, task })
    }

    /// The base URL to declare in a study (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<MockRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for MockSystem {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The reply of `model` to `messages`: names the model and the turn (the number of user
/// messages), then a few filler words chosen from the request's content.
pub fn reply_text(model: &str, messages: &[(String, String)]) -> String {
    let turn = messages.iter().filter(|(r, _)| r == "user").count();
    // FNV-1a of the model and the last message: the same request always gets the same reply.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let last = messages.last().map_or("", |(_, c)| c.as_str());
    for b in model.bytes().chain(last.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let words = 1 + (h % 12) as usize;
    let filler: Vec<&str> = (0..words)
        .map(|i| FILLER[(h as usize).wrapping_add(i * 7) % FILLER.len()])
        .collect();
    format!("{model} answers turn {turn}: {}", filler.join(" "))
}

async fn serve(mut stream: TcpStream, state: Arc<State>, options: MockOptions) {
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    loop {
        let (head_len, body_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let len = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (n, len);
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return,
            }
            if buf.len() > MAX_REQUEST || !read_more(&mut stream, &mut buf).await {
                return;
            }
        };
        while buf.len() < head_len + body_len {
            if head_len + body_len > MAX_REQUEST || !read_more(&mut stream, &mut buf).await {
                return;
            }
        }
        let body: Vec<u8> = buf.drain(..head_len + body_len).skip(head_len).collect();
        let response = answer(&body, &state, &options).await;
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

/// The whole HTTP response to one request body.
async fn answer(body: &[u8], state: &State, options: &MockOptions) -> String {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return http(
            400,
            "application/json",
            &json!({"error": "not JSON"}).to_string(),
        );
    };
    let model = request["model"].as_str().unwrap_or_default().to_string();
    let stream = request["stream"].as_bool().unwrap_or(false);
    let messages: Vec<(String, String)> = request["messages"]
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
    let n = state.count.fetch_add(1, Ordering::Relaxed) + 1;
    let failed = options.fail_every > 0 && n.is_multiple_of(options.fail_every);
    let text = reply_text(&model, &messages);
    state
        .requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(MockRequest {
            model,
            messages,
            stream,
            failed,
        });
    tokio::time::sleep(options.delay).await;
    if failed {
        return http(
            400,
            "application/json",
            &json!({"error": {"message": "failed on purpose"}}).to_string(),
        );
    }
    if stream {
        let mut sse = String::new();
        for (i, piece) in text.split_inclusive(' ').enumerate() {
            let mut delta = json!({ "content": piece });
            if i == 0 {
                delta["role"] = json!("assistant");
            }
            let chunk = json!({"choices": [{"index": 0, "delta": delta}]});
            sse.push_str(&format!("data: {chunk}\n\n"));
        }
        sse.push_str("data: [DONE]\n\n");
        return http(200, "text/event-stream", &sse);
    }
    let whole = json!({
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    });
    http(200, "application/json", &whole.to_string())
}

fn http(status: u16, content_type: &str, body: &str) -> String {
    let reason = if status == 200 { "OK" } else { "Bad Request" };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_name_the_model_and_the_turn() {
        let m = |r: &str, c: &str| (r.to_string(), c.to_string());
        let history = vec![m("user", "hi"), m("assistant", "x"), m("user", "where?")];
        let t = reply_text("alpha", &history);
        assert!(t.starts_with("alpha answers turn 2: "), "{t}");
        assert_eq!(t, reply_text("alpha", &history));
        assert!(reply_text("beta", &history[..1]).starts_with("beta answers turn 1: "));
    }
}
