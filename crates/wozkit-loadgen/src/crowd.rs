//! A simulated crowd of evaluation workers: each worker opens a study's entry link with its
//! own worker id, walks the server-rendered pages (consent, questions, onboarding, the items to
//! compare or rate, completion) answering every form field at random, and on each item page
//! may abandon it: half the abandoners give the item back (`POST /p/skip`), the other half just
//! stop, leaving the lease to expire. The figures say how many judgments were completed, items
//! skipped and leases abandoned, how the workers ended, the claim rate and the page latency.
//!
//! On `chat` and `arena` pages a worker converses with the systems under test (see
//! [`crate::crowd_chat`]): it sends between the page's fewest and most messages, waits for the
//! replies, sometimes labels them, asks a failed system again, ends the conversation, answers
//! the questions and, in an arena, votes by a policy. Each conversation is recorded
//! ([`CrowdChat`]): what was sent, the vote and why, and which systems the reveal page named.
//!
//! Forms are read from the HTML by plain string scanning (no JavaScript, no DOM): hidden
//! inputs are sent back as they are, one value is picked per radio group, any checkboxes are
//! ticked, text areas and text inputs get a few words and number inputs a number within their
//! `min`/`max`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::error::{Failure, LoadgenError};
use crate::http::{Conn, Response, form_escape};
use crate::target::Target;

/// Pages one worker may load before it is counted as stuck (a loop of forms the server keeps
/// answering with the same page).
const MAX_PAGES: usize = 256;
/// Failures kept word for word in the report (the rest are only counted by code).
const MAX_FAILURES_KEPT: usize = 20;
/// Words the simulated workers write in free text.
pub(crate) const WORDS: &[&str] = &[
    "clear", "friendly", "helpful", "vague", "polite", "wrong", "short", "relevant", "odd",
    "better", "answer", "tone", "detail", "fluent",
];

/// What to run.
#[derive(Clone, Debug)]
pub struct CrowdConfig {
    /// `http://127.0.0.1:PORT` or `http://localhost:PORT`.
    pub url: String,
    /// The study's id, as entry links name it.
    pub study: String,
    /// Simulated workers.
    pub workers: usize,
    /// Workers walking the pages at once.
    pub concurrency: usize,
    /// Chance (0 to 1) that a worker abandons an item page.
    pub abandon: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Prefix of the workers' ids (`<prefix>-<i>`), so two crowds never share a worker.
    pub worker_prefix: String,
    /// On chat pages, ask for the replies as a stream (`Accept: application/x-ndjson`) instead
    /// of the plain form post that returns once the replies are stored.
    pub stream: bool,
    /// Chance (0 to 1) that an arena vote is drawn at random instead of by the policy.
    pub vote_noise: f64,
    /// On chat pages, milliseconds a worker pauses before each message (reading and typing),
    /// drawn uniformly from this range; `(0, 0)` sends at once.
    pub typing_ms: (u64, u64),
    /// How the workers enter: Prolific links, or lab links of simulated users.
    pub entry: Entry,
    /// Who writes the messages on chat pages: the built-in questions when `None`, or a
    /// simulated user (a language model) that reads the conversation and decides when to end.
    pub speaker: Option<Arc<dyn Speaker>>,
}

/// The entry link each worker opens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Entry {
    /// `/join?study=…&PROLIFIC_PID=<worker>&STUDY_ID=crowd&SESSION_ID=…`.
    #[default]
    Prolific,
    /// `/join?study=…&participant=<worker>&test=1&simulated=NAME`: a test participant played
    /// by simulated user NAME, which only a server started by `wozkit simulate-users` takes.
    Simulated(String),
}

/// What a speaker is shown before each of its messages on a chat page.
#[derive(Clone, Debug)]
pub struct SpeakerTurn<'a> {
    /// The page's own words above the conversation (its title and text): the task the
    /// participant is given.
    pub instructions: &'a str,
    /// The conversation so far on the page's first side: `(by the system, text)` per message.
    pub said: &'a [(bool, String)],
    /// The number of the message asked for (1 for the first).
    pub turn: u32,
    /// The page's fewest and most messages.
    pub min_turns: u32,
    pub max_turns: u32,
}

/// A speaker's next move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spoken {
    /// The message to send, if any.
    pub text: Option<String>,
    /// Whether it ends the conversation after it (as soon as the page allows).
    pub finish: bool,
}

/// What a speaker is shown for an arena's vote, after the conversation.
#[derive(Clone, Debug)]
pub struct VoteTurn<'a> {
    /// The page's own words (as in [`SpeakerTurn`]).
    pub instructions: &'a str,
    /// Each side's conversation: `(by the system, text)` per message.
    pub left: &'a [(bool, String)],
    pub right: &'a [(bool, String)],
}

/// A speaker's vote: one of `left`, `right`, `tie`, `both_bad`, and its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voted {
    pub vote: &'static str,
    pub reason: String,
}

/// What a speaker is shown for one question after the conversation.
#[derive(Clone, Debug)]
pub struct AnswerTurn<'a> {
    /// The page's own words (as in [`SpeakerTurn`]).
    pub instructions: &'a str,
    /// The conversation (in an arena, the left side's): `(by the system, text)` per message.
    pub said: &'a [(bool, String)],
    /// The question's form field: its id, or for a matrix or a ranking one of its fields
    /// (`id.row`, `id.i`); the answer then holds every field of the question.
    pub field: &'a str,
}

/// The future a [`Speaker`] answers with.
pub type Answer<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, String>> + Send + 'a>>;

/// Writes a worker's messages on chat pages (a simulated user), and may cast its arena votes
/// and answer the questions after the conversation.
pub trait Speaker: Send + Sync {
    /// The next move, or why there is none.
    fn next<'a>(&'a self, turn: SpeakerTurn<'a>) -> Answer<'a, Spoken>;

    /// The arena's vote, or `None` to leave it to the crowd's policy (the default).
    fn vote<'a>(&'a self, turn: VoteTurn<'a>) -> Answer<'a, Option<Voted>> {
        let _ = turn;
        Box::pin(async { Ok(None) })
    }

    /// The form fields answering one question after the conversation (an empty list answers
    /// an optional one with nothing), or `None` to leave it to the crowd's policy (the
    /// default).
    fn answer<'a>(&'a self, turn: AnswerTurn<'a>) -> Answer<'a, Option<Vec<(String, String)>>> {
        let _ = turn;
        Box::pin(async { Ok(None) })
    }
}

impl std::fmt::Debug for dyn Speaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Speaker")
    }
}

impl CrowdConfig {
    /// The defaults for `workers` on `study` at `url`: up to 64 at a time, no abandoning, and
    /// worker ids and seed from the clock.
    pub fn new(url: impl Into<String>, study: impl Into<String>, workers: usize) -> CrowdConfig {
        let epoch_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        CrowdConfig {
            url: url.into(),
            study: study.into(),
            workers,
            concurrency: workers.clamp(1, 64),
            abandon: 0.0,
            seed: epoch_ms,
            worker_prefix: format!("crowd-{epoch_ms:x}"),
            stream: false,
            vote_noise: 0.1,
            typing_ms: (0, 0),
            entry: Entry::Prolific,
            speaker: None,
        }
    }
}

/// The figures of one crowd.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CrowdReport {
    pub url: String,
    pub study: String,
    pub workers: usize,
    pub abandon: f64,
    pub seed: u64,
    pub duration_s: f64,
    /// Judgments the server accepted (`POST /p/judge` answered 303).
    pub completed_judgments: u64,
    /// Items given back with `POST /p/skip`.
    pub skipped_items: u64,
    /// Leases left to expire by workers who stopped on an item page.
    pub abandoned_leases: u64,
    /// Item pages shown with a lease (claims), and per second of the run.
    pub claims: u64,
    pub claims_per_s: f64,
    /// How the workers ended.
    pub finished: u64,
    pub screened: u64,
    pub no_items: u64,
    /// Workers that left by abandoning (skip or stop).
    pub abandoned_workers: u64,
    /// Workers whose walk failed or did not end within the page bound.
    pub failed: u64,
    /// Forms the server answered with 422 (a problem in the answers).
    pub rejected_forms: u64,
    /// Pages shown: loaded (`GET /p`, whose times are the latencies below) or sent by the
    /// server at the end of a streamed chat turn.
    pub pages: u64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Failures by code.
    pub errors: BTreeMap<String, u64>,
    /// The first failures, each as `worker: what happened (code)`.
    pub failures: Vec<String>,
    /// Chat pages: messages sent (and answered: a send returns once the replies are stored, or
    /// its stream has ended), retries of a failed system, and the time of a turn from sending
    /// it to its replies.
    pub chat_turns: u64,
    pub chat_retries: u64,
    pub turn_p50_ms: Option<f64>,
    pub turn_p99_ms: Option<f64>,
    /// Every turn's time in microseconds, in no particular order (for benchmarks).
    #[serde(skip)]
    pub turn_latencies_us: Vec<u64>,
    /// Every conversation that reached its questions, with the vote of an arena.
    pub chats: Vec<CrowdChat>,
}

/// One conversation of a worker on a `chat` or `arena` page, as the worker saw it.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CrowdChat {
    pub worker: String,
    /// `chat` or `arena`.
    pub page: String,
    pub lease: String,
    pub item: String,
    /// The messages the worker sent, in order.
    pub sent: Vec<String>,
    /// Sides the worker asked again after they failed, in order (`left`, `right`, `chat`).
    pub retried: Vec<String>,
    /// The vote (`left`, `right`, `tie`, `both_bad`) and why it was chosen (`longer`,
    /// `equal`, `noise`); `None` on a chat page.
    pub vote: Option<String>,
    pub reason: Option<String>,
    /// Characters of each side's replies as shown when voting (`[left, right]`).
    pub reply_chars: Vec<usize>,
    /// The systems the reveal page named for each side (`[left, right]`), when it was shown.
    pub revealed: Vec<String>,
    /// Whether the questions were accepted (`POST /p/chat/finish` answered 303).
    pub submitted: bool,
}

impl CrowdReport {
    /// The figures as a few lines of text.
    pub fn text(&self) -> String {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1} ms"));
        let mut out = format!(
            "crowd: {} workers on {} at {} (abandon {:.0}%, seed {}) in {:.1} s\n\
             judgments completed: {}\nitems skipped:       {}\nleases abandoned:    {}\n\
             claims:              {} ({:.1}/s)\n\
             workers: {} finished, {} screened, {} no items, {} abandoned, {} failed\n\
             pages:               {} (p50 {}, p99 {}), {} forms rejected\n",
            self.workers,
            self.study,
            self.url,
            self.abandon * 100.0,
            self.seed,
            self.duration_s,
            self.completed_judgments,
            self.skipped_items,
            self.abandoned_leases,
            self.claims,
            self.claims_per_s,
            self.finished,
            self.screened,
            self.no_items,
            self.abandoned_workers,
            self.failed,
            self.pages,
            ms(self.latency_p50_ms),
            ms(self.latency_p99_ms),
            self.rejected_forms,
        );
        if self.chat_turns > 0 || !self.chats.is_empty() {
            let votes = self.chats.iter().filter(|c| c.vote.is_some()).count();
            out.push_str(&format!(
                "chats:               {} ({} votes), {} turns (p50 {}, p99 {}), {} retries\n",
                self.chats.len(),
                votes,
                self.chat_turns,
                ms(self.turn_p50_ms),
                ms(self.turn_p99_ms),
                self.chat_retries,
            ));
        }
        for (code, n) in &self.errors {
            out.push_str(&format!("error {code}: {n}\n"));
        }
        out
    }
}

/// Counters shared by the workers of one crowd.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) judgments: AtomicU64,
    skipped: AtomicU64,
    abandoned: AtomicU64,
    pub(crate) claims: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pages: AtomicU64,
    latencies_us: Mutex<Vec<u64>>,
    pub(crate) turns: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) turn_latencies_us: Mutex<Vec<u64>>,
    pub(crate) chats: Mutex<Vec<CrowdChat>>,
    endings: Mutex<BTreeMap<Ending, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
    failures: Mutex<Vec<String>>,
}

/// How one worker's walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ending {
    Finished,
    Screened,
    NoItems,
    Abandoned,
    Failed,
}

/// A small seeded generator (SplitMix64): enough for random answers, and reproducible.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs the crowd to its end: every worker finishes, is screened out, finds no item, abandons
/// or fails.
pub async fn run(config: CrowdConfig) -> Result<CrowdReport, LoadgenError> {
    let target = Target::parse(&config.url)?;
    if config.workers == 0 || config.concurrency == 0 {
        return Err(LoadgenError::BadConfig(
            "workers and concurrency must be at least 1",
        ));
    }
    if !(0.0..=1.0).contains(&config.abandon) || !(0.0..=1.0).contains(&config.vote_noise) {
        return Err(LoadgenError::BadConfig(
            "the abandon and vote-noise chances are between 0 and 1",
        ));
    }
    crate::health(&target).await?;
    let tally = Arc::new(Tally::default());
    let gate = Arc::new(Semaphore::new(config.concurrency));
    let config = Arc::new(config);
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..config.workers {
        let (tally, gate, config, target) =
            (tally.clone(), gate.clone(), config.clone(), target.clone());
        tasks.spawn(async move {
            let Ok(_permit) = gate.acquire().await else {
                return;
            };
            let mut rng = Rng::new(config.seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407));
            let name = format!("{}-{i}", config.worker_prefix);
            let ending = match worker(&target, &config, &name, &mut rng, &tally).await {
                Ok(e) => e,
                Err(f) => {
                    let mut failures = tally.failures.lock().unwrap_or_else(|e| e.into_inner());
                    if failures.len() < MAX_FAILURES_KEPT {
                        failures.push(format!("{name}: {} ({})", f.detail, f.code));
                    }
                    drop(failures);
                    *tally
                        .errors
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(f.code)
                        .or_default() += 1;
                    Ending::Failed
                }
            };
            *tally
                .endings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(ending)
                .or_default() += 1;
        });
    }
    while tasks.join_next().await.is_some() {}
    let secs = start.elapsed().as_secs_f64();
    Ok(report(&config, &target, &tally, secs))
}

fn report(config: &CrowdConfig, target: &Target, tally: &Tally, secs: f64) -> CrowdReport {
    let mut lat = tally
        .latencies_us
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    lat.sort_unstable();
    let pct = |p: f64| percentile_ms(&lat, p);
    let mut turns = tally
        .turn_latencies_us
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    turns.sort_unstable();
    let mut chats = tally
        .chats
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    chats.sort_by(|a, b| (&a.worker, &a.lease).cmp(&(&b.worker, &b.lease)));
    let endings = tally
        .endings
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let ended = |e: Ending| endings.get(&e).copied().unwrap_or(0);
    let claims = tally.claims.load(Ordering::Relaxed);
    CrowdReport {
        url: target.origin(),
        study: config.study.clone(),
        workers: config.workers,
        abandon: config.abandon,
        seed: config.seed,
        duration_s: secs,
        completed_judgments: tally.judgments.load(Ordering::Relaxed),
        skipped_items: tally.skipped.load(Ordering::Relaxed),
        abandoned_leases: tally.abandoned.load(Ordering::Relaxed),
        claims,
        claims_per_s: if secs > 0.0 {
            claims as f64 / secs
        } else {
            0.0
        },
        finished: ended(Ending::Finished),
        screened: ended(Ending::Screened),
        no_items: ended(Ending::NoItems),
        abandoned_workers: ended(Ending::Abandoned),
        failed: ended(Ending::Failed),
        rejected_forms: tally.rejected.load(Ordering::Relaxed),
        pages: tally.pages.load(Ordering::Relaxed),
        latency_p50_ms: pct(0.50),
        latency_p99_ms: pct(0.99),
        errors: tally
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        failures: tally
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        chat_turns: tally.turns.load(Ordering::Relaxed),
        chat_retries: tally.retries.load(Ordering::Relaxed),
        turn_p50_ms: percentile_ms(&turns, 0.50),
        turn_p99_ms: percentile_ms(&turns, 0.99),
        turn_latencies_us: turns,
        chats,
    }
}

/// The `p` quantile (nearest rank) of sorted microseconds, in milliseconds.
pub fn percentile_ms(sorted_us: &[u64], p: f64) -> Option<f64> {
    if sorted_us.is_empty() {
        return None;
    }
    let k = ((p * sorted_us.len() as f64).ceil() as usize).clamp(1, sorted_us.len()) - 1;
    Some(sorted_us[k] as f64 / 1000.0)
}

/// One worker's walk through the study's pages.
async fn worker(
    target: &Target,
    config: &CrowdConfig,
    name: &str,
    rng: &mut Rng,
    tally: &Tally,
) -> Result<Ending, Failure> {
    let mut conn = Conn::connect(target).await?;
    let cookie = enter(&mut conn, config, name).await?;
    let mut last_lease = String::new();
    let mut chat: Option<crate::crowd_chat::Convo> = None;
    // A chat page the server sent at the end of a streamed turn, shown without loading it.
    let mut drawn: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let html = match drawn.take() {
            Some(html) => {
                tally.pages.fetch_add(1, Ordering::Relaxed);
                html
            }
            None => page(&mut conn, &cookie, tally).await?.body,
        };
        let kind = page_kind(&html).unwrap_or_default();
        if kind == "chat" || kind == "arena" {
            let lease = Form::parse(&html)
                .hidden("lease")
                .unwrap_or_default()
                .to_string();
            if lease.is_empty() {
                return Err(Failure::new("no_lease", "a chat page without a lease"));
            }
            if claims_anew(&lease, &mut last_lease, config, rng, tally) {
                return abandon(&mut conn, &cookie, &lease, rng, tally).await;
            }
            let w = crate::crowd_chat::Worker {
                conn: &mut conn,
                cookie: &cookie,
                config,
                name,
                tally,
            };
            drawn = crate::crowd_chat::step(w, &kind, &html, &mut chat, rng).await?;
            continue;
        }
        let form = Form::parse(&html);
        let path = match kind.as_str() {
            "consent" | "instructions" => "/p/next",
            "questions" => "/p/answers",
            "onboarding" => "/p/onboarding",
            "compare" | "rate" => {
                let lease = form.hidden("lease").unwrap_or_default().to_string();
                if lease.is_empty() {
                    return Err(Failure::new("no_lease", "an item page without a lease"));
                }
                if claims_anew(&lease, &mut last_lease, config, rng, tally) {
                    return abandon(&mut conn, &cookie, &lease, rng, tally).await;
                }
                "/p/judge"
            }
            "completion" => return Ok(Ending::Finished),
            "no-items" => return Ok(Ending::NoItems),
            "screened" => return Ok(Ending::Screened),
            other => {
                return Err(Failure::new(
                    "unknown_page",
                    format!("a page of kind `{other}`"),
                ));
            }
        };
        let body = form.fill(rng);
        submit(&mut conn, &cookie, path, &body, tally).await?;
    }
    Err(Failure::new(
        "stuck",
        format!("no end after {MAX_PAGES} pages"),
    ))
}

/// Opens the worker's entry link (Prolific's or a simulated user's): the participant cookie
/// it sets.
async fn enter(conn: &mut Conn, config: &CrowdConfig, name: &str) -> Result<String, Failure> {
    let link = match &config.entry {
        Entry::Prolific => format!(
            "/join?study={}&PROLIFIC_PID={}&STUDY_ID=crowd&SESSION_ID={}",
            form_escape(&config.study),
            form_escape(name),
            form_escape(&format!("{name}-session"))
        ),
        Entry::Simulated(user) => format!(
            "/join?study={}&participant={}&test=1&simulated={}",
            form_escape(&config.study),
            form_escape(name),
            form_escape(user)
        ),
    };
    let res = conn.get(&link, None).await?;
    if res.status == 429 {
        return Err(Failure::new(
            "http_429",
            "GET /join answered 429: start the server with `--join-limit 0` for a crowd",
        ));
    }
    if res.status != 303 {
        return Err(Failure::new(
            "http_status",
            format!("GET /join answered {}", res.status),
        ));
    }
    res.cookies
        .into_iter()
        .find(|c| c.starts_with("wozkit_token="))
        .ok_or_else(|| Failure::new("no_cookie", "the entry link set no participant cookie"))
}

/// Fetches the participant's current page, timing it.
async fn page(conn: &mut Conn, cookie: &str, tally: &Tally) -> Result<Response, Failure> {
    let t = Instant::now();
    let res = conn.get("/p", Some(cookie)).await?;
    tally
        .latencies_us
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(t.elapsed().as_micros() as u64);
    tally.pages.fetch_add(1, Ordering::Relaxed);
    if res.status != 200 {
        return Err(Failure::new(
            "http_status",
            format!("GET /p answered {}", res.status),
        ));
    }
    Ok(res)
}

/// Counts a lease not seen before as a claim, and draws whether the worker abandons it:
/// true when they do.
fn claims_anew(
    lease: &str,
    last_lease: &mut String,
    config: &CrowdConfig,
    rng: &mut Rng,
    tally: &Tally,
) -> bool {
    if lease == last_lease {
        return false;
    }
    tally.claims.fetch_add(1, Ordering::Relaxed);
    last_lease.clear();
    last_lease.push_str(lease);
    rng.unit() < config.abandon
}

/// Posts a page's filled form, counting a judgment stored or a form refused.
async fn submit(
    conn: &mut Conn,
    cookie: &str,
    path: &str,
    body: &str,
    tally: &Tally,
) -> Result<(), Failure> {
    let res = conn.post_form(path, Some(cookie), body).await?;
    match res.status {
        303 if path == "/p/judge" => {
            tally.judgments.fetch_add(1, Ordering::Relaxed);
        }
        303 => {}
        422 => {
            tally.rejected.fetch_add(1, Ordering::Relaxed);
        }
        s => {
            return Err(Failure::new(
                "http_status",
                format!("POST {path} answered {s}"),
            ));
        }
    }
    Ok(())
}

/// Leaves an item: half the time the item is given back, otherwise the lease is left to
/// expire.
async fn abandon(
    conn: &mut Conn,
    cookie: &str,
    lease: &str,
    rng: &mut Rng,
    tally: &Tally,
) -> Result<Ending, Failure> {
    if rng.below(2) == 0 {
        tally.abandoned.fetch_add(1, Ordering::Relaxed);
        return Ok(Ending::Abandoned);
    }
    let res = conn
        .post_form(
            "/p/skip",
            Some(cookie),
            &format!("lease={}", form_escape(lease)),
        )
        .await?;
    if res.status != 303 {
        return Err(Failure::new(
            "http_status",
            format!("POST /p/skip answered {}", res.status),
        ));
    }
    tally.skipped.fetch_add(1, Ordering::Relaxed);
    Ok(Ending::Abandoned)
}

/// The kind of page: the `data-page` of its `<main>`.
pub fn page_kind(html: &str) -> Option<String> {
    let at = html.find("<main")?;
    let tag = &html[at..at + html[at..].find('>')?];
    attr(tag, "data-page")
}

/// The value of attribute `name` in one tag's text (`<input type="radio" name="x" …`).
pub(crate) fn attr(tag: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=\"");
    let at = tag.find(&needle)? + needle.len();
    let end = tag[at..].find('"')?;
    Some(unescape(&tag[at..at + end]))
}

/// Undoes the HTML escaping of an attribute value or a text.
pub(crate) fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// One field of a form, as read from its HTML.
#[derive(Debug, PartialEq)]
pub enum Field {
    /// Sent back as it is.
    Hidden(String, String),
    /// A group of radios (or a select): one value is picked.
    OneOf(String, Vec<String>),
    /// A checkbox: ticked or not.
    Check(String, String),
    /// Free text (a textarea or a text input): a few words.
    Text(String),
    /// A number input, with its bounds.
    Number(String, i64, i64),
}

/// The fields of a page's form, in page order.
#[derive(Debug, Default)]
pub struct Form {
    pub fields: Vec<Field>,
}

impl Form {
    /// Reads the fields of the first form of `html`.
    pub fn parse(html: &str) -> Form {
        let html = match html.find("<form") {
            Some(at) => {
                let rest = &html[at..];
                &rest[..rest.find("</form>").unwrap_or(rest.len())]
            }
            None => "",
        };
        Form::scan(html, |_| true)
    }

    /// Reads the fields of the form whose `id` is `id`: those inside it and those elsewhere on
    /// the page that name it in their `form` attribute (the labels under chat replies).
    pub fn parse_id(html: &str, id: &str) -> Form {
        let needle = format!(" id=\"{id}\"");
        let mut inside = "";
        let mut at = 0;
        while let Some(off) = html[at..].find("<form") {
            let start = at + off;
            let tag_end = html[start..].find('>').map_or(html.len(), |e| start + e);
            if html[start..tag_end].contains(&needle) {
                let rest = &html[start..];
                inside = &rest[..rest.find("</form>").unwrap_or(rest.len())];
                break;
            }
            at = tag_end;
        }
        let mut form = Form::scan(inside, |tag| attr(tag, "form").is_none());
        let outside = Form::scan(html, |tag| attr(tag, "form").as_deref() == Some(id));
        for f in outside.fields {
            match (&f, form.fields.iter_mut().find(|g| same_group(g, &f))) {
                (Field::OneOf(_, more), Some(Field::OneOf(_, values))) => {
                    values.extend(more.iter().cloned());
                }
                _ => form.fields.push(f),
            }
        }
        form
    }

    /// The fields of `html`'s tags that `keep` accepts.
    fn scan(html: &str, keep: impl Fn(&str) -> bool) -> Form {
        let mut form = Form::default();
        let mut at = 0;
        while let Some(off) = html[at..].find('<') {
            let start = at + off;
            let Some(len) = html[start..].find('>') else {
                break;
            };
            let tag = &html[start..start + len];
            at = start + len;
            if !keep(tag) {
                continue;
            }
            if tag.starts_with("<input ") {
                form.input(tag);
            } else if tag.starts_with("<textarea ") {
                if let Some(name) = attr(tag, "name") {
                    form.fields.push(Field::Text(name));
                }
            } else if tag.starts_with("<select ") {
                form.select(tag, &html[at..]);
            }
        }
        form
    }

    /// A `<select>` whose options follow in `rest`: one of its non-empty values is picked.
    fn select(&mut self, tag: &str, rest: &str) {
        let Some(name) = attr(tag, "name") else {
            return;
        };
        let end = rest.find("</select>").unwrap_or(rest.len());
        let options = rest[..end]
            .split("<option")
            .skip(1)
            .filter_map(|o| attr(&o[..o.find('>').unwrap_or(o.len())], "value"))
            .filter(|v| !v.is_empty())
            .collect();
        self.fields.push(Field::OneOf(name, options));
    }

    fn input(&mut self, tag: &str) {
        let Some(name) = attr(tag, "name") else {
            return;
        };
        let value = attr(tag, "value").unwrap_or_default();
        match attr(tag, "type").as_deref().unwrap_or("text") {
            "hidden" => self.fields.push(Field::Hidden(name, value)),
            "radio" => {
                let group = self.fields.iter_mut().find_map(|f| match f {
                    Field::OneOf(n, values) if *n == name => Some(values),
                    _ => None,
                });
                match group {
                    Some(values) => values.push(value),
                    None => self.fields.push(Field::OneOf(name, vec![value])),
                }
            }
            "checkbox" => self.fields.push(Field::Check(name, value)),
            "number" | "range" => {
                let bound =
                    |a: &str, d: i64| attr(tag, a).and_then(|v| v.parse().ok()).unwrap_or(d);
                let (min, max) = (bound("min", 0), bound("max", 10));
                self.fields.push(Field::Number(name, min, max.max(min)));
            }
            "text" => self.fields.push(Field::Text(name)),
            _ => {}
        }
    }

    /// The value of the hidden input `name`.
    pub fn hidden(&self, name: &str) -> Option<&str> {
        self.fields.iter().find_map(|f| match f {
            Field::Hidden(n, v) if n == name => Some(v.as_str()),
            _ => None,
        })
    }

    /// The form's body with every field answered at random.
    pub fn fill(&self, rng: &mut Rng) -> String {
        encode(&self.fill_pairs(rng))
    }

    /// Every field answered at random, as `(name, value)` pairs in page order.
    pub fn fill_pairs(&self, rng: &mut Rng) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = vec![];
        for f in &self.fields {
            match f {
                Field::Hidden(n, v) => pairs.push((n.clone(), v.clone())),
                Field::OneOf(n, values) if !values.is_empty() => {
                    pairs.push((n.clone(), values[rng.below(values.len())].clone()));
                }
                Field::OneOf(..) => {}
                Field::Check(n, v) => {
                    if rng.below(2) == 0 {
                        pairs.push((n.clone(), v.clone()));
                    }
                }
                Field::Text(n) => {
                    let words: Vec<&str> = (0..3 + rng.below(6))
                        .map(|_| WORDS[rng.below(WORDS.len())])
                        .collect();
                    pairs.push((n.clone(), words.join(" ")));
                }
                Field::Number(n, min, max) => {
                    let span = (max - min) as u64 + 1;
                    pairs.push((
                        n.clone(),
                        (min + (rng.next_u64() % span) as i64).to_string(),
                    ));
                }
            }
        }
        pairs
    }
}

/// Whether two fields are the same radio group.
fn same_group(a: &Field, b: &Field) -> bool {
    matches!((a, b), (Field::OneOf(x, _), Field::OneOf(y, _)) if x == y)
}

/// A form body from `(name, value)` pairs.
pub fn encode(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(n, v)| format!("{}={}", form_escape(n), form_escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<main class="wide" data-page="compare"><form method="post" action="/p/judge"><input type="hidden" name="step" value="4:compare"><input type="hidden" name="lease" value="L&amp;1"><fieldset data-testid="question-choice"><label><input type="radio" name="choice" value="left" required> A</label><label><input type="radio" name="choice" value="right" required> B</label></fieldset><textarea name="justification" rows="3"></textarea><input type="checkbox" name="turn.0.1" value="bad"><input type="number" name="age" min="18" max="20"><select name="s"><option value="">-</option><option value="x">x</option></select></form></main>"#;

    #[test]
    fn page_kinds_and_fields_are_read() {
        assert_eq!(page_kind(PAGE).as_deref(), Some("compare"));
        let form = Form::parse(PAGE);
        assert_eq!(form.hidden("lease"), Some("L&1"));
        assert_eq!(
            form.fields,
            vec![
                Field::Hidden("step".into(), "4:compare".into()),
                Field::Hidden("lease".into(), "L&1".into()),
                Field::OneOf("choice".into(), vec!["left".into(), "right".into()]),
                Field::Text("justification".into()),
                Field::Check("turn.0.1".into(), "bad".into()),
                Field::Number("age".into(), 18, 20),
                Field::OneOf("s".into(), vec!["x".into()]),
            ]
        );
    }

    #[test]
    fn filled_forms_answer_every_required_field_within_bounds() {
        let form = Form::parse(PAGE);
        let mut rng = Rng::new(7);
        for _ in 0..50 {
            let body = form.fill(&mut rng);
            assert!(
                body.starts_with("step=4%3Acompare&lease=L%261&choice="),
                "{body}"
            );
            assert!(body.contains("&justification="), "{body}");
            let age: i64 = body
                .split('&')
                .find_map(|p| p.strip_prefix("age="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1);
            assert!((18..=20).contains(&age), "{body}");
            assert!(body.ends_with("&s=x"), "{body}");
        }
    }
}
