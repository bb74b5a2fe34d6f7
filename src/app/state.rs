//! The state a clawbridge process keeps between runs: the `once` truncation-warning ledger (and,
//! for the service, the session bindings in `server`).
//!
//! Routing is pure: it says which truncation notice a run would show; whether a `once` notice was
//! already shown to the session is remembered here, behind [`crate::translate::NoticeMemory`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::translate::NoticeMemory;

/// Remembers, per session key, which truncation signatures were already shown (`once` mode).
#[derive(Clone, Debug)]
pub struct WarningLedger {
    path: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct LedgerFile {
    sessions: BTreeMap<String, Vec<String>>,
}

/// How many signatures one session remembers.
const LEDGER_SIGNATURES_PER_SESSION: usize = 32;

impl WarningLedger {
    /// A ledger stored under `state_dir` (`truncation-warnings.json`).
    pub fn in_dir(state_dir: &Path) -> Self {
        Self {
            path: Some(state_dir.join("truncation-warnings.json")),
        }
    }

    /// A ledger that remembers nothing (every `once` run shows the notice).
    pub fn ephemeral() -> Self {
        Self { path: None }
    }

    /// The platform state directory (`dirs::state_dir`, falling back to the data dir).
    pub fn default_state_dir() -> Option<PathBuf> {
        dirs::state_dir()
            .or_else(dirs::data_local_dir)
            .map(|dir| dir.join("clawbridge"))
    }
}

impl WarningLedger {
    fn read(path: &Path) -> LedgerFile {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }
}

impl NoticeMemory for WarningLedger {
    fn would_show(&self, session: &str, signature: &str) -> Result<bool> {
        let Some(path) = &self.path else {
            return Ok(true);
        };
        Ok(!Self::read(path)
            .sessions
            .get(session)
            .is_some_and(|seen| seen.iter().any(|known| known == signature)))
    }

    /// True the first time `session` meets `signature`, which is then recorded.
    fn first_showing(&self, session: &str, signature: &str) -> Result<bool> {
        {
            {
                let Some(path) = &self.path else {
                    return Ok(true);
                };
                let mut ledger = Self::read(path);
                let signature = signature.to_string();
                let seen = ledger.sessions.entry(session.to_string()).or_default();
                if seen.contains(&signature) {
                    return Ok(false);
                }
                seen.push(signature);
                if seen.len() > LEDGER_SIGNATURES_PER_SESSION {
                    let excess = seen.len() - LEDGER_SIGNATURES_PER_SESSION;
                    seen.drain(..excess);
                }
                let text = serde_json::to_string_pretty(&ledger).unwrap_or_default() + "\n";
                crate::support::fs::write_private(path, text.as_bytes())?;
                Ok(true)
            }
        }
    }
}

/// The file `serve`'s generated bearer token lives in (`doctor` checks it; `server::token` owns
/// writing it).
pub fn token_path(state_dir: &Path) -> PathBuf {
    state_dir.join("token")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_ledger_shows_a_signature_once_per_session() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = WarningLedger::in_dir(dir.path());
        assert!(ledger.first_showing("s1", "sig").expect("ledger"));
        assert!(!ledger.first_showing("s1", "sig").expect("ledger"));
        assert!(ledger.first_showing("s2", "sig").expect("ledger"));
        assert!(ledger.first_showing("s1", "other").expect("ledger"));
        // A fresh ledger on the same folder remembers.
        assert!(!WarningLedger::in_dir(dir.path())
            .first_showing("s1", "sig")
            .expect("ledger"));
        assert!(WarningLedger::ephemeral()
            .first_showing("s1", "sig")
            .expect("ledger"));
    }
}
