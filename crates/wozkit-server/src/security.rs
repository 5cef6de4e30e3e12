//! Small security pieces shared by the HTTP and WebSocket sides: who the client is behind a
//! trusted proxy, cookies, the Origin check, "seats" (several participants in one browser, for
//! `/try`, or a participant named by its own token in the URL, for pages in another site's
//! frame), a token-bucket rate limiter and the same bucket per client address (for entry
//! links).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;

use tokio::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

use crate::app::AppState;

/// The client at the other end of a request: its address (what rate limits key on) and whether
/// it reached the site over HTTPS. Behind a trusted reverse proxy these come from the proxy's
/// `Forwarded` or `X-Forwarded-For` and `X-Forwarded-Proto` headers; from any other peer those
/// headers are ignored, so a client cannot choose its own address. [`client_layer`] works it
/// out once per request; handlers take it as an extractor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    pub addr: IpAddr,
    pub https: bool,
}

const FORWARDED: HeaderName = HeaderName::from_static("forwarded");
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// An address as a `Forwarded` `for=` or an `X-Forwarded-For` element writes it: bare, quoted,
/// with a port, IPv6 in brackets. `unknown` and obfuscated names give `None`.
fn forwarded_addr(raw: &str) -> Option<IpAddr> {
    let v = raw.trim().trim_matches('"');
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    if let Ok(ip) = v.parse() {
        return Some(ip);
    }
    // `192.0.2.43:47011`: one colon, so not a bare IPv6 address.
    v.parse::<SocketAddr>().ok().map(|s| s.ip())
}

/// The chain of addresses and the scheme the proxies report, nearest proxy last.
fn forwarded_chain(headers: &HeaderMap) -> (Vec<Option<IpAddr>>, Option<String>) {
    let values = |name: &HeaderName| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let forwarded = values(&FORWARDED);
    if !forwarded.is_empty() {
        let mut chain = vec![];
        let mut proto = None;
        for element in &forwarded {
            for pair in element.split(';') {
                let Some((k, v)) = pair.trim().split_once('=') else {
                    continue;
                };
                if k.eq_ignore_ascii_case("for") {
                    chain.push(forwarded_addr(v));
                } else if k.eq_ignore_ascii_case("proto") {
                    proto = Some(v.trim_matches('"').to_ascii_lowercase());
                }
            }
        }
        return (chain, proto);
    }
    let chain = values(&X_FORWARDED_FOR)
        .iter()
        .map(|v| forwarded_addr(v))
        .collect();
    let proto = values(&X_FORWARDED_PROTO)
        .last()
        .map(|p| p.to_ascii_lowercase());
    (chain, proto)
}

/// Who the client is, given the socket's peer and the proxies trusted: from a trusted peer, the
/// nearest address in the forwarded chain that is not itself a trusted proxy (a client cannot
/// push another address in front of its own, as the proxy appends the one it saw).
pub fn resolve_client(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> Client {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return Client {
            addr: peer,
            https: false,
        };
    }
    let (chain, proto) = forwarded_chain(headers);
    let mut addr = peer;
    for hop in chain.iter().rev() {
        match hop {
            Some(ip) if is_trusted(ip) => addr = *ip,
            Some(ip) => {
                addr = *ip;
                break;
            }
            // An obfuscated or unknown hop: the proxy that wrote it is the last one known.
            None => break,
        }
    }
    Client {
        addr,
        https: proto.as_deref() == Some("https"),
    }
}

/// The socket's peer address (unspecified when the server was not given connection info).
fn socket_peer(extensions: &axum::http::Extensions) -> IpAddr {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// Works out the request's [`Client`] and puts it into the request's extensions. Forwarding
/// headers are then removed, and `X-Forwarded-Proto: https` put back only when a trusted proxy
/// said so, so nothing later can read an untrusted one.
pub async fn client_layer(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let peer = socket_peer(req.extensions());
    let client = resolve_client(peer, req.headers(), &app.tunables.trusted_proxies);
    let headers = req.headers_mut();
    headers.remove(FORWARDED);
    headers.remove(X_FORWARDED_FOR);
    headers.remove(X_FORWARDED_PROTO);
    if client.https {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("https"));
    }
    req.extensions_mut().insert(client);
    next.run(req).await
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Client, Infallible> {
        if let Some(c) = parts.extensions.get::<Client>() {
            return Ok(*c);
        }
        // Outside the router's layers (never for public routes): the socket's peer.
        Ok(Client {
            addr: socket_peer(&parts.extensions),
            https: false,
        })
    }
}

/// Cookie of a participant (the seat, if any, is appended: `wozkit_token_<seat>`).
pub const PARTICIPANT_COOKIE: &str = "wozkit_token";
/// Cookie of a logged-in researcher.
pub const RESEARCHER_COOKIE: &str = "wozkit_researcher";

/// The value of cookie `name`, if the request has it.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, for the whole site; `Secure` behind HTTPS (as
/// a trusted proxy says: [`client_layer`] leaves `X-Forwarded-Proto` only from one).
pub fn set_cookie(headers: &HeaderMap, name: &str, value: &str, max_age_s: u64) -> String {
    let secure = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    format!(
        "{name}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Lax{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Whether the `Authorization` header carries `secret` as a bearer token (`Bearer SECRET`,
/// white space around the token ignored), compared in time independent of where the first
/// difference is.
pub fn bearer_is(headers: &HeaderMap, secret: &str) -> bool {
    let Some(given) = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), secret.as_bytes())
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the request comes from a page of this site. Browsers send `Origin` with every POST
/// and WebSocket handshake; it must name the host the request was sent to. A request without
/// `Origin` is accepted only when `allow_missing` (GETs, including the WebSocket handshake of a
/// non-browser client such as a bot or a test).
pub fn origin_ok(headers: &HeaderMap, allow_missing: bool) -> bool {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return allow_missing;
    };
    let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .unwrap_or("");
    !origin_host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

/// A seat says which participant a participant URL means. A named seat lets one browser hold
/// several participants (the two frames of `/try`), each with its own cookie: 1–12 lowercase
/// letters or digits. A key seat (`k.` and the participant's token) names the participant by
/// its own token, for pages shown in another site's frame (MTurk's ExternalQuestion), where
/// browsers do not send this site's cookies: every link, form and socket of such a page carries
/// it on (see "Participants in a frame" in docs/platforms.md).
pub fn parse_seat(s: &str) -> Option<String> {
    if let Some(token) = s.strip_prefix(KEY_SEAT) {
        let ok = token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit());
        return ok.then(|| s.to_ascii_lowercase());
    }
    parse_named_seat(s)
}

/// A named seat only (1–12 lowercase letters or digits): what an entry link may ask for.
pub fn parse_named_seat(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= 12
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    ok.then(|| s.to_string())
}

/// The prefix of a key seat.
const KEY_SEAT: &str = "k.";

/// The key seat of a participant token.
pub fn key_seat(token: &str) -> String {
    format!("{KEY_SEAT}{token}")
}

/// The participant token a key seat carries.
pub fn seat_token(seat: Option<&str>) -> Option<&str> {
    seat.and_then(|s| s.strip_prefix(KEY_SEAT))
}

/// The participant cookie's name for a named seat (a key seat has no cookie of its own).
pub fn participant_cookie(seat: Option<&str>) -> String {
    match seat.filter(|s| !s.starts_with(KEY_SEAT)) {
        Some(s) => format!("{PARTICIPANT_COOKIE}_{s}"),
        None => PARTICIPANT_COOKIE.to_string(),
    }
}

/// `?seat=..` to append to a participant URL, or nothing.
pub fn seat_query(seat: Option<&str>) -> String {
    seat.map(|s| format!("?seat={s}")).unwrap_or_default()
}

/// A token bucket: `rate` frames per second on average, bursts of up to `burst`.
pub struct RateLimiter {
    tokens: f64,
    rate: f64,
    burst: f64,
    last: Instant,
}

impl RateLimiter {
    pub fn new(rate: f64, burst: f64) -> RateLimiter {
        RateLimiter {
            tokens: burst,
            rate,
            burst,
            last: Instant::now(),
        }
    }

    /// Adds the tokens earned since the last look.
    fn refill(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
    }

    /// Whether the bucket has refilled completely (it then says nothing a new one would not).
    fn is_full(&mut self) -> bool {
        self.refill();
        self.tokens >= self.burst
    }

    /// Whole seconds until the next token (at least 1), for `Retry-After`.
    fn seconds_to_next(&self) -> u64 {
        let missing = (1.0 - self.tokens).max(0.0);
        let secs = if self.rate > 0.0 {
            (missing / self.rate).ceil()
        } else {
            60.0
        };
        // Bounded: a rate is at least one per minute in practice, so this fits easily.
        (secs as u64).max(1)
    }

    /// Takes one token; false when the bucket is empty.
    pub fn allow(&mut self) -> bool {
        self.refill();
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One token bucket per client address: how often an address may open entry links (each can
/// create a participant). The map is bounded: a full bucket carries no information, so buckets
/// that have refilled are dropped whenever the map grows past [`KeyedLimiter::PRUNE_AT`].
pub struct KeyedLimiter {
    /// Tokens per second and the burst; `None` means no limit.
    rate: Option<(f64, f64)>,
    /// A std mutex: held for one map operation, never across an await.
    buckets: Mutex<HashMap<IpAddr, RateLimiter>>,
}

impl KeyedLimiter {
    /// Buckets kept before refilled ones are dropped.
    const PRUNE_AT: usize = 4096;

    /// `per_minute` requests per address on average, in bursts of as many; 0 for no limit.
    pub fn per_minute(per_minute: u32) -> KeyedLimiter {
        let burst = f64::from(per_minute);
        KeyedLimiter {
            rate: (per_minute > 0).then(|| (burst / 60.0, burst)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `addr`; when its bucket is empty, the seconds until one is back.
    pub fn check(&self, addr: IpAddr) -> Result<(), u64> {
        let Some((rate, burst)) = self.rate else {
            return Ok(());
        };
        // A poisoned lock only means a panic elsewhere; the map is still consistent.
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= Self::PRUNE_AT {
            buckets.retain(|_, b| !b.is_full());
        }
        let bucket = buckets
            .entry(addr)
            .or_insert_with(|| RateLimiter::new(rate, burst));
        if bucket.allow() {
            Ok(())
        } else {
            Err(bucket.seconds_to_next())
        }
    }

    /// Addresses with a bucket (for tests of the bound).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origin_must_match_host() {
        let same = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert!(origin_ok(&same, false));
        let other = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ]);
        assert!(!origin_ok(&other, true));
        let none = headers(&[("host", "127.0.0.1:8080")]);
        assert!(origin_ok(&none, true));
        assert!(!origin_ok(&none, false));
        let null = headers(&[("host", "a"), ("origin", "null")]);
        assert!(!origin_ok(&null, true));
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = headers(&[("cookie", "a=1; wozkit_token=abc; wozkit_token_u=def")]);
        assert_eq!(cookie(&h, "wozkit_token").as_deref(), Some("abc"));
        assert_eq!(
            cookie(&h, &participant_cookie(Some("u"))).as_deref(),
            Some("def")
        );
        assert_eq!(cookie(&h, "missing"), None);
    }

    #[test]
    fn seats_are_short_and_plain() {
        assert_eq!(parse_seat("u1").as_deref(), Some("u1"));
        assert_eq!(parse_seat("U1"), None);
        assert_eq!(parse_seat("a;b"), None);
        assert_eq!(parse_seat(""), None);
    }

    #[test]
    fn key_seats_carry_a_whole_token_and_no_cookie() {
        let token = "ab".repeat(32);
        let seat = parse_seat(&key_seat(&token)).expect("a key seat");
        assert_eq!(seat_token(Some(&seat)), Some(token.as_str()));
        assert_eq!(participant_cookie(Some(&seat)), PARTICIPANT_COOKIE);
        assert_eq!(seat_query(Some(&seat)), format!("?seat=k.{token}"));
        // Short, long or not hex: not a key; and never a named seat at the entry link.
        assert_eq!(parse_seat("k.abc"), None);
        assert_eq!(parse_seat(&format!("k.{}", "zz".repeat(32))), None);
        assert_eq!(parse_named_seat(&key_seat(&token)), None);
        assert_eq!(seat_token(Some("u")), None);
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().expect("a CIDR")).collect()
    }

    #[test]
    fn forwarded_headers_count_only_from_trusted_proxies() {
        let h = headers(&[
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-proto", "https"),
        ]);
        let proxy: IpAddr = [10, 0, 0, 2].into();
        // Not trusted: the socket's peer, plain HTTP, whatever the headers say.
        assert_eq!(
            resolve_client(proxy, &h, &[]),
            Client {
                addr: proxy,
                https: false
            }
        );
        let trusted = nets(&["10.0.0.0/8", "127.0.0.1/32"]);
        assert_eq!(
            resolve_client(proxy, &h, &trusted),
            Client {
                addr: [203, 0, 113, 9].into(),
                https: true
            }
        );
        // A client that sends its own X-Forwarded-For: the proxy appends the address it saw,
        // which is the one taken.
        let spoofed = headers(&[("x-forwarded-for", "198.51.100.1, 203.0.113.9")]);
        assert_eq!(
            resolve_client(proxy, &spoofed, &trusted).addr,
            IpAddr::from([203, 0, 113, 9])
        );
        // Two proxies: the nearest untrusted hop.
        let chain = headers(&[("x-forwarded-for", "203.0.113.9, 10.1.2.3")]);
        assert_eq!(
            resolve_client(proxy, &chain, &trusted).addr,
            IpAddr::from([203, 0, 113, 9])
        );
    }

    #[test]
    fn the_forwarded_header_is_read_as_rfc_7239_writes_it() {
        let trusted = nets(&["127.0.0.1/32"]);
        let h = headers(&[(
            "forwarded",
            "for=\"[2001:db8:cafe::17]:4711\";proto=https, for=192.0.2.60;proto=https",
        )]);
        let c = resolve_client([127, 0, 0, 1].into(), &h, &trusted);
        assert_eq!(c.addr, IpAddr::from([192, 0, 2, 60]));
        assert!(c.https);
        let v6 = headers(&[("forwarded", "for=\"[2001:db8:cafe::17]:4711\"")]);
        assert_eq!(
            resolve_client([127, 0, 0, 1].into(), &v6, &trusted).addr,
            "2001:db8:cafe::17".parse::<IpAddr>().expect("v6")
        );
        // An obfuscated hop: the proxy itself is the client as far as anyone knows.
        let hidden = headers(&[("forwarded", "for=_hidden")]);
        assert_eq!(
            resolve_client([127, 0, 0, 1].into(), &hidden, &trusted).addr,
            IpAddr::from([127, 0, 0, 1])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn each_address_has_its_own_bucket_that_refills() {
        let limiter = KeyedLimiter::per_minute(3);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        for _ in 0..3 {
            assert_eq!(limiter.check(a), Ok(()));
        }
        // One token comes back every 20 seconds.
        assert_eq!(limiter.check(a), Err(20));
        assert_eq!(limiter.check(b), Ok(()));
        tokio::time::advance(std::time::Duration::from_secs(15)).await;
        assert_eq!(limiter.check(a), Err(5));
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert_eq!(limiter.check(a), Ok(()));
        assert_eq!(limiter.tracked(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn refilled_buckets_are_dropped_when_many_addresses_came() {
        let limiter = KeyedLimiter::per_minute(60);
        for i in 0..KeyedLimiter::PRUNE_AT as u32 {
            assert_eq!(limiter.check(IpAddr::from(i.to_be_bytes())), Ok(()));
        }
        assert_eq!(limiter.tracked(), KeyedLimiter::PRUNE_AT);
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        assert_eq!(limiter.check([192, 0, 2, 1].into()), Ok(()));
        assert_eq!(limiter.tracked(), 1);
    }

    #[test]
    fn no_limit_when_zero() {
        let limiter = KeyedLimiter::per_minute(0);
        let a: IpAddr = [10, 0, 0, 1].into();
        assert!((0..1000).all(|_| limiter.check(a).is_ok()));
        assert_eq!(limiter.tracked(), 0);
    }

    #[test]
    fn bucket_limits_bursts() {
        let mut r = RateLimiter::new(10.0, 20.0);
        let allowed = (0..30).filter(|_| r.allow()).count();
        assert!((20..=21).contains(&allowed));
    }
}
