//! A private view of the machine for each app-server: what one account's Codex, and every tool
//! its model runs, may see of the disk and of the other processes.
//!
//! Why: the endpoint runs every account's app-servers as the operator's user over one disk, and
//! Codex's own sandbox still reads the whole disk (its read-only mode only stops writes). File
//! modes cannot keep one process of a user from another's files. So each member starts in
//! namespaces of its own:
//!
//! * a **mount namespace** in which the folders it must not see (the state dir with every other
//!   account's Codex home and the token files, the operator's own Codex home, the transcripts
//!   and captures) are covered by an empty read-only tmpfs (a file by `/dev/null`), and the
//!   folders it must see beneath them (its own Codex home, the workspace roots) are bound back
//!   in place;
//! * a **PID namespace** with its own `/proc`, so neither the endpoint's environment
//!   (`/proc/<pid>/environ`: exporter headers, provider keys) nor another member's memory can be
//!   read, and everything the member started ends with it: when the namespace's first process
//!   exits, the kernel kills the rest (a tool left running in the background included).
//!
//! Without root, the namespaces come with a user namespace that maps the user to itself.
//!
//! How: the member is started as `clawbridge-runtime __jail --hide P --keep P -- codex ...`.
//! That first stage makes the namespaces and the mounts, then starts the second stage
//! (`__jail-init`), which is process 1 of the new PID namespace: it mounts `/proc`, starts Codex
//! and reaps whatever is orphaned until Codex exits, then exits with Codex's code. The second
//! stage dies with the first (`PR_SET_PDEATHSIG`), so killing the member the endpoint started
//! ends all of it. Everything here is safe Rust over `rustix`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The first stage's argument: make the namespaces and mounts, then run the rest jailed.
pub const JAIL: &str = "__jail";
/// The second stage's argument: process 1 of the new PID namespace.
pub const JAIL_INIT: &str = "__jail-init";
/// The first stage's flag: only check that a jail can be made here, run nothing.
const PROBE: &str = "--probe";
/// What a probe exits with when the jail was made (a program that is not the helper, or a jail
/// that failed, says something else).
const PROBE_OK: u8 = 86;

/// Where a member may not look, and what it still sees.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Jail {
    /// The program that makes the jail (`clawbridge-runtime`, which handles [`JAIL`]).
    pub helper: PathBuf,
    /// Folders (covered by an empty tmpfs) and files (covered by `/dev/null`) the member never
    /// sees.
    pub hide: Vec<PathBuf>,
    /// Folders the member sees even where they lie under a hidden one (its Codex home, the
    /// workspace roots).
    pub keep: Vec<PathBuf>,
}

impl Jail {
    /// The same jail, hiding `path` too.
    pub fn hiding(&self, path: &Path) -> Jail {
        let mut jail = self.clone();
        jail.hide.push(path.to_path_buf());
        jail
    }

    /// The command line that runs `program` with `args` in this jail, keeping `home` visible:
    /// the helper and its arguments.
    pub fn wrap(&self, home: &Path, program: &Path, args: &[OsString]) -> (PathBuf, Vec<OsString>) {
        let mut line = self.arguments(home);
        line.push("--".into());
        line.push(program.as_os_str().to_owned());
        line.extend(args.iter().cloned());
        (self.helper.clone(), line)
    }

    /// The helper's arguments, every path in its real form (a folder named through a link is
    /// hidden or kept where it really is, and a kept folder is seen to lie under a hidden one).
    fn arguments(&self, home: &Path) -> Vec<OsString> {
        let real = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut line: Vec<OsString> = vec![JAIL.into()];
        for path in &self.hide {
            line.push("--hide".into());
            line.push(real(path).into_os_string());
        }
        for path in self.keep.iter().map(PathBuf::as_path).chain([home]) {
            line.push("--keep".into());
            line.push(real(path).into_os_string());
        }
        line
    }

    /// Whether this machine can make the jail (namespaces, mounts, a new `/proc`): `Err` says
    /// what failed, for the operator. Runs the helper once, bounded by `limit`.
    pub fn probe(&self, home: &Path, limit: std::time::Duration) -> Result<(), String> {
        let mut line = self.arguments(home);
        line.insert(1, PROBE.into());
        let mut command = std::process::Command::new(&self.helper);
        command.args(&line);
        let output = crate::process::run_bounded(command, b"", limit, 64 * 1024)
            .map_err(|error| format!("{}: {error}", self.helper.display()))?;
        if output.status.code() == Some(i32::from(PROBE_OK)) {
            return Ok(());
        }
        let why = output.stderr_tail.trim();
        Err(if why.is_empty() {
            format!(
                "{} is not clawbridge's jail helper (exit {:?})",
                self.helper.display(),
                output.status.code()
            )
        } else {
            why.to_string()
        })
    }
}

/// The helper's entry: `Some` when this process was started as a jail stage (its exit code,
/// or why the jail could not be made: the binary says it and exits 125, as `env` and `unshare`
/// say their own failures), `None` otherwise (the binary goes on with its commands). Call it
/// first in `main`, before any thread is started: a user namespace takes only a
/// single-threaded process.
pub fn entry_point() -> Option<Result<u8, String>> {
    let mut args = std::env::args_os().skip(1);
    let stage = args.next()?;
    let rest: Vec<OsString> = args.collect();
    if stage == JAIL {
        return Some(first_stage(&rest));
    }
    if stage == JAIL_INIT {
        return Some(second_stage(&rest));
    }
    if stage == crate::reaper::REAP {
        return Some(crate::reaper::stage(&rest));
    }
    None
}

/// What the first stage was asked.
#[derive(Debug, Default, PartialEq, Eq)]
struct Request {
    probe: bool,
    hide: Vec<PathBuf>,
    keep: Vec<PathBuf>,
    program: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Result<Request, String> {
    let mut request = Request::default();
    let mut at = 0;
    while at < args.len() {
        let arg = &args[at];
        if arg == "--" {
            request.program = args[at + 1..].to_vec();
            break;
        }
        if arg == PROBE {
            request.probe = true;
            at += 1;
            continue;
        }
        let value = args
            .get(at + 1)
            .ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()))?;
        let path = PathBuf::from(value);
        if !path.is_absolute() {
            return Err(format!("{}: not an absolute path", path.display()));
        }
        match arg.to_str() {
            Some("--hide") => request.hide.push(path),
            Some("--keep") => request.keep.push(path),
            _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
        }
        at += 2;
    }
    if request.program.is_empty() && !request.probe {
        return Err("no program after --".into());
    }
    Ok(request)
}

/// The hidden paths that exist, each once, none beneath another (covering the outer one covers
/// it), outer ones first.
fn hidden_roots(hide: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = hide
        .iter()
        .filter(|path| std::fs::symlink_metadata(path).is_ok())
        .cloned()
        .collect();
    paths.sort();
    paths.dedup();
    let mut roots: Vec<PathBuf> = Vec::new();
    for path in paths {
        if !roots.iter().any(|root| path.starts_with(root)) {
            roots.push(path);
        }
    }
    roots
}

/// The kept folders that lie beneath a hidden folder (they must be bound back), with the
/// hidden folder each lies under; a kept folder that is itself hidden stays hidden.
fn to_bind_back(roots: &[PathBuf], keep: &[PathBuf]) -> Vec<PathBuf> {
    let mut bound: Vec<PathBuf> = keep
        .iter()
        .filter(|kept| {
            roots
                .iter()
                .any(|root| kept.starts_with(root) && kept.as_path() != root.as_path())
        })
        .filter(|kept| kept.is_dir())
        .cloned()
        .collect();
    bound.sort();
    bound.dedup();
    bound
}

/// Map the calling process's user and group, as the namespace's parent sees them, to `uid`
/// and `gid` in the user namespace it just entered (a process may map its own ids, and only
/// them, once `setgroups` is denied).
#[cfg(target_os = "linux")]
fn map_self(uid: u32, gid: u32, outer_uid: u32, outer_gid: u32) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|error| format!("{file}: {error}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {outer_uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {outer_gid} 1\n"))
}

#[cfg(target_os = "linux")]
fn first_stage(args: &[OsString]) -> Result<u8, String> {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{MountFlags, MountPropagationFlags};
    use rustix::thread::UnshareFlags;

    let request = parse(args)?;
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // Root (or a process with CAP_SYS_ADMIN) makes the namespaces directly; anyone else through
    // a user namespace of its own in which it is root (so that the first process, after its
    // exec, may still mount `/proc`).
    #[allow(deprecated)] // `unshare_unsafe` is unsafe only for CLONE_FILES, never asked here.
    let direct = rustix::thread::unshare(UnshareFlags::NEWNS | UnshareFlags::NEWPID);
    if let Err(direct) = direct {
        #[allow(deprecated)]
        rustix::thread::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS | UnshareFlags::NEWPID)
            .map_err(|error| {
                format!(
                    "cannot make a mount and PID namespace for the app-server (as this user: \
                 {direct}; in a user namespace: {error}). Run the endpoint as root, or allow \
                 unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, \
                 user.max_user_namespaces > 0, and on Ubuntu \
                 kernel.apparmor_restrict_unprivileged_userns=0)"
                )
            })?;
        map_self(0, 0, uid, gid)?;
    }
    // Nothing done here may reach the host's mounts.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|error| format!("making / private: {error}"))?;
    let roots = hidden_roots(&request.hide);
    let bind_back = to_bind_back(&roots, &request.keep);
    // The kept folders, opened before anything covers them.
    let mut kept = Vec::new();
    for path in &bind_back {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|error| format!("{}: {error}", path.display()))?;
        kept.push((path.clone(), fd));
    }
    let quiet = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    let mut covered = Vec::new();
    for root in &roots {
        let meta = std::fs::symlink_metadata(root)
            .map_err(|error| format!("{}: {error}", root.display()))?;
        if meta.is_dir() {
            rustix::mount::mount("tmpfs", root, "tmpfs", quiet, c"mode=0755,size=1m")
                .map_err(|error| format!("covering {}: {error}", root.display()))?;
            covered.push(root.clone());
        } else {
            rustix::mount::mount_bind("/dev/null", root)
                .map_err(|error| format!("covering {}: {error}", root.display()))?;
        }
    }
    for (path, fd) in &kept {
        std::fs::create_dir_all(path).map_err(|error| format!("{}: {error}", path.display()))?;
        let source = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
        rustix::mount::mount_bind_recursive(source.as_str(), path)
            .map_err(|error| format!("keeping {}: {error}", path.display()))?;
    }
    drop(kept);
    // The covers read-only: nothing can be put where a hidden folder was.
    for root in &covered {
        let _ = rustix::mount::mount_remount(root, quiet | MountFlags::RDONLY, c"");
    }
    let helper =
        crate::process::own_executable().map_err(|error| format!("the helper: {error}"))?;
    let mut init = std::process::Command::new(helper);
    init.arg(JAIL_INIT)
        .arg(uid.to_string())
        .arg(gid.to_string());
    if request.probe {
        init.arg(PROBE);
    } else {
        init.arg("--").args(&request.program);
    }
    // Process 1 of the new PID namespace; this stage waits for it and exits with its code.
    let status = init
        .status()
        .map_err(|error| format!("starting the jail's first process: {error}"))?;
    Ok(exit_code(status))
}

#[cfg(target_os = "linux")]
fn second_stage(args: &[OsString]) -> Result<u8, String> {
    use rustix::mount::MountFlags;
    use rustix::process::{Signal, WaitOptions};
    use rustix::thread::UnshareFlags;
    // Ends with the first stage (the member the endpoint started and kills).
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|error| format!("PR_SET_PDEATHSIG: {error}"))?;
    let id = |at: usize| -> Result<u32, String> {
        args.get(at)
            .and_then(|arg| arg.to_str())
            .and_then(|arg| arg.parse().ok())
            .ok_or_else(|| "the user and group to run as".to_string())
    };
    let (uid, gid) = (id(0)?, id(1)?);
    rustix::mount::mount(
        "proc",
        "/proc",
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(|error| format!("mounting a /proc of the new PID namespace: {error}"))?;
    // The program runs one user namespace further in, as the user who started the member: the
    // mounts made above come into its mount namespace locked, so nothing it runs (root in its
    // namespace included) can take a cover off or see beneath one.
    let inner_uid = rustix::process::getuid().as_raw();
    let inner_gid = rustix::process::getgid().as_raw();
    #[allow(deprecated)] // not CLONE_FILES
    rustix::thread::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)
        .map_err(|error| format!("the program's user namespace: {error}"))?;
    map_self(uid, gid, inner_uid, inner_gid)?;
    let program: Vec<&OsStr> = match args.get(2..).unwrap_or_default().split_first() {
        Some((first, _)) if first == PROBE => return Ok(PROBE_OK),
        Some((first, rest)) if first == "--" => rest.iter().map(OsString::as_os_str).collect(),
        _ => return Err("no program after --".into()),
    };
    let child = super::process::spawn_program(&program)?;
    let codex = rustix::process::Pid::from_child(&child);
    // Reap everything orphaned into this namespace until the program itself exits; its end
    // ends the namespace, and with it whatever it left running.
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == codex => {
                return Ok(match (status.exit_status(), status.terminating_signal()) {
                    (Some(code), _) => u8::try_from(code).unwrap_or(1),
                    (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
                    (None, None) => 1,
                });
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => {
                return Err(format!(
                    "waiting for {}: {error}",
                    Path::new(program[0]).display()
                ))
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn first_stage(_: &[OsString]) -> Result<u8, String> {
    Err("a private view per app-server needs Linux namespaces".into())
}

#[cfg(not(target_os = "linux"))]
fn second_stage(_: &[OsString]) -> Result<u8, String> {
    Err("a private view per app-server needs Linux namespaces".into())
}

/// A child's exit status as this process's code (128 + the signal that ended it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_reads_back() {
        let jail = Jail {
            helper: "/bin/helper".into(),
            hide: vec!["/state".into()],
            keep: vec!["/work".into()],
        };
        let (helper, line) = jail.wrap(
            Path::new("/state/homes/a"),
            Path::new("/bin/codex"),
            &["app-server".into()],
        );
        assert_eq!(helper, Path::new("/bin/helper"));
        assert_eq!(line[0], JAIL);
        let request = parse(&line[1..]).expect("parse");
        assert_eq!(request.hide, vec![PathBuf::from("/state")]);
        assert_eq!(
            request.keep,
            vec![PathBuf::from("/work"), PathBuf::from("/state/homes/a")]
        );
        assert_eq!(
            request.program,
            vec![OsString::from("/bin/codex"), "app-server".into()]
        );
        assert!(parse(&["--hide".into(), "relative".into(), "--".into(), "x".into()]).is_err());
        assert!(
            parse(&["--hide".into(), "/x".into()]).is_err(),
            "no program"
        );
    }

    #[test]
    fn nested_hides_collapse_and_kept_folders_beneath_them_are_bound_back() {
        let dir = tempfile::tempdir().expect("dir");
        let state = dir.path().join("state");
        let home = state.join("homes").join("a");
        std::fs::create_dir_all(&home).expect("home");
        let token = state.join("token");
        std::fs::write(&token, "x").expect("token");
        let roots = hidden_roots(&[token.clone(), state.clone(), dir.path().join("missing")]);
        assert_eq!(roots, vec![state.clone()]);
        let outside = dir.path().join("work");
        std::fs::create_dir_all(&outside).expect("work");
        assert_eq!(
            to_bind_back(&roots, &[outside, home.clone(), state.clone()]),
            vec![home]
        );
    }
}
