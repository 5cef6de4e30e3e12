//! Clients for dialogue systems under test.
//!
//! A study compares dialogue systems, declared by a [`SystemSpec`] of one of four kinds:
//!
//! - `openai` ([`OpenAiSystem`]): an OpenAI-compatible `/v1/chat/completions` endpoint (vLLM,
//!   llama.cpp, Ollama, TGI all serve one), whole or streamed;
//! - `http` ([`WebhookSystem`]): a small JSON webhook, the dialogue so far POSTed and the reply in
//!   the response;
//! - `websocket` ([`WebsocketSystem`]): a system that keeps a WebSocket connection open, answers
//!   the turns of all dialogues over it (streamed or whole) and may speak unprompted
//!   ([`Unprompted`]); the protocol is in [`websocket`];
//! - `builtin` ([`BuiltinSystem`]): a scripted bot inside wozkit, keyword rules and fallbacks with
//!   a think time and a typing speed, so built-in studies need no setup.
//!
//! All speak through the [`System`] trait, and a [`Client`] keeps a slow or broken system from
//! harming a study.
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
//! # HTTP and WebSocket
//!
//! Requests go through `reqwest` without default features (JSON, streaming bodies, rustls with the
//! `ring` provider: no aws-lc, no cmake, no OpenSSL). WebSocket connections go through
//! `tokio-tungstenite`, with the same rustls for `wss://` (the platform's root certificates).

pub mod builtin;
pub mod client;
pub mod error;
pub mod judge;
pub mod openai;
mod transport;
pub mod webhook;
pub mod websocket;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};

pub use builtin::BuiltinSystem;
pub use client::Client;
pub use error::SystemError;
pub use openai::OpenAiSystem;
pub use webhook::WebhookSystem;
pub use websocket::WebsocketSystem;
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

/// Something a system said without being asked (a WebSocket system's `say` frame). The server
/// shows it in the dialogue as the system's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unprompted {
    /// The dialogue the system spoke into.
    pub dialogue_id: String,
    /// What it said.
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

    /// A receiver of what the system says without being asked, for systems that can (those that
    /// keep a connection open); `None` for the others.
    fn subscribe_unprompted(&self) -> Option<broadcast::Receiver<Unprompted>> {
        None
    }

    /// Opens the system's long-lived connection now rather than at the first call, so that it
    /// can speak before it is first asked. Does nothing for request/response systems.
    async fn connect(&self) -> Result<(), SystemError> {
        Ok(())
    }
}
