//! Import, export and report figures at corpus scale, printed (no assertions):
//!
//! 1. a synthetic Taskmaster-1 file of 13,215 conversations (the size of the released
//!    `self-dialogs.json`) with 22 utterances each is imported into a temporary SQLite store;
//! 2. the store is exported to every format;
//! 3. 10,000 live-style sessions (labelled wizard messages, outcome, questionnaire, votes) are
//!    written to a second store and reported on.
//!
//! Each step runs in its own process and prints its time and its peak resident memory
//! (`VmHWM` from `/proc/self/status`). Run with `cargo bench -p wozkit-data --bench store_export`.

use std::path::Path;
use std::time::Instant;

use indexmap::IndexMap;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::model::ActType;
use wozkit_data::Format;
use wozkit_data::report::html::render_html;
use wozkit_data::report::{ReportOptions, build_report};
use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store, import_files};
use wozkit_store::{NewEvent, NewSession, Store};

const CONVERSATIONS: usize = 13_215;
const TURNS: usize = 22;
const REPORT_SESSIONS: usize = 10_000;

const WORDS: [&str; 16] = [
    "i",
    "would",
    "like",
    "to",
    "book",
    "a",
    "table",
    "for",
    "two",
    "at",
    "seven",
    "please",
    "the",
    "restaurant",
    "tonight",
    "okay",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // `--phase NAME DIR`: one step in a child process, so its peak memory is its own.
    if let Some(i) = args.iter().position(|a| a == "--phase") {
        let (Some(phase), Some(dir)) = (args.get(i + 1), args.get(i + 2)) else {
            eprintln!("usage: --phase NAME DIR");
            return;
        };
        runtime.block_on(phase_main(phase, Path::new(dir)));
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("current exe");
    let phases = ["generate", "import"]
        .into_iter()
        .chain(OUTPUTS.iter().map(|(name, _)| *name))
        .chain(["live", "report"]);
    for phase in phases {
        let status = std::process::Command::new(&exe)
            .args(["--phase", phase])
            .arg(tmp.path())
            .status()
            .expect("run phase");
        if !status.success() {
            eprintln!("phase {phase} failed");
            return;
        }
    }
}

const OUTPUTS: [(&str, &str); 10] = [
    ("taskmaster1", "tm1.json"),
    ("crosswoz", "crosswoz.json.zip"),
    ("multiwoz", "multiwoz.json"),
    ("convlab3", "convlab3.json"),
    ("crsarena", "crsarena.json"),
    ("crsarena_eval", "crsarena_eval.json"),
    ("crwiz", "crwiz"),
    ("jsonl", "all.jsonl"),
    ("survey-csv", "survey.csv"),
    ("votes-csv", "votes.csv"),
];

/// Peak resident memory of this process, in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN);
    kib / 1024.0
}

fn sentence(rng: &mut ChaCha8Rng) -> String {
    let n = rng.random_range(3..14);
    let words: Vec<&str> = (0..n)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect();
    words.join(" ")
}

fn taskmaster_file(path: &Path, rng: &mut ChaCha8Rng) {
    let conversations: Vec<Value> = (0..CONVERSATIONS)
        .map(|c| {
            let utterances: Vec<Value> = (0..TURNS)
                .map(|i| {
                    let speaker = if i % 2 == 0 { "USER" } else { "ASSISTANT" };
                    json!({"index": i, "speaker": speaker, "text": sentence(rng)})
                })
                .collect();
            json!({
                "conversation_id": format!("dlg-{c:05}"),
                "instruction_id": "restaurant-table-1",
                "utterances": utterances,
            })
        })
        .collect();
    std::fs::write(path, serde_json::to_vec(&conversations).expect("json")).expect("write");
}

fn report(label: &str, started: Instant, extra: &str) {
    println!(
        "{label:<28} {:>8.2} s   peak RSS {:>7.1} MiB   {extra}",
        started.elapsed().as_secs_f64(),
        peak_mib()
    );
}

async fn phase_main(phase: &str, dir: &Path) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    match phase {
        "generate" => {
            let file = dir.join("tm1.json");
            let started = Instant::now();
            taskmaster_file(&file, &mut rng);
            let size = std::fs::metadata(&file).map_or(0, |m| m.len());
            let extra = format!(
                "{CONVERSATIONS} conversations x {TURNS} turns, {:.1} MB",
                size as f64 / 1e6
            );
            report("generate taskmaster1 file", started, &extra);
        }
        "import" => {
            let file = dir.join("tm1.json");
            let store = open(&dir.join("data")).await;
            let started = Instant::now();
            let summary = import_files(&*store, Format::Taskmaster1, &[file], &NoProgress)
                .await
                .expect("import");
            store.close().await;
            let extra = format!("{} sessions, {} events", summary.sessions, summary.events);
            report("import taskmaster1", started, &extra);
        }
        "live" => {
            let store = open(&dir.join("live")).await;
            let started = Instant::now();
            write_live_sessions(&*store, &mut rng).await;
            store.close().await;
            report("write 10,000 live sessions", started, "");
        }
        "report" => {
            let store = open(&dir.join("live")).await;
            let started = Instant::now();
            let result = build_report(&*store, &ReportOptions::default())
                .await
                .expect("report");
            let html = render_html(&result);
            store.close().await;
            let extra = format!(
                "{} sessions, {} votes, HTML {:.0} kB",
                result.sessions,
                result.votes,
                html.len() as f64 / 1e3
            );
            report("report over 10,000", started, &extra);
        }
        name => export_phase(name, dir).await,
    }
}

async fn open(dir: &Path) -> std::sync::Arc<dyn Store> {
    wozkit_store::open(&dir.display().to_string())
        .await
        .expect("store")
}

async fn export_phase(name: &str, dir: &Path) {
    let (Some(format), Some((_, out))) = (
        ExportFormat::parse(name),
        OUTPUTS.iter().find(|(n, _)| *n == name),
    ) else {
        eprintln!("unknown phase {name}");
        return;
    };
    let store = open(&dir.join("data")).await;
    let options = ExportOptions {
        format,
        out: dir.join("out").join(out),
        split: None,
        study: None,
        include_test: false,
    };
    let started = Instant::now();
    let summary = export_store(&*store, &options, &NoProgress)
        .await
        .expect("export");
    store.close().await;
    let bytes: u64 = summary
        .files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok().map(|m| m.len()))
        .sum();
    let extra = format!(
        "{} sessions, {} files, {:.1} MB",
        summary.sessions_written,
        summary.files.len(),
        bytes as f64 / 1e6
    );
    report(&format!("export {name}"), started, &extra);
}

/// Sessions as a live study records them: labelled wizard turns, typed ones, an outcome, a
/// questionnaire and, every tenth session, a vote between two bots.
async fn write_live_sessions(store: &dyn Store, rng: &mut ChaCha8Rng) {
    let labels: [(&str, ActType); 6] = [
        ("request_robot_type", ActType::Request),
        ("okay", ActType::Interaction),
        ("inform_moving", ActType::Action),
        ("inform_arrival", ActType::Action),
        ("inform_robot_eta", ActType::Update),
        ("inform_risk", ActType::Update),
    ];
    let bots = ["alpha", "beta", "gamma", "delta"];
    let mut batch = Vec::new();
    for s in 0..REPORT_SESSIONS {
        let id = format!("live-{s:05}");
        let mut events = Vec::new();
        let wizard = Actor::Participant {
            role: Role::Wizard,
            participant: None,
        };
        let user = Actor::Participant {
            role: Role::User,
            participant: None,
        };
        for t in 0..TURNS {
            let (actor, role, source) = if t % 2 == 0 {
                (user.clone(), Role::User, MessageSource::Free)
            } else if rng.random_range(0..10) == 0 {
                (wizard.clone(), Role::Wizard, MessageSource::Free)
            } else {
                let (label, act_type) = labels[rng.random_range(0..labels.len())];
                let source = MessageSource::State {
                    state: label.into(),
                    label: label.into(),
                    act_type,
                    template: 0,
                };
                (wizard.clone(), Role::Wizard, source)
            };
            let text = sentence(rng);
            events.push(NewEvent {
                actor,
                kind: EventKind::Message { role, text, source },
                at_ms: 1_000 * t as u64,
            });
        }
        let answers: IndexMap<String, Value> = ["q1", "q2", "q3"]
            .iter()
            .map(|q| (q.to_string(), json!(rng.random_range(1..6))))
            .collect();
        events.push(NewEvent {
            actor: user.clone(),
            kind: EventKind::SurveyAnswered {
                role: Role::User,
                answers,
            },
            at_ms: 30_000,
        });
        if s % 10 == 0 {
            let (a, b) = (rng.random_range(0..4), rng.random_range(0..4));
            let pick = [bots[a], bots[b], "tie"][rng.random_range(0..3)];
            let vote = json!({"session_id": format!("t{s:05}"), "user_id": id, "crs1": bots[a],
                "crs2": bots[b], "vote": pick, "feedback": ""});
            events.push(NewEvent {
                actor: user.clone(),
                kind: EventKind::Annotation {
                    key: "vote".into(),
                    value: vote,
                },
                at_ms: 31_000,
            });
        }
        events.push(NewEvent {
            actor: Actor::System,
            kind: EventKind::SessionEnded {
                reason: EndReason::Terminal,
                goal_reached: rng.random_range(0..3) > 0,
            },
            at_ms: 32_000,
        });
        batch.push((id, events));
    }
    use futures_util::StreamExt;
    futures_util::stream::iter(batch)
        .map(|(id, events)| async move {
            let new = NewSession {
                id: id.clone(),
                study_id: "bench".into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: 0,
            };
            store.create_session(new).await.expect("create");
            store.append(&id, events).await.expect("append");
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
}
