//! `wozkit_loadgen::crowd` on an arena study served by the real `wozkit serve`: 50 simulated
//! workers (half with plain form posts, half reading the replies as NDJSON streams) chat with
//! two mock OpenAI-compatible systems (`alpha` whole, `beta` streamed) and vote. The mock
//! fails every 17th request, so some workers press "Try again" and their battles are void.
//! (The server keeps showing a side's failure after its retry was answered, and then refuses
//! further messages until the conversation ends: the study's fewest messages is 1 so that
//! such a worker can end and vote.)
//!
//! Checked against the crowd's own record of what it did:
//! - every vote: the `Judged` event of the worker's lease chose the same side (or tie / both
//!   bad), named the systems the reveal page showed, and is void exactly when the worker had
//!   to ask a system again;
//! - every history: each request a model received holds the worker's messages of one of its
//!   conversations, in order, and only that model's own replies, each the one it gave to that
//!   very history; each model got one request per turn and per retry, and failed as often as
//!   the workers retried it;
//! - the leaderboard JSON equals `wozkit_data::leaderboard::leaderboard` over the crowd's
//!   counted votes (in the order the server stored them) with the study's settings.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Server;
use wozkit_core::event::EventKind;
use wozkit_data::leaderboard::{MIN_BATTLES_FOR_INTERVAL, TIE, leaderboard};
use wozkit_data::report::evaluation::RankingOptions;
use wozkit_data::votes::Vote;
use wozkit_loadgen::crowd::{CrowdChat, CrowdConfig, CrowdReport};
use wozkit_loadgen::mock_system::{MockOptions, MockSystem, reply_text};

const STUDY: &str = "crowd-arena";
const WORKERS: usize = 50;
const FAIL_EVERY: u64 = 17;
const OPTIONS: RankingOptions = RankingOptions {
    elo_k: 16.0,
    elo_start: 1000.0,
    bootstrap: 200,
    seed: 5,
};

fn study_yaml(base_url: &str) -> String {
    format!(
        "id: {STUDY}\ntitle: Crowd arena\nversion: \"1\"\n\
         flow:\n  user:\n    - {{kind: consent}}\n    - {{kind: arena}}\n    - {{kind: completion}}\n  wizard: []\n\
         systems:\n\
         \x20 alpha: {{kind: openai, base_url: \"{base_url}\", model: alpha, limits: {{retries: 0, concurrency: 64, queue: 1000}}}}\n\
         \x20 beta: {{kind: openai, base_url: \"{base_url}\", model: beta, stream: true, limits: {{retries: 0, concurrency: 64, queue: 1000}}}}\n\
         evaluation:\n  task: arena\n  judgments_per_item: 200\n  items_per_worker: 1\n  lease_s: 900\n\
         \x20 conversation: {{min_turns: 1, max_turns: 4, feedback: true, reveal: true}}\n\
         \x20 question: Which assistant helped you more?\n\
         \x20 questions: [{{id: fluent, text: Were the answers fluent?, kind: likert, points: 5}}]\n\
         \x20 justification: {{required: false}}\n\
         \x20 leaderboard: {{public: true, elo_k: {}, elo_start: {}, bootstrap: {}, seed: {}}}\n",
        OPTIONS.elo_k, OPTIONS.elo_start, OPTIONS.bootstrap, OPTIONS.seed
    )
}

/// `GET path` on the server: the body of a 200 answer.
fn get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("request");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    assert!(out.starts_with("HTTP/1.1 200"), "GET {path}: {out}");
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    if out
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // One or more chunks: join them.
        let mut joined = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
            if n == 0 {
                break;
            }
            joined.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        return joined;
    }
    body.to_string()
}

/// The system of a side of a battle, as the reveal page named it.
fn system_of<'a>(c: &'a CrowdChat, side: &str) -> &'a str {
    let i = usize::from(side == "right");
    c.revealed.get(i).map_or("", String::as_str)
}

fn crowd(
    rt: &tokio::runtime::Runtime,
    url: &str,
    workers: usize,
    stream: bool,
    seed: u64,
) -> CrowdReport {
    let mut config = CrowdConfig::new(url, STUDY, workers);
    config.concurrency = workers;
    config.seed = seed;
    config.stream = stream;
    config.vote_noise = 0.2;
    config.worker_prefix = format!("arena-{seed}");
    let report = rt
        .block_on(wozkit_loadgen::crowd::run(config))
        .expect("crowd runs");
    eprintln!("{}", report.text());
    report
}

#[test]
fn crowd_votes_histories_and_the_leaderboard_agree_with_the_server() {
    let _turn = common::one_load_test_at_a_time();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mock = rt
        .block_on(MockSystem::start(MockOptions {
            delay: Duration::from_millis(20),
            fail_every: FAIL_EVERY,
        }))
        .expect("mock system");
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, study_yaml(&mock.base_url())).expect("study written");
    let mut server = Server::in_dir(study, tmp.path());
    server.start_without_join_limit();
    let url = format!("http://{}", server.addr);

    let plain = crowd(&rt, &url, WORKERS / 2, false, 11);
    let streamed = crowd(&rt, &url, WORKERS / 2, true, 12);
    let board_json = get(server.addr, &format!("/leaderboard/{STUDY}/json"));
    assert!(server.stop(), "the server did not stop cleanly");

    let mut chats: Vec<CrowdChat> = vec![];
    for r in [&plain, &streamed] {
        assert_eq!(
            (r.failed, r.finished),
            (0, (WORKERS / 2) as u64),
            "{}",
            r.text()
        );
        chats.extend(r.chats.iter().cloned());
    }
    assert_eq!(chats.len(), WORKERS);
    for c in &chats {
        assert!(c.submitted && c.page == "arena", "{c:?}");
        assert!((1..=4).contains(&c.sent.len()), "{c:?}");
        let mut revealed = c.revealed.clone();
        revealed.sort();
        assert_eq!(revealed, ["alpha", "beta"], "{c:?}");
        assert!(c.vote.is_some() && c.reason.is_some(), "{c:?}");
    }
    let retried = chats.iter().filter(|c| !c.retried.is_empty()).count();
    assert!(
        retried > 0,
        "no system failed: the retry path was not walked"
    );
    assert!(chats.iter().any(|c| c.reason.as_deref() == Some("longer")));

    // Every vote, against the `Judged` event of its lease.
    let (judged, leases) = rt.block_on(async {
        let store = wozkit_store::open_snapshot(&server.data.to_string_lossy())
            .await
            .expect("store");
        let leases = store.leases(STUDY).await.expect("leases");
        let mut judged = BTreeMap::new();
        let mut logs: Vec<String> = leases.iter().map(|l| format!("log-{}", l.worker)).collect();
        logs.sort();
        logs.dedup();
        for log in logs {
            for e in store.events(&log, 0).await.expect("log events") {
                if let EventKind::Judged(j) = e.kind {
                    judged.insert(j.lease.clone(), (log.clone(), e.at_ms, *j));
                }
            }
        }
        (judged, leases)
    });
    assert_eq!(judged.len(), WORKERS, "one judgment per worker");
    assert_eq!(leases.len(), WORKERS, "one battle per worker");
    for c in &chats {
        let (_, _, j) = judged
            .get(&c.lease)
            .unwrap_or_else(|| panic!("no judgment of lease {}", c.lease));
        let side = match j.choice.as_deref() {
            Some(s) if s.ends_with("-left") => "left",
            Some(s) if s.ends_with("-right") => "right",
            Some(other) => other,
            None => "",
        };
        assert_eq!(Some(side), c.vote.as_deref(), "lease {}: {j:?}", c.lease);
        assert_eq!(j.systems, c.revealed, "lease {}", c.lease);
        assert_eq!(j.void, !c.retried.is_empty(), "lease {}: {c:?}", c.lease);
        assert_eq!(j.counted, !j.void, "lease {}", c.lease);
    }

    // Every history the systems were sent.
    let requests = mock.requests();
    for r in &requests {
        let roles: Vec<&str> = r.messages.iter().map(|(role, _)| role.as_str()).collect();
        assert!(
            roles
                .iter()
                .enumerate()
                .all(|(i, role)| *role == if i % 2 == 0 { "user" } else { "assistant" })
                && roles.len() % 2 == 1,
            "{} was sent {roles:?}",
            r.model
        );
        for i in (1..r.messages.len()).step_by(2) {
            assert_eq!(
                r.messages[i].1,
                reply_text(&r.model, &r.messages[..i]),
                "{} was sent a reply it did not give: {:?}",
                r.model,
                r.messages
            );
        }
        let said: Vec<&str> = r
            .messages
            .iter()
            .step_by(2)
            .map(|(_, t)| t.as_str())
            .collect();
        assert!(
            chats.iter().any(|c| c.revealed.contains(&r.model)
                && c.sent.len() >= said.len()
                && c.sent[..said.len()] == said[..]),
            "{} was sent messages no conversation with it had: {said:?}",
            r.model
        );
    }
    for model in ["alpha", "beta"] {
        let with = |c: &&CrowdChat| c.revealed.iter().any(|s| s == model);
        let turns: usize = chats.iter().filter(with).map(|c| c.sent.len()).sum();
        let retries: usize = chats
            .iter()
            .filter(with)
            .map(|c| {
                c.retried
                    .iter()
                    .filter(|s| system_of(c, s) == model)
                    .count()
            })
            .sum();
        let got = requests.iter().filter(|r| r.model == model).count();
        let failed = requests
            .iter()
            .filter(|r| r.model == model && r.failed)
            .count();
        assert_eq!(got, turns + retries, "{model}: requests vs turns + retries");
        assert_eq!(failed, retries, "{model}: failures vs retries");
    }

    // The leaderboard, from the crowd's own votes in the order the server stored them.
    let mut counted: Vec<(u64, &str, Vote)> = chats
        .iter()
        .filter(|c| c.retried.is_empty())
        .map(|c| {
            let (log, at_ms, _) = &judged[&c.lease];
            let vote = match c.vote.as_deref() {
                Some(side @ ("left" | "right")) => system_of(c, side).to_string(),
                _ => TIE.to_string(),
            };
            let v = Vote {
                session_id: String::new(),
                user_id: String::new(),
                crs1: system_of(c, "left").to_string(),
                crs2: system_of(c, "right").to_string(),
                vote,
                feedback: String::new(),
            };
            (*at_ms, log.as_str(), v)
        })
        .collect();
    counted.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let votes: Vec<Vote> = counted.into_iter().map(|(_, _, v)| v).collect();
    // As the server's page shows it: every system under test, intervals from the least number of
    // battles on.
    let mut expected = leaderboard(&votes, OPTIONS)
        .for_systems(&["alpha".into(), "beta".into()], MIN_BATTLES_FOR_INTERVAL);
    expected.void = retried;
    let served: serde_json::Value = serde_json::from_str(&board_json).expect("leaderboard JSON");
    assert_eq!(served, serde_json::to_value(&expected).expect("JSON"));
    assert_eq!(expected.votes, WORKERS - retried);
}
