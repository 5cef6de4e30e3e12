//! Reconnecting with the last seq seen replays exactly what was missed.

use serde_json::{Value, json};

use crate::helpers::{Tiny, Ws, enter, paired, spawn_app};

/// The highest event seq a socket has seen.
pub fn last_seq(ws: &Ws) -> u64 {
    ws.seen
        .iter()
        .filter(|v| v["type"] == "event")
        .filter_map(|v| v["event"]["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_reconnecting_participant_gets_exactly_the_missed_events() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    wu.event("message").await;
    let seen = last_seq(&ww);
    ww.close().await;

    assert_eq!(wu.until_type("partner").await["status"], "reconnecting");
    for (id, text) in [("u1", "are you there?"), ("u2", "hello?")] {
        wu.cmd(id, json!({"cmd": "text", "text": text})).await;
        assert_eq!(wu.answer(id).await["type"], "ack");
    }

    let mut back = wizard.ws().await;
    back.hello(seen).await;
    back.until(|v| v["type"] == "event" && v["event"]["kind"] == "reconnected")
        .await;
    let received: Vec<Value> = back
        .seen
        .iter()
        .filter(|v| v["type"] == "event")
        .map(|v| v["event"].clone())
        .collect();
    let stored: Vec<Value> = app
        .store
        .events(&session, seen)
        .await
        .expect("events")
        .iter()
        .map(|e| serde_json::to_value(e).expect("event json"))
        .collect();
    assert_eq!(
        received, stored,
        "exactly the missed events, in order, once"
    );
    let kinds: Vec<&str> = received.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["disconnected", "message", "message", "reconnected"]);
    assert_eq!(wu.until_type("partner").await["status"], "back");
    app.stop().await;
}
