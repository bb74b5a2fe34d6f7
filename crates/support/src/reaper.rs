//! Where no private view can be made (`support::jail`), an app-server still never outlives its
//! stop: everything it started ends with it.
//!
//! Why: Codex starts each tool command in a process group (and, for a terminal, a session) of
//! its own, so neither killing Codex nor killing its process group reaches a command its model
//! left running (`sleep 120 &`, a dev server). Inside a jail the PID namespace ends them; without
//! one, this stage does. The member is started as `clawbridge-runtime __reap PARENT -- codex ...`:
//! it makes itself a *child subreaper* (every process orphaned beneath it is reparented to it,
//! however it detached), starts Codex, and reaps. When Codex exits, when it is told to stop
//! (SIGTERM or SIGINT from the service), or when the service itself is gone (SIGHUP from the
//! kernel, checked against its parent id: the signal also comes when only the thread that
//! started it ends), it kills every process beneath it, waits for each, and exits.
//!
//! The service stops such a member with SIGTERM, never SIGKILL (which would leave no one to end
//! the rest; see `codex::client::process`).

use std::ffi::OsString;

/// The stage's argument.
pub const REAP: &str = "__reap";

/// The command line that runs `program` with `args` under the reaper `helper`, for a service
/// whose process id is `parent`.
pub fn wrap(
    helper: &std::path::Path,
    parent: u32,
    program: &std::path::Path,
    args: &[OsString],
) -> (std::path::PathBuf, Vec<OsString>) {
    let mut line: Vec<OsString> = vec![REAP.into(), parent.to_string().into(), "--".into()];
    line.push(program.as_os_str().to_owned());
    line.extend(args.iter().cloned());
    (helper.to_path_buf(), line)
}

/// The stage itself: its exit code (Codex's), or why it could not run.
#[cfg(target_os = "linux")]
pub fn stage(args: &[OsString]) -> Result<u8, String> {
    use rustix::process::{Pid, Signal, WaitOptions};
    use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};

    let (parent, program) = parse(args)?;
    // The signals are caught before anything is started: none is missed.
    let mut signals = signal_hook::iterator::Signals::new([SIGCHLD, SIGHUP, SIGINT, SIGTERM])
        .map_err(|error| format!("catching signals: {error}"))?;
    rustix::process::set_child_subreaper(rustix::process::getpid().into())
        .map_err(|error| format!("PR_SET_CHILD_SUBREAPER: {error}"))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::HUP))
        .map_err(|error| format!("PR_SET_PDEATHSIG: {error}"))?;
    let parent_gone = || rustix::process::getppid().map(Pid::as_raw_pid) != Some(parent);
    if parent_gone() {
        return Ok(STOPPED);
    }
    let child = super::process::spawn_program(program)?;
    let codex = Pid::from_child(&child);
    for signal in signals.forever() {
        let stop = match signal {
            SIGCHLD => loop {
                match rustix::process::wait(WaitOptions::NOHANG) {
                    Ok(Some((pid, status))) if pid == codex => {
                        break Some(match (status.exit_status(), status.terminating_signal()) {
                            (Some(code), _) => u8::try_from(code).unwrap_or(1),
                            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
                            (None, None) => 1,
                        });
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break None,
                }
            },
            SIGHUP if !parent_gone() => None,
            _ => Some(STOPPED),
        };
        if let Some(code) = stop {
            end_all(rustix::process::getpid());
            return Ok(code);
        }
    }
    end_all(rustix::process::getpid());
    Ok(STOPPED)
}

/// What the stage exits with when it was stopped (128 + SIGTERM, as a shell reports it).
#[cfg(target_os = "linux")]
const STOPPED: u8 = 143;

#[cfg(not(target_os = "linux"))]
pub fn stage(_: &[OsString]) -> Result<u8, String> {
    Err("the reaper needs Linux".into())
}

/// `PARENT -- PROGRAM ARGS...`.
fn parse(args: &[OsString]) -> Result<(i32, &[OsString]), String> {
    let parent = args
        .first()
        .and_then(|arg| arg.to_str())
        .and_then(|arg| arg.parse::<i32>().ok())
        .filter(|pid| *pid > 0)
        .ok_or_else(|| "the service's process id".to_string())?;
    match args.get(1..) {
        Some([dashes, program @ ..]) if dashes == "--" && !program.is_empty() => {
            Ok((parent, program))
        }
        _ => Err("no program after --".into()),
    }
}

/// Kill every process beneath `me` and wait for each: the direct children are killed and
/// reaped, which hands their orphans to `me` (a subreaper), until none is left. Bounded: a
/// process forking as fast as it is killed is outlasted in at most this many rounds.
#[cfg(target_os = "linux")]
fn end_all(me: rustix::process::Pid) {
    use rustix::process::{Signal, WaitOptions};
    const ROUNDS: usize = 10_000;
    for _ in 0..ROUNDS {
        for child in children_of(me.as_raw_pid()) {
            if let Some(pid) = rustix::process::Pid::from_raw(child) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return, // ECHILD: nothing is left
        }
    }
}

/// The processes whose parent is `me` (from `/proc/PID/stat`: the state and the parent follow
/// the last `)`, a command name may hold one).
#[cfg(target_os = "linux")]
fn children_of(me: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| parent_in_stat(&stat))
                == Some(me)
        })
        .collect()
}

/// The parent id in a `/proc/PID/stat` line.
fn parent_in_stat(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_reads_back() {
        let (helper, line) = wrap(
            std::path::Path::new("/bin/helper"),
            42,
            std::path::Path::new("/bin/codex"),
            &["app-server".into()],
        );
        assert_eq!(helper, std::path::Path::new("/bin/helper"));
        assert_eq!(line[0], REAP);
        let (parent, program) = parse(&line[1..]).expect("parse");
        assert_eq!(parent, 42);
        assert_eq!(
            program,
            &[OsString::from("/bin/codex"), "app-server".into()]
        );
        assert!(parse(&["0".into(), "--".into(), "x".into()]).is_err());
        assert!(parse(&["7".into(), "--".into()]).is_err());
    }

    #[test]
    fn a_command_name_with_a_parenthesis_does_not_hide_the_parent() {
        assert_eq!(parent_in_stat("12 (a) b) S 34 12 12 0"), Some(34));
        assert_eq!(parent_in_stat("12 (sleep) S 1 12 12 0"), Some(1));
        assert_eq!(parent_in_stat("garbage"), None);
    }
}
