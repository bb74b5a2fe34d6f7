//! `clawbridge export-otel DIR`: a transcript and capture folder of `app-server` read back into
//! the same span book the live export uses, so a session recorded without a collector can be
//! looked at in one afterwards.
//!
//! Times: each transcript entry carries when clawbridge forwarded it (`atMs`); an older
//! transcript without it falls back on Codex's `emittedAtMs` (a client's message taking the time
//! of the next message that has one). Model calls come from `model-requests/<thread>/turn-NN/`: the turn folders
//! of a thread in order are its turns with model calls in order, and each call ends at the
//! `thread/tokenUsage/updated` Codex sent for it (the rest at the turn's end).
//!
//! Bounded and confined: only regular files (never a link) directly in `DIR`, its
//! `connection-N/` folders and its `model-requests/` tree are read, each capped
//! ([`MAX_FILE_BYTES`]), at most [`MAX_FILES`] of them.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::spans::{ModelCall, Side, SpanBook};
use clawbridge_codex::protocol::table::name as method;
use clawbridge_support::error::Error;

/// Largest file read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Files read at most (thread files and model call documents together).
pub const MAX_FILES: usize = 100_000;

/// What an export read and sent.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exported {
    pub threads: usize,
    pub turns: usize,
    pub model_calls: usize,
    /// Spans the collector took.
    pub spans: u64,
    /// Traces left out: a live trace of the folder sent them already (`otel-sent.jsonl`).
    pub already_sent: usize,
    /// Where they went.
    pub target: String,
}

/// A transcript file's JSON lines, one at a time (at most [`MAX_FILE_BYTES`]).
pub fn json_lines(path: &Path) -> Result<clawbridge_support::jsonl::JsonLines, Error> {
    clawbridge_support::jsonl::JsonLines::open(path, MAX_FILE_BYTES)
}

/// The time each message of a transcript file states (`atMs`, else Codex's `emittedAtMs`), in
/// order; `None` for one that states none. Only the messages (`direction` `in` or `out`) count,
/// as [`export_folder`] meets them.
fn message_times(path: &Path) -> Result<Vec<Option<f64>>, Error> {
    let mut times = Vec::new();
    for entry in json_lines(path)? {
        let entry = entry?;
        if matches!(entry["direction"].as_str(), Some("in" | "out")) {
            times.push(
                entry["atMs"]
                    .as_f64()
                    .or_else(|| entry["message"]["emittedAtMs"].as_f64()),
            );
        }
    }
    Ok(times)
}

/// A regular file itself, not a link to one (a link planted in a transcript folder could point
/// anywhere, and `--otel-content full` would send what it reads).
pub fn regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

fn read_json(path: &Path) -> Option<Value> {
    if !regular_file(path) {
        return None;
    }
    let bytes = clawbridge_support::fs::read_file_capped(path, MAX_FILE_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The entries directly in `dir` whose own type (a link is not followed) `keep` takes, sorted
/// by name.
fn entries_in(dir: &Path, keep: fn(&std::fs::FileType) -> bool) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|kind| keep(&kind)))
        .map(|entry| entry.path())
        .collect();
    entries.sort();
    entries
}

/// Regular files (not links) directly in `dir`, sorted by name.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    entries_in(dir, std::fs::FileType::is_file)
}

/// Folders (not links) directly in `dir`, sorted by name.
pub fn folders_in(dir: &Path) -> Vec<PathBuf> {
    entries_in(dir, std::fs::FileType::is_dir)
}

/// The model calls of one turn folder, in order (`model-request.json`, `.2`, `.3`, ...).
fn calls_in(folder: &Path, thread: &str, budget: &mut usize) -> Vec<ModelCall> {
    let mut calls = Vec::new();
    for number in 1.. {
        let suffix = if number == 1 {
            String::new()
        } else {
            format!(".{number}")
        };
        let request = folder.join(format!("model-request{suffix}.json"));
        if !regular_file(&request) || *budget == 0 {
            break;
        }
        *budget -= 1;
        let request = read_json(&request).unwrap_or(Value::Null);
        let response =
            read_json(&folder.join(format!("model-response{suffix}.json"))).unwrap_or(Value::Null);
        calls.push(ModelCall {
            thread: thread.to_string(),
            turn: String::new(),
            request: request["body"].clone(),
            response,
            started: None,
        });
    }
    calls
}

fn at_ms(ms: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// The folders holding a transcript's files: `dir` itself (the stdio slot writes there) and its
/// The error of a folder with no thread files in it (every reader of a transcript folder says
/// the same).
pub fn no_thread_files(dir: &Path) -> Error {
    Error::InvalidArgument {
        flag: "DIR".into(),
        message: format!(
            "{} holds no thread files (<thread>.jsonl, or connection-N/<thread>.jsonl): give the --transcript folder of app-server or serve",
            dir.display()
        ),
    }
}

/// `connection-N/` folders in order (the endpoint writes one per connection).
pub fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut connections: Vec<(usize, PathBuf)> = folders_in(dir)
        .into_iter()
        .filter_map(|folder| {
            let number = folder
                .file_name()?
                .to_str()?
                .strip_prefix("connection-")?
                .parse::<usize>()
                .ok()?;
            Some((number, folder))
        })
        .collect();
    connections.sort();
    std::iter::once(dir.to_path_buf())
        .chain(connections.into_iter().map(|(_, folder)| folder))
        .collect()
}

/// `dir` is a folder itself (not a link to one), or the error naming it.
pub fn transcript_folder(dir: &Path) -> Result<(), Error> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| Error::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(Error::InvalidArgument {
            flag: "DIR".to_string(),
            message: format!(
                "{} is not a folder (give the --transcript folder of app-server)",
                dir.display()
            ),
        });
    }
    Ok(())
}

/// Read `dir` into `book`; what it read.
pub fn export_folder(dir: &Path, book: &mut SpanBook) -> Result<Exported, Error> {
    transcript_folder(dir)?;
    let mut budget = MAX_FILES;
    let mut exported = Exported::default();
    let captures = dir.join("model-requests");
    // Each thread's captured turns, in order, taken as its turns are met (a thread resumed on
    // a later connection goes on where it left off).
    let mut captured: HashMap<String, VecDeque<VecDeque<ModelCall>>> = HashMap::new();
    let mut last_time = UNIX_EPOCH;
    let mut threads = std::collections::HashSet::new();
    for (stream, source) in sources(dir).into_iter().enumerate() {
        // The client's name, from the connection file (initialize).
        let connection = source.join("connection.jsonl");
        if regular_file(&connection) {
            for entry in json_lines(&connection)? {
                let entry = entry?;
                if entry["message"]["method"] == method::INITIALIZE {
                    book.message(stream, Side::Client, &entry["message"], UNIX_EPOCH);
                }
            }
        }
        for file in files_in(&source) {
            let name = file
                .file_name()
                .map(|name| name.to_string_lossy().to_string())
                .unwrap_or_default();
            let Some(thread_name) = name.strip_suffix(".jsonl") else {
                continue;
            };
            if crate::record::RESERVED_NAMES.contains(&thread_name) || budget == 0 {
                continue;
            }
            budget -= 1;
            threads.insert(thread_name.to_string());
            // Each message's time: when clawbridge forwarded it (`atMs`), else Codex's
            // `emittedAtMs`, else the next message's, else the last seen. A first pass reads
            // only the times (of the messages, one number each), the second the messages.
            let mut times = message_times(&file)?;
            let mut next: Option<f64> = None;
            for time in times.iter_mut().rev() {
                match time {
                    Some(ms) => next = Some(*ms),
                    None => *time = next,
                }
            }
            let turns = captured.entry(thread_name.to_string()).or_insert_with(|| {
                folders_in(&captures.join(thread_name))
                    .iter()
                    .filter(|folder| {
                        folder
                            .file_name()
                            .is_some_and(|name| name.to_string_lossy().starts_with("turn-"))
                    })
                    .map(|folder| calls_in(folder, thread_name, &mut budget).into())
                    .collect()
            });
            let with_captures = !turns.is_empty();
            book.set_captured_calls(with_captures);
            let mut current: VecDeque<ModelCall> = VecDeque::new();
            let mut times = times.into_iter();
            for entry in json_lines(&file)? {
                let entry = entry?;
                if !matches!(entry["direction"].as_str(), Some("in" | "out")) {
                    continue;
                }
                let time = times.next().flatten();
                let at = time.map(at_ms).unwrap_or(last_time);
                last_time = at;
                let message = &entry["message"];
                let side = match entry["direction"].as_str() {
                    Some("in") => Side::Client,
                    Some("out") => Side::Codex,
                    _ => continue,
                };
                let name = message["method"].as_str().unwrap_or_default();
                match (side, name) {
                    (Side::Client, method::TURN_START) => {
                        exported.turns += 1;
                        if with_captures {
                            current = turns.pop_front().unwrap_or_default();
                        }
                    }
                    (Side::Codex, method::THREAD_TOKEN_USAGE_UPDATED) if with_captures => {
                        // The turn counts the update; the capture tells the call.
                        book.message(stream, side, message, at);
                        if let Some(call) = current.pop_front() {
                            book.model_call(&call, at);
                            exported.model_calls += 1;
                        }
                        continue;
                    }
                    (Side::Codex, method::TURN_COMPLETED) => {
                        while let Some(call) = current.pop_front() {
                            book.model_call(&call, at);
                            exported.model_calls += 1;
                        }
                    }
                    _ => {}
                }
                book.message(stream, side, message, at);
            }
        }
    }
    if threads.is_empty() {
        return Err(crate::trace::offline::no_thread_files(dir));
    }
    exported.threads = threads.len();
    book.finish(last_time);
    Ok(exported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::collected::Collected;
    use crate::trace::ContentPolicy;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// Protection: a model call document that is a link is not read (under `full`, its text
    /// would go to the collector); the real one beside it is.
    #[cfg(unix)]
    #[test]
    fn linked_files_in_a_transcript_folder_are_not_read() {
        let dir = tempfile::tempdir().expect("dir");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(
            dir.path().join("thr.jsonl"),
            [
                r#"{"atMs": 1000, "direction": "in", "message": {"id": 1, "method": "turn/start", "params": {"threadId": "thr", "input": []}}}"#,
                r#"{"atMs": 1001, "direction": "out", "message": {"id": 1, "result": {"turn": {"id": "u1"}}}}"#,
                r#"{"atMs": 1005, "direction": "out", "message": {"method": "turn/completed", "params": {"threadId": "thr", "turn": {"id": "u1", "status": "completed"}}}}"#,
                r#"{"atMs": 2000, "direction": "in", "message": {"id": 2, "method": "turn/start", "params": {"threadId": "thr", "input": []}}}"#,
                r#"{"atMs": 2001, "direction": "out", "message": {"id": 2, "result": {"turn": {"id": "u2"}}}}"#,
                r#"{"atMs": 2005, "direction": "out", "message": {"method": "turn/completed", "params": {"threadId": "thr", "turn": {"id": "u2", "status": "completed"}}}}"#,
            ]
            .join("\n"),
        )
        .expect("thread");
        let secret = outside.path().join("secret.json");
        std::fs::write(
            &secret,
            r#"{"body": {"model": "gpt-5.5", "input": "OUTSIDE-SECRET"}}"#,
        )
        .expect("secret");
        let turns = dir.path().join("model-requests/thr");
        std::fs::create_dir_all(turns.join("turn-01")).expect("turn 1");
        std::fs::create_dir_all(turns.join("turn-02")).expect("turn 2");
        std::os::unix::fs::symlink(&secret, turns.join("turn-01/model-request.json"))
            .expect("link");
        std::fs::write(
            turns.join("turn-02/model-request.json"),
            r#"{"body": {"model": "gpt-5.5", "input": "inside"}}"#,
        )
        .expect("request");
        let exporter = Collected::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let mut book = SpanBook::new(provider.tracer("test"), ContentPolicy::Full, false);
        let exported = export_folder(dir.path(), &mut book).expect("export");
        assert_eq!(
            (exported.turns, exported.model_calls),
            (2, 1),
            "{exported:?}"
        );
        let spans = exporter.get_finished_spans().expect("spans");
        let text = format!("{spans:?}");
        assert!(!text.contains("OUTSIDE-SECRET"), "a link was read: {text}");
        assert!(text.contains("inside"), "the real file was read: {text}");
    }
}
