//! A live session of a study with user goals (the two-domain fixture study of wozkit-core),
//! played through the engine and exported to CrossWOZ, MultiWOZ 2.1 and ConvLab-3: the CrossWOZ
//! record is checked field by field against a dialogue of the real dataset (key sets, key order,
//! types, the five-domain system state) and against the study's database (every selected result
//! exists, every constraint is a value of the drawn row); each file re-imports and re-exports
//! identically.

mod common;
#[path = "common/crosswoz_check.rs"]
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
    assert_eq!(msgs.len(), session.messages().count());
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

#[test]
fn multiwoz_and_convlab3_get_the_goal_states_and_acts() {
    let study = study();
    let (session, goal) = live_session(&study);
    let file: Value = serde_json::from_slice(&export(Format::MultiWoz21, &session)).unwrap();
    let rec = &file[ID];
    for sg in &goal.subgoals {
        let g = &rec["goal"][&sg.domain];
        assert_eq!(g["reqt"].as_array().unwrap().len(), sg.requests.len());
        for c in &sg.constraints {
            assert_eq!(g["info"][&c.slot], json!(c.value));
        }
    }
    let log = rec["log"].as_array().unwrap();
    // The wizard turn after the first search: the belief state's constraints.
    let first = &goal.subgoals[0];
    let sys = log
        .iter()
        .skip(1)
        .step_by(2)
        .find(|t| t["metadata"].get(&first.domain).is_some())
        .expect("a system turn with a belief state");
    for c in first.constraints.iter().filter(|c| c.reference.is_none()) {
        assert_eq!(
            sys["metadata"][&first.domain]["semi"][&c.slot],
            json!(c.value)
        );
    }
    assert!(
        log.iter().any(|t| t["dialog_act"]
            .get(format!("{}-Inform", first.domain))
            .is_some()),
        "an Inform act"
    );

    let file: Value = serde_json::from_slice(&export(Format::ConvLab3, &session)).unwrap();
    let d = &file[0];
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
        // (MultiWOZ adds an empty user turn before the wizard's greeting.)
        let texts: Vec<(Role, &str)> = back[0].messages().filter(|(_, t)| !t.is_empty()).collect();
        assert_eq!(texts, session.messages().collect::<Vec<_>>(), "{format:?}");
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
    let m = &file[ID]["messages"][0];
    assert_eq!(m["role"], "sys");
    assert_eq!(m["sys_state"]["景点"]["selectedResults"], json!([]));
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
    assert_eq!(requests(&msgs[1]), Vec::<Value>::new(), "no slot named");
    let got = requests(&msgs[3]);
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

/// A CrossWOZ act as the MultiWOZ 2.1 dataset writes it: its `Domain-Intent` key and pair.
fn multiwoz_form(act: &Value) -> (String, Value) {
    let a: Vec<&str> = act
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    match a[0] {
        "General" => (format!("general-{}", a[1]), json!(["none", "none"])),
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

/// A CrossWOZ act as ConvLab-3's unified format writes it: its list and entry.
fn convlab3_form(act: &Value) -> (&'static str, Value) {
    let a: Vec<&str> = act
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    match a[0] {
        "General" => (
            "binary",
            json!({"intent": a[1], "domain": "general", "slot": ""}),
        ),
        "NoOffer" => (
            "binary",
            json!({"intent": "nooffer", "domain": a[1], "slot": ""}),
        ),
        "Request" => (
            "binary",
            json!({"intent": "request", "domain": a[1], "slot": a[2]}),
        ),
        intent => (
            "non-categorical",
            json!({"intent": intent.to_lowercase(), "domain": a[1], "slot": a[2], "value": a[3]}),
        ),
    }
}

/// Checks that the MultiWOZ and ConvLab-3 exports of `session` have, on each turn, the acts of
/// the CrossWOZ export in their own shapes and nothing else; returns the CrossWOZ intents seen.
fn same_acts_in_each_format(session: &ImportedSession) -> Vec<String> {
    let id = &session.id;
    let cw: Value = serde_json::from_slice(&export(Format::CrossWoz, session)).unwrap();
    let mw: Value = serde_json::from_slice(&export(Format::MultiWoz21, session)).unwrap();
    let cl: Value = serde_json::from_slice(&export(Format::ConvLab3, session)).unwrap();
    let messages = cw[id]["messages"].as_array().unwrap();
    let log = mw[id]["log"].as_array().unwrap();
    let turns = cl[0]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), messages.len());
    let mut intents = vec![];
    // MultiWOZ alternates speakers: an empty turn fills each gap.
    let mut position = 0usize;
    for (m, t) in messages.iter().zip(turns) {
        let expected = if position.is_multiple_of(2) {
            "usr"
        } else {
            "sys"
        };
        if m["role"] != expected {
            position += 1;
        }
        let l = &log[position];
        position += 1;
        assert_eq!(l["text"], m["content"]);
        assert_eq!(t["utterance"], m["content"]);
        let acts = m["dialog_act"].as_array().unwrap();
        let mut pairs = 0;
        for act in acts {
            intents.push(act[0].as_str().unwrap().to_string());
            let (key, pair) = multiwoz_form(act);
            let listed = l["dialog_act"][&key].as_array();
            assert!(
                listed.is_some_and(|p| p.contains(&pair)),
                "{id}: MultiWOZ lacks {key} {pair} for {act}: {}",
                l["dialog_act"]
            );
            let (kind, entry) = convlab3_form(act);
            assert!(
                t["dialogue_acts"][kind]
                    .as_array()
                    .unwrap()
                    .contains(&entry),
                "{id}: ConvLab-3 lacks {entry} in {kind} for {act}: {}",
                t["dialogue_acts"]
            );
            pairs += 1;
        }
        let mw_pairs: usize = l["dialog_act"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p.as_array().unwrap().len())
            .sum();
        assert_eq!(mw_pairs, pairs, "{id}: MultiWOZ acts {}", l["dialog_act"]);
        let cl_acts: usize = ["binary", "categorical", "non-categorical"]
            .iter()
            .map(|k| t["dialogue_acts"][k].as_array().unwrap().len())
            .sum();
        assert_eq!(
            cl_acts, pairs,
            "{id}: ConvLab-3 acts {}",
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

/// The user's Request acts in MultiWOZ 2.1 (`Domain-Request: [[Slot, "?"]]`) and ConvLab-3
/// (binary `request`), for the same turn as in CrossWOZ.
#[test]
fn request_acts_in_each_format() {
    let study = study();
    let seed = referring_seed(&study);
    let mut p = Play::start(&study, seed);
    let g = p.goal();
    let sg = &g.subgoals[0];
    let asked: Vec<&str> = sg.requests.iter().map(|r| r.slot.as_str()).collect();
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
    // The shape spelled out once: MultiWOZ's key and pair of the first requested slot.
    let mw: Value = serde_json::from_slice(&export(Format::MultiWoz21, &session)).unwrap();
    let user = &mw[ID]["log"][2];
    assert_eq!(
        user["text"],
        format!("Tell me its {} please.", asked.join(" and "))
    );
    let key = format!("{}-Request", upper_first(&sg.domain));
    assert!(
        user["dialog_act"][&key]
            .as_array()
            .unwrap()
            .contains(&json!([upper_first(asked[0]), "?"])),
        "{}",
        user["dialog_act"]
    );
    for format in [Format::MultiWoz21, Format::ConvLab3] {
        let first = export(format, &session);
        let back =
            formats::import(format, &Input::new("req.json", first.clone())).expect("reimport");
        assert_eq!(first, export(format, &back[0]), "{format:?}");
    }
}

/// Adjudicated acts of an annotation study replace the derived ones on their turn, in each
/// format; the other turns keep theirs.
#[test]
fn adjudicated_acts_win_over_derived_ones() {
    use wozkit_core::evaluation::{ActLabel, ActPair};
    use wozkit_data::acts::{TurnActs, adjudicate_acts};
    use wozkit_data::stored::StoredSession;
    let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let (id, session, turn) = (0..30u64)
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
            (at.len() >= 2).then(|| (id, session, at[0]))
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
        .insert(turn, adjudicate_acts(&[label]));
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
        let (turns, act_key) = match format {
            Format::CrossWoz => (file[&id]["messages"].clone(), "dialog_act"),
            Format::MultiWoz21 => {
                // The exported log without the empty turns MultiWOZ inserts.
                let log: Vec<Value> = file[&id]["log"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|t| t["text"] != "")
                    .cloned()
                    .collect();
                (Value::Array(log), "dialog_act")
            }
            _ => (file[0]["turns"].clone(), "dialogue_acts"),
        };
        let turns = turns.as_array().unwrap();
        assert_eq!(turns[turn][act_key], want, "{format:?}");
        // Another recommending turn keeps its derived act.
        let text = turns.iter().skip(turn + 1).any(|t| {
            let a = t[act_key].to_string();
            a.contains("Recommend") || a.contains("\"recommend\"")
        });
        assert!(text, "{format:?}: a later turn keeps its Recommend");
    }
}
