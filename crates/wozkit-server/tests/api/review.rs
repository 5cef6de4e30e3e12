//! The review page (`/researcher/study/{study}/review`): flags of constructed sessions,
//! decisions as events of the study's review log (surviving a restart, later ones superseding
//! earlier ones), bulk actions on a filter, blocks refused at entry, access (observers read,
//! researchers act; Origin and CSRF token checked), the payment table's review columns, and
//! sending decisions through a platform's payer once each, failures logged and sent again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, ReviewAction, Role};
use wozkit_platforms::{Bonus, Payer, PlatformError, Submission};
use wozkit_server::auth::Access;
use wozkit_server::{Payers, now_ms};
use wozkit_store::{
    NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform, Store, TEST_KEY, hash_token,
};

use crate::helpers::{
    TestApp, Tiny, attr_after, fast, login, login_as, spawn_app_in, spawn_app_in_tuned, urlencoding,
};

const STUDY: &str = "tiny";

/// One constructed dialogue: its length, whether the wizard falls silent after the first
/// message, and whether the user disconnects once.
struct Shape {
    tag: &'static str,
    secs: u64,
    wizard_silent: bool,
    user_disconnects: bool,
    /// Test participants (a lab link with `test=1`).
    test: bool,
    /// Whether the entry link carried the submission id (`SESSION_ID`).
    submission_in_link: bool,
}

impl Shape {
    fn plain(tag: &'static str, secs: u64) -> Shape {
        Shape {
            tag,
            secs,
            wizard_silent: false,
            user_disconnects: false,
            test: false,
            submission_in_link: true,
        }
    }
}

/// The participant ids of a constructed session: `<tag>-u` and `<tag>-w`, workers `W-<tag>-u`
/// and `W-<tag>-w` on Prolific, submissions `SUB-<tag>-u` and `SUB-<tag>-w`.
async fn seed(store: &dyn Store, shape: &Shape) {
    let base = now_ms() - 3 * 3600 * 1000;
    let session = format!("s-{}", shape.tag);
    store
        .create_session(NewSession {
            id: session.clone(),
            study_id: STUDY.into(),
            study_version: "1".into(),
            seed: 1,
            created_at_ms: base,
        })
        .await
        .expect("session");
    let end = base + shape.secs * 1000;
    let mut events = vec![NewEvent {
        actor: Actor::System,
        kind: EventKind::SessionStarted {
            study: STUDY.into(),
            study_version: "1".into(),
            seed: 1,
            initial_state: "start".into(),
        },
        at_ms: base,
    }];
    let msg = |role: Role, at_ms: u64| NewEvent {
        actor: Actor::Participant {
            role,
            participant: None,
        },
        kind: EventKind::Message {
            role,
            text: "hello".into(),
            source: MessageSource::Free,
        },
        at_ms,
    };
    let mut t = base + 10_000;
    while t < end {
        events.push(msg(Role::User, t));
        let wizard_speaks = !shape.wizard_silent || t == base + 10_000 || t + 30_000 >= end;
        if wizard_speaks {
            events.push(msg(Role::Wizard, t + 5000));
        }
        t += 30_000;
    }
    if shape.user_disconnects {
        events.push(NewEvent {
            actor: Actor::System,
            kind: EventKind::Disconnected {
                role: Role::User,
                grace_until_ms: base + 40_000,
            },
            at_ms: base + 20_000,
        });
        events.sort_by_key(|e| e.at_ms);
    }
    events.push(NewEvent {
        actor: Actor::System,
        kind: EventKind::SurveyAnswered {
            role: Role::User,
            answers: [
                ("clarity".to_string(), serde_json::json!(4)),
                (
                    "comment".to_string(),
                    serde_json::json!("the wizard was <quick>"),
                ),
            ]
            .into_iter()
            .collect(),
        },
        at_ms: end - 1000,
    });
    events.push(NewEvent {
        actor: Actor::System,
        kind: EventKind::SessionEnded {
            reason: EndReason::Finished,
            goal_reached: true,
        },
        at_ms: end,
    });
    store.append(&session, events).await.expect("append");
    store
        .end_session(&session, EndReason::Finished, end)
        .await
        .expect("end");
    // The participants come last: a live session with participants would get a room.
    for role in [Role::User, Role::Wizard] {
        let id = format!("{}-{}", shape.tag, &role.as_str()[..1]);
        store
            .create_participant(NewParticipant {
                id: id.clone(),
                token_hash: hash_token(&id),
                study_id: STUDY.into(),
                platform: Platform::Prolific,
                worker_id: Some(format!("W-{id}")),
                external_ids: if shape.test {
                    BTreeMap::from([(TEST_KEY.to_string(), "1".to_string())])
                } else {
                    let mut ids = BTreeMap::from([("PROLIFIC_PID".to_string(), format!("W-{id}"))]);
                    if shape.submission_in_link {
                        ids.insert("SESSION_ID".to_string(), format!("SUB-{id}"));
                    }
                    ids
                },
                flow_step: "0:completion".into(),
                created_at_ms: base,
            })
            .await
            .expect("participant");
        store
            .update_participant(
                &id,
                ParticipantPatch {
                    role: Some(Some(role)),
                    session_id: Some(Some(session.clone())),
                    completion_code: Some(Some(format!("CODE-{id}"))),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("patch");
    }
}

/// Five dialogues of about five minutes (one with a silent wizard, one with a user's
/// disconnect) and one of thirty.
fn five_and_a_slow_one() -> Vec<Shape> {
    vec![
        Shape::plain("a", 300),
        Shape {
            wizard_silent: true,
            ..Shape::plain("b", 310)
        },
        Shape {
            user_disconnects: true,
            ..Shape::plain("c", 290)
        },
        Shape::plain("d", 305),
        Shape::plain("e", 295),
        Shape::plain("f", 1800),
    ]
}

async fn seeded(app: &TestApp, shapes: &[Shape]) {
    for s in shapes {
        seed(app.store.as_ref(), s).await;
    }
}

fn page_path(query: &str) -> String {
    if query.is_empty() {
        format!("/researcher/study/{STUDY}/review")
    } else {
        format!("/researcher/study/{STUDY}/review?{query}")
    }
}

async fn get_page(app: &TestApp, cookie: &str, query: &str) -> String {
    let res = app
        .http("GET", &page_path(query), &[("Cookie", cookie)], "")
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    res.body
}

/// The page's CSRF token for this login.
async fn csrf(app: &TestApp, cookie: &str) -> String {
    attr_after(&get_page(app, cookie, "").await, "data-csrf=\"")
}

/// Posts a form to the review's `decide` or `send` with this site's Origin.
async fn post(app: &TestApp, cookie: &str, what: &str, form: &str) -> crate::helpers::Response {
    let origin = format!("http://{}", app.addr);
    app.http(
        "POST",
        &format!("/researcher/study/{STUDY}/review/{what}"),
        &[
            ("Cookie", cookie),
            ("Origin", &origin),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        form,
    )
    .await
}

/// Records a decision; expects the redirect back to the page.
async fn decide(app: &TestApp, cookie: &str, form: &str) {
    let token = csrf(app, cookie).await;
    let res = post(
        app,
        cookie,
        "decide",
        &format!("csrf={}&{form}", urlencoding(&token)),
    )
    .await;
    assert_eq!(res.status, 303, "{}", res.body);
}

/// A row's attribute (`flags`, `decision`, `status`).
fn row_attr(body: &str, participant: &str, attr: &str) -> String {
    let start = body
        .find(&format!("data-participant=\"{participant}\""))
        .unwrap_or_else(|| panic!("no row for {participant}"));
    attr_after(&body[start..], &format!("data-{attr}=\""))
}

/// The row's HTML.
fn row(body: &str, participant: &str) -> String {
    let start = body
        .find(&format!("data-participant=\"{participant}\""))
        .unwrap_or_else(|| panic!("no row for {participant}"));
    let end = body[start..]
        .find("</tr>")
        .map_or(body.len(), |e| start + e);
    body[start..end].to_string()
}

async fn review_log(app: &TestApp) -> Vec<wozkit_core::event::ReviewDecision> {
    app.store
        .events(&format!("review-{STUDY}"), 0)
        .await
        .expect("events")
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Reviewed(d) => Some(*d),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn flags_of_constructed_sessions() {
    let tmp = tempfile::tempdir().expect("tmp");
    let app = spawn_app_in(tmp.path().to_path_buf(), Tiny::default().study()).await;
    seeded(&app, &five_and_a_slow_one()).await;
    let cookie = login(&app).await;
    let body = get_page(&app, &cookie, "").await;
    // The thirty-minute session is slow for both roles; the others are not.
    for p in ["f-u", "f-w"] {
        assert!(
            row_attr(&body, p, "flags").contains("time"),
            "{}",
            row(&body, p)
        );
        assert!(row(&body, p).contains("too slow"), "{}", row(&body, p));
        assert!(row(&body, p).contains("median"), "{}", row(&body, p));
    }
    for p in ["a-u", "d-w", "e-u"] {
        assert_eq!(row_attr(&body, p, "flags"), "", "{}", row(&body, p));
    }
    // The silent wizard: an idle partner for the user, an own silence for the wizard.
    assert!(
        row(&body, "b-u").contains("idle partner"),
        "{}",
        row(&body, "b-u")
    );
    assert!(
        row(&body, "b-w").contains("own silence"),
        "{}",
        row(&body, "b-w")
    );
    assert!(!row(&body, "b-u").contains("own silence"));
    // One disconnect of the user, none of the wizard.
    assert!(row(&body, "c-u").contains("1 disconnect(s)"));
    assert!(!row_attr(&body, "c-w", "flags").contains("disconnect"));
    // The user's answers, compact and in full (escaped); the wizard answered nothing.
    let answers = row(&body, "a-u");
    assert!(
        answers.contains("clarity=4; comment=the wizard was &lt;quick&gt;"),
        "{answers}"
    );
    assert!(answers.contains("<dt>survey / comment</dt>"), "{answers}");
    assert!(!row(&body, "a-w").contains("clarity"));
    // A test session is left out unless asked for.
    seed(
        app.store.as_ref(),
        &Shape {
            test: true,
            ..Shape::plain("t", 300)
        },
    )
    .await;
    let body = get_page(&app, &cookie, "").await;
    assert!(!body.contains("data-participant=\"t-u\""));
    let body = get_page(&app, &cookie, "test=1").await;
    assert!(body.contains("data-participant=\"t-u\""));
    // A longer idle limit clears the idle flags.
    let body = get_page(&app, &cookie, "idle_s=600").await;
    assert!(!row_attr(&body, "b-u", "flags").contains("idle"));
    // The filter shows only the flagged rows.
    let body = get_page(&app, &cookie, "flag=time").await;
    assert!(body.contains("data-participant=\"f-u\""));
    assert!(!body.contains("data-participant=\"a-u\""));
}

#[tokio::test]
async fn decisions_are_events_that_survive_a_restart() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tiny = Tiny::default();
    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    seeded(&app, &[Shape::plain("a", 300), Shape::plain("b", 300)]).await;
    let cookie = login(&app).await;
    decide(&app, &cookie, "action=approve&p=a-u").await;
    decide(&app, &cookie, "action=reject&reason=no%20answers&p=a-u").await;
    decide(
        &app,
        &cookie,
        "action=bonus&amount=1.25&reason=helpful&p=b-w",
    )
    .await;
    decide(&app, &cookie, "action=note&reason=check%20later&p=b-w").await;
    let log = review_log(&app).await;
    assert_eq!(log.len(), 4);
    assert_eq!(log[1].action, ReviewAction::Reject);
    assert_eq!(log[1].reason, "no answers");
    assert_eq!(log[1].worker.as_deref(), Some("W-a-u"));
    assert_eq!(log[1].researcher_name, "admin");
    assert_eq!(log[2].cents, Some(125));
    app.stop().await;

    let app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let cookie = login(&app).await;
    let body = get_page(&app, &cookie, "").await;
    assert_eq!(row_attr(&body, "a-u", "decision"), "reject");
    assert!(
        row(&body, "a-u").contains("history (2)"),
        "{}",
        row(&body, "a-u")
    );
    assert_eq!(row_attr(&body, "b-w", "decision"), "");
    assert!(row(&body, "b-w").contains("bonus 1.25"));
    assert!(row(&body, "b-w").contains("note: check later"));
    assert_eq!(row_attr(&body, "a-w", "decision"), "");
    let body = get_page(&app, &cookie, "decision=reject").await;
    assert!(body.contains("data-participant=\"a-u\""));
    assert!(!body.contains("data-participant=\"b-w\""));
}

#[tokio::test]
async fn bulk_actions_apply_to_the_selection_or_to_all_matching_the_filter() {
    let tmp = tempfile::tempdir().expect("tmp");
    let app = spawn_app_in(tmp.path().to_path_buf(), Tiny::default().study()).await;
    seeded(&app, &five_and_a_slow_one()).await;
    let cookie = login(&app).await;
    decide(
        &app,
        &cookie,
        "action=reject&reason=too%20slow&all_matching=1&flag=time",
    )
    .await;
    let body = get_page(&app, &cookie, "").await;
    for p in ["f-u", "f-w"] {
        assert_eq!(row_attr(&body, p, "decision"), "reject");
    }
    for p in ["a-u", "a-w", "b-u", "c-u", "d-w", "e-u"] {
        assert_eq!(row_attr(&body, p, "decision"), "", "{p}");
    }
    // A selection of two.
    decide(&app, &cookie, "action=approve&p=a-u&p=a-w").await;
    let body = get_page(&app, &cookie, "decision=approve").await;
    assert!(body.contains("data-participant=\"a-u\""));
    assert!(body.contains("data-participant=\"a-w\""));
    assert!(!body.contains("data-participant=\"b-u\""));
    // Undecided ones, in bulk: the rest are approved, the rejections stay.
    decide(&app, &cookie, "action=approve&all_matching=1&decision=none").await;
    let body = get_page(&app, &cookie, "").await;
    assert_eq!(row_attr(&body, "f-u", "decision"), "reject");
    assert_eq!(row_attr(&body, "c-u", "decision"), "approve");
    assert_eq!(review_log(&app).await.len(), 2 + 2 + 8);
    // Nothing selected, a rejection without a reason, a bonus without an amount, a stranger.
    let token = csrf(&app, &cookie).await;
    for form in [
        "action=approve",
        "action=reject&p=a-u",
        "action=bonus&reason=x&p=a-u",
        "action=bonus&reason=x&amount=1.234&p=a-u",
        "action=approve&p=nobody",
    ] {
        let res = post(&app, &cookie, "decide", &format!("csrf={token}&{form}")).await;
        assert_eq!(res.status, 400, "{form}: {}", res.body);
        assert!(
            res.body.contains("data-testid=\"review-problem\""),
            "{form}: the review page again, with the reason: {}",
            res.body
        );
    }
    // A negative bonus: the page says why, in words, and keeps its forms.
    let res = post(
        &app,
        &cookie,
        "decide",
        &format!("csrf={token}&action=bonus&reason=x&amount=-1&p=a-u"),
    )
    .await;
    assert_eq!(res.status, 400, "{}", res.body);
    assert!(
        res.body.contains(
            "Nothing was recorded: a bonus cannot be negative (“-1”): enter a sum such as 1.50"
        ),
        "{}",
        res.body
    );
    assert!(
        res.body.contains("id=\"bulk\""),
        "the forms are there: {}",
        res.body
    );
    assert!(!res.body.contains("<h1>Bad Request</h1>"), "{}", res.body);
    assert_eq!(review_log(&app).await.len(), 12);
}

#[tokio::test]
async fn a_blocked_worker_is_refused_at_entry_also_after_a_restart() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tiny = Tiny::default();
    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    seeded(&app, &[Shape::plain("a", 300)]).await;
    let cookie = login(&app).await;
    let join = "/join?PROLIFIC_PID=W-a-u&STUDY_ID=st&SESSION_ID=SUB-a-u";
    let before = app.http("GET", join, &[], "").await;
    assert_eq!(before.status, 303, "not blocked yet: {}", before.body);
    decide(&app, &cookie, "action=block&reason=copied%20answers&p=a-u").await;
    assert_eq!(app.http("GET", join, &[], "").await.status, 403);
    app.stop().await;

    let app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    assert_eq!(app.http("GET", join, &[], "").await.status, 403);
    let other = "/join?PROLIFIC_PID=W-new&STUDY_ID=st&SESSION_ID=SUB-new";
    assert_eq!(app.http("GET", other, &[], "").await.status, 303);
    let cookie = login(&app).await;
    let body = get_page(&app, &cookie, "decision=blocked").await;
    assert!(row(&body, "a-u").contains("blocked"));
    // A block needs a reason.
    let token = csrf(&app, &cookie).await;
    let res = post(
        &app,
        &cookie,
        "decide",
        &format!("csrf={token}&action=block&p=a-w"),
    )
    .await;
    assert_eq!(res.status, 400);
}

#[tokio::test]
async fn observers_read_but_cannot_act_and_forged_requests_are_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let app = spawn_app_in(tmp.path().to_path_buf(), Tiny::default().study()).await;
    seeded(&app, &[Shape::plain("a", 300)]).await;
    // Anonymous: the page sends to the login, an action is refused.
    let res = app.http("GET", &page_path(""), &[], "").await;
    assert_eq!(res.status, 303);
    assert!(
        res.header("location")
            .unwrap_or_default()
            .starts_with("/researcher/login")
    );
    let res = post(&app, "", "decide", "action=approve&p=a-u").await;
    assert_eq!(res.status, 403);
    // An observer sees the page without the action forms, and is refused with a valid token.
    let observer = login_as(&app, Access::Observer).await;
    let body = get_page(&app, &observer, "").await;
    assert!(body.contains("data-participant=\"a-u\""));
    assert!(!body.contains("id=\"bulk\""));
    let token = attr_after(&body, "data-csrf=\"");
    for what in ["decide", "send"] {
        let res = post(
            &app,
            &observer,
            what,
            &format!("csrf={}&action=approve&p=a-u", urlencoding(&token)),
        )
        .await;
        assert_eq!(res.status, 403, "{what}: {}", res.body);
    }
    // A researcher: no token, a forged token, another site's Origin.
    let cookie = login_as(&app, Access::Researcher).await;
    let token = csrf(&app, &cookie).await;
    for form in ["action=approve&p=a-u", "csrf=forged&action=approve&p=a-u"] {
        assert_eq!(
            post(&app, &cookie, "decide", form).await.status,
            403,
            "{form}"
        );
    }
    let res = app
        .http(
            "POST",
            &format!("/researcher/study/{STUDY}/review/decide"),
            &[
                ("Cookie", &cookie),
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &format!("csrf={}&action=approve&p=a-u", urlencoding(&token)),
        )
        .await;
    assert_eq!(res.status, 403);
    let log = app.store.session("review-tiny").await.expect("read");
    assert!(log.is_none(), "nothing was decided: {log:?}");
    // The researcher's own request goes through.
    decide(&app, &cookie, "action=approve&p=a-u").await;
    assert_eq!(review_log(&app).await.len(), 1);
    // An unknown study is not found.
    let res = app
        .http(
            "GET",
            "/researcher/study/nope/review",
            &[("Cookie", &cookie)],
            "",
        )
        .await;
    assert_eq!(res.status, 404);
}

/// Cents of a money column.
fn cents(s: &str) -> i64 {
    (s.parse::<f64>().expect("amount") * 100.0).round() as i64
}

#[tokio::test]
async fn the_payment_table_shows_the_decision_and_the_bonus_to_the_cent() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tiny = Tiny::default();
    let app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    seeded(&app, &[Shape::plain("a", 300)]).await;
    let cookie = login(&app).await;
    decide(&app, &cookie, "action=bonus&amount=0.07&reason=x&p=a-u").await;
    decide(&app, &cookie, "action=bonus&amount=2.5&reason=more&p=a-u").await;
    decide(&app, &cookie, "action=approve&p=a-u").await;
    decide(&app, &cookie, "action=reject&reason=empty&p=a-w").await;
    let study = Arc::new(tiny.study());
    let rows = wozkit_data::records::payments::payments(
        app.store.as_ref(),
        Some(STUDY),
        &|id| (id == STUDY).then(|| study.clone()),
        false,
    )
    .await
    .expect("payments");
    let mut csv = vec![];
    wozkit_data::records::payments::write_csv(&rows, &mut csv).expect("csv");
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    let header = reader.headers().expect("header").clone();
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let mut seen = 0;
    for rec in reader.records() {
        let rec = rec.expect("record");
        let (decision, bonus, total, with) = (
            &rec[col("decision")],
            &rec[col("review_bonus")],
            &rec[col("total")],
            &rec[col("total_with_bonus")],
        );
        match &rec[col("participant")] {
            "a-u" => {
                assert_eq!(decision, "approve");
                assert_eq!(cents(bonus), 250, "the later bonus replaces the earlier");
                assert!(cents(total) > 0);
                assert_eq!(cents(with), cents(total) + 250);
            }
            "a-w" => {
                assert_eq!(decision, "reject");
                assert_eq!(cents(bonus), 0);
                assert_eq!(cents(with), cents(total));
            }
            other => panic!("unexpected row {other}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 2);
}

/// A payer that records every request and fails the approvals of the submissions listed in
/// `fail_once`, once each.
#[derive(Default)]
struct Recording {
    calls: Mutex<Vec<String>>,
    fail_once: Mutex<Vec<String>>,
    /// What `submissions` answers.
    listed: Vec<Submission>,
    /// Answer blocks as Prolific does: its API has no block.
    block_unsupported: bool,
}

#[async_trait]
impl Payer for Recording {
    fn platform(&self) -> &'static str {
        "prolific"
    }
    async fn submissions(&self) -> Result<Vec<Submission>, PlatformError> {
        self.calls.lock().unwrap().push("submissions".into());
        Ok(self.listed.clone())
    }
    async fn approve(&self, submission_id: &str) -> Result<(), PlatformError> {
        let mut fail = self.fail_once.lock().unwrap();
        if let Some(i) = fail.iter().position(|s| s == submission_id) {
            fail.remove(i);
            return Err(PlatformError::Refused {
                platform: "prolific",
                what: format!("approve {submission_id}"),
                status: 503,
                message: "try again later".into(),
            });
        }
        self.calls
            .lock()
            .unwrap()
            .push(format!("approve {submission_id}"));
        Ok(())
    }
    async fn reject(&self, submission_id: &str, reason: &str) -> Result<(), PlatformError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("reject {submission_id} {reason}"));
        Ok(())
    }
    async fn bonus(&self, bonuses: &[Bonus]) -> Vec<Result<(), PlatformError>> {
        let mut all: Vec<String> = bonuses
            .iter()
            .map(|b| format!("{}/{}={}", b.worker_id, b.submission_id, b.cents))
            .collect();
        all.sort();
        self.calls
            .lock()
            .unwrap()
            .push(format!("bonus {}", all.join(",")));
        bonuses.iter().map(|_| Ok(())).collect()
    }
    async fn block(&self, worker_id: &str, reason: &str) -> Result<(), PlatformError> {
        if self.block_unsupported {
            return Err(PlatformError::Unsupported {
                platform: "Prolific",
                what: "block".into(),
                instead: format!("block participant {worker_id} in Prolific's web app"),
            });
        }
        self.calls
            .lock()
            .unwrap()
            .push(format!("block {worker_id} {reason}"));
        Ok(())
    }
}

impl Recording {
    fn take(&self) -> Vec<String> {
        let mut calls = std::mem::take(&mut *self.calls.lock().unwrap());
        calls.sort();
        calls
    }
}

async fn send(app: &TestApp, cookie: &str) -> String {
    let token = csrf(app, cookie).await;
    let res = post(
        app,
        cookie,
        "send",
        &format!("csrf={}", urlencoding(&token)),
    )
    .await;
    assert_eq!(res.status, 303, "{}", res.body);
    res.header("location").unwrap_or_default()
}

#[tokio::test]
async fn decisions_are_sent_to_the_platform_once_and_failures_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let payer = Arc::new(Recording::default());
    payer.fail_once.lock().unwrap().push("SUB-b-u".into());
    let mut payers = Payers::default();
    payers.insert(STUDY, payer.clone());
    let tunables = wozkit_server::Tunables { payers, ..fast() };
    let app = spawn_app_in_tuned(tmp.path().to_path_buf(), Tiny::default().study(), tunables).await;
    seeded(&app, &[Shape::plain("a", 300), Shape::plain("b", 300)]).await;
    let cookie = login(&app).await;
    let body = get_page(&app, &cookie, "").await;
    assert!(body.contains("Send decisions to Prolific"), "{body}");
    decide(&app, &cookie, "action=approve&p=a-u").await;
    decide(&app, &cookie, "action=reject&reason=empty%20chat&p=a-w").await;
    decide(&app, &cookie, "action=bonus&amount=1.25&reason=great&p=a-u").await;
    decide(&app, &cookie, "action=bonus&amount=0.5&reason=ok&p=b-w").await;
    decide(&app, &cookie, "action=approve&p=b-u").await;
    decide(&app, &cookie, "action=block&reason=bot&p=b-w").await;

    let location = send(&app, &cookie).await;
    assert!(location.contains("sent=5&failed=1"), "{location}");
    assert_eq!(
        payer.take(),
        vec![
            "approve SUB-a-u".to_string(),
            "block W-b-w bot".into(),
            // One payment per participant.
            "bonus W-a-u/SUB-a-u=125".into(),
            "bonus W-b-w/SUB-b-w=50".into(),
            "reject SUB-a-w empty chat".into(),
        ]
    );
    let log = review_log(&app).await;
    let failed: Vec<_> = log
        .iter()
        .filter(|d| d.action == ReviewAction::SendFailed)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].participant, "b-u");
    assert!(
        failed[0].reason.contains("try again later"),
        "{}",
        failed[0].reason
    );
    let body = get_page(&app, &cookie, "").await;
    assert!(row(&body, "b-u").contains("send failed"));

    // The second press asks the platform what became of the failed approval (a 503: it may
    // have been done), finds it undecided and sends it again; the third sends nothing.
    let location = send(&app, &cookie).await;
    assert!(location.contains("sent=1&failed=0"), "{location}");
    assert_eq!(
        payer.take(),
        vec!["approve SUB-b-u".to_string(), "submissions".into()]
    );
    let location = send(&app, &cookie).await;
    assert!(location.contains("sent=0&failed=0"), "{location}");
    assert!(payer.take().is_empty());

    // A decision changed after it was sent is not sent again, and the row says so.
    decide(&app, &cookie, "action=approve&p=a-w").await;
    let location = send(&app, &cookie).await;
    assert!(location.contains("sent=0&failed=0"), "{location}");
    assert!(payer.take().is_empty());
    let body = get_page(&app, &cookie, "").await;
    assert!(
        row(&body, "a-w").contains("changed after sending"),
        "{}",
        row(&body, "a-w")
    );
    // A raised bonus sends the difference, so the platform paid what the table says.
    decide(&app, &cookie, "action=bonus&amount=2&reason=great&p=a-u").await;
    send(&app, &cookie).await;
    assert_eq!(payer.take(), vec!["bonus W-a-u/SUB-a-u=75".to_string()]);
    let sent: u64 = review_log(&app)
        .await
        .iter()
        .filter(|d| d.action == ReviewAction::Sent && d.participant == "a-u")
        .filter_map(|d| d.cents)
        .sum();
    assert_eq!(sent, 200);
    let body = get_page(&app, &cookie, "").await;
    assert!(
        row(&body, "a-u").contains("bonus sent: 2.00"),
        "{}",
        row(&body, "a-u")
    );
}

#[tokio::test]
async fn a_submission_missing_from_the_entry_link_is_found_by_the_worker_id() {
    let tmp = tempfile::tempdir().expect("tmp");
    let payer = Arc::new(Recording {
        listed: vec![Submission {
            id: "LISTED-n-u".into(),
            worker_id: "W-n-u".into(),
            status: "AWAITING REVIEW".into(),
            completion_code: None,
        }],
        ..Recording::default()
    });
    let mut payers = Payers::default();
    payers.insert(STUDY, payer.clone());
    let tunables = wozkit_server::Tunables { payers, ..fast() };
    let app = spawn_app_in_tuned(tmp.path().to_path_buf(), Tiny::default().study(), tunables).await;
    seed(
        app.store.as_ref(),
        &Shape {
            submission_in_link: false,
            ..Shape::plain("n", 300)
        },
    )
    .await;
    let cookie = login(&app).await;
    decide(&app, &cookie, "action=approve&p=n-u&p=n-w").await;
    let location = send(&app, &cookie).await;
    assert!(location.contains("sent=1&failed=1"), "{location}");
    // The list is asked for once; the worker not in it is a failure naming the worker.
    assert_eq!(
        payer.take(),
        vec!["approve LISTED-n-u".to_string(), "submissions".into()]
    );
    let log = review_log(&app).await;
    let failed = log
        .iter()
        .find(|d| d.action == ReviewAction::SendFailed)
        .expect("a failure");
    assert_eq!(failed.participant, "n-w");
    assert!(failed.reason.contains("W-n-w"), "{}", failed.reason);
}

#[tokio::test]
async fn a_block_the_platform_cannot_take_is_shown_on_its_row_and_counted_after_send() {
    let tmp = tempfile::tempdir().expect("tmp");
    let payer = Arc::new(Recording {
        block_unsupported: true,
        ..Recording::default()
    });
    let mut payers = Payers::default();
    payers.insert(STUDY, payer.clone());
    let tunables = wozkit_server::Tunables { payers, ..fast() };
    let app = spawn_app_in_tuned(tmp.path().to_path_buf(), Tiny::default().study(), tunables).await;
    seeded(&app, &[Shape::plain("a", 300)]).await;
    let cookie = login(&app).await;
    decide(&app, &cookie, "action=approve&p=a-u&p=a-w").await;
    decide(&app, &cookie, "action=block&reason=bot&p=a-w").await;
    let location = send(&app, &cookie).await;
    assert!(
        location.contains("sent=2&failed=0&not_sendable=1"),
        "{location}"
    );
    assert_eq!(
        payer.take(),
        vec!["approve SUB-a-u".to_string(), "approve SUB-a-w".into()]
    );
    // The notice after Send counts it and says where to do it.
    let query = location.split_once('?').map_or("", |(_, q)| q);
    let body = get_page(&app, &cookie, query).await;
    let start = body.find("id=\"review-sent\"").expect("the send notice");
    let notice = &body[start..body[start..].find("</p>").map_or(body.len(), |e| start + e)];
    assert!(notice.contains("2 done, 0 failed"), "{notice}");
    assert!(notice.contains("1 not sendable"), "{notice}");
    // The row says the block is not sendable and what to do instead; the other row not.
    let blocked = row(&body, "a-w");
    assert!(
        blocked.contains("block: not sendable to Prolific — "),
        "{blocked}"
    );
    assert!(
        blocked.contains("block participant W-a-w in Prolific&#39;s web app"),
        "{blocked}"
    );
    assert!(!blocked.contains("send failed"), "{blocked}");
    assert!(!row(&body, "a-u").contains("not sendable"));
    // It is never sent again: the next press counts nothing.
    let location = send(&app, &cookie).await;
    assert!(
        location.contains("sent=0&failed=0&not_sendable=0"),
        "{location}"
    );
    assert!(payer.take().is_empty());
    let query = location.split_once('?').map_or("", |(_, q)| q);
    let body = get_page(&app, &cookie, query).await;
    assert!(!body.contains("not sendable:"), "no count when none");
    assert!(row(&body, "a-w").contains("block: not sendable to Prolific"));
}

/// A dialogue whose wizard (`k-w`) speaks twice, disconnects at 50 s and whose seat a
/// researcher's participant (`k-r`, platform `researcher`) takes over at 100 s; from then on
/// the wizard's seat speaks every 30 s, disconnects once more, and answers the survey. The user
/// (`k-u`) answers too. The session lasts 600 s.
async fn seed_taken_over(store: &dyn Store) {
    let base = now_ms() - 3 * 3600 * 1000;
    let session = "s-k".to_string();
    store
        .create_session(NewSession {
            id: session.clone(),
            study_id: STUDY.into(),
            study_version: "1".into(),
            seed: 1,
            created_at_ms: base,
        })
        .await
        .expect("session");
    let at = |s: u64| base + s * 1000;
    let msg = |role: Role, who: &str, s: u64| NewEvent {
        actor: Actor::Participant {
            role,
            participant: Some(who.to_string()),
        },
        kind: EventKind::Message {
            role,
            text: "hello".into(),
            source: MessageSource::Free,
        },
        at_ms: at(s),
    };
    let survey = |role: Role, key: &str, answer: &str, s: u64| NewEvent {
        actor: Actor::System,
        kind: EventKind::SurveyAnswered {
            role,
            answers: [(key.to_string(), serde_json::json!(answer))]
                .into_iter()
                .collect(),
        },
        at_ms: at(s),
    };
    let disconnect = |s: u64| NewEvent {
        actor: Actor::System,
        kind: EventKind::Disconnected {
            role: Role::Wizard,
            grace_until_ms: at(s + 20),
        },
        at_ms: at(s),
    };
    let mut events = vec![NewEvent {
        actor: Actor::System,
        kind: EventKind::SessionStarted {
            study: STUDY.into(),
            study_version: "1".into(),
            seed: 1,
            initial_state: "start".into(),
        },
        at_ms: at(0),
    }];
    events.push(msg(Role::User, "k-u", 10));
    events.push(msg(Role::Wizard, "k-w", 15));
    events.push(msg(Role::User, "k-u", 40));
    events.push(msg(Role::Wizard, "k-w", 45));
    events.push(disconnect(50));
    events.push(NewEvent {
        actor: Actor::Participant {
            role: Role::Wizard,
            participant: Some("k-r".into()),
        },
        kind: EventKind::TakenOver {
            role: Role::Wizard,
            researcher: "acc-1".into(),
            participant: "k-r".into(),
        },
        at_ms: at(100),
    });
    let mut t = 110;
    while t < 590 {
        events.push(msg(Role::User, "k-u", t));
        events.push(msg(Role::Wizard, "k-r", t + 5));
        t += 30;
    }
    events.push(disconnect(300));
    events.sort_by_key(|e| e.at_ms);
    events.push(survey(Role::User, "clarity", "user said clear", 592));
    events.push(survey(Role::Wizard, "effort", "researcher answered", 595));
    events.push(NewEvent {
        actor: Actor::System,
        kind: EventKind::SessionEnded {
            reason: EndReason::Finished,
            goal_reached: true,
        },
        at_ms: at(600),
    });
    store.append(&session, events).await.expect("append");
    store
        .end_session(&session, EndReason::Finished, at(600))
        .await
        .expect("end");
    for (id, role, platform, code) in [
        ("k-u", Role::User, Platform::Prolific, Some("CODE-k-u")),
        ("k-w", Role::Wizard, Platform::Prolific, None),
        ("k-r", Role::Wizard, Platform::Researcher, Some("CODE-k-r")),
    ] {
        store
            .create_participant(NewParticipant {
                id: id.to_string(),
                token_hash: hash_token(id),
                study_id: STUDY.into(),
                platform,
                worker_id: (platform == Platform::Prolific).then(|| format!("W-{id}")),
                external_ids: BTreeMap::new(),
                flow_step: "0:completion".into(),
                created_at_ms: base,
            })
            .await
            .expect("participant");
        store
            .update_participant(
                id,
                ParticipantPatch {
                    role: Some(Some(role)),
                    session_id: Some(Some(session.clone())),
                    completion_code: Some(code.map(str::to_string)),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("patch");
    }
}

#[tokio::test]
async fn after_a_takeover_the_seat_s_answers_and_messages_are_the_researcher_s() {
    let tmp = tempfile::tempdir().expect("tmp");
    let app = spawn_app_in(tmp.path().to_path_buf(), Tiny::default().study()).await;
    seed_taken_over(app.store.as_ref()).await;
    let cookie = login(&app).await;
    // An idle limit of 60 s: the wizard's stretch ends when they left (50 s, their disconnect
    // before the takeover); the gap from their last message (45 s) to the researcher's first
    // (115 s) would be longer.
    let body = get_page(&app, &cookie, "idle_s=60").await;
    let wizard = row(&body, "k-w");
    // The survey answered after the takeover is the researcher's, not the wizard's.
    assert!(!wizard.contains("researcher answered"), "{wizard}");
    assert!(!wizard.contains("effort"), "{wizard}");
    // The wizard is judged up to the takeover: one disconnect (the researcher's is not
    // theirs), no own silence, and the row says the seat was taken over.
    assert!(wizard.contains("1 disconnect(s)"), "{wizard}");
    assert!(!wizard.contains("own silence"), "{wizard}");
    assert!(
        wizard.contains(
            "left the seat 0:50 min into the session; a researcher took it over at 1:40 min"
        ),
        "{wizard}"
    );
    // Their partner is judged over the same stretch: the user's 30 s gaps are no idle partner.
    assert!(!wizard.contains("idle partner"), "{wizard}");
    // The user's row keeps the user's answer and sees the seat's silence before the
    // takeover as an idle partner (45 s to 115 s).
    let user = row(&body, "k-u");
    assert!(user.contains("user said clear"), "{user}");
    assert!(!user.contains("researcher answered"), "{user}");
    assert!(user.contains("idle partner"), "{user}");
    assert!(!user.contains("taken over"), "{user}");
    // The researcher's participant is staff: no row to approve or pay, and not selectable.
    assert!(!body.contains("data-participant=\"k-r\""), "{body}");
    assert!(body.contains("2 of 2 participant(s) match"), "{body}");
    let token = csrf(&app, &cookie).await;
    let res = post(
        &app,
        &cookie,
        "decide",
        &format!("csrf={}&action=approve&p=k-r", urlencoding(&token)),
    )
    .await;
    assert_eq!(res.status, 400, "{}", res.body);
    // A bulk approval of all matching leaves it out too.
    decide(&app, &cookie, "action=approve&all_matching=1").await;
    let mut approved: Vec<String> = review_log(&app)
        .await
        .into_iter()
        .filter(|d| d.action == ReviewAction::Approve)
        .map(|d| d.participant)
        .collect();
    approved.sort();
    assert_eq!(approved, vec!["k-u".to_string(), "k-w".into()]);
}
