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
        match crate::config::openclaw::nearest_known_key(&key) {
            Some(near) => tracing::warn!(
                "{source}: config key `{key}` is not read by clawbridge (did you mean `{near}`?)"
            ),
            None => tracing::warn!("{source}: config key `{key}` is not read by clawbridge"),
        }
    }
}

/// " (did you mean `x`?)" when a known name is near `given`, else nothing.
fn did_you_mean<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    crate::support::suggest::closest(given, known)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default()
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
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSettings {
    /// Override the run's prompt mode.
    #[serde(default)]
    pub mode: Option<PromptMode>,
    /// A provider contribution merged after the built-in overlay.
    #[serde(skip)]
    pub provider: Option<ProviderContribution>,
    /// `false` for a provider without cache-boundary support: the marker is dropped and the
    /// halves are joined by one blank line (docs/system-prompt.md, P9).
    #[serde(default = "default_true")]
    pub cache_boundary: bool,
    /// The legacy `before_prompt_build` hook command (`prompt --before-prompt-build`). Never
    /// taken from an API client: it runs a command.
    #[serde(skip)]
    pub before_prompt_build: Option<String>,
}

impl Default for PromptSettings {
    fn default() -> Self {
        Self {
            mode: None,
            provider: None,
            cache_boundary: true,
            before_prompt_build: None,
        }
    }
}

fn default_true() -> bool {
    true
}

/// The hook's whole exchange must end within this, and print at most this much.
const PROMPT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
const MAX_PROMPT_HOOK_OUTPUT_BYTES: usize = 4 * 1024 * 1024;

/// Run the `before_prompt_build` hook: it gets `{event, agentId, sessionKey, workspaceDir,
/// prompt: {stablePrefix, dynamicSuffix}}` on stdin and prints `{}` (keep), or one of
/// `{"systemPrompt"}` (replace), `{"prependSystemContext"}`, `{"appendSystemContext"}`, with an
/// optional `"plugin"` name for the injected block.
pub fn run_before_prompt_build(
    run: &Run,
    prompt: &SystemPrompt,
    command: &str,
) -> Result<(String, crate::render::hooks::BeforePromptBuild)> {
    use crate::render::hooks::BeforePromptBuild;
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct HookAnswer {
        #[serde(default)]
        plugin: Option<String>,
        #[serde(default)]
        system_prompt: Option<String>,
        #[serde(default)]
        prepend_system_context: Option<String>,
        #[serde(default)]
        append_system_context: Option<String>,
    }
    let failed = |message: String| Error::Hook {
        command: command.to_string(),
        message,
    };
    let input = serde_json::json!({
        "event": "before_prompt_build",
        "agentId": run.agent_id,
        "sessionKey": run.session_key,
        "workspaceDir": run.display_path(&run.workspace),
        "prompt": prompt,
    });
    let output = crate::support::process::run_shell_bounded(
        command,
        input.to_string().as_bytes(),
        PROMPT_HOOK_TIMEOUT,
        MAX_PROMPT_HOOK_OUTPUT_BYTES,
    )
    .map_err(|error| failed(error.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!("exited with {}", output.status)));
    }
    let answer: HookAnswer = serde_json::from_slice(&output.stdout).map_err(|error| {
        failed(format!(
            "expected {{}} or one of systemPrompt, prependSystemContext, appendSystemContext: {error}"
        ))
    })?;
    let plugin = answer
        .plugin
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "before_prompt_build".to_string());
    if plugin.len() > 128
        || plugin
            .chars()
            .any(|ch| ch.is_control() || matches!(ch, '"' | '<' | '>' | '`'))
    {
        return Err(failed(
            "`plugin` must be a short name without quotes, tags or control characters".to_string(),
        ));
    }
    let action = match (
        answer.system_prompt,
        answer.prepend_system_context,
        answer.append_system_context,
    ) {
        (None, None, None) => BeforePromptBuild::Keep,
        (Some(text), None, None) => BeforePromptBuild::Replace(text),
        (None, Some(text), None) => BeforePromptBuild::Prepend(text),
        (None, None, Some(text)) => BeforePromptBuild::Append(text),
        _ => {
            return Err(failed(
                "answered with more than one of systemPrompt, prependSystemContext, appendSystemContext".to_string(),
            ))
        }
    };
    Ok((plugin, action))
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
    let mut prompt = translation.system_prompt(
        &run,
        &PromptOptions {
            mode: settings.mode,
            host: HostRuntime::from_process(),
            provider: settings.provider.clone(),
            before_prompt_build: None,
            detect_repo_root: true,
        },
    );
    if let Some(command) = &settings.before_prompt_build {
        let (plugin, action) = run_before_prompt_build(&run, &prompt, command)?;
        prompt = crate::render::hooks::apply_before_prompt_build(prompt, &plugin, action);
    }
    if !settings.cache_boundary {
        prompt = SystemPrompt {
            stable_prefix: prompt.text_without_boundary(),
            dynamic_suffix: String::new(),
            has_boundary: false,
        };
    }
    Ok(prompt)
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

/// What `clawbridge account` says of an API key: the account the endpoint files its logins
/// under, its name when an account lists the key, and that account's Codex home under the
/// state dir.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountOfKey {
    /// `apiKey-1a2b3c4d5e6f7a8b`: the key's fingerprint, as the captures and the logs name it.
    pub account: String,
    /// The named account that lists the key (`clawbridge account add`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What its logins are filed under (its home, threads, budget): the named account's first
    /// key's fingerprint, else the key's own.
    pub filed_as: String,
    /// Whether the key was removed from its named account (its logins are refused).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    pub home: PathBuf,
    /// Whether the endpoint made that home already (the account logged in before).
    pub home_exists: bool,
}

/// The fingerprint of an OpenAI API key (never printed, never kept): what the endpoint takes
/// for an `apiKey` login.
pub fn key_fingerprint(key: &str) -> Result<String> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::InvalidArgument {
            flag: "key".to_string(),
            message: "no key was given (empty)".to_string(),
        });
    }
    let login = serde_json::json!({"type": "apiKey", "apiKey": key});
    let identity =
        crate::Identity::from_login(&login).map_err(|refusal| Error::InvalidArgument {
            flag: "key".to_string(),
            message: refusal.to_string(),
        })?;
    Ok(identity.key())
}

/// A fingerprint given on the command line (`--fingerprint`), checked.
pub fn given_fingerprint(fingerprint: &str) -> Result<String> {
    if crate::support::credential::is_fingerprint(fingerprint) {
        Ok(fingerprint.to_string())
    } else {
        Err(Error::InvalidArgument {
            flag: "--fingerprint".to_string(),
            message: format!(
                "{fingerprint:?} is not a fingerprint (a kind, a dash and hex digits: `apiKey-1a2b3c4d5e6f7a8b`, as `app-server status` shows it)"
            ),
        })
    }
}

/// `clawbridge account`: the account an OpenAI API key maps to (never printed, never kept),
/// the same fingerprint the endpoint takes for an `apiKey` login.
pub fn account_of_key(key: &str, state: &Path) -> Result<AccountOfKey> {
    account_of_fingerprint(&key_fingerprint(key)?, state)
}

/// [`account_of_key`] for a fingerprint.
pub fn account_of_fingerprint(account: &str, state: &Path) -> Result<AccountOfKey> {
    use crate::service::accounts::{accounts_path, AccountsFile, Named};
    let accounts = AccountsFile::load(&accounts_path(state))?;
    let (name, filed_as, removed) = match accounts.resolve(account) {
        Named::Key { name, identity } => (Some(name), identity, false),
        Named::Removed { name } => (Some(name), account.to_string(), true),
        Named::Unknown => (None, account.to_string(), false),
    };
    let home = state.join("app-server-homes").join(&filed_as);
    let home_exists = std::fs::symlink_metadata(&home).is_ok_and(|meta| meta.is_dir());
    Ok(AccountOfKey {
        account: account.to_string(),
        name,
        filed_as,
        removed,
        home,
        home_exists,
    })
}

/// A change to the named accounts (`clawbridge account add | add-key | remove-key`).
#[derive(Clone, Debug)]
pub enum AccountEdit {
    Add { name: String, fingerprint: String },
    AddKey { name: String, fingerprint: String },
    RemoveKey { name: String, fingerprint: String },
}

impl AccountEdit {
    /// `account add NAME` of a key's fingerprint.
    pub fn add(name: String, fingerprint: String) -> AccountEdit {
        AccountEdit::Add { name, fingerprint }
    }

    /// `account add-key NAME` of a key's fingerprint.
    pub fn add_key(name: String, fingerprint: String) -> AccountEdit {
        AccountEdit::AddKey { name, fingerprint }
    }

    /// `account remove-key NAME` of a key's fingerprint.
    pub fn remove_key(name: String, fingerprint: String) -> AccountEdit {
        AccountEdit::RemoveKey { name, fingerprint }
    }
}

/// Apply `edit` to `<state>/accounts.json` (atomically, 0600); the account as it is now.
pub fn edit_accounts(
    state: &Path,
    edit: &AccountEdit,
) -> Result<crate::service::accounts::AccountEntry> {
    use crate::service::accounts::{accounts_path, AccountsFile};
    let path = accounts_path(state);
    match edit {
        AccountEdit::Add { name, fingerprint } => AccountsFile::add(&path, name, fingerprint),
        AccountEdit::AddKey { name, fingerprint } => {
            AccountsFile::add_key(&path, name, fingerprint)
        }
        AccountEdit::RemoveKey { name, fingerprint } => {
            AccountsFile::remove_key(&path, name, fingerprint)
        }
    }
}

/// `clawbridge account list`: the named accounts of `state`.
pub fn named_accounts(state: &Path) -> Result<crate::service::accounts::AccountsFile> {
    crate::service::accounts::AccountsFile::load(&crate::service::accounts::accounts_path(state))
}

/// `clawbridge cache-report`: the requests under `paths` compared thread by thread; with
/// `html`, the page written there too (atomically).
pub fn cache_report(
    paths: &[PathBuf],
    html: Option<&Path>,
) -> Result<crate::traffic::capture::cache::CacheReport> {
    let report = crate::traffic::capture::cache::cache_report(paths)?;
    if let Some(file) = html {
        // The page shows what the captures hold: it is as private as they are (0600 when the
        // first of them is not readable by others).
        let private = paths.first().is_some_and(|source| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(source).is_ok_and(|meta| meta.permissions().mode() & 0o077 == 0)
        });
        match private {
            true => crate::support::fs::write_private(file, report.render_html().as_bytes())?,
            false => crate::support::fs::write_atomic(file, report.render_html().as_bytes())?,
        }
    }
    Ok(report)
}

/// `clawbridge audit DIR`: the audit, its HTML page written when asked (as private as the
/// transcript folder: it may show file contents), and whether it fails `fail_on`.
pub fn audit(
    dir: &Path,
    html: Option<&Path>,
    fail_on: &[String],
    options: &crate::app::audit::AuditOptions,
) -> Result<(crate::app::audit::AuditReport, bool)> {
    let verdicts = fail_on
        .iter()
        .map(|name| {
            crate::app::audit::Verdict::parse(name).ok_or_else(|| Error::InvalidArgument {
                flag: "--fail-on".to_string(),
                message: format!(
                    "`{name}` is not a verdict{} (missing, truncated, moved, extra, as-spec)",
                    did_you_mean(name, ["missing", "truncated", "moved", "extra", "as-spec"])
                ),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let report = crate::app::audit::audit(dir, options)?;
    if let Some(file) = html {
        crate::support::fs::write_private(file, report.render_html().as_bytes())?;
    }
    let failed = report.any(&verdicts);
    Ok((report, failed))
}

/// `clawbridge export-otel DIR`: the transcript folder read back into spans and sent where
/// `settings` (or the OpenTelemetry variables) say; fails when no collector is named or when a
/// span could not be sent.
pub fn export_otel(
    dir: &Path,
    settings: &crate::traffic::trace::TraceSettings,
    all: bool,
) -> Result<crate::traffic::trace::offline::Exported> {
    // What a live trace of this folder sent to the same collector already is left out
    // (`<dir>/otel-sent.jsonl`), unless `all`.
    let sent_live = match crate::traffic::trace::TraceExport::target_for_log(settings) {
        Some(to) if !all => crate::traffic::trace::sent::Sent::read(dir, &to)?,
        _ => crate::traffic::trace::sent::Sent::default(),
    };
    let sent_live = std::sync::Arc::new(sent_live);
    let settings = &crate::traffic::trace::TraceSettings {
        skip_sent: (!sent_live.is_empty()).then(|| std::sync::Arc::clone(&sent_live)),
        ..settings.clone()
    };
    let Some(export) = crate::traffic::trace::TraceExport::start(settings)? else {
        return Err(Error::InvalidArgument {
            flag: "--otel-endpoint".to_string(),
            message:
                "no collector named: give --otel-endpoint URL (or set OTEL_EXPORTER_OTLP_ENDPOINT)"
                    .to_string(),
        });
    };
    let mut book = crate::traffic::trace::SpanBook::new(export.tracer(), settings.content, false);
    let mut exported = crate::traffic::trace::offline::export_folder(dir, &mut book);
    drop(book);
    export.shutdown();
    let (_, sent, failed, dropped) = export.counters.snapshot();
    if let Ok(exported) = exported.as_mut() {
        exported.already_sent = sent_live
            .left_out
            .load(std::sync::atomic::Ordering::Relaxed);
        exported.spans = sent;
        exported.target = export.target.clone();
    }
    if failed + dropped > 0 {
        return Err(Error::Export {
            target: export.target.clone(),
            message: format!(
                "{} of {} spans were not taken (is the collector listening, and does it take OTLP over HTTP?)",
                failed + dropped,
                failed + dropped + sent
            ),
        });
    }
    exported
}

/// The native `clawbridge` executable (the front), absolute and with links resolved: the file
/// beside this process's own executable (`clawbridge-runtime` runs every command but the three
/// one-shot ones, and always sits beside it). `clawbridge path` prints it for OpenClaw's
/// `appServer.command`, which must name a native executable, not the npm launcher.
pub fn native_executable() -> std::io::Result<PathBuf> {
    let own = std::env::current_exe()?;
    let front = own.with_file_name(if cfg!(windows) {
        "clawbridge.exe"
    } else {
        "clawbridge"
    });
    let front = front.canonicalize().map_err(|error| {
        std::io::Error::new(
            error.kind(),
            format!(
                "{}: {error} (it belongs beside {})",
                front.display(),
                own.display()
            ),
        )
    })?;
    if !std::fs::metadata(&front)?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a file",
            front.display()
        )));
    }
    Ok(front)
}
