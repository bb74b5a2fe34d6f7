//! A Codex session: handshake, thread start or resume, and turns driven to completion.
//!
//! [`CodexSession`] owns one app-server connection (a child process, or any transport in tests).
//! [`CodexSession::run_turn`] sends `turn/start`, then consumes that turn's notifications until
//! `turn/completed`, answering every server request through a [`ServerRequestHandler`] with the
//! request's exact id. A progress-aware idle timeout (reset only by notifications of this turn,
//! paused while a server request is being answered) and a hard cap end a stuck turn with
//! `turn/interrupt`, then a kill. A crash surfaces as [`SessionError::CodexExited`] with the last
//! stderr lines.

use crate::protocol::table::name as method;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::peer::{Events, Peer, PeerConfig, PeerError};
use super::process::{CodexProcess, SpawnOptions};
use super::turn::stderr_suffix;
pub use super::turn::{
    HandlerFuture, HandlerResult, ServerRequest, ServerRequestHandler, SessionError, TurnEvent,
    TurnLimits, TurnOutcome, TurnStatus,
};
use crate::protocol::inbound::Inbound;
use crate::protocol::methods::{Initialize, InitializeParams, Method, ThreadResume, ThreadStart};
use crate::protocol::params::{ThreadParams, TurnStartParams};
use crate::protocol::{supported_range, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_SEMVER};

/// The oldest Codex CLI clawbridge talks to (a floor, never a ceiling; from
/// `fixtures/codex-versions.tsv`).
pub const MIN_CODEX_VERSION: (u64, u64, u64) = OLDEST_SUPPORTED_SEMVER;

/// A session's parts, see [`CodexSession::into_parts`].
pub struct SessionParts {
    pub peer: Peer,
    pub events: Events,
    pub process: Option<CodexProcess>,
    pub early_events: Vec<Inbound>,
    pub user_agent: String,
    pub codex_version: Option<String>,
    /// Codex's whole answer to `initialize` (the WebSocket endpoint gives it to its clients).
    pub initialize_result: Value,
}

/// One connection to `codex app-server`.
pub struct CodexSession {
    peer: Peer,
    events: Events,
    process: Option<CodexProcess>,
    /// Messages that overtook a `turn/start` answer.
    early_events: Vec<Inbound>,
    pub user_agent: String,
    pub codex_version: Option<String>,
    pub initialize_result: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeResult {
    user_agent: String,
}

pub use crate::protocol::wire::version_from_user_agent;

/// `0.169.0` or `0.171.0-alpha.2` as (major, minor, patch); a missing patch reads as 0.
pub fn parse_semver(version: &str) -> Option<(u64, u64, u64)> {
    let core = version.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|part| part.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

impl CodexSession {
    /// Spawn `codex app-server` and complete the handshake.
    pub async fn spawn(
        options: &SpawnOptions,
        peer_config: PeerConfig,
        experimental_api: bool,
        handshake_timeout: Duration,
    ) -> Result<Self, SessionError> {
        let (process, stdout, stdin) =
            CodexProcess::spawn(options).map_err(|source| SessionError::Spawn {
                binary: options.binary.display().to_string(),
                source,
            })?;
        let (peer, events) = Peer::connect(stdout, stdin, peer_config);
        let mut session = CodexSession {
            peer,
            events,
            process: Some(process),
            early_events: Vec::new(),
            user_agent: String::new(),
            codex_version: None,
            initialize_result: Value::Null,
        };
        match tokio::time::timeout(handshake_timeout, session.handshake(experimental_api)).await {
            Ok(Ok(())) => Ok(session),
            Ok(Err(error)) => {
                let stderr = session.stderr_tail();
                session.kill().await;
                Err(match error {
                    SessionError::Peer(source) => SessionError::HandshakeFailed { source, stderr },
                    other => other,
                })
            }
            Err(_) => {
                let stderr = session.stderr_tail();
                session.kill().await;
                Err(SessionError::Handshake(format!(
                    "no answer to `initialize` within {handshake_timeout:?}{}",
                    stderr_suffix(&stderr)
                )))
            }
        }
    }

    /// Use an existing transport (tests use an in-memory duplex).
    pub async fn connect<R, W>(
        reader: R,
        writer: W,
        peer_config: PeerConfig,
        experimental_api: bool,
    ) -> Result<Self, SessionError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (peer, events) = Peer::connect(reader, writer, peer_config);
        let mut session = CodexSession {
            peer,
            events,
            process: None,
            early_events: Vec::new(),
            user_agent: String::new(),
            codex_version: None,
            initialize_result: Value::Null,
        };
        session.handshake(experimental_api).await?;
        Ok(session)
    }

    async fn handshake(&mut self, experimental_api: bool) -> Result<(), SessionError> {
        let raw: Value = self
            .peer
            .call::<Initialize>(&InitializeParams::clawbridge(experimental_api))
            .await?;
        let result: InitializeResult =
            serde_json::from_value(raw.clone()).map_err(|error| PeerError::Codec {
                method: method::INITIALIZE.into(),
                message: format!("unexpected answer: {error}"),
            })?;
        self.initialize_result = raw;
        self.user_agent = result.user_agent;
        self.codex_version = version_from_user_agent(&self.user_agent);
        let floor = format!(
            "{}.{}.{}",
            MIN_CODEX_VERSION.0, MIN_CODEX_VERSION.1, MIN_CODEX_VERSION.2
        );
        match self.codex_version.as_deref().and_then(parse_semver) {
            Some(found) if found < MIN_CODEX_VERSION => {
                return Err(SessionError::VersionTooOld {
                    found: self.codex_version.clone().unwrap_or_default(),
                    floor,
                })
            }
            Some(found) if Some(found) > parse_semver(NEWEST_TESTED_CODEX_VERSION) => {
                tracing::warn!(
                    "codex app-server {} is newer than the tested {}",
                    self.codex_version.as_deref().unwrap_or_default(),
                    supported_range()
                )
            }
            Some(_) => {}
            None => tracing::warn!("cannot read a version from userAgent {:?}", self.user_agent),
        }
        self.peer.notify::<Value>(method::INITIALIZED, None).await?;
        tracing::info!("paired with {}", self.user_agent);
        Ok(())
    }

    /// Take the session apart (the bridge service routes its events per thread).
    pub fn into_parts(self) -> SessionParts {
        SessionParts {
            peer: self.peer,
            events: self.events,
            process: self.process,
            early_events: self.early_events,
            user_agent: self.user_agent,
            codex_version: self.codex_version,
            initialize_result: self.initialize_result,
        }
    }

    /// The app-server's process id, when we spawned it.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(|process| process.pid)
    }

    /// The peer (to answer requests from other tasks).
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The last stderr lines of the child, if any.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.process
            .as_ref()
            .map(CodexProcess::stderr_tail)
            .unwrap_or_default()
    }

    /// Start or resume the thread; returns its id.
    pub async fn open_thread(&mut self, thread: &ThreadParams) -> Result<String, SessionError> {
        let response = match thread {
            ThreadParams::ThreadStart(params) => {
                self.request_buffering::<ThreadStart>(params).await?
            }
            ThreadParams::ThreadResume(params) => {
                self.request_buffering::<ThreadResume>(params).await?
            }
        };
        Ok(response.thread.id)
    }

    fn map_peer_error(&self, error: PeerError) -> SessionError {
        match error {
            PeerError::ConnectionClosed => SessionError::CodexExited {
                status: "connection closed".to_string(),
                stderr: self.stderr_tail(),
            },
            other => SessionError::Peer(other),
        }
    }

    async fn exited(&mut self) -> SessionError {
        let status = match &mut self.process {
            Some(process) => match process.wait_exit(Duration::from_millis(1500)).await {
                Some(status) => status.to_string(),
                None => "stdout closed".to_string(),
            },
            None => "connection closed".to_string(),
        };
        SessionError::CodexExited {
            status,
            stderr: self.stderr_tail(),
        }
    }

    /// Run one turn to its end.
    pub async fn run_turn(
        &mut self,
        turn: &TurnStartParams,
        handler: &dyn ServerRequestHandler,
        observer: &mut (dyn FnMut(TurnEvent<'_>) + Send),
        limits: TurnLimits,
    ) -> Result<TurnOutcome, SessionError> {
        let peer = self.peer.clone();
        let result = super::turn::drive_turn(
            &peer,
            &mut self.events,
            &mut self.early_events,
            turn,
            handler,
            observer,
            limits,
        )
        .await;
        match result {
            Ok(outcome) => Ok(outcome),
            Err(failure) => Err(self.turn_failure(failure).await),
        }
    }

    async fn turn_failure(&mut self, failure: super::turn::TurnFailure) -> SessionError {
        use super::turn::TurnFailure;
        match failure {
            TurnFailure::Closed | TurnFailure::Peer(PeerError::ConnectionClosed) => {
                self.exited().await
            }
            TurnFailure::Peer(error) => SessionError::Peer(error),
            TurnFailure::Timeout { error, kill } => {
                if kill {
                    tracing::warn!(
                        "the turn did not end after turn/interrupt; killing codex app-server"
                    );
                    self.kill().await;
                }
                error
            }
        }
    }

    /// Send a request while buffering whatever arrives before its answer.
    async fn request_buffering<M: Method>(
        &mut self,
        params: &M::Params,
    ) -> Result<M::Result, SessionError> {
        let peer = self.peer.clone();
        match super::turn::request_buffering::<M, _>(
            &peer,
            &mut self.events,
            &mut self.early_events,
            params,
        )
        .await
        {
            Ok(value) => Ok(value),
            Err(error) => Err(self.map_peer_error(error)),
        }
    }

    /// Kill the child now.
    pub async fn kill(&mut self) {
        if let Some(process) = &mut self.process {
            process.kill().await;
        }
    }

    /// Close stdin and wait for a clean exit (kill after `grace`).
    pub async fn shutdown(self, grace: Duration) {
        let CodexSession {
            peer,
            events,
            process,
            ..
        } = self;
        // Dropping the last peer handle closes stdin; Codex exits cleanly on EOF.
        drop(peer);
        drop(events);
        if let Some(mut process) = process {
            if process.wait_exit(grace).await.is_none() {
                process.kill().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agent_versions() {
        assert_eq!(
            version_from_user_agent(
                "clawbridge/0.169.0 (Debian 12.0.0; x86_64) xterm (clawbridge; 0.1.0)"
            )
            .as_deref(),
            Some("0.169.0")
        );
        assert_eq!(
            version_from_user_agent("my app/1.2.3-beta (x)").as_deref(),
            Some("1.2.3-beta")
        );
        assert_eq!(parse_semver("0.169.0"), Some((0, 169, 0)));
        assert_eq!(parse_semver("1.2.3-beta"), Some((1, 2, 3)));
        assert!(parse_semver("0.168.9") < Some(MIN_CODEX_VERSION));
        assert!(parse_semver("0.200.0") > Some(MIN_CODEX_VERSION));
    }
}
