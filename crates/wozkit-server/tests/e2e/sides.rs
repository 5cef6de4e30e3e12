//! The two dialogues of a comparison page, recognised by their turns' text.

use anyhow::{Context, Result, bail};
use serde_json::json;
use wozkit_core::evaluation::Evaluation;

use crate::browser::Browser;

/// The other side.
pub fn other(side: &str) -> &'static str {
    if side == "left" { "right" } else { "left" }
}

/// The side on which `dialogue` is shown.
pub fn side_of(shown: &[String], dialogue: &str) -> Result<&'static str> {
    match shown.iter().position(|d| d == dialogue) {
        Some(0) => Ok("left"),
        Some(1) => Ok("right"),
        _ => bail!("{dialogue} is not one of the two dialogues shown: {shown:?}"),
    }
}

/// The dialogues shown inside `within`, left then right, each recognised by its turns' text.
pub async fn sides(br: &Browser, ev: &Evaluation, within: &str) -> Result<Vec<String>> {
    let v = br
        .js(
            "const c = document.querySelector(arguments[0]);\
             return [0, 1].map((s) => {\
               const d = c && c.querySelector(`[data-testid=dialogue-${s}]`);\
               return d ? [...d.querySelectorAll('.turn .text')].map((t) => t.textContent) : null })",
            vec![json!(within)],
        )
        .await?;
    let texts: Vec<Option<Vec<String>>> = serde_json::from_value(v)?;
    let mut shown = vec![];
    for (s, turns) in texts.into_iter().enumerate() {
        let turns = turns.with_context(|| format!("{}: no dialogue on side {s}", br.name))?;
        let matching: Vec<&str> = ev
            .dialogues
            .iter()
            .filter(|d| d.turns.iter().map(|t| &t.text).eq(turns.iter()))
            .map(|d| d.id.as_str())
            .collect();
        match matching.as_slice() {
            [id] => shown.push(id.to_string()),
            _ => bail!(
                "{}: side {s} matches {} dialogues of the study: {turns:?}",
                br.name,
                matching.len()
            ),
        }
    }
    Ok(shown)
}
