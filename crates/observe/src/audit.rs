//! `app-server --audit`: each turn a client starts, audited as it goes.
//!
//! `clawbridge audit DIR` reads a finished transcript; an operator who pairs OpenClaw with Codex
//! through clawbridge wants the same answer while the session runs: for the turn just started,
//! where each workspace file went (thread developer instructions, collaboration instructions,
//! `additionalContext`, the turn's input, nowhere) against where the spec puts it. The observer
//! hands this module every message it takes (off the forwarding path); each `turn/start` is
//! audited with the thread's latest `thread/start` or `thread/resume` params by the
//! [`TurnAuditor`] the face hands in (the app layer's `audit_live_turn`: the workspace read at
//! the thread's `cwd`, confined and capped as everywhere, routed as the spec says; on a blocking
//! thread). The observation wing knows nothing of workspaces or routing itself, so it stands
//! below the translation. The turn's table goes to the console's
//! notices (stderr), the rows to `DIR/audit.jsonl` with a transcript.
//!
//! Bounded: at most [`MAX_STARTING`] `thread/start` requests wait for their answer and
//! [`MAX_THREADS`] threads are remembered (the least recently used is forgotten first).

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{json, Value};

use clawbridge_codex::protocol::observed::Observed;
use clawbridge_codex::protocol::table::name as method;
use clawbridge_codex::protocol::wire::Direction;
use clawbridge_support::console::Console;

/// `thread/start` requests remembered until their answer names the thread.
pub const MAX_STARTING: usize = 256;
/// Threads whose opening params are remembered.
pub const MAX_THREADS: usize = 1024;

/// What audits one live turn: the thread's `cwd`, its latest start or resume params, the
/// turn's params and its number in the thread give the audit (or why there is none).
pub type TurnAuditor = std::sync::Arc<
    dyn Fn(&str, &Value, &Value, usize) -> Result<AuditedTurn, String> + Send + Sync,
>;

/// One turn audited: its table as `clawbridge audit` prints it, and its rows for `audit.jsonl`.
pub struct AuditedTurn {
    pub text: String,
    pub rows: Value,
}

/// One remembered thread: its latest start or resume params, turns audited, last use.
struct Opened {
    params: Value,
    turns: usize,
    used: u64,
}

/// The live audit's state (owned by the observer task).
pub struct LiveAudit {
    /// `DIR/audit.jsonl` with a transcript.
    log: Option<PathBuf>,
    /// Where each turn's table is told.
    console: Console,
    /// What audits a turn.
    auditor: TurnAuditor,
    /// `thread/start` params by (connection, request id), until the answer.
    starting: HashMap<(usize, String), (Value, u64)>,
    threads: HashMap<String, Opened>,
    clock: u64,
    failed: bool,
}

impl LiveAudit {
    /// An audit by `auditor` that tells each turn's table to `console` and appends its rows to
    /// `log`.
    pub fn new(log: Option<PathBuf>, console: Console, auditor: TurnAuditor) -> Self {
        Self {
            log,
            console,
            auditor,
            starting: HashMap::new(),
            threads: HashMap::new(),
            clock: 0,
            failed: false,
        }
    }

    /// Take one message of connection `stream`; a `turn/start` is audited (and told) here.
    pub async fn observe(&mut self, stream: usize, direction: Direction, message: &Value) {
        self.clock += 1;
        let observed = Observed::of(message);
        let params = observed.params;
        let id = observed.id.map(Value::to_string);
        match (direction, observed.method) {
            (Direction::In, Some(method::THREAD_START)) => {
                if let Some(id) = id {
                    if self.starting.len() >= MAX_STARTING {
                        forget_oldest(&mut self.starting, |(_, used)| *used);
                    }
                    self.starting
                        .insert((stream, id), (params.clone(), self.clock));
                }
            }
            (Direction::In, Some(method::THREAD_RESUME)) => {
                if let Some(thread) = observed.thread_id() {
                    self.opened(thread.to_string(), params.clone());
                }
            }
            (Direction::Out, None) => {
                let Some(id) = id else { return };
                if let Some((params, _)) = self.starting.remove(&(stream, id)) {
                    if let Some(thread) = observed.opened_thread() {
                        self.opened(thread.to_string(), params);
                    }
                }
            }
            (Direction::In, Some(method::TURN_START)) => self.turn(&observed).await,
            _ => {}
        }
    }

    fn opened(&mut self, thread: String, params: Value) {
        if !self.threads.contains_key(&thread) && self.threads.len() >= MAX_THREADS {
            forget_oldest(&mut self.threads, |opened| opened.used);
        }
        let turns = self.threads.get(&thread).map_or(0, |opened| opened.turns);
        self.threads.insert(
            thread,
            Opened {
                params,
                turns,
                used: self.clock,
            },
        );
    }

    async fn turn(&mut self, observed: &Observed<'_>) {
        let params = observed.params;
        let Some(thread) = observed.thread_id() else {
            return;
        };
        let clock = self.clock;
        // A turn on a thread not seen opening (started before --audit's process, or named at
        // random) is remembered too, within the same bound.
        if !self.threads.contains_key(thread) && self.threads.len() >= MAX_THREADS {
            forget_oldest(&mut self.threads, |opened| opened.used);
        }
        let opened = self.threads.entry(thread.to_string()).or_insert(Opened {
            params: Value::Null,
            turns: 0,
            used: clock,
        });
        opened.turns += 1;
        opened.used = clock;
        let number = opened.turns;
        let Some(cwd) = observed
            .cwd()
            .or_else(|| Observed::params_of(&opened.params).cwd())
            .map(str::to_string)
        else {
            tracing::info!(
                "audit: thread {} turn {number}: no cwd in its params (not audited)",
                clawbridge_support::text::printable(thread)
            );
            return;
        };
        let (opened, turn) = (opened.params.clone(), params.clone());
        let workspace = cwd.clone();
        let auditor = std::sync::Arc::clone(&self.auditor);
        let audited =
            tokio::task::spawn_blocking(move || auditor(&workspace, &opened, &turn, number)).await;
        let audited = match audited.map_err(|error| error.to_string()) {
            Ok(Ok(audited)) => audited,
            Ok(Err(error)) | Err(error) => return self.not_audited(thread, number, &error),
        };
        // What the operator asked to see, as `clawbridge audit` prints it.
        self.console.note(&format!(
            "clawbridge audit: thread {} (workspace {})",
            clawbridge_support::text::printable(thread),
            clawbridge_support::text::printable(&cwd),
        ));
        for line in audited.text.lines() {
            self.console.note(line);
        }
        let Some(log) = &self.log else { return };
        let entry = json!({"kind": "turn", "thread": thread, "cwd": cwd, "audit": audited.rows});
        if let Err(error) = clawbridge_support::jsonl::append_line(log, &entry) {
            if !self.failed {
                tracing::warn!("{}: {error}", log.display());
                self.failed = true;
            }
        }
    }
}

impl LiveAudit {
    /// A turn that could not be audited (no workspace at its cwd, a failed worker): a warning
    /// naming it, what the client sent made printable.
    fn not_audited(&self, thread: &str, number: usize, why: &str) {
        tracing::warn!(
            "audit: thread {} turn {number}: {}",
            clawbridge_support::text::printable(thread),
            clawbridge_support::text::printable(why)
        );
    }
}

/// Drop the entry of `map` least recently used.
fn forget_oldest<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    used: impl Fn(&V) -> u64,
) {
    if let Some(oldest) = map
        .iter()
        .min_by_key(|(_, value)| used(value))
        .map(|(key, _)| key.clone())
    {
        map.remove(&oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An auditor that audits nothing (these tests look at what is remembered).
    fn none() -> TurnAuditor {
        std::sync::Arc::new(|_: &str, _: &Value, _: &Value, _: usize| Err("not here".to_string()))
    }

    #[tokio::test]
    async fn remembered_threads_and_starts_are_bounded() {
        let mut audit = LiveAudit::new(None, Console::quiet(), none());
        for index in 0..MAX_THREADS + 10 {
            let resume = json!({"id": index, "method": "thread/resume", "params": {"threadId": format!("t{index}")}});
            audit.observe(0, Direction::In, &resume).await;
        }
        assert_eq!(audit.threads.len(), MAX_THREADS);
        assert!(
            !audit.threads.contains_key("t0"),
            "the least recently used went first"
        );
        for index in 0..MAX_STARTING + 10 {
            let start = json!({"id": index, "method": "thread/start", "params": {}});
            audit.observe(0, Direction::In, &start).await;
        }
        assert_eq!(audit.starting.len(), MAX_STARTING);
        // Turns on threads never seen opening stay within the bound too.
        for index in 0..MAX_THREADS + 10 {
            let turn = json!({"id": index, "method": "turn/start", "params": {"threadId": format!("u{index}")}});
            audit.observe(0, Direction::In, &turn).await;
        }
        assert_eq!(audit.threads.len(), MAX_THREADS);
    }

    #[tokio::test]
    async fn a_thread_start_is_known_by_its_answer() {
        let mut audit = LiveAudit::new(None, Console::quiet(), none());
        let start = json!({"id": "s", "method": "thread/start", "params": {"cwd": "/nowhere"}});
        audit.observe(3, Direction::In, &start).await;
        // Another connection's answer with the same id names no thread of this one.
        let other = json!({"id": "s", "result": {"thread": {"id": "other"}}});
        audit.observe(4, Direction::Out, &other).await;
        assert!(audit.threads.is_empty());
        let answer = json!({"id": "s", "result": {"thread": {"id": "thr"}}});
        audit.observe(3, Direction::Out, &answer).await;
        assert_eq!(audit.threads["thr"].params["cwd"], "/nowhere");
        assert!(audit.starting.is_empty());
    }
}
