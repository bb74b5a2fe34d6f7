//! The Codex app-server wire as data: no I/O, no runtime (docs/codex-wire.md).
//!
//! Layout: [`params`] owns the typed `thread/start`, `thread/resume` and `turn/start` structs
//! (strict outbound: every key we send is a field) and assembles them for a run; [`wire`] mirrors
//! JSON-RPC as Codex speaks it (no `"jsonrpc"` field, ids keep their JSON type); [`methods`]
//! types the requests clawbridge sends, declared by the method table ([`table`]); [`inbound`]
//! types the notifications and server requests clawbridge acts on, keeping the rest raw; [`scan`]
//! is the one pass over each inbound line that validates it and finds what those read;
//! [`observed`] holds the lenient views the observers (traces, audits) read a conversation
//! through; [`answers`] the answers clawbridge gives Codex's server requests.

pub mod answers;
pub mod inbound;
pub mod methods;
pub mod observed;
pub mod params;
pub mod scan;
pub mod table;
pub mod wire;

// The supported Codex CLI versions, from the one table `fixtures/codex-versions.tsv` (build.rs):
// `PINNED_CODEX_VERSION`, `NEWEST_TESTED_CODEX_VERSION`, `OLDEST_SUPPORTED_CODEX_VERSION`,
// `OLDEST_SUPPORTED_SEMVER` and every row in `CODEX_VERSIONS`.
include!(concat!(env!("OUT_DIR"), "/codex_versions.rs"));

/// The supported range in words, for messages: `0.169.0 to 0.171.0`.
pub fn supported_range() -> String {
    format!("{OLDEST_SUPPORTED_CODEX_VERSION} to {NEWEST_TESTED_CODEX_VERSION}")
}
