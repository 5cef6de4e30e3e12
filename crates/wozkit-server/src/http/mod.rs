//! The HTTP routes. Each module owns its handlers; this one assembles the router and the
//! response headers every page gets (a Content-Security-Policy without inline scripts, no
//! sniffing, no referrer to other sites, and frames: participant pages may be shown in MTurk's
//! worker sites and the `--frame-ancestors` sites, every other page only in this site).
//!
//! | route | module |
//! |---|---|
//! | `GET /`, `GET /join` | [`entry`] |
//! | `GET /p`, `POST /p/next` | [`pages`] |
//! | `POST /p/survey` | [`survey`] |
//! | `POST /p/answers`, `/p/onboarding`, `/p/judge`, `/p/skip` | [`judge`] |
//! | `/p/chat/…` (chat and arena pages) | [`chat`] |
//! | `/p/desk/…` (the wizards' desk for `human` systems) | [`desk`] |
//! | `/p/self-dialog/…`, `/p/spans/…` (self-dialogs and span annotation) | [`self_dialog`] |
//! | `/p/acts/submit` (dialogue-act annotation of turns) | [`turn_acts`] |
//! | `GET /leaderboard/{study}`, `GET /leaderboard/{study}/json` | [`leaderboard`] |
//! | `GET /ws` | `crate::ws` |
//! | `GET /assets/{file}`, `GET /study/{study}/{*file}` | [`static_files`] |
//! | `GET /try` | [`try_it`] |
//! | `/researcher`, login, logout, `/researcher/session/{id}` | [`researcher`] |
//! | the console's live figures and downloads | [`console`] |
//! | observing and taking over live rooms | [`observe`] |
//! | replaying finished sessions | [`replay`] |
//! | reviewing and paying participants | [`review`] |
//! | researcher accounts | [`accounts`] |
//! | `GET /healthz` | here |
//! | `GET /metrics` (with a token), and the count of every response | `crate::metrics` |

pub mod accounts;
pub mod chat;
pub mod console;
pub mod desk;
pub mod entry;
pub mod extract;
pub mod html;
pub mod judge;
pub mod leaderboard;
pub mod observe;
pub mod pages;
pub mod platform_return;
pub mod questions;
pub mod replay;
pub mod researcher;
pub mod review;
pub mod room_page;
pub mod self_dialog;
pub mod static_files;
pub mod survey;
pub mod try_it;
pub mod turn_acts;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::header::{
    CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};

use crate::app::AppState;
use crate::ws;

/// Largest request body (forms): 64 KiB.
const MAX_BODY: usize = 64 * 1024;

const CSP: &str = "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; frame-ancestors 'self'; form-action 'self' https:; base-uri 'none'; object-src 'none'";

/// The sites MTurk shows an ExternalQuestion in (production and sandbox worker sites).
pub const MTURK_FRAMERS: [&str; 2] = [
    "https://worker.mturk.com",
    "https://workersandbox.mturk.com",
];

/// Whether `path` is a participant's page (or what such a page loads), which a crowd platform
/// may show in its frame.
fn participant_path(path: &str) -> bool {
    path == "/join"
        || path == "/p"
        || path.starts_with("/p/")
        || path.starts_with("/assets/")
        || path.starts_with("/study/")
}

/// The Content-Security-Policy of participant pages: framed by MTurk and the configured sites,
/// which may also receive the page's forms (MTurk's externalSubmit is on `https:` already).
pub fn participant_csp(frame_ancestors: &[String]) -> String {
    let framers: Vec<&str> = MTURK_FRAMERS
        .iter()
        .copied()
        .chain(frame_ancestors.iter().map(String::as_str))
        .collect();
    let extra: Vec<&str> = frame_ancestors.iter().map(String::as_str).collect();
    format!(
        "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; \
         connect-src 'self'; frame-ancestors 'self' {}; form-action 'self' https:{}{}; \
         base-uri 'none'; object-src 'none'",
        framers.join(" "),
        if extra.is_empty() { "" } else { " " },
        extra.join(" ")
    )
}

/// The security headers of every response. Participant pages may be framed by the crowd
/// platforms (CSP `frame-ancestors`; no `X-Frame-Options`, which cannot name other sites);
/// every other page only by this site. The referrer never leaves the site, so a participant
/// URL carrying its token (a page in a frame) is not sent to anyone else.
async fn headers(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let participant = participant_path(req.uri().path());
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    if !h.contains_key(CONTENT_SECURITY_POLICY) {
        let csp = if participant {
            HeaderValue::from_str(&participant_csp(&app.tunables.frame_ancestors))
                .unwrap_or(HeaderValue::from_static(CSP))
        } else {
            HeaderValue::from_static(CSP)
        };
        h.insert(CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if !participant {
        h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("SAMEORIGIN"));
    }
    h.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    res
}

/// The participants' routes (`/p` and below). A state-changing request among them must come
/// from this site's page: [`extract::SameSite`] guards the whole scope, so no form can forget it;
/// each handler then names the participant it needs ([`extract::Asking`]).
fn participant_routes(app: &AppState) -> Router<AppState> {
    Router::new()
        .route("/p", get(pages::current))
        .route("/p/next", post(pages::next))
        .route("/p/survey", post(survey::submit))
        .route("/p/answers", post(judge::answers))
        .route("/p/onboarding", post(judge::onboarding))
        .route("/p/judge", post(judge::judge))
        .route("/p/skip", post(judge::skip))
        .route("/p/chat/send", post(chat::send))
        .route("/p/chat/retry", post(chat::retry))
        .route("/p/chat/end", post(chat::end))
        .route("/p/chat/finish", post(chat::finish))
        .route("/p/chat/reveal", get(chat::reveal))
        .route("/p/desk/poll", get(desk::poll))
        .route("/p/desk/reply", post(desk::reply))
        .route("/p/desk/leave", post(desk::leave))
        .merge(self_dialog::participant_routes())
        .merge(turn_acts::routes())
        .route_layer(axum::middleware::from_extractor_with_state::<
            extract::SameSite,
            AppState,
        >(app.clone()))
}

pub fn router(app: AppState) -> Router {
    Router::new()
        .route("/", get(entry::landing))
        .route("/join", get(entry::join))
        .merge(participant_routes(&app))
        .route("/leaderboard/{study}", get(leaderboard::page))
        .route("/leaderboard/{study}/json", get(leaderboard::json))
        .route("/ws", get(ws::upgrade))
        .route("/assets/{file}", get(static_files::asset))
        .route("/study/{study}/{*file}", get(static_files::media))
        .route("/try", get(try_it::page))
        .route("/researcher", get(researcher::index))
        .route(
            "/researcher/login",
            get(researcher::login_form).post(researcher::login),
        )
        .route("/researcher/logout", post(researcher::logout))
        .route("/researcher/session/{id}", get(researcher::session))
        .route("/healthz", get(|| async { "ok" }))
        .merge(console::routes())
        .merge(observe::routes())
        .merge(replay::routes())
        .merge(review::routes())
        .merge(accounts::routes())
        .merge(self_dialog::researcher_routes())
        .merge(crate::metrics::routes())
        // An explicit fallback, so unknown paths pass through the layers below (security
        // headers, response counting) even after the server merges its internal relay route,
        // which stays outside them: a merged router would otherwise answer them unlayered.
        .fallback(|| async { axum::http::StatusCode::NOT_FOUND })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(crate::error::asked_language))
        .layer(axum::middleware::from_fn_with_state(app.clone(), headers))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::metrics::count_responses,
        ))
        // Outermost: who the client is, before anything reads an address or a scheme.
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::security::client_layer,
        ))
        .with_state(app)
}
