//! Where each bootstrap file lands (docs/routing.md §5).
//!
//! [`route_workspace`] takes the loaded files, decides the surface of each one for the run's
//! harness, applies the budgets to exactly the files that will be pasted (in load order), and
//! decides whether the truncation notice is shown (for `once`, it names the notice and the caller
//! asks the session's memory). The text builders (Codex params, the system prompt) and the
//! `/context` report all read the same [`RoutedWorkspace`].
//!
//! Pure: no I/O, no state. Uses config and workspace only (docs/architecture.md).

use serde::Serialize;

use crate::config::TruncationWarningMode;
use crate::config::{Harness, Run, Trigger};
use crate::error::Result;
use crate::workspace::{
    fit_with_budget, BootstrapFile, FittedFile, LoadedWorkspace, TruncationReport,
};

/// Memory tools that make MEMORY.md a note instead of pasted content.
pub const MEMORY_TOOLS: [&str; 2] = ["memory_search", "memory_get"];

/// The surface a file landed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Surface {
    /// Codex `thread/start|resume.developerInstructions`.
    ThreadDeveloperInstructions,
    /// Codex `turn/start.collaborationMode.settings.developer_instructions` (as a pointer or note).
    CollaborationInstructions,
    /// Codex `turn/start.input` runtime context.
    TurnInput,
    /// Codex discovers it on its own (AGENTS.md).
    NativeCodex,
    /// OpenClaw system prompt, Project Context (non-Codex).
    SystemPrompt,
    /// OpenClaw system prompt, dynamic Project Context below the cache boundary (HEARTBEAT.md).
    SystemPromptDynamic,
    /// Not sent anywhere.
    Omitted,
}

impl Surface {
    pub fn label(self) -> &'static str {
        match self {
            Surface::ThreadDeveloperInstructions => "thread developer instructions",
            Surface::CollaborationInstructions => "collaboration instructions",
            Surface::TurnInput => "turn input",
            Surface::NativeCodex => "native to Codex",
            Surface::SystemPrompt => "system prompt (Project Context)",
            Surface::SystemPromptDynamic => "system prompt (dynamic Project Context)",
            Surface::Omitted => "omitted",
        }
    }
}

/// One row of the `/context` view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoutedFile {
    pub name: String,
    pub path: String,
    pub raw_chars: usize,
    pub injected_chars: usize,
    pub truncated: bool,
    pub surface: Surface,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The memory note facts (docs/routing.md §6.2 part 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryNote {
    pub path: String,
    /// Memory tools present in the run, in the order of [`MEMORY_TOOLS`].
    pub tools: Vec<String>,
}

/// The routed workspace of one run.
#[derive(Clone, Debug)]
pub struct RoutedWorkspace {
    /// Codex: SOUL, IDENTITY, USER, TOOLS (that order).
    pub thread_files: Vec<FittedFile>,
    /// Codex: BOOTSTRAP, MEMORY fallback, hook-added files (load order).
    pub turn_files: Vec<FittedFile>,
    /// Non-Codex: every kept file except HEARTBEAT.md (load order).
    pub project_files: Vec<FittedFile>,
    /// Non-Codex: HEARTBEAT.md below the cache boundary.
    pub dynamic_project_files: Vec<FittedFile>,
    pub memory_note: Option<MemoryNote>,
    /// Codex heartbeat turns: the HEARTBEAT.md path to point at.
    pub heartbeat_pointer: Option<String>,
    pub report: TruncationReport,
    /// Whether the truncation notice is shown. For `once`, routing says `true` and names the
    /// notice in [`RoutedWorkspace::once_notice`]; the caller asks the session's memory.
    pub show_truncation_notice: bool,
    /// `once` mode with a truncation: the (session, signature) the notice is remembered by.
    pub once_notice: Option<(String, String)>,
    pub files: Vec<RoutedFile>,
    pub warnings: Vec<String>,
    /// Surfaces that would have carried a file the total budget dropped whole.
    pub dropped_from: Vec<Surface>,
}

impl RoutedWorkspace {
    /// True when the notice is shown and `surface` carries a truncated file, or would have
    /// carried a file the total budget dropped.
    pub fn notice_for(&self, surface: Surface) -> bool {
        let files = match surface {
            Surface::ThreadDeveloperInstructions => &self.thread_files,
            Surface::TurnInput => &self.turn_files,
            Surface::SystemPrompt => &self.project_files,
            Surface::SystemPromptDynamic => &self.dynamic_project_files,
            _ => return false,
        };
        self.show_truncation_notice
            && (files.iter().any(|file| file.truncated) || self.dropped_from.contains(&surface))
    }
}

/// Whether MEMORY.md is replaced by the memory note (docs/routing.md §5.3).
fn memory_note_for(run: &Run, file: &BootstrapFile) -> Option<MemoryNote> {
    let tools: Vec<String> = MEMORY_TOOLS
        .iter()
        .filter(|tool| run.has_tool(tool))
        .map(|tool| tool.to_string())
        .collect();
    // Condition 4: the workspace's own root MEMORY.md, not one a hook supplied from elsewhere.
    let root_file = run.display_path(&run.memory_workspace.join("MEMORY.md"));
    let usable = !run.tools.is_empty()
        && !tools.is_empty()
        && run.workspace == run.memory_workspace
        && file.name == "MEMORY.md"
        && file.path == root_file
        && file.has_content();
    usable.then(|| MemoryNote {
        path: file.path.clone(),
        tools,
    })
}

/// Route the loaded files of `run`. Pure: the `once` truncation notice is left to the caller
/// ([`RoutedWorkspace::once_notice`]).
pub fn route_workspace(run: &Run, loaded: &LoadedWorkspace) -> Result<RoutedWorkspace> {
    let limits = run.config.bootstrap_limits(&run.agent_id);
    let mut routed = RoutedWorkspace {
        thread_files: Vec::new(),
        turn_files: Vec::new(),
        project_files: Vec::new(),
        dynamic_project_files: Vec::new(),
        memory_note: None,
        heartbeat_pointer: None,
        report: TruncationReport::new(limits, &[]),
        show_truncation_notice: false,
        once_notice: None,
        files: Vec::new(),
        warnings: loaded.warnings.clone(),
        dropped_from: Vec::new(),
    };
    // Decide the surface of each file before fitting: only pasted files consume budget.
    let mut pasted: Vec<(&BootstrapFile, Surface)> = Vec::new();
    // The budget walk sees the empty files too (they emit nothing, but the walk stops at the
    // 64-unit floor on them as on any other, docs/routing.md §4.2 steps 3 and 6).
    let mut walked: Vec<&BootstrapFile> = Vec::new();
    for file in &loaded.files {
        let decision = match run.harness {
            Harness::Embedded => {
                if file.text().is_some() && !file.has_content() {
                    Err((Surface::Omitted, EMPTY))
                } else if file.name == "HEARTBEAT.md" {
                    Ok(Surface::SystemPromptDynamic)
                } else {
                    Ok(Surface::SystemPrompt)
                }
            }
            Harness::Codex => codex_surface(run, file, &mut routed),
        };
        match &decision {
            Ok(_) => walked.push(file),
            Err((_, EMPTY)) => walked.push(file),
            Err(_) => {}
        }
        match decision {
            Ok(surface) => pasted.push((file, surface)),
            Err((surface, note)) => routed.files.push(RoutedFile {
                name: file.name.clone(),
                path: file.path.clone(),
                raw_chars: file.raw_chars(),
                injected_chars: 0,
                truncated: false,
                surface,
                note: Some(note.to_string()),
            }),
        }
    }
    let outcome = fit_with_budget(&walked, limits);
    let fitted = &outcome.fitted;
    for (file, surface) in &pasted {
        let Some(fitted_file) = fitted.iter().find(|fitted| fitted.path == file.path) else {
            let dropped = outcome
                .dropped
                .iter()
                .any(|dropped| dropped.path == file.path);
            if dropped && !routed.dropped_from.contains(surface) {
                routed.dropped_from.push(*surface);
            }
            routed.files.push(RoutedFile {
                name: file.name.clone(),
                path: file.path.clone(),
                raw_chars: file.raw_chars(),
                injected_chars: 0,
                truncated: dropped,
                surface: Surface::Omitted,
                note: Some(format!(
                    "total bootstrap budget exhausted; would have gone to the {}",
                    surface.label()
                )),
            });
            continue;
        };
        let note = match &file.content {
            crate::workspace::FileContent::Missing => Some("missing marker".to_string()),
            crate::workspace::FileContent::Unreadable(reason) => {
                Some(format!("unreadable ({reason}); missing marker"))
            }
            _ => None,
        };
        routed.files.push(RoutedFile {
            name: fitted_file.name.clone(),
            path: fitted_file.path.clone(),
            raw_chars: fitted_file.raw_chars,
            injected_chars: fitted_file.injected_chars,
            truncated: fitted_file.truncated,
            surface: *surface,
            note,
        });
        let target = match surface {
            Surface::ThreadDeveloperInstructions => &mut routed.thread_files,
            Surface::TurnInput => &mut routed.turn_files,
            Surface::SystemPromptDynamic => &mut routed.dynamic_project_files,
            _ => &mut routed.project_files,
        };
        target.push(fitted_file.clone());
    }
    // Thread block order is SOUL, IDENTITY, USER, TOOLS (docs/routing.md §6.1).
    let thread_rank = |name: &str| {
        ["SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md"]
            .iter()
            .position(|candidate| *candidate == name)
            .unwrap_or(usize::MAX)
    };
    routed
        .thread_files
        .sort_by_key(|file| thread_rank(&file.name));
    let order = |name: &str| {
        crate::workspace::BOOTSTRAP_FILE_NAMES
            .iter()
            .position(|candidate| *candidate == name)
            .unwrap_or(usize::MAX)
    };
    routed.files.sort_by_key(|file| order(&file.name));
    routed.report = TruncationReport::with_dropped(limits, fitted, &outcome.dropped);
    let session = run
        .session_key
        .clone()
        .unwrap_or_else(|| format!("agent:{}:main", run.agent_id));
    let truncated = routed.report.any_truncated();
    routed.show_truncation_notice = truncated && limits.warning != TruncationWarningMode::Off;
    if truncated && limits.warning == TruncationWarningMode::Once {
        routed.once_notice = Some((session, routed.report.signature()));
    }
    for line in routed.report.diagnostic_lines() {
        tracing::info!("bootstrap truncation: {line}");
    }
    Ok(routed)
}

/// The note of a present file with nothing but whitespace: not pasted, but walked by the budget.
const EMPTY: &str = "empty";

/// The Codex column of docs/routing.md §5.2; `Err` carries the reason a file is not pasted.
fn codex_surface(
    run: &Run,
    file: &BootstrapFile,
    routed: &mut RoutedWorkspace,
) -> std::result::Result<Surface, (Surface, &'static str)> {
    if file.name == "AGENTS.md" {
        return Err((Surface::NativeCodex, "Codex discovers AGENTS.md from cwd"));
    }
    if file.text().is_none() {
        return Err((Surface::Omitted, "missing or unreadable; nothing is sent"));
    }
    if !file.has_content() {
        return Err((Surface::Omitted, EMPTY));
    }
    match file.name.as_str() {
        "HEARTBEAT.md" => {
            if run.trigger == Trigger::Heartbeat {
                routed.heartbeat_pointer = Some(file.path.clone());
                Err((
                    Surface::CollaborationInstructions,
                    "pointer only; content never sent",
                ))
            } else {
                Err((
                    Surface::Omitted,
                    "not sent on Codex; pointer on heartbeat turns",
                ))
            }
        }
        "MEMORY.md" => match memory_note_for(run, file) {
            Some(note) => {
                routed.memory_note = Some(note);
                Err((
                    Surface::CollaborationInstructions,
                    "memory note; content not sent",
                ))
            }
            None => Ok(Surface::TurnInput),
        },
        "SOUL.md" | "IDENTITY.md" | "USER.md" | "TOOLS.md" => {
            Ok(Surface::ThreadDeveloperInstructions)
        }
        _ => Ok(Surface::TurnInput),
    }
}
