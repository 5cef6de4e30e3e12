//! The console overview: each study's figures match a known set of sessions (dialogues ended in
//! different ways, a live one, a test one left out; an evaluation worker screened out and one
//! who finished), the spend against the budget; the live stream sends the figures again after a
//! change; every download parses; anonymous visitors and participants are refused, and an
//! observer may read.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use wozkit_core::event::{Actor, EndReason, EventKind, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_data::records::payments::payments;
use wozkit_server::auth::Access;
use wozkit_store::{NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform, Store};

use crate::helpers::{
    Client, TestApp, Tiny, attr_after, get_raw, hidden, login, login_as, next_figures, open_live,
    page_kind, paired_as, spawn_app_in, urlencoding,
};

/// What a study's download menu offers: every `wozkit export` format, the payment table and
/// the report.
fn downloads() -> Vec<&'static str> {
    let mut all = vec!["log", "payments", "report", "report-json"];
    all.extend(wozkit_data::stored::ExportFormat::NAMES);
    all
}

const T0: u64 = 1_700_000_000_000;
const MINUTE: u64 = 60_000;

const PAID: &str = r#"
id: paid
title: Paid study
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
session: {time_limit_s: 600, clock_starts: start}
world:
  variables: {fire_out: false}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
payment: {currency: EUR, base: 1.00, per_minute: 0.10, max_minutes: 5, no_partner: 0.50, budget: 6}
"#;

fn load(name: &str, yaml: &str) -> LoadedStudy {
    match load_text(name, yaml, StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("{name} does not load:\n{e}"),
    }
}

async fn app_with(study: LoadedStudy) -> (TestApp, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    // The sessions these tests write straight into the store are figures, not rooms: a live one
    // is leased to another (made-up) instance for the whole test, and this server respects
    // leases it does not hold (not the store's only instance), so its lease sweep never
    // rebuilds one as a room, whose clock, long past, would end it: how fast the machine is
    // cannot change the figures.
    let app = crate::helpers::spawn_app_in_tuned(
        tmp.path().to_path_buf(),
        study,
        wozkit_server::Tunables {
            sole_instance: false,
            ..crate::helpers::fast()
        },
    )
    .await;
    (app, tmp)
}

/// The made-up instance holding the leases of the live sessions the tests write.
const ELSEWHERE: &str = "an-instance-elsewhere";

/// Stores dialogue `id` of study `paid`, created 5 minutes before `T0`, started at `T0` (the
/// clock too), ended at `T0 + end.1` minutes for `end.0`, with one participant per (role,
/// completion code); `test` marks them as test participants.
async fn session(
    store: &dyn Store,
    id: &str,
    end: Option<(EndReason, u64)>,
    people: &[(Role, Option<&str>)],
    test: bool,
) {
    if end.is_none() {
        // Leased before it exists, so no sweep can find it without a lease.
        let now = wozkit_server::now_ms();
        let leased = store
            .acquire_room(id, ELSEWHERE, "http://192.0.2.1:9", now, now + 3_600_000)
            .await
            .expect("lease");
        assert!(leased, "the live session {id} is leased elsewhere");
    }
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: "paid".into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: T0 - 5 * MINUTE,
        })
        .await
        .expect("create session");
    let system = |at_ms, kind| NewEvent {
        actor: Actor::System,
        kind,
        at_ms,
    };
    let mut events = vec![
        system(
            T0,
            EventKind::SessionStarted {
                study: "paid".into(),
                study_version: "1".into(),
                seed: 0,
                initial_state: "start".into(),
            },
        ),
        system(
            T0,
            EventKind::ClockStarted {
                deadline_ms: T0 + 10 * MINUTE,
            },
        ),
    ];
    if let Some((reason, minutes)) = end {
        events.push(system(
            T0 + minutes * MINUTE,
            EventKind::SessionEnded {
                reason,
                goal_reached: false,
            },
        ));
    }
    store.append(id, events).await.expect("append");
    if let Some((reason, minutes)) = end {
        store
            .end_session(id, reason, T0 + minutes * MINUTE)
            .await
            .expect("end");
    }
    for (role, code) in people {
        let pid = format!("{id}-{}", role.as_str());
        let mut external_ids = std::collections::BTreeMap::new();
        if test {
            external_ids.insert(wozkit_store::TEST_KEY.to_string(), "1".to_string());
        }
        store
            .create_participant(NewParticipant {
                id: pid.clone(),
                token_hash: format!("hash-{pid}"),
                study_id: "paid".into(),
                platform: Platform::Lab,
                worker_id: None,
                external_ids: external_ids.into_iter().collect(),
                flow_step: "0".into(),
                created_at_ms: T0 - 5 * MINUTE,
            })
            .await
            .expect("participant");
        store
            .update_participant(
                &pid,
                ParticipantPatch {
                    role: Some(Some(*role)),
                    session_id: Some(Some(id.into())),
                    completion_code: Some(code.map(str::to_string)),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("place");
    }
}

fn study_figures<'a>(overview: &'a Value, study: &str) -> &'a Value {
    overview["studies"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["study"] == study))
        .unwrap_or_else(|| panic!("no figures for {study}: {overview}"))
}

/// A GET returning the raw body bytes (downloads are binary).
async fn get_bytes(addr: SocketAddr, path: &str, cookie: &str) -> (u16, String, Vec<u8>) {
    let (status, head, body) = get_raw(addr, path, cookie).await;
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "downloads carry a Content-Length: {head}"
    );
    (status, head, body)
}

#[tokio::test]
async fn the_figures_match_the_sessions_and_the_spend_the_payment_table() {
    let (mut app, _tmp) = app_with(load("paid.yaml", PAID)).await;
    let store = app.store.as_ref();
    use EndReason::*;
    let both =
        |u: Option<&'static str>, w: Option<&'static str>| vec![(Role::User, u), (Role::Wizard, w)];
    // Finished: 4 minutes (9 from creation) and 2 minutes (7 from creation), codes for all.
    session(
        store,
        "s-terminal",
        Some((Terminal, 4)),
        &both(Some("C1"), Some("C2")),
        false,
    )
    .await;
    session(
        store,
        "s-finished",
        Some((Finished, 2)),
        &both(Some("C3"), Some("C4")),
        false,
    )
    .await;
    // Abandoned: a disconnect and an aborted room, no codes.
    session(
        store,
        "s-left",
        Some((Disconnect, 1)),
        &both(None, None),
        false,
    )
    .await;
    session(
        store,
        "s-aborted",
        Some((Aborted, 1)),
        &both(None, None),
        false,
    )
    .await;
    // No partner came: the user got the no-partner code.
    session(
        store,
        "s-alone",
        Some((NoPartner, 0)),
        &[(Role::User, Some("C5"))],
        false,
    )
    .await;
    // Live.
    session(store, "s-live", None, &both(None, None), false).await;
    // A test session: left out of every figure.
    session(
        store,
        "s-test",
        Some((Terminal, 3)),
        &both(Some("T1"), Some("T2")),
        true,
    )
    .await;

    let cookie = login(&app).await;
    let (mut live, head) = open_live(app.addr, &cookie).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("text/event-stream"),
        "{head}"
    );
    let overview = next_figures(&mut live).await;
    let f = study_figures(&overview, "paid");
    assert_eq!(f["kind"], "dialogue");
    assert_eq!(f["live"], 1, "{f}");
    assert_eq!(f["finished"], 2, "{f}");
    assert_eq!(f["abandoned"], 2, "{f}");
    assert_eq!(f["no_partner"], 1, "{f}");
    assert_eq!(f["screened_out"], 0, "{f}");
    assert_eq!(f["codes"], 5, "{f}");
    assert_eq!(f["median_duration_s"], 8.0 * 60.0, "{f}");
    // Spend: the payment table's total without test participants. By the scheme: 1.00 + 0.10
    // a minute for each finished participant (4 and 2 minutes), 0.50 for the one alone.
    let rows = payments(
        store,
        Some("paid"),
        &|_| Some(std::sync::Arc::new(load("paid.yaml", PAID))),
        false,
    )
    .await
    .expect("payments");
    let table: f64 = rows.iter().map(|r| r.total).sum();
    let by_scheme = 2.0 * 1.40 + 2.0 * 1.20 + 0.50;
    assert!((table - by_scheme).abs() < 1e-9, "{table} vs {by_scheme}");
    assert!(
        (f["spent"].as_f64().unwrap_or(-1.0) - by_scheme).abs() < 1e-9,
        "{f}"
    );
    assert_eq!(f["currency"], "EUR");
    assert_eq!(f["budget"], 6.0);
    assert_eq!(f["budget_percent"], 95.0, "{f}");
    assert_eq!(f["budget_warning"], true, "5.70 of 6.00 is past 90 %");

    // The page shows the same, without JavaScript.
    let page = app
        .http("GET", "/researcher", &[("Cookie", cookie.as_str())], "")
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("spent 5.70 EUR of 6.00 EUR (95.0 %)"),
        "{}",
        page.body
    );
    assert!(page.body.contains("spend over-budget"), "{}", page.body);
    assert!(
        page.body.contains("data-figure=\"abandoned\">2<"),
        "{}",
        page.body
    );
    assert!(page.body.contains("/researcher/study/paid/review"));
    assert!(page.body.contains("/assets/console.js"));
    assert!(!page.body.contains("leaderboard/paid"), "not an arena");
    assert!(
        page.body.contains("/researcher/session/s-live"),
        "the sessions stay listed"
    );

    // A review bonus is spent too: 0.25 to a finished user brings it to 5.95, the payment
    // table's total_with_bonus.
    let review = app
        .http(
            "GET",
            "/researcher/study/paid/review",
            &[("Cookie", cookie.as_str())],
            "",
        )
        .await;
    assert_eq!(review.status, 200, "{}", review.body);
    let token = attr_after(&review.body, "data-csrf=\"");
    let origin = format!("http://{}", app.addr);
    let res = app
        .http(
            "POST",
            "/researcher/study/paid/review/decide",
            &[
                ("Cookie", cookie.as_str()),
                ("Origin", origin.as_str()),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &format!(
                "csrf={}&action=bonus&amount=0.25&reason=thorough&p=s-terminal-user",
                urlencoding(&token)
            ),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let rows = payments(
        store,
        Some("paid"),
        &|_| Some(std::sync::Arc::new(load("paid.yaml", PAID))),
        false,
    )
    .await
    .expect("payments");
    let with_bonus: f64 = rows.iter().map(|r| r.total_with_bonus).sum();
    assert!((with_bonus - 5.95).abs() < 1e-9, "{with_bonus}");
    let mut f = Value::Null;
    for _ in 0..50 {
        f = study_figures(&next_figures(&mut live).await, "paid").clone();
        if f["spent"] != 5.70 {
            break;
        }
    }
    assert!(
        (f["spent"].as_f64().unwrap_or(-1.0) - with_bonus).abs() < 1e-9,
        "{f}"
    );
    let page = app
        .http("GET", "/researcher", &[("Cookie", cookie.as_str())], "")
        .await;
    assert!(
        page.body.contains("spent 5.95 EUR of 6.00 EUR (99.2 %)"),
        "{}",
        page.body
    );
    drop(live);
    app.stop().await;
}

#[tokio::test]
async fn the_live_stream_sends_the_figures_again_after_a_change() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), Tiny::default().study()).await;
    let cookie = login(&app).await;
    let (mut live, _) = open_live(app.addr, &cookie).await;
    let before = next_figures(&mut live).await;
    let f = study_figures(&before, "tiny");
    assert_eq!(
        (f["live"].as_u64(), f["waiting_users"].as_u64()),
        (Some(0), Some(0))
    );

    // A user waits, then a pair is made: the stream tells each without being asked.
    let waiting = app.join("participant=lone&role=user&pair=nobody").await;
    waiting.accept_pages().await;
    let mut ws = waiting.ws().await;
    ws.hello(0).await;
    ws.until_type("waiting").await;
    let mut seen = next_figures(&mut live).await;
    while study_figures(&seen, "tiny")["waiting_users"] != 1 {
        seen = next_figures(&mut live).await;
    }
    let (_u, _w, _session) = paired_as(&app, "pair1").await;
    while study_figures(&seen, "tiny")["live"] != 1 {
        seen = next_figures(&mut live).await;
    }
    assert_eq!(study_figures(&seen, "tiny")["waiting_users"], 1);
    ws.close().await;
    // A console still listening does not hold the server up when it stops: its stream ends.
    app.stop().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        let mut line = String::new();
        while live.read_line(&mut line).await.is_ok_and(|n| n > 0) {
            line.clear();
        }
    })
    .await;
    assert!(ended.is_ok(), "the live stream ends when the server stops");
}

const EVAL: &str = r#"id: eval-mini
title: Compare
flow:
  user:
    - {kind: consent}
    - {kind: onboarding}
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  onboarding:
    items: [{a: g1, b: g2, better: g1}]
    fail: {text: "Sorry, the practice answer was not right."}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
    - {id: g1, system: A, turns: [{speaker: user, text: hi}, {speaker: bot, text: good day}]}
    - {id: g2, system: B, turns: [{speaker: user, text: hi}, {speaker: bot, text: asdf qwer}]}
"#;

async fn submit(c: &Client, path: &str, extra: &str) -> u16 {
    let step = c.step().await;
    c.post(path, &format!("step={step}{extra}")).await.status
}

/// The side (`left`/`right`) showing `text` on a two-dialogue page.
fn side_of(body: &str, text: &str) -> &'static str {
    let left = body
        .split("data-testid=\"dialogue-1\"")
        .next()
        .unwrap_or_default();
    if left.contains(text) { "left" } else { "right" }
}

#[tokio::test]
async fn an_evaluation_card_counts_screened_out_finished_codes_and_items() {
    let (mut app, _tmp) = app_with(load("eval.yaml", EVAL)).await;
    // One worker fails the practice item: screened out, no code.
    let fails = app
        .join("study=eval-mini&PROLIFIC_PID=w-fail&STUDY_ID=s&SESSION_ID=1")
        .await;
    assert_eq!(submit(&fails, "/p/next", "").await, 303);
    let body = fails.page().await.body;
    assert_eq!(page_kind(&body), "onboarding", "{body}");
    let wrong = side_of(&body, "asdf qwer");
    assert_eq!(
        submit(&fails, "/p/onboarding", &format!("&ob0={wrong}")).await,
        303
    );
    assert_eq!(page_kind(&fails.page().await.body), "screened");
    // Another passes, judges the one item and gets a code.
    let good = app
        .join("study=eval-mini&PROLIFIC_PID=w-good&STUDY_ID=s&SESSION_ID=2")
        .await;
    assert_eq!(submit(&good, "/p/next", "").await, 303);
    let body = good.page().await.body;
    let right = side_of(&body, "good day");
    assert_eq!(
        submit(&good, "/p/onboarding", &format!("&ob0={right}")).await,
        303
    );
    let body = good.page().await.body;
    assert_eq!(page_kind(&body), "compare", "{body}");
    let lease = hidden(&body, "lease");
    let choice = side_of(&body, "hello there");
    assert_eq!(
        submit(
            &good,
            "/p/judge",
            &format!("&lease={lease}&choice={choice}&justification=more+polite")
        )
        .await,
        303
    );
    let body = good.page().await.body;
    assert_eq!(page_kind(&body), "completion", "{body}");

    let cookie = login(&app).await;
    let (mut live, _) = open_live(app.addr, &cookie).await;
    let overview = next_figures(&mut live).await;
    let f = study_figures(&overview, "eval-mini");
    assert_eq!(f["kind"], "evaluation");
    assert_eq!(f["screened_out"], 1, "{f}");
    assert_eq!(f["finished"], 1, "{f}");
    assert_eq!(f["codes"], 1, "{f}");
    assert_eq!(f["unfinished"], 0, "{f}");
    assert_eq!(
        (f["items_done"].as_u64(), f["items_total"].as_u64()),
        (Some(1), Some(1)),
        "{f}"
    );
    assert_eq!(f["live"], 0);
    assert!(
        f["budget"].is_null() && f["budget_percent"].is_null(),
        "no budget: {f}"
    );
    let page = app
        .http("GET", "/researcher", &[("Cookie", cookie.as_str())], "")
        .await;
    assert!(
        page.body.contains("data-figure=\"items\">1 / 1<"),
        "{}",
        page.body
    );
    drop(live);
    app.stop().await;
}

#[tokio::test]
async fn every_download_parses_and_test_sessions_are_left_out_unless_asked() {
    let (mut app, _tmp) = app_with(load("paid.yaml", PAID)).await;
    let store = app.store.as_ref();
    session(
        store,
        "s-real",
        Some((EndReason::Terminal, 4)),
        &[(Role::User, Some("C1")), (Role::Wizard, Some("C2"))],
        false,
    )
    .await;
    session(
        store,
        "s-test",
        Some((EndReason::Terminal, 3)),
        &[(Role::User, Some("T1"))],
        true,
    )
    .await;
    let cookie = login(&app).await;
    for what in downloads() {
        let (status, head, body) = get_bytes(
            app.addr,
            &format!("/researcher/study/paid/download/{what}"),
            &cookie,
        )
        .await;
        assert_eq!(
            status,
            200,
            "{what}: {head}\n{}",
            String::from_utf8_lossy(&body)
        );
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("content-disposition: attachment; filename=\""),
            "{what}: {head}"
        );
        let name = lower
            .split("filename=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_default()
            .to_string();
        if name.ends_with(".zip") {
            let files = wozkit_data::download::unzip_files(&body)
                .unwrap_or_else(|e| panic!("{what}: the zip does not open: {e}"));
            assert!(!files.is_empty(), "{what}: an empty zip");
            for (file, bytes) in &files {
                if file.ends_with(".json") {
                    serde_json::from_slice::<Value>(bytes)
                        .unwrap_or_else(|e| panic!("{what}/{file}: {e}"));
                }
            }
            continue;
        }
        let text = String::from_utf8(body).unwrap_or_else(|e| panic!("{what}: not UTF-8: {e}"));
        if name.ends_with(".html") {
            assert!(
                text.starts_with("<!") || text.starts_with("<html"),
                "{what}: {text:.200}"
            );
            assert!(text.contains("paid"), "{what}: the report names the study");
        } else if name.ends_with(".jsonl") {
            for line in text.lines().filter(|l| !l.is_empty()) {
                serde_json::from_str::<Value>(line)
                    .unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
            }
            assert!(
                !text.contains("s-test"),
                "{what}: the test session is left out"
            );
        } else if name.ends_with(".json") {
            serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
        } else if name.ends_with(".csv") {
            assert!(
                text.lines().next().is_some_and(|h| h.contains(',')),
                "{what}: a CSV header: {text:.200}"
            );
            assert!(
                !text.contains("s-test"),
                "{what}: the test session is left out"
            );
        } else {
            panic!("{what}: unexpected file {name}");
        }
    }
    // The log and the payment table hold the real session, and the test one only when asked.
    let (_, _, log) = get_bytes(app.addr, "/researcher/study/paid/download/log", &cookie).await;
    let log = String::from_utf8_lossy(&log).to_string();
    assert!(
        log.contains("s-real") && !log.contains("s-test"),
        "{log:.300}"
    );
    let (_, _, log) = get_bytes(
        app.addr,
        "/researcher/study/paid/download/log?test=1",
        &cookie,
    )
    .await;
    assert!(String::from_utf8_lossy(&log).contains("s-test"));
    let (_, _, pay) = get_bytes(
        app.addr,
        "/researcher/study/paid/download/payments",
        &cookie,
    )
    .await;
    let pay = String::from_utf8_lossy(&pay).to_string();
    assert!(pay.contains("s-real") && !pay.contains("s-test"), "{pay}");
    // Unknown study or download: 404.
    for path in [
        "/researcher/study/nope/download/jsonl",
        "/researcher/study/paid/download/nope",
    ] {
        let (status, _, _) = get_bytes(app.addr, path, &cookie).await;
        assert_eq!(status, 404, "{path}");
    }
    app.stop().await;
}

#[tokio::test]
async fn anonymous_visitors_and_participants_are_refused_and_an_observer_may_read() {
    let (mut app, _tmp) = app_with(load("paid.yaml", PAID)).await;
    let participant = app.join("participant=p1&role=user").await;
    let routes = [
        "/researcher/live",
        "/researcher/study/paid/download/jsonl",
        "/researcher/study/paid/download/report",
    ];
    for path in routes {
        for cookie in ["", participant.cookie.as_str()] {
            let res = app.http("GET", path, &[("Cookie", cookie)], "").await;
            assert_eq!(res.status, 303, "{path} with {cookie:?}: {}", res.body);
            assert!(
                res.header("location")
                    .unwrap_or_default()
                    .starts_with("/researcher/login"),
                "{path}: to the login"
            );
        }
    }
    // An observer (read-only access) reads the stream and downloads.
    let cookie = login_as(&app, Access::Observer).await;
    let (mut live, head) = open_live(app.addr, &cookie).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    next_figures(&mut live).await;
    drop(live);
    let (status, _, _) =
        get_bytes(app.addr, "/researcher/study/paid/download/jsonl", &cookie).await;
    assert_eq!(status, 200);
    app.stop().await;
}

#[tokio::test]
async fn the_home_links_to_accounts_and_offers_the_wizard_seat_by_access() {
    let (mut app, _tmp) = app_with(load("paid.yaml", PAID)).await;
    for (access, accounts, join) in [
        (Access::Observer, false, false),
        (Access::Researcher, false, true),
        (Access::Owner, true, true),
    ] {
        let cookie = login_as(&app, access).await;
        let page = app
            .http("GET", "/researcher", &[("Cookie", cookie.as_str())], "")
            .await;
        assert_eq!(page.status, 200, "{access:?}");
        let body = &page.body;
        assert!(
            body.contains("href=\"/researcher/account\""),
            "{access:?}: own account"
        );
        assert_eq!(
            body.contains("href=\"/researcher/accounts\""),
            accounts,
            "{access:?}: every account"
        );
        assert_eq!(
            body.contains("action=\"/researcher/study/paid/join-as-wizard\""),
            join,
            "{access:?}: join as wizard"
        );
        if join {
            // The form carries the token the action checks, inside the study's card.
            let card = &body[body.find("data-study=\"paid\"").expect("card")..];
            let form = &card[card.find("join-as-wizard").expect("form in the card")..];
            assert!(form.contains("name=\"csrf\""), "{access:?}: {form}");
        }
    }
    app.stop().await;
}

/// What the figures cost with many sessions: prints the payment table's time (the bulk of the
/// work), the first overview page (figures computed) and a second one (from the cache). Run
/// with `cargo test -p wozkit-server --test api console::figures_cost -- --ignored --nocapture`;
/// `WOZKIT_CONSOLE_SESSIONS` sets the number of sessions (default 2000).
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn figures_cost_with_many_sessions() {
    let n: usize = std::env::var("WOZKIT_CONSOLE_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let (mut app, _tmp) = app_with(load("paid.yaml", PAID)).await;
    let store = app.store.as_ref();
    let started = std::time::Instant::now();
    for i in 0..n {
        let (end, codes) = match i % 4 {
            0 => (Some((EndReason::Disconnect, 1)), (None, None)),
            1 => (None, (None, None)),
            _ => (Some((EndReason::Terminal, 4)), (Some("C"), Some("D"))),
        };
        session(
            store,
            &format!("s{i:05}"),
            end,
            &[(Role::User, codes.0), (Role::Wizard, codes.1)],
            false,
        )
        .await;
    }
    println!(
        "seeded {n} sessions in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let study = std::sync::Arc::new(load("paid.yaml", PAID));
    let t = std::time::Instant::now();
    let rows = payments(store, None, &|_| Some(study.clone()), false)
        .await
        .expect("payments");
    println!(
        "payment table: {} rows in {} ms",
        rows.len(),
        t.elapsed().as_millis()
    );
    let cookie = login(&app).await;
    for label in [
        "first page (figures computed)",
        "second page (figures cached)",
    ] {
        let t = std::time::Instant::now();
        let page = app
            .http("GET", "/researcher", &[("Cookie", cookie.as_str())], "")
            .await;
        assert_eq!(page.status, 200);
        println!("{label}: {} ms", t.elapsed().as_millis());
    }
    // One live session ends and its people get their codes: the figures are computed again
    // once they are older than the console's two seconds.
    let live = format!("s{:05}", 1);
    store
        .append(
            &live,
            vec![NewEvent {
                actor: Actor::System,
                kind: EventKind::SessionEnded {
                    reason: EndReason::Terminal,
                    goal_reached: false,
                },
                at_ms: T0 + 4 * MINUTE,
            }],
        )
        .await
        .expect("end event");
    store
        .end_session(&live, EndReason::Terminal, T0 + 4 * MINUTE)
        .await
        .expect("end");
    for role in ["user", "wizard"] {
        store
            .update_participant(
                &format!("{live}-{role}"),
                ParticipantPatch {
                    completion_code: Some(Some(format!("CODE-{role}"))),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("code");
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let t = std::time::Instant::now();
    let page = app
        .http("GET", "/researcher", &[("Cookie", cookie.as_str())], "")
        .await;
    assert_eq!(page.status, 200);
    println!(
        "page after one session ended (figures computed again): {} ms",
        t.elapsed().as_millis()
    );
    app.stop().await;
}
