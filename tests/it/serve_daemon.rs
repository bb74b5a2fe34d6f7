//! `clawbridge serve` as a long-running daemon, against the real binary: it ends cleanly.

use std::time::Duration;

use crate::rpc::client::{ClientT, SubscriptionClientT};
use crate::rpc::rpc_params;
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::serve_security::Fixture;

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_interrupts_running_turns_delivers_their_end_and_exits_zero() {
    codex_bin();
    let fixture = Fixture::new();
    let script = fixture.state.parent().expect("base").join("hang.json");
    std::fs::write(&script, json!({"responses": ["hang"]}).to_string()).expect("script");
    let mut serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let client = serve.client().await;
    let started: Value = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await
        .expect("run");
    let mut events = crate::serve::subscribe(&client, started["runId"].as_str().expect("id")).await;
    loop {
        let event = crate::serve::next_event(&mut events).await;
        if event["method"] == "turn/started" {
            break;
        }
    }
    let pid = serve.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let end = loop {
        let event = crate::serve::next_event(&mut events).await;
        if event["event"] == "turnEnd" {
            break event;
        }
    };
    assert!(
        end["status"] == "interrupted" || end["status"] == "failed",
        "{end}"
    );
    let status = crate::util::poll_async(Duration::from_secs(10), || {
        serve.child.try_wait().expect("wait")
    })
    .await
    .expect("serve exits within 10 s of SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", serve.stderr());
    assert!(
        serve.stderr().contains("shutting down"),
        "{}",
        serve.stderr()
    );
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_runs_are_forgotten_and_long_logs_tell_late_subscribers_what_they_missed() {
    use crate::serve::{config, connect, events_until};
    let state = tempfile::tempdir().expect("state");
    let mut settings = config(codex_bin(), state.path(), None, vec![]);
    settings.max_finished_runs = 2;
    // Far smaller than one turn's notifications.
    settings.max_run_log_bytes = 4 * 1024;
    let running = clawbridge::serve(settings).await.expect("serve");
    let client = connect(&running).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(run_to_completion(&client).await);
    }
    // The late subscriber of a long run: a marker first, the run's end last.
    let replay = events_until(&client, &ids[2], |event| event["event"] == "turnEnd").await;
    assert_eq!(replay[0]["event"], "eventsDropped", "{:?}", replay[0]);
    assert!(replay[0]["count"].as_u64().is_some_and(|count| count > 0));
    assert_eq!(replay.last().expect("end")["event"], "turnEnd");
    // A fourth run prunes the oldest finished one (two are kept).
    run_to_completion(&client).await;
    let gone = client
        .subscribe::<Value, _>(
            "bridge.subscribeRun",
            rpc_params![ids[0].clone()],
            "bridge.unsubscribeRun",
        )
        .await;
    let error = gone
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(error.contains("4004"), "{error}");
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert!(
        status["runs"]
            .as_array()
            .is_some_and(|runs| runs.len() <= 3),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_capped_and_the_refusal_says_why() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--max-connections", "2"]);
    let held = [serve.client().await, serve.client().await];
    let auth = format!("Authorization: Bearer {}", serve.token());
    let (status, text) = crate::serve_security::upgrade(
        serve.addr,
        &serve.addr.to_string(),
        std::slice::from_ref(&auth),
    );
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("Too many connections"), "{text}");
    drop(held);
    // Slots come back when clients leave.
    let accepted = crate::util::poll_async(Duration::from_secs(20), || {
        let (status, _) = crate::serve_security::upgrade(
            serve.addr,
            &serve.addr.to_string(),
            std::slice::from_ref(&auth),
        );
        (status == 101).then_some(())
    })
    .await;
    assert!(accepted.is_some(), "a freed slot is usable again");
}

#[test]
fn a_silent_connection_is_closed_after_the_idle_timeout() {
    use std::io::Read;
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--idle-timeout", "1"]);
    let mut silent = std::net::TcpStream::connect(serve.addr).expect("connect");
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    // The server closes its end (read returns 0 or a reset) before our 20 s read timeout.
    let closed = match silent.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => {
            error.kind() != std::io::ErrorKind::WouldBlock
                && error.kind() != std::io::ErrorKind::TimedOut
        }
    };
    assert!(closed, "the idle connection was closed by the server");
}

/// A skills tree of 96,000 folders once outlived the request deadline (4080, with the walk going
/// on in the background); the walk's entry cap now ends it well within a 1 s deadline, and the
/// service keeps answering everyone else meanwhile. (The deadline itself stopping a walk:
/// `skills::discover` unit tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_skills_tree_is_cut_at_the_entry_cap_within_the_deadline() {
    let fixture = Fixture::new();
    let skills = fixture.workspace().join("skills");
    for a in 0..60 {
        for b in 0..40 {
            for c in 0..40 {
                std::fs::create_dir_all(skills.join(format!("a{a}/b{b}/c{c}"))).expect("mkdir");
            }
        }
    }
    let serve = fixture.serve(&["--request-timeout", "1"]);
    let client = std::sync::Arc::new(serve.client().await);
    let big = {
        let client = client.clone();
        let document = fixture.document();
        tokio::spawn(async move {
            client
                .request::<Value, _>("bridge.params", rpc_params![document])
                .await
        })
    };
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status while a request is busy");
    assert!(status["runs"].is_array());
    let answer = big.await.expect("join");
    assert!(
        answer
            .as_ref()
            .is_ok_and(|params| params["threadStart"].is_object()),
        "answered within the deadline: {answer:?}"
    );
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_bindings_write_ends_the_run_with_its_cause() {
    use crate::serve::{config, connect, run_document};
    // On the build folder's disk, not under $TMPDIR: a tmpfs (scripts/test puts the tests' temp
    // folders on one) takes `chattr +i` and sets nothing.
    let state = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("state");
    let running = clawbridge::serve(config(codex_bin(), state.path(), None, vec![]))
        .await
        .expect("serve");
    // The state database cannot be written (immutable, which binds root too).
    let immutable = |flag: &str| {
        for file in ["serve.db", "serve.db-wal"] {
            let path = state.path().join(file);
            if path.exists() {
                let status = std::process::Command::new("chattr")
                    .arg(flag)
                    .arg(&path)
                    .status()
                    .expect("chattr");
                assert!(status.success(), "chattr {flag} {}", path.display());
                let listed = std::process::Command::new("lsattr")
                    .arg(&path)
                    .output()
                    .expect("lsattr");
                let attributes = String::from_utf8_lossy(&listed.stdout);
                let set = attributes
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .contains('i');
                assert_eq!(
                    set,
                    flag == "+i",
                    "chattr {flag} took on {}: {attributes}",
                    path.display()
                );
            }
        }
    };
    immutable("+i");
    let client = connect(&running).await;
    let error = client
        .request::<Value, _>(
            "bridge.runStart",
            rpc_params![run_document("telegram-direct.json")],
        )
        .await
        .expect_err("the binding cannot be written");
    let text = error.to_string();
    immutable("-i");
    assert!(
        text.contains("serve.db") && text.contains("attempt to write a readonly database")
            || text.contains("serve.db") && text.contains("disk I/O error"),
        "the cause travels with the error: {text}"
    );
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    let runs = status["runs"].as_array().expect("runs");
    assert!(
        !runs.is_empty() && runs.iter().all(|run| run["state"] == "ended"),
        "nothing stays running: {status}"
    );
}

/// Start the Telegram fixture run and follow it to a completed `turnEnd`; its run id.
async fn run_to_completion(client: &crate::rpc::ws_client::WsClient) -> String {
    let started: Value = client
        .request(
            "bridge.runStart",
            rpc_params![crate::serve::run_document("telegram-direct.json")],
        )
        .await
        .expect("run");
    let id = started["runId"].as_str().expect("id").to_string();
    let events = crate::serve::events_until(client, &id, |event| event["event"] == "turnEnd").await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    id
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_threads_stay_loaded_for_their_next_run_within_a_bound() {
    use crate::serve::{config, connect, events_until, run_document};
    use clawbridge::MAX_LOADED_THREADS;
    let state = tempfile::tempdir().expect("state");
    let running = clawbridge::serve(config(codex_bin(), state.path(), None, vec![]))
        .await
        .expect("serve");
    let client = connect(&running).await;
    let loaded = |status: &Value| {
        status["codex"]["loadedThreads"]
            .as_u64()
            .unwrap_or(u64::MAX)
    };
    let run_session = |session: usize| {
        let client = &client;
        async move {
            let mut document = run_document("telegram-direct.json");
            document["sessionKey"] = json!(format!("agent:main:loaded:{session}"));
            let started: Value = client
                .request("bridge.runStart", rpc_params![document])
                .await
                .expect("run");
            let id = started["runId"].as_str().expect("id").to_string();
            let events = events_until(client, &id, |event| event["event"] == "turnEnd").await;
            assert_eq!(events.last().expect("end")["status"], "completed");
            (
                started["threadId"].as_str().expect("thread").to_string(),
                events,
            )
        }
    };
    let (first_thread, _) = run_session(0).await;
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(
        loaded(&status),
        1,
        "the finished thread stays loaded: {status}"
    );
    // The session's next run continues the same thread without resuming it.
    let (second_thread, events) = run_session(0).await;
    assert_eq!(second_thread, first_thread);
    assert!(
        events
            .iter()
            .any(|event| event["event"] == "thread" && event["resumed"] == true),
        "the run continues its thread"
    );
    // More sessions than the bound: the least recently used threads are unloaded.
    for session in 1..=MAX_LOADED_THREADS + 1 {
        run_session(session).await;
    }
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(loaded(&status), MAX_LOADED_THREADS as u64, "{status}");
    // An unloaded thread is resumed as before.
    let (again, _) = run_session(0).await;
    assert_eq!(again, first_thread, "the bound thread, resumed");
}
