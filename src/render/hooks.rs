//! The legacy `before_prompt_build` hook point: a whole-prompt mutation for compatibility and
//! truly global changes, kept apart from provider contributions (which tune sections).

use super::SystemPrompt;

/// What a `before_prompt_build` hook asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BeforePromptBuild {
    /// Leave the prompt as it is.
    Keep,
    /// Replace the whole prompt.
    Replace(String),
    /// Add system context before the prompt (inside a block marked as plugin-injected).
    Prepend(String),
    /// Add system context after the prompt (inside a block marked as plugin-injected).
    Append(String),
}

fn injected(plugin: &str, text: &str) -> String {
    format!(
        "<plugin-context source=\"{plugin}\">\nInjected by the plugin `{plugin}`; this is not workspace content.\n{}\n</plugin-context>",
        text.trim()
    )
}

/// Apply a hook's answer. Prepended context joins the stable prefix; appended context joins the
/// dynamic suffix, so the cache boundary stays where it was.
pub fn apply_before_prompt_build(
    prompt: SystemPrompt,
    plugin: &str,
    action: BeforePromptBuild,
) -> SystemPrompt {
    match action {
        BeforePromptBuild::Keep => prompt,
        BeforePromptBuild::Replace(text) => SystemPrompt::split(&text),
        BeforePromptBuild::Prepend(text) => SystemPrompt {
            stable_prefix: format!("{}\n\n{}", injected(plugin, &text), prompt.stable_prefix),
            ..prompt
        },
        BeforePromptBuild::Append(text) if !prompt.has_boundary => SystemPrompt {
            stable_prefix: format!("{}\n\n{}", prompt.stable_prefix, injected(plugin, &text)),
            ..prompt
        },
        BeforePromptBuild::Append(text) => {
            let block = injected(plugin, &text);
            let dynamic_suffix = if prompt.dynamic_suffix.is_empty() {
                block
            } else {
                format!("{}\n\n{block}", prompt.dynamic_suffix)
            };
            SystemPrompt {
                dynamic_suffix,
                ..prompt
            }
        }
    }
}
