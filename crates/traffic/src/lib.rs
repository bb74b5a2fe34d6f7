//! The model-traffic plane: what stands between Codex and the model.
//!
//! Codex talks to a model over HTTP (or the Responses WebSocket). clawbridge can put three
//! things in that path, and this folder owns them: the offline stub ([`stub`]: a loopback
//! Responses server that answers from a script, with the throwaway `CODEX_HOME` pointed at it),
//! the recording forwarder ([`forward`]: streams each request to the real upstream, or to the
//! stub, and files a copy) and capture ([`capture`]: what a request is made of, the writer that
//! files requests and answers under their thread and turn, and the prompt-cache report). The
//! shared record types are in [`record`], so none of the three imports another for them.
//!
//! [`plane`] is the one composer: every command that runs Codex (`run`, `capture`, `serve`,
//! `app-server` over stdio and as an endpoint) describes what it wants in one
//! [`plane::PlaneSettings`] and gets the stub or the forwarder, the capture writer, the Codex
//! home and the `-c` overrides from [`plane::Plane::start`].
//!
//! Uses nothing of the crate but `error` and `support` (docs/architecture.md, layer 7, beside
//! `codex::client`): it knows HTTP and Codex's model wire, not runs, sessions or app-servers.

pub mod capture;
pub mod forward;
pub mod plane;
pub mod record;
pub mod replay_book;
pub mod stub;
pub mod trace;
pub mod transcript;
