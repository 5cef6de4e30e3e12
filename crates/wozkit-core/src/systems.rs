//! How a study declares a dialogue system under test: its kind, where it lives and its limits.
//! Study data like the rest of the core; the clients that talk to the systems are in the
//! `wozkit-systems` crate.
//!
//! ```yaml
//! kind: openai
//! base_url: http://gpu-box:8000/v1
//! model: my-model
//! api_key_env: MY_MODEL_KEY      # the name of an environment variable, never the key itself
//! params: { temperature: 0.7, max_tokens: 200 }
//! system_prompt: You are a helpful travel agent.
//! stream: true
//! limits: { timeout_s: 30, retries: 2, concurrency: 8, queue: 64,
//!           breaker: { failures: 5, cooldown_s: 30 } }
//! ```

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One dialogue system under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SystemSpec {
    /// An OpenAI-compatible `/v1/chat/completions` endpoint.
    Openai(OpenAiSpec),
    /// A JSON webhook: the dialogue so far POSTed, the reply in the response (`docs/bots.md`).
    Http(HttpSpec),
    /// A system that keeps a WebSocket connection open (`docs/bots.md`).
    Websocket(WebsocketSpec),
    /// A scripted bot inside wozkit: keyword rules and fallbacks, with a think time and a
    /// typing speed. Needs no setup, so built-in studies run out of the box.
    Builtin(BuiltinSpec),
    /// A person at the desk: a wizard of the study answers each turn by hand, so an arena can
    /// compare people with models. The study's wizard flow needs a `desk` page.
    Human(HumanSpec),
}

/// A system answered by people at the desk (`docs/bots.md`, section `human`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HumanSpec {
    /// Timeout, retries, concurrency and circuit breaker. Without `limits`, a person's own
    /// defaults ([`Limits::human`]): 120 s to type a reply, no retry, 256 turns waiting at once,
    /// a breaker that a few missing wizards do not open. A `limits` given here fills the fields
    /// it leaves out from the general defaults, not from these.
    #[serde(default = "Limits::human")]
    pub limits: Limits,
}

/// A system reached over a WebSocket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebsocketSpec {
    /// `ws://` or `wss://` URL wozkit connects to.
    pub url: String,
    /// Timeout, retries, concurrency and circuit breaker.
    #[serde(default)]
    pub limits: Limits,
}

/// A scripted built-in bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSpec {
    /// Keyword rules, tried in order: the first with a keyword found (case-insensitive, as
    /// whole words: `hi` is not found in "hiking") in the participant's last message gives the
    /// reply.
    #[serde(default)]
    pub replies: Vec<ScriptedReply>,
    /// Replies when no rule matches, taken in turn. At least one.
    pub fallback: Vec<String>,
    /// Milliseconds before the reply starts (think time). At most 60000.
    #[serde(default)]
    pub delay_ms: u64,
    /// Words sent per second when the reply is streamed; 0 sends it whole. At most 1000.
    #[serde(default)]
    pub words_per_s: u32,
    /// Timeout, retries, concurrency and circuit breaker.
    #[serde(default)]
    pub limits: Limits,
}

/// One keyword rule of a scripted bot. In `say`, `{message}` stands for the participant's last
/// message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptedReply {
    /// Keywords (or phrases); any one found in the message as whole words matches.
    pub when: Vec<String>,
    pub say: String,
}

impl BuiltinSpec {
    /// The reply to `message`, the `unmatched`-th message no rule matched so far (from 0)
    /// choosing the fallback.
    pub fn reply_to(&self, message: &str, unmatched: usize) -> (String, bool) {
        let lower = message.to_lowercase();
        let rule = self.replies.iter().find(|r| {
            r.when
                .iter()
                .any(|k| has_whole_word(&lower, &k.trim().to_lowercase()))
        });
        let (text, matched) = match rule {
            Some(r) => (r.say.as_str(), true),
            None => (
                self.fallback
                    .get(unmatched % self.fallback.len().max(1))
                    .map_or("", String::as_str),
                false,
            ),
        };
        (text.replace("{message}", message.trim()), matched)
    }
}

/// Whether `keyword` (lower case, not empty) occurs in `text` (lower case) as whole words: no
/// letter or digit joins it on either side, so `hi` is not found in "hiking". Scripts written
/// without spaces (Chinese, Japanese, Thai) have no word boundaries to check: next to such a
/// character any occurrence counts.
fn has_whole_word(text: &str, keyword: &str) -> bool {
    let (Some(first), Some(last)) = (keyword.chars().next(), keyword.chars().next_back()) else {
        return false;
    };
    let joins = |edge: char, next: Option<char>| {
        next.is_some_and(|c| {
            edge.is_alphanumeric() && c.is_alphanumeric() && !unspaced(edge) && !unspaced(c)
        })
    };
    text.match_indices(keyword).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + keyword.len()..].chars().next();
        !joins(first, before) && !joins(last, after)
    })
}

/// Characters of scripts written without spaces between words.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF // Thai, Lao
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0x20000..=0x2FFFF) // CJK extensions B and later
}

/// An OpenAI-compatible chat completions endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenAiSpec {
    /// The base URL including the version path, e.g. `http://localhost:8000/v1`; requests go to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name sent in each request.
    pub model: String,
    /// The name of the environment variable holding the API key (sent as `Authorization: Bearer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra request fields, e.g. `temperature`, `max_tokens`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_json::Value>,
    /// A system message sent before the dialogue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Whether to ask for a streamed reply (server-sent events) when the caller can show deltas.
    #[serde(default)]
    pub stream: bool,
    /// Timeout, retries, concurrency and circuit breaker.
    #[serde(default)]
    pub limits: Limits,
}

/// A JSON webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// The URL the dialogue is POSTed to.
    pub url: String,
    /// Timeout, retries, concurrency and circuit breaker.
    #[serde(default)]
    pub limits: Limits,
}

/// Per-system limits. Every field has a bounded default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Seconds one attempt may take (for a streamed reply: the whole stream). 0 < t ≤ 600.
    pub timeout_s: f64,
    /// Extra attempts after a timeout, connection error or 5xx (never after a 4xx). At most 10.
    pub retries: u32,
    /// Milliseconds before the first retry; doubled each retry (capped at 10 s), with jitter.
    pub backoff_ms: u64,
    /// Calls in flight at once. 1 to 1024.
    pub concurrency: usize,
    /// Calls that may wait for a free slot; more are refused at once. At most 100000.
    pub queue: usize,
    /// The circuit breaker.
    pub breaker: BreakerSpec,
}

/// When to take a failing system out of rotation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerSpec {
    /// Consecutive failed calls (after their retries) that open the circuit. At least 1.
    pub failures: u32,
    /// Seconds the circuit stays open before one trial call is let through. 0 < t ≤ 3600.
    pub cooldown_s: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_s: 30.0,
            retries: 2,
            backoff_ms: 250,
            concurrency: 8,
            queue: 64,
            breaker: BreakerSpec::default(),
        }
    }
}

impl Limits {
    /// The limits of a `human` system when the study gives none: a person needs time to read
    /// and type (120 s), a timed-out turn is not asked again (the participant may retry), many
    /// participants may wait for the desk at once, and turns failed for want of a wizard do
    /// not take the desk out of rotation once one arrives.
    pub fn human() -> Limits {
        Limits {
            timeout_s: 120.0,
            retries: 0,
            backoff_ms: 0,
            concurrency: 256,
            queue: 64,
            breaker: BreakerSpec {
                failures: 1000,
                cooldown_s: 1.0,
            },
        }
    }
}

impl Default for BreakerSpec {
    fn default() -> Self {
        BreakerSpec {
            failures: 5,
            cooldown_s: 30.0,
        }
    }
}

/// Request fields the client sets itself; `params` may not override them.
const RESERVED_PARAMS: &[&str] = &["model", "messages", "stream"];

impl SystemSpec {
    /// The limits of this system.
    pub fn limits(&self) -> &Limits {
        match self {
            SystemSpec::Openai(s) => &s.limits,
            SystemSpec::Http(s) => &s.limits,
            SystemSpec::Websocket(s) => &s.limits,
            SystemSpec::Builtin(s) => &s.limits,
            SystemSpec::Human(s) => &s.limits,
        }
    }

    /// The kind as written in the study file.
    pub fn kind(&self) -> &'static str {
        match self {
            SystemSpec::Openai(_) => "openai",
            SystemSpec::Http(_) => "http",
            SystemSpec::Websocket(_) => "websocket",
            SystemSpec::Builtin(_) => "builtin",
            SystemSpec::Human(_) => "human",
        }
    }

    /// An OpenAI-compatible system at `base_url` serving `model`, with default limits (what
    /// `serve --system NAME=URL` declares).
    pub fn openai(base_url: &str, model: &str) -> SystemSpec {
        SystemSpec::Openai(OpenAiSpec {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key_env: None,
            params: BTreeMap::new(),
            system_prompt: None,
            stream: true,
            limits: Limits::default(),
        })
    }

    /// Checks the spec; the error says which field is wrong.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            SystemSpec::Openai(s) => {
                check_url("base_url", &s.base_url)?;
                if s.model.trim().is_empty() {
                    return Err("`model` is empty".into());
                }
                if let Some(var) = &s.api_key_env
                    && (var.is_empty() || var.contains('=') || var.contains('\0'))
                {
                    return Err(format!(
                        "`api_key_env` `{var}` is not an environment variable name"
                    ));
                }
                if let Some(key) = s
                    .params
                    .keys()
                    .find(|k| RESERVED_PARAMS.contains(&k.as_str()))
                {
                    return Err(format!("`params.{key}` is set by wozkit itself; remove it"));
                }
            }
            SystemSpec::Http(s) => check_url("url", &s.url)?,
            SystemSpec::Websocket(s) => {
                if !(s.url.starts_with("ws://") || s.url.starts_with("wss://")) {
                    return Err(format!("`url` `{}` must start with ws:// or wss://", s.url));
                }
            }
            SystemSpec::Builtin(s) => {
                if s.fallback.is_empty() {
                    return Err("`fallback` needs at least one reply".into());
                }
                if let Some(i) = s.replies.iter().position(|r| r.when.is_empty()) {
                    return Err(format!("`replies[{i}].when` lists no keyword"));
                }
                if s.delay_ms > 60_000 {
                    return Err(format!("`delay_ms` is {}; at most 60000", s.delay_ms));
                }
                if s.words_per_s > 1000 {
                    return Err(format!("`words_per_s` is {}; at most 1000", s.words_per_s));
                }
            }
            // Only limits: who answers is decided at the desk.
            SystemSpec::Human(_) => {}
        }
        self.limits().validate()
    }
}

impl Limits {
    /// Checks every limit is within its bounds.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.timeout_s > 0.0 && self.timeout_s <= 600.0) {
            return Err(format!(
                "`limits.timeout_s` is {}; it must be > 0 and ≤ 600",
                self.timeout_s
            ));
        }
        if self.retries > 10 {
            return Err(format!("`limits.retries` is {}; at most 10", self.retries));
        }
        if self.backoff_ms > 60_000 {
            return Err(format!(
                "`limits.backoff_ms` is {}; at most 60000",
                self.backoff_ms
            ));
        }
        if !(1..=1024).contains(&self.concurrency) {
            return Err(format!(
                "`limits.concurrency` is {}; it must be 1 to 1024",
                self.concurrency
            ));
        }
        if self.queue > 100_000 {
            return Err(format!("`limits.queue` is {}; at most 100000", self.queue));
        }
        if self.breaker.failures == 0 {
            return Err("`limits.breaker.failures` must be at least 1".into());
        }
        let c = self.breaker.cooldown_s;
        if !(c > 0.0 && c <= 3600.0) {
            return Err(format!(
                "`limits.breaker.cooldown_s` is {c}; it must be > 0 and ≤ 3600"
            ));
        }
        Ok(())
    }
}

fn check_url(field: &str, url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "`{field}` `{url}` must start with http:// or https://"
        ))
    }
}
