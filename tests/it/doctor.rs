//! `clawbridge doctor`: each check finds what is wrong on a machine, says how to fix it, and the
//! exit code says whether anything is wrong.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::util::*;

fn fake_codex(dir: &Path, version: &str) -> std::path::PathBuf {
    let path = dir.join("codex");
    std::fs::write(&path, format!("#!/bin/sh\necho 'codex-cli {version}'\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn doctor(args: &[&str], path_var: &Path) -> (i32, Vec<Value>) {
    let output = clawbridge()
        .arg("doctor")
        .arg("--json")
        .args(args)
        .env_remove("CODEX_BIN")
        .env_remove("CODEX_HOME")
        .env("PATH", path_var)
        .output()
        .expect("run doctor");
    let findings: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)));
    (output.status.code().unwrap_or(-1), findings)
}

fn level<'a>(findings: &'a [Value], check: &str) -> (&'a str, &'a Value) {
    let found = findings
        .iter()
        .find(|finding| finding["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding: {findings:?}"));
    (found["level"].as_str().expect("level"), found)
}

#[test]
fn a_fresh_machine_is_told_what_is_missing_and_how_to_fix_it() {
    let dir = tempfile::tempdir().expect("dir");
    let empty_path = dir.path().join("bin");
    std::fs::create_dir(&empty_path).expect("bin");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(state.join("token"), "0123456789abcdef0123456789abcdef\n").expect("token");
    std::fs::set_permissions(state.join("token"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let home = dir.path().join("codex-home");
    let (code, findings) = doctor(
        &[
            "--state-dir",
            state.to_str().expect("utf-8"),
            "--codex-home",
            home.to_str().expect("utf-8"),
            "--workspace-root",
            dir.path().join("missing-root").to_str().expect("utf-8"),
            "--listen",
            "127.0.0.1:0",
        ],
        &empty_path,
    );
    assert_eq!(code, 1, "{findings:#?}");
    let (codex, found) = level(&findings, "codex");
    assert_eq!(codex, "fail");
    assert!(found["fix"]
        .as_str()
        .expect("fix")
        .contains("npm install -g @openai/codex@0.169.0"));
    assert_eq!(level(&findings, "codex-home").0, "warn");
    assert_eq!(
        level(&findings, "state-dir").0,
        "warn",
        "a group-readable state dir"
    );
    let (token, found) = level(&findings, "token");
    assert_eq!(token, "fail", "a world-readable token");
    assert!(found["fix"].as_str().expect("fix").starts_with("chmod 600"));
    assert!(
        !found.to_string().contains("0123456789abcdef"),
        "the token never appears in the report"
    );
    assert_eq!(level(&findings, "workspace-roots").0, "fail");
    assert_eq!(level(&findings, "port").0, "ok");
}

#[test]
fn a_ready_machine_passes_and_versions_outside_the_range_are_named() {
    let dir = tempfile::tempdir().expect("dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(state.join("token"), "0123456789abcdef0123456789abcdef\n").expect("token");
    std::fs::set_permissions(state.join("token"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    // A Codex home a sandboxed turn cannot write: not under /tmp, not inside a root.
    let home_dir = tempfile::tempdir_in("/var/tmp").expect("home dir");
    let home = home_dir.path().join("codex-home");
    std::fs::create_dir(&home).expect("home");
    std::fs::write(home.join("auth.json"), "{}").expect("auth");
    std::fs::set_permissions(
        home.join("auth.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    let common = |codex: &Path| {
        vec![
            "--codex-bin".to_string(),
            codex.display().to_string(),
            "--state-dir".into(),
            state.display().to_string(),
            "--codex-home".into(),
            home.display().to_string(),
            "--workspace-root".into(),
            dir.path().display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ]
    };
    let run = |version: &str| {
        let codex = fake_codex(&bin, version);
        let args = common(&codex);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        doctor(&args, &bin)
    };
    let (code, findings) = run("0.169.0");
    assert_eq!(code, 0, "{findings:#?}");
    assert!(
        findings.iter().all(|finding| finding["level"] == "ok"),
        "{findings:#?}"
    );
    // The same home inside a workspace root is named: a turn could rewrite its config.
    let exposed = dir.path().join("exposed-home");
    std::fs::create_dir(&exposed).expect("exposed");
    let mut args = common(&fake_codex(&bin, "0.169.0"));
    let at = args
        .iter()
        .position(|arg| arg == "--codex-home")
        .expect("flag")
        + 1;
    args[at] = exposed.display().to_string();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, findings) = doctor(&args, &bin);
    assert_eq!(
        level(&findings, "codex-home-sandbox").0,
        "warn",
        "{findings:#?}"
    );
    let (code, findings) = run("0.180.0");
    assert_eq!(code, 0, "newer is a warning: {findings:#?}");
    assert_eq!(level(&findings, "codex").0, "warn");
    let (code, findings) = run("0.150.0");
    assert_eq!(code, 1, "older is a failure: {findings:#?}");
    assert_eq!(level(&findings, "codex").0, "fail");
    // A port something listens on is named.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let codex = fake_codex(&bin, "0.169.0");
    let mut args = common(&codex);
    args.truncate(args.len() - 2);
    args.extend(["--listen".to_string(), addr.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, findings) = doctor(&args, &bin);
    let (port, found) = level(&findings, "port");
    assert_eq!(port, "warn");
    assert!(found["detail"].as_str().expect("detail").contains(&addr));
}

/// `doctor --run RUN.json` reports the run's bootstrap files with raw and injected counts and
/// where each lands; a file cut by the budget makes it a warning with the fix; a run document
/// that does not load is a failure naming it.
#[test]
fn doctor_run_reports_bootstrap_counts() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = TestWorkspace::full();
    ws.write("SOUL.md", &"s".repeat(30_000));
    let document = dir.path().join("run.json");
    std::fs::write(
        &document,
        serde_json::json!({"workspace": ws.path()}).to_string(),
    )
    .expect("write");
    let state = dir.path().join("state");
    let run = document.display().to_string();
    let state_arg = state.display().to_string();
    let (_, findings) = doctor(&["--run", &run, "--state-dir", &state_arg], dir.path());
    let (level_of, finding) = level(&findings, "bootstrap");
    assert_eq!(level_of, "warn", "{finding}");
    let detail = finding["detail"].as_str().expect("detail");
    assert!(
        detail.contains(
            "SOUL.md: raw 30000, injected 19999, truncated (thread developer instructions)"
        ),
        "{detail}"
    );
    assert!(detail.contains("AGENTS.md: raw"), "{detail}");
    assert!(finding["fix"]
        .as_str()
        .is_some_and(|fix| fix.contains("bootstrapMaxChars")));
    let missing = dir.path().join("missing.json").display().to_string();
    let (code, findings) = doctor(&["--run", &missing, "--state-dir", &state_arg], dir.path());
    let (level_of, finding) = level(&findings, "bootstrap");
    assert_eq!(level_of, "fail");
    assert!(finding["detail"]
        .as_str()
        .is_some_and(|d| d.contains("missing.json")));
    assert_eq!(code, 1);
}

/// Protection: what the doctor used to call fine. A bootstrap name that is a folder is named
/// (not loaded), a Codex home Codex cannot write fails, and the last line counts the warnings
/// instead of saying nothing is wrong.
#[test]
fn doctor_names_a_folder_bootstrap_an_unwritable_home_and_counts_warnings() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = TestWorkspace::full();
    std::fs::remove_file(ws.path().join("SOUL.md")).expect("remove");
    std::fs::create_dir(ws.path().join("SOUL.md")).expect("a folder named SOUL.md");
    let document = dir.path().join("run.json");
    std::fs::write(
        &document,
        serde_json::json!({"workspace": ws.path()}).to_string(),
    )
    .expect("write");
    let run = document.display().to_string();
    let state = dir.path().join("state").display().to_string();
    let (_, findings) = doctor(&["--run", &run, "--state-dir", &state], dir.path());
    let (level_of, finding) = level(&findings, "bootstrap");
    assert_eq!(level_of, "warn", "{finding}");
    assert!(
        finding["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("SOUL.md: not a regular file")),
        "{finding}"
    );
    // A folder nobody can create a file in, root included.
    let (code, findings) = doctor(
        &["--codex-home", "/proc/self", "--state-dir", &state],
        dir.path(),
    );
    let (level_of, finding) = level(&findings, "codex-home");
    assert_eq!(level_of, "fail", "{finding}");
    assert!(
        finding["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("not writable")),
        "{finding}"
    );
    assert_eq!(code, 1);
    let output = clawbridge()
        .args(["doctor", "--run", &run, "--state-dir", &state])
        .env_remove("CODEX_BIN")
        .env("PATH", dir.path())
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&output.stdout);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.contains("warning(s)") && !text.contains("nothing is wrong"),
        "{text}"
    );
}

/// `doctor --endpoint URL`: a running endpoint that takes the token passes (with its members
/// and turns); a token it refuses, and an address where nothing listens, fail naming the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_a_running_endpoint() {
    use crate::endpoint::{no_codex, settings, write_token};
    let dir = tempfile::tempdir().expect("dir");
    let good = dir.path().join("token");
    write_token(&good);
    let stale = dir.path().join("stale-token");
    write_private(&stale, "an-old-token-that-no-longer-works\n");
    let endpoint = clawbridge::Endpoint::start(settings(no_codex()), false)
        .await
        .expect("endpoint");
    let url = format!("ws://{}", endpoint.tcp_addr().expect("tcp"));
    let ask = |token: std::path::PathBuf, url: String| {
        let path_var = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let token = token.display().to_string();
            doctor(&["--endpoint", &url, "--token-file", &token], &path_var)
        })
    };

    let (_, findings) = ask(good.clone(), url.clone()).await.expect("doctor");
    let (state, endpoint_finding) = level(&findings, "endpoint");
    assert_eq!(state, "ok", "{endpoint_finding}");
    assert!(
        endpoint_finding["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("answers with the token")),
        "{endpoint_finding}"
    );
    assert_eq!(level(&findings, "endpoint members").0, "ok");
    assert_eq!(level(&findings, "endpoint turns").0, "ok");

    let (code, findings) = ask(stale, url.clone()).await.expect("doctor");
    assert_eq!(code, 1);
    let (state, refused) = level(&findings, "endpoint");
    assert_eq!(state, "fail", "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|d| d.contains("refused the token")),
        "{refused}"
    );
    assert!(
        refused["fix"]
            .as_str()
            .is_some_and(|f| f.contains("--token-file")),
        "{refused}"
    );
    assert!(findings.iter().all(|f| f["check"] != "endpoint members"));

    endpoint.stop().await;
    let (code, findings) = ask(good, url).await.expect("doctor");
    assert_eq!(code, 1);
    let (state, gone) = level(&findings, "endpoint");
    assert_eq!(state, "fail", "{gone}");
    assert!(
        gone["detail"]
            .as_str()
            .is_some_and(|d| d.contains("nothing answers")),
        "{gone}"
    );
    assert!(
        gone["fix"]
            .as_str()
            .is_some_and(|f| f.contains("clawbridge app-server --listen ws://")),
        "{gone}"
    );
}

/// `doctor --app-server` checks the endpoint's own setup: its token (`app-server-token`, not
/// serve's), its named clients and accounts as the endpoint reads them (a bad file fails,
/// naming it; named clients without a workspace root fail), no serve port; and the state
/// folder the docs' recipe makes (`mkdir -p -m 700`) draws no warning.
#[test]
fn doctor_checks_the_endpoint_s_own_setup_when_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let state = dir.path().join("state");
    // As the recipe makes it.
    let made = std::process::Command::new("mkdir")
        .args(["-p", "-m", "700"])
        .arg(&state)
        .status()
        .expect("mkdir");
    assert!(made.success());
    std::fs::write(
        state.join("app-server-token"),
        "0123456789abcdef0123456789abcdef\n",
    )
    .expect("token");
    std::fs::set_permissions(
        state.join("app-server-token"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    let added = clawbridge()
        .args(["client", "add", "alpha", "--state-dir"])
        .arg(&state)
        .output()
        .expect("client add");
    assert!(added.status.success());
    let state_text = state.to_str().expect("utf-8");
    let (code, findings) = doctor(&["--app-server", "--state-dir", state_text], &bin);
    assert_eq!(level(&findings, "state-dir").0, "ok", "{findings:#?}");
    let (token, found) = level(&findings, "token");
    assert_eq!(token, "ok", "{found}");
    assert!(found["detail"]
        .as_str()
        .is_some_and(|d| d.contains("app-server-token")));
    assert!(
        findings.iter().all(|finding| finding["check"] != "port"),
        "no serve port: {findings:#?}"
    );
    assert!(
        findings.iter().any(|finding| finding["check"] == "clients"
            && finding["level"] == "fail"
            && finding["fix"]
                .as_str()
                .is_some_and(|fix| fix.contains("--workspace-root"))),
        "{findings:#?}"
    );
    assert_eq!(code, 1);
    // A broken accounts file: failed, named, with the command that reads it.
    std::fs::write(
        state.join("accounts.json"),
        "{\"accounts\": [{\"name\": 1}]}",
    )
    .expect("write");
    let (_, findings) = doctor(&["--app-server", "--state-dir", state_text], &bin);
    let (accounts, found) = level(&findings, "accounts");
    assert_eq!(accounts, "fail", "{found}");
    assert!(
        found["detail"]
            .as_str()
            .is_some_and(|d| d.contains("accounts.json")),
        "{found}"
    );
    // Plain doctor is serve's: serve's token, serve's port.
    let (_, findings) = doctor(&["--state-dir", state_text], &bin);
    assert!(level(&findings, "token").1["detail"]
        .as_str()
        .is_some_and(|d| d.contains("/token")));
    level(&findings, "port");
}
