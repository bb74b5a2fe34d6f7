/* Generated from docs/openrpc.json by scripts/generate-types.mjs; do not edit. */

/**
 * Codex approval policy (the retired `on-failure` is refused).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ApprovalPolicy".
 */
export type ApprovalPolicy = ("untrusted" | "on-request" | "never")
/**
 * Codex's `AskForApproval`: one of its named policies, or the granular form that says which
 * kinds of approval prompt Codex may raise (the rest it rejects by itself, without asking).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "AskForApproval".
 */
export type AskForApproval = (ApprovalPolicy | {
granular: GranularApproval
})
/**
 * The conversation kind of the channel.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ChatType".
 */
export type ChatType = ("direct" | "group" | "channel")
/**
 * Reaction guidance level of a channel.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ReactionLevel".
 */
export type ReactionLevel = ("minimal" | "extensive")
/**
 * Everything `clawbridge params` prints.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "CodexParams".
 */
export type CodexParams = ({
/**
 * Whether `initialize` must opt into `capabilities.experimentalApi`.
 */
experimentalApi: boolean
turnStart: TurnStartParams
} & CodexParams1)
/**
 * One `turn/start` input item.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "UserInput".
 */
export type UserInput = ({
text: string
text_elements: unknown[]
type: "text"
} | {
path: string
type: "localImage"
})
/**
 * `turn/start.sandboxPolicy`.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SandboxPolicy".
 */
export type SandboxPolicy = ({
type: "dangerFullAccess"
} | {
networkAccess: boolean
type: "readOnly"
} | {
excludeSlashTmp: boolean
excludeTmpdirEnvVar: boolean
networkAccess: boolean
type: "workspaceWrite"
writableRoots: string[]
})
export type CodexParams1 = ({
threadStart: ThreadStartParams
} | {
threadResume: ThreadResumeParams
})
/**
 * A dynamic tool as Codex takes it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "DynamicToolSpec".
 */
export type DynamicToolSpec = ({
deferLoading?: (boolean | null)
description: string
inputSchema: unknown
name: string
type: "function"
} | {
description: string
name: string
tools: DynamicToolSpec[]
type: "namespace"
})
/**
 * Codex sandbox mode, ordered from the least to the most access (the service's ceiling compares
 * with this order).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SandboxMode".
 */
export type SandboxMode = ("read-only" | "workspace-write" | "danger-full-access")
/**
 * See [`CodexStatus::state`].
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "CodexState".
 */
export type CodexState = ("missing" | "notStarted" | "running" | "exited")
/**
 * A member's state, as `bridge.status` reports it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "MemberState".
 */
export type MemberState = (("starting" | "ready") | "idle" | "draining" | "restarting" | "dead")
/**
 * The surface a file landed on.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Surface".
 */
export type Surface = ("threadDeveloperInstructions" | "collaborationInstructions" | "turnInput" | "nativeCodex" | "systemPrompt" | "systemPromptDynamic" | "omitted")
/**
 * Which runtime executes the run.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Harness".
 */
export type Harness = ("codex" | "embedded")
/**
 * An approval decision.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Decision".
 */
export type Decision = ("accept" | "decline")
/**
 * The default elevated level.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ElevatedLevel".
 */
export type ElevatedLevel = ("on" | "off" | "ask" | "full")
/**
 * How Codex authenticates to OpenAI (docs/codex-wire.md §4.6).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "OpenAiAuth".
 */
export type OpenAiAuth = ("chatgpt" | "apiKey")
/**
 * OpenClaw prompt mode (docs/system-prompt.md): full, minimal (subagents) or none.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "PromptMode".
 */
export type PromptMode = ("full" | "minimal" | "none")
/**
 * What `bridge.runStart` does when the session already has a run in progress.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "QueueMode".
 */
export type QueueMode = ("queue" | "steer")
/**
 * Reasoning visibility (docs/system-prompt.md D13).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ReasoningLevel".
 */
export type ReasoningLevel = ("off" | "on" | "stream")
/**
 * The sandbox's access to the agent workspace.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "WorkspaceAccess".
 */
export type WorkspaceAccess = ("none" | "ro" | "rw")
/**
 * Codex service tier.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ServiceTier".
 */
export type ServiceTier = ("fast" | "flex")
/**
 * How visible replies reach the source channel.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SourceReplyDelivery".
 */
export type SourceReplyDelivery = ("automatic" | "messageToolOnly")
/**
 * One item of `tools` as the schema describes it: a spec, or a path to a JSON array of specs.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ToolItem".
 */
export type ToolItem = (string | ToolSpec)
/**
 * One event of a run.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunEvent".
 */
export type RunEvent = ({
event: "thread"
resumed: boolean
threadId: string
} | {
event: "notification"
method: string
params: NotificationParams
} | {
event: "serverRequest"
id: unknown
method: string
params: unknown
} | {
error?: unknown
event: "answer"
id: unknown
result?: unknown
} | {
arguments: unknown
callId: string
codexCallId: unknown
event: "toolCall"
namespace: unknown
tool: string
} | {
approvalId: string
event: "approvalRequest"
method: string
params: unknown
} | {
event: "approvalDeclined"
method: string
params: unknown
reason: string
} | {
count: number
event: "eventsDropped"
} | {
agentMessages?: (string[] | null)
codexVersion?: (string | null)
error?: (string | null)
event: "turnEnd"
/**
 * With status `appServerLost`: whether the turn may have run (its `turn/start` was sent
 * before the app-server went away), so a retry could repeat what it did.
 */
mayHaveRun?: (boolean | null)
modelRequests?: number
/**
 * Set when the end was inferred, not told: `missing turn/completed` (the turn's last
 * agent message came and its `turn/completed` did not within `--completion-grace`).
 */
recovered?: (string | null)
status: TurnStatus
threadId?: (string | null)
turnId?: (string | null)
})
/**
 * How a turn ended. Its wire name (`completed`, `failed`, `interrupted`) is Codex's and ours.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "TurnStatus".
 */
export type TurnStatus = (("completed" | "failed" | "interrupted") | "appServerLost")
/**
 * OpenClaw thinking level.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Thinking".
 */
export type Thinking = (("off" | "minimal" | "low" | "medium" | "high" | "xhigh") | "adaptive" | "max")
/**
 * Why the run happens.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Trigger".
 */
export type Trigger = ("user" | "heartbeat" | "cron")
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SubscribeRunResult".
 */
export type SubscribeRunResult = (string | number)
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "UnsubscribeRunResult".
 */
export type UnsubscribeRunResult = boolean

export interface BridgeApiTypes {
Acknowledged?: Acknowledged
ApprovalPolicy?: ApprovalPolicy
AskForApproval?: AskForApproval
BootstrapCount?: BootstrapCount
Channel?: Channel
ChatType?: ChatType
CodexParams?: CodexParams
CodexState?: CodexState
CodexStatus?: CodexStatus
CollaborationMode?: CollaborationMode
CollaborationSettings?: CollaborationSettings
ContextDetail?: ContextDetail
ContextReport?: ContextReport
Decision?: Decision
DynamicToolSpec?: DynamicToolSpec
ElevatedExec?: ElevatedExec
ElevatedLevel?: ElevatedLevel
GranularApproval?: GranularApproval
Harness?: Harness
HistoryEntry?: HistoryEntry
MemberState?: MemberState
MemberStatus?: MemberStatus
NotificationParams?: NotificationParams
OmittedFile?: OmittedFile
OpenAiAuth?: OpenAiAuth
PromptAnswer?: PromptAnswer
PromptMode?: PromptMode
QueueMode?: QueueMode
QuotedMessage?: QuotedMessage
ReactionLevel?: ReactionLevel
ReasoningLevel?: ReasoningLevel
RoutedFile?: RoutedFile
RunDocument?: RunDocument
RunEvent?: RunEvent
RunStarted?: RunStarted
RunSummary?: RunSummary
RuntimeFacts?: RuntimeFacts1
SandboxDetails?: SandboxDetails
SandboxMode?: SandboxMode
SandboxPolicy?: SandboxPolicy
Sender?: Sender
ServiceTier?: ServiceTier
SkillDetail?: SkillDetail
SkillsSummary?: SkillsSummary
SourceReplyDelivery?: SourceReplyDelivery
Status?: Status
Steered?: Steered
Surface?: Surface
Thinking?: Thinking
ThreadResumeParams?: ThreadResumeParams
ThreadStartParams?: ThreadStartParams
ToolDetail?: ToolDetail
ToolItem?: ToolItem
ToolSpec?: ToolSpec
ToolsSummary?: ToolsSummary
Trigger?: Trigger
TurnStartParams?: TurnStartParams
TurnStatus?: TurnStatus
UserInput?: UserInput
WorkspaceAccess?: WorkspaceAccess
ParamsParams?: ParamsParams
ContextParams?: ContextParams
PromptParams?: PromptParams
RunStartParams?: RunStartParams
SubscribeRunParams?: SubscribeRunParams
SubscribeRunResult?: SubscribeRunResult
UnsubscribeRunParams?: UnsubscribeRunParams
UnsubscribeRunResult?: UnsubscribeRunResult
ToolResultParams?: ToolResultParams
ApprovalParams?: ApprovalParams
RunInterruptParams?: RunInterruptParams
RunSteerParams?: RunSteerParams
StatusParams?: StatusParams
DiscoverParams?: DiscoverParams
DiscoverResult?: DiscoverResult
}
/**
 * The answer of the methods that only acknowledge.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Acknowledged".
 */
export interface Acknowledged {
ok: boolean
}
/**
 * `AskForApproval.granular` (Codex 0.169.0): which prompts are allowed.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "GranularApproval".
 */
export interface GranularApproval {
mcp_elicitations: boolean
request_permissions: boolean
rules: boolean
sandbox_approval: boolean
skill_approval: boolean
}
/**
 * One bootstrap file of a run, as `bridge.status` counts it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "BootstrapCount".
 */
export interface BootstrapCount {
injectedChars: number
name: string
rawChars: number
/**
 * Where it went (`thread developer instructions`, `turn input`, `native to Codex`,
 * `omitted`...).
 */
surface: string
truncated: boolean
}
/**
 * The channel context of the run; every field optional. Everything here except `name` and
 * `chatType` is the chat's own text and only ever reaches the model as escaped data.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Channel".
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
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "HistoryEntry".
 */
export interface HistoryEntry {
body: string
sender: string
}
/**
 * The message the user replied to (quoted text), as the channel reports it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "QuotedMessage".
 */
export interface QuotedMessage {
body: string
sender?: (string | null)
}
/**
 * Who sent the message.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Sender".
 */
export interface Sender {
id?: (string | null)
name?: (string | null)
username?: (string | null)
}
/**
 * `turn/start` params.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "TurnStartParams".
 */
export interface TurnStartParams {
approvalPolicy: AskForApproval
approvalsReviewer: string
collaborationMode: CollaborationMode
cwd: string
effort?: (string | null)
input: UserInput[]
model: string
personality: string
sandboxPolicy: SandboxPolicy
serviceTier?: (string | null)
threadId: string
}
/**
 * `turn/start.collaborationMode`.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "CollaborationMode".
 */
export interface CollaborationMode {
mode: string
settings: CollaborationSettings
}
/**
 * Settings keys are snake_case on the wire.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "CollaborationSettings".
 */
export interface CollaborationSettings {
/**
 * `null` lets Codex apply its built-in Default preset.
 */
developer_instructions?: (string | null)
model: string
reasoning_effort?: (string | null)
}
/**
 * `thread/start` params.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ThreadStartParams".
 */
export interface ThreadStartParams {
approvalPolicy: AskForApproval
approvalsReviewer: string
config: {
[k: string]: unknown
}
cwd: string
developerInstructions: string
dynamicTools: DynamicToolSpec[]
experimentalRawEvents: boolean
model: string
modelProvider?: (string | null)
personality: string
sandbox: SandboxMode
serviceName: string
serviceTier?: (string | null)
}
/**
 * `thread/resume` params.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ThreadResumeParams".
 */
export interface ThreadResumeParams {
approvalPolicy: AskForApproval
approvalsReviewer: string
config: {
[k: string]: unknown
}
developerInstructions: string
/**
 * Avoids replaying the whole history in the reply (docs/codex-wire.md §4.2).
 */
excludeTurns: boolean
model: string
modelProvider?: (string | null)
personality: string
sandbox: SandboxMode
serviceTier?: (string | null)
threadId: string
}
/**
 * The Codex process as `bridge.status` reports it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "CodexStatus".
 */
export interface CodexStatus {
activeThreads?: (number | null)
alive?: (boolean | null)
error?: (string | null)
loadedThreads?: (number | null)
/**
 * Every app-server of the pool (`--app-servers`, `--app-server`).
 */
members?: MemberStatus[]
pendingRequests?: (number | null)
pid?: (number | null)
/**
 * App-servers recycled so far (`--recycle-after-threads`, `--recycle-rss-mb`).
 */
recycled?: (number | null)
/**
 * See [`CodexStatus::state`].
 */
state: ("missing" | "notStarted" | "running" | "exited")
/**
 * Threads the running app-server opened so far.
 */
threadsOpened?: (number | null)
version?: (string | null)
}
/**
 * One member as `bridge.status` lists it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "MemberStatus".
 */
export interface MemberStatus {
activeThreads: number
/**
 * Why the last start or the last app-server failed.
 */
error?: (string | null)
/**
 * Starts so far; each is a new incarnation.
 */
generation: number
/**
 * `local` or `remote`.
 */
kind: string
loadedThreads: number
/**
 * `local-N`, or the remote's `ws://` address.
 */
name: string
pendingRequests: number
/**
 * The running app-server's process id (local members).
 */
pid?: (number | null)
/**
 * Codex's latest `account/rateLimits/updated` on this app-server (its params).
 */
rateLimits?: {
[k: string]: unknown
}
/**
 * Crashes within the crash window.
 */
recentCrashes: number
recycled: number
/**
 * Starts after the first (after crashes and recycling).
 */
restarts: number
/**
 * The running app-server's resident memory (local members, Linux).
 */
rssBytes?: (number | null)
state: MemberState
/**
 * Threads the running app-server opened so far.
 */
threadsOpened: number
version?: (string | null)
/**
 * Client requests of the WebSocket endpoint waiting for a place among the member's
 * requests in flight (at most `MEMBER_IN_FLIGHT`; served connection by connection).
 */
waitingRequests?: number
}
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ContextDetail".
 */
export interface ContextDetail {
skills: SkillDetail[]
tools: ToolDetail[]
}
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SkillDetail".
 */
export interface SkillDetail {
eligible: boolean
fileChars: number
name: string
reason?: (string | null)
}
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ToolDetail".
 */
export interface ToolDetail {
name: string
placement: string
schemaChars: number
}
/**
 * The whole report (also the `--json` shape).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ContextReport".
 */
export interface ContextReport {
bootstrap: RoutedFile[]
bootstrapMaxChars: number
bootstrapTotalMaxChars: number
detail?: (ContextDetail | null)
filtered: OmittedFile[]
harness: Harness
skills: SkillsSummary
tools: ToolsSummary
truncation: string[]
truncationNoticeShown: boolean
}
/**
 * One row of the `/context` view.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RoutedFile".
 */
export interface RoutedFile {
injectedChars: number
name: string
note?: (string | null)
path: string
rawChars: number
surface: Surface
truncated: boolean
}
/**
 * Why a candidate was left out before routing.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "OmittedFile".
 */
export interface OmittedFile {
name: string
reason: string
}
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SkillsSummary".
 */
export interface SkillsSummary {
eligible: number
format: string
included: number
promptChars: number
}
/**
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ToolsSummary".
 */
export interface ToolsSummary {
count: number
schemaChars: number
}
/**
 * Elevated exec in the sandbox.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ElevatedExec".
 */
export interface ElevatedExec {
allowed?: boolean
defaultLevel?: (ElevatedLevel | null)
}
/**
 * A Codex notification's params, exactly as Codex sent them (Codex's own schema: `codex app-server generate-json-schema`).
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "NotificationParams".
 */
export interface NotificationParams {

}
/**
 * `bridge.prompt`'s answer.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "PromptAnswer".
 */
export interface PromptAnswer {
/**
 * Channel- and session-volatile sections (below it).
 */
dynamicSuffix: string
/**
 * Stable sections and Project Context (above the cache boundary).
 */
stablePrefix: string
/**
 * The whole prompt as a harness receives it.
 */
text: string
}
/**
 * The run document exactly as written.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunDocument".
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
channel?: Channel1
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
 * How Codex authenticates to OpenAI (docs/codex-wire.md §4.6).
 */
openaiAuth?: ("chatgpt" | "apiKey")
/**
 * Plugin prompt guidance registered for the `codex_app_server` surface.
 */
pluginGuidance?: string[]
promptMode?: (PromptMode | null)
/**
 * Reasoning visibility (docs/system-prompt.md D13).
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
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
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
 * One OpenClaw tool as offered to the run.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
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
 * `bridge.runStart`'s answer, once the thread is open.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunStarted".
 */
export interface RunStarted {
/**
 * The handle for `bridge.subscribeRun` and `bridge.runInterrupt`.
 */
runId: string
/**
 * `queue: "steer"` only: true when the message went to the session's running turn, whose
 * run `runId` names.
 */
steered?: (boolean | null)
threadId: string
}
/**
 * One run as `bridge.status` lists it.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunSummary".
 */
export interface RunSummary {
/**
 * The run's bootstrap files: raw and injected characters and where each went (the counts
 * OpenClaw keeps for diagnostics such as `/status`).
 */
bootstrap?: BootstrapCount[]
/**
 * The client that started it (`operator` for the service's own token).
 */
client: string
/**
 * `thread/compacted` seen during its turn.
 */
compactions?: number
/**
 * The input stayed above the context window after two compactions or more (also logged).
 */
contextAlarm?: boolean
runId: string
sessionKey: string
/**
 * `running` or `ended`.
 */
state: string
threadId?: (string | null)
/**
 * The latest `thread/tokenUsage/updated` of its turn, as Codex sent it (`last`, `total`,
 * `modelContextWindow`).
 */
tokenUsage?: {
[k: string]: unknown
}
}
/**
 * Runtime facts for the Runtime line.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RuntimeFacts".
 */
export interface RuntimeFacts1 {
/**
 * OpenClaw's Node version (`v22.19.0`).
 */
node?: (string | null)
}
/**
 * `bridge.status`'s answer.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Status".
 */
export interface Status {
codex: CodexStatus
pendingApprovals: number
pendingToolCalls: number
runs: RunSummary[]
/**
 * Sessions bound to a Codex thread.
 */
sessions: number
}
/**
 * `bridge.runSteer`'s answer.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "Steered".
 */
export interface Steered {
/**
 * The turn the input went to.
 */
turnId: string
}
/**
 * bridge.params's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ParamsParams".
 */
export interface ParamsParams {
run: RunDocument
/**
 * `bridge.context`: add per-skill and per-tool sizes.
 */
detail?: boolean
}
/**
 * bridge.context's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ContextParams".
 */
export interface ContextParams {
run: RunDocument
/**
 * `bridge.context`: add per-skill and per-tool sizes.
 */
detail?: boolean
}
/**
 * bridge.prompt's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "PromptParams".
 */
export interface PromptParams {
run: RunDocument
mode?: PromptMode
/**
 * false: drop the cache-boundary marker (providers without boundary support).
 */
cacheBoundary?: boolean
}
/**
 * bridge.runStart's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunStartParams".
 */
export interface RunStartParams {
run: RunDocument
/**
 * Start a new thread even if the session has one (its binding is replaced): how a session
 * whose app-server was marked dead goes on elsewhere.
 */
newThread?: boolean
queue?: QueueMode
}
/**
 * bridge.subscribeRun's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "SubscribeRunParams".
 */
export interface SubscribeRunParams {
/**
 * From bridge.runStart.
 */
runId: string
}
/**
 * bridge.unsubscribeRun's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "UnsubscribeRunParams".
 */
export interface UnsubscribeRunParams {
/**
 * The subscription id.
 */
subscription: string
}
/**
 * bridge.toolResult's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ToolResultParams".
 */
export interface ToolResultParams {
/**
 * The event's callId.
 */
callId: string
/**
 * The result as text (or contentItems).
 */
text?: string
/**
 * Codex content items (`inputText`, `inputImage`).
 */
contentItems?: unknown[]
/**
 * Whether the tool succeeded (default true).
 */
success?: boolean
}
/**
 * bridge.approval's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "ApprovalParams".
 */
export interface ApprovalParams {
/**
 * The event's approvalId.
 */
approvalId: string
decision: Decision
}
/**
 * bridge.runInterrupt's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunInterruptParams".
 */
export interface RunInterruptParams {
/**
 * From bridge.runStart.
 */
runId: string
}
/**
 * bridge.runSteer's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "RunSteerParams".
 */
export interface RunSteerParams {
/**
 * From bridge.runStart.
 */
runId: string
/**
 * The user's text, added to the running turn.
 */
input: string
}
/**
 * bridge.status's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "StatusParams".
 */
export interface StatusParams {

}
/**
 * rpc.discover's params, by name.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "DiscoverParams".
 */
export interface DiscoverParams {

}
/**
 * An OpenRPC 1.3 document.
 * 
 * This interface was referenced by `BridgeApiTypes`'s JSON-Schema
 * via the `definition` "DiscoverResult".
 */
export interface DiscoverResult {
[k: string]: unknown
}

/** Every method of the bridge API (docs/openrpc.json). */
export type BridgeMethod =
  | "bridge.params"
  | "bridge.context"
  | "bridge.prompt"
  | "bridge.runStart"
  | "bridge.subscribeRun"
  | "bridge.unsubscribeRun"
  | "bridge.toolResult"
  | "bridge.approval"
  | "bridge.runInterrupt"
  | "bridge.runSteer"
  | "bridge.status"
  | "rpc.discover";

/** Each method's params (by name) and result (docs/openrpc.json). */
export interface BridgeMethods {
  "bridge.params": { params: ParamsParams; result: CodexParams };
  "bridge.context": { params: ContextParams; result: ContextReport };
  "bridge.prompt": { params: PromptParams; result: PromptAnswer };
  "bridge.runStart": { params: RunStartParams; result: RunStarted };
  "bridge.subscribeRun": { params: SubscribeRunParams; result: SubscribeRunResult };
  "bridge.unsubscribeRun": { params: UnsubscribeRunParams; result: UnsubscribeRunResult };
  "bridge.toolResult": { params: ToolResultParams; result: Acknowledged };
  "bridge.approval": { params: ApprovalParams; result: Acknowledged };
  "bridge.runInterrupt": { params: RunInterruptParams; result: Acknowledged };
  "bridge.runSteer": { params: RunSteerParams; result: Steered };
  "bridge.status": { params: StatusParams; result: Status };
  "rpc.discover": { params: DiscoverParams; result: DiscoverResult };
}
