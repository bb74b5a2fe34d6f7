//! `clawbridge audit`: hand-made transcripts of an OpenClaw-like client over the repository's
//! workspace, one where the client sent every file where the spec puts it and one where it
//! dropped a file; a link planted in the transcript folder is never read.

use serde_json::{json, Value};

/// A workspace copied from `fixtures/workspace` (bootstrap files only) into `dir/workspace`.
fn workspace(dir: &std::path::Path) -> std::path::PathBuf {
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    for name in [
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "USER.md",
        "HEARTBEAT.md",
    ] {
        std::fs::copy(
            crate::util::repo_root()
                .join("fixtures/workspace")
                .join(name),
            workspace.join(name),
        )
        .expect("copy");
    }
    workspace
}

fn read(workspace: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(workspace.join(name)).expect("file")
}

/// A transcript folder with one thread: `thread/start` with `developer` as its developer
/// instructions, then a plain turn.
fn transcript(
    dir: &std::path::Path,
    workspace: &std::path::Path,
    developer: &str,
) -> std::path::PathBuf {
    let out = dir.join("transcript");
    std::fs::create_dir_all(&out).expect("transcript");
    let lines = [
        json!({"direction": "in", "message": {"id": 1, "method": "thread/start", "params": {"cwd": workspace, "model": "gpt-5.5", "developerInstructions": developer}}}),
        json!({"direction": "out", "message": {"id": 1, "result": {"thread": {"id": "thr-1"}, "model": "gpt-5.5"}}}),
        json!({"direction": "in", "message": {"id": 2, "method": "turn/start", "params": {"threadId": "thr-1", "input": [{"type": "text", "text": "hello"}]}}}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(out.join("thr-1.jsonl"), text).expect("write");
    std::fs::write(
        out.join("connection.jsonl"),
        format!(
            "{}\n",
            json!({"direction": "in", "message": {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "handmade", "version": "1"}}}})
        ),
    )
    .expect("write");
    out
}

fn rows(report: &Value) -> Vec<Value> {
    report["threads"][0]["turns"][0]["rows"]
        .as_array()
        .expect("rows")
        .clone()
}

fn row<'a>(rows: &'a [Value], file: &str) -> &'a Value {
    rows.iter()
        .find(|row| row["file"] == file)
        .unwrap_or_else(|| panic!("{file}: {rows:#?}"))
}

#[test]
fn a_client_that_follows_the_spec_is_as_spec_and_a_dropped_file_is_missing() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = workspace(dir.path());
    let persona = ["SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md"]
        .map(|name| read(&workspace, name))
        .join("\n\n");
    let out = transcript(dir.path(), &workspace, &persona);
    let path = out.display().to_string();
    let (code, stdout, stderr) =
        crate::util::run_cli(&["audit", &path, "--json", "--fail-on", "missing,truncated"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["client"], "handmade 1");
    let all = rows(&report);
    for file in ["SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md"] {
        let found = row(&all, file);
        assert_eq!(found["verdict"], "asSpec", "{found:#}");
        assert_eq!(
            found["openclaw"],
            json!([{"layer": "threadDeveloperInstructions", "how": "whole"}])
        );
    }
    assert_eq!(row(&all, "AGENTS.md")["verdict"], "asSpec");
    assert_eq!(row(&all, "AGENTS.md")["spec"][0]["layer"], "leftToCodex");
    // No capture: the model column is unknown.
    assert_eq!(row(&all, "SOUL.md")["model"], Value::Null);

    // The same thread with SOUL.md dropped: missing, and --fail-on missing fails the command.
    let dropped = ["IDENTITY.md", "USER.md", "TOOLS.md"]
        .map(|name| read(&workspace, name))
        .join("\n\n");
    std::fs::remove_dir_all(&out).expect("clear");
    let out = transcript(dir.path(), &workspace, &dropped);
    let path = out.display().to_string();
    let (code, stdout, stderr) =
        crate::util::run_cli(&["audit", &path, "--json", "--fail-on", "missing"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let all = rows(&report);
    let soul = row(&all, "SOUL.md");
    assert_eq!(soul["verdict"], "missing", "{soul:#}");
    assert!(
        soul["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("thread developer instructions")),
        "{soul:#}"
    );
    assert_eq!(report["verdicts"]["missing"], 1, "{report:#}");
    // Without --fail-on the same audit passes; the table names the verdict.
    let (code, table, _) = crate::util::run_cli(&["audit", &path]);
    assert_eq!(code, 0);
    assert!(
        table.contains("SOUL.md") && table.contains("missing"),
        "{table}"
    );
    // A verdict name that is not one: refused, naming the flag.
    let (code, _, stderr) = crate::util::run_cli(&["audit", &path, "--fail-on", "gone"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--fail-on") && stderr.contains("gone"),
        "{stderr}"
    );
}

/// OpenClaw resumes its thread on a new connection every run: the endpoint's transcript has
/// the thread in each connection's folder (and a request both folders hold). The audit reads
/// it as one thread with its turns in order, counts each file once per turn, and says what to
/// do about each verdict it found.
#[test]
fn a_thread_over_two_connections_is_audited_once_with_a_fix_per_verdict() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = workspace(dir.path());
    let dropped = ["IDENTITY.md", "USER.md", "TOOLS.md"]
        .map(|name| read(&workspace, name))
        .join("\n\n");
    let out = dir.path().join("transcript");
    let start = json!({"atMs": 1, "direction": "in", "message": {"id": 1, "method": "thread/start", "params": {"cwd": workspace, "model": "gpt-5.5", "developerInstructions": dropped}}});
    let turn = |at: u64, text: &str| json!({"atMs": at, "direction": "in", "message": {"id": 2, "method": "turn/start", "params": {"threadId": "thr-1", "input": [{"type": "text", "text": text}]}}});
    let resume = json!({"atMs": 10, "direction": "in", "message": {"id": 1, "method": "thread/resume", "params": {"threadId": "thr-1", "cwd": workspace, "developerInstructions": dropped}}});
    for (connection, lines) in [
        (1, vec![start, turn(2, "first run")]),
        // The second run's connection; its folder also holds the first run's turn, as the
        // thread's other follower saw it.
        (
            2,
            vec![turn(2, "first run"), resume, turn(11, "second run")],
        ),
    ] {
        let folder = out.join(format!("connection-{connection}"));
        std::fs::create_dir_all(&folder).expect("folder");
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(folder.join("thr-1.jsonl"), text).expect("write");
    }
    let path = out.display().to_string();
    let (code, stdout, stderr) = crate::util::run_cli(&["audit", &path, "--json"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let threads = report["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "one thread: {report:#}");
    assert_eq!(
        threads[0]["turns"].as_array().map(Vec::len),
        Some(2),
        "{report:#}"
    );
    assert_eq!(
        report["verdicts"]["missing"], 2,
        "SOUL.md once per turn: {report:#}"
    );
    assert!(
        report["fixes"]["missing"]
            .as_str()
            .is_some_and(|fix| fix.contains("bootstrapMaxChars")),
        "{report:#}"
    );
    assert!(report["fixes"].get("asSpec").is_none(), "{report:#}");
    let (_, table, _) = crate::util::run_cli(&["audit", &path]);
    assert_eq!(table.matches("thread thr-1").count(), 1, "{table}");
    assert!(table.contains("missing: the model never saw it"), "{table}");
}

#[test]
fn a_linked_thread_file_is_not_read_and_an_empty_folder_is_named() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = workspace(dir.path());
    let out = transcript(dir.path(), &workspace, "nothing");
    let elsewhere = dir.path().join("elsewhere.jsonl");
    std::fs::rename(out.join("thr-1.jsonl"), &elsewhere).expect("move");
    std::os::unix::fs::symlink(&elsewhere, out.join("thr-1.jsonl")).expect("link");
    let path = out.display().to_string();
    let (code, stdout, stderr) = crate::util::run_cli(&["audit", &path]);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains("no thread files"), "{stderr}");
}

/// `app-server --audit`: the stdio slot audits each turn as it starts. A stand-in app-server
/// answers `thread/start`, and a client that dropped TOOLS.md starts a turn after the answer:
/// the turn's table on stderr names it missing, and `audit.jsonl` holds the rows; without
/// `--audit` neither is there, and `clawbridge audit` of the same folder does not take
/// `audit.jsonl` for a thread.
#[test]
fn app_server_audit_tells_each_turn_as_it_starts() {
    use std::io::{BufRead as _, Write as _};
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("dir");
    let workspace = workspace(dir.path());
    let fake = dir.path().join("fake-codex");
    std::fs::write(
        &fake,
        "#!/bin/sh\nwhile IFS= read -r line; do\n  case \"$line\" in\n    *'\"thread/start\"'*) printf '%s\\n' '{\"id\":1,\"result\":{\"thread\":{\"id\":\"thr-live\"},\"model\":\"gpt-5.5\"}}' ;;\n  esac\ndone\n",
    )
    .expect("fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let developer = ["SOUL.md", "IDENTITY.md", "USER.md"]
        .map(|name| read(&workspace, name))
        .join("\n\n");
    let start = [
        json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "handmade", "version": "1"}}}),
        json!({"id": 1, "method": "thread/start", "params": {"cwd": workspace, "model": "gpt-5.5", "developerInstructions": developer}}),
    ];
    let turn = json!({"id": 2, "method": "turn/start", "params": {"threadId": "thr-live", "input": [{"type": "text", "text": "hello"}]}});
    let run = |audit: bool, transcript: &std::path::Path| {
        let mut command = crate::util::clawbridge();
        command.args(["app-server", "--no-check", "--codex-bin"]);
        command.arg(&fake).arg("--transcript").arg(transcript);
        if audit {
            command.arg("--audit");
        }
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        for line in &start {
            writeln!(stdin, "{line}").expect("write");
        }
        // As a client does: the turn starts once the thread is there.
        let mut answer = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut answer)
            .expect("answer");
        assert!(answer.contains("thr-live"), "{answer}");
        writeln!(stdin, "{turn}").expect("write");
        drop(stdin);
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr).to_string()
    };
    let transcript = dir.path().join("live");
    let stderr = run(true, &transcript);
    let tools_row = stderr
        .lines()
        .find(|line| line.trim_start().starts_with("TOOLS.md"))
        .unwrap_or_else(|| panic!("the turn's table: {stderr}"));
    assert!(tools_row.ends_with("missing"), "{stderr}");
    assert!(
        stderr.contains("clawbridge audit: thread thr-live"),
        "{stderr}"
    );
    let logged: Vec<Value> = std::fs::read_to_string(transcript.join("audit.jsonl"))
        .expect("audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect();
    assert_eq!(logged.len(), 1, "{logged:#?}");
    assert_eq!(logged[0]["thread"], "thr-live");
    let rows = logged[0]["audit"]["rows"].as_array().expect("rows");
    assert_eq!(row(rows, "TOOLS.md")["verdict"], "missing");
    assert_eq!(row(rows, "SOUL.md")["verdict"], "asSpec");
    // The finished folder audits the same, and audit.jsonl is no thread of it.
    let path = transcript.display().to_string();
    let (code, stdout, stderr) = crate::util::run_cli(&["audit", &path, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        report["threads"].as_array().map(Vec::len),
        Some(1),
        "{report:#}"
    );
    assert_eq!(row(&self::rows(&report), "TOOLS.md")["verdict"], "missing");

    let quiet = dir.path().join("quiet");
    let stderr = run(false, &quiet);
    assert!(!stderr.contains("clawbridge audit"), "{stderr}");
    assert!(!quiet.join("audit.jsonl").exists());
}

/// `--workspace` and `--session-key`: a transcript recorded elsewhere (its `cwd` is on no disk
/// here) is audited against the workspace given, and a session key the params do not name
/// decides the spec's side (a subagent's minimal prompt sends fewer files); both are stated as
/// given.
#[test]
fn a_given_workspace_and_session_key_replace_what_the_params_say() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = workspace(dir.path());
    let persona = ["SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md"]
        .map(|name| read(&workspace, name))
        .join("\n\n");
    let elsewhere = std::path::Path::new("/nowhere/recorded-elsewhere/workspace");
    let out = transcript(dir.path(), elsewhere, &persona);
    let path = out.display().to_string();
    // As recorded: the workspace is not there.
    let (_, stdout, _) = crate::util::run_cli(&["audit", &path, "--json"]);
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert!(
        report["threads"][0]["skipped"].is_string(),
        "no workspace at the recorded cwd: {report:#}"
    );
    let given = workspace.display().to_string();
    let (code, stdout, stderr) =
        crate::util::run_cli(&["audit", &path, "--json", "--workspace", &given]);
    assert_eq!(code, 0, "{stderr}");
    let main: Value = serde_json::from_str(&stdout).expect("json");
    let inferred = main["threads"][0]["turns"][0]["inferred"].to_string();
    assert!(inferred.contains(&format!("{given} (given)")), "{inferred}");
    assert_eq!(row(&rows(&main), "SOUL.md")["verdict"], "asSpec");
    let (code, stdout, stderr) = crate::util::run_cli(&[
        "audit",
        &path,
        "--json",
        "--workspace",
        &given,
        "--session-key",
        "agent:main:subagent:research-1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let subagent: Value = serde_json::from_str(&stdout).expect("json");
    let inferred = subagent["threads"][0]["turns"][0]["inferred"].to_string();
    assert!(
        inferred.contains("agent:main:subagent:research-1 (given)"),
        "{inferred}"
    );
    let specs = |report: &Value| -> Vec<String> {
        rows(report)
            .iter()
            .map(|row| format!("{} {}", row["file"], row["spec"]))
            .collect()
    };
    assert_ne!(
        specs(&main),
        specs(&subagent),
        "the subagent's spec differs from a direct session's"
    );
}

/// `transcript show`: a real OpenClaw heartbeat run's transcript reads as who said what (the
/// golden), `--thread` picks one thread, `--html` writes the same as a private page, and a
/// folder with no transcript is refused naming it.
#[test]
fn transcript_show_reads_a_real_run_as_a_conversation() {
    let dir = crate::util::repo_root().join("fixtures/seed-audit/2026.9.6/heartbeat");
    let dir_text = dir.display().to_string();
    let (code, text, stderr) = crate::util::run_cli(&["transcript", "show", &dir_text]);
    assert_eq!(code, 0, "{stderr}");
    insta::assert_snapshot!("transcript_show_heartbeat", text);

    let (code, one, _) = crate::util::run_cli(&[
        "transcript",
        "show",
        &dir_text,
        "--thread",
        "id-11",
        "--full",
    ]);
    assert_eq!(code, 0);
    assert!(one.starts_with("thread id-11"), "{one}");
    assert!(
        !one.contains("thread id-4") && !one.contains("more characters"),
        "{one}"
    );

    let out = tempfile::tempdir().expect("out");
    let page = out.path().join("transcript.html");
    let (code, _, stderr) = crate::util::run_cli(&[
        "transcript",
        "show",
        &dir_text,
        "--html",
        page.to_str().expect("utf-8"),
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("<td class=\"w\">user</td>"), "{html}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&page).expect("page").permissions().mode();
    assert_eq!(mode & 0o077, 0, "the page holds the conversation: private");

    let (code, _, stderr) =
        crate::util::run_cli(&["transcript", "show", out.path().to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no transcript files"), "{stderr}");
}

/// Protection: `transcript show` escapes what a model, a command or a client put in a
/// transcript (a title set, a screen clear, a bell, a direction override), as `audit` does; the
/// text is still there to read.
#[test]
fn transcript_show_prints_no_terminal_escapes() {
    let dir = tempfile::tempdir().expect("dir");
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}txt.exe";
    let lines = [
        serde_json::json!({"direction": "in", "message": {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": format!("evil{hostile}"), "version": "1"}}}}),
        serde_json::json!({"direction": "in", "message": {"id": 2, "method": "turn/start", "params": {"threadId": "t-1", "input": [{"type": "text", "text": format!("hi {hostile}")}]}}}),
        serde_json::json!({"direction": "out", "message": {"method": "item/completed", "params": {"threadId": "t-1", "turnId": "u-1", "item": {"type": "agentMessage", "id": "m-1", "text": format!("answer {hostile}")}}}}),
        serde_json::json!({"direction": "out", "message": {"method": "item/completed", "params": {"threadId": "t-1", "turnId": "u-1", "item": {"type": "commandExecution", "id": "c-1", "command": format!("echo {hostile}"), "aggregatedOutput": format!("out {hostile}"), "status": "completed", "exitCode": 0}}}}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(dir.path().join("t-1.jsonl"), text).expect("transcript");
    let (code, shown, stderr) = crate::util::run_cli(&[
        "transcript",
        "show",
        dir.path().to_str().expect("utf-8"),
        "--full",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !shown.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "raw escapes reached the terminal: {shown:?}"
    );
    for said in ["hi ", "answer ", "echo ", "out "] {
        assert!(
            shown.contains(&format!("{said}\\u{{001b}}]0;owned")),
            "{said}: {shown}"
        );
    }
}
