//! The `codex app-server` child process: finding the binary, spawning it with an explicit
//! `CODEX_HOME`, draining stderr continuously into `tracing` (keeping the last lines for error
//! messages), and making sure it never outlives us (`kill_on_drop`).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How many stderr lines are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// Where the binary came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundBinary {
    pub path: PathBuf,
    pub via: &'static str,
}

/// Find the Codex binary: `--codex-bin`, then `CODEX_BIN`, then `PATH`.
/// The error names everything that was tried.
pub fn find_codex_binary(
    flag: Option<&Path>,
    env_value: Option<OsString>,
    path_var: Option<OsString>,
) -> Result<FoundBinary, String> {
    let mut tried = Vec::new();
    if let Some(path) = flag {
        if path.is_file() {
            // Absolute, because the child runs in the workspace.
            return Ok(FoundBinary {
                path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
                via: "--codex-bin",
            });
        }
        tried.push(format!("--codex-bin {} (no such file)", path.display()));
    } else {
        tried.push("--codex-bin (not given)".to_string());
    }
    match env_value.filter(|value| !value.is_empty()) {
        Some(value) => {
            let path = PathBuf::from(&value);
            if path.is_file() {
                return Ok(FoundBinary {
                    path: std::path::absolute(&path).unwrap_or(path),
                    via: "CODEX_BIN",
                });
            }
            tried.push(format!("CODEX_BIN={} (no such file)", path.display()));
        }
        None => tried.push("CODEX_BIN (unset)".to_string()),
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match which::which_in("codex", path_var, cwd) {
        Ok(path) => return Ok(FoundBinary { path, via: "PATH" }),
        Err(_) => tried.push("`codex` on PATH (not found)".to_string()),
    }
    Err(format!(
        "cannot find the Codex CLI; tried {}. Install the pinned version with `scripts/install-codex` (or `npm install -g @openai/codex@{}`) and pass --codex-bin",
        tried.join(", "),
        crate::codex::protocol::PINNED_CODEX_VERSION
    ))
}

/// The npm package's `codex` is a Node launcher that starts the native binary as its child. Kill,
/// crash detection and `kill_on_drop` must reach the process that owns the pipes, so when we are
/// pointed at the launcher we run the native binary it would have started.
pub fn resolve_native_binary(path: &Path) -> PathBuf {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let is_launcher = real.extension().is_some_and(|ext| ext == "js")
        || std::fs::read(&real).is_ok_and(|bytes| {
            let head = &bytes[..bytes.len().min(128)];
            head.starts_with(b"#!") && memchr::memmem::find(head, b"node").is_some()
        });
    if !is_launcher {
        return path.to_path_buf();
    }
    // <node_modules>/@openai/codex/bin/codex.js -> <node_modules>/@openai/codex-*/vendor/*/bin/codex
    let Some(package) = real.parent().and_then(Path::parent) else {
        return path.to_path_buf();
    };
    let mut search_roots = vec![package.join("node_modules/@openai"), package.to_path_buf()];
    if let Some(scope) = package.parent() {
        search_roots.push(scope.to_path_buf());
    }
    for root in search_roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut packages: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|dir| {
                dir.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("codex-") || name == "vendor")
            })
            .collect();
        packages.sort();
        for candidate_package in packages {
            let vendor = if candidate_package.ends_with("vendor") {
                candidate_package
            } else {
                candidate_package.join("vendor")
            };
            let Ok(triples) = std::fs::read_dir(&vendor) else {
                continue;
            };
            for triple in triples.filter_map(|entry| entry.ok()) {
                let native = triple.path().join("bin/codex");
                if native.is_file() {
                    tracing::info!(
                        "using the native Codex binary {} behind the npm launcher",
                        native.display()
                    );
                    return native;
                }
            }
        }
    }
    path.to_path_buf()
}

/// How to start the app-server.
#[derive(Clone, Debug)]
pub struct SpawnOptions {
    pub binary: PathBuf,
    pub codex_home: PathBuf,
    pub cwd: PathBuf,
    /// Offline runs also point `HOME` at the throwaway home and drop `OPENAI_*` / `CODEX_*`
    /// variables, so nothing of the user's setup leaks in (docs/codex-wire.md §9.1).
    pub isolate_environment: bool,
}

/// A running app-server.
pub struct CodexProcess {
    child: Child,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    pub pid: Option<u32>,
}

impl CodexProcess {
    /// Spawn `codex app-server`; returns the process and its stdio.
    pub fn spawn(
        options: &SpawnOptions,
    ) -> std::io::Result<(CodexProcess, ChildStdout, ChildStdin)> {
        let binary = resolve_native_binary(&options.binary);
        let mut command = Command::new(&binary);
        command
            .arg("app-server")
            .current_dir(&options.cwd)
            .env("CODEX_HOME", &options.codex_home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if options.isolate_environment {
            for (key, _) in std::env::vars_os() {
                let key_text = key.to_string_lossy();
                if key_text.starts_with("OPENAI_")
                    || (key_text.starts_with("CODEX_") && key_text != "CODEX_HOME")
                {
                    command.env_remove(&key);
                }
            }
            command.env("HOME", &options.codex_home);
        }
        tracing::info!(
            "starting {} app-server (CODEX_HOME={}, cwd={})",
            options.binary.display(),
            options.codex_home.display(),
            options.cwd.display()
        );
        let mut child = command.spawn()?;
        let pid = child.id();
        let missing = |what| std::io::Error::other(format!("app-server {what} was not piped"));
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
        let tail = Arc::clone(&stderr_tail);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "codex_stderr", "{line}");
                let mut tail = tail
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        Ok((
            CodexProcess {
                child,
                stderr_tail,
                pid,
            },
            stdout,
            stdin,
        ))
    }

    /// The last stderr lines (for error messages).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail
            .lock()
            .map(|tail| tail.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Wait up to `limit` for the process to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Kill and reap.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}
