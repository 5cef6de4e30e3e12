//! Bad input gives an error that names the file, the record and the field, never a panic.

use crate::common;

use wozkit_data::{Format, ImportError, Input, formats};

fn field_error(format: Format, text: &str) -> (String, String, String) {
    match formats::import(format, &Input::new("bad.json", text)) {
        Err(ImportError::Field {
            file,
            record,
            field,
            ..
        }) => (file, record, field),
        other => panic!("{format:?}: expected a field error, got {other:?}"),
    }
}

#[test]
fn shape_errors_name_file_record_and_field() {
    let (file, record, field) = field_error(
        Format::CrossWoz,
        r#"{"7": {"sys-usr": [1, 2], "goal": [], "messages": [{"content": "hi", "role": "bot"}]}}"#,
    );
    assert_eq!(
        (file.as_str(), record.as_str(), field.as_str()),
        ("bad.json", "7", "messages[0].role")
    );

    let (_, record, field) = field_error(
        Format::Taskmaster1,
        r#"[{"conversation_id": "dlg-1", "utterances": [{"index": 0, "speaker": "USER", "text": 5}]}]"#,
    );
    assert_eq!(
        (record.as_str(), field.as_str()),
        ("dlg-1", "utterances[0].text")
    );

    let (_, record, field) = field_error(Format::ConvLab3, r#"[{"dialogue_id": "x-1"}]"#);
    assert_eq!((record.as_str(), field.as_str()), ("x-1", "turns"));

    let (_, record, field) = field_error(Format::CrsArena, r#"[{"agent": {}}]"#);
    assert_eq!(
        (record.as_str(), field.as_str()),
        ("0", "conversation ID | conversation_id")
    );

    let (_, record, field) = field_error(
        Format::Crwiz,
        r#"{"dialogue_id": "d", "dialogue": [{"current_state": "okay", "prompt": "ok", "user": 3}]}"#,
    );
    assert_eq!((record.as_str(), field.as_str()), ("d", "dialogue[0].user"));
}

#[test]
fn broken_files_are_errors_not_panics() {
    let sample = common::Corpus::fixtures().read("taskmaster1/sample.json");
    let bytes = sample.bytes();
    for format in Format::ALL {
        for cut in (0..bytes.len()).step_by(97) {
            let prefix = bytes.get(..cut).unwrap_or_default();
            assert!(formats::import(format, &Input::new("cut.json", prefix)).is_err());
        }
        for text in [
            "null",
            "[]",
            "{}",
            "[1]",
            "{\"a\": 1}",
            "[{\"conversation ID\": 1}]",
            "PK\u{3}\u{4}",
        ] {
            let _ = formats::import(format, &Input::new("odd.json", text));
        }
    }
}

#[test]
fn csv_and_jsonl_errors_name_the_line() {
    let err =
        wozkit_data::import_votes_csv(&Input::new("v.csv", "a,b\n1,2\n")).expect_err("bad header");
    assert!(err.to_string().contains("v.csv"), "{err}");
    let err = wozkit_data::import_jsonl(&Input::new("log.jsonl", "\n{\"v\": 1}\n"))
        .expect_err("bad event");
    assert!(matches!(err, ImportError::Line { line: 2, .. }), "{err}");
}
