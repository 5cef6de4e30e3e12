//! The report by scenario: live sessions written through the store with known draws, filtered
//! by a drawn value and broken down per variant, against counts worked out by hand below.
//!
//! | session | fire_location | robot_out | travel_distance_m | goal reached | messages |
//! |---------|---------------|-----------|-------------------|--------------|----------|
//! | a1      | pu_et         | none      | 40                | yes          | 1        |
//! | a2      | pu_et         | none      | 70                | no           | 3        |
//! | b1      | pu_nt         | hsk2      | 40                | yes          | 2        |
//! | plain   | (no draw)     |           |                   | yes          | 4        |
//!
//! Variants (numbers left out of the grouping): `fire_location=pu_et, robot_out=none` with 2
//! sessions, 1 reached, turns mean 2 (1 and 3); `fire_location=pu_nt, robot_out=hsk2` with 1
//! session, reached, 2 turns. `plain` drew nothing and is in no variant.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_data::report::html::render_html;
use wozkit_data::report::{Filter, Report, ReportOptions, build_report};
use wozkit_store::{NewEvent, NewSession, Store};

async fn session(store: &dyn Store, id: &str, drawn: Option<Value>, reached: bool, messages: u32) {
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: "offshore-emergency".into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let mut kinds = vec![(
        Actor::System,
        EventKind::SessionStarted {
            study: "offshore-emergency".into(),
            study_version: "1".into(),
            seed: 0,
            initial_state: "start".into(),
        },
    )];
    if let Some(values) = drawn {
        let values: IndexMap<String, Value> = serde_json::from_value(values).expect("an object");
        kinds.push((
            Actor::System,
            EventKind::ScenarioDrawn {
                world: values.clone(),
                values,
                out_of_service: vec![],
            },
        ));
    }
    for i in 0..messages {
        let role = if i % 2 == 0 { Role::User } else { Role::Wizard };
        kinds.push((
            Actor::Participant {
                role,
                participant: None,
            },
            EventKind::Message {
                role,
                text: format!("message {i}"),
                source: MessageSource::Free,
            },
        ));
    }
    kinds.push((
        Actor::System,
        EventKind::SessionEnded {
            reason: EndReason::Terminal,
            goal_reached: reached,
        },
    ));
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

async fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    let draw = |at: &str, out: &str, d: u32| {
        Some(json!({"fire_location": at, "robot_out": out, "travel_distance_m": d}))
    };
    session(&*store, "a1", draw("pu_et", "none", 40), true, 1).await;
    session(&*store, "a2", draw("pu_et", "none", 70), false, 3).await;
    session(&*store, "b1", draw("pu_nt", "hsk2", 40), true, 2).await;
    session(&*store, "plain", None, true, 4).await;
    (dir, store)
}

async fn report(store: &dyn Store, filters: &[&str]) -> Report {
    let options = ReportOptions {
        filters: filters
            .iter()
            .map(|f| Filter::parse(f).expect("a filter"))
            .collect(),
        ..ReportOptions::default()
    };
    build_report(store, &options).await.expect("report")
}

#[tokio::test]
async fn the_report_filters_by_a_drawn_value() {
    let (_dir, store) = store().await;
    assert_eq!(report(&*store, &[]).await.sessions, 4);
    let et = report(&*store, &["scenario.fire_location=pu_et"]).await;
    assert_eq!((et.sessions, et.outcome_reached), (2, 1));
    let out = report(&*store, &["scenario.robot_out=hsk2"]).await;
    assert_eq!((out.sessions, out.outcome_reached), (1, 1));
    // A number is matched as written.
    assert_eq!(
        report(&*store, &["scenario.travel_distance_m=40"])
            .await
            .sessions,
        2
    );
    let both = report(
        &*store,
        &[
            "scenario.fire_location=pu_et",
            "scenario.travel_distance_m=70",
        ],
    )
    .await;
    assert_eq!(both.sessions, 1);
    assert_eq!(
        report(&*store, &["scenario.fire_location=pu_wt"])
            .await
            .sessions,
        0
    );
    assert_eq!(report(&*store, &["scenario.colour=red"]).await.sessions, 0);
}

#[tokio::test]
async fn the_report_breaks_its_figures_down_per_variant() {
    let (_dir, store) = store().await;
    let r = report(&*store, &[]).await;
    let rows: Vec<(&str, usize, usize, usize, Option<f64>)> = r
        .scenarios
        .iter()
        .map(|v| {
            (
                v.variant.as_str(),
                v.sessions,
                v.outcome_known,
                v.outcome_reached,
                v.turns.mean,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("fire_location=pu_et, robot_out=none", 2, 2, 1, Some(2.0)),
            ("fire_location=pu_nt, robot_out=hsk2", 1, 1, 1, Some(2.0)),
        ]
    );
    assert_eq!(r.scenarios[0].outcome_share, Some(0.5));
    let json = serde_json::to_value(&r).expect("the report serialises");
    assert_eq!(json["scenarios"].as_array().map(Vec::len), Some(2));
    let html = render_html(&r);
    assert!(html.contains("<h2>Scenario variants</h2>"));
    assert!(
        html.contains(
            "<td>fire_location=pu_nt, robot_out=hsk2</td><td>1</td><td>1 of 1 (100%)</td>"
        )
    );
    // A filter narrows the breakdown too.
    let et = report(&*store, &["scenario.fire_location=pu_et"]).await;
    assert_eq!(et.scenarios.len(), 1);
}
