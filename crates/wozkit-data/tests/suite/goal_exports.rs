//! A live session of a study with user goals (the two-domain fixture study of wozkit-core),
//! played through the engine and exported to CrossWOZ, MultiWOZ 2.1 and ConvLab-3: the CrossWOZ
//! record is checked field by field against a dialogue of the real dataset (key sets, key order,
//! types, the five-domain system state) and against the study's database (every selected result
//! exists, every constraint is a value of the drawn row); each file re-imports and re-exports
//! identically.

use crate::common;
#[path = "../common/crosswoz_check.rs"]
mod crosswoz_check;

use std::path::Path;

use crosswoz_check::{
    check_message, check_record, check_sys_states, check_tuple, head, keys, kind,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use wozkit_core::database::{Filter, FilterOp, value_text};
use wozkit_core::engine::{Command, Session, step};
use wozkit_core::event::{Actor, Event, EventKind, Role};
use wozkit_core::goals::Goal;
use wozkit_core::load::{LoadedStudy, load_path};
use wozkit_data::{Format, ImportedSession, Input, formats};

/// The real dialogue the exports are compared with: the shared corpus's when present.
fn real_dialogue() -> Value {
    crosswoz_check::real_dialogue(Some(&common::corpora_dir()))
}

const ID: &str = "goal-session-1";

fn study() -> LoadedStudy {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wozkit-core/tests/fixtures/goals-study");
    load_path(&dir).unwrap_or_else(|e| panic!("{e}"))
}

struct Play<'a> {
    study: &'a LoadedStudy,
    rng: ChaCha8Rng,
    s: Session,
    log: Vec<Event>,
}

impl Play<'_> {
    fn start(study: &LoadedStudy, seed: u64) -> Play<'_> {
        let mut p = Play {
            study,
            rng: ChaCha8Rng::seed_from_u64(seed),
            s: Session::new(study, ID),
            log: vec![],
        };
        p.run(Actor::System, Command::Start { seed });
        p
    }

    fn run(&mut self, actor: Actor, cmd: Command) {
        let now = 1_700_000_000_000 + self.log.len() as u64 * 1000;
        let st = step(self.study, &self.s, &actor, cmd, now, &mut self.rng).expect("accepted");
        for (a, k) in st.events {
            self.log.push(Event {
                v: 1,
                session: ID.into(),
                seq: self.log.len() as u64 + 1,
                at_ms: now,
                actor: a,
                kind: k,
            });
        }
        self.s = st.session;
    }

    fn by(&mut self, role: Role, cmd: Command) {
        let actor = Actor::Participant {
            role,
            participant: Some(format!("p-{}", role.as_str())),
        };
        self.run(actor, cmd);
    }

    fn goal(&self) -> Goal {
        self.s.goal.as_ref().expect("a goal").goal.clone()
    }

    /// `role` writes `text`.
    fn text(&mut self, role: Role, text: impl Into<String>) {
        self.by(role, Command::Text { text: text.into() });
    }

    /// The wizard serves sub-goal `i` of `goal`: searches it (`search`), selects its drawn row
    /// and says the option of its table.
    fn serve(&mut self, goal: &Goal, i: usize) {
        let sg = &goal.subgoals[i];
        self.by(Role::Wizard, search(goal, i));
        self.by(
            Role::Wizard,
            Command::Select {
                table: sg.table.clone(),
                key: sg.row.clone(),
            },
        );
        self.by(
            Role::Wizard,
            Command::Say {
                state: sg.table.clone(),
            },
        );
    }

    /// The log so far as an imported session.
    fn session(&self) -> ImportedSession {
        ImportedSession {
            id: ID.into(),
            events: self.log.clone(),
        }
    }
}

/// A seed whose goal has two sub-goals, the hotel referring to the attraction.
fn referring_seed(study: &LoadedStudy) -> u64 {
    (0..500)
        .find(|&seed| {
            let g = Play::start(study, seed).goal();
            g.subgoals.len() == 2
                && g.subgoals[1]
                    .constraints
                    .iter()
                    .any(|c| c.reference.is_some())
        })
        .expect("a seed draws a referring goal")
}

/// The wizard's search of a sub-goal: equals filters on its plain constraints.
fn search(goal: &Goal, i: usize) -> Command {
    let sg = &goal.subgoals[i];
    Command::Query {
        table: sg.table.clone(),
        filters: sg
            .constraints
            .iter()
            .filter(|c| c.reference.is_none())
            .map(|c| Filter {
                column: c.slot.clone(),
                op: FilterOp::Equals {
                    value: json!(c.value),
                },
            })
            .collect(),
    }
}

fn plain_values(goal: &Goal, i: usize) -> String {
    goal.subgoals[i]
        .constraints
        .iter()
        .filter(|c| c.reference.is_none())
        .map(|c| c.value.clone())
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The played session: greeting, both sub-goals asked, searched, selected and offered, thanks.
fn live_session(study: &LoadedStudy) -> (ImportedSession, Goal) {
    let seed = referring_seed(study);
    let mut p = Play::start(study, seed);
    let g = p.goal();
    p.text(Role::Wizard, "Hello, where would you like to go?");
    p.text(Role::User, format!("A sight with {}.", plain_values(&g, 0)));
    p.serve(&g, 0);
    p.text(
        Role::User,
        format!("And a hotel near it, {}.", plain_values(&g, 1)),
    );
    p.serve(&g, 1);
    p.text(Role::User, "Thank you!");
    p.text(Role::Wizard, "You are welcome.");
    (
        ImportedSession {
            id: ID.into(),
            events: p.log,
        },
        g,
    )
}

fn export(format: Format, session: &ImportedSession) -> Vec<u8> {
    let mut out = Vec::new();
    formats::export(format, std::slice::from_ref(session), &mut out).expect("export");
    out
}

/// An export without the studies' dataset mappings: the acts derived from the goal states and
/// labels alone (`crosswoz-demo` maps its states onto CrossWOZ acts only; `live_exports.rs`
/// checks those).
fn export_unmapped(format: Format, session: &ImportedSession) -> Vec<u8> {
    let mut out = Vec::new();
    let none = wozkit_data::mapping::Mappings::none();
    formats::export_mapped(format, std::slice::from_ref(session), none, &mut out).expect("export");
    out
}

/// The session's messages from the user's first on: the turns of an export that starts with
/// the user, where no speaker talks twice in a row (the wizard's opening goes to the sidecar).
fn from_the_user_on(session: &ImportedSession) -> Vec<(Role, &str)> {
    let all: Vec<(Role, &str)> = session.messages().collect();
    assert_eq!(all[0].0, Role::Wizard, "the play opens with the wizard");
    all.into_iter()
        .skip_while(|(role, _)| *role != Role::User)
        .collect()
}

/// The speakers and texts of CrossWOZ messages.
fn written(msgs: &[Value]) -> Vec<(Role, &str)> {
    msgs.iter()
        .map(|m| {
            let role = if m["role"] == "usr" {
                Role::User
            } else {
                Role::Wizard
            };
            (role, m["content"].as_str().unwrap())
        })
        .collect()
}

/// The study with each goal domain named by its table (`attraction`, `hotel`: MultiWOZ
/// domains) instead of CrossWOZ's `景点` and `酒店`.
fn multiwoz_labelled(study: &LoadedStudy) -> LoadedStudy {
    let mut study = study.clone();
    for d in &mut study.study.goals.as_mut().expect("goals").domains {
        d.label = Some(d.table.clone());
    }
    study
}

#[test]
fn crosswoz_export_matches_the_dataset_schema_and_the_database() {
    let study = study();
    let db = study.database.as_deref().unwrap();
    let (session, goal) = live_session(&study);
    let file: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
    let ours = &file[ID];
    let real = real_dialogue();

    // The record: the same keys in the same order, the same types.
    assert_eq!(keys(ours), keys(&real));
    for k in keys(&real) {
        assert_eq!(kind(&ours[k]), kind(&real[k]), "record key {k}");
    }
    assert_eq!(ours["type"], "不独立多领域");
    assert_eq!(
        ours["task description"].as_array().unwrap().len(),
        goal.subgoals.len()
    );

    // Goal tuples: the generated entries, nothing satisfied; the same entries in every state.
    let initial = ours["goal"].as_array().unwrap();
    assert!(!initial.is_empty());
    for (i, t) in initial.iter().enumerate() {
        check_tuple(t, &format!("goal[{i}]"));
        assert_eq!(t[4], false);
    }
    for t in real["goal"].as_array().unwrap() {
        check_tuple(t, "the real goal");
    }
    let heads: Vec<_> = initial.iter().map(head).collect();
    // Constraints are the drawn row's values (a reference keeps its text).
    for sg in &goal.subgoals {
        let row = db.select(&sg.table, &sg.row).unwrap();
        for c in sg.constraints.iter().filter(|c| c.reference.is_none()) {
            let t = initial
                .iter()
                .find(|t| t[0] == sg.id && t[2] == c.slot.as_str())
                .expect("the constraint's tuple");
            assert_eq!(t[3].as_str().unwrap(), value_text(&row[&c.slot]));
        }
    }

    // Messages: per role the same keys in the same order as the dataset's, the same types.
    let msgs = ours["messages"].as_array().unwrap();
    assert_eq!(written(msgs), from_the_user_on(&session));
    let mut selected_seen = 0;
    let mut informs = 0;
    let mut last_state = None;
    for (i, m) in msgs.iter().enumerate() {
        let at = format!("messages[{i}]");
        informs += m["dialog_act"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a[0] == "Inform")
            .count();
        if check_message(m, &real, &heads, &at) {
            last_state = Some(m["user_state"].clone());
        } else {
            check_sys_states(m, &real, &at);
            for key in ["sys_state", "sys_state_init"] {
                let s = &m[key];
                // Every selected result is a row of the domain's table.
                for sg in &goal.subgoals {
                    for name in s[&sg.domain]["selectedResults"].as_array().unwrap() {
                        let found = db
                            .query(
                                &sg.table,
                                &[Filter {
                                    column: "name".into(),
                                    op: FilterOp::Equals {
                                        value: name.clone(),
                                    },
                                }],
                                20,
                            )
                            .unwrap();
                        assert_eq!(found.keys.len(), 1, "{name} is not in `{}`", sg.table);
                        selected_seen += 1;
                    }
                }
            }
        }
    }
    assert!(selected_seen >= 2, "both sub-goals' results were selected");
    assert!(informs >= 2, "the satisfied entries are Inform acts");

    // The final goal is the state after the last message: everything satisfied in this play.
    let final_goal = ours["final_goal"].as_array().unwrap();
    assert_eq!(final_goal.iter().map(head).collect::<Vec<_>>(), heads);
    assert!(final_goal.iter().all(|t| t[4] == true), "{final_goal:?}");
    assert_eq!(last_state.unwrap().as_array().unwrap(), final_goal);
}

/// MultiWOZ 2.1 writes the goal, belief state and acts of MultiWOZ's own domains and slots
/// only; ConvLab-3 writes those of every domain.
#[test]
fn multiwoz_and_convlab3_get_the_goal_states_and_acts() {
    let study = study();
    let (session, goal) = live_session(&study);
    // The fixture's domains are CrossWOZ's (景点, 酒店): none reaches MultiWOZ's goal, belief
    // state or acts, though CrossWOZ has Inform acts for them.
    let file: Value = serde_json::from_slice(&export(Format::MultiWoz21, &session)).unwrap();
    let rec = &file[ID];
    for sg in &goal.subgoals {
        assert!(rec["goal"].get(&sg.domain).is_none(), "{}", rec["goal"]);
    }
    let log = rec["log"].as_array().unwrap();
    let cw: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
    let msgs = cw[ID]["messages"].as_array().unwrap();
    assert_eq!(log.len(), msgs.len());
    assert!(
        msgs.iter()
            .any(|m| !m["dialog_act"].as_array().unwrap().is_empty())
    );
    for (i, t) in log.iter().enumerate() {
        assert_eq!(
            t["dialog_act"],
            json!({}),
            "turn {i}: no act off MultiWOZ's domains"
        );
        if i % 2 == 1 {
            for (domain, parts) in t["metadata"].as_object().unwrap() {
                for (slot, v) in parts["semi"].as_object().unwrap() {
                    assert_eq!(*v, json!(""), "turn {i}: {domain}.{slot}");
                }
            }
        }
    }

    // The same goal on MultiWOZ's domains (`attraction`, `hotel`), with the wizard also
    // searching the attraction by name: the goal, `metadata.attraction.semi.name`, and the
    // acts whose slot is one of MultiWOZ's (`Fee`, `Name`, `Price`, `Phone`); the others
    // (`rating`, `duration`, `kind`, `address`) are not MultiWOZ act slots and are not written.
    let study_en = multiwoz_labelled(&study);
    let db = study_en.database.as_deref().unwrap();
    let seed = referring_seed(&study_en);
    let mut p = Play::start(&study_en, seed);
    let g = p.goal();
    let first = &g.subgoals[0];
    assert_eq!(first.domain, "attraction");
    let name = value_text(&db.select(&first.table, &first.row).unwrap()["name"]);
    p.text(Role::Wizard, "Hello, where would you like to go?");
    p.text(Role::User, format!("A sight with {}.", plain_values(&g, 0)));
    let Command::Query { table, mut filters } = search(&g, 0) else {
        unreachable!("a search")
    };
    filters.push(Filter {
        column: "name".into(),
        op: FilterOp::Equals { value: json!(name) },
    });
    p.by(Role::Wizard, Command::Query { table, filters });
    p.by(
        Role::Wizard,
        Command::Select {
            table: first.table.clone(),
            key: first.row.clone(),
        },
    );
    p.by(
        Role::Wizard,
        Command::Say {
            state: first.table.clone(),
        },
    );
    let en = p.session();
    let file: Value = serde_json::from_slice(&export(Format::MultiWoz21, &en)).unwrap();
    let rec = &file[ID];
    for sg in &g.subgoals {
        let goal = &rec["goal"][&sg.domain];
        let reqt: Vec<&str> = sg.requests.iter().map(|r| r.slot.as_str()).collect();
        assert_eq!(goal["reqt"], json!(reqt), "{}", sg.domain);
        for c in &sg.constraints {
            assert_eq!(goal["info"][&c.slot], json!(c.value));
        }
    }
    let log = rec["log"].as_array().unwrap();
    assert_eq!(log.len(), 2, "the user's turn and the wizard's");
    let semi = &log[1]["metadata"]["attraction"]["semi"];
    assert_eq!(semi["name"], json!(name), "{semi}");
    assert_eq!(
        semi.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["type", "name", "area"],
        "the searched fee is no MultiWOZ slot"
    );
    let cl: Value = serde_json::from_slice(&export(Format::ConvLab3, &en)).unwrap();
    let turns = cl[0]["turns"].as_array().unwrap();
    let mut written = 0;
    for (t, l) in turns.iter().zip(log) {
        for a in t["dialogue_acts"]["non-categorical"].as_array().unwrap() {
            let slot = upper_first(a["slot"].as_str().unwrap());
            let pair = json!([slot, a["value"]]);
            let listed = l["dialog_act"]["Attraction-Inform"]
                .as_array()
                .is_some_and(|p| p.contains(&pair));
            let multiwoz = ["Fee", "Name", "Phone", "Price"].contains(&slot.as_str());
            assert_eq!(listed, multiwoz, "{pair} in {}", l["dialog_act"]);
            written += usize::from(listed);
        }
    }
    assert!(written >= 2, "the user's and the wizard's Inform acts");
    assert!(
        log[1]["dialog_act"]["Attraction-Inform"]
            .as_array()
            .unwrap()
            .contains(&json!(["Name", name])),
        "{}",
        log[1]["dialog_act"]
    );

    let file: Value = serde_json::from_slice(&export(Format::ConvLab3, &session)).unwrap();
    let d = &file[0];
    let first = &goal.subgoals[0];
    let domains: Vec<&str> = goal.subgoals.iter().map(|s| s.domain.as_str()).collect();
    assert_eq!(d["domains"], json!(domains));
    assert_eq!(
        d["goal"]["request"][&first.domain]
            .as_object()
            .unwrap()
            .len(),
        first.requests.len()
    );
    let turns = d["turns"].as_array().unwrap();
    let last_user = turns.iter().rev().find(|t| t["speaker"] == "user").unwrap();
    for c in first.constraints.iter().filter(|c| c.reference.is_none()) {
        assert_eq!(last_user["state"][&first.domain][&c.slot], json!(c.value));
        assert_eq!(
            last_user["user_state"][&first.domain]["inform"][&c.slot],
            json!([c.value, "mentioned"])
        );
    }
    let sys_last = turns
        .iter()
        .rev()
        .find(|t| t["speaker"] == "system")
        .unwrap();
    assert_eq!(
        sys_last["db_results"][&first.domain]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(turns.iter().any(|t| {
        t["dialogue_acts"]["non-categorical"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["intent"] == "inform")
    }));
}

#[test]
fn each_export_reimports_and_writes_the_same_file_again() {
    let study = study();
    let (session, _) = live_session(&study);
    for format in [Format::CrossWoz, Format::MultiWoz21, Format::ConvLab3] {
        let first = export(format, &session);
        let back =
            formats::import(format, &Input::new("goals.json", first.clone())).expect("reimport");
        assert_eq!(back.len(), 1, "{format:?}");
        // The file starts with the user; the wizard's greeting before it is in the sidecar.
        let texts: Vec<(Role, &str)> = back[0].messages().collect();
        assert_eq!(texts, from_the_user_on(&session), "{format:?}");
        // The events are gone; the record and turn annotations keep the goal and states.
        assert!(!back[0].events.iter().any(|e| matches!(
            e.kind,
            EventKind::GoalGenerated { .. } | EventKind::TurnState { .. }
        )));
        let second = export(format, &back[0]);
        common::assert_same_file(&first, &second, &format!("{format:?} re-export"));
    }
}

#[test]
fn a_session_without_a_goal_is_written_as_before() {
    let study = study();
    let (mut session, _) = live_session(&study);
    let with = export(Format::CrossWoz, &session);
    session.events.retain(|e| {
        !matches!(
            e.kind,
            EventKind::GoalGenerated { .. } | EventKind::TurnState { .. }
        )
    });
    let file: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
    assert_ne!(with, serde_json::to_vec(&file).unwrap());
    assert_eq!(file[ID]["goal"], json!([]));
    assert_eq!(file[ID]["type"], "");
    assert_eq!(file[ID]["messages"][0]["role"], "usr");
    let m = &file[ID]["messages"][1];
    assert_eq!(m["role"], "sys");
    assert_eq!(m["sys_state"]["景点"]["selectedResults"], json!([]));
    assert_eq!(m["dialog_act"], json!([]), "no derived acts without a goal");
}

#[test]
fn simulated_crosswoz_demo_sessions_export_to_the_schema_and_the_database() {
    let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let db = study.database.as_deref().unwrap();
    let real = real_dialogue();
    let mut selected = 0;
    let mut users = 0;
    let mut ranges = 0;
    let mut recommends = 0;
    let rules = study.study.goals.as_ref().unwrap();
    let forms = real_value_forms();
    for seed in 0..30u64 {
        let (id, session) = sim_session(&study, seed);
        let file: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
        let rec = &file[&id];
        let seen = check_record(rec, &real, db, &format!("seed {seed}"));
        selected += seen.selected;
        users += seen.user_turns;
        recommends += seen.recommends;
        let goal = rec["goal"].as_array().unwrap();
        // Range constraints are written as the band's text, as CrossWOZ's goals are: a band of
        // the study's rules holding the drawn row's number, of a shape the dataset has.
        let logged = played_goal(&session);
        for sg in &logged.subgoals {
            let row = db.select(&sg.table, &sg.row).unwrap();
            let rule = rules.domains.iter().find(|d| d.table == sg.table).unwrap();
            for c in sg.constraints.iter().filter(|c| c.range.is_some()) {
                ranges += 1;
                let t = goal
                    .iter()
                    .find(|t| t[0] == sg.id && t[2] == c.slot.as_str())
                    .expect("the range constraint's tuple");
                let band = rule.ranges[&c.slot]
                    .iter()
                    .find(|b| t[3] == b.text.as_str())
                    .unwrap_or_else(|| panic!("seed {seed}: {} is no band of {}", t[3], c.slot));
                let x = row[&c.slot].as_f64().unwrap();
                assert!(band.holds(x), "seed {seed}: {x} is not {}", band.text);
                if let Some(forms) = forms
                    .as_ref()
                    .and_then(|f| f.get(&(sg.domain.clone(), c.slot.clone())))
                {
                    let form = value_form(&band.text);
                    assert!(
                        forms.contains(&form),
                        "seed {seed}: {} is not a form of the dataset's {}: {forms:?}",
                        band.text,
                        c.slot
                    );
                }
            }
        }
    }
    assert!(selected > 0, "the simulated wizards selected results");
    assert!(users > 0);
    assert!(ranges > 0, "some goal has a range constraint");
    assert!(recommends > 0, "some simulated wizard recommended a place");
}

/// A user message naming requested slots gets a `Request` act per slot still open, on the
/// domain of the sub-goal requesting it; a message naming none gets none.
#[test]
fn a_user_asking_for_requested_slots_gets_request_acts() {
    let study = study();
    let seed = referring_seed(&study);
    let mut p = Play::start(&study, seed);
    let g = p.goal();
    let sg = &g.subgoals[0];
    let asked: Vec<&str> = sg.requests.iter().map(|r| r.slot.as_str()).collect();
    assert!(!asked.is_empty());
    p.text(Role::Wizard, "Hello!");
    p.text(Role::User, "Hi, I am looking around.");
    p.text(Role::Wizard, "Sure.");
    p.text(
        Role::User,
        format!("Tell me its {} please.", asked.join(" and ")),
    );
    let session = p.session();
    let file: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
    let msgs = file[ID]["messages"].as_array().unwrap();
    let requests = |m: &Value| -> Vec<Value> {
        m["dialog_act"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a[0] == "Request")
            .cloned()
            .collect()
    };
    // The wizard's "Hello!" is left out: the user's messages are turns 0 and 2.
    assert_eq!(msgs[0]["content"], "Hi, I am looking around.");
    assert_eq!(requests(&msgs[0]), Vec::<Value>::new(), "no slot named");
    assert_eq!(msgs[2]["role"], "usr");
    let got = requests(&msgs[2]);
    for slot in &asked {
        // The first sub-goal still open with that slot is this one (nothing was informed).
        assert!(
            got.contains(&json!(["Request", sg.domain, slot, ""])),
            "{slot}: {got:?}"
        );
    }
}

/// The goal of a session's log (its `goal_generated`).
fn played_goal(session: &ImportedSession) -> Goal {
    session
        .events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::GoalGenerated { goal, .. } => Some(goal.clone()),
            _ => None,
        })
        .expect("a goal_generated event")
}

/// The shapes of the real CrossWOZ goals' values by (domain, slot), digits written `N`
/// (`4.5分以上` is `N分以上`), from the shared corpus's whole test split; None without it.
fn real_value_forms() -> Option<std::collections::HashMap<(String, String), Vec<String>>> {
    let path = common::corpora_dir().join("crosswoz/test.json.zip");
    if !path.exists() {
        return None;
    }
    let all = Input::read(&path).ok()?.json().ok()?;
    let mut out: std::collections::HashMap<(String, String), Vec<String>> = Default::default();
    for d in all.as_object()?.values() {
        for t in d["goal"].as_array()? {
            let key = (t[1].as_str()?.to_string(), t[2].as_str()?.to_string());
            let form = value_form(&value_text(&t[3]));
            let forms = out.entry(key).or_default();
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    Some(out)
}

/// A value with its runs of digits and dots written `N`.
fn value_form(v: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for ch in v.chars() {
        if ch.is_ascii_digit() || ch == '.' {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            out.push(ch);
            in_number = false;
        }
    }
    out
}

/// A session of the built-in `crosswoz-demo` study played by the simulated crowd.
fn sim_session(study: &LoadedStudy, seed: u64) -> (String, ImportedSession) {
    let played = wozkit_core::sim::play(study, seed, wozkit_core::sim::WizardPolicy::Priors);
    let id = format!("sim-{seed}");
    let events: Vec<Event> = played
        .events
        .into_iter()
        .enumerate()
        .map(|(i, (actor, kind, at_ms))| Event {
            v: 1,
            session: id.clone(),
            seq: i as u64 + 1,
            at_ms,
            actor,
            kind,
        })
        .collect();
    (id.clone(), ImportedSession { id, events })
}

/// The first letter upper-cased, as MultiWOZ writes domains and slots.
fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A derived act (CrossWOZ's `[intent, domain, slot, value]`) as MultiWOZ 2.1 writes it: its
/// `Domain-Intent` key and pair.
fn multiwoz_form(act: &Value) -> (String, Value) {
    let a: Vec<&str> = act
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    match a[0] {
        "NoOffer" => (
            format!("{}-NoOffer", upper_first(a[1])),
            json!(["none", "none"]),
        ),
        "Request" => (
            format!("{}-Request", upper_first(a[1])),
            json!([upper_first(a[2]), "?"]),
        ),
        intent => (
            format!("{}-{intent}", upper_first(a[1])),
            json!([upper_first(a[2]), a[3]]),
        ),
    }
}

/// Whether a MultiWOZ key and pair is an act of the released MultiWOZ 2.1: one of its domains
/// and one of its act slots.
fn is_multiwoz_act(key: &str, pair: &Value) -> bool {
    const DOMAINS: [&str; 8] = [
        "Attraction",
        "Booking",
        "Hospital",
        "Hotel",
        "Police",
        "Restaurant",
        "Taxi",
        "Train",
    ];
    const SLOTS: [&str; 26] = [
        "Addr", "Area", "Arrive", "Car", "Choice", "Day", "Depart", "Dest", "Fee", "Food", "Id",
        "Internet", "Leave", "Name", "Parking", "People", "Phone", "Post", "Price", "Ref", "Stars",
        "Stay", "Ticket", "Time", "Type", "none",
    ];
    let domain = key.split_once('-').map_or("", |(d, _)| d);
    DOMAINS.contains(&domain) && pair[0].as_str().is_some_and(|s| SLOTS.contains(&s))
}

/// The acts of a ConvLab-3 turn (the format that writes every derived act, whatever its
/// domain) as CrossWOZ's `[intent, domain, slot, value]`.
fn derived_acts(turn: &Value) -> Vec<Value> {
    let acts = &turn["dialogue_acts"];
    assert_eq!(acts["categorical"], json!([]));
    let mut out = vec![];
    for a in acts["non-categorical"].as_array().unwrap() {
        let intent = match a["intent"].as_str().unwrap() {
            "inform" => "Inform",
            "recommend" => "Recommend",
            other => panic!("no derived act is non-categorical {other}: {a}"),
        };
        out.push(json!([intent, a["domain"], a["slot"], a["value"]]));
    }
    for a in acts["binary"].as_array().unwrap() {
        out.push(match a["intent"].as_str().unwrap() {
            "nooffer" => json!(["NoOffer", a["domain"], "none", "none"]),
            "request" => json!(["Request", a["domain"], a["slot"], ""]),
            other => panic!("no derived act is binary {other}: {a}"),
        });
    }
    out
}

/// Sorted texts of values, to compare lists as multisets.
fn sorted(values: impl IntoIterator<Item = Value>) -> Vec<String> {
    let mut out: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    out.sort();
    out
}

/// Checks that the three exports of `session` have the same turns (ConvLab-3 without the empty
/// turn closing a dialogue that ends with the user) and, on each, the acts ConvLab-3 writes:
/// CrossWOZ those on its five domains, MultiWOZ those that are MultiWOZ acts, each in its own
/// shape and nothing else. Returns the intents of all the acts.
fn same_acts_in_each_format(session: &ImportedSession) -> Vec<String> {
    const CROSSWOZ_DOMAINS: [&str; 5] = ["景点", "餐馆", "酒店", "地铁", "出租"];
    let id = &session.id;
    let cw: Value = serde_json::from_slice(&export_unmapped(Format::CrossWoz, session)).unwrap();
    let mw: Value = serde_json::from_slice(&export_unmapped(Format::MultiWoz21, session)).unwrap();
    let cl: Value = serde_json::from_slice(&export_unmapped(Format::ConvLab3, session)).unwrap();
    let messages = cw[id]["messages"].as_array().unwrap();
    let log = mw[id]["log"].as_array().unwrap();
    let turns = cl[0]["turns"].as_array().unwrap();
    assert_eq!(log.len(), messages.len(), "{id}");
    let closed = turns.len() + 1 == messages.len();
    assert!(closed || turns.len() == messages.len(), "{id}");
    if closed {
        let last = messages.last().unwrap();
        assert_eq!(
            (&last["role"], &last["content"]),
            (&json!("sys"), &json!(""))
        );
        assert_eq!(last["dialog_act"], json!([]));
        assert_eq!(log.last().unwrap()["dialog_act"], json!({}));
    }
    let mut intents = vec![];
    for (i, ((m, l), t)) in messages.iter().zip(log).zip(turns).enumerate() {
        assert_eq!(l["text"], m["content"], "{id}:{i}");
        assert_eq!(t["utterance"], m["content"], "{id}:{i}");
        let speaker = if m["role"] == "usr" { "user" } else { "system" };
        assert_eq!(t["speaker"], speaker, "{id}:{i}");
        let acts = derived_acts(t);
        intents.extend(acts.iter().map(|a| a[0].as_str().unwrap().to_string()));
        let crosswoz = acts
            .iter()
            .filter(|a| CROSSWOZ_DOMAINS.contains(&a[1].as_str().unwrap()))
            .cloned();
        assert_eq!(
            sorted(m["dialog_act"].as_array().unwrap().iter().cloned()),
            sorted(crosswoz),
            "{id}:{i}: CrossWOZ acts against ConvLab-3's {}",
            t["dialogue_acts"]
        );
        let multiwoz = acts
            .iter()
            .map(multiwoz_form)
            .filter(|(key, pair)| is_multiwoz_act(key, pair))
            .map(|(key, pair)| json!([key, pair]));
        let listed = l["dialog_act"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(key, pairs)| {
                let pairs = pairs.as_array().unwrap().clone();
                pairs.into_iter().map(move |p| json!([key, p]))
            });
        assert_eq!(
            sorted(listed),
            sorted(multiwoz),
            "{id}:{i}: MultiWOZ acts against ConvLab-3's {}",
            t["dialogue_acts"]
        );
    }
    intents
}

/// A `crosswoz-demo` session where the wizard greets, searches the restaurants for a name none
/// has and says the `no_offer` option.
fn no_offer_session(study: &LoadedStudy) -> ImportedSession {
    let mut p = Play::start(study, 7);
    p.by(
        Role::Wizard,
        Command::Say {
            state: "greet".into(),
        },
    );
    p.text(Role::User, "有没有叫不存在餐馆的地方？");
    p.by(
        Role::Wizard,
        Command::Query {
            table: "餐馆".into(),
            filters: vec![Filter {
                column: "名称".into(),
                op: FilterOp::Equals {
                    value: json!("不存在餐馆"),
                },
            }],
        },
    );
    p.by(
        Role::Wizard,
        Command::Say {
            state: "no_offer".into(),
        },
    );
    ImportedSession {
        id: ID.into(),
        events: p.log,
    }
}

/// Simulated `crosswoz-demo` sessions and one with a no-offer: the MultiWOZ 2.1 and ConvLab-3 exports have the same
/// Inform, Recommend and NoOffer acts as the CrossWOZ export, in each dataset's shape, and each
/// file re-imports and re-exports identically.
#[test]
fn recommend_and_no_offer_acts_in_each_format() {
    let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let mut seen: Vec<String> = vec![];
    let mut round_trips = 0;
    let sessions = (0..30u64)
        .map(|seed| sim_session(&study, seed).1)
        .chain([no_offer_session(&study)]);
    for session in sessions {
        let seed = session.id.clone();
        let intents = same_acts_in_each_format(&session);
        let new: Vec<&String> = intents
            .iter()
            .filter(|i| ["Recommend", "NoOffer"].contains(&i.as_str()) && !seen.contains(i))
            .collect();
        if new.is_empty() {
            continue;
        }
        seen.extend(new.into_iter().cloned());
        // A session with an intent not yet seen goes round each format.
        for format in [Format::CrossWoz, Format::MultiWoz21, Format::ConvLab3] {
            let first = export(format, &session);
            let back =
                formats::import(format, &Input::new("sim.json", first.clone())).expect("reimport");
            let second = export(format, &back[0]);
            common::assert_same_file(
                &first,
                &second,
                &format!("seed {seed} {format:?} re-export"),
            );
            round_trips += 1;
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        ["NoOffer", "Recommend"],
        "the simulated wizards do both"
    );
    assert!(round_trips >= 6);
}

/// The user's Request acts in CrossWOZ (`["Request", domain, slot, ""]`), MultiWOZ 2.1
/// (`Domain-Request: [[Slot, "?"]]`) and ConvLab-3 (binary `request`) for the same turn, each
/// where the domain and slot are the format's: the fixture's 景点 in CrossWOZ and ConvLab-3, the
/// same goal on MultiWOZ's `attraction` in MultiWOZ and ConvLab-3.
#[test]
fn request_acts_in_each_format() {
    let fixture = study();
    for study in [fixture.clone(), multiwoz_labelled(&fixture)] {
        let seed = referring_seed(&study);
        let mut p = Play::start(&study, seed);
        let g = p.goal();
        let sg = &g.subgoals[0];
        let asked: Vec<&str> = sg.requests.iter().map(|r| r.slot.as_str()).collect();
        assert!(asked.contains(&"name"), "the name is always requested");
        p.text(Role::Wizard, "Hello!");
        p.text(
            Role::User,
            format!("Tell me its {} please.", asked.join(" and ")),
        );
        let session = p.session();
        let intents = same_acts_in_each_format(&session);
        assert_eq!(
            intents.iter().filter(|i| *i == "Request").count(),
            asked.len(),
            "{intents:?}"
        );
        // The shape spelled out once: the requested name in the user's turn, the first.
        let cw: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
        let mw: Value = serde_json::from_slice(&export(Format::MultiWoz21, &session)).unwrap();
        let user = &mw[ID]["log"][0];
        assert_eq!(
            user["text"],
            format!("Tell me its {} please.", asked.join(" and "))
        );
        let key = format!("{}-Request", upper_first(&sg.domain));
        let cw_acts = &cw[ID]["messages"][0]["dialog_act"];
        let in_crosswoz = cw_acts
            .as_array()
            .unwrap()
            .contains(&json!(["Request", sg.domain, "name", ""]));
        let in_multiwoz = user["dialog_act"][&key]
            .as_array()
            .is_some_and(|p| p.contains(&json!(["Name", "?"])));
        match sg.domain.as_str() {
            "景点" => assert!(
                in_crosswoz && !in_multiwoz,
                "{cw_acts} {}",
                user["dialog_act"]
            ),
            "attraction" => {
                assert!(
                    !in_crosswoz && in_multiwoz,
                    "{cw_acts} {}",
                    user["dialog_act"]
                )
            }
            other => panic!("unexpected domain {other}"),
        }
        for format in [Format::CrossWoz, Format::MultiWoz21, Format::ConvLab3] {
            let first = export(format, &session);
            let back =
                formats::import(format, &Input::new("req.json", first.clone())).expect("reimport");
            assert_eq!(first, export(format, &back[0]), "{format:?}");
        }
    }
}

/// The index among the session's messages of the last message of the CrossWOZ export's turn
/// `turn` (a simulated wizard's consecutive messages are one turn).
fn last_message_of(session: &ImportedSession, turn: usize) -> usize {
    let seqs: Vec<u64> = session
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Message { .. }))
        .map(|e| e.seq)
        .collect();
    let merged = wozkit_data::sidecar::shaped_turns(Format::CrossWoz, session);
    let seq = match merged.iter().find(|t| t.turn == turn) {
        Some(t) => *t.messages.last().unwrap(),
        None => {
            // A turn of one message: the turns before it hold one message each or are merged.
            let skipped = session
                .messages()
                .take_while(|(role, _)| *role != Role::User)
                .count();
            let extra: usize = merged
                .iter()
                .filter(|t| t.turn < turn)
                .map(|t| t.messages.len() - 1)
                .sum();
            seqs[skipped + turn + extra]
        }
    };
    seqs.iter().position(|&s| s == seq).unwrap()
}

/// Adjudicated acts of an annotation study replace the derived ones on their turn, in each
/// format; the other turns keep theirs.
#[test]
fn adjudicated_acts_win_over_derived_ones() {
    use wozkit_core::evaluation::{ActLabel, ActPair};
    use wozkit_data::acts::{TurnActs, adjudicate_acts};
    use wozkit_data::stored::StoredSession;
    let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let (id, session, turn, message) = (0..30u64)
        .find_map(|seed| {
            let (id, session) = sim_session(&study, seed);
            let cw: Value = serde_json::from_slice(&export(Format::CrossWoz, &session)).unwrap();
            let msgs = cw[&id]["messages"].as_array().unwrap().clone();
            let recommends = |m: &Value| {
                m["dialog_act"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a[0] == "Recommend")
            };
            // A session with two recommending turns: one is labelled, the other is not.
            let at: Vec<usize> = (0..msgs.len()).filter(|&i| recommends(&msgs[i])).collect();
            (at.len() >= 2).then(|| {
                let message = last_message_of(&session, at[0]);
                (id, session, at[0], message)
            })
        })
        .expect("a simulated session recommends twice");
    let label = ActLabel {
        acts: vec!["Restaurant-Inform".into()],
        pairs: vec![ActPair {
            act: "Restaurant-Inform".into(),
            slot: "food".into(),
            value: "thai".into(),
        }],
    };
    let mut acts = TurnActs::default();
    acts.sessions
        .entry(id.clone())
        .or_default()
        .insert(message, adjudicate_acts(&[label]));
    let expected = [
        (
            Format::CrossWoz,
            json!([["Inform", "Restaurant", "food", "thai"]]),
        ),
        (
            Format::MultiWoz21,
            json!({"Restaurant-Inform": [["food", "thai"]]}),
        ),
        (
            Format::ConvLab3,
            json!({"categorical": [], "non-categorical": [
                {"intent": "Inform", "domain": "Restaurant", "slot": "food", "value": "thai"}
            ], "binary": []}),
        ),
    ];
    for (format, want) in expected {
        let mut stored = StoredSession {
            store_id: id.clone(),
            origin: None,
            first_at_ms: 1,
            events: session.events.clone(),
        };
        assert!(acts.apply(format, &mut stored).expect("apply"));
        let file: Value = serde_json::from_slice(&export(format, &stored.dataset_view())).unwrap();
        let plain: Value = serde_json::from_slice(&export(format, &session)).unwrap();
        // The three formats have the same turn positions (ConvLab-3 lacks a closing turn).
        let (turns, before, act_key) = match format {
            Format::CrossWoz => (
                &file[&id]["messages"],
                &plain[&id]["messages"],
                "dialog_act",
            ),
            Format::MultiWoz21 => (&file[&id]["log"], &plain[&id]["log"], "dialog_act"),
            _ => (&file[0]["turns"], &plain[0]["turns"], "dialogue_acts"),
        };
        let (turns, before) = (turns.as_array().unwrap(), before.as_array().unwrap());
        assert_eq!(turns.len(), before.len(), "{format:?}");
        assert_eq!(turns[turn][act_key], want, "{format:?}");
        // Every other turn keeps its derived acts.
        for (i, (t, b)) in turns.iter().zip(before).enumerate() {
            if i != turn {
                assert_eq!(t[act_key], b[act_key], "{format:?}: turn {i}");
            }
        }
        // Another recommending turn keeps its Recommend where the format has the act (MultiWOZ
        // has no act on CrossWOZ's domains).
        let other = turns.iter().enumerate().any(|(i, t)| {
            let a = t[act_key].to_string();
            i != turn && (a.contains("Recommend") || a.contains("\"recommend\""))
        });
        assert_eq!(
            other,
            format != Format::MultiWoz21,
            "{format:?}: another Recommend"
        );
    }
}
