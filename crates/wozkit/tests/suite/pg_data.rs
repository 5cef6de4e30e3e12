//! `wozkit import`, `wozkit export` and `wozkit report` on a PostgreSQL store, against the same
//! commands on a SQLite data directory: the dataset excerpts in
//! `crates/wozkit-data/tests/fixtures/` are imported into both (a fresh database per test, see
//! `wozkit_store::testing`), exported in every format that applies, and reported on.
//!
//! Dataset exports must be the same bytes: an export is a pure function of the stored sessions
//! and events, ordered by session id, so any byte that differs is something one backend stores
//! or returns differently (an order, a number, a timestamp, a text). The JSON Lines export also
//! carries the instant of the import itself (the time of each session's origin annotation),
//! which two imports cannot share: it is compared line by line as parsed JSON with exactly that
//! instant set aside. The reports are compared as parsed JSON (the file's key order is the
//! serializer's, not the store's), and must be equal in every number.
//!
//! Skipped with a note unless `WOZKIT_TEST_PG_URL` is set; failing instead when
//! `WOZKIT_TEST_PG_REQUIRED` is set and there is no server.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use wozkit_store::testing::TestDatabase;

// The data crate's JSON comparison that names the first difference (one copy for both crates).
#[path = "../../../wozkit-data/tests/common/mod.rs"]
mod data_common;

use data_common::assert_same_json;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wozkit-data/tests/fixtures")
        .join(rel)
}

/// Runs the CLI; panics with its output when it fails.
fn wozkit(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args(args)
        .env_remove("WOZKIT_DATA")
        .output()
        .expect("run wozkit");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "wozkit {args:?} failed:\n{text}");
    text
}

/// The two stores of one test: a SQLite data directory and a fresh PostgreSQL database.
struct Pair {
    tmp: tempfile::TempDir,
    pg: TestDatabase,
}

impl Pair {
    async fn new(case: &str) -> Option<Pair> {
        let pg = TestDatabase::create(case).await?;
        let tmp = tempfile::tempdir().expect("tempdir");
        Some(Pair { tmp, pg })
    }

    /// `(name, --data location)` of both stores.
    fn stores(&self) -> [(&'static str, String); 2] {
        [
            ("sqlite", self.tmp.path().join("data").display().to_string()),
            ("postgres", self.pg.url.clone()),
        ]
    }

    fn out(&self, backend: &str, name: &str) -> PathBuf {
        let dir = self.tmp.path().join(backend);
        std::fs::create_dir_all(&dir).expect("output folder");
        dir.join(name)
    }

    /// Imports `files` as `format` into both stores.
    fn import(&self, format: &str, files: &[PathBuf]) {
        for (_, data) in self.stores() {
            let mut args = vec!["import", "--format", format, "--data", &data];
            let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            args.extend(files.iter().map(String::as_str));
            wozkit(&args);
        }
    }

    /// Exports `format` from both stores into `name` (plus `extra` arguments); returns the two
    /// paths, SQLite's first.
    fn export(&self, format: &str, name: &str, extra: &[&str]) -> [PathBuf; 2] {
        self.stores().map(|(backend, data)| {
            let out = self.out(backend, name);
            let out_arg = out.display().to_string();
            let mut args = vec![
                "export", "--format", format, "--data", &data, "--out", &out_arg,
            ];
            args.extend_from_slice(extra);
            wozkit(&args);
            out
        })
    }

    /// The JSON report of both stores, SQLite's first.
    fn report(&self) -> [Value; 2] {
        self.stores().map(|(backend, data)| {
            let out = self.out(backend, "report.json");
            wozkit(&[
                "report",
                "--data",
                &data,
                "--json",
                &out.display().to_string(),
            ]);
            serde_json::from_slice(&std::fs::read(&out).expect("read report")).expect("report JSON")
        })
    }

    async fn cleanup(self) {
        self.pg.drop_database().await;
    }
}

/// Every file under `path` (or `path` itself), relative path and bytes, in name order.
fn files(path: &Path) -> Vec<(String, Vec<u8>)> {
    if path.is_file() {
        return vec![(String::new(), std::fs::read(path).expect("read export"))];
    }
    let mut all = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read export folder") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(path).expect("inside").display().to_string();
                all.push((rel, std::fs::read(&p).expect("read export file")));
            }
        }
    }
    all.sort();
    all
}

/// The same files, byte for byte (a file, or every file of a folder).
fn assert_same_bytes([sqlite, postgres]: &[PathBuf; 2], what: &str) {
    let (a, b) = (files(sqlite), files(postgres));
    assert!(!a.is_empty(), "{what}: the SQLite export wrote nothing");
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b), "{what}: the same files");
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if x != y {
            let at = x
                .iter()
                .zip(y)
                .position(|(p, q)| p != q)
                .unwrap_or(x.len().min(y.len()));
            let show = |v: &[u8]| {
                String::from_utf8_lossy(&v[at.saturating_sub(80)..(at + 80).min(v.len())])
                    .into_owned()
            };
            panic!(
                "{what} {name}: SQLite and PostgreSQL exports differ at byte {at} ({} and {} bytes)\n\
                 sqlite:   …{}…\npostgres: …{}…",
                x.len(),
                y.len(),
                show(x),
                show(y)
            );
        }
    }
}

/// `v` with the import's own instant set to null: the `at_ms` of each session's origin
/// annotation (the one whose value has `format` and `position`), and in the per-session logs
/// the session's `created_at_ms` and its `ended.at_ms` (an imported session is created and ended
/// at the import).
fn without_import_clock(v: &Value) -> Value {
    clear_clock(v, "")
}

fn clear_clock(v: &Value, key: &str) -> Value {
    match v {
        Value::Object(map) => {
            let is_origin = map
                .get("value")
                .and_then(Value::as_object)
                .is_some_and(|o| o.contains_key("format") && o.contains_key("position"));
            map.iter()
                .map(|(k, x)| {
                    let clock = match k.as_str() {
                        "at_ms" => is_origin || key == "ended",
                        "created_at_ms" => key == "session",
                        _ => false,
                    };
                    (
                        k.clone(),
                        if clock {
                            Value::Null
                        } else {
                            clear_clock(x, k)
                        },
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        }
        Value::Array(items) => Value::Array(items.iter().map(|x| clear_clock(x, key)).collect()),
        other => other.clone(),
    }
}

/// The same JSON Lines, line by line, the import's instants aside.
fn assert_same_jsonl([sqlite, postgres]: &[PathBuf; 2], what: &str) {
    let lines = |p: &Path| -> Vec<Value> {
        std::fs::read_to_string(p)
            .expect("read JSON Lines")
            .lines()
            .map(|l| without_import_clock(&serde_json::from_str(l).expect("JSON line")))
            .collect()
    };
    let (a, b) = (lines(sqlite), lines(postgres));
    assert!(!a.is_empty(), "{what}: no lines");
    assert_eq!(a.len(), b.len(), "{what}: as many lines");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_same_json(
            x,
            y,
            &format!(
                "{what}, line {} (SQLite's as the original, PostgreSQL's as the export)",
                i + 1
            ),
        );
    }
}

/// The same report, every number; and a report that counted something.
fn assert_same_report([sqlite, postgres]: &[Value; 2], what: &str) {
    let sessions = &sqlite["sessions"];
    assert!(
        sessions.as_u64().is_some_and(|n| n > 0),
        "{what}: the SQLite report counted no sessions: {sessions}"
    );
    assert_same_json(
        sqlite,
        postgres,
        &format!("{what} (SQLite's as the original, PostgreSQL's as the export)"),
    );
}

#[tokio::test]
async fn taskmaster1_on_postgres_as_on_sqlite() {
    let Some(pair) = Pair::new("taskmaster1_on_postgres_as_on_sqlite").await else {
        return;
    };
    pair.import("taskmaster1", &[fixture("taskmaster1/sample.json")]);
    assert_same_bytes(&pair.export("taskmaster1", "tm.json", &[]), "taskmaster1");
    assert_same_jsonl(&pair.export("jsonl", "all.jsonl", &[]), "jsonl");
    // The per-session logs with metrics (written by the server crate, as the console's download).
    assert_same_jsonl(&pair.export("log", "log.jsonl", &[]), "log");
    assert_same_report(&pair.report(), "taskmaster1 report");
    pair.cleanup().await;
}

#[tokio::test]
async fn crosswoz_and_multiwoz_on_postgres_as_on_sqlite() {
    let Some(pair) = Pair::new("crosswoz_and_multiwoz_on_postgres_as_on_sqlite").await else {
        return;
    };
    pair.import("crosswoz", &[fixture("crosswoz/test.json.zip")]);
    pair.import("multiwoz", &[fixture("multiwoz/test.json.zip")]);
    assert_same_bytes(
        &pair.export("crosswoz", "cw.json", &["--study", "import:crosswoz"]),
        "crosswoz",
    );
    assert_same_bytes(
        &pair.export("multiwoz", "mw.json.zip", &["--study", "import:multiwoz21"]),
        "multiwoz",
    );
    // Split parts are drawn from session ids and the seed: the same parts on both stores.
    let split = ["--split", "train=0.6,dev=0.2,test=0.2", "--seed", "5"];
    let [a, b] = pair.export("jsonl", "split.jsonl", &split);
    for part in ["train", "dev", "test"] {
        let with_part = |p: &Path| p.with_file_name(format!("split.{part}.jsonl"));
        assert_same_jsonl(&[with_part(&a), with_part(&b)], &format!("jsonl {part}"));
    }
    assert_same_report(&pair.report(), "crosswoz and multiwoz report");
    pair.cleanup().await;
}

#[tokio::test]
async fn convlab3_on_postgres_as_on_sqlite() {
    let Some(pair) = Pair::new("convlab3_on_postgres_as_on_sqlite").await else {
        return;
    };
    pair.import(
        "convlab3",
        &[
            fixture("convlab3_unified/tm1/dummy_data.json"),
            fixture("convlab3_unified/multiwoz21/dummy_data.json"),
        ],
    );
    assert_same_bytes(&pair.export("convlab3", "cl3.json", &[]), "convlab3");
    assert_same_report(&pair.report(), "convlab3 report");
    pair.cleanup().await;
}

#[tokio::test]
async fn crsarena_dialogues_votes_and_ratings_on_postgres_as_on_sqlite() {
    let Some(pair) =
        Pair::new("crsarena_dialogues_votes_and_ratings_on_postgres_as_on_sqlite").await
    else {
        return;
    };
    pair.import(
        "crsarena",
        &[
            fixture("crsarena_dial/crs_arena_dial_open.json"),
            fixture("crsarena_dial/votes_open.csv"),
        ],
    );
    pair.import(
        "crsarena_eval",
        &[fixture("crsarena_eval/crs_arena_eval.json")],
    );
    assert_same_bytes(
        &pair.export("crsarena", "arena.json", &["--study", "import:crsarena"]),
        "crsarena",
    );
    assert_same_bytes(&pair.export("votes-csv", "votes.csv", &[]), "votes-csv");
    assert_same_jsonl(&pair.export("log", "log.jsonl", &[]), "crsarena log");
    assert_same_bytes(
        &pair.export(
            "crsarena_eval",
            "eval.json",
            &["--study", "import:crsarena_eval"],
        ),
        "crsarena_eval",
    );
    assert_same_report(&pair.report(), "crsarena report");
    pair.cleanup().await;
}

#[tokio::test]
async fn crwiz_on_postgres_as_on_sqlite() {
    let Some(pair) = Pair::new("crwiz_on_postgres_as_on_sqlite").await else {
        return;
    };
    let mut logs: Vec<PathBuf> = std::fs::read_dir(fixture("crwiz_mturk"))
        .expect("crwiz fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.display().to_string().ends_with(".shcn.data.json"))
        .collect();
    logs.sort();
    assert!(!logs.is_empty(), "crwiz fixtures");
    pair.import("crwiz", &logs);
    assert_same_bytes(&pair.export("crwiz", "crwiz", &[]), "crwiz");
    assert_same_jsonl(&pair.export("log", "log.jsonl", &[]), "crwiz log");
    assert_same_report(&pair.report(), "crwiz report");
    pair.cleanup().await;
}
