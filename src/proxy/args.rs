//! How OpenClaw calls the Codex slot, and how clawbridge tells its own flags from Codex's.
//!
//! OpenClaw starts `appServer.command` with `appServer.args` (default `app-server --listen
//! stdio://`) after moving every `-c key=value` in front of the last `app-server` and, when it
//! manages the login, adding `-c cli_auth_credentials_store="ephemeral"` there. So with
//! `command: "clawbridge"` and `args: ["app-server", "--transcript", DIR]`, clawbridge is run as
//!
//! ```text
//! clawbridge -c cli_auth_credentials_store="ephemeral" app-server --transcript DIR
//! ```
//!
//! and with a user-scoped Codex home OpenClaw also runs `clawbridge [-c ...] login status`.
//! clap cannot read that shape (Codex's flags before the subcommand, the proxy's own flags mixed
//! with Codex's after it), so [`normalise`] rewrites it first, and clap then parses it once into
//! [`AppServerArgs`]: the proxy's own flags (known from clap's own description of
//! [`AppServerArgs`], never a copied list) are taken from wherever they stand after
//! `app-server` and put first; everything else follows `--` for Codex, in OpenClaw's order. A call
//! that is not `app-server` at all is handed to the real Codex unchanged.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Codex's global options that take a value (the ones OpenClaw puts before `app-server`).
const CODEX_VALUE_OPTIONS: [&str; 6] =
    ["-c", "--config", "-p", "--profile", "--enable", "--disable"];

/// The default of `--home-retention-days`: an unused account's Codex home goes after a month.
pub const DEFAULT_HOME_RETENTION_DAYS: u64 = 30;

/// `clawbridge app-server`: the proxy's flags, then what Codex gets.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct AppServerArgs {
    /// The Codex CLI to start (else CODEX_BIN, else `codex` on PATH).
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
    /// Write every message both ways into DIR as JSON lines, one file per thread, secrets
    /// redacted (and `conformance.jsonl`: the versions and every check).
    #[arg(long)]
    pub transcript: Option<PathBuf>,
    /// Answer model requests with clawbridge's loopback stub (no account, no network) and write
    /// each request with its layers.md.
    #[arg(long)]
    pub offline: bool,
    /// Write every model request and its response per thread and turn into DIR. With --offline
    /// the stub answers (default: DIR/model-requests of --transcript); without it, Codex's model
    /// traffic goes through a loopback forwarder to the real upstream and is recorded on the way
    /// (redacted; see `clawbridge cache-report`).
    #[arg(long)]
    pub capture: Option<PathBuf>,
    /// With --capture (not --offline): the upstream base URL model requests go to (default: the
    /// one Codex is configured with, else Codex's default for the request's credential).
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// With --capture: an extra root certificate (PEM) for the upstream's TLS.
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
    /// With --capture: do not forward Codex's Responses WebSocket (it is answered 426 and Codex
    /// sends every request over HTTP).
    #[arg(long)]
    pub no_websocket: bool,
    /// The offline stub's answers (`{"responses": [...]}`, as for `run --stub-script`).
    #[arg(long)]
    pub stub_script: Option<PathBuf>,
    /// Audit each turn as it starts: where each workspace file went against where the spec puts
    /// it (the table on stderr; the rows in `audit.jsonl` of --transcript), as `clawbridge audit`
    /// does for a finished transcript.
    #[arg(long)]
    pub audit: bool,
    /// How OpenClaw's thread and turn requests reach Codex: `as-sent` (byte for byte) or `spec`
    /// (each workspace file moved to where the spec puts it, once: docs/live-routing.md).
    #[arg(long, value_name = "ROUTE", default_value = "as-sent", value_parser = parse_route)]
    pub route: crate::translate::live::LiveRoute,
    /// Do not check params against the running Codex's schema.
    #[arg(long)]
    pub no_check: bool,
    /// `ws://IP:PORT` or `unix://PATH`: serve Codex's app-server protocol over WebSocket to any
    /// number of clients (OpenClaw's `appServer.transport: "websocket"`), from a pool of
    /// app-servers. `stdio://` (OpenClaw's default) is passed to Codex as it was given.
    /// `clawbridge app-server status --listen URL` prints a running endpoint's connections,
    /// threads and members.
    #[arg(long, value_name = "URL")]
    pub listen: Option<String>,
    /// With --listen ws:// or unix://: the file holding the clients' bearer token (default:
    /// `<state-dir>/app-server-token`, generated 0600 on first start).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// With --listen ws:// or unix://: where the generated token lives (default: the platform state dir).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// With --listen ws:// or unix://: keep the fleet's state (thread owners and members,
    /// budgets, the pinned `initialize` answer) in this PostgreSQL database, shared by every
    /// endpoint that names it (`postgres://USER:PASSWORD@HOST/DB`, `?host=/socket/dir` for a
    /// Unix socket; TLS as its `sslmode` says). Default: `<state-dir>/app-server.db`. Its
    /// password is never logged or shown.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// With --listen ws:// or unix://: named client tokens (default `<state-dir>/clients.json`,
    /// as `clawbridge client add` writes it): each client sees and acts on only the threads it
    /// opened; the endpoint's own token is the operator's.
    #[arg(long, value_name = "FILE")]
    pub clients: Option<PathBuf>,
    /// With --listen ws:// or unix://: named accounts (default `<state-dir>/accounts.json`, as
    /// `clawbridge account add` writes it): each names an account and the keys that log in as
    /// it, so a rotated key keeps the account's threads. Read again when it changes.
    #[arg(long, value_name = "FILE")]
    pub accounts: Option<PathBuf>,
    /// With --listen ws:// or unix://: when accounts are named, a key of none still logs in
    /// (under its own fingerprint) instead of being refused.
    #[arg(long)]
    pub unnamed_accounts: bool,
    /// With --listen ws:// or unix://: give the remote member URL (one of --app-server) to one
    /// account, by its name in the accounts file or its fingerprint (`apiKey-1a2b...`):
    /// `URL=ACCOUNT` (repeatable). That account's threads then run there (and only there), its
    /// login is forwarded there, and no other account's or the native login's work is.
    #[arg(long = "app-server-account", value_name = "URL=ACCOUNT")]
    pub app_server_accounts: Vec<String>,
    /// With --store postgres://: how long an endpoint's lease of a thread lasts, in seconds
    /// (renewed every quarter of it while a connection follows the thread; after an endpoint
    /// dies, another takes its threads once their leases end).
    #[arg(long, value_name = "SECS", default_value_t = 15)]
    pub lease_seconds: u64,
    /// With --listen ws:// or unix://: allow a listener off loopback (the token then crosses the network in
    /// clear).
    #[arg(long)]
    pub allow_remote: bool,
    /// With --listen ws://: another name clients and scrapers may use in `Host` (`name`,
    /// `name:port` or `name:*`; repeatable), as `serve --allow-host`. Only the bound address
    /// and loopback names pass otherwise.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// With --listen ws:// or unix://: a turn whose final agent message came without its
    /// `turn/completed` is completed for the client after SECS (marked recovered in `app-server
    /// status`), as `serve` does. Without it such turns are only told (after 30 s).
    #[arg(long, value_name = "SECS")]
    pub completion_grace: Option<u64>,
    /// With --listen ws:// or unix://: silence this long after `turn/started` or after a tool's
    /// result is told as a stall (logged once, shown in `app-server status`).
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub stall_after: u64,
    /// With --listen ws:// or unix://: tokens each account may use per day (UTC), counted from
    /// Codex's `thread/tokenUsage/updated`. Past it, the running turn is interrupted and new
    /// turns are refused with a message naming the budget, until the next day.
    #[arg(long, value_name = "TOKENS")]
    pub budget_tokens: Option<u64>,
    /// With --listen ws:// or unix://: the most sandbox access any thread, turn or command
    /// gets (read-only, workspace-write, danger-full-access; default workspace-write, also
    /// `--sandbox-ceiling`). What asks for more, or names none, gets this; below
    /// danger-full-access no approval can take a command out of the sandbox.
    #[arg(long, visible_alias = "sandbox-ceiling", value_name = "MODE", value_parser = parse_sandbox)]
    pub max_sandbox: Option<crate::codex::protocol::params::SandboxMode>,
    /// With --listen ws:// or unix://: a folder named clients' threads and files keep to
    /// (repeatable; needed when the clients file names a client): a thread's `cwd`, its
    /// writable roots and every path a request names must lie under one.
    #[arg(long = "workspace-root", value_name = "DIR")]
    pub workspace_roots: Vec<PathBuf>,
    /// With --listen ws:// or unix://: answer `initialize` with the app-servers' own answer
    /// from now on, pinning it again (after a Codex upgrade the operator wants clients to see).
    /// Clients bind their threads to this answer: OpenClaw starts new threads when it changes.
    #[arg(long)]
    pub new_runtime_identity: bool,
    /// With --listen ws:// or unix://: remove an account's Codex home (its login, its
    /// sessions) once it is unused this many days, with no connection logged in as it and no
    /// thread of it kept (swept at the start and every hour); 0 keeps every home.
    #[arg(long, value_name = "DAYS", default_value_t = DEFAULT_HOME_RETENTION_DAYS)]
    pub home_retention_days: u64,
    /// With --listen ws:// or unix://: an environment variable the app-servers keep from the
    /// endpoint's (repeatable; e.g. HTTPS_PROXY, or a provider's `env_key`). They keep only
    /// PATH, HOME, the locale and a few more otherwise: never the endpoint's own secrets.
    #[arg(long = "member-env", value_name = "NAME")]
    pub member_env: Vec<String>,
    /// With --listen ws:// or unix://: a folder or file the app-servers, and every tool their
    /// models run, must not see (repeatable), besides the state dir, the token and clients
    /// files, the transcripts and captures, and (for an account's app-servers) the operator's
    /// Codex home, which are always hidden.
    #[arg(long = "member-hide", value_name = "PATH")]
    pub member_hide: Vec<PathBuf>,
    /// Traces of every turn, model call and tool call (OTLP over HTTP).
    #[command(flatten)]
    pub otel: OtelArgs,
    /// With --listen ws:// or unix://: the pool the endpoint serves from.
    #[command(flatten)]
    pub pool: PoolArgs,
    /// What OpenClaw passes (`-c key=value ... app-server --listen stdio://`), given to Codex as is.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<OsString>,
}

/// The app-server pool's flags, the same for `serve` and `app-server --listen ws://`.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct PoolArgs {
    /// Local `codex app-server` children in the pool (each thread stays on one; a new thread
    /// goes to the least busy). 0 with --app-server: remote members only.
    #[arg(long, default_value_t = 1)]
    pub app_servers: usize,
    /// A remote app-server for the pool (repeatable): `ws://HOST:PORT` of `codex app-server
    /// --listen ws://HOST:PORT --ws-auth capability-token --ws-token-file FILE`, `wss://HOST:PORT`
    /// of such a listener behind a TLS terminator (its token never crosses the network in
    /// clear), or `unix://PATH` of `codex app-server --listen unix://PATH`.
    #[arg(long = "app-server", value_name = "URL")]
    pub remote_app_servers: Vec<String>,
    /// The capability token file of each ws:// or wss:// --app-server, in the same order (one
    /// file for all when only one is given; a unix:// one needs none).
    #[arg(long = "app-server-token-file", value_name = "FILE")]
    pub app_server_token_files: Vec<PathBuf>,
    /// A CA certificate (PEM) the wss:// --app-server members are trusted by, besides the
    /// system's roots.
    #[arg(long = "app-server-ca", value_name = "FILE")]
    pub app_server_ca: Option<PathBuf>,
    /// With app-server --listen: local app-servers one account may have at once (each
    /// account that logs in through a connection gets app-servers of its own, over a Codex home
    /// of its own; --app-servers bounds them all together). Default: --app-servers.
    #[arg(long, value_name = "N")]
    pub app_servers_per_identity: Option<usize>,
    /// Recycle an app-server once it opened this many threads (it drains: its runs end, new
    /// runs start a fresh one and resume their threads there).
    #[arg(long, default_value_t = crate::codex::client::pool::DEFAULT_RECYCLE_AFTER_THREADS)]
    pub recycle_after_threads: usize,
    /// Recycle an app-server once its resident memory passes this many MiB.
    #[arg(long, default_value_t = crate::codex::client::pool::DEFAULT_RECYCLE_RSS_MB)]
    pub recycle_rss_mb: u64,
}

/// Where traces go and what they carry (`app-server` and `export-otel`).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct OtelArgs {
    /// Send OpenTelemetry traces over OTLP/HTTP to this collector (its base URL, e.g. Phoenix's
    /// `http://127.0.0.1:6006`; `/v1/traces` is added). Without it the standard
    /// `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` variables decide; with neither nothing is traced.
    #[arg(long, value_name = "URL")]
    pub otel_endpoint: Option<String>,
    /// The OTLP body: http/protobuf (the default, else OTEL_EXPORTER_OTLP_PROTOCOL) or
    /// http/json.
    #[arg(long, value_name = "PROTOCOL")]
    pub otel_protocol: Option<crate::traffic::trace::OtlpProtocol>,
    /// What of the conversation spans carry: off (names, ids, timings), metadata (also models,
    /// tokens, tools and decisions; the default) or full (also prompts, answers, tool input and
    /// output, redacted as transcripts are).
    #[arg(long, value_name = "POLICY", default_value = "metadata")]
    pub otel_content: crate::traffic::trace::ContentPolicy,
}

impl OtelArgs {
    pub fn settings(&self) -> crate::traffic::trace::TraceSettings {
        crate::traffic::trace::TraceSettings {
            endpoint: self.otel_endpoint.clone(),
            protocol: self.otel_protocol,
            content: self.otel_content,
            ..Default::default()
        }
    }
}

impl Default for PoolArgs {
    fn default() -> Self {
        PoolArgs {
            app_servers: 1,
            remote_app_servers: Vec::new(),
            app_server_token_files: Vec::new(),
            app_server_ca: None,
            app_servers_per_identity: None,
            recycle_after_threads: crate::codex::client::pool::DEFAULT_RECYCLE_AFTER_THREADS,
            recycle_rss_mb: crate::codex::client::pool::DEFAULT_RECYCLE_RSS_MB,
        }
    }
}

/// What a command line given to clawbridge is, once OpenClaw's slot shape is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Normalised {
    /// For clap: the command line as given, or the slot's rewritten as `app-server <own flags>
    /// -- <Codex's arguments>`.
    Clap(Vec<OsString>),
    /// Not an app-server start (e.g. `-c ... login status`): run the real Codex with these.
    Passthrough(Vec<OsString>),
}

fn is_codex_option(arg: &OsStr) -> bool {
    let Some(text) = arg.to_str() else {
        return false;
    };
    CODEX_VALUE_OPTIONS.contains(&text)
        || text.starts_with("--config=")
        || text.starts_with("--profile=")
        || (text.starts_with("-c") && text.len() > 2 && !text.starts_with("--"))
}

/// Index just past a Codex global option starting at `at` (its value included).
fn skip_option(args: &[OsString], at: usize) -> usize {
    let attached = args[at].to_str().is_some_and(|text| {
        text.contains('=') && text.starts_with("--")
            || (text.starts_with("-c") && text.len() > 2 && !text.starts_with("--"))
    });
    if attached {
        at + 1
    } else {
        (at + 2).min(args.len())
    }
}

/// The index of the `app-server` subcommand: the first non-option word after the leading
/// global options (an option's value, such as `-c app-server=1`, is never taken for it).
fn subcommand_index(args: &[OsString]) -> Option<usize> {
    let mut at = 0;
    while at < args.len() {
        if is_codex_option(&args[at]) {
            at = skip_option(args, at);
            continue;
        }
        return (args[at] == "app-server").then_some(at);
    }
    None
}

/// The proxy's own long flags and whether each takes a value, from clap's description of
/// [`AppServerArgs`].
fn own_flags() -> Vec<(String, bool)> {
    use clap::Args as _;
    AppServerArgs::augment_args(clap::Command::new("app-server"))
        .get_arguments()
        .flat_map(|arg| {
            let takes_value = arg.get_action().takes_values();
            arg.get_long()
                .into_iter()
                .chain(arg.get_all_aliases().unwrap_or_default())
                .map(move |long| (format!("--{long}"), takes_value))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `--max-sandbox`'s value: one of Codex's sandbox modes.
fn parse_route(value: &str) -> Result<crate::translate::live::LiveRoute, String> {
    crate::translate::live::LiveRoute::parse(value)
        .ok_or_else(|| format!("{value}: one of as-sent, spec"))
}

fn parse_sandbox(value: &str) -> Result<crate::codex::protocol::params::SandboxMode, String> {
    use crate::codex::protocol::params::SandboxMode;
    [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ]
    .into_iter()
    .find(|mode| mode.as_str() == value)
    .ok_or_else(|| format!("{value}: one of read-only, workspace-write, danger-full-access"))
}

/// Read a command line (without the program name) for clap. A command line in OpenClaw's Codex
/// slot shape (it starts with a Codex global option or `app-server`) becomes `app-server <the
/// proxy's flags> -- <Codex's arguments>`; one that asks `app-server` for help, and every other
/// command, is left as it is.
pub fn normalise(args: &[OsString]) -> Normalised {
    let unchanged = || Normalised::Clap(args.to_vec());
    let Some(first) = args.first() else {
        return unchanged();
    };
    if let Some(command) = own_subcommand(args) {
        return Normalised::Clap(command);
    }
    let codex_form = is_codex_option(first);
    if !codex_form && first != "app-server" {
        return unchanged();
    }
    let Some(subcommand) = subcommand_index(args) else {
        return if codex_form {
            Normalised::Passthrough(args.to_vec())
        } else {
            unchanged()
        };
    };
    let rest = &args[subcommand + 1..];
    if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
        return unchanged();
    }
    let own = own_flags();
    // `clawbridge -c k=v app-server ...`: Codex gets the prefix and `app-server`; with
    // `clawbridge app-server ...` the rest may be a whole Codex command line of its own.
    let mut codex: Vec<OsString> = if codex_form {
        args[..=subcommand].to_vec()
    } else {
        Vec::new()
    };
    let mut mine: Vec<OsString> = vec!["app-server".into()];
    let mut at = 0;
    while at < rest.len() {
        let arg = &rest[at];
        let text = arg.to_str().unwrap_or_default();
        if text == "--" {
            codex.extend_from_slice(&rest[at..]);
            break;
        }
        let (name, attached) = match text.split_once('=') {
            Some((name, _)) if name.starts_with("--") => (name, true),
            _ => (text, false),
        };
        // clawbridge's global flags (`-v`, `-vv`, `--verbose`, `--color WHEN`, `--log-format
        // FORMAT`) are its own wherever they stand: Codex's app-server has none of them, and
        // refused `-v`.
        let global = match name {
            "--verbose" => Some(false),
            "--color" | "--log-format" => Some(true),
            short
                if short.len() > 1
                    && short.starts_with('-')
                    && short[1..].bytes().all(|b| b == b'v') =>
            {
                Some(false)
            }
            _ => None,
        };
        let own_flag = global
            .map(|takes_value| (name.to_string(), takes_value))
            .or_else(|| own.iter().find(|(flag, _)| flag == name).cloned());
        match own_flag.as_ref() {
            Some((_, takes_value)) => {
                mine.push(arg.clone());
                if *takes_value && !attached {
                    if let Some(value) = rest.get(at + 1) {
                        // `--flag=value` keeps a value that starts with `-` a value for clap.
                        let mut joined = OsString::from(format!("{name}="));
                        joined.push(value);
                        mine.pop();
                        mine.push(joined);
                        at += 1;
                    }
                }
            }
            None => codex.push(arg.clone()),
        }
        at += 1;
    }
    mine.push("--".into());
    mine.extend(codex);
    Normalised::Clap(mine)
}

/// `clawbridge app-server report ...` and `app-server status ...` are clawbridge's own commands,
/// not a Codex command line: the word (the first after `app-server` that is not one of the
/// proxy's flags or their values) becomes the hidden clap subcommand `app-server-report` or
/// `app-server-status`, with every other argument, so each parses (and answers `--help`) as a
/// command of its own.
fn own_subcommand(args: &[OsString]) -> Option<Vec<OsString>> {
    if args.first()? != "app-server" {
        return None;
    }
    let own = own_flags();
    let mut at = 1;
    while at < args.len() {
        let text = args[at].to_str().unwrap_or_default();
        if text == "--" {
            return None;
        }
        if text.starts_with('-') {
            let name = text.split_once('=').map_or(text, |(name, _)| name);
            let takes_value = own
                .iter()
                .find(|(flag, _)| flag == name)
                .is_some_and(|(_, takes)| *takes)
                && !text.contains('=');
            at += if takes_value { 2 } else { 1 };
            continue;
        }
        let command = match text {
            "report" => "app-server-report",
            "status" => "app-server-status",
            _ => return None,
        };
        let mut rewritten: Vec<OsString> = vec![command.into()];
        rewritten.extend(args[1..at].iter().cloned());
        rewritten.extend(args[at + 1..].iter().cloned());
        return Some(rewritten);
    }
    None
}

/// `clawbridge app-server report DIR [--json]`.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
#[command(
    name = "app-server report",
    override_usage = "clawbridge app-server report DIR [--json]"
)]
pub struct ReportArgs {
    /// A `--transcript` folder of `clawbridge app-server` (its `conformance.jsonl`).
    pub dir: PathBuf,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `clawbridge app-server status --listen URL`.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
#[command(
    name = "app-server status",
    override_usage = "clawbridge app-server status --listen URL [--token-file FILE] [--state-dir DIR]"
)]
pub struct StatusArgs {
    /// The running endpoint's `ws://IP:PORT` or `unix://PATH`.
    #[arg(long, value_name = "URL")]
    pub listen: String,
    /// The endpoint's token file (default: `<state-dir>/app-server-token`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Where the endpoint's generated token lives (default: the platform state dir).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print the endpoint's whole answer as JSON (for machines) instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// What Codex gets from arguments given after `clawbridge app-server`'s own flags: as they are
/// when they name `app-server`; else `app-server` is put after the leading global options.
pub fn codex_args(args: &[OsString]) -> Vec<OsString> {
    if subcommand_index(args).is_some() {
        return args.to_vec();
    }
    let mut at = 0;
    while at < args.len() && is_codex_option(&args[at]) {
        at = skip_option(args, at);
    }
    let mut out = args[..at].to_vec();
    out.push("app-server".into());
    out.extend_from_slice(&args[at..]);
    out
}

/// The `-c key=value` overrides among the Codex arguments given to the endpoint
/// (`app-server --listen ws://... -c key=value`): each of its app-servers starts with them. The
/// endpoint starts its app-servers itself, so any other Codex argument has nowhere to go and is
/// refused by name rather than dropped.
pub fn endpoint_config_overrides(args: &[OsString]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < args.len() {
        let Some(text) = args[at].to_str() else {
            return Err(format!("`{}` is not UTF-8", args[at].to_string_lossy()));
        };
        let value = if text == "-c" || text == "--config" {
            at += 1;
            match args.get(at).and_then(|value| value.to_str()) {
                Some(value) => value.to_string(),
                None => return Err(format!("`{text}` needs a key=value")),
            }
        } else if let Some(value) = text.strip_prefix("--config=") {
            value.to_string()
        } else if text.starts_with("-c") && !text.starts_with("--") {
            text[2..].to_string()
        } else if text == "app-server" || text == "--" {
            at += 1;
            continue;
        } else {
            return Err(format!(
                "`{text}`: the endpoint starts its app-servers itself and passes them only `-c key=value` overrides"
            ));
        };
        if !value.contains('=') {
            return Err(format!("`-c {value}` is not key=value"));
        }
        out.push(value);
        at += 1;
    }
    Ok(out)
}

/// `args` with `-c override` added just before `app-server` (so it wins over OpenClaw's own
/// `-c` of the same key, which Codex applies first).
pub fn with_override(args: &[OsString], override_: &str) -> Vec<OsString> {
    let at = subcommand_index(args).unwrap_or(args.len());
    let mut out = args[..at].to_vec();
    out.push("-c".into());
    out.push(override_.into());
    out.extend_from_slice(&args[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(clap::Subcommand)]
    enum Command {
        AppServer(AppServerArgs),
    }

    /// The slot command line as the binary reads it: normalised, then clap.
    fn parsed(args: &[&str]) -> Result<AppServerArgs, clap::Error> {
        let Normalised::Clap(args) = normalise(&os(args)) else {
            panic!("not for clap");
        };
        let cli = Cli::try_parse_from(std::iter::once(OsString::from("clawbridge")).chain(args))?;
        let Command::AppServer(args) = cli.command;
        Ok(args)
    }

    #[test]
    fn the_endpoint_takes_config_overrides_and_refuses_other_codex_arguments() {
        assert_eq!(
            endpoint_config_overrides(&os(&["-c", "a=1", "--config=b=2", "-cc=3", "app-server"])),
            Ok(vec![
                "a=1".to_string(),
                "b=2".to_string(),
                "c=3".to_string()
            ])
        );
        assert_eq!(endpoint_config_overrides(&[]), Ok(Vec::new()));
        for bad in [
            &["--profile", "x"][..],
            &["-c"],
            &["-c", "novalue"],
            &["--enable", "x"],
        ] {
            let error = endpoint_config_overrides(&os(bad)).expect_err("refused");
            assert!(error.contains('`'), "{error}");
        }
    }

    #[test]
    fn openclaw_shapes_are_read() {
        let parsed_line = parsed(&[
            "-c",
            "cli_auth_credentials_store=\"ephemeral\"",
            "app-server",
            "--transcript",
            "/t",
            "--listen",
            "stdio://",
            "--offline",
        ])
        .expect("a proxy start");
        assert_eq!(parsed_line.transcript, Some(PathBuf::from("/t")));
        assert!(parsed_line.offline && !parsed_line.no_check);
        assert_eq!(parsed_line.listen.as_deref(), Some("stdio://"));
        // Codex still gets OpenClaw's `--listen stdio://`, after what preceded it.
        assert_eq!(
            crate::proxy::ProxySettings::from(parsed_line).args,
            os(&[
                "-c",
                "cli_auth_credentials_store=\"ephemeral\"",
                "app-server",
                "--listen",
                "stdio://"
            ])
        );
        let plain = parsed(&["app-server", "--transcript=/t", "--no-check"]).expect("a start");
        assert_eq!(codex_args(&plain.args), os(&["app-server"]));
        assert!(plain.no_check);
        let whole = parsed(&[
            "app-server",
            "--offline",
            "-c",
            "x=1",
            "app-server",
            "--listen",
            "stdio://",
        ])
        .expect("a start");
        assert_eq!(
            codex_args(&crate::proxy::ProxySettings::from(whole).args),
            os(&["-c", "x=1", "app-server", "--listen", "stdio://"])
        );
        // A value that starts with a dash stays the flag's value.
        let dashed =
            parsed(&["app-server", "--capture", "-odd", "--listen", "stdio://"]).expect("a start");
        assert_eq!(dashed.capture, Some(PathBuf::from("-odd")));
        assert_eq!(
            crate::proxy::ProxySettings::from(dashed).args,
            os(&["--listen", "stdio://"])
        );
        assert_eq!(
            normalise(&os(&["-c", "x=1", "login", "status"])),
            Normalised::Passthrough(os(&["-c", "x=1", "login", "status"]))
        );
        assert_eq!(
            normalise(&os(&["run", "x.json"])),
            Normalised::Clap(os(&["run", "x.json"]))
        );
        assert_eq!(
            normalise(&os(&["app-server", "--help"])),
            Normalised::Clap(os(&["app-server", "--help"]))
        );
        let missing = parsed(&["app-server", "--transcript"]).expect_err("a missing value");
        assert!(missing.to_string().contains("--transcript"), "{missing}");
        // A value that reads `app-server` is not the subcommand.
        assert_eq!(
            normalise(&os(&["-c", "app-server", "login"])),
            Normalised::Passthrough(os(&["-c", "app-server", "login"]))
        );
    }

    #[test]
    fn the_global_flags_are_clawbridge_s_anywhere() {
        assert_eq!(
            normalise(&os(&[
                "app-server",
                "-vv",
                "--listen",
                "stdio://",
                "--color",
                "never"
            ])),
            Normalised::Clap(os(&[
                "app-server",
                "-vv",
                "--listen=stdio://",
                "--color=never",
                "--"
            ]))
        );
        assert_eq!(
            normalise(&os(&[
                "app-server",
                "--listen",
                "ws://127.0.0.1:0",
                "--log-format",
                "json"
            ])),
            Normalised::Clap(os(&[
                "app-server",
                "--listen=ws://127.0.0.1:0",
                "--log-format=json",
                "--"
            ]))
        );
        assert_eq!(
            normalise(&os(&["-c", "x=1", "app-server", "--verbose"])),
            Normalised::Clap(os(&[
                "app-server",
                "--verbose",
                "--",
                "-c",
                "x=1",
                "app-server"
            ]))
        );
    }

    #[test]
    fn the_own_flags_are_clap_s() {
        let flags: Vec<String> = own_flags().into_iter().map(|(flag, _)| flag).collect();
        assert_eq!(
            flags,
            [
                "--codex-bin",
                "--transcript",
                "--offline",
                "--capture",
                "--upstream",
                "--upstream-ca",
                "--no-websocket",
                "--stub-script",
                "--audit",
                "--route",
                "--no-check",
                "--listen",
                "--token-file",
                "--state-dir",
                "--store",
                "--clients",
                "--accounts",
                "--unnamed-accounts",
                "--app-server-account",
                "--lease-seconds",
                "--allow-remote",
                "--allow-host",
                "--completion-grace",
                "--stall-after",
                "--budget-tokens",
                "--max-sandbox",
                "--sandbox-ceiling",
                "--workspace-root",
                "--new-runtime-identity",
                "--home-retention-days",
                "--member-env",
                "--member-hide",
                "--otel-endpoint",
                "--otel-protocol",
                "--otel-content",
                "--app-servers",
                "--app-server",
                "--app-server-token-file",
                "--app-server-ca",
                "--app-servers-per-identity",
                "--recycle-after-threads",
                "--recycle-rss-mb"
            ]
        );
        let takes: Vec<bool> = own_flags().into_iter().map(|(_, takes)| takes).collect();
        assert_eq!(
            takes,
            [
                true, true, false, true, true, true, false, true, false, true, false, true, true,
                true, true, true, true, false, true, true, false, true, true, true, true, true,
                true, true, false, true, true, true, true, true, true, true, true, true, true,
                true, true, true
            ]
        );
    }

    #[test]
    fn app_server_is_added_after_the_global_options() {
        let given = os(&["-c", "x=1", "app-server", "--listen", "stdio://"]);
        assert_eq!(codex_args(&given), given);
        assert_eq!(codex_args(&[]), os(&["app-server"]));
        assert_eq!(
            codex_args(&os(&["-c", "x=1", "--listen", "stdio://"])),
            os(&["-c", "x=1", "app-server", "--listen", "stdio://"])
        );
        assert_eq!(
            with_override(&given, "openai_base_url=\"u\""),
            os(&[
                "-c",
                "x=1",
                "-c",
                "openai_base_url=\"u\"",
                "app-server",
                "--listen",
                "stdio://"
            ])
        );
    }
}
