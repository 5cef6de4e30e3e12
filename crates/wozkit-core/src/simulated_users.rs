//! Simulated users: a language model (any OpenAI-compatible endpoint, or a scripted stand-in of
//! one) playing the user's seat, given the session's goal and the dialogue so far
//! (`simulated_users:` in the study, or `--user`/`--simulated-user` on the command line).
//!
//! This module holds the declaration, the prompt rendering and the reading of a reply into the
//! user's next move under the stop rule (a stop phrase in the reply, or the turn limit). It does
//! no IO: the server's room asks the endpoint and plays the move through the engine as any
//! participant's command, logged as a bot whose name starts with [`ACTOR_PREFIX`], which is what
//! marks a session as simulated ([`is_simulated`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{Actor, Event, EventKind, Role};

mod answers;
pub use answers::{ANSWER_PLACEHOLDERS, BadAnswer, DEFAULT_ANSWER_PROMPT, choices, read_answer};

/// The placeholders a simulated user's prompt may hold.
pub const PLACEHOLDERS: [&str; 5] = ["goal", "conversation", "turn", "max_turns", "stop"];

/// What the log names a simulated user's actor: this prefix and the simulated user's name.
pub const ACTOR_PREFIX: &str = "simulated:";

/// The prompt used when a simulated user gives none.
pub const DEFAULT_PROMPT: &str = "You play a user talking to an assistant, to reach this \
goal:\n{goal}\n\nSay what you want and ask for what you need, one short message at a time, \
as a person would. When the goal is reached, or cannot be reached, write {stop}.\n\nThe \
conversation so far:\n{conversation}\n\nWrite only your next message (turn {turn} of at most \
{max_turns}).";

/// The placeholders of a simulated user's vote prompt (an arena's vote after the
/// conversation).
pub const VOTE_PLACEHOLDERS: [&str; 3] = ["goal", "left", "right"];

/// The answers a vote may take, as the arena's form names them.
pub const VOTES: [&str; 4] = ["left", "right", "tie", "both_bad"];

/// The vote prompt used when a simulated user gives none.
pub const DEFAULT_VOTE_PROMPT: &str = "You played a user talking to two assistants at once, to \
reach this goal:\n{goal}\n\nThe conversation with the assistant on the left:\n{left}\n\nThe \
conversation with the assistant on the right:\n{right}\n\nWhich assistant served you better? \
Answer on the first line with one word: left, right, tie (as good as each other) or both_bad \
(neither helped). On the second line, say why in one sentence.";

/// One simulated user of a study.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimulatedUser {
    /// Its name: the log's actor is `simulated:NAME` (letters, digits, `_` and `-`).
    pub name: String,
    /// A system of the study's `systems` of kind `openai` to ask.
    #[serde(default)]
    pub system: Option<String>,
    /// Or the base URL of an OpenAI-compatible endpoint (`…/v1`); `--user NAME=URL#MODEL`
    /// gives or replaces it.
    #[serde(default)]
    pub url: Option<String>,
    /// The model asked at `url`.
    #[serde(default)]
    pub model: Option<String>,
    /// The prompt, with `{goal}` (the session's goal, one sentence per line), `{conversation}`
    /// (the dialogue so far, one `user:`/`assistant:` line per message), `{turn}`,
    /// `{max_turns}` and `{stop}`.
    #[serde(default = "default_prompt")]
    pub prompt: String,
    /// The user's messages at most: the one that reaches it ends the session.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// The phrase with which the reply ends the dialogue (the text before it is still said).
    #[serde(default = "default_stop")]
    pub stop: String,
    /// The prompt of an arena's vote after the conversation, with `{goal}`, `{left}` and
    /// `{right}` (each side's conversation, one `user:`/`assistant:` line per message). The
    /// reply's first word is the vote, the rest its reason.
    #[serde(default = "default_vote_prompt")]
    pub vote_prompt: String,
    /// The prompt of each question after a chat or arena page's conversation, with `{goal}`,
    /// `{conversation}`, `{question}` (its text) and `{choices}` (what the answer may be, and
    /// how to write it). The reply is read by the question's kind and checked by its rules.
    #[serde(default = "default_answer_prompt")]
    pub answer_prompt: String,
}

fn default_answer_prompt() -> String {
    DEFAULT_ANSWER_PROMPT.to_string()
}

fn default_vote_prompt() -> String {
    DEFAULT_VOTE_PROMPT.to_string()
}

fn default_prompt() -> String {
    DEFAULT_PROMPT.to_string()
}
fn default_max_turns() -> u32 {
    10
}
fn default_stop() -> String {
    "[END]".to_string()
}

impl SimulatedUser {
    /// A simulated user named `name` with the default prompt and stop rule (one given on the
    /// command line for a study that declares none).
    pub fn named(name: &str) -> SimulatedUser {
        SimulatedUser {
            name: name.to_string(),
            system: None,
            url: None,
            model: None,
            prompt: default_prompt(),
            max_turns: default_max_turns(),
            stop: default_stop(),
            vote_prompt: default_vote_prompt(),
            answer_prompt: default_answer_prompt(),
        }
    }

    /// The name of its actor in the log.
    pub fn actor_name(&self) -> String {
        format!("{ACTOR_PREFIX}{}", self.name)
    }

    /// The prompt asking for user turn `turn` (1 for the first), given the goal's text and the
    /// dialogue so far.
    pub fn prompt(&self, goal: &str, dialogue: &[(Role, String)], turn: u32) -> String {
        let conversation = if dialogue.is_empty() {
            "(nothing yet: you speak first)".to_string()
        } else {
            transcript(dialogue)
        };
        render(
            &self.prompt,
            &[
                ("goal", goal),
                ("conversation", &conversation),
                ("turn", &turn.to_string()),
                ("max_turns", &self.max_turns.to_string()),
                ("stop", &self.stop),
            ],
        )
    }

    /// Reads the reply for user turn `turn` under the stop rule: the stop phrase ends the
    /// dialogue after the text before it, and so does the turn limit after this turn's text.
    pub fn read_reply(&self, reply: &str, turn: u32) -> Result<UserMove, BadReply> {
        let (text, stopped) = match reply.find(&self.stop) {
            Some(at) if !self.stop.is_empty() => (&reply[..at], true),
            _ => (reply, false),
        };
        let text = text.trim();
        let finish = stopped || turn >= self.max_turns;
        if text.is_empty() && !finish {
            return Err(BadReply::Empty);
        }
        Ok(UserMove {
            text: (!text.is_empty()).then(|| text.to_string()),
            finish,
        })
    }
}

impl SimulatedUser {
    /// The prompt asking for an arena's vote, given the goal's text and each side's
    /// conversation.
    pub fn vote_prompt(
        &self,
        goal: &str,
        left: &[(Role, String)],
        right: &[(Role, String)],
    ) -> String {
        render(
            &self.vote_prompt,
            &[
                ("goal", goal),
                ("left", &transcript(left)),
                ("right", &transcript(right)),
            ],
        )
    }
}

/// Reads a vote reply: its first word (case, quotes and punctuation aside; `both bad` and
/// `both-bad` as written too) is one of [`VOTES`], and what follows it is the reason.
pub fn read_vote(reply: &str) -> Result<Vote, BadVote> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let text = reply.trim_start_matches(|c: char| !c.is_alphanumeric());
    let end = text.find(|c: char| !is_word(c)).unwrap_or(text.len());
    let word = text[..end].to_lowercase().replace('-', "_");
    let mut rest = &text[end..];
    let vote = if word == "both" {
        let after = rest.trim_start_matches([' ', '_', '-']);
        if !after.to_lowercase().starts_with("bad") {
            return Err(BadVote::Unknown(text[..end].to_string()));
        }
        rest = &after[3..];
        "both_bad"
    } else {
        VOTES
            .iter()
            .copied()
            .find(|v| *v == word)
            .ok_or_else(|| BadVote::Unknown(text[..end].to_string()))?
    };
    let reason = rest
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Vote {
        vote,
        reason: if reason.is_empty() {
            "(no reason given)".to_string()
        } else {
            reason
        },
    })
}

/// A vote read from a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vote {
    /// One of [`VOTES`].
    pub vote: &'static str,
    pub reason: String,
}

/// Why a reply could not be read as a vote.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadVote {
    #[error("the reply does not start with left, right, tie or both_bad but with `{0}`")]
    Unknown(String),
}

/// The user's next move read from a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserMove {
    /// What the user says, if anything.
    pub text: Option<String>,
    /// Whether the user ends the dialogue after it.
    pub finish: bool,
}

/// Why a reply could not be read as a move.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadReply {
    #[error("the reply is empty and does not end the dialogue")]
    Empty,
}

/// The dialogue as a prompt shows it: one `user: …` or `assistant: …` line per message.
pub fn transcript(dialogue: &[(Role, String)]) -> String {
    dialogue
        .iter()
        .map(|(role, text)| {
            let who = match role {
                Role::User => "user",
                Role::Wizard => "assistant",
            };
            format!("{who}: {}", text.replace('\n', " "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fills `{name}` placeholders of `template` in one pass, so a value holding braces (a message
/// that quotes `{goal}`) is never filled again; unknown names are left as written.
pub fn render(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let filled = after.find('}').and_then(|close| {
            let name = &after[..close];
            let value = values.iter().find(|(n, _)| *n == name)?.1;
            Some((value, close))
        });
        match filled {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether a session's log shows a simulated user in a seat (its `joined` event by a bot named
/// `simulated:…`).
pub fn is_simulated(events: &[Event]) -> bool {
    events.iter().any(|e| {
        matches!(e.kind, EventKind::Joined { bot: true, .. })
            && matches!(&e.actor, Actor::Bot { name, .. } if name.starts_with(ACTOR_PREFIX))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> SimulatedUser {
        SimulatedUser {
            max_turns: 3,
            ..SimulatedUser::named("tester")
        }
    }

    #[test]
    fn a_vote_is_the_first_word_and_its_reason_the_rest() {
        let read = |r: &str| read_vote(r).map(|v| (v.vote, v.reason));
        assert_eq!(
            read("left\nIt found a table for two."),
            Ok(("left", "It found a table for two.".to_string()))
        );
        assert_eq!(
            read("**Right.** The left one never answered"),
            Ok(("right", "The left one never answered".to_string()))
        );
        assert_eq!(read("TIE"), Ok(("tie", "(no reason given)".to_string())));
        assert_eq!(
            read("Both bad: neither booked anything."),
            Ok(("both_bad", "neither booked anything.".to_string()))
        );
        assert_eq!(
            read("both-bad"),
            Ok(("both_bad", "(no reason given)".to_string()))
        );
        assert_eq!(read("I think left"), Err(BadVote::Unknown("I".to_string())));
        assert_eq!(read("both good"), Err(BadVote::Unknown("both".to_string())));
        assert_eq!(read(""), Err(BadVote::Unknown(String::new())));
    }

    #[test]
    fn the_vote_prompt_shows_both_sides() {
        let u = SimulatedUser {
            vote_prompt: "G={goal}\nL:\n{left}\nR:\n{right}".into(),
            ..user()
        };
        let left = vec![
            (Role::User, "hi".to_string()),
            (Role::Wizard, "hello".to_string()),
        ];
        let right = vec![
            (Role::User, "hi".to_string()),
            (Role::Wizard, "yes?".to_string()),
        ];
        assert_eq!(
            u.vote_prompt("Find a museum.", &left, &right),
            "G=Find a museum.\nL:\nuser: hi\nassistant: hello\nR:\nuser: hi\nassistant: yes?"
        );
        assert!(
            user()
                .vote_prompt("g", &left, &right)
                .contains("assistant: yes?")
        );
    }

    #[test]
    fn the_prompt_shows_the_goal_and_the_dialogue() {
        let u = SimulatedUser {
            prompt: "Goal: {goal}\n{conversation}\nTurn {turn}/{max_turns}, stop with {stop}; \
                     {unknown} {\"json\": 1}"
                .into(),
            ..user()
        };
        let dialogue = vec![
            (Role::Wizard, "Hello, how can I help?".to_string()),
            (Role::User, "A table for {goal}".to_string()),
        ];
        assert_eq!(
            u.prompt("Book a table for 2.", &dialogue, 2),
            "Goal: Book a table for 2.\nassistant: Hello, how can I help?\nuser: A table for \
             {goal}\nTurn 2/3, stop with [END]; {unknown} {\"json\": 1}"
        );
        assert!(
            u.prompt("g", &[], 1)
                .contains("(nothing yet: you speak first)")
        );
    }

    #[test]
    fn the_stop_phrase_and_the_turn_limit_end_the_dialogue() {
        let u = user();
        assert_eq!(
            u.read_reply("  Two people, at 7 pm. ", 1),
            Ok(UserMove {
                text: Some("Two people, at 7 pm.".into()),
                finish: false
            })
        );
        assert_eq!(
            u.read_reply("Thanks, that is all. [END] ignored", 2),
            Ok(UserMove {
                text: Some("Thanks, that is all.".into()),
                finish: true
            })
        );
        assert_eq!(
            u.read_reply("[END]", 1),
            Ok(UserMove {
                text: None,
                finish: true
            })
        );
        assert_eq!(
            u.read_reply("Is it free?", 3),
            Ok(UserMove {
                text: Some("Is it free?".into()),
                finish: true
            })
        );
        assert_eq!(u.read_reply("   ", 1), Err(BadReply::Empty));
    }

    #[test]
    fn only_a_simulated_users_seat_marks_a_session() {
        let joined = |name: &str| Event {
            v: 1,
            session: "s".into(),
            seq: 1,
            at_ms: 0,
            actor: Actor::Bot {
                role: Role::User,
                name: name.into(),
            },
            kind: EventKind::Joined {
                role: Role::User,
                bot: true,
            },
        };
        assert!(is_simulated(&[joined(&user().actor_name())]));
        assert!(!is_simulated(&[joined("builtin")]));
        assert!(!is_simulated(&[]));
    }
}
