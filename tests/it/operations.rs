//! The operator's guide (docs/operations.md) as an operator follows it: the systemd unit it
//! ships is one systemd accepts (`systemd-analyze verify`, where the machine has it), and the
//! endpoint starts with the unit's exact flags and stops cleanly on the unit's stop signal.

use std::time::Duration;

use crate::util::repo_root;

/// The unit's `ExecStart`, its `\` continuations joined, split into words.
fn exec_start(unit: &str) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    let line = joined
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    line.split_whitespace().map(str::to_string).collect()
}

/// A protection of the guide: a unit file that systemd would refuse, or flags the endpoint does
/// not take (`--log-format` after the endpoint's flags was read as a Codex argument until this
/// test), fail here before an operator installs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guide_s_systemd_unit_verifies_and_its_endpoint_starts_and_stops() {
    let unit = std::fs::read_to_string(repo_root().join("docs/clawbridge-app-server.service"))
        .expect("the unit");
    let guide = std::fs::read_to_string(repo_root().join("docs/operations.md")).expect("guide");
    assert!(
        guide.contains("(clawbridge-app-server.service)"),
        "the guide links the unit"
    );
    let binary = env!("CARGO_BIN_EXE_clawbridge");
    let dir = tempfile::tempdir().expect("dir");
    // The unit as installed on this machine: the paths it names made real here.
    let local = unit
        .replace("/usr/local/bin/clawbridge", binary)
        .replace("/usr/local/bin/codex", "/bin/true");
    match which("systemd-analyze") {
        Some(analyze) => {
            let path = dir.path().join("clawbridge-app-server.service");
            std::fs::write(&path, &local).expect("unit");
            let output = std::process::Command::new(analyze)
                .arg("verify")
                .arg(&path)
                .output()
                .expect("systemd-analyze");
            let stderr = String::from_utf8_lossy(&output.stderr);
            // It warns (and exits 0) on what it ignores: any line about the unit is a defect.
            let about_unit: Vec<&str> = stderr
                .lines()
                .filter(|line| line.contains("clawbridge-app-server"))
                .collect();
            assert!(
                output.status.success() && about_unit.is_empty(),
                "systemd-analyze verify: {}\n{stderr}",
                output.status
            );
        }
        None => eprintln!("no systemd-analyze here: the unit's syntax is not verified"),
    }
    // Its ExecStart, with the state dir, the workspace root and the port made throwaway.
    let words = exec_start(&local);
    assert_eq!(words[0], binary);
    let state = dir.path().join("state");
    let root = dir.path().join("agents");
    std::fs::create_dir_all(&root).expect("root");
    let args: Vec<String> = words[1..]
        .iter()
        .map(|word| match word.as_str() {
            "ws://127.0.0.1:19175" => "ws://127.0.0.1:0".to_string(),
            "/var/lib/clawbridge" => state.display().to_string(),
            "/srv/openclaw" => root.display().to_string(),
            other => other.to_string(),
        })
        .collect();
    for flag in ["--state-dir", "--workspace-root", "--log-format"] {
        assert!(args.iter().any(|arg| arg == flag), "the unit gives {flag}");
    }
    let mut child = tokio::process::Command::new(binary)
        .args(&args)
        .env_remove("CLAWBRIDGE_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("endpoint");
    let mut line = String::new();
    {
        use tokio::io::AsyncBufReadExt;
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = tokio::io::BufReader::new(stdout);
        let _ = tokio::time::timeout(Duration::from_secs(30), reader.read_line(&mut line)).await;
    }
    if line.trim().is_empty() {
        let output = child.wait_with_output().await.expect("output");
        panic!(
            "the unit's endpoint did not start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The unit's KillSignal: a drain, and a clean exit (systemd counts anything else a failure).
    let pid = child.id().expect("running").to_string();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("stopped within TimeoutStopSec")
        .expect("status");
    assert!(status.success(), "{status}");
    assert!(
        std::fs::metadata(state.join("app-server-token")).is_ok(),
        "the token the guide points OpenClaw at"
    );
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(program))
        .find(|path| path.is_file())
}
