//! The `ontology.json` of a ConvLab-3 unified dataset, gathered from the dialogues written:
//! every domain and slot of the acts, states and goals, every intent, and every act with the
//! speakers that used it (stringified as ConvLab-3's `preprocess.py` writes them, sorted). A
//! slot is categorical when a categorical act names it, its possible values then being the
//! values seen (the special values `''`, `dontcare`, `?` left out). Built per part of a split
//! export and merged, so every part carries the ontology of the whole dataset.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

/// The act kinds of the unified format, in its key order.
const KINDS: [&str; 3] = ["categorical", "non-categorical", "binary"];
const SPECIAL: [&str; 3] = ["", "dontcare", "?"];

#[derive(Clone, Debug, Default)]
pub struct Ontology {
    /// Domain → slot → categorical values (`None` for a non-categorical slot).
    domains: BTreeMap<String, BTreeMap<String, Option<BTreeSet<String>>>>,
    intents: BTreeSet<String>,
    /// Domain → slots of the belief state.
    state: BTreeMap<String, BTreeSet<String>>,
    /// (kind, intent, domain, slot) → (said by the user, said by the system).
    acts: BTreeMap<(usize, String, String, String), (bool, bool)>,
}

impl Ontology {
    /// Adds what one unified-format dialogue uses.
    pub fn add_dialogue(&mut self, dialogue: &Map<String, Value>) {
        for d in dialogue
            .get("domains")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            self.domains.entry(d.to_string()).or_default();
        }
        if let Some(goal) = dialogue.get("goal") {
            for part in ["inform", "request"] {
                for (d, slots) in objects(goal.get(part)) {
                    for (s, _) in objects(Some(slots)) {
                        self.slot(d, s, None);
                    }
                }
            }
        }
        for turn in dialogue
            .get("turns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let user = turn.get("speaker").and_then(Value::as_str) == Some("user");
            for (kind, name) in KINDS.iter().enumerate() {
                let acts = turn.get("dialogue_acts").and_then(|a| a.get(*name));
                for act in acts.and_then(Value::as_array).into_iter().flatten() {
                    let field = |k: &str| act.get(k).and_then(Value::as_str).unwrap_or_default();
                    let (intent, domain, slot) = (field("intent"), field("domain"), field("slot"));
                    self.intents.insert(intent.to_string());
                    let value = (kind == 0).then(|| field("value"));
                    if kind < 2 || !slot.is_empty() {
                        self.slot(domain, slot, value);
                    } else {
                        self.domains.entry(domain.to_string()).or_default();
                    }
                    let key = (kind, intent.into(), domain.into(), slot.into());
                    let said = self.acts.entry(key).or_default();
                    if user {
                        said.0 = true;
                    } else {
                        said.1 = true;
                    }
                }
            }
            for (d, slots) in objects(turn.get("state")) {
                for (s, _) in objects(Some(slots)) {
                    self.slot(d, s, None);
                    self.state
                        .entry(d.to_string())
                        .or_default()
                        .insert(s.to_string());
                }
            }
        }
    }

    /// Adds everything `other` holds.
    pub fn merge(&mut self, other: &Ontology) {
        for (d, slots) in &other.domains {
            self.domains.entry(d.clone()).or_default();
            for (s, values) in slots {
                match values {
                    None => self.slot(d, s, None),
                    Some(vs) if vs.is_empty() => self.slot(d, s, Some("")),
                    Some(vs) => vs.iter().for_each(|v| self.slot(d, s, Some(v))),
                }
            }
        }
        self.intents.extend(other.intents.iter().cloned());
        for (d, slots) in &other.state {
            self.state
                .entry(d.clone())
                .or_default()
                .extend(slots.iter().cloned());
        }
        for (key, (u, s)) in &other.acts {
            let said = self.acts.entry(key.clone()).or_default();
            said.0 |= u;
            said.1 |= s;
        }
    }

    /// Records a slot; `value` is `Some` for a categorical use (its value kept unless special).
    fn slot(&mut self, domain: &str, slot: &str, value: Option<&str>) {
        let slots = self.domains.entry(domain.to_string()).or_default();
        let entry = slots.entry(slot.to_string()).or_insert(None);
        if let Some(v) = value {
            let values = entry.get_or_insert_with(BTreeSet::new);
            for part in v.split('|').filter(|p| !SPECIAL.contains(p)) {
                values.insert(part.to_string());
            }
        }
    }

    /// The ontology as `ontology.json` holds it.
    pub fn to_value(&self) -> Value {
        let mut domains = Map::new();
        for (d, slots) in &self.domains {
            let mut s = Map::new();
            for (name, values) in slots {
                s.insert(
                    name.clone(),
                    json!({
                        "description": "",
                        "is_categorical": values.is_some(),
                        "possible_values": values.iter().flatten().collect::<Vec<_>>(),
                    }),
                );
            }
            domains.insert(d.clone(), json!({"description": "", "slots": s}));
        }
        let intents: Map<String, Value> = self
            .intents
            .iter()
            .map(|i| (i.clone(), json!({"description": ""})))
            .collect();
        let state: Map<String, Value> = self
            .state
            .iter()
            .map(|(d, slots)| {
                let slots: Map<String, Value> =
                    slots.iter().map(|s| (s.clone(), json!(""))).collect();
                (d.clone(), Value::Object(slots))
            })
            .collect();
        let mut acts = Map::new();
        for (kind, name) in KINDS.iter().enumerate() {
            let mut list: Vec<String> = self
                .acts
                .iter()
                .filter(|((k, ..), _)| *k == kind)
                .map(|((_, i, d, s), (user, system))| {
                    format!(
                        "{{'user': {}, 'system': {}, 'intent': {}, 'domain': {}, 'slot': {}}}",
                        py_bool(*user),
                        py_bool(*system),
                        py_str(i),
                        py_str(d),
                        py_str(s)
                    )
                })
                .collect();
            list.sort();
            acts.insert((*name).to_string(), json!(list));
        }
        json!({"domains": domains, "intents": intents, "state": state, "dialogue_acts": acts})
    }
}

fn objects(v: Option<&Value>) -> impl Iterator<Item = (&str, &Value)> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// A string as Python's `repr` writes it (single quotes unless the text holds one and no
/// double quote).
pub(crate) fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_written_as_python_writes_them() {
        assert_eq!(py_str("food"), "'food'");
        assert_eq!(py_str("it's"), "\"it's\"");
        assert_eq!(py_str("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_str("餐馆"), "'餐馆'");
    }
}
