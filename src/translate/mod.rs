//! The one pipeline every consumer shares: run -> workspace + skills -> routing -> Codex params.
//!
//! Every command (`app::commands`), the service, the snapshot generator and the benchmarks call
//! [`translate`], so what they show is what would be sent. It re-checks a confined run's paths at
//! the moment of use and asks [`NoticeMemory`] about `once` truncation notices; the memory itself
//! lives in the app layer.

pub mod live;
pub mod params;

use crate::codex::protocol::params::CodexParams;
use crate::config::{Harness, Run};
use crate::error::Result;
use crate::routing::{route_workspace, RoutedWorkspace};
use crate::skills::{
    discover_skills_cached, eligible_skills, render_skills_prompt, skill_roots, CatalogSurface,
    HostFacts, IneligibleSkill, SkillCache, SkillEntry, SkillsPrompt,
};
use crate::workspace::{load_bootstrap_files, LoadedWorkspace};
use params::build_params;

/// Remembers which `once` truncation notices a session was shown (kept by the app layer:
/// `app::state::WarningLedger`). Routing itself is pure and only names the notice.
pub trait NoticeMemory: std::fmt::Debug + Send + Sync {
    /// True when `session` has not seen `signature` before; records it.
    fn first_showing(&self, session: &str, signature: &str) -> Result<bool>;

    /// What [`NoticeMemory::first_showing`] would answer, recording nothing (previews).
    fn would_show(&self, session: &str, signature: &str) -> Result<bool>;
}

/// A memory seen through a preview: it answers as the next real turn would, and records nothing.
/// `params`, `context` and `prompt` only show what would be sent; only a turn actually sent
/// (`run`, `serve`) uses up a `once` notice.
#[derive(Debug)]
pub struct PreviewMemory(pub std::sync::Arc<dyn NoticeMemory>);

impl NoticeMemory for PreviewMemory {
    fn first_showing(&self, session: &str, signature: &str) -> Result<bool> {
        self.0.would_show(session, signature)
    }

    fn would_show(&self, session: &str, signature: &str) -> Result<bool> {
        self.0.would_show(session, signature)
    }
}

/// A memory that remembers nothing: every `once` notice is shown.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoMemory;

impl NoticeMemory for NoMemory {
    fn first_showing(&self, _session: &str, _signature: &str) -> Result<bool> {
        Ok(true)
    }

    fn would_show(&self, _session: &str, _signature: &str) -> Result<bool> {
        Ok(true)
    }
}

/// Live facts a translation reads besides the run itself.
#[derive(Clone, Debug)]
pub struct TranslateOptions {
    pub host: HostFacts,
    /// Where `once` truncation notices are remembered.
    pub ledger: std::sync::Arc<dyn NoticeMemory>,
    /// Reuse parsed skills across runs (long-lived processes); `None` parses every time.
    pub skill_cache: Option<std::sync::Arc<SkillCache>>,
    /// The `agent:bootstrap` hook command (`--bootstrap-hook`).
    pub bootstrap_hook: Option<String>,
}

impl TranslateOptions {
    /// The same options for a preview: the `once` ledger is read, never written.
    pub fn previewing(&self) -> Self {
        Self {
            ledger: std::sync::Arc::new(PreviewMemory(self.ledger.clone())),
            ..self.clone()
        }
    }

    /// Hermetic defaults: a Linux host with no environment and no `PATH`, no warning ledger.
    pub fn hermetic() -> Self {
        Self {
            host: HostFacts {
                platform: "linux".to_string(),
                ..HostFacts::default()
            },
            ledger: std::sync::Arc::new(NoMemory),
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
    // The skills walk (most of a cold translation: reading and hashing every SKILL.md) and the
    // bootstrap files are independent: read them at the same time.
    let bootstrap = || {
        let mut loaded = load_bootstrap_files(run);
        if let Some(command) = &options.bootstrap_hook {
            loaded = crate::workspace::apply_bootstrap_hook(run, loaded, command)?;
        }
        let routed = route_workspace(run, &loaded)?;
        Ok::<_, crate::Error>((loaded, routed))
    };
    let discover = || discover_skills_cached(run, &options.host, options.skill_cache.as_deref());
    // No skill folder at all (a new or skill-less workspace): no thread to start.
    let any_skills = skill_roots(run, &options.host)
        .iter()
        .any(|(root, _)| root.is_dir());
    let (bootstrap, discovered) = if any_skills {
        std::thread::scope(|scope| {
            let skills = scope.spawn(discover);
            let bootstrap = bootstrap();
            let discovered = match skills.join() {
                Ok(discovered) => discovered,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (bootstrap, discovered)
        })
    } else {
        (bootstrap(), discover())
    };
    let (loaded, mut routed) = bootstrap?;
    if let Some((session, signature)) = &routed.once_notice {
        routed.show_truncation_notice = options.ledger.first_showing(session, signature)?;
    }
    let (skills, ineligible_skills) = eligible_skills(&discovered.skills, run, &options.host);
    let (max_chars, max_count) = run.config.skills_limits(&run.agent_id);
    let surface = match run.harness {
        Harness::Codex => CatalogSurface::Codex,
        Harness::Embedded => CatalogSurface::SystemPrompt,
    };
    // A lightweight cron turn on Codex carries no OpenClaw context at all, skills included (the
    // scheduled prompt goes byte for byte); OpenClaw's own system prompt keeps its Skills section
    // (docs/routing.md, "Where each file goes").
    let skills_prompt = if run.is_lightweight_cron() && run.harness == Harness::Codex {
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
    /// OpenClaw's own system prompt for this translation (non-Codex harnesses).
    pub fn system_prompt(
        &self,
        run: &Run,
        options: &crate::render::adapter::PromptOptions,
    ) -> crate::render::SystemPrompt {
        crate::render::adapter::render_for_run(run, &self.routed, &self.skills_prompt, options)
    }

    /// The Codex params of this translation.
    pub fn codex_params(&self, run: &Run) -> CodexParams {
        build_params(run, &self.routed, &self.skills_prompt)
    }

    /// The thread's developer instructions (rendered once; see [`Translation::codex_params_with`]).
    pub fn developer_instructions(&self, run: &Run) -> String {
        params::developer_instructions(run, &self.routed)
    }

    /// The Codex params of this translation with its developer instructions already rendered.
    pub fn codex_params_with(&self, run: &Run, developer_instructions: String) -> CodexParams {
        params::assemble_params(
            run,
            &self.routed,
            &self.skills_prompt,
            developer_instructions,
        )
    }
}
