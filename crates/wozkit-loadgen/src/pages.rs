//! The participant's page flow over HTTP, as a browser walks it: the entry link (which sets the
//! cookie), the consent and instructions pages accepted through their forms (with the Origin
//! header a browser sends), the waiting page, and the room page; each WebSocket is opened on the
//! connection that loaded its page.

use crate::crowd::unescape;
use std::time::Duration;

use futures_util::SinkExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{WebSocketStream, client_async_with_config};

use crate::error::Failure;
use crate::frames;
use crate::http::{Conn, form_escape};
use crate::policy::Role;
use crate::target::Target;

/// A participant's WebSocket.
pub type Ws = WebSocketStream<TcpStream>;

/// Pages a participant may have to accept before the waiting room (consent, instructions, and
/// a margin for studies with more).
const MAX_PAGES: usize = 8;
/// Bytes read from a socket at a time: enough for a wizard's view (~10 KiB) in one read. The
/// library's default (128 KiB) is zero-filled on every read and stays resident per socket.
const READ_BUFFER: usize = 16 * 1024;
/// The WebSocket handshake must finish within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the entry flow left the participant.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrived {
    /// On the waiting page: the connection is ready for the waiting room's WebSocket.
    Waiting,
    /// Already in a room (a participant that resumed).
    Room,
}

/// Opens the entry link as `name` in `role` and accepts every page up to the waiting room.
/// Returns the kept-alive connection and the participant's cookie (`name=value`).
pub async fn enter(
    target: &Target,
    name: &str,
    role: Role,
) -> Result<(Conn, String, Arrived), Failure> {
    let mut conn = Conn::connect(target).await?;
    let link = format!(
        "/join?participant={}&role={}",
        form_escape(name),
        role.as_str()
    );
    let res = conn.get(&link, None).await?;
    if res.status == 429 {
        // Every simulated participant comes from 127.0.0.1, which the server limits like any
        // other address.
        return Err(Failure::new(
            "http_429",
            "GET /join answered 429: the server limits entry links per address; \
             start it with `wozkit serve --join-limit 0` for a load test",
        ));
    }
    if res.status != 303 {
        return Err(http_status("GET /join", res.status, &res.body));
    }
    let cookie = res
        .cookies
        .into_iter()
        .find(|c| c.starts_with("wozkit_token="))
        .ok_or_else(|| Failure::new("no_cookie", "the entry link set no participant cookie"))?;
    for _ in 0..MAX_PAGES {
        let res = conn.get("/p", Some(&cookie)).await?;
        if res.status != 200 {
            return Err(http_status("GET /p", res.status, &res.body));
        }
        match page_kind(&res.body).as_deref() {
            Some("consent" | "instructions") => {
                let step = form_step(&res.body)
                    .ok_or_else(|| Failure::new("unexpected_page", "a form without `step`"))?;
                let form = format!("step={}", form_escape(&step));
                let res = conn.post_form("/p/next", Some(&cookie), &form).await?;
                if res.status != 303 {
                    return Err(http_status("POST /p/next", res.status, &res.body));
                }
            }
            Some("waiting") => return Ok((conn, cookie, Arrived::Waiting)),
            Some("room") => return Ok((conn, cookie, Arrived::Room)),
            other => {
                return Err(Failure::new(
                    "unexpected_page",
                    format!("the flow showed {other:?} before the waiting room"),
                ));
            }
        }
    }
    Err(Failure::new(
        "unexpected_page",
        "too many pages before the waiting room",
    ))
}

/// Loads the room page on a fresh connection and opens the room's WebSocket on it.
pub async fn open_room(target: &Target, cookie: &str) -> Result<Ws, Failure> {
    let mut conn = Conn::connect(target).await?;
    let res = conn.get("/p", Some(cookie)).await?;
    if res.status != 200 {
        return Err(http_status("GET /p", res.status, &res.body));
    }
    match page_kind(&res.body).as_deref() {
        Some("room") => upgrade(target, conn.into_stream()?, cookie).await,
        other => Err(Failure::new(
            "unexpected_page",
            format!("expected the room page, got {other:?}"),
        )),
    }
}

/// The WebSocket handshake on `stream` (cookie and Origin as a browser sends them), then
/// `hello`.
pub async fn upgrade(target: &Target, stream: TcpStream, cookie: &str) -> Result<Ws, Failure> {
    let bad = |e: String| Failure::new("ws_handshake", e);
    let mut req = format!("ws://{}/ws", target.authority())
        .into_client_request()
        .map_err(|e| bad(e.to_string()))?;
    let headers = req.headers_mut();
    headers.insert(
        "cookie",
        HeaderValue::from_str(cookie).map_err(|e| bad(e.to_string()))?,
    );
    headers.insert(
        "origin",
        HeaderValue::from_str(&target.origin()).map_err(|e| bad(e.to_string()))?,
    );
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    let handshake = client_async_with_config(req, stream, Some(config));
    let (mut ws, _) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| Failure::new("timeout", "the WebSocket handshake took too long"))?
        .map_err(|e| bad(e.to_string()))?;
    ws.send(Message::Text(frames::hello().into()))
        .await
        .map_err(|e| Failure::new("ws_closed", e.to_string()))?;
    Ok(ws)
}

fn http_status(what: &str, status: u16, body: &str) -> Failure {
    let excerpt: String = body.chars().take(120).collect();
    Failure::new(
        format!("http_{status}"),
        format!("{what} answered {status}: {excerpt}"),
    )
}

/// The `data-page` of a participant page (`consent`, `waiting`, `room`, …).
fn page_kind(html: &str) -> Option<String> {
    attribute_after(html, "data-page=\"")
}

/// The hidden `step` of a page's form.
fn form_step(html: &str) -> Option<String> {
    attribute_after(html, "name=\"step\" value=\"").map(|v| unescape(&v))
}

fn attribute_after(html: &str, marker: &str) -> Option<String> {
    let start = html.find(marker)? + marker.len();
    let len = html[start..].find('"')?;
    Some(html[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_steps_are_read_from_the_html() {
        let html = "<main class=\"narrow\" data-page=\"consent\"><form method=\"post\" \
                    action=\"/p/next\"><input type=\"hidden\" name=\"step\" value=\"0:consent\">";
        assert_eq!(page_kind(html).as_deref(), Some("consent"));
        assert_eq!(form_step(html).as_deref(), Some("0:consent"));
        assert_eq!(page_kind("<main>").as_deref(), None);
        assert_eq!(unescape("a&amp;b&#39;"), "a&b'");
    }
}
