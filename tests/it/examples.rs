//! The documentation's examples, run as written: every `sh` block of README.md and the docs (a
//! test keeps that list equal to the documents that have one), as a user types it after the
//! README's `export PATH=...` line (this build's `clawbridge` and the pinned Codex first on
//! `PATH`), in a throwaway HOME that holds a recorded session (`~/audit`, the committed
//! direct-chat record moved onto a copy of `fixtures/workspace`) and a loopback collector on the
//! port the trace examples name (Phoenix's 6006), which must receive the `export-otel` example's
//! spans.
//!
//! Each command line runs on its own (`\` continuations joined): `clawbridge` lines in a scratch
//! folder that holds the clone's `fixtures` and a copy of the recorded session (`./transcript`),
//! `scripts/` lines in the clone; each exits as its comment promises (`# exits 1: ...`, else 0)
//! with some output. Lines that start a server (`serve`, `--listen`) must print their address
//! within a minute, then are stopped. A block that starts a server in the background (`... &`)
//! and then talks to it runs whole, as one `set -e` script that must finish within a minute;
//! what it started is stopped with its process group.
//!
//! Left out, each for a reason ([`skipped`]): `scripts/test` (it is the test command), `cargo
//! install` and `npm install -g` (`scripts/test-install` installs both ways), the `export PATH`
//! line (it is this test's environment), `ssh` (a second host), `sudo` (operations.md's steps on
//! a host as root: `operations` checks the unit, `fleet_state` runs the account steps), `read
//! -rs` (a person pastes a key), `scripts/seed-audit VERSION`, `--route embedded VERSION`,
//! `--update` and `scripts/live-lane --record` (minutes of real OpenClaw runs; rewrites the
//! records: scripts/test runs `--check`), `scripts/codex-compat latest` (scripts/test runs it on the newest supported Codex);
//! and blocks marked `<!-- recipe: SCRIPT -->` or `<!-- recipe settings: SCRIPT -->` (a test keeps
//! the recipe equal to the script, and the real-OpenClaw tests run the script). A line that is a synopsis rather
//! than a command (`DIR`, `[--json]`, `...`) fails: the examples are for running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// One `sh` block of a document: where it starts, the HTML comment just above it (a marker such
/// as `<!-- recipe: scripts/openclaw-team -->`), and its command lines.
struct Block {
    line: usize,
    marker: Option<String>,
    commands: Vec<Line>,
}

/// A command line of a block (comments and blank lines left out, `\` continuations joined), with
/// the exit code its comment promises (`# exits 1: ...`), else 0.
#[derive(Debug, PartialEq)]
struct Line {
    line: usize,
    text: String,
    promised: i32,
}

impl Block {
    /// A block that starts a server in the background (a line ending in `&`) and then talks to
    /// it: its lines only make sense together, so it runs as one script.
    fn is_script(&self) -> bool {
        self.commands
            .iter()
            .any(|command| command.text.ends_with('&'))
    }
}

fn sh_blocks(text: &str) -> Vec<Block> {
    let promise = regex::Regex::new(r"#\s*exits (\d+)").expect("regex");
    let mut blocks: Vec<Block> = Vec::new();
    let mut in_sh = false;
    let mut above = None;
    let mut pending: Option<Line> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            if in_sh {
                blocks.push(Block {
                    line: number + 1,
                    marker: above.take(),
                    commands: Vec::new(),
                });
            }
            continue;
        }
        if !in_sh {
            if !trimmed.is_empty() {
                above = trimmed.starts_with("<!--").then(|| trimmed.to_string());
            }
            continue;
        }
        let Some(block) = blocks.last_mut() else {
            continue;
        };
        let command = strip_comment(trimmed);
        let promised = promise
            .captures(&trimmed[command.len()..])
            .and_then(|found| found[1].parse().ok())
            .unwrap_or(0);
        let mut joined = match pending.take() {
            Some(mut started) => {
                started.text.push(' ');
                started.text.push_str(command);
                started.promised = started.promised.max(promised);
                started
            }
            None if command.is_empty() => continue,
            None => Line {
                line: number + 1,
                text: command.to_string(),
                promised,
            },
        };
        if let Some(head) = joined.text.strip_suffix('\\') {
            joined.text = head.trim_end().to_string();
            pending = Some(joined);
        } else {
            block.commands.push(joined);
        }
    }
    blocks
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

/// Why a command line is not run here, if it is not.
fn skipped(line: &str) -> Option<&'static str> {
    const SKIPPED: &[(&str, &str)] = &[
        ("scripts/test", "it is the test command"),
        ("cargo install", "scripts/test-install installs that way"),
        ("npm install -g", "scripts/test-install installs that way"),
        ("export PATH=", "it is this test's environment"),
        ("ssh ", "it needs a second host"),
        (
            "sudo ",
            "it changes the host as root (operations.md: a test verifies the unit with systemd-analyze and starts the endpoint with its flags; the account steps run in fleet_state)",
        ),
        ("read -rs ", "it waits for a person to paste a key"),
        (
            "scripts/seed-audit 2",
            "five real OpenClaw runs (4 minutes); the real-OpenClaw stage runs OpenClaw",
        ),
        (
            "scripts/seed-audit --route embedded",
            "it records with the real OpenClaw 2026.6.10 (about 40 s); scripts/test runs --check on the record",
        ),
        (
            "scripts/live-lane --record",
            "it records with the real OpenClaw 2026.6.10 (about 100 s); scripts/test runs --check on the record",
        ),
        (
            "scripts/seed-audit --update",
            "it rewrites the committed records; scripts/test runs --check",
        ),
        (
            "scripts/codex-compat latest",
            "scripts/test runs codex-compat on the newest supported Codex",
        ),
    ];
    SKIPPED
        .iter()
        .find(|(start, _)| line.starts_with(start))
        .map(|(_, why)| *why)
}

fn is_server(line: &str) -> bool {
    line.starts_with("clawbridge serve") || line.contains(" --listen ")
}

/// A synopsis, not a command: an upper-case placeholder, an optional `[...]` part or `...`.
fn is_synopsis(line: &str) -> bool {
    let placeholder = regex::Regex::new(r"(^|\s)[A-Z][A-Z_]{2,}(\s|$)").expect("regex");
    placeholder.is_match(line) || line.contains(" [") || line.contains("...")
}

/// The documents whose `sh` blocks are examples.
const DOCS: &[&str] = &[
    "README.md",
    "docs/commands.md",
    "docs/app-server.md",
    "docs/audit.md",
    "docs/live-routing.md",
    "docs/replay.md",
    "docs/bridge-api.md",
    "docs/codex-compat.md",
    "docs/traces.md",
    "docs/operations.md",
];

#[test]
fn every_document_with_examples_is_run() {
    let repo = repo_root();
    let mut with_examples = Vec::new();
    for doc in std::iter::once(repo.join("README.md")).chain(
        std::fs::read_dir(repo.join("docs"))
            .expect("docs")
            .map(|entry| entry.expect("entry").path()),
    ) {
        let text = std::fs::read_to_string(&doc).unwrap_or_default();
        if sh_blocks(&text)
            .iter()
            .any(|block| !block.commands.is_empty())
        {
            let name = doc
                .strip_prefix(&repo)
                .expect("in repo")
                .display()
                .to_string();
            with_examples.push(name);
        }
    }
    with_examples.sort();
    let mut run: Vec<String> = DOCS.iter().map(|doc| doc.to_string()).collect();
    run.sort();
    assert_eq!(
        with_examples, run,
        "the documents with `sh` blocks and the ones run"
    );
}

/// The recorded session a user audits and exports (`~/audit`, `./transcript`): the committed
/// direct-chat record, its workspace (`cwd`) moved to a copy of `fixtures/workspace`.
fn recorded_session(repo: &Path, to: &Path, workspace: &Path) {
    fn move_workspace(dir: &Path, workspace: &str) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                move_workspace(&path, workspace);
            } else {
                let text = std::fs::read_to_string(&path).expect("read");
                let moved = text.replace("/home/openclaw/workspace", workspace);
                std::fs::write(&path, moved).expect("write");
            }
        }
    }
    copy_tree(&repo.join("fixtures/seed-audit/2026.9.6/direct"), to);
    move_workspace(to, &workspace.display().to_string());
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
    let workspace = scratch.path().join("workspace");
    copy_tree(&repo.join("fixtures/workspace"), &workspace);
    recorded_session(&repo, &home.join("audit"), &workspace);
    recorded_session(&repo, &work.join("transcript"), &workspace);
    // The collector the traces examples name (Phoenix's port).
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let collector = runtime.block_on(crate::otel::Collector::start_on("127.0.0.1:6006"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_clawbridge"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let codex_dir = crate::e2e::codex_bin()
        .parent()
        .expect("codex dir")
        .to_path_buf();
    let shell = UserShell::new(home.clone(), &[bin_dir, codex_dir]);
    let mut ran = 0;
    let mut failures = Vec::new();
    let mut exported = false;
    let begun = std::time::Instant::now();
    for doc in DOCS {
        let text = std::fs::read_to_string(repo.join(doc)).expect("read");
        for block in sh_blocks(&text) {
            if let Some(marker) = &block.marker {
                // A recipe block is kept equal to a script that its own test runs.
                assert!(
                    marker.starts_with("<!-- recipe"),
                    "{doc}:{}: unknown marker {marker}",
                    block.line
                );
                continue;
            }
            if block.is_script() {
                ran += 1;
                eprintln!(
                    "{:>6.1} s  {doc}:{}: a script block",
                    begun.elapsed().as_secs_f64(),
                    block.line
                );
                let script: Vec<&str> = block
                    .commands
                    .iter()
                    .map(|line| line.text.as_str())
                    .collect();
                if let Err(why) = runs_as_script(shell.script(&script.join("\n"), &work)) {
                    failures.push(format!("{doc}:{}: the block\n  {why}", block.line));
                }
                continue;
            }
            for Line {
                line: number,
                text: line,
                promised,
            } in block.commands
            {
                if skipped(&line).is_some() {
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
                // Where the time goes (each line's start, from the test's).
                eprintln!("{:>6.1} s  {at}", begun.elapsed().as_secs_f64());
                exported |= line.starts_with("clawbridge export-otel");
                if is_server(&line) {
                    if let Err(why) = serves(shell.command(&line, &cwd)) {
                        failures.push(format!("{at}\n  {why}"));
                    }
                    continue;
                }
                let output = shell
                    .command(&line, &cwd)
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
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 40, "ran {ran} examples");
    assert!(exported, "no export-otel example ran");
    assert!(
        !collector.spans().is_empty(),
        "the export-otel example sent the collector nothing"
    );
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
        self.bash(&format!("exec {line}"), cwd)
    }

    /// A whole block as one script, in a process group of its own (what it starts in the
    /// background is stopped with it).
    fn script(&self, script: &str, cwd: &Path) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut command = self.bash(&format!("set -e\n{script}"), cwd);
        command.process_group(0);
        command
    }

    fn bash(&self, script: &str, cwd: &Path) -> Command {
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(script)
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
    // The two that rebuilt ring and everything above it, named on their own. Cargo sets
    // OUT_DIR only for a package with a build script (the codex crate's, not this one's), so
    // the test checks it is not passed on and the filter knows it.
    assert!(is_cargo_test_variable("OUT_DIR"));
    for name in ["CARGO_MANIFEST_DIR", "OUT_DIR"] {
        assert!(
            name == "OUT_DIR" || std::env::var_os(name).is_some(),
            "cargo test sets {name}"
        );
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

/// A script block exits 0 within a minute, having printed something; then its process group
/// (the server it started) is stopped.
fn runs_as_script(mut command: Command) -> Result<(), String> {
    let output = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (out, err) = (output.path().join("out"), output.path().join("err"));
    let file = |path: &Path| std::fs::File::create(path).map_err(|error| error.to_string());
    // Files, not pipes: the server the script leaves running holds them open.
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file(&out)?)
        .stderr(file(&err)?)
        .spawn()
        .map_err(|error| error.to_string())?;
    let status = poll(Duration::from_secs(60), || child.try_wait().ok().flatten());
    let group = child.id();
    let _ = Command::new("kill")
        .arg("--")
        .arg(format!("-{group}"))
        .status();
    let _ = child.kill();
    let _ = child.wait();
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    match status {
        Some(status) if status.success() && !stdout.trim().is_empty() => Ok(()),
        Some(status) => Err(format!(
            "{status} with {} bytes of output; stderr:\n{stderr}",
            stdout.len()
        )),
        None => Err(format!("still running after 60 s; stderr:\n{stderr}")),
    }
}

#[test]
fn a_script_block_fails_on_its_first_failing_line_and_its_server_is_stopped() {
    let scratch = tempfile::tempdir().expect("scratch");
    let shell = UserShell::new(scratch.path().to_path_buf(), &[]);
    // The background `sleep` holds the output files open and would outlive the script.
    let started = std::time::Instant::now();
    runs_as_script(shell.script("sleep 300 &\necho ok", scratch.path())).expect("runs");
    assert!(started.elapsed() < Duration::from_secs(30));
    let failed = runs_as_script(shell.script("false\necho ok", scratch.path()));
    assert!(failed.is_err(), "set -e: {failed:?}");
    let silent = runs_as_script(shell.script("true", scratch.path()));
    assert!(silent.is_err(), "no output: {silent:?}");
}

#[test]
fn blocks_join_continuations_and_keep_their_marker() {
    let text =
        "intro\n\n<!-- recipe: scripts/x -->\n```sh\nrun a \\\n  --b   # exits 2: why\n```\n\
                \n```sh\n# a comment\n\nserve &\ncurl x\n```\n```text\nnot run\n```\n";
    let blocks = sh_blocks(text);
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        blocks[0].marker.as_deref(),
        Some("<!-- recipe: scripts/x -->")
    );
    assert_eq!(
        blocks[0].commands,
        vec![Line {
            line: 5,
            text: "run a --b".to_string(),
            promised: 2
        }]
    );
    assert!(!blocks[0].is_script());
    assert_eq!(blocks[1].marker, None);
    assert_eq!(blocks[1].commands.len(), 2);
    assert!(blocks[1].is_script());
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
    assert!(is_synopsis(
        "clawbridge app-server --transcript ~/audit ..."
    ));
    assert_eq!(
        skipped("ssh -N -L 1:2:3 host"),
        Some("it needs a second host")
    );
    assert_eq!(skipped("scripts/seed-audit --check"), None);
    assert!(!is_synopsis(
        "clawbridge capture fixtures/runs/telegram-direct.json --out capture"
    ));
    assert!(is_server(
        "clawbridge app-server --listen ws://127.0.0.1:0 --offline"
    ));
}
