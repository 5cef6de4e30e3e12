//! Arena battles in a store, as the server records them: two dialogue sessions per battle
//! (`ChatStarted` with side and opponent, the participant's messages in both, the systems'
//! replies) and the verdict in the participant's own log. Checks that the live leaderboard
//! ([`study_leaderboard`]), `wozkit report` on the same store, and a report on the CRSArena-Dial
//! export of the battles imported into a fresh store give the same numbers, and what the export
//! holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;
use wozkit_core::event::{
    Actor, EndReason, EventKind, ItemPool, Judgment, MessageSource, Role, VOTE_BOTH_BAD, VOTE_TIE,
};
use wozkit_data::leaderboard::{Leaderboard, study_leaderboard};
use wozkit_data::report::evaluation::RankingOptions;
use wozkit_data::report::{Filter, ReportOptions, build_report};
use wozkit_data::session::Format;
use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store, import_files};
use wozkit_store::{NewEvent, NewParticipant, NewSession, Platform, Store, TEST_KEY};

const STUDY: &str = "arena";

const OPTIONS: RankingOptions = RankingOptions {
    elo_k: 16.0,
    elo_start: 1000.0,
    bootstrap: 300,
    seed: 11,
};

/// How a battle ends.
#[derive(Clone, Copy)]
enum Verdict {
    Left,
    Right,
    Tie,
    BothBad,
    /// The right system failed a turn.
    Void,
    /// Submitted after the lease expired, the pair complete.
    Surplus,
}

/// One battle: participant, left and right system, the verdict, and when it was cast (ms).
struct Battle {
    participant: &'static str,
    left: &'static str,
    right: &'static str,
    verdict: Verdict,
    at_ms: u64,
}

fn battles() -> Vec<Battle> {
    use Verdict::*;
    let b = |participant, left, right, verdict, at_ms| Battle {
        participant,
        left,
        right,
        verdict,
        at_ms,
    };
    // Cast times interleave the participants, so cast order is not log order; p3 and p1 vote
    // in the same millisecond (ordered by log id: log-p1 first).
    vec![
        b("p2", "alpha", "beta", Left, 1_700_000_010_000),
        b("p1", "beta", "gamma", Right, 1_700_000_020_000),
        b("p3", "gamma", "alpha", Left, 1_700_000_030_000),
        b("p1", "alpha", "gamma", Tie, 1_700_000_040_000),
        b("p2", "beta", "gamma", BothBad, 1_700_000_050_000),
        b("p3", "alpha", "beta", Void, 1_700_000_060_000),
        b("p3", "beta", "alpha", Right, 1_700_000_070_000),
        b("p1", "gamma", "beta", Left, 1_700_000_070_000),
        b("p2", "gamma", "alpha", Surplus, 1_700_000_080_000),
        b("p2", "alpha", "gamma", Right, 1_700_000_090_000),
        b("p1", "beta", "alpha", Left, 1_700_000_100_000),
        // A test participant: their vote would move every number.
        b("pt", "beta", "alpha", Left, 1_700_000_110_000),
    ]
}

fn participant_actor(p: &str) -> Actor {
    Actor::Participant {
        role: Role::User,
        participant: Some(p.to_string()),
    }
}

/// Writes the two sessions of battle `n`; returns their ids (left, right).
async fn battle_sessions(store: &dyn Store, n: usize, battle: &Battle) -> (String, String) {
    let item = format!("{}~{}", battle.left, battle.right);
    let lease = format!("lease-{n}");
    let ids = (format!("chat-{n}-l"), format!("chat-{n}-r"));
    let start = battle.at_ms - 60_000;
    for (side, system, id, opponent) in [
        ("left", battle.left, &ids.0, &ids.1),
        ("right", battle.right, &ids.1, &ids.0),
    ] {
        store
            .create_session(NewSession {
                id: id.clone(),
                study_id: STUDY.into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: start,
            })
            .await
            .expect("create battle session");
        let bot = Actor::Bot {
            role: Role::Wizard,
            name: system.to_string(),
        };
        let user = participant_actor(battle.participant);
        let mut events = vec![(
            Actor::System,
            EventKind::ChatStarted {
                participant: battle.participant.into(),
                page: "arena".into(),
                item: item.clone(),
                lease: lease.clone(),
                system: system.into(),
                side: Some(side.into()),
                opponent: Some(opponent.clone()),
            },
        )];
        for turn in 0..2 {
            events.push((
                user.clone(),
                EventKind::Message {
                    role: Role::User,
                    text: format!(
                        "{} asks, turn {turn}, \"quoted\", comma",
                        battle.participant
                    ),
                    source: MessageSource::Free,
                },
            ));
            if matches!(battle.verdict, Verdict::Void) && side == "right" && turn == 1 {
                events.push((
                    Actor::System,
                    EventKind::SystemFailed {
                        system: system.into(),
                        error: "timed out after 30 s".into(),
                    },
                ));
                continue;
            }
            events.push((
                bot.clone(),
                EventKind::Message {
                    role: Role::Wizard,
                    text: format!("{system} answers turn {turn}"),
                    source: MessageSource::Free,
                },
            ));
            if side == "left" {
                events.push((
                    user.clone(),
                    EventKind::TurnAnnotated {
                        turn: turn * 2 + 1,
                        labels: Vec::new(),
                        score: None,
                        feedback: Some(sentiment(n, turn).into()),
                    },
                ));
            }
        }
        events.push((
            Actor::System,
            EventKind::SessionEnded {
                reason: EndReason::Finished,
                goal_reached: false,
            },
        ));
        let events = events
            .into_iter()
            .enumerate()
            .map(|(i, (actor, kind))| NewEvent {
                actor,
                kind,
                at_ms: start + i as u64 * 1_000,
            })
            .collect();
        store.append(id, events).await.expect("append battle");
    }
    ids
}

/// The live feedback given to reply `turn` of battle `n`'s left side.
fn sentiment(n: usize, turn: u32) -> &'static str {
    if (n + turn as usize).is_multiple_of(3) {
        "satisfied"
    } else {
        "frustrated"
    }
}

fn judgment(n: usize, battle: &Battle, (left, right): &(String, String)) -> Judgment {
    let choice = match battle.verdict {
        Verdict::Left | Verdict::Void | Verdict::Surplus => left.clone(),
        Verdict::Right => right.clone(),
        Verdict::Tie => VOTE_TIE.into(),
        Verdict::BothBad => VOTE_BOTH_BAD.into(),
    };
    let void = matches!(battle.verdict, Verdict::Void);
    let surplus = matches!(battle.verdict, Verdict::Surplus);
    Judgment {
        page: "arena".into(),
        item: format!("{}~{}", battle.left, battle.right),
        lease: format!("lease-{n}"),
        pool: ItemPool::Item,
        dialogues: vec![left.clone(), right.clone()],
        systems: vec![battle.left.into(), battle.right.into()],
        choice: Some(choice),
        justification: n
            .is_multiple_of(2)
            .then(|| format!("battle {n}: clearer, \"more\" helpful")),
        answers: IndexMap::new(),
        turns: Vec::new(),
        counted: !void && !surplus,
        surplus,
        gold_correct: None,
        claimed_at_ms: battle.at_ms - 70_000,
        void,
    }
}

/// A store holding every battle's sessions and every participant's log.
async fn arena_store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    let mut logs: BTreeMap<&str, Vec<NewEvent>> = BTreeMap::new();
    for (n, battle) in battles().iter().enumerate() {
        let ids = battle_sessions(&*store, n, battle).await;
        let p = battle.participant;
        let log = logs.entry(p).or_insert_with(|| {
            vec![NewEvent {
                actor: participant_actor(p),
                kind: EventKind::ParticipantLogStarted {
                    participant: p.into(),
                    study: STUDY.into(),
                    study_version: "1".into(),
                },
                at_ms: 1_600_000_000_000,
            }]
        });
        log.push(NewEvent {
            actor: participant_actor(p),
            kind: EventKind::Judged(Box::new(judgment(n, battle, &ids))),
            at_ms: battle.at_ms,
        });
    }
    for (p, events) in logs {
        let mut external_ids = BTreeMap::new();
        if p == "pt" {
            external_ids.insert(TEST_KEY.to_string(), "1".to_string());
        }
        store
            .create_participant(NewParticipant {
                id: p.into(),
                token_hash: format!("hash-{p}"),
                study_id: STUDY.into(),
                platform: Platform::Prolific,
                worker_id: Some(format!("W-{p}")),
                external_ids,
                flow_step: "0".into(),
                created_at_ms: 1_000,
            })
            .await
            .expect("create participant");
        let id = format!("log-{p}");
        store
            .open_participant_log(NewSession {
                id: id.clone(),
                study_id: STUDY.into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: 1_000,
            })
            .await
            .expect("open log");
        store.append(&id, events).await.expect("append log");
    }
    (dir, store)
}

fn report_options(study: Option<&str>) -> ReportOptions {
    ReportOptions {
        filters: study
            .map(|s| Filter {
                key: "study".into(),
                value: s.into(),
            })
            .into_iter()
            .collect(),
        ranking: OPTIONS,
        ..ReportOptions::default()
    }
}

/// The expected win/loss/tie counts, folded by hand from [`battles`] (counted, non-test only).
fn expected_counts() -> BTreeMap<&'static str, (u64, u64, u64)> {
    let mut out: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for b in battles() {
        if b.participant == "pt" || matches!(b.verdict, Verdict::Void | Verdict::Surplus) {
            continue;
        }
        let (winner, loser) = match b.verdict {
            Verdict::Left => (b.left, b.right),
            Verdict::Right => (b.right, b.left),
            _ => {
                out.entry(b.left).or_default().2 += 1;
                out.entry(b.right).or_default().2 += 1;
                continue;
            }
        };
        out.entry(winner).or_default().0 += 1;
        out.entry(loser).or_default().1 += 1;
    }
    out
}

#[tokio::test]
async fn live_leaderboard_report_and_crsarena_round_trip_agree() {
    let (_dir, store) = arena_store().await;
    let lb: Leaderboard = study_leaderboard(&*store, STUDY, OPTIONS)
        .await
        .expect("leaderboard");

    // What the logs hold, counted independently.
    assert_eq!(lb.votes, 9, "11 battles, less one void and one surplus");
    assert_eq!(lb.void, 1);
    let counts: BTreeMap<&str, (u64, u64, u64)> = lb
        .systems
        .iter()
        .map(|s| (s.name.as_str(), (s.wins, s.losses, s.ties)))
        .collect();
    assert_eq!(counts, expected_counts());
    assert!(lb.systems.iter().all(|s| s.bt_strength.is_some()));
    let ranks: Vec<usize> = lb.systems.iter().map(|s| s.rank).collect();
    assert_eq!(ranks, [1, 2, 3]);

    // `wozkit report` on the same store: the same leaderboard.
    let report = build_report(&*store, &report_options(Some(STUDY)))
        .await
        .expect("report");
    assert_eq!(
        report.sessions,
        2 * (battles().len() - 1),
        "the test participant's chats are left out"
    );
    let judgments = report.judgments.clone().expect("judgments section");
    let board = report.leaderboard.as_ref().expect("leaderboard");
    assert_eq!(board.board, lb, "the report's leaderboard is the live one");
    let sources: Vec<(&str, usize, usize)> = board
        .sources
        .iter()
        .map(|s| (s.source.as_str(), s.votes, s.void))
        .collect();
    assert_eq!(sources, [("live", 9, 1)]);
    assert_eq!(judgments.void, 1);
    assert_eq!(
        judgments.win_rates, lb.grid,
        "the ACUTE grid is the leaderboard's"
    );
    let html = wozkit_data::report::html::render_html(&{
        let mut r = build_report(&*store, &report_options(Some(STUDY)))
            .await
            .expect("report");
        r.judgments = Some(judgments.clone());
        r
    });
    assert!(html.contains("data-testid=\"report-leaderboard\""));
    assert!(html.contains("data-testid=\"leaderboard\""));
    assert!(html.contains("data-source=\"live\""));
    assert!(html.contains("data-system=\"alpha\""));

    // Export as CRSArena-Dial: the dialogues plus the votes CSV.
    let out_dir = tempfile::tempdir().expect("temp dir");
    let out = out_dir.path().join("crs_arena_dial_live.json");
    let summary = export_store(
        &*store,
        &ExportOptions {
            format: ExportFormat::Dataset(Format::CrsArena),
            out: out.clone(),
            split: None,
            study: Some(STUDY.into()),
            include_test: false,
        },
        &NoProgress,
    )
    .await
    .expect("export");
    let votes_file = out_dir.path().join("votes_live.csv");
    assert!(summary.files.contains(&out));
    assert!(summary.files.contains(&votes_file));

    let dialogues: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("read export")).expect("JSON");
    let dialogues = dialogues.as_array().expect("a list of dialogues");
    // Every battle's two sides but the test participant's.
    let live = battles().len() - 1;
    assert_eq!(dialogues.len(), 2 * live);
    let by_id: BTreeMap<&str, &Value> = dialogues
        .iter()
        .map(|d| (d["conversation ID"].as_str().expect("id"), d))
        .collect();
    for (n, battle) in battles().iter().enumerate().take(live) {
        let left = by_id[format!("{}_chat-{n}-l", battle.left).as_str()];
        let right = by_id[format!("{}_chat-{n}-r", battle.right).as_str()];
        assert_eq!(left["agent"]["id"], battle.left);
        assert_eq!(right["agent"]["id"], battle.right);
        assert_eq!(
            left["user"]["id"], battle.participant,
            "both sides share the user"
        );
        assert_eq!(right["user"]["id"], battle.participant);
        assert_eq!(
            left["metadata"]["sentiment"],
            sentiment(n, 1),
            "the last feedback"
        );
        assert_eq!(
            right["metadata"],
            serde_json::json!({}),
            "no feedback, no sentiment"
        );
        let turns = left["conversation"].as_array().expect("turns");
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[0]["participant"], "USER");
        assert_eq!(turns[1]["participant"], "AGENT");
        assert_eq!(
            turns[1]["utterance"],
            format!("{} answers turn 0", battle.left)
        );
    }

    let text = std::fs::read_to_string(&votes_file).expect("votes CSV");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(
        header,
        ["session_id", "user_id", "crs1", "crs2", "vote", "feedback"]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), lb.votes);
    // The first vote cast: p2, alpha (left) beat beta, at 2023-11-14 22:13:30 UTC.
    assert_eq!(
        rows[0].iter().collect::<Vec<_>>(),
        [
            "2023-11-14 22:13:30.000000",
            "p2",
            "alpha",
            "beta",
            "alpha",
            "battle 0: clearer, \"more\" helpful"
        ]
    );
    let ties = rows.iter().filter(|r| &r[4] == "tie").count();
    assert_eq!(ties, 2, "a tie and a both_bad");
    assert!(rows.iter().all(|r| &r[1] != "pt"));

    // Import both files into a fresh store and report: the same numbers.
    let fresh_dir = tempfile::tempdir().expect("temp dir");
    let fresh = wozkit_store::open(&fresh_dir.path().display().to_string())
        .await
        .expect("open fresh store");
    import_files(
        &*fresh,
        Format::CrsArena,
        &[out.clone(), votes_file.clone()],
        &NoProgress,
    )
    .await
    .expect("import");
    let again = build_report(&*fresh, &report_options(None))
        .await
        .expect("report of the import");
    assert_eq!(again.votes, lb.votes);
    let imported = again
        .leaderboard
        .as_ref()
        .expect("leaderboard of the import");
    assert_eq!(imported.sources.len(), 1);
    assert_eq!(imported.sources[0].source, "import:votes-csv");
    assert_eq!(imported.sources[0].votes, lb.votes);
    let battle_count: u64 = lb.systems.iter().map(|s| s.battles).sum();
    assert_eq!(
        imported.sources[0].battles.values().sum::<u64>(),
        battle_count
    );
    assert_eq!(imported.board.grid, lb.grid);
    assert_eq!(
        imported.board.systems, lb.systems,
        "Elo, Bradley-Terry with its interval, counts and ranks"
    );
    assert_eq!(imported.board.void, 0, "void battles are not exported");
    // The dialogues came back too, one session per side.
    assert_eq!(again.sessions, 2 * live);
    // The live feedback came back as each left side's sentiment.
    let mut satisfied: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (n, battle) in battles().iter().enumerate().take(live) {
        let entry = satisfied.entry(battle.left.to_string()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(sentiment(n, 1) == "satisfied");
    }
    let found: BTreeMap<String, (u64, u64)> = again
        .satisfaction
        .iter()
        .map(|(system, s)| (system.clone(), (s.dialogues, s.satisfied)))
        .collect();
    assert_eq!(found, satisfied);

    // The export imported into the live store: one leaderboard of both, each source named.
    import_files(&*store, Format::CrsArena, &[out, votes_file], &NoProgress)
        .await
        .expect("import beside the live battles");
    let both = build_report(&*store, &report_options(None))
        .await
        .expect("report of both");
    let board = both.leaderboard.as_ref().expect("leaderboard");
    let sources: Vec<(&str, usize, usize)> = board
        .sources
        .iter()
        .map(|s| (s.source.as_str(), s.votes, s.void))
        .collect();
    assert_eq!(sources, [("import:votes-csv", 9, 0), ("live", 9, 1)]);
    assert_eq!((board.board.votes, board.board.void), (18, 1));
    for system in &lb.systems {
        let row = board
            .board
            .systems
            .iter()
            .find(|s| s.name == system.name)
            .expect("system in both");
        assert_eq!(
            (row.wins, row.losses, row.ties),
            (2 * system.wins, 2 * system.losses, 2 * system.ties),
            "{}: every battle twice",
            system.name
        );
        for source in &board.sources {
            assert_eq!(source.battles[&system.name], system.battles);
        }
    }
    let json = serde_json::to_value(&both).expect("JSON");
    assert_eq!(json["leaderboard"]["votes"], 18);
    assert_eq!(json["leaderboard"]["sources"][1]["source"], "live");
    assert!(json.get("elo").is_none() && json["judgments"].get("leaderboard").is_none());
    let html = wozkit_data::report::html::render_html(&both);
    assert!(html.contains("data-source=\"import:votes-csv\""));
    assert!(html.contains("data-source=\"live\""));
}
