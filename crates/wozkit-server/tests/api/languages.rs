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

/// A comparison in Chinese: a questions page, a practice comparison, one pair with per-turn
/// labels (one of them ruling out the others, a label required on every reply) and a reason
/// of at least two words.
const COMPARE_ZH: &str = r#"id: zh-compare
title: 对话比较
language: zh-Hans
flow:
  user:
    - {id: about, kind: questions, questions: [{id: native, text: 你的母语是中文吗？, kind: choice, options: [是, 否]}]}
    - {kind: onboarding}
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  justification: {min_words: 2}
  annotate: {speaker: 助手, kind: checkboxes, options: [有帮助, 编造, 都不是], exclusive: [都不是], required: true}
  no_items: {code: true}
  onboarding:
    items: [{a: g1, b: g2, better: g1}]
    fail: {text: 很遗憾，练习题答错了。}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: 用户, text: 你好}, {speaker: 助手, text: 你好，有什么可以帮你？}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: 用户, text: 你好}, {speaker: 助手, text: 走开}]}
    - {id: g1, system: A, turns: [{speaker: 用户, text: 你好}, {speaker: 助手, text: 祝你今天愉快}]}
    - {id: g2, system: B, turns: [{speaker: 用户, text: 你好}, {speaker: 助手, text: 乱码乱码}]}
"#;

/// The side (`left`/`right`) on which a page's first comparison shows `text`.
fn side_of(body: &str, text: &str) -> &'static str {
    let left = body
        .split("data-testid=\"dialogue-1\"")
        .next()
        .unwrap_or_default();
    if left.contains(text) { "left" } else { "right" }
}

/// A Chinese page holds each of `sentences`.
fn assert_says(name: &str, html: &str, sentences: &[&str]) {
    for s in sentences {
        assert!(html.contains(s), "{name} does not say `{s}`: {html}");
    }
}

/// Answers the questions page (after trying it empty) and the practice comparison (after
/// trying it without a choice), choosing the practice's worse side when `fail`.
async fn through_practice(c: &crate::helpers::Client, english: &[String], fail: bool) {
    let page = c.page().await.body;
    assert_eq!(crate::helpers::page_kind(&page), "questions", "{page}");
    assert_chinese("the questions page", &page, english);
    let step = c.step().await;
    let empty = c.post("/p/answers", &format!("step={step}")).await;
    assert_eq!(empty.status, 422);
    assert_chinese("the questions page sent back", &empty.body, english);
    assert_says(
        "the questions page sent back",
        &empty.body,
        &["请回答这个问题。"],
    );
    let answered = c
        .post("/p/answers", &format!("step={step}&native=%E6%98%AF"))
        .await;
    assert_eq!(answered.status, 303, "{}", answered.body);

    let page = c.page().await.body;
    assert_eq!(crate::helpers::page_kind(&page), "onboarding", "{page}");
    assert_chinese("the practice page", &page, english);
    assert_says(
        "the practice page",
        &page,
        &["练习 1", "对话 A", "两段对话中哪一段更好？"],
    );
    let step = c.step().await;
    let none = c.post("/p/onboarding", &format!("step={step}")).await;
    assert_eq!(none.status, 422);
    assert_chinese("the practice page sent back", &none.body, english);
    assert_says(
        "the practice page sent back",
        &none.body,
        &["请在两段对话中选择一段。"],
    );
    let good = side_of(&page, "祝你今天愉快");
    let chosen = match (fail, good) {
        (false, side) => side,
        (true, "left") => "right",
        (true, _) => "left",
    };
    let res = c
        .post("/p/onboarding", &format!("step={step}&ob0={chosen}"))
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
}

#[tokio::test]
async fn a_chinese_comparison_speaks_chinese_on_every_page_and_in_its_problems() {
    use wozkit_core::load::{StudySource, load_text};
    let english = english_fragments();
    let study = load_text("zh-compare.yaml", COMPARE_ZH, StudySource::Dir(".".into()))
        .unwrap_or_else(|e| panic!("{e}"));
    let data = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(data.path().to_path_buf(), study).await;

    let c = app
        .join("study=zh-compare&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1")
        .await;
    through_practice(&c, &english, false).await;
    let page = c.page().await.body;
    assert_eq!(crate::helpers::page_kind(&page), "compare", "{page}");
    assert_chinese("the comparison page", &page, &english);
    assert_says(
        "the comparison page",
        &page,
        &["比较两段对话", "跳过这一项", "为什么？请简要说明你的选择。"],
    );
    let lease = crate::helpers::hidden(&page, "lease");
    let step = c.step().await;

    // A form sent from another site's page is refused in the study's language.
    let origin = [
        ("Cookie", c.cookie.as_str()),
        ("Origin", "https://elsewhere.example"),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let body = format!("step={step}&lease={lease}&choice=left");
    let foreign = crate::client::http(app.addr, "POST", "/p/judge", &origin, &body).await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert_chinese("the refusal of a foreign form", &foreign.body, &english);
    assert_says(
        "the refusal of a foreign form",
        &foreign.body,
        &["此表单必须从本网站的页面提交。"],
    );

    // No vote, a one-word reason, contradicting labels on one reply and none on the other.
    let wrong = c
        .post(
            "/p/judge",
            &format!(
                "step={step}&lease={lease}&justification=%E5%A5%BD\
                 &turn.0.1=%E7%BC%96%E9%80%A0&turn.0.1=%E9%83%BD%E4%B8%8D%E6%98%AF"
            ),
        )
        .await;
    assert_eq!(wrong.status, 422, "{}", wrong.body);
    assert_chinese("the comparison sent back", &wrong.body, &english);
    assert_says(
        "the comparison sent back",
        &wrong.body,
        &[
            "请在两段对话中选择一段。",
            "请给出至少 2 个词的理由。",
            "“都不是”不能与“编造”同时勾选：请取消其中一个。",
            "请为这条消息至少勾选一个选项（都不适用时勾选“都不是”）。",
        ],
    );
    let better = side_of(&page, "有什么可以帮你");
    let done = c
        .post(
            "/p/judge",
            &format!(
                "step={step}&lease={lease}&choice={better}&justification=%E6%9B%B4+%E7%A4%BC%E8%B2%8C\
                 &turn.0.1=%E6%9C%89%E5%B8%AE%E5%8A%A9&turn.1.1=%E9%83%BD%E4%B8%8D%E6%98%AF"
            ),
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let completion = c.page().await.body;
    assert_eq!(crate::helpers::page_kind(&completion), "completion");
    assert_chinese("the completion page", &completion, &english);

    // The next worker finds nothing left; one who fails the practice is screened out.
    let late = app
        .join("study=zh-compare&PROLIFIC_PID=w2&STUDY_ID=s&SESSION_ID=2")
        .await;
    through_practice(&late, &english, false).await;
    let none = late.page().await.body;
    assert_eq!(crate::helpers::page_kind(&none), "no-items", "{none}");
    assert_chinese("the no-items page", &none, &english);
    assert_says(
        "the no-items page",
        &none,
        &["没有需要评判的内容了", "感谢你抽出时间。"],
    );
    let out = app
        .join("study=zh-compare&PROLIFIC_PID=w3&STUDY_ID=s&SESSION_ID=3")
        .await;
    through_practice(&out, &english, true).await;
    let screened = out.page().await.body;
    assert_eq!(
        crate::helpers::page_kind(&screened),
        "screened",
        "{screened}"
    );
    assert_chinese("the screened-out page", &screened, &english);
    assert_says(
        "the screened-out page",
        &screened,
        &["很遗憾，练习题答错了。"],
    );

    // A second browser for a started worker is refused in the study's language.
    let again = crate::client::http(
        app.addr,
        "GET",
        "/join?study=zh-compare&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=9",
        &[],
        "",
    )
    .await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_chinese("the refusal of a second browser", &again.body, &english);
    app.stop().await;
}

/// A battle of two assistants in Chinese, with live feedback and labels under each reply.
fn arena_zh(mock: &crate::chat::mock_openai::MockOpenAi) -> String {
    let system = |name: &str| {
        format!(
            "  {name}:\n    kind: openai\n    base_url: {}\n    model: {name}\n    stream: false\n    \
             limits: {{timeout_s: 2, retries: 0, backoff_ms: 5, breaker: {{failures: 50, cooldown_s: 60}}}}\n",
            mock.base_url()
        )
    };
    format!(
        r#"id: zh-arena
title: 助手对战
language: zh-Hans
flow:
  user:
    - {{kind: arena}}
    - {{kind: completion}}
systems:
{a}{b}
evaluation:
  task: arena
  judgments_per_item: 1
  items_per_worker: 1
  systems: [zh-a, zh-b]
  conversation: {{min_turns: 2, max_turns: 3, reveal: true, feedback: true}}
  justification: {{required: false}}
  annotate: {{speaker: system, kind: scale, points: 3, required: true}}
  no_items: {{code: true}}
"#,
        a = system("zh-a"),
        b = system("zh-b"),
    )
}

/// Posts a form of the chat page with its step and lease, then `extra`.
async fn chat_post(
    c: &crate::helpers::Client,
    path: &str,
    extra: &str,
) -> crate::helpers::Response {
    let body = c.page().await.body;
    let step = crate::helpers::hidden(&body, "step");
    let lease = crate::helpers::hidden(&body, "lease");
    c.post(path, &format!("step={step}&lease={lease}{extra}"))
        .await
}

#[tokio::test]
async fn a_chinese_battle_speaks_chinese_from_the_chat_to_the_reveal() {
    use wozkit_core::load::{StudySource, load_text};
    let english = english_fragments();
    let mock = crate::chat::mock_openai::MockOpenAi::start().await;
    let study = load_text(
        "zh-arena.yaml",
        &arena_zh(&mock),
        StudySource::Dir(".".into()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let data = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(data.path().to_path_buf(), study).await;
    let c = app
        .join("study=zh-arena&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1")
        .await;
    let page = c.page().await.body;
    assert_eq!(crate::helpers::page_kind(&page), "arena", "{page}");
    assert_chinese("the arena page", &page, &english);
    assert_says(
        "the arena page",
        &page,
        &[
            "与两个助手对话",
            "助手 A",
            "输入你的消息…",
            "\"chat-js-you\":\"你\"",
        ],
    );
    let empty = chat_post(&c, "/p/chat/send", "&text=").await;
    assert_eq!(empty.status, 409, "{}", empty.body);
    assert_chinese("the arena refusing an empty message", &empty.body, &english);
    assert_says(
        "the arena refusing an empty message",
        &empty.body,
        &["请先输入消息。"],
    );
    let sent = chat_post(&c, "/p/chat/send", "&text=%E4%BD%A0%E5%A5%BD").await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    let page = c.page().await.body;
    assert_chinese("the arena with replies", &page, &english);
    assert_says(
        "the arena with replies",
        &page,
        &["这条回复怎么样？", "你对这条回复的感受", "满意"],
    );
    let early = chat_post(&c, "/p/chat/end", "").await;
    assert_eq!(early.status, 409, "{}", early.body);
    assert_chinese("the arena ended too early", &early.body, &english);
    assert_says(
        "the arena ended too early",
        &early.body,
        &["请至少发送 2 条消息后再结束对话。"],
    );
    let unlabelled = chat_post(&c, "/p/chat/send", "&text=%E5%86%8D%E8%A7%81").await;
    assert_eq!(unlabelled.status, 422, "{}", unlabelled.body);
    assert_chinese(
        "the arena with unlabelled replies",
        &unlabelled.body,
        &english,
    );
    assert_says(
        "the arena with unlabelled replies",
        &unlabelled.body,
        &[
            "请检查上一条回复的标注。",
            "请为这条消息在量表上选择一个分值。",
        ],
    );
    let second = chat_post(
        &c,
        "/p/chat/send",
        "&text=%E5%86%8D%E8%A7%81&ann.left=2&ann.right=3&fb.left=satisfied",
    )
    .await;
    assert_eq!(second.status, 303, "{}", second.body);
    let page = c.page().await.body;
    assert_chinese("the arena that may end", &page, &english);
    assert_says("the arena that may end", &page, &["结束并投票", "满意"]);
    let ended = chat_post(&c, "/p/chat/end", "&ann.left=1&ann.right=2").await;
    assert_eq!(ended.status, 303, "{}", ended.body);
    let page = c.page().await.body;
    assert_chinese("the arena's vote", &page, &english);
    assert_says(
        "the arena's vote",
        &page,
        &["对话已结束。", "哪个助手更好？", "平局：两个都好", "满意"],
    );
    let no_vote = chat_post(&c, "/p/chat/finish", "").await;
    assert_eq!(no_vote.status, 422, "{}", no_vote.body);
    assert_chinese("the arena's vote sent back", &no_vote.body, &english);
    assert_says(
        "the arena's vote sent back",
        &no_vote.body,
        &["请选择一个答案。"],
    );
    let lease = crate::helpers::hidden(&c.page().await.body, "lease");
    let step = c.step().await;
    let voted = c
        .post(
            "/p/chat/finish",
            &format!("step={step}&lease={lease}&vote=tie"),
        )
        .await;
    assert_eq!(voted.status, 303, "{}", voted.body);
    let reveal = crate::client::http(
        app.addr,
        "GET",
        &format!("/p/chat/reveal?lease={lease}"),
        &[("Cookie", c.cookie.as_str())],
        "",
    )
    .await;
    assert_eq!(reveal.status, 200, "{}", reveal.body);
    assert_chinese("the reveal page", &reveal.body, &english);
    assert_says(
        "the reveal page",
        &reveal.body,
        &[
            "感谢你的投票",
            "你的选择：<strong>平局</strong>。",
            "助手 A 是 <strong>zh-",
        ],
    );
    app.stop().await;
}

/// A Chinese self-dialog study: one scenario, two to four turns.
const SELF_DIALOG_ZH: &str = r#"id: zh-self-dialog
title: 写一段订餐对话
language: zh-Hans
flow:
  user:
    - {kind: consent}
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: self_dialog
  judgments_per_item: 1
  items_per_worker: 1
  self_dialog:
    min_turns: 2
    max_turns: 4
    max_chars: 40
    scenarios:
      - {id: dinner-1, instructions: "为今晚订一张**四人**餐桌。"}
"#;

/// A Chinese span study over the dialogues written in `zh-self-dialog`.
const SPANS_ZH: &str = r#"id: zh-spans
title: 标出订餐细节
language: zh-Hans
flow:
  user:
    - {kind: consent}
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: spans
  judgments_per_item: 1
  items_per_worker: 1
  spans:
    slots: [订餐.人数, 订餐.时间]
    min_spans: 1
  from_store: {study: zh-self-dialog, scenario: {annotation: taskmaster1.dialogue, field: instruction_id}}
"#;

#[tokio::test]
async fn chinese_self_dialog_and_span_pages_speak_chinese_in_their_problems_too() {
    use crate::helpers::{hidden, join_worker, page_kind, urlencoding};
    use wozkit_core::load::{StudySource, load_text};
    let english = english_fragments();
    let load = |name: &str, text: &str| {
        load_text(name, text, StudySource::Dir(".".into())).unwrap_or_else(|e| panic!("{e}"))
    };
    let data = tempfile::tempdir().expect("temp dir");

    // Writing both sides: the page, a turn refused, two turns written, too early a submit.
    let mut app = spawn_app_in(
        data.path().to_path_buf(),
        load("zh-self-dialog.yaml", SELF_DIALOG_ZH),
    )
    .await;
    let c = join_worker(&app, "zh-self-dialog", "writer").await;
    let page = c.page().await.body;
    assert_eq!(page_kind(&page), "self-dialog", "{page}");
    assert_chinese("the self-dialog page", &page, &english);
    assert_says(
        "the self-dialog page",
        &page,
        &[
            "写出对话双方的话",
            "第 1 项，最多 1 项 · 请在 10 分钟内提交",
            "第 1 轮：<strong data-testid=\"sd-next-speaker\" class=\"sd-user\">用户</strong>说",
            "添加这一轮",
            "已写 0 轮；需要 2 到 4 轮（还需写 2 轮才能提交）。",
            "提交对话",
            "跳过这一项",
            "在话语中选中词语即可标出它们。",
        ],
    );
    let lease = hidden(&page, "lease");
    let say = |index: usize, speaker: &str, text: &str| {
        format!(
            "lease={lease}&index={index}&speaker={speaker}&text={}",
            urlencoding(text)
        )
    };
    let wrong = c
        .post("/p/self-dialog/turn", &say(0, "ASSISTANT", "你好"))
        .await;
    assert_eq!(wrong.status, 422, "{}", wrong.body);
    assert_chinese(
        "a turn of the wrong speaker sent back",
        &wrong.body,
        &english,
    );
    assert_says(
        "a turn of the wrong speaker sent back",
        &wrong.body,
        &["第 1 轮：这一轮应由用户来说。"],
    );
    let empty = c.post("/p/self-dialog/turn", &say(0, "USER", "  ")).await;
    assert_eq!(empty.status, 422, "{}", empty.body);
    assert_says(
        "an empty turn sent back",
        &empty.body,
        &["第 1 轮：这一轮是空的，请写下要说的话。"],
    );
    let first = c
        .post(
            "/p/self-dialog/turn",
            &say(0, "USER", "你好，我想订今晚七点四个人的桌子"),
        )
        .await;
    assert_eq!(first.status, 303, "{}", first.body);
    let early = c
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(early.status, 422, "{}", early.body);
    assert_chinese("too short a conversation sent back", &early.body, &english);
    assert_says(
        "too short a conversation sent back",
        &early.body,
        &[
            "对话现在有 1 轮；请至少写 2 轮再提交。",
            "<span class=\"sd-who\">用户</span>",
            "修改上一轮（用户）",
            "aria-label=\"上一轮\"",
            "保存修改",
            "第 2 轮：<strong data-testid=\"sd-next-speaker\" class=\"sd-assistant\">助手</strong>说",
        ],
    );
    // The form's speaker is still the Taskmaster-1 value.
    assert!(
        early
            .body
            .contains("<input type=\"hidden\" name=\"speaker\" value=\"ASSISTANT\">"),
        "{}",
        early.body
    );
    let second = c
        .post(
            "/p/self-dialog/turn",
            &say(1, "ASSISTANT", "好的，已为您订好"),
        )
        .await;
    assert_eq!(second.status, 303, "{}", second.body);
    let page = c.page().await.body;
    assert_chinese("the self-dialog page with two turns", &page, &english);
    assert_says(
        "the self-dialog page with two turns",
        &page,
        &["已写 2 轮；需要 2 到 4 轮。", "修改上一轮（助手）"],
    );
    let done = c
        .post("/p/self-dialog/submit", &format!("lease={lease}"))
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(page_kind(&c.page().await.body), "completion");
    app.stop().await;

    // Marking spans of that conversation: the page, three marks refused, one marked, too
    // early a submit before it.
    let mut app = spawn_app_in(data.path().to_path_buf(), load("zh-spans.yaml", SPANS_ZH)).await;
    let a = join_worker(&app, "zh-spans", "annotator").await;
    let page = a.page().await.body;
    assert_eq!(page_kind(&page), "spans", "{page}");
    assert_chinese("the span page", &page, &english);
    assert_says(
        "the span page",
        &page,
        &[
            "标出对话中的细节",
            "0. 用户",
            "1. 助手",
            "（16 个字符）",
            "还没有标出任何片段。",
            "<label>词语 ",
            "<label>槽位 ",
            "标出</button>",
            "提交标注",
            "在话语中选中词语即可标出它们。",
        ],
    );
    let lease = hidden(&page, "lease");
    let early = a.post("/p/spans/submit", &format!("lease={lease}")).await;
    assert_eq!(early.status, 422, "{}", early.body);
    assert_chinese("too few spans sent back", &early.body, &english);
    assert_says(
        "too few spans sent back",
        &early.body,
        &["目前标出了 0 个片段；请至少标出 1 个再提交。"],
    );
    let mark = |form: &str| format!("lease={lease}&{form}");
    for (form, problem) in [
        (
            format!(
                "turn=0&text={}&slot={}",
                urlencoding("八个人"),
                urlencoding("订餐.人数")
            ),
            "片段未能标出：话语 0 中没有“八个人”。",
        ),
        (
            format!(
                "turn=0&text={}&slot={}",
                urlencoding("四个人"),
                urlencoding("订餐.菜系")
            ),
            "片段未能标出：`订餐.菜系` 不是这项研究的槽位名。",
        ),
        (
            format!("turn=0&start=x&end=3&slot={}", urlencoding("订餐.人数")),
            "片段未能标出：起始位置必须是从 0 开始的整数，而不是“x”。",
        ),
        (
            format!("turn=0&start=10&end=20&slot={}", urlencoding("订餐.人数")),
            "片段未能标出：片段结束于 20，超出了这句话语的末尾（共 16 个字符）。",
        ),
    ] {
        let res = a.post("/p/spans/mark", &mark(&form)).await;
        assert_eq!(res.status, 422, "{form}: {}", res.body);
        assert_chinese(&format!("the span {form} sent back"), &res.body, &english);
        assert_says(&format!("the span {form} sent back"), &res.body, &[problem]);
    }
    let marked = a
        .post(
            "/p/spans/mark",
            &mark(&format!(
                "turn=0&text={}&slot={}",
                urlencoding("四个人"),
                urlencoding("订餐.人数")
            )),
        )
        .await;
    assert_eq!(marked.status, 303, "{}", marked.body);
    let page = a.page().await.body;
    assert_chinese("the span page with a span", &page, &english);
    assert_says(
        "the span page with a span",
        &page,
        &[
            "<th>话语</th><th>字符位置</th><th>文本</th><th>槽位</th>",
            "<td>10–13</td><td>“四个人”</td><td>订餐.人数</td>",
            "删除</button>",
        ],
    );
    let gone = a
        .post("/p/spans/remove", &format!("lease={lease}&n=5"))
        .await;
    assert_eq!(gone.status, 422, "{}", gone.body);
    assert_chinese("a removal sent back", &gone.body, &english);
    assert_says(
        "a removal sent back",
        &gone.body,
        &["没有这个要删除的片段：目前标出了 1 个。"],
    );
    let done = a.post("/p/spans/submit", &format!("lease={lease}")).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let completion = a.page().await.body;
    assert_eq!(page_kind(&completion), "completion");
    assert_chinese("the completion page", &completion, &english);
    app.stop().await;
}

/// Where no study is known (a page opened without a participation, a link to no study), the
/// error page speaks the language the browser asks for first, when a catalogue has it.
#[tokio::test]
async fn an_error_page_of_no_known_study_speaks_the_browsers_language() {
    let data = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(data.path().to_path_buf(), crosswoz_with_survey()).await;
    let zh = words(Language::ZhHans);
    let ask = |path: &'static str, accept: &'static str| {
        let addr = app.addr;
        async move { crate::client::http(addr, "GET", path, &[("Accept-Language", accept)], "").await }
    };
    let no_seat = ask("/p", "zh-CN,zh;q=0.9,en;q=0.8").await;
    assert_eq!(no_seat.status, 401, "{}", no_seat.body);
    assert!(
        no_seat.body.contains("<html lang=\"zh-Hans\">"),
        "{}",
        no_seat.body
    );
    for key in ["error-title-unauthorized", "error-no-participation"] {
        assert!(
            no_seat.body.contains(&zh.get(key)),
            "{key}: {}",
            no_seat.body
        );
    }
    let nowhere = ask("/leaderboard/no-such-study", "zh-TW,en;q=0.5").await;
    assert_eq!(nowhere.status, 404, "{}", nowhere.body);
    assert!(
        nowhere.body.contains(&zh.get("error-not-found")),
        "{}",
        nowhere.body
    );
    let english = ask("/p", "fr-FR,en;q=0.5,zh;q=0.1").await;
    assert_eq!(english.status, 401);
    assert!(
        english.body.contains("<html lang=\"en\">"),
        "{}",
        english.body
    );
    let en = words(Language::En).get("error-no-participation");
    assert!(english.body.contains(&en), "{}", english.body);
    app.stop().await;
}
