//! A local stand-in of MTurk's requester API (the AWS JSON 1.1 protocol) for the operations
//! wozkit uses, following the API reference: every request is `POST /` with
//! `Content-Type: application/x-amz-json-1.1`, `X-Amz-Target:
//! MTurkRequesterServiceV20170117.<Operation>` and a SigV4 `Authorization` header (checked to be
//! present and to name the mock's access key; the signature itself is not verified). Errors are
//! status 400 with `{"__type": "RequestError" | "ServiceFault", "Message": …}`.
//!
//! The state rules it keeps, as MTurk documents them:
//! - only a `Submitted` assignment is approved or rejected (a `Rejected` one may be approved
//!   with `OverrideRejection`); a rejection needs `RequesterFeedback`;
//! - a bonus is paid to the worker of the assignment it names, with a reason; a
//!   `UniqueRequestToken` used before is answered with MTurk's error (`The idempotency token
//!   "…" has already been processed.`, naming the earlier request) and pays nothing; the same
//!   for a HIT;
//! - an ExternalQuestion's `ExternalURL` is an `https://` address;
//! - `ListAssignmentsForHIT` pages by `MaxResults` (at most 100) and `NextToken`.
//!
//! It records every call (operation and body) and the bonuses paid, per worker in cents, lists
//! them (`ListBonusPayments` by assignment or HIT) and answers `GetAssignment`; it refuses a
//! chosen request when a test asks ([`MockMTurk::fail_when`]), and does a chosen request then
//! answers it late or drops the connection ([`MockMTurk::after_commit`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::cents_of;
pub use crate::prolific::mock::Fault;

/// The target prefix of every operation.
pub const TARGET_PREFIX: &str = "MTurkRequesterServiceV20170117.";
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// One request the mock received.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The operation (`CreateHIT`, …).
    pub operation: String,
    /// The JSON body.
    pub body: Value,
}

/// A HIT as created.
#[derive(Clone, Debug, PartialEq)]
pub struct MockHit {
    pub id: String,
    pub type_id: String,
    /// The body of its CreateHIT request.
    pub request: Value,
    /// The Question document.
    pub question: String,
    pub reward_cents: u64,
    pub max_assignments: i64,
}

/// An assignment the mock holds.
#[derive(Clone, Debug, PartialEq)]
pub struct MockAssignment {
    pub id: String,
    pub hit_id: String,
    pub worker_id: String,
    /// `Submitted`, `Approved` or `Rejected`.
    pub status: String,
    pub answer: String,
    pub feedback: Option<String>,
    pub submit_time: i64,
}

/// A bonus paid.
#[derive(Clone, Debug, PartialEq)]
pub struct PaidBonus {
    pub worker_id: String,
    pub assignment_id: String,
    pub cents: u64,
    pub reason: String,
    pub token: Option<String>,
}

#[derive(Default)]
struct Mock {
    access_key: String,
    next_id: u64,
    hits: Vec<MockHit>,
    hit_tokens: HashMap<String, String>,
    assignments: Vec<MockAssignment>,
    qualification_types: BTreeMap<String, String>,
    grants: Vec<(String, String, i64)>,
    blocks: BTreeMap<String, String>,
    bonuses: Vec<PaidBonus>,
    bonus_tokens: HashMap<String, String>,
    calls: Vec<Call>,
    /// Requests to refuse once: operation, body field, its value, the RequestError message.
    fail_when: Vec<(String, String, String, String)>,
    /// Requests to do and then answer late or not at all, once: operation and fault.
    after_commit: Vec<(String, Fault)>,
}

impl Mock {
    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:026X}", self.next_id)
    }
}

/// The running mock; the server stops when this is dropped.
pub struct MockMTurk {
    addr: SocketAddr,
    state: Arc<Mutex<Mock>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockMTurk {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockMTurk {
    /// Starts the mock on 127.0.0.1 (a free port), accepting requests signed with
    /// `access_key`.
    pub async fn start(access_key: &str) -> std::io::Result<MockMTurk> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(Mock {
            access_key: access_key.to_string(),
            ..Mock::default()
        }));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockMTurk { addr, state, task })
    }

    /// Refuses the next `operation` request whose body has `field` equal to `value` with a
    /// `RequestError` of `message` (once; nothing of it is done, e.g. no bonus is paid).
    pub fn fail_when(&self, operation: &str, field: &str, value: &str, message: &str) {
        self.state()
            .fail_when
            .push((operation.into(), field.into(), value.into(), message.into()));
    }

    /// Does the next `operation` request, then answers it with `fault` (late, or by dropping
    /// the connection): the client gets no answer although MTurk did it.
    pub fn after_commit(&self, operation: &str, fault: Fault) {
        self.state().after_commit.push((operation.into(), fault));
    }

    /// The endpoint to give the client (`WOZKIT_MTURK_ENDPOINT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Mock> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker accepts a HIT and submits `answer` (a QuestionFormAnswers document): the new
    /// assignment's id.
    pub fn submit(&self, hit_id: &str, worker_id: &str, answer: &str) -> String {
        let mut m = self.state();
        let id = m.id("3A");
        let n = m.assignments.len() as i64;
        m.assignments.push(MockAssignment {
            id: id.clone(),
            hit_id: hit_id.to_string(),
            worker_id: worker_id.to_string(),
            status: super::SUBMITTED.into(),
            answer: answer.to_string(),
            feedback: None,
            submit_time: 1_700_000_000 + n,
        });
        id
    }

    /// Adds an assignment with a given id (e.g. the one a worker's entry link carried).
    pub fn add_assignment(&self, a: MockAssignment) {
        self.state().assignments.push(a);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The operations called so far, in order.
    pub fn operations(&self) -> Vec<String> {
        self.state()
            .calls
            .iter()
            .map(|c| c.operation.clone())
            .collect()
    }

    /// The HITs created.
    pub fn hits(&self) -> Vec<MockHit> {
        self.state().hits.clone()
    }

    /// Every assignment.
    pub fn assignments(&self) -> Vec<MockAssignment> {
        self.state().assignments.clone()
    }

    /// An assignment's status.
    pub fn status(&self, assignment_id: &str) -> Option<String> {
        self.state()
            .assignments
            .iter()
            .find(|a| a.id == assignment_id)
            .map(|a| a.status.clone())
    }

    /// Every bonus paid.
    pub fn bonuses(&self) -> Vec<PaidBonus> {
        self.state().bonuses.clone()
    }

    /// Bonuses paid per worker, in cents.
    pub fn bonus_cents(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for b in &self.state().bonuses {
            *out.entry(b.worker_id.clone()).or_default() += b.cents;
        }
        out
    }

    /// Rewards paid per worker (the reward of each approved assignment's HIT), in cents.
    pub fn reward_cents(&self) -> BTreeMap<String, u64> {
        let m = self.state();
        let mut out = BTreeMap::new();
        for a in m.assignments.iter().filter(|a| a.status == "Approved") {
            let reward = m
                .hits
                .iter()
                .find(|h| h.id == a.hit_id)
                .map_or(0, |h| h.reward_cents);
            *out.entry(a.worker_id.clone()).or_default() += reward;
        }
        out
    }

    /// The workers blocked, with their reasons.
    pub fn blocks(&self) -> BTreeMap<String, String> {
        self.state().blocks.clone()
    }

    /// Qualification types created: id to name.
    pub fn qualification_types(&self) -> BTreeMap<String, String> {
        self.state().qualification_types.clone()
    }

    /// Qualifications granted: (type id, worker id, value).
    pub fn grants(&self) -> Vec<(String, String, i64)> {
        self.state().grants.clone()
    }
}

/// A 400 in MTurk's error shape.
fn error(kind: &str, message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        json!({"__type": kind, "Message": message, "TurkErrorCode": kind}).to_string(),
    )
        .into_response()
}

/// An operation's refusal: MTurk's `RequestError` with its message.
struct Fail(String);

fn fail(message: &str) -> Fail {
    Fail(message.to_string())
}

fn ok(body: Value) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, CONTENT_TYPE),
            (
                header::HeaderName::from_static("x-amzn-requestid"),
                "00000000-0000-4000-8000-000000000000",
            ),
        ],
        body.to_string(),
    )
        .into_response()
}

async fn handle(
    State(state): State<Arc<Mutex<Mock>>>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix(TARGET_PREFIX))
        .unwrap_or_default()
        .to_string();
    let (answer, fault) = {
        let fault = {
            let mut m = state.lock().unwrap_or_else(|e| e.into_inner());
            let i = m.after_commit.iter().position(|(op, _)| *op == target);
            i.map(|i| m.after_commit.remove(i).1)
        };
        (respond(&state, method, uri, headers, body), fault)
    };
    match fault {
        None => answer,
        Some(Fault::Delay(d)) => {
            tokio::time::sleep(d).await;
            answer
        }
        Some(Fault::Disconnect) => {
            let broken = futures_util::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "the mock dropped the connection",
                ))
            });
            (answer.status(), axum::body::Body::from_stream(broken)).into_response()
        }
    }
}

fn respond(
    state: &Arc<Mutex<Mock>>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST || uri.path() != "/" {
        return error("UnknownOperationException", "MTurk takes POST / only");
    }
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    if !text(header::CONTENT_TYPE).starts_with(CONTENT_TYPE) {
        return error(
            "SerializationException",
            "Content-Type must be application/x-amz-json-1.1",
        );
    }
    let target = text(header::HeaderName::from_static("x-amz-target"));
    let Some(operation) = target.strip_prefix(TARGET_PREFIX).map(str::to_string) else {
        return error(
            "UnknownOperationException",
            &format!("X-Amz-Target must start with {TARGET_PREFIX}"),
        );
    };
    let mut m = state.lock().unwrap_or_else(|e| e.into_inner());
    let auth = text(header::AUTHORIZATION);
    let wanted = format!("AWS4-HMAC-SHA256 Credential={}/", m.access_key);
    if !auth.starts_with(&wanted) || !auth.contains("Signature=") {
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, CONTENT_TYPE)],
            json!({"__type": "UnrecognizedClientException",
                   "Message": "The security token included in the request is invalid."})
            .to_string(),
        )
            .into_response();
    }
    let body: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return error("SerializationException", &format!("bad JSON: {e}")),
        }
    };
    m.calls.push(Call {
        operation: operation.clone(),
        body: body.clone(),
    });
    let refuse = m.fail_when.iter().position(|(op, field, value, _)| {
        *op == operation && body.get(field).and_then(Value::as_str) == Some(value.as_str())
    });
    if let Some(i) = refuse {
        let (.., message) = m.fail_when.remove(i);
        return error("RequestError", &message);
    }
    dispatch(&mut m, &operation, &body)
}

/// Answers one operation of the API on the mock's state.
fn dispatch(m: &mut Mock, operation: &str, body: &Value) -> Response {
    let answer = match operation {
        "CreateHIT" => create_hit(m, body),
        "CreateQualificationType" => create_qualification_type(m, body),
        "AssociateQualificationWithWorker" => associate(m, body),
        "ListAssignmentsForHIT" => list_assignments(m, body),
        "ApproveAssignment" => decide(m, body, true),
        "RejectAssignment" => decide(m, body, false),
        "SendBonus" => send_bonus(m, body),
        "ListBonusPayments" => list_bonuses(m, body),
        "GetAssignment" => get_assignment(m, body),
        "CreateWorkerBlock" => block(m, body),
        other => {
            return error(
                "UnknownOperationException",
                &format!("the mock does not implement {other}"),
            );
        }
    };
    match answer {
        Ok(body) => ok(body),
        Err(Fail(message)) => error("RequestError", &message),
    }
}

fn s<'a>(body: &'a Value, key: &str) -> Option<&'a str> {
    body.get(key).and_then(Value::as_str)
}

fn required<'a>(body: &'a Value, key: &str) -> Result<&'a str, Fail> {
    s(body, key)
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| {
            fail(&format!(
                "Value null at '{key}' failed to satisfy constraint: Member must not be null"
            ))
        })
}

fn create_hit(m: &mut Mock, body: &Value) -> Result<Value, Fail> {
    for key in ["Title", "Description", "Reward", "Question"] {
        required(body, key)?;
    }
    for key in ["LifetimeInSeconds", "AssignmentDurationInSeconds"] {
        if body.get(key).and_then(Value::as_i64).is_none() {
            return Err(fail(&format!("{key} is required")));
        }
    }
    let reward =
        cents_of(required(body, "Reward")?).ok_or_else(|| fail("Reward is not a valid amount"))?;
    let question = required(body, "Question")?.to_string();
    let url = question
        .split("<ExternalURL>")
        .nth(1)
        .and_then(|r| r.split("</ExternalURL>").next())
        .map(str::trim);
    match url {
        Some(u) if question.contains("<ExternalQuestion") && u.starts_with("https://") => {}
        Some(_) => return Err(fail("The ExternalURL must be an https:// address")),
        None => {
            return Err(fail("The Question is not a valid ExternalQuestion"));
        }
    }
    if let Some(t) = s(body, "UniqueRequestToken")
        && let Some(id) = m.hit_tokens.get(t)
    {
        return Err(fail(&format!(
            "The HIT with UniqueRequestToken {t} already exists (HITId {id})"
        )));
    }
    let max = body
        .get("MaxAssignments")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let id = m.id("3H");
    let type_id = m.id("3T");
    if let Some(t) = s(body, "UniqueRequestToken") {
        m.hit_tokens.insert(t.to_string(), id.clone());
    }
    m.hits.push(MockHit {
        id: id.clone(),
        type_id: type_id.clone(),
        request: body.clone(),
        question: question.clone(),
        reward_cents: reward,
        max_assignments: max,
    });
    let lifetime = body["LifetimeInSeconds"].as_i64().unwrap_or(0);
    Ok(json!({"HIT": {
        "HITId": id,
        "HITTypeId": type_id,
        "CreationTime": 1_700_000_000,
        "Title": body["Title"],
        "Description": body["Description"],
        "Question": question,
        "Keywords": body.get("Keywords").cloned().unwrap_or(Value::Null),
        "HITStatus": "Assignable",
        "MaxAssignments": max,
        "Reward": super::amount(reward),
        "AutoApprovalDelayInSeconds": body.get("AutoApprovalDelayInSeconds").cloned().unwrap_or(json!(2_592_000)),
        "Expiration": 1_700_000_000 + lifetime,
        "AssignmentDurationInSeconds": body["AssignmentDurationInSeconds"],
        "QualificationRequirements": body.get("QualificationRequirements").cloned().unwrap_or(json!([])),
        "HITReviewStatus": "NotReviewed",
        "NumberOfAssignmentsPending": 0,
        "NumberOfAssignmentsAvailable": max,
        "NumberOfAssignmentsCompleted": 0,
    }}))
}

fn create_qualification_type(m: &mut Mock, body: &Value) -> Result<Value, Fail> {
    let name = required(body, "Name")?.to_string();
    let description = required(body, "Description")?.to_string();
    let status = required(body, "QualificationTypeStatus")?.to_string();
    if m.qualification_types.values().any(|n| *n == name) {
        return Err(fail(&format!(
            "You have already created a QualificationType with this name: {name}"
        )));
    }
    let id = m.id("3Q");
    m.qualification_types.insert(id.clone(), name.clone());
    Ok(json!({"QualificationType": {
        "QualificationTypeId": id,
        "CreationTime": 1_700_000_000,
        "Name": name,
        "Description": description,
        "QualificationTypeStatus": status,
        "IsRequestable": true,
        "AutoGranted": false,
    }}))
}

fn associate(m: &mut Mock, body: &Value) -> Result<Value, Fail> {
    let q = required(body, "QualificationTypeId")?.to_string();
    let w = required(body, "WorkerId")?.to_string();
    if !m.qualification_types.contains_key(&q) {
        return Err(fail(&format!("QualificationType {q} does not exist")));
    }
    let v = body
        .get("IntegerValue")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    m.grants.retain(|(t, wk, _)| !(*t == q && *wk == w));
    m.grants.push((q, w, v));
    Ok(json!({}))
}

fn assignment_json(a: &MockAssignment) -> Value {
    let mut v = json!({
    "AssignmentId": a.id,
    "WorkerId": a.worker_id,
    "HITId": a.hit_id,
    "AssignmentStatus": a.status,
    "AutoApprovalTime": a.submit_time + 2_592_000,
    "AcceptTime": a.submit_time - 600,
    "SubmitTime": a.submit_time,
    "Answer": a.answer,
    });
    if let Some(f) = &a.feedback {
        v["RequesterFeedback"] = json!(f);
    }
    v
}

fn list_assignments(m: &Mock, body: &Value) -> Result<Value, Fail> {
    let hit = required(body, "HITId")?;
    if !m.hits.iter().any(|h| h.id == hit) {
        return Err(fail(&format!("Hit {hit} does not exist")));
    }
    let max = body.get("MaxResults").and_then(Value::as_i64).unwrap_or(10);
    if !(1..=100).contains(&max) {
        return Err(fail("MaxResults must be between 1 and 100"));
    }
    let statuses: Option<Vec<&str>> = body
        .get("AssignmentStatuses")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect());
    let all: Vec<&MockAssignment> = m
        .assignments
        .iter()
        .filter(|a| a.hit_id == hit)
        .filter(|a| {
            statuses
                .as_ref()
                .is_none_or(|s| s.contains(&a.status.as_str()))
        })
        .collect();
    let start = match s(body, "NextToken") {
        Some(t) => t
            .strip_prefix("page:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| fail("The NextToken is not valid"))?,
        None => 0,
    };
    let page: Vec<Value> = all
        .iter()
        .skip(start)
        .take(max as usize)
        .map(|a| assignment_json(a))
        .collect();
    let end = start + page.len();
    let mut out = json!({"NumResults": page.len(), "Assignments": page});
    if end < all.len() {
        out["NextToken"] = json!(format!("page:{end}"));
    }
    Ok(out)
}

fn decide(m: &mut Mock, body: &Value, approve: bool) -> Result<Value, Fail> {
    let id = required(body, "AssignmentId")?.to_string();
    let feedback = s(body, "RequesterFeedback").map(str::to_string);
    if !approve && feedback.as_deref().is_none_or(|f| f.trim().is_empty()) {
        return Err(fail("RequesterFeedback is required to reject"));
    }
    let override_rejection = body
        .get("OverrideRejection")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let a = m
        .assignments
        .iter_mut()
        .find(|a| a.id == id)
        .ok_or_else(|| fail(&format!("Assignment {id} does not exist")))?;
    let allowed =
        a.status == super::SUBMITTED || (approve && override_rejection && a.status == "Rejected");
    if !allowed {
        return Err(fail(&format!(
            "This operation can be called with a status of: Submitted (assignment {id} is {})",
            a.status
        )));
    }
    a.status = if approve { "Approved" } else { "Rejected" }.into();
    a.feedback = feedback;
    Ok(json!({}))
}

fn send_bonus(m: &mut Mock, body: &Value) -> Result<Value, Fail> {
    let worker = required(body, "WorkerId")?.to_string();
    let assignment = required(body, "AssignmentId")?.to_string();
    let reason = required(body, "Reason")?.to_string();
    let cents = cents_of(required(body, "BonusAmount")?)
        .filter(|c| *c > 0)
        .ok_or_else(|| fail("BonusAmount is not a valid positive amount"))?;
    let token = s(body, "UniqueRequestToken").map(str::to_string);
    if let Some(t) = &token {
        if t.len() > 64 {
            return Err(fail("UniqueRequestToken is longer than 64 characters"));
        }
        if let Some(request) = m.bonus_tokens.get(t) {
            return Err(fail(&format!(
                "The idempotency token \"{t}\" has already been processed. ({request})"
            )));
        }
    }
    let Some(a) = m.assignments.iter().find(|a| a.id == assignment) else {
        return Err(fail(&format!("Assignment {assignment} does not exist")));
    };
    if a.worker_id != worker {
        return Err(fail(&format!(
            "Assignment {assignment} was not done by worker {worker}"
        )));
    }
    let request = m.id("R");
    if let Some(t) = &token {
        m.bonus_tokens.insert(t.clone(), request);
    }
    m.bonuses.push(PaidBonus {
        worker_id: worker,
        assignment_id: assignment,
        cents,
        reason,
        token,
    });
    Ok(json!({}))
}

fn list_bonuses(m: &Mock, body: &Value) -> Result<Value, Fail> {
    let assignment = s(body, "AssignmentId");
    let hit = s(body, "HITId");
    if assignment.is_none() == hit.is_none() {
        return Err(fail("Either the HITId or the AssignmentId must be given"));
    }
    let max = body.get("MaxResults").and_then(Value::as_i64).unwrap_or(10);
    if !(1..=100).contains(&max) {
        return Err(fail("MaxResults must be between 1 and 100"));
    }
    let of_hit = |a: &str| {
        m.assignments
            .iter()
            .any(|x| x.id == a && Some(x.hit_id.as_str()) == hit)
    };
    let all: Vec<Value> = m
        .bonuses
        .iter()
        .filter(|b| Some(b.assignment_id.as_str()) == assignment || of_hit(&b.assignment_id))
        .map(|b| {
            json!({
                "WorkerId": b.worker_id,
                "BonusAmount": super::amount(b.cents),
                "AssignmentId": b.assignment_id,
                "Reason": b.reason,
                "GrantTime": 1_700_000_000,
            })
        })
        .collect();
    let start = match s(body, "NextToken") {
        Some(t) => t
            .strip_prefix("page:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| fail("The NextToken is not valid"))?,
        None => 0,
    };
    let page: Vec<Value> = all.iter().skip(start).take(max as usize).cloned().collect();
    let end = start + page.len();
    let mut out = json!({"NumResults": page.len(), "BonusPayments": page});
    if end < all.len() {
        out["NextToken"] = json!(format!("page:{end}"));
    }
    Ok(out)
}

fn get_assignment(m: &Mock, body: &Value) -> Result<Value, Fail> {
    let id = required(body, "AssignmentId")?;
    let a = m
        .assignments
        .iter()
        .find(|a| a.id == id)
        .ok_or_else(|| fail(&format!("Assignment {id} does not exist")))?;
    Ok(json!({"Assignment": assignment_json(a)}))
}

fn block(m: &mut Mock, body: &Value) -> Result<Value, Fail> {
    let worker = required(body, "WorkerId")?.to_string();
    let reason = required(body, "Reason")?.to_string();
    m.blocks.insert(worker, reason);
    Ok(json!({}))
}

/// A QuestionFormAnswers document as MTurk records a submit form with these fields.
pub fn answer_document(fields: &[(&str, &str)]) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"ASCII\"?><QuestionFormAnswers xmlns=\"http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd\">",
    );
    for (k, v) in fields {
        out.push_str(&format!(
            "<Answer><QuestionIdentifier>{}</QuestionIdentifier><FreeText>{}</FreeText></Answer>",
            super::xml_escape(k),
            super::xml_escape(v)
        ));
    }
    out.push_str("</QuestionFormAnswers>");
    out
}
