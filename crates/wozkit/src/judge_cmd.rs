//! `wozkit judge`: asks a study's model judges about every item and stores each answer as a
//! [`ModelJudged`](EventKind::ModelJudged) event in the judge's own log (`judge-<study>-<name>`),
//! apart from every person's: never counted towards an item's N, never paid.
//!
//! The items are those the server registers ([`Evaluation::items`], after reading
//! `from_store` dialogues), ordinary ones only (no onboarding, no gold). A run is resumable: an
//! (item, question, side order) already answered in the log is skipped, a failure is asked again.
//! It stops asking once the token budget is spent, and says so.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use tokio::task::JoinSet;
use wozkit_core::evaluation::{Dialogue, Evaluation};
use wozkit_core::event::{Actor, EventKind, ItemPool, ModelJudgment};
use wozkit_core::judges::{Asked, ModelJudge, ask, parse_reply};
use wozkit_core::systems::SystemSpec;
use wozkit_store::{NewEvent, NewSession, Store};
use wozkit_systems::judge::JudgeEndpoint;

use crate::data_cmds::{Access, with_store};

#[derive(Args)]
pub struct JudgeArgs {
    /// A study file, a folder with study.yaml, or a built-in study's name.
    study: String,
    /// The data directory (or store location) holding the study's data.
    #[arg(long)]
    data: String,
    /// NAME=URL[#MODEL]: the endpoint of judge NAME (replacing the study's); repeatable.
    /// Without any, every judge of the study with an endpoint is asked.
    #[arg(long = "judge", value_name = "NAME=URL[#MODEL]")]
    judges: Vec<String>,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Stop asking once this many tokens (prompt and reply, as the endpoints report) are used.
    #[arg(long, value_name = "T")]
    max_tokens_total: Option<u64>,
}

/// A judge with its endpoint resolved.
struct Resolved {
    judge: ModelJudge,
    url: String,
    model: String,
    api_key: Option<String>,
}

pub fn judge(args: JudgeArgs) -> Result<ExitCode> {
    let mut study = crate::study_cmds::load(&args.study)?;
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    with_store(&args.data, Access::Write, async |store: &dyn Store| {
        wozkit_server::load_stored_dialogues(store, &mut study)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        let ev = study
            .study
            .evaluation
            .as_ref()
            .ok_or_else(|| anyhow!("study `{}` has no `evaluation`", study.study.id))?;
        let judges = resolve(&study.study.systems, ev, &args.judges)?;
        let budget = Budget {
            used: AtomicU64::new(0),
            max: args.max_tokens_total,
        };
        let mut failed = 0;
        for judge in &judges {
            failed +=
                run_judge(store, &study.study.id, ev, judge, args.concurrency, &budget).await?;
            if budget.spent() {
                break;
            }
        }
        let used = budget.used.load(Ordering::Relaxed);
        if budget.spent() {
            eprintln!(
                "stopped: the token budget ({} tokens) is spent ({used} used); run again with a \
                 larger --max-tokens-total to judge the rest",
                budget.max.unwrap_or_default()
            );
            return Ok(ExitCode::from(2));
        }
        eprintln!("done: {used} tokens used, {failed} answers failed (asked again next run)");
        Ok(if failed > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// The judges to ask, with endpoints from the study or `--judge`.
fn resolve(
    systems: &indexmap::IndexMap<String, SystemSpec>,
    ev: &Evaluation,
    flags: &[String],
) -> Result<Vec<Resolved>> {
    let mut given = Vec::new();
    for flag in flags {
        let (name, rest) = flag
            .split_once('=')
            .ok_or_else(|| anyhow!("--judge {flag}: write NAME=URL[#MODEL]"))?;
        let (url, model) = match rest.split_once('#') {
            Some((u, m)) => (u.to_string(), Some(m.to_string())),
            None => (rest.to_string(), None),
        };
        given.push((name.to_string(), url, model));
    }
    let mut out = Vec::new();
    for judge in &ev.judges {
        let flag = given.iter().find(|(n, _, _)| *n == judge.name);
        let (url, model, api_key) = if let Some((_, url, model)) = flag {
            let model = model
                .clone()
                .or_else(|| judge.model.clone())
                .unwrap_or_else(|| "default".into());
            (url.clone(), model, None)
        } else if let Some(name) = &judge.system {
            let Some(SystemSpec::Openai(spec)) = systems.get(name) else {
                bail!(
                    "judge `{}`: system `{name}` is not an openai system",
                    judge.name
                );
            };
            let key = match &spec.api_key_env {
                Some(var) => Some(std::env::var(var).with_context(|| {
                    format!(
                        "judge `{}`: environment variable `{var}` is not set",
                        judge.name
                    )
                })?),
                None => None,
            };
            (spec.base_url.clone(), spec.model.clone(), key)
        } else if let (Some(url), Some(model)) = (&judge.url, &judge.model) {
            (url.clone(), model.clone(), None)
        } else if flags.is_empty() {
            bail!(
                "judge `{}` has no endpoint: give --judge {}=URL#MODEL",
                judge.name,
                judge.name
            );
        } else {
            continue;
        };
        out.push(Resolved {
            judge: judge.clone(),
            url,
            model,
            api_key,
        });
    }
    for (name, _, _) in &given {
        if !ev.judges.iter().any(|j| &j.name == name) {
            bail!("--judge {name}: the study declares no judge `{name}` under `evaluation.judges`");
        }
    }
    if out.is_empty() {
        bail!("the study declares no model judge (`evaluation.judges`)");
    }
    Ok(out)
}

struct Budget {
    used: AtomicU64,
    max: Option<u64>,
}

impl Budget {
    fn spent(&self) -> bool {
        self.max
            .is_some_and(|m| self.used.load(Ordering::Relaxed) >= m)
    }
}

/// One question to ask about one item.
struct Task {
    item: String,
    question: String,
    shown: Vec<Dialogue>,
    swapped: bool,
}

/// Asks one judge everything not answered yet; returns the number of failed answers.
async fn run_judge(
    store: &dyn Store,
    study: &str,
    ev: &Evaluation,
    r: &Resolved,
    concurrency: usize,
    budget: &Budget,
) -> Result<u32> {
    let log = format!("judge-{study}-{}", r.judge.name);
    let done = open_log(store, study, r, &log).await?;
    let tasks = tasks(ev, r, &done);
    eprintln!(
        "judge `{}`: {} to ask, {} answered before",
        r.judge.name,
        tasks.len(),
        done.len()
    );
    let endpoint = Arc::new(JudgeEndpoint::new(
        &r.judge.name,
        &r.url,
        &r.model,
        r.api_key.clone(),
    )?);
    let mut running: JoinSet<(Task, ModelJudgment)> = JoinSet::new();
    let mut failed = 0;
    let mut pending = tasks.into_iter();
    loop {
        // Start calls while permits and budget allow; store answers as they arrive.
        while running.len() < concurrency && !budget.spent() {
            let Some(task) = pending.next() else { break };
            let shown: Vec<&Dialogue> = task.shown.iter().collect();
            let Some(asked) = ask(ev, &r.judge, &task.question, &shown) else {
                continue;
            };
            running.spawn(answer(endpoint.clone(), r.judge.name.clone(), task, asked));
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (_, j) = joined.context("a judge call panicked")?;
        budget.used.fetch_add(j.tokens, Ordering::Relaxed);
        failed += u32::from(j.answer.is_none());
        append(store, &log, EventKind::ModelJudged(Box::new(j))).await?;
    }
    Ok(failed)
}

/// Opens the judge's log `log` (starting it when it is new), and returns what it holds
/// answers to: (item, question, swapped).
async fn open_log(
    store: &dyn Store,
    study: &str,
    r: &Resolved,
    log: &str,
) -> Result<HashSet<(String, String, bool)>> {
    let now = wozkit_server::now_ms();
    store
        .open_participant_log(NewSession {
            id: log.to_string(),
            study_id: study.to_string(),
            study_version: String::new(),
            seed: 0,
            created_at_ms: now,
        })
        .await?;
    let events = store.events(log, 0).await?;
    if events.is_empty() {
        append(
            store,
            log,
            EventKind::JudgeLogStarted {
                judge: r.judge.name.clone(),
                study: study.to_string(),
                model: r.model.clone(),
                url: r.url.clone(),
            },
        )
        .await?;
    }
    Ok(events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelJudged(j) if j.answer.is_some() => {
                Some((j.item.clone(), j.question.clone(), j.swapped))
            }
            _ => None,
        })
        .collect())
}

/// The questions still to ask the judge: each of its questions about each item whose
/// dialogues are all known, both ways round when it swaps a pair, less those in `done`.
fn tasks(ev: &Evaluation, r: &Resolved, done: &HashSet<(String, String, bool)>) -> Vec<Task> {
    let dialogue = |id: &str| ev.dialogues.iter().find(|d| d.id == id).cloned();
    let mut tasks = Vec::new();
    for item in ev.items().into_iter().filter(|i| i.pool == ItemPool::Item) {
        let Some(shown) = item
            .dialogues
            .iter()
            .map(|d| dialogue(d))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let orders: &[bool] = if r.judge.swap && shown.len() == 2 {
            &[false, true]
        } else {
            &[false]
        };
        for question in &r.judge.questions {
            for &swapped in orders {
                if done.contains(&(item.id.clone(), question.clone(), swapped)) {
                    continue;
                }
                let mut shown = shown.clone();
                if swapped {
                    shown.reverse();
                }
                tasks.push(Task {
                    item: item.id.clone(),
                    question: question.clone(),
                    shown,
                    swapped,
                });
            }
        }
    }
    tasks
}

/// Asks the endpoint one task's prompt: the judgment, with the answer the reply names or why
/// there is none.
async fn answer(
    endpoint: Arc<JudgeEndpoint>,
    judge: String,
    task: Task,
    asked: Asked,
) -> (Task, ModelJudgment) {
    let mut j = ModelJudgment {
        judge,
        item: task.item.clone(),
        question: task.question.clone(),
        dialogues: task.shown.iter().map(|d| d.id.clone()).collect(),
        systems: task.shown.iter().map(|d| d.system.clone()).collect(),
        swapped: task.swapped,
        answer: None,
        reply: String::new(),
        failure: None,
        tokens: 0,
    };
    match endpoint.ask(&asked.prompt).await {
        Ok(reply) => {
            j.tokens = reply.tokens;
            match parse_reply(&reply.text, &asked.options) {
                Some(i) => j.answer = Some(asked.values[i].clone()),
                None => {
                    j.failure = Some(format!(
                        "the reply names none of {}",
                        asked.options.join(", ")
                    ))
                }
            }
            j.reply = reply.text;
        }
        Err(e) => j.failure = Some(e.to_string()),
    }
    (task, j)
}

async fn append(store: &dyn Store, log: &str, kind: EventKind) -> Result<()> {
    store
        .append(
            log,
            vec![NewEvent {
                actor: Actor::System,
                kind,
                at_ms: wozkit_server::now_ms(),
            }],
        )
        .await?;
    Ok(())
}
