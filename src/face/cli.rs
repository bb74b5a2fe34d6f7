//! The command line: what the user types, as clap structs. Closed sets parse straight into the
//! library's own types ([`choice`]), and the service's flags become its settings here
//! ([`ServeArgs::into_config`]); `main.rs` only dispatches and maps exit codes.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};

use crate::pairing;
use crate::{PromptMode, SandboxMode};

/// A value parser for a closed set: the names clap lists in `--help`, each parsed into its value.
fn choice<T: Clone + Send + Sync + 'static>(
    choices: &'static [(&'static str, T)],
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(choices.iter().map(|(name, _)| *name)).try_map(move |name| {
        choices
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| value.clone())
            .ok_or_else(|| format!("unknown value {name}"))
    })
}

const MODES: &[(&str, PromptMode)] = &[
    ("full", PromptMode::Full),
    ("minimal", PromptMode::Minimal),
    ("none", PromptMode::None),
];
/// The grants `client add --allow` and `client allow` take, by name.
fn grant() -> impl TypedValueParser<Value = crate::clients::Grant> {
    use crate::clients::Grant;
    PossibleValuesParser::new(Grant::ALL.map(Grant::as_str))
        .try_map(|name| Grant::parse(&name).ok_or_else(|| format!("unknown grant {name}")))
}

const SANDBOXES: &[(&str, SandboxMode)] = &[
    ("read-only", SandboxMode::ReadOnly),
    ("workspace-write", SandboxMode::WorkspaceWrite),
    ("danger-full-access", SandboxMode::DangerFullAccess),
];

/// The program's command line; `C` is every command (`Cli`, the runtime's) or the front's own
/// three (`OneShotCli`: the front links no description of the others, and since `Command`
/// flattens `OneShot` first, help and errors read the same from either binary).
#[derive(Parser, Debug)]
#[command(
    name = "clawbridge",
    version,
    about = "Bridge OpenClaw agent runs to the OpenAI Codex app-server"
)]
pub struct Program<C: Subcommand> {
    /// More logging on stderr (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Colour in logs on stderr: auto (only on a terminal, and not when NO_COLOR is set),
    /// always, never.
    #[arg(long, value_enum, global = true, value_name = "WHEN", default_value_t = Color::Auto)]
    pub color: Color,
    /// Logs on stderr as text (each line with its time, RFC 3339 UTC) or as JSON lines (for a
    /// log collector).
    #[arg(long, value_enum, global = true, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: C,
}

/// How logs on stderr are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-12-05T21:54:47.658176Z  WARN message`.
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `fields` (the message and its values).
    Json,
}

/// When logs on stderr are coloured.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Color {
    /// Only when stderr is a terminal and `NO_COLOR` is unset or empty.
    #[default]
    Auto,
    Always,
    Never,
}

impl Color {
    /// Whether to write ANSI colour codes, given the terminal test and `NO_COLOR`'s value.
    pub fn ansi(self, stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => stderr_is_terminal && no_color.is_none_or(|value| value.is_empty()),
        }
    }
}

/// Every command (the runtime).
pub type Cli = Program<Command>;
/// The commands the front runs itself.
pub type OneShotCli = Program<OneShot>;

/// The one-shot translation commands (`clawbridge` runs them itself; see `front.rs`).
#[derive(Subcommand, Debug)]
pub enum OneShot {
    /// Print the exact Codex thread/turn params for a run document.
    Params(RunArgs),
    /// Print OpenClaw's own system prompt (what non-Codex harnesses get).
    Prompt(PromptArgs),
    /// What each bootstrap file, skill and tool costs, and where it lands.
    ///
    /// OpenClaw's `/context list`, for a run document.
    Context {
        #[command(flatten)]
        args: RunArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Add per-skill and per-tool sizes.
        #[arg(long)]
        detail: bool,
    },
}

impl OneShot {
    /// The command names, as typed.
    pub const NAMES: [&'static str; 3] = ["params", "prompt", "context"];
}

/// Flags every translation command shares.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The run document (JSON).
    pub run: PathBuf,
    /// Where `once` truncation warnings are remembered (default: the platform state dir).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// `agent:bootstrap` hook: gets the bootstrap file list as JSON on stdin, prints the replacement.
    #[arg(long)]
    pub bootstrap_hook: Option<String>,
}

impl RunArgs {
    /// The run document and the translation options these flags name.
    pub fn load(&self) -> crate::Result<(crate::Run, crate::TranslateOptions)> {
        let run = crate::load_run_file(&self.run)?;
        let options =
            crate::translate_options(self.state_dir.as_deref(), self.bootstrap_hook.clone(), None);
        Ok((run, options))
    }
}

/// `clawbridge prompt`.
#[derive(clap::Args, Debug)]
pub struct PromptArgs {
    #[command(flatten)]
    pub args: RunArgs,
    /// Override the prompt mode.
    #[arg(long, value_parser = choice(MODES))]
    pub mode: Option<PromptMode>,
    /// Print {"stablePrefix", "dynamicSuffix"} as JSON instead of the joined text.
    #[arg(long)]
    pub split: bool,
    /// A provider contribution (JSON: interactionStyle, toolCallStyle, executionBias, stablePrefix, dynamicSuffix).
    #[arg(long)]
    pub provider: Option<PathBuf>,
    /// For a provider without cache-boundary support: drop the marker.
    #[arg(long)]
    pub no_cache_boundary: bool,
    /// The legacy `before_prompt_build` hook: gets the rendered prompt as JSON on stdin,
    /// prints `{}` or one of systemPrompt, prependSystemContext, appendSystemContext.
    #[arg(long)]
    pub before_prompt_build: Option<String>,
}

impl PromptArgs {
    /// The prompt settings these flags name (the provider file read).
    pub fn settings(&self) -> crate::Result<crate::PromptSettings> {
        Ok(crate::PromptSettings {
            mode: self.mode,
            provider: self
                .provider
                .as_deref()
                .map(crate::load_provider)
                .transpose()?,
            cache_boundary: !self.no_cache_boundary,
            before_prompt_build: self.before_prompt_build.clone(),
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    #[command(flatten)]
    OneShot(OneShot),
    /// Refresh the pinned model-prompt fixture from a Codex catalog.
    SyncCodexModel(SyncArgs),
    /// Pinned fixture checks.
    #[command(subcommand)]
    Fixtures(FixturesCommand),
    /// Run the turn through a real `codex app-server` and stream its events.
    Run {
        /// The run document (JSON).
        run: PathBuf,
        /// Use the built-in loopback model stub and a throwaway CODEX_HOME (no account needed).
        #[arg(long)]
        offline: bool,
        /// Print every event as a JSON line instead of the agent's messages.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        codex: CodexArgs,
        #[command(flatten)]
        capture: LiveCaptureArgs,
    },
    /// Run the turn offline and write the model request Codex sent (redacted).
    Capture {
        /// The run document (JSON).
        run: PathBuf,
        /// Output folder for model-request.json and layers.md.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        codex: CodexArgs,
    },
    /// Where each thread's prompt cache breaks, layer by layer.
    ///
    /// Every captured model request (`capture`, `--offline`, `--capture`) is compared with the
    /// one before it in its thread, element by element (instructions, tools, input items),
    /// naming the layer of the first difference.
    CacheReport {
        /// Capture folders (walked: `<thread>/turn-NN/model-request[.N].json`), or request files
        /// (one thread, in the order given).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the report as one self-contained HTML page.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Exit 1 when a request rewrites its thread's prefix (or changes model or cache key).
        #[arg(long)]
        fail_on_break: bool,
    },
    /// Send a recorded session to an OpenTelemetry collector.
    ///
    /// An `app-server --transcript` folder (with its `model-requests/` capture, if any) is read
    /// back into the traces the live export (`app-server --otel-endpoint`) sends: one trace per
    /// turn, its model calls, tool calls and approvals under it, a thread's turns one session.
    ExportOtel {
        /// The `--transcript` folder of `app-server`.
        dir: PathBuf,
        #[command(flatten)]
        otel: Box<crate::proxy::args::OtelArgs>,
        /// Print what was sent as JSON.
        #[arg(long)]
        json: bool,
        /// Send every turn, those a live trace of the folder sent to the same collector too
        /// (`otel-sent.jsonl` records them; without --all they are left out).
        #[arg(long)]
        all: bool,
    },
    /// Where each workspace file of a real OpenClaw run went, against the spec.
    ///
    /// For every `turn/start` in an `app-server --transcript` folder: each bootstrap file of
    /// the thread's cwd, the layer clawbridge's routing gives it for the same run, the layer
    /// OpenClaw put it in, whether the model request held it, and a verdict (as spec, moved,
    /// missing, truncated, extra).
    Audit {
        /// The `--transcript` folder of `app-server` (with its `model-requests/`, if any).
        dir: PathBuf,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the audit as one self-contained HTML page.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Exit 1 when any row has one of these verdicts (comma-separated: missing, truncated,
        /// moved, extra).
        #[arg(long, value_name = "VERDICTS", value_delimiter = ',')]
        fail_on: Vec<String>,
        /// Put each file's text (redacted) in the report.
        #[arg(long)]
        show_content: bool,
        /// Read the workspace from DIR instead of each thread's `cwd` (a transcript recorded on
        /// another machine).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// The run's OpenClaw session key (`agent:<id>:...`), when the params name none.
        #[arg(long, value_name = "KEY")]
        session_key: Option<String>,
    },
    /// Play a recorded session again through this clawbridge and a real Codex, offline, and say
    /// per turn where what the model receives diverged.
    ///
    /// DIR is an `app-server --transcript` folder with its captures (`--offline` or `--capture`
    /// keep each model request beside its answer), or a bundle from `replay --bundle`. The
    /// client's side is played from the transcript, the model's answered from the captures by
    /// thread and turn; Codex runs with a scratch home and reaches only the loopback stub. Each
    /// turn is `reused` (no model request), `exact` or `diverged` (the first difference, by the
    /// cache report's layer names). Exits 2 on a folder it cannot replay (naming why); with
    /// --fail-on-divergence, 1 when a turn diverged. See docs/replay.md.
    Replay(Box<ReplayArgs>),
    /// Read an `app-server --transcript` folder as a conversation.
    #[command(subcommand)]
    Transcript(TranscriptCommand),
    /// Serve the bridge API (JSON-RPC over HTTP and WebSocket) to OpenClaw clients.
    Serve(Box<ServeArgs>),
    /// Regenerate or drift-check the happy-path prompt snapshots.
    ///
    /// They live in fixtures/prompt-snapshots/codex-runtime-happy-path/.
    #[command(subcommand, alias = "prompt-snapshots")]
    Snapshots(SnapshotsCommand),
    /// Named client tokens of `clawbridge serve`.
    #[command(subcommand)]
    Client(ClientCommand),
    /// Check this machine (and a running endpoint), with a fix for each problem.
    ///
    /// Exits 1 when something is wrong; warnings are counted at the end.
    Doctor(DoctorArgs),
    /// A checked, recorded proxy in OpenClaw's Codex slot (`appServer.command`).
    ///
    /// A transparent proxy for OpenClaw's Codex slot (`appServer.command`): starts the real
    /// `codex app-server` with the other arguments and forwards every message both ways
    /// unchanged; checks thread and turn params against that Codex's schema; `--transcript DIR`
    /// writes every message, per thread, secrets redacted; `--offline` answers model requests
    /// with the loopback stub and captures them. OpenClaw's `clawbridge -c k=v app-server ...`
    /// shape is read too.
    ///
    /// Also `clawbridge app-server report DIR [--json]` (the per-method conformance table of a
    /// `--transcript` folder) and `clawbridge app-server status --listen URL` (a running
    /// endpoint's connections, threads, members, accounts and stalls); each has its `--help`.
    AppServer(Box<crate::AppServerArgs>),
    /// The per-method conformance table of an `app-server --transcript` folder: every message
    /// both ways checked against the running Codex's schema (exit 1 when any had problems).
    #[command(name = "app-server-report", hide = true)]
    AppServerReport(crate::ReportArgs),
    /// A running `app-server --listen` endpoint's connections, threads, members, accounts and
    /// stalls, as tables (`--json`: its whole answer), read with the operator's token.
    #[command(name = "app-server-status", hide = true)]
    AppServerStatus(crate::StatusArgs),
    /// Which account an OpenAI API key maps to on the endpoint, and the named accounts.
    ///
    /// Without a subcommand: the account a key maps to (`apiKey-1a2b...`, and its name when an
    /// account lists it). The key is read from an environment variable or stdin, never from the
    /// command line (where `ps` and shell history would show it); only its fingerprint is
    /// printed, as `app-server status`, the captures, the account homes and the logs name it.
    /// `add`, `add-key`, `remove-key` and `list` name accounts and give each its keys
    /// (`<state-dir>/accounts.json`): a rotation adds the new key and keeps the threads.
    #[command(args_conflicts_with_subcommands = true)]
    Account {
        #[command(subcommand)]
        command: Option<AccountCommand>,
        #[command(flatten)]
        key: KeySource,
        /// The endpoint's state dir (where its account homes are).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the native executable's path, for OpenClaw's `appServer.command`.
    ///
    /// The absolute path of the native `clawbridge` executable: the value for OpenClaw's
    /// `plugins.entries.codex.config.appServer.command` (installed from npm, `clawbridge` on PATH
    /// is a JavaScript launcher, which OpenClaw's verified setup refuses in that slot).
    Path,
    /// Print a shell completion script.
    ///
    /// For example `clawbridge completions bash > /etc/bash_completion.d/clawbridge`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Machine-readable descriptions, generated from the code.
    ///
    /// Each is committed under docs/, and a test keeps them current.
    #[command(subcommand)]
    Schema(SchemaCommand),
}

/// Commands that maintain clawbridge's own fixtures and docs rather than operate it: `--help`
/// lists them apart ([`grouped`]).
pub const DEVELOPER_COMMANDS: [&str; 4] = ["snapshots", "fixtures", "sync-codex-model", "schema"];

/// The runtime's command line with the [`DEVELOPER_COMMANDS`] listed under their own heading
/// after the others (clap has one list of subcommands: they are hidden from it and listed in
/// the help's tail). They parse as before, and completion scripts still offer them.
pub fn grouped(command: clap::Command) -> clap::Command {
    use std::fmt::Write as _;
    let header = clap::builder::Styles::default().get_header().to_owned();
    let width = DEVELOPER_COMMANDS
        .iter()
        .map(|name| name.len())
        .max()
        .unwrap_or(0);
    let mut tail = format!(
        "{}Developer commands:{}\n",
        header.render(),
        header.render_reset()
    );
    for name in DEVELOPER_COMMANDS {
        let about = command
            .find_subcommand(name)
            .and_then(|sub| sub.get_about())
            .map(|about| about.to_string())
            .unwrap_or_default();
        let _ = writeln!(tail, "  {name:<width$}  {about}");
    }
    let mut command = command.after_help(tail.trim_end().to_owned());
    for name in DEVELOPER_COMMANDS {
        command = command.mut_subcommand(name, |sub| sub.hide(true));
    }
    command
}

/// `--capture DIR` on real runs (`run`, `serve`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LiveCaptureArgs {
    /// Record every model request and its response, redacted, per thread and turn into DIR, on
    /// their way to the upstream (or, with --offline, to the stub); see `cache-report`.
    #[arg(long, value_name = "DIR")]
    pub capture: Option<PathBuf>,
    /// With --capture: where model requests go (default: Codex's configured base URL, else its
    /// default for the request's credential).
    #[arg(long, value_name = "URL", requires = "capture")]
    pub upstream: Option<String>,
    /// With --capture: an extra root certificate (PEM) for the upstream's TLS.
    #[arg(long, value_name = "FILE", requires = "capture")]
    pub upstream_ca: Option<PathBuf>,
    /// With --capture: do not forward Codex's Responses WebSocket (it is answered 426 and Codex
    /// sends every request over HTTP).
    #[arg(long, requires = "capture")]
    pub no_websocket: bool,
}

impl LiveCaptureArgs {
    pub fn settings(self) -> Option<crate::LiveCaptureSettings> {
        self.capture.map(|dir| crate::LiveCaptureSettings {
            dir,
            upstream: self.upstream,
            upstream_ca: self.upstream_ca,
            no_websocket: self.no_websocket,
        })
    }
}

/// `clawbridge replay`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The recording: an `app-server --transcript` folder with its `model-requests/`.
    pub dir: PathBuf,
    /// The Codex CLI to replay on (else CODEX_BIN, else `codex` on PATH): the pinned one, or
    /// another to see what changes in what the model receives.
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
    /// The folder a recorded `cwd` is replayed from, `RECORDED=DIR` (repeatable; copied into a
    /// scratch folder, never written). A bundle names its own.
    #[arg(long = "workspace", value_name = "RECORDED=DIR")]
    pub workspaces: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 1 when any turn diverged.
    #[arg(long)]
    pub fail_on_divergence: bool,
    /// The replay's route (`as-sent` or `spec`; default: the recording's own). The other one
    /// shows, turn by turn and by layer, what `app-server --route spec` changes in what the
    /// model receives on a real conversation.
    #[arg(long, value_name = "ROUTE", value_parser = parse_replay_route)]
    pub route: Option<crate::translate::live::LiveRoute>,
    /// Keep the replay's own transcript and captures in DIR (a recording in turn).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seconds the replay waits for what the recording says comes next.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub step_timeout: u64,
    /// Replay the first N turns of each thread, then send the rest live to --then-upstream.
    #[arg(long, value_name = "N", requires = "then_upstream")]
    pub until_turn: Option<usize>,
    /// With --until-turn: the Responses upstream's base URL (`http://127.0.0.1:PORT/v1`,
    /// `https://api.openai.com/v1`) the turns past N go to.
    #[arg(long, value_name = "URL", requires = "until_turn")]
    pub then_upstream: Option<String>,
    /// With --then-upstream: the environment variable holding the upstream's key (sent as a
    /// bearer token; never printed).
    #[arg(long, value_name = "VAR", requires = "then_upstream")]
    pub upstream_key_env: Option<String>,
    /// Write DIR as one redacted, self-contained bundle to FILE (`.tar`: the transcript, the
    /// captures, the workspace files the session ran in, the versions) instead of replaying it;
    /// `replay FILE` takes the bundle as it is.
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
    /// The Codex CLI to check (else CODEX_BIN, else `codex` on PATH).
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
    /// The CODEX_HOME to check (else $CODEX_HOME, else ~/.codex).
    #[arg(long)]
    pub codex_home: Option<PathBuf>,
    /// The state dir to check (else the platform default).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// The address serve would listen on.
    #[arg(long, value_parser = crate::support::loopback::parse_listen_addr)]
    pub listen: Option<std::net::SocketAddr>,
    /// Workspace roots serve would be given.
    #[arg(long = "workspace-root")]
    pub workspace_roots: Vec<PathBuf>,
    /// Also report a run's bootstrap files: raw and injected counts, where each lands, what
    /// was cut.
    #[arg(long, value_name = "RUN.json")]
    pub run: Option<PathBuf>,
    /// Also check a running `app-server --listen` endpoint (`ws://IP:PORT` or `unix://PATH`):
    /// that it answers and takes the token, its app-servers, its stalled turns.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// With --endpoint or --app-server: the endpoint's token file (default:
    /// `<state-dir>/app-server-token`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Check the app-server endpoint's setup instead of serve's: its token
    /// (`<state-dir>/app-server-token`), its named clients and accounts, the workspace roots
    /// named clients need, the port of --listen when given (implied by --endpoint).
    #[arg(long)]
    pub app_server: bool,
}

#[derive(Subcommand, Debug)]
pub enum SchemaCommand {
    /// The JSON Schema of the run document (docs/run-document.schema.json).
    RunDocument,
    /// The OpenRPC document of the bridge API (docs/openrpc.json; `rpc.discover` serves it).
    Openrpc,
    /// Compare two Codex app-server schema folders (`codex app-server generate-json-schema
    /// --experimental --out DIR`, or `fixtures/codex-schema/<version>`) for what clawbridge sends,
    /// answers and reads: fields added, removed and changed per method. Exits 1 when any field
    /// clawbridge uses was removed or changed.
    Diff {
        /// The older folder.
        old: PathBuf,
        /// The newer folder.
        new: PathBuf,
        /// Print the diff as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on: IP:PORT or localhost:PORT, `ws://` in front or not (`127.0.0.1:0`
    /// picks a free port; the bound address is the first stdout line).
    #[arg(long, default_value = "127.0.0.1:7077", value_parser = crate::support::loopback::parse_listen_addr)]
    pub listen: std::net::SocketAddr,
    /// The bearer token clients send (`Authorization: Bearer <TOKEN>`, 16+ visible ASCII
    /// characters). Also read from CLAWBRIDGE_TOKEN. Default: generated once into
    /// `<state-dir>/token` (mode 0600) and reused.
    #[arg(long, env = "CLAWBRIDGE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Accept requests without a token (loopback addresses only; any local process can then
    /// drive Codex).
    #[arg(long, conflicts_with = "token")]
    pub no_auth: bool,
    /// A browser origin allowed to call (e.g. `http://localhost:3000`); every other request
    /// that carries `Origin` gets 403. Repeatable.
    #[arg(long = "allow-origin")]
    pub allow_origins: Vec<String>,
    /// A `Host` header value accepted besides the bound address and loopback names
    /// (`name`, `name:port` or `name:*`). Repeatable.
    #[arg(long = "allow-host")]
    pub allow_hosts: Vec<String>,
    /// The most sandbox access a run may ask for; runs that name none get it.
    #[arg(long, value_parser = choice(SANDBOXES), default_value = "workspace-write")]
    pub max_sandbox: SandboxMode,
    /// Run documents' paths must lie under one of these folders (repeatable).
    #[arg(long = "workspace-root", required = true)]
    pub workspace_roots: Vec<PathBuf>,
    /// The Codex CLI binary (default: $CODEX_BIN, then `codex` on PATH).
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
    /// CODEX_HOME for the app-server.
    #[arg(long)]
    pub codex_home: Option<PathBuf>,
    /// Where session bindings, the token and warning state live (default: the platform state dir).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Pair with the built-in loopback model stub and a throwaway CODEX_HOME.
    #[arg(long)]
    pub offline: bool,
    /// Script the offline stub's answers.
    #[arg(long)]
    pub stub_script: Option<PathBuf>,
    /// Seconds a tool call or approval waits for the client's answer.
    #[arg(long, default_value_t = crate::DEFAULT_ANSWER_TIMEOUT.as_secs())]
    pub answer_timeout: u64,
    /// Finished runs kept replayable for late subscribers (the oldest are forgotten first).
    #[arg(long, default_value_t = crate::DEFAULT_MAX_FINISHED_RUNS)]
    pub max_finished_runs: usize,
    /// Seconds a finished run stays replayable.
    #[arg(long, default_value_t = crate::DEFAULT_FINISHED_RUN_TTL.as_secs())]
    pub finished_run_ttl: u64,
    /// Connections open at once; more are refused with 429 "Too many connections".
    #[arg(long, default_value_t = crate::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: u32,
    /// Runs in progress at once; `bridge.runStart` past it fails with 4290.
    #[arg(long, default_value_t = crate::DEFAULT_MAX_RUNS, value_parser = clap::value_parser!(usize))]
    pub max_runs: usize,
    /// Largest run document a request may carry, in bytes (far below the transport limit: a
    /// document is parsed in memory).
    #[arg(long, default_value_t = crate::DEFAULT_MAX_RUN_BYTES)]
    pub max_run_bytes: usize,
    /// Seconds a connection may stay without traffic before it is closed.
    #[arg(long, default_value_t = crate::DEFAULT_IDLE_TIMEOUT.as_secs())]
    pub idle_timeout: u64,
    /// Seconds one request's file reading and parsing may take before it fails (alone).
    #[arg(long, default_value_t = crate::DEFAULT_REQUEST_TIMEOUT.as_secs())]
    pub request_timeout: u64,
    /// Seconds a subscriber may read nothing while its queue is full before it is dropped.
    #[arg(long, default_value_t = crate::DEFAULT_SUBSCRIBER_STALL.as_secs())]
    pub subscriber_stall: u64,
    /// Session bindings kept (a new session past it pushes out an idle one; at most 50000).
    #[arg(long, default_value_t = crate::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    #[command(flatten)]
    pub pool: crate::PoolArgs,
    /// Seconds a turn's last agent message waits for its `turn/completed` before the turn is
    /// taken as completed (its turnEnd says `recovered`).
    #[arg(long, default_value_t = crate::TurnLimits::DEFAULT_COMPLETION_GRACE.as_secs())]
    pub completion_grace: u64,
    #[command(flatten)]
    pub capture: LiveCaptureArgs,
    /// Every message between serve and its app-servers, one folder per app-server connection
    /// (`DIR/connection-N/`, one file per thread, secrets redacted), as `app-server
    /// --transcript` writes it: `transcript show`, `app-server conformance` and `audit` read it.
    #[arg(long, value_name = "DIR")]
    pub transcript: Option<PathBuf>,
    /// An environment variable the app-servers keep from serve's (repeatable; e.g.
    /// HTTPS_PROXY). They keep only PATH, HOME, the locale and a few more otherwise.
    #[arg(long = "member-env", value_name = "NAME")]
    pub member_env: Vec<String>,
    /// A folder or file the app-servers, and every tool their models run, must not see
    /// (repeatable), besides the state dir, which is always hidden.
    #[arg(long = "member-hide", value_name = "PATH")]
    pub member_hide: Vec<PathBuf>,
    #[command(flatten)]
    pub otel: crate::proxy::args::OtelArgs,
    /// Named client tokens (default `<state-dir>/clients.json`; `clawbridge client add` writes
    /// it): each client sees and acts on only its own sessions and runs.
    #[arg(long)]
    pub clients: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum TranscriptCommand {
    /// Print each thread as a conversation: who said what, tool calls and commands, approvals,
    /// warnings, errors, each turn's end, with times (UTC).
    Show {
        /// The `--transcript` folder of `app-server` (its `connection-N/` folders included).
        dir: PathBuf,
        /// Only the threads whose id starts with this.
        #[arg(long, value_name = "ID")]
        thread: Option<String>,
        /// Show long texts whole (else each is cut at 600 characters, saying so).
        #[arg(long)]
        full: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the conversation as one self-contained HTML page.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
}

/// Where an account command reads a key: an environment variable or stdin (never argv), or a
/// fingerprint (`apiKey-1a2b...`, as `app-server status` shows it: no secret).
#[derive(clap::Args, Debug, Default)]
pub struct KeySource {
    /// Read the key from this environment variable.
    #[arg(long, value_name = "VAR", conflicts_with_all = ["api_key_stdin", "fingerprint"])]
    pub api_key_env: Option<String>,
    /// Read the key from stdin (one line).
    #[arg(long, conflicts_with = "fingerprint")]
    pub api_key_stdin: bool,
    /// A fingerprint instead of a key (`apiKey-1a2b...`, `chatgptAuthTokens-...`, as
    /// `app-server status` shows an account).
    #[arg(long, value_name = "FINGERPRINT")]
    pub fingerprint: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum AccountCommand {
    /// Name an account, filed under its first key (a key that logged in before keeps its home
    /// and threads, now under the name).
    Add {
        /// The account's name (1 to 64 of A-Z, a-z, 0-9, '.', '_', '-').
        name: String,
        #[command(flatten)]
        key: KeySource,
        /// The endpoint's state dir (default: the platform state dir).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Give an account one more key (a rotation's new key): it logs in as the account, to its
    /// home and threads. A running endpoint reads it at the next login.
    AddKey {
        /// The account's name.
        name: String,
        #[command(flatten)]
        key: KeySource,
        /// The endpoint's state dir (default: the platform state dir).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Take a key from an account (a rotation's old key): its logins are refused from then on.
    RemoveKey {
        /// The account's name.
        name: String,
        #[command(flatten)]
        key: KeySource,
        /// The endpoint's state dir (default: the platform state dir).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// List the named accounts: name, the fingerprint it is filed under, its keys' fingerprints.
    List {
        /// The endpoint's state dir (default: the platform state dir).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Add a named client of `clawbridge serve` or `app-server --listen`: prints its new token
    /// once (only its SHA-256 is kept, in `<state-dir>/clients.json`).
    Add {
        /// The client's name (1 to 64 of A-Z, a-z, 0-9, '.', '_', '-').
        name: String,
        /// The client may see and act on every client's runs and threads.
        #[arg(long)]
        operator: bool,
        /// On the app-server endpoint: what the client may do past its own threads (repeatable,
        /// or comma-separated): fs (the member host's files within the workspace roots), exec
        /// (commands and processes, hook commands), config (shared configuration), plugins,
        /// mcp, account. Nothing by default.
        #[arg(long = "allow", value_name = "GRANT", value_delimiter = ',', value_parser = grant())]
        allow: Vec<crate::clients::Grant>,
        /// The serve state dir (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
    /// Set what a named client may do past its own threads on the app-server endpoint: exactly
    /// the grants listed (none: it keeps to its own threads). A running endpoint reads them
    /// when it starts.
    Allow {
        /// The client's name.
        name: String,
        /// fs, exec, config, plugins, mcp, account (repeatable, or comma-separated).
        #[arg(value_name = "GRANT", value_delimiter = ',', value_parser = grant())]
        allow: Vec<crate::clients::Grant>,
        /// The serve state dir (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
    /// List the named clients (names and roles, never tokens).
    List {
        /// The serve state dir (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum SnapshotsCommand {
    /// Regenerate every snapshot file and delete stale ones.
    Gen {
        /// Repository root (default: the current directory).
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// Also capture each scenario's raw model-bound request through a real Codex (offline)
        /// into fixtures/prompt-snapshots/codex-runtime-raw/ (not drift-checked).
        #[arg(long)]
        raw: bool,
        /// The Codex CLI for --raw.
        #[arg(long)]
        codex_bin: Option<PathBuf>,
    },
    /// Compare the committed snapshots with freshly generated ones; exit 1 on drift.
    Check {
        /// Repository root (default: the current directory).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
pub struct SyncArgs {
    /// A models_cache.json or models.json (default: discover CODEX_HOME, ~/.codex, ~/code/codex).
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Model slug to render.
    #[arg(long, default_value = crate::DEFAULT_FIXTURE_MODEL)]
    pub model: String,
    /// The personality whose instructions are pinned: default, friendly or pragmatic (an
    /// unsupported one is an error of the sync, exit 1, as every other sync error).
    #[arg(long, default_value = "pragmatic")]
    pub personality: String,
    /// Where the fixtures live (relative to the current directory).
    #[arg(long, default_value = crate::DEFAULT_OUT_DIR)]
    pub out_dir: PathBuf,
    /// Recorded verbatim as catalogGitHead.
    #[arg(long)]
    pub catalog_git_head: Option<String>,
    /// Recorded as catalogPath instead of the derived value.
    #[arg(long)]
    pub source_label: Option<String>,
    /// Pin the Default collaboration-mode preset from a captured text file.
    #[arg(long)]
    pub collaboration_default: Option<PathBuf>,
    /// Compare with the committed fixtures instead of writing; exit 1 on drift.
    #[arg(long)]
    pub check: bool,
}

#[derive(Subcommand, Debug)]
pub enum FixturesCommand {
    /// Check every pinned fixture against the SHA-256 in its source.json.
    Verify {
        /// Repository root (default: the current directory).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
pub struct CodexArgs {
    /// The Codex CLI binary (default: $CODEX_BIN, then `codex` on PATH).
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
    /// CODEX_HOME for the app-server (offline: default a throwaway folder; never ~/.codex).
    #[arg(long)]
    pub codex_home: Option<PathBuf>,
    /// Script the offline stub's answers per model request (JSON; see README).
    #[arg(long)]
    pub stub_script: Option<PathBuf>,
    /// Command answering dynamic tool calls (JSON on stdin, {text|contentItems, success} on stdout).
    #[arg(long)]
    pub tool_handler: Option<String>,
    /// Approve Codex approval requests (default: decline).
    #[arg(long)]
    pub approve: bool,
    /// End the turn after this many seconds without progress.
    #[arg(long, default_value_t = pairing::DEFAULT_IDLE_SECS)]
    pub idle_timeout: u64,
    /// End the turn after this many seconds in all.
    #[arg(long, default_value_t = pairing::DEFAULT_TURN_SECS)]
    pub turn_timeout: u64,
    /// Where `once` truncation warnings are remembered (default: the platform state dir).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

impl CodexArgs {
    pub fn settings(self, offline: bool) -> pairing::PairingSettings {
        pairing::PairingSettings {
            codex_bin: self.codex_bin,
            codex_home: self.codex_home,
            stub_script: self.stub_script,
            tool_handler: self.tool_handler,
            approve: self.approve,
            limits: pairing::turn_limits(self.idle_timeout, self.turn_timeout),
            state_dir: self.state_dir,
            offline,
            live_capture: None,
        }
    }
}

impl ServeArgs {
    /// The service's settings from its flags: the Codex CLI found (or why there is none: serve
    /// still answers params, context and prompt; runs fail with 4100 and the reason), the stub
    /// script read, every bound at least 1.
    pub fn into_config(self) -> crate::Result<crate::ServeConfig> {
        use std::time::Duration;
        let binary = match crate::find_codex_binary(
            self.codex_bin.as_deref(),
            std::env::var_os("CODEX_BIN"),
            std::env::var_os("PATH"),
        ) {
            Ok(found) => crate::CodexBinary::Found(found.path),
            Err(reason) => crate::CodexBinary::Missing(reason),
        };
        let stub_script = match &self.stub_script {
            Some(path) => crate::StubScript::load(path)?,
            None => crate::StubScript::default(),
        };
        let state_dir = crate::state_dir(self.state_dir)?;
        let mut hide = vec![state_dir.clone()];
        hide.extend(self.clients.iter().cloned());
        hide.extend(self.capture.capture.iter().cloned());
        hide.extend(self.member_hide.iter().cloned());
        let member_jail = crate::support::process::own_executable()
            .ok()
            .map(|helper| crate::Jail {
                helper,
                hide,
                keep: self.workspace_roots.clone(),
            });
        Ok(crate::ServeConfig {
            member_env: Some(self.member_env),
            member_jail,
            member_reaper: crate::support::process::own_executable().ok(),
            listen: self.listen,
            token: self.token,
            no_auth: self.no_auth,
            allow_origins: self.allow_origins,
            allow_hosts: self.allow_hosts,
            max_sandbox: self.max_sandbox,
            codex_home: self.codex_home,
            offline: self.offline,
            stub_script,
            answer_timeout: Duration::from_secs(self.answer_timeout),
            request_timeout: Duration::from_secs(self.request_timeout.max(1)),
            max_finished_runs: self.max_finished_runs,
            finished_run_ttl: Duration::from_secs(self.finished_run_ttl),
            max_connections: self.max_connections.max(1),
            idle_timeout: Duration::from_secs(self.idle_timeout.max(1)),
            max_runs: self.max_runs.max(1),
            max_run_bytes: self.max_run_bytes.max(1024),
            clients_file: self.clients,
            recycle_after_threads: self.pool.recycle_after_threads.max(1),
            recycle_rss_bytes: self.pool.recycle_rss_mb.max(1).saturating_mul(1024 * 1024),
            max_sessions: self.max_sessions.clamp(1, crate::MAX_SESSIONS_LIMIT),
            subscriber_stall: Duration::from_secs(self.subscriber_stall.max(1)),
            app_servers: self.pool.app_servers,
            remote_app_servers: crate::remote_endpoints(
                &self.pool.remote_app_servers,
                &self.pool.app_server_token_files,
                self.pool.app_server_ca.as_deref(),
            )?,
            limits: crate::TurnLimits {
                completion_grace: Duration::from_secs(self.completion_grace.max(1)),
                ..crate::TurnLimits::default()
            },
            live_capture: self.capture.settings(),
            transcript: self.transcript,
            trace: self.otel.settings(),
            ..crate::ServeConfig::new(binary, self.workspace_roots, state_dir)
        })
    }
}

impl SyncArgs {
    /// The sync's settings; an unsupported personality is the sync's own error.
    pub fn settings(self) -> crate::Result<crate::SyncSettings> {
        Ok(crate::SyncSettings {
            catalog: self.catalog,
            model: self.model,
            personality: self.personality.parse()?,
            out_dir: self.out_dir,
            catalog_git_head: self.catalog_git_head,
            source_label: self.source_label,
            collaboration_default: self.collaboration_default,
            check: self.check,
        })
    }
}

impl DoctorArgs {
    pub fn settings(&self) -> crate::DoctorSettings {
        crate::DoctorSettings {
            codex_bin: self.codex_bin.clone(),
            codex_home: self.codex_home.clone(),
            run: self.run.clone(),
            state_dir: self.state_dir.clone(),
            listen: self.listen,
            workspace_roots: self.workspace_roots.clone(),
            jail_helper: crate::support::process::own_executable().ok(),
            // Asking about a running endpoint is an endpoint operator's question too.
            service: if self.app_server || self.endpoint.is_some() {
                crate::app::doctor::Service::AppServer
            } else {
                crate::app::doctor::Service::Serve
            },
            token_file: self.token_file.clone(),
        }
    }
}

/// The shell completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> String {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "clawbridge", &mut script);
    String::from_utf8_lossy(&script).into_owned()
}

/// `replay --route`: as `app-server --route` reads it.
fn parse_replay_route(value: &str) -> Result<crate::translate::live::LiveRoute, String> {
    crate::translate::live::LiveRoute::parse(value)
        .ok_or_else(|| format!("{value}: one of as-sent, spec"))
}

#[cfg(test)]
mod tests {
    use super::Color;
    use std::ffi::OsStr;

    /// Protection: `NO_COLOR` (any non-empty value) turns colour off in auto mode, off a
    /// terminal there is none, and an explicit choice wins over both.
    #[test]
    fn colour_follows_the_terminal_and_no_color() {
        assert!(Color::Auto.ansi(true, None));
        assert!(Color::Auto.ansi(true, Some(OsStr::new(""))));
        assert!(!Color::Auto.ansi(true, Some(OsStr::new("1"))));
        assert!(!Color::Auto.ansi(false, None));
        assert!(Color::Always.ansi(false, Some(OsStr::new("1"))));
        assert!(!Color::Never.ansi(true, None));
    }
}
