//! Observing a live room (both sides as they happen, read-only) and taking over as its wizard.

use axum::Router;

use crate::app::AppState;

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
