//! The thread directory: the one record of each thread a service serves — the account it runs
//! under, the member it was placed on, the client that owns it, `serve`'s session bound to it,
//! its rollout — kept in memory for the threads in use and in the store for all of them.
//!
//! Why: ownership checks and routing read it on every request that names a thread, so it
//! answers from memory; a restart, a crash or an upgrade must change none of it, so every change
//! is written to the store (off the request's path) and a thread not in memory is read back from
//! there. Memory is bounded by age: past its capacity the least recently used tenth is let go
//! (it stays in the store), never everything at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::store::{Store, ThreadRecord};
use crate::support::sync::lock;

/// Threads kept in memory by default.
pub const DEFAULT_CAPACITY: usize = 100_000;
/// A thread's last use is written again at most this often (a busy thread is not a write per
/// request).
const TOUCH_EVERY_SECS: u64 = 60;

/// Unix seconds now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The directory of one service.
pub struct Directory {
    store: Option<Arc<Store>>,
    threads: Mutex<HashMap<String, ThreadRecord>>,
    capacity: usize,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field(
                "store",
                &self.store.as_ref().map(|store| store.path().to_path_buf()),
            )
            .field("in_memory", &lock(&self.threads).len())
            .finish()
    }
}

/// Where a thread goes when it is placed: its account, member and owner.
#[derive(Clone, Debug)]
pub struct Placement<'a> {
    pub identity: &'a str,
    pub member: &'a str,
    /// The client placing it; an existing thread keeps its owner.
    pub owner: &'a str,
    /// Its rollout, when the answer named one.
    pub rollout: Option<&'a str>,
    /// The state dir whose local member took it; `None` for a remote member.
    pub home: Option<&'a str>,
}

impl Directory {
    /// A directory over `store` (none: memory only), holding at most `capacity` threads in
    /// memory; the most recently used are read in now.
    pub fn open(store: Option<Arc<Store>>, capacity: usize) -> Directory {
        let capacity = capacity.max(16);
        let threads = store
            .as_ref()
            .map(|store| store.recent_threads(capacity))
            .unwrap_or_default()
            .into_iter()
            .map(|thread| (thread.id.clone(), thread))
            .collect();
        Directory {
            store,
            threads: Mutex::new(threads),
            capacity,
        }
    }

    /// The store, if the directory is durable.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()
    }

    /// A thread's record: from memory, else from the store (then kept in memory).
    pub fn get(&self, id: &str) -> Option<ThreadRecord> {
        if let Some(thread) = lock(&self.threads).get(id) {
            return Some(thread.clone());
        }
        let thread = self.store.as_ref()?.thread(id)?;
        self.remember(thread.clone());
        Some(thread)
    }

    fn remember(&self, thread: ThreadRecord) {
        let mut threads = lock(&self.threads);
        if threads.len() >= self.capacity && !threads.contains_key(&thread.id) {
            // The least recently used tenth goes from memory; the store keeps them.
            let mut by_use: Vec<(u64, String)> = threads
                .values()
                .map(|known| (known.last_used, known.id.clone()))
                .collect();
            by_use.sort();
            for (_, id) in by_use.into_iter().take(self.capacity / 10 + 1) {
                threads.remove(&id);
            }
        }
        threads.insert(thread.id.clone(), thread);
    }

    /// File a thread Codex accepted on a member: new, or placed again (its epoch rises; its
    /// owner and session stay).
    pub fn place(&self, id: &str, placement: &Placement<'_>) -> ThreadRecord {
        let known = self.get(id);
        let thread = ThreadRecord {
            id: id.to_string(),
            identity: placement.identity.to_string(),
            member: placement.member.to_string(),
            owner: known
                .as_ref()
                .map_or_else(|| placement.owner.to_string(), |known| known.owner.clone()),
            session_key: known.as_ref().and_then(|known| known.session_key.clone()),
            fingerprint: known.as_ref().and_then(|known| known.fingerprint.clone()),
            rollout: placement
                .rollout
                .map(str::to_string)
                .or_else(|| known.as_ref().and_then(|known| known.rollout.clone())),
            epoch: known.as_ref().map_or(1, |known| known.epoch + 1),
            gone: false,
            last_used: now(),
            home: placement.home.map(str::to_string),
        };
        self.save(thread.clone());
        thread
    }

    /// Keep `thread` as it is given (in memory and in the store).
    pub fn save(&self, thread: ThreadRecord) {
        if let Some(store) = &self.store {
            store.put_thread(thread.clone());
        }
        self.remember(thread);
    }

    /// A thread was used now (written at most every minute).
    pub fn touch(&self, id: &str) {
        let now = now();
        let changed = {
            let mut threads = lock(&self.threads);
            match threads.get_mut(id) {
                Some(thread) if now >= thread.last_used + TOUCH_EVERY_SECS => {
                    thread.last_used = now;
                    Some(thread.clone())
                }
                _ => None,
            }
        };
        if let (Some(thread), Some(store)) = (changed, &self.store) {
            store.put_thread(thread);
        }
    }

    /// A thread's rollout is gone: a resume of it gets a clear error from now on.
    pub fn mark_gone(&self, id: &str) {
        if let Some(mut thread) = self.get(id) {
            thread.gone = true;
            self.save(thread);
        }
    }

    /// Mark every thread in memory whose rollout file is gone (a Codex home cleaned up, a
    /// member's disk replaced), so its resume is told so at once: how many. Reads only file
    /// metadata, at most the threads in memory.
    pub fn check_rollouts(&self) -> usize {
        let missing: Vec<String> = lock(&self.threads)
            .values()
            .filter(|thread| !thread.gone)
            .filter(|thread| {
                thread
                    .rollout
                    .as_deref()
                    .is_some_and(|rollout| std::fs::symlink_metadata(rollout).is_err())
            })
            .map(|thread| thread.id.clone())
            .collect();
        for id in &missing {
            self.mark_gone(id);
        }
        missing.len()
    }

    /// The accounts with a thread whose conversation is still there: in memory (a change the
    /// store has not written yet too) and in the store (every thread kept).
    pub fn identities_with_threads(&self) -> std::collections::HashSet<String> {
        let mut identities: std::collections::HashSet<String> = lock(&self.threads)
            .values()
            .filter(|thread| !thread.gone)
            .map(|thread| thread.identity.clone())
            .collect();
        if let Some(store) = &self.store {
            identities.extend(store.identities_with_threads());
        }
        identities
    }

    /// Threads in memory, by account.
    pub fn counts_by_identity(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for thread in lock(&self.threads).values() {
            *counts.entry(thread.identity.clone()).or_default() += 1;
        }
        counts
    }

    /// Threads in memory.
    pub fn in_memory(&self) -> usize {
        lock(&self.threads).len()
    }

    /// Threads kept in all (the store's count; memory's without one).
    pub fn kept(&self) -> u64 {
        match &self.store {
            Some(store) => store.thread_count(),
            None => self.in_memory() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement<'a>(identity: &'a str, owner: &'a str) -> Placement<'a> {
        Placement {
            identity,
            member: "local-0",
            owner,
            rollout: Some("/home/sessions/rollout-t.jsonl"),
            home: None,
        }
    }

    #[test]
    fn a_thread_keeps_its_owner_and_its_epoch_rises_across_a_reopen() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("app-server.db");
        {
            let store = Arc::new(Store::open(&path).expect("open"));
            let directory = Directory::open(Some(Arc::clone(&store)), 100);
            let first = directory.place("t", &placement("apiKey-a", "alice"));
            assert_eq!((first.owner.as_str(), first.epoch), ("alice", 1));
            // The operator's resume places it again: the owner stays.
            let again = directory.place("t", &placement("apiKey-a", "operator"));
            assert_eq!((again.owner.as_str(), again.epoch), ("alice", 2));
            store.flush();
        }
        let store = Arc::new(Store::open(&path).expect("reopen"));
        let directory = Directory::open(Some(store), 100);
        let known = directory.get("t").expect("kept");
        assert_eq!(
            (known.owner.as_str(), known.identity.as_str(), known.epoch),
            ("alice", "apiKey-a", 2)
        );
        // Its rollout (a path that does not exist here) is gone: found at start, and kept so.
        assert_eq!(directory.check_rollouts(), 1);
        assert!(directory.get("t").is_some_and(|thread| thread.gone));
        assert_eq!(directory.check_rollouts(), 0, "once");
    }

    #[test]
    fn memory_is_bounded_by_age_and_the_store_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("dir");
        let store = Arc::new(Store::open(&dir.path().join("s.db")).expect("open"));
        let directory = Directory::open(Some(Arc::clone(&store)), 20);
        for n in 0..50u64 {
            directory.save(ThreadRecord {
                id: format!("t{n}"),
                identity: "native".into(),
                member: "local-0".into(),
                owner: "operator".into(),
                session_key: None,
                fingerprint: None,
                rollout: None,
                epoch: 1,
                gone: false,
                last_used: n,
                home: None,
            });
        }
        assert!(directory.in_memory() <= 20, "{}", directory.in_memory());
        assert!(directory.in_memory() >= 10, "never everything at once");
        store.flush();
        // The oldest is no longer in memory, but is still known.
        assert_eq!(directory.get("t0").map(|thread| thread.last_used), Some(0));
        assert_eq!(directory.kept(), 50);
        // Memory only: the same bound.
        let volatile = Directory::open(None, 20);
        for n in 0..50u64 {
            volatile.place(&format!("v{n}"), &placement("native", "operator"));
        }
        assert!(volatile.in_memory() <= 20);
    }
}
