//! What the proxy learns from the lines it forwards, off the forwarding path.
//!
//! The pumps hand copies of the few lines that matter (`initialize` and its answer, and every
//! `thread/start`, `thread/resume` and `turn/start`) to one [`Observer`] task through a bounded
//! channel; a full channel drops the copy (with one warning), never a forwarded line. The
//! observer records the client (OpenClaw's `clientInfo`) next to the Codex version, checks the
//! three param sets against the running Codex's own schema ([`crate::codex::client::schema`]),
//! and remembers the developer instructions and working folders that the offline captures need
//! to label and redact model requests ([`Known`], which the capture writer reads:
//! [`crate::app::capture::live`]).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::Direction;
use crate::app::capture::live::Known;
use crate::codex::client::schema::{ParamsSchemas, Problem};

/// Lines queued for the observer at most.
pub const OBSERVER_QUEUE: usize = 256;

/// Whether a forwarded line is worth a copy to the observer (a cheap byte search; the observer
/// parses and decides).
pub fn is_interesting(direction: Direction, line: &[u8]) -> bool {
    let has = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
    match direction {
        Direction::In => {
            has(b"\"initialize\"")
                || has(b"thread/start\"")
                || has(b"thread/resume\"")
                || has(b"turn/start\"")
                || has(b"turn/steer\"")
                || has(b"thread/inject_items\"")
        }
        Direction::Out => has(b"\"userAgent\""),
    }
}

/// Where the schema comes from, once it is there.
pub type SchemaSource = tokio::task::JoinHandle<Result<(ParamsSchemas, bool), String>>;

/// The observer's state.
pub struct Observer {
    schema: Option<SchemaSource>,
    schemas: Option<ParamsSchemas>,
    log: Option<PathBuf>,
    known: Arc<Mutex<Known>>,
    initialize_id: Option<Value>,
    versions_recorded: bool,
    user_agent: Option<String>,
    failed: bool,
}

impl Observer {
    /// `schema` is `None` when checks are off; `log` is the `conformance.jsonl` to append to.
    pub fn new(
        schema: Option<SchemaSource>,
        log: Option<PathBuf>,
        known: Arc<Mutex<Known>>,
    ) -> Self {
        Self {
            schema,
            schemas: None,
            log,
            known,
            initialize_id: None,
            versions_recorded: false,
            user_agent: None,
            failed: false,
        }
    }

    /// Take lines until the pumps are done.
    pub async fn run(mut self, mut lines: tokio::sync::mpsc::Receiver<(Direction, Vec<u8>)>) {
        while let Some((direction, line)) = lines.recv().await {
            let Ok(message) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            self.observe(direction, &message).await;
        }
    }

    async fn observe(&mut self, direction: Direction, message: &Value) {
        let method = message["method"].as_str().unwrap_or_default();
        match (direction, method) {
            (Direction::In, "initialize") => {
                let info = &message["params"]["clientInfo"];
                let client = format!(
                    "{} {}",
                    info["name"].as_str().unwrap_or("?"),
                    info["version"].as_str().unwrap_or("?")
                );
                self.initialize_id = message.get("id").cloned();
                if let Ok(mut known) = self.known.lock() {
                    known.client = Some(client);
                }
            }
            (Direction::Out, "") if message.get("id") == self.initialize_id.as_ref() => {
                self.user_agent = message["result"]["userAgent"].as_str().map(str::to_string);
                self.record_versions().await;
            }
            (Direction::In, "thread/inject_items") => {
                if let Ok(mut known) = self.known.lock() {
                    known.remember_injected(&message["params"]);
                }
            }
            (Direction::In, method) if ParamsSchemas::checks(method) => {
                let params = &message["params"];
                if let Ok(mut known) = self.known.lock() {
                    if method == "turn/start" {
                        known.remember_turn(params);
                    } else {
                        known.remember(params);
                    }
                }
                self.record_versions().await;
                self.check(method, message.get("id"), params);
            }
            _ => {}
        }
    }

    /// Wait for the schema (once) and note the versions in the log.
    async fn ensure_schema(&mut self) {
        let Some(source) = self.schema.take() else {
            return;
        };
        match source.await {
            Ok(Ok((schemas, generated))) => {
                tracing::debug!(
                    "conformance: Codex {} schema {}",
                    schemas.version,
                    if generated {
                        "generated"
                    } else {
                        "from the cache"
                    }
                );
                if let Ok(mut known) = self.known.lock() {
                    known.codex_version = Some(schemas.version.clone());
                }
                self.schemas = Some(schemas);
            }
            Ok(Err(message)) => {
                tracing::warn!("conformance checks are off: {message}");
            }
            Err(error) => tracing::warn!("conformance checks are off: {error}"),
        }
    }

    async fn record_versions(&mut self) {
        self.ensure_schema().await;
        if self.versions_recorded {
            return;
        }
        let (client, codex) = self.versions();
        if client.is_none() && self.user_agent.is_none() {
            return; // nothing known yet
        }
        self.versions_recorded = true;
        let entry = json!({
            "kind": "versions",
            "client": client,
            "codexVersion": codex,
            "userAgent": self.user_agent,
            "schemaChecks": self.schemas.is_some(),
        });
        tracing::info!(
            "client {} with Codex {}",
            client.as_deref().unwrap_or("?"),
            codex.as_deref().unwrap_or("?")
        );
        self.append(&entry);
    }

    fn versions(&self) -> (Option<String>, Option<String>) {
        self.known
            .lock()
            .map(|known| (known.client.clone(), known.codex_version.clone()))
            .unwrap_or_default()
    }

    fn check(&mut self, method: &str, id: Option<&Value>, params: &Value) {
        let Some(schemas) = &self.schemas else {
            return;
        };
        let problems: Vec<Problem> = schemas.check(method, params);
        let (client, codex) = self.versions();
        for problem in &problems {
            tracing::warn!(
                "conformance: {method} {} ({:?}): {} [client {}, Codex {}]",
                problem.field,
                problem.kind,
                problem.message,
                client.as_deref().unwrap_or("?"),
                codex.as_deref().unwrap_or("?")
            );
        }
        let thread = params["threadId"].as_str();
        let entry = json!({
            "kind": "check",
            "method": method,
            "id": id,
            "threadId": thread,
            "client": client,
            "codexVersion": codex,
            "problems": problems,
        });
        self.append(&entry);
    }

    fn append(&mut self, entry: &Value) {
        let Some(path) = &self.log else {
            return;
        };
        use std::os::unix::fs::OpenOptionsExt;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut file| writeln!(file, "{entry}"));
        if let Err(error) = written {
            if !self.failed {
                tracing::warn!("{}: {error}", path.display());
                self.failed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lines_that_matter_are_copied() {
        assert!(is_interesting(
            Direction::In,
            br#"{"id":1,"method":"thread/start","params":{}}"#
        ));
        assert!(is_interesting(
            Direction::In,
            br#"{"id":1,"method": "initialize","params":{}}"#
        ));
        assert!(!is_interesting(
            Direction::In,
            br#"{"id":1,"method":"model/list","params":{}}"#
        ));
        assert!(is_interesting(
            Direction::In,
            br#"{"id":1,"method":"thread/inject_items","params":{}}"#
        ));
        assert!(is_interesting(
            Direction::Out,
            br#"{"id":1,"result":{"userAgent":"codex/0.169.0"}}"#
        ));
        assert!(!is_interesting(
            Direction::Out,
            br#"{"method":"turn/started","params":{}}"#
        ));
    }
}
