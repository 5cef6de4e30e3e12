//! `wozkit bench`: a thin wrapper around `wozkit_loadgen`, which simulates participant pairs
//! over real WebSockets against a running server on this machine and prints the figures.
//! With `--chats N` it instead measures chats with a system under test
//! (`wozkit_loadgen::chat_bench`): it starts a mock system and its own `wozkit serve`, and
//! prints the latency wozkit adds to each turn and the server's memory per chat.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args)]
pub struct BenchArgs {
    /// The running server: http://127.0.0.1:PORT or http://localhost:PORT (nothing else).
    /// Repeatable, or comma-separated, for several instances (or a proxy and instances): pairs
    /// of participants go to the URLs in turn, and the figures are reported per URL and overall.
    #[arg(long, value_delimiter = ',', required_unless_present = "chats")]
    url: Vec<String>,
    /// Simulated participants (an even number: user and wizard in pairs).
    #[arg(long, required_unless_present = "chats")]
    participants: Option<usize>,
    /// Seconds measured once every participant is in a room.
    #[arg(long, value_name = "SECS", required_unless_present = "chats")]
    duration: Option<u64>,
    /// Instead of pairs: this many chats at once with a mock system under test, against a
    /// `wozkit serve` the bench starts itself (no --url); prints the latency wozkit adds per
    /// turn and the server's memory per chat.
    #[arg(long, conflicts_with_all = ["url", "participants", "duration"])]
    chats: Option<usize>,
    /// With --chats: messages each chat sends.
    #[arg(long, default_value_t = 5, requires = "chats")]
    turns: u32,
    /// With --chats: each worker pauses before each message for a time drawn from LOW to HIGH
    /// milliseconds (reading and typing, e.g. 3000,10000); 0,0 sends every message of every chat
    /// at once, the worst case.
    #[arg(long, value_name = "LOW,HIGH", default_value = "0,0", value_parser = parse_range, requires = "chats")]
    typing_ms: (u64, u64),
    /// With --chats: milliseconds the mock system takes to answer.
    #[arg(long, value_name = "MS", default_value_t = 200, requires = "chats")]
    reply_ms: u64,
    /// With --chats: streamed replies (server-sent events from the system, NDJSON to the
    /// workers) instead of whole ones.
    #[arg(long, requires = "chats")]
    stream: bool,
    /// Messages per second per participant (0.5 = one every 2 s).
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0.5)]
    rate: f64,
    /// The server's process id, for memory figures when it is not found from the port (with
    /// several URLs it is not looked up).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Loopback source addresses to connect from (127.0.0.1 … 127.0.0.N), each with its own
    /// ephemeral ports; default one per 20,000 participants.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=250))]
    source_addresses: Option<u8>,
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
    if let Some(chats) = args.chats {
        return chat_bench(chats, &args);
    }
    let (false, Some(participants), Some(duration)) =
        (args.url.is_empty(), args.participants, args.duration)
    else {
        anyhow::bail!("wozkit bench needs --url, --participants and --duration (or --chats)");
    };
    let mut config =
        wozkit_loadgen::Config::new(String::new(), participants, Duration::from_secs(duration));
    config.urls = args.url;
    config.rate = args.rate;
    config.server_pid = args.server_pid;
    config.source_addresses = args.source_addresses.unwrap_or(0);
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

/// Parses `LOW,HIGH` milliseconds.
fn parse_range(s: &str) -> std::result::Result<(u64, u64), String> {
    let (low, high) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: write LOW,HIGH, e.g. 3000,10000"))?;
    let parse = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|e| format!("`{s}`: `{x}` is not a number of milliseconds: {e}"))
    };
    let (low, high) = (parse(low)?, parse(high)?);
    if low > high {
        return Err(format!("`{s}`: LOW is more than HIGH"));
    }
    Ok((low, high))
}

/// `wozkit bench --chats N`.
fn chat_bench(chats: usize, args: &BenchArgs) -> Result<ExitCode> {
    raise_fd_limit();
    let config = wozkit_loadgen::chat_bench::ChatBenchConfig {
        wozkit: std::env::current_exe().context("cannot find the wozkit executable")?,
        chats,
        turns: args.turns,
        delay: Duration::from_millis(args.reply_ms),
        stream: args.stream,
        seed: 1,
        typing_ms: args.typing_ms,
    };
    eprintln!(
        "chat bench: starting a mock system and a server, then {chats} chats of {} turns",
        args.turns
    );
    let report = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(wozkit_loadgen::chat_bench::run(config))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(if report.failed_workers > 0 || report.turns == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
