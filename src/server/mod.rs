//! The bridge service: OpenClaw-side clients drive Codex through clawbridge over JSON-RPC
//! (jsonrpsee; HTTP and WebSocket on one port).
//!
//! Layout: [`ServeConfig`] is the validated command line; [`start`] binds and registers the
//! methods; [`Bridge`] holds the shared state: one [`CodexHub`] (one app-server, many threads,
//! respawned after a crash), session bindings (`sessionKey` -> Codex thread, persisted under the
//! state dir so a restart resumes threads), per-session queues (runs of one session run in order,
//! different sessions in parallel), and each run's event log, which subscribers replay from the
//! start so nothing is missed however late they subscribe.
//!
//! Safe by default (docs/threat-model.md): [`guard`] authenticates every request with a bearer
//! token ([`token`] generates and keeps one when the operator gives none) and refuses foreign
//! `Host` and `Origin` headers; run documents are confined to the roots and capped at the
//! operator's sandbox ceiling; a run may only use its own session's thread; run, tool-call and
//! approval ids are random.
//!
//! Built to run for days: file I/O and parsing run on a bounded blocking pool under a
//! per-request deadline; finished runs, their event logs and idle session queues are pruned;
//! [`state`] holds the state-dir lock and never drops a corrupt bindings file silently;
//! [`Running::shutdown`] ends running turns cleanly on SIGTERM.
//!
//! Methods: `bridge.params`, `bridge.context`, `bridge.prompt`, `bridge.runStart`,
//! `bridge.subscribeRun` (notifications `bridge.runEvent`), `bridge.toolResult`,
//! `bridge.approval`, `bridge.runInterrupt`, `bridge.status`, `rpc.discover` ([`api`] describes
//! them all as OpenRPC, from the types the handlers parse and answer with).

use std::collections::HashMap;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonrpsee::server::{PendingSubscriptionSink, RpcModule, Server, ServerHandle};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};

use crate::app::commands;
use crate::app::events::RunEvent;
use crate::app::offline::{OfflineHome, ResponsesStub, StubScript};
use crate::codex::client::handler::DefaultHandler;
use crate::codex::client::hub::CodexHub;
use crate::codex::client::peer::PeerConfig;
use crate::codex::client::process::SpawnOptions;
use crate::codex::client::session::{
    HandlerFuture, ServerRequest, ServerRequestHandler, SessionError, TurnEvent, TurnLimits,
};
use crate::codex::protocol::inbound::RequestKind;
use crate::codex::protocol::methods::{
    ThreadUnsubscribe, ThreadUnsubscribeParams, TurnInterrupt, TurnInterruptParams,
};
use crate::codex::protocol::params::{AskForApproval, CodexParams, ThreadParams};
use crate::config::{ApprovalPolicy, Run, RunDocument, SandboxMode};
use crate::skills::SkillCache;
use crate::support::fs::Roots;
use crate::support::sync::lock;
use crate::translate::params::{dynamic_tools, thread_config};
use crate::translate::{translate, TranslateOptions};

pub mod api;
pub mod guard;
pub mod idle;
pub mod state;
pub mod token;

pub use guard::Caller;
pub use state::{Binding, BindingFile};

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
}

fn rpc_error(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message.into(), None::<()>)
}

/// An error's message followed by its sources (`a: b: c`), so clients see the cause.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A library error as an API error: the code follows from the kind.
fn library_error(error: crate::Error) -> ErrorObjectOwned {
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
fn random_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

/// Validated `clawbridge serve` settings.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// `--token` / `CLAWBRIDGE_TOKEN`; without one (and without `no_auth`) the service uses
    /// `<state-dir>/token`, generating it on first start.
    pub token: Option<String>,
    /// `--no-auth`: no token at all (loopback only, with a warning).
    pub no_auth: bool,
    /// `--allow-origin`: browser origins that may call (every other `Origin` gets 403).
    pub allow_origins: Vec<String>,
    /// `--allow-host`: `Host` values accepted besides the bound address and loopback names.
    pub allow_hosts: Vec<String>,
    /// `--max-sandbox`: the most a run may ask for; runs that name none get it.
    pub max_sandbox: SandboxMode,
    /// Canonical workspace roots; run paths must lie under one of them.
    pub workspace_roots: Vec<PathBuf>,
    /// The Codex CLI runs use, or why there is none: `serve` starts without one (params, context
    /// and prompt need no Codex); `bridge.runStart` then fails with 4100 and this reason.
    pub codex_bin: CodexBinary,
    pub codex_home: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub offline: bool,
    pub stub_script: StubScript,
    pub limits: TurnLimits,
    /// How long a dynamic tool call or approval waits for the client's answer.
    pub answer_timeout: Duration,
    pub max_request_bytes: u32,
    /// `--request-timeout`: the deadline of one request's file I/O and parsing.
    pub request_timeout: Duration,
    /// `--max-finished-runs`: finished runs kept replayable (the oldest are forgotten first).
    pub max_finished_runs: usize,
    /// `--finished-run-ttl`: how long a finished run stays replayable.
    pub finished_run_ttl: Duration,
    /// Bytes of events one run's log keeps (the oldest are dropped past it).
    pub max_run_log_bytes: usize,
    /// `--max-connections`: open connections at once (more get 429 "Too many connections").
    pub max_connections: u32,
    /// `--idle-timeout`: a connection without traffic this long is closed.
    pub idle_timeout: Duration,
    /// `--max-runs`: runs in progress at once (more get 4290).
    pub max_runs: usize,
    /// `--max-run-bytes`: the largest params a run-document method takes (checked before any
    /// parse; the parse itself runs on the bounded blocking pool).
    pub max_run_bytes: usize,
    /// `--clients FILE`: named client tokens (default `<state-dir>/clients.json`, if present).
    pub clients_file: Option<PathBuf>,
    /// `--recycle-after-threads`: an app-server that opened this many threads is replaced (it
    /// drains: runs on it finish, new runs go to a fresh one; bound threads resume there).
    pub recycle_after_threads: usize,
    /// `--recycle-rss-mb`: likewise once its resident memory passes this many MiB.
    pub recycle_rss_bytes: u64,
    /// `--max-sessions`: session bindings kept (a new session past it pushes out an idle one).
    pub max_sessions: usize,
    /// How long a subscriber may leave its queue full before it is dropped.
    pub subscriber_stall: Duration,
}

/// The Codex CLI a service pairs with, if one was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodexBinary {
    Found(PathBuf),
    /// None found: why, and how to install one (the message of `find_codex_binary`).
    Missing(String),
}

impl From<PathBuf> for CodexBinary {
    fn from(path: PathBuf) -> Self {
        CodexBinary::Found(path)
    }
}

/// Defaults of the bounds above (the CLI's flag defaults).
pub const DEFAULT_MAX_FINISHED_RUNS: usize = 256;
pub const DEFAULT_FINISHED_RUN_TTL: Duration = Duration::from_secs(600);
pub const DEFAULT_MAX_RUN_LOG_BYTES: usize = 8 * 1024 * 1024;
pub const DEFAULT_MAX_CONNECTIONS: u32 = 256;
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request body (a run document with inline tool specs).
pub const DEFAULT_MAX_REQUEST_BYTES: u32 = 16 * 1024 * 1024;
/// Threads an app-server opens before it is recycled (Codex keeps about 1.1 MB per thread).
pub const DEFAULT_RECYCLE_AFTER_THREADS: usize = 500;
/// Resident memory past which an app-server is recycled.
pub const DEFAULT_RECYCLE_RSS_MB: u64 = 1024;
/// Runs in progress at once (each holds a Codex turn and its event log).
pub const DEFAULT_MAX_RUNS: usize = 64;
/// Largest run document (OpenClaw's whole tool catalog inline is about 200 kB).
pub const DEFAULT_MAX_RUN_BYTES: usize = 2 * 1024 * 1024;
/// How long a subscriber may leave its queue full before it is dropped (it can subscribe again:
/// the log replays).
pub const DEFAULT_SUBSCRIBER_STALL: Duration = Duration::from_secs(30);
/// How long an accepted socket may stay without an authenticated request.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The accept loop's pause after an error (a full file table), doubling up to the max.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Messages a connection's outgoing queue holds (jsonrpsee's default is 1024).
const CONNECTION_QUEUE: u32 = 128;

impl ServeConfig {
    /// The defaults of `clawbridge serve` (loopback `127.0.0.1:7077`, a generated token, the
    /// `workspace-write` ceiling, every bound at its default) for one Codex binary, roots and
    /// state dir; callers change fields with struct update syntax.
    pub fn new(
        codex_bin: impl Into<CodexBinary>,
        workspace_roots: Vec<PathBuf>,
        state_dir: PathBuf,
    ) -> Self {
        let codex_bin = codex_bin.into();
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7077)),
            token: None,
            no_auth: false,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            max_sandbox: SandboxMode::WorkspaceWrite,
            workspace_roots,
            codex_bin,
            codex_home: None,
            state_dir,
            offline: false,
            stub_script: StubScript::default(),
            limits: TurnLimits::default(),
            answer_timeout: DEFAULT_ANSWER_TIMEOUT,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_finished_runs: DEFAULT_MAX_FINISHED_RUNS,
            finished_run_ttl: DEFAULT_FINISHED_RUN_TTL,
            max_run_log_bytes: DEFAULT_MAX_RUN_LOG_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_runs: DEFAULT_MAX_RUNS,
            max_run_bytes: DEFAULT_MAX_RUN_BYTES,
            clients_file: None,
            recycle_after_threads: DEFAULT_RECYCLE_AFTER_THREADS,
            recycle_rss_bytes: DEFAULT_RECYCLE_RSS_MB * 1024 * 1024,
            max_sessions: DEFAULT_MAX_SESSIONS,
            subscriber_stall: DEFAULT_SUBSCRIBER_STALL,
        }
    }
}

/// Session bindings kept at most by default (`sessions.json` then stays under 8 MB: keys are at
/// most 512 bytes, far below the 64 MiB its loader accepts).
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// The most `--max-sessions` may be: the state file stays below what its loader accepts.
pub const MAX_SESSIONS_LIMIT: usize = 50_000;

/// Translations running on the blocking pool at once; more wait (within their deadline).
const BLOCKING_SLOTS: usize = 8;

/// Why the service cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--no-auth is allowed only on a loopback address, not on {0}")]
    NoAuthOffLoopback(SocketAddr),
    /// A flag or the token file holds something unusable; the message names it.
    #[error("{0}")]
    Usage(String),
    #[error("--workspace-root {}: {message}", path.display())]
    BadRoot { path: PathBuf, message: String },
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: SocketAddr, message: String },
    #[error(transparent)]
    Setup(#[from] crate::Error),
}

impl ServeConfig {
    /// Check the settings: loopback or a token; roots that exist (canonicalized).
    pub fn validate(mut self) -> Result<Self, ServeError> {
        if self.no_auth {
            if !self.listen.ip().is_loopback() {
                return Err(ServeError::NoAuthOffLoopback(self.listen));
            }
            if self.token.is_some() {
                return Err(ServeError::Usage(
                    "--no-auth and --token (or CLAWBRIDGE_TOKEN) exclude each other".into(),
                ));
            }
        }
        if let Some(token) = &self.token {
            token::validate(token, "--token (or CLAWBRIDGE_TOKEN)")?;
        }
        guard::host_filter(&self.allow_hosts).map_err(ServeError::Usage)?;
        let mut roots = Vec::new();
        for root in &self.workspace_roots {
            let canonical = root.canonicalize().map_err(|error| ServeError::BadRoot {
                path: root.clone(),
                message: error.to_string(),
            })?;
            if !canonical.is_dir() {
                return Err(ServeError::BadRoot {
                    path: root.clone(),
                    message: "not a directory".into(),
                });
            }
            roots.push(canonical);
        }
        if roots.is_empty() {
            return Err(ServeError::BadRoot {
                path: PathBuf::from("<none>"),
                message: "give at least one --workspace-root".into(),
            });
        }
        self.workspace_roots = roots;
        Ok(self)
    }
}

/// One run's state and event log.
struct RunState {
    run_id: String,
    /// The client that started it: only it (or an operator) sees and acts on it.
    owner: String,
    session_key: String,
    thread_id: Mutex<Option<String>>,
    turn_id: Mutex<Option<String>>,
    events: Mutex<EventLog>,
    /// (events ever logged, ended).
    progress: watch::Sender<(usize, bool)>,
    /// When the run ended (finished runs are forgotten after `--finished-run-ttl`).
    ended_at: Mutex<Option<std::time::Instant>>,
}

/// A run's event log, serialized once, capped in bytes: past the cap the oldest events are
/// dropped, and a late subscriber is told how many it missed (`eventsDropped`).
#[derive(Default)]
struct EventLog {
    events: std::collections::VecDeque<Arc<serde_json::value::RawValue>>,
    /// Absolute index of `events[0]`.
    first: usize,
    bytes: usize,
    cap: usize,
}

impl EventLog {
    fn push(&mut self, event: &RunEvent) -> usize {
        let Some(raw) = event.to_raw() else {
            return self.first + self.events.len();
        };
        self.bytes += raw.get().len();
        self.events.push_back(Arc::from(raw));
        while self.bytes > self.cap && self.events.len() > 1 {
            if let Some(old) = self.events.pop_front() {
                self.bytes -= old.get().len();
                self.first += 1;
            }
        }
        self.first + self.events.len()
    }
}

impl RunState {
    fn push(&self, event: RunEvent) {
        let count = lock(&self.events).push(&event);
        self.progress.send_modify(|state| state.0 = count);
    }

    fn finish(&self, event: RunEvent) {
        self.push(event);
        *lock(&self.ended_at) = Some(std::time::Instant::now());
        self.progress.send_modify(|state| state.1 = true);
    }
}

struct PendingCall {
    run_id: String,
    answer: oneshot::Sender<Value>,
}

/// Shared state of the service.
pub struct Bridge {
    config: ServeConfig,
    /// The current app-server; readers never wait for a spawn.
    hub: Mutex<Option<Arc<CodexHub>>>,
    /// App-servers being recycled: they take no new runs and stop when their last run ends.
    draining: Mutex<Vec<Arc<CodexHub>>>,
    /// App-servers recycled so far.
    recycled: std::sync::atomic::AtomicUsize,
    /// Serializes spawns (held across the up-to-20 s handshake; nobody else waits on it).
    spawning: tokio::sync::Mutex<()>,
    /// Set by [`Running::shutdown`]: new runs are refused.
    shutting_down: std::sync::atomic::AtomicBool,
    /// Bounds the translations running on the blocking pool at once.
    blocking_slots: Arc<tokio::sync::Semaphore>,
    offline: Option<(ResponsesStub, OfflineHome)>,
    bindings: Mutex<BindingFile>,
    session_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    runs: Mutex<HashMap<String, Arc<RunState>>>,
    pending_tools: Mutex<HashMap<String, PendingCall>>,
    /// Approval id -> (its run, the answer).
    pending_approvals: Mutex<HashMap<String, (String, oneshot::Sender<bool>)>>,
    /// Threads a run is using right now: one run per thread at a time.
    busy_threads: Mutex<HashSet<String>>,
    roots: Roots,
    skill_cache: Arc<SkillCache>,
    /// One serve per state dir, for as long as this one runs (released by [`Running::stop`]).
    state_lock: Mutex<Option<state::StateLock>>,
}

impl Bridge {
    fn bindings_path(&self) -> PathBuf {
        state::bindings_path(&self.config.state_dir)
    }

    fn save_bindings(&self) -> Result<(), ErrorObjectOwned> {
        let text = {
            let bindings = lock(&self.bindings);
            // A failed serialization writes nothing: the file on disk stays as it was.
            serde_json::to_string_pretty(&*bindings)
                .map_err(|error| rpc_error(codes::INTERNAL, format!("sessions.json: {error}")))?
                + "\n"
        };
        crate::support::fs::write_private(&self.bindings_path(), text.as_bytes())
            .map_err(|error| rpc_error(codes::INTERNAL, with_causes(&error)))
    }

    /// The `CODEX_HOME` the app-server gets.
    fn codex_home(&self) -> PathBuf {
        match (&self.offline, &self.config.codex_home) {
            (Some((_, home)), _) => home.path.clone(),
            (None, Some(home)) => home.clone(),
            (None, None) => std::env::var_os("CODEX_HOME")
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
                .or_else(|| dirs::home_dir().map(|home| home.join(".codex")))
                .unwrap_or_else(|| PathBuf::from(".codex")),
        }
    }

    /// The live hub, starting one if there is none or the last one died.
    async fn hub(&self, cwd: &Path) -> Result<Arc<CodexHub>, ErrorObjectOwned> {
        if let Some(hub) = self.current_hub() {
            return Ok(hub);
        }
        let _spawning = self.spawning.lock().await;
        if let Some(hub) = self.current_hub() {
            return Ok(hub);
        }
        let codex_home = self.codex_home();
        let binary = match &self.config.codex_bin {
            CodexBinary::Found(path) => path.clone(),
            CodexBinary::Missing(reason) => {
                return Err(rpc_error(codes::CODEX_UNAVAILABLE, reason.clone()))
            }
        };
        let spawn = SpawnOptions {
            binary,
            codex_home,
            cwd: cwd.to_path_buf(),
            isolate_environment: self.config.offline,
        };
        let hub = CodexHub::spawn(&spawn, PeerConfig::default(), Duration::from_secs(20))
            .await
            .map_err(|error| rpc_error(codes::CODEX_UNAVAILABLE, error.to_string()))?;
        tracing::info!(
            "codex app-server {} started",
            hub.codex_version.as_deref().unwrap_or("?")
        );
        *lock(&self.hub) = Some(Arc::clone(&hub));
        Ok(hub)
    }

    /// Send `turn/interrupt` for a run's turn.
    async fn interrupt(&self, state: &RunState) -> Result<(), ErrorObjectOwned> {
        let ids = (lock(&state.thread_id).clone(), lock(&state.turn_id).clone());
        let (Some(thread_id), Some(turn_id)) = ids else {
            return Err(rpc_error(
                codes::NOT_FOUND,
                format!("run {} has no turn in progress", state.run_id),
            ));
        };
        let hub = self
            .current_hub()
            .ok_or_else(|| rpc_error(codes::NOT_FOUND, "no codex app-server is running"))?;
        hub.peer()
            .call::<TurnInterrupt>(&TurnInterruptParams { thread_id, turn_id })
            .await
            .map_err(|error| rpc_error(codes::THREAD_FAILED, error.to_string()))?;
        Ok(())
    }

    /// After a run on `hub` ended: recycle it once it opened too many threads or grew too big
    /// (it takes no new runs; the next run starts a fresh app-server and resumes its bound
    /// thread there), and stop recycled app-servers whose last run ended.
    async fn recycle_if_due(&self, hub: &Arc<CodexHub>) {
        let threads = hub.threads_opened();
        let rss = hub.rss_bytes().unwrap_or(0);
        let due =
            threads >= self.config.recycle_after_threads || rss >= self.config.recycle_rss_bytes;
        if due {
            let mut current = lock(&self.hub);
            if current.as_ref().is_some_and(|live| Arc::ptr_eq(live, hub)) {
                *current = None;
                lock(&self.draining).push(Arc::clone(hub));
                self.recycled
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tracing::info!(
                    "recycling codex app-server {:?}: {threads} threads opened, {} MiB resident",
                    hub.pid,
                    rss / (1024 * 1024)
                );
            }
        }
        let idle: Vec<Arc<CodexHub>> = {
            let mut draining = lock(&self.draining);
            let (idle, busy) = draining
                .drain(..)
                .partition(|old| old.active_threads() == 0 || !old.is_alive());
            *draining = busy;
            idle
        };
        for old in idle {
            old.kill().await;
        }
    }

    /// Forget finished runs past the TTL or past the count bound (oldest first), and the session
    /// queues nobody waits in.
    fn prune(&self) {
        let now = std::time::Instant::now();
        let ttl = self.config.finished_run_ttl;
        let mut runs = lock(&self.runs);
        let mut finished: Vec<(std::time::Instant, String)> = runs
            .values()
            .filter_map(|run| lock(&run.ended_at).map(|ended| (ended, run.run_id.clone())))
            .collect();
        finished.sort();
        let excess = finished.len().saturating_sub(self.config.max_finished_runs);
        for (index, (ended, run_id)) in finished.iter().enumerate() {
            if index < excess || now.duration_since(*ended) >= ttl {
                runs.remove(run_id);
            }
        }
        drop(runs);
        lock(&self.session_locks).retain(|_, queue| Arc::strong_count(queue) > 1);
    }

    /// The runs that have not ended.
    fn running_runs(&self) -> Vec<Arc<RunState>> {
        lock(&self.runs)
            .values()
            .filter(|run| !run.progress.borrow().1)
            .cloned()
            .collect()
    }

    /// The live app-server, if there is one (never waits).
    fn current_hub(&self) -> Option<Arc<CodexHub>> {
        lock(&self.hub)
            .as_ref()
            .filter(|hub| hub.is_alive())
            .cloned()
    }

    /// Run file I/O and parsing on the blocking pool (a bounded number at once), under the
    /// per-request deadline: a stuck file or a slow parse fails this request only, never the
    /// async workers that serve everyone else.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Bridge) -> Result<T, ErrorObjectOwned> + Send + 'static,
    ) -> Result<T, ErrorObjectOwned> {
        let limit = self.config.request_timeout;
        let timed_out = || {
            rpc_error(
                codes::TIMEOUT,
                format!("the request did not finish within {limit:?} (--request-timeout)"),
            )
        };
        let job = async {
            let permit = Arc::clone(&self.blocking_slots)
                .acquire_owned()
                .await
                .map_err(|_| rpc_error(codes::INTERNAL, "the service is shutting down"))?;
            let bridge = Arc::clone(self);
            // The deadline also reaches the work itself, so a long walk stops and frees its
            // slot instead of running on after the client got 4080.
            let deadline = std::time::Instant::now() + limit;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                crate::support::deadline::within(deadline, || work(&bridge))
            })
            .await
            .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))?
        };
        tokio::time::timeout(limit, job)
            .await
            .unwrap_or_else(|_| Err(timed_out()))
    }

    fn translate_options(&self) -> TranslateOptions {
        commands::translate_options(
            Some(&self.config.state_dir),
            None,
            Some(Arc::clone(&self.skill_cache)),
        )
    }

    /// Parse a run document sent by a client: the sandbox capped at the ceiling, every path it
    /// names checked against the roots (and again wherever a file is opened).
    fn load_run(&self, params: &Value) -> Result<Run, ErrorObjectOwned> {
        let document = params
            .get("run")
            .filter(|_| params.get("workspace").is_none())
            .unwrap_or(params);
        let source = Path::new("<request>");
        let base = self.config.workspace_roots[0].clone();
        let mut parsed = RunDocument::parse(&document.to_string(), source)
            .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        parsed.sandbox = Some(self.cap_sandbox(parsed.sandbox)?);
        parsed
            .into_run_confined(source, &base, Some(self.roots.clone()))
            .map_err(library_error)
    }

    /// The sandbox a run gets under the ceiling: the ceiling when it names none, a refusal when it
    /// asks for more.
    fn cap_sandbox(&self, asked: Option<SandboxMode>) -> Result<SandboxMode, ErrorObjectOwned> {
        let ceiling = self.config.max_sandbox;
        match asked {
            None => Ok(ceiling),
            Some(mode) if mode <= ceiling => Ok(mode),
            Some(mode) => Err(rpc_error(
                codes::FORBIDDEN,
                format!(
                    "field `sandbox`: {} is above this server's ceiling {} (the operator raises it with --max-sandbox)",
                    mode.as_str(),
                    ceiling.as_str()
                ),
            )),
        }
    }

    /// The run `run_id` if `caller` may see it; another client's run is answered like one that
    /// does not exist.
    fn visible_run(
        &self,
        caller: &Caller,
        run_id: &str,
    ) -> Result<Arc<RunState>, ErrorObjectOwned> {
        lock(&self.runs)
            .get(run_id)
            .filter(|run| caller.may_use(&run.owner))
            .cloned()
            .ok_or_else(|| rpc_error(codes::NOT_FOUND, format!("no run {run_id}")))
    }

    /// True when `caller` may act on the run `run_id` (false for an unknown one).
    fn may_use_run(&self, caller: &Caller, run_id: &str) -> bool {
        self.visible_run(caller, run_id).is_ok()
    }

    /// Refuse a session or thread of another client: a bound session is its owner's; a thread
    /// that any run still in the registry used is that run's owner's.
    fn check_ownership(&self, caller: &Caller, run: &Run) -> Result<(), ErrorObjectOwned> {
        if let Some(key) = &run.session_key {
            let owner = lock(&self.bindings)
                .sessions
                .get(key)
                .map(|binding| binding.owner_name().to_string());
            if owner.is_some_and(|owner| !caller.may_use(&owner)) {
                return Err(rpc_error(
                    codes::FORBIDDEN,
                    "field `sessionKey`: the session belongs to another client",
                ));
            }
        }
        if let Some(thread_id) = &run.thread_id {
            let foreign = lock(&self.runs).values().any(|other| {
                !caller.may_use(&other.owner)
                    && lock(&other.thread_id).as_deref() == Some(thread_id.as_str())
            });
            let bound_elsewhere = lock(&self.bindings).sessions.values().any(|binding| {
                &binding.thread_id == thread_id && !caller.may_use(binding.owner_name())
            });
            if foreign || bound_elsewhere {
                return Err(rpc_error(
                    codes::FORBIDDEN,
                    format!("field `threadId`: thread {thread_id} belongs to another client"),
                ));
            }
        }
        Ok(())
    }

    /// True when the ceiling leaves commands inside a sandbox: then no approval may take one out.
    fn approvals_bound(&self) -> bool {
        self.config.max_sandbox < SandboxMode::DangerFullAccess
    }

    /// The ceiling binds approvals too: below `danger-full-access` a run that asks for approvals
    /// (`untrusted`, `on-request`) gets Codex's granular policy that rejects every prompt to leave
    /// the sandbox, so an approving client cannot lift it (docs/threat-model.md).
    fn bind_approvals(&self, run: &Run, params: &mut CodexParams) {
        if self.approvals_bound() && run.approval_policy != ApprovalPolicy::Never {
            params.set_approval_policy(AskForApproval::SANDBOX_BOUND);
        }
    }

    /// Claim `thread_id` for one run of `session_key`: allowed when the thread is bound to that
    /// session, or bound to none and not running. Released with [`Bridge::release_thread`].
    fn claim_thread(
        &self,
        thread_id: &str,
        session_key: Option<&str>,
    ) -> Result<(), ErrorObjectOwned> {
        let owner = lock(&self.bindings)
            .sessions
            .iter()
            .find(|(_, binding)| binding.thread_id == thread_id)
            .map(|(key, _)| key.clone());
        let refused = |why: &str| {
            rpc_error(
                codes::FORBIDDEN,
                format!("field `threadId`: thread {thread_id} {why}"),
            )
        };
        if owner
            .as_deref()
            .is_some_and(|owner| Some(owner) != session_key)
        {
            return Err(refused("belongs to another session"));
        }
        if !lock(&self.busy_threads).insert(thread_id.to_string()) {
            return Err(refused("is in use by another run"));
        }
        Ok(())
    }

    fn release_thread(&self, thread_id: &str) {
        lock(&self.busy_threads).remove(thread_id);
    }
}

/// What reuses a thread: tools (without descriptions), thread config, model and developer text.
pub fn thread_fingerprint(run: &Run, developer_instructions: &str) -> String {
    let (tools, _) = dynamic_tools(run);
    let mut specs: Vec<String> = serde_json::to_value(&tools)
        .ok()
        .and_then(|value| value.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|mut spec| {
            strip_descriptions(&mut spec);
            spec.to_string()
        })
        .collect();
    specs.sort();
    let fingerprint = json!({
        "tools": specs,
        "config": thread_config(run),
        "model": run.model,
        "developerInstructions": crate::support::hex::sha256(developer_instructions.as_bytes(), 32),
    });
    crate::support::hex::sha256(fingerprint.to_string().as_bytes(), 32)
}

fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// One run's hold on a thread; dropping it frees the thread for the next run.
struct ThreadClaim {
    bridge: Arc<Bridge>,
    thread_id: String,
}

impl ThreadClaim {
    fn new(
        bridge: &Arc<Bridge>,
        thread_id: &str,
        session_key: Option<&str>,
    ) -> Result<Self, ErrorObjectOwned> {
        bridge.claim_thread(thread_id, session_key)?;
        Ok(Self {
            bridge: Arc::clone(bridge),
            thread_id: thread_id.to_string(),
        })
    }
}

impl Drop for ThreadClaim {
    fn drop(&mut self) {
        self.bridge.release_thread(&self.thread_id);
    }
}

/// Answers a run's server requests through the API clients.
struct BridgeHandler {
    bridge: Arc<Bridge>,
    run: Arc<RunState>,
}

impl ServerRequestHandler for BridgeHandler {
    fn handle<'a>(&'a self, request: &'a ServerRequest) -> HandlerFuture<'a> {
        Box::pin(async move {
            let timeout = self.bridge.config.answer_timeout;
            match &request.kind {
                RequestKind::DynamicToolCall(call) => {
                    // The client answers with a random handle, not Codex's call id, so no other
                    // client can answer this run's calls.
                    let call_id = random_id("call");
                    let tool = if call.tool.is_empty() {
                        "<unnamed>".to_string()
                    } else {
                        call.tool.clone()
                    };
                    let (answer, receiver) = oneshot::channel();
                    lock(&self.bridge.pending_tools).insert(
                        call_id.clone(),
                        PendingCall {
                            run_id: self.run.run_id.clone(),
                            answer,
                        },
                    );
                    self.run.push(RunEvent::ToolCall {
                        call_id: call_id.clone(),
                        codex_call_id: call.call_id.clone(),
                        tool: tool.clone(),
                        namespace: call.namespace.clone(),
                        arguments: call.arguments.clone(),
                    });
                    let result = match tokio::time::timeout(timeout, receiver).await {
                        Ok(Ok(answer)) => answer,
                        _ => {
                            lock(&self.bridge.pending_tools).remove(&call_id);
                            json!({"contentItems": [{"type": "inputText", "text": format!("The tool `{tool}` got no answer from OpenClaw within {timeout:?}.")}], "success": false})
                        }
                    };
                    Ok(result)
                }
                RequestKind::Approval(kind) if self.bridge.approvals_bound() => {
                    // Under the ceiling Codex is told to raise no prompt that leaves the sandbox
                    // (`bind_approvals`); one that comes anyway is declined here, unasked.
                    let reason = format!(
                        "declined by clawbridge serve: an approved command or patch may run outside the sandbox, and this server's ceiling is {} (the operator raises it with --max-sandbox danger-full-access)",
                        self.bridge.config.max_sandbox.as_str()
                    );
                    tracing::warn!("run {}: {} {reason}", self.run.run_id, request.method);
                    self.run.push(RunEvent::ApprovalDeclined {
                        method: request.method.clone(),
                        params: request.params.clone(),
                        reason,
                    });
                    Ok(kind.answer(false))
                }
                RequestKind::Approval(kind) => {
                    let approval_id = random_id("approval");
                    let (answer, receiver) = oneshot::channel();
                    lock(&self.bridge.pending_approvals)
                        .insert(approval_id.clone(), (self.run.run_id.clone(), answer));
                    self.run.push(RunEvent::ApprovalRequest {
                        approval_id: approval_id.clone(),
                        method: request.method.clone(),
                        params: request.params.clone(),
                    });
                    let approve = tokio::time::timeout(timeout, receiver)
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or(false);
                    lock(&self.bridge.pending_approvals).remove(&approval_id);
                    Ok(kind.answer(approve))
                }
                RequestKind::Other => DefaultHandler::default().handle(request).await,
            }
        })
    }
}

/// The service logs Codex's notifications; server requests become `toolCall` and
/// `approvalRequest` events in [`BridgeHandler`].
fn logged_event(event: &TurnEvent<'_>) -> Option<RunEvent> {
    matches!(event, TurnEvent::Notification { .. }).then(|| RunEvent::from_turn_event(event))
}

async fn run_start(
    bridge: Arc<Bridge>,
    caller: Caller,
    params: String,
) -> Result<api::RunStarted, ErrorObjectOwned> {
    if bridge
        .shutting_down
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return Err(rpc_error(
            codes::CODEX_UNAVAILABLE,
            "clawbridge serve is shutting down",
        ));
    }
    let running = bridge.running_runs().len();
    if running >= bridge.config.max_runs {
        return Err(rpc_error(
            codes::BUSY,
            format!(
                "{running} runs are in progress, the most this server runs at once (--max-runs); try again when one ends"
            ),
        ));
    }
    let mut run = bridge
        .blocking(move |bridge| bridge.load_run(&parse_params(&params)?))
        .await?;
    crate::app::commands::require_codex(&run).map_err(library_error)?;
    bridge.check_ownership(&caller, &run)?;
    if let CodexBinary::Missing(reason) = &bridge.config.codex_bin {
        return Err(rpc_error(codes::CODEX_UNAVAILABLE, reason.clone()));
    }
    let run_id = random_id("run");
    let session_key = run
        .session_key
        .clone()
        .unwrap_or_else(|| format!("clawbridge:{run_id}"));
    let (progress, _) = watch::channel((0usize, false));
    let state = Arc::new(RunState {
        run_id: run_id.clone(),
        owner: caller.name.clone(),
        session_key: session_key.clone(),
        thread_id: Mutex::new(None),
        turn_id: Mutex::new(None),
        events: Mutex::new(EventLog {
            cap: bridge.config.max_run_log_bytes,
            ..EventLog::default()
        }),
        ended_at: Mutex::new(None),
        progress,
    });
    bridge.prune();
    lock(&bridge.runs).insert(run_id.clone(), Arc::clone(&state));
    // Runs of one session are queued in order.
    let session_lock = Arc::clone(
        lock(&bridge.session_locks)
            .entry(session_key.clone())
            .or_default(),
    );
    let queue_guard = session_lock.lock_owned().await;

    let fail = |state: &RunState, code: i32, message: String| {
        state.finish(RunEvent::failed(None, message.clone()));
        rpc_error(code, message)
    };
    // Paths are checked again here, after the queue wait, where the files are opened.
    let translation = {
        let run = run.clone();
        bridge
            .blocking(move |bridge| {
                translate(&run, &bridge.translate_options()).map_err(library_error)
            })
            .await
            .map_err(|error| fail(&state, error.code(), error.message().to_string()))?
    };
    // A thread the document names must be this session's (or nobody's and idle).
    let mut claim = match &run.thread_id {
        Some(thread_id) => Some(
            ThreadClaim::new(&bridge, thread_id, run.session_key.as_deref())
                .map_err(|error| fail(&state, error.code(), error.message().to_string()))?,
        ),
        None => None,
    };
    // The thread's developer instructions, rendered once (the same for a start and a resume):
    // the fingerprint needs them before the thread id is known, the params reuse them.
    let developer_text = translation.developer_instructions(&run);
    let fingerprint = thread_fingerprint(&run, &developer_text);
    let bound = run
        .session_key
        .as_ref()
        .and_then(|key| lock(&bridge.bindings).sessions.get(key).cloned());
    if run.thread_id.is_none() {
        if let Some(binding) = bound.filter(|binding| binding.fingerprint == fingerprint) {
            claim = Some(
                ThreadClaim::new(&bridge, &binding.thread_id, run.session_key.as_deref())
                    .map_err(|error| fail(&state, error.code(), error.message().to_string()))?,
            );
            run.thread_id = Some(binding.thread_id);
        }
    }
    let hub = bridge
        .hub(&run.cwd)
        .await
        .map_err(|error| fail(&state, error.code(), error.message().to_string()))?;
    let mut params = translation.codex_params_with(&run, developer_text.clone());
    bridge.bind_approvals(&run, &mut params);
    // A bound thread this app-server still has loaded (same fingerprint, so the same developer
    // instructions, tools and config) needs no `thread/resume`: the turn goes straight on.
    let loaded = run
        .thread_id
        .as_deref()
        .and_then(|thread_id| hub.take_loaded(thread_id));
    let opened = match loaded {
        Some(handle) => Ok(handle),
        None => hub.open_thread(&params.thread).await,
    };
    let handle = match opened {
        Ok(handle) => handle,
        Err(SessionError::Peer(error)) if run.thread_id.is_some() => {
            tracing::warn!(
                "resume of {:?} failed ({error}); starting a new thread",
                run.thread_id
            );
            run.thread_id = None;
            claim = None;
            params = translation.codex_params_with(&run, developer_text.clone());
            bridge.bind_approvals(&run, &mut params);
            hub.open_thread(&params.thread)
                .await
                .map_err(|error| fail(&state, codes::THREAD_FAILED, error.to_string()))?
        }
        Err(error) => return Err(fail(&state, codes::THREAD_FAILED, error.to_string())),
    };
    let thread_id = handle.thread_id.clone();
    if claim.is_none() {
        // A thread Codex just created: nobody else can hold it yet.
        claim = Some(
            ThreadClaim::new(&bridge, &thread_id, run.session_key.as_deref())
                .map_err(|error| fail(&state, error.code(), error.message().to_string()))?,
        );
    }
    *lock(&state.thread_id) = Some(thread_id.clone());
    if let Some(key) = &run.session_key {
        {
            let mut bindings = lock(&bridge.bindings);
            let bound = bridge.config.max_sessions.clamp(1, MAX_SESSIONS_LIMIT);
            if !bindings.sessions.contains_key(key) && bindings.sessions.len() >= bound {
                // The state file stays far below the size its loader accepts: a session past
                // the bound pushes out an idle one (its next run starts a new thread).
                let busy = lock(&bridge.busy_threads).clone();
                let idle = bindings
                    .sessions
                    .iter()
                    .find(|(_, binding)| !busy.contains(&binding.thread_id))
                    .map(|(key, _)| key.clone());
                if let Some(evicted) = idle {
                    tracing::warn!(
                        "{bound} session bindings (--max-sessions): forgetting {evicted}"
                    );
                    bindings.sessions.remove(&evicted);
                }
            }
            bindings.sessions.insert(
                key.clone(),
                Binding {
                    thread_id: thread_id.clone(),
                    fingerprint,
                    owner: (!caller.operator).then(|| caller.name.clone()),
                },
            );
        }
        bridge
            .save_bindings()
            .map_err(|error| fail(&state, error.code(), error.message().to_string()))?;
    }
    state.push(RunEvent::Thread {
        thread_id: thread_id.clone(),
        resumed: matches!(params.thread, ThreadParams::ThreadResume(_)),
    });

    let task_bridge = Arc::clone(&bridge);
    let task_state = Arc::clone(&state);
    let limits = bridge.config.limits;
    tokio::spawn(async move {
        let _queue = queue_guard;
        let _claim = claim;
        let mut handle = handle;
        let handler = BridgeHandler {
            bridge: Arc::clone(&task_bridge),
            run: Arc::clone(&task_state),
        };
        let observer_state = Arc::clone(&task_state);
        let mut observer = move |event: TurnEvent<'_>| {
            if let TurnEvent::Notification {
                method: "turn/started",
                params,
            } = &event
            {
                let started = params.parse::<Value>().unwrap_or_default();
                if let Some(turn_id) = started["turn"]["id"].as_str() {
                    *lock(&observer_state.turn_id) = Some(turn_id.to_string());
                }
            }
            if let Some(value) = logged_event(&event) {
                observer_state.push(value);
            }
        };
        let result = hub
            .run_turn(
                &mut handle,
                &params.turn_start,
                &handler,
                &mut observer,
                limits,
            )
            .await;
        let result_ok = matches!(&result, Ok(outcome) if outcome.status == crate::codex::client::session::TurnStatus::Completed);
        let end = match result {
            Ok(outcome) => RunEvent::turn_end(&outcome),
            Err(error) => RunEvent::failed(Some(handle.thread_id.clone()), error.to_string()),
        };
        // Tool calls of this run that nobody answered are dropped with it.
        lock(&task_bridge.pending_tools).retain(|_, call| call.run_id != task_state.run_id);
        let completed = result_ok;
        task_state.finish(end);
        // Keep a thread whose turn went well loaded for the session's next run (bounded: the
        // least recently used falls out); let Codex unload any other.
        let thread_id = handle.thread_id.clone();
        drop(handle);
        let unload = if completed {
            hub.keep_loaded(&thread_id)
        } else {
            Some(thread_id)
        };
        if let Some(unload) = unload {
            let unsubscribe_params = ThreadUnsubscribeParams {
                thread_id: unload.clone(),
            };
            let unsubscribe = hub.peer().call::<ThreadUnsubscribe>(&unsubscribe_params);
            if let Ok(Err(error)) = tokio::time::timeout(Duration::from_secs(5), unsubscribe).await
            {
                tracing::debug!("thread/unsubscribe {unload}: {error}");
            }
        }
        task_bridge.recycle_if_due(&hub).await;
    });
    Ok(api::RunStarted { run_id, thread_id })
}

async fn subscribe_run(
    bridge: Arc<Bridge>,
    caller: Caller,
    params: Params<'static>,
    pending: PendingSubscriptionSink,
) -> Result<(), jsonrpsee::core::SubscriptionError> {
    let run_id: String = match params.one::<String>() {
        Ok(id) => id,
        Err(_) => match params.parse::<Value>() {
            Ok(value) => value["runId"].as_str().unwrap_or_default().to_string(),
            Err(error) => {
                pending.reject(error).await;
                return Ok(());
            }
        },
    };
    let state = match bridge.visible_run(&caller, &run_id) {
        Ok(state) => state,
        Err(error) => {
            pending.reject(error).await;
            return Ok(());
        }
    };
    let sink = pending.accept().await?;
    let mut progress = state.progress.subscribe();
    let mut sent = 0usize;
    loop {
        let (count, done) = *progress.borrow_and_update();
        let (missed, batch) = {
            let log = lock(&state.events);
            let missed = log.first.saturating_sub(sent);
            let start = sent.max(log.first) - log.first;
            let end = count.saturating_sub(log.first).min(log.events.len());
            let batch: Vec<_> = log.events.range(start..end.max(start)).cloned().collect();
            (missed, batch)
        };
        if missed > 0 {
            let marker = RunEvent::EventsDropped { count: missed }.to_value();
            send_or_drop(
                &sink,
                serde_json::value::to_raw_value(&marker)?,
                &run_id,
                bridge.config.subscriber_stall,
            )
            .await?;
            sent += missed;
        }
        for event in batch {
            // The log holds validated JSON: copy it, do not parse it again per subscriber.
            send_or_drop(
                &sink,
                (*event).to_owned(),
                &run_id,
                bridge.config.subscriber_stall,
            )
            .await?;
            sent += 1;
        }
        if done && sent >= count {
            return Ok(());
        }
        if progress.changed().await.is_err() {
            return Ok(());
        }
    }
}

/// Send one event to a subscriber whose queue (bounded per connection) has room within
/// `stall` (`--subscriber-stall`); one that reads nothing for that long is dropped, so it holds no more
/// than its queue. It can subscribe again: the run's log replays.
async fn send_or_drop(
    sink: &jsonrpsee::SubscriptionSink,
    event: Box<serde_json::value::RawValue>,
    run_id: &str,
    stall: Duration,
) -> Result<(), jsonrpsee::core::SubscriptionError> {
    match sink.send_timeout(event, stall).await {
        Ok(()) => Ok(()),
        Err(jsonrpsee::server::SendTimeoutError::Timeout(_)) => {
            tracing::warn!("a subscriber of {run_id} read nothing for {stall:?}; dropped it");
            Err("subscriber too slow: dropped (subscribe again to replay the run)".into())
        }
        Err(jsonrpsee::server::SendTimeoutError::Closed(_)) => {
            Err("the subscriber went away".into())
        }
    }
}

/// The caller the guard identified (the operator when there are no tokens: `--no-auth`).
fn caller_of(extensions: &jsonrpsee::Extensions) -> Caller {
    extensions
        .get::<Caller>()
        .cloned()
        .unwrap_or_else(Caller::operator)
}

fn object_param(params: &Params<'_>) -> Result<Value, ErrorObjectOwned> {
    let value: Value = params
        .parse()
        .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
    match value {
        Value::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
        other => Ok(other),
    }
}

/// A run-document method's params as text, refused past `--max-run-bytes` before anything
/// parses them; [`object_param`] then runs on the blocking pool.
fn bounded_params(bridge: &Bridge, params: &Params<'_>) -> Result<String, ErrorObjectOwned> {
    let text = params.as_str().unwrap_or("null");
    let limit = bridge.config.max_run_bytes;
    if text.len() > limit {
        return Err(rpc_error(
            codes::INVALID_PARAMS,
            format!(
                "the run document is {} bytes, more than this server takes ({limit}, --max-run-bytes)",
                text.len()
            ),
        ));
    }
    Ok(text.to_string())
}

fn parse_params(text: &str) -> Result<Value, ErrorObjectOwned> {
    object_param(&Params::new(Some(text)))
}

fn module(bridge: Arc<Bridge>) -> Result<RpcModule<Bridge>, jsonrpsee::core::RegisterMethodError> {
    let mut module = RpcModule::from_arc(bridge);
    module.register_async_method("bridge.params", |params, bridge, _| async move {
        let text = bounded_params(&bridge, &params)?;
        bridge
            .blocking(move |bridge| {
                let value = parse_params(&text)?;
                let run = bridge.load_run(&value)?;
                let mut params =
                    commands::params(&run, &bridge.translate_options()).map_err(library_error)?;
                bridge.bind_approvals(&run, &mut params);
                serde_json::to_value(params)
                    .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
            })
            .await
    })?;
    module.register_async_method("bridge.context", |params, bridge, _| async move {
        let text = bounded_params(&bridge, &params)?;
        bridge
            .blocking(move |bridge| {
                let value = parse_params(&text)?;
                let run = bridge.load_run(&value)?;
                let detail = value
                    .get("detail")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let report = commands::context(&run, &bridge.translate_options(), detail)
                    .map_err(library_error)?;
                serde_json::to_value(report)
                    .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
            })
            .await
    })?;
    module.register_async_method("bridge.prompt", |params, bridge, _| async move {
        // Bounded before the parse (which is then at most --max-run-bytes).
        let value = parse_params(&bounded_params(&bridge, &params)?)?;
        let settings = commands::PromptSettings {
            mode: match value.get("mode") {
                None | Some(Value::Null) => None,
                Some(mode) => Some(serde_json::from_value(mode.clone()).map_err(|_| {
                    rpc_error(
                        codes::INVALID_PARAMS,
                        format!("field `mode`: unknown mode {mode} (full, minimal or none)"),
                    )
                })?),
            },
            provider: None,
            cache_boundary: match value.get("cacheBoundary") {
                None | Some(Value::Null) => true,
                Some(Value::Bool(flag)) => *flag,
                Some(other) => {
                    return Err(rpc_error(
                        codes::INVALID_PARAMS,
                        format!("field `cacheBoundary`: expected true or false, not {other}"),
                    ))
                }
            },
            // A command to run is the operator's choice, never a client's.
            before_prompt_build: None,
        };
        let prompt = bridge
            .blocking(move |bridge| {
                let run = bridge.load_run(&value)?;
                commands::prompt(&run, &bridge.translate_options(), &settings)
                    .map_err(library_error)
            })
            .await?;
        Ok::<_, ErrorObjectOwned>(api::PromptAnswer {
            text: prompt.text(),
            stable_prefix: prompt.stable_prefix,
            dynamic_suffix: prompt.dynamic_suffix,
        })
    })?;
    module.register_async_method("bridge.runStart", |params, bridge, ext| async move {
        let text = bounded_params(&bridge, &params)?;
        run_start(bridge, caller_of(&ext), text).await
    })?;
    module.register_subscription(
        "bridge.subscribeRun",
        "bridge.runEvent",
        "bridge.unsubscribeRun",
        |params, pending, bridge, ext| async move {
            subscribe_run(bridge, caller_of(&ext), params, pending).await
        },
    )?;
    module.register_async_method("bridge.toolResult", |params, bridge, ext| async move {
        let caller = caller_of(&ext);
        let value = object_param(&params)?;
        let call_id = value["callId"]
            .as_str()
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "field `callId`: required"))?;
        let answer = crate::codex::client::handler::tool_answer_defaulting(&value)
            .map_err(|why| rpc_error(codes::INVALID_PARAMS, format!("the tool result {why}")))?;
        let not_found = || rpc_error(codes::NOT_FOUND, format!("no pending tool call {call_id}"));
        let run_id = lock(&bridge.pending_tools)
            .get(call_id)
            .map(|pending| pending.run_id.clone())
            .ok_or_else(not_found)?;
        if !bridge.may_use_run(&caller, &run_id) {
            return Err(not_found());
        }
        let pending = lock(&bridge.pending_tools)
            .remove(call_id)
            .ok_or_else(not_found)?;
        let _ = pending.answer.send(answer);
        Ok::<_, ErrorObjectOwned>(api::Acknowledged { ok: true })
    })?;
    module.register_async_method("bridge.approval", |params, bridge, ext| async move {
        let caller = caller_of(&ext);
        let value = object_param(&params)?;
        let approval_id = value["approvalId"]
            .as_str()
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "field `approvalId`: required"))?;
        let approve = match value["decision"].as_str() {
            Some("accept") => true,
            Some("decline") => false,
            _ => {
                return Err(rpc_error(
                    codes::INVALID_PARAMS,
                    "field `decision`: accept or decline",
                ))
            }
        };
        let not_found = || {
            rpc_error(
                codes::NOT_FOUND,
                format!("no pending approval {approval_id}"),
            )
        };
        let run_id = lock(&bridge.pending_approvals)
            .get(approval_id)
            .map(|(run_id, _)| run_id.clone())
            .ok_or_else(not_found)?;
        if !bridge.may_use_run(&caller, &run_id) {
            return Err(not_found());
        }
        let (_, pending) = lock(&bridge.pending_approvals)
            .remove(approval_id)
            .ok_or_else(not_found)?;
        let _ = pending.send(approve);
        Ok(api::Acknowledged { ok: true })
    })?;
    module.register_async_method("bridge.runInterrupt", |params, bridge, ext| async move {
        let caller = caller_of(&ext);
        let value = object_param(&params)?;
        let run_id = value
            .as_str()
            .or_else(|| value["runId"].as_str())
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "field `runId`: required"))?
            .to_string();
        let state = bridge.visible_run(&caller, &run_id)?;
        bridge.interrupt(&state).await?;
        Ok::<_, ErrorObjectOwned>(api::Acknowledged { ok: true })
    })?;
    module.register_method("rpc.discover", |_, _, _| api::openrpc())?;
    module.register_async_method("bridge.status", |_, bridge, ext| async move {
        let caller = caller_of(&ext);
        let hub = lock(&bridge.hub).clone();
        let runs: Vec<api::RunSummary> = lock(&bridge.runs)
            .values()
            .filter(|run| caller.may_use(&run.owner))
            .map(|run| {
                let (_, done) = *run.progress.borrow();
                api::RunSummary {
                    run_id: run.run_id.clone(),
                    session_key: run.session_key.clone(),
                    thread_id: lock(&run.thread_id).clone(),
                    state: if done { "ended" } else { "running" }.to_string(),
                    client: run.owner.clone(),
                }
            })
            .collect();
        let idle = |state, error| api::CodexStatus {
            state,
            error,
            alive: None,
            version: None,
            pid: None,
            active_threads: None,
            loaded_threads: None,
            pending_requests: None,
            threads_opened: None,
            recycled: Some(bridge.recycled.load(std::sync::atomic::Ordering::SeqCst)),
        };
        let codex = match (&bridge.config.codex_bin, hub.as_ref()) {
            (CodexBinary::Missing(reason), _) => {
                idle(api::CodexState::Missing, Some(reason.clone()))
            }
            (CodexBinary::Found(_), None) => idle(api::CodexState::NotStarted, None),
            (CodexBinary::Found(_), Some(hub)) => api::CodexStatus {
                state: if hub.is_alive() {
                    api::CodexState::Running
                } else {
                    api::CodexState::Exited
                },
                error: None,
                alive: Some(hub.is_alive()),
                version: Some(hub.codex_version.clone()),
                pid: Some(hub.pid),
                active_threads: Some(hub.active_threads()),
                loaded_threads: Some(hub.loaded_threads()),
                pending_requests: Some(hub.pending_requests()),
                threads_opened: Some(hub.threads_opened()),
                recycled: Some(bridge.recycled.load(std::sync::atomic::Ordering::SeqCst)),
            },
        };
        Ok::<_, ErrorObjectOwned>(api::Status {
            codex,
            sessions: lock(&bridge.bindings)
                .sessions
                .values()
                .filter(|binding| caller.may_use(binding.owner_name()))
                .count(),
            pending_tool_calls: lock(&bridge.pending_tools)
                .values()
                .filter(|call| runs.iter().any(|run| run.run_id == call.run_id))
                .count(),
            pending_approvals: lock(&bridge.pending_approvals)
                .values()
                .filter(|(run_id, _)| runs.iter().any(|run| &run.run_id == run_id))
                .count(),
            runs,
        })
    })?;
    Ok(module)
}

/// Where the service's generated token lives.
#[derive(Clone, Debug)]
pub struct TokenFile {
    pub path: PathBuf,
    /// Generated by this start (else reused from an earlier one).
    pub created: bool,
}

/// A running service.
pub struct Running {
    pub handle: ServerHandle,
    pub addr: SocketAddr,
    pub bridge: Arc<Bridge>,
    /// The bearer token clients must send (`None` with `--no-auth`).
    pub token: Option<String>,
    /// Set when the token comes from `<state-dir>/token`.
    pub token_file: Option<TokenFile>,
}

impl Running {
    /// What serve says on stderr once it listens: where the token is, or that there is none.
    pub fn start_notice(&self) -> String {
        let codex = match &self.bridge.config.codex_bin {
            CodexBinary::Found(_) => String::new(),
            CodexBinary::Missing(reason) => format!(
                "clawbridge serve: WARNING: no Codex CLI: bridge.params, bridge.context and bridge.prompt work; bridge.runStart fails with 4100 until one is installed ({reason})\n"
            ),
        };
        let token = match &self.token_file {
            Some(file) => format!(
                "clawbridge serve: {} bearer token in {} (clients send `Authorization: Bearer <token>`)\n",
                if file.created { "generated a" } else { "using the" },
                file.path.display()
            ),
            None if self.token.is_none() => {
                "clawbridge serve: WARNING: --no-auth: no token required\n".to_string()
            }
            None => String::new(),
        };
        let home = self.bridge.codex_home();
        let exposed = match self.bridge.approvals_bound() {
            true => crate::app::offline::sandbox_writable_reason(
                &home,
                &self.bridge.config.workspace_roots,
            ),
            false => None,
        };
        let home = match exposed {
            Some(why) => format!(
                "clawbridge serve: WARNING: the Codex home {} is writable by sandboxed turns ({why}): a turn can rewrite its config.toml and the next thread runs what it added outside the sandbox; pass a --codex-home outside every root and temp folder\n",
                home.display()
            ),
            None => String::new(),
        };
        token + &codex + &home
    }

    /// Graceful shutdown: refuse new runs, interrupt the running turns and let their `turnEnd`
    /// reach subscribers, then stop listening and stop Codex; all within `grace`. Session bindings
    /// are written as they change, so nothing is left to flush.
    pub async fn shutdown(&self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        self.bridge
            .shutting_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let running = self.bridge.running_runs();
        tracing::info!(
            "shutting down: interrupting {} running turn(s)",
            running.len()
        );
        for run in &running {
            if let Err(error) = self.bridge.interrupt(run).await {
                tracing::debug!("interrupt of {}: {}", run.run_id, error.message());
            }
        }
        // The turns end with `turnEnd` (interrupted), which subscribers are sent.
        let settle = deadline - Duration::from_secs(2).min(grace / 2);
        while !self.bridge.running_runs().is_empty() && tokio::time::Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for run in self.bridge.running_runs() {
            run.finish(RunEvent::failed(
                lock(&run.thread_id).clone(),
                "clawbridge serve shut down before the turn ended",
            ));
        }
        // Let the last events reach their subscribers before the connections close.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _ = self.handle.stop();
        let _ = tokio::time::timeout_at(deadline, self.handle.clone().stopped()).await;
        if let Some(hub) = self.bridge.current_hub() {
            hub.kill().await;
        }
        lock(&self.bridge.state_lock).take();
    }

    /// Serve until SIGTERM or SIGINT (or until the server stops), then shut down within `grace`
    /// ([`Running::shutdown`]); a second signal exits the process at once (130).
    pub async fn until_signal(&self, grace: Duration) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
            _ = self.handle.clone().stopped() => return Ok(()),
        }
        eprintln!("clawbridge serve: shutting down (a second signal exits at once)");
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            std::process::exit(130);
        });
        self.shutdown(grace).await;
        Ok(())
    }

    /// Stop listening, wait for the server to stop, and release the state dir (so another serve,
    /// in this process or another, may take it at once).
    pub async fn stop(&self) {
        let _ = self.handle.stop();
        self.handle.clone().stopped().await;
        if let Some(hub) = self.bridge.current_hub() {
            hub.kill().await;
        }
        lock(&self.bridge.state_lock).take();
    }

    /// Bodies of the model requests the offline stub received (tests, diagnostics).
    pub fn bridge_requests(&self) -> Vec<String> {
        self.bridge
            .offline
            .as_ref()
            .map(|(stub, _)| {
                stub.requests()
                    .iter()
                    .map(|request| request.body.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Bind, register the methods and start serving.
pub async fn start(config: ServeConfig) -> Result<Running, ServeError> {
    let config = config.validate()?;
    let state_lock = state::lock_state_dir(&config.state_dir)?;
    let offline = if config.offline {
        let stub = ResponsesStub::start(config.stub_script.clone()).await?;
        // The throwaway home lives in the (0700) state dir, not under $TMPDIR, where a
        // sandboxed turn could rewrite its config; and it survives a restart, so bound threads
        // can be resumed.
        let dir = config
            .codex_home
            .clone()
            .unwrap_or_else(|| config.state_dir.join("offline-codex-home"));
        crate::support::fs::create_private_dir(&dir).map_err(|source| {
            ServeError::Setup(crate::Error::Write {
                path: dir.clone(),
                source,
            })
        })?;
        let home = OfflineHome::prepare(
            Some(&dir),
            &stub.base_url(),
            "gpt-5.5",
            dirs::home_dir().as_deref(),
        )?;
        Some((stub, home))
    } else {
        None
    };
    let bindings = state::load_bindings(&config.state_dir)?;
    let bridge = Arc::new(Bridge {
        state_lock: Mutex::new(Some(state_lock)),
        hub: Mutex::new(None),
        draining: Mutex::new(Vec::new()),
        recycled: std::sync::atomic::AtomicUsize::new(0),
        spawning: tokio::sync::Mutex::new(()),
        shutting_down: std::sync::atomic::AtomicBool::new(false),
        blocking_slots: Arc::new(tokio::sync::Semaphore::new(BLOCKING_SLOTS)),
        offline,
        bindings: Mutex::new(bindings),
        session_locks: Mutex::new(HashMap::new()),
        runs: Mutex::new(HashMap::new()),
        pending_tools: Mutex::new(HashMap::new()),
        pending_approvals: Mutex::new(HashMap::new()),
        busy_threads: Mutex::new(HashSet::new()),
        roots: Roots::new(config.workspace_roots.clone()),
        skill_cache: Arc::new(SkillCache::default()),
        config: config.clone(),
    });
    let (token, token_file) = resolve_auth(&config)?;
    let clients_path = config
        .clients_file
        .clone()
        .unwrap_or_else(|| crate::app::clients::clients_path(&config.state_dir));
    let clients = crate::app::clients::ClientsFile::load(&clients_path)?;
    if config.no_auth && !clients.clients.is_empty() {
        return Err(ServeError::Usage(format!(
            "--no-auth and the client tokens of {} exclude each other",
            clients_path.display()
        )));
    }
    // Bind first: the Host filter needs the port actually bound (`--listen 127.0.0.1:0`).
    let bind_error = |error: std::io::Error| ServeError::Bind {
        addr: config.listen,
        message: error.to_string(),
    };
    let listener = std::net::TcpListener::bind(config.listen).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let hosts = guard::allowed_hosts(addr, &config.allow_hosts);
    let cors = cors_layer(&config.allow_origins)?;
    let middleware = tower::ServiceBuilder::new()
        .layer(guard::host_filter(&hosts).map_err(ServeError::Usage)?)
        .layer(guard::origin_guard(&config.allow_origins))
        .option_layer(cors)
        .layer(guard::bearer_auth(token.as_deref(), &clients.clients));
    let server_config = jsonrpsee::server::ServerConfig::builder()
        .max_request_body_size(config.max_request_bytes)
        .max_response_body_size(64 * 1024 * 1024)
        .max_connections(config.max_connections)
        .set_message_buffer_capacity(CONNECTION_QUEUE)
        .build();
    let services = Server::builder()
        .set_config(server_config)
        .set_http_middleware(middleware)
        .to_service_builder();
    let listener = tokio::net::TcpListener::from_std(listener).map_err(bind_error)?;
    let methods: jsonrpsee::server::Methods = module(Arc::clone(&bridge))
        .map_err(|error| ServeError::Bind {
            addr,
            message: error.to_string(),
        })?
        .into();
    let (stop, handle) = jsonrpsee::server::stop_channel();
    let idle = config.idle_timeout;
    // Our own accept loop: every accepted socket takes a slot (an unauthenticated one too), gets HANDSHAKE_TIMEOUT to make an authenticated request, and is
    // wrapped in the idle timeout; accept errors (EMFILE) back off instead of spinning.
    // Sockets past `--max-connections` are still accepted up to as many again (at least 16
    // more), so jsonrpsee can tell them 429 "Too many connections"; past that they are closed.
    let max = config.max_connections as usize;
    let slots = Arc::new(tokio::sync::Semaphore::new(max + max.max(16)));
    tokio::spawn(async move {
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stop.clone().shutdown() => return,
            };
            let stream = match accepted {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    stream
                }
                Err(error) => {
                    tracing::warn!("accept failed ({error}); retrying in {backoff:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.clone().shutdown() => return,
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                tracing::debug!("connection refused: --max-connections sockets are open");
                drop(stream);
                continue;
            };
            let authenticated = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = Arc::clone(&authenticated);
            // A request that got through the guards (2xx, or 101 for a WebSocket upgrade)
            // authenticates its connection.
            let service = tower::ServiceBuilder::new()
                .map_response(move |response: http::Response<_>| {
                    let status = response.status();
                    if status.is_success() || status == http::StatusCode::SWITCHING_PROTOCOLS {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    response
                })
                .service(services.clone().build(methods.clone(), stop.clone()));
            let stopped = stop.clone().shutdown();
            tokio::spawn(async move {
                let _slot = permit;
                let io = idle::IdleTimeout::new(stream, idle);
                let serving = jsonrpsee::server::serve_with_graceful_shutdown(io, service, stopped);
                let handshake = async {
                    tokio::time::sleep(HANDSHAKE_TIMEOUT).await;
                    if authenticated.load(std::sync::atomic::Ordering::SeqCst) {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    served = serving => {
                        if let Err(error) = served {
                            tracing::debug!("connection closed: {error}");
                        }
                    }
                    _ = handshake => {
                        tracing::debug!("closed a connection that sent no authenticated request within {HANDSHAKE_TIMEOUT:?}");
                    }
                }
            });
        }
    });
    // Finished runs expire while the service is idle too.
    let weak = Arc::downgrade(&bridge);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(15));
        loop {
            tick.tick().await;
            match weak.upgrade() {
                Some(bridge) => bridge.prune(),
                None => return,
            }
        }
    });
    Ok(Running {
        handle,
        addr,
        bridge,
        token,
        token_file,
    })
}

/// The token in force: `--token`, else the state dir's token file (created on first start),
/// else none with `--no-auth` (and a warning).
fn resolve_auth(config: &ServeConfig) -> Result<(Option<String>, Option<TokenFile>), ServeError> {
    if config.no_auth {
        tracing::warn!(
            "--no-auth: any local process may drive Codex through {} (browsers are still refused by the Origin and Host checks)",
            config.listen
        );
        return Ok((None, None));
    }
    if let Some(token) = &config.token {
        return Ok((Some(token.clone()), None));
    }
    let (token, created) = token::load_or_create(&config.state_dir)?;
    Ok((
        Some(token),
        Some(TokenFile {
            path: token::token_path(&config.state_dir),
            created,
        }),
    ))
}

/// CORS answers for the origins the operator allowed, so their preflights pass without a token.
fn cors_layer(origins: &[String]) -> Result<Option<tower_http::cors::CorsLayer>, ServeError> {
    if origins.is_empty() {
        return Ok(None);
    }
    let values = origins
        .iter()
        .map(|origin| {
            http::HeaderValue::from_str(origin.trim_end_matches('/'))
                .map_err(|_| ServeError::Usage(format!("--allow-origin {origin}: not an origin")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(
        tower_http::cors::CorsLayer::new()
            .allow_origin(values)
            .allow_methods([http::Method::POST])
            .allow_headers([http::header::AUTHORIZATION, http::header::CONTENT_TYPE]),
    ))
}
