//! The bridge service with a real jsonrpsee client, the real Codex and the offline stub.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::rpc::client::{ClientT, SubscriptionClientT};
use crate::rpc::rpc_params;
use crate::rpc::ws_client::WsClientBuilder;
use clawbridge::SandboxMode;
use clawbridge::TurnLimits;
use clawbridge::{serve, Running, ServeConfig, ServeError};
use clawbridge::{StubScript, StubStep};
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::util::*;

/// The token the in-process test services use.
pub const TEST_TOKEN: &str = "test-token-0123456789abcdef";

pub fn config(
    bin: PathBuf,
    state: &Path,
    codex_home: Option<PathBuf>,
    script: Vec<StubStep>,
) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        token: Some(TEST_TOKEN.into()),
        codex_home,
        offline: true,
        stub_script: StubScript {
            responses: script,
            ..Default::default()
        },
        limits: TurnLimits {
            idle: Duration::from_secs(30),
            hard: Duration::from_secs(60),
            interrupt_grace: Duration::from_secs(5),
            ..TurnLimits::default()
        },
        answer_timeout: Duration::from_secs(30),
        ..ServeConfig::new(bin, vec![repo_root().join("fixtures")], state.to_path_buf())
    }
}

/// A fixture run document with paths relative to the `fixtures/` root.
pub fn run_document(name: &str) -> Value {
    let mut document: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("fixtures/runs").join(name)).expect("run"),
    )
    .expect("json");
    document["workspace"] = json!("workspace");
    if let Some(tools) = document["tools"].as_array_mut() {
        for tool in tools.iter_mut() {
            if let Some(path) = tool.as_str() {
                *tool = json!(path.trim_start_matches("../"));
            }
        }
    }
    document
}

fn bearer(token: &str) -> http::HeaderMap {
    [(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header"),
    )]
    .into_iter()
    .collect()
}

pub async fn connect(running: &Running) -> crate::rpc::ws_client::WsClient {
    WsClientBuilder::default()
        .set_headers(bearer(running.token.as_deref().unwrap_or_default()))
        .build(format!("ws://{}", running.addr))
        .await
        .expect("ws client")
}

/// A subscription to a run's events (replayed from its start).
pub async fn subscribe(
    client: &crate::rpc::ws_client::WsClient,
    run_id: &str,
) -> crate::rpc::client::Subscription<Value> {
    client
        .subscribe::<Value, _>(
            "bridge.subscribeRun",
            rpc_params![run_id],
            "bridge.unsubscribeRun",
        )
        .await
        .expect("subscribe")
}

/// The next event of a subscription (within a minute).
pub async fn next_event(subscription: &mut crate::rpc::client::Subscription<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(60), subscription.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .expect("event")
}

/// A run's events, replayed from its start, up to and including the first one `stop` accepts or
/// `turnEnd`.
pub async fn events_until(
    client: &crate::rpc::ws_client::WsClient,
    run_id: &str,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut subscription = subscribe(client, run_id).await;
    let mut events = Vec::new();
    loop {
        let event = next_event(&mut subscription).await;
        let end = stop(&event) || event["event"] == "turnEnd";
        events.push(event);
        if end {
            return events;
        }
    }
}

/// Collect a run's events up to and including `turnEnd`, answering tool calls with `answer`.
pub async fn follow(
    client: &crate::rpc::ws_client::WsClient,
    run_id: &str,
    answer: Option<Value>,
) -> Vec<Value> {
    let mut subscription = subscribe(client, run_id).await;
    let mut events = Vec::new();
    loop {
        let event = next_event(&mut subscription).await;
        if let (true, Some(answer)) = (event["event"] == "toolCall", &answer) {
            let mut result = answer.clone();
            result["callId"] = event["callId"].clone();
            let ok: Value = client
                .request("bridge.toolResult", rpc_params![result])
                .await
                .expect("toolResult");
            assert_eq!(ok["ok"], true);
        }
        let end = event["event"] == "turnEnd";
        events.push(event);
        if end {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_run_stream_tool_call_and_status() {
    let bin = codex_bin();
    let state = tempfile::tempdir().expect("state");
    let script = vec![
        StubStep::ToolCall {
            name: "message".into(),
            arguments: json!({"action": "send", "message": "hi Pash"}),
            namespace: None,
        },
        StubStep::Text("done".into()),
    ];
    // The CLI's default sandbox, so the params equal the CLI's.
    let mut settings = config(bin, state.path(), None, script);
    settings.max_sandbox = SandboxMode::DangerFullAccess;
    // `--otel-endpoint`: the run's turn is traced to a loopback collector.
    let collector = crate::otel::Collector::start().await;
    settings.trace = clawbridge::TraceSettings {
        endpoint: Some(collector.url.clone()),
        ..Default::default()
    };
    let running = serve(settings).await.expect("serve");
    let client = connect(&running).await;

    // Params round trip: the same JSON as `clawbridge params` for the same run.
    let document = run_document("telegram-direct.json");
    let params: Value = client
        .request("bridge.params", rpc_params![document.clone()])
        .await
        .expect("params");
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_clawbridge"))
        .args([
            "params",
            "fixtures/runs/telegram-direct.json",
            "--state-dir",
            &state.path().display().to_string(),
        ])
        .current_dir(repo_root())
        .output()
        .expect("cli");
    let cli: Value = serde_json::from_slice(&cli.stdout).expect("cli json");
    assert_eq!(params, cli);

    let started: Value = client
        .request("bridge.runStart", rpc_params![document])
        .await
        .expect("runStart");
    let run_id = started["runId"].as_str().expect("runId").to_string();
    assert!(started["threadId"]
        .as_str()
        .is_some_and(|id| !id.is_empty()));
    let answer = json!({"text": "delivered", "success": true});
    let events = follow(&client, &run_id, Some(answer)).await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["agentMessages"], json!(["done"]));
    assert!(events
        .iter()
        .any(|e| e["event"] == "toolCall" && e["tool"] == "message"));
    assert!(events.iter().any(|e| e["method"] == "turn/started"));
    let requests = running.bridge_requests();
    assert!(
        requests.iter().any(|body| body.contains("delivered")),
        "the tool result reached the model"
    );

    // A late subscriber replays the whole run.
    let replay = follow(&client, &run_id, None).await;
    assert_eq!(replay.len(), events.len());

    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(status["codex"]["version"], "0.169.0");
    assert_eq!(status["sessions"], 1);
    assert_eq!(status["runs"][0]["state"], "ended");
    // The run's bootstrap counts, as OpenClaw keeps them for /status.
    let soul = status["runs"][0]["bootstrap"]
        .as_array()
        .and_then(|files| files.iter().find(|file| file["name"] == "SOUL.md"))
        .cloned()
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(soul["surface"], "thread developer instructions", "{soul}");
    assert!(soul["rawChars"].as_u64().is_some_and(|n| n > 0), "{soul}");
    assert_eq!(soul["injectedChars"], soul["rawChars"]);
    assert_eq!(soul["truncated"], false);
    // Its latest token usage as Codex reported it, and no compaction.
    let usage = &status["runs"][0]["tokenUsage"];
    assert!(
        usage["last"]["inputTokens"].as_u64().is_some_and(|n| n > 0)
            && usage["total"]["inputTokens"].as_u64() > usage["last"]["inputTokens"].as_u64(),
        "two model calls, the last and the total: {status}"
    );
    assert_eq!(status["runs"][0]["compactions"], 0);
    assert_eq!(status["runs"][0]["contextAlarm"], false);

    // The run's turn as one trace: the turn, named by its agent, both model calls (from Codex's
    // token usage, no capture here) and the client's tool call under Codex's tool item.
    let thread = status["runs"][0]["threadId"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{status}"));
    running.stop().await;
    let spans = collector.spans();
    let turn = spans
        .iter()
        .find(|span| {
            span.text("gen_ai.operation.name") == Some("invoke_agent")
                && span.text("session.id") == Some(thread.as_str())
        })
        .unwrap_or_else(|| panic!("the turn's span: {spans:#?}"));
    assert_eq!(turn.name, "invoke_agent main");
    assert_eq!(turn.text("codex.turn.status"), Some("completed"));
    assert_eq!(turn.parent, "", "the trace's root");
    let in_trace: Vec<_> = spans
        .iter()
        .filter(|span| span.trace == turn.trace)
        .collect();
    let chats = in_trace
        .iter()
        .filter(|span| span.text("gen_ai.operation.name") == Some("chat"))
        .count();
    assert_eq!(chats, 2, "{in_trace:#?}");
    let tool = in_trace
        .iter()
        .find(|span| span.name == "client tool message")
        .unwrap_or_else(|| panic!("the client's tool call: {in_trace:#?}"));
    assert_eq!(tool.status, 1, "the client answered with success: {tool:?}");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_resumes_the_thread_even_after_a_restart() {
    let bin = codex_bin();
    let state = tempfile::tempdir().expect("state");
    let home = tempfile::tempdir().expect("codex home");
    let document = run_document("telegram-direct.json");

    let running = serve(config(
        bin.clone(),
        state.path(),
        Some(home.path().to_path_buf()),
        vec![],
    ))
    .await
    .expect("serve");
    let client = connect(&running).await;
    let first: Value = client
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("run 1");
    let events = follow(&client, first["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    let second: Value = client
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("run 2");
    assert_eq!(
        second["threadId"], first["threadId"],
        "same session, same thread"
    );
    let events = follow(&client, second["runId"].as_str().expect("id"), None).await;
    assert_eq!(events[0]["resumed"], true);
    drop(client);
    running.stop().await;
    drop(running);

    let running = serve(config(
        bin,
        state.path(),
        Some(home.path().to_path_buf()),
        vec![],
    ))
    .await
    .expect("restart");
    let client = connect(&running).await;
    let third: Value = client
        .request("bridge.runStart", rpc_params![document])
        .await
        .expect("run 3");
    assert_eq!(
        third["threadId"], first["threadId"],
        "the binding survived the restart"
    );
    let events = follow(&client, third["runId"].as_str().expect("id"), None).await;
    assert_eq!(events[0]["resumed"], true);
    assert_eq!(events.last().expect("end")["status"], "completed");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_paths_tokens_and_binds() {
    let bin = codex_bin();
    let state = tempfile::tempdir().expect("state");
    // --no-auth off loopback.
    let mut open = config(bin.clone(), state.path(), None, vec![]);
    open.listen = "0.0.0.0:0".parse().expect("addr");
    open.token = None;
    open.no_auth = true;
    assert!(matches!(
        serve(open).await.err(),
        Some(ServeError::NoAuthOffLoopback(_))
    ));

    let running = serve(config(bin, state.path(), None, vec![]))
        .await
        .expect("serve");
    let url = format!("http://{}", running.addr);
    let wrong = crate::rpc::http_client::HttpClientBuilder::default()
        .set_headers(bearer("nope"))
        .build(&url)
        .expect("client");
    let refused = wrong
        .request::<Value, _>("bridge.status", rpc_params![])
        .await;
    assert!(refused.is_err(), "wrong token refused");
    let right = crate::rpc::http_client::HttpClientBuilder::default()
        .set_headers(bearer(TEST_TOKEN))
        .build(&url)
        .expect("client");
    let status: Value = right
        .request("bridge.status", rpc_params![])
        .await
        .expect("right token");
    assert_eq!(status["sessions"], 0);

    // A workspace outside the roots is refused with a stable code naming the field.
    let outside = TestWorkspace::full();
    let error = right
        .request::<Value, _>(
            "bridge.params",
            rpc_params![json!({"workspace": outside.path()})],
        )
        .await
        .expect_err("outside the roots");
    let text = error.to_string();
    assert!(
        text.contains("4001") && text.contains("workspace"),
        "{text}"
    );
    let error = right
        .request::<Value, _>(
            "bridge.params",
            rpc_params![json!({"workspace": "workspace", "bogus": 1})],
        )
        .await
        .expect_err("unknown key");
    assert!(error.to_string().contains("bogus"), "{error}");
    let error = right
        .request::<Value, _>(
            "bridge.toolResult",
            rpc_params![json!({"callId": "nope", "text": "x", "success": true})],
        )
        .await
        .expect_err("unknown call");
    assert!(error.to_string().contains("4004"), "{error}");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_crash_fails_the_run_and_the_next_run_respawns() {
    let bin = codex_bin();
    let state = tempfile::tempdir().expect("state");
    let running = serve(config(bin, state.path(), None, vec![StubStep::Hang]))
        .await
        .expect("serve");
    let client = connect(&running).await;
    let started: Value = client
        .request(
            "bridge.runStart",
            rpc_params![run_document("telegram-direct.json")],
        )
        .await
        .expect("run");
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    let pid = status["codex"]["pid"].as_u64().expect("pid");
    // Wait until the model request hangs in the stub, then kill Codex.
    crate::util::wait_until_async("the model request", Duration::from_secs(5), || {
        !running.bridge_requests().is_empty()
    })
    .await;
    assert!(std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill")
        .success());
    let events = follow(&client, started["runId"].as_str().expect("id"), None).await;
    let end = events.last().expect("end");
    // The run ends saying the app-server was lost, and that its turn may have run.
    assert_eq!(end["status"], "appServerLost", "{end}");
    assert_eq!(end["mayHaveRun"], true, "{end}");
    assert!(
        end["error"]
            .as_str()
            .unwrap_or_default()
            .contains("local-0 was lost"),
        "{end}"
    );
    // The next run gets a fresh app-server (the stub answers normally after its script).
    let again: Value = client
        .request(
            "bridge.runStart",
            rpc_params![run_document("discord-group.json")],
        )
        .await
        .expect("respawned");
    let events = follow(&client, again["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_ne!(status["codex"]["pid"].as_u64(), Some(pid));
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_run_in_parallel_and_a_tool_change_starts_a_new_thread() {
    let bin = codex_bin();
    let state = tempfile::tempdir().expect("state");
    let running = serve(config(bin, state.path(), None, vec![]))
        .await
        .expect("serve");
    let client = connect(&running).await;
    let telegram = run_document("telegram-direct.json");
    let discord = run_document("discord-group.json");
    let (first, second) = tokio::join!(
        client.request::<Value, _>("bridge.runStart", rpc_params![telegram.clone()]),
        client.request::<Value, _>("bridge.runStart", rpc_params![discord])
    );
    let (first, second) = (first.expect("telegram"), second.expect("discord"));
    assert_ne!(
        first["threadId"], second["threadId"],
        "different sessions, different threads"
    );
    for run in [&first, &second] {
        let events = follow(&client, run["runId"].as_str().expect("id"), None).await;
        assert_eq!(events.last().expect("end")["status"], "completed");
    }
    let mut fewer_tools = telegram;
    fewer_tools["tools"] =
        json!([{"name": "message", "description": "Send.", "inputSchema": {"type": "object"}}]);
    let third: Value = client
        .request("bridge.runStart", rpc_params![fewer_tools])
        .await
        .expect("changed tools");
    assert_ne!(
        third["threadId"], first["threadId"],
        "a tool change rotates the thread"
    );
    follow(&client, third["runId"].as_str().expect("id"), None).await;
}

/// Protection (Security 3, item 1): `--max-runs` holds when starts come together. 150
/// `bridge.runStart` calls on 150 connections at once against a bound of 3 (each run's turn
/// hangs in the stub, so none ends): exactly 3 are admitted, every other is told the server is
/// busy. (Counting the runs and registering the new one later let all of them in.)
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_runs_holds_when_starts_come_together() {
    let bin = codex_bin();
    let state = tempfile::tempdir().expect("state");
    let running = serve(ServeConfig {
        max_runs: 3,
        ..config(bin, state.path(), None, vec![StubStep::Hang; 150])
    })
    .await
    .expect("serve");
    let mut clients = Vec::new();
    const STARTS: usize = 150;
    for _ in 0..STARTS {
        clients.push(connect(&running).await);
    }
    let starts = clients
        .iter()
        .enumerate()
        .map(|(index, client)| async move {
            let mut document = run_document("telegram-direct.json");
            document["sessionKey"] = json!(format!("agent:main:telegram:direct:burst-{index}"));
            client
                .request::<Value, _>("bridge.runStart", rpc_params![document])
                .await
        });
    let results = futures_util::future::join_all(starts).await;
    let admitted = results.iter().filter(|result| result.is_ok()).count();
    let busy = results
        .iter()
        .filter(|result| {
            result
                .as_ref()
                .err()
                .is_some_and(|error| error.to_string().contains("--max-runs"))
        })
        .count();
    assert_eq!((admitted, busy), (3, STARTS - 3), "{results:?}");
    running.stop().await;
}
