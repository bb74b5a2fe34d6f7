//! The bridge API, declared once: every `bridge.*` method is a type implementing
//! [`BridgeMethod`] (its name, its params type, its result type, its description), and
//! `methods.rs` holds the one table that registers each with its handler and lists it in the
//! [OpenRPC](https://spec.open-rpc.org) 1.3 document built here from the same types (schemars),
//! so neither the handlers nor the description can drift from the other. `rpc.discover` serves
//! the document, `clawbridge schema openrpc` prints it, `docs/openrpc.json` is the committed copy
//! (drift-checked by `scripts/test`), and the TypeScript client's types, the method table
//! included, are generated from it.
//!
//! Params are by name (an object) or by position (an array in the order the document lists
//! them; for the one-object methods, that object as the only positional param): both are what
//! the handlers accept. `bridge.subscribeRun` is a jsonrpsee subscription: its `bridge.runEvent`
//! notifications are described under `x-notification`.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::app::context::ContextReport;
use crate::app::events::RunEvent;
use crate::codex::protocol::params::CodexParams;
use crate::config::{PromptMode, RunDocument};

/// One method of the bridge API: what it is called, what it takes, what it answers.
pub trait BridgeMethod {
    const NAME: &'static str;
    const SUMMARY: &'static str;
    const DESCRIPTION: &'static str;
    /// The params, by name; each field is one OpenRPC param (its doc comment the summary).
    type Params: DeserializeOwned + JsonSchema + Send + 'static;
    /// The answer.
    type Result: Serialize + JsonSchema + Clone + Send + 'static;
    /// The OpenRPC name of the result.
    const RESULT: &'static str;

    /// Whatever the method's description carries beside the usual fields.
    fn extend(_description: &mut Map<String, Value>, _generator: &mut SchemaGenerator) {}
}

/// Declares a method type and its [`BridgeMethod`] impl.
macro_rules! bridge_method {
    ($(#[$doc:meta])* $ty:ident = $name:literal, ($params:ty) -> $result_name:literal: $result:ty,
     $summary:literal, $description:literal $(, extend: $extend:path)?) => {
        $(#[$doc])*
        pub enum $ty {}

        impl BridgeMethod for $ty {
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;
            const DESCRIPTION: &'static str = $description;
            type Params = $params;
            type Result = $result;
            const RESULT: &'static str = $result_name;
            $(
                fn extend(description: &mut Map<String, Value>, generator: &mut SchemaGenerator) {
                    $extend(description, generator)
                }
            )?
        }
    };
}

bridge_method!(
    /// `bridge.params`.
    ParamsMethod = "bridge.params", (RunRequest) -> "params": CodexParams,
    "The exact Codex thread/turn params for a run (what `clawbridge params` prints).",
    "A preview: a `once` truncation notice is shown as the next turn would show it and nothing is recorded. Also accepts the run document itself as the only param."
);
bridge_method!(
    /// `bridge.context`.
    ContextMethod = "bridge.context", (RunRequest) -> "report": ContextReport,
    "The `/context list` report of a run.",
    "Per bootstrap file its raw and injected size, truncation and surface; skills and tool sizes."
);
bridge_method!(
    /// `bridge.prompt`.
    PromptMethod = "bridge.prompt", (PromptRequest) -> "prompt": PromptAnswer,
    "OpenClaw's own system prompt for the run (non-Codex harnesses).",
    "The stable prefix, the dynamic suffix and the joined text."
);
bridge_method!(
    /// `bridge.runStart`.
    RunStartMethod = "bridge.runStart", (RunStartRequest) -> "started": RunStarted,
    "Start a run: the session's thread (bound, resumed or new) and one turn.",
    "Answers once the thread is open; subscribe with the runId to see the turn. Fails with 4100 when no Codex CLI is installed."
);
bridge_method!(
    /// `bridge.subscribeRun` (a subscription; see [`BridgeMethod::extend`] for its events).
    SubscribeRunMethod = "bridge.subscribeRun", (RunRef) -> "subscription": SubscriptionId,
    "Subscribe to a run's events, replayed from its start.",
    "A subscription (jsonrpsee): the result is the subscription id; the events arrive as `bridge.runEvent` notifications whose params are `{subscription, result}` with one event as `result`, the last one `turnEnd`.",
    extend: describe_run_events
);
bridge_method!(
    /// `bridge.unsubscribeRun` (answered by jsonrpsee for the subscription).
    UnsubscribeRunMethod = "bridge.unsubscribeRun", (UnsubscribeRequest) -> "unsubscribed": bool,
    "End a subscription.",
    ""
);
bridge_method!(
    /// `bridge.toolResult`.
    ToolResultMethod = "bridge.toolResult", (ToolResultParams) -> "ack": Acknowledged,
    "Answer a `toolCall` event.",
    "Unanswered calls fail softly after the server's --answer-timeout."
);
bridge_method!(
    /// `bridge.approval`.
    ApprovalMethod = "bridge.approval", (ApprovalParams) -> "ack": Acknowledged,
    "Answer an `approvalRequest` event.",
    "Unanswered approvals are declined."
);
bridge_method!(
    /// `bridge.runInterrupt`.
    RunInterruptMethod = "bridge.runInterrupt", (RunRef) -> "ack": Acknowledged,
    "Interrupt a run's turn (`turn/interrupt`).",
    ""
);
bridge_method!(
    /// `bridge.runSteer`.
    RunSteerMethod = "bridge.runSteer", (RunSteerParams) -> "steered": Steered,
    "Add user input to a run's running turn (`turn/steer`).",
    "The run's turn goes on with the input; its events keep arriving on the run's subscription. Fails with 4004 when the run has no turn in progress, 4200 when Codex refuses (the turn just ended, say) and 4009 when the app-server's Codex version has no turn/steer."
);
bridge_method!(
    /// `bridge.status`.
    StatusMethod = "bridge.status", (NoParams) -> "status": Status,
    "The service's state: Codex, sessions, runs, pending answers.",
    ""
);
bridge_method!(
    /// `rpc.discover`.
    DiscoverMethod = "rpc.discover", (NoParams) -> "openrpc": OpenRpcDocument,
    "This document.",
    ""
);

/// The notification a subscription's events arrive in.
pub const RUN_EVENT_NOTIFICATION: &str = "bridge.runEvent";

/// How `bridge.subscribeRun` is described beyond params and result: its notifications.
pub fn describe_run_events(description: &mut Map<String, Value>, generator: &mut SchemaGenerator) {
    description.insert(
        "x-notification".into(),
        json!({
            "method": RUN_EVENT_NOTIFICATION,
            "result": generator.subschema_for::<RunEvent>().to_value(),
        }),
    );
}

/// A run-document method's params (`bridge.params`, `bridge.context`): the document under `run`,
/// or the document itself as the only param.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRequest {
    /// The run document (docs/run-document.schema.json).
    #[schemars(with = "RunDocument")]
    pub run: Value,
    /// `bridge.context`: add per-skill and per-tool sizes.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub detail: Option<bool>,
}

/// `bridge.prompt`'s params: a [`RunRequest`] and how to render.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The run document (docs/run-document.schema.json).
    #[schemars(with = "RunDocument")]
    pub run: Value,
    /// Override the prompt mode.
    #[serde(default)]
    #[schemars(with = "PromptMode")]
    pub mode: Option<PromptMode>,
    /// false: drop the cache-boundary marker (providers without boundary support).
    #[serde(default)]
    #[schemars(with = "bool")]
    pub cache_boundary: Option<bool>,
}

/// What `bridge.runStart` does when the session already has a run in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// Wait for it, then run (the default).
    #[default]
    Queue,
    /// Add this run's message to its running turn (`turn/steer`) instead; the answer names the
    /// running run, and `steered` is true. With no turn running, the run starts as usual.
    Steer,
}

/// `bridge.runSteer`'s params.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSteerParams {
    /// From bridge.runStart.
    pub run_id: String,
    /// The user's text, added to the running turn.
    pub input: String,
}

/// `bridge.runSteer`'s answer.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Steered {
    /// The turn the input went to.
    pub turn_id: String,
}

/// `bridge.runStart`'s params.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStartRequest {
    /// The run document.
    #[schemars(with = "RunDocument")]
    pub run: Value,
    /// Start a new thread even if the session has one (its binding is replaced): how a session
    /// whose app-server was marked dead goes on elsewhere.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub new_thread: Option<bool>,
    /// With a run of the session in progress: `queue` (wait, the default) or `steer` (add this
    /// run's message to its running turn).
    #[serde(default)]
    #[schemars(with = "QueueMode")]
    pub queue: Option<QueueMode>,
}

/// A request that carries a run document: under `run`, or (when the params are the document
/// itself, with its `workspace`) as the whole params.
pub trait CarriesRun: DeserializeOwned + Default {
    fn with_document(run: Value) -> Self;
    fn document(&self) -> &Value;
}

macro_rules! carries_run {
    ($($ty:ty),*) => {$(
        impl CarriesRun for $ty {
            #[allow(clippy::needless_update)] // the same for a request that is only `run`
            fn with_document(run: Value) -> Self {
                Self { run, ..Self::default() }
            }
            fn document(&self) -> &Value {
                &self.run
            }
        }
    )*};
}
carries_run!(RunRequest, PromptRequest, RunStartRequest);

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
    /// `queue: "steer"` only: true when the message went to the session's running turn, whose
    /// run `runId` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steered: Option<bool>,
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
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultParams {
    /// The event's callId.
    pub call_id: String,
    /// The result as text (or contentItems).
    #[serde(default)]
    #[schemars(with = "String")]
    pub text: Option<String>,
    /// Codex content items (`inputText`, `inputImage`).
    #[serde(default)]
    #[schemars(with = "Vec<Value>")]
    pub content_items: Option<Vec<Value>>,
    /// Whether the tool succeeded (default true).
    #[serde(default)]
    #[schemars(with = "bool")]
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
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalParams {
    /// The event's approvalId.
    pub approval_id: String,
    /// accept or decline.
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

impl JsonSchema for RunRef {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RunRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": {"runId": {"type": "string", "description": "From bridge.runStart."}},
            "required": ["runId"],
        })
    }
}

impl RunRef {
    pub fn into_id(self) -> String {
        self.0
    }
}

/// `bridge.unsubscribeRun`'s params: described here, read by jsonrpsee.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[allow(dead_code)] // jsonrpsee reads the subscription id itself
pub struct UnsubscribeRequest {
    /// The subscription id.
    pub subscription: String,
}

/// The params of a method that takes none (anything given is ignored).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoParams;

impl<'de> Deserialize<'de> for NoParams {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(NoParams)
    }
}

impl JsonSchema for NoParams {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoParams".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "properties": {}})
    }
}

/// A subscription's id (jsonrpsee's: a string or a number). jsonrpsee answers with it; this
/// type only describes it, so it has no values.
#[derive(Clone, Debug)]
pub enum SubscriptionId {}

impl Serialize for SubscriptionId {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        match *self {}
    }
}

impl JsonSchema for SubscriptionId {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SubscriptionId".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": ["string", "integer"]})
    }
}

/// The OpenRPC document itself (`rpc.discover`).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct OpenRpcDocument(pub Value);

impl JsonSchema for OpenRpcDocument {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OpenRpcDocument".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "description": "An OpenRPC 1.3 document."})
    }
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
    /// Every app-server of the pool (`--app-servers`, `--app-server`).
    #[serde(default)]
    pub members: Vec<crate::codex::client::pool::MemberStatus>,
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
    /// The run's bootstrap files: raw and injected characters and where each went (the counts
    /// OpenClaw keeps for diagnostics such as `/status`).
    #[serde(default)]
    pub bootstrap: Vec<BootstrapCount>,
    /// The latest `thread/tokenUsage/updated` of its turn, as Codex sent it (`last`, `total`,
    /// `modelContextWindow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<Value>,
    /// `thread/compacted` seen during its turn.
    #[serde(default)]
    pub compactions: u64,
    /// The input stayed above the context window after two compactions or more (also logged).
    #[serde(default)]
    pub context_alarm: bool,
}

/// One bootstrap file of a run, as `bridge.status` counts it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapCount {
    pub name: String,
    pub raw_chars: usize,
    pub injected_chars: usize,
    pub truncated: bool,
    /// Where it went (`thread developer instructions`, `turn input`, `native to Codex`,
    /// `omitted`...).
    pub surface: String,
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

/// One method's OpenRPC description, from its types: each field of its params type is a param,
/// in the order the handler reads a positional form, its doc comment the summary.
pub fn describe<M: BridgeMethod>(generator: &mut SchemaGenerator) -> Value {
    let schema = M::Params::json_schema(generator).to_value();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let declared = crate::support::json::struct_fields::<M::Params>();
    let mut names: Vec<&str> = declared
        .iter()
        .copied()
        .filter(|name| properties.contains_key(*name))
        .collect();
    names.extend(
        properties
            .keys()
            .map(String::as_str)
            .filter(|name| !declared.contains(name)),
    );
    let params: Vec<Value> = names
        .into_iter()
        .filter_map(|name| {
            let mut schema = properties.get(name)?.clone();
            let object = schema.as_object_mut()?;
            let summary = object
                .remove("description")
                .unwrap_or_else(|| Value::String(String::new()));
            // An optional param's absence is its default; schemars' `null` would contradict the
            // param's type.
            if object.get("default") == Some(&Value::Null) {
                object.remove("default");
            }
            Some(json!({
                "name": name,
                "summary": summary,
                "required": required.contains(&name),
                "schema": schema,
            }))
        })
        .collect();
    let mut description = Map::new();
    description.insert("name".into(), M::NAME.into());
    description.insert("summary".into(), M::SUMMARY.into());
    description.insert("description".into(), M::DESCRIPTION.into());
    description.insert("paramStructure".into(), "either".into());
    description.insert("params".into(), Value::Array(params));
    description.insert(
        "result".into(),
        json!({"name": M::RESULT, "schema": generator.subschema_for::<M::Result>().to_value()}),
    );
    description.insert(
        "errors".into(),
        json!([{"$ref": "#/components/errors/InvalidParams"}]),
    );
    M::extend(&mut description, generator);
    Value::Object(description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_s_success_defaults_to_true_and_must_be_a_boolean() {
        let answer = |params: Value| {
            serde_json::from_value::<ToolResultParams>(params)
                .map_err(|error| error.to_string())
                .and_then(|params| params.answer().map_err(|error| error.to_string()))
        };
        assert_eq!(
            answer(json!({"callId": "c", "text": "done"})).expect("ok")["success"],
            true
        );
        assert_eq!(
            answer(json!({"callId": "c", "text": "no", "success": false})).expect("ok")["success"],
            false
        );
        assert!(answer(json!({"callId": "c", "text": "x", "success": "yes"})).is_err());
    }

    #[test]
    fn params_are_described_in_the_order_a_positional_call_takes_them() {
        let mut generator = SchemaGenerator::default();
        let described = describe::<ToolResultMethod>(&mut generator);
        let names: Vec<&str> = described["params"]
            .as_array()
            .expect("params")
            .iter()
            .filter_map(|param| param["name"].as_str())
            .collect();
        assert_eq!(names, ["callId", "text", "contentItems", "success"]);
        let positional: ToolResultParams =
            serde_json::from_value(json!(["c", "done", null, false])).expect("positional");
        assert_eq!(positional.text.as_deref(), Some("done"));
        assert_eq!(positional.success, Some(false));
    }
}
