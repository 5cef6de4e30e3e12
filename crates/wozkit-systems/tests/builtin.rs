//! The scripted built-in system: rules, fallbacks in turn, no per-dialogue state, think time and
//! word-by-word streaming (on tokio's paused clock, so the waits cost nothing and are exact).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use wozkit_systems::{BuiltinSpec, BuiltinSystem, Client, System, SystemError, SystemSpec, Turn};

fn spec(extra: Value) -> BuiltinSpec {
    let mut all = json!({
        "replies": [
            {"when": ["hello", "hi there"], "say": "Hello! How can I help?"},
            {"when": ["weather"], "say": "You asked: {message}"},
        ],
        "fallback": ["Sorry?", "Could you rephrase?", "I did not get that."],
    });
    all.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    serde_json::from_value(all).expect("valid builtin spec")
}

fn users(texts: &[&str]) -> Vec<Turn> {
    let mut history = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        history.push(Turn::user(*text));
        if i + 1 < texts.len() {
            history.push(Turn::assistant(format!("answer {i}")));
        }
    }
    history
}

async fn collect(mut rx: mpsc::Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(d) = rx.recv().await {
        out.push(d);
    }
    out
}

#[tokio::test]
async fn rules_match_case_insensitively_and_fill_in_the_message() {
    let bot = BuiltinSystem::new(&spec(json!({})));
    let reply = bot.reply("d1", &users(&["HELLO you"])).await.unwrap();
    assert_eq!(reply.text, "Hello! How can I help?");
    let reply = bot
        .reply("d1", &users(&["  Weather in Oslo?  "]))
        .await
        .unwrap();
    assert_eq!(reply.text, "You asked: Weather in Oslo?");
}

#[tokio::test]
async fn keywords_match_whole_words_only() {
    let bot = BuiltinSystem::new(&spec(json!({
        "replies": [
            {"when": ["hi", "hello"], "say": "greeting"},
            {"when": ["hike", "hiking"], "say": "mountains"},
            {"when": ["thank you"], "say": "welcome"},
            {"when": ["景点"], "say": "sights"},
        ],
    })));
    let answer = |text: &str| bot.answer(&users(&[text]));
    assert_eq!(
        answer("I love hiking"),
        "mountains",
        "not the greeting of `hi`"
    );
    assert_eq!(answer("Hi!"), "greeting");
    assert_eq!(answer("oh, hi, there"), "greeting");
    assert_eq!(answer("Thank you."), "welcome");
    assert_eq!(
        answer("this is ethical"),
        "Sorry?",
        "`hi` inside words is no match"
    );
    assert_eq!(answer("thank youth"), "Sorry?");
    assert_eq!(answer("hikers welcome"), "Sorry?");
    // Chinese is written without spaces: the keyword counts inside a sentence.
    assert_eq!(answer("推荐一个景点吧"), "sights");
}

#[tokio::test]
async fn fallbacks_go_in_turn_counting_only_unmatched_user_messages() {
    let bot = BuiltinSystem::new(&spec(json!({})));
    let fallback = ["Sorry?", "Could you rephrase?", "I did not get that."];
    // Unmatched, matched, unmatched, unmatched, unmatched: the fallbacks cycle past the match.
    let texts = ["blah", "hello", "what", "huh", "eh"];
    let mut expected_unmatched = 0;
    for n in 1..=texts.len() {
        let reply = bot.reply("d1", &users(&texts[..n])).await.unwrap();
        if texts[n - 1] == "hello" {
            assert_eq!(reply.text, "Hello! How can I help?");
        } else {
            assert_eq!(
                reply.text,
                fallback[expected_unmatched % fallback.len()],
                "turn {n}"
            );
            expected_unmatched += 1;
        }
    }
    // Assistant turns do not count, only the participant's.
    let history = vec![
        Turn::assistant("Welcome"),
        Turn::assistant("Anything?"),
        Turn::user("blah"),
    ];
    assert_eq!(bot.reply("d2", &history).await.unwrap().text, "Sorry?");
}

#[tokio::test]
async fn the_reply_depends_on_the_history_only() {
    let bot = BuiltinSystem::new(&spec(json!({})));
    let long = users(&["a", "b", "c"]);
    let first = bot.reply("d1", &long).await.unwrap();
    // Another dialogue in between changes nothing; asking again gives the same reply.
    bot.reply("d2", &users(&["x", "y"])).await.unwrap();
    assert_eq!(bot.reply("d1", &long).await.unwrap(), first);
    assert_eq!(bot.reply("other", &long).await.unwrap(), first);
    // An empty history gets the first fallback.
    assert_eq!(bot.reply("d3", &[]).await.unwrap().text, "Sorry?");
}

#[tokio::test(start_paused = true)]
async fn the_reply_waits_for_the_think_time() {
    let bot = BuiltinSystem::new(&spec(json!({"delay_ms": 1500})));
    let start = Instant::now();
    let reply = bot.reply("d1", &users(&["hello"])).await.unwrap();
    assert_eq!(reply.text, "Hello! How can I help?");
    assert!(
        start.elapsed() >= Duration::from_millis(1500),
        "answered after {:?}",
        start.elapsed()
    );
    // Not answered before the delay is over.
    let early = tokio::time::timeout(
        Duration::from_millis(1400),
        bot.reply("d1", &users(&["hello"])),
    )
    .await;
    assert!(early.is_err(), "answered before the think time");
}

#[tokio::test(start_paused = true)]
async fn streaming_sends_word_by_word_at_the_typing_speed() {
    let bot = BuiltinSystem::new(&spec(json!({"delay_ms": 200, "words_per_s": 4})));
    let (tx, rx) = mpsc::channel(64);
    let start = Instant::now();
    let reply = bot
        .reply_stream("d1", &users(&["hello"]), tx)
        .await
        .unwrap();
    let took = start.elapsed();
    let deltas = collect(rx).await;
    assert_eq!(reply.text, "Hello! How can I help?");
    assert_eq!(deltas.concat(), reply.text);
    assert_eq!(
        deltas.len(),
        reply.text.split_whitespace().count(),
        "{deltas:?}"
    );
    // The think time, then a quarter second between consecutive words.
    let least = Duration::from_millis(200) + Duration::from_millis(250) * (deltas.len() as u32 - 1);
    assert!(
        took >= least,
        "streamed in {took:?}, expected at least {least:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn zero_words_per_second_sends_the_reply_whole() {
    let bot = BuiltinSystem::new(&spec(json!({"words_per_s": 0})));
    let (tx, rx) = mpsc::channel(64);
    let reply = bot
        .reply_stream("d1", &users(&["hello"]), tx)
        .await
        .unwrap();
    assert_eq!(collect(rx).await, vec![reply.text]);
}

#[tokio::test(start_paused = true)]
async fn the_client_builds_a_builtin_system() {
    let spec: SystemSpec = serde_json::from_value(json!({
        "kind": "builtin", "fallback": ["Go on."], "delay_ms": 100, "words_per_s": 10,
        "replies": [{"when": ["bye"], "say": "Goodbye then."}],
    }))
    .unwrap();
    let client = Client::new("scripted", &spec).unwrap();
    assert_eq!(
        client.reply("d1", &users(&["ok bye"])).await.unwrap().text,
        "Goodbye then."
    );
    let (tx, rx) = mpsc::channel(64);
    let reply = client
        .reply_stream("d1", &users(&["hm"]), tx)
        .await
        .unwrap();
    assert_eq!(reply.text, "Go on.");
    assert_eq!(collect(rx).await, ["Go ", "on."]);
}

#[test]
fn a_think_time_longer_than_the_timeout_is_refused() {
    let spec: SystemSpec = serde_json::from_value(json!({
        "kind": "builtin", "fallback": ["x"], "delay_ms": 5000, "limits": {"timeout_s": 2},
    }))
    .unwrap();
    match Client::new("slow", &spec) {
        Err(SystemError::Config { system, detail }) => {
            assert_eq!(system, "slow");
            assert!(
                detail.contains("delay_ms") && detail.contains("timeout_s"),
                "{detail}"
            );
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_bot_behind_an_arc_serves_many_dialogues_at_once() {
    let bot: Arc<dyn System> = Arc::new(BuiltinSystem::new(&spec(json!({}))));
    let calls = (0..20).map(|i| {
        let bot = bot.clone();
        tokio::spawn(async move {
            let texts: Vec<String> = (0..=i % 4).map(|j| format!("nothing {j}")).collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            (
                i,
                bot.reply(&format!("d{i}"), &users(&texts))
                    .await
                    .unwrap()
                    .text,
            )
        })
    });
    let fallback = ["Sorry?", "Could you rephrase?", "I did not get that."];
    for call in calls {
        let (i, text) = call.await.unwrap();
        assert_eq!(text, fallback[(i % 4) % 3], "dialogue {i}");
    }
}
