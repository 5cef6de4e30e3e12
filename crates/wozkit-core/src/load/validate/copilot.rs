//! The checks of `copilot:`: a study with a live room (there is no wizard to help otherwise),
//! and a system the study declares that a program answers (a person at the desk cannot suggest
//! in time).

use super::{Checker, did_you_mean};
use crate::systems::SystemSpec;

impl Checker<'_> {
    pub(super) fn copilot(&mut self) {
        let Some(copilot) = &self.study.copilot else {
            return;
        };
        if !self.study.has_room() {
            self.err(
                "/copilot",
                "the copilot helps a wizard in a live room, and this study has none".into(),
                Some("add a `room` page to the user's flow, or remove `copilot:`".into()),
            );
        }
        let system = copilot.system.as_str();
        match self.study.systems.get(system) {
            Some(SystemSpec::Human(_)) => self.err(
                "/copilot/system",
                format!("system `{system}` is a person at the desk, who cannot suggest in time"),
                Some("name a system a program answers (openai, http, websocket or builtin)".into()),
            ),
            Some(_) => {}
            None => {
                let hint = did_you_mean(system, self.study.systems.keys().map(String::as_str))
                    .or_else(|| Some("declare it under `systems:`".into()));
                self.err(
                    "/copilot/system",
                    format!("unknown system `{system}`"),
                    hint,
                );
            }
        }
    }
}
