//! Typed errors of the library.
//!
//! One variant per failure a caller can act on; every variant names the file or field involved so
//! the CLI can print it as is and pick the exit code from the variant, never from the message.

use std::path::PathBuf;

/// Everything the translation core can fail with.
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
    /// A path of a confined run (the service's) resolves outside every `--workspace-root`. The
    /// message is the same whether or not the path exists.
    #[error("field `{field}`: {} is outside every --workspace-root", path.display())]
    OutsideRoots { field: String, path: PathBuf },
    /// The requested operation does not apply to this run.
    #[error("{0}")]
    Unsupported(String),
    /// Bad input that is not tied to one file (a flag value, a catalog entry, ...).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// True when the failure is the user's input (exit 2) rather than an internal fault (exit 1).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, Error::Write { .. })
    }
}

/// Result alias of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
