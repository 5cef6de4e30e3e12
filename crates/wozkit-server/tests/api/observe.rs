//! Observing a live room and taking over as its wizard: the observer receives both sides' frames,
//! the participants receive nothing because of it, only researchers of this site may observe,
//! and a researcher can take the seat of a wizard who left (and the wizard cannot come back).

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite;
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_server::auth::Access;
use wozkit_store::Platform;

use crate::helpers::*;

/// The observer socket of `session` for the researcher `cookie` (the `Ws` helper, whose path
/// is `/ws` plus the client's seat query: the seat carries the `observe` parameter).
async fn observer(app: &TestApp, cookie: &str, session: &str) -> Ws {
    let c = Client {
        addr: app.addr,
        cookie: cookie.to_string(),
        seat: Some(format!("o&observe={session}")),
    };
    let origin = format!("http://{}", app.addr);
    let mut ws = c
        .ws_with(&[("origin", origin.as_str())])
        .await
        .expect("observer handshake");
    ws.hello(0).await;
    ws
}

/// The status of an observer handshake (101 when it succeeds).
async fn observe_status(app: &TestApp, cookie: &str, session: &str, origin: Option<&str>) -> u16 {
    use tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{}/ws?observe={session}", app.addr)
        .into_client_request()
        .expect("request");
    if !cookie.is_empty() {
        req.headers_mut()
            .insert("cookie", cookie.parse().expect("cookie"));
    }
    if let Some(o) = origin {
        req.headers_mut()
            .insert("origin", o.parse().expect("origin"));
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((mut ws, _)) => {
            let _ = ws.close(None).await;
            101
        }
        Err(tungstenite::Error::Http(res)) => res.status().as_u16(),
        Err(e) => panic!("observer handshake: {e}"),
    }
}

/// An `observed` frame of `role` whose inner frame matches.
async fn observed(ws: &mut Ws, role: &str, pred: impl Fn(&Value) -> bool) -> Value {
    ws.until(|v| v["type"] == "observed" && v["role"] == role && pred(&v["frame"]))
        .await["frame"]
        .clone()
}

fn cookie_of(res: &Response) -> String {
    res.header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The CSRF token in a researcher page's forms.
async fn csrf(app: &TestApp, cookie: &str, path: &str) -> String {
    let page = app.http("GET", path, &[("Cookie", cookie)], "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    hidden(&page.body, "csrf")
}

async fn post_as(app: &TestApp, cookie: &str, path: &str, form: &str) -> Response {
    let origin = format!("http://{}", app.addr);
    let headers = [
        ("Cookie", cookie),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    app.http("POST", path, &headers, form).await
}

#[tokio::test]
async fn the_observer_receives_both_sides_of_an_exchange() {
    let app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    let mut ww = enter(&wizard, 0).await;
    let cookie = login_as(&app, Access::Observer).await;
    let mut ob = observer(&app, &cookie, &session).await;
    for role in ["user", "wizard"] {
        let welcome = observed(&mut ob, role, |f| f["type"] == "welcome").await;
        assert_eq!(welcome["role"], role);
        observed(&mut ob, role, |f| f["type"] == "view").await;
    }
    let seats = ob.until_type("seats").await;
    assert_eq!(seats["user"], "here");
    assert_eq!(seats["wizard"], "here");

    // The wizard says an offered option; the user answers in free text.
    let state = ww.last_view()["options"][0]["state"]
        .as_str()
        .expect("an offered option")
        .to_string();
    ww.cmd("w1", json!({"cmd": "say", "state": state})).await;
    assert_eq!(ww.answer("w1").await["type"], "ack");
    wu.cmd("u1", json!({"cmd": "text", "text": "hello from the user"}))
        .await;
    assert_eq!(wu.answer("u1").await["type"], "ack");

    // Each side's frames reach the observer as that side sees them.
    let said = observed(&mut ob, "wizard", |f| {
        f["type"] == "event" && f["event"]["kind"] == "message" && f["event"]["role"] == "wizard"
    })
    .await;
    assert_eq!(said["event"]["source"], "state");
    let heard = observed(&mut ob, "user", |f| {
        f["type"] == "event" && f["event"]["kind"] == "message" && f["event"]["role"] == "wizard"
    })
    .await;
    assert_eq!(
        heard["event"]["source"], "free",
        "the user's side hides the act"
    );
    assert_eq!(heard["event"]["text"], said["event"]["text"]);
    observed(&mut ob, "wizard", |f| {
        f["type"] == "event" && f["event"]["text"] == "hello from the user"
    })
    .await;
    observed(&mut ob, "user", |f| {
        f["type"] == "event" && f["event"]["text"] == "hello from the user"
    })
    .await;
    observed(&mut ob, "wizard", |f| {
        f["type"] == "event" && f["event"]["kind"] == "state_entered"
    })
    .await;
    let user_side: Vec<&Value> = ob
        .seen
        .iter()
        .filter(|v| v["type"] == "observed" && v["role"] == "user")
        .collect();
    assert!(
        !user_side
            .iter()
            .any(|v| v["frame"]["event"]["kind"] == "state_entered"),
        "the user's side shows what the user sees: {user_side:#?}"
    );
    let views = |role: &str| {
        ob.seen
            .iter()
            .filter(|v| {
                v["type"] == "observed" && v["role"] == role && v["frame"]["type"] == "view"
            })
            .count()
    };
    assert!(views("user") >= 2 && views("wizard") >= 2);
    assert!(ob.seen.iter().any(|v| v["type"] == "observed"
        && v["role"] == "wizard"
        && v["frame"]["type"] == "view"
        && v["frame"]["view"]["options"].is_array()));

    // Several observers at once.
    let mut ob2 = observer(&app, &cookie, &session).await;
    observed(&mut ob2, "wizard", |f| {
        f["type"] == "event" && f["event"]["text"] == "hello from the user"
    })
    .await;
    // An observer sends nothing but pings.
    ob2.cmd("x", json!({"cmd": "text", "text": "sneaky"})).await;
    assert_eq!(ob2.until_type("error").await["code"], "read_only");
    assert!(
        !app.events(&session)
            .await
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Message { text, .. } if text == "sneaky"))
    );
}

#[tokio::test]
async fn participants_get_no_frame_and_the_log_no_event_for_an_observer() {
    let app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    let mut ww = enter(&wizard, 0).await;
    // Both rooms are settled: a ping is answered with nothing before it.
    for ws in [&mut wu, &mut ww] {
        ws.send(json!({"type": "ping"})).await;
        ws.until_type("pong").await;
    }
    let before_events = app.events(&session).await.len();
    let seen_before = (wu.seen.len(), ww.seen.len());

    let cookie = login(&app).await;
    let mut ob = observer(&app, &cookie, &session).await;
    ob.until_type("seats").await;
    ob.close().await;
    let mut ob = observer(&app, &cookie, &session).await;
    ob.until_type("seats").await;
    drop(ob);

    // The next frame each participant receives is the answer to its own ping.
    for ws in [&mut wu, &mut ww] {
        ws.send(json!({"type": "ping"})).await;
        let next = ws.next().await.expect("a frame");
        assert_eq!(
            next["type"], "pong",
            "a frame reached a participant: {next}"
        );
    }
    assert_eq!(wu.seen.len(), seen_before.0 + 1);
    assert_eq!(ww.seen.len(), seen_before.1 + 1);
    assert_eq!(app.events(&session).await.len(), before_events);
}

#[tokio::test]
async fn only_researchers_of_this_site_may_observe() {
    let app = spawn_app(Tiny::default()).await;
    let (user, _wizard, session) = paired(&app).await;
    let _wu = enter(&user, 0).await;
    let origin = format!("http://{}", app.addr);
    let researcher = login_as(&app, Access::Observer).await;

    assert_eq!(
        observe_status(&app, &researcher, &session, Some(&origin)).await,
        101
    );
    assert_eq!(observe_status(&app, "", &session, Some(&origin)).await, 401);
    assert_eq!(
        observe_status(&app, &user.cookie, &session, Some(&origin)).await,
        401
    );
    assert_eq!(observe_status(&app, &researcher, &session, None).await, 403);
    let other = Some("http://evil.example");
    assert_eq!(
        observe_status(&app, &researcher, &session, other).await,
        403
    );
    // A session this server does not have (another study's, another server's).
    assert_eq!(
        observe_status(&app, &researcher, "no-such-session", Some(&origin)).await,
        404
    );

    // The page: login required; an observer sees both frames but no takeover.
    let path = format!("/researcher/session/{session}/observe");
    let anon = app.http("GET", &path, &[], "").await;
    assert_eq!(anon.status, 303);
    let as_participant = app
        .http("GET", &path, &[("Cookie", &user.cookie)], "")
        .await;
    assert_eq!(as_participant.status, 303);
    let page = app.http("GET", &path, &[("Cookie", &researcher)], "").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"observe-user\""));
    assert!(page.body.contains("id=\"observe-wizard\""));
    assert!(!page.body.contains("id=\"take-over\""));
    let owner = login(&app).await;
    let page = app.http("GET", &path, &[("Cookie", &owner)], "").await;
    assert!(page.body.contains("id=\"take-over\""));
    let side = app
        .http(
            "GET",
            &format!("{path}/wizard"),
            &[("Cookie", &researcher)],
            "",
        )
        .await;
    assert_eq!(side.status, 200);
    assert!(side.body.contains("data-observe=\"true\""));
    // The session page links here while the session is live.
    let log = app
        .http(
            "GET",
            &format!("/researcher/session/{session}"),
            &[("Cookie", &researcher)],
            "",
        )
        .await;
    assert!(log.body.contains(&format!("href=\"{path}\"")));
}

#[tokio::test]
async fn a_researcher_takes_over_the_seat_of_a_wizard_who_left() {
    let app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    let ww = enter(&wizard, 0).await;
    let cookie = login_as(&app, Access::Researcher).await;
    let path = format!("/researcher/session/{session}/take-over");
    let observe_path = format!("/researcher/session/{session}/observe");
    let token = csrf(&app, &cookie, &observe_path).await;

    // While the wizard is here, the seat is not free.
    let busy = post_as(&app, &cookie, &path, &format!("csrf={token}")).await;
    assert_eq!(busy.status, 409, "{}", busy.body);

    let mut ob = observer(&app, &cookie, &session).await;
    ob.until(|v| v["type"] == "seats" && v["wizard"] == "here")
        .await;
    ww.close().await;
    app.wait_event(&session, |e| {
        matches!(
            e.kind,
            EventKind::Disconnected {
                role: Role::Wizard,
                ..
            }
        )
    })
    .await;
    ob.until(|v| v["type"] == "seats" && v["wizard"] == "away" && v["can_take_over"] == true)
        .await;

    // Neither an observer account nor a request without the token may take over.
    let observer_cookie = login_as(&app, Access::Observer).await;
    let observer_token = csrf(&app, &observer_cookie, &observe_path).await;
    let res = post_as(
        &app,
        &observer_cookie,
        &path,
        &format!("csrf={observer_token}"),
    )
    .await;
    assert_eq!(res.status, 403);
    assert_eq!(post_as(&app, &cookie, &path, "").await.status, 403);
    assert_eq!(
        post_as(&app, &cookie, &path, "csrf=forged").await.status,
        403
    );
    assert_eq!(post_as(&app, &user.cookie, &path, "").await.status, 403);

    let res = post_as(&app, &cookie, &path, &format!("csrf={token}")).await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert_eq!(res.header("location").as_deref(), Some("/p?seat=console"));
    let me = Client {
        addr: app.addr,
        cookie: cookie_of(&res),
        seat: Some("console".into()),
    };
    assert_eq!(page_kind(&me.page().await.body), "room");
    let mut wr = me.ws().await;
    wr.hello(0).await;
    let welcome = wr.until_type("welcome").await;
    assert_eq!(welcome["role"], "wizard");
    wr.until_type("view").await;
    wr.cmd("r1", json!({"cmd": "text", "text": "a researcher here"}))
        .await;
    assert_eq!(wr.answer("r1").await["type"], "ack");
    let heard = wu.event("message").await;
    assert_eq!(heard["text"], "a researcher here");

    // The log: who took over (account and participant), and the researcher's own messages.
    let events = app.events(&session).await;
    let (researcher, participant) = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::TakenOver {
                role: Role::Wizard,
                researcher,
                participant,
            } => Some((researcher.clone(), participant.clone())),
            _ => None,
        })
        .expect("a TakenOver event");
    let p = app
        .store
        .participant(&participant)
        .await
        .expect("store")
        .expect("the researcher's participant");
    assert_eq!(p.platform, Platform::Researcher);
    assert_eq!(p.worker_id.as_deref(), Some(researcher.as_str()));
    assert_eq!(p.session_id.as_deref(), Some(session.as_str()));
    let said = events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Message { text, .. } if text == "a researcher here"))
        .expect("the researcher's message");
    assert_eq!(
        said.actor,
        Actor::Participant {
            role: Role::Wizard,
            participant: Some(participant.clone()),
        }
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::SessionEnded { .. }))
    );
    // The user was not told.
    assert!(!wu.seen.iter().any(|v| v["event"]["kind"] == "taken_over"));

    // The wizard who left comes back: told the seat was taken, not seated again.
    let before = app.events(&session).await.len();
    let mut back = wizard.ws().await;
    back.hello(0).await;
    let refused = back.until_type("error").await;
    assert_eq!(refused["code"], "seat_taken");
    assert_eq!(back.until_type("ended").await["reason"], "seat_taken");
    back.close().await;
    wr.cmd("r2", json!({"cmd": "text", "text": "still here"}))
        .await;
    assert_eq!(wr.answer("r2").await["type"], "ack");
    let after: Vec<_> = app
        .events(&session)
        .await
        .into_iter()
        .skip(before)
        .collect();
    assert!(
        after.iter().all(|e| !matches!(
            e.kind,
            EventKind::Reconnected { .. }
                | EventKind::Disconnected { .. }
                | EventKind::Joined { .. }
        )),
        "the returning wizard changed the room: {after:#?}"
    );

    // The researcher is staff: the payment table has the user and the wizard who left, not them.
    let study = std::sync::Arc::new(Tiny::default().study());
    let rows = wozkit_data::records::payments::payments(
        app.store.as_ref(),
        None,
        &|_| Some(study.clone()),
        true,
    )
    .await
    .expect("payments");
    let paid: Vec<&str> = rows
        .iter()
        .filter(|r| r.session == session)
        .map(|r| r.participant.as_str())
        .collect();
    assert!(!paid.contains(&participant.as_str()), "{paid:?}");
    assert_eq!(paid.len(), 2, "{paid:?}");

    // The session ends: the researcher goes back to the session's page in the console, never to
    // the wizard's questionnaire (their answers would mix into the participants' data).
    wr.cmd("r3", json!({"cmd": "finish"})).await;
    assert_eq!(wr.answer("r3").await["type"], "ack");
    wr.until_type("ended").await;
    let after = me.page().await;
    assert_eq!(after.status, 303, "{}", after.body);
    assert_eq!(
        after.header("location").as_deref(),
        Some(format!("/researcher/session/{session}").as_str())
    );
    // The user, a participant, goes on to their questionnaire as before.
    wu.until_type("ended").await;
    assert_eq!(page_kind(&user.page().await.body), "survey");
}

#[tokio::test]
async fn a_researcher_joins_the_waiting_room_as_wizard() {
    let app = spawn_app(Tiny::default()).await;
    let cookie = login_as(&app, Access::Researcher).await;
    let token = csrf(&app, &cookie, "/researcher").await;
    let path = "/researcher/study/tiny/join-as-wizard";
    let observer_cookie = login_as(&app, Access::Observer).await;
    let observer_token = csrf(&app, &observer_cookie, "/researcher").await;
    let res = post_as(
        &app,
        &observer_cookie,
        path,
        &format!("csrf={observer_token}"),
    )
    .await;
    assert_eq!(res.status, 403);
    assert_eq!(
        post_as(&app, &cookie, path, "csrf=forged").await.status,
        403
    );

    let res = post_as(&app, &cookie, path, &format!("csrf={token}")).await;
    assert_eq!(res.status, 303, "{}", res.body);
    let me = Client {
        addr: app.addr,
        cookie: cookie_of(&res),
        seat: Some("console".into()),
    };
    assert_eq!(page_kind(&me.page().await.body), "waiting");
    let user = app.join("participant=ann&role=user").await;
    user.accept_pages().await;
    let mut wu = user.ws().await;
    wu.hello(0).await;
    let mut wr = me.ws().await;
    wr.hello(0).await;
    let paired = wr.until_type("paired").await;
    assert_eq!(paired["role"], "wizard");
    let session = paired["session"].as_str().unwrap_or_default().to_string();
    assert_eq!(wu.until_type("paired").await["session"], session.as_str());
    let people = app
        .store
        .participants_in_session(&session)
        .await
        .expect("store");
    let researcher = people
        .iter()
        .find(|p| p.role == Some(Role::Wizard))
        .expect("a wizard");
    assert_eq!(researcher.platform, Platform::Researcher);
}

#[tokio::test]
async fn a_taken_seat_stays_taken_after_a_restart() {
    let tiny = Tiny::default();
    let mut app = spawn_app(tiny.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let _wu = enter(&user, 0).await;
    let ww = enter(&wizard, 0).await;
    let cookie = login(&app).await;
    let path = format!("/researcher/session/{session}/take-over");
    let token = csrf(
        &app,
        &cookie,
        &format!("/researcher/session/{session}/observe"),
    )
    .await;
    ww.close().await;
    app.wait_event(&session, |e| {
        matches!(
            e.kind,
            EventKind::Disconnected {
                role: Role::Wizard,
                ..
            }
        )
    })
    .await;
    let res = post_as(&app, &cookie, &path, &format!("csrf={token}")).await;
    assert_eq!(res.status, 303, "{}", res.body);
    let researcher_cookie = cookie_of(&res);

    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    let app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let me = Client {
        addr: app.addr,
        cookie: researcher_cookie,
        seat: Some("console".into()),
    };
    let wizard = Client {
        addr: app.addr,
        ..wizard
    };
    // The rebuilt room seats the researcher, not the wizard who left.
    let mut back = wizard.ws().await;
    back.hello(0).await;
    assert_eq!(back.until_type("error").await["code"], "seat_taken");
    let mut wr = enter(&me, 0).await;
    wr.cmd("r1", json!({"cmd": "text", "text": "after the restart"}))
        .await;
    assert_eq!(wr.answer("r1").await["type"], "ack");
    let events = app.events(&session).await;
    let said = events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Message { text, .. } if text == "after the restart"))
        .expect("the researcher's message");
    let taken = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::TakenOver { participant, .. } => Some(participant.clone()),
            _ => None,
        })
        .expect("TakenOver");
    assert_eq!(
        said.actor,
        Actor::Participant {
            role: Role::Wizard,
            participant: Some(taken),
        }
    );
}
