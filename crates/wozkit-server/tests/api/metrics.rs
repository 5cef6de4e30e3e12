//! `GET /metrics`: a short exchange, then a scrape that must parse as the Prometheus text
//! exposition (OpenMetrics text) and show what was done; the token on the main address, and the
//! separate metrics address.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use wozkit_server::{Config, MetricsToken, Tunables, launch_with_metrics_listener};
use wozkit_store::{EventCursor, Store};

use crate::client::http;
use crate::helpers::{
    TestApp, Tiny, enter, fast, login, paired, spawn_app, spawn_app_in_tuned, spawn_app_tuned,
};

const TOKEN: &str = "scrape-me-0123456789";

/// A series' labels other than `le`, as sorted pairs.
type LabelKey = Vec<(String, String)>;

/// One sample line: its name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: the families' types, and every sample.
#[derive(Debug)]
struct Exposition {
    types: HashMap<String, String>,
    samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the one sample named `name` whose labels include `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
            })
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?} matches {found:?}");
        found.first().map(|s| s.value)
    }

    fn must(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?} in {:#?}", self.samples))
    }
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `{k="v",…}` (escapes `\\`, `\"`, `\n`); returns the labels and the rest of the line.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("labels must start with {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let (key, r) = rest
            .split_once("=\"")
            .ok_or(format!("no `=\"` in {rest}"))?;
        if !valid_name(key) {
            return Err(format!("bad label name `{key}`"));
        }
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value".into()),
            }
        };
        if labels.insert(key.to_string(), value).is_some() {
            return Err(format!("label `{key}` twice"));
        }
        rest = &r[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse_value(v: &str) -> Result<f64, String> {
    match v {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => v.parse().map_err(|e| format!("bad value `{v}`: {e}")),
    }
}

/// Checks the text exposition format: `# HELP` and `# TYPE` (and `# UNIT`) before each
/// family's samples, every sample named after its family (with the suffixes its type allows),
/// well-formed labels and values, histograms cumulative up to `+Inf` = `_count`, `# EOF` last.
fn parse(text: &str) -> Result<Exposition, String> {
    let body = text
        .strip_suffix("# EOF\n")
        .ok_or("the exposition must end with `# EOF`")?;
    let mut types = HashMap::new();
    let mut helped = HashMap::new();
    let mut samples = vec![];
    let mut family: Option<(String, String)> = None;
    for line in body.lines() {
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (what, name, rest) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            if !valid_name(name) {
                return Err(format!("bad name in `{line}`"));
            }
            match what {
                "HELP" => {
                    if rest.trim().is_empty() {
                        return Err(format!("empty help for {name}"));
                    }
                    helped.insert(name.to_string(), rest.to_string());
                }
                "TYPE" => {
                    let known = [
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "unknown",
                        "info",
                        "stateset",
                        "gaugehistogram",
                    ];
                    if !known.contains(&rest) {
                        return Err(format!("unknown type in `{line}`"));
                    }
                    if types.insert(name.to_string(), rest.to_string()).is_some() {
                        return Err(format!("family {name} declared twice"));
                    }
                    family = Some((name.to_string(), rest.to_string()));
                }
                "UNIT" => {
                    if !name.ends_with(&format!("_{rest}")) {
                        return Err(format!("{name} does not end with its unit {rest}"));
                    }
                }
                _ => return Err(format!("unknown comment `{line}`")),
            }
            continue;
        }
        let split = line
            .find(['{', ' '])
            .ok_or(format!("no value in `{line}`"))?;
        let name = &line[..split];
        let (labels, rest) = if line[split..].starts_with('{') {
            parse_labels(&line[split..])?
        } else {
            (BTreeMap::new(), &line[split..])
        };
        let value = parse_value(
            rest.strip_prefix(' ')
                .ok_or(format!("no space before the value in `{line}`"))?
                .trim(),
        )?;
        let (fam, ty) = family
            .as_ref()
            .ok_or(format!("sample before any TYPE: `{line}`"))?;
        let suffixes: &[&str] = match ty.as_str() {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            _ => &[""],
        };
        if !suffixes.iter().any(|s| name == format!("{fam}{s}")) {
            return Err(format!("sample {name} is not of family {fam} ({ty})"));
        }
        if !helped.contains_key(fam) {
            return Err(format!("family {fam} has no HELP"));
        }
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    // Histograms: per label set, buckets ascending and cumulative, the last `+Inf` = `_count`.
    for (fam, ty) in &types {
        if ty != "histogram" {
            continue;
        }
        let mut series: BTreeMap<LabelKey, Vec<(f64, f64)>> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.name == format!("{fam}_bucket")) {
            let le = parse_value(s.labels.get("le").ok_or("a bucket without le")?)?;
            let key = s
                .labels
                .iter()
                .filter(|(k, _)| *k != "le")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            series.entry(key).or_default().push((le, s.value));
        }
        for (key, buckets) in series {
            let ordered = buckets
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1);
            if !ordered || buckets.last().map(|b| b.0) != Some(f64::INFINITY) {
                return Err(format!("{fam} {key:?}: buckets not cumulative to +Inf"));
            }
            let count = samples
                .iter()
                .find(|s| {
                    s.name == format!("{fam}_count")
                        && s.labels
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect::<Vec<_>>()
                            == key
                })
                .ok_or(format!("{fam} {key:?} has no _count"))?;
            if buckets.last().map(|b| b.1) != Some(count.value) {
                return Err(format!("{fam} {key:?}: +Inf bucket is not the count"));
            }
        }
    }
    Ok(Exposition { types, samples })
}

#[test]
fn the_parser_refuses_what_is_not_an_exposition() {
    let good = "# HELP a_total x\n# TYPE a_total counter\na_total_total 1\n# EOF\n";
    assert!(parse(good).is_ok(), "{:?}", parse(good));
    for bad in [
        "# HELP a x\n# TYPE a counter\na_total 1\n",
        "# HELP a x\n# TYPE a counter\nb_total 1\n# EOF\n",
        "# TYPE a gauge\na 1\n# EOF\n",
        "# HELP a x\n# TYPE a gauge\na{k=\"v} 1\n# EOF\n",
        "# HELP a x\n# TYPE a gauge\na one\n# EOF\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n# EOF\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 3\nh_sum 0\n# EOF\n",
    ] {
        assert!(parse(bad).is_err(), "accepted:\n{bad}");
    }
}

/// `GET /metrics` on `addr` with these headers.
async fn get_metrics(
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
) -> crate::client::Response {
    http(addr, "GET", "/metrics", headers, "").await
}

/// Scrapes (with the token) until `pred` holds of the parsed exposition (up to ten seconds).
async fn until_scrape(app: &TestApp, what: &str, pred: impl Fn(&Exposition) -> bool) -> Exposition {
    let auth = format!("Bearer {TOKEN}");
    let mut last = String::new();
    for _ in 0..200 {
        let res = get_metrics(app.addr, &[("Authorization", &auth)]).await;
        assert_eq!(res.status, 200, "{}", res.body);
        let parsed = parse(&res.body).unwrap_or_else(|e| panic!("{e}:\n{}", res.body));
        if pred(&parsed) {
            return parsed;
        }
        last = res.body;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the metrics never showed {what}:\n{last}");
}

/// Every event in the store.
async fn all_events(store: &dyn Store) -> usize {
    let mut n = 0;
    let mut after: Option<EventCursor> = None;
    loop {
        let page = store
            .events_page(None, after.as_ref(), 500)
            .await
            .expect("events page");
        let Some(last) = page.last() else {
            return n;
        };
        after = Some(EventCursor::after(last));
        n += page.len();
    }
}

/// "N user(s), M wizard(s) waiting" from the researcher page (which reads the lobby), as
/// (users, wizards); (0, 0) when it says nobody waits.
async fn lobby_says(app: &TestApp, researcher: &str) -> (f64, f64) {
    let page = app
        .http("GET", "/researcher", &[("Cookie", researcher)], "")
        .await
        .body;
    if page.contains("nobody is waiting") {
        return (0.0, 0.0);
    }
    let (before, _) = page
        .split_once(" wizard(s) waiting")
        .unwrap_or_else(|| panic!("the researcher page shows no waiting count: {page}"));
    let (users, wizards) = before
        .rsplit_once(" user(s), ")
        .unwrap_or_else(|| panic!("no user count before {before}"));
    let users = users
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no user count in {users}"));
    let wizards = wizards
        .parse()
        .unwrap_or_else(|_| panic!("no wizard count in {wizards}"));
    (users, wizards)
}

#[tokio::test]
async fn a_scrape_shows_what_a_short_exchange_did() {
    let mut app = spawn_app_tuned(
        Tiny::default(),
        Tunables {
            metrics_token: MetricsToken::new(TOKEN),
            ..fast()
        },
    )
    .await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.until(|v| {
        v["type"] == "view"
            && v["view"]["options"]
                .as_array()
                .is_some_and(|o| !o.is_empty())
    })
    .await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("c1").await["type"], "ack");
    wu.cmd("u1", json!({"cmd": "text", "text": "hello"})).await;
    assert_eq!(wu.answer("u1").await["type"], "ack");

    // A third participant waits for a partner.
    let carol = app.join("participant=carol&role=user").await;
    carol.accept_pages().await;
    let mut waiting = carol.ws().await;
    waiting.hello(0).await;
    waiting.until_type("waiting").await;

    assert_eq!(app.http("GET", "/healthz", &[], "").await.status, 200);
    assert_eq!(app.http("GET", "/no/such/page", &[], "").await.status, 404);

    // The token is required, and must be the right one.
    let res = get_metrics(app.addr, &[]).await;
    assert_eq!(res.status, 401, "{}", res.body);
    assert!(
        res.header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer"))
    );
    let res = get_metrics(app.addr, &[("Authorization", "Bearer not-the-token")]).await;
    assert_eq!(res.status, 401);
    let res = get_metrics(app.addr, &[("Authorization", &format!("Bearer {TOKEN}"))]).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(
        res.header("content-type")
            .is_some_and(|c| c.starts_with("application/openmetrics-text")),
        "{:?}",
        res.header("content-type")
    );

    let researcher = login(&app).await;
    let lobby = lobby_says(&app, &researcher).await;
    assert_eq!(lobby, (1.0, 0.0), "carol waits as the user");
    let m = until_scrape(&app, "two room and one waiting connection", |m| {
        m.value("wozkit_connections_open", &[("kind", "room")]) == Some(2.0)
            && m.value("wozkit_connections_open", &[("kind", "waiting")]) == Some(1.0)
    })
    .await;

    for name in m.types.keys() {
        assert!(name.starts_with("wozkit_"), "{name}");
    }
    let waiting_gauge = (
        m.must(
            "wozkit_waiting_participants",
            &[("study", "tiny"), ("role", "user")],
        ),
        m.must(
            "wozkit_waiting_participants",
            &[("study", "tiny"), ("role", "wizard")],
        ),
    );
    assert_eq!(
        waiting_gauge, lobby,
        "the waiting gauge is the lobby's count"
    );
    assert_eq!(m.must("wozkit_rooms_live", &[]), 1.0);
    assert_eq!(
        m.must("wozkit_connections_open", &[("kind", "observer")]),
        0.0
    );

    let stored = all_events(app.store.as_ref()).await;
    let in_session = app.events(&session).await.len();
    assert!(
        in_session >= 4,
        "joins, starts and two messages: {in_session}"
    );
    // Over SQLite the store keeps repeated log reads in memory and says what it did: the
    // room's first read of its log went to the store.
    match app.store.memory() {
        Some(now) => {
            let from_store = m.must("wozkit_store_log_reads_total", &[("from", "store")]);
            let from_memory = m.must("wozkit_store_log_reads_total", &[("from", "memory")]);
            assert!(from_store >= 1.0, "the room read its log: {from_store}");
            assert!(from_store <= now.misses as f64 && from_memory <= now.hits as f64);
            // The gauge of what is held is there (`must` fails without it).
            m.must("wozkit_store_memory_held", &[("what", "events")]);
        }
        None => assert!(
            m.value("wozkit_store_log_reads_total", &[("from", "store")])
                .is_none(),
            "a store without memory shows no reads from it"
        ),
    }
    let appended = m.must("wozkit_events_appended_total", &[]);
    assert!(
        appended >= stored as f64,
        "{appended} events counted, {stored} stored"
    );
    let appends = m.must(
        "wozkit_store_append_duration_seconds_count",
        &[("op", "append")],
    );
    assert!(
        appends >= 2.0,
        "at least the two messages' appends: {appends}"
    );
    assert!(
        m.must(
            "wozkit_store_append_duration_seconds_sum",
            &[("op", "append")]
        ) > 0.0
    );
    assert!(
        m.must("wozkit_view_build_duration_seconds_count", &[]) >= 4.0,
        "two views on entering, two per command at least"
    );
    assert!(
        m.must(
            "wozkit_http_responses_total",
            &[("group", "health"), ("class", "2xx")]
        ) >= 1.0
    );
    assert!(
        m.must(
            "wozkit_http_responses_total",
            &[("group", "unmatched"), ("class", "4xx")]
        ) >= 1.0,
        "the 404 of an unknown path"
    );
    assert!(
        m.must(
            "wozkit_http_responses_total",
            &[("group", "metrics"), ("class", "4xx")]
        ) >= 2.0,
        "the two refused scrapes"
    );
    assert!(
        m.must(
            "wozkit_http_responses_total",
            &[("group", "entry"), ("class", "3xx")]
        ) >= 3.0
    );
    assert!(
        m.must(
            "wozkit_http_responses_total",
            &[("group", "ws"), ("class", "1xx")]
        ) >= 5.0,
        "five WebSocket upgrades"
    );

    // Leaving the waiting room and the room shows at the next scrape.
    waiting.close().await;
    wu.close().await;
    until_scrape(&app, "the closed connections gone", |m| {
        m.value("wozkit_connections_open", &[("kind", "waiting")]) == Some(0.0)
            && m.value("wozkit_connections_open", &[("kind", "room")]) == Some(1.0)
            && m.value(
                "wozkit_waiting_participants",
                &[("study", "tiny"), ("role", "user")],
            ) == Some(0.0)
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn without_a_token_the_main_address_has_no_metrics() {
    let mut app = spawn_app(Tiny::default()).await;
    for headers in [vec![], vec![("Authorization", "Bearer ")]] {
        let res = get_metrics(app.addr, &headers).await;
        assert_eq!(res.status, 404, "{}", res.body);
    }
    app.stop().await;
}

#[tokio::test]
async fn the_separate_address_serves_metrics_without_a_token() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let metrics_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let metrics_addr = metrics_listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(launch_with_metrics_listener(
        Config {
            studies: vec![Tiny::default().study()],
            tunables: fast(),
        },
        store.clone(),
        listener,
        metrics_listener,
        async {
            let _ = stopped.await;
        },
    ));
    let res = http(addr, "GET", "/join?participant=dora&role=user", &[], "").await;
    assert_eq!(res.status, 303);

    let res = get_metrics(metrics_addr, &[]).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let m = parse(&res.body).unwrap_or_else(|e| panic!("{e}:\n{}", res.body));
    assert!(
        m.must(
            "wozkit_http_responses_total",
            &[("group", "entry"), ("class", "3xx")]
        ) >= 1.0,
        "the main address's entry link is counted"
    );
    assert!(m.must("wozkit_events_appended_total", &[]) >= 0.0);
    assert_eq!(
        http(metrics_addr, "GET", "/healthz", &[], "").await.status,
        404
    );
    assert_eq!(
        get_metrics(addr, &[]).await.status,
        404,
        "no token: nothing on the main address"
    );

    let _ = stop.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(15), server).await;
    assert!(
        matches!(stopped, Ok(Ok(Ok(())))),
        "the server (and its metrics address) stopped: {stopped:?}"
    );
    assert!(
        tokio::net::TcpStream::connect(metrics_addr).await.is_err(),
        "the metrics address is closed once the server stopped"
    );
}

#[tokio::test]
async fn the_dashboard_queries_only_series_the_server_declares() {
    // The arena demo declares dialogue systems, so their series are declared too.
    let tmp = tempfile::tempdir().expect("temp dir");
    let arena = wozkit_core::load::load_builtin("arena-demo").expect("arena-demo loads");
    let systems: Vec<String> = arena.study.systems.keys().cloned().collect();
    let mut app = spawn_app_in_tuned(
        tmp.path().to_path_buf(),
        arena,
        Tunables {
            metrics_token: MetricsToken::new(TOKEN),
            ..fast()
        },
    )
    .await;
    let m = until_scrape(&app, "a scrape", |_| true).await;
    assert!(!systems.is_empty());
    for system in &systems {
        assert_eq!(
            m.must(
                "wozkit_system_reply_duration_seconds_count",
                &[("system", system)]
            ),
            0.0
        );
        assert_eq!(
            m.must(
                "wozkit_system_errors_total",
                &[("system", system), ("kind", "timeout")]
            ),
            0.0
        );
    }
    let dashboard = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/grafana/wozkit-dashboard.json"),
    )
    .expect("docs/grafana/wozkit-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).expect("dashboard JSON");
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            for (i, _) in expr.match_indices("wozkit_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = ["_total", "_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                assert!(
                    m.types.contains_key(family),
                    "the dashboard queries {name}, which is not served: {expr}"
                );
                queried += 1;
            }
        }
    }
    assert!(
        queried >= 9,
        "the dashboard queries every series ({queried} queries)"
    );

    app.stop().await;
}
