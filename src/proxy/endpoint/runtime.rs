//! The runtime identity every client is told at `initialize`, pinned.
//!
//! Why: OpenClaw's Codex plugin binds each session to a Codex thread under the app-server's
//! `initialize` answer (`userAgent`, `codexHome`, `platformFamily`, `platformOs`) and starts a new
//! thread, dropping the agent's context, whenever that answer changes. The endpoint answers every
//! connection with one answer; pinned in the store, it stays the same across restarts of the
//! endpoint and upgrades of its members' Codex, until the operator asks for the new one
//! (`--new-runtime-identity`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::service::store::Store;
use crate::support::sync::lock;

/// The store's key of the endpoint's pinned answer.
const SCOPE: &str = "app-server initialize";

pub(super) struct PinnedRuntime {
    store: Option<Arc<Store>>,
    /// `--new-runtime-identity`: the first member answer replaces the stored one.
    renew: bool,
    pinned: Mutex<Option<String>>,
    /// Member answers already told apart from the pinned one (each logged once).
    differing: Mutex<HashSet<String>>,
}

impl PinnedRuntime {
    /// The answer pinned in `store` (none yet, or `renew`: the next member answer is pinned).
    pub(super) fn new(store: Option<Arc<Store>>, renew: bool) -> PinnedRuntime {
        let pinned = match (&store, renew) {
            (Some(store), false) => store.runtime(SCOPE),
            _ => None,
        };
        PinnedRuntime {
            store,
            renew,
            pinned: Mutex::new(pinned),
            differing: Mutex::new(HashSet::new()),
        }
    }

    /// The answer pinned, if there is one (unless `--new-runtime-identity` asks for a member's
    /// next answer): what a handshake is told without a member having to start. With a shared
    /// store, one another endpoint pinned since this one started counts (read once, then kept).
    pub(super) fn pinned(&self) -> Option<String> {
        if self.renew {
            return None;
        }
        let mut pinned = lock(&self.pinned);
        if pinned.is_none() {
            if let Some(store) = self.store.as_ref().filter(|store| store.is_shared()) {
                *pinned = store.runtime(SCOPE);
            }
        }
        pinned.clone()
    }

    /// What a client is told, given a member's own answer: the pinned answer (this one, pinned
    /// now, when there is none). A member answering otherwise (a Codex upgrade) is logged once.
    pub(super) fn answer(&self, member: &Value) -> String {
        let own = member.to_string();
        let mut pinned = lock(&self.pinned);
        match &*pinned {
            Some(answer) => {
                if *answer != own && lock(&self.differing).insert(own.clone()) {
                    tracing::warn!(
                        "an app-server answers `initialize` with {own}, not the pinned {answer}; clients keep the pinned answer, so their threads stay bound (restart with --new-runtime-identity to take the new one)"
                    );
                }
                answer.clone()
            }
            None => {
                // Pinned unless pinned already: endpoints of a shared store that start
                // together (or one on older members) all answer with the one pinned first.
                let answer = match &self.store {
                    Some(store) if self.renew => {
                        store.put_runtime(SCOPE, &own);
                        own.clone()
                    }
                    Some(store) => store
                        .pin_runtime(SCOPE, &own)
                        .unwrap_or_else(|| own.clone()),
                    None => own.clone(),
                };
                if answer != own && lock(&self.differing).insert(own.clone()) {
                    tracing::warn!(
                        "an app-server answers `initialize` with {own}, not the pinned {answer}; clients keep the pinned answer, so their threads stay bound (restart with --new-runtime-identity to take the new one)"
                    );
                }
                *pinned = Some(answer.clone());
                answer
            }
        }
    }
}
