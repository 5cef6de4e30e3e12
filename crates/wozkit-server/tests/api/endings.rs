//! Every way a session ends: terminal state, time limit, finish, disconnect. Then the survey and
//! the completion code.

use serde_json::json;
use wozkit_core::event::{EndReason, EventKind, Role};

use crate::helpers::{Tiny, enter, greet_and_end, paired, spawn_app};

#[tokio::test]
async fn a_terminal_state_ends_the_session_then_survey_and_code() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    let ended = greet_and_end(&mut ww, &mut wu).await;
    assert_eq!(
        (ended["reason"].as_str(), ended["next"].as_str()),
        (Some("terminal"), Some("/p"))
    );
    assert_eq!(ww.until_type("ended").await["reason"], "terminal");

    let page = user.page().await.body;
    assert!(page.contains("data-page=\"survey\""), "{page}");
    let step = user.step().await;
    let bad = user.post("/p/survey", &format!("step={step}&q1=9")).await;
    assert_eq!(bad.status, 422);
    assert!(bad.body.contains("problem-q1"));
    let ok = user.post("/p/survey", &format!("step={step}&q1=4")).await;
    assert_eq!(ok.status, 303);
    let done = user.page().await.body;
    let code = done
        .split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_default()
        .to_string();
    assert_eq!(code.len(), 8);

    let events = app.events(&session).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::SessionEnded {
            reason: EndReason::Terminal,
            ..
        }
    )));
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::SurveyAnswered { role: Role::User, answers } if answers["q1"] == 4)));
    assert!(events.iter().any(|e| e.kind
        == EventKind::CompletionIssued {
            role: Role::User,
            code: code.clone(),
            no_partner: false
        }));
    let record = app
        .store
        .session(&session)
        .await
        .expect("session")
        .expect("exists");
    assert_eq!(record.ended.map(|e| e.reason), Some(EndReason::Terminal));
    app.stop().await;
}

#[tokio::test]
async fn the_time_limit_ends_the_session() {
    let mut app = spawn_app(Tiny {
        time_limit_s: 2,
        ..Tiny::default()
    })
    .await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    assert_eq!(wu.until_type("ended").await["reason"], "time_limit");
    assert_eq!(ww.until_type("ended").await["reason"], "time_limit");
    assert!(wizard.page().await.body.contains("data-page=\"survey\""));
    app.stop().await;
}

#[tokio::test]
async fn finish_ends_the_session_once_allowed() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    wu.cmd("f0", json!({"cmd": "finish"})).await;
    assert_eq!(
        wu.answer("f0").await["detail"]["refusal"],
        "finish_not_allowed"
    );
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    wu.cmd("u1", json!({"cmd": "text", "text": "hi"})).await;
    wu.answer("u1").await;
    assert_eq!(wu.last_view()["can_finish"], true);
    wu.cmd("f1", json!({"cmd": "finish"})).await;
    assert_eq!(wu.answer("f1").await["type"], "ack");
    assert_eq!(ww.until_type("ended").await["reason"], "finished");
    app.stop().await;
}

#[tokio::test]
async fn a_disconnect_beyond_the_grace_period_ends_the_session() {
    let mut app = spawn_app(Tiny {
        grace_s: 1,
        ..Tiny::default()
    })
    .await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let wu = enter(&user, 0).await;
    wu.close().await;
    assert_eq!(ww.until_type("partner").await["status"], "reconnecting");
    assert_eq!(ww.until_type("ended").await["reason"], "disconnect");
    let events = app.events(&session).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::Disconnected {
            role: Role::User,
            ..
        }
    )));
    assert!(user.page().await.body.contains("data-page=\"survey\""));
    app.stop().await;
}

/// The element `<tag … id="ID" …>` of `html` and what follows it up to `</end>`.
fn element<'a>(html: &'a str, id: &str, end: &str) -> &'a str {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let start = html[..at].rfind('<').unwrap_or(at);
    let stop = html[at..]
        .find(end)
        .map_or(html.len(), |i| at + i + end.len());
    &html[start..stop]
}

#[tokio::test]
async fn the_room_page_holds_a_hidden_end_banner_with_a_continue_button() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, _) = paired(&app).await;
    for c in [&user, &wizard] {
        let page = c.page().await.body;
        assert!(page.contains("data-page=\"room\""), "{page}");
        let banner = element(&page, "end-banner", "</div>");
        let open_tag = &banner[..banner.find('>').unwrap_or(banner.len())];
        assert!(open_tag.contains(" hidden"), "shown too early: {banner}");
        assert!(open_tag.contains("data-testid=\"end-banner\""), "{banner}");
        assert!(banner.contains("The conversation has ended"), "{banner}");
        let button = element(banner, "continue-after-end", "</button>");
        assert!(
            button.starts_with("<button type=\"button\"")
                && button.contains("data-testid=\"continue-after-end\"")
                && button.contains(">Continue</button>"),
            "{button}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn the_partner_away_view_carries_the_grace_deadline_until_the_partner_is_back() {
    let mut app = spawn_app(Tiny {
        grace_s: 30,
        ..Tiny::default()
    })
    .await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let wu = enter(&user, 0).await;
    assert!(ww.last_view()["partner_back_by_ms"].is_null());
    wu.close().await;
    assert_eq!(ww.until_type("partner").await["status"], "reconnecting");
    let away = ww
        .until(|v| v["type"] == "view" && v["view"]["partner_away"] == true)
        .await;
    let grace_until = match app
        .wait_event(&session, |e| {
            matches!(
                e.kind,
                EventKind::Disconnected {
                    role: Role::User,
                    ..
                }
            )
        })
        .await
        .kind
    {
        EventKind::Disconnected { grace_until_ms, .. } => grace_until_ms,
        other => panic!("not a disconnect: {other:?}"),
    };
    assert_eq!(away["view"]["partner_back_by_ms"], grace_until);
    assert!(grace_until > away["view"]["now_ms"].as_u64().unwrap_or(u64::MAX));

    let wu = enter(&user, 0).await;
    assert_eq!(ww.until_type("partner").await["status"], "back");
    let back = ww
        .until(|v| v["type"] == "view" && v["view"]["partner_away"] == false)
        .await;
    assert!(back["view"]["partner_back_by_ms"].is_null(), "{back}");
    assert!(wu.last_view()["partner_back_by_ms"].is_null());
    app.stop().await;
}

#[tokio::test]
async fn the_survey_after_a_disconnect_says_why_the_conversation_ended() {
    let mut app = spawn_app(Tiny {
        grace_s: 1,
        ..Tiny::default()
    })
    .await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let wu = enter(&user, 0).await;
    wu.close().await;
    assert_eq!(ww.until_type("ended").await["reason"], "disconnect");
    for (c, says) in [
        (&wizard, "Your partner lost the connection"),
        (&user, "Your connection was lost"),
    ] {
        let first = c.page().await.body;
        assert!(first.contains("data-page=\"survey\""));
        assert!(
            element(&first, "end-note", "</p>").contains(says),
            "{first}"
        );
        let step = c.step().await;
        let shown = c.post("/p/survey", &format!("step={step}&q1=9")).await;
        assert_eq!(shown.status, 422);
        let note = element(&shown.body, "end-note", "</p>");
        assert!(note.contains(says), "{note}");
        // Above the questions, and the questionnaire itself unchanged.
        let form = shown.body.find("id=\"survey\"").unwrap_or(0);
        assert!(shown.body.find("id=\"end-note\"").unwrap_or(usize::MAX) < form);
        assert!(shown.body.contains("data-testid=\"question-q1\""));
        let ok = c.post("/p/survey", &format!("step={step}&q1=4")).await;
        assert_eq!(ok.status, 303);
    }
    app.stop().await;
}

#[tokio::test]
async fn the_survey_after_an_ordinary_ending_has_no_explanation() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    ww.answer("c2").await;
    assert_eq!(wu.until_type("ended").await["reason"], "terminal");
    let step = user.step().await;
    let shown = user.post("/p/survey", &format!("step={step}&q1=9")).await;
    assert_eq!(shown.status, 422);
    assert!(!shown.body.contains("end-note"), "{}", shown.body);
    app.stop().await;
}
