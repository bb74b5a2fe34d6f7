//! The service's durable state: one serve per state dir (an exclusive lock), and session bindings
//! that are never dropped silently (a corrupt `sessions.json` is moved aside, loudly).

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ServeError;

/// `sessionKey` -> thread binding, persisted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    pub thread_id: String,
    pub fingerprint: String,
    /// The named client the session belongs to; absent for the operator's (and so for every
    /// session of a service with one token: the file reads as it always did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The pool member the thread lives on (`local-N` or a remote's address): its runs go
    /// there (sticky), across restarts of the service too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

impl Binding {
    /// Who may use this session: its owner, or the operator for a session without one.
    pub fn owner_name(&self) -> &str {
        self.owner.as_deref().unwrap_or("operator")
    }
}

/// The file format of `<state-dir>/sessions.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct BindingFile {
    pub sessions: BTreeMap<String, Binding>,
}

/// The bindings file of a state dir.
pub fn bindings_path(state_dir: &Path) -> PathBuf {
    state_dir.join("sessions.json")
}

/// Largest bindings file read (a binding is about 150 bytes).
const MAX_BINDINGS_BYTES: u64 = 64 * 1024 * 1024;

/// Load the bindings. A missing file is an empty set; a file that does not parse is moved aside
/// to `sessions.json.corrupt-<unix seconds>` with a warning, and the service starts empty.
pub fn load_bindings(state_dir: &Path) -> Result<BindingFile, ServeError> {
    use crate::support::fs::ReadRefusal;
    let path = bindings_path(state_dir);
    let bytes = match crate::support::fs::read_capped_anywhere(&path, None, MAX_BINDINGS_BYTES) {
        Ok(bytes) => bytes,
        Err(ReadRefusal::NotFound) => return Ok(BindingFile::default()),
        Err(refusal) => {
            return Err(ServeError::Usage(format!(
                "{}: cannot read the session bindings: {refusal}",
                path.display()
            )))
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(file) => Ok(file),
        Err(error) => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_secs())
                .unwrap_or(0);
            let aside = state_dir.join(format!("sessions.json.corrupt-{stamp}"));
            std::fs::rename(&path, &aside).map_err(|rename| {
                ServeError::Usage(format!(
                    "{} does not parse ({error}) and cannot be moved aside: {rename}",
                    path.display()
                ))
            })?;
            tracing::error!(
                "{} did not parse ({error}); moved it to {} and started with no session bindings",
                path.display(),
                aside.display()
            );
            Ok(BindingFile::default())
        }
    }
}

/// The state database of `serve` in its state dir.
pub const STATE_DB: &str = "serve.db";

/// Session bindings from the store's thread directory (each thread bound to a session).
pub fn bindings_of(store: &crate::service::store::Store) -> BindingFile {
    let sessions = store
        .sessions()
        .into_iter()
        .filter_map(|thread| {
            let key = thread.session_key?;
            Some((
                key,
                Binding {
                    thread_id: thread.id,
                    fingerprint: thread.fingerprint.unwrap_or_default(),
                    owner: (thread.owner != "operator").then_some(thread.owner),
                    member: (!thread.member.is_empty()).then_some(thread.member),
                },
            ))
        })
        .collect();
    BindingFile { sessions }
}

/// A session's binding as the store's thread record.
pub fn record_of(key: &str, binding: &Binding) -> crate::service::store::ThreadRecord {
    crate::service::store::ThreadRecord {
        id: binding.thread_id.clone(),
        identity: "native".to_string(),
        member: binding.member.clone().unwrap_or_default(),
        owner: binding.owner_name().to_string(),
        session_key: Some(key.to_string()),
        fingerprint: Some(binding.fingerprint.clone()),
        rollout: None,
        epoch: 1,
        gone: false,
        last_used: crate::service::directory::now(),
        home: None,
    }
}

/// The store's session bindings; on the first start with a store, an earlier `sessions.json`
/// is imported into it (then kept as `sessions.json.imported`).
pub fn load_bindings_into(
    state_dir: &Path,
    store: &crate::service::store::Store,
) -> Result<BindingFile, ServeError> {
    let legacy = bindings_path(state_dir);
    if store.sessions().is_empty() && legacy.exists() {
        let imported = load_bindings(state_dir)?;
        for (key, binding) in &imported.sessions {
            store.put_thread(record_of(key, binding));
        }
        store.flush();
        let kept = state_dir.join("sessions.json.imported");
        std::fs::rename(&legacy, &kept).map_err(|error| {
            ServeError::Usage(format!(
                "{}: imported into {}, but cannot be moved aside: {error}",
                legacy.display(),
                store.path().display()
            ))
        })?;
        tracing::info!(
            "{} session binding(s) of {} imported into {}",
            imported.sessions.len(),
            legacy.display(),
            store.path().display()
        );
    }
    Ok(bindings_of(store))
}

/// Tries to take a held state-dir lock before giving up, [`LOCK_RETRY_PAUSE`] apart (1 s).
const LOCK_RETRIES: u32 = 20;
const LOCK_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// An exclusive hold on a state dir for the life of a serve process.
#[derive(Debug)]
pub struct StateLock {
    _file: std::fs::File,
}

/// Take `<state-dir>/serve.lock` (and write our pid into it), or say which process holds it.
pub fn lock_state_dir(state_dir: &Path) -> Result<StateLock, ServeError> {
    let path = state_dir.join("serve.lock");
    let io = |error: std::io::Error| {
        ServeError::Usage(format!(
            "{}: cannot lock the state dir: {error}",
            path.display()
        ))
    };
    // Private: it holds the token, the bindings and the offline Codex home.
    crate::support::fs::create_private_dir(state_dir).map_err(io)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    // A holder that is just going away is waited for briefly: a serve restarted at once (in the
    // same process, or a new one right after the old exited) can find the lock still held for a
    // moment, since a child process another thread is spawning shares the lock's open file
    // until it execs.
    let mut attempts = 0;
    let locked = loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if attempts < LOCK_RETRIES => {
                attempts += 1;
                std::thread::sleep(LOCK_RETRY_PAUSE);
            }
            other => break other,
        }
    };
    match locked {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = (&file).take(64).read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(ServeError::Usage(format!(
                "another clawbridge serve{} uses the state dir {}; stop it or pass another --state-dir",
                if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                },
                state_dir.display()
            )));
        }
        Err(std::fs::TryLockError::Error(error)) => return Err(io(error)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    Ok(StateLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_bindings_file_is_moved_aside_not_dropped() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(bindings_path(dir.path()), "{\"sessions\": {\"a\": ").expect("write");
        let loaded = load_bindings(dir.path()).expect("load");
        assert!(loaded.sessions.is_empty());
        let aside: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("sessions.json.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "the broken file is kept for the operator");
        let kept = std::fs::read_to_string(dir.path().join(&aside[0])).expect("read");
        assert_eq!(kept, "{\"sessions\": {\"a\": ");
    }

    #[test]
    fn an_earlier_sessions_file_is_imported_once_and_bindings_come_back() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            bindings_path(dir.path()),
            r#"{"sessions": {"agent:main": {"threadId": "t1", "fingerprint": "f", "owner": "alice", "member": "local-0"}, "agent:ops": {"threadId": "t2", "fingerprint": "g"}}}"#,
        )
        .expect("write");
        let path = dir.path().join(STATE_DB);
        {
            let store = crate::service::store::Store::open(&path).expect("store");
            let bindings = load_bindings_into(dir.path(), &store).expect("load");
            assert_eq!(bindings.sessions.len(), 2);
            assert_eq!(
                bindings.sessions["agent:main"].owner.as_deref(),
                Some("alice")
            );
            assert_eq!(bindings.sessions["agent:ops"].owner, None);
            assert!(dir.path().join("sessions.json.imported").exists());
            // A new binding moves a session to its new thread.
            store.put_thread(record_of(
                "agent:main",
                &Binding {
                    thread_id: "t3".into(),
                    fingerprint: "h".into(),
                    owner: Some("alice".into()),
                    member: Some("local-1".into()),
                },
            ));
            store.flush();
        }
        let store = crate::service::store::Store::open(&path).expect("reopen");
        let bindings = load_bindings_into(dir.path(), &store).expect("again");
        assert_eq!(bindings.sessions["agent:main"].thread_id, "t3");
        assert_eq!(
            bindings.sessions["agent:main"].member.as_deref(),
            Some("local-1")
        );
        assert_eq!(bindings.sessions.len(), 2);
    }

    #[test]
    fn one_serve_per_state_dir() {
        let dir = tempfile::tempdir().expect("dir");
        let held = lock_state_dir(dir.path()).expect("first");
        let error = lock_state_dir(dir.path()).expect_err("second");
        let message = error.to_string();
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        drop(held);
        lock_state_dir(dir.path()).expect("free again");
    }

    /// A lock released while the next serve is waiting for it is taken (a restart does not
    /// fail on a holder that is going away).
    #[test]
    fn a_lock_released_within_the_wait_is_taken() {
        let dir = tempfile::tempdir().expect("dir");
        let held = lock_state_dir(dir.path()).expect("first");
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(held);
        });
        lock_state_dir(dir.path()).expect("taken once released");
        release.join().expect("release");
    }
}
