//! Loading the bootstrap candidates: exact names, the run filters, confined and capped reads.

use std::collections::BTreeMap;
use std::path::Path;

use super::{
    BootstrapFile, FileContent, LoadedWorkspace, OmittedFile, BOOTSTRAP_FILE_NAMES,
    MAX_BOOTSTRAP_FILE_BYTES,
};
use crate::config::{Run, SessionKind, Trigger};
use crate::support::fs::Beneath;

/// Load the bootstrap files of `run` (docs/routing.md §3.1-§3.4).
pub fn load_bootstrap_files(run: &Run) -> LoadedWorkspace {
    let mut loaded = LoadedWorkspace::default();
    let workspace = &run.workspace;
    let canonical_workspace = crate::support::fs::resolve_real(workspace);
    // Inside the workspace (a symlink may point elsewhere in it) and, for a confined run, inside
    // the service's roots; the reads stay beneath the open workspace folder.
    let allowed = |real: &Path| {
        real.starts_with(&canonical_workspace)
            && run.roots.as_ref().is_none_or(|roots| roots.contains(real))
    };
    let beneath = Beneath::open(workspace, Some(&canonical_workspace), &allowed);
    let entries = directory_entries(workspace);
    for name in BOOTSTRAP_FILE_NAMES {
        let keep_reason = filter_reason(run, name);
        if let Some(reason) = keep_reason {
            // Only mention files that exist; an absent MEMORY.md/BOOTSTRAP.md is not a candidate.
            if entries.contains_key(name) || !matches!(name, "MEMORY.md" | "BOOTSTRAP.md") {
                loaded.omitted.push(OmittedFile {
                    name: name.to_string(),
                    reason: reason.to_string(),
                });
            }
            continue;
        }
        match name {
            "MEMORY.md" if !entries.contains_key(name) => continue,
            "BOOTSTRAP.md" if !entries.contains_key(name) => continue,
            "BOOTSTRAP.md" => {
                if let Some(reason) = setup_complete_reason_in(run, &beneath) {
                    loaded.omitted.push(OmittedFile {
                        name: name.to_string(),
                        reason: reason.to_string(),
                    });
                    continue;
                }
            }
            _ => {}
        }
        let path = workspace.join(name);
        let content = read_bootstrap_file(&beneath, name, &path, &mut loaded.warnings);
        loaded.files.push(BootstrapFile {
            name: name.to_string(),
            path: run.display_path(&path),
            content,
        });
    }
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    loaded
}

/// The filters of docs/routing.md §3.2-§3.3; `Some(reason)` drops the file. They compose: a
/// file stays only if every filter that applies keeps it (OpenClaw filters by session key, then
/// by context mode), so a lightweight subagent heartbeat keeps nothing and a lightweight
/// heartbeat with a minimal prompt keeps HEARTBEAT.md. The session filter follows the session
/// key, as OpenClaw's does: `promptMode: minimal` alone shapes the prompt, not the file list.
pub(super) fn filter_reason(run: &Run, name: &str) -> Option<&'static str> {
    if run.lightweight {
        let kept = run.trigger == Trigger::Heartbeat && name == "HEARTBEAT.md";
        if !kept {
            return Some(if run.trigger == Trigger::Heartbeat {
                "lightweight heartbeat runs load only HEARTBEAT.md"
            } else {
                "lightweight runs load no bootstrap files"
            });
        }
    }
    if run.session_kind == SessionKind::Subagent && !matches!(name, "AGENTS.md" | "TOOLS.md") {
        return Some("subagent sessions load only AGENTS.md and TOOLS.md");
    }
    if name == "HEARTBEAT.md"
        && run.trigger != Trigger::Heartbeat
        && run.config.drops_heartbeat_file(&run.agent_id)
    {
        return Some(
            "heartbeats are disabled for this agent or includeSystemPromptSection is false",
        );
    }
    None
}

/// Exact-name directory listing (case-sensitive even on case-insensitive filesystems).
fn directory_entries(dir: &Path) -> BTreeMap<String, ()> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .filter_map(|entry| entry.file_name().into_string().ok())
                .map(|name| (name, ()))
                .collect()
        })
        .unwrap_or_default()
}

/// Largest workspace state file read (OpenClaw's is a few hundred bytes).
const MAX_WORKSPACE_STATE_BYTES: u64 = 64 * 1024;

/// Why BOOTSTRAP.md is no longer injected, or `None` while setup is still pending
/// (docs/routing.md §3.4). In order: the run document says so (`setupComplete`); OpenClaw
/// recorded it (`openclaw-workspace-state.json` at the workspace root, else the legacy
/// `.openclaw/workspace-state.json`; `setupCompletedAt`, legacy `onboardingCompletedAt`); or the
/// workspace already holds user content (`memory/`, `MEMORY.md`, a `skills/<dir>/SKILL.md`),
/// which OpenClaw itself counts as set up.
pub(super) fn setup_complete_reason(run: &Run) -> Option<&'static str> {
    if let Some(stated) = run.setup_complete {
        return stated.then_some("the run document says workspace setup is complete");
    }
    let canonical_workspace = crate::support::fs::resolve_real(&run.workspace);
    let allowed = |real: &Path| {
        real.starts_with(&canonical_workspace)
            && run.roots.as_ref().is_none_or(|roots| roots.contains(real))
    };
    setup_complete_reason_in(
        run,
        &Beneath::open(&run.workspace, Some(&canonical_workspace), &allowed),
    )
}

/// [`setup_complete_reason`] with the workspace already open.
fn setup_complete_reason_in(run: &Run, beneath: &Beneath) -> Option<&'static str> {
    if let Some(stated) = run.setup_complete {
        return stated.then_some("the run document says workspace setup is complete");
    }
    let workspace = &run.workspace;
    let read_state = |relative: &Path| {
        let bytes = beneath
            .read_capped(relative, MAX_WORKSPACE_STATE_BYTES)
            .ok()?;
        serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .filter(serde_json::Value::is_object)
    };
    // The root file wins whenever it parses; the legacy one is only a fallback.
    let state = read_state(Path::new(WORKSPACE_STATE_FILE))
        .or_else(|| read_state(&Path::new(".openclaw").join(LEGACY_WORKSPACE_STATE_FILE)));
    let recorded = state.is_some_and(|state| {
        ["setupCompletedAt", "onboardingCompletedAt"]
            .iter()
            .any(|key| {
                state
                    .get(key)
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|stamp| !stamp.trim().is_empty())
            })
    });
    if recorded {
        return Some("workspace setup is complete");
    }
    has_user_content(workspace, beneath.allowed())
        .then_some("the workspace already holds user content (memory/, MEMORY.md or a skill)")
}

/// OpenClaw's evidence that a workspace is in use: a `memory/` folder, a root `MEMORY.md` (exact
/// name), or a `skills/<dir>/SKILL.md`. Only existence is checked; nothing is read.
fn has_user_content(workspace: &Path, allowed: &dyn Fn(&Path) -> bool) -> bool {
    let inside = |path: &Path| {
        path.symlink_metadata().is_ok() && allowed(&crate::support::fs::resolve_real(path))
    };
    if inside(&workspace.join("memory")) || directory_entries(workspace).contains_key("MEMORY.md") {
        return true;
    }
    let Ok(skills) = std::fs::read_dir(workspace.join("skills")) else {
        return false;
    };
    skills
        .filter_map(|entry| entry.ok())
        .take(MAX_SKILL_DIRS_CHECKED)
        .any(|entry| entry.path().is_dir() && inside(&entry.path().join("SKILL.md")))
}

/// The workspace state file OpenClaw 2026.6 writes at the workspace root.
const WORKSPACE_STATE_FILE: &str = "openclaw-workspace-state.json";
/// Its older home, still read as a fallback.
const LEGACY_WORKSPACE_STATE_FILE: &str = "workspace-state.json";
/// How many `skills/` entries the user-content check looks at.
const MAX_SKILL_DIRS_CHECKED: usize = 4096;

/// True once BOOTSTRAP.md is no longer injected ([`setup_complete_reason`]).
pub(super) fn setup_complete(run: &Run) -> bool {
    setup_complete_reason(run).is_some()
}

/// `name` read beneath the workspace; `path` (the same file) names it in warnings.
fn read_bootstrap_file(
    beneath: &Beneath,
    name: &str,
    path: &Path,
    warnings: &mut Vec<String>,
) -> FileContent {
    use crate::support::fs::ReadRefusal;
    match beneath.read_capped(Path::new(name), MAX_BOOTSTRAP_FILE_BYTES) {
        Ok(bytes) => FileContent::Present(decode_lossy(path, bytes, warnings)),
        // A dangling symlink is missing too.
        Err(ReadRefusal::NotFound) => FileContent::Missing,
        Err(ReadRefusal::Outside) => {
            warnings.push(format!(
                "{}: symlink leaves the workspace; not read",
                path.display()
            ));
            FileContent::Unreadable("symlink leaves the workspace".to_string())
        }
        Err(ReadRefusal::TooLarge { .. }) => {
            warnings.push(format!(
                "{}: over the 2 MiB read limit; not read",
                path.display()
            ));
            FileContent::Unreadable("larger than 2 MiB".to_string())
        }
        Err(refusal) => {
            warnings.push(format!("{}: {refusal}; not read", path.display()));
            FileContent::Unreadable(refusal.to_string())
        }
    }
}

/// UTF-8 with U+FFFD for invalid sequences, plus a warning naming the file.
pub fn decode_lossy(path: &Path, bytes: Vec<u8>, warnings: &mut Vec<String>) -> String {
    match crate::support::text::utf8(&bytes) {
        // A copy is cheaper than the standard library's validation of non-ASCII text.
        Some(text) => text.to_owned(),
        None => {
            warnings.push(format!(
                "{}: invalid UTF-8 replaced with U+FFFD",
                path.display()
            ));
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }
}
