//! The face of `clawbridge replay`: its flags read into the app layer's options, the report
//! printed (text, JSON, a page), the exit code from its verdicts (docs/replay.md).

use std::process::ExitCode;

use anyhow::Context as _;

use super::exit::{exit_code, Failure};
use super::front::{print_json, print_stdout};

/// `clawbridge replay` (and `replay --bundle`).
pub async fn run(args: super::cli::ReplayArgs) -> Result<ExitCode, Failure> {
    let mut workspaces = Vec::new();
    for pair in &args.workspaces {
        let Some((recorded, local)) = pair.split_once('=') else {
            return Err(Failure(
                anyhow::anyhow!("--workspace {pair}: give RECORDED=DIR (the recorded cwd, then the folder here)"),
                2,
            ));
        };
        workspaces.push((recorded.to_string(), std::path::PathBuf::from(local)));
    }
    if let Some(out) = &args.bundle {
        let summary = crate::replay::bundle(&args.dir, out, &workspaces)?;
        return print_stdout(&summary.render_text());
    }
    let codex = crate::find_codex_binary(
        args.codex_bin.as_deref(),
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    )
    .map_err(|message| Failure(anyhow::anyhow!(message), 3))?;
    let fork = match (args.until_turn, &args.then_upstream) {
        (Some(after_turn), Some(upstream)) => Some(crate::replay::Fork {
            after_turn,
            upstream: upstream.clone(),
            key: match &args.upstream_key_env {
                Some(name) => Some(std::env::var(name).map_err(|_| {
                    Failure(
                        anyhow::anyhow!("--upstream-key-env {name}: the variable is not set"),
                        2,
                    )
                })?),
                None => None,
            },
        }),
        _ => None,
    };
    let options = crate::replay::ReplayOptions {
        codex_bin: codex.path,
        clawbridge: crate::support::process::own_executable()
            .context("finding clawbridge's own executable")
            .map_err(|error| Failure(error, 1))?,
        workspaces,
        out: args.out.clone(),
        step_timeout: std::time::Duration::from_secs(args.step_timeout.max(1)),
        fork,
        route: args.route,
    };
    let report = crate::replay::replay(&args.dir, &options).await?;
    if let Some(html) = &args.html {
        crate::support::fs::write_atomic(html, report.render_html().as_bytes())?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        print_stdout(&report.render_text())?;
    }
    Ok(exit_code(
        !(args.fail_on_divergence && report.has_divergence()),
    ))
}
