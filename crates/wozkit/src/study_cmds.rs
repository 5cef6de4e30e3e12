//! Subcommands that work on a study alone: studies, validate, simulate, graph, schema.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use wozkit_core::evaluation::EvalTask;
use wozkit_core::event::ItemPool;
use wozkit_core::load::{self, LoadedStudy};
use wozkit_core::sim::{self, SimReport, WizardPolicy};

#[derive(Subcommand)]
pub enum StudiesCmd {
    /// Write a built-in study out as editable files (the way to start a new study).
    Export {
        /// Built-in study name.
        name: String,
        /// Folder to create.
        dir: PathBuf,
    },
}

#[derive(Args)]
pub struct SimulateArgs {
    /// A study file, a folder with study.yaml, or a built-in study's name.
    study: String,
    #[arg(long, default_value_t = 1000)]
    sessions: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How the simulated wizard picks options.
    #[arg(long, value_enum, default_value_t = Policy::Priors)]
    policy: Policy,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// A priors overlay (from `wozkit priors learn`) loaded on top of the study.
    #[arg(long, value_name = "FILE")]
    priors: Option<PathBuf>,
    /// Play the study with its priors and with this overlay's, and print both side by side:
    /// hint agreement with the simulated wizard, goal reached, turns (docs/priors.md).
    #[arg(long, value_name = "FILE")]
    compare_priors: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Policy {
    Priors,
    Uniform,
}

#[derive(Args)]
pub struct GraphArgs {
    study: String,
    #[arg(long, value_enum, default_value_t = GraphFormat::Svg)]
    format: GraphFormat,
    /// Write to a file instead of standard output.
    #[arg(long, short)]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum GraphFormat {
    Svg,
    Dot,
    Mermaid,
}

/// Loads a study or prints its problems.
pub fn load(arg: &str) -> Result<LoadedStudy> {
    load::resolve(arg).map_err(|d| anyhow::anyhow!("{d}"))
}

pub fn studies(action: Option<StudiesCmd>) -> Result<ExitCode> {
    match action {
        None => {
            for name in load::builtin_names() {
                let (kind, title) = match load::load_builtin(&name) {
                    Ok(s) => (kind(&s), s.study.title),
                    Err(_) => ("-", "(does not load)".into()),
                };
                println!("{name:<24} {kind:<11} {title}");
            }
        }
        Some(StudiesCmd::Export { name, dir }) => {
            let files = load::builtin_files(&name);
            if files.is_empty() {
                bail!("no built-in study named `{name}` (see `wozkit studies`)");
            }
            if dir.exists()
                && dir
                    .read_dir()
                    .map(|mut d| d.next().is_some())
                    .unwrap_or(true)
            {
                bail!(
                    "{} exists and is not empty; choose a new folder",
                    dir.display()
                );
            }
            let source = load::StudySource::Builtin(name.clone());
            for rel in &files {
                let bytes = source.read(rel).with_context(|| format!("reading {rel}"))?;
                let path = dir.join(rel);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("creating {}", parent.display()))?;
                }
                std::fs::write(&path, bytes)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            println!("wrote {} files to {}", files.len(), dir.display());
            println!(
                "edit {}/study.yaml, then: wozkit validate {}",
                dir.display(),
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn validate(arg: &str, priors: Option<&std::path::Path>) -> Result<ExitCode> {
    match load::resolve_with_priors(arg, priors) {
        Ok(s) => {
            for w in &s.compiled.warnings {
                eprintln!("warning: {w}");
            }
            println!("{}: valid ({})", s.study.id, summary(&s));
            Ok(ExitCode::SUCCESS)
        }
        Err(d) => {
            eprintln!("{d}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// What a study holds, in one line: its dialogue room, its evaluation, or both.
fn summary(s: &LoadedStudy) -> String {
    let mut parts = Vec::new();
    if s.study.has_room() {
        parts.push(format!(
            "{} states, {} actions, {} robots",
            s.study.states.len(),
            s.study.actions.len(),
            s.study.world.robots.len()
        ));
    }
    if let Some(e) = s.study.evaluation.as_ref().filter(|e| e.task.is_live()) {
        parts.push(format!(
            "evaluation: {} with {} system(s) ({}), {} {} each, {} to {} turns",
            if e.task == EvalTask::Arena {
                "arena"
            } else {
                "chat"
            },
            e.systems.len(),
            e.systems.join(", "),
            e.judgments_per_item,
            if e.task == EvalTask::Arena {
                "counted battles per pair"
            } else {
                "finished conversations per system"
            },
            e.conversation.min_turns,
            e.conversation.max_turns,
        ));
    } else if let Some(e) = &s.study.evaluation {
        let items = e.items();
        let gold = items.iter().filter(|i| i.pool == ItemPool::Gold).count();
        parts.push(format!(
            "evaluation: {} {} items judged {} times each, {} gold",
            items.len() - gold,
            match e.task {
                EvalTask::Rate => "rating",
                EvalTask::Compare | EvalTask::Chat | EvalTask::Arena => "comparison",
                EvalTask::SelfDialog => "self-dialog scenario",
                EvalTask::Spans => "span annotation",
                EvalTask::TurnActs => "turn act annotation",
            },
            e.judgments_per_item,
            gold
        ));
        let selections = e.store_selections().len();
        if selections > 0 {
            parts.push(format!(
                "plus the dialogues of {selections} store selection(s), read by `serve`"
            ));
        }
    }
    if parts.is_empty() {
        parts.push(format!("{} pages", s.study.flow.user.len()));
    }
    parts.join("; ")
}

/// The study's kind as `wozkit studies` lists it.
fn kind(s: &LoadedStudy) -> &'static str {
    if s.study.has_room() {
        "dialogue"
    } else if s.study.evaluation.is_some() {
        "evaluation"
    } else {
        "survey"
    }
}

pub fn simulate(args: SimulateArgs) -> Result<ExitCode> {
    let study = load::resolve_with_priors(&args.study, args.priors.as_deref())
        .map_err(|d| anyhow::anyhow!("{d}"))?;
    if !study.study.has_room() {
        eprintln!(
            "{}: no dialogue room, so no dialogue states to simulate ({}); \
             exercise it against a running server with `wozkit crowd`",
            study.study.id,
            summary(&study)
        );
        return Ok(ExitCode::from(2));
    }
    if let Some(file) = &args.compare_priors {
        return crate::priors_cmd::compare(&study, file, args.sessions, args.seed, args.json);
    }
    let policy = match args.policy {
        Policy::Priors => WizardPolicy::Priors,
        Policy::Uniform => WizardPolicy::Uniform,
    };
    let r = sim::simulate(&study, args.sessions, args.seed, policy);
    let variants = variant_rows(&study, args.sessions, args.seed, policy);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&with_variants(&r, &variants)?)?
        );
    } else {
        print_simulation(&r);
    }
    if !args.json {
        print_variants(&variants);
    }
    Ok(
        if r.dead_ends.is_empty() && variants.iter().all(|v| v.dead_ends.is_empty()) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

/// Prints a simulation's figures as `simulate` shows them without `--json`.
fn print_simulation(r: &SimReport) {
    println!("study               {}", r.study);
    println!("sessions            {}", r.sessions);
    println!(
        "goal reached        {} ({:.1}%)",
        r.goal_reached,
        r.goal_share * 100.0
    );
    println!(
        "states covered      {}/{}",
        r.states_covered, r.states_total
    );
    println!(
        "transitions covered {}/{}",
        r.transitions_covered, r.transitions_total
    );
    println!(
        "dead ends           {}",
        if r.dead_ends.is_empty() {
            "none".into()
        } else {
            r.dead_ends.join(", ")
        }
    );
    if !r.uncovered_states.is_empty() {
        println!("never reached       {}", r.uncovered_states.join(", "));
    }
    let reasons: Vec<String> = r
        .end_reasons
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("end reasons         {}", reasons.join(", "));
    println!(
        "steps               mean {:.1}, p50 {:.0}, p90 {:.0}, p99 {:.0}",
        r.steps.mean, r.steps.p50, r.steps.p90, r.steps.p99
    );
    println!(
        "simulated time (s)  mean {:.0}, p50 {:.0}, p90 {:.0}, max {:.0}",
        r.simulated_seconds.mean,
        r.simulated_seconds.p50,
        r.simulated_seconds.p90,
        r.simulated_seconds.max
    );
}

/// Sessions played per scenario variant: a share of `--sessions`, at least 20.
const MIN_VARIANT_SESSIONS: usize = 20;

/// The per-variant rows of `simulate`: every value of every choice variable played (see
/// [`wozkit_core::scenario::variants`]); none for a study that draws no choice.
fn variant_rows(
    study: &LoadedStudy,
    sessions: usize,
    seed: u64,
    policy: WizardPolicy,
) -> Vec<sim::VariantReport> {
    let st = &study.study;
    if wozkit_core::scenario::choice_values(st).is_empty() {
        return vec![];
    }
    let count = wozkit_core::scenario::variants(st, sim::MAX_PRODUCT)
        .len()
        .max(1);
    let per_variant = (sessions / count).max(MIN_VARIANT_SESSIONS);
    sim::simulate_variants(study, per_variant, seed, policy)
}

/// The JSON of `simulate`: the report, plus `variants` when the study draws a scenario.
fn with_variants(r: &sim::SimReport, variants: &[sim::VariantReport]) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(r)?;
    if !variants.is_empty()
        && let Some(map) = v.as_object_mut()
    {
        map.insert("variants".into(), serde_json::to_value(variants)?);
    }
    Ok(v)
}

/// The per-variant table of `simulate`: completion rate, turns, dead ends.
fn print_variants(variants: &[sim::VariantReport]) {
    if variants.is_empty() {
        return;
    }
    println!();
    println!(
        "scenario variants   {} (each played {} times)",
        variants.len(),
        variants[0].sessions
    );
    let width = variants.iter().map(|v| v.label.len()).max().unwrap_or(0);
    println!(
        "  {:width$}  {:>8}  {:>11}  {:>10}  dead ends",
        "variant", "goal", "turns mean", "turns p90"
    );
    for v in variants {
        println!(
            "  {:width$}  {:>7.1}%  {:>11.1}  {:>10.0}  {}",
            v.label,
            v.goal_share * 100.0,
            v.turns.mean,
            v.turns.p90,
            if v.dead_ends.is_empty() {
                "none".to_string()
            } else {
                v.dead_ends.join(", ")
            }
        );
    }
}

pub fn graph(args: GraphArgs) -> Result<ExitCode> {
    let study = load(&args.study)?;
    let text = match args.format {
        GraphFormat::Dot => wozkit_core::graph::to_dot(&study),
        GraphFormat::Mermaid => wozkit_core::graph::to_mermaid(&study),
        GraphFormat::Svg => wozkit_core::graph::to_svg(&study).map_err(anyhow::Error::msg)?,
    };
    match args.out {
        Some(p) => std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn schema() -> Result<ExitCode> {
    println!("{}", serde_json::to_string_pretty(&load::json_schema())?);
    Ok(ExitCode::SUCCESS)
}
