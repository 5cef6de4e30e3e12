//! The built-in studies on real tables: `restaurant-booking` (a small restaurant table) and
//! `crosswoz-demo` (an excerpt of CrossWOZ's database in three domains). Each loads, its options
//! read the selected row, and the simulated wizard (who selects rows as a wizard would in the
//! panel) covers every state and reaches the goal without dead ends.

use std::collections::HashSet;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{self, Command, Session, step};
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_core::sim::{WizardPolicy, simulate};

fn wizard() -> Actor {
    Actor::Participant {
        role: Role::Wizard,
        participant: None,
    }
}

fn run(study: &LoadedStudy, s: &mut Session, actor: Actor, cmd: Command) -> Vec<EventKind> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let st = step(study, s, &actor, cmd, 1_000, &mut rng).expect("accepted");
    *s = st.session;
    st.events.into_iter().map(|(_, k)| k).collect()
}

/// Simulates `n` sessions: no dead end, every state reached, the goal reached in some.
fn simulate_covers(study: &LoadedStudy, n: usize) {
    let r = simulate(study, n, 5, WizardPolicy::Priors);
    assert!(r.dead_ends.is_empty(), "dead ends: {:?}", r.dead_ends);
    assert!(
        r.uncovered_states.is_empty(),
        "states never reached: {:?}",
        r.uncovered_states
    );
    assert!(r.goal_reached > 0, "no simulated session reached the goal");
}

#[test]
fn restaurant_booking_reads_the_selected_restaurant() {
    let study = load_builtin("restaurant-booking").expect("restaurant-booking loads");
    let db = study
        .database
        .as_ref()
        .expect("the study has its restaurant table");
    let info = &db.tables()["restaurant"];
    assert!(info.rows >= 5, "{} restaurants", info.rows);
    // The user's wishes (Italian, the old town) have an answer in the table.
    let filters: Vec<wozkit_core::database::Filter> = serde_json::from_value(serde_json::json!([
        {"column": "cuisine", "op": "equals", "value": "italian"},
        {"column": "area", "op": "equals", "value": "old town"}
    ]))
    .unwrap();
    let found = db.query("restaurant", &filters, 20).unwrap();
    assert!(
        !found.keys.is_empty(),
        "no Italian restaurant in the old town"
    );
    let row = &found.rows[0];

    // Before a selection nothing presents a restaurant; after it, the options read the row.
    let mut s = Session::new(&study, "r");
    run(&study, &mut s, Actor::System, Command::Start { seed: 11 });
    let presents = |s: &Session| -> HashSet<String> {
        engine::offered(&study, s)
            .into_iter()
            .filter(|o| o.state == "inform_opening_hours")
            .map(|o| o.text)
            .collect()
    };
    assert!(presents(&s).is_empty());
    let events = run(
        &study,
        &mut s,
        wizard(),
        Command::Select {
            table: "restaurant".into(),
            key: found.keys[0].clone(),
        },
    );
    assert!(matches!(events[0], EventKind::DbSelected { .. }));
    let texts = presents(&s);
    let name = row["name"].as_str().unwrap();
    let hours = row["opening_hours"].as_str().unwrap();
    assert_eq!(texts.len(), 1, "{texts:?}");
    let text = texts.into_iter().next().unwrap();
    assert!(
        text.contains(name) && text.contains(hours),
        "`{text}` does not read {name}, {hours}"
    );
    // No fixed restaurant variables are left in the world.
    assert!(
        study
            .study
            .world
            .variables
            .keys()
            .all(|k| !k.starts_with("restaurant_") && !k.starts_with("alt_") || k == "alt_offered"),
        "{:?}",
        study.study.world.variables.keys().collect::<Vec<_>>()
    );
}

#[test]
fn restaurant_booking_simulates_with_selections() {
    let study = load_builtin("restaurant-booking").unwrap();
    simulate_covers(&study, 300);
}
