//! What both binaries share: reading the command line once, the one-shot commands, logging and
//! printing.
//!
//! `clawbridge` (`src/main.rs`) is what users run; it links only what the one-shot translation
//! commands use (`params`, `prompt`, `context`: what a prompt reviewer or a CI job calls once per
//! run, where the start of the process is most of the time and most of a start is the loader
//! relocating the binary: README "Performance"). Every other command line goes unchanged to
//! `clawbridge-runtime`, which links everything and runs the same handlers for these commands.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use super::cli::{Cli, OneShot, OneShotCli};
use super::exit::{is_broken_pipe, Failure};
use crate::commands;

/// The command line, read.
pub enum Parsed<T> {
    Cli(Box<T>),
    /// OpenClaw's Codex slot shape that goes to Codex as it is (`clawbridge -c ... app-server`
    /// without clawbridge's own flags): the runtime's.
    Passthrough(Vec<OsString>),
    /// `--help`, `--version` or a usage error: already printed.
    Exit(ExitCode),
}

/// Read the whole command line (the runtime): OpenClaw's slot shape is normalised first, then
/// clap parses it once.
pub fn parse() -> Parsed<Cli> {
    let given: Vec<OsString> = std::env::args_os().skip(1).collect();
    let args = match crate::normalise(&given) {
        crate::Normalised::Clap(args) => args,
        crate::Normalised::Passthrough(args) => return Parsed::Passthrough(args),
    };
    parse_as(args, super::cli::grouped)
}

/// Read a command line the front runs itself ([`is_one_shot_line`]).
pub fn parse_one_shot() -> Parsed<OneShotCli> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Some(cli) = plain_params(&args) {
        return Parsed::Cli(Box::new(cli));
    }
    parse_as(args, |command| command)
}

/// `clawbridge params FILE` and nothing else, read without building clap's command tree: the
/// line a caller runs once per turn, whose start is most of its time, and clap's tree is the
/// largest part of that start after the loader (docs/performance.md, "Start-up"). The result is
/// the value clap gives for the same line (`plain_params_reads_as_clap_reads`); any other
/// line, a flag or a path that looks like one included, goes to clap.
pub fn plain_params(args: &[OsString]) -> Option<OneShotCli> {
    let [command, run] = args else {
        return None;
    };
    let run_text = run.to_string_lossy();
    if command != "params" || run_text.is_empty() || run_text.starts_with('-') {
        return None;
    }
    Some(OneShotCli {
        verbose: 0,
        color: super::cli::Color::Auto,
        log_format: super::cli::LogFormat::Text,
        command: OneShot::Params(super::cli::RunArgs {
            run: run.into(),
            state_dir: None,
            bootstrap_hook: None,
        }),
    })
}

/// Parse a one-shot line with clap only (for the test that keeps [`plain_params`] equal to it).
pub fn parse_one_shot_with_clap(args: Vec<OsString>) -> Parsed<OneShotCli> {
    parse_as(args, |command| command)
}

fn parse_as<T: Parser>(
    args: Vec<OsString>,
    shape: fn(clap::Command) -> clap::Command,
) -> Parsed<T> {
    let program = std::env::args_os()
        .next()
        .unwrap_or_else(|| "clawbridge".into());
    let mut command = shape(T::command());
    let parsed = command
        .try_get_matches_from_mut(std::iter::once(program).chain(args))
        .and_then(|mut matches| T::from_arg_matches_mut(&mut matches))
        .map_err(|error| error.format(&mut command));
    match parsed {
        Ok(cli) => Parsed::Cli(Box::new(cli)),
        Err(error) => {
            let _ = error.print();
            Parsed::Exit(match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(2),
            })
        }
    }
}

/// True when the command line names a one-shot command: its first word after any `-v` flags is
/// `params`, `prompt` or `context` (anything else, `--help` and OpenClaw's `-c k=v app-server`
/// shape included, is the runtime's).
pub fn is_one_shot_line() -> bool {
    std::env::args_os()
        .skip(1)
        .find(|arg| {
            let arg = arg.to_string_lossy();
            !(arg == "--verbose"
                || (arg.len() > 1 && arg.starts_with('-') && arg[1..].bytes().all(|b| b == b'v')))
        })
        .is_some_and(|word| OneShot::NAMES.iter().any(|name| word == *name))
}

/// True when the whole command line is `--version` or `-V`.
pub fn is_version_line() -> bool {
    let mut args = std::env::args_os().skip(1);
    matches!((args.next(), args.next()), (Some(word), None) if word == "--version" || word == "-V")
}

/// What `clawbridge --version` prints (clap's own line: the name, a space, the version).
pub fn print_version() -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "clawbridge {}", env!("CARGO_PKG_VERSION"));
    ExitCode::SUCCESS
}

/// Run a one-shot command.
pub fn one_shot(command: OneShot) -> Result<ExitCode, Failure> {
    match command {
        OneShot::Params(args) => {
            let (run, options) = args.load()?;
            print_json(&commands::params(&run, &options)?)
        }
        OneShot::Prompt(prompt_args) => {
            let (run, options) = prompt_args.args.load()?;
            let prompt = commands::prompt(&run, &options, &prompt_args.settings()?)?;
            if prompt_args.split {
                print_json(&prompt)
            } else {
                print_stdout(&format!("{}\n", prompt.text()))
            }
        }
        OneShot::Context { args, json, detail } => {
            let (run, options) = args.load()?;
            let report = commands::context(&run, &options, detail)?;
            if json {
                print_json(&report)
            } else {
                print_stdout(&report.render_text())
            }
        }
    }
}

/// The exit code of a command's result; a failure is printed with the command's name.
pub fn finish(name: &str, result: Result<ExitCode, Failure>) -> ExitCode {
    // Read only when it would be printed: `params` and its siblings are timed to the
    // millisecond, and this is a file read.
    if tracing::enabled!(tracing::Level::DEBUG) {
        if let Some(peak) = peak_resident_kib() {
            tracing::debug!("{name}: peak resident memory {peak} KiB");
        }
    }
    super::log::flush();
    match result {
        Ok(code) => code,
        Err(Failure(error, _)) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(Failure(error, code)) => {
            eprintln!("{name}: {error:#}");
            ExitCode::from(code)
        }
    }
}

/// The most memory this process held at once (Linux's `VmHWM`), for `-vv`: what a command
/// over a large transcript folder took is seen, and tested (`tests/it/readers.rs`).
fn peak_resident_kib() -> Option<u64> {
    use std::io::Read as _;
    let mut status = String::new();
    std::fs::File::open("/proc/self/status")
        .ok()?
        .take(64 * 1024)
        .read_to_string(&mut status)
        .ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Logging on stderr: each line with its time (RFC 3339, UTC), as text or JSON lines
/// (`--log-format`); `-v`/`-vv` (or `CLAWBRIDGE_LOG`) for the level; colour only when
/// `color` says so (by default: stderr is a terminal and `NO_COLOR` is unset), so a log
/// redirected to a file holds no escape codes; repeated lines counted, not repeated
/// ([`super::log`]).
pub fn init_logging(verbose: u8, color: super::cli::Color, format: super::cli::LogFormat) {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("CLAWBRIDGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level(verbose)));
    logging(filter, color, format).init();
}

/// Logging as [`init_logging`] sets it up, for the one-shot commands (`src/main.rs`): the
/// subscriber is built when the first event or span passes the level, not at start. Building it
/// (tracing-subscriber's registry allocates its span slab, and the filter is parsed) was about a
/// twentieth of the instructions of a one-shot start-up that logs nothing, as most do (the
/// translate bench's start-up counts). A filter other than a plain level in `CLAWBRIDGE_LOG`
/// (`clawbridge::skills=debug`) is built at once, by [`init_logging`].
pub fn init_logging_on_demand(
    verbose: u8,
    color: super::cli::Color,
    format: super::cli::LogFormat,
) {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let level = match std::env::var("CLAWBRIDGE_LOG") {
        Err(std::env::VarError::NotPresent) => default_level(verbose).to_string(),
        Ok(text) => text.trim().to_ascii_lowercase(),
        Err(std::env::VarError::NotUnicode(_)) => return init_logging(verbose, color, format),
    };
    let filter = match level.parse::<tracing::level_filters::LevelFilter>() {
        Ok(filter) if PLAIN_LEVELS.contains(&level.as_str()) => filter,
        _ => return init_logging(verbose, color, format),
    };
    OnDemand {
        level: filter,
        built: std::sync::OnceLock::new(),
        build: Box::new(move || logging(tracing_subscriber::EnvFilter::new(&level), color, format)),
    }
    .init();
}

/// The values of `CLAWBRIDGE_LOG` that are one level for every target.
const PLAIN_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The level when `CLAWBRIDGE_LOG` is unset: warnings, `-v` info, `-vv` debug.
fn default_level(verbose: u8) -> &'static str {
    ["warn", "info", "debug"][usize::from(verbose.min(2))]
}

/// A subscriber for stderr: `filter`, the line format and the colour (see [`init_logging`]).
fn logging(
    filter: tracing_subscriber::EnvFilter,
    color: super::cli::Color,
    format: super::cli::LogFormat,
) -> Box<dyn tracing::Subscriber + Send + Sync> {
    use std::io::IsTerminal as _;
    let ansi = color.ansi(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| super::log::Stderr)
        .with_target(false);
    match format {
        super::cli::LogFormat::Text => Box::new(logs.with_ansi(ansi).finish()),
        super::cli::LogFormat::Json => Box::new(logs.json().with_ansi(false).finish()),
    }
}

/// The subscriber of [`init_logging_on_demand`]: below `level` it answers alone (nothing is
/// enabled); the first callsite at or above it builds the real subscriber, which then decides
/// and does everything. A span or event exists only once that one is built, so every call about
/// one goes to it.
struct OnDemand {
    level: tracing::level_filters::LevelFilter,
    built: std::sync::OnceLock<Box<dyn tracing::Subscriber + Send + Sync>>,
    build: Box<dyn Fn() -> Box<dyn tracing::Subscriber + Send + Sync> + Send + Sync>,
}

impl OnDemand {
    fn inner(&self) -> &(dyn tracing::Subscriber + Send + Sync) {
        self.built.get_or_init(|| (self.build)()).as_ref()
    }

    fn passes(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= self.level
    }
}

impl tracing::Subscriber for OnDemand {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if !self.passes(metadata) {
            return tracing::subscriber::Interest::never();
        }
        match self.built.get() {
            Some(inner) => inner.register_callsite(metadata),
            // Asked again at each use, so the real subscriber decides once it is built.
            None => tracing::subscriber::Interest::sometimes(),
        }
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(self.level)
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        self.passes(metadata) && self.inner().enabled(metadata)
    }

    fn event_enabled(&self, event: &tracing::Event<'_>) -> bool {
        self.inner().event_enabled(event)
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.inner().new_span(span)
    }

    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        self.inner().record(span, values);
    }

    fn record_follows_from(&self, span: &tracing::span::Id, follows: &tracing::span::Id) {
        self.inner().record_follows_from(span, follows);
    }

    fn event(&self, event: &tracing::Event<'_>) {
        self.inner().event(event);
    }

    fn enter(&self, span: &tracing::span::Id) {
        self.inner().enter(span);
    }

    fn exit(&self, span: &tracing::span::Id) {
        self.inner().exit(span);
    }

    fn clone_span(&self, id: &tracing::span::Id) -> tracing::span::Id {
        self.inner().clone_span(id)
    }

    fn try_close(&self, id: tracing::span::Id) -> bool {
        self.inner().try_close(id)
    }

    fn current_span(&self) -> tracing_core::span::Current {
        match self.built.get() {
            Some(inner) => inner.current_span(),
            None => tracing_core::span::Current::none(),
        }
    }
}

/// Under the npm launcher (`CLAWBRIDGE_PARENT_PID` names it): end with it. The kernel sends
/// this process SIGTERM when its parent goes, even a SIGKILLed one, so a native endpoint never
/// outlives its launcher holding its port; a launcher already gone ends this process at once.
/// The request survives `exec` (the front hands the runtime the same process).
pub fn tie_to_launcher() {
    let Some(launcher) = std::env::var("CLAWBRIDGE_PARENT_PID")
        .ok()
        .and_then(|pid| pid.parse::<i32>().ok())
    else {
        return;
    };
    // Read once (the process is still single-threaded): a nested clawbridge that inherits the
    // environment (a tool of a turn) is not this launcher's child.
    std::env::remove_var("CLAWBRIDGE_PARENT_PID");
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getppid, set_parent_process_death_signal, Pid, Signal};
        if let Err(error) = set_parent_process_death_signal(Some(Signal::TERM)) {
            eprintln!("clawbridge: cannot tie this process to its launcher: {error}");
        }
        if getppid().map(Pid::as_raw_nonzero).map(|pid| pid.get()) != Some(launcher) {
            // The launcher ended before the request took hold.
            std::process::exit(143);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = launcher;
}

/// The console of the library's commands: output on stdout (a reader that went away, `| head`,
/// is not an error), notices on stderr.
pub fn console() -> crate::Console {
    crate::Console::new(
        |text| {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error),
                _ => Ok(()),
            }
        },
        |line| eprintln!("{line}"),
    )
}

pub fn print_stdout(text: &str) -> Result<ExitCode, Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
        .map_err(|error| Failure(error, 1))?;
    Ok(ExitCode::SUCCESS)
}

/// `value` as pretty JSON on stdout, written as it is serialized (a large output is never
/// held twice).
pub fn print_json(value: &impl serde::Serialize) -> Result<ExitCode, Failure> {
    let mut stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
        .map_err(|error| Failure(error, 1))?;
    Ok(ExitCode::SUCCESS)
}

/// Most runtime worker threads taken from the machine by default.
const MAX_DEFAULT_WORKERS: usize = 16;

/// The async runtime's worker threads: `CLAWBRIDGE_WORKER_THREADS` (1 to 256) when set, else
/// the machine's cores, at least 2 (a server's listener and its members' readers never wait on
/// one thread) and at most [`MAX_DEFAULT_WORKERS`].
pub fn worker_threads(setting: Option<&str>, cores: usize) -> Result<usize, String> {
    match setting.map(str::trim) {
        Some(text) => match text.parse::<usize>() {
            Ok(count @ 1..=256) => Ok(count),
            _ => Err(format!(
                "CLAWBRIDGE_WORKER_THREADS={text:?}: give a number of threads from 1 to 256"
            )),
        },
        None => Ok(cores.clamp(2, MAX_DEFAULT_WORKERS)),
    }
}

#[cfg(test)]
mod worker_tests {
    use super::worker_threads;

    #[test]
    fn workers_follow_the_machine_within_bounds_unless_set() {
        assert_eq!(worker_threads(None, 1), Ok(2));
        assert_eq!(worker_threads(None, 8), Ok(8));
        assert_eq!(worker_threads(None, 96), Ok(16));
        assert_eq!(worker_threads(Some("3"), 96), Ok(3));
        assert!(worker_threads(Some("0"), 4).is_err());
        assert!(worker_threads(Some("many"), 4).is_err());
    }
}

#[cfg(test)]
mod on_demand_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use super::OnDemand;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn on_demand(lines: &Lines, builds: &Arc<AtomicUsize>) -> OnDemand {
        let (lines, builds) = (lines.clone(), Arc::clone(builds));
        OnDemand {
            level: tracing::level_filters::LevelFilter::WARN,
            built: std::sync::OnceLock::new(),
            build: Box::new(move || {
                builds.fetch_add(1, Ordering::SeqCst);
                let lines = lines.clone();
                Box::new(
                    tracing_subscriber::fmt()
                        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
                        .with_writer(move || lines.clone())
                        .with_ansi(false)
                        .finish(),
                )
            }),
        }
    }

    #[test]
    fn nothing_below_the_level_builds_the_subscriber_and_the_first_warning_does() {
        let (lines, builds) = (Lines::default(), Arc::new(AtomicUsize::new(0)));
        tracing::subscriber::with_default(on_demand(&lines, &builds), || {
            tracing::info!("an info line");
            tracing::debug!("a debug line");
            let span = tracing::info_span!("a quiet span");
            let _entered = span.enter();
            assert_eq!(builds.load(Ordering::SeqCst), 0, "built below the level");
            tracing::warn!(file = "AGENTS.md", "a warning");
            tracing::error!("an error");
            let outer = tracing::warn_span!("outer", agent = "main");
            outer.in_scope(|| tracing::warn!("inside"));
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1, "built once");
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        assert!(
            !text.contains("info line") && !text.contains("debug line"),
            "{text}"
        );
        assert!(
            text.contains("WARN") && text.contains("a warning") && text.contains("AGENTS.md"),
            "{text}"
        );
        assert!(
            text.contains("ERROR") && text.contains("an error"),
            "{text}"
        );
        assert!(
            text.contains("outer{agent=\"main\"}") && text.contains("inside"),
            "the span's context is the real subscriber's: {text}"
        );
    }
}
