//! `bridge.runStart`: from a run document to a running turn, as a sequence of phases.
//!
//! 1. [`admit`]: not shutting down, and a `--max-runs` place taken at once;
//! 2. [`read_request`]: the document bounded and parsed on the blocking pool, then checked
//!    (ownership, `newThread`, a Codex to run it);
//! 3. [`steer`]: `queue: "steer"` hands the message to the session's running turn, if any;
//! 4. [`register`]: the run gets its id and state, then waits its turn in its session's queue;
//! 5. [`translate_run`], [`find_thread`], [`open_thread`], [`bind_session`]: the translation,
//!    the thread the run continues (claimed, with the member it lives on), the thread opened on
//!    a leased app-server (a failed resume starts a new one), the session bound to it;
//! 6. [`RunTask::spawn`]: the turn, on the service's task tracker.
//!
//! From phase 5 on a failure is a [`RunError`]: it ends the registered run with its event and
//! answers the client with its code, in one place.

use super::api;
use super::bridge::Bridge;
use super::errors::codes;
use super::errors::library_error;
use super::errors::random_id;
use super::errors::rpc_error;
use super::handler::logged_event;
use super::handler::BridgeHandler;
use super::params::run_request;
use super::runs::EventLog;
use super::runs::RunState;
use super::settings::CodexBinary;
use super::settings::MAX_SESSIONS_LIMIT;
use super::state::Binding;
use super::threads::thread_fingerprint;
use super::threads::ThreadClaim;
use crate::app::events::RunEvent;
use crate::codex::client::pool::Lease;
use crate::codex::client::session::SessionError;
use crate::codex::client::session::TurnEvent;
use crate::codex::protocol::inbound::NotificationKind;
use crate::codex::protocol::methods::ThreadIdParams;
use crate::codex::protocol::methods::ThreadUnsubscribe;
use crate::codex::protocol::params::CodexParams;
use crate::codex::protocol::params::ThreadParams;
use crate::config::Run;
use crate::service::guard::Caller;
use crate::support::sync::lock;
use crate::translate::translate;
use api::CarriesRun as _;
use jsonrpsee::types::ErrorObjectOwned;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

pub(super) async fn run_start(
    bridge: Arc<Bridge>,
    caller: Caller,
    params: String,
) -> Result<api::RunStarted, ErrorObjectOwned> {
    let slot = admit(&bridge)?;
    let request = read_request(&bridge, &caller, params).await?;
    if let Some(steered) = steer(&bridge, &caller, &request).await? {
        return Ok(steered);
    }
    let (state, queue_guard) = register(&bridge, &caller, &request.run, slot).await;
    let opened = async {
        let translation = translate_run(&bridge, &request.run, &state).await?;
        let mut run = request.run.clone();
        let developer_text = translation.developer_instructions(&run);
        let fingerprint = thread_fingerprint(&run, &developer_text);
        let found = find_thread(&bridge, &mut run, request.new_thread, &fingerprint)?;
        let lease = bridge.lease(found.affinity.as_deref(), &run.cwd).await?;
        *lock(&state.hub) = Some(Arc::clone(&lease.hub));
        let opened = open_thread(&bridge, &lease, &translation, &mut run, developer_text).await?;
        let claim = match found.claim.filter(|_| run.thread_id.is_some()) {
            Some(claim) => claim,
            // A thread Codex just created: nobody else can hold it yet.
            None => ThreadClaim::new(
                &bridge,
                &opened.handle.thread_id,
                run.session_key.as_deref(),
            )?,
        };
        *lock(&state.thread_id) = Some(opened.handle.thread_id.clone());
        bind_session(
            &bridge,
            &caller,
            &run,
            &opened.handle.thread_id,
            fingerprint,
            &lease,
        )?;
        Ok::<_, RunError>(RunTask {
            claim,
            lease,
            handle: opened.handle,
            params: opened.params,
        })
    }
    .await;
    let task = opened.map_err(|error| error.finish(&state))?;
    let thread_id = task.handle.thread_id.clone();
    state.push(RunEvent::Thread {
        thread_id: thread_id.clone(),
        resumed: matches!(task.params.thread, ThreadParams::ThreadResume(_)),
    });
    task.spawn(&bridge, state.clone(), queue_guard);
    Ok(api::RunStarted {
        run_id: state.run_id.clone(),
        thread_id,
        steered: None,
    })
}

/// Why a registered run could not start its turn; [`RunError::finish`] ends the run with it.
#[derive(Debug)]
enum RunError {
    /// An answer to the client (its code and message); the run ends failed.
    Failed(ErrorObjectOwned),
    /// The app-server went away while the thread was being opened: the turn never started.
    LostBeforeTurn(SessionError),
}

impl From<ErrorObjectOwned> for RunError {
    fn from(error: ErrorObjectOwned) -> Self {
        RunError::Failed(error)
    }
}

impl RunError {
    /// End the run with this error's event; the answer for the client.
    fn finish(self, state: &RunState) -> ErrorObjectOwned {
        match self {
            RunError::Failed(error) => {
                state.finish(RunEvent::failed(None, error.message().to_string()));
                error
            }
            RunError::LostBeforeTurn(error) => {
                state.finish(RunEvent::app_server_lost(None, false, error.to_string()));
                rpc_error(codes::CODEX_UNAVAILABLE, error.to_string())
            }
        }
    }

    fn thread(error: SessionError) -> Self {
        match error {
            error @ SessionError::CodexExited { .. } => RunError::LostBeforeTurn(error),
            error => RunError::Failed(rpc_error(codes::THREAD_FAILED, error.to_string())),
        }
    }
}

/// Not shutting down, and a place among `--max-runs` reserved at once (a permit), not counted
/// now and registered later: starts that come together each see the others' reservations.
fn admit(bridge: &Bridge) -> Result<tokio::sync::OwnedSemaphorePermit, ErrorObjectOwned> {
    if bridge
        .shutting_down
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return Err(rpc_error(
            codes::CODEX_UNAVAILABLE,
            "clawbridge serve is shutting down",
        ));
    }
    Arc::clone(&bridge.registry.run_slots).try_acquire_owned().map_err(|_| {
        rpc_error(
            codes::BUSY,
            format!(
                "{} runs are in progress, the most this server runs at once (--max-runs); try again when one ends",
                bridge.config.max_runs
            ),
        )
    })
}

/// What a `bridge.runStart` asks for.
struct Request {
    run: Run,
    new_thread: bool,
    queue: api::QueueMode,
}

/// The document, bounded and parsed on the blocking pool, and checked: the caller may use its
/// session and thread, `newThread` does not contradict a named thread, there is a Codex.
async fn read_request(
    bridge: &Arc<Bridge>,
    caller: &Caller,
    params: String,
) -> Result<Request, ErrorObjectOwned> {
    let request = bridge
        .blocking(move |bridge| {
            let request: api::RunStartRequest = run_request(&params)?;
            Ok(Request {
                run: bridge.load_run(request.document())?,
                new_thread: request.new_thread.unwrap_or(false),
                queue: request.queue.unwrap_or_default(),
            })
        })
        .await?;
    crate::app::commands::require_codex(&request.run).map_err(library_error)?;
    bridge.check_ownership(caller, &request.run)?;
    if request.new_thread && request.run.thread_id.is_some() {
        return Err(rpc_error(
            codes::INVALID_PARAMS,
            "field `newThread`: a run that names its threadId cannot ask for a new thread",
        ));
    }
    if let CodexBinary::Missing(reason) = &bridge.config.codex_bin {
        if bridge.config.remote_app_servers.is_empty() {
            return Err(rpc_error(codes::CODEX_UNAVAILABLE, reason.clone()));
        }
    }
    Ok(request)
}

/// `queue: "steer"`: the message goes to the session's running turn as it is (the user's
/// words, as data). `None` when there is no such turn, or it ended meanwhile (the run then
/// starts as usual, queued behind it).
async fn steer(
    bridge: &Arc<Bridge>,
    caller: &Caller,
    request: &Request,
) -> Result<Option<api::RunStarted>, ErrorObjectOwned> {
    if request.queue != api::QueueMode::Steer {
        return Ok(None);
    }
    let running = request
        .run
        .session_key
        .as_deref()
        .and_then(|key| bridge.running_turn_of(key))
        .filter(|running| caller.may_use(&running.owner));
    let Some(running) = running else {
        return Ok(None);
    };
    match bridge.steer(&running, request.run.message.clone()).await {
        Ok(_) => Ok(Some(api::RunStarted {
            run_id: running.run_id.clone(),
            thread_id: lock(&running.thread_id).clone().unwrap_or_default(),
            steered: Some(true),
        })),
        Err(error) if error.code() == codes::NOT_FOUND || error.code() == codes::THREAD_FAILED => {
            tracing::debug!("steer of {} fell back to a run: {error:?}", running.run_id);
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// The run's id and state, in the registry (holding its `--max-runs` place), and its turn in
/// the session's queue: runs of one session go in order.
async fn register(
    bridge: &Arc<Bridge>,
    caller: &Caller,
    run: &Run,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> (Arc<RunState>, tokio::sync::OwnedMutexGuard<()>) {
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
        hub: Mutex::new(None),
        bootstrap: Mutex::new(Vec::new()),
        token_usage: Mutex::new(None),
        compactions: std::sync::atomic::AtomicU64::new(0),
        progress,
        slot: Mutex::new(Some(slot)),
    });
    bridge.prune();
    lock(&bridge.registry.runs).insert(run_id, Arc::clone(&state));
    let session_lock = Arc::clone(
        lock(&bridge.sessions.session_locks)
            .entry(session_key)
            .or_default(),
    );
    (state, session_lock.lock_owned().await)
}

/// The run translated on the blocking pool (its paths checked again here, after the queue
/// wait, where the files are opened); its bootstrap counts kept for `bridge.status`.
async fn translate_run(
    bridge: &Arc<Bridge>,
    run: &Run,
    state: &RunState,
) -> Result<crate::translate::Translation, RunError> {
    let translation = {
        let run = run.clone();
        bridge
            .blocking(move |bridge| {
                translate(&run, &bridge.translate_options()).map_err(library_error)
            })
            .await?
    };
    *lock(&state.bootstrap) = translation
        .routed
        .files
        .iter()
        .map(|file| super::api::BootstrapCount {
            name: file.name.clone(),
            raw_chars: file.raw_chars,
            injected_chars: file.injected_chars,
            truncated: file.truncated,
            surface: file.surface.label().to_string(),
        })
        .collect();
    Ok(translation)
}

/// The thread a run continues, claimed, and the pool member it lives on.
struct FoundThread {
    claim: Option<ThreadClaim>,
    affinity: Option<String>,
}

/// The thread the document names (this session's, or nobody's and idle), else the session's
/// bound thread when its fingerprint still matches (`run.thread_id` is set to it). `newThread`
/// sets the binding aside: a new thread replaces it, so a session whose app-server was marked
/// dead can go on, on another member, by asking.
fn find_thread(
    bridge: &Arc<Bridge>,
    run: &mut Run,
    new_thread: bool,
    fingerprint: &str,
) -> Result<FoundThread, RunError> {
    let session = run.session_key.as_deref();
    let mut claim = match &run.thread_id {
        Some(thread_id) => Some(ThreadClaim::new(bridge, thread_id, session)?),
        None => None,
    };
    let bound = session
        .filter(|_| !new_thread)
        .and_then(|key| lock(&bridge.sessions.bindings).sessions.get(key).cloned());
    let mut affinity = None;
    match (&run.thread_id, bound) {
        (None, Some(binding)) if binding.fingerprint == fingerprint => {
            claim = Some(ThreadClaim::new(bridge, &binding.thread_id, session)?);
            run.thread_id = Some(binding.thread_id);
            affinity = binding.member;
        }
        (Some(named), Some(binding)) if *named == binding.thread_id => affinity = binding.member,
        _ => {}
    }
    Ok(FoundThread { claim, affinity })
}

/// A thread open on a leased app-server, and the params its turn starts with.
struct OpenedThread {
    handle: crate::codex::client::hub::ThreadHandle,
    params: CodexParams,
}

/// Open the run's thread on `lease`: a bound thread the app-server still has loaded (same
/// fingerprint, so the same developer instructions, tools and config) needs no `thread/resume`;
/// a resume Codex refuses starts a new thread instead (`run.thread_id` is then cleared).
async fn open_thread(
    bridge: &Arc<Bridge>,
    lease: &Lease,
    translation: &crate::translate::Translation,
    run: &mut Run,
    developer_text: String,
) -> Result<OpenedThread, RunError> {
    let hub = &lease.hub;
    let mut params = translation.codex_params_with(run, developer_text.clone());
    bridge.bind_approvals(run, &mut params);
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
            params = translation.codex_params_with(run, developer_text);
            bridge.bind_approvals(run, &mut params);
            hub.open_thread(&params.thread)
                .await
                .map_err(RunError::thread)?
        }
        Err(error) => return Err(RunError::thread(error)),
    };
    Ok(OpenedThread { handle, params })
}

/// The session's binding: its thread, the fingerprint, the owner and the member, written at
/// once. Past `--max-sessions` an idle session is forgotten first (its next run starts a new
/// thread), so the state file stays far below the size its loader accepts.
fn bind_session(
    bridge: &Arc<Bridge>,
    caller: &Caller,
    run: &Run,
    thread_id: &str,
    fingerprint: String,
    lease: &Lease,
) -> Result<(), RunError> {
    let Some(key) = &run.session_key else {
        return Ok(());
    };
    {
        let mut bindings = lock(&bridge.sessions.bindings);
        let bound = bridge.config.max_sessions.clamp(1, MAX_SESSIONS_LIMIT);
        if !bindings.sessions.contains_key(key) && bindings.sessions.len() >= bound {
            let busy = bridge.threads.busy();
            let idle = bindings
                .sessions
                .iter()
                .find(|(_, binding)| !busy.contains(&binding.thread_id))
                .map(|(key, _)| key.clone());
            if let Some(evicted) = idle {
                tracing::warn!("{bound} session bindings (--max-sessions): forgetting {evicted}");
                bindings.sessions.remove(&evicted);
                bridge.forget_binding(&evicted);
            }
        }
        let binding = Binding {
            thread_id: thread_id.to_string(),
            fingerprint,
            owner: (!caller.operator).then(|| caller.name.clone()),
            member: Some(lease.name.clone()),
        };
        bridge.keep_binding(key, &binding)?;
        bindings.sessions.insert(key.clone(), binding);
    }
    Ok(())
}

/// A run's turn, ready to go: what it holds until it ends (its thread claim, its lease) and
/// what it runs.
struct RunTask {
    claim: ThreadClaim,
    lease: Lease,
    handle: crate::codex::client::hub::ThreadHandle,
    params: CodexParams,
}

impl RunTask {
    /// Run the turn on the service's tracker (shutdown interrupts it, stops Codex, which ends
    /// it, then waits for it); the session's queue moves on when it ends.
    fn spawn(
        self,
        bridge: &Arc<Bridge>,
        state: Arc<RunState>,
        queue_guard: tokio::sync::OwnedMutexGuard<()>,
    ) {
        let bridge = Arc::clone(bridge);
        bridge.clone().tasks.spawn(async move {
            let _queue = queue_guard;
            self.run(&bridge, &state).await;
        });
    }

    async fn run(self, bridge: &Arc<Bridge>, state: &Arc<RunState>) {
        let RunTask {
            claim: _claim,
            lease,
            mut handle,
            params,
        } = self;
        let hub = Arc::clone(&lease.hub);
        let handler = BridgeHandler {
            bridge: Arc::clone(bridge),
            run: Arc::clone(state),
        };
        let observer_state = Arc::clone(state);
        // `--otel-endpoint`: the observer tells the trace every line to and from the
        // app-server (the tap); the thread's turns are named after the run's agent, which
        // the connection's `initialize` (clawbridge's own) cannot say.
        if let Some(trace) = lock(&bridge.trace).as_ref() {
            let agent = state
                .session_key
                .split(':')
                .nth(1)
                .filter(|agent| !agent.is_empty())
                .unwrap_or("clawbridge-serve");
            trace.name_thread(&handle.thread_id, agent);
        }
        let mut observer = move |event: TurnEvent<'_>| {
            if let TurnEvent::Notification {
                kind: NotificationKind::TurnStarted,
                turn_id: Some(turn_id),
                ..
            } = &event
            {
                *lock(&observer_state.turn_id) = Some(turn_id.to_string());
            }
            if let TurnEvent::Notification { method, params, .. } = &event {
                match *method {
                    crate::codex::protocol::table::name::THREAD_TOKEN_USAGE_UPDATED => {
                        /// `thread/tokenUsage/updated`'s params: the usage, kept as Codex
                        /// sent it (`bridge.status` shows it whole).
                        #[derive(serde::Deserialize)]
                        #[serde(rename_all = "camelCase")]
                        struct UsageUpdated {
                            token_usage: serde_json::Value,
                        }
                        if let Ok(updated) = params.parse::<UsageUpdated>() {
                            *lock(&observer_state.token_usage) = Some(updated.token_usage);
                        }
                    }
                    crate::codex::protocol::table::name::THREAD_COMPACTED => {
                        let compactions = observer_state
                            .compactions
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                            + 1;
                        let usage = lock(&observer_state.token_usage).clone();
                        if compactions >= 2 && usage.as_ref().is_some_and(above_window) {
                            tracing::warn!(
                                "run {}: the input is still above the model's context window after {compactions} compactions",
                                observer_state.run_id
                            );
                        }
                    }
                    _ => {}
                }
            }
            if let Some(value) = logged_event(&event) {
                observer_state.push(value);
            }
        };
        let limits = bridge.config.limits;
        let result = hub
            .run_turn(
                &mut handle,
                &params.turn_start,
                &handler,
                &mut observer,
                limits,
            )
            .await;
        let completed = matches!(&result, Ok(outcome) if outcome.status == crate::codex::client::session::TurnStatus::Completed);
        let end = match result {
            Ok(outcome) => RunEvent::turn_end(&outcome),
            // The binding stays: the session's next run resumes the thread on the member's
            // next app-server. The turn was sent, so it may have run.
            Err(error @ SessionError::CodexExited { .. }) => RunEvent::app_server_lost(
                Some(handle.thread_id.clone()),
                true,
                format!("the app-server {} was lost: {error}", lease.name),
            ),
            Err(error) => RunEvent::failed(Some(handle.thread_id.clone()), error.to_string()),
        };
        // Tool calls of this run that nobody answered are dropped with it.
        lock(&bridge.registry.pending_tools).retain(|_, call| call.run_id != state.run_id);
        state.finish(end);
        // Keep a thread whose turn went well loaded for the session's next run (bounded: the
        // least recently used falls out); let Codex unload any other.
        let thread_id = handle.thread_id.clone();
        drop(handle);
        let unload = match completed {
            true => hub.keep_loaded(&thread_id),
            false => Some(thread_id),
        };
        if let Some(unload) = unload.filter(|_| hub.is_alive()) {
            let unsubscribe_params = ThreadIdParams {
                thread_id: unload.clone(),
            };
            let unsubscribe = hub.peer().call::<ThreadUnsubscribe>(&unsubscribe_params);
            if let Ok(Err(error)) = tokio::time::timeout(Duration::from_secs(5), unsubscribe).await
            {
                tracing::debug!("thread/unsubscribe {unload}: {error}");
            }
        }
        bridge.pool.after_run(&lease).await;
    }
}

/// Whether a `tokenUsage` says the last model call's input did not fit the model's context
/// window (what repeated compactions should have prevented).
pub(super) fn above_window(usage: &serde_json::Value) -> bool {
    serde_json::from_value::<crate::codex::protocol::inbound::TokenUsage>(usage.clone())
        .is_ok_and(|usage| usage.input_fills_window())
}
