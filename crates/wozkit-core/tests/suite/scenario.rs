//! Scenario variation: the draw is logged before anything reads the world, replay takes the
//! event (not the seed), the offshore study's variants change the world and the texts, every
//! variant is simulated, and each scenario mistake is reported where it is.

use crate::common;

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use wozkit_core::engine::{self, Command, Refusal, Session, replay, step};
use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_core::scenario::Values;
use wozkit_core::sim::{self, WizardPolicy};

const WIZARD: Actor = Actor::Participant {
    role: Role::Wizard,
    participant: None,
};

fn offshore() -> LoadedStudy {
    load_builtin("offshore-emergency").expect("the offshore study loads")
}

/// A session driven step by step, its log kept as the store keeps it.
struct Run {
    study: LoadedStudy,
    s: Session,
    log: Vec<Event>,
    rng: ChaCha8Rng,
    now: u64,
}

impl Run {
    fn start(study: LoadedStudy, seed: u64, fixed: &Values) -> Run {
        let s = Session::new(&study, "t");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let st = engine::start_with_scenario(&study, &s, seed, fixed, 1_000, &mut rng)
            .expect("the session starts");
        let mut r = Run {
            study,
            s: st.session.clone(),
            log: vec![],
            rng,
            now: 1_000,
        };
        r.record(st.events);
        r
    }
    fn record(&mut self, events: Vec<(Actor, EventKind)>) {
        for (a, k) in events {
            self.log.push(Event {
                v: 1,
                session: "t".into(),
                seq: self.log.len() as u64 + 1,
                at_ms: self.now,
                actor: a,
                kind: k,
            });
        }
    }
    fn run(&mut self, actor: &Actor, cmd: Command) -> Result<Vec<EventKind>, Refusal> {
        let st = step(&self.study, &self.s, actor, cmd, self.now, &mut self.rng)?;
        self.s = st.session;
        let kinds = st.events.iter().map(|(_, k)| k.clone()).collect();
        self.record(st.events);
        Ok(kinds)
    }
    fn say(&mut self, state: &str) -> String {
        let events = self
            .run(
                &WIZARD,
                Command::Say {
                    state: state.into(),
                },
            )
            .unwrap_or_else(|e| panic!("saying {state} refused: {e}"));
        events
            .into_iter()
            .find_map(|k| match k {
                EventKind::Message { text, .. } => Some(text),
                _ => None,
            })
            .expect("a message")
    }
}

fn fixed(pairs: &[(&str, serde_json::Value)]) -> Values {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn location_name(study: &LoadedStudy, id: &str) -> String {
    study
        .study
        .world
        .locations
        .iter()
        .find(|l| l.id == id)
        .map(|l| l.name.clone())
        .unwrap_or_else(|| panic!("no location {id}"))
}

#[test]
fn a_live_start_logs_the_draw_right_after_the_start_and_the_world_follows_it() {
    let study = offshore();
    let s = Session::new(&study, "t");
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let st = step(
        &study,
        &s,
        &Actor::System,
        Command::Start { seed: 11 },
        1_000,
        &mut rng,
    )
    .expect("start");
    let kinds: Vec<&EventKind> = st.events.iter().map(|(_, k)| k).collect();
    assert!(matches!(kinds[0], EventKind::SessionStarted { .. }));
    let EventKind::ScenarioDrawn {
        values,
        world,
        out_of_service,
    } = kinds[1]
    else {
        panic!("the second event is not the draw: {:?}", kinds[1]);
    };
    let names: Vec<&str> = values.keys().map(String::as_str).collect();
    assert_eq!(names, ["fire_location", "robot_out", "travel_distance_m"]);
    for (k, v) in values.iter().chain(world) {
        assert_eq!(&st.session.world[k], v, "world {k}");
    }
    let at = values["fire_location"].as_str().unwrap();
    assert_eq!(
        st.session.world["fire_area"].as_str().unwrap(),
        location_name(&study, at)
    );
    let d = values["travel_distance_m"].as_f64().unwrap();
    assert!((40.0..=100.0).contains(&d), "{d}");
    for (def, r) in study.study.world.robots.iter().zip(&st.session.robots) {
        assert_eq!(
            r.in_service,
            !out_of_service.contains(&def.id),
            "{}",
            def.id
        );
    }
    // The map's alarm is where the drawn fire is.
    assert_eq!(engine::alarm(&study, &st.session).map(|(a, _)| a), Some(at));
}

#[test]
fn draws_follow_the_weights_over_many_sessions() {
    let study = offshore();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let n = 3_000;
    for seed in 0..n {
        let r = Run::start(study.clone(), seed, &Values::new());
        let at = r.s.world["fire_location"].as_str().unwrap().to_string();
        *counts.entry(at).or_default() += 1;
    }
    // Weights 3 : 2 : 1. The standard deviation of a share at n = 3000 is under 0.01.
    for (at, w) in [("pu_et", 0.5), ("pu_nt", 1.0 / 3.0), ("pu_wt", 1.0 / 6.0)] {
        let share = counts.get(at).copied().unwrap_or(0) as f64 / n as f64;
        assert!(
            (share - w).abs() < 0.05,
            "{at}: {share} vs {w} ({counts:?})"
        );
    }
}

#[test]
fn replay_takes_the_logged_draw_not_the_seed() {
    let study = offshore();
    let mut r = Run::start(
        study.clone(),
        5,
        &fixed(&[("fire_location", json!("pu_nt"))]),
    );
    r.run(
        &WIZARD,
        Command::Join {
            role: Role::Wizard,
            bot: false,
        },
    )
    .unwrap();
    let replayed = replay(&study, "t", &r.log);
    assert_eq!(replayed, r.s, "a replay of the log is the live session");
    // Edit the logged draw: the replay follows the event, though the seed is unchanged.
    let mut log = r.log.clone();
    for e in &mut log {
        if let EventKind::ScenarioDrawn { values, world, .. } = &mut e.kind {
            values.insert("fire_location".into(), json!("pu_wt"));
            world.insert("fire_location".into(), json!("pu_wt"));
            world.insert("fire_area".into(), json!("somewhere else"));
        }
    }
    let edited = replay(&study, "t", &log);
    assert_eq!(edited.seed, r.s.seed);
    assert_eq!(edited.world["fire_location"], json!("pu_wt"));
    assert_eq!(edited.world["fire_area"], json!("somewhere else"));
}

#[test]
fn the_texts_name_the_drawn_place() {
    for at in ["pu_et", "pu_nt", "pu_wt"] {
        let study = offshore();
        let name = location_name(&study, at);
        let mut r = Run::start(study, 2, &fixed(&[("fire_location", json!(at))]));
        r.say("intro_hello");
        let alert = r.say("inform_alert_emergency");
        assert!(alert.contains(&name), "{at}: {alert}");
        let offers = engine::offered(&r.study, &r.s);
        let pa = offers
            .iter()
            .find(|o| o.state == "request_pa_announcement")
            .expect("the PA announcement is offered");
        assert!(pa.text.contains(&name), "{at}: {}", pa.text);
        for other in ["pu_et", "pu_nt", "pu_wt"].iter().filter(|o| **o != at) {
            let other_name = location_name(&r.study, other);
            assert!(!alert.contains(&other_name), "{at}: {alert}");
        }
    }
}

#[test]
fn an_out_of_service_robot_takes_no_action_and_the_wizard_can_say_so() {
    let study = offshore();
    let mut r = Run::start(study, 3, &fixed(&[("robot_out", json!("hsk2"))]));
    assert!(!r.s.robots[1].in_service, "husky 2 is out");
    r.say("intro_hello");
    r.say("inform_alert_emergency");
    let at = r.s.world["fire_location"].as_str().unwrap().to_string();
    let refused = r
        .run(
            &WIZARD,
            Command::Act {
                action: "send".into(),
                robot: "hsk2".into(),
                target: Some(at.clone()),
            },
        )
        .unwrap_err();
    assert_eq!(
        refused,
        Refusal::OutOfService {
            robot: "husky 2".into()
        }
    );
    let note = r.say("inform_robot_out_of_service");
    assert!(note.contains("husky 2"), "{note}");
    // The other camera robot goes instead.
    r.run(
        &WIZARD,
        Command::Act {
            action: "send".into(),
            robot: "qdc1".into(),
            target: Some(at),
        },
    )
    .expect("quadcopter 1 is sent");
}

#[test]
fn travel_time_is_the_drawn_distance_over_the_robot_speed() {
    for (distance, robot, speed) in [(40, "hsk2", 2.0), (100, "qdc1", 4.0)] {
        let study = offshore();
        let mut r = Run::start(study, 4, &fixed(&[("travel_distance_m", json!(distance))]));
        // Only a drawn variable can be fixed; a range variable fixed here stands for its draw.
        assert_eq!(r.s.world["travel_distance_m"], json!(distance));
        r.say("intro_hello");
        r.say("inform_alert_emergency");
        let at = r.s.world["fire_location"].as_str().unwrap().to_string();
        let events = r.run(
            &WIZARD,
            Command::Act {
                action: "send".into(),
                robot: robot.into(),
                target: Some(at),
            },
        );
        let events = events.unwrap_or_else(|e| panic!("{robot} is not sent: {e}"));
        let ends = events
            .iter()
            .find_map(|k| match k {
                EventKind::ActionStarted { ends_at_ms, .. } => Some(*ends_at_ms),
                _ => None,
            })
            .expect("the action started");
        let expected = (f64::from(distance) / speed * 1000.0) as u64;
        assert_eq!(ends - r.now, expected, "{robot} over {distance} m");
    }
}

#[test]
fn simulate_plays_every_value_of_every_choice_and_each_variant_completes() {
    let study = offshore();
    let rows = sim::simulate_variants(&study, 30, 1, WizardPolicy::Priors);
    for (name, var) in &study.study.scenario.variables {
        let Some(choices) = &var.choice else { continue };
        for c in choices {
            assert!(
                rows.iter().any(|r| r.fixed.get(name) == Some(&c.value)),
                "{name}={} is never simulated",
                c.value
            );
        }
    }
    for row in &rows {
        assert_eq!(row.sessions, 30);
        assert!(
            row.dead_ends.is_empty(),
            "{}: {:?}",
            row.label,
            row.dead_ends
        );
        assert!(
            row.goal_reached > 0,
            "{}: no session reached the goal",
            row.label
        );
        assert!(row.turns.mean > 0.0);
    }
    // A played session of the variant holds the fixed values in its draw.
    let row = &rows[0];
    let played = sim::play_variant(&study, 9, WizardPolicy::Priors, &row.fixed);
    let drawn = played
        .events
        .iter()
        .find_map(|(_, k, _)| match k {
            EventKind::ScenarioDrawn { values, .. } => Some(values.clone()),
            _ => None,
        })
        .expect("the draw is logged");
    for (k, v) in &row.fixed {
        assert_eq!(&drawn[k], v);
    }
    // The wizard's messages of a played session come from states or options, as in a live one.
    assert!(played.events.iter().any(|(_, k, _)| matches!(
        k,
        EventKind::Message {
            source: MessageSource::State { .. },
            ..
        }
    )));
}

// ------------------------------------------------------------------ loader

/// The fixture with a scenario section appended; returns the problems and the line the
/// section starts on.
fn with_scenario(section: &str) -> (Vec<String>, usize) {
    let text = format!("{}{section}", common::MINI);
    let first = common::MINI.lines().count() + 1;
    (common::problems(&text), first)
}

fn has(problems: &[String], expected: &str) {
    assert!(
        problems.iter().any(|p| p == expected),
        "expected `{expected}` among {problems:#?}"
    );
}

#[test]
fn a_valid_scenario_loads() {
    let (p, _) = with_scenario(
        "scenario:\n  variables:\n    area:\n      choice: [{value: east tower, weight: 2}, {value: west tower}]\n  set:\n    fire_out: \"area == 'nowhere'\"\n  out_of_service:\n    h1: \"area == 'west tower'\"\n",
    );
    assert!(p.is_empty(), "{p:?}");
}

#[test]
fn a_scenario_variable_that_is_no_world_variable() {
    let (p, l) = with_scenario("scenario:\n  variables:\n    aera:\n      choice: [{value: x}]\n");
    has(
        &p,
        &format!(
            "{}:5: scenario variable `aera` is not a world variable",
            l + 2
        ),
    );
}

#[test]
fn an_empty_choice() {
    let (p, l) = with_scenario("scenario:\n  variables:\n    area:\n      choice: []\n");
    has(
        &p,
        &format!("{}:7: scenario variable `area` has an empty choice", l + 3),
    );
}

#[test]
fn a_weight_that_is_not_positive() {
    let (p, l) = with_scenario(
        "scenario:\n  variables:\n    area:\n      choice:\n        - {value: a}\n        - {value: b, weight: 0}\n        - {value: c, weight: -1}\n",
    );
    has(
        &p,
        &format!("{}:22: weight 0 of `area` = \"b\" is not positive", l + 5),
    );
    has(
        &p,
        &format!("{}:22: weight -1 of `area` = \"c\" is not positive", l + 6),
    );
}

#[test]
fn a_range_with_min_above_max() {
    let (p, l) =
        with_scenario("scenario:\n  variables:\n    area:\n      range: {min: 10, max: 2}\n");
    has(
        &p,
        &format!("{}:7: range of `area` has min 10 above max 2", l + 3),
    );
}

#[test]
fn neither_choice_nor_range() {
    let (p, l) = with_scenario("scenario:\n  variables:\n    area: {}\n");
    has(
        &p,
        &format!(
            "{}:5: scenario variable `area` needs exactly one of `choice` and `range`",
            l + 2
        ),
    );
}

#[test]
fn an_expression_naming_an_unknown_variable() {
    let (p, l) = with_scenario(
        "scenario:\n  set:\n    area: \"{'a': 'x'}[fire_place]\"\n  out_of_service:\n    h1: \"brokn\"\n    h9: \"false\"\n",
    );
    has(
        &p,
        &format!(
            "{}:5: expression names unknown variable `fire_place`",
            l + 2
        ),
    );
    has(
        &p,
        &format!("{}:5: expression names unknown variable `brokn`", l + 4),
    );
    has(&p, &format!("{}:5: unknown robot `h9`", l + 5));
}

#[test]
fn a_set_of_an_undeclared_variable_and_an_unknown_distance() {
    let (p, l) = with_scenario("scenario:\n  set:\n    colour: \"'red'\"\n");
    has(&p, &format!("{}:5: unknown world variable `colour`", l + 2));
    let text = common::MINI.replacen(
        "    duration: {default: 20, by_kind: {ground: 30}}\n",
        "    duration: {default: 20, by_kind: {ground: 30}}\n    distance: area\n",
        1,
    );
    let line = text
        .lines()
        .position(|x| x.contains("distance: area"))
        .unwrap()
        + 1;
    has(
        &common::problems(&text),
        &format!("{line}:5: `area` is not a numeric world variable"),
    );
}

#[test]
fn the_graph_shows_where_the_scenario_enters() {
    let study = offshore();
    let dot = wozkit_core::graph::to_dot(&study);
    let line = |id: &str| {
        dot.lines()
            .find(|l| l.trim_start().starts_with(&format!("\"{id}\" [")))
            .unwrap_or_else(|| panic!("no node {id} in\n{dot}"))
            .to_string()
    };
    assert!(line("scenario").contains("fire_location, robot_out, travel_distance_m"));
    assert!(dot.contains("\"scenario\" -> \"start\" [style=dotted]"));
    // The alert names the drawn area; the greeting reads nothing drawn.
    assert!(line("inform_alert_emergency").contains("varies: fire_area"));
    assert!(line("inform_robot_out_of_service").contains("varies: robot_out, robot_out_name"));
    assert!(!line("intro_hello").contains("varies"));
    let mermaid = wozkit_core::graph::to_mermaid(&study);
    assert!(mermaid.contains("scenario_draw -.-> start"));
    let svg = wozkit_core::graph::to_svg(&study).expect("the diagram is drawn");
    assert!(svg.contains("scenario drawn at start"));
}

#[test]
fn the_draw_event_round_trips_in_the_log_format() {
    let study = offshore();
    let r = Run::start(study, 8, &fixed(&[("robot_out", json!("qdc2"))]));
    let event = r.log[1].clone();
    let text = serde_json::to_string(&event).expect("serialises");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["kind"], "scenario_drawn");
    assert_eq!(v["values"]["robot_out"], "qdc2");
    assert_eq!(v["out_of_service"], json!(["qdc2"]));
    let back: Event = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, event);
    // A log line with the drawn values only still reads (world and robots default to none).
    let bare = r#"{"v":1,"session":"t","seq":2,"at_ms":1,"actor":{"type":"system"},"kind":"scenario_drawn","values":{"fire_location":"pu_nt"}}"#;
    let e: Event = serde_json::from_str(bare).expect("reads");
    assert!(
        matches!(e.kind, EventKind::ScenarioDrawn { ref world, ref out_of_service, .. }
        if world.is_empty() && out_of_service.is_empty())
    );
}
