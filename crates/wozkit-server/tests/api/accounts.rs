//! Researcher accounts over HTTP: logins that survive a restart and expire, "log out
//! everywhere", removals and password changes that end logins, the failed-login limit (per
//! client address and per account name, across a restart), the access levels of the account
//! pages, and the Origin and CSRF checks on every account POST.

use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use wozkit_server::auth::{self, Access};
use wozkit_store::{NewLogin, hash_token, new_token};

use crate::helpers::{
    TestApp, Tiny, hidden, login, login_as, login_as_named, login_with, spawn_app, spawn_app_in,
    urlencoding,
};

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// A response's status, headers (lowercase names) and body.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// An HTTP request sent from the local address `from` (any of 127.0.0.0/8), so tests can be
/// different clients to the server.
async fn http_from(
    addr: SocketAddr,
    from: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let socket = TcpSocket::new_v4().expect("socket");
    let local: IpAddr = from.parse().expect("address");
    socket
        .bind(SocketAddr::new(local, 0))
        .expect("bind the client address");
    let mut stream = socket.connect(addr).await.expect("connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = vec![];
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A login attempt from `from`; returns the reply.
async fn try_login(app: &TestApp, from: &str, name: &str, password: &str) -> Reply {
    let origin = format!("http://{}", app.addr);
    http_from(
        app.addr,
        from,
        "POST",
        "/researcher/login",
        &[("Origin", &origin), FORM],
        &format!(
            "name={}&password={}",
            urlencoding(name),
            urlencoding(password)
        ),
    )
    .await
}

/// A GET with a researcher cookie.
async fn get(app: &TestApp, path: &str, cookie: &str) -> Reply {
    http_from(
        app.addr,
        "127.0.0.1",
        "GET",
        path,
        &[("Cookie", cookie)],
        "",
    )
    .await
}

/// A POST from this site's page with a researcher cookie.
async fn post(app: &TestApp, path: &str, cookie: &str, body: &str) -> Reply {
    let origin = format!("http://{}", app.addr);
    http_from(
        app.addr,
        "127.0.0.1",
        "POST",
        path,
        &[("Origin", &origin), ("Cookie", cookie), FORM],
        body,
    )
    .await
}

/// The CSRF token of a login, from the hidden field of its account page.
async fn csrf(app: &TestApp, cookie: &str) -> String {
    let page = get(app, "/researcher/account", cookie).await;
    assert_eq!(page.status, 200, "{}", page.body);
    hidden(&page.body, "csrf")
}

/// Whether the cookie is a current login (the sessions page opens instead of the login).
async fn live(app: &TestApp, cookie: &str) -> bool {
    match get(app, "/researcher", cookie).await.status {
        200 => true,
        303 => false,
        other => panic!("GET /researcher answered {other}"),
    }
}

fn cookie_of(reply: &Reply) -> String {
    reply
        .header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn accounts_and_logins_survive_a_restart() {
    let tiny = Tiny::default();
    let mut app = spawn_app(tiny.clone()).await;
    let (name, cookie) = login_as_named(&app, Access::Researcher).await;
    let page = get(&app, "/researcher/account", &cookie).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(&name), "{}", page.body);
    assert!(
        page.body
            .contains("id=\"account-access\">researcher</strong>")
    );
    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;

    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    assert!(live(&app, &cookie).await, "the login outlived the restart");
    let again = login_with(&app, &name, "password-1").await;
    assert!(live(&app, &again).await);
    app.stop().await;
}

#[tokio::test]
async fn logins_last_twelve_hours_then_expire() {
    let app = spawn_app(Tiny::default()).await;
    let (name, cookie) = login_as_named(&app, Access::Observer).await;
    let res = try_login(&app, "127.0.0.1", &name, "password-1").await;
    let set = res.header("set-cookie").unwrap_or_default();
    assert!(
        set.contains(&format!("Max-Age={}", auth::LOGIN_TTL_MS / 1000)),
        "{set}"
    );
    assert!(live(&app, &cookie).await);
    let account = app
        .store
        .account_by_name(&name)
        .await
        .expect("read")
        .expect("account");
    // A login made 13 hours ago, expired an hour ago; and one still current, as a control.
    let now = wozkit_server::now_ms();
    let (old, old_hash) = new_token();
    let (fresh, fresh_hash) = new_token();
    for (hash, created, expires) in [
        (old_hash, now - 13 * 3_600_000, now - 3_600_000),
        (fresh_hash, now - 3_600_000, now + 3_600_000),
    ] {
        app.store
            .create_login(NewLogin {
                token_hash: hash,
                account_id: account.id.clone(),
                created_at_ms: created,
                expires_at_ms: expires,
            })
            .await
            .expect("login");
    }
    assert!(
        !live(&app, &format!("wozkit_researcher={old}")).await,
        "an expired login is refused"
    );
    assert!(live(&app, &format!("wozkit_researcher={fresh}")).await);
    // The store keeps hashes, never the cookie token.
    assert!(app.store.login(&fresh, now).await.expect("read").is_none());
    assert!(
        app.store
            .login(&hash_token(&fresh), now)
            .await
            .expect("read")
            .is_some()
    );
}

#[tokio::test]
async fn log_out_everywhere_ends_every_login_of_the_account_only() {
    let app = spawn_app(Tiny::default()).await;
    let (name, first) = login_as_named(&app, Access::Observer).await;
    let second = login_with(&app, &name, "password-1").await;
    let other = login_as(&app, Access::Observer).await;
    let token = csrf(&app, &first).await;
    let res = post(
        &app,
        "/researcher/account/logout-everywhere",
        &first,
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(res.status, 303);
    assert_eq!(res.header("location").as_deref(), Some("/researcher/login"));
    assert!(!live(&app, &first).await);
    assert!(
        !live(&app, &second).await,
        "the other device is logged out too"
    );
    assert!(live(&app, &other).await, "another account keeps its login");
}

#[tokio::test]
async fn removing_an_account_or_changing_its_password_ends_its_logins() {
    let app = spawn_app(Tiny::default()).await;
    let owner = login(&app).await;
    let owner_csrf = csrf(&app, &owner).await;
    let (gone, gone_cookie) = login_as_named(&app, Access::Researcher).await;
    let (reset, reset_cookie) = login_as_named(&app, Access::Observer).await;

    let res = post(
        &app,
        "/researcher/accounts/remove",
        &owner,
        &format!("csrf={owner_csrf}&name={gone}"),
    )
    .await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert!(
        !live(&app, &gone_cookie).await,
        "a removed account's login ends"
    );
    assert_eq!(
        try_login(&app, "127.0.0.1", &gone, "password-1")
            .await
            .status,
        401
    );
    let list = get(&app, "/researcher/accounts", &owner).await;
    assert!(!list.body.contains(&format!("data-account=\"{gone}\"")));
    assert!(list.body.contains(&format!("data-account=\"{reset}\"")));

    // The owner resets a password: a new one is shown once, the old logins end.
    let res = post(
        &app,
        "/researcher/accounts/password",
        &owner,
        &format!("csrf={owner_csrf}&name={reset}"),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(!live(&app, &reset_cookie).await);
    let marker = "<code id=\"password\">";
    let at = res.body.find(marker).expect("the new password is shown") + marker.len();
    let new_pw = res.body[at..]
        .split('<')
        .next()
        .unwrap_or_default()
        .to_string();
    let fresh = login_with(&app, &reset, &new_pw).await;

    // One's own password: the old one must be right; afterwards only this browser is logged in.
    let elsewhere = login_with(&app, &reset, &new_pw).await;
    let token = csrf(&app, &fresh).await;
    let wrong = post(
        &app,
        "/researcher/account/password",
        &fresh,
        &format!("csrf={token}&old=nope&new=another-password"),
    )
    .await;
    assert_eq!(wrong.status, 400);
    assert!(
        live(&app, &elsewhere).await,
        "a refused change ends nothing"
    );
    let short = post(
        &app,
        "/researcher/account/password",
        &fresh,
        &format!("csrf={token}&old={}&new=short", urlencoding(&new_pw)),
    )
    .await;
    assert_eq!(short.status, 400, "a too short password is refused");
    let done = post(
        &app,
        "/researcher/account/password",
        &fresh,
        &format!(
            "csrf={token}&old={}&new=another-password",
            urlencoding(&new_pw)
        ),
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let renewed = cookie_of(&done);
    assert!(!live(&app, &elsewhere).await, "other logins end");
    assert!(!live(&app, &fresh).await, "the old cookie ends");
    assert!(live(&app, &renewed).await, "this browser got a new login");
    login_with(&app, &reset, "another-password").await;
}

#[tokio::test]
async fn the_last_owner_stays() {
    let app = spawn_app(Tiny::default()).await;
    let owner = login(&app).await;
    let token = csrf(&app, &owner).await;
    let res = post(
        &app,
        "/researcher/accounts/remove",
        &owner,
        &format!("csrf={token}&name=admin"),
    )
    .await;
    assert_eq!(res.status, 400, "{}", res.body);
    assert!(live(&app, &owner).await);
    assert!(
        app.store
            .account_by_name("admin")
            .await
            .expect("read")
            .is_some()
    );
}

#[tokio::test]
async fn failed_logins_are_limited_per_address_and_per_name_across_a_restart() {
    let tiny = Tiny::default();
    let mut app = spawn_app(tiny.clone()).await;
    login(&app).await;
    let limit = auth::FAILED_LOGIN_LIMIT;

    // Per name: failures against admin from one address...
    for i in 0..limit {
        let res = try_login(&app, "127.0.0.2", "admin", &format!("wrong-{i}")).await;
        assert_eq!(res.status, 401, "attempt {i}");
    }
    // ...then admin is refused from anywhere, even with the right password.
    for from in ["127.0.0.2", "127.0.0.3"] {
        let res = try_login(&app, from, "admin", "letmein").await;
        assert_eq!(res.status, 429, "admin from {from}");
        let retry: u64 = res
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .expect("Retry-After in seconds");
        assert!(
            (1..=auth::FAILED_LOGIN_WINDOW_MS / 1000).contains(&retry),
            "{retry}"
        );
    }
    // Another name from a fresh address is not limited.
    let (name, _) = login_as_named(&app, Access::Observer).await;
    assert_eq!(
        try_login(&app, "127.0.0.3", &name, "nope").await.status,
        401
    );
    assert_eq!(
        try_login(&app, "127.0.0.3", &name, "password-1")
            .await
            .status,
        303
    );

    // Per address: failures against different names from one address...
    for i in 0..limit {
        let res = try_login(&app, "127.0.0.4", &format!("nobody-{i}"), "wrong").await;
        assert_eq!(res.status, 401, "attempt {i}");
    }
    // ...then that address is refused for any name, even with the right password.
    assert_eq!(
        try_login(&app, "127.0.0.4", &name, "password-1")
            .await
            .status,
        429
    );
    assert_eq!(
        try_login(&app, "127.0.0.5", &name, "password-1")
            .await
            .status,
        303,
        "the same account from another address"
    );

    // The counts are in the store: a restart keeps them.
    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    assert_eq!(
        try_login(&app, "127.0.0.6", "admin", "letmein")
            .await
            .status,
        429
    );
    assert_eq!(
        try_login(&app, "127.0.0.4", &name, "password-1")
            .await
            .status,
        429
    );
    assert_eq!(
        try_login(&app, "127.0.0.6", &name, "password-1")
            .await
            .status,
        303
    );
    app.stop().await;
}

#[tokio::test]
async fn account_posts_need_this_site_and_the_login_csrf_token() {
    let app = spawn_app(Tiny::default()).await;
    let owner = login(&app).await;
    let token = csrf(&app, &owner).await;
    let origin = format!("http://{}", app.addr);
    let add = |name: &str| format!("name={name}&access=observer&password=password-1");
    let cases: [(&str, String, &str); 4] = [
        ("no token", add("a1"), origin.as_str()),
        (
            "forged token",
            format!("csrf=forged&{}", add("a2")),
            origin.as_str(),
        ),
        (
            "another site",
            format!("csrf={token}&{}", add("a3")),
            "http://evil.example",
        ),
        ("no origin", format!("csrf={token}&{}", add("a4")), ""),
    ];
    for (what, body, from) in cases {
        let mut headers = vec![("Cookie", owner.as_str()), FORM];
        if !from.is_empty() {
            headers.push(("Origin", from));
        }
        let res = http_from(
            app.addr,
            "127.0.0.1",
            "POST",
            "/researcher/accounts/add",
            &headers,
            &body,
        )
        .await;
        assert_eq!(res.status, 403, "{what}");
    }
    for name in ["a1", "a2", "a3", "a4"] {
        assert!(
            app.store
                .account_by_name(name)
                .await
                .expect("read")
                .is_none(),
            "{name} was created"
        );
    }
    // The same with the token from this site works; the login page refuses another site.
    let res = post(
        &app,
        "/researcher/accounts/add",
        &owner,
        &format!("csrf={token}&{}", add("a5")),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let created = app.store.account_by_name("a5").await.expect("read");
    assert_eq!(created.map(|a| a.access), Some("observer".to_string()));
    let evil = http_from(
        app.addr,
        "127.0.0.1",
        "POST",
        "/researcher/login",
        &[("Origin", "http://evil.example"), FORM],
        "name=admin&password=letmein",
    )
    .await;
    assert_eq!(evil.status, 403);
    // Someone else's token does not do either.
    let other = login_as(&app, Access::Owner).await;
    let res = post(
        &app,
        "/researcher/accounts/add",
        &other,
        &format!("csrf={token}&{}", add("a6")),
    )
    .await;
    assert_eq!(res.status, 403);
}

#[tokio::test]
async fn observers_and_researchers_cannot_change_accounts() {
    let app = spawn_app(Tiny::default()).await;
    login(&app).await;
    let (target, target_cookie) = login_as_named(&app, Access::Observer).await;
    for access in [Access::Observer, Access::Researcher] {
        let cookie = login_as(&app, access).await;
        let token = csrf(&app, &cookie).await;
        assert_eq!(
            get(&app, "/researcher/accounts", &cookie).await.status,
            403,
            "{access:?} opens the accounts list"
        );
        for (path, body) in [
            (
                "/researcher/accounts/add",
                "name=x1&access=owner&password=password-1",
            ),
            (
                "/researcher/accounts/remove",
                &format!("name={target}") as &str,
            ),
            ("/researcher/accounts/password", &format!("name={target}")),
        ] {
            let res = post(&app, path, &cookie, &format!("csrf={token}&{body}")).await;
            assert_eq!(res.status, 403, "{access:?} POST {path}");
        }
        // Their own page works.
        let page = get(&app, "/researcher/account", &cookie).await;
        assert!(page.body.contains(access.as_str()));
        assert!(
            !page.body.contains("/researcher/accounts\""),
            "no link to the list"
        );
    }
    assert!(
        app.store
            .account_by_name("x1")
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        live(&app, &target_cookie).await,
        "nothing happened to the target"
    );
}

#[tokio::test]
async fn first_start_makes_admin_from_the_old_password_or_a_new_one() {
    let app = spawn_app(Tiny::default()).await;
    // The single password of earlier versions becomes admin's.
    let old = auth::hash_password("old-password").await.expect("hash");
    app.store
        .set_meta("researcher_password_argon2", &old)
        .await
        .expect("meta");
    assert_eq!(
        auth::ensure_password(app.store.as_ref(), None)
            .await
            .expect("ensure"),
        None
    );
    let admin = app.store.account_by_name("admin").await.expect("read");
    assert_eq!(admin.map(|a| a.access), Some("owner".to_string()));
    let cookie = login_with(&app, "admin", "old-password").await;

    // The environment variable sets admin's password and ends its logins.
    auth::ensure_password(app.store.as_ref(), Some("from-env-1"))
        .await
        .expect("env");
    assert!(!live(&app, &cookie).await);
    let cookie = login_with(&app, "admin", "from-env-1").await;
    // The same value again changes nothing.
    auth::ensure_password(app.store.as_ref(), Some("from-env-1"))
        .await
        .expect("env");
    assert!(live(&app, &cookie).await);

    // A store without accounts nor old password: admin with a password shown once.
    let fresh = spawn_app(Tiny::default()).await;
    let pw = auth::ensure_password(fresh.store.as_ref(), None)
        .await
        .expect("ensure")
        .expect("a generated password");
    assert_eq!(
        auth::ensure_password(fresh.store.as_ref(), None)
            .await
            .expect("again"),
        None,
        "shown only once"
    );
    login_with(&fresh, "admin", &pw).await;
}

#[tokio::test]
async fn the_login_page_asks_for_name_and_password() {
    let app = spawn_app(Tiny::default()).await;
    let page = http_from(
        app.addr,
        "127.0.0.1",
        "GET",
        "/researcher/login?next=/researcher/account",
        &[],
        "",
    )
    .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("name=\"name\""));
    assert!(page.body.contains("name=\"password\""));
    // The account field starts empty (typing a name must not append to a default), with
    // `admin` only as a placeholder.
    let field = name_field(&page.body);
    assert!(field.contains("value=\"\""), "{field}");
    assert!(field.contains("placeholder=\"admin\""), "{field}");
    // Right after a login, the pages that check it synchronously know it.
    let cookie = login(&app).await;
    let res = get(&app, "/try", &cookie).await;
    assert_eq!(res.status, 200, "{}", res.body);
    // A wrong name says so without telling which part was wrong.
    let res = try_login(&app, "127.0.0.7", "nobody", "letmein").await;
    assert_eq!(res.status, 401);
    assert!(res.body.contains("Wrong account name or password"));
    // The page shown again keeps the name that was typed (escaped), not `admin`.
    let res = try_login(&app, "127.0.0.8", " <nobody> ", "letmein").await;
    assert_eq!(res.status, 401);
    let field = name_field(&res.body);
    assert!(field.contains("value=\"&lt;nobody&gt;\""), "{field}");
    // A form without a name field (the login form of earlier versions) logs in as admin;
    // failing that way shows an empty field, as nothing was typed.
    let origin = format!("http://{}", app.addr);
    let no_name = |from: &'static str, password: &'static str| {
        let origin = origin.clone();
        let addr = app.addr;
        async move {
            http_from(
                addr,
                from,
                "POST",
                "/researcher/login",
                &[("Origin", &origin), FORM],
                &format!("password={password}&next=/researcher"),
            )
            .await
        }
    };
    let res = no_name("127.0.0.9", "letmein").await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert!(res.header("set-cookie").is_some_and(|c| !c.is_empty()));
    let res = no_name("127.0.0.10", "wrong").await;
    assert_eq!(res.status, 401);
    assert!(name_field(&res.body).contains("value=\"\""));
}

/// The login page's account input element.
fn name_field(body: &str) -> String {
    let start = body.find("id=\"name\"").expect("the account field");
    let from = body[..start].rfind('<').expect("its tag");
    let end = body[start..].find('>').map_or(body.len(), |e| start + e);
    body[from..=end.min(body.len() - 1)].to_string()
}
