//! The command-line face both binaries share: the flags ([`cli`]: closed sets parse straight
//! into the library's types, the service's flags become its settings), the reading of the
//! command line and the one-shot handlers ([`front`]), and the exit codes mapped from error
//! kinds ([`exit`]). `clawbridge` (`src/main.rs`) uses the one-shot part and hands the rest to
//! `clawbridge-runtime` (`src/bin/clawbridge-runtime.rs`), which uses all of it. Code neither
//! binary calls is not linked into it, so the small front stays small.
//!
//! The top of the stack: it may use every layer (docs/architecture.md).

pub mod cli;
pub mod exit;
pub mod front;
pub mod log;
pub mod replay;
pub mod run;
