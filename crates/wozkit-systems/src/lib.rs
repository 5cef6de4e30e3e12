//! Clients for dialogue systems under test.
//!
//! A study compares dialogue systems that run elsewhere: behind an OpenAI-compatible
//! `/v1/chat/completions` endpoint (vLLM, llama.cpp, Ollama, TGI all serve one) or behind a small JSON
//! webhook. This crate declares them ([`SystemSpec`]), talks to them ([`System`], with
//! [`OpenAiSystem`] and [`WebhookSystem`]) and keeps a slow or broken system from harming a study
//! ([`Client`]).
//!
//! # Limits, retries and the circuit breaker
//!
//! Every system sits behind one [`Client`] holding its concurrency limit (a semaphore with a bounded
//! wait queue), a timeout per attempt, retries with jittered exponential backoff (on timeouts,
//! connection errors and 5xx; never on 4xx) and a circuit breaker (closed → open after K consecutive
//! failed calls → half-open after a cool-down, where one trial call decides).
//!
//! This is hand-written state rather than tower's layers. Tower's `ConcurrencyLimit` has no bounded
//! queue (it needs `Buffer` + `LoadShed` to refuse instead of wait), tower ships no circuit breaker,
//! and its `Retry` knows nothing of streaming, where a failed attempt must not be retried once part
//! of its reply was shown. The whole policy fits in [`client`] and reads top to bottom.
//!
//! # HTTP
//!
//! Requests go through `reqwest` without default features (JSON, streaming bodies, rustls with the
//! `ring` provider: no aws-lc, no cmake, no OpenSSL).

pub mod builtin;
pub mod client;
pub mod error;
pub mod openai;
mod transport;
pub mod webhook;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

pub use builtin::BuiltinSystem;
pub use client::Client;
pub use error::SystemError;
pub use openai::OpenAiSystem;
pub use webhook::WebhookSystem;
/// How a study declares its systems: the spec is study data, so it lives in the core.
pub use wozkit_core::systems as spec;
pub use wozkit_core::systems::{
    BreakerSpec, BuiltinSpec, HttpSpec, Limits, OpenAiSpec, ScriptedReply, SystemSpec,
    WebsocketSpec,
};

/// Who spoke a turn, from the system's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The participant.
    User,
    /// The system itself (its own earlier replies).
    Assistant,
}

/// One turn of the dialogue as a system sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Who spoke.
    pub role: Role,
    /// What was said.
    pub text: String,
}

impl Turn {
    /// A participant's turn.
    pub fn user(text: impl Into<String>) -> Self {
        Turn {
            role: Role::User,
            text: text.into(),
        }
    }

    /// One of the system's own turns.
    pub fn assistant(text: impl Into<String>) -> Self {
        Turn {
            role: Role::Assistant,
            text: text.into(),
        }
    }
}

/// A system's complete reply to one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The reply text.
    pub text: String,
}

/// A dialogue system that answers the dialogue so far.
///
/// Implementations make exactly one attempt per call; limits, retries and the circuit breaker live
/// in [`Client`].
#[async_trait]
pub trait System: Send + Sync {
    /// Asks for the reply to `history` (oldest turn first) in the dialogue `dialogue_id`.
    async fn reply(&self, dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError>;

    /// Like [`System::reply`], sending text deltas on `deltas` as they arrive; the returned reply is
    /// the whole text. The default sends the whole reply as a single delta. A receiver that went
    /// away does not stop the call.
    async fn reply_stream(
        &self,
        dialogue_id: &str,
        history: &[Turn],
        deltas: mpsc::Sender<String>,
    ) -> Result<Reply, SystemError> {
        let reply = self.reply(dialogue_id, history).await?;
        let _ = deltas.send(reply.text.clone()).await;
        Ok(reply)
    }
}
