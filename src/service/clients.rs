//! Client identities of `clawbridge serve`: named tokens, so each client sees and acts on only
//! its own sessions and runs.
//!
//! `<state-dir>/clients.json` (0600) lists `{"name", "sha256", "operator", "allow"}` per
//! client: the SHA-256 of the token, never the token itself, so the file gives nobody a
//! credential. `clawbridge client add NAME` generates a token, prints it once and adds its hash.
//! The service's own token (`<state-dir>/token` or `--token`) is the operator's: it sees every
//! client's runs, and so does any client marked `operator`. `allow` lists what the operator
//! granted a client past its own threads on the app-server endpoint (`--allow fs`, `exec`, ...:
//! [`Grant`]); nothing by default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use crate::codex::protocol::table::Grant;
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
    /// What the endpoint lets this client do past its own threads (host access): nothing
    /// unless listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<Grant>,
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
    /// What the operator granted this client past its own threads (an operator needs none).
    pub grants: Vec<Grant>,
}

impl Caller {
    /// The service's own token (and every request under `--no-auth`).
    pub fn operator() -> Caller {
        Caller {
            name: "operator".to_string(),
            operator: true,
            grants: Vec::new(),
        }
    }

    /// A named client, as its entry in the clients file describes it.
    pub fn named(entry: &ClientEntry) -> Caller {
        Caller {
            name: entry.name.clone(),
            operator: entry.operator,
            grants: entry.allow.clone(),
        }
    }

    /// True when this caller may use what `grant` covers.
    pub fn has(&self, grant: Grant) -> bool {
        self.operator || self.grants.contains(&grant)
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
            Some((digest, Caller::named(client)))
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
        let invalid = |message: String| Error::InvalidDocument {
            path: path.to_path_buf(),
            message,
        };
        let expected = format!(
            "{{\"clients\": [{{\"name\", \"sha256\", \"operator\", \"allow\"}}]}}; `allow` takes {}",
            Grant::ALL.map(Grant::as_str).join(", ")
        );
        let file: ClientsFile = super::files::read(path, MAX_CLIENTS_BYTES, &expected)?;
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

    /// `client list`: a line per client, its name, role and grants (never a token).
    pub fn render_list(&self) -> String {
        self.clients
            .iter()
            .map(|client| {
                let role = if client.operator {
                    "operator"
                } else {
                    "client"
                };
                format!("{}\t{role}\t{}\n", client.name, grants_text(&client.allow))
            })
            .collect()
    }

    /// Write the file (0600, through a temp file and a rename), making its folder private.
    fn save(&self, path: &Path) -> Result<()> {
        super::files::write(path, self)
    }

    /// `client allow NAME [GRANT...]`: the client's grants become exactly `allow` (none: it
    /// keeps to its own threads). A running endpoint reads them when it starts.
    pub fn set_grants(path: &Path, name: &str, allow: &[Grant]) -> Result<()> {
        let mut file = ClientsFile::load(path)?;
        let Some(client) = file.clients.iter_mut().find(|client| client.name == name) else {
            return Err(Error::InvalidArgument {
                flag: "NAME".to_string(),
                message: format!(
                    "no client {name:?} in {}; add it with `clawbridge client add {name}`",
                    path.display()
                ),
            });
        };
        client.allow = normalised(allow);
        file.save(path)
    }

    /// Add a client with a new token; returns the token (shown once, never stored).
    pub fn add(path: &Path, name: &str, operator: bool, allow: &[Grant]) -> Result<String> {
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
            allow: normalised(allow),
        });
        file.save(path)?;
        Ok(token)
    }
}

/// Grants sorted, each once.
fn normalised(allow: &[Grant]) -> Vec<Grant> {
    let mut allow = allow.to_vec();
    allow.sort();
    allow.dedup();
    allow
}

/// `fs,exec`, or `-` for none.
pub fn grants_text(allow: &[Grant]) -> String {
    if allow.is_empty() {
        return "-".to_string();
    }
    allow
        .iter()
        .map(|grant| grant.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// What `client add` says on stderr before it prints the token.
pub fn added_notice(name: &str, operator: bool, allow: &[Grant], path: &Path) -> String {
    let granted = if allow.is_empty() || operator {
        String::new()
    } else {
        format!(" (allowed: {})", grants_text(&normalised(allow)))
    };
    format!(
        "clawbridge client: added {name}{}{granted} to {}; its token (shown once):",
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
            allow: vec![Grant::Fs],
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
        let alice = matches(Some("Bearer alice-token-0123456789")).expect("alice");
        assert_eq!(alice.name, "alice");
        assert!(alice.has(Grant::Fs) && !alice.has(Grant::Exec) && !alice.operator);
        assert_eq!(matches(Some("Bearer s3cret-token-012345678")), None);
        assert_eq!(matches(Some("bearer s3cret-token-0123456789")), None);
        assert_eq!(matches(None), None);
    }

    use super::*;

    #[test]
    fn clients_are_added_with_a_hash_and_bad_files_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        let path = clients_path(dir.path());
        let token = ClientsFile::add(&path, "alice", false, &[]).expect("add");
        assert_eq!(token.len(), 64);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains(&token), "the token itself is never stored");
        assert!(text.contains(&token_sha256(&token)));
        assert!(
            ClientsFile::add(&path, "alice", false, &[]).is_err(),
            "names are unique"
        );
        assert!(ClientsFile::add(&path, "a b", false, &[]).is_err());
        ClientsFile::add(&path, "ops", true, &[]).expect("operator");
        let file = ClientsFile::load(&path).expect("load");
        assert_eq!(file.clients.len(), 2);
        assert!(file.clients[1].operator);
        assert!(
            !text.contains("allow"),
            "a client with no grants has no `allow`"
        );
        // Grants are set exactly, kept sorted and once each, and listed.
        ClientsFile::set_grants(&path, "alice", &[Grant::Exec, Grant::Fs, Grant::Exec])
            .expect("allow");
        let file = ClientsFile::load(&path).expect("load");
        assert_eq!(file.clients[0].allow, vec![Grant::Fs, Grant::Exec]);
        assert_eq!(
            file.render_list(),
            "alice\tclient\tfs,exec\nops\toperator\t-\n"
        );
        ClientsFile::set_grants(&path, "alice", &[]).expect("revoke");
        assert!(ClientsFile::load(&path).expect("load").clients[0]
            .allow
            .is_empty());
        let error = ClientsFile::set_grants(&path, "bob", &[Grant::Fs])
            .expect_err("unknown client")
            .to_string();
        assert!(error.contains("no client \"bob\""), "{error}");
        std::fs::write(
            &path,
            r#"{"clients": [{"name": "x", "sha256": "00", "allow": ["root"]}]}"#,
        )
        .expect("w");
        let error = ClientsFile::load(&path).expect_err("bad grant").to_string();
        assert!(error.contains("fs, exec, config"), "{error}");
        std::fs::write(&path, r#"{"clients": [{"name": "x", "sha256": "nothex"}]}"#).expect("w");
        let error = ClientsFile::load(&path).expect_err("bad hash").to_string();
        assert!(
            error.contains("clients.json") && error.contains("sha256"),
            "{error}"
        );
    }
}
