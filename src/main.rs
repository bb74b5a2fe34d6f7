//! The `clawbridge` binary: parse flags, call the library, map errors to exit codes.
//!
//! Exit codes: 0 success; 1 internal error (or a failed check); 2 bad input or usage.
//! stdout carries only the command's output; logs go to stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use clawbridge::app::context::context_report;
use clawbridge::app::state::WarningLedger;
use clawbridge::config::Run;
use clawbridge::skills::HostFacts;
use clawbridge::translate::{translate, TranslateOptions};

/// mimalloc: the bridge frees messages on other threads than the one that read them, which
/// glibc's allocator serializes on an arena lock (see `cargo bench --bench peer`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "clawbridge",
    version,
    about = "Bridge OpenClaw agent runs to the OpenAI Codex app-server"
)]
struct Cli {
    /// More logging on stderr (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the exact Codex thread/turn params for a run document.
    Params {
        /// The run document (JSON).
        run: PathBuf,
        /// Where `once` truncation warnings are remembered (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// `agent:bootstrap` hook: gets the bootstrap file list as JSON on stdin, prints the replacement.
        #[arg(long)]
        bootstrap_hook: Option<String>,
    },
    /// Print OpenClaw's own system prompt for a run (what non-Codex harnesses receive).
    Prompt {
        /// The run document (JSON).
        run: PathBuf,
        /// Override the prompt mode.
        #[arg(long, value_parser = ["full", "minimal", "none"])]
        mode: Option<String>,
        /// Print {"stablePrefix", "dynamicSuffix"} as JSON instead of the joined text.
        #[arg(long)]
        split: bool,
        /// A provider contribution (JSON: interactionStyle, toolCallStyle, executionBias, stablePrefix, dynamicSuffix).
        #[arg(long)]
        provider: Option<PathBuf>,
        /// `agent:bootstrap` hook: gets the bootstrap file list as JSON on stdin, prints the replacement.
        #[arg(long)]
        bootstrap_hook: Option<String>,
        /// Where `once` truncation warnings are remembered (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
    /// Show what each bootstrap file, skill and tool costs and where it lands (`/context list`).
    Context {
        /// The run document (JSON).
        run: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Add per-skill and per-tool sizes.
        #[arg(long)]
        detail: bool,
        /// Where `once` truncation warnings are remembered (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// `agent:bootstrap` hook: gets the bootstrap file list as JSON on stdin, prints the replacement.
        #[arg(long)]
        bootstrap_hook: Option<String>,
    },
    /// Refresh the pinned Codex model-prompt fixture from a Codex model catalog.
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
    },
    /// Run the turn offline and write the exact model-bound request Codex sent (redacted).
    Capture {
        /// The run document (JSON).
        run: PathBuf,
        /// Output folder for model-request.json and layers.md.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        codex: CodexArgs,
    },
    /// Serve the bridge API (JSON-RPC over HTTP and WebSocket) for OpenClaw-side clients.
    Serve {
        /// Address to listen on (`127.0.0.1:0` picks a free port; the bound address is the first stdout line).
        #[arg(long, default_value = "127.0.0.1:7077")]
        listen: std::net::SocketAddr,
        /// The bearer token clients send (`Authorization: Bearer <TOKEN>`, 16+ visible ASCII
        /// characters). Also read from CLAWBRIDGE_TOKEN. Default: generated once into
        /// `<state-dir>/token` (mode 0600) and reused.
        #[arg(long, env = "CLAWBRIDGE_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Accept requests without a token (loopback addresses only; any local process can then
        /// drive Codex).
        #[arg(long, conflicts_with = "token")]
        no_auth: bool,
        /// A browser origin allowed to call (e.g. `http://localhost:3000`); every other request
        /// that carries `Origin` gets 403. Repeatable.
        #[arg(long = "allow-origin")]
        allow_origins: Vec<String>,
        /// A `Host` header value accepted besides the bound address and loopback names
        /// (`name`, `name:port` or `name:*`). Repeatable.
        #[arg(long = "allow-host")]
        allow_hosts: Vec<String>,
        /// The most sandbox access a run may ask for; runs that name none get it.
        #[arg(long, default_value = "workspace-write", value_parser = ["read-only", "workspace-write", "danger-full-access"])]
        max_sandbox: String,
        /// Run documents' paths must lie under one of these folders (repeatable).
        #[arg(long = "workspace-root", required = true)]
        workspace_roots: Vec<PathBuf>,
        /// The Codex CLI binary (default: $CODEX_BIN, then `codex` on PATH).
        #[arg(long)]
        codex_bin: Option<PathBuf>,
        /// CODEX_HOME for the app-server.
        #[arg(long)]
        codex_home: Option<PathBuf>,
        /// Where session bindings and warning state live (default: the platform state dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Pair with the built-in loopback model stub and a throwaway CODEX_HOME.
        #[arg(long)]
        offline: bool,
        /// Script the offline stub's answers.
        #[arg(long)]
        stub_script: Option<PathBuf>,
        /// Seconds a tool call or approval waits for the client's answer.
        #[arg(long, default_value_t = 300)]
        answer_timeout: u64,
    },
    /// Happy-path prompt snapshots (fixtures/prompt-snapshots/codex-runtime-happy-path/).
    #[command(subcommand, alias = "prompt-snapshots")]
    Snapshots(SnapshotsCommand),
}

#[derive(Subcommand, Debug)]
enum SnapshotsCommand {
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
struct SyncArgs {
    /// A models_cache.json or models.json (default: discover CODEX_HOME, ~/.codex, ~/code/codex).
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// Model slug to render.
    #[arg(long, default_value = clawbridge::artifacts::catalog::DEFAULT_MODEL)]
    model: String,
    /// default, friendly or pragmatic.
    #[arg(long, default_value = "pragmatic")]
    personality: String,
    /// Where the fixtures live (relative to the current directory).
    #[arg(long, default_value = clawbridge::artifacts::catalog::DEFAULT_OUT_DIR)]
    out_dir: PathBuf,
    /// Recorded verbatim as catalogGitHead.
    #[arg(long)]
    catalog_git_head: Option<String>,
    /// Recorded as catalogPath instead of the derived value.
    #[arg(long)]
    source_label: Option<String>,
    /// Pin the Default collaboration-mode preset from a captured text file.
    #[arg(long)]
    collaboration_default: Option<PathBuf>,
    /// Compare with the committed fixtures instead of writing; exit 1 on drift.
    #[arg(long)]
    check: bool,
}

#[derive(Subcommand, Debug)]
enum FixturesCommand {
    /// Check every pinned fixture against the SHA-256 in its source.json.
    Verify {
        /// Repository root (default: the current directory).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct CodexArgs {
    /// The Codex CLI binary (default: $CODEX_BIN, then `codex` on PATH).
    #[arg(long)]
    codex_bin: Option<PathBuf>,
    /// CODEX_HOME for the app-server (offline: default a throwaway folder; never ~/.codex).
    #[arg(long)]
    codex_home: Option<PathBuf>,
    /// Script the offline stub's answers per model request (JSON; see README).
    #[arg(long)]
    stub_script: Option<PathBuf>,
    /// Command answering dynamic tool calls (JSON on stdin, {text|contentItems, success} on stdout).
    #[arg(long)]
    tool_handler: Option<String>,
    /// Approve Codex approval requests (default: decline).
    #[arg(long)]
    approve: bool,
    /// End the turn after this many seconds without progress.
    #[arg(long, default_value_t = 300)]
    idle_timeout: u64,
    /// End the turn after this many seconds in all.
    #[arg(long, default_value_t = 3600)]
    turn_timeout: u64,
    /// Where `once` truncation warnings are remembered (default: the platform state dir).
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

/// Failures the binary reports, with the exit code each one maps to.
#[derive(Debug)]
enum Failure {
    BadInput(anyhow::Error),
    Internal(anyhow::Error),
    /// Codex could not be started or the handshake failed (exit 3).
    Startup(anyhow::Error),
}

impl From<clawbridge::app::pairing::PairingError> for Failure {
    fn from(error: clawbridge::app::pairing::PairingError) -> Self {
        use clawbridge::app::pairing::PairingError;
        match error {
            PairingError::Input(error) => error.into(),
            PairingError::Session(error) if error.is_startup() => Failure::Startup(error.into()),
            PairingError::Session(error) => Failure::Internal(error.into()),
        }
    }
}

impl From<clawbridge::Error> for Failure {
    fn from(error: clawbridge::Error) -> Self {
        if error.is_bad_input() {
            Failure::BadInput(error.into())
        } else {
            Failure::Internal(error.into())
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(2),
            };
        }
    };
    init_logging(cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(Failure::BadInput(error)) => {
            eprintln!("clawbridge: {error:#}");
            ExitCode::from(2)
        }
        Err(Failure::Internal(error)) => {
            if is_broken_pipe(&error) {
                return ExitCode::SUCCESS;
            }
            eprintln!("clawbridge: {error:#}");
            ExitCode::from(1)
        }
        Err(Failure::Startup(error)) => {
            eprintln!("clawbridge: {error:#}");
            ExitCode::from(3)
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CLAWBRIDGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Params {
            run,
            state_dir,
            bootstrap_hook,
        } => {
            let (run, options) = load_run(&run, state_dir, bootstrap_hook)?;
            if run.harness == clawbridge::config::Harness::Embedded {
                return Err(Failure::BadInput(anyhow::anyhow!(
                    "{}: field `harness`: \"embedded\" runs have no Codex params; use `clawbridge context` (the OpenClaw system prompt arrives with `clawbridge prompt`)",
                    run.source.display()
                )));
            }
            let translation = translate(&run, &options)?;
            let params = translation.codex_params(&run);
            let text = serde_json::to_string_pretty(&params)
                .context("serializing params")
                .map_err(Failure::Internal)?;
            print_stdout(&format!("{text}\n"))
        }
        Command::Prompt {
            run,
            mode,
            split,
            provider,
            bootstrap_hook,
            state_dir,
        } => {
            use clawbridge::render::adapter::{HostRuntime, PromptOptions};
            let (mut run, options) = load_run(&run, state_dir, bootstrap_hook)?;
            // OpenClaw's own prompt is what non-Codex harnesses get: route the run that way.
            run.harness = clawbridge::config::Harness::Embedded;
            let translation = translate(&run, &options)?;
            let provider = match provider {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("{}: cannot read", path.display()))
                        .map_err(Failure::BadInput)?;
                    Some(
                        serde_json::from_str(&text)
                            .with_context(|| {
                                format!("{}: not a provider contribution", path.display())
                            })
                            .map_err(Failure::BadInput)?,
                    )
                }
                None => None,
            };
            let mode = mode.map(|mode| match mode.as_str() {
                "minimal" => clawbridge::config::PromptMode::Minimal,
                "none" => clawbridge::config::PromptMode::None,
                _ => clawbridge::config::PromptMode::Full,
            });
            let prompt = translation.system_prompt(
                &run,
                &PromptOptions {
                    mode,
                    host: HostRuntime::from_process(),
                    provider,
                    before_prompt_build: None,
                    detect_repo_root: true,
                },
            );
            if split {
                let text = serde_json::to_string_pretty(&prompt)
                    .context("serializing the prompt")
                    .map_err(Failure::Internal)?;
                print_stdout(&format!("{text}\n"))
            } else {
                print_stdout(&format!("{}\n", prompt.text()))
            }
        }
        Command::Context {
            run,
            json,
            detail,
            state_dir,
            bootstrap_hook,
        } => {
            let (run, options) = load_run(&run, state_dir, bootstrap_hook)?;
            let translation = translate(&run, &options)?;
            let report = context_report(&run, &translation, detail);
            let text = if json {
                let mut text = serde_json::to_string_pretty(&report)
                    .context("serializing the report")
                    .map_err(Failure::Internal)?;
                text.push('\n');
                text
            } else {
                report.render_text()
            };
            print_stdout(&text)
        }
        Command::SyncCodexModel(args) => sync_codex_model(args),
        Command::Run {
            run,
            offline,
            json,
            codex,
        } => block_on(run_command(run, offline, json, codex)),
        Command::Capture { run, out, codex } => block_on(capture_command(run, out, codex)),
        Command::Serve {
            listen,
            token,
            no_auth,
            allow_origins,
            allow_hosts,
            max_sandbox,
            workspace_roots,
            codex_bin,
            codex_home,
            state_dir,
            offline,
            stub_script,
            answer_timeout,
        } => {
            let binary = clawbridge::codex::client::process::find_codex_binary(
                codex_bin.as_deref(),
                std::env::var_os("CODEX_BIN"),
                std::env::var_os("PATH"),
            )
            .map_err(|message| Failure::Startup(anyhow::anyhow!(message)))?;
            let state_dir = state_dir
                .or_else(WarningLedger::default_state_dir)
                .ok_or_else(|| {
                    Failure::BadInput(anyhow::anyhow!("no state directory; pass --state-dir"))
                })?;
            let stub_script = match &stub_script {
                Some(path) => clawbridge::app::offline::StubScript::load(path)?,
                None => clawbridge::app::offline::StubScript::default(),
            };
            let max_sandbox = match max_sandbox.as_str() {
                "read-only" => clawbridge::config::SandboxMode::ReadOnly,
                "danger-full-access" => clawbridge::config::SandboxMode::DangerFullAccess,
                _ => clawbridge::config::SandboxMode::WorkspaceWrite,
            };
            let config = clawbridge::server::ServeConfig {
                listen,
                token,
                no_auth,
                allow_origins,
                allow_hosts,
                max_sandbox,
                workspace_roots,
                codex_bin: binary.path,
                codex_home,
                state_dir,
                offline,
                stub_script,
                limits: clawbridge::codex::client::session::TurnLimits::default(),
                answer_timeout: std::time::Duration::from_secs(answer_timeout),
                max_request_bytes: 16 * 1024 * 1024,
            };
            block_on(serve_command(config))
        }
        Command::Snapshots(SnapshotsCommand::Gen {
            root,
            raw,
            codex_bin,
        }) => {
            let report = clawbridge::artifacts::snapshots::write_snapshots(&root)?;
            let mut text = format!("Wrote {} prompt snapshot files.", report.written);
            if !report.deleted.is_empty() {
                text.push_str(&format!(" Deleted {} stale file(s).", report.deleted.len()));
            }
            text.push('\n');
            print_stdout(&text)?;
            if raw {
                for (scenario, run) in clawbridge::artifacts::snapshots::scenario_runs() {
                    let out = root
                        .join(clawbridge::artifacts::snapshots::RAW_DIR)
                        .join(scenario);
                    let codex = CodexArgs {
                        codex_bin: codex_bin.clone(),
                        codex_home: None,
                        stub_script: None,
                        tool_handler: None,
                        approve: false,
                        idle_timeout: 300,
                        turn_timeout: 3600,
                        state_dir: None,
                    };
                    block_on(capture_command(root.join(run), out, codex))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Snapshots(SnapshotsCommand::Check { root }) => {
            let (count, drift) = clawbridge::artifacts::snapshots::check_snapshots(&root)?;
            if drift.is_empty() {
                return print_stdout(&format!("Prompt snapshots are current ({count} files).\n"));
            }
            let mut report = format!(
                "prompt snapshot drift detected; run `{}` (or scripts/snapshots-gen) and commit the result\n",
                clawbridge::artifacts::snapshots::GEN_COMMAND
            );
            for finding in &drift {
                report.push_str(&finding.line());
                report.push('\n');
            }
            for finding in &drift {
                report.push_str(&finding.diff);
            }
            eprint!("{report}");
            Ok(ExitCode::from(1))
        }
        Command::Fixtures(FixturesCommand::Verify { root }) => {
            let (verified, problems) = clawbridge::artifacts::catalog::verify_fixtures(&root);
            if problems.is_empty() {
                return print_stdout(&format!("Verified {verified} pinned fixtures.\n"));
            }
            for problem in &problems {
                eprintln!("{}: {}", problem.path.display(), problem.message);
            }
            eprintln!(
                "fixture verification failed ({} problem(s), {verified} fixtures verified)",
                problems.len()
            );
            Ok(ExitCode::from(1))
        }
    }
}

fn sync_codex_model(args: SyncArgs) -> Result<ExitCode, Failure> {
    use clawbridge::artifacts::catalog::{
        apply_plan, check_plan, find_catalog, plan_sync, DiscoveryEnv, FileOutcome, Personality,
        SyncRequest,
    };
    let personality: Personality = args.personality.parse()?;
    let catalog = match args.catalog {
        Some(path) => path,
        None => {
            let (found, candidates) = find_catalog(&DiscoveryEnv::from_process());
            match found {
                Some(found) => {
                    tracing::info!("using Codex catalog {}", found.display());
                    found
                }
                None => {
                    let mut text = String::from(
                        "No Codex model catalog/cache found; leaving the pinned fixture unchanged.\nLooked in:\n",
                    );
                    for candidate in &candidates {
                        text.push_str(&format!("- {}\n", candidate.display()));
                    }
                    text.push_str("Pass --catalog <path to models_cache.json or models.json> to refresh explicitly.\n");
                    return print_stdout(&text);
                }
            }
        }
    };
    let request = SyncRequest {
        catalog,
        model: args.model.clone(),
        personality,
        out_dir: args.out_dir,
        git_head: args.catalog_git_head,
        source_label: args.source_label,
        collaboration_default: args.collaboration_default,
    };
    let plan = plan_sync(&request)?;
    for notice in &plan.notices {
        eprintln!("note: {notice}");
    }
    if args.check {
        let drift = check_plan(&plan);
        if drift.is_empty() {
            return print_stdout(&format!(
                "Codex {} {} prompt fixture is current ({} files).\n",
                args.model,
                personality.as_str(),
                plan.files.len()
            ));
        }
        let mut text = String::new();
        for (path, diff) in &drift {
            text.push_str(&format!("- {}: differs from the catalog\n", path.display()));
            text.push_str(diff);
        }
        text.push_str("Run `clawbridge sync-codex-model` with the same options to re-pin it.\n");
        print_stdout(&text)?;
        return Ok(ExitCode::from(1));
    }
    let outcomes = apply_plan(&plan)?;
    let mut text = String::new();
    for outcome in &outcomes {
        match outcome {
            FileOutcome::Written(path) => text.push_str(&format!("wrote {}\n", path.display())),
            FileOutcome::Unchanged(path) => {
                text.push_str(&format!("unchanged {}\n", path.display()))
            }
        }
    }
    let written = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, FileOutcome::Written(_)))
        .count();
    text.push_str(&if written == 0 {
        format!(
            "Codex {} {} prompt fixture unchanged.\n",
            args.model,
            personality.as_str()
        )
    } else {
        format!(
            "Wrote Codex {} {} prompt fixture ({written} file(s) changed).\n",
            args.model,
            personality.as_str()
        )
    });
    print_stdout(&text)
}

/// Load the run document and the live facts; warn about config keys we do not read.
fn load_run(
    path: &Path,
    state_dir: Option<PathBuf>,
    bootstrap_hook: Option<String>,
) -> Result<(Run, TranslateOptions), Failure> {
    let run = Run::load(path)?;
    for key in run.config.unknown_keys() {
        tracing::warn!(
            "{}: config key `{key}` is not read by clawbridge",
            path.display()
        );
    }
    let ledger = match state_dir.or_else(WarningLedger::default_state_dir) {
        Some(dir) => std::sync::Arc::new(WarningLedger::in_dir(&dir)),
        None => std::sync::Arc::new(WarningLedger::ephemeral()),
    };
    Ok((
        run,
        TranslateOptions {
            host: HostFacts::from_process(),
            ledger,
            skill_cache: None,
            bootstrap_hook,
        },
    ))
}

fn print_stdout(text: &str) -> Result<ExitCode, Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
        .map_err(Failure::Internal)?;
    Ok(ExitCode::SUCCESS)
}

fn block_on<F: std::future::Future<Output = Result<ExitCode, Failure>>>(
    future: F,
) -> Result<ExitCode, Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
        .map_err(Failure::Internal)?;
    runtime.block_on(future)
}

/// Validated inputs of `run` and `capture`.
fn pairing_setup(
    run_path: &Path,
    codex: &CodexArgs,
    offline: bool,
) -> Result<
    (
        Run,
        clawbridge::codex::protocol::params::CodexParams,
        clawbridge::app::pairing::PairingOptions,
    ),
    Failure,
> {
    use clawbridge::app::offline::StubScript;
    use clawbridge::app::pairing::PairingOptions;
    use clawbridge::codex::client::handler::DefaultHandler;
    use clawbridge::codex::client::process::find_codex_binary;
    use clawbridge::codex::client::session::TurnLimits;

    let (run, options) = load_run(run_path, codex.state_dir.clone(), None)?;
    if run.harness == clawbridge::config::Harness::Embedded {
        return Err(Failure::BadInput(anyhow::anyhow!(
            "{}: field `harness`: \"embedded\" runs are not executed by Codex",
            run.source.display()
        )));
    }
    if codex.stub_script.is_some() && !offline {
        return Err(Failure::BadInput(anyhow::anyhow!(
            "--stub-script needs --offline"
        )));
    }
    let translation = translate(&run, &options)?;
    let params = translation.codex_params(&run);
    let binary = find_codex_binary(
        codex.codex_bin.as_deref(),
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    )
    .map_err(|message| Failure::Startup(anyhow::anyhow!(message)))?;
    tracing::info!("using {} (from {})", binary.path.display(), binary.via);
    let mut pairing = PairingOptions::new(binary.path);
    pairing.codex_home = codex.codex_home.clone();
    pairing.offline = offline;
    if let Some(path) = &codex.stub_script {
        pairing.stub_script = StubScript::load(path)?;
    }
    pairing.handler = DefaultHandler {
        tool_command: codex.tool_handler.clone(),
        approve: codex.approve,
        tool_timeout: Some(std::time::Duration::from_secs(codex.idle_timeout)),
    };
    pairing.limits = TurnLimits {
        idle: std::time::Duration::from_secs(codex.idle_timeout.max(1)),
        hard: std::time::Duration::from_secs(codex.turn_timeout.max(1)),
        ..TurnLimits::default()
    };
    Ok((run, params, pairing))
}

async fn run_command(
    run_path: PathBuf,
    offline: bool,
    json: bool,
    codex: CodexArgs,
) -> Result<ExitCode, Failure> {
    use clawbridge::codex::client::session::{TurnEvent, TurnStatus};
    let (run, params, options) = pairing_setup(&run_path, &codex, offline)?;
    let mut out = std::io::stdout();
    let mut write_failed = false;
    let mut observer = |event: TurnEvent<'_>| {
        let line = if json {
            let value = match event {
                TurnEvent::Notification { method, params } => {
                    serde_json::json!({"event": "notification", "method": method, "params": params})
                }
                TurnEvent::ServerRequest { request } => serde_json::json!({
                    "event": "serverRequest", "id": request.id, "method": request.method, "params": request.params
                }),
                TurnEvent::Answered { id, answer } => match answer {
                    Ok(result) => {
                        serde_json::json!({"event": "answer", "id": id, "result": result})
                    }
                    Err(error) => serde_json::json!({"event": "answer", "id": id, "error": error}),
                },
            };
            format!("{value}\n")
        } else {
            match event {
                TurnEvent::Notification {
                    method: "item/agentMessage/delta",
                    params,
                } => params["delta"].as_str().unwrap_or_default().to_string(),
                TurnEvent::Notification {
                    method: "item/completed",
                    params,
                } if params["item"]["type"] == "agentMessage" => "\n".to_string(),
                TurnEvent::Notification {
                    method: "error",
                    params,
                } => {
                    eprintln!(
                        "[error] {}",
                        params["error"]["message"].as_str().unwrap_or("?")
                    );
                    String::new()
                }
                TurnEvent::ServerRequest { request } => {
                    eprintln!(
                        "[{}] {} {}",
                        request.method,
                        request.params["tool"].as_str().unwrap_or(""),
                        request.params["arguments"]
                    );
                    String::new()
                }
                TurnEvent::Answered {
                    answer: Err(error), ..
                } => {
                    eprintln!("[answer] error: {}", error.message);
                    String::new()
                }
                _ => String::new(),
            }
        };
        if !line.is_empty() && !write_failed {
            write_failed = out
                .write_all(line.as_bytes())
                .and_then(|()| out.flush())
                .is_err();
        }
    };
    let result =
        clawbridge::app::pairing::run_pairing(&run, params, &options, &mut observer).await?;
    let outcome = &result.outcome;
    let status = match outcome.status {
        TurnStatus::Completed => "completed",
        TurnStatus::Failed => "failed",
        TurnStatus::Interrupted => "interrupted",
    };
    if json {
        let end = serde_json::json!({
            "event": "turnEnd", "status": status, "threadId": result.thread_id, "turnId": outcome.turn_id,
            "error": outcome.error, "agentMessages": outcome.agent_messages,
            "codexVersion": result.codex_version, "modelRequests": result.requests.len(),
        });
        print_stdout(&format!("{end}\n"))?;
    } else {
        eprintln!(
            "clawbridge: turn {status} (thread {}, codex {}){}",
            result.thread_id,
            result.codex_version.as_deref().unwrap_or("?"),
            outcome
                .error
                .as_deref()
                .map(|error| format!(": {error}"))
                .unwrap_or_default()
        );
        if offline {
            eprintln!(
                "clawbridge: the offline stub received {} model request(s); `clawbridge capture` writes them out",
                result.requests.len()
            );
        }
    }
    Ok(if outcome.status == TurnStatus::Completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn capture_command(
    run_path: PathBuf,
    out: PathBuf,
    codex: CodexArgs,
) -> Result<ExitCode, Failure> {
    use clawbridge::app::capture::{label_layers, redacted_request, render_layers, Redactions};
    use clawbridge::codex::protocol::params::ThreadParams;
    let (run, params, options) = pairing_setup(&run_path, &codex, true)?;
    let developer = match &params.thread {
        ThreadParams::ThreadStart(start) => start.developer_instructions.clone(),
        ThreadParams::ThreadResume(resume) => resume.developer_instructions.clone(),
    };
    let mut observer = |_: clawbridge::codex::client::session::TurnEvent<'_>| {};
    let result =
        clawbridge::app::pairing::run_pairing(&run, params, &options, &mut observer).await?;
    if result.requests.is_empty() {
        return Err(Failure::Internal(anyhow::anyhow!(
            "Codex sent no model request (turn {:?}: {})",
            result.outcome.status,
            result.outcome.error.as_deref().unwrap_or("no error")
        )));
    }
    let mut redactions = Redactions::default();
    redactions.add_path(&run.workspace, "<workspace>");
    redactions.add_path(&run.cwd, "<cwd>");
    // Codex reports the git checkout around the workspace in its turn metadata.
    if let Some(git_root) = run.cwd.ancestors().find(|dir| dir.join(".git").exists()) {
        redactions.add_path(git_root, "<git-root>");
    }
    redactions.add_path(&result.codex_home, "<codex-home>");
    if let Some(home) = dirs::home_dir() {
        redactions.add_path(&home, "<home>");
    }
    redactions.add_path(&std::env::temp_dir(), "<tmp>");
    redactions.add(result.thread_id.clone(), "<thread-id>");
    let mut written = Vec::new();
    for (index, request) in result.requests.iter().enumerate() {
        let name = if index == 0 {
            "model-request.json".to_string()
        } else {
            format!("model-request.{}.json", index + 1)
        };
        let document = redacted_request(request, &redactions);
        let text = format!("{}\n", clawbridge::support::json::to_pretty(&document));
        clawbridge::support::fs::write_atomic(&out.join(&name), text.as_bytes())?;
        written.push(name);
    }
    let first = redacted_request(&result.requests[0], &redactions);
    let sent_developer = redactions.redact(&serde_json::Value::String(developer));
    let layers = label_layers(&first["body"], sent_developer.as_str());
    let title = format!(
        "Model-bound request layers: {} (Codex {})",
        run_path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        result.codex_version.as_deref().unwrap_or("?")
    );
    clawbridge::support::fs::write_atomic(
        &out.join("layers.md"),
        render_layers(&layers, &title).as_bytes(),
    )?;
    written.push("layers.md".to_string());
    let mut summary = format!(
        "Captured {} model request(s) into {}:\n",
        result.requests.len(),
        out.display()
    );
    for name in &written {
        summary.push_str(&format!("- {name}\n"));
    }
    summary.push_str("Layers of the first request:\n");
    for layer in &layers {
        summary.push_str(&format!(
            "  {:<40} {:<22} {:>7} chars\n",
            layer.label.chars().take(40).collect::<String>(),
            layer.position,
            layer.chars
        ));
    }
    print_stdout(&summary)
}

async fn serve_command(config: clawbridge::server::ServeConfig) -> Result<ExitCode, Failure> {
    use clawbridge::server::ServeError;
    let running = clawbridge::server::start(config)
        .await
        .map_err(|error| match error {
            ServeError::Setup(error) => Failure::from(error),
            other => Failure::BadInput(other.into()),
        })?;
    print_stdout(&format!("{}\n", running.addr))?;
    match &running.token_file {
        Some(file) => eprintln!(
            "clawbridge serve: {} bearer token in {} (clients send `Authorization: Bearer <token>`)",
            if file.created { "generated a" } else { "using the" },
            file.path.display()
        ),
        None if running.token.is_none() => {
            eprintln!("clawbridge serve: WARNING: --no-auth: no token required")
        }
        None => {}
    }
    tracing::info!("clawbridge serve listening on {}", running.addr);
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("shutting down"),
        _ = running.handle.clone().stopped() => {}
    }
    let _ = running.handle.stop();
    Ok(ExitCode::SUCCESS)
}
