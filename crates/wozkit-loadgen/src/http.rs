//! A minimal HTTP/1.1 client on one kept-alive connection: enough for the participant pages
//! (GET, form POST, cookies, redirects read by hand) and for handing the very same TCP
//! connection over to the WebSocket handshake, the way a browser's page flow reuses its
//! connection. One connection per participant instead of one per request keeps 10,000
//! simulated participants within the machine's ephemeral ports.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::Failure;
use crate::target::Target;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest response body accepted (participant pages are a few KiB).
const MAX_BODY: usize = 4 * 1024 * 1024;
/// Headers parsed per response.
const MAX_HEADERS: usize = 48;
/// A request that takes longer than this counts as a `timeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What the page flow needs from a response.
#[derive(Debug, Default)]
pub struct Response {
    pub status: u16,
    pub location: Option<String>,
    /// `name=value` of each `Set-Cookie` (attributes dropped).
    pub cookies: Vec<String>,
    pub body: String,
}

/// Connections opened so far, to spread them over the target's source addresses in turn.
static OPENED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A TCP connection to the target, from the next of its loopback source addresses.
async fn open(target: &Target) -> std::io::Result<TcpStream> {
    if target.sources <= 1 {
        return TcpStream::connect(target.addr()).await;
    }
    let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % u32::from(target.sources);
    let source = std::net::Ipv4Addr::new(127, 0, 0, 1 + n as u8);
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from((source, 0)))?;
    socket.connect(target.addr()).await
}

/// One kept-alive connection to the server.
pub struct Conn {
    stream: TcpStream,
    /// Bytes read but not yet consumed: must be empty when the connection is handed over.
    buf: Vec<u8>,
    host: String,
    origin: String,
}

impl Conn {
    pub async fn connect(target: &Target) -> Result<Conn, Failure> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, open(target))
            .await
            .map_err(|_| Failure::new("timeout", "connecting took too long"))?
            .map_err(|e| Failure::new("connect", e.to_string()))?;
        // Frames are small and latency is what is measured: no Nagle delay.
        let _ = stream.set_nodelay(true);
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(8 * 1024),
            host: target.authority(),
            origin: target.origin(),
        })
    }

    pub async fn get(&mut self, path: &str, cookie: Option<&str>) -> Result<Response, Failure> {
        self.request("GET", path, cookie, None, None).await
    }

    /// A form post from this site's page (with the `Origin` a browser sends).
    pub async fn post_form(
        &mut self,
        path: &str,
        cookie: Option<&str>,
        form: &str,
    ) -> Result<Response, Failure> {
        self.request("POST", path, cookie, Some(form), None).await
    }

    /// A form post asking for the response as `accept` (e.g. `application/x-ndjson` for the
    /// chat pages' streamed replies); a chunked body is read to its end.
    pub async fn post_form_accept(
        &mut self,
        path: &str,
        cookie: Option<&str>,
        form: &str,
        accept: &str,
    ) -> Result<Response, Failure> {
        self.request("POST", path, cookie, Some(form), Some(accept))
            .await
    }

    async fn request(
        &mut self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        form: Option<&str>,
        accept: Option<&str>,
    ) -> Result<Response, Failure> {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        if let Some(a) = accept {
            req.push_str(&format!("Accept: {a}\r\n"));
        }
        if let Some(c) = cookie {
            req.push_str(&format!("Cookie: {c}\r\n"));
        }
        if let Some(body) = form {
            req.push_str(&format!(
                "Origin: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
                self.origin,
                body.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(form.unwrap_or(""));
        let exchange = async {
            self.stream
                .write_all(req.as_bytes())
                .await
                .map_err(|e| Failure::new("http_io", e.to_string()))?;
            self.read_response().await
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| Failure::new("timeout", format!("{method} {path} took too long")))?
    }

    async fn fill(&mut self) -> Result<(), Failure> {
        let mut chunk = [0u8; 8192];
        let n = self
            .stream
            .read(&mut chunk)
            .await
            .map_err(|e| Failure::new("http_io", e.to_string()))?;
        if n == 0 {
            return Err(Failure::new("http_io", "the server closed the connection"));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn read_response(&mut self) -> Result<Response, Failure> {
        let (head_len, mut res, length, chunked) = loop {
            if let Some(parsed) = parse_head(&self.buf)? {
                break parsed;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(Failure::new("http_io", "response head too large"));
            }
            self.fill().await?;
        };
        self.buf.drain(..head_len);
        let body = if chunked {
            loop {
                match dechunk(&self.buf)? {
                    Some((body, used)) => {
                        self.buf.drain(..used);
                        break body;
                    }
                    None if self.buf.len() > MAX_BODY => {
                        return Err(Failure::new("http_io", "response body too large"));
                    }
                    None => self.fill().await?,
                }
            }
        } else {
            let n = length.unwrap_or(0);
            if n > MAX_BODY {
                return Err(Failure::new("http_io", "response body too large"));
            }
            while self.buf.len() < n {
                self.fill().await?;
            }
            self.buf.drain(..n).collect()
        };
        res.body = String::from_utf8_lossy(&body).into_owned();
        Ok(res)
    }

    /// The bare connection, for the WebSocket handshake.
    pub fn into_stream(self) -> Result<TcpStream, Failure> {
        if !self.buf.is_empty() {
            return Err(Failure::new(
                "http_io",
                "unexpected bytes after the last response",
            ));
        }
        Ok(self.stream)
    }
}

/// A parsed head: its length, the response without body, the `Content-Length`, and whether the
/// body is chunked. `None` when more bytes are needed.
type Head = (usize, Response, Option<usize>, bool);

fn parse_head(buf: &[u8]) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut headers);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Failure::new("http_io", format!("bad response: {e}"))),
    };
    let mut res = Response {
        status: parsed.code.unwrap_or(0),
        ..Response::default()
    };
    let mut length = None;
    let mut chunked = false;
    for h in parsed.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        if h.name.eq_ignore_ascii_case("location") {
            res.location = Some(value.into_owned());
        } else if h.name.eq_ignore_ascii_case("set-cookie") {
            if let Some(pair) = value.split(';').next() {
                res.cookies.push(pair.trim().to_string());
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| Failure::new("http_io", "bad Content-Length"))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    Ok(Some((len, res, length, chunked)))
}

/// Decodes a complete chunked body at the start of `buf`: the body and the bytes it used, or
/// `None` when more bytes are needed.
fn dechunk(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Failure> {
    let mut body = vec![];
    let mut at = 0;
    loop {
        let Some(eol) = find_crlf(&buf[at..]) else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&buf[at..at + eol]);
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| Failure::new("http_io", "bad chunk size"))?;
        at += eol + 2;
        if size == 0 {
            // No trailers from our server: the final CRLF ends the body.
            return Ok((buf.len() >= at + 2).then_some((body, at + 2)));
        }
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += size + 2;
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// `application/x-www-form-urlencoded` (and query) escaping of one value.
pub fn form_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_spread_over_the_loopback_source_addresses() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let target = Target {
            host: "127.0.0.1".into(),
            port,
            sources: 3,
        };
        let mut peers = std::collections::BTreeSet::new();
        let mut kept = vec![];
        for _ in 0..6 {
            let (stream, accepted) = tokio::join!(open(&target), listener.accept());
            kept.push(stream.expect("connect"));
            peers.insert(accepted.expect("accept").1.ip().to_string());
        }
        assert_eq!(
            peers.into_iter().collect::<Vec<_>>(),
            ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
        );
    }

    #[test]
    fn heads_are_parsed_with_cookies_and_length() {
        let raw = b"HTTP/1.1 303 See Other\r\nlocation: /p\r\nset-cookie: wozkit_token=abc; Path=/; HttpOnly\r\ncontent-length: 0\r\n\r\n";
        let parsed = parse_head(raw).ok().flatten();
        let Some((len, res, length, chunked)) = parsed else {
            panic!("not parsed")
        };
        assert_eq!(len, raw.len());
        assert_eq!(res.status, 303);
        assert_eq!(res.location.as_deref(), Some("/p"));
        assert_eq!(res.cookies, vec!["wozkit_token=abc".to_string()]);
        assert_eq!((length, chunked), (Some(0), false));
        assert!(matches!(parse_head(b"HTTP/1.1 200 OK\r\nconte"), Ok(None)));
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let raw = b"4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\nNEXT";
        let got = dechunk(raw).ok().flatten();
        assert_eq!(got, Some((b"Wikipedia".to_vec(), raw.len() - 4)));
        assert!(matches!(dechunk(b"4\r\nWi"), Ok(None)));
        assert!(dechunk(b"zz\r\n").is_err());
    }

    #[test]
    fn form_values_are_escaped() {
        assert_eq!(form_escape("1:consent"), "1%3Aconsent");
        assert_eq!(form_escape("a b&c"), "a%20b%26c");
    }
}
