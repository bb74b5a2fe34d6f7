//! `clawbridge serve` attacked a second time (Security 2, docs/threat-model.md): approvals under
//! the ceiling, fan-out skill trees, unbounded inputs. Each test fails when the protection it
//! names is removed.

use std::path::PathBuf;
use std::sync::Arc;

use crate::rpc::client::ClientT;
use crate::rpc::rpc_params;
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::serve_security::Fixture;

/// A folder no sandbox leaves writable: not under /tmp or $TMPDIR (Codex's workspace-write
/// sandbox leaves those writable), nor the checkout.
fn unsandboxed_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp")
        .or_else(|_| {
            let cache = dirs::cache_dir().expect("a cache folder");
            std::fs::create_dir_all(&cache).expect("cache");
            tempfile::tempdir_in(cache)
        })
        .expect("outside folder")
}

/// Answer a `toolCall` event with a successful "sent".
async fn answer_call(client: &crate::rpc::ws_client::WsClient, call: &Value) {
    let ok: Value = client
        .request(
            "bridge.toolResult",
            rpc_params![json!({"callId": call["callId"], "text": "sent", "success": true})],
        )
        .await
        .expect("toolResult");
    assert_eq!(ok["ok"], true);
}

/// A stub script whose model asks `times` times to `touch escaped` outside the sandbox
/// (`sandbox_permissions: "require_escalated"`), then ends the turn.
fn escalation_script(fixture: &Fixture, escaped: &std::path::Path, times: usize) -> PathBuf {
    let script = fixture.state.parent().expect("base").join("script.json");
    let escalate = json!({"toolCall": {"name": "exec_command", "arguments": {
        "cmd": format!("touch {}", escaped.display()),
        "sandbox_permissions": "require_escalated",
        "justification": "May I write outside the workspace?"}}});
    let mut responses = vec![escalate; times];
    responses.push(json!({"text": "done"}));
    std::fs::write(&script, json!({ "responses": responses }).to_string()).expect("script");
    script
}

/// Follow a run to its end, accepting every approval it asks for (the most a client can do).
async fn accept_everything(client: &crate::rpc::ws_client::WsClient, run_id: &str) -> Vec<Value> {
    let mut subscription = crate::serve::subscribe(client, run_id).await;
    let mut events = Vec::new();
    loop {
        let event = crate::serve::next_event(&mut subscription).await;
        if event["event"] == "approvalRequest" {
            let _ = client
                .request::<Value, _>(
                    "bridge.approval",
                    rpc_params![json!({"approvalId": event["approvalId"], "decision": "accept"})],
                )
                .await;
        }
        let end = event["event"] == "turnEnd";
        events.push(event);
        if end {
            return events;
        }
    }
}

/// Protection: the sandbox ceiling binds approvals. A model that asks to run a command outside
/// the sandbox (`sandbox_permissions: "require_escalated"`), approved by the client, still cannot
/// write outside the roots under a `workspace-write` or `read-only` ceiling.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_escalation_cannot_lift_the_ceiling() {
    codex_bin();
    for ceiling in ["workspace-write", "read-only"] {
        let fixture = Fixture::new();
        let outside = unsandboxed_dir();
        let escaped: PathBuf = outside.path().join("escaped.txt");
        let script = escalation_script(&fixture, &escaped, 2);
        let serve = fixture.serve(&[
            "--stub-script",
            &script.display().to_string(),
            "--max-sandbox",
            ceiling,
        ]);
        let client = Arc::new(serve.client().await);
        let mut document = fixture.document();
        document["approvalPolicy"] = json!("on-request");
        let started: Value = client
            .request("bridge.runStart", rpc_params![document])
            .await
            .expect("run");
        let events = accept_everything(&client, started["runId"].as_str().expect("id")).await;
        let asked: Vec<&Value> = events
            .iter()
            .filter(|event| event["event"] == "approvalRequest")
            .collect();
        assert!(
            !escaped.exists(),
            "an approved escalation wrote {} under the {ceiling} ceiling (approvals: {asked:?})",
            escaped.display()
        );
        assert!(
            asked.is_empty(),
            "no escalation reaches the client: {asked:?}"
        );
        let end = events.last().expect("end");
        assert_eq!(end["event"], "turnEnd");
        // Codex was told the bound policy, and rejected the escalation itself.
        let settings = events
            .iter()
            .find(|event| event["method"] == "thread/settings/updated")
            .expect("thread settings");
        assert_eq!(
            settings["params"]["threadSettings"]["approvalPolicy"]["granular"]["sandbox_approval"],
            false,
            "{settings}"
        );
    }
}

/// The other side of the same protection: where the operator allows full access, approvals reach
/// the client as before, and a declined escalation does not run.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_full_access_ceiling_the_client_decides_escalations() {
    codex_bin();
    let fixture = Fixture::new();
    let outside = unsandboxed_dir();
    let escaped: PathBuf = outside.path().join("escaped.txt");
    let script = escalation_script(&fixture, &escaped, 1);
    let serve = fixture.serve(&[
        "--stub-script",
        &script.display().to_string(),
        "--max-sandbox",
        "danger-full-access",
    ]);
    let client = serve.client().await;
    let mut document = fixture.document();
    document["approvalPolicy"] = json!("on-request");
    document["sandbox"] = json!("workspace-write");
    let started: Value = client
        .request("bridge.runStart", rpc_params![document])
        .await
        .expect("run");
    let run_id = started["runId"].as_str().expect("id");
    let mut subscription = crate::serve::subscribe(&client, run_id).await;
    let mut asked = 0;
    loop {
        let event = crate::serve::next_event(&mut subscription).await;
        if event["event"] == "approvalRequest" {
            asked += 1;
            let ok: Value = client
                .request(
                    "bridge.approval",
                    rpc_params![json!({"approvalId": event["approvalId"], "decision": "decline"})],
                )
                .await
                .expect("decline");
            assert_eq!(ok["ok"], true);
        }
        if event["event"] == "turnEnd" {
            break;
        }
    }
    assert_eq!(asked, 1, "the escalation was the client's to decide");
    assert!(!escaped.exists(), "a declined escalation did not run");
}

/// A workspace whose `skills/` holds one real skill and `links` links back to itself
/// (`skills/lN -> .`): without a visited set a walk six folders deep visits links^6 folders.
fn fan_out_workspace(base: &std::path::Path, links: usize) -> PathBuf {
    let workspace = base.join("fan");
    std::fs::create_dir_all(workspace.join("skills/real")).expect("skills");
    std::fs::write(
        workspace.join("skills/real/SKILL.md"),
        "---\nname: real\ndescription: The one real skill.\n---\nBody.\n",
    )
    .expect("skill");
    for index in 0..links {
        std::os::unix::fs::symlink(".", workspace.join(format!("skills/l{index}"))).expect("link");
    }
    workspace
}

/// Wait up to `limit` for a child, killing it if it is still running.
fn wait_or_kill(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let status = crate::util::poll(limit, || child.try_wait().expect("wait"));
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// Protection: the skills walk visits each real folder once. 14 links back to `.` are 14^6
/// (7.5 million) folders to a walk without a visited set; with one, the CLI translates at once
/// and finds the real skill once.
#[test]
fn a_symlink_fan_out_is_walked_once() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = fan_out_workspace(dir.path(), 14);
    let run = dir.path().join("run.json");
    std::fs::write(
        &run,
        json!({"workspace": workspace, "message": "hi"}).to_string(),
    )
    .expect("run");
    let mut child = crate::util::clawbridge()
        .args(["params"])
        .arg(&run)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let status = wait_or_kill(&mut child, std::time::Duration::from_secs(60));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read");
    assert!(
        !stderr.contains("stopped early"),
        "each folder once is far below the walk's entry cap: {stderr}"
    );
    assert!(
        status.is_some_and(|status| status.success()),
        "params over a fan-out tree did not finish within a minute: {status:?}"
    );
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut stdout)
        .expect("read");
    assert_eq!(
        stdout.matches("The one real skill.").count(),
        1,
        "the real skill is listed once"
    );
}

/// Protection: the walk's entry cap. A skills folder of more entries than a walk may look at
/// (20,000) is cut off with a warning naming it, instead of being walked to the end.
#[test]
fn a_skills_tree_past_the_entry_cap_is_cut_off_with_a_warning() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = dir.path().join("wide");
    let skills = workspace.join("skills");
    std::fs::create_dir_all(&skills).expect("skills");
    for index in 0..20_100 {
        std::fs::write(skills.join(format!("f{index}")), "").expect("file");
    }
    let run = dir.path().join("run.json");
    std::fs::write(
        &run,
        json!({"workspace": workspace, "message": "hi"}).to_string(),
    )
    .expect("run");
    let output = crate::util::clawbridge()
        .args(["context"])
        .arg(&run)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .expect("context");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("skills walk stopped early") && stderr.contains("20000 entries"),
        "{stderr}"
    );
}

/// Protection: fan-out trees cannot take the service down. Nine concurrent `bridge.params` on
/// such a tree leave the blocking pool free for another workspace's request, and SIGTERM still
/// ends serve at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_requests_leave_the_service_responsive_and_stoppable() {
    let fixture = Fixture::new();
    let fan = fan_out_workspace(&fixture.root, 14);
    let mut serve = fixture.serve(&["--request-timeout", "20"]);
    let client = Arc::new(serve.client().await);
    let mut calls = Vec::new();
    for _ in 0..9 {
        let client = Arc::clone(&client);
        let document = json!({"workspace": fan, "message": "hi"});
        calls.push(tokio::spawn(async move {
            client
                .request::<Value, _>("bridge.params", rpc_params![document])
                .await
        }));
    }
    for call in calls {
        let answer = call
            .await
            .expect("task")
            .expect("params over the fan-out tree");
        let text = answer.to_string();
        assert_eq!(text.matches("The one real skill.").count(), 1);
    }
    let other: Value = client
        .request("bridge.params", rpc_params![fixture.document()])
        .await
        .expect("another workspace is served");
    assert!(other["threadStart"].is_object(), "{other}");
    let pid = serve.child.id() as i32;
    // SAFETY-free: a plain signal to our own child.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = wait_or_kill(&mut serve.child, std::time::Duration::from_secs(15));
    assert!(status.is_some(), "serve ended on SIGTERM");
}

/// Protection: the offline Codex home lies where a sandboxed turn cannot write it. It is created
/// in the 0700 state dir (not under $TMPDIR), and serve warns when a home lies under a temp
/// folder or a workspace root (here the test's state dir is under $TMPDIR, so it warns; one under
/// /var/tmp does not).
#[test]
fn the_offline_codex_home_is_private_and_an_exposed_one_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Fixture::new();
    let serve = fixture.serve(&[]);
    let home = fixture.state.join("offline-codex-home");
    assert!(
        home.join("config.toml").is_file(),
        "the home is in the state dir"
    );
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
    };
    assert_eq!(mode(&fixture.state), 0o700);
    assert_eq!(mode(&home), 0o700);
    crate::util::poll(std::time::Duration::from_secs(10), || {
        serve
            .stderr()
            .contains("writable by sandboxed turns")
            .then_some(())
    });
    assert!(
        serve.stderr().contains("writable by sandboxed turns")
            && serve
                .stderr()
                .contains(&std::env::temp_dir().display().to_string()),
        "{}",
        serve.stderr()
    );
    drop(serve);

    let private = unsandboxed_dir();
    let state = private.path().join("state");
    let serve = crate::serve_security::Serve::start(&fixture.root, &state, &[]);
    assert!(state.join("offline-codex-home/config.toml").is_file());
    // The start notice is written at once, the token line with any warning.
    crate::util::wait_until(
        "the start notice",
        std::time::Duration::from_secs(5),
        || serve.stderr().contains("bearer token in"),
    );
    assert!(
        !serve.stderr().contains("writable by sandboxed turns"),
        "{}",
        serve.stderr()
    );
}

/// Protection: a planted `<state-dir>/token` link is refused, and its target keeps its mode.
#[test]
fn a_symlinked_token_file_is_refused_and_its_target_untouched() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Fixture::new();
    std::fs::create_dir_all(&fixture.state).expect("state");
    let target = fixture.root.parent().expect("base").join("victim-key");
    std::fs::write(&target, "0123456789abcdef0123456789abcdef\n").expect("target");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::os::unix::fs::symlink(&target, fixture.state.join("token")).expect("link");
    let output = crate::util::clawbridge()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--offline",
            "--codex-bin",
            "/bin/true",
        ])
        .arg("--workspace-root")
        .arg(&fixture.root)
        .arg("--state-dir")
        .arg(&fixture.state)
        .env_remove("CLAWBRIDGE_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
}

/// Protection: a run document is bounded before it is parsed (`--max-run-bytes`), and every
/// identifier is bounded where the document is read (a 10 KiB `sessionKey` would otherwise be a
/// key of the state file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_documents_and_identifiers_are_refused_naming_the_bound() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--max-run-bytes", "100000"]);
    let client = serve.client().await;
    let mut big = fixture.document();
    big["message"] = json!("x".repeat(200_000));
    let text = crate::serve_security::error_text(
        client
            .request("bridge.params", rpc_params![big.clone()])
            .await,
    );
    assert!(
        text.contains("--max-run-bytes") && text.contains("InvalidParams"),
        "{text}"
    );
    let text = crate::serve_security::error_text(
        client.request("bridge.runStart", rpc_params![big]).await,
    );
    assert!(text.contains("--max-run-bytes"), "{text}");
    for field in ["sessionKey", "agentId", "threadId"] {
        let mut document = fixture.document();
        document[field] = json!("k".repeat(10 * 1024));
        let text = crate::serve_security::error_text(
            client.request("bridge.params", rpc_params![document]).await,
        );
        assert!(
            text.contains(field) && text.contains("at most"),
            "{field}: {text}"
        );
    }
    let mut document = fixture.document();
    document["sessionKey"] = json!("agent:main:telegram:direct:42");
    let fine: Value = client
        .request("bridge.params", rpc_params![document])
        .await
        .expect("a normal session key");
    assert!(fine["threadStart"].is_object());
}

/// A stub script whose first answer calls the `message` tool, then `done`, then `more`.
fn tool_call_script(fixture: &Fixture, more: &[Value]) -> std::path::PathBuf {
    let script = fixture.state.parent().expect("base").join("script.json");
    let mut responses = vec![
        json!({"toolCall": {"name": "message", "arguments": {"action": "send", "message": "hi"}}}),
        json!({"text": "done"}),
    ];
    responses.extend_from_slice(more);
    std::fs::write(&script, json!({ "responses": responses }).to_string()).expect("script");
    script
}

/// Protection: runs in progress are bounded (`--max-runs`). With one run waiting on its tool
/// call, a second is refused with 4290, and once the first ends a new one starts.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_progress_are_bounded() {
    codex_bin();
    let fixture = Fixture::new();
    let script = tool_call_script(&fixture, &[]);
    let serve = fixture.serve(&[
        "--stub-script",
        &script.display().to_string(),
        "--max-runs",
        "1",
    ]);
    let client = serve.client().await;
    let mut document = fixture.document();
    document["tools"] = json!([{"name": "message", "description": "Send a message.", "inputSchema": {"type": "object"}}]);
    document["directTools"] = json!(["message"]);
    let first: Value = client
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("first run");
    let first_id = first["runId"].as_str().expect("id").to_string();
    let events =
        crate::serve::events_until(&client, &first_id, |event| event["event"] == "toolCall").await;
    let call = events.last().expect("tool call").clone();
    assert_eq!(call["event"], "toolCall", "{events:?}");
    let text = crate::serve_security::error_text(
        client
            .request("bridge.runStart", rpc_params![fixture.document()])
            .await,
    );
    assert!(
        text.contains("4290") && text.contains("--max-runs"),
        "{text}"
    );
    answer_call(&client, &call).await;
    crate::serve::events_until(&client, &first_id, |event| event["event"] == "turnEnd").await;
    let again: Value = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await
        .expect("a run once the first ended");
    assert!(again["runId"].is_string());
}

/// True once the server closed `stream` (read gives EOF or a reset) within `limit`.
fn closed_within(stream: &mut std::net::TcpStream, limit: std::time::Duration) -> bool {
    use std::io::Read;
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => !matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Protection: every accepted socket counts, and an unauthenticated one gets a short handshake
/// deadline. With `--max-connections 4`, 20 silent sockets fill the slots (4 + 16), the next one
/// is closed at once, the silent ones are closed within about 10 s, and then an authenticated
/// client is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_are_counted_and_closed_after_the_handshake_deadline() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--max-connections", "4"]);
    let mut silent: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(serve.addr).expect("connect"))
        .collect();
    // Accepted in the order they connected: the extra socket comes after every slot is taken.
    let mut extra = std::net::TcpStream::connect(serve.addr).expect("connect");
    assert!(
        closed_within(&mut extra, std::time::Duration::from_secs(3)),
        "a socket past every slot is closed at once"
    );
    for stream in &mut silent {
        assert!(
            closed_within(stream, std::time::Duration::from_secs(20)),
            "a silent socket is closed after the handshake deadline"
        );
    }
    let client = serve.client().await;
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("served after the silent sockets are gone");
    assert!(status["runs"].is_array());
}

/// Protection: at the descriptor limit the accept loop backs off instead of spinning. Serve under
/// `ulimit -n 64` with 100 sockets pushed at it uses almost no CPU while they are open.
#[test]
fn a_full_file_table_does_not_spin_the_accept_loop() {
    let fixture = Fixture::new();
    let mut command = std::process::Command::new("prlimit");
    command
        .args(["--nofile=64:64", "--"])
        .arg(env!("CARGO_BIN_EXE_clawbridge"));
    let serve = crate::serve_security::Serve::spawn(command, &fixture.root, &fixture.state, &[]);
    let mut held = Vec::new();
    for _ in 0..100 {
        if let Ok(stream) = std::net::TcpStream::connect(serve.addr) {
            held.push(stream);
        }
    }
    let ticks = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command name.
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0)
    };
    // Not a wait for an event: a settling time, then the measurement window itself.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = ticks(serve.child.id());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let used = ticks(serve.child.id()) - before;
    // Spinning takes a whole core: about 200 ticks in 2 s (USER_HZ 100).
    assert!(
        used < 40,
        "serve used {used} CPU ticks in 2 s at its descriptor limit"
    );
    drop(held);
}

/// `clawbridge client add NAME` for a state dir: the new token.
fn add_client(state: &std::path::Path, name: &str, operator: bool) -> String {
    let mut command = crate::util::clawbridge();
    command
        .args(["client", "add", name, "--state-dir"])
        .arg(state);
    if operator {
        command.arg("--operator");
    }
    let output = command.output().expect("client add");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Protection: clients are isolated from each other. With named tokens, bob sees none of
/// alice's runs, cannot subscribe to one, answer its tool call, interrupt it, or take her session
/// or thread; the operator sees everything, with the client named.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_see_or_touch_another_clients_runs() {
    use crate::rpc::client::SubscriptionClientT;
    codex_bin();
    let fixture = Fixture::new();
    let alice_token = add_client(&fixture.state, "alice", false);
    let bob_token = add_client(&fixture.state, "bob", false);
    let list = crate::util::clawbridge()
        .args(["client", "list", "--state-dir"])
        .arg(&fixture.state)
        .output()
        .expect("list");
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains("alice\tclient") && !listed.contains(&alice_token),
        "{listed}"
    );
    let script = fixture.state.parent().expect("base").join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"toolCall": {"name": "message", "arguments": {"action": "send", "message": "secret plan"}}},
            {"text": "done"}
        ]})
        .to_string(),
    )
    .expect("script");
    let serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let alice = serve.client_with(&alice_token).await;
    let bob = serve.client_with(&bob_token).await;
    let operator = serve.client().await;
    let mut document = fixture.document();
    document["sessionKey"] = json!("agent:main:telegram:direct:alice");
    document["tools"] = json!([{"name": "message", "description": "Send a message.", "inputSchema": {"type": "object"}}]);
    document["directTools"] = json!(["message"]);
    let started: Value = alice
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("alice's run");
    let run_id = started["runId"].as_str().expect("id").to_string();
    let thread_id = started["threadId"].as_str().expect("thread").to_string();
    let events =
        crate::serve::events_until(&alice, &run_id, |event| event["event"] == "toolCall").await;
    let call = events.last().expect("call").clone();
    assert_eq!(call["event"], "toolCall");

    let status: Value = bob
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(status["runs"], json!([]), "{status}");
    assert_eq!(status["sessions"], 0);
    assert_eq!(status["pendingToolCalls"], 0);
    let text = format!(
        "{:?}",
        bob.subscribe::<Value, _>(
            "bridge.subscribeRun",
            rpc_params![run_id.clone()],
            "bridge.unsubscribeRun"
        )
        .await
        .err()
    );
    assert!(text.contains("4004") || text.contains("no run"), "{text}");
    let text = crate::serve_security::error_text(
        bob.request(
            "bridge.toolResult",
            rpc_params![json!({"callId": call["callId"], "text": "forged", "success": true})],
        )
        .await,
    );
    assert!(text.contains("no pending tool call"), "{text}");
    let text = crate::serve_security::error_text(
        bob.request("bridge.runInterrupt", rpc_params![json!({"runId": run_id})])
            .await,
    );
    assert!(text.contains("no run"), "{text}");
    let text = crate::serve_security::error_text(
        bob.request("bridge.runStart", rpc_params![document.clone()])
            .await,
    );
    assert!(
        text.contains("sessionKey") && text.contains("another client"),
        "{text}"
    );
    let mut thief = fixture.document();
    thief["threadId"] = json!(thread_id);
    let text =
        crate::serve_security::error_text(bob.request("bridge.runStart", rpc_params![thief]).await);
    assert!(
        text.contains("threadId") && text.contains("another client"),
        "{text}"
    );

    let all: Value = operator
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert!(
        all["runs"]
            .as_array()
            .is_some_and(|runs| runs.iter().any(|run| run["client"] == "alice")),
        "{all}"
    );
    answer_call(&alice, &call).await;
    let events =
        crate::serve::events_until(&alice, &run_id, |event| event["event"] == "turnEnd").await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    let sessions = crate::util::stored_sessions(&fixture.state).to_string();
    assert!(sessions.contains("\"owner\":\"alice\""), "{sessions}");
}

/// Protection: `serve --offline` without `--codex-home` keeps its Codex home in the state dir,
/// so a restart resumes every binding's thread instead of losing it with a temp folder.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_restart_without_a_codex_home_resumes_the_sessions_thread() {
    use crate::serve::{config, connect, follow, run_document};
    let state = tempfile::tempdir().expect("state");
    let document = run_document("telegram-direct.json");
    let running = clawbridge::serve(config(codex_bin(), state.path(), None, vec![]))
        .await
        .expect("serve");
    let client = connect(&running).await;
    let first: Value = client
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("run 1");
    let events = follow(&client, first["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    drop(client);
    running.stop().await;
    drop(running);
    let running = clawbridge::serve(config(codex_bin(), state.path(), None, vec![]))
        .await
        .expect("restart");
    let client = connect(&running).await;
    let again: Value = client
        .request("bridge.runStart", rpc_params![document])
        .await
        .expect("run 2");
    assert_eq!(again["threadId"], first["threadId"], "the binding survived");
    let events = follow(&client, again["runId"].as_str().expect("id"), None).await;
    assert_eq!(events[0]["resumed"], true, "{:?}", events[0]);
    assert_eq!(events.last().expect("end")["status"], "completed");
}

/// Protection: an app-server does not grow without bound. With `--recycle-after-threads 2`, the
/// app-server that opened two threads is replaced once its runs end; the next run gets a fresh
/// one (another pid), and a bound session resumes its thread there.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_server_is_recycled_after_its_thread_budget() {
    codex_bin();
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--recycle-after-threads", "2"]);
    let client = serve.client().await;
    let run = |key: &str| {
        let mut document = fixture.document();
        document["sessionKey"] = json!(key);
        document
    };
    let mut threads = Vec::new();
    let mut pids = Vec::new();
    for key in ["agent:main:a", "agent:main:b", "agent:main:a"] {
        let started: Value = client
            .request("bridge.runStart", rpc_params![run(key)])
            .await
            .expect("run");
        let events =
            crate::serve::events_until(&client, started["runId"].as_str().expect("id"), |event| {
                event["event"] == "turnEnd"
            })
            .await;
        assert_eq!(
            events.last().expect("end")["status"],
            "completed",
            "{events:?}"
        );
        threads.push(started["threadId"].clone());
        // The recycle follows the run's end, asynchronously: after the second run, the status
        // is read until it shows it (bounded), never before.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let status: Value = loop {
            let status: Value = client
                .request("bridge.status", rpc_params![])
                .await
                .expect("status");
            if threads.len() != 2
                || status["codex"]["recycled"] == json!(1)
                || tokio::time::Instant::now() > deadline
            {
                break status;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        pids.push((
            status["codex"]["pid"].clone(),
            status["codex"]["recycled"].clone(),
        ));
    }
    assert_eq!(
        threads[2], threads[0],
        "session a resumed its thread on the new app-server"
    );
    assert_eq!(pids[0].1, 0, "{pids:?}");
    // Recycled once its second thread's run ended: none runs until the next run starts one.
    assert_eq!(pids[1], (Value::Null, json!(1)), "{pids:?}");
    assert!(
        pids[2].0.is_number() && pids[2].0 != pids[0].0,
        "a fresh app-server: {pids:?}"
    );
    assert_eq!(pids[2].1, 1, "{pids:?}");
    let old = pids[0].0.as_u64().expect("pid");
    let gone = !std::path::Path::new(&format!("/proc/{old}")).exists()
        || std::fs::read_to_string(format!("/proc/{old}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(gone, "the recycled app-server {old} was stopped");
}

/// Protection: the state file is bounded. With `--max-sessions 2`, a third session pushes out
/// an idle binding, so the state database never grows past the bound.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_bindings_are_bounded() {
    codex_bin();
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--max-sessions", "2"]);
    let client = serve.client().await;
    for key in ["agent:main:a", "agent:main:b", "agent:main:c"] {
        let mut document = fixture.document();
        document["sessionKey"] = json!(key);
        let started: Value = client
            .request("bridge.runStart", rpc_params![document])
            .await
            .expect("run");
        crate::serve::events_until(&client, started["runId"].as_str().expect("id"), |event| {
            event["event"] == "turnEnd"
        })
        .await;
    }
    let file = crate::util::stored_sessions(&fixture.state);
    let sessions = file["sessions"].as_object().expect("sessions");
    assert_eq!(sessions.len(), 2, "{file}");
    assert!(
        sessions.contains_key("agent:main:c"),
        "the newest is kept: {file}"
    );
}

/// One masked WebSocket text frame (clients must mask), for a raw client that never reads.
fn ws_text_frame(payload: &[u8]) -> Vec<u8> {
    let mask = [0x5a, 0x17, 0xc3, 0x88];
    let mut frame = vec![0x81];
    match payload.len() {
        len if len < 126 => frame.push(0x80 | len as u8),
        len => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(
        payload
            .iter()
            .enumerate()
            .map(|(i, byte)| byte ^ mask[i % 4]),
    );
    frame
}

/// Protection: a subscriber that never reads is dropped. A raw WebSocket client subscribes 300
/// times to a finished run (each replays the whole log) and reads nothing; once its queue and
/// the socket buffers are full, serve drops it after `--subscriber-stall` (here 2 s) instead of
/// holding its events and its task forever.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_never_reads_is_dropped() {
    use std::io::Write;
    codex_bin();
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--subscriber-stall", "2"]);
    let client = serve.client().await;
    let started: Value = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await
        .expect("run");
    let run_id = started["runId"].as_str().expect("id").to_string();
    crate::serve::events_until(&client, &run_id, |event| event["event"] == "turnEnd").await;
    let mut raw = std::net::TcpStream::connect(serve.addr).expect("connect");
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {}\r\n\r\n",
        serve.addr,
        serve.token()
    );
    raw.write_all(request.as_bytes()).expect("upgrade");
    for id in 0..300 {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "bridge.subscribeRun", "params": [run_id]});
        raw.write_all(&ws_text_frame(call.to_string().as_bytes()))
            .expect("subscribe");
    }
    // Never read: wait for serve to give up on this subscriber.
    crate::util::poll(std::time::Duration::from_secs(60), || {
        serve.stderr().contains("read nothing for").then_some(())
    });
    assert!(
        serve.stderr().contains("read nothing for 2s; dropped it"),
        "{}",
        serve.stderr()
    );
    drop(raw);
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("serve still answers");
    assert!(status["runs"].is_array());
}

/// The answer methods read typed params: a bad or missing field is refused naming it, before
/// anything is looked up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_methods_refuse_bad_params_naming_the_field() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&[]);
    let client = serve.client().await;
    let cases = [
        (
            "bridge.approval",
            json!({"approvalId": "approval-x", "decision": "maybe"}),
            "decision",
        ),
        (
            "bridge.approval",
            json!({"decision": "accept"}),
            "approvalId",
        ),
        ("bridge.toolResult", json!({"text": "x"}), "callId"),
        (
            "bridge.toolResult",
            json!({"callId": "call-x", "success": "yes"}),
            "success",
        ),
        ("bridge.runInterrupt", json!({"run": 3}), "runId"),
    ];
    for (method, params, field) in cases {
        let text =
            crate::serve_security::error_text(client.request(method, rpc_params![params]).await);
        assert!(
            text.contains("InvalidParams") && text.contains(field),
            "{method}: {text}"
        );
    }
    let text = crate::serve_security::error_text(
        client
            .request(
                "bridge.toolResult",
                rpc_params![json!({"callId": "call-x", "text": "x"})],
            )
            .await,
    );
    assert!(text.contains("no pending tool call call-x"), "{text}");
}

/// Protection: a plain-HTTP client whose first request is a `runStart` queued behind its
/// session's running turn gets its answer, however long past the 10 s handshake deadline it
/// comes: the request counts as authenticated when it is read (once, the connection was closed
/// at 10 s with no answer, while the run started anyway).
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_run_start_queued_past_the_handshake_deadline_gets_its_answer() {
    codex_bin();
    let fixture = Fixture::new();
    let script = tool_call_script(&fixture, &[json!({"text": "second"})]);
    let serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let client = serve.client().await;
    let mut document = fixture.document();
    document["sessionKey"] = json!("agent:main:queued");
    document["tools"] = json!([{"name": "message", "description": "Send a message.", "inputSchema": {"type": "object"}}]);
    document["directTools"] = json!(["message"]);
    let first: Value = client
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("first run");
    let first_id = first["runId"].as_str().expect("id").to_string();
    let events =
        crate::serve::events_until(&client, &first_id, |event| event["event"] == "toolCall").await;
    let call = events.last().expect("tool call").clone();
    // The second run of the session, over plain HTTP on a new connection: it waits in the
    // session's queue while the first turn waits for its tool.
    let body =
        json!({"jsonrpc": "2.0", "id": 7, "method": "bridge.runStart", "params": [document]})
            .to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        serve.addr,
        serve.token(),
        body.len()
    );
    let addr = serve.addr;
    let answer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(40)))
            .expect("timeout");
        stream.write_all(request.as_bytes()).expect("write");
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    });
    // Past the handshake deadline, the first turn's tool is answered: the queue moves on.
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    answer_call(&client, &call).await;
    let response = tokio::task::spawn_blocking(move || answer.join().expect("reader"))
        .await
        .expect("joined");
    assert!(
        response.starts_with("HTTP/1.1 200") && response.contains("runId"),
        "the queued runStart's answer: {response:?}"
    );
}
