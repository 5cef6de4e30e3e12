//! `wozkit researchers add|list|remove|passwd` as a user runs it: on a data directory alone,
//! and beside a running `wozkit serve` on the same directory, where an account added from the
//! terminal logs in at once and a removal ends its login at once.

use crate::common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Server, wozkit};

/// Runs `wozkit researchers ARGS --data DATA` with `stdin` on standard input.
fn researchers(data: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .arg("researchers")
        .args(args)
        .args(["--data", data])
        .env_remove("WOZKIT_DATA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wozkit runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wozkit ends");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The password printed after "(shown once, stored hashed): ".
fn shown_password(out: &str) -> String {
    out.lines()
        .find_map(|l| l.split_once("(shown once, stored hashed): "))
        .map(|(_, pw)| pw.trim().to_string())
        .unwrap_or_else(|| panic!("no password printed: {out}"))
}

/// A raw HTTP request: (status, head, body).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

/// Logs in; returns the cookie (`wozkit_researcher=...`) or the status when refused.
fn log_in(addr: SocketAddr, name: &str, password: &str) -> Result<String, u16> {
    let origin = format!("http://{addr}");
    let (status, out) = http(
        addr,
        "POST",
        "/researcher/login",
        &[
            ("Origin", &origin),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &format!("name={name}&password={password}"),
    );
    if status != 303 {
        return Err(status);
    }
    Ok(out
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .expect("a cookie")
        .to_string())
}

fn logged_in(addr: SocketAddr, cookie: &str) -> bool {
    http(addr, "GET", "/researcher", &[("Cookie", cookie)], "").0 == 200
}

#[test]
fn add_list_passwd_remove_on_a_data_directory() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let data = tmp.path().join("data").display().to_string();

    let (code, out, err) = researchers(&data, &["add", "bea", "--access", "observer"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("added bea (observer)"), "{out}");
    let generated = shown_password(&out);
    assert_eq!(generated.len(), 20, "{generated}");

    let (code, out, err) = researchers(
        &data,
        &["add", "carl", "--access", "owner", "--password-stdin"],
        "carl-password\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("shown once"),
        "a given password is not printed: {out}"
    );

    let (code, _, err) = researchers(&data, &["add", "bea"], "");
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");
    let (code, _, err) = researchers(&data, &["add", "no spaces"], "");
    assert_eq!(code, 1);
    assert!(err.contains("invalid account name"), "{err}");
    let (code, _, err) = researchers(&data, &["add", "dan", "--password-stdin"], "short\n");
    assert_eq!(code, 1);
    assert!(
        err.contains("at least") || err.contains("characters"),
        "{err}"
    );

    let (code, out, _) = researchers(&data, &["list"], "");
    assert_eq!(code, 0);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(&rows[0][..2], ["bea", "observer"]);
    assert_eq!(&rows[1][..2], ["carl", "owner"]);

    let (code, out, err) = researchers(
        &data,
        &["passwd", "bea", "--password-stdin"],
        "bea-password\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("logins ended"), "{out}");
    let (code, out, _) = researchers(&data, &["passwd", "bea"], "");
    assert_eq!(code, 0);
    assert_ne!(shown_password(&out), "bea-password");

    let (code, _, err) = researchers(&data, &["remove", "carl"], "");
    assert_eq!(code, 1, "the last owner stays");
    assert!(err.contains("last owner"), "{err}");
    let (code, _, err) = researchers(&data, &["remove", "nobody"], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("no researcher account named \"nobody\""),
        "{err}"
    );
    let (code, _, err) = researchers(&data, &["remove", "bea"], "");
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = researchers(&data, &["list"], "");
    assert!(!out.contains("bea"), "{out}");
    assert!(out.contains("carl"), "{out}");
}

#[test]
fn accounts_change_beside_a_running_server() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let mut server = Server::in_dir("restaurant-booking", tmp.path());
    server.start();
    let data = server.data.display().to_string();
    let log = server.log_text();
    assert!(
        log.contains("researcher account admin, password (shown once, stored hashed): "),
        "{log}"
    );
    let admin_pw = shown_password(&log);
    log_in(server.addr, "admin", &admin_pw).expect("admin logs in");

    let (code, _, err) = researchers(
        &data,
        &["add", "eve", "--access", "researcher", "--password-stdin"],
        "eve-password\n",
    );
    assert_eq!(code, 0, "add beside the server: {err}");
    let cookie = log_in(server.addr, "eve", "eve-password").expect("eve logs in at once");
    assert!(logged_in(server.addr, &cookie));

    let (code, _, err) = researchers(
        &data,
        &["passwd", "eve", "--password-stdin"],
        "eve-password-2\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        !logged_in(server.addr, &cookie),
        "the new password ended the login"
    );
    assert_eq!(log_in(server.addr, "eve", "eve-password"), Err(401));
    let cookie = log_in(server.addr, "eve", "eve-password-2").expect("the new password works");

    let (code, out, _) = researchers(&data, &["list"], "");
    assert_eq!(code, 0);
    assert!(out.contains("admin") && out.contains("eve"), "{out}");

    let (code, _, err) = researchers(&data, &["remove", "eve"], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        !logged_in(server.addr, &cookie),
        "the removal ended the login"
    );
    // The server still writes its own data afterwards.
    assert!(
        server.stop(),
        "the server stops cleanly: {}",
        server.log_text()
    );
    let (code, _, err) = wozkit(&[
        "export",
        "--format",
        "jsonl",
        "--data",
        &data,
        "--out",
        &tmp.path().join("x.jsonl").display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
}
