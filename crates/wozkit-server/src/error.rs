//! Errors: what can stop the server from starting, and what a request can fail with. An HTTP
//! error becomes a short page that says what was wrong and what to do; internal details (database
//! messages) go to the log, never to the client.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use wozkit_store::StoreError;

use crate::http::html;

/// Why the server could not start (or stopped with an error).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no study to serve")]
    NoStudy,
    #[error("two studies have the id `{0}`; give each study its own id")]
    DuplicateStudy(String),
    /// An evaluation's dialogues could not be read from the store.
    #[error("study `{study}`: {message}")]
    Evaluation { study: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("server I/O error: {0}")]
    Io(#[source] std::io::Error),
}

/// What a request failed with.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("not found")]
    NotFound,
    /// No valid participant or researcher cookie.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// A state-changing request from another site, or a page the participant may not use now.
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    BadRequest(String),
    /// The request cannot be done as things stand (a seat held by someone else).
    #[error("{0}")]
    Conflict(&'static str),
    /// Too many entry links from one address; try again after this many seconds.
    #[error("too many requests; retry after {retry_after_s} s")]
    TooManyRequests { retry_after_s: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let (status, message) = match &self {
            HttpError::NotFound => (
                StatusCode::NOT_FOUND,
                "This page does not exist.".to_string(),
            ),
            HttpError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, (*m).to_string()),
            HttpError::Forbidden(m) => (StatusCode::FORBIDDEN, (*m).to_string()),
            HttpError::BadRequest(m) => (StatusCode::BAD_REQUEST, m.clone()),
            HttpError::Conflict(m) => (StatusCode::CONFLICT, (*m).to_string()),
            HttpError::TooManyRequests { retry_after_s } => (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "Too many entry links were opened from your network in a short time. \
                     Please wait {retry_after_s} seconds, then open your link again: \
                     nothing is lost meanwhile."
                ),
            ),
            HttpError::Store(e) => {
                tracing::error!("store error: {e}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The server could not save or read your data. Please try again in a moment."
                        .to_string(),
                )
            }
        };
        let body = format!(
            "<main class=\"narrow\"><h1>{}</h1><p id=\"error-message\">{}</p></main>",
            status.canonical_reason().unwrap_or("Error"),
            html::esc(&message)
        );
        let mut res = (status, Html(html::layout("wozkit", &body, &[]))).into_response();
        if let HttpError::TooManyRequests { retry_after_s } = self {
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
        }
        res
    }
}
