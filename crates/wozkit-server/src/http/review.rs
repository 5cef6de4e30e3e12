//! Reviewing and paying a study's participants: one row each with their sessions, answers,
//! flags (failed gold, time outliers, idle partner or own silence, disconnects), payment and
//! decision; approve, reject, bonus, block and note, one at a time or in bulk on a filter; each
//! decision an event of the study's review log ([`crate::review`]); and sending the decisions to
//! the crowd platforms. A decision that cannot be recorded (a negative or malformed bonus, a
//! missing reason, nobody selected) answers 400 with the review page again and the reason, in
//! words, above its forms.
//!
//! | route | access |
//! |---|---|
//! | `GET /researcher/study/{study}/review` (`?flag=&status=&decision=&test=1&rule=pct&k=&idle_s=&gold_bar=`) | observer |
//! | `POST /researcher/study/{study}/review/decide`: `action`, `reason`, `amount`, `p` (repeated) or `all_matching=1` with the filter's fields | researcher (Origin, CSRF token) |
//! | `POST /researcher/study/{study}/review/send` | researcher (Origin, CSRF token) |

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use wozkit_core::event::{EventKind, ReviewAction, ReviewDecision};
use wozkit_core::load::LoadedStudy;

use super::extract::{ResearcherForm, ResearcherPage, Running};
use super::html::{esc, layout, query_escape};
use super::researcher::{csrf_field, fmt_time};
use crate::app::AppState;
use crate::auth::{Access, Researcher};
use crate::error::HttpError;
use crate::review::{self, Filter, Outlier, ReviewRow, Thresholds};

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/researcher/study/{study}/review", get(page))
        .route("/researcher/study/{study}/review/decide", post(decide))
        .route("/researcher/study/{study}/review/send", post(send))
}

/// The longest reason or note kept.
const MAX_REASON: usize = 2000;
/// The largest bonus accepted, in cents.
const MAX_BONUS_CENTS: u64 = 100_000;
/// The crowd platforms decisions can be sent to.
const PLATFORMS: [&str; 2] = ["prolific", "mturk"];

/// The page's settings, from its query (or a bulk form's fields).
struct View {
    filter: Filter,
    include_test: bool,
    limits: Thresholds,
}

impl View {
    fn of(q: &HashMap<String, String>) -> View {
        let text = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
        let d = Thresholds::default();
        View {
            filter: Filter {
                flag: text("flag"),
                status: text("status"),
                decision: text("decision"),
            },
            include_test: q.get("test").is_some_and(|v| v == "1"),
            limits: Thresholds {
                k: q.get("k")
                    .and_then(|v| v.parse().ok())
                    .filter(|k: &f64| k.is_finite() && *k > 0.0)
                    .unwrap_or(d.k),
                idle_ms: q
                    .get("idle_s")
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|s| *s > 0)
                    .map_or(d.idle_ms, |s| s.saturating_mul(1000)),
                gold_bar: q
                    .get("gold_bar")
                    .and_then(|v| v.parse().ok())
                    .filter(|b: &f64| (0.0..=1.0).contains(b))
                    .unwrap_or(d.gold_bar),
                percentiles: q.get("rule").is_some_and(|r| r == "pct"),
            },
        }
    }

    /// The settings as query pairs (for links and redirects).
    fn query(&self) -> String {
        let mut out = vec![];
        let f = &self.filter;
        for (k, v) in [
            ("flag", &f.flag),
            ("status", &f.status),
            ("decision", &f.decision),
        ] {
            if let Some(v) = v {
                out.push(format!("{k}={}", query_escape(v)));
            }
        }
        if self.include_test {
            out.push("test=1".into());
        }
        let d = Thresholds::default();
        if self.limits.k != d.k {
            out.push(format!("k={}", self.limits.k));
        }
        if self.limits.idle_ms != d.idle_ms {
            out.push(format!("idle_s={}", self.limits.idle_ms / 1000));
        }
        if self.limits.gold_bar != d.gold_bar {
            out.push(format!("gold_bar={}", self.limits.gold_bar));
        }
        if self.limits.percentiles {
            out.push("rule=pct".into());
        }
        out.join("&")
    }

    /// The settings as hidden form fields (so a bulk action sees the filter the page showed).
    fn hidden(&self) -> String {
        self.query()
            .split('&')
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| {
                format!(
                    "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                    esc(k),
                    esc(&percent_decode(v))
                )
            })
            .collect()
    }
}

/// Decodes `%XX` escapes (of [`query_escape`]).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(x) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(x);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn study_of(app: &AppState, id: &str) -> Result<Arc<LoadedStudy>, HttpError> {
    app.studies.get(id).cloned().ok_or(HttpError::NotFound)
}

fn review_url(study: &str, query: &str) -> String {
    let base = format!("/researcher/study/{}/review", query_escape(study));
    if query.is_empty() {
        base
    } else {
        format!("{base}?{query}")
    }
}

/// `GET /researcher/study/{study}/review`.
async fn page(
    State(app): State<AppState>,
    ResearcherPage(me, ..): ResearcherPage,
    Path(study_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, HttpError> {
    let view = View::of(&q);
    let study = study_of(&app, &study_id)?;
    let html = page_html(&app, &me, &study, &view, &q, None).await?;
    Ok(Html(html).into_response())
}

/// The review page of `study` as `view` shows it, with the notices of `q` and, after a refused
/// decision, `problem` above the forms.
async fn page_html(
    app: &AppState,
    me: &Researcher,
    study: &Arc<LoadedStudy>,
    view: &View,
    q: &HashMap<String, String>,
    problem: Option<&str>,
) -> Result<String, HttpError> {
    let study_id = study.study.id.as_str();
    let all = review::rows(app, study, view.include_test, view.limits).await?;
    let shown: Vec<&ReviewRow> = all.iter().filter(|r| view.filter.matches(r)).collect();
    let may_act = me.may(Access::Researcher);
    let mut body = String::new();
    let _ = write!(
        body,
        "<main class=\"review\" id=\"review\" data-csrf=\"{}\"><p><a href=\"/researcher\">← console</a></p>\
         <h1>Review: {}</h1>",
        esc(&me.csrf),
        esc(&study.study.title)
    );
    if let Some(m) = problem {
        let _ = write!(
            body,
            "<p class=\"problem\" id=\"review-problem\" role=\"alert\" data-testid=\"review-problem\">\
             Nothing was recorded: {}</p>",
            esc(m)
        );
    }
    body.push_str(&notice(q));
    body.push_str(&filter_form(study_id, view));
    let _ = write!(
        body,
        "<p id=\"review-count\">{} of {} participant(s) match.</p>",
        shown.len(),
        all.len()
    );
    if may_act {
        body.push_str(&send_form(app, me, study_id));
        body.push_str(&bulk_form(me, study_id, view));
    }
    body.push_str(&table(me, study_id, view, &shown, may_act));
    body.push_str("</main>");
    Ok(layout("Review", &body, &["review.js"]))
}

fn notice(q: &HashMap<String, String>) -> String {
    let mut out = String::new();
    if let Some(n) = q.get("done") {
        let _ = write!(
            out,
            "<p class=\"notice\" id=\"review-done\" role=\"status\">Decision recorded for {} participant(s).</p>",
            esc(n)
        );
    }
    if let (Some(s), Some(f)) = (q.get("sent"), q.get("failed")) {
        let not_sendable = match q.get("not_sendable").map(String::as_str) {
            None | Some("0") | Some("") => String::new(),
            Some(n) => format!(
                " {} not sendable: the platform's API cannot take them; do them in the platform's web app (each row says how).",
                esc(n)
            ),
        };
        let _ = write!(
            out,
            "<p class=\"notice\" id=\"review-sent\" role=\"status\">Sent to the platforms: {} done, {} failed (failures are sent again on the next press).{not_sendable}</p>",
            esc(s),
            esc(f)
        );
    }
    out
}

fn select(name: &str, current: Option<&str>, options: &[(&str, &str)]) -> String {
    let mut out = format!("<select name=\"{name}\" id=\"filter-{name}\">");
    for (value, label) in options {
        let sel = if current.unwrap_or("") == *value {
            " selected"
        } else {
            ""
        };
        let _ = write!(out, "<option value=\"{value}\"{sel}>{label}</option>");
    }
    out.push_str("</select>");
    out
}

fn filter_form(study: &str, view: &View) -> String {
    let f = &view.filter;
    format!(
        "<form method=\"get\" action=\"{}\" class=\"review-filter\" id=\"review-filter\">\
         <label>Flag {}</label><label>Status {}</label><label>Decision {}</label>\
         <label><input type=\"checkbox\" name=\"test\" value=\"1\"{}> test participants</label>\
         <label>times {}</label>\
         <label>k <input type=\"number\" name=\"k\" step=\"0.5\" min=\"0.5\" value=\"{}\"></label>\
         <label>idle (s) <input type=\"number\" name=\"idle_s\" min=\"1\" value=\"{}\"></label>\
         <label>gold bar <input type=\"number\" name=\"gold_bar\" step=\"0.05\" min=\"0\" max=\"1\" value=\"{}\"></label>\
         <button type=\"submit\">Filter</button></form>",
        esc(&review_url(study, "")),
        select(
            "flag",
            f.flag.as_deref(),
            &[
                ("", "any or none"),
                ("any", "some flag"),
                ("none", "no flag"),
                ("gold", "failed gold"),
                ("time", "time outlier"),
                ("idle", "idle"),
                ("disconnect", "disconnects"),
            ]
        ),
        select(
            "status",
            f.status.as_deref(),
            &[
                ("", "all"),
                ("completed", "completed"),
                ("incomplete", "incomplete"),
                ("no_partner", "no partner"),
                ("abandoned", "abandoned"),
                ("screened_onboarding", "screened (onboarding)"),
                ("screened_gold", "screened (gold)"),
                ("screened_blocklist", "screened (blocklist)"),
                ("no_items", "no items"),
            ]
        ),
        select(
            "decision",
            f.decision.as_deref(),
            &[
                ("", "all"),
                ("none", "undecided"),
                ("approve", "approved"),
                ("reject", "rejected"),
                ("bonus", "with a bonus"),
                ("blocked", "blocked"),
            ]
        ),
        if view.include_test { " checked" } else { "" },
        select(
            "rule",
            Some(if view.limits.percentiles { "pct" } else { "" }),
            &[("", "median ± k×MAD"), ("pct", "5th/95th percentile")]
        ),
        view.limits.k,
        view.limits.idle_ms / 1000,
        view.limits.gold_bar,
    )
}

fn send_form(app: &AppState, me: &Researcher, study: &str) -> String {
    let configured: Vec<&str> = PLATFORMS
        .into_iter()
        .filter(|p| app.tunables.payers.get(study, p).is_some())
        .collect();
    if configured.is_empty() {
        return "<p class=\"muted\" id=\"review-no-payer\">No crowd platform client is configured for this study: decisions are recorded here only.</p>".into();
    }
    format!(
        "<form method=\"post\" action=\"{}/send\" id=\"review-send-form\">{}\
         <button type=\"submit\" id=\"review-send\" class=\"primary\">Send decisions to {}</button>\
         <span class=\"muted\"> approvals, rejections, bonuses and blocks not sent yet</span></form>",
        esc(&review_url(study, "")),
        csrf_field(me),
        configured
            .iter()
            .map(|p| platform_name(p))
            .collect::<Vec<_>>()
            .join("/"),
    )
}

/// A crowd platform's name as people write it.
fn platform_name(platform: &str) -> &str {
    match platform {
        "mturk" => "MTurk",
        "prolific" => "Prolific",
        other => other,
    }
}

fn action_fields(prefix: &str) -> String {
    format!(
        "<select name=\"action\" id=\"{prefix}-action\" aria-label=\"decision\"><option value=\"approve\">approve</option>\
         <option value=\"reject\">reject</option><option value=\"bonus\">bonus</option>\
         <option value=\"block\">block</option><option value=\"note\">note</option></select>\
         <input type=\"text\" name=\"amount\" id=\"{prefix}-amount\" aria-label=\"bonus amount\" placeholder=\"bonus, e.g. 1.50\" inputmode=\"decimal\" size=\"8\">\
         <input type=\"text\" name=\"reason\" id=\"{prefix}-reason\" aria-label=\"reason or note\" placeholder=\"reason / note\" maxlength=\"{MAX_REASON}\">"
    )
}

fn bulk_form(me: &Researcher, study: &str, view: &View) -> String {
    format!(
        "<form method=\"post\" action=\"{}/decide\" id=\"bulk\" class=\"review-bulk\">{}{}\
         <label><input type=\"checkbox\" id=\"select-shown\"> select shown</label>\
         <label><input type=\"checkbox\" name=\"all_matching\" value=\"1\" id=\"all-matching\"> all matching the filter</label>\
         {}<button type=\"submit\" id=\"bulk-apply\">Apply to selected</button></form>",
        esc(&review_url(study, "")),
        csrf_field(me),
        view.hidden(),
        action_fields("bulk"),
    )
}

fn table(me: &Researcher, study: &str, view: &View, rows: &[&ReviewRow], may_act: bool) -> String {
    let mut out = String::from(
        "<div class=\"review-scroll\"><table id=\"review-rows\"><thead><tr><th></th><th>worker</th><th>platform</th>\
         <th>role</th><th>sessions</th><th>status</th><th>amount</th><th>answers</th><th>flags</th>\
         <th>decision</th></tr></thead><tbody>",
    );
    for r in rows {
        let p = &r.pay;
        let check = if may_act {
            format!(
                "<input type=\"checkbox\" name=\"p\" value=\"{}\" form=\"bulk\" aria-label=\"select {}\">",
                esc(&p.participant),
                esc(&p.participant)
            )
        } else {
            String::new()
        };
        let worker = if p.worker_id.is_empty() {
            format!("<code>{}</code>", esc(&p.participant))
        } else {
            esc(&p.worker_id)
        };
        let amount = format!(
            "{:.2} {}{}",
            p.total_with_bonus,
            esc(&p.currency),
            if p.review_bonus > 0.0 {
                format!(
                    "<br><span class=\"muted\">incl. bonus {:.2}</span>",
                    p.review_bonus
                )
            } else {
                String::new()
            }
        );
        let _ = write!(
            out,
            "<tr data-participant=\"{pid}\" data-flags=\"{flagnames}\" data-decision=\"{dec}\" data-status=\"{st}\">\
             <td>{check}</td><td>{worker}</td><td>{}</td><td>{}</td>\
             <td><a href=\"/researcher/session/{}\"><code>{}</code></a></td><td>{st}</td>\
             <td class=\"amount\">{amount}</td><td>{}</td><td class=\"flags\">{}</td><td>{}</td></tr>",
            esc(&p.platform),
            esc(&p.role),
            query_escape(&p.session),
            esc(&p.session),
            answers(r),
            flags(r),
            decision(me, study, view, r, may_act),
            pid = esc(&p.participant),
            flagnames = r.flags.names().join(" "),
            dec = r.review.decision_str(),
            st = esc(&p.status),
        );
    }
    out.push_str("</tbody></table></div>");
    out
}

fn answers(r: &ReviewRow) -> String {
    if r.answers.is_empty() {
        return "<span class=\"muted\">—</span>".into();
    }
    let compact: String = r
        .answers
        .iter()
        .map(|(_, k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    let short: String = compact.chars().take(60).collect();
    let more = if short.len() < compact.len() {
        "…"
    } else {
        ""
    };
    let full: String = r
        .answers
        .iter()
        .map(|(page, k, v)| format!("<dt>{} / {}</dt><dd>{}</dd>", esc(page), esc(k), esc(v)))
        .collect();
    format!(
        "<details class=\"answers\"><summary>{}{more}</summary><dl>{full}</dl></details>",
        esc(&short)
    )
}

fn flags(r: &ReviewRow) -> String {
    let f = &r.flags;
    let mut out = vec![];
    if let Some(why) = &f.failed_gold {
        out.push(format!(
            "<span class=\"flag flag-gold\" title=\"{0}\">failed gold</span> <small>{0}</small>",
            esc(why)
        ));
    }
    if let Some((side, why)) = &f.time {
        let label = match side {
            Outlier::Fast => "too fast",
            Outlier::Slow => "too slow",
        };
        out.push(format!(
            "<span class=\"flag flag-time\">{label}</span> <small>{}</small>",
            esc(why)
        ));
    }
    if let Some(why) = &f.idle_partner {
        out.push(format!(
            "<span class=\"flag flag-idle\">idle partner</span> <small>{}</small>",
            esc(why)
        ));
    }
    if let Some(why) = &f.own_silence {
        out.push(format!(
            "<span class=\"flag flag-idle\">own silence</span> <small>{}</small>",
            esc(why)
        ));
    }
    if f.disconnects > 0 {
        out.push(format!(
            "<span class=\"flag flag-disconnect\">{} disconnect(s)</span>",
            f.disconnects
        ));
    }
    if r.duration_ms.is_some() && out.is_empty() {
        out.push("<span class=\"muted\">—</span>".into());
    }
    if !f.taken_over.is_empty() {
        out.push(format!(
            "<small class=\"muted taken-over\">{}: judged up to when they left; what the role did afterwards is the researcher's</small>",
            esc(&f.taken_over)
        ));
    }
    out.join("<br>")
}

fn decision(me: &Researcher, study: &str, view: &View, r: &ReviewRow, may_act: bool) -> String {
    let rv = &r.review;
    let mut out = decision_state(rv);
    out.push_str(&decision_problems(rv, &r.pay.platform));
    for n in &rv.notes {
        let _ = write!(out, "<br><small class=\"note\">note: {}</small>", esc(n));
    }
    if !rv.history.is_empty() {
        out.push_str(&history_html(rv));
    }
    if may_act {
        let _ = write!(
            out,
            "<details class=\"decide\"><summary>decide</summary><form method=\"post\" action=\"{}/decide\" class=\"row-decide\">{}{}\
             <input type=\"hidden\" name=\"p\" value=\"{}\">{}<button type=\"submit\">Record</button></form></details>",
            esc(&review_url(study, "")),
            csrf_field(me),
            view.hidden(),
            esc(&r.pay.participant),
            action_fields(&format!("row-{}", esc(&r.pay.participant))),
        );
    }
    out
}

/// A row's decision as recorded (with its bonus and a block) and as sent to the platform.
fn decision_state(rv: &review::Reviewed) -> String {
    let mut out = String::new();
    match rv.decision {
        Some((a, _)) => {
            let _ = write!(
                out,
                "<strong class=\"decision decision-{0}\">{0}</strong>",
                a.as_str()
            );
        }
        None => out.push_str("<span class=\"muted\">undecided</span>"),
    }
    if let Some((cents, _)) = rv.bonus {
        let _ = write!(
            out,
            " <span class=\"bonus\">bonus {}.{:02}</span>",
            cents / 100,
            cents % 100
        );
    }
    if rv.blocked.is_some() {
        out.push_str(" <span class=\"flag blocked\">blocked</span>");
    }
    if let Some(d) = rv.sent_decision {
        let _ = write!(out, "<br><small>sent: {}</small>", d.as_str());
        if rv.decision.is_some_and(|(now, _)| now != d) {
            // A platform takes one decision per submission.
            out.push_str(
                "<br><small class=\"problem\">changed after sending: the platform keeps the decision sent</small>",
            );
        }
    }
    if rv.bonus_sent_cents > 0 {
        let _ = write!(
            out,
            "<br><small>bonus sent: {}.{:02}</small>",
            rv.bonus_sent_cents / 100,
            rv.bonus_sent_cents % 100
        );
    }
    out
}

/// What of a row's decisions cannot be sent to its platform `platform`, and the last send
/// that failed.
fn decision_problems(rv: &review::Reviewed, platform: &str) -> String {
    let mut out = String::new();
    for (seq, why) in &rv.not_sendable {
        let action = rv
            .history
            .iter()
            .find(|e| e.seq == *seq)
            .and_then(|e| match &e.kind {
                EventKind::Reviewed(d) => Some(d.action.as_str()),
                _ => None,
            })
            .unwrap_or("decision");
        let _ = write!(
            out,
            "<br><small class=\"problem not-sendable\">{action}: not sendable to {} — {}</small>",
            esc(platform_name(platform)),
            esc(why)
        );
    }
    if let Some(why) = &rv.last_failure {
        let _ = write!(
            out,
            "<br><small class=\"problem\">send failed: {}</small>",
            esc(why)
        );
    }
    out
}

/// A row's decisions one after the other: when, what, by whom, the amount and the reason.
fn history_html(rv: &review::Reviewed) -> String {
    let items: String = rv
        .history
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Reviewed(d) => Some(format!(
                "<li>{} — {} by {}{}{}</li>",
                fmt_time(e.at_ms),
                d.action.as_str(),
                esc(if d.researcher_name.is_empty() {
                    &d.researcher
                } else {
                    &d.researcher_name
                }),
                d.cents
                    .map(|c| format!(", {}.{:02}", c / 100, c % 100))
                    .unwrap_or_default(),
                if d.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", esc(&d.reason))
                }
            )),
            _ => None,
        })
        .collect();
    format!(
        "<details class=\"history\"><summary>history ({})</summary><ol>{items}</ol></details>",
        rv.history.len()
    )
}

/// Why a bonus amount cannot be recorded, for the page.
fn bonus_problem(amount: &str) -> String {
    let amount = amount.trim();
    let most = format!("{}.{:02}", MAX_BONUS_CENTS / 100, MAX_BONUS_CENTS % 100);
    if amount.is_empty() {
        format!("a bonus needs an amount: enter a sum such as 1.50 (at most {most}).")
    } else if amount.starts_with('-') {
        format!(
            "a bonus cannot be negative (\u{201c}{amount}\u{201d}): enter a sum such as 1.50 \
             (at most {most}); to withdraw a bonus, give 0."
        )
    } else if parse_cents(amount).is_some_and(|c| c > MAX_BONUS_CENTS) {
        format!("a bonus of \u{201c}{amount}\u{201d} is more than the most allowed, {most}.")
    } else {
        format!(
            "\u{201c}{amount}\u{201d} is not an amount: enter a sum such as 1.50, with at most \
             two decimals (at most {most})."
        )
    }
}

/// Parses a bonus amount (`1`, `1.5`, `1.50`) into cents.
fn parse_cents(s: &str) -> Option<u64> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() && frac.is_empty()
        || frac.len() > 2
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
        || whole.len() > 9
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: u64 = format!("{frac:0<2}").parse().ok()?;
    Some(whole * 100 + frac)
}

/// `POST /researcher/study/{study}/review/decide`.
async fn decide(
    State(app): State<AppState>,
    Path(study_id): Path<String>,
    ResearcherForm(me, fields, ..): ResearcherForm<Running, Vec<(String, String)>>,
) -> Result<Response, HttpError> {
    let study = study_of(&app, &study_id)?;
    let map: HashMap<String, String> = fields.iter().cloned().collect();
    let view = View::of(&map);
    match record(&app, &me, &study, &view, &fields).await {
        // A decision that cannot be recorded: the page again, the reason above its forms.
        Err(HttpError::BadRequest(message)) => {
            let html = page_html(&app, &me, &study, &view, &HashMap::new(), Some(&message)).await?;
            Ok((StatusCode::BAD_REQUEST, Html(html)).into_response())
        }
        other => other,
    }
}

/// Records the decision `fields` ask for; a decision that cannot be recorded is a
/// [`HttpError::BadRequest`] whose message says why, in words for the page.
async fn record(
    app: &AppState,
    me: &Researcher,
    study: &Arc<LoadedStudy>,
    view: &View,
    fields: &[(String, String)],
) -> Result<Response, HttpError> {
    let study_id = study.study.id.as_str();
    let (action, reason, cents) = asked_decision(fields)?;
    let _one_at_a_time = app.review.lock.lock().await;
    let rows = review::rows(app, study, true, view.limits).await?;
    let chosen = chosen_rows(&rows, view, fields)?;
    if chosen.is_empty() {
        return Err(HttpError::BadRequest(
            "no participant selected: tick some, or \u{201c}all matching the filter\u{201d}."
                .into(),
        ));
    }
    let decisions: Vec<ReviewDecision> = chosen
        .iter()
        .map(|r| ReviewDecision {
            participant: r.pay.participant.clone(),
            worker: (!r.pay.worker_id.is_empty()).then(|| r.pay.worker_id.clone()),
            platform: r.pay.platform.clone(),
            action,
            reason: reason.clone(),
            cents,
            researcher: me.id.clone(),
            researcher_name: me.name.clone(),
            of_seq: None,
            payment: None,
        })
        .collect();
    let n = decisions.len();
    review::append(app, study, decisions).await?;
    let mut q = view.query();
    if !q.is_empty() {
        q.push('&');
    }
    q.push_str(&format!("done={n}"));
    Ok(redirect(&review_url(study_id, &q)))
}

/// The field `k` of `fields`, if sent.
fn sent_field<'f>(fields: &'f [(String, String)], k: &str) -> Option<&'f str> {
    fields
        .iter()
        .find(|(name, _)| name == k)
        .map(|(_, v)| v.as_str())
}

/// The decision `fields` ask for: its action, its reason and a bonus's amount in cents; one
/// that cannot be recorded is a [`HttpError::BadRequest`] saying why.
fn asked_decision(
    fields: &[(String, String)],
) -> Result<(ReviewAction, String, Option<u64>), HttpError> {
    let action = match sent_field(fields, "action").unwrap_or("") {
        "approve" => ReviewAction::Approve,
        "reject" => ReviewAction::Reject,
        "bonus" => ReviewAction::Bonus,
        "block" => ReviewAction::Block,
        "note" => ReviewAction::Note,
        other => {
            return Err(HttpError::BadRequest(format!(
                "unknown action \u{201c}{other}\u{201d}; choose approve, reject, bonus, block or note."
            )));
        }
    };
    let reason = sent_field(fields, "reason")
        .unwrap_or("")
        .trim()
        .to_string();
    if reason.chars().count() > MAX_REASON {
        return Err(HttpError::BadRequest(format!(
            "the reason is longer than {MAX_REASON} characters; shorten it."
        )));
    }
    let needs_reason = matches!(
        action,
        ReviewAction::Reject | ReviewAction::Bonus | ReviewAction::Block | ReviewAction::Note
    );
    if needs_reason && reason.is_empty() {
        return Err(HttpError::BadRequest(format!(
            "a {} needs a reason: write one in the reason field.",
            action.as_str()
        )));
    }
    let cents = if action == ReviewAction::Bonus {
        let amount = sent_field(fields, "amount").unwrap_or("");
        match parse_cents(amount) {
            Some(c) if c <= MAX_BONUS_CENTS => Some(c),
            _ => return Err(HttpError::BadRequest(bonus_problem(amount))),
        }
    } else {
        None
    };
    Ok((action, reason, cents))
}

/// The rows `fields` choose: all those the view's filter matches, or those ticked (each of
/// which must be a participant of the study).
fn chosen_rows<'r>(
    rows: &'r [ReviewRow],
    view: &View,
    fields: &[(String, String)],
) -> Result<Vec<&'r ReviewRow>, HttpError> {
    if sent_field(fields, "all_matching") == Some("1") {
        return Ok(rows
            .iter()
            .filter(|r| view.include_test || !is_test_row(r))
            .filter(|r| view.filter.matches(r))
            .collect());
    }
    let wanted: HashSet<&str> = fields
        .iter()
        .filter(|(k, _)| k == "p")
        .map(|(_, v)| v.as_str())
        .collect();
    let found: Vec<&ReviewRow> = rows
        .iter()
        .filter(|r| wanted.contains(r.pay.participant.as_str()))
        .collect();
    if found.len() != wanted.len() {
        return Err(HttpError::BadRequest(
            "some selected participants are not participants of this study.".into(),
        ));
    }
    Ok(found)
}

/// Whether a row is a test participant's (a `test=1` crowd id).
fn is_test_row(r: &ReviewRow) -> bool {
    r.pay
        .crowd_ids
        .split(';')
        .any(|kv| kv == format!("{}=1", wozkit_store::TEST_KEY))
}

/// `POST /researcher/study/{study}/review/send`.
async fn send(
    State(app): State<AppState>,
    Path(study_id): Path<String>,
    ResearcherForm(me, ..): ResearcherForm<Running, super::researcher::NoFields>,
) -> Result<Response, HttpError> {
    let study = study_of(&app, &study_id)?;
    let report = review::send(&app, &study, &me).await?;
    Ok(redirect(&review_url(
        &study_id,
        &format!(
            "sent={}&failed={}&not_sendable={}",
            report.sent, report.failed, report.not_sendable
        ),
    )))
}

fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_string())]).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bonus_amounts_are_read_to_the_cent() {
        assert_eq!(parse_cents("1.5"), Some(150));
        assert_eq!(parse_cents("0.07"), Some(7));
        assert_eq!(parse_cents("12"), Some(1200));
        assert_eq!(parse_cents(".25"), Some(25));
        assert_eq!(parse_cents("1.005"), None);
        assert_eq!(parse_cents("-1"), None);
        assert_eq!(parse_cents(""), None);
        assert_eq!(parse_cents("1e3"), None);
    }

    #[test]
    fn escapes_are_decoded() {
        assert_eq!(percent_decode("a%20b%2Fc"), "a b/c");
        assert_eq!(percent_decode("plain"), "plain");
    }
}
