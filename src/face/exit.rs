//! The binary's exit codes, mapped from the library's error kinds: 0 success; 1 a failed check,
//! a failed turn or an internal fault; 2 bad input or usage; 3 Codex could not be started or
//! the handshake failed.

use std::process::ExitCode;

use crate::ErrorKind;
use crate::PairingError;

/// A failure with the exit code it maps to.
pub struct Failure(pub anyhow::Error, pub u8);

impl From<crate::Error> for Failure {
    fn from(error: crate::Error) -> Self {
        let code = match error.kind() {
            ErrorKind::Io => 1,
            _ => 2,
        };
        Failure(error.into(), code)
    }
}

impl From<PairingError> for Failure {
    fn from(error: PairingError) -> Self {
        match error {
            PairingError::Input(error) => error.into(),
            PairingError::Session(error) if error.is_startup() => Failure(error.into(), 3),
            other => Failure(other.into(), 1),
        }
    }
}

impl From<crate::ProxyError> for Failure {
    fn from(error: crate::ProxyError) -> Self {
        use crate::{EndpointError, ProxyError};
        let code = match error {
            ProxyError::Setup(error) => return error.into(),
            ProxyError::Transcript { .. }
            | ProxyError::Offline(_)
            | ProxyError::Endpoint(
                EndpointError::NotLoopback(_)
                | EndpointError::Socket { .. }
                | EndpointError::NoRoots(_),
            ) => 2,
            ProxyError::Endpoint(EndpointError::Bind { .. } | EndpointError::Status(_))
            | ProxyError::Store(_)
            | ProxyError::Output(_) => 1,
            ProxyError::NoCodex(_) | ProxyError::Spawn { .. } => 3,
        };
        Failure(error.into(), code)
    }
}

impl From<crate::ServeError> for Failure {
    fn from(error: crate::ServeError) -> Self {
        use crate::ServeError;
        match error {
            ServeError::Setup(error) => error.into(),
            ServeError::Bind { .. } | ServeError::Methods(_) => Failure(error.into(), 1),
            other => Failure(other.into(), 2),
        }
    }
}

pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// 0 when it went well, else 1.
pub fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
