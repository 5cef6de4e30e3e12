//! Prolific through its documented REST API (`https://api.prolific.com/api/v1/`), for one
//! Prolific study, with the API token from `PROLIFIC_TOKEN`.
//!
//! Every request sends `Authorization: Token <token>` and follows Prolific's API reference:
//!
//! - list a study's submissions: `GET /api/v1/studies/{id}/submissions/`, the page's
//!   `results` (`id`, `participant_id`, `status`, `study_code`: the completion code the
//!   participant entered), the next page at `_links.next.href` until it is null
//!   (<https://docs.prolific.com/api-reference/studies/get-study-submissions>,
//!   <https://docs.prolific.com/api-reference/submissions/get-submissions>);
//! - approve or reject one: `POST /api/v1/submissions/{id}/transition/` with `{"action":
//!   "APPROVE"}` or `{"action": "REJECT", "message": …, "rejection_category": …}`; a rejection's
//!   message is at least 100 characters; only a submission `AWAITING REVIEW` is decided, and a
//!   status never goes back
//!   (<https://docs.prolific.com/api-reference/submissions/transition-submission>,
//!   <https://docs.prolific.com/api-reference/submissions/submission-object>);
//! - approve many: `POST /api/v1/submissions/bulk-approve/` with `{"submission_ids": […]}`
//!   (<https://docs.prolific.com/api-reference/submissions/bulk-approve-submissions>);
//! - bonuses, in two steps: set up with `POST /api/v1/submissions/bonus-payments/` and
//!   `{"study_id": …, "csv_bonuses": "<participant_id>,<amount>\n…"}`, amounts in the study's
//!   currency as decimals (`4.25`), answered `201` with the bulk payment's `id` and its
//!   `amount`, `fees`, `vat`, `total_amount` in cents; then pay it once with
//!   `POST /api/v1/bulk-bonus-payments/{id}/pay/` (`202`; not idempotent: every call pays again)
//!   (<https://docs.prolific.com/api-reference/bonuses/create-bonus-payments>,
//!   <https://docs.prolific.com/api-reference/bonuses/pay-bonus-payments>).
//!
//! Reads (the submission list) are retried on a network failure or a 5xx answer; nothing that
//! changes anything is ever retried. The token is never logged and [`Prolific`]'s `Debug`
//! hides it. With the `mock` feature, [`mock`] is a local stand-in of these endpoints.

#[cfg(feature = "mock")]
pub mod app_mock;
#[cfg(feature = "mock")]
pub mod mock;

use std::collections::BTreeMap;
use std::error::Error as _;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{Bonus, Payer, PlatformError, Submission};

/// Prolific's API, when `PROLIFIC_API_URL` does not name another.
pub const DEFAULT_API_URL: &str = "https://api.prolific.com";
/// The environment variable holding the API token.
pub const TOKEN_VAR: &str = "PROLIFIC_TOKEN";
/// The environment variable that points the client at another base URL (e.g. the mock).
pub const API_URL_VAR: &str = "PROLIFIC_API_URL";
/// The status of a completed submission that waits for the researcher's decision.
pub const AWAITING_REVIEW: &str = "AWAITING REVIEW";
/// The status of an approved submission.
pub const APPROVED: &str = "APPROVED";
/// The status of a rejected submission.
pub const REJECTED: &str = "REJECTED";
/// The shortest rejection message Prolific accepts.
pub const MIN_REJECTION_MESSAGE: usize = 100;

const PLATFORM: &str = "prolific";
/// Attempts of a read before its error is returned.
const READ_ATTEMPTS: u32 = 3;
/// Longest piece of an answer quoted in an error.
const SNIPPET: usize = 300;

/// Why a submission is rejected: Prolific's `rejection_category` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RejectionCategory {
    TooQuickly,
    TooSlowly,
    FailedInstructions,
    IncompLongitudinal,
    FailedCheck,
    LowEffort,
    Malingering,
    NoCode,
    BadCode,
    NoData,
    UnsuppDevice,
    Other,
}

impl RejectionCategory {
    /// Every category, in Prolific's order.
    pub const ALL: [RejectionCategory; 12] = [
        Self::TooQuickly,
        Self::TooSlowly,
        Self::FailedInstructions,
        Self::IncompLongitudinal,
        Self::FailedCheck,
        Self::LowEffort,
        Self::Malingering,
        Self::NoCode,
        Self::BadCode,
        Self::NoData,
        Self::UnsuppDevice,
        Self::Other,
    ];

    /// The word Prolific uses (`BAD_CODE`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooQuickly => "TOO_QUICKLY",
            Self::TooSlowly => "TOO_SLOWLY",
            Self::FailedInstructions => "FAILED_INSTRUCTIONS",
            Self::IncompLongitudinal => "INCOMP_LONGITUDINAL",
            Self::FailedCheck => "FAILED_CHECK",
            Self::LowEffort => "LOW_EFFORT",
            Self::Malingering => "MALINGERING",
            Self::NoCode => "NO_CODE",
            Self::BadCode => "BAD_CODE",
            Self::NoData => "NO_DATA",
            Self::UnsuppDevice => "UNSUPP_DEVICE",
            Self::Other => "OTHER",
        }
    }

    /// The category of a word Prolific uses.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == word)
    }
}

/// One submission as Prolific lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProlificSubmission {
    /// The submission id (what Prolific passes to the study as `SESSION_ID`).
    pub id: String,
    /// The participant id (`PROLIFIC_PID`); `participant` in a single submission's answer.
    #[serde(alias = "participant")]
    pub participant_id: String,
    /// `RESERVED`, `ACTIVE`, `TIMED-OUT`, `AWAITING REVIEW`, `APPROVED`, `RETURNED`,
    /// `REJECTED` or `SCREENED OUT`.
    pub status: String,
    /// The completion code the participant entered (`entered_code` in a single submission's
    /// answer).
    #[serde(default, alias = "entered_code")]
    pub study_code: Option<String>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub completed_at: Option<String>,
}

impl From<ProlificSubmission> for Submission {
    fn from(s: ProlificSubmission) -> Submission {
        Submission {
            id: s.id,
            worker_id: s.participant_id,
            status: s.status,
            completion_code: s.study_code.filter(|c| !c.is_empty()),
        }
    }
}

/// A bulk bonus payment as set up (amounts in cents of the study's currency).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkBonus {
    /// The id to pay it with.
    pub id: String,
    #[serde(default)]
    pub study: Option<String>,
    /// What the participants receive, in cents.
    #[serde(default)]
    pub amount: Option<f64>,
    #[serde(default)]
    pub fees: Option<f64>,
    #[serde(default)]
    pub vat: Option<f64>,
    /// What is taken from the balance, in cents.
    #[serde(default)]
    pub total_amount: Option<f64>,
}

/// A cent amount as Prolific's CSV wants it: the study currency with two decimals (`0.15`,
/// `12.00`), exact.
pub fn amount(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// The cents of an amount in the currency (as the payment table writes them), rounded half away
/// from zero the way the table rounds, from the amount to millionths: `1.005` is 101 cents,
/// `0.15` is 15. A negative or non-finite amount is 0.
pub fn cents_of(amount: f64) -> u64 {
    if !amount.is_finite() || amount <= 0.0 {
        return 0;
    }
    let micros = (amount * 1e6).round() as u128;
    ((micros + 5_000) / 10_000) as u64
}

/// The CSV of a bulk bonus: `participant_id,amount` per line.
pub fn bonus_csv(bonuses: &[(String, u64)]) -> String {
    bonuses
        .iter()
        .map(|(who, cents)| format!("{who},{}\n", amount(*cents)))
        .collect()
}

/// A study to create on Prolific as a draft (not published): the body of
/// `POST /api/v1/studies/`. Participants arrive with their ids as URL parameters
/// (`prolific_id_option: url_parameters`) and finish with one of `completion_codes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyDraft {
    /// Shown to participants.
    pub name: String,
    /// Seen by the researcher only.
    pub internal_name: String,
    /// Shown to participants.
    pub description: String,
    /// The entry link with Prolific's placeholders for `PROLIFIC_PID`, `STUDY_ID`, `SESSION_ID`.
    pub external_study_url: String,
    pub prolific_id_option: String,
    pub completion_codes: Vec<DraftCode>,
    pub total_available_places: u32,
    /// Minutes.
    pub estimated_completion_time: u32,
    /// Cents (pence) of the study's currency.
    pub reward: u64,
    /// `desktop`, `tablet`, `mobile`.
    pub device_compatibility: Vec<String>,
}

/// One completion code of a draft: the code, its type and what Prolific does on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftCode {
    pub code: String,
    /// `COMPLETED`, `FAILED_ATTENTION_CHECK`, `OTHER`, … (Prolific's code types).
    pub code_type: String,
    pub actions: Vec<DraftAction>,
}

/// What Prolific does when a participant returns with a code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftAction {
    /// `MANUALLY_REVIEW` (the submission waits in `AWAITING REVIEW` for wozkit's own record to
    /// decide), `AUTOMATICALLY_APPROVE`, `REQUEST_RETURN`, ….
    pub action: String,
}

/// Prolific's placeholders for the entry link's ids.
pub const URL_PARAMETERS: &str =
    "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}";

/// Creates `draft` on Prolific (unpublished) through the API at `base_url` with `token`;
/// returns the new study's id (the `STUDY_ID` its participants will bring).
pub async fn create_study(
    base_url: &str,
    token: &str,
    draft: &StudyDraft,
) -> Result<String, PlatformError> {
    // No study exists yet; the client's study id is not used by this call.
    let client = Prolific::new(base_url, token, "(new study)")?;
    let what = "POST /api/v1/studies/ (create a draft study)";
    let url = format!("{}/api/v1/studies/", client.base);
    let body =
        serde_json::to_value(draft).map_err(|e| PlatformError::NotConfigured(e.to_string()))?;
    let answer = client.post(what, &url, &body).await?;
    answer
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| PlatformError::Refused {
            platform: PLATFORM,
            what: what.to_string(),
            status: 0,
            message: "the answer has no study id".into(),
        })
}

/// A client of Prolific's API for one Prolific study.
#[derive(Clone)]
pub struct Prolific {
    http: reqwest::Client,
    base: String,
    token: Arc<str>,
    study: String,
}

impl fmt::Debug for Prolific {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prolific")
            .field("base", &self.base)
            .field("token", &"[redacted]")
            .field("study", &self.study)
            .finish()
    }
}

impl Prolific {
    /// A client of the API at `base_url` (e.g. [`DEFAULT_API_URL`]) with `token`, for the
    /// Prolific study `study`.
    pub fn new(base_url: &str, token: &str, study: &str) -> Result<Prolific, PlatformError> {
        if token.trim().is_empty() {
            return Err(PlatformError::NotConfigured(format!(
                "Prolific: no API token: set {TOKEN_VAR} (Prolific: Settings, API tokens)"
            )));
        }
        if study.trim().is_empty() {
            return Err(PlatformError::NotConfigured(
                "Prolific: no study id given (the STUDY_ID Prolific passes in the entry link)"
                    .into(),
            ));
        }
        let base = base_url.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            return Err(PlatformError::NotConfigured(format!(
                "Prolific: the API URL `{base}` is not an http(s) URL (set {API_URL_VAR})"
            )));
        }
        // Process-wide default; a provider installed earlier (by us or the program) is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| {
                PlatformError::NotConfigured(format!(
                    "Prolific: cannot build the HTTP client: {}",
                    chain(&e)
                ))
            })?;
        Ok(Prolific {
            http,
            base,
            token: token.into(),
            study: study.to_string(),
        })
    }

    /// A client for the Prolific study `study` from the environment: the token in
    /// `PROLIFIC_TOKEN`, the API at `PROLIFIC_API_URL` or else [`DEFAULT_API_URL`].
    pub fn from_env(study: &str) -> Result<Prolific, PlatformError> {
        let token = std::env::var(TOKEN_VAR).unwrap_or_default();
        let base = std::env::var(API_URL_VAR)
            .ok()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_URL.to_string());
        Prolific::new(&base, &token, study)
    }

    /// The same client with requests given up after `timeout` (60 s unless set): a request
    /// that changes something and gets no answer in time is [`PlatformError::Uncertain`].
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Prolific, PlatformError> {
        self.http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .timeout(timeout)
            .build()
            .map_err(|e| {
                PlatformError::NotConfigured(format!(
                    "Prolific: cannot build the HTTP client: {}",
                    chain(&e)
                ))
            })?;
        Ok(self)
    }

    /// The Prolific study this client works on.
    pub fn study(&self) -> &str {
        &self.study
    }

    /// Every submission of the study, following `_links.next` through all pages.
    pub async fn list_submissions(&self) -> Result<Vec<ProlificSubmission>, PlatformError> {
        let what = format!("GET /api/v1/studies/{}/submissions/", self.study);
        let mut url = format!("{}/api/v1/studies/{}/submissions/", self.base, self.study);
        let mut out = vec![];
        // A loop of pages that point at each other would never end.
        for _ in 0..100_000 {
            let page = self.get(&what, &url).await?;
            let results = page
                .get("results")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(&what, "no `results` list in the answer"))?;
            for r in results {
                out.push(
                    serde_json::from_value(r.clone())
                        .map_err(|e| bad(&what, &format!("a submission does not read: {e}")))?,
                );
            }
            let next = page.get("_links").and_then(|l| l.get("next"));
            let href = match next {
                Some(Value::Object(o)) => o.get("href").and_then(Value::as_str),
                Some(Value::String(s)) => Some(s.as_str()),
                _ => None,
            };
            match href.filter(|h| !h.is_empty()) {
                Some(h) if h.starts_with("http://") || h.starts_with("https://") => {
                    url = h.to_string()
                }
                Some(h) => url = format!("{}{}", self.base, h),
                None => return Ok(out),
            }
        }
        Err(bad(&what, "the pages never end (`_links.next` loops)"))
    }

    /// Approves a submission `AWAITING REVIEW` (the participant is paid the study's reward).
    pub async fn approve(&self, submission: &str) -> Result<(), PlatformError> {
        let what = format!("POST /api/v1/submissions/{submission}/transition/ (APPROVE)");
        let url = format!("{}/api/v1/submissions/{submission}/transition/", self.base);
        self.post(&what, &url, &json!({"action": "APPROVE"}))
            .await
            .map(drop)
    }

    /// Rejects a submission `AWAITING REVIEW` with the message the participant reads (at least
    /// 100 characters, as Prolific requires) and its category.
    pub async fn reject(
        &self,
        submission: &str,
        message: &str,
        category: RejectionCategory,
    ) -> Result<(), PlatformError> {
        let what = format!("POST /api/v1/submissions/{submission}/transition/ (REJECT)");
        let n = message.trim().chars().count();
        if n < MIN_REJECTION_MESSAGE {
            return Err(PlatformError::Refused {
                platform: PLATFORM,
                what,
                status: 0,
                message: format!(
                    "not sent: Prolific needs a rejection message of at least \
                     {MIN_REJECTION_MESSAGE} characters, this one has {n}"
                ),
            });
        }
        let url = format!("{}/api/v1/submissions/{submission}/transition/", self.base);
        let body = json!({
            "action": "REJECT",
            "message": message.trim(),
            "rejection_category": category.as_str(),
        });
        self.post(&what, &url, &body).await.map(drop)
    }

    /// Approves several submissions in one request (Prolific approves them in the background).
    pub async fn bulk_approve(&self, submissions: &[String]) -> Result<(), PlatformError> {
        if submissions.is_empty() {
            return Ok(());
        }
        let what = format!(
            "POST /api/v1/submissions/bulk-approve/ ({} submission(s))",
            submissions.len()
        );
        let url = format!("{}/api/v1/submissions/bulk-approve/", self.base);
        self.post(&what, &url, &json!({"submission_ids": submissions}))
            .await
            .map(drop)
    }

    /// Step one of bonuses: sets up a bulk bonus payment of `cents` per participant id (one
    /// line each; pays nothing yet).
    pub async fn setup_bonuses(
        &self,
        bonuses: &[(String, u64)],
    ) -> Result<BulkBonus, PlatformError> {
        let what = format!(
            "POST /api/v1/submissions/bonus-payments/ ({} bonus(es) in study {})",
            bonuses.len(),
            self.study
        );
        let url = format!("{}/api/v1/submissions/bonus-payments/", self.base);
        let body = json!({"study_id": self.study, "csv_bonuses": bonus_csv(bonuses)});
        let answer = self.post(&what, &url, &body).await?;
        serde_json::from_value(answer)
            .map_err(|e| bad(&what, &format!("no bulk bonus payment id: {e}")))
    }

    /// Step two of bonuses: pays a bulk bonus payment that was set up. Not idempotent on
    /// Prolific's side: call it once per set-up payment.
    pub async fn pay_bonuses(&self, bulk_id: &str) -> Result<(), PlatformError> {
        let what = format!("POST /api/v1/bulk-bonus-payments/{bulk_id}/pay/");
        let url = format!("{}/api/v1/bulk-bonus-payments/{bulk_id}/pay/", self.base);
        self.post(&what, &url, &json!({})).await.map(drop)
    }

    /// Both steps of a bonus payment: the amounts of one participant given more than once are
    /// added up; zero amounts are left out. Returns the payment set up and paid (`None` when
    /// there was nothing to pay).
    pub async fn pay_bonus_amounts(
        &self,
        bonuses: &[(String, u64)],
    ) -> Result<Option<BulkBonus>, PlatformError> {
        let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
        for (who, cents) in bonuses {
            *sums.entry(who.as_str()).or_default() += cents;
        }
        let lines: Vec<(String, u64)> = sums
            .into_iter()
            .filter(|(_, c)| *c > 0)
            .map(|(w, c)| (w.to_string(), c))
            .collect();
        if lines.is_empty() {
            return Ok(None);
        }
        let bulk = self.setup_bonuses(&lines).await?;
        self.pay_bonuses(&bulk.id).await?;
        Ok(Some(bulk))
    }

    /// One submission with the bonus payments Prolific has paid on it, in cents
    /// (`GET /api/v1/submissions/{id}/`, its `bonus_payments`): the look-up that tells whether
    /// a bulk bonus payment whose pay request got no certain answer was paid.
    pub async fn submission_bonuses(&self, submission: &str) -> Result<Vec<u64>, PlatformError> {
        let what = format!("GET /api/v1/submissions/{submission}/");
        let url = format!("{}/api/v1/submissions/{submission}/", self.base);
        let answer = self.get(&what, &url).await?;
        let list = match answer.get("bonus_payments") {
            None | Some(Value::Null) => return Ok(vec![]),
            Some(Value::Array(a)) => a,
            Some(other) => return Err(bad(&what, &format!("bonus_payments is {other}"))),
        };
        list.iter()
            .map(|v| {
                v.as_f64()
                    .filter(|c| c.is_finite() && *c >= 0.0)
                    .map(|c| c.round() as u64)
                    .ok_or_else(|| bad(&what, &format!("a bonus payment of {v}")))
            })
            .collect()
    }

    /// A GET, retried on network failures and 5xx answers.
    async fn get(&self, what: &str, url: &str) -> Result<Value, PlatformError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = self
                .http
                .get(url)
                .header("Authorization", format!("Token {}", self.token))
                .send()
                .await;
            let result = match sent {
                Ok(resp) => self.read(what, resp).await,
                Err(e) => Err(self.unreachable(what, &e)),
            };
            match result {
                Err(e) if attempt < READ_ATTEMPTS && transient(&e) => {
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                }
                other => return other,
            }
        }
    }

    /// A POST with a JSON body, sent once.
    async fn post(&self, what: &str, url: &str, body: &Value) -> Result<Value, PlatformError> {
        let resp = self
            .http
            .post(url)
            .header("Authorization", format!("Token {}", self.token))
            .json(body)
            .send()
            .await
            .map_err(|e| self.unreachable(what, &e))?;
        self.read(what, resp).await
    }

    /// The JSON of a successful answer (`null` when empty), or the refusal with Prolific's
    /// message.
    async fn read(&self, what: &str, resp: reqwest::Response) -> Result<Value, PlatformError> {
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.unreachable(what, &e))?;
        if !status.is_success() {
            return Err(PlatformError::Refused {
                platform: PLATFORM,
                what: what.to_string(),
                status: status.as_u16(),
                message: self.redact(&error_message(&text)),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        // Some answers are a bare JSON string ("The request to bulk approve has been made…").
        serde_json::from_str(&text).or_else(|_| Ok(Value::String(text)))
    }

    /// A request that failed without an answer: [`PlatformError::Unreachable`] when it never
    /// went out (no connection), else [`PlatformError::Uncertain`] (a timeout, or the
    /// connection lost after sending: Prolific may have done it).
    fn unreachable(&self, what: &str, e: &reqwest::Error) -> PlatformError {
        let detail = self.redact(&chain(e));
        if e.is_connect() {
            PlatformError::Unreachable {
                platform: PLATFORM,
                what: what.to_string(),
                detail,
            }
        } else {
            PlatformError::Uncertain {
                platform: PLATFORM,
                what: what.to_string(),
                detail,
            }
        }
    }

    fn redact(&self, text: &str) -> String {
        text.replace(&*self.token, "[redacted]")
    }
}

/// Whether a failed read is worth another attempt.
fn transient(e: &PlatformError) -> bool {
    match e {
        PlatformError::Unreachable { .. } | PlatformError::Uncertain { .. } => true,
        PlatformError::Refused { status, .. } => *status >= 500,
        _ => false,
    }
}

fn bad(what: &str, detail: &str) -> PlatformError {
    PlatformError::BadAnswer {
        platform: PLATFORM,
        what: what.to_string(),
        detail: detail.to_string(),
    }
}

/// Prolific's message in an error answer: `{"error": {"title", "detail"}}`, or a `detail`, or
/// the start of the body.
fn error_message(text: &str) -> String {
    let flat = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        let err = v.get("error").unwrap_or(&v);
        let parts: Vec<String> = ["title", "detail", "message"]
            .iter()
            .filter_map(|k| err.get(*k))
            .map(flat)
            .filter(|s| !s.is_empty())
            .collect();
        if !parts.is_empty() {
            return parts.join(": ");
        }
        if let Value::String(s) = &v {
            return s.clone();
        }
    }
    let t = text.trim();
    if t.is_empty() {
        return "(no message)".into();
    }
    t.chars().take(SNIPPET).collect()
}

/// An error with its causes.
fn chain(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The sentence added to a researcher's short reason so that a rejection reaches Prolific's
/// 100 characters.
const REJECTION_TAIL: &str = " This submission was reviewed by the research team against the study's \
instructions and could not be accepted.";

#[async_trait]
impl Payer for Prolific {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    async fn submissions(&self) -> Result<Vec<Submission>, PlatformError> {
        Ok(self
            .list_submissions()
            .await?
            .into_iter()
            .map(Submission::from)
            .collect())
    }

    async fn approve(&self, submission_id: &str) -> Result<(), PlatformError> {
        Prolific::approve(self, submission_id).await
    }

    /// Rejects in the category `OTHER`; a reason shorter than Prolific's 100 characters gets a
    /// fixed sentence after it.
    async fn reject(&self, submission_id: &str, reason: &str) -> Result<(), PlatformError> {
        let mut message = reason.trim().to_string();
        if message.chars().count() < MIN_REJECTION_MESSAGE {
            message.push_str(REJECTION_TAIL);
        }
        Prolific::reject(self, submission_id, &message, RejectionCategory::Other).await
    }

    /// One bulk bonus payment (set up, then paid) for all of them, by participant id: all
    /// or nothing, so every bonus gets that payment's result.
    async fn bonus(&self, bonuses: &[Bonus]) -> Vec<Result<(), PlatformError>> {
        let lines: Vec<(String, u64)> = bonuses
            .iter()
            .map(|b| (b.worker_id.clone(), b.cents))
            .collect();
        let result = self.pay_bonus_amounts(&lines).await.map(drop);
        vec![result; bonuses.len()]
    }

    /// Sets up one bulk bonus payment of these bonuses, by submission id (the amounts of one
    /// submission added up): its id, recorded before [`Payer::pay_prepared`] pays it.
    async fn prepare_bonus(&self, bonuses: &[Bonus]) -> Result<Option<String>, PlatformError> {
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        for b in bonuses {
            *sums.entry(b.submission_id.clone()).or_default() += b.cents;
        }
        let lines: Vec<(String, u64)> = sums.into_iter().filter(|(_, c)| *c > 0).collect();
        if lines.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.setup_bonuses(&lines).await?.id))
    }

    /// Pays the bulk bonus payment set up as `prepared` (all or nothing: every bonus gets its
    /// result); without one, sets one up and pays it.
    async fn pay_prepared(
        &self,
        prepared: Option<&str>,
        bonuses: &[Bonus],
    ) -> Vec<Result<(), PlatformError>> {
        match prepared {
            Some(id) => vec![self.pay_bonuses(id).await; bonuses.len()],
            None => self.bonus(bonuses).await,
        }
    }

    /// The submissions' `bonus_payments` of each bonus's amount.
    async fn bonuses_paid(&self, bonuses: &[Bonus]) -> Result<Vec<u64>, PlatformError> {
        let mut seen: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        let mut out = Vec::with_capacity(bonuses.len());
        for b in bonuses {
            if !seen.contains_key(b.submission_id.as_str()) {
                let paid = self.submission_bonuses(&b.submission_id).await?;
                seen.insert(&b.submission_id, paid);
            }
            let paid = &seen[b.submission_id.as_str()];
            out.push(paid.iter().filter(|c| **c == b.cents).count() as u64);
        }
        Ok(out)
    }

    /// Prolific's API has no call that blocks a participant: answers
    /// [`PlatformError::Unsupported`] without sending anything.
    async fn block(&self, worker_id: &str, _reason: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Unsupported {
            platform: "Prolific",
            what: "block".into(),
            instead: format!(
                "block participant {worker_id} in Prolific's web app (add them to a blocklist \
                 participant group)"
            ),
        })
    }
}

/// A [`Payer`] for the Prolific study `prolific_study` from the environment (`PROLIFIC_TOKEN`,
/// `PROLIFIC_API_URL`): what the researcher console calls for a wozkit study whose participants
/// came from that Prolific study (their `STUDY_ID`).
pub fn payer_from_env(prolific_study: &str) -> Result<Arc<dyn Payer>, PlatformError> {
    Ok(Arc::new(Prolific::from_env(prolific_study)?))
}

/// The environment variable mapping wozkit studies to Prolific studies:
/// `WOZKIT_STUDY=PROLIFIC_STUDY[,…]`.
pub const STUDIES_VAR: &str = "PROLIFIC_STUDIES";
/// The environment variable naming the Prolific study of a wozkit study that
/// `PROLIFIC_STUDIES` does not list (for a server of one study).
pub const STUDY_VAR: &str = "PROLIFIC_STUDY_ID";

/// The Prolific study of the wozkit study `study`: its entry in `studies` (the value of
/// `PROLIFIC_STUDIES`, `wozkit-study=prolific-study` pairs separated by commas), else `default`
/// (the value of `PROLIFIC_STUDY_ID`).
pub fn prolific_study_of(
    study: &str,
    studies: Option<&str>,
    default: Option<&str>,
) -> Option<String> {
    let listed = studies
        .into_iter()
        .flat_map(|v| v.split(','))
        .find_map(|pair| {
            let (w, p) = pair.split_once('=')?;
            (w.trim() == study && !p.trim().is_empty()).then(|| p.trim().to_string())
        });
    listed.or_else(|| {
        default
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
    })
}

/// The [`Payer`] of a wozkit study from the environment, for the server's console: `None` when
/// `PROLIFIC_TOKEN` is not set or no Prolific study is given for it (`PROLIFIC_STUDIES`,
/// `PROLIFIC_STUDY_ID`); the API at `PROLIFIC_API_URL` or Prolific's.
pub fn payer_for_study(study: &str) -> Result<Option<Arc<dyn Payer>>, PlatformError> {
    if std::env::var(TOKEN_VAR).map_or(true, |t| t.trim().is_empty()) {
        return Ok(None);
    }
    let studies = std::env::var(STUDIES_VAR).ok();
    let default = std::env::var(STUDY_VAR).ok();
    match prolific_study_of(study, studies.as_deref(), default.as_deref()) {
        Some(p) => payer_from_env(&p).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wozkit_study_finds_its_prolific_study() {
        let list = Some("a=P1, b = P2,c=");
        assert_eq!(prolific_study_of("a", list, None).as_deref(), Some("P1"));
        assert_eq!(
            prolific_study_of("b", list, Some("D")).as_deref(),
            Some("P2")
        );
        assert_eq!(
            prolific_study_of("c", list, Some("D")).as_deref(),
            Some("D")
        );
        assert_eq!(prolific_study_of("z", list, None), None);
        assert_eq!(prolific_study_of("z", None, Some(" ")), None);
    }

    #[test]
    fn amounts_are_cents_with_two_decimals() {
        assert_eq!(amount(15), "0.15");
        assert_eq!(amount(101), "1.01");
        assert_eq!(amount(1200), "12.00");
        assert_eq!(amount(0), "0.00");
        assert_eq!(cents_of(0.15), 15);
        assert_eq!(cents_of(1.005), 101);
        assert_eq!(cents_of(0.285), 29);
        assert_eq!(cents_of(2.0), 200);
        assert_eq!(cents_of(-1.0), 0);
    }

    #[test]
    fn the_token_stays_out_of_debug() {
        let p = Prolific::new("http://127.0.0.1:1", "secret-token-123", "s1").unwrap();
        let shown = format!("{p:?}");
        assert!(!shown.contains("secret-token-123"), "{shown}");
        assert!(shown.contains("[redacted]"));
    }

    #[test]
    fn prolific_error_messages_are_read() {
        let body = r#"{"error": {"status": 400, "error_code": 140001, "title": "Bad request", "detail": {"csv_bonuses": ["bad id"]}}}"#;
        let m = error_message(body);
        assert!(m.starts_with("Bad request: "), "{m}");
        assert!(m.contains("bad id"), "{m}");
        assert_eq!(error_message(""), "(no message)");
    }

    #[test]
    fn categories_round_trip() {
        for c in RejectionCategory::ALL {
            assert_eq!(RejectionCategory::parse(c.as_str()), Some(c));
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                Value::String(c.as_str().into())
            );
        }
    }
}
