//! Backing up the SQLite store while `wozkit serve` writes to it, with the commands
//! docs/operations.md gives: `sqlite3 FILE ".backup OUT"` and `VACUUM INTO`. Simulated pairs
//! (`wozkit bench`) keep appending during the copy; each copy must be a consistent database that
//! wozkit reads (every session's log gap-free up to its `last_seq`) and that a new server starts
//! on. Needs the `sqlite3` command-line shell.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Server, wozkit};

/// Runs the `sqlite3` shell on `db` with these arguments; returns its standard output.
fn sqlite3(db: &Path, args: &[&str]) -> String {
    let out = Command::new("sqlite3")
        .arg(db)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("this test needs the sqlite3 shell (apt-get install sqlite3): {e}")
        });
    assert!(
        out.status.success(),
        "sqlite3 {} {args:?}: {}",
        db.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The sessions of the log export of `data`, each checked: events 1..=last_seq, no gap.
fn checked_sessions(data: &str, out: &Path) -> Vec<Value> {
    let out_s = out.display().to_string();
    let (code, _, err) = wozkit(&["export", "--format", "log", "--data", data, "--out", &out_s]);
    assert_eq!(code, 0, "export --format log of {data}: {err}");
    let sessions: Vec<Value> = std::fs::read_to_string(out)
        .expect("log export written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
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
    sessions
}

fn events_in(sessions: &[Value]) -> usize {
    sessions
        .iter()
        .map(|s| s["events"].as_array().map_or(0, Vec::len))
        .sum()
}

#[test]
fn a_backup_taken_while_serving_is_consistent_and_serves_again() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let mut server = Server::in_dir("offshore-emergency", tmp.path());
    server.start();
    let data = server.data.display().to_string();
    let db = server.data.join("wozkit.sqlite3");

    // Ten participants in five rooms, a command every 0.2 s each, for 30 s.
    let mut bench = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args([
            "bench",
            "--url",
            &format!("http://{}", server.addr),
            "--participants",
            "10",
            "--duration",
            "30",
            "--rate",
            "5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the load generator starts");
    let started = Instant::now();
    loop {
        let sessions = checked_sessions(&data, &tmp.path().join("live.jsonl"));
        if sessions.len() >= 5 && events_in(&sessions) >= 50 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no rooms with events after a minute; server log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // Both commands of docs/operations.md, while the rooms append.
    let backup = tmp.path().join("backup.sqlite3");
    let vacuumed = tmp.path().join("vacuumed.sqlite3");
    sqlite3(
        &db,
        &[".timeout 10000", &format!(".backup '{}'", backup.display())],
    );
    sqlite3(
        &db,
        &[
            ".timeout 10000",
            &format!("VACUUM INTO '{}'", vacuumed.display()),
        ],
    );
    assert!(
        bench.try_wait().expect("bench status").is_none(),
        "the rooms must still be writing while the copies are taken"
    );

    for (copy, name) in [(&backup, "backup"), (&vacuumed, "vacuumed")] {
        assert_eq!(sqlite3(copy, &["PRAGMA integrity_check"]).trim(), "ok");
        let at = format!("sqlite:{}", copy.display());
        let sessions = checked_sessions(&at, &tmp.path().join(format!("{name}.jsonl")));
        assert!(
            sessions.len() >= 5 && events_in(&sessions) >= 50,
            "{name}: {} sessions, {} events",
            sessions.len(),
            events_in(&sessions)
        );
        let report = tmp.path().join(format!("{name}-report.json"));
        let (code, out, err) = wozkit(&[
            "report",
            "--data",
            &at,
            "--json",
            &report.display().to_string(),
        ]);
        assert_eq!(code, 0, "report of the {name} copy: {out}{err}");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
                .expect("report is JSON");
        assert!(
            report["sessions"].as_u64().unwrap_or(0) >= 5,
            "{name}: {report}"
        );
    }
    let _ = bench.wait();
    assert!(server.stop(), "the server stops cleanly");

    // Restoring: the copy, named wozkit.sqlite3 in a data directory of its own, serves again.
    let restored = tmp.path().join("restored");
    std::fs::create_dir_all(&restored).expect("restored directory");
    std::fs::copy(&backup, restored.join("wozkit.sqlite3")).expect("copy the backup");
    let mut again = Server::new(
        "offshore-emergency",
        restored.clone(),
        tmp.path().join("restored.log"),
    );
    again.start();
    assert!(again.stop(), "the restored server stops cleanly");
    let sessions = checked_sessions(
        &restored.display().to_string(),
        &tmp.path().join("restored.jsonl"),
    );
    assert!(sessions.len() >= 5, "{} sessions restored", sessions.len());
}
