//! One client connection: its identity and caller, the threads it follows, its requests to the
//! members and their answers, the server requests it answers.

use crate::codex::protocol::scan::request_peek;
use crate::codex::protocol::table::name as method;
use crate::codex::protocol::table::{CodexMethod, Route};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{oneshot, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::feed::{Feed, Followed};
use super::{
    ConnectionStatus, Shared, ThreadStatus, CLIENT_QUEUE, CLIENT_QUEUE_BYTES, INTERNAL_ERROR,
    INVALID_REQUEST, MAX_IN_FLIGHT, MAX_THREADS_PER_CONNECTION, MAX_WAITING_ANSWERS, ORDER_WAIT,
};
use crate::codex::client::fleet::Identity;
use crate::codex::client::hub::CodexHub;
use crate::codex::client::peer::PeerError;
use crate::codex::client::pool::Lease;
use crate::codex::protocol::inbound::{
    AnswerView as _, ReviewStartedAnswer, ThreadOpenedAnswer, TurnStartedAnswer,
};
use crate::codex::protocol::methods::{
    ThreadIdParams, ThreadLoadedList, ThreadLoadedListParams, ThreadLoadedListResult,
    ThreadReattach, ThreadUnsubscribe, ThreadUnsubscribeResult, TurnInterrupt, TurnInterruptParams,
};
use crate::codex::protocol::wire::{
    own_json, Incoming, Outgoing, RawParams, RequestId, RpcError, W3cTraceContext,
};
use crate::service::clients::Caller;
use crate::support::sync::lock;
use crate::support::ws::{WsReceiver as Receiver, WsSender as Sender};

/// Methods about the account a connection runs as, answered per identity.
pub(super) const LOGIN: &str = method::ACCOUNT_LOGIN_START;

/// One client connection: its identity, threads, server requests waiting for answers, queue.
pub(super) struct Connection {
    pub(super) number: usize,
    pub(super) shared: Arc<Shared>,
    /// What goes to the client, bounded in bytes and messages (a client that falls that far
    /// behind is closed, saying so).
    pub(super) out: crate::support::queue::ByteSender<String>,
    /// The client its token names (the operator's token: every thread; a named client: its own).
    pub(super) caller: Caller,
    /// Who its requests run as: native until it logs in.
    pub(super) identity: Mutex<Identity>,
    pub(super) threads: Mutex<HashMap<String, Followed>>,
    /// Our id of a server request -> the member's hub and Codex's id, and for a token refresh
    /// the account whose member asked.
    pub(super) waiting: Mutex<HashMap<i64, Waiting>>,
    pub(super) next_id: AtomicI64,
    pub(super) in_flight: Arc<Semaphore>,
    pub(super) tasks: TaskTracker,
    pub(super) transcript: Option<crate::traffic::transcript::TranscriptQueue>,
    /// `clientInfo` of `initialize`.
    pub(super) client: Mutex<Option<String>>,
    pub(super) initialized: AtomicBool,
    /// Cancelled when this connection ends (by either side, or on shutdown).
    pub(super) cancel: CancellationToken,
    /// What the sandbox ceiling lowered for this connection so far (logged once each).
    pub(super) lowered: Mutex<std::collections::HashSet<&'static str>>,
}

impl Connection {
    pub(super) async fn run(
        shared: Arc<Shared>,
        caller: Caller,
        mut sender: Sender,
        mut receiver: Receiver,
    ) {
        let (out, mut queue) =
            crate::support::queue::byte_queue::<String>(CLIENT_QUEUE_BYTES, Some(CLIENT_QUEUE));
        let cancel = shared.cancel.child_token();
        let number = shared.connection_number();
        tracing::info!("client connection {number} opened ({})", caller.name);
        let (transcript, transcript_task) = match &shared.transcript {
            Some(dir) => {
                match crate::traffic::transcript::transcript_writer(
                    &dir.join(format!("connection-{number}")),
                    &shared.tasks,
                    shared.router.is_some(),
                ) {
                    Ok((queue, task)) => (Some(queue), Some(task)),
                    Err(error) => {
                        tracing::warn!(
                            "transcript of connection {number}: {}",
                            crate::error::with_causes(&error)
                        );
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
            lowered: Mutex::new(std::collections::HashSet::new()),
        });
        lock(&shared.live).insert(number, Arc::downgrade(&connection));
        // The writer: the queue to the client, and a ping every interval; a close frame at the end.
        let writer_cancel = cancel.clone();
        let ping_interval = shared.ping_interval;
        let writer = connection.tasks.spawn(async move {
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
                        drain_queued(&mut sender, &mut queue).await;
                        None
                    }
                };
                let Some(message) = message else { break };
                // A send blocks while the client does not read; a close gives it and what is
                // queued behind it a second more at most (the close is not kept waiting
                // behind a full socket, and nothing queued before it is dropped).
                let outcome = {
                    let send = async {
                        sender.send_text(&message).await.is_ok() && sender.flush().await.is_ok()
                    };
                    tokio::pin!(send);
                    tokio::select! {
                        biased;
                        sent = &mut send => if sent { Sent::Yes } else { Sent::Failed },
                        () = writer_cancel.cancelled() => {
                            match tokio::time::timeout(CLOSE_DRAIN, &mut send).await {
                                Ok(true) => Sent::Closing,
                                _ => Sent::Failed,
                            }
                        }
                    }
                };
                match outcome {
                    Sent::Yes => {}
                    Sent::Failed => break,
                    Sent::Closing => {
                        drain_queued(&mut sender, &mut queue).await;
                        break;
                    }
                }
            }
            let _ = tokio::time::timeout(CLOSE_DRAIN, sender.close()).await;
        });
        // Nothing but `initialize` may open a connection, and soon.
        let handshake = {
            let tasks = connection.tasks.clone();
            let connection = Arc::downgrade(&connection);
            let cancel = cancel.clone();
            let timeout = shared.handshake_timeout;
            tasks.spawn(async move {
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
        tracing::info!("client connection {number} closed");
        // The transcript's writer ends when the last copy of its queue is gone.
        drop(connection);
        if let Some(task) = transcript_task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    pub(super) fn status(&self) -> ConnectionStatus {
        let mut threads: Vec<ThreadStatus> = lock(&self.threads)
            .iter()
            .map(|(id, followed)| {
                let workspace = lock(&followed.feed.workspace).clone();
                ThreadStatus {
                    id: id.clone(),
                    member: followed.lease.name.clone(),
                    agent: workspace
                        .as_deref()
                        .and_then(super::status::agent_of_workspace),
                    workspace,
                    turn: followed.feed.turn(),
                    followers: followed.feed.followers().len(),
                    stall: lock(&followed.feed.watch).status(),
                    token_usage: lock(&followed.feed.token_usage).clone(),
                    compactions: followed.feed.compactions.load(Ordering::SeqCst),
                    context_alarm: followed.feed.context_alarm.load(Ordering::SeqCst),
                }
            })
            .collect();
        threads.sort_by(|a, b| a.id.cmp(&b.id));
        ConnectionStatus {
            number: self.number,
            identity: self.identity().key(),
            account: None,
            caller: self.caller.name.clone(),
            client: lock(&self.client).clone(),
            threads,
            requests_in_flight: MAX_IN_FLIGHT - self.in_flight.available_permits(),
            waiting_answers: lock(&self.waiting).len(),
        }
    }

    /// A copy of a line for the transcript and the observer (never waits).
    pub(super) fn tap(&self, direction: crate::proxy::Direction, line: &str) {
        if let Some(transcript) = &self.transcript {
            transcript.offer(direction, line.as_bytes().to_vec());
        }
        if let Some(observe) = &self.shared.observe {
            observe.offer(self.number, direction, line.as_bytes().to_vec());
        }
    }

    /// A message to the client (an answer), tapped.
    pub(super) async fn send(&self, text: String) {
        self.push(text);
    }

    /// A message to the client: never waits. A client that does not read what it is sent
    /// ([`CLIENT_QUEUE_BYTES`] or [`CLIENT_QUEUE`] messages queued for it) is closed, saying
    /// why: it cannot make the endpoint hold more (its threads stay on their members).
    pub(super) fn push(&self, text: String) {
        self.tap(crate::proxy::Direction::Out, &text);
        let size = text.len();
        if !self.out.offer(size, text) && !self.cancel.is_cancelled() {
            let queued = CLIENT_QUEUE_BYTES.saturating_sub(self.out.free_bytes());
            tracing::warn!(
                "client connection {} ({}) does not read what it is sent: {} KiB queued for it, a {} KiB message does not fit (at most {} MiB or {CLIENT_QUEUE} messages); closed",
                self.number,
                self.caller.name,
                queued / 1024,
                size / 1024,
                CLIENT_QUEUE_BYTES / (1024 * 1024)
            );
            self.cancel.cancel();
        }
    }

    /// One message from the client.
    pub(super) async fn receive(self: &Arc<Self>, text: String) {
        self.tap(crate::proxy::Direction::In, &text);
        // A client's W3C trace context goes on with its request (the envelope is made anew).
        let trace = if text.contains("\"trace\"") {
            serde_json::from_str::<TraceField>(&text)
                .ok()
                .and_then(|field| field.trace)
        } else {
            None
        };
        match crate::codex::protocol::wire::decode(text) {
            Ok(Incoming::Request { id, method, params }) => {
                let method = method.to_string();
                if method == method::INITIALIZE {
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
                    connection.forward(id, method, params, trace).await;
                });
            }
            Ok(Incoming::Notification { method, params, .. }) => {
                let method = method.to_string();
                if method == method::INITIALIZED {
                    return;
                }
                // A client's notification about a thread goes to the thread's member.
                if let Some(hub) = thread_of(&params).and_then(|thread| self.hub_of(&thread)) {
                    let params: Option<&serde_json::value::RawValue> =
                        serde_json::from_str(params.get()).ok();
                    let _ = hub.peer().forward_notification(&method, params).await;
                }
            }
            Ok(Incoming::Response { id, result }) => {
                let RequestId::Integer(our_id) = id else {
                    return;
                };
                let Some(Waiting {
                    hub,
                    id: codex_id,
                    refresh_of,
                }) = lock(&self.waiting).remove(&our_id)
                else {
                    tracing::debug!("a client answered an unknown server request {id}");
                    return;
                };
                // A refreshed ChatGPT token replaces the member's login: only the same
                // holder's may (another user's token would put the account's turns under it).
                if let (Some(identity), Ok(raw)) = (&refresh_of, &result) {
                    if let Err(why) = refreshed_by_holder(identity, raw.get()) {
                        tracing::warn!("client connection {}: {why}", self.number);
                        let _ = hub
                            .peer()
                            .respond_error(codex_id, INVALID_REQUEST, format!("clawbridge: {why}"))
                            .await;
                        return;
                    }
                }
                let sent = match result {
                    // The client's answer goes to Codex as the client wrote it.
                    Ok(raw) => {
                        match serde_json::from_str::<&serde_json::value::RawValue>(raw.get()) {
                            Ok(answer) => hub.peer().forward_answer(codex_id, answer).await,
                            Err(_) => return,
                        }
                    }
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

    /// Log what the ceiling lowered for this connection, each kind once.
    fn note_lowered(&self, lowered: &[&'static str]) {
        if lowered.is_empty() {
            return;
        }
        let mut seen = lock(&self.lowered);
        for kind in lowered {
            if seen.insert(kind) {
                tracing::info!(
                    "client connection {} ({}): {kind} {} (--max-sandbox); logged once per connection",
                    self.number,
                    self.caller.name,
                    self.shared.policy.ceiling.as_str()
                );
            }
        }
    }

    pub(super) fn identity(&self) -> Identity {
        lock(&self.identity).clone()
    }

    pub(super) async fn initialize(&self, id: RequestId, params: &RawParams) {
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
        // The pinned answer, when there is one: a handshake starts no member (a restarted or
        // standby endpoint, whose clients log in next, holds no native member for nothing).
        if let Some(answer) = self.shared.runtime.pinned() {
            return self.answer(&id, &answer).await;
        }
        // Any running member's answer (one Codex build): a handshake starts nothing when one
        // runs, so a client that logs in next does not hold a native member for nothing.
        if let Some(result) = self.shared.fleet.any_initialize_result() {
            return self.answer(&id, &self.shared.runtime.answer(&result)).await;
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
                self.answer(&id, &self.shared.runtime.answer(&result)).await;
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
    pub(super) fn hub_of(&self, thread: &str) -> Option<Arc<CodexHub>> {
        lock(&self.threads)
            .get(thread)
            .map(|followed| Arc::clone(&followed.lease.hub))
    }

    pub(super) async fn fail(&self, id: &RequestId, code: i64, message: String) {
        let error = RpcError {
            code,
            message,
            data: None,
        };
        self.answer_error(id, error).await
    }

    /// A member of `identity` for a request (the thread's, by `affinity`), held until the hold
    /// goes; from now on its messages of no thread reach the identity's connections.
    pub(super) async fn lease(
        &self,
        identity: &Identity,
        affinity: Option<&str>,
    ) -> Result<(Lease, crate::codex::client::fleet::Hold), String> {
        self.shared
            .fleet
            .admit(identity)
            .map_err(|error| format!("clawbridge: {error}"))?;
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
    pub(super) async fn login(self: &Arc<Self>, id: RequestId, params: &RawParams) {
        let value: Value = serde_json::from_str(params.get()).unwrap_or(Value::Null);
        let identity = match Identity::from_login(&value) {
            Ok(identity) => identity,
            Err(refusal) => {
                return self
                    .fail(&id, INVALID_REQUEST, format!("clawbridge: {refusal}"))
                    .await
            }
        };
        // A named account's key runs as the account (the same home and threads whichever of
        // its keys logs in); a key the accounts refuse is told how to be added.
        let identity = match self.shared.named_identity(identity) {
            Ok(identity) => identity,
            Err(refusal) => {
                tracing::info!("client connection {}: {refusal}", self.number);
                return self.fail(&id, INVALID_REQUEST, refusal).await;
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
                    self.login_elsewhere(&identity, &lease.name, &value).await;
                    self.become_identity(identity).await;
                    return self.answer(&id, raw.get()).await;
                }
                Err(PeerError::ConnectionClosed) if tries < 2 => {
                    // Once the pool has seen that member go (its router ends with the
                    // connection, at once or nearly), the next lease starts the identity's
                    // next one instead of handing the same one out again.
                    let _ = tokio::time::timeout(MEMBER_GONE_WAIT, lease.hub.gone()).await;
                    continue;
                }
                Err(error) => return self.member_failed(&id, &identity, &lease, error).await,
            }
        }
    }

    /// The account's other remote members hear its login too: each keeps the login in its own
    /// Codex home, and a turn placed on one that never heard it would carry no key. One that
    /// cannot be reached now is logged (its turns fail until the account logs in again; none
    /// carries another account's key, as it serves this account only).
    async fn login_elsewhere(&self, identity: &Identity, done: &str, login: &Value) {
        for member in self.shared.fleet.own_members(identity) {
            if member == done {
                continue;
            }
            let sent = match self.lease(identity, Some(&member)).await {
                Ok((lease, _hold)) => lease
                    .hub
                    .peer()
                    .request_raw(LOGIN, login)
                    .await
                    .map(drop)
                    .map_err(|error| error.to_string()),
                Err(error) => Err(error),
            };
            match sent {
                Ok(()) => tracing::info!("{identity}: logged in on {member} too"),
                Err(error) => tracing::warn!(
                    "{identity}: the login did not reach {member} ({error}); its turns there fail until the account logs in again"
                ),
            }
        }
    }

    /// From now on the connection's requests run as `identity`. The threads it followed as
    /// another identity are let go: they stay that identity's, never run under this one.
    pub(super) async fn become_identity(&self, identity: Identity) {
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
    pub(super) async fn member_failed(
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

    /// A client request, to a member of its identity, and the member's answer back: a router
    /// over small phases, each of which either passes the request on or has answered it (a
    /// refusal, an answer of the endpoint's own): what the endpoint answers itself, what the
    /// client may ask ([`Connection::admit`]), whose thread it names
    /// ([`Connection::thread_home`]), which member takes it ([`Connection::route`]), what the
    /// member must hear first ([`Connection::before_send`]), and what its answer files
    /// ([`Connection::after_answer`]).
    pub(super) async fn forward(
        self: &Arc<Self>,
        id: RequestId,
        method: String,
        params: RawParams,
        trace: Option<W3cTraceContext>,
    ) {
        let kind = CodexMethod::from_name(&method);
        let peek = request_peek(params.get());
        if let Some(key) = peek.twice {
            return self
                .fail(
                    &id,
                    INVALID_REQUEST,
                    format!("clawbridge: `params` gives `{key}` twice; give each key once"),
                )
                .await;
        }
        // The table's routing column: answered here, a new thread, or the member of the thread
        // the request names (a method the table does not know goes by the thread too).
        let route = kind.map_or(Route::Member, CodexMethod::route);
        if route == Route::Endpoint && self.answered_here(&id, kind, &params).await {
            return;
        }
        let identity = self.identity();
        let Some(admitted) = self.admit(&id, &method, &params, &identity).await else {
            return;
        };
        // Any request that names a thread is about it (a new thread names none yet): it goes
        // to the thread's member, and only the thread's owner may send it.
        let thread = match route {
            Route::NewThread => None,
            Route::Endpoint | Route::Member => peek.thread,
        };
        let Some(home) = self
            .thread_home(&id, kind, thread.as_deref(), &identity)
            .await
        else {
            return;
        };
        // Across the endpoints of a shared store, only the thread's lease holder serves it.
        if let Some(thread) = &thread {
            if let Err(why) = self.shared.claim(thread).await {
                return self.fail(&id, INVALID_REQUEST, why).await;
            }
        }
        if let (Some(CodexMethod::ThreadUnsubscribe), Some(thread)) = (kind, &thread) {
            if let Some(status) = self.unsubscribe(thread) {
                return self
                    .answer(&id, &own_text(&ThreadUnsubscribeResult { status }))
                    .await;
            }
        }
        let Some((lease, _hold)) = self
            .route(&id, thread.as_deref(), home.as_ref(), &identity)
            .await
        else {
            return;
        };
        // A request about a thread goes after any unsubscribe of it being sent to that member,
        // and none is sent while it is on its way (until its answer is handled). A client's own
        // unsubscribe is one: while another connection's request about the thread is on its way
        // (or another follows it now), the member keeps the thread and the client is told it is
        // unsubscribed, as when another follows it.
        let _gate = match &thread {
            None => None,
            Some(thread) => {
                let key = super::feed::feed_key(&lease.hub, thread);
                if kind == Some(CodexMethod::ThreadUnsubscribe) {
                    let unsubscribing = self
                        .shared
                        .gates
                        .unsubscribe(key, || self.shared.feed_exists(&lease.hub, thread));
                    let Some(unsubscribing) = unsubscribing else {
                        let status = ThreadUnsubscribeResult {
                            status: "unsubscribed",
                        };
                        return self.answer(&id, &own_text(&status)).await;
                    };
                    Some(unsubscribing)
                } else {
                    Some(self.shared.gates.enter(key).await)
                }
            }
        };
        let text = admitted.params.as_deref().unwrap_or(params.get());
        // `--route spec`: a thread or turn request goes with the workspace files where the spec
        // puts them (after the policy admitted it: the folder it names is one it may use).
        let route_key = format!("{}:{id}", self.number);
        let routed = self.routed(&route_key, &id, &method, kind, text).await;
        let text = routed.as_deref().unwrap_or(text);
        let params: &serde_json::value::RawValue = match serde_json::from_str(text) {
            Ok(params) => params,
            Err(_) => {
                return self
                    .fail(&id, INVALID_REQUEST, "params are not JSON".into())
                    .await
            }
        };
        // A place among the member's requests in flight, in this connection's turn (a
        // command's run holds none: Codex runs it beside its queue).
        let _place = match kind {
            Some(CodexMethod::CommandExec) => None,
            _ => Some(lease.hub.fair().enter(self.number as u64).await),
        };
        let Some(resumed_here) = self
            .before_send(
                &id,
                kind,
                thread.as_deref(),
                home.as_ref(),
                &lease,
                &identity,
            )
            .await
        else {
            return;
        };
        // A traced turn carries its span's context to Codex, so Codex's own spans join the
        // turn's trace; any other request carries the client's context, if it sent one.
        let trace = match (&self.shared.trace, kind) {
            (Some(live), Some(CodexMethod::TurnStart)) => Some(live.turn_trace(
                self.number,
                &serde_json::to_string(&id).unwrap_or_default(),
                trace.as_ref(),
            )),
            _ => trace,
        };
        // The feed a turn starts on, taken now: if its app-server goes away before the answer
        // is handled, the connection may no longer follow the thread by then.
        let starts_on = match (kind, &thread) {
            (Some(CodexMethod::TurnStart), Some(thread)) => self.feed_of(thread),
            _ => None,
        };
        // The client's params go to Codex byte for byte (validated above, never re-serialized).
        match lease
            .hub
            .peer()
            .forward_traced(&method, params, trace)
            .await
        {
            Ok(raw) => {
                if let (Some(router), Some(CodexMethod::ThreadStart)) = (&self.shared.router, kind)
                {
                    if let Ok(mut router) = router.lock() {
                        router.answer(&route_key, raw.get());
                    }
                }
                let Answered {
                    thread: answered,
                    then,
                } = self
                    .after_answer(kind, thread, raw.get(), &lease, &identity, starts_on)
                    .await;
                if let Some(answered) = answered {
                    self.barrier(&lease.hub, &answered).await;
                }
                let answer = if admitted.listing {
                    let key = identity.key();
                    super::policy::filter_listing(raw.get(), |thread| {
                        self.shared.directory.get(thread).is_some_and(|home| {
                            home.identity == key && self.caller.may_use(&home.owner)
                        })
                    })
                } else if admitted.redact_answer {
                    super::policy::redact_answer(raw.get())
                } else {
                    None
                };
                self.answer(&id, answer.as_deref().unwrap_or(raw.get()))
                    .await;
                if let Some(then) = then {
                    self.push(then);
                }
            }
            Err(error) => {
                if resumed_here {
                    if let Some(thread) = &thread {
                        self.leave(thread);
                        self.note_gone(thread, home.as_ref(), &error);
                    }
                }
                self.member_failed(&id, &identity, &lease, error).await
            }
        }
    }

    /// A thread or turn request's params as the spec routes them (`--route spec`), recorded in
    /// the transcript beside the client's; `None` to send them as they are. The workspace is
    /// read on the blocking pool.
    async fn routed(
        &self,
        key: &str,
        id: &RequestId,
        method: &str,
        kind: Option<CodexMethod>,
        params: &str,
    ) -> Option<String> {
        let router = self.shared.router.as_ref()?;
        if !matches!(
            kind,
            Some(CodexMethod::ThreadStart | CodexMethod::ThreadResume | CodexMethod::TurnStart)
        ) {
            return None;
        }
        let rerouted = crate::translate::live::route_blocking(
            router,
            key.to_string(),
            method.to_string(),
            params.to_string(),
        )
        .await?;
        let params: Box<serde_json::value::RawValue> =
            serde_json::value::RawValue::from_string(rerouted.params).ok()?;
        let line = serde_json::to_string(&RoutedRequest {
            id,
            method,
            params: &params,
        })
        .ok()?;
        if let Some(transcript) = &self.transcript {
            transcript.offer_routed(line.as_bytes().to_vec(), rerouted.notes);
        }
        if let Some(observe) = &self.shared.observe {
            observe.routed(line.as_bytes());
        }
        Some(params.get().to_string())
    }

    /// The requests the endpoint answers itself (the table's `Access::Endpoint` rows): the
    /// loaded threads over the identity's members, and the connection's login and logout.
    /// Whether it answered.
    async fn answered_here(
        self: &Arc<Self>,
        id: &RequestId,
        kind: Option<CodexMethod>,
        params: &RawParams,
    ) -> bool {
        match kind {
            Some(CodexMethod::ThreadLoadedList) => self.loaded_list(id).await,
            Some(CodexMethod::AccountLoginStart) => self.login(id.clone(), params).await,
            Some(CodexMethod::AccountLogout) => {
                // The member's login is its identity's, shared with its other connections:
                // this connection stops using it, nothing is logged out for the others.
                self.become_identity(Identity::Native).await;
                self.answer(id, "{}").await
            }
            _ => return false,
        }
        true
    }

    /// What this client may ask, and within what sandbox (the method policy, the workspace
    /// roots, the ceiling): refused here, or passed on with what exceeded the ceiling lowered;
    /// and an account past its daily budget starts no model call (`--budget-tokens`).
    async fn admit(
        &self,
        id: &RequestId,
        method: &str,
        params: &RawParams,
        identity: &Identity,
    ) -> Option<super::policy::Admitted> {
        let admitted =
            match self
                .shared
                .policy
                .admit(&self.caller, self.number, method, params.get())
            {
                Ok(admitted) => admitted,
                Err(refusal) => {
                    tracing::info!(
                        "client connection {} ({}): {refusal}",
                        self.number,
                        self.caller.name
                    );
                    self.fail(id, INVALID_REQUEST, refusal).await;
                    return None;
                }
            };
        self.note_lowered(&admitted.lowered);
        if spends_tokens(method) {
            if let Some(why) = self.shared.usage.refusal_of(identity.key()).await {
                self.fail(id, INVALID_REQUEST, why).await;
                return None;
            }
        }
        Some(admitted)
    }

    /// Where the thread a request names lives, checked: a thread id is Codex's (a UUID, so a
    /// longer one or one with control characters is refused before anything is kept for it);
    /// a thread lives with the client and the identity that opened it (another's connection
    /// gets a clear refusal, never a turn under the wrong account); a conversation gone from
    /// its account's Codex home is said, never a new thread. `None`: refused (answered).
    async fn thread_home(
        &self,
        id: &RequestId,
        kind: Option<CodexMethod>,
        thread: Option<&str>,
        identity: &Identity,
    ) -> Option<Option<crate::service::store::ThreadRecord>> {
        let Some(thread) = thread else {
            return Some(None);
        };
        let refuse = |message: String| async move {
            self.fail(id, INVALID_REQUEST, message).await;
            None
        };
        if thread.len() > MAX_THREAD_ID_BYTES || thread.chars().any(char::is_control) {
            return refuse(format!("clawbridge: `threadId` is not a thread id (at most {MAX_THREAD_ID_BYTES} bytes, no control characters)")).await;
        }
        let Some(home) = self.shared.directory.get(thread) else {
            return Some(None);
        };
        if !self.caller.may_use(&home.owner) {
            return refuse(format!(
                "clawbridge: thread {thread} belongs to another client"
            ))
            .await;
        }
        if home.identity != identity.key() {
            return refuse(match self.shared.account_name(&home.identity) {
                Some(name) => format!(
                    "clawbridge: thread {thread} belongs to account {name} ({}); this connection runs as {identity}. If this connection's key is a new key of {name} (a rotation), add it: `clawbridge account add-key {name} --api-key-env VAR`; otherwise log in with one of {name}'s keys.",
                    home.identity
                ),
                None => format!(
                    "clawbridge: thread {thread} belongs to another account ({}); this connection runs as {identity}. If this connection's key replaces that account's (a rotation), name the account and add the new key: `clawbridge account add NAME --fingerprint {}`, then `clawbridge account add-key NAME --api-key-env VAR`; otherwise log in with that account's key.",
                    home.identity, home.identity
                ),
            })
            .await;
        }
        // A local member of another state dir holds it: its rollout is in that state dir's
        // Codex home, which this endpoint's members cannot read (a resume here would find
        // nothing, or begin it again from nothing).
        if let (Some(theirs), Some(ours)) = (&home.home, &self.shared.home) {
            if theirs != ours {
                return refuse(format!(
                    "clawbridge: thread {thread} runs on a local app-server ({}) of the endpoint on state dir {theirs}, whose Codex home this endpoint (state dir {ours}) cannot read; reach the thread through an endpoint on that state dir (start it again if it died), or give the fleet remote app-servers every endpoint reaches (`--app-server`, see docs/replicas.md)",
                    home.member
                ))
                .await;
            }
        }
        if home.gone
            && matches!(
                kind,
                Some(CodexMethod::ThreadResume | CodexMethod::TurnStart)
            )
        {
            return refuse(format!(
                "clawbridge: thread {thread}'s conversation is gone from its account's Codex home (its rollout file was removed); start a new thread"
            ))
            .await;
        }
        Some(Some(home))
    }

    /// The member a request goes to: the one this connection follows the thread on, else the
    /// thread's member (its affinity) or, for no thread, the identity's least busy one.
    /// `None`: no member could take it (answered).
    async fn route(
        self: &Arc<Self>,
        id: &RequestId,
        thread: Option<&str>,
        home: Option<&crate::service::store::ThreadRecord>,
        identity: &Identity,
    ) -> Option<(Lease, crate::codex::client::fleet::Hold)> {
        let followed = thread.and_then(|thread| {
            let lease = lock(&self.threads)
                .get(thread)
                .filter(|followed| followed.lease.hub.is_alive())
                .map(|followed| followed.lease.clone())?;
            let hold = self.shared.fleet.hold(&lease)?;
            Some((lease, hold))
        });
        if followed.is_some() {
            return followed;
        }
        let affinity = home.map(|home| home.member.as_str());
        match self.lease(identity, affinity).await {
            Ok(leased) => Some(leased),
            Err(error) => {
                self.fail(id, INTERNAL_ERROR, error).await;
                None
            }
        }
    }

    /// What the member must hear before the request: a resumed thread is followed first, so
    /// nothing Codex says about it before its answer (`thread/status/changed` `notLoaded`) is
    /// missed; a turn on a thread this app-server has no feed for (its member was restarted,
    /// or stopped while idle to make room for another account) is resumed first, so it runs
    /// and is heard. `Some(resumed_here)`, or `None` when the resume failed (answered).
    async fn before_send(
        self: &Arc<Self>,
        id: &RequestId,
        kind: Option<CodexMethod>,
        thread: Option<&str>,
        home: Option<&crate::service::store::ThreadRecord>,
        lease: &Lease,
        identity: &Identity,
    ) -> Option<bool> {
        let Some(thread) = thread else {
            return Some(false);
        };
        match kind {
            Some(CodexMethod::ThreadResume) => {
                self.follow(thread, lease, identity);
                Some(true)
            }
            Some(CodexMethod::TurnStart | CodexMethod::TurnSteer)
                if !self.follows_on(thread, &lease.hub) =>
            {
                let known_here = self.shared.feed_exists(&lease.hub, thread);
                self.follow(thread, lease, identity);
                if !known_here {
                    let resume = ThreadIdParams {
                        thread_id: thread.to_string(),
                    };
                    if let Err(error) = lease.hub.peer().call::<ThreadReattach>(&resume).await {
                        self.leave(thread);
                        self.note_gone(thread, home, &error);
                        self.member_failed(id, identity, lease, error).await;
                        return None;
                    }
                    lease.hub.note_opened();
                    self.place(thread, lease, identity, None);
                }
                Some(false)
            }
            _ => Some(false),
        }
    }

    /// What a member's answer files: a thread opened (started, resumed, forked: filed only
    /// now that Codex accepted it, so a refused resume leaves nothing behind and takes
    /// nobody's thread; followed; its model labels its tokens, its workspace names its
    /// agent), a turn started (the thread touched, the turn and its answerer noted; or, when
    /// the app-server of the feed it started on, `starts_on`, went away meanwhile, the turn's
    /// failed end for the client), a detached review's new thread (followed). The thread the
    /// answer is about, if any, and what the client hears after the answer.
    async fn after_answer(
        self: &Arc<Self>,
        kind: Option<CodexMethod>,
        thread: Option<String>,
        raw: &str,
        lease: &Lease,
        identity: &Identity,
        starts_on: Option<Arc<Feed>>,
    ) -> Answered {
        let thread = match kind {
            Some(
                CodexMethod::ThreadStart | CodexMethod::ThreadResume | CodexMethod::ThreadFork,
            ) => {
                let answer = ThreadOpenedAnswer::read(raw);
                let Some(opened) = answer.thread.id else {
                    return Answered { thread, then: None };
                };
                lease.hub.note_opened();
                if let Err(why) = self.shared.claim(&opened).await {
                    tracing::warn!("{why}");
                }
                self.place(&opened, lease, identity, answer.thread.path.as_deref());
                self.follow(&opened, lease, identity);
                if let Some(feed) = self.feed_of(&opened) {
                    if let Some(model) = &answer.model {
                        feed.set_model(model);
                    }
                    if let Some(cwd) = &answer.cwd {
                        feed.set_workspace(cwd);
                    }
                    if kind == Some(CodexMethod::ThreadStart) {
                        feed.started_here(self.shared.fresh_thread_grace, &self.shared.tasks);
                    }
                }
                Some(opened)
            }
            Some(CodexMethod::TurnStart) => {
                let turn = TurnStartedAnswer::read(raw).turn.id;
                if let (Some(thread), Some(turn)) = (&thread, turn) {
                    self.shared.directory.touch(thread);
                    // Its app-server may have gone away between answering and this (the feed
                    // refuses the turn, or its end already let the thread go), or another
                    // endpoint took the thread meanwhile: its followers were told without the
                    // turn, so this client hears the turn's end from here, after the answer.
                    // (The feed it follows now, if it is the one the turn started on.)
                    let following = self
                        .feed_of(thread)
                        .filter(|feed| starts_on.as_ref().is_none_or(|on| Arc::ptr_eq(on, feed)));
                    let why = match following {
                        Some(feed) if feed.turn_answered(turn.clone()) => {
                            *lock(&feed.answerer) = Some(self.number);
                            None
                        }
                        Some(feed) => Some(app_server_gone(&feed.lease.name)),
                        None => starts_on.map(|feed| {
                            if feed.app_server_went_away() {
                                app_server_gone(&feed.lease.name)
                            } else {
                                LET_GO_AS_THE_TURN_STARTED.to_string()
                            }
                        }),
                    };
                    if let Some(why) = why {
                        return Answered {
                            then: Some(failed_turn_end(thread, &turn, &why)),
                            thread: Some(thread.clone()),
                        };
                    }
                }
                thread
            }
            Some(CodexMethod::ReviewStart) => {
                if let Some(review) = ReviewStartedAnswer::read(raw).review_thread_id.as_deref() {
                    if Some(review) != thread.as_deref() {
                        self.place(review, lease, identity, None);
                        self.follow(review, lease, identity);
                    }
                }
                thread
            }
            _ => thread,
        };
        Answered { thread, then: None }
    }

    /// Whether this connection follows `thread` on that app-server incarnation.
    pub(super) fn follows_on(&self, thread: &str, hub: &Arc<CodexHub>) -> bool {
        lock(&self.threads)
            .get(thread)
            .is_some_and(|followed| Arc::ptr_eq(&followed.lease.hub, hub))
    }

    pub(super) fn feed_of(&self, thread: &str) -> Option<Arc<Feed>> {
        lock(&self.threads)
            .get(thread)
            .map(|followed| Arc::clone(&followed.feed))
    }

    /// `thread/loaded/list` over the identity's members: the threads loaded in each of its
    /// running app-servers (one page; a client of one app-server sees its own the same way).
    /// Another identity's threads are never listed.
    pub(super) async fn loaded_list(&self, id: &RequestId) {
        let mut loaded = Vec::new();
        for (name, hub) in self.shared.fleet.live_hubs(&self.identity()) {
            let asked = hub
                .peer()
                .call::<ThreadLoadedList>(&ThreadLoadedListParams {});
            match tokio::time::timeout(Duration::from_secs(10), asked).await {
                Ok(Ok(page)) => loaded.extend(page.data),
                Ok(Err(error)) => tracing::debug!("thread/loaded/list on {name}: {error}"),
                Err(_) => tracing::debug!("thread/loaded/list on {name}: no answer in 10 s"),
            }
        }
        // A named client hears only of its own threads.
        if !self.caller.operator {
            loaded.retain(|thread| {
                self.shared
                    .directory
                    .get(thread)
                    .is_some_and(|home| self.caller.may_use(&home.owner))
            });
        }
        loaded.sort();
        loaded.dedup();
        let result = ThreadLoadedListResult {
            data: loaded,
            next_cursor: None,
        };
        self.answer(id, &own_text(&result)).await;
    }

    /// File a thread Codex accepted on `lease`'s member as `identity`'s, this connection's
    /// client its owner unless it has one (an operator's resume does not take it).
    pub(super) fn place(
        &self,
        thread: &str,
        lease: &Lease,
        identity: &Identity,
        rollout: Option<&str>,
    ) {
        self.shared.directory.place(
            thread,
            &crate::service::directory::Placement {
                identity: &identity.key(),
                member: &lease.name,
                owner: &self.caller.name,
                rollout,
                home: if lease.local {
                    self.shared.home.as_deref()
                } else {
                    None
                },
            },
        );
    }

    /// A resume Codex refused because the thread's rollout is gone: the thread is marked so
    /// (when it is this account's), and every later resume says it at once.
    fn note_gone(
        &self,
        thread: &str,
        home: Option<&crate::service::store::ThreadRecord>,
        error: &PeerError,
    ) {
        let gone = matches!(error, PeerError::Rpc { error, .. } if error.message.to_ascii_lowercase().contains("no rollout"));
        if gone && home.is_some_and(|home| home.identity == self.identity().key()) {
            tracing::warn!("thread {thread}: its rollout is gone from its account's Codex home");
            self.shared.directory.mark_gone(thread);
        }
    }

    /// Follow a thread on `lease`'s app-server from now on: its feed (made and claimed on first
    /// need) relays its messages to this connection too.
    pub(super) fn follow(self: &Arc<Self>, thread: &str, lease: &Lease, identity: &Identity) {
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
    pub(super) fn leave(&self, thread: &str) -> Option<Followed> {
        let followed = lock(&self.threads).remove(thread)?;
        self.shared.unfollow(&followed.feed, self.number);
        Some(followed)
    }

    /// A server request of one of this connection's threads, under this connection's own id.
    pub(super) async fn relay_request(
        &self,
        hub: &Arc<CodexHub>,
        request: crate::codex::protocol::inbound::Request,
    ) {
        let ours = self.next_id.fetch_add(1, Ordering::Relaxed);
        let full = {
            let mut waiting = lock(&self.waiting);
            let full = waiting.len() >= MAX_WAITING_ANSWERS;
            if !full {
                let refresh_of = (request.method == method::ACCOUNT_CHATGPT_AUTH_TOKENS_REFRESH)
                    .then(|| self.identity());
                waiting.insert(
                    ours,
                    Waiting {
                        hub: Arc::clone(hub),
                        id: request.id.clone(),
                        refresh_of,
                    },
                );
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
        let text = serde_json::value::to_raw_value(&request.params).and_then(|params| {
            serde_json::to_string(&Outgoing::Request {
                id: RequestId::Integer(ours),
                method: request.method,
                params,
                trace: None,
            })
        });
        match text {
            Ok(text) => self.push(text),
            // A `Value` always serializes; were it ever not to, the request is not relayed.
            Err(error) => tracing::warn!("a server request could not be relayed: {error}"),
        }
    }

    /// Wait until everything the member said about `thread` before now is in this client's
    /// queue, so an answer sent next keeps Codex's order (its messages first, as Codex sent
    /// them). Bounded: a stuck member or relay costs the order, never the answer.
    pub(super) async fn barrier(&self, hub: &CodexHub, thread: &str) {
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
    pub(super) fn unsubscribe(&self, thread: &str) -> Option<&'static str> {
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

    /// Another endpoint took `feed`'s thread (its lease passed): the client hears
    /// `thread/closed` and, when a turn was running, its failed end, and the thread is let go
    /// here (its next message goes through the lease again, and is refused while the other
    /// endpoint holds it).
    pub(super) fn lease_lost(&self, feed: &Arc<Feed>, turn: Option<&str>) {
        let thread = feed.thread.as_str();
        if !lock(&self.threads)
            .get(thread)
            .is_some_and(|followed| Arc::ptr_eq(&followed.feed, feed))
        {
            return;
        }
        self.leave(thread);
        if let Some(turn) = turn {
            self.push(failed_turn_end(
                thread,
                turn,
                "clawbridge: another endpoint took this thread (its lease passed to it while this one could not renew it); go on through that endpoint",
            ));
        }
        self.push(thread_closed(thread));
    }

    /// The member serving `thread` went away (it crashed, was killed, or was stopped while
    /// idle): a running turn ends for the client with a failed `turn/completed` naming why,
    /// instead of never ending; the thread is let go, so the client's next message for it goes
    /// to the member's next incarnation, which reads the thread back from Codex's home.
    pub(super) fn member_lost(&self, feed: &Arc<Feed>, turn: Option<&str>) {
        let (thread, member) = (feed.thread.as_str(), feed.lease.name.as_str());
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
        // A thread with no turn has no rollout: it went with its app-server.
        if feed.unpersisted.load(Ordering::SeqCst) {
            self.push(thread_closed(thread));
        }
        if let Some(turn) = turn {
            self.push(failed_turn_end(thread, turn, &app_server_gone(member)));
        }
    }

    /// Shutdown: every running turn of this connection gets `turn/interrupt`; waits (bounded by
    /// the caller) until Codex has said `turn/completed` for each, so the client hears it.
    pub(super) async fn interrupt_turns(&self) {
        let running: Vec<Arc<Feed>> = lock(&self.threads)
            .values()
            .filter(|followed| followed.feed.turn().is_some())
            .map(|followed| Arc::clone(&followed.feed))
            .collect();
        let mut interrupts = tokio::task::JoinSet::new();
        for feed in running {
            interrupts.spawn(async move {
                let mut state = feed.turn.subscribe();
                // Codex refuses to interrupt a turn it has answered `turn/start` for but not
                // made active yet ("no active turn", measured on 0.169.0 when the stop comes
                // right after the start): its `turn/started` comes first.
                let turn_id = match state
                    .wait_for(|turn| turn.active || turn.id.is_none())
                    .await
                {
                    Ok(turn) => turn.id.clone(),
                    Err(_) => None,
                };
                let Some(turn_id) = turn_id else {
                    return;
                };
                let params = TurnInterruptParams {
                    thread_id: feed.thread.clone(),
                    turn_id,
                };
                if let Err(error) = feed.lease.hub.peer().call::<TurnInterrupt>(&params).await {
                    tracing::debug!("turn/interrupt on shutdown: {error}");
                }
                // Until Codex said `turn/completed` (queued for the client first), or the member
                // is gone (its followers were told).
                tokio::select! {
                    _ = state.wait_for(|turn| turn.id.is_none()) => {}
                    () = feed.lease.hub.gone() => {}
                }
            });
        }
        // One by one: `join_all` panics on a task cancelled (by a runtime shutting down).
        while interrupts.join_next().await.is_some() {}
    }

    pub(super) async fn answer(&self, id: &RequestId, result: &str) {
        let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
        self.send(format!(r#"{{"id":{id},"result":{result}}}"#))
            .await;
    }

    pub(super) async fn answer_error(&self, id: &RequestId, error: RpcError) {
        let message = Outgoing::Error {
            id: id.clone(),
            error,
        };
        match serde_json::to_string(&message) {
            Ok(text) => self.send(text).await,
            Err(error) => tracing::warn!("an error answer could not be written: {error}"),
        }
    }

    /// Stop following every thread; each that nobody else follows is unsubscribed on its
    /// member (Codex holds every thread it opened in memory until told nobody follows it; a
    /// later resume loads it again).
    pub(super) async fn leave_all(&self) {
        let threads: Vec<(String, Followed)> = lock(&self.threads).drain().collect();
        let mut unsubscribes = tokio::task::JoinSet::new();
        for (thread, followed) in threads {
            let still_followed = self.shared.unfollow(&followed.feed, self.number);
            if still_followed || !followed.lease.hub.is_alive() {
                continue;
            }
            // Not while another connection's request about the thread is on its way to the
            // member (its resume would be undone), nor once another follows it.
            let hub = &followed.lease.hub;
            let Some(unsubscribing) = self
                .shared
                .gates
                .unsubscribe(super::feed::feed_key(hub, &thread), || {
                    self.shared.feed_exists(hub, &thread)
                })
            else {
                continue;
            };
            unsubscribes.spawn(async move {
                let _unsubscribing = unsubscribing;
                let params = ThreadIdParams { thread_id: thread };
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
        // Joined one by one: `join_all` panics on a task cancelled (by a runtime shutting down).
        let joined = async { while unsubscribes.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(Duration::from_secs(5), joined).await;
    }

    /// The connection is gone: it follows nothing any more, its members are told nobody will
    /// answer.
    pub(super) async fn close(&self) {
        self.leave_all().await;
        let waiting: Vec<(Arc<CodexHub>, RequestId)> = lock(&self.waiting)
            .drain()
            .map(|(_, entry)| (entry.hub, entry.id))
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

/// Whether a request makes Codex call the model (refused to an account past its budget).
fn spends_tokens(name: &str) -> bool {
    matches!(
        CodexMethod::from_name(name),
        Some(
            CodexMethod::TurnStart
                | CodexMethod::TurnSteer
                | CodexMethod::ReviewStart
                | CodexMethod::ThreadCompactStart
                | CodexMethod::ThreadSample
                | CodexMethod::ThreadPredictionRequest
                | CodexMethod::ThreadGuardianReview
                | CodexMethod::ThreadRealtimeStart
        )
    )
}

/// How long a closing connection still sends what was queued for its client.
const CLOSE_DRAIN: Duration = Duration::from_secs(1);

/// What was queued for a closing client still goes out, for [`CLOSE_DRAIN`] at most: a client
/// that does not read holds nothing past it.
async fn drain_queued(
    sender: &mut Sender,
    queue: &mut crate::support::queue::ByteReceiver<String>,
) {
    let drain = async {
        while let Some(message) = queue.try_recv() {
            if sender.send_text(&message).await.is_err() {
                break;
            }
        }
        let _ = sender.flush().await;
    };
    let _ = tokio::time::timeout(CLOSE_DRAIN, drain).await;
}

/// How one message to a client went.
enum Sent {
    Yes,
    /// Sent, as the connection closes: what is queued goes next, within the drain.
    Closing,
    Failed,
}

/// The longest `threadId` taken (Codex's are UUIDs, 36 bytes).
const MAX_THREAD_ID_BYTES: usize = 256;

/// A server request a client has yet to answer.
pub(super) struct Waiting {
    pub(super) hub: Arc<CodexHub>,
    /// Codex's id of it.
    pub(super) id: RequestId,
    /// For `account/chatgptAuthTokens/refresh`: the account whose member asked (the answer
    /// must be that holder's token).
    pub(super) refresh_of: Option<Identity>,
}

/// Whether a refresh answer's token is `identity`'s holder's.
fn refreshed_by_holder(identity: &Identity, answer: &str) -> Result<(), String> {
    let mut login: Value = serde_json::from_str(answer)
        .map_err(|_| "a token refresh answer that is not JSON".to_string())?;
    if let Some(object) = login.as_object_mut() {
        object.insert("type".into(), Value::from("chatgptAuthTokens"));
    }
    match Identity::from_login(&login) {
        Ok(holder) if &holder == identity => Ok(()),
        Ok(holder) => Err(format!(
            "a token refresh for {identity} answered with another holder's token ({holder}); refused"
        )),
        Err(refusal) => Err(format!("a token refresh answer: {refusal}")),
    }
}

/// A client's request as clawbridge routed it, for the transcript.
#[derive(serde::Serialize)]
struct RoutedRequest<'a> {
    id: &'a RequestId,
    method: &'a str,
    params: &'a serde_json::value::RawValue,
}

/// The one envelope field of a client's request read besides the wire's own.
#[derive(serde::Deserialize)]
struct TraceField {
    trace: Option<W3cTraceContext>,
}

/// The thread a client's params name, none when they give a key twice ([`request_peek`]).
pub(super) fn thread_of(params: &RawParams) -> Option<String> {
    let peek = request_peek(params.get());
    peek.thread.filter(|_| peek.twice.is_none())
}

/// How long a login whose member went away under it waits for the pool to see that member gone
/// before it is sent once more.
const MEMBER_GONE_WAIT: Duration = Duration::from_secs(5);

/// What a client hears of a turn it started while its connection let the thread go (another
/// endpoint took the thread, or the client unsubscribed from it): nothing of the turn reaches
/// this connection.
const LET_GO_AS_THE_TURN_STARTED: &str = "clawbridge: this connection let the thread go as its turn started (another endpoint took the thread, or it was unsubscribed); resume the thread to go on";

/// What a client hears of a turn whose app-server went away under it.
fn app_server_gone(member: &str) -> String {
    format!("clawbridge: the app-server {member} serving this thread went away during the turn; resume the thread to go on")
}

/// What a member's answer filed ([`Connection::after_answer`]).
struct Answered {
    /// The thread the answer is about, if any.
    thread: Option<String>,
    /// A message the client hears right after the answer.
    then: Option<String>,
}

/// A `turn/completed` that ends `turn` of `thread` as failed, saying why (the turn's app-server
/// went away, or another endpoint took the thread): the client's turn never hangs.
fn failed_turn_end(thread: &str, turn: &str, why: &str) -> String {
    notification(
        method::TURN_COMPLETED,
        &TurnEndedParams {
            thread_id: thread,
            turn: EndedTurn {
                error: Some(TurnError { message: why }),
                id: turn,
                items: [],
                status: "failed",
            },
        },
    )
}

/// A `turn/completed` that ends `turn` of `thread` as completed (`error: null`): a turn whose
/// final agent message came and whose end Codex never sent (the stall watch recovers it).
pub(super) fn completed_turn_end(thread: &str, turn: &str) -> String {
    notification(
        method::TURN_COMPLETED,
        &TurnEndedParams {
            thread_id: thread,
            turn: EndedTurn {
                error: None,
                id: turn,
                items: [],
                status: "completed",
            },
        },
    )
}

/// A `thread/closed` of `thread`.
fn thread_closed(thread: &str) -> String {
    notification(
        method::THREAD_CLOSED,
        &ThreadClosedParams { thread_id: thread },
    )
}

/// `turn/completed`'s params for a turn the endpoint ends itself.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnEndedParams<'a> {
    thread_id: &'a str,
    turn: EndedTurn<'a>,
}

/// The turn of [`TurnEndedParams`]: no items, its status, and why it failed (`null` when it
/// did not).
#[derive(serde::Serialize)]
struct EndedTurn<'a> {
    error: Option<TurnError<'a>>,
    id: &'a str,
    items: [(); 0],
    status: &'static str,
}

#[derive(serde::Serialize)]
struct TurnError<'a> {
    message: &'a str,
}

/// `thread/closed`'s params.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadClosedParams<'a> {
    thread_id: &'a str,
}

/// A notification the endpoint writes to its client, its params' keys sorted as clawbridge's
/// own always are ([`own_json`]).
fn notification(method: &str, params: &impl serde::Serialize) -> String {
    let message = own_json(params).and_then(|params| {
        serde_json::to_string(&Outgoing::Notification {
            method: method.to_string(),
            params: Some(params),
        })
    });
    // Plain structs of text always serialize.
    message.unwrap_or_default()
}

/// clawbridge's own answer as the text that goes out (keys sorted, through a `Value`, as
/// [`own_json`] writes them).
fn own_text(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .map(|value| value.to_string())
        .unwrap_or_default()
}
