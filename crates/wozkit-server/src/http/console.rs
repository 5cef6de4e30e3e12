//! The researcher console's home: every study's live figures (waiting per role, rooms, finished, abandoned, screened out, codes, spend against the budget, median duration) pushed as server-sent events, and downloads of every export and the HTML report.

use axum::Router;

use crate::app::AppState;

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
