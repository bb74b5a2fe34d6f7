//! `clawbridge app-server --listen ws://...`: the WebSocket endpoint, against the real Codex.
//!
//! The endpoint's client here is clawbridge's own pool: a `serve` whose only member is the
//! endpoint (`--app-server ws://...`), so each run crosses the endpoint exactly as OpenClaw's
//! WebSocket transport would: `initialize`, `thread/start`, `turn/start`, the turn's
//! notifications, and a dynamic tool call answered back through it.

use std::time::Duration;

use crate::rpc::client::ClientT;
use crate::rpc::rpc_params;
use clawbridge::{
    fetch_status, serve, Endpoint, EndpointSettings, FleetConfig, ListenAddr, OfflineHome,
    PoolConfig, ResponsesStub, ServeConfig, StallSettings, StubScript, StubStep,
};
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::serve::{config, connect, follow, run_document};

pub(crate) const TOKEN: &str = "endpoint-test-token-0123456789";

pub(crate) struct Offline {
    pub(crate) stub: ResponsesStub,
    _home: OfflineHome,
}

/// The settings the tests start from: loopback, the test token, one-minute timeouts.
pub(crate) fn settings(pool: PoolConfig) -> EndpointSettings {
    EndpointSettings {
        listen: ListenAddr::Tcp("127.0.0.1:0".parse().expect("addr")),
        token: TOKEN.into(),
        clients: Vec::new(),
        fleet: fleet(pool),
        max_connections: 8,
        idle_timeout: Duration::from_secs(60),
        ping_interval: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(60),
        upgrade_timeout: Duration::from_secs(60),
        cwd: std::env::temp_dir(),
        transcript: None,
        observe: None,
        trace: None,
        first_tokens: None,
        stalls: StallSettings::default(),
        budget_tokens: None,
        allow_hosts: Vec::new(),
        policy: clawbridge::EndpointPolicy::default(),
        fresh_thread_grace: clawbridge::FRESH_THREAD_GRACE,
        store: None,
        home: None,
        max_threads_in_memory: 100_000,
        lease_ttl: clawbridge::DEFAULT_LEASE_TTL,
        new_runtime_identity: false,
        home_retention: None,
        accounts: None,
        unnamed_accounts: false,
        route: clawbridge::LiveRoute::AsSent,
    }
}

/// The default ceiling, with `root` as the one workspace root (what named clients need).
pub(crate) fn roots_policy(root: &std::path::Path) -> clawbridge::EndpointPolicy {
    clawbridge::EndpointPolicy {
        roots: Some(clawbridge::Roots::new(vec![root
            .canonicalize()
            .expect("root")])),
        ..Default::default()
    }
}

/// The fleet of one identity per account over `pool`: every account's home under a fresh
/// folder (kept for the test's life), `pool.locals` local members in all, each account up to all.
pub(crate) fn fleet(pool: PoolConfig) -> FleetConfig {
    let homes = tempfile::tempdir().expect("homes").keep();
    FleetConfig {
        total_locals: pool.locals,
        per_identity: pool.locals.max(1),
        home_config: None,
        homes,
        native: pool,
        wait_for_room: FleetConfig::DEFAULT_WAIT_FOR_ROOM,
        one_account: None,
        account_members: Default::default(),
    }
}

/// The test token into `path`, private (0600) as the endpoint requires.
pub(crate) fn write_token(path: &std::path::Path) {
    crate::util::write_private(path, &format!("{TOKEN}\n"));
}

/// A pool that is never asked for an app-server (or fails fast when it is).
pub(crate) fn no_codex() -> PoolConfig {
    PoolConfig {
        isolate_environment: true,
        handshake_timeout: Duration::from_secs(1),
        ..PoolConfig::new(Err("not needed".into()), std::env::temp_dir())
    }
}

pub(crate) async fn endpoint(script: Vec<StubStep>) -> (Endpoint, Offline) {
    endpoint_with(script, |settings| settings).await
}

/// [`endpoint`] with its settings changed by `tweak` first.
pub(crate) async fn endpoint_with(
    script: Vec<StubStep>,
    tweak: impl FnOnce(EndpointSettings) -> EndpointSettings,
) -> (Endpoint, Offline) {
    let stub = ResponsesStub::start(StubScript {
        responses: script,
        ..Default::default()
    })
    .await
    .expect("stub");
    let home = OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home");
    let pool = PoolConfig {
        locals: 2,
        isolate_environment: true,
        config_overrides: vec![format!("openai_base_url=\"{}\"", stub.base_url())],
        recycle_rss_bytes: u64::MAX,
        ..PoolConfig::new(Ok(codex_bin()), home.path.clone())
    };
    let running = Endpoint::start(
        tweak(EndpointSettings {
            cwd: crate::util::repo_root().join("fixtures/workspace"),
            ..settings(pool)
        }),
        false,
    )
    .await
    .expect("endpoint");
    (running, Offline { stub, _home: home })
}

/// Runs through the endpoint: a plain turn and a tool-call turn of two sessions, each thread on
/// its own member of the endpoint's pool of two, the tool call answered through the endpoint.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_cross_the_endpoint_to_its_pool_with_tool_calls_answered_back() {
    let script = vec![
        StubStep::Text("PLAIN-ANSWER".into()),
        StubStep::ToolCall {
            name: "message".into(),
            arguments: json!({"action": "send", "message": "hi"}),
            namespace: None,
        },
        StubStep::Text("AFTER-THE-TOOL".into()),
    ];
    let (endpoint, offline) = endpoint(script).await;
    let files = tempfile::tempdir().expect("files");
    let token_file = files.path().join("token");
    std::fs::write(&token_file, TOKEN).expect("token");
    let state = tempfile::tempdir().expect("state");
    let settings = ServeConfig {
        app_servers: 0,
        offline: false,
        remote_app_servers: clawbridge::remote_endpoints(
            &[endpoint.listen.to_string()],
            &[token_file],
            None,
        )
        .expect("endpoint as a member"),
        ..config(codex_bin(), state.path(), None, vec![])
    };
    let running = serve(settings).await.expect("serve");
    let client = connect(&running).await;
    let mut plain = run_document("telegram-direct.json");
    plain["sessionKey"] = json!("agent:main:telegram:direct:one");
    let first: Value = client
        .request("bridge.runStart", rpc_params![plain])
        .await
        .expect("first run");
    let events = follow(&client, first["runId"].as_str().expect("id"), None).await;
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["agentMessages"], json!(["PLAIN-ANSWER"]));
    let mut tooled = run_document("telegram-direct.json");
    tooled["sessionKey"] = json!("agent:main:telegram:direct:two");
    tooled["tools"] = json!([{"name": "message", "description": "Send a message.", "inputSchema": {"type": "object"}}]);
    tooled["directTools"] = json!(["message"]);
    let second: Value = client
        .request("bridge.runStart", rpc_params![tooled])
        .await
        .expect("second run");
    let events = follow(
        &client,
        second["runId"].as_str().expect("id"),
        Some(json!({"text": "sent", "success": true})),
    )
    .await;
    assert!(
        events.iter().any(|event| event["event"] == "toolCall"),
        "{events:?}"
    );
    let end = events.last().expect("end");
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["agentMessages"], json!(["AFTER-THE-TOOL"]));
    assert_ne!(first["threadId"], second["threadId"]);
    // Each thread went to its own member of the endpoint's pool.
    let members = endpoint.members();
    assert_eq!(members.len(), 2);
    assert!(
        members.iter().all(|member| member.generation == 1),
        "{members:?}"
    );
    running.stop().await;
    endpoint.stop().await;
    drop(offline);
}

/// The endpoint is safe by default: no token or a wrong one is 401, a browser's `Origin` is
/// 403, a foreign `Host` is 403; the right token upgrades.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_refuses_what_serve_refuses() {
    let (endpoint, offline) = endpoint(vec![]).await;
    let addr = endpoint.tcp_addr().expect("tcp");
    let host = addr.to_string();
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let checks = tokio::task::spawn_blocking(move || {
        use crate::serve_security::upgrade;
        [
            upgrade(addr, &host, &[]).0,
            upgrade(
                addr,
                &host,
                &["Authorization: Bearer wrong-token-0123456789".into()],
            )
            .0,
            upgrade(
                addr,
                &host,
                &[bearer.clone(), "Origin: https://evil.example".into()],
            )
            .0,
            upgrade(addr, "evil.example", std::slice::from_ref(&bearer)).0,
            upgrade(addr, &host, &[bearer]).0,
        ]
    })
    .await
    .expect("checks");
    assert_eq!(checks, [401, 401, 403, 403, 101]);
    endpoint.stop().await;
    drop(offline);
}

/// Protection: the endpoint takes at most `max_connections` clients; one more is refused with
/// 429 while they stay, and gets in once one leaves. (No Codex needed: nothing is asked of it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_refused_until_one_leaves() {
    use std::io::{Read, Write};
    let endpoint = Endpoint::start(
        EndpointSettings {
            max_connections: 1,
            ..settings(no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    let addr = endpoint.tcp_addr().expect("tcp");
    let statuses = tokio::task::spawn_blocking(move || {
        let host = addr.to_string();
        let bearer = format!("Authorization: Bearer {TOKEN}");
        // The first client upgrades and stays.
        let mut first = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            first,
            "GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{bearer}\r\n\r\n"
        )
        .expect("write");
        let mut head = [0u8; 12];
        first.read_exact(&mut head).expect("the first answer");
        let first_status = String::from_utf8_lossy(&head[9..12]).to_string();
        let while_open = crate::serve_security::upgrade(addr, &host, std::slice::from_ref(&bearer)).0;
        drop(first);
        let after = crate::util::wait_for("a freed slot", Duration::from_secs(10), || {
            let status = crate::serve_security::upgrade(addr, &host, std::slice::from_ref(&bearer)).0;
            (status == 101).then_some(status)
        });
        (first_status, while_open, after)
    })
    .await
    .expect("clients");
    assert_eq!(statuses, ("101".to_string(), 429, 101));
    endpoint.stop().await;
}

/// A raw client of the endpoint: Codex's app-server JSON-RPC over a WebSocket, as OpenClaw's
/// transport speaks it; every message it receives is kept in order.
pub(crate) struct Client<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> {
    sender: soketto::connection::Sender<tokio_util::compat::Compat<T>>,
    receiver: soketto::connection::Receiver<tokio_util::compat::Compat<T>>,
    pub(crate) next_id: i64,
    pub(crate) seen: Vec<Value>,
}

/// Upgrade `io` with the test token (`host` as the `Host` header); the handshake's status (`0`:
/// the connection closed before any answer, as a balancer whose backend is down does).
pub(crate) async fn ws_client<T>(io: T, host: &str, token: &str) -> Result<Client<T>, u16>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio_util::compat::TokioAsyncReadCompatExt;
    let mut client = soketto::handshake::Client::new(io.compat(), host, "/");
    let bearer = format!("Bearer {token}");
    let headers = [soketto::handshake::client::Header {
        name: "Authorization",
        value: bearer.as_bytes(),
    }];
    client.set_headers(&headers);
    let Ok(answer) = client.handshake().await else {
        return Err(0);
    };
    match answer {
        soketto::handshake::ServerResponse::Accepted { .. } => {}
        soketto::handshake::ServerResponse::Rejected { status_code } => return Err(status_code),
        soketto::handshake::ServerResponse::Redirect { status_code, .. } => {
            return Err(status_code)
        }
    }
    let mut builder = client.into_builder();
    builder.set_max_message_size(64 * 1024 * 1024);
    let (sender, receiver) = builder.finish();
    Ok(Client {
        sender,
        receiver,
        next_id: 1,
        seen: Vec::new(),
    })
}

pub(crate) async fn tcp_client(endpoint: &Endpoint) -> Client<tokio::net::TcpStream> {
    let addr = endpoint.tcp_addr().expect("tcp");
    let io = tokio::net::TcpStream::connect(addr).await.expect("connect");
    ws_client(io, &addr.to_string(), TOKEN)
        .await
        .expect("upgraded")
}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Client<T> {
    pub(crate) async fn send(&mut self, message: Value) {
        self.sender
            .send_text(message.to_string())
            .await
            .expect("send");
        self.sender.flush().await.expect("flush");
    }

    /// [`Client::send`] that says whether it went (the endpoint may be gone).
    pub(crate) async fn try_send(&mut self, message: Value) -> bool {
        self.sender.send_text(message.to_string()).await.is_ok()
            && self.sender.flush().await.is_ok()
    }

    /// The next message within `limit`: `Err(true)` once the connection is closed (or broken),
    /// `Err(false)` when nothing came within the limit.
    pub(crate) async fn try_next(&mut self, limit: Duration) -> Result<Value, bool> {
        let mut data = Vec::new();
        match tokio::time::timeout(limit, self.receiver.receive_data(&mut data)).await {
            Err(_) => Err(false),
            Ok(Err(_)) => Err(true),
            Ok(Ok(_)) => {
                let message: Value = serde_json::from_slice(&data).map_err(|_| true)?;
                self.seen.push(message.clone());
                Ok(message)
            }
        }
    }

    /// A request's answer, or why none came ([`Client::try_next`]'s `Err`).
    pub(crate) async fn try_request(
        &mut self,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, bool> {
        let id = self.next_id;
        self.next_id += 1;
        if !self
            .try_send(json!({"id": id, "method": method, "params": params}))
            .await
        {
            return Err(true);
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let message = self.try_next(left).await?;
            if message["id"] == json!(id) && message.get("method").is_none() {
                return Ok(message);
            }
        }
    }

    /// The next message; `None` once the endpoint closed the connection.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        let mut data = Vec::new();
        let received = tokio::time::timeout(
            Duration::from_secs(60),
            self.receiver.receive_data(&mut data),
        )
        .await
        .expect("a message within 60 s");
        received.ok()?;
        let message: Value = serde_json::from_slice(&data).expect("JSON");
        self.seen.push(message.clone());
        Some(message)
    }

    /// A request; its answer (`result` or `error`), the messages before it kept in `seen`.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.next().await.expect("the answer before the close");
            if message["id"] == json!(id) && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// A request whose params are sent as `params` says, byte for byte; its answer.
    pub(crate) async fn request_text(&mut self, method: &str, params: &str) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let text = format!(r#"{{"id":{id},"method":"{method}","params":{params}}}"#);
        self.sender.send_text(text).await.expect("send");
        self.sender.flush().await.expect("flush");
        loop {
            let message = self.next().await.expect("the answer before the close");
            if message["id"] == json!(id) && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Messages until one for which `done` holds (returned).
    pub(crate) async fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|message| done(message)) {
            return found.clone();
        }
        loop {
            match self.next().await {
                Some(message) if done(&message) => return message,
                Some(_) => {}
                None => panic!("closed before {what}: {:#?}", self.seen),
            }
        }
    }

    pub(crate) async fn initialize(&mut self) -> Value {
        let answer = self
            .request(
                "initialize",
                json!({"clientInfo": {"name": "endpoint-test", "version": "1.0"}}),
            )
            .await;
        self.send(json!({"method": "initialized"})).await;
        answer
    }
}

/// A new thread and one turn on it (`text`), to its `turn/completed`: (the thread, that message).
pub(crate) async fn one_turn<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    client: &mut Client<T>,
    text: &str,
) -> (String, Value) {
    let thread = start_turn(client, json!({}), text).await;
    let done = client
        .until("turn/completed", turn_completed(&thread))
        .await;
    (thread, done)
}

/// A new thread (`thread/start` with `params`) and a turn on it (`text`) started: the thread.
pub(crate) async fn start_turn<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    client: &mut Client<T>,
    params: Value,
    text: &str,
) -> String {
    let started = client.request("thread/start", params).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    client
        .request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
        )
        .await;
    thread
}

pub(crate) fn turn_completed(thread: &str) -> impl Fn(&Value) -> bool + '_ {
    move |message| message["method"] == "turn/completed" && message["params"]["threadId"] == thread
}

/// A resume's answer came after Codex's `thread/status/changed` `notLoaded` for the thread, as
/// Codex sent them.
fn assert_unloaded_before_the_answer(seen: &[Value], thread: &str, answer: &Value) {
    let at = |done: &dyn Fn(&Value) -> bool| seen.iter().position(done);
    let unloaded = at(&|message| {
        message["method"] == "thread/status/changed"
            && message["params"]["threadId"] == thread
            && message["params"]["status"]["type"] == "notLoaded"
    });
    let answered = at(&|message| message == answer);
    assert!(
        matches!((unloaded, answered), (Some(u), Some(a)) if u < a),
        "notLoaded before the resume's answer: {seen:#?}"
    );
}

/// The newest model request the stub received.
fn last_model_request(offline: &Offline) -> Value {
    offline
        .stub
        .request_bodies()
        .last()
        .and_then(|body| serde_json::from_slice(body).ok())
        .unwrap_or_default()
}

/// The thread a connection follows, as the endpoint's status lists it: (member, running turn).
fn followed(endpoint: &Endpoint, thread: &str) -> Option<(String, Option<String>)> {
    endpoint
        .status()
        .connections
        .iter()
        .flat_map(|connection| connection.threads.iter())
        .find(|followed| followed.id == thread)
        .map(|followed| (followed.member.clone(), followed.turn.clone()))
}

/// A client that reconnects resumes its thread on the member that has it; a member killed
/// during a turn ends that turn for the client with a failed `turn/completed` (never a hang),
/// and the thread resumes on the member's next incarnation; on shutdown a running turn is
/// interrupted and its client hears `turn/completed` (interrupted) before the close.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_survive_reconnects_member_crashes_and_shutdown_drains_turns() {
    let script = vec![
        StubStep::Text("FIRST".into()),
        StubStep::Text("AFTER-RECONNECT".into()),
        StubStep::Text("AFTER-UNSUBSCRIBE".into()),
        StubStep::Hang,
        StubStep::Text("AFTER-THE-CRASH".into()),
        StubStep::Hang,
    ];
    let (endpoint, offline) = endpoint(script).await;
    let mut first = tcp_client(&endpoint).await;
    let init = first.initialize().await;
    assert!(
        init["result"]["userAgent"].is_string(),
        "Codex's own initialize answer: {init}"
    );
    // The members were initialized by clawbridge: Codex took its name as the originator of
    // model requests, its own build version for the version the backend reads, and clawbridge's
    // version only for the suffix (docs/codex-wire.md, "clientInfo").
    let agent = init["result"]["userAgent"].as_str().unwrap_or_default();
    let codex = clawbridge::version_from_user_agent(agent).unwrap_or_default();
    assert!(
        agent.starts_with(&format!("clawbridge/{codex} ")) && !codex.is_empty(),
        "{agent}"
    );
    assert!(
        agent.ends_with(&format!("(clawbridge; {})", env!("CARGO_PKG_VERSION"))),
        "{agent}"
    );
    let started = first.request("thread/start", json!({})).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    let turn = json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]});
    let answer = first.request("turn/start", turn.clone()).await;
    assert!(answer["result"]["turn"]["id"].is_string(), "{answer}");
    let done = first.until("turn/completed", turn_completed(&thread)).await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let (member, _) = followed(&endpoint, &thread).expect("followed");

    let loaded = first.request("thread/loaded/list", json!({})).await;
    assert_eq!(loaded["result"]["data"], json!([thread]), "{loaded}");

    // 1. The client goes away: the member is told to let its thread go (memory stays bounded
    // over days).
    // It comes back: thread/resume finds the thread's member.
    drop(first);
    crate::util::wait_until_async("the first connection gone", Duration::from_secs(10), || {
        endpoint.status().connections.is_empty()
    })
    .await;
    let mut second = tcp_client(&endpoint).await;
    second.initialize().await;
    // The endpoint unsubscribed the member from the thread (Codex unloads a thread nobody is
    // subscribed to after its idle delay): asked again, the member says it is not subscribed.
    let again = second
        .request("thread/unsubscribe", json!({"threadId": thread}))
        .await;
    assert_eq!(again["result"]["status"], "notSubscribed", "{again}");
    // The member still holds the thread loaded for nobody (Codex's idle delay is 30 minutes);
    // a resume with new params makes Codex reload it (`thread/status/changed` `notLoaded`,
    // then the resume's answer). The endpoint keeps that order: OpenClaw's Codex plugin goes on
    // only once it saw `notLoaded` before the answer, and the new config takes effect.
    let resumed = second
        .request(
            "thread/resume",
            json!({"threadId": thread, "config": {"model_reasoning_effort": "low"}}),
        )
        .await;
    assert_eq!(resumed["result"]["thread"]["id"], thread, "{resumed}");
    assert_unloaded_before_the_answer(&second.seen, &thread, &resumed);
    assert_eq!(
        followed(&endpoint, &thread).map(|(member, _)| member),
        Some(member.clone()),
        "resumed on the member that has it"
    );
    second.request("turn/start", turn.clone()).await;
    let done = second
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let text = second.seen.iter().any(|message| {
        message["method"] == "item/completed" && message.to_string().contains("AFTER-RECONNECT")
    });
    assert!(text, "the model's answer reached the new connection");
    assert_eq!(
        last_model_request(&offline)["reasoning"]["effort"],
        "low",
        "the resumed thread runs with the new client's config"
    );

    // The same connection unsubscribes (as OpenClaw does after each run) and resumes with a new
    // config: it stops following, and the resume configures the thread anew as well.
    let unsubscribed = second
        .request("thread/unsubscribe", json!({"threadId": thread}))
        .await;
    assert_eq!(
        unsubscribed["result"]["status"], "unsubscribed",
        "{unsubscribed}"
    );
    assert_eq!(followed(&endpoint, &thread), None, "no longer followed");
    second.seen.clear();
    let resumed = second
        .request(
            "thread/resume",
            json!({"threadId": thread, "config": {"model_reasoning_effort": "high"}}),
        )
        .await;
    assert_unloaded_before_the_answer(&second.seen, &thread, &resumed);
    second.request("turn/start", turn.clone()).await;
    let done = second
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    assert_eq!(
        last_model_request(&offline)["reasoning"]["effort"],
        "high",
        "the thread runs with the config of its latest resume"
    );

    // 2. The member dies mid-turn (kill -9): the client's turn ends, failed, naming the member.
    second.seen.clear();
    let answer = second.request("turn/start", turn.clone()).await;
    let running = answer["result"]["turn"]["id"]
        .as_str()
        .expect("turn id")
        .to_string();
    assert_eq!(
        followed(&endpoint, &thread),
        Some((member.clone(), Some(running.clone())))
    );
    // The hanging model request is out (else the killed turn's request would be the resumed
    // turn's, and it would hang instead).
    crate::util::wait_until_async("the hanging model request", Duration::from_secs(30), || {
        offline.stub.request_bodies().len() >= 4
    })
    .await;
    let pid = endpoint
        .members()
        .into_iter()
        .find(|status| status.name == member)
        .and_then(|status| status.pid)
        .expect("the member's pid");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let lost = second
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(lost["params"]["turn"]["id"], running.as_str(), "{lost}");
    assert_eq!(lost["params"]["turn"]["status"], "failed", "{lost}");
    let why = lost["params"]["turn"]["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(why.contains(&member) && why.contains("went away"), "{why}");
    // The thread resumes on the member's next incarnation (same CODEX_HOME: Codex reads it back).
    let resumed = second
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    assert_eq!(resumed["result"]["thread"]["id"], thread, "{resumed}");
    second.seen.clear();
    second.request("turn/start", turn.clone()).await;
    let done = second
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let restarted = endpoint
        .members()
        .into_iter()
        .find(|status| status.name == member)
        .expect("member");
    assert_eq!(restarted.generation, 2, "{restarted:?}");

    // The turns that ended are counted for Prometheus, by status.
    let addr = endpoint.tcp_addr().expect("tcp");
    let (status, metrics) = http_get(addr, "/metrics", Some(TOKEN)).await;
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains("clawbridge_turns_total{status=\"completed\"}"),
        "{metrics}"
    );

    // 3. Shutdown with a turn running: interrupted, the client told, then closed.
    second.seen.clear();
    second.request("turn/start", turn.clone()).await;
    crate::util::wait_until_async("the turn running", Duration::from_secs(10), || {
        followed(&endpoint, &thread).is_some_and(|(_, turn)| turn.is_some())
    })
    .await;
    let stopping = tokio::spawn(endpoint.stop());
    let ended = second
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(ended["params"]["turn"]["status"], "interrupted", "{ended}");
    while second.next().await.is_some() {}
    stopping.await.expect("stopped");
    drop(offline);
}

/// An HTTP GET to the endpoint at `addr`: (status, body).
pub(crate) async fn http_get(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    let auth = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    tokio::task::spawn_blocking(move || crate::serve_security::raw_http(addr, &request))
        .await
        .expect("get")
}

/// Protection: `GET /status` answers only with the token, never to a browser, and lists the
/// connections (with the client's name) and the members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_behind_the_token_and_lists_connections() {
    let endpoint = Endpoint::start(settings(no_codex()), false)
        .await
        .expect("endpoint");
    let mut client = tcp_client(&endpoint).await;
    let init = client.initialize().await;
    assert!(
        init["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("no app-server")),
        "{init}"
    );
    let status = fetch_status(&endpoint.listen, TOKEN).await.expect("status");
    assert_eq!(
        status["connections"][0]["client"], "endpoint-test 1.0",
        "{status}"
    );
    assert_eq!(status["members"][0]["name"], "local-0", "{status}");
    let wrong = fetch_status(&endpoint.listen, "wrong-token-0123456789").await;
    let wrong = wrong.expect_err("a wrong token").to_string();
    assert!(wrong.contains("401"), "{wrong}");
    let addr = endpoint.tcp_addr().expect("tcp");
    let browser = tokio::task::spawn_blocking(move || {
        crate::serve_security::raw_http(
            addr,
            &format!(
                "GET /status HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nOrigin: http://{addr}\r\nConnection: close\r\n\r\n"
            ),
        )
        .0
    })
    .await
    .expect("browser");
    assert_eq!(browser, 403);
    drop(client);
    endpoint.stop().await;
}

/// Protections: a client that stops answering pings is closed after the idle timeout while a
/// live one that says nothing stays; a client that never sends `initialize` is closed; a
/// message over the size limit closes its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_silent_and_oversized_clients_are_closed_live_idle_ones_stay() {
    use tokio::io::AsyncWriteExt;
    let endpoint = Endpoint::start(
        EndpointSettings {
            idle_timeout: Duration::from_millis(1500),
            ping_interval: Duration::from_millis(300),
            handshake_timeout: Duration::from_secs(4),
            ..settings(no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    let addr = endpoint.tcp_addr().expect("tcp");
    let count = |endpoint: &Endpoint| endpoint.status().connections.len();
    // A live client: initializes, then only answers pings (soketto answers while receiving).
    let mut live = tcp_client(&endpoint).await;
    live.initialize().await;
    let live_task = tokio::spawn(async move {
        let mut data = Vec::new();
        let _ = live.receiver.receive_data(&mut data).await;
        live
    });
    // A dead one: upgraded, then nothing read or answered.
    let mut dead = tokio::net::TcpStream::connect(addr).await.expect("connect");
    dead.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {TOKEN}\r\n\r\n").as_bytes()).await.expect("upgrade");
    crate::util::wait_until_async("two connections", Duration::from_secs(5), || {
        count(&endpoint) == 2
    })
    .await;
    crate::util::wait_until_async("the dead client closed", Duration::from_secs(10), || {
        count(&endpoint) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        count(&endpoint),
        1,
        "the live client stays past the idle timeout"
    );
    assert!(!live_task.is_finished(), "the live client was not closed");
    live_task.abort();
    drop(dead);

    // Silent: upgraded and answering pings, but no initialize.
    let io = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut silent = ws_client(io, &addr.to_string(), TOKEN).await.expect("up");
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut data = Vec::new();
        silent.receiver.receive_data(&mut data).await.is_err()
    })
    .await
    .expect("closed within the handshake timeout");
    assert!(closed);

    // Oversized: one message past the limit.
    let mut big = tcp_client(&endpoint).await;
    big.initialize().await;
    let huge = "x".repeat(clawbridge::ENDPOINT_MAX_MESSAGE_BYTES + 1);
    let _ = big.sender.send_text(&huge).await;
    let _ = big.sender.flush().await;
    assert!(big.next().await.is_none(), "the connection is closed");
    endpoint.stop().await;
}

/// Protection: one connection has at most 64 requests in flight; the 65th is answered at once
/// with Codex's own "overloaded" error (-32001) while the others wait for their member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_its_requests_in_flight_is_told_it_is_overloaded() {
    let dir = tempfile::tempdir().expect("dir");
    let slow = dir.path().join("slow-codex");
    std::fs::write(&slow, "#!/bin/sh\nexec sleep 30\n").expect("script");
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let pool = PoolConfig {
        isolate_environment: true,
        handshake_timeout: Duration::from_secs(20),
        ..PoolConfig::new(Ok(slow), dir.path().to_path_buf())
    };
    let endpoint = Endpoint::start(settings(pool), false)
        .await
        .expect("endpoint");
    let mut client = tcp_client(&endpoint).await;
    for id in 1..=64 {
        client
            .send(json!({"id": id, "method": "thread/list", "params": {}}))
            .await;
    }
    crate::util::wait_until_async("64 in flight", Duration::from_secs(10), || {
        endpoint
            .status()
            .connections
            .first()
            .is_some_and(|connection| connection.requests_in_flight == 64)
    })
    .await;
    client
        .send(json!({"id": "65th", "method": "thread/list", "params": {}}))
        .await;
    let answer = client.next().await.expect("an answer");
    assert_eq!(answer["id"], "65th", "the id keeps its type: {answer}");
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    drop(client);
    endpoint.stop().await;
}

/// Protection: fair shares on a member. Sixteen connections keep 64 `thread/list` each in
/// flight to the one member (the real Codex); a seventeenth client's turn (its `thread/start`,
/// `turn/start` and the turn to its completion) is timed against the same turn on the idle
/// member, in the same run. The endpoint sends at most `MEMBER_IN_FLIGHT` requests to a member
/// and serves the waiting connections in turn, so the burst stretches the turn by a bounded
/// factor (with everything sent on as it came, Codex's own queue put the turn behind a
/// thousand requests).
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_member_stretches_another_clients_turn_by_a_bounded_factor() {
    const FACTOR: f64 = 15.0;
    let stub = ResponsesStub::start(StubScript {
        responses: (0..4)
            .map(|n| StubStep::Text(format!("ANSWER-{n}")))
            .collect(),
        ..Default::default()
    })
    .await
    .expect("stub");
    let home = OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home");
    let pool = PoolConfig {
        locals: 1,
        isolate_environment: true,
        config_overrides: vec![format!("openai_base_url=\"{}\"", stub.base_url())],
        recycle_rss_bytes: u64::MAX,
        ..PoolConfig::new(Ok(codex_bin()), home.path.clone())
    };
    let endpoint = Endpoint::start(
        EndpointSettings {
            max_connections: 32,
            cwd: crate::util::repo_root().join("fixtures/workspace"),
            ..settings(pool)
        },
        false,
    )
    .await
    .expect("endpoint");
    let mut victim = tcp_client(&endpoint).await;
    victim.initialize().await;
    // Warm, then the idle turn's time.
    one_turn(&mut victim, "warm up").await;
    let began = std::time::Instant::now();
    one_turn(&mut victim, "idle").await;
    let idle = began.elapsed();
    victim.seen.clear();
    // The burst: 16 connections, 64 requests each always in flight.
    let stop = tokio_util::sync::CancellationToken::new();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut flooders = Vec::new();
    for _ in 0..16 {
        let mut client = tcp_client(&endpoint).await;
        client.initialize().await;
        let (stop, answered) = (stop.clone(), std::sync::Arc::clone(&answered));
        flooders.push(tokio::spawn(async move {
            for id in 0..64 {
                client
                    .send(json!({"id": 1000 + id, "method": "thread/list", "params": {}}))
                    .await;
            }
            let mut next = 1064;
            loop {
                let message = tokio::select! {
                    () = stop.cancelled() => break,
                    message = client.next() => message,
                };
                let Some(message) = message else { break };
                client.seen.clear();
                if message.get("id").is_some() && message.get("method").is_none() {
                    answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    client
                        .send(json!({"id": next, "method": "thread/list", "params": {}}))
                        .await;
                    next += 1;
                }
            }
        }));
    }
    // The member is saturated: requests wait in the endpoint, as its status shows.
    crate::util::wait_until_async("the burst waits", Duration::from_secs(30), || {
        let status = endpoint.status();
        status
            .connections
            .iter()
            .map(|connection| connection.requests_in_flight)
            .sum::<usize>()
            >= 16 * 60
            && status.members.iter().any(|member| {
                member.waiting_requests > 16 * 32 && member.pending_requests <= 16 + 1
            })
    })
    .await;
    let before = answered.load(std::sync::atomic::Ordering::Relaxed);
    let began = std::time::Instant::now();
    one_turn(&mut victim, "under the burst").await;
    let burst = began.elapsed();
    let during = answered.load(std::sync::atomic::Ordering::Relaxed) - before;
    stop.cancel();
    for flooder in flooders {
        let _ = flooder.await;
    }
    let factor = burst.as_secs_f64() / idle.as_secs_f64().max(0.001);
    eprintln!(
        "a turn: {idle:?} idle, {burst:?} under a burst of 16 x 64 requests in flight ({during} of them answered meanwhile): {factor:.1}x"
    );
    assert!(
        during > 0,
        "the burst was served meanwhile (it was really there)"
    );
    assert!(
        factor <= FACTOR,
        "the burst stretched another client's turn {factor:.1}x ({idle:?} -> {burst:?}), more than {FACTOR}x"
    );
    drop(victim);
    endpoint.stop().await;
    drop(stub);
}

/// `unix://PATH`: the socket is the owner's only (0600), the token is still required, status
/// is read over it, a stale socket is replaced and a file that is not a socket is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_listens_on_a_private_unix_socket() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("clawbridge.sock");
    // A stale socket (its listener gone) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("stale"));
    let endpoint = Endpoint::start(
        EndpointSettings {
            listen: ListenAddr::Unix(path.clone()),
            ..settings(no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    let mode = std::fs::metadata(&path)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let io = tokio::net::UnixStream::connect(&path)
        .await
        .expect("connect");
    let refused = ws_client(io, "localhost", "wrong-token-0123456789").await;
    assert_eq!(refused.err(), Some(401));
    let io = tokio::net::UnixStream::connect(&path)
        .await
        .expect("connect");
    let mut client = ws_client(io, "localhost", TOKEN).await.expect("upgraded");
    client.initialize().await;
    let status = fetch_status(&ListenAddr::Unix(path.clone()), TOKEN)
        .await
        .expect("status");
    assert_eq!(status["listen"], format!("unix://{}", path.display()));
    assert_eq!(status["connections"].as_array().map(Vec::len), Some(1));
    // A second endpoint on a live socket is refused.
    let taken = Endpoint::start(
        EndpointSettings {
            listen: ListenAddr::Unix(path.clone()),
            ..settings(no_codex())
        },
        false,
    )
    .await;
    assert!(taken.is_err());
    drop(client);
    endpoint.stop().await;
    assert!(!path.exists(), "the socket is removed on stop");
    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "x").expect("file");
    let refused = Endpoint::start(
        EndpointSettings {
            listen: ListenAddr::Unix(file.clone()),
            ..settings(no_codex())
        },
        false,
    )
    .await;
    assert!(refused.is_err());
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), "x");
}

/// The CLI face: `clawbridge app-server --listen ws://127.0.0.1:0` prints its address, `app-server
/// status --listen URL` reads it with the same token file; a bad `--listen` and an address off
/// loopback without `--allow-remote` are usage errors (exit 2).
#[test]
fn app_server_status_reads_a_running_endpoint_and_bad_listens_exit_2() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("dir");
    let token = dir.path().join("token");
    write_token(&token);
    let token_arg = token.display().to_string();
    let state = dir.path().join("state");
    let mut child = crate::util::clawbridge()
        .args([
            "app-server",
            "--listen",
            "ws://127.0.0.1:0",
            "--app-servers",
            "0",
        ])
        .args(["--token-file", &token_arg])
        .arg("--state-dir")
        .arg(&state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("app-server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address");
    let url = format!("ws://{}", line.trim());
    let (code, stdout, stderr) = crate::util::run_cli(&[
        "app-server",
        "status",
        "--json",
        "--listen",
        &url,
        "--token-file",
        &token_arg,
    ]);
    // For a person: tables within 100 columns.
    let (table_code, table, table_stderr) = crate::util::run_cli(&[
        "app-server",
        "status",
        "--listen",
        &url,
        "--token-file",
        &token_arg,
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 0, "{stderr}");
    let status: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(status["listen"], url);
    assert_eq!(status["connections"], json!([]));
    assert_eq!(table_code, 0, "{table_stderr}");
    for heading in [
        "endpoint   ",
        "ACCOUNT",
        "CONN",
        "APP-SERVER",
        "(no connection)",
        "native",
    ] {
        assert!(table.contains(heading), "{heading}: {table}");
    }
    assert!(
        table.lines().all(|line| line.chars().count() <= 100),
        "{table}"
    );
    for listen in ["ws://nonsense", "tcp://127.0.0.1:1", "ws://0.0.0.0:0"] {
        let (code, _, stderr) =
            crate::util::run_cli(&["app-server", "--listen", listen, "--token-file", &token_arg]);
        assert_eq!(code, 2, "{listen}: {stderr}");
    }
}

/// Protection: a socket counts toward the connection bound from the moment it is accepted, and
/// one that makes no authenticated request within the deadline is closed, so sockets that never
/// speak (or speak without the token) cannot hold the endpoint's slots and descriptors. (No
/// Codex needed: nothing is asked of it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_count_toward_the_bound_and_are_closed_at_the_deadline() {
    use std::io::{Read, Write};
    let endpoint = Endpoint::start(
        EndpointSettings {
            max_connections: 2,
            upgrade_timeout: Duration::from_secs(1),
            ..settings(no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    let addr = endpoint.tcp_addr().expect("tcp");
    let outcome = tokio::task::spawn_blocking(move || {
        let host = addr.to_string();
        let bearer = format!("Authorization: Bearer {TOKEN}");
        // Two sockets: one says nothing, one asks without the token (401, kept alive).
        let silent = std::net::TcpStream::connect(addr).expect("connect");
        let mut unauthenticated = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            unauthenticated,
            "GET /status HTTP/1.1\r\nHost: {host}\r\n\r\n"
        )
        .expect("write");
        std::thread::sleep(Duration::from_millis(200));
        // The bound is reached: a client with the token is turned away while they stay.
        let while_held =
            crate::serve_security::upgrade(addr, &host, std::slice::from_ref(&bearer)).0;
        // Both are closed by the endpoint at the deadline (read ends), not left open.
        let closed = |mut socket: std::net::TcpStream| {
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let mut rest = Vec::new();
            let started = std::time::Instant::now();
            let ended = socket.read_to_end(&mut rest).is_ok();
            (ended, started.elapsed())
        };
        let silent = closed(silent);
        let unauthenticated = closed(unauthenticated);
        let after = crate::util::wait_for("a freed slot", Duration::from_secs(10), || {
            let status =
                crate::serve_security::upgrade(addr, &host, std::slice::from_ref(&bearer)).0;
            (status == 101).then_some(status)
        });
        (while_held, silent, unauthenticated, after)
    })
    .await
    .expect("clients");
    let (while_held, silent, unauthenticated, after) = outcome;
    assert_eq!(while_held, 429);
    assert!(silent.0 && silent.1 < Duration::from_secs(5), "{silent:?}");
    assert!(
        unauthenticated.0 && unauthenticated.1 < Duration::from_secs(5),
        "{unauthenticated:?}"
    );
    assert_eq!(after, 101);
    endpoint.stop().await;
}

/// Protection: probes cannot hold the door. Keep-alive sockets that each asked `/healthz` or
/// `/readyz` are closed after their answer, so a client still gets in at once (before: 429 for as
/// long as they stayed); a socket that keeps reading `/status` with the token is still closed at
/// the deadline (only an upgrade lifts it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_status_reads_cannot_hold_the_door() {
    use std::io::{Read, Write};
    let endpoint = Endpoint::start(
        EndpointSettings {
            max_connections: 2,
            upgrade_timeout: Duration::from_secs(2),
            ..settings(no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    let addr = endpoint.tcp_addr().expect("tcp");
    let outcome = tokio::task::spawn_blocking(move || {
        let host = addr.to_string();
        let bearer = format!("Authorization: Bearer {TOKEN}");
        // Four probes, keep-alive, each read to the end of its answer and then held open.
        let probes: Vec<(std::net::TcpStream, bool)> =
            ["/healthz", "/readyz", "/healthz", "/readyz"]
                .into_iter()
                .map(|path| {
                    let mut socket = std::net::TcpStream::connect(addr).expect("connect");
                    write!(socket, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").expect("write");
                    socket
                        .set_read_timeout(Some(Duration::from_secs(1)))
                        .expect("timeout");
                    let mut answer = Vec::new();
                    // The endpoint closes it: the read ends (it would time out on a kept socket).
                    let closed = socket.read_to_end(&mut answer).is_ok();
                    (socket, closed)
                })
                .collect();
        let status = crate::serve_security::upgrade(addr, &host, std::slice::from_ref(&bearer)).0;
        // A status reader with the token, keep-alive: closed at the deadline all the same.
        let mut reader = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            reader,
            "GET /status HTTP/1.1\r\nHost: {host}\r\n{bearer}\r\n\r\n"
        )
        .expect("write");
        reader
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let started = std::time::Instant::now();
        let mut rest = Vec::new();
        let ended = reader.read_to_end(&mut rest).is_ok();
        let held = started.elapsed();
        (
            probes.iter().all(|(_, closed)| *closed),
            status,
            ended,
            held,
            String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 200"),
        )
    })
    .await
    .expect("clients");
    let (probes_closed, status, ended, held, answered) = outcome;
    assert!(
        probes_closed,
        "every probe's socket was closed after its answer"
    );
    assert_eq!(
        status, 101,
        "a client gets in while the probes' sockets are gone"
    );
    assert!(answered, "the status was read");
    assert!(
        ended && held < Duration::from_secs(5),
        "closed at the deadline: {held:?}"
    );
    endpoint.stop().await;
}

/// Protection: the endpoint reads its token file as `serve` does: a symbolic link is refused,
/// naming the fix, and a file others may read is tightened to 0600 before it serves (anyone
/// holding the token runs commands as the operator through Codex); its `--offline` homes are
/// made in the state dir, private.
#[test]
fn a_linked_token_file_is_refused_a_readable_one_tightened_and_offline_homes_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let readable = dir.path().join("readable");
    std::fs::write(&readable, format!("{TOKEN}\n")).expect("token");
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).expect("mode");
    let private = dir.path().join("private");
    write_token(&private);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&private, &link).expect("link");
    let state = dir.path().join("state");
    let (code, _, stderr) = crate::util::run_cli(&[
        "app-server",
        "--listen",
        "ws://127.0.0.1:0",
        "--app-servers",
        "0",
        "--token-file",
        &link.display().to_string(),
        "--state-dir",
        &state.display().to_string(),
    ]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    // The readable file is made private, then serves; --offline makes its home in the state
    // dir, 0700.
    use std::io::BufRead;
    let mut child = crate::util::clawbridge()
        .args(["app-server", "--listen", "ws://127.0.0.1:0", "--offline"])
        .args(["--app-servers", "0", "--token-file"])
        .arg(&readable)
        .arg("--state-dir")
        .arg(&state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("app-server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.trim().starts_with("127.0.0.1:"), "{line}");
    let mode = std::fs::metadata(&readable)
        .expect("token")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the token file was tightened");
    for folder in ["app-server-offline", "app-server-offline/native"] {
        let mode = std::fs::metadata(state.join(folder))
            .expect(folder)
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{folder}");
    }
}

/// Protection (Security 3, item 10): connection numbers go on after a restart, so a restarted
/// endpoint's clients never write into an earlier run's `connection-N/` transcript folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_folders_are_not_shared_across_restarts() {
    let transcript = tempfile::tempdir().expect("transcript");
    for earlier in ["connection-1", "connection-7", "connection-notanumber"] {
        std::fs::create_dir(transcript.path().join(earlier)).expect("earlier run");
    }
    let endpoint = Endpoint::start(
        EndpointSettings {
            transcript: Some(transcript.path().to_path_buf()),
            ..settings(no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let number = endpoint.status().connections[0].number;
    assert_eq!(number, 8);
    drop(client);
    endpoint.stop().await;
    let lines = std::fs::read_to_string(transcript.path().join("connection-8/connection.jsonl"))
        .expect("the new connection's own folder");
    assert!(lines.contains("initialize"), "{lines}");
    assert_eq!(
        std::fs::read_dir(transcript.path().join("connection-1"))
            .expect("earlier")
            .count(),
        0,
        "an earlier run's folder is left alone"
    );
}

/// `clawbridge app-server --listen ws://127.0.0.1:0` as a child started in `dir` (with a Codex
/// home of its own there, `DIR/token` and `DIR/state`, the pinned Codex) and `flags`; the child
/// (killed on drop), its address and a client that passed the handshake.
pub(crate) async fn spawned_endpoint(
    dir: &std::path::Path,
    flags: &[std::ffi::OsString],
) -> (tokio::process::Child, String, Client<tokio::net::TcpStream>) {
    spawned_endpoint_with(dir, flags, &[]).await
}

/// [`spawned_endpoint`] with `env` set besides.
pub(crate) async fn spawned_endpoint_with(
    dir: &std::path::Path,
    flags: &[std::ffi::OsString],
    env: &[(&str, &str)],
) -> (tokio::process::Child, String, Client<tokio::net::TcpStream>) {
    let token = "spawned-endpoint-token-0123456789";
    crate::util::write_private(&dir.join("token"), token);
    std::fs::create_dir_all(dir.join("codex-home")).expect("home");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_clawbridge"))
        .args(["app-server", "--listen", "ws://127.0.0.1:0"])
        .args(flags)
        .arg("--token-file")
        .arg(dir.join("token"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--codex-bin")
        .arg(crate::e2e::codex_bin())
        .env("CODEX_HOME", dir.join("codex-home"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("endpoint");
    let mut line = String::new();
    {
        use tokio::io::AsyncBufReadExt;
        let stdout = child.stdout.take().expect("stdout");
        tokio::io::BufReader::new(stdout)
            .read_line(&mut line)
            .await
            .expect("address");
    }
    let addr = line.trim().to_string();
    let io = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let mut client = ws_client(io, &addr, token).await.expect("upgraded");
    client.initialize().await;
    (child, addr, client)
}

/// SIGTERM to a spawned endpoint, then its end (it drains: captures and traces are flushed).
pub(crate) async fn stop_spawned(mut child: tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
}
