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
                {"toolCall": {"name": "exec_command", "arguments": {"cmd": command}}},
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
