//! Every command, implemented once: the CLI (`main.rs`) and the bridge API (`server`) are two
//! thin faces of these functions.
//!
//! Layout: [`context`] is the `/context` view; [`pairing`] runs one turn through a real Codex;
//! [`capture`] redacts and labels what Codex sent the model; [`offline`] is the loopback model
//! stub and the throwaway `CODEX_HOME`.

pub mod capture;
pub mod commands;
pub mod context;
pub mod events;
pub mod fixtures;
pub mod offline;
pub mod pairing;
pub mod run;
pub mod state;
