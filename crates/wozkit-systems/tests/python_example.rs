//! The Python example system (`examples/python_bot/bot.py`) run for real and reached through
//! [`Client`]: the webhook and the OpenAI-compatible endpoint (whole and streamed) answer, the
//! answers depend on the earlier turns, and its on-purpose failures are retried within the limits.
//!
//! Needs `python3` on `PATH`; without it these tests fail (they do not skip).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use wozkit_systems::{Client, Reply, SystemError, SystemSpec, Turn};

/// The example script, from this crate's directory.
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/python_bot/bot.py"
);

/// A running `bot.py`, killed when dropped.
struct Bot {
    child: Child,
    /// `http://127.0.0.1:PORT`, as the script printed it.
    base: String,
    /// What the script wrote on standard error (its request log), for failure messages.
    log: Arc<Mutex<String>>,
}

impl Bot {
    /// Starts the script on a free port with `args` added and waits for its `listening on` line.
    fn start(args: &[&str]) -> Bot {
        let mut child = match Command::new("python3")
            .arg(SCRIPT)
            .args(["--port", "0", "--host", "127.0.0.1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "python3 is not on PATH: the test of the Python example system \
                 ({SCRIPT}) needs it; install Python 3 (e.g. `apt-get install python3`)"
            ),
            Err(e) => panic!("cannot start `python3 {SCRIPT}`: {e}"),
        };
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        let read = stdout.read_line(&mut line);
        let mut bot = Bot {
            child,
            base: String::new(),
            log,
        };
        match read {
            Ok(n) if n > 0 => {}
            other => {
                let status = bot.child.wait();
                panic!(
                    "`python3 {SCRIPT}` printed no `listening on` line ({other:?}, exit {status:?}); \
                     its standard error:\n{}",
                    bot.log()
                );
            }
        }
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line of bot.py is {line:?}, not `listening on URL`"));
        let port: u16 = base
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port at the end of {base:?}"));
        assert_ne!(port, 0, "bot.py must print the port it picked, not 0");
        bot.base = base.to_string();
        bot
    }

    /// The script's request log so far.
    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// A webhook client for this bot with `retries`.
    fn webhook(&self, retries: u32) -> Client {
        client(json!({
            "kind": "http", "url": format!("{}/reply", self.base),
            "limits": {"timeout_s": 20, "retries": retries, "backoff_ms": 10},
        }))
    }

    /// An OpenAI-compatible client for this bot with `retries`, streamed or not.
    fn openai(&self, stream: bool, retries: u32) -> Client {
        client(json!({
            "kind": "openai", "base_url": format!("{}/v1", self.base), "model": "travel-agent",
            "system_prompt": "You are a travel agent.", "params": {"temperature": 0.2},
            "stream": stream,
            "limits": {"timeout_s": 20, "retries": retries, "backoff_ms": 10},
        }))
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client built from a spec written as a study file would declare it.
fn client(spec: Value) -> Client {
    let spec: SystemSpec = serde_json::from_value(spec).expect("valid system spec");
    Client::new("python-bot", &spec).expect("client for the example bot")
}

/// Asks `client` for a streamed reply; returns the reply and the deltas seen.
async fn streamed(client: &Client, history: &[Turn]) -> (Result<Reply, SystemError>, Vec<String>) {
    let (tx, mut rx) = mpsc::channel(8);
    let collect = async {
        let mut deltas = Vec::new();
        while let Some(d) = rx.recv().await {
            deltas.push(d);
        }
        deltas
    };
    let call = async move { client.reply_stream("d-stream", history, tx).await };
    tokio::join!(call, collect)
}

const HOTEL: &str = "Can you find me a hotel?";

/// A real exchange: the participant names a city, the system answers, then asks about hotels
/// without repeating the city.
async fn city_then_hotel(client: &Client, bot: &Bot) -> Vec<Turn> {
    let first = vec![Turn::user("Hi! I'd like to go to Lisbon.")];
    let answer = client
        .reply("d-city", &first)
        .await
        .unwrap_or_else(|e| panic!("first turn failed: {e}\nbot log:\n{}", bot.log()));
    assert!(!answer.text.trim().is_empty(), "empty first reply");
    vec![
        first[0].clone(),
        Turn::assistant(answer.text),
        Turn::user(HOTEL),
    ]
}

#[tokio::test]
async fn the_webhook_answers_from_the_whole_dialogue() {
    let bot = Bot::start(&[]);
    let client = bot.webhook(0);

    let history = city_then_hotel(&client, &bot).await;
    let with_city = client.reply("d-1", &history).await.unwrap();
    assert!(
        with_city.text.contains("Lisbon"),
        "the hotel answer should use the city named two turns earlier: {:?}",
        with_city.text
    );

    let alone = client.reply("d-2", &[Turn::user(HOTEL)]).await.unwrap();
    assert!(!alone.text.trim().is_empty());
    assert!(
        !alone.text.contains("Lisbon"),
        "without the earlier turn the city cannot be known: {:?}",
        alone.text
    );
    assert_ne!(with_city.text, alone.text, "the history changed nothing");
}

#[tokio::test]
async fn the_openai_endpoint_answers_whole_and_streamed() {
    let bot = Bot::start(&[]);
    let whole_client = bot.openai(false, 0);
    let history = city_then_hotel(&whole_client, &bot).await;

    let whole = whole_client.reply("d-1", &history).await.unwrap();
    assert!(
        whole.text.contains("Lisbon"),
        "the hotel answer should use the earlier city: {:?}",
        whole.text
    );

    let stream_client = bot.openai(true, 0);
    let (reply, deltas) = streamed(&stream_client, &history).await;
    let reply = reply.unwrap_or_else(|e| panic!("streamed reply failed: {e}\n{}", bot.log()));
    assert!(
        deltas.len() > 1,
        "a streamed reply should come in several deltas, got {deltas:?}"
    );
    assert_eq!(
        deltas.concat(),
        reply.text,
        "deltas must add up to the reply"
    );
    assert_eq!(
        reply.text, whole.text,
        "the bot is deterministic: streamed and whole replies to the same dialogue agree"
    );

    // A client declared without `stream` gets the whole reply as one delta.
    let (reply, deltas) = streamed(&whole_client, &history).await;
    assert_eq!(deltas, vec![reply.unwrap().text]);
}

/// With `--fail-every 2` every second request gets a 500: without retries the second call fails
/// with that status, and the calls around it succeed.
#[tokio::test]
async fn without_retries_every_second_call_fails_with_5xx() {
    for kind in ["http", "openai"] {
        let bot = Bot::start(&["--fail-every", "2"]);
        let client = match kind {
            "http" => bot.webhook(0),
            _ => bot.openai(false, 0),
        };
        let history = [Turn::user("Hello")];
        client
            .reply("d-1", &history)
            .await
            .unwrap_or_else(|e| panic!("{kind}: first request should pass: {e}"));
        match client.reply("d-2", &history).await {
            Err(e @ SystemError::Status { status, .. }) => {
                assert!(
                    (500..600).contains(&status),
                    "{kind}: expected a 5xx, got {e}"
                );
                assert!(
                    e.to_string().contains("python-bot"),
                    "the error names the system: {e}"
                );
            }
            other => panic!("{kind}: the second request should fail with 5xx, got {other:?}"),
        }
        client
            .reply("d-3", &history)
            .await
            .unwrap_or_else(|e| panic!("{kind}: third request should pass: {e}"));
    }
}

/// The same failing bot behind one retry: every call succeeds, whole or streamed.
#[tokio::test]
async fn one_retry_hides_every_second_failure() {
    for kind in ["http", "openai", "openai-stream"] {
        let bot = Bot::start(&["--fail-every", "2"]);
        let client = match kind {
            "http" => bot.webhook(1),
            "openai" => bot.openai(false, 1),
            _ => bot.openai(true, 1),
        };
        let history = [Turn::user("I'd like to see Rome in May.")];
        for call in 0..4 {
            let reply = if kind == "openai-stream" {
                let (reply, deltas) = streamed(&client, &history).await;
                let reply = reply.unwrap_or_else(|e| {
                    panic!(
                        "{kind}: call {call} failed despite a retry: {e}\n{}",
                        bot.log()
                    )
                });
                assert_eq!(deltas.concat(), reply.text, "{kind}: call {call}");
                reply
            } else {
                client.reply("d-1", &history).await.unwrap_or_else(|e| {
                    panic!(
                        "{kind}: call {call} failed despite a retry: {e}\n{}",
                        bot.log()
                    )
                })
            };
            assert!(
                reply.text.contains("Rome"),
                "{kind}: call {call}: {:?}",
                reply.text
            );
        }
    }
}
