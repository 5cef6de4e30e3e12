//! The built-in studies' `datasets:` mappings in live exports: sessions of `restaurant-booking`
//! and `crosswoz-demo` played through the engine (by hand, and by the simulated crowd) and
//! exported. A wizard state the study maps becomes the mapped MultiWOZ 2.1 or CrossWOZ acts with
//! the values of the selected row; every act and slot written is in the format's released
//! vocabulary; without the mapping the same turns have none of those acts (the labels stay in the
//! sidecar); Taskmaster-1's `instruction_id` carries the Taskmaster-1 domain; a ConvLab-3 mapping
//! given for a study writes its acts.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use wozkit_core::database::{Filter, FilterOp};
use wozkit_core::datasets::{ActMapping, MappedAct, MappedActs};
use wozkit_core::engine::{Command, Session, step};
use wozkit_core::event::{Actor, Event, Role};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_data::mapping::Mappings;
use wozkit_data::{Format, ImportedSession, formats};

const ID: &str = "mapped-1";

struct Play<'a> {
    study: &'a LoadedStudy,
    rng: ChaCha8Rng,
    s: Session,
    log: Vec<Event>,
}

impl Play<'_> {
    fn start(study: &LoadedStudy) -> Play<'_> {
        let mut p = Play {
            study,
            rng: ChaCha8Rng::seed_from_u64(3),
            s: Session::new(study, ID),
            log: vec![],
        };
        p.run(Actor::System, Command::Start { seed: 3 });
        p
    }

    fn run(&mut self, actor: Actor, cmd: Command) {
        let now = 1_700_000_000_000 + self.log.len() as u64 * 1000;
        let what = format!("{cmd:?}");
        let st = step(self.study, &self.s, &actor, cmd, now, &mut self.rng)
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
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

    fn say(&mut self, state: &str) {
        self.by(
            Role::Wizard,
            Command::Say {
                state: state.into(),
            },
        );
    }

    fn user(&mut self, text: &str) {
        self.by(Role::User, Command::Text { text: text.into() });
    }

    fn select(&mut self, table: &str, key: &str) {
        self.by(
            Role::Wizard,
            Command::Select {
                table: table.into(),
                key: key.into(),
            },
        );
    }

    fn session(&self) -> ImportedSession {
        ImportedSession {
            id: ID.into(),
            events: self.log.clone(),
        }
    }
}

fn export(format: Format, sessions: &[ImportedSession], mappings: &Mappings) -> Value {
    let mut out = vec![];
    formats::export_mapped(format, sessions, mappings, &mut out).expect("export");
    serde_json::from_slice(&out).expect("JSON")
}

/// A `restaurant-booking` session: the wizard asks for the cuisine and the area, searches
/// Italian restaurants in the old town, selects Trattoria Lanterna (`r01`) and presents it.
fn restaurant_session(study: &LoadedStudy) -> ImportedSession {
    let mut p = Play::start(study);
    p.say("greet");
    p.user("Hi, I'd like a table for dinner.");
    p.say("request_cuisine");
    p.user("Italian, please.");
    p.say("request_area");
    p.user("In the old town.");
    p.say("confirm_details");
    p.say("inform_searching");
    let equals = |column: &str, value: &str| Filter {
        column: column.into(),
        op: FilterOp::Equals {
            value: json!(value),
        },
    };
    p.by(
        Role::Wizard,
        Command::Query {
            table: "restaurant".into(),
            filters: vec![equals("cuisine", "Italian"), equals("area", "old town")],
        },
    );
    p.select("restaurant", "r01");
    p.say("inform_results");
    p.user("Sounds good.");
    p.session()
}

/// The MultiWOZ acts of one turn as `[act, [slot, value]]`, sorted.
fn multiwoz_pairs(turn: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = turn["dialog_act"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(act, pairs)| {
            let pairs = pairs.as_array().unwrap().clone();
            pairs.into_iter().map(move |p| json!([act, p]))
        })
        .collect();
    out.sort_by_key(|v| v.to_string());
    out
}

#[test]
fn restaurant_states_become_multiwoz_restaurant_acts_with_the_selected_row() {
    let study = load_builtin("restaurant-booking").unwrap_or_else(|e| panic!("{e}"));
    let session = restaurant_session(&study);
    let file = export(
        Format::MultiWoz21,
        std::slice::from_ref(&session),
        Mappings::builtin(),
    );
    let log = file[ID]["log"].as_array().unwrap();
    // User first: the greeting is left out (sidecar); the three system turns answer the user.
    assert_eq!(log.len(), 8, "{log:?}");
    assert_eq!(
        multiwoz_pairs(&log[1]),
        [json!(["Restaurant-Request", ["Food", "?"]])]
    );
    assert_eq!(
        multiwoz_pairs(&log[3]),
        [json!(["Restaurant-Request", ["Area", "?"]])]
    );
    // confirm_details and inform_searching map onto nothing; inform_results reads the row.
    assert_eq!(
        multiwoz_pairs(&log[5]),
        [
            json!(["Restaurant-Inform", ["Area", "old town"]]),
            json!(["Restaurant-Inform", ["Food", "Italian"]]),
            json!(["Restaurant-Inform", ["Name", "Trattoria Lanterna"]]),
            json!(["Restaurant-Inform", ["Price", "moderate"]]),
        ]
    );
    assert_eq!(log[7]["dialog_act"], json!({}), "the closing empty turn");
    // The search fills the mapped slots of MultiWOZ's `restaurant` (cuisine is `food`) from the
    // turn it was made in.
    let semi = |i: usize| log[i]["metadata"]["restaurant"]["semi"].clone();
    let empty = json!({"food": "", "pricerange": "", "name": "", "area": ""});
    assert_eq!(semi(1), empty);
    assert_eq!(semi(3), empty);
    let searched = json!({"food": "Italian", "pricerange": "", "name": "", "area": "old town"});
    assert_eq!(semi(5), searched);
    assert_eq!(semi(7), searched);
    for turn in log.iter().step_by(2) {
        assert_eq!(
            turn["dialog_act"],
            json!({}),
            "user turns have no mapped acts"
        );
    }

    // Without the mapping the wizard's states are no acts at all.
    let plain = export(
        Format::MultiWoz21,
        std::slice::from_ref(&session),
        Mappings::none(),
    );
    for turn in plain[ID]["log"].as_array().unwrap() {
        assert_eq!(turn["dialog_act"], json!({}), "no made-up act");
    }
    let plain_semi = &plain[ID]["log"][5]["metadata"]["restaurant"]["semi"];
    assert_eq!(plain_semi, &empty, "`cuisine` is no MultiWOZ slot");
}

#[test]
fn taskmaster1_instruction_ids_carry_the_mapped_domain() {
    let study = load_builtin("restaurant-booking").unwrap_or_else(|e| panic!("{e}"));
    let session = restaurant_session(&study);
    let file = export(
        Format::Taskmaster1,
        std::slice::from_ref(&session),
        Mappings::builtin(),
    );
    assert_eq!(file[0]["instruction_id"], "restaurant-table-1");
    // The prefix is a Taskmaster-1 domain as the released ids' are (`restaurant-table-2`).
    let id = file[0]["instruction_id"].as_str().unwrap();
    let (domain, n) = id.rsplit_once('-').unwrap();
    assert_eq!(domain, "restaurant-table");
    assert!(n.parse::<u32>().is_ok_and(|n| n >= 1));
    // A study without the mapping keeps its id.
    let plain = export(
        Format::Taskmaster1,
        std::slice::from_ref(&session),
        Mappings::none(),
    );
    assert_eq!(plain[0]["instruction_id"], "restaurant-booking");
}

#[test]
fn crosswoz_demo_states_become_crosswoz_acts() {
    let study = load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let row = study
        .database
        .as_ref()
        .unwrap()
        .all_rows("景点")
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let text = |c: &str| wozkit_core::database::value_text(&row[c]);
    let name = text("名称");
    let mut p = Play::start(&study);
    p.say("greet");
    p.user("我想找个景点。");
    p.select("景点", &name);
    p.say("inform_attraction");
    p.user("好的，谢谢。");
    p.say("request_more");
    p.user("没有了，再见。");
    p.say("goodbye");
    let session = p.session();
    let file = export(
        Format::CrossWoz,
        std::slice::from_ref(&session),
        Mappings::builtin(),
    );
    let messages = file[ID]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6);
    let acts = |i: usize| messages[i]["dialog_act"].as_array().unwrap().clone();
    for slot in ["名称", "地址", "门票", "评分"] {
        let act = json!(["Inform", "景点", slot, text(slot)]);
        assert!(acts(1).contains(&act), "{act} in {:?}", acts(1));
    }
    assert!(acts(3).contains(&json!(["General", "reqmore", "none", "none"])));
    assert!(acts(5).contains(&json!(["General", "bye", "none", "none"])));
    // Without the mapping the same turns have none of these.
    let plain = export(
        Format::CrossWoz,
        std::slice::from_ref(&session),
        Mappings::none(),
    );
    let plain = plain[ID]["messages"].as_array().unwrap();
    assert!(
        !plain[3]["dialog_act"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a[0] == "General"),
        "no general act without the mapping"
    );
    assert!(
        !plain[1]["dialog_act"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| { a == &json!(["Inform", "景点", "地址", text("地址")]) })
    );
}

#[test]
fn a_convlab3_mapping_writes_its_acts() {
    let mut study = load_builtin("restaurant-booking").unwrap_or_else(|e| panic!("{e}"));
    let session = restaurant_session(&study);
    let act = |spec: Value| -> MappedAct { serde_json::from_value(spec).unwrap() };
    let mut m = ActMapping::default();
    m.acts.insert(
        "request_cuisine".into(),
        MappedActs::One(act(json!({"act": "restaurant-request", "slot": "food"}))),
    );
    m.acts.insert(
        "inform_results".into(),
        MappedActs::Many(vec![act(
            json!({"act": "restaurant-inform", "slot": "name", "column": "name"}),
        )]),
    );
    study.study.datasets.convlab3 = Some(m);
    let mappings = Mappings::with_studies([&study.study]);
    let file = export(Format::ConvLab3, std::slice::from_ref(&session), &mappings);
    let turns = file[0]["turns"].as_array().unwrap();
    assert_eq!(
        turns[1]["dialogue_acts"]["binary"],
        json!([{"intent": "request", "domain": "restaurant", "slot": "food"}])
    );
    let informs = turns[5]["dialogue_acts"]["non-categorical"]
        .as_array()
        .unwrap();
    assert_eq!(informs.len(), 1, "{informs:?}");
    assert_eq!(informs[0]["value"], "Trattoria Lanterna");
    // The value occurs once in the utterance: its span is given.
    let utterance = turns[5]["utterance"].as_str().unwrap();
    let (start, end) = (
        informs[0]["start"].as_u64().unwrap() as usize,
        informs[0]["end"].as_u64().unwrap() as usize,
    );
    let span: String = utterance.chars().skip(start).take(end - start).collect();
    assert_eq!(span, "Trattoria Lanterna");
    assert_eq!(file[0]["domains"], json!(["restaurant"]));
    // The built-in mappings alone declare no ConvLab-3 acts for the study.
    let plain = export(
        Format::ConvLab3,
        std::slice::from_ref(&session),
        Mappings::builtin(),
    );
    assert_eq!(plain[0]["turns"][1]["dialogue_acts"]["binary"], json!([]));
}

/// MultiWOZ 2.1's act domains, intents and act slots, as in the released `data.json`.
const MULTIWOZ_ACT_DOMAINS: [&str; 9] = [
    "Attraction",
    "Booking",
    "Hospital",
    "Hotel",
    "Police",
    "Restaurant",
    "Taxi",
    "Train",
    "general",
];
const MULTIWOZ_INTENTS: [&str; 9] = [
    "Inform",
    "Request",
    "Recommend",
    "NoOffer",
    "Select",
    "Book",
    "NoBook",
    "OfferBook",
    "OfferBooked",
];
const MULTIWOZ_GENERAL: [&str; 5] = ["greet", "bye", "thank", "welcome", "reqmore"];
const MULTIWOZ_ACT_SLOTS: [&str; 28] = [
    "Addr",
    "Area",
    "Arrive",
    "Car",
    "Choice",
    "Day",
    "Department",
    "Depart",
    "Dest",
    "Fee",
    "Food",
    "Id",
    "Internet",
    "Leave",
    "Name",
    "Open",
    "Parking",
    "People",
    "Phone",
    "Post",
    "Price",
    "Ref",
    "Stars",
    "Stay",
    "Ticket",
    "Time",
    "Type",
    "none",
];

fn sim_sessions(name: &str, seeds: u64) -> Vec<ImportedSession> {
    let study = load_builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    (0..seeds)
        .map(|seed| {
            let played =
                wozkit_core::sim::play(&study, seed, wozkit_core::sim::WizardPolicy::Priors);
            let id = format!("{name}-sim-{seed}");
            let events = played
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
            ImportedSession { id, events }
        })
        .filter(|s| s.messages().next().is_some())
        .collect()
}

#[test]
fn simulated_restaurant_sessions_have_mapped_multiwoz_acts_within_the_vocabulary() {
    let sessions = sim_sessions("restaurant-booking", 12);
    let file = export(Format::MultiWoz21, &sessions, Mappings::builtin());
    let mut seen: Vec<String> = vec![];
    for (id, record) in file.as_object().unwrap() {
        for (i, turn) in record["log"].as_array().unwrap().iter().enumerate() {
            for (act, pairs) in turn["dialog_act"].as_object().unwrap() {
                let (domain, intent) = act.split_once('-').expect("Domain-Intent");
                assert!(MULTIWOZ_ACT_DOMAINS.contains(&domain), "{id}:{i}: {act}");
                let intents: &[&str] = if domain == "general" {
                    &MULTIWOZ_GENERAL
                } else {
                    &MULTIWOZ_INTENTS
                };
                assert!(intents.contains(&intent), "{id}:{i}: {act}");
                for pair in pairs.as_array().unwrap() {
                    let slot = pair[0].as_str().unwrap();
                    assert!(MULTIWOZ_ACT_SLOTS.contains(&slot), "{id}:{i}: {act} {pair}");
                    assert!(pair[1].as_str().is_some_and(|v| !v.is_empty()));
                }
                if !seen.contains(act) {
                    seen.push(act.clone());
                }
            }
        }
    }
    seen.sort();
    // The crowd's wizards ask, present restaurants and book: the mapping's acts are written.
    for act in ["Restaurant-Inform", "Restaurant-Request", "Booking-Request"] {
        assert!(seen.iter().any(|s| s == act), "{act} among {seen:?}");
    }
    let tm = export(Format::Taskmaster1, &sessions, Mappings::builtin());
    for c in tm.as_array().unwrap() {
        assert_eq!(c["instruction_id"], "restaurant-table-1");
    }
}

#[test]
fn simulated_crosswoz_demo_sessions_have_mapped_crosswoz_acts_within_the_vocabulary() {
    // The released `sys_da_voc.json` writes these acts (the values are the database's).
    let general = ["greet", "thank", "bye", "welcome", "reqmore"];
    let slots: [(&str, &[&str]); 3] = [
        ("景点", &["名称", "地址", "门票", "评分", "游玩时间"]),
        (
            "餐馆",
            &[
                "名称",
                "人均消费",
                "评分",
                "地址",
                "电话",
                "营业时间",
                "推荐菜",
            ],
        ),
        (
            "酒店",
            &[
                "名称",
                "酒店类型",
                "价格",
                "评分",
                "地址",
                "电话",
                "酒店设施",
            ],
        ),
    ];
    let sessions = sim_sessions("crosswoz-demo", 12);
    let file = export(Format::CrossWoz, &sessions, Mappings::builtin());
    let (mut informs, mut generals) = (0, 0);
    for (id, record) in file.as_object().unwrap() {
        for (i, m) in record["messages"].as_array().unwrap().iter().enumerate() {
            for act in m["dialog_act"].as_array().unwrap() {
                let a: Vec<&str> = act
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                match a[0] {
                    "General" => {
                        assert!(general.contains(&a[1]), "{id}:{i}: {act}");
                        assert_eq!(&a[2..], ["none", "none"]);
                        generals += 1;
                    }
                    "Inform" | "Recommend" | "NoOffer" | "Request" => {
                        let known = slots.iter().find(|(d, _)| *d == a[1]);
                        let (_, s) = known.unwrap_or_else(|| panic!("{id}:{i}: {act}"));
                        assert!(
                            s.contains(&a[2]) || a[2] == "none",
                            "{id}:{i}: slot of {act}"
                        );
                        informs += usize::from(a[0] == "Inform" && m["role"] == "sys");
                    }
                    other => panic!("{id}:{i}: intent {other}"),
                }
            }
        }
    }
    assert!(
        informs > 0 && generals > 0,
        "{informs} informs, {generals} general acts"
    );
}
