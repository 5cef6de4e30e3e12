//! A study's launch: crowd workers arrive in a burst through the entry link of a live (paired)
//! study, read the consent and instructions pages for a time drawn from a wide distribution,
//! some leave before the waiting room, and the rest wait over a WebSocket until they are
//! paired, moved to the other role (`reassigned`: they read that role's instructions and wait
//! again), or sent away without a partner. The figures say how many arrived, left, stayed, were
//! paired or not, and how many roles the lobby switched.
//!
//! The launch ends when nobody can be paired any more: every arrival has reached the waiting
//! room or left, no pair is half told, and at most one waits; or at the `give_up` bound, when
//! whoever still waits counts as unpaired. Nothing here decides by elapsed time except that
//! bound, so a slow machine changes how long it takes, not what it finds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;

use crate::crowd::{Form, Rng, page_kind};
use crate::error::{Failure, LoadgenError};
use crate::frames::{EndedFrame, ErrorFrame, SessionFrame, frame_type};
use crate::http::{Conn, form_escape};
use crate::pages;
use crate::target::Target;

/// Pages one worker may load before it counts as stuck.
const MAX_PAGES: usize = 64;

/// What to run.
#[derive(Clone, Debug)]
pub struct LaunchConfig {
    /// `http://127.0.0.1:PORT` or `http://localhost:PORT`.
    pub url: String,
    /// The live study's id, as entry links name it.
    pub study: String,
    /// Workers arriving.
    pub arrivals: usize,
    /// The arrivals are spread at random over this time from the start.
    pub over: Duration,
    /// Chance (0 to 1) that a worker leaves on one of the pages before the waiting room.
    pub leave: f64,
    /// Time spent on each page before the waiting room, drawn log-uniformly from this range.
    pub read_ms: (u64, u64),
    /// Seed of every random draw.
    pub seed: u64,
    /// Prefix of the workers' ids (`<prefix>-<i>`).
    pub worker_prefix: String,
    /// Longest launch: whoever still waits then counts as unpaired.
    pub give_up: Duration,
}

/// The figures of a launch.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LaunchReport {
    pub url: String,
    pub study: String,
    pub seed: u64,
    pub duration_s: f64,
    pub arrivals: u64,
    /// Left before the waiting room.
    pub left: u64,
    /// Reached the waiting room.
    pub stayed: u64,
    /// Paired with a human partner.
    pub paired: u64,
    /// Stayed but not paired: sent away without a partner, or still waiting at the end.
    pub unpaired: u64,
    /// Of the unpaired, those still waiting when the launch ended.
    pub still_waiting: u64,
    /// `reassigned` frames: waiters the lobby moved to the other role.
    pub roles_switched: u64,
    /// Sessions the pairs were given (each seen by both partners).
    pub sessions: u64,
    /// Workers whose walk failed (counted in none of the above but `arrivals`).
    pub failed: u64,
    pub errors: std::collections::BTreeMap<String, u64>,
}

impl LaunchReport {
    /// The figures as a few lines of text.
    pub fn text(&self) -> String {
        let mut out = format!(
            "launch: {} arrivals on {} at {} (seed {}) in {:.1} s\n\
             left before the room: {}\nstayed:               {}\n\
             paired:               {} ({} sessions)\nunpaired:             {} ({} still waiting)\n\
             roles switched:       {}\nfailed:               {}\n",
            self.arrivals,
            self.study,
            self.url,
            self.seed,
            self.duration_s,
            self.left,
            self.stayed,
            self.paired,
            self.sessions,
            self.unpaired,
            self.still_waiting,
            self.roles_switched,
            self.failed,
        );
        for (code, n) in &self.errors {
            out.push_str(&format!("error {code}: {n}\n"));
        }
        out
    }
}

/// How one worker ended.
enum Ending {
    Left,
    Paired,
    NoPartner,
    StillWaiting,
}

/// What the workers share: where each one is, so the launch knows when it is over.
#[derive(Default)]
struct Board {
    /// Arrived and not yet in the waiting room (reading, or reading again after a switch).
    walking: usize,
    /// In the waiting room.
    waiting: usize,
    /// Workers not yet arrived.
    to_come: usize,
    /// Participants told of each session.
    sessions: HashMap<String, u32>,
    switched: u64,
}

impl Board {
    /// Nobody can be paired any more: everyone arrived and reached the room or left, every
    /// pair is told on both sides, and at most one waits.
    fn settled(&self) -> bool {
        self.to_come == 0
            && self.walking == 0
            && self.waiting <= 1
            && self.sessions.values().all(|&n| n >= 2)
    }
}

type Shared = Arc<(Mutex<Board>, watch::Sender<bool>)>;

fn update(shared: &Shared, f: impl FnOnce(&mut Board)) {
    let (board, over) = &**shared;
    let mut b = board.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut b);
    if b.settled() {
        over.send_replace(true);
    }
}

/// Runs the launch to its end.
pub async fn run(config: LaunchConfig) -> Result<LaunchReport, LoadgenError> {
    let target = Target::parse(&config.url)?;
    if config.arrivals == 0 || config.read_ms.0 > config.read_ms.1 {
        return Err(LoadgenError::BadConfig(
            "at least one arrival, and reading times from the smaller to the larger",
        ));
    }
    if !(0.0..=1.0).contains(&config.leave) {
        return Err(LoadgenError::BadConfig(
            "the chance to leave is between 0 and 1",
        ));
    }
    crate::health(&target).await?;
    let (over_tx, over_rx) = watch::channel(false);
    let shared: Shared = Arc::new((
        Mutex::new(Board {
            to_come: config.arrivals,
            ..Board::default()
        }),
        over_tx,
    ));
    let config = Arc::new(config);
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..config.arrivals {
        let (shared, config, target) = (shared.clone(), config.clone(), target.clone());
        tasks.spawn(arrival(i, shared, config, target, over_rx.clone()));
    }
    let mut report = LaunchReport {
        url: target.origin(),
        study: config.study.clone(),
        seed: config.seed,
        arrivals: config.arrivals as u64,
        ..LaunchReport::default()
    };
    let all = count_endings(&mut tasks, &mut report);
    let give_up = async {
        tokio::time::sleep(config.give_up).await;
        shared.1.send_replace(true);
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = all => {}
        () = give_up => {}
    }
    let board = shared.0.lock().unwrap_or_else(|e| e.into_inner());
    report.stayed = report.paired + report.unpaired;
    report.roles_switched = board.switched;
    report.sessions = board.sessions.len() as u64;
    report.duration_s = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Arrival `i`: comes at a time drawn over the launch, then walks as a worker.
async fn arrival(
    i: usize,
    shared: Shared,
    config: Arc<LaunchConfig>,
    target: Target,
    mut over: watch::Receiver<bool>,
) -> Result<Ending, Failure> {
    let mut rng = Rng::new(config.seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let at = config.over.mul_f64(rng.unit());
    tokio::time::sleep(at).await;
    update(&shared, |b| {
        b.to_come -= 1;
        b.walking += 1;
    });
    let name = format!("{}-{i}", config.worker_prefix);
    let got = worker(&target, &config, &name, &mut rng, &shared, &mut over).await;
    if got.is_err() {
        update(&shared, |b| b.walking = b.walking.saturating_sub(1));
    }
    got
}

/// Counts each worker's ending in the report as the workers end.
async fn count_endings(tasks: &mut JoinSet<Result<Ending, Failure>>, report: &mut LaunchReport) {
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(Ending::Left)) => report.left += 1,
            Ok(Ok(Ending::Paired)) => report.paired += 1,
            Ok(Ok(Ending::NoPartner)) => report.unpaired += 1,
            Ok(Ok(Ending::StillWaiting)) => {
                report.unpaired += 1;
                report.still_waiting += 1;
            }
            Ok(Err(f)) => {
                report.failed += 1;
                *report.errors.entry(f.code).or_default() += 1;
            }
            Err(e) => {
                report.failed += 1;
                *report.errors.entry("panic".into()).or_default() += 1;
                eprintln!("launch: a worker task failed: {e}");
            }
        }
    }
}

/// A time drawn log-uniformly from `read_ms`.
fn reading(config: &LaunchConfig, rng: &mut Rng) -> Duration {
    let (lo, hi) = (
        config.read_ms.0.max(1) as f64,
        config.read_ms.1.max(1) as f64,
    );
    Duration::from_millis((lo * (hi / lo).powf(rng.unit())).round() as u64)
}

/// One worker: the entry link, the pages, the waiting room (again after a switch).
async fn worker(
    target: &Target,
    config: &LaunchConfig,
    name: &str,
    rng: &mut Rng,
    shared: &Shared,
    over: &mut watch::Receiver<bool>,
) -> Result<Ending, Failure> {
    let mut conn = Conn::connect(target).await?;
    let cookie = enter(&mut conn, config, name).await?;
    // A leaver leaves on the first or the second page it reads.
    let mut leaves_after = (rng.unit() < config.leave).then(|| 1 + rng.below(2));
    for _ in 0..MAX_PAGES {
        let res = conn.get("/p", Some(&cookie)).await?;
        if res.status != 200 {
            return Err(Failure::new(
                format!("http_{}", res.status),
                "GET /p did not show a page",
            ));
        }
        match page_kind(&res.body).as_deref() {
            Some("consent" | "instructions") => {
                tokio::time::sleep(reading(config, rng)).await;
                if let Some(n) = leaves_after.as_mut() {
                    *n -= 1;
                    if *n == 0 {
                        update(shared, |b| b.walking -= 1);
                        return Ok(Ending::Left);
                    }
                }
                next_page(&mut conn, &cookie, &res.body).await?;
            }
            Some("waiting") => {
                // A leaver who has not left by now stays.
                leaves_after = None;
                if let Some(ending) = waiting_room(target, conn, &cookie, shared, over).await? {
                    return Ok(ending);
                }
                conn = Conn::connect(target).await?;
            }
            Some("room") => {
                update(shared, |b| b.walking -= 1);
                return Ok(Ending::Paired);
            }
            other => {
                return Err(Failure::new(
                    "unexpected_page",
                    format!("the flow showed {other:?} before the room"),
                ));
            }
        }
    }
    Err(Failure::new(
        "stuck",
        format!("no end after {MAX_PAGES} pages"),
    ))
}

/// Opens the worker's Prolific entry link: the participant cookie it sets.
async fn enter(conn: &mut Conn, config: &LaunchConfig, name: &str) -> Result<String, Failure> {
    let link = format!(
        "/join?study={}&PROLIFIC_PID={}&STUDY_ID=launch&SESSION_ID={}",
        form_escape(&config.study),
        form_escape(name),
        form_escape(&format!("{name}-session"))
    );
    let res = conn.get(&link, None).await?;
    if res.status != 303 {
        return Err(Failure::new(
            format!("http_{}", res.status),
            format!(
                "GET /join answered {} (start the server with --join-limit 0)",
                res.status
            ),
        ));
    }
    res.cookies
        .into_iter()
        .find(|c| c.starts_with("wozkit_token="))
        .ok_or_else(|| Failure::new("no_cookie", "the entry link set no participant cookie"))
}

/// Goes on from a consent or instructions page (`body`) to the next step.
async fn next_page(conn: &mut Conn, cookie: &str, body: &str) -> Result<(), Failure> {
    let step = Form::parse(body)
        .hidden("step")
        .unwrap_or_default()
        .to_string();
    let body = format!("step={}", form_escape(&step));
    let res = conn.post_form("/p/next", Some(cookie), &body).await?;
    if res.status != 303 {
        return Err(Failure::new(
            format!("http_{}", res.status),
            "POST /p/next was refused",
        ));
    }
    Ok(())
}

/// Waits in the waiting room over `conn`'s stream until the wait decides: the worker's
/// ending, or `None` when their role was switched and they walk the pages again.
async fn waiting_room(
    target: &Target,
    conn: Conn,
    cookie: &str,
    shared: &Shared,
    over: &mut watch::Receiver<bool>,
) -> Result<Option<Ending>, Failure> {
    update(shared, |b| {
        b.walking -= 1;
        b.waiting += 1;
    });
    let ws = pages::upgrade(target, conn.into_stream()?, cookie).await;
    let waited = match ws {
        Ok(ws) => wait(ws, over).await,
        Err(f) => Err(f),
    };
    match waited {
        Ok(Waited::Switched) => {
            update(shared, |b| {
                b.waiting -= 1;
                b.walking += 1;
                b.switched += 1;
            });
            Ok(None)
        }
        Ok(Waited::Paired(session)) => {
            update(shared, |b| {
                b.waiting -= 1;
                *b.sessions.entry(session).or_default() += 1;
            });
            Ok(Some(Ending::Paired))
        }
        Ok(Waited::NoPartner) => {
            update(shared, |b| b.waiting -= 1);
            Ok(Some(Ending::NoPartner))
        }
        Ok(Waited::Over) => {
            update(shared, |b| b.waiting -= 1);
            Ok(Some(Ending::StillWaiting))
        }
        Err(f) => {
            // Counted as walking again so the caller's correction balances.
            update(shared, |b| {
                b.waiting -= 1;
                b.walking += 1;
            });
            Err(f)
        }
    }
}

/// How a wait ended.
enum Waited {
    Paired(String),
    Switched,
    NoPartner,
    /// The launch is over with this worker still waiting.
    Over,
}

/// The waiting room's frames until one decides.
async fn wait(mut ws: pages::Ws, over: &mut watch::Receiver<bool>) -> Result<Waited, Failure> {
    loop {
        if *over.borrow() {
            let _ = ws.close(None).await;
            return Ok(Waited::Over);
        }
        let text = tokio::select! {
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Close(_))) | None => {
                    return Err(Failure::new("ws_closed", "the waiting room closed"));
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(Failure::new("ws_closed", e.to_string())),
            },
            _ = over.changed() => continue,
        };
        match frame_type(text.as_str()).as_deref() {
            Some("paired") => {
                let paired = serde_json::from_str::<SessionFrame>(text.as_str())
                    .map_err(|e| Failure::new("bad_frame", e.to_string()))?;
                let _ = ws.close(None).await;
                return Ok(Waited::Paired(paired.session));
            }
            Some("reassigned") => {
                let _ = ws.close(None).await;
                return Ok(Waited::Switched);
            }
            Some("ended") => {
                let reason = serde_json::from_str::<EndedFrame>(text.as_str())
                    .map_or_else(|_| "unknown".to_string(), |e| e.reason);
                let _ = ws.close(None).await;
                return if reason == "no_partner" {
                    Ok(Waited::NoPartner)
                } else {
                    Err(Failure::new(reason, "the waiting room ended"))
                };
            }
            Some("error") => {
                let e = serde_json::from_str::<ErrorFrame>(text.as_str())
                    .map_err(|e| Failure::new("bad_frame", e.to_string()))?;
                return Err(Failure::new(e.code, e.message));
            }
            _ => {}
        }
    }
}
