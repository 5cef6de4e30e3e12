//! Helpers shared by the integration tests: where dataset files come from, and an
//! order-sensitive JSON comparison that names the first difference instead of printing two 40 MB
//! values.
//!
//! Dataset files come from a [`Corpus`]: either the small excerpts and synthetic files checked in
//! under `tests/fixtures/` (always there, so a bare clone passes), or the full corpora in
//! `shared/corpora/` beside the checkout (or `$WOZKIT_CORPORA`). Both use the same layout, so one
//! check runs on either.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;
use wozkit_data::Input;

/// A folder of dataset files laid out like `shared/corpora/` (`crosswoz/test.json.zip`, …).
pub struct Corpus {
    root: PathBuf,
}

impl Corpus {
    /// The files checked in under `tests/fixtures/` (see the SOURCE.md of each folder).
    pub fn fixtures() -> Corpus {
        Corpus {
            root: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        }
    }

    /// The full corpora, for the test named `test`. When the folder is missing the test is
    /// skipped: this says so on stderr and gives `None`, so the caller returns — unless
    /// `WOZKIT_REQUIRE_CORPORA=1`, where a missing corpus must fail the run (CI sets it, so a
    /// corpus that went missing cannot pass silently).
    pub fn full(test: &str) -> Option<Corpus> {
        let root = corpora_dir();
        if root.is_dir() {
            return Some(Corpus { root });
        }
        let why = format!(
            "{} not found (set WOZKIT_CORPORA or place shared/ beside the checkout)",
            root.display()
        );
        if std::env::var("WOZKIT_REQUIRE_CORPORA").is_ok_and(|v| v == "1") {
            panic!("full-corpus test {test}: {why}; WOZKIT_REQUIRE_CORPORA=1 requires it");
        }
        // Straight to the process's stderr: libtest captures `eprintln!` of passing tests, and
        // a skip must show in every run's output.
        let line = format!("SKIPPED full-corpus test {test}: {why}\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        None
    }

    /// A file or folder of this corpus.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub fn read(&self, relative: &str) -> Input {
        let path = self.path(relative);
        Input::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    pub fn json(&self, relative: &str) -> Value {
        self.read(relative).json().expect("corpus file is JSON")
    }

    /// All files of a folder whose names end with `suffix`, sorted.
    pub fn files(&self, folder: &str, suffix: &str) -> Vec<PathBuf> {
        let dir = self.path(folder);
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        out.sort();
        assert!(!out.is_empty(), "no *{suffix} in {}", dir.display());
        out
    }
}

/// `$WOZKIT_CORPORA`, else `shared/corpora` beside the checkout (`<workspace>/../shared/corpora`).
pub fn corpora_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WOZKIT_CORPORA") {
        return PathBuf::from(dir);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/wozkit-data → crates → workspace → the folder holding the checkout.
    let beside = manifest.ancestors().nth(3).unwrap_or(manifest);
    beside.join("shared/corpora")
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

/// Asserts that a file written again (`second`) is `first`: the same JSON, naming the first
/// difference, then the same bytes.
pub fn assert_same_file(first: &[u8], second: &[u8], what: &str) {
    assert_same_json(&parse(first), &parse(second), what);
    assert_eq!(first, second, "{what}");
}

pub fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("export is valid JSON")
}
