//! JSON-lines files read one line at a time (transcript folders: `audit`, `transcript show`,
//! `export-otel`).
//!
//! Why: a transcript file may be 256 MiB, and JSON held as `serde_json::Value` takes several
//! times its text (every number, string and object is a value of 32 bytes and more, every
//! object member a key besides): a folder read whole took twelve times its largest file. Read a
//! line at a time, a reader holds one line and its value, plus what it keeps of each.
//!
//! One line can still be most of the file. A line is parsed only when what its value would
//! take is bounded: its structural characters (`,` `:` `[` `{` outside strings) are counted
//! first, and a line whose value would take more than [`DENSE_FACTOR`] times its text (or
//! [`DENSE_FLOOR`], whichever is more) is passed over and counted. Typical lines (messages,
//! command output, pictures as data URLs) are strings mostly and pass; a line that is a few
//! hundred MiB of `[1,1,1,...]` does not.

use std::io::{BufRead, Read};

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// Bytes a parsed JSON value takes per structural character, at most (an array element is a
/// 32-byte value; an object member is a key and a value in a map entry, counted by its `:` and
/// its `,`).
const BYTES_PER_VALUE: u64 = 48;
/// A line's value may take this many times its text.
pub const DENSE_FACTOR: u64 = 2;
/// ... or this many bytes, whichever is more (small lines are never passed over).
pub const DENSE_FLOOR: u64 = 64 * 1024 * 1024;

/// The JSON values of a file's lines, in order; lines that are not JSON (a cut last line, a
/// stray byte) or too dense to hold are passed over.
pub struct JsonLines {
    path: PathBuf,
    reader: std::io::BufReader<std::io::Take<std::fs::File>>,
    cap: u64,
    read: u64,
    /// The file's size when opened: a long line's buffer is sized from what is left of it at
    /// once (no doubling, which copies and holds the old buffer and the new).
    size: u64,
    line: Vec<u8>,
    passed_over: usize,
}

impl JsonLines {
    /// `path`, a regular file of at most `cap` bytes (`support::fs::open_file_capped`).
    pub fn open(path: &Path, cap: u64) -> Result<JsonLines> {
        let file = crate::fs::open_file_capped(path, cap)?;
        let size = file.metadata().map(|metadata| metadata.len()).unwrap_or(0);
        Ok(JsonLines {
            size,
            path: path.to_path_buf(),
            reader: std::io::BufReader::with_capacity(256 * 1024, file.take(cap.saturating_add(1))),
            cap,
            read: 0,
            line: Vec::new(),
            passed_over: 0,
        })
    }

    /// Lines passed over so far: not JSON (a line cut by a crash, a stray byte), or too dense
    /// to hold.
    pub fn passed_over(&self) -> usize {
        self.passed_over
    }

    fn failed(&self, source: std::io::Error) -> Error {
        Error::Read {
            path: self.path.clone(),
            source,
        }
    }
}

impl Iterator for JsonLines {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        loop {
            self.line.clear();
            let got = match self.read_line() {
                Ok(0) => return None,
                Ok(got) => got,
                Err(error) => return Some(Err(self.failed(error))),
            };
            self.read += got;
            if self.read > self.cap {
                return Some(Err(self.failed(std::io::Error::other(format!(
                    "larger than {} bytes",
                    self.cap
                )))));
            }
            let text = trim_line(&self.line);
            if text.is_empty() {
                continue;
            }
            if too_dense(text) {
                self.passed_over += 1;
                continue;
            }
            let parsed = parse_capped(text);
            // A long line's buffer is not held while its value is used, nor kept for the
            // next, short one.
            if self.line.capacity() > LONG_LINE {
                self.line = Vec::new();
            }
            match parsed {
                Ok(value) => return Some(Ok(value)),
                Err(_) => self.passed_over += 1,
            }
        }
    }
}

/// Whoever reads a file, what was passed over in it is told (once, as the reader lets go).
impl Drop for JsonLines {
    fn drop(&mut self) {
        if self.passed_over > 0 {
            tracing::warn!(
                "{}: {} line(s) passed over (not JSON, or too dense to hold in memory)",
                self.path.display(),
                self.passed_over
            );
        }
    }
}

/// A string (a key too) longer than this is cut to it, saying how much was left out: what
/// every reader keeps of one text at most, and why a line's value never copies its long texts
/// (a command's output of 200 MiB is read, not held twice).
pub const STRING_BYTES: usize = 1024 * 1024;

/// The note that ends a cut string.
pub fn cut_note(left: usize) -> String {
    format!("... ({left} more bytes not kept; the transcript file has them)")
}

/// `text` parsed as JSON, its strings cut at [`STRING_BYTES`]; trailing characters refused.
pub fn parse_capped(text: &[u8]) -> serde_json::Result<Value> {
    use serde::de::DeserializeSeed as _;
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let value = Capped.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// `text` cut at [`STRING_BYTES`] (on a character boundary), with the note.
fn capped(text: &str) -> String {
    if text.len() <= STRING_BYTES {
        return text.to_string();
    }
    let mut end = STRING_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + 80);
    out.push_str(&text[..end]);
    out.push_str(&cut_note(text.len() - end));
    out
}

/// A JSON value as `serde_json::Value` builds it, its strings and keys [`capped`].
#[derive(Clone, Copy)]
struct Capped;

impl<'de> serde::de::DeserializeSeed<'de> for Capped {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Capped {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(capped(value)))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element_seed(self)? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// An object's key, [`capped`].
struct Key;

impl<'de> serde::de::DeserializeSeed<'de> for Key {
    type Value = String;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for Key {
    type Value = String;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a key")
    }

    fn visit_str<E>(self, value: &str) -> Result<String, E> {
        Ok(capped(value))
    }
}

/// A line longer than this gets a buffer of its own, sized from the rest of the file.
const LONG_LINE: usize = 1024 * 1024;

impl JsonLines {
    /// The next line into `self.line`, its newline included; the bytes read (0 at the end).
    fn read_line(&mut self) -> std::io::Result<u64> {
        let mut got = 0u64;
        loop {
            let available = self.reader.fill_buf()?;
            if available.is_empty() {
                return Ok(got);
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            if self.line.len() + take > LONG_LINE && self.line.capacity() <= LONG_LINE {
                let left = self.size.saturating_sub(self.read + got);
                let want = usize::try_from(left).unwrap_or(usize::MAX).max(take);
                self.line.reserve_exact(want);
            }
            self.line.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            got += take as u64;
            if done {
                return Ok(got);
            }
        }
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Whether `text` parsed would take more than [`DENSE_FACTOR`] times its length (and more
/// than [`DENSE_FLOOR`]).
fn too_dense(text: &[u8]) -> bool {
    let length = text.len() as u64;
    let allowed = (DENSE_FACTOR * length).max(DENSE_FLOOR);
    if length * BYTES_PER_VALUE <= allowed {
        return false;
    }
    structural(text) * BYTES_PER_VALUE > allowed
}

/// The structural characters of JSON text outside its strings.
fn structural(text: &[u8]) -> u64 {
    let (mut count, mut in_string, mut escaped) = (0u64, false, false);
    for &byte in text {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b',' | b':' | b'[' | b'{' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// Append `entry` as one JSON line to `path` (created 0600), never through a link: a planted
/// `conformance.jsonl -> ~/.bashrc` must not be appended to (the transcript's files are opened
/// the same way).
pub fn append_line(path: &std::path::Path, entry: &serde_json::Value) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut file| writeln!(file, "{entry}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_one_by_one_and_junk_is_passed_over() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"a\":1}\r\nnot json\n\n[2]\n{\"cut\":").expect("write");
        let mut lines = JsonLines::open(&path, 1024).expect("open");
        let values: Vec<Value> = lines.by_ref().collect::<Result<_>>().expect("read");
        assert_eq!(
            values,
            vec![serde_json::json!({"a": 1}), serde_json::json!([2])]
        );
        // The line that is not JSON and the cut last one are counted.
        assert_eq!(lines.passed_over(), 2);
        let error = JsonLines::open(&path, 8).err().expect("too large");
        assert!(error.to_string().contains("t.jsonl"), "{error}");
    }

    #[test]
    fn long_strings_and_keys_are_cut_and_the_rest_is_as_serde_json_reads_it() {
        let plain = br#"{"a":[1,-2,3.5,true,null,"x\u00e9\n"],"b":{"c":{}}}"#;
        assert_eq!(
            parse_capped(plain).expect("parsed"),
            serde_json::from_slice::<Value>(plain).expect("serde_json")
        );
        assert!(parse_capped(b"{\"a\":1} x").is_err(), "trailing characters");
        let long = "\u{e9}".repeat(STRING_BYTES);
        let line = serde_json::json!({"text": long, long.clone(): 1}).to_string();
        let value = parse_capped(line.as_bytes()).expect("parsed");
        let text = value["text"].as_str().expect("text");
        assert!(text.len() < STRING_BYTES + 100, "{}", text.len());
        assert!(
            text.ends_with(&cut_note(STRING_BYTES)),
            "{}",
            &text[text.len() - 80..]
        );
        let key = value
            .as_object()
            .expect("object")
            .keys()
            .find(|key| key.len() > 4)
            .expect("key");
        assert!(key.len() < STRING_BYTES + 100);
    }

    #[test]
    fn a_dense_line_is_passed_over_and_strings_are_not_structure() {
        let floor = usize::try_from(DENSE_FLOOR).expect("usize");
        // Over the floor and a value per two bytes: passed over.
        let dense = format!("[{}1]", "1,".repeat(floor / BYTES_PER_VALUE as usize));
        assert!(too_dense(dense.as_bytes()));
        // The same length inside a string: kept.
        let text = format!("{{\"text\":\"{}\"}}", ",".repeat(floor));
        assert!(!too_dense(text.as_bytes()));
        assert_eq!(structural(br#"{"a":"x,\"y:[",b:[1,2]}"#), 6);
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, format!("{dense}\n{{\"after\":true}}\n")).expect("write");
        let mut lines = JsonLines::open(&path, u64::MAX).expect("open");
        let first = lines.next().expect("a line").expect("read");
        assert_eq!(first, serde_json::json!({"after": true}));
        assert_eq!(lines.passed_over(), 1);
    }
}
