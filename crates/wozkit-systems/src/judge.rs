//! A model judge's endpoint: one prompt to an OpenAI-compatible `/chat/completions`, the reply's
//! text and the tokens it used (`usage.total_tokens`), with a timeout per attempt and retries
//! with exponential backoff on timeouts, connection errors and 5xx (never on 4xx).
//!
//! It is not a [`Client`](crate::Client): a judge is asked by a batch command, not a live study,
//! so it needs no circuit breaker, but the token count matters (the command's budget).

use std::time::Duration;

use serde_json::{Value, json};

use crate::SystemError;
use crate::transport::{Ctx, http_client};

/// An OpenAI-compatible endpoint asked as a judge.
pub struct JudgeEndpoint {
    url: String,
    model: String,
    ctx: Ctx,
    http: reqwest::Client,
    /// Per attempt.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
    /// The first wait between attempts; doubled each time.
    pub backoff: Duration,
}

/// A judge's reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeReply {
    pub text: String,
    /// `usage.total_tokens`, or an estimate (4 characters a token) when the endpoint gives none.
    pub tokens: u64,
}

impl JudgeEndpoint {
    /// The judge `name` at `base_url` (`…/v1`) asking `model`; `api_key` is sent as a bearer token.
    pub fn new(
        name: &str,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
    ) -> Result<JudgeEndpoint, SystemError> {
        Ok(JudgeEndpoint {
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: model.to_string(),
            ctx: Ctx {
                system: name.to_string(),
                api_key,
            },
            http: http_client(name)?,
            timeout: Duration::from_secs(60),
            retries: 3,
            backoff: Duration::from_millis(500),
        })
    }

    /// Asks `prompt` (one user message, temperature 0), retrying what may succeed.
    pub async fn ask(&self, prompt: &str) -> Result<JudgeReply, SystemError> {
        let mut wait = self.backoff;
        let mut attempt = 0;
        loop {
            match self.attempt(prompt).await {
                Err(e) if e.is_retryable() && attempt < self.retries => {
                    attempt += 1;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, prompt: &str) -> Result<JudgeReply, SystemError> {
        let body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "stream": false,
        });
        let call = async {
            let response = self.ctx.post(&self.http, &self.url, &body).await?;
            response
                .json::<Value>()
                .await
                .map_err(|e| self.ctx.transport(&e))
        };
        let value = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| SystemError::Timeout {
                system: self.ctx.system.clone(),
                seconds: self.timeout.as_secs_f64(),
            })??;
        let text = value["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| self.ctx.bad("no `choices[0].message.content` in the reply"))?
            .to_string();
        let tokens = value["usage"]["total_tokens"]
            .as_u64()
            .unwrap_or(((prompt.len() + text.len()) / 4) as u64);
        Ok(JudgeReply { text, tokens })
    }
}
