//! Raw model-request capture: the exact request Codex sent to the offline stub, redacted, and a
//! readable rendering that labels each layer (docs/codex-wire.md §8.1).
//!
//! OpenClaw's own snapshots reconstruct the prompt; this records what Codex really sent, so the
//! layers Codex adds itself (its skills list, permission text, AGENTS.md, environment context)
//! are visible too. Volatile values (ids, dates, ports, machine paths) are replaced with
//! placeholders so captures can be compared across runs and machines.

use std::path::Path;

use regex::Regex;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::record::CapturedRequest;

pub mod cache;
pub mod live;
use clawbridge_support::text::len16;

/// Volatile values: ids, commit hashes, dates, times, ports, long numbers. Compiled once.
fn volatile_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: std::sync::LazyLock<Vec<(Regex, &'static str)>> = std::sync::LazyLock::new(
        || {
            [
                (r"\b[0-9a-f]{40}\b", "<sha>"),
                (
                    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
                    "<uuid>",
                ),
                (
                    r"\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(\.\d+)?Z?",
                    "<timestamp>",
                ),
                (r"\b\d{4}-\d{2}-\d{2}\b", "<date>"),
                // Times of day (OpenClaw stamps system events: `[2026-12-01 17:32:40 UTC]`).
                (r"\b\d{2}:\d{2}:\d{2}(\.\d+)?\b", "<time>"),
                // OpenClaw's human clock lines: `Tuesday, December 1st, 2026 - 5:37 PM (UTC)`,
                // `Reference UTC: 2026-12-01 17:37 UTC`.
                (
                    r"\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}(st|nd|rd|th)?, \d{4}\b",
                    "<date>",
                ),
                (r"\b\d{1,2}:\d{2} ?(AM|PM)\b", "<time>"),
                (r"<date>([ T])\d{2}:\d{2}\b", "<date>${1}<time>"),
                (
                    r"<timezone>[^<]*</timezone>",
                    "<timezone><redacted></timezone>",
                ),
                (r"(127\.0\.0\.1|localhost):\d+", "$1:<port>"),
                // Credentials wherever they stand: API keys, bearer JWTs, and account or
                // session ids written as JSON inside a string (a header holding JSON).
                (r"\bsk-[A-Za-z0-9_-]{16,}", "<api-key>"),
                (
                    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
                    "<token>",
                ),
                (
                    r#""((?i)[a-z_]*(account_id|session_id|api_key|access_token|refresh_token|id_token))"\s*:\s*"[^"]*""#,
                    r#""$1":"<redacted>""#,
                ),
                (r"\b\d{10,}\b", "<number>"),
            ]
            .into_iter()
            .filter_map(|(pattern, replacement)| {
                Regex::new(pattern).ok().map(|regex| (regex, replacement))
            })
            .collect()
        },
    );
    &PATTERNS
}

/// Codex's turn metadata names each workspace's git remotes (`"associated_remote_urls":
/// {"origin": "..."}`): a clone's remote is often a path on the machine it was cloned on, or a
/// URL with a user in it, so every remote's address becomes `<remote-url>` (its name stays).
fn redact_remote_urls(text: &str) -> Option<String> {
    static REMOTES: std::sync::LazyLock<Option<(Regex, Regex)>> = std::sync::LazyLock::new(|| {
        let block = Regex::new(r#""associated_remote_urls"\s*:\s*\{[^{}]*\}"#).ok()?;
        let entry = Regex::new(r#"("(?:[^"\\]|\\.)*"\s*:\s*)"(?:[^"\\]|\\.)*""#).ok()?;
        Some((block, entry))
    });
    let (block, entry) = REMOTES.as_ref()?;
    if !block.is_match(text) {
        return None;
    }
    Some(
        block
            .replace_all(text, |found: &regex::Captures<'_>| {
                entry
                    .replace_all(&found[0], r#"${1}"<remote-url>""#)
                    .into_owned()
            })
            .into_owned(),
    )
}

/// Values replaced by placeholders, longest first.
#[derive(Clone, Debug, Default)]
pub struct Redactions {
    pairs: Vec<(String, String)>,
}

impl Redactions {
    /// Replace `value` with `placeholder` wherever it occurs (empty values are ignored).
    pub fn add(&mut self, value: impl Into<String>, placeholder: &str) {
        let value = value.into();
        if value.len() > 1 && !self.pairs.iter().any(|(known, _)| *known == value) {
            self.pairs.push((value, placeholder.to_string()));
            self.pairs
                .sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
        }
    }

    /// A path and its canonical form.
    pub fn add_path(&mut self, path: &Path, placeholder: &str) {
        self.add(path.to_string_lossy().into_owned(), placeholder);
        if let Ok(real) = path.canonicalize() {
            self.add(real.to_string_lossy().into_owned(), placeholder);
        }
    }

    fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, placeholder) in &self.pairs {
            if out.contains(value.as_str()) {
                out = replace_path(&out, value, placeholder);
            }
        }
        if let Some(replaced) = redact_remote_urls(&out) {
            out = replaced;
        }
        for (pattern, replacement) in volatile_patterns() {
            if let std::borrow::Cow::Owned(replaced) = pattern.replace_all(&out, *replacement) {
                out = replaced;
            }
        }
        // Credentials in the prompt itself (a URL's password, a key pasted into a chat): the
        // shapes no prompt holds by accident.
        if let std::borrow::Cow::Owned(replaced) =
            clawbridge_support::redact::redact_credentials(&out)
        {
            out = replaced;
        }
        out
    }

    /// Redact every string (and object key) of a JSON value.
    pub fn redact(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.apply(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.redact(item)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, item)| {
                        let redacted = if is_clock_reading(key, item) {
                            Value::String("<timestamp>".to_string())
                        } else if is_credential_key(key) && item.is_string() {
                            Value::String("<redacted>".to_string())
                        } else {
                            self.redact(item)
                        };
                        (self.apply(key), redacted)
                    })
                    .collect::<Map<String, Value>>(),
            ),
            other => other.clone(),
        }
    }
}

/// A key whose value is a credential or an account's identity, whatever the value looks like.
fn is_credential_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace(['-', '_'], "");
    [
        "authorization",
        "cookie",
        "setcookie",
        "apikey",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "accountid",
        "chatgptaccountid",
        "sessionid",
        "password",
        "secret",
    ]
    .iter()
    .any(|credential| key == *credential || key.ends_with(credential))
}

/// A wall-clock reading as a number: `create_time`, `*_time`, `*_at`, `*_ms` keys holding Unix
/// seconds or milliseconds (Codex stamps history items with them).
fn is_clock_reading(key: &str, value: &Value) -> bool {
    let timed = key == "create_time"
        || key.ends_with("_time")
        || key.ends_with("_at")
        || key.ends_with("At")
        || key.ends_with("_ms")
        || key.ends_with("Ms");
    timed && value.as_f64().is_some_and(|number| number >= 1e9)
}

/// Replace `value` where it stands as a path: not inside a tag name (`</root>` is not the home
/// folder `/root`) and not as the prefix of a longer name (`/rootfs`).
fn replace_path(text: &str, value: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(value) {
        let before = rest[..at].chars().last().or_else(|| out.chars().last());
        let after = rest[at + value.len()..].chars().next();
        let standalone = before != Some('<')
            && !after.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '-');
        out.push_str(&rest[..at]);
        out.push_str(if standalone { placeholder } else { value });
        rest = &rest[at + value.len()..];
    }
    out.push_str(rest);
    out
}

/// Headers worth keeping in a capture (the rest is transport detail).
const KEPT_HEADERS: [&str; 4] = [
    "originator",
    "user-agent",
    "x-codex-turn-metadata",
    "content-type",
];

/// The fingerprint of an `Authorization` value as captures file it: the account form the
/// endpoint, `clawbridge account` and named accounts use (`apiKey-1a2b…`,
/// `support::credential`), so a capture's request is matched to its account by eye.
pub fn credential_fingerprint(authorization: &str) -> String {
    clawbridge_support::credential::of_authorization(authorization)
}

/// `redactions` and the git checkouts Codex names in the request's turn metadata
/// (`workspaces`, keyed by each checkout's path, sent when one has changes). Codex looks for the
/// checkout around the thread's folder on its own, past a folder that only looks like one, so
/// the path it names is not always one the caller knew of: each becomes `<git-root>` unless a
/// placeholder covers it already. Borrowed as it came when there is none (most requests): no
/// copy, and no file system call, per request.
fn with_reported_checkouts<'a>(
    request: &CapturedRequest,
    redactions: &'a Redactions,
) -> std::borrow::Cow<'a, Redactions> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(default)]
        workspaces: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
    }
    let unknown: Vec<String> = request
        .headers
        .get("x-codex-turn-metadata")
        .and_then(|text| serde_json::from_str::<Metadata>(text).ok())
        .into_iter()
        .flat_map(|metadata| metadata.workspaces.into_keys())
        .filter(|path| Path::new(path).is_absolute() && redactions.apply(path) == *path)
        .collect();
    if unknown.is_empty() {
        return std::borrow::Cow::Borrowed(redactions);
    }
    let mut all = redactions.clone();
    for path in unknown {
        // As Codex wrote it: the checkout's path as Codex resolved it.
        all.add(path, "<git-root>");
    }
    std::borrow::Cow::Owned(all)
}

/// The redacted request document written as `model-request.json`.
pub fn redacted_request(request: &CapturedRequest, redactions: &Redactions) -> Value {
    let redactions = with_reported_checkouts(request, redactions);
    let redactions = redactions.as_ref();
    let headers: Map<String, Value> = request
        .headers
        .iter()
        .filter(|(name, _)| KEPT_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), Value::String(value.clone())))
        .collect();
    let mut redacted =
        redactions.redact(&json!({"path": request.path, "headers": headers, "body": request.body}));
    // Which credential the request went out with, never the credential: a short SHA-256 of its
    // `Authorization` value, so an operator can tell one account's requests from another's.
    if let Some(credential) = request.headers.get("authorization") {
        redacted["credential"] = Value::String(credential_fingerprint(credential));
    }
    // Fingerprints of the request as sent, for `cache-report` (redaction would hide a changed
    // clock or id, the very things that break a prompt cache).
    redacted["cacheElements"] = cache::fingerprints(&request.body);
    // The OS and architecture in the user agent are machine facts.
    if let Some(agent) = redacted["headers"]["user-agent"].as_str() {
        let cleaned = Regex::new(r"\([^)]*;[^)]*\)")
            .map(|regex| regex.replace(agent, "(<os>; <arch>)").into_owned())
            .unwrap_or_else(|_| agent.to_string());
        redacted["headers"]["user-agent"] = Value::String(cleaned);
    }
    redacted
}

/// One labelled layer of a model-bound request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layer {
    pub label: String,
    /// Where it sits, e.g. `input[1].content[0]` or `tools`.
    pub position: String,
    pub role: String,
    pub chars: usize,
    pub text: String,
}

/// Label the layers of a request body. `developer_instructions` is the text clawbridge sent as
/// `thread/start.developerInstructions`, so that layer can be told apart from Codex's own.
pub fn label_layers(body: &Value, developer_instructions: Option<&str>) -> Vec<Layer> {
    label_layers_with(body, developer_instructions, &[], &[])
}

/// [`label_layers`], also naming the `turn/start.additionalContext` entries whose keys are
/// given (Codex sends each as `<key>value</key>`) and the texts a client injected into the
/// thread's history (`thread/inject_items`).
pub fn label_layers_with(
    body: &Value,
    developer_instructions: Option<&str>,
    context_keys: &[String],
    injected: &[String],
) -> Vec<Layer> {
    let mut layers = Vec::new();
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    for (index, item) in inputs.iter().enumerate() {
        let role = item["role"]
            .as_str()
            .unwrap_or(item["type"].as_str().unwrap_or("?"))
            .to_string();
        let contents = item["content"].as_array().cloned().unwrap_or_default();
        if contents.is_empty() {
            let text = item.to_string();
            layers.push(Layer {
                label: history_item_label(item),
                position: format!("input[{index}]"),
                role,
                chars: len16(&text),
                text,
            });
            continue;
        }
        for (part, content) in contents.iter().enumerate() {
            let text = content["text"].as_str().unwrap_or_default().to_string();
            let label = if is_base_instructions(&inputs, index, &role, part, &text) {
                "Codex base instructions".to_string()
            } else if Some(text.as_str()) == developer_instructions {
                "OpenClaw developer instructions (thread/start.developerInstructions)".to_string()
            } else if injected.contains(&text) {
                "Injected into the history (thread/inject_items)".to_string()
            } else if let Some(key) = context_keys.iter().find(|key| {
                text.starts_with(&format!("<{key}>"))
                    && text.trim_end().ends_with(&format!("</{key}>"))
            }) {
                format!("Turn context `{key}` (turn/start.additionalContext)")
            } else if text.starts_with("<skills_instructions>") {
                "Codex skills list".to_string()
            } else if text.starts_with("<permissions instructions>") {
                "Codex permissions".to_string()
            } else if text.starts_with("<collaboration_mode>") {
                "Collaboration mode (turn/start.collaborationMode)".to_string()
            } else if text.starts_with("<tools>") {
                "Codex tools note (deferred namespaces)".to_string()
            } else if text.starts_with("# AGENTS.md instructions") {
                "AGENTS.md (Codex native discovery)".to_string()
            } else if text.starts_with("<environment_context>") {
                "Codex environment context".to_string()
            } else if text.starts_with("<multi_agent_role>") {
                "Codex multi-agent role".to_string()
            } else if text.starts_with("<multi_agent_mode>") {
                "Codex multi-agent mode".to_string()
            } else if text.starts_with("<personality_spec>") {
                "Codex personality".to_string()
            } else if role == "developer"
                && part == 0
                && !text.starts_with('<')
                && contents[1..].iter().any(|later| {
                    later["text"].as_str().is_some_and(|later| {
                        later.starts_with("<permissions instructions>")
                            || later.starts_with("<skills_instructions>")
                    })
                })
            {
                // The head of the developer bundle Codex builds at thread start, when the
                // writer did not know the text (a capture read back without its layers.md).
                "Developer instructions (thread/start.developerInstructions)".to_string()
            } else if let Some(key) = (role == "developer" && context_keys.is_empty())
                .then(|| context_key(&text))
                .flatten()
            {
                // Read from the body alone (the turn's keys unknown): Codex's shape for them.
                format!("Turn context `{key}` (turn/start.additionalContext)")
            } else if role == "developer"
                && inputs[..index].iter().any(|earlier| {
                    earlier["role"] == "assistant" || earlier["type"] == "function_call"
                })
            {
                // A developer text after the conversation began, not one of Codex's own: a
                // client's `thread/inject_items` (the writer names it when it saw the call).
                "Developer text added to the history (thread/inject_items or an earlier turn)"
                    .to_string()
            } else if role == "user" {
                "User input (turn/start.input)".to_string()
            } else if role == "assistant" {
                "Assistant message".to_string()
            } else {
                format!("{role} message")
            };
            layers.push(Layer {
                label,
                position: format!("input[{index}].content[{part}]"),
                role: role.clone(),
                chars: len16(&text),
                text,
            });
        }
    }
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = tools
        .iter()
        .map(|tool| {
            tool["name"]
                .as_str()
                .or_else(|| tool["type"].as_str())
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    let tools_text = clawbridge_support::json::to_pretty(&Value::Array(tools));
    layers.push(Layer {
        label: if names.is_empty() {
            "Tools (none here: see the additional_tools item)".to_string()
        } else {
            format!("Tools ({})", names.join(", "))
        },
        position: "tools".to_string(),
        role: "tools".to_string(),
        chars: len16(&tools_text),
        text: tools_text,
    });
    layers
}

/// Codex's base instructions: the first developer text of the request. Codex sends them as the
/// request's first item for models whose catalog entry asks so, after an `additional_tools` item
/// when the model takes its tools there (code mode: OpenClaw 2026.9.6's default `gpt-6-astra`).
fn is_base_instructions(
    inputs: &[Value],
    index: usize,
    role: &str,
    part: usize,
    text: &str,
) -> bool {
    let first_message = inputs
        .iter()
        .position(|item| item["content"].is_array())
        .unwrap_or(0);
    role == "developer"
        && index == first_message
        && part == 0
        && inputs[..index]
            .iter()
            .all(|item| item["type"] == "additional_tools")
        && !text.starts_with('<')
}

/// The key of a developer text shaped as Codex sends a `turn/start.additionalContext` entry
/// (`<key>value</key>`, the key a lower-case identifier), when the key is none of Codex's own
/// tags.
fn context_key(text: &str) -> Option<&str> {
    const CODEX_TAGS: [&str; 6] = [
        "skills_instructions",
        "collaboration_mode",
        "tools",
        "environment_context",
        "multi_agent_role",
        "multi_agent_mode",
    ];
    let key = text.strip_prefix('<')?.split_once('>')?.0;
    let valid = !key.is_empty()
        && key
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_');
    (valid && !CODEX_TAGS.contains(&key) && text.trim_end().ends_with(&format!("</{key}>")))
        .then_some(key)
}

/// The label of an input item that is not a message: what Codex put there.
fn history_item_label(item: &Value) -> String {
    let names = |tools: &Value| -> Vec<String> {
        tools
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|tool| {
                let own = tool["name"].as_str().unwrap_or("?").to_string();
                match tool["tools"].as_array() {
                    Some(inner) => inner
                        .iter()
                        .map(|nested| format!("{own}.{}", nested["name"].as_str().unwrap_or("?")))
                        .collect(),
                    None => vec![own],
                }
            })
            .collect()
    };
    match item["type"].as_str().unwrap_or("?") {
        "additional_tools" => format!(
            "Tools (additional_tools: {})",
            names(&item["tools"]).join(", ")
        ),
        "configuration_update" => {
            let settings: Vec<&str> = item
                .as_object()
                .into_iter()
                .flat_map(|map| map.keys())
                .map(String::as_str)
                .filter(|key| *key != "type")
                .collect();
            format!("Codex configuration update ({})", settings.join(", "))
        }
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            format!("Tool call `{}`", item["name"].as_str().unwrap_or("?"))
        }
        "function_call_output" | "custom_tool_call_output" => "Tool result".to_string(),
        "reasoning" => "Reasoning (earlier turn)".to_string(),
        "compaction" | "compaction_summary" => "Compacted history".to_string(),
        other => format!("History item ({other})"),
    }
}

/// `layers.md`: a table of the layers, then each layer's text.
pub fn render_layers(layers: &[Layer], title: &str) -> String {
    let mut out = format!("# {title}\n\nEach layer of the model-bound request in order, as Codex sent it to the offline stub (volatile values redacted).\n\n| # | Layer | Position | Role | Chars |\n|---|---|---|---|---|\n");
    for (index, layer) in layers.iter().enumerate() {
        out.push_str(&format!(
            "| {} | {} | `{}` | {} | {} |\n",
            index + 1,
            layer.label,
            layer.position,
            layer.role,
            layer.chars
        ));
    }
    for (index, layer) in layers.iter().enumerate() {
        let info = if layer.role == "tools" {
            "json"
        } else {
            "text"
        };
        let longest = layer
            .text
            .split(|ch| ch != '`')
            .map(str::len)
            .max()
            .unwrap_or(0);
        let fence = "`".repeat((longest + 1).max(3));
        out.push_str(&format!(
            "\n## {}. {} (`{}`)\n\n{fence}{info}\n{}\n{fence}\n",
            index + 1,
            layer.label,
            layer.position,
            layer.text.trim_end()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Protection: a checkout Codex names in its turn metadata (a parent of the workspace, found
    /// past a `.git` folder that is no repository) is redacted even when the caller did not
    /// know it; a path a placeholder covers keeps that placeholder.
    #[test]
    fn the_checkouts_codex_reports_are_redacted() {
        let metadata = serde_json::json!({
            "thread_id": "t",
            "workspaces": {
                "/srv/agents/checkout": {"has_changes": true},
                "/srv/agents/checkout/ws": {"has_changes": true},
            },
        });
        let request = CapturedRequest {
            path: "/v1/responses".to_string(),
            headers: [("x-codex-turn-metadata".to_string(), metadata.to_string())]
                .into_iter()
                .collect(),
            body: serde_json::json!({"input": []}),
            at: None,
        };
        let mut known = Redactions::default();
        known.add("/srv/agents/checkout/ws", "<workspace>");
        let filed = redacted_request(&request, &known).to_string();
        assert!(!filed.contains("/srv/agents"), "{filed}");
        assert!(
            filed.contains("<git-root>") && filed.contains("<workspace>"),
            "{filed}"
        );
    }

    #[test]
    fn redaction_replaces_paths_ids_dates_and_ports() {
        let mut redactions = Redactions::default();
        redactions.add("/tmp/ws", "<workspace>");
        let value = json!({"a": "cwd /tmp/ws/x, id 01a22c62-8087-7fb1-8c6b-4fdef0530bf9, on 2026-11-30 at 127.0.0.1:42415, ms 1796040982696",
                           "event": "System: [2026-12-01 17:32:40 UTC] check",
                           "tz": "<timezone>Etc/UTC</timezone>"});
        let out = redactions.redact(&value);
        assert_eq!(
            out["a"],
            "cwd <workspace>/x, id <uuid>, on <date> at 127.0.0.1:<port>, ms <number>"
        );
        assert_eq!(out["tz"], "<timezone><redacted></timezone>");
        assert_eq!(out["event"], "System: [<date> <time> UTC] check");
        let clock = redactions.redact(&json!("Current time: Tuesday, December 1st, 2026 - 5:37 PM (UTC)\nReference UTC: 2026-12-01 17:37 UTC\nratio 16:9"));
        assert_eq!(
            clock,
            json!(
                "Current time: <date> - <time> (UTC)\nReference UTC: <date> <time> UTC\nratio 16:9"
            )
        );
        let stamped = redactions.redact(&json!({"meta": {"create_time": 1796144600.358, "count": 1796144600u64, "turn_started_at_ms": 1796040982696u64, "size_ms": 12}}));
        assert_eq!(
            stamped,
            json!({"meta": {"create_time": "<timestamp>", "count": 1796144600u64, "turn_started_at_ms": "<timestamp>", "size_ms": 12}}),
            "clock readings go, other numbers stay"
        );
        let metadata = r#"{"workspaces":{"/w":{"associated_remote_urls":{"origin":"/work/main","fork":"https://me:pw@example.com/r.git"},"has_changes":false}}}"#;
        assert_eq!(
            redactions.apply(metadata),
            r#"{"workspaces":{"/w":{"associated_remote_urls":{"origin":"<remote-url>","fork":"<remote-url>"},"has_changes":false}}}"#,
            "a clone's remotes are machine paths or carry a user"
        );
        let mut home = Redactions::default();
        home.add("/root", "<home>");
        assert_eq!(
            home.apply("<root>/root/ws</root> /rootfs /root"),
            "<root><home>/ws</root> /rootfs <home>"
        );
    }

    #[test]
    fn layers_are_labelled_by_wrapper() {
        let body = json!({"input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "DEV"}, {"type": "input_text", "text": "<permissions instructions>x"}, {"type": "input_text", "text": "<collaboration_mode>y</collaboration_mode>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /w"}, {"type": "input_text", "text": "<environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
        ], "tools": [{"type": "function", "name": "message"}]});
        let labels: Vec<String> = label_layers(&body, Some("DEV"))
            .into_iter()
            .map(|l| l.label)
            .collect();
        assert_eq!(labels[0], "Codex base instructions");
        assert!(labels[1].starts_with("OpenClaw developer instructions"));
        assert_eq!(labels[2], "Codex permissions");
        assert!(labels[3].starts_with("Collaboration mode"));
        assert!(labels[4].starts_with("AGENTS.md"));
        assert_eq!(labels[5], "Codex environment context");
        assert!(labels[6].starts_with("User input"));
        assert_eq!(labels[7], "Tools (message)");
        let body = json!({"input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<openclaw_clock>noon</openclaw_clock>"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "POLICY"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<other>x</other>"}]}
        ]});
        let labels: Vec<String> = label_layers_with(
            &body,
            None,
            &["openclaw_clock".to_string()],
            &["POLICY".to_string()],
        )
        .into_iter()
        .map(|l| l.label)
        .collect();
        assert_eq!(
            labels[1],
            "Turn context `openclaw_clock` (turn/start.additionalContext)"
        );
        assert_eq!(labels[2], "Injected into the history (thread/inject_items)");
        assert_eq!(
            labels[3], "developer message",
            "when the turn's keys are known, an unknown tag is not guessed"
        );
        // From the body alone (a capture read back without its layers.md), Codex's shape for a
        // context entry names it.
        let labels: Vec<String> = label_layers(&body, None)
            .into_iter()
            .map(|l| l.label)
            .collect();
        assert_eq!(labels[0], "Codex base instructions");
        assert_eq!(
            labels[3],
            "Turn context `other` (turn/start.additionalContext)"
        );
    }
}
