//! The checks of `platforms:`: each Prolific completion code is one Prolific can hold (an
//! error), and a study that sends Prolific participants back declares a code for every ending
//! they can reach (a warning: the study still runs, those participants see wozkit's own code).

use super::Checker;
use crate::model::PageKind;
use crate::platforms::{EndingKind, code_problem};

impl Checker<'_> {
    /// Errors in `platforms.prolific.completion_codes`; returns the warnings.
    pub(super) fn platforms(&mut self) -> Vec<super::Diagnostic> {
        let study = self.study;
        let Some(prolific) = &study.platforms.prolific else {
            return self.no_prolific_codes();
        };
        let codes = &prolific.completion_codes;
        for ending in EndingKind::ALL {
            if let Some(problem) = codes.code(ending).and_then(code_problem) {
                self.err(
                    &format!("/platforms/prolific/completion_codes/{}", ending.as_str()),
                    problem,
                    Some(
                        "copy the code from the Prolific study (Study details, completion paths), e.g. `C1K8Q2ZD`"
                            .into(),
                    ),
                );
            }
        }
        if let Some(url) = &study.flow.completion_url
            && !url.contains("{code}")
        {
            self.err(
                "/flow/completion_url",
                "`flow.completion_url` has no `{code}` while the study declares Prolific completion codes"
                    .into(),
                Some(
                    "write `https://app.prolific.com/submissions/complete?cc={code}`, or remove the key (that address is the default)"
                        .into(),
                ),
            );
        }
        let missing: Vec<&str> = reachable_endings(self)
            .into_iter()
            .filter(|e| codes.code(*e).is_none())
            .map(EndingKind::as_str)
            .collect();
        if missing.is_empty() {
            return vec![];
        }
        vec![(self.diag)(
            "/platforms/prolific/completion_codes",
            format!(
                "no Prolific completion code for {}: Prolific participants who end so are not sent back to Prolific; they see wozkit's own code and are asked to message the researcher",
                missing.join(", ")
            ),
            Some(format!(
                "add {} with the codes of the Prolific study",
                missing
                    .iter()
                    .map(|k| format!("`{k}:`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        )]
    }

    /// A study without `preview`: MTurk's preview of its task shows only the title (the
    /// researcher's `description` is never shown to participants).
    pub(super) fn no_preview(&self) -> Option<super::Diagnostic> {
        self.study.preview.is_none().then(|| {
            (self.diag)(
                "/title",
                "the study has no `preview`: MTurk's preview of the task shows workers only the title (the researcher's `description` is not shown to participants)".into(),
                Some("add `preview:` with what a worker should know before accepting, in the participants' words (for a Wizard-of-Oz study, the cover story)".into()),
            )
        })
    }

    /// A study that sends Prolific participants back (`flow.completion_url` with `{code}`) but
    /// declares no Prolific code: nobody is sent back.
    fn no_prolific_codes(&self) -> Vec<super::Diagnostic> {
        match &self.study.flow.completion_url {
            Some(url) if url.contains("{code}") => vec![(self.diag)(
                "/flow/completion_url",
                "the study declares no Prolific completion codes: Prolific participants are not sent back to Prolific (it does not know wozkit's own codes); they see wozkit's code and are asked to message the researcher".into(),
                Some(
                    "add `platforms: {prolific: {completion_codes: {completed: …, no_partner: …}}}` with the codes of the Prolific study"
                        .into(),
                ),
            )],
            _ => vec![],
        }
    }
}

/// The endings a participant of the study can reach with a code to hand in (the blocklist is
/// left out: whether anyone is on it is known only when the server runs).
fn reachable_endings(c: &Checker<'_>) -> Vec<EndingKind> {
    let study = c.study;
    let completion = study
        .flow
        .user
        .iter()
        .chain(
            study
                .has_room()
                .then_some(&study.flow.wizard)
                .into_iter()
                .flatten(),
        )
        .any(|p| p.kind == PageKind::Completion);
    let mut out = vec![];
    if completion {
        out.push(EndingKind::Completed);
    }
    if study.has_room() {
        out.push(EndingKind::NoPartner);
    }
    if let Some(ev) = &study.evaluation {
        if ev.no_items.code {
            out.push(EndingKind::NoItems);
        }
        if ev.onboarding.as_ref().is_some_and(|o| o.fail.code) {
            out.push(EndingKind::ScreenedOnboarding);
        }
        if ev.gold.as_ref().is_some_and(|g| g.fail.code) {
            out.push(EndingKind::ScreenedGold);
        }
    }
    out
}
