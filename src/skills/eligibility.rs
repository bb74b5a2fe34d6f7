//! Which discovered skills a run is offered: the gates of the seed, in order.

use serde_json::Value;

use super::{HostFacts, SkillEntry};
use crate::config::openclaw::is_truthy_value;
use crate::config::Run;

/// Why a skill was not offered (for `/context --detail`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IneligibleSkill {
    pub name: String,
    pub reason: String,
}

/// A gate's list as OpenClaw normalizes it: an array of strings, or one comma-separated
/// string; entries trimmed, empty ones dropped.
fn gate_list(value: &Value) -> Vec<String> {
    let items: Vec<String> = match value {
        Value::String(text) => text.split(',').map(str::to_string).collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// Apply docs/routing.md §7.2 in order.
pub fn eligible_skills(
    skills: &[SkillEntry],
    run: &Run,
    host: &HostFacts,
) -> (Vec<SkillEntry>, Vec<IneligibleSkill>) {
    let allowlist = run.config.skills_allowlist(&run.agent_id);
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for skill in skills {
        match ineligibility(skill, run, host, allowlist.as_deref()) {
            None => kept.push(skill.clone()),
            Some(reason) => dropped.push(IneligibleSkill {
                name: skill.name.clone(),
                reason,
            }),
        }
    }
    (kept, dropped)
}

fn ineligibility(
    skill: &SkillEntry,
    run: &Run,
    host: &HostFacts,
    allowlist: Option<&[String]>,
) -> Option<String> {
    let entry = run.config.skill_entry(&skill.skill_key);
    if entry
        .and_then(|entry| entry.get("enabled"))
        .and_then(Value::as_bool)
        == Some(false)
    {
        return Some(format!(
            "skills.entries.{}.enabled is false",
            skill.skill_key
        ));
    }
    // Step 2: `skills.allowBundled` (non-empty) restricts bundled skills by key or name.
    if skill.tier == super::SkillTier::Bundled {
        let allowed = run.config.allow_bundled();
        if !allowed.is_empty()
            && !allowed
                .iter()
                .any(|entry| entry == &skill.skill_key || entry == &skill.name)
        {
            return Some("bundled skill not in skills.allowBundled".to_string());
        }
    }
    let gates = &skill.openclaw_metadata;
    let os = gates.get("os").map(gate_list).unwrap_or_default();
    if !os.is_empty() && !os.contains(&host.platform) {
        return Some(format!("not available on {}", host.platform));
    }
    let always = gates.get("always").and_then(Value::as_bool) == Some(true);
    if !always {
        let requires = gates.get("requires").cloned().unwrap_or(Value::Null);
        let list = |key: &str| requires.get(key).map(gate_list).unwrap_or_default();
        // Read as OpenClaw 2026.6.10 reads it: the text as written (not trimmed).
        let primary_env = gates.get("primaryEnv").and_then(Value::as_str);
        // A configured value counts when JavaScript calls it true: `"  "` does, `""` does not.
        let filled = |value: Option<&Value>| value.is_some_and(is_truthy_value);
        for variable in list("env") {
            // Configured for the skill: its own `env.VAR` with a value, or its `apiKey` when the
            // skill names VAR as its primary variable (as OpenClaw checks).
            let configured = entry.is_some_and(|entry| {
                filled(entry.get("env").and_then(|env| env.get(&variable)))
                    || (primary_env == Some(variable.as_str()) && filled(entry.get("apiKey")))
            });
            if !configured && host.env_var(&variable).is_none_or(|value| value.is_empty()) {
                return Some(format!("requires environment variable {variable}"));
            }
        }
        for path in list("config") {
            if !run.config.is_truthy(&path) {
                return Some(format!("requires config {path}"));
            }
        }
        for bin in list("bins") {
            if !host.has_bin(&bin) {
                return Some(format!("requires `{bin}` on PATH"));
            }
        }
        let any_bins = list("anyBins");
        if !any_bins.is_empty() && !any_bins.iter().any(|bin| host.has_bin(bin)) {
            return Some(format!("requires one of {} on PATH", any_bins.join(", ")));
        }
    }
    if let Some(allowed) = allowlist {
        if !allowed.iter().any(|name| name == &skill.name) {
            return Some("not in the agent's skills allowlist".to_string());
        }
    }
    if skill.disable_model_invocation {
        return Some("disable-model-invocation is true".to_string());
    }
    if let Some(plugin) = &skill.plugin {
        if !run.config.plugin_enabled(plugin) {
            return Some(format!("plugin {plugin} is disabled"));
        }
    }
    None
}
