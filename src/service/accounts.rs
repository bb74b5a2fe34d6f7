//! Named accounts of the app-server endpoint: a name an operator gives an account, and the keys
//! that log in as it.
//!
//! Why: the endpoint files each login under its credential's fingerprint (`apiKey-1a2b…`,
//! `support::credential`): its Codex home, its threads, its budget. That alone names nobody,
//! and a new key is a new fingerprint, so rotating an agent's key would cut it off from its
//! threads. An account here has a name, the fingerprint it is filed under (its first key's,
//! kept for ever: the home and the threads stay where they are) and the keys that log in as it
//! (any number; a rotation adds the new key, then removes the old).
//!
//! `<state-dir>/accounts.json` (0600) lists `{"name", "identity", "keys"}` per account; keys are
//! fingerprints, never keys, so the file gives nobody a credential. `clawbridge account add`,
//! `add-key` and `remove-key` edit it (from a key in an environment variable or on stdin, or a
//! fingerprint from `app-server status`), or an operator edits it by hand. A running endpoint
//! reads it again when it changes, at the next login: no restart for a rotation.
//!
//! Once it names an account, the endpoint serves the keys it lists and refuses any other login
//! with how to add it (`--unnamed-accounts` serves unknown keys too, under their fingerprints);
//! a key removed from an account is refused, though its fingerprint is the account's own.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::support::credential::is_fingerprint;
use crate::support::sync::lock;

/// Largest accounts file read.
const MAX_ACCOUNTS_BYTES: u64 = 1024 * 1024;
/// Most accounts one file may name.
pub const MAX_ACCOUNTS: usize = 1024;
/// Most keys one account may have.
pub const MAX_KEYS: usize = 64;

/// One named account.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccountEntry {
    pub name: String,
    /// The fingerprint its Codex home, threads and budget are filed under: its first key's,
    /// kept when its keys change.
    pub identity: String,
    /// The fingerprints of the keys that log in as it.
    pub keys: Vec<String>,
}

/// The file format of `<state-dir>/accounts.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccountsFile {
    pub accounts: Vec<AccountEntry>,
}

/// What a login's fingerprint is to the named accounts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Named {
    /// A key of this account: the login runs as the account's identity.
    Key { name: String, identity: String },
    /// The fingerprint an account is filed under, its key removed from it: refused.
    Removed { name: String },
    /// No account's.
    Unknown,
}

/// Where a state dir keeps its accounts.
pub fn accounts_path(state_dir: &Path) -> PathBuf {
    state_dir.join("accounts.json")
}

/// An account name: 1 to 64 of `[A-Za-z0-9._-]` (it appears in the status, logs and metrics),
/// and not a fingerprint or `native` (each would read as another account's key).
pub fn name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Some(format!(
            "account name {name:?}: use 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-'"
        ));
    }
    (is_fingerprint(name) || name.eq_ignore_ascii_case("native"))
        .then(|| format!("account name {name:?} reads as an account key; pick a name"))
}

impl AccountsFile {
    /// Load `path` (missing: no named account). A link, a bad entry, a name listed twice or a
    /// key of two accounts is an error naming the file.
    pub fn load(path: &Path) -> Result<AccountsFile> {
        let invalid = |message: String| Error::InvalidDocument {
            path: path.to_path_buf(),
            message,
        };
        let file: AccountsFile = super::files::read(
            path,
            MAX_ACCOUNTS_BYTES,
            "{\"accounts\": [{\"name\", \"identity\", \"keys\": [fingerprint...]}]}",
        )?;
        file.check().map_err(invalid)?;
        Ok(file)
    }

    /// Names once each, fingerprints well formed, each key of one account only, no account's
    /// key the identity of another.
    fn check(&self) -> std::result::Result<(), String> {
        if self.accounts.len() > MAX_ACCOUNTS {
            return Err(format!("more than {MAX_ACCOUNTS} accounts"));
        }
        let mut names = std::collections::HashSet::new();
        let mut keys = std::collections::HashMap::new();
        for account in &self.accounts {
            if let Some(problem) = name_problem(&account.name) {
                return Err(problem);
            }
            if !names.insert(account.name.as_str()) {
                return Err(format!("account {:?} is listed twice", account.name));
            }
            if account.keys.len() > MAX_KEYS {
                return Err(format!(
                    "account {:?} has more than {MAX_KEYS} keys",
                    account.name
                ));
            }
            for fingerprint in account.keys.iter().chain([&account.identity]) {
                if !is_fingerprint(fingerprint) {
                    return Err(format!(
                        "account {:?}: {fingerprint:?} is not a fingerprint (`apiKey-` and 16 hex digits, as `clawbridge account` prints it)",
                        account.name
                    ));
                }
            }
            for key in &account.keys {
                if let Some(other) = keys.insert(key.as_str(), account.name.as_str()) {
                    if other != account.name {
                        return Err(format!(
                            "key {key} is listed under two accounts ({other:?} and {:?})",
                            account.name
                        ));
                    }
                }
            }
        }
        for account in &self.accounts {
            if let Some(other) = self
                .accounts
                .iter()
                .find(|other| other.name != account.name && other.keys.contains(&account.identity))
            {
                return Err(format!(
                    "account {:?} is filed under {}, a key of account {:?}",
                    account.name, account.identity, other.name
                ));
            }
        }
        Ok(())
    }

    /// What a login of `fingerprint` is to these accounts.
    pub fn resolve(&self, fingerprint: &str) -> Named {
        if let Some(account) = self
            .accounts
            .iter()
            .find(|account| account.keys.iter().any(|key| key == fingerprint))
        {
            return Named::Key {
                name: account.name.clone(),
                identity: account.identity.clone(),
            };
        }
        match self
            .accounts
            .iter()
            .find(|account| account.identity == fingerprint)
        {
            Some(account) => Named::Removed {
                name: account.name.clone(),
            },
            None => Named::Unknown,
        }
    }

    /// The name of the account filed under `identity`, if one is.
    pub fn name_of(&self, identity: &str) -> Option<&str> {
        self.accounts
            .iter()
            .find(|account| account.identity == identity)
            .map(|account| account.name.as_str())
    }

    /// `account list`: a line per account: its name, what it is filed under, its keys.
    pub fn render_list(&self) -> String {
        if self.accounts.is_empty() {
            return "(no named account)\n".to_string();
        }
        self.accounts
            .iter()
            .map(|account| {
                let keys = if account.keys.is_empty() {
                    "(no key)".to_string()
                } else {
                    account.keys.join(",")
                };
                format!("{}\t{}\t{keys}\n", account.name, account.identity)
            })
            .collect()
    }

    /// Write the file (0600, through a temp file and a rename), making its folder private.
    fn save(&self, path: &Path) -> Result<()> {
        super::files::write(path, self)
    }

    /// `account add NAME`: a new account filed under `fingerprint` (its first key's: a key
    /// that logged in before keeps its home and threads, now under the name).
    pub fn add(path: &Path, name: &str, fingerprint: &str) -> Result<AccountEntry> {
        let invalid = |message: String| Error::InvalidArgument {
            flag: "NAME".to_string(),
            message,
        };
        if let Some(problem) = name_problem(name) {
            return Err(invalid(problem));
        }
        let mut file = AccountsFile::load(path)?;
        if file.accounts.iter().any(|account| account.name == name) {
            return Err(invalid(format!(
                "an account {name:?} exists already in {}; give it another key with `clawbridge account add-key {name}`",
                path.display()
            )));
        }
        if let Some(other) = file.owner(fingerprint) {
            return Err(invalid(format!(
                "{fingerprint} is account {other:?}'s already"
            )));
        }
        let entry = AccountEntry {
            name: name.to_string(),
            identity: fingerprint.to_string(),
            keys: vec![fingerprint.to_string()],
        };
        file.accounts.push(entry.clone());
        file.check().map_err(invalid)?;
        file.save(path)?;
        Ok(entry)
    }

    /// `account add-key NAME`: one more key logs in as the account (a rotation's new key).
    pub fn add_key(path: &Path, name: &str, fingerprint: &str) -> Result<AccountEntry> {
        let invalid = |message: String| Error::InvalidArgument {
            flag: "NAME".to_string(),
            message,
        };
        let mut file = AccountsFile::load(path)?;
        if let Some(other) = file.owner(fingerprint).filter(|other| other != name) {
            return Err(invalid(format!(
                "{fingerprint} is account {other:?}'s already"
            )));
        }
        let account = file.named(name, path)?;
        if !account.keys.iter().any(|key| key == fingerprint) {
            account.keys.push(fingerprint.to_string());
        }
        let entry = account.clone();
        file.check().map_err(invalid)?;
        file.save(path)?;
        Ok(entry)
    }

    /// `account remove-key NAME FINGERPRINT`: the key logs in as the account no more (and,
    /// being the account's, as no other account either). The account keeps its home.
    pub fn remove_key(path: &Path, name: &str, fingerprint: &str) -> Result<AccountEntry> {
        let mut file = AccountsFile::load(path)?;
        let account = file.named(name, path)?;
        let before = account.keys.len();
        account.keys.retain(|key| key != fingerprint);
        if account.keys.len() == before {
            return Err(Error::InvalidArgument {
                flag: "FINGERPRINT".to_string(),
                message: format!(
                    "{fingerprint} is not a key of account {name:?} (its keys: {})",
                    account.keys.join(", ")
                ),
            });
        }
        let entry = account.clone();
        file.save(path)?;
        Ok(entry)
    }

    /// The account a fingerprint is a key of, or is filed under.
    fn owner(&self, fingerprint: &str) -> Option<String> {
        self.accounts
            .iter()
            .find(|account| {
                account.identity == fingerprint || account.keys.iter().any(|key| key == fingerprint)
            })
            .map(|account| account.name.clone())
    }

    fn named(&mut self, name: &str, path: &Path) -> Result<&mut AccountEntry> {
        self.accounts
            .iter_mut()
            .find(|account| account.name == name)
            .ok_or_else(|| Error::InvalidArgument {
                flag: "NAME".to_string(),
                message: format!(
                    "no account {name:?} in {}; add it with `clawbridge account add {name} --api-key-env VAR`",
                    path.display()
                ),
            })
    }
}

/// The named accounts a running endpoint serves: the file, read again when it changes (its
/// length or modification time), so a rotation needs no restart. A file that turns bad keeps
/// the last good accounts, warned once per change.
#[derive(Debug)]
pub struct AccountBook {
    path: PathBuf,
    seen: Mutex<Seen>,
}

#[derive(Debug)]
struct Seen {
    stamp: Option<(std::time::SystemTime, u64)>,
    file: Arc<AccountsFile>,
}

fn stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl AccountBook {
    /// The book of `path`, read now: a bad file is an error (the endpoint does not start).
    pub fn open(path: &Path) -> Result<AccountBook> {
        let stamp = stamp(path);
        let file = AccountsFile::load(path)?;
        Ok(AccountBook {
            path: path.to_path_buf(),
            seen: Mutex::new(Seen {
                stamp,
                file: Arc::new(file),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The accounts as the file says now.
    pub fn current(&self) -> Arc<AccountsFile> {
        let now = stamp(&self.path);
        let mut seen = lock(&self.seen);
        if now != seen.stamp {
            seen.stamp = now;
            match AccountsFile::load(&self.path) {
                Ok(file) => {
                    tracing::info!(
                        "named accounts: {} from {}",
                        file.accounts.len(),
                        self.path.display()
                    );
                    seen.file = Arc::new(file);
                }
                Err(error) => tracing::warn!(
                    "named accounts: {} (the accounts read before are kept)",
                    crate::error::with_causes(&error)
                ),
            }
        }
        Arc::clone(&seen.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotation_keeps_the_identity_and_a_removed_key_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = accounts_path(dir.path());
        let old = crate::support::credential::fingerprint("apiKey", "sk-old");
        let new = crate::support::credential::fingerprint("apiKey", "sk-new");
        AccountsFile::add(&path, "alice", &old).expect("add");
        AccountsFile::add_key(&path, "alice", &new).expect("add key");
        let file = AccountsFile::load(&path).expect("load");
        let alice = Named::Key {
            name: "alice".into(),
            identity: old.clone(),
        };
        assert_eq!(file.resolve(&new), alice);
        assert_eq!(file.resolve(&old), alice);
        AccountsFile::remove_key(&path, "alice", &old).expect("remove");
        let file = AccountsFile::load(&path).expect("load");
        assert_eq!(file.resolve(&new), alice);
        assert_eq!(
            file.resolve(&old),
            Named::Removed {
                name: "alice".into()
            }
        );
        // Another account cannot take alice's keys, nor the fingerprint she is filed under.
        assert!(AccountsFile::add(&path, "bob", &old).is_err());
        assert!(AccountsFile::add(&path, "bob", &new).is_err());
        assert!(
            AccountsFile::add(&path, "apiKey-0123456789abcdef", "apiKey-1234567890abcdef").is_err()
        );
        assert!(std::fs::read_to_string(&path)
            .expect("file")
            .find("sk-")
            .is_none());
    }
}
