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
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

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

/// Names no client may take: the operator's own (what the runs and sessions the operator's
/// token starts are owned by). A client named `operator` would act on them as the operator's
/// token does, whatever its role; a role comes from `--operator`, never from a name.
const RESERVED_NAMES: [&str; 1] = ["operator"];

/// A client name: 1 to 64 of `[A-Za-z0-9._-]` (it appears in logs and `bridge.status`), and not
/// a reserved one (any case).
pub fn name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Some(format!(
            "client name {name:?}: use 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-'"
        ));
    }
    RESERVED_NAMES
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
        .then(|| {
            format!(
                "client name {name:?} is reserved for the operator's own token; pick another name (a client gets the operator's role with --operator)"
            )
        })
}

/// The SHA-256 of a token as hex.
pub fn token_sha256(token: &str) -> String {
    crate::support::hex::sha256(token.as_bytes(), 32)
}

/// Who a request comes from: the client a token names. An operator sees and acts on every
/// client's runs and threads; any other client only on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub operator: bool,
}

impl Caller {
    /// The service's own token (and every request under `--no-auth`).
    pub fn operator() -> Caller {
        Caller {
            name: "operator".to_string(),
            operator: true,
        }
    }

    /// True when this caller may see and act on what `owner` started.
    pub fn may_use(&self, owner: &str) -> bool {
        self.operator || self.name == owner
    }
}

/// The tokens a server knows: the operator's own, and the SHA-256 of each named client's
/// (from its clients file). Both servers (`serve`, the app-server endpoint) read callers
/// through it.
pub struct KnownTokens(Vec<([u8; 32], Caller)>);

impl KnownTokens {
    pub fn new(operator_token: &str, clients: &[ClientEntry]) -> KnownTokens {
        let mut known = vec![(
            Sha256::digest(operator_token.as_bytes()).into(),
            Caller::operator(),
        )];
        known.extend(clients.iter().filter_map(|client| {
            let digest = hex_digest(&client.sha256)?;
            Some((
                digest,
                Caller {
                    name: client.name.clone(),
                    operator: client.operator,
                },
            ))
        }));
        KnownTokens(known)
    }

    /// The client whose token the `Authorization` header carries (`Bearer <token>`). Every
    /// known digest is compared (in constant time, against the SHA-256 of what was sent), so
    /// neither which client matched nor the token's content or length leaks through timing.
    pub fn caller(&self, header: Option<&http::HeaderValue>) -> Option<Caller> {
        let given = header
            .map(http::HeaderValue::as_bytes)
            .and_then(|value| value.strip_prefix(b"Bearer "))?;
        let given: [u8; 32] = Sha256::digest(given).into();
        let mut found = None;
        for (digest, caller) in &self.0 {
            if bool::from(given.ct_eq(digest)) && found.is_none() {
                found = Some(caller.clone());
            }
        }
        found
    }
}

fn hex_digest(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(out)
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
    #[test]
    fn bearer_comparison_needs_the_exact_token_and_names_the_client() {
        let alice = ClientEntry {
            name: "alice".into(),
            sha256: token_sha256("alice-token-0123456789"),
            operator: false,
        };
        let known = KnownTokens::new("s3cret-token-0123456789", &[alice]);
        let header = |value: &str| http::HeaderValue::from_str(value).expect("header");
        let matches = |value: Option<&str>| {
            let value = value.map(header);
            known.caller(value.as_ref())
        };
        assert_eq!(
            matches(Some("Bearer s3cret-token-0123456789")),
            Some(Caller::operator())
        );
        assert_eq!(
            matches(Some("Bearer alice-token-0123456789")).map(|caller| caller.name),
            Some("alice".to_string())
        );
        assert_eq!(matches(Some("Bearer s3cret-token-012345678")), None);
        assert_eq!(matches(Some("bearer s3cret-token-0123456789")), None);
        assert_eq!(matches(None), None);
    }

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
