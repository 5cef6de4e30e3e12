//! What a crowd worker does on a `chat` or `arena` page, one form per page load: ask a failed
//! system again (`POST /p/chat/retry`), send its next message (`POST /p/chat/send`), end the
//! conversation once it has said what it meant to (`POST /p/chat/end`), then answer the
//! questions and, in an arena, vote (`POST /p/chat/finish`), and read the reveal page.
//!
//! The worker decides at the claim how many messages it sends (from the page's fewest to most)
//! and draws each from a small list of travel and library questions. Under each reply it ticks
//! the labels and feedback half the time. The vote: the speaker's, when a simulated user speaks
//! and votes ([`Speaker::vote`]); otherwise the side whose replies were longer in total, a tie
//! when they were as long, or, with the crowd's `vote_noise` chance, any of the four answers at
//! random; the reason is recorded with the vote.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::crowd::{
    AnswerTurn, CrowdChat, CrowdConfig, Field, Form, Rng, Speaker, SpeakerTurn, Tally, VoteTurn,
    attr, encode, unescape,
};
use crate::error::Failure;
use crate::http::Conn;

/// What the workers ask.
const QUESTIONS: &[&str] = &[
    "Where should I go for a beach holiday in June?",
    "Which city has good museums for a weekend?",
    "What should I pack for a hiking trip?",
    "Is it cheaper to take the train or to fly?",
    "Can you suggest a quiet hotel near the centre?",
    "When is the library open on Saturdays?",
    "Could you recommend a good mystery novel?",
    "How many books can I borrow at once?",
    "What is there to do in Vienna when it rains?",
    "Thanks, and what about somewhere in the mountains?",
];

/// The arena's vote values, as the form names them.
const VOTES: [&str; 4] = ["left", "right", "tie", "both_bad"];

/// Moves in a row a speaker may make without a message while the page does not let the
/// conversation end yet (below its fewest messages) before the worker gives up.
const MAX_SILENT_MOVES: u32 = 3;

/// Pause before loading a page again while a reply is still being written.
const PENDING_WAIT: Duration = Duration::from_millis(50);

/// A worker's connection and identity, lent to one step.
pub struct Worker<'a> {
    pub conn: &'a mut Conn,
    pub cookie: &'a str,
    pub config: &'a CrowdConfig,
    pub name: &'a str,
    pub tally: &'a Tally,
}

/// The conversation under way.
pub struct Convo {
    record: CrowdChat,
    /// Messages this worker means to send.
    target: u32,
    /// A speaker said it is done: the conversation ends as soon as the page allows.
    finishing: bool,
    /// Moves in a row without a message while the page did not allow the end.
    silent: u32,
}

/// What a chat page shows, read from its HTML.
#[derive(Debug, Default, PartialEq)]
pub struct ChatPage {
    pub step: String,
    pub lease: String,
    pub item: String,
    pub pending: bool,
    /// The participant's messages so far, and the page's bounds.
    pub turns: u32,
    pub min_turns: u32,
    pub max_turns: u32,
    /// Sides showing a failure (`failed-<side>`).
    pub failed: Vec<String>,
    /// Sides whose log ends with a reply (not with the participant's message).
    pub answered: Vec<String>,
    /// The conversation has ended: the questions are shown.
    pub ended: bool,
    /// Whether the end button is offered.
    pub can_end: bool,
    /// Whether the message box is offered (below the most messages).
    pub can_send: bool,
    /// `(side, characters of its replies)` in page order.
    pub reply_chars: Vec<(String, usize)>,
    /// The first side's conversation: `(by the system, text)` per message.
    pub said: Vec<(bool, String)>,
    /// Each side's conversation, in page order: `(side, [(by the system, text)])`.
    pub sides: Vec<(String, Vec<(bool, String)>)>,
    /// The page's own words above the conversation (title and text), tags left out.
    pub instructions: String,
    /// The most characters a message may have (the text box's `maxlength`).
    pub max_chars: Option<usize>,
}

impl ChatPage {
    /// Reads a `chat` or `arena` page.
    pub fn parse(html: &str) -> ChatPage {
        let form = Form::parse(html);
        let main_tag = html
            .find("<main")
            .and_then(|at| Some(&html[at..at + html[at..].find('>')?]))
            .unwrap_or("");
        let (turns, min_turns, max_turns) = progress(html).unwrap_or((0, 0, 0));
        let mut failed = vec![];
        let mut rest = html;
        while let Some(at) = rest.find("data-testid=\"failed-") {
            rest = &rest[at + "data-testid=\"failed-".len()..];
            if let Some(end) = rest.find('"') {
                failed.push(rest[..end].to_string());
            }
        }
        let sides = side_logs(html);
        ChatPage {
            step: form.hidden("step").unwrap_or_default().to_string(),
            lease: form.hidden("lease").unwrap_or_default().to_string(),
            item: attr(main_tag, "data-item").unwrap_or_default(),
            pending: attr(main_tag, "data-pending").as_deref() == Some("true"),
            turns,
            min_turns,
            max_turns,
            failed,
            ended: html.contains("data-testid=\"chat-finish-form\""),
            can_end: html.contains("data-testid=\"chat-end\""),
            can_send: html.contains("data-testid=\"chat-text\""),
            answered: answered(html),
            reply_chars: sides
                .iter()
                .map(|(side, said)| {
                    let chars = said
                        .iter()
                        .filter(|(by_system, _)| *by_system)
                        .map(|(_, text)| text.chars().count())
                        .sum();
                    (side.clone(), chars)
                })
                .collect(),
            said: sides
                .first()
                .map(|(_, said)| said.clone())
                .unwrap_or_default(),
            sides,
            instructions: instructions(html),
            max_chars: html
                .find("data-testid=\"chat-text\"")
                .and_then(|at| html[..at].rfind("<textarea").map(|from| &html[from..at]))
                .and_then(|tag| attr(tag, "maxlength"))
                .and_then(|n| n.parse().ok()),
        }
    }
}

/// `(turns, at least, at most)` from the progress line.
fn progress(html: &str) -> Option<(u32, u32, u32)> {
    let at = html.find("data-testid=\"chat-progress\"")?;
    let text = &html[at..];
    let number_after = |label: &str| -> Option<u32> {
        let from = text.find(label)? + label.len();
        let digits: String = text[from..]
            .chars()
            .skip_while(|c| *c == ' ')
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    Some((
        number_after("Your messages:")?,
        number_after("at least")?,
        number_after("at most")?,
    ))
}

/// Sides whose last log entry is a system reply.
fn answered(html: &str) -> Vec<String> {
    let mut out = vec![];
    for part in html.split("<section class=\"chat-side\"").skip(1) {
        let part = &part[..part.find("</section>").unwrap_or(part.len())];
        let Some(side) = attr(&part[..part.find('>').unwrap_or(part.len())], "data-side") else {
            continue;
        };
        if part
            .rfind("<li class=\"said ")
            .is_some_and(|at| part[at..].starts_with("<li class=\"said system\""))
        {
            out.push(side);
        }
    }
    out
}

/// Each side's messages, in page order: `(side, [(by the system, text)])`.
fn side_logs(html: &str) -> Vec<(String, Vec<(bool, String)>)> {
    let mut out = vec![];
    for part in html.split("<section class=\"chat-side\"").skip(1) {
        let part = &part[..part.find("</section>").unwrap_or(part.len())];
        let Some(side) = attr(&part[..part.find('>').unwrap_or(part.len())], "data-side") else {
            continue;
        };
        let said = part
            .split("<li class=\"said ")
            .skip(1)
            .filter_map(|li| {
                let by_system = li.starts_with("system\"");
                let from = li.find("<span class=\"text\">")? + "<span class=\"text\">".len();
                let end = li[from..].find("</span>")?;
                Some((by_system, unescape(&li[from..from + end])))
            })
            .collect();
        out.push((side, said));
    }
    out
}

/// The text of a chat page between `<main …>` and its progress line, tags left out and
/// whitespace collapsed: the page's title and instructions.
fn instructions(html: &str) -> String {
    let Some(main) = html.find("<main") else {
        return String::new();
    };
    let rest = &html[main..];
    let rest = &rest[rest.find('>').map_or(0, |i| i + 1)..];
    let head = &rest[..rest
        .find("data-testid=\"chat-progress\"")
        .and_then(|at| rest[..at].rfind('<'))
        .unwrap_or(0)];
    let mut text = String::new();
    let mut in_tag = false;
    for c in head.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    unescape(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The vote of the policy: `(vote, reason)`. With chance `noise` any answer at random;
/// otherwise the side whose replies were longer (`chars` = `[left, right]`), a tie when equal.
pub fn vote(chars: [usize; 2], noise: f64, rng: &mut Rng) -> (&'static str, &'static str) {
    if rng.unit() < noise {
        return (VOTES[rng.below(VOTES.len())], "noise");
    }
    match chars[0].cmp(&chars[1]) {
        std::cmp::Ordering::Greater => ("left", "longer"),
        std::cmp::Ordering::Less => ("right", "longer"),
        std::cmp::Ordering::Equal => ("tie", "equal"),
    }
}

/// Keeps `(name, value)` pairs, dropping the reply labels half the time.
fn maybe_labels(pairs: Vec<(String, String)>, rng: &mut Rng) -> Vec<(String, String)> {
    let label = rng.below(2) == 0;
    pairs
        .into_iter()
        .filter(|(n, _)| label || !(n.starts_with("ann.") || n.starts_with("fb.")))
        .collect()
}

/// One form on a chat page just loaded (`html`): the page as the server drew it again when it
/// sent it at the end of a streamed turn, or `None` (the caller loads the page again).
pub async fn step(
    w: Worker<'_>,
    kind: &str,
    html: &str,
    convo: &mut Option<Convo>,
    rng: &mut Rng,
) -> Result<Option<String>, Failure> {
    let page = ChatPage::parse(html);
    if convo.as_ref().is_none_or(|c| c.record.lease != page.lease) {
        *convo = Some(Convo::start(w.name, kind, &page, rng));
    }
    let Some(c) = convo.as_mut() else {
        return Ok(None);
    };
    let hidden = vec![
        ("step".to_string(), page.step.clone()),
        ("lease".to_string(), page.lease.clone()),
    ];
    if page.ended {
        return finish(w, kind, html, &page, c, rng).await.map(|()| None);
    }
    if page.pending {
        tokio::time::sleep(PENDING_WAIT).await;
        return Ok(None);
    }
    // A failure shown beside a reply given since (the retry was answered) is no longer one to
    // retry: asking again would send the system a history that ends with its own reply.
    let stale = page.failed.iter().any(|s| page.answered.contains(s));
    if let Some(side) = page.failed.iter().find(|s| !page.answered.contains(s)) {
        return retry(w, hidden, side, c).await;
    }
    if let Some(speaker) = w.config.speaker.as_deref()
        && page.can_send
        && !stale
        && !(c.finishing && page.can_end)
    {
        return speak(w, speaker, &page, html, c).await;
    }
    if page.can_send && page.turns < c.target && !stale && w.config.speaker.is_none() {
        typing_pause(w.config, rng).await;
        let text = QUESTIONS[rng.below(QUESTIONS.len())];
        let body = maybe_labels(Form::parse_id(html, "chat-send").fill_pairs(rng), rng);
        return send(w, c, body, text.to_string()).await;
    }
    if !page.can_end && stale {
        return Err(Failure::new(
            "chat_blocked",
            format!(
                "after {} messages the page still shows the failure of a system whose retry was \
                 answered, so no message can be sent and the conversation cannot end yet",
                page.turns
            ),
        ));
    }
    if !page.can_end {
        return Err(Failure::new(
            "chat_stuck",
            format!(
                "a chat page with {} of {} messages offers neither a message box nor the end",
                page.turns, c.target
            ),
        ));
    }
    let mut body = maybe_labels(Form::parse_id(html, "chat-send").fill_pairs(rng), rng);
    body.retain(|(n, _)| n != "text");
    let res = post(&mut *w.conn, w.cookie, w.config, "/p/chat/end", &body).await?;
    check(w.tally, "/p/chat/end", res)?;
    Ok(None)
}

impl Convo {
    /// A conversation on a chat page newly leased: the number of messages to send is drawn
    /// between the page's fewest and most (at least one).
    fn start(worker: &str, kind: &str, page: &ChatPage, rng: &mut Rng) -> Convo {
        let (lo, hi) = (
            page.min_turns.max(1),
            page.max_turns.max(page.min_turns.max(1)),
        );
        let target = lo + rng.below((hi - lo + 1) as usize) as u32;
        Convo {
            record: CrowdChat {
                worker: worker.to_string(),
                page: kind.to_string(),
                lease: page.lease.clone(),
                item: page.item.clone(),
                ..CrowdChat::default()
            },
            target,
            finishing: false,
            silent: 0,
        }
    }
}

/// Asks the system of `side` again for the reply that failed (`body`: the page's hidden
/// fields).
async fn retry(
    w: Worker<'_>,
    mut body: Vec<(String, String)>,
    side: &str,
    c: &mut Convo,
) -> Result<Option<String>, Failure> {
    body.push(("side".into(), side.to_string()));
    let res = post(&mut *w.conn, w.cookie, w.config, "/p/chat/retry", &body).await?;
    let drawn = check(w.tally, "/p/chat/retry", res)?.drawn();
    c.record.retried.push(side.to_string());
    w.tally.retries.fetch_add(1, Ordering::Relaxed);
    Ok(drawn)
}

/// A person reads the replies and types: a pause drawn from the configured range.
async fn typing_pause(config: &CrowdConfig, rng: &mut Rng) {
    let (low, high) = config.typing_ms;
    if high > 0 {
        let span = high.saturating_sub(low) as f64;
        let pause = low + (rng.unit() * span) as u64;
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
}

/// A simulated user's move: asks the speaker with the conversation so far and sends its message
/// (cut to the page's most characters). A speaker that means to end below the page's fewest
/// messages is asked again, at most [`MAX_SILENT_MOVES`] times in a row.
async fn speak(
    w: Worker<'_>,
    speaker: &dyn Speaker,
    page: &ChatPage,
    html: &str,
    c: &mut Convo,
) -> Result<Option<String>, Failure> {
    let turn = SpeakerTurn {
        instructions: &page.instructions,
        said: &page.said,
        turn: page.turns + 1,
        min_turns: page.min_turns,
        max_turns: page.max_turns,
    };
    let spoken = speaker
        .next(turn)
        .await
        .map_err(|e| Failure::new("simulated_user", e))?;
    c.finishing = spoken.finish;
    let Some(text) = spoken.text.filter(|t| !t.trim().is_empty()) else {
        if page.can_end {
            c.finishing = true;
            return Ok(None);
        }
        c.silent += 1;
        if c.silent >= MAX_SILENT_MOVES {
            return Err(Failure::new(
                "simulated_user",
                format!(
                    "the simulated user ended the conversation {} times after {} messages, but \
                     the page asks for at least {}",
                    c.silent, page.turns, page.min_turns
                ),
            ));
        }
        return Ok(None);
    };
    c.silent = 0;
    let text: String = match page.max_chars {
        Some(max) => text.chars().take(max).collect(),
        None => text,
    };
    let mut body =
        Form::parse_id(html, "chat-send").fill_pairs(&mut Rng::new(u64::from(page.turns)));
    body.retain(|(n, _)| !n.starts_with("ann.") && !n.starts_with("fb."));
    send(w, c, body, text).await
}

/// Sends `text` with the other fields of the send form (`body`, whose own `text` is replaced),
/// and counts the turn and its time when the server took it.
async fn send(
    w: Worker<'_>,
    c: &mut Convo,
    mut body: Vec<(String, String)>,
    text: String,
) -> Result<Option<String>, Failure> {
    body.retain(|(n, _)| n != "text");
    body.push(("text".into(), text.clone()));
    let t = Instant::now();
    let res = post(&mut *w.conn, w.cookie, w.config, "/p/chat/send", &body).await?;
    let took = t.elapsed().as_micros() as u64;
    let posted = check(w.tally, "/p/chat/send", res)?;
    if let Posted::Taken(_) = posted {
        c.record.sent.push(text);
        w.tally.turns.fetch_add(1, Ordering::Relaxed);
        w.tally
            .turn_latencies_us
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(took);
    }
    Ok(posted.drawn())
}

/// The questions (and the vote) after the conversation, then the reveal page.
async fn finish(
    w: Worker<'_>,
    kind: &str,
    html: &str,
    page: &ChatPage,
    c: &mut Convo,
    rng: &mut Rng,
) -> Result<(), Failure> {
    let form = Form::parse_id(html, "chat-finish");
    let mut body = maybe_labels(form.fill_pairs(rng), rng);
    speaker_answers(w.config, page, &form, &mut body).await?;
    if kind == "arena" {
        arena_vote(w.config, page, c, &mut body, rng).await?;
    }
    let res = w
        .conn
        .post_form("/p/chat/finish", Some(w.cookie), &encode(&body))
        .await?;
    match res.status {
        303 => {
            c.record.submitted = true;
            w.tally.judgments.fetch_add(1, Ordering::Relaxed);
            if let Some(location) = res.location.filter(|l| l.starts_with("/p/chat/reveal")) {
                c.record.revealed = revealed(w.conn, w.cookie, &location).await?;
            }
            w.tally
                .chats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(c.record.clone());
            Ok(())
        }
        422 => {
            w.tally.rejected.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        s => Err(Failure::new(
            "http_status",
            format!("POST /p/chat/finish answered {s}"),
        )),
    }
}

/// The arena's vote in the form after the conversation (`body`): the speaker's when it votes,
/// else the policy's, with its justification; kept in the record with the replies' lengths.
async fn arena_vote(
    config: &CrowdConfig,
    page: &ChatPage,
    c: &mut Convo,
    body: &mut Vec<(String, String)>,
    rng: &mut Rng,
) -> Result<(), Failure> {
    let chars = |side: &str| {
        page.reply_chars
            .iter()
            .find(|(s, _)| s == side)
            .map_or(0, |(_, n)| *n)
    };
    let lengths = [chars("left"), chars("right")];
    let (choice, reason, justification) = match speaker_vote(config, page).await? {
        Some(voted) => (voted.vote, "model", voted.reason),
        None => {
            let (choice, reason) = vote(lengths, config.vote_noise, rng);
            let why = match reason {
                "longer" => "its answers said more",
                "equal" => "the answers were as long",
                _ => "just a feeling",
            };
            (choice, reason, why.to_string())
        }
    };
    body.retain(|(n, _)| n != "vote" && n != "justification");
    body.push(("vote".into(), choice.into()));
    body.push(("justification".into(), justification));
    c.record.vote = Some(choice.into());
    c.record.reason = Some(reason.into());
    c.record.reply_chars = lengths.to_vec();
    Ok(())
}

/// Loads the reveal page at `location`: the systems it names, left then right.
async fn revealed(conn: &mut Conn, cookie: &str, location: &str) -> Result<Vec<String>, Failure> {
    let reveal = conn.get(location, Some(cookie)).await?;
    if reveal.status != 200 {
        return Err(Failure::new(
            "http_status",
            format!("GET {location} answered {}", reveal.status),
        ));
    }
    Ok(["left", "right"]
        .iter()
        .filter_map(|side| {
            let needle = format!("data-testid=\"reveal-{side}\"");
            let at = reveal.body.find(&needle)?;
            let tag = &reveal.body[at..at + reveal.body[at..].find('>')?];
            attr(&format!(" {tag}"), "data-system")
        })
        .collect())
}

/// The speaker's answers to the questions of the form after the conversation, in place of the
/// policy's: each question field (not the hidden ones, the vote, its reason or the reply labels)
/// the speaker answers is replaced by its answer.
async fn speaker_answers(
    config: &CrowdConfig,
    page: &ChatPage,
    form: &Form,
    body: &mut Vec<(String, String)>,
) -> Result<(), Failure> {
    let Some(speaker) = config.speaker.as_deref() else {
        return Ok(());
    };
    let said = page.said.as_slice();
    let mut asked: Vec<String> = vec![];
    for f in &form.fields {
        let name = match f {
            Field::Hidden(..) => continue,
            Field::OneOf(n, _) | Field::Check(n, _) | Field::Text(n) | Field::Number(n, ..) => n,
        };
        let ours = !(name == "vote"
            || name == "justification"
            || name.starts_with("ann.")
            || name.starts_with("fb."));
        if !ours || asked.contains(name) {
            continue;
        }
        asked.push(name.clone());
        let turn = AnswerTurn {
            instructions: &page.instructions,
            said,
            field: name,
        };
        let answered = speaker
            .answer(turn)
            .await
            .map_err(|e| Failure::new("simulated_user", e))?;
        // The answer holds every field of its question (a matrix's rows, a ranking's ranks):
        // each replaces the policy's value and is not asked again.
        if let Some(fields) = answered {
            body.retain(|(n, _)| n != name && !fields.iter().any(|(f, _)| f == n));
            asked.extend(fields.iter().map(|(f, _)| f.clone()));
            body.extend(fields);
        }
    }
    Ok(())
}

/// The speaker's vote on an arena page, when a speaker votes (`None` otherwise).
async fn speaker_vote(
    config: &CrowdConfig,
    page: &ChatPage,
) -> Result<Option<crate::crowd::Voted>, Failure> {
    let Some(speaker) = config.speaker.as_deref() else {
        return Ok(None);
    };
    let side = |name: &str| {
        page.sides
            .iter()
            .find(|(s, _)| s == name)
            .map_or(&[][..], |(_, said)| said.as_slice())
    };
    let turn = VoteTurn {
        instructions: &page.instructions,
        left: side("left"),
        right: side("right"),
    };
    speaker
        .vote(turn)
        .await
        .map_err(|e| Failure::new("simulated_user", e))
}

/// A chat form post: streamed when the crowd asks for streams, else the plain post.
async fn post(
    conn: &mut Conn,
    cookie: &str,
    config: &CrowdConfig,
    path: &str,
    body: &[(String, String)],
) -> Result<crate::http::Response, Failure> {
    let body = encode(body);
    if config.stream && path != "/p/chat/end" {
        conn.post_form_accept(path, Some(cookie), &body, "application/x-ndjson")
            .await
    } else {
        conn.post_form(path, Some(cookie), &body).await
    }
}

/// What a chat form post came back with.
enum Posted {
    /// Taken: by a plain post (a 303), or by a stream of every side's reply or failure, which
    /// may end with the page drawn again.
    Taken(Option<String>),
    /// Refused (a 409), counted as a rejected form.
    Refused,
}

impl Posted {
    /// The page the server drew again after the post, if it sent one.
    fn drawn(self) -> Option<String> {
        match self {
            Posted::Taken(page) => page,
            Posted::Refused => None,
        }
    }
}

/// Whether a chat form was taken (see [`Posted`]); anything else is a failure.
fn check(tally: &Tally, path: &str, res: crate::http::Response) -> Result<Posted, Failure> {
    match res.status {
        303 => Ok(Posted::Taken(None)),
        200 => {
            // A stream: one line per frame. A side that failed shows it on the page.
            let mut page = None;
            for line in res.body.lines().filter(|l| !l.trim().is_empty()) {
                let frame: serde_json::Value = serde_json::from_str(line)
                    .map_err(|e| Failure::new("bad_frame", format!("{path}: {e}: {line}")))?;
                match frame["type"].as_str() {
                    Some("delta" | "reply" | "failed") => {}
                    Some("page") if frame["html"].is_string() => {
                        page = frame["html"].as_str().map(str::to_string);
                    }
                    _ => {
                        return Err(Failure::new(
                            "bad_frame",
                            format!("{path} streamed an unknown frame: {line}"),
                        ));
                    }
                }
            }
            Ok(Posted::Taken(page))
        }
        409 => {
            tally.rejected.fetch_add(1, Ordering::Relaxed);
            Ok(Posted::Refused)
        }
        s => Err(Failure::new(
            "http_status",
            format!("POST {path} answered {s}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARENA: &str = concat!(
        r#"<main class="wide chat" data-page="arena" data-item="p-a-b" data-pending="false">"#,
        r#"<h1>Two assistants</h1><p>Ask both about a trip to <em>Lyon</em> &amp; compare.</p>"#,
        r#"<p class="muted" data-testid="chat-progress">Your messages: 2 (at least 3, at most 8)</p>"#,
        r#"<div class="compare chat-sides"><section class="chat-side" data-side="left" data-testid="side-left" aria-label="Assistant A"><h2>Assistant A</h2><ol>"#,
        r#"<li class="said user" data-index="0"><span class="speaker">You</span> <span class="text">hi</span></li>"#,
        r#"<li class="said system" data-index="1"><span class="speaker">Assistant A</span> <span class="text">hello &lt;there&gt;</span>"#,
        r#"<fieldset><label><input type="radio" form="chat-send" name="fb.left" value="satisfied"> S</label><label><input type="radio" form="chat-send" name="fb.left" value="frustrated"> F</label></fieldset></li></ol></section>"#,
        r#"<section class="chat-side" data-side="right" data-testid="side-right" aria-label="Assistant B"><h2>Assistant B</h2><ol>"#,
        r#"<li class="said system" data-index="1"><span class="speaker">Assistant B</span> <span class="text">yo</span></li></ol>"#,
        r#"<div class="problem failed" role="alert" data-testid="failed-right">B could not answer.</div></section></div>"#,
        r#"<form method="post" action="/p/chat/send" id="chat-send" class="chat-input" data-testid="chat-form"><input type="hidden" name="step" value="2:arena"><input type="hidden" name="lease" value="L1">"#,
        r#"<textarea id="chat-text" name="text" rows="2" maxlength="500" data-testid="chat-text"></textarea><button type="submit">Send</button></form></main>"#,
    );

    #[test]
    fn chat_pages_are_read() {
        let p = ChatPage::parse(ARENA);
        assert_eq!(
            (p.step.as_str(), p.lease.as_str(), p.item.as_str()),
            ("2:arena", "L1", "p-a-b")
        );
        assert_eq!((p.turns, p.min_turns, p.max_turns), (2, 3, 8));
        assert_eq!(p.failed, vec!["right".to_string()]);
        assert_eq!(p.answered, vec!["left".to_string(), "right".to_string()]);
        assert!(p.can_send && !p.can_end && !p.ended && !p.pending);
        assert_eq!(
            p.reply_chars,
            vec![("left".to_string(), 13), ("right".to_string(), 2)]
        );
        // What a simulated user is shown: the first side's conversation, unescaped, and the
        // page's own words.
        assert_eq!(
            p.said,
            vec![
                (false, "hi".to_string()),
                (true, "hello <there>".to_string())
            ]
        );
        assert_eq!(
            p.instructions,
            "Two assistants Ask both about a trip to Lyon & compare."
        );
        assert_eq!(p.max_chars, Some(500));
    }

    #[test]
    fn the_send_form_takes_the_labels_outside_it() {
        let form = Form::parse_id(ARENA, "chat-send");
        let names: Vec<String> = form.fields.iter().map(|f| format!("{f:?}")).collect();
        assert_eq!(names.len(), 4, "{names:?}");
        assert!(names[3].contains("fb.left") && names[3].contains("frustrated"));
    }

    #[test]
    fn votes_follow_the_longer_side_unless_noisy() {
        let mut rng = Rng::new(3);
        assert_eq!(vote([10, 3], 0.0, &mut rng), ("left", "longer"));
        assert_eq!(vote([1, 3], 0.0, &mut rng), ("right", "longer"));
        assert_eq!(vote([4, 4], 0.0, &mut rng), ("tie", "equal"));
        let noisy: Vec<_> = (0..200).map(|_| vote([10, 3], 1.0, &mut rng)).collect();
        assert!(noisy.iter().all(|(_, why)| *why == "noise"));
        assert!(noisy.iter().any(|(v, _)| *v == "both_bad"));
    }
}
