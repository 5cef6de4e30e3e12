//! `wozkit researchers add|list|remove|passwd`: researcher accounts in the store, around
//! [`wozkit_server::auth`]. Works while `wozkit serve` runs on the same data: a SQLite data
//! directory held by the server is opened beside it for account writes only
//! ([`wozkit_store::open_accounts`]), and the server asks the store on every request, so a
//! removal or a new password ends the account's logins at once.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand, ValueEnum};
use wozkit_server::auth::{self, Access};
use wozkit_store::Store;

#[derive(Args)]
pub struct ResearchersArgs {
    /// Data directory (SQLite), sqlite:FILE, or postgres://user:password@host/database.
    #[arg(
        long,
        env = "WOZKIT_DATA",
        default_value = "wozkit-data",
        global = true
    )]
    data: String,
    #[command(subcommand)]
    action: ResearchersCmd,
}

#[derive(Subcommand)]
pub enum ResearchersCmd {
    /// Add an account; without --password-stdin a password is made up and printed once.
    Add {
        /// Login name: 1 to 64 letters, digits, dots, dashes or underscores.
        name: String,
        /// What the account may do.
        #[arg(long, value_enum, default_value_t = AccessArg::Researcher)]
        access: AccessArg,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List the accounts: name, access, created (UTC).
    List,
    /// Remove an account; its logins end at once. The last owner cannot be removed.
    Remove { name: String },
    /// Set an account's password (made up and printed once without --password-stdin); its
    /// logins end at once.
    Passwd {
        name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
}

/// An access level on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub enum AccessArg {
    /// Everything, accounts included.
    Owner,
    /// Runs studies: observes and takes over rooms, reviews, pays.
    Researcher,
    /// Reads only.
    Observer,
}

impl From<AccessArg> for Access {
    fn from(a: AccessArg) -> Access {
        match a {
            AccessArg::Owner => Access::Owner,
            AccessArg::Researcher => Access::Researcher,
            AccessArg::Observer => Access::Observer,
        }
    }
}

/// Runs `wozkit researchers ...`.
pub fn researchers(args: ResearchersArgs) -> Result<ExitCode> {
    let password = match &args.action {
        ResearchersCmd::Add {
            password_stdin: true,
            ..
        }
        | ResearchersCmd::Passwd {
            password_stdin: true,
            ..
        } => Some(read_password()?),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let store = wozkit_store::open_accounts(&args.data)
            .await
            .with_context(|| format!("cannot open the data at {}", args.data))?;
        let result = run(store.as_ref(), args.action, password.as_deref()).await;
        store.close().await;
        for line in result? {
            println!("{line}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Does one command on `store`; returns the lines to print.
pub async fn run(
    store: &dyn Store,
    action: ResearchersCmd,
    password: Option<&str>,
) -> Result<Vec<String>> {
    Ok(match action {
        ResearchersCmd::Add { name, access, .. } => {
            let (account, generated) = auth::add_account(store, &name, access.into(), password)
                .await
                .with_context(|| format!("cannot add the account {name:?}"))?;
            let mut out = vec![format!("added {} ({})", account.name, account.access)];
            if let Some(pw) = generated {
                out.push(format!("password (shown once, stored hashed): {pw}"));
            }
            out
        }
        ResearchersCmd::List => {
            let accounts = store.accounts().await.context("cannot list the accounts")?;
            let width = accounts
                .iter()
                .map(|a| a.name.len())
                .max()
                .unwrap_or(4)
                .max(4);
            let mut out = vec![format!("{:width$}  {:10}  created (UTC)", "name", "access")];
            out.extend(accounts.iter().map(|a| {
                format!(
                    "{:width$}  {:10}  {}",
                    a.name,
                    a.access,
                    auth::fmt_time(a.created_at_ms)
                )
            }));
            out
        }
        ResearchersCmd::Remove { name } => {
            auth::remove_account(store, &name)
                .await
                .with_context(|| format!("cannot remove the account {name:?}"))?;
            vec![format!("removed {name}; its logins ended")]
        }
        ResearchersCmd::Passwd { name, .. } => {
            let generated = auth::set_password(store, &name, password)
                .await
                .with_context(|| format!("cannot set the password of {name:?}"))?;
            let mut out = vec![format!("new password set for {name}; its logins ended")];
            if let Some(pw) = generated {
                out.push(format!("password (shown once, stored hashed): {pw}"));
            }
            out
        }
    })
}

/// The first line of standard input, without its line end.
fn read_password() -> Result<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("password (one line):");
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    let pw = line.trim_end_matches(['\r', '\n']).to_string();
    if pw.is_empty() {
        return Err(anyhow!(
            "--password-stdin: standard input had no password on its first line"
        ));
    }
    Ok(pw)
}
