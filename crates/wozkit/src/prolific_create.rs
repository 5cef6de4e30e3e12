//! `wozkit prolific create-study`: the Prolific study of a wozkit study, created as a draft
//! through the API with the entry link (Prolific's ids as URL parameters) and one completion
//! code per ending the study declares (`platforms.prolific.completion_codes`), so the codes
//! the completion pages send back are the codes Prolific knows.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use wozkit_core::load;
use wozkit_core::platforms::EndingKind;
use wozkit_platforms::prolific::{self, DraftAction, DraftCode, StudyDraft, URL_PARAMETERS};

#[derive(Args)]
pub struct CreateStudyArgs {
    /// The wozkit study (study file, folder or built-in name); its Prolific codes are used.
    #[arg(long)]
    study: String,
    /// The server's public address (https://…); the entry link is URL/join?study=ID&….
    #[arg(long)]
    url: String,
    /// The description participants read on Prolific (keep any cover story: no researcher notes).
    #[arg(long)]
    description: String,
    /// The title participants see (default: the study's title).
    #[arg(long)]
    name: Option<String>,
    /// Places (participants) to recruit; a dialogue study pairs them, so give an even number.
    #[arg(long)]
    places: u32,
    /// The reward in cents (pence) of the study's currency on Prolific.
    #[arg(long)]
    reward_cents: u64,
    /// The estimated completion time in minutes.
    #[arg(long)]
    minutes: u32,
    /// Devices participants may use (repeatable): desktop, tablet, mobile. Default: desktop.
    #[arg(long = "device", value_parser = ["desktop", "tablet", "mobile"])]
    devices: Vec<String>,
    /// Print the request's body instead of sending it.
    #[arg(long)]
    dry_run: bool,
}

/// Prolific's code type for an ending: only completions are `COMPLETED`; attention checks are
/// Prolific's own type; the other endings are `OTHER`. Every code waits for review
/// (`MANUALLY_REVIEW`): `wozkit prolific pay` approves by wozkit's own record of the
/// participant, not by the code typed.
fn code_type(ending: EndingKind) -> &'static str {
    match ending {
        EndingKind::Completed => "COMPLETED",
        EndingKind::ScreenedGold => "FAILED_ATTENTION_CHECK",
        EndingKind::NoPartner
        | EndingKind::NoItems
        | EndingKind::ScreenedOnboarding
        | EndingKind::ScreenedBlocklist => "OTHER",
    }
}

/// The draft for `args`, from the study's declared codes.
fn draft(args: &CreateStudyArgs) -> Result<StudyDraft> {
    let study = load::resolve(&args.study)
        .map_err(|d| anyhow::anyhow!("{d}"))
        .with_context(|| format!("study `{}` does not load", args.study))?;
    let st = &study.study;
    let codes = st
        .platforms
        .prolific
        .as_ref()
        .map(|p| p.completion_codes.clone())
        .unwrap_or_default();
    if codes.code(EndingKind::Completed).is_none() {
        bail!(
            "study `{}` declares no Prolific completion code for `completed`: add \
             platforms.prolific.completion_codes to the study (docs/platforms.md), one code per \
             ending, then create the Prolific study",
            st.id
        );
    }
    let mut completion_codes: Vec<DraftCode> = vec![];
    for ending in EndingKind::ALL {
        let Some(code) = codes.code(ending) else {
            continue;
        };
        // Two endings may share a code; Prolific holds each code once.
        if completion_codes.iter().any(|c| c.code == code) {
            continue;
        }
        completion_codes.push(DraftCode {
            code: code.to_string(),
            code_type: code_type(ending).to_string(),
            actions: vec![DraftAction {
                action: "MANUALLY_REVIEW".into(),
            }],
        });
    }
    let base = args.url.trim().trim_end_matches('/');
    if !base.starts_with("https://") {
        bail!("--url {base}: Prolific needs an https:// address (see docs/operations.md)");
    }
    if args.places == 0 || args.minutes == 0 || args.reward_cents == 0 {
        bail!("--places, --minutes and --reward-cents must be at least 1");
    }
    let study_q = crate::lab_cmd::q(&st.id);
    Ok(StudyDraft {
        name: args.name.clone().unwrap_or_else(|| st.title.clone()),
        internal_name: format!("wozkit: {}", st.id),
        description: args.description.clone(),
        external_study_url: format!("{base}/join?study={study_q}&{URL_PARAMETERS}"),
        prolific_id_option: "url_parameters".into(),
        completion_codes,
        total_available_places: args.places,
        estimated_completion_time: args.minutes,
        reward: args.reward_cents,
        device_compatibility: if args.devices.is_empty() {
            vec!["desktop".into()]
        } else {
            args.devices.clone()
        },
    })
}

pub fn create_study(args: CreateStudyArgs) -> Result<ExitCode> {
    let draft = draft(&args)?;
    if args.dry_run {
        println!("{}", serde_json::to_string_pretty(&draft)?);
        return Ok(ExitCode::SUCCESS);
    }
    let token = std::env::var(prolific::TOKEN_VAR).unwrap_or_default();
    let base = std::env::var(prolific::API_URL_VAR)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| prolific::DEFAULT_API_URL.to_string());
    let id = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(prolific::create_study(&base, &token, &draft))?;
    println!(
        "created the Prolific study {id} (a draft: check it and publish it in Prolific's web \
         application) with {} completion code(s): {}",
        draft.completion_codes.len(),
        draft
            .completion_codes
            .iter()
            .map(|c| format!("{} ({})", c.code, c.code_type))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("its entry link: {}", draft.external_study_url);
    Ok(ExitCode::SUCCESS)
}
