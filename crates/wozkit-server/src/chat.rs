//! Conversations with dialogue systems under test: the `chat` page (one system) and the `arena`
//! page (two hidden systems at once).
//!
//! Each conversation with one system is a session of its own (`chat-<lease>` for a chat,
//! `chat-<lease>-left` and `chat-<lease>-right` for a battle), so that every system sees only
//! its own conversation: the history sent to it is built from its session's messages alone —
//! the participant's turns and that system's own replies, never the other side's. A battle's
//! two sessions receive the same participant turns. Everything is an event: the participant's
//! turn and the reply are `Message`s, a failed turn is `SystemFailed`, labels under a reply are
//! `TurnAnnotated`; the verdict goes to the participant's log as a `Judged` event like any
//! evaluation item, under the lease that keeps each system (or pair) at exactly N.
//!
//! A reply runs in its own task: the participant's request only listens to it, so a reload, a
//! closed tab or a dropped connection never loses a reply, and a reply left unfinished by a
//! server stop is asked for again when the page is next shown.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{mpsc, watch};
use wozkit_core::evaluation::{EvalTask, Evaluation};
use wozkit_core::event::{Actor, EndReason, Event, EventKind, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::questions::seed_of;
use wozkit_store::{Lease, NewEvent, NewSession, Participant, StoreError};
use wozkit_systems::{Client, SystemError, Turn};

use crate::app::{AppState, now_ms};
use crate::error::StartError;

/// The clients of every study's systems, and the replies in flight.
#[derive(Default)]
pub struct Systems {
    /// By study id, then system name.
    clients: HashMap<String, HashMap<String, Arc<Client>>>,
    /// Sessions with a reply being asked for (at most one at a time per session).
    running: Mutex<HashSet<String>>,
    /// Where wizards answer for `human` systems (`crate::human`).
    pub desk: Arc<crate::human::HumanDesk>,
}

impl Systems {
    /// Builds a client for every system every study declares.
    pub fn new<'a>(studies: impl Iterator<Item = &'a LoadedStudy>) -> Result<Systems, StartError> {
        let mut clients: HashMap<String, HashMap<String, Arc<Client>>> = HashMap::new();
        let desk = Arc::new(crate::human::HumanDesk::default());
        for s in studies {
            for (name, spec) in &s.study.systems {
                let client = match spec {
                    wozkit_systems::SystemSpec::Human(h) => Ok(Client::with_system(
                        name,
                        h.limits.clone(),
                        Arc::new(crate::human::HumanSystem::new(
                            desk.clone(),
                            &s.study.id,
                            name,
                        )),
                    )),
                    _ => Client::new(name, spec),
                };
                let client = client.map_err(|e| StartError::Evaluation {
                    study: s.study.id.clone(),
                    message: e.to_string(),
                })?;
                clients
                    .entry(s.study.id.clone())
                    .or_default()
                    .insert(name.clone(), Arc::new(client));
            }
        }
        Ok(Systems {
            clients,
            running: Mutex::new(HashSet::new()),
            desk,
        })
    }

    /// The client of a study's system.
    pub fn client(&self, study: &str, system: &str) -> Option<Arc<Client>> {
        self.clients.get(study)?.get(system).cloned()
    }

    fn start(&self, session: &str) -> bool {
        self.running
            .lock()
            .map(|mut r| r.insert(session.to_string()))
            .unwrap_or(false)
    }

    fn finish(&self, session: &str) {
        if let Ok(mut r) = self.running.lock() {
            r.remove(session);
        }
    }

    /// Every study's systems that may speak unprompted, with a receiver of what they say.
    fn unprompted(
        &self,
    ) -> Vec<(
        String,
        String,
        tokio::sync::broadcast::Receiver<wozkit_systems::Unprompted>,
    )> {
        let mut out = vec![];
        for (study, clients) in &self.clients {
            for (name, client) in clients {
                if let Some(rx) = client.subscribe_unprompted() {
                    out.push((study.clone(), name.clone(), rx));
                }
            }
        }
        out
    }

    /// Whether a reply is being asked for in this session.
    pub fn is_running(&self, session: &str) -> bool {
        self.running
            .lock()
            .map(|r| r.contains(session))
            .unwrap_or(false)
    }
}

/// Stores what systems say unprompted (a `websocket` system's `say` frames) as their messages in
/// the conversation they name, when that conversation is theirs and still going; the page shows
/// it with the next update. Runs until the server stops.
pub fn listen_unprompted(app: &AppState) {
    use tokio::sync::broadcast::error::RecvError;
    for (study, system, mut rx) in app.systems.unprompted() {
        let app = app.clone();
        tokio::spawn(async move {
            loop {
                let said = tokio::select! {
                    said = rx.recv() => said,
                    _ = app.stopping() => break,
                };
                match said {
                    Ok(u) => {
                        if let Err(e) = store_unprompted(&app, &study, &system, &u).await {
                            tracing::warn!(
                                system,
                                dialogue = u.dialogue_id,
                                "unprompted message not stored: {e}"
                            );
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(
                            system,
                            missed = n,
                            "unprompted messages came too fast; some were dropped"
                        );
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        });
    }
}

async fn store_unprompted(
    app: &AppState,
    study: &str,
    system: &str,
    u: &wozkit_systems::Unprompted,
) -> Result<(), StoreError> {
    let Some(record) = app.store.session(&u.dialogue_id).await? else {
        return Ok(());
    };
    if record.study_id != study || !record.is_live() || u.text.trim().is_empty() {
        return Ok(());
    }
    let events = app.store.events(&u.dialogue_id, 0).await?;
    let theirs = events.first().is_some_and(
        |e| matches!(&e.kind, EventKind::ChatStarted { system: s, .. } if s == system),
    );
    if !theirs || Convo::of(&events).ended.is_some() {
        return Ok(());
    }
    let event = NewEvent {
        actor: Actor::Bot {
            role: Role::Wizard,
            name: system.to_string(),
        },
        kind: EventKind::Message {
            role: Role::Wizard,
            text: u.text.clone(),
            source: MessageSource::Free,
        },
        at_ms: now_ms(),
    };
    app.store.append(&u.dialogue_id, vec![event]).await?;
    Ok(())
}

/// One side of a conversation: the system and its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side {
    /// `left` or `right` in a battle, `chat` for a chat.
    pub name: &'static str,
    pub system: String,
    pub session: String,
}

/// The sides of the conversation held under `lease`: one for a chat; two for a battle, the
/// pair's systems swapped for half the leases (decided by the lease id, so every reload shows
/// the same sides).
pub fn sides(ev: &Evaluation, lease: &Lease) -> Vec<Side> {
    let mut systems = ev.item_systems(&lease.item_id);
    match ev.task {
        EvalTask::Arena => {
            if seed_of(&lease.id) & 1 == 1 {
                systems.reverse();
            }
            systems
                .into_iter()
                .zip(["left", "right"])
                .map(|(system, name)| Side {
                    name,
                    system,
                    session: format!("chat-{}-{name}", lease.id),
                })
                .collect()
        }
        _ => systems
            .into_iter()
            .take(1)
            .map(|system| Side {
                name: "chat",
                system,
                session: format!("chat-{}", lease.id),
            })
            .collect(),
    }
}

/// Creates the sessions of a newly claimed conversation (harmless when they exist).
pub async fn open_sessions(
    app: &AppState,
    study: &LoadedStudy,
    p: &Participant,
    page: &str,
    lease: &Lease,
    sides: &[Side],
) -> Result<(), StoreError> {
    for side in sides {
        if app.store.session(&side.session).await?.is_none() {
            let created = app
                .store
                .create_session(NewSession {
                    id: side.session.clone(),
                    study_id: study.study.id.clone(),
                    study_version: study.study.version.clone(),
                    seed: seed_of(&side.session),
                    created_at_ms: now_ms(),
                })
                .await;
            match created {
                Ok(_) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let opponent = sides
            .iter()
            .find(|o| o.session != side.session)
            .map(|o| o.session.clone());
        let start = NewEvent {
            actor: Actor::System,
            kind: EventKind::ChatStarted {
                participant: p.id.clone(),
                page: page.to_string(),
                item: lease.item_id.clone(),
                lease: lease.id.clone(),
                system: side.system.clone(),
                side: (side.name != "chat").then(|| side.name.to_string()),
                opponent,
            },
            at_ms: now_ms(),
        };
        let mut events = vec![start];
        // A simulated user's conversation says so as a WoZ session does: its user's seat is
        // taken by a bot named `simulated:NAME`, which the reports and payments leave out.
        if let Some(name) = p.simulated_user() {
            events.push(NewEvent {
                actor: Actor::Bot {
                    role: Role::User,
                    name: format!("{}{name}", wozkit_core::simulated_users::ACTOR_PREFIX),
                },
                kind: EventKind::Joined {
                    role: Role::User,
                    bot: true,
                },
                at_ms: now_ms(),
            });
        }
        app.store
            .append_once(&side.session, "chat-start", events)
            .await?;
    }
    Ok(())
}

/// One message of a conversation as shown.
#[derive(Clone, Debug, PartialEq)]
pub struct Said {
    /// The message's index among the session's messages (what `TurnAnnotated.turn` names).
    pub index: u32,
    pub by_system: bool,
    pub text: String,
    /// Labels given to a reply: checkbox labels, scale point, feedback.
    pub labels: Vec<String>,
    pub score: Option<u32>,
    pub feedback: Option<String>,
}

/// Where one side's conversation stands, read from its events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Convo {
    pub said: Vec<Said>,
    /// The participant's turns so far.
    pub turns: u32,
    /// The last turn has neither a reply nor a failure yet.
    pub pending: bool,
    /// The last turn failed: what went wrong.
    pub failed: Option<String>,
    /// Some turn of this conversation failed (even if sent again with success).
    pub ever_failed: bool,
    pub ended: Option<EndReason>,
    pub first_turn_at_ms: Option<u64>,
}

impl Convo {
    pub fn of(events: &[Event]) -> Convo {
        let mut c = Convo::default();
        for e in events {
            match &e.kind {
                EventKind::Message { role, text, .. } => {
                    let by_system = *role == Role::Wizard;
                    c.said.push(Said {
                        index: c.said.len() as u32,
                        by_system,
                        text: text.clone(),
                        labels: vec![],
                        score: None,
                        feedback: None,
                    });
                    if by_system {
                        c.pending = false;
                        c.failed = None;
                    } else {
                        c.turns += 1;
                        c.pending = true;
                        c.failed = None;
                        c.first_turn_at_ms.get_or_insert(e.at_ms);
                    }
                }
                EventKind::SystemFailed { error, .. } => {
                    c.pending = false;
                    c.failed = Some(error.clone());
                    c.ever_failed = true;
                }
                EventKind::TurnAnnotated {
                    turn,
                    labels,
                    score,
                    feedback,
                } => {
                    if let Some(s) = c.said.get_mut(*turn as usize) {
                        s.labels = labels.clone();
                        s.score = *score;
                        s.feedback = feedback.clone();
                    }
                }
                EventKind::SessionEnded { reason, .. } => c.ended = Some(*reason),
                _ => {}
            }
        }
        c
    }

    /// The history as the system sees it: the participant's turns and its own replies.
    pub fn history(&self) -> Vec<Turn> {
        self.said
            .iter()
            .map(|s| {
                if s.by_system {
                    Turn::assistant(s.text.clone())
                } else {
                    Turn::user(s.text.clone())
                }
            })
            .collect()
    }

    /// The latest system reply, if it is the last message.
    pub fn last_reply(&self) -> Option<&Said> {
        self.said.last().filter(|s| s.by_system)
    }
}

/// Reads a side's conversation.
pub async fn convo(app: &AppState, side: &Side) -> Result<Convo, StoreError> {
    Ok(Convo::of(&app.store.events(&side.session, 0).await?))
}

/// What a participant's browser is told while replies come in (one JSON object per line).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    /// A piece of a reply as it arrives.
    Delta { side: &'static str, text: String },
    /// The whole reply, stored.
    Reply { side: &'static str, text: String },
    /// The system gave no reply; the participant may send the turn again.
    Failed { side: &'static str, message: String },
    /// The last frame of a turn: the page as `GET /p` now shows it (the replies stored, the
    /// labels, the end button or the questions), so the browser need not load it again.
    Page { html: String },
}

/// What the participant is told when a system failed: plain words, no internals.
pub fn failure_text(e: &SystemError) -> String {
    match e {
        SystemError::Timeout { .. } => "The assistant took too long to answer.".into(),
        SystemError::CircuitOpen { .. } | SystemError::QueueFull { .. } => {
            "The assistant is busy right now.".into()
        }
        _ => "The assistant could not answer.".into(),
    }
}

/// Asks the side's system for its reply to the conversation so far, in a task of its own, and
/// stores the reply (or the failure). Frames go to `frames` while someone listens. Does
/// nothing when a reply is already being asked for in this session. Returns the task.
pub fn ask(
    app: &AppState,
    study: &str,
    side: &Side,
    frames: Option<mpsc::Sender<Frame>>,
    turn: Option<NewTurn>,
) -> Option<tokio::task::JoinHandle<()>> {
    if !app.systems.start(&side.session) {
        return None;
    }
    let app = app.clone();
    let study = study.to_string();
    let side = side.clone();
    Some(tokio::spawn(async move {
        let mut stored = turn.as_ref().map(|t| t.stored.clone());
        let history = turn.map(|t| t.history);
        let outcome = reply(&app, &study, &side, frames.clone(), history, stored.clone()).await;
        // The participant's turn is stored before its reply is (or, if it was not, no reply is).
        if let Some(rx) = stored.as_mut()
            && !turn_stored(rx).await
        {
            app.systems.finish(&side.session);
            return;
        }
        let (kind, frame) = match outcome {
            Ok(text) => (
                EventKind::Message {
                    role: Role::Wizard,
                    text: text.clone(),
                    source: MessageSource::Free,
                },
                Frame::Reply {
                    side: side.name,
                    text,
                },
            ),
            Err(e) => {
                app.metrics.system_failed(&side.system, &e);
                tracing::warn!(session = side.session, system = side.system, "{e}");
                (
                    EventKind::SystemFailed {
                        system: side.system.clone(),
                        error: e.to_string(),
                    },
                    Frame::Failed {
                        side: side.name,
                        message: failure_text(&e),
                    },
                )
            }
        };
        let event = NewEvent {
            actor: Actor::Bot {
                role: Role::Wizard,
                name: side.system.clone(),
            },
            kind,
            at_ms: now_ms(),
        };
        if let Err(e) = app.store.append(&side.session, vec![event]).await {
            tracing::error!(session = side.session, "reply not stored: {e}");
        } else if let Some(tx) = frames {
            let _ = tx.send(frame).await;
        }
        app.systems.finish(&side.session);
    }))
}

/// A participant's turn whose reply is asked for while the turn itself is being stored: the
/// history the system is sent (ending with the turn), and whether the turn was stored (`None`
/// until known). Saves the wait for the turn's write before the system is asked; the reply is
/// shown and stored only once the turn is.
pub struct NewTurn {
    pub history: Vec<Turn>,
    pub stored: watch::Receiver<Option<bool>>,
}

/// Waits until the turn is known to be stored (`true`) or not (`false`, also when nobody will
/// say any more).
async fn turn_stored(rx: &mut watch::Receiver<Option<bool>>) -> bool {
    match rx.wait_for(Option::is_some).await {
        Ok(v) => v.unwrap_or(false),
        Err(_) => false,
    }
}

async fn reply(
    app: &AppState,
    study: &str,
    side: &Side,
    frames: Option<mpsc::Sender<Frame>>,
    history: Option<Vec<Turn>>,
    stored: Option<watch::Receiver<Option<bool>>>,
) -> Result<String, SystemError> {
    let lost = |detail: String| SystemError::BadResponse {
        system: side.system.clone(),
        detail,
    };
    let client = app
        .systems
        .client(study, &side.system)
        .ok_or_else(|| lost("the system is not declared by the study".into()))?;
    let history = match history {
        Some(h) => h,
        None => convo(app, side)
            .await
            .map_err(|e| lost(format!("the conversation could not be read: {e}")))?
            .history(),
    };
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let name = side.name;
    let forward = tokio::spawn(async move {
        // Nothing of the reply is shown before the turn it answers is stored.
        let shown = match stored {
            Some(mut s) => turn_stored(&mut s).await,
            None => true,
        };
        while let Some(text) = rx.recv().await {
            if !shown {
                continue;
            }
            if let Some(f) = &frames {
                let _ = f.send(Frame::Delta { side: name, text }).await;
            }
        }
    });
    let asked = std::time::Instant::now();
    let result = client.reply_stream(&side.session, &history, tx).await;
    app.metrics.system_replied(&side.system, asked.elapsed());
    let _ = forward.await;
    let reply = result?;
    if reply.text.trim().is_empty() {
        return Err(lost("the reply was empty".into()));
    }
    Ok(reply.text)
}
