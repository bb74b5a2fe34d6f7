//! clawbridge: OpenClaw runs in, OpenAI Codex app-server JSON-RPC out.
//!
//! Data flows one way, and the module layout follows it:
//!
//! * [`config`]: the run document and the OpenClaw config it carries;
//! * [`workspace`]: bootstrap files, filters and budgets; [`skills`]: the skills catalog;
//! * [`routing`]: which surface each file lands on;
//! * [`codex`]: the Codex text surfaces and the typed `thread/*` / `turn/start` params;
//! * [`prompt`]: OpenClaw's system prompt and the one facade both prompt surfaces use;
//! * [`translate`]: the one pipeline every consumer calls; [`context`]: the `/context` view.
//!
//! Helpers: [`text`] (JavaScript string semantics), [`jsonfmt`] (deterministic artifact JSON),
//! [`fsutil`] (atomic writes). Errors are typed ([`error::Error`]); the binary maps them to exit codes.

pub mod capture;
pub mod catalog;
pub mod codex;
pub mod config;
pub mod context;
pub mod error;
pub mod fsutil;
pub mod jsonfmt;
pub mod offline;
pub mod pairing;
pub mod prompt;
pub mod routing;
pub mod server;
pub mod skills;
pub mod snapshots;
pub mod text;
pub mod translate;
pub mod workspace;

pub use error::{Error, Result};
