//! What a live trace already sent, so `export-otel` does not send it again.
//!
//! Why: `app-server --transcript DIR --otel-endpoint URL` traces each turn live, and the
//! transcript keeps the same conversation; `clawbridge export-otel DIR` read it back and sent
//! every turn a second time, and the collector showed each twice. The live exporter now writes
//! `DIR/otel-sent.jsonl`: a line for each thread it sent a span of (`{"thread", "to"}`) and for
//! each turn the collector took (`{"thread", "turn", "to"}`), once each, after the collector
//! answered (`to`: the collector, its credentials redacted; an export to another collector, or
//! `export-otel --all`, sends everything). The
//! export of the folder holds each trace until its top span ends and drops it when that is a
//! recorded turn, or a thread's start or resume of a recorded thread; the rest (turns the live
//! trace never got out: no collector then, a failed export, a kill mid-turn) goes out.
//!
//! Bounded: at most [`MAX_RECORDS`] lines are written (then recording stops, said once) and
//! read; the file is appended to, each line whole.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry::Value as OtelValue;
use opentelemetry_sdk::trace::SpanData;

use super::semconv as attr;
use clawbridge_support::sync::lock;

/// The record's name in a transcript folder.
pub const SENT_RECORD: &str = "otel-sent.jsonl";
/// Lines written (and read) at most.
pub const MAX_RECORDS: usize = 1_000_000;

/// What one span is to the record: the thread it is about, and its turn when it is a turn's
/// top span with an id.
fn keys_of(span: &SpanData) -> (Option<String>, Option<String>) {
    let text = |key: &str| {
        span.attributes
            .iter()
            .find(|value| value.key.as_str() == key)
            .and_then(|value| match &value.value {
                OtelValue::String(text) => Some(text.as_str().to_string()),
                _ => None,
            })
    };
    let thread = text(attr::GEN_AI_CONVERSATION_ID);
    let turn = is_turn(span).then(|| text(attr::TURN_ID)).flatten();
    (thread, turn)
}

fn is_turn(span: &SpanData) -> bool {
    span.name.starts_with(attr::OPERATION_INVOKE_AGENT)
}

/// A span that heads its own trace in the book: a turn, a thread's start or resume, a member
/// restart (a turn's may have a client's span as its parent, outside this book).
fn is_top(span: &SpanData) -> bool {
    span.parent_span_id == SpanId::INVALID
        || is_turn(span)
        || span.name.starts_with(attr::OPERATION_CREATE_AGENT)
        || span.name.starts_with("codex thread/resume")
}

/// The live side: appends what the collector took.
#[derive(Debug)]
pub struct SentLog {
    path: PathBuf,
    /// The collector, as logs show it (credentials redacted): an export to another collector
    /// sends everything.
    to: String,
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    threads: HashSet<String>,
    lines: usize,
    full: bool,
}

impl SentLog {
    pub fn new(path: PathBuf, to: String) -> SentLog {
        SentLog {
            path,
            to,
            state: Mutex::new(LogState::default()),
        }
    }

    /// The keys of `batch`, taken before it goes out (the exporter consumes it).
    pub fn keys(batch: &[SpanData]) -> Vec<(String, Option<String>)> {
        batch
            .iter()
            .filter_map(|span| {
                let (thread, turn) = keys_of(span);
                Some((thread?, turn))
            })
            .collect()
    }

    /// The collector took spans with these keys: each new thread and each turn, a line.
    pub fn record(&self, keys: Vec<(String, Option<String>)>) {
        let mut state = lock(&self.state);
        let mut text = String::new();
        for (thread, turn) in keys {
            if state.full {
                return;
            }
            let mut lines = Vec::new();
            if !state.threads.contains(&thread) && state.threads.len() < MAX_RECORDS {
                state.threads.insert(thread.clone());
                lines.push(serde_json::json!({ "thread": thread, "to": self.to }));
            }
            if let Some(turn) = turn {
                lines.push(serde_json::json!({ "thread": thread, "turn": turn, "to": self.to }));
            }
            for line in lines {
                state.lines += 1;
                if state.lines > MAX_RECORDS {
                    state.full = true;
                    tracing::warn!(
                        "traces: {} holds {MAX_RECORDS} lines; what is sent from now on is not recorded (export-otel of this folder would send it again)",
                        self.path.display()
                    );
                    break;
                }
                text.push_str(&line.to_string());
                text.push('\n');
            }
        }
        if text.is_empty() {
            return;
        }
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(text.as_bytes()));
        if let Err(error) = written {
            tracing::warn!(
                "traces: cannot record what was sent in {}: {error}",
                self.path.display()
            );
        }
    }
}

/// What a folder's record says was sent.
#[derive(Debug, Default)]
pub struct Sent {
    threads: HashSet<String>,
    turns: HashSet<(String, String)>,
    /// Traces left out of the export so far (sent live).
    pub left_out: std::sync::atomic::AtomicUsize,
}

impl Sent {
    /// The record in `dir` of what went to the collector `to` (none: nothing was sent live
    /// there). A line that is not a record is skipped; a record past [`MAX_RECORDS`] lines is
    /// read to there.
    pub fn read(dir: &Path, to: &str) -> Result<Sent, clawbridge_support::error::Error> {
        let path = dir.join(SENT_RECORD);
        let mut sent = Sent::default();
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(sent);
        }
        for line in super::offline::json_lines(&path)?.take(MAX_RECORDS) {
            let Ok(line) = line else { continue };
            let Some(thread) = line["thread"].as_str() else {
                continue;
            };
            if line["to"].as_str() != Some(to) {
                continue;
            }
            match line["turn"].as_str() {
                Some(turn) => {
                    sent.turns.insert((thread.to_string(), turn.to_string()));
                }
                None => {
                    sent.threads.insert(thread.to_string());
                }
            }
        }
        Ok(sent)
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.turns.is_empty()
    }

    /// Whether the trace `top` heads went out live.
    fn sent(&self, top: &SpanData) -> bool {
        let (thread, turn) = keys_of(top);
        let Some(thread) = thread else {
            return false;
        };
        match (is_turn(top), turn) {
            (true, Some(turn)) => self.turns.contains(&(thread, turn)),
            (true, None) => false,
            (false, _) => self.threads.contains(&thread),
        }
    }
}

/// The export side: spans held by trace until the trace's top span ends, then passed on or
/// dropped whole.
#[derive(Debug, Default)]
pub struct Holding {
    held: HashMap<TraceId, Vec<SpanData>>,
    dropped: HashSet<TraceId>,
}

impl Holding {
    /// `span` ended: what may go out now.
    pub fn ended(&mut self, sent: &Sent, span: SpanData) -> Vec<SpanData> {
        let trace = span.span_context.trace_id();
        if self.dropped.contains(&trace) {
            return Vec::new();
        }
        if !is_top(&span) {
            self.held.entry(trace).or_default().push(span);
            return Vec::new();
        }
        let mut spans = self.held.remove(&trace).unwrap_or_default();
        if sent.sent(&span) {
            sent.left_out
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.dropped.insert(trace);
            return Vec::new();
        }
        spans.push(span);
        spans
    }

    /// What is still held at the end (traces whose top never ended): out as they are.
    pub fn rest(&mut self) -> Vec<SpanData> {
        self.held.drain().flat_map(|(_, spans)| spans).collect()
    }
}
