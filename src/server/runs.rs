//! The run registry's entries: each run's state and its event log (serialized once, capped in
//! bytes, replayed to every subscriber), and the tool calls waiting for a client's answer.

use crate::app::events::RunEvent;
use crate::codex::client::hub::CodexHub;
use crate::support::sync::lock;
use serde_json::Value;
use std::sync::Arc;
use std::sync::Mutex;
use tokio::sync::{oneshot, watch};

/// One run's state and event log.
pub(super) struct RunState {
    pub(super) run_id: String,
    /// The client that started it: only it (or an operator) sees and acts on it.
    pub(super) owner: String,
    pub(super) session_key: String,
    pub(super) thread_id: Mutex<Option<String>>,
    pub(super) turn_id: Mutex<Option<String>>,
    pub(super) events: Mutex<EventLog>,
    /// (events ever logged, ended).
    pub(super) progress: watch::Sender<(usize, bool)>,
    /// When the run ended (finished runs are forgotten after `--finished-run-ttl`).
    pub(super) ended_at: Mutex<Option<std::time::Instant>>,
    /// The app-server incarnation the run was leased (interrupts go there and nowhere else).
    pub(super) hub: Mutex<Option<Arc<CodexHub>>>,
    /// Its bootstrap files' counts, once translated (for `bridge.status`).
    pub(super) bootstrap: Mutex<Vec<super::api::BootstrapCount>>,
    /// The latest `thread/tokenUsage/updated` of its turn (for `bridge.status`).
    pub(super) token_usage: Mutex<Option<serde_json::Value>>,
    /// `thread/compacted` seen during its turn.
    pub(super) compactions: std::sync::atomic::AtomicU64,
    /// Its place under `--max-runs`, given back the moment it ends (before its last event is
    /// published: a client that sees the run end may start the next one at once).
    pub(super) slot: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

/// A run's event log, serialized once, capped in bytes: past the cap the oldest events are
/// dropped, and a late subscriber is told how many it missed (`eventsDropped`).
#[derive(Default)]
pub(super) struct EventLog {
    pub(super) events: std::collections::VecDeque<Arc<serde_json::value::RawValue>>,
    /// Absolute index of `events[0]`.
    pub(super) first: usize,
    pub(super) bytes: usize,
    pub(super) cap: usize,
}

impl EventLog {
    pub(super) fn push(&mut self, event: &RunEvent) -> usize {
        let Some(raw) = event.to_raw() else {
            return self.first + self.events.len();
        };
        self.bytes += raw.get().len();
        self.events.push_back(Arc::from(raw));
        while self.bytes > self.cap && self.events.len() > 1 {
            if let Some(old) = self.events.pop_front() {
                self.bytes -= old.get().len();
                self.first += 1;
            }
        }
        self.first + self.events.len()
    }
}

impl RunState {
    pub(super) fn push(&self, event: RunEvent) {
        let count = lock(&self.events).push(&event);
        self.progress.send_modify(|state| state.0 = count);
    }

    pub(super) fn finish(&self, event: RunEvent) {
        drop(lock(&self.slot).take());
        self.push(event);
        *lock(&self.ended_at) = Some(std::time::Instant::now());
        self.progress.send_modify(|state| state.1 = true);
    }
}

pub(super) struct PendingCall {
    pub(super) run_id: String,
    pub(super) answer: oneshot::Sender<Value>,
}
