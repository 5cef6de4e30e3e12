//! `wozkit bench`: a thin wrapper around `wozkit_loadgen`, which simulates participant pairs
//! over real WebSockets against a running server on this machine and prints the figures.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args)]
pub struct BenchArgs {
    /// The running server: http://127.0.0.1:PORT or http://localhost:PORT (nothing else).
    #[arg(long)]
    url: String,
    /// Simulated participants (an even number: user and wizard in pairs).
    #[arg(long)]
    participants: usize,
    /// Seconds measured once every participant is in a room.
    #[arg(long, value_name = "SECS")]
    duration: u64,
    /// Messages per second per participant (0.5 = one every 2 s).
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0.5)]
    rate: f64,
    /// The server's process id, for memory figures when it is not found from the port.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

/// Raises the open-file limit to the hard limit: thousands of participants are thousands of
/// sockets, on the server's side as on the load generator's. A failure only means the default
/// limit stays.
pub fn raise_fd_limit() {
    if let Err(e) = wozkit_loadgen::raise_fd_limit() {
        eprintln!("warning: cannot raise the open-file limit: {e}");
    }
}

pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    let mut config = wozkit_loadgen::Config::new(
        args.url,
        args.participants,
        Duration::from_secs(args.duration),
    );
    config.rate = args.rate;
    config.server_pid = args.server_pid;
    config.progress = true;
    let report = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(wozkit_loadgen::run(config))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(if report.reached_room == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
