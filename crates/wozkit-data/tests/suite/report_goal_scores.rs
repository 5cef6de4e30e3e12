//! Goal-based scores in `wozkit report`: sessions written through the store with one user goal,
//! scored per system, against numbers worked out by hand below.
//!
//! | session | wizard             | goal | ended | told                   | success |
//! |---------|--------------------|------|-------|------------------------|---------|
//! | bot1    | bot `helper-bot`   | G    | yes   | name and phone         | yes     |
//! | bot2    | bot `helper-bot`   | G    | yes   | name only              | no      |
//! | human1  | a participant      | G    | yes   | name and phone         | yes     |
//! | running | a participant      | G    | no    | name and phone         | (left out: not finished) |
//! | plain   | a participant      | none | yes   |                        | (no goal) |
//!
//! `helper-bot`: 2 sessions of 1 goal, success 0.5, recall 0.75, pass^1 0.5, pass^2 0 (C(1,2) =
//! 0), no intervals (one goal). `wizard:woz-study`: 1 session, success 1.

use std::sync::Arc;

use serde_json::json;
use wozkit_core::database::{Filter, FilterOp, Row};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::goals::{Goal, GoalSlot, SubGoal};
use wozkit_data::report::html::render_html;
use wozkit_data::report::{ReportOptions, build_report};
use wozkit_store::{NewEvent, NewSession, Store};

const STUDY: &str = "woz-study";

fn slot(name: &str, value: &str) -> GoalSlot {
    GoalSlot {
        slot: name.into(),
        value: value.into(),
        reference: None,
        range: None,
    }
}

fn goal() -> Goal {
    Goal {
        subgoals: vec![SubGoal {
            id: 1,
            domain: "restaurant".into(),
            table: "restaurant".into(),
            row: "r1".into(),
            constraints: vec![slot("cuisine", "italian")],
            requests: vec![slot("name", ""), slot("phone", "")],
        }],
    }
}

fn row() -> Row {
    serde_json::from_value(
        json!({"id": "r1", "name": "Da Mario", "cuisine": "italian", "phone": "0123 456"}),
    )
    .expect("a row")
}

async fn session(store: &dyn Store, id: &str, bot: bool, goal: bool, ended: bool, phone: bool) {
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: STUDY.into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let wizard = if bot {
        Actor::Bot {
            role: Role::Wizard,
            name: "helper-bot".into(),
        }
    } else {
        Actor::Participant {
            role: Role::Wizard,
            participant: None,
        }
    };
    let user = Actor::Participant {
        role: Role::User,
        participant: None,
    };
    let say = |role: Role, text: &str| EventKind::Message {
        role,
        text: text.into(),
        source: MessageSource::Free,
    };
    let mut kinds = vec![(
        Actor::System,
        EventKind::SessionStarted {
            study: STUDY.into(),
            study_version: "1".into(),
            seed: 0,
            initial_state: "start".into(),
        },
    )];
    if goal {
        kinds.push((
            Actor::System,
            EventKind::GoalGenerated {
                seed: 3,
                goal: self::goal(),
                description: vec![],
            },
        ));
    }
    kinds.push((user.clone(), say(Role::User, "Somewhere italian?")));
    kinds.push((
        wizard.clone(),
        EventKind::DbQueried {
            table: "restaurant".into(),
            filters: vec![Filter {
                column: "cuisine".into(),
                op: FilterOp::Equals {
                    value: json!("italian"),
                },
            }],
            result_keys: vec!["r1".into()],
            rows: vec![row()],
        },
    ));
    kinds.push((
        wizard.clone(),
        EventKind::DbSelected {
            table: "restaurant".into(),
            key: "r1".into(),
            row: row(),
        },
    ));
    let told = if phone {
        "Da Mario, phone 0123 456."
    } else {
        "Da Mario."
    };
    kinds.push((wizard, say(Role::Wizard, told)));
    kinds.push((user, say(Role::User, "Thanks.")));
    if ended {
        kinds.push((
            Actor::System,
            EventKind::SessionEnded {
                reason: EndReason::Finished,
                goal_reached: true,
            },
        ));
    }
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
    session(&*store, "bot1", true, true, true, true).await;
    session(&*store, "bot2", true, true, true, false).await;
    session(&*store, "human1", false, true, true, true).await;
    session(&*store, "running", false, true, false, true).await;
    session(&*store, "plain", false, false, true, true).await;
    (dir, store)
}

#[tokio::test]
async fn the_report_scores_finished_sessions_with_a_goal_per_system() {
    let (_dir, store) = store().await;
    let r = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");
    let g = r.goal_scores.as_ref().expect("goal scores");
    assert_eq!(g.sessions, 3);
    let systems: Vec<(&str, usize, usize)> = g
        .systems
        .iter()
        .map(|s| (s.system.as_str(), s.sessions, s.goals))
        .collect();
    assert_eq!(
        systems,
        [("helper-bot", 2, 1), ("wizard:woz-study", 1, 1)],
        "{g:#?}"
    );
    let bot = &g.systems[0];
    assert_eq!(bot.success.value, Some(0.5));
    assert_eq!(bot.success.ci95, None);
    assert_eq!(bot.inform_recall.value, Some(0.75));
    assert_eq!(bot.turns_to_success.value, Some(2.0));
    let pass: Vec<(usize, f64)> = bot.pass_k.iter().map(|p| (p.k, p.value)).collect();
    assert_eq!(pass, [(1, 0.5), (2, 0.0)]);
    assert_eq!(g.systems[1].success.value, Some(1.0));

    let json = serde_json::to_value(&r).expect("the report serialises");
    assert_eq!(json["goal_scores"]["systems"][0]["pass_k"][1]["k"], 2);
    let html = render_html(&r);
    assert!(html.contains("<h2>Goal-based scores</h2>"));
    assert!(
        html.contains("<td>helper-bot</td><td>2</td><td>1</td><td>0.500</td>"),
        "{html}"
    );
}

#[tokio::test]
async fn a_store_without_goals_has_no_goal_scores() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    session(&*store, "plain", false, false, true, true).await;
    let r = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");
    assert_eq!(r.goal_scores, None);
    let json = serde_json::to_value(&r).expect("the report serialises");
    assert!(json.get("goal_scores").is_none());
    assert!(!render_html(&r).contains("Goal-based scores"));
}
