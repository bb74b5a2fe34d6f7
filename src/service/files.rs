//! The operator's small JSON files in the state dir (`clients.json`, `accounts.json`): read as
//! a regular file (never through a link), capped, a bad one an error naming the file and the
//! shape expected; written 0600 through a temp file and a rename, their folder made private.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// `path` read as `T` (missing: `T::default()`), at most `cap` bytes; `expected` names the
/// shape in the error of a file that is not one.
pub fn read<T: DeserializeOwned + Default>(path: &Path, cap: u64, expected: &str) -> Result<T> {
    use crate::support::fs::ReadRefusal;
    let invalid = |message: String| Error::InvalidDocument {
        path: path.to_path_buf(),
        message,
    };
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(invalid("is a symbolic link; refusing to follow it".into()));
    }
    let bytes = match crate::support::fs::read_capped_anywhere(path, None, cap) {
        Ok(bytes) => bytes,
        Err(ReadRefusal::NotFound) => return Ok(T::default()),
        Err(refusal) => return Err(invalid(refusal.to_string())),
    };
    serde_json::from_slice(&bytes)
        .map_err(|error| invalid(format!("{error} (expected {expected})")))
}

/// `value` written to `path` as pretty JSON (0600, through a temp file and a rename), its
/// folder made private.
pub fn write<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    if let Some(dir) = path.parent() {
        crate::support::fs::create_private_dir(dir).map_err(|source| Error::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|error| Error::InvalidDocument {
        path: path.to_path_buf(),
        message: error.to_string(),
    })? + "\n";
    crate::support::fs::write_private(path, text.as_bytes())
}
