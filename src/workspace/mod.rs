//! Workspace bootstrap files: loading, the run filters, and the character budgets.
//!
//! Layout: `load` ([`load_bootstrap_files`]) reads the eight candidates in their fixed order,
//! confined and capped, and applies the session, lightweight, heartbeat and brand-new filters
//! (docs/routing.md, "Bootstrap files"); `hook` ([`apply_bootstrap_hook`]) runs the
//! `agent:bootstrap` hook; `budget` ([`budget::fit_with_budget`]) applies OpenClaw's per-file and total
//! budgets with head/tail truncation (docs/routing.md, "Budgets"), and [`TruncationReport`] names
//! what was truncated (whether the notice is shown is routing's call, with the session's memory
//! for `once` kept by `app::state`). All counts are UTF-16 code units; no cut ever splits a
//! character.

mod budget;
mod hook;
mod load;

pub use budget::{fit_with_budget, FittedFile, TruncationReport, TRUNCATION_NOTICE};
pub use hook::apply_bootstrap_hook;
pub use load::load_bootstrap_files;

use serde::Serialize;

use crate::support::text::{len16, trim_end_js};

/// The bootstrap candidates in load (and budget) order.
pub const BOOTSTRAP_FILE_NAMES: [&str; 8] = [
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
];

/// Files larger than this are not read (treated as unreadable).
pub const MAX_BOOTSTRAP_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// What a bootstrap candidate held when we looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileContent {
    /// The decoded text (invalid UTF-8 replaced with U+FFFD).
    Present(String),
    /// No such file.
    Missing,
    /// Exists but was not read; the reason is for diagnostics.
    Unreadable(String),
}

/// One bootstrap file after loading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapFile {
    /// File name as routed (`SOUL.md`).
    pub name: String,
    /// Absolute path shown to the model (always `/`-separated).
    pub path: String,
    pub content: FileContent,
}

impl BootstrapFile {
    /// The text, when present.
    pub fn text(&self) -> Option<&str> {
        match &self.content {
            FileContent::Present(text) => Some(text),
            _ => None,
        }
    }

    /// Present with something other than whitespace.
    pub fn has_content(&self) -> bool {
        self.text()
            .is_some_and(|text| !trim_end_js(text).is_empty())
    }

    /// `len16(trim_end(content))`, 0 when missing.
    pub fn raw_chars(&self) -> usize {
        self.text()
            .map(|text| len16(trim_end_js(text)))
            .unwrap_or(0)
    }
}

/// Why a candidate was left out before routing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OmittedFile {
    pub name: String,
    pub reason: String,
}

/// The bootstrap files of one run, filtered, plus what was left out and why.
#[derive(Clone, Debug, Default)]
pub struct LoadedWorkspace {
    pub files: Vec<BootstrapFile>,
    pub omitted: Vec<OmittedFile>,
    pub warnings: Vec<String>,
}
