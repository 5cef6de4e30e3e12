//! Warnings where a participant would read a machine name: the wizard's database panel shows a
//! table or a column by its own name (`price_per_person`) when the study gives it no words.

use super::Checker;

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

/// `price_per_person` as words: "Price per person".
fn words(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut chars = spaced.trim().chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => spaced,
    }
}
