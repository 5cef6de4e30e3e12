//! Launching on the real platforms: participant pages in MTurk's frame (framing headers, the
//! participant's token in the URL instead of a cookie), seats nobody can take with a worker id
//! alone, test links kept out of the crowd's queue, rate limits behind a trusted proxy, and
//! failed logins that slow down only whoever made them.

use wozkit_data::completion::CodeKey;
use wozkit_server::Tunables;
use wozkit_store::Platform;

use crate::client::Client;
use crate::helpers::*;

/// The value of the `Content-Security-Policy` directive `name`.
fn directive(csp: &str, name: &str) -> String {
    csp.split(';')
        .map(str::trim)
        .find(|d| d.starts_with(name))
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn participant_pages_may_be_framed_by_the_platforms_and_researcher_pages_never() {
    let mut app = spawn_app_tuned(
        Tiny::default(),
        Tunables {
            frame_ancestors: vec!["https://survey.example.org".into()],
            ..fast()
        },
    )
    .await;
    let p = app.join("participant=framed").await;
    for path in [format!("/p{}", seat_q(&p)), "/assets/room.js".into()] {
        let res = app.http("GET", &path, &[("Cookie", &p.cookie)], "").await;
        assert_eq!(res.status, 200, "{path}: {}", res.body);
        let csp = res.header("content-security-policy").expect("a CSP");
        assert_eq!(
            directive(&csp, "frame-ancestors"),
            "frame-ancestors 'self' https://worker.mturk.com https://workersandbox.mturk.com https://survey.example.org",
            "{path}"
        );
        assert!(
            directive(&csp, "form-action").ends_with("https://survey.example.org"),
            "{csp}"
        );
        assert_eq!(res.header("x-frame-options"), None, "{path}");
        assert_eq!(
            res.header("referrer-policy").as_deref(),
            Some("same-origin")
        );
    }
    for path in ["/researcher/login", "/", "/try"] {
        let res = app.http("GET", path, &[], "").await;
        let csp = res.header("content-security-policy").expect("a CSP");
        assert_eq!(
            directive(&csp, "frame-ancestors"),
            "frame-ancestors 'self'",
            "{path}"
        );
        assert_eq!(
            res.header("x-frame-options").as_deref(),
            Some("SAMEORIGIN"),
            "{path}"
        );
    }
    app.stop().await;
}

fn seat_q(c: &Client) -> String {
    c.seat
        .as_ref()
        .map(|s| format!("?seat={s}"))
        .unwrap_or_default()
}

#[tokio::test]
async fn an_mturk_worker_in_a_frame_goes_through_the_study_without_cookies() {
    let mut app = spawn_app(Tiny {
        wait_limit_s: 1,
        ..Tiny::default()
    })
    .await;
    let res = app
        .http(
            "GET",
            "/join?workerId=W1&assignmentId=A1&hitId=H1",
            &[("Sec-Fetch-Dest", "iframe")],
            "",
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let location = res.header("location").expect("a redirect");
    let seat = location
        .strip_prefix("/p?seat=")
        .expect("the page's URL carries the participant's key")
        .to_string();
    assert!(seat.starts_with("k.") && seat.len() == 66, "{location}");
    // A frame of this site (`/try`) gets cookies: no key in its URLs.
    let same_site = app
        .http(
            "GET",
            "/join?participant=tried&seat=u",
            &[
                ("Sec-Fetch-Dest", "iframe"),
                ("Sec-Fetch-Site", "same-origin"),
            ],
            "",
        )
        .await;
    assert_eq!(same_site.header("location").as_deref(), Some("/p?seat=u"));
    // A browser that sends no cookie to a framed site: the key alone carries the participant
    // through the pages, the socket and the completion page.
    let framed = Client {
        addr: app.addr,
        cookie: String::new(),
        seat: Some(seat.clone()),
    };
    framed.accept_pages().await;
    let waiting = framed.page().await.body;
    assert!(
        waiting.contains(&format!("data-seat=\"{seat}\"")),
        "the waiting room's script carries the key on: {waiting}"
    );
    let mut ws = framed.ws().await;
    ws.hello(0).await;
    ws.until_type("ended").await;
    let done = framed.page().await.body;
    assert!(done.contains("data-testid=\"completion-code\""), "{done}");
    // Without the key (and without a cookie) the same browser is nobody.
    let nobody = Client {
        seat: None,
        ..framed.clone()
    };
    assert_eq!(nobody.page().await.status, 401);
    // A key that is not a participant's is nobody either.
    let forged = Client {
        seat: Some(format!("k.{}", "0".repeat(64))),
        ..framed
    };
    assert_eq!(forged.page().await.status, 401);
    app.stop().await;
}

#[tokio::test]
async fn a_worker_id_alone_takes_no_seat_and_no_code() {
    let mut app = spawn_app(Tiny::default()).await;
    let links = [
        (
            Platform::Mturk,
            "W7",
            "workerId=W7&assignmentId=A1&hitId=H1",
            "workerId=W7&assignmentId=A2&hitId=H1",
        ),
        (
            Platform::Prolific,
            "P7",
            "PROLIFIC_PID=P7&STUDY_ID=S&SESSION_ID=X1",
            "PROLIFIC_PID=P7&STUDY_ID=S&SESSION_ID=X2",
        ),
        (
            Platform::Lab,
            "alice",
            "participant=alice",
            "participant=alice&sig=WRONG123",
        ),
    ];
    for (platform, worker, own, other) in links {
        let first = app.join(own).await;
        first.accept_pages().await;
        let owner = app
            .store
            .participant_by_worker("tiny", platform, worker)
            .await
            .expect("store")
            .expect("the participant");
        // A second browser with the worker id but not what the platform told that worker
        // alone: refused, with no cookie and no page of the participant.
        for link in [other.to_string(), other.replace("&sig=WRONG123", "")] {
            let res = app.http("GET", &format!("/join?{link}"), &[], "").await;
            assert_eq!(res.status, 409, "{link}: {}", res.body);
            assert!(res.header("set-cookie").is_none(), "{link}");
            assert!(res.body.contains("another browser"), "{}", res.body);
        }
        // The owner's own link (MTurk's assignment, Prolific's session) resumes in a new
        // browser; a lab participant needs the link signed by this server.
        let again = match platform {
            Platform::Lab => {
                let key = CodeKey::load(app.store.as_ref())
                    .await
                    .expect("store")
                    .expect("a key");
                format!("{own}&sig={}", key.lab_signature("tiny", worker))
            }
            _ => own.to_string(),
        };
        let resumed = app.join(&again).await;
        assert!(
            resumed.page().await.body.contains("data-page=\"waiting\""),
            "{again} resumes in the waiting room"
        );
        let same = app
            .store
            .participant_by_worker("tiny", platform, worker)
            .await
            .expect("store")
            .expect("the participant");
        assert_eq!(same.id, owner.id);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_test_link_and_a_crowd_worker_arriving_together_are_not_paired() {
    let mut app = spawn_app(Tiny {
        wait_limit_s: 2,
        ..Tiny::default()
    })
    .await;
    let crowd = app.join("PROLIFIC_PID=C1&STUDY_ID=S&SESSION_ID=C1").await;
    let role = app
        .store
        .participant_by_worker("tiny", Platform::Prolific, "C1")
        .await
        .expect("store")
        .and_then(|p| p.role)
        .expect("a role");
    let other = if role.as_str() == "user" {
        "wizard"
    } else {
        "user"
    };
    let test = app
        .join(&format!("participant=tester&role={other}&test=1"))
        .await;
    crowd.accept_pages().await;
    test.accept_pages().await;
    let mut wc = crowd.ws().await;
    wc.hello(0).await;
    let mut wt = test.ws().await;
    wt.hello(0).await;
    // Both wait out their limit alone.
    wc.until_type("ended").await;
    wt.until_type("ended").await;
    for ws in [&wc, &wt] {
        assert!(
            !ws.seen.iter().any(|f| f["type"] == "paired"),
            "{:?}",
            ws.seen
        );
    }
    // Two test links find each other in the test queue.
    let a = app.join("participant=t1&role=user&test=1").await;
    let b = app.join("participant=t2&role=wizard&test=1").await;
    a.accept_pages().await;
    b.accept_pages().await;
    let mut wa = a.ws().await;
    wa.hello(0).await;
    let mut wb = b.ws().await;
    wb.hello(0).await;
    let pa = wa.until_type("paired").await;
    let pb = wb.until_type("paired").await;
    assert_eq!(pa["session"], pb["session"]);
    app.stop().await;
}

#[tokio::test]
async fn clients_behind_a_trusted_proxy_are_limited_apart() {
    let behind = |trusted: bool| Tunables {
        join_per_minute: 2,
        trusted_proxies: if trusted {
            vec!["127.0.0.1/32".parse().expect("cidr")]
        } else {
            vec![]
        },
        ..fast()
    };
    let join = |app: &TestApp, n: u32, client: &'static str, proto: &'static str| {
        let addr = app.addr;
        async move {
            crate::client::http(
                addr,
                "GET",
                &format!("/join?participant=p{n}"),
                &[("X-Forwarded-For", client), ("X-Forwarded-Proto", proto)],
                "",
            )
            .await
        }
    };
    let mut app = spawn_app_tuned(Tiny::default(), behind(true)).await;
    let first = join(&app, 1, "203.0.113.1", "https").await;
    assert_eq!(first.status, 303);
    assert!(
        first
            .header("set-cookie")
            .is_some_and(|c| c.contains("; Secure")),
        "HTTPS as the proxy says: {:?}",
        first.header("set-cookie")
    );
    assert_eq!(join(&app, 2, "203.0.113.1", "https").await.status, 303);
    assert_eq!(join(&app, 3, "203.0.113.1", "https").await.status, 429);
    // Another client behind the same proxy has its own limit.
    assert_eq!(join(&app, 4, "203.0.113.2", "https").await.status, 303);
    // A client cannot pick its address by sending the header itself: the proxy appends the
    // one it saw, and that one is counted.
    assert_eq!(
        join(&app, 5, "198.51.100.9, 203.0.113.1", "https")
            .await
            .status,
        429
    );
    app.stop().await;

    // Without a trusted proxy the headers are not believed: one client, plain HTTP.
    let mut app = spawn_app_tuned(Tiny::default(), behind(false)).await;
    let first = join(&app, 1, "203.0.113.1", "https").await;
    assert_eq!(first.status, 303);
    assert!(
        first
            .header("set-cookie")
            .is_some_and(|c| !c.contains("Secure")),
        "{:?}",
        first.header("set-cookie")
    );
    assert_eq!(join(&app, 2, "203.0.113.2", "https").await.status, 303);
    assert_eq!(join(&app, 3, "203.0.113.3", "https").await.status, 429);
    app.stop().await;
}

/// Posts the login form, with a device cookie when given; returns the status and the device
/// cookie the answer sets (if any).
async fn log_in(app: &TestApp, device: Option<&str>, password: &str) -> (u16, Option<String>) {
    let origin = format!("http://{}", app.addr);
    let mut headers = vec![
        ("Origin", origin.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    if let Some(d) = device {
        headers.push(("Cookie", d));
    }
    let res = app
        .http(
            "POST",
            "/researcher/login",
            &headers,
            &format!("name=admin&password={password}"),
        )
        .await;
    let device = res
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.split(';').next())
        .find(|c| c.starts_with(wozkit_server::auth::DEVICE_COOKIE))
        .map(str::to_string);
    (res.status, device)
}

#[tokio::test]
async fn nobody_locks_a_researcher_out_of_a_browser_they_logged_in_from() {
    let mut app = spawn_app(Tiny::default()).await;
    wozkit_server::auth::ensure_password(app.store.as_ref(), Some("letmein"))
        .await
        .expect("password");
    let (status, device) = log_in(&app, None, "letmein").await;
    assert_eq!(status, 303);
    let device = device.expect("a first login leaves a device cookie");
    // Someone guesses admin's password from elsewhere until they are refused...
    for i in 0..wozkit_server::auth::FAILED_LOGIN_LIMIT {
        assert_eq!(log_in(&app, None, &format!("guess-{i}")).await.0, 401);
    }
    assert_eq!(log_in(&app, None, "letmein").await.0, 429);
    // ...and the researcher's own browser still logs in (and is not given a second cookie).
    assert_eq!(log_in(&app, Some(&device), "letmein").await, (303, None));
    // Failures from that browser slow down that browser alone.
    for i in 0..wozkit_server::auth::FAILED_LOGIN_LIMIT {
        assert_eq!(
            log_in(&app, Some(&device), &format!("typo-{i}")).await.0,
            401
        );
    }
    assert_eq!(log_in(&app, Some(&device), "letmein").await.0, 429);
    // A device cookie of nothing is no device.
    let made_up = format!("{}={}", wozkit_server::auth::DEVICE_COOKIE, "ab".repeat(32));
    assert_eq!(log_in(&app, Some(&made_up), "letmein").await.0, 429);
    app.stop().await;
}
