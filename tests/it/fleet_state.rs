//! The fleet's state across restarts (the "Fleet state" issue): `clawbridge app-server --listen`
//! as operators run it, killed with -9 or stopped with SIGTERM and started again on the same
//! state dir, with the real Codex and a loopback upstream that records every model request's
//! `Authorization`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawbridge::{ResponsesStub, StubScript};
use serde_json::{json, Value};

use crate::endpoint::{turn_completed, ws_client, Client};

type Ws = Client<tokio::net::TcpStream>;

const OPERATOR_TOKEN: &str = "fleet-state-operator-token-0123456789";

fn key_of(account: &str) -> String {
    format!("sk-fleet-{account}-0123456789abcdef")
}

/// A state dir, a Codex home pointing at the recording upstream, named clients; endpoints
/// started (and stopped) on them one after another.
struct Fleet {
    dir: tempfile::TempDir,
    state: PathBuf,
    root: PathBuf,
    tokens: std::collections::BTreeMap<&'static str, String>,
    upstream: tokio::sync::mpsc::Receiver<clawbridge::CapturedRequest>,
    /// The `clawbridge` the endpoints are started from (this build's, or a copy of it).
    exe: PathBuf,
    _stub: ResponsesStub,
}

/// One running endpoint.
struct Running {
    child: tokio::process::Child,
    addr: String,
}

impl Fleet {
    async fn new(clients: &[&'static str]) -> Fleet {
        let dir = tempfile::tempdir().expect("dir");
        let state = dir.path().join("state");
        let root = dir.path().join("agents");
        std::fs::create_dir_all(&root).expect("root");
        let (sink, upstream) = tokio::sync::mpsc::channel(4096);
        let stub = ResponsesStub::start_with_sink(StubScript::default(), Some(sink))
            .await
            .expect("stub");
        let native = dir.path().join("codex-home");
        std::fs::create_dir_all(&native).expect("home");
        std::fs::write(
            native.join("config.toml"),
            clawbridge::offline_account_config(&stub.base_url(), "gpt-5.5"),
        )
        .expect("config");
        std::fs::create_dir_all(&state).expect("state");
        crate::util::write_private(&state.join("app-server-token"), OPERATOR_TOKEN);
        let mut tokens = std::collections::BTreeMap::new();
        for name in clients {
            let output = crate::util::clawbridge()
                .args(["client", "add", name, "--state-dir"])
                .arg(&state)
                .output()
                .expect("client add");
            assert!(output.status.success(), "{output:?}");
            tokens.insert(
                *name,
                String::from_utf8_lossy(&output.stdout).trim().to_string(),
            );
        }
        Fleet {
            state,
            root: root.canonicalize().expect("root"),
            tokens,
            upstream,
            exe: PathBuf::from(env!("CARGO_BIN_EXE_clawbridge")),
            _stub: stub,
            dir,
        }
    }

    async fn start(&self, flags: &[&str]) -> Running {
        self.start_on(&crate::e2e::codex_bin(), flags).await
    }

    /// [`Fleet::start`] with the members on the Codex CLI `codex`.
    async fn start_on(&self, codex: &Path, flags: &[&str]) -> Running {
        self.start_with(codex, &self.state, "ws://127.0.0.1:0", flags)
            .await
    }

    /// [`Fleet::start`] on another state dir (made with the fleet's tokens when new).
    async fn start_in(&self, state: &Path, flags: &[&str]) -> Running {
        self.start_at(state, "ws://127.0.0.1:0", flags).await
    }

    /// [`Fleet::start_in`] listening on `listen` (a restarted endpoint keeps its address).
    async fn start_at(&self, state: &Path, listen: &str, flags: &[&str]) -> Running {
        if !state.exists() {
            std::fs::create_dir_all(state).expect("state");
            for file in ["app-server-token", "clients.json"] {
                if self.state.join(file).exists() {
                    std::fs::copy(self.state.join(file), state.join(file)).expect("copy");
                }
            }
        }
        self.start_with(&crate::e2e::codex_bin(), state, listen, flags)
            .await
    }

    async fn start_with(
        &self,
        codex: &Path,
        state: &Path,
        listen: &str,
        flags: &[&str],
    ) -> Running {
        let mut child = tokio::process::Command::new(&self.exe)
            .args(["app-server", "--listen", listen, "--state-dir"])
            .arg(state)
            .arg("--workspace-root")
            .arg(&self.root)
            .arg("--codex-bin")
            .arg(codex)
            .args(flags)
            .env("CODEX_HOME", self.dir.path().join("codex-home"))
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .current_dir(self.dir.path())
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
        assert!(!line.trim().is_empty(), "the endpoint printed no address");
        Running {
            child,
            addr: line.trim().to_string(),
        }
    }

    /// A connection of `name` (`operator` or a named client) to `running`, its `initialize`
    /// answer (as the bytes came), logged in with `account`'s key.
    async fn connect(&self, running: &Running, name: &str, account: Option<&str>) -> (Ws, String) {
        self.connect_at(&running.addr, name, account).await
    }

    /// [`Fleet::connect`] through `addr` (an endpoint, or a load balancer in front of some).
    async fn connect_at(&self, addr: &str, name: &str, account: Option<&str>) -> (Ws, String) {
        let token = match name {
            "operator" => OPERATOR_TOKEN.to_string(),
            name => self.tokens[name].clone(),
        };
        let io = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut client = ws_client(io, addr, &token).await.expect("upgraded");
        let init = client
            .request(
                "initialize",
                json!({"clientInfo": {"name": "fleet-test", "version": "1.0"}}),
            )
            .await;
        client.send(json!({"method": "initialized"})).await;
        if let Some(account) = account {
            let login = client
                .request(
                    "account/login/start",
                    json!({"type": "apiKey", "apiKey": key_of(account)}),
                )
                .await;
            assert_eq!(login["result"]["type"], "apiKey", "{name}: {login}");
        }
        (client, init["result"].to_string())
    }

    /// Every model request so far: its `Authorization` and its body.
    fn requests(&mut self) -> Vec<(String, String)> {
        drain_requests(&mut self.upstream)
    }
}

impl Running {
    /// Its `app-server status` (JSON), with the operator's token.
    async fn status(&self) -> Value {
        clawbridge::fetch_status(
            &clawbridge::ListenAddr::parse(&format!("ws://{}", self.addr)).expect("addr"),
            OPERATOR_TOKEN,
        )
        .await
        .expect("status")
    }

    fn pid(&self) -> String {
        self.child.id().expect("running").to_string()
    }

    /// kill -9, or SIGTERM and its drain.
    async fn end(mut self, signal: &str) {
        let _ = std::process::Command::new("kill")
            .args([signal, &self.pid()])
            .status();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

/// Every model request a recording upstream got so far: its `Authorization` and its body.
fn drain_requests(
    upstream: &mut tokio::sync::mpsc::Receiver<clawbridge::CapturedRequest>,
) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    while let Ok(request) = upstream.try_recv() {
        seen.push((
            request
                .headers
                .get("authorization")
                .cloned()
                .unwrap_or_default(),
            request.body.to_string(),
        ));
    }
    seen
}

/// How long a soak runs: `CLAWBRIDGE_SOAK_SECS`, 12 s by default (what CI runs).
fn soak_secs() -> u64 {
    std::env::var("CLAWBRIDGE_SOAK_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(12)
}

/// A turn on `thread` to its `turn/completed` (or the refusal of its `turn/start`).
pub(crate) async fn turn(client: &mut Ws, thread: &str, text: &str) -> Value {
    let answer = client
        .request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
        )
        .await;
    if answer["error"].is_object() {
        return answer;
    }
    let done = client.until("turn/completed", turn_completed(thread)).await;
    client.seen.clear();
    done
}

/// `thread/resume` of `thread`, asked again every 200 ms while it is refused (another
/// endpoint's lease running out), for up to 20 s: the last answer.
async fn resume_once_free(client: &mut Ws, thread: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let resumed = client
            .request("thread/resume", json!({"threadId": thread}))
            .await;
        if resumed["result"].is_object() || tokio::time::Instant::now() > deadline {
            return resumed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// [`resume_once_free`], which must give the thread back, then a turn that must complete.
async fn resume_and_turn(client: &mut Ws, thread: &str, text: &str) {
    let resumed = resume_once_free(client, thread).await;
    assert_eq!(resumed["result"]["thread"]["id"], thread, "{resumed}");
    let done = turn(client, thread, text).await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
}

async fn new_thread(client: &mut Ws, cwd: &Path) -> String {
    let started = client
        .request(
            "thread/start",
            json!({"cwd": cwd, "modelProvider": "openai"}),
        )
        .await;
    started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string()
}

/// Protection: an upgrade in place under a running endpoint. Operators replace the installed
/// binaries (`cargo install`, `npm install -g`, a package) while the endpoint serves; the
/// app-servers it starts afterwards (a new account's, here) are started through its own helpers
/// (the reaper, the jail's stages), which must still run this build. Before, they were started
/// from the executable's path: after the upgrade it named a removed file (Linux reads it as
/// "PATH (deleted)") or another build, and no app-server started until a restart.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_in_place_leaves_a_running_endpoint_able_to_start_app_servers() {
    let mut fleet = Fleet::new(&["alice", "bob"]).await;
    let installed = fleet.dir.path().join("bin");
    std::fs::create_dir_all(&installed).expect("bin");
    let built = Path::new(env!("CARGO_BIN_EXE_clawbridge"));
    // Copied by `cp`, not from this process: a file this process holds open for writing is
    // inherited by any child another test forks meanwhile, and exec of it then fails with
    // ETXTBSY ("Text file busy", CI red once).
    for name in ["clawbridge", "clawbridge-runtime"] {
        let copied = std::process::Command::new("cp")
            .arg(built.with_file_name(name))
            .arg(installed.join(name))
            .status()
            .expect("cp");
        assert!(copied.success(), "cp {name}");
    }
    fleet.exe = installed.join("clawbridge");
    let running = fleet.start(&[]).await;
    let (mut alice, _) = fleet.connect(&running, "alice", Some("A")).await;
    let hers = new_thread(&mut alice, &fleet.root).await;
    let done = turn(&mut alice, &hers, "alice before the upgrade").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    // The upgrade: each file is removed and another written in its place.
    for name in ["clawbridge", "clawbridge-runtime"] {
        let path = installed.join(name);
        std::fs::remove_file(&path).expect("remove");
        std::fs::write(&path, "#!/bin/sh\necho 'another build' >&2\nexit 97\n").expect("new");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("mode");
    }
    fleet.requests();
    let (mut bob, _) = fleet.connect(&running, "bob", Some("B")).await;
    let his = new_thread(&mut bob, &fleet.root).await;
    let done = turn(&mut bob, &his, "bob after the upgrade").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let requests = fleet.requests();
    assert!(
        requests
            .iter()
            .any(|(auth, body)| body.contains("bob after the upgrade")
                && auth == &format!("Bearer {}", key_of("B"))),
        "bob's turn reached the model on his key through an app-server started after the upgrade"
    );
    let status = running.status().await;
    assert_eq!(
        status["policy"]["isolation"], "private view per app-server (mount and PID namespaces)",
        "{status}"
    );
    drop((alice, bob));
    running.end("-TERM").await;
}

/// Protection: the durable directory and the pinned runtime identity. Alice (account A) and bob
/// (account B), named clients, each run a thread; the endpoint is killed with -9, started again,
/// stopped with SIGTERM and started again. After each start: every connection is told the same
/// `initialize` answer, byte for byte; bob is refused on alice's thread (a client's ownership
/// survives) and so is alice logged in on bob's account (the account survives); a failed
/// resume takes nobody's thread; alice resumes hers and her next model request carries her key
/// and her earlier words.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_changes_nothing_an_agent_can_see() {
    let mut fleet = Fleet::new(&["alice", "bob"]).await;
    let running = fleet.start(&[]).await;
    let (mut alice, pinned) = fleet.connect(&running, "alice", Some("A")).await;
    let (mut bob, _) = fleet.connect(&running, "bob", Some("B")).await;
    let hers = new_thread(&mut alice, &fleet.root).await;
    let done = turn(&mut alice, &hers, "alice says tulip-0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let his = new_thread(&mut bob, &fleet.root).await;
    turn(&mut bob, &his, "bob says oak-0").await;
    drop((alice, bob));
    let mut running = running;
    for (round, signal) in ["-KILL", "-TERM"].into_iter().enumerate() {
        running.end(signal).await;
        running = fleet.start(&[]).await;
        let (mut bob, init) = fleet.connect(&running, "bob", Some("B")).await;
        assert_eq!(init, pinned, "after {signal}: the same initialize answer");
        // Bob on alice's thread, by resume and by turn: refused as before the restart.
        for method in ["thread/resume", "turn/start"] {
            let refused = bob
                .request(method, json!({"threadId": hers, "input": []}))
                .await;
            let why = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(
                why.contains("belongs to another client"),
                "after {signal}: {refused}"
            );
        }
        // Alice's own client on bob's account: the thread's account is kept too.
        let (mut astray, _) = fleet.connect(&running, "alice", Some("B")).await;
        let refused = astray
            .request("thread/resume", json!({"threadId": hers}))
            .await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("belongs to another account"),
            "after {signal}: {refused}"
        );
        // A resume Codex refuses (a thread it never had) files nothing.
        let bogus = "0199a9c0-0000-7000-8000-00000000beef";
        let failed = bob
            .request("thread/resume", json!({"threadId": bogus}))
            .await;
        assert!(failed["error"].is_object(), "{failed}");
        // Alice resumes her own thread and goes on with it, on her key.
        let (mut alice, _) = fleet.connect(&running, "alice", Some("A")).await;
        let resumed = alice
            .request("thread/resume", json!({"threadId": hers}))
            .await;
        assert_eq!(
            resumed["result"]["thread"]["id"],
            hers.as_str(),
            "{resumed}"
        );
        fleet.requests();
        let text = format!("alice says tulip-{}", round + 1);
        let done = turn(&mut alice, &hers, &text).await;
        assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
        let requests = fleet.requests();
        let mine: Vec<&(String, String)> = requests
            .iter()
            .filter(|(_, body)| body.contains(&text))
            .collect();
        assert!(!mine.is_empty(), "alice's turn reached the model");
        for (auth, body) in mine {
            assert_eq!(auth, &format!("Bearer {}", key_of("A")));
            assert!(
                body.contains("alice says tulip-0"),
                "her earlier words are in the thread"
            );
        }
        // The status says where the state lives.
        let status = running.status().await;
        let state = status["state"].as_str().unwrap_or_default();
        assert!(state.ends_with("app-server.db"), "{status}");
        assert!(status["knownThreads"].as_u64() >= Some(2), "{status}");
    }
    running.end("-TERM").await;
}

/// Protection: each account's tokens of the day are kept. An account past its budget is
/// refused a turn; after kill -9 and a start on the same state dir it is still refused, on a
/// new thread too (the day does not start again at zero).
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reached_budget_stays_reached_across_a_restart() {
    let fleet = Fleet::new(&[]).await;
    let flags = ["--budget-tokens", "20"];
    let running = fleet.start(&flags).await;
    let (mut agent, _) = fleet.connect(&running, "operator", Some("A")).await;
    let thread = new_thread(&mut agent, &fleet.root).await;
    // The stub's answers cost 15 tokens each: two turns pass the budget of 20.
    for round in 0..2 {
        turn(&mut agent, &thread, &format!("round {round}")).await;
    }
    let refused = turn(&mut agent, &thread, "round 2").await;
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("past its budget"), "{refused}");
    drop(agent);
    running.end("-KILL").await;
    let running = fleet.start(&flags).await;
    let (mut agent, _) = fleet.connect(&running, "operator", Some("A")).await;
    let fresh = new_thread(&mut agent, &fleet.root).await;
    let refused = turn(&mut agent, &fresh, "after the restart").await;
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("past its budget") && why.contains("used 30 tokens"),
        "{refused}"
    );
    running.end("-TERM").await;
}

/// Protection: the pinned runtime identity across a Codex upgrade of the members. The endpoint
/// is restarted on Codex 0.171.0 (the members' own `initialize` answer changes with it): every
/// connection is still told the pinned answer, byte for byte, until the operator asks for the
/// new one with `--new-runtime-identity`.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initialize_answer_is_pinned_across_a_codex_upgrade() {
    let (older, newer) = (
        crate::e2e::codex_bin_of("0.169.0"),
        crate::e2e::codex_bin_of("0.171.0"),
    );
    let fleet = Fleet::new(&[]).await;
    let running = fleet.start_on(&older, &[]).await;
    let (_, pinned) = fleet.connect(&running, "operator", None).await;
    assert!(pinned.contains("/0.169.0 "), "{pinned}");
    running.end("-TERM").await;
    let running = fleet.start_on(&newer, &[]).await;
    let (_, init) = fleet.connect(&running, "operator", None).await;
    assert_eq!(
        init, pinned,
        "the members run 0.171.0; clients are told the pinned answer"
    );
    // Told from the pin: the handshake started no member (a client logs in next, on a member
    // of its own account).
    let status = running.status().await;
    let started: Vec<&Value> = status["members"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            status["identities"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|identity| identity["members"].as_array().into_iter().flatten()),
        )
        .filter(|member| member["generation"].as_u64() > Some(0))
        .collect();
    assert!(started.is_empty(), "no member started: {status:#}");
    running.end("-TERM").await;
    let running = fleet.start_on(&newer, &["--new-runtime-identity"]).await;
    let (_, renewed) = fleet.connect(&running, "operator", None).await;
    assert!(renewed.contains("/0.171.0 "), "{renewed}");
    running.end("-TERM").await;
}

/// The Codex processes under the endpoint `pid` (its members), from `/proc`.
fn members_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut pending = vec![pid];
    while let Some(parent) = pending.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children
                .split_whitespace()
                .filter_map(|child| child.parse().ok())
            {
                let comm =
                    std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
                if comm.trim() == "codex" {
                    found.push(child);
                }
                pending.push(child);
            }
        }
    }
    found
}

/// One soak agent: its client, account, connection and thread.
struct SoakAgent {
    client: &'static str,
    account: &'static str,
    ws: Option<Ws>,
    thread: Option<String>,
}

/// A soak through the endpoint with restarts: three agents (two named clients and the
/// operator, each on its own account) run turns side by side while the endpoint is killed
/// with -9 or stopped with SIGTERM and started again on the same state dir, and members are
/// killed, between rounds; after each restart every agent reconnects and resumes its own
/// thread, and an intruder (bob) tries alice's. It fails when a turn goes unanswered, a model
/// request carries another agent's key, an owner cannot resume its thread, or the intruder gets
/// it. `CLAWBRIDGE_SOAK_SECS` sets its length (default 12 s); the counts are one `SOAK:` line.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_with_endpoint_restarts_loses_no_turn_owner_or_key() {
    let secs = soak_secs();
    let mut fleet = Fleet::new(&["alice", "bob"]).await;
    let mut running = fleet.start(&["--app-servers", "3"]).await;
    let mut agents = vec![
        SoakAgent {
            client: "alice",
            account: "A",
            ws: None,
            thread: None,
        },
        SoakAgent {
            client: "bob",
            account: "B",
            ws: None,
            thread: None,
        },
        SoakAgent {
            client: "operator",
            account: "C",
            ws: None,
            thread: None,
        },
    ];
    let (mut rounds, mut turns, mut restarts, mut kills, mut refused) = (0, 0, 0, 0, 0);
    let began = std::time::Instant::now();
    while began.elapsed() < Duration::from_secs(secs) || rounds < 3 {
        rounds += 1;
        // Connect (after a restart: again), resume, and one turn each, side by side.
        let mut work = Vec::new();
        for mut agent in agents.drain(..) {
            let (ws, _) = match agent.ws.take() {
                Some(ws) => (ws, String::new()),
                None => {
                    fleet
                        .connect(&running, agent.client, Some(agent.account))
                        .await
                }
            };
            agent.ws = Some(ws);
            let root = fleet.root.clone();
            work.push(tokio::spawn(async move {
                let ws = agent.ws.as_mut().expect("connected");
                let thread = match &agent.thread {
                    Some(thread) => {
                        let resumed = ws
                            .request("thread/resume", json!({"threadId": thread}))
                            .await;
                        assert_eq!(
                            resumed["result"]["thread"]["id"],
                            thread.as_str(),
                            "{} resumes its own thread: {resumed}",
                            agent.client
                        );
                        thread.clone()
                    }
                    None => new_thread(ws, &root).await,
                };
                let text = format!("message from agent {} round {rounds}", agent.account);
                let done = turn(ws, &thread, &text).await;
                assert_eq!(
                    done["params"]["turn"]["status"], "completed",
                    "{}'s turn: {done}",
                    agent.client
                );
                agent.thread = Some(thread);
                agent
            }));
        }
        for job in work {
            agents.push(job.await.expect("agent"));
            turns += 1;
        }
        // The intruder: bob on alice's thread.
        let theirs = agents[0].thread.clone().expect("alice's thread");
        let bob = agents[1].ws.as_mut().expect("bob");
        let denied = bob
            .request("thread/resume", json!({"threadId": theirs}))
            .await;
        assert!(
            denied["error"]["message"]
                .as_str()
                .is_some_and(|why| why.contains("belongs to another client")),
            "{denied}"
        );
        refused += 1;
        // Now and then a member dies, or the endpoint itself.
        match rounds % 3 {
            1 => {
                if let Some(member) = members_of(running.child.id().expect("pid")).first() {
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &member.to_string()])
                        .status();
                    kills += 1;
                    // Each agent resumes before its next turn (its member may be gone).
                    for agent in &mut agents {
                        agent.ws = None;
                    }
                }
            }
            _ => {
                let signal = if restarts % 2 == 0 { "-KILL" } else { "-TERM" };
                for agent in &mut agents {
                    agent.ws = None;
                }
                running.end(signal).await;
                running = fleet.start(&["--app-servers", "3"]).await;
                restarts += 1;
            }
        }
    }
    // Every model request carried the key of the agent whose message it holds.
    let requests = fleet.requests();
    let mut wrong = 0;
    for (auth, body) in &requests {
        for account in ["A", "B", "C"] {
            if body.contains(&format!("message from agent {account} "))
                && *auth != format!("Bearer {}", key_of(account))
            {
                wrong += 1;
            }
        }
    }
    eprintln!(
        "SOAK: {secs} s, {rounds} rounds, {turns} turns completed, {restarts} endpoint restarts (kill -9 and SIGTERM), {kills} member kills, {refused} intrusions refused, {} model requests, {wrong} with another's key",
        requests.len()
    );
    assert_eq!(wrong, 0);
    running.end("-TERM").await;
}

/// Protection: account homes are not kept for ever. Under an endpoint with a store and a
/// retention of 2 s: a home unused past it with no thread is removed (and so is one whose
/// only thread's conversation is gone); one with a thread still kept, one used within the
/// retention, a folder not named as an account and a link named as one (and what it points
/// at) stay. `status` shows what was kept and removed; a crash's half-removed home is
/// finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unused_account_homes_go_after_their_retention_and_homes_with_threads_stay() {
    let dir = tempfile::tempdir().expect("dir");
    let homes = dir.path().join("homes");
    std::fs::create_dir_all(&homes).expect("homes");
    let home = |name: &str| {
        let path = homes.join(name);
        std::fs::create_dir_all(path.join("sessions/2026/12/05")).expect("home");
        std::fs::write(path.join("auth.json"), "{}").expect("auth");
        path
    };
    let unused = home("apiKey-aaaaaaaaaaaaaaaa");
    let threaded = home("apiKey-bbbbbbbbbbbbbbbb");
    let gone = home("apiKey-cccccccccccccccc");
    let other = home("notes");
    let half = home(".removing-apiKey-eeeeeeeeeeeeeeee");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("keep.txt"), "mine").expect("file");
    let link = homes.join("apiKey-ffffffffffffffff");
    std::os::unix::fs::symlink(&outside, &link).expect("link");
    let store =
        std::sync::Arc::new(clawbridge::Store::open(&dir.path().join("state.db")).expect("store"));
    let record = |id: &str, identity: &str, gone: bool| clawbridge::ThreadRecord {
        id: id.to_string(),
        identity: identity.to_string(),
        member: "local-0".to_string(),
        owner: "operator".to_string(),
        session_key: None,
        fingerprint: None,
        rollout: None,
        epoch: 1,
        gone,
        last_used: 1,
        home: None,
    };
    store
        .put_thread_now(record("t-1", "apiKey-bbbbbbbbbbbbbbbb", false))
        .expect("thread");
    store
        .put_thread_now(record("t-2", "apiKey-cccccccccccccccc", true))
        .expect("thread");
    // Past the retention for those; then a home used within it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let recent = home("apiKey-dddddddddddddddd");
    let mut fleet = crate::endpoint::fleet(crate::endpoint::no_codex());
    fleet.homes = homes.clone();
    let endpoint = clawbridge::Endpoint::start(
        clawbridge::EndpointSettings {
            fleet,
            store: Some(store),
            home_retention: Some(Duration::from_secs(2)),
            ..crate::endpoint::settings(crate::endpoint::no_codex())
        },
        false,
    )
    .await
    .expect("endpoint");
    // (The sweep at the start may have come first: what this one removes is the rest.)
    endpoint.sweep_homes().await;
    assert!(!unused.exists() && !gone.exists() && !half.exists());
    assert!(
        threaded.join("auth.json").exists(),
        "a home with a thread stays"
    );
    assert!(recent.join("auth.json").exists(), "a recent home stays");
    assert!(
        other.join("auth.json").exists(),
        "not an account's: untouched"
    );
    assert!(
        link.exists() && outside.join("keep.txt").exists(),
        "a link is never followed"
    );
    let status = serde_json::to_value(endpoint.status()).expect("status");
    // At the start and now: two removed in all (the first sweep may have run first).
    assert_eq!(status["accountHomes"]["removed"], 2, "{status}");
    assert_eq!(status["accountHomes"]["kept"], 2, "{status}");
    assert_eq!(status["accountHomes"]["retentionDays"], 0, "{status}");
    assert_eq!(status["appServers"]["held"], 0, "{status}");
    endpoint.stop().await;
}

/// `clawbridge account ARGS --state-dir STATE` with `KEY` set to `key`: its stdout.
fn account_command(state: &Path, key: &str, args: &[&str]) -> String {
    let output = crate::util::clawbridge()
        .arg("account")
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .env("KEY", key)
        .output()
        .expect("account");
    assert!(output.status.success(), "account {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A connection of the operator to `running` that sends `account/login/start` with `account`'s
/// key: the connection and the login's answer (refused or not).
async fn login_as(running: &Running, account: &str) -> (Ws, Value) {
    let io = tokio::net::TcpStream::connect(&running.addr)
        .await
        .expect("connect");
    let mut client = ws_client(io, &running.addr, OPERATOR_TOKEN)
        .await
        .expect("upgraded");
    client
        .request(
            "initialize",
            json!({"clientInfo": {"name": "openclaw", "version": "2026.9.6"}}),
        )
        .await;
    client.send(json!({"method": "initialized"})).await;
    let login = client
        .request(
            "account/login/start",
            json!({"type": "apiKey", "apiKey": key_of(account)}),
        )
        .await;
    (client, login)
}

/// Protection: a key rotation keeps an agent's threads. Agent alpha runs a turn on key A (no
/// account named yet). Its operator changes the key to A2: the thread is refused, and the
/// refusal says how to name the account and add the key. After `account add alpha` (from key
/// A) and `account add-key alpha` (A2) — the endpoint running all along — A2 resumes the same
/// thread and the next model request carries A2, with the thread's earlier words. After
/// `remove-key` of A, a login with A is refused (though its fingerprint is the account's own)
/// and so is a key of no account, each saying how to add it. The status names the account,
/// the connection's account, the thread's workspace and its OpenClaw agent; the capture's
/// fingerprint of A2's `Authorization` is the one `clawbridge account` prints for A2.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_keeps_the_agents_thread_and_a_removed_key_is_refused() {
    let mut fleet = Fleet::new(&[]).await;
    let workspace = fleet.root.join("workspace-alpha");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let running = fleet.start(&[]).await;
    let (mut alpha, login) = login_as(&running, "A").await;
    assert_eq!(login["result"]["type"], "apiKey", "{login}");
    let thread = new_thread(&mut alpha, &workspace).await;
    let done = turn(&mut alpha, &thread, "alpha says tulip-0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    drop(alpha);
    // The operator rotates alpha's key in OpenClaw first: the thread is another account's,
    // and the refusal says how to keep it.
    let (mut rotated, login) = login_as(&running, "A2").await;
    assert_eq!(login["result"]["type"], "apiKey", "{login}");
    let refused = rotated
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    let old = account_command(&fleet.state, &key_of("A"), &["--api-key-env", "KEY"]);
    let old = old.lines().next().unwrap_or_default().to_string();
    assert!(
        why.contains(&format!("clawbridge account add NAME --fingerprint {old}"))
            && why.contains("add-key"),
        "{refused}"
    );
    drop(rotated);
    // Name the account from its old key, give it the new one: no restart.
    account_command(
        &fleet.state,
        &key_of("A"),
        &["add", "alpha", "--api-key-env", "KEY"],
    );
    account_command(
        &fleet.state,
        &key_of("A2"),
        &["add-key", "alpha", "--api-key-env", "KEY"],
    );
    let new = account_command(&fleet.state, &key_of("A2"), &["--api-key-env", "KEY"]);
    assert!(new.contains("(account alpha, filed as"), "{new}");
    let new = new
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let (mut alpha, login) = login_as(&running, "A2").await;
    assert_eq!(login["result"]["type"], "apiKey", "{login}");
    let resumed = alpha
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    assert_eq!(
        resumed["result"]["thread"]["id"],
        thread.as_str(),
        "{resumed}"
    );
    fleet.requests();
    let done = turn(&mut alpha, &thread, "alpha says tulip-1").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let requests = fleet.requests();
    let turn_requests: Vec<&(String, String)> = requests
        .iter()
        .filter(|(_, body)| body.contains("alpha says tulip-1"))
        .collect();
    assert!(!turn_requests.is_empty(), "the turn reached the model");
    for (auth, body) in turn_requests {
        assert_eq!(auth, &format!("Bearer {}", key_of("A2")), "the new key");
        assert!(body.contains("alpha says tulip-0"), "the same thread");
        assert_eq!(
            clawbridge::credential_fingerprint(auth),
            new,
            "the capture names the key as `clawbridge account` does"
        );
    }
    // The status names the account, the connection's account, the workspace and the agent.
    let listen = clawbridge::ListenAddr::parse(&format!("ws://{}", running.addr)).expect("addr");
    let status = clawbridge::fetch_status(&listen, OPERATOR_TOKEN)
        .await
        .expect("status");
    let account = status["identities"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|identity| identity["identity"] == old.as_str())
        })
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(account["name"], "alpha", "{status}");
    let connection = status["connections"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["account"] == "alpha"))
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(connection["identity"], old.as_str(), "{status}");
    assert_eq!(connection["threads"][0]["agent"], "alpha", "{status}");
    assert_eq!(
        connection["threads"][0]["workspace"],
        workspace.to_string_lossy().as_ref(),
        "{status}"
    );
    let table = clawbridge::render_status_text(&status);
    assert!(table.contains("alpha"), "{table}");
    assert!(
        table.lines().all(|line| line.chars().count() <= 100),
        "{table}"
    );
    let addr: std::net::SocketAddr = running.addr.parse().expect("addr");
    let (_, metrics) = crate::endpoint::http_get(addr, "/metrics", Some(OPERATOR_TOKEN)).await;
    assert!(
        metrics.contains(&format!(
            "clawbridge_account_tokens_today{{account=\"{old}\",name=\"alpha\"}}"
        )),
        "{metrics}"
    );
    // The old key goes: its login is refused, saying how to add it back.
    account_command(
        &fleet.state,
        &key_of("A"),
        &["remove-key", "alpha", "--api-key-env", "KEY"],
    );
    let (_gone, login) = login_as(&running, "A").await;
    let why = login["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("was removed from account alpha") && why.contains("add-key alpha"),
        "{login}"
    );
    // A key of no account, now that accounts are named: refused, saying how to add it.
    let (_stranger, login) = login_as(&running, "Z").await;
    let why = login["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("is no named account's") && why.contains("clawbridge account add"),
        "{login}"
    );
    running.end("-TERM").await;
}

/// Two endpoints at once on one PostgreSQL store (`--store postgres://...`, the "Replicas"
/// issue, its first step): alice's thread opened through endpoint A is hers through endpoint
/// B too (bob is refused on it there); once A is killed with -9 she goes on with it through B
/// on her own key with her earlier words in the model's request; both give the same
/// `initialize` answer, and the status names the store without its password (no embedded
/// database is made).
#[ignore = "pairs with the Codex CLI and PostgreSQL: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_endpoints_on_one_postgres_serve_one_fleet() {
    let server = crate::util::Postgres::start();
    let url = server.url();
    let mut fleet = Fleet::new(&["alice", "bob"]).await;
    let a = fleet.start(&["--store", &url]).await;
    let b = fleet.start(&["--store", &url]).await;
    let (mut alice, pinned) = fleet.connect(&a, "alice", Some("A")).await;
    let hers = new_thread(&mut alice, &fleet.root).await;
    let done = turn(&mut alice, &hers, "alice says tulip-0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    drop(alice);

    let (mut bob, init) = fleet.connect(&b, "bob", Some("B")).await;
    assert_eq!(init, pinned, "both endpoints give one initialize answer");
    for method in ["thread/resume", "turn/start"] {
        let refused = bob
            .request(method, json!({"threadId": hers, "input": []}))
            .await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(why.contains("belongs to another client"), "{refused}");
    }
    // Codex allows one writer per thread: while A's app-server holds it, B's cannot resume it
    // (the leases of the "Replicas" issue will hand it over). A dies (kill -9); alice goes on
    // through B.
    let (mut alice, _) = fleet.connect(&b, "alice", Some("A")).await;
    let held = alice
        .request("thread/resume", json!({"threadId": hers}))
        .await;
    assert!(held["error"].is_object(), "{held}");
    a.end("-KILL").await;
    fleet.requests();
    resume_and_turn(&mut alice, &hers, "alice says tulip-1").await;
    let requests = fleet.requests();
    let mine: Vec<&(String, String)> = requests
        .iter()
        .filter(|(_, body)| body.contains("alice says tulip-1"))
        .collect();
    assert!(!mine.is_empty(), "alice's turn through B reached the model");
    for (auth, body) in mine {
        assert_eq!(auth, &format!("Bearer {}", key_of("A")));
        assert!(
            body.contains("alice says tulip-0"),
            "her words through A are there"
        );
    }
    let status = b.status().await;
    let state = status["state"].as_str().unwrap_or_default();
    assert!(
        state.starts_with("postgresql://") && !status.to_string().contains("pg-secret-4417"),
        "{state}"
    );
    assert!(
        !fleet.state.join("app-server.db").exists(),
        "no embedded database beside the shared one"
    );
    drop((bob, alice));
    b.end("-TERM").await;
}

/// Protection: a thread on a local member is served only by an endpoint on its state dir (the
/// "Replicas" issue, item 3). Endpoints A and B share one PostgreSQL store but not a state dir:
/// alice's thread runs on A's local member, whose Codex home B cannot read. A is killed with -9;
/// through B the thread is refused naming A's state dir (without the check B's own member
/// answers "no rollout" and the thread is marked gone for the whole fleet, or a new one begins
/// from nothing); A, started again on its state dir, resumes it with her earlier words.
#[ignore = "pairs with the Codex CLI and PostgreSQL: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_on_a_dead_endpoint_s_local_member_is_reported_never_begun_again() {
    let server = crate::util::Postgres::start();
    let url = server.url();
    let mut fleet = Fleet::new(&["alice"]).await;
    let flags = ["--store", url.as_str(), "--lease-seconds", "2"];
    let a = fleet.start(&flags).await;
    let other = fleet.dir.path().join("state-b");
    let b = fleet.start_in(&other, &flags).await;
    let (mut alice, _) = fleet.connect(&a, "alice", Some("A")).await;
    let hers = new_thread(&mut alice, &fleet.root).await;
    let done = turn(&mut alice, &hers, "alice says heron-0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    drop(alice);
    a.end("-KILL").await;
    let home_a = std::fs::read_to_string(fleet.state.join("home-id")).expect("A's state dir id");
    let home_b = std::fs::read_to_string(other.join("home-id")).expect("B's state dir id");
    assert_ne!(home_a, home_b, "each state dir has its own id");

    let (mut alice, _) = fleet.connect(&b, "alice", Some("A")).await;
    for method in ["thread/resume", "turn/start", "thread/read"] {
        let refused = alice
            .request(method, json!({"threadId": hers, "input": []}))
            .await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("local app-server") && why.contains(home_a.trim()),
            "{method}: {refused}"
        );
    }
    let status = b.status().await;
    assert_eq!(status["leases"]["stateDir"], home_b.trim(), "{status}");
    drop(alice);

    // A again, on its own state dir: the thread is neither gone nor another's.
    let a = fleet.start(&flags).await;
    let (mut alice, _) = fleet.connect(&a, "alice", Some("A")).await;
    fleet.requests();
    resume_and_turn(&mut alice, &hers, "alice says heron-1").await;
    let requests = fleet.requests();
    assert!(
        requests
            .iter()
            .any(|(auth, body)| body.contains("alice says heron-1")
                && body.contains("alice says heron-0")
                && auth == &format!("Bearer {}", key_of("A"))),
        "her turn through A again carries her earlier words and her key"
    );
    drop(alice);
    a.end("-TERM").await;
    b.end("-TERM").await;
}

/// Budgets across endpoints on one PostgreSQL store (the "Replicas" issue, item 4): an
/// account's tokens are one figure, added in one statement by whichever endpoint its turns go
/// through, so a budget reached through endpoint A is refused through endpoint B (each endpoint
/// alone saw only its own calls).
#[ignore = "pairs with the Codex CLI and PostgreSQL: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_reached_through_one_endpoint_is_refused_through_another() {
    let server = crate::util::Postgres::start();
    let url = server.url();
    let fleet = Fleet::new(&[]).await;
    // The stub's answers cost 15 tokens each: one turn through A and one through B pass 20.
    let flags = ["--store", url.as_str(), "--budget-tokens", "20"];
    let a = fleet.start(&flags).await;
    let b = fleet.start(&flags).await;
    let (mut on_a, _) = fleet.connect(&a, "operator", Some("A")).await;
    let first = new_thread(&mut on_a, &fleet.root).await;
    let done = turn(&mut on_a, &first, "round 0 through A").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let (mut on_b, _) = fleet.connect(&b, "operator", Some("A")).await;
    let second = new_thread(&mut on_b, &fleet.root).await;
    let done = turn(&mut on_b, &second, "round 1 through B").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    // 30 tokens in all, 15 through each: past the budget on both endpoints.
    for (client, thread, through) in [(&mut on_a, &first, "A"), (&mut on_b, &second, "B")] {
        let refused = turn(client, thread, "one more").await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("past its budget") && why.contains("used 30 tokens"),
            "through {through}: {refused}"
        );
    }
    drop((on_a, on_b));
    a.end("-TERM").await;
    b.end("-TERM").await;
}

/// A remote member given to one account (`--app-server-account URL=ACCOUNT`, the "Replicas"
/// issue, item 2): account A's login is forwarded to it and A's turns run there, on A's key;
/// account B's run on the endpoint's local members and never reach it; a URL that is not a
/// member, or an account that is none, is refused at start naming the flag.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_member_given_to_an_account_serves_it_and_no_other() {
    let mut fleet = Fleet::new(&[]).await;
    let (sink, mut remote_upstream) = tokio::sync::mpsc::channel(4096);
    let remote_stub = ResponsesStub::start_with_sink(StubScript::default(), Some(sink))
        .await
        .expect("remote stub");
    let member = RemoteMember::start(&remote_stub.base_url());
    let second = RemoteMember::start(&remote_stub.base_url());
    let (url, token_file) = (member.url.clone(), member.token_file.clone());
    let account_a = clawbridge::credential_fingerprint(&format!("Bearer {}", key_of("A")));
    let token_arg = token_file.display().to_string();
    let second_token = second.token_file.display().to_string();
    let given = format!("{url}={account_a}");
    let given_second = format!("{}={account_a}", second.url);
    let running = fleet
        .start(&[
            "--app-server",
            &url,
            "--app-server-token-file",
            &token_arg,
            "--app-server-account",
            &given,
            "--app-server",
            &second.url,
            "--app-server-token-file",
            &second_token,
            "--app-server-account",
            &given_second,
        ])
        .await;
    let (mut alpha, _) = fleet.connect(&running, "operator", Some("A")).await;
    // Each of A's members keeps A's login in its own Codex home: the login reached both.
    for home in [&member.home, &second.home] {
        let auth = std::fs::read_to_string(home.join("auth.json")).unwrap_or_default();
        assert!(auth.contains(&key_of("A")), "{}: {auth}", home.display());
    }
    let thread = new_thread(&mut alpha, &fleet.root).await;
    let done = turn(&mut alpha, &thread, "alpha through its own member").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let (mut bravo, _) = fleet.connect(&running, "operator", Some("B")).await;
    let other = new_thread(&mut bravo, &fleet.root).await;
    let done = turn(&mut bravo, &other, "bravo on a local member").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");

    let remotely = drain_requests(&mut remote_upstream);
    let locally = fleet.requests();
    assert!(
        remotely
            .iter()
            .any(|(auth, body)| body.contains("alpha through its own member")
                && *auth == format!("Bearer {}", key_of("A"))),
        "A's turn ran on its member, on A's key: {remotely:?}"
    );
    assert!(
        remotely
            .iter()
            .all(|(auth, body)| !body.contains("bravo")
                && *auth == format!("Bearer {}", key_of("A"))),
        "nothing of B reached A's member"
    );
    assert!(
        locally
            .iter()
            .any(|(auth, body)| body.contains("bravo on a local member")
                && *auth == format!("Bearer {}", key_of("B")))
            && locally.iter().all(|(_, body)| !body.contains("alpha")),
        "B ran locally, A never did: {locally:?}"
    );
    // The first member dies: A's next thread runs on the second, on A's key too.
    drop(member);
    let later = new_thread(&mut alpha, &fleet.root).await;
    let done = turn(&mut alpha, &later, "alpha on its second member").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let remotely = drain_requests(&mut remote_upstream);
    assert!(
        remotely
            .iter()
            .any(|(auth, body)| body.contains("alpha on its second member")
                && *auth == format!("Bearer {}", key_of("A"))),
        "{remotely:?}"
    );
    drop((alpha, bravo));
    running.end("-TERM").await;

    // Refused at start, naming the flag: a URL that is no member, an account that is none.
    for (flags, why) in [
        (
            vec!["--app-server-account".to_string(), given.clone()],
            "is not one of the --app-server members",
        ),
        (
            vec![
                "--app-server".to_string(),
                second.url.clone(),
                "--app-server-token-file".to_string(),
                second_token.clone(),
                "--app-server-account".to_string(),
                format!("{}=nobody", second.url),
            ],
            "nobody is no account",
        ),
    ] {
        let output = crate::util::clawbridge()
            .args(["app-server", "--listen", "ws://127.0.0.1:0", "--state-dir"])
            .arg(&fleet.state)
            .arg("--codex-bin")
            .arg(crate::e2e::codex_bin())
            .args(&flags)
            .output()
            .expect("endpoint");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("--app-server-account") && stderr.contains(why),
            "{stderr}"
        );
    }
    drop(second);
}

/// What the replica tests share: a PostgreSQL store, a fleet with client alice, one remote
/// member (a real Codex listener) given to account A, its upstream recorded, and the endpoint
/// flags that name them all (with `--lease-seconds` and `extra`).
struct Replicas {
    fleet: Fleet,
    upstream: tokio::sync::mpsc::Receiver<clawbridge::CapturedRequest>,
    flags: Vec<String>,
    _member: RemoteMember,
    _stub: ResponsesStub,
    _server: crate::util::Postgres,
}

impl Replicas {
    async fn new(lease_seconds: u64, extra: &[&str]) -> Replicas {
        let server = crate::util::Postgres::start();
        let fleet = Fleet::new(&["alice"]).await;
        let (sink, upstream) = tokio::sync::mpsc::channel(4096);
        let stub = ResponsesStub::start_with_sink(StubScript::default(), Some(sink))
            .await
            .expect("stub");
        let member = RemoteMember::start(&stub.base_url());
        let account_a = clawbridge::credential_fingerprint(&format!("Bearer {}", key_of("A")));
        let mut flags: Vec<String> = vec![
            "--store".into(),
            server.url(),
            "--lease-seconds".into(),
            lease_seconds.to_string(),
            "--app-server".into(),
            member.url.clone(),
            "--app-server-token-file".into(),
            member.token_file.display().to_string(),
            "--app-server-account".into(),
            format!("{}={account_a}", member.url),
        ];
        flags.extend(extra.iter().map(|flag| flag.to_string()));
        Replicas {
            fleet,
            upstream,
            flags,
            _member: member,
            _stub: stub,
            _server: server,
        }
    }
}

/// A real `codex app-server --listen ws://127.0.0.1:PORT --ws-auth capability-token` over a
/// home of its own whose model provider is `upstream` (the account's login gives the key),
/// killed on drop.
struct RemoteMember {
    child: std::process::Child,
    url: String,
    home: PathBuf,
    token_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl RemoteMember {
    fn start(upstream: &str) -> RemoteMember {
        let dir = tempfile::tempdir().expect("remote");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(
            home.join("config.toml"),
            clawbridge::offline_account_config(upstream, "gpt-5.5"),
        )
        .expect("config");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "remote-member-token-0123456789").expect("token");
        let port = crate::util::free_port();
        let url = format!("ws://127.0.0.1:{port}");
        let child = crate::util::codex_listener(&home, dir.path(), &url, Some(&token_file));
        crate::util::wait_until("the remote member", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        RemoteMember {
            child,
            url,
            home,
            token_file,
            _dir: dir,
        }
    }
}

impl RemoteMember {
    /// kill -9 and start again on the same address, home and token: a Codex host that
    /// crashed and came back.
    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("port");
        let dir = self.token_file.parent().expect("dir").to_path_buf();
        self.child =
            crate::util::codex_listener(&self.home, &dir, &self.url, Some(&self.token_file));
        crate::util::wait_until("the remote member again", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
    }
}

impl Drop for RemoteMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Leases with fencing across two endpoints on one PostgreSQL store (the "Replicas" issue,
/// item 3), with one remote member both reach (a real Codex listener, given to account A on
/// both): while endpoint A serves alice's thread, B refuses it naming A; A is paused (SIGSTOP)
/// past its lease; alice goes on through B (the lease passes, epoch 2) on the same member with
/// her earlier words; A wakes (SIGCONT) and relays nothing of the turn B ran: its client hears
/// `thread/closed` instead.
#[ignore = "pairs with the Codex CLI and PostgreSQL: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_endpoint_relays_nothing_of_a_thread_another_took() {
    // Every part is bound: the server, the member and the stub live as long as the test.
    let Replicas {
        fleet,
        mut upstream,
        flags,
        _member,
        _stub,
        _server,
    } = Replicas::new(2, &[]).await;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = fleet.start(&flags).await;
    let b = fleet.start(&flags).await;
    let (mut on_a, _) = fleet.connect(&a, "alice", Some("A")).await;
    let thread = new_thread(&mut on_a, &fleet.root).await;
    let done = turn(&mut on_a, &thread, "alice says tulip-0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");

    // A holds the lease (it follows the thread): B refuses it, naming A.
    let (mut on_b, _) = fleet.connect(&b, "alice", Some("A")).await;
    let refused = turn(&mut on_b, &thread, "too early").await;
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("served by another endpoint"), "{refused}");

    // A is paused past its lease; B takes the thread and goes on with it.
    let pid = a.pid();
    let _ = std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let resumed = on_b
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    assert_eq!(
        resumed["result"]["thread"]["id"],
        thread.as_str(),
        "{resumed}"
    );
    while upstream.try_recv().is_ok() {}
    let done = turn(&mut on_b, &thread, "alice says tulip-1 through B").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let mut through_b = Vec::new();
    while let Ok(request) = upstream.try_recv() {
        through_b.push(request.body.to_string());
    }
    assert!(
        through_b
            .iter()
            .any(|body| body.contains("tulip-1 through B") && body.contains("alice says tulip-0")),
        "B's turn ran on the same member with the thread's history"
    );

    // B's status names it, its lease of the thread (epoch 2: it passed once) and the fleet's
    // live holders.
    let status = b.status().await;
    let leases = &status["leases"];
    let endpoint = leases["endpoint"].as_str().unwrap_or_default();
    assert!(!endpoint.is_empty(), "{status}");
    assert_eq!(
        leases["held"],
        json!([{"thread": thread, "epoch": 2}]),
        "{status}"
    );
    assert!(leases["fleet"][endpoint].as_u64() >= Some(1), "{status}");
    // Each thread of the fleet with its holder and epoch.
    let listed = leases["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|lease| lease["thread"] == thread.as_str())
        .unwrap_or_else(|| panic!("the thread's lease is listed: {status}"));
    assert_eq!(listed["holder"], endpoint, "{status}");
    assert_eq!(listed["epoch"], 2, "{status}");
    let (code, shown, _) = crate::util::run_cli(&[
        "app-server",
        "status",
        "--listen",
        &format!("ws://{}", b.addr),
        "--token-file",
        &fleet.state.join("app-server-token").display().to_string(),
    ]);
    assert_eq!(code, 0, "{shown}");
    assert!(
        shown.contains(&format!("thread {thread} held by")) && shown.contains("epoch 2"),
        "{shown}"
    );

    // A wakes: nothing of B's turn reaches alice's connection on A; she hears thread/closed.
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status();
    on_a.seen.clear();
    let closed = on_a
        .until("thread/closed", |message| {
            message["method"] == "thread/closed" && message["params"]["threadId"] == thread.as_str()
        })
        .await;
    assert_eq!(closed["params"]["threadId"], thread.as_str());
    assert!(
        on_a.seen
            .iter()
            .all(|message| !message.to_string().contains("tulip-1")),
        "A relayed nothing of B's turn: {:#?}",
        on_a.seen
    );
    drop((on_a, on_b));
    a.end("-KILL").await;
    b.end("-TERM").await;
}

/// Two endpoints on one PostgreSQL store behind a real HAProxy, one remote member (a real Codex
/// listener given to account A on both): alice's agent reaches endpoint A through HAProxy and
/// runs a turn; A is killed with -9; the agent reconnects through HAProxy (to B now) and its
/// next turn resumes the same thread on the same member under its own key, with its earlier
/// words (B waits out A's lease, then takes the thread at epoch 2). Prints the time from A's
/// death to that turn's end.
#[ignore = "pairs with the Codex CLI, PostgreSQL and HAProxy: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_s_death_costs_its_agent_a_reconnect_through_haproxy() {
    let balancer_port = crate::util::free_port();
    let balancer_host = format!("127.0.0.1:{balancer_port}");
    // Every part is bound: the server, the member and the stub live as long as the test.
    let Replicas {
        fleet,
        mut upstream,
        flags,
        _member,
        _stub,
        _server,
    } = Replicas::new(3, &["--allow-host", &balancer_host]).await;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = fleet.start(&flags).await;
    let b = fleet.start(&flags).await;
    let haproxy = crate::services::Haproxy::start_on(balancer_port, &[&a.addr, &b.addr]);
    let (mut agent, _) = fleet.connect_at(&haproxy.addr, "alice", Some("A")).await;
    let thread = new_thread(&mut agent, &fleet.root).await;
    let done = turn(&mut agent, &thread, "alice says tulip-0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let status = a.status().await;
    assert_eq!(
        status["leases"]["held"][0]["thread"],
        thread.as_str(),
        "HAProxy sent the agent to A first: {status}"
    );

    let died = std::time::Instant::now();
    a.end("-KILL").await;
    drop(agent);
    // The agent reconnects as OpenClaw does, through the same address, once HAProxy's checks
    // (every 200 ms) found A down: a second is five of them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (agent, done) = loop {
        let io = tokio::net::TcpStream::connect(&haproxy.addr).await;
        if io.is_ok() {
            let (mut agent, _) = fleet.connect_at(&haproxy.addr, "alice", Some("A")).await;
            let resumed = agent
                .request("thread/resume", json!({"threadId": thread}))
                .await;
            if resumed["result"].is_object() {
                while upstream.try_recv().is_ok() {}
                let done = turn(&mut agent, &thread, "alice says tulip-1 after A died").await;
                break (agent, done);
            }
            assert!(tokio::time::Instant::now() < deadline, "{resumed}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let took = died.elapsed();
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let after = drain_requests(&mut upstream);
    assert!(
        after
            .iter()
            .any(|(auth, body)| body.contains("tulip-1 after A died")
                && body.contains("alice says tulip-0")
                && *auth == format!("Bearer {}", key_of("A"))),
        "the same thread on the same member, on A's key, with its history"
    );
    eprintln!(
        "replicas: from endpoint A's death (kill -9) to the agent's next turn completed through HAProxy and B: {:.2} s (lease 3 s)",
        took.as_secs_f64()
    );
    drop(agent);
    b.end("-TERM").await;
    drop(haproxy);
}

/// What one agent of the replica soak saw.
#[derive(Debug, Default)]
struct SoakCounts {
    connections: u64,
    turns_started: u64,
    turns_completed: u64,
    /// Ended as failed by the endpoint (the member died under the turn): an answer.
    turns_failed: u64,
    /// The connection closed under the turn (its endpoint was killed): the agent goes on.
    turns_cut: u64,
    /// Started and never answered within a minute, the connection open: must stay 0.
    unanswered: u64,
    /// Each unanswered turn: its text, its thread, and when its `turn/start` was answered
    /// (seconds into the soak), for the failure's message.
    unanswered_turns: Vec<(String, String, f64)>,
    /// Refused while another endpoint's lease ran out, or while the member was down.
    refusals: u64,
}

/// One agent of the replica soak: connects through the balancer afresh for every turn (so its
/// thread moves between the endpoints), resumes its thread, runs its next numbered turn, until
/// `stop` (then finishes the turn it is on). Its thread and counts.
async fn soak_agent(
    balancer: String,
    token: String,
    account: &'static str,
    root: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (String, u64, SoakCounts) {
    let limit = Duration::from_secs(60);
    let began = std::time::Instant::now();
    let mut counts = SoakCounts::default();
    let mut thread: Option<String> = None;
    let mut next = 0u64;
    let pause = || tokio::time::sleep(Duration::from_millis(250));
    loop {
        if stop.load(std::sync::atomic::Ordering::SeqCst) && next >= 3 {
            break;
        }
        let Ok(io) = tokio::net::TcpStream::connect(&balancer).await else {
            pause().await;
            continue;
        };
        let Ok(mut ws) = ws_client(io, &balancer, &token).await else {
            pause().await;
            continue;
        };
        let login = json!({"type": "apiKey", "apiKey": key_of(account)});
        let ready = async {
            let init = ws
                .try_request(
                    "initialize",
                    json!({"clientInfo": {"name": "soak", "version": "1.0"}}),
                    limit,
                )
                .await?;
            ws.try_send(json!({"method": "initialized"})).await;
            let login = ws.try_request("account/login/start", login, limit).await?;
            Ok::<bool, bool>(init["result"].is_object() && login["result"].is_object())
        };
        if ready.await != Ok(true) {
            pause().await;
            continue;
        }
        counts.connections += 1;
        let id = match &thread {
            Some(id) => {
                match ws
                    .try_request("thread/resume", json!({"threadId": id}), limit)
                    .await
                {
                    Ok(answer) if answer["result"].is_object() => id.clone(),
                    Ok(answer) => {
                        let why = answer["error"]["message"].as_str().unwrap_or_default();
                        assert!(
                            !why.contains("belongs to"),
                            "{account}'s own thread refused as another's: {answer}"
                        );
                        counts.refusals += 1;
                        pause().await;
                        continue;
                    }
                    Err(_) => {
                        pause().await;
                        continue;
                    }
                }
            }
            None => {
                match ws
                    .try_request(
                        "thread/start",
                        json!({"cwd": root, "modelProvider": "openai"}),
                        limit,
                    )
                    .await
                {
                    Ok(answer) if answer["result"].is_object() => {
                        let id = answer["result"]["thread"]["id"]
                            .as_str()
                            .expect("thread id")
                            .to_string();
                        thread = Some(id.clone());
                        id
                    }
                    _ => {
                        counts.refusals += 1;
                        pause().await;
                        continue;
                    }
                }
            }
        };
        let text = format!("soak agent {account} turn {next}");
        let started = ws
            .try_request(
                "turn/start",
                json!({"threadId": id, "input": [{"type": "text", "text": text}]}),
                limit,
            )
            .await;
        let answered_at = began.elapsed().as_secs_f64();
        match started {
            Ok(answer) if answer["result"].is_object() => counts.turns_started += 1,
            Ok(_) => {
                counts.refusals += 1;
                pause().await;
                continue;
            }
            Err(_) => {
                pause().await;
                continue;
            }
        }
        let ended = loop {
            match ws.try_next(limit).await {
                Ok(message)
                    if message["method"] == "turn/completed"
                        && message["params"]["threadId"] == id.as_str() =>
                {
                    break Ok(message)
                }
                Ok(_) => {}
                Err(closed) => break Err(closed),
            }
        };
        match ended {
            Ok(done) if done["params"]["turn"]["status"] == "completed" => {
                counts.turns_completed += 1;
                next += 1;
            }
            Ok(_) => counts.turns_failed += 1,
            Err(true) => counts.turns_cut += 1,
            Err(false) => {
                eprintln!("soak: {account}'s turn {text:?} on thread {id}: turn/start answered {answered_at:.1} s in, then nothing for {limit:?}");
                counts.unanswered += 1;
                counts
                    .unanswered_turns
                    .push((text, id.clone(), answered_at));
            }
        }
    }
    (thread.expect("a thread"), next, counts)
}

/// The replica soak (the "Replicas" issue, item 6): two endpoints on one PostgreSQL behind a
/// real HAProxy spreading connections round-robin, each account (A, B) given its own remote
/// member (a real Codex listener); alice (A) and bob (B) reconnect for every turn, so their
/// threads pass from endpoint to endpoint. Meanwhile, every three seconds in turn: endpoint 0
/// is killed with -9 and started again on its address, A's member is killed and started again,
/// endpoint 1 likewise, B's member likewise; and both endpoints' statuses are read every 300 ms
/// (one, the other, the first again: a thread passing between two reads is not a double hold).
/// Then: no turn left unanswered on an open connection, no model request on another account's
/// key, no thread held by both endpoints at once, each agent's own thread still its own (the
/// other refused on it) and its last turn carrying its first. The counts are printed
/// (`CLAWBRIDGE_SOAK_SECS`, 12 by default; the closing note's counts are from a longer run);
/// a turn left unanswered is named with its thread, whether the model was sent it, and the
/// kills' times. `CLAWBRIDGE_SOAK_TRANSCRIPTS=DIR` keeps each endpoint's transcript (`DIR/e0`,
/// `DIR/e1`), to follow such a turn.
#[ignore = "pairs with the Codex CLI, PostgreSQL and HAProxy: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_over_two_endpoints_with_kills_answers_every_turn_on_its_own_key() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let secs = soak_secs();
    let server = crate::util::Postgres::start();
    let url = server.url();
    let fleet = Fleet::new(&["alice", "bob"]).await;
    let (sink, mut upstream) = tokio::sync::mpsc::channel(65_536);
    let stub = ResponsesStub::start_with_sink(StubScript::default(), Some(sink))
        .await
        .expect("stub");
    let mut members = [
        RemoteMember::start(&stub.base_url()),
        RemoteMember::start(&stub.base_url()),
    ];
    let balancer_port = crate::util::free_port();
    let balancer = format!("127.0.0.1:{balancer_port}");
    let ports = [crate::util::free_port(), crate::util::free_port()];
    let listens = ports.map(|port| format!("ws://127.0.0.1:{port}"));
    let states = [fleet.state.clone(), fleet.dir.path().join("state-b")];
    let mut flags: Vec<String> = [
        "--store",
        url.as_str(),
        "--allow-host",
        balancer.as_str(),
        "--lease-seconds",
        "2",
        "--app-servers",
        "0",
    ]
    .map(str::to_string)
    .to_vec();
    for (member, account) in members.iter().zip(["A", "B"]) {
        let fingerprint =
            clawbridge::credential_fingerprint(&format!("Bearer {}", key_of(account)));
        flags.extend([
            "--app-server".to_string(),
            member.url.clone(),
            "--app-server-token-file".to_string(),
            member.token_file.display().to_string(),
            "--app-server-account".to_string(),
            format!("{}={fingerprint}", member.url),
        ]);
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let transcripts: Vec<String> = std::env::var("CLAWBRIDGE_SOAK_TRANSCRIPTS")
        .map(|dir| vec![format!("{dir}/e0"), format!("{dir}/e1")])
        .unwrap_or_default();
    let flags_of = |which: usize| -> Vec<&str> {
        let mut flags = flags.clone();
        if let Some(dir) = transcripts.get(which) {
            flags.extend(["--transcript", dir.as_str()]);
        }
        flags
    };
    let mut endpoints = Vec::new();
    for (which, (state, listen)) in states.iter().zip(&listens).enumerate() {
        endpoints.push(Some(fleet.start_at(state, listen, &flags_of(which)).await));
    }
    let backends = ports.map(|port| format!("127.0.0.1:{port}"));
    let haproxy = crate::services::Haproxy::start_balanced(
        balancer_port,
        &[&backends[0], &backends[1]],
        "roundrobin",
    );

    // Both endpoints' leases, read while the soak runs: a thread held by both at once. Two
    // status reads are never one instant, and a thread may pass from one endpoint to the other
    // between them (its client moved, the lease let go and taken): so each round reads one
    // endpoint, the other, then the first again, and counts a thread only when the first held
    // it, under the same epoch, in both of its reads and the other held it in between (in turn
    // each endpoint is the one read twice). A thread two endpoints both believe they hold stays
    // so across the three reads.
    let stop = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (stop, overlaps) = (Arc::clone(&stop), Arc::clone(&overlaps));
        let listens = listens.clone();
        tokio::spawn(async move {
            // The leases an endpoint's status shows held: (thread, epoch).
            let held = |listen: String| async move {
                let addr = clawbridge::ListenAddr::parse(&listen).expect("addr");
                let status = tokio::time::timeout(
                    Duration::from_secs(2),
                    clawbridge::fetch_status(&addr, OPERATOR_TOKEN),
                )
                .await;
                match status {
                    Ok(Ok(status)) => status["leases"]["held"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|lease| {
                            Some((
                                lease["thread"].as_str()?.to_string(),
                                lease["epoch"].as_u64()?,
                            ))
                        })
                        .collect(),
                    _ => std::collections::BTreeSet::<(String, u64)>::new(),
                }
            };
            let mut reads = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let (twice, between) = if reads.is_multiple_of(2) {
                    (0, 1)
                } else {
                    (1, 0)
                };
                let before = held(listens[twice].clone()).await;
                let other = held(listens[between].clone()).await;
                let after = held(listens[twice].clone()).await;
                reads += 1;
                let kept = before.intersection(&after);
                if kept
                    .into_iter()
                    .any(|(thread, _)| other.iter().any(|(held, _)| held == thread))
                {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            reads
        })
    };
    let agents: Vec<_> = [("alice", "A"), ("bob", "B")]
        .into_iter()
        .map(|(client, account)| {
            tokio::spawn(soak_agent(
                balancer.clone(),
                fleet.tokens[client].clone(),
                account,
                fleet.root.clone(),
                Arc::clone(&stop),
            ))
        })
        .collect();

    let began = std::time::Instant::now();
    let (mut endpoint_kills, mut member_kills) = (0, 0);
    // Each kill and restart, and when it was done (seconds into the soak).
    let mut kills: Vec<(String, f64)> = Vec::new();
    let mut event = 0;
    while began.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        match event % 4 {
            0 | 2 => {
                let which = (event % 4) / 2;
                if let Some(running) = endpoints[which].take() {
                    running.end("-KILL").await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                endpoints[which] = Some(
                    fleet
                        .start_at(&states[which], &listens[which], &flags_of(which))
                        .await,
                );
                endpoint_kills += 1;
                kills.push((format!("endpoint {which}"), began.elapsed().as_secs_f64()));
            }
            _ => {
                let which = (event % 4) / 2;
                tokio::task::block_in_place(|| members[which].restart());
                member_kills += 1;
                kills.push((format!("member {which}"), began.elapsed().as_secs_f64()));
            }
        }
        event += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let mut results = Vec::new();
    for agent in agents {
        results.push(
            tokio::time::timeout(Duration::from_secs(120), agent)
                .await
                .expect("each agent finishes its last turn")
                .expect("agent"),
        );
    }
    let reads = watcher.await.expect("watcher");

    // Ownership: each agent's thread is its own; the other is refused on it.
    let alice_thread = results[0].0.clone();
    let Some(running) = endpoints[0].as_ref() else {
        panic!("endpoint 0 runs")
    };
    let (mut bob, _) = fleet.connect(running, "bob", Some("B")).await;
    let refused = bob
        .request("thread/resume", json!({"threadId": alice_thread}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|why| why.contains("belongs to another client")),
        "{refused}"
    );
    drop(bob);

    // Keys and history, from what the model was sent.
    let requests = drain_requests(&mut upstream);
    let mut wrong_keys = 0;
    for (auth, body) in &requests {
        for account in ["A", "B"] {
            if body.contains(&format!("soak agent {account} turn"))
                && *auth != format!("Bearer {}", key_of(account))
            {
                wrong_keys += 1;
            }
        }
    }
    for ((_, last, _), account) in results.iter().zip(["A", "B"]) {
        let last_text = format!("soak agent {account} turn {}", last - 1);
        assert!(
            requests.iter().any(|(_, body)| body.contains(&last_text)
                && body.contains(&format!("soak agent {account} turn 0\""))),
            "{account}'s last turn went on with its first"
        );
    }
    for ((thread, completed, counts), client) in results.iter().zip(["alice", "bob"]) {
        eprintln!("MEASURE: replica soak, {client} on thread {thread}: {completed} turns completed, {counts:?}");
    }
    eprintln!(
        "MEASURE: replica soak over {:.0?}: {endpoint_kills} endpoint kills, {member_kills} member kills, {} model requests, {wrong_keys} on a wrong key, {reads} rounds of lease reads (one endpoint, the other, the first again), {} with a thread held by both",
        began.elapsed(),
        requests.len(),
        overlaps.load(Ordering::SeqCst)
    );
    assert_eq!(wrong_keys, 0, "no model request on another account's key");
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "no thread held by two endpoints"
    );
    for ((_, completed, counts), client) in results.iter().zip(["alice", "bob"]) {
        let sent: Vec<bool> = counts
            .unanswered_turns
            .iter()
            .map(|(text, _, _)| {
                let quoted = format!("{text}\"");
                requests.iter().any(|(_, body)| body.contains(&quoted))
            })
            .collect();
        assert_eq!(
            counts.unanswered, 0,
            "{client}: every turn answered: {counts:?}; the model was sent each unanswered turn: {sent:?}; the soak's kills: {kills:?}"
        );
        assert!(*completed >= 3, "{client} got on: {counts:?}");
    }
    assert!(
        endpoint_kills >= 2 && member_kills >= 2,
        "the soak killed both kinds"
    );
    drop(haproxy);
    for running in endpoints.into_iter().flatten() {
        running.end("-TERM").await;
    }
    drop(members);
}
