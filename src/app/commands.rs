//! The translation commands, implemented once: `params`, `context` and `prompt` on the CLI, and
//! `bridge.params`, `bridge.context` and `bridge.prompt` on the bridge API, call these.
//!
//! The faces only parse their input (flags or JSON) and print or send the result; the live
//! facts a command needs (host, warning ledger, skill cache) come in through [`TranslateOptions`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::app::context::{context_report, ContextReport};
use crate::app::state::WarningLedger;
use crate::codex::protocol::params::CodexParams;
use crate::config::{Harness, PromptMode, Run};
use crate::error::{Error, Result};
use crate::render::adapter::{HostRuntime, PromptOptions};
use crate::render::provider::ProviderContribution;
use crate::render::SystemPrompt;
use crate::skills::{HostFacts, SkillCache};
use crate::translate::{translate, TranslateOptions};

/// The live facts of this process for a translation: the host, the `once` ledger under
/// `state_dir` (the platform state dir when `None`), an optional skill cache and bootstrap hook.
pub fn translate_options(
    state_dir: Option<&Path>,
    bootstrap_hook: Option<String>,
    skill_cache: Option<Arc<SkillCache>>,
) -> TranslateOptions {
    let ledger = match state_dir
        .map(Path::to_path_buf)
        .or_else(WarningLedger::default_state_dir)
    {
        Some(dir) => WarningLedger::in_dir(&dir),
        None => WarningLedger::ephemeral(),
    };
    TranslateOptions {
        host: HostFacts::from_process(),
        ledger: Arc::new(ledger),
        skill_cache,
        bootstrap_hook,
    }
}

/// Read and validate a run document file, warning about config keys clawbridge does not read.
pub fn load_run_file(path: &Path) -> Result<Run> {
    let run = Run::load(path)?;
    warn_unread_keys(&run, &path.display().to_string());
    Ok(run)
}

/// One warning per config key the run carries that clawbridge does not read.
pub fn warn_unread_keys(run: &Run, source: &str) {
    for key in run.config.unknown_keys() {
        tracing::warn!("{source}: config key `{key}` is not read by clawbridge");
    }
}

/// The exact Codex params for a run (`params`, `bridge.params`). A preview: a `once` notice it
/// shows is still shown by the next turn actually sent.
pub fn params(run: &Run, options: &TranslateOptions) -> Result<CodexParams> {
    if run.harness == Harness::Embedded {
        return Err(Error::Unsupported {
            path: run.source.clone(),
            field: "harness",
            message: "\"embedded\" runs have no Codex params; use `context` (the OpenClaw system prompt comes from `prompt`)".to_string(),
        });
    }
    Ok(translate(run, &options.previewing())?.codex_params(run))
}

/// Refuse a run that Codex cannot execute (`run`, `capture`, `bridge.runStart`).
pub fn require_codex(run: &Run) -> Result<()> {
    if run.harness == Harness::Embedded {
        return Err(Error::Unsupported {
            path: run.source.clone(),
            field: "harness",
            message: "\"embedded\" runs are not executed by Codex".to_string(),
        });
    }
    Ok(())
}

/// What each bootstrap file, skill and tool costs and where it lands (`context`,
/// `bridge.context`).
pub fn context(run: &Run, options: &TranslateOptions, detail: bool) -> Result<ContextReport> {
    let translation = translate(run, &options.previewing())?;
    Ok(context_report(run, &translation, detail))
}

/// What `prompt` / `bridge.prompt` render besides the run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSettings {
    /// Override the run's prompt mode.
    #[serde(default)]
    pub mode: Option<PromptMode>,
    /// A provider contribution merged after the built-in overlay.
    #[serde(skip)]
    pub provider: Option<ProviderContribution>,
}

/// OpenClaw's own system prompt for a run, as non-Codex harnesses receive it (`prompt`,
/// `bridge.prompt`).
pub fn prompt(
    run: &Run,
    options: &TranslateOptions,
    settings: &PromptSettings,
) -> Result<SystemPrompt> {
    // OpenClaw's own prompt is what non-Codex harnesses get: route the run that way.
    let mut run = run.clone();
    run.harness = Harness::Embedded;
    // `--mode` is the run's prompt mode, so the bootstrap filters follow it too (minimal: only
    // AGENTS.md and TOOLS.md), exactly as a `promptMode` in the document would.
    if let Some(mode) = settings.mode {
        run.prompt_mode = mode;
    }
    let translation = translate(&run, &options.previewing())?;
    Ok(translation.system_prompt(
        &run,
        &PromptOptions {
            mode: settings.mode,
            host: HostRuntime::from_process(),
            provider: settings.provider.clone(),
            before_prompt_build: None,
            detect_repo_root: true,
        },
    ))
}

/// Read a provider contribution file (`prompt --provider`).
pub fn load_provider(path: &Path) -> Result<ProviderContribution> {
    let bytes = crate::support::fs::read_file_capped(path, 1024 * 1024)?;
    serde_json::from_slice(&bytes).map_err(|error| Error::InvalidDocument {
        path: path.to_path_buf(),
        message: format!("not a provider contribution: {error}"),
    })
}

/// The state dir a command uses: the flag, else the platform default.
pub fn state_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    flag.or_else(WarningLedger::default_state_dir)
        .ok_or_else(|| Error::InvalidArgument {
            flag: "--state-dir".to_string(),
            message: "no platform state directory; pass one".to_string(),
        })
}
