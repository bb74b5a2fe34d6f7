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

use crate::codex::client::hub::{CodexHub, ThreadHandle};
use crate::codex::client::peer::PeerError;
use crate::codex::client::pool::{Lease, MemberStatus, Pool, PoolConfig};
use crate::codex::protocol::inbound::Inbound;
use crate::codex::protocol::methods::{
    ThreadUnsubscribe, ThreadUnsubscribeParams, TurnInterrupt, TurnInterruptParams,
};
use crate::codex::protocol::wire::{Incoming, RawParams, RequestId, RpcError};
use crate::support::sync::lock;

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
    /// The bearer token every client sends (never logged).
    pub token: String,
    pub pool: PoolConfig,
    /// Connections at once.
    pub max_connections: usize,
    /// A connection from which nothing came for this long (no message, no answer to our pings)
    /// is closed: its client is gone. A live client answers the pings, so an idle one stays.
    pub idle_timeout: Duration,
    /// How often the endpoint pings each client.
    pub ping_interval: Duration,
    /// A connection that has not sent `initialize` by then is closed.
    pub handshake_timeout: Duration,
    /// The folder members start in.
    pub cwd: PathBuf,
    /// `--transcript DIR`: every message both ways, one folder per connection
    /// (`DIR/connection-N/`), one file per thread, secrets redacted (as the stdio proxy writes).
    pub transcript: Option<PathBuf>,
    /// Copies of every line for the conformance checks and the captures (the proxy's observer,
    /// by connection number; a full queue skips the copy, never the message).
    pub observe: Option<super::observe::ObserverQueue>,
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
    pub members: Vec<MemberStatus>,
}

/// One client connection in [`EndpointStatus`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// The connection's number (its transcript folder is `connection-N`).
    pub number: usize,
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
}

/// A running endpoint.
pub struct Endpoint {
    /// Where it listens (the bound port for `ws://IP:0`).
    pub listen: ListenAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    token: String,
    listen: ListenAddr,
    pool: Arc<Pool>,
    cwd: PathBuf,
    slots: Arc<Semaphore>,
    idle_timeout: Duration,
    ping_interval: Duration,
    handshake_timeout: Duration,
    /// Thread -> the member it lives on.
    homes: Mutex<HashMap<String, String>>,
    transcript: Option<PathBuf>,
    observe: Option<super::observe::ObserverQueue>,
    /// Connections so far (each one's transcript folder is named after its number).
    opened: AtomicUsize,
    /// The open connections, by number (at most `max_connections`).
    live: Mutex<BTreeMap<usize, Weak<Connection>>>,
    connections: TaskTracker,
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
            token: settings.token,
            listen: listen.clone(),
            pool: Pool::new(settings.pool),
            cwd: settings.cwd,
            slots: Arc::new(Semaphore::new(settings.max_connections.max(1))),
            idle_timeout: settings.idle_timeout,
            ping_interval: settings.ping_interval,
            handshake_timeout: settings.handshake_timeout,
            homes: Mutex::new(HashMap::new()),
            transcript: settings.transcript,
            observe: settings.observe,
            opened: AtomicUsize::new(0),
            live: Mutex::new(BTreeMap::new()),
            connections: TaskTracker::new(),
            accepting: CancellationToken::new(),
            cancel: CancellationToken::new(),
        });
        let router = axum::Router::new()
            .route("/status", axum::routing::get(status))
            .fallback(upgrade)
            .with_state(Arc::clone(&shared));
        let accepting = shared.accepting.clone();
        let server = tokio::spawn(async move {
            let stopped = async move { accepting.cancelled().await };
            let served = match listener {
                Listener::Tcp(listener) => {
                    axum::serve(crate::support::ws::no_delay(listener), router)
                        .with_graceful_shutdown(stopped)
                        .await
                }
                Listener::Unix(listener) => {
                    axum::serve(listener, router)
                        .with_graceful_shutdown(stopped)
                        .await
                }
            };
            if let Err(error) = served {
                tracing::error!("the WebSocket endpoint stopped: {error}");
            }
        });
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

    /// The pool's members.
    pub fn members(&self) -> Vec<MemberStatus> {
        self.shared.pool.status()
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
        self.shared.connections.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.shared.connections.wait()).await;
        self.shared.pool.shutdown().await;
        if let ListenAddr::Unix(path) = &self.listen {
            let _ = std::fs::remove_file(path);
        }
    }
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
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

    fn status(&self) -> EndpointStatus {
        EndpointStatus {
            listen: self.listen.to_string(),
            connections: self
                .live_connections()
                .iter()
                .map(|connection| connection.status())
                .collect(),
            known_threads: lock(&self.homes).len(),
            members: self.pool.status(),
        }
    }

    /// The checks every HTTP request passes first: no browser, the listener's own name, the
    /// token. `None` when it may go on.
    fn admit(&self, headers: &HeaderMap) -> Option<Response> {
        if headers.contains_key(http::header::ORIGIN) {
            return Some(refuse(StatusCode::FORBIDDEN, "browsers may not connect"));
        }
        // A Unix socket is reached through the file system, never by a browser's name lookup.
        if let ListenAddr::Tcp(addr) = self.listen {
            if !host_allowed(headers, addr) {
                return Some(refuse(StatusCode::FORBIDDEN, "unknown Host"));
            }
        }
        if !token_matches(headers, &self.token) {
            return Some(refuse(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required",
            ));
        }
        None
    }
}

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

fn token_matches(headers: &HeaderMap, token: &str) -> bool {
    use subtle::ConstantTimeEq;
    let Some(given) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return false;
    };
    let given = crate::support::hex::sha256(given.as_bytes(), 32);
    let wanted = crate::support::hex::sha256(token.as_bytes(), 32);
    given.as_bytes().ct_eq(wanted.as_bytes()).into()
}

/// `GET /status`, behind the same checks as an upgrade.
async fn status(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = shared.admit(&headers) {
        return refusal;
    }
    axum::Json(shared.status()).into_response()
}

/// Every other HTTP request: checked, then upgraded to a client connection.
async fn upgrade(State(shared): State<Arc<Shared>>, request: http::Request<Body>) -> Response {
    if let Some(refusal) = shared.admit(request.headers()) {
        return refusal;
    }
    let Ok(slot) = Arc::clone(&shared.slots).try_acquire_owned() else {
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
            Connection::run(connection_shared, sender, receiver).await;
        }
    });
    accepted
}

use crate::support::ws::{WsReceiver as Receiver, WsSender as Sender};

/// A thread a connection follows: its member's lease and the task relaying its messages.
struct Followed {
    lease: Lease,
    relay: tokio::task::JoinHandle<()>,
    /// Asks the relay to send what it holds, then acknowledge (see [`Connection::barrier`]).
    barrier: mpsc::Sender<oneshot::Sender<()>>,
    /// The running turn (from `turn/start`'s answer until `turn/completed`).
    turn: Option<String>,
}

/// One client connection: its threads, its server requests waiting for answers, its queue.
struct Connection {
    number: usize,
    shared: Arc<Shared>,
    out: mpsc::Sender<String>,
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
    async fn run(shared: Arc<Shared>, mut sender: Sender, mut receiver: Receiver) {
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
                turn: followed.turn.clone(),
            })
            .collect();
        threads.sort_by(|a, b| a.id.cmp(&b.id));
        ConnectionStatus {
            number: self.number,
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
        match self.shared.pool.lease(None, &self.shared.cwd).await {
            Ok(lease) => {
                let result = lease.hub.initialize_result.clone();
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

    /// A client request, to its member, and the member's answer back.
    async fn forward(self: &Arc<Self>, id: RequestId, method: String, params: RawParams) {
        if method == "thread/loaded/list" {
            return self.loaded_list(&id).await;
        }
        let thread = if method == "thread/start" {
            None
        } else {
            thread_of(&params)
        };
        if let ("thread/unsubscribe", Some(thread)) = (method.as_str(), &thread) {
            if let Some(status) = self.unsubscribe(thread) {
                return self
                    .answer(&id, &serde_json::json!({ "status": status }).to_string())
                    .await;
            }
        }
        let followed = thread.as_deref().and_then(|thread| {
            lock(&self.threads)
                .get(thread)
                .filter(|followed| followed.lease.hub.is_alive())
                .map(|followed| followed.lease.clone())
        });
        let lease = match followed {
            Some(lease) => lease,
            None => {
                let home = thread
                    .as_deref()
                    .and_then(|thread| lock(&self.shared.homes).get(thread).cloned());
                match self
                    .shared
                    .pool
                    .lease(home.as_deref(), &self.shared.cwd)
                    .await
                {
                    Ok(lease) => lease,
                    Err(error) => {
                        let error = RpcError {
                            code: INTERNAL_ERROR,
                            message: format!("clawbridge: {error}"),
                            data: None,
                        };
                        return self.answer_error(&id, error).await;
                    }
                }
            }
        };
        // A resumed thread is claimed before the request, so nothing it says is missed.
        let claimed = match (method.as_str(), &thread) {
            ("thread/resume", Some(thread)) if self.hub_of(thread).is_none() => {
                Some(lease.hub.claim_thread(thread))
            }
            _ => None,
        };
        let params: &serde_json::value::RawValue = match serde_json::from_str(params.get()) {
            Ok(params) => params,
            Err(_) => {
                let error = RpcError {
                    code: INVALID_REQUEST,
                    message: "params are not JSON".into(),
                    data: None,
                };
                return self.answer_error(&id, error).await;
            }
        };
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
                            let handle = match claimed {
                                Some(handle) => handle,
                                None => lease.hub.claim_thread(&opened),
                            };
                            self.follow(opened.clone(), lease.clone(), handle);
                            answered = Some(opened);
                        }
                    }
                    "turn/start" => {
                        let turn = serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .and_then(|answer| answer["turn"]["id"].as_str().map(str::to_string));
                        if let (Some(thread), Some(turn)) = (&thread, turn) {
                            if let Some(followed) = lock(&self.threads).get_mut(thread) {
                                followed.turn = Some(turn);
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
            Err(PeerError::Rpc { error, .. }) => self.answer_error(&id, error).await,
            Err(error) => {
                let error = RpcError {
                    code: INTERNAL_ERROR,
                    message: format!("clawbridge: the app-server {}: {error}", lease.name),
                    data: None,
                };
                self.answer_error(&id, error).await
            }
        }
    }

    /// `thread/loaded/list` over the whole pool: the threads loaded in every running member
    /// (one page; a client of one app-server would see its own loaded threads the same way).
    async fn loaded_list(&self, id: &RequestId) {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            data: Vec<String>,
        }
        let mut loaded = Vec::new();
        let everything = serde_json::json!({});
        for (name, hub) in self.shared.pool.live_hubs() {
            let asked = hub
                .peer()
                .request::<_, Page>("thread/loaded/list", &everything);
            match tokio::time::timeout(Duration::from_secs(10), asked).await {
                Ok(Ok(page)) => loaded.extend(page.data),
                Ok(Err(error)) => tracing::debug!("thread/loaded/list on {name}: {error}"),
                Err(_) => tracing::debug!("thread/loaded/list on {name}: no answer in 10 s"),
            }
        }
        loaded.sort();
        loaded.dedup();
        let result = serde_json::json!({"data": loaded, "nextCursor": null});
        self.answer(id, &result.to_string()).await;
    }

    /// Relay a thread's messages to this connection from now on.
    fn follow(self: &Arc<Self>, thread: String, lease: Lease, mut handle: ThreadHandle) {
        {
            let mut homes = lock(&self.shared.homes);
            if homes.len() >= MAX_REMEMBERED_THREADS {
                homes.clear();
            }
            homes.insert(thread.clone(), lease.name.clone());
        }
        let connection = Arc::clone(self);
        let hub = Arc::clone(&lease.hub);
        let member = lease.name.clone();
        let relayed = thread.clone();
        let (barrier, mut barriers) = mpsc::channel::<oneshot::Sender<()>>(16);
        let relay = tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    biased;
                    asked = barriers.recv() => {
                        let Some(ack) = asked else { break };
                        // What is already here goes out before the answer that waits.
                        while let Some(message) = handle.try_recv() {
                            connection.relay(&relayed, &hub, message).await;
                        }
                        let _ = ack.send(());
                        continue;
                    }
                    message = handle.recv() => message,
                };
                let Some(message) = message else { break };
                connection.relay(&relayed, &hub, message).await;
            }
            if !hub.is_alive() {
                connection.member_lost(&relayed, &member);
            }
        });
        let mut threads = lock(&self.threads);
        if threads.len() >= MAX_THREADS_PER_CONNECTION && !threads.contains_key(&thread) {
            // One relay goes, one without a running turn if there is one (its thread stays on
            // its member; the client can resume it).
            let idle = threads
                .iter()
                .find(|(_, followed)| followed.turn.is_none())
                .or_else(|| threads.iter().next())
                .map(|(id, _)| id.clone());
            if let Some(gone) = idle.and_then(|id| threads.remove(&id)) {
                gone.relay.abort();
            }
        }
        let followed = Followed {
            lease,
            relay,
            barrier,
            turn: None,
        };
        if let Some(old) = threads.insert(thread, followed) {
            old.relay.abort();
        }
    }

    /// One message of a followed thread to the client: a notification as it is, a server
    /// request under this connection's own id.
    async fn relay(&self, thread: &str, hub: &Arc<CodexHub>, message: Inbound) {
        let text = match message {
            Inbound::Notification(notification) => {
                let completed = notification.method == "turn/completed";
                let text = format!(
                    r#"{{"method":{},"params":{}}}"#,
                    Value::from(notification.method.as_str()),
                    notification.params.get()
                );
                if completed {
                    // Queued before the turn counts as ended: a draining stop that sees no
                    // running turn closes after this message, never before it.
                    self.push(text);
                    if let Some(followed) = lock(&self.threads).get_mut(thread) {
                        followed.turn = None;
                    }
                    return;
                }
                text
            }
            Inbound::Request(request) => {
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
                serde_json::json!({"id": ours, "method": request.method, "params": request.params})
                    .to_string()
            }
            Inbound::Response(_) => return,
        };
        self.push(text);
    }

    /// Wait until everything the member said about `thread` before now is in this client's
    /// queue, so an answer sent next keeps Codex's order (its messages first, as Codex sent
    /// them). Bounded: a stuck member or relay costs the order, never the answer.
    async fn barrier(&self, hub: &CodexHub, thread: &str) {
        hub.fence(ORDER_WAIT).await;
        let Some(barrier) = lock(&self.threads)
            .get(thread)
            .map(|followed| followed.barrier.clone())
        else {
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
        let followed = lock(&self.threads).remove(thread);
        if let Some(followed) = &followed {
            followed.relay.abort();
        }
        if !self.shared.followed_elsewhere(self.number, thread) {
            return None;
        }
        Some(if followed.is_some() {
            "unsubscribed"
        } else {
            "notSubscribed"
        })
    }

    /// The member serving `thread` went away (it crashed or was killed): a running turn ends for
    /// the client with a failed `turn/completed` naming why, instead of never ending; the thread
    /// is let go, so the client's next message for it (a `thread/resume`) goes to the member's
    /// next incarnation, which reads the thread back from Codex's home.
    fn member_lost(&self, thread: &str, member: &str) {
        let Some(followed) = lock(&self.threads).remove(thread) else {
            return;
        };
        if let Some(turn) = followed.turn {
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
                    .turn
                    .clone()
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
            .any(|followed| followed.turn.is_some() && followed.lease.hub.is_alive())
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

    /// The connection is gone: its relays stop, its members are told nobody will answer.
    async fn close(&self) {
        let threads: Vec<(String, Followed)> = lock(&self.threads).drain().collect();
        for (_, followed) in &threads {
            followed.relay.abort();
        }
        // Each member holds every thread it opened in memory until told nobody follows it:
        // a thread no other connection follows is let go (a later resume loads it again).
        let mut unsubscribes = tokio::task::JoinSet::new();
        for (thread, followed) in threads {
            if self.shared.followed_elsewhere(self.number, &thread)
                || !followed.lease.hub.is_alive()
            {
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
    fn only_the_token_and_the_listener_s_own_names_pass() {
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
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer right-token".parse().expect("auth"),
        );
        assert!(token_matches(&headers, "right-token"));
        assert!(!token_matches(&headers, "right-token2"));
        headers.insert(
            http::header::AUTHORIZATION,
            "right-token".parse().expect("auth"),
        );
        assert!(!token_matches(&headers, "right-token"));
    }
}
