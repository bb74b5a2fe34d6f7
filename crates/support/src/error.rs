//! Typed errors of the library.
//!
//! One variant per failure a caller can act on; every variant names the file, field or flag
//! involved so the CLI can print it as is. [`Error::kind`] sorts them into the few classes the
//! faces care about: the CLI's exit code and the bridge API's JSON-RPC code both map from the kind,
//! never from the message.

use std::path::PathBuf;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller's input: a file, field, flag or catalog entry (exit 2, JSON-RPC -32602).
    BadInput,
    /// A path of a confined run resolves outside the service's roots (exit 2, JSON-RPC 4001).
    OutsideRoots,
    /// The run is valid but this operation does not apply to it (exit 2, JSON-RPC 4009).
    Unsupported,
    /// Reading or writing our own files, binding a port: the machine, not the input (exit 1,
    /// JSON-RPC -32603).
    Io,
}

/// Everything the library can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    #[error("{}: cannot read", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written (the previous content is left intact).
    #[error("{}: cannot write", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A JSON document did not parse or did not match its shape.
    #[error("{}: {message}", path.display())]
    InvalidDocument { path: PathBuf, message: String },
    /// A field of the run document has a value we cannot use.
    #[error("{}: field `{field}`: {message}", path.display())]
    InvalidField {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A command-line flag or request parameter has a value we cannot use.
    #[error("{flag}: {message}")]
    InvalidArgument { flag: String, message: String },
    /// A path of a confined run (the service's) resolves outside every `--workspace-root`. The
    /// message is the same whether or not the path exists.
    #[error("field `{field}`: {} is outside every --workspace-root", path.display())]
    OutsideRoots { field: String, path: PathBuf },
    /// The `agent:bootstrap` hook command failed or printed something unusable.
    #[error("bootstrap hook `{command}` failed: {message}")]
    Hook { command: String, message: String },
    /// A Codex model catalog has no usable entry for the request.
    #[error("{}: {message}", path.display())]
    Catalog { path: PathBuf, message: String },
    /// A loopback port could not be bound (the offline stub).
    #[error("cannot bind a loopback port for {what}")]
    Bind {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Spans a collector did not take.
    #[error("traces to {target}: {message}")]
    Export { target: String, message: String },
    /// The requested operation does not apply to this run.
    #[error("{}: field `{field}`: {message}", path.display())]
    Unsupported {
        path: PathBuf,
        field: &'static str,
        message: String,
    },
}

impl Error {
    /// The class of this failure; exit codes and JSON-RPC codes map from it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Write { .. } | Error::Bind { .. } | Error::Export { .. } => ErrorKind::Io,
            Error::OutsideRoots { .. } => ErrorKind::OutsideRoots,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Read { .. }
            | Error::InvalidDocument { .. }
            | Error::InvalidField { .. }
            | Error::InvalidArgument { .. }
            | Error::Hook { .. }
            | Error::Catalog { .. } => ErrorKind::BadInput,
        }
    }
}

/// Result alias of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error's message followed by its sources (`a: b: c`): what a log line or a client is told,
/// the cause included (`…: cannot write: No space left on device`).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
