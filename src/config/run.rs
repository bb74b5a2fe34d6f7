//! The run document: one OpenClaw run as JSON (camelCase). This is a public contract.
//!
//! [`RunDocument`] is what the caller typed (strict: unknown keys are errors naming the key path);
//! [`Run`] is the validated form with defaults applied and paths resolved against the document's
//! folder, which every later stage consumes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::fields::{
    AgentId, CapabilityId, ChannelName, OneLine, SessionKey, TextBlock, ThreadId,
};
use super::openclaw::OpenClawConfig;
pub use crate::codex::protocol::params::{ApprovalPolicy, SandboxMode};
use crate::error::{Error, Result};
use crate::support::fs::{normalize, ReadRefusal, Roots};

/// The run document exactly as written.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunDocument {
    /// The schema this document follows (editors read it; clawbridge ignores it), e.g. a path to
    /// `docs/run-document.schema.json`.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub workspace: PathBuf,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub memory_workspace: Option<PathBuf>,
    #[serde(default)]
    pub agent_id: Option<AgentId>,
    #[serde(default)]
    pub session_key: Option<SessionKey>,
    /// OpenClaw's session id (its transcript's id), handed to the `agent:bootstrap` hook.
    #[serde(default)]
    pub session_id: Option<OneLine>,
    #[serde(default)]
    pub harness: Harness,
    #[serde(default)]
    pub prompt_mode: Option<PromptMode>,
    #[serde(default)]
    pub trigger: Trigger,
    #[serde(default)]
    pub lightweight: bool,
    #[serde(default)]
    pub channel: Channel,
    /// How visible replies reach the source channel. Stated, it wins; absent, it follows
    /// OpenClaw's `messages.groupChat.visibleReplies` and `messages.visibleReplies`.
    #[serde(default)]
    pub source_reply_delivery: Option<SourceReplyDelivery>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub thinking: Thinking,
    /// Tool specs; a string item is a path (relative to the document) to a JSON array of specs.
    #[serde(default)]
    pub tools: Vec<ToolItem>,
    #[serde(default)]
    pub direct_tools: Vec<String>,
    #[serde(default)]
    pub thread_id: Option<ThreadId>,
    #[serde(default)]
    pub approval_policy: ApprovalPolicy,
    /// `None`: the CLI's default (`danger-full-access`), or the ceiling under `clawbridge serve`.
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    #[serde(default)]
    pub config: Option<Value>,
    /// Codex thread `config` overrides of the caller's own (dotted keys, as OpenClaw's caller
    /// passes them), merged under web search and over code mode (docs/codex-wire.md §4.4).
    #[serde(default)]
    pub codex_config: BTreeMap<String, Value>,
    /// Codex's code mode (its native tool surface); `false` turns it off, caller keys included.
    #[serde(default = "default_true")]
    pub code_mode: bool,
    /// Whether OpenClaw considers the workspace set up (BOOTSTRAP.md then stays out); unset, it
    /// is read from the workspace (docs/routing.md §3.4).
    #[serde(default)]
    pub setup_complete: Option<bool>,
    /// OpenClaw's managed skills folder (default: `$OPENCLAW_STATE_DIR/skills`, else
    /// `~/.openclaw/skills`, when the CLI or service runs).
    #[serde(default)]
    pub managed_skills_dir: Option<PathBuf>,
    /// OpenClaw's bundled skills folder (default: `$OPENCLAW_BUNDLED_SKILLS_DIR`).
    #[serde(default)]
    pub bundled_skills_dir: Option<PathBuf>,
    /// Reasoning visibility (`/reasoning`): `off`, `on` or `stream`.
    #[serde(default)]
    pub reasoning_level: ReasoningLevel,
    /// The provider's tagged-reasoning contract text (the Reasoning Format section).
    #[serde(default)]
    pub reasoning_tag_hint: Option<TextBlock>,
    /// Sandbox details for the Sandbox section (docs/system-prompt.md S18).
    #[serde(default)]
    pub sandbox_info: Option<SandboxDetails>,
    /// Local OpenClaw docs folder shown in Documentation (else `docs.path`, else the public docs).
    #[serde(default)]
    pub docs_path: Option<OneLine>,
    /// Local OpenClaw source checkout shown in Documentation (else the GitHub repository).
    #[serde(default)]
    pub source_path: Option<OneLine>,
    /// Extra lines for the Workspace section.
    #[serde(default)]
    pub workspace_notes: Vec<OneLine>,
    /// Plugin prompt guidance registered for the `codex_app_server` surface.
    #[serde(default)]
    pub plugin_guidance: Vec<TextBlock>,
    /// Runtime facts OpenClaw knows and clawbridge cannot observe.
    #[serde(default)]
    pub runtime: RuntimeFacts,
    /// Images sent with the turn (`localImage` input items), relative to the document.
    #[serde(default)]
    pub images: Vec<PathBuf>,
    /// Codex `serviceTier` for the thread and turn.
    #[serde(default)]
    pub service_tier: Option<ServiceTier>,
    /// How Codex authenticates to OpenAI: `chatgpt` (native login; `openai/...` ids send no
    /// `modelProvider`) or `apiKey` (`modelProvider: "openai"`).
    #[serde(default)]
    pub openai_auth: OpenAiAuth,
}

/// Reasoning visibility (docs/system-prompt.md D13).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    #[default]
    Off,
    On,
    Stream,
}

/// Sandbox details (OpenClaw's `sandboxInfo`); any of them turns the Sandbox section on unless
/// `enabled` is `false`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxDetails {
    #[serde(default)]
    pub enabled: Option<bool>,
    /// The workspace folder inside the container.
    #[serde(default)]
    pub container_workspace_dir: Option<OneLine>,
    /// Where the agent workspace is mounted from on the host.
    #[serde(default)]
    pub agent_workspace_mount: Option<OneLine>,
    #[serde(default)]
    pub workspace_access: Option<WorkspaceAccess>,
    /// Whether a browser is available inside the sandbox.
    #[serde(default)]
    pub browser: bool,
    #[serde(default)]
    pub elevated: Option<ElevatedExec>,
}

/// The sandbox's access to the agent workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceAccess {
    None,
    Ro,
    Rw,
}

impl WorkspaceAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceAccess::None => "none",
            WorkspaceAccess::Ro => "ro",
            WorkspaceAccess::Rw => "rw",
        }
    }
}

/// Elevated exec in the sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElevatedExec {
    #[serde(default)]
    pub allowed: bool,
    #[serde(default)]
    pub default_level: Option<ElevatedLevel>,
}

/// The default elevated level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ElevatedLevel {
    On,
    Off,
    Ask,
    Full,
}

impl ElevatedLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            ElevatedLevel::On => "on",
            ElevatedLevel::Off => "off",
            ElevatedLevel::Ask => "ask",
            ElevatedLevel::Full => "full",
        }
    }
}

/// Runtime facts for the Runtime line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeFacts {
    /// OpenClaw's Node version (`v22.19.0`).
    #[serde(default)]
    pub node: Option<OneLine>,
}

/// Codex service tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServiceTier {
    Fast,
    Flex,
}

impl ServiceTier {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceTier::Fast => "fast",
            ServiceTier::Flex => "flex",
        }
    }
}

/// How Codex authenticates to OpenAI (docs/codex-wire.md §4.6).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum OpenAiAuth {
    #[default]
    Chatgpt,
    ApiKey,
}

/// Reaction guidance level of a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReactionLevel {
    Minimal,
    Extensive,
}

/// Which runtime executes the run.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    #[default]
    Codex,
    Embedded,
}

/// OpenClaw prompt mode (docs/system-prompt.md): full, minimal (subagents) or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromptMode {
    Full,
    Minimal,
    None,
}

/// Why the run happens.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    #[default]
    #[serde(alias = "manual")]
    User,
    Heartbeat,
    Cron,
}

/// The conversation kind of the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    Direct,
    Group,
    Channel,
}

/// Who sent the message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sender {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

/// One line of recent chat history.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryEntry {
    pub sender: String,
    pub body: String,
}

/// The message the user replied to (quoted text), as the channel reports it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuotedMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    pub body: String,
}

/// The channel context of the run; every field optional. Everything here except `name` and
/// `chatType` is the chat's own text and only ever reaches the model as escaped data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Channel {
    #[serde(default)]
    pub name: Option<ChannelName>,
    #[serde(default)]
    pub chat_type: Option<ChatType>,
    #[serde(default)]
    pub account_id: Option<String>,
    #[serde(default)]
    pub chat_id: Option<String>,
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub sender: Option<Sender>,
    #[serde(default)]
    pub group_subject: Option<String>,
    /// The quoted message this one replies to.
    #[serde(default)]
    pub reply_to: Option<QuotedMessage>,
    /// Channel capability ids (`reactions`, `nativeApprovals`, `inlineButtons`, `voice`, ...);
    /// shown on the Runtime line, and `nativeApprovals` / `inlineButtons` mean the channel has
    /// its own approval UI.
    #[serde(default)]
    pub capabilities: Vec<CapabilityId>,
    /// Reaction guidance for this channel (the Reactions section).
    #[serde(default)]
    pub reaction_level: Option<ReactionLevel>,
    /// Channel-specific hints for the `message` tool (from the channel plugin).
    #[serde(default)]
    pub message_tool_hints: Vec<OneLine>,
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
}

impl Channel {
    /// What the types cannot say: reaction guidance names the channel, so it needs one.
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        if self.reaction_level.is_some() && self.name.is_none() {
            return Err((
                "channel.reactionLevel",
                "needs `channel.name` (the guidance names the channel)".to_string(),
            ));
        }
        Ok(())
    }
}

/// How visible replies reach the source channel.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum SourceReplyDelivery {
    #[default]
    Automatic,
    MessageToolOnly,
}

impl SourceReplyDelivery {
    /// OpenClaw's wire spelling (`automatic`, `message_tool_only`).
    pub fn wire_name(self) -> &'static str {
        match self {
            SourceReplyDelivery::Automatic => "automatic",
            SourceReplyDelivery::MessageToolOnly => "message_tool_only",
        }
    }
}

fn default_true() -> bool {
    true
}

/// How a run's visible replies reach its source conversation, as OpenClaw 2026.6.10 decides it
/// (`resolveSourceReplyDeliveryMode`): a mode the caller states wins; a group or channel run
/// follows `messages.groupChat.visibleReplies`, else `messages.visibleReplies`; any other run
/// follows `messages.visibleReplies`. `"message_tool"` means the message tool carries visible
/// replies (the source conversation owns the contract, so the prompt has no generic Silent
/// Replies guidance), but only when the run offers that tool; anything else is automatic.
pub fn resolve_source_reply_delivery(
    stated: Option<SourceReplyDelivery>,
    chat_type: Option<ChatType>,
    config: &OpenClawConfig,
    message_tool: bool,
) -> SourceReplyDelivery {
    use super::keys::{GROUP_VISIBLE_REPLIES, VISIBLE_REPLIES};
    if let Some(stated) = stated {
        return stated;
    }
    let setting = |key| config.get(key).and_then(Value::as_str);
    let visible = match chat_type {
        Some(ChatType::Group | ChatType::Channel) => {
            setting(GROUP_VISIBLE_REPLIES).or_else(|| setting(VISIBLE_REPLIES))
        }
        _ => setting(VISIBLE_REPLIES),
    };
    match visible {
        Some("message_tool") if message_tool => SourceReplyDelivery::MessageToolOnly,
        _ => SourceReplyDelivery::Automatic,
    }
}

/// OpenClaw thinking level.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    Off,
    /// The model decides (no effort is sent, as for `off`).
    Adaptive,
    Minimal,
    Low,
    #[default]
    Medium,
    High,
    Xhigh,
    /// The most a model offers (`xhigh` on current Codex models).
    Max,
}

impl Thinking {
    pub fn as_str(self) -> &'static str {
        match self {
            Thinking::Off => "off",
            Thinking::Adaptive => "adaptive",
            Thinking::Minimal => "minimal",
            Thinking::Low => "low",
            Thinking::Medium => "medium",
            Thinking::High => "high",
            Thinking::Xhigh => "xhigh",
            Thinking::Max => "max",
        }
    }
}

/// One OpenClaw tool as offered to the run.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
}

// Read by its JSON kind (a string or an object), so a bad spec is refused naming its own
// field, never "no variant matched".
/// One item of `tools` as the schema describes it: a spec, or a path to a JSON array of specs.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ToolItem {
    /// A path (relative to the run document) to a JSON array of tool specs.
    Path(#[schemars(with = "String")] PathBuf),
    Spec(ToolSpec),
}

impl<'de> Deserialize<'de> for ToolItem {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ToolItem;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tool spec object or a path to a JSON array of specs")
            }

            fn visit_str<E: serde::de::Error>(self, path: &str) -> Result<ToolItem, E> {
                Ok(ToolItem::Path(PathBuf::from(path)))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ToolItem, A::Error> {
                ToolSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ToolItem::Spec)
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

impl ToolSpec {
    /// What the type cannot say: a name, and a schema that is an object. `field` names the
    /// spec for the error (`tools[0]`).
    fn check(&self, field: &str) -> std::result::Result<(), (String, String)> {
        if self.name.trim().is_empty() {
            return Err((format!("{field}.name"), "must not be empty".to_string()));
        }
        if !self.input_schema.is_object() {
            return Err((
                format!("{field}.inputSchema"),
                "must be a JSON Schema object".to_string(),
            ));
        }
        Ok(())
    }
}

/// The JSON Schema (draft 2020-12) of the run document, generated from [`RunDocument`] itself so
/// it cannot drift from what `Run::load` accepts (`clawbridge schema run-document`,
/// `docs/run-document.schema.json`). Structure only: checks that need the file system or another
/// field (paths inside the roots, `channel.name` an identifier) stay `Run::load`'s.
pub fn run_document_schema() -> Value {
    let mut schema = schemars::schema_for!(RunDocument).to_value();
    if let Some(object) = schema.as_object_mut() {
        object.insert("$id".into(), Value::from("urn:clawbridge:run-document"));
        object.insert("title".into(), Value::from("clawbridge run document"));
    }
    schema
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// Session kind derived from the session key (docs/routing.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    Main,
    Subagent,
    Cron,
}

impl SessionKind {
    /// The kind a session key names (a run without one is a main session), as OpenClaw reads
    /// keys (docs/routing.md §1): trimmed and case-insensitive; `agent:<id>:<rest>` (empty
    /// segments ignored) is a subagent session when `<rest>` starts with `subagent:` (a bare
    /// `subagent:...` key too), a cron session when it starts with `cron:`. A `:subagent:`
    /// further along (`agent:main:telegram:subagent:x`) is not.
    pub fn of(session_key: Option<&str>) -> Self {
        let Some(key) = session_key.map(|key| key.trim().to_lowercase()) else {
            return SessionKind::Main;
        };
        let parts: Vec<&str> = key.split(':').filter(|part| !part.is_empty()).collect();
        let rest = (parts.len() >= 3 && parts[0] == "agent").then(|| parts[2..].join(":"));
        let rest = rest.as_deref().unwrap_or("");
        if key.starts_with("subagent:") || rest.starts_with("subagent:") {
            SessionKind::Subagent
        } else if rest.starts_with("cron:") {
            SessionKind::Cron
        } else {
            SessionKind::Main
        }
    }
}

#[cfg(test)]
mod session_kind_tests {
    use super::SessionKind;

    #[test]
    fn session_kinds_are_read_from_the_rest_of_the_key_case_insensitively() {
        let kind = |key: &str| SessionKind::of(Some(key));
        assert_eq!(kind("agent:main:subagent:7f3c2a"), SessionKind::Subagent);
        assert_eq!(kind("Agent:Main:SubAgent:X"), SessionKind::Subagent);
        assert_eq!(kind("  agent:main:subagent:x  "), SessionKind::Subagent);
        assert_eq!(kind("subagent:x"), SessionKind::Subagent);
        assert_eq!(kind("agent::main::subagent:x"), SessionKind::Subagent);
        assert_eq!(kind("agent:main:telegram:subagent:x"), SessionKind::Main);
        assert_eq!(kind("agent:main:cron:nightly"), SessionKind::Cron);
        assert_eq!(kind("AGENT:main:CRON:nightly"), SessionKind::Cron);
        assert_eq!(kind("agent:main:telegram:cron:x"), SessionKind::Main);
        assert_eq!(kind("agent:subagent:x"), SessionKind::Main);
        assert_eq!(SessionKind::of(None), SessionKind::Main);
    }
}

/// A validated run: defaults applied, paths absolute.
#[derive(Clone, Debug)]
pub struct Run {
    /// Where the document came from (for messages); `<memory>` for in-memory documents.
    pub source: PathBuf,
    pub workspace: PathBuf,
    pub cwd: PathBuf,
    pub memory_workspace: PathBuf,
    pub agent_id: String,
    pub session_key: Option<String>,
    pub session_id: Option<String>,
    pub session_kind: SessionKind,
    pub harness: Harness,
    pub prompt_mode: PromptMode,
    pub trigger: Trigger,
    pub lightweight: bool,
    pub channel: Channel,
    pub source_reply_delivery: SourceReplyDelivery,
    pub message: String,
    pub model: String,
    pub thinking: Thinking,
    pub tools: Vec<ToolSpec>,
    pub direct_tools: Vec<String>,
    pub thread_id: Option<String>,
    pub approval_policy: ApprovalPolicy,
    pub sandbox: SandboxMode,
    pub codex_config: BTreeMap<String, Value>,
    pub code_mode: bool,
    pub config: OpenClawConfig,
    /// `setupComplete` as stated; `None` reads the workspace.
    pub setup_complete: Option<bool>,
    pub managed_skills_dir: Option<PathBuf>,
    pub bundled_skills_dir: Option<PathBuf>,
    pub reasoning_level: ReasoningLevel,
    pub reasoning_tag_hint: Option<TextBlock>,
    pub sandbox_info: Option<SandboxDetails>,
    pub docs_path: Option<OneLine>,
    pub source_path: Option<OneLine>,
    pub workspace_notes: Vec<OneLine>,
    pub plugin_guidance: Vec<TextBlock>,
    pub runtime: RuntimeFacts,
    /// Absolute image paths (checked to be regular files, confined under the service).
    pub images: Vec<PathBuf>,
    pub service_tier: Option<ServiceTier>,
    pub openai_auth: OpenAiAuth,
    /// Display alias: paths under `.0` are shown to the model as if under `.1` (snapshots use a
    /// fixed virtual workspace so artifacts carry no machine paths).
    pub path_alias: Option<(PathBuf, PathBuf)>,
    /// Set under `clawbridge serve`: every file the run reads must resolve below these folders,
    /// checked where the file is opened (docs/threat-model.md).
    pub roots: Option<Roots>,
}

/// Largest tool catalog file read (a catalog of hundreds of tools is well under 1 MiB).
pub const MAX_TOOL_CATALOG_BYTES: u64 = 8 * 1024 * 1024;
/// Largest run document read from disk.
pub const MAX_RUN_DOCUMENT_BYTES: u64 = 16 * 1024 * 1024;

/// Most images one turn carries, and the largest image file.
pub const MAX_IMAGES: usize = 16;
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// The default model of a run.
pub const DEFAULT_MODEL: &str = "gpt-5.5";

impl RunDocument {
    /// Parse a run document; errors name the key path (`channel.sender.nam`).
    pub fn parse(text: &str, source: &Path) -> Result<Self> {
        // serde would also accept a JSON array (fields by position); a run document is an object.
        if !text
            .trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
            .starts_with('{')
        {
            return Err(Error::InvalidDocument {
                path: source.to_path_buf(),
                message: "a run document must be a JSON object".to_string(),
            });
        }
        // Syntax first (its errors give the line and column), then the shape, which names the
        // field: every checked value (`fields`) is refused here, by its type.
        let value: Value = serde_json::from_str(text).map_err(|error| Error::InvalidDocument {
            path: source.to_path_buf(),
            message: error.to_string(),
        })?;
        Self::from_value(value, source)
    }

    /// [`RunDocument::parse`] for a document already read as JSON (the service's params).
    pub fn from_value(value: Value, source: &Path) -> Result<Self> {
        serde_path_to_error::deserialize(value).map_err(|error| {
            let path = error.path().to_string();
            let message = crate::support::suggest::serde_message(&error.into_inner().to_string());
            if path.is_empty() || path == "." {
                Error::InvalidDocument {
                    path: source.to_path_buf(),
                    message,
                }
            } else {
                Error::InvalidField {
                    path: source.to_path_buf(),
                    field: path,
                    message,
                }
            }
        })
    }

    /// Validate and resolve against `base_dir` (the folder of the document).
    pub fn into_run(self, source: &Path, base_dir: &Path) -> Result<Run> {
        self.into_run_confined(source, base_dir, None)
    }

    /// Every folder the document names, by field, resolved (the config's too).
    fn named_paths(
        &self,
        workspace: &Path,
        resolve: &dyn Fn(&Path) -> PathBuf,
    ) -> Vec<(String, PathBuf)> {
        let mut named = vec![("workspace".to_string(), workspace.to_path_buf())];
        let optional = [
            ("cwd", &self.cwd),
            ("memoryWorkspace", &self.memory_workspace),
            ("managedSkillsDir", &self.managed_skills_dir),
            ("bundledSkillsDir", &self.bundled_skills_dir),
        ];
        for (field, path) in optional {
            if let Some(path) = path {
                named.push((field.to_string(), normalize(&resolve(path))));
            }
        }
        if let Some(config) = &self.config {
            named.extend(config_paths(
                &OpenClawConfig::new(config.clone()),
                workspace,
            ));
        }
        named
    }

    /// [`RunDocument::into_run`] for a run confined to `roots` (the service): tool catalog files
    /// outside them are refused, and the run carries the roots to every later read.
    pub fn into_run_confined(
        self,
        source: &Path,
        base_dir: &Path,
        roots: Option<Roots>,
    ) -> Result<Run> {
        let field_error = |field: &str, message: String| Error::InvalidField {
            path: source.to_path_buf(),
            field: field.to_string(),
            message,
        };
        let resolve = |path: &Path| {
            if path.is_absolute() {
                path.to_path_buf()
            } else {
                base_dir.join(path)
            }
        };
        let workspace = normalize(&resolve(&self.workspace));
        if let Some(roots) = &roots {
            // Before any existence check, so an outside path answers the same whether or not it
            // exists. Tool catalog files are checked where they are read.
            check_confined(roots, self.named_paths(&workspace, &resolve))?;
        }
        if !workspace.is_dir() {
            return Err(field_error(
                "workspace",
                format!("{} is not an existing directory", workspace.display()),
            ));
        }
        let cwd = self
            .cwd
            .as_deref()
            .map(|path| normalize(&resolve(path)))
            .unwrap_or_else(|| workspace.clone());
        let session_key = self.session_key.map(String::from);
        let session_kind = SessionKind::of(session_key.as_deref());
        let prompt_mode = self.prompt_mode.unwrap_or(match session_kind {
            SessionKind::Subagent => PromptMode::Minimal,
            _ => PromptMode::Full,
        });
        let model = self.model.unwrap_or_else(|| DEFAULT_MODEL.to_string());
        if model.trim().is_empty() {
            return Err(field_error("model", "must not be empty".to_string()));
        }
        let config = match self.config {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(object @ Value::Object(_)) => object,
            Some(_) => return Err(field_error("config", "must be a JSON object".to_string())),
        };
        let agent_id = self
            .agent_id
            .map(String::from)
            .unwrap_or_else(|| "main".to_string());
        let config = OpenClawConfig::new(config);
        // The workspace the agent's memory tools index (docs/routing.md §5.3): stated, else the
        // configured agent workspace, else (nothing configured) the run's own workspace.
        let memory_workspace = self
            .memory_workspace
            .as_deref()
            .map(|path| normalize(&resolve(path)))
            .or_else(|| {
                config
                    .agent_workspace(&agent_id)
                    .map(|path| resolve_config_path(&path, &workspace))
            })
            .unwrap_or_else(|| workspace.clone());
        let tools = resolve_tools(&self.tools, source, &resolve, roots.as_ref())?;
        self.channel
            .check()
            .map_err(|(field, message)| field_error(field, message))?;
        let images = resolve_images(&self.images, source, &resolve, roots.as_ref())?;
        let source_reply_delivery = resolve_source_reply_delivery(
            self.source_reply_delivery,
            self.channel.chat_type,
            &config,
            tools.iter().any(|tool| tool.name == "message"),
        );
        Ok(Run {
            source: source.to_path_buf(),
            workspace,
            cwd,
            memory_workspace,
            agent_id,
            session_key,
            session_id: self.session_id.map(String::from),
            session_kind,
            harness: self.harness,
            prompt_mode,
            trigger: self.trigger,
            lightweight: self.lightweight,
            channel: self.channel,
            source_reply_delivery,
            message: self.message,
            model,
            thinking: self.thinking,
            tools,
            direct_tools: self.direct_tools,
            thread_id: self.thread_id.map(String::from),
            approval_policy: self.approval_policy,
            sandbox: self.sandbox.unwrap_or_default(),
            codex_config: self.codex_config,
            code_mode: self.code_mode,
            config,
            setup_complete: self.setup_complete,
            managed_skills_dir: self
                .managed_skills_dir
                .as_deref()
                .map(|path| normalize(&resolve(path))),
            bundled_skills_dir: self
                .bundled_skills_dir
                .as_deref()
                .map(|path| normalize(&resolve(path))),
            reasoning_level: self.reasoning_level,
            reasoning_tag_hint: self.reasoning_tag_hint,
            sandbox_info: self.sandbox_info,
            docs_path: self.docs_path,
            source_path: self.source_path,
            workspace_notes: self.workspace_notes,
            plugin_guidance: self.plugin_guidance,
            runtime: self.runtime,
            images,
            service_tier: self.service_tier,
            openai_auth: self.openai_auth,
            path_alias: None,
            roots,
        })
    }
}

impl Run {
    /// Read, parse and validate a run document file.
    pub fn load(path: &Path) -> Result<Run> {
        let bytes = crate::support::fs::read_file_capped(path, MAX_RUN_DOCUMENT_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|_| Error::InvalidDocument {
            path: path.to_path_buf(),
            message: "not UTF-8 text".to_string(),
        })?;
        let base_dir = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base_dir = std::path::absolute(&base_dir).unwrap_or(base_dir);
        RunDocument::parse(&text, path)?.into_run(path, &base_dir)
    }

    /// For a confined run, check again (at the moment of use) that every folder it names still
    /// resolves below the roots: a symlink may have been swapped while the run waited its turn.
    pub fn check_confined(&self) -> Result<()> {
        let Some(roots) = &self.roots else {
            return Ok(());
        };
        let mut named = vec![
            ("workspace".to_string(), self.workspace.clone()),
            ("cwd".to_string(), self.cwd.clone()),
            ("memoryWorkspace".to_string(), self.memory_workspace.clone()),
        ];
        for (field, path) in [
            ("managedSkillsDir", &self.managed_skills_dir),
            ("bundledSkillsDir", &self.bundled_skills_dir),
        ] {
            if let Some(path) = path {
                named.push((field.to_string(), path.clone()));
            }
        }
        for (index, image) in self.images.iter().enumerate() {
            named.push((format!("images[{index}]"), image.clone()));
        }
        named.extend(config_paths(&self.config, &self.workspace));
        check_confined(roots, named)
    }

    /// True for lightweight cron runs, whose prompt is forwarded byte for byte.
    pub fn is_lightweight_cron(&self) -> bool {
        self.lightweight && self.trigger == Trigger::Cron
    }

    /// Names of the tools offered to the run.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|tool| tool.name.as_str())
    }

    /// Whether a tool named `name` (lower case) is offered: names compare trimmed and lower-cased,
    /// as OpenClaw's prompt builder and its Codex memory routing compare them (`Memory_Search`
    /// is `memory_search`).
    pub fn has_tool(&self, name: &str) -> bool {
        self.tool_names()
            .any(|tool| tool.trim().to_lowercase() == name)
    }

    /// Show `real` paths as `shown` in everything handed to the model.
    pub fn with_path_alias(mut self, real: PathBuf, shown: PathBuf) -> Self {
        self.path_alias = Some((real, shown));
        self
    }

    /// The absolute, `/`-separated path shown to the model for a file we read.
    ///
    /// On the Codex harness a file inside the active workspace is remapped into the execution
    /// cwd when the two differ (docs/routing.md §2.6): Codex sees the workspace at its cwd.
    pub fn display_path(&self, real: &Path) -> String {
        let mut path = real.to_path_buf();
        // `join("")` would add a trailing separator; keep the root itself as is.
        let rebase = |path: &Path, from: &Path, to: &Path| {
            path.strip_prefix(from).ok().map(|relative| {
                if relative.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(relative)
                }
            })
        };
        if self.harness == Harness::Codex && self.cwd != self.workspace {
            if let Some(remapped) = rebase(real, &self.workspace, &self.cwd) {
                path = remapped;
            }
        }
        if let Some((from, to)) = &self.path_alias {
            if let Some(aliased) = rebase(&path, from, to) {
                path = aliased;
            }
        }
        let shown = path.to_string_lossy().replace('\\', "/");
        shown
    }
}

/// The config's paths resolved as the readers resolve them: `~/` against the home folder,
/// relative ones against the workspace.
fn config_paths(config: &OpenClawConfig, workspace: &Path) -> Vec<(String, PathBuf)> {
    config
        .named_paths()
        .into_iter()
        .map(|(field, path)| (field, resolve_config_path(&path, workspace)))
        .collect()
}

/// A path from the OpenClaw config as OpenClaw resolves it: `~/` against the home folder,
/// relative paths against the workspace.
pub fn resolve_config_path(path: &str, workspace: &Path) -> PathBuf {
    let resolved = match path.strip_prefix("~/") {
        Some(rest) => dirs::home_dir().unwrap_or_default().join(rest),
        None if Path::new(path).is_absolute() => PathBuf::from(path),
        None => workspace.join(path),
    };
    normalize(&resolved)
}

fn check_confined(roots: &Roots, named: Vec<(String, PathBuf)>) -> Result<()> {
    for (field, path) in named {
        if !roots.admits(&path) {
            return Err(Error::OutsideRoots { field, path });
        }
    }
    Ok(())
}

/// Resolve `images`: each must be an existing regular file of at most [`MAX_IMAGE_BYTES`] with an
/// image extension, inside the roots for a confined run. Codex reads the file itself
/// (`localImage`), so only its metadata is looked at here.
fn resolve_images(
    items: &[PathBuf],
    source: &Path,
    resolve: &dyn Fn(&Path) -> PathBuf,
    roots: Option<&Roots>,
) -> Result<Vec<PathBuf>> {
    if items.len() > MAX_IMAGES {
        return Err(Error::InvalidField {
            path: source.to_path_buf(),
            field: "images".to_string(),
            message: format!("at most {MAX_IMAGES} images per turn, not {}", items.len()),
        });
    }
    let mut images = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let field = format!("images[{index}]");
        let path = normalize(&resolve(item));
        let invalid = |message: String| Error::InvalidField {
            path: source.to_path_buf(),
            field: field.clone(),
            message,
        };
        if let Some(roots) = roots {
            if !roots.admits(&path) {
                return Err(Error::OutsideRoots { field, path });
            }
        }
        let extension = path
            .extension()
            .and_then(|ext| ext.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        if !matches!(extension.as_str(), "png" | "jpg" | "jpeg" | "gif" | "webp") {
            return Err(invalid(format!(
                "{} is not a .png, .jpg, .jpeg, .gif or .webp image",
                path.display()
            )));
        }
        let real = crate::support::fs::resolve_real(&path);
        if let Some(roots) = roots {
            if !roots.contains(&real) {
                return Err(Error::OutsideRoots { field, path });
            }
        }
        match std::fs::metadata(&real) {
            Ok(meta) if meta.is_file() && meta.len() <= MAX_IMAGE_BYTES => {}
            Ok(meta) if meta.is_file() => {
                return Err(invalid(format!(
                    "{} is {} bytes, over the {MAX_IMAGE_BYTES}-byte limit",
                    path.display(),
                    meta.len()
                )))
            }
            Ok(_) => return Err(invalid(format!("{} is not a regular file", path.display()))),
            Err(error) => return Err(invalid(format!("cannot read {}: {error}", path.display()))),
        }
        images.push(real);
    }
    Ok(images)
}

/// Expand `tools`: specs as they are, paths into the specs their file holds; each checked.
fn resolve_tools(
    items: &[ToolItem],
    source: &Path,
    resolve: &dyn Fn(&Path) -> PathBuf,
    roots: Option<&Roots>,
) -> Result<Vec<ToolSpec>> {
    let mut tools = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let field = format!("tools[{index}]");
        match item {
            ToolItem::Path(file) => {
                let path = resolve(file);
                let allowed = |real: &Path| roots.is_none_or(|roots| roots.contains(real));
                let text = match crate::support::fs::read_capped(
                    &path,
                    MAX_TOOL_CATALOG_BYTES,
                    &allowed,
                ) {
                    Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    Err(ReadRefusal::Outside) => {
                        return Err(Error::OutsideRoots {
                            field,
                            path: path.clone(),
                        })
                    }
                    Err(refusal) => {
                        return Err(Error::InvalidField {
                            path: source.to_path_buf(),
                            field: field.clone(),
                            message: format!(
                                "cannot read tool catalog {}: {refusal}",
                                path.display()
                            ),
                        })
                    }
                };
                let deserializer = &mut serde_json::Deserializer::from_str(&text);
                let specs: Vec<ToolSpec> =
                    serde_path_to_error::deserialize(deserializer).map_err(|error| {
                        Error::InvalidDocument {
                            path: path.clone(),
                            message: format!(
                                "at `{}`: {}",
                                error.path(),
                                crate::support::suggest::serde_message(&error.inner().to_string())
                            ),
                        }
                    })?;
                for (at, spec) in specs.iter().enumerate() {
                    spec.check(&format!("[{at}]")).map_err(|(field, message)| {
                        Error::InvalidField {
                            path: path.clone(),
                            field,
                            message,
                        }
                    })?;
                }
                tools.extend(specs);
            }
            ToolItem::Spec(spec) => {
                spec.check(&field)
                    .map_err(|(field, message)| Error::InvalidField {
                        path: source.to_path_buf(),
                        field,
                        message,
                    })?;
                tools.push(spec.clone());
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for tool in &tools {
        if !seen.insert(tool.name.as_str()) {
            return Err(Error::InvalidField {
                path: source.to_path_buf(),
                field: "tools".to_string(),
                message: format!("tool `{}` is listed twice", tool.name),
            });
        }
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<RunDocument> {
        RunDocument::parse(text, Path::new("run.json"))
    }

    #[test]
    fn a_checked_value_is_refused_by_the_parse_naming_its_field() {
        for (text, field) in [
            (
                r#"{"workspace": ".", "channel": {"name": "a b"}}"#,
                "channel.name",
            ),
            (
                r#"{"workspace": ".", "channel": {"capabilities": ["ok", "not ok"]}}"#,
                "channel.capabilities[1]",
            ),
            (
                r#"{"workspace": ".", "workspaceNotes": ["a\nb"]}"#,
                "workspaceNotes[0]",
            ),
            (r#"{"workspace": ".", "threadId": " "}"#, "threadId"),
            (
                r#"{"workspace": ".", "sandboxInfo": {"elevated": {"defaultLevel": "max"}}}"#,
                "sandboxInfo.elevated.defaultLevel",
            ),
            (
                r#"{"workspace": ".", "tools": [{"name": "x", "nam": 1}]}"#,
                "tools[0].nam",
            ),
            (r#"{"workspace": ".", "tools": [3]}"#, "tools[0]"),
        ] {
            match parsed(text) {
                Err(Error::InvalidField { field: named, .. }) => {
                    assert_eq!(named, field, "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn tools_are_read_by_their_json_kind() {
        let document = parsed(
            r#"{"workspace": ".", "tools": ["more.json", {"name": "x", "description": "d"}]}"#,
        )
        .expect("parses");
        assert_eq!(
            document.tools[0],
            ToolItem::Path(PathBuf::from("more.json"))
        );
        assert!(matches!(&document.tools[1], ToolItem::Spec(spec) if spec.name == "x"));
    }
}
