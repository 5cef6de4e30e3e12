//! An evaluation study over an imported dataset, as a user runs it: `wozkit import` writes
//! Taskmaster-1 dialogues into a data directory, `wozkit validate` accepts a study whose
//! `evaluation.from_store` selects them, `wozkit serve` shows one to a worker who rates it, and
//! the judgments export names the stored dialogue and the system read from its record. A filter
//! that selects nothing makes `serve` exit with a message naming it.

use crate::common;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Server, free_port, wozkit};

const STUDY: &str = r#"id: rate-taskmaster
title: Rate Taskmaster dialogues
flow:
  user:
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: rate
  judgments_per_item: 1
  items_per_worker: 1
  questions:
    - {id: helpful, text: How helpful was the assistant?, kind: likert, points: 5}
  from_store:
    study: import:taskmaster1
    system: {annotation: taskmaster1.dialogue, field: instruction_id}
"#;

/// Two Taskmaster-1 dialogues, in the dataset's own shape.
fn dataset() -> Value {
    let dialogue = |id: &str, instruction: &str, answer: &str| {
        json!({
            "conversation_id": id,
            "instruction_id": instruction,
            "utterances": [
                {"index": 0, "speaker": "USER", "text": "I need a table for four tonight."},
                {"index": 1, "speaker": "ASSISTANT", "text": answer}
            ]
        })
    };
    json!([
        dialogue(
            "dlg-a",
            "restaurant-table-1",
            "Booked at Thursday Kitchen for 7 pm."
        ),
        dialogue(
            "dlg-b",
            "restaurant-table-2",
            "Which neighbourhood do you prefer?"
        )
    ])
}

/// One HTTP/1.1 request: (status, cookie set, body).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    cookie: &str,
    body: &str,
) -> (u16, String, String) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the request")
        .block_on(common::http_request(addr, &[], method, path, cookie, body))
        .unwrap_or_else(|| panic!("{method} {path}: no answer from the server at {addr}"))
}

fn form_value(body: &str, name: &str) -> String {
    body.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn an_imported_dataset_is_rated_through_from_store_and_exported() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let data = tmp.path().join("data");
    let data_s = data.display().to_string();
    let file = tmp.path().join("tm1.json");
    std::fs::write(&file, dataset().to_string()).expect("dataset written");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, STUDY).expect("study written");

    let (code, _, err) = wozkit(&[
        "import",
        "--format",
        "taskmaster1",
        "--data",
        &data_s,
        &file.display().to_string(),
    ]);
    assert_eq!(code, 0, "import: {err}");
    let (code, out, err) = wozkit(&["validate", &study.display().to_string()]);
    assert_eq!(code, 0, "validate: {out}{err}");
    assert!(
        out.contains("1 store selection(s), read by `serve`"),
        "{out}"
    );

    let mut server = Server::new(study.clone(), data.clone(), tmp.path().join("server.log"));
    server.start();
    let addr = server.addr;
    let (status, cookie, body) = http(
        addr,
        "GET",
        "/join?study=rate-taskmaster&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1",
        "",
        "",
    );
    assert_eq!(status, 303, "{body}");
    let (status, _, page) = http(addr, "GET", "/p", &cookie, "");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-page=\"rate\""), "{page}");
    assert!(page.contains("I need a table for four tonight."), "{page}");
    let (dialogue, system) = if page.contains("Booked at Thursday Kitchen") {
        ("taskmaster1:dlg-a", "restaurant-table-1")
    } else {
        assert!(page.contains("Which neighbourhood"), "{page}");
        ("taskmaster1:dlg-b", "restaurant-table-2")
    };
    let form = format!(
        "step={}&lease={}&helpful=5",
        form_value(&page, "step"),
        form_value(&page, "lease")
    );
    let (status, _, body) = http(addr, "POST", "/p/judge", &cookie, &form);
    assert_eq!(status, 303, "{body}");

    let out = tmp.path().join("judgments.jsonl");
    let (code, _, err) = wozkit(&[
        "export",
        "--format",
        "judgments-jsonl",
        "--data",
        &data_s,
        "--out",
        &out.display().to_string(),
    ]);
    assert_eq!(code, 0, "export beside the server: {err}");
    let rows: Vec<Value> = std::fs::read_to_string(&out)
        .expect("export written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["study"], "rate-taskmaster");
    assert_eq!(rows[0]["item"], dialogue);
    assert_eq!(rows[0]["dialogue"], dialogue);
    assert_eq!(rows[0]["system"], system);
    assert_eq!(rows[0]["counted"], true);
    assert!(server.stop(), "clean stop; log:\n{}", server.log_text());
}

#[test]
fn serve_stops_with_the_filter_named_when_it_selects_nothing() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(
        &study,
        STUDY.replace("import:taskmaster1", "import:crosswoz"),
    )
    .expect("study written");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .arg("serve")
        .arg(&study)
        .args(["--addr", &free_port().to_string(), "--data"])
        .arg(tmp.path().join("data"))
        .env_remove("WOZKIT_DATA")
        .env_remove("WOZKIT_RESEARCHER_PASSWORD")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wozkit serve starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("status") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("serve kept running with a filter that selects nothing");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        stderr.read_to_string(&mut err).expect("stderr read");
    }
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("rate-taskmaster") && err.contains("`import:crosswoz`"),
        "{err}"
    );
}
