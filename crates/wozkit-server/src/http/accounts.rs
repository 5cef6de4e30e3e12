//! Researcher accounts from the browser: one's own password and logins; the owner's list of accounts.

use axum::Router;

use crate::app::AppState;

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
