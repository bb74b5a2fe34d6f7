//! Live capture: the recording forwarder between Codex and its upstream (here the loopback stub
//! plays the upstream), what it writes, and `cache-report` on synthetic and real captures.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use clawbridge::{
    cache_fingerprints, spawn_recorder, Forwarder, ForwarderSettings, Recorded, ResponsesStub,
    StubScript, StubStep, Upstream,
};
use serde_json::{json, Value};

use crate::util::*;

const API_KEY: &str = "sk-live-capture-test-key-0123456789abcdef";
const ACCOUNT: &str = "acct-4242-secret-account";

/// A POST to the forwarder as Codex makes it; (the moment each chunk of the answer came, the
/// answer's bytes).
fn post(base_url: &str, body: &str) -> (Vec<Instant>, Vec<u8>) {
    let rest = base_url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').expect("path");
    let mut stream = std::net::TcpStream::connect(host).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let metadata = json!({"thread_id": "thread-live-1", "turn_id": "turn-live-1", "chatgpt_account_id": ACCOUNT}).to_string();
    write!(
        stream,
        "POST /{path}/responses HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\nx-codex-turn-metadata: {metadata}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut times = Vec::new();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                times.push(Instant::now());
                answer.extend_from_slice(&buffer[..read]);
            }
        }
    }
    (times, answer)
}

fn request_body() -> String {
    // Field order and spacing as a client wrote them: they must reach the upstream unchanged.
    format!(
        r#"{{"model":"gpt-5.5",  "instructions":"Be brief.","input":[{{"type":"message","role":"user","content":[{{"type":"input_text","text":"hi, clone https://deploy:Hunter2pass@git.example.com with my password hunter2x"}}]}}],"metadata":{{"api_key":"{API_KEY}"}},"stream":true,"prompt_cache_key":"thread-live-1"}}"#
    )
}

/// A forwarder to `upstream` recording into `sink`.
async fn forwarder_to(upstream: String, sink: tokio::sync::mpsc::Sender<Recorded>) -> Forwarder {
    forwarder_trusting(upstream, None, sink).await
}

/// [`forwarder_to`] trusting `extra_ca` too (`--upstream-ca`).
async fn forwarder_trusting(
    upstream: String,
    extra_ca: Option<std::path::PathBuf>,
    sink: tokio::sync::mpsc::Sender<Recorded>,
) -> Forwarder {
    Forwarder::start(
        ForwarderSettings {
            upstream: Upstream::Fixed(upstream),
            extra_ca,
            websocket: true,
        },
        sink,
    )
    .await
    .expect("forwarder")
}

/// Requests reach the upstream byte for byte with their credential; the answer streams back as
/// it comes (the first event long before the last); the request and the response are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarder_passes_requests_unchanged_and_streams_answers_as_they_come() {
    let stub = ResponsesStub::start(StubScript {
        responses: vec![StubStep::Paced {
            ms: 250,
            step: Box::new(StubStep::Text("STREAMED ANSWER".into())),
        }],
        ..Default::default()
    })
    .await
    .expect("stub");
    let (sink, mut recorded) = tokio::sync::mpsc::channel(16);
    let forwarder = forwarder_to(stub.base_url(), sink).await;
    let base = forwarder.base_url();
    let started = Instant::now();
    let (times, answer) = tokio::task::spawn_blocking(move || post(&base, &request_body()))
        .await
        .expect("post");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("STREAMED ANSWER"), "{text}");
    // Streamed, not buffered: ten-odd events 250 ms apart; the first came well before the end.
    let first = times.first().expect("a chunk").duration_since(started);
    let last = times.last().expect("a chunk").duration_since(started);
    assert!(
        last - first >= Duration::from_millis(1500),
        "the answer came in one piece after {last:?} (first chunk at {first:?})"
    );
    // Byte for byte, and with the client's credential.
    let bodies = stub.request_bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0].as_ref(), request_body().as_bytes());
    let seen = &stub.requests()[0];
    assert_eq!(
        seen.headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    // Recorded: the request, then its response with the output, usage and timings.
    let Some(Recorded::Request { id, request }) = recorded.recv().await else {
        panic!("the request was recorded first");
    };
    assert!(request.body["input"][0]["content"][0]["text"]
        .as_str()
        .is_some_and(|text| text.starts_with("hi, clone")));
    let Some(Recorded::Response {
        id: answered,
        response,
    }) = recorded.recv().await
    else {
        panic!("then its response");
    };
    assert_eq!(answered, id);
    assert_eq!(response["httpStatus"], 200);
    assert_eq!(
        response["output"][0]["content"][0]["text"], "STREAMED ANSWER",
        "{response}"
    );
    assert_eq!(
        response["usage"]["input_tokens_details"]["cached_tokens"],
        0
    );
    assert!(
        response["timings"]["firstByteMs"].as_f64().is_some(),
        "{response}"
    );
    assert!(
        response["timings"]["totalMs"].as_f64() > response["timings"]["firstByteMs"].as_f64(),
        "{response}"
    );
}

/// Protections: the forwarder refuses browsers, foreign `Host` names and a wrong secret path;
/// Codex's WebSocket attempt gets the upstream's own answer (this stub speaks only HTTP: 426,
/// so Codex uses HTTP), and a browser's upgrade is refused before it reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarder_refuses_what_the_stub_refuses() {
    let stub = ResponsesStub::start(StubScript::default())
        .await
        .expect("stub");
    let (sink, _recorded) = tokio::sync::mpsc::channel(16);
    let forwarder = forwarder_to(stub.base_url(), sink).await;
    let addr = forwarder.addr;
    let base = forwarder.base_url();
    let path = base
        .split_once(&addr.to_string())
        .expect("path")
        .1
        .to_string();
    let statuses = tokio::task::spawn_blocking(move || {
        let ask = |host: &str, path: &str, extra: &str| {
            crate::serve_security::raw_http(
                addr,
                &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
            )
            .0
        };
        let host = addr.to_string();
        let upgrade = "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
        let models = format!("{path}/models");
        let responses = format!("{path}/responses");
        [
            ask(&host, &models, "Origin: https://evil.example\r\n"),
            ask("evil.example", &models, ""),
            ask(&host, "/not-the-secret/v1/models", ""),
            ask(&host, &responses, upgrade),
            ask(&host, &responses, &format!("Origin: https://evil.example\r\n{upgrade}")),
        ]
    })
    .await
    .expect("asks");
    assert_eq!(statuses, [403, 403, 404, 426, 403]);
}

/// What reaches the disk: the request and its response, filed by thread and turn, 0600 files in
/// 0700 folders; no API key, bearer token or account id anywhere in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_requests_and_responses_reach_the_disk_redacted() {
    use std::os::unix::fs::PermissionsExt;
    let stub = ResponsesStub::start(StubScript {
        responses: vec![StubStep::Text("RECORDED".into())],
        ..Default::default()
    })
    .await
    .expect("stub");
    let dir = tempfile::tempdir().expect("dir");
    let capture = dir.path().join("capture");
    let (sink, writer) = spawn_recorder(capture.clone());
    let forwarder = forwarder_to(stub.base_url(), sink).await;
    let base = forwarder.base_url();
    tokio::task::spawn_blocking(move || post(&base, &request_body()))
        .await
        .expect("post");
    drop(forwarder);
    let turn = capture.join("thread-live-1").join("turn-01");
    wait_until_async("the response file", Duration::from_secs(10), || {
        turn.join("model-response.json").is_file()
    })
    .await;
    writer.abort();
    for file in ["model-request.json", "layers.md", "model-response.json"] {
        let path = turn.join(file);
        let text = std::fs::read_to_string(&path).expect(file);
        // The credentials a user pasted into the prompt are taken out too.
        for secret in [API_KEY, ACCOUNT, "Bearer", "Hunter2pass", "hunter2x"] {
            assert!(!text.contains(secret), "{file} holds {secret}:\n{text}");
        }
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    let mode = std::fs::metadata(&turn).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let response: Value = json_file(&turn.join("model-response.json"), "response");
    assert_eq!(response["output"][0]["content"][0]["text"], "RECORDED");
    let request: Value = json_file(&turn.join("model-request.json"), "request");
    assert_eq!(request["body"]["metadata"]["api_key"], "<redacted>");
    assert!(request["cacheElements"].is_array(), "{request}");
}

/// With the real Codex in the stdio slot: `clawbridge app-server --capture DIR --upstream URL`
/// (no --offline) records a whole turn as it goes to the upstream and back.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_codex_turn_is_recorded_on_its_way_to_the_upstream() {
    let stub = ResponsesStub::start(StubScript {
        responses: vec![StubStep::Text("LIVE ANSWER".into())],
        ..Default::default()
    })
    .await
    .expect("stub");
    let upstream = stub.base_url();
    let dir = tempfile::tempdir().expect("dir");
    let capture = dir.path().join("capture");
    let capture_arg = capture.clone();
    let dir_path = dir.path().to_path_buf();
    let thread = tokio::task::spawn_blocking(move || {
        proxied_turns(&dir_path, &capture_arg, &upstream, &[], &["say hello"])
    })
    .await
    .expect("turn");
    let turn = capture.join(&thread).join("turn-01");
    let request: Value = json_file(&turn.join("model-request.json"), "the request was recorded");
    assert!(
        request["body"].to_string().contains("say hello"),
        "{request}"
    );
    let response: Value = json_file(
        &turn.join("model-response.json"),
        "the response was recorded",
    );
    assert_eq!(
        response["output"][0]["content"][0]["text"], "LIVE ANSWER",
        "{response}"
    );
    assert!(turn.join("layers.md").is_file());
    assert_eq!(
        stub.request_bodies().len(),
        1,
        "the upstream got the request"
    );
}

/// Codex's Responses WebSocket goes through the forwarder frame by frame (the stub speaks it as
/// the real upstream does): both turns' requests reached the stub as `response.create` frames,
/// the second naming the first's response and carrying only what came after it; the capture
/// files each request whole (the first turn's message and answer in the second's input) with
/// its response.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_responses_websocket_is_forwarded_and_recorded_whole() {
    let stub = ResponsesStub::start(StubScript {
        responses: vec![
            StubStep::Text("FIRST OVER THE SOCKET".into()),
            StubStep::Text("SECOND OVER THE SOCKET".into()),
        ],
        websocket: true,
        ..Default::default()
    })
    .await
    .expect("stub");
    let upstream = stub.base_url();
    let dir = tempfile::tempdir().expect("dir");
    let capture = dir.path().join("capture");
    let capture_arg = capture.clone();
    let dir_path = dir.path().to_path_buf();
    let thread = tokio::task::spawn_blocking(move || {
        proxied_turns(
            &dir_path,
            &capture_arg,
            &upstream,
            &[],
            &["say hello", "and once more"],
        )
    })
    .await
    .expect("turns");
    let frames: Vec<Value> = stub
        .request_bodies()
        .iter()
        .map(|body| serde_json::from_slice(body).expect("json"))
        .collect();
    assert_eq!(frames.len(), 2, "two model requests: {frames:#?}");
    for frame in &frames {
        assert_eq!(
            frame["type"], "response.create",
            "over the WebSocket: {frame}"
        );
    }
    eprintln!(
        "MEASURE: second frame: previous_response_id {} and {} input items",
        frames[1]["previous_response_id"],
        frames[1]["input"].as_array().map_or(0, Vec::len)
    );
    let turn = capture.join(&thread).join("turn-02");
    let request: Value = json_file(&turn.join("model-request.json"), "the second request");
    assert!(
        request["path"].as_str().unwrap_or("").contains("websocket"),
        "{request}"
    );
    let input = request["body"]["input"].to_string();
    for part in ["say hello", "FIRST OVER THE SOCKET", "and once more"] {
        assert!(input.contains(part), "the whole prompt ({part}): {input}");
    }
    assert!(request["body"].get("previous_response_id").is_none());
    let response: Value = json_file(&turn.join("model-response.json"), "the response");
    assert_eq!(response["status"], "completed", "{response}");
    assert_eq!(
        response["output"][0]["content"][0]["text"], "SECOND OVER THE SOCKET",
        "{response}"
    );
}

/// `--no-websocket`: the forwarder answers Codex's upgrade 426 although the upstream speaks
/// WebSocket, and Codex sends the turn over HTTP (a body without a frame `type`).
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_websocket_sends_codex_to_http() {
    let stub = ResponsesStub::start(StubScript {
        responses: vec![StubStep::Text("OVER HTTP".into())],
        websocket: true,
        ..Default::default()
    })
    .await
    .expect("stub");
    let upstream = stub.base_url();
    let dir = tempfile::tempdir().expect("dir");
    let capture = dir.path().join("capture");
    let dir_path = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        proxied_turns(
            &dir_path,
            &capture,
            &upstream,
            &["--no-websocket"],
            &["say hello"],
        )
    })
    .await
    .expect("turn");
    let bodies = stub.request_bodies();
    assert_eq!(bodies.len(), 1);
    let body: Value = serde_json::from_slice(&bodies[0]).expect("json");
    assert!(body.get("type").is_none(), "an HTTP body: {body}");
}

/// A JSON file the capture wrote (`what` names it when it is missing).
fn json_file(path: &Path, what: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{what}: {error}"));
    serde_json::from_str(&text).expect("json")
}

/// Turns through `clawbridge app-server --capture` (stdio), one per message; the thread id.
fn proxied_turns(
    dir: &Path,
    capture: &Path,
    upstream: &str,
    flags: &[&str],
    messages: &[&str],
) -> String {
    let home = dir.join("codex-home");
    std::fs::create_dir_all(&home).expect("home");
    let mut child = clawbridge()
        .args(["app-server", "--codex-bin"])
        .arg(crate::e2e::codex_bin())
        .arg("--capture")
        .arg(capture)
        .args(["--upstream", upstream, "--no-check"])
        .args(flags)
        .args([
            "-c",
            "cli_auth_credentials_store=\"ephemeral\"",
            "app-server",
            "--listen",
            "stdio://",
        ])
        .env("CODEX_HOME", &home)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |value: Value| writeln!(stdin, "{value}").expect("write");
    let mut next = || -> Value {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "proxy closed"
        );
        serde_json::from_str(&line).expect("json")
    };
    send(
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "openclaw", "version": "2026.9.6"}, "capabilities": {"experimentalApi": true}}}),
    );
    while next()["id"] != 1 {}
    send(json!({"method": "initialized"}));
    send(
        json!({"id": 2, "method": "thread/start", "params": {"cwd": dir, "approvalPolicy": "never", "model": "gpt-5.5", "modelProvider": "openai"}}),
    );
    let thread = loop {
        let message = next();
        if message["id"] == 2 {
            break message["result"]["thread"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{message}"))
                .to_string();
        }
    };
    for (number, text) in messages.iter().enumerate() {
        send(
            json!({"id": 3 + number, "method": "turn/start", "params": {"threadId": thread, "input": [{"type": "text", "text": text}]}}),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "no turn/completed");
            let message = next();
            if message["method"] == "turn/completed" {
                assert_eq!(
                    message["params"]["turn"]["status"], "completed",
                    "{message}"
                );
                break;
            }
        }
    }
    drop(stdin);
    let _ = wait_for("the proxy's end", Duration::from_secs(15), || {
        child.try_wait().expect("wait")
    });
    // The writer finishes what it holds as the proxy ends.
    thread
}

/// A captured request document as the writer files it (with fingerprints of the raw body).
fn capture_file(dir: &Path, thread: &str, turn: usize, number: usize, body: &Value) {
    let folder = dir.join(thread).join(format!("turn-{turn:02}"));
    std::fs::create_dir_all(&folder).expect("folder");
    let suffix = if number == 1 {
        String::new()
    } else {
        format!(".{number}")
    };
    // The clock is masked in the file, as the writer masks it; the fingerprints are not.
    let masked = serde_json::to_string(body)
        .expect("json")
        .replace("12:00:01", "<time>")
        .replace("12:00:02", "<time>");
    let document = json!({
        "path": "/v1/responses",
        "headers": {},
        "body": serde_json::from_str::<Value>(&masked).expect("json"),
        "cacheElements": cache_fingerprints(body),
    });
    std::fs::write(
        folder.join(format!("model-request{suffix}.json")),
        document.to_string(),
    )
    .expect("write");
}

fn message(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
}

fn tool(name: &str) -> Value {
    json!({"type": "function", "name": name, "description": format!("The {name} tool."), "parameters": {"type": "object"}})
}

fn body(developer: &str, tools: &[&str], extra: &[Value]) -> Value {
    let mut input = vec![
        message("developer", "You are Codex, a coding agent."),
        message("developer", developer),
        message("user", "What is on my plate today?"),
    ];
    input.extend_from_slice(extra);
    json!({
        "model": "gpt-5.5",
        "instructions": "Base instructions.",
        "tools": tools.iter().map(|name| tool(name)).collect::<Vec<_>>(),
        "input": input,
        "prompt_cache_key": "thread",
    })
}

fn cache_report(paths: &[PathBuf]) -> (i32, Value, String) {
    let args: Vec<String> = paths
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    let mut json_args = vec!["cache-report", "--json", "--fail-on-break"];
    json_args.extend(args.iter().map(String::as_str));
    let (code, stdout, stderr) = run_cli(&json_args);
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}\n{stderr}"));
    let mut text_args = vec!["cache-report"];
    text_args.extend(args.iter().map(String::as_str));
    let (_, text, _) = run_cli(&text_args);
    (code, report, text)
}

/// `cache-report` on synthetic threads gives the exact verdicts: an append-only thread holds; a
/// rewritten developer instruction, a reordered tool list and a clock in the developer
/// instructions (masked in the files, seen through the fingerprints) each break at the element
/// named with its layer.
#[test]
fn cache_report_names_the_layer_that_breaks_each_thread() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let call =
        json!({"type": "function_call", "name": "agents_list", "arguments": "{}", "call_id": "c1"});
    let output = json!({"type": "function_call_output", "call_id": "c1", "output": "main"});
    // Append-only: a tool call's continuation, then the next turn.
    let first = body("Be kind.", &["exec", "agents_list"], &[]);
    capture_file(root, "append", 1, 1, &first);
    capture_file(
        root,
        "append",
        1,
        2,
        &body(
            "Be kind.",
            &["exec", "agents_list"],
            &[call.clone(), output.clone()],
        ),
    );
    capture_file(
        root,
        "append",
        2,
        1,
        &body(
            "Be kind.",
            &["exec", "agents_list"],
            &[call.clone(), output.clone(), message("user", "Thanks.")],
        ),
    );
    // A rewritten instruction.
    capture_file(root, "rewrite", 1, 1, &first);
    capture_file(
        root,
        "rewrite",
        2,
        1,
        &body(
            "Be kind. Today is a holiday.",
            &["exec", "agents_list"],
            &[],
        ),
    );
    // A reordered tool list.
    capture_file(root, "reorder", 1, 1, &first);
    capture_file(
        root,
        "reorder",
        2,
        1,
        &body("Be kind.", &["agents_list", "exec"], &[]),
    );
    // A clock in the developer instructions.
    capture_file(
        root,
        "clock",
        1,
        1,
        &body("Be kind. Now: 12:00:01.", &["exec"], &[]),
    );
    capture_file(
        root,
        "clock",
        2,
        1,
        &body("Be kind. Now: 12:00:02.", &["exec"], &[]),
    );
    let (code, report, text) = cache_report(&[root.to_path_buf()]);
    assert_eq!(code, 1, "--fail-on-break: {text}");
    let thread = |name: &str| -> Vec<Value> {
        report["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .find(|thread| thread["thread"] == name)
            .unwrap_or_else(|| panic!("{name}: {report:#}"))["requests"]
            .as_array()
            .expect("requests")
            .clone()
    };
    let verdicts = |name: &str| -> Vec<String> {
        thread(name)
            .iter()
            .map(|request| request["verdict"].as_str().expect("verdict").to_string())
            .collect()
    };
    assert_eq!(verdicts("append"), ["first", "appendOnly", "appendOnly"]);
    assert_eq!(verdicts("rewrite"), ["first", "rewrite"]);
    assert_eq!(verdicts("reorder"), ["first", "rewrite"]);
    assert_eq!(verdicts("clock"), ["first", "rewrite"]);
    let broke = |name: &str| thread(name)[1]["cacheBreak"].clone();
    // instructions, 2 tools, Codex's developer message, then the OpenClaw one: element 5.
    assert_eq!(broke("rewrite")["position"], "input[1]");
    assert_eq!(broke("rewrite")["element"], 4);
    assert!(
        broke("rewrite")["diff"]
            .as_str()
            .expect("diff")
            .contains("+developer")
            || broke("rewrite")["diff"]
                .as_str()
                .expect("diff")
                .contains("holiday"),
        "{}",
        broke("rewrite")
    );
    assert_eq!(broke("reorder")["position"], "tools[0]");
    assert_eq!(broke("reorder")["label"], "Tool `agents_list` schema");
    assert_eq!(broke("clock")["position"], "input[1]");
    assert!(
        broke("clock")["diff"]
            .as_str()
            .expect("diff")
            .contains("masks"),
        "the files look the same; the fingerprints tell: {}",
        broke("clock")
    );
    // The shared prefix of the rewrite: the instructions, both tools, Codex's developer message
    // and the start of the changed one, in o200k_base tokens.
    let rewrite = &thread("rewrite")[1];
    assert_eq!(rewrite["sharedElements"], 4);
    assert!(rewrite["sharedTokens"].as_u64() > Some(10), "{rewrite}");
    assert!(text.contains("REWRITE"), "{text}");
    assert!(text.contains("append-only"), "{text}");
    // Without breaks, --fail-on-break passes.
    let (code, _, _) = cache_report(&[root.join("append")]);
    assert_eq!(code, 0);
    // The HTML view: one self-contained page (nothing fetched), the break outlined.
    let html = root.join("report.html");
    let (code, _, stderr) = run_cli(&[
        "cache-report",
        &root.display().to_string(),
        "--html",
        &html.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("<script"));
    assert_eq!(
        page.matches("seg shared broken").count() + page.matches("seg broken").count(),
        3,
        "three breaks outlined"
    );
    assert!(page.contains("Tool `agents_list` schema"));
}

/// The committed real-OpenClaw captures (one session: the first turn, a tool call and its
/// continuation, the resumed turn), in order: what the report says of OpenClaw's Codex path.
#[test]
fn cache_report_on_the_real_openclaw_captures() {
    let raw = repo_root().join("fixtures/prompt-snapshots/openclaw-raw/2026.9.6");
    let files = [
        raw.join("direct-turn/model-request.json"),
        raw.join("tool-call/model-request.json"),
        raw.join("tool-call/model-request.2.json"),
        raw.join("resumed-turn/model-request.json"),
    ];
    let (_, report, text) = cache_report(&files);
    let requests = report["threads"][0]["requests"]
        .as_array()
        .expect("requests")
        .clone();
    let verdicts: Vec<&str> = requests
        .iter()
        .map(|request| request["verdict"].as_str().expect("verdict"))
        .collect();
    let root = repo_root().display().to_string();
    insta::assert_snapshot!("cache_report_openclaw_raw", text.replace(&root, "<repo>"));
    assert_eq!(verdicts.len(), 4, "{verdicts:?}");
    assert_eq!(
        verdicts[2], "appendOnly",
        "a tool call's continuation appends: {text}"
    );
}

/// A TLS upstream on loopback with a certificate from a CA made here: (its base URL, the CA's
/// PEM). It answers every request with a short event stream.
async fn tls_upstream() -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (acceptor, ca_pem) = crate::util::tls_acceptor();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buffer = [0u8; 8192];
                loop {
                    let Ok(read) = tls.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text[..end]
                            .lines()
                            .find_map(|line| {
                                line.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().to_string())
                            })
                            .and_then(|value| value.parse().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let item = json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "OVER TLS"}]}});
                let done = json!({"type": "response.completed", "response": {"id": "r1", "status": "completed", "usage": {"input_tokens": 7, "input_tokens_details": {"cached_tokens": 3}, "output_tokens": 2}}});
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: response.output_item.done\ndata: {item}\n\nevent: response.completed\ndata: {done}\n\n"
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (format!("https://127.0.0.1:{port}/v1"), ca_pem)
}

/// A Responses WebSocket upstream over TLS: it accepts the upgrade at `/v1/responses`, takes
/// one `response.create` frame and answers two events. Its base URL and the CA's PEM.
async fn tls_websocket_upstream() -> (String, String) {
    use tokio_util::compat::TokioAsyncReadCompatExt;
    let (acceptor, ca_pem) = crate::util::tls_acceptor();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut server = soketto::handshake::Server::new(tls.compat());
                let Ok(request) = server.receive_request().await else {
                    return;
                };
                if request.path() != "/v1/responses" {
                    let _ = server
                        .send_response(&soketto::handshake::server::Response::Reject {
                            status_code: 404,
                        })
                        .await;
                    return;
                }
                let accept = soketto::handshake::server::Response::Accept {
                    key: request.key(),
                    protocol: None,
                };
                if server.send_response(&accept).await.is_err() {
                    return;
                }
                let (mut sender, mut receiver) = server.into_builder().finish();
                let mut frame = Vec::new();
                if receiver.receive_data(&mut frame).await.is_err() {
                    return;
                }
                let item = json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "OVER TLS SOCKET"}]}});
                let done = json!({"type": "response.completed", "response": {"id": "r-ws", "status": "completed", "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}});
                for event in [item, done] {
                    let _ = sender.send_text(event.to_string()).await;
                }
                let _ = sender.flush().await;
                let _ = receiver.receive_data(&mut frame).await;
            });
        }
    });
    (format!("https://127.0.0.1:{port}/v1"), ca_pem)
}

/// The Responses WebSocket over TLS: with the CA given the upgrade goes through, a frame goes
/// up and the events come back, and both are recorded; without it the unknown CA is refused
/// (502 to the upgrade, nothing sent in clear).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_websocket_upstreams_need_a_trusted_ca() {
    use tokio_util::compat::TokioAsyncReadCompatExt;
    let (upstream, ca_pem) = tls_websocket_upstream().await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).expect("ca");
    for trusted in [true, false] {
        let (sink, mut recorded) = tokio::sync::mpsc::channel(16);
        let forwarder =
            forwarder_trusting(upstream.clone(), trusted.then(|| ca.clone()), sink).await;
        let addr = forwarder.addr;
        let base = forwarder.base_url();
        let path = format!(
            "{}/responses",
            base.split_once(&addr.to_string()).expect("path").1
        );
        let socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let host = addr.to_string();
        let mut client = soketto::handshake::Client::new(socket.compat(), &host, &path);
        let bearer = format!("Bearer {API_KEY}");
        let headers = [soketto::handshake::client::Header {
            name: "Authorization",
            value: bearer.as_bytes(),
        }];
        client.set_headers(&headers);
        let answer = client.handshake().await.expect("handshake");
        if !trusted {
            assert!(
                matches!(
                    answer,
                    soketto::handshake::ServerResponse::Rejected { status_code: 502 }
                ),
                "an unknown CA is refused: {answer:?}"
            );
            continue;
        }
        assert!(
            matches!(answer, soketto::handshake::ServerResponse::Accepted { .. }),
            "{answer:?}"
        );
        let (mut sender, mut receiver) = client.into_builder().finish();
        let frame = json!({"type": "response.create", "model": "gpt-5.5", "instructions": "Be brief.",
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi over tls"}]}]});
        sender.send_text(frame.to_string()).await.expect("send");
        sender.flush().await.expect("flush");
        let mut events = Vec::new();
        for _ in 0..2 {
            let mut data = Vec::new();
            receiver.receive_data(&mut data).await.expect("event");
            events.push(String::from_utf8_lossy(&data).into_owned());
        }
        assert!(events[0].contains("OVER TLS SOCKET"), "{events:?}");
        let Some(Recorded::Request { request, .. }) = recorded.recv().await else {
            panic!("the request was recorded");
        };
        assert!(request.path.contains("websocket"), "{}", request.path);
        assert!(request.body.to_string().contains("hi over tls"));
        assert!(
            request.body.get("type").is_none(),
            "filed as HTTP carries it"
        );
        let Some(Recorded::Response { response, .. }) = recorded.recv().await else {
            panic!("the response was recorded");
        };
        assert_eq!(response["status"], "completed", "{response}");
        assert_eq!(
            response["usage"]["input_tokens_details"]["cached_tokens"],
            4
        );
        assert_eq!(
            response["output"][0]["content"][0]["text"],
            "OVER TLS SOCKET"
        );
    }
}

/// TLS to the upstream: with the CA given (`--upstream-ca`) the turn goes through and is
/// recorded; without it the unknown CA is refused (502, nothing sent in clear).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_upstreams_need_a_trusted_ca() {
    let (upstream, ca_pem) = tls_upstream().await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).expect("ca");
    for (extra_ca, expected) in [(Some(ca.clone()), 200), (None, 502)] {
        let (sink, mut recorded) = tokio::sync::mpsc::channel(16);
        let forwarder = forwarder_trusting(upstream.clone(), extra_ca, sink).await;
        let base = forwarder.base_url();
        let (_, answer) = tokio::task::spawn_blocking(move || post(&base, &request_body()))
            .await
            .expect("post");
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {expected}")),
            "{expected}: {text}"
        );
        if expected == 200 {
            assert!(text.contains("OVER TLS"), "{text}");
            let _request = recorded.recv().await;
            let Some(Recorded::Response { response, .. }) = recorded.recv().await else {
                panic!("the response was recorded");
            };
            assert_eq!(
                response["usage"]["input_tokens_details"]["cached_tokens"],
                3
            );
            assert_eq!(response["output"][0]["content"][0]["text"], "OVER TLS");
        }
    }
}

/// Every model-request and model-response file under `dir`.
fn captured(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut requests = Vec::new();
    let mut responses = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                folders.push(path);
            } else if name.starts_with("model-request") {
                requests.push(path);
            } else if name.starts_with("model-response") {
                responses.push(path);
            }
        }
    }
    (requests, responses)
}

/// `clawbridge run --offline --capture DIR`: the forwarder sits between Codex and the stub as it
/// would before the real upstream; the turn's request and response are filed.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn run_capture_records_the_turn() {
    let dir = tempfile::tempdir().expect("dir");
    let capture = dir.path().join("capture");
    let bin = crate::e2e::codex_bin();
    let (code, stdout, stderr) = run_cli(&[
        "run",
        &repo_root()
            .join("fixtures/runs/telegram-direct.json")
            .display()
            .to_string(),
        "--offline",
        "--codex-bin",
        &bin.display().to_string(),
        "--capture",
        &capture.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (requests, responses) = captured(&capture);
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(responses.len(), 1, "{responses:?}");
    let response: Value =
        serde_json::from_str(&std::fs::read_to_string(&responses[0]).expect("response"))
            .expect("json");
    assert_eq!(response["status"], "completed", "{response}");
    let (code, report, _) = cache_report(&[capture]);
    assert_eq!(code, 0);
    assert_eq!(report["threads"][0]["requests"][0]["verdict"], "first");
}

/// `clawbridge serve --offline --capture DIR --transcript DIR`: every run's model traffic is
/// recorded, labelled and redacted as the endpoint's is (the developer instructions serve sent
/// named as OpenClaw's, the workspace as `<workspace>`, the title naming serve and Codex's
/// version), and every line between serve and its app-server is in the transcript, checked
/// against Codex's schema (`app-server report`) and audited (`audit`), as for the endpoint.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_capture_records_every_run() {
    use crate::rpc::client::ClientT;
    let state = tempfile::tempdir().expect("state");
    let capture = state.path().join("capture");
    let transcript = state.path().join("transcript");
    let settings = clawbridge::ServeConfig {
        live_capture: Some(clawbridge::LiveCaptureSettings {
            dir: capture.clone(),
            ..Default::default()
        }),
        transcript: Some(transcript.clone()),
        ..crate::serve::config(crate::e2e::codex_bin(), state.path(), None, vec![])
    };
    let workspace = settings.workspace_roots[0].join("workspace");
    let running = clawbridge::serve(settings).await.expect("serve");
    let client = crate::serve::connect(&running).await;
    let document = crate::serve::run_document("telegram-direct.json");
    let started: Value = client
        .request("bridge.runStart", crate::rpc::rpc_params![document])
        .await
        .expect("run");
    let events = crate::serve::follow(&client, started["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    running.stop().await;
    let (requests, responses) = captured(&capture);
    assert_eq!(
        (requests.len(), responses.len()),
        (1, 1),
        "{requests:?} {responses:?}"
    );

    // Labelled and redacted as the endpoint's captures are.
    let request = std::fs::read_to_string(&requests[0]).expect("request");
    let workspace = workspace.canonicalize().expect("workspace");
    assert!(
        !request.contains(&workspace.display().to_string()) && request.contains("<workspace>"),
        "the workspace is redacted: {}",
        request
            .lines()
            .filter(|line| line.contains("workspace"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let layers = std::fs::read_to_string(
        requests[0].with_file_name(
            requests[0]
                .file_name()
                .expect("name")
                .to_string_lossy()
                .replace("model-request", "layers")
                .replace(".json", ".md"),
        ),
    )
    .expect("layers");
    assert!(
        layers.contains("OpenClaw developer instructions"),
        "serve's developer instructions are told apart: {layers}"
    );
    assert!(
        layers.contains("through clawbridge serve") && layers.contains("Codex 0.1"),
        "{}",
        layers.lines().next().unwrap_or_default()
    );

    // The transcript: one folder per app-server connection, one file per thread.
    let connection = transcript.join("connection-1");
    let files: Vec<PathBuf> = std::fs::read_dir(&connection)
        .expect("connection-1")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    let all: String = files
        .iter()
        .map(|file| std::fs::read_to_string(file).expect("transcript"))
        .collect();
    for method in [
        "\"initialize\"",
        "\"thread/start\"",
        "\"turn/start\"",
        "\"turn/completed\"",
    ] {
        assert!(all.contains(method), "{method} in the transcript");
    }
    let (code, shown, stderr) = run_cli(&["transcript", "show", &transcript.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(shown.contains("turn"), "{shown}");
    // Checked against the running Codex's schema, every family, no problem.
    let report = crate::util::conformance_report(&transcript);
    let table = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(
        table.contains("thread/start") && table.contains("turn/start"),
        "{table}"
    );
    // Audited: the turn's workspace files against the routing of the same run.
    let (code, audit, stderr) = run_cli(&["audit", &transcript.display().to_string(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let audit: Value = serde_json::from_str(&audit).expect("audit json");
    assert!(
        audit.to_string().contains("SOUL.md"),
        "the audit names the persona files: {audit}"
    );
    assert!(
        transcript.join("audit.jsonl").is_file(),
        "each turn audited live"
    );
}

/// `clawbridge app-server --listen ws://... --capture DIR --upstream URL`: the endpoint's members
/// send their model traffic through the recording forwarder.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_endpoint_records_its_members_model_traffic() {
    let stub = ResponsesStub::start(StubScript {
        responses: vec![StubStep::Text("THROUGH THE ENDPOINT".into())],
        ..Default::default()
    })
    .await
    .expect("stub");
    let dir = tempfile::tempdir().expect("dir");
    let turn = endpoint_turn_captured(dir.path(), &["--upstream", &stub.base_url()]).await;
    let response =
        std::fs::read_to_string(turn.join("model-response.json")).expect("response recorded");
    assert!(response.contains("THROUGH THE ENDPOINT"), "{response}");
    let request =
        std::fs::read_to_string(turn.join("model-request.json")).expect("request recorded");
    assert!(request.contains("hello endpoint"));
}

/// `clawbridge app-server --listen ws://... --offline --capture DIR`: the forwarder sits between
/// the members and the stub, as it does for `run` and `serve`; the request and its response are
/// filed (before the plane had one composer, the endpoint filed the request only).
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_endpoint_files_each_request_and_its_response() {
    let dir = tempfile::tempdir().expect("dir");
    let turn = endpoint_turn_captured(dir.path(), &["--offline"]).await;
    let request =
        std::fs::read_to_string(turn.join("model-request.json")).expect("request recorded");
    assert!(request.contains("hello endpoint"));
    let response: Value = serde_json::from_str(
        &std::fs::read_to_string(turn.join("model-response.json")).expect("response recorded"),
    )
    .expect("json");
    assert_eq!(response["status"], "completed", "{response}");
}

/// One turn through `clawbridge app-server --listen ws://... --capture DIR` with `flags`; the
/// captured turn's folder.
async fn endpoint_turn_captured(dir: &std::path::Path, flags: &[&str]) -> std::path::PathBuf {
    let capture = dir.join("capture");
    let mut args: Vec<std::ffi::OsString> = ["--app-servers", "1", "--no-check", "--capture"]
        .iter()
        .map(Into::into)
        .collect();
    args.push(capture.clone().into());
    args.extend(flags.iter().map(Into::into));
    let (child, _, mut client) = crate::endpoint::spawned_endpoint(dir, &args).await;
    let thread = crate::endpoint::start_turn(
        &mut client,
        json!({"cwd": dir, "approvalPolicy": "never", "model": "gpt-5.5", "modelProvider": "openai"}),
        "hello endpoint",
    )
    .await;
    let done = client
        .until("turn/completed", crate::endpoint::turn_completed(&thread))
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    // SIGTERM: the endpoint drains and its capture writer finishes what it holds.
    crate::endpoint::stop_spawned(child).await;
    capture.join(&thread).join("turn-01")
}

/// Protection (linear labelling): a thread of 200,000 input items (ten times the 20,000 that
/// once took `cache-report` 33 s, each element's label found by scanning every layer) and as
/// many labelled layers is reported in one pass; it used to take about an hour.
#[test]
fn cache_report_is_linear_in_a_long_thread() {
    let dir = tempfile::tempdir().expect("dir");
    let turn = dir.path().join("thr-long").join("turn-01");
    std::fs::create_dir_all(&turn).expect("turn");
    const ITEMS: usize = 200_000;
    let input: Vec<Value> = (0..ITEMS)
        .map(|index| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("m{index}")}]}))
        .collect();
    let document = json!({"path": "/v1/responses", "headers": {}, "body": {"model": "gpt-5.5", "input": input, "prompt_cache_key": "thr-long"}});
    std::fs::write(turn.join("model-request.json"), document.to_string()).expect("request");
    let mut layers = String::from("| # | Layer | Position | Chars |\n|---|---|---|---|\n");
    for index in 0..ITEMS {
        layers.push_str(&format!(
            "| {index} | User message {index} | `input[{index}].content[0]` | 2 |\n"
        ));
    }
    std::fs::write(turn.join("layers.md"), layers).expect("layers");
    let started = std::time::Instant::now();
    let (code, stdout, stderr) =
        run_cli(&["cache-report", "--json", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let elements = report["threads"][0]["requests"][0]["elements"]
        .as_array()
        .expect("elements");
    assert_eq!(elements.len(), ITEMS);
    assert_eq!(
        elements[ITEMS - 1]["label"],
        format!("User message {}", ITEMS - 1)
    );
    eprintln!("cache-report of {ITEMS} items: {:?}", started.elapsed());
}

/// Protection (reports that cannot be turned against their reader): captured text with terminal
/// escapes, BEL and a right-to-left mark reaches the text report escaped; a request file that
/// is not a captured request is skipped and named, the rest reported; the HTML page of private
/// captures is private too.
#[test]
fn cache_report_escapes_controls_skips_what_it_cannot_read_and_keeps_captures_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("captures");
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}txt.exe";
    capture_file(
        &root,
        "thr-a",
        1,
        1,
        &body("SOUL one", &["agents_list"], &[]),
    );
    capture_file(
        &root,
        "thr-a",
        2,
        1,
        &body(&format!("SOUL {hostile}"), &["agents_list"], &[]),
    );
    let broken = root.join("thr-a").join("turn-03");
    std::fs::create_dir_all(&broken).expect("turn");
    std::fs::write(broken.join("model-request.json"), "{not json").expect("broken");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).expect("mode");
    let html = dir.path().join("report.html");
    let (code, text, stderr) = run_cli(&[
        "cache-report",
        &root.display().to_string(),
        "--html",
        &html.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !text.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "controls reach the terminal: {text:?}"
    );
    assert!(text.contains("\\u{001b}"), "{text}");
    assert!(
        text.contains("REWRITE"),
        "the readable requests are reported: {text}"
    );
    assert!(
        text.contains("skipped") && text.contains("turn-03"),
        "the broken file is named: {text}"
    );
    let (_, json, _) = run_cli(&["cache-report", "--json", &root.display().to_string()]);
    let report: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        report["skipped"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    let mode = std::fs::metadata(&html).expect("html").permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the page is as private as the captures"
    );
}

/// A model request the upstream never answered is filed with its failure: the capture holds
/// the request and, as its response, what Codex was answered and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_failed_upstream_is_filed_with_its_failure() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let upstream = format!("http://{}/v1", closed.local_addr().expect("addr"));
    drop(closed);
    let (sink, mut recorded) = tokio::sync::mpsc::channel(16);
    let forwarder = forwarder_to(upstream, sink).await;
    let base = forwarder.base_url();
    let (_, answer) = tokio::task::spawn_blocking(move || post(&base, &request_body()))
        .await
        .expect("post");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 502"), "{text}");
    let Some(Recorded::Request { id, .. }) = recorded.recv().await else {
        panic!("the request was recorded");
    };
    let Some(Recorded::Response {
        id: answered,
        response,
    }) = recorded.recv().await
    else {
        panic!("the failure was filed as the response");
    };
    assert_eq!(answered, id);
    assert_eq!(response["httpStatus"], 502, "{response}");
    assert_eq!(response["status"], "failed", "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("cannot connect to the upstream")),
        "{response}"
    );
}

/// Every layer of every committed real-OpenClaw capture has a name, OpenClaw's own default model
/// (`default-model-turn`: the tools in an `additional_tools` item, Codex's base instructions as a
/// developer message, a `configuration_update` item) included: in `layers.md`, in the cache
/// report read with the writer's labels and without them (the body alone), and on the HTML page
/// no bar is left grey.
#[test]
fn every_layer_of_the_real_captures_is_named() {
    let raw = repo_root().join("fixtures/prompt-snapshots/openclaw-raw/2026.9.6");
    let generic = |label: &str| {
        label.starts_with("History item")
            || label == "Input item"
            || label.ends_with(" message") && !label.starts_with("Assistant")
            || label.contains("()")
    };
    let mut scenarios = 0;
    for entry in std::fs::read_dir(&raw).expect("captures") {
        let folder = entry.expect("entry").path();
        if !folder.is_dir() {
            continue;
        }
        scenarios += 1;
        for file in std::fs::read_dir(&folder).expect("scenario") {
            let file = file.expect("file").path();
            let name = file
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            if name.starts_with("layers") {
                let text = std::fs::read_to_string(&file).expect("layers.md");
                for label in clawbridge_labels(&text) {
                    assert!(
                        !generic(&label),
                        "{}: unnamed layer {label:?}",
                        file.display()
                    );
                }
            }
        }
        // With the writer's labels (the folder), and from the body alone (a copy without them).
        let alone = tempfile::tempdir().expect("alone");
        let copy = alone.path().join("thread/turn-01");
        std::fs::create_dir_all(&copy).expect("copy");
        for file in std::fs::read_dir(&folder).expect("scenario") {
            let file = file.expect("file").path();
            let name = file
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            if name.starts_with("model-request") {
                std::fs::copy(&file, copy.join(&name)).expect("copy");
            }
        }
        for source in [folder.clone(), alone.path().to_path_buf()] {
            let page = alone.path().join("report.html");
            let (code, stdout, stderr) = run_cli(&[
                "cache-report",
                "--json",
                &source.display().to_string(),
                "--html",
                &page.display().to_string(),
            ]);
            assert_eq!(code, 0, "{stderr}");
            let report: Value = serde_json::from_str(&stdout).expect("report");
            let mut labels = Vec::new();
            find_labels(&report, &mut labels);
            assert!(!labels.is_empty(), "{}", source.display());
            for label in labels {
                assert!(
                    !generic(&label),
                    "{}: unnamed element {label:?}",
                    source.display()
                );
            }
            let html = std::fs::read_to_string(&page).expect("page");
            assert_eq!(
                html.matches("background:#999999\" title").count(),
                0,
                "{}: a grey bar",
                source.display()
            );
        }
    }
    assert!(scenarios >= 5, "{scenarios} scenarios");
    assert!(raw.join("default-model-turn/model-request.json").is_file());
}

/// The labels of a `layers.md` table.
fn clawbridge_labels(layers_md: &str) -> Vec<String> {
    layers_md
        .lines()
        .filter(|line| line.starts_with("| ") && line.contains(" | `"))
        .filter_map(|line| line.trim_matches('|').split(" | ").nth(1))
        .map(|label| label.trim().to_string())
        .collect()
}

fn find_labels(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("label", Value::String(label)) => out.push(label.clone()),
                    _ => find_labels(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| find_labels(item, out)),
        _ => {}
    }
}
