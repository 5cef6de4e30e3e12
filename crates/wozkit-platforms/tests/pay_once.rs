//! Paying once against the mocks made to lose answers: the mock does the payment, then answers
//! after the client gave up or drops the connection; the payment is carried on (a retry, a
//! restart with the same record) and the worker is paid exactly once, by what the mock
//! recorded. Two callers paying one record at once: one pays, the other is told it is in
//! progress.

use std::sync::Arc;
use std::time::Duration;

use wozkit_platforms::mturk::mock::{MockAssignment, MockMTurk};
use wozkit_platforms::mturk::{Endpoint, MTurk};
use wozkit_platforms::once::{
    Ledger, MemoryLedger, NewPayment, Outcome, Policy, Stage, pay_once, read,
};
use wozkit_platforms::prolific::mock::{Fault, MockProlific, ProlificSubmission};
use wozkit_platforms::prolific::{AWAITING_REVIEW, Prolific};
use wozkit_platforms::{Bonus, Payer};

const TOKEN: &str = "tok-once";
const STUDY: &str = "PST-once";
const KEY: &str = "AKIDONCE";
const TIMEOUT: Duration = Duration::from_millis(500);
const LATE: Fault = Fault::Delay(Duration::from_millis(1500));

fn sub(n: usize) -> ProlificSubmission {
    ProlificSubmission {
        id: format!("sub{n}"),
        participant_id: format!("pid{n}"),
        status: AWAITING_REVIEW.into(),
        study_code: None,
        started_at: None,
        completed_at: None,
    }
}

fn bonus(n: usize, cents: u64) -> Bonus {
    Bonus {
        worker_id: format!("pid{n}"),
        submission_id: format!("sub{n}"),
        cents,
        reason: "Thank you".into(),
    }
}

async fn prolific() -> (MockProlific, Prolific) {
    let mock = MockProlific::start(TOKEN, STUDY, vec![sub(1), sub(2)])
        .await
        .unwrap();
    let client = Prolific::new(&mock.url(), TOKEN, STUDY)
        .unwrap()
        .with_timeout(TIMEOUT)
        .unwrap();
    (mock, client)
}

fn new<'a>(bonuses: &'a [Bonus]) -> Option<NewPayment<'a>> {
    Some(NewPayment {
        bonuses,
        tag: "test",
        replaces: None,
    })
}

fn settled(o: &Outcome) -> &wozkit_platforms::once::PaymentRecord {
    match o {
        Outcome::Settled(r) => r,
        Outcome::Pending { why, .. } => panic!("not settled: {why}"),
    }
}

fn pays(mock: &MockProlific) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.path.ends_with("/pay/"))
        .count()
}

fn setups(mock: &MockProlific) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.path.contains("/bonus-payments/"))
        .count()
}

/// Prolific pays, then answers after the client's timeout: the same call asks the
/// submissions, sees the bonuses and settles; a second run (a restart) pays nothing more.
#[tokio::test]
async fn a_prolific_pay_answered_too_late_is_found_paid_and_not_paid_again() {
    for fault in [LATE, Fault::Disconnect] {
        let (mock, client) = prolific().await;
        let ledger = MemoryLedger::default();
        let bonuses = [bonus(1, 125), bonus(2, 40)];
        mock.after_commit("/pay/", fault);
        let first = pay_once(&client, &ledger, "k", new(&bonuses), "a", Policy::default())
            .await
            .unwrap();
        let rec = settled(&first);
        assert_eq!(rec.stage, Stage::Sent, "{fault:?}: {}", rec.note);
        assert_eq!(rec.paid_cents(), 165);
        // A restart: another process carries the record on (and a new payment of the same
        // bonuses replacing nothing is not started over it).
        let again = pay_once(&client, &ledger, "k", new(&bonuses), "b", Policy::default())
            .await
            .unwrap();
        assert_eq!(settled(&again).stage, Stage::Sent);
        assert_eq!(mock.paid_cents().get("pid1"), Some(&125), "{fault:?}");
        assert_eq!(mock.paid_cents().get("pid2"), Some(&40), "{fault:?}");
        assert_eq!((setups(&mock), pays(&mock)), (1, 1), "{fault:?}");
    }
}

/// The pay request fails with a 5xx before Prolific does anything: nothing shows, so nothing
/// is sent again until the settle time has passed; then the recorded set-up payment (not a new
/// one) is paid, once.
#[tokio::test]
async fn an_unpaid_uncertain_prolific_payment_reuses_its_set_up_id_after_the_settle_time() {
    let (mock, client) = prolific().await;
    let ledger = MemoryLedger::default();
    let bonuses = [bonus(1, 100)];
    mock.fail_when("/pay/", 503);
    let first = pay_once(&client, &ledger, "k", new(&bonuses), "a", Policy::default())
        .await
        .unwrap();
    assert!(matches!(first, Outcome::Pending { .. }), "{first:?}");
    let waiting = pay_once(&client, &ledger, "k", None, "b", Policy::default())
        .await
        .unwrap();
    assert!(matches!(waiting, Outcome::Pending { .. }), "{waiting:?}");
    assert_eq!(mock.paid_cents().get("pid1"), None);
    let now = pay_once(&client, &ledger, "k", None, "b", Policy { settle_ms: 0 })
        .await
        .unwrap();
    assert_eq!(settled(&now).stage, Stage::Sent);
    assert_eq!(mock.paid_cents().get("pid1"), Some(&100));
    assert_eq!(setups(&mock), 1, "the set-up id was reused");
    assert_eq!(pays(&mock), 2, "one failed pay, one that paid");
}

/// Two callers pay one record at the same time: one pays; the other pays nothing.
#[tokio::test]
async fn two_callers_at_once_pay_once() {
    let (mock, client) = prolific().await;
    let client = Arc::new(client);
    let ledger = Arc::new(MemoryLedger::default());
    let bonuses = Arc::new(vec![bonus(1, 70), bonus(2, 30)]);
    let mut tasks = vec![];
    for who in ["alice", "bob"] {
        let (client, ledger, bonuses) = (client.clone(), ledger.clone(), bonuses.clone());
        tasks.push(tokio::spawn(async move {
            pay_once(
                client.as_ref(),
                ledger.as_ref(),
                "k",
                new(&bonuses),
                who,
                Policy::default(),
            )
            .await
            .unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rec = read(ledger.as_ref() as &dyn Ledger, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.stage, Stage::Sent);
    assert_eq!(mock.paid_cents().values().sum::<u64>(), 100);
    assert_eq!((setups(&mock), pays(&mock)), (1, 1));
}

/// MTurk pays a bonus, then answers after the client's timeout (or drops the connection): the
/// payment is found by ListBonusPayments (or by its token) and never paid twice, also when it
/// is carried on by another caller.
#[tokio::test]
async fn an_mturk_bonus_answered_too_late_is_paid_once() {
    for fault in [LATE, Fault::Disconnect] {
        let mock = MockMTurk::start(KEY).await.unwrap();
        mock.add_assignment(MockAssignment {
            id: "3AONCE".into(),
            hit_id: "3HONCE".into(),
            worker_id: "W1".into(),
            status: "Submitted".into(),
            answer: String::new(),
            feedback: None,
            submit_time: 1_700_000_000,
        });
        let client = MTurk::new(Endpoint::Custom(mock.url()), KEY, "secret", None)
            .unwrap()
            .with_timeout(TIMEOUT);
        let ledger = MemoryLedger::default();
        let bonuses = [Bonus {
            worker_id: "W1".into(),
            submission_id: "3AONCE".into(),
            cents: 55,
            reason: "Thank you".into(),
        }];
        mock.after_commit("SendBonus", fault);
        let first = pay_once(&client, &ledger, "k", new(&bonuses), "a", Policy::default())
            .await
            .unwrap();
        assert_eq!(settled(&first).stage, Stage::Sent, "{fault:?}");
        let again = pay_once(&client, &ledger, "k", None, "b", Policy { settle_ms: 0 })
            .await
            .unwrap();
        assert_eq!(settled(&again).paid_cents(), 55);
        assert_eq!(mock.bonus_cents().get("W1"), Some(&55), "{fault:?}");
        // Approving twice (an answer lost, a second press) is one approval, and a success.
        client.approve("3AONCE", None).await.unwrap();
        client.approve("3AONCE", None).await.unwrap();
        assert_eq!(mock.status("3AONCE").as_deref(), Some("Approved"));
        let _ = client.platform();
    }
}
