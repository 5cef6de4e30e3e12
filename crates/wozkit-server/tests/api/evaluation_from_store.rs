//! `evaluation.from_store`: the items of an evaluation are sessions already in the store (here
//! written as `wozkit import` writes them: study `import:<format>`, an origin annotation, the
//! record's fields as an annotation, then the messages, and ended once all are written). The
//! items are exactly the selected sessions that have messages, named by their store ids; a
//! worker is shown one and judges it; a restart registers the same items; comparisons pair the
//! stored sessions of two systems by scenario; a filter that selects nothing stops the start
//! with a message naming it.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use wozkit_core::event::{Actor, EndReason, EventKind, ItemPool, MessageSource, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_server::{Config, launch_with_listener};
use wozkit_store::{LeaseState, NewEvent, NewSession, Store};

use crate::helpers::{fast, hidden, page_kind, spawn_app_in};

const RATE: &str = r#"id: rate-stored
title: Rate stored dialogues
flow:
  user:
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: rate
  judgments_per_item: 1
  items_per_worker: 1
  questions:
    - {id: fluent, text: How fluent was the assistant?, kind: likert, points: 5}
  from_store:
    study: import:taskmaster1
    system: {annotation: taskmaster1.dialogue, field: instruction_id}
"#;

const COMPARE: &str = r#"id: compare-stored
title: Compare stored dialogues
flow:
  user:
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  pairs: {rule: all_systems, match_by: scenario}
  from_store:
    - {study: import:taskmaster1, system: tm, scenario: {annotation: taskmaster1.dialogue, field: instruction_id}}
    - {study: wizard-pilot, system: wizard, scenario: {annotation: goal, field: name}}
"#;

fn study(text: &str) -> LoadedStudy {
    load_text("s.yaml", text, StudySource::Dir(".".into())).unwrap_or_else(|d| panic!("{d}"))
}

/// Writes one session: its annotations (key, value) then its messages, ended unless `live`.
async fn put_session(
    store: &dyn Store,
    (id, study): (&str, &str),
    notes: &[(&str, Value)],
    messages: &[(Role, &str)],
    live: bool,
) {
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: study.into(),
            study_version: "1".into(),
            seed: 1,
            created_at_ms: 1000,
        })
        .await
        .expect("session created");
    let mut events: Vec<NewEvent> = notes
        .iter()
        .map(|(key, value)| NewEvent {
            actor: Actor::System,
            kind: EventKind::Annotation {
                key: (*key).into(),
                value: value.clone(),
            },
            at_ms: 1000,
        })
        .collect();
    events.extend(messages.iter().map(|(role, text)| NewEvent {
        actor: Actor::Participant {
            role: *role,
            participant: None,
        },
        kind: EventKind::Message {
            role: *role,
            text: (*text).into(),
            source: MessageSource::Free,
        },
        at_ms: 1000,
    }));
    store.append(id, events).await.expect("events appended");
    if !live {
        store
            .end_session(id, EndReason::Finished, 2000)
            .await
            .expect("session ended");
    }
}

/// An imported Taskmaster-1 dialogue about `instruction`.
async fn put_imported(store: &dyn Store, id: &str, instruction: &str, bot: &str, live: bool) {
    let origin =
        json!({"format": "taskmaster1", "file": "self-dialogs.json", "id": id, "position": 0});
    let record = json!({"conversation_id": id, "instruction_id": instruction, "utterances": null});
    let messages = [(Role::User, "Book a table for two."), (Role::Wizard, bot)];
    let notes = [("import", origin), ("taskmaster1.dialogue", record)];
    let store_id = format!("taskmaster1:{id}");
    put_session(
        store,
        (&store_id, "import:taskmaster1"),
        &notes,
        &messages,
        live,
    )
    .await;
}

/// A data directory holding three finished imports with messages, one without any, one
/// unfinished import, and a session of another study.
async fn seeded_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let s = store.as_ref();
    put_imported(s, "dlg-1", "restaurant-1", "Done: a table at seven.", false).await;
    put_imported(s, "dlg-2", "restaurant-2", "Which restaurant?", false).await;
    put_imported(s, "dlg-3", "restaurant-1", "Sorry, they are full.", false).await;
    put_imported(s, "dlg-4", "restaurant-2", "Still importing.", true).await;
    let record = json!({"conversation_id": "dlg-5", "instruction_id": "restaurant-2"});
    let empty = [("taskmaster1.dialogue", record)];
    put_session(
        s,
        ("taskmaster1:dlg-5", "import:taskmaster1"),
        &empty,
        &[],
        false,
    )
    .await;
    let goal = [("goal", json!({"name": "restaurant-2"}))];
    let pilot = [
        (Role::User, "Book a table."),
        (Role::Wizard, "At which place?"),
    ];
    put_session(s, ("pilot-1", "wizard-pilot"), &goal, &pilot, false).await;
    store.close().await;
    tmp
}

async fn item_ids(store: &dyn Store, study: &str) -> Vec<(String, ItemPool)> {
    store
        .item_counts(study, 0)
        .await
        .expect("item counts")
        .into_iter()
        .map(|c| (c.item_id, c.pool))
        .collect()
}

#[tokio::test]
async fn evaluation_items_are_the_stored_sessions_and_a_worker_judges_one() {
    let tmp = seeded_dir().await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(RATE)).await;

    let expected = vec![
        ("taskmaster1:dlg-1".to_string(), ItemPool::Item),
        ("taskmaster1:dlg-2".to_string(), ItemPool::Item),
        ("taskmaster1:dlg-3".to_string(), ItemPool::Item),
    ];
    // The first request waits for the server to have started (items are registered by then).
    let worker = app
        .join("study=rate-stored&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1")
        .await;
    assert_eq!(item_ids(app.store.as_ref(), "rate-stored").await, expected);

    let body = worker.page().await.body;
    assert_eq!(page_kind(&body), "rate", "{body}");
    assert!(body.contains("Book a table for two."), "{body}");
    let lease_id = hidden(&body, "lease");
    let lease = app
        .store
        .lease(&lease_id)
        .await
        .expect("lease read")
        .expect("the page's lease is stored");
    let shown = &lease.dialogues[0];
    let bot = match shown.as_str() {
        "taskmaster1:dlg-1" => "Done: a table at seven.",
        "taskmaster1:dlg-2" => "Which restaurant?",
        "taskmaster1:dlg-3" => "Sorry, they are full.",
        other => panic!("the worker was shown `{other}`, not a selected session"),
    };
    assert!(
        body.contains(bot),
        "the page shows the stored turns: {body}"
    );

    let step = worker.step().await;
    let res = worker
        .post(
            "/p/judge",
            &format!("step={step}&lease={lease_id}&fluent=4"),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert_eq!(page_kind(&worker.page().await.body), "completion");

    let leases = app.store.leases("rate-stored").await.expect("leases");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].state, LeaseState::Done);
    assert_eq!(&leases[0].item_id, shown);
    let log = app.events(&format!("log-{}", lease.worker)).await;
    let judged: Vec<_> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Judged(j) => Some(j.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(judged.len(), 1, "{log:#?}");
    assert_eq!(judged[0].dialogues, vec![shown.clone()]);
    let system = if shown.ends_with("dlg-2") {
        "restaurant-2"
    } else {
        "restaurant-1"
    };
    assert_eq!(judged[0].systems, vec![system.to_string()]);

    // A restart reads the same sessions: the same items, the judged one still done.
    app.stop().await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(RATE)).await;
    let next = app
        .join("study=rate-stored&PROLIFIC_PID=w2&STUDY_ID=s&SESSION_ID=2")
        .await;
    assert_eq!(item_ids(app.store.as_ref(), "rate-stored").await, expected);
    let body = next.page().await.body;
    assert_eq!(page_kind(&body), "rate", "{body}");
    let second = app
        .store
        .lease(&hidden(&body, "lease"))
        .await
        .expect("lease read")
        .expect("stored");
    assert_ne!(
        &second.item_id, shown,
        "the judged item needs no more judgments"
    );
    app.stop().await;
}

#[tokio::test]
async fn evaluation_comparisons_pair_stored_sessions_of_two_systems_by_scenario() {
    let tmp = seeded_dir().await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study(COMPARE)).await;
    let worker = app
        .join("study=compare-stored&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1")
        .await;
    // Systems `tm` and `wizard` share one scenario, restaurant-2: one pair, systems in name
    // order (`tm` first), as for dialogues written in the study.
    assert_eq!(
        item_ids(app.store.as_ref(), "compare-stored").await,
        vec![("taskmaster1:dlg-2~pilot-1".to_string(), ItemPool::Item)]
    );
    let body = worker.page().await.body;
    assert_eq!(page_kind(&body), "compare", "{body}");
    assert!(body.contains("Which restaurant?") && body.contains("At which place?"));
    app.stop().await;
}

#[tokio::test]
async fn evaluation_from_store_selecting_nothing_stops_the_start() {
    let tmp = seeded_dir().await;
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let text = RATE.replace("import:taskmaster1", "import:crosswoz");
    let config = Config {
        studies: vec![study(&text)],
        tunables: fast(),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let started = launch_with_listener(config, store.clone(), listener, async {});
    let result = tokio::time::timeout(Duration::from_secs(10), started)
        .await
        .expect("the start ends at once");
    let message = result.expect_err("nothing selected").to_string();
    assert!(
        message.contains("rate-stored") && message.contains("`import:crosswoz`"),
        "{message}"
    );
    store.close().await;
}
