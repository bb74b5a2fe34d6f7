//! Small filesystem helpers shared by every writer: atomic replace and "unchanged" detection.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Write `bytes` to `path` through a temp file in the same folder and a rename, so readers see the
/// old content or the new one, never half a file. Parent folders are created.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let write_error = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).map_err(write_error)?;
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(write_error)?;
    temp.write_all(bytes).map_err(write_error)?;
    temp.as_file().sync_all().map_err(write_error)?;
    temp.persist(path)
        .map_err(|error| write_error(error.error))?;
    Ok(())
}

/// Write only when the bytes differ; returns `true` when the file was (re)written.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool> {
    if std::fs::read(path).is_ok_and(|current| current == bytes) {
        return Ok(false);
    }
    write_atomic(path, bytes)?;
    Ok(true)
}
