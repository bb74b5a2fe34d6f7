//! Client identities of `clawbridge serve`: named tokens, so each client sees and acts on only
//! its own sessions and runs.
//!
//! `<state-dir>/clients.json` (0600) lists `{"name", "sha256", "operator"}` per client: the
//! SHA-256 of the token, never the token itself, so the file gives nobody a credential.
//! `clawbridge client add NAME` generates a token, prints it once and adds its hash. The
//! service's own token (`<state-dir>/token` or `--token`) is the operator's: it sees every
//! client's runs, and so does any client marked `operator`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest clients file read.
const MAX_CLIENTS_BYTES: u64 = 1024 * 1024;
/// Most clients one file may name.
pub const MAX_CLIENTS: usize = 1024;

/// One client: a name and the SHA-256 of its token (hex).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientEntry {
    pub name: String,
    pub sha256: String,
    #[serde(default)]
    pub operator: bool,
}

/// The file format of `<state-dir>/clients.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsFile {
    pub clients: Vec<ClientEntry>,
}

/// Where a state dir keeps its clients.
pub fn clients_path(state_dir: &Path) -> PathBuf {
    state_dir.join("clients.json")
}

/// A client name: 1 to 64 of `[A-Za-z0-9._-]` (it appears in logs and `bridge.status`).
pub fn name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    (!ok).then(|| format!("client name {name:?}: use 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-'"))
}

/// The SHA-256 of a token as hex.
pub fn token_sha256(token: &str) -> String {
    crate::support::hex::sha256(token.as_bytes(), 32)
}

impl ClientsFile {
    /// Load `path` (missing: no clients). A link, a bad entry or a
    /// duplicate name is an error naming the file.
    pub fn load(path: &Path) -> Result<ClientsFile> {
        use crate::support::fs::ReadRefusal;
        let invalid = |message: String| Error::InvalidDocument {
            path: path.to_path_buf(),
            message,
        };
        if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return Err(invalid("is a symbolic link; refusing to follow it".into()));
        }
        let bytes = match crate::support::fs::read_capped_anywhere(path, None, MAX_CLIENTS_BYTES) {
            Ok(bytes) => bytes,
            Err(ReadRefusal::NotFound) => return Ok(ClientsFile::default()),
            Err(refusal) => return Err(invalid(refusal.to_string())),
        };
        let file: ClientsFile = serde_json::from_slice(&bytes).map_err(|error| {
            invalid(format!(
                "{error} (expected {{\"clients\": [{{\"name\", \"sha256\", \"operator\"}}]}})"
            ))
        })?;
        if file.clients.len() > MAX_CLIENTS {
            return Err(invalid(format!("more than {MAX_CLIENTS} clients")));
        }
        let mut names = std::collections::HashSet::new();
        for client in &file.clients {
            if let Some(problem) = name_problem(&client.name) {
                return Err(invalid(problem));
            }
            if !names.insert(client.name.as_str()) {
                return Err(invalid(format!("client {:?} is listed twice", client.name)));
            }
            let hex = client.sha256.len() == 64
                && client
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex {
                return Err(invalid(format!(
                    "client {:?}: sha256 must be 64 lowercase hex digits",
                    client.name
                )));
            }
        }
        Ok(file)
    }

    /// `client list`: a line per client, its name and role (never a token).
    pub fn render_list(&self) -> String {
        self.clients
            .iter()
            .map(|client| {
                let role = if client.operator {
                    "operator"
                } else {
                    "client"
                };
                format!("{}\t{role}\n", client.name)
            })
            .collect()
    }

    /// Add a client with a new token; returns the token (shown once, never stored).
    pub fn add(path: &Path, name: &str, operator: bool) -> Result<String> {
        let invalid = |message: String| Error::InvalidArgument {
            flag: "NAME".to_string(),
            message,
        };
        if let Some(problem) = name_problem(name) {
            return Err(invalid(problem));
        }
        let mut file = ClientsFile::load(path)?;
        if file.clients.iter().any(|client| client.name == name) {
            return Err(invalid(format!(
                "a client {name:?} exists already in {}; remove its entry first to replace its token",
                path.display()
            )));
        }
        let token = crate::support::hex::random(32).map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })?;
        file.clients.push(ClientEntry {
            name: name.to_string(),
            sha256: token_sha256(&token),
            operator,
        });
        if let Some(dir) = path.parent() {
            crate::support::fs::create_private_dir(dir).map_err(|source| Error::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let text = serde_json::to_string_pretty(&file).map_err(|error| Error::InvalidDocument {
            path: path.to_path_buf(),
            message: error.to_string(),
        })? + "\n";
        crate::support::fs::write_private(path, text.as_bytes())?;
        Ok(token)
    }
}

/// What `client add` says on stderr before it prints the token.
pub fn added_notice(name: &str, operator: bool, path: &Path) -> String {
    format!(
        "clawbridge client: added {name}{} to {}; its token (shown once):",
        if operator { " (operator)" } else { "" },
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_added_with_a_hash_and_bad_files_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        let path = clients_path(dir.path());
        let token = ClientsFile::add(&path, "alice", false).expect("add");
        assert_eq!(token.len(), 64);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains(&token), "the token itself is never stored");
        assert!(text.contains(&token_sha256(&token)));
        assert!(
            ClientsFile::add(&path, "alice", false).is_err(),
            "names are unique"
        );
        assert!(ClientsFile::add(&path, "a b", false).is_err());
        ClientsFile::add(&path, "ops", true).expect("operator");
        let file = ClientsFile::load(&path).expect("load");
        assert_eq!(file.clients.len(), 2);
        assert!(file.clients[1].operator);
        std::fs::write(&path, r#"{"clients": [{"name": "x", "sha256": "nothex"}]}"#).expect("w");
        let error = ClientsFile::load(&path).expect_err("bad hash").to_string();
        assert!(
            error.contains("clients.json") && error.contains("sha256"),
            "{error}"
        );
    }
}
