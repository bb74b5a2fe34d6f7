//! `clawbridge serve`'s settings: the validated command line, every bound and its default.

use crate::codex::client::pool::PoolConfig;
use crate::codex::client::session::TurnLimits;
use crate::config::SandboxMode;
use crate::traffic::stub::StubScript;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// `--capture DIR`: the members' model traffic recorded on its way (to the stub offline).
    pub live_capture: Option<crate::traffic::forward::LiveCaptureSettings>,
    /// `--transcript DIR`: every line between serve and its app-servers, one folder per
    /// app-server connection (`traffic::transcript::connection_taps`).
    pub transcript: Option<PathBuf>,
    /// `--otel-endpoint` and the rest: each run's turn traced (or the OpenTelemetry variables').
    pub trace: crate::traffic::trace::TraceSettings,
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
    /// `--app-servers`: local `codex app-server` children in the pool.
    pub app_servers: usize,
    /// `--app-server` with `--app-server-token-file`: remote app-servers in the pool.
    pub remote_app_servers: Vec<crate::codex::client::remote::RemoteEndpoint>,
    /// Restart backoff and the crash loop that marks a member dead.
    pub restart_backoff: (Duration, Duration),
    pub crash_limit: (usize, Duration),
    /// `--member-env`: what the app-servers keep of the service's environment besides the
    /// default list (`None`: everything, as the CLI's own runs do).
    pub member_env: Option<Vec<String>>,
    /// The private view each app-server gets (the state dir hidden, the roots kept), when the
    /// machine can make it (`support::jail`; the face sets it, `start` probes it).
    pub member_jail: Option<crate::support::jail::Jail>,
    /// Without a jail, the members start under this helper's reaper (`support::reaper`).
    pub member_reaper: Option<std::path::PathBuf>,
}

/// Local app-servers a pool has at most (`--app-servers`).
pub const MAX_APP_SERVERS: usize = 16;

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
pub use crate::codex::client::pool::{DEFAULT_RECYCLE_AFTER_THREADS, DEFAULT_RECYCLE_RSS_MB};
/// Runs in progress at once (each holds a Codex turn and its event log).
pub const DEFAULT_MAX_RUNS: usize = 64;
/// Largest run document (OpenClaw's whole tool catalog inline is about 200 kB).
pub const DEFAULT_MAX_RUN_BYTES: usize = 2 * 1024 * 1024;
/// How long a subscriber may leave its queue full before it is dropped (it can subscribe again:
/// the log replays).
pub const DEFAULT_SUBSCRIBER_STALL: Duration = Duration::from_secs(30);
/// How long an accepted socket may stay without an authenticated request.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages a connection's outgoing queue holds (jsonrpsee's default is 1024).
pub(super) const CONNECTION_QUEUE: u32 = 128;

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
            live_capture: None,
            transcript: None,
            trace: crate::traffic::trace::TraceSettings::default(),
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
            app_servers: 1,
            remote_app_servers: Vec::new(),
            restart_backoff: (
                crate::codex::client::pool::PoolConfig::DEFAULT_BACKOFF_FIRST,
                crate::codex::client::pool::PoolConfig::DEFAULT_BACKOFF_MAX,
            ),
            crash_limit: (
                crate::codex::client::pool::PoolConfig::DEFAULT_CRASH_LIMIT,
                crate::codex::client::pool::PoolConfig::DEFAULT_CRASH_WINDOW,
            ),
            member_env: Some(Vec::new()),
            member_jail: None,
            member_reaper: None,
        }
    }
}

/// Session bindings kept at most by default (`sessions.json` then stays under 8 MB: keys are at
/// most 512 bytes, far below the 64 MiB its loader accepts).
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// The most `--max-sessions` may be: the state file stays below what its loader accepts.
pub const MAX_SESSIONS_LIMIT: usize = 50_000;

/// Translations running on the blocking pool at once; more wait (within their deadline).
pub(super) const BLOCKING_SLOTS: usize = 8;

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
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The API's methods could not be registered (a defect, never the user's input).
    #[error("cannot register the bridge API's methods: {0}")]
    Methods(String),
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
            crate::service::token::validate(token, "--token (or CLAWBRIDGE_TOKEN)")
                .map_err(|error| ServeError::Usage(error.to_string()))?;
        }
        crate::service::guard::HostCheck::new(&self.allow_hosts).map_err(ServeError::Usage)?;
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
        if self.app_servers > MAX_APP_SERVERS {
            return Err(ServeError::Usage(format!(
                "--app-servers {}: at most {MAX_APP_SERVERS}",
                self.app_servers
            )));
        }
        if self.app_servers == 0 && self.remote_app_servers.is_empty() {
            return Err(ServeError::Usage(
                "--app-servers 0 needs at least one --app-server ws://HOST:PORT".into(),
            ));
        }
        Ok(self)
    }
}

/// CORS answers for the origins the operator allowed, so their preflights pass without a token.
pub(super) fn cors_layer(
    origins: &[String],
) -> Result<Option<tower_http::cors::CorsLayer>, ServeError> {
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

/// The pool's settings from the service's.
pub(super) fn pool_config(config: &ServeConfig, codex_home: PathBuf) -> PoolConfig {
    let binary = match &config.codex_bin {
        CodexBinary::Found(path) => Ok(path.clone()),
        CodexBinary::Missing(reason) => Err(reason.clone()),
    };
    PoolConfig {
        locals: config.app_servers,
        remotes: config.remote_app_servers.clone(),
        isolate_environment: config.offline,
        backoff_first: config.restart_backoff.0,
        backoff_max: config.restart_backoff.1,
        crash_limit: config.crash_limit.0,
        crash_window: config.crash_limit.1,
        recycle_after_threads: config.recycle_after_threads,
        recycle_rss_bytes: config.recycle_rss_bytes,
        environment: config.member_env.clone(),
        jail: config.member_jail.clone(),
        reaper: config.member_reaper.clone(),
        ..PoolConfig::new(binary, codex_home)
    }
}
