//! `clawbridge replay`: the committed real-OpenClaw sessions played again through today's
//! clawbridge and the pinned Codex, offline (they must be exact), a changed workspace file named
//! at its layer, a bundle that travels without a secret, a fork that goes live at a turn, and
//! hostile recordings refused or passed over by name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::e2e::codex_bin_of;
use crate::util::*;

/// The committed records and their sessions (the heartbeat's two app-server processes wrote one
/// folder at once: told apart by each line's session).
const RECORDS: [&str; 2] = ["2026.9.6", "2026.9.6-route-spec"];
const SESSIONS: [&str; 5] = ["direct", "group", "heartbeat", "cron", "subagent"];
/// Where the committed sessions ran (scripts/seed-audit's OpenClaw home, scrubbed).
const RECORDED_CWD: &str = "/home/openclaw/workspace";
/// The direct session's thread file (its id as the record's scrub numbered it).
const DIRECT_THREAD: &str = "id-4.jsonl";

fn pinned() -> PathBuf {
    codex_bin_of(clawbridge::PINNED_CODEX_VERSION)
}

/// `clawbridge replay DIR ...` on the pinned Codex: (exit code, stdout, stderr).
fn replay(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let codex = pinned();
    let mut args = vec![
        "replay".to_string(),
        dir.display().to_string(),
        "--codex-bin".into(),
        codex.display().to_string(),
        "--step-timeout".into(),
        "30".into(),
    ];
    args.extend(extra.iter().map(|arg| arg.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_cli(&args)
}

fn fixture_workspace() -> String {
    format!(
        "{RECORDED_CWD}={}",
        repo_root().join("fixtures/workspace").display()
    )
}

fn report(stdout: &str, stderr: &str) -> Value {
    serde_json::from_str(stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {stdout}\n{stderr}"))
}

/// Every transcript line a replay kept (`--out DIR`), its first connection's, as one text.
fn replayed_transcript(out: &Path) -> String {
    let mut seen = String::new();
    for entry in std::fs::read_dir(out.join("connection-1/transcript"))
        .expect("transcript")
        .flatten()
    {
        if entry.path().extension().is_some_and(|ext| ext == "jsonl") {
            seen.push_str(&std::fs::read_to_string(entry.path()).expect("read"));
        }
    }
    seen
}

/// Whether the text at `key` of a divergence holds `needle`.
fn says(first: &Value, key: &str, needle: &str) -> bool {
    first[key]
        .as_str()
        .is_some_and(|text| text.contains(needle))
}

/// A committed session copied where a test may change it.
fn copied_session(record: &str, session: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp");
    copy_tree(
        &repo_root()
            .join("fixtures/seed-audit")
            .join(record)
            .join(session),
        dir.path(),
    );
    dir
}

/// Replace `from` with `to` in every file under `dir`.
fn replace_everywhere(dir: &Path, from: &str, to: &str) -> usize {
    let mut changed = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                if text.contains(from) {
                    std::fs::write(&path, text.replace(from, to)).expect("write");
                    changed += 1;
                }
            }
        }
    }
    changed
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
fn the_committed_sessions_replay_exact_on_the_pinned_codex() {
    let workspace = fixture_workspace();
    for record in RECORDS {
        for session in SESSIONS {
            let dir = repo_root()
                .join("fixtures/seed-audit")
                .join(record)
                .join(session);
            let (code, stdout, stderr) = replay(
                &dir,
                &["--workspace", &workspace, "--json", "--fail-on-divergence"],
            );
            let report = report(&stdout, &stderr);
            assert_eq!(code, 0, "{record}/{session} diverged: {report:#}\n{stderr}");
            assert_eq!(report["diverged"], 0, "{record}/{session}: {report:#}");
            assert!(
                report["exact"].as_u64() >= Some(1),
                "{record}/{session}: {report:#}"
            );
            assert_eq!(report["modelRequests"]["missing"], 0, "{report:#}");
            assert!(
                report["modelRequests"]["recorded"].as_u64() >= Some(1),
                "{report:#}"
            );
            let route = if record.ends_with("route-spec") {
                "spec"
            } else {
                "as-sent"
            };
            assert_eq!(report["route"], route);
        }
    }
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
fn a_changed_workspace_file_diverges_at_its_layer_and_the_page_escapes_it() {
    let workspace = tempfile::tempdir().expect("temp");
    copy_tree(&repo_root().join("fixtures/workspace"), workspace.path());
    std::fs::write(
        workspace.path().join("AGENTS.md"),
        "Release notes go out on Fridays. <script>alert(1)</script>\n",
    )
    .expect("write");
    let page = workspace.path().join("replay.html");
    let dir = repo_root().join("fixtures/seed-audit/2026.9.6/direct");
    let mapping = format!("{RECORDED_CWD}={}", workspace.path().display());
    let (code, stdout, stderr) = replay(
        &dir,
        &[
            "--workspace",
            &mapping,
            "--json",
            "--fail-on-divergence",
            "--html",
            &page.display().to_string(),
        ],
    );
    let report = report(&stdout, &stderr);
    assert_eq!(
        code, 1,
        "a divergence with --fail-on-divergence exits 1: {report:#}"
    );
    let turn = report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["turn"] == 1))
        .expect("turn 1")
        .clone();
    assert_eq!(turn["verdict"], "diverged", "{report:#}");
    let first = &turn["first"];
    assert_eq!(first["kind"], "model request", "{first:#}");
    assert!(says(first, "layer", "AGENTS.md"), "{first:#}");
    assert!(says(first, "replayed", "Fridays"), "{first:#}");
    // Without --fail-on-divergence the same replay exits 0 (the newest Codex's run in CI).
    let (code, _, _) = replay(&dir, &["--workspace", &mapping]);
    assert_eq!(code, 0);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("diverged") && html.contains("AGENTS.md"));
    assert!(
        !html.contains("<script>"),
        "the page escapes what the recording and workspace hold"
    );
    assert!(html.contains("&lt;script&gt;"));
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
fn a_bundle_travels_without_a_secret_and_replays_as_it_is() {
    const KEY: &str = "sk-proj-PLANTEDabcdefghijklmnopqrstuvwxyz0123";
    const TOKEN: &str = "ghp_PLANTEDabcdefghijklmnopqrstuvwxyz0123";
    let session = copied_session("2026.9.6", "direct");
    // The user's message (transcript and model request), the model's answer (transcript deltas
    // and model-response.json) and a workspace file each carry a secret.
    let planted = replace_everywhere(
        session.path(),
        "What is on the release checklist?",
        &format!("What is on the release checklist? Use OPENAI_API_KEY={KEY}"),
    );
    assert!(
        planted >= 2,
        "the user's message is in the transcript and the capture"
    );
    let answered = replace_everywhere(
        session.path(),
        "ne stub reply 1.",
        &format!("ne stub reply 1. Authorization: Bearer {TOKEN}"),
    );
    assert!(
        answered >= 2,
        "the answer is in the transcript and model-response.json"
    );
    let workspace = tempfile::tempdir().expect("temp");
    copy_tree(&repo_root().join("fixtures/workspace"), workspace.path());
    std::fs::write(
        workspace.path().join("TOOLS.md"),
        format!("Deploy with GITHUB_TOKEN={TOKEN}\n"),
    )
    .expect("write");
    let out = tempfile::tempdir().expect("temp");
    let bundle = out.path().join("session.tar");
    let mapping = format!("{RECORDED_CWD}={}", workspace.path().display());
    let (code, stdout, stderr) = run_cli(&[
        "replay",
        &session.path().display().to_string(),
        "--bundle",
        &bundle.display().to_string(),
        "--workspace",
        &mapping,
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let bytes = std::fs::read(&bundle).expect("bundle");
    let text = String::from_utf8_lossy(&bytes);
    for secret in [KEY, TOKEN, "PLANTED"] {
        assert!(!text.contains(secret), "the bundle holds {secret}");
    }
    assert!(text.contains("<redacted>"));
    assert!(text.contains("workspace-1/TOOLS.md") && text.contains("replay.json"));
    // The same bytes for the same recording.
    let again = out.path().join("again.tar");
    run_cli(&[
        "replay",
        &session.path().display().to_string(),
        "--bundle",
        &again.display().to_string(),
        "--workspace",
        &mapping,
    ]);
    assert_eq!(
        std::fs::read(&again).expect("again"),
        bytes,
        "bundles are deterministic"
    );
    // Replayed as it is: its manifest names its workspace.
    let (code, stdout, stderr) = replay(&bundle, &["--json", "--fail-on-divergence"]);
    let report = report(&stdout, &stderr);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(report["diverged"], 0, "{report:#}");
    assert!(report["exact"].as_u64() >= Some(1));
}

/// A loopback model upstream a fork sends its later turns to, answering `text` once.
async fn upstream_answering(text: &str) -> clawbridge::ResponsesStub {
    clawbridge::ResponsesStub::start(clawbridge::StubScript {
        responses: vec![clawbridge::StubStep::Text(text.into())],
        ..Default::default()
    })
    .await
    .expect("upstream")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
async fn a_replay_forks_live_at_a_chosen_turn() {
    let upstream = upstream_answering("A live answer from the upstream.").await;
    let url = upstream.base_url();
    let out = tempfile::tempdir().expect("temp");
    let out_dir = out.path().join("replayed");
    let dir = repo_root().join("fixtures/seed-audit/2026.9.6/direct");
    let workspace = fixture_workspace();
    let out_arg = out_dir.display().to_string();
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || {
        replay(
            &dir,
            &[
                "--workspace",
                &workspace,
                "--until-turn",
                "0",
                "--then-upstream",
                &url,
                "--out",
                &out_arg,
                "--json",
                "--fail-on-divergence",
            ],
        )
    })
    .await
    .expect("join");
    let report = report(&stdout, &stderr);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(report["live"], 1, "{report:#}");
    assert_eq!(report["modelRequests"]["upstream"], 1, "{report:#}");
    assert_eq!(report["modelRequests"]["recorded"], 0, "{report:#}");
    // The upstream got the turn's request, and the client saw its answer.
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0]
        .body
        .to_string()
        .contains("What is on the release checklist?"));
    let seen = replayed_transcript(&out_dir);
    assert!(
        seen.contains("A live answer from the upstream."),
        "the forked turn went live"
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
fn links_fifos_and_broken_lines_in_a_recording_are_passed_over_by_name() {
    let session = copied_session("2026.9.6", "direct");
    std::os::unix::fs::symlink("/etc/passwd", session.path().join("linked.jsonl")).expect("link");
    let fifo = session.path().join("waiting.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let thread = session.path().join(DIRECT_THREAD);
    let mut text = std::fs::read_to_string(&thread).expect("read");
    text.push_str("{\"direction\": \"out\", \"message\": {\"method\": \n");
    std::fs::write(&thread, text).expect("write");
    let (code, stdout, stderr) = replay(
        session.path(),
        &["--workspace", &fixture_workspace(), "--json"],
    );
    let report = report(&stdout, &stderr);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(report["diverged"], 0, "{report:#}");
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("linked.jsonl") && notes.contains("waiting.jsonl"),
        "{notes}"
    );
    assert!(notes.contains("not a regular file"), "{notes}");
    assert!(notes.contains("1 lines that are not JSON"), "{notes}");
    assert!(!notes.contains("root:x:0"), "a link is never followed");
}

/// Refusals happen before Codex starts: any file stands in for the binary.
fn refused(dir: &Path) -> String {
    let (code, stdout, stderr) = run_cli(&[
        "replay",
        &dir.display().to_string(),
        "--codex-bin",
        "/bin/true",
    ]);
    assert_eq!(code, 2, "refused with exit 2: {stdout}\n{stderr}");
    stderr
}

#[test]
fn what_cannot_be_replayed_is_refused_naming_why() {
    // Two app-server processes in one folder, written before each line named its session.
    let heartbeat = copied_session("2026.9.6", "heartbeat");
    for entry in std::fs::read_dir(heartbeat.path()).expect("read").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "jsonl") {
            let lines: Vec<String> = std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .map(|line| {
                    let mut entry: Value = serde_json::from_str(line).expect("json");
                    entry.as_object_mut().map(|entry| entry.remove("session"));
                    entry.to_string()
                })
                .collect();
            std::fs::write(&path, lines.join("\n") + "\n").expect("write");
        }
    }
    let stderr = refused(heartbeat.path());
    assert!(stderr.contains("2 sessions"), "{stderr}");
    // No captures.
    let empty = tempfile::tempdir().expect("temp");
    std::fs::copy(
        repo_root()
            .join("fixtures/seed-audit/2026.9.6/direct")
            .join(DIRECT_THREAD),
        empty.path().join(DIRECT_THREAD),
    )
    .expect("copy");
    assert!(refused(empty.path()).contains("no model requests with their answers"));
    // A recorded model that ran Codex's own shell: replaying would run it again.
    let session = copied_session("2026.9.6", "direct");
    let answer = session
        .path()
        .join("model-requests")
        .join(DIRECT_THREAD.trim_end_matches(".jsonl"))
        .join("turn-01/model-response.json");
    let mut document: Value =
        serde_json::from_str(&std::fs::read_to_string(&answer).expect("read")).expect("json");
    document["output"] = serde_json::json!([{"type": "function_call", "name": "exec_command",
        "call_id": "c1", "arguments": "{\"cmd\": \"rm -rf ~\"}"}]);
    std::fs::write(&answer, document.to_string()).expect("write");
    let stderr = refused(session.path());
    assert!(
        stderr.contains("exec_command") && stderr.contains("run again"),
        "{stderr}"
    );
    // A manifest naming a folder outside the recording.
    let session = copied_session("2026.9.6", "direct");
    std::fs::write(
        session.path().join("replay.json"),
        r#"{"workspaces": {"/home/openclaw/workspace": "../../etc"}}"#,
    )
    .expect("write");
    assert!(refused(session.path()).contains("not a folder inside the recording"));
}

/// A tar of `entries` (name, kind, bytes or link target), written raw so names and kinds a
/// well-behaved writer refuses can be planted.
fn hostile_tar(path: &Path, entries: &[(&str, tar::EntryType, &[u8])]) {
    let mut out = Vec::new();
    for (name, kind, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().expect("gnu").name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        if kind.is_symlink() {
            header
                .set_link_name(std::str::from_utf8(data).expect("utf8"))
                .expect("link");
            header.set_size(0);
            header.set_cksum();
            out.extend_from_slice(header.as_bytes());
        } else {
            header.set_size(data.len() as u64);
            header.set_cksum();
            out.extend_from_slice(header.as_bytes());
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
    }
    out.resize(out.len() + 1024, 0);
    std::fs::write(path, out).expect("write tar");
}

#[test]
fn a_bundle_that_leaves_its_folder_or_holds_a_link_is_refused() {
    let dir = tempfile::tempdir().expect("temp");
    let escaping = dir.path().join("escaping.tar");
    hostile_tar(
        &escaping,
        &[("../outside.jsonl", tar::EntryType::Regular, b"{}\n")],
    );
    let stderr = refused(&escaping);
    assert!(
        stderr.contains("../outside.jsonl") && stderr.contains("leaves the bundle"),
        "{stderr}"
    );
    assert!(!dir
        .path()
        .parent()
        .map(|parent| parent.join("outside.jsonl"))
        .is_some_and(|path| path.exists()));
    let linked = dir.path().join("linked.tar");
    hostile_tar(
        &linked,
        &[("id-3.jsonl", tar::EntryType::Symlink, b"/etc/passwd")],
    );
    let stderr = refused(&linked);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    let garbage = dir.path().join("garbage.tar");
    std::fs::write(&garbage, b"not a tar at all").expect("write");
    refused(&garbage);
}

/// Record a session through `app-server --offline` as OpenClaw would drive it: a thread with a
/// dynamic tool, one turn per question, the stub answering as `script` says and the client
/// answering each call of the tool with `answer`. The recording folder and the tool calls.
fn record_session(
    root: &Path,
    script: Value,
    questions: &[&str],
    answer: &str,
) -> (PathBuf, usize) {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let home = root.join("codex-home");
    let workspace = root.join("workspace");
    let transcript = root.join("recording");
    std::fs::create_dir_all(&home).expect("home");
    copy_tree(&repo_root().join("fixtures/workspace"), &workspace);
    let script_json = script;
    let script = root.join("stub-script.json");
    std::fs::write(&script, script_json.to_string()).expect("script");
    let mut child = clawbridge()
        .args(["app-server", "--offline", "--no-check", "--codex-bin"])
        .arg(pinned())
        .arg("--transcript")
        .arg(&transcript)
        .arg("--stub-script")
        .arg(&script)
        .args(["-c", "cli_auth_credentials_store=\"ephemeral\""])
        .env("CODEX_HOME", &home)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = move |value: Value| writeln!(stdin, "{value}").expect("write");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next = || -> Value {
        assert!(
            Instant::now() < deadline,
            "the recorded session did not finish"
        );
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "the slot closed"
        );
        serde_json::from_str(&line).expect("json")
    };
    send(
        serde_json::json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "openclaw", "version": "2026.9.6"}, "capabilities": {"experimentalApi": true}}}),
    );
    while next()["id"] != 1 {}
    send(serde_json::json!({"method": "initialized"}));
    send(
        serde_json::json!({"id": 2, "method": "thread/start", "params": {
        "cwd": workspace, "approvalPolicy": "never", "sandbox": "read-only",
        "dynamicTools": [{"type": "function", "name": "lookup_release",
            "description": "Look up a fact about the release.",
            "inputSchema": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}]}}),
    );
    let thread = loop {
        let message = next();
        if message["id"] == 2 {
            break message["result"]["thread"]["id"]
                .as_str()
                .expect("thread")
                .to_string();
        }
    };
    let mut asked = 0;
    for (index, question) in questions.iter().enumerate() {
        send(
            serde_json::json!({"id": 3 + index, "method": "turn/start", "params": {"threadId": thread,
            "input": [{"type": "text", "text": question}]}}),
        );
        loop {
            let message = next();
            if message["method"] == "item/tool/call" {
                asked += 1;
                send(serde_json::json!({"id": message["id"], "result": {
                    "contentItems": [{"type": "inputText", "text": answer}], "success": true}}));
            }
            if message["method"] == "turn/completed" {
                break;
            }
        }
    }
    drop(send);
    let _ = crate::util::wait_for("the slot's end", Duration::from_secs(15), || {
        child.try_wait().expect("wait")
    });
    (transcript, asked)
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
fn a_dynamic_tool_call_is_answered_from_the_recording() {
    let root = tempfile::tempdir().expect("temp");
    let script = serde_json::json!({"responses": [
        {"toolCall": {"name": "lookup_release", "arguments": {"item": "date"}}},
        {"text": "The release is on the 12th."}
    ]});
    let (recording, asked) = record_session(
        root.path(),
        script,
        &["When is the release?"],
        "The 12th of the month.",
    );
    assert_eq!(asked, 1, "the model called the tool once");
    let workspace = format!(
        "{}={}",
        root.path().join("workspace").display(),
        repo_root().join("fixtures/workspace").display()
    );
    let (code, stdout, stderr) = replay(
        &recording,
        &["--workspace", &workspace, "--json", "--fail-on-divergence"],
    );
    let exact = report(&stdout, &stderr);
    assert_eq!(code, 0, "{exact:#}\n{stderr}");
    assert_eq!(
        exact["modelRequests"]["recorded"], 2,
        "the tool call and the answer after it"
    );
    assert!(
        !exact["notes"].to_string().contains("declined"),
        "{exact:#}"
    );
    // The client's recorded answer is what the replayed Codex got: changed in the recording,
    // the model request after the tool call diverges where the tool's output is.
    let mut changed = 0;
    for entry in std::fs::read_dir(&recording).expect("recording").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "jsonl") {
            let text = std::fs::read_to_string(&path).expect("read");
            if text.contains("The 12th of the month.") {
                std::fs::write(
                    &path,
                    text.replace("The 12th of the month.", "The 13th of the month."),
                )
                .expect("write");
                changed += 1;
            }
        }
    }
    assert_eq!(changed, 1, "the client's answer is in the thread's file");
    let (code, stdout, stderr) = replay(
        &recording,
        &["--workspace", &workspace, "--json", "--fail-on-divergence"],
    );
    let report = report(&stdout, &stderr);
    assert_eq!(code, 1, "{report:#}\n{stderr}");
    let first = report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find_map(|row| row.get("first")))
        .expect("a divergence")
        .clone();
    assert_eq!(first["kind"], "model request", "{first:#}");
    assert!(
        first["at"]
            .as_str()
            .is_some_and(|at| at.ends_with("model-request.2.json")),
        "{first:#}"
    );
    assert!(says(&first, "recorded", "12th"), "{first:#}");
    assert!(says(&first, "replayed", "13th"), "{first:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
async fn an_endpoint_recording_replays_connection_by_connection_and_names_the_endpoint_s_policy() {
    let dir = tempfile::tempdir().expect("temp");
    let workspace = dir.path().join("workspace");
    copy_tree(&repo_root().join("fixtures/workspace"), &workspace);
    let recording = dir.path().join("recording");
    let flags: Vec<std::ffi::OsString> = vec![
        "--offline".into(),
        "--transcript".into(),
        recording.clone().into(),
        "--workspace-root".into(),
        dir.path().into(),
    ];
    let (child, _, mut client) = crate::endpoint::spawned_endpoint(dir.path(), &flags).await;
    let thread = crate::endpoint::start_turn(
        &mut client,
        serde_json::json!({"cwd": workspace, "approvalPolicy": "never"}),
        "What is on the release checklist?",
    )
    .await;
    client
        .until("turn/completed", crate::endpoint::turn_completed(&thread))
        .await;
    drop(client);
    crate::endpoint::stop_spawned(child).await;
    assert!(recording.join("connection-1/connection.jsonl").is_file());
    let mapping = format!(
        "{}={}",
        workspace.display(),
        repo_root().join("fixtures/workspace").display()
    );
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || {
        replay(&recording, &["--workspace", &mapping, "--json"])
    })
    .await
    .expect("join");
    let report = report(&stdout, &stderr);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    let rows = report["rows"].as_array().expect("rows");
    assert!(
        rows.iter().all(|row| row["connection"] == "connection-1"),
        "{report:#}"
    );
    let turn = rows.iter().find(|row| row["turn"] == 1).expect("the turn");
    assert_eq!(turn["modelRequests"], 1, "{report:#}");
    assert_eq!(report["modelRequests"]["recorded"], 1, "{report:#}");
    assert_eq!(report["modelRequests"]["missing"], 0, "{report:#}");
    // Replayed through the stdio slot, not an endpoint: what the endpoint itself answered (its
    // pinned `initialize`) and changed (the sandbox ceiling on a thread's params) is named as a
    // divergence, not hidden (docs/replay.md, "Limits").
    let opening = rows
        .iter()
        .find(|row| row["thread"] == "connection")
        .expect("opening");
    assert_eq!(opening["first"]["path"], "result.userAgent", "{report:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
async fn a_fork_replays_the_turns_before_it_and_sends_the_rest_live() {
    let root = tempfile::tempdir().expect("temp");
    let script = serde_json::json!({"responses": [{"text": "The first answer."}, {"text": "The second answer."}]});
    let root_path = root.path().to_path_buf();
    let (recording, _) = tokio::task::spawn_blocking(move || {
        record_session(
            &root_path,
            script,
            &["First question?", "Second question?"],
            "",
        )
    })
    .await
    .expect("join");
    let upstream = upstream_answering("Another model's second answer.").await;
    let url = upstream.base_url();
    let out = root.path().join("forked");
    let out_arg = out.display().to_string();
    let mapping = format!(
        "{}={}",
        root.path().join("workspace").display(),
        repo_root().join("fixtures/workspace").display()
    );
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || {
        replay(
            &recording,
            &[
                "--workspace",
                &mapping,
                "--until-turn",
                "1",
                "--then-upstream",
                &url,
                "--out",
                &out_arg,
                "--json",
            ],
        )
    })
    .await
    .expect("join");
    let report = report(&stdout, &stderr);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    let verdict = |turn: u64| {
        report["rows"]
            .as_array()
            .and_then(|rows| {
                rows.iter()
                    .find(|row| row["turn"] == turn && row["thread"] != "connection")
            })
            .map(|row| row["verdict"].clone())
    };
    assert_eq!(verdict(1), Some(serde_json::json!("exact")), "{report:#}");
    assert_eq!(verdict(2), Some(serde_json::json!("live")), "{report:#}");
    assert_eq!(report["modelRequests"]["recorded"], 1, "{report:#}");
    assert_eq!(report["modelRequests"]["upstream"], 1, "{report:#}");
    // The upstream got the second turn with the first one's recorded answer in its history.
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body.to_string();
    assert!(
        body.contains("Second question?") && body.contains("The first answer."),
        "{body}"
    );
    let seen = replayed_transcript(&out);
    assert!(
        seen.contains("Another model's second answer."),
        "the second turn went live"
    );
    assert!(
        !seen.contains("The second answer."),
        "the recorded second answer was not replayed"
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/test installs it)"]
fn replaying_with_the_other_route_shows_what_routing_changes_for_the_model() {
    let dir = repo_root().join("fixtures/seed-audit/2026.9.6/direct");
    let (code, stdout, stderr) = replay(
        &dir,
        &[
            "--workspace",
            &fixture_workspace(),
            "--route",
            "spec",
            "--json",
        ],
    );
    let report = report(&stdout, &stderr);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(report["route"], "spec");
    let turn = report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["turn"] == 1))
        .expect("turn 1")
        .clone();
    assert_eq!(turn["verdict"], "diverged", "{report:#}");
    assert_eq!(turn["first"]["kind"], "model request", "{turn:#}");
    let (code, _, stderr) = run_cli(&[
        "replay",
        &dir.display().to_string(),
        "--codex-bin",
        "/bin/true",
        "--route",
        "sideways",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("one of as-sent, spec"), "{stderr}");
}
