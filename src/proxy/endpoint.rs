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

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::clients::{Caller, KnownTokens};
use crate::codex::client::fleet::{Fleet, FleetConfig, Identity};
use crate::codex::client::hub::CodexHub;
use crate::codex::client::peer::PeerError;
use crate::codex::client::pool::{Lease, MemberStatus};
use crate::codex::protocol::inbound::Inbound;
use crate::codex::protocol::methods::{
    ThreadUnsubscribe, ThreadUnsubscribeParams, TurnInterrupt, TurnInterruptParams,
};
use crate::codex::protocol::wire::{Incoming, RawParams, RequestId, RpcError};
use crate::support::sync::lock;

use super::stall::{StallKind, StallSettings, StallStatus, TurnWatch, Verdict};

/// Largest message a client may send (a turn with inline images stays far below it).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Requests one connection may have waiting for their member's answer.
const MAX_IN_FLIGHT: usize = 64;
/// Threads one connection may follow at once.
const MAX_THREADS_PER_CONNECTION: usize = 256;
/// Server requests waiting for a client's answer, per connection.
const MAX_WAITING_ANSWERS: usize = 1024;
/// Messages queued to one client (past it the connection is too slow and is closed).
const CLIENT_QUEUE: usize = 4096;
/// Threads whose member the endpoint remembers for a resume (the oldest forgotten first).
const MAX_REMEMBERED_THREADS: usize = 100_000;
/// How long an answer waits for the messages Codex sent before it to reach the client first.
const ORDER_WAIT: Duration = Duration::from_secs(5);
/// On shutdown: the pause before asking again to interrupt a turn Codex has not started yet.
const INTERRUPT_RETRY: Duration = Duration::from_millis(100);
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
    /// Read `--listen`'s value.
    pub fn parse(url: &str) -> Result<ListenAddr, String> {
        if let Some(path) = url.strip_prefix("unix://") {
            if path.is_empty() || path.contains('\0') {
                return Err(format!("{url}: not unix://PATH"));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        url.strip_prefix("ws://")
            .map(|addr| addr.trim_end_matches('/'))
            .and_then(|addr| addr.parse().ok())
            .map(ListenAddr::Tcp)
            .ok_or_else(|| format!("{url}: not ws://IP:PORT or unix://PATH"))
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
    pub clients: Vec<crate::app::clients::ClientEntry>,
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
    pub observe: Option<super::observe::ObserverQueue>,
    /// What is a stalled turn, and whether the missing `turn/completed` is supplied.
    pub stalls: StallSettings,
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
}

/// What `GET /status` answers (and `clawbridge app-server status` prints).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointStatus {
    pub listen: String,
    pub connections: Vec<ConnectionStatus>,
    /// Threads the endpoint knows the member of (for a resume from any connection).
    pub known_threads: usize,
    /// Every member of every identity.
    pub members: Vec<MemberStatus>,
    /// Each identity (`native`, or a login's kind and credential fingerprint) with its
    /// members and how many threads it owns.
    pub identities: Vec<IdentityStatus>,
    /// Stalled turns seen since the start, by kind (`missingTurnCompleted`,
    /// `silentAfterStart`, `noFollowUpAfterTool`).
    pub stalls: BTreeMap<String, usize>,
    /// Turns completed for their clients after a missing `turn/completed` (`--completion-grace`).
    pub recovered_turns: usize,
}

/// One identity in [`EndpointStatus`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityStatus {
    pub identity: String,
    /// Connections running as it now.
    pub connections: usize,
    /// Threads it opened that the endpoint remembers.
    pub threads: usize,
    pub members: Vec<MemberStatus>,
}

/// One client connection in [`EndpointStatus`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// The connection's number (its transcript folder is `connection-N`).
    pub number: usize,
    /// Who its requests run as: `native`, or its login's fingerprint.
    pub identity: String,
    /// `clientInfo` of its `initialize` (`name version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub threads: Vec<ThreadStatus>,
    pub requests_in_flight: usize,
    pub waiting_answers: usize,
}

/// One thread a connection follows.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStatus {
    pub id: String,
    pub member: String,
    /// The running turn, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Connections that follow the thread (this one included).
    pub followers: usize,
    /// The running turn's stall, if it has gone quiet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall: Option<StallStatus>,
}

/// Whose a thread is and where it lives: the account it runs under, the member that has it, and
/// the client that opened it.
#[derive(Clone, Debug)]
struct ThreadHome {
    identity: Identity,
    member: String,
    owner: String,
}

/// A running endpoint.
pub struct Endpoint {
    /// Where it listens (the bound port for `ws://IP:0`).
    pub listen: ListenAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    tokens: KnownTokens,
    listen: ListenAddr,
    fleet: Arc<Fleet>,
    cwd: PathBuf,
    slots: Arc<Semaphore>,
    idle_timeout: Duration,
    ping_interval: Duration,
    handshake_timeout: Duration,
    upgrade_timeout: Duration,
    /// Thread -> whose it is and where it lives.
    homes: Mutex<HashMap<String, ThreadHome>>,
    /// The threads relayed to their followers, by app-server incarnation and thread.
    feeds: Mutex<HashMap<FeedKey, Arc<Feed>>>,
    stall_settings: StallSettings,
    stalls: Arc<StallCounts>,
    transcript: Option<PathBuf>,
    observe: Option<super::observe::ObserverQueue>,
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
}

impl Endpoint {
    /// Bind and serve.
    pub async fn start(
        settings: EndpointSettings,
        allow_remote: bool,
    ) -> Result<Endpoint, EndpointError> {
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
        let shared = Arc::new(Shared {
            tokens: KnownTokens::new(&settings.token, &settings.clients),
            listen: listen.clone(),
            fleet: Fleet::new(settings.fleet),
            cwd: settings.cwd,
            slots: Arc::new(Semaphore::new(settings.max_connections.max(1))),
            idle_timeout: settings.idle_timeout,
            ping_interval: settings.ping_interval,
            handshake_timeout: settings.handshake_timeout,
            upgrade_timeout: settings.upgrade_timeout,
            homes: Mutex::new(HashMap::new()),
            feeds: Mutex::new(HashMap::new()),
            stall_settings: settings.stalls,
            stalls: Arc::default(),
            transcript: settings.transcript,
            observe: settings.observe,
            opened: AtomicUsize::new(0),
            live: Mutex::new(BTreeMap::new()),
            connections: TaskTracker::new(),
            sockets: TaskTracker::new(),
            accepting: CancellationToken::new(),
            cancel: CancellationToken::new(),
        });
        let router = axum::Router::new()
            .route("/status", axum::routing::get(status))
            .fallback(upgrade)
            .with_state(Arc::clone(&shared));
        let server = tokio::spawn(accept_loop(listener, router, Arc::clone(&shared)));
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
        let _ = tokio::time::timeout(INTERRUPT_GRACE, interrupts.join_all()).await;
        self.shared.cancel.cancel();
        let _ = self.server.await;
        self.shared.sockets.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.shared.sockets.wait()).await;
        self.shared.connections.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.shared.connections.wait()).await;
        self.shared.fleet.shutdown().await;
        if let ListenAddr::Unix(path) = &self.listen {
            let _ = std::fs::remove_file(path);
        }
    }
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// Accept sockets until the endpoint stops accepting. Each socket takes a connection slot
/// from the moment it is accepted (one past the bound is answered 429 and closed) and must make
/// an authenticated request within `upgrade_timeout`, else it is closed: sockets that never
/// speak cannot hold the listener's descriptors. An upgrade hands its slot to the client
/// connection it becomes.
async fn accept_loop(listener: Listener, router: axum::Router, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let accepted = tokio::select! {
            accepted = async {
                match &listener {
                    Listener::Tcp(listener) => listener.accept().await.map(|(stream, _)| {
                        let _ = stream.set_nodelay(true);
                        Socket::Tcp(stream)
                    }),
                    Listener::Unix(listener) => {
                        listener.accept().await.map(|(stream, _)| Socket::Unix(stream))
                    }
                }
            } => accepted,
            () = shared.accepting.cancelled() => return,
        };
        let socket = match accepted {
            Ok(socket) => {
                backoff = Duration::from_millis(10);
                socket
            }
            Err(error) => {
                // Out of descriptors, most often: wait, never spin.
                tracing::warn!("accept failed ({error}); retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        match Arc::clone(&shared.slots).try_acquire_owned() {
            Ok(slot) => match socket {
                Socket::Tcp(stream) => serve_socket(&shared, &router, stream, slot),
                Socket::Unix(stream) => serve_socket(&shared, &router, stream, slot),
            },
            Err(_) => {
                tracing::debug!("a socket past the connection bound: 429");
                tokio::spawn(async move {
                    use tokio::io::AsyncWriteExt;
                    const FULL: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: text/plain\r\ncontent-length: 20\r\nconnection: close\r\n\r\ntoo many connections";
                    let write = async {
                        match socket {
                            Socket::Tcp(mut stream) => stream.write_all(FULL).await,
                            Socket::Unix(mut stream) => stream.write_all(FULL).await,
                        }
                    };
                    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
                });
            }
        }
    }
}

enum Socket {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// A socket's slot, handed by the socket to the client connection it is upgraded into.
#[derive(Clone)]
struct SocketSlot(Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>);

/// Serve HTTP on one accepted socket (see [`accept_loop`]).
fn serve_socket<I>(
    shared: &Arc<Shared>,
    router: &axum::Router,
    io: I,
    slot: tokio::sync::OwnedSemaphorePermit,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = SocketSlot(Arc::new(Mutex::new(Some(slot))));
    let authenticated = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&authenticated);
    let carried = slot.clone();
    let service = tower::ServiceBuilder::new()
        .map_request(move |mut request: http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(carried.clone());
            request
        })
        .map_response(move |response: Response| {
            let status = response.status();
            if status.is_success() || status == StatusCode::SWITCHING_PROTOCOLS {
                flag.store(true, Ordering::SeqCst);
            }
            response
        })
        .service(router.clone());
    let service = hyper_util::service::TowerToHyperService::new(service);
    let deadline = shared.upgrade_timeout;
    let stopping = shared.accepting.clone();
    shared.sockets.spawn(async move {
        let _slot = slot;
        let connection = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(io), service)
            .with_upgrades();
        tokio::pin!(connection);
        let unauthenticated = async {
            tokio::time::sleep(deadline).await;
            if authenticated.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!("an HTTP connection ended: {error}");
                }
            }
            () = unauthenticated => {
                tracing::debug!("closed a socket that made no authenticated request within {deadline:?}");
            }
            () = stopping.cancelled() => {
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_secs(5), connection).await;
            }
        }
    });
}

/// Bind a Unix socket at `path`, readable and writable by its owner only. A stale socket left
/// by a process that died is replaced; one that answers, or any other file, is refused.
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, EndpointError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let refused = |message: String| EndpointError::Socket {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(refused("another process listens there".into()));
            }
            std::fs::remove_file(path)
                .map_err(|error| refused(format!("cannot remove the stale socket: {error}")))?;
        }
        Ok(_) => return Err(refused("a file that is not a socket is there".into())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(refused(error.to_string())),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|source| EndpointError::Bind {
        addr: format!("unix://{}", path.display()),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|error| refused(format!("cannot make it private: {error}")))?;
    Ok(listener)
}

impl Shared {
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
            member: lease.name.clone(),
            hub: Arc::clone(&lease.hub),
            lease: lease.clone(),
            identity: identity.clone(),
            fleet: Arc::clone(&self.fleet),
            followers: Mutex::new(Vec::new()),
            answerer: Mutex::new(None),
            turn: Mutex::new(None),
            fresh: AtomicBool::new(false),
            barrier,
            relay: Mutex::new(None),
            watch: Mutex::new(TurnWatch::new(self.stall_settings)),
            stalls: Arc::clone(&self.stalls),
        });
        let relayed = Arc::clone(&feed);
        let shared = Arc::downgrade(self);
        let relay = tokio::spawn(async move {
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
                let key = feed_key(&relayed.hub, &relayed.thread);
                let mut feeds = lock(&shared.feeds);
                if feeds
                    .get(&key)
                    .is_some_and(|feed| Arc::ptr_eq(feed, &relayed))
                {
                    feeds.remove(&key);
                }
            }
            let turn = relayed.turn();
            relayed.set_turn(None);
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
            let key = feed_key(&feed.hub, &feed.thread);
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
        tokio::spawn(async move { fleet.after_run(&identity, &lease).await });
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
        let shared = Arc::downgrade(self);
        let hub = Arc::downgrade(&lease.hub);
        let identity = identity.clone();
        // Ends with the app-server's router (which drops the sender).
        tokio::spawn(async move {
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
                        let text = format!(
                            r#"{{"method":{},"params":{}}}"#,
                            Value::from(notification.method.as_str()),
                            notification.params.get()
                        );
                        for connection in &connections {
                            connection.push(text.clone());
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

    fn status(&self) -> EndpointStatus {
        let connections: Vec<ConnectionStatus> = self
            .live_connections()
            .iter()
            .map(|connection| connection.status())
            .collect();
        let mut threads: HashMap<String, usize> = HashMap::new();
        let known_threads = {
            let homes = lock(&self.homes);
            for home in homes.values() {
                *threads.entry(home.identity.key()).or_default() += 1;
            }
            homes.len()
        };
        let identities: Vec<IdentityStatus> = self
            .fleet
            .status()
            .into_iter()
            .map(|identity| IdentityStatus {
                connections: connections
                    .iter()
                    .filter(|connection| connection.identity == identity.identity)
                    .count(),
                threads: threads.get(&identity.identity).copied().unwrap_or(0),
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
        }
    }

    /// The checks every HTTP request passes first: no browser, the listener's own name, a
    /// known token. The caller the token names, or the refusal.
    fn admit(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        if headers.contains_key(http::header::ORIGIN) {
            return Err((StatusCode::FORBIDDEN, "browsers may not connect"));
        }
        // A Unix socket is reached through the file system, never by a browser's name lookup.
        if let ListenAddr::Tcp(addr) = self.listen {
            if !host_allowed(headers, addr) {
                return Err((StatusCode::FORBIDDEN, "unknown Host"));
            }
        }
        self.tokens
            .caller(headers.get(http::header::AUTHORIZATION))
            .ok_or((StatusCode::UNAUTHORIZED, "a bearer token is required"))
    }
}

/// An HTTP refusal: its status and why.
type Refusal = (StatusCode, &'static str);

fn refuse(status: StatusCode, why: &'static str) -> Response {
    (status, why).into_response()
}

/// The `Host` names a client may use: the bound address, and loopback names on its port.
fn host_allowed(headers: &HeaderMap, addr: SocketAddr) -> bool {
    let Some(host) = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let port = addr.port();
    host == addr.to_string()
        || [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ]
        .iter()
        .any(|name| name == host)
}

/// `GET /status`, behind the same checks as an upgrade, for the operator only (it lists every
/// client's connections and threads).
async fn status(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match shared.admit(&headers) {
        Err((status, why)) => refuse(status, why),
        Ok(caller) if !caller.operator => refuse(
            StatusCode::FORBIDDEN,
            "the status is the operator's (a named client sees its own threads only)",
        ),
        Ok(_) => axum::Json(shared.status()).into_response(),
    }
}

/// Every other HTTP request: checked, then upgraded to a client connection.
async fn upgrade(State(shared): State<Arc<Shared>>, request: http::Request<Body>) -> Response {
    let caller = match shared.admit(request.headers()) {
        Ok(caller) => caller,
        Err((status, why)) => return refuse(status, why),
    };
    // The socket's own slot becomes the client connection's.
    let slot = request
        .extensions()
        .get::<SocketSlot>()
        .and_then(|slot| lock(&slot.0).take());
    let Some(slot) = slot else {
        return refuse(StatusCode::TOO_MANY_REQUESTS, "too many connections");
    };
    let (accepted, pending) = match crate::support::ws::accept(request, MAX_MESSAGE_BYTES) {
        Ok(accepted) => accepted,
        Err(refusal) => return refusal.into_response(),
    };
    let connection_shared = Arc::clone(&shared);
    shared.connections.spawn(async move {
        let _slot = slot;
        if let Some((sender, receiver)) = pending.connect().await {
            Connection::run(connection_shared, caller, sender, receiver).await;
        }
    });
    accepted
}

use crate::support::ws::{WsReceiver as Receiver, WsSender as Sender};

/// Methods about the account a connection runs as, answered per identity.
const LOGIN: &str = "account/login/start";
const LOGOUT: &str = "account/logout";

/// A thread a connection follows: its member's lease and the thread's feed.
struct Followed {
    lease: Lease,
    feed: Arc<Feed>,
}

/// One thread of one app-server incarnation, claimed once, relayed to every connection that
/// follows it (as Codex sends a thread's messages to each of its subscribed connections).
struct Feed {
    thread: String,
    member: String,
    hub: Arc<CodexHub>,
    /// The lease the feed was made with, and whose: after each turn the member is checked for
    /// recycling (threads opened, memory), as `serve` does after each run.
    lease: Lease,
    identity: Identity,
    fleet: Arc<Fleet>,
    /// The followers, oldest first; the last is the one server requests go to, unless
    /// `answerer` names a follower (the one that started the running turn).
    followers: Mutex<Vec<Weak<Connection>>>,
    answerer: Mutex<Option<usize>>,
    /// The running turn (from `turn/started` or `turn/start`'s answer until `turn/completed`).
    turn: Mutex<Option<String>>,
    /// Started here and no turn yet: Codex has no rollout of it, so its app-server must not be
    /// stopped to make room (the thread could not be resumed).
    fresh: AtomicBool,
    /// Asks the relay to send what it holds, then acknowledge (see [`Connection::barrier`]).
    barrier: mpsc::Sender<oneshot::Sender<()>>,
    relay: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The running turn, watched for stalls.
    watch: Mutex<TurnWatch>,
    stalls: Arc<StallCounts>,
}

/// Stalls seen so far, by kind, and turns completed for their clients.
#[derive(Default)]
struct StallCounts {
    by_kind: Mutex<BTreeMap<&'static str, usize>>,
    recovered: AtomicUsize,
}

/// A feed's key: the app-server incarnation (its hub, alive as long as the feed holds it) and
/// the thread.
type FeedKey = (usize, String);

fn feed_key(hub: &Arc<CodexHub>, thread: &str) -> FeedKey {
    (Arc::as_ptr(hub) as usize, thread.to_string())
}

impl Feed {
    fn followers(&self) -> Vec<Arc<Connection>> {
        lock(&self.followers)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Add (or move to the end) a follower: the newest follows, and answers server requests.
    fn add(&self, connection: &Arc<Connection>) {
        let mut followers = lock(&self.followers);
        followers.retain(|weak| {
            weak.upgrade()
                .is_some_and(|other| other.number != connection.number)
        });
        followers.push(Arc::downgrade(connection));
    }

    /// Remove a follower; whether anyone still follows.
    fn remove(&self, number: usize) -> bool {
        let mut followers = lock(&self.followers);
        followers.retain(|weak| weak.upgrade().is_some_and(|other| other.number != number));
        let mut answerer = lock(&self.answerer);
        if *answerer == Some(number) {
            *answerer = None;
        }
        !followers.is_empty()
    }

    fn set_turn(&self, turn: Option<String>) {
        let mut current = lock(&self.turn);
        match (current.is_some(), turn.is_some()) {
            (false, true) => self.hub.hold(),
            (true, false) => self.hub.release(),
            _ => {}
        }
        if turn.is_some() {
            self.persisted();
        }
        *current = turn;
    }

    /// A thread this app-server started and has no turn yet holds it (see `fresh`).
    fn started_here(&self) {
        if !self.fresh.swap(true, Ordering::SeqCst) {
            self.hub.hold();
        }
    }

    /// Its first turn began (Codex writes the rollout), or the feed ended.
    fn persisted(&self) {
        if self.fresh.swap(false, Ordering::SeqCst) {
            self.hub.release();
        }
    }

    fn turn(&self) -> Option<String> {
        lock(&self.turn).clone()
    }

    /// Where a server request of this thread goes: the follower that started the running turn,
    /// else the newest follower.
    fn answering(&self) -> Option<Arc<Connection>> {
        let followers = self.followers();
        let wanted = *lock(&self.answerer);
        wanted
            .and_then(|number| followers.iter().find(|c| c.number == number).cloned())
            .or_else(|| followers.last().cloned())
    }

    /// The stall watcher's deadline passed: tell the stall once; with recovery on, complete a
    /// turn whose final agent message came without its `turn/completed` for the followers.
    async fn stall_due(&self) {
        let Some(verdict) = lock(&self.watch).due() else {
            return;
        };
        let turn = self.turn().unwrap_or_default();
        let kind = match verdict {
            Verdict::Report(kind) => kind,
            Verdict::Recover => StallKind::MissingTurnCompleted,
        };
        *lock(&self.stalls.by_kind).entry(kind.as_str()).or_default() += 1;
        let quiet = lock(&self.watch)
            .status()
            .map_or(0, |stall| stall.quiet_secs);
        match verdict {
            Verdict::Report(kind) => tracing::warn!(
                "turn {turn} on thread {} ({}): stalled ({}): nothing for {quiet} s",
                self.thread,
                self.member,
                kind.as_str()
            ),
            Verdict::Recover => {
                tracing::warn!(
                    "turn {turn} on thread {} ({}): no turn/completed {quiet} s after its final agent message; completed for the client (recovered)",
                    self.thread,
                    self.member
                );
                self.stalls.recovered.fetch_add(1, Ordering::SeqCst);
                let ended = serde_json::json!({
                    "method": "turn/completed",
                    "params": {
                        "threadId": self.thread,
                        "turn": {"id": turn, "items": [], "status": "completed", "error": null},
                    },
                })
                .to_string();
                for follower in self.followers() {
                    follower.push(ended.clone());
                }
                self.set_turn(None);
                *lock(&self.answerer) = None;
                self.fleet.after_run(&self.identity, &self.lease).await;
            }
        }
    }

    /// One message of the thread to its followers.
    async fn deliver(&self, message: Inbound) {
        match message {
            Inbound::Notification(notification) => {
                let item_type = (notification.method == "item/completed")
                    .then(|| item_type(notification.params.get()))
                    .flatten();
                let relay = lock(&self.watch).observe(&notification.method, item_type.as_deref());
                if !relay {
                    tracing::debug!(
                        "thread {}: Codex's late turn/completed of a recovered turn, not relayed",
                        self.thread
                    );
                    return;
                }
                let text = format!(
                    r#"{{"method":{},"params":{}}}"#,
                    Value::from(notification.method.as_str()),
                    notification.params.get()
                );
                let followers = self.followers();
                match notification.method.as_str() {
                    "turn/started" => {
                        #[derive(serde::Deserialize)]
                        struct Turn {
                            id: String,
                        }
                        #[derive(serde::Deserialize)]
                        struct Started {
                            turn: Turn,
                        }
                        if let Ok(started) =
                            serde_json::from_str::<Started>(notification.params.get())
                        {
                            self.set_turn(Some(started.turn.id));
                        }
                    }
                    "turn/completed" => {
                        // Queued before the turn counts as ended: a draining stop that sees no
                        // running turn closes after this message, never before it.
                        for follower in &followers {
                            follower.push(text.clone());
                        }
                        self.set_turn(None);
                        *lock(&self.answerer) = None;
                        self.fleet.after_run(&self.identity, &self.lease).await;
                        return;
                    }
                    _ => {}
                }
                for follower in &followers {
                    follower.push(text.clone());
                }
            }
            Inbound::Request(request) => match self.answering() {
                Some(connection) => connection.relay_request(&self.hub, request).await,
                None => {
                    let _ = self
                        .hub
                        .peer()
                        .respond_error(
                            request.id,
                            INTERNAL_ERROR,
                            "clawbridge: no client follows this thread".into(),
                        )
                        .await;
                }
            },
            Inbound::Response(_) => {}
        }
    }
}

/// The `type` of an `item/completed`'s item.
fn item_type(params: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(rename = "type")]
        kind: String,
    }
    #[derive(serde::Deserialize)]
    struct Completed {
        item: Item,
    }
    serde_json::from_str::<Completed>(params)
        .ok()
        .map(|completed| completed.item.kind)
}

/// One client connection: its identity, threads, server requests waiting for answers, queue.
struct Connection {
    number: usize,
    shared: Arc<Shared>,
    out: mpsc::Sender<String>,
    /// The client its token names (the operator's token: every thread; a named client: its own).
    caller: Caller,
    /// Who its requests run as: native until it logs in.
    identity: Mutex<Identity>,
    threads: Mutex<HashMap<String, Followed>>,
    /// Our id of a server request -> the member's hub and Codex's id.
    waiting: Mutex<HashMap<i64, (Arc<CodexHub>, RequestId)>>,
    next_id: AtomicI64,
    in_flight: Arc<Semaphore>,
    tasks: TaskTracker,
    transcript: Option<super::TranscriptQueue>,
    /// `clientInfo` of `initialize`.
    client: Mutex<Option<String>>,
    initialized: AtomicBool,
    /// Cancelled when this connection ends (by either side, or on shutdown).
    cancel: CancellationToken,
}

impl Connection {
    async fn run(shared: Arc<Shared>, caller: Caller, mut sender: Sender, mut receiver: Receiver) {
        let (out, mut queue) = mpsc::channel::<String>(CLIENT_QUEUE);
        let cancel = shared.cancel.child_token();
        let number = shared.opened.fetch_add(1, Ordering::SeqCst) + 1;
        let (transcript, transcript_task) = match &shared.transcript {
            Some(dir) => {
                match super::transcript_writer(&dir.join(format!("connection-{number}"))) {
                    Ok((queue, task)) => (Some(queue), Some(task)),
                    Err(error) => {
                        tracing::warn!("transcript of connection {number}: {error}");
                        (None, None)
                    }
                }
            }
            None => (None, None),
        };
        let connection = Arc::new(Connection {
            number,
            shared: Arc::clone(&shared),
            out,
            caller,
            identity: Mutex::new(Identity::Native),
            threads: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            tasks: TaskTracker::new(),
            transcript,
            client: Mutex::new(None),
            initialized: AtomicBool::new(false),
            cancel: cancel.clone(),
        });
        lock(&shared.live).insert(number, Arc::downgrade(&connection));
        // The writer: the queue to the client, and a ping every interval; a close frame at the end.
        let writer_cancel = cancel.clone();
        let ping_interval = shared.ping_interval;
        let writer = tokio::spawn(async move {
            let mut ping = tokio::time::interval_at(
                tokio::time::Instant::now() + ping_interval,
                ping_interval,
            );
            loop {
                let message = tokio::select! {
                    biased;
                    message = queue.recv() => message,
                    _ = ping.tick() => {
                        let payload = soketto::data::ByteSlice125::try_from(&b"clawbridge"[..]);
                        let pinged = match payload {
                            Ok(payload) => sender.send_ping(payload).await.is_ok()
                                && sender.flush().await.is_ok(),
                            Err(_) => false,
                        };
                        if !pinged {
                            break;
                        }
                        continue;
                    }
                    () = writer_cancel.cancelled() => {
                        // What was queued before the close still goes out (bounded: the queue).
                        while let Ok(message) = queue.try_recv() {
                            if sender.send_text(&message).await.is_err() {
                                break;
                            }
                        }
                        let _ = sender.flush().await;
                        None
                    }
                };
                let Some(message) = message else { break };
                if sender.send_text(&message).await.is_err() || sender.flush().await.is_err() {
                    break;
                }
            }
            let _ = sender.close().await;
        });
        // Nothing but `initialize` may open a connection, and soon.
        let handshake = {
            let connection = Arc::downgrade(&connection);
            let cancel = cancel.clone();
            let timeout = shared.handshake_timeout;
            tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                let silent = connection
                    .upgrade()
                    .is_some_and(|c| !c.initialized.load(Ordering::SeqCst));
                if silent {
                    tracing::info!("a client sent no initialize within {timeout:?}; closed");
                    cancel.cancel();
                }
            })
        };
        let mut data = Vec::new();
        loop {
            data.clear();
            let received = tokio::select! {
                received = tokio::time::timeout(shared.idle_timeout, receiver.receive(&mut data)) => received,
                () = cancel.cancelled() => break,
            };
            match received {
                Ok(Ok(soketto::Incoming::Data(_))) => {}
                Ok(Ok(soketto::Incoming::Pong(_))) => continue,
                Ok(Ok(soketto::Incoming::Closed(_))) => break,
                Ok(Err(error)) => {
                    tracing::debug!("client connection {number} ended: {error}");
                    break;
                }
                Err(_) => {
                    tracing::info!(
                        "client connection {number}: nothing for {:?}, not even a pong; closed",
                        shared.idle_timeout
                    );
                    break;
                }
            }
            let text = String::from_utf8_lossy(&data).into_owned();
            connection.receive(text).await;
            if writer.is_finished() {
                break;
            }
        }
        cancel.cancel();
        handshake.abort();
        connection.close().await;
        let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
        lock(&shared.live).remove(&number);
        // The transcript's writer ends when the last copy of its queue is gone.
        drop(connection);
        if let Some(task) = transcript_task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    fn status(&self) -> ConnectionStatus {
        let mut threads: Vec<ThreadStatus> = lock(&self.threads)
            .iter()
            .map(|(id, followed)| ThreadStatus {
                id: id.clone(),
                member: followed.lease.name.clone(),
                turn: followed.feed.turn(),
                followers: followed.feed.followers().len(),
                stall: lock(&followed.feed.watch).status(),
            })
            .collect();
        threads.sort_by(|a, b| a.id.cmp(&b.id));
        ConnectionStatus {
            number: self.number,
            identity: self.identity().key(),
            client: lock(&self.client).clone(),
            threads,
            requests_in_flight: MAX_IN_FLIGHT - self.in_flight.available_permits(),
            waiting_answers: lock(&self.waiting).len(),
        }
    }

    /// A copy of a line for the transcript and the observer (never waits).
    fn tap(&self, direction: super::Direction, line: &str) {
        if let Some(transcript) = &self.transcript {
            transcript.offer(direction, line.as_bytes().to_vec());
        }
        if let Some(observe) = &self.shared.observe {
            observe.offer(self.number, direction, line.as_bytes().to_vec());
        }
    }

    /// A message to the client, tapped.
    async fn send(&self, text: String) {
        self.tap(super::Direction::Out, &text);
        let _ = self.out.send(text).await;
    }

    /// A message to the client from a relay: never waits; a client that fell
    /// [`CLIENT_QUEUE`] messages behind is closed (its threads stay on their members).
    fn push(&self, text: String) {
        self.tap(super::Direction::Out, &text);
        if self.out.try_send(text).is_err() {
            tracing::warn!(
                "client connection {} fell {CLIENT_QUEUE} messages behind; closed",
                self.number
            );
            self.cancel.cancel();
        }
    }

    /// One message from the client.
    async fn receive(self: &Arc<Self>, text: String) {
        self.tap(super::Direction::In, &text);
        match crate::codex::protocol::wire::decode(text) {
            Ok(Incoming::Request { id, method, params }) => {
                let method = method.to_string();
                if method == "initialize" {
                    self.initialize(id, &params).await;
                    return;
                }
                let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
                    self.answer_error(
                        &id,
                        RpcError {
                            code: -32001,
                            message: format!(
                                "Server overloaded: {MAX_IN_FLIGHT} requests of this connection are in flight"
                            ),
                            data: None,
                        },
                    )
                    .await;
                    return;
                };
                let connection = Arc::clone(self);
                self.tasks.spawn(async move {
                    let _permit = permit;
                    connection.forward(id, method, params).await;
                });
            }
            Ok(Incoming::Notification { method, params, .. }) => {
                let method = method.to_string();
                if method == "initialized" {
                    return;
                }
                // A client's notification about a thread goes to the thread's member.
                if let Some(hub) = thread_of(&params).and_then(|thread| self.hub_of(&thread)) {
                    let params: Option<Value> = params.parse().ok();
                    let _ = hub.peer().notify(&method, params.as_ref()).await;
                }
            }
            Ok(Incoming::Response { id, result }) => {
                let RequestId::Integer(our_id) = id else {
                    return;
                };
                let Some((hub, codex_id)) = lock(&self.waiting).remove(&our_id) else {
                    tracing::debug!("a client answered an unknown server request {id}");
                    return;
                };
                let sent = match result {
                    Ok(raw) => match serde_json::from_str::<Value>(raw.get()) {
                        Ok(value) => hub.peer().respond(codex_id, value).await,
                        Err(_) => return,
                    },
                    Err(error) => hub.peer().respond_rpc_error(codex_id, error).await,
                };
                if let Err(error) = sent {
                    tracing::debug!("an answer to the app-server was lost: {error}");
                }
            }
            Err(error) => {
                tracing::debug!("a client sent a message that is not JSON-RPC: {error}");
            }
        }
    }

    fn identity(&self) -> Identity {
        lock(&self.identity).clone()
    }

    async fn initialize(&self, id: RequestId, params: &RawParams) {
        self.initialized.store(true, Ordering::SeqCst);
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Info {
            name: Option<String>,
            version: Option<String>,
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Peek {
            client_info: Option<Info>,
        }
        if let Some(info) = serde_json::from_str::<Peek>(params.get())
            .ok()
            .and_then(|peek| peek.client_info)
        {
            let name = [info.name, info.version]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
            let name: String = name.chars().filter(|c| !c.is_control()).take(200).collect();
            *lock(&self.client) = Some(name);
        }
        // Any running member's answer (one Codex build): a handshake starts nothing when one
        // runs, so a client that logs in next does not hold a native member for nothing.
        if let Some(result) = self.shared.fleet.any_initialize_result() {
            return self.answer(&id, &result.to_string()).await;
        }
        match self
            .shared
            .fleet
            .lease(&Identity::Native, None, &self.shared.cwd)
            .await
        {
            Ok((lease, _hold)) => {
                let result = self
                    .shared
                    .fleet
                    .initialize_answer(&lease.hub.initialize_result);
                self.answer(&id, &result.to_string()).await;
            }
            Err(error) => {
                self.answer_error(
                    &id,
                    RpcError {
                        code: INTERNAL_ERROR,
                        message: format!("clawbridge: no app-server: {error}"),
                        data: None,
                    },
                )
                .await
            }
        }
    }

    /// The member that serves a thread this connection follows.
    fn hub_of(&self, thread: &str) -> Option<Arc<CodexHub>> {
        lock(&self.threads)
            .get(thread)
            .map(|followed| Arc::clone(&followed.lease.hub))
    }

    async fn fail(&self, id: &RequestId, code: i64, message: String) {
        let error = RpcError {
            code,
            message,
            data: None,
        };
        self.answer_error(id, error).await
    }

    /// A member of `identity` for a request (the thread's, by `affinity`), held until the hold
    /// goes; from now on its messages of no thread reach the identity's connections.
    async fn lease(
        &self,
        identity: &Identity,
        affinity: Option<&str>,
    ) -> Result<(Lease, crate::codex::client::fleet::Hold), String> {
        let (lease, hold) = self
            .shared
            .fleet
            .lease(identity, affinity, &self.shared.cwd)
            .await
            .map_err(|error| format!("clawbridge: {error}"))?;
        self.shared.watch_unscoped(&lease, identity);
        Ok((lease, hold))
    }

    /// `account/login/start`: the connection takes the identity the login names, and the login
    /// goes to a member of that identity only (never to one that serves other connections).
    async fn login(self: &Arc<Self>, id: RequestId, params: &RawParams) {
        let value: Value = serde_json::from_str(params.get()).unwrap_or(Value::Null);
        let identity = match Identity::from_login(&value) {
            Ok(identity) => identity,
            Err(refusal) => {
                return self
                    .fail(&id, INVALID_REQUEST, format!("clawbridge: {refusal}"))
                    .await
            }
        };
        // A login is the same whenever it is sent: one whose member went away under it (killed,
        // recycled) is sent once more, to the identity's next member.
        let mut tries = 0;
        loop {
            tries += 1;
            let (lease, _hold) = match self.lease(&identity, None).await {
                Ok(leased) => leased,
                Err(error) => return self.fail(&id, INTERNAL_ERROR, error).await,
            };
            match lease.hub.peer().request_raw(LOGIN, &value).await {
                Ok(raw) => {
                    self.become_identity(identity).await;
                    return self.answer(&id, raw.get()).await;
                }
                Err(PeerError::ConnectionClosed) if tries < 2 => continue,
                Err(error) => return self.member_failed(&id, &identity, &lease, error).await,
            }
        }
    }

    /// From now on the connection's requests run as `identity`. The threads it followed as
    /// another identity are let go: they stay that identity's, never run under this one.
    async fn become_identity(&self, identity: Identity) {
        let previous = std::mem::replace(&mut *lock(&self.identity), identity.clone());
        if previous != identity {
            tracing::info!(
                "client connection {}: now {identity} (was {previous})",
                self.number
            );
            self.leave_all().await;
        }
    }

    /// A request that got an error or no answer from its member: a timeout marks the member
    /// unhealthy (it is restarted or reconnected; new work goes elsewhere meanwhile).
    async fn member_failed(
        &self,
        id: &RequestId,
        identity: &Identity,
        lease: &Lease,
        error: PeerError,
    ) {
        match error {
            PeerError::Rpc { error, .. } => self.answer_error(id, error).await,
            error => {
                if let PeerError::Timeout { .. } = error {
                    self.shared
                        .fleet
                        .report_unhealthy(identity, lease, error.to_string())
                        .await;
                }
                self.fail(
                    id,
                    INTERNAL_ERROR,
                    format!("clawbridge: the app-server {}: {error}", lease.name),
                )
                .await
            }
        }
    }

    /// A client request, to a member of its identity, and the member's answer back.
    async fn forward(self: &Arc<Self>, id: RequestId, method: String, params: RawParams) {
        match method.as_str() {
            "thread/loaded/list" => return self.loaded_list(&id).await,
            LOGIN => return self.login(id, &params).await,
            LOGOUT => {
                // The member's login is its identity's, shared with its other connections:
                // this connection stops using it, nothing is logged out for the others.
                self.become_identity(Identity::Native).await;
                return self.answer(&id, "{}").await;
            }
            _ => {}
        }
        let identity = self.identity();
        let thread = if method == "thread/start" {
            None
        } else {
            thread_of(&params)
        };
        // A thread lives with the identity that opened it: another identity's connection gets
        // a clear refusal, never a turn under the wrong account.
        let home = thread
            .as_deref()
            .and_then(|thread| lock(&self.shared.homes).get(thread).cloned());
        if let (Some(thread), Some(home)) = (&thread, &home) {
            if !self.caller.may_use(&home.owner) {
                return self
                    .fail(
                        &id,
                        INVALID_REQUEST,
                        format!("clawbridge: thread {thread} belongs to another client"),
                    )
                    .await;
            }
            if home.identity != identity {
                return self
                    .fail(
                        &id,
                        INVALID_REQUEST,
                        format!(
                            "clawbridge: thread {thread} belongs to another account ({}); this connection runs as {identity}. Log in with that account's credentials to use it.",
                            home.identity
                        ),
                    )
                    .await;
            }
        }
        if let ("thread/unsubscribe", Some(thread)) = (method.as_str(), &thread) {
            if let Some(status) = self.unsubscribe(thread) {
                return self
                    .answer(&id, &serde_json::json!({ "status": status }).to_string())
                    .await;
            }
        }
        let followed = thread.as_deref().and_then(|thread| {
            let lease = lock(&self.threads)
                .get(thread)
                .filter(|followed| followed.lease.hub.is_alive())
                .map(|followed| followed.lease.clone())?;
            let hold = self.shared.fleet.hold(&lease)?;
            Some((lease, hold))
        });
        let (lease, _hold) = match followed {
            Some(leased) => leased,
            None => {
                let affinity = home.as_ref().map(|home| home.member.as_str());
                match self.lease(&identity, affinity).await {
                    Ok(leased) => leased,
                    Err(error) => return self.fail(&id, INTERNAL_ERROR, error).await,
                }
            }
        };
        let params: &serde_json::value::RawValue = match serde_json::from_str(params.get()) {
            Ok(params) => params,
            Err(_) => {
                return self
                    .fail(&id, INVALID_REQUEST, "params are not JSON".into())
                    .await
            }
        };
        // A resumed thread is followed before the request, so nothing Codex says about it
        // before its answer (`thread/status/changed` `notLoaded`) is missed. A turn on a thread
        // this app-server has no feed for (its member was restarted, or stopped while idle to
        // make room for another account) is resumed here first, so it runs and is heard.
        let mut resumed_here = false;
        match (method.as_str(), &thread) {
            ("thread/resume", Some(thread)) => {
                self.follow(thread, &lease, &identity);
                resumed_here = true;
            }
            ("turn/start" | "turn/steer", Some(thread)) if !self.follows_on(thread, &lease.hub) => {
                let known_here = self.shared.feed_exists(&lease.hub, thread);
                self.follow(thread, &lease, &identity);
                if !known_here {
                    let resume = serde_json::json!({ "threadId": thread });
                    if let Err(error) = lease.hub.peer().request_raw("thread/resume", &resume).await
                    {
                        self.leave(thread);
                        return self.member_failed(&id, &identity, &lease, error).await;
                    }
                    lease.hub.note_opened();
                }
            }
            _ => {}
        }
        match lease.hub.peer().request_raw(&method, &params).await {
            Ok(raw) => {
                // The thread the answer is about: the one opened, or the one named.
                let mut answered = thread.clone();
                match method.as_str() {
                    "thread/start" | "thread/resume" => {
                        let opened = serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .and_then(|answer| answer["thread"]["id"].as_str().map(str::to_string));
                        if let Some(opened) = opened {
                            lease.hub.note_opened();
                            self.follow(&opened, &lease, &identity);
                            if method == "thread/start" {
                                if let Some(feed) = self.feed_of(&opened) {
                                    feed.started_here();
                                }
                            }
                            answered = Some(opened);
                        }
                    }
                    "turn/start" => {
                        let turn = serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .and_then(|answer| answer["turn"]["id"].as_str().map(str::to_string));
                        if let (Some(thread), Some(turn)) = (&thread, turn) {
                            if let Some(feed) = self.feed_of(thread) {
                                feed.set_turn(Some(turn));
                                *lock(&feed.answerer) = Some(self.number);
                            }
                        }
                    }
                    _ => {}
                }
                if let Some(answered) = answered {
                    self.barrier(&lease.hub, &answered).await;
                }
                self.answer(&id, raw.get()).await;
            }
            Err(error) => {
                if resumed_here {
                    if let Some(thread) = &thread {
                        self.leave(thread);
                    }
                }
                self.member_failed(&id, &identity, &lease, error).await
            }
        }
    }

    /// Whether this connection follows `thread` on that app-server incarnation.
    fn follows_on(&self, thread: &str, hub: &Arc<CodexHub>) -> bool {
        lock(&self.threads)
            .get(thread)
            .is_some_and(|followed| Arc::ptr_eq(&followed.lease.hub, hub))
    }

    fn feed_of(&self, thread: &str) -> Option<Arc<Feed>> {
        lock(&self.threads)
            .get(thread)
            .map(|followed| Arc::clone(&followed.feed))
    }

    /// `thread/loaded/list` over the identity's members: the threads loaded in each of its
    /// running app-servers (one page; a client of one app-server sees its own the same way).
    /// Another identity's threads are never listed.
    async fn loaded_list(&self, id: &RequestId) {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            data: Vec<String>,
        }
        let mut loaded = Vec::new();
        let everything = serde_json::json!({});
        for (name, hub) in self.shared.fleet.live_hubs(&self.identity()) {
            let asked = hub
                .peer()
                .request::<_, Page>("thread/loaded/list", &everything);
            match tokio::time::timeout(Duration::from_secs(10), asked).await {
                Ok(Ok(page)) => loaded.extend(page.data),
                Ok(Err(error)) => tracing::debug!("thread/loaded/list on {name}: {error}"),
                Err(_) => tracing::debug!("thread/loaded/list on {name}: no answer in 10 s"),
            }
        }
        // A named client hears only of its own threads.
        if !self.caller.operator {
            let homes = lock(&self.shared.homes);
            loaded.retain(|thread| {
                homes
                    .get(thread)
                    .is_some_and(|home| self.caller.may_use(&home.owner))
            });
        }
        loaded.sort();
        loaded.dedup();
        let result = serde_json::json!({"data": loaded, "nextCursor": null});
        self.answer(id, &result.to_string()).await;
    }

    /// Follow a thread on `lease`'s app-server from now on: its feed (made and claimed on first
    /// need) relays its messages to this connection too. The thread is filed as `identity`'s.
    fn follow(self: &Arc<Self>, thread: &str, lease: &Lease, identity: &Identity) {
        {
            let mut homes = lock(&self.shared.homes);
            if homes.len() >= MAX_REMEMBERED_THREADS && !homes.contains_key(thread) {
                homes.clear();
            }
            // The client that opened a thread keeps it (an operator's resume does not take it).
            let owner = homes
                .get(thread)
                .map_or_else(|| self.caller.name.clone(), |home| home.owner.clone());
            homes.insert(
                thread.to_string(),
                ThreadHome {
                    identity: identity.clone(),
                    member: lease.name.clone(),
                    owner,
                },
            );
        }
        if self.follows_on(thread, &lease.hub) {
            if let Some(feed) = self.feed_of(thread) {
                feed.add(self);
            }
            return;
        }
        let feed = self.shared.feed(thread, lease, identity);
        feed.add(self);
        let mut threads = lock(&self.threads);
        if threads.len() >= MAX_THREADS_PER_CONNECTION && !threads.contains_key(thread) {
            // One thread goes, one without a running turn if there is one (it stays on its
            // member; the client can resume it).
            let idle = threads
                .iter()
                .find(|(_, followed)| followed.feed.turn().is_none())
                .or_else(|| threads.iter().next())
                .map(|(id, _)| id.clone());
            if let Some(gone) = idle.and_then(|id| threads.remove(&id)) {
                self.shared.unfollow(&gone.feed, self.number);
            }
        }
        let followed = Followed {
            lease: lease.clone(),
            feed,
        };
        if let Some(old) = threads.insert(thread.to_string(), followed) {
            self.shared.unfollow(&old.feed, self.number);
        }
    }

    /// Stop following `thread` (the feed ends when nobody follows it any more).
    fn leave(&self, thread: &str) -> Option<Followed> {
        let followed = lock(&self.threads).remove(thread)?;
        self.shared.unfollow(&followed.feed, self.number);
        Some(followed)
    }

    /// A server request of one of this connection's threads, under this connection's own id.
    async fn relay_request(
        &self,
        hub: &Arc<CodexHub>,
        request: crate::codex::protocol::inbound::Request,
    ) {
        let ours = self.next_id.fetch_add(1, Ordering::Relaxed);
        let full = {
            let mut waiting = lock(&self.waiting);
            let full = waiting.len() >= MAX_WAITING_ANSWERS;
            if !full {
                waiting.insert(ours, (Arc::clone(hub), request.id.clone()));
            }
            full
        };
        if full {
            let _ = hub
                .peer()
                .respond_error(
                    request.id,
                    INTERNAL_ERROR,
                    "clawbridge: the client has too many unanswered requests".into(),
                )
                .await;
            return;
        }
        let text =
            serde_json::json!({"id": ours, "method": request.method, "params": request.params})
                .to_string();
        self.push(text);
    }

    /// Wait until everything the member said about `thread` before now is in this client's
    /// queue, so an answer sent next keeps Codex's order (its messages first, as Codex sent
    /// them). Bounded: a stuck member or relay costs the order, never the answer.
    async fn barrier(&self, hub: &CodexHub, thread: &str) {
        hub.fence(ORDER_WAIT).await;
        let Some(barrier) = self.feed_of(thread).map(|feed| feed.barrier.clone()) else {
            return;
        };
        let (ack, acked) = oneshot::channel();
        if barrier.send(ack).await.is_ok() {
            let _ = tokio::time::timeout(ORDER_WAIT, acked).await;
        }
    }

    /// A client's `thread/unsubscribe`, as Codex treats one connection's: the connection stops
    /// hearing the thread. The member (one connection for every client) is told only when no
    /// other connection follows the thread; then `None`, and the request goes to it. Otherwise
    /// the answer is given here: `unsubscribed`, or `notSubscribed` for a thread this
    /// connection did not follow.
    fn unsubscribe(&self, thread: &str) -> Option<&'static str> {
        let followed = self.leave(thread);
        if !self.shared.followed_elsewhere(self.number, thread) {
            return None;
        }
        Some(if followed.is_some() {
            "unsubscribed"
        } else {
            "notSubscribed"
        })
    }

    /// The member serving `thread` went away (it crashed, was killed, or was stopped while
    /// idle): a running turn ends for the client with a failed `turn/completed` naming why,
    /// instead of never ending; the thread is let go, so the client's next message for it goes
    /// to the member's next incarnation, which reads the thread back from Codex's home.
    fn member_lost(&self, feed: &Arc<Feed>, turn: Option<&str>) {
        let (thread, member) = (feed.thread.as_str(), feed.member.as_str());
        {
            // Only if it still follows the thread through that feed (not on a newer incarnation).
            let mut threads = lock(&self.threads);
            if !threads
                .get(thread)
                .is_some_and(|followed| Arc::ptr_eq(&followed.feed, feed))
            {
                return;
            }
            threads.remove(thread);
        }
        if let Some(turn) = turn {
            let ended = serde_json::json!({
                "method": "turn/completed",
                "params": {
                    "threadId": thread,
                    "turn": {
                        "id": turn,
                        "items": [],
                        "status": "failed",
                        "error": {
                            "message": format!("clawbridge: the app-server {member} serving this thread went away during the turn; resume the thread to go on"),
                        },
                    },
                },
            });
            self.push(ended.to_string());
        }
    }

    /// Shutdown: every running turn of this connection gets `turn/interrupt`; waits (bounded by
    /// the caller) until Codex has said `turn/completed` for each, so the client hears it.
    async fn interrupt_turns(&self) {
        let running: Vec<(String, String, Arc<CodexHub>)> = lock(&self.threads)
            .iter()
            .filter_map(|(thread, followed)| {
                followed
                    .feed
                    .turn()
                    .map(|turn| (thread.clone(), turn, Arc::clone(&followed.lease.hub)))
            })
            .collect();
        let mut interrupts = tokio::task::JoinSet::new();
        for (thread_id, turn_id, hub) in running {
            interrupts.spawn(async move {
                let params = TurnInterruptParams { thread_id, turn_id };
                // A turn Codex has answered `turn/start` for may not be active in it yet
                // ("no active turn to interrupt", measured on 0.169.0 when the stop comes right
                // after the start): asked again shortly, until it is or the grace ends.
                loop {
                    match hub.peer().call::<TurnInterrupt>(&params).await {
                        Err(PeerError::Rpc { error, .. })
                            if error.message.contains("no active turn") =>
                        {
                            tokio::time::sleep(INTERRUPT_RETRY).await;
                        }
                        Err(error) => {
                            tracing::debug!("turn/interrupt on shutdown: {error}");
                            break;
                        }
                        Ok(_) => break,
                    }
                }
            });
        }
        interrupts.join_all().await;
        while lock(&self.threads)
            .values()
            .any(|followed| followed.feed.turn().is_some() && followed.lease.hub.is_alive())
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn answer(&self, id: &RequestId, result: &str) {
        let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
        self.send(format!(r#"{{"id":{id},"result":{result}}}"#))
            .await;
    }

    async fn answer_error(&self, id: &RequestId, error: RpcError) {
        let message = serde_json::json!({"id": id, "error": error});
        self.send(message.to_string()).await;
    }

    /// Stop following every thread; each that nobody else follows is unsubscribed on its
    /// member (Codex holds every thread it opened in memory until told nobody follows it; a
    /// later resume loads it again).
    async fn leave_all(&self) {
        let threads: Vec<(String, Followed)> = lock(&self.threads).drain().collect();
        let mut unsubscribes = tokio::task::JoinSet::new();
        for (thread, followed) in threads {
            let still_followed = self.shared.unfollow(&followed.feed, self.number);
            if still_followed || !followed.lease.hub.is_alive() {
                continue;
            }
            unsubscribes.spawn(async move {
                let params = ThreadUnsubscribeParams { thread_id: thread };
                if let Err(error) = followed
                    .lease
                    .hub
                    .peer()
                    .call::<ThreadUnsubscribe>(&params)
                    .await
                {
                    tracing::debug!("thread/unsubscribe after a client left: {error}");
                }
            });
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), unsubscribes.join_all()).await;
    }

    /// The connection is gone: it follows nothing any more, its members are told nobody will
    /// answer.
    async fn close(&self) {
        self.leave_all().await;
        let waiting: Vec<(Arc<CodexHub>, RequestId)> = lock(&self.waiting)
            .drain()
            .map(|(_, entry)| entry)
            .collect();
        for (hub, id) in waiting {
            let _ = hub
                .peer()
                .respond_error(
                    id,
                    INTERNAL_ERROR,
                    "clawbridge: the client went away".into(),
                )
                .await;
        }
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.tasks.wait()).await;
    }
}

/// `clawbridge app-server status`: a running endpoint's [`EndpointStatus`] document, read with
/// `GET /status` and the token (over TCP or the Unix socket); bounded in time and size.
pub async fn fetch_status(listen: &ListenAddr, token: &str) -> Result<Value, EndpointError> {
    let failed = |message: String| EndpointError::Status(format!("{listen}: {message}"));
    let host = match listen {
        ListenAddr::Tcp(addr) => addr.to_string(),
        ListenAddr::Unix(_) => "localhost".to_string(),
    };
    let request = format!(
        "GET /status HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let exchange = async {
        match listen {
            ListenAddr::Tcp(addr) => {
                let stream = tokio::net::TcpStream::connect(addr).await?;
                http_exchange(stream, &request).await
            }
            ListenAddr::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                http_exchange(stream, &request).await
            }
        }
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| failed("no answer within 10 s".into()))?
        .map_err(|error| failed(error.to_string()))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| failed("not an HTTP answer".into()))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(failed(format!(
            "HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        )));
    }
    serde_json::from_str(body).map_err(|error| failed(format!("not a status document: {error}")))
}

async fn http_exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(MAX_STATUS_BYTES as u64)
        .read_to_end(&mut answer)
        .await?;
    Ok(answer)
}

/// The `threadId` a message's params name, if any.
fn thread_of(params: &RawParams) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Peek {
        thread_id: Option<String>,
    }
    serde_json::from_str::<Peek>(params.get())
        .ok()
        .and_then(|peek| peek.thread_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listener_s_own_names_pass() {
        let addr: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
        let mut headers = HeaderMap::new();
        headers.insert(http::header::HOST, "127.0.0.1:4000".parse().expect("host"));
        assert!(host_allowed(&headers, addr));
        headers.insert(http::header::HOST, "localhost:4000".parse().expect("host"));
        assert!(host_allowed(&headers, addr));
        headers.insert(
            http::header::HOST,
            "evil.example:4000".parse().expect("host"),
        );
        assert!(!host_allowed(&headers, addr));
        headers.insert(http::header::HOST, "localhost:4001".parse().expect("host"));
        assert!(!host_allowed(&headers, addr));
    }
}
