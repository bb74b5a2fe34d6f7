//! The bridge service: OpenClaw-side clients drive Codex through clawbridge over JSON-RPC
//! (jsonrpsee; HTTP and WebSocket on one port).
//!
//! Layout: [`ServeConfig`] is the validated command line; [`start`] binds and registers the
//! methods; [`Bridge`] holds the shared state: one [`CodexHub`] (one app-server, many threads,
//! respawned after a crash), session bindings (`sessionKey` -> Codex thread, persisted under the
//! state dir so a restart resumes threads), per-session queues (runs of one session run in order,
//! different sessions in parallel), and each run's event log, which subscribers replay from the
//! start so nothing is missed however late they subscribe.
//!
//! Methods: `bridge.params`, `bridge.context`, `bridge.prompt`, `bridge.runStart`,
//! `bridge.subscribeRun` (notifications `bridge.runEvent`), `bridge.toolResult`,
//! `bridge.approval`, `bridge.runInterrupt`, `bridge.status`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonrpsee::server::{PendingSubscriptionSink, RpcModule, Server, ServerHandle};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, watch};

use crate::codex::handler::DefaultHandler;
use crate::codex::hub::CodexHub;
use crate::codex::params::{dynamic_tools, thread_config, ThreadParams};
use crate::codex::peer::PeerConfig;
use crate::codex::process::SpawnOptions;
use crate::codex::session::{
    HandlerFuture, ServerRequest, ServerRequestHandler, SessionError, TurnEvent, TurnLimits,
    TurnStatus,
};
use crate::config::{Harness, Run, RunDocument};
use crate::offline::{OfflineHome, ResponsesStub, StubScript};
use crate::skills::{HostFacts, SkillCache};
use crate::translate::{translate, TranslateOptions};
use crate::workspace::WarningLedger;

/// Stable error codes of the API.
pub mod codes {
    /// The run document (or another parameter) is invalid; the message names the field.
    pub const INVALID_PARAMS: i32 = -32602;
    /// A path of the run document lies outside every `--workspace-root`.
    pub const PATH_OUTSIDE_ROOTS: i32 = 4001;
    /// No such run, tool call or approval.
    pub const NOT_FOUND: i32 = 4004;
    /// The run cannot be executed by Codex (e.g. `"harness": "embedded"`).
    pub const NOT_A_CODEX_RUN: i32 = 4009;
    /// Codex could not be started or the handshake failed.
    pub const CODEX_UNAVAILABLE: i32 = 4100;
    /// Codex refused the thread.
    pub const THREAD_FAILED: i32 = 4200;
    /// An internal failure (state file, serialization).
    pub const INTERNAL: i32 = -32603;
}

fn rpc_error(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message.into(), None::<()>)
}

/// Validated `clawbridge serve` settings.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub token: Option<String>,
    /// Canonical workspace roots; run paths must lie under one of them.
    pub workspace_roots: Vec<PathBuf>,
    pub codex_bin: PathBuf,
    pub codex_home: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub offline: bool,
    pub stub_script: StubScript,
    pub limits: TurnLimits,
    /// How long a dynamic tool call or approval waits for the client's answer.
    pub answer_timeout: Duration,
    pub max_request_bytes: u32,
}

/// Why the service cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on {0} without --token: a non-loopback address needs a bearer token"
    )]
    NonLoopbackWithoutToken(SocketAddr),
    #[error("--workspace-root {}: {message}", path.display())]
    BadRoot { path: PathBuf, message: String },
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: SocketAddr, message: String },
    #[error(transparent)]
    Setup(#[from] crate::Error),
}

impl ServeConfig {
    /// Check the settings: loopback or a token; roots that exist (canonicalized).
    pub fn validate(mut self) -> Result<Self, ServeError> {
        if !self.listen.ip().is_loopback() && self.token.as_deref().is_none_or(str::is_empty) {
            return Err(ServeError::NonLoopbackWithoutToken(self.listen));
        }
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
        Ok(self)
    }
}

/// `sessionKey` -> thread binding, persisted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    pub thread_id: String,
    pub fingerprint: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct BindingFile {
    sessions: BTreeMap<String, Binding>,
}

/// One run's state and event log.
struct RunState {
    run_id: String,
    session_key: String,
    thread_id: Mutex<Option<String>>,
    turn_id: Mutex<Option<String>>,
    events: Mutex<Vec<Value>>,
    /// Number of events logged; `usize::MAX` once the run ended.
    progress: watch::Sender<(usize, bool)>,
}

impl RunState {
    fn push(&self, event: Value) {
        let count = {
            let mut events = lock(&self.events);
            events.push(event);
            events.len()
        };
        self.progress.send_modify(|state| state.0 = count);
    }

    fn finish(&self, event: Value) {
        self.push(event);
        self.progress.send_modify(|state| state.1 = true);
    }
}

struct PendingCall {
    run_id: String,
    answer: oneshot::Sender<Value>,
}

/// Shared state of the service.
pub struct Bridge {
    config: ServeConfig,
    hub: tokio::sync::Mutex<Option<Arc<CodexHub>>>,
    offline: Option<(ResponsesStub, OfflineHome)>,
    bindings: Mutex<BindingFile>,
    session_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    runs: Mutex<HashMap<String, Arc<RunState>>>,
    pending_tools: Mutex<HashMap<String, PendingCall>>,
    pending_approvals: Mutex<HashMap<String, oneshot::Sender<bool>>>,
    next_run: AtomicU64,
    skill_cache: Arc<SkillCache>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Bridge {
    fn bindings_path(&self) -> PathBuf {
        self.config.state_dir.join("sessions.json")
    }

    fn save_bindings(&self) -> Result<(), ErrorObjectOwned> {
        let text = {
            let bindings = lock(&self.bindings);
            serde_json::to_string_pretty(&*bindings).unwrap_or_default() + "\n"
        };
        crate::fsutil::write_atomic(&self.bindings_path(), text.as_bytes())
            .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
    }

    /// The live hub, starting one if there is none or the last one died.
    async fn hub(&self, cwd: &Path) -> Result<Arc<CodexHub>, ErrorObjectOwned> {
        let mut guard = self.hub.lock().await;
        if let Some(hub) = guard.as_ref().filter(|hub| hub.is_alive()) {
            return Ok(Arc::clone(hub));
        }
        let codex_home = match (&self.offline, &self.config.codex_home) {
            (Some((_, home)), _) => home.path.clone(),
            (None, Some(home)) => home.clone(),
            (None, None) => std::env::var_os("CODEX_HOME")
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
                .or_else(|| dirs::home_dir().map(|home| home.join(".codex")))
                .unwrap_or_else(|| PathBuf::from(".codex")),
        };
        let spawn = SpawnOptions {
            binary: self.config.codex_bin.clone(),
            codex_home,
            cwd: cwd.to_path_buf(),
            isolate_environment: self.config.offline,
        };
        let hub = CodexHub::spawn(&spawn, PeerConfig::default(), Duration::from_secs(20))
            .await
            .map_err(|error| rpc_error(codes::CODEX_UNAVAILABLE, error.to_string()))?;
        tracing::info!(
            "codex app-server {} started",
            hub.codex_version.as_deref().unwrap_or("?")
        );
        *guard = Some(Arc::clone(&hub));
        Ok(hub)
    }

    fn translate_options(&self) -> TranslateOptions {
        TranslateOptions {
            host: HostFacts::from_process(),
            ledger: WarningLedger::in_dir(&self.config.state_dir),
            skill_cache: Some(Arc::clone(&self.skill_cache)),
            bootstrap_hook: None,
        }
    }

    /// Parse a run document sent by a client and check its paths against the roots.
    fn load_run(&self, params: &Value) -> Result<Run, ErrorObjectOwned> {
        let document = params
            .get("run")
            .filter(|_| params.get("workspace").is_none())
            .unwrap_or(params);
        let text = document.to_string();
        let source = Path::new("<request>");
        let base = self.config.workspace_roots[0].clone();
        let parsed = RunDocument::parse(&text, source)
            .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        // Tool catalog files named by path must lie under a root too.
        for (index, item) in parsed.tools.iter().enumerate() {
            if let Some(file) = item.as_str() {
                self.check_path(&base.join(file), &format!("tools[{index}]"))?;
            }
        }
        let run = parsed
            .into_run(source, &base)
            .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        self.check_path(&run.workspace, "workspace")?;
        self.check_path(&run.cwd, "cwd")?;
        self.check_path(&run.memory_workspace, "memoryWorkspace")?;
        Ok(run)
    }

    fn check_path(&self, path: &Path, field: &str) -> Result<(), ErrorObjectOwned> {
        let real = path
            .canonicalize()
            .unwrap_or_else(|_| crate::config::run::normalize(path));
        if self
            .config
            .workspace_roots
            .iter()
            .any(|root| real.starts_with(root))
        {
            Ok(())
        } else {
            Err(rpc_error(
                codes::PATH_OUTSIDE_ROOTS,
                format!(
                    "field `{field}`: {} is outside every --workspace-root",
                    path.display()
                ),
            ))
        }
    }
}

/// What reuses a thread: tools (without descriptions), thread config, model and developer text.
pub fn thread_fingerprint(run: &Run, developer_instructions: &str) -> String {
    let (tools, _) = dynamic_tools(run);
    let mut specs: Vec<String> = serde_json::to_value(&tools)
        .ok()
        .and_then(|value| value.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|mut spec| {
            strip_descriptions(&mut spec);
            spec.to_string()
        })
        .collect();
    specs.sort();
    let fingerprint = json!({
        "tools": specs,
        "config": thread_config(run),
        "model": run.model,
        "developerInstructions": hex(&Sha256::digest(developer_instructions.as_bytes())),
    });
    hex(&Sha256::digest(fingerprint.to_string().as_bytes()))
}

fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Answers a run's server requests through the API clients.
struct BridgeHandler {
    bridge: Arc<Bridge>,
    run: Arc<RunState>,
}

impl ServerRequestHandler for BridgeHandler {
    fn handle<'a>(&'a self, request: &'a ServerRequest) -> HandlerFuture<'a> {
        Box::pin(async move {
            let timeout = self.bridge.config.answer_timeout;
            match request.method.as_str() {
                "item/tool/call" => {
                    let call_id = request.params["callId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let tool = request.params["tool"]
                        .as_str()
                        .unwrap_or("<unnamed>")
                        .to_string();
                    let (answer, receiver) = oneshot::channel();
                    lock(&self.bridge.pending_tools).insert(
                        call_id.clone(),
                        PendingCall {
                            run_id: self.run.run_id.clone(),
                            answer,
                        },
                    );
                    self.run.push(json!({"event": "toolCall", "callId": call_id, "tool": tool,
                        "namespace": request.params["namespace"], "arguments": request.params["arguments"]}));
                    let result = match tokio::time::timeout(timeout, receiver).await {
                        Ok(Ok(answer)) => answer,
                        _ => {
                            lock(&self.bridge.pending_tools).remove(&call_id);
                            json!({"contentItems": [{"type": "inputText", "text": format!("The tool `{tool}` got no answer from OpenClaw within {timeout:?}.")}], "success": false})
                        }
                    };
                    Ok(result)
                }
                method if method.ends_with("Approval") || method.ends_with("requestApproval") => {
                    let approval_id = format!("{}:{}", self.run.run_id, request.id);
                    let (answer, receiver) = oneshot::channel();
                    lock(&self.bridge.pending_approvals).insert(approval_id.clone(), answer);
                    self.run.push(json!({"event": "approvalRequest", "approvalId": approval_id, "method": method, "params": request.params}));
                    let approve = tokio::time::timeout(timeout, receiver)
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or(false);
                    lock(&self.bridge.pending_approvals).remove(&approval_id);
                    DefaultHandler {
                        tool_command: None,
                        approve,
                        tool_timeout: None,
                    }
                    .handle(request)
                    .await
                }
                _ => DefaultHandler::default().handle(request).await,
            }
        })
    }
}

fn event_json(event: &TurnEvent<'_>) -> Option<Value> {
    match event {
        TurnEvent::Notification { method, params } => {
            Some(json!({"event": "notification", "method": method, "params": params}))
        }
        TurnEvent::ServerRequest { .. } | TurnEvent::Answered { .. } => None,
    }
}

async fn run_start(bridge: Arc<Bridge>, params: Value) -> Result<Value, ErrorObjectOwned> {
    let mut run = bridge.load_run(&params)?;
    if run.harness != Harness::Codex {
        return Err(rpc_error(
            codes::NOT_A_CODEX_RUN,
            "field `harness`: only Codex runs can be started",
        ));
    }
    let run_id = format!("run-{}", bridge.next_run.fetch_add(1, Ordering::SeqCst) + 1);
    let session_key = run
        .session_key
        .clone()
        .unwrap_or_else(|| format!("clawbridge:{run_id}"));
    let (progress, _) = watch::channel((0usize, false));
    let state = Arc::new(RunState {
        run_id: run_id.clone(),
        session_key: session_key.clone(),
        thread_id: Mutex::new(None),
        turn_id: Mutex::new(None),
        events: Mutex::new(Vec::new()),
        progress,
    });
    lock(&bridge.runs).insert(run_id.clone(), Arc::clone(&state));
    // Runs of one session are queued in order.
    let session_lock = Arc::clone(
        lock(&bridge.session_locks)
            .entry(session_key.clone())
            .or_default(),
    );
    let queue_guard = session_lock.lock_owned().await;

    let options = bridge.translate_options();
    let fail = |state: &RunState, code: i32, message: String| {
        state.finish(json!({"event": "turnEnd", "status": "failed", "error": message}));
        rpc_error(code, message)
    };
    let translation = translate(&run, &options)
        .map_err(|error| fail(&state, codes::INVALID_PARAMS, error.to_string()))?;
    let developer = translation.codex_params(&run);
    let developer_text = match &developer.thread {
        ThreadParams::ThreadStart(start) => start.developer_instructions.clone(),
        ThreadParams::ThreadResume(resume) => resume.developer_instructions.clone(),
    };
    let fingerprint = thread_fingerprint(&run, &developer_text);
    let bound = run
        .session_key
        .as_ref()
        .and_then(|key| lock(&bridge.bindings).sessions.get(key).cloned());
    if run.thread_id.is_none() {
        if let Some(binding) = bound.filter(|binding| binding.fingerprint == fingerprint) {
            run.thread_id = Some(binding.thread_id);
        }
    }
    let hub = bridge
        .hub(&run.cwd)
        .await
        .map_err(|error| fail(&state, error.code(), error.message().to_string()))?;
    let mut params = translation.codex_params(&run);
    let handle = match hub.open_thread(&params.thread).await {
        Ok(handle) => handle,
        Err(SessionError::Peer(error)) if run.thread_id.is_some() => {
            tracing::warn!(
                "resume of {:?} failed ({error}); starting a new thread",
                run.thread_id
            );
            run.thread_id = None;
            params = translation.codex_params(&run);
            hub.open_thread(&params.thread)
                .await
                .map_err(|error| fail(&state, codes::THREAD_FAILED, error.to_string()))?
        }
        Err(error) => return Err(fail(&state, codes::THREAD_FAILED, error.to_string())),
    };
    let thread_id = handle.thread_id.clone();
    *lock(&state.thread_id) = Some(thread_id.clone());
    if let Some(key) = &run.session_key {
        lock(&bridge.bindings).sessions.insert(
            key.clone(),
            Binding {
                thread_id: thread_id.clone(),
                fingerprint,
            },
        );
        bridge.save_bindings()?;
    }
    state.push(json!({"event": "thread", "threadId": thread_id, "resumed": matches!(params.thread, ThreadParams::ThreadResume(_))}));

    let task_bridge = Arc::clone(&bridge);
    let task_state = Arc::clone(&state);
    let limits = bridge.config.limits;
    tokio::spawn(async move {
        let _queue = queue_guard;
        let mut handle = handle;
        let handler = BridgeHandler {
            bridge: Arc::clone(&task_bridge),
            run: Arc::clone(&task_state),
        };
        let observer_state = Arc::clone(&task_state);
        let mut observer = move |event: TurnEvent<'_>| {
            if let TurnEvent::Notification {
                method: "turn/started",
                params,
            } = &event
            {
                if let Some(turn_id) = params["turn"]["id"].as_str() {
                    *lock(&observer_state.turn_id) = Some(turn_id.to_string());
                }
            }
            if let Some(value) = event_json(&event) {
                observer_state.push(value);
            }
        };
        let result = hub
            .run_turn(
                &mut handle,
                &params.turn_start,
                &handler,
                &mut observer,
                limits,
            )
            .await;
        let end = match result {
            Ok(outcome) => json!({"event": "turnEnd", "status": match outcome.status {
                    TurnStatus::Completed => "completed", TurnStatus::Failed => "failed", TurnStatus::Interrupted => "interrupted" },
                "threadId": outcome.thread_id, "turnId": outcome.turn_id, "error": outcome.error, "agentMessages": outcome.agent_messages}),
            Err(error) => {
                json!({"event": "turnEnd", "status": "failed", "threadId": handle.thread_id, "error": error.to_string()})
            }
        };
        // Tool calls of this run that nobody answered are dropped with it.
        lock(&task_bridge.pending_tools).retain(|_, call| call.run_id != task_state.run_id);
        task_state.finish(end);
    });
    Ok(json!({"runId": run_id, "threadId": thread_id}))
}

async fn subscribe_run(
    bridge: Arc<Bridge>,
    params: Params<'static>,
    pending: PendingSubscriptionSink,
) -> Result<(), jsonrpsee::core::SubscriptionError> {
    let run_id: String = match params.one::<String>() {
        Ok(id) => id,
        Err(_) => match params.parse::<Value>() {
            Ok(value) => value["runId"].as_str().unwrap_or_default().to_string(),
            Err(error) => {
                pending.reject(error).await;
                return Ok(());
            }
        },
    };
    let Some(state) = lock(&bridge.runs).get(&run_id).cloned() else {
        pending
            .reject(rpc_error(codes::NOT_FOUND, format!("no run {run_id}")))
            .await;
        return Ok(());
    };
    let sink = pending.accept().await?;
    let mut progress = state.progress.subscribe();
    let mut sent = 0usize;
    loop {
        let (count, done) = *progress.borrow_and_update();
        let batch: Vec<Value> = lock(&state.events)[sent..count].to_vec();
        for event in batch {
            let raw = serde_json::value::to_raw_value(&event)?;
            sink.send(raw).await?;
            sent += 1;
        }
        if done && sent >= count {
            return Ok(());
        }
        if progress.changed().await.is_err() {
            return Ok(());
        }
    }
}

fn object_param(params: &Params<'_>) -> Result<Value, ErrorObjectOwned> {
    let value: Value = params
        .parse()
        .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
    match value {
        Value::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
        other => Ok(other),
    }
}

fn module(bridge: Arc<Bridge>) -> Result<RpcModule<Bridge>, jsonrpsee::core::RegisterMethodError> {
    let mut module = RpcModule::from_arc(bridge);
    module.register_async_method("bridge.params", |params, bridge, _| async move {
        let value = object_param(&params)?;
        let run = bridge.load_run(&value)?;
        if run.harness != Harness::Codex {
            return Err(rpc_error(
                codes::NOT_A_CODEX_RUN,
                "field `harness`: embedded runs have no Codex params",
            ));
        }
        let translation = translate(&run, &bridge.translate_options())
            .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        serde_json::to_value(translation.codex_params(&run))
            .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
    })?;
    module.register_async_method("bridge.context", |params, bridge, _| async move {
        let value = object_param(&params)?;
        let run = bridge.load_run(&value)?;
        let detail = value
            .get("detail")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let translation = translate(&run, &bridge.translate_options())
            .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        serde_json::to_value(crate::context::context_report(&run, &translation, detail))
            .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
    })?;
    module.register_async_method("bridge.prompt", |params, bridge, _| async move {
        use crate::prompt::adapter::{render_for_run, HostRuntime, PromptOptions};
        let value = object_param(&params)?;
        let mut run = bridge.load_run(&value)?;
        run.harness = Harness::Embedded;
        let mode = match value.get("mode").and_then(Value::as_str) {
            Some("minimal") => Some(crate::config::PromptMode::Minimal),
            Some("none") => Some(crate::config::PromptMode::None),
            Some("full") => Some(crate::config::PromptMode::Full),
            Some(other) => return Err(rpc_error(codes::INVALID_PARAMS, format!("field `mode`: unknown mode `{other}`"))),
            None => None,
        };
        let translation = translate(&run, &bridge.translate_options()).map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
        let prompt = render_for_run(&run, &translation, &PromptOptions { mode, host: HostRuntime::from_process(), detect_repo_root: true, ..PromptOptions::default() });
        Ok::<_, ErrorObjectOwned>(json!({"stablePrefix": prompt.stable_prefix, "dynamicSuffix": prompt.dynamic_suffix, "text": prompt.text()}))
    })?;
    module.register_async_method("bridge.runStart", |params, bridge, _| async move {
        let value = object_param(&params)?;
        run_start(bridge, value).await
    })?;
    module.register_subscription(
        "bridge.subscribeRun",
        "bridge.runEvent",
        "bridge.unsubscribeRun",
        |params, pending, bridge, _| async move { subscribe_run(bridge, params, pending).await },
    )?;
    module.register_async_method("bridge.toolResult", |params, bridge, _| async move {
        let value = object_param(&params)?;
        let call_id = value["callId"]
            .as_str()
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "field `callId`: required"))?;
        let answer = crate::codex::handler::tool_answer_from_output(value.to_string().as_bytes())
            .map_err(|why| {
            rpc_error(
                codes::INVALID_PARAMS,
                why.replace("the tool handler's answer", "the tool result"),
            )
        })?;
        let pending = lock(&bridge.pending_tools).remove(call_id).ok_or_else(|| {
            rpc_error(codes::NOT_FOUND, format!("no pending tool call {call_id}"))
        })?;
        let _ = pending.answer.send(answer);
        Ok::<_, ErrorObjectOwned>(json!({"ok": true}))
    })?;
    module.register_async_method("bridge.approval", |params, bridge, _| async move {
        let value = object_param(&params)?;
        let approval_id = value["approvalId"]
            .as_str()
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "field `approvalId`: required"))?;
        let approve = match value["decision"].as_str() {
            Some("accept") => true,
            Some("decline") => false,
            _ => {
                return Err(rpc_error(
                    codes::INVALID_PARAMS,
                    "field `decision`: accept or decline",
                ))
            }
        };
        let pending = lock(&bridge.pending_approvals)
            .remove(approval_id)
            .ok_or_else(|| {
                rpc_error(
                    codes::NOT_FOUND,
                    format!("no pending approval {approval_id}"),
                )
            })?;
        let _ = pending.send(approve);
        Ok(json!({"ok": true}))
    })?;
    module.register_async_method("bridge.runInterrupt", |params, bridge, _| async move {
        let value = object_param(&params)?;
        let run_id = value
            .as_str()
            .or_else(|| value["runId"].as_str())
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "field `runId`: required"))?
            .to_string();
        let state = lock(&bridge.runs)
            .get(&run_id)
            .cloned()
            .ok_or_else(|| rpc_error(codes::NOT_FOUND, format!("no run {run_id}")))?;
        let ids = (lock(&state.thread_id).clone(), lock(&state.turn_id).clone());
        let (Some(thread_id), Some(turn_id)) = ids else {
            return Err(rpc_error(
                codes::NOT_FOUND,
                format!("run {run_id} has no turn in progress"),
            ));
        };
        let hub = bridge
            .hub
            .lock()
            .await
            .clone()
            .ok_or_else(|| rpc_error(codes::NOT_FOUND, "no codex app-server is running"))?;
        hub.peer()
            .request::<_, Value>(
                "turn/interrupt",
                &json!({"threadId": thread_id, "turnId": turn_id}),
            )
            .await
            .map_err(|error| rpc_error(codes::THREAD_FAILED, error.to_string()))?;
        Ok(json!({"ok": true}))
    })?;
    module.register_async_method("bridge.status", |_, bridge, _| async move {
        let hub = bridge.hub.lock().await.clone();
        let runs: Vec<Value> = lock(&bridge.runs)
            .values()
            .map(|run| {
                let (_, done) = *run.progress.borrow();
                json!({"runId": run.run_id, "sessionKey": run.session_key, "threadId": *lock(&run.thread_id), "state": if done { "ended" } else { "running" }})
            })
            .collect();
        Ok::<_, ErrorObjectOwned>(json!({
            "codex": hub.as_ref().map(|hub| json!({"alive": hub.is_alive(), "version": hub.codex_version, "pid": hub.pid,
                "activeThreads": hub.active_threads(), "pendingRequests": hub.pending_requests()})),
            "sessions": lock(&bridge.bindings).sessions.len(),
            "runs": runs,
            "pendingToolCalls": lock(&bridge.pending_tools).len(),
            "pendingApprovals": lock(&bridge.pending_approvals).len(),
        }))
    })?;
    Ok(module)
}

/// A running service.
pub struct Running {
    pub handle: ServerHandle,
    pub addr: SocketAddr,
    pub bridge: Arc<Bridge>,
}

impl Running {
    /// Bodies of the model requests the offline stub received (tests, diagnostics).
    pub fn bridge_requests(&self) -> Vec<String> {
        self.bridge
            .offline
            .as_ref()
            .map(|(stub, _)| {
                stub.requests()
                    .iter()
                    .map(|request| request.body.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Bind, register the methods and start serving.
pub async fn start(config: ServeConfig) -> Result<Running, ServeError> {
    let config = config.validate()?;
    let offline = if config.offline {
        let stub = ResponsesStub::start(config.stub_script.clone()).await?;
        let home = OfflineHome::prepare(
            config.codex_home.as_deref(),
            &stub.base_url(),
            "gpt-5.5",
            dirs::home_dir().as_deref(),
        )?;
        Some((stub, home))
    } else {
        None
    };
    let bindings: BindingFile = std::fs::read_to_string(config.state_dir.join("sessions.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let bridge = Arc::new(Bridge {
        hub: tokio::sync::Mutex::new(None),
        offline,
        bindings: Mutex::new(bindings),
        session_locks: Mutex::new(HashMap::new()),
        runs: Mutex::new(HashMap::new()),
        pending_tools: Mutex::new(HashMap::new()),
        pending_approvals: Mutex::new(HashMap::new()),
        next_run: AtomicU64::new(0),
        skill_cache: Arc::new(SkillCache::default()),
        config: config.clone(),
    });
    let auth = config
        .token
        .as_deref()
        .filter(|token| !token.is_empty())
        .map(|token| {
            #[allow(deprecated)]
            tower_http::validate_request::ValidateRequestHeaderLayer::bearer(token)
        });
    let middleware = tower::ServiceBuilder::new().option_layer(auth);
    let server_config = jsonrpsee::server::ServerConfig::builder()
        .max_request_body_size(config.max_request_bytes)
        .max_response_body_size(64 * 1024 * 1024)
        .build();
    let server = Server::builder()
        .set_config(server_config)
        .set_http_middleware(middleware)
        .build(config.listen)
        .await
        .map_err(|error| ServeError::Bind {
            addr: config.listen,
            message: error.to_string(),
        })?;
    let addr = server.local_addr().map_err(|error| ServeError::Bind {
        addr: config.listen,
        message: error.to_string(),
    })?;
    let methods = module(Arc::clone(&bridge)).map_err(|error| ServeError::Bind {
        addr,
        message: error.to_string(),
    })?;
    let handle = server.start(methods);
    Ok(Running {
        handle,
        addr,
        bridge,
    })
}
