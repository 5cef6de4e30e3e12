//! `wozkit serve`, `wozkit payments` and `wozkit export --format log`: thin wrappers around
//! `wozkit_server` (the server itself, and its payment and log projections of the store).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::data_cmds::{Access, open_store};
use anyhow::{Context, Result};
use clap::Args;
use wozkit_core::load::{self, LoadedStudy};
use wozkit_core::systems::SystemSpec;
use wozkit_data::records::{
    self,
    payments::{self, Verdict},
};
use wozkit_server::{
    Config, MetricsToken, ModelUser, Tunables, auth, launch_with_listener,
    launch_with_metrics_listener,
};

/// The study served when none is named.
const DEFAULT_STUDY: &str = "offshore-emergency";

#[derive(Args)]
pub struct ServeArgs {
    /// Studies to serve: study files, folders with study.yaml, or built-in names. The first is
    /// the default of entry links that name none.
    #[arg(default_value = DEFAULT_STUDY)]
    studies: Vec<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Data directory (SQLite, created if missing), sqlite:FILE, or postgres://….
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
    /// Entry links (/join) one client address may open per minute, in bursts of as many; the
    /// rest get a 429 page. 0 turns the limit off (e.g. for `wozkit bench`, whose participants
    /// all come from 127.0.0.1). Behind a reverse proxy, give the proxy's address with
    /// `--trusted-proxy` so the limit keys on each real client.
    #[arg(
        long,
        env = "WOZKIT_JOIN_LIMIT",
        value_name = "PER_MINUTE",
        default_value_t = Tunables::default().join_per_minute
    )]
    join_limit: u32,
    /// A reverse proxy in front of wozkit (an address or a CIDR range, e.g. 127.0.0.1 or
    /// 10.0.0.0/8): only from these peers are `Forwarded`, `X-Forwarded-For` and
    /// `X-Forwarded-Proto` believed, so rate limits key on the real client and cookies are
    /// `Secure` behind HTTPS. Repeatable; comma-separated in the environment variable.
    #[arg(
        long = "trusted-proxy",
        env = "WOZKIT_TRUSTED_PROXIES",
        value_name = "CIDR",
        value_delimiter = ',',
        value_parser = parse_cidr
    )]
    trusted_proxies: Vec<ipnet::IpNet>,
    /// A site besides MTurk's worker sites that may show participant pages in a frame, as an
    /// origin (`https://survey.example.org`); it may also receive the pages' forms. Researcher
    /// pages are never framed by other sites. Repeatable.
    #[arg(
        long = "frame-ancestors",
        env = "WOZKIT_FRAME_ANCESTORS",
        value_name = "ORIGIN",
        value_delimiter = ',',
        value_parser = parse_origin
    )]
    frame_ancestors: Vec<String>,
    /// A file of worker ids (one per line; `#` starts a comment) refused at entry to every
    /// study; each study may list more under `evaluation.blocklist`.
    #[arg(long, env = "WOZKIT_BLOCKLIST", value_name = "FILE")]
    blocklist: Option<PathBuf>,
    /// A dialogue system under test at an OpenAI-compatible base URL (e.g.
    /// `my-model=http://gpu-box:8000/v1`, or `NAME=URL#MODEL` when the endpoint's model name is
    /// not NAME). The given systems replace the systems under test of every served chat or
    /// arena: participants meet only them, and the study's own (e.g. built-in scripted ones)
    /// are left out. Repeatable; an arena needs two.
    #[arg(long = "system", value_name = "NAME=URL[#MODEL]", value_parser = parse_system)]
    systems: Vec<(String, SystemSpec)>,
    /// Like `--system`, but tested beside the study's own systems instead of replacing them (a
    /// study system of the same name is replaced by it). Repeatable.
    #[arg(long = "add-system", value_name = "NAME=URL[#MODEL]", value_parser = parse_system)]
    add_systems: Vec<(String, SystemSpec)>,
    /// Pilot a WoZ study alone: a test participant (`/try`, a link with `&test=1`) arriving
    /// as the wizard gets this simulated user in the user's seat at once, NAME=URL[#MODEL] (an
    /// OpenAI-compatible endpoint; a `simulated_users` entry of that name in the study gives
    /// its prompt and stop rule), or the NAME of one the study declares with its endpoint.
    #[arg(long, value_name = "NAME=URL[#MODEL]")]
    simulated_user: Option<String>,
    /// Also serve `GET /metrics` (Prometheus text) without a token on this address, e.g.
    /// 127.0.0.1:9100 (keep it away from the public network). On the main address `/metrics`
    /// needs `WOZKIT_METRICS_TOKEN` as a bearer token, and is absent without it.
    #[arg(long, env = "WOZKIT_METRICS_ADDR", value_name = "ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// This instance's id among several sharing one PostgreSQL database: the owner named in
    /// the leases of the rooms it runs (docs/scale-out.md). Random per process when not given;
    /// give a stable one to resume this instance's rooms at once after a restart.
    #[arg(long, env = "WOZKIT_INSTANCE_ID", value_name = "ID")]
    instance_id: Option<String>,
    /// The base URL other instances reach this one at, stored with its room leases (default:
    /// http:// and the listening address).
    #[arg(long, env = "WOZKIT_ADVERTISE_URL", value_name = "URL")]
    advertise_url: Option<String>,
    /// How long a room lease lasts without renewal, in milliseconds: an instance renews its
    /// leases every third of it, and the rooms of an instance that stopped are taken over by
    /// the others once their leases have run out.
    #[arg(
        long,
        env = "WOZKIT_ROOM_LEASE_MS",
        value_name = "MS",
        default_value_t = Tunables::default().room_lease_ms,
        value_parser = clap::value_parser!(u64).range(300..)
    )]
    room_lease_ms: u64,
    /// The secret shared by the instances on one PostgreSQL database: a participant or
    /// observer reaching an instance that does not run their room is relayed to the one that
    /// does, over `GET /internal/relay` authenticated with it (docs/scale-out.md). Prefer the
    /// environment variable (a command line is visible to other users of the machine). Without
    /// it instances neither relay nor accept relayed connections.
    #[arg(
        long,
        env = "WOZKIT_CLUSTER_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    cluster_secret: Option<String>,
    /// A priors overlay (from `wozkit priors learn`) for the served study it names: the hints
    /// its wizards see are drawn with these priors (docs/priors.md). Repeatable.
    #[arg(long = "priors", value_name = "FILE")]
    priors: Vec<PathBuf>,
    /// Threads running the server's tasks (rooms, connections, requests). Default: one fewer
    /// than the machine's cores, at least one, which leaves a core to the SQLite writer and
    /// checkpointer threads, the kernel's socket work and the blocking pool (reports,
    /// downloads, password hashing); on two cores that measured about 5 % less CPU per
    /// command at 10,000 participants than a thread per core (docs/performance.md).
    #[arg(long, env = "WOZKIT_WORKERS", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    workers: Option<u16>,
}

/// Parses `--trusted-proxy`: a CIDR range, or one address.
fn parse_cidr(arg: &str) -> std::result::Result<ipnet::IpNet, String> {
    let arg = arg.trim();
    arg.parse::<ipnet::IpNet>()
        .or_else(|_| arg.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{arg}`: write an address or a range, e.g. 127.0.0.1 or 10.0.0.0/8"))
}

/// Parses `--frame-ancestors`: an http(s) origin, scheme and host (and port) only.
fn parse_origin(arg: &str) -> std::result::Result<String, String> {
    let arg = arg.trim().trim_end_matches('/');
    let rest = arg
        .strip_prefix("https://")
        .or_else(|| arg.strip_prefix("http://"));
    let ok = rest.is_some_and(|r| {
        !r.is_empty()
            && r.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]*".contains(c))
    });
    if ok {
        Ok(arg.to_string())
    } else {
        Err(format!(
            "`{arg}`: write an origin such as https://survey.example.org (no path, no spaces)"
        ))
    }
}

/// Parses `--system NAME=URL[#MODEL]`.
pub(crate) fn parse_system(arg: &str) -> std::result::Result<(String, SystemSpec), String> {
    let (name, rest) = arg.split_once('=').ok_or_else(|| {
        format!("`{arg}`: write NAME=URL, e.g. my-model=http://localhost:8000/v1")
    })?;
    let name = name.trim();
    if name.is_empty() || name.contains('~') {
        return Err(format!(
            "`{arg}`: the name must be non-empty and without `~`"
        ));
    }
    let (url, model) = match rest.split_once('#') {
        Some((url, model)) if !model.trim().is_empty() => (url.trim(), model.trim()),
        _ => (rest.trim(), name),
    };
    let spec = SystemSpec::openai(url, model);
    spec.validate().map_err(|e| format!("`{arg}`: {e}"))?;
    Ok((name.to_string(), spec))
}

/// Puts the `--system` and `--add-system` endpoints into every served study with a chat or
/// arena evaluation: `replace` become its only systems under test (the study's own are left
/// out, unless a model judge asks one of them), `add` join those it has.
fn apply_systems(
    studies: &mut [LoadedStudy],
    replace: &[(String, SystemSpec)],
    add: &[(String, SystemSpec)],
) -> Result<()> {
    if replace.is_empty() && add.is_empty() {
        return Ok(());
    }
    let flag = if replace.is_empty() {
        "--add-system"
    } else {
        "--system"
    };
    let mut used = false;
    for s in studies.iter_mut() {
        let study = &mut s.study;
        let Some(ev) = study.evaluation.as_mut().filter(|e| e.task.is_live()) else {
            continue;
        };
        used = true;
        if !replace.is_empty() {
            let fewest = if ev.task == wozkit_core::evaluation::EvalTask::Arena {
                2
            } else {
                1
            };
            let given = replace.len() + add.len();
            if given < fewest {
                anyhow::bail!(
                    "--system: the arena of study `{}` needs at least two systems; give another \
                     --system, or --add-system to battle beside the study's own",
                    study.id
                );
            }
            let judged: Vec<&str> = ev
                .judges
                .iter()
                .filter_map(|j| j.system.as_deref())
                .collect();
            let dropped: Vec<String> = ev
                .systems
                .iter()
                .filter(|n| !judged.contains(&n.as_str()))
                .cloned()
                .collect();
            for name in dropped {
                study.systems.shift_remove(&name);
            }
            ev.systems.clear();
            ev.systems_defaulted = false;
        }
        for (name, spec) in replace.iter().chain(add) {
            study.systems.insert(name.clone(), spec.clone());
            if !ev.systems.contains(name) && !ev.systems_defaulted {
                ev.systems.push(name.clone());
            }
        }
        load::default_systems(study);
    }
    if !used {
        anyhow::bail!("{flag}: no served study has a chat or arena evaluation to use it");
    }
    Ok(())
}

/// One line per served chat or arena: the systems its participants meet.
fn systems_in_play(studies: &[LoadedStudy]) -> Vec<String> {
    studies
        .iter()
        .filter_map(|s| {
            let ev = s.study.evaluation.as_ref().filter(|e| e.task.is_live())?;
            let names: Vec<String> = ev
                .systems
                .iter()
                .map(|n| match s.study.systems.get(n) {
                    Some(SystemSpec::Openai(o)) => {
                        format!("{n} ({}, model {})", o.base_url, o.model)
                    }
                    Some(SystemSpec::Builtin(_)) => format!("{n} (built-in scripted)"),
                    _ => n.clone(),
                })
                .collect();
            Some(format!(
                "systems in play ({}): {}",
                s.study.id,
                names.join(", ")
            ))
        })
        .collect()
}

/// How the payment table prices each row (shown by `wozkit payments --help`).
const PAYMENTS_HELP: &str = "\
One row per participant of a dialogue session, and one per participant of an evaluation study.
Amounts follow the study's `payment:` (base, per_minute, max_minutes, bonus, no_partner); a study
without one pays 0. A platform takes a submitted code as a finished submission, so the study says
who is paid by giving a code at each ending.

Dialogue sessions (status completed / no_partner / incomplete): completed gets base + per_minute x
minutes from the clock start (capped at max_minutes) + bonus when its condition holds; no_partner
gets the no_partner rate; incomplete gets 0.

Evaluation participants (status completed / screened_onboarding / screened_gold /
screened_blocklist / no_items / abandoned; the row also gives the judgments counted, the surplus
judgments, whether surplus is paid (evaluation.pay_surplus), the items paid, and the share of
attention checks answered right):
  - completed, and screened_gold with a code (they passed onboarding and judged in good faith),
    get base + per_minute x minutes from entry to the code (or to the screening), capped;
  - screened_onboarding and no_items with a code get the no_partner rate, as a fixed screen-out
    payment for someone turned away before the task;
  - anyone without a code, abandoned or screened_blocklist gets 0: decide by hand.
The study format has no per-item rate: items_paid is the count to pay per item by hand, and
pay_surplus changes no amount.

Every row also gives the researchers' review (the review page of the console, each decision an
event of the study's review log `review-<study>`): decision (approve / reject, the latest; empty
when undecided), review_bonus (the latest bonus given, to the cent: what sending the decisions
pays on the platform in all) and total_with_bonus (total + review_bonus).";

#[derive(Args)]
#[command(after_long_help = PAYMENTS_HELP)]
pub struct PaymentsArgs {
    /// Data directory (SQLite), sqlite:FILE, or postgres://….
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
    /// Only this study's participants, priced by this study file (or built-in study); without
    /// it each row is priced by the built-in study of the same id, if there is one.
    #[arg(long)]
    study: Option<String>,
    /// Write the CSV here instead of standard output.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Check a completion code instead (of a dialogue session, or an evaluation participant's
    /// completion or screening code): prints whose it is, exits 1 if it is not valid.
    #[arg(long, value_name = "CODE")]
    verify: Option<String>,
    /// Price test sessions too (/try, lab links with test=1); they are left out otherwise.
    #[arg(long)]
    include_test: bool,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The runtime of `serve`: `workers` threads, or one fewer than the cores (see
/// [`ServeArgs::workers`]).
fn serve_runtime(workers: Option<u16>) -> Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let workers = workers.map_or(cores.saturating_sub(1).max(1), usize::from);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn load_study(arg: &str) -> Result<LoadedStudy> {
    load::resolve(arg)
        .map_err(|d| anyhow::anyhow!("{d}"))
        .with_context(|| format!("study `{arg}` does not load"))
}

pub fn serve(args: ServeArgs) -> Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let mut studies = args
        .studies
        .iter()
        .map(|s| load_study(s))
        .collect::<Result<Vec<_>>>()?;
    apply_systems(&mut studies, &args.systems, &args.add_systems)?;
    crate::priors_cmd::apply_overlays(&mut studies, &args.priors)?;
    let simulated_user = simulated_user(&args, &studies)?;
    serve_runtime(args.workers)?.block_on(async move {
        let store = open_store(&args.data, Access::Write).await?;
        let env_password = std::env::var("WOZKIT_RESEARCHER_PASSWORD").ok();
        let generated = auth::ensure_password(store.as_ref(), env_password.as_deref())
            .await
            .context("cannot set up the researcher account admin")?;
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let base = format!("http://{}", listener.local_addr().unwrap_or(args.addr));
        println!("wozkit is serving on {base} (data: {})", args.data);
        print_links(&base, &studies, simulated_user.as_deref());
        print_researcher_account(generated, env_password.is_some());
        let metrics_token = std::env::var("WOZKIT_METRICS_TOKEN")
            .ok()
            .and_then(|t| MetricsToken::new(&t));
        let metrics_listener = metrics_listener(args.metrics_addr).await?;
        if let (Some(l), Some(addr)) = (&metrics_listener, args.metrics_addr) {
            let at = l.local_addr().unwrap_or(addr);
            println!("  metrics (no token):      http://{at}/metrics");
        }
        if metrics_token.is_some() {
            println!("  metrics (bearer token of WOZKIT_METRICS_TOKEN): {base}/metrics");
        }
        println!("Press Ctrl-C to stop; sessions resume where they were on the next start.");
        let blocklist = read_blocklist(args.blocklist.as_deref())?;
        let payers = platform_payers(store.as_ref(), &studies).await?;
        let config = Config {
            studies,
            tunables: Tunables {
                join_per_minute: args.join_limit,
                blocklist,
                metrics_token,
                payers,
                instance_id: args
                    .instance_id
                    .clone()
                    .unwrap_or_else(wozkit_store::new_id),
                advertise_url: args.advertise_url.clone().unwrap_or_default(),
                room_lease_ms: args.room_lease_ms,
                cluster_secret: args
                    .cluster_secret
                    .as_deref()
                    .and_then(wozkit_server::ClusterSecret::new),
                // One process holds a SQLite data directory; PostgreSQL may be shared.
                sole_instance: !is_postgres(&args.data),
                trusted_proxies: args.trusted_proxies.clone(),
                frame_ancestors: args.frame_ancestors.clone(),
                simulated_user,
                ..Tunables::default()
            },
        };
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match metrics_listener {
            Some(m) => launch_with_metrics_listener(config, store, listener, m, shutdown).await,
            None => launch_with_listener(config, store, listener, shutdown).await,
        }
        .context("the server stopped with an error")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The simulated user of `--simulated-user`, for the first served study with a WoZ room.
fn simulated_user(args: &ServeArgs, studies: &[LoadedStudy]) -> Result<Option<Arc<ModelUser>>> {
    Ok(match &args.simulated_user {
        Some(arg) => {
            let Some(woz) = studies.iter().find(|s| s.study.has_room()) else {
                anyhow::bail!("--simulated-user: none of the served studies has a WoZ room");
            };
            Some(crate::simulate_users_cmd::resolve_user(
                "--simulated-user",
                arg,
                woz,
            )?)
        }
        None => None,
    })
}

/// Prints the entry link of each study, the systems in play, the simulated user, and the
/// pages to try the roles and for researchers.
fn print_links(base: &str, studies: &[LoadedStudy], simulated_user: Option<&ModelUser>) {
    for s in studies {
        println!(
            "  participant entry link ({}): {base}/join?study={}",
            s.study.title, s.study.id
        );
        println!(
            "    Prolific: …&PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}&SESSION_ID={{{{%SESSION_ID%}}}}"
        );
    }
    for line in systems_in_play(studies) {
        println!("  {line}");
    }
    if let Some(user) = simulated_user {
        println!(
            "  simulated user `{}` plays the user's seat for every test participant who \
             arrives as the wizard (the try page shows the wizard's side only)",
            user.spec.name
        );
    }
    println!("  try both roles yourself: {base}/try");
    println!("  researcher pages:        {base}/researcher");
}

/// Prints how to sign in as a researcher: the admin's password when it was just generated.
fn print_researcher_account(generated: Option<String>, from_env: bool) {
    match generated {
        Some(pw) => {
            println!("  researcher account admin, password (shown once, stored hashed): {pw}")
        }
        None if from_env => {
            println!("  researcher account admin: password from WOZKIT_RESEARCHER_PASSWORD")
        }
        None => println!(
            "  researcher accounts: `wozkit researchers list` (admin's password was printed on first start; WOZKIT_RESEARCHER_PASSWORD sets it)"
        ),
    }
}

/// The listener of `--metrics-addr`, when given.
async fn metrics_listener(addr: Option<SocketAddr>) -> Result<Option<tokio::net::TcpListener>> {
    Ok(match addr {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("--metrics-addr: cannot listen on {addr}"))?,
        ),
        None => None,
    })
}

/// The worker ids of the `--blocklist` file, one a line (`#` starts a comment); none without
/// one.
fn read_blocklist(path: Option<&std::path::Path>) -> Result<std::collections::HashSet<String>> {
    Ok(match path {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("--blocklist {}: cannot read the file", path.display()))?
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim().to_string())
            .filter(|l| !l.is_empty())
            .collect(),
        None => Default::default(),
    })
}

/// Whether `--data` names a PostgreSQL database (which several instances may share).
fn is_postgres(data: &str) -> bool {
    data.starts_with("postgres://") || data.starts_with("postgresql://")
}

/// The crowd platforms' clients the console pays through, per study: Prolific from
/// `PROLIFIC_TOKEN` and the Prolific study ids (`PROLIFIC_STUDIES` / `PROLIFIC_STUDY_ID`), MTurk
/// from the HITs `wozkit mturk create-hit` recorded and the AWS credentials in the environment.
/// Says which studies got which.
async fn platform_payers(
    store: &dyn wozkit_store::Store,
    studies: &[wozkit_core::load::LoadedStudy],
) -> Result<wozkit_server::Payers> {
    let mut payers = wozkit_server::Payers::default();
    for s in studies {
        let id = &s.study.id;
        if let Some(p) = wozkit_platforms::prolific::payer_for_study(id)
            .with_context(|| format!("study {id}: cannot set up the Prolific client"))?
        {
            println!("  study {id}: the console pays through Prolific");
            payers.insert(id, p);
        }
        #[cfg(feature = "mturk")]
        {
            let has_keys = std::env::var("AWS_ACCESS_KEY_ID").is_ok_and(|k| !k.trim().is_empty());
            if has_keys && let Ok(p) = crate::mturk_cmd::payer_for_study(store, id).await {
                println!("  study {id}: the console pays through Mechanical Turk");
                payers.insert(id, p);
            }
        }
    }
    #[cfg(not(feature = "mturk"))]
    let _ = store;
    Ok(payers)
}

pub fn payments(args: PaymentsArgs) -> Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open_store(&args.data, Access::Snapshot).await?;
        if let Some(code) = &args.verify {
            let verdict = payments::verify(store.as_ref(), code).await?;
            store.close().await;
            return Ok(print_verdict(verdict, code, &args.data));
        }
        let given = args
            .study
            .as_deref()
            .map(load_study)
            .transpose()?
            .map(Arc::new);
        let filter = given.as_ref().map(|s| s.study.id.clone());
        let study_of = |id: &str| -> Option<Arc<LoadedStudy>> {
            match &given {
                Some(s) if s.study.id == id => Some(s.clone()),
                Some(_) => None,
                None => load::builtin_names()
                    .iter()
                    .any(|n| n == id)
                    .then(|| load::load_builtin(id).ok().map(Arc::new))
                    .flatten(),
            }
        };
        let rows = payments::payments(
            store.as_ref(),
            filter.as_deref(),
            &study_of,
            args.include_test,
        )
        .await?;
        store.close().await;
        match &args.out {
            Some(path) => {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                payments::write_csv(&rows, file)?;
                eprintln!(
                    "{} participant(s) written to {}",
                    rows.len(),
                    path.display()
                );
            }
            None => payments::write_csv(&rows, std::io::stdout().lock())?,
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Prints whether a completion code is valid, and whose it is: success when it is valid.
fn print_verdict(verdict: Verdict, code: &str, data: &str) -> ExitCode {
    match verdict {
        Verdict::Valid {
            participant,
            session,
        } => {
            let ids: Vec<String> = participant
                .external_ids
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            // An evaluation participant's "session" is their own log.
            println!(
                "valid: participant {} ({}; {}), study {}, session {}",
                participant.id,
                participant.platform.as_str(),
                if ids.is_empty() {
                    "no crowd ids".to_string()
                } else {
                    ids.join(", ")
                },
                participant.study_id,
                session.as_deref().unwrap_or("none"),
            );
            ExitCode::SUCCESS
        }
        Verdict::Unknown => {
            println!("not valid: no participant in {} has the code {code}", data);
            ExitCode::FAILURE
        }
        Verdict::NoKey => {
            println!(
                "not valid: {} has no completion-code key (no server ran on it)",
                data
            );
            ExitCode::FAILURE
        }
    }
}

/// `wozkit export --format log`: one JSON log per session with its metrics (or JSON Lines when
/// `out` ends in `.jsonl`).
pub fn export_log(
    data: &str,
    study: Option<&str>,
    include_test: bool,
    out: &std::path::Path,
) -> Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open_store(data, Access::Snapshot).await?;
        let n = records::export_log(store.as_ref(), study, include_test, out).await;
        store.close().await;
        let n = n.with_context(|| format!("cannot export to {}", out.display()))?;
        eprintln!("{n} session log(s) written to {}", out.display());
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena() -> LoadedStudy {
        load::load_builtin("arena-demo").expect("arena-demo loads")
    }

    #[test]
    fn a_system_is_a_name_and_an_openai_base_url_with_an_optional_model() {
        let (name, spec) = parse_system("mine=http://gpu:8000/v1/#served-model").unwrap();
        assert_eq!(name, "mine");
        match spec {
            SystemSpec::Openai(s) => {
                assert_eq!(s.base_url, "http://gpu:8000/v1");
                assert_eq!(s.model, "served-model");
                assert!(s.stream);
            }
            other => panic!("not an openai system: {other:?}"),
        }
        let (_, spec) = parse_system("llama=http://127.0.0.1:8080/v1").unwrap();
        assert!(matches!(spec, SystemSpec::Openai(s) if s.model == "llama"));
    }

    #[test]
    fn bad_systems_are_refused_with_the_reason() {
        assert!(
            parse_system("http://x/v1")
                .unwrap_err()
                .contains("NAME=URL")
        );
        assert!(
            parse_system("=http://x/v1")
                .unwrap_err()
                .contains("non-empty")
        );
        assert!(
            parse_system("a~b=http://x/v1")
                .unwrap_err()
                .contains("without `~`")
        );
        assert!(parse_system("a=ftp://x").unwrap_err().contains("http://"));
    }

    #[test]
    fn systems_replace_the_arena_s_own() {
        let mut studies = vec![arena()];
        let given = [
            parse_system("terse=http://127.0.0.1:1/v1").unwrap(),
            parse_system("mine=http://127.0.0.1:2/v1").unwrap(),
        ];
        apply_systems(&mut studies, &given, &[]).unwrap();
        let study = &studies[0].study;
        assert!(
            matches!(study.systems["terse"], SystemSpec::Openai(_)),
            "replaced"
        );
        assert!(
            !study.systems.contains_key("chatty"),
            "the demo bot is gone"
        );
        let ev = study.evaluation.as_ref().unwrap();
        assert_eq!(ev.systems, ["terse", "mine"]);
        assert_eq!(ev.items().len(), 1, "one pair of two systems");
        let lines = systems_in_play(&studies);
        assert_eq!(
            lines,
            [
                "systems in play (arena-demo): terse (http://127.0.0.1:1/v1, model terse), \
              mine (http://127.0.0.1:2/v1, model mine)"
            ]
        );
    }

    #[test]
    fn one_system_is_no_arena() {
        let mut studies = vec![arena()];
        let given = [parse_system("mine=http://127.0.0.1:2/v1").unwrap()];
        let err = apply_systems(&mut studies, &given, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least two systems"), "{err}");
        assert!(err.contains("--add-system"), "{err}");
        let mine = [parse_system("mine=http://127.0.0.1:2/v1").unwrap()];
        let other = [parse_system("other=http://127.0.0.1:3/v1").unwrap()];
        apply_systems(&mut studies, &mine, &other).unwrap();
        let ev = studies[0].study.evaluation.as_ref().unwrap();
        assert_eq!(ev.systems, ["mine", "other"]);
    }

    #[test]
    fn added_systems_join_the_arena_s_own() {
        let mut studies = vec![arena()];
        let given = [
            parse_system("terse=http://127.0.0.1:1/v1").unwrap(),
            parse_system("mine=http://127.0.0.1:2/v1").unwrap(),
        ];
        apply_systems(&mut studies, &[], &given).unwrap();
        let study = &studies[0].study;
        assert!(
            matches!(study.systems["terse"], SystemSpec::Openai(_)),
            "replaced"
        );
        assert!(
            matches!(study.systems["chatty"], SystemSpec::Builtin(_)),
            "kept"
        );
        let ev = study.evaluation.as_ref().unwrap();
        assert_eq!(ev.systems, ["terse", "chatty", "mine"]);
        assert_eq!(ev.items().len(), 3, "three pairs of three systems");
        let line = &systems_in_play(&studies)[0];
        assert!(line.contains("chatty (built-in scripted)"), "{line}");
    }

    #[test]
    fn systems_need_a_study_that_talks_to_them() {
        let mut studies = vec![load::load_builtin("acute-eval").unwrap()];
        let given = [parse_system("mine=http://127.0.0.1:2/v1").unwrap()];
        let err = apply_systems(&mut studies, &given, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no served study has a chat or arena"), "{err}");
    }
}
