//! `clawbridge`: the one-shot translation commands (`params`, `prompt`, `context`) run here, in
//! a binary that links only what they use; every other command line is handed unchanged to
//! `clawbridge-runtime`, installed next to this binary, which replaces this process
//! (`exec`: the same pid, so OpenClaw's Codex slot, signals and exit codes behave as one
//! program). Shared parsing and handlers are in [`front`]; why two binaries, in its docs.

use std::process::ExitCode;

use clawbridge::face::front;

// No `#[global_allocator]`: the system allocator. This process lives a few milliseconds, and
// mimalloc's fresh segments (a heap per parsing thread, each page touched first by its free
// list) and its purge at exit cost it more than they save: measured with `perf stat` on the
// at-caps `params`, 791 page faults and 6.7 ms with mimalloc, 475 and 5.6-6.1 ms without; on an
// empty workspace 2.0 ms against 1.65 ms. `clawbridge-runtime`, which serves for days, keeps
// mimalloc.

/// The binary that runs every other command.
const RUNTIME: &str = "clawbridge-runtime";

fn main() -> ExitCode {
    front::tie_to_launcher();
    // `--version` is answered here, as the runtime's clap would answer it (no exec).
    if front::is_version_line() {
        return front::print_version();
    }
    if !front::is_one_shot_line() {
        return runtime();
    }
    let cli = match front::parse_one_shot() {
        front::Parsed::Cli(cli) => cli,
        front::Parsed::Exit(code) => return code,
        front::Parsed::Passthrough(_) => return runtime(),
    };
    front::init_logging_on_demand(cli.verbose, cli.color, cli.log_format);
    front::finish("clawbridge", front::one_shot(cli.command))
}

/// Become `clawbridge-runtime` with the same arguments.
fn runtime() -> ExitCode {
    let beside = std::env::current_exe().map(|exe| exe.with_file_name(RUNTIME));
    let path = match beside {
        Ok(path) if path.is_file() => path,
        Ok(path) => {
            eprintln!(
                "clawbridge: {} is missing; it is installed next to clawbridge (cargo install and the npm package install both)",
                path.display()
            );
            return ExitCode::from(1);
        }
        Err(error) => {
            eprintln!("clawbridge: cannot find its own executable to locate {RUNTIME}: {error}");
            return ExitCode::from(1);
        }
    };
    let mut command = std::process::Command::new(&path);
    command.args(std::env::args_os().skip(1));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        if let Some(program) = std::env::args_os().next() {
            command.arg0(program);
        }
        let error = command.exec();
        eprintln!("clawbridge: cannot start {}: {error}", path.display());
        ExitCode::from(1)
    }
    #[cfg(not(unix))]
    match command.status() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|code| u8::try_from(code).ok())
                .unwrap_or(1),
        ),
        Err(error) => {
            eprintln!("clawbridge: cannot start {}: {error}", path.display());
            ExitCode::from(1)
        }
    }
}
