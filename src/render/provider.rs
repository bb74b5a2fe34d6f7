//! Provider contributions and the built-in GPT-5 overlay (docs/system-prompt.md §7).
//!
//! A provider tunes the prompt without replacing it: it may override exactly three named
//! sections, add a stable prefix (above the cache boundary) and a dynamic suffix (below).
//! Contributions from several sources are merged in order (built-in GPT-5 overlay, then the
//! provider's overlay, then its per-run contribution): overrides by key, later wins; prefixes and
//! suffixes de-duplicated and joined with a blank line.

use serde::{Deserialize, Serialize};

/// What a provider may contribute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProviderContribution {
    pub interaction_style: Option<String>,
    pub tool_call_style: Option<String>,
    pub execution_bias: Option<String>,
    pub stable_prefix: Option<String>,
    pub dynamic_suffix: Option<String>,
}

/// Normalize one contributed string: drop lone surrogates (impossible in Rust strings), CRLF/CR to
/// LF, strip trailing spaces and tabs per line, trim; empty means absent.
pub fn normalize(text: &str) -> Option<String> {
    let unified = text.replace("\r\n", "\n").replace('\r', "\n");
    let stripped: Vec<&str> = unified
        .split('\n')
        .map(|line| line.trim_end_matches([' ', '\t']))
        .collect();
    let joined = stripped.join("\n");
    let trimmed = joined.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

impl ProviderContribution {
    /// Every field normalized.
    pub fn normalized(&self) -> ProviderContribution {
        let field = |value: &Option<String>| value.as_deref().and_then(normalize);
        ProviderContribution {
            interaction_style: field(&self.interaction_style),
            tool_call_style: field(&self.tool_call_style),
            execution_bias: field(&self.execution_bias),
            stable_prefix: field(&self.stable_prefix),
            dynamic_suffix: field(&self.dynamic_suffix),
        }
    }

    /// Merge sources in order.
    pub fn merge(sources: &[ProviderContribution]) -> ProviderContribution {
        let mut merged = ProviderContribution::default();
        let mut prefixes: Vec<String> = Vec::new();
        let mut suffixes: Vec<String> = Vec::new();
        for source in sources.iter().map(ProviderContribution::normalized) {
            if source.interaction_style.is_some() {
                merged.interaction_style = source.interaction_style;
            }
            if source.tool_call_style.is_some() {
                merged.tool_call_style = source.tool_call_style;
            }
            if source.execution_bias.is_some() {
                merged.execution_bias = source.execution_bias;
            }
            for (part, list) in [
                (source.stable_prefix, &mut prefixes),
                (source.dynamic_suffix, &mut suffixes),
            ] {
                if let Some(part) = part {
                    if !list.contains(&part) {
                        list.push(part);
                    }
                }
            }
        }
        merged.stable_prefix = (!prefixes.is_empty()).then(|| prefixes.join("\n\n"));
        merged.dynamic_suffix = (!suffixes.is_empty()).then(|| suffixes.join("\n\n"));
        merged
    }
}

/// Whether a model id is in the GPT-5 family: some `/`- or `:`-separated segment of the
/// lower-cased id is `gpt-5` or starts with `gpt-5.` or `gpt-5-`.
pub fn is_gpt5_family(model: &str) -> bool {
    model.to_lowercase().split(['/', ':']).any(|segment| {
        segment == "gpt-5" || segment.starts_with("gpt-5.") || segment.starts_with("gpt-5-")
    })
}

/// GPT-5 heartbeat guidance, shared with the Codex heartbeat note.
pub const GPT5_HEARTBEAT_GUIDANCE: &str = "### Heartbeats\n\n- Make useful proactive progress, not chatter.\n- Orient first: read HEARTBEAT.md and follow what it asks.\n- Avoid rote loops that repeat the same check without new information.\n- Prefer silent progress; notify only for meaningful developments, results, blockers, decisions or time-sensitive risk.";

/// The stable-prefix guidance of the GPT-5 overlay.
pub const GPT5_STABLE_PREFIX: &str = "## GPT-5 Working Style\n- Stay in the persona your workspace files define; do not drift into a generic assistant voice.\n- Keep answers concise: lead with the result, skip preamble and recaps.\n- Tool discipline: call a tool when it answers the question better than recall; do not narrate routine calls.\n- Run independent lookups in parallel instead of one after another.\n- Cover every deliverable the request names before you finish.\n- Verify what you changed or claimed before you report it done.\n- When context is missing, look it up or make a reasonable assumption and say which.\n- Terminal hygiene: prefer non-interactive commands, bound their output, and clean up what you start.";

/// The overlay's `interaction_style` (switched off with `plugins.entries.openai.config.personality: false`).
pub const GPT5_INTERACTION_STYLE: &str = "## Interaction Style\nBe direct and warm; match the user's register and language; ask only when a wrong guess would be costly.";

/// The built-in GPT-5 overlay for `model`, if it applies. On a heartbeat run its interaction
/// style ends with the heartbeat guidance (OpenClaw 2026.6.10 does the same: the overlay's
/// heartbeat block follows the interaction style when the trigger is `heartbeat`).
pub fn gpt5_overlay(
    model: &str,
    interaction_style: bool,
    heartbeat_run: bool,
) -> Option<ProviderContribution> {
    let style = || match heartbeat_run {
        true => format!("{GPT5_INTERACTION_STYLE}\n\n{GPT5_HEARTBEAT_GUIDANCE}"),
        false => GPT5_INTERACTION_STYLE.to_string(),
    };
    is_gpt5_family(model).then(|| ProviderContribution {
        interaction_style: interaction_style.then(style),
        stable_prefix: Some(GPT5_STABLE_PREFIX.to_string()),
        ..ProviderContribution::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p11_gpt5_family() {
        for (model, expected) in [
            ("openai/gpt-5.5", true),
            ("gpt-5-mini", true),
            ("codex:gpt-5.5", true),
            ("gpt-5", true),
            ("gpt-50", false),
            ("anthropic/claude-x", false),
        ] {
            assert_eq!(is_gpt5_family(model), expected, "{model}");
        }
    }

    #[test]
    fn normalization_and_merge() {
        assert_eq!(normalize("  \r\n "), None);
        assert_eq!(normalize("a  \r\nb\t\rc ").as_deref(), Some("a\nb\nc"));
        let first = ProviderContribution {
            stable_prefix: Some("P".into()),
            execution_bias: Some("one".into()),
            ..Default::default()
        };
        let second = ProviderContribution {
            stable_prefix: Some("P ".into()),
            execution_bias: Some("two".into()),
            dynamic_suffix: Some("S".into()),
            ..Default::default()
        };
        let merged = ProviderContribution::merge(&[first, second]);
        assert_eq!(
            merged.stable_prefix.as_deref(),
            Some("P"),
            "duplicates dropped"
        );
        assert_eq!(merged.execution_bias.as_deref(), Some("two"), "later wins");
        assert_eq!(merged.dynamic_suffix.as_deref(), Some("S"));
    }
}
