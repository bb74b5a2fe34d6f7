//! `replay --bundle OUT DIR`: a recording as one redacted, self-contained file for a bug report,
//! and its reading back (`replay OUT` takes it as it is).
//!
//! A bundle is a plain tar: the recording's transcript files and captures (every JSON document
//! redacted again by `support::redact`, by key and by value), the workspace folders the session
//! ran in (`workspace-N/`, each text file redacted the same way; a file that is not UTF-8 text is
//! left out and named), and `replay.json` naming which recorded `cwd` each folder stands for and
//! the versions the session ran on. Entries are written in name order with no owner, mode 0600
//! or 0700 and time 0, so the same recording gives the same bytes.
//!
//! Reading one back is hostile input: only regular files and folders whose names are plain
//! relative paths are unpacked (no link, no device, no `..`, no absolute name), within caps.

use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use super::recording::{Recording, MANIFEST};
use crate::error::Error;

/// Bytes a bundle unpacks to at most, and entries.
const MAX_UNPACKED_BYTES: u64 = 2 * 1024 * 1024 * 1024;
const MAX_ENTRIES: usize = 200_000;
/// Largest transcript or capture file put into a bundle.
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Largest workspace file put into a bundle, and files per workspace.
const MAX_WORKSPACE_FILE: u64 = 16 * 1024 * 1024;
const MAX_WORKSPACE_FILES: usize = 20_000;

/// What a bundle holds.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleSummary {
    pub bundle: String,
    pub files: usize,
    pub bytes: u64,
    pub workspaces: Vec<String>,
    /// Files left out, each with why.
    pub left_out: Vec<String>,
}

impl BundleSummary {
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "wrote {} ({} files, {} bytes, redacted; `clawbridge replay {}` replays it)\n",
            self.bundle, self.files, self.bytes, self.bundle
        );
        for workspace in &self.workspaces {
            out.push_str(&format!("  workspace: {workspace}\n"));
        }
        for left in &self.left_out {
            out.push_str(&format!("  left out: {left}\n"));
        }
        out
    }
}

/// Write `dir` (a recording) into the bundle `out`, with the workspaces `workspaces` names
/// (recorded `cwd` = local folder).
pub fn bundle(
    dir: &Path,
    out: &Path,
    workspaces: &[(String, PathBuf)],
) -> Result<BundleSummary, Error> {
    let recording = Recording::load(dir)?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut left_out = Vec::new();
    for path in recording_files(dir) {
        let Ok(relative) = path.strip_prefix(dir) else {
            continue;
        };
        let name = relative.display().to_string();
        if name == MANIFEST || name.starts_with("workspace-") {
            continue;
        }
        let bytes = crate::support::fs::read_file_capped(&path, MAX_FILE_BYTES)?;
        let redacted = if name.ends_with(".jsonl") {
            redact_lines(&bytes)
        } else if name.ends_with(".json") {
            let mut value: Value =
                serde_json::from_slice(&bytes).map_err(|error| Error::InvalidDocument {
                    path: path.clone(),
                    message: error.to_string(),
                })?;
            crate::support::redact::redact_value(&mut value);
            format!("{}\n", crate::support::json::to_pretty(&value)).into_bytes()
        } else if let Ok(text) = std::str::from_utf8(&bytes) {
            crate::support::redact::redact_text(text)
                .into_owned()
                .into_bytes()
        } else {
            left_out.push(format!("{name}: not text"));
            continue;
        };
        files.push((name, redacted));
    }
    // The workspaces the session ran in: each recorded `cwd` given here or already in a bundle.
    let mut manifest_workspaces = serde_json::Map::new();
    let mut named = Vec::new();
    for (index, cwd) in recording.cwds().iter().enumerate() {
        let source = recording.workspace_for(cwd, workspaces);
        let Some(source) = source else {
            left_out.push(format!(
                "the workspace {cwd}: not given (--workspace {cwd}=DIR)"
            ));
            continue;
        };
        let folder = format!("workspace-{}", index + 1);
        workspace_files(&source, &folder, &mut files, &mut left_out)?;
        manifest_workspaces.insert(cwd.clone(), json!(folder));
        named.push(format!("{cwd} (as {folder}/)"));
    }
    let manifest = json!({
        "bundle": 1,
        "madeBy": format!("clawbridge {}", env!("CARGO_PKG_VERSION")),
        "versions": versions(&recording),
        "workspaces": manifest_workspaces,
    });
    files.push((
        MANIFEST.to_string(),
        format!("{}\n", crate::support::json::to_pretty(&manifest)).into_bytes(),
    ));
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let bytes = write_tar(out, &files)?;
    Ok(BundleSummary {
        bundle: out.display().to_string(),
        files: files.len(),
        bytes,
        workspaces: named,
        left_out,
    })
}

/// Each transcript line redacted again (a line that is not JSON is left out).
fn redact_lines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split(|byte| *byte == b'\n') {
        let Ok(mut value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        crate::support::redact::redact_value(&mut value);
        if let Ok(text) = serde_json::to_vec(&value) {
            out.extend_from_slice(&text);
            out.push(b'\n');
        }
    }
    out
}

/// The recording's own files: the thread files of each connection folder and the captures,
/// regular files only.
fn recording_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && found.len() < MAX_ENTRIES {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

/// The client and Codex the session ran on, from its `initialize`.
fn versions(recording: &Recording) -> Value {
    let mut versions = serde_json::Map::new();
    for entry in recording.entries() {
        let message = &entry.message;
        if let Some(client) = message["params"]["clientInfo"].as_object() {
            versions.insert(
                "client".into(),
                json!(format!(
                    "{} {}",
                    client.get("name").and_then(Value::as_str).unwrap_or("?"),
                    client.get("version").and_then(Value::as_str).unwrap_or("?")
                )),
            );
        }
        if let Some(agent) = message["result"]["userAgent"].as_str() {
            versions.insert(
                "codexUserAgent".into(),
                json!(crate::support::redact::redact_text(agent)),
            );
        }
        if let Some(cli) = message["params"]["thread"]["cliVersion"].as_str() {
            versions.insert("codex".into(), json!(cli));
        }
    }
    Value::Object(versions)
}

/// A workspace folder's files under `folder/`, text redacted, within caps.
fn workspace_files(
    source: &Path,
    folder: &str,
    files: &mut Vec<(String, Vec<u8>)>,
    left_out: &mut Vec<String>,
) -> Result<(), Error> {
    let (found, others) = super::recording::workspace_files(source, MAX_WORKSPACE_FILES)?;
    for other in others {
        left_out.push(format!("{folder}/{}: not a regular file", other.display()));
    }
    for (relative, path) in found {
        let name = format!("{folder}/{}", relative.display());
        match crate::support::fs::read_file_capped(&path, MAX_WORKSPACE_FILE) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => files.push((
                    name,
                    crate::support::redact::redact_text(&text)
                        .into_owned()
                        .into_bytes(),
                )),
                Err(_) => left_out.push(format!("{name}: not UTF-8 text")),
            },
            Err(error) => left_out.push(format!("{name}: {error}")),
        }
    }
    Ok(())
}

/// The tar, deterministic (sorted names, no owner, time 0), written to a temp file beside `out`
/// and renamed; its size.
fn write_tar(out: &Path, files: &[(String, Vec<u8>)]) -> Result<u64, Error> {
    let failed = |source: std::io::Error| Error::Write {
        path: out.to_path_buf(),
        source,
    };
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, name, bytes.as_slice())
            .map_err(failed)?;
    }
    let data = builder.into_inner().map_err(failed)?;
    crate::support::fs::write_atomic(out, &data)?;
    Ok(data.len() as u64)
}

/// Unpack the bundle `file` into `into` (a fresh folder); refused, naming the entry, when an
/// entry is not a plain file or folder under a plain relative name.
pub fn unpack(file: &Path, into: &Path) -> Result<(), Error> {
    let refused = |message: String| Error::InvalidDocument {
        path: file.to_path_buf(),
        message,
    };
    let opened = crate::support::fs::open_file_capped(file, MAX_UNPACKED_BYTES)?;
    let mut archive = tar::Archive::new(opened);
    let mut total = 0u64;
    let entries = archive
        .entries()
        .map_err(|error| refused(format!("not a bundle: {error}")))?;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(refused(format!("more than {MAX_ENTRIES} entries")));
        }
        let mut entry = entry.map_err(|error| refused(format!("not a bundle: {error}")))?;
        let name = entry
            .path()
            .map_err(|error| refused(format!("an entry's name: {error}")))?
            .into_owned();
        let plain = !name.as_os_str().is_empty()
            && name
                .components()
                .all(|part| matches!(part, Component::Normal(_)));
        if !plain {
            return Err(refused(format!(
                "the entry `{}` leaves the bundle",
                name.display()
            )));
        }
        let kind = entry.header().entry_type();
        let target = into.join(&name);
        if kind.is_dir() {
            crate::support::fs::create_private_dir(&target).map_err(|source| Error::Write {
                path: target.clone(),
                source,
            })?;
            continue;
        }
        if !kind.is_file() {
            return Err(refused(format!(
                "the entry `{}` is not a regular file (links and devices are refused)",
                name.display()
            )));
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        total = total.saturating_add(size);
        if total > MAX_UNPACKED_BYTES {
            return Err(refused(format!(
                "it unpacks to more than {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        let mut bytes = Vec::new();
        entry
            .by_ref()
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(|error| refused(format!("the entry `{}`: {error}", name.display())))?;
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        crate::support::fs::write_private(&target, &bytes)?;
    }
    Ok(())
}
