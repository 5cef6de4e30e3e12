//! Files: the participant pages' scripts and styles (embedded in the binary) and a study's media.
//! Only media files the study declares are served, read through the study source, which refuses
//! absolute paths and `..`; SVGs get a policy that keeps any script in them from running.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use rust_embed::Embed;

use crate::app::AppState;
use crate::error::HttpError;

#[derive(Embed)]
#[folder = "assets/"]
struct Assets;

fn content_type(name: &str) -> &'static str {
    match name
        .rsplit('.')
        .next()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("gif") => "image/gif",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("webp") => "image/webp",
        Some("svg") => "image/svg+xml",
        Some("mp4") => "video/mp4",
        Some("webm") => "video/webm",
        _ => "application/octet-stream",
    }
}

/// `GET /assets/{file}`.
pub async fn asset(Path(file): Path<String>) -> Result<Response, HttpError> {
    let f = Assets::get(&file).ok_or(HttpError::NotFound)?;
    Ok((
        [
            (CONTENT_TYPE, content_type(&file)),
            (CACHE_CONTROL, "no-cache"),
        ],
        f.data.into_owned(),
    )
        .into_response())
}

/// `GET /study/{study}/{*file}`: a media file of the study, e.g. `/study/offshore-emergency/media/alarm.gif`.
pub async fn media(
    State(app): State<AppState>,
    Path((study, file)): Path<(String, String)>,
) -> Result<Response, HttpError> {
    let study = app.study(Some(&study)).ok_or(HttpError::NotFound)?;
    let declared = study.study.media.values().any(|m| m.file == file);
    if !declared {
        return Err(HttpError::NotFound);
    }
    let bytes = study.source.read(&file).ok_or(HttpError::NotFound)?;
    Ok((
        StatusCode::OK,
        [
            (CONTENT_TYPE, content_type(&file)),
            (CACHE_CONTROL, "public, max-age=3600"),
            (
                CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
            ),
        ],
        bytes,
    )
        .into_response())
}
