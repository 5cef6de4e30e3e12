//! Role checks, bad frames, limits, Origin and cookie checks, escaping. The full access table
//! (every route and command × every caller) is `access_matrix`.

use serde_json::json;

use crate::helpers::{Tiny, enter, http, paired, spawn_app};

#[tokio::test]
async fn commands_are_checked_against_role_and_state() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;

    wu.cmd("x1", json!({"cmd": "say", "state": "greet"})).await;
    let e = wu.answer("x1").await;
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str()),
        (Some("error"), Some("wrong_role")),
        "{e}"
    );

    wu.cmd("x2", json!({"cmd": "approve"})).await;
    let e = wu.answer("x2").await;
    assert_eq!(e["code"], "refused");
    assert_eq!(e["detail"]["refusal"], "no_lock");

    ww.cmd("x3", json!({"cmd": "say", "state": "ask"})).await;
    let e = ww.answer("x3").await;
    assert_eq!(e["code"], "not_offered", "{e}");

    ww.cmd("x4", json!({"cmd": "act", "action": "move", "robot": "r1"}))
        .await;
    let e = ww.answer("x4").await;
    assert_eq!(e["detail"]["refusal"], "target_required");

    ww.cmd("x5", json!({"cmd": "join", "role": "user"})).await;
    assert_eq!(ww.answer("x5").await["code"], "bad_command");

    wu.send_text("{oops").await;
    assert_eq!(wu.until_type("error").await["code"], "bad_json");
    wu.send(json!({"type": "dance"})).await;
    assert_eq!(wu.until_type("error").await["code"], "unknown_type");
    wu.send_text(&format!(
        "{{\"type\":\"cmd\",\"id\":\"big\",\"cmd\":{{\"cmd\":\"text\",\"text\":\"{}\"}}}}",
        "x".repeat(20_000)
    ))
    .await;
    assert_eq!(wu.until_type("error").await["code"], "too_large");
    wu.send(json!({"type": "ping"})).await;
    wu.until_type("pong").await;
    app.stop().await;
}

#[tokio::test]
async fn floods_are_rate_limited() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, _, _) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    for _ in 0..40 {
        wu.send(json!({"type": "ping"})).await;
    }
    let mut limited = 0;
    let mut pongs = 0;
    while pongs + limited < 40 {
        match wu.next().await {
            Some(v) if v["type"] == "pong" => pongs += 1,
            Some(v) if v["code"] == "rate_limited" => limited += 1,
            Some(_) => {}
            None => break,
        }
    }
    assert!(limited >= 15, "{limited} limited, {pongs} answered");
    app.stop().await;
}

#[tokio::test]
async fn origin_cookies_and_escaping() {
    let mut app = spawn_app(Tiny::default()).await;
    let user = app.join("participant=fay&role=user").await;
    assert!(
        user.ws_with(&[("origin", "http://evil.example")])
            .await
            .is_err()
    );
    let res = app
        .http(
            "GET",
            "/ws",
            &[
                ("Connection", "upgrade, close"),
                ("Upgrade", "websocket"),
                ("Sec-WebSocket-Version", "13"),
                ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ],
            "",
        )
        .await;
    assert_eq!(res.status, 401);
    assert_eq!(app.http("GET", "/p", &[], "").await.status, 401);

    let step = user.step().await;
    let no_origin = app
        .http(
            "POST",
            "/p/next",
            &[
                ("Cookie", &user.cookie),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &format!("step={step}"),
        )
        .await;
    assert_eq!(no_origin.status, 403);
    let evil = app
        .http(
            "POST",
            "/p/next",
            &[
                ("Cookie", &user.cookie),
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &format!("step={step}"),
        )
        .await;
    assert_eq!(evil.status, 403);
    assert_eq!(user.step().await, step, "nothing changed");

    assert_eq!(
        app.http("GET", "/study/tiny/../../etc/passwd", &[], "")
            .await
            .status,
        404
    );
    let csp = app
        .http("GET", "/", &[], "")
        .await
        .header("content-security-policy")
        .unwrap_or_default();
    assert!(csp.contains("script-src 'self'"));

    // Participant text is escaped on the researcher's live view.
    let (u, w, session) = paired(&app).await;
    let mut ww = enter(&w, 0).await;
    let mut wu = enter(&u, 0).await;
    ww.cmd("c", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c").await;
    wu.cmd(
        "u",
        json!({"cmd": "text", "text": "<script>alert(1)</script>"}),
    )
    .await;
    wu.answer("u").await;
    wozkit_server::auth::ensure_password(app.store.as_ref(), Some("letmein"))
        .await
        .expect("password");
    let origin = format!("http://{}", app.addr);
    let login = http(
        app.addr,
        "POST",
        "/researcher/login",
        &[
            ("Origin", &origin),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "password=letmein&next=/researcher",
    )
    .await;
    assert_eq!(login.status, 303, "{}", login.body);
    let cookie = login
        .header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    let page = app
        .http(
            "GET",
            &format!("/researcher/session/{session}"),
            &[("Cookie", &cookie)],
            "",
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!page.body.contains("<script>alert"));
    let wrong = http(
        app.addr,
        "POST",
        "/researcher/login",
        &[
            ("Origin", &origin),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "password=nope",
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(app.http("GET", "/researcher", &[], "").await.status, 303);
    app.stop().await;
}

#[tokio::test]
async fn entry_links_are_limited_per_address_with_a_429_page() {
    let mut app = crate::helpers::spawn_app_tuned(
        Tiny::default(),
        wozkit_server::Tunables {
            join_per_minute: 3,
            ..crate::helpers::fast()
        },
    )
    .await;
    for name in ["a", "b", "c"] {
        let res = app
            .http("GET", &format!("/join?participant={name}"), &[], "")
            .await;
        assert_eq!(res.status, 303, "{}", res.body);
    }
    let res = app.http("GET", "/join?participant=d", &[], "").await;
    assert_eq!(res.status, 429, "{}", res.body);
    // Three a minute: the next one is back in 20 seconds.
    assert_eq!(res.header("retry-after").as_deref(), Some("20"));
    assert!(
        res.header("content-type")
            .is_some_and(|t| t.starts_with("text/html"))
    );
    assert!(res.body.contains("id=\"error-message\""), "{}", res.body);
    assert!(res.body.contains("Please wait 20 seconds"), "{}", res.body);
    assert!(res.header("set-cookie").is_none());
    let refused = app
        .store
        .participant_by_worker("tiny", wozkit_store::Platform::Lab, "d")
        .await
        .expect("store");
    assert!(refused.is_none(), "a refused entry link creates nobody");
    // Other pages are not limited.
    assert_eq!(app.http("GET", "/healthz", &[], "").await.status, 200);
    app.stop().await;
}
