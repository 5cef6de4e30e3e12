//! The leaderboard of an arena (and of side-by-side comparisons): every system with its Elo
//! rating, Bradley-Terry strength and 95% bootstrap interval, battles, wins, losses, ties and win
//! rate, plus the win-rate grid of every pair of systems.
//!
//! The numbers are the report's ([`rankings`] and [`win_rates`]): the server's live leaderboard,
//! `wozkit report` on the same store and a report on the CRSArena export of the battles,
//! imported again, give the same values.
//!
//! Votes come from the participants' own logs: one per [`Judged`](wozkit_core::event::EventKind::Judged) event that
//! is counted, of the item pool (no gold, no surplus), not void, and shows two dialogues of two
//! different systems. The left system is `crs1`, the right one `crs2`; the vote names the system
//! whose dialogue was chosen, or is `tie` (a choice of `tie`, `both_bad` or none scores 0.5 for
//! each side). Elo is sequential, so the votes are ordered by the judgment's time, then the
//! participant log's id, then the position in the log: the same store always gives the same
//! ratings.
//!
//! Systems are ranked by Bradley-Terry strength, then Elo, then name; ranks are positions from 1
//! (equal numbers do not share a rank).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use wozkit_core::evaluation::LeaderboardSettings;
use wozkit_core::event::Event;
use wozkit_store::{Store, StoreError};

use crate::judgments::{JudgmentRow, Worker, log_owner, log_rows};
use crate::report::evaluation::{PairResult, RankingOptions, rankings, win_rates};
use crate::report::html::{esc, num};
use crate::stored::SessionStream;
use crate::stored::read::log_worker;
use crate::votes::Vote;

/// The vote of a battle neither side won.
pub const TIE: &str = "tie";

/// The leaderboard: systems in rank order and the win-rate grid.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Leaderboard {
    /// Every system that took part in a counted battle, best first (with
    /// [`Leaderboard::for_systems`], also those that have not yet, last).
    pub systems: Vec<SystemRow>,
    /// Wins, losses and ties of each unordered pair of systems (alphabetical), with the first
    /// system's win rate among the decided battles and its binomial test.
    pub grid: Vec<PairResult>,
    /// Counted battles (votes) the numbers are computed from.
    pub votes: usize,
    /// Void battles (a system failed a turn): kept in the logs, in no number.
    pub void: usize,
    /// How the ratings were computed.
    pub settings: RankingOptions,
    /// Set by [`Leaderboard::for_systems`]: the fewest counted battles a system needs before
    /// its interval is given; below it the interval is `null` (the page says "too few
    /// battles").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_battles_for_interval: Option<u64>,
}

/// The fewest counted battles a system of a live leaderboard needs before its 95% bootstrap
/// interval is shown: with fewer, resampling the few battles gives degenerate intervals (after
/// one battle, "1.000 – 1.000").
pub const MIN_BATTLES_FOR_INTERVAL: u64 = 10;

impl Leaderboard {
    /// The leaderboard of a study's systems under test: every one of `systems` has a row (those
    /// without a counted battle yet last, with no strength), and a system's interval is given
    /// only once it has at least `min_battles` counted battles.
    pub fn for_systems(mut self, systems: &[String], min_battles: u64) -> Leaderboard {
        for name in systems {
            if !self.systems.iter().any(|r| &r.name == name) {
                self.systems.push(SystemRow {
                    rank: 0,
                    name: name.clone(),
                    elo: self.settings.elo_start,
                    bt_strength: None,
                    ci_low: None,
                    ci_high: None,
                    battles: 0,
                    wins: 0,
                    losses: 0,
                    ties: 0,
                    win_rate: None,
                });
            }
        }
        for (i, row) in self.systems.iter_mut().enumerate() {
            row.rank = i + 1;
            if row.battles < min_battles {
                row.ci_low = None;
                row.ci_high = None;
            }
        }
        self.min_battles_for_interval = Some(min_battles);
        self
    }
}

/// One system of the leaderboard.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemRow {
    /// Position in the leaderboard, from 1.
    pub rank: usize,
    pub name: String,
    /// Sequential Elo rating after every vote.
    pub elo: f64,
    /// Bradley-Terry strength (strengths sum to 1); `None` when no model could be fitted.
    pub bt_strength: Option<f64>,
    /// 95% percentile-bootstrap interval of the strength.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Counted battles the system took part in.
    pub battles: u64,
    pub wins: u64,
    pub losses: u64,
    /// Ties and `both_bad` votes.
    pub ties: u64,
    /// `wins / (wins + losses)`; `None` when every battle was a tie.
    pub win_rate: Option<f64>,
}

impl From<&LeaderboardSettings> for RankingOptions {
    fn from(settings: &LeaderboardSettings) -> Self {
        RankingOptions {
            elo_k: settings.elo_k,
            elo_start: settings.elo_start,
            bootstrap: settings.bootstrap as usize,
            seed: settings.seed,
        }
    }
}

/// The leaderboard of `votes`, in the order given (Elo is sequential). Votes of a system against
/// itself are left out. `void` is 0: the caller that reads the logs knows it (see
/// [`leaderboard_from_rows`]).
pub fn leaderboard(votes: &[Vote], options: RankingOptions) -> Leaderboard {
    let votes: Vec<Vote> = votes.iter().filter(|v| v.crs1 != v.crs2).cloned().collect();
    let grid = win_rates(&votes);
    let (elo, strengths) = if votes.is_empty() {
        Default::default()
    } else {
        rankings(&votes, options)
    };
    // Wins, losses and ties of each system, from the grid.
    let mut counts: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for pair in &grid {
        let a = counts.entry(pair.a.as_str()).or_default();
        a.0 += pair.a_wins;
        a.1 += pair.b_wins;
        a.2 += pair.ties;
        let b = counts.entry(pair.b.as_str()).or_default();
        b.0 += pair.b_wins;
        b.1 += pair.a_wins;
        b.2 += pair.ties;
    }
    let mut systems: Vec<SystemRow> = counts
        .into_iter()
        .map(|(name, (wins, losses, ties))| {
            let strength = strengths.get(name);
            let decided = wins + losses;
            SystemRow {
                rank: 0,
                name: name.to_string(),
                elo: elo.get(name).copied().unwrap_or(options.elo_start),
                bt_strength: strength.map(|s| s.strength),
                ci_low: strength.and_then(|s| s.ci_low),
                ci_high: strength.and_then(|s| s.ci_high),
                battles: wins + losses + ties,
                wins,
                losses,
                ties,
                win_rate: (decided > 0).then(|| wins as f64 / decided as f64),
            }
        })
        .collect();
    systems.sort_by(|x, y| {
        let strength = |r: &SystemRow| r.bt_strength.unwrap_or(f64::NEG_INFINITY);
        strength(y)
            .total_cmp(&strength(x))
            .then(y.elo.total_cmp(&x.elo))
            .then_with(|| x.name.cmp(&y.name))
    });
    for (i, row) in systems.iter_mut().enumerate() {
        row.rank = i + 1;
    }
    Leaderboard {
        systems,
        grid,
        votes: votes.len(),
        void: 0,
        settings: options,
        min_battles_for_interval: None,
    }
}

/// Whether a judgment row is a person's battle of two systems from the item pool (counted or
/// not); a model judge's answers are in no leaderboard of people.
fn is_battle(row: &JudgmentRow) -> bool {
    row.is_comparison()
        && !row.is_model()
        && !row.onboarding
        && !row.gold
        && row.pool == Some("item")
        && matches!((&row.left_system, &row.right_system), (Some(l), Some(r)) if l != r)
}

/// The vote of a row: counted, not surplus, not void battles only.
fn row_vote(row: &JudgmentRow) -> Option<Vote> {
    if !is_battle(row) || !row.counted || row.surplus || row.void {
        return None;
    }
    Some(Vote {
        session_id: cast_time(row.submitted_at_ms),
        user_id: row.participant.clone().unwrap_or_default(),
        crs1: row.left_system.clone()?,
        crs2: row.right_system.clone()?,
        vote: row.choice_system.clone().unwrap_or_else(|| TIE.to_string()),
        feedback: row.justification.clone().unwrap_or_default(),
    })
}

/// The votes of participant-log events, in log order. `events` may hold one log or several one
/// after the other; each log's participant comes from its first event when the judgment's actor
/// does not name one.
pub fn votes_from_judgments(events: &[Event]) -> Vec<Vote> {
    events
        .chunk_by(|a, b| a.session == b.session)
        .flat_map(|log| {
            let worker = Worker {
                participant: log_owner(log).map(|(_, p)| p.to_string()),
                worker_id: None,
            };
            log_rows(log, &worker)
        })
        .filter_map(|row| row_vote(&row))
        .collect()
}

/// The votes of judgment rows in cast order: by the judgment's time, then the log's id, then the
/// rows' order (log order within a log).
pub fn votes_from_rows(rows: &[JudgmentRow]) -> Vec<Vote> {
    timed_votes(rows).into_iter().map(|(_, v)| v).collect()
}

/// [`votes_from_rows`], each vote with the judgment's time.
fn timed_votes(rows: &[JudgmentRow]) -> Vec<(u64, Vote)> {
    let mut keyed: Vec<(u64, &str, Vote)> = rows
        .iter()
        .filter_map(|r| Some((r.submitted_at_ms, r.log.as_str(), row_vote(r)?)))
        .collect();
    // Stable: rows of one log at the same millisecond keep their log order.
    keyed.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    keyed.into_iter().map(|(at, _, v)| (at, v)).collect()
}

/// The source name of the battles in the participants' logs (arena battles and side-by-side
/// comparisons collected live) in a [`SourcedLeaderboard`]; imported votes are `import:<format>`.
pub const LIVE: &str = "live";

/// The report's leaderboard: one ranking of every battle, live and imported, saying how many
/// votes (and which systems' battles) came from each source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourcedLeaderboard {
    /// The ranking of all the votes together.
    #[serde(flatten)]
    pub board: Leaderboard,
    /// One entry per source: imported ones (`import:<format>`) by name, then `live`.
    pub sources: Vec<VoteSource>,
}

/// The votes of one source of a [`SourcedLeaderboard`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VoteSource {
    /// `live` (the participants' logs) or `import:<format>` (votes of imported sessions).
    pub source: String,
    /// Counted votes from this source.
    pub votes: usize,
    /// Void battles from this source (live only).
    pub void: usize,
    /// Counted battles per system from this source, by system.
    pub battles: BTreeMap<String, u64>,
}

/// One source's votes for [`sourced_leaderboard`]: each with its server time (the judgment's, or
/// the import's), in the source's own cast order.
pub struct SourceVotes {
    pub source: String,
    pub votes: Vec<(u64, Vote)>,
    pub void: usize,
}

/// One leaderboard of several sources' votes; `None` when no source has a vote or a void battle.
/// Elo is sequential: the votes are ordered by server time (the import time for imported votes),
/// sources in the order given on the same time, and each source's own order within it, so a
/// store with one source ranks exactly as that source alone.
pub fn sourced_leaderboard(
    sources: Vec<SourceVotes>,
    options: RankingOptions,
) -> Option<SourcedLeaderboard> {
    if sources.iter().all(|s| s.votes.is_empty() && s.void == 0) {
        return None;
    }
    let mut all: Vec<(u64, &Vote)> = sources
        .iter()
        .flat_map(|s| s.votes.iter().map(|(at, v)| (*at, v)))
        .collect();
    // Stable: equal times keep the sources' order and each source's cast order.
    all.sort_by_key(|(at, _)| *at);
    let votes: Vec<Vote> = all.into_iter().map(|(_, v)| v.clone()).collect();
    let mut board = leaderboard(&votes, options);
    board.void = sources.iter().map(|s| s.void).sum();
    let sources = sources
        .into_iter()
        .map(|s| {
            let mut battles: BTreeMap<String, u64> = BTreeMap::new();
            for (_, v) in s.votes.iter().filter(|(_, v)| v.crs1 != v.crs2) {
                *battles.entry(v.crs1.clone()).or_default() += 1;
                *battles.entry(v.crs2.clone()).or_default() += 1;
            }
            VoteSource {
                votes: s.votes.iter().filter(|(_, v)| v.crs1 != v.crs2).count(),
                source: s.source,
                void: s.void,
                battles,
            }
        })
        .collect();
    Some(SourcedLeaderboard { board, sources })
}

/// The live votes of judgment rows with their times, in cast order (see [`votes_from_rows`]),
/// and the number of void battles, as a source of a [`sourced_leaderboard`]; `None` when the
/// rows hold no battle at all.
pub fn live_source(rows: &[JudgmentRow]) -> Option<SourceVotes> {
    if !rows.iter().any(is_battle) {
        return None;
    }
    Some(SourceVotes {
        source: LIVE.to_string(),
        votes: timed_votes(rows),
        void: rows.iter().filter(|r| is_battle(r) && r.void).count(),
    })
}

/// The leaderboard of judgment rows (see [`votes_from_rows`]), with the void battles counted;
/// `None` when the rows hold no battle at all.
pub fn leaderboard_from_rows(rows: &[JudgmentRow], options: RankingOptions) -> Option<Leaderboard> {
    if !rows.iter().any(is_battle) {
        return None;
    }
    let mut board = leaderboard(&votes_from_rows(rows), options);
    board.void = rows.iter().filter(|r| is_battle(r) && r.void).count();
    Some(board)
}

/// The leaderboard of a study, from its participants' logs in the store (test participants
/// left out, as reports do). Empty when the study has no battle yet.
pub async fn study_leaderboard(
    store: &dyn Store,
    study_id: &str,
    options: RankingOptions,
) -> Result<Leaderboard, StoreError> {
    let rows = study_rows(store, Some(study_id), false).await?;
    Ok(leaderboard_from_rows(&rows, options).unwrap_or_else(|| leaderboard(&[], options)))
}

/// The judgment rows of the participant logs of `study` (or every study), in log-id order.
pub(crate) async fn study_rows(
    store: &dyn Store,
    study: Option<&str>,
    include_test: bool,
) -> Result<Vec<JudgmentRow>, StoreError> {
    let mut rows = Vec::new();
    let mut logs = SessionStream::participant_logs(store, study).await?;
    while let Some(log) = logs.next().await? {
        let (worker, test) = log_worker(store, &log).await?;
        if test && !include_test {
            continue;
        }
        rows.extend(log_rows(&log.events, &worker));
    }
    Ok(rows)
}

/// A time (ms since the Unix epoch) as the CRSArena votes write it:
/// `YYYY-MM-DD HH:MM:SS.ffffff`, UTC. Sorting the text sorts the times.
pub fn cast_time(at_ms: u64) -> String {
    let days = (at_ms / 86_400_000) as i64;
    let ms_of_day = at_ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1_000 % 60,
        ms_of_day % 1_000,
    );
    format!(
        "{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{:06}",
        ms * 1_000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The leaderboard as a self-contained HTML page (no scripts, no external assets).
pub fn html(lb: &Leaderboard, title: &str) -> String {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>{STYLE}</style></head><body><h1>{title}</h1>",
        title = esc(title)
    );
    page.push_str(&html_tables(lb));
    page.push_str("</body></html>\n");
    page
}

const STYLE: &str = "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;\
color:#222}table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;\
padding:.2rem .5rem;text-align:right}th:first-child,td:first-child{text-align:left}\
td.self{background:#eee}";

/// The leaderboard's two tables as an HTML fragment: the ranking (`data-testid="leaderboard"`,
/// a `data-system` on each row) and the win-rate grid (`data-testid="win-rates"`: the row
/// system's win rate against the column system among their decided battles, empty on the
/// diagonal, `–` for a pair with no decided battle).
pub fn html_tables(lb: &Leaderboard) -> String {
    let mut out = String::new();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let void = match lb.void {
        0 => String::new(),
        1 => " 1 void battle (a system failed a turn) is left out.".to_string(),
        n => format!(" {n} void battles (a system failed a turn) are left out."),
    };
    let _ = write!(
        out,
        "<p>{}. Elo: K = {}, start {}, in cast order; Bradley-Terry with a 95% \
         bootstrap interval over the battles ({} resamples, seed {}){min}.{void}</p>",
        plural(lb.votes, "counted battle", "counted battles"),
        lb.settings.elo_k,
        lb.settings.elo_start,
        lb.settings.bootstrap,
        lb.settings.seed,
        min = match lb.min_battles_for_interval {
            Some(n) => format!(", given once a system has {n} battles"),
            None => String::new(),
        },
    );
    out.push_str(
        "<table data-testid=\"leaderboard\"><thead><tr><th>rank</th><th>system</th><th>Elo</th>\
         <th>Bradley-Terry strength</th><th>95% CI</th><th>battles</th><th>W / L / T</th>\
         <th>win rate</th></tr></thead><tbody>",
    );
    for s in &lb.systems {
        let _ = write!(
            out,
            "<tr data-system=\"{name}\"><td>{}</td><td>{name}</td><td>{:.1}</td><td>{}</td>\
             <td>{interval}</td><td>{}</td><td>{} / {} / {}</td><td>{}</td></tr>",
            s.rank,
            s.elo,
            num(s.bt_strength),
            s.battles,
            s.wins,
            s.losses,
            s.ties,
            num(s.win_rate),
            name = esc(&s.name),
            interval = match lb.min_battles_for_interval {
                Some(min) if s.battles < min => format!(
                    "<span class=\"muted\" data-testid=\"too-few-battles\">too few battles \
                     ({} of {min})</span>",
                    s.battles
                ),
                _ => format!("{} – {}", num(s.ci_low), num(s.ci_high)),
            },
        );
    }
    out.push_str("</tbody></table>");
    if lb.systems.is_empty() {
        return out;
    }
    win_rate_grid(&mut out, lb);
    out
}

/// The win-rate grid: the row system's win rate against each column system.
fn win_rate_grid(out: &mut String, lb: &Leaderboard) {
    out.push_str(
        "<table data-testid=\"win-rates\"><caption>Win rate of the row system against the \
         column system (decided battles)</caption><thead><tr><th></th>",
    );
    for s in &lb.systems {
        let _ = write!(out, "<th>{}</th>", esc(&s.name));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &lb.systems {
        let name = esc(&row.name);
        let _ = write!(out, "<tr data-system=\"{name}\"><th>{name}</th>");
        for column in &lb.systems {
            if row.name == column.name {
                out.push_str("<td class=\"self\"></td>");
                continue;
            }
            let rate = pair_win_rate(&lb.grid, &row.name, &column.name);
            let _ = write!(
                out,
                "<td data-opponent=\"{}\">{}</td>",
                esc(&column.name),
                num(rate)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// `system`'s win rate against `opponent` among their decided battles; `None` when they had
/// none.
pub fn pair_win_rate(grid: &[PairResult], system: &str, opponent: &str) -> Option<f64> {
    let (wins, losses) = grid.iter().find_map(|p| {
        if p.a == system && p.b == opponent {
            Some((p.a_wins, p.b_wins))
        } else if p.b == system && p.a == opponent {
            Some((p.b_wins, p.a_wins))
        } else {
            None
        }
    })?;
    (wins + losses > 0).then(|| wins as f64 / (wins + losses) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use wozkit_core::event::{Actor, EventKind, ItemPool, Judgment, Role, VOTE_BOTH_BAD, VOTE_TIE};

    const OPTIONS: RankingOptions = RankingOptions {
        elo_k: 16.0,
        elo_start: 1000.0,
        bootstrap: 200,
        seed: 7,
    };

    /// A participant log: `ParticipantLogStarted`, then one `Judged` per battle at the given
    /// time. A battle is (left system, right system, choice: `l`, `r` or a vote constant).
    fn log(participant: &str, battles: &[(u64, &str, &str, &str)]) -> Vec<Event> {
        let session = format!("log-{participant}");
        let actor = Actor::Participant {
            role: Role::User,
            participant: Some(participant.to_string()),
        };
        let mut events = vec![Event {
            v: 1,
            session: session.clone(),
            seq: 1,
            at_ms: 0,
            actor: actor.clone(),
            kind: EventKind::ParticipantLogStarted {
                participant: participant.into(),
                study: "arena".into(),
                study_version: "1".into(),
            },
        }];
        for (i, (at_ms, left, right, choice)) in battles.iter().enumerate() {
            let dialogues = vec![format!("{session}-{i}-l"), format!("{session}-{i}-r")];
            let choice = match *choice {
                "l" => dialogues[0].clone(),
                "r" => dialogues[1].clone(),
                other => other.to_string(),
            };
            events.push(Event {
                v: 1,
                session: session.clone(),
                seq: i as u64 + 2,
                at_ms: *at_ms,
                actor: actor.clone(),
                kind: EventKind::Judged(Box::new(Judgment {
                    page: "arena".into(),
                    item: format!("{left}~{right}"),
                    lease: format!("lease-{i}"),
                    pool: ItemPool::Item,
                    dialogues,
                    systems: vec![left.to_string(), right.to_string()],
                    choice: Some(choice),
                    justification: Some(format!("reason {i}")),
                    answers: IndexMap::new(),
                    turns: Vec::new(),
                    counted: true,
                    surplus: false,
                    gold_correct: None,
                    claimed_at_ms: at_ms.saturating_sub(1_000),
                    void: false,
                })),
            });
        }
        events
    }

    fn judgment_mut(events: &mut [Event], index: usize) -> &mut Judgment {
        match &mut events[index + 1].kind {
            EventKind::Judged(j) => j,
            _ => panic!("event {index} is not a judgment"),
        }
    }

    fn rows(events: &[Event]) -> Vec<JudgmentRow> {
        events
            .chunk_by(|a, b| a.session == b.session)
            .flat_map(|log| log_rows(log, &Worker::default()))
            .collect()
    }

    #[track_caller]
    fn close(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
    }

    fn row<'a>(lb: &'a Leaderboard, name: &str) -> &'a SystemRow {
        lb.systems
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no row for {name}"))
    }

    /// Elo by hand, k = 16, everyone at 1000, E = 1 / (1 + 10^((R_other − R_own) / 400)):
    /// 1. a–b, a wins: E_a = 0.5, a = 1000 + 16·0.5 = 1008, b = 992.
    /// 2. b–c, tie: E_b = 1 / (1 + 10^(8/400)) = 0.488489108782…, b = 992 + 16·(0.5 − E_b)
    ///    = 992.184174259…, c = 1000 − 0.184174259… = 999.815825740….
    /// 3. a–c, c wins: E_a = 1 / (1 + 10^((999.8158… − 1008)/400)) = 0.511775795549…,
    ///    a = 1008 − 16·E_a = 999.811587271…, c = 999.8158… + 16·E_a = 1008.004238469….
    #[test]
    fn hand_worked_elo_and_counts() {
        let events = log(
            "p1",
            &[
                (10, "a", "b", "l"),
                (20, "b", "c", VOTE_TIE),
                (30, "a", "c", "r"),
            ],
        );
        let votes = votes_from_judgments(&events);
        assert_eq!(
            votes.iter().map(|v| v.vote.as_str()).collect::<Vec<_>>(),
            ["a", "tie", "c"]
        );
        assert_eq!(votes[0].user_id, "p1");
        assert_eq!(votes[0].feedback, "reason 0");
        assert_eq!(votes[0].session_id, "1970-01-01 00:00:00.010000");
        let lb = leaderboard(&votes, OPTIONS);
        close(row(&lb, "a").elo, 999.8115872712116);
        close(row(&lb, "b").elo, 992.1841742594846);
        close(row(&lb, "c").elo, 1008.0042384693038);
        let a = row(&lb, "a");
        assert_eq!((a.battles, a.wins, a.losses, a.ties), (2, 1, 1, 0));
        assert_eq!(a.win_rate, Some(0.5));
        let b = row(&lb, "b");
        assert_eq!((b.battles, b.wins, b.losses, b.ties), (2, 0, 1, 1));
        assert_eq!(b.win_rate, Some(0.0));
        let c = row(&lb, "c");
        assert_eq!((c.battles, c.wins, c.losses, c.ties), (2, 1, 0, 1));
        assert_eq!(c.win_rate, Some(1.0));
        assert_eq!(lb.votes, 3);
        // The Bradley-Terry strengths solve the likelihood equations: each system's score
        // (wins plus half its ties) equals Σ_j n_ij · s_i / (s_i + s_j).
        let s = |n: &str| row(&lb, n).bt_strength.expect("strength");
        let expected = |i: &str, opponents: &[&str]| -> f64 {
            opponents.iter().map(|j| s(i) / (s(i) + s(j))).sum()
        };
        assert!((expected("a", &["b", "c"]) - 1.0).abs() < 1e-6);
        assert!((expected("b", &["a", "c"]) - 0.5).abs() < 1e-6);
        assert!((expected("c", &["b", "a"]) - 1.5).abs() < 1e-6);
        // Ranked by strength: c scored most, b least.
        let order: Vec<&str> = lb.systems.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["c", "a", "b"]);
        assert_eq!(
            lb.systems.iter().map(|r| r.rank).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        for r in &lb.systems {
            let (lo, hi) = (r.ci_low.expect("low"), r.ci_high.expect("high"));
            assert!(lo <= hi);
        }
        // The grid: a beat b once, c beat a once, b and c tied.
        assert_eq!(pair_win_rate(&lb.grid, "a", "b"), Some(1.0));
        assert_eq!(pair_win_rate(&lb.grid, "b", "a"), Some(0.0));
        assert_eq!(pair_win_rate(&lb.grid, "a", "c"), Some(0.0));
        assert_eq!(pair_win_rate(&lb.grid, "b", "c"), None);
    }

    #[test]
    fn a_study_board_lists_every_system_and_no_interval_of_few_battles() {
        let one = log("p1", &[(10, "a", "b", "l")]);
        let lb = leaderboard(&votes_from_judgments(&one), OPTIONS);
        assert!(row(&lb, "a").ci_low.is_some(), "the report keeps it");
        let names = ["a".to_string(), "b".to_string(), "c".to_string()];
        let lb = lb.for_systems(&names, MIN_BATTLES_FOR_INTERVAL);
        let order: Vec<&str> = lb.systems.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(
            lb.systems.iter().map(|r| r.rank).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let c = row(&lb, "c");
        assert_eq!((c.battles, c.bt_strength, c.ci_low), (0, None, None));
        assert!(
            lb.systems
                .iter()
                .all(|r| r.ci_low.is_none() && r.ci_high.is_none())
        );
        let page = html_tables(&lb);
        assert!(!page.contains("1.000 – 1.000"), "{page}");
        assert_eq!(
            page.matches("too few battles (1 of 10)").count(),
            2,
            "{page}"
        );
        assert!(page.contains("too few battles (0 of 10)"), "{page}");
        assert!(
            page.contains("given once a system has 10 battles"),
            "{page}"
        );
        let json = serde_json::to_value(&lb).expect("json");
        assert_eq!(json["min_battles_for_interval"], 10);

        let many: Vec<(u64, &str, &str, &str)> = (0..12)
            .map(|i| (i, "a", "b", if i % 3 == 0 { "r" } else { "l" }))
            .collect();
        let lb = leaderboard(&votes_from_judgments(&log("p1", &many)), OPTIONS)
            .for_systems(&names, MIN_BATTLES_FOR_INTERVAL);
        let a = row(&lb, "a");
        assert!(a.ci_low.is_some() && a.ci_high.is_some(), "{a:?}");
        assert!(row(&lb, "c").ci_low.is_none());
    }

    #[test]
    fn both_bad_and_tie_score_half_each() {
        let tie = leaderboard(
            &votes_from_judgments(&log("p", &[(1, "x", "y", VOTE_TIE)])),
            OPTIONS,
        );
        let bad = leaderboard(
            &votes_from_judgments(&log("p", &[(1, "x", "y", VOTE_BOTH_BAD)])),
            OPTIONS,
        );
        for lb in [&tie, &bad] {
            for r in &lb.systems {
                assert_eq!(r.elo, 1000.0, "a tie between equals moves nobody");
                assert_eq!((r.wins, r.losses, r.ties, r.win_rate), (0, 0, 1, None));
            }
        }
        assert_eq!(tie.systems, bad.systems);
    }

    #[test]
    fn void_surplus_gold_and_uncounted_battles_are_left_out() {
        let mut events = log(
            "p",
            &[
                (1, "a", "b", "l"),
                (2, "a", "b", "r"),
                (3, "a", "b", "r"),
                (4, "a", "b", "r"),
                (5, "a", "b", "r"),
            ],
        );
        let void = judgment_mut(&mut events, 1);
        void.void = true;
        void.counted = false;
        let surplus = judgment_mut(&mut events, 2);
        surplus.surplus = true;
        surplus.counted = false;
        judgment_mut(&mut events, 3).pool = ItemPool::Gold;
        judgment_mut(&mut events, 4).counted = false;
        let votes = votes_from_judgments(&events);
        assert_eq!(votes.len(), 1);
        assert_eq!(votes[0].vote, "a");
        let lb = leaderboard_from_rows(&rows(&events), OPTIONS).expect("battles");
        assert_eq!((lb.votes, lb.void), (1, 1));
        assert_eq!(row(&lb, "a").wins, 1);
        assert_eq!(row(&lb, "b").losses, 1);
        // A void battle even if marked counted stays out.
        let mut counted_void = log("q", &[(1, "a", "b", "r")]);
        judgment_mut(&mut counted_void, 0).void = true;
        assert!(votes_from_judgments(&counted_void).is_empty());
    }

    #[test]
    fn votes_are_ordered_by_time_then_log_whatever_the_input_order() {
        let p1 = log("p1", &[(30, "a", "b", "l"), (10, "a", "c", "r")]);
        let p2 = log("p2", &[(20, "b", "c", "l"), (30, "c", "a", "l")]);
        let forward: Vec<Event> = p1.iter().chain(&p2).cloned().collect();
        let backward: Vec<Event> = p2.iter().chain(&p1).cloned().collect();
        let one = votes_from_rows(&rows(&forward));
        let two = votes_from_rows(&rows(&backward));
        assert_eq!(one, two);
        let order: Vec<(&str, &str)> = one
            .iter()
            .map(|v| (v.user_id.as_str(), v.vote.as_str()))
            .collect();
        // t=10 p1 (c), t=20 p2 (b), t=30: log-p1 (a) before log-p2 (c).
        assert_eq!(order, [("p1", "c"), ("p2", "b"), ("p1", "a"), ("p2", "c")]);
        let lb1 = leaderboard_from_rows(&rows(&forward), OPTIONS);
        assert_eq!(lb1, leaderboard_from_rows(&rows(&backward), OPTIONS));
    }

    #[test]
    fn ties_in_strength_fall_back_to_elo_then_name() {
        // Symmetric results: every strength is equal, and so is every Elo but for order.
        let votes = votes_from_judgments(&log("p", &[(1, "b", "a", VOTE_TIE)]));
        let lb = leaderboard(&votes, OPTIONS);
        let order: Vec<&str> = lb.systems.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["a", "b"]);
    }

    #[test]
    fn cast_time_is_utc_calendar_text() {
        // 2024-02-29 13:14:15.678 UTC = 1709212455678 ms.
        assert_eq!(cast_time(1_709_212_455_678), "2024-02-29 13:14:15.678000");
        assert_eq!(cast_time(0), "1970-01-01 00:00:00.000000");
    }

    #[test]
    fn html_escapes_names_and_marks_rows() {
        let votes = votes_from_judgments(&log("p", &[(1, "<b>&\"", "plain", "l")]));
        let page = html(&leaderboard(&votes, OPTIONS), "Arena <1>");
        assert!(page.contains("<title>Arena &lt;1&gt;</title>"));
        assert!(page.contains("data-testid=\"leaderboard\""));
        assert!(page.contains("data-system=\"&lt;b&gt;&amp;&quot;\""));
        assert!(page.contains("data-system=\"plain\""));
        assert!(!page.contains("<b>&"));
        assert!(!page.contains("src=") && !page.contains("href="));
        // The grid: the winner's row shows 1.000 against the loser, the diagonal is empty.
        assert!(page.contains("<td data-opponent=\"plain\">1.000</td>"));
        assert!(page.contains("<td data-opponent=\"&lt;b&gt;&amp;&quot;\">0.000</td>"));
        assert_eq!(page.matches("<td class=\"self\"></td>").count(), 2);
    }
}
