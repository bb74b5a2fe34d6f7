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
        let file = crate::support::fs::open_file_capped(path, cap)?;
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
            let parsed = serde_json::from_slice(text);
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
