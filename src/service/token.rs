//! The bearer token of every listener (`serve` and the `app-server` endpoint): one rule for
//! what a token is, one way to read a token file and one way to create it.
//!
//! A token is given (`--token`, `CLAWBRIDGE_TOKEN`) or read from its file (`<state-dir>/token`
//! for `serve`, `--token-file` or `<state-dir>/app-server-token` for the endpoint), generated
//! once (mode 0600, through a temp file renamed into place without replacing one) and reused on
//! every restart, so clients keep working. A token file that is a symbolic link is refused before
//! anything reads or changes it; one that others may read is tightened to 0600, loudly (anyone
//! holding the token runs commands as the operator through Codex).

use std::path::{Path, PathBuf};

/// Random bytes in a generated token (hex-encoded: 64 URL-safe characters).
const GENERATED_BYTES: usize = 32;
/// The token file is tiny; anything longer is not ours.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// Why a token or its file cannot be used (the message names the flag or the file).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TokenError(String);

/// A token read from its file, or created in it.
#[derive(Clone, Debug)]
pub struct TokenFile {
    pub path: PathBuf,
    pub token: String,
    /// Created just now (the listener says where it is).
    pub created: bool,
}

/// A token must travel in an HTTP header: visible ASCII without spaces, and long enough
/// ([`token_problem`] is the rule); `source` names where it came from.
pub fn validate(token: &str, source: &str) -> Result<(), TokenError> {
    match token_problem(token) {
        Some(problem) => Err(TokenError(format!("{source}: {problem}"))),
        None => Ok(()),
    }
}

/// A fresh token from the operating system's random source.
pub fn generate() -> Result<String, TokenError> {
    crate::support::hex::random(GENERATED_BYTES)
        .map_err(|error| TokenError(format!("no random source for a token: {error}")))
}

/// The token in `path`, created (0600, its folder 0700) when there is none.
pub fn load_or_create(path: &Path) -> Result<TokenFile, TokenError> {
    let found = |token| TokenFile {
        path: path.to_path_buf(),
        token,
        created: false,
    };
    match read_token_file(path)? {
        Some(token) => Ok(found(token)),
        None => {
            let token = generate()?;
            match write_new_token(path, &token)? {
                // Another process created it first: use theirs.
                false => read_token_file(path)?
                    .map(found)
                    .ok_or_else(|| file_error(path, "vanished while being created".into())),
                true => Ok(TokenFile {
                    path: path.to_path_buf(),
                    token,
                    created: true,
                }),
            }
        }
    }
}

/// The token in `path`, which must exist (a client reading a listener's token).
pub fn read_existing(path: &Path) -> Result<String, TokenError> {
    read_token_file(path)?.ok_or_else(|| file_error(path, "no such token file".into()))
}

fn file_error(path: &Path, message: String) -> TokenError {
    TokenError(format!("{}: {message}", path.display()))
}

fn read_token_file(path: &Path) -> Result<Option<String>, TokenError> {
    use crate::support::fs::ReadRefusal;
    // A link is refused before anything reads or chmods through it: a planted
    // `token -> ~/.ssh/id_ed25519` must not be read as a token nor have its target's mode changed.
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(file_error(
            path,
            "is a symbolic link; refusing to follow it (replace it with the token file itself, mode 0600, or remove it and a new token is written)"
                .into(),
        ));
    }
    let bytes = match crate::support::fs::read_capped_anywhere(path, None, MAX_TOKEN_FILE_BYTES) {
        Ok(bytes) => bytes,
        Err(ReadRefusal::NotFound) => return Ok(None),
        Err(refusal) => {
            return Err(file_error(
                path,
                format!("cannot read the token: {refusal}"),
            ))
        }
    };
    tighten_permissions(path)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| file_error(path, "the token file is not text".into()))?;
    let token = text.trim_end_matches(['\n', '\r']);
    validate(token, &path.display().to_string())?;
    Ok(Some(token.to_string()))
}

/// A token file others can read is tightened to 0600, loudly.
#[cfg(unix)]
fn tighten_permissions(path: &Path) -> Result<(), TokenError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|error| file_error(path, error.to_string()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            "{}: was readable by others (mode {:o}); now 0600. Consider replacing the token (one others could read may be theirs already).",
            path.display(),
            mode & 0o777
        );
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|error| file_error(path, error.to_string()))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn tighten_permissions(_path: &Path) -> Result<(), TokenError> {
    Ok(())
}

/// Write the token through a 0600 temp file renamed into place without replacing an existing
/// file; `false` when another process created one first.
fn write_new_token(path: &Path, token: &str) -> Result<bool, TokenError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let io_error = |error: std::io::Error| file_error(path, format!("cannot write: {error}"));
    crate::support::fs::create_private_dir(dir).map_err(io_error)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".token")
        .tempfile_in(dir)
        .map_err(io_error)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io_error)?;
    }
    temp.write_all(format!("{token}\n").as_bytes())
        .map_err(io_error)?;
    temp.as_file().sync_all().map_err(io_error)?;
    match temp.persist_noclobber(path) {
        Ok(_) => Ok(true),
        Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(io_error(error.error)),
    }
}

/// Tokens shorter than this are refused: they can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why `token` cannot be a bearer token (it travels in an HTTP header: visible ASCII without
/// spaces, and long enough), or `None` when it can.
pub fn token_problem(token: &str) -> Option<String> {
    if let Some(bad) = token.chars().find(|c| !c.is_ascii_graphic()) {
        return Some(format!(
            "the token may hold only visible ASCII characters (no spaces or control characters); found {bad:?}"
        ));
    }
    if token.len() < MIN_TOKEN_LEN {
        return Some(format!(
            "the token must be at least {MIN_TOKEN_LEN} characters long (it has {})",
            token.len()
        ));
    }
    None
}

/// The endpoint's token file in a state dir (`app-server-token`; `--token-file` names another).
pub fn endpoint_token_path(state_dir: &std::path::Path) -> std::path::PathBuf {
    state_dir.join("app-server-token")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_must_be_header_safe_and_long_enough() {
        assert!(validate("0123456789abcdef", "--token").is_ok());
        assert!(validate("short", "--token").is_err());
        assert!(validate("0123456789abcdef\u{1}", "--token").is_err());
        assert!(validate("0123456789 abcdef", "--token").is_err());
        assert!(validate("0123456789abcdéf", "--token").is_err());
        let generated = generate().expect("token");
        assert_eq!(generated.len(), 64);
        assert!(validate(&generated, "generated").is_ok());
        assert_ne!(generated, generate().expect("token"));
    }

    #[test]
    fn the_token_file_is_created_once_and_reused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        let first = load_or_create(&path).expect("create");
        assert!(first.created);
        let again = load_or_create(&path).expect("reuse");
        assert!(!again.created);
        assert_eq!(first.token, again.token);
    }

    #[cfg(unix)]
    #[test]
    fn a_bad_or_open_token_file_is_named_or_tightened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "short\n").expect("write");
        let error = load_or_create(&path).expect_err("too short");
        assert!(
            error.to_string().contains(&path.display().to_string()),
            "{error}"
        );
        std::fs::write(&path, "0123456789abcdef0123\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let file = load_or_create(&path).expect("reuse");
        assert_eq!(
            (file.token.as_str(), file.created),
            ("0123456789abcdef0123", false)
        );
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
