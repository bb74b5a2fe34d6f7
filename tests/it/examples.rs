//! The documentation's examples, run as written: every command line of a `sh` block in README.md
//! and docs/commands.md, as a user types it after the README's `export PATH=...` line (this
//! build's `clawbridge` and the pinned Codex first on `PATH`), in a throwaway HOME.
//!
//! `clawbridge` lines run in a scratch folder that holds the clone's `fixtures` (so what they
//! write, `--out capture`, stays there); `scripts/` lines run in the clone. Lines that start a
//! server (`serve`, `app-server --listen`) must print their address within a minute, then are
//! stopped. Left out, each for a reason: `scripts/test` (it is the test command),
//! `cargo install` and `npm install -g` (`scripts/test-install` installs both ways), and the
//! `export PATH` line (it is this test's environment). A line that is a synopsis rather than a
//! command (`DIR`, `[--json]`) fails: the examples are for running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// The command lines of the `sh` blocks of `file` (comments and blank lines left out), each with
/// the exit code its comment promises (`# exits 1: ...`), else 0.
fn sh_lines(file: &Path) -> Vec<(usize, String, i32)> {
    let text = std::fs::read_to_string(file).expect("read");
    let promise = regex::Regex::new(r"#\s*exits (\d+)").expect("regex");
    let mut lines = Vec::new();
    let mut in_sh = false;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let command = strip_comment(trimmed);
        let promised = promise
            .captures(&trimmed[command.len()..])
            .and_then(|found| found[1].parse().ok())
            .unwrap_or(0);
        if !command.is_empty() {
            lines.push((number + 1, command.to_string(), promised));
        }
    }
    lines
}

/// `line` without a trailing `# comment` (a `#` after a space, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, '#') if previous == ' ' => return line[..at].trim_end(),
            _ => {}
        }
        previous = c;
    }
    line.trim_end()
}

fn skipped(line: &str) -> bool {
    line.starts_with("scripts/test")
        || line.starts_with("cargo install")
        || line.starts_with("npm install -g")
        || line.starts_with("export PATH=")
}

fn is_server(line: &str) -> bool {
    line.starts_with("clawbridge serve") || line.contains(" --listen ")
}

/// A synopsis, not a command: an upper-case placeholder or an optional `[...]` part.
fn is_synopsis(line: &str) -> bool {
    let placeholder = regex::Regex::new(r"(^|\s)[A-Z][A-Z_]{2,}(\s|$)").expect("regex");
    placeholder.is_match(line) || line.contains(" [")
}

#[test]
#[ignore = "needs the pinned Codex CLI (scripts/install-codex); scripts/test runs it"]
fn the_documented_examples_run_as_written() {
    let repo = repo_root();
    let scratch = tempfile::tempdir().expect("scratch");
    let home = scratch.path().join("home");
    let work = scratch.path().join("work");
    std::fs::create_dir_all(home.join("agents")).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    std::os::unix::fs::symlink(repo.join("fixtures"), work.join("fixtures")).expect("fixtures");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_clawbridge"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let codex_dir = crate::e2e::codex_bin()
        .parent()
        .expect("codex dir")
        .to_path_buf();
    let shell = UserShell::new(home.clone(), &[bin_dir, codex_dir]);
    let shell = |line: &str, cwd: &PathBuf| shell.command(line, cwd);
    let mut ran = 0;
    let mut failures = Vec::new();
    for doc in ["README.md", "docs/commands.md"] {
        for (number, line, promised) in sh_lines(&repo.join(doc)) {
            if skipped(&line) {
                continue;
            }
            let at = format!("{doc}:{number}: {line}");
            if is_synopsis(&line) {
                failures.push(format!("{at}\n  a synopsis, not a command"));
                continue;
            }
            let cwd = if line.starts_with("scripts/") {
                repo.clone()
            } else {
                work.clone()
            };
            ran += 1;
            if is_server(&line) {
                if let Err(why) = serves(shell(&line, &cwd)) {
                    failures.push(format!("{at}\n  {why}"));
                }
                continue;
            }
            let output = shell(&line, &cwd)
                .stdin(Stdio::null())
                .output()
                .expect("bash");
            if output.status.code() != Some(promised) || output.stdout.is_empty() {
                failures.push(format!(
                    "{at}\n  {} with {} bytes of output; stderr:\n{}",
                    output.status,
                    output.stdout.len(),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 20, "ran {ran} examples");
}

/// The shell an example runs in: what a user's terminal has, not what `cargo test` adds.
struct UserShell {
    home: PathBuf,
    path: String,
    cargo_home: PathBuf,
    rustup_home: PathBuf,
}

impl UserShell {
    /// A throwaway HOME, with `first` ahead of the inherited `PATH`.
    fn new(home: PathBuf, first: &[PathBuf]) -> UserShell {
        let mut path: Vec<String> = first.iter().map(|dir| dir.display().to_string()).collect();
        path.push(std::env::var("PATH").unwrap_or_default());
        // The throwaway HOME must not move cargo's and rustup's homes (a `scripts/` line that
        // runs cargo would fetch every crate again and rebuild the binaries under the other tests).
        let real_home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        UserShell {
            home,
            path: path.join(":"),
            cargo_home: std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| real_home.join(".cargo")),
            rustup_home: std::env::var_os("RUSTUP_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| real_home.join(".rustup")),
        }
    }

    fn command(&self, line: &str, cwd: &Path) -> Command {
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(format!("exec {line}"))
            .current_dir(cwd)
            .env("HOME", &self.home)
            .env("CARGO_HOME", &self.cargo_home)
            .env("RUSTUP_HOME", &self.rustup_home)
            .env("PATH", &self.path);
        for name in [
            "CODEX_HOME",
            "CODEX_BIN",
            "XDG_STATE_HOME",
            "OPENAI_API_KEY",
            "CLAWBRIDGE_TOKEN",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ] {
            command.env_remove(name);
        }
        // What `cargo test` sets for a test process. A `scripts/` line that runs cargo with
        // CARGO_MANIFEST_DIR set reruns ring's build script (it watches that variable), rebuilds
        // ring, rustls and everything above them, and the next plain cargo call rebuilds them
        // all again (50 s in CI).
        for (name, _) in std::env::vars_os() {
            if is_cargo_test_variable(&name.to_string_lossy()) {
                command.env_remove(name);
            }
        }
        command
    }
}

/// Variables cargo sets for the test process it runs, OUT_DIR included (not the ones a user sets: CARGO_HOME,
/// CARGO_TARGET_DIR, CARGO_BUILD_*, ...).
fn is_cargo_test_variable(name: &str) -> bool {
    name == "CARGO"
        || name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_EXE_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

#[test]
fn an_example_runs_in_a_users_shell_not_in_cargo_tests_environment() {
    // This process runs under `cargo test`, so it has cargo's variables; the example's shell
    // must not.
    let scratch = tempfile::tempdir().expect("scratch");
    let output = UserShell::new(scratch.path().to_path_buf(), &[])
        .command("env", scratch.path())
        .output()
        .expect("env");
    let env = String::from_utf8_lossy(&output.stdout);
    let names: Vec<&str> = env
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name)
        .collect();
    assert!(
        names.contains(&"HOME") && names.contains(&"CARGO_HOME"),
        "{names:?}"
    );
    let leaked: Vec<&&str> = names
        .iter()
        .filter(|name| is_cargo_test_variable(name))
        .collect();
    // The two that rebuilt ring and everything above it, named on their own.
    for name in ["CARGO_MANIFEST_DIR", "OUT_DIR"] {
        assert!(std::env::var_os(name).is_some(), "cargo test sets {name}");
        assert!(
            !names.contains(&name),
            "cargo test's {name} reaches the example"
        );
    }
    assert!(
        leaked.is_empty(),
        "cargo test's variables reach the example: {leaked:?}"
    );
}

/// A server line prints its address (or its listening line) within a minute, then is stopped.
fn serves(mut command: Command) -> Result<(), String> {
    use std::io::BufRead as _;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| error.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    let line = receiver.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let output = child
        .wait_with_output()
        .map_err(|error| error.to_string())?;
    match line {
        Ok(line) if line.trim().parse::<std::net::SocketAddr>().is_ok() => Ok(()),
        Ok(line) => Err(format!(
            "printed {line:?}, not an address; stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )),
        Err(_) => Err(format!(
            "no address within 60 s; stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )),
    }
}

#[test]
fn comments_and_synopses_are_told_apart() {
    assert_eq!(
        strip_comment("clawbridge params x.json    # threadStart, turnStart"),
        "clawbridge params x.json"
    );
    assert_eq!(
        strip_comment("echo '# not a comment'"),
        "echo '# not a comment'"
    );
    assert!(is_synopsis("clawbridge audit TRANSCRIPT_DIR"));
    assert!(is_synopsis("clawbridge audit dir [--json]"));
    assert!(!is_synopsis(
        "clawbridge capture fixtures/runs/telegram-direct.json --out capture"
    ));
    assert!(is_server(
        "clawbridge app-server --listen ws://127.0.0.1:0 --offline"
    ));
}
