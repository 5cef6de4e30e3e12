//! Researcher accounts from the browser: one's own password and logins; the owner's list of accounts.
//!
//! - `GET /researcher/account` (observer and up): own name and access, the form to change one's
//!   password (with the current one), and "log out everywhere".
//! - `POST /researcher/account/password` (observer and up): `old`, `new`. Ends every login of
//!   the account, then logs this browser in again.
//! - `POST /researcher/account/logout-everywhere` (observer and up): ends every login of the
//!   account, this one included.
//! - `GET /researcher/accounts` (owner): every account, a form to add one, and per account the
//!   buttons to reset its password and remove it.
//! - `POST /researcher/accounts/add` (owner): `name`, `access`, `password` (empty: a generated
//!   one, shown once).
//! - `POST /researcher/accounts/password` (owner): `name`; a generated password, shown once;
//!   the account's logins end.
//! - `POST /researcher/accounts/remove` (owner): `name`; its logins end; the last owner stays.
//!
//! Every POST is a [`ResearcherForm`] (Origin, CSRF token, access level).

use axum::Router;
use axum::extract::State;
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::extract::{Observing, Owning, ResearcherForm, ResearcherPage};
use super::html::{esc, layout};
use super::researcher::{csrf_field, fmt_time, set_login_cookie};
use crate::app::AppState;
use crate::auth::{self, Access, AuthError, Researcher, verify};
use crate::error::HttpError;
use crate::security::{RESEARCHER_COOKIE, cookie};

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/researcher/account", get(account_page))
        .route("/researcher/account/password", post(change_password))
        .route(
            "/researcher/account/logout-everywhere",
            post(logout_everywhere),
        )
        .route("/researcher/accounts", get(accounts_page))
        .route("/researcher/accounts/add", post(add))
        .route("/researcher/accounts/password", post(reset_password))
        .route("/researcher/accounts/remove", post(remove))
}

/// Every field optional, so a request without them still reaches the access checks.
#[derive(Deserialize, Default)]
pub struct AccountForm {
    old: Option<String>,
    new: Option<String>,
    name: Option<String>,
    access: Option<String>,
    password: Option<String>,
}

fn field(v: &Option<String>) -> &str {
    v.as_deref().map(str::trim).unwrap_or("")
}

/// What went wrong with an account change, as a 400 page that says so.
fn refused(e: AuthError) -> HttpError {
    match e {
        AuthError::Store(e) => HttpError::Store(e),
        other => HttpError::BadRequest(other.to_string()),
    }
}

fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_string())]).into_response()
}

fn nav(me: &Researcher) -> String {
    let owners = if me.may(Access::Owner) {
        " · <a href=\"/researcher/accounts\" id=\"accounts-link\">Accounts</a>"
    } else {
        ""
    };
    format!(
        "<p><a href=\"/researcher\">← sessions</a> · <a href=\"/researcher/account\">Your account</a>{owners}</p>"
    )
}

fn notice(text: &str) -> String {
    format!(
        "<p class=\"notice\" role=\"status\" id=\"notice\">{}</p>",
        esc(text)
    )
}

/// `GET /researcher/account`.
async fn account_page(ResearcherPage(me, ..): ResearcherPage) -> Result<Response, HttpError> {
    Ok(Html(own_page(&me, None)).into_response())
}

fn own_page(me: &Researcher, message: Option<&str>) -> String {
    let csrf = csrf_field(me);
    let body = format!(
        "<main class=\"narrow\" data-page=\"account\">{nav}<h1>Your account</h1>{msg}\
         <p>Account <strong id=\"account-name\">{name}</strong>, access <strong id=\"account-access\">{access}</strong>.</p>\
         <h2>Change your password</h2>\
         <form method=\"post\" action=\"/researcher/account/password\" id=\"password-form\">{csrf}\
         <label>Current password <input type=\"password\" name=\"old\" autocomplete=\"current-password\" required></label>\
         <label>New password (at least {min} characters) <input type=\"password\" name=\"new\" autocomplete=\"new-password\" minlength=\"{min}\" required></label>\
         <button type=\"submit\" class=\"primary\">Change password</button></form>\
         <p class=\"muted\">Changing the password logs this account out everywhere else.</p>\
         <h2>Logins</h2>\
         <form method=\"post\" action=\"/researcher/account/logout-everywhere\" id=\"logout-everywhere\">{csrf}\
         <button type=\"submit\">Log out everywhere</button></form>\
         <p class=\"muted\">Ends every login of this account, on every device, this one included. A login lasts 12 hours.</p></main>",
        nav = nav(me),
        msg = message.map(notice).unwrap_or_default(),
        name = esc(&me.name),
        access = me.access.as_str(),
        min = auth::MIN_PASSWORD_LEN,
    );
    layout("Your account", &body, &[])
}

/// `POST /researcher/account/password`.
async fn change_password(
    State(app): State<AppState>,
    headers: HeaderMap,
    ResearcherForm(me, form, ..): ResearcherForm<Observing, AccountForm>,
) -> Result<Response, HttpError> {
    let account = app
        .store
        .account(&me.id)
        .await?
        .ok_or(HttpError::Forbidden("Log in as a researcher first."))?;
    let old = form.old.as_deref().unwrap_or("");
    if old.len() > auth::MAX_PASSWORD_LEN || !verify(&account.password_hash, old).await {
        return Err(HttpError::BadRequest(
            "The current password is wrong; nothing was changed.".into(),
        ));
    }
    let new = form.new.as_deref().unwrap_or("");
    auth::set_password(app.store.as_ref(), &me.name, Some(new))
        .await
        .map_err(refused)?;
    // Every login ended with the change; this browser gets a new one.
    let token = app.researchers.create(app.store.as_ref(), &me.id).await?;
    let mut res = see_other("/researcher/account?changed=password");
    set_login_cookie(&mut res, &headers, &token);
    Ok(res)
}

/// `POST /researcher/account/logout-everywhere`.
async fn logout_everywhere(
    State(app): State<AppState>,
    headers: HeaderMap,
    ResearcherForm(me, ..): ResearcherForm<Observing, super::researcher::NoFields>,
) -> Result<Response, HttpError> {
    app.researchers
        .remove_all(app.store.as_ref(), &me.id)
        .await?;
    if let Some(t) = cookie(&headers, RESEARCHER_COOKIE) {
        app.researchers.remove(app.store.as_ref(), &t).await?;
    }
    Ok(see_other("/researcher/login"))
}

/// `GET /researcher/accounts`.
async fn accounts_page(
    State(app): State<AppState>,
    ResearcherPage(me, ..): ResearcherPage<Owning>,
) -> Result<Response, HttpError> {
    Ok(Html(list_page(&app, &me, None).await?).into_response())
}

async fn list_page(
    app: &AppState,
    me: &Researcher,
    message: Option<String>,
) -> Result<String, HttpError> {
    let csrf = csrf_field(me);
    let rows: String = app
        .store
        .accounts()
        .await?
        .iter()
        .map(|a| {
            format!(
                "<tr data-account=\"{name}\"><td>{name}{you}</td><td>{access}</td><td>{created}</td><td>\
                 <form method=\"post\" action=\"/researcher/accounts/password\">{csrf}<input type=\"hidden\" name=\"name\" value=\"{name}\">\
                 <button type=\"submit\">Reset password</button></form> \
                 <form method=\"post\" action=\"/researcher/accounts/remove\">{csrf}<input type=\"hidden\" name=\"name\" value=\"{name}\">\
                 <button type=\"submit\" class=\"danger\">Remove</button></form></td></tr>",
                name = esc(&a.name),
                you = if a.id == me.id { " (you)" } else { "" },
                access = esc(&a.access),
                created = fmt_time(a.created_at_ms),
            )
        })
        .collect();
    let options: String = Access::ALL
        .iter()
        .map(|a| {
            let selected = if *a == Access::Researcher {
                " selected"
            } else {
                ""
            };
            format!("<option value=\"{0}\"{selected}>{0}</option>", a.as_str())
        })
        .collect();
    let body = format!(
        "<main data-page=\"accounts\">{nav}<h1>Researcher accounts</h1>{msg}\
         <table id=\"accounts\"><thead><tr><th>name</th><th>access</th><th>created (UTC)</th><th></th></tr></thead><tbody>{rows}</tbody></table>\
         <h2>Add an account</h2>\
         <form method=\"post\" action=\"/researcher/accounts/add\" id=\"add-account\">{csrf}\
         <label>Name <input type=\"text\" name=\"name\" required pattern=\"[A-Za-z0-9._\\-]{{1,64}}\" autocapitalize=\"none\"></label>\
         <label>Access <select name=\"access\">{options}</select></label>\
         <label>Password (empty: one is made up and shown once) <input type=\"password\" name=\"password\" autocomplete=\"new-password\"></label>\
         <button type=\"submit\" class=\"primary\">Add</button></form>\
         <p class=\"muted\">owner: everything, accounts included; researcher: runs studies, reviews, pays; observer: reads only. \
         The same from a terminal: <code>wozkit researchers add|list|remove|passwd</code>.</p></main>",
        nav = nav(me),
        msg = message.as_deref().map(notice).unwrap_or_default(),
    );
    Ok(layout("Researcher accounts", &body, &[]))
}

/// A page showing a password once.
async fn with_password(
    app: &AppState,
    me: &Researcher,
    what: &str,
    name: &str,
    pw: Option<String>,
) -> Result<Response, HttpError> {
    let mut page = list_page(app, me, Some(what.to_string())).await?;
    if let Some(pw) = pw {
        let shown = format!(
            "<p class=\"notice\" id=\"new-password\">Password of <strong>{}</strong> (shown once, stored hashed): <code id=\"password\">{}</code></p>",
            esc(name),
            esc(&pw)
        );
        page = page.replacen(
            "<table id=\"accounts\">",
            &format!("{shown}<table id=\"accounts\">"),
            1,
        );
    }
    Ok(Html(page).into_response())
}

/// `POST /researcher/accounts/add`.
async fn add(
    State(app): State<AppState>,
    ResearcherForm(me, form, ..): ResearcherForm<Owning, AccountForm>,
) -> Result<Response, HttpError> {
    let name = field(&form.name);
    let access = Access::parse(field(&form.access)).ok_or_else(|| {
        HttpError::BadRequest("access must be owner, researcher or observer".into())
    })?;
    let password = form.password.as_deref().filter(|p| !p.is_empty());
    let (account, generated) = auth::add_account(app.store.as_ref(), name, access, password)
        .await
        .map_err(refused)?;
    tracing::info!(by = %me.name, account = %account.name, access = %account.access, "researcher account added");
    with_password(
        &app,
        &me,
        &format!("Added {} ({}).", account.name, account.access),
        &account.name,
        generated,
    )
    .await
}

/// `POST /researcher/accounts/password`.
async fn reset_password(
    State(app): State<AppState>,
    ResearcherForm(me, form, ..): ResearcherForm<Owning, AccountForm>,
) -> Result<Response, HttpError> {
    let name = field(&form.name);
    let account = app
        .store
        .account_by_name(name)
        .await?
        .ok_or(HttpError::NotFound)?;
    let pw = auth::set_password(app.store.as_ref(), name, None)
        .await
        .map_err(refused)?;
    tracing::info!(by = %me.name, account = %name, "researcher password reset");
    if account.id == me.id {
        // The reset ended this browser's login too.
        return with_password(
            &app,
            &me,
            "Your password was reset; log in again with it.",
            name,
            pw,
        )
        .await;
    }
    with_password(
        &app,
        &me,
        &format!("New password for {name}; its logins ended."),
        name,
        pw,
    )
    .await
}

/// `POST /researcher/accounts/remove`.
async fn remove(
    State(app): State<AppState>,
    ResearcherForm(me, form, ..): ResearcherForm<Owning, AccountForm>,
) -> Result<Response, HttpError> {
    let name = field(&form.name);
    let removed = match auth::remove_account(app.store.as_ref(), name).await {
        Ok(a) => a,
        Err(AuthError::UnknownAccount(_)) => return Err(HttpError::NotFound),
        Err(e) => return Err(refused(e)),
    };
    tracing::info!(by = %me.name, account = %name, "researcher account removed");
    if removed.id == me.id {
        return Ok(see_other("/researcher/login"));
    }
    Ok(see_other("/researcher/accounts"))
}
