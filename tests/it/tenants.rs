//! Tenants of one endpoint, tried as a hostile client, a hostile co-tenant and a prompt-injected
//! model would (the "Tenant isolation" issue): `clawbridge app-server --listen` as operators run
//! it (the CLI, its app-servers in a private view of the machine, an environment holding
//! secrets of its own), four named clients on three accounts, the real Codex, and a loopback
//! upstream that records every model request with its `Authorization`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawbridge::{ResponsesStub, StubScript};
use serde_json::{json, Value};

use crate::endpoint::{turn_completed, ws_client, Client};

/// What the endpoint was given for itself, in its environment: no app-server may pass it on.
const OTEL_SECRET: &str = "otel-header-secret-7d1e0c";
const ENDPOINT_KEY: &str = "sk-endpoint-own-secret-55aa";
/// The operator's own Codex login (the native home's `auth.json`).
const OPERATOR_KEY: &str = "sk-operator-login-secret-9f3b";
/// What alice tells her agent; no other tenant may ever read it.
const ALICE_SECRET: &str = "ALICE-SECRET-tulip-4471";

type Ws = Client<tokio::net::TcpStream>;

struct Tenancy {
    child: tokio::process::Child,
    addr: String,
    state: PathBuf,
    root: PathBuf,
    native: PathBuf,
    operator_token: String,
    tokens: BTreeMap<&'static str, String>,
    upstream: tokio::sync::mpsc::Receiver<clawbridge::CapturedRequest>,
    _dir: tempfile::TempDir,
    _stub: ResponsesStub,
}

fn key_of(account: &str) -> String {
    format!("sk-tenant-{account}-0123456789abcdef")
}

/// `clawbridge client add NAME [--allow ...]`: its token.
fn add_client(state: &Path, name: &str, allow: &[&str]) -> String {
    let mut command = crate::util::clawbridge();
    command
        .args(["client", "add", name, "--state-dir"])
        .arg(state);
    for grant in allow {
        command.args(["--allow", grant]);
    }
    let output = command.output().expect("client add");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

impl Tenancy {
    /// The endpoint (CLI) with `flags`, clients alice, bob and dave (no grants) and carol
    /// (`fs`, `exec`), a workspace root with a folder per client, and the upstream scripted
    /// by `script`.
    async fn start(script: impl FnOnce(&Path, &Path) -> StubScript, flags: &[&str]) -> Tenancy {
        let dir = tempfile::tempdir().expect("dir");
        let state = dir.path().join("state");
        let native = dir.path().join("codex-home");
        let (sink, upstream) = tokio::sync::mpsc::channel(4096);
        let stub = ResponsesStub::start_with_sink(script(&state, &native), Some(sink))
            .await
            .expect("stub");
        let root = dir.path().join("agents");
        for name in ["alice", "bob", "carol", "dave"] {
            std::fs::create_dir_all(root.join(name)).expect("workspace");
        }
        // The operator's own Codex home: the upstream, and a login of the operator's own.
        std::fs::create_dir_all(&native).expect("home");
        std::fs::write(
            native.join("config.toml"),
            clawbridge::offline_account_config(&stub.base_url(), "gpt-5.5"),
        )
        .expect("config");
        crate::util::write_private(
            &native.join("auth.json"),
            &json!({"OPENAI_API_KEY": OPERATOR_KEY}).to_string(),
        );
        let mut tokens = BTreeMap::new();
        for (name, allow) in [
            ("alice", &[][..]),
            ("bob", &[][..]),
            ("carol", &["fs", "exec"][..]),
            ("dave", &[][..]),
        ] {
            tokens.insert(name, add_client(&state, name, allow));
        }
        let operator_token = "tenancy-operator-token-0123456789".to_string();
        crate::util::write_private(&state.join("app-server-token"), &operator_token);
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_clawbridge"))
            .args(["app-server", "--listen", "ws://127.0.0.1:0", "--state-dir"])
            .arg(&state)
            .arg("--workspace-root")
            .arg(&root)
            .arg("--codex-bin")
            .arg(crate::e2e::codex_bin())
            .args(["--app-servers", "4"])
            .args(flags)
            .env("CODEX_HOME", &native)
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("Authorization=Bearer {OTEL_SECRET}"),
            )
            .env("OPENAI_API_KEY", ENDPOINT_KEY)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .current_dir(dir.path())
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
        Tenancy {
            child,
            addr: line.trim().to_string(),
            state,
            root: root.canonicalize().expect("root"),
            native,
            operator_token,
            tokens,
            upstream,
            _dir: dir,
            _stub: stub,
        }
    }

    /// A connection of `name` (a named client, or the operator), logged in with `account`'s key.
    async fn connect(&self, name: &str, account: Option<&str>) -> Ws {
        let token = match name {
            "operator" => self.operator_token.clone(),
            name => self.tokens[name].clone(),
        };
        let io = tokio::net::TcpStream::connect(&self.addr)
            .await
            .expect("connect");
        let mut client = ws_client(io, &self.addr, &token).await.expect("upgraded");
        client.initialize().await;
        if let Some(account) = account {
            let login = client
                .request(
                    "account/login/start",
                    json!({"type": "apiKey", "apiKey": key_of(account)}),
                )
                .await;
            assert_eq!(login["result"]["type"], "apiKey", "{name}: {login}");
        }
        client
    }

    /// Every model request so far, by whose key it carried.
    fn requests(&mut self) -> Vec<(String, String)> {
        let mut seen = Vec::new();
        while let Ok(request) = self.upstream.try_recv() {
            let auth = request
                .headers
                .get("authorization")
                .cloned()
                .unwrap_or_default();
            seen.push((auth, request.body.to_string()));
        }
        seen
    }

    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

/// A thread in `cwd` and one turn with `text` on it, to its end: the thread's start answer.
async fn thread_with_turn(client: &mut Ws, cwd: &Path, text: &str) -> Value {
    let started = client
        .request(
            "thread/start",
            json!({"cwd": cwd, "modelProvider": "openai"}),
        )
        .await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    turn(client, &thread, text).await;
    started
}

async fn turn(client: &mut Ws, thread: &str, text: &str) {
    let answer = client
        .request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
        )
        .await;
    assert!(answer["result"]["turn"]["id"].is_string(), "{answer}");
    let done = client.until("turn/completed", turn_completed(thread)).await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    client.seen.clear();
}

/// Every request Codex 0.169.0 and 0.171.0 offer, from the vendored schemas.
fn every_request() -> Vec<String> {
    let mut names = Vec::new();
    for version in ["0.169.0", "0.171.0"] {
        let path = crate::util::repo_root()
            .join("fixtures/codex-schema")
            .join(version)
            .join("ClientRequest.json");
        let union: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("schema")).expect("json");
        for variant in union["oneOf"].as_array().expect("oneOf") {
            let method = &variant["properties"]["method"];
            let name = method["enum"][0]
                .as_str()
                .or_else(|| method["const"].as_str())
                .expect("name");
            if !names.iter().any(|known| known == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The secrets no client or model of another tenant may ever read, by what they are.
fn secrets(tenancy: &Tenancy, except: &str) -> Vec<(String, String)> {
    let mut secrets = vec![
        (
            "the operator's token".to_string(),
            tenancy.operator_token.clone(),
        ),
        (
            "the operator's Codex login".to_string(),
            OPERATOR_KEY.to_string(),
        ),
        (
            "the endpoint's exporter header".to_string(),
            OTEL_SECRET.to_string(),
        ),
        (
            "the endpoint's own provider key".to_string(),
            ENDPOINT_KEY.to_string(),
        ),
    ];
    for account in ["A", "B", "C"] {
        if account != except {
            secrets.push((format!("account {account}'s key"), key_of(account)));
        }
    }
    for (name, token) in &tenancy.tokens {
        secrets.push((format!("client {name}'s token"), token.clone()));
    }
    secrets
}

fn leaks(text: &str, secrets: &[(String, String)]) -> Vec<String> {
    secrets
        .iter()
        .filter(|(_, secret)| text.contains(secret.as_str()))
        .map(|(what, _)| what.clone())
        .collect()
}

/// Protection: the method policy, the workspace roots and the private view. Alice runs a turn
/// on account A. Bob (account B) sends every request of Codex's API at alice's thread and at
/// the state dir; dave, another named client on alice's own account, lists, searches, resumes
/// and forks by rollout path; carol (granted `fs` and `exec`, account C) reads the state dir
/// through Codex's own methods; and carol's model, prompt-injected, runs a command under a
/// `danger-full-access` ceiling that reads every account's `auth.json`, the token files, its
/// environment and every process's. None of it reaches another tenant's secret or alice's
/// words; alice's thread still runs on her own key afterwards.
/// Send every request of `requests` (at most 48 in flight, within the endpoint's per-connection
/// bound), and read the answers: each method's answer, or `None` when none came within 15 s of
/// the last one (a hang is no leak).
async fn sweep(client: &mut Ws, requests: &[(String, Value)]) -> BTreeMap<String, Option<Value>> {
    let mut answers = BTreeMap::new();
    for batch in requests.chunks(48) {
        let mut pending = BTreeMap::new();
        for (method, params) in batch {
            let id = client.next_id;
            client.next_id += 1;
            client
                .send(json!({"id": id, "method": method, "params": params}))
                .await;
            pending.insert(id, method.clone());
        }
        while !pending.is_empty() {
            let Ok(Some(message)) =
                tokio::time::timeout(Duration::from_secs(15), client.next()).await
            else {
                break;
            };
            if message.get("method").is_some() {
                continue;
            }
            if let Some(method) = message["id"].as_i64().and_then(|id| pending.remove(&id)) {
                answers.insert(method, Some(message));
            }
        }
        for method in pending.into_values() {
            answers.insert(method, None);
        }
        client.seen.clear();
    }
    answers
}

/// How a sweep went: refused by the endpoint, answered by Codex, or no answer.
fn outcome(answer: &Option<Value>) -> &'static str {
    match answer {
        None => "no answer",
        Some(answer) => match answer["error"]["message"].as_str() {
            Some(message) if message.starts_with("clawbridge:") => "refused",
            Some(_) => "Codex error",
            None => "answered",
        },
    }
}

/// Protection: the method policy, the workspace roots and the private view. Alice runs a turn
/// on account A. Bob (account B) sends every request of Codex's API at alice's thread, then
/// again aimed at the state dir; dave, another named client on alice's own account, lists,
/// searches, reads, resumes and forks (by id and by rollout path); carol (granted `fs` and
/// `exec`, account C) reads the state dir through Codex's own methods; and carol's model,
/// prompt-injected, runs a command under a `danger-full-access` ceiling that reads every
/// account's `auth.json`, the token files, the operator's login, its environment and every
/// process's. Nothing of it reaches another tenant's secret or alice's words; alice's thread
/// still runs, on her own key.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tenant_reaches_another_by_any_method_file_or_variable() {
    let injected = |state: &Path, native: &Path| {
        let (s, n) = (state.display(), native.display());
        let command = format!(
            "echo RAN-MARKER; cat {s}/app-server-token {s}/clients.json; \
             cat {s}/app-server-homes/*/auth.json; ls -la {s} {s}/app-server-homes; \
             cat {n}/auth.json; cat \"$CODEX_HOME/auth.json\"; env; \
             for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; done; echo END-MARKER"
        );
        serde_json::from_value::<StubScript>(json!({"responses": [], "byInput": [
            {"contains": "INJECTED", "responses": [
                // Not a login shell: the machine's shell start-up files are not the test's.
                {"toolCall": {"name": "exec_command", "arguments": {"cmd": command, "login": false}}},
                {"text": "done reading"},
            ]},
        ]}))
        .expect("script")
    };
    let mut tenancy = Tenancy::start(injected, &["--max-sandbox", "danger-full-access"]).await;
    let (root, state) = (tenancy.root.clone(), tenancy.state.clone());

    // Alice, on account A, tells her agent a secret.
    let mut alice = tenancy.connect("alice", Some("A")).await;
    let started = thread_with_turn(
        &mut alice,
        &root.join("alice"),
        &format!("remember {ALICE_SECRET}"),
    )
    .await;
    let theirs = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    let rollout = started["result"]["thread"]["path"]
        .as_str()
        .map(PathBuf::from);

    // Dave shares alice's account: her thread is in his app-servers' Codex home, yet he can
    // neither list, find, read, resume nor fork it.
    let mut dave = tenancy.connect("dave", Some("A")).await;
    let listed = dave.request("thread/list", json!({})).await;
    assert!(listed["result"]["data"].is_array(), "{listed}");
    assert!(!listed.to_string().contains(&theirs), "{listed}");
    let searched = dave
        .request("thread/search", json!({"searchTerm": ALICE_SECRET}))
        .await;
    assert!(
        !searched.to_string().contains(&theirs) && searched["result"]["data"] == json!([]),
        "{searched}"
    );
    if let Some(rollout) = &rollout {
        for method in ["thread/resume", "thread/fork"] {
            let refused = dave
                .request(
                    method,
                    json!({"threadId": "0199a9c0-0000-7000-8000-000000000000", "path": rollout}),
                )
                .await;
            let why = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(why.contains("rollout `path`"), "{method}: {refused}");
        }
    }
    for method in [
        "thread/resume",
        "thread/read",
        "thread/fork",
        "thread/turns/list",
        "turn/start",
    ] {
        let refused = dave
            .request(method, json!({"threadId": theirs, "input": []}))
            .await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("belongs to another client"),
            "{method}: {refused}"
        );
    }

    // Nor by naming a thread of his own and hers in one request: Codex reads the last of two
    // `threadId`s, so the endpoint refuses params that give a key twice (without that, the
    // ownership check read none and Codex read hers).
    let own = thread_with_turn(&mut dave, &root.join("dave"), "dave's own words").await;
    let own = own["result"]["thread"]["id"]
        .as_str()
        .expect("dave's thread")
        .to_string();
    for method in ["thread/read", "thread/turns/list", "thread/resume"] {
        let refused = dave
            .request_text(
                method,
                &format!(
                    r#"{{"threadId": "{own}", "includeTurns": true, "threadId": "{theirs}"}}"#
                ),
            )
            .await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("gives `threadId` twice") && !refused.to_string().contains(ALICE_SECRET),
            "{method}: {refused}"
        );
    }

    // Bob, on account B, tries every request of Codex's API at alice's thread, then aimed at
    // the state dir and the operator's files.
    let mut bob = tenancy.connect("bob", Some("B")).await;
    let token_file = state.join("app-server-token");
    let at_thread = json!({
        "threadId": theirs, "searchTerm": ALICE_SECRET, "query": ALICE_SECRET,
        "input": [{"type": "text", "text": "hello"}], "includeTurns": true,
        "expectedTurnId": "x", "turnId": "x", "name": "renamed",
    });
    let at_files = json!({
        "path": token_file, "cwd": state, "cwds": [state], "roots": [state],
        "sourcePath": token_file, "destinationPath": root.join("bob").join("stolen"),
        "command": ["cat", token_file], "searchTerm": ALICE_SECRET, "query": "auth",
        "keyPath": "model", "value": "x", "mergeStrategy": "replace", "edits": [],
        "dataBase64": "", "includeHome": true, "watchId": "w", "sessionId": "s",
        "processHandle": "h", "processId": "p",
    });
    let methods = every_request();
    let mut outcomes: BTreeMap<&'static str, usize> = BTreeMap::new();
    let not_bob = {
        let mut secrets = secrets(&tenancy, "B");
        secrets.push(("alice's words".into(), ALICE_SECRET.into()));
        secrets.retain(|(what, _)| what != "client bob's token");
        secrets
    };
    for params in [&at_thread, &at_files] {
        let requests: Vec<(String, Value)> = methods
            .iter()
            .filter(|method| method.as_str() != "account/logout")
            .map(|method| (method.clone(), params.clone()))
            .collect();
        for (method, answer) in sweep(&mut bob, &requests).await {
            *outcomes.entry(outcome(&answer)).or_default() += 1;
            let text = answer.map(|answer| answer.to_string()).unwrap_or_default();
            let leaked = leaks(&text, &not_bob);
            assert!(leaked.is_empty(), "bob's {method} read {leaked:?}: {text}");
        }
    }
    eprintln!("bob's {} requests: {outcomes:?}", methods.len() * 2);

    // Carol may use files and commands: within the roots, and in her app-servers' own view.
    let mut carol = tenancy.connect("carol", Some("C")).await;
    let not_carol = {
        let mut secrets = secrets(&tenancy, "C");
        secrets.push(("alice's words".into(), ALICE_SECRET.into()));
        secrets.retain(|(what, _)| what != "client carol's token");
        secrets
    };
    let refused = carol
        .request("fs/readFile", json!({"path": token_file}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|why| why.contains("workspace roots")),
        "{refused}"
    );
    let s = state.display();
    let read = format!(
        "cat {s}/app-server-token {s}/app-server-homes/*/auth.json {}/auth.json; env; echo EXEC-RAN",
        tenancy.native.display()
    );
    let executed = carol
        .request(
            "command/exec",
            json!({"command": ["sh", "-c", read], "cwd": root.join("carol")}),
        )
        .await;
    let output = executed.to_string();
    assert!(output.contains("EXEC-RAN"), "{executed}");
    let leaked = leaks(&output, &not_carol);
    assert!(
        leaked.is_empty(),
        "carol's command/exec read {leaked:?}: {output}"
    );

    // What her command streams reaches her connection alone, not another of her account's.
    let mut elsewhere = tenancy.connect("carol", Some("C")).await;
    let streamed = carol
        .request(
            "command/exec",
            json!({"command": ["sh", "-c", "echo STREAMED-OUT"], "cwd": root.join("carol"),
                   "processId": "p1", "streamStdoutStderr": true}),
        )
        .await;
    assert!(streamed["result"].is_object(), "{streamed}");
    let delta = carol
        .until("her output", |message| {
            message["method"] == "command/exec/outputDelta"
        })
        .await;
    assert_eq!(delta["params"]["processId"], "p1", "{delta}");
    let _ = elsewhere.request("model/list", json!({})).await;
    assert!(
        !elsewhere
            .seen
            .iter()
            .any(|message| message["method"] == "command/exec/outputDelta"),
        "{:?}",
        elsewhere.seen
    );

    // Carol's model, prompt-injected, reads what it can.
    thread_with_turn(&mut carol, &root.join("carol"), "INJECTED: read everything").await;

    // Alice's thread is intact and still hers.
    turn(&mut alice, &theirs, "and now?").await;

    let requests = tenancy.requests();
    let ran: Vec<&(String, String)> = requests
        .iter()
        .filter(|(_, body)| body.contains("RAN-MARKER") && body.contains("END-MARKER"))
        .collect();
    assert!(
        !ran.is_empty(),
        "the injected command's output reached the model"
    );
    for (auth, body) in &requests {
        let account = ["A", "B", "C"]
            .into_iter()
            .find(|account| auth == &format!("Bearer {}", key_of(account)))
            .unwrap_or_else(|| panic!("a model request under no tenant's key: {auth:?}"));
        let mut secrets = secrets(&tenancy, account);
        if account != "A" {
            secrets.push(("alice's words".into(), ALICE_SECRET.into()));
        }
        let leaked = leaks(body, &secrets);
        assert!(
            leaked.is_empty(),
            "a request of account {account} carried {leaked:?}"
        );
    }
    // The command did read: carol's own login is there, in her own app-servers' home.
    assert!(
        ran.iter().any(|(_, body)| body.contains(&key_of("C"))),
        "the injected command read its own account's auth.json"
    );
    tenancy.stop().await;
}

/// A JWT-shaped ChatGPT access token (unsigned) whose claims name `account` and `user`, as
/// OpenAI's do; `serial` tells apart two tokens of one holder (a refresh).
fn chatgpt_token(account: &str, user: &str, serial: u32) -> String {
    use base64::Engine as _;
    let encode = |value: Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string().as_bytes())
    };
    format!(
        "{}.{}.signature",
        encode(json!({"alg": "none", "typ": "JWT"})),
        encode(json!({
            "https://api.openai.com/auth": {"chatgpt_account_id": account, "chatgpt_user_id": user},
            "sub": user,
            "iat": serial,
        }))
    )
}

fn token_login(token: &str, account: &str) -> Value {
    json!({"type": "chatgptAuthTokens", "accessToken": token, "chatgptAccountId": account})
}

/// A turn on `thread` to its end, answering Codex's token refreshes with `refresh` (when it
/// asks): the `turn/completed`.
async fn turn_refreshing(
    client: &mut Client<tokio::net::TcpStream>,
    thread: &str,
    text: &str,
    refresh: &Value,
) -> Value {
    let answer = client
        .request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
        )
        .await;
    assert!(answer["result"]["turn"]["id"].is_string(), "{answer}");
    loop {
        let message = client.next().await.expect("until the turn ends");
        if message["method"] == "account/chatgptAuthTokens/refresh" {
            client
                .send(json!({"id": message["id"], "result": refresh}))
                .await;
        }
        if turn_completed(thread)(&message) {
            client.seen.clear();
            return message;
        }
    }
}

/// Protection: a ChatGPT-token login is its token's holder's account. Two users of one ChatGPT
/// workspace (one account id) are two accounts: the second user's login neither joins the
/// first's account nor replaces the first's tokens, and cannot reach her thread; a token of
/// another account naming hers is refused. When Codex asks for a fresh token (it got 401), the
/// holder's own refresh goes through and the next model request carries it; a refresh
/// answered with another user's token is refused, and no request of hers goes out with it.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_login_is_its_holder_s_and_refreshes_stay_the_holder_s() {
    let script: StubScript = serde_json::from_value(json!({"responses": [], "byInput": [
        {"contains": "victim refresh", "responses": [{"httpStatus": 401}, {"text": "refreshed"}]},
        {"contains": "victim stolen refresh", "responses": [{"httpStatus": 401}, {"text": "no"}]},
    ]}))
    .expect("script");
    let mut accounts = crate::endpoint_accounts::accounts_endpoint_scripted(
        2,
        1,
        script,
        |pool| pool,
        |settings| settings,
    )
    .await;
    let (victim_v1, victim_v2) = (
        chatgpt_token("acct-1", "user-v", 1),
        chatgpt_token("acct-1", "user-v", 2),
    );
    let attacker = chatgpt_token("acct-1", "user-x", 1);
    let mut victim = crate::endpoint::tcp_client(&accounts.endpoint).await;
    victim.initialize().await;
    let login = victim
        .request("account/login/start", token_login(&victim_v1, "acct-1"))
        .await;
    assert!(login["result"].is_object(), "{login}");
    let started = victim
        .request("thread/start", json!({"modelProvider": "openai"}))
        .await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    turn_refreshing(&mut victim, &thread, "victim round 0", &json!({})).await;

    // A colleague in the same workspace, with her own token, naming the same account id.
    let mut colleague = crate::endpoint::tcp_client(&accounts.endpoint).await;
    colleague.initialize().await;
    let login = colleague
        .request("account/login/start", token_login(&attacker, "acct-1"))
        .await;
    assert!(login["result"].is_object(), "{login}");
    let stolen = colleague
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    let why = stolen["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("belongs to another account"), "{stolen}");
    // A token of another account that names the victim's is refused.
    let forged = colleague
        .request(
            "account/login/start",
            token_login(&chatgpt_token("acct-2", "user-x", 1), "acct-1"),
        )
        .await;
    let why = forged["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("not the account the access token"), "{forged}");

    // The victim's next turn still goes out with her own token.
    turn_refreshing(&mut victim, &thread, "victim round 1", &json!({})).await;
    // Codex gets 401 and asks for a fresh token: one answered with the colleague's token is
    // refused (the turn fails, nothing goes out with it).
    turn_refreshing(
        &mut victim,
        &thread,
        "victim stolen refresh",
        &json!({"accessToken": attacker, "chatgptAccountId": "acct-1"}),
    )
    .await;
    // Her own refresh is taken: the retry carries it.
    let refreshed = turn_refreshing(
        &mut victim,
        &thread,
        "victim refresh",
        &json!({"accessToken": victim_v2, "chatgptAccountId": "acct-1"}),
    )
    .await;
    assert_eq!(
        refreshed["params"]["turn"]["status"], "completed",
        "{refreshed}"
    );

    let mut by_text: BTreeMap<String, Vec<String>> = BTreeMap::new();
    while let Ok(request) = accounts.upstream.try_recv() {
        let body = request.body.to_string();
        let auth = request
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default();
        // A request carries the thread's history: its turn is the newest message it holds.
        let round = [
            "victim round 0",
            "victim round 1",
            "victim stolen refresh",
            "victim refresh",
        ]
        .into_iter()
        .rev()
        .find(|text| body.contains(text))
        .unwrap_or("other");
        by_text.entry(round.to_string()).or_default().push(auth);
    }
    let bearer = |token: &str| format!("Bearer {token}");
    assert_eq!(
        by_text["victim round 0"],
        vec![bearer(&victim_v1)],
        "{by_text:#?}"
    );
    assert_eq!(
        by_text["victim round 1"],
        vec![bearer(&victim_v1)],
        "{by_text:#?}"
    );
    assert_eq!(
        by_text["victim refresh"],
        vec![bearer(&victim_v1), bearer(&victim_v2)],
        "the 401, then the retry with the holder's refreshed token: {by_text:#?}"
    );
    assert!(
        by_text
            .values()
            .flatten()
            .all(|auth| *auth != bearer(&attacker)),
        "a request of the victim's went out with the colleague's token: {by_text:#?}"
    );
    accounts.endpoint.stop().await;
}

/// Protection: threads with no turn hold their app-server for a bound only. Two clients (the
/// native login and account A) each hold a turn-less `thread/start` on one of the two
/// members; a third account that logs in gets a member once the bound has passed (before, it
/// was refused after 20 s), and the client whose app-server was stopped to make room hears
/// `thread/closed` for the thread that went with it.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_threads_cannot_lock_another_account_out() {
    let grace = Duration::from_secs(2);
    let accounts = crate::endpoint_accounts::accounts_endpoint_scripted(
        2,
        1,
        StubScript::default(),
        |pool| pool,
        |settings| clawbridge::EndpointSettings {
            fresh_thread_grace: grace,
            ..settings
        },
    )
    .await;
    let login = |account: &str| json!({"type": "apiKey", "apiKey": key_of(account)});
    let mut holders = Vec::new();
    let held_since = std::time::Instant::now();
    for account in [None, Some("A")] {
        let mut holder = crate::endpoint::tcp_client(&accounts.endpoint).await;
        holder.initialize().await;
        if let Some(account) = account {
            holder.request("account/login/start", login(account)).await;
        }
        let started = holder
            .request("thread/start", json!({"modelProvider": "openai"}))
            .await;
        let thread = started["result"]["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{started}"))
            .to_string();
        holders.push((holder, thread));
    }
    let ready = accounts
        .endpoint
        .members()
        .into_iter()
        .filter(|member| member.state == clawbridge::MemberState::Ready)
        .count();
    assert_eq!(ready, 2, "each member holds a turn-less thread");
    let mut newcomer = crate::endpoint::tcp_client(&accounts.endpoint).await;
    newcomer.initialize().await;
    let began = std::time::Instant::now();
    let login = newcomer.request("account/login/start", login("B")).await;
    assert_eq!(login["result"]["type"], "apiKey", "{login}");
    let waited = began.elapsed();
    // Room came once the holders' threads had had their grace, well within the wait.
    assert!(
        held_since.elapsed() >= grace && waited < clawbridge::FleetConfig::DEFAULT_WAIT_FOR_ROOM,
        "the newcomer waited {waited:?}"
    );
    let started = newcomer
        .request("thread/start", json!({"modelProvider": "openai"}))
        .await;
    assert!(started["result"]["thread"]["id"].is_string(), "{started}");
    // One holder's app-server made the room: its thread is closed for it.
    let mut closed = 0;
    for (holder, thread) in holders.iter_mut() {
        let heard = tokio::time::timeout(
            Duration::from_secs(5),
            holder.until("thread/closed", |message| {
                message["method"] == "thread/closed"
                    && message["params"]["threadId"] == thread.as_str()
            }),
        )
        .await;
        closed += usize::from(heard.is_ok());
    }
    assert_eq!(closed, 1, "one holder's thread went with its app-server");
    accounts.endpoint.stop().await;
}

/// Run `script` with `sh` in the jail the endpoint gives an app-server (`clawbridge-runtime
/// __jail`), as `as_user` (`setpriv` arguments) or as this user: its exit code and output.
fn jailed(
    helper: &Path,
    hide: &Path,
    keep: &Path,
    script: &str,
    as_user: &[&str],
) -> (i32, String) {
    let mut command = if as_user.is_empty() {
        std::process::Command::new(helper)
    } else {
        let mut setpriv = std::process::Command::new("setpriv");
        setpriv.args(as_user).arg(helper);
        setpriv
    };
    let output = command
        .args(["__jail", "--hide"])
        .arg(hide)
        .arg("--keep")
        .arg(keep)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("the jail's helper");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// Protection: the private view itself (no Codex needed). Inside it a hidden folder is empty
/// and read-only, a kept folder beneath it is there and writable, the covers cannot be taken
/// off (not even by root), only the jail's own processes are visible, and what it left running
/// ends with it; as root and, through a user namespace, as an unprivileged user.
#[test]
fn the_jail_hides_what_it_must_keeps_what_it_may_and_ends_what_it_started() {
    let dir = tempfile::tempdir_in("/tmp").expect("dir");
    let state = dir.path().join("state");
    let home = state.join("homes").join("mine");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(state.join("homes").join("theirs")).expect("theirs");
    std::fs::write(state.join("homes/theirs/auth.json"), "THEIR-KEY").expect("key");
    std::fs::write(state.join("token"), "OPERATOR-TOKEN").expect("token");
    std::fs::write(home.join("auth.json"), "MY-KEY").expect("mine");
    let marker = dir.path().join("left-running");
    let s = state.display();
    let script = format!(
        "cat {s}/token {s}/homes/theirs/auth.json 2>/dev/null; cat {h}/auth.json; \
         echo written > {h}/note && echo WROTE-HOME; touch {s}/planted 2>/dev/null || echo COVER-READ-ONLY; \
         umount {s} 2>/dev/null; umount -l {s} 2>/dev/null; cat {s}/token 2>/dev/null; \
         echo PROCS $(ls /proc | grep -c '^[0-9]'); (sleep 30; touch {m}) & echo STARTED",
        h = home.display(),
        m = marker.display()
    );
    let helper = PathBuf::from(env!("CARGO_BIN_EXE_clawbridge-runtime"));
    let (code, out) = jailed(&helper, &state, &home, &script, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("MY-KEY") && out.contains("WROTE-HOME"),
        "{out}"
    );
    assert!(
        !out.contains("THEIR-KEY") && !out.contains("OPERATOR-TOKEN"),
        "{out}"
    );
    assert!(
        out.contains("COVER-READ-ONLY") && out.contains("STARTED"),
        "{out}"
    );
    let processes: usize = out
        .split("PROCS ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .expect("a process count");
    assert!(processes <= 5, "only the jail's own processes: {out}");
    assert!(!state.join("planted").exists());
    assert_eq!(
        std::fs::read_to_string(home.join("note")).expect("note"),
        "written\n"
    );
    // As an unprivileged user, through a user namespace (root runs it as `nobody`).
    if rustix_is_root() {
        let copy = dir.path().join("helper");
        std::fs::copy(&helper, &copy).expect("copy the helper");
        let chown = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir.path())
            .status()
            .expect("chown");
        assert!(chown.success());
        let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
        // The copy was just written: a child another test forks in that moment holds its write
        // descriptor until it execs, and exec of the copy then fails with ETXTBSY. That race is
        // the harness's, not the jail's: try again while it is the answer.
        let mut attempt = 0;
        let (code, out) = loop {
            let (code, out) = jailed(&copy, &state, &home, &script, &nobody);
            attempt += 1;
            if !(code == 126 && out.contains("Text file busy")) || attempt == 20 {
                break (code, out);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("MY-KEY") && !out.contains("THEIR-KEY"),
            "{out}"
        );
        assert!(
            !out.contains("OPERATOR-TOKEN") && out.contains("COVER-READ-ONLY"),
            "{out}"
        );
    }
    // The background `sleep` ended with the jail: it never writes its marker.
    std::thread::sleep(Duration::from_millis(200));
    let left = std::process::Command::new("pgrep")
        .args(["-f", &format!("touch {}", marker.display())])
        .output()
        .expect("pgrep");
    assert!(left.stdout.is_empty(), "a process outlived its jail");
}

fn rustix_is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout == b"0\n")
}
