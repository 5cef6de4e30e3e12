//! `wozkit simulate-users`: dry runs of a WoZ study with a simulated user (a language model
//! behind an OpenAI-compatible endpoint) in the user's seat and, in the wizard's, the built-in
//! wizard bot or a system under test (`--system`: end-to-end evaluation against the sessions'
//! goals), each an ordinary session of the store played in an ordinary room
//! ([`wozkit_server::simulate`]); and the resolution of `NAME=URL[#MODEL]` simulated users that
//! `serve --simulated-user` shares.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use wozkit_core::event::{EndReason, Role};
use wozkit_core::goal_score;
use wozkit_core::load::LoadedStudy;
use wozkit_core::simulated_users::SimulatedUser;
use wozkit_core::systems::SystemSpec;
use wozkit_server::simulate::{self, Played, Request};
use wozkit_server::{Config, ModelUser, SystemWizard, Tunables};
use wozkit_store::Store;
use wozkit_systems::client::Client;
use wozkit_systems::judge::JudgeEndpoint;

use crate::data_cmds::{Access, open_store};

#[derive(Args)]
pub struct SimulateUsersArgs {
    /// A study file, a folder with study.yaml, or a built-in study's name (a WoZ study, or an
    /// evaluation study with chat or arena pages).
    pub(crate) study: String,
    /// The simulated user: NAME=URL[#MODEL] (an OpenAI-compatible endpoint; the study's
    /// `simulated_users` entry of that name gives its prompt and stop rule), or the NAME of one
    /// the study declares with its endpoint.
    #[arg(long, value_name = "NAME=URL[#MODEL]")]
    pub(crate) user: String,
    /// A system under test in the wizard's seat: NAME=URL[#MODEL] (an OpenAI-compatible
    /// endpoint), or the NAME of a system the study declares. It opens the dialogue and answers
    /// each user message in free text. Without it the wizard is the built-in wizard bot (the
    /// study's scripted wizard, options weighted by their hint priors).
    #[arg(long, value_name = "NAME=URL[#MODEL]")]
    system: Option<String>,
    /// How many dialogues to play.
    #[arg(long, default_value_t = 10)]
    pub(crate) dialogues: u32,
    /// Dialogues played at the same time.
    #[arg(long, default_value_t = 4)]
    pub(crate) concurrency: u32,
    /// Dialogue i's session is seeded with SEED + i.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Data directory (SQLite, created if missing), sqlite:FILE, or postgres://…; the sessions
    /// are stored there as any other.
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    pub(crate) data: String,
    /// Milliseconds the wizard bot waits before each move, as MIN-MAX (a person's pace is
    /// 2500-5000). After speaking it keeps quiet for three times MAX unless the user answers,
    /// so MAX should stay above the simulated user's answer time.
    #[arg(long, default_value = "1000-2000", value_parser = parse_pace)]
    pace_ms: (u64, u64),
    /// Print the summary as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_pace(s: &str) -> std::result::Result<(u64, u64), String> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let n = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{s}`: write MIN-MAX in milliseconds, e.g. 0-50"))
    };
    let (a, b) = (n(a)?, n(b)?);
    if b < a {
        return Err(format!("`{s}`: MAX is below MIN"));
    }
    Ok((a, b))
}

/// The simulated user named by `arg` (`NAME=URL[#MODEL]`, or the name of one `study` declares
/// with an endpoint), with its prompt and stop rule from `study` when it declares that name;
/// `flag` is the option that gave it, for the errors.
pub fn resolve_user(flag: &str, arg: &str, study: &LoadedStudy) -> Result<Arc<ModelUser>> {
    let (name, given) = match arg.split_once('=') {
        Some(_) => {
            let (name, spec) =
                crate::serve_cmd::parse_system(arg).map_err(|e| anyhow!("simulated user {e}"))?;
            (name, Some(spec))
        }
        None => (arg.trim().to_string(), None),
    };
    let declared = study.study.simulated_users.iter().find(|u| u.name == name);
    let spec = declared
        .cloned()
        .unwrap_or_else(|| SimulatedUser::named(&name));
    let (url, model, api_key) = match given {
        Some(SystemSpec::Openai(o)) => (o.base_url, o.model, None),
        Some(_) => bail!("simulated user `{name}`: give an OpenAI-compatible endpoint"),
        None => declared_endpoint(study, &spec)
            .with_context(|| format!("simulated user `{name}`: write {flag} {name}=URL[#MODEL]"))?,
    };
    let endpoint = JudgeEndpoint::new(&spec.actor_name(), &url, &model, api_key)
        .map_err(|e| anyhow!("simulated user `{name}`: {e}"))?;
    Ok(Arc::new(ModelUser { spec, endpoint }))
}

/// The endpoint a declared simulated user names: a system of the study, or its URL and model.
fn declared_endpoint(
    study: &LoadedStudy,
    spec: &SimulatedUser,
) -> Result<(String, String, Option<String>)> {
    if !study
        .study
        .simulated_users
        .iter()
        .any(|u| u.name == spec.name)
    {
        let known: Vec<&str> = study
            .study
            .simulated_users
            .iter()
            .map(|u| u.name.as_str())
            .collect();
        bail!(
            "the study declares no simulated user of that name (it declares: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    }
    if let Some(system) = &spec.system {
        let Some(SystemSpec::Openai(o)) = study.study.systems.get(system) else {
            bail!("system `{system}` is not an openai system of the study");
        };
        let key = match &o.api_key_env {
            Some(var) => Some(
                std::env::var(var)
                    .with_context(|| format!("environment variable `{var}` is not set"))?,
            ),
            None => None,
        };
        return Ok((o.base_url.clone(), o.model.clone(), key));
    }
    match (&spec.url, &spec.model) {
        (Some(url), Some(model)) => Ok((url.clone(), model.clone(), None)),
        _ => bail!("it has no endpoint in the study"),
    }
}

/// Whether `study` has `chat` or `arena` pages (its simulated users talk to its systems
/// through the pages).
fn chat_study(study: &LoadedStudy) -> bool {
    use wozkit_core::evaluation::EvalTask;
    study
        .study
        .evaluation
        .as_ref()
        .is_some_and(|e| matches!(e.task, EvalTask::Chat | EvalTask::Arena))
}

/// The summary's `wizard` for a chat study: its own systems answer.
pub(crate) const CHAT_SYSTEMS: &str = "study-systems";

/// The summary printed at the end.
#[derive(Debug)]
pub(crate) struct Summary {
    pub(crate) study: String,
    pub(crate) user: String,
    /// `builtin` (the built-in wizard bot) or `system:NAME`.
    pub(crate) wizard: String,
    pub(crate) dialogues: u32,
    /// Sessions that ended, by end reason.
    pub(crate) ended: std::collections::BTreeMap<String, u32>,
    /// Dialogues that did not end in time or could not be started.
    pub(crate) failed: Vec<String>,
    pub(crate) user_messages: u64,
    pub(crate) wizard_messages: u64,
    /// Goal scores over the sessions with a goal (none for a study without `goals:`).
    pub(crate) goals: Option<GoalSummary>,
    pub(crate) sessions: Vec<String>,
    /// On a chat study: simulated participants that found no conversation left to have (every
    /// item had its judgments).
    pub(crate) without_item: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct GoalSummary {
    scored: u32,
    successes: u32,
    success_rate: f64,
    /// Mean over sessions where it is defined.
    inform_f1: Option<f64>,
}

impl Summary {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "study": self.study,
            "user": self.user,
            "wizard": self.wizard,
            "dialogues": self.dialogues,
            "ended": self.ended,
            "failed": self.failed,
            "user_messages": self.user_messages,
            "wizard_messages": self.wizard_messages,
            "goals": self.goals.as_ref().map(|g| serde_json::json!({
                "scored": g.scored,
                "successes": g.successes,
                "success_rate": g.success_rate,
                "inform_f1": g.inform_f1,
            })),
            "sessions": self.sessions,
            "participants_without_item": self.without_item,
        })
    }
}

pub fn simulate_users(args: SimulateUsersArgs) -> Result<ExitCode> {
    if args.dialogues == 0 || args.concurrency == 0 {
        bail!("--dialogues and --concurrency must be at least 1");
    }
    // Warnings only (a simulated user that cannot answer, a store that fails): the rooms' info
    // lines would drown the summary.
    tracing_subscriber::fmt()
        .with_target(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_writer(std::io::stderr)
        .init();
    let study = crate::study_cmds::load(&args.study)?;
    let chat = chat_study(&study);
    if !study.study.has_room() && !chat {
        bail!(
            "study `{}` has neither a WoZ room nor a chat or arena page: simulate-users plays \
             a simulated user in one of those",
            study.study.id
        );
    }
    if chat && args.system.is_some() {
        bail!(
            "study `{}` is a chat study: its own systems answer the simulated user \
             (--system puts a system in a WoZ study's wizard seat)",
            study.study.id
        );
    }
    let user = resolve_user("--user", &args.user, &study)?;
    let wizard = match &args.system {
        Some(arg) => Some(resolve_system(arg, &study)?),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let summary = if chat {
        runtime.block_on(crate::simulate_chat::run(&args, study, user))?
    } else {
        runtime.block_on(run(&args, study, user, wizard))?
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary.to_json())?);
    } else {
        print_summary(&summary);
    }
    Ok(if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The system under test named by `--system` (`NAME=URL[#MODEL]`, or a system `study`
/// declares).
fn resolve_system(arg: &str, study: &LoadedStudy) -> Result<Arc<SystemWizard>> {
    let (name, spec) = if arg.contains('=') {
        crate::serve_cmd::parse_system(arg).map_err(|e| anyhow!("--system {e}"))?
    } else {
        let name = arg.trim();
        let Some(spec) = study.study.systems.get(name) else {
            let known: Vec<&str> = study.study.systems.keys().map(String::as_str).collect();
            bail!(
                "--system {name}: the study declares no system of that name (it declares: {}); \
                 write --system {name}=URL[#MODEL] for an OpenAI-compatible endpoint",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        };
        (name.to_string(), spec.clone())
    };
    let client = Client::new(&name, &spec).map_err(|e| anyhow!("--system {name}: {e}"))?;
    Ok(Arc::new(SystemWizard { name, client }))
}

async fn run(
    args: &SimulateUsersArgs,
    study: LoadedStudy,
    user: Arc<ModelUser>,
    wizard: Option<Arc<SystemWizard>>,
) -> Result<Summary> {
    if let Some(w) = &wizard {
        w.client
            .connect()
            .await
            .map_err(|e| anyhow!("--system {}: {e}", w.name))?;
    }
    let wizard_name = wizard
        .as_ref()
        .map_or_else(|| "builtin".to_string(), |w| w.actor_name());
    let store = open_store(&args.data, Access::Write).await?;
    let limit = u64::from(study.study.session.time_limit_s.max(1));
    let req = Request {
        study: study.study.id.clone(),
        user: user.clone(),
        wizard,
        dialogues: args.dialogues,
        concurrency: args.concurrency,
        seed: args.seed,
        timeout: Duration::from_secs(limit + 60),
    };
    let id = study.study.id.clone();
    let config = Config {
        studies: vec![study],
        tunables: Tunables {
            bot_pace_ms: args.pace_ms,
            ..Tunables::default()
        },
    };
    let played = simulate::run(config, store, req)
        .await
        .context("cannot run the dialogues")?;
    // The run closed its store: the sessions are read back from a fresh one.
    let store = open_store(&args.data, Access::Snapshot).await?;
    let summary = summarize(
        store.as_ref(),
        &id,
        (&user.spec.name, &wizard_name),
        args.dialogues,
        &played,
    )
    .await;
    store.close().await;
    summary
}

async fn summarize(
    store: &dyn Store,
    study: &str,
    (user, wizard): (&str, &str),
    dialogues: u32,
    played: &[Played],
) -> Result<Summary> {
    let mut s = Summary {
        study: study.to_string(),
        user: user.to_string(),
        wizard: wizard.to_string(),
        dialogues,
        ended: Default::default(),
        failed: vec![],
        user_messages: 0,
        wizard_messages: 0,
        goals: None,
        sessions: vec![],
        without_item: None,
    };
    let mut scores = Vec::new();
    for p in played {
        if let Some(e) = &p.error {
            s.failed
                .push(format!("{} {e}", p.session).trim().to_string());
        }
        if let Some(end) = p.end {
            *s.ended.entry(end_name(end).to_string()).or_default() += 1;
        }
        if p.session.is_empty() {
            continue;
        }
        s.sessions.push(p.session.clone());
        let events = store.events(&p.session, 0).await?;
        for (role, _) in wozkit_core::event::messages(&events) {
            match role {
                Role::User => s.user_messages += 1,
                Role::Wizard => s.wizard_messages += 1,
            }
        }
        scores.extend(goal_score::score(&events));
    }
    if !scores.is_empty() {
        let successes = scores.iter().filter(|g| g.success).count() as u32;
        let f1: Vec<f64> = scores.iter().filter_map(|g| g.inform_f1).collect();
        s.goals = Some(GoalSummary {
            scored: scores.len() as u32,
            successes,
            success_rate: f64::from(successes) / scores.len() as f64,
            inform_f1: (!f1.is_empty()).then(|| f1.iter().sum::<f64>() / f1.len() as f64),
        });
    }
    Ok(s)
}

fn end_name(e: EndReason) -> &'static str {
    e.as_str()
}

fn print_summary(s: &Summary) {
    let wizard = match s.wizard.strip_prefix("system:") {
        Some(name) => format!("system `{name}` in the wizard's seat"),
        None if s.wizard == CHAT_SYSTEMS => "the study's systems on its chat pages".to_string(),
        None => "the built-in wizard bot".to_string(),
    };
    println!(
        "{} dialogues of `{}`: simulated user `{}` against {wizard}",
        s.dialogues, s.study, s.user
    );
    let ended: Vec<String> = s.ended.iter().map(|(r, n)| format!("{r} {n}")).collect();
    println!(
        "  ended: {}",
        if ended.is_empty() {
            "none".to_string()
        } else {
            ended.join(", ")
        }
    );
    println!(
        "  messages: {} by the user, {} by the wizard",
        s.user_messages, s.wizard_messages
    );
    if let Some(g) = &s.goals {
        println!(
            "  goals: {} of {} met ({:.1} %), inform F1 {}",
            g.successes,
            g.scored,
            100.0 * g.success_rate,
            g.inform_f1.map_or("-".to_string(), |f| format!("{f:.3}"))
        );
    }
    if let Some(n) = s.without_item.filter(|n| *n > 0) {
        println!(
            "  {n} participants found no conversation left to have (every item had its \
             `judgments_per_item`)"
        );
    }
    for f in &s.failed {
        println!("  not finished: {f}");
    }
}
