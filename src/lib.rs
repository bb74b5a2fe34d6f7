//! clawbridge: OpenClaw runs in, OpenAI Codex app-server JSON-RPC out.
//!
//! Data flows one way, and the folders follow it (docs/architecture.md). Each layer may use the
//! layers listed before it, never one after it (`tests/it/layers.rs` checks this):
//!
//! 1. [`error`], [`support`]: typed errors; JavaScript string semantics, confined reads and
//!    atomic writes, deterministic JSON, redaction, deadlines, bounded processes; and
//!    [`codex::protocol`]: the typed app-server wire (params out, typed messages in), no I/O and
//!    no policy;
//! 2. [`config`]: the run document and the OpenClaw config it carries (one table of keys);
//! 3. [`workspace`] (bootstrap files, hook, budgets) and [`skills`] (discovery, eligibility,
//!    catalog);
//! 4. [`routing`]: which surface each file lands on (pure);
//! 5. [`render`]: OpenClaw's system prompt and every Codex text, through one facade;
//! 7. [`translate`]: the one pipeline every consumer calls, and the params policy;
//! 8. [`codex::client`]: the app-server process, framing, peer, turns, hub, handlers;
//! 9. [`artifacts`]: snapshots and pinned-fixture sync (files other people review);
//! 10. [`app`]: every command, implemented once for the CLI and the bridge API, with the run
//!     events, pairing, capture, the offline stub and the state the process keeps;
//! 11. [`server`]: the bridge API (`clawbridge serve`), and [`proxy`]: `clawbridge app-server`,
//!     the pass-through for OpenClaw's Codex slot; the binary (`main.rs`) parses flags.

pub mod app;
pub mod artifacts;
pub mod codex;
pub mod config;
pub mod error;
pub mod proxy;
pub mod render;
pub mod routing;
pub mod server;
pub mod skills;
pub mod support;
pub mod translate;
pub mod workspace;

pub use error::{Error, Result};
