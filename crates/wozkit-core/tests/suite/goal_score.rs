//! Goal-based scores on hand-made dialogues: event lists written out turn by turn (the worked
//! example of `docs/goal-scores.md` is `success_the_worked_example`).

use serde_json::json;
use wozkit_core::database::{Filter, FilterOp, Row};
use wozkit_core::event::{Actor, EndReason, Event, EventKind, MessageSource, Role};
use wozkit_core::goal_score::{fingerprint, score};
use wozkit_core::goals::{Goal, GoalRange, GoalSlot, SubGoal};

fn slot(name: &str, value: &str) -> GoalSlot {
    GoalSlot {
        slot: name.into(),
        value: value.into(),
        reference: None,
        range: None,
    }
}

/// One Italian restaurant under 30, in the centre; the user asks for its name and phone.
fn goal() -> Goal {
    let mut price = slot("price", "under 30");
    price.range = Some(GoalRange {
        min: None,
        max: Some(30.0),
    });
    Goal {
        subgoals: vec![SubGoal {
            id: 1,
            domain: "restaurant".into(),
            table: "restaurant".into(),
            row: "r1".into(),
            constraints: vec![slot("cuisine", "italian"), price, slot("area", "centre")],
            requests: vec![slot("name", ""), slot("phone", "")],
        }],
    }
}

fn row(id: &str) -> Row {
    let v = match id {
        "r1" => json!({"id": "r1", "name": "Da Mario", "cuisine": "italian", "price": 25,
                       "area": "centre", "phone": "0123 456", "hours": "12-22"}),
        _ => json!({"id": "r2", "name": "Wok Inn", "cuisine": "chinese", "price": 18,
                    "area": "north", "phone": "0999 111", "hours": "11-23"}),
    };
    serde_json::from_value(v).expect("a row")
}

/// Builds a log from short steps.
struct Log(Vec<Event>);

impl Log {
    fn new(goal: Option<Goal>) -> Log {
        let mut log = Log(vec![]);
        if let Some(goal) = goal {
            log.push(
                Actor::System,
                EventKind::GoalGenerated {
                    seed: 7,
                    goal,
                    description: vec![],
                },
            );
        }
        log
    }
    fn push(&mut self, actor: Actor, kind: EventKind) -> &mut Log {
        self.0.push(Event {
            v: 1,
            session: "s".into(),
            seq: self.0.len() as u64 + 1,
            at_ms: 1000 * self.0.len() as u64,
            actor,
            kind,
        });
        self
    }
    fn say(&mut self, role: Role, text: &str) -> &mut Log {
        let actor = Actor::Participant {
            role,
            participant: None,
        };
        self.push(
            actor,
            EventKind::Message {
                role,
                text: text.into(),
                source: MessageSource::Free,
            },
        )
    }
    fn search(&mut self, column: &str, value: &str) -> &mut Log {
        let filter = Filter {
            column: column.into(),
            op: FilterOp::Equals {
                value: json!(value),
            },
        };
        self.push(
            Actor::System,
            EventKind::DbQueried {
                table: "restaurant".into(),
                filters: vec![filter],
                result_keys: vec![],
                rows: vec![],
            },
        )
    }
    fn select(&mut self, key: &str) -> &mut Log {
        self.push(
            Actor::System,
            EventKind::DbSelected {
                table: "restaurant".into(),
                key: key.into(),
                row: row(key),
            },
        )
    }
    fn end(&mut self) -> Vec<Event> {
        self.push(
            Actor::System,
            EventKind::SessionEnded {
                reason: EndReason::Finished,
                goal_reached: true,
            },
        );
        self.0.clone()
    }
}

#[test]
fn success_the_worked_example() {
    let events = Log::new(Some(goal()))
        .say(
            Role::User,
            "An italian place in the centre, under 30 please.",
        )
        .search("cuisine", "italian")
        .select("r1")
        .say(
            Role::Wizard,
            "Da Mario is Italian. Shall I give you the number?",
        )
        .say(Role::User, "Yes please.")
        .say(Role::Wizard, "It is 0123 456.")
        .say(Role::User, "Thanks, bye.")
        .end();
    let s = score(&events).expect("a goal");
    assert!(s.success);
    assert_eq!((s.constraints_informed, s.constraints), (3, 3));
    assert_eq!((s.requests_answered, s.requests), (2, 2));
    assert_eq!((s.subgoals_matched, s.subgoals), (1, 1));
    assert_eq!(s.unrequested_informs, 0);
    assert_eq!(
        (s.inform_precision, s.inform_recall, s.inform_f1),
        (Some(1.0), Some(1.0), Some(1.0))
    );
    assert_eq!(s.turns, 5);
    assert_eq!(s.turns_to_success, Some(4));
}

#[test]
fn a_wrong_row_selected_fails_though_everything_was_told() {
    let events = Log::new(Some(goal()))
        .say(
            Role::User,
            "An italian place in the centre, under 30 please.",
        )
        .search("cuisine", "italian")
        .select("r2")
        .say(Role::Wizard, "Wok Inn, in the north, phone 0999 111.")
        .say(Role::User, "Thanks.")
        .end();
    let s = score(&events).expect("a goal");
    assert!(!s.success);
    assert_eq!((s.subgoals_matched, s.subgoals), (0, 1));
    // The name and the phone of the selected row answer the requests; the area is a constraint,
    // so telling it is no unrequested inform.
    assert_eq!((s.requests_answered, s.unrequested_informs), (2, 0));
    assert_eq!(s.inform_recall, Some(1.0));
    assert_eq!(s.turns_to_success, None);
}

#[test]
fn a_missed_request_fails_with_half_the_recall() {
    let events = Log::new(Some(goal()))
        .say(
            Role::User,
            "An italian place in the centre, under 30 please.",
        )
        .search("cuisine", "italian")
        .select("r1")
        .say(Role::Wizard, "Da Mario would suit you.")
        .say(Role::User, "Bye.")
        .end();
    let s = score(&events).expect("a goal");
    assert!(!s.success);
    assert_eq!((s.requests_answered, s.requests), (1, 2));
    assert_eq!(s.subgoals_matched, 1);
    assert_eq!(s.inform_precision, Some(1.0));
    assert_eq!(s.inform_recall, Some(0.5));
    let f1 = s.inform_f1.expect("f1");
    assert!((f1 - 2.0 / 3.0).abs() < 1e-12, "{f1}");
}

#[test]
fn partial_informs_count_constraints_and_unrequested_slots() {
    // The user never says "centre" and the wizard searches only the cuisine: the area is not
    // informed, though the selected row happens to meet it. The opening hours were not asked.
    let events = Log::new(Some(goal()))
        .say(Role::User, "Something italian, under 30.")
        .search("cuisine", "italian")
        .select("r1")
        .say(Role::Wizard, "Da Mario, 0123 456, open 12-22.")
        .end();
    let s = score(&events).expect("a goal");
    assert!(!s.success);
    assert_eq!((s.constraints_informed, s.constraints), (2, 3));
    assert_eq!(s.subgoals_matched, 1);
    assert_eq!((s.requests_answered, s.unrequested_informs), (2, 1));
    let p = s.inform_precision.expect("precision");
    assert!((p - 2.0 / 3.0).abs() < 1e-12, "{p}");
    assert_eq!(s.inform_recall, Some(1.0));
    let f1 = s.inform_f1.expect("f1");
    assert!((f1 - 0.8).abs() < 1e-12, "{f1}");
}

#[test]
fn success_counts_from_the_turn_after_which_it_held_to_the_end() {
    // Met at turn 2, lost when the wizard switches to the wrong row, met again at turn 4.
    let events = Log::new(Some(goal()))
        .say(
            Role::User,
            "An italian place in the centre, under 30 please.",
        )
        .search("cuisine", "italian")
        .select("r1")
        .say(Role::Wizard, "Da Mario, 0123 456.")
        .select("r2")
        .say(Role::Wizard, "Or Wok Inn?")
        .select("r1")
        .say(Role::Wizard, "No, Da Mario it is.")
        .end();
    let s = score(&events).expect("a goal");
    assert!(s.success);
    assert_eq!(s.turns_to_success, Some(4));
    // Switching back and forth ends on the wrong row: no success.
    let mut log = Log::new(Some(goal()));
    log.say(
        Role::User,
        "An italian place in the centre, under 30 please.",
    )
    .search("cuisine", "italian")
    .select("r1")
    .say(Role::Wizard, "Da Mario, 0123 456.")
    .select("r2");
    let s = score(&log.end()).expect("a goal");
    assert!(!s.success);
    assert_eq!(s.turns_to_success, None);
}

#[test]
fn naming_the_selected_result_is_no_unrequested_inform() {
    // A goal that does not ask for the name: the wizard names the result anyway. The logged
    // belief state says that `Da Mario` is the selected result's name, so it is not counted;
    // without turn_state events only the key is known, and the name counts.
    let mut g = goal();
    g.subgoals[0].requests.remove(0);
    let turn_state = |turn: u32| {
        let belief = json!({"restaurant": {"constraints": {}, "selected_results": ["Da Mario"]}});
        EventKind::TurnState {
            turn,
            role: Role::Wizard,
            user_state: vec![],
            sys_state: serde_json::from_value(belief).expect("a belief"),
            sys_state_init: Default::default(),
        }
    };
    let mut log = Log::new(Some(g.clone()));
    log.say(
        Role::User,
        "An italian place in the centre, under 30 please.",
    )
    .select("r1")
    .say(Role::Wizard, "Da Mario: 0123 456.")
    .push(Actor::System, turn_state(1));
    let s = score(&log.end()).expect("a goal");
    assert_eq!((s.unrequested_informs, s.inform_precision), (0, Some(1.0)));
    assert!(s.success);
    let mut log = Log::new(Some(g));
    log.say(
        Role::User,
        "An italian place in the centre, under 30 please.",
    )
    .select("r1")
    .say(Role::Wizard, "Da Mario: 0123 456.");
    let s = score(&log.end()).expect("a goal");
    assert_eq!((s.unrequested_informs, s.inform_precision), (1, Some(0.5)));
}

#[test]
fn a_session_without_a_goal_has_no_score() {
    let events = Log::new(None)
        .say(Role::User, "Hello.")
        .say(Role::Wizard, "Hi!")
        .end();
    assert_eq!(score(&events), None);
}

#[test]
fn the_fingerprint_names_the_task_not_what_was_told() {
    let mut told = goal();
    told.subgoals[0].requests[1].value = "0123 456".into();
    assert_eq!(fingerprint(&goal()), fingerprint(&told));
    let mut other = goal();
    other.subgoals[0].constraints[0].value = "chinese".into();
    assert_ne!(fingerprint(&goal()), fingerprint(&other));
    assert_eq!(fingerprint(&goal()).len(), 16);
}

/// Sessions played by the engine on the goals fixture study: the user says every constraint, the
/// wizard selects each sub-goal's drawn row and tells its requested values. Every such session
/// succeeds, and the score's counts agree with the engine's last `turn_state`.
#[test]
fn engine_played_sessions_that_follow_the_goal_succeed() {
    use rand::SeedableRng;
    use wozkit_core::database::value_text;
    use wozkit_core::engine::{Command, Session, step};
    use wozkit_core::load::load_path;

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/goals-study");
    let study = load_path(&dir).expect("the goals study loads");
    let db = study.database.as_deref().expect("a database");
    let mut referring = 0;
    for seed in 0..40 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut session = Session::new(&study, "g");
        let mut log: Vec<Event> = vec![];
        let mut run = |s: &mut Session, actor: Actor, cmd: Command| {
            let now = 1_000 + log.len() as u64;
            let st = step(&study, s, &actor, cmd, now, &mut rng).expect("accepted");
            for (actor, kind) in st.events {
                let seq = log.len() as u64 + 1;
                log.push(Event {
                    v: 1,
                    session: "g".into(),
                    seq,
                    at_ms: now,
                    actor,
                    kind,
                });
            }
            *s = st.session;
        };
        let person = |role| Actor::Participant {
            role,
            participant: None,
        };
        run(&mut session, Actor::System, Command::Start { seed });
        let goal = session.goal.as_ref().expect("a goal").goal.clone();
        let refers = |sg: &&SubGoal| sg.constraints.iter().any(|c| c.reference.is_some());
        referring += goal.subgoals.iter().filter(refers).count();
        let said: Vec<String> = goal
            .subgoals
            .iter()
            .flat_map(|sg| &sg.constraints)
            .filter(|c| c.reference.is_none())
            .map(|c| c.value.clone())
            .collect();
        let text = format!("I want {}.", said.join(" and "));
        run(&mut session, person(Role::User), Command::Text { text });
        for sg in &goal.subgoals {
            let key = sg.row.clone();
            let table = sg.table.clone();
            let row = db.select(&table, &key).expect("the drawn row");
            run(
                &mut session,
                person(Role::Wizard),
                Command::Select { table, key },
            );
            let told: Vec<String> = sg
                .requests
                .iter()
                .map(|r| value_text(&row[&r.slot]))
                .collect();
            let text = format!("Here: {}.", told.join("; "));
            run(&mut session, person(Role::Wizard), Command::Text { text });
        }
        let s = score(&log).expect("a goal");
        assert!(s.success, "seed {seed}: {s:?}");
        assert_eq!(s.inform_recall, Some(1.0), "seed {seed}");
        assert_eq!(s.turns_to_success, Some(s.turns), "seed {seed}");
        let last = log
            .iter()
            .rev()
            .find_map(|e| match &e.kind {
                EventKind::TurnState { user_state, .. } => Some(user_state.clone()),
                _ => None,
            })
            .expect("turn states");
        assert!(last.iter().all(|e| e.satisfied), "seed {seed}: {last:?}");
        assert_eq!(
            (s.constraints + s.requests) as usize,
            last.len(),
            "seed {seed}"
        );
    }
    assert!(referring > 0, "some goal refers to an earlier sub-goal");
}
