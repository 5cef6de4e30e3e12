//! The researcher's side: `/try`, the session list, and the log, payment and code projections.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use wozkit_data::records::{self, payments};

use crate::helpers::{Client, Tiny, enter, login, paired, spawn_app};

#[tokio::test]
async fn try_pairs_two_seats_of_one_browser_with_each_other() {
    let mut app = spawn_app(Tiny::default()).await;
    assert_eq!(
        app.http("GET", "/try", &[], "").await.status,
        303,
        "login first"
    );
    let cookie = login(&app).await;
    let page = app.http("GET", "/try", &[("Cookie", &cookie)], "").await;
    assert_eq!(page.status, 200);
    let srcs: Vec<String> = page
        .body
        .split("<iframe")
        .skip(1)
        .filter_map(|f| {
            f.split("src=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(|s| s.replace("&amp;", "&"))
        })
        .collect();
    assert_eq!(srcs.len(), 2, "{}", page.body);
    let mut seats = vec![];
    for src in &srcs {
        let res = app.http("GET", src, &[], "").await;
        assert_eq!(res.status, 303);
        let set = res.header("set-cookie").unwrap_or_default();
        assert!(
            set.starts_with("wozkit_token_"),
            "a cookie of its own seat: {set}"
        );
        let seat = res
            .header("location")
            .unwrap_or_default()
            .split("seat=")
            .nth(1)
            .map(str::to_string);
        let c = Client {
            addr: app.addr,
            cookie: set.split(';').next().unwrap_or_default().to_string(),
            seat,
        };
        c.accept_pages().await;
        seats.push(c);
    }
    let mut a = seats[0].ws().await;
    a.hello(0).await;
    let mut b = seats[1].ws().await;
    b.hello(0).await;
    let pa = a.until_type("paired").await;
    let pb = b.until_type("paired").await;
    assert_eq!(pa["session"], pb["session"]);
    assert!(
        pa["next"]
            .as_str()
            .is_some_and(|n| n.starts_with("/p?seat="))
    );
    app.stop().await;
}

#[tokio::test]
async fn logs_payments_and_codes_come_from_the_store() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    wu.cmd(
        "u1",
        json!({"cmd": "text", "text": "hello there robot helper"}),
    )
    .await;
    wu.answer("u1").await;
    ww.cmd("c2", json!({"cmd": "text", "text": "typed by hand"}))
        .await;
    ww.answer("c2").await;
    ww.cmd("c3", json!({"cmd": "say", "state": "bye"})).await;
    ww.answer("c3").await;
    wu.until_type("ended").await;
    let step = user.step().await;
    assert_eq!(
        user.post("/p/survey", &format!("step={step}&q1=5"))
            .await
            .status,
        303
    );
    let done = user.page().await.body;
    let code = done
        .split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_default()
        .to_string();

    let list = app
        .http("GET", "/researcher", &[("Cookie", &login(&app).await)], "")
        .await;
    assert!(list.body.contains(&session));

    let out = tempfile::tempdir().expect("dir");
    let path = out.path().join("logs.jsonl");
    assert_eq!(
        records::export_log(app.store.as_ref(), None, false, &path)
            .await
            .expect("export"),
        1
    );
    let line = std::fs::read_to_string(&path).expect("written");
    let log: Value = serde_json::from_str(line.trim()).expect("one JSON line");
    let m = &log["metrics"];
    assert_eq!(
        (m["turns"]["user"].as_u64(), m["turns"]["wizard"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(m["words_per_turn"]["user"], 4.0);
    assert!((m["wizard_free_text_percent"].as_f64().unwrap_or(0.0) - 100.0 / 3.0).abs() < 1e-6);
    assert_eq!(m["end_reason"], "terminal");
    assert_eq!(m["goal_reached"], false);
    assert!(log["events"].as_array().is_some_and(|e| e.len() > 8));

    let tiny = std::sync::Arc::new(Tiny::default().study());
    let rows = payments::payments(app.store.as_ref(), None, &|_| Some(tiny.clone()), false)
        .await
        .expect("payments");
    let by_role: BTreeMap<String, &payments::PaymentRow> =
        rows.iter().map(|r| (r.role.clone(), r)).collect();
    assert_eq!(by_role["user"].status, "completed");
    assert_eq!(by_role["user"].completion_code, code);
    assert_eq!(by_role["wizard"].status, "incomplete");
    assert_eq!(by_role["user"].base, 1.0);
    assert!(by_role["user"].total >= 1.0);
    let mut csv = vec![];
    payments::write_csv(&rows, &mut csv).expect("csv");
    assert!(String::from_utf8_lossy(&csv).starts_with("participant,platform,crowd_ids,"));

    match payments::verify(app.store.as_ref(), &code.to_lowercase())
        .await
        .expect("verify")
    {
        payments::Verdict::Valid {
            participant,
            session: s,
        } => {
            assert_eq!(participant.completion_code.as_deref(), Some(code.as_str()));
            assert_eq!(s.as_deref(), Some(session.as_str()));
        }
        other => panic!("code not valid: {other:?}"),
    }
    assert_eq!(
        payments::verify(app.store.as_ref(), "ZZZZZZZZ")
            .await
            .expect("verify"),
        payments::Verdict::Unknown
    );
    app.stop().await;
}
