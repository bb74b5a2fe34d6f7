//! OpenClaw's system prompt: inputs, sections, order and gates (docs/system-prompt.md §2-§8).
//!
//! Pure: everything comes in through [`PromptInputs`]. The wording is clawbridge's own; the
//! literal tokens other components parse (`NO_REPLY`, `HEARTBEAT_OK`, the cache marker, the
//! `Runtime:` fields) are kept exactly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::provider::ProviderContribution;
use super::{assemble, SystemPrompt};
use crate::config::PromptMode;

/// Reply when a heartbeat needs no attention.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// The whole reply when there is nothing to say.
pub const NO_REPLY: &str = "NO_REPLY";

/// The identity line (also the whole prompt in `none` mode).
pub const IDENTITY_LINE: &str = "You are a personal assistant running inside OpenClaw.";

/// A context file as injected (already fitted to the budgets).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextFile {
    pub path: String,
    pub content: String,
    /// The file was missing or unreadable: `content` is the missing marker.
    #[serde(default)]
    pub missing: bool,
}

impl ContextFile {
    /// A present `SOUL.md` (a missing one defines nothing).
    pub fn is_soul(&self) -> bool {
        !self.missing && self.path.rsplit(['/', '\\']).next() == Some("SOUL.md")
    }
}

/// Sandbox facts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub enabled: bool,
    pub container_workdir: Option<String>,
    pub host_mount: Option<String>,
    pub access: Option<String>,
    pub browser: bool,
    pub elevated_allowed: bool,
    pub elevated_level: Option<String>,
}

/// Runtime facts for the `Runtime:` line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
    pub host: Option<String>,
    pub os: Option<String>,
    pub arch: Option<String>,
    pub node: Option<String>,
    pub model: Option<String>,
    pub default_model: Option<String>,
    pub shell: Option<String>,
    pub channel: Option<String>,
    pub capabilities: Vec<String>,
    pub repo_root: Option<String>,
}

/// How replies reach the source conversation, and reasoning visibility: the run document's own
/// types (one definition each).
pub use crate::config::{ReasoningLevel, SourceReplyDelivery};

/// Whether the generic `NO_REPLY` guidance is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SilentReplyMode {
    #[default]
    Generic,
    None,
}

/// `agents.*.subagents.delegationMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationMode {
    #[default]
    Suggest,
    Prefer,
}

/// Reaction guidance level for a channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactionGuidance {
    pub channel: String,
    pub extensive: bool,
}

/// Everything the renderer reads (docs/system-prompt.md §2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptInputs {
    pub workspace_dir: String,
    pub prompt_mode: PromptMode,
    pub tool_names: Vec<String>,
    pub tool_summaries: BTreeMap<String, String>,
    pub skills_prompt: String,
    pub context_files: Vec<ContextFile>,
    pub dynamic_context_files: Vec<ContextFile>,
    pub bootstrap_truncation_notice: Option<String>,
    pub workspace_notes: Vec<String>,
    pub docs_path: Option<String>,
    pub source_path: Option<String>,
    pub sandbox: SandboxInfo,
    pub owner_lines: Vec<String>,
    pub reasoning_tag_hint: Option<String>,
    pub reasoning_level: ReasoningLevel,
    pub default_think_level: Option<String>,
    pub user_timezone: Option<String>,
    pub runtime: RuntimeInfo,
    pub extra_system_prompt: Option<String>,
    pub reaction_guidance: Option<ReactionGuidance>,
    pub message_tool_hints: Vec<String>,
    pub delivery_mode: SourceReplyDelivery,
    pub silent_reply_mode: SilentReplyMode,
    pub native_approval_ui: bool,
    pub delegation_mode: DelegationMode,
    pub model_alias_lines: Vec<String>,
    pub tts_hint: Option<String>,
    pub memory_section: Option<String>,
    pub heartbeat: Option<String>,
    pub auto_completion_wake: bool,
    pub control_ui_embed: bool,
    pub provider_contribution: ProviderContribution,
}

impl Default for PromptInputs {
    fn default() -> Self {
        Self {
            workspace_dir: String::new(),
            prompt_mode: PromptMode::Full,
            tool_names: Vec::new(),
            tool_summaries: BTreeMap::new(),
            skills_prompt: String::new(),
            context_files: Vec::new(),
            dynamic_context_files: Vec::new(),
            bootstrap_truncation_notice: None,
            workspace_notes: Vec::new(),
            docs_path: None,
            source_path: None,
            sandbox: SandboxInfo::default(),
            owner_lines: Vec::new(),
            reasoning_tag_hint: None,
            reasoning_level: ReasoningLevel::Off,
            default_think_level: None,
            user_timezone: None,
            runtime: RuntimeInfo::default(),
            extra_system_prompt: None,
            reaction_guidance: None,
            message_tool_hints: Vec::new(),
            delivery_mode: SourceReplyDelivery::Automatic,
            silent_reply_mode: SilentReplyMode::Generic,
            native_approval_ui: false,
            delegation_mode: DelegationMode::Suggest,
            model_alias_lines: Vec::new(),
            tts_hint: None,
            memory_section: None,
            heartbeat: None,
            auto_completion_wake: false,
            control_ui_embed: false,
            provider_contribution: ProviderContribution::default(),
        }
    }
}

/// Clawbridge's canonical core tool order (docs/system-prompt.md §6 S2).
const CORE_TOOL_ORDER: [&str; 28] = [
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "exec",
    "process",
    "web_search",
    "web_fetch",
    "browser",
    "canvas",
    "nodes",
    "cron",
    "message",
    "gateway",
    "agents_list",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "sessions_yield",
    "subagents",
    "session_status",
    "image",
    "tts",
    "update_plan",
];

/// Trim, de-duplicate case-insensitively (first spelling wins), order canonically.
fn normalized_tools(names: &[String]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut tools: Vec<String> = names
        .iter()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty() && seen.insert(name.to_lowercase()))
        .collect();
    tools.sort_by(|a, b| {
        let rank = |name: &str| {
            CORE_TOOL_ORDER
                .iter()
                .position(|core| *core == name.to_lowercase())
                .unwrap_or(CORE_TOOL_ORDER.len())
        };
        rank(a)
            .cmp(&rank(b))
            .then_with(|| a.to_lowercase().cmp(&b.to_lowercase()))
    });
    tools
}

struct Tools {
    names: Vec<String>,
}

impl Tools {
    fn has(&self, name: &str) -> bool {
        self.names
            .iter()
            .any(|tool| tool.eq_ignore_ascii_case(name))
    }
    fn any(&self) -> bool {
        !self.names.is_empty()
    }
}

fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|line| line.to_string()).collect()
}

fn tooling(inputs: &PromptInputs, tools: &Tools) -> Vec<String> {
    let mut out = lines(&[
        "## Tooling",
        "Structured tools are the source of truth: call them by their exact, case-sensitive names. Which tools exist is decided by policy for this run.",
    ]);
    if tools.any() {
        for name in &tools.names {
            match inputs
                .tool_summaries
                .get(name)
                .filter(|summary| !summary.trim().is_empty())
            {
                Some(summary) => out.push(format!("- {name}: {}", summary.trim())),
                None => out.push(format!("- {name}")),
            }
        }
    } else {
        out.push(
            "The runtime exposes its tools directly; use only the tools you are given.".to_string(),
        );
    }
    if tools.has("cron") {
        out.push("- Follow-ups (check back later, reminders, recurring work): schedule them with `cron` instead of `exec` sleep loops, `yieldMs` delays or repeated `process` polling.".to_string());
    }
    if tools.has("exec") || tools.has("process") {
        out.push("- Use `exec`/`process` only for commands that start now and keep running in the background.".to_string());
    }
    if inputs.auto_completion_wake {
        out.push(
            "- Start such a command once and rely on the push-based wake when it prints or fails."
                .to_string(),
        );
    }
    if tools.has("process") {
        out.push(
            "- Use `process` for a running command's logs, status, input or intervention."
                .to_string(),
        );
    }
    if tools.has("sessions_spawn") {
        out.push("- For larger tasks prefer `sessions_spawn`: completion is push-based and announces itself to you.".to_string());
    }
    if tools.has("subagents") || tools.has("sessions_list") {
        out.push("- Never poll `subagents list` or `sessions_list` in a loop just to wait for completion.".to_string());
    }
    if tools.has("update_plan") {
        out.push("- `update_plan`: only for non-trivial multi-step work; keep exactly one step `in_progress`; do not restate the whole plan after each update.".to_string());
    }
    out
}

fn text_section(text: &str) -> Vec<String> {
    vec![text.to_string()]
}

fn project_context(files: &[ContextFile], heading: &str) -> Vec<String> {
    if files.is_empty() {
        return Vec::new();
    }
    let mut text = format!("{heading}\n\nThe following workspace files were loaded:");
    if files.iter().any(ContextFile::is_soul) {
        text.push_str("\nSOUL.md defines your persona and tone: follow it unless higher-priority instructions override it.");
    }
    for file in files {
        text.push_str(&format!("\n\n## {}\n\n{}", file.path, file.content));
    }
    vec![text]
}

/// `Runtime: ...` (docs/system-prompt.md §8).
pub fn runtime_line(runtime: &RuntimeInfo, think_level: Option<&str>) -> String {
    let clean = |text: &str| -> String {
        text.chars()
            .filter(|ch| !ch.is_control() && !matches!(ch, '\u{2028}' | '\u{2029}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'))
            .collect()
    };
    let nonempty = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let mut fields = Vec::new();
    if let Some(agent) = nonempty(&runtime.agent_id) {
        fields.push(format!("agent={agent}"));
    }
    if let Some(session) = nonempty(&runtime.session_key) {
        let session = clean(&session);
        // A cron run key shows as its job's base key.
        let session = match session.find(":run:") {
            Some(at) if session.contains(":cron:") => session[..at].to_string(),
            _ => session,
        };
        fields.push(format!("session={session}"));
    }
    if let Some(host) = nonempty(&runtime.host) {
        fields.push(format!("host={host}"));
    }
    if let Some(repo) = nonempty(&runtime.repo_root) {
        fields.push(format!("repo={repo}"));
    }
    match (nonempty(&runtime.os), nonempty(&runtime.arch)) {
        (Some(os), Some(arch)) => fields.push(format!("os={os} ({arch})")),
        (Some(os), None) => fields.push(format!("os={os}")),
        (None, Some(arch)) => fields.push(format!("arch={arch}")),
        (None, None) => {}
    }
    for (key, value) in [
        ("node", &runtime.node),
        ("model", &runtime.model),
        ("default_model", &runtime.default_model),
        ("shell", &runtime.shell),
    ] {
        if let Some(value) = nonempty(value) {
            fields.push(format!("{key}={value}"));
        }
    }
    if let Some(channel) = nonempty(&runtime.channel) {
        fields.push(format!("channel={}", channel.to_lowercase()));
        let mut capabilities: Vec<String> = runtime
            .capabilities
            .iter()
            .map(|capability| capability.trim().to_lowercase())
            .filter(|capability| !capability.is_empty())
            .collect();
        capabilities.sort();
        capabilities.dedup();
        fields.push(format!(
            "capabilities={}",
            if capabilities.is_empty() {
                "none".to_string()
            } else {
                capabilities.join(",")
            }
        ));
    }
    fields.push(format!(
        "thinking={}",
        think_level
            .map(str::trim)
            .filter(|level| !level.is_empty())
            .unwrap_or("off")
    ));
    format!("Runtime: {}", fields.join(" | "))
}

/// Build the prompt (docs/system-prompt.md §3-§5).
pub fn build_system_prompt(inputs: &PromptInputs) -> SystemPrompt {
    if inputs.prompt_mode == PromptMode::None {
        return SystemPrompt {
            stable_prefix: IDENTITY_LINE.to_string(),
            dynamic_suffix: String::new(),
            has_boundary: false,
        };
    }
    let full = inputs.prompt_mode == PromptMode::Full;
    let tools = Tools {
        names: normalized_tools(&inputs.tool_names),
    };
    let provider = inputs.provider_contribution.normalized();
    let mut stable: Vec<Vec<String>> = Vec::new();
    stable.push(lines(&[IDENTITY_LINE]));
    if full || tools.any() {
        stable.push(tooling(inputs, &tools));
    }
    if full && inputs.delegation_mode == DelegationMode::Prefer && tools.has("sessions_spawn") {
        stable.push(lines(&[
            "## Sub-Agent Delegation",
            "Act as a responsive coordinator: answer directly only when that is all it takes, and route anything more involved through `sessions_spawn`.",
        ]));
    }
    if let Some(style) = &provider.interaction_style {
        stable.push(text_section(style));
    }
    if full || tools.any() {
        stable.push(match &provider.tool_call_style {
            Some(style) => text_section(style),
            None => lines(&[
                "## Tool Call Style",
                "Make routine, low-risk tool calls without narrating them; narrate briefly before multi-step or sensitive actions.",
            ]),
        });
    }
    match &provider.execution_bias {
        Some(bias) => stable.push(text_section(bias)),
        None if full => stable.push(lines(&[
            "## Execution Bias",
            "When a request is actionable, act on it in this turn and keep going until it is done or you are genuinely blocked. Recover from weak tool results, check mutable state live instead of from memory, and verify before you finish.",
        ])),
        None => {}
    }
    if let Some(prefix) = &provider.stable_prefix {
        stable.push(text_section(prefix));
    }
    stable.push(lines(&[
        "## Safety",
        "Do not seek power or resources beyond the task, and do not try to bypass oversight or safeguards. These lines are advisory: tool policy, exec approvals, sandboxing and channel allowlists enforce the rules.",
    ]));
    let skills = inputs.skills_prompt.trim();
    if !skills.is_empty() && tools.has("read") {
        stable.push(vec![
            "## Skills".to_string(),
            "Scan <available_skills>. When one clearly matches the task, read its exact <location> with `read` and follow it; read it again when its <version> changed.".to_string(),
            skills.to_string(),
        ]);
    }
    if full {
        if let Some(memory) = &inputs.memory_section {
            stable.push(text_section(memory));
        }
    }
    stable.push(lines(&[
        "## OpenClaw Control",
        "Use the `gateway` tool for configuration and restarts; never invent CLI commands.",
    ]));
    if full && tools.has("gateway") {
        stable.push(lines(&[
            "## OpenClaw Self-Update",
            "Inspect configuration with `config.schema.lookup`, change it with `config.patch`, replace it whole with `config.apply`, and run `update.run` only when the user explicitly asks. The gateway tool refuses to rewrite `tools.exec.ask` and `tools.exec.security` (and the legacy `tools.bash.*` aliases).",
        ]));
    }
    if full && !inputs.model_alias_lines.is_empty() {
        let mut section = lines(&[
            "## Model Aliases",
            "Aliases are shortcuts for unqualified model requests; an explicit `provider/model` is used as written.",
        ]);
        // In the order the config resolver gave them (sorted by alias).
        section.extend(inputs.model_alias_lines.iter().cloned());
        stable.push(section);
    }
    if full && !inputs.owner_lines.is_empty() {
        let mut section = lines(&[
            "## User Identity",
            "These senders are allowlisted (not necessarily the owner):",
        ]);
        section.extend(inputs.owner_lines.iter().map(|line| format!("- {line}")));
        stable.push(section);
    }
    let mut workspace = vec![
        "## Workspace".to_string(),
        format!("Working directory: {}", inputs.workspace_dir),
        "This is your single global file workspace unless you are told otherwise.".to_string(),
    ];
    if inputs.sandbox.enabled {
        workspace.push(
            "File tools act inside the sandbox; paths outside its mounts are not visible."
                .to_string(),
        );
    }
    workspace.extend(inputs.workspace_notes.iter().cloned());
    stable.push(workspace);
    if full {
        let docs = match &inputs.docs_path {
            Some(path) => format!("OpenClaw docs: {path} (local; public mirror: https://docs.openclaw.ai). Consult them first."),
            None => "OpenClaw docs: https://docs.openclaw.ai (no local copy here, so consult this mirror first).".to_string(),
        };
        let source = match &inputs.source_path {
            Some(path) => format!("Source: {path}; read it when the docs are incomplete or stale."),
            None => "Source: https://github.com/openclaw/openclaw; read it when the docs are incomplete or stale.".to_string(),
        };
        stable.push(vec![
            "## Documentation".to_string(),
            docs,
            source,
            "Community: the public docs mirror, the OpenClaw Discord, and ClawHub (https://clawhub.ai) for finding skills.".to_string(),
            "The docs are the authority on OpenClaw itself (memory and daily notes, sessions, tools, gateway, config, commands, project context). AGENTS.md, project context, workspace notes and `memory_search` results are the user's instructions or memory, not OpenClaw design knowledge. If the docs are silent or stale, say so and inspect the source; run `openclaw status` yourself when you can, and ask the user only when you lack the access.".to_string(),
            "For configuration, call the `gateway` action `config.schema.lookup` first, then read docs/gateway/configuration.md and docs/gateway/configuration-reference.md.".to_string(),
        ]);
    }
    let mut files = lines(&[
        "## Workspace Files (injected)",
        "The user-editable workspace files below are injected as Project Context.",
    ]);
    if let Some(notice) = &inputs.bootstrap_truncation_notice {
        files.push(format!("\n{notice}"));
    }
    stable.push(files);
    if inputs.sandbox.enabled {
        let sandbox = &inputs.sandbox;
        let mut section = lines(&["## Sandbox", "This runtime is sandboxed."]);
        if let Some(workdir) = &sandbox.container_workdir {
            section.push(format!("Container workdir: {workdir}"));
        }
        if let Some(mount) = &sandbox.host_mount {
            section.push(format!("Host mount: {mount}"));
        }
        if let Some(access) = &sandbox.access {
            section.push(format!("Access: {access}"));
        }
        section.push(format!(
            "Browser: {}",
            if sandbox.browser {
                "available"
            } else {
                "not available"
            }
        ));
        section.push(format!(
            "Elevated exec: {}",
            if sandbox.elevated_allowed {
                "available on request"
            } else {
                "not available"
            }
        ));
        stable.push(section);
    }
    if let Some(zone) = inputs
        .user_timezone
        .as_deref()
        .filter(|zone| !zone.is_empty())
    {
        let mut section = vec![
            "## Current Date & Time".to_string(),
            format!("Time zone: {zone}"),
        ];
        if tools.has("session_status") {
            section.push("`session_status` shows the current time (its status card has a timestamp); it can also set a per-session model override, and `model=default` clears it.".to_string());
        }
        stable.push(section);
    }
    if let Some(hint) = &inputs.reasoning_tag_hint {
        stable.push(vec!["## Reasoning Format".to_string(), hint.clone()]);
    }
    stable.push(project_context(&inputs.context_files, "# Project Context"));

    // ----- below the cache boundary -----
    let mut dynamic: Vec<Vec<String>> = Vec::new();
    dynamic.push(project_context(
        &inputs.dynamic_context_files,
        "# Dynamic Project Context",
    ));
    let has_message_tool = tools.has("message");
    if full && inputs.control_ui_embed {
        dynamic.push(lines(&[
            "## Control UI Embed",
            "You are talking through the OpenClaw Control UI: rich content (images, tables, links) renders inline, so embed it directly instead of describing it.",
        ]));
    }
    if full && (has_message_tool || inputs.delivery_mode != SourceReplyDelivery::MessageToolOnly) {
        // The literal tokens are OpenClaw's reply pipeline's (it parses them and strips them
        // before rendering): fixed, whatever the wording around them.
        let how: &[&str] = match inputs.delivery_mode {
            SourceReplyDelivery::MessageToolOnly => &[
                "Your visible output goes out through `message(action=send)`: attach, voice and reply with the tool's own fields, not with reply directives.",
                "- Files and images (your tools' output included): `media` for one, `attachments: [{media: ...}]` for several; never `MEDIA:` lines.",
                "- Audio as a voice note: `asVoice`.",
                "- A reply to a specific message: `replyTo`.",
            ],
            SourceReplyDelivery::Automatic => &[
                "OpenClaw reads these directives in your final reply and removes them before it is shown; the channel's settings still decide what is delivered.",
                "- Attach a file or image (your tools' output included): `MEDIA:<path-or-url>`, alone on its own line, as plain text (not in code, bold or a sentence); one line per attachment.",
                "- Send attached audio as a voice note: `[[audio_as_voice]]`.",
                "- Reply to the message you are answering: start with `[[reply_to_current]]`; to reply to another message, `[[reply_to:<id>]]` with its explicit id only.",
            ],
        };
        let mut section = vec!["## Assistant Output Directives".to_string()];
        section.extend(how.iter().map(|line| line.to_string()));
        dynamic.push(section);
    }
    let silent = inputs.silent_reply_mode == SilentReplyMode::Generic;
    if full {
        let mut messaging = vec!["## Messaging".to_string()];
        messaging.push(match inputs.delivery_mode {
            SourceReplyDelivery::Automatic => "Your final text is delivered to the source conversation.".to_string(),
            SourceReplyDelivery::MessageToolOnly => "Visible output must go through `message(action=send)`; your final text stays private.".to_string(),
        });
        messaging.push("Send to other sessions with `sessions_send`; sub-agents report back through their completion path.".to_string());
        if has_message_tool {
            messaging.push("### message tool".to_string());
            messaging.push("Use `message` for proactive sends, other targets and channels, and inline buttons where the channel supports them.".to_string());
            messaging.extend(inputs.message_tool_hints.iter().cloned());
            if inputs.delivery_mode == SourceReplyDelivery::MessageToolOnly {
                messaging.push(
                    "Never repeat content you already sent in your final answer.".to_string(),
                );
            } else if silent {
                messaging.push(format!(
                    "After a visible `message(send)`, your final reply is only `{NO_REPLY}`."
                ));
            }
        }
        dynamic.push(messaging);
        if silent {
            dynamic.push(vec![
                "## Silent Replies".to_string(),
                format!("When there is nothing to say, your entire reply is exactly `{NO_REPLY}`. Never append it to a real answer or wrap it in Markdown or code."),
            ]);
        }
    }
    if tools.has("exec") && provider.tool_call_style.is_none() {
        dynamic.push(vec![if inputs.native_approval_ui {
            "Exec approvals: this channel has a native approval UI, so rely on it. Include a manual `/approve` command only when the tool result says chat approvals are unavailable or manual approval is the only way.".to_string()
        } else {
            "Exec approvals: when a command needs approval, tell the user and ask them to reply with the `/approve` command the tool result gives.".to_string()
        }]);
    }
    if inputs.sandbox.enabled {
        if let Some(level) = &inputs.sandbox.elevated_level {
            dynamic.push(vec![format!("Elevated level: {level}")]);
        }
    }
    if full {
        if let Some(tts) = inputs
            .tts_hint
            .as_deref()
            .filter(|hint| !hint.trim().is_empty())
        {
            dynamic.push(vec!["## Voice (TTS)".to_string(), tts.to_string()]);
        }
    }
    if let Some(extra) = inputs
        .extra_system_prompt
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
    {
        let heading = if full {
            "## Group Chat Context"
        } else {
            "## Subagent Context"
        };
        dynamic.push(vec![heading.to_string(), extra.to_string()]);
    }
    if let Some(reactions) = &inputs.reaction_guidance {
        let how = if reactions.extensive {
            "React freely with emoji where a reaction says it better than a message."
        } else {
            "Use emoji reactions sparingly, for acknowledgements."
        };
        dynamic.push(vec![
            "## Reactions".to_string(),
            format!("{}: {how}", reactions.channel),
        ]);
    }
    if let Some(suffix) = &provider.dynamic_suffix {
        dynamic.push(text_section(suffix));
    }
    if full {
        if let Some(heartbeat) = &inputs.heartbeat {
            dynamic.push(vec![
                "## Heartbeats".to_string(),
                format!("Heartbeat prompt: {heartbeat}"),
                format!("When a heartbeat poll needs no attention, reply exactly `{HEARTBEAT_OK}`. When something needs attention, reply with the alert and without that token."),
            ]);
        }
    }
    let reasoning = match inputs.reasoning_level {
        ReasoningLevel::Off => "Reasoning: off (hidden). The user can toggle it with /reasoning; /status shows the current level.",
        ReasoningLevel::On => "Reasoning: on. The user can toggle it with /reasoning; /status shows the current level.",
        ReasoningLevel::Stream => "Reasoning: stream. The user can toggle it with /reasoning; /status shows the current level.",
    };
    dynamic.push(vec![
        "## Runtime".to_string(),
        runtime_line(&inputs.runtime, inputs.default_think_level.as_deref()),
        reasoning.to_string(),
    ]);
    SystemPrompt {
        stable_prefix: assemble(&stable),
        dynamic_suffix: assemble(&dynamic),
        has_boundary: true,
    }
}
