//! A restart loses nothing: rooms are rebuilt from the log and timers resume.

use serde_json::json;
use wozkit_core::engine::replay;
use wozkit_core::event::EventKind;

use crate::helpers::{Tiny, enter, paired, spawn_app, spawn_app_in};
use crate::reconnect::last_seq;

#[tokio::test]
async fn rooms_and_timers_resume_after_a_restart() {
    let tiny = Tiny {
        action_s: 2.0,
        ..Tiny::default()
    };
    let mut app = spawn_app(tiny.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    ww.cmd(
        "c2",
        json!({"cmd": "act", "action": "move", "robot": "r1", "target": "tower"}),
    )
    .await;
    assert_eq!(ww.answer("c2").await["type"], "ack");
    wu.event("action_started").await;
    let (seen_w, seen_u) = (last_seq(&ww), last_seq(&wu));

    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let user = crate::helpers::Client {
        addr: app.addr,
        ..user
    };
    let wizard = crate::helpers::Client {
        addr: app.addr,
        ..wizard
    };

    let mut ww = wizard.ws().await;
    ww.hello(seen_w).await;
    let mut wu = user.ws().await;
    wu.hello(seen_u).await;
    // The action's timer survived the restart.
    let done = ww.event("action_completed").await;
    assert_eq!(done["target"], "tower");
    ww.event("milestone").await;
    ww.cmd("c3", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(ww.answer("c3").await["type"], "ack");
    assert_eq!(wu.until_type("ended").await["reason"], "terminal");
    assert_eq!(ww.until_type("ended").await["reason"], "terminal");

    let events = app.events(&session).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "gap-free across the restart"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Disconnected { .. })),
        "the restart is recorded"
    );
    let s = replay(&tiny.study(), &session, &events);
    assert!(s.is_ended());
    assert_eq!(s.robots[0].location, "tower");
    assert!(user.page().await.body.contains("data-page=\"survey\""));
    app.stop().await;
    drop(tmp);
}

#[tokio::test]
async fn a_deadline_passed_while_down_fires_at_startup_without_anyone_returning() {
    let tiny = Tiny {
        time_limit_s: 2,
        ..Tiny::default()
    };
    let mut app = spawn_app(tiny.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let _ww = enter(&wizard, 0).await;
    let _wu = enter(&user, 0).await;
    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let ended = app
        .wait_event(&session, |e| {
            matches!(e.kind, EventKind::SessionEnded { .. })
        })
        .await;
    assert!(matches!(
        ended.kind,
        EventKind::SessionEnded {
            reason: wozkit_core::event::EndReason::TimeLimit,
            ..
        }
    ));
    let record = app
        .store
        .session(&session)
        .await
        .expect("session")
        .expect("exists");
    assert!(record.ended.is_some(), "the session record is closed too");
    app.stop().await;
    drop(tmp);
}
