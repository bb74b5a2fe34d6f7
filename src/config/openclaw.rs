//! Read-only view of the OpenClaw config object (`openclaw.json` shape).
//!
//! Only the keys of the one table in [`super::keys`] are read; per-agent values (`agents.list[]`
//! entries with a matching `id`) win over `agents.defaults`. Every other key is reported by
//! [`OpenClawConfig::unknown_keys`] so a typo shows up on stderr instead of silently doing nothing.

use serde_json::Value;

use super::keys::{self, AgentKey, Key};

/// Default per-file bootstrap cap (UTF-16 units).
pub const DEFAULT_BOOTSTRAP_MAX_CHARS: usize = 20_000;
/// Default total bootstrap cap (UTF-16 units).
pub const DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS: usize = 60_000;
/// Default skills prompt budget.
pub const DEFAULT_MAX_SKILLS_PROMPT_CHARS: usize = 30_000;
/// Default number of skills in the prompt.
pub const DEFAULT_MAX_SKILLS_IN_PROMPT: usize = 150;

/// How the bootstrap truncation notice is shown (`agents.defaults.bootstrapPromptTruncationWarning`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruncationWarningMode {
    Off,
    Once,
    Always,
}

/// Bootstrap budgets in force for one agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootstrapLimits {
    pub max_chars: usize,
    pub total_max_chars: usize,
    pub warning: TruncationWarningMode,
}

/// Borrowed view of the config object.
#[derive(Clone, Debug, Default)]
pub struct OpenClawConfig {
    root: Value,
}

impl OpenClawConfig {
    pub fn new(root: Value) -> Self {
        Self { root }
    }

    /// The raw object, as the run document carried it.
    pub fn raw(&self) -> &Value {
        &self.root
    }

    /// The value of a key of the table (`keys::HEARTBEAT_EVERY`).
    pub fn get(&self, key: Key) -> Option<&Value> {
        dotted_get(&self.root, key.path())
    }

    /// A per-agent key: the agent entry's value when it has one, else `agents.defaults`'.
    pub fn agent_value(&self, agent_id: &str, key: AgentKey) -> Option<&Value> {
        self.agent_entry(agent_id)
            .and_then(|entry| dotted_get(entry, key.name()))
            .or_else(|| dotted_get(&self.root, &format!("agents.defaults.{}", key.name())))
    }

    /// Every path the config names, with the field it came from (`config.skills.load.extraDirs[0]`),
    /// as written. The service checks each against its roots (docs/threat-model.md).
    pub fn named_paths(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut push = |field: String, value: &Value| match value {
            Value::String(path) => out.push((field, path.clone())),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    if let Some(path) = item.as_str() {
                        out.push((format!("{field}[{index}]"), path.to_string()));
                    }
                }
            }
            _ => {}
        };
        for key in keys::PATH_KEYS {
            if let Some(value) = self.get(*key) {
                push(format!("config.{}", key.path()), value);
            }
        }
        if let Some(agents) = self.get(keys::AGENTS_LIST).and_then(Value::as_array) {
            for (index, agent) in agents.iter().enumerate() {
                if let Some(value) = agent.get("workspace") {
                    push(format!("config.agents.list[{index}].workspace"), value);
                }
            }
        }
        out
    }

    /// The agent's configured workspace: `agents.list[<id>].workspace`, else
    /// `agents.defaults.workspace` (as written; resolve with `run::resolve_config_path`).
    pub fn agent_workspace(&self, agent_id: &str) -> Option<String> {
        self.agent_entry(agent_id)
            .and_then(|entry| entry.get("workspace"))
            .or_else(|| self.get(keys::DEFAULT_WORKSPACE))
            .and_then(Value::as_str)
            .filter(|path| !path.trim().is_empty())
            .map(str::to_string)
    }

    /// The `agents.list[]` entry of `agent_id`, if any.
    /// The agent's default model as OpenClaw resolves it for the Runtime line: the agent
    /// entry's own `model` when it names a primary, else `agents.defaults.model`'s; each written
    /// either as a string (`"openai/gpt-5.4-mini"`) or as `{primary, fallbacks}`.
    pub fn default_model(&self, agent_id: &str) -> Option<String> {
        let primary = |value: &Value| {
            match value {
                Value::String(model) => Some(model.trim().to_string()),
                Value::Object(model) => model
                    .get("primary")
                    .and_then(Value::as_str)
                    .map(|model| model.trim().to_string()),
                _ => None,
            }
            .filter(|model| !model.is_empty())
        };
        self.agent_entry(agent_id)
            .and_then(|entry| dotted_get(entry, keys::MODEL.name()))
            .and_then(primary)
            .or_else(|| {
                dotted_get(
                    &self.root,
                    &format!("agents.defaults.{}", keys::MODEL.name()),
                )
                .and_then(primary)
            })
    }

    pub fn agent_entry(&self, agent_id: &str) -> Option<&Value> {
        self.get(keys::AGENTS_LIST)?
            .as_array()?
            .iter()
            .find(|entry| {
                entry
                    .get("id")
                    .and_then(Value::as_str)
                    .map(normalize_agent_id)
                    == Some(normalize_agent_id(agent_id))
            })
    }

    /// Bootstrap budgets (docs/routing.md §4.1): positive finite numbers are floored, anything else
    /// falls back to the default; an unset total is `max(perFile, 60000)`.
    pub fn bootstrap_limits(&self, agent_id: &str) -> BootstrapLimits {
        let max_chars = positive_count(self.agent_value(agent_id, keys::BOOTSTRAP_MAX_CHARS))
            .unwrap_or(DEFAULT_BOOTSTRAP_MAX_CHARS);
        let total_max_chars =
            positive_count(self.agent_value(agent_id, keys::BOOTSTRAP_TOTAL_MAX_CHARS))
                .unwrap_or_else(|| max_chars.max(DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS))
                .max(1);
        let warning = match self
            .get(keys::BOOTSTRAP_TRUNCATION_WARNING)
            .and_then(Value::as_str)
        {
            Some("off") => TruncationWarningMode::Off,
            Some("once") => TruncationWarningMode::Once,
            _ => TruncationWarningMode::Always,
        };
        BootstrapLimits {
            max_chars,
            total_max_chars,
            warning,
        }
    }

    /// The default agent: the first `agents.list[]` entry marked `default`, else the first entry,
    /// else `main` (ids compare trimmed and lower-cased, as OpenClaw normalizes them).
    pub fn default_agent_id(&self) -> String {
        let Some(list) = self.get(keys::AGENTS_LIST).and_then(Value::as_array) else {
            return "main".to_string();
        };
        let chosen = list
            .iter()
            .find(|entry| entry.get("default").and_then(Value::as_bool) == Some(true))
            .or_else(|| list.first());
        chosen
            .and_then(|entry| entry.get("id"))
            .and_then(Value::as_str)
            .map(normalize_agent_id)
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| "main".to_string())
    }

    /// Whether heartbeats run for `agent_id` at all (OpenClaw's agent policy): when any
    /// `agents.list[]` entry has a `heartbeat` block, exactly those agents; otherwise the default
    /// agent. Then the cadence must be on: `every` (the agent's, else the defaults', else `30m`)
    /// must parse to more than zero.
    pub fn heartbeat_enabled(&self, agent_id: &str) -> bool {
        let agent = normalize_agent_id(agent_id);
        let list = self
            .get(keys::AGENTS_LIST)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let has_block = |entry: &Value| entry.get("heartbeat").is_some_and(is_truthy_value);
        let allowed = if list.iter().any(has_block) {
            list.iter().any(|entry| {
                has_block(entry)
                    && entry
                        .get("id")
                        .and_then(Value::as_str)
                        .map(normalize_agent_id)
                        == Some(agent.clone())
            })
        } else {
            agent == self.default_agent_id()
        };
        allowed
            && match self.agent_value(agent_id, keys::HEARTBEAT_EVERY) {
                None | Some(Value::Null) => true,
                // OpenClaw reads the cadence only as text: a JSON number turns heartbeats off.
                Some(Value::String(text)) => parse_duration_ms(text).is_some_and(|ms| ms > 0),
                Some(_) => false,
            }
    }

    /// The heartbeat gate of docs/routing.md §3.3 for `agent_id` (also gates the system prompt's
    /// Heartbeats section): the default agent only, heartbeats enabled for it, and
    /// `includeSystemPromptSection` not `false` (the agent's value, else the defaults').
    pub fn heartbeat_section_enabled(&self, agent_id: &str) -> bool {
        normalize_agent_id(agent_id) == self.default_agent_id()
            && self.heartbeat_enabled(agent_id)
            && self
                .agent_value(agent_id, keys::HEARTBEAT_IN_PROMPT)
                .and_then(Value::as_bool)
                != Some(false)
    }

    /// Whether a non-heartbeat run of `agent_id` drops HEARTBEAT.md: only the default agent's
    /// runs do, when its gate is off (another agent's file is left alone, as OpenClaw does).
    pub fn drops_heartbeat_file(&self, agent_id: &str) -> bool {
        normalize_agent_id(agent_id) == self.default_agent_id()
            && !self.heartbeat_section_enabled(agent_id)
    }

    /// The agent's skills allowlist: `agents.list[].skills` when present (even `[]`), else
    /// `agents.defaults.skills`, else unrestricted (`None`).
    pub fn skills_allowlist(&self, agent_id: &str) -> Option<Vec<String>> {
        // Present on the agent (even `[]`) wins; absent falls back to the defaults. Entries are
        // trimmed (`" weather "` names `weather`), as OpenClaw normalizes them.
        Some(
            string_list(self.agent_value(agent_id, keys::SKILLS)?)
                .into_iter()
                .map(|name| name.trim().to_string())
                .filter(|name| !name.is_empty())
                .collect(),
        )
    }

    /// `skills.entries.<key>` object, if configured.
    pub fn skill_entry(&self, key: &str) -> Option<&Value> {
        self.get(keys::SKILL_ENTRIES)?.get(key)
    }

    /// Whether exec tells the agent when a background command ends (OpenClaw's automatic
    /// completion wake): the agent's own `tools.exec.notifyOnExit`, else the global one; on
    /// unless it is `false`, as OpenClaw 2026.6.10's exec defaults read it.
    pub fn exec_notify_on_exit(&self, agent_id: &str) -> bool {
        let own = self
            .agent_entry(agent_id)
            .and_then(|entry| dotted_get(entry, "tools.exec.notifyOnExit"))
            .filter(|value| !value.is_null());
        own.or_else(|| self.get(keys::EXEC_NOTIFY_ON_EXIT)) != Some(&Value::Bool(false))
    }

    /// `skills.allowBundled` (empty = unrestricted), as OpenClaw 2026.6.10 normalizes it: each
    /// entry as text (`String(entry)`), trimmed, empty ones dropped.
    pub fn allow_bundled(&self) -> Vec<String> {
        self.get(keys::SKILLS_ALLOW_BUNDLED)
            .and_then(Value::as_array)
            .map(|entries| {
                entries
                    .iter()
                    .map(|entry| js_string(entry).trim().to_string())
                    .filter(|entry| !entry.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `skills.load.extraDirs`.
    pub fn skill_extra_dirs(&self) -> Vec<String> {
        self.get(keys::SKILLS_EXTRA_DIRS)
            .map(string_list)
            .unwrap_or_default()
    }

    /// Skills budget for the agent: `(maxSkillsPromptChars, maxSkillsInPrompt)`.
    pub fn skills_limits(&self, agent_id: &str) -> (usize, usize) {
        let per_agent = self
            .agent_entry(agent_id)
            .and_then(|entry| dotted_get(entry, "skillsLimits.maxSkillsPromptChars"));
        // (listed in `keys::KNOWN` as `agents.list[].skillsLimits.maxSkillsPromptChars`)
        let max_chars = positive_count(per_agent)
            .or_else(|| positive_count(self.get(keys::SKILLS_MAX_PROMPT_CHARS)))
            .unwrap_or(DEFAULT_MAX_SKILLS_PROMPT_CHARS);
        let max_count = positive_count(self.get(keys::SKILLS_MAX_IN_PROMPT))
            .unwrap_or(DEFAULT_MAX_SKILLS_IN_PROMPT);
        (max_chars, max_count)
    }

    /// A plugin is enabled unless `plugins.entries.<id>.enabled` is `false`.
    pub fn plugin_enabled(&self, plugin_id: &str) -> bool {
        self.get(keys::PLUGIN_ENTRIES)
            .and_then(|entries| entries.get(plugin_id))
            .and_then(|entry| entry.get("enabled"))
            .and_then(Value::as_bool)
            != Some(false)
    }

    /// JavaScript truthiness of a config path (skills `requires.config` gate).
    /// The path comes from a skill's frontmatter, not from clawbridge, so it is not in the table.
    pub fn is_truthy(&self, dotted: &str) -> bool {
        match config_path_get(&self.root, dotted).as_deref() {
            // Unset: OpenClaw's own default for the few keys that have one (the browser is on
            // unless turned off). A `null` is set, and false.
            None => CONFIG_DEFAULTS_TRUE.contains(&dotted),
            Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(Value::Number(number)) => number.as_f64().is_some_and(|n| n != 0.0),
            // Trimmed first: `"  "` is not a value.
            Some(Value::String(text)) => !text.trim().is_empty(),
            Some(_) => true,
        }
    }

    /// Dotted paths of keys clawbridge does not read, sorted.
    pub fn unknown_keys(&self) -> Vec<String> {
        let mut unknown = Vec::new();
        collect_unknown(&self.root, String::new(), &mut unknown);
        unknown.sort();
        unknown
    }
}

/// Config paths that are true when unset (`requires.config` gates read them so).
const CONFIG_DEFAULTS_TRUE: [&str; 1] = ["browser.enabled"];

fn collect_unknown(value: &Value, path: String, out: &mut Vec<String>) {
    if !path.is_empty() && is_known(&path) {
        return;
    }
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                collect_unknown(child, child_path, out);
            }
        }
        Value::Array(items) if path.ends_with("list") || !items.is_empty() => {
            if items.iter().all(Value::is_object) && !items.is_empty() {
                for item in items {
                    collect_unknown(item, format!("{path}[]"), out);
                }
            } else if !path.is_empty() {
                out.push(path);
            }
        }
        _ if path.is_empty() => {}
        _ => out.push(path),
    }
}

fn is_known(path: &str) -> bool {
    let segments = split_path(path);
    keys::KNOWN.iter().any(|known| {
        let pattern = split_path(known);
        pattern.len() <= segments.len()
            && pattern
                .iter()
                .zip(&segments)
                .all(|(want, have)| want == "*" && !have.ends_with("[]") || want == have)
    })
}

/// The key clawbridge reads that an unread `path` (as [`OpenClawConfig::unknown_keys`] lists
/// it) is most likely a typo of: the same depth, every segment equal or a near miss
/// ([`crate::support::suggest`]), `*` in the table standing for the segment as typed.
pub fn nearest_known_key(path: &str) -> Option<String> {
    let segments = split_path(path);
    keys::KNOWN.iter().find_map(|known| {
        let pattern = split_path(known);
        if pattern.len() != segments.len() {
            return None;
        }
        let fixed: Option<Vec<&str>> = pattern
            .iter()
            .zip(&segments)
            .map(|(want, typed)| {
                if want == "*" || want == typed {
                    Some(typed.as_str())
                } else {
                    crate::support::suggest::closest(typed, [want.as_str()])
                }
            })
            .collect();
        fixed.map(|fixed| fixed.join("."))
    })
}

fn split_path(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

fn dotted_get<'a>(value: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .try_fold(value, |value, key| value.get(key))
}

/// A `requires.config` path as OpenClaw 2026.6.10's `resolveConfigPath` walks it: empty segments
/// (`a..b`, a leading or trailing dot) are skipped, and a segment indexes an array by its
/// canonical decimal index (`list.0`), or reads its `length`.
fn config_path_get<'a>(root: &'a Value, dotted: &str) -> Option<std::borrow::Cow<'a, Value>> {
    use std::borrow::Cow;
    let mut current = Cow::Borrowed(root);
    for part in dotted.split('.').filter(|part| !part.is_empty()) {
        let next = match current {
            Cow::Borrowed(Value::Object(map)) => Cow::Borrowed(map.get(part)?),
            Cow::Borrowed(Value::Array(items)) if part == "length" => {
                Cow::Owned(Value::from(items.len()))
            }
            Cow::Borrowed(Value::Array(items)) => {
                let canonical = part == "0" || !part.starts_with('0');
                let index: usize = part
                    .parse()
                    .ok()
                    .filter(|_| canonical && part.bytes().all(|b| b.is_ascii_digit()))?;
                Cow::Borrowed(items.get(index)?)
            }
            _ => return None,
        };
        current = next;
    }
    Some(current)
}

/// Agent ids compare trimmed and lower-cased.
pub fn normalize_agent_id(id: &str) -> String {
    id.trim().to_lowercase()
}

/// JavaScript truthiness of a JSON value (`Boolean(value)`: `"  "` is true, `""` and `0` false).
pub fn is_truthy_value(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        _ => true,
    }
}

/// JavaScript's `String(value)` of a JSON value.
fn js_string(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "null".to_string(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => match number.as_f64() {
            Some(n) if n.fract() == 0.0 && n.abs() < 1e21 => format!("{n:.0}"),
            _ => number.to_string(),
        },
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_string(),
    }
}

/// A positive finite number, floored; anything else is "unset".
fn positive_count(value: Option<&Value>) -> Option<usize> {
    let number = value?.as_f64()?;
    (number.is_finite() && number >= 1.0).then(|| number.floor() as usize)
}

/// The strings of a JSON array (other items skipped); empty for anything else.
pub fn string_list(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A duration as OpenClaw 2026.6.10's `parseDurationMs` reads it, in milliseconds: trimmed and
/// lower-cased, then one number with an optional unit (`45`, `45M`, `1.5h`: a bare number is
/// minutes, the unit heartbeats give it) or numbers with units back to back (`1h30m`). Units
/// `ms`, `s`, `m`, `h`, `d`; a number is ASCII digits with an optional `.digits` (no sign,
/// exponent or bare dot); the total is rounded to the nearest millisecond and must be a safe
/// integer. `None` when the text is not a duration.
pub fn parse_duration_ms(text: &str) -> Option<u64> {
    const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
    let text = text.trim().to_lowercase();
    let mut rest = text.as_str();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut first = true;
    while !rest.is_empty() {
        let (number, after) = leading_number(rest)?;
        // `ms` before `m`, as OpenClaw's alternation tries it.
        let unit = ["ms", "s", "m", "h", "d"]
            .into_iter()
            .find(|unit| after.starts_with(unit));
        let (scale, after) = match unit {
            Some(unit) => (unit_ms(unit), &after[unit.len()..]),
            // A bare number only on its own.
            None if first && after.is_empty() => (60_000.0, after),
            None => return None,
        };
        total += number * scale;
        rest = after;
        first = false;
    }
    let rounded = total.round();
    (rounded.is_finite() && rounded <= MAX_SAFE_INTEGER).then_some(rounded as u64)
}

/// `\d+(\.\d+)?` at the start of `text`: its value and what follows it.
fn leading_number(text: &str) -> Option<(f64, &str)> {
    let digits = |from: &str| from.bytes().take_while(u8::is_ascii_digit).count();
    let whole = digits(text);
    if whole == 0 {
        return None;
    }
    let mut end = whole;
    if text[end..].starts_with('.') {
        let fraction = digits(&text[end + 1..]);
        if fraction > 0 {
            end += 1 + fraction;
        }
    }
    Some((text[..end].parse().ok()?, &text[end..]))
}

fn unit_ms(unit: &str) -> f64 {
    match unit {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => 86_400_000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_default_model_is_the_agent_s_own_then_the_defaults_in_either_form() {
        let config = |value: Value| OpenClawConfig::new(value);
        let defaults_string =
            config(json!({"agents": {"defaults": {"model": "openai/gpt-5.4-mini"}}}));
        assert_eq!(
            defaults_string.default_model("main").as_deref(),
            Some("openai/gpt-5.4-mini")
        );
        let both = config(json!({"agents": {
            "defaults": {"model": {"primary": "openai/gpt-5.5", "fallbacks": ["x/y"]}},
            "list": [
                {"id": "ops", "model": "anthropic/claude-x"},
                {"id": "Research", "model": {"primary": "openai/gpt-5.4"}},
                {"id": "quiet", "model": {"fallbacks": ["x/y"]}}
            ]
        }}));
        assert_eq!(
            both.default_model("main").as_deref(),
            Some("openai/gpt-5.5")
        );
        assert_eq!(
            both.default_model("ops").as_deref(),
            Some("anthropic/claude-x")
        );
        assert_eq!(
            both.default_model("research").as_deref(),
            Some("openai/gpt-5.4")
        );
        // An entry without a primary leaves the defaults' in place.
        assert_eq!(
            both.default_model("quiet").as_deref(),
            Some("openai/gpt-5.5")
        );
        assert_eq!(config(json!({})).default_model("main"), None);
        assert_eq!(
            config(json!({"agents": {"defaults": {"model": " "}}})).default_model("main"),
            None
        );
    }

    #[test]
    fn per_agent_limits_override_defaults() {
        let config = OpenClawConfig::new(json!({
            "agents": {
                "defaults": {"bootstrapMaxChars": 1000.9, "bootstrapPromptTruncationWarning": "once"},
                "list": [{"id": "ops", "bootstrapMaxChars": 500, "bootstrapTotalMaxChars": -3}]
            }
        }));
        let main = config.bootstrap_limits("main");
        assert_eq!(main.max_chars, 1000);
        assert_eq!(main.total_max_chars, 60_000);
        assert_eq!(main.warning, TruncationWarningMode::Once);
        let ops = config.bootstrap_limits("ops");
        assert_eq!((ops.max_chars, ops.total_max_chars), (500, 60_000));
    }

    #[test]
    fn unread_keys_name_the_key_they_are_near() {
        assert_eq!(
            super::nearest_known_key("agents.defaults.bootstrapMaxChar").as_deref(),
            Some("agents.defaults.bootstrapMaxChars")
        );
        assert_eq!(
            super::nearest_known_key("agent.defaults.bootstrapMaxChars").as_deref(),
            Some("agents.defaults.bootstrapMaxChars")
        );
        assert_eq!(super::nearest_known_key("gateway.port"), None);
        assert_eq!(super::nearest_known_key("agents.defaults.zzzzzzzz"), None);
    }

    #[test]
    fn unknown_keys_are_listed_by_path() {
        let config = OpenClawConfig::new(json!({
            "agents": {"defaults": {"bootstrapMaxChar": 10, "heartbeat": {"every": "1h"}},
                       "list": [{"id": "main", "skils": []}]},
            "skills": {"entries": {"weather": {"enabled": true, "colour": 1}}},
            "gateway": {"port": 1}
        }));
        assert_eq!(
            config.unknown_keys(),
            vec![
                "agents.defaults.bootstrapMaxChar",
                "agents.list[].skils",
                "gateway.port",
                "skills.entries.weather.colour",
            ]
        );
    }

    #[test]
    fn the_warning_follows_the_table_of_read_keys() {
        // Read, so not warned about.
        let read = OpenClawConfig::new(json!({
            "agents": {"defaults": {"heartbeat": {"prompt": "p"}, "repoRoot": "/r"}},
            "commands": {"ownerDisplaySecret": "s"}
        }));
        assert!(read.unknown_keys().is_empty(), "{:?}", read.unknown_keys());
        // Not read by clawbridge: warned about.
        let ignored =
            OpenClawConfig::new(json!({"tools": {"exec": {"host": "x"}}, "ui": {"assistant": {}}}));
        assert_eq!(
            ignored.unknown_keys(),
            vec!["tools.exec.host", "ui.assistant"]
        );
    }

    #[test]
    fn heartbeat_gate() {
        assert!(OpenClawConfig::default().heartbeat_section_enabled("main"));
        let zero =
            OpenClawConfig::new(json!({"agents": {"defaults": {"heartbeat": {"every": "0m"}}}}));
        assert!(!zero.heartbeat_enabled("main"));
        let hidden = OpenClawConfig::new(
            json!({"agents": {"defaults": {"heartbeat": {"includeSystemPromptSection": false}}}}),
        );
        assert!(hidden.heartbeat_enabled("main") && !hidden.heartbeat_section_enabled("main"));
        assert!(
            !OpenClawConfig::new(json!({"agents": {"defaults": {"heartbeat": {"every": "soon"}}}}))
                .heartbeat_enabled("main"),
            "an unparsable cadence is off"
        );
        assert_eq!(parse_duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration_ms("soon"), None);
        let every = |value: Value| {
            OpenClawConfig::new(json!({"agents": {"defaults": {"heartbeat": {"every": value}}}}))
                .heartbeat_enabled("main")
        };
        // As OpenClaw 2026.6.10 reads it: units in any case, padded, a bare number of minutes;
        // a JSON number is not text, so heartbeats are off.
        assert!(every(json!("45M")) && every(json!(" 1H30M ")) && every(json!("45")));
        assert!(!every(json!(45)) && !every(json!("+5")) && !every(json!("inf")));
        assert!(every(Value::Null), "null is the default, 30m");
    }

    #[test]
    fn durations_as_openclaw_reads_them() {
        for (text, ms) in [
            ("45", Some(2_700_000)),
            ("45M", Some(2_700_000)),
            ("  2h ", Some(7_200_000)),
            ("1.5H", Some(5_400_000)),
            ("500MS", Some(500)),
            ("1m5s", Some(65_000)),
            ("1d2h3m4s5ms", Some(93_784_005)),
            ("0.5ms", Some(1)),
            ("0", Some(0)),
            ("1.5", Some(90_000)),
            ("", None),
            ("   ", None),
            ("1h30", None),
            ("1h 30m", None),
            ("+5", None),
            ("-5m", None),
            ("1e3", None),
            (".5h", None),
            ("5.h", None),
            ("inf", None),
            ("NaN", None),
            ("5w", None),
            ("99999999999999999999d", None),
        ] {
            assert_eq!(parse_duration_ms(text), ms, "{text:?}");
        }
    }

    #[test]
    fn per_agent_heartbeats() {
        // The agent's own block wins over the defaults, key by key.
        let off = OpenClawConfig::new(json!({"agents": {
            "defaults": {"heartbeat": {"every": "30m"}},
            "list": [{"id": "main", "heartbeat": {"every": "0m"}}]
        }}));
        assert!(!off.heartbeat_enabled("main") && off.drops_heartbeat_file("main"));
        // With explicit heartbeat agents, only they have heartbeats.
        let explicit = OpenClawConfig::new(json!({"agents": {"list": [
            {"id": "main"},
            {"id": "ops", "heartbeat": {"every": "1h"}}
        ]}}));
        assert!(!explicit.heartbeat_enabled("main"));
        assert!(explicit.heartbeat_enabled("ops"));
        // The prompt section is the default agent's only; other agents keep their HEARTBEAT.md.
        assert!(!explicit.heartbeat_section_enabled("ops"));
        assert!(!explicit.drops_heartbeat_file("ops"));
        assert!(explicit.drops_heartbeat_file("main"));
        // The default agent is the one marked `default`, else the first entry.
        let marked = OpenClawConfig::new(
            json!({"agents": {"list": [{"id": "a"}, {"id": "B", "default": true}]}}),
        );
        assert_eq!(marked.default_agent_id(), "b");
        assert!(marked.heartbeat_section_enabled("b") && !marked.heartbeat_section_enabled("a"));
    }
}
