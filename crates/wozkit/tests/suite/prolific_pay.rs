//! `wozkit prolific pay` as a researcher runs it, against the local Prolific mock: simulated
//! Prolific workers go through an evaluation study on the real `wozkit serve`; the mock holds
//! their submissions with the codes they entered (one under a SESSION_ID wozkit did not record,
//! plus a worker wozkit never saw). After the payment the mock approved exactly the submissions
//! wozkit's record vouches for (whatever code was typed) and paid
//! each of those workers, to the cent, what the payment table gives above the base; a second run
//! sends nothing more.

use crate::common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use common::{Server, cents, payment_table as table, wozkit};
use wozkit_platforms::prolific::mock::{MockProlific, ProlificSubmission};

const STUDY: &str = "prolific-compare";
const PROLIFIC_STUDY: &str = "crowd";
const TOKEN: &str = "test-token-5b1e";

/// A comparison study of seven pairs, one judgment each, two items per worker, paid a base, per
/// judged item and a fixed amount to those left without items.
fn study_yaml() -> String {
    common::compare_study_yaml(
        &format!("id: {STUDY}\ntitle: Prolific compare\n"),
        7,
        "{currency: GBP, base: 1.00, per_item: 0.15, per_minute: 0.07, no_partner: 0.35}",
    )
}

fn prolific(args: &[&str], api: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .arg("prolific")
        .args(args)
        .env_remove("WOZKIT_DATA")
        .env("PROLIFIC_TOKEN", TOKEN)
        .env("PROLIFIC_API_URL", api)
        .stdin(Stdio::null())
        .output()
        .expect("wozkit runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn prolific_pay_pays_the_payment_table_to_the_cent_once() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, study_yaml()).expect("study written");
    let mut server = Server::in_dir(study.clone(), tmp.path());
    server.start();
    let url = format!("http://{}", server.addr);
    let (code, out, err) = wozkit(&[
        "crowd",
        "--url",
        &url,
        "--study",
        STUDY,
        "--workers",
        "4",
        "--concurrency",
        "1",
        "--seed",
        "7",
    ]);
    assert_eq!(code, 0, "wozkit crowd failed:\n{out}\n{err}");
    assert!(server.stop(), "the server did not stop cleanly");
    let data = server.data.to_string_lossy().into_owned();
    let study_arg = study.to_string_lossy().into_owned();

    let rows = table(&study_arg, &data);
    let with_code: Vec<_> = rows
        .iter()
        .filter(|r| !r["completion_code"].is_empty())
        .collect();
    assert!(with_code.len() >= 4, "workers with codes: {rows:?}");
    // The submissions Prolific holds: each worker's id, the submission id wozkit recorded from
    // the entry link, and the code they entered; the first worker typed a wrong code.
    let mut subs = vec![];
    for (n, r) in with_code.iter().enumerate() {
        let session = r["crowd_ids"]
            .split(';')
            .find_map(|kv| kv.strip_prefix("SESSION_ID="))
            .expect("SESSION_ID among the crowd ids")
            .to_string();
        // The first worker's submission is not the one wozkit recorded (another SESSION_ID),
        // though they typed their own code: wozkit's record decides, not the code.
        subs.push(ProlificSubmission {
            id: if n == 0 {
                "not-the-recorded-session".into()
            } else {
                session
            },
            participant_id: r["worker_id"].clone(),
            status: "AWAITING REVIEW".into(),
            study_code: Some(if n == 0 {
                r["completion_code"].clone()
            } else {
                "C1K8Q2ZD".into()
            }),
            started_at: None,
            completed_at: None,
        });
    }
    subs.push(ProlificSubmission {
        id: "stranger-session".into(),
        participant_id: "stranger".into(),
        status: "AWAITING REVIEW".into(),
        study_code: Some(with_code[1]["completion_code"].clone()),
        started_at: None,
        completed_at: None,
    });
    let wrong_worker = with_code[0]["worker_id"].clone();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mock = rt
        .block_on(MockProlific::start(TOKEN, PROLIFIC_STUDY, subs.clone()))
        .expect("mock starts");
    mock.set_page_size(2);
    let api = mock.url();

    // The submissions with their codes checked.
    let (code, out, err) = prolific(
        &[
            "submissions",
            "--prolific-study",
            PROLIFIC_STUDY,
            "--data",
            &data,
        ],
        &api,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let line_of = |who: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(who))
            .unwrap_or_else(|| panic!("no line of {who}:\n{out}"))
            .to_string()
    };
    assert!(
        line_of(&wrong_worker).contains("wrong: wozkit knows this worker under SESSION_ID"),
        "{out}"
    );
    assert!(
        line_of("stranger").contains("worker unknown to wozkit"),
        "{out}"
    );
    assert!(
        line_of(&with_code[1]["worker_id"]).contains("valid ("),
        "{out}"
    );

    // A dry run sends no decision and no payment.
    let pay_args = [
        "pay",
        "--study",
        &study_arg,
        "--prolific-study",
        PROLIFIC_STUDY,
        "--data",
        &data,
        "--bonus-from",
        "extra",
    ];
    let mut dry = pay_args.to_vec();
    dry.push("--dry-run");
    let (code, out, err) = prolific(&dry, &api);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("would approve"), "{out}");
    assert!(mock.requests().iter().all(|r| r.method == "GET"));
    assert!(mock.paid_cents().is_empty());

    // The bonus payment is refused after its set-up (a 4xx: certainly not paid; a 5xx or a
    // lost answer would be resolved by asking Prolific, see tests/pay_once.rs of
    // wozkit-platforms): the approvals stand, nothing is paid, and the error names the request.
    mock.fail_when("/pay/", 402);
    let (code, out, err) = prolific(&pay_args, &api);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(err.contains("POST /api/v1/bulk-bonus-payments/"), "{err}");
    assert!(err.contains("refused (402)"), "{err}");
    assert!(mock.paid_cents().is_empty());

    // Again: the approvals are not sent twice, the bonuses are set up anew and paid.
    let (code, out, err) = prolific(&pay_args, &api);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.contains("approve "), "approved before: {out}");
    eprintln!("{out}");

    // Approved: exactly the submissions with valid codes.
    for s in &subs {
        let want = if s.participant_id == wrong_worker || s.participant_id == "stranger" {
            "AWAITING REVIEW"
        } else {
            "APPROVED"
        };
        assert_eq!(
            mock.status(&s.id).as_deref(),
            Some(want),
            "{}: {out}",
            s.participant_id
        );
    }
    // Paid: what the table gives above the base, per worker, to the cent.
    let mut owed: BTreeMap<String, u64> = BTreeMap::new();
    for r in &with_code {
        let extra = cents(&r["total"]) - cents(&r["base"]);
        if r["worker_id"] != wrong_worker && extra > 0 {
            *owed.entry(r["worker_id"].clone()).or_default() += extra;
        }
    }
    assert!(!owed.is_empty(), "nothing owed: {rows:?}");
    assert_eq!(mock.paid_cents(), owed, "{out}");
    let posts = mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(
        posts, 5,
        "bulk approve, bonus set-up, failed payment; bonus set-up, payment"
    );

    // Again: nothing new is sent.
    let (code, out, err) = prolific(&pay_args, &api);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("nothing new"), "{out}");
    assert_eq!(mock.paid_cents(), owed);
    assert_eq!(
        mock.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count(),
        posts,
        "no request that changes anything"
    );
}
