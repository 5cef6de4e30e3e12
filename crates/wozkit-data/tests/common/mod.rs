//! Helpers shared by the integration tests: corpus paths and an order-sensitive JSON comparison
//! that names the first difference instead of printing two 40 MB values.

#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;
use wozkit_data::Input;

/// A file under `shared/corpora/`, next to the workspace.
pub fn corpus(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpora")
        .join(relative)
}

pub fn read(relative: &str) -> Input {
    Input::read(corpus(relative)).expect("corpus file is readable")
}

/// All files of a corpus folder whose names end with `suffix`, sorted.
pub fn files(folder: &str, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpus(folder))
        .expect("corpus folder exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out
}

/// The first place where `a` and `b` differ, key order included.
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let (kx, ky): (Vec<&String>, Vec<&String>) = (x.keys().collect(), y.keys().collect());
            if kx != ky {
                return Some(format!("{path}: keys {kx:?} != {ky:?}"));
            }
            x.iter()
                .zip(y.values())
                .find_map(|((k, vx), vy)| first_difference(vx, vy, &format!("{path}.{k}")))
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: length {} != {}", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (vx, vy))| first_difference(vx, vy, &format!("{path}[{i}]")))
        }
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

/// Asserts that two JSON values are equal, including the order of every object's keys.
pub fn assert_same_json(original: &Value, exported: &Value, what: &str) {
    if let Some(diff) = first_difference(original, exported, "$") {
        panic!("{what}: exported JSON differs from the original at {diff}");
    }
    assert_eq!(original, exported, "{what}");
}

pub fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("export is valid JSON")
}
