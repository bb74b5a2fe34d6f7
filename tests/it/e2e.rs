//! End-to-end with the real Codex CLI (pinned 0.169.0) against the loopback stub.
//!
//! The binary comes from `CLAWBRIDGE_CODEX_BIN`, the project-local `.tools/codex` install
//! (`scripts/install-codex`), or `codex` on PATH. On a developer machine without it these tests
//! skip with a message; under `CI=true` a missing binary is a failure.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clawbridge::DefaultHandler;
use clawbridge::PeerConfig;
use clawbridge::Run;
use clawbridge::SpawnOptions;
use clawbridge::ThreadParams;
use clawbridge::{translate, TranslateOptions};
use clawbridge::{CodexSession, SessionError, TurnLimits, TurnStatus};
use clawbridge::{OfflineHome, ResponsesStub, StubScript, StubStep};
use serde_json::{json, Value};

use crate::util::*;

/// The Codex CLI, when one is installed (`CLAWBRIDGE_CODEX_BIN`, `.tools/`, or `PATH`).
pub fn installed_codex_bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CLAWBRIDGE_CODEX_BIN") {
        return Some(PathBuf::from(path));
    }
    let local = repo_root().join(".tools/codex/node_modules/.bin/codex");
    if local.is_file() {
        return Some(local);
    }
    which::which("codex").ok()
}

/// The Codex CLI of one version of the matrix (`fixtures/codex-versions.tsv`), as scripts/test
/// installs it: the pinned one in `.tools/codex`, the others in `.tools/codex-VERSION`.
pub fn codex_bin_of(version: &str) -> PathBuf {
    let folder = if version == clawbridge::PINNED_CODEX_VERSION {
        "codex".to_string()
    } else {
        format!("codex-{version}")
    };
    let path = repo_root()
        .join(".tools")
        .join(folder)
        .join("node_modules/.bin/codex");
    assert!(
        path.is_file(),
        "Codex {version} is not installed at {}: scripts/test installs the version matrix",
        path.display()
    );
    path
}

/// The Codex CLI the end-to-end tests pair with. Those tests are `#[ignore]`d, so a bare
/// `cargo test` lists them as ignored; `scripts/test` installs the pinned CLI and runs them with
/// `--include-ignored`. Asked to run without one, they fail: they never pass silently.
pub fn codex_bin() -> PathBuf {
    installed_codex_bin().unwrap_or_else(|| {
        panic!("no Codex CLI: run scripts/install-codex (scripts/test does), or set CLAWBRIDGE_CODEX_BIN")
    })
}

struct Offline {
    stub: ResponsesStub,
    home: OfflineHome,
    bin: PathBuf,
}

async fn offline(script: Vec<StubStep>, bin: PathBuf) -> Offline {
    let stub = ResponsesStub::start(StubScript {
        responses: script,
        ..Default::default()
    })
    .await
    .expect("stub");
    let home = OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home");
    Offline { stub, home, bin }
}

impl Offline {
    /// Spawn Codex for a fixture run, start its thread, and return the turn to send.
    async fn open(&self, run_name: &str) -> (CodexSession, clawbridge::TurnStartParams) {
        let run = fixture_run(run_name, None);
        let params = translate(&run, &TranslateOptions::hermetic())
            .expect("translate")
            .codex_params(&run);
        let mut session = self.session(&run).await;
        let mut turn = params.turn_start.clone();
        turn.thread_id = session.open_thread(&params.thread).await.expect("thread");
        (session, turn)
    }

    async fn session(&self, run: &Run) -> CodexSession {
        let spawn = SpawnOptions {
            binary: self.bin.clone(),
            codex_home: self.home.path.clone(),
            cwd: run.cwd.clone(),
            isolate_environment: true,
            config_overrides: Vec::new(),
            environment: None,
            jail: None,
            reaper: None,
        };
        CodexSession::spawn(&spawn, PeerConfig::default(), true, Duration::from_secs(20))
            .await
            .expect("spawn and handshake")
    }
}

fn fixture_run(name: &str, thread_id: Option<&str>) -> Run {
    let mut run = Run::load(&repo_root().join("fixtures/runs").join(name)).expect("run");
    run.thread_id = thread_id.map(str::to_string);
    run
}

fn limits() -> TurnLimits {
    TurnLimits {
        idle: Duration::from_secs(30),
        hard: Duration::from_secs(60),
        interrupt_grace: Duration::from_secs(5),
        ..TurnLimits::default()
    }
}

fn input_texts(request: &Value) -> String {
    request["input"].to_string()
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test]
async fn handshake_two_turns_and_resume_in_a_new_process() {
    let bin = codex_bin();
    // The version of the binary under test (the pin, or another via scripts/test-codex).
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .expect("codex --version");
    let version = String::from_utf8_lossy(&version.stdout)
        .split_whitespace()
        .last()
        .expect("a version")
        .to_string();
    let env = offline(
        vec![
            StubStep::Text("first".into()),
            StubStep::Text("second".into()),
            StubStep::Text("third".into()),
        ],
        bin,
    )
    .await;
    let run = fixture_run("telegram-direct.json", None);
    let params = translate(&run, &TranslateOptions::hermetic())
        .expect("translate")
        .codex_params(&run);
    let mut session = env.session(&run).await;
    assert_eq!(session.codex_version.as_deref(), Some(version.as_str()));
    let thread_id = session
        .open_thread(&params.thread)
        .await
        .expect("thread/start accepts our params");
    let mut turn = params.turn_start.clone();
    turn.thread_id = thread_id.clone();
    let first = session
        .run_turn(&turn, &DefaultHandler::default(), &mut |_| {}, limits())
        .await
        .expect("turn 1");
    assert_eq!(
        (first.status, first.agent_messages.clone()),
        (TurnStatus::Completed, vec!["first".to_string()])
    );
    let second = session
        .run_turn(&turn, &DefaultHandler::default(), &mut |_| {}, limits())
        .await
        .expect("turn 2");
    assert_eq!(second.agent_messages, vec!["second"]);
    session.shutdown(Duration::from_secs(5)).await;

    // A new process resumes the thread with the same developer instructions.
    let resume_run = fixture_run("telegram-direct.json", Some(&thread_id));
    let resume = translate(&resume_run, &TranslateOptions::hermetic())
        .expect("translate")
        .codex_params(&resume_run);
    assert!(matches!(resume.thread, ThreadParams::ThreadResume(_)));
    let mut session = env.session(&resume_run).await;
    assert_eq!(
        session
            .open_thread(&resume.thread)
            .await
            .expect("thread/resume"),
        thread_id
    );
    let third = session
        .run_turn(
            &resume.turn_start,
            &DefaultHandler::default(),
            &mut |_| {},
            limits(),
        )
        .await
        .expect("turn 3");
    assert_eq!(third.agent_messages, vec!["third"]);
    session.shutdown(Duration::from_secs(5)).await;

    let requests = env.stub.requests();
    assert_eq!(requests.len(), 3);
    // Each request re-sends the whole history: a prefix extension, also across the restart.
    let inputs: Vec<Vec<Value>> = requests
        .iter()
        .map(|r| r.body["input"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(inputs[1].starts_with(&inputs[0][..inputs[0].len()]));
    assert!(
        inputs[2].starts_with(&inputs[1]),
        "resume continues the same history"
    );
    let developer = match &params.thread {
        ThreadParams::ThreadStart(start) => start.developer_instructions.clone(),
        ThreadParams::ThreadResume(_) => unreachable!(),
    };
    assert_eq!(
        requests[0].body["input"][1]["content"][0]["text"],
        json!(developer)
    );
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test]
async fn a_dynamic_tool_round_trip_through_the_handler_command() {
    let bin = codex_bin();
    let env = offline(
        vec![
            StubStep::ToolCall {
                name: "message".into(),
                arguments: json!({"action": "send", "message": "hello Pash"}),
                namespace: None,
            },
            StubStep::Text("sent it".into()),
        ],
        bin,
    )
    .await;
    let (mut session, turn) = env.open("telegram-direct.json").await;
    let dir = tempfile::tempdir().expect("dir");
    let seen = dir.path().join("call.json");
    let handler = DefaultHandler {
        tool_command: Some(format!(
            "cat > '{}'; echo '{{\"text\": \"delivered to telegram\", \"success\": true}}'",
            seen.display()
        )),
        approve: false,
        tool_timeout: Some(Duration::from_secs(10)),
    };
    let outcome = session
        .run_turn(&turn, &handler, &mut |_| {}, limits())
        .await
        .expect("turn");
    session.shutdown(Duration::from_secs(5)).await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.server_requests, 1);
    let call: Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).expect("handler ran")).expect("json");
    assert_eq!(call["tool"], "message");
    assert_eq!(
        call["arguments"],
        json!({"action": "send", "message": "hello Pash"})
    );
    assert_eq!(call["callId"], "call_stub_1");
    let requests = env.stub.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        input_texts(&requests[1].body).contains("delivered to telegram"),
        "the tool output reached the model"
    );
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test]
async fn a_stub_failure_is_a_failed_turn() {
    let bin = codex_bin();
    let env = offline(vec![StubStep::Fail("scripted outage".into())], bin).await;
    let (mut session, turn) = env.open("discord-group.json").await;
    let outcome = session
        .run_turn(&turn, &DefaultHandler::default(), &mut |_| {}, limits())
        .await
        .expect("turn ends");
    session.shutdown(Duration::from_secs(5)).await;
    assert_eq!(outcome.status, TurnStatus::Failed);
    assert!(outcome
        .error
        .unwrap_or_default()
        .contains("scripted outage"));
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_killed_mid_turn_surfaces_within_two_seconds() {
    let bin = codex_bin();
    let env = offline(vec![StubStep::Hang], bin).await;
    let (mut session, turn) = env.open("telegram-direct.json").await;
    let pid = session.pid().expect("pid");
    let stub_requests = |stub: &ResponsesStub| {
        crate::util::wait_until("the model request", Duration::from_secs(20), || {
            !stub.requests().is_empty()
        })
    };
    let killer = async {
        tokio::task::block_in_place(|| stub_requests(&env.stub));
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        Instant::now()
    };
    let handler = DefaultHandler::default();
    let mut observer = |_: clawbridge::TurnEvent<'_>| {};
    let (result, killed_at) = tokio::join!(
        session.run_turn(&turn, &handler, &mut observer, limits()),
        killer
    );
    let detected = killed_at.elapsed();
    match result {
        Err(SessionError::CodexExited { .. }) => {}
        other => panic!("expected CodexExited, got {other:?}"),
    }
    assert!(detected < Duration::from_secs(2), "took {detected:?}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(!status.contains("State:\tZ"), "no zombie left: {status}");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn cli_run_offline_heartbeat_and_capture() {
    let bin = codex_bin();
    let bin = bin.display().to_string();
    let (code, stdout, stderr) = run_cli(&[
        "run",
        "--offline",
        "--json",
        "--codex-bin",
        &bin,
        "fixtures/runs/heartbeat.json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let last: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("json lines");
    assert_eq!(
        (last["event"].clone(), last["status"].clone()),
        (json!("turnEnd"), json!("completed"))
    );
    assert!(
        stdout
            .lines()
            .all(|line| serde_json::from_str::<Value>(line).is_ok()),
        "stdout is JSON lines only"
    );

    let out = tempfile::tempdir().expect("out");
    let out_dir = out.path().display().to_string();
    let (code, stdout, stderr) = run_cli(&[
        "capture",
        "--codex-bin",
        &bin,
        "fixtures/runs/heartbeat.json",
        "--out",
        &out_dir,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Collaboration mode"));
    let request = std::fs::read_to_string(out.path().join("model-request.json")).expect("capture");
    assert!(
        request.contains("OpenClaw Heartbeat Workspace"),
        "heartbeat pointer sent"
    );
    assert!(request.contains("<workspace>/HEARTBEAT.md"));
    assert!(
        !request.contains("<HEARTBEAT.md contents will be here>"),
        "HEARTBEAT.md content never sent"
    );
    assert!(
        request.contains("<AGENTS.md contents will be here>"),
        "AGENTS.md arrives through Codex discovery"
    );
    let root = repo_root().display().to_string();
    if let Some(at) = request.find(&root) {
        let from = request[..at]
            .char_indices()
            .rev()
            .nth(120)
            .map_or(0, |(i, _)| i);
        panic!(
            "machine paths redacted: {}",
            &request[from..(at + root.len()).min(request.len())]
        );
    }
    // A clone's remote is a path on the machine it came from (CI clones this checkout).
    let remotes = regex::Regex::new(r#"associated_remote_urls\\":\{([^{}]*)\}"#).expect("regex");
    for found in remotes.captures_iter(&request) {
        assert!(
            found[1]
                .split(',')
                .all(|entry| entry.ends_with(r#":\"<remote-url>\""#)),
            "remote urls redacted: {}",
            &found[0]
        );
    }
    let layers = std::fs::read_to_string(out.path().join("layers.md")).expect("layers");
    for (label, position) in [
        ("Codex base instructions", "input[0].content[0]"),
        ("OpenClaw developer instructions", "input[1].content[0]"),
        ("Codex skills list", "input[1].content[1]"),
        ("Codex permissions", "input[1].content[2]"),
        ("Collaboration mode", "input[1].content[3]"),
        ("AGENTS.md", "input[2].content[0]"),
        ("Codex environment context", "input[2].content[1]"),
        ("User input", "input[3].content[0]"),
    ] {
        let row = layers
            .lines()
            .find(|line| line.contains(label))
            .unwrap_or_else(|| panic!("{label} missing:\n{layers}"));
        assert!(row.contains(position), "{label} at {position}: {row}");
    }
    let base = layers
        .lines()
        .find(|l| l.contains("Codex base instructions") && l.starts_with('|'))
        .expect("row");
    assert!(
        base.contains("| 19575 |"),
        "personality none removes the Personality section: {base}"
    );
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn cli_scripted_failure_and_missing_binary() {
    let bin = codex_bin();
    let dir = tempfile::tempdir().expect("dir");
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"[{"httpStatus": 500}]"#).expect("script");
    let (code, _, stderr) = run_cli(&[
        "run",
        "--offline",
        "--codex-bin",
        &bin.display().to_string(),
        "--stub-script",
        &script.display().to_string(),
        "fixtures/runs/telegram-direct.json",
    ]);
    assert_eq!(code, 1, "a failed turn exits 1: {stderr}");
    assert!(stderr.contains("turn failed"), "{stderr}");
    let (code, _, stderr) = run_cli(&[
        "run",
        "--offline",
        "--codex-bin",
        "/no/such/codex",
        "fixtures/runs/telegram-direct.json",
    ]);
    assert_eq!(code, 3);
    assert!(
        stderr.contains("--codex-bin /no/such/codex")
            && stderr.contains("CODEX_BIN")
            && stderr.contains("PATH"),
        "{stderr}"
    );
    let (code, _, stderr) = run_cli(&[
        "run",
        "--codex-bin",
        &bin.display().to_string(),
        "--stub-script",
        &script.display().to_string(),
        "fixtures/runs/telegram-direct.json",
    ]);
    assert_eq!(code, 2, "{stderr}");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test]
async fn a_namespaced_tool_call_arrives_with_its_namespace() {
    let bin = codex_bin();
    // Measured: a Responses `function_call` carrying `namespace: "openclaw"` reaches the client as
    // `item/tool/call` with `namespace: "openclaw"` and the bare tool name.
    let env = offline(
        vec![
            StubStep::ToolCall {
                name: "cron".into(),
                arguments: json!({"action": "list"}),
                namespace: Some("openclaw".into()),
            },
            StubStep::Text("no jobs".into()),
        ],
        bin,
    )
    .await;
    let (mut session, turn) = env.open("telegram-direct.json").await;
    let mut calls = Vec::new();
    let mut observer = |event: clawbridge::TurnEvent<'_>| {
        if let clawbridge::TurnEvent::ServerRequest { request } = event {
            calls.push(request.params.clone());
        }
    };
    let outcome = session
        .run_turn(&turn, &DefaultHandler::default(), &mut observer, limits())
        .await
        .expect("turn");
    session.shutdown(Duration::from_secs(5)).await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0]["namespace"].clone(), calls[0]["tool"].clone()),
        (json!("openclaw"), json!("cron"))
    );
}

/// `clawbridge run` without `--json`: the agent's text on stdout, the tool call and its answer on
/// stderr, and a closing line with the duration and Codex's token usage.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn run_prints_a_readable_transcript() {
    let bin = codex_bin();
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir(dir.path().join("ws")).expect("ws");
    std::fs::write(dir.path().join("ws/SOUL.md"), "Be brief.\n").expect("soul");
    let run = dir.path().join("run.json");
    std::fs::write(
        &run,
        serde_json::json!({"workspace": "ws", "message": "hi", "directTools": ["message"],
            "tools": [{"name": "message", "description": "Send a message.", "inputSchema": {"type": "object"}}]})
        .to_string(),
    )
    .expect("run");
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"responses": [{"toolCall": {"name": "message", "arguments": {"action": "send"}}}, {"text": "Sent it."}]}"#,
    )
    .expect("script");
    let output = crate::util::clawbridge()
        .arg("run")
        .arg(&run)
        .args(["--offline", "--stub-script"])
        .arg(&script)
        .arg("--codex-bin")
        .arg(&bin)
        .args([
            "--tool-handler",
            r#"cat >/dev/null; echo '{"text": "delivered", "success": true}'"#,
        ])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "Sent it.", "only the agent's text on stdout");
    assert!(stderr.contains("[item/tool/call] message"), "{stderr}");
    assert!(stderr.contains("[tool result] delivered"), "{stderr}");
    let last = stderr
        .lines()
        .find(|line| line.starts_with("clawbridge: turn completed"))
        .unwrap_or_else(|| panic!("no status line: {stderr}"));
    assert!(
        last.contains(" s, tokens ") && last.contains(" out"),
        "{last}"
    );
}
