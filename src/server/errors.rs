//! The API's error codes (one copy; OpenRPC lists them in `api`) and the mapping from the
//! library's error kinds to them.

use crate::error::with_causes;
use jsonrpsee::types::ErrorObjectOwned;

/// Stable error codes of the API.
pub mod codes {
    /// The run document (or another parameter) is invalid; the message names the field.
    pub const INVALID_PARAMS: i32 = -32602;
    /// Too many runs in progress (`--max-runs`); try again when one ends.
    pub const BUSY: i32 = 4290;
    /// A path of the run document lies outside every `--workspace-root`.
    pub const PATH_OUTSIDE_ROOTS: i32 = 4001;
    /// The operator does not allow it: a sandbox above `--max-sandbox`, or a `threadId` that
    /// belongs to another session or is running.
    pub const FORBIDDEN: i32 = 4003;
    /// No such run, tool call or approval.
    pub const NOT_FOUND: i32 = 4004;
    /// The run cannot be executed by Codex (e.g. `"harness": "embedded"`).
    pub const NOT_A_CODEX_RUN: i32 = 4009;
    /// Codex could not be started or the handshake failed.
    pub const CODEX_UNAVAILABLE: i32 = 4100;
    /// Codex refused the thread.
    pub const THREAD_FAILED: i32 = 4200;
    /// The request did not finish within `--request-timeout`.
    pub const TIMEOUT: i32 = 4080;
    /// An internal failure (state file, serialization).
    pub const INTERNAL: i32 = -32603;

    /// The codes the OpenRPC document lists: (name, code, what it means).
    pub const DESCRIBED: [(&str, i32, &str); 9] = [
        (
            "InvalidParams",
            INVALID_PARAMS,
            "invalid params (the message names the field)",
        ),
        (
            "OutsideRoots",
            PATH_OUTSIDE_ROOTS,
            "a path outside the workspace roots",
        ),
        (
            "Forbidden",
            FORBIDDEN,
            "not allowed by the operator (sandbox above the ceiling, another session's thread)",
        ),
        ("NotFound", NOT_FOUND, "unknown run, call or approval"),
        ("NotACodexRun", NOT_A_CODEX_RUN, "not a Codex run"),
        (
            "Timeout",
            TIMEOUT,
            "the request's file I/O or parsing took too long",
        ),
        (
            "Busy",
            BUSY,
            "too many runs in progress (--max-runs); try again when one ends",
        ),
        (
            "CodexUnavailable",
            CODEX_UNAVAILABLE,
            "Codex could not be started, none is installed, or serve is shutting down",
        ),
        ("ThreadFailed", THREAD_FAILED, "Codex refused the thread"),
    ];
}

pub(super) fn rpc_error(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message.into(), None::<()>)
}

/// A library error as an API error: the code follows from the kind.
pub(super) fn library_error(error: crate::Error) -> ErrorObjectOwned {
    use crate::error::ErrorKind;
    let code = match error.kind() {
        ErrorKind::OutsideRoots => codes::PATH_OUTSIDE_ROOTS,
        ErrorKind::Unsupported => codes::NOT_A_CODEX_RUN,
        ErrorKind::Io => codes::INTERNAL,
        _ => codes::INVALID_PARAMS,
    };
    rpc_error(code, with_causes(&error))
}

/// A random id (UUID v4) for runs and approvals: nobody can guess another client's.
pub(super) fn random_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}
