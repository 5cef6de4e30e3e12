//! The MTurk client through the real AWS SDK against the crate's local mock of MTurk's JSON
//! protocol: HITs with an ExternalQuestion, assignments over several pages, the approve/reject
//! rules, bonuses to the cent and never twice, blocks and qualifications.

use wozkit_platforms::mturk::mock::{MockMTurk, answer_document};
use wozkit_platforms::mturk::{
    BonusOutcome, EXTERNAL_QUESTION_NS, Endpoint, HitSpec, MTurk, Requirement,
};
use wozkit_platforms::{Bonus, Payer, PlatformError};

const KEY: &str = "AKIDWOZKITTEST";

async fn setup() -> (MockMTurk, MTurk) {
    let mock = MockMTurk::start(KEY).await.expect("mock starts");
    let client = MTurk::new(Endpoint::Custom(mock.url()), KEY, "secret", None).expect("client");
    (mock, client)
}

fn spec(link: &str) -> HitSpec {
    HitSpec {
        entry_link: link.to_string(),
        title: "Chat as a dispatcher".into(),
        description: "Talk to another worker about an emergency.".into(),
        keywords: "chat, dialogue".into(),
        reward_cents: 150,
        assignments: 4,
        lifetime_s: 86_400,
        duration_s: 3_600,
        auto_approval_s: 259_200,
        frame_height: 0,
        requirements: vec![],
        annotation: Some("wozkit:offshore".into()),
        unique_request_token: None,
    }
}

#[tokio::test]
async fn a_hit_points_at_the_entry_link_with_its_terms_and_qualifications() {
    let (mock, client) = setup().await;
    let qual = client
        .create_qualification_type("wozkit offshore veterans", "Took part before", None)
        .await
        .unwrap();
    let mut s = spec(&HitSpec::entry_link("https://woz.example.org", "offshore"));
    s.requirements = vec![
        Requirement::Locale(vec!["us".into(), "GB".into()]),
        Requirement::ApprovalRate(97),
        Requirement::Lacks {
            type_id: qual.clone(),
        },
    ];
    let hit = client.create_hit(&s).await.unwrap();
    let hits = mock.hits();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, hit.hit_id);
    assert_eq!(hits[0].reward_cents, 150);
    // The XML the mock received: an ExternalQuestion of the entry link, full height.
    let q = &hits[0].question;
    assert!(
        q.contains(&format!(
            "<ExternalQuestion xmlns=\"{EXTERNAL_QUESTION_NS}\">"
        )),
        "{q}"
    );
    assert!(
        q.contains("<ExternalURL>https://woz.example.org/join?study=offshore</ExternalURL>"),
        "{q}"
    );
    assert!(q.contains("<FrameHeight>0</FrameHeight>"), "{q}");
    let r = &hits[0].request;
    assert_eq!(r["Reward"], "1.50");
    assert_eq!(r["MaxAssignments"], 4);
    assert_eq!(r["LifetimeInSeconds"], 86_400);
    assert_eq!(r["AssignmentDurationInSeconds"], 3_600);
    assert_eq!(r["AutoApprovalDelayInSeconds"], 259_200);
    assert_eq!(r["Keywords"], "chat, dialogue");
    assert_eq!(r["RequesterAnnotation"], "wozkit:offshore");
    let reqs = r["QualificationRequirements"].as_array().unwrap();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["QualificationTypeId"], "00000000000000000071");
    assert_eq!(reqs[0]["Comparator"], "In");
    assert_eq!(reqs[0]["LocaleValues"][0]["Country"], "US");
    assert_eq!(reqs[0]["LocaleValues"][1]["Country"], "GB");
    assert_eq!(reqs[1]["QualificationTypeId"], "000000000000000000L0");
    assert_eq!(reqs[1]["Comparator"], "GreaterThanOrEqualTo");
    assert_eq!(reqs[1]["IntegerValues"][0], 97);
    assert_eq!(reqs[2]["QualificationTypeId"], qual.as_str());
    assert_eq!(reqs[2]["Comparator"], "DoesNotExist");

    // A link that is not https is refused before anything is sent.
    let calls = mock.calls().len();
    let e = client
        .create_hit(&spec("http://woz.example.org/join?study=offshore"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("https://"), "{e}");
    assert_eq!(mock.calls().len(), calls);
}

#[tokio::test]
async fn assignments_are_listed_over_every_page() {
    let (mock, client) = setup().await;
    let hit = client
        .create_hit(&spec("https://woz.example.org/join?study=s"))
        .await
        .unwrap();
    let mut want = vec![];
    for i in 0..237 {
        let code = format!("CODE{i}");
        want.push(mock.submit(
            &hit.hit_id,
            &format!("W{i}"),
            &answer_document(&[("assignmentId", "x"), ("completionCode", &code)]),
        ));
    }
    let got = client.list_assignments(&hit.hit_id).await.unwrap();
    assert_eq!(
        got.iter().map(|a| a.id.clone()).collect::<Vec<_>>(),
        want,
        "every assignment once, in order"
    );
    assert_eq!(got[5].worker_id, "W5");
    assert_eq!(got[5].status, "Submitted");
    assert_eq!(got[5].completion_code.as_deref(), Some("CODE5"));
    let pages = mock
        .operations()
        .iter()
        .filter(|o| *o == "ListAssignmentsForHIT")
        .count();
    assert_eq!(pages, 3, "237 assignments at 100 a page");
    // The Payer lists the study's HITs.
    let payer = client.clone().with_hits(vec![hit.hit_id.clone()]);
    assert_eq!(payer.submissions().await.unwrap().len(), 237);
    // An unknown HIT is MTurk's refusal, with its message.
    let e = client.list_assignments("NOPE").await.unwrap_err();
    assert!(matches!(e, PlatformError::Refused { .. }), "{e:?}");
    assert!(e.to_string().contains("NOPE"), "{e}");
}

#[tokio::test]
async fn only_a_submitted_assignment_is_approved_or_rejected() {
    let (mock, client) = setup().await;
    let hit = client
        .create_hit(&spec("https://woz.example.org/join?study=s"))
        .await
        .unwrap();
    let a = mock.submit(&hit.hit_id, "W1", &answer_document(&[]));
    let b = mock.submit(&hit.hit_id, "W2", &answer_document(&[]));
    client.approve(&a, Some("Thank you")).await.unwrap();
    assert_eq!(mock.status(&a).as_deref(), Some("Approved"));
    // Approved already (a lost answer, a second press): a success, and nothing changes.
    client.approve(&a, None).await.unwrap();
    assert_eq!(mock.status(&a).as_deref(), Some("Approved"));
    let e = client.reject(&a, "late").await.unwrap_err();
    assert!(e.to_string().contains("Submitted"), "{e}");
    assert_eq!(mock.status(&a).as_deref(), Some("Approved"));

    // A rejection needs feedback; it is sent and kept.
    assert!(client.reject(&b, "  ").await.is_err());
    Payer::reject(&client, &b, "The completion code was missing.")
        .await
        .unwrap();
    assert_eq!(mock.status(&b).as_deref(), Some("Rejected"));
    let last = mock.calls().pop().unwrap();
    assert_eq!(last.operation, "RejectAssignment");
    assert_eq!(
        last.body["RequesterFeedback"],
        "The completion code was missing."
    );
    assert!(Payer::approve(&client, &b).await.is_err());
}

#[tokio::test]
async fn bonuses_are_paid_to_the_cent_and_never_twice() {
    let (mock, client) = setup().await;
    let hit = client
        .create_hit(&spec("https://woz.example.org/join?study=s"))
        .await
        .unwrap();
    let a = mock.submit(&hit.hit_id, "W1", &answer_document(&[]));
    let b = mock.submit(&hit.hit_id, "W2", &answer_document(&[]));
    let out = client
        .send_bonus("W1", &a, 105, "Goal reached")
        .await
        .unwrap();
    assert_eq!(out, BonusOutcome::Paid);
    let sent = mock.calls().pop().unwrap();
    assert_eq!(sent.body["BonusAmount"], "1.05");
    assert!(sent.body["UniqueRequestToken"].as_str().unwrap().len() <= 64);
    // The same bonus again (a retry): MTurk refuses the token and nothing more is paid.
    let again = client
        .send_bonus("W1", &a, 105, "Goal reached")
        .await
        .unwrap();
    assert_eq!(again, BonusOutcome::AlreadyPaid);
    assert_eq!(
        client.send_bonus("W1", &a, 0, "x").await.unwrap(),
        BonusOutcome::Nothing
    );
    // Through the Payer, several at once; the one paid already stays paid once.
    let results = client
        .bonus(&[
            Bonus {
                worker_id: "W2".into(),
                submission_id: b.clone(),
                cents: 7,
                reason: "Minutes".into(),
            },
            Bonus {
                worker_id: "W1".into(),
                submission_id: a.clone(),
                cents: 105,
                reason: "Goal reached".into(),
            },
        ])
        .await;
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let paid = mock.bonus_cents();
    assert_eq!(paid.get("W1"), Some(&105));
    assert_eq!(paid.get("W2"), Some(&7));
    assert_eq!(mock.bonuses().len(), 2);
    // A bonus for another worker's assignment is refused.
    let e = client.send_bonus("W2", &a, 10, "x").await.unwrap_err();
    assert!(e.to_string().contains("not done by worker"), "{e}");
}

#[tokio::test]
async fn workers_are_blocked_and_qualified() {
    let (mock, client) = setup().await;
    Payer::block(&client, "W9", "Pasted the same text everywhere")
        .await
        .unwrap();
    assert_eq!(
        mock.blocks().get("W9").map(String::as_str),
        Some("Pasted the same text everywhere")
    );
    assert!(client.block("W8", "").await.is_err());
    let q = client
        .create_qualification_type("wozkit wizards", "Good wizards", Some("wizard"))
        .await
        .unwrap();
    assert_eq!(
        mock.qualification_types().get(&q).map(String::as_str),
        Some("wozkit wizards")
    );
    client
        .grant_qualification(&q, "W1", 1, false)
        .await
        .unwrap();
    assert_eq!(mock.grants(), vec![(q.clone(), "W1".to_string(), 1)]);
    // A second type with the same name is MTurk's error.
    let e = client
        .create_qualification_type("wozkit wizards", "again", None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already created"), "{e}");
    // Unknown credentials are refused by the service.
    let other = MTurk::new(Endpoint::Custom(mock.url()), "AKIDOTHER", "s", None).unwrap();
    assert!(other.block("W1", "x").await.is_err());
}

/// Three bonuses of three workers' assignments of one HIT: `(mock, client, bonuses)`.
async fn three_bonuses() -> (MockMTurk, MTurk, Vec<Bonus>) {
    let (mock, client) = setup().await;
    let hit = client
        .create_hit(&spec("https://woz.example.org/join?study=s"))
        .await
        .unwrap();
    let bonuses = (1..=3)
        .map(|n| {
            let worker = format!("W{n}");
            Bonus {
                submission_id: mock.submit(&hit.hit_id, &worker, &answer_document(&[])),
                worker_id: worker,
                cents: 100 + n,
                reason: "Goal reached".into(),
            }
        })
        .collect();
    (mock, client, bonuses)
}

#[tokio::test]
async fn a_bonus_failing_in_the_middle_leaves_the_others_paid_and_says_which() {
    let (mock, client, bonuses) = three_bonuses().await;
    mock.fail_when(
        "SendBonus",
        "AssignmentId",
        &bonuses[1].submission_id,
        "This operation can be called with a status of: Approved",
    );
    let results = Payer::bonus(&client, &bonuses).await;
    assert_eq!(results.len(), 3, "one result per bonus, in order");
    assert!(results[0].is_ok(), "{results:?}");
    let e = results[1]
        .as_ref()
        .expect_err("the middle bonus was refused");
    assert!(matches!(e, PlatformError::Refused { .. }), "{e:?}");
    assert!(e.to_string().contains("W2"), "{e}");
    assert!(
        results[2].is_ok(),
        "the bonus after the failure is sent: {results:?}"
    );
    let paid = mock.bonus_cents();
    assert_eq!(paid.get("W1"), Some(&101));
    assert_eq!(paid.get("W2"), None);
    assert_eq!(paid.get("W3"), Some(&103));
    // Sent again, the two paid ones are recognised by their tokens and only W2 is paid.
    let again = Payer::bonus(&client, &bonuses).await;
    assert!(again.iter().all(Result::is_ok), "{again:?}");
    assert_eq!(mock.bonuses().len(), 3);
    assert_eq!(mock.bonus_cents().get("W2"), Some(&102));
}

#[tokio::test]
async fn only_a_reused_token_counts_as_already_paid() {
    let (mock, client, bonuses) = three_bonuses().await;
    let b = &bonuses[0];
    // A refusal that says "already" but is not about the token is an error.
    mock.fail_when(
        "SendBonus",
        "AssignmentId",
        &b.submission_id,
        "This Requester has already reached the bonus limit for this assignment",
    );
    let e = client
        .send_bonus(&b.worker_id, &b.submission_id, b.cents, &b.reason)
        .await
        .expect_err("not a reused token");
    assert!(e.to_string().contains("bonus limit"), "{e}");
    // Nor is one that names the UniqueRequestToken for another reason.
    mock.fail_when(
        "SendBonus",
        "AssignmentId",
        &b.submission_id,
        "The value of UniqueRequestToken is not valid",
    );
    assert!(
        client
            .send_bonus(&b.worker_id, &b.submission_id, b.cents, &b.reason)
            .await
            .is_err()
    );
    assert!(mock.bonuses().is_empty());
    // Paid, then sent again: MTurk's answer to the reused token is "already paid".
    let out = client
        .send_bonus(&b.worker_id, &b.submission_id, b.cents, &b.reason)
        .await
        .unwrap();
    assert_eq!(out, BonusOutcome::Paid);
    let again = client
        .send_bonus(&b.worker_id, &b.submission_id, b.cents, &b.reason)
        .await
        .unwrap();
    assert_eq!(again, BonusOutcome::AlreadyPaid);
    let answer = mock.calls().pop().unwrap();
    assert_eq!(answer.operation, "SendBonus");
    assert_eq!(mock.bonuses().len(), 1, "paid once");
}
