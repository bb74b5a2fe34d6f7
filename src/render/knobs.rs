//! The config resolver: OpenClaw configuration turned into prompt knobs for one agent
//! (docs/system-prompt.md §9). Per-agent `agents.list[]` values win over `agents.defaults`.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::sections::DelegationMode;
use crate::config::keys;
use crate::config::OpenClawConfig;

/// The default heartbeat prompt (clawbridge wording) when none is configured.
pub const DEFAULT_HEARTBEAT_PROMPT: &str =
    "Read HEARTBEAT.md if it exists and follow it. Do not repeat old tasks from earlier chats.";

/// Prompt knobs resolved from config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptConfig {
    pub delegation_mode: DelegationMode,
    pub owner_display_hash: bool,
    pub owner_display_secret: Option<String>,
    pub owner_ids: Vec<String>,
    pub tts_hint: Option<String>,
    pub model_alias_lines: Vec<String>,
    pub memory_citations: Option<String>,
    /// `agents.defaults.userTimezone` when it is a valid IANA name.
    pub configured_timezone: Option<String>,
    pub heartbeat: Option<String>,
    /// `plugins.entries.openai.config.personality` (default on).
    pub gpt5_interaction_style: bool,
    pub repo_root: Option<String>,
    pub docs_path: Option<String>,
}

/// A time zone the tz database knows (as `Intl.DateTimeFormat` accepts it in OpenClaw): canonical
/// names and links alike (`US/Eastern`, `EST5EDT`, `CET`), any case; a name of the right shape
/// that no database holds (`America/Nowhere_Land`) is not one. The database is compiled in
/// (chrono-tz), so the answer does not depend on the machine.
pub fn is_iana_zone(zone: &str) -> bool {
    !zone.is_empty()
        && (zone.parse::<chrono_tz::Tz>().is_ok()
            || chrono_tz::Tz::from_str_insensitive(zone).is_ok())
}

/// How an owner id is shown: raw (control/format characters stripped) or the first 12 hex digits
/// of HMAC-SHA256(secret, id), or of SHA-256(id) without a secret.
pub fn display_owner(id: &str, hash: bool, secret: Option<&str>) -> String {
    if !hash {
        return id
            .chars()
            .filter(|ch| !ch.is_control() && !matches!(ch, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'))
            .collect();
    }
    let digest: Vec<u8> = match secret.filter(|secret| !secret.is_empty()) {
        Some(secret) => match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
            Ok(mut mac) => {
                mac.update(id.as_bytes());
                mac.finalize().into_bytes().to_vec()
            }
            Err(_) => Sha256::digest(id.as_bytes()).to_vec(),
        },
        None => Sha256::digest(id.as_bytes()).to_vec(),
    };
    crate::support::hex::encode(&digest[..digest.len().min(6)])
}

fn string(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

/// The voice (TTS) auto mode of `agent_id` as OpenClaw 2026.6.10 resolves it for the system
/// prompt: `messages.tts` with the agent's own `tts` block merged over it key by key, then its
/// `auto` (trimmed, any case) when that is `off`, `always`, `inbound` or `tagged`, else `always`
/// when `enabled` is true (JavaScript truthiness) and `off` otherwise. OpenClaw also reads a
/// per-user preferences file on the gateway's machine; a run document carries no such file, so
/// the config decides here.
pub fn tts_auto_mode(config: &OpenClawConfig, agent_id: &str) -> &'static str {
    let base = config.get(keys::TTS).cloned().unwrap_or(Value::Null);
    let merged = match config
        .agent_entry(agent_id)
        .and_then(|entry| entry.get("tts"))
    {
        Some(agent) => merge_defined(base, agent),
        None => base,
    };
    let auto = merged
        .get("auto")
        .and_then(Value::as_str)
        .map(|auto| auto.trim().to_lowercase());
    match auto.as_deref() {
        Some("off") => "off",
        Some("always") => "always",
        Some("inbound") => "inbound",
        Some("tagged") => "tagged",
        _ if merged
            .get("enabled")
            .is_some_and(crate::config::openclaw::is_truthy_value) =>
        {
            "always"
        }
        _ => "off",
    }
}

/// OpenClaw's `deepMergeDefined`: objects merge key by key, anything else in `over` replaces.
fn merge_defined(base: Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(mut base), Value::Object(over)) => {
            for (key, value) in over {
                if matches!(key.as_str(), "__proto__" | "prototype" | "constructor") {
                    continue;
                }
                let merged = match base.remove(key) {
                    Some(existing) => merge_defined(existing, value),
                    None => value.clone(),
                };
                base.insert(key.clone(), merged);
            }
            Value::Object(base)
        }
        (_, over) => over.clone(),
    }
}

/// Resolve the prompt knobs of `agent_id`.
pub fn resolve_prompt_config(config: &OpenClawConfig, agent_id: &str) -> PromptConfig {
    let delegation_mode = match config
        .agent_value(agent_id, keys::DELEGATION_MODE)
        .and_then(Value::as_str)
    {
        Some("prefer") => DelegationMode::Prefer,
        _ => DelegationMode::Suggest,
    };
    let tts_hint = match tts_auto_mode(config, agent_id) {
        "off" => None,
        mode => {
            let when = match mode {
                "inbound" => " Speak only when the user's last message came as audio or voice.",
                "tagged" => " Speak only where you add `[[tts:...]]` directives or a `[[tts:text]]...[[/tts:text]]` block.",
                _ => "",
            };
            Some(format!(
                "Voice replies are on ({mode}): keep spoken replies short and natural, without Markdown, links or lists.{when}"
            ))
        }
    };
    let mut aliases: Vec<(String, String)> = config
        .get(keys::MODELS)
        .and_then(Value::as_object)
        .map(|models| {
            models
                .iter()
                .filter(|(model, _)| !model.trim().is_empty())
                .filter_map(|(model, entry)| {
                    string(entry.get("alias")).map(|alias| (alias, model.trim().to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    // Sorted by the alias alone (OpenClaw's `alias.localeCompare`), with the same locale
    // collation as the skills catalog, not code units: `élan` sorts with the e's, `_x` and
    // `Fast` where a reader expects them, `fast` before `Fast`. Sorting whole lines would let the
    // model id decide between aliases that differ only in case or accents.
    aliases.sort_by(|a, b| crate::support::text::collate(&a.0, &b.0));
    let model_alias_lines: Vec<String> = aliases
        .into_iter()
        .map(|(alias, model)| format!("- {alias}: {model}"))
        .collect();
    let configured_timezone =
        string(config.get(keys::USER_TIMEZONE)).filter(|zone| is_iana_zone(zone));
    let heartbeat = config.heartbeat_section_enabled(agent_id).then(|| {
        string(config.agent_value(agent_id, keys::HEARTBEAT_PROMPT))
            .unwrap_or_else(|| DEFAULT_HEARTBEAT_PROMPT.to_string())
    });
    let owner_ids = config
        .get(keys::OWNER_ALLOW_FROM)
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| match id {
                    // Trimmed before hashing or showing, as OpenClaw normalizes owner ids.
                    Value::String(text) => Some(text.trim().to_string()),
                    Value::Number(number) => Some(number.to_string()),
                    _ => None,
                })
                .filter(|id| !id.is_empty())
                .collect()
        })
        .unwrap_or_default();
    PromptConfig {
        delegation_mode,
        owner_display_hash: config.get(keys::OWNER_DISPLAY).and_then(Value::as_str) == Some("hash"),
        owner_display_secret: string(config.get(keys::OWNER_DISPLAY_SECRET)),
        owner_ids,
        tts_hint,
        model_alias_lines,
        // Compared as written, as OpenClaw's memory section does (`=== "off"`): `" off "` and
        // `"OFF"` leave citations on there, so they do here.
        memory_citations: config
            .get(keys::MEMORY_CITATIONS)
            .and_then(Value::as_str)
            .map(str::to_string),
        configured_timezone,
        heartbeat,
        gpt5_interaction_style: config
            .get(keys::OPENAI_PERSONALITY)
            .and_then(Value::as_bool)
            != Some(false),
        repo_root: string(config.get(keys::REPO_ROOT)),
        docs_path: string(config.get(keys::DOCS_PATH)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tts_mode_read_as_openclaw_reads_it() {
        let mode = |config: serde_json::Value| tts_auto_mode(&OpenClawConfig::new(config), "main");
        let tts = |tts: serde_json::Value| json!({"messages": {"tts": tts}});
        assert_eq!(mode(json!({})), "off");
        assert_eq!(mode(tts(json!({"auto": "off"}))), "off");
        assert_eq!(mode(tts(json!({"auto": "OFF"}))), "off", "any case");
        assert_eq!(mode(tts(json!({"auto": " Inbound "}))), "inbound");
        assert_eq!(mode(tts(json!({"auto": "tagged"}))), "tagged");
        assert_eq!(
            mode(tts(json!({"auto": "loud"}))),
            "off",
            "unknown is not on"
        );
        assert_eq!(
            mode(tts(json!({"auto": "loud", "enabled": true}))),
            "always"
        );
        assert_eq!(mode(tts(json!({"enabled": true}))), "always");
        assert_eq!(mode(tts(json!({"enabled": 1}))), "always");
        assert_eq!(mode(tts(json!({"enabled": false}))), "off");
        // The agent's block is merged over the defaults, key by key.
        let agent = |agent: serde_json::Value| {
            json!({"messages": {"tts": {"auto": "always", "enabled": true}},
                   "agents": {"list": [{"id": "Main", "tts": agent}]}})
        };
        assert_eq!(mode(agent(json!({"auto": "off"}))), "off");
        assert_eq!(
            mode(agent(json!({"auto": "nope"}))),
            "always",
            "enabled stays"
        );
        assert_eq!(mode(agent(json!({"auto": null, "enabled": false}))), "off");
        assert_eq!(mode(agent(json!({"mode": "all"}))), "always");
        let other = json!({"messages": {"tts": {"auto": "always"}},
                           "agents": {"list": [{"id": "other", "tts": {"auto": "off"}}]}});
        assert_eq!(
            mode(other),
            "always",
            "another agent's block is not this one's"
        );
        let hint = |auto: &str| {
            resolve_prompt_config(&OpenClawConfig::new(tts(json!({"auto": auto}))), "main").tts_hint
        };
        assert_eq!(hint(" OFF "), None);
        assert!(hint("Tagged").is_some_and(|text| text.contains("[[tts:")));
    }

    #[test]
    fn p10_owner_hash() {
        assert_eq!(display_owner("+15551234567", true, None), "8a59780bb8cd");
        assert_eq!(
            display_owner("+15551234567", true, Some("s3cret")),
            "d57f50733cac"
        );
        assert_eq!(display_owner("+15551234567", false, None), "+15551234567");
        assert_eq!(display_owner("+1\u{200E}555", false, None), "+1555");
    }

    #[test]
    fn aliases_sort_by_locale_and_owner_ids_are_trimmed() {
        let config = OpenClawConfig::new(json!({
            "agents": {"defaults": {"models": {
                "m/zeta": {"alias": "zeta"}, "m/elan": {"alias": "élan"},
                "m/fast": {"alias": "Fast"}, "m/x": {"alias": "_x"}, "m/alpha": {"alias": "alpha"},
                "m/fast2": {"alias": "fast"}, "m/a-elan": {"alias": "Elan"}}}},
            "commands": {"ownerAllowFrom": [" +15550000000 ", "  "]}
        }));
        let resolved = resolve_prompt_config(&config, "main");
        let aliases: Vec<&str> = resolved
            .model_alias_lines
            .iter()
            .map(|line| {
                line.trim_start_matches("- ")
                    .split(':')
                    .next()
                    .unwrap_or("")
            })
            .collect();
        // Code-unit order would put `Fast` and `_x` first and `élan` after `zeta`; sorting whole
        // lines would let the model ids order `Fast`/`fast` and `Elan`/`élan` (OpenClaw 6.10:
        // lower case first, the accent before the case).
        assert_eq!(
            aliases,
            ["_x", "alpha", "Elan", "élan", "fast", "Fast", "zeta"]
        );
        assert_eq!(resolved.owner_ids, vec!["+15550000000"]);
    }

    #[test]
    fn zones_and_per_agent_delegation() {
        assert!(
            is_iana_zone("Asia/Tokyo")
                && is_iana_zone("America/Argentina/Buenos_Aires")
                && is_iana_zone("UTC")
        );
        assert!(!is_iana_zone("Not/AZone") && !is_iana_zone("Asia"));
        // The tz database, not the shape: links are zones, a well-formed unknown name is not.
        assert!(is_iana_zone("US/Eastern") && is_iana_zone("EST5EDT") && is_iana_zone("CET"));
        assert!(is_iana_zone("europe/berlin"));
        assert!(!is_iana_zone("America/Nowhere_Land") && !is_iana_zone(""));
        let config = OpenClawConfig::new(json!({
            "agents": {"defaults": {"subagents": {"delegationMode": "prefer"}, "userTimezone": "Not/AZone",
                                    "models": {"openai/gpt-5-mini": {"alias": "fast"}, "anthropic/claude-x": {"alias": "claude"}}},
                       "list": [{"id": "ops", "subagents": {"delegationMode": "suggest"}}]},
            "commands": {"ownerDisplay": "hash", "ownerAllowFrom": ["+1", 42]},
            "messages": {"tts": {"auto": "always"}}
        }));
        let main = resolve_prompt_config(&config, "main");
        assert_eq!(main.delegation_mode, DelegationMode::Prefer);
        assert_eq!(
            resolve_prompt_config(&config, "ops").delegation_mode,
            DelegationMode::Suggest
        );
        assert_eq!(main.configured_timezone, None);
        assert_eq!(
            main.model_alias_lines,
            vec!["- claude: anthropic/claude-x", "- fast: openai/gpt-5-mini"]
        );
        assert!(main.owner_display_hash && main.owner_ids == vec!["+1", "42"]);
        assert!(main.tts_hint.is_some());
        // `ops`, the only listed agent, is the default agent: the Heartbeats section is its.
        assert!(main.heartbeat.is_none());
        assert!(resolve_prompt_config(&config, "ops").heartbeat.is_some());
    }
}
