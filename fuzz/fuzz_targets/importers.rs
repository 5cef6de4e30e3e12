//! Every importer gets arbitrary bytes: an error naming the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wozkit_data::{Format, Input, formats, import_jsonl, import_votes_csv};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let input = Input::new("fuzz.json", bytes.to_vec());
    let formats = Format::ALL;
    match selector as usize % (formats.len() + 2) {
        i if i < formats.len() => {
            let _ = formats::import(formats[i], &input);
        }
        i if i == formats.len() => {
            let _ = import_jsonl(&input);
        }
        _ => {
            let _ = import_votes_csv(&input);
        }
    }
});
