//! A CrossWOZ-style session played live: `wozkit serve crosswoz-demo` on a fresh SQLite data
//! directory, `wozkit bench` pairs (the wizard searches the database panel's tables and selects
//! rows of its searches, the user writes its goal's constraints) until sessions end, then
//! `wozkit export --format crosswoz` checked field by field against the dataset's schema and
//! against the study's database (every selected result exists in it), with the checks of the
//! data crate's goal export tests. The logs (`--format log`) show that every selection was a
//! row of an earlier search of that table.

use crate::common;
#[path = "../../../wozkit-data/tests/common/crosswoz_check.rs"]
mod crosswoz_check;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use common::{Server, wozkit};
use serde_json::Value;

const STUDY: &str = "crosswoz-demo";

/// Runs the load generator: `participants` in pairs, `rate` commands per second each, for
/// `secs` seconds once all are in a room; sessions that end are joined again.
fn bench(url: &str, participants: usize, secs: u64, rate: f64) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args([
            "bench",
            "--url",
            url,
            "--participants",
            &participants.to_string(),
            "--duration",
            &secs.to_string(),
            "--rate",
            &rate.to_string(),
            "--json",
        ])
        .env_remove("WOZKIT_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("the load generator runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "wozkit bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn export(data: &str, format: &str, out: &std::path::Path) -> Vec<u8> {
    let path = out.display().to_string();
    let (code, stdout, stderr) = wozkit(&[
        "export", "--format", format, "--data", data, "--study", STUDY, "--out", &path,
    ]);
    assert_eq!(
        code, 0,
        "wozkit export --format {format} failed:\n{stdout}\n{stderr}"
    );
    std::fs::read(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()))
}

#[test]
fn live_crosswoz_sessions_export_to_the_schema_and_the_database() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let mut server = Server::in_dir(STUDY, tmp.path());
    server.start();
    let data = server.data.display().to_string();
    let url = format!("http://{}", server.addr);

    // Two pairs, four commands a second each, in rounds of 20 s until a wizard has reached the
    // goodbye after selecting a row (the load generator's wizards choose at random, so one round
    // may end no session); both sides join again after an end. At most six rounds.
    let mut report = Value::Null;
    for round in 1..=6 {
        report = bench(&url, 4, 20, 4.0);
        eprintln!("bench, round {round}: {report}");
        let logs = export(&data, "log", &tmp.path().join("log-so-far.jsonl"));
        let ended_with_a_selection = String::from_utf8_lossy(&logs).lines().any(|line| {
            let s: Value = serde_json::from_str(line).expect("each line is JSON");
            s["session"]["ended"]["reason"] == "terminal"
                && s["events"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|e| e["kind"] == "db_selected"))
        });
        if ended_with_a_selection {
            break;
        }
    }
    assert!(
        server.stop(),
        "the server did not stop cleanly:\n{}",
        server.log_text()
    );

    let study = wozkit_core::load::load_builtin(STUDY).unwrap_or_else(|e| panic!("{e}"));
    let db = study.database.as_deref().expect("the study's database");
    let real = crosswoz_check::real_dialogue(None);

    // The logs: every selection is a key an earlier search of that table returned.
    let logs = export(&data, "log", &tmp.path().join("log.jsonl"));
    let mut selections = 0;
    let mut filtered_searches = 0;
    let mut finished = 0;
    for line in String::from_utf8(logs).expect("UTF-8").lines() {
        let s: Value = serde_json::from_str(line).expect("each line is JSON");
        if s["session"]["ended"]["reason"] == "terminal" {
            finished += 1;
        }
        let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for e in s["events"].as_array().expect("events") {
            match e["kind"].as_str() {
                Some("db_queried") => {
                    let keys = e["result_keys"].as_array().expect("result_keys");
                    if !e["filters"].as_array().expect("filters").is_empty() {
                        filtered_searches += 1;
                    }
                    found
                        .entry(e["table"].as_str().unwrap().to_string())
                        .or_default()
                        .extend(keys.iter().map(|k| k.as_str().unwrap().to_string()));
                }
                Some("db_selected") => {
                    let (table, key) = (e["table"].as_str().unwrap(), e["key"].as_str().unwrap());
                    assert!(
                        found.get(table).is_some_and(|k| k.contains(key)),
                        "{}: {key} selected from {table} without a search returning it",
                        s["session"]["id"]
                    );
                    // The row as logged is the database's.
                    let row = db
                        .select(table, key)
                        .unwrap_or_else(|e| panic!("{key} is not in {table}: {e}"));
                    assert_eq!(
                        e["row"],
                        serde_json::to_value(row).unwrap(),
                        "{table} {key}"
                    );
                    selections += 1;
                }
                _ => {}
            }
        }
    }
    assert!(selections > 0, "the wizards selected rows: {report}");
    assert!(finished > 0, "some session reached its goodbye: {report}");
    assert!(
        filtered_searches > 0,
        "some search had a filter from a row seen before"
    );

    // The CrossWOZ export, record by record.
    let file: Value = serde_json::from_slice(&export(
        &data,
        "crosswoz",
        &tmp.path().join("crosswoz.json"),
    ))
    .expect("CrossWOZ JSON");
    let records = file.as_object().expect("an object of dialogues");
    assert!(
        records.len() >= 2,
        "two pairs played: {} sessions",
        records.len()
    );
    let (mut selected, mut users, mut expressed, mut echoed) = (0, 0, 0, 0);
    for (id, rec) in records {
        let seen = crosswoz_check::check_record(rec, &real, db, id);
        selected += seen.selected;
        users += seen.user_turns;
        // The user's state ticks off the constraints its messages expressed.
        expressed += rec["final_goal"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t[4] == true)
            .count();
        // The simulated user writes its goal's constraint values.
        let values: Vec<&str> = rec["goal"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t[3].as_str())
            .filter(|v| !v.is_empty())
            .collect();
        echoed += rec["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "usr")
            .filter(|m| {
                let text = m["content"].as_str().unwrap_or_default();
                values.iter().any(|v| text.contains(v))
            })
            .count();
    }
    eprintln!(
        "{} sessions, {selections} selections, {filtered_searches} filtered searches, \
         {selected} selected results in states, {users} user turns ({echoed} naming goal values), \
         {expressed} entries satisfied",
        records.len()
    );
    assert!(selected > 0, "selected results in the system states");
    assert!(users > 0, "user turns");
    assert!(expressed > 0, "some goal entry was satisfied");
    assert!(echoed > 0, "some user message names a value of its goal");
}
