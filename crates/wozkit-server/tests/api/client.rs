//! The test clients: a tiny HTTP/1.1 client (cookies, forms, Origin) and scripted WebSocket
//! participants that read frames in any order.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("connection"))
    {
        req.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = vec![];
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A participant's browser: its cookie (and seat).
#[derive(Clone)]
pub struct Client {
    pub addr: SocketAddr,
    pub cookie: String,
    pub seat: Option<String>,
}

impl Client {
    fn q(&self) -> String {
        self.seat
            .as_ref()
            .map(|s| format!("?seat={s}"))
            .unwrap_or_default()
    }

    pub async fn page(&self) -> Response {
        http(
            self.addr,
            "GET",
            &format!("/p{}", self.q()),
            &[("Cookie", &self.cookie)],
            "",
        )
        .await
    }

    pub async fn post(&self, path: &str, form: &str) -> Response {
        let origin = format!("http://{}", self.addr);
        let headers = [
            ("Cookie", self.cookie.as_str()),
            ("Origin", origin.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        http(
            self.addr,
            "POST",
            &format!("{path}{}", self.q()),
            &headers,
            form,
        )
        .await
    }

    /// The hidden `step` of the current page's form.
    pub async fn step(&self) -> String {
        let body = self.page().await.body;
        body.split("name=\"step\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_default()
            .to_string()
    }

    /// Accepts consent and instructions: the participant is then in the waiting room.
    pub async fn accept_pages(&self) {
        for _ in 0..2 {
            let step = self.step().await;
            let res = self.post("/p/next", &format!("step={step}")).await;
            assert_eq!(res.status, 303, "{}", res.body);
        }
        let page = self.page().await.body;
        assert!(
            page.contains("data-page=\"waiting\""),
            "not in the waiting room: {page}"
        );
    }

    pub async fn ws(&self) -> Ws {
        self.ws_with(&[]).await.expect("WebSocket handshake")
    }

    pub async fn ws_with(
        &self,
        extra: &[(&'static str, &str)],
    ) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let mut req = format!("ws://{}/ws{}", self.addr, self.q()).into_client_request()?;
        req.headers_mut()
            .insert("cookie", self.cookie.parse().expect("cookie header"));
        for (k, v) in extra {
            req.headers_mut().insert(*k, v.parse().expect("header"));
        }
        let (stream, _) = tokio_tungstenite::connect_async(req).await?;
        Ok(Ws {
            stream,
            seen: vec![],
            pending: VecDeque::new(),
        })
    }
}

pub struct Ws {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Every frame received so far.
    pub seen: Vec<Value>,
    /// Frames received but not yet taken by [`Ws::until`].
    pending: VecDeque<Value>,
}

impl Ws {
    pub async fn send(&mut self, v: Value) {
        self.send_text(&v.to_string()).await;
    }

    pub async fn send_text(&mut self, t: &str) {
        self.stream
            .send(Message::Text(t.into()))
            .await
            .expect("send");
    }

    /// Sends a frame; false when the connection is gone (for players that reconnect).
    pub async fn try_send(&mut self, v: Value) -> bool {
        self.stream
            .send(Message::Text(v.to_string().into()))
            .await
            .is_ok()
    }

    pub async fn hello(&mut self, last_seq: u64) {
        self.send(json!({"type": "hello", "last_seq": last_seq}))
            .await;
    }

    pub async fn cmd(&mut self, id: &str, cmd: Value) {
        self.send(json!({"type": "cmd", "id": id, "cmd": cmd}))
            .await;
    }

    /// The next frame (None when the connection closed).
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), self.stream.next())
                .await
                .expect("a frame within 10 s");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).expect("server sends JSON");
                    self.seen.push(v.clone());
                    return Some(v);
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            }
        }
    }

    /// The next frame within `wait`; `None` when the connection closed or nothing came in
    /// time (for players that reconnect instead of failing, e.g. through a database outage).
    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        loop {
            match tokio::time::timeout(wait, self.stream.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => {
                    let v: Value = serde_json::from_str(&t).expect("server sends JSON");
                    self.seen.push(v.clone());
                    return Some(v);
                }
                Ok(Some(Ok(Message::Close(_))) | None | Some(Err(_))) | Err(_) => return None,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// The first frame not taken yet that matches (reading more as needed). Frames that do not
    /// match stay for later calls, so tests need not care how frames interleave.
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.pending.iter().position(&pred) {
            return self.pending.remove(i).unwrap_or_default();
        }
        loop {
            match self.next().await {
                Some(v) if pred(&v) => return v,
                Some(v) => self.pending.push_back(v),
                None => panic!("connection closed; frames seen: {:#?}", self.seen),
            }
        }
    }

    /// The most recent view received, as a page holds it: a wizard's view that leaves the
    /// action panel out keeps the `actions` of the last view that had them.
    pub fn last_view(&self) -> Value {
        let mut views = self.seen.iter().rev().filter(|v| v["type"] == "view");
        let Some(mut view) = views.next().map(|v| v["view"].clone()) else {
            return Value::Null;
        };
        if view["role"] == "wizard"
            && view.get("actions").is_none()
            && let Some(actions) = views.find_map(|v| v["view"].get("actions"))
        {
            view["actions"] = actions.clone();
        }
        view
    }

    pub async fn until_type(&mut self, ty: &str) -> Value {
        self.until(|v| v["type"] == ty).await
    }

    /// Waits for the answer (ack or error) to command `id`.
    pub async fn answer(&mut self, id: &str) -> Value {
        self.until(|v| (v["type"] == "ack" || v["type"] == "error") && v["id"] == id)
            .await
    }

    /// Waits for an event of `kind`.
    pub async fn event(&mut self, kind: &str) -> Value {
        self.until(|v| v["type"] == "event" && v["event"]["kind"] == kind)
            .await["event"]
            .clone()
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }
}
