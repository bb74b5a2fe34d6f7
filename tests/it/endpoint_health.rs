//! Member health on the endpoint: a remote member that stalls, sends garbage, or whose listener
//! goes away and comes back, beside a healthy local member (the real Codex).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawbridge::{
    Endpoint, EndpointSettings, OfflineHome, PoolConfig, RemoteEndpoint, ResponsesStub, StubScript,
};
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::endpoint::{fleet, settings, tcp_client, turn_completed};

/// How a fake remote app-server behaves after its handshake.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    /// Answers `initialize`, then nothing.
    Mute,
    /// Answers `initialize`, then every request with a line that is not JSON-RPC.
    Garbage,
    /// Answers `initialize` and one request more (a health probe passes), then nothing.
    MuteAfterOne,
    /// Answers every request (an empty list): a listener that is well again.
    Healthy,
    /// Answers every request with the line it received (`{"received": LINE}`).
    Echo,
    /// Closes every connection as it is accepted: a listener that is gone.
    Closed,
    /// Starts threads, answers `turn/start` and closes the connection at once, before any of
    /// the turn's notifications (a member killed right after answering); everything else as
    /// [`Fault::Healthy`].
    DieAfterTurnStart,
    /// As [`Fault::Healthy`], but closes the connection when `account/login/start` comes
    /// while the remote's login trap is set (without an answer; the trap is then unset): a
    /// member killed as a login was sent to it.
    DieOnLogin,
    /// Keeps Codex's subscriptions (`thread/start` and `thread/resume` subscribe this
    /// connection to the thread, `thread/unsubscribe` ends that) and sends a turn's
    /// notifications only to a subscribed connection; an unsubscribe takes effect when it is
    /// answered, 800 ms after it came, while other requests are handled meanwhile (see
    /// [`serve_subscriptions`]).
    Subscriptions,
}

/// A fake Codex WebSocket listener: it completes the handshake and answers `initialize` (as
/// Codex 0.169.0), then misbehaves. Counts its connections.
struct FakeRemote {
    url: String,
    connections: Arc<AtomicUsize>,
    /// The fault new connections get; changed with [`FakeRemote::become_`].
    fault: Arc<std::sync::Mutex<Fault>>,
    /// Set: the next login on a [`Fault::DieOnLogin`] connection closes it.
    login_trap: Arc<std::sync::atomic::AtomicBool>,
    /// The methods of the requests it received, in order.
    heard: Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeRemote {
    async fn start(fault: Fault) -> FakeRemote {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        let fault = Arc::new(std::sync::Mutex::new(fault));
        let current = Arc::clone(&fault);
        let login_trap = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let trap = Arc::clone(&login_trap);
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hearing = Arc::clone(&heard);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let fault = *current.lock().expect("fault");
                if fault == Fault::Closed {
                    drop(stream);
                    continue;
                }
                tokio::spawn(serve_fake(
                    stream,
                    fault,
                    Arc::clone(&trap),
                    Arc::clone(&hearing),
                ));
            }
        });
        FakeRemote {
            url: format!("ws://{addr}"),
            connections,
            fault,
            login_trap,
            heard,
            task,
        }
    }

    /// New connections get `fault` from now on. The port stays this listener's: a test that
    /// let it go and bound it again could find it taken by another test meanwhile.
    fn become_(&self, fault: Fault) {
        *self.fault.lock().expect("fault") = fault;
    }
}

/// The two halves of a fake remote's WebSocket, once its handshake is accepted.
type FakeSocket = (
    soketto::connection::Sender<tokio_util::compat::Compat<tokio::net::TcpStream>>,
    soketto::connection::Receiver<tokio_util::compat::Compat<tokio::net::TcpStream>>,
);

/// Accept a fake remote's WebSocket handshake (any path, no token checked).
async fn accept_ws(stream: tokio::net::TcpStream) -> Option<FakeSocket> {
    use tokio_util::compat::TokioAsyncReadCompatExt;
    let mut server = soketto::handshake::Server::new(stream.compat());
    let request = server.receive_request().await.ok()?;
    let accept = soketto::handshake::server::Response::Accept {
        key: request.key(),
        protocol: None,
    };
    server.send_response(&accept).await.ok()?;
    Some(server.into_builder().finish())
}

async fn serve_fake(
    stream: tokio::net::TcpStream,
    fault: Fault,
    login_trap: Arc<std::sync::atomic::AtomicBool>,
    heard: Arc<std::sync::Mutex<Vec<String>>>,
) {
    let Some((mut sender, mut receiver)) = accept_ws(stream).await else {
        return;
    };
    if fault == Fault::Subscriptions {
        return serve_subscriptions(sender, receiver, heard).await;
    }
    let mut data = Vec::new();
    let mut answered = 0;
    loop {
        data.clear();
        if receiver.receive_data(&mut data).await.is_err() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&data) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        if let Some(method) = message["method"].as_str() {
            heard.lock().expect("heard").push(method.to_string());
        }
        let answer = if message["method"] == "initialize" {
            json!({"id": id, "result": {"userAgent": "fake_remote/0.169.0 (test)"}}).to_string()
        } else {
            answered += 1;
            match fault {
                Fault::Mute => continue,
                Fault::Garbage => "\u{1}garbage, not JSON-RPC {{{".to_string(),
                Fault::MuteAfterOne if answered == 1 => {
                    json!({"id": id, "result": {"data": []}}).to_string()
                }
                Fault::MuteAfterOne => continue,
                Fault::Healthy => json!({"id": id, "result": {"data": []}}).to_string(),
                Fault::DieAfterTurnStart if message["method"] == "thread/start" => json!({
                    "id": id,
                    "result": {"thread": {"id": format!("fake-thread-{answered}")}, "model": "gpt-5.5"}
                })
                .to_string(),
                Fault::DieAfterTurnStart if message["method"] == "turn/start" => {
                    let answer = json!({
                        "id": id,
                        "result": {"turn": {"id": "fake-turn", "status": "inProgress", "items": []}}
                    });
                    let _ = sender.send_text(answer.to_string()).await;
                    let _ = sender.flush().await;
                    return;
                }
                Fault::DieAfterTurnStart => json!({"id": id, "result": {"data": []}}).to_string(),
                Fault::DieOnLogin
                    if message["method"] == "account/login/start"
                        && login_trap.swap(false, Ordering::SeqCst) =>
                {
                    return;
                }
                Fault::DieOnLogin => json!({"id": id, "result": {"data": []}}).to_string(),
                // Served by `serve_subscriptions` from the start.
                Fault::Subscriptions => return,
                Fault::Closed => return,
                Fault::Echo => {
                    json!({"id": id, "result": {"received": String::from_utf8_lossy(&data)}})
                        .to_string()
                }
            }
        };
        if sender.send_text(answer).await.is_err() || sender.flush().await.is_err() {
            return;
        }
    }
}

/// [`Fault::Subscriptions`]: a member that handles requests concurrently, as Codex's app-server
/// may (the endpoint must not rely on their order): an unsubscribe is applied and answered
/// 800 ms after it came, and what comes meanwhile is handled at once. What it heard is noted in
/// `heard`, an unsubscribe's answer as `thread/unsubscribe answered`.
async fn serve_subscriptions(
    mut sender: soketto::connection::Sender<tokio_util::compat::Compat<tokio::net::TcpStream>>,
    mut receiver: soketto::connection::Receiver<tokio_util::compat::Compat<tokio::net::TcpStream>>,
    heard: Arc<std::sync::Mutex<Vec<String>>>,
) {
    let note = |what: &str| heard.lock().expect("heard").push(what.to_string());
    let mut subscribed = std::collections::HashSet::new();
    let mut unsubscribing: Option<(tokio::time::Instant, Value, String)> = None;
    let mut started = 0;
    // The socket is read by a task of its own (a read is not cancel-safe), the messages handed
    // over here.
    let (incoming, mut messages) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let reading = tokio::spawn(async move {
        loop {
            let mut data = Vec::new();
            if receiver.receive_data(&mut data).await.is_err() || incoming.send(data).await.is_err()
            {
                return;
            }
        }
    });
    loop {
        let message = match &unsubscribing {
            Some((due, ..)) => {
                tokio::select! {
                    received = messages.recv() => Some(received),
                    () = tokio::time::sleep_until(*due) => None,
                }
            }
            None => Some(messages.recv().await),
        };
        let mut out = Vec::new();
        match message {
            None => {
                if let Some((_, id, thread)) = unsubscribing.take() {
                    subscribed.remove(&thread);
                    note("thread/unsubscribe answered");
                    out.push(json!({"id": id, "result": {"status": "unsubscribed"}}));
                }
            }
            Some(None) => break,
            Some(Some(data)) => {
                let Ok(message) = serde_json::from_slice::<Value>(&data) else {
                    continue;
                };
                let Some(id) = message.get("id").cloned() else {
                    continue;
                };
                let method = message["method"].as_str().unwrap_or_default();
                note(method);
                let thread = message["params"]["threadId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                match method {
                    "initialize" => out.push(
                        json!({"id": id, "result": {"userAgent": "fake_remote/0.169.0 (test)"}}),
                    ),
                    "thread/start" | "thread/resume" => {
                        let thread = if method == "thread/start" {
                            started += 1;
                            format!("fake-thread-{started}")
                        } else {
                            thread
                        };
                        subscribed.insert(thread.clone());
                        out.push(json!({"id": id, "result": {"thread": {"id": thread}, "model": "gpt-5.5"}}));
                    }
                    "thread/unsubscribe" => {
                        let due = tokio::time::Instant::now() + Duration::from_millis(800);
                        unsubscribing = Some((due, id, thread));
                    }
                    "turn/start" => {
                        let turn = |status: &str| json!({"id": "fake-turn", "status": status, "items": []});
                        out.push(json!({"id": id, "result": {"turn": turn("inProgress")}}));
                        if subscribed.contains(&thread) {
                            for (method, status) in [
                                ("turn/started", "inProgress"),
                                ("turn/completed", "completed"),
                            ] {
                                out.push(json!({"method": method, "params": {"threadId": thread, "turn": turn(status)}}));
                            }
                        }
                    }
                    _ => out.push(json!({"id": id, "result": {"data": []}})),
                }
            }
        }
        let mut sent = true;
        for message in out {
            sent = sent && sender.send_text(message.to_string()).await.is_ok();
        }
        if !sent || sender.flush().await.is_err() {
            break;
        }
    }
    reading.abort();
}

/// An endpoint with one local member (the real Codex over the offline stub) and `remotes`,
/// requests timing out after 2 s, backoffs short.
async fn endpoint_with(
    remotes: Vec<RemoteEndpoint>,
    on_restart: Option<clawbridge::RestartHook>,
) -> (Endpoint, ResponsesStub, OfflineHome) {
    let stub = ResponsesStub::start(StubScript::default())
        .await
        .expect("stub");
    let home = OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home");
    let pool = PoolConfig {
        locals: 1,
        remotes,
        isolate_environment: true,
        config_overrides: vec![format!("openai_base_url=\"{}\"", stub.base_url())],
        recycle_rss_bytes: u64::MAX,
        handshake_timeout: Duration::from_secs(10),
        backoff_first: Duration::from_millis(100),
        backoff_max: Duration::from_millis(500),
        crash_limit: 2,
        on_restart,
        ..PoolConfig::new(Ok(codex_bin()), home.path.clone())
    };
    (endpoint_over(pool).await, stub, home)
}

/// An endpoint whose only members are `remotes` (no Codex of its own), restarted after every
/// crash, requests timing out after 2 s.
async fn endpoint_of_remotes(remotes: Vec<RemoteEndpoint>) -> (Endpoint, tempfile::TempDir) {
    let home = tempfile::tempdir().expect("home");
    let pool = PoolConfig {
        locals: 0,
        remotes,
        recycle_rss_bytes: u64::MAX,
        handshake_timeout: Duration::from_secs(10),
        backoff_first: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        crash_limit: 1_000,
        ..PoolConfig::new(Err("no local member".into()), home.path().to_path_buf())
    };
    (endpoint_over(pool).await, home)
}

/// An endpoint over `pool`, its requests timing out after 2 s.
async fn endpoint_over(pool: PoolConfig) -> Endpoint {
    endpoint_over_fleet(pool, |_| {}).await
}

/// [`endpoint_over`], its fleet's settings changed by `change` first.
async fn endpoint_over_fleet(
    mut pool: PoolConfig,
    change: impl FnOnce(&mut clawbridge::FleetConfig),
) -> Endpoint {
    pool.peer.request_timeout = Duration::from_secs(2);
    let mut fleet = fleet(pool);
    change(&mut fleet);
    Endpoint::start(
        EndpointSettings {
            cwd: crate::util::repo_root().join("fixtures/workspace"),
            fleet,
            max_connections: 16,
            ..settings(PoolConfig::new(Err("unused".into()), std::env::temp_dir()))
        },
        false,
    )
    .await
    .expect("endpoint")
}

/// Protection (a turn never left hanging): a member that goes away right after answering
/// `turn/start`, before any of the turn's notifications. The endpoint handles two things at
/// once then, the answer (which notes the turn as running) and the member's end (whose relay
/// tells the thread's followers of the running turn, ended): whichever comes first, the
/// client that started the turn hears it end, failed, naming the member, once. It used to
/// hear nothing when the end came first (the relay knew no turn yet, and the answer then
/// noted it on a feed nobody relayed): the replica soak saw a turn unanswered for a minute
/// under load. The order is the scheduler's, so ten rounds run (the member reconnected
/// between them); `feed`'s unit tests pin the rule itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_gone_right_after_answering_turn_start_never_leaves_the_turn_hanging() {
    let fake = FakeRemote::start(Fault::DieAfterTurnStart).await;
    let (endpoint, _home) = endpoint_of_remotes(vec![remote(&fake.url)]).await;
    for round in 0..10 {
        let mut client = tcp_client(&endpoint).await;
        client.initialize().await;
        // The member comes back within a moment of the last round's end.
        let mut thread = None;
        for _ in 0..100 {
            let started = client.request("thread/start", json!({})).await;
            if let Some(id) = started["result"]["thread"]["id"].as_str() {
                thread = Some(id.to_string());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let thread = thread.unwrap_or_else(|| panic!("round {round}: no thread started"));
        let ended = fake_turn(&mut client, &thread, Duration::from_secs(10)).await;
        let Some(ended) = ended else {
            panic!("round {round}: the turn never ended: {:#?}", client.seen);
        };
        assert_eq!(ended["params"]["turn"]["status"], "failed", "{ended}");
        assert!(
            ended
                .to_string()
                .contains(&format!("{} serving this thread went away", fake.url)),
            "{ended}"
        );
        // Once: what else comes within a moment holds no second end of the turn.
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(300), client.next()).await
        {}
        let ends = client
            .seen
            .iter()
            .filter(|message| message["method"] == "turn/completed")
            .count();
        assert_eq!(ends, 1, "round {round}: {:#?}", client.seen);
    }
    endpoint.stop().await;
    fake.task.abort();
}

/// A login whose member goes away under it (killed as the login was sent) is sent once more,
/// to the member's next connection, once the endpoint has seen the first one go: the client
/// gets the login's answer, not an error. Five rounds, the member dying at each first login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_whose_member_goes_away_under_it_reaches_the_next_one() {
    const KEY: &str = "sk-test-login-retry";
    let fake = FakeRemote::start(Fault::DieOnLogin).await;
    let home = tempfile::tempdir().expect("home");
    let pool = PoolConfig {
        locals: 0,
        handshake_timeout: Duration::from_secs(10),
        backoff_first: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        crash_limit: 1_000,
        ..PoolConfig::new(Err("no local member".into()), home.path().to_path_buf())
    };
    // The remote member is the account's own (`--app-server-account`).
    let account = clawbridge::credential_fingerprint(&format!("Bearer {KEY}"));
    let endpoint = endpoint_over_fleet(pool, |fleet| {
        fleet
            .account_members
            .insert(account, vec![remote(&fake.url)]);
    })
    .await;
    for round in 0..5 {
        let mut client = tcp_client(&endpoint).await;
        client.initialize().await;
        // The member (from the second round on, the connection that served the last login)
        // dies at this login.
        let before = fake.connections.load(Ordering::SeqCst);
        fake.login_trap.store(true, Ordering::SeqCst);
        let login = client
            .request(
                "account/login/start",
                json!({"type": "apiKey", "apiKey": KEY}),
            )
            .await;
        assert!(
            login["result"].is_object(),
            "round {round}: the login's answer, from the member's next connection: {login}"
        );
        assert!(
            !fake.login_trap.load(Ordering::SeqCst),
            "round {round}: the member died at the login"
        );
        assert!(
            fake.connections.load(Ordering::SeqCst) > before,
            "round {round}: a new connection served the login"
        );
    }
    endpoint.stop().await;
    fake.task.abort();
}

/// Protection (a thread's subscription kept in order): an agent that reconnects for each turn
/// leaves its thread on one connection as its next connection resumes it. The endpoint tells the
/// member nobody follows a thread a client left (`thread/unsubscribe`), but Codex keeps one
/// subscription per connection, and the endpoint's connection to the member serves both
/// clients: an unsubscribe that took effect after the second client's resume left that client's
/// turn without a single notification (measured on Codex 0.169.0: the turn is answered, then
/// nothing; the replica soak saw such a turn silent for a minute). A request about the thread
/// waits until an unsubscribe of it being sent is answered, and none is sent while one is on
/// its way. The fake member here answers (and applies) an unsubscribe 800 ms after it came; the
/// next client resumes meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_as_another_resumes_its_thread_leaves_it_subscribed() {
    let fake = FakeRemote::start(Fault::Subscriptions).await;
    let (endpoint, _home) = endpoint_of_remotes(vec![remote(&fake.url)]).await;
    let mut first = tcp_client(&endpoint).await;
    first.initialize().await;
    let started = first.request("thread/start", json!({})).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a thread: {started}"))
        .to_string();
    let mut next = tcp_client(&endpoint).await;
    next.initialize().await;
    let heard = || fake.heard.lock().expect("heard").clone();
    // The first client leaves; the endpoint unsubscribes the thread on the member.
    drop(first);
    crate::util::wait_until_async(
        "the member heard the unsubscribe",
        Duration::from_secs(10),
        || heard().iter().any(|method| method == "thread/unsubscribe"),
    )
    .await;
    let resumed = next
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    assert!(resumed["result"].is_object(), "{resumed}");
    let order: Vec<String> = heard()
        .into_iter()
        .filter(|method| method.starts_with("thread/unsubscribe") || method == "thread/resume")
        .collect();
    assert_eq!(
        order,
        [
            "thread/unsubscribe",
            "thread/unsubscribe answered",
            "thread/resume"
        ],
        "the resume went only once the unsubscribe was answered"
    );
    let ended = fake_turn(&mut next, &thread, Duration::from_secs(5)).await;
    let Some(ended) = ended else {
        panic!(
            "the turn was never heard of; the member heard {:?}",
            heard()
        );
    };
    assert_eq!(ended["params"]["turn"]["status"], "completed", "{ended}");
    drop(next);
    endpoint.stop().await;
    fake.task.abort();
}

/// A turn on a fake member's `thread` (its `turn/start` answered as the fakes answer it), and its
/// `turn/completed` if one comes within `limit`.
async fn fake_turn(
    client: &mut crate::endpoint::Client<tokio::net::TcpStream>,
    thread: &str,
    limit: Duration,
) -> Option<Value> {
    let answer = client
        .request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(answer["result"]["turn"]["id"], "fake-turn", "{answer}");
    tokio::time::timeout(
        limit,
        client.until("turn/completed", turn_completed(thread)),
    )
    .await
    .ok()
}

fn remote(url: &str) -> RemoteEndpoint {
    RemoteEndpoint::new(url, Some("fake-capability-token".into())).expect("a ws:// member")
}

/// Ten new clients, one after another, each starting a thread and running a turn, and staying
/// connected (so each one's thread counts on its member, and new threads spread).
async fn ten_clients(endpoint: &Endpoint) -> (usize, Vec<String>) {
    let mut served = 0;
    let mut failures = Vec::new();
    let mut clients = Vec::new();
    for index in 0..10 {
        let mut client = tcp_client(endpoint).await;
        client.initialize().await;
        let started = client.request("thread/start", json!({})).await;
        let Some(thread) = started["result"]["thread"]["id"]
            .as_str()
            .map(str::to_string)
        else {
            failures.push(format!("client {index}: {started}"));
            continue;
        };
        client
            .request(
                "turn/start",
                json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]}),
            )
            .await;
        let done = client
            .until("turn/completed", turn_completed(&thread))
            .await;
        if done["params"]["turn"]["status"] == "completed" {
            served += 1;
        } else {
            failures.push(format!("client {index}: {done}"));
        }
        clients.push(client);
    }
    (served, failures)
}

/// A remote member that answers `initialize` and then stalls, or sends garbage, never takes the
/// new clients from a healthy local member: it fails its health probe (or one request) and is
/// marked unhealthy, reconnected with backoff, and `app-server status` says why.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_garbage_remote_member_never_takes_work_from_a_healthy_one() {
    for fault in [Fault::Mute, Fault::Garbage, Fault::MuteAfterOne] {
        let fake = FakeRemote::start(fault).await;
        let (endpoint, _stub, _home) = endpoint_with(vec![remote(&fake.url)], None).await;
        let (served, failures) = ten_clients(&endpoint).await;
        // One that passes its probe and then stalls costs the one request it timed out (the
        // client hears an error naming the member, after 2 s here), never more.
        let wanted = if fault == Fault::MuteAfterOne { 9 } else { 10 };
        assert!(served >= wanted, "{fault:?}: {served} of 10: {failures:#?}");
        let member = endpoint
            .members()
            .into_iter()
            .find(|member| member.name == fake.url)
            .expect("the remote member");
        let why = member.error.clone().unwrap_or_default();
        assert!(why.contains("unhealthy"), "{fault:?}: {member:?}");
        assert!(fake.connections.load(Ordering::SeqCst) >= 1);
        endpoint.stop().await;
        fake.task.abort();
    }
}

/// A remote listener that goes away is marked dead after its failed reconnections, and comes
/// back once it listens again (dead is not for ever); meanwhile the local member serves.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_remote_member_comes_back_when_its_listener_does() {
    // A listener that answers the probe: the endpoint itself over a second local Codex would do,
    // but a fake that answers everything with an empty result is enough for the pool's health.
    // Its listener is gone: each connection is closed as it is accepted.
    let fake = FakeRemote::start(Fault::Closed).await;
    let url = fake.url.clone();
    // The pool tells each member that is back (the live trace makes a `member restart` span of
    // it): here, the remote one, once.
    let restarts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let told = std::sync::Arc::clone(&restarts);
    let hook = clawbridge::RestartHook(std::sync::Arc::new(move |restart| {
        told.lock().expect("restarts").push(restart);
    }));
    let (endpoint, _stub, _home) = endpoint_with(vec![remote(&url)], Some(hook)).await;
    // New clients are served by the local member while the remote one fails and dies.
    let (served, failures) = ten_clients(&endpoint).await;
    assert_eq!(served, 10, "{failures:#?}");
    let state = |endpoint: &Endpoint| {
        endpoint
            .members()
            .into_iter()
            .find(|member| member.name == url)
            .map(|member| (member.state, member.error))
            .expect("member")
    };
    crate::util::wait_until_async("the remote member dead", Duration::from_secs(20), || {
        state(&endpoint).0 == clawbridge::MemberState::Dead
    })
    .await;
    // Its listener comes back (answering the probe): the member is tried again and is ready.
    fake.become_(Fault::Healthy);
    crate::util::wait_until_async("the remote member back", Duration::from_secs(20), || {
        state(&endpoint).0 == clawbridge::MemberState::Ready
    })
    .await;
    let told = restarts.lock().expect("restarts").clone();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].member, url);
    assert!(!told[0].reason.is_empty(), "{told:?}");
    assert!(told[0].down_since < std::time::SystemTime::now());
    endpoint.stop().await;
    fake.task.abort();
}

/// A fake app-server with a scripted thread: each `turn/start` answers `turn-N` and then goes
/// quiet in its own way (turn 1: the final agent message, `turn/completed` 2 s late; turn 2:
/// `turn/started` only, completed 2.5 s later; turn 3: a tool's result, completed 2.5 s later).
async fn scripted_remote() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(scripted_connection(stream));
        }
    });
    (url, task)
}

async fn scripted_connection(stream: tokio::net::TcpStream) {
    let Some((mut sender, mut receiver)) = accept_ws(stream).await else {
        return;
    };
    let (out, mut queue) = tokio::sync::mpsc::unbounded_channel::<(Duration, Value)>();
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut pending: Vec<(tokio::time::Instant, Value)> = Vec::new();
        loop {
            pending.sort_by_key(|(at, _)| *at);
            let next = pending.first().map(|(at, _)| *at);
            tokio::select! {
                queued = queue.recv() => match queued {
                    Some((after, message)) => pending.push((tokio::time::Instant::now() + after, message)),
                    None => return,
                },
                () = async { match next { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } } => {
                    let (_, message) = pending.remove(0);
                    if sender.send_text(message.to_string()).await.is_err() || sender.flush().await.is_err() {
                        return;
                    }
                }
            }
            let _ = started;
        }
    });
    let send = |after: f64, message: Value| {
        let _ = out.send((Duration::from_secs_f64(after), message));
    };
    let mut threads: Vec<String> = Vec::new();
    let mut turns = 0;
    let mut data = Vec::new();
    loop {
        data.clear();
        if receiver.receive_data(&mut data).await.is_err() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&data) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let method = message["method"].as_str().unwrap_or_default();
        let named = message["params"]["threadId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let result = match method {
            "initialize" => json!({"userAgent": "fake_remote/0.169.0 (test)"}),
            "thread/start" => {
                threads.push(format!("thread-{}", threads.len() + 1));
                json!({"thread": {"id": threads.last()}, "model": "gpt-5.5"})
            }
            "thread/resume" => json!({"thread": {"id": named}}),
            "turn/start" => json!({"turn": {"id": format!("turn-{}", turns + 1)}}),
            "thread/loaded/list" => json!({"data": threads}),
            // A long thread's history: 2 MiB of it.
            "thread/read" => {
                json!({"thread": {"id": named, "preview": "x".repeat(2 * 1024 * 1024)}})
            }
            _ => json!({}),
        };
        send(0.0, json!({"id": id, "result": result}));
        if method == "turn/interrupt" {
            // As Codex does: the turn ends, interrupted.
            let turn = message["params"]["turnId"].as_str().unwrap_or_default();
            send(
                0.0,
                json!({"method": "turn/completed", "params": {"threadId": named, "turn": {"id": turn, "items": [], "status": "interrupted"}}}),
            );
        }
        if method != "turn/start" {
            continue;
        }
        turns += 1;
        let turn = format!("turn-{turns}");
        let thread = named.as_str();
        let started =
            json!({"method": "turn/started", "params": {"threadId": thread, "turn": {"id": turn}}});
        let completed = json!({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": turn, "items": [], "status": "completed"}}});
        let item = |kind: &str| json!({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {"type": kind, "id": format!("{turn}-item"), "text": "done"}}});
        // "compact N": Codex compacts the context N times, and the model call after it still
        // fills the window.
        let asked = message["params"]["input"][0]["text"]
            .as_str()
            .unwrap_or_default();
        if let Some(times) = asked
            .strip_prefix("compact ")
            .and_then(|times| times.parse::<u32>().ok())
        {
            send(0.05, started);
            for index in 0..times {
                send(
                    0.06 + f64::from(index) * 0.01,
                    json!({"method": "thread/compacted", "params": {"threadId": thread, "turnId": turn}}),
                );
            }
            send(
                0.2,
                json!({"method": "thread/tokenUsage/updated", "params": {"threadId": thread, "turnId": turn, "tokenUsage": {
                    "last": {"totalTokens": 258_500, "inputTokens": 258_400, "cachedInputTokens": 0, "outputTokens": 100, "reasoningOutputTokens": 0},
                    "total": {"totalTokens": 258_500, "inputTokens": 258_400, "cachedInputTokens": 0, "outputTokens": 100, "reasoningOutputTokens": 0},
                    "modelContextWindow": 258_400}}}),
            );
            send(0.3, completed);
            continue;
        }
        send(0.05, started);
        // The account's rate limits, as Codex tells them during a turn (no thread).
        send(
            0.06,
            json!({"method": "account/rateLimits/updated", "params": {"rateLimits": {"primary": {"usedPercent": 42}}}}),
        );
        match turns {
            1 => {
                // What the model call cost, as Codex tells it.
                send(
                    0.07,
                    json!({"method": "thread/tokenUsage/updated", "params": {"threadId": thread, "turnId": turn, "tokenUsage": {
                        "last": {"totalTokens": 600, "inputTokens": 500, "cachedInputTokens": 100, "outputTokens": 100, "reasoningOutputTokens": 0},
                        "total": {"totalTokens": 600, "inputTokens": 500, "cachedInputTokens": 100, "outputTokens": 100, "reasoningOutputTokens": 0}}}}),
                );
                send(0.1, item("agentMessage"));
                send(2.0, completed);
            }
            2 => send(2.5, completed),
            _ => {
                send(0.1, item("dynamicToolCall"));
                send(2.5, completed);
            }
        }
    }
}

/// An endpoint over one scripted fake member (requests time out after 5 s), its settings as
/// `tweak` makes them; the fake's task.
async fn scripted_endpoint(
    tweak: impl FnOnce(EndpointSettings) -> EndpointSettings,
) -> (Endpoint, tokio::task::JoinHandle<()>) {
    let (url, fake) = scripted_remote().await;
    let mut pool = PoolConfig {
        locals: 0,
        remotes: vec![remote(&url)],
        ..PoolConfig::new(Err("remote only".into()), std::env::temp_dir())
    };
    pool.peer.request_timeout = Duration::from_secs(5);
    let base = EndpointSettings {
        fleet: fleet(pool),
        ..settings(PoolConfig::new(Err("unused".into()), std::env::temp_dir()))
    };
    let endpoint = Endpoint::start(tweak(base), false).await.expect("endpoint");
    (endpoint, fake)
}

/// Stalls on the endpoint: a final agent message without `turn/completed` is completed for the
/// client after `--completion-grace` (marked recovered, and Codex's late one is not relayed
/// twice); silence after `turn/started` and after a tool's result are told once each and shown
/// in the status on their thread while they last. (A scripted fake member: no Codex needed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_turns_are_told_once_shown_and_a_missing_completion_is_recovered() {
    let (endpoint, fake) = scripted_endpoint(|settings| EndpointSettings {
        stalls: clawbridge::StallSettings {
            completion_grace: Duration::from_secs(1),
            recover: true,
            silence: Duration::from_secs(1),
        },
        ..settings
    })
    .await;
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let started = client.request("thread/start", json!({})).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    let turn = json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]});
    let stall_of = |endpoint: &Endpoint| {
        endpoint
            .status()
            .connections
            .iter()
            .flat_map(|connection| connection.threads.iter())
            .find_map(|followed| followed.stall.clone())
    };
    // 1. The final agent message, then nothing: completed for the client after 1 s, recovered.
    let began = std::time::Instant::now();
    client.request("turn/start", turn.clone()).await;
    let done = client
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(done["params"]["turn"]["id"], "turn-1");
    assert_eq!(done["params"]["turn"]["status"], "completed");
    // The account's latest rate limits are in the status, as Codex told them.
    let status = serde_json::to_value(endpoint.status()).expect("status");
    assert_eq!(
        status["identities"][0]["rateLimits"]["rateLimits"]["primary"]["usedPercent"], 42,
        "{status}"
    );
    assert!(
        began.elapsed() < Duration::from_millis(1900),
        "before Codex's own: {:?}",
        began.elapsed()
    );
    // Codex's late turn/completed (at 2 s) is not relayed a second time.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // 2. turn/started, then silence: told, shown on its thread, then Codex completes it.
    client.request("turn/start", turn.clone()).await;
    crate::util::wait_until_async("the silence told", Duration::from_secs(5), || {
        stall_of(&endpoint)
            .is_some_and(|stall| stall.kind == clawbridge::StallKind::SilentAfterStart)
    })
    .await;
    let done = client
        .until("turn-2 completed", |message| {
            message["method"] == "turn/completed" && message["params"]["turn"]["id"] == "turn-2"
        })
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert_eq!(stall_of(&endpoint), None, "cleared with the turn");
    // 3. A tool's result, then silence.
    client.request("turn/start", turn.clone()).await;
    crate::util::wait_until_async("the tool stall told", Duration::from_secs(5), || {
        stall_of(&endpoint)
            .is_some_and(|stall| stall.kind == clawbridge::StallKind::NoFollowUpAfterTool)
    })
    .await;
    client
        .until("turn-3 completed", |message| {
            message["method"] == "turn/completed" && message["params"]["turn"]["id"] == "turn-3"
        })
        .await;
    let completions_of_turn_1 = client
        .seen
        .iter()
        .filter(|message| {
            message["method"] == "turn/completed" && message["params"]["turn"]["id"] == "turn-1"
        })
        .count();
    assert_eq!(completions_of_turn_1, 1, "{:#?}", client.seen);
    let status = endpoint.status();
    assert_eq!(status.recovered_turns, 1);
    let stalls: Vec<(String, usize)> = status.stalls.into_iter().collect();
    assert_eq!(
        stalls,
        [
            ("missingTurnCompleted".to_string(), 1),
            ("noFollowUpAfterTool".to_string(), 1),
            ("silentAfterStart".to_string(), 1)
        ]
    );
    endpoint.stop().await;
    fake.abort();
}

/// Named clients on the endpoint (`clawbridge client add`): each sees and acts on only the
/// threads it opened; the operator's token reaches every thread and the status, a named
/// client's does not reach the status. (A scripted fake member: no Codex needed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_client_sees_and_acts_on_only_its_own_threads() {
    use clawbridge::ClientEntry;
    let (url, fake) = scripted_remote().await;
    let pool = PoolConfig {
        locals: 0,
        remotes: vec![remote(&url)],
        ..PoolConfig::new(Err("remote only".into()), std::env::temp_dir())
    };
    let client = |name: &str| ClientEntry {
        name: name.into(),
        sha256: clawbridge::token_sha256(&format!("{name}-token-0123456789abcdef")),
        operator: false,
        allow: Vec::new(),
    };
    let endpoint = Endpoint::start(
        EndpointSettings {
            fleet: fleet(pool),
            clients: vec![client("alice"), client("bob")],
            policy: crate::endpoint::roots_policy(&std::env::temp_dir()),
            ..settings(PoolConfig::new(Err("unused".into()), std::env::temp_dir()))
        },
        false,
    )
    .await
    .expect("endpoint");
    let addr = endpoint.tcp_addr().expect("tcp");
    let connect = |token: String| async move {
        let io = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut client = crate::endpoint::ws_client(io, &addr.to_string(), &token)
            .await
            .expect("upgraded");
        client.initialize().await;
        client
    };
    let mut alice = connect("alice-token-0123456789abcdef".into()).await;
    let mut bob = connect("bob-token-0123456789abcdef".into()).await;
    let cwd = json!({"cwd": std::env::temp_dir().canonicalize().expect("tmp")});
    let started = alice.request("thread/start", cwd.clone()).await;
    let theirs = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    let started = bob.request("thread/start", cwd.clone()).await;
    let mine = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    // Bob cannot resume, steer or start a turn on alice's thread, nor hear of it.
    for method in ["thread/resume", "turn/start", "thread/unsubscribe"] {
        let refused = bob
            .request(method, json!({"threadId": theirs, "input": []}))
            .await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("belongs to another client"),
            "{method}: {refused}"
        );
    }
    let listed = bob.request("thread/loaded/list", json!({})).await;
    assert_eq!(listed["result"]["data"], json!([mine]), "{listed}");
    // The operator reaches both; the status is the operator's only.
    let mut operator = connect(crate::endpoint::TOKEN.into()).await;
    let resumed = operator
        .request("thread/resume", json!({"threadId": theirs}))
        .await;
    assert_eq!(
        resumed["result"]["thread"]["id"],
        theirs.as_str(),
        "{resumed}"
    );
    let listed = operator.request("thread/loaded/list", json!({})).await;
    assert_eq!(
        listed["result"]["data"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    // Alice still owns her thread after the operator's resume.
    let again = bob
        .request("thread/resume", json!({"threadId": theirs}))
        .await;
    assert!(again["error"].is_object(), "{again}");
    let listen = endpoint.listen.clone();
    let statuses = (
        clawbridge::fetch_status(&listen, "alice-token-0123456789abcdef")
            .await
            .err()
            .map(|error| error.to_string()),
        clawbridge::fetch_status(&listen, crate::endpoint::TOKEN)
            .await
            .is_ok(),
    );
    assert!(
        statuses
            .0
            .as_deref()
            .is_some_and(|error| error.contains("403")),
        "{statuses:?}"
    );
    assert!(statuses.1);
    endpoint.stop().await;
    fake.abort();
}

/// An endpoint whose only members are `pool`'s (remote ones, in these tests).
async fn remote_only(pool: PoolConfig) -> Endpoint {
    Endpoint::start(
        EndpointSettings {
            fleet: fleet(pool),
            ..settings(PoolConfig::new(Err("unused".into()), std::env::temp_dir()))
        },
        false,
    )
    .await
    .expect("endpoint")
}

/// Protection: the endpoint forwards a client's params to Codex byte for byte: key order,
/// spacing and escapes as the client wrote them (once they were re-serialized, keys sorted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_s_params_reach_codex_byte_for_byte() {
    let remote_app_server = FakeRemote::start(Fault::Echo).await;
    let pool = PoolConfig {
        locals: 0,
        remotes: vec![remote(&remote_app_server.url)],
        ..PoolConfig::new(Err("no local members".into()), std::env::temp_dir())
    };
    let endpoint = remote_only(pool).await;
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let params = r#"{ "zeta":1,"alpha" : {"b":2,"a":1},"text":"caf\u00e9 \"q\"","n":1.50 }"#;
    let answer = client.request_text("model/list", params).await;
    let received = answer["result"]["received"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(
        received.ends_with(&format!(r#""method":"model/list","params":{params}}}"#)),
        "{received}"
    );
    drop(client);
    endpoint.stop().await;
    remote_app_server.task.abort();
}

/// `/healthz` and `/readyz` answer a probe without a token and say nothing but yes or no;
/// `/readyz` is 503 while the only app-server is down and 200 once it is back; `/metrics`
/// needs the operator's token and tells the members by state and the turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_tell_the_truth_and_metrics_are_the_operator_s() {
    // Its listener is gone: each connection is closed as it is accepted.
    let fake = FakeRemote::start(Fault::Closed).await;
    let url = fake.url.clone();
    let mut pool = PoolConfig {
        locals: 0,
        remotes: vec![remote(&url)],
        backoff_first: Duration::from_millis(100),
        backoff_max: Duration::from_millis(500),
        crash_limit: 2,
        ..PoolConfig::new(Err("no local members".into()), std::env::temp_dir())
    };
    pool.peer.request_timeout = Duration::from_secs(2);
    let endpoint = remote_only(pool).await;
    let addr = endpoint.tcp_addr().expect("tcp");
    let (status, body) = crate::endpoint::http_get(addr, "/healthz", None).await;
    assert_eq!((status, body.ends_with("ok\n")), (200, true), "{body}");
    // A client's thread needs the remote app-server, which is down.
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let _ = client.request("thread/start", json!({})).await;
    let down = |endpoint: &Endpoint| {
        endpoint.members().iter().all(|member| {
            matches!(
                member.state,
                clawbridge::MemberState::Restarting | clawbridge::MemberState::Dead
            )
        })
    };
    crate::util::wait_until_async("the member down", Duration::from_secs(20), || {
        down(&endpoint)
    })
    .await;
    let (status, body) = crate::endpoint::http_get(addr, "/readyz", None).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        !body.contains("ws://"),
        "a probe learns nothing more: {body}"
    );
    let (status, _) = crate::endpoint::http_get(addr, "/metrics", None).await;
    assert_eq!(status, 401, "the metrics need the token");
    let (status, text) =
        crate::endpoint::http_get(addr, "/metrics", Some(crate::endpoint::TOKEN)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("clawbridge_ready 0"), "{text}");
    assert!(text.contains("clawbridge_members{state="), "{text}");
    // The listener comes back: ready again.
    fake.become_(Fault::Healthy);
    crate::util::wait_until_async("the member back", Duration::from_secs(20), || {
        endpoint
            .members()
            .iter()
            .any(|member| member.state == clawbridge::MemberState::Ready)
    })
    .await;
    let (status, _) = crate::endpoint::http_get(addr, "/readyz", None).await;
    assert_eq!(status, 200);
    let (_, text) = crate::endpoint::http_get(addr, "/metrics", Some(crate::endpoint::TOKEN)).await;
    assert!(text.contains("clawbridge_ready 1"), "{text}");
    drop(client);
    endpoint.stop().await;
    fake.task.abort();
}

/// Protection (`--budget-tokens`): an account that goes past its daily budget has its next turn
/// refused with a message naming the budget; the turn whose model call passed it answered and
/// ended by itself within the grace, so it is `completed`, not recorded as interrupted (a turn
/// that goes on calling the model is stopped: `budgets::concurrent_tool_loops_stop_at_the_budget`);
/// the tokens are in the status and the metrics. (A scripted fake member: no Codex needed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_stops_a_runaway_account() {
    let (endpoint, fake) = scripted_endpoint(|settings| EndpointSettings {
        budget_tokens: Some(500),
        ..settings
    })
    .await;
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let started = client.request("thread/start", json!({})).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    let turn = json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]});
    // The first turn's model call costs 600 tokens, past the budget of 500; it answered, and
    // Codex completes it 2 s later, within the grace.
    client.request("turn/start", turn.clone()).await;
    let ended = client
        .until("turn/completed", turn_completed(&thread))
        .await;
    assert_eq!(ended["params"]["turn"]["status"], "completed", "{ended}");
    let refused = client.request("turn/start", turn).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--budget-tokens") && message.contains("600"),
        "{refused}"
    );
    let status = serde_json::to_value(endpoint.status()).expect("status");
    assert_eq!(status["identities"][0]["tokensToday"], 600, "{status}");
    let addr = endpoint.tcp_addr().expect("tcp");
    let (_, metrics) =
        crate::endpoint::http_get(addr, "/metrics", Some(crate::endpoint::TOKEN)).await;
    assert!(
        metrics.contains("clawbridge_tokens_total{model=\"gpt-5.5\",kind=\"input\"} 500"),
        "{metrics}"
    );
    assert!(
        metrics.contains("clawbridge_model_calls_total{model=\"gpt-5.5\"} 1"),
        "{metrics}"
    );
    drop(client);
    endpoint.stop().await;
    fake.abort();
}

/// A turn that compacted twice and still fills the model's context window raises the thread's
/// context alarm (status and `/metrics`); the next turn starts its count again, and one
/// compaction is no alarm. (A scripted fake member: no Codex needed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_compactions_that_still_fill_the_window_raise_the_context_alarm() {
    let (endpoint, fake) = scripted_endpoint(|settings| settings).await;
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let started = client.request("thread/start", json!({})).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    let addr = endpoint.tcp_addr().expect("tcp");
    for (times, alarm, alarms) in [(2, true, 1), (1, false, 1)] {
        let turn = json!({"threadId": thread, "input": [{"type": "text", "text": format!("compact {times}")}]});
        let answer = client.request("turn/start", turn).await;
        let id = answer["result"]["turn"]["id"].clone();
        client
            .until("turn/completed", |message| {
                turn_completed(&thread)(message) && message["params"]["turn"]["id"] == id
            })
            .await;
        let status = serde_json::to_value(endpoint.status()).expect("status");
        let shown = &status["connections"][0]["threads"][0];
        assert_eq!(shown["compactions"], times, "{status}");
        assert_eq!(shown["contextAlarm"], alarm, "{status}");
        assert_eq!(status["contextAlarms"], alarms, "{status}");
        let (_, metrics) =
            crate::endpoint::http_get(addr, "/metrics", Some(crate::endpoint::TOKEN)).await;
        assert!(
            metrics.contains(&format!("clawbridge_context_alarms_total {alarms}")),
            "{metrics}"
        );
    }
    drop(client);
    endpoint.stop().await;
    fake.abort();
}

/// `--allow-host`: a scraper that names the endpoint by another name (a pod's) is served when
/// the operator allowed that name, and refused (403) otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_host_reaches_the_metrics_and_no_other_does() {
    let endpoint = Endpoint::start(
        EndpointSettings {
            allow_hosts: vec!["metrics.internal:*".to_string()],
            ..settings(PoolConfig::new(Err("unused".into()), std::env::temp_dir()))
        },
        false,
    )
    .await
    .expect("endpoint");
    let addr = endpoint.tcp_addr().expect("tcp");
    let scrape = |host: &'static str| async move {
        let request = format!(
            "GET /metrics HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            crate::endpoint::TOKEN
        );
        tokio::task::spawn_blocking(move || crate::serve_security::raw_http(addr, &request).0)
            .await
            .expect("scrape")
    };
    assert_eq!(scrape("metrics.internal:9090").await, 200);
    assert_eq!(scrape("evil.example:9090").await, 403);
    endpoint.stop().await;
}

/// Protection: what is queued to a client is bounded in bytes. A client asks for long threads'
/// histories (2 MiB answers) and reads nothing: once 64 MiB wait for it, the endpoint closes the
/// connection, saying why, and lets go of what it held (the connection leaves the status); the
/// endpoint keeps serving others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_closed_at_the_byte_bound() {
    // Nothing else closes it within the test: no idle timeout.
    let (endpoint, fake) = scripted_endpoint(|settings| EndpointSettings {
        idle_timeout: Duration::from_secs(3600),
        ..settings
    })
    .await;
    let addr = endpoint.tcp_addr().expect("tcp");
    let io = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut reader = crate::endpoint::ws_client(io, &addr.to_string(), crate::endpoint::TOKEN)
        .await
        .expect("upgraded");
    reader.initialize().await;
    for id in 0..60 {
        reader
            .send(json!({"id": 100 + id, "method": "thread/read", "params": {"threadId": "long"}}))
            .await;
    }
    // (A liveness bound, not a timing: 32 answers of 2 MiB pass through a debug build on a
    // loaded machine.)
    let closed = crate::util::poll_async(Duration::from_secs(120), || {
        endpoint.status().connections.is_empty().then_some(())
    })
    .await;
    assert!(closed.is_some(), "{:#?}", endpoint.status().connections);
    // Another client is served as before.
    let mut other = crate::endpoint::tcp_client(&endpoint).await;
    let init = other.initialize().await;
    assert!(init["result"].is_object(), "{init}");
    endpoint.stop().await;
    fake.abort();
}

/// Protection: a thread id that cannot be Codex's (past 256 bytes, or with control
/// characters) is refused before anything is kept for it, and a resume Codex refuses files
/// nothing either: 200 resumes of 64 KiB ids leave the endpoint knowing no thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bogus_thread_ids_are_refused_and_leave_nothing_behind() {
    let (endpoint, fake) = scripted_endpoint(|settings| settings).await;
    let mut client = crate::endpoint::tcp_client(&endpoint).await;
    client.initialize().await;
    let long = "7".repeat(64 * 1024);
    for _ in 0..200 {
        let answer = client
            .request("thread/resume", json!({"threadId": long}))
            .await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("is not a thread id"), "{answer}");
        client.seen.clear();
    }
    let answer = client
        .request("turn/start", json!({"threadId": "t\u{1b}[2J", "input": []}))
        .await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("no control characters")),
        "{answer}"
    );
    let status = endpoint.status();
    assert_eq!(status.known_threads, 0, "{status:#?}");
    assert!(
        status
            .connections
            .iter()
            .all(|connection| connection.threads.is_empty()),
        "{status:#?}"
    );
    endpoint.stop().await;
    fake.abort();
}
