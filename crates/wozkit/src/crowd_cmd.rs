//! `wozkit crowd`: a thin wrapper around `wozkit_loadgen::crowd`, which sends a crowd of
//! simulated evaluation workers through a judging study on a running server on this machine
//! (comparing, rating, or chatting with systems under test and voting in arenas) and prints
//! the figures.

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
}

pub fn crowd(args: CrowdArgs) -> Result<ExitCode> {
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
