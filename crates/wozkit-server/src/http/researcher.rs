//! Researcher pages: login, the list of sessions (live and finished, with the waiting queues) and
//! a read-only live view of one session's events. Server-rendered, refreshed by the browser.

use std::time::Duration;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::header::{LOCATION, RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use wozkit_core::event::{Actor, Event, EventKind};
use wozkit_store::{SessionFilter, SessionRecord};

use super::extract::{Observing, ResearcherForm, ResearcherPage};
use super::html::{esc, layout, query_escape};
use crate::app::{AppState, now_ms};
use crate::auth::{ADMIN, LoginOutcome, Researcher, log_in};
use crate::error::HttpError;
use crate::security::{RESEARCHER_COOKIE, cookie, origin_ok, set_cookie};

/// Sessions shown on the list (the newest).
const LIST_LIMIT: u32 = 200;

/// The researcher logged in on this request, if any.
pub async fn researcher(app: &AppState, headers: &HeaderMap) -> Option<Researcher> {
    let token = cookie(headers, RESEARCHER_COOKIE)?;
    app.researchers.get(app.store.as_ref(), &token).await
}

/// The hidden form field carrying the login's CSRF token; every researcher form includes it.
pub fn csrf_field(r: &Researcher) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&r.csrf)
    )
}

/// Redirect to the login page, coming back to `next` afterwards.
pub fn to_login(next: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(
            LOCATION,
            format!("/researcher/login?next={}", query_escape(next)),
        )],
    )
        .into_response()
}

/// Only local paths, so the login cannot be turned into a redirect to another site.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_string(),
        _ => "/researcher".to_string(),
    }
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// The login page. `name` fills the account field (empty on a first visit, so what is typed is
/// not appended to a default; after a failed login, the name that was typed).
fn login_page(next: &str, name: &str, problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| {
            format!(
                "<p class=\"problem\" role=\"alert\" id=\"login-problem\">{}</p>",
                esc(p)
            )
        })
        .unwrap_or_default();
    let body = format!(
        "<main class=\"narrow\"><h1>Researcher login</h1>{problem}\
         <form method=\"post\" action=\"/researcher/login\"><input type=\"hidden\" name=\"next\" value=\"{}\">\
         <label>Account <input type=\"text\" name=\"name\" id=\"name\" value=\"{}\" placeholder=\"admin\" autocomplete=\"username\" autocapitalize=\"none\" spellcheck=\"false\" required autofocus></label>\
         <label>Password <input type=\"password\" name=\"password\" id=\"password\" autocomplete=\"current-password\" required></label>\
         <button type=\"submit\" id=\"login\" class=\"primary\">Log in</button></form>\
         <p class=\"muted\">The first account is <code>admin</code>: its password was printed when the server first started, or set with WOZKIT_RESEARCHER_PASSWORD. \
         More accounts: <code>wozkit researchers add NAME</code>.</p></main>",
        esc(next),
        esc(name),
    );
    layout("Researcher login", &body, &[])
}

/// `GET /researcher/login`.
pub async fn login_form(Query(q): Query<NextQuery>) -> Response {
    Html(login_page(&safe_next(q.next.as_deref()), "", None)).into_response()
}

#[derive(Deserialize)]
pub struct LoginForm {
    /// The account name; `admin` when absent (the login form of earlier versions had none).
    name: Option<String>,
    password: String,
    next: Option<String>,
}

/// `POST /researcher/login`: name and password. A wrong one is a 401 (and counts against the
/// client address and the name); too many of those a 429 with `Retry-After`.
pub async fn login(
    State(app): State<AppState>,
    client: crate::security::Client,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, HttpError> {
    if !origin_ok(&headers, false) {
        return Err(HttpError::Forbidden(
            "This form must be sent from this site's page.",
        ));
    }
    let next = safe_next(form.next.as_deref());
    // What was typed, shown again after a failed login (empty when the form had no name).
    let typed = form.name.as_deref().map(str::trim).unwrap_or("");
    let name = Some(typed).filter(|n| !n.is_empty()).unwrap_or(ADMIN);
    let address = client.addr.to_string();
    let device = crate::security::cookie(&headers, crate::auth::DEVICE_COOKIE);
    let outcome = log_in(
        app.store.as_ref(),
        &app.researchers,
        &address,
        device.as_deref(),
        name,
        &form.password,
    )
    .await?;
    let token = match outcome {
        LoginOutcome::LoggedIn { token, device } => (token, device),
        LoginOutcome::Wrong => {
            // Slows down guessing; argon2 itself already costs tens of milliseconds.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Ok((
                StatusCode::UNAUTHORIZED,
                Html(login_page(
                    &next,
                    typed,
                    Some("Wrong account name or password."),
                )),
            )
                .into_response());
        }
        LoginOutcome::Limited { retry_after_s } => {
            let minutes = retry_after_s.div_ceil(60);
            let msg = format!(
                "Too many failed logins from here or for this account from a browser it has not logged in from: try again in {minutes} minute(s)."
            );
            return Ok((
                StatusCode::TOO_MANY_REQUESTS,
                [(RETRY_AFTER, retry_after_s.to_string())],
                Html(login_page(&next, typed, Some(&msg))),
            )
                .into_response());
        }
    };
    let (token, device) = token;
    let mut res = (StatusCode::SEE_OTHER, [(LOCATION, next)]).into_response();
    set_login_cookie(&mut res, &headers, &token);
    if let Some(device) = device
        && let Ok(v) = set_cookie(
            &headers,
            crate::auth::DEVICE_COOKIE,
            &device,
            crate::auth::DEVICE_TTL_S,
        )
        .parse()
    {
        res.headers_mut().append(SET_COOKIE, v);
    }
    Ok(res)
}

/// Sets the researcher cookie of a new login on `res`.
pub(crate) fn set_login_cookie(res: &mut Response, headers: &HeaderMap, token: &str) {
    let cookie = set_cookie(
        headers,
        RESEARCHER_COOKIE,
        token,
        crate::auth::LOGIN_TTL_MS / 1000,
    );
    if let Ok(v) = cookie.parse() {
        res.headers_mut().insert(SET_COOKIE, v);
    }
}

/// `POST /researcher/logout`. Origin-checked like every state-changing request, so another
/// site cannot log the researcher out.
pub async fn logout(
    State(app): State<AppState>,
    headers: HeaderMap,
    _: ResearcherForm<Observing, NoFields>,
) -> Result<Response, HttpError> {
    if let Some(t) = cookie(&headers, RESEARCHER_COOKIE) {
        app.researchers.remove(app.store.as_ref(), &t).await?;
    }
    Ok((
        StatusCode::SEE_OTHER,
        [(LOCATION, "/researcher/login".to_string())],
    )
        .into_response())
}

/// A form whose only field is the CSRF token (which [`ResearcherForm`] reads).
#[derive(Deserialize)]
pub struct NoFields {}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of an epoch time in milliseconds.
pub fn fmt_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn status(r: &SessionRecord) -> String {
    match &r.ended {
        None => "<span class=\"live\">live</span>".into(),
        Some(end) => format!("ended: {}", esc(end.reason.as_str())),
    }
}

/// `GET /researcher`: the console's home: one card per study with its live figures and links
/// (`console::overview_html`, kept current by `console.js`), then the waiting room and the
/// sessions, newest first.
pub async fn index(
    State(app): State<AppState>,
    ResearcherPage(me, ..): ResearcherPage,
) -> Result<Response, HttpError> {
    let total = app.store.count_sessions(&SessionFilter::default()).await?;
    let filter = SessionFilter {
        limit: Some(LIST_LIMIT),
        offset: u32::try_from(total.saturating_sub(u64::from(LIST_LIMIT))).unwrap_or(0),
        ..SessionFilter::default()
    };
    let mut sessions = app.store.list_sessions(&filter).await?;
    sessions.reverse();
    let mut rows = String::new();
    for r in &sessions {
        let people: Vec<String> = app
            .store
            .participants_in_session(&r.id)
            .await?
            .iter()
            .map(|p| {
                format!(
                    "{} ({})",
                    p.role.map_or("?", |r| r.as_str()),
                    p.platform.as_str()
                )
            })
            .collect();
        rows.push_str(&format!(
            "<tr><td><a href=\"/researcher/session/{id}\"><code>{id}</code></a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.study_id),
            fmt_time(r.created_at_ms),
            status(r),
            r.last_seq,
            esc(&people.join(", ")),
            id = esc(&r.id),
        ));
    }
    // Every instance's live places, as the console's figures count them.
    let stale = Duration::from_millis(app.tunables.stale_after_ms);
    let queues: String = app
        .lobby
        .waiting(app.store.as_ref(), None, now_ms(), stale)
        .await?
        .iter()
        .map(|q| {
            format!(
                "<li>{}{}: {} user(s), {} wizard(s) waiting</li>",
                esc(&q.key.study),
                q.key
                    .pair
                    .as_ref()
                    .map(|p| format!(" (pair {})", esc(p)))
                    .unwrap_or_default(),
                q.users,
                q.wizards
            )
        })
        .collect();
    let queues = if queues.is_empty() {
        "<li>nobody is waiting</li>".to_string()
    } else {
        queues
    };
    let overview = super::console::overview_html(&app, &me).await?;
    let body = format!(
        "<main><header class=\"bar\"><h1>Console</h1><a href=\"/try\">Try it</a>\
         <form method=\"post\" action=\"/researcher/logout\">{csrf}<button type=\"submit\">Log out</button></form></header>\
         {overview}<h2 id=\"sessions-heading\">Sessions</h2><h3>Waiting room</h3><ul id=\"queues\">{queues}</ul>\
         <p><span id=\"lobby-size\">{}</span> lobby entr(y/ies): places, waiting times kept for a reconnect, places kept at the front.</p>\
         <p>{} room(s) in memory; {total} session(s) in all.</p>\
         <div class=\"table-scroll\"><table id=\"sessions\"><thead><tr><th>session</th><th>study</th><th>created (UTC)</th><th>state</th><th>events</th><th>participants</th></tr></thead>\
         <tbody>{rows}</tbody></table></div></main>",
        app.lobby.size(tokio::time::Instant::now()),
        app.rooms.len(),
        csrf = csrf_field(&me),
    );
    Ok(Html(layout("Console", &body, &["console.js"])).into_response())
}

fn actor(a: &Actor) -> String {
    match a {
        Actor::Participant { role, .. } => role.as_str().to_string(),
        Actor::Bot { role, name } => format!("bot {name} ({})", role.as_str()),
        Actor::System => "system".into(),
    }
}

fn details(e: &Event) -> String {
    match &e.kind {
        EventKind::Message { role, text, source } => {
            let act = source
                .act()
                .map(|(l, t)| format!(" [{l} / {}]", t.as_str()))
                .unwrap_or_else(|| " [free text]".into());
            format!(
                "<strong>{}</strong>: {}<span class=\"muted\">{}</span>",
                role.as_str(),
                esc(text),
                esc(&act)
            )
        }
        other => {
            let mut json = serde_json::to_string(other).unwrap_or_default();
            if json.len() > 400 {
                let cut = (0..=400)
                    .rev()
                    .find(|i| json.is_char_boundary(*i))
                    .unwrap_or(0);
                json.truncate(cut);
                json.push('…');
            }
            format!("<code>{}</code>", esc(&json))
        }
    }
}

fn kind_name(k: &EventKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// `GET /researcher/session/{id}`: the session's events, refreshed while it is live.
pub async fn session(
    State(app): State<AppState>,
    _: ResearcherPage,
    Path(id): Path<String>,
) -> Result<Response, HttpError> {
    let record = app.store.session(&id).await?.ok_or(HttpError::NotFound)?;
    let events = app.store.events(&id, 0).await?;
    let start = events.first().map_or(record.created_at_ms, |e| e.at_ms);
    let rows: String = events
        .iter()
        .map(|e| {
            format!(
                "<tr data-seq=\"{}\"><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                e.seq,
                e.seq,
                e.at_ms.saturating_sub(start) as f64 / 1000.0,
                esc(&actor(&e.actor)),
                esc(&kind_name(&e.kind)),
                details(e)
            )
        })
        .collect();
    let people: String = app
        .store
        .participants_in_session(&id)
        .await?
        .iter()
        .map(|p| {
            format!(
                "<li>{} — {} <code>{}</code>, page {}, code {}</li>",
                p.role.map_or("?", |r| r.as_str()),
                p.platform.as_str(),
                esc(&p.id),
                esc(&p.flow_step),
                esc(p.completion_code.as_deref().unwrap_or("—"))
            )
        })
        .collect();
    let body = format!(
        "<main data-live=\"{}\"><p><a href=\"/researcher\">← sessions</a></p><h1>Session <code>{}</code></h1>\
         <p>study {} (version {}), seed {}, created {} UTC — {}</p><ul>{people}</ul>{}\
         <p><a id=\"replay-link\" data-testid=\"replay-link\" href=\"/researcher/session/{replay}/replay\">Replay step by step</a></p>\
         <table id=\"events\"><thead><tr><th>seq</th><th>s</th><th>actor</th><th>kind</th><th>details</th></tr></thead><tbody>{rows}</tbody></table></main>",
        record.is_live(),
        esc(&record.id),
        esc(&record.study_id),
        esc(&record.study_version),
        record.seed,
        fmt_time(record.created_at_ms),
        status(&record),
        if record.is_live() {
            format!(
                "<p><a id=\"observe-live\" data-testid=\"observe-live\" href=\"/researcher/session/{}/observe\">Observe live</a></p>",
                query_escape(&id)
            )
        } else {
            String::new()
        },
        replay = query_escape(&id),
    );
    Ok(Html(layout("Session", &body, &["refresh.js"])).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_civil_utc() {
        assert_eq!(fmt_time(0), "1970-01-01 00:00:00");
        assert_eq!(fmt_time(1_700_000_000_000), "2023-11-14 22:13:20");
        assert_eq!(fmt_time(951_782_400_000), "2000-02-29 00:00:00");
    }

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/try")), "/try");
        assert_eq!(safe_next(Some("//evil.example")), "/researcher");
        assert_eq!(safe_next(Some("https://evil.example")), "/researcher");
    }
}
