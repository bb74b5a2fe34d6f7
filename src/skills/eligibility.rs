//! Which discovered skills a run is offered: the gates of the seed, in order.

use serde_json::Value;

use super::{HostFacts, SkillEntry};
use crate::config::Run;

/// Why a skill was not offered (for `/context --detail`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IneligibleSkill {
    pub name: String,
    pub reason: String,
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
    if let Some(os) = gates.get("os").and_then(Value::as_array) {
        if !os
            .iter()
            .any(|value| value.as_str() == Some(host.platform.as_str()))
        {
            return Some(format!("not available on {}", host.platform));
        }
    }
    let always = gates.get("always").and_then(Value::as_bool) == Some(true);
    if !always {
        let requires = gates.get("requires").cloned().unwrap_or(Value::Null);
        let list = |key: &str| {
            requires
                .get(key)
                .map(crate::config::openclaw::string_list)
                .unwrap_or_default()
        };
        for variable in list("env") {
            let configured = entry.is_some_and(|entry| {
                entry
                    .get("env")
                    .and_then(|env| env.get(&variable))
                    .is_some_and(|v| !v.is_null())
                    || entry.get("apiKey").is_some_and(|v| !v.is_null())
            });
            if !configured && host.env.get(&variable).is_none_or(String::is_empty) {
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
