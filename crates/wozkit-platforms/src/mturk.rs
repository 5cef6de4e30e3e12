//! Amazon Mechanical Turk through the official AWS SDK for Rust (`aws-sdk-mturk`), for the HITs
//! of one wozkit study.
//!
//! The client is built without `aws-config`: credentials come straight from
//! `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN` when set), the region
//! is MTurk's only one (`us-east-1`), and HTTPS goes through hyper and rustls with ring. The
//! endpoint is production, the requester sandbox ([`SANDBOX_ENDPOINT`]), or any other address
//! (the local [`mock`], with the `mock` feature).
//!
//! What wozkit asks of MTurk, one SDK call each (MTurk API reference, 2017-01-17):
//!
//! - `CreateHIT` with an `ExternalQuestion` whose `ExternalURL` is the study's entry link
//!   (`https://HOST/join?study=…`); MTurk appends `assignmentId`, `hitId`, `workerId` and
//!   `turkSubmitTo`, which the entry link records, and shows the link with
//!   `assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE` as the preview;
//! - `CreateQualificationType` and `AssociateQualificationWithWorker` for a custom
//!   qualification; `QualificationRequirements` of a HIT use it and the system ones (locale,
//!   approval rate, approved HITs);
//! - `ListAssignmentsForHIT`, every page (`NextToken`);
//! - `ApproveAssignment` / `RejectAssignment` (with `RequesterFeedback`): only an assignment
//!   in the `Submitted` state is decided;
//! - `SendBonus` with a `UniqueRequestToken` derived from the assignment, the amount and the
//!   reason, so that a retry never pays twice (MTurk answers a reused token with a
//!   `RequestError` that names the token as already processed, which this client reads as
//!   "already paid"; any other refusal is an error);
//! - `CreateWorkerBlock`.

#[cfg(feature = "mock")]
pub mod mock;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use aws_credential_types::Credentials;
use aws_sdk_mturk::config::{BehaviorVersion, Region};
use aws_sdk_mturk::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_mturk::types::{
    AssignmentStatus, Comparator, Locale, QualificationRequirement, QualificationTypeStatus,
};
use aws_smithy_http_client::tls;
use serde::Serialize;

use crate::{Bonus, Payer, PlatformError, Submission};

/// MTurk's production endpoint.
pub const PRODUCTION_ENDPOINT: &str = "https://mturk-requester.us-east-1.amazonaws.com";
/// The requester sandbox: HITs there are free and seen only on workersandbox.mturk.com.
pub const SANDBOX_ENDPOINT: &str = "https://mturk-requester-sandbox.us-east-1.amazonaws.com";
/// MTurk's region (its only one).
pub const REGION: &str = "us-east-1";
/// The environment variable with the AWS access key id.
pub const ACCESS_KEY_VAR: &str = "AWS_ACCESS_KEY_ID";
/// The environment variable with the AWS secret access key.
pub const SECRET_KEY_VAR: &str = "AWS_SECRET_ACCESS_KEY";
/// The environment variable with a session token of temporary credentials (optional).
pub const SESSION_TOKEN_VAR: &str = "AWS_SESSION_TOKEN";
/// `1` sends every request to the sandbox.
pub const SANDBOX_VAR: &str = "WOZKIT_MTURK_SANDBOX";
/// Another endpoint (e.g. the mock): takes precedence over the sandbox switch.
pub const ENDPOINT_VAR: &str = "WOZKIT_MTURK_ENDPOINT";
/// The system qualification `Worker_Locale`.
pub const LOCALE_QUALIFICATION: &str = "00000000000000000071";
/// The system qualification `Worker_PercentAssignmentsApproved`.
pub const APPROVAL_RATE_QUALIFICATION: &str = "000000000000000000L0";
/// The system qualification `Worker_NumberHITsApproved`.
pub const HITS_APPROVED_QUALIFICATION: &str = "00000000000000000040";
/// The ExternalQuestion schema.
pub const EXTERNAL_QUESTION_NS: &str = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd";
/// The status of an assignment that waits for the requester's decision.
pub const SUBMITTED: &str = "Submitted";

const PLATFORM: &str = "mturk";
/// Assignments asked for per page (MTurk's maximum).
const PAGE_SIZE: i32 = 100;

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Production,
    Sandbox,
    /// Any other base address (the mock).
    Custom(String),
}

impl Endpoint {
    /// The base address.
    pub fn url(&self) -> &str {
        match self {
            Endpoint::Production => PRODUCTION_ENDPOINT,
            Endpoint::Sandbox => SANDBOX_ENDPOINT,
            Endpoint::Custom(u) => u,
        }
    }

    /// From the environment: `WOZKIT_MTURK_ENDPOINT` if set, else the sandbox when `sandbox`
    /// or `WOZKIT_MTURK_SANDBOX=1`, else production.
    pub fn from_env(sandbox: bool) -> Endpoint {
        if let Ok(url) = std::env::var(ENDPOINT_VAR)
            && !url.trim().is_empty()
        {
            return Endpoint::Custom(url.trim().to_string());
        }
        if sandbox || std::env::var(SANDBOX_VAR).is_ok_and(|v| v.trim() == "1") {
            Endpoint::Sandbox
        } else {
            Endpoint::Production
        }
    }
}

/// A qualification a worker needs to see and accept a HIT.
#[derive(Clone, Debug, PartialEq)]
pub enum Requirement {
    /// The worker lives in one of these countries (ISO 3166 codes, e.g. `US`, `GB`).
    Locale(Vec<String>),
    /// At least this percentage of the worker's assignments were approved.
    ApprovalRate(i32),
    /// The worker had at least this many HITs approved.
    HitsApproved(i32),
    /// The worker holds the custom qualification `type_id` (with at least `min` when given).
    Has { type_id: String, min: Option<i32> },
    /// The worker does not hold the qualification `type_id` (e.g. a "took part already" mark).
    Lacks { type_id: String },
}

impl Requirement {
    fn to_sdk(&self) -> Result<QualificationRequirement, String> {
        let b = QualificationRequirement::builder();
        let b = match self {
            Requirement::Locale(countries) => {
                let mut b = b
                    .qualification_type_id(LOCALE_QUALIFICATION)
                    .comparator(Comparator::In);
                for c in countries {
                    b = b.locale_values(
                        Locale::builder()
                            .country(c.trim().to_uppercase())
                            .build()
                            .map_err(|e| e.to_string())?,
                    );
                }
                b
            }
            Requirement::ApprovalRate(p) => b
                .qualification_type_id(APPROVAL_RATE_QUALIFICATION)
                .comparator(Comparator::GreaterThanOrEqualTo)
                .integer_values(*p),
            Requirement::HitsApproved(n) => b
                .qualification_type_id(HITS_APPROVED_QUALIFICATION)
                .comparator(Comparator::GreaterThanOrEqualTo)
                .integer_values(*n),
            Requirement::Has { type_id, min: None } => b
                .qualification_type_id(type_id)
                .comparator(Comparator::Exists),
            Requirement::Has {
                type_id,
                min: Some(m),
            } => b
                .qualification_type_id(type_id)
                .comparator(Comparator::GreaterThanOrEqualTo)
                .integer_values(*m),
            Requirement::Lacks { type_id } => b
                .qualification_type_id(type_id)
                .comparator(Comparator::DoesNotExist),
        };
        b.build().map_err(|e| e.to_string())
    }
}

/// A HIT to create for a wozkit study.
#[derive(Clone, Debug)]
pub struct HitSpec {
    /// The study's entry link (`https://HOST/join?study=ID`): the ExternalURL.
    pub entry_link: String,
    pub title: String,
    pub description: String,
    /// Comma-separated search words.
    pub keywords: String,
    /// What each approved assignment pays, in cents.
    pub reward_cents: u64,
    /// How many workers may take it.
    pub assignments: i32,
    /// How long it is listed, in seconds.
    pub lifetime_s: i64,
    /// How long a worker has once they accepted, in seconds.
    pub duration_s: i64,
    /// After how long a submitted assignment is approved if nobody decides, in seconds.
    pub auto_approval_s: i64,
    /// The frame height of the question (0: the whole window).
    pub frame_height: u32,
    pub requirements: Vec<Requirement>,
    /// Kept with the HIT, seen only by the requester (e.g. `wozkit:STUDY`).
    pub annotation: Option<String>,
    /// Makes a retried CreateHIT create no second HIT (at most 64 characters).
    pub unique_request_token: Option<String>,
}

impl HitSpec {
    /// The entry link of `study` on the server at `base` (`https://HOST`), as MTurk opens it.
    pub fn entry_link(base: &str, study: &str) -> String {
        format!(
            "{}/join?study={}",
            base.trim_end_matches('/'),
            query_escape(study)
        )
    }

    /// The `ExternalQuestion` document of the HIT.
    pub fn external_question(&self) -> String {
        external_question(&self.entry_link, self.frame_height)
    }
}

/// The `ExternalQuestion` XML for `url` (escaped: `&` in a link is `&amp;`).
pub fn external_question(url: &str, frame_height: u32) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <ExternalQuestion xmlns=\"{EXTERNAL_QUESTION_NS}\">\n  \
         <ExternalURL>{}</ExternalURL>\n  <FrameHeight>{frame_height}</FrameHeight>\n\
         </ExternalQuestion>\n",
        xml_escape(url)
    )
}

/// A created HIT.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CreatedHit {
    pub hit_id: String,
    pub hit_type_id: String,
    /// Where workers find it (the worker site's group page).
    pub preview_url: String,
}

/// One assignment of a HIT, as MTurk lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assignment {
    pub id: String,
    pub worker_id: String,
    pub hit_id: String,
    /// `Submitted`, `Approved` or `Rejected`.
    pub status: String,
    /// When it was submitted, in seconds since the epoch.
    pub submit_time: Option<i64>,
    /// The answer document the worker's submit form posted.
    pub answer: Option<String>,
    /// The `completionCode` field of the answer, when it has one.
    pub completion_code: Option<String>,
}

impl From<Assignment> for Submission {
    fn from(a: Assignment) -> Submission {
        Submission {
            id: a.id,
            worker_id: a.worker_id,
            status: a.status,
            completion_code: a.completion_code,
        }
    }
}

/// What a bonus request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BonusOutcome {
    /// Paid now.
    Paid,
    /// MTurk had this bonus already (the same UniqueRequestToken): nothing more was paid.
    AlreadyPaid,
    /// Nothing to pay (0 cents).
    Nothing,
}

/// A client of MTurk's requester API for a set of HITs (those of one wozkit study; the
/// [`Payer`] works over them).
#[derive(Clone)]
pub struct MTurk {
    client: aws_sdk_mturk::Client,
    endpoint: Endpoint,
    access_key: String,
    hits: Vec<String>,
}

impl fmt::Debug for MTurk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MTurk")
            .field("endpoint", &self.endpoint)
            .field("access_key", &self.access_key)
            .field("secret_key", &"[redacted]")
            .field("hits", &self.hits)
            .finish()
    }
}

impl MTurk {
    /// A client of `endpoint` with these credentials.
    pub fn new(
        endpoint: Endpoint,
        access_key: &str,
        secret_key: &str,
        session_token: Option<&str>,
    ) -> Result<MTurk, PlatformError> {
        if access_key.trim().is_empty() || secret_key.trim().is_empty() {
            return Err(PlatformError::NotConfigured(format!(
                "mturk: set {ACCESS_KEY_VAR} and {SECRET_KEY_VAR} to the requester account's AWS \
                 credentials"
            )));
        }
        let credentials = Credentials::new(
            access_key.trim(),
            secret_key.trim(),
            session_token.map(str::to_string),
            None,
            "wozkit",
        );
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let config = aws_sdk_mturk::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .credentials_provider(credentials)
            .endpoint_url(endpoint.url())
            .http_client(http)
            .build();
        Ok(MTurk {
            client: aws_sdk_mturk::Client::from_conf(config),
            endpoint,
            access_key: access_key.trim().to_string(),
            hits: vec![],
        })
    }

    /// A client from the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, and the endpoint as [`Endpoint::from_env`] picks it).
    pub fn from_env(sandbox: bool) -> Result<MTurk, PlatformError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let (Some(key), Some(secret)) = (var(ACCESS_KEY_VAR), var(SECRET_KEY_VAR)) else {
            return Err(PlatformError::NotConfigured(format!(
                "mturk: {ACCESS_KEY_VAR} and {SECRET_KEY_VAR} are not set: give the requester \
                 account's AWS credentials in these environment variables"
            )));
        };
        MTurk::new(
            Endpoint::from_env(sandbox),
            &key,
            &secret,
            var(SESSION_TOKEN_VAR).as_deref(),
        )
    }

    /// The same client with each request attempt given up after `timeout` (none unless set):
    /// a request that changes something and gets no answer in time is
    /// [`PlatformError::Uncertain`].
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> MTurk {
        let config = self
            .client
            .config()
            .to_builder()
            .timeout_config(
                aws_sdk_mturk::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(timeout)
                    .build(),
            )
            .build();
        self.client = aws_sdk_mturk::Client::from_conf(config);
        self
    }

    /// The same client over these HITs (what the [`Payer`] lists and decides).
    pub fn with_hits(mut self, hits: Vec<String>) -> MTurk {
        self.hits = hits;
        self
    }

    /// The HITs the [`Payer`] works over.
    pub fn hits(&self) -> &[String] {
        &self.hits
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Creates a HIT whose question is the study's entry link (an `https://` address, as
    /// MTurk requires of an ExternalURL).
    pub async fn create_hit(&self, spec: &HitSpec) -> Result<CreatedHit, PlatformError> {
        let what = format!("CreateHIT ({})", spec.entry_link);
        if !spec.entry_link.starts_with("https://") {
            return Err(refused_locally(
                &what,
                "not sent: MTurk shows only https:// addresses in an ExternalQuestion; serve the \
                 study behind TLS and give its https address",
            ));
        }
        if spec.assignments < 1 {
            return Err(refused_locally(
                &what,
                "not sent: a HIT needs at least 1 assignment",
            ));
        }
        let mut req = self
            .client
            .create_hit()
            .title(&spec.title)
            .description(&spec.description)
            .keywords(&spec.keywords)
            .reward(amount(spec.reward_cents))
            .max_assignments(spec.assignments)
            .lifetime_in_seconds(spec.lifetime_s)
            .assignment_duration_in_seconds(spec.duration_s)
            .auto_approval_delay_in_seconds(spec.auto_approval_s)
            .question(spec.external_question());
        for r in &spec.requirements {
            req = req.qualification_requirements(
                r.to_sdk()
                    .map_err(|e| refused_locally(&what, &format!("a requirement: {e}")))?,
            );
        }
        if let Some(a) = &spec.annotation {
            req = req.requester_annotation(a);
        }
        if let Some(t) = &spec.unique_request_token {
            req = req.unique_request_token(t);
        }
        let out = req.send().await.map_err(|e| sdk_error(&what, e))?;
        let hit = out.hit.ok_or_else(|| bad(&what, "the answer has no HIT"))?;
        let hit_id = hit
            .hit_id
            .ok_or_else(|| bad(&what, "the HIT has no HITId"))?;
        let hit_type_id = hit.hit_type_id.unwrap_or_default();
        let worker_site = if self.endpoint == Endpoint::Sandbox {
            "https://workersandbox.mturk.com"
        } else {
            "https://worker.mturk.com"
        };
        Ok(CreatedHit {
            preview_url: format!("{worker_site}/projects/{hit_type_id}/tasks"),
            hit_id,
            hit_type_id,
        })
    }

    /// Creates a custom qualification type (active, granted by the requester: no test, no
    /// automatic value); returns its id.
    pub async fn create_qualification_type(
        &self,
        name: &str,
        description: &str,
        keywords: Option<&str>,
    ) -> Result<String, PlatformError> {
        let what = format!("CreateQualificationType ({name})");
        let mut req = self
            .client
            .create_qualification_type()
            .name(name)
            .description(description)
            .qualification_type_status(QualificationTypeStatus::Active);
        if let Some(k) = keywords {
            req = req.keywords(k);
        }
        let out = req.send().await.map_err(|e| sdk_error(&what, e))?;
        out.qualification_type
            .and_then(|q| q.qualification_type_id)
            .ok_or_else(|| bad(&what, "no QualificationTypeId in the answer"))
    }

    /// Grants the qualification `type_id` to a worker with `value` (`notify`: MTurk emails
    /// the worker).
    pub async fn grant_qualification(
        &self,
        type_id: &str,
        worker_id: &str,
        value: i32,
        notify: bool,
    ) -> Result<(), PlatformError> {
        let what = format!("AssociateQualificationWithWorker ({type_id} to {worker_id})");
        self.client
            .associate_qualification_with_worker()
            .qualification_type_id(type_id)
            .worker_id(worker_id)
            .integer_value(value)
            .send_notification(notify)
            .send()
            .await
            .map_err(|e| sdk_error(&what, e))
            .map(drop)
    }

    /// Every assignment of one HIT (all pages; every status).
    pub async fn list_assignments(&self, hit_id: &str) -> Result<Vec<Assignment>, PlatformError> {
        let what = format!("ListAssignmentsForHIT ({hit_id})");
        let mut out = vec![];
        let mut next: Option<String> = None;
        // A token that never ends would loop for ever.
        for _ in 0..100_000 {
            let page = self
                .client
                .list_assignments_for_hit()
                .hit_id(hit_id)
                .max_results(PAGE_SIZE)
                .assignment_statuses(AssignmentStatus::Submitted)
                .assignment_statuses(AssignmentStatus::Approved)
                .assignment_statuses(AssignmentStatus::Rejected)
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| sdk_error(&what, e))?;
            for a in page.assignments.unwrap_or_default() {
                let answer = a.answer;
                out.push(Assignment {
                    id: a.assignment_id.unwrap_or_default(),
                    worker_id: a.worker_id.unwrap_or_default(),
                    hit_id: a.hit_id.unwrap_or_else(|| hit_id.to_string()),
                    status: a
                        .assignment_status
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    submit_time: a.submit_time.map(|t| t.secs()),
                    completion_code: answer
                        .as_deref()
                        .and_then(|x| answer_field(x, "completionCode")),
                    answer,
                });
            }
            match page.next_token.filter(|t| !t.is_empty()) {
                Some(t) if page.num_results.unwrap_or(1) > 0 => next = Some(t),
                _ => return Ok(out),
            }
        }
        Err(bad(&what, "the pages never end (NextToken loops)"))
    }

    /// Every assignment of every HIT of this client ([`MTurk::with_hits`]).
    pub async fn all_assignments(&self) -> Result<Vec<Assignment>, PlatformError> {
        let mut out = vec![];
        for hit in &self.hits {
            out.extend(self.list_assignments(hit).await?);
        }
        Ok(out)
    }

    /// Approves a `Submitted` assignment (the worker is paid the HIT's reward), with an
    /// optional message to the worker. An assignment found approved already (an earlier
    /// request that got no answer, a second press) counts as approved now.
    pub async fn approve(
        &self,
        assignment_id: &str,
        feedback: Option<&str>,
    ) -> Result<(), PlatformError> {
        let what = format!("ApproveAssignment ({assignment_id})");
        let sent = self
            .client
            .approve_assignment()
            .assignment_id(assignment_id)
            .set_requester_feedback(feedback.map(str::to_string))
            .send()
            .await
            .map_err(|e| sdk_error(&what, e));
        self.already(assignment_id, "Approved", sent.map(drop))
            .await
    }

    /// The status of an assignment (`GetAssignment`).
    pub async fn assignment_status(&self, assignment_id: &str) -> Result<String, PlatformError> {
        let what = format!("GetAssignment ({assignment_id})");
        let out = self
            .client
            .get_assignment()
            .assignment_id(assignment_id)
            .send()
            .await
            .map_err(|e| sdk_error(&what, e))?;
        out.assignment
            .and_then(|a| a.assignment_status)
            .map(|s| s.as_str().to_string())
            .ok_or_else(|| bad(&what, "the answer has no assignment status"))
    }

    /// A decision's result, where a failure is looked into: if the assignment has the status
    /// the decision gives (`Approved`, `Rejected`), it was taken (now or before).
    async fn already(
        &self,
        assignment_id: &str,
        status: &str,
        sent: Result<(), PlatformError>,
    ) -> Result<(), PlatformError> {
        match sent {
            Err(e @ (PlatformError::Refused { .. } | PlatformError::Uncertain { .. })) => {
                match self.assignment_status(assignment_id).await {
                    Ok(s) if s == status => Ok(()),
                    _ => Err(e),
                }
            }
            other => other,
        }
    }

    /// The bonuses paid on an assignment (`ListBonusPayments`, every page): worker, cents and
    /// reason of each.
    pub async fn list_bonus_payments(
        &self,
        assignment_id: &str,
    ) -> Result<Vec<(String, u64, String)>, PlatformError> {
        let what = format!("ListBonusPayments ({assignment_id})");
        let mut out = vec![];
        let mut next: Option<String> = None;
        for _ in 0..10_000 {
            let page = self
                .client
                .list_bonus_payments()
                .assignment_id(assignment_id)
                .max_results(PAGE_SIZE)
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| sdk_error(&what, e))?;
            for b in page.bonus_payments.unwrap_or_default() {
                let amount = b.bonus_amount.unwrap_or_default();
                let cents = cents_of(&amount)
                    .ok_or_else(|| bad(&what, &format!("a bonus of `{amount}`")))?;
                out.push((
                    b.worker_id.unwrap_or_default(),
                    cents,
                    b.reason.unwrap_or_default(),
                ));
            }
            match page.next_token.filter(|t| !t.is_empty()) {
                Some(t) if page.num_results.unwrap_or(1) > 0 => next = Some(t),
                _ => return Ok(out),
            }
        }
        Err(bad(&what, "the pages never end (NextToken loops)"))
    }

    /// Rejects a `Submitted` assignment with the feedback the worker reads.
    pub async fn reject(&self, assignment_id: &str, feedback: &str) -> Result<(), PlatformError> {
        let what = format!("RejectAssignment ({assignment_id})");
        if feedback.trim().is_empty() {
            return Err(refused_locally(
                &what,
                "not sent: MTurk needs feedback that tells the worker why",
            ));
        }
        let sent = self
            .client
            .reject_assignment()
            .assignment_id(assignment_id)
            .requester_feedback(feedback.trim())
            .send()
            .await
            .map_err(|e| sdk_error(&what, e))
            .map(drop);
        self.already(assignment_id, "Rejected", sent).await
    }

    /// Pays a bonus of `cents` to a worker for an assignment. The UniqueRequestToken is
    /// [`bonus_token`] of the assignment, amount and reason, so the same bonus sent again is
    /// not paid again (within MTurk's 24 hours of keeping tokens).
    pub async fn send_bonus(
        &self,
        worker_id: &str,
        assignment_id: &str,
        cents: u64,
        reason: &str,
    ) -> Result<BonusOutcome, PlatformError> {
        if cents == 0 {
            return Ok(BonusOutcome::Nothing);
        }
        let what = format!(
            "SendBonus ({} to {worker_id} for {assignment_id})",
            amount(cents)
        );
        if reason.trim().is_empty() {
            return Err(refused_locally(
                &what,
                "not sent: MTurk needs a reason the worker reads",
            ));
        }
        let token = bonus_token(assignment_id, cents, reason);
        let sent = self
            .client
            .send_bonus()
            .worker_id(worker_id)
            .assignment_id(assignment_id)
            .bonus_amount(amount(cents))
            .reason(reason.trim())
            .unique_request_token(&token)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(BonusOutcome::Paid),
            Err(e) if token_reused(&e, &token) => Ok(BonusOutcome::AlreadyPaid),
            Err(e) => Err(sdk_error(&what, e)),
        }
    }

    /// Blocks a worker from this requester's HITs, with the reason MTurk keeps.
    pub async fn block(&self, worker_id: &str, reason: &str) -> Result<(), PlatformError> {
        let what = format!("CreateWorkerBlock ({worker_id})");
        if reason.trim().is_empty() {
            return Err(refused_locally(&what, "not sent: MTurk needs a reason"));
        }
        self.client
            .create_worker_block()
            .worker_id(worker_id)
            .reason(reason.trim())
            .send()
            .await
            .map_err(|e| sdk_error(&what, e))
            .map(drop)
    }
}

#[async_trait]
impl Payer for MTurk {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    /// Every assignment of the study's HITs.
    async fn submissions(&self) -> Result<Vec<Submission>, PlatformError> {
        Ok(self
            .all_assignments()
            .await?
            .into_iter()
            .map(Submission::from)
            .collect())
    }

    async fn approve(&self, submission_id: &str) -> Result<(), PlatformError> {
        MTurk::approve(self, submission_id, None).await
    }

    async fn reject(&self, submission_id: &str, reason: &str) -> Result<(), PlatformError> {
        MTurk::reject(self, submission_id, reason).await
    }

    /// One SendBonus per bonus (MTurk has no bulk bonus), each with its own result; a bonus
    /// MTurk had already is not paid again. A refused bonus does not stop the others; once
    /// MTurk cannot be reached, the rest are not sent (each says so).
    async fn bonus(&self, bonuses: &[Bonus]) -> Vec<Result<(), PlatformError>> {
        let mut out = Vec::with_capacity(bonuses.len());
        let mut unreachable: Option<String> = None;
        for b in bonuses {
            if let Some(why) = &unreachable {
                out.push(Err(PlatformError::Unreachable {
                    platform: PLATFORM,
                    what: format!(
                        "SendBonus ({} to {} for {})",
                        amount(b.cents),
                        b.worker_id,
                        b.submission_id
                    ),
                    detail: format!("not sent: an earlier bonus of the batch failed: {why}"),
                }));
                continue;
            }
            let result = self
                .send_bonus(&b.worker_id, &b.submission_id, b.cents, &b.reason)
                .await
                .map(drop);
            if let Err(e @ (PlatformError::Unreachable { .. } | PlatformError::Uncertain { .. })) =
                &result
            {
                unreachable = Some(e.to_string());
            }
            out.push(result);
        }
        out
    }

    async fn block(&self, worker_id: &str, reason: &str) -> Result<(), PlatformError> {
        MTurk::block(self, worker_id, reason).await
    }

    /// `ListBonusPayments` of each bonus's assignment: the payments of its amount.
    async fn bonuses_paid(&self, bonuses: &[Bonus]) -> Result<Vec<u64>, PlatformError> {
        let mut out = Vec::with_capacity(bonuses.len());
        for b in bonuses {
            let paid = self.list_bonus_payments(&b.submission_id).await?;
            out.push(paid.iter().filter(|(_, c, _)| *c == b.cents).count() as u64);
        }
        Ok(out)
    }
}

/// A [`Payer`] over `hits` (the HITs created for a wozkit study, as the store's meta table
/// records them under [`hits_meta_key`]) from the environment: what the researcher console
/// calls for a study whose participants came from MTurk.
pub fn payer_from_env(hits: Vec<String>, sandbox: bool) -> Result<Arc<dyn Payer>, PlatformError> {
    Ok(Arc::new(MTurk::from_env(sandbox)?.with_hits(hits)))
}

/// The meta-table key under which the command line records the HITs created for a study.
pub fn hits_meta_key(study: &str) -> String {
    format!("mturk_hits:{study}")
}

/// A HIT as the meta table records it (a JSON list of these under [`hits_meta_key`]).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct RecordedHit {
    pub hit_id: String,
    /// The reward of each approved assignment, in cents.
    pub reward_cents: u64,
    /// Created in the sandbox.
    pub sandbox: bool,
    /// When it was created, in milliseconds since the epoch.
    pub created_at_ms: u64,
}

/// The UniqueRequestToken of a bonus: the assignment, the amount and a hash of the reason
/// (at most 64 characters, as MTurk allows).
pub fn bonus_token(assignment_id: &str, cents: u64, reason: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in assignment_id
        .bytes()
        .chain([0])
        .chain(reason.trim().bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut id: String = assignment_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    id.truncate(30);
    format!("wzb-{id}-{cents}-{h:016x}")
}

/// An amount of cents as MTurk writes dollars: `1.50`.
pub fn amount(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// Cents of an amount MTurk writes (`1.5`, `1.50`, `2`); `None` when it is not one.
pub fn cents_of(text: &str) -> Option<u64> {
    let t = text.trim();
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
        || frac.len() > 2
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: u64 = match frac.len() {
        0 => 0,
        1 => frac.parse::<u64>().ok()? * 10,
        _ => frac.parse().ok()?,
    };
    whole.checked_mul(100)?.checked_add(frac)
}

/// The `FreeText` of the answer field `name` in a `QuestionFormAnswers` document.
pub fn answer_field(answer: &str, name: &str) -> Option<String> {
    let mut rest = answer;
    while let Some(i) = rest.find("<QuestionIdentifier>") {
        rest = &rest[i + "<QuestionIdentifier>".len()..];
        let end = rest.find("</QuestionIdentifier>")?;
        let id = xml_unescape(rest[..end].trim());
        rest = &rest[end..];
        let answer_end = rest.find("</Answer>").unwrap_or(rest.len());
        let part = &rest[..answer_end];
        if id == name {
            let s = part.find("<FreeText>")? + "<FreeText>".len();
            let e = part.find("</FreeText>")?;
            let v = xml_unescape(part.get(s..e)?.trim());
            return (!v.is_empty()).then_some(v);
        }
    }
    None
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

fn xml_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a SendBonus sent with `token` failed because that UniqueRequestToken was used
/// already: MTurk's `RequestError` whose message names the token (the token itself, or the
/// words UniqueRequestToken / idempotency token) as already processed or existing (its
/// answer reads `The idempotency token "…" has already been processed.`, with the earlier
/// request's id). Any other refusal, even one that says "already", is not.
fn token_reused<E: ProvideErrorMetadata>(e: &E, token: &str) -> bool {
    if e.code() != Some("RequestError") {
        return false;
    }
    let m = e.message().unwrap_or_default().to_ascii_lowercase();
    let names_token = m.contains(&token.to_ascii_lowercase())
        || m.contains("uniquerequesttoken")
        || m.contains("idempotency token");
    names_token && (m.contains("already been processed") || m.contains("already exists"))
}

fn sdk_error<E, R>(what: &str, e: SdkError<E, R>) -> PlatformError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: fmt::Debug,
{
    match &e {
        SdkError::ServiceError(se) => {
            let err = se.err();
            let code = err.code().unwrap_or("error");
            let message = err.message().unwrap_or("(no message)");
            PlatformError::Refused {
                platform: PLATFORM,
                what: what.to_string(),
                // MTurk's own failure (ServiceFault, a 5xx) may have done the work.
                status: if code == "ServiceFault" { 500 } else { 400 },
                message: format!("{code}: {message}"),
            }
        }
        // Sent, or maybe sent (the SDK does not tell a refused connection from one lost after
        // sending), and no answer read: MTurk may have done it.
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_) => {
            PlatformError::Uncertain {
                platform: PLATFORM,
                what: what.to_string(),
                detail: DisplayErrorContext(&e).to_string(),
            }
        }
        _ => bad(what, &DisplayErrorContext(&e).to_string()),
    }
}

fn refused_locally(what: &str, message: &str) -> PlatformError {
    PlatformError::Refused {
        platform: PLATFORM,
        what: what.to_string(),
        status: 0,
        message: message.to_string(),
    }
}

fn bad(what: &str, detail: &str) -> PlatformError {
    PlatformError::BadAnswer {
        platform: PLATFORM,
        what: what.to_string(),
        detail: detail.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_dollars_with_two_decimals() {
        assert_eq!(amount(150), "1.50");
        assert_eq!(amount(5), "0.05");
        assert_eq!(amount(10142), "101.42");
        assert_eq!(cents_of("1.5"), Some(150));
        assert_eq!(cents_of("101.42"), Some(10142));
        assert_eq!(cents_of("5"), Some(500));
        assert_eq!(cents_of("0.05"), Some(5));
        assert_eq!(cents_of("1.505"), None);
        assert_eq!(cents_of("-1"), None);
        assert_eq!(cents_of(""), None);
    }

    #[test]
    fn the_external_question_escapes_the_link() {
        let x = external_question("https://h.example/join?study=a&x=1", 0);
        assert!(x.contains("<ExternalURL>https://h.example/join?study=a&amp;x=1</ExternalURL>"));
        assert!(x.contains(EXTERNAL_QUESTION_NS));
        assert!(x.contains("<FrameHeight>0</FrameHeight>"));
        assert_eq!(
            HitSpec::entry_link("https://h.example/", "my study"),
            "https://h.example/join?study=my%20study"
        );
    }

    #[test]
    fn bonus_tokens_fit_and_differ() {
        let long = "A".repeat(200);
        let t = bonus_token(&long, 123456, "reason");
        assert!(t.len() <= 64, "{t}");
        assert_eq!(bonus_token("A1", 5, "r"), bonus_token("A1", 5, " r "));
        assert_ne!(bonus_token("A1", 5, "r"), bonus_token("A1", 6, "r"));
        assert_ne!(bonus_token("A1", 5, "r"), bonus_token("A1", 5, "s"));
        assert_ne!(bonus_token("A1", 5, "r"), bonus_token("A2", 5, "r"));
    }

    #[test]
    fn the_completion_code_is_read_from_the_answer() {
        let a = "<?xml version=\"1.0\"?><QuestionFormAnswers xmlns=\"x\">\
                 <Answer><QuestionIdentifier>other</QuestionIdentifier><FreeText>no</FreeText></Answer>\
                 <Answer><QuestionIdentifier>completionCode</QuestionIdentifier>\
                 <FreeText> AB&amp;C </FreeText></Answer></QuestionFormAnswers>";
        assert_eq!(answer_field(a, "completionCode").as_deref(), Some("AB&C"));
        assert_eq!(answer_field(a, "missing"), None);
    }

    #[test]
    fn credentials_stay_out_of_debug() {
        let m = MTurk::new(Endpoint::Sandbox, "AKIDEXAMPLE", "very-secret-key", None).unwrap();
        let shown = format!("{m:?}");
        assert!(!shown.contains("very-secret-key"), "{shown}");
        assert!(MTurk::new(Endpoint::Sandbox, "", "x", None).is_err());
    }
}
