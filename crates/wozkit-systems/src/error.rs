//! Errors of a call to a dialogue system.
//!
//! Messages name the system and say what went wrong; they never hold an API key (the systems redact
//! it from anything that came back from the network before building an error).

/// Why a system gave no reply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SystemError {
    /// No reply within the per-attempt timeout.
    #[error("system `{system}`: no reply within {seconds}s")]
    Timeout {
        /// The system's name.
        system: String,
        /// The timeout that elapsed.
        seconds: f64,
    },
    /// The connection could not be made or broke.
    #[error("system `{system}`: connection failed: {detail}")]
    Connection {
        /// The system's name.
        system: String,
        /// What the HTTP client said.
        detail: String,
    },
    /// The system answered with an HTTP error status.
    #[error("system `{system}`: HTTP status {status}: {detail}")]
    Status {
        /// The system's name.
        system: String,
        /// The status code.
        status: u16,
        /// The start of the response body.
        detail: String,
    },
    /// The system answered 2xx with a body that is not a reply (or a stream that ended early).
    #[error("system `{system}`: bad response: {detail}")]
    BadResponse {
        /// The system's name.
        system: String,
        /// What was wrong with it.
        detail: String,
    },
    /// The circuit breaker has taken the system out of rotation; no request was sent.
    #[error(
        "system `{system}`: out of rotation after repeated failures; next try in {retry_in_s:.1}s"
    )]
    CircuitOpen {
        /// The system's name.
        system: String,
        /// Seconds until the breaker lets a trial call through.
        retry_in_s: f64,
    },
    /// All concurrent slots are busy and the wait queue is full; no request was sent.
    #[error("system `{system}`: busy, {queue} calls already waiting")]
    QueueFull {
        /// The system's name.
        system: String,
        /// The size of the wait queue.
        queue: usize,
    },
    /// The system cannot be set up (bad spec, missing environment variable).
    #[error("system `{system}`: {detail}")]
    Config {
        /// The system's name.
        system: String,
        /// What is wrong.
        detail: String,
    },
}

impl SystemError {
    /// Whether another attempt may succeed: timeouts, connection errors and 5xx; never 4xx.
    pub fn is_retryable(&self) -> bool {
        match self {
            SystemError::Timeout { .. } | SystemError::Connection { .. } => true,
            SystemError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// Whether this error says the system is unhealthy (counts towards opening the circuit).
    pub fn counts_as_failure(&self) -> bool {
        self.is_retryable() || matches!(self, SystemError::BadResponse { .. })
    }
}
