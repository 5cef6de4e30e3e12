//! The checks of `evaluation.judges`: unique names, an endpoint (a declared `openai` system, or
//! a URL with a model) or none (then `wozkit judge --judge` gives it), questions a judge can
//! answer, a prompt whose placeholders are known and show the item, and `swap` only for
//! comparisons.

use std::collections::HashSet;

use super::{Checker, did_you_mean};
use crate::evaluation::{EvalTask, Evaluation};
use crate::judges::{CHOICE, ModelJudge, PLACEHOLDERS, question_options, unknown_placeholders};
use crate::systems::SystemSpec;

impl Checker<'_> {
    pub(super) fn judges(&mut self) {
        let study = self.study;
        let Some(ev) = &study.evaluation else {
            return;
        };
        let mut names = HashSet::new();
        for (i, judge) in ev.judges.iter().enumerate() {
            let base = format!("/evaluation/judges/{i}");
            self.unique_name(&base, "judge", &judge.name, &mut names);
            self.endpoint(
                &base,
                "a judge",
                judge.system.as_deref(),
                judge.url.as_deref(),
                judge.model.is_some(),
            );
            self.judge_questions(ev, &base, judge);
            let unknown = unknown_placeholders(&judge.prompt);
            if !unknown.is_empty() {
                self.err(
                    &format!("{base}/prompt"),
                    format!("unknown placeholder `{{{}}}` in the prompt", unknown[0]),
                    Some(format!(
                        "known ones: {}",
                        PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                    )),
                );
            }
            let needed: &[&str] = if ev.task == EvalTask::Compare {
                &["{conversation_a}", "{conversation_b}"]
            } else {
                &["{conversation}"]
            };
            for n in needed {
                if !judge.prompt.contains(n) {
                    self.err(
                        &format!("{base}/prompt"),
                        format!("the prompt does not show the item: it has no `{n}`"),
                        Some(format!("write `{n}` where the conversation goes")),
                    );
                }
            }
            if judge.swap && ev.task != EvalTask::Compare {
                self.err(
                    &format!("{base}/swap"),
                    "`swap` is for comparisons: a rating has no sides".into(),
                    Some("remove `swap: true`".into()),
                );
            }
            if !matches!(ev.task, EvalTask::Rate | EvalTask::Compare) {
                self.err(
                    &base,
                    "model judges judge written dialogues: `task` must be `rate` or `compare`"
                        .into(),
                    None,
                );
            }
        }
    }

    /// A judge's questions: at least one, each one it can answer.
    fn judge_questions(&mut self, ev: &Evaluation, base: &str, judge: &ModelJudge) {
        if judge.questions.is_empty() {
            self.err(
                &format!("{base}/questions"),
                "a judge answers at least one question".into(),
                Some("list question ids of `evaluation.questions`, or `choice`".into()),
            );
        }
        for (k, q) in judge.questions.iter().enumerate() {
            if question_options(ev, q).is_none() {
                let mut known: Vec<&str> = ev.questions.iter().map(|q| q.id.as_str()).collect();
                if ev.task == EvalTask::Compare {
                    known.push(CHOICE);
                }
                let hint = did_you_mean(q, known.iter().copied()).or_else(|| {
                    Some(
                        "a judge answers `likert` and `choice` questions of \
                         `evaluation.questions`, and `choice` (the side preferred) in a \
                         comparison"
                            .into(),
                    )
                });
                self.err(
                    &format!("{base}/questions/{k}"),
                    format!("judge `{}` cannot answer question `{q}`", judge.name),
                    hint,
                );
            }
        }
    }

    /// The name of a judge or simulated user (`what`) at `base`: letters, digits, `_` and `-`,
    /// and not one of `names` (the names seen so far, which it joins).
    pub(super) fn unique_name<'s>(
        &mut self,
        base: &str,
        what: &str,
        name: &'s str,
        names: &mut HashSet<&'s str>,
    ) {
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            self.err(
                &format!("{base}/name"),
                format!("{what} name `{name}` is not a name"),
                Some("use letters, digits, `_` and `-`".into()),
            );
        }
        if !names.insert(name) {
            self.err(
                &format!("{base}/name"),
                format!("duplicate {what} name `{name}`"),
                Some(format!("{what} names must be unique")),
            );
        }
    }

    /// The endpoint of a judge or simulated user at `base`: a declared `openai` system, or a URL
    /// with a model, or none (the command line gives it then).
    pub(super) fn endpoint(
        &mut self,
        base: &str,
        what: &str,
        system: Option<&str>,
        url: Option<&str>,
        has_model: bool,
    ) {
        match (system, url) {
            (Some(_), Some(_)) => self.err(
                &format!("{base}/url"),
                format!("{what} names a `system` or a `url`, not both"),
                Some("remove one of them".into()),
            ),
            (Some(system), None) => match self.study.systems.get(system) {
                Some(SystemSpec::Openai(_)) => {}
                Some(_) => self.err(
                    &format!("{base}/system"),
                    format!("system `{system}` is not of kind `openai`"),
                    Some(format!(
                        "{what} is asked through an OpenAI-compatible endpoint"
                    )),
                ),
                None => {
                    let hint = did_you_mean(system, self.study.systems.keys().map(String::as_str))
                        .or_else(|| Some("declare it under `systems:`, or give `url`".into()));
                    self.err(
                        &format!("{base}/system"),
                        format!("unknown system `{system}`"),
                        hint,
                    );
                }
            },
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    self.err(
                        &format!("{base}/url"),
                        format!("`{url}` is not an http(s) URL"),
                        Some("write the endpoint's base, e.g. `http://127.0.0.1:8000/v1`".into()),
                    );
                }
                if !has_model {
                    self.err(
                        &format!("{base}/url"),
                        format!("{what} with a `url` needs a `model`"),
                        Some("add `model:`, the name the endpoint serves".into()),
                    );
                }
            }
            (None, None) => {}
        }
    }
}
