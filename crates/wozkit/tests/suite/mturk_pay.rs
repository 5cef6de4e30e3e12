//! `wozkit mturk create-hit` and `wozkit mturk pay` as a researcher runs them, against the local
//! MTurk mock: a HIT is created for an evaluation study; MTurk workers finished it (their entry
//! links carried workerId, assignmentId, hitId and turkSubmitTo, as MTurk appends them) and
//! submitted their assignments, one with a code that is not theirs, plus a worker wozkit never
//! saw. After `pay` the mock approved exactly the assignments with valid codes and paid each of
//! those workers, reward plus bonuses, to the cent what the payment table gives; a second run
//! pays nothing more.

#![cfg(feature = "mturk")]

use crate::common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use common::{cents, payment_table as table};
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_platforms::mturk::mock::{Fault, MockAssignment, MockMTurk, answer_document};
use wozkit_store::{NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform};

const STUDY: &str = "mturk-compare";
const KEY: &str = "AKIDWOZKITPAY";

fn study_yaml() -> String {
    common::compare_study_yaml(
        &format!("id: {STUDY}\ntitle: MTurk compare\ndescription: Compare two replies.\n"),
        3,
        "{currency: USD, base: 1.00, per_minute: 0.07, max_minutes: 30, no_partner: 0.35}",
    )
}

fn mturk(args: &[&str], endpoint: &str) -> (i32, String, String) {
    mturk_env(args, endpoint, &[])
}

/// `wozkit mturk` with more environment variables.
fn mturk_env(args: &[&str], endpoint: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .arg("mturk")
        .args(args)
        .envs(env.iter().copied())
        .env_remove("WOZKIT_DATA")
        .env_remove("WOZKIT_MTURK_SANDBOX")
        .env_remove("AWS_SESSION_TOKEN")
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", "test-secret")
        .env("WOZKIT_MTURK_ENDPOINT", endpoint)
        .stdin(Stdio::null())
        .output()
        .expect("wozkit runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Workers as the entry link records them after finishing: an MTurk participant with the ids
/// MTurk appended, a participant log from entry to the completion code, on the completion page.
async fn finished_workers(data: &str, hit: &str, workers: &[(&str, &str, &str, u64)]) {
    let store = wozkit_store::open(data).await.expect("store opens");
    for (worker, assignment, code, minutes) in workers {
        let id = format!("p-{worker}");
        let created = 1_700_000_000_000u64;
        let ids: BTreeMap<String, String> = [
            ("workerId", *worker),
            ("assignmentId", *assignment),
            ("hitId", hit),
            ("turkSubmitTo", "https://workersandbox.mturk.com"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        store
            .create_participant(NewParticipant {
                id: id.clone(),
                token_hash: format!("hash-{worker}"),
                study_id: STUDY.into(),
                platform: Platform::Mturk,
                worker_id: Some(worker.to_string()),
                external_ids: ids,
                flow_step: "0:consent".into(),
                created_at_ms: created,
            })
            .await
            .expect("participant");
        let log = format!("log-{id}");
        store
            .open_participant_log(NewSession {
                id: log.clone(),
                study_id: STUDY.into(),
                study_version: "1".into(),
                seed: 1,
                created_at_ms: created,
            })
            .await
            .expect("log");
        let actor = Actor::Participant {
            role: Role::User,
            participant: Some(id.clone()),
        };
        store
            .append(
                &log,
                vec![
                    NewEvent {
                        actor: actor.clone(),
                        kind: EventKind::ParticipantLogStarted {
                            participant: id.clone(),
                            study: STUDY.into(),
                            study_version: "1".into(),
                        },
                        at_ms: created,
                    },
                    NewEvent {
                        actor,
                        kind: EventKind::CompletionIssued {
                            role: Role::User,
                            code: code.to_string(),
                            no_partner: false,
                        },
                        at_ms: created + minutes * 60_000 + 1_234,
                    },
                ],
            )
            .await
            .expect("events");
        store
            .update_participant(
                &id,
                ParticipantPatch {
                    flow_step: Some("2:completion".into()),
                    completion_code: Some(Some(code.to_string())),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("code");
    }
    store.close().await;
}

#[test]
fn mturk_pay_pays_the_payment_table_to_the_cent_once() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, study_yaml()).expect("study written");
    let study_arg = study.to_string_lossy().into_owned();
    let data = tmp.path().join("data").to_string_lossy().into_owned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mock = rt.block_on(MockMTurk::start(KEY)).expect("mock starts");
    let endpoint = mock.url();

    // The HIT: reward 0.35 (the study's no_partner rate, by default), recorded in the store.
    let (code, out, err) = mturk(
        &[
            "create-hit",
            "--study",
            &study_arg,
            "--url",
            "https://woz.example.org",
            "--assignments",
            "5",
            "--locale",
            "US,GB",
            "--approval-rate",
            "95",
            "--data",
            &data,
        ],
        &endpoint,
    );
    assert_eq!(code, 0, "create-hit failed:\n{out}\n{err}");
    let hits = mock.hits();
    assert_eq!(hits.len(), 1);
    let hit = hits[0].id.clone();
    assert!(out.contains(&hit), "{out}");
    assert_eq!(hits[0].reward_cents, 35);
    assert!(
        hits[0].question.contains(&format!(
            "<ExternalURL>https://woz.example.org/join?study={STUDY}</ExternalURL>"
        )),
        "{}",
        hits[0].question
    );

    // Three workers finished (12, 20 and 45 minutes: the last is capped at 30), a fourth
    // submitted a code that is not theirs, and a stranger submitted too.
    let workers = [
        ("W1", "ASSIGN1", "CODEW1", 12),
        ("W2", "ASSIGN2", "CODEW2", 20),
        ("W3", "ASSIGN3", "CODEW3", 45),
        ("W4", "ASSIGN4", "CODEW4", 5),
    ];
    rt.block_on(finished_workers(&data, &hit, &workers));
    for (n, (w, a, c, _)) in workers.iter().enumerate() {
        let typed = if *w == "W4" { "CODEW1" } else { c };
        mock.add_assignment(MockAssignment {
            id: a.to_string(),
            hit_id: hit.clone(),
            worker_id: w.to_string(),
            status: "Submitted".into(),
            answer: answer_document(&[("assignmentId", a), ("completionCode", typed)]),
            feedback: None,
            submit_time: 1_700_000_000 + n as i64,
        });
    }
    let stranger = mock.submit(
        &hit,
        "STRANGER",
        &answer_document(&[("completionCode", "CODEW2")]),
    );

    let rows = table(&study_arg, &data);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let total_of: BTreeMap<String, u64> = rows
        .iter()
        .map(|r| (r["worker_id"].clone(), cents(&r["total"])))
        .collect();
    assert!(
        total_of.values().all(|t| *t > 35),
        "every total above the reward: {total_of:?}"
    );

    // A dry run changes nothing.
    let (code, out, err) = mturk(
        &["pay", "--study", &study_arg, "--data", &data, "--dry-run"],
        &endpoint,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("would approve ASSIGN1"), "{out}");
    assert!(mock.bonuses().is_empty());
    assert!(mock.assignments().iter().all(|a| a.status == "Submitted"));

    let (code, out, err) = mturk(&["pay", "--study", &study_arg, "--data", &data], &endpoint);
    assert_eq!(code, 0, "pay failed:\n{out}\n{err}");
    for (w, a, _, _) in &workers[..3] {
        assert_eq!(mock.status(a).as_deref(), Some("Approved"), "{w}: {out}");
    }
    assert_eq!(
        mock.status("ASSIGN4").as_deref(),
        Some("Submitted"),
        "{out}"
    );
    assert_eq!(
        mock.status(&stranger).as_deref(),
        Some("Submitted"),
        "{out}"
    );
    assert!(out.contains("left for review: ASSIGN4"), "{out}");
    assert!(out.contains("worker unknown to wozkit"), "{out}");
    let rewards = mock.reward_cents();
    let bonuses = mock.bonus_cents();
    for (w, _, _, _) in &workers[..3] {
        let paid = rewards.get(*w).copied().unwrap_or(0) + bonuses.get(*w).copied().unwrap_or(0);
        assert_eq!(paid, total_of[*w], "{w}: reward + bonus against the table");
    }
    assert!(!bonuses.contains_key("W4") && !bonuses.contains_key("STRANGER"));
    let bonus_count = mock.bonuses().len();
    let calls = mock.calls().len();

    // A second run pays nothing more and approves nothing.
    let (code, out, err) = mturk(&["pay", "--study", &study_arg, "--data", &data], &endpoint);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(mock.bonuses().len(), bonus_count, "{out}");
    assert_eq!(mock.bonus_cents(), bonuses);
    let new_ops: Vec<String> = mock.operations()[calls..].to_vec();
    assert!(
        new_ops.iter().all(|o| o == "ListAssignmentsForHIT"),
        "only listing on the second run: {new_ops:?}"
    );

    // Assignments are listed from the recorded HIT.
    let (code, out, err) = mturk(
        &["assignments", "--study", STUDY, "--data", &data],
        &endpoint,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("ASSIGN3") && out.contains("Approved"), "{out}");
    assert!(out.contains("5 assignment(s) of 1 HIT(s)"), "{out}");
}

/// MTurk pays a bonus and answers only after the client gave up: `pay` looks the assignment's
/// bonuses up (ListBonusPayments), finds it paid and records it so; later runs send no
/// SendBonus at all, so MTurk's 24 hours of keeping UniqueRequestTokens play no part.
#[test]
fn mturk_pay_answered_late_is_looked_up_and_paid_once() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, study_yaml()).expect("study written");
    let study_arg = study.to_string_lossy().into_owned();
    let data = tmp.path().join("data").to_string_lossy().into_owned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mock = rt.block_on(MockMTurk::start(KEY)).expect("mock starts");
    let endpoint = mock.url();
    let (code, out, err) = mturk(
        &[
            "create-hit",
            "--study",
            &study_arg,
            "--url",
            "https://woz.example.org",
            "--data",
            &data,
        ],
        &endpoint,
    );
    assert_eq!(code, 0, "create-hit failed:\n{out}\n{err}");
    let hit = mock.hits()[0].id.clone();
    rt.block_on(finished_workers(
        &data,
        &hit,
        &[("W1", "ASSIGN1", "CODEW1", 12)],
    ));
    mock.add_assignment(MockAssignment {
        id: "ASSIGN1".into(),
        hit_id: hit.clone(),
        worker_id: "W1".into(),
        status: "Submitted".into(),
        answer: answer_document(&[("assignmentId", "ASSIGN1"), ("completionCode", "CODEW1")]),
        feedback: None,
        submit_time: 1_700_000_000,
    });
    // The client gives up after 2 s; MTurk answers after 20 s (having paid at once).
    let late = [("WOZKIT_MTURK_TIMEOUT_MS", "2000")];
    mock.after_commit(
        "SendBonus",
        Fault::Delay(std::time::Duration::from_secs(20)),
    );
    let sends = |m: &MockMTurk| m.operations().iter().filter(|o| *o == "SendBonus").count();

    let (code, out, err) = mturk_env(
        &["pay", "--study", &study_arg, "--data", &data],
        &endpoint,
        &late,
    );
    assert_eq!(code, 0, "pay failed:\n{out}\n{err}");
    let total = cents(&table(&study_arg, &data)[0]["total"]);
    let paid = |m: &MockMTurk| {
        m.reward_cents().get("W1").copied().unwrap_or(0)
            + m.bonus_cents().get("W1").copied().unwrap_or(0)
    };
    assert_eq!(paid(&mock), total, "{out}");
    assert_eq!(mock.bonuses().len(), 1, "one bonus paid: {out}");
    let sent = sends(&mock);

    // Again (another day): nothing sent, nothing paid.
    let (code, out, err) = mturk_env(
        &["pay", "--study", &study_arg, "--data", &data],
        &endpoint,
        &late,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(sends(&mock), sent, "no SendBonus again: {out}");
    assert_eq!(paid(&mock), total);
    assert!(out.contains("pay 0.00 in bonuses"), "{out}");
}
