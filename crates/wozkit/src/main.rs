//! The `wozkit` command line: a thin layer over the library crates. Each subcommand parses its
//! arguments, calls one library function and prints the result; errors get context with anyhow.

mod bench_cmd;
mod crowd_cmd;
mod data_cmds;
mod judge_cmd;
mod lab_cmd;
#[cfg(feature = "mturk")]
mod mturk_cmd;
mod priors_cmd;
mod prolific_cmd;
mod prolific_create;
mod researchers_cmd;
mod serve_cmd;
mod simulate_chat;
mod simulate_users_cmd;
mod study_cmds;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The server allocates and frees many small objects per event on every thread; mimalloc does
/// that at a fraction of the system allocator's cost (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// wozkit: collect and evaluate task-oriented dialogues with crowdworkers.
#[derive(Parser)]
#[command(name = "wozkit", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the built-in studies, or export one as editable files.
    Studies {
        #[command(subcommand)]
        action: Option<study_cmds::StudiesCmd>,
    },
    /// Check a study; prints every problem as FILE:LINE:COL and exits 1 if there are any.
    Validate {
        /// A study file, a folder with study.yaml, or a built-in study's name.
        study: String,
        /// A priors overlay (from `wozkit priors learn`) to check and load on top of the study.
        #[arg(long, value_name = "FILE")]
        priors: Option<std::path::PathBuf>,
    },
    /// Play sessions with random wizard and user policies; exits 1 if a dead end is reachable.
    Simulate(study_cmds::SimulateArgs),
    /// Transition priors of the hint learned from collected sessions (docs/priors.md).
    Priors {
        #[command(subcommand)]
        action: priors_cmd::PriorsCmd,
    },
    /// Draw the state diagram.
    Graph(study_cmds::GraphArgs),
    /// Print the JSON Schema of the study format.
    Schema,
    /// Ask a study's model judges about every item; their answers are stored apart from people's.
    Judge(judge_cmd::JudgeArgs),
    /// Import dataset files into the store as sessions.
    Import(data_cmds::ImportArgs),
    /// Export the store's sessions in a dataset format, optionally split.
    Export(data_cmds::ExportArgs),
    /// Write the report (HTML with SVG charts, and JSON) over the store's sessions.
    Report(data_cmds::ReportArgs),
    /// Run the server: entry links, participant pages, pairing, live rooms, researcher pages.
    Serve(serve_cmd::ServeArgs),
    /// Researcher accounts: add, list, remove, passwd (also while the server runs).
    Researchers(researchers_cmd::ResearchersArgs),
    /// Payment table (CSV) of the participants, or check a completion code with --verify.
    Payments(serve_cmd::PaymentsArgs),
    /// Signed entry links for named lab participants (each resumes its participant in any
    /// browser; an unsigned lab link only in the browser that started it).
    LabLinks(lab_cmd::LabLinksArgs),
    /// Prolific through its API (token in PROLIFIC_TOKEN): submissions with their codes checked,
    /// approvals and bonuses from the payment table.
    Prolific {
        #[command(subcommand)]
        action: prolific_cmd::ProlificCmd,
    },
    /// Mechanical Turk through the AWS SDK (credentials in AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY): HITs pointing at a study, assignments, approvals and the payment
    /// table's bonuses, blocks and qualifications.
    #[cfg(feature = "mturk")]
    Mturk {
        #[command(subcommand)]
        action: mturk_cmd::MturkCmd,
    },
    /// Load-test a running server on this machine with simulated participant pairs.
    Bench(bench_cmd::BenchArgs),
    /// Send simulated evaluation workers through a judging study on a running server here.
    Crowd(crowd_cmd::CrowdArgs),
    /// Dry runs of a WoZ study: a simulated user (a language model) against the wizard bot, each
    /// an ordinary session of the store, marked simulated.
    SimulateUsers(simulate_users_cmd::SimulateUsersArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Studies { action } => study_cmds::studies(action),
        Cmd::Validate { study, priors } => study_cmds::validate(&study, priors.as_deref()),
        Cmd::Simulate(args) => study_cmds::simulate(args),
        Cmd::Priors { action } => priors_cmd::priors(action),
        Cmd::Graph(args) => study_cmds::graph(args),
        Cmd::Schema => study_cmds::schema(),
        Cmd::Judge(args) => judge_cmd::judge(args),
        Cmd::Import(args) => data_cmds::import(args),
        Cmd::Export(args) => data_cmds::export(args),
        Cmd::Report(args) => data_cmds::report(args),
        Cmd::Serve(args) => {
            bench_cmd::raise_fd_limit();
            serve_cmd::serve(args)
        }
        Cmd::Researchers(args) => researchers_cmd::researchers(args),
        Cmd::Payments(args) => serve_cmd::payments(args),
        Cmd::LabLinks(args) => lab_cmd::lab_links(args),
        Cmd::Prolific { action } => prolific_cmd::prolific(action),
        #[cfg(feature = "mturk")]
        Cmd::Mturk { action } => mturk_cmd::mturk(action),
        Cmd::Bench(args) => bench_cmd::bench(args),
        Cmd::Crowd(args) => crowd_cmd::crowd(args),
        Cmd::SimulateUsers(args) => simulate_users_cmd::simulate_users(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
