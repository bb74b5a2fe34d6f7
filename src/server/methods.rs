//! The bridge methods' handlers and their registration (`module`), the event subscription and
//! the params helpers every handler uses.

use super::api;
use super::bridge::Bridge;
use super::errors::codes;
use super::errors::library_error;
use super::errors::rpc_error;
use super::params::{run_request, typed};
use super::run_start::run_start;
use super::settings::CodexBinary;
use crate::app::commands;
use crate::app::events::RunEvent;
use crate::codex::protocol::params::CodexParams;
use crate::service::guard::Caller;
use crate::support::sync::lock;
use api::CarriesRun as _;
use jsonrpsee::server::{PendingSubscriptionSink, RpcModule};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Counts a subscription while it sends (shutdown waits for the count to reach zero).
struct ActiveSubscriber<'a>(&'a watch::Sender<usize>);

impl<'a> ActiveSubscriber<'a> {
    fn new(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|active| *active += 1);
        Self(count)
    }
}

impl Drop for ActiveSubscriber<'_> {
    fn drop(&mut self) {
        self.0
            .send_modify(|active| *active = active.saturating_sub(1));
    }
}

pub(super) async fn subscribe_run(
    bridge: Arc<Bridge>,
    caller: Caller,
    run: api::RunRef,
    pending: PendingSubscriptionSink,
) -> Result<(), jsonrpsee::core::SubscriptionError> {
    let run_id = run.into_id();
    let state = match bridge.visible_run(&caller, &run_id) {
        Ok(state) => state,
        Err(error) => {
            pending.reject(error).await;
            return Ok(());
        }
    };
    let sink = pending.accept().await?;
    let _active = ActiveSubscriber::new(&bridge.subscribers);
    let mut progress = state.progress.subscribe();
    let mut sent = 0usize;
    loop {
        let (count, done) = *progress.borrow_and_update();
        let (missed, batch) = {
            let log = lock(&state.events);
            let missed = log.first.saturating_sub(sent);
            let start = sent.max(log.first) - log.first;
            let end = count.saturating_sub(log.first).min(log.events.len());
            let batch: Vec<_> = log.events.range(start..end.max(start)).cloned().collect();
            (missed, batch)
        };
        if missed > 0 {
            let marker = RunEvent::EventsDropped { count: missed }.to_value();
            send_or_drop(
                &sink,
                serde_json::value::to_raw_value(&marker)?,
                &run_id,
                bridge.config.subscriber_stall,
            )
            .await?;
            sent += missed;
        }
        for event in batch {
            // The log holds validated JSON: copy it, do not parse it again per subscriber.
            send_or_drop(
                &sink,
                (*event).to_owned(),
                &run_id,
                bridge.config.subscriber_stall,
            )
            .await?;
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

/// Send one event to a subscriber whose queue (bounded per connection) has room within
/// `stall` (`--subscriber-stall`); one that reads nothing for that long is dropped, so it holds no more
/// than its queue. It can subscribe again: the run's log replays.
pub(super) async fn send_or_drop(
    sink: &jsonrpsee::SubscriptionSink,
    event: Box<serde_json::value::RawValue>,
    run_id: &str,
    stall: Duration,
) -> Result<(), jsonrpsee::core::SubscriptionError> {
    match sink.send_timeout(event, stall).await {
        Ok(()) => Ok(()),
        Err(jsonrpsee::server::SendTimeoutError::Timeout(_)) => {
            tracing::warn!("a subscriber of {run_id} read nothing for {stall:?}; dropped it");
            Err("subscriber too slow: dropped (subscribe again to replay the run)".into())
        }
        Err(jsonrpsee::server::SendTimeoutError::Closed(_)) => {
            Err("the subscriber went away".into())
        }
    }
}

/// The caller the guard identified (the operator when there are no tokens: `--no-auth`).
pub(super) fn caller_of(extensions: &jsonrpsee::Extensions) -> Caller {
    extensions
        .get::<Caller>()
        .cloned()
        .unwrap_or_else(Caller::operator)
}

/// A run-document method's params as text, refused past `--max-run-bytes` before anything
/// parses them; [`super::params::object_param`] then runs on the blocking pool.
pub(super) fn bounded_params(
    bridge: &Bridge,
    params: &Params<'_>,
) -> Result<String, ErrorObjectOwned> {
    let text = params.as_str().unwrap_or("null");
    let limit = bridge.config.max_run_bytes;
    if text.len() > limit {
        return Err(rpc_error(
            codes::INVALID_PARAMS,
            format!(
                "the run document is {} bytes, more than this server takes ({limit}, --max-run-bytes)",
                text.len()
            ),
        ));
    }
    Ok(text.to_string())
}

/// The bridge API's one table: each method type (`api`) with how its params arrive and its
/// handler. It registers every handler (`module`) and describes every method (`descriptions`,
/// the OpenRPC document), so a method cannot be served without being described or the reverse.
///
/// How params arrive: `typed` parses them into the method's params type (errors name the field);
/// `bounded` hands the raw text over once it is within `--max-run-bytes`, for the handler to
/// parse on the blocking pool; `subscription` is a jsonrpsee subscription whose end is the
/// `unsubscription` entry.
macro_rules! bridge_api {
    ($($register:ident $method:ty $(=> $handler:expr)?;)*) => {
        pub(super) fn module(
            bridge: Arc<Bridge>,
        ) -> Result<RpcModule<Bridge>, jsonrpsee::core::RegisterMethodError> {
            let mut module = RpcModule::from_arc(bridge);
            $( bridge_api!(@register module, $register, $method $(, $handler)?); )*
            Ok(module)
        }

        /// Every method of the table, described, in its order.
        pub(super) fn descriptions(generator: &mut schemars::SchemaGenerator) -> Vec<Value> {
            vec![$( api::describe::<$method>(generator) ),*]
        }
    };
    (@register $module:ident, typed, $method:ty, $handler:expr) => {
        register::typed::<$method, _, _>(&mut $module, $handler)?;
    };
    (@register $module:ident, bounded, $method:ty, $handler:expr) => {
        register::bounded::<$method, _, _>(&mut $module, $handler)?;
    };
    (@register $module:ident, subscription, $method:ty, $handler:expr) => {
        register::subscription::<$method, api::UnsubscribeRunMethod, _, _>(&mut $module, $handler)?;
    };
    (@register $module:ident, unsubscription, $method:ty) => {};
}

bridge_api! {
    bounded api::ParamsMethod => params;
    bounded api::ContextMethod => context;
    bounded api::PromptMethod => prompt;
    bounded api::RunStartMethod => run_start;
    subscription api::SubscribeRunMethod => subscribe_run;
    unsubscription api::UnsubscribeRunMethod;
    typed api::ToolResultMethod => tool_result;
    typed api::ApprovalMethod => approval;
    typed api::RunInterruptMethod => run_interrupt;
    typed api::RunSteerMethod => run_steer;
    typed api::StatusMethod => status;
    typed api::DiscoverMethod => discover;
}

/// How each kind of table entry is registered.
mod register {
    use std::future::Future;

    use super::*;
    use api::BridgeMethod;

    type Registered = Result<(), jsonrpsee::core::RegisterMethodError>;

    pub(super) fn typed<M, F, Fut>(module: &mut RpcModule<Bridge>, handler: F) -> Registered
    where
        M: BridgeMethod,
        F: Fn(Arc<Bridge>, Caller, M::Params) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Result, ErrorObjectOwned>> + Send + 'static,
    {
        module.register_async_method(M::NAME, move |params, bridge, extensions| {
            let handler = handler.clone();
            async move {
                let params = super::typed::<M::Params>(&params)?;
                handler(bridge, caller_of(&extensions), params).await
            }
        })?;
        Ok(())
    }

    pub(super) fn bounded<M, F, Fut>(module: &mut RpcModule<Bridge>, handler: F) -> Registered
    where
        M: BridgeMethod,
        F: Fn(Arc<Bridge>, Caller, String) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Result, ErrorObjectOwned>> + Send + 'static,
    {
        module.register_async_method(M::NAME, move |params, bridge, extensions| {
            let handler = handler.clone();
            async move {
                let text = bounded_params(&bridge, &params)?;
                handler(bridge, caller_of(&extensions), text).await
            }
        })?;
        Ok(())
    }

    pub(super) fn subscription<M, U, F, Fut>(
        module: &mut RpcModule<Bridge>,
        handler: F,
    ) -> Registered
    where
        M: BridgeMethod,
        U: BridgeMethod,
        F: Fn(Arc<Bridge>, Caller, M::Params, PendingSubscriptionSink) -> Fut
            + Clone
            + Send
            + Sync
            + 'static,
        Fut: Future<Output = Result<(), jsonrpsee::core::SubscriptionError>> + Send + 'static,
    {
        module.register_subscription(
            M::NAME,
            api::RUN_EVENT_NOTIFICATION,
            U::NAME,
            move |params, pending, bridge, extensions| {
                let handler = handler.clone();
                async move {
                    match super::typed::<M::Params>(&params) {
                        Ok(params) => {
                            handler(bridge, caller_of(&extensions), params, pending).await
                        }
                        Err(error) => {
                            pending.reject(error).await;
                            Ok(())
                        }
                    }
                }
            },
        )?;
        Ok(())
    }
}

async fn params(
    bridge: Arc<Bridge>,
    _: Caller,
    text: String,
) -> Result<CodexParams, ErrorObjectOwned> {
    bridge
        .blocking(move |bridge| {
            let request: api::RunRequest = run_request(&text)?;
            let run = bridge.load_run(request.document())?;
            let mut params =
                commands::params(&run, &bridge.translate_options()).map_err(library_error)?;
            bridge.bind_approvals(&run, &mut params);
            Ok(params)
        })
        .await
}

async fn context(
    bridge: Arc<Bridge>,
    _: Caller,
    text: String,
) -> Result<crate::app::context::ContextReport, ErrorObjectOwned> {
    bridge
        .blocking(move |bridge| {
            let request: api::RunRequest = run_request(&text)?;
            let run = bridge.load_run(request.document())?;
            commands::context(
                &run,
                &bridge.translate_options(),
                request.detail.unwrap_or(false),
            )
            .map_err(library_error)
        })
        .await
}

async fn prompt(
    bridge: Arc<Bridge>,
    _: Caller,
    text: String,
) -> Result<api::PromptAnswer, ErrorObjectOwned> {
    let prompt = bridge
        .blocking(move |bridge| {
            let request: api::PromptRequest = run_request(&text)?;
            let settings = commands::PromptSettings {
                mode: request.mode,
                provider: None,
                cache_boundary: request.cache_boundary.unwrap_or(true),
                // A command to run is the operator's choice, never a client's.
                before_prompt_build: None,
            };
            let run = bridge.load_run(request.document())?;
            commands::prompt(&run, &bridge.translate_options(), &settings).map_err(library_error)
        })
        .await?;
    Ok(api::PromptAnswer {
        text: prompt.text(),
        stable_prefix: prompt.stable_prefix,
        dynamic_suffix: prompt.dynamic_suffix,
    })
}

async fn tool_result(
    bridge: Arc<Bridge>,
    caller: Caller,
    result: api::ToolResultParams,
) -> Result<api::Acknowledged, ErrorObjectOwned> {
    let call_id = result.call_id.as_str();
    let answer = result
        .answer()
        .map_err(|why| rpc_error(codes::INVALID_PARAMS, format!("the tool result {why}")))?;
    let not_found = || rpc_error(codes::NOT_FOUND, format!("no pending tool call {call_id}"));
    let run_id = lock(&bridge.registry.pending_tools)
        .get(call_id)
        .map(|pending| pending.run_id.clone())
        .ok_or_else(not_found)?;
    if !bridge.may_use_run(&caller, &run_id) {
        return Err(not_found());
    }
    let pending = lock(&bridge.registry.pending_tools)
        .remove(call_id)
        .ok_or_else(not_found)?;
    let _ = pending.answer.send(answer);
    Ok(api::Acknowledged { ok: true })
}

async fn approval(
    bridge: Arc<Bridge>,
    caller: Caller,
    answer: api::ApprovalParams,
) -> Result<api::Acknowledged, ErrorObjectOwned> {
    let approval_id = answer.approval_id.as_str();
    let approve = answer.decision == api::Decision::Accept;
    let not_found = || {
        rpc_error(
            codes::NOT_FOUND,
            format!("no pending approval {approval_id}"),
        )
    };
    let run_id = lock(&bridge.registry.pending_approvals)
        .get(approval_id)
        .map(|(run_id, _)| run_id.clone())
        .ok_or_else(not_found)?;
    if !bridge.may_use_run(&caller, &run_id) {
        return Err(not_found());
    }
    let (_, pending) = lock(&bridge.registry.pending_approvals)
        .remove(approval_id)
        .ok_or_else(not_found)?;
    let _ = pending.send(approve);
    Ok(api::Acknowledged { ok: true })
}

async fn run_interrupt(
    bridge: Arc<Bridge>,
    caller: Caller,
    run: api::RunRef,
) -> Result<api::Acknowledged, ErrorObjectOwned> {
    let state = bridge.visible_run(&caller, &run.into_id())?;
    bridge.interrupt(&state).await?;
    Ok(api::Acknowledged { ok: true })
}

async fn run_steer(
    bridge: Arc<Bridge>,
    caller: Caller,
    params: api::RunSteerParams,
) -> Result<api::Steered, ErrorObjectOwned> {
    let state = bridge.visible_run(&caller, &params.run_id)?;
    let turn_id = bridge.steer(&state, params.input).await?;
    Ok(api::Steered { turn_id })
}

async fn discover(
    _: Arc<Bridge>,
    _: Caller,
    _: api::NoParams,
) -> Result<api::OpenRpcDocument, ErrorObjectOwned> {
    Ok(api::OpenRpcDocument(openrpc()))
}

async fn status(
    bridge: Arc<Bridge>,
    caller: Caller,
    _: api::NoParams,
) -> Result<api::Status, ErrorObjectOwned> {
    let runs: Vec<api::RunSummary> = lock(&bridge.registry.runs)
        .values()
        .filter(|run| caller.may_use(&run.owner))
        .map(|run| {
            let (_, done) = *run.progress.borrow();
            api::RunSummary {
                run_id: run.run_id.clone(),
                session_key: run.session_key.clone(),
                thread_id: lock(&run.thread_id).clone(),
                state: if done { "ended" } else { "running" }.to_string(),
                client: run.owner.clone(),
                bootstrap: lock(&run.bootstrap).clone(),
                token_usage: lock(&run.token_usage).clone(),
                compactions: run.compactions.load(std::sync::atomic::Ordering::Relaxed),
                context_alarm: run.compactions.load(std::sync::atomic::Ordering::Relaxed) >= 2
                    && lock(&run.token_usage)
                        .as_ref()
                        .is_some_and(super::run_start::above_window),
            }
        })
        .collect();
    let codex = codex_status(&bridge);
    Ok(api::Status {
        codex,
        sessions: lock(&bridge.sessions.bindings)
            .sessions
            .values()
            .filter(|binding| caller.may_use(binding.owner_name()))
            .count(),
        pending_tool_calls: lock(&bridge.registry.pending_tools)
            .values()
            .filter(|call| runs.iter().any(|run| run.run_id == call.run_id))
            .count(),
        pending_approvals: lock(&bridge.registry.pending_approvals)
            .values()
            .filter(|(run_id, _)| runs.iter().any(|run| &run.run_id == run_id))
            .count(),
        runs,
    })
}

/// The pool as `bridge.status` reports it: the summary fields describe the first member with a
/// live app-server (or the pool as a whole), `members` each member.
fn codex_status(bridge: &Bridge) -> api::CodexStatus {
    use crate::codex::client::pool::MemberState;
    let members = bridge.pool.status();
    let live = members
        .iter()
        .find(|member| member.state == MemberState::Ready);
    let started = members.iter().any(|member| member.generation > 0);
    let missing = match &bridge.config.codex_bin {
        CodexBinary::Missing(reason) if bridge.config.remote_app_servers.is_empty() => {
            Some(reason.clone())
        }
        _ => None,
    };
    let state = match (&missing, live, started) {
        (Some(_), _, _) => api::CodexState::Missing,
        (None, Some(_), _) => api::CodexState::Running,
        (None, None, false) => api::CodexState::NotStarted,
        (None, None, true) => api::CodexState::Exited,
    };
    let sum = |field: fn(&crate::codex::client::pool::MemberStatus) -> usize| {
        Some(members.iter().map(field).sum())
    };
    let running = missing.is_none() && started;
    api::CodexStatus {
        state,
        error: missing,
        alive: running.then_some(live.is_some()),
        version: running.then(|| live.and_then(|member| member.version.clone())),
        pid: running.then(|| live.and_then(|member| member.pid)),
        active_threads: if running {
            sum(|m| m.active_threads)
        } else {
            None
        },
        loaded_threads: if running {
            sum(|m| m.loaded_threads)
        } else {
            None
        },
        pending_requests: if running {
            sum(|m| m.pending_requests)
        } else {
            None
        },
        threads_opened: if running {
            sum(|m| m.threads_opened)
        } else {
            None
        },
        recycled: Some(bridge.pool.recycled()),
        members,
    }
}

/// The OpenRPC document of the bridge API (keys sorted when serialized): the methods of the one
/// table (`methods.rs`), the error codes of the one list (`errors.rs`).
pub fn openrpc() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.definitions_path = "/components/schemas".into())
        .into_generator();
    let methods = descriptions(&mut generator);
    let schemas: serde_json::Map<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    let errors: serde_json::Map<String, Value> = super::errors::codes::DESCRIBED
        .iter()
        .map(|(name, code, message)| {
            (
                (*name).to_string(),
                serde_json::json!({"code": code, "message": message}),
            )
        })
        .collect();
    serde_json::json!({
        "openrpc": "1.3.2",
        "info": {
            "title": "clawbridge bridge API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "JSON-RPC 2.0 over HTTP and WebSocket (`clawbridge serve`). Every request carries `Authorization: Bearer <token>` (the token is in `<state-dir>/token`); browsers' Origin and foreign Host headers are refused.",
        },
        "methods": methods,
        "components": {
            "schemas": schemas,
            "errors": errors,
        },
    })
}
