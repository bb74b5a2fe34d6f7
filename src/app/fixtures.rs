//! The review-artifact commands: `snapshots gen|check`, `sync-codex-model` and `fixtures verify`.
//! Each returns an [`Output`]: what to print and whether the command succeeded (a drift or a
//! failed check is not an error, it is a result with exit 1).

use std::path::{Path, PathBuf};

use crate::artifacts::model_fixture::{
    apply_plan, check_plan, find_catalog, plan_sync, verify_fixtures, DiscoveryEnv, FileOutcome,
    Personality, SyncRequest,
};
use crate::artifacts::snapshots::{check_snapshots, write_snapshots, GEN_COMMAND};
use crate::error::Result;

/// What a command prints, and whether it succeeded (exit 0) or found a problem (exit 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

impl Output {
    fn ok(stdout: String) -> Self {
        Self {
            stdout,
            stderr: String::new(),
            success: true,
        }
    }
}

/// `snapshots gen`: regenerate every snapshot file and delete stale ones.
pub fn snapshots_gen(root: &Path) -> Result<Output> {
    let report = write_snapshots(root)?;
    let mut text = format!("Wrote {} prompt snapshot files.", report.written);
    if !report.deleted.is_empty() {
        text.push_str(&format!(" Deleted {} stale file(s).", report.deleted.len()));
    }
    text.push('\n');
    Ok(Output::ok(text))
}

/// `snapshots check`: compare the committed snapshots with fresh ones.
pub fn snapshots_check(root: &Path) -> Result<Output> {
    let (count, drift) = check_snapshots(root)?;
    if drift.is_empty() {
        return Ok(Output::ok(format!(
            "Prompt snapshots are current ({count} files).\n"
        )));
    }
    let mut report = format!(
        "prompt snapshot drift detected; run `{GEN_COMMAND}` (or scripts/snapshots-gen) and commit the result\n"
    );
    for finding in &drift {
        report.push_str(&finding.line());
        report.push('\n');
    }
    for finding in &drift {
        report.push_str(&finding.diff);
    }
    Ok(Output {
        stdout: String::new(),
        stderr: report,
        success: false,
    })
}

/// `fixtures verify`: every pinned fixture against the SHA-256 in its `source.json`.
pub fn fixtures_verify(root: &Path) -> Output {
    let (verified, problems) = verify_fixtures(root);
    if problems.is_empty() {
        return Output::ok(format!("Verified {verified} pinned fixtures.\n"));
    }
    let mut stderr = String::new();
    for problem in &problems {
        stderr.push_str(&format!(
            "{}: {}\n",
            problem.path.display(),
            problem.message
        ));
    }
    stderr.push_str(&format!(
        "fixture verification failed ({} problem(s), {verified} fixtures verified)\n",
        problems.len()
    ));
    Output {
        stdout: String::new(),
        stderr,
        success: false,
    }
}

/// The flags of `sync-codex-model`.
#[derive(Clone, Debug)]
pub struct SyncSettings {
    pub catalog: Option<PathBuf>,
    pub model: String,
    pub personality: Personality,
    pub out_dir: PathBuf,
    pub catalog_git_head: Option<String>,
    pub source_label: Option<String>,
    pub collaboration_default: Option<PathBuf>,
    pub check: bool,
}

/// `sync-codex-model`: refresh (or with `check`, compare) the pinned model-prompt fixture.
pub fn sync_codex_model(settings: SyncSettings) -> Result<Output> {
    let personality = settings.personality;
    let catalog = match settings.catalog {
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
                    return Ok(Output::ok(text));
                }
            }
        }
    };
    let request = SyncRequest {
        catalog,
        model: settings.model.clone(),
        personality,
        out_dir: settings.out_dir,
        git_head: settings.catalog_git_head,
        source_label: settings.source_label,
        collaboration_default: settings.collaboration_default,
    };
    let plan = plan_sync(&request)?;
    let mut stderr = String::new();
    for notice in &plan.notices {
        stderr.push_str(&format!("note: {notice}\n"));
    }
    let fixture = format!(
        "Codex {} {} prompt fixture",
        settings.model,
        personality.as_str()
    );
    if settings.check {
        let drift = check_plan(&plan);
        if drift.is_empty() {
            return Ok(Output {
                stdout: format!("{fixture} is current ({} files).\n", plan.files.len()),
                stderr,
                success: true,
            });
        }
        let mut text = String::new();
        for (path, diff) in &drift {
            text.push_str(&format!("- {}: differs from the catalog\n", path.display()));
            text.push_str(diff);
        }
        text.push_str("Run `clawbridge sync-codex-model` with the same options to re-pin it.\n");
        return Ok(Output {
            stdout: text,
            stderr,
            success: false,
        });
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
        format!("{fixture} unchanged.\n")
    } else {
        format!("Wrote {fixture} ({written} file(s) changed).\n")
    });
    Ok(Output {
        stdout: text,
        stderr,
        success: true,
    })
}
