//! The evaluation pages: `questions` (a page of the question model), `onboarding` (known-answer
//! items with a pass mark), `rate` (one dialogue, the study's questions and per-turn annotation)
//! and `compare` (two dialogues side by side, a choice and its reason), plus the pages for a
//! worker with no item left and a worker screened out.
//!
//! Every page is a plain form that works without JavaScript, by keyboard and on a phone (the
//! two dialogues of a comparison stack on a narrow screen). A refused form is shown again (422)
//! with the answers kept and each problem next to its field. Everything is recorded in the
//! participant's log (`crate::evaluation`); a judgment closes its lease in the same store
//! transaction (`ClaimStore::submit`).

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use indexmap::IndexMap;
use serde_json::Value;
use wozkit_core::evaluation::{
    AnnotationKind, Dialogue, Ending, EvalTask, Evaluation, Justification, KnownItem, Onboarding,
    TurnAnnotation,
};
use wozkit_core::event::{EventKind, ItemPool, Judgment, Role, ScreenReason, TurnLabel};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind};
use wozkit_core::platforms::EndingKind;
use wozkit_core::questions::{self, Problem, Question, seed_of};
use wozkit_store::{Lease, LeaseState, NewEvent, Participant, SubmitOutcome};

use super::extract::Asking;
use super::html::{esc, layout_in, markdown};
use super::pages::{advance, ensure_code, to_page};
use super::platform_return::{self, Return};
use super::questions::fieldsets;
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::evaluation::{self as eval, Facts};
use crate::flow;
use crate::i18n::{Words, words};
use crate::security::seat_query;

/// Field names in a posted form.
pub(super) type Fields = Vec<(String, String)>;

pub(super) fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

pub(super) fn page_head(page: Option<&Page>, default_title: &str) -> String {
    format!(
        "<h1>{}</h1>{}",
        esc(page
            .and_then(|p| p.title.as_deref())
            .unwrap_or(default_title)),
        page.and_then(|p| p.text.as_deref())
            .map(markdown)
            .unwrap_or_default()
    )
}

pub(super) fn problem_html(id: &str, problem: Option<&str>) -> String {
    problem
        .map(|m| {
            format!(
                "<p class=\"problem\" id=\"{id}-problem\" role=\"alert\" data-testid=\"problem-{id}\">{}</p>",
                esc(m)
            )
        })
        .unwrap_or_default()
}

pub(super) fn find_problem<'a>(problems: &'a [Problem], id: &str) -> Option<&'a str> {
    problems
        .iter()
        .find(|p| p.question == id)
        .map(|p| p.message.as_str())
}

/// Side names of a comparison, as shown ("Conversation A").
const SIDES: [&str; 2] = ["A", "B"];
const SIDE_VALUES: [&str; 2] = ["left", "right"];

/// One dialogue as a transcript, with per-turn annotation controls when asked for.
fn transcript(
    w: &Words,
    d: &Dialogue,
    side: usize,
    heading: &str,
    annotate: Option<&TurnAnnotation>,
    fields: &[(String, String)],
    problems: &[Problem],
) -> String {
    let context = d
        .context
        .as_deref()
        .map(|c| format!("<div class=\"context\">{}</div>", markdown(c)))
        .unwrap_or_default();
    let turns: String = d
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let controls = annotate
                .filter(|a| a.speaker == t.speaker)
                .map(|a| {
                    let problem = find_problem(problems, &turn_field(side, i));
                    turn_controls(w, a, side, i, fields)
                        + &problem_html(&turn_field(side, i), problem)
                })
                .unwrap_or_default();
            format!(
                "<li class=\"turn\" data-speaker=\"{speaker}\"><span class=\"speaker\">{speaker}</span> \
                 <span class=\"text\">{text}</span>{controls}</li>",
                speaker = esc(&t.speaker),
                text = esc(&t.text),
            )
        })
        .collect();
    format!(
        "<section class=\"dialogue\" data-testid=\"dialogue-{side}\" aria-label=\"{heading}\">\
         <h2>{heading}</h2>{context}<ol class=\"transcript\">{turns}</ol></section>",
        heading = esc(heading),
    )
}

fn turn_field(side: usize, turn: usize) -> String {
    format!("turn.{side}.{turn}")
}

fn turn_controls(
    w: &Words,
    a: &TurnAnnotation,
    side: usize,
    turn: usize,
    fields: &[(String, String)],
) -> String {
    let name = turn_field(side, turn);
    let ticked = |v: &str| fields.iter().any(|(n, x)| *n == name && x == v);
    let inputs: String = match a.kind {
        AnnotationKind::Checkboxes => a
            .options
            .iter()
            .map(|o| {
                format!(
                    "<label><input type=\"checkbox\" name=\"{name}\" value=\"{v}\"{c}> {v}</label>",
                    v = esc(o),
                    c = if ticked(o) { " checked" } else { "" }
                )
            })
            .collect(),
        AnnotationKind::Scale => (1..=a.points())
            .map(|p| {
                let v = p.to_string();
                format!(
                    "<label><input type=\"radio\" name=\"{name}\" value=\"{p}\"{c}> {p}</label>",
                    c = if ticked(&v) { " checked" } else { "" }
                )
            })
            .collect(),
    };
    format!(
        "<fieldset class=\"turn-labels\" data-testid=\"turn-{side}-{turn}\"><legend class=\"sr-only\">{}</legend>{inputs}</fieldset>",
        esc(&w.get("eval-turn-labels"))
    )
}

/// The per-turn labels posted for the shown dialogues.
fn turn_labels(
    ev: &Evaluation,
    shown: &[&Dialogue],
    fields: &[(String, String)],
) -> Vec<TurnLabel> {
    let Some(a) = &ev.annotate else {
        return vec![];
    };
    let mut out = vec![];
    for (side, d) in shown.iter().enumerate() {
        for (i, t) in d.turns.iter().enumerate() {
            if t.speaker != a.speaker {
                continue;
            }
            let name = turn_field(side, i);
            let values: Vec<&str> = fields
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
                .collect();
            let (labels, score) = match a.kind {
                AnnotationKind::Checkboxes => (
                    a.options
                        .iter()
                        .filter(|o| values.contains(&o.as_str()))
                        .cloned()
                        .collect(),
                    None,
                ),
                AnnotationKind::Scale => (
                    vec![],
                    values
                        .first()
                        .and_then(|v| v.parse::<u32>().ok())
                        .filter(|p| (1..=a.points()).contains(p)),
                ),
            };
            out.push(TurnLabel {
                dialogue: d.id.clone(),
                turn: i as u32,
                labels,
                score,
            });
        }
    }
    out
}

/// What the study's label rules (`annotate.exclusive`, `annotate.required`) refuse in the labels
/// of one turn, in the study's words (`TurnAnnotation::turn_problem` in English).
pub(super) fn turn_problem(
    w: &Words,
    a: &TurnAnnotation,
    labels: &[String],
    score: Option<u32>,
) -> Option<String> {
    match a.kind {
        AnnotationKind::Checkboxes => {
            if let Some(only) = a.exclusive.iter().find(|o| labels.contains(o))
                && labels.len() > 1
            {
                let others: Vec<&str> = labels
                    .iter()
                    .filter(|l| *l != only)
                    .map(String::as_str)
                    .collect();
                let others = others.join(&w.get("eval-problem-exclusive-joiner"));
                return Some(w.with(
                    "eval-problem-exclusive",
                    &[("only", only.as_str()), ("others", others.as_str())],
                ));
            }
            (a.required && labels.is_empty()).then(|| match a.exclusive.first() {
                Some(none) => w.with("eval-problem-tick-none", &[("none", none.as_str())]),
                None => w.get("eval-problem-tick"),
            })
        }
        AnnotationKind::Scale => {
            (a.required && score.is_none()).then(|| w.get("eval-problem-scale"))
        }
    }
}

/// The question of a comparison: the study's, or the catalogue's.
fn compare_question(w: &Words, ev: &Evaluation) -> String {
    ev.question
        .clone()
        .unwrap_or_else(|| w.get("eval-compare-question"))
}

/// A choice between the two sides, posted as `name` = `left` or `right`.
fn side_choice(
    w: &Words,
    name: &str,
    question: &str,
    fields: &[(String, String)],
    problem: Option<&str>,
) -> String {
    let value = field(fields, name);
    let radios: String = SIDES
        .iter()
        .zip(SIDE_VALUES)
        .map(|(label, v)| {
            format!(
                "<label class=\"point\"><input type=\"radio\" name=\"{n}\" value=\"{v}\" data-testid=\"{n}-{v}\" required{c}> {label}</label>",
                n = esc(name),
                label = esc(&w.with("eval-conversation-side", &[("side", label)])),
                c = if value == Some(v) { " checked" } else { "" }
            )
        })
        .collect();
    format!(
        "<fieldset class=\"question choice-pair\" data-testid=\"question-{n}\"><legend>{q}</legend>{radios}{p}</fieldset>",
        n = esc(name),
        q = esc(question),
        p = problem_html(name, problem)
    )
}

// ----- questions pages -----

/// A `questions` page.
pub fn questions_page(
    study: &LoadedStudy,
    page: Option<&Page>,
    action: &str,
    step: &str,
    seed: u64,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let w = words(study.study.language);
    let qs = page.map(|p| p.questions.as_slice()).unwrap_or_default();
    let body = format!(
        "<main class=\"narrow\" data-page=\"questions\">{}<form method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"step\" value=\"{}\">{}\
         <button type=\"submit\" class=\"primary\" data-testid=\"answers-submit\">{}</button></form></main>",
        page_head(page, &w.get("eval-questions-title")),
        esc(action),
        esc(step),
        fieldsets(w, qs, seed, fields, problems),
        esc(&w.get("eval-continue")),
    );
    layout_in(w.lang(), &study.study.title, "", &body, &[])
}

/// `POST /p/answers`: a `questions` page.
pub async fn answers(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    let st = &study.study;
    let i = flow::index(&p.flow_step);
    let Some(page) = flow::pages(st, role)
        .get(i)
        .filter(|pg| pg.kind == PageKind::Questions)
    else {
        return Ok(to_page(seat.as_deref()));
    };
    if field(&fields, "step") != Some(p.flow_step.as_str()) {
        return Ok(to_page(seat.as_deref()));
    }
    let seed = seed_of(&p.id);
    let answers = match super::questions::check(words(st.language), &page.questions, &fields, seed)
    {
        Ok(a) => a.to_event(&page.questions),
        Err(problems) => {
            let action = format!("/p/answers{}", seat_query(seat.as_deref()));
            let html = questions_page(
                &study,
                Some(page),
                &action,
                &p.flow_step,
                seed,
                &problems,
                &fields,
            );
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response());
        }
    };
    let log = eval::ensure_log(&app, &p, &study).await?;
    let event = NewEvent {
        actor: eval::actor(&p),
        kind: EventKind::PageAnswered {
            page: flow::page_id(st, role, i),
            answers,
        },
        at_ms: now_ms(),
    };
    // One answer set per page, however many submissions race (a double click, two tabs).
    let once = format!("page/{}/{i}", p.id);
    app.store.append_once(&log, &once, vec![event]).await?;
    advance_if_still(&app, &p, &study, role, i).await?;
    Ok(to_page(seat.as_deref()))
}

/// Moves the participant past page `i` unless another request already did.
async fn advance_if_still(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    role: Role,
    i: usize,
) -> Result<(), HttpError> {
    let now = app.store.participant(&p.id).await?;
    if now.is_some_and(|now| now.flow_step == p.flow_step) {
        advance(app, p, study, role, flow::after(&study.study, role, i)).await?;
    }
    Ok(())
}

// ----- onboarding -----

/// The questions of a known rating item on the onboarding page, renamed per item so several
/// items share one form.
fn onboarding_questions(ev: &Evaluation, n: usize, k: &KnownItem) -> Vec<Question> {
    ev.questions
        .iter()
        .filter(|q| k.expect.contains_key(&q.id))
        .map(|q| {
            let mut q = q.clone();
            q.id = format!("ob{n}_{}", q.id);
            q
        })
        .collect()
}

/// The order a known comparison is shown in for this participant.
fn known_order(p: &Participant, n: usize, k: &KnownItem) -> Vec<String> {
    let mut d = k.dialogues();
    if d.len() == 2 && seed_of(&format!("{}/onboarding/{n}", p.id)) & 1 == 1 {
        d.swap(0, 1);
    }
    d
}

/// The onboarding page.
pub fn onboarding_page(
    study: &LoadedStudy,
    p: &Participant,
    page: Option<&Page>,
    action: &str,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let Some(ev) = &study.study.evaluation else {
        return String::new();
    };
    let Some(ob) = &ev.onboarding else {
        return String::new();
    };
    let seed = seed_of(&p.id);
    let w = words(study.study.language);
    let items: String = ob
        .items
        .iter()
        .enumerate()
        .map(|(n, k)| {
            let shown: Vec<&Dialogue> = known_order(p, n, k)
                .iter()
                .filter_map(|id| ev.dialogue(id))
                .collect();
            let body = match ev.task {
                EvalTask::Compare => format!(
                    "<div class=\"compare\">{}</div>{}",
                    shown
                        .iter()
                        .enumerate()
                        .map(|(s, d)| transcript(w, d, s, &w.with("eval-conversation-side", &[("side", SIDES[s])]), None, fields, &[]))
                        .collect::<String>(),
                    side_choice(w, &format!("ob{n}"), &compare_question(w, ev), fields, find_problem(problems, &format!("ob{n}")))
                ),
                EvalTask::Rate | EvalTask::Chat | EvalTask::Arena | EvalTask::SelfDialog | EvalTask::Spans | EvalTask::TurnActs => format!(
                    "{}{}",
                    shown
                        .iter()
                        .map(|d| transcript(w, d, 0, &w.get("eval-conversation"), None, fields, &[]))
                        .collect::<String>(),
                    fieldsets(
                        w,
                        &onboarding_questions(ev, n, k),
                        seed,
                        fields,
                        problems
                    )
                ),
            };
            format!(
                "<section class=\"known-item\" data-testid=\"onboarding-{n}\"><h2>{}</h2>{body}</section>",
                esc(&w.with("eval-practice-item", &[("n", &(n + 1).to_string())]))
            )
        })
        .collect();
    let body = format!(
        "<main class=\"wide\" data-page=\"onboarding\">{}<form method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"step\" value=\"{}\">{items}\
         <button type=\"submit\" class=\"primary\" data-testid=\"onboarding-submit\">{}</button></form></main>",
        page_head(page, &w.get("eval-practice-title")),
        esc(action),
        esc(&p.flow_step),
        esc(&w.get("eval-submit")),
    );
    layout_in(w.lang(), &study.study.title, "", &body, &[])
}

/// `POST /p/onboarding`.
pub async fn onboarding(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    let st = &study.study;
    let i = flow::index(&p.flow_step);
    let (Some(ev), true) = (
        st.evaluation.as_ref(),
        flow::kind_at(st, role, i) == PageKind::Onboarding
            && field(&fields, "step") == Some(p.flow_step.as_str()),
    ) else {
        return Ok(to_page(seat.as_deref()));
    };
    let Some(ob) = &ev.onboarding else {
        return Ok(to_page(seat.as_deref()));
    };
    let (problems, answers, correct) = grade_onboarding(words(st.language), ev, ob, &p, &fields);
    if !problems.is_empty() {
        let page = flow::pages(st, role).get(i);
        let action = format!("/p/onboarding{}", seat_query(seat.as_deref()));
        let html = onboarding_page(&study, &p, page, &action, &problems, &fields);
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response());
    }
    let total = ob.items.len() as u32;
    let passed = total > 0 && f64::from(correct) >= ob.pass_mark * f64::from(total) - 1e-9;
    let log = eval::ensure_log(&app, &p, &study).await?;
    let event = NewEvent {
        actor: eval::actor(&p),
        kind: EventKind::OnboardingDone {
            passed,
            correct,
            total,
            answers,
        },
        at_ms: now_ms(),
    };
    let once = format!("onboarding/{}", p.id);
    // Taken already (a double click, or the server stopped before moving on): the first
    // result stands, whatever this submission says.
    let passed = match app.store.append_once(&log, &once, vec![event]).await? {
        Some(_) => passed,
        None => eval::facts(&app, &p).await?.onboarding == "passed",
    };
    if passed {
        advance_if_still(&app, &p, &study, role, i).await?;
    } else {
        eval::screen_out(&app, &p, &study, ScreenReason::Onboarding).await?;
    }
    Ok(to_page(seat.as_deref()))
}

/// The onboarding answers in `fields` checked against the known items: the problems, the
/// answers by item and how many were right.
fn grade_onboarding(
    w: &Words,
    ev: &Evaluation,
    ob: &Onboarding,
    p: &Participant,
    fields: &[(String, String)],
) -> (Vec<Problem>, IndexMap<String, Value>, u32) {
    let seed = seed_of(&p.id);
    let mut problems = vec![];
    let mut answers = IndexMap::new();
    let mut correct = 0u32;
    for (n, k) in ob.items.iter().enumerate() {
        let key = format!("ob{n}");
        match ev.task {
            EvalTask::Compare => {
                let shown = known_order(p, n, k);
                let choice = match field(fields, &key) {
                    Some("left") => shown.first(),
                    Some("right") => shown.get(1),
                    _ => None,
                };
                match choice {
                    None => problems.push(Problem {
                        question: key.clone(),
                        message: w.get("eval-problem-choice"),
                    }),
                    Some(c) => {
                        correct += u32::from(k.correct(Some(c), &IndexMap::new()));
                        answers.insert(k.id(), Value::String(c.clone()));
                    }
                }
            }
            EvalTask::Rate
            | EvalTask::Chat
            | EvalTask::Arena
            | EvalTask::SelfDialog
            | EvalTask::Spans
            | EvalTask::TurnActs => {
                let qs = onboarding_questions(ev, n, k);
                match super::questions::check(w, &qs, fields, seed) {
                    Err(mut more) => problems.append(&mut more),
                    Ok(a) => {
                        let given: IndexMap<String, Value> = a
                            .to_event(&qs)
                            .into_iter()
                            .map(|(id, v)| {
                                (id.trim_start_matches(&format!("ob{n}_")).to_string(), v)
                            })
                            .collect();
                        correct += u32::from(k.correct(None, &given));
                        answers.insert(k.id(), Value::Object(given.into_iter().collect()));
                    }
                }
            }
        }
    }
    (problems, answers, correct)
}

// ----- rating and comparison -----

/// What `GET /p` shows on a `rate` or `compare` page: the worker's item, or (with no item left)
/// the next page, or the no-items page for a worker who judged nothing.
pub async fn judge_or_move_on(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    role: Role,
    i: usize,
    seat: Option<&str>,
) -> Result<Option<String>, HttpError> {
    let st = &study.study;
    let Some(ev) = &st.evaluation else {
        return Ok(None);
    };
    let f = eval::facts(app, p).await?;
    let page_id = flow::page_id(st, role, i);
    match eval::current_item(app, p, study, ev, &page_id, &f).await? {
        Some(lease) if ev.task.is_live() => {
            let study = app.study(Some(&st.id)).ok_or(HttpError::NotFound)?;
            let html =
                super::chat::conversation_page(app, &study, p, role, i, lease, &f, seat).await?;
            Ok(Some(html))
        }
        Some(lease) if matches!(ev.task, EvalTask::SelfDialog | EvalTask::Spans) => Ok(Some(
            super::self_dialog::item_page(app, study, ev, p, &lease, &f, seat, &[], &[]).await?,
        )),
        Some(lease) if ev.task == EvalTask::TurnActs => Ok(Some(
            super::turn_acts::item_page(study, ev, p, &lease, &f, seat, &[], &[]).await?,
        )),
        Some(lease) => {
            let action = format!("/p/judge{}", seat_query(seat));
            let page = flow::pages(st, role).get(i);
            Ok(Some(item_page(
                study,
                ev,
                p,
                page,
                &lease,
                &f,
                &action,
                seat,
                &[],
                &[],
            )))
        }
        None if f.judged == 0 => {
            let code = if ev.no_items.code {
                Some(ensure_code(app, p, role).await?)
            } else {
                None
            };
            let back = platform_return::of(st, p, EndingKind::NoItems, code.as_deref());
            Ok(Some(ending_page(
                study,
                &ev.no_items,
                "no-items",
                &words(st.language).get("eval-no-items-title"),
                &back,
            )))
        }
        None => Ok(None),
    }
}

/// The page of one item.
#[allow(clippy::too_many_arguments)]
fn item_page(
    study: &LoadedStudy,
    ev: &Evaluation,
    p: &Participant,
    page: Option<&Page>,
    lease: &Lease,
    f: &Facts,
    action: &str,
    seat: Option<&str>,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let shown_ids = eval::shown_order(lease);
    let shown: Vec<&Dialogue> = shown_ids.iter().filter_map(|id| ev.dialogue(id)).collect();
    let seed = seed_of(&format!("{}/{}", p.id, lease.id));
    let w = words(study.study.language);
    let annotate = ev.annotate.as_ref();
    let prompt = annotate
        .and_then(|a| a.prompt.as_deref())
        .map(|t| format!("<div class=\"annotate-prompt\">{}</div>", markdown(t)))
        .unwrap_or_default();
    let (dialogues, choice) = item_dialogues(w, ev, &shown, fields, problems);
    let qs = fieldsets(w, &ev.questions, seed, fields, problems);
    let progress = item_progress(w, ev, f);
    let body = format!(
        "<main class=\"wide\" data-page=\"{kind}\" data-item=\"{item}\">{head}{progress}{prompt}\
         <form method=\"post\" action=\"{action}\" id=\"judge\"><input type=\"hidden\" name=\"step\" value=\"{step}\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">{dialogues}{choice}{qs}\
         <button type=\"submit\" class=\"primary\" data-testid=\"judge-submit\">{submit}</button>\
         <button type=\"submit\" class=\"skip\" formaction=\"/p/skip{seatq}\" formnovalidate data-testid=\"judge-skip\">{skip}</button></form></main>",
        kind = match ev.task {
            EvalTask::Compare => "compare",
            _ => "rate",
        },
        item = esc(&lease.item_id),
        head = page_head(
            page,
            &w.get(match ev.task {
                EvalTask::Compare => "eval-compare-title",
                _ => "eval-rate-title",
            })
        ),
        action = esc(action),
        step = esc(&p.flow_step),
        lease = esc(&lease.id),
        seatq = esc(&seat_query(seat)),
        submit = esc(&w.get("eval-submit")),
        skip = esc(&w.get("eval-skip")),
    );
    layout_in(w.lang(), &study.study.title, "", &body, &[])
}

/// The item's dialogues as shown (side by side in a comparison) and, in a comparison, the
/// choice between them with its justification.
fn item_dialogues(
    w: &Words,
    ev: &Evaluation,
    shown: &[&Dialogue],
    fields: &[(String, String)],
    problems: &[Problem],
) -> (String, String) {
    let annotate = ev.annotate.as_ref();
    match ev.task {
        EvalTask::Compare => (
            format!(
                "<div class=\"compare\">{}</div>",
                shown
                    .iter()
                    .enumerate()
                    .map(|(s, d)| transcript(
                        w,
                        d,
                        s,
                        &w.with("eval-conversation-side", &[("side", SIDES[s])]),
                        annotate,
                        fields,
                        problems
                    ))
                    .collect::<String>()
            ),
            {
                let reason = justification_html(w, &ev.justification, fields, problems);
                format!(
                    "{}{reason}",
                    side_choice(
                        w,
                        "choice",
                        &compare_question(w, ev),
                        fields,
                        find_problem(problems, "choice")
                    )
                )
            },
        ),
        EvalTask::Rate
        | EvalTask::Chat
        | EvalTask::Arena
        | EvalTask::SelfDialog
        | EvalTask::Spans
        | EvalTask::TurnActs => (
            shown
                .iter()
                .map(|d| {
                    transcript(
                        w,
                        d,
                        0,
                        &w.get("eval-the-conversation"),
                        annotate,
                        fields,
                        problems,
                    )
                })
                .collect(),
            String::new(),
        ),
    }
}

/// The open lease named in the form, if it is this participant's.
pub(super) async fn own_lease(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    fields: &[(String, String)],
) -> Result<Option<Lease>, HttpError> {
    let Some(id) = field(fields, "lease") else {
        return Ok(None);
    };
    Ok(app
        .store
        .lease(id)
        .await?
        .filter(|l| l.worker == p.id && l.study_id == study.study.id))
}

/// The request's participant, study and own open lease for a lease-bound form of evaluation
/// task `task` (written dialogues, spans, act labels), when the participant is on a `rate` page
/// of a study with that task; `Err(response)` otherwise (back to the page).
pub(super) async fn lease_form(
    app: &AppState,
    me: Asking,
    fields: &Fields,
    task: EvalTask,
) -> Result<Result<(Participant, std::sync::Arc<LoadedStudy>, Lease), Response>, HttpError> {
    let Asking {
        p,
        study,
        role,
        seat,
    } = me;
    let seat = seat.as_deref();
    let st = &study.study;
    let on_page = flow::kind_at(st, role, flow::index(&p.flow_step)) == PageKind::Rate;
    let task_ok = st.evaluation.as_ref().is_some_and(|e| e.task == task);
    if !on_page || !task_ok {
        return Ok(Err(to_page(seat)));
    }
    match own_lease(app, &p, &study, fields).await? {
        Some(lease) if lease.state == LeaseState::Leased => Ok(Ok((p, study, lease))),
        _ => Ok(Err(to_page(seat))),
    }
}

/// Submits the judgment of a lease-bound form (written dialogues, spans, act labels): the
/// lease's item with `answers`, over `dialogues` (of `systems`), on the participant's current
/// page; no choice, reason or turn labels. See [`submit_judgment`].
pub(super) async fn submit_form_judgment(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    lease: &Lease,
    (systems, dialogues): (Vec<String>, Vec<String>),
    answers: IndexMap<String, Value>,
) -> Result<SubmitOutcome, HttpError> {
    let role = p.role.unwrap_or(Role::User);
    let log = eval::ensure_log(app, p, study).await?;
    let judgment = Judgment {
        page: flow::page_id(&study.study, role, flow::index(&p.flow_step)),
        item: lease.item_id.clone(),
        lease: lease.id.clone(),
        pool: lease.pool,
        systems,
        dialogues,
        choice: None,
        justification: None,
        answers,
        turns: vec![],
        counted: false,
        surplus: false,
        gold_correct: None,
        claimed_at_ms: lease.claimed_at_ms,
        void: false,
    };
    submit_judgment(app, p, &log, judgment).await
}

/// The systems and dialogues a lease's judgment is over: the lease's dialogues, each of the
/// system the evaluation gives it.
pub(super) fn lease_dialogues(ev: &Evaluation, lease: &Lease) -> (Vec<String>, Vec<String>) {
    (
        lease.dialogues.iter().map(|d| ev.system_of(d)).collect(),
        lease.dialogues.clone(),
    )
}

/// `POST /p/judge`: one judgment.
pub async fn judge(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    let st = &study.study;
    let i = flow::index(&p.flow_step);
    let judging = matches!(
        flow::kind_at(st, role, i),
        PageKind::Rate | PageKind::Compare
    );
    let (Some(ev), true) = (st.evaluation.as_ref(), judging) else {
        return Ok(to_page(seat.as_deref()));
    };
    if matches!(
        ev.task,
        EvalTask::SelfDialog | EvalTask::Spans | EvalTask::TurnActs
    ) {
        // Written dialogues, spans and act labels are submitted by their own forms
        // (`/p/self-dialog/…`, `/p/spans/…`, `/p/acts/submit`).
        return Ok(to_page(seat.as_deref()));
    }
    let Some(lease) = own_lease(&app, &p, &study, &fields).await? else {
        return Ok(to_page(seat.as_deref()));
    };
    let shown_ids = eval::shown_order(&lease);
    let seed = seed_of(&format!("{}/{}", p.id, lease.id));
    let checked = check_judgment(words(st.language), ev, &shown_ids, &fields, seed);
    if !checked.problems.is_empty() {
        let f = eval::facts(&app, &p).await?;
        let page = flow::pages(st, role).get(i);
        let action = format!("/p/judge{}", seat_query(seat.as_deref()));
        let html = item_page(
            &study,
            ev,
            &p,
            page,
            &lease,
            &f,
            &action,
            seat.as_deref(),
            &checked.problems,
            &fields,
        );
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response());
    }
    let gold_correct = match lease.pool {
        ItemPool::Gold => ev
            .gold_item(&lease.item_id)
            .map(|k| k.correct(checked.choice.as_deref(), &checked.answers)),
        ItemPool::Item => None,
    };
    let log = eval::ensure_log(&app, &p, &study).await?;
    let judgment = checked.judgment(
        ev,
        flow::page_id(st, role, i),
        &lease,
        shown_ids,
        gold_correct,
    );
    let outcome = submit_judgment(&app, &p, &log, judgment).await?;
    if gold_correct == Some(false)
        && !matches!(outcome, SubmitOutcome::AlreadyClosed(_))
        && let Some(max) = ev.gold.as_ref().and_then(|g| g.max_failures)
    {
        let f = eval::facts(&app, &p).await?;
        if f.gold_failures > max {
            eval::screen_out(&app, &p, &study, ScreenReason::Gold).await?;
        }
    }
    Ok(to_page(seat.as_deref()))
}

/// A judgment's form, checked: its problems, and what it gives.
struct Checked {
    problems: Vec<Problem>,
    answers: IndexMap<String, Value>,
    choice: Option<String>,
    justification: Option<String>,
    turns: Vec<TurnLabel>,
}

impl Checked {
    /// The judgment this form gives of the item under `lease`, shown on page `page` with its
    /// dialogues in the order `shown_ids`.
    fn judgment(
        self,
        ev: &Evaluation,
        page: String,
        lease: &Lease,
        shown_ids: Vec<String>,
        gold_correct: Option<bool>,
    ) -> Judgment {
        Judgment {
            page,
            item: lease.item_id.clone(),
            lease: lease.id.clone(),
            pool: lease.pool,
            systems: shown_ids.iter().map(|d| ev.system_of(d)).collect(),
            dialogues: shown_ids,
            choice: self.choice,
            justification: self.justification,
            answers: self.answers,
            turns: self.turns,
            counted: false,
            surplus: false,
            gold_correct,
            claimed_at_ms: lease.claimed_at_ms,
            void: false,
        }
    }
}

/// Checks a judgment's form over the dialogues `shown_ids` (in the order shown): the
/// questions, then (in a comparison) the choice and its reason, then the turns' labels.
fn check_judgment(
    w: &Words,
    ev: &Evaluation,
    shown_ids: &[String],
    fields: &[(String, String)],
    seed: u64,
) -> Checked {
    let shown: Vec<&Dialogue> = shown_ids.iter().filter_map(|id| ev.dialogue(id)).collect();
    let mut problems = vec![];
    let answers = match super::questions::check(w, &ev.questions, fields, seed) {
        Ok(a) => a.to_event(&ev.questions),
        Err(mut more) => {
            problems.append(&mut more);
            IndexMap::new()
        }
    };
    let mut choice = None;
    let mut justification = None;
    if ev.task == EvalTask::Compare {
        choice = match field(fields, "choice") {
            Some("left") => shown_ids.first().cloned(),
            Some("right") => shown_ids.get(1).cloned(),
            _ => None,
        };
        if choice.is_none() {
            problems.push(Problem {
                question: "choice".into(),
                message: w.get("eval-problem-choice"),
            });
        }
        justification = check_justification(w, &ev.justification, fields, &mut problems);
    }
    let turns = turn_labels(ev, &shown, fields);
    if let Some(a) = &ev.annotate {
        for t in &turns {
            let side = shown.iter().position(|d| d.id == t.dialogue).unwrap_or(0);
            if let Some(message) = turn_problem(w, a, &t.labels, t.score) {
                problems.push(Problem {
                    question: turn_field(side, t.turn as usize),
                    message,
                });
            }
        }
    }
    Checked {
        problems,
        answers,
        choice,
        justification,
        turns,
    }
}

/// The reason given for a choice (`None` when not asked or left empty); a missing required
/// reason or one too long is a problem of field `justification`.
pub(super) fn check_justification(
    w: &Words,
    j: &Justification,
    fields: &[(String, String)],
    problems: &mut Vec<Problem>,
) -> Option<String> {
    if !j.ask {
        return None;
    }
    let text = field(fields, "justification").unwrap_or("");
    let words = text.split_whitespace().count() as u32;
    if text.chars().count() > questions::MAX_TEXT_CHARS {
        problems.push(Problem {
            question: "justification".into(),
            message: w.with(
                "eval-problem-reason-too-long",
                &[("max", &questions::MAX_TEXT_CHARS.to_string())],
            ),
        });
    } else if j.required && (words == 0 || words < j.min_words) {
        problems.push(Problem {
            question: "justification".into(),
            message: if j.min_words > 1 {
                w.with(
                    "eval-problem-reason-words",
                    &[("min", &j.min_words.to_string())],
                )
            } else {
                w.get("eval-problem-reason")
            },
        });
    }
    Some(text.to_string()).filter(|t| !t.is_empty())
}

/// The reason field of a choice, with its problem.
pub(super) fn justification_html(
    w: &Words,
    j: &Justification,
    fields: &[(String, String)],
    problems: &[Problem],
) -> String {
    if !j.ask {
        return String::new();
    }
    let prob = find_problem(problems, "justification");
    let default_prompt = w.get("eval-reason-prompt");
    let prompt = j.prompt.as_deref().unwrap_or(&default_prompt);
    format!(
        "<fieldset class=\"question q-text\" data-testid=\"question-justification\"><legend id=\"justification-legend\">{}{}</legend>\
         <textarea name=\"justification\" id=\"justification\" aria-labelledby=\"justification-legend\" rows=\"3\" maxlength=\"{}\"{}>{}</textarea>{}</fieldset>",
        esc(prompt),
        super::questions::optional_mark(w, j.required, prompt),
        questions::MAX_TEXT_CHARS,
        if j.required { " required" } else { "" },
        esc(field(fields, "justification").unwrap_or("")),
        problem_html("justification", prob),
    )
}

/// Stores a judgment in the participant's log and closes its lease, in one transaction: counted
/// when the lease was live (or its item still needed it), surplus otherwise (gold judgments
/// never count).
pub(super) async fn submit_judgment(
    app: &AppState,
    p: &Participant,
    log: &str,
    judgment: Judgment,
) -> Result<SubmitOutcome, HttpError> {
    let actor = eval::actor(p);
    let at_ms = now_ms();
    let lease = judgment.lease.clone();
    let events = Box::new(move |outcome: SubmitOutcome| {
        let mut j = judgment;
        j.counted = outcome == SubmitOutcome::Counted && j.pool == ItemPool::Item;
        j.surplus = outcome == SubmitOutcome::Surplus;
        vec![NewEvent {
            actor,
            kind: EventKind::Judged(Box::new(j)),
            at_ms,
        }]
    });
    Ok(app.store.submit(&lease, at_ms, log, events).await?.0)
}

/// What a participant filled in on an item's form: every field with a value but the form's own
/// (`lease`, `step`). The skip button is part of the item's form, so a skip sends it along.
fn given_on_item(fields: &Fields) -> Vec<(String, String)> {
    fields
        .iter()
        .filter(|(name, value)| name != "lease" && name != "step" && !value.trim().is_empty())
        .cloned()
        .collect()
}

/// `POST /p/skip`: gives the item back, keeping in the log what was filled in on it.
pub async fn skip(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, .. } = me;
    if let Some(lease) = own_lease(&app, &p, &study, &fields).await?
        && app.store.return_lease(&lease.id, now_ms()).await?
    {
        eval::record(
            &app,
            &p,
            &study,
            vec![EventKind::ItemReturned {
                item: lease.item_id.clone(),
                lease: lease.id.clone(),
                given: given_on_item(&fields),
            }],
        )
        .await?;
    }
    Ok(to_page(seat.as_deref()))
}

// ----- endings -----

/// A page that ends the participant's part early (no item left, screened out), with what the
/// participant hands in there (a code when the study gives one, the way back to Prolific).
pub fn ending_page(
    study: &LoadedStudy,
    ending: &Ending,
    testid: &str,
    default_title: &str,
    back: &Return,
) -> String {
    let w = words(study.study.language);
    let body = format!(
        "<main class=\"narrow\" data-page=\"{testid}\" data-testid=\"{testid}\"><h1>{}</h1>{}{}{}</main>",
        esc(ending.title.as_deref().unwrap_or(default_title)),
        ending
            .text
            .as_deref()
            .map(markdown)
            .unwrap_or_else(|| format!("<p>{}</p>", esc(&w.get("eval-ending-text")))),
        back.body(),
        back.link(),
    );
    layout_in(w.lang(), &study.study.title, &back.head(), &body, &[])
}

/// The page of a screened-out participant.
pub async fn screened_page(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    role: Role,
    reason: ScreenReason,
) -> Result<String, HttpError> {
    let ev = study.study.evaluation.as_ref();
    let default = Ending::default();
    let ending = match reason {
        ScreenReason::Gold => ev.and_then(|e| e.gold.as_ref()).map(|g| &g.fail),
        _ => ev.and_then(|e| e.onboarding.as_ref()).map(|o| &o.fail),
    }
    .unwrap_or(&default);
    let code = if ending.code {
        Some(ensure_code(app, p, role).await?)
    } else {
        None
    };
    let kind = match reason {
        ScreenReason::Onboarding => EndingKind::ScreenedOnboarding,
        ScreenReason::Gold => EndingKind::ScreenedGold,
        ScreenReason::Blocklist => EndingKind::ScreenedBlocklist,
    };
    let back = platform_return::of(&study.study, p, kind, code.as_deref());
    let title = words(study.study.language).get("eval-screened-title");
    Ok(ending_page(study, ending, "screened", &title, &back))
}

/// The line above an item page: which item of the worker's share this is and the time to submit
/// it.
pub(super) fn item_progress(w: &Words, ev: &Evaluation, f: &Facts) -> String {
    format!(
        "<p class=\"muted\" data-testid=\"item-progress\">{}</p>",
        esc(&w.with(
            "eval-item-progress",
            &[
                ("item", &(f.judged.min(ev.items_per_worker) + 1).to_string()),
                ("items", &ev.items_per_worker.to_string()),
                ("minutes", &ev.lease_s.div_ceil(60).to_string()),
            ]
        ))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wozkit_core::language::Language;

    fn annotation(kind: &str, exclusive: &[&str], required: bool) -> TurnAnnotation {
        serde_json::from_value(serde_json::json!({
            "speaker": "bot",
            "kind": kind,
            "options": ["Helpful", "Rude", "Made up", "None of these"],
            "exclusive": exclusive,
            "required": required,
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn turn_problems_read_in_english_as_the_core_writes_them_and_in_chinese() {
        let en = words(Language::En);
        let zh = words(Language::ZhHans);
        let labels = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            (
                annotation("checkboxes", &["None of these"], true),
                labels(&["None of these", "Rude", "Made up"]),
                None,
            ),
            (
                annotation("checkboxes", &["None of these"], true),
                vec![],
                None,
            ),
            (annotation("checkboxes", &[], true), vec![], None),
            (annotation("checkboxes", &[], false), vec![], None),
            (annotation("scale", &[], true), vec![], None),
            (annotation("scale", &[], true), vec![], Some(3)),
        ];
        let mut said = 0;
        for (a, l, score) in &cases {
            let english = turn_problem(en, a, l, *score);
            assert_eq!(english, a.turn_problem(l, *score));
            let chinese = turn_problem(zh, a, l, *score);
            assert_eq!(chinese.is_some(), english.is_some());
            if let Some(c) = chinese {
                said += 1;
                assert!(
                    c.chars().any(|ch| ('\u{4e00}'..='\u{9fff}').contains(&ch)),
                    "{c}"
                );
            }
        }
        assert_eq!(said, 4);
        let exclusive = turn_problem(zh, &cases[0].0, &cases[0].1, None);
        assert_eq!(
            exclusive.as_deref(),
            Some("“None of these”不能与“Rude”、“Made up”同时勾选：请取消其中一个。")
        );
    }
}
