//! `clawbridge serve` tried as an attacker would, from a web page and from another local
//! process, against the real binary (docs/threat-model.md). Each test names the protection it
//! checks and fails when that protection is removed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::rpc::client::ClientT;
use crate::rpc::rpc_params;
use crate::rpc::ws_client::{WsClient, WsClientBuilder};
use serde_json::{json, Value};

use crate::e2e::{codex_bin, installed_codex_bin};
use crate::util::*;

/// A `clawbridge serve` child process on a free loopback port; killed on drop.
pub struct Serve {
    pub child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    state: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a serve start that was expected to fail ended: (exit code, stderr).
fn serve_fails(args: &[&str]) -> (i32, String) {
    let mut child = clawbridge()
        .arg("serve")
        .args(args)
        .env_remove("CLAWBRIDGE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    if crate::util::poll(Duration::from_secs(20), || child.try_wait().expect("wait")).is_none() {
        let _ = child.kill();
        panic!("serve {args:?} started instead of refusing");
    }
    let output = child.wait_with_output().expect("output");
    assert!(
        output.stdout.is_empty(),
        "no address printed: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl Serve {
    /// Start serve with `args` (plus `--listen 127.0.0.1:0` and, unless given, a state dir, the
    /// root `root` and a Codex binary) and wait for the bound address on stdout.
    pub fn start(root: &Path, state: &Path, args: &[&str]) -> Serve {
        let bin = installed_codex_bin().unwrap_or_else(|| PathBuf::from("/bin/true"));
        let bin = bin.to_str().expect("a UTF-8 Codex path");
        let mut all = vec!["--codex-bin", bin];
        all.extend_from_slice(args);
        Serve::spawn(clawbridge(), root, state, &all)
    }

    /// Start serve where no Codex CLI can be found: no `--codex-bin`, no `CODEX_BIN`, a `PATH`
    /// without `codex`.
    pub fn start_without_codex(root: &Path, state: &Path, empty_path: &Path) -> Serve {
        let mut command = clawbridge();
        command.env_remove("CODEX_BIN").env("PATH", empty_path);
        Serve::spawn(command, root, state, &[])
    }

    pub fn spawn(
        mut command: std::process::Command,
        root: &Path,
        state: &Path,
        args: &[&str],
    ) -> Serve {
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--offline"])
            .arg("--workspace-root")
            .arg(root)
            .arg("--state-dir")
            .arg(state)
            .args(args)
            .env_remove("CLAWBRIDGE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut line = String::new();
            while err.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().expect("stderr").push_str(&line);
                line.clear();
            }
        });
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = out.read_line(&mut line);
            let _ = sender.send(line);
            // Keep draining so the child never blocks on stdout.
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        let line = receiver
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default();
        let addr = line.trim().parse().unwrap_or_else(|_| {
            panic!(
                "serve printed no address ({line:?}); stderr: {}",
                stderr.lock().expect("stderr")
            )
        });
        Serve {
            child,
            addr,
            stderr,
            state: state.to_path_buf(),
        }
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.state.join("token"))
            .expect("token file")
            .trim()
            .to_string()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }

    pub async fn client(&self) -> WsClient {
        self.client_with(&self.token()).await
    }

    pub async fn client_with(&self, token: &str) -> WsClient {
        let headers = [(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().expect("header"),
        )]
        .into_iter()
        .collect();
        WsClientBuilder::default()
            .set_headers(headers)
            .request_timeout(Duration::from_secs(60))
            .build(format!("ws://{}", self.addr))
            .await
            .expect("ws client")
    }
}

/// One raw HTTP/1.1 request; returns the status code and the response text (head and body).
pub fn raw_http(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => response.extend_from_slice(&buffer[..read]),
        }
        let text = String::from_utf8_lossy(&response);
        if let Some(head_end) = text.find("\r\n\r\n") {
            let head = text[..head_end].to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok());
            // A 101 (WebSocket) has no body; otherwise stop once the body is complete.
            if head.starts_with("http/1.1 101")
                || length.is_some_and(|length| response.len() >= head_end + 4 + length)
            {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A JSON-RPC POST of `bridge.status` with the given extra header lines.
fn post_status(addr: SocketAddr, host: &str, extra: &[String]) -> (u16, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"bridge.status","params":[]}"#;
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for line in extra {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request.push_str(body);
    raw_http(addr, &request)
}

/// A WebSocket upgrade with the given extra header lines.
pub fn upgrade(addr: SocketAddr, host: &str, extra: &[String]) -> (u16, String) {
    let mut request = format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    );
    for line in extra {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    raw_http(addr, &request)
}

/// A root folder holding one workspace (`ws/`) with a private USER.md.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub state: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("dir");
        let base = dir.path().canonicalize().expect("canonical");
        let root = base.join("root");
        std::fs::create_dir_all(root.join("ws")).expect("ws");
        std::fs::write(root.join("ws/USER.md"), "The user's private notes.\n").expect("user");
        std::fs::write(root.join("ws/SOUL.md"), "Be kind.\n").expect("soul");
        let state = base.join("state");
        Fixture {
            _dir: dir,
            root,
            state,
        }
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// A folder next to the root (outside it).
    fn outside(&self, name: &str) -> PathBuf {
        let path = self.root.parent().expect("base").join(name);
        std::fs::create_dir_all(&path).expect("outside");
        path
    }

    pub fn serve(&self, args: &[&str]) -> Serve {
        Serve::start(&self.root, &self.state, args)
    }

    pub fn document(&self) -> Value {
        json!({"workspace": self.workspace(), "message": "hello"})
    }
}

pub fn error_text(result: Result<Value, crate::rpc::ClientError>) -> String {
    match result {
        Ok(value) => panic!("expected an error, got {value}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn a_forged_origin_is_refused_on_http_and_websocket() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--allow-origin", "http://localhost:3000"]);
    let host = serve.addr.to_string();
    let auth = format!("Authorization: Bearer {}", serve.token());
    let evil = "Origin: http://evil.example".to_string();
    let (status, text) = post_status(serve.addr, &host, &[auth.clone(), evil.clone()]);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("--allow-origin"), "{text}");
    let (status, _) = upgrade(serve.addr, &host, &[auth.clone(), evil]);
    assert_eq!(status, 403);
    // Without a token too: the browser never gets as far as the token check.
    let (status, _) = upgrade(serve.addr, &host, &["Origin: null".to_string()]);
    assert_eq!(status, 403);
    // The allowed origin and origin-less clients pass.
    let allowed = "Origin: http://localhost:3000".to_string();
    let (status, text) = post_status(serve.addr, &host, &[auth.clone(), allowed.clone()]);
    assert_eq!(status, 200, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("access-control-allow-origin: http://localhost:3000"),
        "{text}"
    );
    let (status, _) = upgrade(serve.addr, &host, &[auth.clone(), allowed]);
    assert_eq!(status, 101);
    let (status, _) = upgrade(serve.addr, &host, &[auth]);
    assert_eq!(status, 101);
}

#[test]
fn a_foreign_host_is_refused_on_http_and_websocket() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&["--allow-host", "bridge.internal:*"]);
    let port = serve.addr.port();
    let auth = format!("Authorization: Bearer {}", serve.token());
    for host in [format!("evil.example:{port}"), "evil.example".to_string()] {
        let (status, text) = post_status(serve.addr, &host, std::slice::from_ref(&auth));
        assert_eq!(status, 403, "{host}: {text}");
        let (status, _) = upgrade(serve.addr, &host, std::slice::from_ref(&auth));
        assert_eq!(status, 403, "{host}");
    }
    // A loopback name on another port is foreign too.
    let (status, _) = post_status(
        serve.addr,
        &format!("localhost:{}", port ^ 1),
        std::slice::from_ref(&auth),
    );
    assert_eq!(status, 403);
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "bridge.internal:9".to_string(),
    ] {
        let (status, text) = post_status(serve.addr, &host, std::slice::from_ref(&auth));
        assert_eq!(status, 200, "{host}: {text}");
    }
}

#[test]
fn a_missing_or_wrong_token_is_refused_and_the_token_file_is_private() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&[]);
    let host = serve.addr.to_string();
    let token_file = fixture.state.join("token");
    crate::util::poll(Duration::from_secs(20), || {
        serve
            .stderr()
            .contains(&token_file.display().to_string())
            .then_some(())
    });
    assert!(
        serve.stderr().contains(&token_file.display().to_string()),
        "serve says where the token is: {}",
        serve.stderr()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file)
            .expect("token")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let token = serve.token();
    assert!(token.len() >= 43, "at least 32 random bytes: {token}");
    for extra in [
        vec![],
        vec!["Authorization: Bearer wrong-token-0123456789".to_string()],
    ] {
        let (status, text) = post_status(serve.addr, &host, &extra);
        assert_eq!(status, 401, "{text}");
        let (status, _) = upgrade(serve.addr, &host, &extra);
        assert_eq!(status, 401);
    }
    let auth = format!("Authorization: Bearer {token}");
    assert_eq!(
        post_status(serve.addr, &host, std::slice::from_ref(&auth)).0,
        200
    );
    drop(serve);
    // A restart reuses the token, so clients keep working.
    let again = fixture.serve(&[]);
    assert_eq!(again.token(), token);
    assert_eq!(
        post_status(again.addr, &again.addr.to_string(), &[auth]).0,
        200
    );
}

#[test]
fn bad_tokens_and_no_auth_off_loopback_are_usage_errors() {
    let fixture = Fixture::new();
    let root = fixture.root.display().to_string();
    for token in ["abc\u{7}defghijklmnopqrstu", "short"] {
        let (code, stderr) = serve_fails(&[
            "--listen",
            "127.0.0.1:0",
            "--workspace-root",
            &root,
            "--codex-bin",
            "/bin/true",
            "--token",
            token,
        ]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("--token"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, stderr) = serve_fails(&[
        "--listen",
        "0.0.0.0:0",
        "--no-auth",
        "--workspace-root",
        &root,
        "--codex-bin",
        "/bin/true",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--no-auth"), "{stderr}");
    // On loopback --no-auth works, with a warning.
    let serve = fixture.serve(&["--no-auth"]);
    assert_eq!(post_status(serve.addr, &serve.addr.to_string(), &[]).0, 200);
    crate::util::wait_until("the --no-auth warning", Duration::from_secs(5), || {
        serve.stderr().contains("no-auth")
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_ceiling_is_the_default_and_a_hard_limit() {
    let fixture = Fixture::new();
    let serve = fixture.serve(&[]);
    let client = serve.client().await;
    let params: Value = client
        .request("bridge.params", rpc_params![fixture.document()])
        .await
        .expect("params");
    assert_eq!(
        params["threadStart"]["sandbox"], "workspace-write",
        "{params}"
    );
    assert_eq!(
        params["turnStart"]["sandboxPolicy"]["type"],
        "workspaceWrite"
    );
    let mut greedy = fixture.document();
    greedy["sandbox"] = json!("danger-full-access");
    let text = error_text(
        client
            .request("bridge.params", rpc_params![greedy.clone()])
            .await,
    );
    assert!(
        text.contains("4003") && text.contains("sandbox") && text.contains("workspace-write"),
        "{text}"
    );
    let text = error_text(
        client
            .request("bridge.runStart", rpc_params![greedy.clone()])
            .await,
    );
    assert!(text.contains("4003"), "{text}");
    let mut modest = fixture.document();
    modest["sandbox"] = json!("read-only");
    let params: Value = client
        .request("bridge.params", rpc_params![modest])
        .await
        .expect("below the ceiling");
    assert_eq!(params["threadStart"]["sandbox"], "read-only");
    drop(client);
    drop(serve);
    // The operator raises it.
    let serve = fixture.serve(&["--max-sandbox", "danger-full-access"]);
    let params: Value = serve
        .client()
        .await
        .request("bridge.params", rpc_params![greedy])
        .await
        .expect("raised ceiling");
    assert_eq!(params["threadStart"]["sandbox"], "danger-full-access");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_outside_the_roots_get_one_answer_whether_or_not_they_exist() {
    let fixture = Fixture::new();
    let outside = fixture.outside("elsewhere");
    std::fs::write(outside.join("USER.md"), "not yours\n").expect("user");
    let serve = fixture.serve(&[]);
    let client = serve.client().await;
    let mut codes = Vec::new();
    for (field, value) in [
        ("workspace", json!(outside)),
        ("workspace", json!(outside.join("missing"))),
        (
            "workspace",
            json!(fixture.workspace().join("../../elsewhere")),
        ),
        ("cwd", json!(outside)),
        ("cwd", json!(outside.join("missing"))),
        ("memoryWorkspace", json!(outside)),
        ("tools", json!([outside.join("tools.json")])),
        ("images", json!([outside.join("chart.png")])),
        ("managedSkillsDir", json!(outside)),
        ("bundledSkillsDir", json!(outside.join("missing"))),
    ] {
        let mut document = fixture.document();
        document[field] = value;
        let text = error_text(client.request("bridge.params", rpc_params![document]).await);
        assert!(text.contains("4001"), "{field}: {text}");
        codes.push(text.replace(&outside.display().to_string(), "<outside>"));
    }
    // Same message for an existing and a missing outside workspace.
    assert_eq!(
        codes[0].replace("<outside>/missing", "<outside>"),
        codes[1].replace("<outside>/missing", "<outside>")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_extra_dirs_and_symlinked_skills_stay_inside_the_roots() {
    let fixture = Fixture::new();
    let outside = fixture.outside("outside-skills");
    std::fs::create_dir_all(outside.join("spy")).expect("spy");
    std::fs::write(
        outside.join("spy/SKILL.md"),
        "---\nname: spy\ndescription: OUTSIDE-SKILL-SECRET\n---\nbody\n",
    )
    .expect("spy");
    std::fs::write(
        outside.join("secret.md"),
        "---\nname: leak\ndescription: OUTSIDE-FILE-SECRET\n---\n",
    )
    .expect("secret");
    let skills = fixture.workspace().join("skills");
    std::fs::create_dir_all(skills.join("inner")).expect("skills");
    std::fs::write(
        skills.join("inner/SKILL.md"),
        "---\nname: inner\ndescription: INSIDE-SKILL\n---\n",
    )
    .expect("inner");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.join("spy"), skills.join("linked-folder"))
            .expect("link");
        std::fs::create_dir_all(skills.join("linked-file")).expect("dir");
        std::os::unix::fs::symlink(
            outside.join("secret.md"),
            skills.join("linked-file/SKILL.md"),
        )
        .expect("link");
        std::fs::create_dir_all(skills.join("environ")).expect("dir");
        std::os::unix::fs::symlink("/proc/self/environ", skills.join("environ/SKILL.md"))
            .expect("link");
    }
    let serve = fixture.serve(&[]);
    let client = serve.client().await;
    for dirs in [
        json!([outside]),
        json!(["/"]),
        json!(["../../outside-skills"]),
    ] {
        let mut document = fixture.document();
        document["config"] = json!({"skills": {"load": {"extraDirs": dirs}}});
        let text = error_text(client.request("bridge.params", rpc_params![document]).await);
        assert!(
            text.contains("4001") && text.contains("config.skills.load.extraDirs[0]"),
            "{text}"
        );
    }
    let params: Value = client
        .request("bridge.params", rpc_params![fixture.document()])
        .await
        .expect("params");
    let text = params.to_string();
    assert!(text.contains("INSIDE-SKILL"), "the inside skill is listed");
    for secret in [
        "OUTSIDE-SKILL-SECRET",
        "OUTSIDE-FILE-SECRET",
        "PATH=",
        "HOME=",
    ] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    // The walk itself does not follow a link out of the roots (the read of what lies behind it
    // would be refused too; this is the first of the two checks).
    #[cfg(unix)]
    {
        // The walk tells each link as it meets it, in no set order: wait for all three.
        let names = ["linked-folder", "linked-file/SKILL.md", "environ/SKILL.md"];
        crate::util::poll_async(Duration::from_secs(20), || {
            let logged = serve.stderr();
            names
                .iter()
                .all(|name| logged.contains(&format!("{name}: symlink leaves")))
                .then_some(())
        })
        .await;
        let logged = serve.stderr();
        for name in names {
            assert!(
                logged.contains(&format!("{name}: symlink leaves every --workspace-root")),
                "{name}: {logged}"
            );
        }
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_tools_file_is_refused_without_hanging() {
    let fixture = Fixture::new();
    let fifo = fixture.root.join("tools.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo")
        .success());
    let serve = fixture.serve(&[]);
    let client = serve.client().await;
    let mut document = fixture.document();
    document["tools"] = json!([fifo]);
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        client.request::<Value, _>("bridge.params", rpc_params![document]),
    )
    .await
    .expect("answered without waiting for a writer");
    let text = error_text(result);
    assert!(text.contains("FIFO") && text.contains("tools[0]"), "{text}");
    // The server still answers.
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert!(status["runs"].is_array());
}

/// A run's events from its start until `turnEnd`.
async fn events_until_end(client: &WsClient, run_id: &str) -> Vec<Value> {
    crate::serve::events_until(client, run_id, |event| event["event"] == "turnEnd").await
}

/// A run's first `toolCall` event (the run must not end before it).
async fn first_tool_call(client: &WsClient, run_id: &str) -> Value {
    let events =
        crate::serve::events_until(client, run_id, |event| event["event"] == "toolCall").await;
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(
        last["event"], "toolCall",
        "the run ended before a tool call: {events:?}"
    );
    last
}

/// A stub script: `calls` model requests answered with a `message` tool call, then text.
fn tool_script(dir: &Path, calls: usize) -> PathBuf {
    let path = dir.join("script.json");
    let call =
        json!({"toolCall": {"name": "message", "arguments": {"action": "send", "message": "hi"}}});
    let mut responses = vec![call; calls];
    responses.extend(std::iter::repeat_n(json!({"text": "done"}), calls));
    std::fs::write(&path, json!({ "responses": responses }).to_string()).expect("script");
    path
}

fn message_tool() -> Value {
    json!([{"name": "message", "description": "Send a message.", "inputSchema": {"type": "object"}}])
}

#[cfg(unix)]
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_while_a_run_waits_in_the_queue_is_caught() {
    codex_bin();
    let fixture = Fixture::new();
    let outside = fixture.outside("swap-target");
    std::fs::write(outside.join("SOUL.md"), "OUTSIDE-SOUL-SECRET\n").expect("soul");
    // The run names root/link, which points into the root when the request arrives.
    let link = fixture.root.join("link");
    std::os::unix::fs::symlink(fixture.workspace(), &link).expect("link");
    let script = tool_script(fixture.state.parent().expect("base"), 1);
    let serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let client = Arc::new(serve.client().await);
    let mut document = json!({"workspace": link, "message": "hi", "sessionKey": "agent:main:swap", "tools": message_tool(), "directTools": ["message"]});
    let first: Value = client
        .request("bridge.runStart", rpc_params![document.clone()])
        .await
        .expect("first run");
    let first_id = first["runId"].as_str().expect("id").to_string();
    let call = first_tool_call(&client, &first_id).await;
    // The second run of the session waits for the first one to end.
    document["message"] = json!("second");
    let queued = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            client
                .request::<Value, _>("bridge.runStart", rpc_params![document])
                .await
        })
    };
    // The queued run has passed its first path check once the service lists it.
    let listed = crate::util::poll_with(Duration::from_secs(10), || {
        let client = Arc::clone(&client);
        async move {
            let status: Value = client.request("bridge.status", rpc_params![]).await.ok()?;
            (status["runs"].as_array()?.len() >= 2).then_some(())
        }
    })
    .await;
    assert!(listed.is_some(), "the second run is queued");
    std::fs::remove_file(&link).expect("unlink");
    std::os::unix::fs::symlink(&outside, &link).expect("swap");
    let ok: Value = client
        .request(
            "bridge.toolResult",
            rpc_params![json!({"callId": call["callId"], "text": "sent", "success": true})],
        )
        .await
        .expect("answer");
    assert_eq!(ok["ok"], true);
    events_until_end(&client, &first_id).await;
    let second = queued.await.expect("task");
    let text = match second {
        Ok(started) => {
            let events = events_until_end(&client, started["runId"].as_str().expect("id")).await;
            serde_json::to_string(&events).expect("json")
        }
        Err(error) => error.to_string(),
    };
    assert!(
        text.contains("4001") || text.contains("outside every --workspace-root"),
        "{text}"
    );
    assert!(!text.contains("OUTSIDE-SOUL-SECRET"), "{text}");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cannot_take_another_sessions_thread_and_ids_are_random() {
    codex_bin();
    let fixture = Fixture::new();
    let script = tool_script(fixture.state.parent().expect("base"), 2);
    let serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let client = serve.client().await;
    let mut victim = fixture.document();
    victim["sessionKey"] = json!("agent:main:victim");
    victim["tools"] = message_tool();
    victim["directTools"] = json!(["message"]);
    let started: Value = client
        .request("bridge.runStart", rpc_params![victim.clone()])
        .await
        .expect("victim run");
    let run_id = started["runId"].as_str().expect("id").to_string();
    let thread_id = started["threadId"].as_str().expect("thread").to_string();
    let uuid = regex::Regex::new(
        r"^run-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
    )
    .expect("regex");
    assert!(uuid.is_match(&run_id), "{run_id}");
    let call = first_tool_call(&client, &run_id).await;
    let call_id = call["callId"].as_str().expect("callId");
    assert!(
        call_id.starts_with("call-") && call_id.len() > 36,
        "{call_id}"
    );

    // While the victim waits on its tool call, another session names its thread.
    let mut thief = fixture.document();
    thief["sessionKey"] = json!("agent:main:thief");
    thief["threadId"] = json!(thread_id);
    let text = error_text(
        client
            .request("bridge.runStart", rpc_params![thief.clone()])
            .await,
    );
    assert!(text.contains("4003") && text.contains("threadId"), "{text}");
    // A run with no session may not take it either.
    let mut anonymous = fixture.document();
    anonymous["threadId"] = json!(thread_id);
    let text = error_text(
        client
            .request("bridge.runStart", rpc_params![anonymous])
            .await,
    );
    assert!(text.contains("4003"), "{text}");

    // A thread bound to no session is still refused while a run uses it.
    let mut loner = fixture.document();
    loner["tools"] = message_tool();
    loner["directTools"] = json!(["message"]);
    let lonely: Value = client
        .request("bridge.runStart", rpc_params![loner])
        .await
        .expect("run without a session");
    let lonely_run = lonely["runId"].as_str().expect("id").to_string();
    let lonely_call = first_tool_call(&client, &lonely_run).await;
    let mut intruder = fixture.document();
    intruder["threadId"] = lonely["threadId"].clone();
    let text = error_text(
        client
            .request("bridge.runStart", rpc_params![intruder])
            .await,
    );
    assert!(text.contains("4003") && text.contains("in use"), "{text}");
    client
        .request::<Value, _>(
            "bridge.toolResult",
            rpc_params![json!({"callId": lonely_call["callId"], "text": "sent", "success": true})],
        )
        .await
        .expect("answer");
    events_until_end(&client, &lonely_run).await;

    // The victim's run is unharmed.
    client
        .request::<Value, _>(
            "bridge.toolResult",
            rpc_params![json!({"callId": call_id, "text": "sent", "success": true})],
        )
        .await
        .expect("answer");
    let events = events_until_end(&client, &run_id).await;
    assert_eq!(
        events.last().expect("end")["status"],
        "completed",
        "{events:?}"
    );
    // Still bound to the victim's session once idle.
    let text = error_text(client.request("bridge.runStart", rpc_params![thief]).await);
    assert!(text.contains("belongs to another session"), "{text}");
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(status["sessions"], 1, "{status}");
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_write_turn_writes_inside_and_not_outside() {
    codex_bin();
    let fixture = Fixture::new();
    // Not under /tmp or $TMPDIR (Codex's workspace-write sandbox leaves those writable), nor under
    // the checkout (which may itself lie in /tmp): /var/tmp, else the user's cache folder.
    let outside_dir = tempfile::tempdir_in("/var/tmp")
        .or_else(|_| {
            let cache = dirs::cache_dir().expect("a cache folder");
            std::fs::create_dir_all(&cache).expect("cache");
            tempfile::tempdir_in(cache)
        })
        .expect("outside folder");
    let outside = outside_dir.path().to_path_buf();
    let escaped = outside.join("escaped.txt");
    let script = fixture.state.parent().expect("base").join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"toolCall": {"name": "exec_command", "arguments": {"cmd": format!("touch inside.txt; touch {}; echo ran", escaped.display())}}},
            {"text": "done"}
        ]})
        .to_string(),
    )
    .expect("script");
    let serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let client = serve.client().await;
    let started: Value = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await
        .expect("run");
    let events = events_until_end(&client, started["runId"].as_str().expect("id")).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    assert!(
        fixture.workspace().join("inside.txt").is_file(),
        "the sandbox lets the turn write its workspace: {events:?}"
    );
    assert!(
        !escaped.exists(),
        "the sandbox kept the turn out of {}",
        outside.display()
    );
}

#[test]
fn a_second_serve_on_the_same_state_dir_is_refused_naming_the_first() {
    let fixture = Fixture::new();
    let first = fixture.serve(&[]);
    let root = fixture.root.display().to_string();
    let state = fixture.state.display().to_string();
    let (code, stderr) = serve_fails(&[
        "--listen",
        "127.0.0.1:0",
        "--workspace-root",
        &root,
        "--state-dir",
        &state,
        "--codex-bin",
        "/bin/true",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("pid {}", first.child.id())),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_starts_without_codex_and_says_how_to_get_one() {
    let fixture = Fixture::new();
    let empty = tempfile::tempdir().expect("empty PATH dir");
    let serve = Serve::start_without_codex(&fixture.root, &fixture.state, empty.path());
    // The notice may arrive a moment after the address.
    crate::util::poll(Duration::from_secs(20), || {
        serve.stderr().contains("no Codex CLI").then_some(())
    });
    assert!(
        serve.stderr().contains("no Codex CLI"),
        "the start notice names the missing Codex: {}",
        serve.stderr()
    );
    let client = serve.client().await;
    // Everything that needs no Codex works.
    for method in ["bridge.params", "bridge.context", "bridge.prompt"] {
        let answer: Result<Value, _> = client
            .request(method, rpc_params![fixture.document()])
            .await;
        assert!(answer.is_ok(), "{method}: {answer:?}");
    }
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(status["codex"]["state"], "missing", "{status}");
    assert!(
        status["codex"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("npm install -g @openai/codex@")),
        "{status}"
    );
    // A run fails with 4100 and the way to install Codex.
    let run: Result<Value, _> = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await;
    let text = error_text(run);
    assert!(text.contains("4100"), "{text}");
    assert!(text.contains("install-codex"), "{text}");
}

/// The live service answers as its OpenRPC document says: `rpc.discover` is the committed
/// document, every method it lists exists, and the answers validate against their result schemas.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_answers_as_its_openrpc_document_describes() {
    use crate::schema::{assert_valid, method_of};
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("docs/openrpc.json")).expect("openrpc"),
    )
    .expect("json");
    let fixture = Fixture::new();
    let empty = tempfile::tempdir().expect("empty PATH dir");
    let serve = Serve::start_without_codex(&fixture.root, &fixture.state, empty.path());
    let client = serve.client().await;
    let discovered: Value = client
        .request("rpc.discover", rpc_params![])
        .await
        .expect("rpc.discover");
    assert_eq!(
        discovered, committed,
        "rpc.discover serves docs/openrpc.json"
    );
    for method in committed["methods"].as_array().expect("methods") {
        let name = method["name"].as_str().expect("name");
        let answer: Result<Value, _> = client.request(name, rpc_params![json!({})]).await;
        if let Err(crate::rpc::ClientError::Call(error)) = &answer {
            assert_ne!(error.code(), -32601, "{name} is documented but not served");
        }
    }
    let document = fixture.document();
    for (name, params) in [
        ("bridge.params", json!({"run": document})),
        ("bridge.context", json!({"run": document, "detail": true})),
        (
            "bridge.prompt",
            json!({"run": document, "mode": "minimal", "cacheBoundary": false}),
        ),
        ("bridge.status", json!({})),
    ] {
        let method = method_of(&committed, name);
        for param in method["params"].as_array().expect("params") {
            if let Some(value) = params.get(param["name"].as_str().expect("param name")) {
                assert_valid(
                    &committed,
                    &param["schema"],
                    value,
                    &format!("{name} param"),
                );
            }
        }
        let answer: Value = client
            .request(name, rpc_params![params])
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_valid(&committed, &method["result"]["schema"], &answer, name);
    }
}

/// With Codex: a run's answer and every event it streams validate against the document.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
async fn a_run_and_its_events_validate_against_the_openrpc_document() {
    use crate::schema::{assert_valid, method_of};
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("docs/openrpc.json")).expect("openrpc"),
    )
    .expect("json");
    let fixture = Fixture::new();
    let serve = fixture.serve(&[]);
    let client = serve.client().await;
    let started: Value = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await
        .expect("runStart");
    let run_start = method_of(&committed, "bridge.runStart");
    assert_valid(
        &committed,
        &run_start["result"]["schema"],
        &started,
        "runStart",
    );
    let run_id = started["runId"].as_str().expect("runId");
    let events = events_until_end(&client, run_id).await;
    let event_schema = &method_of(&committed, "bridge.subscribeRun")["x-notification"]["result"];
    assert!(events.len() > 2, "{events:?}");
    for event in &events {
        assert_valid(&committed, event_schema, event, "bridge.runEvent");
    }
    let status: Value = client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status");
    assert_eq!(status["codex"]["state"], "running");
    assert_valid(
        &committed,
        &method_of(&committed, "bridge.status")["result"]["schema"],
        &status,
        "status",
    );
}

/// serve answers the probes without a token and with no data (`/readyz` is 503 when no run
/// could start: no Codex), and `/metrics` only to the operator's token, never to a browser.
#[test]
fn probes_answer_without_a_token_and_metrics_need_the_operator() {
    let get = |serve: &Serve, path: &str, extra: &[String]| {
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            serve.addr
        );
        for line in extra {
            request.push_str(line);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        raw_http(serve.addr, &request)
    };
    let fixture = Fixture::new();
    let empty = fixture.root.parent().expect("base").join("empty-path");
    std::fs::create_dir_all(&empty).expect("empty");
    let without = Serve::start_without_codex(&fixture.root, &fixture.state, &empty);
    let (status, body) = get(&without, "/readyz", &[]);
    assert_eq!(status, 503, "no Codex, no run: {body}");
    let (status, _) = get(&without, "/healthz", &[]);
    assert_eq!(status, 200);
    drop(without);
    let serve = fixture.serve(&[]);
    let (status, body) = get(&serve, "/readyz", &[]);
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains(&fixture.root.display().to_string()),
        "{body}"
    );
    let (status, _) = get(&serve, "/metrics", &[]);
    assert_eq!(status, 401, "the metrics need the token");
    let auth = format!("Authorization: Bearer {}", serve.token());
    let (status, _) = get(
        &serve,
        "/metrics",
        &[auth.clone(), "Origin: http://evil.example".into()],
    );
    assert_eq!(status, 403, "never to a browser");
    let (status, text) = get(&serve, "/metrics", &[auth]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("clawbridge_ready 1"), "{text}");
    assert!(text.contains("clawbridge_runs 0"), "{text}");
}
