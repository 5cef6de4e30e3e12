//! `serve --simulated-user`: a researcher pilots a WoZ study alone. A test participant arriving
//! as the wizard is paired at once with the simulated user (here the mock OpenAI-compatible
//! server, which echoes its prompt), who answers the wizard's messages; the session is marked
//! simulated and left out of payments even when tests are asked for.

use std::sync::Arc;

use serde_json::json;
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_core::simulated_users::{SimulatedUser, is_simulated};
use wozkit_data::records::payments;
use wozkit_server::{ModelUser, Tunables};
use wozkit_systems::judge::JudgeEndpoint;

use crate::chat::mock_openai::MockOpenAi;
use crate::helpers::*;

#[tokio::test]
async fn a_test_wizard_gets_the_simulated_user_who_answers_with_the_dialogue_so_far() {
    let mock = MockOpenAi::start().await;
    let spec = SimulatedUser {
        prompt: "Goal: {goal}\n{conversation}".into(),
        ..SimulatedUser::named("pilot")
    };
    let endpoint =
        JudgeEndpoint::new(&spec.actor_name(), &mock.base_url(), "sim-user", None).expect("client");
    let tunables = Tunables {
        simulated_user: Some(Arc::new(ModelUser { spec, endpoint })),
        ..fast()
    };
    let mut app = spawn_app_tuned(Tiny::default(), tunables).await;
    let tiny = Arc::new(Tiny::default().study());

    // The try page shows the wizard's frame only.
    let researcher = login(&app).await;
    let page = app
        .http("GET", "/try?study=tiny", &[("Cookie", &researcher)], "")
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.body.matches("<iframe").count(), 1, "{}", page.body);
    assert!(page.body.contains("id=\"try-wizard\""), "{}", page.body);
    assert!(
        page.body
            .contains("the simulated user pilot plays the user")
    );

    let wizard = app.join("participant=me&role=wizard&test=1").await;
    wizard.accept_pages().await;
    let mut waiting = wizard.ws().await;
    waiting.hello(0).await;
    let paired = waiting.until_type("paired").await;
    assert_eq!(paired["partner"], "bot");
    let session = paired["session"].as_str().expect("session").to_string();

    let mut ww = enter(&wizard, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("c1").await["type"], "ack");
    let answer = ww
        .until(|v| {
            v["type"] == "event" && v["event"]["kind"] == "message" && v["event"]["role"] == "user"
        })
        .await;
    let text = answer["event"]["text"].as_str().expect("text");
    assert_eq!(
        text,
        format!(
            "sim-user: reply to Goal: {}\nassistant: Hello, I am Fred. (turn 1)",
            tiny.study.description.trim()
        )
    );

    let events = app.events(&session).await;
    assert!(is_simulated(&events));
    let seat = events
        .iter()
        .find(|e| {
            matches!(
                e.kind,
                EventKind::Joined {
                    role: Role::User,
                    bot: true
                }
            )
        })
        .expect("the user's seat is taken");
    assert_eq!(
        seat.actor,
        Actor::Bot {
            role: Role::User,
            name: "simulated:pilot".into()
        }
    );
    // One request, one prompt: the goal and the wizard's greeting.
    let asked = mock.requests("sim-user");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].messages.len(), 1);

    // Left out of payments, even with the test sessions.
    let rows = payments::payments(app.store.as_ref(), None, &|_| Some(tiny.clone()), true)
        .await
        .expect("payments");
    assert!(rows.iter().all(|r| r.session != session), "{rows:?}");
    app.stop().await;
}

fn piloting(mock: &MockOpenAi) -> Tunables {
    let spec = SimulatedUser {
        prompt: "{conversation}".into(),
        ..SimulatedUser::named("pilot")
    };
    let endpoint =
        JudgeEndpoint::new(&spec.actor_name(), &mock.base_url(), "sim-user", None).expect("client");
    Tunables {
        simulated_user: Some(Arc::new(ModelUser { spec, endpoint })),
        ..fast()
    }
}

/// The user's messages in a room's frames until the `n`-th: their texts.
async fn user_said(ww: &mut Ws, n: usize) -> Vec<String> {
    let mut out = vec![];
    while out.len() < n {
        let v = ww
            .until(|v| {
                v["type"] == "event"
                    && v["event"]["kind"] == "message"
                    && v["event"]["role"] == "user"
            })
            .await;
        out.push(v["event"]["text"].as_str().unwrap_or_default().to_string());
    }
    out
}

#[tokio::test]
async fn the_simulated_user_keeps_its_seat_after_a_restart() {
    let mock = MockOpenAi::start().await;
    let tiny = Tiny::default();
    let mut app = spawn_app_tuned(tiny.clone(), piloting(&mock)).await;
    let wizard = app.join("participant=me&role=wizard&test=1").await;
    wizard.accept_pages().await;
    let mut waiting = wizard.ws().await;
    waiting.hello(0).await;
    let session = waiting.until_type("paired").await["session"]
        .as_str()
        .expect("session")
        .to_string();
    let mut ww = enter(&wizard, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(
        user_said(&mut ww, 1).await,
        ["sim-user: reply to assistant: Hello, I am Fred. (turn 1)"]
    );

    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    let mut app = spawn_app_in_tuned(tmp.path().to_path_buf(), tiny.study(), piloting(&mock)).await;
    let wizard = Client {
        addr: app.addr,
        ..wizard
    };
    let mut ww = enter(&wizard, 0).await;
    ww.cmd("c2", json!({"cmd": "text", "text": "Anything else?"}))
        .await;
    assert_eq!(ww.answer("c2").await["type"], "ack");
    // Replayed first, then the answer to the new message, from the whole dialogue so far.
    let said = user_said(&mut ww, 2).await;
    assert_eq!(
        said[1],
        "sim-user: reply to assistant: Hello, I am Fred.\nuser: sim-user: reply to assistant: \
         Hello, I am Fred. (turn 1)\nassistant: Anything else? (turn 1)"
    );
    let events = app.events(&session).await;
    let by_pilot = events
        .iter()
        .filter(|e| {
            matches!(&e.actor, Actor::Bot { name, .. } if name == "simulated:pilot")
                && matches!(e.kind, EventKind::Message { .. })
        })
        .count();
    assert_eq!(by_pilot, 2);
    assert_eq!(mock.requests("sim-user").len(), 2);
    app.stop().await;
}
