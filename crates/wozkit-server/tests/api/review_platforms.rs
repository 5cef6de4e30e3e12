//! The review page sending decisions through the real platform clients to their local mocks:
//! the Prolific REST client against `MockProlific` and the MTurk SDK client against `MockMTurk`.
//! Participants finished sessions with completion codes (their entry links carried the
//! platform's ids); the researcher approves, rejects and bonuses through the page's forms and
//! presses Send. What the mock recorded (decided submissions, cents paid per worker) equals the
//! payment table's `decision` and `review_bonus` columns to the cent; the review log has the
//! `sent` events; another press writes nothing; a platform failure is shown on the page, logged
//! as `send_failed` and sent again on the next press.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, ReviewAction, Role};
use wozkit_data::records::payments::{PaymentRow, payments};
use wozkit_platforms::mturk::mock::{MockAssignment, MockMTurk};
use wozkit_platforms::mturk::{Endpoint, MTurk};
use wozkit_platforms::once::Policy;
use wozkit_platforms::prolific::mock::{MockProlific, ProlificSubmission};
use wozkit_platforms::prolific::{AWAITING_REVIEW, Prolific};
use wozkit_server::{Payers, now_ms};
use wozkit_store::{
    NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform, Store, hash_token,
};

use crate::helpers::{TestApp, Tiny, attr_after, fast, login, spawn_app_in_tuned, urlencoding};

const STUDY: &str = "tiny";
const PROLIFIC_STUDY: &str = "PST-review";
const TOKEN: &str = "prolific-token-review";
const MTURK_KEY: &str = "AKIDREVIEWTEST";
const HIT: &str = "3HITREVIEW";

/// A rejection message long enough for Prolific (at least 100 characters).
const LONG_REASON: &str = "The chat shows no attempt at the task: the participant answered every \
                           message of the assistant with the same single word.";

/// How a participant's entry link looked: which platform and its ids.
#[derive(Clone, Copy)]
enum Crowd {
    Prolific,
    MTurk,
}

/// The worker id of participant `p` (`W-<p>`).
fn worker(p: &str) -> String {
    format!("W-{p}")
}

/// The submission (Prolific `SESSION_ID`, MTurk `assignmentId`) of participant `p`.
fn submission(p: &str) -> String {
    format!("SUB-{p}")
}

/// A finished five-minute dialogue `s-<tag>` and its two participants `<tag>-u` and `<tag>-w`,
/// each with a completion code and the ids their entry link carried.
async fn seed(store: &dyn Store, tag: &str, crowd: Crowd) {
    let base = now_ms() - 3600 * 1000;
    let end = base + 300_000;
    let session = format!("s-{tag}");
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
    for (i, role) in [Role::User, Role::Wizard, Role::User, Role::Wizard]
        .into_iter()
        .enumerate()
    {
        events.push(NewEvent {
            actor: Actor::Participant {
                role,
                participant: None,
            },
            kind: EventKind::Message {
                role,
                text: "hello".into(),
                source: MessageSource::Free,
            },
            at_ms: base + 60_000 * (i as u64 + 1),
        });
    }
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
    for role in [Role::User, Role::Wizard] {
        let id = format!("{tag}-{}", &role.as_str()[..1]);
        let (platform, ids) = match crowd {
            Crowd::Prolific => (
                Platform::Prolific,
                [
                    ("PROLIFIC_PID", worker(&id)),
                    ("STUDY_ID", PROLIFIC_STUDY.to_string()),
                    ("SESSION_ID", submission(&id)),
                ],
            ),
            Crowd::MTurk => (
                Platform::Mturk,
                [
                    ("workerId", worker(&id)),
                    ("assignmentId", submission(&id)),
                    ("hitId", HIT.to_string()),
                ],
            ),
        };
        store
            .create_participant(NewParticipant {
                id: id.clone(),
                token_hash: hash_token(&id),
                study_id: STUDY.into(),
                platform,
                worker_id: Some(worker(&id)),
                external_ids: ids
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect::<BTreeMap<_, _>>(),
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

/// The participants of the dialogues tagged `tags`.
fn participants(tags: &[&str]) -> Vec<String> {
    tags.iter()
        .flat_map(|t| [format!("{t}-u"), format!("{t}-w")])
        .collect()
}

async fn app_with(tmp: &tempfile::TempDir, payer: Arc<dyn wozkit_platforms::Payer>) -> TestApp {
    app_with_policy(tmp, payer, Policy::default()).await
}

/// The app with `policy` for its payment records (`settle_ms: 0`: as if the time an unsettled
/// payment is left alone had passed).
async fn app_with_policy(
    tmp: &tempfile::TempDir,
    payer: Arc<dyn wozkit_platforms::Payer>,
    policy: Policy,
) -> TestApp {
    let mut payers = Payers::default();
    payers.insert(STUDY, payer);
    let tunables = wozkit_server::Tunables {
        payers,
        pay_policy: policy,
        ..fast()
    };
    spawn_app_in_tuned(tmp.path().to_path_buf(), Tiny::default().study(), tunables).await
}

async fn get_page(app: &TestApp, cookie: &str) -> String {
    let res = app
        .http(
            "GET",
            &format!("/researcher/study/{STUDY}/review"),
            &[("Cookie", cookie)],
            "",
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    res.body
}

/// Posts a form of the review page (`decide` or `send`) with the page's CSRF token and this
/// site's Origin; expects the redirect back and returns where it goes.
async fn post(app: &TestApp, cookie: &str, what: &str, form: &str) -> String {
    let token = attr_after(&get_page(app, cookie).await, "data-csrf=\"");
    let origin = format!("http://{}", app.addr);
    let res = app
        .http(
            "POST",
            &format!("/researcher/study/{STUDY}/review/{what}"),
            &[
                ("Cookie", cookie),
                ("Origin", &origin),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &format!("csrf={}&{form}", urlencoding(&token)),
        )
        .await;
    assert_eq!(res.status, 303, "{what} {form}: {}", res.body);
    res.header("location").unwrap_or_default()
}

async fn decide(app: &TestApp, cookie: &str, form: &str) {
    post(app, cookie, "decide", form).await;
}

/// Presses Send; returns `(sent, failed)` as the redirect reports them.
async fn send(app: &TestApp, cookie: &str) -> (u32, u32) {
    let location = post(app, cookie, "send", "").await;
    let num = |key: &str| -> u32 {
        location
            .split(['?', '&'])
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {location}"))
    };
    (num("sent="), num("failed="))
}

/// The researcher's decisions of every test: approve the `a` and `b` dialogues, reject `c-u`
/// (with a reason Prolific accepts), bonus `a-u` 0.15 and `b-w` 1.05; `c-w` stays undecided.
async fn decide_all(app: &TestApp, cookie: &str) {
    decide(app, cookie, "action=approve&p=a-u&p=a-w&p=b-u&p=b-w").await;
    decide(
        app,
        cookie,
        &format!("action=reject&reason={}&p=c-u", urlencoding(LONG_REASON)),
    )
    .await;
    decide(
        app,
        cookie,
        "action=bonus&amount=0.15&reason=thorough&p=a-u",
    )
    .await;
    decide(app, cookie, "action=bonus&amount=1.05&reason=helpful&p=b-w").await;
}

/// The row's HTML on the review page.
fn row(body: &str, participant: &str) -> String {
    let start = body
        .find(&format!("data-participant=\"{participant}\""))
        .unwrap_or_else(|| panic!("no row for {participant}"));
    let end = body[start..]
        .find("</tr>")
        .map_or(body.len(), |e| start + e);
    body[start..end].to_string()
}

/// The review log's decisions with their sequence numbers.
async fn review_log(app: &TestApp) -> Vec<(u64, wozkit_core::event::ReviewDecision)> {
    app.store
        .events(&format!("review-{STUDY}"), 0)
        .await
        .expect("review log")
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Reviewed(d) => Some((e.seq, *d)),
            _ => None,
        })
        .collect()
}

/// The review log's decisions of `action`.
fn of_action(
    log: &[(u64, wozkit_core::event::ReviewDecision)],
    action: ReviewAction,
) -> Vec<&wozkit_core::event::ReviewDecision> {
    log.iter()
        .map(|(_, d)| d)
        .filter(|d| d.action == action)
        .collect()
}

/// The payment table of the study.
async fn table(app: &TestApp) -> Vec<PaymentRow> {
    let study = Arc::new(Tiny::default().study());
    payments(
        app.store.as_ref(),
        Some(STUDY),
        &|id| (id == STUDY).then(|| study.clone()),
        false,
    )
    .await
    .expect("payment table")
}

/// Cents of an amount of the table (rounded to the nearest cent; the table holds cents as
/// decimals).
fn cents(amount: f64) -> u64 {
    (amount * 100.0).round() as u64
}

/// What the payment table says each platform should hold: the workers of approved and of
/// rejected rows, and the review bonus of each worker in cents (those with one).
struct Expected {
    approved: BTreeSet<String>,
    rejected: BTreeSet<String>,
    bonus_cents: BTreeMap<String, u64>,
}

fn expected(rows: &[PaymentRow]) -> Expected {
    let workers = |d: &str| -> BTreeSet<String> {
        rows.iter()
            .filter(|r| r.decision == d)
            .map(|r| r.worker_id.clone())
            .collect()
    };
    Expected {
        approved: workers("approve"),
        rejected: workers("reject"),
        bonus_cents: rows
            .iter()
            .filter(|r| cents(r.review_bonus) > 0)
            .map(|r| (r.worker_id.clone(), cents(r.review_bonus)))
            .collect(),
    }
}

/// The `sent` events of the review log: `(participant, action sent, cents)`, sorted.
fn sent_events(
    log: &[(u64, wozkit_core::event::ReviewDecision)],
) -> Vec<(String, ReviewAction, Option<u64>)> {
    let mut out: Vec<_> = of_action(log, ReviewAction::Sent)
        .into_iter()
        .map(|d| {
            let of = d.of_seq.expect("a sent event names its decision");
            let action = log
                .iter()
                .find(|(seq, _)| *seq == of)
                .map(|(_, sent)| sent.action)
                .expect("the decision sent is in the log");
            (d.participant.clone(), action, d.cents)
        })
        .collect();
    out.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    out
}

fn prolific_submissions(tags: &[&str]) -> Vec<ProlificSubmission> {
    participants(tags)
        .iter()
        .map(|p| ProlificSubmission {
            id: submission(p),
            participant_id: worker(p),
            status: AWAITING_REVIEW.into(),
            study_code: Some(format!("CODE-{p}")),
            started_at: None,
            completed_at: None,
        })
        .collect()
}

/// Prolific's decided submissions by status, as worker ids.
fn prolific_decided(mock: &MockProlific, status: &str) -> BTreeSet<String> {
    mock.submissions()
        .into_iter()
        .filter(|s| s.status == status)
        .map(|s| s.participant_id)
        .collect()
}

/// The requests that change something on Prolific.
fn prolific_writes(mock: &MockProlific) -> usize {
    mock.requests().iter().filter(|r| r.method != "GET").count()
}

#[tokio::test]
async fn prolific_holds_what_the_payment_table_says_after_one_send() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockProlific::start(
        TOKEN,
        PROLIFIC_STUDY,
        prolific_submissions(&["a", "b", "c"]),
    )
    .await
    .expect("mock");
    let client = Prolific::new(&mock.url(), TOKEN, PROLIFIC_STUDY).expect("client");
    let app = app_with(&tmp, Arc::new(client)).await;
    for tag in ["a", "b", "c"] {
        seed(app.store.as_ref(), tag, Crowd::Prolific).await;
    }
    let cookie = login(&app).await;
    assert!(
        get_page(&app, &cookie)
            .await
            .contains("Send decisions to Prolific")
    );
    decide_all(&app, &cookie).await;
    assert_eq!(prolific_writes(&mock), 0, "deciding sends nothing");

    // 4 approvals, 1 rejection, 2 bonuses.
    assert_eq!(send(&app, &cookie).await, (7, 0));
    let want = expected(&table(&app).await);
    assert_eq!(
        want.approved,
        ["W-a-u", "W-a-w", "W-b-u", "W-b-w"]
            .map(String::from)
            .into(),
        "the table's approvals"
    );
    assert_eq!(prolific_decided(&mock, "APPROVED"), want.approved);
    assert_eq!(prolific_decided(&mock, "REJECTED"), want.rejected);
    assert_eq!(want.rejected, BTreeSet::from(["W-c-u".to_string()]));
    assert_eq!(
        mock.status(&submission("c-w")).as_deref(),
        Some(AWAITING_REVIEW)
    );
    assert_eq!(mock.paid_cents(), want.bonus_cents);
    assert_eq!(
        want.bonus_cents,
        BTreeMap::from([("W-a-u".to_string(), 15), ("W-b-w".to_string(), 105)])
    );
    // The rejection carried the researcher's reason, in Prolific's category words.
    let reject = mock
        .requests()
        .into_iter()
        .find(|r| r.path.contains(&submission("c-u")))
        .expect("the rejection was sent");
    let body: serde_json::Value = serde_json::from_str(&reject.body).expect("json");
    assert_eq!(body["action"], "REJECT");
    assert_eq!(body["message"], LONG_REASON);
    // Each participant's bonus is one payment of its own: set up once, paid once.
    let bonus_paths: Vec<String> = mock
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("bonus"))
        .map(|r| r.path)
        .collect();
    assert_eq!(bonus_paths.len(), 4, "{bonus_paths:?}");

    // The review log has a `sent` event for each.
    let log = review_log(&app).await;
    assert_eq!(
        sent_events(&log),
        vec![
            ("a-u".to_string(), ReviewAction::Approve, None),
            ("a-u".to_string(), ReviewAction::Bonus, Some(15)),
            ("a-w".to_string(), ReviewAction::Approve, None),
            ("b-u".to_string(), ReviewAction::Approve, None),
            ("b-w".to_string(), ReviewAction::Approve, None),
            ("b-w".to_string(), ReviewAction::Bonus, Some(105)),
            ("c-u".to_string(), ReviewAction::Reject, None),
        ]
    );
    assert!(of_action(&log, ReviewAction::SendFailed).is_empty());

    // Another press sends nothing.
    let writes = prolific_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(prolific_writes(&mock), writes);
    assert_eq!(mock.paid_cents(), want.bonus_cents);
    let body = get_page(&app, &cookie).await;
    assert!(
        row(&body, "b-w").contains("bonus sent: 1.05"),
        "{}",
        row(&body, "b-w")
    );
    assert!(
        row(&body, "c-u").contains("sent: reject"),
        "{}",
        row(&body, "c-u")
    );
}

#[tokio::test]
async fn a_prolific_failure_is_shown_logged_and_sent_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockProlific::start(
        TOKEN,
        PROLIFIC_STUDY,
        prolific_submissions(&["a", "b", "c"]),
    )
    .await
    .expect("mock");
    let client = Prolific::new(&mock.url(), TOKEN, PROLIFIC_STUDY).expect("client");
    // As if the time an unsettled payment is left alone had passed at each press.
    let app = app_with_policy(&tmp, Arc::new(client), Policy { settle_ms: 0 }).await;
    for tag in ["a", "b", "c"] {
        seed(app.store.as_ref(), tag, Crowd::Prolific).await;
    }
    let cookie = login(&app).await;
    decide_all(&app, &cookie).await;

    // Paying a-u's bonus fails with a 5xx: it is set up but not paid (and Prolific may have
    // paid it: not sent again in this press). b-w's is paid.
    mock.fail_when("/pay/", 503);
    assert_eq!(send(&app, &cookie).await, (6, 1));
    assert_eq!(
        mock.paid_cents(),
        BTreeMap::from([("W-b-w".to_string(), 105)])
    );
    let log = review_log(&app).await;
    let failed: Vec<(String, Option<u64>)> = of_action(&log, ReviewAction::SendFailed)
        .into_iter()
        .map(|d| (d.participant.clone(), d.cents))
        .collect();
    assert_eq!(failed, vec![("a-u".to_string(), Some(15))]);
    assert!(
        of_action(&log, ReviewAction::SendFailed)
            .iter()
            .all(|d| d.reason.contains("503")),
        "{log:?}"
    );
    let body = get_page(&app, &cookie).await;
    assert!(
        row(&body, "a-u").contains("send failed"),
        "{}",
        row(&body, "a-u")
    );
    assert!(
        !row(&body, "a-u").contains("bonus sent"),
        "{}",
        row(&body, "a-u")
    );
    assert!(!row(&body, "a-w").contains("send failed"));

    // The next press asks Prolific, sees nothing paid, and pays the payment set up before
    // (not a new one), once.
    let writes = prolific_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (1, 0));
    let want = expected(&table(&app).await);
    assert_eq!(mock.paid_cents(), want.bonus_cents);
    assert_eq!(
        want.bonus_cents,
        BTreeMap::from([("W-a-u".to_string(), 15), ("W-b-w".to_string(), 105)])
    );
    assert_eq!(
        prolific_writes(&mock),
        writes + 1,
        "the recorded set-up paid"
    );
    assert_eq!(prolific_decided(&mock, "APPROVED"), want.approved);
    assert_eq!(prolific_decided(&mock, "REJECTED"), want.rejected);
    let body = get_page(&app, &cookie).await;
    assert!(
        !row(&body, "b-w").contains("send failed"),
        "{}",
        row(&body, "b-w")
    );
    assert!(row(&body, "b-w").contains("bonus sent: 1.05"));

    // A failed approval: the transition of a newly approved submission fails once.
    decide(&app, &cookie, "action=approve&p=c-w").await;
    mock.fail_when("/transition/", 500);
    assert_eq!(send(&app, &cookie).await, (0, 1));
    assert_eq!(
        mock.status(&submission("c-w")).as_deref(),
        Some(AWAITING_REVIEW)
    );
    assert!(row(&get_page(&app, &cookie).await, "c-w").contains("send failed"));
    assert_eq!(send(&app, &cookie).await, (1, 0));
    assert_eq!(mock.status(&submission("c-w")).as_deref(), Some("APPROVED"));
    let writes = prolific_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(prolific_writes(&mock), writes);
    let want = expected(&table(&app).await);
    assert_eq!(prolific_decided(&mock, "APPROVED"), want.approved);
    assert_eq!(mock.paid_cents(), want.bonus_cents);
}

fn mturk_assignment(p: &str) -> MockAssignment {
    MockAssignment {
        id: submission(p),
        hit_id: HIT.into(),
        worker_id: worker(p),
        status: "Submitted".into(),
        answer: String::new(),
        feedback: None,
        submit_time: 1_700_000_000,
    }
}

/// MTurk's assignments in `status`, as worker ids.
fn mturk_decided(mock: &MockMTurk, status: &str) -> BTreeSet<String> {
    mock.assignments()
        .into_iter()
        .filter(|a| a.status == status)
        .map(|a| a.worker_id)
        .collect()
}

/// The calls that change something on MTurk.
fn mturk_writes(mock: &MockMTurk) -> usize {
    mock.operations()
        .iter()
        .filter(|o| !o.starts_with("List"))
        .count()
}

#[tokio::test]
async fn mturk_holds_what_the_payment_table_says_and_a_failure_is_sent_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockMTurk::start(MTURK_KEY).await.expect("mock");
    // The assignment of `c-w` is not on MTurk yet: sending its decision fails.
    for p in participants(&["a", "b", "c"]) {
        if p != "c-w" {
            mock.add_assignment(mturk_assignment(&p));
        }
    }
    let client = MTurk::new(Endpoint::Custom(mock.url()), MTURK_KEY, "secret", None)
        .expect("client")
        .with_hits(vec![HIT.into()]);
    let app = app_with(&tmp, Arc::new(client)).await;
    for tag in ["a", "b", "c"] {
        seed(app.store.as_ref(), tag, Crowd::MTurk).await;
    }
    let cookie = login(&app).await;
    assert!(
        get_page(&app, &cookie)
            .await
            .contains("Send decisions to MTurk")
    );
    decide_all(&app, &cookie).await;
    decide(&app, &cookie, "action=approve&p=c-w").await;
    decide(&app, &cookie, "action=block&reason=copied%20answers&p=c-u").await;

    // 4 approvals, 1 rejection, 2 bonuses, 1 block; the approval of c-w fails.
    assert_eq!(send(&app, &cookie).await, (8, 1));
    let log = review_log(&app).await;
    let failed = of_action(&log, ReviewAction::SendFailed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].participant, "c-w");
    assert!(
        failed[0].reason.contains(&submission("c-w")),
        "{}",
        failed[0].reason
    );
    assert!(row(&get_page(&app, &cookie).await, "c-w").contains("send failed"));
    assert_eq!(
        mock.blocks().keys().cloned().collect::<Vec<_>>(),
        vec![worker("c-u")]
    );
    let rejected = mock
        .assignments()
        .into_iter()
        .find(|a| a.id == submission("c-u"))
        .expect("c-u");
    assert_eq!(rejected.feedback.as_deref(), Some(LONG_REASON));

    // The assignment arrives; the next press sends the approval only.
    mock.add_assignment(mturk_assignment("c-w"));
    let writes = mturk_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (1, 0));
    assert_eq!(mturk_writes(&mock), writes + 1);
    assert!(!row(&get_page(&app, &cookie).await, "c-w").contains("send failed"));

    let want = expected(&table(&app).await);
    assert_eq!(want.approved.len(), 5);
    assert_eq!(mturk_decided(&mock, "Approved"), want.approved);
    assert_eq!(mturk_decided(&mock, "Rejected"), want.rejected);
    assert_eq!(mock.bonus_cents(), want.bonus_cents);
    assert_eq!(
        want.bonus_cents,
        BTreeMap::from([("W-a-u".to_string(), 15), ("W-b-w".to_string(), 105)])
    );
    let log = review_log(&app).await;
    let sent = sent_events(&log);
    assert_eq!(sent.len(), 9, "{sent:?}");
    assert!(sent.contains(&("c-w".to_string(), ReviewAction::Approve, None)));
    assert!(sent.contains(&("c-u".to_string(), ReviewAction::Block, None)));

    // Another press writes nothing.
    let writes = mturk_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(mturk_writes(&mock), writes);

    // A bonus raised with the same reason: MTurk pays the difference, so it paid in all what
    // the table says.
    decide(
        &app,
        &cookie,
        "action=bonus&amount=2.10&reason=helpful&p=b-w",
    )
    .await;
    assert_eq!(send(&app, &cookie).await, (1, 0));
    let want = expected(&table(&app).await);
    assert_eq!(want.bonus_cents.get("W-b-w"), Some(&210));
    assert_eq!(mock.bonus_cents(), want.bonus_cents);
    let raise = mock.bonuses().pop().expect("the raise was paid");
    assert_eq!(raise.cents, 105);
    assert!(
        raise.reason.starts_with("helpful") && raise.reason.contains("from 1.05 to 2.10"),
        "{}",
        raise.reason
    );
    let writes = mturk_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(mturk_writes(&mock), writes);
}

#[tokio::test]
async fn a_block_on_prolific_is_logged_once_as_not_sendable() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockProlific::start(TOKEN, PROLIFIC_STUDY, prolific_submissions(&["a"]))
        .await
        .expect("mock");
    let client = Prolific::new(&mock.url(), TOKEN, PROLIFIC_STUDY).expect("client");
    let app = app_with(&tmp, Arc::new(client)).await;
    seed(app.store.as_ref(), "a", Crowd::Prolific).await;
    let cookie = login(&app).await;
    decide(&app, &cookie, "action=approve&p=a-w").await;
    decide(&app, &cookie, "action=block&reason=copied%20answers&p=a-u").await;

    // The approval is sent; the block is neither sent nor a failure.
    assert_eq!(send(&app, &cookie).await, (1, 0));
    let log = review_log(&app).await;
    assert!(
        of_action(&log, ReviewAction::SendFailed).is_empty(),
        "{log:?}"
    );
    let unsendable = of_action(&log, ReviewAction::NotSendable);
    assert_eq!(unsendable.len(), 1, "{log:?}");
    assert_eq!(unsendable[0].participant, "a-u");
    let block_seq = log
        .iter()
        .find(|(_, d)| d.action == ReviewAction::Block)
        .map(|(seq, _)| *seq)
        .expect("the block is logged");
    assert_eq!(unsendable[0].of_seq, Some(block_seq));
    assert!(
        unsendable[0]
            .reason
            .contains("Prolific has no block through its API")
            && unsendable[0].reason.contains("web app"),
        "{}",
        unsendable[0].reason
    );
    // Only the approval reached Prolific (it has no block request).
    assert_eq!(prolific_writes(&mock), 1, "{:?}", mock.requests());
    // The page says so plainly, not as a failed send.
    let body = get_page(&app, &cookie).await;
    let a_u = row(&body, "a-u");
    assert!(a_u.contains("not_sendable"), "{a_u}");
    assert!(
        a_u.contains("Prolific has no block through its API"),
        "{a_u}"
    );
    assert!(!a_u.contains("send failed"), "{a_u}");

    // Later presses send nothing and log nothing more about it.
    let events = log.len();
    let writes = prolific_writes(&mock);
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(review_log(&app).await.len(), events);
    assert_eq!(prolific_writes(&mock), writes);
}

#[tokio::test]
async fn an_mturk_bonus_failing_mid_batch_logs_each_bonus_and_pays_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockMTurk::start(MTURK_KEY).await.expect("mock");
    for p in participants(&["a", "b"]) {
        mock.add_assignment(mturk_assignment(&p));
    }
    let client = MTurk::new(Endpoint::Custom(mock.url()), MTURK_KEY, "secret", None)
        .expect("client")
        .with_hits(vec![HIT.into()]);
    let app = app_with(&tmp, Arc::new(client)).await;
    for tag in ["a", "b"] {
        seed(app.store.as_ref(), tag, Crowd::MTurk).await;
    }
    let cookie = login(&app).await;
    // Three bonuses in one batch (sent in participant order: a-u, a-w, b-w); the middle one
    // is refused by MTurk.
    decide(
        &app,
        &cookie,
        "action=bonus&amount=0.15&reason=thorough&p=a-u",
    )
    .await;
    decide(
        &app,
        &cookie,
        "action=bonus&amount=0.40&reason=patient&p=a-w",
    )
    .await;
    decide(
        &app,
        &cookie,
        "action=bonus&amount=1.05&reason=helpful&p=b-w",
    )
    .await;
    mock.fail_when(
        "SendBonus",
        "AssignmentId",
        &submission("a-w"),
        "This operation can be called with a status of: Approved",
    );
    assert_eq!(send(&app, &cookie).await, (2, 1));
    let paid = mock.bonus_cents();
    assert_eq!(
        paid,
        BTreeMap::from([("W-a-u".to_string(), 15), ("W-b-w".to_string(), 105)]),
        "the bonuses before and after the refused one are paid"
    );
    let log = review_log(&app).await;
    let failed = of_action(&log, ReviewAction::SendFailed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].participant, "a-w");
    assert_eq!(failed[0].cents, Some(40));
    assert!(
        failed[0].reason.contains("status of: Approved"),
        "{}",
        failed[0].reason
    );
    assert_eq!(
        sent_events(&log),
        vec![
            ("a-u".to_string(), ReviewAction::Bonus, Some(15)),
            ("b-w".to_string(), ReviewAction::Bonus, Some(105)),
        ]
    );
    let body = get_page(&app, &cookie).await;
    assert!(
        row(&body, "a-u").contains("bonus sent: 0.15"),
        "{}",
        row(&body, "a-u")
    );
    assert!(
        !row(&body, "a-u").contains("send failed"),
        "{}",
        row(&body, "a-u")
    );
    assert!(
        row(&body, "a-w").contains("send failed"),
        "{}",
        row(&body, "a-w")
    );

    // The next press sends the failed bonus only; MTurk then holds what the table says.
    let calls = mock.calls().len();
    assert_eq!(send(&app, &cookie).await, (1, 0));
    let bonus_calls: Vec<_> = mock.calls()[calls..]
        .iter()
        .filter(|c| c.operation == "SendBonus")
        .map(|c| {
            c.body["AssignmentId"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(bonus_calls, vec![submission("a-w")]);
    let want = expected(&table(&app).await);
    assert_eq!(mock.bonus_cents(), want.bonus_cents);
    assert_eq!(want.bonus_cents.get("W-a-w"), Some(&40));
    assert_eq!(mock.bonuses().len(), 3, "each bonus paid once");
    assert_eq!(send(&app, &cookie).await, (0, 0));
}

/// Pay requests sent to Prolific (each pays a set-up bulk bonus payment).
fn prolific_pays(mock: &MockProlific) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.path.ends_with("/pay/"))
        .count()
}

/// The cents of the `sent` events of bonuses, per participant.
fn bonus_sent(log: &[(u64, wozkit_core::event::ReviewDecision)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (p, action, cents) in sent_events(log) {
        if action == ReviewAction::Bonus {
            *out.entry(p).or_default() += cents.unwrap_or(0);
        }
    }
    out
}

/// Prolific pays the bonus and the connection drops before its answer: the press asks
/// Prolific, finds it paid and logs it; the next press pays nothing. Paid exactly once.
#[tokio::test]
async fn a_prolific_bonus_paid_without_an_answer_is_paid_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockProlific::start(TOKEN, PROLIFIC_STUDY, prolific_submissions(&["a"]))
        .await
        .expect("mock");
    let client = Prolific::new(&mock.url(), TOKEN, PROLIFIC_STUDY).expect("client");
    let app = app_with_policy(&tmp, Arc::new(client), Policy { settle_ms: 0 }).await;
    seed(app.store.as_ref(), "a", Crowd::Prolific).await;
    let cookie = login(&app).await;
    decide(
        &app,
        &cookie,
        "action=bonus&amount=0.15&reason=thorough&p=a-u",
    )
    .await;
    mock.after_commit("/pay/", wozkit_platforms::prolific::mock::Fault::Disconnect);
    assert_eq!(send(&app, &cookie).await, (1, 0));
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(
        mock.paid_cents(),
        BTreeMap::from([("W-a-u".to_string(), 15)])
    );
    assert_eq!(prolific_pays(&mock), 1);
    assert_eq!(
        bonus_sent(&review_log(&app).await),
        BTreeMap::from([("a-u".to_string(), 15)])
    );
}

/// Prolific pays in the background: after the dropped answer its submission shows nothing yet.
/// Presses before it shows send nothing again; the server restarts; once Prolific shows the
/// payment, the next press logs it. Paid exactly once, and the log says so once.
#[tokio::test]
async fn a_restart_between_an_uncertain_bonus_and_the_retry_pays_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockProlific::start(TOKEN, PROLIFIC_STUDY, prolific_submissions(&["a"]))
        .await
        .expect("mock");
    let client = Arc::new(Prolific::new(&mock.url(), TOKEN, PROLIFIC_STUDY).expect("client"));
    let mut app = app_with(&tmp, client.clone()).await;
    seed(app.store.as_ref(), "a", Crowd::Prolific).await;
    let cookie = login(&app).await;
    decide(
        &app,
        &cookie,
        "action=bonus&amount=1.05&reason=helpful&p=a-w",
    )
    .await;
    mock.pay_in_background();
    mock.after_commit("/pay/", wozkit_platforms::prolific::mock::Fault::Disconnect);
    assert_eq!(send(&app, &cookie).await, (0, 1));
    assert_eq!(send(&app, &cookie).await, (0, 1));
    assert_eq!(
        prolific_pays(&mock),
        1,
        "nothing sent again while unsettled"
    );
    let log = review_log(&app).await;
    assert!(
        of_action(&log, ReviewAction::SendFailed)
            .iter()
            .all(|d| d.reason.contains("not settled")),
        "{log:?}"
    );
    assert!(row(&get_page(&app, &cookie).await, "a-w").contains("not settled"));

    app.stop().await;
    mock.show_background_payments();
    let app = app_with(&tmp, client).await;
    let cookie = login(&app).await;
    assert_eq!(send(&app, &cookie).await, (1, 0));
    assert_eq!(send(&app, &cookie).await, (0, 0));
    assert_eq!(
        mock.paid_cents(),
        BTreeMap::from([("W-a-w".to_string(), 105)])
    );
    assert_eq!(prolific_pays(&mock), 1);
    assert_eq!(
        bonus_sent(&review_log(&app).await),
        BTreeMap::from([("a-w".to_string(), 105)])
    );
    assert!(row(&get_page(&app, &cookie).await, "a-w").contains("bonus sent: 1.05"));
}

/// Two researchers press Send at the same moment, while another payer (another instance, the
/// command line) pays the same review bonus through its record: one payment.
#[tokio::test]
async fn two_sends_at_once_and_another_payer_pay_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mock = MockProlific::start(TOKEN, PROLIFIC_STUDY, prolific_submissions(&["a"]))
        .await
        .expect("mock");
    let client = Arc::new(Prolific::new(&mock.url(), TOKEN, PROLIFIC_STUDY).expect("client"));
    let app = app_with(&tmp, client.clone()).await;
    seed(app.store.as_ref(), "a", Crowd::Prolific).await;
    let alice = login(&app).await;
    let bob = crate::helpers::login_as(&app, wozkit_server::auth::Access::Researcher).await;
    decide(
        &app,
        &alice,
        "action=bonus&amount=0.40&reason=patient&p=a-u",
    )
    .await;
    let bonuses = [wozkit_platforms::Bonus {
        worker_id: worker("a-u"),
        submission_id: submission("a-u"),
        cents: 40,
        reason: String::new(),
    }];
    let key = wozkit_data::records::ledger::bonus_key(STUDY, "a-u");
    let ledger = wozkit_data::records::ledger::StoreLedger(app.store.as_ref());
    let other = wozkit_platforms::once::pay_once(
        client.as_ref(),
        &ledger,
        &key,
        Some(wozkit_platforms::once::NewPayment {
            bonuses: &bonuses,
            tag: "another payer",
            replaces: None,
        }),
        "another payer",
        Policy::default(),
    );
    let (a, b, other) = tokio::join!(send(&app, &alice), send(&app, &bob), other);
    other.expect("the other payer's ledger works");
    let (sent, _) = (a.0 + b.0, a.1 + b.1);
    assert!(sent <= 1, "{a:?} {b:?}");
    // Whatever the order, a later press settles and logs it, and pays nothing more.
    send(&app, &alice).await;
    assert_eq!(send(&app, &bob).await, (0, 0));
    assert_eq!(
        mock.paid_cents(),
        BTreeMap::from([("W-a-u".to_string(), 40)])
    );
    assert_eq!(prolific_pays(&mock), 1);
    assert_eq!(
        bonus_sent(&review_log(&app).await),
        BTreeMap::from([("a-u".to_string(), 40)])
    );
}
