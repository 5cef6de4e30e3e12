//! Where each node of a YAML document was written, keyed by JSON Pointer.
//!
//! Schema errors and semantic checks both speak in JSON Pointers (`/states/3/transitions/0`); this
//! map turns a pointer back into the line and column the author must look at. For a mapping entry
//! the position of its *key* is recorded, because that is the line an editor should jump to.

use std::collections::HashMap;

use granit_parser::{Event, Parser};

/// 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// JSON Pointer → position.
#[derive(Debug, Default)]
pub struct Positions {
    map: HashMap<String, Pos>,
}

enum Frame {
    /// A mapping: the pointer of the mapping, and the key whose value comes next (if any).
    Map { at: String, key: Option<String> },
    /// A sequence and the index of its next item.
    Seq { at: String, next: usize },
}

/// A key as one segment of a JSON pointer (RFC 6901: `~` → `~0`, `/` → `~1`).
pub(crate) fn pointer_escape(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

impl Positions {
    /// Reads positions from `text`; a text that does not parse gives whatever was read before the
    /// error (the parse error itself is reported by the deserialiser).
    pub fn of(text: &str) -> Positions {
        let mut map = HashMap::new();
        let mut stack: Vec<Frame> = Vec::new();
        let mut parser = Parser::new_from_str(text);
        while let Some(Ok((event, span))) = parser.next_event() {
            let pos = Pos {
                line: span.start.line(),
                col: span.start.col() + 1,
            };
            // The pointer of the node this event starts, if it is a node.
            let node_ptr = |stack: &mut Vec<Frame>, map: &mut HashMap<String, Pos>| -> String {
                match stack.last_mut() {
                    None => String::new(),
                    Some(Frame::Seq { at, next }) => {
                        let p = format!("{at}/{next}");
                        *next += 1;
                        map.entry(p.clone()).or_insert(pos);
                        p
                    }
                    Some(Frame::Map { at, key }) => match key.take() {
                        Some(k) => format!("{at}/{}", pointer_escape(&k)),
                        None => String::new(),
                    },
                }
            };
            match event {
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Map { at, key }) = stack.last_mut()
                        && key.is_none()
                    {
                        let p = format!("{at}/{}", pointer_escape(&value));
                        map.entry(p).or_insert(pos);
                        *key = Some(value.to_string());
                        continue;
                    }
                    node_ptr(&mut stack, &mut map);
                }
                Event::MappingStart(..) => {
                    let at = node_ptr(&mut stack, &mut map);
                    map.entry(at.clone()).or_insert(pos);
                    stack.push(Frame::Map { at, key: None });
                }
                Event::SequenceStart(..) => {
                    let at = node_ptr(&mut stack, &mut map);
                    map.entry(at.clone()).or_insert(pos);
                    stack.push(Frame::Seq { at, next: 0 });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                Event::Alias(..) => {
                    node_ptr(&mut stack, &mut map);
                }
                _ => {}
            }
        }
        Positions { map }
    }

    /// The position of `pointer`, or of its nearest ancestor that was recorded.
    pub fn find(&self, pointer: &str) -> Pos {
        let mut p = pointer.to_string();
        loop {
            if let Some(pos) = self.map.get(&p) {
                return *pos;
            }
            match p.rfind('/') {
                Some(i) => p.truncate(i),
                None => return Pos { line: 1, col: 1 },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_items_and_nested_values() {
        let text = "a: 1\nb:\n  - x\n  - c: 2\n    d: [3, 4]\n";
        let p = Positions::of(text);
        assert_eq!(p.find("/a"), Pos { line: 1, col: 1 });
        assert_eq!(p.find("/b"), Pos { line: 2, col: 1 });
        assert_eq!(p.find("/b/0"), Pos { line: 3, col: 5 });
        assert_eq!(p.find("/b/1/d"), Pos { line: 5, col: 5 });
        assert_eq!(p.find("/b/1/d/1"), Pos { line: 5, col: 12 });
        assert_eq!(p.find("/b/1/nope"), Pos { line: 4, col: 5 });
    }
}
