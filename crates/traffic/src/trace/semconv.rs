//! The attribute names clawbridge's spans carry, in one place, with where each comes from.
//!
//! Two vocabularies, both on every span, because the tools operators run read one or the other:
//! - the OpenTelemetry GenAI semantic conventions (`gen_ai.*`; status "Development", names as
//!   published at <https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/> and
//!   <https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/>), which Jaeger,
//!   Langfuse and the OpenTelemetry Collector's processors understand;
//! - the OpenInference conventions (<https://github.com/Arize-ai/openinference>, the
//!   `semantic_conventions` of its spec) that Arize Phoenix builds its trace tree, token counts
//!   and session view from (`openinference.span.kind`, `llm.*`, `session.id`, `input.value`).
//!
//! Names of our own are under `clawbridge.*` and `codex.*`.

// OpenTelemetry GenAI.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const GEN_AI_RESPONSE_ID: &str = "gen_ai.response.id";
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
pub const GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `error.type` (general semantic conventions), on a span that ended in an error.
pub const ERROR_TYPE: &str = "error.type";

// The GenAI operation names clawbridge's spans use.
pub const OPERATION_CHAT: &str = "chat";
pub const OPERATION_INVOKE_AGENT: &str = "invoke_agent";
pub const OPERATION_CREATE_AGENT: &str = "create_agent";
pub const OPERATION_EXECUTE_TOOL: &str = "execute_tool";
/// The provider behind Codex's Responses API.
pub const PROVIDER_OPENAI: &str = "openai";

// OpenInference.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
pub const SESSION_ID: &str = "session.id";
pub const LLM_MODEL_NAME: &str = "llm.model_name";
pub const LLM_PROVIDER: &str = "llm.provider";
pub const LLM_SYSTEM: &str = "llm.system";
pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
pub const LLM_TOKEN_COUNT_TOTAL: &str = "llm.token_count.total";
pub const LLM_TOKEN_COUNT_CACHE_READ: &str = "llm.token_count.prompt_details.cache_read";
pub const LLM_TOKEN_COUNT_REASONING: &str = "llm.token_count.completion_details.reasoning";
pub const TOOL_NAME: &str = "tool.name";
pub const INPUT_VALUE: &str = "input.value";
pub const INPUT_MIME_TYPE: &str = "input.mime_type";
pub const OUTPUT_VALUE: &str = "output.value";
pub const OUTPUT_MIME_TYPE: &str = "output.mime_type";

// OpenInference span kinds.
pub const KIND_AGENT: &str = "AGENT";
pub const KIND_LLM: &str = "LLM";
pub const KIND_TOOL: &str = "TOOL";
pub const KIND_CHAIN: &str = "CHAIN";

// clawbridge's own.
pub const TURN_ID: &str = "codex.turn.id";
pub const TURN_STATUS: &str = "codex.turn.status";
pub const TURN_STEERS: &str = "codex.turn.steers";
pub const TURN_MODEL_CALLS: &str = "codex.turn.model_calls";
pub const TURN_COMPACTIONS: &str = "codex.turn.compactions";
pub const ITEM_TYPE: &str = "codex.item.type";
pub const ITEM_STATUS: &str = "codex.item.status";
pub const APPROVAL_DECISION: &str = "codex.approval.decision";
pub const SERVER_REQUEST_METHOD: &str = "codex.server_request.method";
pub const TIME_TO_FIRST_TOKEN_MS: &str = "clawbridge.time_to_first_token_ms";
pub const CACHE_VERDICT: &str = "clawbridge.cache.verdict";
pub const HTTP_STATUS: &str = "http.response.status_code";
pub const MEMBER: &str = "clawbridge.member";
pub const MEMBER_REASON: &str = "clawbridge.member.reason";
pub const CLIENT: &str = "clawbridge.client";
/// The OpenClaw agent a turn's workspace names (`workspace-<agent>`).
pub const OPENCLAW_AGENT: &str = "openclaw.agent";
/// The folder of a turn's workspace (its `cwd`'s last component).
pub const OPENCLAW_WORKSPACE: &str = "openclaw.workspace";
