//! `wozkit lab-links`: signed entry links for named lab participants. A lab link resumes its
//! participant in any browser only when this server signed it (`sig=`); an unsigned one works
//! from the browser that started it and nowhere else, so a guessed name takes nobody's seat.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use wozkit_data::completion::CodeKey;

use crate::data_cmds::{Access, open_store};

#[derive(Args)]
pub struct LabLinksArgs {
    /// Data directory (SQLite), sqlite:FILE, or postgres://… of the server that will serve the
    /// links (its key signs them; start the server once on new data first).
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
    /// The study's id (as in its entry link).
    #[arg(long)]
    study: String,
    /// The server's public address, e.g. https://study.example.org.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Give every participant this role (`user` or `wizard`) instead of the lobby's choice.
    #[arg(long)]
    role: Option<String>,
    /// A private pair key: these participants are paired only among themselves.
    #[arg(long)]
    pair: Option<String>,
    /// Participant names (1–128 printable characters each), one link each.
    #[arg(required = true)]
    names: Vec<String>,
}

/// Percent-encodes a query value (RFC 3986 unreserved characters kept).
pub(crate) fn q(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn lab_links(args: LabLinksArgs) -> Result<ExitCode> {
    if let Some(role) = &args.role
        && role != "user"
        && role != "wizard"
    {
        bail!("--role {role}: write `user` or `wizard`");
    }
    for name in &args.names {
        if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            bail!("participant name {name:?}: use 1 to 128 printable characters");
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let store = open_store(&args.data, Access::Snapshot).await?;
        let key = CodeKey::load(store.as_ref()).await;
        store.close().await;
        let Some(key) = key? else {
            bail!(
                "{}: no signing key yet; start `wozkit serve` on it once, then sign the links",
                args.data
            );
        };
        let base = args.url.trim_end_matches('/');
        for name in &args.names {
            let mut link = format!(
                "{base}/join?study={}&participant={}",
                q(&args.study),
                q(name)
            );
            if let Some(role) = &args.role {
                link.push_str(&format!("&role={role}"));
            }
            if let Some(pair) = &args.pair {
                link.push_str(&format!("&pair={}", q(pair)));
            }
            link.push_str(&format!("&sig={}", key.lab_signature(&args.study, name)));
            println!("{link}");
        }
        Ok(ExitCode::SUCCESS)
    })
}
