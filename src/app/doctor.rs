//! `clawbridge doctor`: what a machine has and lacks for clawbridge, each finding with how to fix
//! it, as OpenClaw's `openclaw doctor` does for its side.
//!
//! Read-only and bounded: it never reads a secret's content beyond its format (the token's length
//! and characters; of Codex's `auth.json` only whether it exists and who may read it), runs
//! `codex --version` under a timeout with capped output, and binds the port only to see whether
//! it is free.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::codex::client::process::find_codex_binary;
// The same reading as the handshake's version check.
use crate::codex::client::session::parse_semver as parse_version;
use crate::codex::protocol::{
    supported_range, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION,
    PINNED_CODEX_VERSION,
};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    /// Works, but worth knowing (e.g. a Codex newer than the tested range).
    Warn,
    /// Something clawbridge needs is wrong; `doctor` exits 1.
    Fail,
}

/// One finding.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub level: Level,
    pub detail: String,
    /// What to do about it (empty when nothing needs doing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
}

/// What to check.
#[derive(Clone, Debug, Default)]
pub struct DoctorSettings {
    pub codex_bin: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub listen: Option<std::net::SocketAddr>,
    pub workspace_roots: Vec<PathBuf>,
    /// `--run RUN.json`: the run's bootstrap files, raw and injected counts and where each lands
    /// (the "detailed raw/injected counts" the seed keeps in diagnostics).
    pub run: Option<PathBuf>,
    /// The program that gives the services' app-servers a private view (`clawbridge-runtime`):
    /// whether it can here is checked (`None`: not checked).
    pub jail_helper: Option<PathBuf>,
    /// Which service's setup is checked: `serve`'s (its token, its default port) or the
    /// app-server endpoint's (`--app-server`: its token, the named clients and accounts, the
    /// workspace roots named clients need).
    pub service: Service,
    /// The endpoint's token file (`--token-file`; default `<state-dir>/app-server-token`).
    pub token_file: Option<PathBuf>,
}

/// The service `doctor` checks the setup of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Service {
    #[default]
    Serve,
    AppServer,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::Serve => "serve",
            Service::AppServer => "the endpoint",
        }
    }
}

/// One finding (also the endpoint checks' in `proxy::doctor`).
pub(crate) fn finding(check: &'static str, level: Level, detail: String, fix: &str) -> Finding {
    Finding {
        check,
        level,
        detail,
        fix: fix.to_string(),
    }
}

/// Every check, in order: Codex binary and version, `CODEX_HOME`, state dir, token, port,
/// workspace roots.
pub fn doctor(settings: &DoctorSettings) -> Vec<Finding> {
    let mut findings = vec![codex_binary(settings)];
    findings.push(codex_home(settings));
    findings.extend(codex_home_exposure(settings));
    let state_dir = settings
        .state_dir
        .clone()
        .or_else(crate::app::state::WarningLedger::default_state_dir);
    findings.extend(state(state_dir.as_deref(), settings));
    if let Some(dir) = &state_dir {
        findings.extend(state_databases(dir));
    }
    match settings.service {
        Service::Serve => findings.push(port(settings.listen)),
        Service::AppServer => {
            // The endpoint has no default address: its port is checked when one is given.
            findings.extend(settings.listen.map(|listen| port(Some(listen))));
            if let Some(dir) = &state_dir {
                findings.extend(endpoint_files(dir, settings));
            }
        }
    }
    findings.extend(roots(&settings.workspace_roots));
    if let Some(helper) = &settings.jail_helper {
        findings.push(isolation(helper, state_dir.as_deref(), settings));
    }
    if let Some(run) = &settings.run {
        findings.push(bootstrap_counts(run, settings.state_dir.as_deref()));
    }
    findings
}

/// Whether the services' app-servers can get a private view of this machine (each account's
/// Codex home, the tokens and the state dir out of the others' reach).
fn isolation(helper: &Path, state_dir: Option<&Path>, settings: &DoctorSettings) -> Finding {
    let jail = crate::support::jail::Jail {
        helper: helper.to_path_buf(),
        hide: state_dir.map(Path::to_path_buf).into_iter().collect(),
        keep: settings.workspace_roots.clone(),
    };
    let home = codex_home_path(settings).map_or_else(|| PathBuf::from("/"), |(home, _)| home);
    match jail.probe(&home, std::time::Duration::from_secs(10)) {
        Ok(()) => finding(
            "isolation",
            Level::Ok,
            "each app-server of serve and the endpoint gets a private view of this machine (mount and PID namespaces)".into(),
            "",
        ),
        Err(why) => finding(
            "isolation",
            Level::Warn,
            format!("the app-servers cannot get a private view of this machine: {why}"),
            "run the service as root, or allow unprivileged user namespaces; until then the endpoint serves one account and refuses every other login",
        ),
    }
}

/// The bootstrap files of a run: raw and injected characters, where each lands, and what was
/// cut (a warning with the fix when anything was).
fn bootstrap_counts(path: &std::path::Path, state_dir: Option<&std::path::Path>) -> Finding {
    // A bootstrap name that is there but is no regular file (a folder, a device) is skipped as
    // unreadable: said by name, since the file an operator meant is not loaded.
    let mut not_files = Vec::new();
    let report = crate::app::commands::load_run_file(path).and_then(|run| {
        for name in crate::workspace::BOOTSTRAP_FILE_NAMES {
            if let Ok(metadata) = std::fs::metadata(run.workspace.join(name)) {
                if !metadata.is_file() {
                    not_files.push(name);
                }
            }
        }
        let options = crate::app::commands::translate_options(state_dir, None, None);
        crate::app::commands::context(&run, &options, false)
    });
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            return finding(
                "bootstrap",
                Level::Fail,
                format!("{}: {error}", path.display()),
                "fix the run document (clawbridge context RUN.json names the field)",
            )
        }
    };
    let mut lines = vec![format!(
        "{}: budget {} per file, {} in all",
        path.display(),
        report.bootstrap_max_chars,
        report.bootstrap_total_max_chars
    )];
    for file in &report.bootstrap {
        lines.push(format!(
            "{}: raw {}, injected {}{} ({})",
            file.name,
            file.raw_chars,
            file.injected_chars,
            if file.truncated { ", truncated" } else { "" },
            file.surface.label()
        ));
    }
    for file in &report.filtered {
        lines.push(format!("{}: filtered ({})", file.name, file.reason));
    }
    for name in &not_files {
        lines.push(format!("{name}: not a regular file, not loaded"));
    }
    let truncated = report.bootstrap.iter().any(|file| file.truncated);
    let fix = match (truncated, not_files.is_empty()) {
        (false, true) => "",
        (true, true) => {
            "shorten the cut files, or raise agents.defaults.bootstrapMaxChars / bootstrapTotalMaxChars"
        }
        (false, false) => "make each bootstrap name a regular file (or remove it)",
        (true, false) => {
            "make each bootstrap name a regular file; shorten the cut files, or raise agents.defaults.bootstrapMaxChars / bootstrapTotalMaxChars"
        }
    };
    finding(
        "bootstrap",
        if fix.is_empty() {
            Level::Ok
        } else {
            Level::Warn
        },
        lines.join("; "),
        fix,
    )
}

/// `codex-cli 0.169.0` -> `0.169.0`.
fn version_of(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .find(|word| parse_version(word).is_some())
        .map(str::to_string)
}

fn codex_binary(settings: &DoctorSettings) -> Finding {
    let found = match find_codex_binary(
        settings.codex_bin.as_deref(),
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    ) {
        Ok(found) => found,
        Err(reason) => {
            return finding(
                "codex",
                Level::Fail,
                reason,
                &format!("npm install -g @openai/codex@{PINNED_CODEX_VERSION} (or scripts/install-codex in a checkout), then pass --codex-bin or put `codex` on PATH; `serve` still answers params, context and prompt without it"),
            )
        }
    };
    let mut command = std::process::Command::new(&found.path);
    command.arg("--version");
    let output =
        crate::support::process::run_bounded(command, b"", Duration::from_secs(10), 64 * 1024);
    let shown = format!("{} (via {})", found.path.display(), found.via);
    let version = match output {
        Ok(output) if output.status.success() => {
            version_of(&String::from_utf8_lossy(&output.stdout))
        }
        Ok(output) => {
            return finding(
                "codex",
                Level::Fail,
                format!(
                    "{shown}: `--version` exited with {}: {}",
                    output.status,
                    output.stderr_tail.trim()
                ),
                "reinstall the Codex CLI",
            )
        }
        Err(error) => {
            return finding(
                "codex",
                Level::Fail,
                format!("{shown}: `--version` {error}"),
                "check that the file is the Codex CLI and runs on this machine",
            )
        }
    };
    let Some(version) = version else {
        return finding(
            "codex",
            Level::Warn,
            format!("{shown}: `--version` printed no version"),
            "check that the file is the Codex CLI",
        );
    };
    let range = supported_range();
    match parse_version(&version) {
        Some(found) if Some(found) < parse_version(OLDEST_SUPPORTED_CODEX_VERSION) => finding(
            "codex",
            Level::Fail,
            format!("{shown}: Codex {version} is older than the supported {range}"),
            &format!("npm install -g @openai/codex@{PINNED_CODEX_VERSION}"),
        ),
        Some(found) if Some(found) > parse_version(NEWEST_TESTED_CODEX_VERSION) => finding(
            "codex",
            Level::Warn,
            format!("{shown}: Codex {version} is newer than the tested {range}; it will likely work (the app-server warns too)"),
            &format!("scripts/codex-compat {version} checks it in a checkout"),
        ),
        _ => finding("codex", Level::Ok, format!("{shown}: Codex {version} (supported: {range})"), ""),
    }
}

/// The Codex home a run's app-server uses, and which setting named it.
fn codex_home_path(settings: &DoctorSettings) -> Option<(PathBuf, &'static str)> {
    match (
        &settings.codex_home,
        std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()),
    ) {
        (Some(home), _) => Some((home.clone(), "--codex-home")),
        (None, Some(home)) => Some((PathBuf::from(home), "CODEX_HOME")),
        (None, None) => dirs::home_dir().map(|home| (home.join(".codex"), "default")),
    }
}

/// A Codex home that sandboxed turns can write is a way out of the sandbox (its config.toml
/// can gain an MCP server the next thread runs unsandboxed).
fn codex_home_exposure(settings: &DoctorSettings) -> Option<Finding> {
    let (home, via) = codex_home_path(settings)?;
    let why = crate::traffic::stub::sandbox_writable_reason(&home, &settings.workspace_roots)?;
    Some(finding(
        "codex-home-sandbox",
        Level::Warn,
        format!(
            "{} ({via}) is writable by sandboxed turns: {why}",
            home.display()
        ),
        "use a Codex home outside every workspace root and temp folder (--codex-home or CODEX_HOME)",
    ))
}

fn codex_home(settings: &DoctorSettings) -> Finding {
    let Some((home, via)) = codex_home_path(settings) else {
        return finding(
            "codex-home",
            Level::Warn,
            "no home directory to look in".into(),
            "set CODEX_HOME",
        );
    };
    let shown = format!("{} ({via})", home.display());
    if !home.is_dir() {
        return finding(
            "codex-home",
            Level::Warn,
            format!("{shown}: no such folder; Codex has never run here"),
            "run `codex login` for real runs; `--offline` runs need no account",
        );
    }
    // Codex writes its sessions, logs and state there: a home it cannot write fails every run.
    if let Err(error) = crate::support::fs::can_write_in(&home) {
        return finding(
            "codex-home",
            Level::Fail,
            format!("{shown}: not writable ({error}); Codex writes its sessions there"),
            "make it writable, or point CODEX_HOME at a folder that is",
        );
    }
    // Only whether a login is stored, never what it holds.
    let auth = home.join("auth.json");
    match std::fs::symlink_metadata(&auth) {
        Ok(metadata) => {
            use std::os::unix::fs::PermissionsExt;
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                finding(
                    "codex-home",
                    Level::Warn,
                    format!(
                        "{shown}: logged in, but auth.json is readable by others (mode {mode:o})"
                    ),
                    &format!("chmod 600 {}", auth.display()),
                )
            } else {
                finding(
                    "codex-home",
                    Level::Ok,
                    format!("{shown}: looks logged in (auth.json present)"),
                    "",
                )
            }
        }
        Err(_) => finding(
            "codex-home",
            Level::Warn,
            format!("{shown}: not logged in (no auth.json)"),
            "run `codex login` (or set an API key) for real runs; `--offline` runs need no account",
        ),
    }
}

/// The state databases of the services in `dir` (those that exist): readable, of a schema this
/// clawbridge knows, not corrupt.
fn state_databases(dir: &Path) -> Vec<Finding> {
    ["app-server.db", "serve.db"]
        .into_iter()
        .map(|name| dir.join(name))
        .filter(|path| path.exists())
        .map(|path| match crate::service::store::inspect(&path) {
            Ok(summary) => finding(
                "state-db",
                Level::Ok,
                format!(
                    "{}: schema {}, {} thread(s) kept",
                    path.display(),
                    summary.schema,
                    summary.threads
                ),
                "",
            ),
            Err(error) => finding(
                "state-db",
                Level::Fail,
                error.to_string(),
                "see the message: restore the file from a backup, or move it aside",
            ),
        })
        .collect()
}

/// The endpoint's named clients and accounts (each file read as the endpoint reads it), and
/// the workspace roots named clients need.
fn endpoint_files(dir: &Path, settings: &DoctorSettings) -> Vec<Finding> {
    let mut findings = Vec::new();
    let clients = crate::service::clients::clients_path(dir);
    match crate::service::clients::ClientsFile::load(&clients) {
        Ok(file) => {
            let named = file.clients.len();
            findings.push(finding(
                "clients",
                Level::Ok,
                format!("{}: {named} named client(s)", clients.display()),
                "",
            ));
            if named > 0 && settings.workspace_roots.is_empty() {
                findings.push(finding(
                    "clients",
                    Level::Fail,
                    format!("{named} named client(s) and no --workspace-root: the endpoint refuses to start"),
                    "give the endpoint (and doctor) --workspace-root DIR, the folder the agents' workspaces live in",
                ));
            }
        }
        Err(error) => findings.push(finding(
            "clients",
            Level::Fail,
            crate::error::with_causes(&error),
            "fix the file (`clawbridge client list` reads it) or remove it",
        )),
    }
    let accounts = crate::service::accounts::accounts_path(dir);
    findings.push(match crate::service::accounts::AccountsFile::load(&accounts) {
        Ok(file) if file.accounts.is_empty() => finding(
            "accounts",
            Level::Ok,
            "no named account: each key logs in under its own fingerprint".into(),
            "",
        ),
        Ok(file) => finding(
            "accounts",
            Level::Ok,
            format!(
                "{}: {} named account(s), {} key(s)",
                accounts.display(),
                file.accounts.len(),
                file.accounts.iter().map(|account| account.keys.len()).sum::<usize>()
            ),
            "",
        ),
        Err(error) => finding(
            "accounts",
            Level::Fail,
            crate::error::with_causes(&error),
            "fix the file (`clawbridge account list` reads it): the endpoint does not start with it",
        ),
    });
    findings
}

fn state(state_dir: Option<&Path>, settings: &DoctorSettings) -> Vec<Finding> {
    use std::os::unix::fs::PermissionsExt;
    let service = settings.service.name();
    let Some(dir) = state_dir else {
        return vec![finding(
            "state-dir",
            Level::Fail,
            "no platform state directory".into(),
            "pass --state-dir",
        )];
    };
    let mut findings = Vec::new();
    match std::fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => {
            let mode = metadata.permissions().mode() & 0o777;
            findings.push(if mode & 0o077 != 0 {
                finding(
                    "state-dir",
                    Level::Warn,
                    format!(
                        "{}: readable by others (mode {mode:o}); it holds {service}'s token and state",
                        dir.display()
                    ),
                    &format!("chmod 700 {}", dir.display()),
                )
            } else {
                finding(
                    "state-dir",
                    Level::Ok,
                    format!("{} (mode {mode:o})", dir.display()),
                    "",
                )
            });
        }
        Ok(_) => {
            return vec![finding(
                "state-dir",
                Level::Fail,
                format!("{}: not a folder", dir.display()),
                "remove it or pass another --state-dir",
            )]
        }
        Err(_) => {
            return vec![finding(
                "state-dir",
                Level::Ok,
                format!(
                    "{}: not created yet ({service} creates it, private)",
                    dir.display()
                ),
                "",
            )]
        }
    }
    let token = match (settings.service, &settings.token_file) {
        (Service::AppServer, Some(file)) => file.clone(),
        (Service::AppServer, None) => crate::service::token::endpoint_token_path(dir),
        (Service::Serve, _) => crate::app::state::token_path(dir),
    };
    findings.push(match std::fs::symlink_metadata(&token) {
        Err(_) => finding(
            "token",
            Level::Ok,
            format!("{}: none yet ({service} generates one)", token.display()),
            "",
        ),
        Ok(metadata) if !metadata.is_file() => finding(
            "token",
            Level::Fail,
            format!("{}: not a regular file", token.display()),
            &format!("remove {} ({service} writes a new one)", token.display()),
        ),
        Ok(metadata) => {
            let mode = metadata.permissions().mode() & 0o777;
            let text = crate::support::fs::read_capped(&token, 4096, &|_| true)
                .ok()
                .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string());
            match text {
                None => finding(
                    "token",
                    Level::Fail,
                    format!("{}: unreadable or too large", token.display()),
                    &format!("remove it ({service} writes a new one)"),
                ),
                Some(text) if crate::service::token::token_problem(&text).is_some() => finding(
                    "token",
                    Level::Fail,
                    format!(
                        "{}: not a usable token (16+ visible ASCII characters)",
                        token.display()
                    ),
                    &format!("remove {} ({service} writes a new one)", token.display()),
                ),
                Some(_) if mode & 0o077 != 0 => finding(
                    "token",
                    Level::Fail,
                    format!("{}: readable by others (mode {mode:o})", token.display()),
                    &format!("chmod 600 {}", token.display()),
                ),
                Some(_) => finding(
                    "token",
                    Level::Ok,
                    format!("{} (mode {mode:o})", token.display()),
                    "",
                ),
            }
        }
    });
    findings
}

fn port(listen: Option<std::net::SocketAddr>) -> Finding {
    let addr = listen.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 7077)));
    match std::net::TcpListener::bind(addr) {
        Ok(_) => finding("port", Level::Ok, format!("{addr} is free"), ""),
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {
            let answering =
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok();
            finding(
                "port",
                Level::Warn,
                format!("{addr} is in use{}", if answering { " (something answers there: a running serve?)" } else { "" }),
                "stop what listens there, or pass --listen with another port (127.0.0.1:0 picks a free one)",
            )
        }
        Err(error) => finding(
            "port",
            Level::Fail,
            format!("{addr}: {error}"),
            "pass --listen with an address this machine has",
        ),
    }
}

fn roots(roots: &[PathBuf]) -> Vec<Finding> {
    if roots.is_empty() {
        return vec![finding(
            "workspace-roots",
            Level::Ok,
            "none given (serve needs --workspace-root; pass them here to check them)".into(),
            "",
        )];
    }
    roots
        .iter()
        .map(|root| match std::fs::read_dir(root) {
            Ok(_) => {
                let real = crate::support::fs::resolve_real(root);
                finding(
                    "workspace-roots",
                    Level::Ok,
                    format!("{} (real path {})", root.display(), real.display()),
                    "",
                )
            }
            Err(error) => finding(
                "workspace-roots",
                Level::Fail,
                format!("{}: {error}", root.display()),
                "create the folder or fix --workspace-root",
            ),
        })
        .collect()
}

/// The human report: one line per finding, with its fix.
pub fn render(findings: &[Finding]) -> String {
    let mut out = String::new();
    for item in findings {
        let mark = match item.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        out.push_str(&format!("{mark}  {:<16} {}\n", item.check, item.detail));
        if !item.fix.is_empty() {
            out.push_str(&format!("      {:<16} fix: {}\n", "", item.fix));
        }
    }
    let count = |level: Level| findings.iter().filter(|f| f.level == level).count();
    out.push_str(&match (count(Level::Fail), count(Level::Warn)) {
        (0, 0) => "nothing is wrong\n".to_string(),
        (0, warnings) => format!("nothing failed; {warnings} warning(s) above\n"),
        (failed, 0) => format!("{failed} problem(s) to fix\n"),
        (failed, warnings) => format!("{failed} problem(s) to fix, {warnings} warning(s)\n"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_codex_output() {
        assert_eq!(
            version_of("codex-cli 0.169.0\n").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(
            version_of("codex-cli 0.171.0-alpha.2").as_deref(),
            Some("0.171.0-alpha.2")
        );
        assert_eq!(version_of("no version here"), None);
    }
}
