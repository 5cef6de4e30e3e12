//! What a study tells the crowd platforms: today, the completion codes configured on its
//! Prolific study, one per way a participant's part can end.
//!
//! Prolific knows a submission is finished by the `cc` of
//! `https://app.prolific.com/submissions/complete?cc=CODE`, which it matches against the codes
//! set on the Prolific study (each with its actions: approve, manual review, request a return…).
//! wozkit's own per-participant codes (HMAC, `wozkit payments --verify`) mean nothing there, so
//! a Prolific participant is sent back with the study's code for the ending they reached. This
//! module holds the declaration only; the server picks the code, the loader checks it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Shortest and longest completion code accepted (Prolific generates 7 or 8 characters; a
/// custom code is a short string of letters and digits).
pub const CODE_LEN: std::ops::RangeInclusive<usize> = 4..=20;

/// Settings for the crowd platforms participants come from.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Platforms {
    /// Prolific: the completion codes of the Prolific study.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prolific: Option<ProlificSettings>,
}

impl Platforms {
    pub fn is_empty(&self) -> bool {
        self.prolific.is_none()
    }
}

/// How the study ends for Prolific.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProlificSettings {
    /// The Prolific study's completion code for each ending. A Prolific participant is sent to
    /// `flow.completion_url` (by default `https://app.prolific.com/submissions/complete?cc={code}`)
    /// with the code of the ending they reached; without one for that ending they see wozkit's
    /// own code and are asked to message the researcher.
    #[serde(default)]
    pub completion_codes: ProlificCodes,
}

/// Prolific completion codes by ending: short upper-case letters and digits (`C1K8Q2ZD`),
/// exactly as set on the Prolific study. Two endings may share a code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProlificCodes {
    /// Reached the completion page (a dialogue ended, an evaluation finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<String>,
    /// Left without a partner when the waiting limit ran out (paid the `no_partner` rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_partner: Option<String>,
    /// Nothing left to judge on arrival (`evaluation.no_items`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_items: Option<String>,
    /// Failed the onboarding test (`evaluation.onboarding.fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screened_onboarding: Option<String>,
    /// Failed too many attention checks (`evaluation.gold.fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screened_gold: Option<String>,
    /// On the study's or the server's blocklist (shown `evaluation.onboarding.fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screened_blocklist: Option<String>,
}

/// The ways a participant's part ends, named as the payment table's statuses name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndingKind {
    Completed,
    NoPartner,
    NoItems,
    ScreenedOnboarding,
    ScreenedGold,
    ScreenedBlocklist,
}

impl EndingKind {
    pub const ALL: [EndingKind; 6] = [
        Self::Completed,
        Self::NoPartner,
        Self::NoItems,
        Self::ScreenedOnboarding,
        Self::ScreenedGold,
        Self::ScreenedBlocklist,
    ];

    /// The key in `completion_codes` and the payment table's status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::NoPartner => "no_partner",
            Self::NoItems => "no_items",
            Self::ScreenedOnboarding => "screened_onboarding",
            Self::ScreenedGold => "screened_gold",
            Self::ScreenedBlocklist => "screened_blocklist",
        }
    }

    /// The ending of a payment table status (`incomplete` and `abandoned` are none).
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == word)
    }
}

impl ProlificCodes {
    /// The code declared for an ending.
    pub fn code(&self, ending: EndingKind) -> Option<&str> {
        match ending {
            EndingKind::Completed => &self.completed,
            EndingKind::NoPartner => &self.no_partner,
            EndingKind::NoItems => &self.no_items,
            EndingKind::ScreenedOnboarding => &self.screened_onboarding,
            EndingKind::ScreenedGold => &self.screened_gold,
            EndingKind::ScreenedBlocklist => &self.screened_blocklist,
        }
        .as_deref()
    }

    /// Whether no code is declared.
    pub fn is_empty(&self) -> bool {
        EndingKind::ALL.into_iter().all(|e| self.code(e).is_none())
    }
}

/// Why `code` cannot be a Prolific completion code, if it cannot.
pub fn code_problem(code: &str) -> Option<String> {
    if !CODE_LEN.contains(&code.len()) {
        return Some(format!(
            "`{code}` has {} characters: a Prolific completion code has {} to {}",
            code.chars().count(),
            CODE_LEN.start(),
            CODE_LEN.end()
        ));
    }
    if let Some(c) = code
        .chars()
        .find(|c| !(c.is_ascii_uppercase() || c.is_ascii_digit()))
    {
        return Some(format!(
            "`{code}` has `{c}`: a Prolific completion code is upper-case letters A-Z and digits"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_short_upper_case_letters_and_digits() {
        assert_eq!(code_problem("C1K8Q2ZD"), None);
        assert_eq!(code_problem("ABCD"), None);
        assert!(code_problem("abc12345").is_some_and(|m| m.contains("`a`")));
        assert!(code_problem("C1K8-Q2ZD").is_some_and(|m| m.contains("`-`")));
        assert!(code_problem("ABC").is_some_and(|m| m.contains("3 characters")));
        assert!(code_problem(&"A".repeat(21)).is_some());
    }

    #[test]
    fn endings_are_named_as_payment_statuses() {
        for e in EndingKind::ALL {
            assert_eq!(EndingKind::parse(e.as_str()), Some(e));
        }
        assert_eq!(EndingKind::parse("incomplete"), None);
        let codes = ProlificCodes {
            no_partner: Some("NP123456".into()),
            ..ProlificCodes::default()
        };
        assert_eq!(codes.code(EndingKind::NoPartner), Some("NP123456"));
        assert_eq!(codes.code(EndingKind::Completed), None);
        assert!(!codes.is_empty());
        assert!(ProlificCodes::default().is_empty());
    }
}
