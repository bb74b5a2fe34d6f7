//! OpenClaw's system prompt, and the one facade every prompt surface goes through.
//!
//! Layout, as the seed page describes it:
//! * [`render`] (the pure renderer): explicit inputs in, text out; it never reads config,
//!   environment or files. Two surfaces share it: OpenClaw's own system prompt for non-Codex
//!   harnesses ([`PromptInputs`], sections in [`sections`]) and the Codex thread developer
//!   instructions ([`codex::CodexDeveloperInputs`]).
//! * [`knobs::resolve_prompt_config`]: configuration turned into prompt knobs for one agent.
//! * [`provider`]: provider contributions (section overrides, stable prefix, dynamic suffix) and
//!   the built-in GPT-5 overlay; [`hooks`]: the legacy whole-prompt `before_prompt_build` hook.
//! * [`adapter`]: runtime adapters that gather live facts for a run and call the facade.
//! * [`codex`]: every Codex text (thread developer instructions, collaboration instructions, turn
//!   input), in one place.
//!
//! Uses config, workspace, skills and routing; never translate or anything above it
//! (docs/architecture.md).

pub mod adapter;
pub mod codex;
pub mod hooks;
pub mod knobs;
pub mod provider;
pub mod sections;

use serde::Serialize;

pub use sections::PromptInputs;

/// The cache-boundary marker: transports split the prompt here. Never change it.
pub const CACHE_BOUNDARY: &str = "<!-- OPENCLAW_CACHE_BOUNDARY -->";

/// A rendered prompt: the cacheable stable prefix and the volatile dynamic suffix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPrompt {
    pub stable_prefix: String,
    pub dynamic_suffix: String,
    /// `false` for surfaces that have no boundary (`none` mode, the Codex developer text).
    #[serde(skip)]
    pub has_boundary: bool,
}

impl SystemPrompt {
    /// The whole prompt, with the boundary marker between the halves.
    pub fn text(&self) -> String {
        if !self.has_boundary {
            return self.stable_prefix.clone();
        }
        let mut parts = vec![self.stable_prefix.as_str(), CACHE_BOUNDARY];
        if !self.dynamic_suffix.is_empty() {
            parts.push(self.dynamic_suffix.as_str());
        }
        parts.join("\n\n")
    }

    /// The prompt for a provider without boundary support: the marker is dropped.
    pub fn text_without_boundary(&self) -> String {
        [self.stable_prefix.as_str(), self.dynamic_suffix.as_str()]
            .iter()
            .filter(|part| !part.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Split a joined prompt at the marker (trailing/leading whitespace trimmed).
    pub fn split(text: &str) -> SystemPrompt {
        match text.split_once(CACHE_BOUNDARY) {
            Some((prefix, suffix)) => SystemPrompt {
                stable_prefix: prefix.trim_end().to_string(),
                dynamic_suffix: suffix.trim_start().to_string(),
                has_boundary: true,
            },
            None => SystemPrompt {
                stable_prefix: text.to_string(),
                dynamic_suffix: String::new(),
                has_boundary: false,
            },
        }
    }
}

/// What to render.
#[derive(Clone, Debug)]
pub enum PromptRequest<'a> {
    /// OpenClaw's system prompt (non-Codex harnesses).
    OpenClaw(&'a PromptInputs),
    /// The Codex thread developer instructions.
    CodexDeveloper(&'a codex::CodexDeveloperInputs),
}

/// The facade: every prompt surface is rendered here, from explicit inputs only.
pub fn render(request: &PromptRequest<'_>) -> SystemPrompt {
    match request {
        PromptRequest::OpenClaw(inputs) => sections::build_system_prompt(inputs),
        PromptRequest::CodexDeveloper(inputs) => SystemPrompt {
            stable_prefix: codex::render_developer_instructions(inputs),
            dynamic_suffix: String::new(),
            has_boundary: false,
        },
    }
}

/// Join sections: each is a list of lines joined with `\n` (empty lines dropped), sections are
/// joined with one blank line, and an empty section leaves no trace (docs/system-prompt.md §3).
pub fn assemble(sections: &[Vec<String>]) -> String {
    sections
        .iter()
        .map(|lines| {
            lines
                .iter()
                .filter(|line| !line.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|section| !section.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}
