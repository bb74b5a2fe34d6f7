//! The committed happy-path snapshots: exactly what `gen` produces, routed where the spec says,
//! deterministic, and guarded by `check` (docs/snapshots.md §5.2, issue tests).

use std::collections::BTreeSet;
use std::path::Path;

use clawbridge::{
    check_snapshots, generate_snapshots as generate, write_snapshots, DriftKind, SNAPSHOT_DIR,
};
use serde_json::Value;

use crate::util::*;

const SCENARIOS: [&str; 3] = [
    "telegram-direct-codex-message-tool",
    "discord-group-codex-message-tool",
    "telegram-heartbeat-codex-tool",
];

/// Split a snapshot into (heading, body) sections at every Markdown heading outside fences.
fn sections(markdown: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let ticks: String = line.chars().take_while(|c| *c == '`').collect();
        if ticks.len() >= 3 {
            match &fence {
                Some(open) if line.trim() == open.as_str() => fence = None,
                None => fence = Some(ticks),
                _ => {}
            }
        }
        if fence.is_none() && line.starts_with('#') {
            out.push((
                line.trim_start_matches('#').trim().to_string(),
                String::new(),
            ));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

fn section<'a>(all: &'a [(String, String)], heading: &str) -> &'a str {
    all.iter()
        .find(|(name, _)| name == heading)
        .map(|(_, body)| body.as_str())
        .unwrap_or_else(|| panic!("no section {heading}"))
}

fn committed(name: &str) -> String {
    std::fs::read_to_string(repo_root().join(SNAPSHOT_DIR).join(name)).expect("committed snapshot")
}

#[test]
fn committed_set_is_exactly_what_gen_produces() {
    let generated = generate(&repo_root()).expect("generate");
    let output = std::process::Command::new("git")
        .args(["ls-files", SNAPSHOT_DIR])
        .current_dir(repo_root())
        .output()
        .expect("git ls-files");
    let tracked: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            line.trim_start_matches(&format!("{SNAPSHOT_DIR}/"))
                .to_string()
        })
        .collect();
    let expected: BTreeSet<String> = generated.keys().cloned().collect();
    assert_eq!(tracked, expected, "files tracked by git");
    assert_eq!(expected.len(), 7, "README + 3 scenarios + 3 tool catalogs");
    for (name, text) in &generated {
        assert!(
            committed(name) == *text,
            "{name} differs from generated output; run `clawbridge snapshots gen`"
        );
        assert!(
            text.ends_with('\n') && !text.ends_with("\n\n"),
            "{name} ends with exactly one newline"
        );
    }
}

#[test]
fn every_placeholder_lands_in_its_layer() {
    for scenario in SCENARIOS {
        let markdown = committed(&format!("{scenario}.md"));
        let all = sections(&markdown);
        let developer = section(&all, "Developer: OpenClaw Runtime Instructions");
        let collaboration = section(&all, "Developer: Codex Collaboration Mode Instructions");
        let input = section(&all, "User: Turn Input Text");
        for name in ["SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md"] {
            let marker = placeholder(name);
            assert_eq!(
                developer.matches(&marker).count(),
                1,
                "{scenario}: {name} in developer layer"
            );
            assert_eq!(
                markdown.matches(&marker).count(),
                1,
                "{scenario}: {name} only there"
            );
        }
        let memory = placeholder("MEMORY.md");
        assert_eq!(
            input.matches(&memory).count(),
            1,
            "{scenario}: MEMORY.md in turn input"
        );
        assert_eq!(
            markdown.matches(&memory).count(),
            1,
            "{scenario}: MEMORY.md only there"
        );
        for name in ["AGENTS.md", "HEARTBEAT.md"] {
            assert!(
                !markdown.contains(&placeholder(name)),
                "{scenario}: {name} content leaked"
            );
        }
        assert!(collaboration
            .trim_start()
            .trim_start_matches('`')
            .trim_start_matches("text\n")
            .starts_with("# Collaboration Mode: Default"));
        assert!(
            collaboration.contains("## OpenClaw Skills")
                && collaboration.contains("sha256:76d67ed10de14fe0")
        );
        let pointer = "## OpenClaw Heartbeat Workspace";
        let turn_params = section(&all, "Turn Start Params");
        if scenario.contains("heartbeat") {
            assert_eq!(collaboration.matches(pointer).count(), 1);
            assert_eq!(
                turn_params.matches(&format!("\\n\\n{pointer}")).count(),
                1,
                "JSON-escaped in the turn params"
            );
            assert_eq!(markdown.matches(pointer).count(), 2);
            assert!(collaboration.contains("- /srv/openclaw-happy-path/workspace/HEARTBEAT.md"));
        } else {
            assert!(
                !markdown.contains(pointer),
                "{scenario}: pointer only on heartbeat turns"
            );
        }
        assert!(
            !markdown.contains(&repo_root().display().to_string()),
            "no machine paths"
        );
    }
}

#[test]
fn token_estimates_add_up() {
    for scenario in SCENARIOS {
        let markdown = committed(&format!("{scenario}.md"));
        let all = sections(&markdown);
        let body = section(&all, "Rough Text Token Estimates");
        let json: String = body
            .lines()
            .filter(|l| !l.starts_with("```"))
            .collect::<Vec<_>>()
            .join("\n");
        let estimates: Value = serde_json::from_str(&json).expect("estimates json");
        let chars = |key: &str| {
            estimates[key]["chars"]
                .as_u64()
                .unwrap_or_else(|| panic!("{key}"))
        };
        assert_eq!(
            chars("totalWithDynamicToolsJson"),
            chars("totalTextOnly") + 2 + chars("dynamicToolsJson")
        );
        assert_eq!(chars("codexPermissionDeveloperInstructions"), 307);
        assert_eq!(chars("codexModelInstructions"), 21_459);
        assert_eq!(estimates["codexModelInstructions"]["roughTokens"], 5_365);
    }
}

#[test]
fn gen_is_deterministic() {
    let root = fixture_root();
    let first = generate(root.path()).expect("first");
    let second = generate(root.path()).expect("second");
    assert_eq!(first, second);
    write_snapshots(root.path()).expect("gen");
    let dir = root.path().join(SNAPSHOT_DIR);
    let before: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    write_snapshots(root.path()).expect("gen again");
    for (name, bytes) in before {
        assert_eq!(
            std::fs::read(dir.join(&name)).expect("read"),
            bytes,
            "{name}"
        );
    }
    // A copy of the fixtures somewhere else yields the same bytes as the repository.
    assert_eq!(first, generate(&repo_root()).expect("repo"));
}

fn check_cli(root: &Path) -> (i32, String) {
    let output = clawbridge()
        .args(["snapshots", "check", "--root", &root.display().to_string()])
        .output()
        .expect("run");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn check_catches_an_edited_workspace_file() {
    let root = fixture_root();
    assert_eq!(check_cli(root.path()).0, 0);
    std::fs::write(
        root.path().join("fixtures/workspace/SOUL.md"),
        "A warmer soul.\n",
    )
    .expect("edit");
    let (code, stderr) = check_cli(root.path());
    assert_eq!(code, 1);
    assert!(stderr.contains("clawbridge snapshots gen"), "{stderr}");
    for scenario in SCENARIOS {
        assert!(
            stderr.contains(&format!("{scenario}.md: differs from generated output")),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("-<SOUL.md contents will be here>") && stderr.contains("+A warmer soul."),
        "{stderr}"
    );
    assert!(
        stderr.contains("### /srv/openclaw-happy-path/workspace/SOUL.md"),
        "the diff shows where SOUL.md lands"
    );
    write_snapshots(root.path()).expect("gen");
    assert_eq!(check_cli(root.path()).0, 0, "gen fixes it");
}

#[test]
fn check_catches_missing_and_stale_files() {
    let root = fixture_root();
    let dir = root.path().join(SNAPSHOT_DIR);
    std::fs::remove_file(dir.join("codex-dynamic-tools.discord-group.json")).expect("rm");
    std::fs::write(dir.join("notes.md"), "stray\n").expect("stray");
    let (_, drift) = check_snapshots(root.path()).expect("check");
    let kinds: Vec<(String, DriftKind)> = drift
        .iter()
        .map(|d| {
            (
                d.path.rsplit('/').next().unwrap_or_default().to_string(),
                d.kind.clone(),
            )
        })
        .collect();
    assert!(kinds.contains(&(
        "codex-dynamic-tools.discord-group.json".to_string(),
        DriftKind::Missing
    )));
    assert!(kinds.contains(&("notes.md".to_string(), DriftKind::Stale)));
    let (code, stderr) = check_cli(root.path());
    assert_eq!(code, 1);
    assert!(
        stderr.contains("notes.md: stale file (not generated)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("codex-dynamic-tools.discord-group.json: missing"),
        "{stderr}"
    );
    let report = write_snapshots(root.path()).expect("gen");
    assert_eq!(report.deleted, vec!["notes.md".to_string()]);
    assert_eq!(check_cli(root.path()).0, 0);
}

#[test]
fn usage_errors_exit_2() {
    let output = clawbridge()
        .args(["snapshots", "frobnicate"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let output = clawbridge()
        .args(["snapshots", "check", "--root"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn gen_refuses_a_symlinked_snapshot_dir_and_sweeps_stale_temps() {
    let root = fixture_root();
    let dir = root.path().join(SNAPSHOT_DIR);
    std::fs::create_dir_all(&dir).expect("dir");
    // A temp file a killed gen left behind is swept up.
    let stale = dir.join(format!("{}killed", clawbridge::TEMP_PREFIX));
    std::fs::write(&stale, "half").expect("write");
    write_snapshots(root.path()).expect("gen");
    assert!(!stale.exists());
    // Through a symlink, gen would write into (and delete stale files of) another folder.
    let elsewhere = tempfile::tempdir().expect("elsewhere");
    std::fs::write(elsewhere.path().join("unrelated.md"), "keep me").expect("write");
    std::fs::remove_dir_all(&dir).expect("rm");
    std::os::unix::fs::symlink(elsewhere.path(), &dir).expect("link");
    let error = write_snapshots(root.path()).expect_err("symlinked dir");
    assert!(error.to_string().contains("symlink"), "{error}");
    assert!(elsewhere.path().join("unrelated.md").exists());
}
