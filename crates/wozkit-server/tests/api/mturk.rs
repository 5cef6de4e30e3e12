//! MTurk: the preview page describes the task without creating a participant, and the completion
//! page submits the assignment to `turkSubmitTo` (externalSubmit), checked against a stand-in.

use std::collections::HashMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use wozkit_core::load::{StudySource, load_text};
use wozkit_store::Platform;

use crate::helpers::*;

/// A stand-in of MTurk's externalSubmit endpoint: accepts one request and hands back its
/// request line and form fields.
async fn stand_in() -> (String, oneshot::Receiver<(String, HashMap<String, String>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        // Read the head, then as many body bytes as Content-Length says.
        let (head, body) = loop {
            let Ok(n) = stream.read(&mut buf).await else {
                return;
            };
            if n == 0 {
                return;
            }
            raw.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&raw).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= len {
                    break (head.to_string(), body[..len].to_string());
                }
            }
        };
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .await;
        let fields = form_fields(&body);
        let line = head.lines().next().unwrap_or_default().to_string();
        let _ = tx.send((line, fields));
    });
    (format!("http://{addr}"), rx)
}

fn unescape(s: &str) -> String {
    let bytes = s.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

fn form_fields(body: &str) -> HashMap<String, String> {
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (unescape(k), unescape(v)))
        .collect()
}

fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of `attr` in the first tag of `html` that holds `marker`.
fn attr_in(html: &str, marker: &str, attr: &str) -> Option<String> {
    let at = html.find(marker)?;
    let start = html[..at].rfind('<')?;
    let tag = &html[start..start + html[start..].find('>')?];
    let value = tag.split(&format!("{attr}=\"")).nth(1)?.split('"').next()?;
    Some(html_unescape(value))
}

#[tokio::test]
async fn the_completion_page_submits_the_assignment_to_turk_submit_to() {
    let mut app = spawn_app(Tiny {
        wait_limit_s: 1,
        ..Tiny::default()
    })
    .await;
    let (endpoint, received) = stand_in().await;
    let worker = app
        .join(&format!(
            "workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo={}",
            query_escape(&endpoint)
        ))
        .await;
    worker.accept_pages().await;
    let mut ws = worker.ws().await;
    ws.hello(0).await;
    ws.until_type("ended").await;

    let page = worker.page().await.body;
    let code = page
        .split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_default()
        .to_string();
    assert_eq!(code.len(), 8, "{page}");
    let action = attr_in(&page, "id=\"mturk-submit\"", "action").expect("a submit form");
    assert_eq!(action, format!("{endpoint}/mturk/externalSubmit"));
    assert_eq!(
        attr_in(&page, "id=\"mturk-submit\"", "method").as_deref(),
        Some("post")
    );
    // Every field of the form, posted as a browser would.
    let form = &page[page.find("id=\"mturk-submit\"").unwrap_or(0)..];
    let form = &form[..form.find("</form>").unwrap_or(form.len())];
    let fields: Vec<(String, String)> = form
        .split("<input ")
        .skip(1)
        .filter_map(|input| {
            let name = attr_in(&format!("<{input}"), "name=", "name")?;
            let value = attr_in(&format!("<{input}"), "name=", "value")?;
            Some((name, value))
        })
        .collect();
    let body = fields
        .iter()
        .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
        .collect::<Vec<_>>()
        .join("&");
    let path = action.strip_prefix(&endpoint).unwrap_or_default();
    let addr = endpoint
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("stand-in address");
    let res = http(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &body,
    )
    .await;
    assert_eq!(res.status, 200);

    let (line, got) = received.await.expect("the stand-in got the submit");
    assert!(line.starts_with("POST /mturk/externalSubmit "), "{line}");
    assert_eq!(got.get("assignmentId").map(String::as_str), Some("A1"));
    assert!(
        got.values().any(|v| *v == code),
        "the code is among the fields: {got:?}"
    );
    assert!(got.len() >= 2, "{got:?}");
    app.stop().await;
}

#[tokio::test]
async fn turk_submit_to_must_be_a_web_address() {
    let mut app = spawn_app(Tiny::default()).await;
    for bad in [
        "javascript:alert(1)",
        "data:text/html,x",
        "https://x\"><script>",
        "//evil.example",
    ] {
        let res = app
            .http(
                "GET",
                &format!(
                    "/join?workerId=W2&assignmentId=A2&hitId=H2&turkSubmitTo={}",
                    query_escape(bad)
                ),
                &[],
                "",
            )
            .await;
        assert_eq!(res.status, 400, "{bad}: {}", res.body);
        assert!(res.body.contains("turkSubmitTo"), "{}", res.body);
        assert!(!res.body.contains("<script>"), "{}", res.body);
    }
    let none = app
        .store
        .participant_by_worker("tiny", Platform::Mturk, "W2")
        .await
        .expect("store");
    assert!(none.is_none());
    app.stop().await;
}

#[tokio::test]
async fn the_preview_describes_the_task_and_creates_no_participant() {
    let yaml = Tiny::default().yaml().replace(
        "title: Tiny study",
        "title: Tiny study\ndescription: Wizard-of-Oz pilot, the wizard poses as a computer.\n\
         preview: Work with an assistant to send a robot to the tower.",
    );
    let study = load_text("tiny.yaml", &yaml, StudySource::Dir(".".into())).expect("loads");
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let res = app
        .http(
            "GET",
            "/join?workerId=W3&assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H3",
            &[],
            "",
        )
        .await;
    assert_eq!(res.status, 200);
    assert!(res.header("set-cookie").is_none());
    assert!(res.body.contains("Tiny study"), "{}", res.body);
    assert!(
        res.body.contains("data-testid=\"task-description\""),
        "{}",
        res.body
    );
    // The participants' words only: the preview, never the researcher's description, nor
    // that another worker plays the other role (the cover story holds).
    assert!(
        res.body
            .contains("Work with an assistant to send a robot to the tower."),
        "{}",
        res.body
    );
    for leak in [
        "Wizard-of-Oz",
        "computer",
        "another worker",
        "one of two roles",
    ] {
        assert!(!res.body.contains(leak), "{leak}: {}", res.body);
    }
    let none = app
        .store
        .participant_by_worker("tiny", Platform::Mturk, "W3")
        .await
        .expect("store");
    assert!(none.is_none());
    app.stop().await;
}
