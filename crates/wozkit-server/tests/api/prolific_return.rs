//! Prolific participants go back to Prolific with the Prolific study's code for the ending they
//! reached, which the stand-in of Prolific's completion page accepts; a code Prolific does not
//! know (wozkit's own) is never sent. Lab participants see wozkit's own code only.

use wozkit_core::load::LoadedStudy;
use wozkit_core::platforms::{ProlificCodes, ProlificSettings};
use wozkit_platforms::prolific::app_mock::MockProlificApp;

use crate::helpers::{Tiny, enter, greet_and_end, pair_links, spawn_app_in};

const COMPLETED: &str = "C1K8Q2ZD";
const NO_PARTNER: &str = "NP4R7TX2";

fn shown_code(page: &str) -> String {
    page.split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_default()
        .to_string()
}

fn link(page: &str) -> Option<String> {
    let rest = page.split("data-testid=\"completion-link\"").nth(1)?;
    let href = rest.split("href=\"").nth(1)?.split('"').next()?;
    Some(href.replace("&amp;", "&"))
}

/// The tiny study sending Prolific participants to `mock`, with these codes.
fn study(mock: &MockProlificApp, codes: ProlificCodes, wait_limit_s: u32) -> LoadedStudy {
    let mut study = Tiny {
        wait_limit_s,
        ..Tiny::default()
    }
    .study();
    study.study.flow.completion_url = Some(mock.completion_url());
    study.study.platforms.prolific = Some(ProlificSettings {
        completion_codes: codes,
    });
    study
}

/// Follows the page's link back to Prolific as the participant's browser would.
async fn follow(page: &str, worker: &str) -> u16 {
    let href = link(page).expect("a link back to Prolific");
    let url = href.strip_prefix("http://").expect("the mock's address");
    let (addr, path) = url.split_once('/').expect("a path");
    let (status, _, _) = crate::helpers::get_raw(
        addr.parse().expect("an address"),
        &format!("/{path}"),
        &format!("prolific_pid={worker}"),
    )
    .await;
    status
}

#[tokio::test]
async fn a_prolific_participant_who_finishes_is_sent_back_with_the_studys_code() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let prolific = MockProlificApp::start(&[COMPLETED, NO_PARTNER])
        .await
        .expect("mock");
    let codes = ProlificCodes {
        completed: Some(COMPLETED.into()),
        no_partner: Some(NO_PARTNER.into()),
        ..ProlificCodes::default()
    };
    let mut app = spawn_app_in(tmp.path().join("data"), study(&prolific, codes, 30)).await;
    // Crowd links never choose a role: the Prolific participant takes the one left, the wizard.
    let (user, wizard, _) = pair_links(
        &app,
        "participant=alice&role=user",
        "PROLIFIC_PID=PW1&STUDY_ID=S1&SESSION_ID=SW1",
    )
    .await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    greet_and_end(&mut ww, &mut wu).await;
    for c in [&user, &wizard] {
        let step = c.step().await;
        assert_eq!(
            c.post("/p/survey", &format!("step={step}&q1=4"))
                .await
                .status,
            303
        );
    }

    // The Prolific wizard: the study's code, the link and the timed redirect carry it.
    let page = wizard.page().await.body;
    assert_eq!(shown_code(&page), COMPLETED, "{page}");
    let expected = mock_url(&prolific, COMPLETED);
    assert_eq!(link(&page).as_deref(), Some(expected.as_str()), "{page}");
    assert!(timed_return(&page), "{page}");
    assert!(!page.contains("no-prolific-code"), "{page}");
    assert_eq!(follow(&page, "PW1").await, 200);

    // The lab user: wozkit's own code, nowhere to go.
    let page = user.page().await.body;
    let own = shown_code(&page);
    assert_eq!(own.len(), 8, "{page}");
    assert_ne!(own, COMPLETED);
    assert!(link(&page).is_none() && !timed_return(&page), "{page}");

    // wozkit still issued and recorded the wizard's own code (the payment table's).
    let prolific_user = app
        .store
        .participant_by_worker("tiny", wozkit_store::Platform::Prolific, "PW1")
        .await
        .expect("store")
        .expect("the Prolific wizard");
    let recorded = prolific_user.completion_code.clone().unwrap_or_default();
    assert_eq!(recorded.len(), 8);
    assert_ne!(recorded, COMPLETED);

    let visits = prolific.visits();
    assert_eq!(visits.len(), 1, "{visits:?}");
    assert!(
        visits[0].accepted && visits[0].code == COMPLETED,
        "{visits:?}"
    );
    assert_eq!(visits[0].participant.as_deref(), Some("PW1"));
    app.stop().await;
}

fn mock_url(mock: &MockProlificApp, code: &str) -> String {
    mock.completion_url().replace("{code}", code)
}

/// Left without a partner: the no-partner code when the study has one; without one, wozkit's
/// own code, a word to message the researcher, and no redirect (Prolific would refuse it, as
/// the mock shows). Lab participants are never sent anywhere.
#[tokio::test]
async fn no_partner_uses_its_own_code_or_sends_nobody_with_a_code_prolific_refuses() {
    let prolific = MockProlificApp::start(&[COMPLETED, NO_PARTNER])
        .await
        .expect("mock");
    let with = ProlificCodes {
        completed: Some(COMPLETED.into()),
        no_partner: Some(NO_PARTNER.into()),
        ..ProlificCodes::default()
    };
    let without = ProlificCodes {
        completed: Some(COMPLETED.into()),
        ..ProlificCodes::default()
    };
    for (codes, declared) in [(with, true), (without, false)] {
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut app = spawn_app_in(tmp.path().join("data"), study(&prolific, codes, 1)).await;
        for (query, from_prolific) in [
            ("PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1", true),
            ("", false),
        ] {
            let worker = app.join(query).await;
            worker.accept_pages().await;
            let mut ws = worker.ws().await;
            ws.hello(0).await;
            ws.until_type("ended").await;
            let page = worker.page().await.body;
            assert!(page.contains("data-testid=\"no-partner\""), "{page}");
            let code = shown_code(&page);
            let sent_back = from_prolific && declared;
            assert_eq!(code == NO_PARTNER, sent_back, "{query:?}: {page}");
            assert_eq!(code.len(), 8, "{page}");
            assert_eq!(link(&page).is_some(), sent_back, "{query:?}: {page}");
            assert_eq!(timed_return(&page), sent_back, "{page}");
            assert_eq!(
                page.contains("data-testid=\"no-prolific-code\""),
                from_prolific && !declared,
                "{query:?}: {page}"
            );
            if sent_back {
                assert_eq!(follow(&page, "P1").await, 200);
            } else if from_prolific {
                // What the old page did, redirecting with wozkit's own code: refused.
                let old = format!(
                    "<a data-testid=\"completion-link\" href=\"{}\">",
                    mock_url(&prolific, &code)
                );
                assert_eq!(follow(&old, "P1").await, 400);
            }
        }
        app.stop().await;
    }
    let visits = prolific.visits();
    assert_eq!(
        visits.iter().map(|v| v.accepted).collect::<Vec<_>>(),
        [true, false],
        "{visits:?}"
    );
    assert_eq!(visits[0].code, NO_PARTNER);
}

/// Whether the page goes back to the platform by itself: the return script, the link's delay
/// and the button that stops it (never a `<meta>` refresh, which nobody can stop).
fn timed_return(page: &str) -> bool {
    assert!(!page.contains("http-equiv=\"refresh\""), "{page}");
    let parts = [
        "<script type=\"module\" src=\"/assets/return.js\"></script>",
        "data-redirect-s=\"5\"",
        "data-testid=\"completion-stay\" hidden>",
    ];
    let found = parts.iter().filter(|p| page.contains(*p)).count();
    assert!(found == 0 || found == parts.len(), "{page}");
    found == parts.len()
}
