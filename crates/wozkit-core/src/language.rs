//! The language of a study's pages (`language:` in the study file): which catalogue of
//! interface strings the server uses and what the pages' `lang` attribute says. The study's own
//! texts are written in that language by the researcher; this type only names it.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A supported page language, written as a BCP-47 tag. Unknown tags are a load error that
/// lists these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Language {
    /// English (the default).
    #[default]
    #[serde(rename = "en", alias = "en-US", alias = "en-GB")]
    En,
    /// Simplified Chinese; `zh-CN` and `zh` are read as it.
    #[serde(rename = "zh-Hans", alias = "zh-CN", alias = "zh")]
    ZhHans,
}

/// Every tag the study file accepts (aliases included): the JSON Schema's `enum`, so the loader
/// reports an unknown tag at its line and column with this list.
const ACCEPTED: [&str; 6] = ["en", "en-US", "en-GB", "zh-Hans", "zh-CN", "zh"];

impl JsonSchema for Language {
    fn schema_name() -> Cow<'static, str> {
        "Language".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "enum": ACCEPTED,
            "description": "The language of the participants' pages, a BCP-47 tag: `en` (default) or `zh-Hans` (`zh-CN`, `zh`)."
        })
    }
}

impl Language {
    /// Every supported language, the default first.
    pub const ALL: [Language; 2] = [Language::En, Language::ZhHans];

    /// The BCP-47 tag written into the pages' `lang` attribute.
    pub fn tag(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::ZhHans => "zh-Hans",
        }
    }

    /// Whether this is the default language (left out when a study is written back).
    pub fn is_default(&self) -> bool {
        *self == Language::En
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_aliases_read_back() {
        for l in Language::ALL {
            let back: Language = serde_json::from_value(serde_json::json!(l.tag())).unwrap();
            assert_eq!(back, l);
        }
        let cn: Language = serde_json::from_value(serde_json::json!("zh-CN")).unwrap();
        assert_eq!(cn, Language::ZhHans);
        for tag in ACCEPTED {
            assert!(serde_json::from_value::<Language>(serde_json::json!(tag)).is_ok());
        }
        let err = serde_json::from_value::<Language>(serde_json::json!("fr")).unwrap_err();
        assert!(err.to_string().contains("zh-Hans"), "{err}");
    }
}
