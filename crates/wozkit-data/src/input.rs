//! Reading dataset files: the bytes of one file with its name (for error messages), unzipping
//! single-file archives, the lenient JSON the CRSArena merge tool writes, and typed access to JSON
//! fields that turns every shape mismatch into an [`ImportError`] instead of a panic.

use std::io::{Cursor, Read};
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::ImportError;

/// One input file: its name, used in errors, and its content.
#[derive(Clone, Debug)]
pub struct Input {
    name: String,
    bytes: Vec<u8>,
}

impl Input {
    /// Wraps bytes already in memory; `name` is what errors call the file.
    pub fn new(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Input {
            name: name.into(),
            bytes: bytes.into(),
        }
    }

    /// Reads a file from disk.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ImportError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        match std::fs::read(path) {
            Ok(bytes) => Ok(Input { name, bytes }),
            Err(source) => Err(ImportError::Io { file: name, source }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The content, unzipped when the file is a zip archive holding exactly one `.json` file.
    pub fn unzipped(&self) -> Result<Vec<u8>, ImportError> {
        if !self.bytes.starts_with(b"PK\x03\x04") {
            return Ok(self.bytes.clone());
        }
        let zip_err = |problem: String| ImportError::Zip {
            file: self.name.clone(),
            problem,
        };
        let mut archive =
            zip::ZipArchive::new(Cursor::new(&self.bytes)).map_err(|e| zip_err(e.to_string()))?;
        let json_entries: Vec<String> = archive
            .file_names()
            .filter_map(Result::ok)
            .filter(|n| n.ends_with(".json"))
            .map(|n| n.into_owned())
            .collect();
        let [entry] = json_entries.as_slice() else {
            return Err(zip_err(format!(
                "expected exactly one .json entry, found {}",
                json_entries.len()
            )));
        };
        let mut file = archive
            .by_name(entry)
            .map_err(|e| zip_err(format!("{entry}: {e}")))?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)
            .map_err(|e| zip_err(format!("{entry}: {e}")))?;
        Ok(out)
    }

    /// Parses the (unzipped) content as strict JSON.
    pub fn json(&self) -> Result<Value, ImportError> {
        self.parse(&self.unzipped()?)
    }

    /// Parses the content as JSON, reading the bare `NaN`, `Infinity` and `-Infinity` tokens that
    /// Python's `json.dump` writes as `null` (the only JSON value that can stand for them).
    pub fn json_lenient(&self) -> Result<Value, ImportError> {
        self.parse(&non_finite_to_null(&self.unzipped()?))
    }

    fn parse(&self, bytes: &[u8]) -> Result<Value, ImportError> {
        serde_json::from_slice(bytes).map_err(|source| ImportError::Json {
            file: self.name.clone(),
            source,
        })
    }
}

/// Replaces the non-finite number tokens outside strings with `null`.
fn non_finite_to_null(bytes: &[u8]) -> Vec<u8> {
    const TOKENS: [&[u8]; 3] = [b"NaN", b"-Infinity", b"Infinity"];
    let mut out = Vec::with_capacity(bytes.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(token) = TOKENS
            .iter()
            .find(|t| bytes.get(i..).is_some_and(|rest| rest.starts_with(t)))
        {
            out.extend_from_slice(b"null");
            i += token.len();
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// Where in a file a record is being read; builds errors that say so.
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
    pub record: String,
}

impl<'a> Ctx<'a> {
    pub fn new(file: &'a str, record: impl Into<String>) -> Self {
        Ctx {
            file,
            record: record.into(),
        }
    }

    pub fn err(&self, field: impl Into<String>, problem: impl Into<String>) -> ImportError {
        ImportError::Field {
            file: self.file.to_string(),
            record: self.record.clone(),
            field: field.into(),
            problem: problem.into(),
        }
    }

    pub fn object<'v>(
        &self,
        value: &'v Value,
        field: &str,
    ) -> Result<&'v Map<String, Value>, ImportError> {
        value
            .as_object()
            .ok_or_else(|| self.err(field, expected("an object", value)))
    }

    pub fn array<'v>(&self, value: &'v Value, field: &str) -> Result<&'v [Value], ImportError> {
        value
            .as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| self.err(field, expected("an array", value)))
    }

    pub fn string<'v>(&self, value: &'v Value, field: &str) -> Result<&'v str, ImportError> {
        value
            .as_str()
            .ok_or_else(|| self.err(field, expected("a string", value)))
    }

    /// The value of a key that must be present.
    pub fn get<'v>(
        &self,
        obj: &'v Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<&'v Value, ImportError> {
        obj.get(key)
            .ok_or_else(|| self.err(field, "missing (required by the format)"))
    }
}

/// "expected a string, found a number".
pub(crate) fn expected(what: &str, found: &Value) -> String {
    let kind = match found {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!("expected {what}, found {kind}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_tokens_become_null_outside_strings_only() {
        let text = br#"{"a": NaN, "b": "NaN \" Infinity", "c": [-Infinity, Infinity]}"#;
        let value: Value = serde_json::from_slice(&non_finite_to_null(text)).expect("valid");
        assert_eq!(
            value,
            serde_json::json!({"a": null, "b": "NaN \" Infinity", "c": [null, null]})
        );
    }

    #[test]
    fn a_zip_without_json_is_an_error() {
        let input = Input::new("x.zip", b"PK\x03\x04garbage".to_vec());
        assert!(matches!(input.json(), Err(ImportError::Zip { .. })));
    }
}
