//! Errors: [`LoadgenError`] stops a run before it starts (bad target, too few file descriptors,
//! no server); [`Failure`] is one participant's setback during a run, counted by its code in
//! the report and never fatal to the run.

use std::fmt;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    #[error("`{url}`: {reason}")]
    BadUrl { url: String, reason: &'static str },
    #[error(
        "{needed} sockets are needed but the open-file limit is {limit}; raise it (ulimit -n) or use fewer participants"
    )]
    TooFewFds { needed: u64, limit: u64 },
    #[error("cannot raise the open-file limit: {0}")]
    FdLimit(#[source] std::io::Error),
    #[error("no wozkit server answers at {url} (GET /healthz): {reason}")]
    NoServer { url: String, reason: String },
    #[error("{0}")]
    BadConfig(&'static str),
}

/// A participant's setback: `code` is what the report counts (a server error code such as
/// `not_offered`, or one of the load generator's own: `connect`, `http_status`, `timeout`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: String,
    pub detail: String,
}

impl Failure {
    pub fn new(code: impl Into<String>, detail: impl Into<String>) -> Failure {
        Failure {
            code: code.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}
