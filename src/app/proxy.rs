//! `clawbridge app-server`: a transparent stdio proxy for OpenClaw's Codex slot
//! (`plugins.entries.codex.config.appServer.command`).
//!
//! It starts the real `codex app-server` with the arguments OpenClaw passes
//! (`[-c key=value]... app-server --listen stdio://`) and forwards every line both ways, byte for
//! byte, whatever the method: the proxy never parses what it forwards, so ids keep their JSON type
//! and a method it does not know passes like any other. It sends nothing of its own.
//!
//! With `--transcript DIR` each message is also written, as JSON lines
//! (`{"direction": "in"|"out", "message": ...}`), into one file per Codex thread
//! (`<thread-id>.jsonl`; messages of no thread go to `connection.jsonl`), with secrets redacted
//! (auth tokens, API keys, passwords); the folder it creates is 0700 and the files 0600, and file
//! names are the thread ids reduced to `[A-Za-z0-9_-]`, so nothing lands outside DIR. The transcript is best effort: a write failure is logged
//! once and forwarding goes on.
//!
//! It ends when Codex exits (with Codex's exit code) or when its stdin closes (Codex's stdin is
//! closed, Codex is given 5 s, then killed); on SIGTERM or SIGINT it kills Codex first.
//! Bounded: a line longer than [`MAX_TRANSCRIPT_LINE`] is forwarded but not transcribed, at most
//! [`MAX_OPEN_FILES`] transcript files are open at once, at most [`MAX_PENDING`] request ids are
//! remembered to file their responses.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::codex::client::process::{find_codex_binary, resolve_native_binary};

/// Longest line the transcript records (longer lines are forwarded untouched).
pub const MAX_TRANSCRIPT_LINE: usize = 64 * 1024 * 1024;
/// Transcript files open at once (the least recently used is closed, and reopened to append).
pub const MAX_OPEN_FILES: usize = 64;
/// Request ids remembered so a response lands in its request's thread file.
pub const MAX_PENDING: usize = 4096;

/// What `clawbridge app-server` was given.
#[derive(Clone, Debug, Default)]
pub struct ProxySettings {
    pub codex_bin: Option<PathBuf>,
    pub transcript: Option<PathBuf>,
    /// What to pass to Codex (OpenClaw's `-c ... app-server --listen stdio://`).
    pub args: Vec<OsString>,
}

/// Why the proxy could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("{0}")]
    NoCodex(String),
    #[error("cannot start {binary}: {source}")]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    #[error("transcript folder {path}: {source}")]
    Transcript {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The arguments Codex gets: OpenClaw's, with `app-server` added when they do not name it.
pub fn codex_args(args: &[OsString]) -> Vec<OsString> {
    let mut args = args.to_vec();
    if !args.iter().any(|arg| arg == "app-server") {
        args.push("app-server".into());
    }
    args
}

/// Run the proxy until Codex exits or stdin closes; returns the exit code to leave with.
pub async fn run_proxy(settings: ProxySettings) -> Result<i32, ProxyError> {
    let found = find_codex_binary(
        settings.codex_bin.as_deref(),
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    )
    .map_err(ProxyError::NoCodex)?;
    let binary = resolve_native_binary(&found.path);
    let transcript = match &settings.transcript {
        Some(dir) => Some(Transcript::open(dir)?),
        None => None,
    };
    let transcript = std::sync::Arc::new(std::sync::Mutex::new(transcript));
    let mut child = tokio::process::Command::new(&binary)
        .args(codex_args(&settings.args))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ProxyError::Spawn {
            binary: binary.display().to_string(),
            source,
        })?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(ProxyError::Spawn {
            binary: binary.display().to_string(),
            source: std::io::Error::other("no pipes to the child"),
        });
    };
    let inbound = tokio::spawn(pump(
        tokio::io::stdin(),
        child_in,
        Direction::In,
        std::sync::Arc::clone(&transcript),
    ));
    let outbound = tokio::spawn(pump(
        child_out,
        tokio::io::stdout(),
        Direction::Out,
        std::sync::Arc::clone(&transcript),
    ));
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| ProxyError::Spawn {
        binary: "a SIGTERM handler".into(),
        source,
    })?;
    let code = tokio::select! {
        status = child.wait() => {
            // Whatever Codex printed last still reaches the client.
            let _ = tokio::time::timeout(Duration::from_secs(5), outbound).await;
            status.ok().and_then(|status| status.code()).unwrap_or(1)
        }
        _ = inbound => {
            // stdin closed: the pump dropped Codex's stdin; give it a moment to exit on its own.
            match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(Ok(status)) => {
                    let _ = tokio::time::timeout(Duration::from_secs(5), outbound).await;
                    status.code().unwrap_or(0)
                }
                _ => {
                    let _ = child.kill().await;
                    0
                }
            }
        }
        _ = terminate.recv() => {
            let _ = child.kill().await;
            143
        }
        _ = tokio::signal::ctrl_c() => {
            let _ = child.kill().await;
            130
        }
    };
    Ok(code)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// From the client (OpenClaw) to Codex.
    In,
    /// From Codex to the client.
    Out,
}

/// Copy `from` to `to` line by line, unchanged, recording each complete line.
async fn pump(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    direction: Direction,
    transcript: std::sync::Arc<std::sync::Mutex<Option<Transcript>>>,
) {
    let mut reader = BufReader::with_capacity(256 * 1024, from);
    let mut line: Vec<u8> = Vec::new();
    let mut oversized = false;
    loop {
        let (consumed, ended_line) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buffer) => {
                let (chunk, ended) = match memchr::memchr(b'\n', buffer) {
                    Some(at) => (&buffer[..=at], true),
                    None => (buffer, false),
                };
                if to.write_all(chunk).await.is_err() {
                    return;
                }
                if !oversized {
                    if line.len() + chunk.len() > MAX_TRANSCRIPT_LINE {
                        oversized = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                (chunk.len(), ended)
            }
        };
        reader.consume(consumed);
        if ended_line {
            if to.flush().await.is_err() {
                return;
            }
            if !oversized {
                if let Ok(mut guard) = transcript.lock() {
                    if let Some(transcript) = guard.as_mut() {
                        transcript.record(direction, &line);
                    }
                }
            }
            line.clear();
            oversized = false;
        }
    }
    let _ = to.flush().await;
    // Dropping `to` closes Codex's stdin (inbound) or our stdout (outbound).
}

/// The per-thread JSON-lines transcript.
#[derive(Debug)]
struct Transcript {
    dir: PathBuf,
    files: HashMap<String, std::fs::File>,
    /// Open files, least recently used first.
    order: VecDeque<String>,
    /// Request id (its JSON text) -> the thread file its response belongs in.
    pending: HashMap<String, String>,
    pending_order: VecDeque<String>,
    failed: bool,
}

impl Transcript {
    fn open(dir: &Path) -> Result<Transcript, ProxyError> {
        // Private: a transcript holds the user's conversation.
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| ProxyError::Transcript {
                path: dir.display().to_string(),
                source,
            })?;
        Ok(Transcript {
            dir: dir.to_path_buf(),
            files: HashMap::new(),
            order: VecDeque::new(),
            pending: HashMap::new(),
            pending_order: VecDeque::new(),
            failed: false,
        })
    }

    fn record(&mut self, direction: Direction, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return;
        }
        let mut message: Value =
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
        let id = message.get("id").map(Value::to_string);
        let is_request = message.get("method").is_some();
        let thread = thread_of(&message).or_else(|| {
            // A response lands where its request did.
            (!is_request)
                .then(|| id.as_ref().and_then(|id| self.pending.remove(id)))
                .flatten()
        });
        let file = thread.clone().unwrap_or_else(|| "connection".to_string());
        if let (true, Some(id)) = (is_request, id) {
            if self.pending.len() >= MAX_PENDING {
                if let Some(old) = self.pending_order.pop_front() {
                    self.pending.remove(&old);
                }
            }
            self.pending.insert(id.clone(), file.clone());
            self.pending_order.push_back(id);
        }
        redact(&mut message);
        let entry = serde_json::json!({
            "direction": match direction { Direction::In => "in", Direction::Out => "out" },
            "message": message,
        });
        let written = self
            .file(&file)
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

    fn file(&mut self, name: &str) -> std::io::Result<&mut std::fs::File> {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(128)
            .collect();
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

/// The thread a message names: `params.threadId`, `params.thread.id`, `result.thread.id`.
fn thread_of(message: &Value) -> Option<String> {
    let text = |value: &Value| value.as_str().map(str::to_string);
    text(&message["params"]["threadId"])
        .or_else(|| text(&message["params"]["thread"]["id"]))
        .or_else(|| text(&message["result"]["thread"]["id"]))
        .or_else(|| text(&message["params"]["conversationId"]))
}

/// Keys whose values are secrets (compared lowercased, `_` and `-` removed).
const SECRET_KEYS: [&str; 10] = [
    "token",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "apikey",
    "openaiapikey",
    "authorization",
    "password",
    "secret",
    "clientsecret",
];

/// Replace secret values with `<redacted>`: values under secret-looking keys (and any key ending
/// in `token`, `apikey` or `secret`), bearer credentials and `sk-` API keys anywhere.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let folded: String = key
                    .chars()
                    .filter(|c| *c != '_' && *c != '-')
                    .flat_map(char::to_lowercase)
                    .collect();
                let secret = SECRET_KEYS.contains(&folded.as_str())
                    || folded.ends_with("token")
                    || folded.ends_with("apikey")
                    || folded.ends_with("secret");
                if secret && !item.is_null() && !item.is_object() && !item.is_array() {
                    *item = Value::from("<redacted>");
                } else {
                    redact(item);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(text)
            if text.starts_with("sk-")
                || text.starts_with("Bearer ")
                || text.starts_with("bearer ") =>
        {
            *text = "<redacted>".to_string();
        }
        _ => {}
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

    #[test]
    fn app_server_is_added_only_when_missing() {
        let given: Vec<OsString> = ["-c", "x=1", "app-server", "--listen", "stdio://"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(codex_args(&given), given);
        assert_eq!(codex_args(&[]), vec![OsString::from("app-server")]);
    }
}
