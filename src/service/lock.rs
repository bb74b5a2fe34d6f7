//! One process per state: an exclusive lock on a file, with the holder's pid in it.
//!
//! Why: two processes serving from one state dir would each keep their own idea of who owns
//! which thread. The lock is the kernel's (`flock`), so a process that dies (kill -9 included)
//! lets it go at once; a holder that is just going away (a restart) is waited for briefly.

use std::io::{Read, Seek, Write};
use std::path::Path;

/// Tries to take a held lock before giving up, [`RETRY_PAUSE`] apart (1 s in all).
const RETRIES: u32 = 20;
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// Why a lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it (its pid, if it wrote one).
    Held(Option<u32>),
    Io(std::io::Error),
}

/// A held lock (released when dropped, or when the process ends).
#[derive(Debug)]
pub struct LockFile {
    _file: std::fs::File,
}

impl LockFile {
    /// Take the lock on `path` (created 0600) and write this process's pid into it.
    pub fn take(path: &Path) -> Result<LockFile, LockError> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(LockError::Io)?;
        let mut attempts = 0;
        let locked = loop {
            match file.try_lock() {
                Err(std::fs::TryLockError::WouldBlock) if attempts < RETRIES => {
                    attempts += 1;
                    std::thread::sleep(RETRY_PAUSE);
                }
                other => break other,
            }
        };
        match locked {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = (&file).take(64).read_to_string(&mut holder);
                return Err(LockError::Held(holder.trim().parse().ok()));
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(LockError::Io(error)),
        }
        file.set_len(0).map_err(LockError::Io)?;
        file.rewind().map_err(LockError::Io)?;
        writeln!(file, "{}", std::process::id()).map_err(LockError::Io)?;
        Ok(LockFile { _file: file })
    }
}
