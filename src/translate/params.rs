//! Codex params for a run: the translation policy that fills the wire types of
//! [`crate::codex::protocol::params`] (which tools Codex gets and where, the thread's config, the
//! sandbox policy, model and effort; docs/codex-wire.md §4). [`build_params`] is the single entry
//! point: run in, the exact JSON-RPC params out.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::codex::protocol::params::*;
use crate::config::{Run, SandboxMode, Thinking, ToolSpec};
use crate::render::codex as instructions;
use crate::routing::RoutedWorkspace;
use crate::skills::SkillsPrompt;

/// Tools Codex provides natively; OpenClaw's versions are never sent.
pub const NATIVE_TOOLS: [&str; 9] = [
    "read",
    "write",
    "edit",
    "apply_patch",
    "exec",
    "process",
    "update_plan",
    "bash",
    "apply-patch",
];

/// Tools that always stay top-level.
pub const ALWAYS_DIRECT_TOOLS: [&str; 3] = ["agents_list", "sessions_spawn", "sessions_yield"];

/// The namespace that holds every searchable OpenClaw tool.
pub const OPENCLAW_NAMESPACE: &str = "openclaw";

/// The namespace description reaches the model (Codex lists it in its `<tools>` note).
pub const OPENCLAW_NAMESPACE_DESCRIPTION: &str =
    "OpenClaw tools for messaging, cron, sessions, media, gateway and nodes. Load one with tool_search before calling it.";

/// Model id and provider for a run (docs/codex-wire.md §4.6): an `openai/...` id names the
/// `openai` provider unless Codex signs in natively (ChatGPT login), where Codex picks it.
pub fn model_and_provider(
    model: &str,
    auth: crate::config::OpenAiAuth,
) -> (String, Option<String>) {
    let (id, provider) = split_model(model);
    let openai = model
        .split_once('/')
        .is_some_and(|(prefix, rest)| prefix.eq_ignore_ascii_case("openai") && !rest.is_empty());
    match (provider, openai, auth) {
        (None, true, crate::config::OpenAiAuth::ApiKey) => (id, Some("openai".to_string())),
        (provider, _, _) => (id, provider),
    }
}

/// Model id and provider after provider splitting (docs/codex-wire.md §4.6), for native auth.
pub fn split_model(model: &str) -> (String, Option<String>) {
    let Some((provider, rest)) = model.split_once('/') else {
        return (model.to_string(), None);
    };
    if provider.is_empty() || rest.is_empty() {
        return (model.to_string(), None);
    }
    let provider = match provider.to_ascii_lowercase().as_str() {
        // Virtual `codex` and native OpenAI auth let Codex pick the provider.
        "codex" | "openai" | "openai-codex" => None,
        _ => Some(provider.to_string()),
    };
    (rest.to_string(), provider)
}

/// Codex reasoning effort for an OpenClaw thinking level (docs/codex-wire.md §4.6): `off` and
/// `adaptive` send none; `minimal` is `low` on current Codex models; `max` is the closest effort
/// they support, `xhigh` (gpt-5.5 in the 0.169.0 catalog offers low, medium, high, xhigh).
pub fn effort_for(thinking: Thinking) -> Option<&'static str> {
    match thinking {
        Thinking::Off | Thinking::Adaptive => None,
        Thinking::Minimal | Thinking::Low => Some("low"),
        Thinking::Medium => Some("medium"),
        Thinking::High => Some("high"),
        Thinking::Xhigh | Thinking::Max => Some("xhigh"),
    }
}

#[cfg(test)]
mod effort_tests {
    use super::*;

    #[test]
    fn adaptive_and_max_are_thinking_levels() {
        assert_eq!(effort_for(Thinking::Adaptive), None);
        assert_eq!(effort_for(Thinking::Max), Some("xhigh"));
        let level: Thinking = serde_json::from_str("\"adaptive\"").expect("adaptive");
        assert_eq!(level, Thinking::Adaptive);
        let level: Thinking = serde_json::from_str("\"max\"").expect("max");
        assert_eq!(level.as_str(), "max");
    }
}

/// The thread `config` overrides (docs/codex-wire.md §4.4), as OpenClaw 2026.6.10 builds them
/// (`buildCodexRuntimeThreadConfigForRun`). Keys live here and nowhere else.
pub fn thread_config(run: &Run) -> BTreeMap<String, Value> {
    // 1. The caller's keys, then web search over them: Codex's own (hosted) search unless it is
    // off or OpenClaw manages search.
    let mut merged = run.codex_config.clone();
    merged.extend(web_search_config(run));
    // 2. Code mode on, with the rest on top; or off, over the rest.
    let mut config = BTreeMap::new();
    if run.code_mode {
        config.insert("features.code_mode".into(), json!(true));
        config.insert("features.code_mode_only".into(), json!(false));
        config.insert("features.apply_patch_streaming_events".into(), json!(true));
        config.extend(merged);
    } else {
        config.extend(merged);
        config.insert("features.code_mode".into(), json!(false));
        config.insert("features.code_mode_only".into(), json!(false));
        config.remove("features.apply_patch_streaming_events");
    }
    // 3. Models that cannot use tool search (OpenClaw: `gpt-5.4-nano`).
    if split_model(&run.model)
        .0
        .trim()
        .eq_ignore_ascii_case("gpt-5.4-nano")
    {
        config.insert("features.multi_agent".into(), json!(false));
    }
    // 4. Lightweight bootstrap context: Codex loads no AGENTS.md.
    if run.is_lightweight_cron() {
        config.insert("project_doc_max_bytes".into(), json!(0));
    }
    config
}

/// The web-search part of the thread config. Codex's hosted search is used unless the run has
/// no tools, `tools.web.search.enabled` is false, `tools.web.search.openaiCodex.enabled` is
/// false, or a search `provider` is configured (OpenClaw's own search then serves it); hosted
/// search carries `openaiCodex`'s allowed domains (trimmed, unique), context size and user
/// location.
fn web_search_config(run: &Run) -> BTreeMap<String, Value> {
    let search = run.config.get(crate::config::keys::WEB_SEARCH);
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(search?, |value, key| value.get(*key))
            .cloned()
    };
    let text = |path: &[&str]| {
        field(path)
            .and_then(|value| value.as_str().map(|text| text.trim().to_string()))
            .filter(|text| !text.is_empty())
    };
    let managed = text(&["provider"]).is_some();
    let disabled = run.tools.is_empty()
        || field(&["enabled"]) == Some(json!(false))
        || field(&["openaiCodex", "enabled"]) == Some(json!(false))
        || managed;
    let mut config = BTreeMap::new();
    config.insert("features.standalone_web_search".into(), json!(false));
    if disabled {
        config.insert("web_search".into(), json!("disabled"));
        return config;
    }
    let live = text(&["openaiCodex", "mode"]).as_deref() == Some("live");
    config.insert(
        "web_search".into(),
        json!(if live { "live" } else { "cached" }),
    );
    if let Some(Value::Array(domains)) = field(&["openaiCodex", "allowedDomains"]) {
        let mut unique: Vec<String> = Vec::new();
        for domain in domains.iter().filter_map(Value::as_str).map(str::trim) {
            if !domain.is_empty() && !unique.iter().any(|known| known == domain) {
                unique.push(domain.to_string());
            }
        }
        if !unique.is_empty() {
            config.insert("tools.web_search.allowed_domains".into(), json!(unique));
        }
    }
    if let Some(size) = field(&["openaiCodex", "contextSize"]).filter(|size| {
        !size.is_null() && size != &json!(false) && size != &json!("") && size != &json!(0)
    }) {
        config.insert("tools.web_search.context_size".into(), size);
    }
    for part in ["country", "region", "city", "timezone"] {
        if let Some(value) = text(&["openaiCodex", "userLocation", part]) {
            config.insert(format!("tools.web_search.location.{part}"), json!(value));
        }
    }
    config
}

/// `dynamicTools` plus the names of the deferred tools (docs/codex-wire.md §4.5).
pub fn dynamic_tools(run: &Run) -> (Vec<DynamicToolSpec>, Vec<String>) {
    let sendable: Vec<&ToolSpec> = run
        .tools
        .iter()
        .filter(|tool| tool_placement(run, &tool.name) != ToolPlacement::Native)
        .collect();
    let is_direct = |name: &str| tool_placement(run, name) == ToolPlacement::TopLevel;
    let function = |tool: &ToolSpec, defer: bool| DynamicToolSpec::Function {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.clone(),
        defer_loading: defer.then_some(true),
    };
    let mut specs: Vec<DynamicToolSpec> = sendable
        .iter()
        .filter(|tool| is_direct(&tool.name))
        .map(|tool| function(tool, false))
        .collect();
    let deferred: Vec<DynamicToolSpec> = sendable
        .iter()
        .filter(|tool| !is_direct(&tool.name))
        .map(|tool| function(tool, true))
        .collect();
    let deferred_names = DynamicToolSpec::function_names(&deferred);
    if !deferred.is_empty() {
        specs.push(DynamicToolSpec::Namespace {
            name: OPENCLAW_NAMESPACE.to_string(),
            description: OPENCLAW_NAMESPACE_DESCRIPTION.to_string(),
            tools: deferred,
        });
    }
    (specs, deferred_names)
}

/// Where a tool the run offers lands on the Codex harness. Decided here only: the params and
/// the `/context` view both ask this function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolPlacement {
    /// Non-Codex harness: listed in OpenClaw's own system prompt.
    SystemPrompt,
    /// A Codex-native tool OpenClaw also has: not sent.
    Native,
    /// A top-level dynamic tool.
    TopLevel,
    /// Deferred in the searchable `openclaw` namespace.
    Deferred,
}

impl ToolPlacement {
    /// How `/context` names the placement.
    pub fn label(self) -> &'static str {
        match self {
            ToolPlacement::SystemPrompt => "system prompt tools",
            ToolPlacement::Native => "excluded (native to Codex)",
            ToolPlacement::TopLevel => "top-level",
            ToolPlacement::Deferred => "openclaw namespace (deferred)",
        }
    }
}

/// The placement of tool `name` in `run`.
pub fn tool_placement(run: &Run, name: &str) -> ToolPlacement {
    if run.harness == crate::config::Harness::Embedded {
        ToolPlacement::SystemPrompt
    } else if NATIVE_TOOLS.contains(&name) {
        ToolPlacement::Native
    } else if ALWAYS_DIRECT_TOOLS.contains(&name)
        || run.direct_tools.iter().any(|tool| tool == name)
    {
        ToolPlacement::TopLevel
    } else {
        ToolPlacement::Deferred
    }
}

fn sandbox_policy(run: &Run, cwd: &str) -> SandboxPolicy {
    match run.sandbox {
        SandboxMode::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        SandboxMode::ReadOnly => SandboxPolicy::ReadOnly {
            network_access: false,
        },
        SandboxMode::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![cwd.to_string()],
            network_access: false,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: false,
        },
    }
}

/// The thread's developer instructions for `run` (docs/routing.md §6.1): the same for a start
/// and a resume, so a caller that needs them first (the service's thread fingerprint) renders
/// them once and passes them to [`assemble_params`].
pub fn developer_instructions(run: &Run, routed: &RoutedWorkspace) -> String {
    let (_, deferred_names) = dynamic_tools(run);
    crate::render::adapter::codex_developer_instructions(run, routed, &deferred_names)
}

/// Assemble the params of `run` from its routed workspace and skills prompt.
pub fn build_params(run: &Run, routed: &RoutedWorkspace, skills: &SkillsPrompt) -> CodexParams {
    let (tools, deferred_names) = dynamic_tools(run);
    let developer_instructions =
        crate::render::adapter::codex_developer_instructions(run, routed, &deferred_names);
    assemble(run, routed, skills, tools, developer_instructions)
}

/// [`build_params`] with the thread's developer instructions already rendered.
pub fn assemble_params(
    run: &Run,
    routed: &RoutedWorkspace,
    skills: &SkillsPrompt,
    developer_instructions: String,
) -> CodexParams {
    assemble(
        run,
        routed,
        skills,
        dynamic_tools(run).0,
        developer_instructions,
    )
}

fn assemble(
    run: &Run,
    routed: &RoutedWorkspace,
    skills: &SkillsPrompt,
    tools: Vec<DynamicToolSpec>,
    developer_instructions: String,
) -> CodexParams {
    let (model, model_provider) = model_and_provider(&run.model, run.openai_auth);
    let service_tier = run.service_tier.map(crate::config::ServiceTier::as_str);
    let cwd = run.display_path(&run.cwd);
    let config = thread_config(run);
    let effort = effort_for(run.thinking);
    let thread = match &run.thread_id {
        Some(thread_id) => ThreadParams::ThreadResume(ThreadResumeParams {
            thread_id: thread_id.clone(),
            model: model.clone(),
            model_provider: model_provider.clone(),
            approval_policy: run.approval_policy.into(),
            approvals_reviewer: "user",
            sandbox: run.sandbox,
            personality: "none",
            service_tier,
            config,
            developer_instructions,
            exclude_turns: true,
        }),
        None => ThreadParams::ThreadStart(ThreadStartParams {
            model: model.clone(),
            model_provider,
            cwd: cwd.clone(),
            approval_policy: run.approval_policy.into(),
            approvals_reviewer: "user",
            sandbox: run.sandbox,
            personality: "none",
            service_name: "OpenClaw",
            service_tier,
            config,
            developer_instructions,
            dynamic_tools: tools,
            experimental_raw_events: true,
        }),
    };
    let turn_start = TurnStartParams {
        thread_id: run
            .thread_id
            .clone()
            .unwrap_or_else(|| THREAD_ID_PLACEHOLDER.to_string()),
        input: std::iter::once(UserInput::Text {
            text: instructions::turn_input_text(run, routed),
            text_elements: Vec::new(),
        })
        .chain(run.images.iter().map(|path| UserInput::LocalImage {
            path: run.display_path(path),
        }))
        .collect(),
        cwd: cwd.clone(),
        approval_policy: run.approval_policy.into(),
        approvals_reviewer: "user",
        sandbox_policy: sandbox_policy(run, &cwd),
        model: model.clone(),
        personality: "none",
        service_tier,
        effort,
        collaboration_mode: CollaborationMode {
            mode: "default",
            settings: CollaborationSettings {
                model,
                reasoning_effort: effort,
                developer_instructions: instructions::collaboration_instructions(
                    run, routed, skills,
                ),
            },
        },
    };
    // `turn/start.collaborationMode` is always sent and is experimental (so are
    // `thread/start.dynamicTools` and `experimentalRawEvents`): Codex rejects them without the
    // opt-in, so every run we build needs it.
    let experimental_api = true;
    CodexParams {
        thread,
        turn_start,
        experimental_api,
    }
}
