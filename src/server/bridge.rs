//! The shared state of the service ([`Bridge`]): the pool of app-servers, session
//! bindings and queues, the run registry, pending answers, thread claims, the blocking pool and
//! the policies that bind a run (the sandbox ceiling, approvals, client ownership).

use super::errors::codes;
use super::errors::library_error;
use super::errors::rpc_error;
use super::runs::PendingCall;
use super::runs::RunState;
use super::settings::CodexBinary;
use super::settings::ServeConfig;
use super::state;
use super::state::BindingFile;
use crate::app::commands;
use crate::codex::client::hub::CodexHub;
use crate::codex::client::pool::Lease;
use crate::codex::client::pool::Pool;
use crate::codex::protocol::methods::TurnInterrupt;
use crate::codex::protocol::methods::TurnInterruptParams;
use crate::codex::protocol::params::AskForApproval;
use crate::codex::protocol::params::CodexParams;
use crate::config::ApprovalPolicy;
use crate::config::Run;
use crate::config::RunDocument;
use crate::config::SandboxMode;
use crate::service::guard::Caller;
use crate::skills::SkillCache;
use crate::support::fs::Roots;
use crate::support::sync::lock;
use crate::translate::TranslateOptions;
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::collections::HashSet;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use tokio::sync::{oneshot, watch};

/// The runs the service knows, and what waits on their clients.
pub(super) struct RunRegistry {
    pub(super) runs: Mutex<HashMap<String, Arc<RunState>>>,
    /// One permit per run in progress (`--max-runs`): taken when a run is admitted, before
    /// anything is read or started, and held by the run until it ends (`RunState::finish`), so
    /// starts that come together cannot all pass the bound.
    pub(super) run_slots: Arc<tokio::sync::Semaphore>,
    /// Tool call id -> the call waiting for a client's `bridge.toolResult`.
    pub(super) pending_tools: Mutex<HashMap<String, PendingCall>>,
    /// Approval id -> (its run, the answer).
    pub(super) pending_approvals: Mutex<HashMap<String, (String, oneshot::Sender<bool>)>>,
}

impl RunRegistry {
    pub(super) fn new(max_runs: usize) -> Self {
        RunRegistry {
            runs: Mutex::new(HashMap::new()),
            run_slots: Arc::new(tokio::sync::Semaphore::new(max_runs.max(1))),
            pending_tools: Mutex::new(HashMap::new()),
            pending_approvals: Mutex::new(HashMap::new()),
        }
    }
}

/// The sessions: `sessionKey` -> thread bindings (written to the state dir as they change) and
/// each session's queue (its runs in order).
pub(super) struct SessionBindings {
    pub(super) bindings: Mutex<BindingFile>,
    pub(super) session_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SessionBindings {
    pub(super) fn new(bindings: BindingFile) -> Self {
        SessionBindings {
            bindings: Mutex::new(bindings),
            session_locks: Mutex::new(HashMap::new()),
        }
    }
}

/// The threads runs are using: one run per thread at a time.
#[derive(Default)]
pub(super) struct ThreadBroker {
    busy: Mutex<HashSet<String>>,
}

impl ThreadBroker {
    /// Take `thread` for a run; false when another run has it.
    pub(super) fn claim(&self, thread: &str) -> bool {
        lock(&self.busy).insert(thread.to_string())
    }

    pub(super) fn release(&self, thread: &str) {
        lock(&self.busy).remove(thread);
    }

    /// The threads in use now.
    pub(super) fn busy(&self) -> HashSet<String> {
        lock(&self.busy).clone()
    }
}

/// Shared state of the service.
pub struct Bridge {
    pub(super) config: ServeConfig,
    /// The state database: session bindings and their threads' owners (`serve.db`).
    pub(super) store: Arc<crate::service::store::Store>,
    /// The app-servers runs go to (local children and remote listeners): sticky per thread,
    /// restarted after a crash, recycled past their budget.
    pub(super) pool: Arc<Pool>,
    /// Set by [`super::Running::shutdown`]: new runs are refused.
    pub(super) shutting_down: std::sync::atomic::AtomicBool,
    /// Subscriptions still sending events (shutdown waits for them to deliver the last ones).
    pub(super) subscribers: watch::Sender<usize>,
    /// Every task the service spawns (run turns, the accept loop, connections, the pruner), so
    /// shutdown can cancel them and wait for them instead of leaving them to the runtime.
    pub(super) tasks: tokio_util::task::TaskTracker,
    pub(super) cancel: tokio_util::sync::CancellationToken,
    /// Bounds the translations running on the blocking pool at once.
    pub(super) blocking_slots: Arc<tokio::sync::Semaphore>,
    /// The model-traffic plane (the stub offline, the recording forwarder with `--capture`),
    /// finished on stop.
    pub(super) plane: Mutex<Option<crate::traffic::plane::Plane>>,
    /// The `CODEX_HOME` local app-servers get.
    pub(super) codex_home: PathBuf,
    /// Sessions: their thread bindings (persisted) and their queues.
    pub(super) sessions: SessionBindings,
    /// Runs: the registry, the `--max-runs` places, and what waits on a client's answer.
    pub(super) registry: RunRegistry,
    /// Threads a run is using right now.
    pub(super) threads: ThreadBroker,
    pub(super) roots: Roots,
    pub(super) skill_cache: Arc<SkillCache>,
    /// One serve per state dir, for as long as this one runs (released by [`super::Running::stop`]).
    pub(super) state_lock: Mutex<Option<state::StateLock>>,
    /// `--otel-endpoint`: each run's turn as a trace (finished on stop).
    pub(super) trace: Mutex<Option<Arc<crate::traffic::trace::LiveTrace>>>,
    /// `--transcript` or a trace: the observer of every line to and from the app-servers (its
    /// per-method summary written on stop).
    pub(super) observer: Mutex<Option<crate::observe::tap::ObserverTap>>,
}

impl Bridge {
    /// Keep a session's binding in the state database before the run goes on (a binding that
    /// cannot be kept ends the run with its cause: a thread nobody could find again).
    pub(super) fn keep_binding(
        &self,
        key: &str,
        binding: &state::Binding,
    ) -> Result<(), ErrorObjectOwned> {
        self.store
            .put_thread_now(state::record_of(key, binding))
            .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
    }

    /// A session bound to no thread any more (pushed out past `--max-sessions`).
    pub(super) fn forget_binding(&self, key: &str) {
        self.store.unbind_session(key);
    }

    /// The `CODEX_HOME` local app-servers get.
    pub(super) fn codex_home(&self) -> PathBuf {
        self.codex_home.clone()
    }

    /// An app-server for a run: the member its thread is bound to (`affinity`), else the
    /// least busy one.
    pub(super) async fn lease(
        &self,
        affinity: Option<&str>,
        cwd: &Path,
    ) -> Result<Lease, ErrorObjectOwned> {
        if let CodexBinary::Missing(reason) = &self.config.codex_bin {
            if self.config.remote_app_servers.is_empty() {
                return Err(rpc_error(codes::CODEX_UNAVAILABLE, reason.clone()));
            }
        }
        self.pool
            .lease(affinity, cwd)
            .await
            .map_err(|error| rpc_error(codes::CODEX_UNAVAILABLE, error.to_string()))
    }

    /// Add user input to a run's running turn (`turn/steer`) on the app-server it was leased;
    /// the turn's id.
    pub(super) async fn steer(
        &self,
        state: &RunState,
        text: String,
    ) -> Result<String, ErrorObjectOwned> {
        use crate::codex::protocol::methods::{TurnSteer, TurnSteerParams, TURN_STEER_SINCE};
        use crate::codex::protocol::params::UserInput;
        if state.progress.borrow().1 {
            return Err(rpc_error(
                codes::NOT_FOUND,
                format!("run {} has ended", state.run_id),
            ));
        }
        let (thread_id, turn_id, hub) = running_turn(state)?;
        let version = hub.codex_version.clone().unwrap_or_else(|| "?".to_string());
        let too_old = crate::codex::client::session::parse_semver(&version)
            .is_some_and(|found| found < TURN_STEER_SINCE);
        let no_steer = || {
            rpc_error(
                codes::NOT_A_CODEX_RUN,
                format!(
                    "Codex {version} has no turn/steer (it came with {}.{}.{})",
                    TURN_STEER_SINCE.0, TURN_STEER_SINCE.1, TURN_STEER_SINCE.2
                ),
            )
        };
        if too_old {
            return Err(no_steer());
        }
        let params = TurnSteerParams {
            thread_id,
            expected_turn_id: turn_id,
            input: vec![UserInput::Text {
                text,
                text_elements: Vec::new(),
            }],
        };
        match hub.peer().call::<TurnSteer>(&params).await {
            Ok(result) => Ok(result.turn_id),
            Err(crate::codex::client::peer::PeerError::Rpc { error, .. })
                if error.code == crate::codex::protocol::wire::METHOD_NOT_FOUND =>
            {
                Err(no_steer())
            }
            Err(error) => Err(rpc_error(codes::THREAD_FAILED, error.to_string())),
        }
    }

    /// The session's run whose turn is running now, if any (the one `queue: "steer"` steers).
    pub(super) fn running_turn_of(&self, session_key: &str) -> Option<Arc<RunState>> {
        self.running_runs()
            .into_iter()
            .find(|run| run.session_key == session_key && lock(&run.turn_id).is_some())
    }

    /// Send `turn/interrupt` for a run's turn.
    pub(super) async fn interrupt(&self, state: &RunState) -> Result<(), ErrorObjectOwned> {
        let (thread_id, turn_id, hub) = running_turn(state)?;
        hub.peer()
            .call::<TurnInterrupt>(&TurnInterruptParams { thread_id, turn_id })
            .await
            .map_err(|error| rpc_error(codes::THREAD_FAILED, error.to_string()))?;
        Ok(())
    }

    /// Forget finished runs past the TTL or past the count bound (oldest first), and the session
    /// queues nobody waits in.
    pub(super) fn prune(&self) {
        let now = std::time::Instant::now();
        let ttl = self.config.finished_run_ttl;
        let mut runs = lock(&self.registry.runs);
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
        lock(&self.sessions.session_locks).retain(|_, queue| Arc::strong_count(queue) > 1);
    }

    /// The runs that have not ended.
    /// Runs kept: running, and ended ones not yet pruned.
    pub(super) fn run_count(&self) -> usize {
        lock(&self.registry.runs).len()
    }

    pub(super) fn running_runs(&self) -> Vec<Arc<RunState>> {
        lock(&self.registry.runs)
            .values()
            .filter(|run| !run.progress.borrow().1)
            .cloned()
            .collect()
    }

    /// Run file I/O and parsing on the blocking pool (a bounded number at once), under the
    /// per-request deadline: a stuck file or a slow parse fails this request only, never the
    /// async workers that serve everyone else.
    pub(super) async fn blocking<T: Send + 'static>(
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

    pub(super) fn translate_options(&self) -> TranslateOptions {
        commands::translate_options(
            Some(&self.config.state_dir),
            None,
            Some(Arc::clone(&self.skill_cache)),
        )
    }

    /// Parse a run document sent by a client: the sandbox capped at the ceiling, every path it
    /// names checked against the roots (and again wherever a file is opened).
    pub(super) fn load_run(&self, document: &Value) -> Result<Run, ErrorObjectOwned> {
        let source = Path::new("<request>");
        let base = self.config.workspace_roots[0].clone();
        let mut parsed = RunDocument::from_value(document.clone(), source)
            .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        parsed.sandbox = Some(self.cap_sandbox(parsed.sandbox)?);
        parsed
            .into_run_confined(source, &base, Some(self.roots.clone()))
            .map_err(library_error)
    }

    /// The sandbox a run gets under the ceiling: the ceiling when it names none, a refusal when it
    /// asks for more.
    pub(super) fn cap_sandbox(
        &self,
        asked: Option<SandboxMode>,
    ) -> Result<SandboxMode, ErrorObjectOwned> {
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
    pub(super) fn visible_run(
        &self,
        caller: &Caller,
        run_id: &str,
    ) -> Result<Arc<RunState>, ErrorObjectOwned> {
        lock(&self.registry.runs)
            .get(run_id)
            .filter(|run| caller.may_use(&run.owner))
            .cloned()
            .ok_or_else(|| rpc_error(codes::NOT_FOUND, format!("no run {run_id}")))
    }

    /// True when `caller` may act on the run `run_id` (false for an unknown one).
    pub(super) fn may_use_run(&self, caller: &Caller, run_id: &str) -> bool {
        self.visible_run(caller, run_id).is_ok()
    }

    /// Refuse a session or thread of another client: a bound session is its owner's; a thread
    /// that any run still in the registry used is that run's owner's.
    pub(super) fn check_ownership(
        &self,
        caller: &Caller,
        run: &Run,
    ) -> Result<(), ErrorObjectOwned> {
        if let Some(key) = &run.session_key {
            let owner = lock(&self.sessions.bindings)
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
            let foreign = lock(&self.registry.runs).values().any(|other| {
                !caller.may_use(&other.owner)
                    && lock(&other.thread_id).as_deref() == Some(thread_id.as_str())
            });
            let bound_elsewhere = lock(&self.sessions.bindings)
                .sessions
                .values()
                .any(|binding| {
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
    pub(super) fn approvals_bound(&self) -> bool {
        self.config.max_sandbox < SandboxMode::DangerFullAccess
    }

    /// The ceiling binds approvals too: below `danger-full-access` a run that asks for approvals
    /// (`untrusted`, `on-request`) gets Codex's granular policy that rejects every prompt to leave
    /// the sandbox, so an approving client cannot lift it (docs/threat-model.md).
    pub(super) fn bind_approvals(&self, run: &Run, params: &mut CodexParams) {
        if self.approvals_bound() && run.approval_policy != ApprovalPolicy::Never {
            params.set_approval_policy(AskForApproval::SANDBOX_BOUND);
        }
    }

    /// Claim `thread_id` for one run of `session_key`: allowed when the thread is bound to that
    /// session, or bound to none and not running. Released with [`Bridge::release_thread`].
    pub(super) fn claim_thread(
        &self,
        thread_id: &str,
        session_key: Option<&str>,
    ) -> Result<(), ErrorObjectOwned> {
        let owner = lock(&self.sessions.bindings)
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
        if !self.threads.claim(thread_id) {
            return Err(refused("is in use by another run"));
        }
        Ok(())
    }

    pub(super) fn release_thread(&self, thread_id: &str) {
        self.threads.release(thread_id);
    }
}

/// A run's thread, its turn, and the app-server it was leased (never a later incarnation of its
/// member): what an interrupt or a steer goes to; 4004 when no turn of it is running.
fn running_turn(state: &RunState) -> Result<(String, String, Arc<CodexHub>), ErrorObjectOwned> {
    let ids = (lock(&state.thread_id).clone(), lock(&state.turn_id).clone());
    let (Some(thread_id), Some(turn_id)) = ids else {
        return Err(rpc_error(
            codes::NOT_FOUND,
            format!("run {} has no turn in progress", state.run_id),
        ));
    };
    let hub = lock(&state.hub)
        .clone()
        .ok_or_else(|| rpc_error(codes::NOT_FOUND, "no codex app-server is running"))?;
    Ok((thread_id, turn_id, hub))
}
