//! `wozkit simulate-users` on a chat or arena study: simulated users go through the study's
//! pages as people do. The command serves the study on a loopback port of its own, and each
//! simulated participant opens a lab link (`test=1&simulated=NAME`, which only this server
//! takes), reads the consent and instruction pages, and on each chat page talks with the
//! study's systems: the simulated user is asked for every message with the page's own words
//! (its title and text) as the goal and the conversation so far, and ends the conversation
//! with its stop rule once the page allows. An arena's vote is the model's too: it is asked
//! with the study's vote prompt (`vote_prompt`) over both sides' conversations, and its reply's
//! first word is the vote, the rest the reason written with it. Each question after the
//! conversation is the model's too (its `answer_prompt`, read by the question's kind and checked
//! by its rules), a matrix's statements one `STATEMENT: POINT` line each, a ranking's options
//! best first (`wozkit_core::simulated_users::read_answer`).
//!
//! The conversations are ordinary sessions, marked simulated (a `simulated:NAME` bot in the
//! user's seat), their participants test participants: left out of payments and of human-only
//! reports unless asked.

use std::sync::Arc;

use anyhow::{Context, Result};
use wozkit_core::event::{self, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::questions::Question;
use wozkit_core::simulated_users::{is_simulated, read_answer, read_vote};
use wozkit_loadgen::crowd::{
    Answer, AnswerTurn, CrowdConfig, Entry, Speaker, SpeakerTurn, Spoken, VoteTurn, Voted,
};
use wozkit_server::{Config, ModelUser, Tunables, launch_with_listener, now_ms};
use wozkit_store::{SessionFilter, Store};

use crate::data_cmds::{Access, open_store};
use crate::simulate_users_cmd::{CHAT_SYSTEMS, SimulateUsersArgs, Summary};

/// The simulated user, asked through its endpoint for each message on a chat page, and for
/// the vote and the answers after it.
struct ModelSpeaker {
    user: Arc<ModelUser>,
    /// The questions after a conversation (the study's `evaluation.questions`).
    questions: Vec<Question>,
}

/// A conversation as the prompts show it: the participant's messages as the user's, the
/// system's replies as the assistant's.
fn dialogue(said: &[(bool, String)]) -> Vec<(Role, String)> {
    said.iter()
        .map(|(by_system, text)| {
            let role = if *by_system { Role::Wizard } else { Role::User };
            (role, text.clone())
        })
        .collect()
}

impl ModelSpeaker {
    /// The model's reply to `prompt`.
    async fn ask(&self, prompt: &str) -> Result<String, String> {
        let reply = self.user.endpoint.ask(prompt).await;
        reply.map(|r| r.text).map_err(|e| e.to_string())
    }
}

impl Speaker for ModelSpeaker {
    fn next<'a>(&'a self, turn: SpeakerTurn<'a>) -> Answer<'a, Spoken> {
        Box::pin(async move {
            let spec = &self.user.spec;
            if turn.turn > spec.max_turns {
                return Ok(Spoken {
                    text: None,
                    finish: true,
                });
            }
            let prompt = spec.prompt(turn.instructions, &dialogue(turn.said), turn.turn);
            let reply = self.ask(&prompt).await?;
            let next = spec
                .read_reply(&reply, turn.turn)
                .map_err(|e| format!("simulated user `{}`: {e}", spec.name))?;
            Ok(Spoken {
                text: next.text,
                finish: next.finish,
            })
        })
    }

    fn vote<'a>(&'a self, turn: VoteTurn<'a>) -> Answer<'a, Option<Voted>> {
        Box::pin(async move {
            let spec = &self.user.spec;
            let prompt = spec.vote_prompt(
                turn.instructions,
                &dialogue(turn.left),
                &dialogue(turn.right),
            );
            let reply = self.ask(&prompt).await?;
            let vote = read_vote(&reply)
                .map_err(|e| format!("simulated user `{}`: vote: {e}", spec.name))?;
            Ok(Some(Voted {
                vote: vote.vote,
                reason: vote.reason,
            }))
        })
    }

    fn answer<'a>(&'a self, turn: AnswerTurn<'a>) -> Answer<'a, Option<Vec<(String, String)>>> {
        Box::pin(async move {
            let spec = &self.user.spec;
            // A matrix posts a field per statement (`id.row`), a ranking one per option
            // (`id.i`): any of them asks for the whole question.
            let Some(q) = self
                .questions
                .iter()
                .find(|q| q.id == turn.field)
                .or_else(|| {
                    self.questions.iter().find(|q| {
                        turn.field
                            .strip_prefix(q.id.as_str())
                            .is_some_and(|rest| rest.starts_with('.'))
                    })
                })
            else {
                return Ok(None);
            };
            let prompt = spec.answer_prompt(turn.instructions, &dialogue(turn.said), q);
            let reply = self.ask(&prompt).await?;
            let fields = read_answer(q, &reply)
                .map_err(|e| format!("simulated user `{}`: {e}", spec.name))?;
            Ok(Some(fields))
        })
    }
}

/// Plays `args.dialogues` simulated participants of the chat study `study` (at most
/// `args.concurrency` at once) and summarizes their conversations.
pub async fn run(
    args: &SimulateUsersArgs,
    study: LoadedStudy,
    user: Arc<ModelUser>,
) -> Result<Summary> {
    let id = study.study.id.clone();
    let questions = study
        .study
        .evaluation
        .as_ref()
        .map(|e| e.questions.clone())
        .unwrap_or_default();
    let store = open_store(&args.data, Access::Write).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on a loopback port")?;
    let addr = listener.local_addr()?;
    let config = Config {
        studies: vec![study],
        tunables: Tunables {
            simulated_joins: true,
            join_per_minute: 0,
            ..Tunables::default()
        },
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(launch_with_listener(config, store, listener, async move {
        let _ = stopped.await;
    }));
    let started_ms = now_ms();
    let mut crowd = CrowdConfig::new(format!("http://{addr}"), &id, args.dialogues as usize);
    crowd.concurrency = args.concurrency as usize;
    crowd.seed = args.seed;
    crowd.worker_prefix = format!("simulated-{}-{started_ms:x}", user.spec.name);
    crowd.vote_noise = 0.0;
    crowd.entry = Entry::Simulated(user.spec.name.clone());
    crowd.speaker = Some(Arc::new(ModelSpeaker {
        user: user.clone(),
        questions,
    }));
    let report = wozkit_loadgen::crowd::run(crowd).await;
    let _ = stop.send(());
    server
        .await
        .context("the server stopped unexpectedly")?
        .context("the server could not run")?;
    let report = report.context("cannot run the simulated participants")?;
    // The server closed its store: the sessions are read back from a fresh one.
    let store = open_store(&args.data, Access::Snapshot).await?;
    let summary = summarize(store.as_ref(), args, &id, &user, started_ms, &report).await;
    store.close().await;
    summary
}

/// The run's conversations: the study's sessions created since it started whose user's seat is
/// this simulated user, and the participants that `report` says did not finish or found no
/// item.
async fn summarize(
    store: &dyn Store,
    args: &SimulateUsersArgs,
    study: &str,
    user: &ModelUser,
    started_ms: u64,
    report: &wozkit_loadgen::crowd::CrowdReport,
) -> Result<Summary> {
    let mut s = Summary {
        study: study.to_string(),
        user: user.spec.name.clone(),
        wizard: CHAT_SYSTEMS.to_string(),
        dialogues: args.dialogues,
        ended: Default::default(),
        failed: report.failures.clone(),
        user_messages: 0,
        wizard_messages: 0,
        goals: None,
        sessions: vec![],
        without_item: Some(report.no_items),
    };
    let filter = SessionFilter {
        study_id: Some(study.to_string()),
        ..SessionFilter::default()
    };
    let actor = user.spec.actor_name();
    for record in store.list_sessions(&filter).await? {
        if record.created_at_ms < started_ms {
            continue;
        }
        let events = store.events(&record.id, 0).await?;
        let ours = is_simulated(&events)
            && events.iter().any(|e| {
                matches!(&e.actor, wozkit_core::event::Actor::Bot { name, .. } if *name == actor)
            });
        if !ours {
            continue;
        }
        match &record.ended {
            Some(end) => *s.ended.entry(end.reason.as_str().to_string()).or_default() += 1,
            None => s.failed.push(format!("{} did not end", record.id)),
        }
        for (role, _) in event::messages(&events) {
            match role {
                Role::User => s.user_messages += 1,
                Role::Wizard => s.wizard_messages += 1,
            }
        }
        s.sessions.push(record.id);
    }
    Ok(s)
}
