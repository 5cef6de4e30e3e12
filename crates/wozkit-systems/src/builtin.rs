//! The `builtin` kind: a scripted bot inside wozkit (keyword rules and fallbacks, a think time
//! and a typing speed). It needs no setup, so built-in studies run out of the box.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::spec::BuiltinSpec;
use crate::{Reply, Role, System, SystemError, Turn};

/// A scripted system answering from its [`BuiltinSpec`].
///
/// The reply to a dialogue is a pure function of its history: the participant's last message
/// picks the first keyword rule that matches it; when none does, the fallbacks are taken in turn,
/// counting the earlier participant messages no rule matched. No state is kept between calls, so
/// one bot serves any number of dialogues and a retried call gives the same reply.
///
/// The reply starts after `delay_ms`; streamed, it comes word by word at `words_per_s` (each
/// delta a word with the spaces around it, so the deltas add up to the reply), or whole when
/// `words_per_s` is 0.
#[derive(Debug, Clone)]
pub struct BuiltinSystem {
    spec: BuiltinSpec,
}

impl BuiltinSystem {
    /// The scripted bot declared by `spec` (assumed valid, see [`crate::SystemSpec::validate`]).
    pub fn new(spec: &BuiltinSpec) -> Self {
        BuiltinSystem { spec: spec.clone() }
    }

    /// The reply to `history` without the think time.
    pub fn answer(&self, history: &[Turn]) -> String {
        let mut user = history.iter().filter(|t| t.role == Role::User);
        let last = user.next_back().map_or("", |t| t.text.as_str());
        let unmatched = user.filter(|t| !self.spec.reply_to(&t.text, 0).1).count();
        self.spec.reply_to(last, unmatched).0
    }

    async fn think(&self) {
        if self.spec.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.spec.delay_ms)).await;
        }
    }
}

/// Splits `text` into words, each with the whitespace after it (the first also with any before
/// it), so the pieces concatenate to `text`.
pub(crate) fn words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut prev_space = false;
    let mut seen_word = false;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if !space && prev_space && seen_word {
            pieces.push(&text[start..i]);
            start = i;
        }
        seen_word |= !space;
        prev_space = space;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[async_trait]
impl System for BuiltinSystem {
    async fn reply(&self, _dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError> {
        self.think().await;
        Ok(Reply {
            text: self.answer(history),
        })
    }

    async fn reply_stream(
        &self,
        _dialogue_id: &str,
        history: &[Turn],
        deltas: mpsc::Sender<String>,
    ) -> Result<Reply, SystemError> {
        self.think().await;
        let text = self.answer(history);
        if self.spec.words_per_s == 0 {
            if !text.is_empty() {
                let _ = deltas.send(text.clone()).await;
            }
        } else {
            let gap = Duration::from_secs_f64(1.0 / f64::from(self.spec.words_per_s));
            for (i, word) in words(&text).into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(gap).await;
                }
                let _ = deltas.send(word.to_string()).await;
            }
        }
        Ok(Reply { text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_every_space() {
        for text in [
            "",
            "one",
            "  lead and trail  ",
            "two  spaces\tand\nnewline",
            "ünïcödé wörds hère",
        ] {
            let pieces = words(text);
            assert_eq!(pieces.concat(), text, "{pieces:?}");
            let count = text.split_whitespace().count();
            assert_eq!(pieces.len(), count, "{text:?} → {pieces:?}");
        }
        assert_eq!(words("a b"), ["a ", "b"]);
    }
}
