//! The bridge service: OpenClaw-side clients drive Codex through clawbridge over JSON-RPC
//! (jsonrpsee; HTTP and WebSocket on one port).
//!
//! Layout, by job: `config` ([`ServeConfig`], every bound and its default), `errors` (the API's
//! `codes` and the kind-to-code mapping), `bridge` ([`Bridge`], the shared state: the
//! [`Pool`] of app-servers (local children and remote listeners; each thread sticky to one,
//! restarted after a crash, recycled past its budget), session bindings (`sessionKey` -> Codex thread, persisted under the state dir so a
//! restart resumes threads), per-session queues (runs of one session in order, different sessions
//! in parallel), pending answers, and the policies that bind a run), `runs` (each run's state and
//! event log, which subscribers replay from the start), `threads` (the fingerprint and a run's
//! claim on its thread), `handler` (Codex's server requests answered through clients),
//! `run_start` (`bridge.runStart`, as phases), `methods` (every handler and its registration),
//! `listener` (the accept loop: a bound on sockets, a backoff, a stop), `running` ([`Running`]:
//! shutdown and the start notice); this file only starts: [`start`] binds and serves.
//!
//! Safe by default (docs/threat-model.md): the app layer's guard ([`crate::service::guard`])
//! authenticates every request with a bearer token ([`crate::service::token`] generates and keeps
//! one when the operator gives none) and refuses foreign `Host` and `Origin` headers; run documents are confined to the roots and capped at the
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
//! `bridge.approval`, `bridge.runInterrupt`, `bridge.runSteer`, `bridge.status`, `rpc.discover`
//! ([`api`] describes them all as OpenRPC, from the types the handlers parse and answer with).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonrpsee::server::Server;
use tokio::sync::watch;

use crate::codex::client::pool::{Pool, PoolConfig};
use crate::service::guard::{self, BearerCheck, CheckLayer, HostCheck, OriginCheck};
use crate::service::listener::{accept_loop, unauthenticated, Listener, Socket as Listened};
use crate::service::token;
use crate::skills::SkillCache;
use crate::support::fs::Roots;
use crate::traffic::plane::{OfflineHomeAt, OfflineSettings, Plane, PlaneSettings};

pub mod api;
pub mod idle;
pub mod state;

mod bridge;
mod errors;
mod handler;
mod methods;
mod params;
mod probes;
mod run_start;
mod running;
mod runs;
mod settings;
mod threads;

pub use bridge::Bridge;
use methods::module;
pub use methods::openrpc;
pub use running::{Running, TokenFile};
use settings::{cors_layer, pool_config, BLOCKING_SLOTS, CONNECTION_QUEUE, HANDSHAKE_TIMEOUT};
pub use settings::{
    CodexBinary, ServeConfig, ServeError, DEFAULT_ANSWER_TIMEOUT, DEFAULT_FINISHED_RUN_TTL,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FINISHED_RUNS, DEFAULT_MAX_RUNS,
    DEFAULT_MAX_RUN_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_RECYCLE_AFTER_THREADS,
    DEFAULT_RECYCLE_RSS_MB, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SUBSCRIBER_STALL, MAX_SESSIONS_LIMIT,
};

/// Bind, register the methods and start serving.
pub async fn start(config: ServeConfig) -> Result<Running, ServeError> {
    let config = config.validate()?;
    let state_lock = state::lock_state_dir(&config.state_dir)?;
    // The model-traffic plane: the stub offline (its home in the 0700 state dir, not under
    // $TMPDIR, where a sandboxed turn could rewrite its config; and kept across a restart, so
    // bound threads can be resumed), the recording forwarder with `--capture DIR`.
    let mut known = crate::traffic::capture::live::Known::default();
    known.face = Some("clawbridge serve");
    let known = std::sync::Arc::new(Mutex::new(known));
    // `--transcript DIR`: checked (ours, private, not a link) before anything starts.
    if let Some(root) = &config.transcript {
        crate::traffic::transcript::Transcript::open(root)
            .map_err(|error| ServeError::Usage(error.to_string()))?;
    }
    let plane = Plane::start(
        &PlaneSettings {
            offline: config.offline.then(|| OfflineSettings {
                script: config.stub_script.clone(),
                model: "gpt-5.5".to_string(),
                home: OfflineHomeAt::Given(
                    config
                        .codex_home
                        .clone()
                        .unwrap_or_else(|| config.state_dir.join("offline-codex-home")),
                ),
            }),
            capture: config.live_capture.clone(),
            codex_home: config.codex_home.clone(),
            codex_args: Vec::new(),
        },
        std::sync::Arc::clone(&known),
    )
    .await?;
    // Each run's turn as a trace; with `--capture`, the model calls from the capture.
    let trace = crate::observe::tap::start_trace(&config.trace, plane.captures(), &known)?;
    // The observer, as the endpoint's: fed every line to and from the app-servers by their
    // taps. With `--transcript DIR` each is checked against the running Codex's schema
    // (`DIR/conformance.jsonl`, `clawbridge app-server report DIR`) and each turn audited
    // (`DIR/audit.jsonl`); with a trace, the trace is told each (started after the trace, which
    // the observer takes from `known`).
    let observe_tasks = crate::support::task::Tasks::new();
    let observer = match (&config.transcript, &trace) {
        (Some(root), _) => {
            let schema = match &config.codex_bin {
                CodexBinary::Found(binary) => Some(crate::observe::tap::load_schema(
                    &observe_tasks,
                    binary.clone(),
                    None,
                )),
                CodexBinary::Missing(_) => None,
            };
            let audit = crate::observe::audit::LiveAudit::new(
                Some(root.join("audit.jsonl")),
                crate::support::console::Console::quiet(),
                crate::app::audit::live_auditor(),
            );
            Some(crate::observe::tap::ObserverTap::start(
                &observe_tasks,
                schema,
                Some(root.join("conformance.jsonl")),
                std::sync::Arc::clone(&known),
                Some(audit),
            ))
        }
        (None, Some(_)) => Some(crate::observe::tap::ObserverTap::start(
            &observe_tasks,
            None,
            None,
            std::sync::Arc::clone(&known),
            None,
        )),
        (None, None) => None,
    };
    let codex_home = plane.codex_home().to_path_buf();
    let config_overrides = plane.config_overrides().to_vec();
    // Session bindings and thread owners are kept in the state database (an earlier
    // `sessions.json` is imported on the first start).
    let store = Arc::new(
        crate::service::store::Store::open(&config.state_dir.join(state::STATE_DB))
            .map_err(|error| ServeError::Usage(error.to_string()))?,
    );
    let bindings = state::load_bindings_into(&config.state_dir, &store)?;
    // Each app-server in a private view of the machine (the state dir, with the operator's
    // token, out of its models' reach), when this machine can make one.
    let mut config = config;
    if let Some(jail) = config.member_jail.take() {
        config.member_jail = crate::service::isolation::probed(jail, &codex_home).await;
    }
    let bridge = Arc::new(Bridge {
        state_lock: Mutex::new(Some(state_lock)),
        pool: Pool::new({
            let mut pool = PoolConfig {
                config_overrides,
                ..pool_config(&config, codex_home)
            };
            // Every line to and from each app-server: the transcript, and what the captures
            // label and redact by (the same knowledge the endpoint's observer gathers).
            pool.peer.tap = Some(crate::observe::tap::connection_taps(
                config.transcript.clone(),
                observer.as_ref().map(|observer| observer.lines.clone()),
                std::sync::Arc::clone(&known),
                observe_tasks,
            ));
            pool
        }),
        codex_home: plane.codex_home().to_path_buf(),
        plane: Mutex::new(Some(plane)),
        shutting_down: std::sync::atomic::AtomicBool::new(false),
        subscribers: watch::channel(0).0,
        tasks: tokio_util::task::TaskTracker::new(),
        cancel: tokio_util::sync::CancellationToken::new(),
        blocking_slots: Arc::new(tokio::sync::Semaphore::new(BLOCKING_SLOTS)),
        sessions: bridge::SessionBindings::new(bindings),
        store,
        registry: bridge::RunRegistry::new(config.max_runs),
        threads: bridge::ThreadBroker::default(),
        roots: Roots::new(config.workspace_roots.clone()),
        skill_cache: Arc::new(SkillCache::default()),
        config: config.clone(),
        trace: Mutex::new(trace),
        observer: Mutex::new(observer),
    });
    let (token, token_file) = resolve_auth(&config)?;
    let clients_path = config
        .clients_file
        .clone()
        .unwrap_or_else(|| crate::service::clients::clients_path(&config.state_dir));
    let clients = crate::service::clients::ClientsFile::load(&clients_path)?;
    if config.no_auth && !clients.clients.is_empty() {
        return Err(ServeError::Usage(format!(
            "--no-auth and the client tokens of {} exclude each other",
            clients_path.display()
        )));
    }
    // Bind first: the Host filter needs the port actually bound (`--listen 127.0.0.1:0`).
    let bind_error = |source: std::io::Error| ServeError::Bind {
        addr: config.listen,
        source,
    };
    let listener = std::net::TcpListener::bind(config.listen).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let hosts = guard::allowed_hosts(addr, &config.allow_hosts);
    let cors = cors_layer(&config.allow_origins)?;
    let host = HostCheck::new(&hosts).map_err(ServeError::Usage)?;
    let checks = guard::Guard {
        host: Some(host.clone()),
        origin: OriginCheck::new(&config.allow_origins),
        bearer: BearerCheck::new(token.as_deref(), &clients.clients),
    };
    let middleware = tower::ServiceBuilder::new()
        // The probes first: a Kubernetes probe names the pod's address, and asks for no data.
        .layer(probes::ProbeLayer {
            bridge: Arc::clone(&bridge),
            guard: checks.clone(),
        })
        .layer(CheckLayer(host))
        .layer(CheckLayer(checks.origin.clone()))
        .option_layer(cors)
        .layer(CheckLayer(checks.bearer.clone()));
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
        .map_err(|error| ServeError::Methods(error.to_string()))?
        .into();
    let (stop, handle) = jsonrpsee::server::stop_channel();
    // Our own accept loop (`listener`): every accepted socket takes a slot (an unauthenticated
    // one too), gets HANDSHAKE_TIMEOUT to make an authenticated request, and is wrapped in the
    // idle timeout. Sockets past `--max-connections` are still accepted up to as many again (at
    // least 16 more), so jsonrpsee can tell them 429 "Too many connections"; past that they are
    // closed.
    let max = config.max_connections as usize;
    let slots = Arc::new(tokio::sync::Semaphore::new(max + max.max(16)));
    let tasks = bridge.tasks.clone();
    let idle = config.idle_timeout;
    let stopping = stop.clone();
    let serve_socket = move |socket: Listened, permit: tokio::sync::OwnedSemaphorePermit| {
        let Listened::Tcp(stream) = socket else {
            return;
        };
        let authenticated = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&authenticated);
        // A request that passes the guard authenticates its connection when it is read, not
        // when it is answered: a `runStart` queued behind a session's running turn may take
        // longer than the handshake deadline to answer, and must get its answer (its run
        // starts either way). The guard sets the flag as it admits the request (no second
        // check).
        let service = tower::ServiceBuilder::new()
            .map_request(move |mut request: http::Request<_>| {
                request
                    .extensions_mut()
                    .insert(guard::Admitted(Arc::clone(&flag)));
                request
            })
            .service(services.clone().build(methods.clone(), stopping.clone()));
        let stopped = stopping.clone().shutdown();
        tasks.spawn(async move {
            let _slot = permit;
            let io = idle::IdleTimeout::new(stream, idle);
            let serving = jsonrpsee::server::serve_with_graceful_shutdown(io, service, stopped);
            tokio::select! {
                served = serving => {
                    if let Err(error) = served {
                        tracing::debug!("connection closed: {error}");
                    }
                }
                () = unauthenticated(HANDSHAKE_TIMEOUT, authenticated) => {
                    tracing::debug!("closed a connection that sent no authenticated request within {HANDSHAKE_TIMEOUT:?}");
                }
            }
        });
    };
    let stop_accepting = stop.clone();
    bridge.tasks.spawn(accept_loop(
        Listener::Tcp(listener),
        slots,
        move || stop_accepting.clone().shutdown(),
        serve_socket,
        // Past the bound (and the extra slots jsonrpsee answers 429 with): closed at once.
        drop,
    ));
    // Finished runs expire while the service is idle too.
    let weak = Arc::downgrade(&bridge);
    let cancelled = bridge.cancel.clone();
    bridge.tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(15));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = cancelled.cancelled() => return,
            }
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
    let file = token::load_or_create(&crate::app::state::token_path(&config.state_dir))
        .map_err(|error| ServeError::Usage(error.to_string()))?;
    Ok((
        Some(file.token),
        Some(TokenFile {
            path: file.path,
            created: file.created,
        }),
    ))
}
