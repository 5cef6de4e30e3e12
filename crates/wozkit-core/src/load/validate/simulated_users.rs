//! The checks of `simulated_users:`: unique names, an endpoint (a declared `openai` system, or a
//! URL with a model) or none (then `--user NAME=URL` gives it), a prompt whose placeholders are
//! known and show the dialogue, a vote prompt that shows both sides of an arena, a turn limit of
//! at least one and a stop phrase.

use std::collections::HashSet;

use super::Checker;
use crate::simulated_users::{ANSWER_PLACEHOLDERS, PLACEHOLDERS, SimulatedUser, VOTE_PLACEHOLDERS};

impl Checker<'_> {
    pub(super) fn simulated_users(&mut self) {
        let mut names = HashSet::new();
        for (i, user) in self.study.simulated_users.iter().enumerate() {
            self.simulated_user(&format!("/simulated_users/{i}"), user, &mut names);
        }
    }

    fn simulated_user<'s>(
        &mut self,
        base: &str,
        user: &'s SimulatedUser,
        names: &mut HashSet<&'s str>,
    ) {
        self.unique_name(base, "simulated user", &user.name, names);
        self.endpoint(
            base,
            "a simulated user",
            user.system.as_deref(),
            user.url.as_deref(),
            user.model.is_some(),
        );
        let prompt_ptr = format!("{base}/prompt");
        self.known_placeholders(&prompt_ptr, "prompt", &user.prompt, &PLACEHOLDERS);
        if !user.prompt.contains("{conversation}") {
            self.err(
                &prompt_ptr,
                "the prompt does not show the dialogue: it has no `{conversation}`".into(),
                Some("write `{conversation}` where the dialogue so far goes".into()),
            );
        }
        let vote_ptr = format!("{base}/vote_prompt");
        self.known_placeholders(
            &vote_ptr,
            "vote prompt",
            &user.vote_prompt,
            &VOTE_PLACEHOLDERS,
        );
        if !(user.vote_prompt.contains("{left}") && user.vote_prompt.contains("{right}")) {
            self.err(
                &vote_ptr,
                "the vote prompt does not show both conversations: it needs `{left}` and `{right}`"
                    .into(),
                Some("write `{left}` and `{right}` where each side's conversation goes".into()),
            );
        }
        let answer_ptr = format!("{base}/answer_prompt");
        self.known_placeholders(
            &answer_ptr,
            "answer prompt",
            &user.answer_prompt,
            &ANSWER_PLACEHOLDERS,
        );
        if !(user.answer_prompt.contains("{question}") && user.answer_prompt.contains("{choices}"))
        {
            self.err(
                &answer_ptr,
                "the answer prompt does not show the question: it needs `{question}` and \
                 `{choices}`"
                    .into(),
                Some(
                    "write `{question}` where the question goes and `{choices}` where what the \
                     answer may be goes"
                        .into(),
                ),
            );
        }
        if user.max_turns == 0 {
            self.err(
                &format!("{base}/max_turns"),
                "`max_turns` must be at least 1".into(),
                Some("the user's messages at most, e.g. `max_turns: 10`".into()),
            );
        }
        if user.stop.trim().is_empty() {
            self.err(
                &format!("{base}/stop"),
                "the stop phrase is empty".into(),
                Some("write the phrase that ends the dialogue, e.g. `stop: \"[END]\"`".into()),
            );
        }
    }

    /// Reports the first placeholder of `prompt` (the `what` of a simulated user, at `ptr`) that
    /// is not one of `known`.
    fn known_placeholders(&mut self, ptr: &str, what: &str, prompt: &str, known: &[&str]) {
        let unknown = crate::judges::placeholders(prompt).find(|p| !known.contains(p));
        if let Some(p) = unknown {
            self.err(
                ptr,
                format!("unknown placeholder `{{{p}}}` in the {what}"),
                Some(format!(
                    "known ones: {}",
                    known
                        .iter()
                        .map(|p| format!("{{{p}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
        }
    }
}
