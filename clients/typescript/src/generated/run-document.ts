/* Generated from docs/run-document.schema.json by scripts/generate-types.mjs; do not edit. */

/**
 * The conversation kind of the channel.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ChatType".
 */
export type ChatType = ("direct" | "group" | "channel")
/**
 * Reaction guidance level of a channel.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ReactionLevel".
 */
export type ReactionLevel = ("minimal" | "extensive")
/**
 * OpenClaw prompt mode (docs/system-prompt.md): full, minimal (subagents) or none.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "PromptMode".
 */
export type PromptMode = ("full" | "minimal" | "none")
/**
 * Codex sandbox mode, ordered from the least to the most access (the service's ceiling compares
 * with this order).
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "SandboxMode".
 */
export type SandboxMode = ("read-only" | "workspace-write" | "danger-full-access")
/**
 * The default elevated level.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ElevatedLevel".
 */
export type ElevatedLevel = ("on" | "off" | "ask" | "full")
/**
 * The sandbox's access to the agent workspace.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "WorkspaceAccess".
 */
export type WorkspaceAccess = ("none" | "ro" | "rw")
/**
 * Codex service tier.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ServiceTier".
 */
export type ServiceTier = ("fast" | "flex")
/**
 * How visible replies reach the source channel.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "SourceReplyDelivery".
 */
export type SourceReplyDelivery = ("automatic" | "messageToolOnly")
/**
 * One item of `tools` as the schema describes it: a spec, or a path to a JSON array of specs.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ToolItem".
 */
export type ToolItem = (string | ToolSpec)
/**
 * Codex approval policy (the retired `on-failure` is refused).
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ApprovalPolicy".
 */
export type ApprovalPolicy = ("untrusted" | "on-request" | "never")
/**
 * Which runtime executes the run.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "Harness".
 */
export type Harness = ("codex" | "embedded")
/**
 * How Codex authenticates to OpenAI (docs/codex-wire.md §4.6).
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "OpenAiAuth".
 */
export type OpenAiAuth = ("chatgpt" | "apiKey")
/**
 * Reasoning visibility (docs/system-prompt.md D13).
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ReasoningLevel".
 */
export type ReasoningLevel = ("off" | "on" | "stream")
/**
 * OpenClaw thinking level.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "Thinking".
 */
export type Thinking = (("off" | "minimal" | "low" | "medium" | "high" | "xhigh") | "adaptive" | "max")
/**
 * Why the run happens.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "Trigger".
 */
export type Trigger = ("user" | "heartbeat" | "cron")

/**
 * The run document exactly as written.
 */
export interface RunDocument {
/**
 * The schema this document follows (editors read it; clawbridge ignores it), e.g. a path to
 * `docs/run-document.schema.json`.
 */
$schema?: (string | null)
agentId?: (string | null)
/**
 * Codex approval policy (the retired `on-failure` is refused).
 */
approvalPolicy?: ("untrusted" | "on-request" | "never")
/**
 * OpenClaw's bundled skills folder (default: `$OPENCLAW_BUNDLED_SKILLS_DIR`).
 */
bundledSkillsDir?: (string | null)
channel?: Channel
/**
 * Codex's code mode (its native tool surface); `false` turns it off, caller keys included.
 */
codeMode?: boolean
/**
 * Codex thread `config` overrides of the caller's own (dotted keys, as OpenClaw's caller
 * passes them), merged under web search and over code mode (docs/codex-wire.md §4.4).
 */
codexConfig?: {
[k: string]: unknown
}
config?: {
[k: string]: unknown
}
cwd?: (string | null)
directTools?: string[]
/**
 * Local OpenClaw docs folder shown in Documentation (else `docs.path`, else the public docs).
 */
docsPath?: (string | null)
/**
 * Which runtime executes the run.
 */
harness?: ("codex" | "embedded")
/**
 * Images sent with the turn (`localImage` input items), relative to the document.
 */
images?: string[]
lightweight?: boolean
/**
 * OpenClaw's managed skills folder (default: `$OPENCLAW_STATE_DIR/skills`, else
 * `~/.openclaw/skills`, when the CLI or service runs).
 */
managedSkillsDir?: (string | null)
memoryWorkspace?: (string | null)
message?: string
model?: (string | null)
/**
 * How Codex authenticates to OpenAI: `chatgpt` (native login; `openai/...` ids send no
 * `modelProvider`) or `apiKey` (`modelProvider: "openai"`).
 */
openaiAuth?: ("chatgpt" | "apiKey")
/**
 * Plugin prompt guidance registered for the `codex_app_server` surface.
 */
pluginGuidance?: string[]
promptMode?: (PromptMode | null)
/**
 * Reasoning visibility (`/reasoning`): `off`, `on` or `stream`.
 */
reasoningLevel?: ("off" | "on" | "stream")
/**
 * The provider's tagged-reasoning contract text (the Reasoning Format section).
 */
reasoningTagHint?: (string | null)
runtime?: RuntimeFacts
/**
 * `None`: the CLI's default (`danger-full-access`), or the ceiling under `clawbridge serve`.
 */
sandbox?: (SandboxMode | null)
/**
 * Sandbox details for the Sandbox section (docs/system-prompt.md S18).
 */
sandboxInfo?: (SandboxDetails | null)
/**
 * Codex `serviceTier` for the thread and turn.
 */
serviceTier?: (ServiceTier | null)
/**
 * OpenClaw's session id (its transcript's id), handed to the `agent:bootstrap` hook.
 */
sessionId?: (string | null)
sessionKey?: (string | null)
/**
 * Whether OpenClaw considers the workspace set up (BOOTSTRAP.md then stays out); unset, it
 * is read from the workspace (docs/routing.md §3.4).
 */
setupComplete?: (boolean | null)
/**
 * Local OpenClaw source checkout shown in Documentation (else the GitHub repository).
 */
sourcePath?: (string | null)
/**
 * How visible replies reach the source channel. Stated, it wins; absent, it follows
 * OpenClaw's `messages.groupChat.visibleReplies` and `messages.visibleReplies`.
 */
sourceReplyDelivery?: (SourceReplyDelivery | null)
/**
 * OpenClaw thinking level.
 */
thinking?: (("off" | "minimal" | "low" | "medium" | "high" | "xhigh") | "adaptive" | "max")
threadId?: (string | null)
/**
 * Tool specs; a string item is a path (relative to the document) to a JSON array of specs.
 */
tools?: ToolItem[]
/**
 * Why the run happens.
 */
trigger?: ("user" | "heartbeat" | "cron")
workspace: string
/**
 * Extra lines for the Workspace section.
 */
workspaceNotes?: string[]
}
/**
 * The channel context of the run; every field optional. Everything here except `name` and
 * `chatType` is the chat's own text and only ever reaches the model as escaped data.
 */
export interface Channel {
accountId?: (string | null)
/**
 * Channel capability ids (`reactions`, `nativeApprovals`, `inlineButtons`, `voice`, ...);
 * shown on the Runtime line, and `nativeApprovals` / `inlineButtons` mean the channel has
 * its own approval UI.
 */
capabilities?: string[]
chatId?: (string | null)
chatType?: (ChatType | null)
groupSubject?: (string | null)
history?: HistoryEntry[]
messageId?: (string | null)
/**
 * Channel-specific hints for the `message` tool (from the channel plugin).
 */
messageToolHints?: string[]
name?: (string | null)
/**
 * Reaction guidance for this channel (the Reactions section).
 */
reactionLevel?: (ReactionLevel | null)
/**
 * The quoted message this one replies to.
 */
replyTo?: (QuotedMessage | null)
sender?: (Sender | null)
}
/**
 * One line of recent chat history.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "HistoryEntry".
 */
export interface HistoryEntry {
body: string
sender: string
}
/**
 * The message the user replied to (quoted text), as the channel reports it.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "QuotedMessage".
 */
export interface QuotedMessage {
body: string
sender?: (string | null)
}
/**
 * Who sent the message.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "Sender".
 */
export interface Sender {
id?: (string | null)
name?: (string | null)
username?: (string | null)
}
/**
 * Runtime facts OpenClaw knows and clawbridge cannot observe.
 */
export interface RuntimeFacts {
/**
 * OpenClaw's Node version (`v22.19.0`).
 */
node?: (string | null)
}
/**
 * Sandbox details (OpenClaw's `sandboxInfo`); any of them turns the Sandbox section on unless
 * `enabled` is `false`.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "SandboxDetails".
 */
export interface SandboxDetails {
/**
 * Where the agent workspace is mounted from on the host.
 */
agentWorkspaceMount?: (string | null)
/**
 * Whether a browser is available inside the sandbox.
 */
browser?: boolean
/**
 * The workspace folder inside the container.
 */
containerWorkspaceDir?: (string | null)
elevated?: (ElevatedExec | null)
enabled?: (boolean | null)
workspaceAccess?: (WorkspaceAccess | null)
}
/**
 * Elevated exec in the sandbox.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ElevatedExec".
 */
export interface ElevatedExec {
allowed?: boolean
defaultLevel?: (ElevatedLevel | null)
}
/**
 * One OpenClaw tool as offered to the run.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "ToolSpec".
 */
export interface ToolSpec {
description?: string
inputSchema?: {
[k: string]: unknown
}
name: string
}
/**
 * The channel context of the run; every field optional. Everything here except `name` and
 * `chatType` is the chat's own text and only ever reaches the model as escaped data.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "Channel".
 */
export interface Channel1 {
accountId?: (string | null)
/**
 * Channel capability ids (`reactions`, `nativeApprovals`, `inlineButtons`, `voice`, ...);
 * shown on the Runtime line, and `nativeApprovals` / `inlineButtons` mean the channel has
 * its own approval UI.
 */
capabilities?: string[]
chatId?: (string | null)
chatType?: (ChatType | null)
groupSubject?: (string | null)
history?: HistoryEntry[]
messageId?: (string | null)
/**
 * Channel-specific hints for the `message` tool (from the channel plugin).
 */
messageToolHints?: string[]
name?: (string | null)
/**
 * Reaction guidance for this channel (the Reactions section).
 */
reactionLevel?: (ReactionLevel | null)
/**
 * The quoted message this one replies to.
 */
replyTo?: (QuotedMessage | null)
sender?: (Sender | null)
}
/**
 * Runtime facts for the Runtime line.
 * 
 * This interface was referenced by `RunDocument`'s JSON-Schema
 * via the `definition` "RuntimeFacts".
 */
export interface RuntimeFacts1 {
/**
 * OpenClaw's Node version (`v22.19.0`).
 */
node?: (string | null)
}
