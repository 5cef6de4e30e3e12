//! Replaying a finished session step by step, with the world state at each step.

use axum::Router;

use crate::app::AppState;

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
