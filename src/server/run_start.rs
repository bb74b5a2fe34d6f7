//! `bridge.runStart`: from a run document to a running turn (translation, thread claim and
//! binding, thread start or resume, the turn task).

use super::*;
use api::CarriesRun as _;

pub(super) async fn run_start(
    bridge: Arc<Bridge>,
    caller: Caller,
    params: String,
) -> Result<api::RunStarted, ErrorObjectOwned> {
    if bridge
        .shutting_down
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return Err(rpc_error(
            codes::CODEX_UNAVAILABLE,
            "clawbridge serve is shutting down",
        ));
    }
    // Reserved at once (a permit), not counted now and registered later: starts that come
    // together each see the others' reservations. The run holds it until it ends.
    let Ok(slot) = Arc::clone(&bridge.run_slots).try_acquire_owned() else {
        return Err(rpc_error(
            codes::BUSY,
            format!(
                "{} runs are in progress, the most this server runs at once (--max-runs); try again when one ends",
                bridge.config.max_runs
            ),
        ));
    };
    let (mut run, new_thread, queue) = bridge
        .blocking(move |bridge| {
            let request: api::RunStartRequest = run_request(&params)?;
            let run = bridge.load_run(request.document())?;
            Ok((
                run,
                request.new_thread.unwrap_or(false),
                request.queue.unwrap_or_default(),
            ))
        })
        .await?;
    crate::app::commands::require_codex(&run).map_err(library_error)?;
    bridge.check_ownership(&caller, &run)?;
    if new_thread && run.thread_id.is_some() {
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
    if queue == api::QueueMode::Steer {
        let running = run
            .session_key
            .as_deref()
            .and_then(|key| bridge.running_turn_of(key))
            .filter(|running| caller.may_use(&running.owner));
        if let Some(running) = running {
            // The message goes to the running turn as it is: the user's words, as data.
            match bridge.steer(&running, run.message.clone()).await {
                Ok(_) => {
                    return Ok(api::RunStarted {
                        run_id: running.run_id.clone(),
                        thread_id: lock(&running.thread_id).clone().unwrap_or_default(),
                        steered: Some(true),
                    })
                }
                // The turn ended meanwhile: the run starts as usual (queued behind it).
                Err(error)
                    if error.code() == codes::NOT_FOUND || error.code() == codes::THREAD_FAILED =>
                {
                    tracing::debug!("steer of {} fell back to a run: {error:?}", running.run_id);
                }
                Err(error) => return Err(error),
            }
        }
    }
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
        progress,
        slot: Mutex::new(Some(slot)),
    });
    bridge.prune();
    lock(&bridge.runs).insert(run_id.clone(), Arc::clone(&state));
    // Runs of one session are queued in order.
    let session_lock = Arc::clone(
        lock(&bridge.session_locks)
            .entry(session_key.clone())
            .or_default(),
    );
    let queue_guard = session_lock.lock_owned().await;

    let fail = |state: &RunState, code: i32, message: String| {
        state.finish(RunEvent::failed(None, message.clone()));
        rpc_error(code, message)
    };
    // Paths are checked again here, after the queue wait, where the files are opened.
    let translation = {
        let run = run.clone();
        bridge
            .blocking(move |bridge| {
                translate(&run, &bridge.translate_options()).map_err(library_error)
            })
            .await
            .map_err(|error| fail(&state, error.code(), error.message().to_string()))?
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
    // A thread the document names must be this session's (or nobody's and idle).
    let mut claim = match &run.thread_id {
        Some(thread_id) => Some(
            ThreadClaim::new(&bridge, thread_id, run.session_key.as_deref())
                .map_err(|error| fail(&state, error.code(), error.message().to_string()))?,
        ),
        None => None,
    };
    // The thread's developer instructions, rendered once (the same for a start and a resume):
    // the fingerprint needs them before the thread id is known, the params reuse them.
    let developer_text = translation.developer_instructions(&run);
    let fingerprint = thread_fingerprint(&run, &developer_text);
    // `newThread`: the session's binding is set aside (a new thread replaces it), so a session
    // whose app-server was marked dead can go on, on another member, by asking.
    let bound = run
        .session_key
        .as_ref()
        .filter(|_| !new_thread)
        .and_then(|key| lock(&bridge.bindings).sessions.get(key).cloned());
    // The pool member the thread lives on: sticky for as long as the binding holds.
    let mut affinity = None;
    match (&run.thread_id, bound) {
        (None, Some(binding)) if binding.fingerprint == fingerprint => {
            claim = Some(
                ThreadClaim::new(&bridge, &binding.thread_id, run.session_key.as_deref())
                    .map_err(|error| fail(&state, error.code(), error.message().to_string()))?,
            );
            run.thread_id = Some(binding.thread_id);
            affinity = binding.member;
        }
        (Some(named), Some(binding)) if *named == binding.thread_id => affinity = binding.member,
        _ => {}
    }
    let lease = bridge
        .lease(affinity.as_deref(), &run.cwd)
        .await
        .map_err(|error| fail(&state, error.code(), error.message().to_string()))?;
    let hub = Arc::clone(&lease.hub);
    *lock(&state.hub) = Some(Arc::clone(&hub));
    // The app-server went away while the thread was being opened: the turn never started.
    let lost_before_turn = |state: &RunState, error: &SessionError| {
        state.finish(RunEvent::app_server_lost(None, false, error.to_string()));
        rpc_error(codes::CODEX_UNAVAILABLE, error.to_string())
    };
    let mut params = translation.codex_params_with(&run, developer_text.clone());
    bridge.bind_approvals(&run, &mut params);
    // A bound thread this app-server still has loaded (same fingerprint, so the same developer
    // instructions, tools and config) needs no `thread/resume`: the turn goes straight on.
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
        Err(error @ SessionError::CodexExited { .. }) => {
            return Err(lost_before_turn(&state, &error))
        }
        Err(SessionError::Peer(error)) if run.thread_id.is_some() => {
            tracing::warn!(
                "resume of {:?} failed ({error}); starting a new thread",
                run.thread_id
            );
            run.thread_id = None;
            claim = None;
            params = translation.codex_params_with(&run, developer_text.clone());
            bridge.bind_approvals(&run, &mut params);
            match hub.open_thread(&params.thread).await {
                Ok(handle) => handle,
                Err(error @ SessionError::CodexExited { .. }) => {
                    return Err(lost_before_turn(&state, &error))
                }
                Err(error) => return Err(fail(&state, codes::THREAD_FAILED, error.to_string())),
            }
        }
        Err(error) => return Err(fail(&state, codes::THREAD_FAILED, error.to_string())),
    };
    let thread_id = handle.thread_id.clone();
    if claim.is_none() {
        // A thread Codex just created: nobody else can hold it yet.
        claim = Some(
            ThreadClaim::new(&bridge, &thread_id, run.session_key.as_deref())
                .map_err(|error| fail(&state, error.code(), error.message().to_string()))?,
        );
    }
    *lock(&state.thread_id) = Some(thread_id.clone());
    if let Some(key) = &run.session_key {
        {
            let mut bindings = lock(&bridge.bindings);
            let bound = bridge.config.max_sessions.clamp(1, MAX_SESSIONS_LIMIT);
            if !bindings.sessions.contains_key(key) && bindings.sessions.len() >= bound {
                // The state file stays far below the size its loader accepts: a session past
                // the bound pushes out an idle one (its next run starts a new thread).
                let busy = lock(&bridge.busy_threads).clone();
                let idle = bindings
                    .sessions
                    .iter()
                    .find(|(_, binding)| !busy.contains(&binding.thread_id))
                    .map(|(key, _)| key.clone());
                if let Some(evicted) = idle {
                    tracing::warn!(
                        "{bound} session bindings (--max-sessions): forgetting {evicted}"
                    );
                    bindings.sessions.remove(&evicted);
                }
            }
            bindings.sessions.insert(
                key.clone(),
                Binding {
                    thread_id: thread_id.clone(),
                    fingerprint,
                    owner: (!caller.operator).then(|| caller.name.clone()),
                    member: Some(lease.name.clone()),
                },
            );
        }
        bridge
            .save_bindings()
            .map_err(|error| fail(&state, error.code(), error.message().to_string()))?;
    }
    state.push(RunEvent::Thread {
        thread_id: thread_id.clone(),
        resumed: matches!(params.thread, ThreadParams::ThreadResume(_)),
    });

    let task_bridge = Arc::clone(&bridge);
    let task_state = Arc::clone(&state);
    let limits = bridge.config.limits;
    // Tracked: shutdown interrupts the turn, stops Codex (which ends it), then waits for it.
    bridge.tasks.spawn(async move {
        let _queue = queue_guard;
        let _claim = claim;
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
                if let Ok(started) = params.parse::<crate::codex::protocol::inbound::TurnStarted>()
                {
                    *lock(&observer_state.turn_id) = Some(started.turn.id);
                }
            }
            if let Some(value) = logged_event(&event) {
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
        let result_ok = matches!(&result, Ok(outcome) if outcome.status == crate::codex::client::session::TurnStatus::Completed);
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
        lock(&task_bridge.pending_tools).retain(|_, call| call.run_id != task_state.run_id);
        let completed = result_ok;
        task_state.finish(end);
        // Keep a thread whose turn went well loaded for the session's next run (bounded: the
        // least recently used falls out); let Codex unload any other.
        let thread_id = handle.thread_id.clone();
        drop(handle);
        let unload = if completed {
            hub.keep_loaded(&thread_id)
        } else {
            Some(thread_id)
        };
        if let Some(unload) = unload.filter(|_| hub.is_alive()) {
            let unsubscribe_params = ThreadUnsubscribeParams {
                thread_id: unload.clone(),
            };
            let unsubscribe = hub.peer().call::<ThreadUnsubscribe>(&unsubscribe_params);
            if let Ok(Err(error)) = tokio::time::timeout(Duration::from_secs(5), unsubscribe).await
            {
                tracing::debug!("thread/unsubscribe {unload}: {error}");
            }
        }
        task_bridge.pool.after_run(&lease).await;
    });
    Ok(api::RunStarted {
        run_id,
        thread_id,
        steered: None,
    })
}
