//! `wozkit import`, `wozkit export` and `wozkit report`: argument parsing, progress bars and
//! summaries around [`wozkit_data::stored`] and [`wozkit_data::report`], which do the work.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wozkit_data::acts::TurnActs;
use wozkit_data::mapping::Mappings;
use wozkit_data::report::evaluation::RankingOptions;
use wozkit_data::report::features::Outcome;
use wozkit_data::report::html::render_html;
use wozkit_data::report::questionnaire::Questionnaires;
use wozkit_data::report::{Filter, ReportOptions, build_report};
use wozkit_data::stored::export::parse_dataset;
use wozkit_data::stored::{
    ExportFormat, ExportOptions, ExportSummary, Progress, SplitSpec, export_store_mapped,
    import_files, span_judgments,
};
use wozkit_data::{Format, SpanSegments};
use wozkit_store::Store;

/// Where the data lives: a data directory (SQLite) or a PostgreSQL URL.
#[derive(Args)]
pub struct DataArg {
    /// Data directory (SQLite), sqlite:FILE, or postgres://user:password@host/database.
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
}

#[derive(Args)]
pub struct ImportArgs {
    /// taskmaster1, crosswoz, multiwoz, convlab3, crsarena (dialogues, merged files, votes
    /// .csv and CRSArena-Eval ratings), crsarena_eval or crwiz.
    #[arg(long)]
    format: String,
    #[command(flatten)]
    data: DataArg,
    /// Dataset files (zipped JSON is unpacked).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
pub struct ExportArgs {
    /// taskmaster1, crosswoz, multiwoz, convlab3, crsarena (arena battles' votes go to
    /// votes_NAME.csv beside the file), crsarena_eval, crwiz, jsonl, survey-csv, votes-csv,
    /// judgments-jsonl or judgments-csv (the judgments of evaluation studies, one row each; no
    /// --split), or log (per-session logs with metrics, written by the
    /// server crate; it takes --data, --out, --study and --include-test only).
    #[arg(long)]
    format: String,
    #[command(flatten)]
    data: DataArg,
    /// Output file (a folder for crwiz); a name ending in .zip is written as a zip archive.
    #[arg(long, short)]
    out: PathBuf,
    /// Split into parts, e.g. train=0.8,dev=0.1,test=0.1: one file per part.
    #[arg(long)]
    split: Option<String>,
    /// Seed of the split.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Only this study's sessions (imported ones are in import:<format>).
    #[arg(long)]
    study: Option<String>,
    /// Export test sessions too (/try, lab links with test=1); they are left out otherwise.
    #[arg(long)]
    include_test: bool,
    /// With --format taskmaster1: a span-annotation study (evaluation.task: spans) whose
    /// judgments' spans become the utterances' segments, as in the server's Taskmaster-1
    /// download; repeatable.
    #[arg(long = "spans", value_name = "STUDY")]
    spans: Vec<String>,
    /// With --format multiwoz21, convlab3 or crosswoz: an act-annotation study (evaluation.task:
    /// turn_acts) whose adjudicated dialogue acts (majority of each turn's counted judgments)
    /// become the turns' dialog_act / dialogue_acts; repeatable.
    #[arg(long = "acts-from", value_name = "STUDY")]
    acts_from: Vec<String>,
    /// A study file, folder with study.yaml, or built-in name whose `datasets:` mapping writes
    /// its sessions' wizard states as the format's acts (and names its domains, slots and
    /// Taskmaster-1 scenario); repeatable. The built-in studies' mappings apply without it; a
    /// study given replaces a built-in one with the same id.
    #[arg(long = "mapping", value_name = "STUDY")]
    mapping: Vec<String>,
}

#[derive(Args)]
pub struct ReportArgs {
    #[command(flatten)]
    data: DataArg,
    /// KEY=VALUE, repeatable: study, format, file, system, or a field of the dataset record.
    #[arg(long = "filter")]
    filters: Vec<String>,
    /// Write the report page here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Write every number of the report here (printed when neither --html nor --json is given).
    #[arg(long)]
    json: Option<PathBuf>,
    /// The session outcome: goal_reached or satisfied.
    #[arg(long, default_value = "goal_reached")]
    outcome: String,
    /// Dialogue acts listed per role.
    #[arg(long, default_value_t = 10)]
    top: usize,
    #[arg(long, default_value_t = 16.0)]
    elo_k: f64,
    #[arg(long, default_value_t = 1000.0)]
    elo_start: f64,
    /// Bootstrap resamples for the Bradley-Terry, goal-score and model-judge agreement intervals.
    #[arg(long, default_value_t = 1000)]
    bootstrap: usize,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// A study file, folder with study.yaml, or built-in name whose questionnaire scores its
    /// sessions' answers (reverse-coded items reversed on their scale); repeatable. The store
    /// keeps no study definitions, so a live study that is not built in needs this, or its
    /// answers are used as stored (the report then says so).
    #[arg(long = "study")]
    studies: Vec<String>,
    /// Report test sessions too (/try, lab links with test=1); they are left out otherwise.
    #[arg(long)]
    include_test: bool,
    /// Report the dialogues of simulated users too (`wozkit simulate-users`, `serve
    /// --simulated-user`); the report is about people otherwise.
    #[arg(long)]
    include_simulated: bool,
}

pub fn import(args: ImportArgs) -> Result<ExitCode> {
    let format = parse_dataset(&args.format).ok_or_else(|| {
        anyhow!(
            "unknown format {:?}; expected taskmaster1, crosswoz, multiwoz, convlab3, crsarena, \
             crsarena_eval or crwiz",
            args.format
        )
    })?;
    let started = Instant::now();
    let summary = with_store(&args.data.data, Access::Write, async |store| {
        Ok(import_files(store, format, &args.paths, &Bar::default()).await?)
    })?;
    println!(
        "imported {} sessions ({} events) from {} file(s) in {:.1} s; {} already present, {} \
         finished from an interrupted import",
        summary.sessions,
        summary.events,
        summary.files,
        started.elapsed().as_secs_f64(),
        summary.unchanged,
        summary.resumed
    );
    Ok(ExitCode::SUCCESS)
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    if args.format == "log" {
        return crate::serve_cmd::export_log(
            &args.data.data,
            args.study.as_deref(),
            args.include_test,
            &args.out,
        );
    }
    let format = ExportFormat::parse(&args.format).ok_or_else(|| {
        anyhow!(
            "unknown format {:?}; expected one of {} or log",
            args.format,
            ExportFormat::NAMES.join(", ")
        )
    })?;
    let split = match &args.split {
        Some(text) => Some(SplitSpec::parse(text, args.seed).map_err(|e| anyhow!("--split: {e}"))?),
        None => None,
    };
    check_merges(&args, format)?;
    let mut studies = vec![];
    for arg in &args.mapping {
        let study = wozkit_core::load::resolve(arg)
            .map_err(|d| anyhow!("{d}"))
            .with_context(|| format!("--mapping {arg}: the study does not load"))?;
        studies.push(study.study);
    }
    let mappings = Mappings::with_studies(&studies);
    let options = ExportOptions {
        format,
        out: args.out,
        split,
        study: args.study,
        include_test: args.include_test,
    };
    let started = Instant::now();
    let summary = with_store(&args.data.data, Access::Snapshot, async |store| {
        let segments = span_segments(store, &args.spans, &mappings).await?;
        let acts = turn_acts(store, &args.acts_from).await?;
        let bar = Bar::default();
        Ok(export_store_mapped(store, &options, &segments, &acts, &mappings, &bar).await?)
    })?;
    print_export_summary(format, &summary, started);
    Ok(ExitCode::SUCCESS)
}

/// Refuses `--spans` and `--acts-from` with a format that cannot hold them.
fn check_merges(args: &ExportArgs, format: ExportFormat) -> Result<()> {
    if !args.spans.is_empty() && format != ExportFormat::Dataset(Format::Taskmaster1) {
        return Err(anyhow!(
            "--spans {}: span annotations are exported with --format taskmaster1, not {}",
            args.spans.join(","),
            args.format
        ));
    }
    let acts_format = matches!(
        format,
        ExportFormat::Dataset(Format::MultiWoz21 | Format::ConvLab3 | Format::CrossWoz)
    );
    if !args.acts_from.is_empty() && !acts_format {
        return Err(anyhow!(
            "--acts-from {}: dialogue acts are exported with --format multiwoz21, convlab3 or \
             crosswoz, not {}",
            args.acts_from.join(","),
            args.format
        ));
    }
    Ok(())
}

/// The span segments of the judgments of the `--spans` studies (none without any), with
/// their slot names as the studies' Taskmaster-1 mappings name them.
async fn span_segments(
    store: &dyn Store,
    spans: &[String],
    mappings: &Mappings,
) -> Result<SpanSegments> {
    let mut segments = SpanSegments::default();
    if spans.is_empty() {
        return Ok(segments);
    }
    let judgments = span_judgments(store, spans).await?;
    if judgments.is_empty() {
        eprintln!(
            "warning: --spans {}: the store holds no judgments of that study, so no \
             segments are added",
            spans.join(",")
        );
    }
    segments = SpanSegments::from_judgments(&judgments);
    // The span studies' slot names as their Taskmaster-1 mappings name them.
    for study in spans {
        if let Some(tm) = mappings
            .of_study(study)
            .and_then(|d| d.taskmaster1.as_ref())
        {
            segments.rename(&tm.segments);
        }
    }
    println!(
        "merging the spans of {} judgments ({} dialogues) of {}",
        judgments.len(),
        segments.dialogues(),
        spans.join(", ")
    );
    Ok(segments)
}

/// The adjudicated dialogue acts of the judgments of the `--acts-from` studies (none without
/// any).
async fn turn_acts(store: &dyn Store, acts_from: &[String]) -> Result<TurnActs> {
    let mut acts = TurnActs::default();
    if acts_from.is_empty() {
        return Ok(acts);
    }
    let judgments = span_judgments(store, acts_from).await?;
    acts = TurnActs::from_judgments(&judgments);
    if acts.is_empty() {
        eprintln!(
            "warning: --acts-from {}: the store holds no counted act labels of that \
             study, so no acts are added",
            acts_from.join(",")
        );
    }
    let turns: usize = acts.sessions.values().map(|t| t.len()).sum();
    println!(
        "writing the adjudicated acts of {turns} turns ({} sessions) of {}",
        acts.sessions.len(),
        acts_from.join(", ")
    );
    Ok(acts)
}

/// Prints what an export read and wrote, and how long it took.
fn print_export_summary(format: ExportFormat, summary: &ExportSummary, started: Instant) {
    if matches!(
        format,
        ExportFormat::JudgmentsJsonl | ExportFormat::JudgmentsCsv
    ) {
        println!(
            "exported the judgments of {} of {} participant logs ({} events read) in {:.1} s",
            summary.sessions_written,
            summary.sessions_read,
            summary.events_read,
            started.elapsed().as_secs_f64()
        );
    } else {
        println!(
            "exported {} of {} sessions ({} events read) in {:.1} s; {} sessions have events \
             the format cannot hold (in the sidecar)",
            summary.sessions_written,
            summary.sessions_read,
            summary.events_read,
            started.elapsed().as_secs_f64(),
            summary.sidecar_sessions
        );
    }
    for file in &summary.files {
        println!("  wrote {}", file.display());
    }
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let filters = args
        .filters
        .iter()
        .map(|f| Filter::parse(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!(e))?;
    let outcome = Outcome::parse(&args.outcome).ok_or_else(|| {
        anyhow!(
            "--outcome {:?}: expected goal_reached or satisfied",
            args.outcome
        )
    })?;
    let options = ReportOptions {
        filters,
        outcome,
        top: args.top,
        ranking: RankingOptions {
            elo_k: args.elo_k,
            elo_start: args.elo_start,
            bootstrap: args.bootstrap,
            seed: args.seed,
        },
        questionnaires: questionnaires(&args.studies)?,
        include_test: args.include_test,
        include_simulated: args.include_simulated,
    };
    let started = Instant::now();
    let report = with_store(&args.data.data, Access::Snapshot, async |store| {
        Ok(build_report(store, &options).await?)
    })?;
    warn_unknown_questionnaires(&report.unknown_questionnaires);
    let json = serde_json::to_string_pretty(&report)?;
    if args.html.is_none() && args.json.is_none() {
        println!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.html {
        std::fs::write(path, render_html(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    eprintln!(
        "report: {} dialogue sessions, {} votes, in {:.1} s",
        report.sessions,
        report.votes,
        started.elapsed().as_secs_f64()
    );
    for path in args.json.iter().chain(&args.html) {
        println!("  wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// How a command uses the store.
#[derive(Clone, Copy)]
pub enum Access {
    /// Reads only, from a consistent snapshot; works while `wozkit serve` runs on the same data.
    Snapshot,
    /// Writes: needs the data to itself (a SQLite data directory is locked by a running server).
    Write,
}

/// Opens the store at `location` as `access` asks, with an error that says what to do when a
/// running server holds it.
pub async fn open_store(location: &str, access: Access) -> Result<std::sync::Arc<dyn Store>> {
    let opened = match access {
        Access::Snapshot => wozkit_store::open_snapshot(location).await,
        Access::Write => wozkit_store::open(location).await,
    };
    opened.map_err(|e| match e {
        wozkit_store::StoreError::Locked(_) => anyhow!(
            "{location} is in use by a running `wozkit serve` (or another writing command). \
             Reading works beside it (export, report, payments), but writing does not: an \
             import would hold the database's write lock for as long as it takes and stall \
             the live rooms' writes. Stop the server (sessions in progress resume when it \
             starts again), run this command, then start it; or use a PostgreSQL store"
        ),
        e => anyhow::Error::new(e).context(format!("cannot open the data at {location}")),
    })
}

/// The questionnaires the report scores answers with: every built-in study's, then those of the
/// studies given (a given study replaces a built-in one with the same id).
fn questionnaires(given: &[String]) -> Result<Questionnaires> {
    let mut questionnaires = Questionnaires::default();
    for name in wozkit_core::load::builtin_names() {
        let study = wozkit_core::load::load_builtin(&name)
            .map_err(|d| anyhow!("the built-in study {name} does not load: {d}"))?;
        questionnaires.add(&study.study);
    }
    for arg in given {
        let study = wozkit_core::load::resolve(arg)
            .map_err(|d| anyhow!("{d}"))
            .with_context(|| format!("--study {arg}: the study does not load"))?;
        questionnaires.add(&study.study);
    }
    Ok(questionnaires)
}

/// Tells on stderr which studies' answers were used unscored (also in the report itself).
fn warn_unknown_questionnaires(studies: &[String]) {
    for study in studies {
        eprintln!(
            "warning: no definition of study `{study}`: its questionnaire answers are used as \
             stored, reverse-coded items NOT reversed; pass --study FILE to score them"
        );
    }
}

/// Runs `work` on the store at `location` in a fresh runtime and closes the store afterwards.
pub(crate) fn with_store<T>(
    location: &str,
    access: Access,
    work: impl AsyncFnOnce(&dyn Store) -> Result<T>,
) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let store = open_store(location, access).await?;
        let result = work(&*store).await;
        store.close().await;
        result
    })
}

/// A progress bar on stderr that appears only once a phase has run for a second, and never
/// when stderr is not a terminal.
#[derive(Default)]
struct Bar {
    current: Mutex<Option<(ProgressBar, Instant)>>,
}

impl Progress for Bar {
    fn start(&self, phase: &str, total: Option<u64>) {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(phase.to_string());
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some((bar, Instant::now()));
    }

    fn advance(&self, n: u64) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((bar, started)) = current.as_ref() {
            bar.inc(n);
            if bar.is_hidden()
                && started.elapsed() > Duration::from_secs(1)
                && std::io::stderr().is_terminal()
            {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }

    fn finish(&self) {
        if let Some((bar, _)) = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            bar.finish_and_clear();
        }
    }
}
