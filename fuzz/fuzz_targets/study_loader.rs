//! Any text given to the study loader yields a study or diagnostics, never a panic; a study that
//! loads can be started and its offered options computed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wozkit_core::load::{StudySource, load_text};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(study) = load_text("fuzz.yaml", text, StudySource::Dir(std::env::temp_dir())) {
        let s = wozkit_core::engine::Session::new(&study, "f");
        let _ = wozkit_core::engine::offered(&study, &s);
    } else if let Err(d) = load_text("fuzz.yaml", text, StudySource::Dir(std::env::temp_dir())) {
        assert!(!d.0.is_empty(), "an error with no diagnostic");
    }
});
