//! The one pipeline every consumer shares: run -> workspace + skills -> routing -> Codex params.
//!
//! The CLI (`params`, `context`), the snapshot generator and the benchmarks all call
//! [`translate`], so what they show is what would be sent.

use crate::codex::params::{build_params, CodexParams};
use crate::config::{Harness, Run};
use crate::error::Result;
use crate::routing::{route_workspace, RoutedWorkspace};
use crate::skills::{
    discover_skills_cached, eligible_skills, render_skills_prompt, CatalogSurface, HostFacts,
    IneligibleSkill, SkillCache, SkillEntry, SkillsPrompt,
};
use crate::workspace::{load_bootstrap_files, LoadedWorkspace, WarningLedger};

/// Live facts a translation reads besides the run itself.
#[derive(Clone, Debug)]
pub struct TranslateOptions {
    pub host: HostFacts,
    pub ledger: WarningLedger,
    /// Reuse parsed skills across runs (long-lived processes); `None` parses every time.
    pub skill_cache: Option<std::sync::Arc<SkillCache>>,
    /// The `agent:bootstrap` hook command (`--bootstrap-hook`).
    pub bootstrap_hook: Option<String>,
}

impl TranslateOptions {
    /// Hermetic defaults: a Linux host with no environment and no `PATH`, no warning ledger.
    pub fn hermetic() -> Self {
        Self {
            host: HostFacts {
                platform: "linux".to_string(),
                ..HostFacts::default()
            },
            ledger: WarningLedger::ephemeral(),
            skill_cache: None,
            bootstrap_hook: None,
        }
    }
}

/// Everything the pipeline produced for one run.
#[derive(Clone, Debug)]
pub struct Translation {
    pub loaded: LoadedWorkspace,
    pub routed: RoutedWorkspace,
    pub skills: Vec<SkillEntry>,
    pub ineligible_skills: Vec<IneligibleSkill>,
    pub skills_prompt: SkillsPrompt,
    pub warnings: Vec<String>,
}

/// Load, route and render the skills of `run` (harness-aware, no params yet).
pub fn translate(run: &Run, options: &TranslateOptions) -> Result<Translation> {
    run.check_confined()?;
    let mut loaded = load_bootstrap_files(run);
    if let Some(command) = &options.bootstrap_hook {
        loaded = crate::workspace::apply_bootstrap_hook(run, loaded, command)?;
    }
    let routed = route_workspace(run, &loaded, &options.ledger)?;
    let discovered = discover_skills_cached(run, options.skill_cache.as_deref());
    let (skills, ineligible_skills) = eligible_skills(&discovered.skills, run, &options.host);
    let (max_chars, max_count) = run.config.skills_limits(&run.agent_id);
    let surface = match run.harness {
        Harness::Codex => CatalogSurface::Codex,
        Harness::Embedded => CatalogSurface::SystemPrompt,
    };
    // Lightweight cron runs carry no OpenClaw context at all, skills included.
    let skills_prompt = if run.is_lightweight_cron() {
        render_skills_prompt(&[], max_chars, max_count, surface)
    } else {
        render_skills_prompt(&skills, max_chars, max_count, surface)
    };
    let mut warnings = routed.warnings.clone();
    warnings.extend(discovered.warnings);
    Ok(Translation {
        loaded,
        routed,
        skills,
        ineligible_skills,
        skills_prompt,
        warnings,
    })
}

impl Translation {
    /// The Codex params of this translation.
    pub fn codex_params(&self, run: &Run) -> CodexParams {
        build_params(run, &self.routed, &self.skills_prompt)
    }
}
