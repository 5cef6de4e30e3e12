//! Test sessions: the participants of `/try` and of lab links with `test=1` are marked as tests,
//! and their sessions are left out of payments and session logs unless asked for.

use std::collections::HashSet;

use wozkit_data::records::{self, payments};

use crate::helpers::*;

/// Pairs the two participants of a `/try` page; returns their session id.
async fn tried(app: &TestApp) -> String {
    let researcher = login(app).await;
    let page = app
        .http("GET", "/try?study=tiny", &[("Cookie", &researcher)], "")
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let links: Vec<String> = page
        .body
        .split("src=\"/join?")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(|s| s.replace("&amp;", "&"))
        .collect();
    assert_eq!(links.len(), 2, "{}", page.body);
    pair_links(app, &links[0], &links[1]).await.2
}

#[tokio::test]
async fn try_and_test_links_are_left_out_of_payments_and_logs_unless_asked() {
    let mut app = spawn_app(Tiny::default()).await;
    let tiny = std::sync::Arc::new(Tiny::default().study());
    let (_u, _w, real) = paired_as(&app, "real").await;
    let tried = tried(&app).await;
    // A lab link marked as a test.
    let (_tu, _tw, lab_test) = pair_links(
        &app,
        "participant=t-u&role=user&pair=lab-test&test=1",
        "participant=t-w&role=wizard&pair=lab-test&test=1",
    )
    .await;

    for (session, test) in [(&real, false), (&tried, true), (&lab_test, true)] {
        let marked = records::is_test_session(app.store.as_ref(), session)
            .await
            .expect("store");
        assert_eq!(marked, test, "session {session}");
    }

    let sessions_paid = |include_test: bool| {
        let store = app.store.clone();
        let tiny = tiny.clone();
        async move {
            payments::payments(store.as_ref(), None, &|_| Some(tiny.clone()), include_test)
                .await
                .expect("payments")
                .into_iter()
                .map(|r| r.session)
                .collect::<HashSet<String>>()
        }
    };
    assert_eq!(sessions_paid(false).await, HashSet::from([real.clone()]));
    assert_eq!(
        sessions_paid(true).await,
        HashSet::from([real.clone(), tried.clone(), lab_test.clone()])
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("logs.jsonl");
    let n = records::export_log(app.store.as_ref(), None, false, &path)
        .await
        .expect("export");
    assert_eq!(n, 1);
    let text = std::fs::read_to_string(&path).expect("read log");
    assert!(text.contains(&real) && !text.contains(&tried), "{text}");
    let n = records::export_log(app.store.as_ref(), None, true, &path)
        .await
        .expect("export");
    assert_eq!(n, 3);
    // The mark travels with the log.
    let logs: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .expect("read log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    for log in logs {
        let id = log["session"]["id"].as_str().unwrap_or_default();
        let all_test = log["participants"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["test"] == true));
        assert_eq!(all_test, id != real, "{log}");
    }
    app.stop().await;
}

#[tokio::test]
async fn only_lab_links_take_a_test_mark() {
    let mut app = spawn_app(Tiny::default()).await;
    let res = app
        .http("GET", "/join?participant=x&test=yes", &[], "")
        .await;
    assert_eq!(res.status, 400, "{}", res.body);
    assert!(res.body.contains("`test`"), "{}", res.body);
    // A crowd worker's `test=1` is not kept: it cannot leave itself out of payments.
    let _worker = app
        .join("PROLIFIC_PID=P1&STUDY_ID=S&SESSION_ID=X&test=1")
        .await;
    let p = app
        .store
        .participant_by_worker("tiny", wozkit_store::Platform::Prolific, "P1")
        .await
        .expect("store")
        .expect("the worker");
    assert!(!p.is_test());
    // Nor may anyone mark themselves a simulated user on a served study: only the server that
    // `wozkit simulate-users` starts takes that mark.
    let res = app
        .http("GET", "/join?participant=y&test=1&simulated=bot", &[], "")
        .await;
    assert_eq!(res.status, 400, "{}", res.body);
    assert!(res.body.contains("`simulated`"), "{}", res.body);
    let res = app
        .http(
            "GET",
            "/join?PROLIFIC_PID=P2&STUDY_ID=S&SESSION_ID=Y&simulated=bot",
            &[],
            "",
        )
        .await;
    let p = app
        .store
        .participant_by_worker("tiny", wozkit_store::Platform::Prolific, "P2")
        .await
        .expect("store");
    assert!(
        p.is_none_or(|p| p.simulated_user().is_none()),
        "{}",
        res.body
    );
    app.stop().await;
}
