//! User goals: drawn per session from a study's tables by its `goals:` rules (seeded, from real
//! rows, with cross-domain references), logged as `goal_generated`, and followed turn by turn in
//! `turn_state` events.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use wozkit_core::database::{Filter, FilterOp, value_text};
use wozkit_core::engine::{Command, Session, replay, step};
use wozkit_core::event::{Actor, Event, EventKind, Role};
use wozkit_core::goals::{self, EntryKind, Goal};
use wozkit_core::load::{LoadedStudy, load_path};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/goals-study")
}

fn study() -> LoadedStudy {
    load_path(&fixture()).expect("the goals study loads")
}

fn goal(study: &LoadedStudy, seed: u64) -> Goal {
    goals::generate(
        study.study.goals.as_ref().unwrap(),
        study.database.as_deref().unwrap(),
        seed,
    )
    .expect("a goal is drawn")
}

#[test]
fn the_same_seed_draws_the_same_goal_and_seeds_vary_it() {
    let study = study();
    let mut distinct: Vec<Goal> = vec![];
    for seed in 0..40 {
        let a = goal(&study, seed);
        assert_eq!(a, goal(&study, seed), "seed {seed}");
        if !distinct.contains(&a) {
            distinct.push(a);
        }
    }
    assert!(distinct.len() > 5, "{} distinct goals", distinct.len());
    // Both sub-goal counts of `subgoals: {min: 1, max: 2}` occur, and nothing else.
    let counts: std::collections::BTreeSet<usize> =
        distinct.iter().map(|g| g.subgoals.len()).collect();
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn constraints_come_from_a_real_row_that_the_search_finds() {
    let study = study();
    let db = study.database.as_deref().unwrap();
    let rules = study.study.goals.as_ref().unwrap();
    for seed in 0..60 {
        let g = goal(&study, seed);
        for sg in &g.subgoals {
            let rule = rules.domains.iter().find(|d| d.table == sg.table).unwrap();
            assert_eq!(sg.domain, rule.label());
            let row = db.select(&sg.table, &sg.row).expect("the drawn row exists");
            let mut filters = vec![];
            for c in sg.constraints.iter().filter(|c| c.reference.is_none()) {
                assert_eq!(c.value, value_text(&row[&c.slot]), "seed {seed}: {c:?}");
                assert!(!c.value.is_empty());
                assert!(
                    rule.constraints.columns.contains(&c.slot),
                    "{} is not a constraint column",
                    c.slot
                );
                filters.push(Filter {
                    column: c.slot.clone(),
                    op: FilterOp::Equals {
                        value: row[&c.slot].clone(),
                    },
                });
            }
            let n = sg
                .constraints
                .iter()
                .filter(|c| c.reference.is_none())
                .count();
            let allowed = if sg.table == "hotel" { 1..=1 } else { 1..=2 };
            assert!(allowed.contains(&n), "seed {seed}: {n} constraints");
            // The wizard's own search with the constraints finds the row.
            let found = db.query(&sg.table, &filters, 20).unwrap();
            assert!(found.keys.contains(&sg.row), "seed {seed}: {filters:?}");
            // Requests: the name always (unless a reference constrains it), never a constrained
            // column, values empty.
            let name_constrained = sg.constraints.iter().any(|c| c.slot == "name");
            assert_eq!(
                sg.requests[0].slot == "name",
                !name_constrained,
                "seed {seed}"
            );
            for r in &sg.requests {
                assert!(r.value.is_empty());
                assert!(!sg.constraints.iter().any(|c| c.slot == r.slot));
            }
        }
    }
}

#[test]
fn a_reference_draws_a_hotel_listed_near_the_attraction() {
    let study = study();
    let db = study.database.as_deref().unwrap();
    let mut with_ref = 0;
    let mut without = 0;
    for seed in 0..200 {
        let g = goal(&study, seed);
        if g.subgoals.len() < 2 {
            continue;
        }
        let (a, h) = (&g.subgoals[0], &g.subgoals[1]);
        assert_eq!(
            (a.table.as_str(), h.table.as_str()),
            ("attraction", "hotel")
        );
        let Some(c) = h.constraints.iter().find(|c| c.reference.is_some()) else {
            without += 1;
            continue;
        };
        with_ref += 1;
        let r = c.reference.as_ref().unwrap();
        assert_eq!((r.subgoal, r.column.as_str()), (1, "nearby_hotels"));
        assert_eq!(c.slot, "name");
        assert_eq!(c.value, "出现在id=1的周边酒店里");
        let arow = db.select("attraction", &a.row).unwrap();
        let hrow = db.select("hotel", &h.row).unwrap();
        let listing = value_text(&arow["nearby_hotels"]);
        let name = value_text(&hrow["name"]);
        assert!(
            goals::items(&listing).contains(&name),
            "seed {seed}: {name} is not near {}",
            value_text(&arow["name"])
        );
        // The referenced name is not requested again.
        assert!(!h.requests.iter().any(|r| r.slot == "name"));
        // The user reads the study's `reference` wording, never the stored `id=1`; without
        // one, the stored value.
        let plain = goals::describe(&g, None);
        assert!(
            plain[1].contains("name 出现在id=1的周边酒店里"),
            "{}",
            plain[1]
        );
        let text = goals::GoalText {
            reference: Some("one of the {column} of sub-goal {id}".into()),
            ..Default::default()
        };
        assert_eq!(
            text.shown_value(c),
            "one of the nearby_hotels of sub-goal 1"
        );
        let worded = goals::describe(&g, Some(&text));
        assert!(
            worded[1].contains("name one of the nearby_hotels of sub-goal 1")
                && !worded[1].contains("id="),
            "{}",
            worded[1]
        );
    }
    assert!(
        with_ref > 0 && without > 0,
        "{with_ref} with, {without} without"
    );
}

const BAD: &[(&str, &str, &str)] = &[
    (
        "columns: [fee, duration, rating]",
        "columns: [fee, opening, rating]",
        "the table `attraction` has no column `opening`",
    ),
    (
        "    - table: hotel\n",
        "    - table: hostel\n",
        "the database has no table `hostel`",
    ),
    (
        "probability: 0.5",
        "probability: 1.5",
        "a probability is between 0 and 1",
    ),
    (
        "subgoals: {min: 1, max: 2}",
        "subgoals: {min: 3, max: 2}",
        "min is at least 1 and at most max",
    ),
    (
        "      requests: {columns: [phone, address], count: {min: 1, max: 1}, always: [name]}\n",
        "      requests: {columns: [phone, address], count: {min: 1, max: 1}, always: [name]}\n      ranges: {price: [{min: 300, max: 100, text: cheap}]}\n",
        "a band has a min, a max or both (min at most max) and a text",
    ),
    (
        "      requests: {columns: [phone, address], count: {min: 1, max: 1}, always: [name]}\n",
        "      requests: {columns: [phone, address], count: {min: 1, max: 1}, always: [name]}\n      ranges: {address: [{min: 1, text: some}]}\n",
        "ranges on `address`, whose values are not numbers",
    ),
];

fn copy_fixture(yaml: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "wozkit-goals-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["attractions.csv", "hotels.csv"] {
        std::fs::copy(fixture().join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("study.yaml"), yaml).unwrap();
    dir
}

#[test]
fn loader_errors_say_what_and_where() {
    let yaml = std::fs::read_to_string(fixture().join("study.yaml")).unwrap();
    for (from, to, says) in BAD {
        assert!(yaml.contains(from), "{from}");
        let text = yaml.replacen(from, to, 1);
        let d = load_path(&copy_fixture(&text)).unwrap_err();
        let hit =
            d.0.iter()
                .find(|p| p.message.contains(says))
                .unwrap_or_else(|| panic!("no “{says}” in {d}"));
        // Reported on the line that was changed.
        let line = text
            .lines()
            .position(|l| l.contains(to.trim_end().lines().last().unwrap().trim()))
            .unwrap()
            + 1;
        assert_eq!(hit.line, line, "{says}: {d}");
    }
    // A reference to a later domain, and goals without a database.
    let swapped = yaml
        .replace("from: attraction", "from: HOLD")
        .replace("to: hotel", "to: attraction")
        .replace("from: HOLD", "from: hotel");
    let e = load_path(&copy_fixture(&swapped)).unwrap_err().to_string();
    assert!(e.contains("must come after `hotel`"), "{e}");
    let start = yaml.find("database:").unwrap();
    let end = yaml.find("goals:").unwrap();
    let no_db = format!("{}{}", &yaml[..start], &yaml[end..]);
    let no_db = no_db
        .replace(
            "{db.attraction.name}: phone {db.attraction.phone}, rated {db.attraction.rating}.",
            "A place.",
        )
        .replace(
            "{db.hotel.name}: phone {db.hotel.phone}, at {db.hotel.address}.",
            "A hotel.",
        );
    let e = load_path(&copy_fixture(&no_db)).unwrap_err().to_string();
    assert!(e.contains("the study has none"), "{e}");
}

fn actor(role: Role) -> Actor {
    Actor::Participant {
        role,
        participant: None,
    }
}

/// Starts a session whose goal is the one `seed` draws with two sub-goals; plays `cmds`.
fn play(study: &LoadedStudy, rng_seed: u64, cmds: Vec<(Role, Command)>) -> (Session, Vec<Event>) {
    let mut rng = ChaCha8Rng::seed_from_u64(rng_seed);
    let mut s = Session::new(study, "g");
    let mut log: Vec<Event> = vec![];
    let mut run = |s: &mut Session, actor: Actor, cmd: Command, log: &mut Vec<Event>| {
        let now = 1_000 + log.len() as u64;
        let st = step(study, s, &actor, cmd, now, &mut rng).expect("accepted");
        for (a, k) in st.events {
            log.push(Event {
                v: 1,
                session: "g".into(),
                seq: log.len() as u64 + 1,
                at_ms: now,
                actor: a,
                kind: k,
            });
        }
        *s = st.session;
    };
    run(
        &mut s,
        Actor::System,
        Command::Start { seed: rng_seed },
        &mut log,
    );
    for (role, cmd) in cmds {
        run(&mut s, actor(role), cmd, &mut log);
    }
    (s, log)
}

/// An RNG seed whose session draws a two-sub-goal goal (found by playing starts).
fn two_subgoal_seed(study: &LoadedStudy) -> u64 {
    (0..200)
        .find(|&seed| {
            let (s, _) = play(study, seed, vec![]);
            s.goal.as_ref().is_some_and(|t| t.goal.subgoals.len() == 2)
        })
        .expect("some seed draws two sub-goals")
}

#[test]
fn the_goal_is_logged_after_the_start_and_replay_never_redraws() {
    let study = study();
    let (s, log) = play(&study, 3, vec![]);
    assert!(matches!(log[0].kind, EventKind::SessionStarted { .. }));
    let EventKind::GoalGenerated {
        seed,
        goal,
        description,
    } = &log[1].kind
    else {
        panic!("goal_generated follows session_started: {:?}", log[1].kind)
    };
    assert_eq!(
        goal,
        &goals::generate(
            study.study.goals.as_ref().unwrap(),
            study.database.as_deref().unwrap(),
            *seed
        )
        .unwrap()
    );
    assert_eq!(description.len(), goal.subgoals.len());
    assert_eq!(&s.goal.as_ref().unwrap().goal, goal);
    // Replay takes the logged goal, even when the log's seed would draw another one.
    let mut forged = log.clone();
    if let EventKind::GoalGenerated { seed, .. } = &mut forged[1].kind {
        *seed += 1;
    }
    assert_eq!(&replay(&study, "g", &forged).goal.unwrap().goal, goal);
    // The event survives JSON.
    let back: Vec<Event> = serde_json::from_str(&serde_json::to_string(&log).unwrap()).unwrap();
    assert_eq!(back, log);
}

#[test]
fn turn_states_follow_every_message_and_tick_the_goal() {
    let study = study();
    let seed = two_subgoal_seed(&study);
    let (s0, _) = play(&study, seed, vec![]);
    let g = s0.goal.unwrap().goal;
    let db = study.database.as_deref().unwrap();
    let (a, h) = (&g.subgoals[0], &g.subgoals[1]);
    let arow = db.select("attraction", &a.row).unwrap();
    // A hotel row that meets the hotel sub-goal: its drawn row.
    let hrow_key = h.row.clone();

    // The user states the attraction's constraints; the wizard searches with the first one,
    // selects the drawn row and offers it (the template tells name, phone and rating).
    let user_text = a
        .constraints
        .iter()
        .map(|c| c.value.clone())
        .collect::<Vec<_>>()
        .join(" and ");
    let first = &a.constraints[0];
    let cmds = vec![
        (
            Role::Wizard,
            Command::Text {
                text: "Hello, how can I help?".into(),
            },
        ),
        (
            Role::User,
            Command::Text {
                text: format!("Something {user_text}."),
            },
        ),
        (
            Role::Wizard,
            Command::Query {
                table: "attraction".into(),
                filters: vec![Filter {
                    column: first.slot.clone(),
                    op: FilterOp::Equals {
                        value: json!(first.value),
                    },
                }],
            },
        ),
        (
            Role::Wizard,
            Command::Select {
                table: "attraction".into(),
                key: a.row.clone(),
            },
        ),
        (
            Role::Wizard,
            Command::Say {
                state: "attraction".into(),
            },
        ),
        (
            Role::Wizard,
            Command::Select {
                table: "hotel".into(),
                key: hrow_key.clone(),
            },
        ),
        (
            Role::Wizard,
            Command::Say {
                state: "hotel".into(),
            },
        ),
    ];
    let (s, log) = play(&study, seed, cmds);

    // One turn_state right after each message, numbered by message.
    let mut n = 0;
    for (i, e) in log.iter().enumerate() {
        if let EventKind::Message { role, .. } = &e.kind {
            match &log[i + 1].kind {
                EventKind::TurnState { turn, role: r, .. } => {
                    assert_eq!((*turn, r), (n, role));
                }
                other => panic!("message {n} is followed by {other:?}"),
            }
            n += 1;
        }
    }
    assert_eq!(n, 4);
    let states: Vec<&EventKind> = log
        .iter()
        .map(|e| &e.kind)
        .filter(|k| matches!(k, EventKind::TurnState { .. }))
        .collect();
    let EventKind::TurnState {
        user_state: greet, ..
    } = states[0]
    else {
        unreachable!()
    };
    assert!(greet.iter().all(|e| !e.satisfied), "nothing said yet");
    let EventKind::TurnState {
        user_state: after_user,
        ..
    } = states[1]
    else {
        unreachable!()
    };
    for e in after_user.iter().filter(|e| e.subgoal == 1) {
        assert_eq!(e.satisfied, e.kind == EntryKind::Constraint, "{e:?}");
    }
    // The wizard's offer of the attraction informs its requests with the row's values.
    let EventKind::TurnState {
        user_state,
        sys_state,
        sys_state_init,
        ..
    } = states[2]
    else {
        unreachable!()
    };
    for e in user_state
        .iter()
        .filter(|e| e.subgoal == 1 && e.kind == EntryKind::Request)
    {
        assert!(e.satisfied, "{e:?}");
        assert_eq!(e.value, value_text(&arow[&e.slot]));
    }
    let belief = &sys_state["景点"];
    assert_eq!(belief.constraints[&first.slot], first.value);
    assert_eq!(belief.selected_results, vec![value_text(&arow["name"])]);
    assert_eq!(sys_state_init["景点"].constraints, belief.constraints);
    assert!(
        sys_state_init["景点"].selected_results.is_empty(),
        "the first search came before the selection"
    );
    // The hotel's requests once the wizard told them; the hotel's constraints were never said
    // unless the reference was met by the selection.
    let EventKind::TurnState {
        user_state,
        sys_state,
        ..
    } = states[3]
    else {
        unreachable!()
    };
    for e in user_state.iter().filter(|e| e.subgoal == 2) {
        let referenced = h
            .constraints
            .iter()
            .any(|c| c.slot == e.slot && c.reference.is_some());
        match e.kind {
            EntryKind::Request => assert!(e.satisfied, "{e:?}"),
            EntryKind::Constraint => assert_eq!(e.satisfied, referenced, "{e:?}"),
        }
    }
    assert_eq!(sys_state["酒店"].selected_results.len(), 1);
    assert_eq!(s.goal.as_ref().unwrap().entries, user_state.clone());
    // Replay folds the same state.
    assert_eq!(replay(&study, "g", &log), s);
}

#[test]
fn the_crosswoz_demo_draws_goals_from_its_database() {
    let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let db = study.database.as_deref().expect("its database");
    let rules = study.study.goals.as_ref().unwrap();
    let mut references = 0;
    let mut ranges = 0;
    let mut domains = std::collections::BTreeSet::new();
    for seed in 0..100 {
        let g = goal(&study, seed);
        assert!((1..=3).contains(&g.subgoals.len()));
        for sg in &g.subgoals {
            domains.insert(sg.domain.clone());
            assert_eq!(
                sg.domain, sg.table,
                "the tables are named by CrossWOZ's domains"
            );
            let row = db.select(&sg.table, &sg.row).expect("the drawn row exists");
            let rule = rules.domains.iter().find(|d| d.table == sg.table).unwrap();
            for c in &sg.constraints {
                match &c.reference {
                    // A range: a band of the rules holding the row's number, written as the band.
                    None if c.range.is_some() => {
                        ranges += 1;
                        let g = c.range.unwrap();
                        let x = row[&c.slot].as_f64().expect("a number");
                        assert!(g.holds(x), "seed {seed}: {x} outside {g:?}");
                        let band = rule.ranges[&c.slot]
                            .iter()
                            .find(|b| b.text == c.value)
                            .unwrap_or_else(|| panic!("seed {seed}: no band {}", c.value));
                        assert_eq!((band.min, band.max), (g.min, g.max));
                    }
                    None => {
                        assert_eq!(c.value, value_text(&row[&c.slot]));
                        let held = rule.ranges.get(&c.slot).is_some_and(|bands| {
                            row[&c.slot]
                                .as_f64()
                                .is_some_and(|x| bands.iter().any(|b| b.holds(x)))
                        });
                        assert!(!held, "seed {seed}: {} could be a range", c.slot);
                    }
                    Some(r) => {
                        references += 1;
                        let from = &g.subgoals[(r.subgoal - 1) as usize];
                        let listing = db.select(&from.table, &from.row).unwrap()[&r.column].clone();
                        assert!(
                            goals::items(&value_text(&listing)).contains(&sg.row),
                            "seed {seed}: {} is not in {}'s {}",
                            sg.row,
                            from.row,
                            r.column
                        );
                    }
                }
            }
            assert!(
                sg.requests.iter().any(|r| r.slot == "名称")
                    || sg.constraints.iter().any(|c| c.slot == "名称")
            );
        }
    }
    assert_eq!(domains.len(), 3, "{domains:?}");
    assert!(references > 0, "some goal refers to an earlier sub-goal");
    assert!(ranges > 0, "some constraint is a range");
}

/// A range constraint (`人均消费` `50-100元`) is expressed by a search admitting only numbers in
/// the range, by the user saying its text, or by selecting a row inside it; not by a wider
/// search or a row outside it.
#[test]
fn range_constraints_are_met_by_a_range_search_or_a_row_inside() {
    let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let db = study.database.as_deref().unwrap();
    let rules = study.study.goals.as_ref().unwrap();
    let (g, sg, c) = (0..2000)
        .find_map(|seed| {
            let g = goal(&study, seed);
            let (sg, c) = g.subgoals.iter().find_map(|sg| {
                sg.constraints
                    .iter()
                    .find(|c| {
                        c.range
                            .and_then(|r| r.min.zip(r.max))
                            .is_some_and(|(a, b)| b - a >= 1.0)
                    })
                    .map(|c| (sg.clone(), c.clone()))
            })?;
            Some((g.clone(), sg, c))
        })
        .expect("a goal with a two-sided range");
    let r = c.range.unwrap();
    let index = goals::entries(&g)
        .iter()
        .position(|e| e.subgoal == sg.id && e.slot == c.slot && e.kind == EntryKind::Constraint)
        .unwrap();
    let fresh = || goals::GoalTrack::new(g.clone(), Some(rules), Some(db));
    let none = indexmap::IndexMap::new();
    let range = |min: Option<f64>, max: Option<f64>| Filter {
        column: c.slot.clone(),
        op: FilterOp::Range { min, max },
    };
    let (lo, hi) = (r.min.unwrap(), r.max.unwrap());
    for (f, met) in [
        (range(Some(lo), Some(hi)), true),
        (range(Some(lo + 0.5), Some(hi)), true),
        (range(Some(lo - 1.0), Some(hi)), false),
        (range(Some(lo), None), false),
        (range(None, Some(hi)), false),
    ] {
        let mut t = fresh();
        t.on_query(&sg.table, std::slice::from_ref(&f), &none);
        assert_eq!(t.entries[index].satisfied, met, "{f:?} for {c:?}");
    }
    let mut t = fresh();
    t.on_message(Role::User, &format!("最好是{}的。", c.value), &none);
    assert!(t.entries[index].satisfied, "the user says {}", c.value);
    // Rows of the table inside and outside the range.
    let all = db.all_rows(&sg.table).unwrap();
    let key = &db.tables()[&sg.table].key;
    let number = |row: &wozkit_core::database::Row| row[&c.slot].as_f64();
    let inside = all
        .iter()
        .find(|x| number(x).is_some_and(|x| r.holds(x)))
        .unwrap();
    let mut t = fresh();
    t.on_select(&sg.table, &value_text(&inside[key]), inside, &none);
    assert!(t.entries[index].satisfied, "a row inside {r:?}");
    if let Some(outside) = all.iter().find(|x| number(x).is_some_and(|x| !r.holds(x))) {
        let mut t = fresh();
        t.on_select(&sg.table, &value_text(&outside[key]), outside, &none);
        assert!(!t.entries[index].satisfied, "a row outside {r:?}");
    }
}

#[test]
fn the_goal_sentences_follow_the_study_text() {
    let study = study();
    let g = (0..50)
        .map(|seed| goal(&study, seed))
        .find(|g| g.subgoals.len() == 2)
        .unwrap();
    // The default sentences name every constraint and request.
    let lines = goals::describe(&g, None);
    assert_eq!(lines.len(), 2);
    for (sg, line) in g.subgoals.iter().zip(&lines) {
        assert!(
            line.starts_with(&format!("Sub-goal {} ({})", sg.id, sg.domain)),
            "{line}"
        );
        for c in &sg.constraints {
            assert!(line.contains(&format!("{} {}", c.slot, c.value)), "{line}");
        }
        for r in &sg.requests {
            assert!(line.contains(&r.slot), "{line}");
        }
    }
    // The built-in CrossWOZ study writes them as CrossWOZ's task descriptions do.
    let cw = wozkit_core::load::load_builtin("crosswoz-demo").unwrap();
    let rules = cw.study.goals.as_ref().unwrap();
    let g = goal(&cw, 3);
    let lines = goals::describe(&g, rules.text.as_ref());
    let sg = &g.subgoals[0];
    let c = &sg.constraints[0];
    assert!(
        lines[0].starts_with(&format!("你要找一个{}。", sg.domain)),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(&format!("你希望{}的{}是{}。", sg.domain, c.slot, c.value)),
        "{}",
        lines[0]
    );
    let slots: Vec<&str> = sg.requests.iter().map(|r| r.slot.as_str()).collect();
    assert!(
        lines[0].ends_with(&format!(
            "你想知道这个{}的{}。",
            sg.domain,
            slots.join("、")
        )),
        "{}",
        lines[0]
    );
    // And a live session logs them.
    let (_, log) = play(&cw, 3, vec![]);
    let logged = log
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::GoalGenerated {
                goal, description, ..
            } => Some((goal.clone(), description.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(logged.1, goals::describe(&logged.0, rules.text.as_ref()));
}
