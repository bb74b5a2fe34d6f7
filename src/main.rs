//! The `clawbridge` binary: parse flags, call the library, map errors to exit codes.
//!
//! Exit codes: 0 success; 1 internal error (or a failed check); 2 bad input or usage.
//! stdout carries only the command's output; logs go to stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use clawbridge::config::Run;
use clawbridge::context::context_report;
use clawbridge::skills::HostFacts;
use clawbridge::translate::{translate, TranslateOptions};
use clawbridge::workspace::WarningLedger;

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
    },
    /// Refresh the pinned Codex model-prompt fixture from a Codex model catalog.
    SyncCodexModel(SyncArgs),
    /// Pinned fixture checks.
    #[command(subcommand)]
    Fixtures(FixturesCommand),
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
    #[arg(long, default_value = clawbridge::catalog::DEFAULT_MODEL)]
    model: String,
    /// default, friendly or pragmatic.
    #[arg(long, default_value = "pragmatic")]
    personality: String,
    /// Where the fixtures live (relative to the current directory).
    #[arg(long, default_value = clawbridge::catalog::DEFAULT_OUT_DIR)]
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

/// Failures the binary reports, with the exit code each one maps to.
#[derive(Debug)]
enum Failure {
    BadInput(anyhow::Error),
    Internal(anyhow::Error),
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
        Command::Params { run, state_dir } => {
            let (run, options) = load_run(&run, state_dir)?;
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
        Command::Context {
            run,
            json,
            detail,
            state_dir,
        } => {
            let (run, options) = load_run(&run, state_dir)?;
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
        Command::Snapshots(SnapshotsCommand::Gen { root }) => {
            let report = clawbridge::snapshots::write_snapshots(&root)?;
            let mut text = format!("Wrote {} prompt snapshot files.", report.written);
            if !report.deleted.is_empty() {
                text.push_str(&format!(" Deleted {} stale file(s).", report.deleted.len()));
            }
            text.push('\n');
            print_stdout(&text)
        }
        Command::Snapshots(SnapshotsCommand::Check { root }) => {
            let (count, drift) = clawbridge::snapshots::check_snapshots(&root)?;
            if drift.is_empty() {
                return print_stdout(&format!("Prompt snapshots are current ({count} files).\n"));
            }
            let mut report = format!(
                "prompt snapshot drift detected; run `{}` (or scripts/snapshots-gen) and commit the result\n",
                clawbridge::snapshots::GEN_COMMAND
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
            let (verified, problems) = clawbridge::catalog::verify_fixtures(&root);
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
    use clawbridge::catalog::{
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
fn load_run(path: &Path, state_dir: Option<PathBuf>) -> Result<(Run, TranslateOptions), Failure> {
    let run = Run::load(path)?;
    for key in run.config.unknown_keys() {
        tracing::warn!(
            "{}: config key `{key}` is not read by clawbridge",
            path.display()
        );
    }
    let ledger = match state_dir.or_else(WarningLedger::default_state_dir) {
        Some(dir) => WarningLedger::in_dir(&dir),
        None => WarningLedger::ephemeral(),
    };
    Ok((
        run,
        TranslateOptions {
            host: HostFacts::from_process(),
            ledger,
            skill_cache: None,
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
