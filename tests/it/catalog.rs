//! `sync-codex-model` and `fixtures verify` (docs/snapshots.md §6, §7 W1-W7).

use std::path::{Path, PathBuf};

use clawbridge::{
    apply_plan, find_catalog, load_catalog, plan_sync, CatalogKind, DiscoveryEnv, FileOutcome,
    Personality, SyncRequest,
};
use serde_json::{json, Value};

use crate::util::*;

fn reference_catalog() -> PathBuf {
    repo_root().join("fixtures/codex-catalog/0.169.0/models.json")
}

fn request(catalog: &Path, out: &Path) -> SyncRequest {
    SyncRequest {
        catalog: catalog.to_path_buf(),
        model: "m".to_string(),
        personality: Personality::Pragmatic,
        out_dir: out.to_path_buf(),
        git_head: None,
        source_label: None,
        collaboration_default: None,
    }
}

fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, value.to_string()).expect("write");
    path
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn w1_real_catalog_pins_gpt_5_5_byte_for_byte() {
    let catalog = reference_catalog();
    let provenance = read(&repo_root().join("fixtures/codex-catalog/0.169.0/PROVENANCE.md"));
    let digest = clawbridge::sha256_hex(&std::fs::read(&catalog).expect("catalog"));
    assert!(
        provenance.contains(&digest),
        "vendored catalog changed without its provenance note"
    );
    let out = tempfile::tempdir().expect("out");
    let mut req = request(&catalog, out.path());
    req.model = "gpt-5.5".to_string();
    let plan = plan_sync(&req).expect("plan");
    apply_plan(&plan).expect("apply");
    let text = read(&out.path().join("gpt-5.5.pragmatic.instructions.md"));
    assert_eq!(text.encode_utf16().count(), 21_459);
    assert_eq!(text.len(), 21_473);
    assert_eq!(
        clawbridge::sha256_hex(text.as_bytes()),
        "2351631dfc5644dc5a45eaaca4139475bd02810ee6cb792d058b551559b3242e"
    );
    let catalog_value: Value = serde_json::from_str(&read(&catalog)).expect("json");
    let template = catalog_value["models"]
        .as_array()
        .expect("models")
        .iter()
        .find(|m| m["slug"] == "gpt-5.5")
        .and_then(|m| m["model_messages"]["instructions_template"].as_str())
        .expect("template");
    assert_eq!(text, template, "kept exactly as the catalog has it");
    let source: Value =
        serde_json::from_str(&read(&out.path().join("gpt-5.5.pragmatic.source.json")))
            .expect("json");
    assert_eq!(
        source["source"]["field"],
        "model_messages.instructions_template"
    );
    assert_eq!(source["source"]["catalogKind"], "checked_in_catalog");
    assert!(!source["source"]["catalogPath"]
        .as_str()
        .unwrap_or("/")
        .starts_with('/'));
    assert!(
        !out.path().join("gpt-5.5.collaboration-default.md").exists(),
        "no preset in the catalog"
    );
    assert!(plan.notices.iter().any(|n| n.contains("left as it is")));
    // The committed fixture is exactly this.
    assert_eq!(
        read(&repo_root().join("fixtures/codex-model-catalog/gpt-5.5.pragmatic.instructions.md")),
        text
    );
}

#[test]
fn w6_model_with_its_own_preset() {
    let out = tempfile::tempdir().expect("out");
    let mut req = request(&reference_catalog(), out.path());
    req.model = "gpt-6-sol".to_string();
    apply_plan(&plan_sync(&req).expect("plan")).expect("apply");
    for name in [
        "gpt-6-sol.pragmatic.instructions.md",
        "gpt-6-sol.pragmatic.source.json",
        "gpt-6-sol.collaboration-default.md",
        "gpt-6-sol.collaboration-default.source.json",
    ] {
        assert!(out.path().join(name).exists(), "{name}");
    }
    let preset: Value = serde_json::from_str(&read(
        &out.path()
            .join("gpt-6-sol.collaboration-default.source.json"),
    ))
    .expect("json");
    assert_eq!(
        preset["source"]["field"],
        "model_messages.collaboration_modes.default"
    );
    assert!(preset.get("personality").is_none());
}

#[test]
fn models_cache_wrapper_records_provenance() {
    let dir = tempfile::tempdir().expect("dir");
    let cache = write_json(
        dir.path(),
        "home/.codex/models_cache.json",
        &json!({"fetched_at": "2026-11-01T00:00:00Z", "etag": "\"abc\"", "client_version": "0.169.0", "identity": "ff",
                "models": [{"slug": "m", "model_messages": {"instructions_template": "T {{ personality }}", "instructions_variables": {"personality_pragmatic": "P"}}}]}),
    );
    let catalog = load_catalog(&cache).expect("catalog");
    assert_eq!(catalog.kind, CatalogKind::ModelsCache);
    let mut req = request(&cache, &dir.path().join("out"));
    req.git_head = Some("abc123".to_string());
    apply_plan(&plan_sync(&req).expect("plan")).expect("apply");
    let source = read(&dir.path().join("out/m.pragmatic.source.json"));
    assert_eq!(
        read(&dir.path().join("out/m.pragmatic.instructions.md")),
        "T P\n"
    );
    let keys: Vec<&str> = [
        "\"catalogPath\"",
        "\"catalogKind\"",
        "\"catalogClientVersion\"",
        "\"catalogFetchedAt\"",
        "\"catalogGitHead\"",
        "\"field\"",
        "\"sha256\"",
    ]
    .into_iter()
    .collect();
    let positions: Vec<usize> = keys
        .iter()
        .map(|k| source.find(k).unwrap_or_else(|| panic!("{k} in {source}")))
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "key order: {source}"
    );
    assert!(source.contains("\"<codex-home>/models_cache.json\""));
    assert!(source.contains("\"0.169.0\"") && source.contains("abc123"));
    assert!(source.ends_with("}\n"));
}

#[test]
fn bad_catalogs_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out");
    for (name, text, needle) in [
        (
            "bare.json",
            "[{\"slug\": \"m\"}]".to_string(),
            "top-level models array",
        ),
        ("invalid.json", "{\"models\": [".to_string(), "invalid JSON"),
        (
            "nomodel.json",
            json!({"models": [{"slug": "a"}, {"slug": "b"}]}).to_string(),
            "a, b",
        ),
        (
            "noinstr.json",
            json!({"models": [{"slug": "m"}]}).to_string(),
            "no renderable instructions",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        let error = plan_sync(&request(&path, &out)).expect_err(name);
        assert!(error.to_string().contains(needle), "{name}: {error}");
        assert!(!out.exists(), "{name}: nothing written");
        let output = clawbridge()
            .args([
                "sync-codex-model",
                "--catalog",
                &path.display().to_string(),
                "--model",
                "m",
                "--out-dir",
                &out.display().to_string(),
            ])
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(1), "{name}: sync errors exit 1");
        assert!(!out.exists());
    }
}

#[test]
fn discovery_order_with_explicit_homes() {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    let codex_home = dir.path().join("codex-home");
    let env = DiscoveryEnv {
        codex_home: Some(format!(" {} ", codex_home.display())),
        home: Some(home.clone()),
    };
    assert_eq!(find_catalog(&env).0, None);
    let checkout = write_json(
        &home,
        "code/codex/codex-rs/models-manager/models.json",
        &json!({"models": []}),
    );
    assert_eq!(find_catalog(&env).0, Some(checkout));
    let user_cache = write_json(&home, ".codex/models_cache.json", &json!({"models": []}));
    assert_eq!(find_catalog(&env).0, Some(user_cache));
    let explicit = write_json(&codex_home, "models_cache.json", &json!({"models": []}));
    assert_eq!(find_catalog(&env).0, Some(explicit));
}

#[test]
fn w4_no_sources_exit_0_and_leave_fixtures_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out");
    let output = clawbridge()
        .args(["sync-codex-model", "--out-dir", &out.display().to_string()])
        .env("HOME", dir.path())
        .env("CODEX_HOME", "")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("No Codex model catalog/cache found"),
        "{stdout}"
    );
    assert!(stdout.contains(".codex/models_cache.json") && stdout.contains("--catalog"));
    assert!(!out.exists());
}

#[test]
fn unchanged_files_keep_their_mtime() {
    let dir = tempfile::tempdir().expect("dir");
    let catalog = write_json(
        dir.path(),
        "models.json",
        &json!({"models": [{"slug": "m", "base_instructions": "Hello"}]}),
    );
    let req = request(&catalog, &dir.path().join("out"));
    apply_plan(&plan_sync(&req).expect("plan")).expect("apply");
    let fixture = dir.path().join("out/m.pragmatic.instructions.md");
    let before = std::fs::metadata(&fixture)
        .and_then(|m| m.modified())
        .expect("mtime");
    // Not a wait for an event: a rewrite after this gap would show in the mtime.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let outcomes = apply_plan(&plan_sync(&req).expect("plan")).expect("apply");
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, FileOutcome::Unchanged(_))));
    let after = std::fs::metadata(&fixture)
        .and_then(|m| m.modified())
        .expect("mtime");
    assert_eq!(before, after);
}

#[test]
fn a_failing_write_leaves_the_old_fixture_intact() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out");
    let catalog = write_json(
        dir.path(),
        "models.json",
        &json!({"models": [{"slug": "m", "base_instructions": "Old"}]}),
    );
    let req = request(&catalog, &out);
    apply_plan(&plan_sync(&req).expect("plan")).expect("apply");
    let old_md = read(&out.join("m.pragmatic.instructions.md"));
    // The source file's place is taken by a directory: its rename fails after the .md was staged.
    std::fs::remove_file(out.join("m.pragmatic.source.json")).expect("rm");
    std::fs::create_dir_all(out.join("m.pragmatic.source.json/blocker")).expect("mkdir");
    write_json(
        dir.path(),
        "models.json",
        &json!({"models": [{"slug": "m", "base_instructions": "New"}]}),
    );
    let error =
        apply_plan(&plan_sync(&req).expect("plan")).expect_err("rename onto a directory fails");
    assert!(
        error.to_string().contains("m.pragmatic.source.json"),
        "{error}"
    );
    assert_eq!(
        read(&out.join("m.pragmatic.instructions.md")),
        old_md,
        "old fixture restored"
    );
}

#[test]
fn check_and_verify_catch_a_hand_edited_fixture() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let pinned = root.join("fixtures/codex-model-catalog");
    std::fs::create_dir_all(&pinned).expect("mkdir");
    for entry in std::fs::read_dir(repo_root().join("fixtures/codex-model-catalog")).expect("dir") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, pinned.join(path.file_name().expect("name"))).expect("copy");
    }
    let verify = |root: &Path| {
        clawbridge()
            .args(["fixtures", "verify", "--root", &root.display().to_string()])
            .output()
            .expect("run")
    };
    let output = verify(root);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let fixture = pinned.join("gpt-5.5.pragmatic.instructions.md");
    let edited = read(&fixture).replacen("Codex", "Kodex", 1);
    std::fs::write(&fixture, edited).expect("edit");
    let output = verify(root);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("gpt-5.5.pragmatic.instructions.md") && stderr.contains("does not match"),
        "{stderr}"
    );

    let output = clawbridge()
        .args([
            "sync-codex-model",
            "--catalog",
            &reference_catalog().display().to_string(),
            "--source-label",
            "<codex-cli-0.169.0>/models.json",
            "--out-dir",
            &pinned.display().to_string(),
            "--check",
        ])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("-You are Kodex") && stdout.contains("+You are Codex"),
        "{stdout}"
    );

    // A snapshot that references a missing fixture is caught too.
    std::fs::write(
        &fixture,
        read(&repo_root().join("fixtures/codex-model-catalog/gpt-5.5.pragmatic.instructions.md")),
    )
    .expect("restore");
    let snapshots = root.join("fixtures/prompt-snapshots/x");
    std::fs::create_dir_all(&snapshots).expect("mkdir");
    std::fs::write(
        snapshots.join("a.md"),
        "see ../codex-model-catalog/gpt-9.pragmatic.instructions.md\n",
    )
    .expect("write");
    let output = verify(root);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("gpt-9.pragmatic.instructions.md"));
}
