//! One `codex app-server` serving many threads at once (the bridge service).
//!
//! A router task reads the connection's events and hands each message to the run that owns its
//! thread (by `threadId`, or `thread.id` for `thread/started`). Messages for a thread nobody has
//! claimed yet are kept (bounded) until its run registers, so a notification that overtakes the
//! `thread/start` answer is not lost. Server requests for no known thread are refused at once so
//! Codex is never left waiting. When the app-server goes away every route closes, every running
//! turn fails with [`SessionError::CodexExited`], and the hub reports itself dead so the next run
//! starts a new process.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::peer::{Events, Peer, PeerConfig, PeerError};
use super::process::{CodexProcess, SpawnOptions};
use super::session::{
    CodexSession, ServerRequestHandler, SessionError, TurnEvent, TurnLimits, TurnOutcome,
};
use super::turn::{drive_turn, TurnFailure};
use crate::protocol::inbound::Inbound;
use crate::protocol::methods::{ThreadResume, ThreadStart};
use crate::protocol::params::{ThreadParams, TurnStartParams};
use crate::protocol::wire::METHOD_NOT_FOUND;
use clawbridge_support::sync::lock;

/// Messages kept for a thread nobody claimed yet, and how many such threads.
const UNCLAIMED_PER_THREAD: usize = 256;
const UNCLAIMED_THREADS: usize = 256;
/// Buffer of one run's route.
const ROUTE_CAPACITY: usize = 1024;

#[derive(Default)]
struct Routes {
    routes: HashMap<String, mpsc::Sender<Inbound>>,
    unclaimed: HashMap<String, Vec<Inbound>>,
    /// Threads whose run fell [`ROUTE_CAPACITY`] messages behind: their route was closed, and
    /// that run (only) fails with [`SessionError::Overflow`].
    overflowed: std::collections::HashSet<String>,
    /// Threads whose run ended (their late messages are dropped until the next claim).
    released: std::collections::HashSet<String>,
}

/// Ended threads remembered (then forgotten all at once; a forgotten one buffers again, bounded).
const RELEASED_THREADS: usize = 4096;

/// The shared app-server.
pub struct CodexHub {
    peer: Peer,
    routes: Arc<Mutex<Routes>>,
    process: tokio::sync::Mutex<Option<CodexProcess>>,
    stderr_tail: Arc<Mutex<Vec<String>>>,
    alive: Arc<AtomicBool>,
    /// Threads left loaded in this app-server after their run, least recently used first (see
    /// [`CodexHub::keep_loaded`]). A new process starts with none.
    loaded: Mutex<std::collections::VecDeque<String>>,
    /// Threads opened (started or resumed) in this process: Codex keeps memory for each.
    opened: std::sync::atomic::AtomicUsize,
    pub user_agent: String,
    pub codex_version: Option<String>,
    /// Codex's whole answer to `initialize`.
    pub initialize_result: serde_json::Value,
    pub pid: Option<u32>,
    /// The router and the interrupts it sends: owned here, joined by [`CodexHub::kill`].
    tasks: TaskTracker,
    /// Cancelled when the connection to the app-server is gone (the router ended).
    gone: CancellationToken,
    /// Messages the router has routed so far (see [`CodexHub::fence`]).
    routed: Arc<tokio::sync::watch::Sender<u64>>,
    /// Where messages of no thread go (account notifications, auth-refresh requests), once a
    /// client of the whole app-server asked for them ([`CodexHub::subscribe_unscoped`]).
    unscoped: Unscoped,
    /// Work a client of the whole app-server (the WebSocket endpoint) holds here: running turns,
    /// threads Codex has not written a rollout for yet (lost if the app-server stops).
    held: std::sync::atomic::AtomicUsize,
    /// Taken out of its pool to be stopped (see [`CodexHub::retire`]).
    retired: AtomicBool,
    /// Client requests in flight to this app-server: at most [`MEMBER_IN_FLIGHT`], the waiting
    /// served round-robin across client connections (`support::fair`).
    fair: Arc<clawbridge_support::fair::FairGate>,
    /// Its place among the endpoint's app-servers (`PoolConfig::process_slots`), given back
    /// once its process is reaped.
    place: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    /// Codex's latest `account/rateLimits/updated` (its params), whoever else hears it.
    rate_limits: RateLimits,
}

/// The latest `account/rateLimits/updated` params of an app-server.
type RateLimits = Arc<Mutex<Option<serde_json::Value>>>;

/// The receiver of an app-server's messages that name no thread, taken once.
type Unscoped = Arc<Mutex<UnscopedRoute>>;

#[derive(Default)]
struct UnscopedRoute {
    sender: Option<mpsc::Sender<Inbound>>,
    taken: bool,
}

/// Messages of no thread queued for [`CodexHub::subscribe_unscoped`]'s receiver.
const UNSCOPED_CAPACITY: usize = 256;

/// How many finished threads one app-server keeps loaded for their session's next run. Past it,
/// the least recently used is unsubscribed, so Codex's memory stays bounded.
pub const MAX_LOADED_THREADS: usize = 64;

/// Client requests the WebSocket endpoint has in flight to one app-server at most; more wait
/// in the endpoint, each connection in its turn (`support::fair`). Codex works through its
/// queue in order: what waits here cannot push another client's request behind it.
pub const MEMBER_IN_FLIGHT: usize = 16;

/// A run's claim on one thread's messages; dropping it releases the thread.
pub struct ThreadHandle {
    pub thread_id: String,
    receiver: mpsc::Receiver<Inbound>,
    early: Vec<Inbound>,
    routes: Arc<Mutex<Routes>>,
}

impl ThreadHandle {
    /// The thread's next message (those that came before the claim first); `None` once the
    /// app-server is gone.
    pub async fn recv(&mut self) -> Option<Inbound> {
        if !self.early.is_empty() {
            return Some(self.early.remove(0));
        }
        self.receiver.recv().await
    }

    /// The thread's next message if one is already here.
    pub fn try_recv(&mut self) -> Option<Inbound> {
        if !self.early.is_empty() {
            return Some(self.early.remove(0));
        }
        self.receiver.try_recv().ok()
    }
}

impl Drop for ThreadHandle {
    fn drop(&mut self) {
        let mut table = lock(&self.routes);
        table.routes.remove(&self.thread_id);
        // What Codex still says about this thread belongs to the run that ended: it is dropped,
        // not replayed into the thread's next run.
        if table.released.len() >= RELEASED_THREADS {
            table.released.clear();
        }
        table.released.insert(self.thread_id.clone());
    }
}

/// The thread a message belongs to.
fn thread_of(message: &Inbound) -> Option<String> {
    message
        .scope()
        .and_then(|scope| scope.thread_id.map(Cow::into_owned))
}

/// What the router task owns or shares with its hub.
struct Router {
    events: Events,
    routes: Arc<Mutex<Routes>>,
    peer: Peer,
    alive: Arc<AtomicBool>,
    tasks: TaskTracker,
    gone: CancellationToken,
    routed: Arc<tokio::sync::watch::Sender<u64>>,
    unscoped: Unscoped,
    rate_limits: RateLimits,
}

async fn route_loop(router: Router) {
    let Router {
        mut events,
        routes,
        peer,
        alive,
        tasks,
        gone,
        routed,
        unscoped,
        rate_limits,
    } = router;
    // However the router ends, the hub is gone after it.
    let _gone = gone.drop_guard();
    loop {
        // Everything taken so far has been routed (see [`CodexHub::fence`]).
        routed.send_replace(events.taken());
        let Some(message) = events.recv().await else {
            break;
        };
        // Typed once here; the turn driver consumes the typed message.
        let message = Inbound::from_incoming(message);
        let Some(thread_id) = thread_of(&message) else {
            // The account's rate limits are kept for the status, whoever takes the message.
            if let Inbound::Notification(notification) = &message {
                if notification.method.as_str()
                    == crate::protocol::table::name::ACCOUNT_RATE_LIMITS_UPDATED
                {
                    if let Ok(params) = serde_json::from_str(notification.params.get()) {
                        *lock(&rate_limits) = Some(params);
                    }
                }
            }
            // A subscriber of the whole app-server takes it; a full or gone one loses it (a
            // request among them is refused below, so Codex never waits for it).
            let sender = lock(&unscoped).sender.clone();
            let message = match sender {
                Some(sender) => match sender.try_send(message) {
                    Ok(()) => continue,
                    Err(mpsc::error::TrySendError::Full(message))
                    | Err(mpsc::error::TrySendError::Closed(message)) => message,
                },
                None => message,
            };
            if let Inbound::Request(crate::protocol::inbound::Request { id, method, .. }) = message
            {
                let _ = peer
                    .respond_error(
                        id,
                        METHOD_NOT_FOUND,
                        format!("clawbridge cannot answer `{method}` here"),
                    )
                    .await;
            } else {
                tracing::debug!("app-server: {}", message.method().unwrap_or("?"));
            }
            continue;
        };
        let sender = lock(&routes).routes.get(&thread_id).cloned();
        match sender {
            // Never wait on one run: a run that falls a whole route behind (a slow subscriber,
            // an unanswered tool call on a chatty thread) fails alone; every other thread flows.
            Some(sender) => match sender.try_send(message) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(message)) => {
                    tracing::error!(
                        "the run on thread {thread_id} fell {ROUTE_CAPACITY} messages behind; ending it (dropped {:?})",
                        message.method()
                    );
                    {
                        let mut table = lock(&routes);
                        table.routes.remove(&thread_id);
                        table.overflowed.insert(thread_id.clone());
                        // Its later messages are dropped quietly: this line is the one log.
                        table.released.insert(thread_id.clone());
                    }
                    // The turn is interrupted at once, not left running for nobody.
                    if let Some(turn_id) = message
                        .scope()
                        .and_then(|scope| scope.turn_id.map(Cow::into_owned))
                    {
                        let peer = peer.clone();
                        let thread = thread_id.clone();
                        tasks.spawn(async move {
                            use crate::protocol::methods::{TurnInterrupt, TurnInterruptParams};
                            let params = TurnInterruptParams {
                                thread_id: thread,
                                turn_id,
                            };
                            let interrupt = peer.call::<TurnInterrupt>(&params);
                            let _ =
                                tokio::time::timeout(std::time::Duration::from_secs(5), interrupt)
                                    .await;
                        });
                    }
                    if let Inbound::Request(request) = message {
                        let _ = peer
                            .respond_error(
                                request.id,
                                METHOD_NOT_FOUND,
                                format!("the run on thread {thread_id} was ended (overflow)"),
                            )
                            .await;
                    }
                }
                Err(mpsc::error::TrySendError::Closed(message)) => {
                    tracing::debug!(
                        "run for thread {thread_id} went away; dropped {:?}",
                        message.method()
                    );
                }
            },
            None if lock(&routes).released.contains(&thread_id) => {
                tracing::debug!(
                    "thread {thread_id} has no run any more; dropped {:?}",
                    message.method()
                );
                if let Inbound::Request(request) = message {
                    let _ = peer
                        .respond_error(
                            request.id,
                            METHOD_NOT_FOUND,
                            format!("no run owns thread {thread_id} any more"),
                        )
                        .await;
                }
            }
            None => {
                // Keep it for the run that will claim the thread (bounded); refuse what cannot wait.
                let refused = {
                    let mut table = lock(&routes);
                    let threads = table.unclaimed.len();
                    match table.unclaimed.get_mut(&thread_id) {
                        Some(kept) if kept.len() < UNCLAIMED_PER_THREAD => {
                            kept.push(message);
                            None
                        }
                        None if threads < UNCLAIMED_THREADS => {
                            table.unclaimed.insert(thread_id.clone(), vec![message]);
                            None
                        }
                        _ => Some(message),
                    }
                };
                if let Some(refused) = &refused {
                    tracing::warn!(
                        "no run owns thread {thread_id}; dropped {:?} (the buffer for unclaimed threads is full)",
                        refused.method()
                    );
                }
                if let Some(Inbound::Request(crate::protocol::inbound::Request {
                    id,
                    method,
                    ..
                })) = refused
                {
                    let _ = peer
                        .respond_error(
                            id,
                            METHOD_NOT_FOUND,
                            format!("no run owns thread {thread_id} (`{method}`)"),
                        )
                        .await;
                }
            }
        }
    }
    alive.store(false, Ordering::SeqCst);
    // The subscriber of messages of no thread hears the end too.
    lock(&unscoped).sender = None;
    // Closing every route fails the running turns.
    let mut table = lock(&routes);
    table.routes.clear();
    table.unclaimed.clear();
}

impl CodexHub {
    /// Spawn the app-server and complete the handshake.
    pub async fn spawn(
        options: &SpawnOptions,
        peer_config: PeerConfig,
        handshake_timeout: Duration,
    ) -> Result<Arc<CodexHub>, SessionError> {
        let session = CodexSession::spawn(options, peer_config, true, handshake_timeout).await?;
        Ok(Self::from_session(session))
    }

    /// A hub over a connected session (a spawned app-server, or an in-memory peer in tests).
    pub fn from_session(session: CodexSession) -> Arc<CodexHub> {
        let pid = session.pid();
        let parts = session.into_parts();
        let routes = Arc::new(Mutex::new(Routes::default()));
        let alive = Arc::new(AtomicBool::new(true));
        for message in parts.early_events {
            if let Some(thread_id) = thread_of(&message) {
                lock(&routes)
                    .unclaimed
                    .entry(thread_id)
                    .or_default()
                    .push(message);
            }
        }
        let tasks = TaskTracker::new();
        let gone = CancellationToken::new();
        let routed = Arc::new(tokio::sync::watch::Sender::new(0));
        let unscoped = Unscoped::default();
        let rate_limits = RateLimits::default();
        tasks.spawn(route_loop(Router {
            events: parts.events,
            routes: Arc::clone(&routes),
            peer: parts.peer.clone(),
            alive: Arc::clone(&alive),
            tasks: tasks.clone(),
            gone: gone.clone(),
            routed: Arc::clone(&routed),
            unscoped: Arc::clone(&unscoped),
            rate_limits: Arc::clone(&rate_limits),
        }));
        tasks.close();
        Arc::new(CodexHub {
            peer: parts.peer,
            routes,
            process: tokio::sync::Mutex::new(parts.process),
            stderr_tail: Arc::new(Mutex::new(Vec::new())),
            alive,
            loaded: Mutex::new(std::collections::VecDeque::new()),
            opened: std::sync::atomic::AtomicUsize::new(0),
            user_agent: parts.user_agent,
            initialize_result: parts.initialize_result,
            codex_version: parts.codex_version,
            pid,
            tasks,
            gone,
            routed,
            unscoped,
            held: std::sync::atomic::AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            fair: clawbridge_support::fair::FairGate::new(MEMBER_IN_FLIGHT),
            place: Mutex::new(None),
            rate_limits,
        })
    }

    /// Codex's latest `account/rateLimits/updated` params, if it sent one.
    pub fn rate_limits(&self) -> Option<serde_json::Value> {
        lock(&self.rate_limits).clone()
    }

    /// The messages of no thread from now on (notifications such as `account/updated`, server
    /// requests such as `account/chatgptAuthTokens/refresh`): for the first caller only, `None`
    /// after. Without a subscriber they are logged (notifications) or refused (requests).
    pub fn subscribe_unscoped(&self) -> Option<mpsc::Receiver<Inbound>> {
        let mut route = lock(&self.unscoped);
        if route.taken {
            return None;
        }
        route.taken = true;
        let (sender, receiver) = mpsc::channel(UNSCOPED_CAPACITY);
        route.sender = Some(sender);
        Some(receiver)
    }

    /// A client of the whole app-server holds work here that stopping it would lose (a running
    /// turn, a thread without a rollout yet): counted for [`CodexHub::is_idle`].
    pub fn hold(&self) {
        self.held.fetch_add(1, Ordering::SeqCst);
    }

    /// ... and lets it go.
    pub fn release(&self) {
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Mark it as taken out of its pool to be stopped: nobody may hold work on it any more.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// Nothing held ([`CodexHub::hold`]) and no request waiting for its answer: stopping it now
    /// loses nobody's work.
    pub fn is_idle(&self) -> bool {
        self.held.load(Ordering::SeqCst) == 0 && self.peer.pending_requests() == 0
    }

    /// Wait (at most `limit`) until every notification and server request Codex sent before
    /// now has reached its thread's route. Codex's answer to a request comes after what it said
    /// first (a resume's `thread/status/changed`, a turn's `turn/started`), but answers resolve
    /// at once while messages pass through the router: a relay that forwards an answer after
    /// this fence keeps Codex's order.
    pub async fn fence(&self, limit: Duration) {
        let target = self.peer.handed_over();
        let mut routed = self.routed.subscribe();
        let reached = routed.wait_for(|taken| *taken >= target);
        let _ = tokio::time::timeout(limit, reached).await;
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Resolves once the connection to the app-server is gone (it exited, was killed, or its
    /// connection dropped).
    pub async fn gone(&self) {
        self.gone.cancelled().await;
    }

    /// Threads with a running turn.
    pub fn active_threads(&self) -> usize {
        lock(&self.routes).routes.len()
    }

    /// Threads opened in this process so far.
    pub fn threads_opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }

    /// The resident memory of the process and of what runs under it, in bytes (Linux
    /// `/proc`), if it can be read: a member in a jail is its helper, its namespace's first
    /// process and Codex (and Codex's tools), so the whole tree is what it costs.
    pub fn rss_bytes(&self) -> Option<u64> {
        clawbridge_support::process::tree_rss_bytes(self.pid?)
    }

    /// Requests we sent that still wait for an answer.
    pub fn pending_requests(&self) -> usize {
        self.peer.pending_requests()
    }

    /// The peer (for `turn/interrupt` from the API).
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Hold `place` until this app-server's process is reaped: the process holds it (given back
    /// by [`CodexHub::kill`], or after a drop once the process is gone); here only when the
    /// process is busy being killed (given back when that kill returns) or there is none.
    pub fn hold_place(&self, place: tokio::sync::OwnedSemaphorePermit) {
        match self.process.try_lock() {
            Ok(mut process) => match process.as_mut() {
                Some(process) => process.hold_place(place),
                None => *lock(&self.place) = Some(place),
            },
            Err(_) => *lock(&self.place) = Some(place),
        }
    }

    /// The gate client requests pass to reach this app-server (one per member process).
    pub fn fair(&self) -> &Arc<clawbridge_support::fair::FairGate> {
        &self.fair
    }

    /// Count a thread a client opened here itself (the WebSocket endpoint forwards the client's
    /// own `thread/start`/`thread/resume`), as [`CodexHub::open_thread`] counts its own.
    pub fn note_opened(&self) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }

    /// Take a thread's messages (notifications and server requests) from now on, with those
    /// that came before anyone claimed it: what the WebSocket endpoint relays to its client.
    pub fn claim_thread(&self, thread_id: &str) -> ThreadHandle {
        self.claim(thread_id)
    }

    fn claim(&self, thread_id: &str) -> ThreadHandle {
        let (sender, receiver) = mpsc::channel(ROUTE_CAPACITY);
        let mut table = lock(&self.routes);
        let early = table.unclaimed.remove(thread_id).unwrap_or_default();
        table.overflowed.remove(thread_id);
        table.released.remove(thread_id);
        table.routes.insert(thread_id.to_string(), sender);
        ThreadHandle {
            thread_id: thread_id.to_string(),
            receiver,
            early,
            routes: Arc::clone(&self.routes),
        }
    }

    async fn exited(&self) -> SessionError {
        let mut guard = self.process.lock().await;
        let status = match guard.as_mut() {
            Some(process) => {
                *lock(&self.stderr_tail) = process.stderr_tail();
                match process.wait_exit(Duration::from_millis(1500)).await {
                    Some(status) => status.to_string(),
                    None => "stdout closed".to_string(),
                }
            }
            None => "connection closed".to_string(),
        };
        SessionError::CodexExited {
            status,
            stderr: lock(&self.stderr_tail).clone(),
        }
    }

    /// Claim a thread this app-server still has loaded from an earlier run (no `thread/resume`
    /// needed: the turn goes straight to `turn/start`); `None` when it is not loaded here.
    pub fn take_loaded(&self, thread_id: &str) -> Option<ThreadHandle> {
        let mut loaded = lock(&self.loaded);
        let at = loaded.iter().position(|id| id == thread_id)?;
        loaded.remove(at);
        drop(loaded);
        Some(self.claim(thread_id))
    }

    /// Leave a finished run's thread loaded for the session's next run. Returns the thread that
    /// fell out of the [`MAX_LOADED_THREADS`] most recent, which the caller unsubscribes.
    pub fn keep_loaded(&self, thread_id: &str) -> Option<String> {
        let mut loaded = lock(&self.loaded);
        loaded.retain(|id| id != thread_id);
        loaded.push_back(thread_id.to_string());
        (loaded.len() > MAX_LOADED_THREADS)
            .then(|| loaded.pop_front())
            .flatten()
    }

    /// Threads kept loaded for their next run (for `bridge.status`).
    pub fn loaded_threads(&self) -> usize {
        lock(&self.loaded).len()
    }

    /// Start or resume a thread and claim its messages.
    pub async fn open_thread(&self, thread: &ThreadParams) -> Result<ThreadHandle, SessionError> {
        // Claim a resumed thread first, so nothing of it goes to the unclaimed buffer.
        let pre_claimed = match thread {
            ThreadParams::ThreadResume(resume) => Some(self.claim(&resume.thread_id)),
            ThreadParams::ThreadStart(_) => None,
        };
        let response = match thread {
            ThreadParams::ThreadStart(params) => self.peer.call::<ThreadStart>(params).await,
            ThreadParams::ThreadResume(params) => self.peer.call::<ThreadResume>(params).await,
        };
        let response = match response {
            Ok(response) => response,
            Err(PeerError::ConnectionClosed) => return Err(self.exited().await),
            Err(error) => return Err(SessionError::Peer(error)),
        };
        self.note_opened();
        Ok(match pre_claimed {
            Some(handle) if handle.thread_id == response.thread.id => handle,
            _ => self.claim(&response.thread.id),
        })
    }

    /// Run one turn on a claimed thread.
    pub async fn run_turn(
        &self,
        thread: &mut ThreadHandle,
        turn: &TurnStartParams,
        handler: &dyn ServerRequestHandler,
        observer: &mut (dyn FnMut(TurnEvent<'_>) + Send),
        limits: TurnLimits,
    ) -> Result<TurnOutcome, SessionError> {
        let mut turn = turn.clone();
        turn.thread_id = thread.thread_id.clone();
        let result = drive_turn(
            &self.peer,
            &mut thread.receiver,
            &mut thread.early,
            &turn,
            handler,
            observer,
            limits,
        )
        .await;
        match result {
            Ok(outcome) => Ok(outcome),
            Err(TurnFailure::Closed) if lock(&self.routes).overflowed.remove(&thread.thread_id) => {
                Err(SessionError::Overflow(ROUTE_CAPACITY))
            }
            Err(TurnFailure::Closed) | Err(TurnFailure::Peer(PeerError::ConnectionClosed)) => {
                Err(self.exited().await)
            }
            Err(TurnFailure::Peer(error)) => Err(SessionError::Peer(error)),
            Err(TurnFailure::Timeout { error, kill }) => {
                if kill {
                    tracing::warn!(
                        "a turn did not end after turn/interrupt; restarting codex app-server"
                    );
                    self.kill().await;
                }
                Err(error)
            }
        }
    }

    /// Kill the process (every run on it fails; the next run starts a new one), end the
    /// connection and wait (bounded) for the router, the interrupts it sent and the peer's
    /// reader and writer.
    pub async fn kill(&self) {
        if let Some(process) = self.process.lock().await.as_mut() {
            process.kill().await;
        }
        // Reaped: its place goes back.
        lock(&self.place).take();
        self.alive.store(false, Ordering::SeqCst);
        self.peer.close();
        let joined = async {
            self.tasks.wait().await;
            self.peer.closed().await;
        };
        if tokio::time::timeout(Duration::from_secs(5), joined)
            .await
            .is_err()
        {
            tracing::warn!("the app-server's tasks did not end within 5 s of its kill");
        }
    }
}
