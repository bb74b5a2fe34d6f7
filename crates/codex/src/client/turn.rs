//! Driving one turn over any source of inbound messages.
//!
//! A [`super::session::CodexSession`] reads its connection's whole event stream; the bridge
//! service runs many threads over one app-server and gives each run only its thread's messages.
//! Both drive turns with [`drive_turn`]: `turn/start`, then that turn's notifications until
//! `turn/completed`, every server request answered with its exact id, a progress-aware idle
//! timeout (reset only by this turn's notifications, paused while answering) and a hard cap.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::FutureExt as _;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::peer::{Events, Peer, PeerError};
use crate::protocol::inbound::{Inbound, NotificationKind, Request, TurnState};
use crate::protocol::methods::{Method, TurnStart};
use crate::protocol::params::TurnStartParams;
use crate::protocol::wire::{RequestId, RpcError, INTERNAL_ERROR};

/// Everything that can end a session or a turn early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error("{0}")]
    BinaryNotFound(String),
    #[error("cannot start {binary}")]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    #[error("handshake with codex app-server failed: {0}")]
    Handshake(String),
    /// The handshake's request failed; the source is the peer's error.
    #[error("handshake with codex app-server failed{}", stderr_suffix(.stderr))]
    HandshakeFailed {
        #[source]
        source: PeerError,
        stderr: Vec<String>,
    },
    #[error("codex app-server {found} is older than the supported floor {floor}")]
    VersionTooOld { found: String, floor: String },
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("codex app-server exited ({status}){}", stderr_suffix(.stderr))]
    CodexExited { status: String, stderr: Vec<String> },
    /// The run fell this many messages behind its thread (the hub ended it; others go on).
    #[error("the run fell {0} messages behind its thread and was ended (is a subscriber or a tool answer stuck?)")]
    Overflow(usize),
    #[error("the turn made no progress for {0:?}; interrupted")]
    IdleTimeout(Duration),
    #[error("the turn ran longer than {0:?}; interrupted")]
    HardTimeout(Duration),
}

pub(super) fn stderr_suffix(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; last stderr lines:\n  {}", lines.join("\n  "))
    }
}

impl SessionError {
    /// True when Codex could not be started or the handshake failed (CLI exit 3).
    pub fn is_startup(&self) -> bool {
        matches!(
            self,
            SessionError::BinaryNotFound(_)
                | SessionError::Spawn { .. }
                | SessionError::Handshake(_)
                | SessionError::HandshakeFailed { .. }
                | SessionError::VersionTooOld { .. }
        )
    }
}

/// A server request handed to the handler: typed once ([`Request`]), answered with its `id`.
pub type ServerRequest = Request;

/// The answer to a server request: a result, or a JSON-RPC error.
pub type HandlerResult = Result<Value, RpcError>;
/// A boxed handler future.
pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = HandlerResult> + Send + 'a>>;

/// Answers Codex's server requests (dynamic tool calls, approvals, ...).
pub trait ServerRequestHandler: Send + Sync {
    fn handle<'a>(&'a self, request: &'a ServerRequest) -> HandlerFuture<'a>;
}

/// Limits of one turn.
#[derive(Clone, Copy, Debug)]
pub struct TurnLimits {
    /// No notification of this turn for this long ends it.
    pub idle: Duration,
    /// The turn never runs longer than this.
    pub hard: Duration,
    /// How long `turn/interrupt` gets to end the turn before the process is killed.
    pub interrupt_grace: Duration,
    /// After an agent message of the turn, with nothing of the turn's items after it: how long
    /// `turn/completed` may keep us waiting before the turn is taken as completed (recovered).
    pub completion_grace: Duration,
}

impl TurnLimits {
    /// No progress for this long ends a turn (`--idle-timeout`).
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(300);
    /// No turn runs longer (`--turn-timeout`).
    pub const DEFAULT_HARD: Duration = Duration::from_secs(3600);
    /// How long `turn/interrupt` gets before the process is killed.
    pub const DEFAULT_INTERRUPT_GRACE: Duration = Duration::from_secs(5);
    /// How long a final agent message waits for its `turn/completed` (`--completion-grace`).
    pub const DEFAULT_COMPLETION_GRACE: Duration = Duration::from_secs(30);
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            idle: Self::DEFAULT_IDLE,
            hard: Self::DEFAULT_HARD,
            interrupt_grace: Self::DEFAULT_INTERRUPT_GRACE,
            completion_grace: Self::DEFAULT_COMPLETION_GRACE,
        }
    }
}

/// What a turn produced, as the observer sees it.
#[derive(Debug)]
pub enum TurnEvent<'a> {
    /// A notification: `params` are Codex's bytes (parse them with `RawParams::parse`), `kind`
    /// what the one pass over the line typed of it (a turn's start and end, an agent message,
    /// an error), `turn_id` the turn it names, if any.
    Notification {
        method: &'a str,
        params: &'a crate::protocol::wire::RawParams,
        kind: &'a crate::protocol::inbound::NotificationKind,
        turn_id: Option<&'a str>,
    },
    ServerRequest {
        request: &'a ServerRequest,
    },
    Answered {
        id: &'a RequestId,
        answer: &'a HandlerResult,
    },
}

/// How a turn ended. Its wire name (`completed`, `failed`, `interrupted`) is Codex's and ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    Completed,
    Failed,
    Interrupted,
    /// clawbridge's own: the app-server went away under the turn (serve's pool restarts it;
    /// the session's next run resumes the thread).
    AppServerLost,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::AppServerLost => "appServerLost",
        }
    }
}

/// The end of a turn.
#[derive(Clone, Debug)]
pub struct TurnOutcome {
    pub thread_id: String,
    pub turn_id: String,
    pub status: TurnStatus,
    /// The turn's error message, from `turn/completed` or an `error` notification.
    pub error: Option<String>,
    pub agent_messages: Vec<String>,
    pub notifications: usize,
    pub server_requests: usize,
    /// Set when the end was inferred rather than told: `missing turn/completed` (the turn's
    /// last agent message came, its `turn/completed` did not within the completion grace).
    pub recovered: Option<&'static str>,
}

/// [`TurnOutcome::recovered`] of a turn whose `turn/completed` never came.
pub const MISSING_TURN_COMPLETED: &str = "missing turn/completed";

/// Where a turn's inbound messages come from.
/// Where a turn's inbound messages come from, typed ([`Inbound`]): a session's own event stream
/// (typed as it is read) or a hub route (typed once by the hub's router).
pub trait EventSource: Send {
    fn recv(&mut self) -> impl Future<Output = Option<Inbound>> + Send;
}

impl EventSource for Events {
    async fn recv(&mut self) -> Option<Inbound> {
        Events::recv(self).await.map(Inbound::from_incoming)
    }
}

impl EventSource for mpsc::Receiver<Inbound> {
    fn recv(&mut self) -> impl Future<Output = Option<Inbound>> + Send {
        mpsc::Receiver::recv(self)
    }
}

/// Why a turn ended early.
#[derive(Debug)]
pub enum TurnFailure {
    /// The message source closed (the app-server went away).
    Closed,
    Peer(PeerError),
    /// The turn timed out; `kill` is set when `turn/interrupt` did not end it either.
    Timeout {
        error: SessionError,
        kill: bool,
    },
}

/// Send a request while buffering whatever arrives before its answer into `early`
/// (notifications, and server requests the next turn answers): nothing is lost and the bounded
/// source never blocks the reader.
pub async fn request_buffering<M: Method, S: EventSource>(
    peer: &Peer,
    source: &mut S,
    early: &mut Vec<Inbound>,
    params: &M::Params,
) -> Result<M::Result, PeerError> {
    let request = peer.call::<M>(params);
    tokio::pin!(request);
    let mut open = true;
    loop {
        tokio::select! {
            result = &mut request => return result,
            event = source.recv(), if open => match event {
                Some(message) => early.push(message),
                None => open = false,
            },
        }
    }
}

/// Whether a message belongs to this thread and turn (for the idle timer).
pub fn is_of_turn(message: &Inbound, thread_id: &str, turn_id: &str) -> bool {
    message
        .scope()
        .is_some_and(|scope| scope.is_turn(thread_id, turn_id))
}

/// Run one turn to its end.
pub async fn drive_turn<S: EventSource>(
    peer: &Peer,
    source: &mut S,
    early: &mut Vec<Inbound>,
    turn: &TurnStartParams,
    handler: &dyn ServerRequestHandler,
    observer: &mut (dyn FnMut(TurnEvent<'_>) + Send),
    limits: TurnLimits,
) -> Result<TurnOutcome, TurnFailure> {
    let hard_deadline = Instant::now() + limits.hard;
    let response = request_buffering::<TurnStart, _>(peer, source, early, turn)
        .await
        .map_err(TurnFailure::Peer)?;
    let thread_id = turn.thread_id.clone();
    let mut outcome = TurnOutcome {
        thread_id: thread_id.clone(),
        turn_id: response.turn.id,
        status: TurnStatus::Completed,
        error: None,
        agent_messages: Vec::new(),
        notifications: 0,
        server_requests: 0,
        recovered: None,
    };
    let mut idle_deadline = Instant::now() + limits.idle;
    // Set by an agent message of this turn, cleared by any later item of it.
    let mut completion_deadline: Option<Instant> = None;
    // Messages that arrived before the turn id was known come first, then those that arrived
    // while a server request was being answered.
    let mut buffered: std::collections::VecDeque<Inbound> = std::mem::take(early).into();
    loop {
        let mut now = Instant::now();
        let deadline = idle_deadline.min(hard_deadline);
        let deadline = completion_deadline.map_or(deadline, |grace| grace.min(deadline));
        // A message already waiting (a streamed reply comes in bursts) is taken without arming a
        // timer; the deadlines are checked on the clock read above, and once one has passed the
        // select below handles it.
        let ready = match buffered.pop_front() {
            Some(message) => Some(message),
            None if now < deadline => source
                .recv()
                .now_or_never()
                .map(|event| event.ok_or(TurnFailure::Closed))
                .transpose()?,
            None => None,
        };
        let message = match ready {
            Some(message) => message,
            None => {
                let event = tokio::select! {
                    event = source.recv() => event,
                    _ = tokio::time::sleep_until(deadline) => {
                        if completion_deadline.is_some_and(|grace| Instant::now() >= grace) {
                            tracing::warn!(
                                "turn {} on thread {}: no turn/completed {:?} after its last agent message; taken as completed",
                                outcome.turn_id,
                                outcome.thread_id,
                                limits.completion_grace
                            );
                            outcome.status = TurnStatus::Completed;
                            outcome.recovered = Some(MISSING_TURN_COMPLETED);
                            return Ok(outcome);
                        }
                        let error = if Instant::now() >= hard_deadline {
                            SessionError::HardTimeout(limits.hard)
                        } else {
                            SessionError::IdleTimeout(limits.idle)
                        };
                        let ended = interrupt(peer, source, &outcome, limits, &error).await;
                        return Err(TurnFailure::Timeout { error, kill: !ended });
                    }
                };
                // The wait may have been long: the idle timer restarts from the arrival.
                now = Instant::now();
                event.ok_or(TurnFailure::Closed)?
            }
        };
        let of_this_turn = is_of_turn(&message, &thread_id, &outcome.turn_id);
        let item_of_this_turn = of_this_turn
            && message
                .method()
                .is_some_and(|method| method.starts_with("item/"));
        let messages_before = outcome.agent_messages.len();
        if let Some(done) = observe(
            peer,
            message,
            &mut outcome,
            observer,
            handler,
            hard_deadline,
            Waiting {
                source: &mut *source,
                held: &mut buffered,
                limits,
            },
        )
        .await?
        {
            return Ok(done);
        }
        if of_this_turn {
            idle_deadline = now + limits.idle;
        }
        if outcome.agent_messages.len() > messages_before {
            completion_deadline = Some(now + limits.completion_grace);
        } else if item_of_this_turn {
            completion_deadline = None;
        }
    }
}

/// Messages a run holds while it answers a server request (the same bound as a hub route).
pub const HELD_WHILE_ANSWERING: usize = 1024;

/// What a turn keeps reading while it waits on an answer: its source, where the messages go
/// meanwhile, and its limits.
struct Waiting<'a, S> {
    source: &'a mut S,
    held: &'a mut std::collections::VecDeque<Inbound>,
    limits: TurnLimits,
}

/// Handle one inbound message; `Some` when the turn is over.
#[allow(clippy::too_many_arguments)]
async fn observe<S: EventSource>(
    peer: &Peer,
    message: Inbound,
    outcome: &mut TurnOutcome,
    observer: &mut (dyn FnMut(TurnEvent<'_>) + Send),
    handler: &dyn ServerRequestHandler,
    hard_deadline: Instant,
    waiting: Waiting<'_, S>,
) -> Result<Option<TurnOutcome>, TurnFailure> {
    match message {
        Inbound::Notification(notification) => {
            outcome.notifications += 1;
            let scope = notification.scope();
            observer(TurnEvent::Notification {
                method: &notification.method,
                params: &notification.params,
                kind: &notification.kind,
                turn_id: scope.turn_id.as_deref(),
            });
            let ours = notification.scope().turn_id.as_deref() == Some(outcome.turn_id.as_str());
            match notification.kind {
                NotificationKind::AgentMessage { text } if ours => {
                    outcome.agent_messages.push(text);
                }
                NotificationKind::Error { message } if ours => outcome.error = message,
                NotificationKind::TurnCompleted { state, error } if ours => {
                    outcome.status = match state {
                        Some(TurnState::Completed) => TurnStatus::Completed,
                        Some(TurnState::Interrupted) => TurnStatus::Interrupted,
                        _ => TurnStatus::Failed,
                    };
                    if error.is_some() {
                        outcome.error = error;
                    }
                    return Ok(Some(outcome.clone()));
                }
                _ => {}
            }
            Ok(None)
        }
        Inbound::Request(request) => {
            outcome.server_requests += 1;
            let id = request.id.clone();
            observer(TurnEvent::ServerRequest { request: &request });
            // The idle timer is paused while we answer; the hard cap still applies. The source
            // is read meanwhile (held for after the answer, bounded): a run that falls too far
            // behind, or whose source closes, ends now, not when the answer finally comes.
            let Waiting {
                source,
                held,
                limits,
            } = waiting;
            let handling = handler.handle(&request);
            tokio::pin!(handling);
            let answer = loop {
                tokio::select! {
                    answer = &mut handling => break answer,
                    _ = tokio::time::sleep_until(hard_deadline) => break Err(RpcError {
                        code: INTERNAL_ERROR,
                        message: "clawbridge: the turn's time ran out while answering".to_string(),
                        data: None,
                    }),
                    event = source.recv() => match event {
                        Some(message) if held.len() < HELD_WHILE_ANSWERING => held.push_back(message),
                        Some(_) => {
                            let error = SessionError::Overflow(HELD_WHILE_ANSWERING);
                            tracing::error!("the turn {} on thread {}: {error}", outcome.turn_id, outcome.thread_id);
                            // Interrupted, not killed: the other threads of the app-server go on.
                            let _ = interrupt(peer, source, outcome, limits, &error).await;
                            return Err(TurnFailure::Timeout { error, kill: false });
                        }
                        None => return Err(TurnFailure::Closed),
                    },
                }
            };
            observer(TurnEvent::Answered {
                id: &id,
                answer: &answer,
            });
            let sent = match answer {
                Ok(result) => peer.respond(id, result).await,
                Err(error) => peer.respond_error(id, error.code, error.message).await,
            };
            sent.map_err(|_| TurnFailure::Closed)?;
            Ok(None)
        }
        Inbound::Response(_) => Ok(None),
    }
}

/// `turn/interrupt` and a grace period for `turn/completed`; `true` when the turn ended.
async fn interrupt<S: EventSource>(
    peer: &Peer,
    source: &mut S,
    outcome: &TurnOutcome,
    limits: TurnLimits,
    error: &SessionError,
) -> bool {
    tracing::warn!("{error}; sending turn/interrupt");
    let params = crate::protocol::methods::TurnInterruptParams {
        thread_id: outcome.thread_id.clone(),
        turn_id: outcome.turn_id.clone(),
    };
    let ended = async {
        let _ = peer
            .call::<crate::protocol::methods::TurnInterrupt>(&params)
            .await;
        while let Some(message) = source.recv().await {
            if let Inbound::Notification(notification) = &message {
                let ours =
                    notification.scope().turn_id.as_deref() == Some(outcome.turn_id.as_str());
                if ours && matches!(notification.kind, NotificationKind::TurnCompleted { .. }) {
                    return true;
                }
            }
        }
        false
    };
    tokio::time::timeout(limits.interrupt_grace, ended)
        .await
        .unwrap_or(false)
}
