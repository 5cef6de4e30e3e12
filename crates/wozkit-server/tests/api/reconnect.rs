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

/// A wizard's view leaves the action panel out while the connection holds it already; a new
/// connection (a second tab here) gets the whole panel, and so does every connection of the
/// role at the next view, since the room no longer knows what each holds.
#[tokio::test]
async fn views_leave_out_the_panel_a_connection_already_has() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, _session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    let has_panel = |v: &Value| v["view"].get("actions").is_some();
    assert!(
        ww.seen
            .iter()
            .filter(|v| v["type"] == "view")
            .all(has_panel),
        "the first views carry the panel: {:#?}",
        ww.seen
    );
    // Nothing the panel shows changes when the wizard speaks.
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    let after_say = ww.seen.iter().rev().find(|v| v["type"] == "view").cloned();
    let after_say = after_say.unwrap_or_default();
    assert_eq!(after_say["view"]["state"], "greet");
    assert!(!has_panel(&after_say), "panel sent again: {after_say}");
    assert_eq!(
        ww.last_view()["actions"][0]["id"],
        "move",
        "a page keeps the last panel"
    );
    // A second tab of the wizard gets the whole panel at once.
    let mut tab = wizard.ws().await;
    tab.hello(0).await;
    let first = tab.until_type("view").await;
    assert!(has_panel(&first), "{first}");
    // The next view to the role carries it again, for both tabs.
    wu.event("message").await;
    wu.cmd("u1", json!({"cmd": "text", "text": "hello"})).await;
    wu.answer("u1").await;
    for ws in [&mut ww, &mut tab] {
        let v = ws
            .until(|v| {
                v["type"] == "event"
                    && v["event"]["kind"] == "message"
                    && v["event"]["actor"]["role"] == "user"
            })
            .await;
        assert_eq!(v["event"]["text"], "hello");
        // The view of that batch follows its event on the socket.
        let view = loop {
            match ws.next().await {
                Some(v) if v["type"] == "view" => break v,
                Some(_) => {}
                None => panic!("closed before the view; seen {:#?}", ws.seen),
            }
        };
        assert!(has_panel(&view), "{view}");
    }
    app.stop().await;
}
