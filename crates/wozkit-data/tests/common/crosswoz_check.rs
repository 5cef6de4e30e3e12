//! The CrossWOZ export of a goal session checked field by field against a dialogue of the real
//! dataset (key sets and order, JSON types, goal tuples, the five domains of the system states)
//! and against the study's database (every selected result and every recommended place is a row
//! of the domain's table). Shared by the data crate's goal export tests and the CLI's test of a
//! session played live over the server (included there by `#[path]`), so one set of checks
//! covers both.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wozkit_core::database::Database;
use wozkit_data::Input;

/// The licensed excerpt of CrossWOZ's test split checked in under the data crate's fixtures.
pub fn fixture_test_split() -> PathBuf {
    // Both crates that include this module sit in `crates/`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wozkit-data/tests/fixtures/crosswoz/test.json.zip")
}

/// A dialogue of the real CrossWOZ test split whose goal type is `不独立多领域` (sub-goals across
/// domains with references, like the built-in study's): from `corpora/crosswoz/test.json.zip`
/// when that file exists, else from the checked-in excerpt.
pub fn real_dialogue(corpora: Option<&Path>) -> Value {
    let path = corpora
        .map(|c| c.join("crosswoz/test.json.zip"))
        .filter(|p| p.exists())
        .unwrap_or_else(fixture_test_split);
    let input = Input::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let all = input
        .json()
        .unwrap_or_else(|e| panic!("{}: not CrossWOZ JSON: {e}", path.display()));
    all.as_object()
        .expect("CrossWOZ's file is an object of dialogues")
        .values()
        .find(|d| d["type"] == "不独立多领域")
        .cloned()
        .unwrap_or_else(|| panic!("{}: no dialogue of type 不独立多领域", path.display()))
}

/// An object's keys in order.
pub fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object expected: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// The JSON type of a value, for schema comparison.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A goal tuple `[subgoal id, domain, slot, value, satisfied]`.
pub fn check_tuple(t: &Value, at: &str) {
    let t = t
        .as_array()
        .unwrap_or_else(|| panic!("{at}: not a tuple: {t}"));
    assert_eq!(t.len(), 5, "{at}: {t:?}");
    assert_eq!(kind(&t[0]), "int", "{at}");
    assert!(t[0].as_u64().unwrap() >= 1, "{at}: sub-goal ids start at 1");
    assert_eq!((kind(&t[1]), kind(&t[2])), ("string", "string"), "{at}");
    assert!(matches!(kind(&t[3]), "string" | "array"), "{at}");
    assert_eq!(kind(&t[4]), "bool", "{at}");
}

/// What [`check_record`] saw, for the caller's assertions that the checks had something to check.
#[derive(Debug, Default)]
pub struct Seen {
    pub user_turns: usize,
    pub sys_turns: usize,
    /// Selected results found in the database (each state of each wizard turn).
    pub selected: usize,
    pub recommends: usize,
    pub informs: usize,
}

/// Checks one exported record (`rec`, named `at` in messages) of a study whose tables are named
/// by CrossWOZ's domains against `real` (from [`real_dialogue`]) and `db`:
/// - the record has the dataset's keys in its order and the same types, and a goal;
/// - goal and final goal are tuples; every user state has one tuple per goal entry, with the
///   goal's heads;
/// - every message has the keys of the dataset's message of its role, in order, with the same
///   types; every act is four strings;
/// - a `Recommend` act names a row of its domain's table by that column; a `NoOffer` act is on
///   one of the dataset's domains with `none` slot and value; no recommendation stays `General`;
/// - each wizard turn's `sys_state` and `sys_state_init` have the dataset's five domains with at
///   least its slots, strings, `selectedResults` last, and each selected result is a row of the
///   table of that domain.
pub fn check_record(rec: &Value, real: &Value, db: &Database, at: &str) -> Seen {
    let mut seen = Seen::default();
    assert_eq!(keys(rec), keys(real), "{at}: record keys");
    for k in keys(real) {
        assert_eq!(kind(&rec[k]), kind(&real[k]), "{at}: record key {k}");
    }
    let goal = rec["goal"].as_array().unwrap();
    assert!(!goal.is_empty(), "{at}: the session has a goal");
    for t in goal.iter().chain(rec["final_goal"].as_array().unwrap()) {
        check_tuple(t, &format!("{at}: goal"));
    }
    let heads: Vec<_> = goal.iter().map(head).collect();
    let (_, real_sys) = real_messages(real);
    let final_heads: Vec<_> = rec["final_goal"]
        .as_array()
        .unwrap()
        .iter()
        .map(head)
        .collect();
    assert_eq!(final_heads, heads, "{at}: final goal");

    for (i, m) in rec["messages"].as_array().unwrap().iter().enumerate() {
        let at = format!("{at}: messages[{i}]");
        if check_message(m, real, &heads, &at) {
            seen.user_turns += 1;
            continue;
        }
        seen.sys_turns += 1;
        for act in m["dialog_act"].as_array().unwrap() {
            match act[0].as_str().unwrap() {
                "Inform" => seen.informs += 1,
                "Recommend" => {
                    seen.recommends += 1;
                    let (domain, name) = (act[1].as_str().unwrap(), act[3].as_str().unwrap());
                    let row = db.select(domain, name).unwrap_or_else(|e| {
                        panic!("{at}: recommended {name} is not in {domain}: {e}")
                    });
                    assert_eq!(row[act[2].as_str().unwrap()], json!(name), "{at}");
                }
                "NoOffer" => {
                    assert!(
                        real_sys["sys_state"]
                            .get(act[1].as_str().unwrap())
                            .is_some(),
                        "{at}: {act}"
                    );
                    assert_eq!((&act[2], &act[3]), (&json!("none"), &json!("none")), "{at}");
                }
                "General" => assert!(
                    !act[1].as_str().unwrap().starts_with("recommend"),
                    "{at}: a recommendation left General: {act}"
                ),
                _ => {}
            }
        }
        check_sys_states(m, real, &at);
        for key in ["sys_state", "sys_state_init"] {
            let s = &m[key];
            let real_s = &real_sys[key];
            for (domain, slots) in s.as_object().unwrap() {
                assert!(real_s.get(domain).is_some(), "{at}.{key}: {domain}");
                for name in slots["selectedResults"].as_array().unwrap() {
                    let name = name.as_str().unwrap();
                    db.select(domain, name)
                        .unwrap_or_else(|e| panic!("{at}.{key}: {name} is not in {domain}: {e}"));
                    seen.selected += 1;
                }
            }
        }
    }
    seen
}

/// The dataset's message of each role: (user's, system's).
fn real_messages(real: &Value) -> (&Value, &Value) {
    let msgs = real["messages"].as_array().unwrap();
    let of = |role: &str| {
        msgs.iter()
            .find(|m| m["role"] == role)
            .unwrap_or_else(|| panic!("the real dialogue has no {role} message"))
    };
    (of("usr"), of("sys"))
}

/// One message against the dataset's message of its role: the same keys in the same order, the
/// same types, acts of four strings; a user message's state has one tuple per goal entry with
/// the goal's `heads` (sub-goal, domain, slot). True for a user message.
pub fn check_message(m: &Value, real: &Value, heads: &[(Value, Value, Value)], at: &str) -> bool {
    let (real_usr, real_sys) = real_messages(real);
    let user = m["role"] == "usr";
    let real_m = if user { real_usr } else { real_sys };
    assert_eq!(keys(m), keys(real_m), "{at}");
    for k in keys(real_m) {
        assert_eq!(kind(&m[k]), kind(&real_m[k]), "{at}.{k}");
    }
    for act in m["dialog_act"].as_array().unwrap() {
        let a = act.as_array().unwrap();
        assert_eq!(a.len(), 4, "{at}: {act}");
        assert!(a.iter().all(Value::is_string), "{at}: {act}");
    }
    if user {
        let state = m["user_state"].as_array().unwrap();
        let got: Vec<_> = state.iter().map(head).collect();
        assert_eq!(got, heads, "{at}");
        for t in state {
            check_tuple(t, &format!("{at}.user_state"));
        }
    }
    user
}

/// A goal tuple's head: sub-goal, domain, slot.
pub fn head(t: &Value) -> (Value, Value, Value) {
    (t[0].clone(), t[1].clone(), t[2].clone())
}

/// A system message's `sys_state` and `sys_state_init`: the dataset's five domains, each with at
/// least the dataset's slots, every slot a string, `selectedResults` an array and last.
pub fn check_sys_states(m: &Value, real: &Value, at: &str) {
    let (_, real_sys) = real_messages(real);
    for key in ["sys_state", "sys_state_init"] {
        let s = &m[key];
        let real_s = &real_sys[key];
        for d in keys(real_s) {
            let dom = &s[d];
            for slot in keys(&real_s[d]) {
                assert!(dom.get(slot).is_some(), "{at}.{key}.{d} lacks {slot}");
            }
            assert_eq!(keys(dom).last(), Some(&"selectedResults"), "{at}.{key}.{d}");
            for (slot, v) in dom.as_object().unwrap() {
                let want = if slot == "selectedResults" {
                    "array"
                } else {
                    "string"
                };
                assert_eq!(kind(v), want, "{at}.{key}.{d}.{slot}");
            }
        }
    }
}
