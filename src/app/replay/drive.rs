//! Playing a recorded connection's client side through today's `clawbridge app-server` and a
//! real Codex.
//!
//! The replay starts `clawbridge app-server` as OpenClaw starts it (its Codex slot over stdio),
//! with a transcript and a capture of its own, Codex's model traffic sent through the capture
//! forwarder to the replay's stub, and a scratch `CODEX_HOME` and `HOME`; the child gets none of
//! the caller's environment but `PATH` and the locale. It then sends what the recorded client
//! sent, in the recorded order, each message only once what came before it in its file has come
//! again: the answers to the requests before it, and as many `turn/completed` of its thread.
//! Ids the recording holds are replaced by their live twins as they are learned (from each
//! answer, set beside its recorded twin), and the recorded folders by the replay's copies.
//! Codex's own requests (a dynamic tool call, an approval) are answered from the recording
//! (the next one of the same method in the same thread) or declined; nothing a recorded client
//! ran runs again.
//!
//! What the recorded client asked Codex to start (hooks, MCP servers, notifiers, providers and
//! base URLs in a thread's `config`) is taken out before it is sent and named in the notes: a
//! recording is data, and replaying one must not run its commands or reach its URLs.

use crate::codex::protocol::table::name as method;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::compare::{Folders, Pairing};
use super::recording::{RecordedConnection, Way};
use crate::error::Error;

/// How long the replay waits, at most, for the notifications the recording had before a
/// message (beyond the answers and completed turns it always waits for).
const SETTLE: Duration = Duration::from_secs(2);
/// Bytes of one line the replay reads from the app-server at most.
const MAX_LINE: usize = 64 * 1024 * 1024;
/// Server requests of one thread and method kept for answering.
const MAX_QUEUED_ANSWERS: usize = 100_000;

/// Methods a thread's `config` may not carry into a replay (prefixes of its keys): they start
/// commands or reach URLs.
const UNSAFE_CONFIG: [&str; 8] = [
    "hooks",
    "mcp_servers",
    "model_providers",
    "model_provider",
    "notify",
    "otel",
    "shell_environment_policy",
    "experimental_",
];

/// How one connection is replayed.
pub struct ConnectionRun<'a> {
    pub clawbridge: &'a Path,
    pub codex_bin: &'a Path,
    /// Where the child writes its transcript and captures.
    pub out: PathBuf,
    /// The scratch `HOME` and `CODEX_HOME`.
    pub home: PathBuf,
    pub codex_home: PathBuf,
    /// The stub's base URL (the capture forwarder's upstream).
    pub upstream: String,
    pub route_spec: bool,
    /// `-c key=value` for Codex, as the recorded one ran.
    pub session_flags: Vec<String>,
    /// Longest wait for what the recording says comes next.
    pub step_timeout: Duration,
}

/// What one connection's replay left.
#[derive(Debug, Default)]
pub struct Driven {
    /// Why the replay stopped early, if it did.
    pub stalled: Option<String>,
    pub notes: Vec<String>,
}

/// A recorded server request and the client's answer to it.
type Answered = (Value, Value);

struct Live<'a> {
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pairing: &'a mut Pairing,
    folders: &'a mut Folders,
    /// The live answers to the client's requests, by id (its JSON text); only a thread's
    /// opening keeps its answer (the book learns its thread from it), the rest are `null`.
    answers: HashMap<String, Value>,
    /// Codex's notifications so far, per live thread (`connection` for the rest) and method.
    seen: HashMap<(String, String), usize>,
    /// Recorded thread -> method -> the recorded server requests with their answers, in order.
    server: HashMap<(String, String), VecDeque<Answered>>,
    notes: Vec<String>,
    /// Recorded answers to the client's requests, by id.
    recorded_answers: HashMap<String, Value>,
    ended: bool,
}

/// Replay `connection`: start the child, send the client's side, answer Codex's requests.
pub async fn drive(
    connection: &RecordedConnection,
    run: &ConnectionRun<'_>,
    pairing: &mut Pairing,
    folders: &mut Folders,
    book: &std::sync::Arc<std::sync::Mutex<crate::traffic::replay_book::ReplayBook>>,
) -> Result<Driven, Error> {
    let mut child = start_child(run)?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::Read {
            path: run.clawbridge.to_path_buf(),
            source: std::io::Error::other("the app-server's stdio was not piped"),
        });
    };
    let reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut live = Live {
        stdin,
        lines: reader.lines(),
        pairing,
        folders,
        answers: HashMap::new(),
        seen: HashMap::new(),
        server: server_answers(connection),
        notes: Vec::new(),
        recorded_answers: recorded_answers(connection),
        ended: false,
    };
    let script = client_script(connection);
    // The requests sent whose recorded answer has not come again yet.
    let mut awaited: Vec<String> = Vec::new();
    let mut stalled = None;
    for (file, position) in script {
        let recorded_file = &connection.files[file];
        let message = &recorded_file.entries[position].message;
        let before = out_counts(&recorded_file.entries[..position]);
        awaited.retain(|id| !live.answers.contains_key(id));
        let wanted = &awaited;
        // What must come again (the answers, the turns completed), then, briefly, the rest of
        // what came before it in its file (a notification a new Codex no longer sends must not
        // hold the replay up; the comparison names it).
        let hard = |live: &Live<'_>| {
            wanted.iter().all(|id| live.answers.contains_key(id))
                && live.seen_in(&recorded_file.name, method::TURN_COMPLETED)
                    >= before.get(method::TURN_COMPLETED).copied().unwrap_or(0)
        };
        if let Err(why) = live.wait(run.step_timeout, hard).await {
            stalled = Some(format!(
                "before sending {} ({}): {why}",
                describe(message),
                recorded_file.name
            ));
            break;
        }
        let _ = live
            .wait(SETTLE, |live| {
                before
                    .iter()
                    .all(|(method, count)| live.seen_in(&recorded_file.name, method) >= *count)
            })
            .await;
        let outgoing = live.outgoing(message);
        if let Some(id) = message
            .get("id")
            .filter(|_| message.get("method").is_some())
            .map(Value::to_string)
            .filter(|id| live.recorded_answers.contains_key(id))
        {
            awaited.push(id);
        }
        if let Err(error) = live.send(&outgoing).await {
            stalled = Some(format!("sending {}: {error}", describe(message)));
            break;
        }
        live.bind_opening(message, run.step_timeout, book).await;
    }
    if stalled.is_none() {
        // Everything the recording answered, and every turn it completed, comes again.
        awaited.retain(|id| !live.answers.contains_key(id));
        let wanted = &awaited;
        let totals = turn_totals(connection);
        if let Err(why) = live
            .wait(run.step_timeout, |live| {
                wanted.iter().all(|id| live.answers.contains_key(id))
                    && totals.iter().all(|(thread, count)| {
                        live.seen_in(thread, method::TURN_COMPLETED) >= *count
                    })
            })
            .await
        {
            stalled = Some(format!("at the end of the recording: {why}"));
        }
    }
    let notes = std::mem::take(&mut live.notes);
    // Stdin closed: the slot stops Codex and leaves.
    drop(live);
    let ended = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
    if !matches!(ended, Ok(Ok(_))) {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    Ok(Driven { stalled, notes })
}

impl Live<'_> {
    /// After a thread's opening (`thread/start`, `thread/resume`, `thread/fork`) was sent: its
    /// answer names the live thread, and the book learns which recorded thread that replays.
    async fn bind_opening(
        &mut self,
        message: &Value,
        timeout: Duration,
        book: &std::sync::Arc<std::sync::Mutex<crate::traffic::replay_book::ReplayBook>>,
    ) {
        let opening = [
            method::THREAD_START,
            method::THREAD_RESUME,
            method::THREAD_FORK,
        ];
        if !opening.iter().any(|name| message["method"] == *name) {
            return;
        }
        let id = message["id"].to_string();
        if self
            .wait(timeout, |live| live.answers.contains_key(&id))
            .await
            .is_err()
        {
            return;
        }
        if let (Some(recorded), Some(answer)) =
            (self.recorded_answers.get(&id), self.answers.get(&id))
        {
            if let (Some(recorded), Some(current)) = (
                recorded["result"]["thread"]["id"].as_str(),
                answer["result"]["thread"]["id"].as_str(),
            ) {
                crate::support::sync::lock(book).bind(current, recorded);
            }
        }
    }

    /// Read until `done` holds, or `timeout` passes with it not holding (the reason).
    async fn wait(
        &mut self,
        timeout: Duration,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(self) {
            if self.ended {
                return Err("the app-server closed its output".into());
            }
            match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Err(_) => {
                    return Err(format!(
                        "nothing more came within {} s of what the recording has next",
                        timeout.as_secs()
                    ))
                }
                Ok(Err(error)) => return Err(format!("reading the app-server: {error}")),
                Ok(Ok(None)) => self.ended = true,
                Ok(Ok(Some(line))) => self.on_line(&line).await,
            }
        }
        Ok(())
    }

    /// Codex's messages of `method` seen so far in the recorded file `file` (its live thread).
    fn seen_in(&self, file: &str, method: &str) -> usize {
        let live = if file == "connection" {
            Some("connection")
        } else {
            self.pairing.live(file)
        };
        live.and_then(|live| self.seen.get(&(live.to_string(), method.to_string())))
            .copied()
            .unwrap_or(0)
    }

    /// Count a notification of Codex's under its thread (or the connection) and method.
    fn count(&mut self, message: &Value) {
        let params = &message["params"];
        let thread = params["threadId"]
            .as_str()
            .or_else(|| params["thread"]["id"].as_str())
            .or_else(|| message["result"]["thread"]["id"].as_str())
            .unwrap_or("connection");
        let Some(method) = message["method"].as_str() else {
            return;
        };
        if self.seen.len() < MAX_QUEUED_ANSWERS {
            *self
                .seen
                .entry((thread.to_string(), method.to_string()))
                .or_default() += 1;
        }
    }

    async fn on_line(&mut self, line: &str) {
        if line.len() > MAX_LINE {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let has_id = message.get("id").is_some_and(|id| !id.is_null());
        if !(has_id && message.get("method").is_some()) {
            self.count(&message);
        }
        match (has_id, message.get("method").and_then(Value::as_str)) {
            (true, Some(method)) => {
                let method = method.to_string();
                self.answer_server_request(&message, &method).await;
            }
            (true, None) => {
                let id = message["id"].to_string();
                if let Some(recorded) = self.recorded_answers.get(&id) {
                    self.pairing.learn(recorded, &message);
                    learn_folders(self.folders, recorded, &message);
                }
                let opened = message["result"]["thread"]["id"].is_string();
                self.answers
                    .insert(id, if opened { message } else { Value::Null });
            }
            _ => {}
        }
    }

    /// Codex asks the client: the recorded answer to the same request of the same thread, or a
    /// refusal (declined).
    async fn answer_server_request(&mut self, request: &Value, method: &str) {
        let thread = request["params"]["threadId"]
            .as_str()
            .and_then(|live| self.pairing.recorded(live))
            .unwrap_or("connection")
            .to_string();
        let recorded = self
            .server
            .get_mut(&(thread.clone(), method.to_string()))
            .and_then(VecDeque::pop_front);
        let answer = match recorded {
            Some((recorded_request, recorded_answer)) => {
                self.pairing.learn(&recorded_request, request);
                let mut answer = self.to_live(&recorded_answer);
                answer["id"] = request["id"].clone();
                answer
            }
            None => {
                self.notes.push(format!(
                    "Codex asked `{method}` (thread {thread}), which the recording did not answer: declined"
                ));
                json!({"id": request["id"], "error": {"code": -32000,
                    "message": "clawbridge replay: the recording holds no answer to this request; declined"}})
            }
        };
        let _ = self.send(&answer).await;
    }

    /// A recorded message as the live session must see it: ids and folders made live.
    fn to_live(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.folders.to_live(&self.pairing.to_live(text))),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.to_live(item)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| (self.pairing.to_live(key), self.to_live(value)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// What goes out for a recorded client message: made live, and a thread's `config` kept
    /// from starting anything.
    fn outgoing(&mut self, message: &Value) -> Value {
        let (outgoing, note) = tame(&self.to_live(message));
        if let Some(note) = note {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
        outgoing
    }

    async fn send(&mut self, message: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await
    }
}

/// A client message with what its `config` would start taken out (hooks, MCP servers,
/// notifiers, providers, base URLs), and the note saying what was.
pub fn tame(message: &Value) -> (Value, Option<String>) {
    let mut tamed = message.clone();
    let Some(config) = tamed
        .get_mut("params")
        .and_then(|params| params.get_mut("config"))
        .and_then(Value::as_object_mut)
    else {
        return (tamed, None);
    };
    let unsafe_keys: Vec<String> = config
        .keys()
        .filter(|key| unsafe_config_key(key))
        .cloned()
        .collect();
    for key in &unsafe_keys {
        config.remove(key);
    }
    let note = (!unsafe_keys.is_empty()).then(|| {
        format!(
            "not sent to Codex from the recorded `{}` config (they start commands or reach URLs): {}",
            message["method"].as_str().unwrap_or("?"),
            unsafe_keys.join(", ")
        )
    });
    (tamed, note)
}

fn unsafe_config_key(key: &str) -> bool {
    UNSAFE_CONFIG.iter().any(|prefix| key.starts_with(prefix))
        || key.contains("base_url")
        || key.contains("command")
}

/// The `-c key=value` flags the recorded Codex ran with (the `sessionFlags` layer of a recorded
/// `config/read` answer), scalars and lists of them only, none that starts a command or names a
/// URL: the replayed Codex runs with the same.
pub fn session_flags(connection: &RecordedConnection) -> Vec<String> {
    let mut flags = Vec::new();
    for entry in connection.files.iter().flat_map(|file| &file.entries) {
        for layer in entry.message["result"]["layers"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if layer["name"]["type"] != "sessionFlags" {
                continue;
            }
            for (key, value) in layer["config"].as_object().into_iter().flatten() {
                let plain =
                    |value: &Value| value.is_string() || value.is_boolean() || value.is_number();
                let simple = plain(value)
                    || value
                        .as_array()
                        .is_some_and(|items| items.iter().all(plain));
                let safe_key = key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
                if simple && safe_key && !unsafe_config_key(key) {
                    let flag = format!("{key}={value}");
                    if !flags.contains(&flag) {
                        flags.push(flag);
                    }
                }
            }
        }
    }
    flags
}

/// Codex's home, which `initialize` names (the recorded one, and the replay's scratch home):
/// paired so the comparison reads the replay's as the recording's. (The workspaces are paired
/// when they are copied.)
fn learn_folders(folders: &mut Folders, recorded: &Value, live: &Value) {
    if let (Some(ours), Some(theirs)) = (
        recorded["result"]["codexHome"].as_str(),
        live["result"]["codexHome"].as_str(),
    ) {
        folders.add(ours, theirs);
    }
}

/// Each recorded thread's `turn/completed` count: all must come again before the replay ends.
fn turn_totals(connection: &RecordedConnection) -> Vec<(String, usize)> {
    connection
        .files
        .iter()
        .filter(|file| file.name != "connection")
        .map(|file| {
            (
                file.name.clone(),
                out_counts(&file.entries)
                    .get(method::TURN_COMPLETED)
                    .copied()
                    .unwrap_or(0),
            )
        })
        .collect()
}

/// Codex's notifications in `entries`, by method (answers are waited for by id).
fn out_counts(entries: &[super::recording::Entry]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for entry in entries.iter().filter(|entry| entry.way == Way::Out) {
        let message = &entry.message;
        let is_request = message.get("id").is_some_and(|id| !id.is_null());
        if let (false, Some(method)) = (is_request, message["method"].as_str()) {
            *counts.entry(method.to_string()).or_default() += 1;
        }
    }
    counts
}

/// The recorded answers to the client's requests, by id.
fn recorded_answers(connection: &RecordedConnection) -> HashMap<String, Value> {
    let mut requests = std::collections::HashSet::new();
    let mut answers = HashMap::new();
    for file in &connection.files {
        for entry in &file.entries {
            let message = &entry.message;
            let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
                continue;
            };
            match (entry.way, message.get("method").is_some()) {
                (Way::In, true) => {
                    requests.insert(id.to_string());
                }
                (Way::Out, false) if requests.contains(&id.to_string()) => {
                    answers.insert(id.to_string(), message.clone());
                }
                _ => {}
            }
        }
    }
    answers
}

/// Codex's requests to the client and the client's answers, per recorded thread and method.
fn server_answers(
    connection: &RecordedConnection,
) -> HashMap<(String, String), VecDeque<Answered>> {
    let mut book: HashMap<(String, String), VecDeque<Answered>> = HashMap::new();
    for file in &connection.files {
        let mut asked: HashMap<String, Value> = HashMap::new();
        for entry in &file.entries {
            let message = &entry.message;
            let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
                continue;
            };
            match (entry.way, message.get("method").and_then(Value::as_str)) {
                (Way::Out, Some(_)) => {
                    asked.insert(id.to_string(), message.clone());
                }
                (Way::In, None) => {
                    if let Some(request) = asked.remove(&id.to_string()) {
                        let method = request["method"].as_str().unwrap_or_default().to_string();
                        let queue = book.entry((file.name.clone(), method)).or_default();
                        if queue.len() < MAX_QUEUED_ANSWERS {
                            queue.push_back((request, message.clone()));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    book
}

/// The client's messages to send, in the recorded order: requests by their ids (OpenClaw
/// numbers them as it sends), each notification after the request before it in its file.
/// Answers to Codex's requests are not in it: they answer Codex's live requests.
fn client_script(connection: &RecordedConnection) -> Vec<(usize, usize)> {
    // (the id before it, its place after that id, its file) -> (its file, its place there)
    type Keyed = ((f64, usize, usize), (usize, usize));
    let mut keyed: Vec<Keyed> = Vec::new();
    for (file_index, file) in connection.files.iter().enumerate() {
        let mut last = 0.0_f64;
        let mut after = 0usize;
        for (position, entry) in file.entries.iter().enumerate() {
            if entry.way != Way::In || entry.message.get("method").is_none() {
                continue;
            }
            match entry.message.get("id").and_then(Value::as_f64) {
                Some(id) => {
                    last = id;
                    after = 0;
                }
                None => after += 1,
            }
            keyed.push(((last, after, file_index), (file_index, position)));
        }
    }
    keyed.sort_by(|a, b| {
        a.0 .0
            .total_cmp(&b.0 .0)
            .then(a.0 .1.cmp(&b.0 .1))
            .then(a.0 .2.cmp(&b.0 .2))
            .then(a.1 .1.cmp(&b.1 .1))
    });
    keyed.into_iter().map(|(_, at)| at).collect()
}

/// `thread/start` (id 4), for the notes.
fn describe(message: &Value) -> String {
    match (message["method"].as_str(), message.get("id")) {
        (Some(method), Some(id)) => format!("`{method}` (id {id})"),
        (Some(method), None) => format!("`{method}`"),
        _ => "an answer".into(),
    }
}

fn start_child(run: &ConnectionRun<'_>) -> Result<tokio::process::Child, Error> {
    let log =
        std::fs::File::create(run.out.join("app-server.log")).map_err(|source| Error::Write {
            path: run.out.join("app-server.log"),
            source,
        })?;
    let mut command = tokio::process::Command::new(run.clawbridge);
    command
        .arg("app-server")
        .arg("--codex-bin")
        .arg(run.codex_bin)
        .arg("--transcript")
        .arg(run.out.join("transcript"))
        .arg("--capture")
        .arg(run.out.join("transcript").join("model-requests"))
        .arg("--upstream")
        .arg(&run.upstream)
        .arg("--no-websocket")
        .arg("--no-check");
    if run.route_spec {
        command.args(["--route", "spec"]);
    }
    for flag in &run.session_flags {
        command.arg("-c").arg(flag);
    }
    command.env_clear();
    for name in ["PATH", "LANG", "LC_ALL", "TZ", "TERM"] {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
        .env("HOME", &run.home)
        .env("CODEX_HOME", &run.codex_home)
        .current_dir(&run.home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::from(log))
        .kill_on_drop(true);
    command.spawn().map_err(|source| Error::Read {
        path: run.clawbridge.to_path_buf(),
        source,
    })
}
