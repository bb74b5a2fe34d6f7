//! Capturing model requests as they happen, for a process that sees a conversation go by (the
//! `app-server` proxy): what the conversation told us ([`Known`]: developer instructions,
//! folders, injected texts, the client and the Codex version) and the writer that files each
//! model request under `<dir>/<thread>/turn-NN/` with its labelled layers ([`CaptureWriter`]),
//! redacted with what is known. Also the per-thread file naming the proxy's transcript shares
//! ([`safe_name`]).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawbridge_codex::protocol::observed::{Observed, ObservedParams};
use serde_json::Value;

use super::{label_layers_with, redacted_request, render_layers, Redactions};
use crate::record::CapturedRequest;

/// Developer instructions and folders remembered (one set per thread start).
const MAX_KNOWN: usize = 32;
/// Threads whose captured requests are numbered (the oldest is forgotten first).
const MAX_CAPTURED_THREADS: usize = 256;
/// Requests whose response has not come yet (a response past it is not written).
const MAX_PENDING_RESPONSES: usize = 1024;
/// Bytes one writer puts into its capture folder at most; past it nothing more is written and
/// a marker file says so.
const MAX_CAPTURE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The marker left in the capture folder when [`MAX_CAPTURE_BYTES`] bites.
pub const CAPTURE_LIMIT_MARKER: &str = "CAPTURE-LIMIT-REACHED.txt";

use crate::record::RESERVED_NAMES;

/// A thread id as a file name, injectively: a plain id (`[A-Za-z0-9_-]`, at most 100
/// characters) is its own name; any other (a `/`, a dot, a long or empty id, a reserved name, or
/// one that already ends like a hashed name) becomes its characters reduced to `[A-Za-z0-9_-]`
/// (at most 64) plus `-` and 16 hex digits of its SHA-256. Plain names never end in `-` and 16
/// hex digits, so no two thread ids share a file, and none is a reserved name.
pub fn safe_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain && !RESERVED_NAMES.contains(&name) && !looks_hashed(name) {
        return name.to_string();
    }
    let reduced: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!(
        "{reduced}-{}",
        clawbridge_support::hex::sha256(name.as_bytes(), 8)
    )
}

/// Ends in `-` and 16 lowercase hex digits, as [`safe_name`]'s hashed names do.
fn looks_hashed(name: &str) -> bool {
    name.len() >= 17
        && name.as_bytes()[name.len() - 17] == b'-'
        && name[name.len() - 16..]
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// What the captures need from the conversation: the developer instructions sent (to tell
/// OpenClaw's layer from Codex's own) and the folders named (to redact them).
#[derive(Clone, Debug, Default)]
pub struct Known {
    developer_instructions: VecDeque<String>,
    folders: VecDeque<PathBuf>,
    /// `turn/start.additionalContext` keys seen.
    context_keys: Vec<String>,
    /// Texts injected with `thread/inject_items`.
    injected: VecDeque<String>,
    pub client: Option<String>,
    pub codex_version: Option<String>,
    /// What carried the conversation, as the captures' titles name it (`clawbridge app-server`
    /// when not said).
    pub face: Option<&'static str>,
    /// The live trace each filed model call is told to (`app-server --otel-endpoint`).
    pub trace: Option<Arc<crate::trace::LiveTrace>>,
    /// Each filed model call's time to first token, by model (`/metrics`).
    pub first_tokens: Arc<FirstTokens>,
}

/// Models whose time to first token is kept apart; further ones share `other`.
const MAX_TIMED_MODELS: usize = 64;

/// Time to first token per model, from each filed model call: how many, and their sum in
/// milliseconds (a rate of one over the other is the mean; `/metrics` tells both).
#[derive(Debug, Default)]
pub struct FirstTokens(Mutex<std::collections::BTreeMap<String, (u64, u64)>>);

impl FirstTokens {
    pub fn add(&self, model: &str, milliseconds: f64) {
        let Ok(mut models) = self.0.lock() else {
            return;
        };
        let key = if models.len() >= MAX_TIMED_MODELS && !models.contains_key(model) {
            "other".to_string()
        } else {
            clawbridge_support::text::printable(model)
                .chars()
                .take(64)
                .collect()
        };
        let entry = models.entry(key).or_default();
        entry.0 += 1;
        entry.1 += milliseconds.clamp(0.0, 86_400_000.0).round() as u64;
    }

    /// Model -> (calls, milliseconds to their first tokens, summed).
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, (u64, u64)> {
        self.0
            .lock()
            .map(|models| models.clone())
            .unwrap_or_default()
    }
}

impl Known {
    /// What a client's request tells the captures: its name (`initialize`), the texts it
    /// injects, the developer instructions and folders of its threads, its turns' context keys.
    /// Every face feeds its client's requests here (the endpoint and the stdio slot through
    /// their observer, `serve` through its peers' tap), so a capture reads the same everywhere.
    pub fn observe_request(&mut self, message: &Value) {
        use clawbridge_codex::protocol::table::name as method;
        let observed = Observed::of(message);
        let method = observed.method.unwrap_or_default();
        if !matches!(
            method,
            method::INITIALIZE
                | method::THREAD_INJECT_ITEMS
                | method::TURN_START
                | method::THREAD_START
                | method::THREAD_RESUME
                | method::THREAD_FORK
        ) {
            return;
        }
        let params = observed.params();
        match method {
            method::INITIALIZE => {
                let info = &params.client_info;
                // A client names itself: what it says is kept (and later printed) redacted, cut
                // to a line's worth, its control characters escaped.
                let client = format!(
                    "{} {}",
                    info.name.as_deref().unwrap_or("?"),
                    info.version.as_deref().unwrap_or("?")
                );
                self.client = Some(
                    clawbridge_support::text::printable(&clawbridge_support::redact::redact_text(
                        &client,
                    ))
                    .chars()
                    .take(200)
                    .collect(),
                );
            }
            method::THREAD_INJECT_ITEMS => self.remember_injected(&params),
            method::TURN_START => self.remember_turn(&params),
            method::THREAD_START | method::THREAD_RESUME | method::THREAD_FORK => {
                self.remember(&params)
            }
            _ => {}
        }
    }

    fn remember_turn(&mut self, params: &ObservedParams) {
        for key in params.additional_context.keys() {
            if !self.context_keys.contains(key) && self.context_keys.len() < MAX_KNOWN {
                self.context_keys.push(key.clone());
            }
        }
    }

    fn remember_injected(&mut self, params: &ObservedParams) {
        for text in params.injected_texts() {
            if !self.injected.iter().any(|known| known == text) {
                if self.injected.len() >= MAX_KNOWN {
                    self.injected.pop_front();
                }
                self.injected.push_back(text.to_string());
            }
        }
    }

    /// What a thread's opening params tell: its developer instructions and folder.
    pub fn remember(&mut self, params: &ObservedParams) {
        if let Some(text) = params.developer_instructions.as_deref() {
            if !self
                .developer_instructions
                .iter()
                .any(|known| known == text)
            {
                if self.developer_instructions.len() >= MAX_KNOWN {
                    self.developer_instructions.pop_front();
                }
                self.developer_instructions.push_back(text.to_string());
            }
        }
        if let Some(cwd) = params.cwd.as_deref() {
            let cwd = PathBuf::from(cwd);
            if !self.folders.contains(&cwd) {
                if self.folders.len() >= MAX_KNOWN {
                    self.folders.pop_front();
                }
                self.folders.push_back(cwd);
            }
        }
    }
}

/// A writer of what a recording forwarder records into `dir` (nothing known of the conversation
/// beyond what the requests say): its queue and its task.
pub fn spawn_recorder(
    dir: PathBuf,
) -> (
    tokio::sync::mpsc::Sender<crate::record::Recorded>,
    tokio::task::JoinHandle<()>,
) {
    let (sink, recorded) = tokio::sync::mpsc::channel(64);
    let writer = CaptureWriter::new(dir, Arc::new(Mutex::new(Known::default())));
    // Its caller owns it through the handle (the writer ends when `sink` and its clones go).
    (
        sink,
        clawbridge_support::task::Tasks::new().spawn(writer.run_recorded(recorded)),
    )
}

/// Where a request went, how it was redacted, and what a trace needs of it once its response
/// comes.
struct Filed {
    folder: PathBuf,
    suffix: String,
    redactions: Redactions,
    thread: String,
    turn: String,
    /// The redacted body when a trace carries content, else only its model.
    body: Value,
    /// When the forwarder took the request (a trace's model call starts there).
    seen: std::time::SystemTime,
}

/// Writes each model request the offline stub gets into `<dir>/<thread>/turn-NN/`, as `capture`
/// does: `model-request.json` (then `.2`, `.3` for the requests after tool results) and
/// `layers.md`, redacted.
pub struct CaptureWriter {
    dir: PathBuf,
    /// Recorded request id -> where its request went and how it was redacted (for its
    /// response), the oldest forgotten first.
    written: HashMap<u64, Filed>,
    written_order: VecDeque<u64>,
    known: Arc<Mutex<Known>>,
    /// Thread -> (turn folders already there from an earlier process, turn ids in order with
    /// their request counts).
    threads: HashMap<String, (usize, Vec<(String, usize)>)>,
    order: VecDeque<String>,
    failed: bool,
    /// Bytes written so far, and the cap (see [`MAX_CAPTURE_BYTES`]).
    written_bytes: u64,
    cap: u64,
}

impl CaptureWriter {
    pub fn new(dir: PathBuf, known: Arc<Mutex<Known>>) -> Self {
        Self {
            dir,
            written: HashMap::new(),
            written_order: VecDeque::new(),
            known,
            threads: HashMap::new(),
            order: VecDeque::new(),
            failed: false,
            written_bytes: 0,
            cap: MAX_CAPTURE_BYTES,
        }
    }

    /// A writer that stops at `cap` bytes (for tests of the cap).
    #[cfg(test)]
    pub fn with_cap(mut self, cap: u64) -> Self {
        self.cap = cap;
        self
    }

    /// Write `bytes` to `path` if the folder's cap allows; past it, leave the marker once.
    fn put(&mut self, path: &Path, bytes: &[u8]) -> clawbridge_support::error::Result<()> {
        let size = bytes.len() as u64;
        if self.written_bytes + size > self.cap {
            if self.written_bytes <= self.cap {
                self.written_bytes = self.cap + 1;
                tracing::warn!(
                    "capture {}: {} bytes written, the cap; nothing more is recorded",
                    self.dir.display(),
                    self.cap
                );
                let note = format!(
                    "clawbridge stopped recording here: the capture folder reached its cap of {} bytes. Later requests and responses were forwarded but not written.\n",
                    self.cap
                );
                clawbridge_support::fs::write_private(
                    &self.dir.join(CAPTURE_LIMIT_MARKER),
                    note.as_bytes(),
                )?;
            }
            return Ok(());
        }
        self.written_bytes += size;
        clawbridge_support::fs::write_private(path, bytes)
    }

    /// What the recording forwarder saw: each request written under its thread and turn
    /// ([`CaptureWriter::write`]), each response next to its request as `model-response[.N].json`, redacted the
    /// same way.
    pub async fn run_recorded(
        mut self,
        mut recorded: tokio::sync::mpsc::Receiver<crate::record::Recorded>,
    ) {
        use crate::record::Recorded;
        while let Some(item) = recorded.recv().await {
            let written = match item {
                Recorded::Request { id, request } => self.write(&request).map(|place| {
                    if self.written.len() >= MAX_PENDING_RESPONSES {
                        if let Some(old) = self.written_order.pop_front() {
                            self.written.remove(&old);
                        }
                    }
                    self.written.insert(id, place);
                    self.written_order.push_back(id);
                }),
                Recorded::Response { id, response } => match self.written.remove(&id) {
                    Some(filed) => {
                        let document = filed.redactions.redact(&response);
                        let text = format!("{}\n", clawbridge_support::json::to_pretty(&document));
                        let (trace, first_tokens) = self
                            .known
                            .lock()
                            .map(|known| {
                                (known.trace.clone(), Some(Arc::clone(&known.first_tokens)))
                            })
                            .unwrap_or_default();
                        if let (Some(first_tokens), Some(first), Some(model)) = (
                            first_tokens,
                            document["timings"]["firstByteMs"].as_f64(),
                            filed.body["model"].as_str(),
                        ) {
                            first_tokens.add(model, first);
                        }
                        if let Some(trace) = trace {
                            trace.model_call(&crate::trace::ModelCall {
                                thread: filed.thread,
                                turn: filed.turn,
                                request: filed.body,
                                response: document,
                                started: Some(filed.seen),
                            });
                        }
                        self.put(
                            &filed
                                .folder
                                .join(format!("model-response{}.json", filed.suffix)),
                            text.as_bytes(),
                        )
                    }
                    None => Ok(()),
                },
            };
            if let Err(error) = written {
                if !self.failed {
                    tracing::warn!(
                        "capture {}: {} (later failures are not repeated here)",
                        self.dir.display(),
                        clawbridge_support::error::with_causes(&error)
                    );
                    self.failed = true;
                }
            }
        }
    }

    /// Thread and turn of a request, from Codex's turn-metadata header.
    fn ids(request: &CapturedRequest, metadata: &Value) -> (String, String) {
        let text = |key: &str| metadata[key].as_str().map(str::to_string);
        let thread = text("thread_id")
            .or_else(|| {
                request.body["prompt_cache_key"]
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "unknown-thread".to_string());
        (thread, text("turn_id").unwrap_or_default())
    }

    /// Write one request; where it went (its folder, its file suffix) and its redactions.
    fn write(&mut self, request: &CapturedRequest) -> clawbridge_support::error::Result<Filed> {
        // When the forwarder took the request (the writer may be behind).
        let seen = request.at.unwrap_or_else(std::time::SystemTime::now);
        let metadata: Value = request
            .headers
            .get("x-codex-turn-metadata")
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
        let (thread, turn) = Self::ids(request, &metadata);
        let thread_dir = self.dir.join(safe_name(&thread));
        if !self.threads.contains_key(&thread) {
            if self.threads.len() >= MAX_CAPTURED_THREADS {
                if let Some(old) = self.order.pop_front() {
                    self.threads.remove(&old);
                }
            }
            self.order.push_back(thread.clone());
            // OpenClaw starts a new app-server per run: a resumed thread's turns go after the
            // ones an earlier process wrote, never over them.
            let earlier = std::fs::read_dir(&thread_dir)
                .map(|entries| {
                    entries
                        .filter_map(|entry| entry.ok())
                        .filter(|entry| entry.file_name().to_string_lossy().starts_with("turn-"))
                        .count()
                })
                .unwrap_or(0);
            self.threads.insert(thread.clone(), (earlier, Vec::new()));
        }
        let Some((earlier, turns)) = self.threads.get_mut(&thread) else {
            return Err(clawbridge_support::error::Error::Write {
                path: thread_dir,
                source: std::io::Error::other("the thread was forgotten"),
            });
        };
        let earlier = *earlier;
        let index = match turns.iter().position(|(known, _)| *known == turn) {
            Some(index) => index,
            None => {
                turns.push((turn.clone(), 0));
                turns.len() - 1
            }
        };
        turns[index].1 += 1;
        let number = turns[index].1;
        let turn_number = earlier + index + 1;
        let folder = thread_dir.join(format!("turn-{turn_number:02}"));
        clawbridge_support::fs::create_private_dir(&folder).map_err(|source| {
            clawbridge_support::error::Error::Write {
                path: folder.clone(),
                source,
            }
        })?;
        // One look at what the conversation told us, for this whole request.
        let known = self
            .known
            .lock()
            .map(|known| known.clone())
            .unwrap_or_default();
        let redactions = Self::redactions(&known, &metadata, &thread, &turn);
        let redacted = |text: &String| {
            redactions
                .redact(&Value::String(text.clone()))
                .as_str()
                .map(str::to_string)
        };
        let injected: Vec<String> = known.injected.iter().filter_map(redacted).collect();
        let document = redacted_request(request, &redactions);
        let suffix = if number == 1 {
            String::new()
        } else {
            format!(".{number}")
        };
        let text = format!("{}\n", clawbridge_support::json::to_pretty(&document));
        self.put(
            &folder.join(format!("model-request{suffix}.json")),
            text.as_bytes(),
        )?;
        let texts: Vec<&str> = document["body"]["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["content"].as_array())
            .flatten()
            .filter_map(|content| content["text"].as_str())
            .collect();
        let sent = known
            .developer_instructions
            .iter()
            .filter_map(redacted)
            .find(|text| texts.contains(&text.as_str()));
        let layers = label_layers_with(
            &document["body"],
            sent.as_deref(),
            &known.context_keys,
            &injected,
        );
        let title = format!(
            "Model-bound request {number} of turn {turn_number} ({} through {}, Codex {})",
            known.client.as_deref().unwrap_or("a client"),
            known.face.unwrap_or("clawbridge app-server"),
            known.codex_version.as_deref().unwrap_or("?")
        );
        self.put(
            &folder.join(format!("layers{suffix}.md")),
            render_layers(&layers, &title).as_bytes(),
        )?;
        let body = match known.trace.as_ref().map(|trace| trace.content()) {
            Some(crate::trace::ContentPolicy::Full) => document["body"].clone(),
            _ => serde_json::json!({"model": document["body"]["model"]}),
        };
        Ok(Filed {
            folder,
            suffix,
            redactions,
            thread,
            turn,
            body,
            seen,
        })
    }

    /// What a capture replaces with placeholders.
    fn redactions(known: &Known, metadata: &Value, thread: &str, turn: &str) -> Redactions {
        let mut redactions = Redactions::default();
        // Codex names the agent by the account's home folder (from the password database, not
        // $HOME, which OpenClaw sets to its own folder).
        if let Some(agent) = metadata["agent_name"].as_str() {
            redactions.add_path(Path::new(agent), "<agent-home>");
        }
        for folder in &known.folders {
            redactions.add_path(folder, "<workspace>");
            // Codex reports the git checkout around the workspace in its turn metadata.
            if let Some(git_root) = folder.ancestors().find(|dir| dir.join(".git").exists()) {
                redactions.add_path(git_root, "<git-root>");
            }
        }
        if let Some(codex_home) = std::env::var_os("CODEX_HOME") {
            redactions.add_path(Path::new(&codex_home), "<codex-home>");
        }
        if let Some(home) = dirs::home_dir() {
            redactions.add_path(&home, "<home>");
        }
        redactions.add_path(&std::env::temp_dir(), "<tmp>");
        redactions.add(thread.to_string(), "<thread-id>");
        if !turn.is_empty() {
            redactions.add(turn.to_string(), "<turn-id>");
        }
        redactions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(thread: &str, turn: &str, text: &str) -> CapturedRequest {
        let metadata = serde_json::json!({"thread_id": thread, "turn_id": turn});
        CapturedRequest {
            path: "/v1/responses".to_string(),
            headers: [("x-codex-turn-metadata".to_string(), metadata.to_string())]
                .into_iter()
                .collect(),
            body: serde_json::json!({"input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex"}]},
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "SOUL of thr-9"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            ]}),
            at: None,
        }
    }

    /// A log sink for one test: what the warnings said.
    #[derive(Clone, Default)]
    struct Logged(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Logged {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Protection: a capture that cannot be written says why (the system's own reason), once.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_capture_write_says_why() {
        let logged = Logged::default();
        let sink = logged.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let dir = tempfile::tempdir().expect("dir");
        // Where the thread's folder goes, a file: the folder cannot be made.
        std::fs::write(dir.path().join("thr-1"), "in the way").expect("file");
        let writer = CaptureWriter::new(
            dir.path().to_path_buf(),
            Arc::new(Mutex::new(Known::default())),
        );
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        for id in 0..2 {
            sender
                .send(crate::record::Recorded::Request {
                    id,
                    request: request("thr-1", "turn-1", "hello"),
                })
                .await
                .expect("send");
        }
        drop(sender);
        writer.run_recorded(receiver).await;
        let text = String::from_utf8(logged.0.lock().expect("log").clone()).expect("utf-8");
        let io = std::io::Error::from_raw_os_error(20).to_string(); // ENOTDIR
        let exists = std::io::Error::from_raw_os_error(17).to_string(); // EEXIST
        assert!(
            text.contains(&io) || text.contains(&exists),
            "no reason in {text:?}"
        );
        assert_eq!(text.matches("capture ").count(), 1, "{text}");
    }

    #[test]
    fn a_capture_folder_stops_at_its_cap_and_says_so() {
        let dir = tempfile::tempdir().expect("dir");
        let known = Arc::new(Mutex::new(Known::default()));
        let mut writer = CaptureWriter::new(dir.path().to_path_buf(), known).with_cap(100);
        writer
            .write(&request("thr-1", "turn-1", "hello"))
            .expect("write");
        assert!(dir.path().join(CAPTURE_LIMIT_MARKER).is_file());
        assert!(!dir.path().join("thr-1/turn-01/model-request.json").exists());
        // Without the cap the same request is written.
        let open = tempfile::tempdir().expect("dir");
        let mut writer = CaptureWriter::new(
            open.path().to_path_buf(),
            Arc::new(Mutex::new(Known::default())),
        );
        writer
            .write(&request("thr-1", "turn-1", "hello"))
            .expect("write");
        assert!(open
            .path()
            .join("thr-1/turn-01/model-request.json")
            .is_file());
        assert!(!open.path().join(CAPTURE_LIMIT_MARKER).exists());
    }

    /// Requests are filed per thread and turn, follow-ups of a turn numbered, OpenClaw's layer
    /// told apart (after redaction), and a later process continues after the turns on disk.
    #[test]
    fn captures_are_filed_per_thread_and_turn() {
        let dir = tempfile::tempdir().expect("dir");
        let known = Arc::new(Mutex::new(Known::default()));
        if let Ok(mut known) = known.lock() {
            known.remember(&ObservedParams {
                developer_instructions: Some("SOUL of thr-9".into()),
                ..ObservedParams::default()
            });
        }
        let mut writer = CaptureWriter::new(dir.path().to_path_buf(), Arc::clone(&known));
        for request in [
            request("thr-9", "t1", "hello"),
            request("thr-9", "t1", "after the tool"),
            request("thr-9", "t2", "next"),
        ] {
            writer.write(&request).expect("write");
        }
        let thread = dir.path().join("thr-9");
        for file in [
            "turn-01/model-request.json",
            "turn-01/model-request.2.json",
            "turn-01/layers.md",
            "turn-01/layers.2.md",
            "turn-02/model-request.json",
        ] {
            assert!(thread.join(file).is_file(), "{file}");
        }
        let first =
            std::fs::read_to_string(thread.join("turn-01/model-request.json")).expect("read");
        assert!(
            !first.contains("thr-9") && first.contains("<thread-id>"),
            "{first}"
        );
        let layers = std::fs::read_to_string(thread.join("turn-01/layers.md")).expect("read");
        assert!(
            layers.contains("OpenClaw developer instructions"),
            "{layers}"
        );
        let mut later = CaptureWriter::new(dir.path().to_path_buf(), known);
        later
            .write(&request("thr-9", "t3", "resumed"))
            .expect("write");
        assert!(thread.join("turn-03/model-request.json").is_file());
        let untouched =
            std::fs::read_to_string(thread.join("turn-01/model-request.json")).expect("read");
        assert_eq!(untouched, first, "an earlier turn is never overwritten");
    }
}
