//! The `chat` and `arena` pages: a participant chats with one system (then rates it) or with
//! two hidden systems at once (then votes), and the page that reveals a battle's systems.
//!
//! Like every page of the flow, they are plain forms that work without JavaScript: sending a
//! turn posts the form and the page comes back with the replies. With JavaScript (`chat.js`),
//! the same form is sent with `Accept: application/x-ndjson` and the replies stream in as they
//! are written, one JSON object per line (`crate::chat::Frame`); the last line is the page as
//! it now is, which the script puts in place of the old one: a turn is one request, not a post
//! and a reload.
//!
//! | route | does |
//! |---|---|
//! | `POST /p/chat/send` | the participant's turn (and labels of the replies above it) |
//! | `POST /p/chat/retry` | asks a system that failed the last turn again |
//! | `POST /p/chat/end` | ends the conversation once the fewest turns are reached |
//! | `POST /p/chat/finish` | the questions (and the vote) after the conversation |
//! | `GET /p/chat/reveal` | after a vote: which system was on which side |

use std::convert::Infallible;

use axum::Form;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use futures_util::StreamExt;
use indexmap::IndexMap;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use wozkit_core::evaluation::{AnnotationKind, EvalTask, Evaluation, TurnAnnotation};
use wozkit_core::event::{
    Actor, EndReason, EventKind, ItemPool, Judgment, MessageSource, Role, TurnLabel, VOTE_BOTH_BAD,
    VOTE_TIE,
};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind};
use wozkit_core::questions::{Problem, seed_of};
use wozkit_store::{Lease, LeaseState, NewEvent, Participant};

use super::extract::Asking;
use super::html::{esc, layout_in, query_escape};
use super::judge::{
    Fields, check_justification, field, find_problem, justification_html, own_lease, page_head,
    problem_html, submit_judgment, turn_problem,
};
use super::pages::{markup_now, to_page};
use super::questions::fieldsets;
use crate::app::{AppState, now_ms};
use crate::chat::{self, Convo, Frame, Side};
use crate::error::HttpError;
use crate::evaluation::{self as eval, Facts};
use crate::flow;
use crate::i18n::{Words, words};
use crate::security::seat_query;

/// Live feedback values under a reply: form value, label's catalogue key.
const FEEDBACK: [(&str, &str); 2] = [
    ("satisfied", "eval-chat-satisfied"),
    ("frustrated", "eval-chat-frustrated"),
];

/// The vote choices of a battle: form value, label's catalogue key.
const VOTES: [(&str, &str); 4] = [
    ("left", "eval-arena-vote-left"),
    ("right", "eval-arena-vote-right"),
    (VOTE_TIE, "eval-arena-vote-tie"),
    (VOTE_BOTH_BAD, "eval-arena-vote-both-bad"),
];

/// How a side is named to the participant.
fn side_label(w: &Words, side: &Side) -> String {
    w.get(match side.name {
        "left" => "eval-chat-assistant-a",
        "right" => "eval-chat-assistant-b",
        _ => "eval-chat-assistant",
    })
}

/// `key`'s message with its variables set from `args`, then `{ $name }` set to trusted markup
/// `html`; the rest is escaped.
fn with_markup(w: &Words, key: &str, args: &[(&str, &str)], name: &str, html: &str) -> String {
    const HOLE: &str = "\u{1}";
    let mut all = args.to_vec();
    all.push((name, HOLE));
    esc(&w.with(key, &all)).replace(HOLE, html)
}

/// A conversation under a lease, with each side's state.
struct Ctx {
    p: Participant,
    study: std::sync::Arc<LoadedStudy>,
    role: Role,
    i: usize,
    lease: Lease,
    sides: Vec<Side>,
    convos: Vec<Convo>,
}

impl Ctx {
    fn words(&self) -> &'static Words {
        words(self.study.study.language)
    }
    fn ev(&self) -> &Evaluation {
        self.study
            .study
            .evaluation
            .as_ref()
            .expect("a chat page has an evaluation")
    }
    fn ended(&self) -> bool {
        self.convos.iter().any(|c| c.ended.is_some())
    }
    fn pending(&self) -> bool {
        self.convos.iter().any(|c| c.pending)
    }
    fn failed(&self) -> bool {
        self.convos.iter().any(|c| c.failed.is_some())
    }
    fn turns(&self) -> u32 {
        self.convos.first().map_or(0, |c| c.turns)
    }
    fn page(&self) -> Option<&Page> {
        flow::pages(&self.study.study, self.role).get(self.i)
    }
    fn page_id(&self) -> String {
        flow::page_id(&self.study.study, self.role, self.i)
    }
    fn time_up(&self, now: u64) -> bool {
        let limit = self.ev().conversation.time_limit_s;
        match (limit, self.convos.first().and_then(|c| c.first_turn_at_ms)) {
            (Some(s), Some(first)) => now >= first.saturating_add(u64::from(s) * 1000),
            _ => false,
        }
    }
}

async fn read_convos(app: &AppState, sides: &[Side]) -> Result<Vec<Convo>, HttpError> {
    let mut out = Vec::with_capacity(sides.len());
    for s in sides {
        out.push(chat::convo(app, s).await?);
    }
    Ok(out)
}

/// The conversation a form is about: this participant's open lease on a `chat` or `arena` page
/// they are on. `Err` holds the response to give instead (back to their page).
async fn context(
    app: &AppState,
    me: Asking,
    fields: &[(String, String)],
) -> Result<Result<Ctx, Response>, HttpError> {
    let Asking {
        p,
        study,
        role,
        seat,
    } = me;
    let seat = seat.as_deref();
    let st = &study.study;
    let i = flow::index(&p.flow_step);
    let on_page = matches!(flow::kind_at(st, role, i), PageKind::Chat | PageKind::Arena);
    let (Some(ev), true) = (st.evaluation.as_ref(), on_page) else {
        return Ok(Err(to_page(seat)));
    };
    if field(fields, "step") != Some(p.flow_step.as_str()) {
        return Ok(Err(to_page(seat)));
    }
    let Some(lease) = own_lease(app, &p, &study, fields).await? else {
        return Ok(Err(to_page(seat)));
    };
    if lease.state != LeaseState::Leased {
        return Ok(Err(to_page(seat)));
    }
    let sides = chat::sides(ev, &lease);
    let convos = read_convos(app, &sides).await?;
    Ok(Ok(Ctx {
        p,
        study,
        role,
        i,
        lease,
        sides,
        convos,
    }))
}

/// Ends every side of the conversation (once) for `reason`.
async fn end_all(app: &AppState, sides: &[Side], reason: EndReason) -> Result<(), HttpError> {
    let now = now_ms();
    for s in sides {
        let end = NewEvent {
            actor: Actor::System,
            kind: EventKind::SessionEnded {
                reason,
                goal_reached: false,
            },
            at_ms: now,
        };
        app.store.append_once(&s.session, "end", vec![end]).await?;
        app.store.end_session(&s.session, reason, now).await?;
    }
    Ok(())
}

/// What `GET /p` shows on a `chat` or `arena` page with an item under lease.
#[allow(clippy::too_many_arguments)]
pub async fn conversation_page(
    app: &AppState,
    study: &std::sync::Arc<LoadedStudy>,
    p: &Participant,
    role: Role,
    i: usize,
    lease: Lease,
    f: &Facts,
    seat: Option<&str>,
) -> Result<String, HttpError> {
    let Some(ev) = &study.study.evaluation else {
        return Ok(String::new());
    };
    let sides = chat::sides(ev, &lease);
    let mut ctx = Ctx {
        p: p.clone(),
        study: study.clone(),
        role,
        i,
        convos: read_convos(app, &sides).await?,
        sides,
        lease,
    };
    if !ctx.ended() && ctx.time_up(now_ms()) {
        end_all(app, &ctx.sides, EndReason::TimeLimit).await?;
        ctx.convos = read_convos(app, &ctx.sides).await?;
    }
    // A reply the server stopped in the middle of is asked for again.
    for (s, c) in ctx.sides.iter().zip(&ctx.convos) {
        if c.pending && !app.systems.is_running(&s.session) {
            chat::ask(app, &study.study.id, s, None, None);
        }
    }
    Ok(render(&ctx, f, seat, None, &[], &[]))
}

/// The labels of one reply: checkboxes or a scale (per-turn annotation) and the live feedback,
/// as inputs of form `form` — or, for a reply already labelled, the labels given.
fn reply_controls(
    w: &Words,
    ev: &Evaluation,
    side: &Side,
    said: &chat::Said,
    form: Option<&str>,
    fields: &[(String, String)],
    problems: &[Problem],
) -> String {
    let annotate = ev.annotate.as_ref();
    let feedback = ev.conversation.feedback;
    if annotate.is_none() && !feedback {
        return String::new();
    }
    let Some(form) = form else {
        return given_labels(w, said);
    };
    let name = format!("ann.{}", side.name);
    let mut out = String::new();
    if let Some(a) = annotate {
        out.push_str(&annotation_fieldset(
            w, a, side, &name, form, fields, problems,
        ));
    }
    if feedback {
        out.push_str(&feedback_fieldset(w, side, form, fields));
    }
    out
}

/// The labels already given to a reply, as one line (nothing when it has none).
fn given_labels(w: &Words, said: &chat::Said) -> String {
    let mut given: Vec<String> = said.labels.clone();
    given.extend(said.score.map(|s| format!("{s}")));
    given.extend(said.feedback.as_deref().map(|f| {
        FEEDBACK
            .iter()
            .find(|(v, _)| *v == f)
            .map_or_else(|| f.to_string(), |(_, key)| w.get(key))
    }));
    if given.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"given-labels muted\">{}</p>",
        esc(&given.join(" · "))
    )
}

/// ` checked` when the value `v` of input `n` was posted with the form.
///
/// What was posted with a refused form is ticked again, so nothing has to be redone. Nothing
/// else is: `autocomplete="off"` keeps Firefox from restoring ticks by their place on the page
/// when it reloads after the replies, which would move them onto other replies (and store
/// labels the participant never gave).
fn posted(fields: &[(String, String)], n: &str, v: &str) -> &'static str {
    if fields.iter().any(|(fname, fv)| fname == n && fv == v) {
        " checked"
    } else {
        ""
    }
}

/// The per-turn annotation of one reply (checkboxes or a scale), as inputs of form `form`.
fn annotation_fieldset(
    w: &Words,
    a: &TurnAnnotation,
    side: &Side,
    name: &str,
    form: &str,
    fields: &[(String, String)],
    problems: &[Problem],
) -> String {
    let inputs: String = match a.kind {
        AnnotationKind::Checkboxes => a
            .options
            .iter()
            .map(|o| {
                format!(
                    "<label><input type=\"checkbox\" form=\"{form}\" name=\"{name}\" value=\"{v}\" autocomplete=\"off\"{c}> {v}</label>",
                    v = esc(o),
                    c = posted(fields, name, o),
                )
            })
            .collect(),
        AnnotationKind::Scale => (1..=a.points())
            .map(|p| {
                format!(
                    "<label><input type=\"radio\" form=\"{form}\" name=\"{name}\" value=\"{p}\" autocomplete=\"off\"{c}> {p}</label>",
                    c = posted(fields, name, &p.to_string()),
                )
            })
            .collect(),
    };
    let default_prompt = w.get("eval-chat-reply-prompt");
    let prompt = a.prompt.as_deref().unwrap_or(&default_prompt);
    format!(
        "<fieldset class=\"turn-labels\" data-testid=\"annotate-{side}\"><legend>{}</legend>{inputs}{}</fieldset>",
        esc(prompt),
        problem_html(name, find_problem(problems, name)),
        side = side.name
    )
}

/// The live feedback of one reply, as inputs of form `form`.
fn feedback_fieldset(w: &Words, side: &Side, form: &str, fields: &[(String, String)]) -> String {
    let radios: String = FEEDBACK
        .iter()
        .map(|(v, key)| {
            format!(
                "<label><input type=\"radio\" form=\"{form}\" name=\"fb.{side}\" value=\"{v}\" data-testid=\"feedback-{side}-{v}\"{c}> {label}</label>",
                side = side.name,
                c = posted(fields, &format!("fb.{}", side.name), v),
                label = esc(&w.get(key)),
            )
        })
        .collect();
    format!(
        "<fieldset class=\"turn-labels feedback\"><legend>{}</legend>{radios}</fieldset>",
        esc(&w.get("eval-chat-feeling"))
    )
}

/// The whole page: the sides' conversations, then the input (or, once ended, the questions).
fn render(
    ctx: &Ctx,
    f: &Facts,
    seat: Option<&str>,
    notice: Option<&str>,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let ev = ctx.ev();
    let w = ctx.words();
    let arena = ev.task == EvalTask::Arena;
    let seatq = seat_query(seat);
    let ended = ctx.ended();
    let form_id = if ended { "chat-finish" } else { "chat-send" };
    let panels: String = ctx
        .sides
        .iter()
        .zip(&ctx.convos)
        .map(|(side, convo)| side_panel(ctx, side, convo, form_id, &seatq, problems, fields))
        .collect();
    let progress = progress_html(ctx, f);
    let notice = notice
        .map(|n| {
            format!(
                "<p class=\"problem\" role=\"alert\" data-testid=\"chat-notice\">{}</p>",
                esc(n)
            )
        })
        .unwrap_or_default();
    let hidden = format!(
        "<input type=\"hidden\" name=\"step\" value=\"{}\"><input type=\"hidden\" name=\"lease\" value=\"{}\">",
        esc(&ctx.p.flow_step),
        esc(&ctx.lease.id)
    );
    let bottom = if ended {
        finish_form(ctx, &hidden, &seatq, problems, fields)
    } else {
        send_form(ctx, &hidden, &seatq, fields)
    };
    let body = format!(
        "<main class=\"wide chat\" data-page=\"{kind}\" data-item=\"{item}\" data-pending=\"{pending}\">{head}{progress}{notice}\
         <div class=\"{layout}\">{panels}</div>{bottom}</main>",
        kind = if arena { "arena" } else { "chat" },
        item = esc(&ctx.lease.item_id),
        pending = ctx.pending(),
        head = page_head(
            ctx.page(),
            &w.get(if arena {
                "eval-arena-title"
            } else {
                "eval-chat-title"
            })
        ),
        layout = if arena {
            "compare chat-sides"
        } else {
            "chat-sides"
        },
    );
    let page_words = format!("{}{}", w.script_block("chat-js-"), body);
    layout_in(
        w.lang(),
        &ctx.study.study.title,
        "",
        &page_words,
        &["chat.js"],
    )
}

/// One side's panel: its conversation so far (with the labels under the last reply), the
/// typing line and, when its system failed, the retry form.
fn side_panel(
    ctx: &Ctx,
    side: &Side,
    convo: &Convo,
    form_id: &str,
    seatq: &str,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let ev = ctx.ev();
    let w = ctx.words();
    let last = convo.last_reply().map(|s| s.index);
    let said: String = convo
        .said
        .iter()
        .map(|s| {
            let who = if s.by_system { "system" } else { "user" };
            let controls = if s.by_system {
                let form = (Some(s.index) == last && s.labels.is_empty() && s.score.is_none() && s.feedback.is_none()).then_some(form_id);
                reply_controls(w, ev, side, s, form, fields, problems)
            } else {
                String::new()
            };
            format!(
                "<li class=\"said {who}\" data-index=\"{}\"><span class=\"speaker\">{}</span> <span class=\"text\">{}</span>{controls}</li>",
                s.index,
                esc(&if s.by_system { side_label(w, side) } else { w.get("eval-chat-you") }),
                esc(&s.text)
            )
        })
        .collect();
    let typing = format!(
        "<p class=\"typing muted\" data-testid=\"typing-{n}\" role=\"status\"{hidden}>{typing}</p>",
        n = side.name,
        typing = esc(&w.with("eval-chat-typing", &[("assistant", &side_label(w, side))])),
        hidden = if convo.pending { "" } else { " hidden" }
    );
    let failed = convo
        .failed
        .as_ref()
        .map(|_| {
            format!(
                "<div class=\"problem failed\" role=\"alert\" data-testid=\"failed-{n}\">{failed} \
                 <form method=\"post\" action=\"/p/chat/retry{seatq}\" class=\"inline\">\
                 <input type=\"hidden\" name=\"step\" value=\"{step}\"><input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
                 <input type=\"hidden\" name=\"side\" value=\"{n}\">\
                 <button type=\"submit\" data-testid=\"retry-{n}\">{retry}</button></form></div>",
                n = side.name,
                failed = esc(&w.with("eval-chat-failed", &[("assistant", &side_label(w, side))])),
                retry = esc(&w.get("eval-chat-retry")),
                seatq = esc(seatq),
                step = esc(&ctx.p.flow_step),
                lease = esc(&ctx.lease.id),
            )
        })
        .unwrap_or_default();
    format!(
        "<section class=\"chat-side\" data-side=\"{n}\" data-testid=\"side-{n}\" aria-label=\"{label}\">\
         <h2>{label}</h2><ol class=\"chat-log\" data-testid=\"log-{n}\" aria-live=\"polite\">{said}</ol>{typing}{failed}</section>",
        n = side.name,
        label = esc(&side_label(w, side)),
    )
}

/// The progress line: turns so far and their bounds, the time limit, which conversation of
/// the worker's this is.
fn progress_html(ctx: &Ctx, f: &Facts) -> String {
    let ev = ctx.ev();
    let w = ctx.words();
    let c = &ev.conversation;
    let turns = ctx.turns();
    let mut progress = vec![w.with(
        "eval-chat-progress",
        &[
            ("turns", &turns.to_string()),
            ("min", &c.min_turns.to_string()),
            ("max", &c.max_turns.to_string()),
        ],
    )];
    if let Some(s) = c.time_limit_s {
        let minutes = s.div_ceil(60).to_string();
        progress.push(w.with("eval-chat-time-limit", &[("minutes", &minutes)]));
    }
    if ev.items_per_worker > 1 {
        let n = (f.judged.min(ev.items_per_worker) + 1).to_string();
        let max = ev.items_per_worker.to_string();
        progress.push(w.with("eval-chat-conversation-of", &[("n", &n), ("max", &max)]));
    }
    format!(
        "<p class=\"muted\" data-testid=\"chat-progress\">{}</p>",
        esc(&progress.join(" · "))
    )
}

/// The form once the conversation has ended: the vote of a battle (with its justification)
/// and the questions.
fn finish_form(
    ctx: &Ctx,
    hidden: &str,
    seatq: &str,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let ev = ctx.ev();
    let w = ctx.words();
    let vote = if ev.task == EvalTask::Arena {
        vote_html(w, ev, problems, fields)
    } else {
        String::new()
    };
    let seed = seed_of(&format!("{}/{}", ctx.p.id, ctx.lease.id));
    format!(
        "<form method=\"post\" action=\"/p/chat/finish{}\" id=\"chat-finish\" data-testid=\"chat-finish-form\" autocomplete=\"off\">{hidden}\
         <p data-testid=\"chat-ended\">{}</p>{vote}{}\
         <button type=\"submit\" class=\"primary\" data-testid=\"chat-finish\">{}</button></form>",
        esc(seatq),
        esc(&w.get(match ctx.convos.first().and_then(|c| c.ended) {
            Some(EndReason::TimeLimit) => "eval-chat-time-up",
            _ => "eval-chat-ended",
        })),
        fieldsets(w, &ev.questions, seed, fields, problems),
        esc(&w.get("eval-submit")),
    )
}

/// A battle's vote: its choices and the justification asked with it.
fn vote_html(
    w: &Words,
    ev: &Evaluation,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let chosen = field(fields, "vote");
    let radios: String = VOTES
        .iter()
        .map(|(v, key)| {
            format!(
                "<label class=\"point\"><input type=\"radio\" name=\"vote\" value=\"{v}\" data-testid=\"vote-{v}\" required{c}> {label}</label>",
                c = if chosen == Some(*v) { " checked" } else { "" },
                label = esc(&w.get(key)),
            )
        })
        .collect();
    format!(
        "<fieldset class=\"question choice-pair\" data-testid=\"question-vote\"><legend>{}</legend>{radios}{}</fieldset>{}",
        esc(&ev
            .question
            .clone()
            .unwrap_or_else(|| w.get("eval-arena-question"))),
        problem_html("vote", find_problem(problems, "vote")),
        justification_html(w, &ev.justification, fields, problems),
    )
}

/// The form while the conversation goes on: the message box (or, at the most turns, a line
/// saying so) and, once the fewest turns are reached, the end button.
fn send_form(ctx: &Ctx, hidden: &str, seatq: &str, fields: &[(String, String)]) -> String {
    let ev = ctx.ev();
    let w = ctx.words();
    let c = &ev.conversation;
    let turns = ctx.turns();
    let closed = turns >= c.max_turns;
    let input = if closed {
        format!(
            "<p data-testid=\"chat-max\">{}</p>",
            esc(&w.get("eval-chat-max"))
        )
    } else {
        format!(
            "<label for=\"chat-text\" class=\"sr-only\">{}</label>\
             <textarea id=\"chat-text\" name=\"text\" rows=\"2\" autocomplete=\"off\" maxlength=\"{}\" required placeholder=\"{}\" data-testid=\"chat-text\">{}</textarea>\
             <button type=\"submit\" class=\"primary\" data-testid=\"chat-send\">{}</button>",
            esc(&w.get("eval-chat-your-message")),
            c.max_chars,
            esc(&c
                .placeholder
                .clone()
                .unwrap_or_else(|| w.get("eval-chat-placeholder"))),
            esc(field(fields, "text").unwrap_or("")),
            esc(&w.get("eval-chat-send")),
        )
    };
    let end = if turns >= c.min_turns {
        // The end button submits the send form (to another address), so the labels of the
        // last reply and anything typed come with it instead of being lost with the page.
        format!(
            "<p class=\"chat-end\"><button type=\"submit\" form=\"chat-send\" formaction=\"/p/chat/end{}\" formnovalidate data-testid=\"chat-end\">{}</button></p>",
            esc(seatq),
            esc(&w.get(if ev.task == EvalTask::Arena {
                "eval-arena-finish"
            } else {
                "eval-chat-end"
            }))
        )
    } else {
        String::new()
    };
    format!(
        "<form method=\"post\" action=\"/p/chat/send{}\" id=\"chat-send\" class=\"chat-input\" data-testid=\"chat-form\" autocomplete=\"off\">{hidden}{input}</form>{end}",
        esc(seatq)
    )
}

/// Whether the browser asked for the replies as a stream.
fn streaming(headers: &HeaderMap) -> bool {
    headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"))
}

/// The replies as they come, one JSON object per line, until every asked side has answered;
/// then the page as it now is (`Frame::Page`), drawn once the replies are stored.
fn frames_response(app: &AppState, me: Asking, rx: mpsc::Receiver<Frame>) -> Response {
    let app = app.clone();
    let replies = futures_util::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        Some((frame, rx))
    });
    let page = futures_util::stream::once(async move {
        markup_now(&app, me).await.map(|html| Frame::Page { html })
    })
    .filter_map(std::future::ready);
    let stream = replies
        .chain(page)
        .map(|frame| Ok::<_, Infallible>(serde_json::to_string(&frame).unwrap_or_default() + "\n"));
    (
        [
            (CONTENT_TYPE, "application/x-ndjson"),
            (CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The replies asked for: streamed to a listening browser, or awaited before the page comes
/// back.
enum Asked {
    Stream(mpsc::Receiver<Frame>),
    Tasks(Vec<tokio::task::JoinHandle<()>>),
}

/// Asks the given sides for their replies (`turns`: the new turn of each, in the same order,
/// when it is being stored meanwhile).
fn ask_sides(
    app: &AppState,
    ctx: &Ctx,
    which: &[&Side],
    stream: bool,
    mut turns: Vec<chat::NewTurn>,
) -> Asked {
    let study = &ctx.study.study.id;
    let mut turn = |_: &Side| (!turns.is_empty()).then(|| turns.remove(0));
    if stream {
        let (tx, rx) = mpsc::channel(256);
        for side in which {
            chat::ask(app, study, side, Some(tx.clone()), turn(side));
        }
        return Asked::Stream(rx);
    }
    Asked::Tasks(
        which
            .iter()
            .filter_map(|side| chat::ask(app, study, side, None, turn(side)))
            .collect(),
    )
}

/// What the participant gets once the replies are asked for: the stream (ending with the page),
/// or, once every reply is stored, the way back to the page.
async fn answer(app: &AppState, asked: Asked, me: Asking) -> Response {
    match asked {
        Asked::Stream(rx) => frames_response(app, me, rx),
        Asked::Tasks(tasks) => {
            for t in tasks {
                let _ = t.await;
            }
            to_page(me.seat.as_deref())
        }
    }
}

/// A refused form: the page again with the reason (or, to a streaming browser, the reason as a
/// frame).
async fn refuse(
    app: &AppState,
    ctx: &Ctx,
    seat: Option<&str>,
    stream: bool,
    message: &str,
    fields: &[(String, String)],
) -> Result<Response, HttpError> {
    if stream {
        let line = serde_json::json!({"type": "refused", "message": message}).to_string() + "\n";
        return Ok((
            StatusCode::CONFLICT,
            [(CONTENT_TYPE, "application/x-ndjson")],
            line,
        )
            .into_response());
    }
    let f = eval::facts(app, &ctx.p).await?;
    let html = render(ctx, &f, seat, Some(message), &[], fields);
    Ok((StatusCode::CONFLICT, Html(html)).into_response())
}

/// The labels posted for the last reply of one side, which had none yet.
struct Posted<'a> {
    side: &'a Side,
    turn: u32,
    labels: Vec<String>,
    score: Option<u32>,
    feedback: Option<String>,
}

/// The labels posted for the last reply of each side that has not been labelled yet (the only
/// reply the page offers labels for).
fn posted_labels<'a>(ctx: &'a Ctx, fields: &[(String, String)]) -> Vec<Posted<'a>> {
    let ev = ctx.ev();
    let mut out = vec![];
    for (side, convo) in ctx.sides.iter().zip(&ctx.convos) {
        let Some(last) = convo.last_reply() else {
            continue;
        };
        if !last.labels.is_empty() || last.score.is_some() || last.feedback.is_some() {
            continue;
        }
        let name = format!("ann.{}", side.name);
        let values: Vec<&str> = fields
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        let (labels, score) = match &ev.annotate {
            Some(a) if a.kind == AnnotationKind::Checkboxes => (
                a.options
                    .iter()
                    .filter(|o| values.contains(&o.as_str()))
                    .cloned()
                    .collect(),
                None,
            ),
            Some(a) => (
                vec![],
                values
                    .first()
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|p| (1..=a.points()).contains(p)),
            ),
            None => (vec![], None),
        };
        let feedback = field(fields, &format!("fb.{}", side.name))
            .filter(|v| ev.conversation.feedback && FEEDBACK.iter().any(|(f, _)| f == v))
            .map(str::to_string);
        out.push(Posted {
            side,
            turn: last.index,
            labels,
            score,
            feedback,
        });
    }
    out
}

/// What the study's label rules (`annotate.exclusive`, `annotate.required`) refuse in the
/// posted labels, one problem per reply, shown next to it.
fn label_problems(w: &Words, ev: &Evaluation, posted: &[Posted]) -> Vec<Problem> {
    let Some(a) = &ev.annotate else {
        return vec![];
    };
    posted
        .iter()
        .filter_map(|p| {
            turn_problem(w, a, &p.labels, p.score).map(|message| Problem {
                question: format!("ann.{}", p.side.name),
                message,
            })
        })
        .collect()
}

/// Stores the labels posted for the last reply of each side (once per reply).
async fn store_labels(app: &AppState, ctx: &Ctx, posted: Vec<Posted<'_>>) -> Result<(), HttpError> {
    for p in posted {
        if p.labels.is_empty() && p.score.is_none() && p.feedback.is_none() {
            continue;
        }
        let event = NewEvent {
            actor: eval::actor(&ctx.p),
            kind: EventKind::TurnAnnotated {
                turn: p.turn,
                labels: p.labels,
                score: p.score,
                feedback: p.feedback,
            },
            at_ms: now_ms(),
        };
        app.store
            .append_once(&p.side.session, &format!("labels/{}", p.turn), vec![event])
            .await?;
    }
    Ok(())
}

/// Refuses a post whose labels break the study's rules: the page again, with what was posted
/// and a message next to each reply concerned (or one line for a streamed post).
async fn refuse_labels(
    app: &AppState,
    ctx: &Ctx,
    seat: Option<&str>,
    stream: bool,
    problems: &[Problem],
    fields: &[(String, String)],
) -> Result<Response, HttpError> {
    if stream {
        let message = problems
            .iter()
            .map(|p| p.message.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        return refuse(app, ctx, seat, true, &message, fields).await;
    }
    let f = eval::facts(app, &ctx.p).await?;
    let html = render(
        ctx,
        &f,
        seat,
        Some(&ctx.words().get("eval-chat-check-labels")),
        problems,
        fields,
    );
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response())
}

/// Why the turn `text` cannot be sent now, if it cannot: the conversation ended, a reply is
/// awaited or failed, the most turns are reached, the text is empty or too long.
fn send_refusal(ctx: &Ctx, text: &str) -> Option<String> {
    let c = &ctx.ev().conversation;
    let w = ctx.words();
    if ctx.ended() {
        Some(w.get("eval-chat-refused-ended"))
    } else if ctx.pending() {
        Some(w.get("eval-chat-refused-pending"))
    } else if ctx.failed() {
        Some(w.get("eval-chat-refused-failed"))
    } else if ctx.turns() >= c.max_turns {
        Some(w.get("eval-chat-max"))
    } else if text.is_empty() {
        Some(w.get("eval-chat-refused-empty"))
    } else if text.chars().count() > c.max_chars as usize {
        Some(w.with(
            "eval-chat-refused-too-long",
            &[("max", &c.max_chars.to_string())],
        ))
    } else {
        None
    }
}

/// `POST /p/chat/send`: the participant's turn, sent to every side.
pub async fn send(
    State(app): State<AppState>,
    me: Asking,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let asking = me.clone();
    let seat = asking.seat.as_deref();
    let ctx = match context(&app, me, &fields).await? {
        Ok(ctx) => ctx,
        Err(r) => return Ok(r),
    };
    let stream = streaming(&headers);
    let text = field(&fields, "text").unwrap_or("");
    let refusal = send_refusal(&ctx, text);
    if ctx.time_up(now_ms()) {
        end_all(&app, &ctx.sides, EndReason::TimeLimit).await?;
        return Ok(to_page(seat));
    }
    if let Some(message) = refusal {
        return refuse(&app, &ctx, seat, stream, &message, &fields).await;
    }
    let posted = posted_labels(&ctx, &fields);
    let problems = label_problems(ctx.words(), ctx.ev(), &posted);
    if !problems.is_empty() {
        return refuse_labels(&app, &ctx, seat, stream, &problems, &fields).await;
    }
    store_labels(&app, &ctx, posted).await?;
    let turn = ctx.turns();
    let at_ms = now_ms();
    // The systems are asked while the turn is being stored; their replies wait for it.
    let (stored, stored_rx) = watch::channel(None);
    let turns: Vec<chat::NewTurn> = ctx
        .convos
        .iter()
        .map(|c| {
            let mut history = c.history();
            history.push(wozkit_systems::Turn::user(text));
            chat::NewTurn {
                history,
                stored: stored_rx.clone(),
            }
        })
        .collect();
    let all: Vec<&Side> = ctx.sides.iter().collect();
    let asked = ask_sides(&app, &ctx, &all, stream, turns);
    for (n, side) in ctx.sides.iter().enumerate() {
        let event = NewEvent {
            actor: eval::actor(&ctx.p),
            kind: EventKind::Message {
                role: Role::User,
                text: text.to_string(),
                source: MessageSource::Free,
            },
            at_ms,
        };
        let appended = app
            .store
            .append_once(&side.session, &format!("turn/{turn}"), vec![event])
            .await;
        match appended {
            Ok(Some(_)) => {}
            // The same turn sent twice (a double click, two tabs): the first one stands.
            Ok(None) if n == 0 => {
                let _ = stored.send(Some(false));
                return Ok(to_page(seat));
            }
            Ok(None) => {}
            Err(e) => {
                let _ = stored.send(Some(false));
                return Err(e.into());
            }
        }
    }
    let _ = stored.send(Some(true));
    Ok(answer(&app, asked, asking).await)
}

#[derive(Deserialize)]
pub struct RevealQuery {
    lease: Option<String>,
}

/// `POST /p/chat/retry`: asks a side that failed the last turn again.
pub async fn retry(
    State(app): State<AppState>,
    me: Asking,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let asking = me.clone();
    let seat = asking.seat.as_deref();
    let ctx = match context(&app, me, &fields).await? {
        Ok(ctx) => ctx,
        Err(r) => return Ok(r),
    };
    let wanted = field(&fields, "side");
    let which: Vec<&Side> = ctx
        .sides
        .iter()
        .zip(&ctx.convos)
        .filter(|(s, c)| c.failed.is_some() && !c.pending && wanted.is_none_or(|w| w == s.name))
        .map(|(s, _)| s)
        .collect();
    if which.is_empty() || ctx.ended() {
        return Ok(to_page(seat));
    }
    let asked = ask_sides(&app, &ctx, &which, streaming(&headers), vec![]);
    Ok(answer(&app, asked, asking).await)
}

/// `POST /p/chat/end`: ends the conversation once the fewest turns are reached.
pub async fn end(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let ctx = match context(&app, me, &fields).await? {
        Ok(ctx) => ctx,
        Err(r) => return Ok(r),
    };
    if ctx.ended() {
        return Ok(to_page(seat.as_deref()));
    }
    let w = ctx.words();
    if ctx.turns() < ctx.ev().conversation.min_turns {
        let message = w.with(
            "eval-chat-refused-too-few",
            &[("min", &ctx.ev().conversation.min_turns.to_string())],
        );
        return refuse(&app, &ctx, seat.as_deref(), false, &message, &fields).await;
    }
    if ctx.pending() {
        let message = w.get("eval-chat-refused-wait");
        return refuse(&app, &ctx, seat.as_deref(), false, &message, &fields).await;
    }
    if field(&fields, "text").is_some_and(|t| !t.trim().is_empty()) {
        let message = w.get("eval-chat-refused-unsent");
        return refuse(&app, &ctx, seat.as_deref(), false, &message, &fields).await;
    }
    let posted = posted_labels(&ctx, &fields);
    let problems = label_problems(ctx.words(), ctx.ev(), &posted);
    if !problems.is_empty() {
        return refuse_labels(&app, &ctx, seat.as_deref(), false, &problems, &fields).await;
    }
    store_labels(&app, &ctx, posted).await?;
    end_all(&app, &ctx.sides, EndReason::Finished).await?;
    Ok(to_page(seat.as_deref()))
}

/// `POST /p/chat/finish`: the questions after the conversation, and a battle's vote. The
/// judgment closes the lease like any evaluation item; a battle in which a system failed a
/// turn is kept as void: not counted, and its pair goes back to the pool.
pub async fn finish(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let ctx = match context(&app, me, &fields).await? {
        Ok(ctx) => ctx,
        Err(r) => return Ok(r),
    };
    if !ctx.ended() {
        return Ok(to_page(seat.as_deref()));
    }
    let ev = ctx.ev();
    let arena = ev.task == EvalTask::Arena;
    let mut problems = vec![];
    let (answers, choice, justification) = check_finish(&ctx, &fields, &mut problems);
    let posted = posted_labels(&ctx, &fields);
    problems.extend(label_problems(ctx.words(), ev, &posted));
    if !problems.is_empty() {
        let f = eval::facts(&app, &ctx.p).await?;
        let html = render(&ctx, &f, seat.as_deref(), None, &problems, &fields);
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response());
    }
    store_labels(&app, &ctx, posted).await?;
    let convos = read_convos(&app, &ctx.sides).await?;
    let void = arena && convos.iter().any(|c| c.ever_failed);
    let judgment = Judgment {
        page: ctx.page_id(),
        item: ctx.lease.item_id.clone(),
        lease: ctx.lease.id.clone(),
        pool: ItemPool::Item,
        dialogues: ctx.sides.iter().map(|s| s.session.clone()).collect(),
        systems: ctx.sides.iter().map(|s| s.system.clone()).collect(),
        choice,
        justification,
        answers,
        turns: labelled_turns(&ctx, &convos),
        counted: false,
        surplus: false,
        gold_correct: None,
        claimed_at_ms: ctx.lease.claimed_at_ms,
        void,
    };
    let log = eval::ensure_log(&app, &ctx.p, &ctx.study).await?;
    let actor = eval::actor(&ctx.p);
    let at_ms = now_ms();
    if void {
        // The pair is owed another battle: its lease goes back, the vote is kept uncounted.
        if app.store.return_lease(&ctx.lease.id, at_ms).await? {
            let event = NewEvent {
                actor,
                kind: EventKind::Judged(Box::new(judgment)),
                at_ms,
            };
            app.store.append(&log, vec![event]).await?;
        }
    } else {
        submit_judgment(&app, &ctx.p, &log, judgment).await?;
    }
    if arena {
        app.leaderboards.invalidate(&ctx.study.study.id);
    }
    if arena && ev.conversation.reveal {
        let location = format!(
            "/p/chat/reveal?lease={}{}",
            query_escape(&ctx.lease.id),
            seat.as_deref()
                .map(|s| format!("&seat={}", query_escape(s)))
                .unwrap_or_default()
        );
        return Ok((
            StatusCode::SEE_OTHER,
            [(axum::http::header::LOCATION, location)],
        )
            .into_response());
    }
    Ok(to_page(seat.as_deref()))
}

/// The finish form's answers to the questions and, in a battle, its vote and the reason given;
/// what is missing or wrong is added to `problems`.
fn check_finish(
    ctx: &Ctx,
    fields: &[(String, String)],
    problems: &mut Vec<Problem>,
) -> (
    IndexMap<String, serde_json::Value>,
    Option<String>,
    Option<String>,
) {
    let ev = ctx.ev();
    let seed = seed_of(&format!("{}/{}", ctx.p.id, ctx.lease.id));
    let w = ctx.words();
    let answers = match super::questions::check(w, &ev.questions, fields, seed) {
        Ok(a) => a.to_event(&ev.questions),
        Err(mut more) => {
            problems.append(&mut more);
            IndexMap::new()
        }
    };
    let (mut choice, mut justification) = (None, None);
    if ev.task == EvalTask::Arena {
        choice = match field(fields, "vote") {
            Some("left") => ctx.sides.first().map(|s| s.session.clone()),
            Some("right") => ctx.sides.get(1).map(|s| s.session.clone()),
            Some(v @ (VOTE_TIE | VOTE_BOTH_BAD)) => Some(v.to_string()),
            _ => None,
        };
        if choice.is_none() {
            problems.push(Problem {
                question: "vote".into(),
                message: w.get("eval-problem-vote"),
            });
        }
        justification = check_justification(w, &ev.justification, fields, problems);
    }
    (answers, choice, justification)
}

/// The labels given to the systems' replies in `convos`, one side after the other.
fn labelled_turns(ctx: &Ctx, convos: &[Convo]) -> Vec<TurnLabel> {
    ctx.sides
        .iter()
        .zip(convos)
        .flat_map(|(side, c)| {
            c.said
                .iter()
                .filter(|s| s.by_system && (!s.labels.is_empty() || s.score.is_some()))
                .map(|s| TurnLabel {
                    dialogue: side.session.clone(),
                    turn: s.index,
                    labels: s.labels.clone(),
                    score: s.score,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One line per side: which system it was.
fn reveal_rows(w: &Words, sides: &[Side]) -> String {
    sides
        .iter()
        .map(|s| {
            let sys = esc(&s.system);
            format!(
                "<li data-testid=\"reveal-{n}\" data-system=\"{sys}\">{said}</li>",
                n = s.name,
                said = with_markup(
                    w,
                    "eval-reveal-side",
                    &[("assistant", &side_label(w, s))],
                    "system",
                    &format!("<strong>{sys}</strong>")
                ),
            )
        })
        .collect()
}

/// `GET /p/chat/reveal?lease=…`: after a vote, which system was on which side.
pub async fn reveal(
    State(app): State<AppState>,
    Query(q): Query<RevealQuery>,
    me: Asking,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, .. } = me;
    let Some(ev) = study
        .study
        .evaluation
        .as_ref()
        .filter(|e| e.task == EvalTask::Arena && e.conversation.reveal)
    else {
        return Ok(to_page(seat.as_deref()));
    };
    let lease_field = [("lease".to_string(), q.lease.clone().unwrap_or_default())];
    let Some(lease) = own_lease(&app, &p, &study, &lease_field)
        .await?
        .filter(|l| l.state != LeaseState::Leased)
    else {
        return Ok(to_page(seat.as_deref()));
    };
    let w = words(study.study.language);
    let sides = chat::sides(ev, &lease);
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let verdict = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Judged(j) if j.lease == lease.id => Some(j.clone()),
        _ => None,
    });
    let Some(verdict) = verdict else {
        return Ok(to_page(seat.as_deref()));
    };
    let rows = reveal_rows(w, &sides);
    let chose = match verdict.choice.as_deref() {
        Some(VOTE_TIE) => w.get("eval-reveal-tie"),
        Some(VOTE_BOTH_BAD) => w.get("eval-reveal-both-bad"),
        Some(c) => sides
            .iter()
            .find(|s| s.session == c)
            .map(|s| side_label(w, s))
            .unwrap_or_default(),
        None => String::new(),
    };
    let void = if verdict.void {
        format!(
            "<p class=\"muted\" data-testid=\"reveal-void\">{}</p>",
            esc(&w.get("eval-reveal-void"))
        )
    } else {
        String::new()
    };
    let body = format!(
        "<main class=\"narrow\" data-page=\"reveal\"><h1>{}</h1><p>{}</p>\
         <ul class=\"reveal\" data-testid=\"reveal\">{rows}</ul>{void}\
         <p><a class=\"button primary\" href=\"/p{}\" data-testid=\"reveal-continue\">{}</a></p></main>",
        esc(&w.get("eval-reveal-title")),
        with_markup(
            w,
            "eval-reveal-chose",
            &[],
            "choice",
            &format!("<strong>{}</strong>", esc(&chose))
        ),
        esc(&seat_query(seat.as_deref())),
        esc(&w.get("eval-continue")),
    );
    let page = layout_in(w.lang(), &study.study.title, "", &body, &[]);
    Ok(Html(page).into_response())
}
