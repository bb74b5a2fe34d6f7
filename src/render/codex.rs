//! Every Codex text, in one place and in clawbridge's own wording (docs/routing.md, "Codex
//! surfaces"): the thread developer instructions (rendered by the same facade and section
//! assembly as OpenClaw's own system prompt), the turn-scoped collaboration instructions led by
//! the pinned Default preset, and the turn input.
//!
//! Only meaning, order and gates are fixed; the sentences are ours and live here as constants or
//! small functions so tests can assert them by reference.

use serde_json::{json, Map, Value};

use crate::config::{ChatType, Run, Trigger};
use crate::routing::{RoutedWorkspace, Surface};
use crate::skills::SkillsPrompt;
use serde::{Deserialize, Serialize};

use super::sections::ContextFile;
use crate::support::json::data_block;
use crate::support::text::{collate, join_parts, trim_end_js};
use crate::workspace::{FittedFile, TRUNCATION_NOTICE};

/// The pinned Codex Default collaboration-mode preset for gpt-5.5, measured against Codex CLI
/// 0.169.0 (exactly what Codex sends when `developer_instructions` is `null`).
pub const DEFAULT_COLLABORATION_PRESET: &str =
    include_str!("../../fixtures/codex-model-catalog/gpt-5.5.collaboration-default.md");

/// Heading of the memory note.
pub const MEMORY_NOTE_HEADING: &str = "## OpenClaw Workspace Memory";
/// Heading of the skills block.
pub const SKILLS_HEADING: &str = "## OpenClaw Skills";
/// Heading of the heartbeat pointer.
pub const HEARTBEAT_POINTER_HEADING: &str = "## OpenClaw Heartbeat Workspace";

/// Heartbeat trigger note (docs/routing.md §6.2 part 2), before the GPT-5 heartbeat guidance.
pub const HEARTBEAT_TRIGGER_NOTE: &str = "This turn is an OpenClaw heartbeat wake. The guidance below applies to this wake only.\n\nTo finish, prefer the structured `heartbeat_respond` tool (search for it and load it with `tool_search` when it is deferred), with `notify=false` when nothing should interrupt the user.";

/// The whole heartbeat note: the trigger note, then the GPT-5 overlay's heartbeat guidance.
pub fn heartbeat_note() -> String {
    format!(
        "{HEARTBEAT_TRIGGER_NOTE}\n\n{}",
        crate::render::provider::GPT5_HEARTBEAT_GUIDANCE
    )
}

/// Cron trigger note (docs/routing.md §6.2 part 2).
pub const CRON_NOTE: &str = "This turn is a scheduled OpenClaw automation job. Apply these instructions to this job only: execute the payload directly, use the context already provided instead of reloading bootstrap, memory or project-doc files, and keep the output concise and automation-oriented.";

/// Two-line preamble of the turn input runtime context.
pub const RUNTIME_CONTEXT_PREAMBLE: &str = "OpenClaw runtime context for this turn.\nTreat it as supporting project and user reference for the current request below.";

/// Label before the user's request when runtime context precedes it.
pub const REQUEST_LABEL: &str = "Current user request:";

/// OpenClaw's assembled-context header; a prompt starting with it is used as is.
pub const ASSEMBLED_CONTEXT_HEADER: &str = "# OpenClaw Assembled Context";

/// The two delivery-hint variants OpenClaw puts on the first line of a prompt.
pub const DELIVERY_HINT_MARKERS: [&str; 2] = [
    "use the `message` tool to send",
    "final text is not automatically delivered",
];

fn file_blocks(files: &[FittedFile], heading: &str) -> Vec<String> {
    files
        .iter()
        .map(|file| format!("{heading} {}\n\n{}", file.path, file.text))
        .collect()
}

/// Turn-scoped collaboration instructions (docs/routing.md §6.2); `None` means JSON `null`.
pub fn collaboration_instructions(
    run: &Run,
    routed: &RoutedWorkspace,
    skills: &SkillsPrompt,
) -> Option<String> {
    if run.is_lightweight_cron() {
        return None;
    }
    let mut additions: Vec<String> = Vec::new();
    match run.trigger {
        Trigger::Heartbeat => additions.push(heartbeat_note()),
        Trigger::Cron => additions.push(CRON_NOTE.to_string()),
        Trigger::User => {}
    }
    additions.extend(routed.memory_note.as_ref().map(memory_note));
    let catalog = trim_end_js(&skills.text);
    if !catalog.is_empty() {
        additions.push(format!("{SKILLS_HEADING}\n\n{catalog}"));
    }
    additions.extend(routed.heartbeat_pointer.as_deref().map(heartbeat_pointer));
    if additions.is_empty() {
        return None;
    }
    let mut parts = vec![DEFAULT_COLLABORATION_PRESET.to_string()];
    parts.extend(additions);
    Some(join_parts(&parts))
}

/// The memory note (docs/routing.md §6.2 part 3): MEMORY.md named with the memory tools to
/// read it by, its content not pasted.
pub fn memory_note(note: &crate::routing::MemoryNote) -> String {
    format!(
        "{MEMORY_NOTE_HEADING}\n\nMEMORY.md exists in the active workspace as a memory file, not as instructions. Its content is not pasted into Codex turns; when durable memory is relevant, use {}.\n\n- {}",
        note.tools
            .iter()
            .map(|tool| format!("`{tool}`"))
            .collect::<Vec<_>>()
            .join(" or "),
        note.path
    )
}

/// The heartbeat pointer (docs/routing.md §6.2 part 5): HEARTBEAT.md named, never pasted.
pub fn heartbeat_pointer(path: &str) -> String {
    format!(
        "{HEARTBEAT_POINTER_HEADING}\n\nHEARTBEAT.md exists in the active workspace. Read it before you proceed with this heartbeat, then decide what is appropriate.\n\n- {path}"
    )
}

/// The prompt as OpenClaw core hands it over: untrusted conversation metadata and recent history
/// (user turns in chats), then the user's text.
pub fn inbound_prompt(run: &Run) -> String {
    if run.trigger != Trigger::User || run.channel.name.is_none() {
        return run.message.clone();
    }
    let channel = &run.channel;
    let mut info = Map::new();
    if let Some(chat_id) = &channel.chat_id {
        info.insert("chat_id".into(), json!(chat_id));
    }
    if let Some(message_id) = &channel.message_id {
        info.insert("message_id".into(), json!(message_id));
    }
    if let Some(sender) = &channel.sender {
        let mut sender_map = Map::new();
        for (key, value) in [
            ("id", &sender.id),
            ("name", &sender.name),
            ("username", &sender.username),
        ] {
            if let Some(value) = value {
                sender_map.insert(key.into(), json!(value));
            }
        }
        if !sender_map.is_empty() {
            info.insert("sender".into(), Value::Object(sender_map));
        }
    }
    if let Some(subject) = &channel.group_subject {
        info.insert("group_subject".into(), json!(subject));
    }
    if matches!(channel.chat_type, Some(ChatType::Group | ChatType::Channel)) {
        info.insert("is_group_chat".into(), json!(true));
    }
    if !channel.history.is_empty() {
        info.insert("history_count".into(), json!(channel.history.len()));
    }
    let mut parts = Vec::new();
    if !info.is_empty() {
        parts.push(format!(
            "Conversation info (untrusted metadata):\n{}",
            data_block(&Value::Object(info))
        ));
    }
    if let Some(quoted) = &channel.reply_to {
        parts.push(format!(
            "Replied-to message (untrusted, for context):\n{}",
            data_block(&json!(quoted))
        ));
    }
    if !channel.history.is_empty() {
        parts.push(format!(
            "Chat history since your last reply (untrusted, for context):\n{}",
            data_block(&json!(channel.history))
        ));
    }
    if parts.is_empty() {
        return run.message.clone();
    }
    parts.push(run.message.clone());
    parts.join("\n\n")
}

/// Split a leading delivery-hint line off the prompt (docs/routing.md §6.3 step 2).
fn split_delivery_hint(prompt: &str) -> (Option<String>, String) {
    let start = prompt.trim_start();
    let (first_line, rest) = match start.split_once('\n') {
        Some((line, rest)) => (line, rest),
        None => (start, ""),
    };
    let lowered = first_line.to_lowercase();
    if DELIVERY_HINT_MARKERS
        .iter()
        .any(|marker| lowered.contains(marker))
    {
        (Some(first_line.trim_end().to_string()), rest.to_string())
    } else {
        (None, prompt.to_string())
    }
}

/// The first turn input text (docs/routing.md §6.3).
pub fn turn_input_text(run: &Run, routed: &RoutedWorkspace) -> String {
    if run.is_lightweight_cron() {
        return run.message.clone();
    }
    let prompt = inbound_prompt(run);
    let (hint, prompt) = split_delivery_hint(&prompt);
    let runtime_context = runtime_context(routed);
    if runtime_context.is_none() && hint.is_none() {
        return prompt;
    }
    let mut parts: Vec<String> = Vec::new();
    parts.extend(runtime_context);
    if let Some(hint) = hint {
        parts.push(format!(
            "## OpenClaw Delivery Guidance\n\nRuntime routing guidance from OpenClaw, not part of the user's request:\n{hint}"
        ));
    }
    let request = if prompt.trim_start().starts_with(ASSEMBLED_CONTEXT_HEADER) {
        prompt
    } else {
        format!("{REQUEST_LABEL}\n{prompt}")
    };
    // The request is verbatim: join the context parts, then append it untouched.
    format!("{}\n\n{request}", join_parts(&parts))
}

/// The turn input's runtime context (docs/routing.md §6.3): the turn-scoped workspace files
/// (BOOTSTRAP.md, MEMORY.md when no memory note covers it, hook-added files), `None` without any.
pub fn runtime_context(routed: &RoutedWorkspace) -> Option<String> {
    if routed.turn_files.is_empty() {
        return None;
    }
    let mut elsewhere = vec![
        "Codex loads AGENTS.md natively.".to_string(),
        "SOUL.md, IDENTITY.md, USER.md and TOOLS.md arrive as thread developer instructions."
            .to_string(),
        "HEARTBEAT.md is handled by heartbeat guidance.".to_string(),
    ];
    if routed.memory_note.is_some() {
        elsewhere.push("MEMORY.md is covered by the workspace memory note.".to_string());
    }
    let mut parts = vec![
        RUNTIME_CONTEXT_PREAMBLE.to_string(),
        format!(
            "## OpenClaw Workspace Context\n\nOpenClaw loaded the workspace files below for this turn. {} Those files are not repeated here.",
            elsewhere.join(" ")
        ),
        "# Project Context\n\nThe following workspace files were loaded:".to_string(),
    ];
    parts.extend(file_blocks(&routed.turn_files, "##"));
    if routed.notice_for(Surface::TurnInput) {
        parts.push(TRUNCATION_NOTICE.to_string());
    }
    Some(parts.join("\n\n"))
}

// ---------------------------------------------------------------------------------------------
// Thread developer instructions
// ---------------------------------------------------------------------------------------------

/// Base identity (part 1).
pub const BASE_IDENTITY: &str = "You are a personal agent running inside OpenClaw. OpenClaw supplies dynamic tools for messaging, cron, sessions, media, gateway and nodes.";

/// Spawn guidance (part 4).
pub const SPAWN_GUIDANCE: &str = "For Codex sub-agents use the native `spawn_agent` tool; it may be deferred, so load it with `tool_search` first when it is not listed. Use OpenClaw's `sessions_spawn` only to delegate to OpenClaw or ACP sessions, never as a stand-in for `spawn_agent`.";

/// Skill-workshop guidance (part 3, only with a `skill_workshop` tool).
pub const SKILL_WORKSHOP_GUIDANCE: &str = "Use the `skill_workshop` tool to create or revise workspace skills. Keep each skill focused, and re-read a skill's SKILL.md after changing it.";

/// Visible-reply rule for message-tool-only delivery (part 5).
pub const MESSAGE_TOOL_ONLY_RULE: &str = "Replies to the source chat are not delivered automatically in this run. Send anything the user should see with `message(action=send)`, and do not repeat that visible content in your final answer.";

/// Visible-reply rule when a message tool exists but replies are delivered automatically.
pub const MESSAGE_TOOL_OPTIONAL_RULE: &str = "Reply normally: your final answer is delivered to the source chat. Use the `message` tool only for out-of-band sends, media or files, or other targets.";

/// Heading of the workspace block.
pub const WORKSPACE_BLOCK_HEADING: &str = "## OpenClaw Workspace Instructions";

/// Live facts for the Codex developer instructions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodexDeveloperInputs {
    /// Names of the deferred (searchable) dynamic tools.
    pub deferred_tools: Vec<String>,
    pub skill_workshop: bool,
    pub visible_reply_rule: Option<String>,
    /// Plugin prompt guidance registered for the `codex_app_server` surface.
    pub plugin_guidance: Vec<String>,
    /// Trusted inbound metadata, chat context and group intro.
    pub extra_system_prompt: Option<String>,
    /// SOUL, IDENTITY, USER, TOOLS (in that order), fitted.
    pub workspace_files: Vec<ContextFile>,
    pub truncation_notice: Option<String>,
}

fn deferred_manifest(deferred: &[String]) -> Option<String> {
    if deferred.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = deferred.iter().map(String::as_str).collect();
    names.sort_by(|a, b| collate(a, b));
    names.dedup();
    Some(format!(
        "OpenClaw dynamic tools available on demand: {}. Load a tool's exact spec with `tool_search` before calling it.",
        names.join(", ")
    ))
}

/// The thread developer instructions' workspace block (part 8): SOUL, IDENTITY, USER and TOOLS
/// as fitted, and the truncation notice; `None` without any file.
pub fn workspace_block(inputs: &CodexDeveloperInputs) -> Option<String> {
    if inputs.workspace_files.is_empty() {
        return None;
    }
    let mut intro = "OpenClaw loaded these files from the active agent workspace. Internalize them and follow them.".to_string();
    if inputs.workspace_files.iter().any(ContextFile::is_soul) {
        intro.push_str(" SOUL.md defines your persona and tone; it applies unless higher-priority instructions override it.");
    }
    let mut parts = vec![WORKSPACE_BLOCK_HEADING.to_string(), intro];
    parts.extend(
        inputs
            .workspace_files
            .iter()
            .map(|file| format!("### {}\n\n{}", file.path, file.content)),
    );
    parts.extend(inputs.truncation_notice.clone());
    Some(parts.join("\n\n"))
}

/// Render the developer instructions (parts 1-8, joined with the docs/routing.md §2.5 rule).
pub fn render_developer_instructions(inputs: &CodexDeveloperInputs) -> String {
    let mut parts: Vec<String> = vec![BASE_IDENTITY.to_string()];
    parts.extend(deferred_manifest(&inputs.deferred_tools));
    if inputs.skill_workshop {
        parts.push(SKILL_WORKSHOP_GUIDANCE.to_string());
    }
    parts.push(SPAWN_GUIDANCE.to_string());
    parts.extend(inputs.visible_reply_rule.clone());
    if !inputs.plugin_guidance.is_empty() {
        parts.push(inputs.plugin_guidance.join("\n"));
    }
    parts.extend(inputs.extra_system_prompt.clone());
    parts.extend(workspace_block(inputs));
    join_parts(&parts)
}
