//! `wozkit priors learn`: transition priors estimated from collected sessions, written as a
//! priors overlay; and the `--compare-priors` table of `wozkit simulate`. The work is done by
//! [`wozkit_core::priors`]; see docs/priors.md.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use wozkit_core::event::Event;
use wozkit_core::load::{self, LoadedStudy};
use wozkit_core::priors::{self, Learned, TransitionCounts};
use wozkit_data::stored::SessionStream;
use wozkit_data::stored::read::test_session_ids;

use crate::data_cmds::{Access, open_store};

#[derive(Subcommand)]
pub enum PriorsCmd {
    /// Estimate the hint priors of a study's transitions from its collected sessions and write
    /// them as a priors overlay (load it with --priors FILE on serve, simulate, validate).
    Learn(LearnArgs),
}

#[derive(Args)]
pub struct LearnArgs {
    /// A study file, a folder with study.yaml, or a built-in study's name.
    study: String,
    /// Data directory (SQLite), sqlite:FILE, or postgres://… holding the study's sessions.
    #[arg(long, env = "WOZKIT_DATA")]
    data: Option<String>,
    /// Session logs exported with `wozkit export --format log` (JSON Lines); repeatable. Read
    /// besides (or instead of) --data.
    #[arg(long = "log", value_name = "FILE")]
    logs: Vec<PathBuf>,
    /// Write the overlay here (standard output if not given).
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Additive smoothing: pseudo-count added to every declared transition of a state with data.
    #[arg(long, default_value_t = 1.0)]
    smoothing: f64,
    /// Count test sessions too (/try, lab links with test=1); they are left out otherwise.
    #[arg(long)]
    include_test: bool,
    /// The study's sessions are stored under this id (default: the study's id).
    #[arg(long)]
    study_id: Option<String>,
}

/// Runs a `priors` subcommand.
pub fn priors(cmd: PriorsCmd) -> Result<ExitCode> {
    match cmd {
        PriorsCmd::Learn(args) => learn(args),
    }
}

fn load_study(arg: &str) -> Result<LoadedStudy> {
    load::resolve(arg)
        .map_err(|d| anyhow!("{d}"))
        .with_context(|| format!("study `{arg}` does not load"))
}

fn learn(args: LearnArgs) -> Result<ExitCode> {
    if !args.smoothing.is_finite() || args.smoothing < 0.0 {
        bail!(
            "--smoothing {} must be a number ≥ 0 (1 is Laplace smoothing, 0 none)",
            args.smoothing
        );
    }
    if args.data.is_none() && args.logs.is_empty() {
        bail!("no sessions to learn from: pass --data DIR (the store) and/or --log FILE");
    }
    let study = load_study(&args.study)?;
    let study_id = args.study_id.clone().unwrap_or(study.study.id.clone());
    let mut counts = TransitionCounts::default();
    let mut skipped_test = 0usize;
    if let Some(data) = &args.data {
        skipped_test += count_store(&study, &study_id, data, args.include_test, &mut counts)
            .with_context(|| format!("reading the sessions of `{study_id}` in {data}"))?;
    }
    for path in &args.logs {
        skipped_test += count_log(&study, &study_id, path, args.include_test, &mut counts)
            .with_context(|| format!("reading the session logs in {}", path.display()))?;
    }
    let learned = priors::estimate(&study, &counts, args.smoothing);
    print_summary(&study, &counts, &learned, skipped_test);
    let yaml = learned.to_yaml();
    match &args.out {
        Some(out) => {
            std::fs::write(out, &yaml)
                .with_context(|| format!("cannot write the priors file {}", out.display()))?;
            eprintln!("wrote {}", out.display());
        }
        None => print!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Counts the stored dialogues of `study_id`; returns how many test sessions were left out.
fn count_store(
    study: &LoadedStudy,
    study_id: &str,
    data: &str,
    include_test: bool,
    counts: &mut TransitionCounts,
) -> Result<usize> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let store = open_store(data, Access::Snapshot).await?;
        let result = async {
            let test = test_session_ids(&*store, Some(study_id)).await?;
            let skipped = test.len();
            let skip = if include_test { HashSet::new() } else { test };
            let mut stream = SessionStream::open(&*store, Some(study_id))
                .await?
                .skipping(skip);
            while let Some(session) = stream.next().await? {
                counts.add_session(study, &session.events);
            }
            Ok::<_, anyhow::Error>(if include_test { 0 } else { skipped })
        }
        .await;
        store.close().await;
        result
    })
}

/// Counts the sessions of `study_id` in a log export (one JSON object per line with `session`,
/// `participants` and `events`); returns how many test sessions were left out.
fn count_log(
    study: &LoadedStudy,
    study_id: &str,
    path: &Path,
    include_test: bool,
    counts: &mut TransitionCounts,
) -> Result<usize> {
    let text = std::fs::read_to_string(path).context("cannot read the file")?;
    let mut skipped = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), n + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{}: not JSON", at()))?;
        if v["session"]["study_id"].as_str() != Some(study_id) {
            continue;
        }
        let test = v["participants"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["test"].as_bool() == Some(true)));
        if test && !include_test {
            skipped += 1;
            continue;
        }
        let events: Vec<Event> = serde_json::from_value(v["events"].clone())
            .with_context(|| format!("{}: `events` is not a list of session events", at()))?;
        counts.add_session(study, &events);
    }
    Ok(skipped)
}

fn print_summary(
    study: &LoadedStudy,
    counts: &TransitionCounts,
    learned: &Learned,
    skipped_test: usize,
) {
    eprintln!(
        "{}: {} session(s) counted{}; smoothing {}",
        study.study.id,
        counts.sessions,
        if skipped_test > 0 {
            format!(" ({skipped_test} test session(s) left out; --include-test counts them)")
        } else {
            String::new()
        },
        learned.smoothing
    );
    for s in &learned.states {
        let def = &study.study.states[study.state_idx(&s.state).expect("a learned state exists")];
        let pairs: Vec<String> = s
            .priors
            .iter()
            .map(|(to, p)| {
                let hand: f64 = def
                    .transitions
                    .iter()
                    .filter(|t| t.to() == to)
                    .map(|t| t.prior())
                    .sum();
                let n = counts.states[&s.state]
                    .choices
                    .get(to)
                    .copied()
                    .unwrap_or(0);
                format!("{to} {n}× {hand}→{p:.3}")
            })
            .collect();
        eprintln!(
            "  {}: {} transition(s) in {} session(s){}: {}",
            s.state,
            s.counted,
            s.sessions,
            if s.other > 0 {
                format!(" (+{} choices of other states, not counted)", s.other)
            } else {
                String::new()
            },
            pairs.join(", ")
        );
    }
    if !learned.no_data.is_empty() {
        eprintln!("  no data (priors kept): {}", learned.no_data.join(", "));
    }
    if counts.unknown_states > 0 {
        eprintln!(
            "  {} choice(s) in states this study does not have were ignored (another version \
             of the study?)",
            counts.unknown_states
        );
    }
}

/// `wozkit simulate STUDY --compare-priors FILE`: prints (or, with `json`, writes one JSON
/// object of) the comparison of the study's priors with the overlay's.
pub fn compare(
    study: &LoadedStudy,
    file: &Path,
    sessions: usize,
    seed: u64,
    json: bool,
) -> Result<ExitCode> {
    let mut learned = study.clone();
    load::apply_priors_file(&mut learned, file).map_err(|d| anyhow!("{d}"))?;
    let c = priors::compare(study, &learned, sessions, seed);
    if json {
        println!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "study {}: {} sessions per simulated wizard, seed {}; hand priors vs {}",
        c.study,
        sessions,
        seed,
        file.display()
    );
    println!(
        "{:<28} {:>16} {:>16}",
        "simulated wizard follows", "hand priors", "learned priors"
    );
    let row = |name: &str, f: &dyn Fn(&priors::WizardRun) -> String| {
        println!("{:<28} {:>16} {:>16}", name, f(&c.runs[0]), f(&c.runs[1]));
    };
    row("goal reached", &|r| {
        format!("{} ({:.1}%)", r.goal_reached, r.goal_share * 100.0)
    });
    row("wizard turns (mean)", &|r| format!("{:.1}", r.wizard_turns));
    row("choices scored", &|r| r.choices.to_string());
    row("hint = choice, hand", &|r| {
        format!("{:.1}%", r.hint_hand * 100.0)
    });
    row("hint = choice, learned", &|r| {
        format!("{:.1}%", r.hint_learned * 100.0)
    });
    row("top hint = choice, hand", &|r| {
        format!("{:.1}%", r.top_hand * 100.0)
    });
    row("top hint = choice, learned", &|r| {
        format!("{:.1}%", r.top_learned * 100.0)
    });
    println!(
        "(hint = choice: chance the drawn hint names the option the simulated wizard chose; the \
         learned-priors wizard replays the collected choice frequencies, see docs/priors.md)"
    );
    Ok(ExitCode::SUCCESS)
}

/// Applies each priors overlay to the study it names (`wozkit serve --priors FILE`).
pub fn apply_overlays(studies: &mut [LoadedStudy], files: &[PathBuf]) -> Result<()> {
    for file in files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the priors file {}", file.display()))?;
        let overlay = load::parse_priors_overlay(&file.display().to_string(), &text)
            .map_err(|d| anyhow!("{d}"))?;
        let Some(study) = studies.iter_mut().find(|s| s.study.id == overlay.study) else {
            bail!(
                "{}: the priors are for study `{}`, which is not served (served: {})",
                file.display(),
                overlay.study,
                studies
                    .iter()
                    .map(|s| s.study.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        load::apply_priors_text(study, &file.display().to_string(), &text)
            .map_err(|d| anyhow!("{d}"))?;
        eprintln!(
            "study {}: hint priors from {}",
            study.study.id,
            file.display()
        );
    }
    Ok(())
}
