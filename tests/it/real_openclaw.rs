//! Real OpenClaw in the loop: OpenClaw 2026.9.6 with its Codex plugin -> `clawbridge app-server
//! --offline` in the Codex slot -> the real Codex -> clawbridge's loopback model stub.
//!
//! `scripts/test-openclaw` installs OpenClaw, Node 24 and the plugin (cached in .tools/) and runs
//! these: the stdio slot's turns through `scripts/openclaw-run` (a throwaway HOME with the
//! minimal openclaw.json), most of them to a Gateway it keeps running in that HOME
//! (`--gateway`), and the WebSocket endpoint's through the team recipe's one Gateway with two
//! agents (`scripts/openclaw-team`): each OpenClaw process loads and copies its plugins anew
//! (about 40 s of CPU), a turn sent to a running Gateway costs about 3. They are #[ignore]d for a bare `cargo test` (a 1.2 GB
//! install); `scripts/test` runs them through `scripts/test-openclaw`.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::util::*;

/// Every value under `key` anywhere in `value`.
fn find_all<'a>(value: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            for (name, item) in map {
                if name == key {
                    out.push(item);
                }
                find_all(item, key, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| find_all(item, key, out)),
        _ => {}
    }
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    let mut found = Vec::new();
    find_all(value, key, &mut found);
    found
        .into_iter()
        .filter_map(|value| value.as_str().map(str::to_string))
        .collect()
}

/// One `openclaw agent --local --json` turn through the proxy; OpenClaw's JSON result.
fn openclaw_turn(out: &Path, extra: &[&str], message: &str) -> Value {
    let output = Command::new(repo_root().join("scripts/openclaw-run"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .arg("--")
        .arg(message)
        .env("CLAWBRIDGE_BIN", env!("CARGO_BIN_EXE_clawbridge"))
        .output()
        .expect("scripts/openclaw-run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "openclaw-run failed ({}):\n{stderr}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    // OpenClaw may print log lines before its JSON document.
    let start = stdout.find("\n{").map_or(0, |at| at + 1);
    serde_json::from_str(&stdout[start..])
        .unwrap_or_else(|error| panic!("OpenClaw's --json output: {error}\n{stdout}\n{stderr}"))
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// The thread files of a transcript folder (everything but `connection` and `conformance`).
fn thread_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("transcript folder")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "jsonl")
                && !matches!(
                    path.file_stem().and_then(|stem| stem.to_str()),
                    Some("connection" | "conformance")
                )
        })
        .collect();
    files.sort();
    files
}

fn methods(entries: &[Value], direction: &str) -> Vec<String> {
    entries
        .iter()
        .filter(|entry| entry["direction"] == direction)
        .filter_map(|entry| entry["message"]["method"].as_str().map(str::to_string))
        .collect()
}

/// The shared run home's kept Gateway (`openclaw-run --gateway`), stopped when the test ends,
/// passed or not.
struct KeptGateway;

impl Drop for KeptGateway {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/openclaw-run"))
            .arg("--stop-gateway")
            .status();
    }
}

/// OpenClaw as an operator runs it: one Gateway (kept running in the run home by
/// `openclaw-run --gateway`) with `clawbridge app-server --offline` in its Codex slot, the
/// session's turns sent to it one after another, then a heartbeat woken on it.
#[test]
#[ignore = "needs the real OpenClaw (scripts/test-openclaw installs it)"]
fn a_plain_and_a_tool_call_turn_through_openclaw_codex_and_the_proxy() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("transcript");
    let gateway = KeptGateway;
    // The slot's stub script is the Gateway's for its life: the second turn's tool call is
    // answered by its message.
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"responses": [], "byInput": [{"contains": "which agents are there?", "responses": [{"toolCall": {"name": "agents_list", "arguments": {}}}, {"text": "Agents listed."}]}]}"#,
    )
    .expect("script");
    let script_arg = script.display().to_string();

    // 1. A plain turn: OpenClaw's Codex harness answers with the stub's text.
    let session = ["--session-key", "agent:main:clawbridge-e2e"];
    // The Codex app-server of this OpenClaw agent (what OpenClaw manages itself without
    // clawbridge; here it runs behind the stdio proxy): its peak memory over the turn.
    let run_home = shared_run_home();
    let managed = PeakSampler::start(move || codex_rss_kib(&run_home));
    let plain = openclaw_turn(
        &out,
        &[
            "--fresh",
            "--gateway",
            "--stub-script",
            &script_arg,
            session[0],
            session[1],
        ],
        "hello from the conformance test",
    );
    eprintln!(
        "MEASURE: one OpenClaw agent's own Codex app-server (stdio slot), peak RSS over its turn: {:.0} MiB",
        managed.peak_mib()
    );
    assert_eq!(
        strings(&plain, "agentHarnessId"),
        vec!["codex".to_string()],
        "OpenClaw ran the Codex harness, not its own runner: {plain:#}"
    );
    assert!(
        strings(&plain, "finalAssistantVisibleText")
            .contains(&"clawbridge offline stub reply 1.".to_string()),
        "{plain:#}"
    );
    // The session's thread is the one in the agent's workspace that carries the message (the
    // Gateway runs side threads too, in the agent's own folder, some quoting the message).
    let session_thread = thread_files(&out)
        .into_iter()
        .find(|file| {
            let entries = jsonl(file);
            entries.first().is_some_and(|first| {
                first["message"]["params"]["cwd"]
                    .as_str()
                    .is_some_and(|cwd| cwd.ends_with("/workspace"))
            }) && entries.iter().any(|entry| {
                entry
                    .to_string()
                    .contains("hello from the conformance test")
            })
        })
        .expect("the session's thread");
    let threads = [session_thread];
    let entries = jsonl(&threads[0]);
    let sent = methods(&entries, "in");
    // (A Gateway's plugin asks `mcpServerStatus/list` in between.)
    let turn_at = sent.iter().position(|method| method == "turn/start");
    assert!(
        sent.first().map(String::as_str) == Some("thread/start") && turn_at.is_some(),
        "the thread file opens with OpenClaw's thread/start, then turn/start: {sent:?}"
    );
    let start = &entries[0]["message"]["params"];
    assert!(
        start["developerInstructions"]
            .as_str()
            .is_some_and(|text| !text.is_empty()),
        "OpenClaw's developer instructions are in the transcript"
    );
    assert!(
        methods(&entries, "out").contains(&"turn/completed".to_string()),
        "{:?}",
        methods(&entries, "out")
    );

    // `clawbridge audit` on this transcript: where OpenClaw 2026.9.6 put each workspace file,
    // against the spec's routing of the same run. Its facts: the persona files are turn-scoped
    // collaboration text (moved from thread developer instructions), TOOLS.md is not sent,
    // runtime context goes in `additionalContext`, AGENTS.md is left to Codex (which the model
    // request shows it read).
    let out_text = out.display().to_string();
    let (code, stdout, stderr) = run_cli(&["audit", &out_text, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let audit: Value = serde_json::from_str(&stdout).expect("audit json");
    let session_id = threads[0]
        .file_stem()
        .expect("stem")
        .to_string_lossy()
        .into_owned();
    let turn = audit["threads"]
        .as_array()
        .and_then(|threads| {
            threads
                .iter()
                .find(|thread| thread["thread"] == *session_id)
        })
        .map(|thread| &thread["turns"][0])
        .unwrap_or_else(|| panic!("the session's thread in the audit: {audit:#}"));
    let row = |file: &str| {
        turn["rows"]
            .as_array()
            .and_then(|rows| rows.iter().find(|row| row["file"] == file))
            .cloned()
            .unwrap_or_else(|| panic!("{file}: {audit:#}"))
    };
    assert_eq!(row("TOOLS.md")["verdict"], "missing", "{audit:#}");
    assert_eq!(row("TOOLS.md")["openclaw"], json!([]));
    for persona in ["SOUL.md", "IDENTITY.md", "USER.md"] {
        let found = row(persona);
        assert_eq!(found["verdict"], "moved", "{found:#}");
        assert_eq!(found["spec"][0]["layer"], "threadDeveloperInstructions");
        assert_eq!(
            found["openclaw"][0]["layer"], "collaborationInstructions",
            "{found:#}"
        );
        assert_eq!(found["model"], "whole", "the model saw it: {found:#}");
    }
    assert_eq!(row("AGENTS.md")["verdict"], "asSpec");
    assert_eq!(row("AGENTS.md")["model"], "whole");
    let notes = turn["notes"].to_string();
    assert!(notes.contains("additionalContext ("), "{notes}");
    assert!(notes.contains("project_doc_max_bytes"), "{notes}");
    eprintln!(
        "clawbridge audit (real OpenClaw 2026.9.6):\n{}",
        run_cli(&["audit", &out_text]).1
    );

    // The versions and the conformance checks.
    let conformance = jsonl(&out.join("conformance.jsonl"));
    let versions = &conformance[0];
    assert_eq!(versions["kind"], "versions", "{conformance:#?}");
    assert_eq!(versions["client"], "openclaw 2026.9.6");
    let codex_version = versions["codexVersion"].as_str().expect("a Codex version");
    assert!(
        versions["userAgent"]
            .as_str()
            .is_some_and(|agent| agent.contains(codex_version)),
        "{versions}"
    );
    assert_eq!(versions["schemaChecks"], true);
    let checked: Vec<&str> = conformance
        .iter()
        .filter(|entry| entry["kind"] == "check")
        .filter_map(|entry| entry["method"].as_str())
        .collect();
    assert!(
        checked.contains(&"thread/start") && checked.contains(&"turn/start"),
        "{checked:?}"
    );
    // Every message of OpenClaw's session was checked: the per-method summary the proxy wrote
    // when OpenClaw let it go, read back by `app-server report` (printed for the CI log).
    let row = |method: &str, flow: &str| summary_row(&conformance, method, flow);
    for (method, flow) in [
        ("initialize", "request"),
        ("initialize", "response"),
        ("thread/start", "response"),
        ("turn/start", "response"),
        ("turn/completed", "notification"),
    ] {
        let counts = row(method, flow);
        assert!(counts["seen"].as_u64() >= Some(1), "{counts}");
        assert_eq!(
            counts["seen"], counts["valid"],
            "every {method} {flow} conforms: {counts}"
        );
    }
    let report = conformance_report(&out);
    eprintln!(
        "clawbridge app-server report (real OpenClaw 2026.9.6 -> Codex):\n{}",
        String::from_utf8_lossy(&report.stdout)
    );
    assert!(
        String::from_utf8_lossy(&report.stdout).contains("turn/completed"),
        "{report:?}"
    );

    // The captured model request: what Codex really sent the model for OpenClaw's turn.
    let thread_name = threads[0]
        .file_stem()
        .expect("stem")
        .to_string_lossy()
        .into_owned();
    let turn = out
        .join("model-requests")
        .join(&thread_name)
        .join("turn-01");
    // The capture writer files a request after the forwarder passed it on; with a Gateway the
    // turn's answer can be back first (CI once read turn 2's second request a moment early).
    filed(&turn, &["model-request.json", "model-response.json"]);
    let request: Value = serde_json::from_str(
        &std::fs::read_to_string(turn.join("model-request.json")).expect("model-request.json"),
    )
    .expect("json");
    // `--offline` with a capture folder files the answer too, as `run` and `serve` do.
    assert!(
        turn.join("model-response.json").is_file(),
        "the stub's answer is filed next to the request"
    );
    let body = request["body"].to_string();
    assert!(
        body.contains("hello from the conformance test"),
        "the user's message"
    );
    assert!(
        !body.contains(&dir.path().display().to_string()),
        "machine paths are redacted"
    );
    let layers = std::fs::read_to_string(turn.join("layers.md")).expect("layers.md");
    assert!(
        layers.contains("OpenClaw developer instructions (thread/start.developerInstructions)"),
        "OpenClaw's layer is told apart from Codex's own:\n{}",
        &layers[..layers.len().min(3000)]
    );
    assert!(layers.contains("openclaw 2026.9.6 through clawbridge app-server"));

    // 2. The same session's second turn, a tool call, sent to the same Gateway: the model
    // calls OpenClaw's `agents_list`, Codex asks OpenClaw (`item/tool/call`), OpenClaw answers
    // through the proxy, the model gets the output. (A thread resumed by a new connection is
    // the WebSocket test's: its agents' plugins reconnect after an endpoint's kill -9.)
    let tool = openclaw_turn(
        &out,
        &["--gateway", session[0], session[1]],
        "which agents are there?",
    );
    assert_eq!(strings(&tool, "agentHarnessId"), vec!["codex".to_string()]);
    assert!(
        strings(&tool, "finalAssistantVisibleText").contains(&"Agents listed.".to_string()),
        "{tool:#}"
    );
    let all = jsonl(&threads[0]);
    let sent = methods(&all, "in");
    assert_eq!(
        sent.iter().filter(|method| *method == "turn/start").count(),
        2,
        "the second turn continues the same thread: {sent:?}"
    );
    let call = all
        .iter()
        .find(|entry| entry["direction"] == "out" && entry["message"]["method"] == "item/tool/call")
        .expect("Codex asked OpenClaw to run the tool");
    assert_eq!(call["message"]["params"]["tool"], "agents_list", "{call}");
    let call_id = &call["message"]["id"];
    let answer = all
        .iter()
        .find(|entry| {
            entry["direction"] == "in"
                && entry["message"]["id"] == *call_id
                && entry["message"].get("result").is_some()
        })
        .expect("OpenClaw answered the tool call through the proxy");
    assert!(
        answer["message"]["result"]["contentItems"].is_array(),
        "{answer}"
    );
    // The second turn is numbered after the first, and both its requests are captured.
    let second = out
        .join("model-requests")
        .join(&thread_name)
        .join("turn-02");
    assert!(turn.join("model-request.json").is_file(), "turn 1 is kept");
    filed(&second, &["model-request.2.json", "layers.2.md"]);
    let after_tool = std::fs::read_to_string(second.join("model-request.2.json"))
        .expect("the request after the tool output was captured");
    assert!(
        after_tool.contains("function_call_output"),
        "the model got the tool's output"
    );
    assert!(second.join("layers.2.md").is_file());

    // 3. A heartbeat on the same Gateway: a system event wakes the main session, OpenClaw runs
    // the heartbeat turn on Codex through the proxy.
    let heartbeat = openclaw_turn(&out, &["--heartbeat"], "Check the release checklist.");
    let thread = heartbeat["heartbeatThread"]
        .as_str()
        .expect("the heartbeat's thread")
        .to_string();
    let heartbeat_turn = out.join("model-requests").join(&thread).join("turn-01");
    filed(&heartbeat_turn, &["model-request.json"]);
    let request = std::fs::read_to_string(heartbeat_turn.join("model-request.json"))
        .expect("the heartbeat's model request was captured");
    let request: Value = serde_json::from_str(&request).expect("json");
    let user_input = request["body"]["input"]
        .as_array()
        .expect("input")
        .iter()
        .filter(|item| item["role"] == "user")
        .filter_map(|item| item["content"][0]["text"].as_str())
        .next_back()
        .expect("a user input");
    // (On a Gateway the session's earlier system events come first, such as its creation.)
    assert!(
        user_input
            .lines()
            .any(|line| line == "System: [<date> <time> UTC] Check the release checklist."),
        "the event is a System: line, clock redacted: {user_input}"
    );
    let entries = jsonl(&out.join(format!("{thread}.jsonl")));
    assert!(methods(&entries, "in").contains(&"thread/start".to_string()));
    assert!(methods(&entries, "out").contains(&"turn/completed".to_string()));
    // The Gateway goes down with its whole process group: nothing runs with the run's HOME.
    drop(gateway);
    let run_home = shared_run_home();
    let needle = format!("HOME={}", run_home.display());
    let left = || -> Vec<String> {
        std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
            .filter(|entry| {
                std::fs::read(entry.path().join("environ")).is_ok_and(|environ| {
                    environ
                        .split(|byte| *byte == 0)
                        .any(|pair| pair == needle.as_bytes())
                })
            })
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect()
    };
    if crate::util::poll(std::time::Duration::from_secs(15), || {
        left().is_empty().then_some(())
    })
    .is_none()
    {
        panic!("processes of the run are still alive: {:?}", left());
    }
}

/// The shared run home of `scripts/openclaw-run` (no `--home`), named as the script names it: in
/// CLAWBRIDGE_OPENCLAW_HOMES (scripts/test-openclaw sets it), else beside OpenClaw in the tools
/// cache (`.tools` links to the per-user cache, and the script names the home by the cache's
/// real path).
fn shared_run_home() -> std::path::PathBuf {
    match std::env::var_os("CLAWBRIDGE_OPENCLAW_HOMES") {
        Some(homes) if !homes.is_empty() => std::path::PathBuf::from(homes),
        _ => {
            let tools = repo_root().join(".tools");
            tools
                .canonicalize()
                .unwrap_or(tools)
                .join("openclaw-2026.9.6")
        }
    }
    .join("run-home")
}

/// `clawbridge app-server --listen ws://...` as a child: the bound address, and the child
/// (stopped with SIGTERM when dropped: it drains and sends the traces it holds).
struct WsEndpoint {
    child: std::process::Child,
    url: String,
}

impl WsEndpoint {
    /// SIGTERM, and its exit: it drains, sends the traces it holds and records them, within
    /// `within` (else the test fails, naming it: a kill after that would cut the records).
    fn stop(mut self, within: std::time::Duration) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        crate::util::poll(within, || self.child.try_wait().ok().flatten()).unwrap_or_else(|| {
            panic!(
                "the endpoint at {} did not stop within {within:?}",
                self.url
            )
        })
    }
}

impl Drop for WsEndpoint {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = crate::util::poll(std::time::Duration::from_secs(10), || {
            self.child.try_wait().ok().flatten()
        });
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ws_endpoint(
    listen: &str,
    codex: &Path,
    state_dir: &Path,
    transcript: &Path,
    script: &Path,
    otel: &str,
    extra: &[&str],
) -> WsEndpoint {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawbridge"))
        .args(["app-server", "--listen", listen, "--offline"])
        .args(extra)
        .args(["--otel-endpoint", otel])
        .args(["--app-servers", "2", "--transcript"])
        .arg(transcript)
        .arg("--stub-script")
        .arg(script)
        // The token file (unless `extra` names one) and the offline homes (the native one and
        // each account's) live in the state dir.
        .arg("--state-dir")
        .arg(state_dir)
        .arg("--codex-bin")
        .arg(codex)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("clawbridge app-server --listen");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the bound address");
    WsEndpoint {
        child,
        url: format!("ws://{}", line.trim()),
    }
}

/// OpenClaw's `--json` result of a successful run.
fn openclaw_result(ok: bool, stdout: &str, stderr: &str) -> Value {
    assert!(ok, "OpenClaw over WebSocket failed:\n{stdout}\n{stderr}");
    let start = stdout.find("\n{").map_or(0, |at| at + 1);
    serde_json::from_str(&stdout[start..])
        .unwrap_or_else(|error| panic!("OpenClaw's --json output: {error}\n{stdout}"))
}

/// Resident memory (KiB) of a process, 0 when it is gone.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Every process id with its parent's.
fn processes() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces, so read after the last ')'.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// `pid` and its descendants.
fn process_tree(pid: u32) -> Vec<u32> {
    let all = processes();
    let mut tree = vec![pid];
    let mut at = 0;
    while at < tree.len() {
        let parent = tree[at];
        tree.extend(
            all.iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        at += 1;
    }
    tree
}

/// Resident memory (KiB) of the native Codex processes under the processes started with
/// `HOME=home` (OpenClaw and what it spawns: behind the stdio proxy, Codex itself runs with a
/// throwaway home of its own, so it is found as a descendant, not by its environment).
fn codex_rss_kib(home: &Path) -> u64 {
    let needle = format!("HOME={}", home.display());
    let started_in_home = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
            environ
                .split(|byte| *byte == 0)
                .any(|pair| pair == needle.as_bytes())
        })
    };
    let is_codex = |pid: &u32| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|exe| exe.file_name().is_some_and(|name| name == "codex"))
    };
    let under_home: std::collections::BTreeSet<u32> = processes()
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(started_in_home)
        .flat_map(process_tree)
        .collect();
    under_home.into_iter().filter(is_codex).map(rss_kib).sum()
}

/// Samples a memory figure (KiB) every 200 ms until stopped; the peak.
struct PeakSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<u64>,
}

impl PeakSampler {
    fn start(probe: impl Fn() -> u64 + Send + 'static) -> PeakSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut peak = 0;
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                peak = peak.max(probe());
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            peak
        });
        PeakSampler { stop, handle }
    }

    fn peak_mib(self) -> f64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.handle.join().expect("sampler") as f64 / 1024.0
    }
}

/// Each agent's tool-call turn is one trace: OpenClaw's turn at its root, its two model calls
/// with their tokens and the agents_list call under it, nothing orphaned.
fn check_openclaw_tool_traces(spans: &[crate::otel::Received]) {
    let tool_traces: std::collections::BTreeSet<&str> = spans
        .iter()
        .filter(|span| span.text("tool.name") == Some("agents_list"))
        .map(|span| span.trace.as_str())
        .collect();
    assert_eq!(
        tool_traces.len(),
        2,
        "one traced tool call per agent: {spans:#?}"
    );
    for trace in tool_traces {
        let tree: Vec<_> = spans.iter().filter(|span| span.trace == trace).collect();
        let roots: Vec<_> = tree.iter().filter(|span| span.parent.is_empty()).collect();
        assert_eq!(roots.len(), 1, "{tree:#?}");
        assert_eq!(roots[0].name, "invoke_agent openclaw", "{tree:#?}");
        assert_eq!(roots[0].text("codex.turn.status"), Some("completed"));
        let chats: Vec<_> = tree
            .iter()
            .filter(|span| span.text("openinference.span.kind") == Some("LLM"))
            .collect();
        assert_eq!(chats.len(), 2, "{tree:#?}");
        assert!(chats
            .iter()
            .all(|chat| chat.int("llm.token_count.prompt").unwrap_or(0) > 0));
        for span in &tree {
            assert!(
                span.parent.is_empty() || tree.iter().any(|other| other.id == span.parent),
                "no orphan: {span:?}"
            );
        }
    }
}

/// The API key of an agent's auth profile (a test key: the loopback stub checks nothing).
fn api_key(agent: &str) -> String {
    format!("sk-team-{agent}-0123456789abcdef")
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// The processes `scripts/openclaw-team` leaves running with `KEEP=1` (its endpoint, its
/// Gateway's process group), stopped when the test ends, passed or not. An id is signalled only
/// while a process of it still runs with the team's HOME or state dir: an id whose process ended
/// may be another's by now.
struct KeptTeam {
    home: std::path::PathBuf,
    state: std::path::PathBuf,
}

impl KeptTeam {
    /// The id the script left in `STATE_DIR/NAME.pid`.
    fn pid(&self, name: &str) -> Option<u32> {
        std::fs::read_to_string(self.state.join(format!("{name}.pid")))
            .ok()
            .and_then(|text| text.trim().parse().ok())
    }

    /// The running processes of the Gateway's group (its process group id is its leader's).
    fn gateway_group(&self) -> Vec<u32> {
        let Some(group) = self.pid("gateway") else {
            return Vec::new();
        };
        let home = format!("HOME={}", self.home.display());
        let members: Vec<u32> = processes()
            .into_iter()
            .map(|(pid, _)| pid)
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    stat.rsplit_once(')')
                        .and_then(|(_, rest)| rest.split_whitespace().nth(2))
                        .is_some_and(|pgid| pgid == group.to_string())
                })
            })
            .collect();
        let ours = members.iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|byte| *byte == 0)
                    .any(|pair| pair == home.as_bytes())
            })
        });
        if ours {
            members
        } else {
            Vec::new()
        }
    }

    /// The endpoint the script started, while it runs (kill -9 when `hard`).
    fn stop_endpoint(&self, hard: bool) {
        let Some(pid) = self.pid("endpoint") else {
            return;
        };
        if !processes_with_arg(&self.state.display().to_string()).contains(&pid) {
            return;
        }
        let signal = if hard { "-KILL" } else { "-TERM" };
        let _ = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status();
        let _ = crate::util::poll(std::time::Duration::from_secs(10), || {
            (!crate::util::running(pid)).then_some(())
        });
    }
}

impl Drop for KeptTeam {
    fn drop(&mut self) {
        if let Some(group) = self.pid("gateway") {
            if !self.gateway_group().is_empty() {
                let _ = Command::new("kill")
                    .args(["-TERM", "--", &format!("-{group}")])
                    .status();
                let _ = crate::util::poll(std::time::Duration::from_secs(10), || {
                    self.gateway_group().is_empty().then_some(())
                });
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{group}")])
                    .status();
            }
        }
        self.stop_endpoint(true);
    }
}

/// Every running process with `arg` as one of its arguments.
fn processes_with_arg(arg: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .split(|byte| *byte == 0)
                    .any(|word| word == arg.as_bytes())
            })
        })
        .collect()
}

/// docs/operations.md's team recipe, run as written (`scripts/openclaw-team`, which
/// `cli::the_documented_team_recipe_is_the_tested_script` keeps equal to the doc), as an
/// operator whose team outgrew one endpoint runs it: a fresh OpenClaw home with the agents
/// alpha and beta (two workspaces, their own auth profiles and keys, an account named per
/// agent), OpenClaw's Gateway reaching the recipe's endpoint A through a real HAProxy (`URL`),
/// A on one PostgreSQL (the "Replicas" issue) beside a standby B of the same state dir on Codex
/// 0.171.0, `--route spec` (live routing), traces to a loopback collector and a real Arize
/// Phoenix. The recipe's turns run at once through A, `app-server status` names both accounts
/// and their agents; then A is killed with -9 and each agent's next turn, a tool call
/// (OpenClaw's `agents_list`, answered back through the endpoint), goes through B on the same
/// thread with its earlier words. Each agent's model requests carry its own key's fingerprint
/// and only its own workspace; transcripts, captures, the conformance log, usage, the audit and
/// the traces are checked; after the endpoint's token is rotated, the Gateway still holding the
/// old one is refused and OpenClaw says so (401). One Gateway for all of it: each OpenClaw
/// start-up costs some 35 CPU-s.
#[test]
#[ignore = "needs the real OpenClaw (scripts/test-openclaw installs it)"]
fn team_recipe_runs_as_written() {
    let runtime = Command::new(repo_root().join("scripts/install-openclaw-runtime"))
        .output()
        .expect("scripts/install-openclaw-runtime");
    assert!(runtime.status.success());
    let runtime = String::from_utf8_lossy(&runtime.stdout).into_owned();
    let [bin_dir, launcher, template]: [&str; 3] = runtime
        .lines()
        .collect::<Vec<_>>()
        .try_into()
        .expect("bin dir, launcher, template");
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(template)
        .arg(&home)
        .status()
        .expect("cp");
    assert!(copied.success());
    // The agents' workspaces, there before the recipe (its `mkdir -p` keeps them): the fixture,
    // and beta's with its own identity.
    for agent in ["alpha", "beta"] {
        let workspace = home.join(format!(".openclaw/workspace-{agent}"));
        copy_tree(&repo_root().join("fixtures/workspace"), &workspace);
        if agent == "beta" {
            std::fs::write(workspace.join("IDENTITY.md"), "# Identity\n\nName: Beta\n")
                .expect("identity");
        }
    }
    let state = dir.path().join("state");
    let transcript = dir.path().join("transcript");
    let path = format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default());
    let first = "What is on the release checklist?";
    let gateway_token = "the-team-gateway-token-0123456789abcdef";
    // The recipe's turns take the stub's default reply; each agent's tool-call turn its own
    // answers, whatever order their requests come in.
    let script = dir.path().join("script.json");
    let rules: Vec<Value> = ["alpha", "beta"]
        .iter()
        .map(|agent| {
            json!({"contains": format!("{agent}: which agents"), "responses": [
                {"toolCall": {"name": "agents_list", "arguments": {}}},
                {"text": format!("{}-AGENTS-LISTED", agent.to_uppercase())}
            ]})
        })
        .collect();
    std::fs::write(
        &script,
        json!({"responses": [], "byInput": rules}).to_string(),
    )
    .expect("script");
    // Traces go to a loopback OTLP collector (the same stub as the trace tests'), which passes
    // everything on to a real Arize Phoenix starting meanwhile (it takes seconds) and holds on to
    // what Phoenix is not ready for yet.
    let executor = tokio::runtime::Runtime::new().expect("runtime");
    let phoenix = crate::otel::spawn_phoenix();
    let collector = executor.block_on(crate::otel::Collector::start_forwarding(Some(
        phoenix.url.clone(),
    )));
    // Endpoint A (the recipe's, on Codex 0.169.0) and B (on Codex 0.171.0) on one PostgreSQL
    // and one state dir, behind HAProxy sending every connection to the first that is up (the
    // pinned `initialize` answer is the fleet's, in the database).
    let postgres = crate::util::Postgres::start();
    let store = postgres.url();
    let (a_port, b_port, balancer_port) = (free_port(), free_port(), free_port());
    let (a_addr, b_addr) = (format!("127.0.0.1:{a_port}"), format!("127.0.0.1:{b_port}"));
    let balancer = format!("127.0.0.1:{balancer_port}");
    let haproxy = crate::services::Haproxy::start_on(balancer_port, &[&a_addr, &b_addr]);
    let through = format!("ws://{}", haproxy.addr);
    let replica = [
        "--store",
        store.as_str(),
        "--allow-host",
        balancer.as_str(),
        "--lease-seconds",
        "3",
        // Live routing: each agent's workspace files where the spec puts them (the stdio slot
        // is proved as sent here, and routed by the seed-audit record).
        "--route",
        "spec",
    ];
    let endpoint_flags = format!(
        "--offline --transcript {} --stub-script {} --otel-endpoint {} {}",
        transcript.display(),
        script.display(),
        collector.url,
        replica.join(" ")
    );
    // Both endpoints with their members, sampled the whole run (found by the state dir they
    // were given).
    let state_arg = state.display().to_string();
    let memory = PeakSampler::start({
        let state_arg = state_arg.clone();
        move || {
            processes_with_arg(&state_arg)
                .into_iter()
                .flat_map(process_tree)
                .map(rss_kib)
                .sum()
        }
    });
    let own_memory = PeakSampler::start({
        let state_arg = state_arg.clone();
        move || {
            processes_with_arg(&state_arg)
                .into_iter()
                .map(rss_kib)
                .sum()
        }
    });
    let team = KeptTeam {
        home: home.clone(),
        state: state.clone(),
    };
    // OpenClaw's commands run in the team's HOME with no ambient credentials, its own npm
    // lookups going nowhere (loopback only), and the Gateway's token.
    let openclaw_command = |program: &str| {
        let mut command = Command::new("timeout");
        command
            .args(["--kill-after=10", program])
            .current_dir(&home)
            .env_remove("CODEX_HOME")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENCLAW_STATE_DIR")
            .env("HOME", &home)
            .env("PATH", &path)
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("npm_config_offline", "true")
            .env("NO_COLOR", "1")
            .env("OPENCLAW_GATEWAY_TOKEN", gateway_token);
        command
    };
    let started = std::time::Instant::now();
    let output = openclaw_command("400")
        .arg(repo_root().join("scripts/openclaw-team"))
        .arg(first)
        .env("CLAWBRIDGE", env!("CARGO_BIN_EXE_clawbridge"))
        .env("OPENCLAW", format!("node {launcher}"))
        .env("CODEX_BIN", crate::e2e::codex_bin())
        .env("PORT", a_port.to_string())
        .env("URL", &through)
        .env("GATEWAY_PORT", free_port().to_string())
        .env("STATE_DIR", &state)
        .env("OPENAI_API_KEY_ALPHA", api_key("alpha"))
        .env("OPENAI_API_KEY_BETA", api_key("beta"))
        .env("ENDPOINT_FLAGS", &endpoint_flags)
        .env("KEEP", "1")
        .output()
        .expect("scripts/openclaw-team");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the recipe failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let recipe_took = started.elapsed();
    // Both turns came back through the Gateway, on the Codex harness.
    for agent in ["alpha", "beta"] {
        let turn = std::fs::read_to_string(state.join(format!("turn-{agent}.json")))
            .unwrap_or_else(|error| panic!("{agent}'s turn: {error}\n{stdout}\n{stderr}"));
        assert!(
            turn.contains("clawbridge offline stub reply"),
            "{agent}'s reply came back: {turn}"
        );
        let turn = openclaw_result(true, &turn, "");
        assert_eq!(
            strings(&turn, "agentHarnessId"),
            ["codex"],
            "{agent}: {turn}"
        );
    }
    // The status the script printed: both named accounts, each with its thread's workspace.
    for agent in ["alpha", "beta"] {
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(agent) && line.contains("apiKey-")),
            "the status names {agent}'s account:\n{stdout}"
        );
        assert!(
            stdout.contains(&format!("agent {agent},")),
            "the status names {agent}'s thread's agent:\n{stdout}"
        );
    }
    // B, the standby, on the same state dir (its token, its accounts) and store.
    let endpoint = ws_endpoint(
        &format!("ws://{b_addr}"),
        &crate::e2e::codex_bin_of("0.171.0"),
        &state,
        &transcript,
        &script,
        &collector.url,
        &replica,
    );
    // A's capture writer files a request after the forwarder passed it on, and the turns'
    // answers are back at once, so A is killed only once both first turns are filed (a kill -9
    // loses what a writer has not written yet: the captures are diagnostics).
    crate::util::wait_until(
        "A filed both agents' first model requests",
        std::time::Duration::from_secs(10),
        || {
            let filed: Vec<String> = walk(&transcript.join("model-requests"))
                .into_iter()
                .filter_map(|file| std::fs::read_to_string(file).ok())
                .collect();
            ["alpha", "beta"].iter().all(|agent| {
                filed.iter().any(|text| {
                    text.contains(first) && text.contains(&format!("workspace-{agent}"))
                })
            })
        },
    );
    // A's live trace of those turns goes out with its exporter's next batch, and each turn the
    // collector took is recorded in the transcript's otel-sent.jsonl once the collector answered
    // (what `export-otel` leaves out). A kill -9 between the two leaves a turn sent and not
    // recorded, which `export-otel` sends again (at least once, by design: docs/traces.md), so A
    // is killed only once every turn the collector holds is recorded.
    let turn_of = |span: &crate::otel::Received| {
        (span.text("gen_ai.operation.name") == Some("invoke_agent")).then(|| {
            (
                span.text("gen_ai.conversation.id")
                    .unwrap_or_default()
                    .to_string(),
                span.text("codex.turn.id").unwrap_or_default().to_string(),
            )
        })
    };
    crate::util::wait_until(
        "A's live trace of both first turns taken and recorded",
        std::time::Duration::from_secs(20),
        || {
            let took: std::collections::BTreeSet<(String, String)> =
                collector.spans().iter().filter_map(turn_of).collect();
            let recorded: std::collections::BTreeSet<(String, String)> =
                std::fs::read_to_string(transcript.join("otel-sent.jsonl"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .filter_map(|line| {
                        Some((
                            line["thread"].as_str()?.to_string(),
                            line["turn"].as_str()?.to_string(),
                        ))
                    })
                    .collect();
            took.len() >= 2 && took.is_subset(&recorded)
        },
    );
    // Endpoint A is killed with -9 between each agent's two turns: HAProxy sends the Gateway's
    // next connections to B, whose members run Codex 0.171.0. Each agent's next turn resumes
    // the same Codex thread (once A's lease ran out), its earlier words in the model's request
    // (checked below), as if nothing had happened (OpenClaw's plugin starts a new thread when
    // the `initialize` answer changes; the fleet's stays pinned).
    team.stop_endpoint(true);
    crate::util::wait_until(
        "HAProxy finds A down",
        std::time::Duration::from_secs(5),
        || std::net::TcpStream::connect(&a_addr).is_err(),
    );
    std::thread::sleep(std::time::Duration::from_millis(600));
    let app_server_token =
        std::fs::read_to_string(state.join("app-server-token")).expect("the endpoint's token");
    // `openclaw agent` sent to the team's Gateway, as an operator goes on with it.
    let openclaw_agent = |agent: &str, message: &str, timeout: &str| {
        let output = openclaw_command(timeout)
            .args(["node", launcher])
            .args(["agent", "--agent", agent, "--message", message, "--json"])
            .env("CODEX_APP_SERVER_TOKEN", app_server_token.trim())
            .output()
            .expect("openclaw agent");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let second_started = std::time::Instant::now();
    let tool: Vec<(String, Value)> = std::thread::scope(|scope| {
        let runs: Vec<_> = ["alpha", "beta"]
            .into_iter()
            .map(|agent| {
                let openclaw_agent = &openclaw_agent;
                scope.spawn(move || {
                    let (ok, stdout, stderr) =
                        openclaw_agent(agent, &format!("{agent}: which agents are there?"), "300");
                    (agent.to_string(), openclaw_result(ok, &stdout, &stderr))
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("agent run"))
            .collect()
    });
    let second_took = second_started.elapsed();
    for (agent, result) in &tool {
        let expected = format!("{}-AGENTS-LISTED", agent.to_uppercase());
        assert!(
            strings(result, "text")
                .iter()
                .any(|text| text.contains(&expected)),
            "{agent}: the stub's answer {expected} came back through B: {result}"
        );
        assert_eq!(
            strings(result, "agentHarnessId"),
            ["codex"],
            "{agent}: {result}"
        );
    }
    eprintln!("MEASURE: the team recipe (config, two auth profiles, the endpoint, the Gateway, two turns at once): {recipe_took:.1?}");
    eprintln!("MEASURE: two agents' tool-call turns at once through B after A's kill -9: {second_took:.1?}");

    // Both members served threads: the endpoint's own status, through the CLI.
    let status = Command::new(env!("CARGO_BIN_EXE_clawbridge"))
        .args([
            "app-server",
            "status",
            "--json",
            "--listen",
            &endpoint.url,
            "--state-dir",
        ])
        .arg(&state)
        .output()
        .expect("app-server status");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let status: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    // Each agent logged in with its own key: an identity of its own (a fingerprint, never the
    // key), whose own members opened its threads; all within --app-servers 2.
    let identities = status["identities"].as_array().expect("identities");
    let accounts: Vec<&Value> = identities
        .iter()
        .filter(|identity| identity["identity"] != "native")
        .collect();
    assert_eq!(
        accounts.len(),
        2,
        "one identity per agent's key: {status:#}"
    );
    for account in &accounts {
        assert!(
            account["members"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|member| member["threadsOpened"].as_u64().unwrap_or(0) >= 1),
            "the account's own member opened its threads: {status:#}"
        );
    }
    assert!(!status.to_string().contains("sk-team-"), "{status:#}");

    // Every proxy feature on this transport: per-connection transcripts with each agent's
    // tool call and OpenClaw's answer, the captures, the conformance log.
    let files: Vec<std::path::PathBuf> = walk(&transcript)
        .into_iter()
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "jsonl")
                && path
                    .parent()
                    .and_then(|parent| parent.file_name())
                    .is_some_and(|name| name.to_string_lossy().starts_with("connection-"))
        })
        .collect();
    let mut tool_round_trips = 0;
    for file in &files {
        let entries = jsonl(file);
        for call in entries.iter().filter(|entry| {
            entry["direction"] == "out" && entry["message"]["method"] == "item/tool/call"
        }) {
            assert_eq!(call["message"]["params"]["tool"], "agents_list", "{call}");
            let answered = entries.iter().any(|entry| {
                entry["direction"] == "in"
                    && entry["message"]["id"] == call["message"]["id"]
                    && entry["message"]["result"]["contentItems"].is_array()
            });
            assert!(
                answered,
                "OpenClaw answered the tool call through the endpoint: {call}"
            );
            tool_round_trips += 1;
        }
    }
    assert_eq!(tool_round_trips, 2, "one tool call per agent: {files:?}");
    // Each agent's next turn came on a new connection (A's died with it). OpenClaw's plugin
    // reads the thread, then resumes it, and goes on only if it saw the thread `notLoaded`: in
    // the read's answer, or as `thread/status/changed` before the resume's answer (Codex reloads
    // a thread it still held when the resume brings new params; the endpoint keeps Codex's
    // order, so the client hears that first).
    let mut resumes = 0;
    for file in &files {
        let entries = jsonl(file);
        for (at, resume) in entries.iter().enumerate().filter(|(_, entry)| {
            entry["direction"] == "in" && entry["message"]["method"] == "thread/resume"
        }) {
            let thread = &resume["message"]["params"]["threadId"];
            let answered = entries[at..]
                .iter()
                .position(|entry| {
                    entry["direction"] == "out"
                        && entry["message"]["id"] == resume["message"]["id"]
                        && entry["message"].get("method").is_none()
                })
                .expect("the resume was answered");
            let not_loaded = |entry: &&Value| {
                entry["direction"] == "out"
                    && ((entry["message"]["method"] == "thread/status/changed"
                        && entry["message"]["params"]["threadId"] == *thread
                        && entry["message"]["params"]["status"]["type"] == "notLoaded")
                        || (entry["message"]["result"]["thread"]["id"] == *thread
                            && entry["message"]["result"]["thread"]["status"]["type"]
                                == "notLoaded"))
            };
            let seen = entries[..at + answered]
                .iter()
                .any(|entry| not_loaded(&entry));
            assert!(seen, "notLoaded before the resume's answer in {file:?}");
            resumes += 1;
        }
    }
    assert_eq!(resumes, 2, "one resume per agent's next turn: {files:?}");
    // Across the kill -9: each next turn resumed the very thread its first turn started.
    let started_threads: std::collections::BTreeSet<String> = files
        .iter()
        .flat_map(|file| {
            let entries = jsonl(file);
            let starts: Vec<Value> = entries
                .iter()
                .filter(|entry| {
                    entry["direction"] == "in" && entry["message"]["method"] == "thread/start"
                })
                .map(|entry| entry["message"]["id"].clone())
                .collect();
            entries
                .iter()
                .filter(|entry| {
                    entry["direction"] == "out"
                        && entry["message"].get("method").is_none()
                        && starts.contains(&entry["message"]["id"])
                })
                .filter_map(|entry| {
                    entry["message"]["result"]["thread"]["id"]
                        .as_str()
                        .map(str::to_string)
                })
                .collect::<Vec<String>>()
        })
        .collect();
    let resumed_threads: Vec<String> = files
        .iter()
        .flat_map(|file| jsonl(file))
        .filter(|entry| entry["direction"] == "in" && entry["message"]["method"] == "thread/resume")
        .filter_map(|entry| {
            entry["message"]["params"]["threadId"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(resumed_threads.len(), 2, "{resumed_threads:?}");
    for thread in &resumed_threads {
        assert!(
            started_threads.contains(thread),
            "{thread} was resumed, not a new one: {started_threads:?}"
        );
    }
    // Every model call filed: a turn's first request (model-request.json), and those after a
    // tool call (model-request.N.json). The capture writer files a request after forwarding
    // it, so the last calls (after each tool call) are waited for before the folder is read.
    crate::util::wait_until(
        "B filed both agents' model calls after their tool calls",
        std::time::Duration::from_secs(10),
        || {
            let after_tool: Vec<String> = walk(&transcript.join("model-requests"))
                .into_iter()
                .filter(|file| file.ends_with("model-request.2.json"))
                .filter_map(|file| std::fs::read_to_string(file).ok())
                .collect();
            ["alpha", "beta"].iter().all(|agent| {
                after_tool
                    .iter()
                    .any(|text| text.contains(&format!("{agent}: which agents are there?")))
            })
        },
    );
    let every_call: Vec<(std::path::PathBuf, String)> = walk(&transcript.join("model-requests"))
        .into_iter()
        .filter(|file| {
            file.file_name().is_some_and(|name| {
                let name = name.to_string_lossy();
                name.starts_with("model-request") && name.ends_with(".json")
            })
        })
        .filter_map(|file| Some((file.clone(), std::fs::read_to_string(file).ok()?)))
        .collect();
    let credential = |request: &str| {
        serde_json::from_str::<Value>(request).expect("model-request.json")["credential"].clone()
    };
    for agent in ["alpha", "beta"] {
        let (own_workspace, other_workspace) = (
            format!("workspace-{agent}"),
            format!(
                "workspace-{}",
                if agent == "alpha" { "beta" } else { "alpha" }
            ),
        );
        // On the upstream's side: every model request of an agent's key is its own workspace's
        // (the capture files a fingerprint of the Authorization it carried), and there are some.
        let fingerprint = clawbridge::credential_fingerprint(&format!("Bearer {}", api_key(agent)));
        let own: Vec<&String> = every_call
            .iter()
            .map(|(_, request)| request)
            .filter(|request| credential(request) == fingerprint)
            .collect();
        assert!(!own.is_empty(), "{agent}'s requests carry its key");
        for request in &own {
            assert!(
                request.contains(&own_workspace) && !request.contains(&other_workspace),
                "{agent}'s key carried a request not of {own_workspace}: {request}"
            );
        }
        // And every request of its workspace carries its key.
        for (file, request) in &every_call {
            if request.contains(&own_workspace) {
                assert_eq!(
                    credential(request),
                    fingerprint,
                    "{agent}'s request {file:?} went out with another credential"
                );
            }
        }
        let captured: Vec<&String> = every_call
            .iter()
            .filter(|(file, request)| {
                file.ends_with("model-request.json") && request.contains(&own_workspace)
            })
            .map(|(_, request)| request)
            .collect();
        assert!(
            captured.iter().any(|request| request.contains(first)),
            "{agent}'s first model request was captured"
        );
        // After the restart, the thread's history: the first turn's words go with the next.
        assert!(
            captured.iter().any(|request| request
                .contains(&format!("{agent}: which agents are there?"))
                && request.contains(first)),
            "{agent}'s next turn went on with its thread"
        );
    }
    // Usage counted once, from the model's own calls: OpenClaw resumed each thread at its next
    // turn (across the kill -9), and that resume added nothing. Each agent's model was called
    // for its turns (the default reply, then a tool call and an answer) and its Gateway's
    // activity recaps, at 15 tokens a call as the stub reports them: 15 for each captured
    // request carrying the account's key.
    let calls = |agent: &str| {
        let fingerprint = clawbridge::credential_fingerprint(&format!("Bearer {}", api_key(agent)));
        every_call
            .iter()
            .filter(|(_, request)| credential(request) == fingerprint)
            .count() as u64
    };
    let mut used: Vec<u64> = accounts
        .iter()
        .map(|account| account["tokensToday"].as_u64().unwrap_or(0))
        .collect();
    used.sort_unstable();
    let mut wanted = vec![15 * calls("alpha"), 15 * calls("beta")];
    wanted.sort_unstable();
    assert!(
        calls("alpha") >= 3 && calls("beta") >= 3,
        "each agent's three turn calls were captured: alpha {}, beta {}, of {:?}",
        calls("alpha"),
        calls("beta"),
        every_call.iter().map(|(file, _)| file).collect::<Vec<_>>()
    );
    assert_eq!(
        used, wanted,
        "each account's tokens today are its agent's model calls, the resumes adding nothing: {status:#}"
    );
    let conformance =
        std::fs::read_to_string(transcript.join("conformance.jsonl")).expect("conformance.jsonl");
    assert!(
        conformance.contains("openclaw"),
        "the client is named: {conformance}"
    );
    // `--route spec` on both endpoints: every turn of both agents, across endpoint A's kill -9
    // and the resume on B, reached Codex with each workspace file where the spec puts it, and
    // the transcript holds what OpenClaw sent beside what Codex got.
    let (code, stdout, stderr) = run_cli(&["audit", &transcript.display().to_string(), "--json"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let audit: Value = serde_json::from_str(&stdout).expect("audit json");
    let mut audited = 0;
    for thread in audit["threads"].as_array().expect("threads") {
        for turn in thread["turns"].as_array().into_iter().flatten() {
            audited += 1;
            assert_eq!(turn["route"], "spec", "{turn:#}");
            for row in turn["rows"].as_array().expect("rows") {
                assert_eq!(row["verdict"], "asSpec", "{}: {row:#}", thread["thread"]);
            }
            assert!(turn.get("flags").is_none(), "{turn:#}");
        }
    }
    assert_eq!(audited, 4, "two turns per agent: {audit:#}");
    let (peak, own) = (memory.peak_mib(), own_memory.peak_mib());
    eprintln!("MEASURE: two clawbridge app-servers with their members, peak RSS over the run: {peak:.0} MiB (clawbridge itself: {own:.0} MiB)");
    // The traces: the endpoint stops (SIGTERM: it drains, sends what it holds and records it);
    // each agent's tool-call turn is one trace, OpenClaw's turn at its root, its two model calls
    // with their tokens and the agents_list call under it, nothing orphaned.
    let stopped = endpoint.stop(std::time::Duration::from_secs(60));
    assert!(stopped.success(), "B stopped with {stopped}");
    let live = collector.spans();
    check_openclaw_tool_traces(&live);

    // What the endpoint sent live also went, byte for byte, to a real Arize Phoenix: each
    // agent's tool-call turn is one trace there, an agent span at its root, both model calls
    // with the token counts Phoenix reads, and the agents_list call, in one tree.
    executor.block_on(phoenix.ready());
    let spans = executor
        .block_on(crate::util::poll_with(
            std::time::Duration::from_secs(30),
            || async {
                let spans = phoenix.spans(200).await?;
                (spans.len() >= live.len()).then_some(spans)
            },
        ))
        .unwrap_or_else(|| {
            let held = executor.block_on(phoenix.spans(200)).unwrap_or_default();
            let names: Vec<String> = held
                .iter()
                .map(|span| format!("{} {}", span["name"], span["attributes"]["tool.name"]))
                .collect();
            panic!(
                "Phoenix did not take the {} live spans; it holds: {names:#?}",
                live.len()
            )
        });
    // Codex's tool item (`execute_tool`) and OpenClaw's answer to it (`client tool`) are both in
    // the trace of the turn that made the call.
    let tool_traces: std::collections::BTreeSet<&str> = spans
        .iter()
        .filter(|span| span["attributes"]["tool.name"] == "agents_list")
        .filter_map(|span| span["context"]["trace_id"].as_str())
        .collect();
    assert_eq!(
        tool_traces.len(),
        2,
        "one tool-call turn per agent: {spans:#?}"
    );
    let mut shown = None;
    for trace in tool_traces {
        let tree: Vec<&Value> = spans
            .iter()
            .filter(|span| span["context"]["trace_id"] == trace)
            .collect();
        let roots: Vec<&&Value> = tree
            .iter()
            .filter(|span| span["parent_id"].is_null())
            .collect();
        assert_eq!(roots.len(), 1, "one root: {tree:#?}");
        assert_eq!(roots[0]["span_kind"], "AGENT", "{tree:#?}");
        assert_eq!(roots[0]["status_code"], "OK", "{tree:#?}");
        assert!(
            roots[0]["attributes"]["session.id"]
                .as_str()
                .is_some_and(|session| !session.is_empty()),
            "the thread is Phoenix's session: {tree:#?}"
        );
        let root_id = &roots[0]["context"]["span_id"];
        assert!(
            tree.iter().any(|span| span["span_kind"] == "TOOL"
                && span["attributes"]["tool.name"] == "agents_list"),
            "Phoenix shows the call as a tool: {tree:#?}"
        );
        let chats: Vec<&&Value> = tree
            .iter()
            .filter(|span| span["span_kind"] == "LLM")
            .collect();
        assert_eq!(chats.len(), 2, "{tree:#?}");
        for chat in chats {
            assert_eq!(
                &chat["parent_id"], root_id,
                "a model call of the turn: {chat}"
            );
            assert_eq!(chat["attributes"]["llm.model_name"], "gpt-5.5", "{chat}");
            let tokens = |kind: &str| {
                chat["attributes"][format!("llm.token_count.{kind}")]
                    .as_i64()
                    .unwrap_or(0)
            };
            assert!(
                tokens("prompt") > 0 && tokens("completion") > 0,
                "Phoenix reads the token counts: {chat}"
            );
        }
        for span in &tree {
            assert!(
                span["parent_id"].is_null()
                    || tree
                        .iter()
                        .any(|other| other["context"]["span_id"] == span["parent_id"]),
                "no orphan: {span}"
            );
        }
        shown = Some(trace.to_string());
    }
    if let Some(trace) = shown {
        executor.block_on(phoenix.screenshot(&trace, "phoenix-openclaw-trace.png"));
    }

    // The transcript folder exported to the same collector (after Phoenix was checked: the
    // collector passes these on to it too): each turn the live trace sent is left out, so
    // Phoenix holds every turn once.
    collector.clear();
    let (code, stdout, stderr) = crate::util::run_cli(&[
        "export-otel",
        &transcript.display().to_string(),
        "--otel-endpoint",
        &collector.url,
        "--json",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let exported: Value = serde_json::from_str(&stdout).expect("export-otel --json");
    assert_eq!(exported["turns"], 4, "two turns per agent: {exported}");
    let live_turns: std::collections::BTreeSet<_> = live.iter().filter_map(turn_of).collect();
    let again: Vec<_> = collector
        .spans()
        .iter()
        .filter_map(turn_of)
        .filter(|turn| live_turns.contains(turn))
        .collect();
    assert!(
        again.is_empty(),
        "turns sent twice: {again:?}; otel-sent.jsonl:\n{}",
        std::fs::read_to_string(transcript.join("otel-sent.jsonl")).unwrap_or_default()
    );
    assert!(exported["alreadySent"].as_u64() >= Some(4), "{exported}");
    // With --all, the same trees from the files.
    collector.clear();
    let (code, stdout, stderr) = crate::util::run_cli(&[
        "export-otel",
        &transcript.display().to_string(),
        "--otel-endpoint",
        &collector.url,
        "--json",
        "--all",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    check_openclaw_tool_traces(&collector.spans());

    // The endpoint's token rotated under a running Gateway: B's address serves again with
    // another token, and the team's Gateway, still holding the old one, is refused when its
    // plugin reconnects (401), and OpenClaw says so.
    let rotated = dir.path().join("rotated");
    std::fs::create_dir_all(&rotated).expect("folder");
    let rotated_token = rotated.join("token");
    crate::util::write_private(&rotated_token, "the-rotated-token-0123456789abcdef\n");
    let rotated_token = rotated_token.display().to_string();
    let mut rotated_flags = replica.to_vec();
    rotated_flags.extend(["--token-file", rotated_token.as_str()]);
    let _rotated = ws_endpoint(
        &format!("ws://{b_addr}"),
        &crate::e2e::codex_bin(),
        &rotated.join("state"),
        &rotated.join("transcript"),
        &script,
        &collector.url,
        &rotated_flags,
    );
    // HAProxy checks its servers every 200 ms and takes one back after two good checks.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (ok, stdout, stderr) = openclaw_agent("alpha", "alpha: say hello again", "120");
    assert!(
        !ok,
        "a token the endpoint no longer takes must be refused:\n{stdout}"
    );
    assert!(
        stdout.contains("401") || stderr.contains("401"),
        "OpenClaw says why: {stdout}\n{stderr}"
    );
}

/// Wait (30 s at most) until the capture writer has filed each of `names` in the turn folder
/// `dir`: it writes after the forwarder passed the request on, and a Gateway's answer can come
/// back to the test first.
fn filed(dir: &std::path::Path, names: &[&str]) {
    crate::util::wait_until(
        &format!("{} filed in {}", names.join(", "), dir.display()),
        std::time::Duration::from_secs(30),
        || names.iter().all(|name| dir.join(name).is_file()),
    );
}
