//! Shared HTTP plumbing: building the `reqwest` client, POSTing JSON, turning failures into
//! [`SystemError`]s with any API key redacted.

use std::error::Error as _;

use crate::SystemError;

/// Longest piece of an error body quoted in an error message.
const BODY_SNIPPET: usize = 300;

/// Builds an HTTP client with rustls on the `ring` provider.
pub(crate) fn http_client(system: &str) -> Result<reqwest::Client, SystemError> {
    // Process-wide default; a provider installed earlier (by us or the program) is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .build()
        .map_err(|e| SystemError::Config {
            system: system.to_string(),
            detail: format!("cannot build the HTTP client: {}", chain(&e)),
        })
}

/// Names the system and hides the API key in every message built from network data.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) system: String,
    pub(crate) api_key: Option<String>,
}

impl Ctx {
    /// Removes the API key from `text`.
    pub(crate) fn redact(&self, text: &str) -> String {
        match &self.api_key {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_string(),
        }
    }

    /// An error from the HTTP client.
    pub(crate) fn transport(&self, e: &reqwest::Error) -> SystemError {
        let detail = self.redact(&chain(e));
        if e.is_decode() {
            SystemError::BadResponse {
                system: self.system.clone(),
                detail,
            }
        } else {
            SystemError::Connection {
                system: self.system.clone(),
                detail,
            }
        }
    }

    /// A 2xx body that is not what the protocol says.
    pub(crate) fn bad(&self, detail: impl AsRef<str>) -> SystemError {
        SystemError::BadResponse {
            system: self.system.clone(),
            detail: self.redact(detail.as_ref()),
        }
    }

    /// POSTs `body` (with the bearer key, if any) and returns the response if its status is 2xx.
    pub(crate) async fn post(
        &self,
        http: &reqwest::Client,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<reqwest::Response, SystemError> {
        let mut request = http.post(url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let snippet: String = text.chars().take(BODY_SNIPPET).collect();
        Err(SystemError::Status {
            system: self.system.clone(),
            status: status.as_u16(),
            detail: self.redact(snippet.trim()),
        })
    }
}

/// An error and its causes, joined by ": " (reqwest's own message names only the URL).
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
