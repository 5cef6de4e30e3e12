//! Page languages: a participant of `crosswoz-demo` (`language: zh-Hans`) walks every page the
//! user sees, from the entry link through consent, instructions, the waiting room, the room
//! (its page, the strings its script is handed, and every frame of the conversation) and a
//! questionnaire to the completion page, and no page carries a word of the English catalogue;
//! every page is marked `lang="zh-Hans"`. An English study's pages stay English.

use serde_json::{Value, json};
use wozkit_core::language::Language;
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_core::model::{Page, PageKind};
use wozkit_server::i18n::words;

use crate::client::Ws;
use crate::helpers::{Tiny, enter, spawn_app, spawn_app_in};

/// `crosswoz-demo` with a short Chinese questionnaire before its completion page, so that the
/// questionnaire's interface words are walked too (hints, the optional mark, what is wrong with
/// an answer sent back).
fn crosswoz_with_survey() -> LoadedStudy {
    let mut study = load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let st = &mut study.study;
    st.survey = serde_json::from_value(json!({"questions": [
        {"id": "smooth", "text": "对话顺利吗？", "kind": "likert", "points": 5,
         "labels": ["很不顺利", "不太顺利", "一般", "比较顺利", "很顺利"]},
        {"id": "helped", "text": "助手帮到你了吗？", "kind": "choice", "options": ["帮到了", "没有"]},
        {"id": "liked", "text": "你喜欢哪些方面？", "kind": "multiple", "required": false,
         "options": ["回复快", "信息准确"]},
        {"id": "rank", "text": "请排序。", "kind": "ranking", "required": false,
         "options": ["景点", "餐馆"]},
        {"id": "note", "text": "还有什么想说的？", "kind": "comment", "max_words": 50},
    ]}))
    .expect("the questionnaire reads");
    let at = st
        .flow
        .user
        .iter()
        .position(|p| p.kind == PageKind::Completion)
        .expect("a completion page");
    let mut page = Page::of(PageKind::Survey);
    page.title = Some("问卷".into());
    st.flow.user.insert(at, page);
    study
}

/// Fragments of the English catalogue that must not show on a Chinese page: each message cut at
/// its variables, trimmed, at least four characters, and not also a fragment of the Chinese
/// catalogue (a symbol or a name both share).
fn english_fragments() -> Vec<String> {
    let pieces = |lang: Language| -> Vec<String> {
        let strings = words(lang).script_strings("");
        let mut out = vec![];
        for text in strings.as_object().expect("an object").values() {
            let text = text.as_str().unwrap_or_default();
            for piece in text.split(['{', '}']).step_by(2) {
                let piece = piece.trim().trim_matches(|c: char| !c.is_alphanumeric());
                if piece.chars().count() >= 4 {
                    out.push(piece.to_string());
                }
            }
        }
        out
    };
    let zh = pieces(Language::ZhHans);
    let mut en: Vec<String> = pieces(Language::En)
        .into_iter()
        .filter(|p| !zh.contains(p))
        .collect();
    en.sort();
    en.dedup();
    assert!(en.len() > 80, "too few to mean anything: {en:?}");
    en
}

/// What a reader sees of a page: the text between tags, the attributes that are read out or
/// shown (placeholder, aria-label, title, alt), and the values (not the keys) of the strings
/// block the page hands its script.
fn readable(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    if let Some((before, after)) =
        rest.split_once("<script type=\"application/json\" id=\"strings\">")
    {
        let (json, tail) = after.split_once("</script>").expect("a closed block");
        let strings: Value = serde_json::from_str(json).expect("the strings are JSON");
        // The `{name}` holes are the script's, not words.
        for v in strings.as_object().expect("an object").values() {
            for piece in v.as_str().unwrap_or_default().split(['{', '}']).step_by(2) {
                out.push_str(piece);
                out.push('\n');
            }
        }
        out.push_str(&readable(before));
        rest = tail;
    }
    let mut in_tag = false;
    let mut tag = String::new();
    for c in rest.chars() {
        match (in_tag, c) {
            (false, '<') => {
                in_tag = true;
                tag.clear();
            }
            (false, c) => out.push(c),
            (true, '>') => {
                in_tag = false;
                for attr in ["placeholder", "aria-label", "title", "alt"] {
                    let marker = format!(" {attr}=\"");
                    if let Some(v) = tag.split(&marker).nth(1).and_then(|v| v.split('"').next()) {
                        out.push('\n');
                        out.push_str(v);
                    }
                }
                out.push('\n');
            }
            (true, c) => tag.push(c),
        }
    }
    out
}

/// Whether `text` holds `word` with no letter or digit right before or after it.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// Checks one page: marked Chinese, and no English interface words in what is read of it.
fn assert_chinese(name: &str, html: &str, english: &[String]) {
    assert!(
        html.contains("<html lang=\"zh-Hans\">"),
        "{name} is not marked zh-Hans: {html}"
    );
    let text = readable(html);
    let found: Vec<&String> = english.iter().filter(|w| has_word(&text, w)).collect();
    assert!(found.is_empty(), "{name} shows English {found:?}:\n{text}");
}

/// The strings of the frames a participant's socket received that the page shows as text (a
/// message, a name, a goal's description, a notice); protocol values (`kind`, `type`,
/// `act_type`, an ending's `reason`, …) are machine words the page never shows. Dialogue-act
/// `label`s are left out: they are the study's vocabulary (a state's label defaults to its id),
/// not interface words. An engine refusal whose kind the catalogue names is left out too: the
/// page shows the catalogue's sentence for it instead of the server's message.
fn frame_text(ws: &Ws) -> String {
    const SHOWN: [&str; 9] = [
        "text",
        "message",
        "name",
        "description",
        "title",
        "done",
        "prompt",
        "why_not",
        "value",
    ];
    fn walk(v: &Value, key: &str, out: &mut String) {
        match v {
            Value::String(s) if SHOWN.contains(&key) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, key, out)),
            Value::Object(m) => m.iter().for_each(|(k, x)| walk(x, k, out)),
            _ => {}
        }
    }
    // A refusal the catalogue names is shown in the page's words, not the server's message.
    let zh = words(Language::ZhHans).script_strings("room-js-refused-");
    let named = |frame: &Value| {
        frame["detail"]["refusal"].as_str().is_some_and(|kind| {
            zh.get(format!("room-js-refused-{}", kind.replace('_', "-")))
                .is_some()
        })
    };
    let mut out = String::new();
    for frame in ws.seen.iter().filter(|f| !named(f)) {
        walk(frame, "", &mut out);
    }
    out
}

#[tokio::test]
async fn a_chinese_study_shows_no_english_interface_word_on_any_page() {
    let english = english_fragments();
    let data = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(data.path().to_path_buf(), crosswoz_with_survey()).await;

    // MTurk's preview, before a worker accepts: no participant yet.
    let preview = crate::client::http(
        app.addr,
        "GET",
        "/join?workerId=W1&hitId=H1&assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE",
        &[],
        "",
    )
    .await
    .body;
    assert!(preview.contains("data-page=\"preview\""), "{preview}");
    assert!(preview.contains("你将与北京旅游咨询助手对话"), "{preview}");
    assert!(preview.contains("<html lang=\"zh-Hans\">"), "{preview}");

    let user = app.join("participant=guest&role=user").await;
    let wizard = app.join("participant=helper&role=wizard").await;
    for (who, c) in [("user", &user), ("wizard", &wizard)] {
        for expected in ["consent", "instructions"] {
            let page = c.page().await.body;
            assert!(
                page.contains(&format!("data-page=\"{expected}\"")),
                "{page}"
            );
            assert_chinese(&format!("the {who}'s {expected} page"), &page, &english);
            let step = c.step().await;
            assert_eq!(c.post("/p/next", &format!("step={step}")).await.status, 303);
        }
        let waiting = c.page().await.body;
        assert!(waiting.contains("data-page=\"waiting\""), "{waiting}");
        assert_chinese(&format!("the {who}'s waiting page"), &waiting, &english);
    }

    let mut pu = user.ws().await;
    pu.hello(0).await;
    let mut pw = wizard.ws().await;
    pw.hello(0).await;
    pu.until_type("paired").await;
    pw.until_type("paired").await;
    for (who, c) in [("user", &user), ("wizard", &wizard)] {
        let room = c.page().await.body;
        assert!(room.contains("data-page=\"room\""), "{room}");
        assert!(
            room.contains("id=\"strings\""),
            "the room hands its script no strings"
        );
        assert_chinese(&format!("the {who}'s room page"), &room, &english);
    }

    // A whole conversation, to the goodbye that ends it.
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    // A refusal carries its kind, which the room's Chinese strings name.
    wu.cmd("u0", json!({"cmd": "text", "text": "在吗？"})).await;
    let refused = wu.answer("u0").await;
    assert_eq!(
        refused["detail"]["refusal"], "muted_until_wizard",
        "{refused}"
    );
    let room = user.page().await.body;
    assert!(
        room.contains("\"room-js-refused-muted-until-wizard\":\"请等助手先发第一条消息\""),
        "{room}"
    );
    let say = |state: &'static str| json!({"cmd": "say", "state": state});
    ww.cmd("w1", say("greet")).await;
    ww.answer("w1").await;
    wu.cmd("u1", json!({"cmd": "text", "text": "你好，我想找个景点。"}))
        .await;
    wu.answer("u1").await;
    for (id, state) in [("w2", "no_offer"), ("w3", "request_more")] {
        ww.cmd(id, say(state)).await;
        let answer = ww.answer(id).await;
        assert_ne!(answer["type"], "error", "{answer}");
    }
    wu.cmd("u2", json!({"cmd": "text", "text": "没有了，谢谢。"}))
        .await;
    wu.answer("u2").await;
    ww.cmd("w4", say("goodbye")).await;
    assert_ne!(ww.answer("w4").await["type"], "error");
    wu.until_type("ended").await;
    ww.until_type("ended").await;
    for (who, ws) in [("user", &wu), ("wizard", &ww)] {
        let text = frame_text(ws);
        let found: Vec<&String> = english.iter().filter(|w| has_word(&text, w)).collect();
        assert!(
            found.is_empty(),
            "the {who}'s frames show English {found:?}:\n{text}"
        );
        assert!(text.contains("你好，我想找个景点。"), "{text}");
    }
    // The user's goal speaks of places, not of internal ids.
    let goal = wu
        .seen
        .iter()
        .find(|f| f["event"]["kind"] == "goal_generated")
        .expect("the user gets a goal");
    assert!(
        !goal["event"]["description"].to_string().contains("(id="),
        "{goal}"
    );

    let survey = user.page().await.body;
    assert!(survey.contains("data-page=\"survey\""), "{survey}");
    assert_chinese("the questionnaire", &survey, &english);
    for shown in [
        "可多选。",
        "（选填）",
        "最多 50 个词。",
        "1 为第一，2 为最后",
    ] {
        assert!(survey.contains(shown), "no `{shown}` in {survey}");
    }
    let step = user.step().await;
    let incomplete = user.post("/p/survey", &format!("step={step}")).await;
    assert_eq!(incomplete.status, 422);
    // What is wrong with each answer reads in Chinese too.
    assert_chinese("the questionnaire sent back", &incomplete.body, &english);
    assert!(
        incomplete.body.contains("请回答这个问题。"),
        "{}",
        incomplete.body
    );
    let wrong = user
        .post("/p/survey", &format!("step={step}&smooth=9"))
        .await;
    assert_eq!(wrong.status, 422);
    assert_chinese(
        "the questionnaire with a wrong point",
        &wrong.body,
        &english,
    );
    assert!(
        wrong.body.contains("请选择 1 到 5 之间的分值。"),
        "{}",
        wrong.body
    );
    let done = user
        .post(
            "/p/survey",
            &format!("step={step}&smooth=4&helped=%E5%B8%AE%E5%88%B0%E4%BA%86"),
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let completion = user.page().await.body;
    assert!(
        completion.contains("data-page=\"completion\""),
        "{completion}"
    );
    assert!(completion.contains("data-testid=\"completion-code\""));
    assert_chinese("the completion page", &completion, &english);
    app.stop().await;
}

#[tokio::test]
async fn an_english_study_keeps_english_pages_and_hands_its_script_english_words() {
    let mut app = spawn_app(Tiny::default()).await;
    let user = app.join("participant=ann&role=user").await;
    let consent = user.page().await.body;
    assert!(consent.contains("<html lang=\"en\">"), "{consent}");
    assert!(
        consent.contains("I agree and want to take part"),
        "{consent}"
    );
    user.accept_pages().await;
    let waiting = user.page().await.body;
    assert!(waiting.contains("Keep this tab open."), "{waiting}");
    assert!(waiting.contains("\"waiting-js-paired\":\"Partner found. Starting…\""));
    let wizard = app.join("participant=bob&role=wizard").await;
    wizard.accept_pages().await;
    let mut pu = user.ws().await;
    pu.hello(0).await;
    let mut pw = wizard.ws().await;
    pw.hello(0).await;
    pu.until_type("paired").await;
    let room = wizard.page().await.body;
    assert!(room.contains("<html lang=\"en\">"));
    for shown in [
        "What to say",
        "Always available",
        "placeholder=\"Type a message and press Enter\"",
    ] {
        assert!(room.contains(shown), "no `{shown}` in {room}");
    }
    assert!(
        room.contains("\"room-js-typing\":\"{partner} is typing…\""),
        "{room}"
    );
    app.stop().await;
}
