//! A stand-in for MTurk's worker site: another site (`http://127.0.0.1:PORT`) whose page shows
//! the task's entry link in an iframe with the attributes MTurk gives an ExternalQuestion, and
//! whose `/mturk/externalSubmit` records every form posted to it, as MTurk's would take the
//! assignment.
//!
//! A tiny HTTP/1.1 server on tokio: one request per connection, closed after the reply.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One form posted to `externalSubmit`: its fields and the request's head (to check what it
/// tells the other site, e.g. no `Referer` carrying a participant's key).
#[derive(Clone, Debug)]
pub struct Submission {
    pub form: HashMap<String, String>,
    pub head: String,
}

pub struct WorkerSite {
    pub addr: SocketAddr,
    listener: Option<TcpListener>,
    submitted: Arc<Mutex<Vec<Submission>>>,
    task: Option<JoinHandle<()>>,
}

impl WorkerSite {
    /// Takes a port, so that the server under test can be told the site's origin before the
    /// site serves anything.
    pub async fn bind() -> Result<WorkerSite> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("a port for the worker site")?;
        Ok(WorkerSite {
            addr: listener.local_addr()?,
            listener: Some(listener),
            submitted: Arc::default(),
            task: None,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts serving; the task's entry links are on `task_origin` (e.g. `https://localhost:P`).
    pub fn serve(&mut self, task_origin: &str) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        let site = Arc::new(Pages {
            task_origin: task_origin.to_string(),
            own_origin: self.origin(),
            submitted: self.submitted.clone(),
        });
        self.task = Some(tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let site = site.clone();
                tokio::spawn(async move {
                    let _ = site.answer(stream).await;
                });
            }
        }));
    }

    /// The page a worker opens for the assignment `assignment` of the worker `worker`.
    pub fn hit_url(&self, worker: &str, assignment: &str) -> String {
        format!(
            "{}/hit?workerId={}&assignmentId={}",
            self.origin(),
            encode(worker),
            encode(assignment)
        )
    }

    /// The forms `externalSubmit` received so far.
    pub fn submitted(&self) -> Vec<Submission> {
        self.submitted.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for WorkerSite {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

struct Pages {
    task_origin: String,
    own_origin: String,
    submitted: Arc<Mutex<Vec<Submission>>>,
}

impl Pages {
    async fn answer(&self, mut stream: TcpStream) -> Result<()> {
        let mut raw = vec![];
        let mut buf = [0u8; 4096];
        let head_end = loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            raw.extend_from_slice(&buf[..n]);
            if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
        let length: usize = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0);
        while raw.len() < head_end + length {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
        }
        let body = String::from_utf8_lossy(&raw[head_end..]).to_string();
        let mut request_line = head.lines().next().unwrap_or_default().split_whitespace();
        let method = request_line.next().unwrap_or_default();
        let target = request_line.next().unwrap_or_default();
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let (status, page) = match (method, path) {
            ("GET", "/hit") => ("200 OK", self.hit(&decode_form(query))),
            ("POST", "/mturk/externalSubmit") => {
                if let Ok(mut s) = self.submitted.lock() {
                    s.push(Submission {
                        form: decode_form(&body),
                        head: head.clone(),
                    });
                }
                (
                    "200 OK",
                    "<!doctype html><title>Submitted</title>\
                     <p id=\"submitted\">The assignment was submitted.</p>"
                        .to_string(),
                )
            }
            _ => ("404 Not Found", "not here".to_string()),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
        stream.write_all(reply.as_bytes()).await?;
        stream.shutdown().await?;
        Ok(())
    }

    /// The worker's page: the task in a frame, as MTurk shows an ExternalQuestion (the task's
    /// URL gets `assignmentId`, `hitId`, `turkSubmitTo` and `workerId`).
    fn hit(&self, q: &HashMap<String, String>) -> String {
        let get = |k: &str| q.get(k).map(String::as_str).unwrap_or_default();
        let src = format!(
            "{}/join?study=tiny&workerId={}&assignmentId={}&hitId=HIT1&turkSubmitTo={}",
            self.task_origin,
            encode(get("workerId")),
            encode(get("assignmentId")),
            encode(&self.own_origin)
        );
        format!(
            "<!doctype html><html><head><title>HIT</title></head><body style=\"margin:0\">\
             <iframe id=\"task\" title=\"HIT\" sandbox=\"allow-scripts allow-same-origin \
             allow-forms allow-popups allow-popups-to-escape-sandbox\" width=\"100%\" \
             height=\"860\" frameborder=\"0\" src=\"{}\"></iframe></body></html>",
            src.replace('&', "&amp;")
        )
    }
}

/// Percent-encodes everything but unreserved characters.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The fields of an `application/x-www-form-urlencoded` text (a form body or a query).
pub fn decode_form(s: &str) -> HashMap<String, String> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |i: usize| b.get(i).and_then(|&c| (c as char).to_digit(16));
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            (c, _, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}
