//! The wizard's copilot: `copilot:` in a study file, the engine's `suggest` and
//! `send_suggestion`, and what the log says became of each suggestion.

use crate::common;
use common::{MINI, Run, USER, WIZARD, problems};

use wozkit_core::copilot::{Uptake, uptake};
use wozkit_core::engine::{Command, Refusal, replay};
use wozkit_core::event::{Actor, EventKind, MessageSource, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};

const SYSTEMS: &str =
    "systems:\n  helper:\n    kind: builtin\n    fallback: [\"How can I help?\"]\n";

fn with_copilot(copilot: &str) -> String {
    format!("{MINI}\n{SYSTEMS}{copilot}")
}

fn study() -> LoadedStudy {
    let text = with_copilot("copilot:\n  system: helper\n");
    load_text("s.yaml", &text, StudySource::Dir(std::env::temp_dir())).expect("the study loads")
}

impl Run {
    fn suggest(&mut self, text: &str) -> Vec<EventKind> {
        self.ok(
            &Actor::System,
            Command::Suggest {
                system: "helper".into(),
                text: text.into(),
            },
        )
    }
    fn send(&mut self, n: u32, text: &str) -> Result<Vec<EventKind>, Refusal> {
        self.run(
            &WIZARD,
            Command::SendSuggestion {
                n,
                text: text.into(),
            },
        )
    }
}

#[test]
fn a_copilot_loads_and_suggests_the_opening_by_default() {
    let study = study();
    let copilot = study.study.copilot.as_ref().expect("a copilot");
    assert_eq!(copilot.system, "helper");
    assert!(copilot.opening);
    let quiet = load_text(
        "s.yaml",
        &with_copilot("copilot: {system: helper, opening: false}\n"),
        StudySource::Dir(std::env::temp_dir()),
    )
    .expect("the study loads");
    assert!(!quiet.study.copilot.expect("a copilot").opening);
}

#[test]
fn a_copilot_names_a_system_a_program_answers() {
    let line = MINI.lines().count() + SYSTEMS.lines().count() + 3;
    assert_eq!(
        problems(&with_copilot("copilot:\n  system: helpr\n")),
        [format!("{line}:3: unknown system `helpr`")]
    );
    let desk = format!(
        "{MINI}\nsystems:\n  desk: {{kind: human}}\nflow:\n  wizard: [{{kind: desk}}]\n\
         copilot: {{system: desk}}\n"
    );
    // (A desk needs an evaluation study too: only the copilot's own problem matters here.)
    let problems = problems(&desk);
    assert!(
        problems
            .iter()
            .any(|p| p
                .ends_with("system `desk` is a person at the desk, who cannot suggest in time")),
        "{problems:?}"
    );
    assert_eq!(
        common::problems(&with_copilot("copilot:\n  system: helper\n  mode: eager\n")).len(),
        1,
        "an unknown key is refused"
    );
}

#[test]
fn a_suggestion_sent_as_it_is_edited_or_ignored_is_logged_so() {
    let mut r = Run::with(study());
    assert_eq!(
        r.suggest("  Hello, how can I help?  "),
        [EventKind::Suggested {
            n: 1,
            system: "helper".into(),
            text: "Hello, how can I help?".into(),
        }]
    );
    // Sent as it is: the message is ordinary free text, then what it came from.
    let sent = r.send(1, "Hello, how can I help?").expect("sent");
    assert_eq!(
        sent,
        [
            EventKind::Message {
                role: Role::Wizard,
                text: "Hello, how can I help?".into(),
                source: MessageSource::Free,
            },
            EventKind::SuggestionUsed { n: 1, edits: 0 },
        ]
    );
    // Once the wizard has spoken, the suggestion is closed.
    assert_eq!(
        r.refused(
            &WIZARD,
            Command::SendSuggestion {
                n: 1,
                text: "again".into()
            }
        ),
        Refusal::SuggestionClosed { n: 1 }
    );
    r.ok(
        &USER,
        Command::Text {
            text: "There is a fire.".into(),
        },
    );
    r.suggest("Where is the fire?");
    // Only the wizard sends from a suggestion.
    assert_eq!(
        r.refused(
            &USER,
            Command::SendSuggestion {
                n: 2,
                text: "Where is the fire?".into()
            }
        ),
        Refusal::WrongRole {
            expected: Role::Wizard
        }
    );
    // An edited one: the free text's own checks still hold.
    assert_eq!(
        r.refused(
            &WIZARD,
            Command::SendSuggestion {
                n: 2,
                text: "   ".into()
            }
        ),
        Refusal::EmptyText
    );
    let sent = r.send(2, "Where exactly is the fire?").expect("sent");
    assert_eq!(sent[1], EventKind::SuggestionUsed { n: 2, edits: 8 });
    // Ignored: the wizard answers in their own words.
    r.ok(
        &USER,
        Command::Text {
            text: "In the tower.".into(),
        },
    );
    r.suggest("I will send a robot.");
    r.ok(
        &WIZARD,
        Command::Text {
            text: "On my way.".into(),
        },
    );
    assert_eq!(
        r.refused(
            &WIZARD,
            Command::SendSuggestion {
                n: 3,
                text: "I will send a robot.".into()
            }
        ),
        Refusal::SuggestionClosed { n: 3 }
    );
    // An empty suggestion is nothing to show.
    assert_eq!(
        r.refused(
            &Actor::System,
            Command::Suggest {
                system: "helper".into(),
                text: " ".into()
            }
        ),
        Refusal::EmptyText
    );

    // The log tells what became of each, and replays to the same state.
    let (system, u) = uptake(&r.log).expect("suggestions");
    assert_eq!(system, "helper");
    assert_eq!(
        u,
        Uptake {
            suggested: 3,
            sent: 1,
            edited: 1,
            ignored: 1,
            edit_distances: vec![8],
            edited_lengths: vec![18],
        }
    );
    let replayed = replay(&r.study, "t", &r.log);
    assert_eq!(replayed, r.s);
}

#[test]
fn a_study_without_a_copilot_takes_no_suggestion() {
    let mut r = Run::new();
    assert_eq!(
        r.refused(
            &Actor::System,
            Command::Suggest {
                system: "helper".into(),
                text: "Hi".into()
            }
        ),
        Refusal::NoCopilot
    );
    assert!(uptake(&r.log).is_none());
}
