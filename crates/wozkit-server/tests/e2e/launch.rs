//! Launch rehearsals with the real things around the server: nginx with TLS in front of it,
//! configured as docs/operations.md says, and MTurk's frame on another site in Chromium and in
//! Firefox with third-party cookies blocked.
//!
//! 1. Behind nginx with TLS (the server trusts it with `--trusted-proxy 127.0.0.1`): the cookies
//!    set through the proxy are `Secure`; the forms and the waiting room's WebSocket (`wss://`)
//!    pass the proxy and the Origin check, and two MTurk workers are paired over it; two clients
//!    behind the proxy (the test's sockets bound to 127.0.0.2 and 127.0.0.3, so nginx forwards
//!    two real client addresses) meet the entry-link limit each on their own, and a client's own
//!    `X-Forwarded-For` changes nothing; the access log holds paths only, never a `seat=k.` key.
//! 2. The MTurk dress rehearsal: a stand-in for MTurk's worker site (`http://127.0.0.1:PORT`,
//!    see `e2e/worker_site.rs`) frames the entry link with MTurk's iframe attributes, the server
//!    being reached at `https://localhost:PORT` through the nginx of part 1 (the browser accepts
//!    the test's self-signed certificate). Two workers in two browsers (Chromium, then
//!    Firefox) that block third-party cookies are paired, chat to the goal, answer the
//!    questionnaire and press the completion page's submit button; the stand-in's
//!    `externalSubmit` receives both assignment ids with the codes the server recorded, and no
//!    request told it a participant's key. The frames never had a cookie: their URLs carry the
//!    key seat.
//!
//! Needs nginx and openssl (part 1), and both browsers and their drivers too (part 2): Debian's
//! `nginx-light`, `openssl`, `chromium`, `chromium-driver` and `firefox-esr`, and geckodriver,
//! which scripts/test-all.sh installs. Fails when one is missing unless `WOZKIT_SKIP_E2E=1`, as
//! the browser tests do.

use crate::browser;
use crate::proxy;
use crate::server;
use crate::worker_site;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use wozkit_core::event::{EventKind, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_server::Tunables;
use wozkit_store::Platform;

use browser::{Browser, Driver, Options, close_all};
use proxy::{Proxy, Tools};
use server::TestServer;
use worker_site::WorkerSite;

/// Each test must end within this time, whatever happens (a busy two-core machine included).
const LIMIT: Duration = Duration::from_secs(240);
/// How long a WebSocket frame may take to come.
const FRAME_WAIT: Duration = Duration::from_secs(30);

/// The quickest study with a goal: the wizard greets and asks, the user approves (the goal is
/// reached), the wizard says goodbye; one questionnaire item.
const TINY: &str = r#"
id: tiny
title: Tiny study
roles:
  user: {label: Operator}
  wizard: {label: Assistant, name: Fred}
session: {time_limit_s: 600, clock_starts: start, finish: {min_messages: 2}}
pairing: {wait_limit_s: 180, on_timeout: complete}
world:
  variables: {fire_out: false}
  locations: [{id: base, name: Base}]
  robot_kinds: {ground: {label: Ground robot}}
  robots: [{id: r1, name: Robot 1, kind: ground, start: base, capabilities: []}]
states:
  - {id: start, type: interaction, initial: true, transitions: [greet]}
  - id: greet
    type: interaction
    templates: ["Hello, I am {wizard.name}."]
    transitions: [ask, bye]
  - id: ask
    type: request
    templates: ["May I send the robot?"]
    lock: {kind: approval, prompt: "Send the robot?", on_approve: {set: {fire_out: true}}}
    transitions: [bye]
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
goal: "fire_out"
survey:
  questions:
    - {id: q1, text: How was it?, kind: likert, points: 5}
"#;

fn tiny() -> Result<LoadedStudy> {
    load_text("tiny.yaml", TINY, StudySource::Dir(".".into()))
        .map_err(|e| anyhow!("the tiny study does not load:\n{e}"))
}

/// The server behind nginx on this machine: only 127.0.0.1 (nginx) is believed.
fn behind_nginx(tunables: Tunables) -> Result<Tunables> {
    Ok(Tunables {
        trusted_proxies: vec!["127.0.0.1/32".parse().context("a CIDR")?],
        ..tunables
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_reach_the_server_through_nginx_with_tls() {
    proxy::run_proxy_test("test behind nginx with TLS", LIMIT, |tools| async move {
        behind_tls(&tools).await
    })
    .await;
}

async fn behind_tls(tools: &Tools) -> Result<()> {
    // One entry link a minute per client: a second within the minute is refused, however
    // slow the machine (the next one is allowed only 60 s later).
    let tunables = behind_nginx(Tunables {
        join_per_minute: 1,
        ..TestServer::tunables()
    })?;
    let mut server = TestServer::start_tuned(vec![tiny()?], tunables).await?;
    let checked = match Proxy::start(tools, server.addr).await {
        Ok(proxy) => check_behind_tls(&proxy)
            .await
            .map_err(|e| anyhow!("{e:#}\nnginx wrote:\n{}", proxy.log_text())),
        Err(e) => Err(e),
    };
    let stopped = server.stop().await;
    checked?;
    stopped
}

/// Every cookie of `reply` is `Secure` (and there is one).
fn all_secure(what: &str, reply: &proxy::Reply) -> Result<()> {
    let cookies = reply.all("set-cookie");
    ensure!(!cookies.is_empty(), "{what}: no cookie set");
    for c in &cookies {
        ensure!(
            c.split(';')
                .any(|a| a.trim().eq_ignore_ascii_case("secure")),
            "{what}: a cookie set over HTTPS through the proxy is not Secure: {c}"
        );
    }
    Ok(())
}

async fn check_behind_tls(proxy: &Proxy) -> Result<()> {
    let join =
        |from: &'static str, link: &str, headers: &'static [(&'static str, &'static str)]| {
            let path = format!("/join?{link}");
            async move { proxy.request(from, "GET", &path, headers, "").await }
        };
    // Two clients behind the proxy, each with its own limit.
    let first = join("127.0.0.2", "participant=c1", &[]).await?;
    ensure!(first.status == 303, "first entry: {}", first.status);
    all_secure("a lab entry link", &first)?;
    let again = join("127.0.0.2", "participant=c2", &[]).await?;
    ensure!(
        again.status == 429,
        "the client's second link: {}",
        again.status
    );
    let other = join("127.0.0.3", "participant=c3", &[]).await?;
    ensure!(
        other.status == 303,
        "another client behind the same proxy was refused: {}",
        other.status
    );
    // A client cannot pick its address: nginx appends the one it saw, and that one counts.
    let spoofed = join(
        "127.0.0.2",
        "participant=c4",
        &[("X-Forwarded-For", "127.0.0.9")],
    )
    .await?;
    ensure!(
        spoofed.status == 429,
        "a client's own X-Forwarded-For escaped its limit: {}",
        spoofed.status
    );

    // Two MTurk workers, as their frames would enter: the key seat in every URL, no cookie.
    let mut seats = vec![];
    for (i, from) in ["127.0.0.4", "127.0.0.5"].into_iter().enumerate() {
        let link = format!("workerId=TLSW{i}&assignmentId=TLSA{i}&hitId=TLSH");
        let entry = join(from, &link, &[("Sec-Fetch-Dest", "iframe")]).await?;
        ensure!(entry.status == 303, "MTurk entry: {}", entry.status);
        all_secure("an MTurk entry link", &entry)?;
        let seat = entry
            .header("location")
            .and_then(|l| l.strip_prefix("/p?seat="))
            .with_context(|| format!("no key seat in {:?}", entry.header("location")))?
            .to_string();
        ensure!(seat.starts_with("k.") && seat.len() == 66, "seat {seat}");
        accept_pages(proxy, from, &seat).await?;
        seats.push((from, seat));
    }
    // The waiting room's socket over wss:// through nginx, then the pairing.
    let mut sockets = vec![];
    for (from, seat) in &seats {
        let mut ws = proxy.websocket(from, &format!("/ws?seat={seat}")).await?;
        ws.send(Message::text(
            json!({"type": "hello", "last_seq": 0}).to_string(),
        ))
        .await
        .context("hello")?;
        sockets.push(ws);
    }
    let mut paired = vec![];
    for ws in &mut sockets {
        paired.push(until_frame(ws, "paired").await?);
    }
    ensure!(
        paired[0]["session"] == paired[1]["session"] && paired[0]["role"] != paired[1]["role"],
        "the two workers were not paired with each other: {paired:?}"
    );
    for ws in &mut sockets {
        let _ = ws.close(None).await;
    }

    // The access log: every request of the two clients, paths without their query. nginx
    // writes a socket's line once it has closed both sides, a moment after the client did.
    let needles = [
        "127.0.0.2 - ",
        "127.0.0.3 - ",
        "\"GET /join\" 303",
        "\"GET /join\" 429",
        "\"GET /p\" 200",
        "\"POST /p/next\" 303",
        "\"GET /ws\" 101",
    ];
    let started = Instant::now();
    let log = loop {
        let log = proxy.access_log();
        match needles.iter().find(|n| !log.contains(*n)) {
            None => break log,
            Some(n) if started.elapsed() > FRAME_WAIT => {
                bail!("no `{n}` in the access log within {FRAME_WAIT:?}:\n{log}")
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    ensure!(
        !log.contains("seat=") && seats.iter().all(|(_, s)| !log.contains(&s[2..])),
        "the access log holds a participant's key:\n{log}"
    );
    Ok(())
}

/// Consent and instructions of the participant `seat`, posted through the proxy with the
/// site's `Origin`; the participant is then in the waiting room.
async fn accept_pages(proxy: &Proxy, from: &str, seat: &str) -> Result<()> {
    let page = format!("/p?seat={seat}");
    let origin = proxy.origin();
    for _ in 0..2 {
        let body = proxy.request(from, "GET", &page, &[], "").await?.body;
        let step = body
            .split("name=\"step\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .with_context(|| format!("no step on the page: {body}"))?;
        let next = proxy
            .request(
                from,
                "POST",
                &format!("/p/next?seat={seat}"),
                &[
                    ("Origin", origin.as_str()),
                    ("Content-Type", "application/x-www-form-urlencoded"),
                ],
                &format!("step={step}"),
            )
            .await?;
        ensure!(
            next.status == 303,
            "a form through the proxy was refused ({}): {}",
            next.status,
            next.body
        );
    }
    let body = proxy.request(from, "GET", &page, &[], "").await?.body;
    ensure!(
        body.contains("data-page=\"waiting\""),
        "not in the waiting room: {body}"
    );
    Ok(())
}

/// Reads frames until one of type `ty` comes; returns it.
async fn until_frame<S>(ws: &mut S, ty: &str) -> Result<Value>
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let started = Instant::now();
    let mut seen = vec![];
    loop {
        let left = FRAME_WAIT
            .checked_sub(started.elapsed())
            .with_context(|| format!("no `{ty}` frame within {FRAME_WAIT:?}; seen {seen:?}"))?;
        match tokio::time::timeout(left, ws.next()).await {
            Err(_) => bail!("no `{ty}` frame within {FRAME_WAIT:?}; seen {seen:?}"),
            Ok(None) | Ok(Some(Ok(Message::Close(_)))) => {
                bail!("the socket closed before `{ty}`; seen {seen:?}")
            }
            Ok(Some(Err(e))) => bail!("the socket failed before `{ty}`: {e}; seen {seen:?}"),
            Ok(Some(Ok(Message::Text(t)))) => {
                let v: Value = serde_json::from_str(&t).context("a JSON frame")?;
                if v["type"] == ty {
                    return Ok(v);
                }
                seen.push(v["type"].clone());
            }
            Ok(Some(Ok(_))) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mturk_workers_in_frames_submit_their_codes() {
    browser::run_in_both_browsers(
        "MTurk dress rehearsal",
        LIMIT,
        |chromium, chromedriver| async move { rehearsal(&chromium, &chromedriver).await },
    )
    .await;
}

async fn rehearsal(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let tools = proxy::find_tools().map_err(|why| anyhow!(why))?;
    let mut site = WorkerSite::bind().await?;
    let tunables = behind_nginx(Tunables {
        frame_ancestors: vec![site.origin()],
        ..TestServer::tunables()
    })?;
    let mut server = TestServer::start_tuned(vec![tiny()?], tunables).await?;
    let proxy = match Proxy::start(&tools, server.addr).await {
        Ok(p) => p,
        Err(e) => {
            let _ = server.stop().await;
            return Err(e);
        }
    };
    site.serve(&proxy.origin());
    let driver = Driver::start(chromium, chromedriver).await?;
    // Cookies of other sites than the page's are blocked, as Safari, Firefox and many Chrome
    // users have it: the frame must do without its cookie.
    let options = Options {
        size: (1366, 900),
        block_third_party_cookies: true,
        accept_insecure_certs: true,
    };
    let a = driver.browser_with("worker A", options.clone()).await?;
    let b = driver.browser_with("worker B", options).await?;
    let played = play(&server, &site, &a, &b)
        .await
        .map_err(|e| anyhow!("{e:#}\nnginx wrote:\n{}", proxy.log_text()));
    let closed = close_all([a, b]).await;
    drop(driver);
    drop(proxy);
    let stopped = server.stop().await;
    played?;
    closed?;
    stopped
}

const WORKERS: [(&str, &str); 2] = [("FRAMEW1", "FRAMEA1"), ("FRAMEW2", "FRAMEA2")];

/// The worker opens the HIT on the worker site and goes through consent and instructions in
/// the frame into the waiting room (or the room); returns the role shown.
async fn enter(br: &Browser, site: &WorkerSite, worker: (&str, &str)) -> Result<Role> {
    br.goto(&site.hit_url(worker.0, worker.1)).await?;
    br.enter_frame("iframe#task").await?;
    br.wait_page("consent").await?;
    no_cookie_but_the_key(br).await?;
    br.click("accept").await?;
    br.wait_page("instructions").await?;
    let role = br
        .wait_js(
            "the role badge",
            "const e = document.querySelector('[data-testid=role]'); return e && e.dataset.role",
            vec![],
        )
        .await?;
    let role = role
        .as_str()
        .and_then(Role::parse)
        .context("the role badge names no role")?;
    br.click("continue").await?;
    br.wait_js(
        "the waiting page (or the room)",
        "const m = document.querySelector('main[data-page]'); \
         return !!m && (m.dataset.page === 'waiting' || m.dataset.page === 'room')",
        vec![],
    )
    .await?;
    Ok(role)
}

/// The frame's page carries the participant's key seat, and the frame has no cookie: the
/// browser kept none of the server's (set in another site's frame), and the frame's script
/// cannot set one either, whatever its attributes.
async fn no_cookie_but_the_key(br: &Browser) -> Result<()> {
    let search = br.js("return location.search", vec![]).await?;
    ensure!(
        search.as_str().is_some_and(|s| s.starts_with("?seat=k.")),
        "{}: the frame's URL carries no key seat: {search}",
        br.name
    );
    let set = br
        .js(
            "document.cookie = 'probe=1; SameSite=None; Secure; Path=/'; return document.cookie",
            vec![],
        )
        .await?;
    ensure!(
        set == json!(""),
        "{}: the frame could set a cookie ({set}): third-party cookies are not blocked",
        br.name
    );
    // What the browser keeps for the server's site (WebDriver lists it whatever the frame may
    // read): nothing, so the server's cookie carried nobody.
    let cookies = br.cookie_names().await?;
    ensure!(
        cookies.is_empty(),
        "{}: the browser keeps cookies {cookies:?} for the framed site",
        br.name
    );
    Ok(())
}

async fn play(server: &TestServer, site: &WorkerSite, a: &Browser, b: &Browser) -> Result<()> {
    let role_a = enter(a, site, WORKERS[0]).await?;
    let role_b = enter(b, site, WORKERS[1]).await?;
    ensure!(role_a != role_b, "both workers were given {role_a:?}");
    let (w, u) = if role_a == Role::Wizard {
        (a, b)
    } else {
        (b, a)
    };
    for br in [w, u] {
        br.wait_page("room").await?;
        // The room's socket: wss:// through nginx, from a page in another site's frame.
        br.wait_js(
            "the room's WebSocket",
            "return document.getElementById('room').dataset.connected === 'true'",
            vec![],
        )
        .await?;
    }
    w.click("option-greet").await?;
    u.wait_chat("the greeting", |l| l.text == "Hello, I am Fred.")
        .await?;
    w.click("option-ask").await?;
    u.click("approve").await?;
    w.wait_chat("the approval", |l| {
        l.cls.contains("sys") && l.text == "Approved"
    })
    .await?;
    w.click("option-bye").await?;
    let mut codes = vec![];
    for br in [a, b] {
        br.click("continue-after-end").await?;
        br.wait_page("survey").await?;
        br.click("q1-4").await?;
        br.click("survey-submit").await?;
        br.wait_page("completion").await?;
        let code = br.text("completion-code").await?;
        no_cookie_but_the_key(br).await?;
        br.click_css("#mturk-submit button").await?;
        // The form's target is the frame: the worker site's answer shows in it.
        br.wait_js(
            "the worker site's answer in the frame",
            "return !!document.getElementById('submitted')",
            vec![],
        )
        .await?;
        codes.push(code);
    }

    let reached = server
        .session_events("tiny", Platform::Mturk, WORKERS[0].0)
        .await?
        .iter()
        .any(|e| {
            matches!(
                e.kind,
                EventKind::SessionEnded {
                    goal_reached: true,
                    ..
                }
            )
        });
    ensure!(reached, "the session did not end with its goal reached");
    let submitted = site.submitted();
    ensure!(
        submitted.len() == 2,
        "externalSubmit received {} forms: {submitted:?}",
        submitted.len()
    );
    for ((worker, assignment), shown) in WORKERS.iter().zip(&codes) {
        let recorded = server
            .store
            .participant_by_worker("tiny", Platform::Mturk, worker)
            .await
            .map_err(|e| anyhow!("store: {e}"))?
            .with_context(|| format!("no participant {worker}"))?
            .completion_code
            .with_context(|| format!("{worker} has no completion code"))?;
        ensure!(
            &recorded == shown,
            "{worker}: shown {shown}, recorded {recorded}"
        );
        let form = submitted
            .iter()
            .find(|s| s.form.get("assignmentId").map(String::as_str) == Some(assignment))
            .with_context(|| format!("no form for {assignment}: {submitted:?}"))?;
        ensure!(
            form.form.get("completionCode") == Some(&recorded),
            "{assignment}: submitted {:?}, recorded {recorded}",
            form.form
        );
        ensure!(
            !form.head.contains("seat="),
            "externalSubmit was told a participant's key:\n{}",
            form.head
        );
    }
    Ok(())
}
