//! Helpers every layer may use; they know nothing of OpenClaw or Codex.
//!
//! Layout: [`text`] (JavaScript string semantics: UTF-16 lengths, trims, surrogate-safe cuts),
//! [`fs`] (confined, capped reads of regular files; atomic writes), [`json`] (deterministic
//! artifact JSON: sorted keys, two-space indent), [`deadline`] (the deadline of one request's
//! blocking work, which long walks check), [`address`] (the one URL type of WebSocket sockets:
//! `ws://`, `wss://`, `unix://`), [`tls`] (the one TLS client configuration).

pub mod address;
pub mod clock;
pub mod console;
pub mod credential;
pub mod deadline;
pub mod error;
pub mod fair;
pub mod fs;
pub mod hex;
pub mod jail;
pub mod json;
pub mod jsonl;
pub mod loopback;
pub mod process;
pub mod queue;
pub mod reaper;
pub mod redact;
pub mod signals;
pub mod suggest;
pub mod sync;
pub mod task;
pub mod text;
pub mod tls;
pub mod ws;

pub use error::{Error, ErrorKind, Result};
