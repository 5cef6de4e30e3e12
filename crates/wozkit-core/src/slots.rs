//! Template slots: `{name}` placeholders in utterances, filled from the world when shown.
//!
//! `{{` and `}}` stand for literal braces. Which names exist is decided here, once, for both the
//! validator (a slot with no source is an error) and the engine (which fills them).

use crate::model::Study;

/// Slots the engine fills besides the world variables.
pub const BUILTIN_SLOTS: &[&str] = &[
    "robot.name",
    "robot.kind",
    "robot.location",
    "robot.battery",
    "robot.eta",
    "robot.progress",
    "robot.speed",
    "robot.status",
    "target.name",
    "time_left",
    "elapsed",
    "subtask",
    "wizard.name",
    "user.name",
];

/// A piece of a template.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    Slot(String),
}

/// Splits a template into text and slots.
pub fn parse(template: &str) -> Result<Vec<Part>, String> {
    let mut parts = vec![];
    let mut text = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        match ch {
            '{' if chars.peek().map(|(_, c)| *c) == Some('{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek().map(|(_, c)| *c) == Some('}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some((_, '}')) => break,
                        Some((_, c)) if c.is_alphanumeric() || c == '_' || c == '.' => name.push(c),
                        Some((j, c)) => {
                            return Err(format!(
                                "unexpected `{c}` in the slot opened at character {} (found at {j})",
                                i + 1
                            ));
                        }
                        None => {
                            return Err(format!(
                                "slot opened at character {} is not closed",
                                i + 1
                            ));
                        }
                    }
                }
                if name.is_empty() {
                    return Err(format!("empty slot `{{}}` at character {}", i + 1));
                }
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(Part::Slot(name));
            }
            '}' => return Err(format!("stray `}}` at character {}", i + 1)),
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(parts)
}

/// The slot names of a parsed template.
pub fn names(parts: &[Part]) -> impl Iterator<Item = &str> {
    parts.iter().filter_map(|p| match p {
        Part::Slot(s) => Some(s.as_str()),
        Part::Text(_) => None,
    })
}

/// Whether a slot has a source in this study. `db.TABLE.COLUMN` (the wizard's selected row of a
/// table of `database`) is known when the table is declared; its column is checked once the
/// table is loaded (`database::check_slots`).
pub fn is_known(name: &str, study: &Study) -> bool {
    BUILTIN_SLOTS.contains(&name)
        || study.world.variables.contains_key(name)
        || db_slot(name).is_some_and(|(t, _)| {
            study
                .database
                .as_ref()
                .is_some_and(|d| d.tables.contains_key(t))
        })
}

/// A slot `db.TABLE.COLUMN` as (table, column).
pub fn db_slot(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("db.")?;
    let (t, c) = rest.split_once('.')?;
    (!t.is_empty() && !c.is_empty() && !c.contains('.')).then_some((t, c))
}

/// Fills a template; unknown slots (impossible after validation) are kept as written.
pub fn render(template: &str, fill: impl Fn(&str) -> Option<String>) -> String {
    render_parsed(template, parse(template).ok().as_deref(), fill)
}

/// [`render`] of `template` given its parts ([`parse`] of it; `None` when it does not parse).
pub fn render_parsed(
    template: &str,
    parts: Option<&[Part]>,
    fill: impl Fn(&str) -> Option<String>,
) -> String {
    let Some(parts) = parts else {
        return template.to_string();
    };
    let mut out = String::with_capacity(template.len());
    for p in parts {
        match p {
            Part::Text(t) => out.push_str(t),
            Part::Slot(s) => match fill(s) {
                Some(v) => out.push_str(&v),
                None => {
                    out.push('{');
                    out.push_str(s);
                    out.push('}');
                }
            },
        }
    }
    out
}

/// The hasher of the engine's load-time tables (template texts, variable names), looked up on
/// every view: their keys come from the study, not from participants, and `foldhash` hashes a
/// ~100-byte text several times faster than the standard library's SipHash.
pub type FastHash = foldhash::fast::RandomState;

/// Templates parsed once, by their text: rendering looks a template up here instead of parsing
/// it again, and parses only a text it does not hold (every offer and fixed option of every
/// view is looked up: [`FastHash`]).
#[derive(Clone, Debug, Default)]
pub struct Templates(std::collections::HashMap<String, Option<Vec<Part>>, FastHash>);

impl Templates {
    /// Parses and keeps `template` (a template that does not parse is kept as such).
    pub fn insert(&mut self, template: &str) {
        if !self.0.contains_key(template) {
            self.0.insert(template.to_string(), parse(template).ok());
        }
    }

    /// The parts of `template` if it is held: `Some(None)` when it does not parse.
    pub fn get(&self, template: &str) -> Option<Option<&[Part]>> {
        self.0.get(template).map(Option::as_deref)
    }

    /// The templates of a study: every state's, every lock prompt and every fixed option.
    pub fn of(study: &Study) -> Templates {
        let mut t = Templates::default();
        for s in &study.states {
            for x in &s.templates {
                t.insert(x);
            }
            if let Some(p) = s.lock.as_ref().and_then(|l| l.prompt.as_ref()) {
                t.insert(p);
            }
        }
        for f in &study.fixed_options {
            t.insert(&f.text);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slots_and_literal_braces() {
        let p = parse("Send {robot.name} to {{x}} now").unwrap();
        assert_eq!(
            p,
            vec![
                Part::Text("Send ".into()),
                Part::Slot("robot.name".into()),
                Part::Text(" to {x} now".into())
            ]
        );
        assert!(parse("open {slot").is_err());
        assert!(parse("bad {sl ot}").is_err());
        assert!(parse("stray }").is_err());
        assert_eq!(
            render("{a}-{b}", |s| (s == "a").then(|| "1".into())),
            "1-{b}"
        );
    }
}
