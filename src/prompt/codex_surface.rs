//! The Codex prompt surface: thread-level developer instructions (routing.md §6.1), rendered by
//! the same facade and section assembly as OpenClaw's own system prompt.

use serde::{Deserialize, Serialize};

use super::sections::ContextFile;
use crate::text::{collate, join_parts};

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

fn workspace_block(inputs: &CodexDeveloperInputs) -> Option<String> {
    if inputs.workspace_files.is_empty() {
        return None;
    }
    let mut intro = "OpenClaw loaded these files from the active agent workspace. Internalize them and follow them.".to_string();
    if inputs
        .workspace_files
        .iter()
        .any(|file| file.path.ends_with("SOUL.md"))
    {
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

/// Render the developer instructions (parts 1-8, joined with the routing.md §2.5 rule).
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
