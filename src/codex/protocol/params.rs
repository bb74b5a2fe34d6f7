//! Typed Codex app-server params for a run (docs/codex-wire.md §4).
//!
//! Strict outbound: every key we send is a field of a struct below, so a misspelt key is a compile
//! error here rather than a silently ignored field in Codex (which accepts unknown keys).
//! [`build_params`] is the single entry point: run in, the exact JSON-RPC params out.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::config::{ApprovalPolicy, Run, SandboxMode, Thinking, ToolSpec};
use crate::render::codex as instructions;
use crate::routing::RoutedWorkspace;
use crate::skills::SkillsPrompt;

/// Placeholder for the thread id the peer fills in after `thread/start` answers.
pub const THREAD_ID_PLACEHOLDER: &str = "<thread-id>";

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

/// Codex's `AskForApproval`: one of its named policies, or the granular form that says which
/// kinds of approval prompt Codex may raise (the rest it rejects by itself, without asking).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AskForApproval {
    Policy(ApprovalPolicy),
    Granular { granular: GranularApproval },
}

impl AskForApproval {
    /// A policy under which no approval can run anything outside the sandbox: Codex rejects
    /// every prompt to leave it (escalation requests, retries without the sandbox, exec-policy
    /// rules that run a command unsandboxed, extra permissions, skill approvals) and keeps only
    /// MCP elicitations, which grant no file or process access.
    pub const SANDBOX_BOUND: AskForApproval = AskForApproval::Granular {
        granular: GranularApproval {
            sandbox_approval: false,
            rules: false,
            mcp_elicitations: true,
            request_permissions: false,
            skill_approval: false,
        },
    };
}

impl From<ApprovalPolicy> for AskForApproval {
    fn from(policy: ApprovalPolicy) -> Self {
        AskForApproval::Policy(policy)
    }
}

/// `AskForApproval.granular` (Codex 0.169.0): which prompts are allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct GranularApproval {
    pub sandbox_approval: bool,
    pub rules: bool,
    pub mcp_elicitations: bool,
    pub request_permissions: bool,
    pub skill_approval: bool,
}

/// `thread/start` params.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    pub cwd: String,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: &'static str,
    pub sandbox: SandboxMode,
    pub personality: &'static str,
    pub service_name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<&'static str>,
    pub config: BTreeMap<String, Value>,
    pub developer_instructions: String,
    pub dynamic_tools: Vec<DynamicToolSpec>,
    pub experimental_raw_events: bool,
}

/// `thread/resume` params.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: &'static str,
    pub sandbox: SandboxMode,
    pub personality: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<&'static str>,
    pub config: BTreeMap<String, Value>,
    pub developer_instructions: String,
    /// Avoids replaying the whole history in the reply (docs/codex-wire.md §4.2).
    pub exclude_turns: bool,
}

/// A dynamic tool as Codex takes it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DynamicToolSpec {
    #[serde(rename_all = "camelCase")]
    Function {
        name: String,
        description: String,
        input_schema: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        defer_loading: Option<bool>,
    },
    Namespace {
        name: String,
        description: String,
        tools: Vec<DynamicToolSpec>,
    },
}

impl DynamicToolSpec {
    /// Function names, namespaces flattened, in the order sent.
    pub fn function_names(specs: &[DynamicToolSpec]) -> Vec<String> {
        let mut names = Vec::new();
        for spec in specs {
            match spec {
                DynamicToolSpec::Function { name, .. } => names.push(name.clone()),
                DynamicToolSpec::Namespace { tools, .. } => {
                    names.extend(Self::function_names(tools))
                }
            }
        }
        names
    }
}

/// One `turn/start` input item.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    Text {
        text: String,
        text_elements: Vec<Value>,
    },
    /// An image file Codex reads itself.
    LocalImage { path: String },
}

/// `turn/start.sandboxPolicy`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SandboxPolicy {
    DangerFullAccess,
    #[serde(rename_all = "camelCase")]
    ReadOnly {
        network_access: bool,
    },
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        writable_roots: Vec<String>,
        network_access: bool,
        exclude_tmpdir_env_var: bool,
        exclude_slash_tmp: bool,
    },
}

/// `turn/start.collaborationMode`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CollaborationMode {
    pub mode: &'static str,
    pub settings: CollaborationSettings,
}

/// Settings keys are snake_case on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CollaborationSettings {
    pub model: String,
    pub reasoning_effort: Option<&'static str>,
    /// `null` lets Codex apply its built-in Default preset.
    pub developer_instructions: Option<String>,
}

/// `turn/start` params.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    pub cwd: String,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: &'static str,
    pub sandbox_policy: SandboxPolicy,
    pub model: String,
    pub personality: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<&'static str>,
    pub collaboration_mode: CollaborationMode,
}

/// Start a new thread, or resume a bound one.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadParams {
    ThreadStart(ThreadStartParams),
    ThreadResume(ThreadResumeParams),
}

/// Everything `clawbridge params` prints.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodexParams {
    #[serde(flatten)]
    pub thread: ThreadParams,
    pub turn_start: TurnStartParams,
    /// Whether `initialize` must opt into `capabilities.experimentalApi`.
    pub experimental_api: bool,
}

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

/// Codex reasoning effort for an OpenClaw thinking level (docs/codex-wire.md §4.6).
pub fn effort_for(thinking: Thinking) -> Option<&'static str> {
    match thinking {
        Thinking::Off => None,
        Thinking::Minimal | Thinking::Low => Some("low"),
        Thinking::Medium => Some("medium"),
        Thinking::High => Some("high"),
        Thinking::Xhigh => Some("xhigh"),
    }
}

/// The thread `config` overrides (docs/codex-wire.md §4.4). Keys live here and nowhere else.
pub fn thread_config(run: &Run) -> BTreeMap<String, Value> {
    let mut config = BTreeMap::new();
    let web_search = run.config.get(crate::config::keys::WEB_SEARCH);
    let search_disabled = run.tools.is_empty()
        || web_search
            .and_then(|search| search.get("enabled"))
            .and_then(Value::as_bool)
            == Some(false)
        || web_search
            .and_then(|search| search.get("provider"))
            .and_then(Value::as_str)
            .is_some_and(|provider| !matches!(provider, "openai" | "codex" | "openai-codex"));
    let mode = if search_disabled {
        "disabled"
    } else if web_search
        .and_then(|search| search.get("openaiCodex"))
        .and_then(|codex| codex.get("mode"))
        .and_then(Value::as_str)
        == Some("live")
    {
        "live"
    } else {
        "cached"
    };
    config.insert("features.standalone_web_search".into(), json!(false));
    config.insert("web_search".into(), json!(mode));
    config.insert("features.code_mode".into(), json!(true));
    config.insert("features.code_mode_only".into(), json!(false));
    config.insert("features.apply_patch_streaming_events".into(), json!(true));
    if run.is_lightweight_cron() {
        config.insert("project_doc_max_bytes".into(), json!(0));
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

impl CodexParams {
    /// Send `policy` as the approval policy of the thread and of the turn.
    pub fn set_approval_policy(&mut self, policy: AskForApproval) {
        match &mut self.thread {
            ThreadParams::ThreadStart(start) => start.approval_policy = policy,
            ThreadParams::ThreadResume(resume) => resume.approval_policy = policy,
        }
        self.turn_start.approval_policy = policy;
    }
}

/// Assemble the params of `run` from its routed workspace and skills prompt.
pub fn build_params(run: &Run, routed: &RoutedWorkspace, skills: &SkillsPrompt) -> CodexParams {
    let (model, model_provider) = model_and_provider(&run.model, run.openai_auth);
    let service_tier = run.service_tier.map(crate::config::ServiceTier::as_str);
    let cwd = run.display_path(&run.cwd);
    let (tools, deferred_names) = dynamic_tools(run);
    let developer_instructions =
        instructions::thread_developer_instructions(run, routed, &deferred_names);
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
