//! Everything that talks to Codex's app-server, in two layers.
//!
//! Layout: [`protocol`] is the wire as data (typed `thread/start`, `thread/resume` and
//! `turn/start` params, the JSON-RPC message shapes, typed inbound notifications and server
//! requests); it does no I/O and needs no runtime. [`client`] is the runtime on top: the
//! app-server process, line framing, the JSON-RPC peer, the turn driver, sessions, the hub that
//! routes one app-server's messages to many threads, and the server-request handlers.
//! [`schema`] checks what goes over the wire against the JSON Schema the running Codex generates
//! (params field by field, every message family, two versions compared); it talks to no
//! app-server.

pub mod client;
pub mod protocol;
pub mod schema;
