//! The peer and session over an in-memory transport: no Codex binary needed.

use std::time::Duration;

use clawbridge::ApprovalPolicy;
use clawbridge::DefaultHandler;
use clawbridge::{
    CodexSession, HandlerFuture, ServerRequest, ServerRequestHandler, SessionError, TurnEvent,
    TurnLimits, TurnStatus,
};
use clawbridge::{
    CollaborationMode, CollaborationSettings, SandboxPolicy, TurnStartParams, UserInput,
};
use clawbridge::{Incoming, RequestId, RpcError};
use clawbridge::{Peer, PeerConfig, PeerError};
use serde_json::{json, Value};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

/// The far end of the transport: reads our lines, writes whatever the test wants.
struct FakeServer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
}

impl FakeServer {
    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.lines.next_line())
            .await
            .expect("client wrote in time")
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("client sent invalid JSON {line}: {e}"))
    }

    async fn send_raw(&mut self, text: &str) {
        self.writer.write_all(text.as_bytes()).await.expect("write");
        self.writer.flush().await.expect("flush");
    }

    async fn send(&mut self, value: Value) {
        self.send_raw(&format!("{value}\n")).await;
    }
}

fn transport(config: PeerConfig) -> (Peer, clawbridge::Events, FakeServer) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (client_read, client_write) = tokio::io::split(client);
    let (server_read, server_write) = tokio::io::split(server);
    let (peer, events) = Peer::connect(client_read, client_write, config);
    (
        peer,
        events,
        FakeServer {
            lines: BufReader::new(server_read).lines(),
            writer: server_write,
        },
    )
}

#[tokio::test]
async fn responses_match_requests_and_ids_keep_their_type() {
    let (peer, mut events, mut server) = transport(PeerConfig::default());
    let call = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.request::<_, Value>("thread/start", &json!({"model": "m"}))
                .await
        }
    });
    let request = server.recv().await;
    assert!(request.get("jsonrpc").is_none(), "no jsonrpc field is sent");
    assert_eq!(request["method"], "thread/start");
    // Interleave: a banner, a notification, a server request with a string id, then the answer.
    server.send_raw("WARNING: some banner\n").await;
    server
        .send(json!({"method": "thread/started", "params": {"n": 1}}))
        .await;
    server
        .send(json!({"id": "srv-1", "method": "item/tool/call", "params": {"tool": "x"}}))
        .await;
    server
        .send(json!({"method": "turn/started", "params": {"n": 2}}))
        .await;
    server
        .send(json!({"id": request["id"], "result": {"thread": {"id": "t1"}}}))
        .await;
    let answer = call.await.expect("join").expect("answer");
    assert_eq!(answer["thread"]["id"], "t1");
    let kinds: Vec<String> = vec![
        events.recv().await.expect("1"),
        events.recv().await.expect("2"),
        events.recv().await.expect("3"),
    ]
    .into_iter()
    .map(|message| match message {
        Incoming::Request { id, method, .. } => format!("request {id} {method}"),
        Incoming::Notification { method, .. } => format!("notification {method}"),
        Incoming::Response { .. } => "response".to_string(),
    })
    .collect();
    assert_eq!(
        kinds,
        vec![
            "notification thread/started",
            "request \"srv-1\" item/tool/call",
            "notification turn/started"
        ]
    );
    peer.respond(RequestId::String("srv-1".into()), json!({"success": true}))
        .await
        .expect("respond");
    let response = server.recv().await;
    assert_eq!(
        response["id"],
        json!("srv-1"),
        "string id echoed as a string"
    );
    peer.respond(RequestId::Integer(0), json!({}))
        .await
        .expect("respond");
    assert_eq!(
        server.recv().await["id"],
        json!(0),
        "integer id echoed as an integer"
    );
    peer.respond_error(RequestId::Integer(7), -32601, "nope".into())
        .await
        .expect("respond");
    let error = server.recv().await;
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(7), json!(-32601))
    );
}

#[tokio::test]
async fn raw_newlines_in_strings_are_rejoined() {
    let (_peer, mut events, mut server) = transport(PeerConfig::default());
    server
        .send_raw("{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"one\ntwo\"}}\n")
        .await;
    let message = events.recv().await.expect("event");
    let params: Value = message.params().expect("params").expect("json");
    assert_eq!(params["delta"], "one\ntwo");
}

#[tokio::test]
async fn an_over_cap_frame_fails_its_request_and_the_reader_resyncs() {
    let config = PeerConfig {
        max_frame_bytes: 4096,
        ..PeerConfig::default()
    };
    let (peer, mut events, mut server) = transport(config);
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request::<_, Value>("thread/resume", &json!({})).await }
    });
    let request = server.recv().await;
    server
        .send(json!({"id": request["id"], "result": {"blob": "x".repeat(10_000)}}))
        .await;
    server.send(json!({"method": "after"})).await;
    match call.await.expect("join") {
        Err(PeerError::FrameTooLarge { method, bytes }) => {
            assert_eq!(method, "thread/resume");
            assert!(bytes > 10_000);
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
    assert_eq!(events.recv().await.expect("event").method(), Some("after"));
    let second = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request::<_, Value>("x", &json!({})).await }
    });
    let request = server.recv().await;
    server
        .send(json!({"id": request["id"], "result": {"ok": true}}))
        .await;
    assert_eq!(second.await.expect("join").expect("ok")["ok"], true);
}

/// A caller that gives up on a request (its future dropped mid-wait) leaves no pending entry.
#[tokio::test]
async fn a_dropped_request_leaves_no_pending_entry() {
    let (peer, _events, mut server) = transport(PeerConfig::default());
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request::<_, Value>("slow", &json!({})).await }
    });
    let _ = server.recv().await;
    assert_eq!(peer.pending_requests(), 1);
    call.abort();
    let _ = call.await;
    assert_eq!(
        peer.pending_requests(),
        0,
        "the aborted request is forgotten"
    );
}

#[tokio::test]
async fn timeouts_errors_and_closed_connections() {
    let config = PeerConfig {
        request_timeout: Duration::from_millis(100),
        ..PeerConfig::default()
    };
    let (peer, _events, mut server) = transport(config);
    let timed_out = peer.request::<_, Value>("slow", &json!({})).await;
    assert!(
        matches!(timed_out, Err(PeerError::Timeout { .. })),
        "{timed_out:?}"
    );
    let _ = server.recv().await;
    assert_eq!(
        peer.pending_requests(),
        0,
        "a timed-out request is forgotten"
    );
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request::<_, Value>("bad", &json!({})).await }
    });
    let request = server.recv().await;
    server.send(json!({"id": request["id"], "error": {"code": -32600, "message": "Invalid request: nope"}})).await;
    match call.await.expect("join") {
        Err(PeerError::Rpc { error, .. }) => assert_eq!(error.code, -32600),
        other => panic!("{other:?}"),
    }
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request::<_, Value>("never", &json!({})).await }
    });
    let _ = server.recv().await;
    drop(server);
    assert!(matches!(
        call.await.expect("join"),
        Err(PeerError::ConnectionClosed)
    ));
}

#[tokio::test]
async fn back_pressure_keeps_every_notification() {
    let config = PeerConfig {
        event_capacity: 4,
        ..PeerConfig::default()
    };
    let (_peer, mut events, mut server) = transport(config);
    let writer = tokio::spawn(async move {
        for n in 0..200 {
            server
                .send(json!({"method": "n", "params": {"n": n}}))
                .await;
        }
        server
    });
    for n in 0..200 {
        let message = events.recv().await.expect("event");
        let params: Value = message.params().expect("params").expect("json");
        assert_eq!(params["n"], n);
    }
    drop(writer.await.expect("join"));
}

// ---------------------------------------------------------------------------------------------
// Session over the in-memory transport
// ---------------------------------------------------------------------------------------------

fn turn_params(thread_id: &str) -> TurnStartParams {
    TurnStartParams {
        thread_id: thread_id.to_string(),
        input: vec![UserInput::Text {
            text: "hi".into(),
            text_elements: vec![],
        }],
        cwd: "/ws".into(),
        approval_policy: ApprovalPolicy::Never.into(),
        approvals_reviewer: "user",
        sandbox_policy: SandboxPolicy::DangerFullAccess,
        model: "gpt-5.5".into(),
        personality: "none",
        service_tier: None,
        effort: Some("medium"),
        collaboration_mode: CollaborationMode {
            mode: "default",
            settings: CollaborationSettings {
                model: "gpt-5.5".into(),
                reasoning_effort: Some("medium"),
                developer_instructions: None,
            },
        },
    }
}

async fn session_with(user_agent: &str) -> (Result<CodexSession, SessionError>, FakeServer) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (client_read, client_write) = tokio::io::split(client);
    let (server_read, server_write) = tokio::io::split(server);
    let mut server = FakeServer {
        lines: BufReader::new(server_read).lines(),
        writer: server_write,
    };
    let connect = tokio::spawn(CodexSession::connect(
        client_read,
        client_write,
        PeerConfig::default(),
        true,
    ));
    let initialize = server.recv().await;
    assert_eq!(initialize["method"], "initialize");
    // clawbridge names itself (Codex makes the name the process-wide `originator` of model
    // requests) with its own version, never Codex's (docs/codex-wire.md, "clientInfo").
    assert_eq!(
        initialize["params"]["clientInfo"],
        json!({"name": "clawbridge", "title": "clawbridge", "version": env!("CARGO_PKG_VERSION")})
    );
    assert_eq!(
        initialize["params"]["capabilities"]["experimentalApi"],
        true
    );
    server
        .send(
            json!({"id": initialize["id"], "result": {"userAgent": user_agent, "codexHome": "/h"}}),
        )
        .await;
    let session = connect.await.expect("join");
    if session.is_ok() {
        assert_eq!(server.recv().await["method"], "initialized");
    }
    (session, server)
}

struct Echo;
impl ServerRequestHandler for Echo {
    fn handle<'a>(&'a self, request: &'a ServerRequest) -> HandlerFuture<'a> {
        Box::pin(async move {
            if request.method == "item/tool/call" {
                Ok(
                    json!({"contentItems": [{"type": "inputText", "text": format!("echo {}", request.params["arguments"])}], "success": true}),
                )
            } else {
                Err(RpcError {
                    code: -32601,
                    message: format!("no {}", request.method),
                    data: None,
                })
            }
        })
    }
}

#[tokio::test]
async fn a_turn_with_a_tool_call_and_an_unknown_request() {
    let (session, mut server) =
        session_with("clawbridge/0.169.0 (Linux; x86_64) xterm (clawbridge; 0.1.0)").await;
    let mut session = session.expect("session");
    assert_eq!(session.codex_version.as_deref(), Some("0.169.0"));
    let script = tokio::spawn(async move {
        let turn = server.recv().await;
        assert_eq!(turn["method"], "turn/start");
        server.send(json!({"method": "turn/started", "params": {"threadId": "t1", "turn": {"id": "u1"}}})).await;
        server
            .send(
                json!({"id": turn["id"], "result": {"turn": {"id": "u1", "status": "inProgress"}}}),
            )
            .await;
        server.send(json!({"id": 0, "method": "item/tool/call", "params": {"threadId": "t1", "turnId": "u1", "callId": "c1", "tool": "lookup", "arguments": {"city": "Paris"}}})).await;
        let answer = server.recv().await;
        assert_eq!(answer["id"], json!(0));
        assert_eq!(
            answer["result"]["contentItems"][0]["text"],
            "echo {\"city\":\"Paris\"}"
        );
        server
            .send(json!({"id": "odd", "method": "attestation/generate", "params": {}}))
            .await;
        let refusal = server.recv().await;
        assert_eq!(
            (refusal["id"].clone(), refusal["error"]["code"].clone()),
            (json!("odd"), json!(-32601))
        );
        server.send(json!({"method": "item/completed", "params": {"threadId": "t1", "turnId": "u1", "item": {"type": "agentMessage", "text": "done"}}})).await;
        server
            .send(json!({"method": "account/rateLimits/updated", "params": {}}))
            .await;
        server.send(json!({"method": "turn/completed", "params": {"threadId": "t1", "turn": {"id": "u1", "status": "completed", "error": null}}})).await;
        server
    });
    let mut seen = Vec::new();
    let mut observer = |event: TurnEvent<'_>| {
        if let TurnEvent::Notification { method, .. } = event {
            seen.push(method.to_string());
        }
    };
    let outcome = session
        .run_turn(
            &turn_params("t1"),
            &Echo,
            &mut observer,
            TurnLimits::default(),
        )
        .await
        .expect("turn");
    let _server = script.await.expect("script");
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.agent_messages, vec!["done"]);
    assert_eq!(outcome.server_requests, 2);
    assert_eq!(
        seen.first().map(String::as_str),
        Some("turn/started"),
        "early notifications are not lost"
    );
    assert_eq!(seen.last().map(String::as_str), Some("turn/completed"));
}

/// In paused time: five minutes of unrelated chatter pass in no wall time, and the idle timer
/// fires at exactly its limit.
#[tokio::test(start_paused = true)]
async fn an_idle_turn_is_interrupted() {
    let (session, mut server) = session_with("clawbridge/0.169.0 (x)").await;
    let mut session = session.expect("session");
    let script = tokio::spawn(async move {
        let turn = server.recv().await;
        server
            .send(json!({"id": turn["id"], "result": {"turn": {"id": "u1"}}}))
            .await;
        // Unrelated chatter does not count as progress.
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(60)).await;
            server
                .send(json!({"method": "account/rateLimits/updated", "params": {}}))
                .await;
        }
        let interrupt = server.recv().await;
        assert_eq!(interrupt["method"], "turn/interrupt");
        assert_eq!(
            interrupt["params"],
            json!({"threadId": "t1", "turnId": "u1"})
        );
        server
            .send(json!({"id": interrupt["id"], "result": {}}))
            .await;
        server.send(json!({"method": "turn/completed", "params": {"threadId": "t1", "turn": {"id": "u1", "status": "interrupted"}}})).await;
        server
    });
    let limits = TurnLimits {
        idle: Duration::from_secs(200),
        hard: Duration::from_secs(3600),
        interrupt_grace: Duration::from_secs(5),
        ..TurnLimits::default()
    };
    let started = tokio::time::Instant::now();
    let result = session
        .run_turn(
            &turn_params("t1"),
            &DefaultHandler::default(),
            &mut |_| {},
            limits,
        )
        .await;
    assert!(
        matches!(result, Err(SessionError::IdleTimeout(_))),
        "{result:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(200) && waited < Duration::from_secs(240),
        "the idle limit, not the chatter, ended the turn: {waited:?}"
    );
    let _server = script.await.expect("script");
}

#[tokio::test]
async fn a_closed_connection_mid_turn_is_an_error_not_a_hang() {
    let (session, mut server) = session_with("clawbridge/0.169.0 (x)").await;
    let mut session = session.expect("session");
    let script = tokio::spawn(async move {
        let turn = server.recv().await;
        server
            .send(json!({"id": turn["id"], "result": {"turn": {"id": "u1"}}}))
            .await;
        drop(server);
    });
    let started = std::time::Instant::now();
    let result = session
        .run_turn(
            &turn_params("t1"),
            &DefaultHandler::default(),
            &mut |_| {},
            TurnLimits::default(),
        )
        .await;
    script.await.expect("script");
    assert!(
        matches!(result, Err(SessionError::CodexExited { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn an_old_codex_is_refused() {
    let (session, _server) = session_with("codex/0.168.2 (x)").await;
    match session {
        Err(error @ SessionError::VersionTooOld { .. }) => {
            assert!(error.is_startup() && error.to_string().contains("0.168.2"))
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("accepted an old codex"),
    }
    let (session, _server) = session_with("clawbridge/9.0.0 (x)").await;
    assert!(
        session.is_ok(),
        "newer versions are accepted (a floor, never a ceiling)"
    );
}

/// Answers tool calls only once the test lets it (a client slow to send its tool result).
struct AnswersLater(std::sync::Arc<tokio::sync::Notify>);

impl ServerRequestHandler for AnswersLater {
    fn handle<'a>(&'a self, _request: &'a ServerRequest) -> HandlerFuture<'a> {
        Box::pin(async move {
            self.0.notified().await;
            Ok(json!({"contentItems": [], "success": true}))
        })
    }
}

/// One app-server, two threads: a run stuck answering a tool call while its thread streams more
/// than it may hold must not block the hub's router; the stuck run ends at once with an overflow
/// error of its own (its turn interrupted, without waiting for the answer), and the other
/// thread's run completes.
#[tokio::test]
async fn a_run_that_falls_behind_fails_alone_and_other_threads_flow() {
    use clawbridge::CodexHub;
    let (session, mut server) = session_with("clawbridge/0.169.0 (x)").await;
    let hub = CodexHub::from_session(session.expect("session"));
    let ws = crate::util::TestWorkspace::full();
    let run = crate::util::run_with(&ws.path(), json!({}));
    let (_, params) = crate::util::translate_run(&run);
    let mut handles = Vec::new();
    for thread in ["A", "B"] {
        let opening = {
            let hub = hub.clone();
            let thread_params = params.thread.clone();
            tokio::spawn(async move { hub.open_thread(&thread_params).await })
        };
        let start = server.recv().await;
        assert_eq!(start["method"], "thread/start");
        server
            .send(json!({"id": start["id"], "result": {"thread": {"id": thread}}}))
            .await;
        handles.push(opening.await.expect("join").expect("thread"));
    }
    let mut b = handles.pop().expect("B");
    let mut a = handles.pop().expect("A");
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let run_a = {
        let hub = hub.clone();
        let handler = AnswersLater(release.clone());
        tokio::spawn(async move {
            hub.run_turn(
                &mut a,
                &turn_params("A"),
                &handler,
                &mut |_| {},
                TurnLimits::default(),
            )
            .await
        })
    };
    let turn = server.recv().await;
    server
        .send(json!({"id": turn["id"], "result": {"turn": {"id": "uA"}}}))
        .await;
    server.send(json!({"id": 900, "method": "item/tool/call", "params": {"threadId": "A", "turnId": "uA", "callId": "c", "tool": "t", "arguments": {}}})).await;
    for _ in 0..1100 {
        server.send(json!({"method": "item/agentMessage/delta", "params": {"threadId": "A", "turnId": "uA", "delta": "x"}})).await;
    }
    // A is ended now, though its tool answer never came: its turn is interrupted.
    let interrupt = server.recv().await;
    assert_eq!(interrupt["method"], "turn/interrupt", "{interrupt}");
    assert_eq!(interrupt["params"]["threadId"], "A");
    server
        .send(json!({"id": interrupt["id"], "result": {}}))
        .await;
    server.send(json!({"method": "turn/completed", "params": {"threadId": "A", "turn": {"id": "uA", "status": "interrupted"}}})).await;
    let ended = tokio::time::timeout(Duration::from_secs(5), run_a)
        .await
        .expect("A ends without its answer")
        .expect("join");
    assert!(matches!(ended, Err(SessionError::Overflow(_))), "{ended:?}");
    // Thread B is served although A's run is 1100 messages behind.
    let run_b = {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.run_turn(
                &mut b,
                &turn_params("B"),
                &DefaultHandler::default(),
                &mut |_| {},
                TurnLimits::default(),
            )
            .await
        })
    };
    let turn = server.recv().await;
    assert_eq!(turn["params"]["threadId"], "B");
    server
        .send(json!({"id": turn["id"], "result": {"turn": {"id": "uB"}}}))
        .await;
    server.send(json!({"method": "turn/completed", "params": {"threadId": "B", "turn": {"id": "uB", "status": "completed"}}})).await;
    let done = tokio::time::timeout(Duration::from_secs(5), run_b)
        .await
        .expect("B is not blocked by A")
        .expect("join")
        .expect("B's turn");
    assert_eq!(done.status, TurnStatus::Completed);
    // The answer that comes late goes nowhere; the app-server lives on.
    release.notify_one();
    assert!(hub.is_alive());
}

/// What Codex says about a thread after its run ended is dropped, not replayed into the thread's
/// next run.
#[tokio::test]
async fn late_messages_of_an_ended_run_are_not_replayed_into_the_next() {
    use clawbridge::CodexHub;
    let (session, mut server) = session_with("clawbridge/0.169.0 (x)").await;
    let hub = CodexHub::from_session(session.expect("session"));
    let ws = crate::util::TestWorkspace::full();
    let mut run = crate::util::run_with(&ws.path(), json!({}));
    let (_, params) = crate::util::translate_run(&run);
    let opening = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.open_thread(&params.thread).await })
    };
    let start = server.recv().await;
    server
        .send(json!({"id": start["id"], "result": {"thread": {"id": "T"}}}))
        .await;
    let first = opening.await.expect("join").expect("thread");
    drop(first);
    server
        .send(json!({"method": "thread/status/changed", "params": {"threadId": "T", "status": "stale"}}))
        .await;
    // A barrier: the router answers this request of no thread after it has routed the
    // notification before it (one ordered loop), so the thread is claimed again only then.
    server
        .send(json!({"id": "barrier", "method": "clawbridge/barrier", "params": {}}))
        .await;
    let barrier = server.recv().await;
    assert_eq!(barrier["id"], "barrier", "{barrier}");
    run.thread_id = Some("T".into());
    let (_, params) = crate::util::translate_run(&run);
    let resuming = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.open_thread(&params.thread).await })
    };
    let resume = server.recv().await;
    assert_eq!(resume["method"], "thread/resume");
    server
        .send(json!({"id": resume["id"], "result": {"thread": {"id": "T"}}}))
        .await;
    let mut second = resuming.await.expect("join").expect("thread");
    let turn = {
        let hub = hub.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let outcome = hub
                .run_turn(
                    &mut second,
                    &turn_params("T"),
                    &DefaultHandler::default(),
                    &mut |event| {
                        if let TurnEvent::Notification { params, .. } = event {
                            seen.push(params.parse::<Value>().expect("json"));
                        }
                    },
                    TurnLimits::default(),
                )
                .await;
            (outcome, seen)
        })
    };
    let start = server.recv().await;
    server
        .send(json!({"id": start["id"], "result": {"turn": {"id": "u2"}}}))
        .await;
    server.send(json!({"method": "turn/completed", "params": {"threadId": "T", "turn": {"id": "u2", "status": "completed"}}})).await;
    let (outcome, seen) = turn.await.expect("join");
    assert_eq!(outcome.expect("turn").status, TurnStatus::Completed);
    assert!(
        !seen.iter().any(|params| params["status"] == "stale"),
        "a stale message was replayed: {seen:?}"
    );
}

/// Protection: once the app-server's output has ended, a request fails at once, even though its
/// input still takes the request's line (a member that died as the request was sent, before the
/// pool had noticed: its login waited out the whole 30 s, the client's error "got no answer").
#[tokio::test(start_paused = true)]
async fn a_request_after_the_output_ended_fails_at_once() {
    let (peer, mut events, mut server) = transport(PeerConfig::default());
    // The far end stops writing and keeps reading.
    server.writer.shutdown().await.expect("shutdown");
    assert!(events.recv().await.is_none(), "the reader ended");
    let answer = peer
        .request::<_, Value>("account/login/start", &json!({}))
        .await;
    assert!(
        matches!(answer, Err(PeerError::ConnectionClosed)),
        "{answer:?}"
    );
    assert_eq!(peer.pending_requests(), 0);
}

/// A closed peer ends its reader and writer even while the transport stays open: the pending
/// request fails, the events end, and `closed` returns (the tasks are owned and joined).
#[tokio::test]
async fn a_closed_peer_ends_its_tasks_while_the_transport_stays_open() {
    let (peer, mut events, mut server) = transport(PeerConfig::default());
    let asking = peer.clone();
    let request =
        tokio::spawn(async move { asking.request::<_, Value>("thread/start", &json!({})).await });
    let sent = server.recv().await;
    assert_eq!(sent["method"], "thread/start");
    peer.close();
    tokio::time::timeout(Duration::from_secs(5), peer.closed())
        .await
        .expect("the reader and the writer ended");
    let answer = request.await.expect("joined");
    assert!(
        matches!(answer, Err(PeerError::ConnectionClosed)),
        "{answer:?}"
    );
    assert!(events.recv().await.is_none(), "the events ended");
    // The far end never closed: only `close` ended them (and they let go of the transport).
    drop(server);
}

/// A turn whose last agent message came but whose `turn/completed` never does ends as
/// completed after the completion grace, flagged as recovered; token-usage chatter after the
/// message does not hold it open, but a later item of the turn does (in paused time).
#[tokio::test(start_paused = true)]
async fn a_missing_turn_completed_is_recovered_after_the_grace() {
    use clawbridge::MISSING_TURN_COMPLETED;
    let (session, mut server) = session_with("clawbridge/0.169.0 (x)").await;
    let mut session = session.expect("session");
    let script = tokio::spawn(async move {
        let turn = server.recv().await;
        server
            .send(json!({"id": turn["id"], "result": {"turn": {"id": "u1"}}}))
            .await;
        server.send(json!({"method": "item/completed", "params": {"threadId": "t1", "turnId": "u1", "item": {"type": "agentMessage", "id": "m1", "text": "first"}}})).await;
        // A later item of the turn: the first message was not the last one.
        tokio::time::sleep(Duration::from_secs(5)).await;
        server.send(json!({"method": "item/started", "params": {"threadId": "t1", "turnId": "u1", "item": {"type": "commandExecution", "id": "c1"}}})).await;
        tokio::time::sleep(Duration::from_secs(20)).await;
        server.send(json!({"method": "item/completed", "params": {"threadId": "t1", "turnId": "u1", "item": {"type": "agentMessage", "id": "m2", "text": "last"}}})).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        server.send(json!({"method": "thread/tokenUsage/updated", "params": {"threadId": "t1", "turnId": "u1", "tokenUsage": {}}})).await;
        // ... and then nothing: no turn/completed.
        server
    });
    let limits = TurnLimits {
        idle: Duration::from_secs(300),
        completion_grace: Duration::from_secs(10),
        ..TurnLimits::default()
    };
    let started = tokio::time::Instant::now();
    let outcome = session
        .run_turn(
            &turn_params("t1"),
            &DefaultHandler::default(),
            &mut |_| {},
            limits,
        )
        .await
        .expect("recovered, not failed");
    let waited = started.elapsed();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.recovered, Some(MISSING_TURN_COMPLETED));
    assert_eq!(outcome.agent_messages, vec!["first", "last"]);
    // 25 s until the last message, then the 10 s grace (the usage update did not reset it).
    assert!(
        waited >= Duration::from_secs(35) && waited < Duration::from_secs(37),
        "{waited:?}"
    );
    let _server = script.await.expect("script");
}

/// Backpressure: an overloaded app-server's `-32001` is retried (a new request, a new id) with a
/// growing pause, and the request then succeeds; past the retries the `-32001` is the answer.
#[tokio::test(start_paused = true)]
async fn an_overloaded_answer_is_retried_then_succeeds() {
    let config = PeerConfig {
        overload_retries: 3,
        overload_backoff: (Duration::from_millis(100), Duration::from_secs(1)),
        ..PeerConfig::default()
    };
    let (peer, _events, mut server) = transport(config);
    let asking = peer.clone();
    let started = tokio::time::Instant::now();
    let request = tokio::spawn(async move {
        asking
            .request::<_, Value>("thread/start", &json!({"cwd": "/w"}))
            .await
    });
    let mut ids = Vec::new();
    for _ in 0..2 {
        let sent = server.recv().await;
        assert_eq!(sent["method"], "thread/start");
        assert_eq!(sent["params"], json!({"cwd": "/w"}));
        ids.push(sent["id"].clone());
        server
            .send(json!({"id": sent["id"], "error": {"code": -32001, "message": "Server overloaded; retry later"}}))
            .await;
    }
    let sent = server.recv().await;
    ids.push(sent["id"].clone());
    server
        .send(json!({"id": sent["id"], "result": {"thread": {"id": "t1"}}}))
        .await;
    let answer = request
        .await
        .expect("joined")
        .expect("succeeded after retries");
    assert_eq!(answer["thread"]["id"], "t1");
    ids.dedup();
    assert_eq!(ids.len(), 3, "each retry is a new request: {ids:?}");
    // Two pauses: at least half of 100 ms and of 200 ms (jitter keeps the upper half).
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );

    // Past the retries, the overload is the answer.
    let asking = peer.clone();
    let request =
        tokio::spawn(async move { asking.request::<_, Value>("turn/start", &json!({})).await });
    for _ in 0..4 {
        let sent = server.recv().await;
        server
            .send(json!({"id": sent["id"], "error": {"code": -32001, "message": "Server overloaded"}}))
            .await;
    }
    let answer = request.await.expect("joined");
    assert!(
        matches!(&answer, Err(PeerError::Rpc { error, .. }) if error.code == -32001),
        "{answer:?}"
    );
}

/// A hub keeps Codex's latest `account/rateLimits/updated` (a message of no thread) for the
/// status, though nobody subscribed to the app-server's unscoped messages.
#[tokio::test]
async fn a_hub_keeps_the_latest_rate_limits() {
    use clawbridge::CodexHub;
    let (session, mut server) = session_with("clawbridge/0.169.0 (x)").await;
    let hub = CodexHub::from_session(session.expect("session"));
    assert_eq!(hub.rate_limits(), None);
    for used in [10, 42] {
        server
            .send(json!({"method": "account/rateLimits/updated", "params": {"rateLimits": {"primary": {"usedPercent": used}}}}))
            .await;
    }
    let kept = crate::util::poll_with(Duration::from_secs(5), || {
        let kept = hub.rate_limits();
        async move { kept.filter(|kept| kept["rateLimits"]["primary"]["usedPercent"] == 42) }
    })
    .await;
    assert!(kept.is_some(), "{:?}", hub.rate_limits());
}
