//! The Codex app-server wire as data: no I/O, no runtime (docs/codex-wire.md).
//!
//! Layout: [`params`] owns the typed `thread/start`, `thread/resume` and `turn/start` structs
//! (strict outbound: every key we send is a field) and assembles them for a run; [`wire`] mirrors
//! JSON-RPC as Codex speaks it (no `"jsonrpc"` field, ids keep their JSON type); [`methods`]
//! types the other requests clawbridge sends (`turn/interrupt`, `thread/unsubscribe`); [`inbound`]
//! types the notifications and server requests clawbridge acts on, keeping the rest raw; [`scan`]
//! is the one pass over each inbound line that validates it and finds what those read.

pub mod inbound;
pub mod methods;
pub mod params;
pub mod scan;
pub mod wire;

/// The Codex CLI version clawbridge is measured against.
pub const PINNED_CODEX_VERSION: &str = "0.169.0";

/// The newest Codex CLI version the end-to-end suite and the schema check run against
/// (`CODEX_VERSION=0.171.0 scripts/test-codex`). Supported: `PINNED_CODEX_VERSION` up to this.
pub const NEWEST_TESTED_CODEX_VERSION: &str = "0.171.0";
