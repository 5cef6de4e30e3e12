//! `wozkit report`: the statistics dialogue papers print, over the sessions of a store (live or
//! imported), as one JSON file holding every number and one self-contained HTML page showing
//! them with inline SVG charts.
//!
//! Sessions are streamed from the store; only each session's [`SessionFeatures`], its votes and
//! its ratings are kept. The report never changes the store.
//!
//! - [`features`]: what is read from one session;
//! - [`questionnaire`]: reverse-coded survey items, reversed on their study's scale before any
//!   number is computed from them (the study definitions come in [`ReportOptions::questionnaires`];
//!   a live session whose study is not among them keeps its answers as stored and the report
//!   lists the study in [`Report::unknown_questionnaires`]);
//! - [`summary`]: interaction, dialogue acts, questionnaire, correlations;
//! - [`evaluation`]: votes (win rates, Elo, Bradley-Terry), agreement, satisfaction;
//! - the leaderboard ([`crate::leaderboard::sourced_leaderboard`]): one ranking of every battle,
//!   the votes of imported sessions (each source `import:<format>`) and the live arena battles and
//!   comparisons of the participants' logs (`live`), as the server's live leaderboard computes it;
//! - [`judgments`](mod@judgments): evaluation studies, from the participants' own logs: ratings,
//!   the ACUTE-Eval win-rate grid, agreement, workers, onboarding (only the `study` filter applies
//!   to them; the section is absent when the store holds no judgment);
//! - [`judge_agreement`]: model judges against the people's judgments (Cohen's kappa or
//!   Krippendorff's alpha with bootstrap intervals, people against people, rank correlation of
//!   the leaderboards, side bias); only the `study` filter applies;
//! - [`scenario`]: the scenario each session drew, its filter and the per-variant breakdown;
//! - [`goal_scores`]: goal-based scores of the sessions with a user goal, per system (success,
//!   inform precision/recall/F1, turns to success, pass^k);
//! - [`copilot`]: what became of the copilot's suggestions of the wizard's messages, per system
//!   (sent as they were, edited, ignored; edit distances);
//! - [`html`]: the page and its charts.

pub mod copilot;
pub mod evaluation;
pub mod features;
pub mod goal_scores;
pub mod html;
pub mod judge_agreement;
pub mod judgments;
pub mod questionnaire;
pub mod scenario;
pub mod summary;

use std::collections::{BTreeMap, HashMap};

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use wozkit_core::event::{EventKind, Role};
use wozkit_store::{Store, StoreError};

use self::evaluation::{
    Agreement, RankingOptions, Satisfaction, agreement, satisfaction, vote_agreement,
};
use self::features::{Outcome, SessionFeatures, features};
use self::judge_agreement::JudgeAgreement;
use self::judgments::{JudgmentsCollector, JudgmentsReport};
use self::questionnaire::{Questionnaires, ScaleNotes};
use self::summary::{Interaction, OutcomeCorrelation, Question, Summary, summarise};
use crate::error::ExportError;
use crate::leaderboard::{SourceVotes, SourcedLeaderboard, live_source, sourced_leaderboard};
use crate::stats::agreement::Level;
use crate::stored::read::{log_worker, test_session_ids};
use crate::stored::{SessionStream, StoredSession};
use crate::votes::{Vote, session_votes};

/// The annotation key of one annotator's rating: `{"target", "item", "value"}`.
pub const RATING_KEY: &str = "rating";

/// What to report on and how.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportOptions {
    pub filters: Vec<Filter>,
    pub outcome: Outcome,
    /// Labels listed per role.
    pub top: usize,
    pub ranking: RankingOptions,
    /// The questionnaires (scales and reverse-coded items) of the live studies, by study id.
    pub questionnaires: Questionnaires,
    /// Test sessions too (`/try`, lab links with `test=1`); left out otherwise.
    pub include_test: bool,
    /// Dialogues with a simulated user in the user's seat too (`docs/simulated-users.md`);
    /// left out otherwise, so the report is about people unless asked.
    pub include_simulated: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            filters: Vec::new(),
            outcome: Outcome::GoalReached,
            top: 10,
            ranking: RankingOptions {
                elo_k: 16.0,
                elo_start: 1000.0,
                bootstrap: 1000,
                seed: 0,
            },
            questionnaires: Questionnaires::default(),
            include_test: false,
            include_simulated: false,
        }
    }
}

/// A `KEY=VALUE` condition a session must meet. Keys: `study` (the store's study id; imported
/// sessions are in `import:<format>`), `format` (the format imported from, `live` for live
/// sessions), `file` (the file imported from), `system`; any other key matches a top-level
/// field of the session's dataset record (e.g. CRWIZ's `condition=system_plan`).
/// `scenario.<name>` matches the value the session drew for scenario variable `<name>`
/// (e.g. `scenario.fire_location=pu_nt`; a number as written, `scenario.travel_distance_m=70`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub key: String,
    pub value: String,
}

impl Filter {
    pub fn parse(text: &str) -> Result<Filter, String> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => Ok(Filter {
                key: key.trim().to_string(),
                value: value.to_string(),
            }),
            _ => Err(format!(
                "filter `{text}`: expected KEY=VALUE, e.g. format=crwiz or condition=system_plan"
            )),
        }
    }

    fn matches(&self, session: &StoredSession, features: &SessionFeatures) -> bool {
        let origin = session.origin.as_ref();
        match self.key.as_str() {
            // Applied by the store query already.
            "study" => true,
            "format" => origin.map_or("live", |o| o.format.as_str()) == self.value,
            "file" => origin.is_some_and(|o| o.file == self.value),
            "system" => features.system.as_deref() == Some(self.value.as_str()),
            key if key.starts_with(scenario::FILTER_PREFIX) => scenario::matches(
                &session.events,
                &key[scenario::FILTER_PREFIX.len()..],
                &self.value,
            ),
            key => session.events.iter().any(|e| match &e.kind {
                EventKind::Annotation { key: k, value } if k.ends_with(".dialogue") => {
                    match value.get(key) {
                        Some(Value::String(s)) => *s == self.value,
                        Some(other) => {
                            let text = other.to_string();
                            text == self.value
                        }
                        None => false,
                    }
                }
                _ => false,
            }),
        }
    }
}

/// Every number of a report; the JSON file is this, serialised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub filters: IndexMap<String, String>,
    pub outcome: &'static str,
    pub sessions: usize,
    pub interaction: Interaction,
    pub labelled_wizard_turns: usize,
    pub da_types: IndexMap<String, Option<f64>>,
    pub top_acts: IndexMap<String, Vec<summary::ActCount>>,
    pub outcome_known: usize,
    pub outcome_reached: usize,
    pub questionnaire: Vec<Question>,
    /// Studies whose sessions answered a survey but whose definition the report was not given:
    /// their answers are used as stored, so a reverse-coded item of theirs is not reversed.
    pub unknown_questionnaires: Vec<String>,
    pub correlations: IndexMap<String, OutcomeCorrelation>,
    /// Votes of imported sessions (their sources are in `leaderboard`).
    pub votes: usize,
    /// Every battle, imported and live, in one ranking, with the votes of each source; absent
    /// without any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaderboard: Option<SourcedLeaderboard>,
    pub agreement: IndexMap<String, Agreement>,
    pub satisfaction: IndexMap<String, Satisfaction>,
    /// The main figures per scenario variant (sessions grouped by the non-numeric values they
    /// drew); absent when no session drew a scenario.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<scenario::VariantRow>,
    /// Evaluation studies' judgments; absent when the store has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judgments: Option<JudgmentsReport>,
    /// Model judges against the people's judgments; absent when no model judge answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_agreement: Option<JudgeAgreement>,
    /// Goal-based scores per system; absent when no finished session has a user goal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal_scores: Option<goal_scores::GoalScores>,
    /// What became of the copilot's suggestions, per system; absent when no session had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copilot: Option<copilot::CopilotUptake>,
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Data(#[from] ExportError),
}

/// Reads the selected sessions and computes the report.
pub async fn build_report(
    store: &dyn Store,
    options: &ReportOptions,
) -> Result<Report, ReportError> {
    let study = options
        .filters
        .iter()
        .find(|f| f.key == "study")
        .map(|f| f.value.as_str());
    let skip = if options.include_test {
        Default::default()
    } else {
        test_session_ids(store, study).await?
    };
    let mut stream = SessionStream::open(store, study).await?.skipping(skip);
    if !options.include_test {
        stream = stream.skipping_test_chats();
    }
    let mut collected = Collected::default();
    while let Some(session) = stream.next().await? {
        if !options.include_simulated && wozkit_core::simulated_users::is_simulated(&session.events)
        {
            continue;
        }
        collected.add(&session, options)?;
    }
    let (judgments, judges, live) = read_judgments(store, study, options).await?;
    let mut report = collected.report(options, live);
    report.judgments = judgments;
    report.judge_agreement = judges;
    Ok(report)
}

/// What the report reads from the participant logs: the evaluation part, the model judges'
/// agreement and the live battles.
type EvaluationParts = (
    Option<JudgmentsReport>,
    Option<JudgeAgreement>,
    Option<SourceVotes>,
);

/// The evaluation part, the model judges' agreement and the live battles, from the participant
/// logs (and model judges' logs) of `study` (or every study).
async fn read_judgments(
    store: &dyn Store,
    study: Option<&str>,
    options: &ReportOptions,
) -> Result<EvaluationParts, ReportError> {
    let mut collector = JudgmentsCollector::default();
    let mut logs = SessionStream::participant_logs(store, study).await?;
    while let Some(log) = logs.next().await? {
        let (worker, test) = log_worker(store, &log).await?;
        if test && !options.include_test {
            continue;
        }
        collector.add(
            &log.events,
            crate::judgments::log_rows(&log.events, &worker),
        );
    }
    let judges = collector.judge_agreement(options.ranking);
    let live = live_source(collector.rows());
    Ok((collector.report(), judges, live))
}

/// Where an imported vote goes in cast order: server time, cast time text, store id, position.
type CastKey = (u64, String, String, usize);

/// What the report keeps of the sessions it has read.
#[derive(Default)]
struct Collected {
    sessions: Vec<SessionFeatures>,
    /// Each session's scenario variant (None: it drew none), in the order of `sessions`.
    variants: Vec<Option<IndexMap<String, String>>>,
    acts: HashMap<(Role, String), usize>,
    /// Votes with their cast order key and their source (`import:<format>`).
    votes: Vec<(CastKey, String, Vote)>,
    /// Ratings per (item, target).
    ratings: BTreeMap<(String, String), Vec<f64>>,
    /// What scoring the questionnaires did.
    scales: ScaleNotes,
    /// The goal-based scores of the sessions with a user goal.
    goal_scores: goal_scores::Collector,
    /// The copilot's uptake of the sessions with suggestions.
    copilot: copilot::Collector,
}

/// The agreement between participants: on the votes (when there are any), and on each
/// rating item (`ratings`: the values given to each item and target).
fn agreements(
    votes: &[Vote],
    ratings: BTreeMap<(String, String), Vec<f64>>,
) -> IndexMap<String, Agreement> {
    let mut agreements = IndexMap::new();
    if !votes.is_empty() {
        agreements.insert("votes".to_string(), vote_agreement(votes));
    }
    let mut by_item: IndexMap<String, Vec<Vec<f64>>> = IndexMap::new();
    for ((item, _), values) in ratings {
        by_item.entry(item).or_default().push(values);
    }
    for (item, units) in by_item {
        agreements.insert(item, agreement(units, Level::Interval, &[]));
    }
    agreements
}

impl Collected {
    fn add(&mut self, session: &StoredSession, options: &ReportOptions) -> Result<(), ExportError> {
        let view = session.dataset_view();
        let mut f = features(&view);
        if !options
            .filters
            .iter()
            .all(|filter| filter.matches(session, &f))
        {
            return Ok(());
        }
        options.questionnaires.score(&mut f, &mut self.scales);
        for act in std::mem::take(&mut f.acts) {
            *self.acts.entry(act).or_default() += 1;
        }
        let at_ms = view
            .events
            .iter()
            .find(|e| matches!(&e.kind, EventKind::Annotation { key, .. } if key == crate::votes::VOTE_KEY))
            .map_or(0, |e| e.at_ms);
        let source = session.origin.as_ref().map_or_else(
            || "dialogues".to_string(),
            |o| format!("import:{}", o.format),
        );
        for (i, vote) in session_votes(&view)?.into_iter().enumerate() {
            let key = (at_ms, vote.session_id.clone(), session.store_id.clone(), i);
            self.votes.push((key, source.clone(), vote));
        }
        for value in view.annotations(RATING_KEY) {
            let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
            let number = value.get("value").and_then(Value::as_f64);
            if let (Some(item), Some(target), Some(number)) = (text("item"), text("target"), number)
            {
                self.ratings.entry((item, target)).or_default().push(number);
            }
        }
        self.goal_scores.add(&session.events, &f);
        self.copilot.add(&session.events);
        self.sessions.push(f);
        self.variants.push(scenario::variant(&session.events));
        Ok(())
    }

    /// The votes (sorted) by their source, each with its time.
    fn sources(&self) -> Vec<SourceVotes> {
        let mut sources: BTreeMap<String, Vec<(u64, Vote)>> = BTreeMap::new();
        for ((at_ms, ..), source, vote) in &self.votes {
            sources
                .entry(source.clone())
                .or_default()
                .push((*at_ms, vote.clone()));
        }
        sources
            .into_iter()
            .map(|(source, votes)| SourceVotes {
                source,
                votes,
                void: 0,
            })
            .collect()
    }

    fn report(mut self, options: &ReportOptions, live: Option<SourceVotes>) -> Report {
        let scenarios = scenario::breakdown(&self.sessions, &self.variants, options.outcome);
        let Summary {
            sessions,
            interaction,
            labelled_wizard_turns,
            da_types,
            top_acts,
            outcome_known,
            outcome_reached,
            questionnaire,
            correlations,
        } = summarise(
            &self.sessions,
            &self.acts,
            &self.scales.reversed,
            options.outcome,
            options.top,
        );
        self.votes.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sources = self.sources();
        sources.extend(live);
        let leaderboard = sourced_leaderboard(sources, options.ranking);
        let votes: Vec<Vote> = self.votes.into_iter().map(|(_, _, v)| v).collect();
        let agreements = agreements(&votes, self.ratings);
        let judged: Vec<(String, bool)> = self
            .sessions
            .iter()
            .filter_map(|s| Some((s.system.clone()?, s.outcome(Outcome::Satisfied)?)))
            .collect();
        Report {
            filters: options
                .filters
                .iter()
                .map(|f| (f.key.clone(), f.value.clone()))
                .collect(),
            outcome: options.outcome.name(),
            sessions,
            interaction,
            labelled_wizard_turns,
            da_types,
            top_acts,
            outcome_known,
            outcome_reached,
            questionnaire,
            unknown_questionnaires: self.scales.unknown_studies.into_iter().collect(),
            correlations,
            votes: votes.len(),
            leaderboard,
            agreement: agreements,
            satisfaction: satisfaction(&judged),
            scenarios,
            judgments: None,
            judge_agreement: None,
            goal_scores: self
                .goal_scores
                .report(options.ranking.bootstrap, options.ranking.seed),
            copilot: self
                .copilot
                .report(options.ranking.bootstrap, options.ranking.seed),
        }
    }
}
