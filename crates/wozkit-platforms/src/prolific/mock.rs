//! A local stand-in of the Prolific endpoints that [`super::Prolific`] uses, with the shapes of
//! Prolific's API reference, for tests and for trying wozkit without an account.
//!
//! It holds the submissions the test gives it, and:
//! - answers `401` (Prolific's error shape) to a request without `Authorization: Token <token>`;
//! - lists the study's submissions in pages of [`MockProlific::set_page_size`] with
//!   `_links.next.href` (absolute URL, `null` on the last page) and `meta.count`;
//! - approves or rejects only a submission `AWAITING REVIEW`; the same decision again is
//!   ignored (Prolific's transition is idempotent); another change of a decided submission is a
//!   `400`; a rejection needs a message of at least 100 characters and a known category;
//! - bulk approves by `submission_ids` (or `study_id` + `participant_ids`), each `AWAITING
//!   REVIEW` or already approved, else a `400` naming the others;
//! - sets up bulk bonuses from `csv_bonuses` (`id,amount` lines; ids of the study's
//!   participants or submissions, else a `400` naming them; amounts with at most two decimals,
//!   else a `400`), answering `201` with the id and the amounts in cents (fees and VAT 0);
//! - pays a set-up bonus once (`202`); paying it again is a `400` (Prolific would pay twice:
//!   the mock makes such a mistake visible);
//! - records every request (method, path with query, body) and the cents paid to each
//!   participant;
//! - answers a single submission (`GET /api/v1/submissions/{id}/`) with its `bonus_payments`,
//!   the cents of each bonus paid on it;
//! - answers the next request (or the next one to a path, [`MockProlific::fail_when`]) with a
//!   given status when the test asks ([`MockProlific::fail_next`]);
//! - does the next request to a path and then answers late or drops the connection
//!   ([`MockProlific::after_commit`]): the client sees no answer although the work was done;
//! - pays in the background when asked ([`MockProlific::pay_in_background`]): a paid bonus
//!   shows on its submission only later.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub use super::ProlificSubmission;
use super::{APPROVED, AWAITING_REVIEW, MIN_REJECTION_MESSAGE, REJECTED, RejectionCategory};

/// One request as the mock received it.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub method: String,
    /// The path with its query.
    pub path: String,
    pub body: String,
}

/// What the mock does to its answer after doing the work (see [`MockProlific::after_commit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answers only after this long (past the client's timeout).
    Delay(std::time::Duration),
    /// Sends the status line and drops the connection before the body.
    Disconnect,
}

struct Bulk {
    /// Participant, submission, cents.
    lines: Vec<(String, String, u64)>,
    paid: bool,
}

struct Mock {
    token: String,
    study: String,
    base: String,
    page_size: usize,
    submissions: Vec<ProlificSubmission>,
    bulks: HashMap<String, Bulk>,
    next_bulk: u64,
    paid: BTreeMap<String, u64>,
    requests: Vec<Recorded>,
    fail_next: Option<u16>,
    fail_when: Option<(String, u16)>,
    after_commit: Option<(String, Fault)>,
    /// Cents of each bonus paid, per submission.
    bonus_payments: BTreeMap<String, Vec<u64>>,
    /// Paying in the background: bonuses paid but not shown on their submissions yet.
    background: Option<Vec<(String, u64)>>,
    /// Studies created through `POST /api/v1/studies/`, as sent, with the id given.
    created: Vec<(String, Value)>,
}

/// The running mock; the server stops when this is dropped.
pub struct MockProlific {
    addr: SocketAddr,
    state: Arc<Mutex<Mock>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockProlific {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockProlific {
    /// Starts the mock on 127.0.0.1 (a free port) for the Prolific study `study`, accepting
    /// `token`, holding `submissions`.
    pub async fn start(
        token: &str,
        study: &str,
        submissions: Vec<ProlificSubmission>,
    ) -> std::io::Result<MockProlific> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(Mock {
            token: token.to_string(),
            study: study.to_string(),
            base: format!("http://{addr}"),
            page_size: 20,
            submissions,
            bulks: HashMap::new(),
            next_bulk: 1,
            paid: BTreeMap::new(),
            requests: vec![],
            fail_next: None,
            fail_when: None,
            after_commit: None,
            bonus_payments: BTreeMap::new(),
            background: None,
            created: vec![],
        }));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockProlific { addr, state, task })
    }

    /// The base URL to give the client (`PROLIFIC_API_URL`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Submissions per page of the list (20, Prolific's default, unless set).
    pub fn set_page_size(&self, n: usize) {
        self.lock().page_size = n.max(1);
    }

    /// Answers the next request with `status` (and Prolific's error shape) instead.
    pub fn fail_next(&self, status: u16) {
        self.lock().fail_next = Some(status);
    }

    /// Answers the next request whose path contains `fragment` (e.g. `/pay/`) with `status`.
    pub fn fail_when(&self, fragment: &str, status: u16) {
        self.lock().fail_when = Some((fragment.to_string(), status));
    }

    /// Does the next request whose path contains `fragment` (e.g. `/pay/`), then answers it
    /// with `fault`: late, or not at all.
    pub fn after_commit(&self, fragment: &str, fault: Fault) {
        self.lock().after_commit = Some((fragment.to_string(), fault));
    }

    /// The cents of each bonus paid on each submission.
    pub fn bonus_payments(&self) -> BTreeMap<String, Vec<u64>> {
        self.lock().bonus_payments.clone()
    }

    /// Pays bulk bonuses from now on as Prolific does, in the background: the money moves
    /// ([`MockProlific::paid_cents`]) but the submissions do not list the bonuses until
    /// [`MockProlific::show_background_payments`].
    pub fn pay_in_background(&self) {
        self.lock().background.get_or_insert_with(Vec::new);
    }

    /// Lists the bonuses paid in the background on their submissions, and pays at once again.
    pub fn show_background_payments(&self) {
        let mut m = self.lock();
        for (sub, c) in m.background.take().unwrap_or_default() {
            m.bonus_payments.entry(sub).or_default().push(c);
        }
    }

    /// The studies created so far: their ids and the bodies sent.
    pub fn created_studies(&self) -> Vec<(String, Value)> {
        self.lock().created.clone()
    }

    /// Adds a submission.
    pub fn add(&self, s: ProlificSubmission) {
        self.lock().submissions.push(s);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// Cents paid in bonuses to each participant (paid bulk payments only).
    pub fn paid_cents(&self) -> BTreeMap<String, u64> {
        self.lock().paid.clone()
    }

    /// The submissions as they stand now.
    pub fn submissions(&self) -> Vec<ProlificSubmission> {
        self.lock().submissions.clone()
    }

    /// The status of a submission.
    pub fn status(&self, id: &str) -> Option<String> {
        self.lock()
            .submissions
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.status.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mock> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Prolific's error answer.
fn error(status: StatusCode, title: &str, detail: Value) -> Response {
    (
        status,
        axum::Json(json!({"error": {
            "status": status.as_u16(),
            "error_code": u32::from(status.as_u16()) * 100,
            "title": title,
            "detail": detail,
        }})),
    )
        .into_response()
}

async fn handle(
    State(state): State<Arc<Mutex<Mock>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (answer, fault) = {
        let mut m = state.lock().unwrap_or_else(|p| p.into_inner());
        let fault = match &m.after_commit {
            Some((fragment, fault)) if uri.path().contains(fragment.as_str()) => Some(*fault),
            _ => None,
        };
        if fault.is_some() {
            m.after_commit = None;
        }
        (respond(&mut m, method, uri, headers, body), fault)
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

fn respond(m: &mut Mock, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body_text = String::from_utf8_lossy(&body).into_owned();
    m.requests.push(Recorded {
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_string(), |p| p.to_string()),
        body: body_text.clone(),
    });
    let failing = match &m.fail_when {
        Some((fragment, status)) if uri.path().contains(fragment.as_str()) => Some(*status),
        _ => None,
    };
    if failing.is_some() {
        m.fail_when = None;
    }
    if let Some(status) = m.fail_next.take().or(failing) {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return error(
            status,
            "Mock failure",
            json!("the test asked for this failure"),
        );
    }
    let wanted = format!("Token {}", m.token);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(wanted.as_str()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "Not authenticated",
            json!("Invalid token."),
        );
    }
    let body: Value = if body_text.trim().is_empty() {
        Value::Null
    } else {
        match serde_json::from_str(&body_text) {
            Ok(v) => v,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad request",
                    json!(format!("JSON parse error: {e}")),
                );
            }
        }
    };
    let path = uri.path().trim_end_matches('/');
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["api", "v1", "studies", study, "submissions"]) => {
            let page = query(&uri, "page")
                .and_then(|p| p.parse::<usize>().ok())
                .unwrap_or(1)
                .max(1);
            list(m, study, page)
        }
        ("GET", ["api", "v1", "submissions", id]) => one_submission(m, id),
        ("POST", ["api", "v1", "studies"]) => create_study(m, &body),
        ("POST", ["api", "v1", "submissions", "bulk-approve"]) => bulk_approve(m, &body),
        ("POST", ["api", "v1", "submissions", "bonus-payments"]) => setup_bonus(m, &body),
        ("POST", ["api", "v1", "submissions", id, "transition"]) => transition(m, id, &body),
        ("POST", ["api", "v1", "bulk-bonus-payments", id, "pay"]) => pay(m, id),
        _ => error(
            StatusCode::NOT_FOUND,
            "Not found",
            json!(format!("{method} {path} is not an endpoint of the mock")),
        ),
    }
}

fn query(uri: &Uri, key: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

fn list(m: &Mock, study: &str, page: usize) -> Response {
    if study != m.study {
        return error(
            StatusCode::NOT_FOUND,
            "Not found",
            json!(format!("no study {study}")),
        );
    }
    let all = &m.submissions;
    let start = (page - 1) * m.page_size;
    let results: Vec<&ProlificSubmission> = all.iter().skip(start).take(m.page_size).collect();
    let href = |p: usize| format!("{}/api/v1/studies/{study}/submissions/?page={p}", m.base);
    let next = (start + m.page_size < all.len()).then(|| href(page + 1));
    let previous = (page > 1).then(|| href(page - 1));
    let last = all.len().div_ceil(m.page_size).max(1);
    axum::Json(json!({
        "results": results,
        "_links": {
            "self": {"href": href(page), "title": "Current"},
            "next": {"href": next, "title": "Next"},
            "previous": {"href": previous, "title": "Previous"},
            "last": {"href": href(last), "title": "Last"},
        },
        "meta": {"count": all.len()},
    }))
    .into_response()
}

fn transition(m: &mut Mock, id: &str, body: &Value) -> Response {
    let action = body.get("action").and_then(Value::as_str).unwrap_or("");
    let target = match action {
        "APPROVE" => APPROVED,
        "REJECT" => {
            let message = body.get("message").and_then(Value::as_str).unwrap_or("");
            if message.chars().count() < MIN_REJECTION_MESSAGE {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad request",
                    json!({"message": [format!(
                        "Ensure this field has at least {MIN_REJECTION_MESSAGE} characters."
                    )]}),
                );
            }
            let category = body
                .get("rejection_category")
                .and_then(Value::as_str)
                .unwrap_or("");
            if RejectionCategory::parse(category).is_none() {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad request",
                    json!({"rejection_category": [format!("\"{category}\" is not a valid choice.")]}),
                );
            }
            REJECTED
        }
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                "Bad request",
                json!({"action": [format!("\"{other}\" is not a valid choice.")]}),
            );
        }
    };
    let Some(s) = m.submissions.iter_mut().find(|s| s.id == id) else {
        return error(
            StatusCode::NOT_FOUND,
            "Not found",
            json!(format!("no submission {id}")),
        );
    };
    if s.status == target {
        // Idempotent: the same request again is ignored.
    } else if s.status == AWAITING_REVIEW {
        s.status = target.to_string();
    } else {
        return error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            json!(format!(
                "submission {id} is {}: only a submission AWAITING REVIEW can be {}",
                s.status,
                target.to_lowercase()
            )),
        );
    }
    axum::Json(serde_json::to_value(&*s).unwrap_or(Value::Null)).into_response()
}

fn bulk_approve(m: &mut Mock, body: &Value) -> Response {
    let strings = |key: &str| -> Option<Vec<String>> {
        body.get(key)?.as_array().map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
    };
    let indices: Vec<Option<usize>> = if let Some(ids) = strings("submission_ids") {
        ids.iter()
            .map(|id| m.submissions.iter().position(|s| &s.id == id))
            .collect()
    } else if let (Some(study), Some(pids)) = (
        body.get("study_id").and_then(Value::as_str),
        strings("participant_ids"),
    ) {
        if study != m.study {
            return error(
                StatusCode::BAD_REQUEST,
                "Bad request",
                json!(format!("no study {study}")),
            );
        }
        pids.iter()
            .map(|p| m.submissions.iter().position(|s| &s.participant_id == p))
            .collect()
    } else {
        return error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            json!("give submission_ids, or study_id and participant_ids"),
        );
    };
    let wrong: Vec<String> = indices
        .iter()
        .enumerate()
        .filter_map(|(n, i)| match i {
            None => Some(format!("#{n}: unknown")),
            Some(i) => {
                let s = &m.submissions[*i];
                (s.status != AWAITING_REVIEW && s.status != APPROVED)
                    .then(|| format!("{}: {}", s.id, s.status))
            }
        })
        .collect();
    if !wrong.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            json!(format!("cannot approve: {}", wrong.join(", "))),
        );
    }
    for i in indices.into_iter().flatten() {
        m.submissions[i].status = APPROVED.to_string();
    }
    axum::Json(json!(
        "The request to bulk approve has been made successfully."
    ))
    .into_response()
}

/// Cents of a CSV amount with at most two decimals.
fn parse_cents(text: &str) -> Option<u64> {
    let (units, frac) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    if units.is_empty() || !units.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 2 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_cents = match frac.len() {
        0 => 0,
        1 => frac.parse::<u64>().ok()? * 10,
        _ => frac.parse::<u64>().ok()?,
    };
    units
        .parse::<u64>()
        .ok()?
        .checked_mul(100)?
        .checked_add(frac_cents)
}

fn setup_bonus(m: &mut Mock, body: &Value) -> Response {
    let study = body.get("study_id").and_then(Value::as_str).unwrap_or("");
    if study != m.study {
        return error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            json!({"study_id": [format!("no study {study}")]}),
        );
    }
    let csv = body
        .get("csv_bonuses")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut lines = vec![];
    let mut wrong = vec![];
    for line in csv.lines().filter(|l| !l.trim().is_empty()) {
        let Some((id, amount)) = line.split_once(',') else {
            wrong.push(format!("`{line}`: not id,amount"));
            continue;
        };
        let id = id.trim();
        // A submission id stands for its participant; a participant id for their submission.
        let who = m
            .submissions
            .iter()
            .find(|s| s.id == id)
            .or_else(|| m.submissions.iter().find(|s| s.participant_id == id))
            .map(|s| (s.participant_id.clone(), s.id.clone()));
        match (who, parse_cents(amount)) {
            (Some((who, sub)), Some(c)) if c > 0 => lines.push((who, sub, c)),
            (None, _) => wrong.push(format!("{id}: did not take part in the study")),
            (_, _) => wrong.push(format!("{id}: bad amount `{}`", amount.trim())),
        }
    }
    if !wrong.is_empty() || lines.is_empty() {
        let detail = if wrong.is_empty() {
            "no bonuses given".to_string()
        } else {
            wrong.join("; ")
        };
        return error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            json!({"csv_bonuses": [detail]}),
        );
    }
    let id = format!("bulk{:06}", m.next_bulk);
    m.next_bulk += 1;
    let total: u64 = lines.iter().map(|(_, _, c)| c).sum();
    m.bulks.insert(id.clone(), Bulk { lines, paid: false });
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "id": id,
            "study": m.study,
            "amount": total as f64,
            "fees": 0.0,
            "vat": 0.0,
            "total_amount": total as f64,
        })),
    )
        .into_response()
}

fn pay(m: &mut Mock, id: &str) -> Response {
    let Some(bulk) = m.bulks.get_mut(id) else {
        return error(
            StatusCode::NOT_FOUND,
            "Not found",
            json!(format!("no bulk bonus payment {id}")),
        );
    };
    if bulk.paid {
        return error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            json!(format!("bulk bonus payment {id} was paid already")),
        );
    }
    bulk.paid = true;
    let lines = bulk.lines.clone();
    for (who, sub, c) in lines {
        *m.paid.entry(who).or_default() += c;
        match &mut m.background {
            Some(later) => later.push((sub, c)),
            None => m.bonus_payments.entry(sub).or_default().push(c),
        }
    }
    StatusCode::ACCEPTED.into_response()
}

/// A single submission as Prolific answers it, with the bonuses paid on it.
fn one_submission(m: &Mock, id: &str) -> Response {
    let Some(s) = m.submissions.iter().find(|s| s.id == id) else {
        return error(
            StatusCode::NOT_FOUND,
            "Not found",
            json!(format!("no submission {id}")),
        );
    };
    let paid: Vec<f64> = m
        .bonus_payments
        .get(id)
        .map(|v| v.iter().map(|c| *c as f64).collect())
        .unwrap_or_default();
    axum::Json(json!({
        "id": s.id,
        "study_id": m.study,
        "participant": s.participant_id,
        "status": s.status,
        "entered_code": s.study_code,
        "started_at": s.started_at,
        "completed_at": s.completed_at,
        "bonus_payments": paid,
    }))
    .into_response()
}

/// Prolific's completion code types and actions (the ones a study may name).
const CODE_TYPES: &[&str] = &[
    "COMPLETED",
    "FAILED_ATTENTION_CHECK",
    "FOLLOW_UP_STUDY",
    "GIVE_BONUS",
    "INCOMPATIBLE_DEVICE",
    "NO_CONSENT",
    "OTHER",
    "FIXED_SCREENOUT",
];
const CODE_ACTIONS: &[&str] = &[
    "AUTOMATICALLY_APPROVE",
    "MANUALLY_REVIEW",
    "REQUEST_RETURN",
    "ADD_TO_PARTICIPANT_GROUP",
    "REMOVE_FROM_PARTICIPANT_GROUP",
    "DYNAMIC_PAYMENT",
    "FIXED_SCREEN_OUT_PAYMENT",
];

/// `POST /api/v1/studies/`: a draft study, checked as Prolific checks what wozkit sends.
fn create_study(m: &mut Mock, body: &Value) -> Response {
    let bad = |detail: String| error(StatusCode::BAD_REQUEST, "Bad request", json!(detail));
    for field in ["name", "internal_name", "description", "external_study_url"] {
        if body[field].as_str().is_none_or(|v| v.trim().is_empty()) {
            return bad(format!("{field}: this field is required"));
        }
    }
    let url = body["external_study_url"].as_str().unwrap_or_default();
    if !url.starts_with("https://") {
        return bad("external_study_url: enter a valid https URL".into());
    }
    if body["prolific_id_option"] == "url_parameters"
        && !["{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}"]
            .iter()
            .all(|p| url.contains(p))
    {
        return bad("external_study_url: the URL parameters are missing".into());
    }
    for field in [
        "total_available_places",
        "estimated_completion_time",
        "reward",
    ] {
        if body[field].as_u64().is_none_or(|n| n == 0) {
            return bad(format!("{field}: a positive integer is required"));
        }
    }
    let Some(codes) = body["completion_codes"]
        .as_array()
        .filter(|c| !c.is_empty())
    else {
        return bad("completion_codes: at least one completion code is required".into());
    };
    let mut seen = std::collections::HashSet::new();
    for c in codes {
        let code = c["code"].as_str().unwrap_or_default();
        if code.is_empty() || !seen.insert(code.to_string()) {
            return bad(format!(
                "completion_codes: `{code}` is empty or given twice"
            ));
        }
        let ty = c["code_type"].as_str().unwrap_or_default();
        if !CODE_TYPES.contains(&ty) {
            return bad(format!("completion_codes: unknown code_type `{ty}`"));
        }
        let actions = c["actions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if actions.is_empty()
            || actions
                .iter()
                .any(|a| !CODE_ACTIONS.contains(&a["action"].as_str().unwrap_or_default()))
        {
            return bad(format!("completion_codes: `{code}` needs known actions"));
        }
    }
    let id = format!("mockstudy{:04}", m.created.len() + 1);
    m.created.push((id.clone(), body.clone()));
    let mut answer = body.clone();
    answer["id"] = json!(id);
    answer["status"] = json!("UNPUBLISHED");
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}
