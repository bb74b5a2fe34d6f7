//! The `--transcript DIR` files: every forwarded message as a JSON line
//! (`{"direction": "in"|"out", "message": ..., "session": ...}`), one file per Codex thread; the
//! session names the writer (one per process or connection), so the lines of processes that
//! share a folder can be told apart.
//!
//! A message names its thread in `params.threadId`, `params.thread.id` or `result.thread.id`; a
//! response is filed with its request (request ids are remembered, bounded); the rest goes to
//! `connection.jsonl`. Secrets are redacted before anything is written ([`redact`]); the folder
//! is created 0700 and the files 0600, and file names are thread ids reduced to
//! `[A-Za-z0-9_-]`, so no thread id can name a path outside DIR.
//!
//! One writer for every face that carries Codex's protocol: the stdio slot and the endpoint's
//! connections (`app-server --transcript`, the client's lines) and `serve --transcript` (its own
//! lines to each app-server, through the peer's tap). [`transcript_writer`] runs one on a thread
//! of its own, fed by a queue bounded in bytes ([`TranscriptQueue`]: a line waits for nothing on
//! disk). The readers are `traffic::trace::offline`'s.

use clawbridge_codex::protocol::observed::Observed;
use clawbridge_codex::protocol::table::name as method;
use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::capture::live::safe_name;
use clawbridge_codex::protocol::wire::Direction;

/// Longest line the transcript records (longer lines are forwarded untouched).
pub const MAX_TRANSCRIPT_LINE: usize = 64 * 1024 * 1024;
/// Transcript files open at once (the least recently used is closed, and reopened to append).
pub const MAX_OPEN_FILES: usize = 64;
/// Request ids remembered so a response lands in its request's thread file.
pub const MAX_PENDING: usize = 4096;

/// A transcript folder that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("transcript folder {path}: {source}")]
pub struct TranscriptError {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

/// The per-thread JSON-lines transcript.
#[derive(Debug)]
pub struct Transcript {
    dir: PathBuf,
    files: HashMap<String, std::fs::File>,
    /// Open files, least recently used first.
    order: VecDeque<String>,
    /// Request id (its JSON text) -> the thread file its response belongs in.
    pending: HashMap<String, String>,
    pending_order: VecDeque<String>,
    /// Thread-opening requests (`thread/start`, `thread/fork`) wait for their response, which
    /// names the thread, so both land in the thread's file: request id -> the written lines (the
    /// client's request, and what clawbridge routed in its place, if it did).
    held: Vec<Held>,
    /// `--route spec`: a thread or turn request is held too, until what was routed in its place
    /// (or its answer) comes, so the two are written side by side whatever Codex sends between.
    routing: bool,
    failed: bool,
    /// This writer's own id, on every entry: several app-server processes may write one
    /// folder at once (OpenClaw's heartbeat runs its activity recap beside the turn), and their
    /// `connection.jsonl` lines share request ids; the session tells them apart (`replay`).
    session: String,
}

/// Thread-opening requests held for their response at most (then written to the connection).
const MAX_HELD: usize = 16;

impl Drop for Transcript {
    fn drop(&mut self) {
        for held in std::mem::take(&mut self.held) {
            let file = held.file.unwrap_or_else(|| "connection".to_string());
            for entry in held.entries {
                self.write(&file, &entry);
            }
        }
    }
}

impl Transcript {
    pub fn open(dir: &Path) -> Result<Transcript, TranscriptError> {
        let refused = |source: std::io::Error| TranscriptError {
            path: dir.display().to_string(),
            source,
        };
        // Private: a transcript holds the user's conversation.
        clawbridge_support::fs::create_private_dir(dir).map_err(refused)?;
        // A folder that was there already must be a real folder of ours, and private.
        let metadata = std::fs::symlink_metadata(dir).map_err(refused)?;
        if metadata.file_type().is_symlink() || !metadata.is_dir() {
            return Err(refused(std::io::Error::other(
                "is a symbolic link or not a folder; refusing to write a transcript through it",
            )));
        }
        {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let me = rustix::process::geteuid().as_raw();
            if metadata.uid() != me {
                return Err(refused(std::io::Error::other(format!(
                    "belongs to another user (uid {}); use a folder of your own",
                    metadata.uid()
                ))));
            }
            if metadata.mode() & 0o077 != 0 {
                tracing::warn!(
                    "transcript folder {} was readable by others (mode {:o}); made it 0700",
                    dir.display(),
                    metadata.mode() & 0o777
                );
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(refused)?;
            }
        }
        Ok(Transcript {
            dir: dir.to_path_buf(),
            files: HashMap::new(),
            order: VecDeque::new(),
            pending: HashMap::new(),
            pending_order: VecDeque::new(),
            held: Vec::new(),
            routing: false,
            failed: false,
            session: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// Hold each thread and turn request until what was routed in its place comes
    /// (`--route spec`).
    pub fn routing(mut self, on: bool) -> Transcript {
        self.routing = on;
        self
    }

    #[cfg(test)]
    pub fn record(&mut self, direction: Direction, line: &[u8]) {
        self.record_at(direction, line, std::time::SystemTime::now());
    }

    /// Record `line`, forwarded at `at` (the entry's `atMs`: `export-otel` times spans by it).
    pub fn record_at(&mut self, direction: Direction, line: &[u8], at: std::time::SystemTime) {
        self.record_entry(Entry::Line(direction), line, at);
    }

    /// Record what clawbridge sent Codex in place of a client's request (`--route spec`), beside
    /// it: an entry of direction `routed`, with what moved in words.
    pub fn record_routed(&mut self, line: &[u8], notes: &[String], at: std::time::SystemTime) {
        self.record_entry(Entry::Routed(notes), line, at);
    }

    fn record_entry(&mut self, kind: Entry<'_>, line: &[u8], at: std::time::SystemTime) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return;
        }
        let mut message: Value =
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
        let observed = Observed::of(&message);
        let id = observed.id.map(Value::to_string);
        let is_request = observed.method.is_some();
        // The thread's file, or (for a response) the file its request went to, which is a file
        // name already, or the connection's.
        let thread = observed.thread().map(str::to_string);
        let file = match &thread {
            Some(thread) => safe_name(thread),
            None => (!is_request)
                .then(|| id.as_ref().and_then(|id| self.pending.remove(id)))
                .flatten()
                .unwrap_or_else(|| "connection".to_string()),
        };
        let opens_thread = is_request
            && thread.is_none()
            && matches!(
                observed.method,
                Some(method::THREAD_START | method::THREAD_FORK)
            );
        let routed = matches!(kind, Entry::Routed(_));
        let routable = self.routing
            && matches!(
                observed.method,
                Some(method::THREAD_START | method::THREAD_RESUME | method::TURN_START)
            );
        if let (true, false, Some(id)) = (is_request, routed, id.clone()) {
            if self.pending.len() >= MAX_PENDING {
                if let Some(old) = self.pending_order.pop_front() {
                    self.pending.remove(&old);
                }
            }
            self.pending.insert(id.clone(), file.clone());
            self.pending_order.push_back(id);
        }
        redact(&mut message);
        let at_ms = at.duration_since(std::time::UNIX_EPOCH).map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
        let entry = match kind {
            Entry::Line(direction) => serde_json::json!({
                "atMs": at_ms,
                "direction": direction.as_str(),
                "message": message,
                "session": self.session,
            }),
            Entry::Routed(notes) => serde_json::json!({
                "atMs": at_ms,
                "direction": "routed",
                "message": message,
                "notes": notes,
                "session": self.session,
            }),
        }
        .to_string();

        if let (true, Some(id)) = (is_request && (opens_thread || routable), id.as_ref()) {
            if let Some(at) = self.held.iter().position(|held| held.id == *id) {
                self.held[at].entries.push(entry);
                // A routed request beside its client's: written now, unless the thread it
                // opens is named only by the answer.
                if routed && self.held[at].file.is_some() {
                    let held = self.held.remove(at);
                    self.write_held(held);
                }
                return;
            }
            if !routed {
                if self.held.len() >= MAX_HELD {
                    let oldest = self.held.remove(0);
                    self.write_held(oldest);
                }
                self.held.push(Held {
                    id: id.clone(),
                    file: (!opens_thread).then(|| file.clone()),
                    entries: vec![entry],
                });
                return;
            }
        }
        if !is_request {
            if let Some(at) = id
                .as_ref()
                .and_then(|id| self.held.iter().position(|held| held.id == *id))
            {
                let mut held = self.held.remove(at);
                held.file.get_or_insert_with(|| file.clone());
                self.write_held(held);
            }
        }
        self.write(&file, &entry);
    }

    /// Write what was held, in order, into its file (the connection's when none is known).
    fn write_held(&mut self, held: Held) {
        let file = held.file.unwrap_or_else(|| "connection".to_string());
        for entry in held.entries {
            self.write(&file, &entry);
        }
    }

    fn write(&mut self, file: &str, entry: &str) {
        let written = self
            .file(file)
            .and_then(|handle| writeln!(handle, "{entry}"));
        if let Err(error) = written {
            if !self.failed {
                tracing::warn!(
                    "transcript {}: {error}; forwarding goes on",
                    self.dir.display()
                );
                self.failed = true;
            }
        }
    }

    /// The open file `<name>.jsonl` (`name` is `connection` or a [`safe_name`]), opened
    /// without following a link: a planted symlink is refused, never written through.
    fn file(&mut self, name: &str) -> std::io::Result<&mut std::fs::File> {
        let safe = name.to_string();
        if !self.files.contains_key(&safe) {
            if self.files.len() >= MAX_OPEN_FILES {
                if let Some(old) = self.order.pop_front() {
                    self.files.remove(&old);
                }
            }
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(self.dir.join(format!("{safe}.jsonl")))?;
            self.files.insert(safe.clone(), file);
        }
        self.order.retain(|open| open != &safe);
        self.order.push_back(safe.clone());
        self.files
            .get_mut(&safe)
            .ok_or_else(|| std::io::Error::other("transcript file vanished"))
    }
}

/// A request's entries held back: until its answer names the thread it opened (`file` none),
/// or until what was routed in its place comes.
#[derive(Debug)]
struct Held {
    id: String,
    file: Option<String>,
    entries: Vec<String>,
}

/// What an entry records: a line that went one way, or what clawbridge routed in place of the
/// client's request just recorded.
#[derive(Clone, Copy)]
enum Entry<'a> {
    Line(Direction),
    Routed(&'a [String]),
}

/// Replace secrets with `<redacted>` (by key and by value: [`clawbridge_support::redact`]).
pub fn redact(value: &mut Value) {
    clawbridge_support::redact::redact_value(value);
}

/// Bytes of lines waiting for the transcript writer at most.
const TRANSCRIPT_QUEUE_BYTES: usize = 256 * 1024 * 1024;

/// A transcript of `dir` written on a thread of its own, and the queue that feeds it (bounded in
/// bytes: a line waits for nothing on disk). The thread ends when every queue handle is gone.
pub fn transcript_writer(
    dir: &Path,
    tasks: &clawbridge_support::task::Tasks,
    routing: bool,
) -> Result<(TranscriptQueue, tokio::task::JoinHandle<()>), TranscriptError> {
    let mut transcript = Transcript::open(dir)?.routing(routing);
    let (sender, mut lines) =
        clawbridge_support::queue::byte_queue::<Queued>(TRANSCRIPT_QUEUE_BYTES, None);
    let task = tasks.spawn_blocking(move || {
        while let Some(queued) = lines.blocking_recv() {
            match queued.routed {
                None => transcript.record_at(queued.direction, &queued.line, queued.at),
                Some(notes) => transcript.record_routed(&queued.line, &notes, queued.at),
            }
        }
    });
    let queue = TranscriptQueue {
        sender,
        warned: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    };
    Ok((queue, task))
}

/// The feeding side of a transcript writer.
/// One line on its way to the writer.
struct Queued {
    direction: Direction,
    line: Vec<u8>,
    at: std::time::SystemTime,
    /// What moved, for a routed request.
    routed: Option<Vec<String>>,
}

#[derive(Clone)]
pub struct TranscriptQueue {
    sender: clawbridge_support::queue::ByteSender<Queued>,
    warned: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TranscriptQueue {
    /// Queue a line if the byte budget has room; never waits.
    pub fn offer(&self, direction: Direction, line: Vec<u8>) {
        self.queue(direction, line, None);
    }

    /// What clawbridge sent Codex in place of the client's request offered just before.
    pub fn offer_routed(&self, line: Vec<u8>, notes: Vec<String>) {
        self.queue(Direction::In, line, Some(notes));
    }

    fn queue(&self, direction: Direction, line: Vec<u8>, routed: Option<Vec<String>>) {
        let queued = Queued {
            direction,
            at: std::time::SystemTime::now(),
            routed,
            line,
        };
        if !self.sender.offer(queued.line.len(), queued)
            && !self.warned.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            tracing::warn!(
                "transcript: the writer is behind; a message was forwarded but not recorded"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_and_the_rest_is_kept() {
        let mut message = json!({"method": "account/login/start", "params": {
            "type": "apiKey", "apiKey": "sk-live-123", "nested": {"access_token": "abc", "refreshToken": "r"},
            "headers": ["Bearer xyz", "plain"], "text": "keep me", "tokenUsage": {"total": 3}}});
        redact(&mut message);
        assert_eq!(message["params"]["apiKey"], "<redacted>");
        assert_eq!(message["params"]["nested"]["access_token"], "<redacted>");
        assert_eq!(message["params"]["nested"]["refreshToken"], "<redacted>");
        assert_eq!(message["params"]["headers"], json!(["<redacted>", "plain"]));
        assert_eq!(message["params"]["text"], "keep me");
        assert_eq!(
            message["params"]["tokenUsage"],
            json!({"total": 3}),
            "usage is not a secret"
        );
        assert_eq!(message["params"]["type"], "apiKey");
    }

    /// Protection: file names are injective. Ids that reduce to the same characters, reserved
    /// names, empty and long ids, and an id shaped like another's hashed name all get files of
    /// their own.
    #[test]
    fn thread_file_names_are_injective() {
        let ids = [
            "a/b",
            "a.b",
            "a_b",
            "a:b",
            "",
            "connection",
            "conformance",
            "audit",
            "model-requests",
            &"x".repeat(300),
            &"x".repeat(301),
            "01a233a5-8000-7532-a8a8-360dd820e4b9",
        ];
        let mut names: Vec<String> = ids.iter().map(|id| safe_name(id)).collect();
        let hashed_of_a_slash_b = safe_name("a/b");
        names.push(safe_name(&hashed_of_a_slash_b));
        let unique: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert!(!names
            .iter()
            .any(|name| crate::record::RESERVED_NAMES.contains(&name.as_str())));
        assert_eq!(safe_name("thr-abc"), "thr-abc", "plain ids keep their name");
        assert!(names
            .iter()
            .all(|name| name.len() <= 100 && !name.contains('/')));
    }

    /// Protection: the folder and its files are ours and private. A folder left 0777 is made
    /// 0700; a planted link in place of a thread's file is refused, not written through; a link
    /// as the folder itself is refused.
    #[test]
    fn a_foreign_folder_mode_and_planted_links_are_not_written_through() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let folder = dir.path().join("t");
        std::fs::create_dir(&folder).expect("folder");
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "untouched\n").expect("victim");
        std::os::unix::fs::symlink(&victim, folder.join("thr-1.jsonl")).expect("link");
        let mut transcript = Transcript::open(&folder).expect("open");
        assert_eq!(
            std::fs::metadata(&folder)
                .expect("meta")
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        transcript.record(
            Direction::Out,
            br#"{"method":"turn/started","params":{"threadId":"thr-1","turn":{"id":"t"}}}"#,
        );
        drop(transcript);
        assert_eq!(
            std::fs::read_to_string(&victim).expect("read"),
            "untouched\n"
        );
        let linked = dir.path().join("linked");
        std::os::unix::fs::symlink(&folder, &linked).expect("dir link");
        assert!(
            Transcript::open(&linked).is_err(),
            "a linked folder is refused"
        );
    }

    /// A response lands in the file of its request, whatever that file is called: the
    /// connection's, or a thread's hashed name (never hashed a second time).
    #[test]
    fn responses_follow_their_request_into_the_same_file() {
        let dir = tempfile::tempdir().expect("dir");
        let folder = dir.path().join("t");
        let mut transcript = Transcript::open(&folder).expect("open");
        transcript.record(
            Direction::In,
            br#"{"id":1,"method":"initialize","params":{}}"#,
        );
        transcript.record(Direction::Out, br#"{"id":1,"result":{"userAgent":"x"}}"#);
        transcript.record(
            Direction::In,
            br#"{"id":2,"method":"turn/start","params":{"threadId":"odd/id"}}"#,
        );
        transcript.record(Direction::Out, br#"{"id":2,"result":{"turn":{"id":"u"}}}"#);
        drop(transcript);
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .expect("read")
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                "connection.jsonl".to_string(),
                format!("{}.jsonl", safe_name("odd/id"))
            ]
        );
        let lines = |name: &str| {
            std::fs::read_to_string(folder.join(name))
                .expect("read")
                .lines()
                .count()
        };
        assert_eq!(lines("connection.jsonl"), 2);
        assert_eq!(lines(&format!("{}.jsonl", safe_name("odd/id"))), 2);
    }
    #[test]
    fn a_routed_request_is_filed_beside_the_client_s() {
        let dir = tempfile::tempdir().expect("dir");
        let mut transcript = Transcript::open(dir.path()).expect("open");
        let at = std::time::SystemTime::UNIX_EPOCH;
        transcript.record(
            Direction::In,
            br#"{"id":1,"method":"thread/start","params":{"developerInstructions":"theirs"}}"#,
        );
        transcript.record_routed(
            br#"{"id":1,"method":"thread/start","params":{"developerInstructions":"ours"}}"#,
            &["SOUL.md: moved".to_string()],
            at,
        );
        transcript.record(
            Direction::Out,
            br#"{"id":1,"result":{"thread":{"id":"thr"}}}"#,
        );
        transcript.record(
            Direction::In,
            br#"{"id":2,"method":"turn/start","params":{"threadId":"thr","input":[]}}"#,
        );
        transcript.record_routed(
            br#"{"id":2,"method":"turn/start","params":{"threadId":"thr","input":[{"type":"text","text":"x"}]}}"#,
            &[],
            at,
        );
        drop(transcript);
        let text = std::fs::read_to_string(dir.path().join("thr.jsonl")).expect("thread file");
        let entries: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("entry"))
            .collect();
        let directions: Vec<&str> = entries
            .iter()
            .map(|entry| entry["direction"].as_str().expect("direction"))
            .collect();
        assert_eq!(directions, ["in", "routed", "out", "in", "routed"]);
        assert_eq!(
            entries[0]["message"]["params"]["developerInstructions"],
            "theirs"
        );
        assert_eq!(
            entries[1]["message"]["params"]["developerInstructions"],
            "ours"
        );
        assert_eq!(entries[1]["notes"], json!(["SOUL.md: moved"]));
        assert!(!dir.path().join("connection.jsonl").exists());
    }
    #[test]
    fn a_routed_request_stays_beside_its_client_s_whatever_comes_between() {
        let dir = tempfile::tempdir().expect("dir");
        let mut transcript = Transcript::open(dir.path()).expect("open").routing(true);
        let at = std::time::SystemTime::UNIX_EPOCH;
        transcript.record(
            Direction::In,
            br#"{"id":7,"method":"turn/start","params":{"threadId":"thr","input":[]}}"#,
        );
        // Codex tells something of the thread before the routed request is recorded.
        transcript.record(
            Direction::Out,
            br#"{"method":"thread/status/changed","params":{"threadId":"thr"}}"#,
        );
        transcript.record_routed(
            br#"{"id":7,"method":"turn/start","params":{"threadId":"thr","input":[{"type":"text","text":"x"}]}}"#,
            &[],
            at,
        );
        // A request the router left as it was: its answer releases it.
        transcript.record(
            Direction::In,
            br#"{"id":8,"method":"turn/start","params":{"threadId":"thr","input":[]}}"#,
        );
        transcript.record(Direction::Out, br#"{"id":8,"result":{"turn":{"id":"u"}}}"#);
        drop(transcript);
        let text = std::fs::read_to_string(dir.path().join("thr.jsonl")).expect("thread file");
        let entries: Vec<(String, Value)> = text
            .lines()
            .map(|line| {
                let entry: Value = serde_json::from_str(line).expect("entry");
                (
                    entry["direction"].as_str().expect("direction").to_string(),
                    entry["message"]["id"].clone(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("out".to_string(), Value::Null),
                ("in".to_string(), json!(7)),
                ("routed".to_string(), json!(7)),
                ("in".to_string(), json!(8)),
                ("out".to_string(), json!(8)),
            ]
        );
    }
}
