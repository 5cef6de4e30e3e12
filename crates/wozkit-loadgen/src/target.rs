//! The server under test: parsed from `--url`, and only ever a server on this machine. A load
//! generator pointed at somebody else's server is an attack, so anything but `127.0.0.1` or
//! `localhost` is refused before a single connection is made.

use std::net::{Ipv4Addr, SocketAddr};

use crate::error::LoadgenError;

/// Where the server listens, and how requests name it (the `Host` and `Origin` headers must
/// match for the server's Origin check to accept form posts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// As written in the URL: `127.0.0.1` or `localhost`.
    pub host: String,
    pub port: u16,
    /// Loopback source addresses the connections are spread over (127.0.0.1, 127.0.0.2, …):
    /// each source address has only its ephemeral ports (about 28,000 on Linux) to connect
    /// from, so 50,000 participants need at least two.
    pub sources: u8,
}

impl Target {
    /// Parses `http://127.0.0.1:PORT` or `http://localhost:PORT` (a trailing `/` is allowed).
    pub fn parse(url: &str) -> Result<Target, LoadgenError> {
        let bad = |reason: &'static str| LoadgenError::BadUrl {
            url: url.to_string(),
            reason,
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("give the server as http://127.0.0.1:PORT"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !path.is_empty() {
            return Err(bad("give the server's root URL, without a path"));
        }
        if authority.contains('@') {
            return Err(bad("no user name or password in the URL"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?,
            ),
            None => (authority, 80),
        };
        let host = host.to_ascii_lowercase();
        if host != "127.0.0.1" && host != "localhost" {
            return Err(bad(
                "the load generator only targets a server on this machine (127.0.0.1 or localhost)",
            ));
        }
        Ok(Target {
            host,
            port,
            sources: 1,
        })
    }

    /// The socket address to connect to (IPv4 loopback for both spellings).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `host:port`, for the `Host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `http://host:port`, for the `Origin` header and printing.
    pub fn origin(&self) -> String {
        format!("http://{}", self.authority())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_parse() {
        let t = Target::parse("http://127.0.0.1:8080").ok();
        assert_eq!(
            t,
            Some(Target {
                host: "127.0.0.1".into(),
                port: 8080,
                sources: 1,
            })
        );
        let t = Target::parse("http://LocalHost:9/").ok();
        assert_eq!(
            t.as_ref().map(Target::origin).as_deref(),
            Some("http://localhost:9")
        );
        assert_eq!(
            Target::parse("http://localhost").ok().map(|t| t.port),
            Some(80)
        );
    }

    #[test]
    fn other_hosts_and_shapes_are_refused() {
        for url in [
            "http://example.com:8080",
            "http://10.0.0.1:8080",
            "http://127.0.0.1.example.com:80",
            "https://127.0.0.1:8080",
            "127.0.0.1:8080",
            "http://127.0.0.1:8080/p",
            "http://user@127.0.0.1:8080",
            "http://127.0.0.1:0",
            "http://127.0.0.1:99999",
            "http://[::1]:8080",
        ] {
            assert!(Target::parse(url).is_err(), "{url} accepted");
        }
    }
}
