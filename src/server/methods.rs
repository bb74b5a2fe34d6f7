//! The bridge methods' handlers and their registration (`module`), the event subscription and
//! the params helpers every handler uses.

use super::*;

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
    params: Params<'static>,
    pending: PendingSubscriptionSink,
) -> Result<(), jsonrpsee::core::SubscriptionError> {
    let run_id = match typed::<api::RunRef>(&params) {
        Ok(run) => run.into_id(),
        Err(error) => {
            pending.reject(error).await;
            return Ok(());
        }
    };
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

pub(super) fn object_param(params: &Params<'_>) -> Result<Value, ErrorObjectOwned> {
    let value: Value = params
        .parse()
        .map_err(|error| rpc_error(codes::INVALID_PARAMS, error.to_string()))?;
    match value {
        Value::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
        other => Ok(other),
    }
}

/// A method's params as its type (by name, or one positional value); a bad one is refused
/// naming the field.
pub(super) fn typed<T: serde::de::DeserializeOwned>(
    params: &Params<'_>,
) -> Result<T, ErrorObjectOwned> {
    let value = object_param(params)?;
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." {
            String::new()
        } else {
            format!("field `{path}`: ")
        };
        rpc_error(
            codes::INVALID_PARAMS,
            format!("{field}{}", error.into_inner()),
        )
    })
}

/// The view options beside a run document (`detail`, `mode`, `cacheBoundary`).
pub(super) fn options_of(value: &Value) -> Result<api::ViewOptions, ErrorObjectOwned> {
    match value {
        Value::Object(_) => serde_path_to_error::deserialize(value.clone()).map_err(|error| {
            let path = error.path().to_string();
            rpc_error(
                codes::INVALID_PARAMS,
                format!("field `{path}`: {}", error.into_inner()),
            )
        }),
        _ => Ok(api::ViewOptions::default()),
    }
}

/// A run-document method's params as text, refused past `--max-run-bytes` before anything
/// parses them; [`object_param`] then runs on the blocking pool.
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

pub(super) fn parse_params(text: &str) -> Result<Value, ErrorObjectOwned> {
    object_param(&Params::new(Some(text)))
}

pub(super) fn module(
    bridge: Arc<Bridge>,
) -> Result<RpcModule<Bridge>, jsonrpsee::core::RegisterMethodError> {
    let mut module = RpcModule::from_arc(bridge);
    module.register_async_method("bridge.params", |params, bridge, _| async move {
        let text = bounded_params(&bridge, &params)?;
        bridge
            .blocking(move |bridge| {
                let value = parse_params(&text)?;
                let run = bridge.load_run(&value)?;
                let mut params =
                    commands::params(&run, &bridge.translate_options()).map_err(library_error)?;
                bridge.bind_approvals(&run, &mut params);
                serde_json::to_value(params)
                    .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
            })
            .await
    })?;
    module.register_async_method("bridge.context", |params, bridge, _| async move {
        let text = bounded_params(&bridge, &params)?;
        bridge
            .blocking(move |bridge| {
                let value = parse_params(&text)?;
                let run = bridge.load_run(&value)?;
                let detail = options_of(&value)?.detail.unwrap_or(false);
                let report = commands::context(&run, &bridge.translate_options(), detail)
                    .map_err(library_error)?;
                serde_json::to_value(report)
                    .map_err(|error| rpc_error(codes::INTERNAL, error.to_string()))
            })
            .await
    })?;
    module.register_async_method("bridge.prompt", |params, bridge, _| async move {
        // Bounded before the parse (which is then at most --max-run-bytes).
        let value = parse_params(&bounded_params(&bridge, &params)?)?;
        let options = options_of(&value)?;
        let settings = commands::PromptSettings {
            mode: options.mode,
            provider: None,
            cache_boundary: options.cache_boundary.unwrap_or(true),
            // A command to run is the operator's choice, never a client's.
            before_prompt_build: None,
        };
        let prompt = bridge
            .blocking(move |bridge| {
                let run = bridge.load_run(&value)?;
                commands::prompt(&run, &bridge.translate_options(), &settings)
                    .map_err(library_error)
            })
            .await?;
        Ok::<_, ErrorObjectOwned>(api::PromptAnswer {
            text: prompt.text(),
            stable_prefix: prompt.stable_prefix,
            dynamic_suffix: prompt.dynamic_suffix,
        })
    })?;
    module.register_async_method("bridge.runStart", |params, bridge, ext| async move {
        let text = bounded_params(&bridge, &params)?;
        run_start(bridge, caller_of(&ext), text).await
    })?;
    module.register_subscription(
        "bridge.subscribeRun",
        "bridge.runEvent",
        "bridge.unsubscribeRun",
        |params, pending, bridge, ext| async move {
            subscribe_run(bridge, caller_of(&ext), params, pending).await
        },
    )?;
    module.register_async_method("bridge.toolResult", |params, bridge, ext| async move {
        let caller = caller_of(&ext);
        let result = typed::<api::ToolResultParams>(&params)?;
        let call_id = result.call_id.as_str();
        let answer = result
            .answer()
            .map_err(|why| rpc_error(codes::INVALID_PARAMS, format!("the tool result {why}")))?;
        let not_found = || rpc_error(codes::NOT_FOUND, format!("no pending tool call {call_id}"));
        let run_id = lock(&bridge.pending_tools)
            .get(call_id)
            .map(|pending| pending.run_id.clone())
            .ok_or_else(not_found)?;
        if !bridge.may_use_run(&caller, &run_id) {
            return Err(not_found());
        }
        let pending = lock(&bridge.pending_tools)
            .remove(call_id)
            .ok_or_else(not_found)?;
        let _ = pending.answer.send(answer);
        Ok::<_, ErrorObjectOwned>(api::Acknowledged { ok: true })
    })?;
    module.register_async_method("bridge.approval", |params, bridge, ext| async move {
        let caller = caller_of(&ext);
        let answer = typed::<api::ApprovalParams>(&params)?;
        let approval_id = answer.approval_id.as_str();
        let approve = answer.decision == api::Decision::Accept;
        let not_found = || {
            rpc_error(
                codes::NOT_FOUND,
                format!("no pending approval {approval_id}"),
            )
        };
        let run_id = lock(&bridge.pending_approvals)
            .get(approval_id)
            .map(|(run_id, _)| run_id.clone())
            .ok_or_else(not_found)?;
        if !bridge.may_use_run(&caller, &run_id) {
            return Err(not_found());
        }
        let (_, pending) = lock(&bridge.pending_approvals)
            .remove(approval_id)
            .ok_or_else(not_found)?;
        let _ = pending.send(approve);
        Ok(api::Acknowledged { ok: true })
    })?;
    module.register_async_method("bridge.runInterrupt", |params, bridge, ext| async move {
        let caller = caller_of(&ext);
        let run_id = typed::<api::RunRef>(&params)?.into_id();
        let state = bridge.visible_run(&caller, &run_id)?;
        bridge.interrupt(&state).await?;
        Ok::<_, ErrorObjectOwned>(api::Acknowledged { ok: true })
    })?;
    module.register_method("rpc.discover", |_, _, _| api::openrpc())?;
    module.register_async_method("bridge.status", |_, bridge, ext| async move {
        let caller = caller_of(&ext);
        let hub = lock(&bridge.hub).clone();
        let runs: Vec<api::RunSummary> = lock(&bridge.runs)
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
                }
            })
            .collect();
        let idle = |state, error| api::CodexStatus {
            state,
            error,
            alive: None,
            version: None,
            pid: None,
            active_threads: None,
            loaded_threads: None,
            pending_requests: None,
            threads_opened: None,
            recycled: Some(bridge.recycled.load(std::sync::atomic::Ordering::SeqCst)),
        };
        let codex = match (&bridge.config.codex_bin, hub.as_ref()) {
            (CodexBinary::Missing(reason), _) => {
                idle(api::CodexState::Missing, Some(reason.clone()))
            }
            (CodexBinary::Found(_), None) => idle(api::CodexState::NotStarted, None),
            (CodexBinary::Found(_), Some(hub)) => api::CodexStatus {
                state: if hub.is_alive() {
                    api::CodexState::Running
                } else {
                    api::CodexState::Exited
                },
                error: None,
                alive: Some(hub.is_alive()),
                version: Some(hub.codex_version.clone()),
                pid: Some(hub.pid),
                active_threads: Some(hub.active_threads()),
                loaded_threads: Some(hub.loaded_threads()),
                pending_requests: Some(hub.pending_requests()),
                threads_opened: Some(hub.threads_opened()),
                recycled: Some(bridge.recycled.load(std::sync::atomic::Ordering::SeqCst)),
            },
        };
        Ok::<_, ErrorObjectOwned>(api::Status {
            codex,
            sessions: lock(&bridge.bindings)
                .sessions
                .values()
                .filter(|binding| caller.may_use(binding.owner_name()))
                .count(),
            pending_tool_calls: lock(&bridge.pending_tools)
                .values()
                .filter(|call| runs.iter().any(|run| run.run_id == call.run_id))
                .count(),
            pending_approvals: lock(&bridge.pending_approvals)
                .values()
                .filter(|(run_id, _)| runs.iter().any(|run| &run.run_id == run_id))
                .count(),
            runs,
        })
    })?;
    Ok(module)
}
