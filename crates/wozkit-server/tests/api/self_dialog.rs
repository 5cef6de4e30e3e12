//! Self-dialogs and span annotation over HTTP: a worker writes both sides of a scenario in turn
//! (the speaker's order enforced, the last turn fixed, too short a dialogue refused), each
//! scenario gets exactly N dialogues from several workers, a restart mid-dialogue keeps the
//! turns written; spans are checked against the utterance (bad offsets give a clear error) and
//! submitted; the stored dialogues export to Taskmaster-1 with the spans as segments and import
//! back unchanged.

use std::collections::HashMap;

use serde_json::Value;
use wozkit_core::event::{Event, EventKind, Judgment, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_builtin, load_text};
use wozkit_data::{ImportedSession, Input, add_segments, export_taskmaster1, import_taskmaster1};
use wozkit_store::SessionFilter;

use crate::helpers::{
    Client, TestApp, hidden, join_past_first_page, join_worker, judgments, page_kind, spawn_app_in,
    urlencoding,
};

const WRITE: &str = r#"id: sd-mini
title: Write
flow:
  user:
    - {kind: consent}
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: self_dialog
  judgments_per_item: 2
  items_per_worker: 1
  self_dialog:
    min_turns: 3
    max_turns: 4
    max_chars: 40
    scenarios:
      - {id: pizza-1, instructions: "Order a **pizza**."}
      - {id: taxi-1, instructions: "Book a *taxi*."}
"#;

fn study(text: &str) -> LoadedStudy {
    load_text("s.yaml", text, StudySource::Dir(".".into())).unwrap_or_else(|e| panic!("{e}"))
}

/// Posts a turn; returns the status and the page after it.
async fn say(c: &Client, index: usize, speaker: &str, text: &str) -> (u16, String) {
    let body = c.page().await.body;
    let lease = hidden(&body, "lease");
    let res = c
        .post(
            "/p/self-dialog/turn",
            &format!(
                "lease={lease}&index={index}&speaker={speaker}&text={}",
                urlencoding(text)
            ),
        )
        .await;
    (res.status, res.body)
}

/// The turns shown on the page, as (speaker, text).
fn shown_turns(body: &str) -> Vec<(String, String)> {
    body.split("data-testid=\"sd-turn\"")
        .skip(1)
        .map(|part| {
            let speaker = part
                .split("data-speaker=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or_default()
                .to_string();
            let text = part
                .split("<span class=\"sd-text\">")
                .nth(1)
                .and_then(|s| s.split("</span>").next())
                .unwrap_or_default()
                .to_string();
            (speaker, text)
        })
        .collect()
}

fn next_speaker(body: &str) -> String {
    body.split("data-testid=\"sd-next-speaker\"")
        .nth(1)
        .and_then(|s| s.split('>').nth(1))
        .and_then(|s| s.split('<').next())
        .unwrap_or_default()
        .to_string()
}

async fn log_of(app: &TestApp, study: &str) -> Vec<Vec<Event>> {
    let filter = SessionFilter {
        study_id: Some(study.into()),
        kind: wozkit_store::SessionKind::Participant,
        ..SessionFilter::default()
    };
    let mut out = vec![];
    for s in app.store.list_sessions(&filter).await.expect("sessions") {
        out.push(app.events(&s.id).await);
    }
    out
}

/// Writes a whole dialogue of `n` turns and submits it.
async fn write_dialogue(c: &Client, n: usize, tag: &str) {
    for i in 0..n {
        let who = if i % 2 == 0 { "USER" } else { "ASSISTANT" };
        let (status, body) = say(c, i, who, &format!("{tag} turn {i}")).await;
        assert_eq!(status, 303, "turn {i}: {body}");
    }
    let lease = hidden(&c.page().await.body, "lease");
    let res = c
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
}

#[tokio::test]
async fn a_worker_writes_both_sides_in_turn_fixes_the_last_turn_and_submits() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(WRITE)).await;
    let c = join_worker(&app, "sd-mini", "w1").await;
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "self-dialog");
    let scenario = crate::helpers::attr_after(&body, "data-scenario=\"");
    assert!(["pizza-1", "taxi-1"].contains(&scenario.as_str()));
    assert!(body.contains("<strong>pizza</strong>") || body.contains("<em>taxi</em>"));
    assert_eq!(next_speaker(&body), "USER");

    // The assistant cannot speak first, and no turn can be skipped.
    let (status, body) = say(&c, 0, "ASSISTANT", "Hello").await;
    assert_eq!(status, 422);
    assert!(body.contains("spoken by USER"), "{body}");
    let (status, body) = say(&c, 1, "ASSISTANT", "Hello").await;
    assert_eq!(status, 422);
    assert!(
        body.contains("Turn 2: this turn cannot be written now: the next is turn 1"),
        "{body}"
    );
    let (status, body) = say(&c, 0, "USER", "   ").await;
    assert_eq!(status, 422);
    assert!(body.contains("empty"), "{body}");
    let (status, body) = say(&c, 0, "USER", &"x".repeat(41)).await;
    assert_eq!(status, 422);
    assert!(body.contains("longer than 40"), "{body}");

    assert_eq!(say(&c, 0, "USER", "I want a pizza").await.0, 303);
    let body = c.page().await.body;
    assert_eq!(next_speaker(&body), "ASSISTANT");
    assert_eq!(say(&c, 1, "ASSISTANT", "Which size?").await.0, 303);
    // Fix the last turn (the assistant's), then go on.
    assert_eq!(
        say(&c, 1, "ASSISTANT", "Which size would you like?")
            .await
            .0,
        303
    );
    // An earlier turn cannot be changed any more.
    let (status, body) = say(&c, 0, "USER", "changed").await;
    assert_eq!(status, 422);
    assert!(body.contains("cannot be written now"), "{body}");
    assert_eq!(say(&c, 2, "USER", "Large").await.0, 303);
    let body = c.page().await.body;
    assert_eq!(
        shown_turns(&body),
        vec![
            ("USER".into(), "I want a pizza".into()),
            ("ASSISTANT".into(), "Which size would you like?".into()),
            ("USER".into(), "Large".into()),
        ]
    );

    // A restart keeps the turns written: each is in the worker's log.
    app.stop().await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(WRITE)).await;
    let c = Client {
        addr: app.addr,
        ..c
    };
    let body = c.page().await.body;
    assert_eq!(shown_turns(&body).len(), 3, "{body}");
    assert_eq!(next_speaker(&body), "ASSISTANT");
    assert_eq!(
        crate::helpers::attr_after(&body, "data-scenario=\""),
        scenario,
        "the same scenario after the restart"
    );

    // A fourth turn reaches max_turns: a fifth is refused, and the dialogue is submitted.
    assert_eq!(say(&c, 3, "ASSISTANT", "It is on its way").await.0, 303);
    let (status, body) = say(&c, 4, "USER", "Thanks").await;
    assert_eq!(status, 422);
    assert!(body.contains("has its 4 turns"), "{body}");
    let lease = hidden(&c.page().await.body, "lease");
    let res = c
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(res.status, 303);
    assert_eq!(page_kind(&c.page().await.body), "completion");

    // The judgment carries the utterances; the dialogue is a Taskmaster-1 session.
    let logs = log_of(&app, "sd-mini").await;
    let all: Vec<Event> = logs.into_iter().flatten().collect();
    let js = judgments(&all);
    assert_eq!(js.len(), 1);
    assert!(js[0].counted);
    assert_eq!(js[0].item, scenario);
    let utterances = js[0].answers["utterances"].as_array().expect("utterances");
    assert_eq!(utterances.len(), 4);
    assert_eq!(utterances[1]["text"], "Which size would you like?");
    assert_eq!(utterances[1]["speaker"], "ASSISTANT");
    let dlg = format!("dlg-{lease}");
    let session = app
        .store
        .session(&dlg)
        .await
        .expect("store")
        .expect("dialogue session");
    assert!(!session.is_live(), "the dialogue session is ended");
    let messages: Vec<(Role, String)> = app
        .events(&dlg)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Message { role, text, .. } => Some((role, text)),
            _ => None,
        })
        .collect();
    assert_eq!(
        messages,
        vec![
            (Role::User, "I want a pizza".to_string()),
            (Role::Wizard, "Which size would you like?".to_string()),
            (Role::User, "Large".to_string()),
            (Role::Wizard, "It is on its way".to_string()),
        ]
    );
    app.stop().await;
}

#[tokio::test]
async fn too_short_a_dialogue_is_refused_and_each_scenario_gets_exactly_n_dialogues() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(WRITE)).await;
    let first = join_worker(&app, "sd-mini", "w0").await;
    assert_eq!(say(&first, 0, "USER", "Hi").await.0, 303);
    let lease = hidden(&first.page().await.body, "lease");
    let res = first
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(res.status, 422);
    assert!(res.body.contains("write at least 3"), "{}", res.body);
    assert_eq!(say(&first, 1, "ASSISTANT", "Hello").await.0, 303);
    assert_eq!(say(&first, 2, "USER", "Bye").await.0, 303);
    let res = first
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(res.status, 303);

    // Two scenarios × 2 dialogues: three more workers fill them, the sixth finds nothing.
    for w in 1..4 {
        let c = join_worker(&app, "sd-mini", &format!("w{w}")).await;
        assert_eq!(page_kind(&c.page().await.body), "self-dialog");
        write_dialogue(&c, 3, &format!("w{w}")).await;
    }
    let late = join_worker(&app, "sd-mini", "w9").await;
    assert_eq!(page_kind(&late.page().await.body), "no-items");

    let all: Vec<Event> = log_of(&app, "sd-mini")
        .await
        .into_iter()
        .flatten()
        .collect();
    let mut per_scenario: HashMap<String, usize> = HashMap::new();
    for j in judgments(&all).into_iter().filter(|j| j.counted) {
        *per_scenario.entry(j.item.clone()).or_default() += 1;
    }
    assert_eq!(per_scenario.get("pizza-1"), Some(&2));
    assert_eq!(per_scenario.get("taxi-1"), Some(&2));
    let dialogues = app
        .store
        .list_sessions(&SessionFilter {
            study_id: Some("sd-mini".into()),
            ..SessionFilter::default()
        })
        .await
        .expect("sessions");
    assert_eq!(
        dialogues.len(),
        4,
        "one dialogue session per counted dialogue"
    );
    app.stop().await;
}

const SPANS: &str = r#"id: sp-mini
title: Spans
flow:
  user:
    - {kind: consent}
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: spans
  judgments_per_item: 2
  items_per_worker: 1
  spans:
    slots: [pizza_ordering.size.pizza, pizza_ordering.type.topping]
  from_store: {study: sd-spans-src, scenario: {annotation: taskmaster1.dialogue, field: instruction_id}}
"#;

const SOURCE: &str = r#"id: sd-spans-src
title: Write
flow:
  user:
    - {kind: consent}
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: self_dialog
  judgments_per_item: 1
  items_per_worker: 1
  self_dialog:
    min_turns: 2
    max_turns: 4
    scenarios:
      - {id: pizza-1, instructions: "Order a pizza."}
"#;

async fn mark(c: &Client, form: &str) -> (u16, String) {
    let lease = hidden(&c.page().await.body, "lease");
    let res = c
        .post("/p/spans/mark", &format!("lease={lease}&{form}"))
        .await;
    (res.status, res.body)
}

#[tokio::test]
async fn spans_are_checked_against_the_utterance_and_export_as_taskmaster_segments() {
    // A self-dialog written in one study…
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(SOURCE)).await;
    let writer = join_worker(&app, "sd-spans-src", "writer").await;
    assert_eq!(
        say(&writer, 0, "USER", "A large pizza with olives").await.0,
        303
    );
    assert_eq!(
        say(&writer, 1, "ASSISTANT", "Large, olives: done").await.0,
        303
    );
    let lease = hidden(&writer.page().await.body, "lease");
    let res = writer
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(res.status, 303);
    app.stop().await;

    // …is annotated in a span study that selects it from the store.
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(SPANS)).await;
    let a = join_worker(&app, "sp-mini", "ann-a").await;
    let body = a.page().await.body;
    assert_eq!(page_kind(&body), "spans");
    assert!(body.contains("A large pizza with olives"));

    let cases = [
        (
            "turn=5&start=0&end=1&slot=pizza_ordering.size.pizza",
            "utterance 5 does not exist",
        ),
        (
            "turn=0&start=4&end=2&slot=pizza_ordering.size.pizza",
            "is empty",
        ),
        (
            "turn=0&start=20&end=26&slot=pizza_ordering.size.pizza",
            "past the end of the utterance (25 characters)",
        ),
        (
            "turn=0&start=2&end=7&slot=pizza_ordering.crust",
            "is not one of the study",
        ),
        (
            "turn=0&start=2&end=7&text=small&slot=pizza_ordering.size.pizza",
            "not the text given",
        ),
        (
            "turn=0&start=x&end=7&slot=pizza_ordering.size.pizza",
            "`start` must be a whole number",
        ),
        (
            "turn=0&text=anchovies&slot=pizza_ordering.type.topping",
            "does not contain",
        ),
    ];
    for (form, message) in cases {
        let (status, body) = mark(&a, form).await;
        assert_eq!(status, 422, "{form}");
        assert!(
            body.contains(message),
            "{form}: expected {message:?} in {body}"
        );
    }
    // By offsets, and by the words alone.
    assert_eq!(
        mark(&a, "turn=0&start=2&end=7&slot=pizza_ordering.size.pizza")
            .await
            .0,
        303
    );
    assert_eq!(
        mark(&a, "turn=0&text=olives&slot=pizza_ordering.type.topping")
            .await
            .0,
        303
    );
    assert_eq!(
        mark(&a, "turn=1&start=7&end=13&slot=pizza_ordering.type.topping")
            .await
            .0,
        303
    );
    // A wrong one, removed.
    assert_eq!(
        mark(&a, "turn=1&start=0&end=5&slot=pizza_ordering.type.topping")
            .await
            .0,
        303
    );
    let lease_a = hidden(&a.page().await.body, "lease");
    let res = a
        .post("/p/spans/remove", &format!("lease={lease_a}&n=3"))
        .await;
    assert_eq!(res.status, 303);
    let res = a
        .post("/p/spans/remove", &format!("lease={lease_a}&n=3"))
        .await;
    assert_eq!(res.status, 422, "no fourth span any more");
    let res = a.post("/p/spans/submit", &format!("lease={lease_a}")).await;
    assert_eq!(res.status, 303);

    let b = join_worker(&app, "sp-mini", "ann-b").await;
    assert_eq!(
        mark(&b, "turn=0&start=2&end=7&slot=pizza_ordering.size.pizza")
            .await
            .0,
        303
    );
    let lease_b = hidden(&b.page().await.body, "lease");
    assert_eq!(
        b.post("/p/spans/submit", &format!("lease={lease_b}"))
            .await
            .status,
        303
    );
    // Two annotators per dialogue: a third finds nothing to annotate.
    let c = join_worker(&app, "sp-mini", "ann-c").await;
    assert_eq!(page_kind(&c.page().await.body), "no-items");

    // Export: the stored self-dialog with the counted annotators' spans as segments.
    let dlg = format!("dlg-{lease}");
    let mut sessions = vec![ImportedSession {
        id: dlg.clone(),
        events: app.events(&dlg).await,
    }];
    let all: Vec<Event> = log_of(&app, "sp-mini")
        .await
        .into_iter()
        .flatten()
        .collect();
    let js: Vec<Judgment> = judgments(&all);
    assert_eq!(js.iter().filter(|j| j.counted).count(), 2);
    assert_eq!(add_segments(&mut sessions, &js), 0);
    let mut out = Vec::new();
    export_taskmaster1(&sessions, &mut out).expect("export");
    let exported: Value = serde_json::from_slice(&out).expect("json");
    let conv = &exported[0];
    assert_eq!(conv["conversation_id"], dlg.as_str());
    assert_eq!(conv["instruction_id"], "pizza-1");
    let u0 = &conv["utterances"][0];
    assert_eq!(u0["index"], 0);
    assert_eq!(u0["speaker"], "USER");
    assert_eq!(u0["text"], "A large pizza with olives");
    let segs = u0["segments"].as_array().expect("segments");
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[0]["start_index"], 2);
    assert_eq!(segs[0]["end_index"], 7);
    assert_eq!(segs[0]["text"], "large");
    // Both annotators marked "large" the same way: the name is listed once per annotator.
    assert_eq!(segs[0]["annotations"].as_array().map(Vec::len), Some(2));
    assert_eq!(segs[1]["text"], "olives");
    assert_eq!(segs[1]["start_index"], 19);
    assert_eq!(
        segs[1]["annotations"][0]["name"],
        "pizza_ordering.type.topping"
    );
    let u1 = &conv["utterances"][1];
    assert_eq!(u1["speaker"], "ASSISTANT");
    assert_eq!(u1["segments"][0]["text"], "olives");

    // Re-importing the export gives the same dialogue, and exports the same bytes.
    let back = import_taskmaster1(&Input::new("tm.json", out.clone())).expect("import");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].id, dlg);
    let texts = |s: &ImportedSession| -> Vec<(Role, String)> {
        s.messages().map(|(r, t)| (r, t.to_string())).collect()
    };
    assert_eq!(texts(&back[0]), texts(&sessions[0]));
    let notes = |s: &ImportedSession| -> Vec<Value> {
        s.annotations("taskmaster1.turn").cloned().collect()
    };
    assert_eq!(notes(&back[0]), notes(&sessions[0]));
    let mut again = Vec::new();
    export_taskmaster1(&back, &mut again).expect("export again");
    assert_eq!(again, out);
    app.stop().await;

    // The researcher's download of the self-dialog study is that file.
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(SOURCE)).await;
    let path = "/researcher/study/sd-spans-src/taskmaster1.json?spans=sp-mini";
    let res = app.http("GET", path, &[], "").await;
    assert_eq!(res.status, 303, "a visitor is sent to the login page");
    let cookie = crate::helpers::login(&app).await;
    let res = app.http("GET", path, &[("Cookie", &cookie)], "").await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body.as_bytes(), out.as_slice());
    let res = app
        .http(
            "GET",
            "/researcher/study/sd-spans-src/taskmaster1.json",
            &[("Cookie", &cookie)],
            "",
        )
        .await;
    let plain: Value = serde_json::from_str(&res.body).expect("json");
    assert!(
        plain[0]["utterances"][0].get("segments").is_none(),
        "without a span study, no segments"
    );
    app.stop().await;
}

#[test]
fn the_built_in_self_dialog_studies_load() {
    for name in ["self-dialog-demo", "self-dialog-spans"] {
        let s = load_builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let items = s.study.evaluation.as_ref().map(|e| e.items().len());
        assert!(items.unwrap_or(0) >= 2, "{name} has items");
    }
}

#[tokio::test]
async fn a_test_participants_dialogue_stays_out_of_the_stored_dialogues() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(WRITE)).await;
    let c = join_past_first_page(&app, "study=sd-mini&participant=t1&test=1").await;
    write_dialogue(&c, 3, "test").await;
    let all: Vec<Event> = log_of(&app, "sd-mini")
        .await
        .into_iter()
        .flatten()
        .collect();
    let js = judgments(&all);
    assert_eq!(js.len(), 1, "the dialogue is in the test log");
    assert!(
        js[0].counted,
        "counted like any other, so only the test mark keeps it out"
    );
    let stored = app
        .store
        .list_sessions(&SessionFilter {
            study_id: Some("sd-mini".into()),
            ..SessionFilter::default()
        })
        .await
        .expect("sessions");
    assert!(stored.is_empty(), "no dialogue session: {stored:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_dialogue_judged_without_its_session_is_written_at_export() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(WRITE)).await;
    let c = join_worker(&app, "sd-mini", "w-crash").await;
    for (i, text) in ["Hello", "Hi, how can I help?", "A pizza"]
        .iter()
        .enumerate()
    {
        let who = if i % 2 == 0 { "USER" } else { "ASSISTANT" };
        assert_eq!(say(&c, i, who, text).await.0, 303);
    }
    let lease = hidden(&c.page().await.body, "lease");
    // The judgment is stored as the server stores it, but the server stops before writing the
    // dialogue session.
    let logs = log_of(&app, "sd-mini").await;
    let log = logs[0][0].session.clone();
    let utterances = serde_json::json!([
        {"index": 0, "speaker": "USER", "text": "Hello"},
        {"index": 1, "speaker": "ASSISTANT", "text": "Hi, how can I help?"},
        {"index": 2, "speaker": "USER", "text": "A pizza"},
    ]);
    let claimed = app
        .store
        .lease(&lease)
        .await
        .expect("store")
        .expect("lease");
    let item = claimed.item_id.clone();
    let judgment = Judgment {
        page: "rate-1".into(),
        item: item.clone(),
        lease: lease.clone(),
        pool: claimed.pool,
        dialogues: vec![item.clone()],
        systems: vec![String::new()],
        choice: None,
        justification: None,
        answers: [("utterances".to_string(), utterances)]
            .into_iter()
            .collect(),
        turns: vec![],
        counted: true,
        surplus: false,
        gold_correct: None,
        claimed_at_ms: claimed.claimed_at_ms,
        void: false,
    };
    let actor = logs[0][0].actor.clone();
    app.store
        .submit(
            &lease,
            claimed.claimed_at_ms + 1,
            &log,
            Box::new(move |_| {
                vec![wozkit_store::NewEvent {
                    actor,
                    kind: EventKind::Judged(Box::new(judgment)),
                    at_ms: 1,
                }]
            }),
        )
        .await
        .expect("submit");
    let dlg = format!("dlg-{lease}");
    assert!(app.store.session(&dlg).await.expect("store").is_none());

    let cookie = crate::helpers::login(&app).await;
    let res = app
        .http(
            "GET",
            "/researcher/study/sd-mini/taskmaster1.json",
            &[("Cookie", &cookie)],
            "",
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let exported: Value = serde_json::from_str(&res.body).expect("json");
    assert_eq!(exported[0]["conversation_id"], dlg.as_str());
    assert_eq!(exported[0]["instruction_id"], item.as_str());
    assert_eq!(exported[0]["utterances"][2]["text"], "A pizza");
    assert_eq!(exported[0]["utterances"][1]["speaker"], "ASSISTANT");
    assert!(app.store.session(&dlg).await.expect("store").is_some());
    app.stop().await;
}
