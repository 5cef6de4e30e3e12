//! Reviewing and paying a study's participants: flags, approve, reject, bonus, block, notes, in bulk on a filter; each decision an event; payment through the crowd platforms.

use axum::Router;

use crate::app::AppState;

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
