//! Simulated live sessions of each built-in dialogue study (`offshore-emergency`,
//! `restaurant-booking`, `crosswoz-demo`), exported in every dialogue format and checked
//! against the structure of the released files and the formats' documented invariants: the user
//! first and strict alternation, MultiWOZ's seven-domain `metadata` with its released slots and
//! only MultiWOZ acts, CrossWOZ's five-domain system states with the released slots only, the
//! ConvLab-3 checker's rules (id pattern, ontology membership of every act and slot, spans equal
//! to their substring, states on user turns only), and that each export re-imports and exports
//! again unchanged.

use serde_json::Value;
use wozkit_core::event::Event;
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_data::formats::convlab3::ontology::Ontology;
use wozkit_data::{Format, ImportedSession, Input, formats};

const STUDIES: [&str; 3] = ["offshore-emergency", "restaurant-booking", "crosswoz-demo"];
const SEEDS: u64 = 4;

fn sim_session(study: &LoadedStudy, seed: u64) -> ImportedSession {
    let played = wozkit_core::sim::play(study, seed, wozkit_core::sim::WizardPolicy::Priors);
    let id = format!("{}-sim-{seed}", study.study.id);
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
    ImportedSession { id, events }
}

fn sessions() -> Vec<ImportedSession> {
    STUDIES
        .iter()
        .flat_map(|name| {
            let study = load_builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            (0..SEEDS).map(move |seed| sim_session(&study, seed))
        })
        .filter(|s| s.messages().next().is_some())
        .collect()
}

fn export(format: Format, sessions: &[ImportedSession]) -> Vec<u8> {
    let mut out = vec![];
    formats::export(format, sessions, &mut out).expect("export");
    out
}

/// The MultiWOZ 2.1 `metadata` domains with their `book` and `semi` slots, as released.
const MULTIWOZ: [(&str, &[&str], &[&str]); 7] = [
    (
        "taxi",
        &[],
        &["leaveAt", "destination", "departure", "arriveBy"],
    ),
    ("police", &[], &[]),
    (
        "restaurant",
        &["time", "day", "people"],
        &["food", "pricerange", "name", "area"],
    ),
    ("hospital", &[], &["department"]),
    (
        "hotel",
        &["stay", "day", "people"],
        &[
            "name",
            "area",
            "parking",
            "pricerange",
            "stars",
            "internet",
            "type",
        ],
    ),
    ("attraction", &[], &["type", "name", "area"]),
    (
        "train",
        &["people"],
        &["leaveAt", "destination", "day", "arriveBy", "departure"],
    ),
];

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn multiwoz_records_have_the_released_structure() {
    let sessions = sessions();
    let file: Value = serde_json::from_slice(&export(Format::MultiWoz21, &sessions)).unwrap();
    let domains = [
        "Attraction",
        "Booking",
        "Hospital",
        "Hotel",
        "Police",
        "Restaurant",
        "Taxi",
        "Train",
    ];
    for (id, record) in file.as_object().unwrap() {
        let log = record["log"].as_array().unwrap();
        assert!(!log.is_empty() && log.len() % 2 == 0, "{id}: even length");
        for (i, turn) in log.iter().enumerate() {
            assert_eq!(
                keys(turn),
                ["text", "metadata", "dialog_act", "span_info"],
                "{id}:{i}"
            );
            if i % 2 == 0 {
                assert_eq!(
                    turn["metadata"],
                    serde_json::json!({}),
                    "{id}:{i}: user metadata"
                );
            } else {
                let meta = &turn["metadata"];
                let names: Vec<&str> = MULTIWOZ.iter().map(|(d, _, _)| *d).collect();
                assert_eq!(keys(meta), names, "{id}:{i}: all seven domains");
                for (d, book, semi) in MULTIWOZ {
                    let mut b = vec!["booked"];
                    b.extend(book);
                    assert_eq!(keys(&meta[d]["book"]), b, "{id}:{i}:{d}");
                    assert_eq!(keys(&meta[d]["semi"]), semi.to_vec(), "{id}:{i}:{d}");
                }
            }
            for (act, pairs) in turn["dialog_act"].as_object().unwrap() {
                let (domain, _) = act.split_once('-').expect("Domain-Intent");
                assert!(
                    domain == "general" || domains.contains(&domain),
                    "{id}:{i}: {act}"
                );
                assert!(!pairs.as_array().unwrap().is_empty());
            }
        }
    }
}

#[test]
fn crosswoz_records_start_with_the_user_and_keep_the_released_slots() {
    let sessions = sessions();
    let file: Value = serde_json::from_slice(&export(Format::CrossWoz, &sessions)).unwrap();
    let domains = ["景点", "餐馆", "酒店", "地铁", "出租"];
    for (id, record) in file.as_object().unwrap() {
        let messages = record["messages"].as_array().unwrap();
        assert!(messages.len() % 2 == 0, "{id}: even length");
        for (i, m) in messages.iter().enumerate() {
            let role = if i % 2 == 0 { "usr" } else { "sys" };
            assert_eq!(m["role"], role, "{id}:{i}: user first, alternating");
            for state in ["sys_state", "sys_state_init"] {
                if role == "usr" {
                    assert!(m.get(state).is_none());
                    continue;
                }
                assert_eq!(keys(&m[state]), domains, "{id}:{i}: five domains");
                for d in domains {
                    let slots = keys(&m[state][d]);
                    assert!(!slots.contains(&"领域"), "{id}:{i}: no 领域 slot");
                    assert_eq!(slots.last(), Some(&"selectedResults"));
                }
            }
            for act in m["dialog_act"].as_array().unwrap() {
                let a: Vec<&str> = act
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(a.len(), 4, "{id}:{i}");
                if a[0] == "General" {
                    assert!(["greet", "thank", "bye", "welcome", "reqmore"].contains(&a[1]));
                } else {
                    assert!(domains.contains(&a[1]), "{id}:{i}: {act}");
                }
            }
        }
    }
}

/// The checks of ConvLab-3's `data/unified_datasets/check.py` on one dataset.
fn check_convlab3(dialogues: &[Value], ontology: &Value) {
    let mut ids = std::collections::HashSet::new();
    let da = |kind: &str| -> Vec<String> {
        ontology["dialogue_acts"][kind]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    for d in dialogues {
        let id = d["dialogue_id"].as_str().unwrap();
        let name = d["dataset"].as_str().unwrap();
        let split = d["data_split"].as_str().unwrap();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.len(), 3, "{id}");
        assert_eq!((parts[0], parts[1]), (name, split), "{id}");
        parts[2].parse::<u64>().expect("number");
        assert!(ids.insert(id.to_string()), "{id} twice");
        let domains: Vec<&str> = d["domains"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for dom in &domains {
            assert!(ontology["domains"].get(dom).is_some(), "{id}: domain {dom}");
        }
        let turns = d["turns"].as_array().unwrap();
        assert!(!turns.is_empty(), "{id}: turns");
        for (i, t) in turns.iter().enumerate() {
            assert_eq!(t["utt_idx"], i, "{id}:{i}");
            if i > 0 {
                assert_ne!(
                    turns[i - 1]["speaker"],
                    t["speaker"],
                    "{id}:{i}: alternation"
                );
            }
            let speaker = t["speaker"].as_str().unwrap();
            let utterance: Vec<char> = t["utterance"].as_str().unwrap().chars().collect();
            for (kind, categorical) in [
                ("categorical", true),
                ("non-categorical", false),
                ("binary", false),
            ] {
                for a in t["dialogue_acts"][kind].as_array().unwrap() {
                    let f = |k: &str| a[k].as_str().unwrap_or_default().to_string();
                    assert!(
                        ontology["intents"].get(f("intent")).is_some(),
                        "{id}:{i}: {a}"
                    );
                    if kind != "binary" {
                        assert!(domains.contains(&f("domain").as_str()), "{id}:{i}: {a}");
                        let slot = &ontology["domains"][f("domain")]["slots"][f("slot")];
                        assert_eq!(slot["is_categorical"], categorical, "{id}:{i}: {a}");
                    } else {
                        assert!(a.get("value").is_none());
                    }
                    if let (Some(s), Some(e)) = (a["start"].as_u64(), a["end"].as_u64()) {
                        let span: String = utterance[s as usize..e as usize].iter().collect();
                        assert_eq!(span, f("value"), "{id}:{i}: span");
                    }
                    let (user, system) = (speaker == "user", speaker == "system");
                    let listed = da(kind).into_iter().any(|entry| {
                        entry.contains(&format!(
                            "'intent': '{}', 'domain': '{}', 'slot': '{}'",
                            f("intent"),
                            f("domain"),
                            f("slot")
                        )) && ((user && entry.contains("'user': True"))
                            || (system && entry.contains("'system': True")))
                    });
                    assert!(listed, "{id}:{i}: {a} not in the ontology's dialogue_acts");
                }
            }
            if speaker == "user" {
                assert!(t.get("db_results").is_none());
                for (dom, slots) in t["state"].as_object().unwrap() {
                    for slot in slots.as_object().unwrap().keys() {
                        assert!(
                            ontology["domains"][dom]["slots"].get(slot).is_some(),
                            "{id}:{i}: state {dom}.{slot}"
                        );
                    }
                }
            } else {
                assert!(
                    t.get("state").is_none(),
                    "{id}:{i}: no state on system turns"
                );
                assert!(t["db_results"].is_object());
            }
        }
    }
}

#[test]
fn convlab3_export_passes_the_unified_format_checks() {
    let sessions = sessions();
    let file: Value = serde_json::from_slice(&export(Format::ConvLab3, &sessions)).unwrap();
    let dialogues = file.as_array().unwrap();
    let mut ontology = Ontology::default();
    for d in dialogues {
        ontology.add_dialogue(d.as_object().unwrap());
        assert_eq!(d["turns"][0]["speaker"], "user", "user first");
    }
    check_convlab3(dialogues, &ontology.to_value());
}

#[test]
fn taskmaster1_speakers_are_as_spoken() {
    let sessions = sessions();
    let file: Value = serde_json::from_slice(&export(Format::Taskmaster1, &sessions)).unwrap();
    for (conv, session) in file.as_array().unwrap().iter().zip(&sessions) {
        assert_eq!(
            conv["utterances"].as_array().unwrap().len(),
            session.messages().count()
        );
    }
}

#[test]
fn every_export_reimports_and_exports_again_unchanged() {
    let sessions = sessions();
    for format in [
        Format::MultiWoz21,
        Format::CrossWoz,
        Format::ConvLab3,
        Format::Taskmaster1,
    ] {
        let first = export(format, &sessions);
        let back = formats::import(format, &Input::new("export.json", first.clone()))
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        let second = export(format, &back);
        assert!(first == second, "{format:?}: the re-export differs");
    }
}
