//! Running an operator-configured shell command (a tool handler, a bootstrap hook) with bounds.
//!
//! One deadline covers the whole exchange: writing stdin, reading stdout and stderr, and the exit.
//! The three streams are served concurrently (a command that writes before it reads cannot
//! deadlock us), and stdout and stderr are capped while they are read, not after: a command that
//! prints without end is killed at the cap. A command past its deadline is killed.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a bounded command produced.
#[derive(Debug)]
pub struct BoundedOutput {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// The last bytes of stderr (lossy UTF-8), for messages.
    pub stderr_tail: String,
}

/// Why a bounded command gave no usable output.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error("cannot start: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("did not finish within {0:?}")]
    Timeout(Duration),
    #[error("printed more than {0} bytes")]
    TooMuchOutput(usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Bytes of stderr kept for messages.
const STDERR_TAIL: usize = 4096;

/// This process's own executable as a path that starts this very build again, for the helpers
/// it runs (the reaper, the jail's stages). An endpoint serves for days, and an upgrade in place
/// (`cargo install`, `npm install -g`, a package manager) replaces or removes the file it was
/// started from: `current_exe` then names a file that is gone (Linux reads it as "PATH
/// (deleted)") or a newer build whose helper protocol may differ, and every app-server started
/// after the upgrade would fail. On Linux `/proc/self/exe` still reaches the running image;
/// elsewhere, or without `/proc`, the executable's path.
pub fn own_executable() -> std::io::Result<std::path::PathBuf> {
    let image = std::path::Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && std::fs::read_link(image).is_ok() {
        return Ok(image.to_path_buf());
    }
    std::env::current_exe()
}

/// Start `program` (its binary, then its arguments), inheriting this process's stdio: the
/// helpers' `-- PROGRAM...` (the jail's last stage, the reaper); the error names the binary.
pub fn spawn_program<S: AsRef<std::ffi::OsStr>>(
    program: &[S],
) -> Result<std::process::Child, String> {
    let (binary, arguments) = program
        .split_first()
        .ok_or_else(|| "no program after --".to_string())?;
    std::process::Command::new(binary)
        .args(arguments)
        .spawn()
        .map_err(|error| {
            format!(
                "{}: {error}",
                std::path::Path::new(binary.as_ref()).display()
            )
        })
}

/// Run `sh -c command` with `input` on stdin, at most `max_stdout` bytes of stdout, within
/// `timeout` in all.
pub fn run_shell_bounded(
    command: &str,
    input: &[u8],
    timeout: Duration,
    max_stdout: usize,
) -> Result<BoundedOutput, ChildError> {
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(command);
    run_bounded(shell, input, timeout, max_stdout)
}

/// Run `command` with `input` on stdin, at most `max_stdout` bytes of stdout, within `timeout` in
/// all (the child is killed past either).
pub fn run_bounded(
    mut command: Command,
    input: &[u8],
    timeout: Duration,
    max_stdout: usize,
) -> Result<BoundedOutput, ChildError> {
    let deadline = Instant::now() + timeout;
    // Its own process group, so what it starts in the background (`sleep 61 &`) ends with it.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ChildError::Spawn)?;
    let group = Group::of(&child);
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        // A command that ignores stdin may close it early; that is fine.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let (done, events) = mpsc::channel::<Stream>();
    if let Some(stdout) = child.stdout.take() {
        let done = done.clone();
        std::thread::spawn(move || {
            let _ = done.send(Stream::Stdout(read_capped(stdout, max_stdout)));
        });
    }
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let _ = done.send(Stream::Stderr(read_tail(stderr)));
        });
    }
    let mut stdout = None;
    let mut stderr = None;
    let mut exited = None;
    // Until both streams closed: a command that exited while a background child still holds its
    // pipes has said all it will say, so the rest of its group is ended and the pipes drain.
    while stdout.is_none() || stderr.is_none() {
        if exited.is_none() {
            exited = child.try_wait()?;
            if exited.is_some() {
                group.kill();
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            group.kill();
            let _ = child.kill();
            let _ = child.wait();
            return Err(ChildError::Timeout(timeout));
        }
        match events.recv_timeout(left.min(Duration::from_millis(20))) {
            Ok(Stream::Stdout(Some(bytes))) => stdout = Some(bytes),
            Ok(Stream::Stdout(None)) => {
                group.kill();
                let _ = child.kill();
                let _ = child.wait();
                return Err(ChildError::TooMuchOutput(max_stdout));
            }
            Ok(Stream::Stderr(tail)) => stderr = Some(tail),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Both streams closed; the exit follows (or the command lingers without its pipes).
    loop {
        if let Some(status) = exited.or(child.try_wait()?) {
            group.kill();
            return Ok(BoundedOutput {
                status,
                stdout: stdout.unwrap_or_default(),
                stderr_tail: stderr.unwrap_or_default(),
            });
        }
        if Instant::now() >= deadline {
            group.kill();
            let _ = child.kill();
            let _ = child.wait();
            return Err(ChildError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The process group a bounded command leads.
struct Group(#[cfg(target_os = "linux")] Option<rustix::process::Pid>);

impl Group {
    fn of(child: &std::process::Child) -> Group {
        #[cfg(target_os = "linux")]
        return Group(Some(rustix::process::Pid::from_child(child)));
        #[cfg(not(target_os = "linux"))]
        {
            let _ = child;
            Group()
        }
    }

    /// SIGKILL to the whole group (nothing when it is gone already).
    fn kill(&self) {
        #[cfg(target_os = "linux")]
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

enum Stream {
    /// `None`: over the cap.
    Stdout(Option<Vec<u8>>),
    Stderr(String),
}

fn read_capped(mut reader: impl Read, cap: usize) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = (&mut reader)
        .take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (read <= cap).then_some(bytes)
}

fn read_tail(mut reader: impl Read) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buffer = [0u8; 8192];
    while let Ok(read) = reader.read(&mut buffer) {
        if read == 0 {
            break;
        }
        tail.extend_from_slice(&buffer[..read]);
        if tail.len() > STDERR_TAIL {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    }
    String::from_utf8_lossy(&tail).into_owned()
}

/// Processes a [`tree_rss_bytes`] walk counts at most.
const MAX_TREE: usize = 4096;

/// The resident memory of process `pid` and of every process under it, in bytes, from Linux's
/// `/proc` (`VmRSS` of each, children from `/proc/PID/task/TID/children`); `None` when the
/// process itself cannot be read. Bounded: at most [`MAX_TREE`] processes.
pub fn tree_rss_bytes(pid: u32) -> Option<u64> {
    let mut total = rss_of(pid)?;
    let mut pending = children_of(pid);
    let mut seen = 1;
    while let Some(child) = pending.pop() {
        if seen >= MAX_TREE {
            break;
        }
        seen += 1;
        total += rss_of(child).unwrap_or(0);
        pending.extend(children_of(child));
    }
    Some(total)
}

fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .take(MAX_TREE)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_capped_while_it_is_read() {
        let error = run_shell_bounded("yes", b"", Duration::from_secs(30), 1024 * 1024)
            .expect_err("endless output");
        assert!(matches!(error, ChildError::TooMuchOutput(_)), "{error}");
    }

    #[test]
    fn one_deadline_covers_stdin_and_the_exit() {
        // Never reads stdin and never exits: the 2 MiB write cannot block us past the deadline.
        let input = vec![b'x'; 2 * 1024 * 1024];
        let error = run_shell_bounded("sleep 30", &input, Duration::from_millis(300), 1024)
            .expect_err("deadline");
        assert!(matches!(error, ChildError::Timeout(_)), "{error}");
    }

    #[test]
    fn a_command_that_writes_before_reading_does_not_deadlock() {
        // Prints 256 KiB (more than a pipe holds) before it reads its 256 KiB of input.
        let input = vec![b'y'; 256 * 1024];
        let output = run_shell_bounded(
            "head -c 262144 /dev/zero; cat > /dev/null; echo done >&2",
            &input,
            Duration::from_secs(30),
            1024 * 1024,
        )
        .expect("runs");
        assert!(output.status.success());
        assert_eq!(output.stdout.len(), 262_144);
        assert!(output.stderr_tail.contains("done"));
    }

    /// Protection: a command's background children end with it, and its answer is read as soon
    /// as the command exits (not when a forgotten `sleep 61 &` lets go of the pipe).
    #[test]
    fn background_children_end_with_the_command_and_the_answer_is_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let pid_file = dir.path().join("pid");
        let started = Instant::now();
        let output = run_shell_bounded(
            &format!("sleep 61 & echo $! > {}; echo answer", pid_file.display()),
            b"",
            Duration::from_secs(30),
            1024,
        )
        .expect("output");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout), "answer\n");
        let pid = std::fs::read_to_string(&pid_file).expect("pid");
        // SIGKILL is delivered asynchronously: dead (gone, or a zombie nobody reaped yet) soon.
        let dead = || {
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                .map_or(true, |stat| stat.contains(") Z ") || stat.contains(") X "))
        };
        let until = Instant::now() + Duration::from_secs(10);
        while !dead() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(dead(), "the background sleep was ended with its command");
    }
}
