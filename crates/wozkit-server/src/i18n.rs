//! Interface strings by page language: the words of buttons, labels, headings and notices that
//! the study file does not write, one Fluent catalogue per [`Language`] (`locales/*.ftl`,
//! embedded in the binary). A study's `language:` picks the catalogue its pages use; the study's
//! own texts (titles, instructions, questions) come from the study and are not translated here.
//!
//! The participant's scripts (`assets/room.js`, `assets/waiting.js`, `assets/chat.js`,
//! `assets/selfdialog.js`) get their strings from the page ([`Words::script_strings`]), so every
//! catalogue lives here and nowhere else.
//!
//! Adding a language: a `Language` variant in wozkit-core, a `locales/TAG.ftl` with every key of
//! `en.ftl` (the unit tests below fail until both hold), and its arm in [`catalogue_text`].

use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use fluent_bundle::FluentValue;
use fluent_bundle::concurrent::FluentBundle;
use fluent_bundle::{FluentArgs, FluentResource};
use fluent_syntax::ast;
use wozkit_core::language::Language;

/// The catalogue file of a language.
fn catalogue_text(lang: Language) -> &'static str {
    match lang {
        Language::En => include_str!("../locales/en.ftl"),
        Language::ZhHans => include_str!("../locales/zh-Hans.ftl"),
    }
}

/// One language's catalogue, parsed once.
pub struct Words {
    lang: Language,
    bundle: FluentBundle<FluentResource>,
    /// Each message's variables, for [`Words::script_strings`].
    variables: BTreeMap<String, Vec<String>>,
}

/// The catalogue of `lang`.
pub fn words(lang: Language) -> &'static Words {
    static ALL: OnceLock<Vec<Words>> = OnceLock::new();
    let all = ALL.get_or_init(|| Language::ALL.iter().map(|l| Words::parse(*l)).collect());
    let i = Language::ALL.iter().position(|l| *l == lang).unwrap_or(0);
    &all[i]
}

impl Words {
    fn parse(lang: Language) -> Words {
        // The catalogues are part of the binary and tested to parse; should one not, the
        // messages that did parse are used and the rest show their keys.
        let resource = FluentResource::try_new(catalogue_text(lang).to_string()).unwrap_or_else(
            |(partial, errors)| {
                tracing::error!("catalogue {}: {errors:?}", lang.tag());
                partial
            },
        );
        let mut variables = BTreeMap::new();
        for entry in resource.entries() {
            if let ast::Entry::Message(m) = entry {
                let mut vars = vec![];
                if let Some(p) = &m.value {
                    pattern_variables(p, &mut vars);
                }
                variables.insert(m.id.name.to_string(), vars);
            }
        }
        let id: unic_langid::LanguageIdentifier = lang.tag().parse().unwrap_or_default();
        let mut bundle = FluentBundle::new_concurrent(vec![id]);
        // Pages are marked with their language as a whole; isolation marks around each value
        // would only show up in copied text and tests.
        bundle.set_use_isolating(false);
        if let Err(errors) = bundle.add_resource(resource) {
            tracing::error!("catalogue {}: {errors:?}", lang.tag());
        }
        Words {
            lang,
            bundle,
            variables,
        }
    }

    /// The language of these words (for the page's `lang`).
    pub fn lang(&self) -> Language {
        self.lang
    }

    /// The message `key` without variables.
    pub fn get(&self, key: &str) -> String {
        self.with(key, &[])
    }

    /// The message `key` with its variables (`{ $name }`) set from `args`.
    pub fn with(&self, key: &str, args: &[(&str, &str)]) -> String {
        let mut fargs = FluentArgs::new();
        for (name, value) in args {
            fargs.set(*name, *value);
        }
        self.format(key, fargs)
    }

    /// The message `key` with variables that are numbers as well as texts: a number selects
    /// its plural form (`{ $count -> [one] option *[other] options }`).
    pub fn with_values(&self, key: &str, args: Vec<(&str, FluentValue<'_>)>) -> String {
        let mut fargs = FluentArgs::new();
        for (name, value) in args {
            fargs.set(name, value);
        }
        self.format(key, fargs)
    }

    fn format(&self, key: &str, fargs: FluentArgs<'_>) -> String {
        let Some(pattern) = self.bundle.get_message(key).and_then(|m| m.value()) else {
            debug_assert!(false, "no message `{key}` in {}", self.lang.tag());
            tracing::error!("no message `{key}` in catalogue {}", self.lang.tag());
            return key.to_string();
        };
        let mut errors = vec![];
        let out = self
            .bundle
            .format_pattern(pattern, Some(&fargs), &mut errors);
        if !errors.is_empty() {
            tracing::error!("message `{key}` in {}: {errors:?}", self.lang.tag());
        }
        out.into_owned()
    }

    /// The messages whose keys start with `prefix`, each with its variables written `{name}`
    /// for the script to fill, as a JSON object from key to text.
    pub fn script_strings(&self, prefix: &str) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .variables
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .map(|(key, vars)| {
                let holes: Vec<String> = vars.iter().map(|v| format!("{{{v}}}")).collect();
                let args: Vec<(&str, &str)> = vars
                    .iter()
                    .zip(&holes)
                    .map(|(v, h)| (v.as_str(), h.as_str()))
                    .collect();
                (
                    key.clone(),
                    serde_json::Value::String(self.with(key, &args)),
                )
            })
            .collect();
        serde_json::Value::Object(map)
    }

    /// The page markup that hands [`Words::script_strings`] to a script: a JSON data block
    /// (not run, so the Content-Security-Policy's ban on inline scripts does not touch it).
    pub fn script_block(&self, prefix: &str) -> String {
        let json = self.script_strings(prefix).to_string();
        // `<` escaped keeps `</script>` in a value from closing the block.
        format!(
            "<script type=\"application/json\" id=\"strings\">{}</script>",
            json.replace('<', "\\u003c")
        )
    }
}

/// The variables a pattern reads, in order of first use.
fn pattern_variables(pattern: &ast::Pattern<&str>, out: &mut Vec<String>) {
    for element in &pattern.elements {
        if let ast::PatternElement::Placeable { expression } = element {
            expression_variables(expression, out);
        }
    }
}

fn expression_variables(expression: &ast::Expression<&str>, out: &mut Vec<String>) {
    match expression {
        ast::Expression::Inline(inline) => inline_variables(inline, out),
        ast::Expression::Select { selector, variants } => {
            inline_variables(selector, out);
            for v in variants {
                pattern_variables(&v.value, out);
            }
        }
    }
}

fn inline_variables(inline: &ast::InlineExpression<&str>, out: &mut Vec<String>) {
    match inline {
        ast::InlineExpression::VariableReference { id } if !out.iter().any(|v| v == id.name) => {
            out.push(id.name.to_string());
        }
        ast::InlineExpression::Placeable { expression } => expression_variables(expression, out),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_parses_and_has_the_keys_of_english() {
        let en: Vec<String> = words(Language::En).variables.keys().cloned().collect();
        assert!(en.len() > 50, "{}", en.len());
        for lang in Language::ALL {
            let text = catalogue_text(lang).to_string();
            assert!(
                FluentResource::try_new(text).is_ok(),
                "{} does not parse",
                lang.tag()
            );
            let w = words(lang);
            let keys: Vec<String> = w.variables.keys().cloned().collect();
            assert_eq!(keys, en, "{} has other keys than en", lang.tag());
            for (key, vars) in &w.variables {
                // The same variables; their order follows each language's word order.
                let sorted = |v: &Vec<String>| {
                    let mut v = v.clone();
                    v.sort();
                    v
                };
                assert_eq!(
                    sorted(vars),
                    sorted(&words(Language::En).variables[key]),
                    "{}: `{key}` takes other variables than in en",
                    lang.tag()
                );
            }
        }
    }

    #[test]
    fn every_message_formats_without_errors() {
        for lang in Language::ALL {
            let w = words(lang);
            for (key, vars) in &w.variables {
                let pattern = w.bundle.get_message(key).and_then(|m| m.value());
                let pattern = pattern.unwrap_or_else(|| panic!("{key} has no value"));
                let mut args = FluentArgs::new();
                for v in vars {
                    args.set(v.as_str(), "x");
                }
                let mut errors = vec![];
                let text = w.bundle.format_pattern(pattern, Some(&args), &mut errors);
                assert!(errors.is_empty(), "{}: {key}: {errors:?}", lang.tag());
                assert!(!text.trim().is_empty(), "{}: {key} is empty", lang.tag());
            }
        }
    }

    #[test]
    fn english_refusals_read_as_the_engine_writes_them() {
        use wozkit_core::engine::Refusal;
        let en = words(Language::En);
        let key = |r: &Refusal| {
            let value = serde_json::to_value(r).unwrap_or_default();
            let kind = value["refusal"]
                .as_str()
                .unwrap_or_default()
                .replace('_', "-");
            format!("room-js-refused-{kind}")
        };
        for r in [
            Refusal::NotStarted,
            Refusal::Ended,
            Refusal::NotOffered { state: "s".into() },
            Refusal::Locked,
            Refusal::NoLock,
            Refusal::MutedUntilWizard,
            Refusal::EmptyText,
            Refusal::FinishNotAllowed,
            Refusal::NoHint,
            Refusal::SuggestionClosed { n: 1 },
        ] {
            assert_eq!(en.get(&key(&r)), r.to_string());
        }
        let long = Refusal::TextTooLong { max: 2000 };
        assert_eq!(en.with(&key(&long), &[("max", "2000")]), long.to_string());
        // Refusals naming the study's robots and actions: their holes are the refusal's fields,
        // as the room's script fills them from the error frame's detail.
        for r in [
            Refusal::TargetRequired,
            Refusal::TargetNotTaken {
                action: "Extinguish".into(),
            },
            Refusal::OutOfService {
                robot: "Husky".into(),
            },
            Refusal::RobotBusy {
                robot: "Husky".into(),
            },
            Refusal::OtherRobotActive {
                robot: "Husky".into(),
                selected: "Spot".into(),
                action: "Extinguish".into(),
            },
            Refusal::LacksCapability {
                robot: "Spot".into(),
                action: "Extinguish".into(),
                capability: "extinguish".into(),
            },
            Refusal::GuardFailed {
                action: "Send to location".into(),
                reason: None,
            },
            Refusal::NoDatabase,
        ] {
            let value = serde_json::to_value(&r).unwrap_or_default();
            let fields: Vec<(&str, &str)> = ["robot", "selected", "action"]
                .into_iter()
                .filter_map(|f| value[f].as_str().map(|v| (f, v)))
                .collect();
            assert_eq!(en.with(&key(&r), &fields), r.to_string());
        }
    }

    #[test]
    fn scripts_get_their_strings_with_named_holes() {
        let en = words(Language::En).script_strings("room-js-");
        assert_eq!(
            en["room-js-typing"],
            serde_json::json!("{partner} is typing…")
        );
        let zh = words(Language::ZhHans).script_block("room-js-");
        assert!(zh.contains("\"{partner}正在输入…\""), "{zh}");
        assert!(
            !zh.contains("room-you-are"),
            "only the prefix's messages: {zh}"
        );
        assert_eq!(zh.matches("</script>").count(), 1);
    }
}
