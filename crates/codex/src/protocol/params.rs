//! Typed Codex app-server params: `thread/start`, `thread/resume`, `turn/start` and the modes
//! they carry (docs/codex-wire.md §4).
//!
//! Strict outbound: every key we send is a field of a struct below, so a misspelt key is a compile
//! error here rather than a silently ignored field in Codex (which accepts unknown keys). Only the
//! wire lives here; what goes into these fields for a run is translation policy
//! (`translate::params::build_params`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Codex approval policy (the retired `on-failure` is refused).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    Untrusted,
    OnRequest,
    #[default]
    Never,
}

/// Codex sandbox mode, ordered from the least to the most access (the service's ceiling compares
/// with this order).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    #[default]
    DangerFullAccess,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// Placeholder for the thread id the peer fills in after `thread/start` answers.
pub const THREAD_ID_PLACEHOLDER: &str = "<thread-id>";

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
