//! The binary as a user runs it: outputs, exit codes and error messages.

use clawbridge::TRUNCATION_NOTICE;
use serde_json::{json, Value};

use crate::util::*;

fn write_run(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("run.json");
    std::fs::write(&path, text).expect("write run");
    path.display().to_string()
}

#[test]
fn params_prints_one_json_object() {
    let state = tempfile::tempdir().expect("state");
    let (code, stdout, _) = run_cli(&[
        "params",
        "fixtures/runs/telegram-direct.json",
        "--state-dir",
        &state.path().display().to_string(),
    ]);
    assert_eq!(code, 0);
    let value: Value = serde_json::from_str(&stdout).expect("json on stdout");
    assert!(value.get("threadStart").is_some());
    assert!(value.get("turnStart").is_some());
    assert_eq!(value["experimentalApi"], true);
    assert_eq!(value["turnStart"]["threadId"], "<thread-id>");
}

#[test]
fn unknown_run_key_is_named() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_run(&dir, r#"{"workspace": ".", "mesage": "hi"}"#);
    let (code, stdout, stderr) = run_cli(&["params", &path]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("mesage") && stderr.contains("run.json"),
        "{stderr}"
    );
    let path = write_run(
        &dir,
        r#"{"workspace": ".", "channel": {"sender": {"nam": "x"}}}"#,
    );
    let (code, _, stderr) = run_cli(&["params", &path]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("channel.sender") && stderr.contains("nam"),
        "{stderr}"
    );
}

#[test]
fn missing_workspace_is_named() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_run(&dir, r#"{"workspace": "does-not-exist"}"#);
    let (code, _, stderr) = run_cli(&["params", &path]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("field `workspace`") && stderr.contains("does-not-exist"),
        "{stderr}"
    );
}

#[test]
fn bad_values_and_files_exit_2_without_panicking() {
    let dir = tempfile::tempdir().expect("dir");
    for (text, needle) in [
        (r#"{"workspace": ".", "trigger": "sometimes"}"#, "trigger"),
        (
            r#"{"workspace": ".", "approvalPolicy": "on-failure"}"#,
            "approvalPolicy",
        ),
        (
            r#"{"workspace": ".", "tools": [{"name": "x", "inputSchema": 3}]}"#,
            "tools[0].inputSchema",
        ),
        (
            r#"{"workspace": ".", "tools": ["missing-tools.json"]}"#,
            "tools[0]",
        ),
        (r#"{"workspace": ".", "config": []}"#, "config"),
        ("{not json", "run.json"),
    ] {
        let path = write_run(&dir, text);
        let (code, _, stderr) = run_cli(&["params", &path]);
        assert_eq!(code, 2, "{text}: {stderr}");
        assert!(stderr.contains(needle), "{text}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, _, stderr) = run_cli(&["params", "no/such/run.json"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no/such/run.json"), "{stderr}");
    let (code, _, _) = run_cli(&["params"]);
    assert_eq!(code, 2);
}

#[test]
fn malformed_skill_warns_on_stderr_and_still_succeeds() {
    let ws = TestWorkspace::full();
    ws.write("skills/broken/SKILL.md", "---\nname: broken\n");
    let dir = tempfile::tempdir().expect("dir");
    let path = write_run(
        &dir,
        &format!(r#"{{"workspace": "{}"}}"#, ws.path().display()),
    );
    let (code, stdout, stderr) = run_cli(&["params", &path]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("skills/broken/SKILL.md"), "{stderr}");
    assert!(stdout.contains("weather"));
}

#[test]
fn unknown_config_keys_warn() {
    let ws = TestWorkspace::full();
    let dir = tempfile::tempdir().expect("dir");
    let path = write_run(
        &dir,
        &format!(
            r#"{{"workspace": "{}", "config": {{"agents": {{"defaults": {{"bootstrapMaxChar": 5}}}}}}}}"#,
            ws.path().display()
        ),
    );
    let (code, _, stderr) = run_cli(&["params", &path]);
    assert_eq!(code, 0);
    assert!(
        stderr.contains("agents.defaults.bootstrapMaxChar"),
        "{stderr}"
    );
}

#[test]
fn embedded_runs_have_no_codex_params() {
    let ws = TestWorkspace::full();
    let dir = tempfile::tempdir().expect("dir");
    let path = write_run(
        &dir,
        &format!(
            r#"{{"workspace": "{}", "harness": "embedded"}}"#,
            ws.path().display()
        ),
    );
    let (code, _, stderr) = run_cli(&["params", &path]);
    assert_eq!(code, 2);
    assert!(stderr.contains("harness"), "{stderr}");
}

#[test]
fn context_lists_every_file_with_its_surface() {
    let (code, stdout, _) = run_cli(&[
        "context",
        "fixtures/runs/telegram-direct.json",
        "--json",
        "--detail",
    ]);
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let surfaces: Vec<(String, String)> = report["bootstrap"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap_or_default().to_string(),
                f["surface"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expect = [
        ("AGENTS.md", "nativeCodex"),
        ("SOUL.md", "threadDeveloperInstructions"),
        ("TOOLS.md", "threadDeveloperInstructions"),
        ("IDENTITY.md", "threadDeveloperInstructions"),
        ("USER.md", "threadDeveloperInstructions"),
        ("HEARTBEAT.md", "omitted"),
        ("MEMORY.md", "turnInput"),
    ];
    let expect: Vec<(String, String)> = expect
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(surfaces, expect);
    assert_eq!(report["skills"]["eligible"], 1);
    assert_eq!(report["tools"]["count"], 15);
    assert_eq!(report["detail"]["tools"].as_array().map(Vec::len), Some(15));

    let (code, text, _) = run_cli(&["context", "fixtures/runs/heartbeat.json"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("HEARTBEAT.md") && text.contains("pointer only"),
        "{text}"
    );
}

#[test]
fn a_prompt_hook_that_prints_without_end_is_stopped_at_the_cap() {
    let (code, stdout, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/telegram-direct.json",
        "--before-prompt-build",
        "yes",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("`yes`") && stderr.contains("printed more than"),
        "{stderr}"
    );
}

#[test]
fn a_bootstrap_hook_that_prints_without_end_is_stopped_at_the_cap() {
    let (code, stdout, stderr) = run_cli(&[
        "params",
        "fixtures/runs/telegram-direct.json",
        "--bootstrap-hook",
        "yes",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("bootstrap hook `yes` failed") && stderr.contains("printed more than"),
        "{stderr}"
    );
}

#[test]
fn a_run_document_must_be_a_json_object() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("run.json");
    std::fs::write(&path, r#"["workspace"]"#).expect("write");
    let (code, _, stderr) = run_cli(&["params", &path.display().to_string()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("must be a JSON object"), "{stderr}");
}

#[test]
fn model_slugs_cannot_leave_the_out_dir_and_catalogs_are_capped() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out/inner");
    let catalog = dir.path().join("models.json");
    std::fs::write(
        &catalog,
        serde_json::json!({"models": [{"slug": "../../x", "base_instructions": "hi"}]}).to_string(),
    )
    .expect("write");
    let (code, _, stderr) = run_cli(&[
        "sync-codex-model",
        "--catalog",
        &catalog.display().to_string(),
        "--model",
        "../../x",
        "--out-dir",
        &out.display().to_string(),
    ]);
    // Sync errors exit 1 (docs/snapshots.md §6.4).
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--model ../../x"), "{stderr}");
    assert!(!dir.path().join("x.pragmatic.instructions.md").exists());
    assert!(!out.exists(), "nothing written");
    let (code, _, stderr) = run_cli(&["sync-codex-model", "--catalog", "/dev/zero"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("/dev/zero"), "{stderr}");
    // W5: an unsupported personality is the sync's error too, named, exit 1 (not clap's 2).
    let (code, _, stderr) = run_cli(&["sync-codex-model", "--personality", "cheerful"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cheerful"), "{stderr}");
    // A flag that does not exist stays a usage error.
    let (code, _, _) = run_cli(&["sync-codex-model", "--bogus"]);
    assert_eq!(code, 2);
}

#[test]
fn previews_never_use_up_a_once_truncation_notice() {
    use clawbridge::NoticeMemory;
    use clawbridge::WarningLedger;
    let ws = TestWorkspace::empty();
    ws.write("SOUL.md", &"s".repeat(25_000));
    let state = tempfile::tempdir().expect("state");
    let document = json!({
        "workspace": ws.path(),
        "sessionKey": "agent:main:main",
        "config": {"agents": {"defaults": {"bootstrapPromptTruncationWarning": "once"}}},
    });
    let run_file = ws.path().join("run.json");
    std::fs::write(&run_file, document.to_string()).expect("write run");
    let state_dir = state.path().to_str().expect("utf-8");
    let run_file = run_file.to_str().expect("utf-8");
    for command in ["params", "context", "params"] {
        let (code, stdout, stderr) = run_cli(&[command, run_file, "--state-dir", state_dir]);
        assert_eq!(code, 0, "{command}: {stderr}");
        let shown = match command {
            "params" => stdout.contains(TRUNCATION_NOTICE),
            _ => stdout.contains("Truncated (notice shown)"),
        };
        assert!(
            shown,
            "{command} shows the notice the next turn would show:\n{stdout}"
        );
    }
    assert!(
        !state.path().join("truncation-warnings.json").exists(),
        "a preview records nothing"
    );
    // A turn actually sent records it; the next preview then shows what the next turn would.
    let run = clawbridge::Run::load(std::path::Path::new(run_file)).expect("run");
    let (translation, _) = translate_run(&run);
    let (session, signature) = translation.routed.once_notice.clone().expect("once notice");
    let ledger = WarningLedger::in_dir(state.path());
    assert!(ledger.first_showing(&session, &signature).expect("record"));
    let (_, stdout, _) = run_cli(&["params", run_file, "--state-dir", state_dir]);
    assert!(
        !stdout.contains(TRUNCATION_NOTICE),
        "already shown to this session"
    );
}

#[test]
fn every_new_input_is_validated_with_an_error_naming_the_field() {
    let ws = TestWorkspace::full();
    ws.write("chart.png", "not really a png, but a regular file");
    ws.write("notes.txt", "text");
    let cases = [
        (json!({"reasoningLevel": "loud"}), "reasoningLevel"),
        (json!({"serviceTier": "turbo"}), "serviceTier"),
        (json!({"openaiAuth": "password"}), "openaiAuth"),
        (json!({"images": ["missing.png"]}), "images[0]"),
        (json!({"images": ["notes.txt"]}), "images[0]"),
        (json!({"images": ["."]}), "images[0]"),
        (json!({"docsPath": "/docs\n## Safety"}), "docsPath"),
        (json!({"sourcePath": ""}), "sourcePath"),
        (
            json!({"workspaceNotes": ["ok", "two\nlines"]}),
            "workspaceNotes[1]",
        ),
        (json!({"pluginGuidance": ["  "]}), "pluginGuidance[0]"),
        (json!({"runtime": {"node": "v22\r\n"}}), "runtime.node"),
        (json!({"runtime": {"nod": "v22"}}), "runtime"),
        (
            json!({"sandboxInfo": {"workspaceAccess": "write"}}),
            "sandboxInfo.workspaceAccess",
        ),
        (
            json!({"sandboxInfo": {"elevated": {"allowed": true, "defaultLevel": "root"}}}),
            "sandboxInfo.elevated.defaultLevel",
        ),
        (
            json!({"sandboxInfo": {"containerWorkspaceDir": "/w\u{0007}"}}),
            "sandboxInfo.containerWorkspaceDir",
        ),
        (
            json!({"channel": {"name": "telegram", "capabilities": ["inline buttons"]}}),
            "channel.capabilities[0]",
        ),
        (
            json!({"channel": {"reactionLevel": "extensive"}}),
            "channel.reactionLevel",
        ),
        (
            json!({"channel": {"name": "telegram", "messageToolHints": ["a\nb"]}}),
            "channel.messageToolHints[0]",
        ),
        (json!({"setupComplete": "yes"}), "setupComplete"),
    ];
    for (fields, field) in cases {
        let mut document = json!({"workspace": ws.path()});
        if let (Some(target), Value::Object(extra)) = (document.as_object_mut(), fields.clone()) {
            target.extend(extra);
        }
        let file = ws.path().join("run.json");
        std::fs::write(&file, document.to_string()).expect("write");
        let (code, _, stderr) = run_cli(&["params", file.to_str().expect("utf-8")]);
        assert_eq!(code, 2, "{fields}: {stderr}");
        assert!(
            stderr.contains(field),
            "{fields}: the error names `{field}`: {stderr}"
        );
    }
    // The good forms are accepted.
    let document = json!({"workspace": ws.path(), "images": ["chart.png"], "serviceTier": "fast",
                          "reasoningLevel": "on", "setupComplete": false});
    let file = ws.path().join("run.json");
    std::fs::write(&file, document.to_string()).expect("write");
    let (code, stdout, stderr) = run_cli(&["params", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"localImage\""), "{stdout}");
}

#[test]
fn the_run_document_docs_list_exactly_the_config_keys_of_the_table() {
    use clawbridge::KNOWN_CONFIG_KEYS as KNOWN;
    let readme =
        std::fs::read_to_string(repo_root().join("docs/run-document.md")).expect("run-document.md");
    let start = readme
        .find("OpenClaw config keys that clawbridge reads")
        .expect("the config key list");
    let end = start
        + readme[start..]
            .find("Any other key is reported")
            .expect("end");
    let listed = &readme[start..end];
    let (agent_part, rest) = listed.split_at(listed.find("* agents:").expect("agents bullet"));
    let names = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .filter(|name| {
                name.chars()
                    .next()
                    .is_some_and(|ch| ch.is_ascii_lowercase())
            })
            .filter(|name| {
                !name.contains(' ')
                    && !matches!(*name, "agentId" | "off" | "once" | "always" | "30m")
            })
            .map(str::to_string)
            .collect()
    };
    let per_agent: Vec<String> = names(agent_part)
        .into_iter()
        .filter(|name| !name.starts_with("agents.") && name != "KEY" && !name.contains('/'))
        .collect();
    let mut documented: Vec<String> = names(rest);
    for name in &per_agent {
        documented.push(format!("agents.list[].{name}"));
        documented.push(format!("agents.defaults.{name}"));
    }
    documented.sort();
    documented.dedup();
    let mut known: Vec<String> = KNOWN.iter().map(|key| key.to_string()).collect();
    known.sort();
    assert_eq!(
        documented, known,
        "docs/run-document.md's config key list and src/config/keys.rs"
    );
}

#[test]
fn completions_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, stdout, stderr) = run_cli(&["completions", shell]);
        assert_eq!(code, 0, "{stderr}");
        for command in ["params", "serve", "doctor", "schema"] {
            assert!(
                stdout.contains(command),
                "{shell} completions lack {command}"
            );
        }
    }
    let (code, _, _) = run_cli(&["completions", "no-such-shell"]);
    assert_eq!(code, 2);
}

/// `clawbridge` runs `params`, `prompt` and `context` itself and hands every other command line
/// to `clawbridge-runtime` beside it, in the same process; without the runtime the one-shot
/// commands still work and the others say what is missing.
#[test]
fn the_front_runs_one_shot_commands_and_hands_the_rest_to_the_runtime() {
    use crate::util::OutputRetryingBusy;
    use std::os::unix::process::CommandExt;
    let alone = tempfile::tempdir().expect("dir");
    let front = alone.path().join("clawbridge");
    std::fs::copy(env!("CARGO_BIN_EXE_clawbridge"), &front).expect("copy the front");
    let workspace = tempfile::tempdir().expect("workspace");
    let run = write_run(&workspace, r#"{"workspace": "."}"#);
    let state = tempfile::tempdir().expect("state");
    let state = state.path().display().to_string();
    let output = std::process::Command::new(&front)
        .args(["params", &run, "--state-dir", &state])
        .output_retrying_busy()
        .expect("spawn the front alone");
    assert!(output.status.success(), "{output:?}");
    let params: Value = serde_json::from_slice(&output.stdout).expect("params JSON");
    assert!(params.get("threadStart").is_some());
    // Anything else needs the runtime, and says so.
    let output = std::process::Command::new(&front)
        .args(["schema", "run-document"])
        .output_retrying_busy()
        .expect("spawn the front alone");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("clawbridge-runtime is missing"), "{stderr}");
    assert!(output.stdout.is_empty());
    // Beside it, the runtime answers with the same output the runtime gives directly.
    let (code, through_front, _) = run_cli(&["schema", "run-document"]);
    assert_eq!(code, 0);
    let direct = std::process::Command::new(env!("CARGO_BIN_EXE_clawbridge-runtime"))
        .args(["schema", "run-document"])
        .output()
        .expect("spawn the runtime");
    assert_eq!(through_front.as_bytes(), direct.stdout.as_slice());
    // The front parses its own commands with a parser of its own: help and usage errors read
    // exactly as the runtime's.
    for args in [
        &["params", "--help"][..],
        &["-v", "context", "--help"],
        &["prompt", "--mode", "bogus", "x.json"],
        // Answered by the front itself, as the runtime's clap answers it.
        &["--version"],
        &["-V"],
    ] {
        let front = clawbridge().args(args).output().expect("front");
        // As the front execs it: argv[0] is the program the user typed.
        let runtime = std::process::Command::new(env!("CARGO_BIN_EXE_clawbridge-runtime"))
            .arg0(env!("CARGO_BIN_EXE_clawbridge"))
            .args(args)
            .output()
            .expect("runtime");
        assert_eq!(front.status.code(), runtime.status.code(), "{args:?}");
        assert_eq!(front.stdout, runtime.stdout, "{args:?}");
        assert_eq!(front.stderr, runtime.stderr, "{args:?}");
    }
}

/// Logs redirected to a file hold no escape codes; `--color always` asks for them, `never`
/// refuses them (the warning here: a bootstrap file linking out of the workspace).
#[test]
fn logs_are_coloured_only_when_asked_or_on_a_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("AGENTS.md")).expect("link");
    let run = write_run(&dir, r#"{"workspace": ".", "message": "hi"}"#);
    let stderr = |flags: &[&str]| {
        let output = clawbridge()
            .args(flags)
            .args(["context", &run])
            .env_remove("NO_COLOR")
            .output()
            .expect("run");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stderr).expect("utf-8")
    };
    let plain = stderr(&[]);
    assert!(
        plain.contains("WARN") && plain.contains("AGENTS.md"),
        "{plain}"
    );
    assert!(
        !plain.contains('\u{1b}'),
        "no escape codes off a terminal: {plain:?}"
    );
    assert!(stderr(&["--color", "always"]).contains("\u{1b}["));
    assert!(!stderr(&["--color", "never"]).contains('\u{1b}'));
}

/// Every Markdown table of the README and docs/ renders on GitHub: a run of `|` lines starts
/// with a header and its delimiter row, and every row has the header's number of cells (GitHub
/// ends a table at a blank line, so a table broken by one leaves its later rows as loose text
/// without a delimiter row: this fails then). Pipes escaped as `\|` are not cell borders.
#[test]
fn markdown_tables_render() {
    let mut files = vec![repo_root().join("README.md")];
    for entry in std::fs::read_dir(repo_root().join("docs")).expect("docs") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|ext| ext == "md") {
            files.push(path);
        }
    }
    let cells = |line: &str| -> usize {
        let bytes = line.trim().as_bytes();
        let borders = bytes
            .iter()
            .enumerate()
            .filter(|(at, byte)| **byte == b'|' && (*at == 0 || bytes[at - 1] != b'\\'))
            .count();
        borders.saturating_sub(1)
    };
    let delimiter = regex::Regex::new(r"^\|(\s*:?-+:?\s*\|)+\s*$").expect("regex");
    let mut tables = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let mut fenced = false;
        let mut block: Vec<(usize, &str)> = Vec::new();
        let lines: Vec<&str> = text.lines().collect();
        for (number, line) in lines
            .iter()
            .enumerate()
            .chain(std::iter::once((lines.len(), &"")))
        {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if !fenced && line.trim_start().starts_with('|') {
                block.push((number + 1, line));
                continue;
            }
            if let Some(&(first, header)) = block.first() {
                let name = file.display();
                assert!(
                    block.len() >= 2 && delimiter.is_match(block[1].1.trim()),
                    "{name}:{first}: a table row with no header and delimiter row above it (a blank line inside a table?)"
                );
                let width = cells(header);
                for (number, row) in &block {
                    assert_eq!(cells(row), width, "{name}:{number}: {row}");
                }
                tables += 1;
            }
            block.clear();
        }
    }
    assert!(tables >= 10, "found {tables} tables");
}

/// The supported Codex versions are one table: docs/codex-compat.md shows the same rows as
/// fixtures/codex-versions.tsv, which the binary's constants come from.
#[test]
fn the_codex_versions_table_is_the_one_the_docs_show() {
    let table = std::fs::read_to_string(repo_root().join("fixtures/codex-versions.tsv"))
        .expect("codex-versions.tsv");
    let rows: Vec<String> = table
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| format!("| {} |", line.split('\t').collect::<Vec<_>>().join(" | ")))
        .collect();
    let docs = std::fs::read_to_string(repo_root().join("docs/codex-compat.md"))
        .expect("docs")
        .replace('`', "");
    for row in &rows {
        assert!(
            docs.contains(row.as_str()),
            "docs/codex-compat.md lacks {row}"
        );
    }
    let versions: Vec<&str> = clawbridge::CODEX_VERSIONS.iter().map(|row| row.0).collect();
    assert_eq!(rows.len(), versions.len());
    assert!(versions.contains(&clawbridge::PINNED_CODEX_VERSION));
    assert_eq!(
        versions.last(),
        Some(&clawbridge::NEWEST_TESTED_CODEX_VERSION)
    );
    assert_eq!(
        clawbridge::supported_range(),
        format!(
            "{} to {}",
            versions[0],
            clawbridge::NEWEST_TESTED_CODEX_VERSION
        )
    );
}

/// `clawbridge path` names the native front beside the runtime (what OpenClaw's
/// appServer.command needs), the same file cargo built.
#[test]
fn path_names_the_native_executable() {
    let (code, stdout, stderr) = run_cli(&["path"]);
    assert_eq!(code, 0, "{stderr}");
    let printed = std::path::PathBuf::from(stdout.trim());
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_clawbridge"))
        .canonicalize()
        .expect("built");
    assert_eq!(printed, built);
}

/// `app-server report` and `app-server status` are commands of their own, not words handed to
/// Codex: each answers `--help` with its own usage (exit 0), a missing argument is a usage error
/// naming it (exit 2), and the word may follow the proxy's own flags.
#[test]
fn app_server_report_and_status_are_commands_with_their_own_help() {
    for (command, usage) in [
        ("report", "clawbridge app-server report DIR [--json]"),
        ("status", "clawbridge app-server status --listen URL"),
    ] {
        let (code, stdout, stderr) = crate::util::run_cli(&["app-server", command, "--help"]);
        assert_eq!(code, 0, "{command}: {stderr}");
        assert!(stdout.contains(usage), "{command}: {stdout}");
    }
    let (code, _, stderr) = crate::util::run_cli(&["app-server", "status"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--listen"), "{stderr}");
    let (code, _, stderr) = crate::util::run_cli(&["app-server", "report"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("<DIR>"), "{stderr}");
    // After the proxy's own flags: still the status command (nothing listens there).
    let (code, _, stderr) = crate::util::run_cli(&[
        "app-server",
        "--listen",
        "ws://127.0.0.1:9",
        "status",
        "--token-file",
        "/nonexistent/token",
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("/nonexistent/token"), "{stderr}");
}

/// Protection (Security 3, item 3): the operator's name is reserved. A client named `operator`
/// would own, and act on, every run and session the operator's token starts, whatever its role:
/// `client add operator` (any case) is refused, and a clients file that names one is refused
/// where it is read, naming the file and why.
#[test]
fn no_client_may_take_the_operator_s_name() {
    let state = tempfile::tempdir().expect("state");
    let state_arg = state.path().display().to_string();
    for name in ["operator", "Operator"] {
        let (code, stdout, stderr) =
            crate::util::run_cli(&["client", "add", name, "--state-dir", &state_arg]);
        assert_eq!(code, 2, "{name}: {stdout}{stderr}");
        assert!(stderr.contains("reserved"), "{stderr}");
        assert!(stdout.trim().is_empty(), "no token is printed: {stdout}");
    }
    assert!(!state.path().join("clients.json").exists());
    // A planted file naming one.
    let planted = serde_json::json!({"clients": [{
        "name": "operator",
        "sha256": clawbridge::token_sha256("planted-token-0123456789"),
        "operator": false
    }]});
    crate::util::write_private(&state.path().join("clients.json"), &planted.to_string());
    let (code, _, stderr) = crate::util::run_cli(&["client", "list", "--state-dir", &state_arg]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("clients.json") && stderr.contains("reserved"),
        "{stderr}"
    );
}

/// Protection (Security 3, item 12): the scripts that install a Codex version take exactly
/// `X.Y.Z`. A string that only looks like one (`1.2.3/../../x`, which the old glob accepted) is
/// refused before anything is installed or any folder named after it.
#[test]
fn the_codex_scripts_take_only_a_plain_version() {
    let root = repo_root();
    for bad in [
        "1.2.3/../../x",
        "1.2.3-evil",
        "1.2",
        "../0.169.0",
        "0.169.0 ",
    ] {
        let compat = std::process::Command::new(root.join("scripts/codex-compat"))
            .args([bad, "--no-tests"])
            .output()
            .expect("codex-compat");
        assert_eq!(compat.status.code(), Some(2), "codex-compat {bad:?}");
        assert!(
            String::from_utf8_lossy(&compat.stderr).contains("is not a version"),
            "{bad:?}: {}",
            String::from_utf8_lossy(&compat.stderr)
        );
        let install = std::process::Command::new(root.join("scripts/install-codex"))
            .env("CODEX_VERSION", bad)
            .output()
            .expect("install-codex");
        assert_eq!(install.status.code(), Some(2), "install-codex {bad:?}");
        assert!(!root.join(".tools").join(format!("codex-{bad}")).exists());
    }
}

/// Protection (Security 3, item 6): `schema diff` reads its folders' files as regular files of at
/// most the schema cap. A FIFO among them (which hung it for ever) ends the command at once.
#[test]
fn schema_diff_never_hangs_on_a_fifo() {
    let dir = tempfile::tempdir().expect("dir");
    let copy = |name: &str| {
        let target = dir.path().join(name);
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(repo_root().join("fixtures/codex-schema/0.169.0"))
            .arg(&target)
            .status()
            .expect("cp");
        assert!(status.success());
        target
    };
    let old = copy("old");
    let new = copy("new");
    let fifo = new.join("DynamicToolCallParams.json");
    std::fs::remove_file(&fifo).expect("remove");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let mut child = crate::util::clawbridge()
        .args(["schema", "diff"])
        .arg(&old)
        .arg(&new)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("schema diff");
    let ended = crate::util::poll(std::time::Duration::from_secs(20), || {
        child.try_wait().ok().flatten()
    });
    if ended.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(ended.is_some(), "schema diff hung on a FIFO");
}

/// `serve --listen` and `app-server --listen` take the same forms (`ws://` or not, `localhost`
/// for 127.0.0.1), and a host name is refused saying why (it is not looked up).
#[test]
fn listen_takes_localhost_and_ws_forms_and_says_why_a_name_is_refused() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().expect("dir");
    let roots = dir.path().join("roots");
    std::fs::create_dir(&roots).expect("roots");
    let mut child = clawbridge()
        .args(["serve", "--listen", "ws://localhost:0", "--workspace-root"])
        .arg(&roots)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let mut address = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut address)
        .expect("address");
    let _ = child.kill();
    let _ = child.wait();
    assert!(address.starts_with("127.0.0.1:"), "{address}");
    for args in [
        vec!["serve", "--listen", "example.com:7077"],
        vec!["app-server", "--listen", "ws://example.com:19175"],
    ] {
        let output = clawbridge()
            .args(&args)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("host name") && stderr.contains("localhost:PORT"),
            "{stderr}"
        );
    }
}

/// Help fits the terminal: at 80 columns no line of `--help` or `-h` (top level and every
/// command's) is wider, and the developer commands are listed apart from the operator's ones
/// while still parsing and completing.
#[test]
fn help_is_wrapped_and_groups_developer_commands() {
    let help = |args: &[&str]| {
        let output = clawbridge()
            .args(args)
            .env("COLUMNS", "80")
            .output()
            .expect("help");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let top = help(&["--help"]);
    let (operator, developer) = top
        .split_once("Developer commands:")
        .expect("a developer group");
    for name in clawbridge::face::cli::DEVELOPER_COMMANDS {
        assert!(
            developer
                .lines()
                .any(|line| line.trim_start().starts_with(&format!("{name} "))),
            "{name} under Developer commands:\n{top}"
        );
        assert!(
            !operator
                .lines()
                .any(|line| line.trim_start().starts_with(&format!("{name} "))),
            "{name} among the operator's commands:\n{top}"
        );
    }
    for name in ["run", "app-server", "doctor", "cache-report"] {
        assert!(operator.contains(&format!("  {name} ")), "{name}:\n{top}");
    }
    let mut pages = vec![top, help(&["-h"])];
    for name in [
        "run",
        "serve",
        "app-server",
        "doctor",
        "cache-report",
        "audit",
        "snapshots",
    ] {
        pages.push(help(&[name, "--help"]));
        pages.push(help(&[name, "-h"]));
    }
    for page in &pages {
        for line in page.lines() {
            assert!(
                line.chars().count() <= 80,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }
    // Hidden from the list, not from the parser or the completion script.
    let (code, _, _) = run_cli(&["fixtures", "--help"]);
    assert_eq!(code, 0);
    let (code, script, _) = run_cli(&["completions", "bash"]);
    assert_eq!(code, 0);
    assert!(
        script.contains("sync-codex-model"),
        "completions lost a developer command"
    );
}

/// A typo gets the name it is near: a run-document key (an error), an OpenClaw config key (a
/// warning), a flag value clap checks and one clawbridge checks after it.
#[test]
fn typos_get_a_did_you_mean() {
    let dir = tempfile::tempdir().expect("dir");
    let run = write_run(&dir, r#"{"workspace": ".", "mesage": "hi"}"#);
    let (code, _, stderr) = run_cli(&["params", run.as_str()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unknown field `mesage` (did you mean `message`?)"),
        "{stderr}"
    );

    let run = write_run(
        &dir,
        r#"{"workspace": ".", "message": "hi",
            "config": {"agents": {"defaults": {"bootstrapMaxChar": 5}}}}"#,
    );
    let (code, _, stderr) = run_cli(&["params", run.as_str()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            "config key `agents.defaults.bootstrapMaxChar` is not read by clawbridge \
             (did you mean `agents.defaults.bootstrapMaxChars`?)"
        ),
        "{stderr}"
    );

    let (code, _, stderr) = run_cli(&["prompt", "--mode", "ful", run.as_str()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("a similar value exists: 'full'"),
        "{stderr}"
    );

    let (code, _, stderr) = run_cli(&[
        "audit",
        "--fail-on",
        "missin",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("`missin` is not a verdict (did you mean `missing`?)"),
        "{stderr}"
    );
}

/// The team recipe of docs/operations.md is the script the tests run (`scripts/openclaw-team`,
/// `real_openclaw::team_recipe_runs_as_written`), verbatim, as the WebSocket recipe is.
#[test]
fn the_documented_team_recipe_is_the_tested_script() {
    let script =
        std::fs::read_to_string(repo_root().join("scripts/openclaw-team")).expect("script");
    let recipe = script
        .split_once("# --- recipe ---\n")
        .and_then(|(_, rest)| rest.split_once("# --- end ---"))
        .map(|(recipe, _)| recipe)
        .expect("the script's recipe markers");
    let doc = std::fs::read_to_string(repo_root().join("docs/operations.md")).expect("doc");
    let block = doc
        .split_once("<!-- recipe: scripts/openclaw-team -->\n```sh\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(block, _)| block)
        .expect("the doc's recipe block");
    assert_eq!(
        block, recipe,
        "docs/operations.md's recipe drifted from the script"
    );
    assert!(
        recipe.contains(" gateway run"),
        "the agents run through the Gateway"
    );
    assert!(!recipe.contains("--local"), "not the embedded agent");
}

/// `scripts/openclaw-team` stops the endpoint and the Gateway it started when it ends, or with
/// `KEEP=1` leaves both running and their ids in the state dir; OpenClaw's plugin is pointed at
/// `URL` (a balancer's) and the Gateway takes the token given. OpenClaw here is a stand-in that
/// files what it is asked (the real one runs the recipe in
/// `real_openclaw::team_recipe_runs_as_written`); the endpoint, its accounts and status are
/// clawbridge's own.
#[test]
fn the_team_recipe_stops_what_it_started_unless_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let openclaw = dir.path().join("openclaw");
    std::fs::write(
        &openclaw,
        "#!/usr/bin/env bash\n\
         echo \"$* token=$OPENCLAW_GATEWAY_TOKEN\" >> \"$HOME/asked\"\n\
         case \"$1\" in\n\
           models) cat >/dev/null ;;\n\
           gateway) echo $$ > \"$HOME/gateway\"; echo '[gateway] ready'; exec sleep 300 ;;\n\
           agent) echo '{\"ok\": true}' ;;\n\
         esac\n",
    )
    .expect("stand-in");
    std::fs::set_permissions(
        &openclaw,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("mode");
    let run = |name: &str, keep: bool| {
        let home = dir.path().join(name);
        std::fs::create_dir_all(&home).expect("home");
        let state = home.join("state");
        let port = free_port();
        let mut command = std::process::Command::new(repo_root().join("scripts/openclaw-team"));
        command
            .arg("hello")
            .env("HOME", &home)
            .env("CLAWBRIDGE", env!("CARGO_BIN_EXE_clawbridge"))
            .env("OPENCLAW", &openclaw)
            .env("CODEX_BIN", crate::e2e::codex_bin())
            .env("PORT", port.to_string())
            .env("URL", "ws://balancer.internal:7000")
            .env("OPENCLAW_GATEWAY_TOKEN", "the-gateway-token")
            .env("STATE_DIR", &state)
            .env("OPENAI_API_KEY_ALPHA", "sk-alpha-0123456789")
            .env("OPENAI_API_KEY_BETA", "sk-beta-0123456789")
            .env("ENDPOINT_FLAGS", "--offline")
            .env_remove("KEEP");
        if keep {
            command.env("KEEP", "1");
        }
        let output = command.output().expect("scripts/openclaw-team");
        assert!(
            output.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let asked = std::fs::read_to_string(home.join("asked")).expect("asked");
        assert!(
            asked.contains(r#""url": "ws://balancer.internal:7000""#),
            "the plugin is pointed at URL: {asked}"
        );
        assert!(
            asked.contains("gateway run token=the-gateway-token"),
            "the Gateway takes the token given: {asked}"
        );
        (state, port)
    };
    let alive = |pid: &str| pid.trim().parse().is_ok_and(crate::util::running);
    let listening = |port: u16| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();

    let (state, port) = run("stopped", false);
    assert!(!listening(port), "the endpoint still listens");
    assert!(!state.join("endpoint.pid").exists());
    let gateway = std::fs::read_to_string(dir.path().join("stopped/gateway")).expect("gateway");
    assert!(!alive(&gateway), "the Gateway runs on");

    let (state, port) = run("kept", true);
    let endpoint = std::fs::read_to_string(state.join("endpoint.pid")).expect("endpoint.pid");
    let gateway = std::fs::read_to_string(state.join("gateway.pid")).expect("gateway.pid");
    let (kept_endpoint, kept_gateway) = (alive(&endpoint), alive(&gateway));
    let still_listening = listening(port);
    let _ = std::process::Command::new("kill")
        .args(["--", &format!("-{}", gateway.trim()), endpoint.trim()])
        .status();
    assert!(kept_endpoint && still_listening, "the endpoint was kept");
    assert!(kept_gateway, "the Gateway was kept");
    crate::util::wait_until(
        "the kept endpoint stopped",
        std::time::Duration::from_secs(10),
        || !alive(&endpoint),
    );
}

/// The tools cache is keyed by version and integrity (`scripts/lib/pins.sh`): an install is
/// reused only when its package-lock names the pinned version with the pinned hash; another hash
/// (a tampered or re-published package) is not reused and fails the install check; a version
/// that is not pinned goes by version alone.
#[test]
fn a_cached_tool_is_reused_only_with_its_pinned_integrity() {
    let pins =
        std::fs::read_to_string(repo_root().join("scripts/lib/tool-pins.tsv")).expect("pins");
    let pinned = pins
        .lines()
        .find(|line| line.starts_with("@openai/codex\t0.169.0\t"))
        .and_then(|line| line.split('\t').nth(2))
        .expect("Codex 0.169.0 is pinned")
        .to_string();
    let dir = tempfile::tempdir().expect("dir");
    let lock = |version: &str, integrity: &str| {
        std::fs::create_dir_all(dir.path().join("node_modules")).expect("mkdir");
        std::fs::write(
            dir.path().join("node_modules/.package-lock.json"),
            format!(
                "{{\n  \"name\": \"x\",\n  \"packages\": {{\n    \"node_modules/@openai/codex\": {{\n      \"version\": \"{version}\",\n      \"resolved\": \"https://registry.npmjs.org/x.tgz\",\n      \"integrity\": \"{integrity}\",\n      \"license\": \"Apache-2.0\"\n    }},\n    \"node_modules/@openai/codex-linux-x64\": {{\n      \"version\": \"{version}\",\n      \"integrity\": \"sha512-other\"\n    }}\n  }}\n}}\n"
            ),
        )
        .expect("lock");
    };
    let check = |function: &str, version: &str| {
        let script = format!(
            "source '{}'; {function} '{}' @openai/codex {version}",
            repo_root().join("scripts/lib/pins.sh").display(),
            dir.path().display()
        );
        let output = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .output()
            .expect("bash");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert!(!check("install_matches", "0.169.0").0, "nothing installed");
    lock("0.169.0", &pinned);
    assert!(check("install_matches", "0.169.0").0, "the pinned package");
    assert!(!check("install_matches", "0.171.0").0, "another version");
    lock("0.169.0", "sha512-tampered");
    assert!(
        !check("install_matches", "0.169.0").0,
        "another hash is not reused"
    );
    let (ok, stderr) = check("check_install", "0.169.0");
    assert!(!ok && stderr.contains("not the pinned package"), "{stderr}");
    lock("9.9.9", "sha512-anything");
    assert!(
        check("install_matches", "9.9.9").0,
        "an unpinned version goes by version"
    );
}

/// Operator logs: each line on stderr carries its time (RFC 3339, UTC); `--log-format json`
/// writes JSON lines a collector reads; `-v` is taken after the subcommand as before it. (A
/// transcript line that is not JSON is what warns here.)
#[test]
fn logs_carry_their_time_and_come_as_json_on_request() {
    let dir = tempfile::tempdir().expect("dir");
    let line = serde_json::json!({"direction": "in", "message": {"id": 1, "method": "turn/start", "params": {"threadId": "t-1", "input": [{"type": "text", "text": "hi"}]}}});
    std::fs::write(dir.path().join("t-1.jsonl"), format!("{line}\nnot json\n")).expect("file");
    let folder = dir.path().to_str().expect("utf-8");
    let is_time = |word: &str| {
        word.len() >= 20
            && word.ends_with('Z')
            && word.as_bytes()[4] == b'-'
            && word.as_bytes()[10] == b'T'
            && word[..4].bytes().all(|byte| byte.is_ascii_digit())
    };
    let (code, _, stderr) = crate::util::run_cli(&["transcript", "show", folder, "-v"]);
    assert_eq!(code, 0, "{stderr}");
    let warned = stderr
        .lines()
        .find(|line| line.contains("passed over"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let first = warned.split_whitespace().next().unwrap_or_default();
    assert!(is_time(first), "a time first: {warned}");
    assert!(warned.contains("WARN"), "{warned}");
    let (code, _, stderr) =
        crate::util::run_cli(&["--log-format", "json", "transcript", "show", folder]);
    assert_eq!(code, 0, "{stderr}");
    let record: serde_json::Value = stderr
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .find(|record: &serde_json::Value| {
            record["fields"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("passed over"))
        })
        .unwrap_or_else(|| panic!("a JSON line: {stderr}"));
    assert_eq!(record["level"], "WARN", "{record}");
    assert!(
        record["timestamp"].as_str().is_some_and(is_time),
        "{record}"
    );
}

/// `clawbridge account`: the account an API key maps to, the fingerprint the endpoint files
/// its login under (and names in `app-server status` and the homes), read from an environment
/// variable or stdin; the key itself is never printed, and never taken from the command line.
#[test]
fn account_tells_which_account_a_key_maps_to_without_printing_it() {
    let dir = tempfile::tempdir().expect("dir");
    let key = "sk-test-rotation-0123456789abcdef";
    let wanted =
        clawbridge::Identity::from_login(&serde_json::json!({"type": "apiKey", "apiKey": key}))
            .expect("identity")
            .key();
    std::fs::create_dir_all(dir.path().join("app-server-homes").join(&wanted)).expect("home");
    let output = crate::util::clawbridge()
        .args(["account", "--api-key-env", "THE_KEY", "--state-dir"])
        .arg(dir.path())
        .env("THE_KEY", key)
        .output()
        .expect("account");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.starts_with(&format!("{wanted}\n")), "{stdout}");
    assert!(stdout.contains("it logged in before"), "{stdout}");
    assert!(!stdout.contains(key), "{stdout}");
    let mut child = crate::util::clawbridge()
        .args(["account", "--api-key-stdin", "--json", "--state-dir"])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("account");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{key}\n").as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("output");
    let found: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(found["account"], wanted.as_str(), "{found}");
    assert_eq!(found["homeExists"], true, "{found}");
    let (code, _, stderr) = crate::util::run_cli(&["account", "--api-key", key]);
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = crate::util::run_cli(&["account"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("never on the command line"), "{stderr}");
}

/// docs/system-prompt.md §12 lists every difference from OpenClaw 2026.6.10 the conformance
/// suite tolerates, each with the spec sentence that decides it: the list is
/// `scripts/openclaw-conformance/deviations.json`, entry for entry and word for word, so a
/// deviation added, changed or dropped there cannot leave the page behind.
#[test]
fn the_prompt_page_lists_every_tolerated_deviation_as_the_suite_has_it() {
    let root = repo_root();
    let listed: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("scripts/openclaw-conformance/deviations.json"))
            .expect("deviations.json"),
    )
    .expect("json");
    let page = std::fs::read_to_string(root.join("docs/system-prompt.md")).expect("page");
    let section = page
        .split_once("\n## 12. Where clawbridge differs from OpenClaw 2026.6.10")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
        .expect("docs/system-prompt.md has its section 12");
    let wanted: Vec<String> = listed["deviations"]
        .as_array()
        .expect("deviations")
        .iter()
        .map(|entry| {
            format!(
                "- **`{}`**: {} *Why:* {}",
                entry["id"].as_str().expect("id"),
                entry["what"].as_str().expect("what"),
                entry["why"].as_str().expect("why")
            )
        })
        .collect();
    let on_page: Vec<&str> = section
        .lines()
        .filter(|line| line.starts_with("- **`"))
        .collect();
    assert_eq!(
        on_page, wanted,
        "docs/system-prompt.md §12 repeats deviations.json entry for entry"
    );
}

/// The front reads `clawbridge params FILE` without clap (its start is most of its time), and
/// must read it exactly as clap does; anything else still goes to clap.
#[test]
fn plain_params_reads_as_clap_reads() {
    use clawbridge::face::front::{parse_one_shot_with_clap, plain_params, Parsed};
    use std::ffi::OsString;
    let line = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
    for words in [
        &["params", "run.json"][..],
        &["params", "a dir/run file.json"],
    ] {
        let fast = plain_params(&line(words)).expect("the plain line is read without clap");
        let Parsed::Cli(clap) = parse_one_shot_with_clap(line(words)) else {
            panic!("clap reads {words:?}");
        };
        assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{words:?}");
    }
    for words in [
        &["params"][..],
        &["params", "--help"],
        &["params", "-"],
        &["params", ""],
        &["params", "run.json", "--state-dir", "s"],
        &["-v", "params", "run.json"],
        &["prompt", "run.json"],
        &["context", "run.json"],
    ] {
        assert!(
            plain_params(&line(words)).is_none(),
            "{words:?} goes to clap"
        );
    }
}
