//! `clawbridge-runtime`: every command, the long-running ones (`serve`, `app-server`, `run`,
//! `capture`) and the rest, with the whole server stack linked in. Users run `clawbridge` (the
//! small front in `src/main.rs`), which does the one-shot commands itself and hands every other
//! command line to this binary unchanged (`exec`: the same process, the same pid). Both parse
//! the same flags ([`cli`]) and share the one-shot handlers ([`front`]); errors map to exit codes
//! in [`clawbridge::face::exit`]. stdout carries only the command's output; logs go to stderr.

use std::process::ExitCode;

use anyhow::Context as _;

use clawbridge::face::cli::{self, *};
use clawbridge::face::exit::{exit_code, Failure};
use clawbridge::face::front::{self, init_logging, print_json, print_stdout};

use clawbridge::{commands, fixtures, pairing};

/// mimalloc: the bridge frees messages on other threads than the one that read them, which
/// glibc's allocator serializes on an arena lock (see `cargo bench --bench peer`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // A jail stage (an app-server's private view of the machine) before anything else: a user
    // namespace takes only a single-threaded process.
    match clawbridge::jail_entry_point() {
        Some(Ok(code)) => return ExitCode::from(code),
        Some(Err(why)) => {
            eprintln!("clawbridge jail: {why}");
            return ExitCode::from(125);
        }
        None => {}
    }
    front::tie_to_launcher();
    let cli = match front::parse() {
        front::Parsed::Cli(cli) => cli,
        front::Parsed::Passthrough(args) => {
            init_logging(0, cli::Color::Auto, cli::LogFormat::Text);
            return match clawbridge::passthrough(&args) {
                Ok(never) => match never {},
                Err(error) => {
                    eprintln!("clawbridge app-server: {:#}", anyhow::Error::from(error));
                    ExitCode::from(3)
                }
            };
        }
        front::Parsed::Exit(code) => return code,
    };
    init_logging(cli.verbose, cli.color, cli.log_format);
    let name = match cli.command {
        Command::AppServer(_) | Command::AppServerReport(_) | Command::AppServerStatus(_) => {
            "clawbridge app-server"
        }
        _ => "clawbridge",
    };
    front::finish(name, run(cli))
}

fn app_server(args: clawbridge::AppServerArgs) -> Result<ExitCode, Failure> {
    block_on(async move {
        let code = clawbridge::run_app_server(args, &front::console()).await?;
        Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
    })
}

fn run(cli: Box<Cli>) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::OneShot(command) => front::one_shot(command),
        // Every failure of the sync (an unsupported personality included) exits 1
        // (docs/snapshots.md §6.4); usage errors stay clap's 2.
        Command::SyncCodexModel(args) => {
            let sync = |error: clawbridge::Error| Failure(error.into(), 1);
            let settings = args.settings().map_err(sync)?;
            print_output(fixtures::sync_codex_model(settings).map_err(sync)?)
        }
        Command::AppServer(args) => app_server(*args),
        Command::AppServerReport(args) => {
            let code = clawbridge::app_server_report(&args, &front::console())?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
        Command::AppServerStatus(args) => block_on(async move {
            let code = clawbridge::app_server_status(&args, &front::console()).await?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }),
        Command::Doctor(args) => block_on(async move {
            use clawbridge::doctor;
            let mut findings = doctor::doctor(&args.settings());
            if let Some(url) = &args.endpoint {
                findings.extend(
                    clawbridge::endpoint_findings(
                        url,
                        args.token_file.as_ref(),
                        args.state_dir.as_ref(),
                    )
                    .await,
                );
            }
            let failed = findings.iter().any(|f| f.level == doctor::Level::Fail);
            if args.json {
                print_json(&findings)?;
            } else {
                print_stdout(&doctor::render(&findings))?;
            }
            Ok(exit_code(!failed))
        }),
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
            let settings = pairing::PairingSettings {
                live_capture: capture.settings(),
                ..codex.settings(offline)
            };
            let completed = clawbridge::face::run::run_to_stdout(&run, json, &settings).await?;
            Ok(exit_code(completed))
        }),
        Command::Capture { run, out, codex } => block_on(async move {
            let report = pairing::capture(&run, &out, &codex.settings(true)).await?;
            print_stdout(&report.render_text())
        }),
        Command::Replay(args) => block_on(clawbridge::face::replay::run(*args)),
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
        Command::Audit {
            dir,
            json,
            html,
            fail_on,
            show_content,
            workspace,
            session_key,
        } => {
            let options = clawbridge::AuditOptions {
                show_content,
                workspace,
                session_key,
            };
            let (report, failed) = commands::audit(&dir, html.as_deref(), &fail_on, &options)?;
            if json {
                print_json(&report)?;
            } else {
                print_stdout(&report.render_text())?;
            }
            Ok(exit_code(!failed))
        }
        Command::Transcript(TranscriptCommand::Show {
            dir,
            thread,
            full,
            json,
            html,
        }) => {
            let options = clawbridge::ShowOptions { thread };
            let conversation = clawbridge::transcript_show(&dir, &options, html.as_deref())?;
            if json {
                print_json(&conversation)
            } else {
                print_stdout(&conversation.render_text(full))
            }
        }
        Command::ExportOtel {
            dir,
            otel,
            json,
            all,
        } => {
            let exported = commands::export_otel(&dir, &otel.settings(), all)?;
            if json {
                print_json(&exported)?;
            } else {
                print_stdout(&format!(
                    "exported {} spans: {} threads, {} turns, {} model calls, to {}{}\n",
                    exported.spans,
                    exported.threads,
                    exported.turns,
                    exported.model_calls,
                    exported.target,
                    match exported.already_sent {
                        0 => String::new(),
                        left => format!(
                            " ({left} traces left out: sent there live already; --all sends them too)"
                        ),
                    }
                ))?;
            }
            Ok(ExitCode::SUCCESS)
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
                    pairing::capture_scenarios(&root, codex_bin, &mut |done, total, scenario| {
                        // Each capture is a real Codex turn (about a second): say where the
                        // work is.
                        eprintln!("snapshots gen --raw: [{done}/{total}] {scenario}")
                    })
                    .await?;
                    Ok(ExitCode::SUCCESS)
                })?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Snapshots(SnapshotsCommand::Check { root }) => {
            print_output(fixtures::snapshots_check(&root)?)
        }
        Command::Client(command) => client(command),
        Command::Schema(SchemaCommand::RunDocument) => {
            print_json(&clawbridge::run_document_schema())
        }
        Command::Schema(SchemaCommand::Openrpc) => print_json(&clawbridge::openrpc()),
        Command::Schema(SchemaCommand::Diff { old, new, json }) => {
            let diff = clawbridge::schema_diff(&old, &new)
                .context("comparing the schema folders")
                .map_err(|error| Failure(error, 2))?;
            if json {
                print_json(&diff)?;
            } else {
                print_stdout(&clawbridge::render_schema_diff(&diff))?;
            }
            Ok(if diff.breaking() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Completions { shell } => print_stdout(&cli::completions(shell)),
        Command::Account {
            command: Some(command),
            ..
        } => account(command),
        Command::Account {
            command: None,
            key,
            state_dir,
            json,
        } => {
            let fingerprint = key_fingerprint(key)?;
            let state = clawbridge::commands::state_dir(state_dir)
                .context("the state dir")
                .map_err(|error| Failure(error, 2))?;
            let found = clawbridge::commands::account_of_fingerprint(&fingerprint, &state)
                .context("the named accounts")
                .map_err(|error| Failure(error, 2))?;
            if json {
                print_json(&found)
            } else {
                let named = match (&found.name, found.removed) {
                    (Some(name), false) => {
                        format!(" (account {name}, filed as {})", found.filed_as)
                    }
                    (Some(name), true) => {
                        format!(" (removed from account {name}: its logins are refused)")
                    }
                    (None, _) => String::new(),
                };
                print_stdout(&format!(
                    "{}{named}\nhome {} ({})\n",
                    found.account,
                    found.home.display(),
                    if found.home_exists {
                        "it logged in before"
                    } else {
                        "not made yet: it has not logged in"
                    }
                ))
            }
        }
        Command::Path => {
            let path = clawbridge::commands::native_executable()
                .context("finding the native clawbridge executable")
                .map_err(|error| Failure(error, 1))?;
            print_stdout(&format!("{}\n", path.display()))
        }
    }
}

fn serve_command(args: ServeArgs) -> Result<ExitCode, Failure> {
    let config = args.into_config()?;
    block_on(async move {
        let running = clawbridge::serve(config).await?;
        let signals = clawbridge::StopSignals::install()
            .context("installing the SIGTERM handler")
            .map_err(|error| Failure(error, 1))?;
        print_stdout(&format!("{}\n", running.addr))?;
        eprint!("{}", running.start_notice());
        running
            .until_signal(signals, std::time::Duration::from_secs(9), || {
                eprintln!("clawbridge serve: shutting down (a second signal exits at once)")
            })
            .await
            .context("installing the SIGTERM handler")
            .map_err(|error| Failure(error, 1))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The fingerprint a [`cli::KeySource`] names: a key from a variable or stdin, or a
/// fingerprint as given.
fn key_fingerprint(source: cli::KeySource) -> Result<String, Failure> {
    let key = match source {
        cli::KeySource {
            fingerprint: Some(fingerprint),
            ..
        } => {
            return clawbridge::commands::given_fingerprint(&fingerprint)
                .context("--fingerprint")
                .map_err(|error| Failure(error, 2))
        }
        cli::KeySource {
            api_key_env: Some(name),
            ..
        } => std::env::var(&name)
            .with_context(|| format!("--api-key-env {name}: not set"))
            .map_err(|error| Failure(error, 2))?,
        cli::KeySource {
            api_key_stdin: true,
            ..
        } => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the key from stdin")
                .map_err(|error| Failure(error, 2))?;
            line
        }
        _ => {
            return Err(Failure(
                anyhow::anyhow!(
                    "give the key with --api-key-env VAR or --api-key-stdin (never on the command line), or --fingerprint"
                ),
                2,
            ))
        }
    };
    clawbridge::commands::key_fingerprint(&key)
        .context("the key")
        .map_err(|error| Failure(error, 2))
}

fn account(command: cli::AccountCommand) -> Result<ExitCode, Failure> {
    use clawbridge::commands::AccountEdit;
    type EditOf = fn(String, String) -> AccountEdit;
    let (name, key, state_dir, edit) = match command {
        cli::AccountCommand::List { state_dir, json } => {
            let accounts = commands::named_accounts(&commands::state_dir(state_dir)?)?;
            return if json {
                print_json(&accounts)
            } else {
                print_stdout(&accounts.render_list())
            };
        }
        cli::AccountCommand::Add {
            name,
            key,
            state_dir,
        } => (name, key, state_dir, AccountEdit::add as EditOf),
        cli::AccountCommand::AddKey {
            name,
            key,
            state_dir,
        } => (name, key, state_dir, AccountEdit::add_key as EditOf),
        cli::AccountCommand::RemoveKey {
            name,
            key,
            state_dir,
        } => (name, key, state_dir, AccountEdit::remove_key as EditOf),
    };
    let edit = edit(name, key_fingerprint(key)?);
    let account = commands::edit_accounts(&commands::state_dir(state_dir)?, &edit)?;
    eprintln!(
        "clawbridge account: {} is filed as {}; its keys: {} (a running endpoint reads this at the next login)",
        account.name,
        account.identity,
        if account.keys.is_empty() {
            "none".to_string()
        } else {
            account.keys.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn client(command: cli::ClientCommand) -> Result<ExitCode, Failure> {
    use clawbridge::clients;
    match command {
        cli::ClientCommand::Add {
            name,
            operator,
            allow,
            state_dir,
        } => {
            let path = clients::clients_path(&commands::state_dir(state_dir)?);
            let token = clients::ClientsFile::add(&path, &name, operator, &allow)?;
            eprintln!("{}", clients::added_notice(&name, operator, &allow, &path));
            print_stdout(&format!("{token}\n"))
        }
        cli::ClientCommand::Allow {
            name,
            allow,
            state_dir,
        } => {
            let path = clients::clients_path(&commands::state_dir(state_dir)?);
            clients::ClientsFile::set_grants(&path, &name, &allow)?;
            eprintln!(
                "clawbridge client: {name} may now use: {} (a running endpoint reads it when it starts)",
                clients::grants_text(&allow)
            );
            Ok(ExitCode::SUCCESS)
        }
        cli::ClientCommand::List { state_dir } => {
            let path = clients::clients_path(&commands::state_dir(state_dir)?);
            print_stdout(&clients::ClientsFile::load(&path)?.render_list())
        }
    }
}

fn print_output(output: fixtures::Output) -> Result<ExitCode, Failure> {
    eprint!("{}", output.stderr);
    print_stdout(&output.stdout)?;
    Ok(exit_code(output.success))
}

fn block_on<F: std::future::Future<Output = Result<ExitCode, Failure>>>(
    future: F,
) -> Result<ExitCode, Failure> {
    let setting = std::env::var("CLAWBRIDGE_WORKER_THREADS").ok();
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    let workers = front::worker_threads(setting.as_deref(), cores)
        .map_err(|message| Failure(anyhow::anyhow!(message), 2))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
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
