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
