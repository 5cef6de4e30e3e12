//! `wozkit crowd`: a thin wrapper around `wozkit_loadgen::crowd`, which sends a crowd of
//! simulated evaluation workers through a judging study on a running server on this machine
//! (comparing, rating, or chatting with systems under test and voting in arenas) and prints
//! the figures. With `--launch SECS` the crowd is instead a live study's launch: the workers
//! arrive over that many seconds, read the pages before the waiting room, some leave, and the
//! rest are paired (`wozkit_loadgen::launch`).

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args)]
pub struct CrowdArgs {
    /// The running server: http://127.0.0.1:PORT or http://localhost:PORT (nothing else).
    #[arg(long)]
    url: String,
    /// The study's id, as entry links name it.
    #[arg(long)]
    study: String,
    /// Simulated workers, each with its own worker id.
    #[arg(long)]
    workers: usize,
    /// Workers walking the pages at once [default: the smaller of workers and 64].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Chance (0 to 1) that a worker abandons an item page: half of them give the item back
    /// (skip), the others stop and leave the lease to expire.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    abandon: f64,
    /// Seed of the workers' random answers [default: from the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// On chat and arena pages, ask for the replies as an NDJSON stream instead of the plain
    /// form post.
    #[arg(long)]
    stream: bool,
    /// Chance (0 to 1) that an arena vote is random instead of for the side whose replies
    /// were longer.
    #[arg(long, value_name = "P", default_value_t = 0.1)]
    vote_noise: f64,
    /// Print one JSON object instead of the summary (with every conversation and vote).
    #[arg(long)]
    json: bool,
    /// A live study's launch instead: the workers arrive at random over this many seconds,
    /// read each page before the waiting room and wait to be paired.
    #[arg(long, value_name = "SECS")]
    launch: Option<f64>,
    /// With --launch: chance (0 to 1) that a worker leaves before the waiting room.
    #[arg(long, value_name = "P", default_value_t = 0.1)]
    leave: f64,
    /// With --launch: milliseconds on each page before the waiting room, drawn log-uniformly
    /// between the two.
    #[arg(long, value_name = "MIN-MAX", default_value = "200-15000")]
    read_ms: String,
    /// With --launch: the longest launch in seconds; whoever still waits then is unpaired.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    give_up: u64,
}

/// `MIN-MAX` milliseconds.
fn read_range(text: &str) -> Result<(u64, u64)> {
    let (lo, hi) = text
        .split_once('-')
        .context("--read-ms is MIN-MAX, e.g. 200-15000")?;
    let lo = lo
        .trim()
        .parse()
        .context("--read-ms: MIN is a number of milliseconds")?;
    let hi = hi
        .trim()
        .parse()
        .context("--read-ms: MAX is a number of milliseconds")?;
    anyhow::ensure!(lo <= hi, "--read-ms: MIN must not exceed MAX");
    Ok((lo, hi))
}

/// `wozkit crowd --launch`: a live study's launch.
fn launch(args: CrowdArgs, over_s: f64) -> Result<ExitCode> {
    anyhow::ensure!(
        over_s.is_finite() && over_s >= 0.0,
        "--launch is a number of seconds"
    );
    let defaults = wozkit_loadgen::crowd::CrowdConfig::new(&args.url, &args.study, args.workers);
    let config = wozkit_loadgen::launch::LaunchConfig {
        url: args.url,
        study: args.study,
        arrivals: args.workers,
        over: std::time::Duration::from_secs_f64(over_s),
        leave: args.leave,
        read_ms: read_range(&args.read_ms)?,
        seed: args.seed.unwrap_or(defaults.seed),
        worker_prefix: defaults.worker_prefix,
        give_up: std::time::Duration::from_secs(args.give_up),
    };
    let report = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(wozkit_loadgen::launch::run(config))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(if report.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn crowd(args: CrowdArgs) -> Result<ExitCode> {
    if let Some(over_s) = args.launch {
        return launch(args, over_s);
    }
    let mut config = wozkit_loadgen::crowd::CrowdConfig::new(args.url, args.study, args.workers);
    if let Some(c) = args.concurrency {
        config.concurrency = c;
    }
    config.abandon = args.abandon;
    config.stream = args.stream;
    config.vote_noise = args.vote_noise;
    if let Some(seed) = args.seed {
        config.seed = seed;
    }
    let report = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(wozkit_loadgen::crowd::run(config))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(if report.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
