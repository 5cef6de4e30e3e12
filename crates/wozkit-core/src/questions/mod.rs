//! The one question model: every page that asks a participant something (the WoZ questionnaire
//! today; rating, comparison and onboarding pages later) declares its questions with these types,
//! checks the posted form with [`check`] and stores [`Answers::to_event`].
//!
//! Pure: no IO and no global randomness. A shuffled question's order comes from a seed the caller
//! passes (derived from the participant), so the page shown and the answers checked agree, and
//! the order shown is stored with the answers.
//!
//! - [`rules`]: the author's mistakes (min above max, duplicate options, …) for the loader;
//! - [`answers`]: form values → typed answers, or one human message per question.

pub mod answers;
pub mod rules;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use answers::{Answer, Answers, Fault, Faulted, Problem, Single, check};

use crate::event::Role;

/// Points a scale may have: two (yes/no) to eleven (0–10 style ratings); more are not usable as
/// a row of radio buttons on a phone.
pub const SCALE_POINTS: std::ops::RangeInclusive<u32> = 2..=11;
/// Points of a scale that does not say.
pub const DEFAULT_POINTS: u32 = 7;
/// Longest free-text answer, in characters: enough for a paragraph, bounded so one participant
/// cannot fill the log.
pub const MAX_TEXT_CHARS: usize = 2000;

/// The post-task questionnaire. Either one for both roles (`title` and `questions`), or one per
/// role (`user` and `wizard`, each with its own `title` and `questions`); a role without its own
/// answers the shared `questions`, and a role's questionnaire without a title takes the shared
/// `title`.
///
/// ```yaml
/// survey:
///   user:
///     title: About the task
///     questions: [{id: collaboration, text: How well did you work together?, kind: likert}]
///   wizard:
///     title: About the interface
///     questions: [{id: workload, text: How demanding was it?, kind: likert}]
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Survey {
    /// Title of the shared questionnaire (and of a role's own one that has no title).
    #[serde(default)]
    pub title: Option<String>,
    /// Questions for both roles, or for the role that has no questionnaire of its own.
    #[serde(default)]
    pub questions: Vec<Question>,
    /// The user's own questionnaire, instead of the shared questions.
    #[serde(default)]
    pub user: Option<Questionnaire>,
    /// The wizard's own questionnaire, instead of the shared questions.
    #[serde(default)]
    pub wizard: Option<Questionnaire>,
}

/// One role's own questionnaire: a title and its questions, in the order shown.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Questionnaire {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub questions: Vec<Question>,
}

impl Survey {
    /// The role's own questionnaire, if the study gives it one.
    pub fn own(&self, role: Role) -> Option<&Questionnaire> {
        match role {
            Role::User => self.user.as_ref(),
            Role::Wizard => self.wizard.as_ref(),
        }
    }

    /// The questions `role` answers: its own, else the shared ones.
    pub fn questions(&self, role: Role) -> &[Question] {
        self.own(role).map_or(&self.questions, |q| &q.questions)
    }

    /// The title of the questionnaire `role` answers: its own, else the shared one.
    pub fn title(&self, role: Role) -> Option<&str> {
        self.own(role)
            .and_then(|q| q.title.as_deref())
            .or(self.title.as_deref())
    }

    /// Where the questions `role` answers sit in the study file, as a JSON Pointer:
    /// `/survey/user/questions`, `/survey/wizard/questions` or `/survey/questions`.
    pub fn pointer(&self, role: Role) -> &'static str {
        match (role, self.own(role).is_some()) {
            (Role::User, true) => "/survey/user/questions",
            (Role::Wizard, true) => "/survey/wizard/questions",
            (_, false) => "/survey/questions",
        }
    }
}

/// What a question asks for, and so which of its keys apply: `likert` (one point of a scale, any
/// rating), `choice` (one option), `multiple` (several options), `text` (free text), `number`,
/// `matrix` (one point per row on a shared scale), `ranking` (every option in order, best first)
/// or `comment` (optional free text).
// The variants carry no doc comments on purpose: with them the JSON Schema becomes a `oneOf`, and
// a misspelt kind is reported as "not valid under any of the schemas" instead of "not one of".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    // One point on a scale of `points` (1 = `low`, `points` = `high`).
    Likert,
    // One of `options`.
    Choice,
    // Several of `options`, between `min_choices` and `max_choices`.
    Multiple,
    // Free text, between `min_words` and `max_words`.
    Text,
    // A number between `min` and `max`; `integer: true` for whole numbers only.
    Number,
    // One point on the shared scale for each of `rows`.
    Matrix,
    // All `options` put in order, best first.
    Ranking,
    // An optional comment box: free text with no minimum.
    Comment,
}

impl QuestionKind {
    /// Kinds answered with points of a scale: scored and averaged by the report.
    pub fn is_scale(self) -> bool {
        matches!(self, QuestionKind::Likert | QuestionKind::Matrix)
    }

    /// Kinds that list `options`.
    pub fn has_options(self) -> bool {
        matches!(
            self,
            QuestionKind::Choice | QuestionKind::Multiple | QuestionKind::Ranking
        )
    }

    /// Kinds whose options (or matrix rows) may be shown in a per-participant order.
    pub fn can_shuffle(self) -> bool {
        self.has_options() || self == QuestionKind::Matrix
    }

    /// The name authors write in `kind:`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::Likert => "likert",
            QuestionKind::Choice => "choice",
            QuestionKind::Multiple => "multiple",
            QuestionKind::Text => "text",
            QuestionKind::Number => "number",
            QuestionKind::Matrix => "matrix",
            QuestionKind::Ranking => "ranking",
            QuestionKind::Comment => "comment",
        }
    }
}

/// One question. Which keys apply depends on `kind`; the loader refuses a key that does not
/// apply, so a typo in the kind is not silently ignored.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// Form field name and answer key: letters, digits, `_` and `-`.
    pub id: String,
    /// The question as shown.
    pub text: String,
    pub kind: QuestionKind,
    /// Whether an answer is needed (default true); a `comment` is always optional.
    #[serde(default)]
    pub required: Option<bool>,
    /// Points of a `likert` or `matrix` scale, 2 to 11 (default 7).
    #[serde(default)]
    pub points: Option<u32>,
    /// Label of the low end (point 1).
    #[serde(default)]
    pub low: Option<String>,
    /// Label of the middle point (an odd number of points).
    #[serde(default)]
    pub mid: Option<String>,
    /// Label of the high end (the last point).
    #[serde(default)]
    pub high: Option<String>,
    /// A label for each point, low to high (instead of `low`, `mid` and `high`).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Reverse-coded (scale kinds): the report flips it before combining it with other items.
    #[serde(default)]
    pub reverse: bool,
    /// The options of `choice`, `multiple` and `ranking`; unique.
    #[serde(default)]
    pub options: Vec<String>,
    /// Show options (or matrix rows) in an order drawn per participant; the order shown is
    /// stored with the answers as `<id>:shown`.
    #[serde(default)]
    pub shuffle: bool,
    /// Fewest options a `multiple` answer may pick (1 when required and not given).
    #[serde(default)]
    pub min_choices: Option<u32>,
    /// Most options a `multiple` answer may pick.
    #[serde(default)]
    pub max_choices: Option<u32>,
    /// Fewest words of a `text` answer.
    #[serde(default)]
    pub min_words: Option<u32>,
    /// Most words of a `text` or `comment` answer.
    #[serde(default)]
    pub max_words: Option<u32>,
    /// Smallest `number` accepted.
    #[serde(default)]
    pub min: Option<f64>,
    /// Largest `number` accepted.
    #[serde(default)]
    pub max: Option<f64>,
    /// A `number` must be whole.
    #[serde(default)]
    pub integer: bool,
    /// The rows of a `matrix`, each answered on the question's scale.
    #[serde(default)]
    pub rows: Vec<MatrixRow>,
}

/// One row of a matrix question.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatrixRow {
    /// Unique within the question; the answer is stored as `<question>.<row>`.
    pub id: String,
    pub text: String,
    /// This row alone is reverse-coded.
    #[serde(default)]
    pub reverse: bool,
}

impl Question {
    /// Whether an answer is needed.
    pub fn is_required(&self) -> bool {
        self.kind != QuestionKind::Comment && self.required.unwrap_or(true)
    }

    /// Points of the scale.
    pub fn points(&self) -> u32 {
        self.points.unwrap_or(DEFAULT_POINTS)
    }

    /// The label of point `p` (1-based), if any: `labels`, else `low`, `mid` or `high`.
    pub fn point_label(&self, p: u32) -> Option<&str> {
        if !self.labels.is_empty() {
            return p
                .checked_sub(1)
                .and_then(|i| self.labels.get(i as usize))
                .map(String::as_str);
        }
        let n = self.points();
        if p == 1 {
            self.low.as_deref()
        } else if p == n {
            self.high.as_deref()
        } else if n % 2 == 1 && p == n / 2 + 1 {
            self.mid.as_deref()
        } else {
            None
        }
    }

    /// How many things are ordered: options, or matrix rows.
    fn items(&self) -> usize {
        if self.kind == QuestionKind::Matrix {
            self.rows.len()
        } else {
            self.options.len()
        }
    }

    /// The order the options (or matrix rows) are shown in, as indices into `options` (or
    /// `rows`): the written order unless `shuffle` is set, then an order drawn from `seed` and
    /// the question id, so one participant sees the same order on every reload while the
    /// questions of a page are shuffled independently.
    pub fn shown_order(&self, seed: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.items()).collect();
        if self.shuffle && self.kind.can_shuffle() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ seed_of(&self.id));
            // Fisher–Yates, written out so the order depends on nothing but the generator.
            for i in (1..order.len()).rev() {
                let j = rng.random_range(0..=i);
                order.swap(i, j);
            }
        }
        order
    }

    /// Name of the form field holding matrix row `row`'s point.
    pub fn row_field(&self, row: &MatrixRow) -> String {
        format!("{}.{}", self.id, row.id)
    }

    /// Name of the form field holding the rank given to option `i` (index in `options`).
    pub fn rank_field(&self, i: usize) -> String {
        format!("{}.{i}", self.id)
    }

    /// Answer key under which the order shown is stored.
    pub fn shown_key(&self) -> String {
        format!("{}:shown", self.id)
    }
}

/// A stable 64-bit seed from a text (FNV-1a), e.g. a participant id; the same on every build and
/// platform, unlike the standard library's hasher.
pub fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranking(shuffle: bool) -> Question {
        serde_json::from_value(serde_json::json!({
            "id": "r", "text": "Order these", "kind": "ranking", "shuffle": shuffle,
            "options": ["a", "b", "c", "d", "e", "f", "g", "h"]
        }))
        .expect("a valid question")
    }

    #[test]
    fn the_same_seed_gives_the_same_order_and_every_option_once() {
        let q = ranking(true);
        let order = q.shown_order(42);
        assert_eq!(order, q.shown_order(42));
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>());
        // Eight options have 40,320 orders: of 20 seeds, some differ from the written order.
        assert!((0..20).any(|s| q.shown_order(s) != (0..8).collect::<Vec<_>>()));
    }

    #[test]
    fn unshuffled_questions_keep_the_written_order() {
        assert_eq!(ranking(false).shown_order(42), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn point_labels_come_from_the_ends_the_middle_or_each_point() {
        let mut q: Question = serde_json::from_value(serde_json::json!({
            "id": "l", "text": "?", "kind": "likert", "points": 5,
            "low": "bad", "mid": "neither", "high": "good"
        }))
        .expect("a valid question");
        let labels: Vec<Option<&str>> = (1..=5).map(|p| q.point_label(p)).collect();
        assert_eq!(
            labels,
            [Some("bad"), None, Some("neither"), None, Some("good")]
        );
        q.labels = vec!["1".into(), "2".into()];
        assert_eq!(q.point_label(2), Some("2"));
        assert_eq!(q.point_label(0), None);
        assert_eq!(q.point_label(3), None);
    }

    #[test]
    fn comments_are_always_optional_and_other_kinds_unless_they_say_so() {
        let q = |kind: &str, required: Option<bool>| -> bool {
            let mut v = serde_json::json!({"id": "c", "text": "?", "kind": kind});
            if let Some(r) = required {
                v["required"] = r.into();
            }
            serde_json::from_value::<Question>(v)
                .map(|q| q.is_required())
                .unwrap_or_default()
        };
        assert!(!q("comment", None));
        assert!(!q("comment", Some(true)));
        assert!(q("text", None));
        assert!(!q("text", Some(false)));
    }

    mod per_role {
        use crate::event::Role;
        use crate::load::{StudySource, load_text};
        use crate::model::Study;

        const MINI: &str = include_str!("../../tests/common/mini.yaml");

        fn load(survey: &str) -> Result<Study, Vec<String>> {
            load_text(
                "s.yaml",
                &format!("{MINI}\n{survey}"),
                StudySource::Dir(".".into()),
            )
            .map(|s| s.study)
            .map_err(|d| {
                d.0.iter()
                    .map(|x| format!("{}:{}: {}", x.line, x.col, x.message))
                    .collect()
            })
        }

        fn ids(study: &Study, role: Role) -> Vec<&str> {
            study
                .survey
                .questions(role)
                .iter()
                .map(|q| q.id.as_str())
                .collect()
        }

        #[test]
        fn a_single_survey_file_still_loads_and_both_roles_answer_it() {
            let study = load(
                "survey:\n  title: After the task\n  questions:\n    \
                 - {id: q1, text: How was it?, kind: likert}\n",
            )
            .expect("the single-survey form loads");
            for role in [Role::User, Role::Wizard] {
                assert_eq!(ids(&study, role), ["q1"]);
                assert_eq!(study.survey.title(role), Some("After the task"));
                assert_eq!(study.survey.pointer(role), "/survey/questions");
            }
        }

        #[test]
        fn each_role_answers_its_own_questionnaire_or_the_shared_one() {
            let study = load(
                "survey:\n  title: Shared\n  questions:\n    \
                 - {id: q1, text: How was it?, kind: likert}\n  wizard:\n    \
                 title: The interface\n    questions:\n      \
                 - {id: workload, text: How demanding?, kind: likert}\n      \
                 - {id: q1, text: Other wording, kind: likert, points: 5}\n",
            )
            .expect("a wizard questionnaire with shared questions for the user loads");
            assert_eq!(ids(&study, Role::User), ["q1"]);
            assert_eq!(ids(&study, Role::Wizard), ["workload", "q1"]);
            assert_eq!(study.survey.title(Role::User), Some("Shared"));
            assert_eq!(study.survey.title(Role::Wizard), Some("The interface"));
            assert_eq!(
                study.survey.pointer(Role::Wizard),
                "/survey/wizard/questions"
            );
        }

        #[test]
        fn mistakes_in_a_role_questionnaire_are_reported_where_they_are() {
            let problems = load(
                "survey:\n  user:\n    questions:\n      \
                 - {id: q1, text: How was it?, kind: likert, points: 40}\n",
            )
            .expect_err("a 40-point scale is refused");
            // Line 44 is `survey:`; the question sits on line 47.
            assert!(
                problems.iter().any(|p| p.starts_with("47:")),
                "{problems:#?}"
            );
            let unknown = load("survey:\n  operator:\n    questions: []\n")
                .expect_err("an unknown role key is refused");
            assert!(
                unknown.iter().any(|p| p.contains("operator")),
                "{unknown:#?}"
            );
        }

        #[test]
        fn shared_questions_no_one_answers_are_refused() {
            let problems = load(
                "survey:\n  questions:\n    - {id: q1, text: How was it?, kind: likert}\n  \
                 user:\n    questions: [{id: a, text: A?, kind: likert}]\n  \
                 wizard:\n    questions: [{id: b, text: B?, kind: likert}]\n",
            )
            .expect_err("shared questions beside both roles' own are refused");
            // `survey.questions` is on line 45.
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with("45:") && p.contains("shown to no one")),
                "{problems:#?}"
            );
        }
    }
}
