//! Every command, implemented once: the CLI (`main.rs`) and the bridge API (`server`) are two
//! thin faces of these functions.
//!
//! Layout: [`commands`] holds the translation commands (`params`, `context`, `prompt`), the
//! named accounts' commands and the live facts they read; [`pairing`] the pairing commands
//! (`run`, `capture`, `snapshots gen --raw`) and the demo's layer table; [`drive`] drives one
//! turn through a real Codex; [`fixtures`] the review-artifact commands (`snapshots`,
//! `sync-codex-model`, `fixtures verify`); [`events`] the run events both faces emit;
//! [`context`] is the `/context` view; [`state`] is what the process remembers between runs
//! (the `once` warning ledger); [`doctor`] checks the machine and a service's own setup;
//! [`audit`] tells where a recorded OpenClaw session put each workspace file. (The capture, the
//! stub, the named clients and accounts and the isolation check live below: `traffic`,
//! `service`.)
//!
//! May use every layer below it (docs/architecture.md); only `server`, `proxy` and the binary
//! use it.

pub mod audit;
pub mod commands;
pub mod context;
pub mod doctor;
pub mod drive;
pub mod events;
pub mod fixtures;
pub mod pairing;
pub mod replay;
pub mod state;
