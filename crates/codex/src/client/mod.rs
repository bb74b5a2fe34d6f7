//! The app-server runtime: process, framing, peer, turn driver, sessions, hub and handlers.
//!
//! Layout: [`process`] finds and spawns `codex app-server` (the native binary behind the npm
//! launcher) with a drained, bounded stderr; [`framing`] splits its stdout into lines without
//! copying; [`peer`] is the JSON-RPC peer over any `AsyncRead + AsyncWrite` (in-memory in tests);
//! [`session`] does the handshake and opens threads; [`turn`] drives one turn from any event
//! source; [`hub`] shares one app-server between many threads; [`handler`] answers server
//! requests (dynamic tools, approvals); [`pool`] is the app-servers a service runs on (local
//! children and [`remote`] listeners); [`fleet`] is one pool per account. (The checks against
//! the running Codex's own JSON Schema are `codex::schema`.)

pub mod fleet;
pub mod framing;
pub mod handler;
pub mod hub;
pub mod peer;
pub mod pool;
pub mod process;
pub mod remote;
pub mod session;
pub mod turn;
