//! Parsing and validating system specs.

use serde_json::json;
use wozkit_systems::{Limits, SystemSpec};

#[test]
fn defaults_are_filled_and_bounded() {
    let spec: SystemSpec =
        serde_json::from_value(json!({"kind": "http", "url": "http://localhost:1/x"})).unwrap();
    assert_eq!(spec.limits(), &Limits::default());
    spec.validate().unwrap();
    let l = Limits::default();
    assert!(l.timeout_s > 0.0 && l.retries > 0 && l.concurrency > 0 && l.queue > 0);
}

#[test]
fn unknown_fields_are_rejected_at_every_level() {
    let cases = [
        json!({"kind": "http", "url": "http://x", "urll": 1}),
        json!({"kind": "openai", "base_url": "http://x", "model": "m", "api_key": "sk-1"}),
        json!({"kind": "http", "url": "http://x", "limits": {"timeout": 3}}),
        json!({"kind": "http", "url": "http://x", "limits": {"breaker": {"failure": 3}}}),
        json!({"kind": "websocket", "url": "ws://x", "protocol": 2}),
        json!({"kind": "builtin", "fallback": ["x"], "delay": 3}),
        json!({"kind": "telnet", "url": "ws://x"}),
    ];
    for case in cases {
        let parsed = serde_json::from_value::<SystemSpec>(case.clone());
        assert!(parsed.is_err(), "accepted {case}");
    }
}

#[test]
fn validation_names_the_bad_field() {
    let cases = [
        (json!({"kind": "http", "url": "ftp://x"}), "url"),
        (
            json!({"kind": "openai", "base_url": "http://x", "model": " "}),
            "model",
        ),
        (
            json!({"kind": "openai", "base_url": "http://x", "model": "m", "params": {"model": "n"}}),
            "params.model",
        ),
        (
            json!({"kind": "http", "url": "http://x", "limits": {"timeout_s": 0}}),
            "timeout_s",
        ),
        (
            json!({"kind": "http", "url": "http://x", "limits": {"concurrency": 0}}),
            "concurrency",
        ),
        (
            json!({"kind": "http", "url": "http://x", "limits": {"retries": 99}}),
            "retries",
        ),
        (
            json!({"kind": "http", "url": "http://x", "limits": {"breaker": {"failures": 0}}}),
            "breaker.failures",
        ),
    ];
    for (case, field) in cases {
        let spec: SystemSpec = serde_json::from_value(case.clone()).unwrap();
        let err = spec.validate().unwrap_err();
        assert!(
            err.contains(field),
            "{case}: `{err}` does not name `{field}`"
        );
    }
}

#[test]
fn the_schema_lists_both_kinds() {
    let schema = serde_json::to_string(&schemars::schema_for!(SystemSpec)).unwrap();
    for word in ["openai", "http", "api_key_env", "cooldown_s"] {
        assert!(schema.contains(word), "schema lacks {word}");
    }
}
