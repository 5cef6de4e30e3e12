//! The `openai` kind: an OpenAI-compatible `/v1/chat/completions` endpoint, whole or streamed.

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::spec::OpenAiSpec;
use crate::transport::{Ctx, http_client};
use crate::{Reply, Role, System, SystemError, Turn};

/// A system behind an OpenAI-compatible chat completions endpoint.
///
/// Sends `{"model", "messages": [system prompt?, ...turns], "stream", ...params}` to
/// `{base_url}/chat/completions`, with `Authorization: Bearer KEY` when the spec names a key
/// variable. A whole reply is read from `choices[0].message.content`; a streamed one from the
/// server-sent events' `data:` lines (`choices[0].delta.content`), which must end with
/// `data: [DONE]`: a stream that stops before it is an error.
pub struct OpenAiSystem {
    url: String,
    spec: OpenAiSpec,
    ctx: Ctx,
    http: reqwest::Client,
}

impl OpenAiSystem {
    /// The system `name` declared by `spec`; reads the API key from the environment now.
    pub fn new(name: &str, spec: &OpenAiSpec) -> Result<Self, SystemError> {
        let api_key = match &spec.api_key_env {
            None => None,
            Some(var) => Some(std::env::var(var).map_err(|_| SystemError::Config {
                system: name.to_string(),
                detail: format!("environment variable `{var}` (api_key_env) is not set"),
            })?),
        };
        Ok(OpenAiSystem {
            url: format!("{}/chat/completions", spec.base_url.trim_end_matches('/')),
            spec: spec.clone(),
            ctx: Ctx {
                system: name.to_string(),
                api_key,
            },
            http: http_client(name)?,
        })
    }

    /// The request body.
    fn body(&self, history: &[Turn], stream: bool) -> Value {
        let mut messages = Vec::with_capacity(history.len() + 1);
        if let Some(prompt) = &self.spec.system_prompt {
            messages.push(json!({"role": "system", "content": prompt}));
        }
        for turn in history {
            let role = match turn.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            messages.push(json!({"role": role, "content": turn.text}));
        }
        let mut body: serde_json::Map<String, Value> = self
            .spec
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        body.insert("model".into(), json!(self.spec.model));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), json!(stream));
        Value::Object(body)
    }

    /// Reads the streamed reply, forwarding each delta.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        deltas: mpsc::Sender<String>,
    ) -> Result<Reply, SystemError> {
        let mut bytes = response.bytes_stream();
        let mut pending: Vec<u8> = Vec::new();
        let mut text = String::new();
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|e| self.ctx.transport(&e))?;
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8(line)
                    .map_err(|_| self.ctx.bad("stream line is not UTF-8"))?;
                match self.parse_line(line.trim_end_matches(['\n', '\r']))? {
                    Event::Done => return Ok(Reply { text }),
                    Event::Delta(delta) => {
                        text.push_str(&delta);
                        let _ = deltas.send(delta).await;
                    }
                    Event::Nothing => {}
                }
            }
        }
        Err(self.ctx.bad(format!(
            "stream ended before `data: [DONE]` after {} characters",
            text.len()
        )))
    }

    /// One server-sent events line.
    fn parse_line(&self, line: &str) -> Result<Event, SystemError> {
        let Some(data) = line.strip_prefix("data:") else {
            return Ok(Event::Nothing); // blank separator, comment, `event:` or `id:` line
        };
        let data = data.trim_start();
        if data == "[DONE]" {
            return Ok(Event::Done);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| self.ctx.bad(format!("stream event is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error") {
            return Err(self.ctx.bad(format!("stream reported an error: {error}")));
        }
        match chunk.pointer("/choices/0/delta/content") {
            Some(Value::String(s)) if !s.is_empty() => Ok(Event::Delta(s.clone())),
            _ => Ok(Event::Nothing), // role-only or finish chunks
        }
    }
}

enum Event {
    Delta(String),
    Done,
    Nothing,
}

#[async_trait]
impl System for OpenAiSystem {
    async fn reply(&self, _dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError> {
        let response = self
            .ctx
            .post(&self.http, &self.url, &self.body(history, false))
            .await?;
        let bytes = response.bytes().await.map_err(|e| self.ctx.transport(&e))?;
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| self.ctx.bad(format!("body is not JSON: {e}")))?;
        match body.pointer("/choices/0/message/content") {
            Some(Value::String(s)) => Ok(Reply { text: s.clone() }),
            _ => Err(self
                .ctx
                .bad("no `choices[0].message.content` string in the body")),
        }
    }

    async fn reply_stream(
        &self,
        dialogue_id: &str,
        history: &[Turn],
        deltas: mpsc::Sender<String>,
    ) -> Result<Reply, SystemError> {
        if !self.spec.stream {
            let reply = self.reply(dialogue_id, history).await?;
            let _ = deltas.send(reply.text.clone()).await;
            return Ok(reply);
        }
        let response = self
            .ctx
            .post(&self.http, &self.url, &self.body(history, true))
            .await?;
        self.read_stream(response, deltas).await
    }
}
