//! The arena leaderboard of a study: `GET /leaderboard/{study}` (a page that redraws itself
//! every few seconds) and `GET /leaderboard/{study}/json`. The numbers are
//! `wozkit_data::leaderboard::study_leaderboard` over the participants' logs, the same function
//! `wozkit report` uses, with the study's `evaluation.leaderboard` settings. A study whose
//! leaderboard is not `public` shows it to logged-in researchers only. It lists every system
//! under test, those without a battle too, and gives a system's bootstrap interval only once it
//! has [`MIN_BATTLES_FOR_INTERVAL`] counted battles ("too few battles" before).
//!
//! A computed leaderboard is kept for [`FRESH`], or until the next battle is judged: the
//! bootstrap of the Bradley-Terry intervals costs a few milliseconds per hundred votes, and many
//! viewers must not multiply that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use wozkit_core::evaluation::EvalTask;
use wozkit_core::load::LoadedStudy;
use wozkit_data::leaderboard::{
    Leaderboard, MIN_BATTLES_FOR_INTERVAL, html_tables, study_leaderboard,
};
use wozkit_data::report::evaluation::RankingOptions;

use super::html::{esc, layout};
use super::researcher::{researcher, to_login};
use crate::app::AppState;
use crate::error::HttpError;

/// How long a computed leaderboard is shown before it is computed again.
pub const FRESH: Duration = Duration::from_secs(2);

/// Leaderboards computed lately, by study id.
#[derive(Default)]
pub struct LeaderboardCache(Mutex<HashMap<String, (Instant, Arc<Leaderboard>)>>);

impl LeaderboardCache {
    /// Forgets the study's leaderboard: a battle was judged, so the next view computes it anew.
    pub fn invalidate(&self, study: &str) {
        if let Ok(mut c) = self.0.lock() {
            c.remove(study);
        }
    }
}

/// The study's arena, if the request may see its leaderboard.
async fn arena(
    app: &AppState,
    headers: &HeaderMap,
    study: &str,
) -> Result<Result<Arc<LoadedStudy>, Response>, HttpError> {
    let s = app.study(Some(study)).ok_or(HttpError::NotFound)?;
    let Some(ev) = s
        .study
        .evaluation
        .as_ref()
        .filter(|e| e.task == EvalTask::Arena)
    else {
        return Err(HttpError::NotFound);
    };
    if !ev.leaderboard.public && researcher(app, headers).await.is_none() {
        return Ok(Err(to_login(&format!("/leaderboard/{study}"))));
    }
    Ok(Ok(s))
}

/// The study's leaderboard, computed at most every [`FRESH`].
pub(crate) async fn board(
    app: &AppState,
    study: &LoadedStudy,
) -> Result<Arc<Leaderboard>, HttpError> {
    let id = &study.study.id;
    if let Some((at, lb)) = app
        .leaderboards
        .0
        .lock()
        .ok()
        .and_then(|c| c.get(id).cloned())
        && at.elapsed() < FRESH
    {
        return Ok(lb);
    }
    let settings = study
        .study
        .evaluation
        .as_ref()
        .map(|e| e.leaderboard.clone())
        .unwrap_or_default();
    let options = RankingOptions::from(&settings);
    let systems = study
        .study
        .evaluation
        .as_ref()
        .map(|e| e.systems.clone())
        .unwrap_or_default();
    let lb = study_leaderboard(app.store.as_ref(), id, options)
        .await?
        .for_systems(&systems, MIN_BATTLES_FOR_INTERVAL);
    let lb = Arc::new(lb);
    if let Ok(mut c) = app.leaderboards.0.lock() {
        c.insert(id.clone(), (Instant::now(), lb.clone()));
    }
    Ok(lb)
}

/// `GET /leaderboard/{study}`.
pub async fn page(
    State(app): State<AppState>,
    Path(study): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let s = match arena(&app, &headers, &study).await? {
        Ok(s) => s,
        Err(r) => return Ok(r),
    };
    let lb = board(&app, &s).await?;
    let body = format!(
        "<main class=\"wide\" data-page=\"leaderboard\" data-live=\"true\"><h1>Leaderboard</h1>\
         <p class=\"muted\">{} · updated every few seconds · \
         <a href=\"/leaderboard/{}/json\">JSON</a></p>{}</main>",
        esc(&s.study.title),
        esc(&s.study.id),
        html_tables(&lb),
    );
    Ok(Html(layout(&s.study.title, &body, &["refresh.js"])).into_response())
}

/// `GET /leaderboard/{study}/json`.
pub async fn json(
    State(app): State<AppState>,
    Path(study): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let s = match arena(&app, &headers, &study).await? {
        Ok(s) => s,
        Err(r) => return Ok(r),
    };
    let lb = board(&app, &s).await?;
    Ok(Json(lb.as_ref().clone()).into_response())
}
