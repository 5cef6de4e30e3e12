//! The real `wozkit serve` as a child process, for the tests that need the binary as a user runs
//! it (the crash test, data taken out while it serves).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server process on a fixed data directory and port.
pub struct Server {
    pub addr: SocketAddr,
    pub study: PathBuf,
    pub data: PathBuf,
    pub log: PathBuf,
    pub child: Option<Child>,
}

impl Server {
    /// A server not yet started, serving `study` (a built-in study's id or a file) from `data`
    /// (a folder or a PostgreSQL URL), writing its output to `log`, on a free port.
    pub fn new(
        study: impl Into<PathBuf>,
        data: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Server {
        Server {
            addr: free_port(),
            study: study.into(),
            data: data.into(),
            log: log.into(),
            child: None,
        }
    }

    /// A server not yet started, serving `study` with its data in `dir/data` and its output in
    /// `dir/server.log`, on a free port.
    pub fn in_dir(study: impl Into<PathBuf>, dir: &Path) -> Server {
        Server::new(study, dir.join("data"), dir.join("server.log"))
    }

    pub fn start(&mut self) {
        self.start_with(&[]);
    }

    /// Starts with `extra` arguments after the usual ones (e.g. `--instance-id`).
    pub fn start_with(&mut self, extra: &[String]) {
        for _ in 0..50 {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .expect("server log");
            let err = log.try_clone().expect("server log");
            let mut child = Command::new(env!("CARGO_BIN_EXE_wozkit"))
                .arg("serve")
                .arg(&self.study)
                .arg("--addr")
                .arg(self.addr.to_string())
                .arg("--data")
                .arg(&self.data)
                .args(extra)
                .env_remove("WOZKIT_RESEARCHER_PASSWORD")
                .env_remove("WOZKIT_DATA")
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .spawn()
                .expect("wozkit serve starts");
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(20) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if healthy(self.addr) {
                    self.child = Some(child);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // Exited early (e.g. the port was not free yet) or never became ready: again.
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("the server does not start; its log:\n{}", self.log_text());
    }

    /// Starts without the per-address entry limit (`--join-limit 0`): a crowd of simulated
    /// workers all come from 127.0.0.1.
    pub fn start_without_join_limit(&mut self) {
        self.start_with(&["--join-limit".into(), "0".into()]);
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().expect("reaped");
        }
    }

    /// Stops with SIGINT (Ctrl-C), as an operator would; returns whether it exited cleanly.
    pub fn stop(&mut self) -> bool {
        let Some(mut c) = self.child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .args(["-INT", &c.id().to_string()])
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(status)) = c.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn healthy(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    s.write_all(req.as_bytes()).is_ok()
        && s.read_to_string(&mut out).is_ok()
        && out.starts_with("HTTP/1.1 200")
}

/// One HTTP/1.1 request to `addr` as a browser on the server's own origin sends it (a form body,
/// `cookie` as the Cookie header, `headers` added after Origin); the status, the first
/// Set-Cookie's `name=value` (empty without one) and the body. `None` when the server is not
/// reachable or does not answer within 10 s.
pub async fn http_request(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    method: &str,
    path: &str,
    cookie: &str,
    body: &str,
) -> Option<(u16, String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n{extra}Cookie: {cookie}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut raw = vec![];
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let set_cookie = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie:")
                .then(|| l["set-cookie:".len()..].trim().to_string())
        })
        .and_then(|c| c.split(';').next().map(str::to_string))
        .unwrap_or_default();
    Some((status, set_cookie, body.to_string()))
}

pub fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// Runs the `wozkit` binary to its end: (exit code, stdout, stderr).
pub fn wozkit(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args(args)
        .env_remove("WOZKIT_DATA")
        .output()
        .expect("wozkit runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A comparison study (`compare` pages, one judgment per pair, two items per worker) of
/// `pairs` scenarios, each a dialogue of system A and one of system B; `header` gives its `id`,
/// `title` and whatever else goes first, `payment` its payment scheme (a YAML flow mapping).
pub fn compare_study_yaml(header: &str, pairs: usize, payment: &str) -> String {
    let mut s = format!(
        "{header}flow:\n  user:\n\
         \x20   - {{kind: consent}}\n\
         \x20   - {{kind: compare}}\n\
         \x20   - {{kind: completion}}\n\
         evaluation:\n  task: compare\n  judgments_per_item: 1\n  items_per_worker: 2\n\
         \x20 pairs: {{rule: all_systems}}\n\
         \x20 dialogues:\n"
    );
    for i in 0..pairs {
        for sys in ["A", "B"] {
            s.push_str(&format!(
                "    - {{id: {}{i}, system: {sys}, scenario: s{i}, turns: [{{speaker: user, text: hi {i}}}, {{speaker: bot, text: reply {sys} {i}}}]}}\n",
                sys.to_lowercase()
            ));
        }
    }
    s.push_str(&format!("payment: {payment}\n"));
    s
}

/// Cents of a decimal as the CSV writes it (`1.3`, `0.45`, `2`), read as text.
pub fn cents(text: &str) -> u64 {
    let (units, frac) = text.split_once('.').unwrap_or((text, ""));
    let frac = format!("{frac:0<2}");
    assert!(frac.len() == 2, "more than cents in `{text}`");
    units.parse::<u64>().unwrap() * 100 + frac.parse::<u64>().unwrap()
}

/// The payment table (`wozkit payments`) of a study's rows as column → value maps.
pub fn payment_table(study: &str, data: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let (code, out, err) = wozkit(&["payments", "--study", study, "--data", data]);
    assert_eq!(code, 0, "wozkit payments failed:\n{out}\n{err}");
    let mut lines = out.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            assert!(!l.contains('"'), "a quoted field: {l}");
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

/// One load test at a time: the tests that run servers under load and kill them (`crash`,
/// `failover`) or send a crowd of workers at them (`crowd`, `crowd_arena`) share one test
/// binary, and two of them at once on a two-core machine would mostly measure each other (each
/// ran alone in its own binary before). Held for the whole test; a test that panics releases it.
pub fn one_load_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A chat-completions endpoint (the OpenAI-compatible API model judges and simulated users call)
/// on a local port, served from a thread of its own: each request's first message (the rendered
/// prompt) goes to `reply`, whose JSON is the response body. Returns the base URL (`…/v1`).
pub fn chat_completions_server(
    reply: impl Fn(&str) -> serde_json::Value + Send + Sync + 'static,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let reply = std::sync::Arc::new(reply);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                let reply = reply.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let body = loop {
                        let n = sock.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf).to_string();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let len = text[..end]
                                .lines()
                                .find_map(|l| {
                                    let (k, v) = l.split_once(':')?;
                                    k.eq_ignore_ascii_case("content-length")
                                        .then(|| v.trim().parse::<usize>().ok())?
                                })
                                .unwrap_or(0);
                            if buf.len() >= end + 4 + len {
                                break buf[end + 4..end + 4 + len].to_vec();
                            }
                        }
                    };
                    let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    let prompt = request["messages"][0]["content"].as_str().unwrap_or("");
                    let body = reply(prompt).to_string();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(response.as_bytes()).await;
                });
            }
        });
    });
    format!("http://{}/v1", rx.recv().unwrap())
}
