//! The `http` kind: a dialogue system behind a small JSON webhook.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::spec::HttpSpec;
use crate::transport::{Ctx, http_client};
use crate::{Reply, System, SystemError, Turn};

/// A system reached by POSTing the dialogue so far to a URL.
///
/// Request (`Content-Type: application/json`), turns oldest first, roles from the system's point
/// of view (`assistant` turns are the system's own earlier replies):
///
/// ```json
/// {"system": "my-bot", "dialogue_id": "d-42",
///  "turns": [{"role": "user", "text": "Hi"},
///            {"role": "assistant", "text": "Hello! Where to?"},
///            {"role": "user", "text": "Lisbon"}]}
/// ```
///
/// Reply: status 200 with `{"reply": "Lisbon is lovely in May."}`. Other fields are ignored. A 4xx
/// status is final (not retried); a 5xx status, a timeout or a broken connection is retried within
/// the system's limits.
pub struct WebhookSystem {
    url: String,
    ctx: Ctx,
    http: reqwest::Client,
}

#[derive(Serialize)]
struct WebhookRequest<'a> {
    system: &'a str,
    dialogue_id: &'a str,
    turns: &'a [Turn],
}

#[derive(Deserialize)]
struct WebhookReply {
    reply: String,
}

impl WebhookSystem {
    /// The webhook system `name` at `spec.url`.
    pub fn new(name: &str, spec: &HttpSpec) -> Result<Self, SystemError> {
        Ok(WebhookSystem {
            url: spec.url.clone(),
            ctx: Ctx {
                system: name.to_string(),
                api_key: None,
            },
            http: http_client(name)?,
        })
    }
}

#[async_trait]
impl System for WebhookSystem {
    async fn reply(&self, dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError> {
        let body = WebhookRequest {
            system: &self.ctx.system,
            dialogue_id,
            turns: history,
        };
        let body = serde_json::to_value(&body).expect("a webhook request is always JSON");
        let response = self.ctx.post(&self.http, &self.url, &body).await?;
        let bytes = response.bytes().await.map_err(|e| self.ctx.transport(&e))?;
        let parsed: WebhookReply = serde_json::from_slice(&bytes).map_err(|e| {
            self.ctx
                .bad(format!("expected {{\"reply\": \"...\"}}: {e}"))
        })?;
        Ok(Reply { text: parsed.reply })
    }
}
