//! `wozkit prolific create-study` against the local Prolific mock: the draft carries the entry
//! link with Prolific's placeholders and exactly the completion codes the study declares, one
//! per ending, so what the completion pages send back is what Prolific knows.

use std::process::{Command, Stdio};

use wozkit_platforms::prolific::mock::MockProlific;

const TOKEN: &str = "create-token-9c2";

fn create(api: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args(["prolific", "create-study"])
        .args(args)
        .env("PROLIFIC_TOKEN", TOKEN)
        .env("PROLIFIC_API_URL", api)
        .stdin(Stdio::null())
        .output()
        .expect("wozkit runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_draft_has_the_entry_link_and_the_studys_codes() {
    let mock = MockProlific::start(TOKEN, "unused", vec![])
        .await
        .expect("mock");
    let api = mock.url();
    let base = [
        "--url",
        "https://study.example.org/",
        "--description",
        "Chat with a booking assistant to reserve a table.",
        "--places",
        "20",
        "--reward-cents",
        "150",
        "--minutes",
        "20",
    ];
    let args: Vec<&str> = ["--study", "restaurant-booking"]
        .into_iter()
        .chain(base)
        .collect();
    let (code, out, err) = tokio::task::spawn_blocking({
        let api = api.clone();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        move || create(&api, &args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .expect("join");
    assert_eq!(code, 0, "{out}{err}");
    let created = mock.created_studies();
    assert_eq!(created.len(), 1);
    let (id, body) = &created[0];
    assert!(out.contains(id.as_str()), "{out}");
    assert_eq!(
        body["external_study_url"],
        "https://study.example.org/join?study=restaurant-booking&PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    );
    assert_eq!(body["prolific_id_option"], "url_parameters");
    assert_eq!(body["reward"], 150);
    assert_eq!(body["device_compatibility"], serde_json::json!(["desktop"]));
    // The study file's codes (completed, no_partner), each waiting for wozkit's review.
    let study = wozkit_core::load::load_builtin("restaurant-booking").expect("built-in");
    let declared = &study
        .study
        .platforms
        .prolific
        .as_ref()
        .expect("Prolific settings")
        .completion_codes;
    let codes: Vec<(String, String, String)> = body["completion_codes"]
        .as_array()
        .expect("codes")
        .iter()
        .map(|c| {
            (
                c["code"].as_str().unwrap_or_default().to_string(),
                c["code_type"].as_str().unwrap_or_default().to_string(),
                c["actions"][0]["action"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            (
                declared.completed.clone().expect("completed"),
                "COMPLETED".to_string(),
                "MANUALLY_REVIEW".to_string()
            ),
            (
                declared.no_partner.clone().expect("no partner"),
                "OTHER".to_string(),
                "MANUALLY_REVIEW".to_string()
            ),
        ]
    );

    // A plain-HTTP server address is refused before anything is sent.
    let mut http_args = args.clone();
    http_args[3] = "http://study.example.org";
    let (code, _, err) = tokio::task::spawn_blocking({
        let api = api.clone();
        let a: Vec<String> = http_args.iter().map(|s| s.to_string()).collect();
        move || create(&api, &a.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .expect("join");
    assert_ne!(code, 0);
    assert!(err.contains("https://"), "{err}");
    assert_eq!(mock.created_studies().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_study_without_a_completed_code_is_refused_with_what_to_add() {
    let mock = MockProlific::start(TOKEN, "unused", vec![])
        .await
        .expect("mock");
    let dir = tempfile::tempdir().expect("temp dir");
    let export = dir.path().join("study");
    let exported = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args(["studies", "export", "restaurant-booking"])
        .arg(&export)
        .output()
        .expect("export runs");
    assert!(exported.status.success());
    let file = export.join("study.yaml");
    let text = std::fs::read_to_string(&file).expect("study file");
    let start = text.find("\nplatforms:\n").expect("the platform settings");
    let end = text[start..]
        .find("\nflow:")
        .map(|e| start + e)
        .expect("flow after them");
    let without = format!("{}{}", &text[..start], &text[end..]);
    std::fs::write(&file, without).expect("written");
    let study = export.to_string_lossy().into_owned();
    let api = mock.url();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        create(
            &api,
            &[
                "--study",
                &study,
                "--url",
                "https://study.example.org",
                "--description",
                "d",
                "--places",
                "2",
                "--reward-cents",
                "100",
                "--minutes",
                "10",
            ],
        )
    })
    .await
    .expect("join");
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("platforms.prolific.completion_codes"), "{err}");
    assert!(mock.created_studies().is_empty());
}
