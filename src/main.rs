//! The `clawbridge` binary: parse flags ([`cli`]), call the app layer, print, and map errors to
//! exit codes ([`exit`]). stdout carries only the command's output; logs go to stderr.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

mod cli;
mod exit;
use cli::*;
use exit::{exit_code, is_broken_pipe, Failure};

use clawbridge::{commands, fixtures, run as pairing};

/// mimalloc: the bridge frees messages on other threads than the one that read them, which
/// glibc's allocator serializes on an arena lock (see `cargo bench --bench peer`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // OpenClaw's Codex slot calls `clawbridge -c ... app-server ...`, a shape clap cannot read:
    // normalised first, then parsed once by clap.
    let given: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args = match clawbridge::normalise(&given) {
        clawbridge::Normalised::Clap(args) => args,
        clawbridge::Normalised::Passthrough(args) => {
            init_logging(0);
            return match clawbridge::passthrough(&args) {
                Ok(never) => match never {},
                Err(error) => {
                    eprintln!("clawbridge app-server: {:#}", anyhow::Error::from(error));
                    ExitCode::from(3)
                }
            };
        }
    };
    let program = std::env::args_os()
        .next()
        .unwrap_or_else(|| "clawbridge".into());
    let cli = match Cli::try_parse_from(std::iter::once(program).chain(args)) {
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
    let name = match cli.command {
        Command::AppServer(_) => "clawbridge app-server",
        _ => "clawbridge",
    };
    match run(cli) {
        Ok(code) => code,
        Err(Failure(error, _)) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(Failure(error, code)) => {
            eprintln!("{name}: {error:#}");
            ExitCode::from(code)
        }
    }
}

fn app_server(args: clawbridge::AppServerArgs) -> Result<ExitCode, Failure> {
    block_on(async move {
        let code = clawbridge::run_app_server(args).await?;
        Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
    })
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Params(args) => {
            let (run, options) = args.load()?;
            print_json(&commands::params(&run, &options)?)
        }
        Command::Prompt(prompt_args) => {
            let (run, options) = prompt_args.args.load()?;
            let prompt = commands::prompt(&run, &options, &prompt_args.settings()?)?;
            if prompt_args.split {
                print_json(&prompt)
            } else {
                print_stdout(&format!("{}\n", prompt.text()))
            }
        }
        Command::Context { args, json, detail } => {
            let (run, options) = args.load()?;
            let report = commands::context(&run, &options, detail)?;
            if json {
                print_json(&report)
            } else {
                print_stdout(&report.render_text())
            }
        }
        // Every failure of the sync (an unsupported personality included) exits 1
        // (docs/snapshots.md §6.4); usage errors stay clap's 2.
        Command::SyncCodexModel(args) => {
            let sync = |error: clawbridge::Error| Failure(error.into(), 1);
            let settings = args.settings().map_err(sync)?;
            print_output(fixtures::sync_codex_model(settings).map_err(sync)?)
        }
        Command::AppServer(args) => app_server(args),
        Command::Completions { shell } => print_stdout(&cli::completions(shell)),
        Command::Doctor(args) => {
            use clawbridge::doctor;
            let findings = doctor::doctor(&args.settings());
            let failed = findings.iter().any(|f| f.level == doctor::Level::Fail);
            if args.json {
                print_json(&findings)?;
            } else {
                print_stdout(&doctor::render(&findings))?;
            }
            Ok(exit_code(!failed))
        }
        Command::Schema(SchemaCommand::RunDocument) => {
            print_json(&clawbridge::run_document_schema())
        }
        Command::Schema(SchemaCommand::Openrpc) => print_json(&clawbridge::openrpc()),
        Command::Fixtures(FixturesCommand::Verify { root }) => {
            print_output(fixtures::fixtures_verify(&root))
        }
        Command::Run {
            run,
            offline,
            json,
            codex,
            capture,
        } => block_on(async move {
            let settings = clawbridge::run::PairingSettings {
                live_capture: capture.settings(),
                ..codex.settings(offline)
            };
            let completed = pairing::run_to_stdout(&run, json, &settings).await?;
            Ok(exit_code(completed))
        }),
        Command::Capture { run, out, codex } => block_on(async move {
            let report = pairing::capture(&run, &out, &codex.settings(true)).await?;
            print_stdout(&report.render_text())
        }),
        Command::CacheReport {
            paths,
            json,
            html,
            fail_on_break,
        } => {
            let report = commands::cache_report(&paths, html.as_deref())?;
            if json {
                print_json(&report)?;
            } else {
                print_stdout(&report.render_text())?;
            }
            Ok(exit_code(!(fail_on_break && report.breaks > 0)))
        }
        Command::Serve(args) => serve_command(*args),
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

fn serve_command(args: ServeArgs) -> Result<ExitCode, Failure> {
    let config = args.into_config()?;
    block_on(async move {
        let running = clawbridge::serve(config).await?;
        print_stdout(&format!("{}\n", running.addr))?;
        eprint!("{}", running.start_notice());
        running
            .until_signal(std::time::Duration::from_secs(9))
            .await
            .context("installing the SIGTERM handler")
            .map_err(|error| Failure(error, 1))?;
        Ok(ExitCode::SUCCESS)
    })
}

fn client(command: cli::ClientCommand) -> Result<ExitCode, Failure> {
    use clawbridge::clients;
    match command {
        cli::ClientCommand::Add {
            name,
            operator,
            state_dir,
        } => {
            let path = clients::clients_path(&commands::state_dir(state_dir)?);
            let token = clients::ClientsFile::add(&path, &name, operator)?;
            eprintln!("{}", clients::added_notice(&name, operator, &path));
            print_stdout(&format!("{token}\n"))
        }
        cli::ClientCommand::List { state_dir } => {
            let path = clients::clients_path(&commands::state_dir(state_dir)?);
            print_stdout(&clients::ClientsFile::load(&path)?.render_list())
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
    Ok(exit_code(output.success))
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
