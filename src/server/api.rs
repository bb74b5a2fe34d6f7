//! The bridge API described: an [OpenRPC](https://spec.open-rpc.org) 1.3 document of every
//! method, built from the Rust types the methods parse and answer with (schemars), so the
//! description cannot drift from the code. `rpc.discover` serves it, `clawbridge schema openrpc`
//! prints it, `docs/openrpc.json` is the committed copy (drift-checked by `scripts/test`), and the
//! TypeScript client's types are generated from it.
//!
//! Params are by name (an object) or, for the one-object methods, that object as the only
//! positional param: both are what the handlers accept. `bridge.subscribeRun` is a jsonrpsee
//! subscription: its `bridge.runEvent` notifications are described under `x-notification`.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::app::context::ContextReport;
use crate::app::events::RunEvent;
use crate::codex::protocol::params::CodexParams;
use crate::config::{PromptMode, RunDocument};

/// `bridge.prompt`'s answer.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptAnswer {
    /// Stable sections and Project Context (above the cache boundary).
    pub stable_prefix: String,
    /// Channel- and session-volatile sections (below it).
    pub dynamic_suffix: String,
    /// The whole prompt as a harness receives it.
    pub text: String,
}

/// `bridge.runStart`'s answer, once the thread is open.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    /// The handle for `bridge.subscribeRun` and `bridge.runInterrupt`.
    pub run_id: String,
    pub thread_id: String,
}

/// The answer of the methods that only acknowledge.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Acknowledged {
    pub ok: bool,
}

/// An approval decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Accept,
    Decline,
}

/// `bridge.toolResult`'s params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultParams {
    pub call_id: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub content_items: Option<Vec<Value>>,
    /// Default true.
    #[serde(default)]
    pub success: Option<bool>,
}

impl ToolResultParams {
    /// Codex's `{contentItems, success}` for this result.
    pub fn answer(&self) -> Result<Value, crate::codex::client::handler::ToolAnswerError> {
        let mut answer = Map::new();
        if let Some(text) = &self.text {
            answer.insert("text".into(), Value::String(text.clone()));
        }
        if let Some(items) = &self.content_items {
            answer.insert("contentItems".into(), Value::Array(items.clone()));
        }
        answer.insert("success".into(), Value::Bool(self.success.unwrap_or(true)));
        crate::codex::client::handler::tool_answer(&Value::Object(answer))
    }
}

/// `bridge.approval`'s params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalParams {
    pub approval_id: String,
    pub decision: Decision,
}

/// A run named by its id: `"run-…"` or `{"runId": "run-…"}` (`bridge.runInterrupt`,
/// `bridge.subscribeRun`).
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "Value")]
pub struct RunRef(String);

impl TryFrom<Value> for RunRef {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        match value {
            Value::String(id) => Ok(RunRef(id)),
            Value::Object(mut map) => match map.remove("runId") {
                Some(Value::String(id)) => Ok(RunRef(id)),
                _ => Err("field `runId`: required, a run id string".to_string()),
            },
            _ => Err("field `runId`: a run id, or {\"runId\": ...}".to_string()),
        }
    }
}

impl RunRef {
    pub fn into_id(self) -> String {
        self.0
    }
}

/// The options `bridge.context` and `bridge.prompt` take beside the run document.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewOptions {
    /// `bridge.context`: per-skill and per-tool sizes.
    #[serde(default)]
    pub detail: Option<bool>,
    /// `bridge.prompt`: override the prompt mode.
    #[serde(default)]
    pub mode: Option<PromptMode>,
    /// `bridge.prompt`: false drops the cache-boundary marker.
    #[serde(default)]
    pub cache_boundary: Option<bool>,
}

/// The Codex process as `bridge.status` reports it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodexStatus {
    /// `missing` (no Codex CLI; `error` says how to install one), `notStarted`, `running`,
    /// `exited`.
    pub state: CodexState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<Option<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_threads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_threads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_requests: Option<usize>,
    /// Threads the running app-server opened so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_opened: Option<usize>,
    /// App-servers recycled so far (`--recycle-after-threads`, `--recycle-rss-mb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recycled: Option<usize>,
}

/// See [`CodexStatus::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CodexState {
    Missing,
    NotStarted,
    Running,
    Exited,
}

/// One run as `bridge.status` lists it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub run_id: String,
    pub session_key: String,
    pub thread_id: Option<String>,
    /// `running` or `ended`.
    pub state: String,
    /// The client that started it (`operator` for the service's own token).
    pub client: String,
}

/// `bridge.status`'s answer.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Status {
    pub codex: CodexStatus,
    /// Sessions bound to a Codex thread.
    pub sessions: usize,
    pub runs: Vec<RunSummary>,
    pub pending_tool_calls: usize,
    pub pending_approvals: usize,
}

struct Param {
    name: &'static str,
    summary: &'static str,
    required: bool,
    schema: Value,
}

fn param<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    name: &'static str,
    required: bool,
    summary: &'static str,
) -> Param {
    Param {
        name,
        summary,
        required,
        schema: generator.subschema_for::<T>().to_value(),
    }
}

fn method(
    name: &str,
    summary: &str,
    description: &str,
    params: Vec<Param>,
    result: (&str, Value),
) -> Value {
    let params: Vec<Value> = params
        .into_iter()
        .map(|param| {
            json!({"name": param.name, "summary": param.summary, "required": param.required, "schema": param.schema})
        })
        .collect();
    json!({
        "name": name,
        "summary": summary,
        "description": description,
        "paramStructure": "either",
        "params": params,
        "result": {"name": result.0, "schema": result.1},
        "errors": [{"$ref": "#/components/errors/InvalidParams"}],
    })
}

/// The OpenRPC document of the bridge API (keys sorted when serialized).
pub fn openrpc() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.definitions_path = "/components/schemas".into())
        .into_generator();
    let g = &mut generator;
    let run_params = |g: &mut SchemaGenerator, with_mode: bool| {
        let mut params = vec![
            param::<RunDocument>(
                g,
                "run",
                true,
                "The run document (docs/run-document.schema.json).",
            ),
            param::<bool>(
                g,
                "detail",
                false,
                "`bridge.context`: add per-skill and per-tool sizes.",
            ),
        ];
        if with_mode {
            params.push(param::<PromptMode>(
                g,
                "mode",
                false,
                "Override the prompt mode.",
            ));
            params.push(param::<bool>(
                g,
                "cacheBoundary",
                false,
                "false: drop the cache-boundary marker (providers without boundary support).",
            ));
        }
        params
    };
    let methods = vec![
        method(
            "bridge.params",
            "The exact Codex thread/turn params for a run (what `clawbridge params` prints).",
            "A preview: a `once` truncation notice is shown as the next turn would show it and nothing is recorded. Also accepts the run document itself as the only param.",
            run_params(g, false),
            ("params", g.subschema_for::<CodexParams>().to_value()),
        ),
        method(
            "bridge.context",
            "The `/context list` report of a run.",
            "Per bootstrap file its raw and injected size, truncation and surface; skills and tool sizes.",
            run_params(g, false),
            ("report", g.subschema_for::<ContextReport>().to_value()),
        ),
        method(
            "bridge.prompt",
            "OpenClaw's own system prompt for the run (non-Codex harnesses).",
            "The stable prefix, the dynamic suffix and the joined text.",
            run_params(g, true),
            ("prompt", g.subschema_for::<PromptAnswer>().to_value()),
        ),
        method(
            "bridge.runStart",
            "Start a run: the session's thread (bound, resumed or new) and one turn.",
            "Answers once the thread is open; subscribe with the runId to see the turn. Fails with 4100 when no Codex CLI is installed.",
            vec![param::<RunDocument>(g, "run", true, "The run document.")],
            ("started", g.subschema_for::<RunStarted>().to_value()),
        ),
        {
            let mut subscribe = method(
                "bridge.subscribeRun",
                "Subscribe to a run's events, replayed from its start.",
                "A subscription (jsonrpsee): the result is the subscription id; the events arrive as `bridge.runEvent` notifications whose params are `{subscription, result}` with one event as `result`, the last one `turnEnd`.",
                vec![param::<String>(g, "runId", true, "From bridge.runStart.")],
                ("subscription", json!({"type": ["string", "integer"]})),
            );
            subscribe["x-notification"] = json!({
                "method": "bridge.runEvent",
                "result": g.subschema_for::<RunEvent>().to_value(),
            });
            subscribe
        },
        method(
            "bridge.unsubscribeRun",
            "End a subscription.",
            "",
            vec![param::<String>(g, "subscription", true, "The subscription id.")],
            ("unsubscribed", json!({"type": "boolean"})),
        ),
        method(
            "bridge.toolResult",
            "Answer a `toolCall` event.",
            "Unanswered calls fail softly after the server's --answer-timeout.",
            vec![
                param::<String>(g, "callId", true, "The event's callId."),
                param::<String>(g, "text", false, "The result as text (or contentItems)."),
                param::<Vec<Value>>(g, "contentItems", false, "Codex content items (`inputText`, `inputImage`)."),
                param::<bool>(g, "success", false, "Whether the tool succeeded (default true)."),
            ],
            ("ack", g.subschema_for::<Acknowledged>().to_value()),
        ),
        method(
            "bridge.approval",
            "Answer an `approvalRequest` event.",
            "Unanswered approvals are declined.",
            vec![
                param::<String>(g, "approvalId", true, "The event's approvalId."),
                param::<Decision>(g, "decision", true, "accept or decline."),
            ],
            ("ack", g.subschema_for::<Acknowledged>().to_value()),
        ),
        method(
            "bridge.runInterrupt",
            "Interrupt a run's turn (`turn/interrupt`).",
            "",
            vec![param::<String>(g, "runId", true, "From bridge.runStart.")],
            ("ack", g.subschema_for::<Acknowledged>().to_value()),
        ),
        method(
            "bridge.status",
            "The service's state: Codex, sessions, runs, pending answers.",
            "",
            vec![],
            ("status", g.subschema_for::<Status>().to_value()),
        ),
        method(
            "rpc.discover",
            "This document.",
            "",
            vec![],
            ("openrpc", json!({"type": "object", "description": "An OpenRPC 1.3 document."})),
        ),
    ];
    let schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    json!({
        "openrpc": "1.3.2",
        "info": {
            "title": "clawbridge bridge API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "JSON-RPC 2.0 over HTTP and WebSocket (`clawbridge serve`). Every request carries `Authorization: Bearer <token>` (the token is in `<state-dir>/token`); browsers' Origin and foreign Host headers are refused.",
        },
        "methods": methods,
        "components": {
            "schemas": schemas,
            "errors": {
                "InvalidParams": {"code": -32602, "message": "invalid params (the message names the field)"},
                "OutsideRoots": {"code": 4001, "message": "a path outside the workspace roots"},
                "Forbidden": {"code": 4003, "message": "not allowed by the operator (sandbox above the ceiling, another session's thread)"},
                "NotFound": {"code": 4004, "message": "unknown run, call or approval"},
                "NotACodexRun": {"code": 4009, "message": "not a Codex run"},
                "Timeout": {"code": 4080, "message": "the request's file I/O or parsing took too long"},
                "Busy": {"code": 4290, "message": "too many runs in progress (--max-runs); try again when one ends"},
                "CodexUnavailable": {"code": 4100, "message": "Codex could not be started, none is installed, or serve is shutting down"},
                "ThreadFailed": {"code": 4200, "message": "Codex refused the thread"},
            },
        },
    })
}
