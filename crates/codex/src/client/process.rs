//! The `codex app-server` child process: finding the binary, spawning it with an explicit
//! `CODEX_HOME`, draining stderr continuously into `tracing` (keeping the last lines for error
//! messages), and making sure it never outlives us (`kill_on_drop`).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use clawbridge_support::jail::Jail;
use clawbridge_support::task::Tasks;

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
        crate::protocol::PINNED_CODEX_VERSION
    ))
}

/// Longest stderr line kept (longer lines are cut, the rest of the line skipped).
const MAX_STDERR_LINE_BYTES: usize = 8 * 1024;

/// Drain Codex's stderr to the end, as bytes: invalid UTF-8 is replaced, lines are cut at
/// [`MAX_STDERR_LINE_BYTES`] and never buffered whole, so neither stops the drain (a stopped drain
/// would kill Codex with SIGPIPE) nor grows memory.
pub async fn drain_stderr(
    stderr: impl tokio::io::AsyncRead + Unpin,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    use tokio::io::AsyncReadExt;
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let flush = |line: &mut Vec<u8>| {
        // Codex colours its log lines; the tail reaches error messages and clients as text.
        let text = clawbridge_support::text::strip_ansi(&String::from_utf8_lossy(line));
        line.clear();
        tracing::debug!(target: "codex_stderr", "{text}");
        let mut tail = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    let mut skipping = false;
    loop {
        let read = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        for &byte in &chunk[..read] {
            if byte == b'\n' {
                if !skipping {
                    flush(&mut line);
                }
                skipping = false;
            } else if !skipping {
                line.push(byte);
                if line.len() >= MAX_STDERR_LINE_BYTES {
                    line.extend_from_slice("…".as_bytes());
                    flush(&mut line);
                    skipping = true;
                }
            }
        }
    }
    if !line.is_empty() {
        flush(&mut line);
    }
}

/// Bytes of a file's start that tell a launcher script from a binary.
const SNIFF_BYTES: u64 = 128;

/// The first [`SNIFF_BYTES`] of a file (never the whole 300 MB binary).
fn file_head(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(SNIFF_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

/// The npm package's `codex` is a Node launcher that starts the native binary as its child. Kill,
/// crash detection and `kill_on_drop` must reach the process that owns the pipes, so when we are
/// pointed at the launcher we run the native binary it would have started.
pub fn resolve_native_binary(path: &Path) -> PathBuf {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let is_launcher = real.extension().is_some_and(|ext| ext == "js")
        || file_head(&real).is_some_and(|head| {
            head.starts_with(b"#!") && memchr::memmem::find(&head, b"node").is_some()
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
    /// `-c key=value` overrides put before `app-server` (the WebSocket endpoint's offline
    /// members point Codex's `openai` provider at the stub: `openai_base_url="..."`).
    pub config_overrides: Vec<String>,
    /// A service's members keep only the variables of [`MEMBER_ENVIRONMENT`] (and these names
    /// besides) from the service's environment; `None` keeps everything (the CLI's own runs).
    pub environment: Option<Vec<String>>,
    /// A service's members run in a private view of the machine ([`Jail`]): their own Codex
    /// home and the workspace roots, never another account's home, the state dir or the
    /// service's processes.
    pub jail: Option<Jail>,
    /// Without a jail, a service's members start under this helper's reaper
    /// (`support::reaper`), so that whatever a member started ends with it.
    pub reaper: Option<PathBuf>,
}

/// What a service's app-server keeps of the service's environment: what finds programs and
/// speaks the user's language, never what the service was given for itself (exporter headers,
/// provider keys, tokens). `LC_*` is kept too. `--member-env NAME` adds a name.
pub const MEMBER_ENVIRONMENT: [&str; 14] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "RUST_LOG",
    "NO_COLOR",
];

/// Whether a service's app-server keeps `key` (see [`MEMBER_ENVIRONMENT`]).
fn member_keeps(key: &std::ffi::OsStr, extra: &[String]) -> bool {
    let Some(key) = key.to_str() else {
        return false;
    };
    MEMBER_ENVIRONMENT.contains(&key)
        || key.starts_with("LC_")
        || extra.iter().any(|name| name == key)
}

/// A running app-server.
pub struct CodexProcess {
    /// `None` only once a drop has handed it to the task that reaps it (see `Drop`).
    child: Option<Child>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// The stderr drain: it ends at the pipe's end, and is aborted with the process.
    drain: tokio::task::JoinHandle<()>,
    /// The drain was awaited to its end (a finished task is not awaited twice).
    drained: bool,
    pub pid: Option<u32>,
    /// Started under the reaper: stopped with SIGTERM, which ends everything beneath it.
    reaped: bool,
    /// Killed and reaped already: a second kill does nothing. Set only once the wait for the
    /// exit has returned, so a kill given up half-way (its future dropped) is done again.
    killed: bool,
    /// Its place among the endpoint's app-servers (`PoolConfig::process_slots`): given back only
    /// once the process is reaped, whether by [`CodexProcess::kill`] or after a drop.
    place: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// How long a reaper has to end what its member started before it is killed itself.
const REAPER_STOP_WAIT: Duration = Duration::from_secs(5);

impl Drop for CodexProcess {
    fn drop(&mut self) {
        self.drain.abort();
        if self.reaped {
            self.terminate();
        }
        // A process dropped alive (a start or a kill given up half-way) is killed and reaped by
        // a task of its own before its place goes back: the bound on app-servers counts
        // processes, not handles. Without a place it ends as before (`kill_on_drop`, or the
        // reaper's SIGTERM).
        let Some(place) = self.place.take() else {
            return;
        };
        let Some(mut child) = self.child.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let reaped = self.reaped;
        Tasks::new().spawn(async move {
            if reaped {
                let _ = tokio::time::timeout(REAPER_STOP_WAIT, child.wait()).await;
            }
            let _ = child.kill().await;
            drop(place);
        });
    }
}

impl CodexProcess {
    /// Spawn `codex app-server`; returns the process and its stdio.
    pub fn spawn(
        options: &SpawnOptions,
    ) -> std::io::Result<(CodexProcess, ChildStdout, ChildStdin)> {
        let binary = resolve_native_binary(&options.binary);
        let mut args: Vec<OsString> = Vec::new();
        for value in &options.config_overrides {
            args.push("-c".into());
            args.push(value.into());
        }
        args.push("app-server".into());
        let reaped = options.jail.is_none() && options.reaper.is_some();
        let mut command = match (&options.jail, &options.reaper) {
            (Some(jail), _) => {
                let (helper, line) = jail.wrap(&options.codex_home, &binary, &args);
                let mut command = Command::new(helper);
                command.args(line);
                command
            }
            (None, Some(helper)) => {
                let (helper, line) =
                    clawbridge_support::reaper::wrap(helper, std::process::id(), &binary, &args);
                let mut command = Command::new(helper);
                command.args(line);
                command
            }
            (None, None) => {
                let mut command = Command::new(&binary);
                command.args(&args);
                command
            }
        };
        if let Some(extra) = &options.environment {
            command.env_clear();
            command.envs(std::env::vars_os().filter(|(key, _)| member_keeps(key, extra)));
        }
        command
            .current_dir(&options.cwd)
            .env("CODEX_HOME", &options.codex_home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A reaper is stopped with SIGTERM (on drop too): SIGKILL would leave nobody to end
            // what the member started.
            .kill_on_drop(!reaped);
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
            "starting {} app-server (CODEX_HOME={}, cwd={}{})",
            options.binary.display(),
            options.codex_home.display(),
            options.cwd.display(),
            if options.jail.is_some() {
                ", in a private view of the machine"
            } else {
                ""
            }
        );
        let mut child = command.spawn()?;
        let pid = child.id();
        let missing = |what| std::io::Error::other(format!("app-server {what} was not piped"));
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
        let tail = Arc::clone(&stderr_tail);
        let tasks = Tasks::new();
        let drain = tasks.spawn(drain_stderr(stderr, tail));
        Ok((
            CodexProcess {
                child: Some(child),
                stderr_tail,
                drain,
                drained: false,
                pid,
                reaped,
                killed: false,
                place: None,
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

    /// Hold `place` until this process is reaped.
    pub fn hold_place(&mut self, place: tokio::sync::OwnedSemaphorePermit) {
        self.place = Some(place);
    }

    /// Wait up to `limit` for the process to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        tokio::time::timeout(limit, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// SIGTERM to a reaper that has not exited (it ends everything beneath it and exits).
    fn terminate(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            if let Some(pid) = child
                .id()
                .and_then(|pid| rustix::process::Pid::from_raw(i32::try_from(pid).ok()?))
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
    }

    /// Kill and reap (a reaper is asked first, and killed only if it has not ended everything
    /// within [`REAPER_STOP_WAIT`]), then give its place back; the stderr drain reads what is
    /// left and ends (bounded wait). A kill whose future is dropped half-way is done again by
    /// the next one.
    pub async fn kill(&mut self) {
        if self.killed {
            return;
        }
        if self.reaped {
            self.terminate();
            if self.wait_exit(REAPER_STOP_WAIT).await.is_none() {
                tracing::warn!(
                    "the app-server's reaper (pid {:?}) did not end within {REAPER_STOP_WAIT:?}; killing it",
                    self.pid
                );
            }
        }
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill().await;
        }
        self.killed = true;
        // Reaped: its place goes back.
        self.place.take();
        if !self.drained
            && tokio::time::timeout(Duration::from_secs(1), &mut self.drain)
                .await
                .is_ok()
        {
            self.drained = true;
        }
    }
}

#[cfg(test)]
mod drain_tests {
    use super::*;

    #[tokio::test]
    async fn stderr_is_drained_past_invalid_utf8_and_endless_lines() {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let drain = tokio::spawn(drain_stderr(reader, Arc::clone(&tail)));
        use tokio::io::AsyncWriteExt;
        writer.write_all(b"bad \xff byte\n").await.expect("write");
        // 1 MiB without a newline: cut, never buffered whole.
        writer
            .write_all(&vec![b'z'; 1024 * 1024])
            .await
            .expect("write");
        writer.write_all(b"\nlast line\n").await.expect("write");
        drop(writer);
        drain.await.expect("drained to the end");
        let lines: Vec<String> = tail.lock().expect("tail").iter().cloned().collect();
        assert_eq!(lines[0], "bad \u{FFFD} byte");
        assert!(lines[1].len() <= MAX_STDERR_LINE_BYTES + 4 && lines[1].ends_with('…'));
        assert_eq!(lines.last().map(String::as_str), Some("last line"));
    }

    #[test]
    fn the_sniff_reads_only_the_head() {
        let dir = tempfile::tempdir().expect("dir");
        let big = dir.path().join("codex");
        let mut bytes = b"#!/usr/bin/env node\n".to_vec();
        bytes.resize(4 * 1024 * 1024, b'x');
        std::fs::write(&big, &bytes).expect("write");
        assert_eq!(file_head(&big).map(|head| head.len()), Some(128));
    }
}

/// Protection: a place among the endpoint's app-servers goes back only once its process is
/// reaped, however the handle ends (`--app-servers` bounds processes, not handles).
#[cfg(test)]
mod place_tests {
    use super::*;

    /// An app-server that only runs `script` (`exec sleep 30`): `sh app-server` reads the
    /// script of that name in `dir` (read by sh, never executed from a file being written).
    fn sleeper(dir: &Path, script: &str) -> SpawnOptions {
        std::fs::write(dir.join("app-server"), script).expect("script");
        SpawnOptions {
            binary: PathBuf::from("/bin/sh"),
            codex_home: dir.to_path_buf(),
            cwd: dir.to_path_buf(),
            isolate_environment: false,
            config_overrides: Vec::new(),
            environment: None,
            jail: None,
            reaper: None,
        }
    }

    fn gone(pid: u32) -> bool {
        !Path::new(&format!("/proc/{pid}")).exists()
    }

    #[tokio::test]
    async fn a_process_dropped_alive_gives_its_place_back_once_it_is_reaped() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut process, _stdout, _stdin) =
            CodexProcess::spawn(&sleeper(dir.path(), "exec sleep 30\n")).expect("spawn");
        let pid = process.pid.expect("pid");
        let places = Arc::new(tokio::sync::Semaphore::new(1));
        process.hold_place(Arc::clone(&places).try_acquire_owned().expect("place"));
        drop(process);
        assert_eq!(
            places.available_permits(),
            0,
            "back before the process was reaped"
        );
        let place = tokio::time::timeout(Duration::from_secs(10), places.acquire())
            .await
            .expect("the place came back")
            .expect("place");
        drop(place);
        assert!(
            gone(pid),
            "the place came back, the process {pid} is still there"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_kill_given_up_half_way_is_done_again_before_the_place_goes_back() {
        let dir = tempfile::tempdir().expect("dir");
        // As under the reaper: a kill asks with SIGTERM and waits, here for a process that does
        // not listen (SIGTERM ignored), so the first kill cannot end in one poll.
        let options = sleeper(dir.path(), "trap '' TERM\nexec sleep 30\n");
        let (mut process, _stdout, _stdin) = CodexProcess::spawn(&options).expect("spawn");
        process.reaped = true;
        let pid = process.pid.expect("pid");
        let places = Arc::new(tokio::sync::Semaphore::new(1));
        process.hold_place(Arc::clone(&places).try_acquire_owned().expect("place"));
        // The first kill is polled once (SIGTERM sent), then its future dropped in its wait.
        let _ = tokio::time::timeout(Duration::ZERO, process.kill()).await;
        assert_eq!(
            places.available_permits(),
            0,
            "back before the process was reaped"
        );
        // The next kill does it all again (the wait runs out: SIGKILL) and reaps.
        process.kill().await;
        assert!(
            gone(pid),
            "the second kill returned, the process {pid} is still there"
        );
        assert_eq!(
            places.available_permits(),
            1,
            "the place is back once reaped"
        );
    }
}
