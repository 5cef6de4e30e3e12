//! The data disk filling up under a live room. SQLite's page cap ([`SqliteStore::cap_pages`])
//! makes the store fail exactly as on a full disk (`SQLITE_FULL`), without a small filesystem
//! to fill: the participants keep playing until their commands are refused; every command the
//! server acknowledged must be in the log, each refusal must be a clear `not_saved` error, the
//! server's log must say the disk is full, and once space returns the same room goes on.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wozkit_core::event::EventKind;
use wozkit_store::sqlite::DB_FILE;
use wozkit_store::{SqliteOptions, SqliteStore, Store};

use crate::helpers::{Tiny, Ws, enter, fast, pair_links_at, paired, spawn_app_with};

/// Everything the server logs while the guard lives (on this thread: the test's runtime is
/// single-threaded, so the rooms' tasks log here too).
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("log poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        let log = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || log.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log")).into_owned()
    }
}

/// A command acknowledged to a participant: its `seq` and the text it sent.
struct Acked {
    seq: u64,
    text: String,
}

/// Sends `text` from `ws` as command `id`; the acknowledgement, or the error frame.
async fn send_text(ws: &mut Ws, id: &str, text: &str) -> Value {
    ws.cmd(id, json!({"cmd": "text", "text": text})).await;
    ws.answer(id).await
}

#[tokio::test]
async fn a_full_disk_refuses_commands_clearly_loses_nothing_acknowledged_and_resumes() {
    let log = CapturedLog::default();
    let _log = log.install();
    let tmp = tempfile::tempdir().expect("temp dir");
    let sqlite = Arc::new(
        SqliteStore::open_with(tmp.path().join(DB_FILE), SqliteOptions::default())
            .await
            .expect("store opens"),
    );
    let store: Arc<dyn Store> = sqlite.clone();
    let mut app = spawn_app_with(store, Tiny::default().study(), fast()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("greet", json!({"cmd": "say", "state": "greet"}))
        .await;
    assert_eq!(ww.answer("greet").await["type"], "ack");

    // The disk fills up: a few pages more and no further.
    sqlite.cap_pages(Some(2)).await.expect("cap the database");

    // Both participants keep writing long messages (a page holds two) until each has been
    // refused twice. The pause keeps them under the per-connection frame limit.
    let filler = "w".repeat(1800);
    let mut acked = vec![];
    let mut refusals = vec![];
    for i in 0..400 {
        let (ws, who) = if i % 2 == 0 {
            (&mut wu, "user")
        } else {
            (&mut ww, "wizard")
        };
        let id = format!("{who}-{i}");
        let text = format!("{id} {filler}");
        let answer = send_text(ws, &id, &text).await;
        match answer["type"].as_str() {
            Some("ack") => acked.push(Acked {
                seq: answer["seq"].as_u64().expect("ack seq"),
                text,
            }),
            _ => refusals.push((text, answer)),
        }
        if refusals.len() >= 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    }
    assert!(
        refusals.len() >= 4,
        "the capped database never filled ({} commands acknowledged)",
        acked.len()
    );
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged before the disk filled"
    );
    for (_, frame) in &refusals {
        assert_eq!(frame["type"], "error", "{frame}");
        assert_eq!(frame["code"], "not_saved", "{frame}");
        let message = frame["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("could not be saved") && message.contains("try again"),
            "unclear message: {message}"
        );
    }

    // Every acknowledged command is in the log under its seq; no refused one is.
    let stored = app.events(&session).await;
    let text_at = |seq: u64| {
        stored
            .iter()
            .find(|e| e.seq == seq)
            .and_then(|e| match &e.kind {
                EventKind::Message { text, .. } => Some(text.clone()),
                _ => None,
            })
    };
    for a in &acked {
        assert_eq!(
            text_at(a.seq).as_deref(),
            Some(a.text.as_str()),
            "acknowledged command lost (seq {})",
            a.seq
        );
    }
    for (text, _) in &refusals {
        assert!(
            !stored
                .iter()
                .any(|e| matches!(&e.kind, EventKind::Message { text: t, .. } if t == text)),
            "a refused command is in the log"
        );
    }
    // Every event a participant was sent is stored under that seq.
    for ws in [&ww, &wu] {
        for frame in ws.seen.iter().filter(|v| v["type"] == "event") {
            let seq = frame["event"]["seq"].as_u64().expect("event seq");
            let event = stored.iter().find(|e| e.seq == seq);
            assert!(event.is_some(), "a sent event (seq {seq}) is not stored");
        }
    }
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=stored.len() as u64).collect::<Vec<_>>());

    let logged = log.text();
    assert!(
        logged.contains("disk is full") && logged.contains(&session),
        "the server's log does not say the disk is full for {session}:\n{logged}"
    );

    // Other writes fail meanwhile too (a newcomer's entry, the lobby, the leases): a page
    // that says so, or a failed write inside the store, must not keep the store from writing
    // once space returns.
    let newcomer = app
        .http("GET", "/join?participant=carol&role=user", &[], "")
        .await;
    assert!(
        newcomer.status == 303
            || (newcomer.status == 500 && newcomer.body.contains("could not save")),
        "entry while the disk is full: {} {}",
        newcomer.status,
        newcomer.body
    );
    let big = "m".repeat(64 * 1024);
    let meta = app.store.set_meta("while-full", &big).await;
    assert!(
        meta.as_ref().is_err_and(|e| e.is_storage_full()),
        "a write needing new pages is refused as full: {meta:?}"
    );

    // Space returns: the same room, on the same sockets (its task did not die), stores again.
    sqlite.cap_pages(None).await.expect("lift the cap");
    let answer = send_text(&mut wu, "after-user", "back again").await;
    assert_eq!(answer["type"], "ack", "{answer}");
    let answer = send_text(&mut ww, "after-wizard", "welcome back").await;
    assert_eq!(answer["type"], "ack", "{answer}");
    let seq = answer["seq"].as_u64().expect("ack seq");
    let stored = app.events(&session).await;
    assert_eq!(stored.last().map(|e| e.seq), Some(seq));
    assert!(matches!(
        &stored[stored.len() - 2].kind,
        EventKind::Message { text, .. } if text == "back again"
    ));
    ww.until(|v| v["type"] == "event" && v["event"]["seq"] == seq - 1)
        .await;

    // And the rest of the service: a new pair is paired and plays.
    let (_dave, erin, fresh, _waiting) = pair_links_at(
        app.addr,
        "participant=dave&role=user",
        "participant=erin&role=wizard",
    )
    .await;
    let mut we = enter(&erin, 0).await;
    we.cmd("hi", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(we.answer("hi").await["type"], "ack");
    assert!(
        app.events(&fresh)
            .await
            .iter()
            .any(|e| matches!(e.kind, EventKind::Message { .. }))
    );
    app.stop().await;
}
