//! `serve --simulated-user`: a researcher pilots a WoZ study alone. A test participant arriving
//! as the wizard is paired at once with the simulated user (here the mock OpenAI-compatible
//! server, which echoes its prompt), who answers the wizard's messages; the session is marked
//! simulated and left out of payments even when tests are asked for.

use std::sync::Arc;

use serde_json::json;
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_core::simulated_users::{SimulatedUser, is_simulated};
use wozkit_server::records::payments;
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
