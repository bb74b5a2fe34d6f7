//! serve on a pool of app-servers, against the real Codex and the offline stub: threads spread
//! and stay on their member, a killed member loses only its own run and its sessions resume
//! their threads on its next incarnation, a remote member over Codex's own WebSocket listener,
//! and steering a running turn.

use std::path::Path;
use std::time::Duration;

use crate::rpc::client::ClientT;
use crate::rpc::rpc_params;
use clawbridge::{serve, OfflineHome, ResponsesStub, Running, ServeConfig, StubScript, StubStep};
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::serve::{config, connect, follow, run_document};

/// A run document of `session` with `message`.
fn run_of(session: &str, message: &str) -> Value {
    let mut document = run_document("telegram-direct.json");
    document["sessionKey"] = json!(session);
    document["message"] = json!(message);
    document
}

async fn status(client: &crate::rpc::ws_client::WsClient) -> Value {
    client
        .request("bridge.status", rpc_params![])
        .await
        .expect("status")
}

async fn start(client: &crate::rpc::ws_client::WsClient, document: Value) -> Value {
    client
        .request("bridge.runStart", rpc_params![document])
        .await
        .expect("runStart")
}

fn bindings(state: &Path) -> Value {
    crate::util::stored_sessions(state)
}

fn pool_config(state: &Path, script: Vec<StubStep>) -> ServeConfig {
    ServeConfig {
        app_servers: 2,
        ..config(codex_bin(), state, None, script)
    }
}

/// The issue's fault: two local members, threads on both; a kill -9 of one mid-turn ends only
/// its run (appServerLost, may have run), the other member's runs complete, the member comes
/// back as a new generation, and the killed session's next run resumes its thread there with
/// its history. Bindings record each session's member.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_loses_only_its_run_and_its_session_resumes_there() {
    let state = tempfile::tempdir().expect("state");
    let script = vec![StubStep::Text("FIRST-ANSWER-A".into()), StubStep::Hang];
    let running = serve(pool_config(state.path(), script))
        .await
        .expect("serve");
    let client = connect(&running).await;
    // A1 completes on local-0 (the least busy; ties go to the first).
    let a1 = start(
        &client,
        run_of("agent:main:telegram:direct:a", "hello from A"),
    )
    .await;
    let events = follow(&client, a1["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    let thread_a = a1["threadId"].as_str().expect("thread").to_string();
    // A2 stays on local-0 (sticky) and hangs in the stub.
    let a2 = start(
        &client,
        run_of("agent:main:telegram:direct:a", "again from A"),
    )
    .await;
    assert_eq!(a2["threadId"], thread_a.as_str());
    crate::util::wait_until_async("A2's model request", Duration::from_secs(20), || {
        running.bridge_requests().len() >= 2
    })
    .await;
    // B1 goes to local-1: local-0 has a turn running.
    let b1 = start(
        &client,
        run_of("agent:main:telegram:direct:b", "hello from B"),
    )
    .await;
    let events = follow(&client, b1["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    let before = status(&client).await;
    let members = before["codex"]["members"].as_array().expect("members");
    assert_eq!(members.len(), 2, "{before}");
    assert!(members.iter().all(|m| m["state"] == "ready"), "{before}");
    let bound = bindings(state.path());
    assert_eq!(
        bound["sessions"]["agent:main:telegram:direct:a"]["member"],
        "local-0"
    );
    assert_eq!(
        bound["sessions"]["agent:main:telegram:direct:b"]["member"],
        "local-1"
    );
    // kill -9 local-0 while A2's turn runs.
    let pid = members[0]["pid"].as_u64().expect("pid");
    assert!(std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill")
        .success());
    let events = follow(&client, a2["runId"].as_str().expect("id"), None).await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "appServerLost", "{end}");
    assert_eq!(end["mayHaveRun"], true, "{end}");
    // local-0 comes back by itself, as a new generation; local-1 never stopped.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let after = loop {
        let now = status(&client).await;
        if now["codex"]["members"][0]["state"] == "ready"
            && now["codex"]["members"][0]["generation"] == 2
        {
            break now;
        }
        assert!(tokio::time::Instant::now() < deadline, "{now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(after["codex"]["members"][0]["restarts"], 1, "{after}");
    assert_ne!(after["codex"]["members"][0]["pid"], json!(pid));
    assert_eq!(after["codex"]["members"][1]["generation"], 1, "{after}");
    assert_eq!(after["codex"]["members"][1]["pid"], members[1]["pid"]);
    // A3 resumes A's thread on local-0's new incarnation; the model sees A1's history.
    let a3 = start(
        &client,
        run_of("agent:main:telegram:direct:a", "third from A"),
    )
    .await;
    assert_eq!(a3["threadId"], thread_a.as_str());
    let events = follow(&client, a3["runId"].as_str().expect("id"), None).await;
    assert_eq!(events.last().expect("end")["status"], "completed");
    assert!(
        events
            .iter()
            .any(|event| event["event"] == "thread" && event["resumed"] == true),
        "{events:?}"
    );
    let last = running
        .bridge_requests()
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(
        last.contains("FIRST-ANSWER-A") && last.contains("third from A"),
        "the resumed thread carries its history"
    );
    // No binding was lost.
    let bound = bindings(state.path());
    assert_eq!(
        bound["sessions"]["agent:main:telegram:direct:a"]["threadId"],
        thread_a.as_str()
    );
    assert_eq!(
        bound["sessions"]["agent:main:telegram:direct:b"]["threadId"],
        b1["threadId"]
    );
    running.stop().await;
}

/// A real `codex app-server --listen ws://127.0.0.1:PORT --ws-auth capability-token` over its
/// own offline home and stub, killed with the guard.
struct RemoteCodex {
    child: std::process::Child,
    url: String,
    stub: ResponsesStub,
    _home: OfflineHome,
    _dir: tempfile::TempDir,
}

impl Drop for RemoteCodex {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RemoteCodex {
    async fn start(token: &str) -> RemoteCodex {
        RemoteCodex::listening(Some(token)).await
    }

    /// With a token: `--listen ws://127.0.0.1:PORT --ws-auth capability-token`; without:
    /// `--listen unix://DIR/codex.sock` (a Unix socket has no token: its file is the guard).
    async fn listening(token: Option<&str>) -> RemoteCodex {
        let dir = tempfile::tempdir().expect("dir");
        let stub = ResponsesStub::start(StubScript {
            responses: vec![StubStep::Text("REMOTE-ANSWER".into())],
            ..Default::default()
        })
        .await
        .expect("stub");
        let home = OfflineHome::prepare(
            Some(&dir.path().join("home")),
            &stub.base_url(),
            "gpt-5.5",
            None,
        )
        .expect("home");
        let port = crate::util::free_port();
        let socket = dir.path().join("codex.sock");
        let url = match token {
            Some(_) => format!("ws://127.0.0.1:{port}"),
            None => format!("unix://{}", socket.display()),
        };
        let token_file = token.map(|token| {
            let token_file = dir.path().join("token");
            std::fs::write(&token_file, token).expect("token");
            token_file
        });
        let child =
            crate::util::codex_listener(&home.path, dir.path(), &url, token_file.as_deref());
        crate::util::wait_until(
            "the remote listener",
            Duration::from_secs(20),
            || match token {
                Some(_) => std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
                None => std::os::unix::net::UnixStream::connect(&socket).is_ok(),
            },
        );
        RemoteCodex {
            child,
            url,
            stub,
            _home: home,
            _dir: dir,
        }
    }
}

/// A remote member: turns go through the pool to a real `codex app-server --listen ws://...`
/// with its capability token; a wrong token is refused (401) and said so.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_member_serves_turns_and_a_wrong_token_is_refused() {
    let remote = RemoteCodex::start("remote-token-0123456789").await;
    let files = tempfile::tempdir().expect("files");
    let right = files.path().join("right");
    let wrong = files.path().join("wrong");
    std::fs::write(&right, "remote-token-0123456789\n").expect("token");
    std::fs::write(&wrong, "not-the-token").expect("token");
    let remote_config = |state: &Path, token_file: &Path| ServeConfig {
        app_servers: 0,
        offline: false,
        remote_app_servers: clawbridge::remote_endpoints(
            std::slice::from_ref(&remote.url),
            &[token_file.to_path_buf()],
            None,
        )
        .expect("endpoints"),
        ..config(codex_bin(), state, None, vec![])
    };
    let state = tempfile::tempdir().expect("state");
    let running: Running = serve(remote_config(state.path(), &right))
        .await
        .expect("serve");
    let client = connect(&running).await;
    let started = start(
        &client,
        run_of("agent:main:telegram:direct:r", "hello remote"),
    )
    .await;
    let events = follow(&client, started["runId"].as_str().expect("id"), None).await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["agentMessages"], json!(["REMOTE-ANSWER"]));
    assert!(remote
        .stub
        .requests()
        .iter()
        .any(|request| request.body.to_string().contains("hello remote")));
    let now = status(&client).await;
    let member = &now["codex"]["members"][0];
    assert_eq!(member["kind"], "remote", "{now}");
    assert_eq!(member["name"], remote.url.as_str());
    assert_eq!(member["state"], "ready");
    assert!(member["version"].as_str().is_some(), "{now}");
    assert_eq!(
        bindings(state.path())["sessions"]["agent:main:telegram:direct:r"]["member"],
        remote.url.as_str()
    );
    running.stop().await;

    let state = tempfile::tempdir().expect("state");
    let refused = serve(remote_config(state.path(), &wrong))
        .await
        .expect("serve");
    let client = connect(&refused).await;
    let error = client
        .request::<Value, _>(
            "bridge.runStart",
            rpc_params![run_of("agent:main:telegram:direct:w", "hi")],
        )
        .await
        .expect_err("a wrong token");
    let text = error.to_string();
    assert!(
        text.contains("4100") && text.contains("401") && text.contains("wrong or missing token"),
        "{text}"
    );
    assert!(
        !text.contains("not-the-token"),
        "the token is never shown: {text}"
    );
    refused.stop().await;
}

/// A TLS terminator on loopback (a certificate of a CA made here) in front of `backend`, and a
/// relay in front of it that keeps every byte clawbridge sends: (the relay's port, the CA's PEM,
/// the bytes). What crosses the relay is what would cross a network.
async fn tls_in_front_of(backend: u16) -> (u16, String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (acceptor, ca_pem) = crate::util::tls_acceptor();
    let terminator = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("terminator");
    let terminator_port = terminator.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = terminator.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut codex) = tokio::net::TcpStream::connect(("127.0.0.1", backend)).await
                else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut codex).await;
            });
        }
    });
    let wire = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let relay = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("relay");
    let relay_port = relay.local_addr().expect("addr").port();
    let kept = std::sync::Arc::clone(&wire);
    tokio::spawn(async move {
        while let Ok((socket, _)) = relay.accept().await {
            let kept = std::sync::Arc::clone(&kept);
            tokio::spawn(async move {
                let Ok(upstream) =
                    tokio::net::TcpStream::connect(("127.0.0.1", terminator_port)).await
                else {
                    return;
                };
                let (mut from_client, mut to_client) = socket.into_split();
                let (mut from_upstream, mut to_upstream) = upstream.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_upstream, &mut to_client).await;
                });
                let mut buffer = vec![0u8; 16 * 1024];
                while let Ok(read) = from_client.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    kept.lock()
                        .expect("wire")
                        .extend_from_slice(&buffer[..read]);
                    if to_upstream.write_all(&buffer[..read]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (relay_port, ca_pem, wire)
}

/// One turn of a new client, its events.
async fn run_turn(running: &Running, session: &str, text: &str) -> Vec<Value> {
    let client = connect(running).await;
    let started = start(&client, run_of(session, text)).await;
    follow(&client, started["runId"].as_str().expect("id"), None).await
}

/// Members on the two other sockets: `wss://` (a real Codex listener behind a TLS terminator,
/// trusted by `--app-server-ca`: the turn is served and its capability token never crosses the
/// wire in clear; without the CA the member is refused naming TLS) and `unix://` (a real
/// `codex app-server --listen unix://PATH`, sent no token).
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_and_unix_members_serve_turns() {
    const TOKEN: &str = "wss-capability-token-0123456789";
    let codex = RemoteCodex::start(TOKEN).await;
    let codex_port: u16 = codex
        .url
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .expect("port");
    let (port, ca_pem, wire) = tls_in_front_of(codex_port).await;
    let files = tempfile::tempdir().expect("files");
    let token_file = files.path().join("token");
    let ca_file = files.path().join("ca.pem");
    std::fs::write(&token_file, TOKEN).expect("token");
    std::fs::write(&ca_file, &ca_pem).expect("ca");
    let wss = format!("wss://127.0.0.1:{port}");
    let member_config =
        |state: &Path, urls: &[String], tokens: &[std::path::PathBuf], ca| ServeConfig {
            app_servers: 0,
            offline: false,
            remote_app_servers: clawbridge::remote_endpoints(urls, tokens, ca).expect("endpoints"),
            ..config(codex_bin(), state, None, vec![])
        };

    let state = tempfile::tempdir().expect("state");
    let running = serve(member_config(
        state.path(),
        std::slice::from_ref(&wss),
        std::slice::from_ref(&token_file),
        Some(ca_file.as_path()),
    ))
    .await
    .expect("serve");
    let events = run_turn(&running, "agent:main:telegram:direct:tls", "hello over tls").await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["agentMessages"], json!(["REMOTE-ANSWER"]));
    assert!(codex
        .stub
        .requests()
        .iter()
        .any(|request| request.body.to_string().contains("hello over tls")));
    let member = &status(&connect(&running).await).await["codex"]["members"][0];
    assert_eq!(member["name"], wss.as_str(), "{member}");
    running.stop().await;
    let seen = wire.lock().expect("wire").clone();
    assert_eq!(
        seen.first(),
        Some(&0x16),
        "the wire starts with a TLS handshake"
    );
    assert!(
        !seen
            .windows(TOKEN.len())
            .any(|window| window == TOKEN.as_bytes())
            && !seen.windows(5).any(|window| window == b"GET /"),
        "neither the token nor the upgrade crosses the wire in clear"
    );

    // Not trusting the terminator's CA: refused, naming TLS.
    let state = tempfile::tempdir().expect("state");
    let untrusted = serve(member_config(
        state.path(),
        std::slice::from_ref(&wss),
        std::slice::from_ref(&token_file),
        None,
    ))
    .await
    .expect("serve");
    let error = connect(&untrusted)
        .await
        .request::<Value, _>(
            "bridge.runStart",
            rpc_params![run_of("agent:main:telegram:direct:untrusted", "hi")],
        )
        .await
        .expect_err("an untrusted certificate");
    assert!(error.to_string().contains("TLS failed"), "{error}");
    untrusted.stop().await;

    let unix = RemoteCodex::listening(None).await;
    let state = tempfile::tempdir().expect("state");
    let running = serve(member_config(
        state.path(),
        std::slice::from_ref(&unix.url),
        &[],
        None,
    ))
    .await
    .expect("serve");
    let events = run_turn(
        &running,
        "agent:main:telegram:direct:unix",
        "hello over unix",
    )
    .await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    assert!(unix
        .stub
        .requests()
        .iter()
        .any(|request| request.body.to_string().contains("hello over unix")));
    running.stop().await;
}

/// Steering: `bridge.runSteer` adds input to the running turn, and `bridge.runStart` with
/// `queue: "steer"` steers the session's running turn instead of queueing; the model's next
/// request within the same turn carries both; a finished run cannot be steered.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turn_is_steered() {
    let state = tempfile::tempdir().expect("state");
    let script = vec![StubStep::Delayed {
        ms: 4000,
        step: Box::new(StubStep::Text("WORKING-ON-IT".into())),
    }];
    let running = serve(config(codex_bin(), state.path(), None, script))
        .await
        .expect("serve");
    let client = connect(&running).await;
    let session = "agent:main:telegram:direct:s";
    let started = start(&client, run_of(session, "start the work")).await;
    let run_id = started["runId"].as_str().expect("id").to_string();
    // The model request is in flight, so the turn is running.
    crate::util::wait_until_async("the first model request", Duration::from_secs(20), || {
        !running.bridge_requests().is_empty()
    })
    .await;
    let steered: Value = client
        .request(
            "bridge.runSteer",
            rpc_params![json!({"runId": run_id, "input": "STEER-ONE"})],
        )
        .await
        .expect("runSteer");
    assert!(steered["turnId"].as_str().is_some(), "{steered}");
    let mut second = run_of(session, "STEER-TWO");
    second["message"] = json!("STEER-TWO");
    let queued: Value = client
        .request(
            "bridge.runStart",
            rpc_params![json!({"run": second, "queue": "steer"})],
        )
        .await
        .expect("runStart queue steer");
    assert_eq!(queued["steered"], true, "{queued}");
    assert_eq!(queued["runId"], run_id.as_str());
    let events = follow(&client, &run_id, None).await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    let requests = running.bridge_requests();
    assert!(requests.len() >= 2, "the turn went on with the steer");
    let last = requests.last().cloned().unwrap_or_default();
    assert!(
        last.contains("STEER-ONE") && last.contains("STEER-TWO"),
        "the model's next request within the turn carries both steers"
    );
    let error = client
        .request::<Value, _>(
            "bridge.runSteer",
            rpc_params![json!({"runId": run_id, "input": "late"})],
        )
        .await
        .expect_err("an ended run");
    assert!(error.to_string().contains("4004"), "{error}");
    running.stop().await;
}
