//! Everything Codex-specific: the app-server wire params and the texts they carry.
//!
//! Layout: [`instructions`] builds the three text surfaces (thread developer instructions,
//! turn-scoped collaboration instructions, turn input) from a routed workspace; [`params`] owns the
//! typed `thread/start`, `thread/resume` and `turn/start` structs (strict outbound: every key we
//! send is a field here) and assembles them for a run.

pub mod framing;
pub mod handler;
pub mod hub;
pub mod instructions;
pub mod params;
pub mod peer;
pub mod process;
pub mod session;
pub mod turn;
pub mod wire;

/// The pinned Codex Default collaboration-mode preset for gpt-5.5, measured against Codex CLI
/// 0.169.0 (exactly what Codex sends when `developer_instructions` is `null`).
pub const DEFAULT_COLLABORATION_PRESET: &str =
    include_str!("../../fixtures/codex-model-catalog/gpt-5.5.collaboration-default.md");

/// The Codex CLI version clawbridge is measured against.
pub const PINNED_CODEX_VERSION: &str = "0.169.0";
