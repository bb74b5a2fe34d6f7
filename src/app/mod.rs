//! Every command, implemented once: the CLI (`main.rs`) and the bridge API (`server`) are two
//! thin faces of these functions.
//!
//! Layout: [`commands`] holds the translation commands (`params`, `context`, `prompt`) and the
//! live facts they read; [`run`] the pairing commands (`run`, `capture`, `snapshots gen --raw`);
//! [`fixtures`] the review-artifact commands (`snapshots`, `sync-codex-model`, `fixtures
//! verify`); [`events`] the run events both faces emit; [`context`] is the `/context` view;
//! [`pairing`] drives one turn through a real Codex; [`capture`] redacts and labels what Codex
//! sent the model; [`offline`] is the loopback model stub and the throwaway `CODEX_HOME`;
//! [`state`] is what the process remembers between runs (the `once` warning ledger); [`doctor`]
//! checks the machine; [`clients`] keeps the service's named client tokens; [`isolation`]
//! checks the private view both services give their app-servers.
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
pub mod state;
