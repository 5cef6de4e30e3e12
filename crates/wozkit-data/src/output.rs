//! Writing exports: pretty-printed JSON written one record at a time (so a 40 MB corpus never
//! exists twice in memory), in the layout of Python's `json.dump(indent=n, ensure_ascii=False)`
//! which the corpora use, and single-file zip archives around any export.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::PrettyFormatter;
use zip::write::SimpleFileOptions;

use crate::error::ExportError;

/// A top-level JSON array or object whose members are written as they come.
pub(crate) struct JsonStream<W: Write> {
    out: W,
    indent: Vec<u8>,
    close: u8,
    count: usize,
}

impl<W: Write> JsonStream<W> {
    pub fn array(out: W, indent: usize) -> Result<Self, ExportError> {
        Self::open(out, indent, b'[', b']')
    }

    pub fn object(out: W, indent: usize) -> Result<Self, ExportError> {
        Self::open(out, indent, b'{', b'}')
    }

    fn open(mut out: W, indent: usize, open: u8, close: u8) -> Result<Self, ExportError> {
        out.write_all(&[open])?;
        Ok(JsonStream {
            out,
            indent: vec![b' '; indent],
            close,
            count: 0,
        })
    }

    /// Writes the next array element.
    pub fn item(&mut self, value: &Value) -> Result<(), ExportError> {
        let text = self.render(value)?;
        self.item_text(&text)
    }

    /// Writes the next object member.
    pub fn entry(&mut self, key: &str, value: &Value) -> Result<(), ExportError> {
        let text = self.render(value)?;
        self.entry_text(key, &text)
    }

    /// A value pretty-printed for this stream, to be written later with [`Self::item_text`] or
    /// [`Self::entry_text`] (writers that reorder records keep this text, not the value).
    pub fn render(&self, value: &Value) -> Result<Vec<u8>, ExportError> {
        pretty(value, self.indent.len())
    }

    /// Writes the next array element from its [rendered](Self::render) text.
    pub fn item_text(&mut self, text: &[u8]) -> Result<(), ExportError> {
        self.separator()?;
        self.nested(text)
    }

    /// Writes the next object member from its [rendered](Self::render) text.
    pub fn entry_text(&mut self, key: &str, text: &[u8]) -> Result<(), ExportError> {
        self.separator()?;
        serde_json::to_writer(&mut self.out, key)?;
        self.out.write_all(b": ")?;
        self.nested(text)
    }

    /// Closes the array or object (no trailing newline, like `json.dump`).
    pub fn finish(mut self) -> Result<W, ExportError> {
        if self.count > 0 {
            self.out.write_all(b"\n")?;
        }
        self.out.write_all(&[self.close])?;
        Ok(self.out)
    }

    fn separator(&mut self) -> Result<(), ExportError> {
        let sep: &[u8] = if self.count == 0 { b"\n" } else { b",\n" };
        self.out.write_all(sep)?;
        self.out.write_all(&self.indent)?;
        self.count += 1;
        Ok(())
    }

    /// A value one level deep: its pretty-printed text with every line break indented once
    /// more. JSON strings never hold a raw line break, so every `\n` is a layout break.
    fn nested(&mut self, text: &[u8]) -> Result<(), ExportError> {
        let mut lines = text.split(|&b| b == b'\n');
        if let Some(first) = lines.next() {
            self.out.write_all(first)?;
        }
        for line in lines {
            self.out.write_all(b"\n")?;
            self.out.write_all(&self.indent)?;
            self.out.write_all(line)?;
        }
        Ok(())
    }
}

/// A value pretty-printed with `indent` spaces per level.
pub(crate) fn pretty(value: &impl Serialize, indent: usize) -> Result<Vec<u8>, ExportError> {
    let indent = vec![b' '; indent];
    let mut buf = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut buf, PrettyFormatter::with_indent(&indent));
    value.serialize(&mut ser)?;
    Ok(buf)
}

/// A value on one line with its object keys sorted and Python's `", "` / `": "` separators: what
/// `json.dumps(value, sort_keys=True)` writes (CRWIZ's `situation_db` strings).
pub(crate) fn python_style_sorted(value: &Value) -> String {
    struct PythonFormatter;
    impl serde_json::ser::Formatter for PythonFormatter {
        fn begin_array_value<W: ?Sized + Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonFormatter);
    // Serialising a `Value` into memory cannot fail.
    if sorted(value).serialize(&mut ser).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Writes a zip archive holding one deflated file, `entry`, whose content `write` produces.
/// The archive is streamed, so `out` need not be seekable.
pub fn write_zipped<W, F>(out: W, entry: &str, write: F) -> Result<(), ExportError>
where
    W: Write,
    F: FnOnce(&mut dyn Write) -> Result<(), ExportError>,
{
    let mut zip = zip::ZipWriter::new_stream(out);
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(entry, options)?;
    write(&mut zip)?;
    zip.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streamed_members_match_whole_value_pretty_printing() {
        let records = [json!({"a": [1, {"b": "x\ny"}], "c": {}}), json!([])];
        let mut stream = JsonStream::array(Vec::new(), 4).expect("open");
        for r in &records {
            stream.item(r).expect("item");
        }
        let streamed = stream.finish().expect("finish");
        let whole = pretty(&json!(records), 4).expect("pretty");
        assert_eq!(
            String::from_utf8_lossy(&streamed),
            String::from_utf8_lossy(&whole)
        );
    }

    #[test]
    fn python_style_sorts_keys_and_spaces_separators() {
        let value = json!({"b": [1, 2], "a": {"d": null, "c": "x"}});
        assert_eq!(
            python_style_sorted(&value),
            r#"{"a": {"c": "x", "d": null}, "b": [1, 2]}"#
        );
    }

    #[test]
    fn empty_containers_are_closed_on_one_line() {
        let stream = JsonStream::object(Vec::new(), 2).expect("open");
        assert_eq!(stream.finish().expect("finish"), b"{}");
    }
}
