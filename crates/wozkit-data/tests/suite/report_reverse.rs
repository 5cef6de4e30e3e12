//! Reverse-coded questionnaire items in the report: live sessions written through the store with
//! known answers, the report's means and Mann-Whitney U checked against numbers worked out by
//! hand below.
//!
//! The study has a 5-point item `hard` marked `reverse: true` and a plain 5-point item `good`.
//! User answers (raw):
//!
//! | session | goal reached | hard | good |
//! |---------|--------------|------|------|
//! | s1      | yes          | 1    | 4    |
//! | s2      | yes          | 2    | 5    |
//! | s3      | no           | 4    | 2    |
//! | s4      | no           | 5    | 1    |
//! | s5      | no           | 5    | 1    |
//!
//! Reversed on 1..5 (6 − x), `hard` becomes 5, 4 | 2, 1, 1: mean 13/5 = 2.6 overall, 4.5 for
//! reached and 4/3 for not reached (the raw mean would be 17/5 = 3.4). One-tailed U of reached
//! over not reached: every reached score beats every other, so U = 2·3 = 6 (raw: U = 0). Ranks of
//! 1, 1, 2, 4, 5 are 1.5, 1.5, 3, 4, 5; one tie of 2 gives variance 2·3/12·(6 − 6/20) = 2.85,
//! z = (6 − 3 − 0.5)/√2.85 = 1.48087, p = 1 − Φ(z) = 0.0693203.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::load::{StudySource, load_text};
use wozkit_core::model::Study;
use wozkit_data::report::html::render_html;
use wozkit_data::report::questionnaire::Questionnaires;
use wozkit_data::report::summary::Question;
use wozkit_data::report::{Report, ReportOptions, build_report};
use wozkit_store::{NewEvent, NewSession, Store};

const STUDY: &str = r#"
id: rev
title: Reverse-coded items
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
survey:
  questions:
    - {id: hard, text: It was hard., kind: likert, points: 5, reverse: true}
    - {id: good, text: It went well., kind: likert, points: 5}
"#;

/// (session, goal reached, hard, good)
const ANSWERS: [(&str, bool, u32, u32); 5] = [
    ("s1", true, 1, 4),
    ("s2", true, 2, 5),
    ("s3", false, 4, 2),
    ("s4", false, 5, 1),
    ("s5", false, 5, 1),
];

fn study() -> Study {
    match load_text("rev.yaml", STUDY, StudySource::Dir(".".into())) {
        Ok(s) => s.study,
        Err(e) => panic!("the test study does not load:\n{e}"),
    }
}

/// A played session: started in `study`, one message each way, ended, the user's answers.
async fn session(store: &dyn Store, id: &str, study: &str, reached: bool, answers: Value) {
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: study.into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let user = Actor::Participant {
        role: Role::User,
        participant: None,
    };
    let answers: IndexMap<String, Value> =
        serde_json::from_value(answers).expect("answers are an object");
    let kinds = [
        (
            Actor::System,
            EventKind::SessionStarted {
                study: study.into(),
                study_version: "1".into(),
                seed: 0,
                initial_state: "start".into(),
            },
        ),
        (
            user.clone(),
            EventKind::Message {
                role: Role::User,
                text: "hello there".into(),
                source: MessageSource::Free,
            },
        ),
        (
            Actor::System,
            EventKind::SessionEnded {
                reason: EndReason::Terminal,
                goal_reached: reached,
            },
        ),
        (
            user,
            EventKind::SurveyAnswered {
                role: Role::User,
                answers,
            },
        ),
    ];
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, (actor, kind))| NewEvent {
            actor,
            kind,
            at_ms: 1_000 + i as u64,
        })
        .collect();
    store.append(id, events).await.expect("append");
}

async fn store_with(sessions: &[(&str, bool, Value)]) -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    for (id, reached, answers) in sessions {
        session(&*store, id, "rev", *reached, answers.clone()).await;
    }
    (dir, store)
}

fn table() -> Vec<(&'static str, bool, Value)> {
    ANSWERS
        .iter()
        .map(|(id, reached, hard, good)| (*id, *reached, json!({"hard": hard, "good": good})))
        .collect()
}

async fn report(store: &dyn Store, questionnaires: Questionnaires) -> Report {
    let options = ReportOptions {
        questionnaires,
        ..ReportOptions::default()
    };
    build_report(store, &options).await.expect("report")
}

fn item<'a>(report: &'a Report, name: &str) -> &'a Question {
    report
        .questionnaire
        .iter()
        .find(|q| q.item == name)
        .unwrap_or_else(|| panic!("no item {name} in {:?}", report.questionnaire))
}

fn close(got: Option<f64>, want: f64, what: &str) {
    let got = got.unwrap_or_else(|| panic!("{what}: undefined"));
    assert!((got - want).abs() < 1e-6, "{what}: {got} != {want}");
}

#[tokio::test]
async fn reversed_items_are_scored_before_means_and_tests() {
    let (_dir, store) = store_with(&table()).await;
    let report = report(&*store, Questionnaires::of([&study()])).await;

    let hard = item(&report, "user.hard");
    close(hard.overall.mean, 2.6, "hard overall mean");
    close(hard.reached.mean, 4.5, "hard reached mean");
    close(hard.not_reached.mean, 4.0 / 3.0, "hard not-reached mean");
    let test = hard.mann_whitney.as_ref().expect("U is defined");
    close(Some(test.u), 6.0, "hard U");
    close(Some(test.p), 0.069_320_3, "hard one-tailed p");
    let reversal = hard.reversed.as_ref().expect("hard is marked reversed");
    assert_eq!(
        (
            reversal.low,
            reversal.high,
            reversal.answers,
            reversal.out_of_scale
        ),
        (1.0, 5.0, 5, 0)
    );

    let good = item(&report, "user.good");
    close(good.overall.mean, 13.0 / 5.0, "good overall mean");
    assert_eq!(good.reversed, None, "good is not reverse-coded");
    assert!(report.unknown_questionnaires.is_empty());

    let json = serde_json::to_value(&report).expect("report serialises");
    let hard_json = json["questionnaire"]
        .as_array()
        .and_then(|items| items.iter().find(|q| q["item"] == "user.hard"))
        .expect("hard in JSON");
    assert_eq!(hard_json["reversed"]["high"], 5.0);
    let html = render_html(&report);
    assert!(
        html.contains("data-testid=\"reversed-items\"") && html.contains("user.hard (reversed)"),
        "the page names the reversed item"
    );
    assert!(!html.contains("user.good (reversed)"));
}

#[tokio::test]
async fn without_the_study_answers_stay_as_stored_and_the_report_says_so() {
    let (_dir, store) = store_with(&table()).await;
    let report = report(&*store, Questionnaires::default()).await;

    let hard = item(&report, "user.hard");
    close(hard.overall.mean, 3.4, "raw hard mean");
    close(hard.mann_whitney.as_ref().map(|t| t.u), 0.0, "raw U");
    assert_eq!(hard.reversed, None);
    assert_eq!(report.unknown_questionnaires, ["rev"]);
    assert!(render_html(&report).contains("data-testid=\"unknown-questionnaires\""));
}

#[tokio::test]
async fn an_answer_off_the_scale_is_left_out_and_counted() {
    let mut sessions = table();
    sessions.push(("s6", false, json!({"hard": 9, "good": 3})));
    let (_dir, store) = store_with(&sessions).await;
    let report = report(&*store, Questionnaires::of([&study()])).await;

    let hard = item(&report, "user.hard");
    assert_eq!(hard.overall.n, 5, "the 9 on a 5-point scale is not counted");
    close(hard.overall.mean, 2.6, "hard mean without it");
    let reversal = hard.reversed.as_ref().expect("reversed");
    assert_eq!((reversal.answers, reversal.out_of_scale), (5, 1));
    assert_eq!(item(&report, "user.good").overall.n, 6);
}
