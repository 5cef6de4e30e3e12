//! Who is asking, as axum extractors: a handler names what it needs in its arguments and never
//! checks access by hand (the habit of realworld-axum-sqlx's `http/extractor.rs`).
//!
//! | extractor | what it guarantees | refusal |
//! |---|---|---|
//! | [`SameSite`] (a layer on the participant routes) | a state-changing request was sent from this site's page | 403, in the participant's language |
//! | [`Asking`] | the participant of the request's cookie (or `?seat=`), their study and role | 401 |
//! | [`ResearcherPage<N>`] | a logged-in researcher with at least access `N` | the login page coming back here, or 403 |
//! | [`ResearcherApi<N>`] | the same, for a script | 401 or 403 |
//! | [`ResearcherForm<N, T>`] | a researcher's form from this site's page, carrying the login's CSRF token, with at least access `N`; the form read as `T` | 403 (400 when the form cannot be read) |
//! | [`WsAsking`] | who opens the WebSocket: a participant (from a page of this site, or none), or with `?observe=` a researcher who may observe (from this site's page) | 403, then 401 or 403 |
//!
//! `docs/access-matrix.md` is the table of who may use which route; `tests/api/access_matrix.rs`
//! walks it.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::Method;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_store::Participant;

use super::entry::current_participant;
use super::researcher::{researcher, to_login};
use crate::app::AppState;
use crate::auth::{Access, Researcher};
use crate::error::{HttpError, NO_PARTICIPATION, OTHER_SITE};
use crate::security::{constant_time_eq, origin_ok, parse_seat};

/// The `?seat=` of a participant's request (two participants of a pair in one browser: the
/// researcher's "try it" link).
#[derive(Deserialize)]
struct SeatQuery {
    seat: Option<String>,
}

/// The request's seat, if it names a valid one.
fn seat_of(parts: &Parts) -> Option<String> {
    Query::<SeatQuery>::try_from_uri(&parts.uri)
        .ok()
        .and_then(|Query(q)| q.seat.as_deref().and_then(parse_seat))
}

/// The participant asking: who they are, their study, their role and the seat they asked as.
#[derive(Clone)]
pub struct Asking {
    pub p: Participant,
    pub study: Arc<LoadedStudy>,
    pub role: Role,
    pub seat: Option<String>,
}

impl Asking {
    async fn of(parts: &Parts, app: &AppState) -> Result<Asking, HttpError> {
        let seat = seat_of(parts);
        let p = current_participant(app, &parts.headers, seat.as_deref())
            .await?
            .ok_or(HttpError::Unauthorized(NO_PARTICIPATION))?;
        let study = app.study(Some(&p.study_id)).ok_or(HttpError::NotFound)?;
        let role = p.role.unwrap_or(Role::User);
        Ok(Asking {
            p,
            study,
            role,
            seat,
        })
    }
}

impl FromRequestParts<AppState> for Asking {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, HttpError> {
        Asking::of(parts, app).await
    }
}

/// A state-changing request (anything but `GET` and `HEAD`) sent from this site's page (its
/// `Origin`); a request without one, or from another site, is refused, in the language of the
/// participant's study when the browser is a participant's. Applied as a layer to every
/// participant route (`from_extractor_with_state`), so no participant form can forget it.
pub struct SameSite;

impl FromRequestParts<AppState> for SameSite {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, HttpError> {
        if parts.method == Method::GET
            || parts.method == Method::HEAD
            || origin_ok(&parts.headers, false)
        {
            return Ok(SameSite);
        }
        let lang = match Asking::of(parts, app).await {
            Ok(a) => a.study.study.language,
            Err(_) => Default::default(),
        };
        Err(HttpError::Forbidden(OTHER_SITE).in_language(lang))
    }
}

/// The least access a researcher route needs, as a type: [`Observing`], [`Running`] or
/// [`Owning`].
pub trait Need: Send + Sync + 'static {
    const ACCESS: Access;
}

/// Reads everything ([`Access::Observer`]).
pub struct Observing;
/// Runs studies: takes over rooms, reviews, pays ([`Access::Researcher`]).
pub struct Running;
/// Everything, accounts included ([`Access::Owner`]).
pub struct Owning;

impl Need for Observing {
    const ACCESS: Access = Access::Observer;
}
impl Need for Running {
    const ACCESS: Access = Access::Researcher;
}
impl Need for Owning {
    const ACCESS: Access = Access::Owner;
}

/// A researcher's page (a `GET`): the researcher logged in with at least `N`. Without a login
/// the browser goes to the login page, coming back to this page (path and query) afterwards.
pub struct ResearcherPage<N: Need = Observing>(pub Researcher, pub PhantomData<N>);

impl<N: Need> FromRequestParts<AppState> for ResearcherPage<N> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Response> {
        match researcher(app, &parts.headers).await {
            None => {
                let next = parts
                    .uri
                    .path_and_query()
                    .map_or(parts.uri.path(), |pq| pq.as_str());
                Err(to_login(next))
            }
            Some(r) if !r.may(N::ACCESS) => Err(HttpError::Forbidden(
                "Your researcher account may not open this page.",
            )
            .into_response()),
            Some(r) => Ok(ResearcherPage(r, PhantomData)),
        }
    }
}

/// What a script of the console fetches (JSON) needs: a researcher with at least `N`; 401
/// without a login (no redirect a script could not follow), 403 below `N`.
pub struct ResearcherApi<N: Need = Observing>(PhantomData<N>);

impl<N: Need> FromRequestParts<AppState> for ResearcherApi<N> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, HttpError> {
        match researcher(app, &parts.headers).await {
            None => Err(HttpError::Unauthorized("Log in as a researcher first.")),
            Some(r) if !r.may(N::ACCESS) => Err(HttpError::Forbidden(
                "Your researcher account may not do this.",
            )),
            Some(_) => Ok(ResearcherApi(PhantomData)),
        }
    }
}

/// The CSRF token of a researcher's form, whatever else it holds.
#[derive(Deserialize)]
struct CsrfField {
    csrf: Option<String>,
}

/// A state-changing researcher request (a `POST`): sent from this site's page (`Origin`), by a
/// logged-in researcher, carrying the login's CSRF token (the `X-CSRF-Token` header, else the
/// form's hidden `csrf` field), with at least `N`; and the form, read as `T` (a struct, or
/// `Vec<(String, String)>` for every field in order). The checks run in that order, so a forged
/// or foreign request learns nothing from how its form would have been read.
pub struct ResearcherForm<N: Need, T>(pub Researcher, pub T, pub PhantomData<N>);

impl<N: Need, T: DeserializeOwned + Send> FromRequest<AppState> for ResearcherForm<N, T> {
    type Rejection = Response;

    async fn from_request(req: Request, app: &AppState) -> Result<Self, Response> {
        let forbidden = |why: &'static str| HttpError::Forbidden(why).into_response();
        if !origin_ok(req.headers(), false) {
            return Err(forbidden(OTHER_SITE));
        }
        let r = researcher(app, req.headers())
            .await
            .ok_or_else(|| forbidden("Log in as a researcher first."))?;
        let header = req
            .headers()
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = Bytes::from_request(req, app)
            .await
            .map_err(IntoResponse::into_response)?;
        let sent = match header {
            Some(h) => h,
            None => serde_urlencoded::from_bytes::<CsrfField>(&body)
                .ok()
                .and_then(|f| f.csrf)
                .unwrap_or_default(),
        };
        if sent.is_empty() || !constant_time_eq(sent.as_bytes(), r.csrf.as_bytes()) {
            return Err(forbidden(
                "This form is out of date (its security token does not match your login): reload the page and try again.",
            ));
        }
        if !r.may(N::ACCESS) {
            return Err(forbidden("Your researcher account may not do this."));
        }
        let form = serde_urlencoded::from_bytes::<T>(&body).map_err(|e| {
            HttpError::BadRequest(format!("The form could not be read: {e}.")).into_response()
        })?;
        Ok(ResearcherForm(r, form, PhantomData))
    }
}

/// The query of `GET /ws`.
#[derive(Deserialize)]
struct WsQuery {
    seat: Option<String>,
    /// A session to observe (a researcher's read-only connection).
    observe: Option<String>,
}

/// Who opens the WebSocket (`GET /ws`), checked in the access matrix's order: a page of another
/// site is refused first (a participant's socket may come without an `Origin`, a researcher's
/// may not); then, with `?observe=SESSION`, a logged-in researcher who may observe, else the
/// participant of the cookie (or `?seat=`).
pub enum WsAsking {
    Participant {
        p: Box<Participant>,
        seat: Option<String>,
    },
    Observer {
        session: String,
    },
}

impl FromRequestParts<AppState> for WsAsking {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Response> {
        use axum::http::StatusCode;
        let refuse = |status: StatusCode, why: &'static str| (status, why).into_response();
        if !origin_ok(&parts.headers, true) {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "WebSocket from another site refused",
            ));
        }
        let Query(q) =
            Query::<WsQuery>::try_from_uri(&parts.uri).map_err(IntoResponse::into_response)?;
        if let Some(session) = q.observe {
            if !origin_ok(&parts.headers, false) {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    "observing needs a WebSocket from this site's page",
                ));
            }
            return match researcher(app, &parts.headers).await {
                Some(r) if r.may(Access::Observer) => Ok(WsAsking::Observer { session }),
                Some(_) => Err(refuse(
                    StatusCode::FORBIDDEN,
                    "this account may not observe sessions",
                )),
                None => Err(refuse(
                    StatusCode::UNAUTHORIZED,
                    "log in as a researcher to observe a session",
                )),
            };
        }
        let seat = q.seat.as_deref().and_then(parse_seat);
        match current_participant(app, &parts.headers, seat.as_deref()).await {
            Ok(Some(p)) => Ok(WsAsking::Participant {
                p: Box::new(p),
                seat,
            }),
            Ok(None) => Err(refuse(
                StatusCode::UNAUTHORIZED,
                "no participant cookie: open the entry link first",
            )),
            Err(e) => {
                tracing::error!("store error on WebSocket handshake: {e}");
                Err(StatusCode::INTERNAL_SERVER_ERROR.into_response())
            }
        }
    }
}
