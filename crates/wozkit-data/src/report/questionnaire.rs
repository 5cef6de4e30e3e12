//! Questionnaire scales: which survey items are reverse-coded, and on what scale, so that every
//! item's mean, test and one-tailed direction read "higher is better" the same way.
//!
//! A live session stores the point each participant chose (`SurveyAnswered`, 1 = the `low`
//! label); the events do not say whether an item is reverse-coded. That is in the study file
//! (`survey.questions[].reverse` and `points`, or a role's own `survey.user.questions` /
//! `survey.wizard.questions`), so the report takes study definitions ([`Questionnaires`]) and
//! looks each session's study up by its `SessionStarted` event, and each answer up by the role
//! that gave it (the user and the wizard may answer different questions under the same id):
//! - a Likert question with `reverse: true` on a k-point scale (low 1, high k) has each answer x
//!   replaced by low + high − x = 1 + k − x before anything is computed from it; an answer
//!   outside 1..=k cannot be reversed (it is not a point of that scale: another version of the
//!   study, or a broken import), so it is left out and counted in [`Reversal::out_of_scale`];
//! - a session whose study definition was not given keeps its answers as stored, and its study is
//!   listed in [`ScaleNotes::unknown_studies`], so a reader is told the items may be mixed;
//! - imported dataset sessions have no `SessionStarted` and no questionnaire definition: their
//!   ratings are used as the files give them.
//!
//! The reverse flag applies to scale questions only: a `likert` question, and each row of a
//! `matrix` (stored as its own item `<question>.<row>`, reversed when the question or the row
//! says so). Answers to the other kinds of a known study (a `number`, a choice whose options
//! happen to be digits) are not points of a scale: they are left out of the means and tests.

use std::collections::{BTreeSet, HashMap, HashSet};

use indexmap::IndexMap;
use serde::Serialize;
use wozkit_core::event::Role;
use wozkit_core::model::{QuestionKind, Study};

use super::features::SessionFeatures;

/// The ends of a Likert scale.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scale {
    pub low: f64,
    pub high: f64,
}

impl Scale {
    /// The reversed score of `x`, `None` when `x` is not on the scale.
    pub fn reverse(self, x: f64) -> Option<f64> {
        (self.low..=self.high)
            .contains(&x)
            .then_some(self.low + self.high - x)
    }
}

/// The reverse-coded questions of the studies the report knows, by study id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Questionnaires {
    /// Study id → its questionnaire. A study with no reversed question is still present, so its
    /// sessions are known to need nothing.
    studies: HashMap<String, Definition>,
}

/// What scoring needs to know of one study's questionnaires, by the report's item names
/// (`<role>.<question>`, as [`super::features::Answer::item`]).
#[derive(Clone, Debug, Default, PartialEq)]
struct Definition {
    /// Reverse-coded item (`<role>.` and a Likert question id, or `<matrix>.<row>`) → its scale.
    reversed: HashMap<String, Scale>,
    /// Items (`<role>.<question>`) that are not on a scale: their answers are never averaged.
    unscored: HashSet<String>,
}

impl Questionnaires {
    /// The questionnaires of these studies.
    pub fn of<'a>(studies: impl IntoIterator<Item = &'a Study>) -> Questionnaires {
        let mut q = Questionnaires::default();
        for study in studies {
            q.add(study);
        }
        q
    }

    /// Adds (or replaces) a study's questionnaire.
    pub fn add(&mut self, study: &Study) {
        let mut def = Definition::default();
        for role in [Role::User, Role::Wizard] {
            let item = |id: &str| format!("{}.{id}", role.as_str());
            for q in study.survey.questions(role) {
                let scale = Scale {
                    low: 1.0,
                    high: f64::from(q.points()),
                };
                match q.kind {
                    QuestionKind::Likert if q.reverse => {
                        def.reversed.insert(item(&q.id), scale);
                    }
                    QuestionKind::Matrix => {
                        for row in q.rows.iter().filter(|r| q.reverse || r.reverse) {
                            def.reversed.insert(item(&q.row_field(row)), scale);
                        }
                    }
                    kind if !kind.is_scale() => {
                        def.unscored.insert(item(&q.id));
                    }
                    _ => {}
                }
            }
        }
        self.studies.insert(study.id.clone(), def);
    }

    /// Whether the questionnaire of `study` is known.
    pub fn knows(&self, study: &str) -> bool {
        self.studies.contains_key(study)
    }

    /// Replaces the session's reverse-coded answers by their reversed scores (dropping those off
    /// the scale), and notes what was done.
    pub fn score(&self, session: &mut SessionFeatures, notes: &mut ScaleNotes) {
        let surveyed = session.answers.iter().any(|a| a.question.is_some());
        let Some(study) = session.study.as_deref().filter(|_| surveyed) else {
            return;
        };
        let Some(def) = self.studies.get(study) else {
            notes.unknown_studies.insert(study.to_string());
            return;
        };
        session.answers.retain_mut(|answer| {
            if answer.question.is_none() {
                return true;
            }
            if def.unscored.contains(&answer.item) {
                return false;
            }
            let Some(scale) = def.reversed.get(&answer.item) else {
                return true;
            };
            let note = notes
                .reversed
                .entry(answer.item.clone())
                .or_insert(Reversal {
                    low: scale.low,
                    high: scale.high,
                    answers: 0,
                    out_of_scale: 0,
                });
            match scale.reverse(answer.value) {
                Some(score) => {
                    answer.value = score;
                    note.answers += 1;
                    true
                }
                None => {
                    note.out_of_scale += 1;
                    false
                }
            }
        });
    }
}

/// How one item was reversed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reversal {
    /// The scale the answers were reversed on (score = low + high − answer).
    pub low: f64,
    pub high: f64,
    /// Answers reversed.
    pub answers: usize,
    /// Answers left out because they were not a point of the scale.
    pub out_of_scale: usize,
}

/// What scoring the questionnaires did over all sessions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScaleNotes {
    /// Reversed items by report name (`<role>.<question>`).
    pub reversed: IndexMap<String, Reversal>,
    /// Studies whose sessions answered a survey but whose definition the report did not have.
    pub unknown_studies: BTreeSet<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::features::Answer;
    use wozkit_core::load::{StudySource, load_text};

    const STUDY: &str = r#"
id: kinds
title: Every kind of item
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
survey:
  questions:
    - id: sus
      text: About the system
      kind: matrix
      points: 5
      rows: [{id: easy, text: Easy}, {id: hard, text: Hard, reverse: true}]
    - {id: age, text: Age?, kind: number}
    - {id: level, text: Level?, kind: choice, options: ["1", "2"]}
"#;

    #[test]
    fn matrix_rows_are_scored_and_other_kinds_are_not_averaged() {
        let study = match load_text("kinds.yaml", STUDY, StudySource::Dir(".".into())) {
            Ok(s) => s.study,
            Err(e) => panic!("the test study does not load:\n{e}"),
        };
        let answer = |question: &str, value: f64| Answer {
            item: format!("user.{question}"),
            question: Some(question.to_string()),
            value,
        };
        let mut session = SessionFeatures {
            study: Some("kinds".into()),
            answers: vec![
                answer("sus.easy", 5.0),
                answer("sus.hard", 2.0),
                answer("age", 33.0),
                answer("level", 2.0),
                answer("gone", 3.0),
            ],
            ..SessionFeatures::default()
        };
        let mut notes = ScaleNotes::default();
        Questionnaires::of([&study]).score(&mut session, &mut notes);
        let kept: Vec<(&str, f64)> = session
            .answers
            .iter()
            .map(|a| (a.item.as_str(), a.value))
            .collect();
        // A question the study no longer has is kept as stored, as before.
        assert_eq!(
            kept,
            [
                ("user.sus.easy", 5.0),
                ("user.sus.hard", 4.0),
                ("user.gone", 3.0)
            ]
        );
        assert_eq!(notes.reversed["user.sus.hard"].high, 5.0);
    }

    const PER_ROLE: &str = r#"
id: roles
title: A questionnaire per role
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
survey:
  user:
    questions:
      - {id: effort, text: How easy was it?, kind: likert, points: 5}
      - {id: team, text: Team size?, kind: number}
  wizard:
    questions:
      - {id: effort, text: How demanding was it?, kind: likert, points: 7, reverse: true}
"#;

    #[test]
    fn each_role_is_scored_on_its_own_questionnaire() {
        let study = match load_text("roles.yaml", PER_ROLE, StudySource::Dir(".".into())) {
            Ok(s) => s.study,
            Err(e) => panic!("the test study does not load:\n{e}"),
        };
        let answer = |role: &str, question: &str, value: f64| Answer {
            item: format!("{role}.{question}"),
            question: Some(question.to_string()),
            value,
        };
        let mut session = SessionFeatures {
            study: Some("roles".into()),
            answers: vec![
                answer("user", "effort", 2.0),
                answer("user", "team", 3.0),
                answer("wizard", "effort", 2.0),
            ],
            ..SessionFeatures::default()
        };
        let mut notes = ScaleNotes::default();
        Questionnaires::of([&study]).score(&mut session, &mut notes);
        let kept: Vec<(&str, f64)> = session
            .answers
            .iter()
            .map(|a| (a.item.as_str(), a.value))
            .collect();
        // The same id: as given for the user, reversed on the wizard's seven points (8 - 2).
        assert_eq!(kept, [("user.effort", 2.0), ("wizard.effort", 6.0)]);
        assert_eq!(notes.reversed.len(), 1);
        assert_eq!(notes.reversed["wizard.effort"].high, 7.0);
    }

    #[test]
    fn reversal_mirrors_the_scale_and_refuses_points_off_it() {
        let seven = Scale {
            low: 1.0,
            high: 7.0,
        };
        assert_eq!(seven.reverse(1.0), Some(7.0));
        assert_eq!(seven.reverse(4.0), Some(4.0));
        assert_eq!(seven.reverse(6.0), Some(2.0));
        assert_eq!(seven.reverse(0.0), None);
        assert_eq!(seven.reverse(8.0), None);
    }
}
