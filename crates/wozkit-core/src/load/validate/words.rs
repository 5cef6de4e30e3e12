//! Warnings where a participant would read words the study did not choose: a machine name in
//! the wizard's database panel (a table or a column by its own name, `price_per_person`, when
//! the study gives it no words), the default role names of a Wizard-of-Oz study that names no
//! roles (the user would read that the partner is the "Wizard"), and English defaults (approval
//! buttons, the map's alarm) in a study written in another language.

use super::Checker;
use crate::model::{LockKind, Roles};

impl Checker<'_> {
    /// A table or shown column of the wizard's database whose name is a machine name (it holds
    /// `_`) and has no `label` / `labels` entry: the panel would show that name.
    pub(super) fn machine_names(&self) -> Vec<super::Diagnostic> {
        let Some(db) = &self.study.database else {
            return vec![];
        };
        let machine = |name: &str| name.contains('_');
        let mut out = vec![];
        for (table, spec) in &db.tables {
            let at = format!("/database/tables/{table}");
            if spec.label.is_none() && machine(table) {
                out.push((self.diag)(
                    &at,
                    format!("the wizard's database panel names this table `{table}`"),
                    Some(format!(
                        "add `label:` with the wizard's word for it, e.g. `label: {}`",
                        words(table)
                    )),
                ));
            }
            let bare: Vec<&str> = (spec.show.iter())
                .filter(|c| machine(c) && !spec.labels.contains_key(c.as_str()))
                .map(String::as_str)
                .collect();
            if !bare.is_empty() {
                out.push((self.diag)(
                    &format!("{at}/show"),
                    format!(
                        "the wizard's results table heads these columns by their names: {}",
                        bare.join(", ")
                    ),
                    Some(format!(
                        "add `labels:` with the wizard's words, e.g. `labels: {{{}: {}}}`",
                        bare[0],
                        words(bare[0])
                    )),
                ));
            }
        }
        out
    }
}

impl Checker<'_> {
    /// Participant-facing words left to their defaults where a participant would notice: the
    /// role names of a room study that gives none, and English defaults in a study in another
    /// language.
    pub(super) fn default_words(&self) -> Vec<super::Diagnostic> {
        let study = self.study;
        let mut out = vec![];
        let defaults = Roles::default();
        if study.has_room()
            && study.roles.user.label == defaults.user.label
            && study.roles.wizard.label == defaults.wizard.label
            && study.roles.wizard.name.is_none()
        {
            out.push((self.diag)(
                "/roles",
                "the study names no roles: participants read the defaults `Participant` and \
                 `Wizard`, so the user is told that the partner is a wizard"
                    .into(),
                Some(
                    "add `roles: {user: {label: …}, wizard: {label: …, name: …}}` in the \
                     participants' words (for a Wizard-of-Oz study, the cover story's assistant)"
                        .into(),
                ),
            ));
        }
        if study.language.is_default() {
            return out;
        }
        let tag = study.language.tag();
        for (i, state) in study.states.iter().enumerate() {
            let Some(lock) = &state.lock else { continue };
            if lock.kind != LockKind::Approval {
                continue;
            }
            for (field, value, default) in [
                ("approve_label", &lock.approve_label, "Approve"),
                ("deny_label", &lock.deny_label, "Deny"),
            ] {
                if value == default {
                    out.push((self.diag)(
                        &format!("/states/{i}/lock"),
                        format!(
                            "the user's approval button reads `{default}` (the English default) in a study in `{tag}`"
                        ),
                        Some(format!("add `{field}:` in the study's language")),
                    ));
                }
            }
        }
        if let Some(alarm) = &study.world.alarm {
            for (field, value, default) in [
                ("label", &alarm.label, "Alarm"),
                ("cleared_label", &alarm.cleared_label, "All clear"),
            ] {
                if value == default {
                    out.push((self.diag)(
                        "/world/alarm",
                        format!(
                            "the map's alarm reads `{default}` (the English default) in a study in `{tag}`"
                        ),
                        Some(format!("add `{field}:` in the study's language")),
                    ));
                }
            }
        }
        out
    }
}

/// `price_per_person` as words: "Price per person".
fn words(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut chars = spaced.trim().chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => spaced,
    }
}
