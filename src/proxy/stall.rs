//! Stalled turns on the WebSocket endpoint: what a thread's messages say about a running turn
//! that has gone quiet, told once per turn, shown in `app-server status`, and (with
//! `--completion-grace`) the one kind that is safe to finish finished for the client.
//!
//! Why: OpenClaw waits for `turn/completed`. Codex occasionally sends a turn's final agent
//! message and never its `turn/completed` (`serve` recovers those the same way, see
//! `codex::client::turn`), a model call can go silent right after `turn/started`, and a tool
//! result can be followed by nothing. The endpoint relays every message of the thread, so it is
//! the one place that can tell them apart and say which.

use crate::codex::protocol::table::name as method;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

/// What the endpoint does about quiet turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallSettings {
    /// A final agent message with no `turn/completed` for this long is a stall.
    pub completion_grace: Duration,
    /// Complete such a turn for the client (a `turn/completed`, status `completed`), marked
    /// recovered; Codex's own late `turn/completed` for it is then not relayed.
    pub recover: bool,
    /// Silence this long after `turn/started`, or after a tool's result, is a stall.
    pub silence: Duration,
}

impl Default for StallSettings {
    fn default() -> Self {
        StallSettings {
            completion_grace: Duration::from_secs(30),
            recover: false,
            silence: Duration::from_secs(120),
        }
    }
}

/// The kinds of stall.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum StallKind {
    /// The turn's final agent message came, its `turn/completed` did not.
    MissingTurnCompleted,
    /// Nothing after `turn/started`.
    SilentAfterStart,
    /// A tool's result, then nothing.
    NoFollowUpAfterTool,
}

impl StallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StallKind::MissingTurnCompleted => "missingTurnCompleted",
            StallKind::SilentAfterStart => "silentAfterStart",
            StallKind::NoFollowUpAfterTool => "noFollowUpAfterTool",
        }
    }
}

/// A stall as `app-server status` shows it on its thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StallStatus {
    pub kind: StallKind,
    /// Seconds since the turn's last message.
    pub quiet_secs: u64,
    /// Completed for the client by the endpoint (`--completion-grace`).
    pub recovered: bool,
}

/// Where the running turn stands, from its last message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Started,
    AgentMessageDone,
    ToolDone,
    Working,
}

/// What the watcher decides when its deadline passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Tell it (log it, count it) once.
    Report(StallKind),
    /// Tell it, and complete the turn for the client.
    Recover,
}

/// One thread's running turn, watched.
#[derive(Debug)]
pub struct TurnWatch {
    settings: StallSettings,
    running: bool,
    phase: Phase,
    last: Instant,
    reported: Option<StallKind>,
    recovered: bool,
}

/// Item types that carry a tool's result.
const TOOL_ITEMS: [&str; 6] = [
    "commandExecution",
    "fileChange",
    "mcpToolCall",
    "dynamicToolCall",
    "webSearch",
    "collabAgentToolCall",
];

impl TurnWatch {
    pub fn new(settings: StallSettings) -> TurnWatch {
        TurnWatch {
            settings,
            running: false,
            phase: Phase::Working,
            last: Instant::now(),
            reported: None,
            recovered: false,
        }
    }

    /// A message of the thread: its method and, for `item/completed`, the item's `type`.
    /// Returns whether it is to be relayed (a recovered turn's late `turn/completed` is not).
    pub fn observe(&mut self, method: &str, item_type: Option<&str>) -> bool {
        let now = Instant::now();
        match method {
            method::TURN_STARTED => {
                self.running = true;
                self.phase = Phase::Started;
                self.reported = None;
                self.recovered = false;
            }
            method::TURN_COMPLETED => {
                let relay = !self.recovered;
                self.running = false;
                self.recovered = false;
                self.reported = None;
                return relay;
            }
            method::ITEM_COMPLETED => {
                self.phase = match item_type {
                    Some("agentMessage") => Phase::AgentMessageDone,
                    Some(kind) if TOOL_ITEMS.contains(&kind) => Phase::ToolDone,
                    _ => Phase::Working,
                };
            }
            _ => self.phase = Phase::Working,
        }
        self.last = now;
        true
    }

    /// The turn was ended some other way (its member went away, the feed ended).
    pub fn ended(&mut self) {
        self.running = false;
        self.reported = None;
        self.recovered = false;
    }

    /// When the running turn becomes a stall if nothing comes; `None` when nothing is due.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.running || self.recovered {
            return None;
        }
        let kind = self.kind()?;
        if self.reported == Some(kind) {
            return None;
        }
        Some(self.last + self.wait_for(kind))
    }

    fn kind(&self) -> Option<StallKind> {
        match self.phase {
            Phase::Started => Some(StallKind::SilentAfterStart),
            Phase::AgentMessageDone => Some(StallKind::MissingTurnCompleted),
            Phase::ToolDone => Some(StallKind::NoFollowUpAfterTool),
            Phase::Working => None,
        }
    }

    fn wait_for(&self, kind: StallKind) -> Duration {
        match kind {
            StallKind::MissingTurnCompleted => self.settings.completion_grace,
            StallKind::SilentAfterStart | StallKind::NoFollowUpAfterTool => self.settings.silence,
        }
    }

    /// The deadline passed: what to do (once per stall).
    pub fn due(&mut self) -> Option<Verdict> {
        let deadline = self.deadline()?;
        if Instant::now() < deadline {
            return None;
        }
        let kind = self.kind()?;
        self.reported = Some(kind);
        if kind == StallKind::MissingTurnCompleted && self.settings.recover {
            self.recovered = true;
            return Some(Verdict::Recover);
        }
        Some(Verdict::Report(kind))
    }

    /// The stall of the running turn, if there is one now.
    pub fn status(&self) -> Option<StallStatus> {
        let kind = self.reported?;
        Some(StallStatus {
            kind,
            quiet_secs: self.last.elapsed().as_secs(),
            recovered: self.recovered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(recover: bool) -> StallSettings {
        StallSettings {
            completion_grace: Duration::from_secs(30),
            recover,
            silence: Duration::from_secs(120),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_kind_is_told_once_after_its_wait_and_activity_clears_it() {
        let mut watch = TurnWatch::new(settings(false));
        assert_eq!(watch.deadline(), None, "no turn, nothing due");
        watch.observe("turn/started", None);
        tokio::time::advance(Duration::from_secs(119)).await;
        assert_eq!(watch.due(), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            watch.due(),
            Some(Verdict::Report(StallKind::SilentAfterStart))
        );
        assert_eq!(watch.due(), None, "told once");
        assert_eq!(
            watch.status().map(|stall| stall.kind),
            Some(StallKind::SilentAfterStart)
        );
        // It goes on: streaming clears the deadline; a tool's result then silence.
        watch.observe("item/agentMessage/delta", None);
        assert_eq!(watch.deadline(), None);
        watch.observe("item/completed", Some("dynamicToolCall"));
        tokio::time::advance(Duration::from_secs(120)).await;
        assert_eq!(
            watch.due(),
            Some(Verdict::Report(StallKind::NoFollowUpAfterTool))
        );
        // A final agent message waits the completion grace only.
        watch.observe("item/completed", Some("agentMessage"));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(
            watch.due(),
            Some(Verdict::Report(StallKind::MissingTurnCompleted))
        );
        assert!(watch.observe("turn/completed", None), "relayed");
        assert_eq!(watch.deadline(), None);
        assert_eq!(watch.status(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn with_recovery_the_missing_completion_is_completed_once_and_the_late_one_dropped() {
        let mut watch = TurnWatch::new(settings(true));
        watch.observe("turn/started", None);
        watch.observe("item/completed", Some("agentMessage"));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(watch.due(), Some(Verdict::Recover));
        assert_eq!(watch.due(), None);
        assert!(watch.status().is_some_and(|stall| stall.recovered));
        assert!(
            !watch.observe("turn/completed", None),
            "Codex's late one is not relayed"
        );
        // The next turn is watched anew.
        watch.observe("turn/started", None);
        assert!(watch.deadline().is_some());
        // The other kinds are only told, never completed.
        tokio::time::advance(Duration::from_secs(120)).await;
        assert_eq!(
            watch.due(),
            Some(Verdict::Report(StallKind::SilentAfterStart))
        );
    }
}
