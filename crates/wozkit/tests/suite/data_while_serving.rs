//! Taking data out of a study while it runs: with `wozkit serve` live on a SQLite data directory
//! and simulated pairs playing in its rooms (the load generator, `wozkit bench`), every
//! read-only command runs against the same folder and answers from a consistent snapshot, and
//! `import`, which would write, refuses with a message that says why and what to do.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Server, wozkit};

/// Sessions in the log export (JSON Lines), or none while the first pairs are still joining.
fn logged_sessions(data: &str, out: &std::path::Path) -> Vec<Value> {
    let out_s = out.display().to_string();
    let (code, _, err) = wozkit(&["export", "--format", "log", "--data", data, "--out", &out_s]);
    assert_eq!(code, 0, "export --format log beside the server: {err}");
    std::fs::read_to_string(out)
        .expect("log export written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

#[test]
fn read_only_commands_work_beside_a_live_server_and_import_says_why_not() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let mut server = Server::in_dir("offshore-emergency", tmp.path());
    server.start();
    let data = server.data.display().to_string();
    let url = format!("http://{}", server.addr);

    // Ten participants in five rooms, sending a command every 0.2 s for 20 s.
    let mut bench = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args([
            "bench",
            "--url",
            &url,
            "--participants",
            "10",
            "--duration",
            "20",
            "--rate",
            "5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the load generator starts");

    // Wait until rooms have events.
    let log_out = tmp.path().join("log.jsonl");
    let started = Instant::now();
    let sessions = loop {
        let sessions = logged_sessions(&data, &log_out);
        let events: usize = sessions
            .iter()
            .map(|s| s["events"].as_array().map_or(0, Vec::len))
            .sum();
        if sessions.len() >= 5 && events >= 50 {
            break sessions;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no rooms with events after a minute; server log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        bench.try_wait().expect("bench status").is_none(),
        "the rooms must still be live while the data is read"
    );

    // Each session's log is one snapshot: the session's `last_seq` (one query) matches its
    // events (another query), and those run 1..=n with no gap, although the rooms go on
    // appending between the two queries.
    for s in &sessions {
        let seqs: Vec<u64> = s["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["seq"].as_u64().expect("seq"))
            .collect();
        assert_eq!(
            s["session"]["last_seq"].as_u64(),
            Some(seqs.len() as u64),
            "{}",
            s["session"]["id"]
        );
        assert!(seqs.iter().enumerate().all(|(i, &q)| q == i as u64 + 1));
    }

    // A dataset export, the report and the payment table, all while the rooms are live.
    let jsonl = tmp.path().join("sessions.jsonl");
    let (code, out, err) = wozkit(&[
        "export",
        "--format",
        "jsonl",
        "--data",
        &data,
        "--out",
        &jsonl.display().to_string(),
    ]);
    assert_eq!(code, 0, "export --format jsonl: {out}{err}");
    let exported = std::fs::read_to_string(&jsonl).expect("jsonl written");
    assert!(exported.lines().count() >= 5, "{exported}");

    let report = tmp.path().join("report.json");
    let (code, out, err) = wozkit(&[
        "report",
        "--data",
        &data,
        "--json",
        &report.display().to_string(),
    ]);
    assert_eq!(code, 0, "report: {out}{err}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("report is JSON");
    assert!(report["sessions"].as_u64().unwrap_or(0) >= 5, "{report}");

    let (code, table, err) = wozkit(&["payments", "--data", &data]);
    assert_eq!(code, 0, "payments: {err}");
    assert!(
        table.lines().count() >= 11,
        "a header and a row per seated participant:\n{table}"
    );

    // --verify reads the code key the server stored: a made-up code is answered, not refused.
    let (code, out, err) = wozkit(&["payments", "--data", &data, "--verify", "WZ-NOT-A-CODE"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("not valid: no participant"), "{out}{err}");

    // Import writes, which the running server's lock forbids: a clear refusal, nothing changed.
    let tm = tmp.path().join("tm.json");
    std::fs::write(&tm, "[]").expect("write");
    let (code, out, err) = wozkit(&[
        "import",
        "--format",
        "taskmaster1",
        "--data",
        &data,
        &tm.display().to_string(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("in use by a running `wozkit serve`") && err.contains("Stop the server"),
        "{err}"
    );

    assert!(
        bench.try_wait().expect("bench status").is_none(),
        "the rooms were live during every command"
    );
    let _ = bench.kill();
    let _ = bench.wait();
    assert!(server.stop(), "the server stops cleanly after being read");
}
