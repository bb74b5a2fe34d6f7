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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::codex::client::hub::{CodexHub, ThreadHandle};
use crate::codex::client::pool::{Lease, MemberStatus, Pool, PoolConfig};
use crate::codex::protocol::inbound::Inbound;
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
/// JSON-RPC: invalid request; internal error.
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

/// What the endpoint needs.
#[derive(Clone, Debug)]
pub struct EndpointSettings {
    pub listen: SocketAddr,
    /// The bearer token every client sends (never logged).
    pub token: String,
    pub pool: PoolConfig,
    /// Connections at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed (OpenClaw pings every 20 s).
    pub idle_timeout: Duration,
    /// The folder members start in.
    pub cwd: std::path::PathBuf,
    /// `--transcript DIR`: every message both ways, one folder per connection
    /// (`DIR/connection-N/`), one file per thread, secrets redacted (as the stdio proxy writes).
    pub transcript: Option<std::path::PathBuf>,
    /// Copies of the lines that matter for the schema check and the captures (the proxy's
    /// observer; a full queue drops the copy, never the message).
    pub observe: Option<mpsc::Sender<(super::Direction, Vec<u8>)>>,
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("--listen {0}: not a loopback address; pass --allow-remote to listen there (the token then crosses the network in clear over ws://)")]
    NotLoopback(SocketAddr),
}

/// A running endpoint.
pub struct Endpoint {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    token: String,
    addr: SocketAddr,
    pool: Arc<Pool>,
    cwd: std::path::PathBuf,
    slots: Arc<Semaphore>,
    idle_timeout: Duration,
    /// Thread -> the member it lives on.
    homes: Mutex<HashMap<String, String>>,
    transcript: Option<std::path::PathBuf>,
    observe: Option<mpsc::Sender<(super::Direction, Vec<u8>)>>,
    /// Connections so far (each one's transcript folder is named after its number).
    opened: std::sync::atomic::AtomicUsize,
    connections: TaskTracker,
    cancel: CancellationToken,
}

impl Endpoint {
    /// Bind and serve.
    pub async fn start(
        settings: EndpointSettings,
        allow_remote: bool,
    ) -> Result<Endpoint, EndpointError> {
        if !settings.listen.ip().is_loopback() && !allow_remote {
            return Err(EndpointError::NotLoopback(settings.listen));
        }
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .map_err(|source| EndpointError::Bind {
                addr: settings.listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EndpointError::Bind {
                addr: settings.listen,
                source,
            })?;
        if !addr.ip().is_loopback() {
            tracing::warn!(
                "clawbridge app-server listens on {addr}, off loopback: clients' tokens and conversations cross the network in clear (ws://)"
            );
        }
        let shared = Arc::new(Shared {
            token: settings.token,
            addr,
            pool: Pool::new(settings.pool),
            cwd: settings.cwd,
            slots: Arc::new(Semaphore::new(settings.max_connections.max(1))),
            idle_timeout: settings.idle_timeout,
            homes: Mutex::new(HashMap::new()),
            transcript: settings.transcript,
            observe: settings.observe,
            opened: std::sync::atomic::AtomicUsize::new(0),
            connections: TaskTracker::new(),
            cancel: CancellationToken::new(),
        });
        let router = axum::Router::new()
            .fallback(upgrade)
            .with_state(Arc::clone(&shared));
        let cancel = shared.cancel.clone();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, router)
                .with_graceful_shutdown(async move { cancel.cancelled().await });
            if let Err(error) = serving.await {
                tracing::error!("the WebSocket endpoint stopped: {error}");
            }
        });
        Ok(Endpoint {
            addr,
            shared,
            server,
        })
    }

    /// The pool's members.
    pub fn members(&self) -> Vec<MemberStatus> {
        self.shared.pool.status()
    }

    /// Stop: no new connections, the open ones closed, the members stopped.
    pub async fn stop(self) {
        self.shared.cancel.cancel();
        let _ = self.server.await;
        self.shared.connections.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.shared.connections.wait()).await;
        self.shared.pool.shutdown().await;
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

/// Every HTTP request: checked, then upgraded to a client connection.
async fn upgrade(State(shared): State<Arc<Shared>>, request: http::Request<Body>) -> Response {
    let headers = request.headers();
    if headers.contains_key(http::header::ORIGIN) {
        return refuse(StatusCode::FORBIDDEN, "browsers may not connect");
    }
    if !host_allowed(headers, shared.addr) {
        return refuse(StatusCode::FORBIDDEN, "unknown Host");
    }
    if !token_matches(headers, &shared.token) {
        return refuse(StatusCode::UNAUTHORIZED, "a bearer token is required");
    }
    let Ok(slot) = Arc::clone(&shared.slots).try_acquire_owned() else {
        return refuse(StatusCode::TOO_MANY_REQUESTS, "too many connections");
    };
    let mut handshake = soketto::handshake::http::Server::new();
    let accepted = match handshake.receive_request(&request) {
        Ok(response) => response,
        Err(_) => return refuse(StatusCode::BAD_REQUEST, "a WebSocket upgrade is expected"),
    };
    let connection_shared = Arc::clone(&shared);
    shared.connections.spawn(async move {
        let _slot = slot;
        let upgraded = match hyper::upgrade::on(request).await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!("WebSocket upgrade failed: {error}");
                return;
            }
        };
        let io = hyper_util::rt::TokioIo::new(upgraded).compat();
        let mut builder = handshake.into_builder(io);
        builder.set_max_message_size(MAX_MESSAGE_BYTES);
        builder.set_max_frame_size(MAX_MESSAGE_BYTES);
        let (sender, receiver) = builder.finish();
        Connection::run(connection_shared, sender, receiver).await;
    });
    let (parts, ()) = accepted.into_parts();
    Response::from_parts(parts, Body::empty())
}

type Sender = soketto::connection::Sender<
    tokio_util::compat::Compat<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>,
>;
type Receiver = soketto::connection::Receiver<
    tokio_util::compat::Compat<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>,
>;

/// One client connection: its threads, its server requests waiting for answers, its queue.
struct Connection {
    shared: Arc<Shared>,
    out: mpsc::Sender<String>,
    /// Thread -> the member's lease and the task relaying the thread's messages.
    threads: Mutex<HashMap<String, (Lease, tokio::task::JoinHandle<()>)>>,
    /// Our id of a server request -> the member's hub and Codex's id.
    waiting: Mutex<HashMap<i64, (Arc<CodexHub>, RequestId)>>,
    next_id: AtomicI64,
    in_flight: Arc<Semaphore>,
    tasks: TaskTracker,
    transcript: Option<super::TranscriptQueue>,
}

impl Connection {
    async fn run(shared: Arc<Shared>, mut sender: Sender, mut receiver: Receiver) {
        let (out, mut queue) = mpsc::channel::<String>(CLIENT_QUEUE);
        let cancel = shared.cancel.clone();
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
            shared: Arc::clone(&shared),
            out,
            threads: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            tasks: TaskTracker::new(),
            transcript,
        });
        let writer_cancel = cancel.clone();
        let writer = tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    message = queue.recv() => message,
                    () = writer_cancel.cancelled() => None,
                };
                let Some(message) = message else { break };
                if sender.send_text(&message).await.is_err() || sender.flush().await.is_err() {
                    break;
                }
            }
            let _ = sender.close().await;
        });
        let mut data = Vec::new();
        loop {
            data.clear();
            let received = tokio::select! {
                received = tokio::time::timeout(shared.idle_timeout, receiver.receive_data(&mut data)) => received,
                () = cancel.cancelled() => break,
            };
            match received {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::debug!("a client connection ended: {error}");
                    break;
                }
                Err(_) => {
                    tracing::info!(
                        "a client connection sent nothing for {:?}; closed",
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
        connection.close().await;
        writer.abort();
        // The transcript's writer ends when the last copy of its queue is gone.
        drop(connection);
        if let Some(task) = transcript_task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    /// A copy of a line for the transcript and the observer (never waits).
    fn tap(&self, direction: super::Direction, line: &str) {
        if let Some(transcript) = &self.transcript {
            transcript.offer(direction, line.as_bytes().to_vec());
        }
        if let Some(observe) = &self.shared.observe {
            if super::observe::is_interesting(direction, line.as_bytes()) {
                let _ = observe.try_send((direction, line.as_bytes().to_vec()));
            }
        }
    }

    /// A message to the client, tapped.
    async fn send(&self, text: String) {
        self.tap(super::Direction::Out, &text);
        let _ = self.out.send(text).await;
    }

    /// One message from the client.
    async fn receive(self: &Arc<Self>, text: String) {
        self.tap(super::Direction::In, &text);
        match crate::codex::protocol::wire::decode(text) {
            Ok(Incoming::Request { id, method, params }) => {
                let method = method.to_string();
                if method == "initialize" {
                    self.initialize(id).await;
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
            Ok(Incoming::Notification { method, params }) => {
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

    async fn initialize(&self, id: RequestId) {
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
            .map(|(lease, _)| Arc::clone(&lease.hub))
    }

    /// A client request, to its member, and the member's answer back.
    async fn forward(self: &Arc<Self>, id: RequestId, method: String, params: RawParams) {
        let thread = if method == "thread/start" {
            None
        } else {
            thread_of(&params)
        };
        let followed = thread.as_deref().and_then(|thread| {
            lock(&self.threads)
                .get(thread)
                .map(|(lease, _)| lease.clone())
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
            ("thread/resume", Some(thread)) if !lock(&self.threads).contains_key(thread) => {
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
                if method == "thread/start" || method == "thread/resume" {
                    let opened = serde_json::from_str::<Value>(raw.get())
                        .ok()
                        .and_then(|answer| answer["thread"]["id"].as_str().map(str::to_string));
                    if let Some(opened) = opened {
                        let handle = match claimed {
                            Some(handle) => handle,
                            None => lease.hub.claim_thread(&opened),
                        };
                        self.follow(opened, lease.clone(), handle);
                    }
                }
                self.answer(&id, raw.get()).await;
            }
            Err(crate::codex::client::peer::PeerError::Rpc { error, .. }) => {
                self.answer_error(&id, error).await
            }
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
        let relay = tokio::spawn(async move {
            while let Some(message) = handle.recv().await {
                let text = match message {
                    Inbound::Notification(notification) => format!(
                        r#"{{"method":{},"params":{}}}"#,
                        Value::from(notification.method),
                        notification.params.get()
                    ),
                    Inbound::Request(request) => {
                        let ours = connection.next_id.fetch_add(1, Ordering::Relaxed);
                        let full = {
                            let mut waiting = lock(&connection.waiting);
                            let full = waiting.len() >= MAX_WAITING_ANSWERS;
                            if !full {
                                waiting.insert(ours, (Arc::clone(&hub), request.id.clone()));
                            }
                            full
                        };
                        if full {
                            let _ = hub
                                .peer()
                                .respond_error(
                                    request.id,
                                    INTERNAL_ERROR,
                                    "clawbridge: the client has too many unanswered requests"
                                        .into(),
                                )
                                .await;
                            continue;
                        }
                        serde_json::json!({"id": ours, "method": request.method, "params": request.params})
                            .to_string()
                    }
                    Inbound::Response(_) => continue,
                };
                connection.tap(super::Direction::Out, &text);
                if connection.out.try_send(text).is_err() {
                    tracing::warn!(
                        "a client fell {CLIENT_QUEUE} messages behind; its thread relay stops"
                    );
                    break;
                }
            }
        });
        let mut threads = lock(&self.threads);
        if threads.len() >= MAX_THREADS_PER_CONNECTION {
            // The oldest relay goes (its thread stays on its member for a later resume).
            if let Some(oldest) = threads.keys().next().cloned() {
                if let Some((_, old)) = threads.remove(&oldest) {
                    old.abort();
                }
            }
        }
        if let Some((_, old)) = threads.insert(thread, (lease, relay)) {
            old.abort();
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
        let threads: Vec<(Lease, tokio::task::JoinHandle<()>)> = lock(&self.threads)
            .drain()
            .map(|(_, entry)| entry)
            .collect();
        for (_, relay) in &threads {
            relay.abort();
        }
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
