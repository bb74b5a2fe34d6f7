//! The `agent:bootstrap` hook: an external command that may replace the bootstrap file list.

use serde::{Deserialize, Serialize};

use std::path::Path;
use std::time::Duration;

use super::load::{filter_reason, setup_complete};
use super::{BootstrapFile, FileContent, LoadedWorkspace, OmittedFile};
use crate::config::Run;
use crate::error::Result;

/// The hook's whole exchange (input, output, exit) must end within this.
const HOOK_TIMEOUT: Duration = Duration::from_secs(30);
/// The hook prints at most this much (eight 2 MiB files and their JSON).
const MAX_HOOK_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

fn stderr_note(tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; stderr: {tail}")
    }
}

/// Run the `agent:bootstrap` hook command (docs/routing.md §3.5): it gets the file list as JSON on
/// stdin and prints the replacement list. Afterwards entries with a blank path are dropped (with a
/// warning), duplicates by normalized path are dropped (first wins), synthetic ids such as
/// `db:AGENT/SOUL.md` are kept verbatim, and the session filter and BOOTSTRAP.md rule apply again.
pub fn apply_bootstrap_hook(
    run: &Run,
    loaded: LoadedWorkspace,
    command: &str,
) -> Result<LoadedWorkspace> {
    #[derive(Serialize, Deserialize)]
    struct HookFile {
        name: Option<String>,
        path: String,
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        missing: bool,
    }
    let failed = |message: String| crate::Error::Hook {
        command: command.to_string(),
        message,
    };
    let files: Vec<HookFile> = loaded
        .files
        .iter()
        .map(|file| HookFile {
            name: Some(file.name.clone()),
            path: file.path.clone(),
            content: file.text().map(str::to_string),
            missing: file.text().is_none(),
        })
        .collect();
    let input = serde_json::json!({
        "event": "agent:bootstrap",
        "workspaceDir": run.display_path(&run.workspace),
        "agentId": run.agent_id,
        "sessionKey": run.session_key,
        "sessionId": run.session_id,
        "config": run.config.raw(),
        "files": files,
    });
    let output = crate::support::process::run_shell_bounded(
        command,
        input.to_string().as_bytes(),
        HOOK_TIMEOUT,
        MAX_HOOK_OUTPUT_BYTES,
    )
    .map_err(|error| failed(error.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!(
            "exited with {}{}",
            output.status,
            stderr_note(&output.stderr_tail)
        )));
    }
    let value: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| failed(format!("printed invalid JSON: {error}")))?;
    let list = match value {
        serde_json::Value::Object(mut object) => {
            object.remove("files").unwrap_or(serde_json::Value::Null)
        }
        other => other,
    };
    let returned: Vec<HookFile> = serde_json::from_value(list).map_err(|error| {
        failed(format!(
            "expected {{\"files\": [{{name, path, content}}]}}: {error}"
        ))
    })?;
    let mut result = LoadedWorkspace {
        omitted: loaded.omitted,
        warnings: loaded.warnings,
        files: Vec::new(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for file in returned {
        let path = file.path.trim().to_string();
        if path.is_empty() {
            let warning = format!(
                "bootstrap hook returned an entry with an empty path (name {:?}); dropped",
                file.name.unwrap_or_default()
            );
            tracing::warn!("{warning}");
            result.warnings.push(warning);
            continue;
        }
        let synthetic = path.contains(':') && !path.starts_with('/');
        let key = if synthetic {
            path.clone()
        } else {
            crate::support::fs::normalize(Path::new(&path))
                .to_string_lossy()
                .into_owned()
        };
        if !seen.insert(key) {
            continue;
        }
        let name = file
            .name
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| path.rsplit(['/', '\\']).next().unwrap_or(&path).to_string());
        if let Some(reason) = filter_reason(run, &name) {
            result.omitted.push(OmittedFile {
                name,
                reason: reason.to_string(),
            });
            continue;
        }
        if name == "BOOTSTRAP.md" && setup_complete(run) {
            continue;
        }
        let content = match (file.content, file.missing) {
            (Some(content), _) => FileContent::Present(content),
            (None, _) => FileContent::Missing,
        };
        result.files.push(BootstrapFile {
            name,
            path,
            content,
        });
    }
    Ok(result)
}
