//! `clawbridge app-server --listen ws://IP:PORT`: the endpoint OpenClaw's Codex plugin talks to
//! with `appServer.transport: "websocket"`, serving every connection's threads from the pool.
//!
//! Each client speaks Codex's app-server JSON-RPC to it exactly as to Codex's own listener: one
//! message per text frame, ids echoed with their JSON type, no `"jsonrpc"` field added.
//! `initialize` is answered per connection with the answer of the pool's first member (Codex's
//! user agent), `initialized` is taken here. `thread/start` goes to the least busy member; every
//! later message naming that thread (`threadId`) goes to the same member; so does a
//! `thread/resume` from any connection (the endpoint remembers where each thread lives, so a
//! client that reconnects resumes its threads). Requests that name no thread go to any member.
//! What a member says about a thread (notifications and server requests) reaches the
//! connection that opened or resumed it; a server request gets the connection's own id, and the
//! client's answer goes back to the member under Codex's id.
//!
//! Safe by default, as `serve` is: every upgrade needs `Authorization: Bearer <token>` (compared
//! in constant time), a request with an `Origin` header is refused (403: no browser page may
//! reach it), `Host` must name the listener (loopback names or the bound address), a listener off
//! loopback needs `--allow-remote`; connections, message sizes, requests in flight per
//! connection and threads per connection are bounded; a silent connection is closed.

pub(crate) mod command;
mod connection;
mod feed;
mod gates;
mod leases;
pub use leases::DEFAULT_LEASE_TTL;
mod listener;
mod metrics;
mod policy;
mod runtime;
mod status;

pub use policy::Policy;

pub use status::{
    agent_of_workspace, fetch_status, read_status, render_status_text, ConnectionStatus,
    EndpointStatus, IdentityStatus, StatusFailure, ThreadStatus,
};

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::connection::Connection;
use self::feed::{feed_key, Feed, FeedKey, StallCounts, TurnState};
use self::listener::{accept_loop, bind_unix, healthz, metrics, readyz, status, upgrade, Listener};

use crate::codex::client::fleet::{Fleet, FleetConfig, Identity};
use crate::codex::client::hub::CodexHub;
use crate::codex::client::pool::{Lease, MemberStatus};
use crate::codex::protocol::inbound::Inbound;
use crate::proxy::stall::{StallSettings, TurnWatch};
use crate::service::guard::{BearerCheck, Guard, HostCheck, OriginCheck};
use crate::support::sync::lock;
use crate::support::task::Tasks;

/// Largest message a client may send (a turn with inline images stays far below it).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Requests one connection may have waiting for their member's answer.
const MAX_IN_FLIGHT: usize = 64;
/// Threads one connection may follow at once.
const MAX_THREADS_PER_CONNECTION: usize = 256;
/// Server requests waiting for a client's answer, per connection.
const MAX_WAITING_ANSWERS: usize = 1024;
/// Messages queued to one client (past it the connection is too slow and is closed).
const CLIENT_QUEUE: usize = 65_536;
/// Bytes queued to one client at most (a client that does not read is closed past it, so no
/// client can make the endpoint hold more for it).
pub const CLIENT_QUEUE_BYTES: usize = 64 * 1024 * 1024;
/// How long an answer waits for the messages Codex sent before it to reach the client first.
const ORDER_WAIT: Duration = Duration::from_secs(5);
/// How long a thread started without a turn holds its app-server at most (an account that
/// needs room gets it within [`crate::codex::client::fleet::FleetConfig::wait_for_room`]).
pub const FRESH_THREAD_GRACE: Duration = Duration::from_secs(10);
/// On shutdown: how long running turns get to end after their `turn/interrupt`.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);
/// The status document a status client reads at most.
const MAX_STATUS_BYTES: usize = 4 * 1024 * 1024;
/// JSON-RPC: invalid request; internal error.
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

/// Where the endpoint listens: `ws://IP:PORT` or `unix://PATH` (WebSocket over a Unix socket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl ListenAddr {
    /// Read `--listen`'s value (the members' URL type: `ws://IP:PORT` and `unix://PATH` are
    /// served; `wss://` needs a TLS terminator in front of a `ws://` listener).
    pub fn parse(url: &str) -> Result<ListenAddr, String> {
        use crate::support::address::SocketUrl;
        match SocketUrl::parse(url) {
            Ok(SocketUrl::Unix(path)) => Ok(ListenAddr::Unix(path)),
            Ok(SocketUrl::Ws { .. }) => {
                crate::support::loopback::parse_listen_addr(url).map(ListenAddr::Tcp)
            }
            Ok(SocketUrl::Wss { .. }) => Err(format!(
                "{url}: the endpoint does not serve TLS itself; listen on ws://IP:PORT behind a TLS terminator (haproxy, nginx) and let clients use its wss://"
            )),
            Err(_) if url.starts_with("ws://") => {
                crate::support::loopback::parse_listen_addr(url).map(ListenAddr::Tcp)
            }
            Err(_) if url.starts_with("unix://") => Err(format!("{url}: not unix://PATH")),
            Err(_) => Err(format!("{url}: not ws://IP:PORT or unix://PATH")),
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "ws://{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// What the endpoint needs.
#[derive(Clone, Debug)]
pub struct EndpointSettings {
    pub listen: ListenAddr,
    /// The operator's bearer token (never logged).
    pub token: String,
    /// Named clients (`clawbridge client add`): each sends its own token, and sees and acts on
    /// only the threads it opened; the operator's token (and an `operator` client) on all.
    pub clients: Vec<crate::service::clients::ClientEntry>,
    /// The app-servers, by the account each connection runs as.
    pub fleet: FleetConfig,
    /// Connections at once.
    pub max_connections: usize,
    /// A connection from which nothing came for this long (no message, no answer to our pings)
    /// is closed: its client is gone. A live client answers the pings, so an idle one stays.
    pub idle_timeout: Duration,
    /// How often the endpoint pings each client.
    pub ping_interval: Duration,
    /// A connection that has not sent `initialize` by then is closed.
    pub handshake_timeout: Duration,
    /// A socket that made no authenticated request (an upgrade, `GET /status`) by then is
    /// closed; until then it counts toward `max_connections` like a client.
    pub upgrade_timeout: Duration,
    /// The folder members start in.
    pub cwd: PathBuf,
    /// `--transcript DIR`: every message both ways, one folder per connection
    /// (`DIR/connection-N/`), one file per thread, secrets redacted (as the stdio proxy writes).
    pub transcript: Option<PathBuf>,
    /// Copies of every line for the conformance checks and the captures (the proxy's observer,
    /// by connection number; a full queue skips the copy, never the message).
    pub observe: Option<crate::observe::ObserverQueue>,
    /// What is a stalled turn, and whether the missing `turn/completed` is supplied.
    pub stalls: StallSettings,
    /// `--budget-tokens`: tokens each account may use per day (UTC).
    pub budget_tokens: Option<u64>,
    /// `--allow-host`: names besides the bound address and loopback that `Host` may carry.
    pub allow_hosts: Vec<String>,
    /// What each client may ask a member: the sandbox ceiling and the workspace roots named
    /// clients keep to.
    pub policy: Policy,
    /// How long a thread started without a turn keeps its app-server from being stopped to
    /// make room for another account ([`FRESH_THREAD_GRACE`]).
    pub fresh_thread_grace: Duration,
    /// Where the fleet's state is kept across restarts (the CLI's `<state-dir>/app-server.db`);
    /// `None` keeps it in memory only.
    pub store: Option<Arc<crate::service::store::Store>>,
    /// Threads the directory holds in memory at most (the store keeps them all).
    pub max_threads_in_memory: usize,
    /// The state dir's id ([`crate::service::store::home_id`]): the threads of this endpoint's
    /// local members are filed under it, and one filed under another is refused, not resumed
    /// here from nothing. `None`: no state dir (every thread is this endpoint's).
    pub home: Option<String>,
    /// With a store several endpoints share: how long a thread's lease lasts (`--lease-seconds`).
    pub lease_ttl: Duration,
    /// `--new-runtime-identity`: answer `initialize` with the members' own answer from now on
    /// (pinned again), instead of the one pinned before.
    pub new_runtime_identity: bool,
    /// `--otel-endpoint`: the live trace (its span counters show in `/metrics`).
    pub trace: Option<Arc<crate::traffic::trace::LiveTrace>>,
    /// Time to first token per model, from the capture (`/metrics`).
    pub first_tokens: Option<Arc<crate::traffic::capture::live::FirstTokens>>,
    /// `--home-retention-days`: an account's Codex home unused this long, with no connection
    /// logged in as it and no thread of it kept, is removed; `None` keeps every home.
    pub home_retention: Option<Duration>,
    /// Named accounts (`clawbridge account add`): the keys each login may use, read again when
    /// the file changes. `None`: every login runs under its key's fingerprint.
    pub accounts: Option<Arc<crate::service::accounts::AccountBook>>,
    /// `--unnamed-accounts`: with named accounts, a key of none still logs in (under its
    /// fingerprint) instead of being refused.
    pub unnamed_accounts: bool,
    /// `--route`: OpenClaw's thread and turn requests as sent, or with the workspace files where
    /// the spec puts them.
    pub route: crate::translate::live::LiveRoute,
}

/// How often the account homes are swept (and once at the start).
const HOME_SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The account homes in [`EndpointStatus`].
#[derive(Clone, Debug, Default)]
struct HomesSeen {
    kept: usize,
    removed: usize,
}

/// Why the endpoint could not start, or its status could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--listen {0}: not a loopback address; pass --allow-remote to listen there (the token then crosses the network in clear over ws://)")]
    NotLoopback(SocketAddr),
    #[error("--listen unix://{}: {message}", path.display())]
    Socket { path: PathBuf, message: String },
    #[error("status: {0}")]
    Status(String),
    #[error("{0} named client(s) but no --workspace-root: a named client's threads and files must keep to folders the operator names (give --workspace-root DIR, the folder its agents' workspaces live in)")]
    NoRoots(usize),
}

/// A running endpoint.
pub struct Endpoint {
    /// Where it listens (the bound port for `ws://IP:0`).
    pub listen: ListenAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    /// The checks every HTTP request passes first (serve's: no browser, the listener's own
    /// name, a known token).
    guard: Guard,
    /// The method policy, the roots and the sandbox ceiling every request passes.
    policy: Policy,
    fresh_thread_grace: Duration,
    /// The named clients, for the status.
    clients: Vec<crate::service::clients::ClientEntry>,
    listen: ListenAddr,
    fleet: Arc<Fleet>,
    cwd: PathBuf,
    slots: Arc<Semaphore>,
    idle_timeout: Duration,
    ping_interval: Duration,
    handshake_timeout: Duration,
    upgrade_timeout: Duration,
    /// Thread -> whose it is and where it lives (in memory for the threads in use, all of
    /// them in the store).
    directory: crate::service::directory::Directory,
    /// The `initialize` answer every connection gets, pinned in the store on first need.
    runtime: runtime::PinnedRuntime,
    /// The threads relayed to their followers, by app-server incarnation and thread.
    feeds: Mutex<HashMap<FeedKey, Arc<Feed>>>,
    /// The order of each thread's requests and unsubscribes on its app-server.
    gates: gates::Gates,
    /// The threads' leases across the endpoints of a shared store (none with the embedded one).
    leases: Option<leases::Leases>,
    /// The state dir's id (see [`EndpointSettings::home`]).
    home: Option<String>,
    stall_settings: StallSettings,
    stalls: Arc<StallCounts>,
    /// Tokens Codex reported, by kind and per account today (`--budget-tokens`).
    usage: Arc<feed::UsageCounts>,
    transcript: Option<PathBuf>,
    observe: Option<crate::observe::ObserverQueue>,
    /// The live trace, for its span counters.
    trace: Option<Arc<crate::traffic::trace::LiveTrace>>,
    first_tokens: Option<Arc<crate::traffic::capture::live::FirstTokens>>,
    /// Connections so far (each one's transcript folder is named after its number).
    opened: AtomicUsize,
    /// The open connections, by number (at most `max_connections`).
    live: Mutex<BTreeMap<usize, Weak<Connection>>>,
    connections: TaskTracker,
    /// The accepted sockets' HTTP tasks (until each is upgraded or closed).
    sockets: TaskTracker,
    /// Cancelled first on shutdown: no new connections.
    accepting: CancellationToken,
    /// Cancelled last: every connection closes.
    cancel: CancellationToken,
    /// Each account's latest `account/rateLimits/updated` (by identity key).
    rate_limits: Mutex<HashMap<String, Box<serde_json::value::RawValue>>>,
    /// The accept loop, each feed's relay, the watchers of app-servers' threadless messages
    /// and the stops of recycled members; cancelled and joined on stop.
    tasks: Tasks,
    home_retention: Option<Duration>,
    /// What the last sweep of the account homes kept, and what all removed.
    homes: Mutex<HomesSeen>,
    sweeping: Mutex<()>,
    accounts: Option<Arc<crate::service::accounts::AccountBook>>,
    unnamed_accounts: bool,
    /// `--route spec`: the router every connection's thread and turn requests pass (one for the
    /// endpoint: OpenClaw resumes its threads on new connections).
    router: Option<Arc<std::sync::Mutex<crate::translate::live::LiveRouter>>>,
}

/// The highest `connection-N` folder already in a transcript folder (0 when none): a restarted
/// endpoint numbers its connections after it, so no two runs' clients share a folder.
/// Bounded: at most 100 000 entries are looked at.
fn highest_connection_folder(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .take(100_000)
        .flatten()
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()?
                .strip_prefix("connection-")?
                .parse::<usize>()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

impl Endpoint {
    /// Bind and serve.
    pub async fn start(
        settings: EndpointSettings,
        allow_remote: bool,
    ) -> Result<Endpoint, EndpointError> {
        let named = settings
            .clients
            .iter()
            .filter(|client| !client.operator)
            .count();
        if named > 0 && settings.policy.roots.is_none() {
            return Err(EndpointError::NoRoots(named));
        }
        let bind_error = |source| EndpointError::Bind {
            addr: settings.listen.to_string(),
            source,
        };
        let (listener, listen) = match &settings.listen {
            ListenAddr::Tcp(addr) => {
                if !addr.ip().is_loopback() && !allow_remote {
                    return Err(EndpointError::NotLoopback(*addr));
                }
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(bind_error)?;
                let bound = listener.local_addr().map_err(bind_error)?;
                if !bound.ip().is_loopback() {
                    tracing::warn!(
                        "clawbridge app-server listens on {bound}, off loopback: clients' tokens and conversations cross the network in clear (ws://)"
                    );
                }
                (Listener::Tcp(listener), ListenAddr::Tcp(bound))
            }
            ListenAddr::Unix(path) => {
                let listener = bind_unix(path)?;
                (Listener::Unix(listener), ListenAddr::Unix(path.clone()))
            }
        };
        let first_connection = settings
            .transcript
            .as_deref()
            .map_or(0, highest_connection_folder);
        let host = match &listen {
            ListenAddr::Tcp(addr) => Some(
                HostCheck::new(&crate::service::guard::allowed_hosts(
                    *addr,
                    &settings.allow_hosts,
                ))
                .map_err(|message| EndpointError::Bind {
                    addr: addr.to_string(),
                    source: std::io::Error::other(message),
                })?,
            ),
            // A Unix socket is reached through the file system, never by a browser's name.
            ListenAddr::Unix(_) => None,
        };
        let guard = Guard {
            host,
            origin: OriginCheck::new(&[]),
            bearer: BearerCheck::new(Some(&settings.token), &settings.clients),
        };
        let shared = Arc::new(Shared {
            guard,
            policy: settings.policy,
            fresh_thread_grace: settings.fresh_thread_grace,
            clients: settings.clients.clone(),
            listen: listen.clone(),
            fleet: Fleet::new(settings.fleet),
            cwd: settings.cwd,
            slots: Arc::new(Semaphore::new(settings.max_connections.max(1))),
            idle_timeout: settings.idle_timeout,
            ping_interval: settings.ping_interval,
            handshake_timeout: settings.handshake_timeout,
            upgrade_timeout: settings.upgrade_timeout,
            directory: crate::service::directory::Directory::open(
                settings.store.clone(),
                settings.max_threads_in_memory,
            ),
            runtime: runtime::PinnedRuntime::new(
                settings.store.clone(),
                settings.new_runtime_identity,
            ),
            feeds: Mutex::new(HashMap::new()),
            gates: gates::Gates::default(),
            leases: leases::Leases::new(settings.store.clone(), settings.lease_ttl),
            home: settings.home.clone(),
            stall_settings: settings.stalls,
            stalls: Arc::default(),
            usage: Arc::new(feed::UsageCounts::new(
                settings.budget_tokens,
                settings.store.clone(),
            )),
            transcript: settings.transcript,
            observe: settings.observe,
            trace: settings.trace,
            first_tokens: settings.first_tokens,
            opened: AtomicUsize::new(first_connection),
            live: Mutex::new(BTreeMap::new()),
            connections: TaskTracker::new(),
            sockets: TaskTracker::new(),
            accepting: CancellationToken::new(),
            cancel: CancellationToken::new(),
            tasks: Tasks::new(),
            rate_limits: Mutex::new(HashMap::new()),
            home_retention: settings.home_retention,
            homes: Mutex::new(HomesSeen::default()),
            sweeping: Mutex::new(()),
            accounts: settings.accounts,
            unnamed_accounts: settings.unnamed_accounts,
            router: (settings.route == crate::translate::live::LiveRoute::Spec).then(|| {
                Arc::new(std::sync::Mutex::new(
                    crate::translate::live::LiveRouter::new(),
                ))
            }),
        });
        let router = axum::Router::new()
            .route("/status", axum::routing::get(status))
            .route("/healthz", axum::routing::get(healthz))
            .route("/readyz", axum::routing::get(readyz))
            .route("/metrics", axum::routing::get(metrics))
            .fallback(upgrade)
            .with_state(Arc::clone(&shared));
        // Threads whose rollout went while the endpoint was down are told so at their resume.
        if shared.directory.store().is_some() {
            let checked = Arc::clone(&shared);
            shared.tasks.spawn_cancellable(async move {
                let gone =
                    tokio::task::spawn_blocking(move || checked.directory.check_rollouts()).await;
                if let Ok(gone @ 1..) = gone {
                    tracing::warn!("{gone} thread(s) whose rollout is gone from their Codex home");
                }
            });
        }
        // The leases of the threads this endpoint follows are renewed (the rest let go); a
        // thread another endpoint took meanwhile is fenced.
        if let Some(leases) = &shared.leases {
            tracing::info!(
                "leases: this endpoint is {} ({:?} each)",
                leases.holder(),
                leases.ttl()
            );
            let renewing = Arc::clone(&shared);
            shared.tasks.spawn_cancellable(async move {
                loop {
                    let every = renewing
                        .leases
                        .as_ref()
                        .map_or(DEFAULT_LEASE_TTL, |leases| leases.ttl())
                        / 4;
                    tokio::time::sleep(every).await;
                    let shared = Arc::clone(&renewing);
                    let lost = tokio::task::spawn_blocking(move || {
                        let Some(leases) = &shared.leases else {
                            return Vec::new();
                        };
                        let followed = shared.followed();
                        leases.renew(|thread| followed.contains(thread))
                    })
                    .await
                    .unwrap_or_default();
                    for thread in lost {
                        renewing.fence(&thread);
                    }
                }
            });
        }
        // Account homes unused past their retention go, at the start and every hour.
        if shared.home_retention.is_some() {
            let sweeping = Arc::clone(&shared);
            shared.tasks.spawn_cancellable(async move {
                loop {
                    let shared = Arc::clone(&sweeping);
                    let _ = tokio::task::spawn_blocking(move || shared.sweep_homes()).await;
                    tokio::time::sleep(HOME_SWEEP_EVERY).await;
                }
            });
        }
        let server = shared
            .tasks
            .spawn(accept_loop(listener, router, Arc::clone(&shared)));
        Ok(Endpoint {
            listen,
            shared,
            server,
        })
    }

    /// The bound TCP address (`None` on a Unix socket).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match self.listen {
            ListenAddr::Tcp(addr) => Some(addr),
            ListenAddr::Unix(_) => None,
        }
    }

    /// Every member of every identity.
    pub fn members(&self) -> Vec<MemberStatus> {
        self.shared.fleet.members()
    }

    /// Sweep the account homes now (as the endpoint does every hour): the accounts whose
    /// homes were removed.
    pub async fn sweep_homes(&self) -> Vec<String> {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || shared.sweep_homes())
            .await
            .unwrap_or_default()
    }

    /// Connections, their threads, the members.
    pub fn status(&self) -> EndpointStatus {
        self.shared.status()
    }

    /// Stop, draining: no new connections; every running turn is interrupted (its client gets
    /// Codex's `turn/completed`, status `interrupted`) within a few seconds; every client is
    /// sent a close frame; the members are stopped.
    pub async fn stop(self) {
        self.shared.accepting.cancel();
        let mut interrupts = tokio::task::JoinSet::new();
        for connection in self.shared.live_connections() {
            interrupts.spawn(async move { connection.interrupt_turns().await });
        }
        // One by one: `join_all` panics on a task cancelled (by a runtime shutting down).
        let joined = async { while interrupts.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(INTERRUPT_GRACE, joined).await;
        self.shared.cancel.cancel();
        let _ = self.server.await;
        self.shared.sockets.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.shared.sockets.wait()).await;
        self.shared.connections.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.shared.connections.wait()).await;
        self.shared.fleet.shutdown().await;
        self.shared.tasks.shutdown(Duration::from_secs(5)).await;
        if let ListenAddr::Unix(path) = &self.listen {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Shared {
    /// The next connection's number. With a transcript folder, its `connection-N` folder is
    /// made here, and a number whose folder exists is passed over: another endpoint writing to
    /// the same folder (several endpoints on shared storage) took it.
    fn connection_number(&self) -> usize {
        for _ in 0..10_000 {
            let number = self.opened.fetch_add(1, Ordering::SeqCst) + 1;
            let Some(dir) = &self.transcript else {
                return number;
            };
            let made = {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(dir.join(format!("connection-{number}")))
            };
            match made {
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                _ => return number,
            }
        }
        self.opened.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The identity a login runs as: with named accounts, the account its key is listed under
    /// (a rotated key reaches the account's home and threads); a key removed from its account,
    /// or (unless `--unnamed-accounts`) a key of no account, is refused, saying how to add it.
    fn named_identity(&self, login: Identity) -> Result<Identity, String> {
        use crate::service::accounts::Named;
        let (Some(book), Identity::Account { .. }) = (&self.accounts, &login) else {
            return Ok(login);
        };
        let accounts = book.current();
        let key = login.key();
        match accounts.resolve(&key) {
            Named::Key { identity, .. } => Identity::from_key(&identity).ok_or_else(|| {
                format!("clawbridge: {}: account identity {identity:?} is not a fingerprint", book.path().display())
            }),
            Named::Removed { name } => Err(format!(
                "clawbridge: this key ({key}) was removed from account {name}; log in with one of its keys, or add it back: `clawbridge account add-key {name} --api-key-env VAR`"
            )),
            Named::Unknown if accounts.accounts.is_empty() || self.unnamed_accounts => Ok(login),
            Named::Unknown => Err(format!(
                "clawbridge: this key ({key}) is no named account's ({}); add it with `clawbridge account add-key NAME --api-key-env VAR` (a new key of an account: a rotation keeps its threads) or `clawbridge account add NAME --api-key-env VAR` (a new account)",
                book.path().display()
            )),
        }
    }

    /// The name the operator gave the account filed under `identity`, if any.
    fn account_name(&self, identity: &str) -> Option<String> {
        let book = self.accounts.as_ref()?;
        book.current().name_of(identity).map(str::to_string)
    }

    /// Keep an account's latest rate limits for the status (bounded: one entry per identity
    /// the fleet allows, each at most `MAX_KEPT_USAGE` bytes).
    fn keep_rate_limits(&self, identity: &Identity, params: &str) {
        if params.len() > feed::MAX_KEPT_USAGE {
            return;
        }
        let Ok(raw) = serde_json::value::RawValue::from_string(params.to_string()) else {
            return;
        };
        let mut kept = lock(&self.rate_limits);
        let key = identity.key();
        if kept.len() < crate::codex::client::fleet::MAX_IDENTITIES || kept.contains_key(&key) {
            kept.insert(key, raw);
        }
    }

    /// A member's new incarnation, in the member registry: its Codex version (a change of
    /// version since the last one is logged; the pinned `initialize` answer stays).
    fn register_member(&self, lease: &Lease, identity: &Identity) {
        let Some(store) = self.directory.store() else {
            return;
        };
        let version = lease.hub.codex_version.clone();
        let before = store
            .members()
            .into_iter()
            .find(|member| member.name == lease.name)
            .and_then(|member| member.codex_version);
        if before.is_some() && before != version {
            tracing::warn!(
                "app-server {}: Codex {} now, {} before",
                lease.name,
                version.as_deref().unwrap_or("?"),
                before.as_deref().unwrap_or("?")
            );
        }
        store.put_member(crate::service::store::MemberRecord {
            name: lease.name.clone(),
            identity: identity.key(),
            codex_version: version,
            seen: crate::service::directory::now(),
        });
    }

    /// What `/readyz` answers.
    fn ready(&self) -> bool {
        metrics::ready(&self.status(), self.accepting.is_cancelled())
    }

    /// What `/metrics` answers.
    fn metrics_text(&self) -> Result<String, std::fmt::Error> {
        let status = self.status();
        let ready = metrics::ready(&status, self.accepting.is_cancelled());
        let turns = lock(&self.stalls.turns_ended).clone();
        let tokens = lock(&self.usage.tokens).clone();
        let calls = lock(&self.usage.calls).clone();
        let spans = self.trace.as_ref().map(|trace| trace.counters().snapshot());
        let taps = metrics::Taps {
            spans,
            skipped: self.observe.as_ref().map_or(0, |observe| observe.skipped()),
            problems: self
                .observe
                .as_ref()
                .map(|observe| observe.problems())
                .unwrap_or_default(),
            first_tokens: self
                .first_tokens
                .as_ref()
                .map(|first| first.snapshot())
                .unwrap_or_default(),
        };
        metrics::prometheus_text(&status, &turns, &tokens, &calls, &taps, ready)
    }

    fn live_connections(&self) -> Vec<Arc<Connection>> {
        lock(&self.live)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Whether a connection other than `except` follows `thread`.
    fn followed_elsewhere(&self, except: usize, thread: &str) -> bool {
        self.live_connections()
            .iter()
            .filter(|other| other.number != except)
            .any(|other| lock(&other.threads).contains_key(thread))
    }

    /// The threads some connection follows here (on any app-server incarnation).
    fn followed(&self) -> std::collections::HashSet<String> {
        lock(&self.feeds)
            .keys()
            .map(|(_, thread)| thread.clone())
            .collect()
    }

    /// Another endpoint took `thread`'s lease: nothing more of it is relayed from here, each
    /// follower hears `thread/closed` (and a running turn's failed end) and lets it go, and the
    /// member's subscription is dropped, so the thread's new endpoint is its one writer.
    fn fence(self: &Arc<Self>, thread: &str) {
        let feeds: Vec<Arc<Feed>> = lock(&self.feeds)
            .iter()
            .filter(|((_, followed), _)| followed == thread)
            .map(|(_, feed)| Arc::clone(feed))
            .collect();
        if feeds.is_empty() {
            if let Some(leases) = &self.leases {
                leases.forget(thread);
            }
            return;
        }
        tracing::warn!(
            "thread {thread}: another endpoint took its lease; this endpoint relays nothing more of it"
        );
        for feed in feeds {
            let turn = feed.turn();
            for follower in feed.followers() {
                follower.lease_lost(&feed, turn.as_deref());
            }
            let hub = Arc::clone(&feed.lease.hub);
            let thread = thread.to_string();
            self.tasks.spawn_cancellable(async move {
                let unsubscribe =
                    crate::codex::protocol::methods::ThreadIdParams { thread_id: thread };
                let _ = hub
                    .peer()
                    .call::<crate::codex::protocol::methods::ThreadUnsubscribe>(&unsubscribe)
                    .await;
            });
        }
        // Only now that no follower is left: until then a relay reads the lease as lost.
        if let Some(leases) = &self.leases {
            leases.forget(thread);
        }
    }

    /// The lease of `thread` for this endpoint (a shared store), taken off the async path: the
    /// refusal to give when another endpoint holds it.
    async fn claim(self: &Arc<Self>, thread: &str) -> Result<(), String> {
        // A lease held and trusted (most requests of a followed thread) asks nothing of the
        // store, so it takes no blocking thread either.
        if self
            .leases
            .as_ref()
            .is_none_or(|leases| leases.holds(thread))
        {
            return Ok(());
        }
        let shared = Arc::clone(self);
        let thread = thread.to_string();
        tokio::task::spawn_blocking(move || {
            shared
                .leases
                .as_ref()
                .map_or(Ok(()), |leases| leases.claim(&thread))
        })
        .await
        .unwrap_or_else(|_| Err("clawbridge: the lease could not be taken; try again".into()))
    }

    /// Whether the endpoint relays `thread` of that app-server incarnation to anyone.
    fn feed_exists(&self, hub: &Arc<CodexHub>, thread: &str) -> bool {
        lock(&self.feeds).contains_key(&feed_key(hub, thread))
    }

    /// The feed of `thread` on `lease`'s app-server: the existing one, or a new one that claims
    /// the thread's messages (with those Codex sent before) and relays them to its followers.
    /// When the claim ends (the app-server went away) every follower hears that its running
    /// turn failed and lets the thread go.
    fn feed(self: &Arc<Self>, thread: &str, lease: &Lease, identity: &Identity) -> Arc<Feed> {
        let key = feed_key(&lease.hub, thread);
        let mut feeds = lock(&self.feeds);
        if let Some(feed) = feeds.get(&key) {
            return Arc::clone(feed);
        }
        let mut handle = lease.hub.claim_thread(thread);
        let (barrier, mut barriers) = mpsc::channel::<oneshot::Sender<()>>(16);
        let feed = Arc::new(Feed {
            thread: thread.to_string(),
            lease: lease.clone(),
            identity: identity.clone(),
            fleet: Arc::clone(&self.fleet),
            followers: Mutex::new(Vec::new()),
            answerer: Mutex::new(None),
            turn: tokio::sync::watch::Sender::new(TurnState::default()),
            fresh: AtomicBool::new(false),
            unpersisted: AtomicBool::new(false),
            barrier,
            relay: Mutex::new(None),
            watch: Mutex::new(TurnWatch::new(self.stall_settings)),
            stalls: Arc::clone(&self.stalls),
            token_usage: Mutex::new(None),
            compactions: std::sync::atomic::AtomicU64::new(0),
            context_alarm: AtomicBool::new(false),
            usage: Arc::clone(&self.usage),
            model: Mutex::new(None),
            workspace: Mutex::new(None),
            shared: Arc::downgrade(self),
            leased: self.leases.is_some(),
        });
        let relayed = Arc::clone(&feed);
        let shared = Arc::downgrade(self);
        let relay = self.tasks.spawn_cancellable(async move {
            loop {
                let stall_at = lock(&relayed.watch).deadline();
                let message = tokio::select! {
                    biased;
                    () = async {
                        match stall_at {
                            Some(at) => tokio::time::sleep_until(at).await,
                            None => std::future::pending().await,
                        }
                    } => {
                        relayed.stall_due().await;
                        continue;
                    }
                    asked = barriers.recv() => {
                        let Some(ack) = asked else { break };
                        // What is already here goes out before the answer that waits.
                        while let Some(message) = handle.try_recv() {
                            relayed.deliver(message).await;
                        }
                        let _ = ack.send(());
                        continue;
                    }
                    message = handle.recv() => message,
                };
                let Some(message) = message else { break };
                relayed.deliver(message).await;
            }
            drop(handle);
            if let Some(shared) = shared.upgrade() {
                let key = feed_key(&relayed.lease.hub, &relayed.thread);
                let mut feeds = lock(&shared.feeds);
                if feeds
                    .get(&key)
                    .is_some_and(|feed| Arc::ptr_eq(feed, &relayed))
                {
                    feeds.remove(&key);
                }
            }
            // Taken at the moment no later `turn/start` answer can be noted on this feed: one
            // handled after this is ended by the connection that answers it.
            let turn = relayed.app_server_gone();
            relayed.persisted();
            lock(&relayed.watch).ended();
            for follower in relayed.followers() {
                follower.member_lost(&relayed, turn.as_deref());
            }
        });
        *lock(&feed.relay) = Some(relay);
        feeds.insert(key, Arc::clone(&feed));
        feed
    }

    /// Connection `number` stops following `feed`; when nobody follows it any more the feed
    /// ends (its claim released). Whether anyone still follows.
    fn unfollow(&self, feed: &Arc<Feed>, number: usize) -> bool {
        if feed.remove(number) {
            return true;
        }
        {
            let key = feed_key(&feed.lease.hub, &feed.thread);
            let mut feeds = lock(&self.feeds);
            if feeds
                .get(&key)
                .is_some_and(|known| Arc::ptr_eq(known, feed))
            {
                feeds.remove(&key);
            }
        }
        if let Some(relay) = lock(&feed.relay).take() {
            relay.abort();
        }
        feed.set_turn(None);
        feed.persisted();
        // A recycled app-server whose last thread this was is stopped now.
        let (fleet, identity, lease) = (
            Arc::clone(&feed.fleet),
            feed.identity.clone(),
            feed.lease.clone(),
        );
        self.tasks
            .spawn_cancellable(async move { fleet.after_run(&identity, &lease).await });
        false
    }

    /// Deliver the messages of no thread from `lease`'s app-server (set up once per app-server)
    /// to the connections of the identity it serves, and only them: notifications to each
    /// (`account/updated`, `account/rateLimits/updated`, ...), a server request (an auth
    /// refresh) to the newest; with none, the request is refused so Codex does not wait.
    fn watch_unscoped(self: &Arc<Self>, lease: &Lease, identity: &Identity) {
        let Some(mut receiver) = lease.hub.subscribe_unscoped() else {
            return;
        };
        self.register_member(lease, identity);
        let shared = Arc::downgrade(self);
        let hub = Arc::downgrade(&lease.hub);
        let identity = identity.clone();
        // Ends with the app-server's router (which drops the sender).
        self.tasks.spawn_cancellable(async move {
            while let Some(message) = receiver.recv().await {
                let (Some(shared), Some(hub)) = (shared.upgrade(), hub.upgrade()) else {
                    break;
                };
                let connections: Vec<Arc<Connection>> = shared
                    .live_connections()
                    .into_iter()
                    .filter(|connection| connection.identity() == identity)
                    .collect();
                match message {
                    Inbound::Notification(notification) => {
                        if notification.method
                            == crate::codex::protocol::table::name::ACCOUNT_RATE_LIMITS_UPDATED
                        {
                            shared.keep_rate_limits(&identity, notification.params.get());
                        }
                        // About a client's own process, watch, search or stream: to that
                        // client alone, as it named the handle; else to every connection.
                        let (to, params) = match policy::owner_of_handle(notification.params.get())
                        {
                            None => (None, notification.params.get().to_string()),
                            Some((Some(owner), params)) => (Some(owner), params),
                            Some((None, _)) => {
                                tracing::debug!(
                                    "{} about a handle no client made here; dropped",
                                    notification.method
                                );
                                continue;
                            }
                        };
                        let text = format!(
                            r#"{{"method":{},"params":{params}}}"#,
                            Value::from(notification.method.as_str()),
                        );
                        for connection in &connections {
                            if to.is_none_or(|owner| owner == connection.number) {
                                connection.push(text.clone());
                            }
                        }
                    }
                    Inbound::Request(request) => {
                        match connections
                            .iter()
                            .max_by_key(|connection| connection.number)
                        {
                            Some(connection) => connection.relay_request(&hub, request).await,
                            None => {
                                let _ = hub
                                    .peer()
                                    .respond_error(
                                        request.id,
                                        INTERNAL_ERROR,
                                        format!("clawbridge: no client of {identity} is connected"),
                                    )
                                    .await;
                            }
                        }
                    }
                    Inbound::Response(_) => {}
                }
            }
        });
    }

    /// [`Fleet::sweep_homes`] with this endpoint's retention, keeping the accounts a
    /// connection is logged in as and those with a thread still kept; the accounts removed.
    fn sweep_homes(&self) -> Vec<String> {
        let Some(retention) = self.home_retention else {
            return Vec::new();
        };
        // One sweep at a time (the hourly one and one asked for).
        let _one = lock(&self.sweeping);
        let mut keep = self.directory.identities_with_threads();
        keep.extend(
            self.live_connections()
                .iter()
                .map(|connection| connection.identity().key()),
        );
        let sweep = self
            .fleet
            .sweep_homes(retention, &|account| keep.contains(account));
        let mut seen = lock(&self.homes);
        seen.kept = sweep.kept;
        seen.removed += sweep.removed.len();
        sweep.removed
    }

    fn status(&self) -> EndpointStatus {
        // The named accounts read once for the whole document (a stat of the file, not one
        // per connection and account).
        let named = self.accounts.as_ref().map(|book| book.current());
        let name_of = |identity: &str| {
            named
                .as_ref()
                .and_then(|accounts| accounts.name_of(identity))
                .map(str::to_string)
        };
        let connections: Vec<ConnectionStatus> = self
            .live_connections()
            .iter()
            .map(|connection| {
                let mut status = connection.status();
                status.account = name_of(&status.identity);
                status
            })
            .collect();
        let threads = self.directory.counts_by_identity();
        let known_threads = self.directory.kept() as usize;
        let identities: Vec<IdentityStatus> = self
            .fleet
            .status()
            .into_iter()
            .map(|identity| IdentityStatus {
                name: name_of(&identity.identity),
                connections: connections
                    .iter()
                    .filter(|connection| connection.identity == identity.identity)
                    .count(),
                threads: threads.get(&identity.identity).copied().unwrap_or(0),
                rate_limits: lock(&self.rate_limits).get(&identity.identity).cloned(),
                tokens_today: self.usage.used_today(&identity.identity),
                identity: identity.identity,
                members: identity.members,
            })
            .collect();
        EndpointStatus {
            listen: self.listen.to_string(),
            connections,
            known_threads,
            members: identities
                .iter()
                .flat_map(|identity| identity.members.iter().cloned())
                .collect(),
            identities,
            stalls: lock(&self.stalls.by_kind)
                .iter()
                .map(|(kind, count)| (kind.to_string(), *count))
                .collect(),
            recovered_turns: self.stalls.recovered.load(Ordering::SeqCst),
            context_alarms: self.stalls.context_alarms.load(Ordering::SeqCst),
            app_servers: status::PlacesStatus {
                held: self.fleet.places_held(),
                bound: self.fleet.total_locals(),
            },
            account_homes: {
                let seen = lock(&self.homes);
                status::HomesStatus {
                    kept: seen.kept,
                    removed: seen.removed,
                    retention_days: self.home_retention.map(|age| age.as_secs() / 86_400),
                }
            },
            state: self.directory.store().map_or_else(
                || "memory (not kept across restarts)".to_string(),
                |store| store.path().display().to_string(),
            ),
            policy: status::PolicyStatus {
                max_sandbox: self.policy.ceiling.as_str().to_string(),
                workspace_roots: self
                    .policy
                    .roots
                    .iter()
                    .flat_map(|roots| roots.folders())
                    .map(|root| root.display().to_string())
                    .collect(),
                isolation: self.fleet.isolation(),
            },
            clients: self
                .clients
                .iter()
                .map(|client| status::ClientStatus {
                    name: client.name.clone(),
                    operator: client.operator,
                    allow: client.allow.iter().map(|grant| grant.to_string()).collect(),
                })
                .collect(),
            leases: self.leases.as_ref().map(|leases| status::LeasesStatus {
                state_dir: self.home.clone(),
                ..leases.status()
            }),
        }
    }
}
