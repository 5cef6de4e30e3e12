//! What an ending page gives a participant to hand in, and where it sends them: a Prolific
//! participant goes back to Prolific with the Prolific study's code for the ending they reached
//! (`platforms.prolific.completion_codes`), the only codes Prolific accepts; everyone else (MTurk,
//! lab, `/try`) sees wozkit's own per-participant code. wozkit's code is issued and logged
//! either way (the payment table is built from it); this module only decides what is shown.

use wozkit_core::language::Language;
use wozkit_core::model::Study;
use wozkit_core::platforms::EndingKind;
use wozkit_store::{Participant, Platform};

use super::html::esc;
use crate::i18n::words;

/// Seconds before an ending page sends the participant back to the crowd platform.
pub const REDIRECT_S: u32 = 5;

/// What an ending page shows and does for one participant.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Return {
    /// The code shown on the page (the one to type into the platform), if any.
    pub code: Option<String>,
    /// Where the page links and goes after [`REDIRECT_S`] seconds.
    pub url: Option<String>,
    /// A Prolific participant whose ending has no Prolific code: the page says to message the
    /// researcher with wozkit's code instead.
    pub no_prolific_code: bool,
    /// The study's page language, for the words around the code and the link.
    pub lang: Language,
}

/// The return of `p` at `ending`, whose own code (when the ending gives one) is `own_code`.
pub fn of(study: &Study, p: &Participant, ending: EndingKind, own_code: Option<&str>) -> Return {
    let lang = study.language;
    if p.platform != Platform::Prolific {
        return Return {
            code: own_code.map(str::to_string),
            lang,
            ..Return::default()
        };
    }
    match study.prolific_code(ending) {
        Some(code) => Return {
            code: Some(code.to_string()),
            url: study.prolific_redirect(ending),
            no_prolific_code: false,
            lang,
        },
        // A `completion_url` without `{code}` (a study without per-ending codes) still sends
        // the participant back; nobody is sent with a code Prolific cannot know.
        None => Return {
            code: own_code.map(str::to_string),
            url: study.prolific_redirect(ending),
            no_prolific_code: own_code.is_some(),
            lang,
        },
    }
}

impl Return {
    /// The `<head>` markup of the timed return (none for an MTurk form, which submits itself):
    /// a script that follows the link after [`REDIRECT_S`] seconds unless the participant
    /// presses "Stay on this page". Not a `<meta>` refresh, which nobody can stop (WCAG 2.2.1;
    /// axe-core's `meta-refresh`).
    pub fn head(&self) -> String {
        if self.url.is_some() {
            "<script type=\"module\" src=\"/assets/return.js\"></script>".to_string()
        } else {
            String::new()
        }
    }

    /// The code, the note of a missing Prolific code, and the link back, as page markup.
    pub fn body(&self) -> String {
        let w = words(self.lang);
        let mut out = String::new();
        if self.no_prolific_code {
            out.push_str(&format!(
                "<p id=\"no-prolific-code\" data-testid=\"no-prolific-code\">{}</p>",
                esc(&w.get("completion-no-prolific-code"))
            ));
        }
        if let Some(code) = &self.code {
            out.push_str(&format!(
                "<p>{}</p><p class=\"code\"><output id=\"completion-code\" \
                 data-testid=\"completion-code\">{}</output></p>",
                esc(&w.get("completion-code")),
                esc(code)
            ));
        }
        out
    }

    /// The link back to the platform.
    pub fn link(&self) -> String {
        let w = words(self.lang);
        self.url
            .as_ref()
            .map(|href| {
                format!(
                    "<p><a id=\"completion-link\" data-testid=\"completion-link\" class=\"button primary\" href=\"{}\" data-redirect-s=\"{REDIRECT_S}\">\
                     {}</a> <span id=\"completion-auto\" class=\"muted\">{}</span> \
                     <button type=\"button\" id=\"completion-stay\" data-testid=\"completion-stay\" hidden>{}</button></p>",
                    esc(href),
                    esc(&w.get("completion-return")),
                    esc(&w.with("completion-return-auto", &[("seconds", &REDIRECT_S.to_string())])),
                    esc(&w.get("completion-stay")),
                )
            })
            .unwrap_or_default()
    }
}
