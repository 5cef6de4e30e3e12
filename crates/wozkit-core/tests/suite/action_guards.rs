//! Action guards written as parts, each with the reason the wizard is given: a refusal names
//! the part that does not hold, in the study's words, with the robot's and place's names; a
//! part that does not compile is reported where it is written.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{Command, Refusal, Session, step};
use wozkit_core::event::{Actor, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_builtin, load_text};

const WIZARD: Actor = Actor::Participant {
    role: Role::Wizard,
    participant: None,
};

fn started(study: &LoadedStudy) -> Session {
    let s = Session::new(study, "t");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    step(
        study,
        &s,
        &Actor::System,
        Command::Start { seed: 7 },
        1_000,
        &mut rng,
    )
    .expect("start")
    .session
}

fn act(
    study: &LoadedStudy,
    s: &Session,
    action: &str,
    robot: &str,
    target: Option<&str>,
) -> Refusal {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let cmd = Command::Act {
        action: action.into(),
        robot: robot.into(),
        target: target.map(Into::into),
    };
    match step(study, s, &WIZARD, cmd, 2_000, &mut rng) {
        Ok(_) => panic!("{action} by {robot} should be refused"),
        Err(r) => r,
    }
}

#[test]
fn a_refused_action_says_which_part_of_its_guard_does_not_hold() {
    let study = load_builtin("offshore-emergency").expect("built-in study");
    let s = started(&study);
    let fire = s
        .world
        .get("fire_location")
        .and_then(|v| v.as_str())
        .expect("drawn")
        .to_string();
    let elsewhere = ["pu_nt", "pu_et", "pu_wt", "pu_st"]
        .into_iter()
        .find(|l| *l != fire)
        .expect("another tower");
    // Before the alarm is given, nothing is sent.
    let r = act(&study, &s, "send", "qdc1", Some(&fire));
    assert_eq!(r.to_string(), "First tell the operator about the alarm.");
    assert!(matches!(r, Refusal::GuardFailed { ref action, .. } if action == "Send to location"));

    // With the alarm given: the wrong tower, named as the study names it.
    let mut given = s.clone();
    std::sync::Arc::make_mut(&mut given.world)
        .insert("alert_given".into(), serde_json::Value::Bool(true));
    let place = study
        .study
        .world
        .locations
        .iter()
        .find(|l| l.id == elsewhere)
        .map(|l| l.name.clone())
        .expect("location");
    assert_eq!(
        act(&study, &given, "send", "qdc1", Some(elsewhere)).to_string(),
        format!("Robots are sent only to the alarm area, and the {place} is not it.")
    );
    // A robot without a camera before the emergency is identified.
    assert_eq!(
        act(&study, &given, "send", "hsk1", Some(&fire)).to_string(),
        "husky 1 has no camera to identify the emergency: send a robot that can inspect first."
    );
    // An action on site, with the robot still at the base.
    assert_eq!(
        act(&study, &given, "inspect", "qdc1", None).to_string(),
        "quadcopter 1 must be in the alarm area first."
    );
    // A guard of one condition keeps the general sentence.
    let one = load_text(
        "study.yaml",
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/studies/offshore-emergency/study.yaml"
        ))
        .expect("study file")
        .replace(
            "    guard:\n      - if: \"robot.location == fire_location\"\n        else: \"{robot} must be in the alarm area first.\"\n      - if: \"!fire_inspected\"\n        else: \"The area has already been inspected.\"",
            "    guard: \"robot.location == fire_location && !fire_inspected\"",
        ),
        StudySource::Dir(concat!(env!("CARGO_MANIFEST_DIR"), "/studies/offshore-emergency").into()),
    )
    .expect("loads");
    let s1 = started(&one);
    assert_eq!(
        act(&one, &s1, "inspect", "qdc1", None).to_string(),
        "“Inspect the area” is not possible now"
    );
}

#[test]
fn a_guard_part_that_does_not_compile_is_reported_where_it_is_written() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/studies/restaurant-booking");
    let text = std::fs::read_to_string(format!("{dir}/study.yaml"))
        .expect("study file")
        .replace(
            "      - if: booking_approved\n",
            "      - if: bookin_approved\n",
        );
    let line = text
        .lines()
        .position(|l| l.contains("if: bookin_approved"))
        .expect("the edited line")
        + 1;
    let err = match load_text("study.yaml", &text, StudySource::Dir(dir.into())) {
        Ok(_) => panic!("an unknown variable in a guard part is refused"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("bookin_approved"), "{err}");
    assert!(
        err.contains(&format!("study.yaml:{line}:")),
        "line {line}: {err}"
    );
    assert!(err.contains("booking_approved"), "did you mean: {err}");
}
