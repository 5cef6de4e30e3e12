//! Errors: what can stop the server from starting, and what a request can fail with. An HTTP
//! error becomes a short page that says what was wrong and what to do; internal details (database
//! messages) go to the log, never to the client.
//!
//! The page is in the study's language where the participant's study is known
//! ([`HttpError::in_language`]); elsewhere (a link to no study, a page of no participation) in
//! the language the browser asks for first among the catalogues' (`Accept-Language`, through
//! [`asked_language`]), English by default. Its title and the participant-facing sentences of
//! [`CATALOGUED`] come from that language's catalogue (`error-*`); other sentences (a
//! researcher's, a malformed link's) stay as written.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use wozkit_core::language::Language;
use wozkit_store::StoreError;

use crate::http::html;
use crate::i18n::words;

/// A form posted from another site's page.
pub const OTHER_SITE: &str = "This form must be sent from this site's page.";
/// A participant's page opened in a browser that has no participation.
pub const NO_PARTICIPATION: &str =
    "Open the link you were given to take part: this browser has no participation in this study.";
/// A worker id that started the study elsewhere.
pub const SEAT_TAKEN: &str = "This worker id has already started this study in another browser or \
     assignment. Please continue in the browser and from the link you started with; if that is \
     not possible, contact the researcher.";
/// A blocklisted worker at entry.
pub const BLOCKLISTED: &str =
    "This study is not open to your worker id. Thank you for your interest.";
/// An entry link that raced another and lost.
pub const OPEN_AGAIN: &str = "please open the link again";

/// The participant-facing sentences of errors and their catalogue keys (the English catalogue
/// reads the same; a unit test checks it).
pub const CATALOGUED: [(&str, &str); 5] = [
    (OTHER_SITE, "error-other-site"),
    (NO_PARTICIPATION, "error-no-participation"),
    (SEAT_TAKEN, "error-seat-taken"),
    (BLOCKLISTED, "error-blocklisted"),
    (OPEN_AGAIN, "error-open-again"),
];

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
    /// An error whose page is in a study's language.
    #[error("{1}")]
    InLanguage(Language, Box<HttpError>),
}

impl HttpError {
    /// This error with its page in `lang` (the participant's study's language).
    pub fn in_language(self, lang: Language) -> HttpError {
        match self {
            HttpError::InLanguage(_, inner) => HttpError::InLanguage(lang, inner),
            other => HttpError::InLanguage(lang, Box::new(other)),
        }
    }
}

tokio::task_local! {
    /// The language the request's browser asks for (see [`asked_language`]).
    static ASKED: Language;
}

/// Middleware: the language of the catalogues the browser asks for first (`Accept-Language`),
/// for the error pages of requests whose study is not known.
pub async fn asked_language(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let lang = req
        .headers()
        .get(axum::http::header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .map_or(Language::En, preferred_language);
    ASKED.scope(lang, next.run(req)).await
}

/// The first language of an `Accept-Language` value (by its `q` weights, then its order) that
/// a catalogue speaks: any `zh` is Simplified Chinese, the only Chinese catalogue; English when
/// none is.
pub fn preferred_language(accept: &str) -> Language {
    let mut asked: Vec<(f32, usize, &str)> = accept
        .split(',')
        .enumerate()
        .filter_map(|(i, part)| {
            let mut bits = part.split(';');
            let tag = bits.next()?.trim();
            let q = bits
                .filter_map(|b| b.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (q > 0.0 && !tag.is_empty()).then_some((q, i, tag))
        })
        .collect();
    asked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    asked
        .iter()
        .find_map(|(_, _, tag)| {
            let primary = tag.split('-').next().unwrap_or("").to_ascii_lowercase();
            match primary.as_str() {
                "zh" => Some(Language::ZhHans),
                "en" => Some(Language::En),
                _ => None,
            }
        })
        .unwrap_or(Language::En)
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let (lang, error) = match self {
            HttpError::InLanguage(lang, inner) => (lang, *inner),
            other => (ASKED.try_with(|l| *l).unwrap_or(Language::En), other),
        };
        let w = words(lang);
        // A sentence of the catalogue in the page's language; any other as written.
        let said = |m: &str| {
            CATALOGUED
                .iter()
                .find(|(en, _)| *en == m)
                .map_or_else(|| m.to_string(), |(_, key)| w.get(key))
        };
        let (status, message) = match &error {
            HttpError::NotFound => (StatusCode::NOT_FOUND, w.get("error-not-found")),
            HttpError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, said(m)),
            HttpError::Forbidden(m) => (StatusCode::FORBIDDEN, said(m)),
            HttpError::BadRequest(m) => (StatusCode::BAD_REQUEST, said(m)),
            HttpError::Conflict(m) => (StatusCode::CONFLICT, said(m)),
            HttpError::TooManyRequests { retry_after_s } => (
                StatusCode::TOO_MANY_REQUESTS,
                w.with("error-too-many", &[("seconds", &retry_after_s.to_string())]),
            ),
            HttpError::Store(e) => {
                tracing::error!("store error: {e}");
                (StatusCode::INTERNAL_SERVER_ERROR, w.get("error-store"))
            }
            // Unwrapped above; one nested twice reads as the server's error.
            HttpError::InLanguage(..) => (StatusCode::INTERNAL_SERVER_ERROR, w.get("error-store")),
        };
        let body = format!(
            "<main class=\"narrow\"><h1>{}</h1><p id=\"error-message\">{}</p></main>",
            html::esc(&w.get(title_key(status))),
            html::esc(&message)
        );
        let page = html::layout_in(lang, "wozkit", "", &body, &[]);
        let mut res = (status, Html(page)).into_response();
        if let HttpError::TooManyRequests { retry_after_s } = error {
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
        }
        res
    }
}

/// The catalogue key of an error page's title (in English, the status's reason phrase).
fn title_key(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "error-title-bad-request",
        StatusCode::UNAUTHORIZED => "error-title-unauthorized",
        StatusCode::FORBIDDEN => "error-title-forbidden",
        StatusCode::NOT_FOUND => "error-title-not-found",
        StatusCode::CONFLICT => "error-title-conflict",
        StatusCode::TOO_MANY_REQUESTS => "error-title-too-many",
        _ => "error-title-server",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_english_catalogue_reads_as_the_errors_are_written() {
        let en = words(Language::En);
        for (english, key) in CATALOGUED {
            assert_eq!(en.get(key), english, "{key}");
        }
        for status in [
            StatusCode::BAD_REQUEST,
            StatusCode::UNAUTHORIZED,
            StatusCode::FORBIDDEN,
            StatusCode::NOT_FOUND,
            StatusCode::CONFLICT,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::INTERNAL_SERVER_ERROR,
        ] {
            assert_eq!(
                Some(en.get(title_key(status)).as_str()),
                status.canonical_reason(),
                "{status}"
            );
        }
    }

    #[test]
    fn the_browsers_first_language_with_a_catalogue_is_chosen() {
        let cases = [
            ("zh-CN,zh;q=0.9,en;q=0.8", Language::ZhHans),
            ("zh-TW", Language::ZhHans),
            ("en-US,en;q=0.9", Language::En),
            ("de-DE,de;q=0.9,zh;q=0.8,en;q=0.7", Language::ZhHans),
            ("en;q=0.5, zh-Hans;q=0.8", Language::ZhHans),
            ("zh;q=0, en", Language::En),
            ("fr, de", Language::En),
            ("", Language::En),
            ("*", Language::En),
        ];
        for (accept, lang) in cases {
            assert_eq!(preferred_language(accept), lang, "{accept:?}");
        }
    }

    #[tokio::test]
    async fn an_error_of_no_known_study_speaks_the_browsers_language() {
        let chinese = ASKED
            .scope(Language::ZhHans, async {
                page(HttpError::Forbidden(NO_PARTICIPATION)).await
            })
            .await;
        assert!(chinese.contains("lang=\"zh-Hans\""), "{chinese}");
        assert!(chinese.contains(&words(Language::ZhHans).get("error-no-participation")));
        let in_study = ASKED
            .scope(Language::ZhHans, async {
                page(HttpError::NotFound.in_language(Language::En)).await
            })
            .await;
        assert!(
            in_study.contains("lang=\"en\""),
            "the study's language wins: {in_study}"
        );
        let plain = page(HttpError::NotFound).await;
        assert!(plain.contains("lang=\"en\""), "{plain}");
    }

    async fn page(e: HttpError) -> String {
        let res = e.into_response();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn an_error_in_a_language_reads_in_it() {
        let en = page(HttpError::Forbidden(OTHER_SITE)).await;
        assert!(en.contains("<html lang=\"en\">"), "{en}");
        assert!(en.contains("<h1>Forbidden</h1>"), "{en}");
        assert!(
            en.contains("This form must be sent from this site&#39;s page."),
            "{en}"
        );
        let zh = page(HttpError::Forbidden(OTHER_SITE).in_language(Language::ZhHans)).await;
        assert!(zh.contains("<html lang=\"zh-Hans\">"), "{zh}");
        assert!(zh.contains("此表单必须从本网站的页面提交。"), "{zh}");
        assert!(!zh.contains("Forbidden"), "{zh}");
        let other = page(HttpError::Forbidden("Log in first.").in_language(Language::ZhHans)).await;
        assert!(other.contains("Log in first."), "{other}");
    }
}
