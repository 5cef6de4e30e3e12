//! The Prolific client against the local mock of Prolific's documented endpoints: every page
//! of submissions, the state rules of approving and rejecting, bulk bonuses paid to the cent,
//! and errors that name the request and carry Prolific's message.

use wozkit_platforms::prolific::mock::MockProlific;
use wozkit_platforms::prolific::{
    AWAITING_REVIEW, Prolific, ProlificSubmission, RejectionCategory, amount, cents_of,
};
use wozkit_platforms::{Bonus, Payer, PlatformError};

const TOKEN: &str = "tok-7f3a9c";
const STUDY: &str = "60aca280709ee40ec37d4885";

fn sub(n: usize, status: &str) -> ProlificSubmission {
    ProlificSubmission {
        id: format!("sub{n:03}"),
        participant_id: format!("pid{n:03}"),
        status: status.to_string(),
        study_code: Some(format!("CODE{n}")),
        started_at: None,
        completed_at: None,
    }
}

async fn mock(subs: Vec<ProlificSubmission>) -> (MockProlific, Prolific) {
    let mock = MockProlific::start(TOKEN, STUDY, subs).await.unwrap();
    let client = Prolific::new(&mock.url(), TOKEN, STUDY).unwrap();
    (mock, client)
}

#[tokio::test]
async fn every_page_of_submissions_is_listed() {
    let subs: Vec<_> = (0..23).map(|n| sub(n, AWAITING_REVIEW)).collect();
    let (mock, client) = mock(subs.clone()).await;
    mock.set_page_size(5);
    let listed = client.list_submissions().await.unwrap();
    assert_eq!(listed, subs);
    let gets: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert_eq!(gets.len(), 5, "23 submissions in pages of 5: {gets:?}");
    assert_eq!(
        gets[0].path,
        format!("/api/v1/studies/{STUDY}/submissions/")
    );
    assert!(gets[4].path.ends_with("?page=5"), "{:?}", gets[4]);
    // Through the Payer interface: the worker and the code they entered.
    let through_payer = Payer::submissions(&client).await.unwrap();
    assert_eq!(through_payer.len(), 23);
    assert_eq!(through_payer[7].worker_id, "pid007");
    assert_eq!(through_payer[7].completion_code.as_deref(), Some("CODE7"));
}

#[tokio::test]
async fn only_submissions_awaiting_review_are_decided() {
    let (mock, client) = mock(vec![
        sub(1, AWAITING_REVIEW),
        sub(2, AWAITING_REVIEW),
        sub(3, "ACTIVE"),
        sub(4, "RETURNED"),
    ])
    .await;
    client.approve("sub001").await.unwrap();
    assert_eq!(mock.status("sub001").as_deref(), Some("APPROVED"));
    // The same decision again is ignored (Prolific's transition is idempotent).
    client.approve("sub001").await.unwrap();
    // A decided submission cannot be rejected.
    let long = "Your answers did not follow the instructions of the study: the task asked for \
                complete sentences describing each step.";
    let err = client
        .reject("sub001", long, RejectionCategory::FailedInstructions)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("sub001/transition/ (REJECT)"), "{err}");
    assert!(err.contains("only a submission AWAITING REVIEW"), "{err}");
    // A submission still active cannot be approved.
    let err = client.approve("sub003").await.unwrap_err().to_string();
    assert!(err.contains("refused (400)"), "{err}");
    assert_eq!(mock.status("sub003").as_deref(), Some("ACTIVE"));
    // A short rejection message is refused before anything is sent.
    let before = mock.requests().len();
    let err = client
        .reject("sub002", "too short", RejectionCategory::LowEffort)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("at least 100 characters"), "{err}");
    assert_eq!(mock.requests().len(), before, "nothing sent");
    client
        .reject("sub002", long, RejectionCategory::FailedInstructions)
        .await
        .unwrap();
    assert_eq!(mock.status("sub002").as_deref(), Some("REJECTED"));
    let last = mock.requests().pop().unwrap();
    let body: serde_json::Value = serde_json::from_str(&last.body).unwrap();
    assert_eq!(body["action"], "REJECT");
    assert_eq!(body["rejection_category"], "FAILED_INSTRUCTIONS");
    assert_eq!(body["message"], long);
    // Through the Payer interface a short reason is completed to Prolific's minimum.
    let (mock2, client2) = mock_pair(vec![sub(9, AWAITING_REVIEW)]).await;
    Payer::reject(&client2, "sub009", "Failed the attention check.")
        .await
        .unwrap();
    assert_eq!(mock2.status("sub009").as_deref(), Some("REJECTED"));
    // Bulk approval takes those awaiting review and refuses the others by name.
    let (mock3, client3) = mock_pair(vec![
        sub(5, AWAITING_REVIEW),
        sub(6, AWAITING_REVIEW),
        sub(7, "RETURNED"),
    ])
    .await;
    client3
        .bulk_approve(&["sub005".into(), "sub006".into()])
        .await
        .unwrap();
    assert_eq!(mock3.status("sub005").as_deref(), Some("APPROVED"));
    assert_eq!(mock3.status("sub006").as_deref(), Some("APPROVED"));
    let err = client3
        .bulk_approve(&["sub007".into()])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("sub007: RETURNED"), "{err}");
}

async fn mock_pair(subs: Vec<ProlificSubmission>) -> (MockProlific, Prolific) {
    mock(subs).await
}

#[tokio::test]
async fn bulk_bonuses_are_paid_to_the_cent() {
    let (mock, client) = mock((1..=4).map(|n| sub(n, "APPROVED")).collect()).await;
    // Amounts as the payment table gives them: 0.15, a value that rounds (1.005 → 1.01), a
    // whole amount, and two lines for one participant that add up.
    let table = [
        ("pid001", 0.15),
        ("pid002", 1.005),
        ("pid003", 12.0),
        ("pid004", 0.1),
        ("pid004", 0.2),
    ];
    let bonuses: Vec<Bonus> = table
        .iter()
        .map(|(who, a)| Bonus {
            worker_id: who.to_string(),
            submission_id: String::new(),
            cents: cents_of(*a),
            reason: "extra minutes".into(),
        })
        .collect();
    let results = Payer::bonus(&client, &bonuses).await;
    assert_eq!(results.len(), bonuses.len(), "one result per bonus");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let paid = mock.paid_cents();
    assert_eq!(paid["pid001"], 15);
    assert_eq!(paid["pid002"], 101);
    assert_eq!(paid["pid003"], 1200);
    assert_eq!(paid["pid004"], 30);
    // Two requests, in Prolific's order: set up (CSV with two decimals), then pay.
    let posts: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(posts[0].path, "/api/v1/submissions/bonus-payments/");
    let body: serde_json::Value = serde_json::from_str(&posts[0].body).unwrap();
    assert_eq!(body["study_id"], STUDY);
    assert_eq!(
        body["csv_bonuses"],
        "pid001,0.15\npid002,1.01\npid003,12.00\npid004,0.30\n"
    );
    assert!(
        posts[1].path.starts_with("/api/v1/bulk-bonus-payments/")
            && posts[1].path.ends_with("/pay/"),
        "{:?}",
        posts[1]
    );
    // A set-up payment is paid once: the mock refuses a second payment of the same id.
    let bulk_id = posts[1].path.split('/').nth(4).unwrap().to_string();
    let err = client.pay_bonuses(&bulk_id).await.unwrap_err().to_string();
    assert!(err.contains("paid already"), "{err}");
    assert_eq!(mock.paid_cents(), paid, "nothing paid twice");
    // Nothing to pay sends nothing.
    let before = mock.requests().len();
    assert!(
        client
            .pay_bonus_amounts(&[("pid001".into(), 0)])
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(mock.requests().len(), before);
    // A participant outside the study: Prolific's 400 names them.
    let err = client
        .setup_bonuses(&[("stranger".into(), 50)])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("bonus-payments"), "{err}");
    assert!(err.contains("stranger: did not take part"), "{err}");
    assert_eq!(amount(cents_of(0.15)), "0.15");
}

#[tokio::test]
async fn a_wrong_token_is_a_clear_refusal() {
    let mock = MockProlific::start(TOKEN, STUDY, vec![sub(1, AWAITING_REVIEW)])
        .await
        .unwrap();
    let client = Prolific::new(&mock.url(), "not-the-token", STUDY).unwrap();
    let err = client.list_submissions().await.unwrap_err();
    assert!(
        matches!(err, PlatformError::Refused { status: 401, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("GET /api/v1/studies/"), "{text}");
    assert!(text.contains("Not authenticated"), "{text}");
    assert!(
        !text.contains("not-the-token"),
        "the token stays out: {text}"
    );
    // No token at all: named by its variable before anything is sent.
    let err = Prolific::new(&mock.url(), " ", STUDY)
        .unwrap_err()
        .to_string();
    assert!(err.contains("PROLIFIC_TOKEN"), "{err}");
}

#[tokio::test]
async fn a_server_error_names_the_request_and_reads_are_retried() {
    let (mock, client) = mock(vec![sub(1, AWAITING_REVIEW)]).await;
    // A read is retried past one 500.
    mock.fail_next(500);
    let listed = client.list_submissions().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        mock.requests().iter().filter(|r| r.method == "GET").count(),
        2
    );
    // A write is not retried: the 500 comes back naming the request.
    mock.fail_next(500);
    let err = client.approve("sub001").await.unwrap_err().to_string();
    assert!(
        err.contains("POST /api/v1/submissions/sub001/transition/ (APPROVE)"),
        "{err}"
    );
    assert!(err.contains("refused (500)"), "{err}");
    assert!(err.contains("Mock failure"), "{err}");
    assert_eq!(mock.status("sub001").as_deref(), Some(AWAITING_REVIEW));
    assert_eq!(
        mock.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count(),
        1,
        "sent once"
    );
    // Nobody listening: unreachable, naming the request.
    let gone = Prolific::new("http://127.0.0.1:9", TOKEN, STUDY).unwrap();
    let err = gone.approve("sub001").await.unwrap_err().to_string();
    assert!(err.contains("cannot reach the platform"), "{err}");
    assert!(err.contains("transition"), "{err}");
}

#[tokio::test]
async fn a_failed_bulk_bonus_fails_every_bonus_of_it() {
    let (mock, client) = mock((1..=3).map(|n| sub(n, "APPROVED")).collect()).await;
    let bonuses: Vec<Bonus> = (1..=3)
        .map(|n| Bonus {
            worker_id: format!("pid{n:03}"),
            submission_id: format!("sub{n:03}"),
            cents: 10 * n,
            reason: "extra minutes".into(),
        })
        .collect();
    // The payment step fails: Prolific's bulk payment is all or nothing.
    mock.fail_when("/pay/", 503);
    let results = Payer::bonus(&client, &bonuses).await;
    assert_eq!(results.len(), 3);
    for r in &results {
        let e = r.as_ref().expect_err("the bulk payment failed");
        assert!(e.to_string().contains("refused (503)"), "{e}");
    }
    assert!(mock.paid_cents().is_empty(), "{:?}", mock.paid_cents());
}

#[tokio::test]
async fn a_block_is_not_sendable_and_sends_nothing() {
    let (mock, client) = mock(vec![sub(1, "APPROVED")]).await;
    let e = Payer::block(&client, "pid001", "copied answers")
        .await
        .expect_err("Prolific has no block request");
    assert!(e.is_unsupported(), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("Prolific has no block through its API"),
        "{text}"
    );
    assert!(
        text.contains("pid001") && text.contains("web app"),
        "{text}"
    );
    assert!(mock.requests().is_empty(), "{:?}", mock.requests());
}
