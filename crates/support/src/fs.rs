//! Small filesystem helpers shared by every writer: atomic replace and "unchanged" detection.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Temp files of [`write_atomic`] start with this, so a writer can sweep up what a killed run
/// left behind ([`remove_stale_temps`]).
pub const TEMP_PREFIX: &str = ".clawbridge-tmp-";

/// Write an artifact (a file people read: snapshots, fixtures, captures) atomically; it gets the
/// mode the umask gives new files.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_mode(path, bytes, artifact_mode())
}

/// Create `dir` and its missing parents as 0700 (folders holding a user's conversations).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// [`create_private_dir`], and a folder that was there already made 0700 too: it must be a
/// real folder (a link, or a file, is refused rather than followed or changed).
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    create_private_dir(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(
            "is a symbolic link or not a folder; refusing to use it",
        ));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Whether a process of this user can create a file in `dir` (a probe file, removed at once):
/// what Codex needs of its home. Permissions alone do not say (root, read-only mounts, ACLs).
pub fn can_write_in(dir: &Path) -> std::io::Result<()> {
    tempfile::Builder::new()
        .prefix(".clawbridge-write-check")
        .tempfile_in(dir)
        .map(drop)
}

/// Write process state (bindings, ledgers, configs with secrets) atomically, mode 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_mode(path, bytes, 0o600)
}

/// `0666` less the process umask (read from `/proc/self/status`; `022` where that is unknown).
fn artifact_mode() -> u32 {
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:"))
                .and_then(|value| u32::from_str_radix(value.trim(), 8).ok())
        })
        .unwrap_or(0o022);
    0o666 & !umask
}

/// Delete the temp files a killed writer left in `dir` (regular files with [`TEMP_PREFIX`]).
pub fn remove_stale_temps(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
            && entry.file_type().is_ok_and(|kind| kind.is_file());
        if stale {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(|source| Error::Write { path, source })?;
        }
    }
    Ok(())
}

/// Write `bytes` to `path` through a temp file in the same folder and a rename, so readers see the
/// old content or the new one, never half a file. Parent folders are created.
fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let write_error = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).map_err(write_error)?;
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map_err(write_error)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(write_error)?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    temp.write_all(bytes).map_err(write_error)?;
    temp.as_file().sync_all().map_err(write_error)?;
    temp.persist(path)
        .map_err(|error| write_error(error.error))?;
    Ok(())
}

/// Write only when the bytes differ; returns `true` when the file was (re)written.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool> {
    if std::fs::read(path).is_ok_and(|current| current == bytes) {
        return Ok(false);
    }
    write_atomic(path, bytes)?;
    Ok(true)
}

// ---------------------------------------------------------------------------------------------
// Confined, bounded reads
// ---------------------------------------------------------------------------------------------

/// The folders a `clawbridge serve` operator allowed (`--workspace-root`), canonicalized.
///
/// A run that carries roots may read only below them: every path it names is checked when the
/// request arrives and again where the file is opened, so a symlink swapped in between is caught.
/// CLI runs carry none: the operator's own files are theirs to name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots(std::sync::Arc<[PathBuf]>);

impl Roots {
    /// Roots from already canonical folders.
    pub fn new(canonical: Vec<PathBuf>) -> Self {
        Roots(canonical.into())
    }

    /// The folders.
    pub fn folders(&self) -> &[PathBuf] {
        &self.0
    }

    /// True when the real (canonical) path lies at or below one of the roots.
    pub fn contains(&self, real: &Path) -> bool {
        self.0.iter().any(|root| real.starts_with(root))
    }

    /// True when `path`, with every symlink resolved (also for parts that do not exist yet), lies
    /// below a root. Existing and missing paths get the same answer, so callers can refuse both
    /// with one message and clients cannot probe the filesystem.
    pub fn admits(&self, path: &Path) -> bool {
        self.contains(&resolve_real(path))
    }
}

/// Lexically remove `.` and `..` components (no filesystem access, so symlinks stay visible to
/// the workspace containment check).
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// How many symlinks [`resolve_real`] follows before it gives up (as the kernel's `ELOOP`).
const MAX_LINK_HOPS: usize = 40;

/// The real path of `path`: canonical where it exists; for a missing path, the canonical form of
/// its deepest existing ancestor with the rest appended; dangling symlinks are followed to where
/// they point. Pure lookup: nothing is opened.
pub fn resolve_real(path: &Path) -> PathBuf {
    resolve_real_hops(&normalize(&absolute(path)), 0)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn resolve_real_hops(path: &Path, hops: usize) -> PathBuf {
    // One `lstat` first: a missing name (the common case: an absent bootstrap file) skips the
    // full canonicalization and the link lookup, which would both fail.
    let entry = std::fs::symlink_metadata(path).is_ok();
    if entry {
        if let Ok(real) = path.canonicalize() {
            return real;
        }
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return path.to_path_buf();
    };
    let parent = resolve_real_hops(parent, hops);
    let joined = parent.join(name);
    if entry && hops < MAX_LINK_HOPS {
        if let Ok(target) = std::fs::read_link(&joined) {
            let next = normalize(&parent.join(target));
            return resolve_real_hops(&next, hops + 1);
        }
    }
    joined
}

/// Why a bounded read did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReadRefusal {
    /// Nothing at the path (a dangling symlink included).
    #[error("no such file")]
    NotFound,
    /// The path (or what it links to) lies outside the folders the read is confined to.
    #[error("outside the allowed folders")]
    Outside,
    /// A FIFO, device, socket, folder or pseudo-filesystem file: never read.
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    /// More bytes than the cap (the reported size is never trusted: procfs says 0).
    #[error("larger than {cap} bytes")]
    TooLarge { cap: u64 },
    /// Any other I/O failure (permissions, ...).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Read a regular file of at most `cap` bytes, confined to the real paths `allowed` accepts.
///
/// The path is resolved and checked before anything is opened; the file is opened without
/// blocking (a FIFO cannot hang the read), checked with `fstat` to be a regular file, its real
/// path is checked again through the open descriptor (a symlink swapped in between is caught),
/// and at most `cap + 1` bytes are read.
pub fn read_capped(
    path: &Path,
    cap: u64,
    allowed: &dyn Fn(&Path) -> bool,
) -> std::result::Result<Vec<u8>, ReadRefusal> {
    #[cfg(target_os = "linux")]
    if let Some(result) = read_capped_fast(path, None, cap, Some(allowed)) {
        return result;
    }
    read_capped_portable(path, cap, allowed)
}

/// The checks of [`read_capped`] with portable calls only; also the path that names every
/// refusal (an outside path first, whether or not it exists).
fn read_capped_portable(
    path: &Path,
    cap: u64,
    allowed: &dyn Fn(&Path) -> bool,
) -> std::result::Result<Vec<u8>, ReadRefusal> {
    let before = resolve_real(path);
    if !allowed(&before) {
        return Err(ReadRefusal::Outside);
    }
    if is_pseudo_filesystem(&before) {
        return Err(ReadRefusal::NotRegular("pseudo-filesystem file"));
    }
    let file = open_nonblocking(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => ReadRefusal::NotFound,
        _ => ReadRefusal::Io(error),
    })?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(ReadRefusal::NotRegular(file_kind(&metadata)));
    }
    let after = opened_real_path(&file).unwrap_or(before);
    if !allowed(&after) {
        return Err(ReadRefusal::Outside);
    }
    if is_pseudo_filesystem(&after) {
        return Err(ReadRefusal::NotRegular("pseudo-filesystem file"));
    }
    read_open_file(&file, metadata.len(), cap)
}

/// Read an open regular file whose size was reported as `reported`, at most `cap` bytes.
///
/// The first read asks for the reported size and one byte more, so an unchanged file takes two
/// `read` calls (the second sees the end); the standard `read_to_end` over a `take` starts at
/// 8 KiB and doubles, four calls for a 25 KB bootstrap file. The reported size is never trusted
/// for the cap: a file that grew is read on, in steps, up to `cap + 1` bytes.
fn read_open_file(
    mut file: &std::fs::File,
    reported: u64,
    cap: u64,
) -> std::result::Result<Vec<u8>, ReadRefusal> {
    use std::io::Read;
    let limit = usize::try_from(cap.saturating_add(1)).unwrap_or(usize::MAX);
    let first = usize::try_from(reported.min(cap))
        .unwrap_or(usize::MAX)
        .saturating_add(1)
        .min(limit);
    let mut bytes = vec![0u8; first];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            if filled >= limit {
                break;
            }
            let grown = filled.saturating_mul(2).clamp(filled + 1, limit);
            bytes.resize(grown, 0);
        }
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(ReadRefusal::Io(error)),
        }
    }
    if filled as u64 > cap {
        return Err(ReadRefusal::TooLarge { cap });
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// Linux: the same checks in fewer and cheaper system calls. A `stat` (following links) comes
/// first, so nothing but a regular file is ever opened (no FIFO wait, no device open); the open
/// file is then checked to be that same regular file (`fstat`: device and inode), not on a
/// pseudo-filesystem (`fstatfs`: procfs, sysfs, ...), and, when the read is confined, that its real
/// path (`/proc/self/fd`) is allowed. `None` hands the unusual cases (anything but a regular file,
/// a file swapped between the checks, no `/proc`) to the portable path, which names them.
#[cfg(target_os = "linux")]
fn read_capped_fast(
    path: &Path,
    known: Option<&std::fs::Metadata>,
    cap: u64,
    allowed: Option<&dyn Fn(&Path) -> bool>,
) -> Option<std::result::Result<Vec<u8>, ReadRefusal>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let looked = match known {
        Some(metadata) => metadata.clone(),
        None => std::fs::metadata(path).ok()?,
    };
    if !looked.is_file() {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.dev() != looked.dev() || metadata.ino() != looked.ino() {
        return None;
    }
    if let Some(allowed) = allowed {
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
        if !allowed(&real) {
            return Some(Err(ReadRefusal::Outside));
        }
    }
    if on_pseudo_filesystem(&file, metadata.dev()) {
        return Some(Err(ReadRefusal::NotRegular("pseudo-filesystem file")));
    }
    Some(read_open_file(&file, metadata.len(), cap))
}

/// Kernel-generated files (procfs, sysfs, debugfs, tracefs, securityfs, cgroup, configfs,
/// efivarfs) report themselves as regular files but are not workspace content.
///
/// The answer is remembered per device number (a mounted filesystem keeps its type; a new mount
/// gets a new number), so a walk over one filesystem asks the kernel once.
#[cfg(target_os = "linux")]
fn on_pseudo_filesystem(file: &std::fs::File, device: u64) -> bool {
    static KNOWN: std::sync::Mutex<Vec<(u64, bool)>> = std::sync::Mutex::new(Vec::new());
    const MAX_KNOWN: usize = 64;
    if let Ok(known) = KNOWN.lock() {
        if let Some((_, pseudo)) = known.iter().find(|(dev, _)| *dev == device) {
            return *pseudo;
        }
    }
    let pseudo = filesystem_is_pseudo(file);
    if let Ok(mut known) = KNOWN.lock() {
        if known.len() >= MAX_KNOWN {
            known.remove(0);
        }
        known.push((device, pseudo));
    }
    pseudo
}

/// The `f_type` of the kernel's pseudo-filesystems.
#[cfg(target_os = "linux")]
const PSEUDO_FILESYSTEMS: [u64; 10] = [
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x6462_6720, // debugfs
    0x7472_6163, // tracefs
    0x7363_6673, // securityfs
    0x0027_e0eb, // cgroup
    0x6367_7270, // cgroup2
    0x6265_6570, // configfs
    0xde5e_81e4, // efivarfs
    0x4249_4e4d, // binfmt_misc
];

#[cfg(target_os = "linux")]
fn filesystem_is_pseudo(file: &std::fs::File) -> bool {
    rustix::fs::fstatfs(file)
        .map(|stats| PSEUDO_FILESYSTEMS.contains(&(stats.f_type as u64)))
        .unwrap_or(false)
}

/// [`read_capped`] for a file that may be anywhere (the CLI's own inputs, the service's state):
/// still only a regular file, never a pseudo-filesystem file, at most `cap` bytes. `known` is
/// the file's metadata when the caller already has it (the skills walk), which saves a `stat`.
pub fn read_capped_anywhere(
    path: &Path,
    known: Option<&std::fs::Metadata>,
    cap: u64,
) -> std::result::Result<Vec<u8>, ReadRefusal> {
    #[cfg(target_os = "linux")]
    if let Some(result) = read_capped_fast(path, known, cap, None) {
        return result;
    }
    let _ = known;
    read_capped_portable(path, cap, &|_| true)
}

/// A regular file of at most `cap` bytes (by its reported size; a reader stops at `cap + 1`
/// whatever it says), opened for a reader that streams it: the checks of [`read_file_capped`]
/// (no FIFO, device or pseudo-filesystem file), without reading it whole.
pub fn open_file_capped(path: &Path, cap: u64) -> Result<std::fs::File> {
    let refused = |refusal: ReadRefusal| Error::Read {
        path: path.to_path_buf(),
        source: refusal.into_io(),
    };
    let file = open_nonblocking(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => refused(ReadRefusal::NotFound),
        _ => refused(ReadRefusal::Io(error)),
    })?;
    let metadata = file
        .metadata()
        .map_err(|error| refused(ReadRefusal::Io(error)))?;
    if !metadata.is_file() {
        return Err(refused(ReadRefusal::NotRegular(file_kind(&metadata))));
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        if on_pseudo_filesystem(&file, metadata.dev()) {
            return Err(refused(ReadRefusal::NotRegular("pseudo-filesystem file")));
        }
    }
    if metadata.len() > cap {
        return Err(refused(ReadRefusal::TooLarge { cap }));
    }
    Ok(file)
}

/// [`read_capped`] without a confinement (the CLI's own inputs), with errors as [`Error::Read`].
pub fn read_file_capped(path: &Path, cap: u64) -> Result<Vec<u8>> {
    read_capped_anywhere(path, None, cap).map_err(|refusal| Error::Read {
        path: path.to_path_buf(),
        source: refusal.into_io(),
    })
}

/// A folder that reads stay beneath: the workspace for its bootstrap and state files, a skills
/// folder for its `SKILL.md` files.
///
/// On Linux the folder is held open and each read is one `openat2` relative to it with
/// `RESOLVE_BENEATH` (the kernel refuses any `..`, absolute or symlinked step that would leave the
/// folder, checked as it resolves, so nothing can be swapped in between), `RESOLVE_NO_XDEV`
/// (never onto another mount: no procfs, sysfs or devtmpfs file is ever reached) and
/// `RESOLVE_NO_MAGICLINKS`. That replaces [`read_capped`]'s `stat` before the open and its
/// `/proc/self/fd` lookup after it. Whatever the kernel refuses (a step that leaves, a mount
/// crossed, a kernel or sandbox without `openat2`) is retried with [`read_capped`]'s checks on
/// the joined path, which name the refusal or read what lies legitimately on another mount. A
/// missing file is answered by the one failed `openat2`.
///
/// `allowed` is asked once, about the folder's real path (the caller's canonical form of it,
/// which is what is opened, with `RESOLVE_NO_SYMLINKS`: a link swapped into it since the lookup
/// fails the open); it must accept everything below a folder it accepts (the prefix checks of
/// every caller), so what lies beneath needs no asking. A folder `allowed` refuses, one changed
/// since the caller's lookup, or one on a pseudo-filesystem gets no fast path at all.
pub struct Beneath<'a> {
    folder: PathBuf,
    allowed: &'a (dyn Fn(&Path) -> bool + Sync),
    #[cfg(target_os = "linux")]
    opened: Option<std::os::fd::OwnedFd>,
}

impl<'a> Beneath<'a> {
    /// Hold `folder` open for reads beneath it; `real` is its canonical path
    /// ([`resolve_real`]), `None` when it has none (it does not exist).
    pub fn open(
        folder: &Path,
        real: Option<&Path>,
        allowed: &'a (dyn Fn(&Path) -> bool + Sync),
    ) -> Self {
        #[cfg(not(target_os = "linux"))]
        let _ = real;
        Beneath {
            folder: folder.to_path_buf(),
            allowed,
            #[cfg(target_os = "linux")]
            opened: real.and_then(|real| open_folder(real, allowed)),
        }
    }

    /// The folder as given.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// What reads beneath the folder must satisfy (for checks made elsewhere).
    pub fn allowed(&self) -> &'a (dyn Fn(&Path) -> bool + Sync) {
        self.allowed
    }

    /// Read the regular file at `relative` (below the folder), at most `cap` bytes.
    pub fn read_capped(
        &self,
        relative: &Path,
        cap: u64,
    ) -> std::result::Result<Vec<u8>, ReadRefusal> {
        match self.try_open(relative) {
            Some(Ok(file)) => file.read_capped(cap),
            Some(Err(refusal)) => Err(refusal),
            None => read_capped(&self.folder.join(relative), cap, self.allowed),
        }
    }

    /// Open the file at `relative` beneath the folder in one call, without reading it: a regular
    /// file, or the refusal `NotFound` or `NotRegular`. `None` when the fast path cannot answer
    /// (see the type's docs): the caller takes the checked path.
    pub fn try_open(
        &self,
        relative: &Path,
    ) -> Option<std::result::Result<OpenedFile, ReadRefusal>> {
        #[cfg(target_os = "linux")]
        if let Some(folder) = &self.opened {
            use rustix::fs::{Mode, OFlags, ResolveFlags};
            let opened = rustix::fs::openat2(
                folder,
                relative,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_XDEV | ResolveFlags::NO_MAGICLINKS,
            );
            return match opened {
                Ok(fd) => {
                    let file = std::fs::File::from(fd);
                    match file.metadata() {
                        Ok(metadata) if metadata.is_file() => {
                            Some(Ok(OpenedFile { file, metadata }))
                        }
                        Ok(metadata) => Some(Err(ReadRefusal::NotRegular(file_kind(&metadata)))),
                        Err(error) => Some(Err(ReadRefusal::Io(error))),
                    }
                }
                Err(rustix::io::Errno::NOENT) => Some(Err(ReadRefusal::NotFound)),
                Err(_) => None,
            };
        }
        let _ = relative;
        None
    }
}

/// A regular file opened by [`Beneath::try_open`], with its metadata, not yet read.
#[derive(Debug)]
pub struct OpenedFile {
    file: std::fs::File,
    metadata: std::fs::Metadata,
}

impl OpenedFile {
    /// The metadata of the open file (`fstat`).
    pub fn metadata(&self) -> &std::fs::Metadata {
        &self.metadata
    }

    /// Read it, at most `cap` bytes.
    pub fn read_capped(&self, cap: u64) -> std::result::Result<Vec<u8>, ReadRefusal> {
        read_open_file(&self.file, self.metadata.len(), cap)
    }
}

/// The folder opened as a path handle, when the fast path may be used for it: `real` is
/// allowed and not on a pseudo-filesystem, and is opened as it is, every step a real folder
/// (`RESOLVE_NO_SYMLINKS`): one call where asking procfs for an open handle's path costs more
/// than the reads it saves on a small workspace.
#[cfg(target_os = "linux")]
fn open_folder(real: &Path, allowed: &dyn Fn(&Path) -> bool) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
    if !real.is_absolute() || !allowed(real) || is_pseudo_filesystem(real) {
        return None;
    }
    let fd = rustix::fs::openat2(
        CWD,
        real,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .ok()?;
    let pseudo = rustix::fs::fstatfs(&fd)
        .map(|stats| PSEUDO_FILESYSTEMS.contains(&(stats.f_type as u64)))
        .unwrap_or(true);
    (!pseudo).then_some(fd)
}

impl ReadRefusal {
    /// The refusal as an `io::Error` (for error types that carry one).
    pub fn into_io(self) -> std::io::Error {
        match self {
            ReadRefusal::Io(error) => error,
            ReadRefusal::NotFound => {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
            }
            other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
        }
    }
}

fn is_pseudo_filesystem(real: &Path) -> bool {
    ["/proc", "/sys", "/dev"]
        .iter()
        .any(|prefix| real.starts_with(prefix))
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(target_os = "linux")]
fn opened_real_path(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn opened_real_path(_file: &std::fs::File) -> Option<PathBuf> {
    None
}

fn file_kind(metadata: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = metadata.file_type();
        if kind.is_fifo() {
            return "FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "device";
        }
        if kind.is_socket() {
            return "socket";
        }
    }
    if metadata.is_dir() {
        "folder"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_paths_resolve_through_their_existing_ancestors() {
        let dir = tempfile::tempdir().expect("dir");
        let real = dir.path().canonicalize().expect("canonical");
        assert_eq!(resolve_real(&dir.path().join("a/b")), real.join("a/b"));
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().expect("outside");
            let outside_real = outside.path().canonicalize().expect("canonical");
            std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("link");
            assert_eq!(
                resolve_real(&dir.path().join("link/missing")),
                outside_real.join("missing")
            );
            std::os::unix::fs::symlink(outside.path().join("gone"), dir.path().join("dangling"))
                .expect("link");
            assert_eq!(
                resolve_real(&dir.path().join("dangling")),
                outside_real.join("gone")
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn artifacts_follow_the_umask_and_state_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let mode =
            |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
        write_atomic(&dir.path().join("artifact"), b"a").expect("write");
        assert_eq!(mode(&dir.path().join("artifact")), artifact_mode());
        assert_ne!(artifact_mode(), 0o600, "not the temp file's 0600");
        write_private(&dir.path().join("state"), b"s").expect("write");
        assert_eq!(mode(&dir.path().join("state")), 0o600);
        std::fs::write(dir.path().join(format!("{TEMP_PREFIX}left")), b"x").expect("write");
        remove_stale_temps(dir.path()).expect("sweep");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|name| name.starts_with(TEMP_PREFIX)),
            "{names:?}"
        );
    }

    #[test]
    fn reads_are_capped_and_confined() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().canonicalize().expect("canonical");
        let file = dir.path().join("f.txt");
        std::fs::write(&file, b"12345").expect("write");
        let inside = |real: &Path| real.starts_with(&root);
        assert_eq!(read_capped(&file, 5, &inside).expect("read"), b"12345");
        assert!(matches!(
            read_capped(&file, 4, &inside),
            Err(ReadRefusal::TooLarge { cap: 4 })
        ));
        assert!(matches!(
            read_capped(&file, 5, &|_| false),
            Err(ReadRefusal::Outside)
        ));
        assert!(matches!(
            read_capped(&dir.path().join("nope"), 5, &inside),
            Err(ReadRefusal::NotFound)
        ));
        assert!(matches!(
            read_capped(dir.path(), 5, &inside),
            Err(ReadRefusal::NotRegular("folder"))
        ));
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), 5, &|_| true),
            Err(ReadRefusal::NotRegular(_))
        ));
        assert!(matches!(
            read_capped(Path::new("/proc/self/environ"), 1 << 20, &|_| true),
            Err(ReadRefusal::NotRegular(_))
        ));
    }

    /// Reads beneath a held-open folder: what stays inside is read (through inner symlinks
    /// too), what leaves it (a symlink out, dangling or not, `..`, procfs) is refused as
    /// outside, a FIFO is refused without waiting, the cap holds. On Linux the kernel answers
    /// (`try_open`), and a step out is never opened by the fast path.
    #[cfg(unix)]
    #[test]
    fn reads_stay_beneath_their_folder() {
        let dir = tempfile::tempdir().expect("dir");
        let outer = dir.path().canonicalize().expect("canonical");
        let folder = outer.join("ws");
        std::fs::create_dir_all(folder.join("sub")).expect("mkdir");
        std::fs::write(folder.join("sub/f.md"), b"inside").expect("write");
        std::fs::write(outer.join("secret.md"), b"outside").expect("write");
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, folder.join(name)).expect("link");
        };
        link("sub/f.md", "inner.md");
        link("../secret.md", "up.md");
        link(
            outer.join("secret.md").to_str().expect("utf-8"),
            "absolute.md",
        );
        link(
            outer.join("gone.md").to_str().expect("utf-8"),
            "dangling.md",
        );
        link("/proc/self/environ", "environ");
        assert!(std::process::Command::new("mkfifo")
            .arg(folder.join("pipe"))
            .status()
            .expect("mkfifo")
            .success());
        let allowed = |real: &Path| real.starts_with(&folder);
        let beneath = Beneath::open(&folder, Some(&folder), &allowed);
        let read = |name: &str| beneath.read_capped(Path::new(name), 64);
        assert_eq!(read("sub/f.md").expect("read"), b"inside");
        assert_eq!(read("inner.md").expect("read"), b"inside");
        const ESCAPES: [&str; 5] = [
            "up.md",
            "absolute.md",
            "dangling.md",
            "environ",
            "../secret.md",
        ];
        for escape in ESCAPES {
            assert!(
                matches!(read(escape), Err(ReadRefusal::Outside)),
                "{escape}: {:?}",
                read(escape)
            );
        }
        assert!(matches!(read("pipe"), Err(ReadRefusal::NotRegular("FIFO"))));
        assert!(matches!(
            read("sub"),
            Err(ReadRefusal::NotRegular("folder"))
        ));
        assert!(matches!(read("missing.md"), Err(ReadRefusal::NotFound)));
        assert!(matches!(
            beneath.read_capped(Path::new("sub/f.md"), 5),
            Err(ReadRefusal::TooLarge { cap: 5 })
        ));
        #[cfg(target_os = "linux")]
        {
            // The kernel answers what stays inside, in one call, and refuses every step out.
            assert!(matches!(
                beneath.try_open(Path::new("inner.md")),
                Some(Ok(_))
            ));
            assert!(matches!(
                beneath.try_open(Path::new("missing.md")),
                Some(Err(ReadRefusal::NotFound))
            ));
            for escape in ESCAPES {
                assert!(beneath.try_open(Path::new(escape)).is_none(), "{escape}");
            }
        }
        // A "real" path with a link in it (one swapped in since the caller's lookup) is not
        // opened: no fast path, and the checked path answers.
        let alias = outer.join("alias");
        std::os::unix::fs::symlink(&folder, &alias).expect("alias");
        let anywhere = |_: &Path| true;
        let through_link = Beneath::open(&alias, Some(&alias), &anywhere);
        assert!(through_link.try_open(Path::new("sub/f.md")).is_none());
        assert_eq!(
            through_link
                .read_capped(Path::new("sub/f.md"), 64)
                .expect("read"),
            b"inside"
        );
        // A folder the check refuses gets no fast path; every read is refused as outside.
        let nowhere = |_: &Path| false;
        let refused = Beneath::open(&folder, Some(&folder), &nowhere);
        assert!(refused.try_open(Path::new("sub/f.md")).is_none());
        assert!(matches!(
            refused.read_capped(Path::new("sub/f.md"), 64),
            Err(ReadRefusal::Outside)
        ));
    }

    /// A file whose reported size is wrong (procfs says 0, a file may grow) is still read whole
    /// and still capped.
    #[test]
    fn open_files_are_read_whole_and_capped_whatever_their_reported_size() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'x'; 10_000]).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        assert_eq!(
            read_open_file(&file, 0, 10_000).expect("read").len(),
            10_000
        );
        let file = std::fs::File::open(&path).expect("open");
        assert!(matches!(
            read_open_file(&file, 3, 9_999),
            Err(ReadRefusal::TooLarge { cap: 9_999 })
        ));
        let file = std::fs::File::open(&path).expect("open");
        assert_eq!(
            read_open_file(&file, 50_000, 20_000).expect("read").len(),
            10_000
        );
    }

    #[test]
    fn unconfined_reads_keep_every_other_protection() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("run.json");
        std::fs::write(&file, "{}").expect("write");
        let metadata = std::fs::metadata(&file).expect("stat");
        assert_eq!(
            read_capped_anywhere(&file, Some(&metadata), 2).expect("read"),
            b"{}"
        );
        assert!(matches!(
            read_capped_anywhere(&file, None, 1),
            Err(ReadRefusal::TooLarge { cap: 1 })
        ));
        // A link to a kernel file (a regular file to `stat`) is still refused, by its filesystem.
        #[cfg(unix)]
        {
            let link = dir.path().join("SKILL.md");
            std::os::unix::fs::symlink("/proc/self/environ", &link).expect("link");
            assert!(matches!(
                read_capped_anywhere(&link, None, 1 << 20),
                Err(ReadRefusal::NotRegular(_))
            ));
            assert!(matches!(
                read_capped_anywhere(Path::new("/dev/zero"), None, 5),
                Err(ReadRefusal::NotRegular(_))
            ));
            assert!(matches!(
                read_capped_anywhere(Path::new("/sys/kernel/uevent_seqnum"), None, 64),
                Err(ReadRefusal::NotRegular(_)) | Err(ReadRefusal::NotFound)
            ));
        }
        // Metadata of another file is not trusted: the open file must be the one looked at.
        let other = dir.path().join("other.json");
        std::fs::write(&other, "[1]").expect("write");
        let stale = std::fs::metadata(&other).expect("stat");
        assert_eq!(
            read_capped_anywhere(&file, Some(&stale), 16).expect("falls back"),
            b"{}"
        );
    }
}
