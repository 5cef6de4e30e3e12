//! Scenario variation over the real server: a served offshore session logs its draw right after
//! it starts, before anything reads the world, and the room follows the draw (the alert names the
//! drawn area; the stored log replays to the drawn world).

use serde_json::json;
use wozkit_core::engine::replay;
use wozkit_core::event::EventKind;
use wozkit_core::load::load_builtin;

use crate::helpers::{enter, paired, spawn_app_in};

#[tokio::test]
async fn a_served_session_logs_the_draw_first_and_the_room_follows_it() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = load_builtin("offshore-emergency").unwrap_or_else(|e| panic!("{e}"));
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let _wu = enter(&user, 0).await;
    for (i, state) in ["intro_hello", "inform_alert_emergency"].iter().enumerate() {
        let id = format!("c{i}");
        ww.cmd(&id, json!({"cmd": "say", "state": state})).await;
        ww.answer(&id).await;
    }
    let events = app.events(&session).await;
    assert!(matches!(events[0].kind, EventKind::SessionStarted { .. }));
    let EventKind::ScenarioDrawn { values, world, .. } = &events[1].kind else {
        panic!("the second event is not the draw: {:?}", events[1].kind);
    };
    let at = values["fire_location"].as_str().expect("a location id");
    let area = study
        .study
        .world
        .locations
        .iter()
        .find(|l| l.id == at)
        .map(|l| l.name.clone())
        .expect("the drawn fire is at a location");
    assert_eq!(world["fire_area"], json!(area));
    let alert = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Message { text, .. } if text.contains("alarm") || text.contains("Alarm") => {
                Some(text.clone())
            }
            _ => None,
        })
        .expect("the alert was said");
    assert!(alert.contains(&area), "{alert}");
    // No draw after the first: the log holds one, and replaying it gives the drawn world.
    let draws = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ScenarioDrawn { .. }))
        .count();
    assert_eq!(draws, 1);
    let s = replay(&study, &session, &events);
    for (k, v) in world {
        assert_eq!(&s.world[k], v, "{k}");
    }
    app.stop().await;
}
