//! The `clawbridge` binary: parse flags, call the app layer, print, map errors to exit codes.
//!
//! Exit codes: 0 success; 1 a failed check, a failed turn or an internal fault; 2 bad input or
//! usage; 3 Codex could not be started or the handshake failed. stdout carries only the
//! command's output; logs go to stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

mod cli;
use cli::*;

use clawbridge::app::{commands, fixtures, pairing::PairingError, run as pairing};
use clawbridge::error::ErrorKind;

/// mimalloc: the bridge frees messages on other threads than the one that read them, which
/// glibc's allocator serializes on an arena lock (see `cargo bench --bench peer`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A failure with the exit code it maps to.
struct Failure(anyhow::Error, u8);

impl From<clawbridge::Error> for Failure {
    fn from(error: clawbridge::Error) -> Self {
        let code = match error.kind() {
            ErrorKind::Io => 1,
            _ => 2,
        };
        Failure(error.into(), code)
    }
}

impl From<PairingError> for Failure {
    fn from(error: PairingError) -> Self {
        match error {
            PairingError::Input(error) => error.into(),
            PairingError::Session(error) if error.is_startup() => Failure(error.into(), 3),
            other => Failure(other.into(), 1),
        }
    }
}

impl From<clawbridge::server::ServeError> for Failure {
    fn from(error: clawbridge::server::ServeError) -> Self {
        use clawbridge::server::ServeError;
        match error {
            ServeError::Setup(error) => error.into(),
            ServeError::Bind { .. } => Failure(error.into(), 1),
            other => Failure(other.into(), 2),
        }
    }
}

fn main() -> ExitCode {
    // OpenClaw's Codex slot calls `clawbridge -c ... app-server ...`, a shape clap cannot read.
    let given: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match clawbridge::proxy::slot_invocation(&given) {
        Ok(Some(invocation)) => {
            init_logging(0);
            return match slot(invocation) {
                Ok(code) => code,
                Err(Failure(error, code)) => {
                    eprintln!("clawbridge app-server: {error:#}");
                    ExitCode::from(code)
                }
            };
        }
        Ok(None) => {}
        Err(error) => {
            eprintln!("clawbridge app-server: {error}");
            return ExitCode::from(2);
        }
    }
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
        Err(Failure(error, _)) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(Failure(error, code)) => {
            eprintln!("clawbridge: {error:#}");
            ExitCode::from(code)
        }
    }
}

/// A call in OpenClaw's Codex slot: the proxy, or the real Codex for anything else.
fn slot(invocation: clawbridge::proxy::SlotInvocation) -> Result<ExitCode, Failure> {
    match invocation {
        clawbridge::proxy::SlotInvocation::Proxy(parsed) => proxy(parsed.into()),
        clawbridge::proxy::SlotInvocation::Passthrough(args) => {
            let never =
                clawbridge::proxy::passthrough(&args).map_err(|error| Failure(error.into(), 3))?;
            match never {}
        }
    }
}

fn proxy(settings: clawbridge::proxy::ProxySettings) -> Result<ExitCode, Failure> {
    block_on(async move {
        let code = clawbridge::proxy::run_proxy(settings)
            .await
            .map_err(|error| {
                let code = match error {
                    clawbridge::proxy::ProxyError::Transcript { .. }
                    | clawbridge::proxy::ProxyError::Offline(_) => 2,
                    _ => 3,
                };
                Failure(error.into(), code)
            })?;
        Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
    })
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    let load = |args: &RunArgs| -> Result<_, Failure> {
        let run = commands::load_run_file(&args.run)?;
        let options = commands::translate_options(
            args.state_dir.as_deref(),
            args.bootstrap_hook.clone(),
            None,
        );
        Ok((run, options))
    };
    match cli.command {
        Command::Params(args) => {
            let (run, options) = load(&args)?;
            print_json(&commands::params(&run, &options)?)
        }
        Command::Prompt {
            args,
            mode,
            split,
            provider,
            no_cache_boundary,
            before_prompt_build,
        } => {
            let (run, options) = load(&args)?;
            let settings = commands::PromptSettings {
                mode: mode.map(|mode| match mode {
                    ModeArg::Full => clawbridge::config::PromptMode::Full,
                    ModeArg::Minimal => clawbridge::config::PromptMode::Minimal,
                    ModeArg::None => clawbridge::config::PromptMode::None,
                }),
                provider: provider
                    .as_deref()
                    .map(commands::load_provider)
                    .transpose()?,
                cache_boundary: !no_cache_boundary,
                before_prompt_build,
            };
            let prompt = commands::prompt(&run, &options, &settings)?;
            if split {
                print_json(&prompt)
            } else {
                print_stdout(&format!("{}\n", prompt.text()))
            }
        }
        Command::Context { args, json, detail } => {
            let (run, options) = load(&args)?;
            let report = commands::context(&run, &options, detail)?;
            if json {
                print_json(&report)
            } else {
                print_stdout(&report.render_text())
            }
        }
        Command::SyncCodexModel(args) => {
            print_output(fixtures::sync_codex_model(fixtures::SyncSettings {
                catalog: args.catalog,
                model: args.model,
                personality: match args.personality {
                    PersonalityArg::Default => clawbridge::artifacts::catalog::Personality::Default,
                    PersonalityArg::Friendly => {
                        clawbridge::artifacts::catalog::Personality::Friendly
                    }
                    PersonalityArg::Pragmatic => {
                        clawbridge::artifacts::catalog::Personality::Pragmatic
                    }
                },
                out_dir: args.out_dir,
                catalog_git_head: args.catalog_git_head,
                source_label: args.source_label,
                collaboration_default: args.collaboration_default,
                check: args.check,
            })?)
        }
        Command::AppServer(args) => proxy(clawbridge::proxy::ProxySettings {
            codex_bin: args.codex_bin,
            transcript: args.transcript,
            args: args.args,
            offline: args.offline,
            capture: args.capture,
            stub_script: args.stub_script,
            check: !args.no_check,
            schema_cache: None,
        }),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "clawbridge", &mut script);
            print_stdout(&String::from_utf8_lossy(&script))
        }
        Command::Doctor(args) => {
            use clawbridge::app::doctor;
            let findings = doctor::doctor(&doctor::DoctorSettings {
                codex_bin: args.codex_bin,
                codex_home: args.codex_home,
                state_dir: args.state_dir,
                listen: args.listen,
                workspace_roots: args.workspace_roots,
            });
            let failed = findings.iter().any(|f| f.level == doctor::Level::Fail);
            if args.json {
                print_json(&findings)?;
            } else {
                print_stdout(&doctor::render(&findings))?;
            }
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Schema(SchemaCommand::RunDocument) => {
            print_json(&clawbridge::config::run::run_document_schema())
        }
        Command::Schema(SchemaCommand::Openrpc) => print_json(&clawbridge::server::api::openrpc()),
        Command::Fixtures(FixturesCommand::Verify { root }) => {
            print_output(fixtures::fixtures_verify(&root))
        }
        Command::Run {
            run,
            offline,
            json,
            codex,
        } => block_on(run_command(run, json, codex.settings(offline))),
        Command::Capture { run, out, codex } => block_on(async move {
            let report = pairing::capture(&run, &out, &codex.settings(true)).await?;
            print_stdout(&report.render_text())
        }),
        Command::Serve(args) => serve_command(args),
        Command::Snapshots(SnapshotsCommand::Gen {
            root,
            raw,
            codex_bin,
        }) => {
            let output = fixtures::snapshots_gen(&root)?;
            print_output(output)?;
            if raw {
                block_on(async move {
                    pairing::capture_scenarios(&root, codex_bin).await?;
                    Ok(ExitCode::SUCCESS)
                })?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Snapshots(SnapshotsCommand::Check { root }) => {
            print_output(fixtures::snapshots_check(&root)?)
        }
        Command::Client(command) => client(command),
    }
}

async fn run_command(
    run: PathBuf,
    json: bool,
    settings: pairing::PairingSettings,
) -> Result<ExitCode, Failure> {
    let mut out = std::io::stdout();
    let mut write_failed = false;
    let mut line = Vec::with_capacity(4096);
    let mut transcript = pairing::HumanTranscript::default();
    let mut observer = |event: clawbridge::codex::client::session::TurnEvent<'_>| {
        line.clear();
        if json {
            clawbridge::app::events::RunEvent::write_json_line(&event, &mut line);
        } else {
            let (stdout, stderr) = transcript.event(&event);
            eprint!("{stderr}");
            line.extend_from_slice(stdout.as_bytes());
        }
        // Each event is written (and flushed) as it happens: a consumer streams them.
        if !line.is_empty() && !write_failed {
            write_failed = out.write_all(&line).and_then(|()| out.flush()).is_err();
        }
    };
    let report = pairing::run_turn(&run, &settings, &mut observer).await?;
    if json {
        print_stdout(&format!("{}\n", report.turn_end().to_value()))?;
    } else {
        eprint!("{}", transcript.finish(&report));
    }
    let completed = report.status == clawbridge::codex::client::session::TurnStatus::Completed;
    Ok(if completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn serve_command(args: ServeArgs) -> Result<ExitCode, Failure> {
    use clawbridge::config::SandboxMode;
    // Without a Codex CLI the service still answers params, context and prompt; runs fail with
    // 4100 and the reason (how to install one).
    let binary = match clawbridge::codex::client::process::find_codex_binary(
        args.codex_bin.as_deref(),
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    ) {
        Ok(found) => clawbridge::server::CodexBinary::Found(found.path),
        Err(reason) => clawbridge::server::CodexBinary::Missing(reason),
    };
    let stub_script = match &args.stub_script {
        Some(path) => clawbridge::app::offline::StubScript::load(path)?,
        None => clawbridge::app::offline::StubScript::default(),
    };
    let config = clawbridge::server::ServeConfig {
        listen: args.listen,
        token: args.token,
        no_auth: args.no_auth,
        allow_origins: args.allow_origins,
        allow_hosts: args.allow_hosts,
        max_sandbox: match args.max_sandbox {
            SandboxArg::ReadOnly => SandboxMode::ReadOnly,
            SandboxArg::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            SandboxArg::DangerFullAccess => SandboxMode::DangerFullAccess,
        },
        codex_home: args.codex_home,
        offline: args.offline,
        stub_script,
        answer_timeout: std::time::Duration::from_secs(args.answer_timeout),
        request_timeout: std::time::Duration::from_secs(args.request_timeout.max(1)),
        max_finished_runs: args.max_finished_runs,
        finished_run_ttl: std::time::Duration::from_secs(args.finished_run_ttl),
        max_connections: args.max_connections.max(1),
        max_runs: args.max_runs.max(1),
        max_run_bytes: args.max_run_bytes.max(1024),
        clients_file: args.clients,
        recycle_after_threads: args.recycle_after_threads.max(1),
        max_sessions: args
            .max_sessions
            .clamp(1, clawbridge::server::MAX_SESSIONS_LIMIT),
        recycle_rss_bytes: args.recycle_rss_mb.max(1).saturating_mul(1024 * 1024),
        subscriber_stall: std::time::Duration::from_secs(args.subscriber_stall.max(1)),
        idle_timeout: std::time::Duration::from_secs(args.idle_timeout.max(1)),
        ..clawbridge::server::ServeConfig::new(
            binary,
            args.workspace_roots,
            commands::state_dir(args.state_dir)?,
        )
    };
    block_on(async move {
        let running = clawbridge::server::start(config).await?;
        print_stdout(&format!("{}\n", running.addr))?;
        eprint!("{}", running.start_notice());
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .context("installing the SIGTERM handler")
                .map_err(|error| Failure(error, 1))?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
            _ = running.handle.clone().stopped() => return Ok(ExitCode::SUCCESS),
        }
        eprintln!("clawbridge serve: shutting down (a second signal exits at once)");
        // A second signal ends the process at once.
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            std::process::exit(130);
        });
        running.shutdown(std::time::Duration::from_secs(9)).await;
        Ok(ExitCode::SUCCESS)
    })
}

fn client(command: cli::ClientCommand) -> Result<ExitCode, Failure> {
    use clawbridge::app::clients::{clients_path, ClientsFile};
    match command {
        cli::ClientCommand::Add {
            name,
            operator,
            state_dir,
        } => {
            let path = clients_path(&commands::state_dir(state_dir)?);
            let token = ClientsFile::add(&path, &name, operator)?;
            eprintln!(
                "clawbridge client: added {name}{} to {}; its token (shown once):",
                if operator { " (operator)" } else { "" },
                path.display()
            );
            print_stdout(&format!("{token}\n"))
        }
        cli::ClientCommand::List { state_dir } => {
            let path = clients_path(&commands::state_dir(state_dir)?);
            let file = ClientsFile::load(&path)?;
            let lines: String = file
                .clients
                .iter()
                .map(|client| {
                    format!(
                        "{}\t{}\n",
                        client.name,
                        if client.operator {
                            "operator"
                        } else {
                            "client"
                        }
                    )
                })
                .collect();
            print_stdout(&lines)
        }
    }
}

fn init_logging(verbose: u8) {
    let default = ["warn", "info", "debug"][usize::from(verbose.min(2))];
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

fn print_stdout(text: &str) -> Result<ExitCode, Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
        .map_err(|error| Failure(error, 1))?;
    Ok(ExitCode::SUCCESS)
}

fn print_json(value: &impl serde::Serialize) -> Result<ExitCode, Failure> {
    let text = serde_json::to_string_pretty(value)
        .context("serializing the output")
        .map_err(|error| Failure(error, 1))?;
    print_stdout(&format!("{text}\n"))
}

fn print_output(output: fixtures::Output) -> Result<ExitCode, Failure> {
    eprint!("{}", output.stderr);
    print_stdout(&output.stdout)?;
    Ok(if output.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn block_on<F: std::future::Future<Output = Result<ExitCode, Failure>>>(
    future: F,
) -> Result<ExitCode, Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
        .map_err(|error| Failure(error, 1))?;
    let result = runtime.block_on(future);
    // A blocking task still running (a translation past its deadline, the proxy's read of a
    // stdin the client keeps open) must not hold the exit: dropping the runtime would wait for
    // it without bound.
    runtime.shutdown_timeout(std::time::Duration::from_millis(250));
    result
}
