//! nginx with TLS in front of the server under test, configured as docs/operations.md ("Behind a
//! reverse proxy with TLS") says: WebSocket upgrades passed on, the browser's `Host` kept,
//! `X-Forwarded-For` and `X-Forwarded-Proto` set, the access log writing paths without their
//! query. Its certificate is a self-signed one for `localhost` and `127.0.0.1`, made by the
//! `openssl` command for each test.
//!
//! The test's own HTTPS and WSS client trusts that certificate alone and connects from a chosen
//! loopback address (`127.0.0.2`, `127.0.0.3`, …: all of 127.0.0.0/8 is the loopback on Linux),
//! so nginx sees, and forwards, different clients although every test client is on this machine.

use std::future::Future;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The name the certificate is for, and the host every URL of the proxy names.
pub const HOST: &str = "localhost";

/// The programs the proxy needs.
pub struct Tools {
    nginx: PathBuf,
    openssl: PathBuf,
}

/// Finds a program on `PATH` or in one of `also`.
fn which(program: &str, also: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(also.iter().map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// nginx and openssl, or why a test behind the proxy cannot run.
pub fn find_tools() -> Result<Tools, String> {
    match (
        which("nginx", &["/usr/sbin"]),
        which("openssl", &["/usr/bin"]),
    ) {
        (Some(nginx), Some(openssl)) => Ok(Tools { nginx, openssl }),
        (nginx, openssl) => {
            let missing: Vec<&str> = [
                nginx.is_none().then_some("nginx"),
                openssl.is_none().then_some("openssl"),
            ]
            .into_iter()
            .flatten()
            .collect();
            Err(format!(
                "the test behind a TLS proxy needs {} (Debian packages `nginx-light` and \
                 `openssl`). Run scripts/test-all.sh, which installs them, or `apt-get install -y \
                 nginx-light openssl`; set WOZKIT_SKIP_E2E=1 to skip the end-to-end tests on \
                 purpose.",
                missing.join(" and ")
            ))
        }
    }
}

/// Runs the test `run` called `what` with nginx and openssl, as the browser tests run theirs:
/// skipped, saying so, with `WOZKIT_SKIP_E2E=1`; failing (never skipping) when a tool is
/// missing; failing when it runs longer than `limit`.
pub async fn run_proxy_test<F, Fut>(what: &str, limit: Duration, run: F)
where
    F: FnOnce(Tools) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    if std::env::var("WOZKIT_SKIP_E2E").as_deref() == Ok("1") {
        eprintln!("{what} skipped (WOZKIT_SKIP_E2E=1)");
        return;
    }
    let tools = find_tools().unwrap_or_else(|why| panic!("{why}"));
    let started = Instant::now();
    let secs = || started.elapsed().as_secs_f64();
    match tokio::time::timeout(limit, run(tools)).await {
        Ok(Ok(())) => eprintln!("{what} passed in {:.1} s", secs()),
        Ok(Err(e)) => panic!("{what} failed after {:.1} s: {e:#}", secs()),
        Err(_) => panic!("{what} did not finish within {limit:?}"),
    }
}

/// A self-signed certificate for `localhost` and `127.0.0.1` (not a CA, as a site's is), and its
/// key, written to `dir` as `cert.pem`, `key.pem` and `cert.der`.
fn make_certificate(openssl: &Path, dir: &Path) -> Result<CertificateDer<'static>> {
    let conf = dir.join("req.cnf");
    std::fs::write(
        &conf,
        "[req]\ndistinguished_name = dn\nx509_extensions = v3\nprompt = no\n\
         [dn]\nCN = localhost\n\
         [v3]\nbasicConstraints = critical, CA:FALSE\n\
         keyUsage = critical, digitalSignature, keyEncipherment\n\
         extendedKeyUsage = serverAuth\nsubjectAltName = DNS:localhost, IP:127.0.0.1\n",
    )
    .context("writing the certificate request")?;
    let run = |args: &[&str]| -> Result<()> {
        let out = Command::new(openssl)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", openssl.display()))?;
        if !out.status.success() {
            bail!(
                "openssl {} failed ({}):\n{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-config",
        "req.cnf",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
    ])?;
    run(&[
        "x509", "-in", "cert.pem", "-outform", "DER", "-out", "cert.der",
    ])?;
    let der = std::fs::read(dir.join("cert.der")).context("reading cert.der")?;
    Ok(CertificateDer::from(der))
}

/// `http2 on;` where nginx knows it (1.25.1 and later, as docs/operations.md writes it), else
/// the older `listen … http2` (Debian 12 has nginx 1.22).
fn http2_directives(nginx: &Path) -> Result<(&'static str, &'static str)> {
    let out = Command::new(nginx)
        .arg("-v")
        .output()
        .with_context(|| format!("running {} -v", nginx.display()))?;
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    let version: Vec<u32> = text
        .split("nginx/")
        .nth(1)
        .unwrap_or_default()
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .filter_map(|n| n.parse().ok())
        .collect();
    Ok(if version >= vec![1, 25, 1] {
        ("", "http2 on;")
    } else {
        (" http2", "")
    })
}

/// The configuration of docs/operations.md, on `listen` in front of `upstream`, everything
/// nginx writes in `dir`; nginx runs as the current user, in the foreground.
fn nginx_conf(dir: &Path, listen: SocketAddr, upstream: SocketAddr, http2: (&str, &str)) -> String {
    let d = dir.display();
    let (listen_http2, http2_on) = http2;
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  map $http_upgrade $connection_upgrade {{
    default upgrade;
    ''      close;
  }}
  log_format wozkit_paths '$remote_addr - [$time_local] "$request_method $uri" $status '
                          '$body_bytes_sent "$http_user_agent"';
  server {{
    listen {listen} ssl{listen_http2};
    {http2_on}
    server_name {HOST};
    ssl_certificate     {d}/cert.pem;
    ssl_certificate_key {d}/key.pem;
    access_log {d}/access.log wozkit_paths;
    client_max_body_size 1m;
    location / {{
      proxy_pass http://{upstream};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      proxy_buffering off;
    }}
  }}
}}
"#
    )
}

/// A reply read whole (the connection closed after it).
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// Every value of the header `name`.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.all(name).into_iter().next()
    }
}

/// The running nginx; ended when dropped.
pub struct Proxy {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    tls: TlsConnector,
}

impl Proxy {
    /// Makes the certificate, writes the configuration and starts nginx in front of
    /// `upstream`; waits until `/healthz` answers through it.
    pub async fn start(tools: &Tools, upstream: SocketAddr) -> Result<Proxy> {
        let dir = tempfile::tempdir().context("nginx dir")?;
        let cert = make_certificate(&tools.openssl, dir.path())?;
        let mut roots = RootCertStore::empty();
        roots
            .add(cert)
            .context("the test's certificate as the only trusted one")?;
        let config = ClientConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("a free port for nginx")?
            .port();
        let listen = SocketAddr::from(([127, 0, 0, 1], port));
        let conf = dir.path().join("nginx.conf");
        let text = nginx_conf(
            dir.path(),
            listen,
            upstream,
            http2_directives(&tools.nginx)?,
        );
        std::fs::write(&conf, text).context("writing nginx.conf")?;
        let out = std::fs::File::create(dir.path().join("nginx.out")).context("nginx.out")?;
        let child = Command::new(&tools.nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(out.try_clone().context("nginx.out")?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", tools.nginx.display()))?;
        let mut proxy = Proxy {
            port,
            dir,
            child: Some(child),
            tls: TlsConnector::from(Arc::new(config)),
        };
        let started = Instant::now();
        loop {
            match proxy.request("127.0.0.1", "GET", "/healthz", &[], "").await {
                Ok(r) if r.status == 200 => return Ok(proxy),
                _ => {}
            }
            if let Some(Ok(Some(status))) = proxy.child.as_mut().map(Child::try_wait) {
                bail!("nginx exited ({status}):\n{}", proxy.log_text());
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!(
                    "nginx on port {port} does not pass /healthz on over TLS within 30 s:\n{}",
                    proxy.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The site's origin as a browser names it: `https://localhost:PORT`.
    pub fn origin(&self) -> String {
        format!("https://{HOST}:{}", self.port)
    }

    /// What nginx wrote to its access log so far.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// nginx's own output and error log, for failures.
    pub fn log_text(&self) -> String {
        ["nginx.out", "error.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default())
            .collect()
    }

    /// A TLS connection to nginx from the local address `from` (any of 127.0.0.0/8).
    async fn connect(&self, from: &str) -> Result<TlsStream<TcpStream>> {
        let socket = TcpSocket::new_v4().context("socket")?;
        let local: IpAddr = from.parse().context("a client address")?;
        socket
            .bind(SocketAddr::new(local, 0))
            .with_context(|| format!("binding the client address {from}"))?;
        let tcp = socket
            .connect(SocketAddr::from(([127, 0, 0, 1], self.port)))
            .await
            .context("connecting to nginx")?;
        let name = ServerName::try_from(HOST).context("server name")?;
        self.tls
            .connect(name, tcp)
            .await
            .context("TLS handshake with nginx")
    }

    /// An HTTP/1.1 request over TLS from the client address `from`, the connection closed after
    /// the reply.
    pub async fn request(
        &self,
        from: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Reply> {
        let mut stream = self.connect(from).await?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {HOST}:{}\r\nConnection: close\r\n\
             Content-Length: {}\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream
            .write_all(req.as_bytes())
            .await
            .context("sending the request")?;
        let mut raw = vec![];
        // A peer that closes without TLS's close_notify still sent its whole reply: what was
        // read counts.
        if let Err(e) = stream.read_to_end(&mut raw).await
            && (raw.is_empty() || e.kind() != std::io::ErrorKind::UnexpectedEof)
        {
            return Err(e).context("reading the reply");
        }
        Ok(parse_reply(&String::from_utf8_lossy(&raw)))
    }

    /// A WebSocket (`wss://localhost:PORT{path}`) from the client address `from`, with the
    /// `Origin` of the site, as a page of the site opens it.
    pub async fn websocket(
        &self,
        from: &str,
        path: &str,
    ) -> Result<WebSocketStream<TlsStream<TcpStream>>> {
        let stream = self.connect(from).await?;
        let mut req = format!("wss://{HOST}:{}{path}", self.port)
            .into_client_request()
            .context("the WebSocket request")?;
        req.headers_mut().insert(
            "origin",
            self.origin().parse().context("the Origin header")?,
        );
        let (ws, _) = tokio_tungstenite::client_async(req, stream)
            .await
            .context("the WebSocket handshake through nginx")?;
        Ok(ws)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn parse_reply(text: &str) -> Reply {
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
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
    Reply {
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
