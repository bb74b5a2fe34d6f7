//! The span book: a conversation's messages become OpenTelemetry spans.
//!
//! One state machine for both ways of tracing, so a live trace and one exported afterwards
//! from the files are the same tree: the app-server's observer hands it every JSON-RPC message
//! it sees (off the forwarding path) and the capture writer every model call; `export-otel`
//! reads the same messages and model calls back from a transcript folder.
//!
//! The tree, one trace per turn (a turn is what a person sent; a thread's turns are one session
//! through `session.id` and `gen_ai.conversation.id`, never one endless span):
//! - `invoke_agent <client>`: the turn, from `turn/start` to `turn/completed`, with its status,
//!   steers, model calls and the tokens of its model calls added up;
//!   - `chat <model>`: each model call (from the capture, with time to first token; without a
//!     capture, from Codex's `thread/tokenUsage/updated`, one per update);
//!   - `execute_tool <tool>`: each tool item Codex ran or had the client run, with its status;
//!   - `approval <kind>`: each approval Codex asked the client for, with the decision.
//! - `create_agent <client>` (a thread's start) and `codex thread/resume`: a short trace each.
//! - `member restart`: an app-server of the endpoint's pool that was started again.
//!
//! Bounded: threads followed ([`MAX_THREADS`], the oldest forgotten, its open turn ended), requests
//! waiting for an answer ([`MAX_PENDING`]), open tool spans per turn ([`MAX_OPEN_TOOLS`]), and each
//! content value ([`MAX_CONTENT_CHARS`]). Content (prompts, answers, tool arguments and output)
//! is only put on spans under [`ContentPolicy::Full`], redacted as transcripts are.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use serde_json::Value;

use super::semconv as attr;
use clawbridge_codex::protocol::inbound::{ThreadOpenedAnswer, TurnStartedAnswer};
use clawbridge_codex::protocol::observed::{
    ClientAnswerView, Observed, ObservedError, ObservedItem, ObservedParams,
};
use clawbridge_codex::protocol::table::name as method;

/// Threads whose turns are followed at once.
pub const MAX_THREADS: usize = 1024;
/// Requests (either way) waiting for their answer.
pub const MAX_PENDING: usize = 4096;
/// Tool and approval spans open in one turn.
pub const MAX_OPEN_TOOLS: usize = 256;
/// Characters of one content value on a span (prompts, answers, tool output).
pub const MAX_CONTENT_CHARS: usize = 16 * 1024;

/// What of the conversation's content goes on spans (`--otel-content`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentPolicy {
    /// Names, ids, statuses and timings only: no model, tool or token counts beyond the span tree.
    Off,
    /// Also models, token counts, tool names and decisions; no text anyone wrote (the default).
    #[default]
    Metadata,
    /// Also the turn's input and answer, model calls' input and output, tool arguments and
    /// output, redacted as transcripts are and cut to [`MAX_CONTENT_CHARS`].
    Full,
}

impl std::str::FromStr for ContentPolicy {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "off" => Ok(Self::Off),
            "metadata" => Ok(Self::Metadata),
            "full" => Ok(Self::Full),
            other => Err(format!(
                "`{other}` is not a content policy (off, metadata or full)"
            )),
        }
    }
}

/// Who sent a message: the client (OpenClaw) or Codex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Codex,
}

/// One model call as the capture saw it (documents already redacted).
#[derive(Clone, Debug)]
pub struct ModelCall {
    pub thread: String,
    /// Codex's turn id, empty when the request did not say.
    pub turn: String,
    /// The request body (`model`, `input`).
    pub request: Value,
    /// The response document the capture files (`usage`, `timings`, `status`, `output`).
    pub response: Value,
    /// When the request was seen going out, if known (live); else it is placed by its end.
    pub started: Option<SystemTime>,
}

/// A request waiting for its answer.
struct Pending {
    method: String,
    at: SystemTime,
    thread: Option<String>,
}

/// An open tool or approval span.
struct OpenTool {
    span: Span,
    context: SpanContext,
}

/// The open turn of a thread.
struct Turn {
    span: Span,
    context: SpanContext,
    id: Option<String>,
    steers: i64,
    model_calls: i64,
    compactions: i64,
    /// Token sums of the turn's model calls (input, cached, output, reasoning).
    tokens: [i64; 4],
    /// When the turn last did something (a model call without a capture starts here).
    mark: SystemTime,
    tools: HashMap<String, OpenTool>,
    answer: String,
}

#[derive(Default)]
struct Thread {
    /// The agent its turns are named by, when the client that opened it told the book
    /// (`serve` knows each run's agent from its session key); else the connection's client.
    agent: Option<String>,
    model: Option<String>,
    /// The folder of its workspace (its `cwd`, from its start or a turn), without the path.
    workspace: Option<String>,
    turn: Option<Turn>,
    /// The last turn that ended: a model call the capture files late still joins its trace.
    last: Option<(Option<String>, SpanContext)>,
}

/// The OpenClaw agent a workspace is, by OpenClaw's own layout: a configured agent's
/// workspace is `workspace-<agent id>`. Any other folder names no agent (`None`): the default
/// agent's `workspace`, or a folder an operator chose, could be any agent's.
pub fn agent_of_workspace(workspace: &str) -> Option<String> {
    let folder = std::path::Path::new(workspace).file_name()?.to_str()?;
    folder
        .strip_prefix("workspace-")
        .filter(|agent| !agent.is_empty())
        .map(|agent| {
            clawbridge_support::text::printable(agent)
                .chars()
                .take(64)
                .collect()
        })
}

/// The last component of a workspace path, as spans carry it (no machine path).
fn workspace_folder(cwd: &str) -> Option<String> {
    let folder = std::path::Path::new(cwd).file_name()?.to_str()?;
    Some(
        clawbridge_support::text::printable(folder)
            .chars()
            .take(128)
            .collect(),
    )
}

/// Connections whose client names the book keeps at most.
const MAX_CLIENTS: usize = 4096;

/// A client's name as spans carry it: secrets redacted, no control characters, 64 characters.
fn client_name(client: &str) -> String {
    clawbridge_support::text::printable(&clawbridge_support::redact::redact_text(client))
        .chars()
        .take(64)
        .collect()
}

/// The state machine (see the module docs).
pub struct SpanBook {
    tracer: SdkTracer,
    content: ContentPolicy,
    /// Model call spans come from the capture; otherwise from Codex's token usage updates.
    captured_calls: bool,
    /// The name turn spans carry when their connection named no client.
    client: String,
    /// Each connection's client, from its `initialize` (a turn carries its own connection's;
    /// at most [`MAX_CLIENTS`], the oldest forgotten first).
    clients: HashMap<usize, String>,
    pending: HashMap<(usize, String), Pending>,
    pending_order: VecDeque<(usize, String)>,
    threads: HashMap<String, Thread>,
    order: VecDeque<String>,
    /// Live: the secret the turn spans' ids are derived from, shared with the forwarder that
    /// passes them on to Codex ([`super::context`]).
    salt: Option<super::context::Salt>,
}

fn text_of(value: &Value) -> Option<&str> {
    value.as_str().filter(|text| !text.is_empty())
}

fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// A content value as a span carries it: redacted, control characters escaped, cut.
fn clip(text: &str) -> String {
    let redacted = clawbridge_support::redact::redact_text(text);
    let mut out: String = redacted.chars().take(MAX_CONTENT_CHARS).collect();
    if redacted.chars().nth(MAX_CONTENT_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// A JSON value as content (strings as they are, anything else as compact JSON).
fn clip_value(value: &Value) -> String {
    match value {
        Value::String(text) => clip(text),
        other => clip(&other.to_string()),
    }
}

/// The output texts of a Responses response document.
fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter_map(|part| part["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tool a tool item names, or `None` for an item that is no tool call.
fn tool_of(item: &ObservedItem) -> Option<(String, &'static str)> {
    let named = |name: &Option<String>| name.clone();
    match item.kind.as_deref()? {
        "commandExecution" => Some(("shell".to_string(), "function")),
        "fileChange" => Some(("apply_patch".to_string(), "function")),
        "webSearch" => Some(("web_search".to_string(), "extension")),
        "mcpToolCall" => Some((
            match (named(&item.server), named(&item.tool)) {
                (Some(server), Some(tool)) => format!("{server}.{tool}"),
                (None, Some(tool)) => tool,
                _ => "mcp".to_string(),
            },
            "extension",
        )),
        "dynamicToolCall" => Some((
            named(&item.tool).unwrap_or_else(|| "tool".to_string()),
            "function",
        )),
        _ => None,
    }
}

/// An error's message as a span's status carries it (`error` when it gave none).
fn error_text(error: &ObservedError) -> String {
    error
        .message
        .as_ref()
        .map(clip_value)
        .unwrap_or_else(|| "error".to_string())
}

impl SpanBook {
    /// A book writing to `tracer`; `captured_calls` when model calls will be handed in from a
    /// capture ([`SpanBook::model_call`]).
    pub fn new(tracer: SdkTracer, content: ContentPolicy, captured_calls: bool) -> Self {
        Self {
            tracer,
            content,
            captured_calls,
            client: "codex-client".to_string(),
            clients: HashMap::new(),
            pending: HashMap::new(),
            pending_order: VecDeque::new(),
            threads: HashMap::new(),
            order: VecDeque::new(),
            salt: None,
        }
    }

    /// Derive each turn span's ids from `salt`, as the forwarder does for the `trace` it puts
    /// on the `turn/start` it sends Codex.
    pub fn set_salt(&mut self, salt: super::context::Salt) {
        self.salt = Some(salt);
    }

    /// The agent whose turns thread `thread_id` carries from now on (a client that knows it
    /// better than its `initialize` says: `serve` runs many agents' turns on one connection).
    pub fn name_thread(&mut self, thread_id: &str, agent: &str, at: SystemTime) {
        self.thread(thread_id, at).agent = Some(client_name(agent));
    }

    /// The client of connection `stream` (its `initialize`), else the book's.
    fn client_of(&self, stream: usize) -> String {
        self.clients
            .get(&stream)
            .cloned()
            .unwrap_or_else(|| self.client.clone())
    }

    /// Whether model calls come from a capture from now on (`export-otel` reads threads with
    /// and without one).
    pub fn set_captured_calls(&mut self, captured: bool) {
        self.captured_calls = captured;
    }

    fn metadata(&self) -> bool {
        self.content != ContentPolicy::Off
    }

    /// The thread `id`, followed from now on; past [`MAX_THREADS`] the oldest is forgotten.
    fn thread(&mut self, id: &str, at: SystemTime) -> &mut Thread {
        if !self.threads.contains_key(id) {
            if self.threads.len() >= MAX_THREADS {
                if let Some(old) = self.order.pop_front() {
                    if let Some(mut thread) = self.threads.remove(&old) {
                        if let Some(turn) = thread.turn.take() {
                            Self::end_turn(turn, "forgotten", at, self.content);
                        }
                    }
                }
            }
            self.order.push_back(id.to_string());
        }
        self.threads.entry(id.to_string()).or_default()
    }

    fn remember(&mut self, key: (usize, String), pending: Pending) {
        if self.pending.len() >= MAX_PENDING {
            while let Some(old) = self.pending_order.pop_front() {
                if self.pending.remove(&old).is_some() {
                    break;
                }
            }
        }
        self.pending_order.push_back(key.clone());
        self.pending.insert(key, pending);
    }

    fn parent(context: &SpanContext) -> Context {
        Context::new().with_remote_span_context(context.clone())
    }

    /// One message of the conversation on connection `stream`, sent by `side`, seen `at`.
    pub fn message(&mut self, stream: usize, side: Side, message: &Value, at: SystemTime) {
        let observed = Observed::of(message);
        match (side, observed.method, observed.id) {
            (Side::Client, Some(name), Some(id)) => {
                self.client_request(stream, name, id, &observed, at)
            }
            (Side::Codex, None, Some(id)) => self.codex_answer(stream, id, &observed, at),
            (Side::Codex, Some(name), Some(id)) => {
                self.server_request(stream, name, id, &observed, at)
            }
            (Side::Client, None, Some(id)) => self.client_answer(stream, id, &observed, at),
            (Side::Codex, Some(name), None) => self.notification(name, &observed, at),
            _ => {}
        }
    }

    fn client_request(
        &mut self,
        stream: usize,
        name: &str,
        id: &Value,
        observed: &Observed<'_>,
        at: SystemTime,
    ) {
        if !matches!(
            name,
            method::INITIALIZE
                | method::TURN_START
                | method::TURN_STEER
                | method::THREAD_START
                | method::THREAD_RESUME
        ) {
            return;
        }
        let params = observed.params();
        let thread = params.thread_id.clone();
        match name {
            method::INITIALIZE => {
                if let Some(client) = params
                    .client_info
                    .name
                    .as_deref()
                    .filter(|name| !name.is_empty())
                {
                    if self.clients.len() >= MAX_CLIENTS && !self.clients.contains_key(&stream) {
                        if let Some(oldest) = self.clients.keys().min().copied() {
                            self.clients.remove(&oldest);
                        }
                    }
                    self.clients.insert(stream, client_name(client));
                }
            }
            method::TURN_START => {
                if let Some(thread) = &thread {
                    let parent = observed
                        .trace()
                        .and_then(|trace| super::context::parent_of(&trace));
                    let ours = self.salt.as_ref().map(|salt| {
                        super::context::turn_context(salt, stream, &id.to_string(), parent.as_ref())
                    });
                    let client = self.client_of(stream);
                    self.start_turn(thread, &client, &params, parent, ours, at);
                }
            }
            method::TURN_STEER => {
                if let Some(turn) = thread
                    .as_deref()
                    .and_then(|thread| self.threads.get_mut(thread))
                    .and_then(|thread| thread.turn.as_mut())
                {
                    turn.steers += 1;
                    let mut attributes = Vec::new();
                    if self.content == ContentPolicy::Full {
                        attributes
                            .push(KeyValue::new(attr::INPUT_VALUE, clip(&params.input_text())));
                    }
                    turn.span.add_event_with_timestamp("steer", at, attributes);
                }
            }
            _ => {}
        }
        self.remember(
            (stream, id.to_string()),
            Pending {
                method: name.to_string(),
                at,
                thread,
            },
        );
    }

    /// A turn opens: its span is a child of the client's `parent` when it sent one, and has the
    /// ids `ours` when they were passed on to Codex.
    fn start_turn(
        &mut self,
        thread_id: &str,
        client: &str,
        params: &ObservedParams,
        parent: Option<SpanContext>,
        ours: Option<SpanContext>,
        at: SystemTime,
    ) {
        let content = self.content;
        let metadata = self.metadata();
        let thread = self.thread(thread_id, at);
        let client = thread.agent.clone().unwrap_or_else(|| client.to_string());
        if let Some(turn) = thread.turn.take() {
            // A turn/start while one is open: the earlier never told its end.
            thread.last = Some((turn.id.clone(), turn.context.clone()));
            Self::end_turn(turn, "unfinished", at, content);
        }
        let model = params.model.clone().or_else(|| thread.model.clone());
        if let Some(folder) = params.cwd.as_deref().and_then(workspace_folder) {
            thread.workspace = Some(folder);
        }
        let workspace = thread.workspace.clone();
        let mut attributes = vec![
            KeyValue::new(attr::GEN_AI_OPERATION_NAME, attr::OPERATION_INVOKE_AGENT),
            KeyValue::new(attr::GEN_AI_PROVIDER_NAME, attr::PROVIDER_OPENAI),
            KeyValue::new(attr::GEN_AI_AGENT_NAME, client.clone()),
            KeyValue::new(attr::GEN_AI_CONVERSATION_ID, thread_id.to_string()),
            KeyValue::new(attr::SESSION_ID, thread_id.to_string()),
            KeyValue::new(attr::OPENINFERENCE_SPAN_KIND, attr::KIND_AGENT),
            KeyValue::new(attr::CLIENT, client.clone()),
        ];
        // The OpenClaw agent and workspace the turn runs in, as its params name them.
        if let Some(workspace) = workspace {
            if let Some(agent) = agent_of_workspace(&workspace) {
                attributes.push(KeyValue::new(attr::OPENCLAW_AGENT, agent));
            }
            attributes.push(KeyValue::new(attr::OPENCLAW_WORKSPACE, workspace));
        }
        if metadata {
            if let Some(model) = &model {
                attributes.push(KeyValue::new(attr::GEN_AI_REQUEST_MODEL, model.clone()));
            }
        }
        if content == ContentPolicy::Full {
            attributes.push(KeyValue::new(
                attr::INPUT_VALUE,
                clip_value(&Value::String(params.input_text())),
            ));
            attributes.push(KeyValue::new(attr::INPUT_MIME_TYPE, "text/plain"));
        }
        let mut builder = self
            .tracer
            .span_builder(format!("{} {client}", attr::OPERATION_INVOKE_AGENT))
            .with_kind(SpanKind::Internal)
            .with_start_time(at)
            .with_attributes(attributes);
        if let Some(ours) = ours {
            builder = builder
                .with_trace_id(ours.trace_id())
                .with_span_id(ours.span_id());
        }
        let parent = parent.map_or_else(Context::new, |parent| Self::parent(&parent));
        let span = builder.start_with_context(&self.tracer, &parent);
        let context = span.span_context().clone();
        let thread = self.thread(thread_id, at);
        thread.turn = Some(Turn {
            span,
            context,
            id: None,
            steers: 0,
            model_calls: 0,
            compactions: 0,
            tokens: [0; 4],
            mark: at,
            tools: HashMap::new(),
            answer: String::new(),
        });
    }

    /// End `turn` at `at` with `status` (Codex's, or ours: unfinished, forgotten, lost).
    fn end_turn(mut turn: Turn, status: &str, at: SystemTime, content: ContentPolicy) {
        for (_, mut tool) in turn.tools.drain() {
            tool.span.set_status(Status::error("the turn ended first"));
            tool.span.end_with_timestamp(at);
        }
        let span = &mut turn.span;
        span.set_attribute(KeyValue::new(attr::TURN_STATUS, status.to_string()));
        span.set_attribute(KeyValue::new(attr::TURN_STEERS, turn.steers));
        span.set_attribute(KeyValue::new(attr::TURN_MODEL_CALLS, turn.model_calls));
        span.set_attribute(KeyValue::new(attr::TURN_COMPACTIONS, turn.compactions));
        if let Some(id) = &turn.id {
            span.set_attribute(KeyValue::new(attr::TURN_ID, id.clone()));
        }
        if content != ContentPolicy::Off {
            Self::usage_attributes(span, turn.tokens);
        }
        if content == ContentPolicy::Full && !turn.answer.is_empty() {
            span.set_attribute(KeyValue::new(attr::OUTPUT_VALUE, clip(&turn.answer)));
            span.set_attribute(KeyValue::new(attr::OUTPUT_MIME_TYPE, "text/plain"));
        }
        match status {
            "completed" => span.set_status(Status::Ok),
            "interrupted" => {}
            other => {
                span.set_attribute(KeyValue::new(attr::ERROR_TYPE, other.to_string()));
                span.set_status(Status::error(format!("the turn ended {other}")));
            }
        }
        span.end_with_timestamp(at);
    }

    fn codex_answer(&mut self, stream: usize, id: &Value, observed: &Observed<'_>, at: SystemTime) {
        let Some(pending) = self.pending.remove(&(stream, id.to_string())) else {
            return;
        };
        match pending.method.as_str() {
            method::THREAD_START | method::THREAD_RESUME => {
                let opened: ThreadOpenedAnswer = observed.answer();
                let Some(thread_id) = opened.thread.id.as_deref() else {
                    return;
                };
                let model = opened.model.clone();
                let workspace = opened.cwd.as_deref().and_then(workspace_folder);
                let thread = self.thread(thread_id, at);
                thread.model = model.clone();
                if workspace.is_some() {
                    thread.workspace = workspace;
                }
                let starting = pending.method == method::THREAD_START;
                let client = self.client_of(stream);
                let name = if starting {
                    format!("{} {client}", attr::OPERATION_CREATE_AGENT)
                } else {
                    format!("codex {}", method::THREAD_RESUME)
                };
                let mut attributes = vec![
                    KeyValue::new(attr::GEN_AI_PROVIDER_NAME, attr::PROVIDER_OPENAI),
                    KeyValue::new(attr::GEN_AI_AGENT_NAME, client),
                    KeyValue::new(attr::GEN_AI_CONVERSATION_ID, thread_id.to_string()),
                    KeyValue::new(attr::SESSION_ID, thread_id.to_string()),
                    KeyValue::new(attr::OPENINFERENCE_SPAN_KIND, attr::KIND_CHAIN),
                ];
                if starting {
                    attributes.push(KeyValue::new(
                        attr::GEN_AI_OPERATION_NAME,
                        attr::OPERATION_CREATE_AGENT,
                    ));
                }
                if let (true, Some(model)) = (self.metadata(), model) {
                    attributes.push(KeyValue::new(attr::GEN_AI_REQUEST_MODEL, model));
                }
                let mut span = self
                    .tracer
                    .span_builder(name)
                    .with_kind(SpanKind::Internal)
                    .with_start_time(pending.at)
                    .with_attributes(attributes)
                    .start_with_context(&self.tracer, &Context::new());
                if let Some(error) = observed.error() {
                    span.set_status(Status::error(error_text(&error)));
                }
                span.end_with_timestamp(at);
            }
            method::TURN_START => {
                let Some(thread) = pending.thread.as_deref() else {
                    return;
                };
                let content = self.content;
                let Some(thread) = self.threads.get_mut(thread) else {
                    return;
                };
                if let Some(error) = observed.error() {
                    if let Some(mut turn) = thread.turn.take() {
                        turn.span.set_attribute(KeyValue::new(
                            attr::ERROR_TYPE,
                            "turn/start refused".to_string(),
                        ));
                        turn.span.set_status(Status::error(error_text(&error)));
                        thread.last = Some((turn.id.clone(), turn.context.clone()));
                        Self::end_turn(turn, "refused", at, content);
                    }
                } else if let Some(turn) = thread.turn.as_mut() {
                    turn.id = observed.answer::<TurnStartedAnswer>().turn.id;
                }
            }
            _ => {}
        }
    }

    fn notification(&mut self, name: &str, observed: &Observed<'_>, at: SystemTime) {
        // Most of a turn's notifications are deltas: nothing to do for them, decided first.
        if !matches!(
            name,
            method::TURN_STARTED
                | method::TURN_COMPLETED
                | method::THREAD_TOKEN_USAGE_UPDATED
                | method::THREAD_COMPACTED
                | method::ITEM_STARTED
                | method::ITEM_COMPLETED
        ) {
            return;
        }
        let params = observed.params();
        let Some(thread_id) = params.thread_id.as_deref() else {
            return;
        };
        let content = self.content;
        let captured_calls = self.captured_calls;
        let tracer = self.tracer.clone();
        let Some(thread) = self.threads.get_mut(thread_id) else {
            return;
        };
        match name {
            method::TURN_STARTED => Self::turn_started(thread, &params),
            method::TURN_COMPLETED => Self::turn_completed(thread, params, at, content),
            method::THREAD_TOKEN_USAGE_UPDATED => Self::token_usage(
                thread,
                thread_id,
                &params,
                &tracer,
                captured_calls,
                content,
                at,
            ),
            method::THREAD_COMPACTED => Self::compacted(thread, at),
            method::ITEM_STARTED => {
                Self::item_started(thread, thread_id, &params, &tracer, content, at)
            }
            method::ITEM_COMPLETED => Self::item_completed(thread, &params, content, at),
            _ => {}
        }
    }

    /// `turn/started`: the open turn learns its id, if `turn/start`'s answer did not tell it.
    fn turn_started(thread: &mut Thread, params: &ObservedParams) {
        if let Some(turn) = thread.turn.as_mut() {
            if turn.id.is_none() {
                turn.id = params.turn.as_ref().and_then(|turn| turn.id.clone());
            }
        }
    }

    /// `turn/completed`: the open turn ends with Codex's status, its error and its answer.
    fn turn_completed(
        thread: &mut Thread,
        params: ObservedParams,
        at: SystemTime,
        content: ContentPolicy,
    ) {
        let ended = params.turn.unwrap_or_default();
        let id = ended.id.as_deref();
        let matches = thread
            .turn
            .as_ref()
            .is_some_and(|turn| turn.id.is_none() || turn.id.as_deref() == id);
        if !matches {
            return;
        }
        if let Some(mut turn) = thread.turn.take() {
            if turn.answer.is_empty() {
                turn.answer = ended
                    .items
                    .iter()
                    .filter(|item| item.is_agent_message())
                    .filter_map(|item| item.text.as_deref())
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            if let Some(error) = &ended.error {
                turn.span.set_status(Status::error(error_text(error)));
            }
            let status = ended.status.as_deref().unwrap_or("completed").to_string();
            thread.last = Some((turn.id.clone(), turn.context.clone()));
            Self::end_turn(turn, &status, at, content);
        }
    }

    /// `thread/tokenUsage/updated`: one model call of the open turn, counted, and its `chat`
    /// span when no capture files the calls.
    #[allow(clippy::too_many_arguments)]
    fn token_usage(
        thread: &mut Thread,
        thread_id: &str,
        params: &ObservedParams,
        tracer: &SdkTracer,
        captured_calls: bool,
        content: ContentPolicy,
        at: SystemTime,
    ) {
        let model = thread.model.clone();
        let Some(turn) = thread.turn.as_mut() else {
            return;
        };
        // Another turn's usage (what Codex tells again of a resumed thread) is not a
        // call of this turn.
        if let (Some(id), Some(mine)) = (params.turn_id.as_deref(), turn.id.as_deref()) {
            if id != mine {
                return;
            }
        }
        let last = params.token_usage.last;
        let tokens = [
            last.input_tokens,
            last.cached_input_tokens,
            last.output_tokens,
            last.reasoning_output_tokens,
        ];
        // The turn counts its calls and tokens from Codex's own reports, which come
        // before its end (a captured call may be filed after it).
        turn.model_calls += 1;
        for (sum, add) in turn.tokens.iter_mut().zip(tokens) {
            *sum += add;
        }
        if !captured_calls {
            let mut span = Self::chat_span(
                tracer,
                &turn.context,
                thread_id,
                model.as_deref(),
                turn.mark,
                content,
            );
            if content != ContentPolicy::Off {
                Self::usage_attributes(&mut span, tokens);
            }
            span.end_with_timestamp(at);
            turn.mark = at;
        }
    }

    /// `thread/compacted`: an event on the open turn.
    fn compacted(thread: &mut Thread, at: SystemTime) {
        if let Some(turn) = thread.turn.as_mut() {
            turn.compactions += 1;
            turn.span
                .add_event_with_timestamp("compaction", at, Vec::new());
        }
    }

    /// `item/started` of a tool call: its span opens under the turn.
    fn item_started(
        thread: &mut Thread,
        thread_id: &str,
        params: &ObservedParams,
        tracer: &SdkTracer,
        content: ContentPolicy,
        at: SystemTime,
    ) {
        let Some(turn) = thread.turn.as_mut() else {
            return;
        };
        let Some(item) = &params.item else {
            return;
        };
        let (Some((tool, kind)), Some(id)) = (tool_of(item), item.id.as_deref()) else {
            return;
        };
        if turn.tools.len() >= MAX_OPEN_TOOLS {
            return;
        }
        let mut attributes = vec![
            KeyValue::new(attr::GEN_AI_OPERATION_NAME, attr::OPERATION_EXECUTE_TOOL),
            KeyValue::new(attr::OPENINFERENCE_SPAN_KIND, attr::KIND_TOOL),
            KeyValue::new(attr::GEN_AI_TOOL_CALL_ID, id.to_string()),
            KeyValue::new(attr::GEN_AI_TOOL_TYPE, kind),
            KeyValue::new(attr::ITEM_TYPE, item.kind.clone().unwrap_or_default()),
            KeyValue::new(attr::SESSION_ID, thread_id.to_string()),
        ];
        if content != ContentPolicy::Off {
            attributes.push(KeyValue::new(attr::GEN_AI_TOOL_NAME, tool.clone()));
            attributes.push(KeyValue::new(attr::TOOL_NAME, tool.clone()));
        }
        if content == ContentPolicy::Full {
            if let Some(input) = item.tool_input() {
                attributes.push(KeyValue::new(attr::INPUT_VALUE, clip_value(input)));
            }
        }
        let span = tracer
            .span_builder(format!("{} {tool}", attr::OPERATION_EXECUTE_TOOL))
            .with_kind(SpanKind::Internal)
            .with_start_time(at)
            .with_attributes(attributes)
            .start_with_context(tracer, &Self::parent(&turn.context));
        let context = span.span_context().clone();
        turn.tools
            .insert(id.to_string(), OpenTool { span, context });
    }

    /// `item/completed`: an agent message joins the turn's answer; a tool call's span ends.
    fn item_completed(
        thread: &mut Thread,
        params: &ObservedParams,
        content: ContentPolicy,
        at: SystemTime,
    ) {
        let Some(turn) = thread.turn.as_mut() else {
            return;
        };
        let Some(item) = &params.item else {
            return;
        };
        if item.is_agent_message() {
            if let Some(text) = item.text.as_deref() {
                if !turn.answer.is_empty() {
                    turn.answer.push('\n');
                }
                turn.answer.push_str(text);
            }
        }
        let Some(mut tool) = item.id.as_deref().and_then(|id| turn.tools.remove(id)) else {
            return;
        };
        let status = item.status.as_deref().unwrap_or("completed");
        tool.span
            .set_attribute(KeyValue::new(attr::ITEM_STATUS, status.to_string()));
        if content == ContentPolicy::Full {
            if let Some(output) = item.tool_output() {
                tool.span
                    .set_attribute(KeyValue::new(attr::OUTPUT_VALUE, clip_value(output)));
            }
        }
        match status {
            "completed" => tool.span.set_status(Status::Ok),
            other => {
                tool.span
                    .set_attribute(KeyValue::new(attr::ERROR_TYPE, other.to_string()));
                tool.span
                    .set_status(Status::error(format!("the tool call ended {other}")));
            }
        }
        tool.span.end_with_timestamp(at);
        turn.mark = at;
    }

    /// A `chat <model>` span under `parent`, started at `start`.
    fn chat_span(
        tracer: &SdkTracer,
        parent: &SpanContext,
        thread: &str,
        model: Option<&str>,
        start: SystemTime,
        content: ContentPolicy,
    ) -> Span {
        let mut attributes = vec![
            KeyValue::new(attr::GEN_AI_OPERATION_NAME, attr::OPERATION_CHAT),
            KeyValue::new(attr::GEN_AI_PROVIDER_NAME, attr::PROVIDER_OPENAI),
            KeyValue::new(attr::GEN_AI_CONVERSATION_ID, thread.to_string()),
            KeyValue::new(attr::OPENINFERENCE_SPAN_KIND, attr::KIND_LLM),
            KeyValue::new(attr::SESSION_ID, thread.to_string()),
            KeyValue::new(attr::LLM_PROVIDER, attr::PROVIDER_OPENAI),
            KeyValue::new(attr::LLM_SYSTEM, attr::PROVIDER_OPENAI),
        ];
        if let (true, Some(model)) = (content != ContentPolicy::Off, model) {
            attributes.push(KeyValue::new(attr::GEN_AI_REQUEST_MODEL, model.to_string()));
            attributes.push(KeyValue::new(attr::LLM_MODEL_NAME, model.to_string()));
        }
        let name = match (content != ContentPolicy::Off, model) {
            (true, Some(model)) => format!("{} {model}", attr::OPERATION_CHAT),
            _ => attr::OPERATION_CHAT.to_string(),
        };
        tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(tracer, &Self::parent(parent))
    }

    fn usage_attributes(span: &mut Span, [input, cached, output, reasoning]: [i64; 4]) {
        span.set_attribute(KeyValue::new(attr::GEN_AI_USAGE_INPUT_TOKENS, input));
        span.set_attribute(KeyValue::new(attr::GEN_AI_USAGE_OUTPUT_TOKENS, output));
        span.set_attribute(KeyValue::new(
            attr::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            cached,
        ));
        span.set_attribute(KeyValue::new(
            attr::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
            reasoning,
        ));
        span.set_attribute(KeyValue::new(attr::LLM_TOKEN_COUNT_PROMPT, input));
        span.set_attribute(KeyValue::new(attr::LLM_TOKEN_COUNT_COMPLETION, output));
        span.set_attribute(KeyValue::new(attr::LLM_TOKEN_COUNT_TOTAL, input + output));
        span.set_attribute(KeyValue::new(attr::LLM_TOKEN_COUNT_CACHE_READ, cached));
        span.set_attribute(KeyValue::new(attr::LLM_TOKEN_COUNT_REASONING, reasoning));
        let verdict = if input == 0 || cached == 0 {
            "miss"
        } else if cached * 10 >= input * 9 {
            "hit"
        } else {
            "partial"
        };
        span.set_attribute(KeyValue::new(attr::CACHE_VERDICT, verdict));
    }

    fn server_request(
        &mut self,
        stream: usize,
        name: &str,
        id: &Value,
        observed: &Observed<'_>,
        at: SystemTime,
    ) {
        let params = observed.params();
        let Some(thread_id) = params.thread_id.as_deref() else {
            return;
        };
        let content = self.content;
        let tracer = self.tracer.clone();
        let Some(turn) = self
            .threads
            .get_mut(thread_id)
            .and_then(|thread| thread.turn.as_mut())
        else {
            return;
        };
        if turn.tools.len() >= MAX_OPEN_TOOLS {
            return;
        }
        let tool_call = name == method::ITEM_TOOL_CALL;
        // A client-run tool inside the item span Codex opened for it, if there is one.
        let call_id = params.call_id.as_deref().unwrap_or("");
        let parent = turn
            .tools
            .get(call_id)
            .map(|tool| tool.context.clone())
            .unwrap_or_else(|| turn.context.clone());
        let mut attributes = vec![
            KeyValue::new(attr::SERVER_REQUEST_METHOD, name.to_string()),
            KeyValue::new(attr::SESSION_ID, thread_id.to_string()),
        ];
        let span_name = if tool_call {
            let tool = params.tool.clone().unwrap_or_else(|| "tool".to_string());
            attributes.push(KeyValue::new(
                attr::OPENINFERENCE_SPAN_KIND,
                attr::KIND_TOOL,
            ));
            if content != ContentPolicy::Off {
                attributes.push(KeyValue::new(attr::TOOL_NAME, tool.clone()));
                attributes.push(KeyValue::new(attr::GEN_AI_TOOL_NAME, tool.clone()));
            }
            if content == ContentPolicy::Full {
                attributes.push(KeyValue::new(
                    attr::INPUT_VALUE,
                    clip_value(&params.arguments),
                ));
            }
            format!("client tool {tool}")
        } else {
            attributes.push(KeyValue::new(
                attr::OPENINFERENCE_SPAN_KIND,
                attr::KIND_CHAIN,
            ));
            format!("approval {name}")
        };
        let span = tracer
            .span_builder(span_name)
            .with_kind(SpanKind::Internal)
            .with_start_time(at)
            .with_attributes(attributes)
            .start_with_context(&tracer, &Self::parent(&parent));
        let context = span.span_context().clone();
        turn.tools
            .insert(format!("request {stream} {id}"), OpenTool { span, context });
        self.remember(
            (stream, format!("server {id}")),
            Pending {
                method: name.to_string(),
                at,
                thread: Some(thread_id.to_string()),
            },
        );
    }

    fn client_answer(
        &mut self,
        stream: usize,
        id: &Value,
        observed: &Observed<'_>,
        at: SystemTime,
    ) {
        let Some(pending) = self.pending.remove(&(stream, format!("server {id}"))) else {
            return;
        };
        let content = self.content;
        let Some(turn) = pending
            .thread
            .as_deref()
            .and_then(|thread| self.threads.get_mut(thread))
            .and_then(|thread| thread.turn.as_mut())
        else {
            return;
        };
        let Some(mut open) = turn.tools.remove(&format!("request {stream} {id}")) else {
            return;
        };
        let span = &mut open.span;
        if let Some(error) = observed.error() {
            span.set_status(Status::error(error_text(&error)));
        } else {
            let decision = observed.answer::<ClientAnswerView>().decision();
            if content != ContentPolicy::Off {
                span.set_attribute(KeyValue::new(attr::APPROVAL_DECISION, decision));
            }
            if content == ContentPolicy::Full && pending.method == method::ITEM_TOOL_CALL {
                span.set_attribute(KeyValue::new(
                    attr::OUTPUT_VALUE,
                    clip_value(observed.result),
                ));
            }
            span.set_status(Status::Ok);
        }
        span.end_with_timestamp(at);
        turn.mark = at;
    }

    /// A model call the capture filed, ending `at` (its response's timings give its start and
    /// its first token).
    pub fn model_call(&mut self, call: &ModelCall, at: SystemTime) {
        let content = self.content;
        let tracer = self.tracer.clone();
        let Some(thread) = self.threads.get_mut(&call.thread) else {
            return;
        };
        let model = call.request["model"]
            .as_str()
            .map(str::to_string)
            .or_else(|| thread.model.clone());
        let timings = &call.response["timings"];
        let total = Duration::from_secs_f64(
            timings["totalMs"]
                .as_f64()
                .unwrap_or(0.0)
                .clamp(0.0, 86_400_000.0)
                / 1000.0,
        );
        let (start, end) = match call.started {
            Some(started) => (started, started + total),
            None => (at.checked_sub(total).unwrap_or(at), at),
        };
        let usage = &call.response["usage"];
        let tokens = [
            int(&usage["input_tokens"]),
            int(&usage["input_tokens_details"]["cached_tokens"]),
            int(&usage["output_tokens"]),
            int(&usage["output_tokens_details"]["reasoning_tokens"]),
        ];
        let parent = match thread.turn.as_mut() {
            Some(turn)
                if call.turn.is_empty() || turn.id.as_deref().is_none_or(|id| id == call.turn) =>
            {
                turn.mark = end;
                turn.context.clone()
            }
            _ => match &thread.last {
                Some((id, context))
                    if call.turn.is_empty() || id.as_deref() == Some(&call.turn) =>
                {
                    context.clone()
                }
                _ => return,
            },
        };
        let mut span = Self::chat_span(
            &tracer,
            &parent,
            &call.thread,
            model.as_deref(),
            start,
            content,
        );
        if content != ContentPolicy::Off {
            Self::usage_attributes(&mut span, tokens);
            if let Some(first) = timings["firstByteMs"].as_f64() {
                span.set_attribute(KeyValue::new(attr::TIME_TO_FIRST_TOKEN_MS, first));
            }
            if let Some(id) = text_of(&call.response["id"]) {
                span.set_attribute(KeyValue::new(attr::GEN_AI_RESPONSE_ID, id.to_string()));
            }
            if let Some(status) = call.response["httpStatus"].as_i64() {
                span.set_attribute(KeyValue::new(attr::HTTP_STATUS, status));
            }
            if let Some(model) = text_of(&call.response["model"]) {
                span.set_attribute(KeyValue::new(
                    attr::GEN_AI_RESPONSE_MODEL,
                    model.to_string(),
                ));
            }
        }
        if content == ContentPolicy::Full {
            span.set_attribute(KeyValue::new(
                attr::INPUT_VALUE,
                clip_value(&call.request["input"]),
            ));
            span.set_attribute(KeyValue::new(attr::INPUT_MIME_TYPE, "application/json"));
            span.set_attribute(KeyValue::new(
                attr::OUTPUT_VALUE,
                clip(&output_text(&call.response)),
            ));
        }
        match call.response["status"].as_str() {
            Some("completed") | None => span.set_status(Status::Ok),
            Some(other) => span.set_status(Status::error(format!("the response ended {other}"))),
        }
        span.end_with_timestamp(end);
    }

    /// An app-server of the pool started again: `started` when it went down, `at` when it was
    /// back (or given up).
    pub fn member_restart(
        &mut self,
        member: &str,
        reason: &str,
        started: SystemTime,
        at: SystemTime,
    ) {
        let mut span = self
            .tracer
            .span_builder("member restart")
            .with_kind(SpanKind::Internal)
            .with_start_time(started)
            .with_attributes(vec![
                KeyValue::new(
                    attr::MEMBER,
                    clawbridge_support::redact::redact_text(member).into_owned(),
                ),
                KeyValue::new(attr::MEMBER_REASON, clip(reason)),
                KeyValue::new(attr::OPENINFERENCE_SPAN_KIND, attr::KIND_CHAIN),
            ])
            .start_with_context(&self.tracer, &Context::new());
        span.end_with_timestamp(at);
    }

    /// End every open span at `at` (the process stops, or the files end): turns that never told
    /// their end are `unfinished`.
    pub fn finish(&mut self, at: SystemTime) {
        let content = self.content;
        for (_, mut thread) in self.threads.drain() {
            if let Some(turn) = thread.turn.take() {
                Self::end_turn(turn, "unfinished", at, content);
            }
        }
        self.order.clear();
        self.pending.clear();
        self.pending_order.clear();
    }

    /// Threads followed now (for tests of the bound).
    #[cfg(test)]
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::collected::Collected;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData};
    use serde_json::json;

    fn new_book(
        content: ContentPolicy,
        captured: bool,
    ) -> (SpanBook, Collected, SdkTracerProvider) {
        let exporter = Collected::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        (
            SpanBook::new(provider.tracer("test"), content, captured),
            exporter,
            provider,
        )
    }

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_000 + ms)
    }

    fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
        span.attributes
            .iter()
            .find(|pair| pair.key.as_str() == key)
            .map(|pair| &pair.value)
    }

    fn named<'a>(spans: &'a [SpanData], prefix: &str) -> Vec<&'a SpanData> {
        spans
            .iter()
            .filter(|span| span.name.starts_with(prefix))
            .collect()
    }

    /// A thread's start, a turn with a tool item, an approval and a token update, as Codex and
    /// a client say them.
    fn conversation(book: &mut SpanBook) {
        let client = Side::Client;
        let codex = Side::Codex;
        book.message(0, client, &json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "openclaw"}}}), at(0));
        book.message(
            0,
            client,
            &json!({"id": 2, "method": "thread/start", "params": {}}),
            at(1),
        );
        book.message(
            0,
            codex,
            &json!({"id": 2, "result": {"thread": {"id": "thr"}, "model": "gpt-5.5"}}),
            at(5),
        );
        book.message(0, client, &json!({"id": 3, "method": "turn/start", "params": {"threadId": "thr", "input": [{"type": "text", "text": "hello, my key is sk-proj-abcdefghijklmnopqrstuvwxyz012345"}]}}), at(10));
        book.message(
            0,
            codex,
            &json!({"id": 3, "result": {"turn": {"id": "turn-1"}}}),
            at(11),
        );
        book.message(0, codex, &json!({"method": "thread/tokenUsage/updated", "params": {"threadId": "thr", "turnId": "turn-1", "tokenUsage": {"last": {"inputTokens": 100, "cachedInputTokens": 95, "outputTokens": 7, "reasoningOutputTokens": 2}}}}), at(20));
        book.message(0, codex, &json!({"method": "item/started", "params": {"threadId": "thr", "turnId": "turn-1", "item": {"id": "call-1", "type": "commandExecution", "command": "ls /secret"}}}), at(21));
        book.message(0, codex, &json!({"id": 50, "method": "item/commandExecution/requestApproval", "params": {"threadId": "thr", "turnId": "turn-1", "itemId": "call-1"}}), at(22));
        book.message(
            0,
            client,
            &json!({"id": 50, "result": {"decision": "accept"}}),
            at(25),
        );
        book.message(0, codex, &json!({"method": "item/completed", "params": {"threadId": "thr", "turnId": "turn-1", "item": {"id": "call-1", "type": "commandExecution", "status": "completed", "aggregatedOutput": "file-a"}}}), at(30));
        book.message(0, client, &json!({"id": 4, "method": "turn/steer", "params": {"threadId": "thr", "input": [{"type": "text", "text": "faster"}]}}), at(31));
        book.message(0, codex, &json!({"method": "item/completed", "params": {"threadId": "thr", "turnId": "turn-1", "item": {"id": "msg", "type": "agentMessage", "text": "done"}}}), at(39));
        book.message(0, codex, &json!({"method": "turn/completed", "params": {"threadId": "thr", "turn": {"id": "turn-1", "status": "completed", "items": []}}}), at(40));
    }

    /// Protection: each turn carries its own connection's client, whoever spoke last, and a
    /// client's name reaches no span with a secret in it.
    #[test]
    fn turns_carry_their_own_client_and_names_are_redacted() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        // Alice's conversation runs on connection 0; bob, whose client calls itself by a key,
        // connects (1) before alice's turn starts.
        book.message(0, Side::Client, &json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "alice-agent"}}}), at(0));
        book.message(1, Side::Client, &json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "bob sk-proj-abcdefghijklmnopqrstuvwxyz012345"}}}), at(1));
        book.message(
            0,
            Side::Client,
            &json!({"id": 3, "method": "turn/start", "params": {"threadId": "thr", "input": []}}),
            at(10),
        );
        book.message(
            1,
            Side::Client,
            &json!({"id": 3, "method": "turn/start", "params": {"threadId": "thr-b", "input": []}}),
            at(11),
        );
        for thread in ["thr", "thr-b"] {
            book.message(0, Side::Codex, &json!({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": "t", "status": "completed", "items": []}}}), at(40));
        }
        let spans = exporter.get_finished_spans().expect("spans");
        let mut names: Vec<String> = named(&spans, "invoke_agent")
            .iter()
            .map(|span| span.name.to_string())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], "invoke_agent alice-agent");
        assert!(names[1].starts_with("invoke_agent bob"), "{names:?}");
        assert!(
            !names[1].contains("sk-proj-abcdefghijklmnopqrstuvwxyz012345"),
            "{names:?}"
        );
    }

    /// Protection: on one connection that runs several agents' threads (`serve`'s app-server),
    /// each thread's turns carry the agent its client named for it, not the connection's
    /// `initialize`; a thread nobody named keeps the connection's client.
    #[test]
    fn a_named_thread_s_turns_carry_its_agent() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        book.message(0, Side::Client, &json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "clawbridge"}}}), at(0));
        book.name_thread("thr-main", "main", at(1));
        book.name_thread("thr-ops", "ops", at(1));
        for (id, thread) in [(2, "thr-main"), (3, "thr-ops"), (4, "thr-other")] {
            book.message(
                0,
                Side::Client,
                &json!({"id": id, "method": "turn/start", "params": {"threadId": thread, "input": []}}),
                at(10),
            );
            book.message(0, Side::Codex, &json!({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": "t", "status": "completed", "items": []}}}), at(40));
        }
        let spans = exporter.get_finished_spans().expect("spans");
        let mut names: Vec<String> = named(&spans, "invoke_agent")
            .iter()
            .map(|span| span.name.to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "invoke_agent clawbridge",
                "invoke_agent main",
                "invoke_agent ops"
            ]
        );
    }

    /// An operator sees which OpenClaw agent a turn is: the workspace its params name (the
    /// folder only, never the machine path) and the agent OpenClaw's layout gives it.
    #[test]
    fn turns_name_their_openclaw_agent_and_workspace() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        book.message(0, Side::Client, &json!({"id": 3, "method": "turn/start", "params": {"threadId": "a", "cwd": "/home/op/.openclaw/workspace-alpha", "input": []}}), at(10));
        book.message(0, Side::Client, &json!({"id": 4, "method": "turn/start", "params": {"threadId": "m", "cwd": "/home/op/.openclaw/workspace", "input": []}}), at(11));
        for thread in ["a", "m"] {
            book.message(0, Side::Codex, &json!({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": "t", "status": "completed", "items": []}}}), at(40));
        }
        let spans = exporter.get_finished_spans().expect("spans");
        let turns = named(&spans, "invoke_agent");
        let of = |thread: &str| {
            *turns
                .iter()
                .find(|span| {
                    attribute(span, "gen_ai.conversation.id").map(|v| v.as_str().into_owned())
                        == Some(thread.to_string())
                })
                .expect("turn")
        };
        let text = |span, key| attribute(span, key).map(|v| v.as_str().into_owned());
        assert_eq!(text(of("a"), "openclaw.agent"), Some("alpha".into()));
        assert_eq!(
            text(of("a"), "openclaw.workspace"),
            Some("workspace-alpha".into())
        );
        assert_eq!(text(of("m"), "openclaw.agent"), None);
        assert_eq!(
            text(of("m"), "openclaw.workspace"),
            Some("workspace".into())
        );
    }

    #[test]
    fn a_turn_is_one_trace_with_its_model_call_tool_and_approval_under_it() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        conversation(&mut book);
        let spans = exporter.get_finished_spans().expect("spans");
        let turn = named(&spans, "invoke_agent");
        assert_eq!(turn.len(), 1, "{spans:#?}");
        let turn = turn[0];
        assert_eq!(turn.name, "invoke_agent openclaw");
        assert_eq!(
            turn.parent_span_id,
            opentelemetry::trace::SpanId::INVALID,
            "the turn is a root"
        );
        assert_eq!(
            attribute(turn, "codex.turn.status").map(|v| v.as_str().into_owned()),
            Some("completed".into())
        );
        assert_eq!(
            attribute(turn, "codex.turn.steers"),
            Some(&opentelemetry::Value::I64(1))
        );
        assert_eq!(
            attribute(turn, "gen_ai.usage.input_tokens"),
            Some(&opentelemetry::Value::I64(100))
        );
        assert_eq!(
            attribute(turn, "session.id").map(|v| v.as_str().into_owned()),
            Some("thr".into())
        );
        assert_eq!(turn.start_time, at(10));
        assert_eq!(turn.end_time, at(40));
        let trace = turn.span_context.trace_id();
        let children: Vec<&SpanData> = spans
            .iter()
            .filter(|span| {
                span.span_context.trace_id() == trace && span.span_context != turn.span_context
            })
            .collect();
        assert_eq!(children.len(), 3, "chat, tool, approval: {children:#?}");
        for child in &children {
            assert_eq!(
                child.parent_span_id,
                turn.span_context.span_id(),
                "{child:#?}"
            );
        }
        let chat = named(&spans, "chat gpt-5.5")[0];
        assert_eq!(
            chat.start_time,
            at(10),
            "a model call without a capture starts at the turn's last step"
        );
        assert_eq!(chat.end_time, at(20));
        assert_eq!(
            attribute(chat, "clawbridge.cache.verdict").map(|v| v.as_str().into_owned()),
            Some("hit".into())
        );
        assert_eq!(
            attribute(chat, "llm.token_count.prompt_details.cache_read"),
            Some(&opentelemetry::Value::I64(95))
        );
        let tool = named(&spans, "execute_tool shell")[0];
        assert_eq!((tool.start_time, tool.end_time), (at(21), at(30)));
        let approval = named(&spans, "approval")[0];
        assert_eq!(
            attribute(approval, "codex.approval.decision").map(|v| v.as_str().into_owned()),
            Some("accept".into())
        );
        // The thread's start is a trace of its own.
        let start = named(&spans, "create_agent")[0];
        assert_ne!(start.span_context.trace_id(), trace);
        // Metadata: no text anyone wrote.
        for span in &spans {
            assert!(
                attribute(span, "input.value").is_none()
                    && attribute(span, "output.value").is_none(),
                "{span:#?}"
            );
        }
    }

    #[test]
    fn full_content_is_redacted_and_off_tells_no_tokens() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Full, false);
        conversation(&mut book);
        let spans = exporter.get_finished_spans().expect("spans");
        let turn = named(&spans, "invoke_agent")[0];
        let input = attribute(turn, "input.value")
            .expect("input")
            .as_str()
            .into_owned();
        assert!(input.starts_with("hello, my key is"), "{input}");
        assert!(
            !input.contains("abcdefghijklmnopqrstuvwxyz012345"),
            "redacted: {input}"
        );
        assert_eq!(
            attribute(turn, "output.value").map(|v| v.as_str().into_owned()),
            Some("done".into())
        );
        let tool = named(&spans, "execute_tool")[0];
        assert_eq!(
            attribute(tool, "output.value").map(|v| v.as_str().into_owned()),
            Some("file-a".into())
        );

        let (mut book, exporter, _provider) = new_book(ContentPolicy::Off, false);
        conversation(&mut book);
        let spans = exporter.get_finished_spans().expect("spans");
        for span in &spans {
            for key in [
                "gen_ai.usage.input_tokens",
                "gen_ai.request.model",
                "tool.name",
                "input.value",
            ] {
                assert!(attribute(span, key).is_none(), "{key} under off: {span:#?}");
            }
        }
        assert_eq!(named(&spans, "chat").len(), 1);
    }

    #[test]
    fn with_a_capture_model_calls_come_from_it_and_a_late_one_joins_its_turn() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, true);
        conversation(&mut book);
        // No chat span from the token update: the capture tells the calls.
        let spans = exporter.get_finished_spans().expect("spans");
        assert!(named(&spans, "chat").is_empty(), "{spans:#?}");
        // The capture writer files the call after the turn ended.
        book.model_call(
            &ModelCall {
                thread: "thr".into(),
                turn: String::new(),
                request: json!({"model": "gpt-5.5"}),
                response: json!({"status": "completed", "timings": {"firstByteMs": 3.5, "totalMs": 8.0}, "usage": {"input_tokens": 10, "output_tokens": 2}}),
                started: None,
            },
            at(50),
        );
        let spans = exporter.get_finished_spans().expect("spans");
        let chat = named(&spans, "chat gpt-5.5")[0];
        let turn = named(&spans, "invoke_agent")[0];
        assert_eq!(chat.parent_span_id, turn.span_context.span_id());
        assert_eq!(chat.span_context.trace_id(), turn.span_context.trace_id());
        assert_eq!(chat.start_time, at(42));
        assert_eq!(
            attribute(chat, "clawbridge.time_to_first_token_ms"),
            Some(&opentelemetry::Value::F64(3.5))
        );
        // A call for a thread nobody started is not made up.
        book.model_call(
            &ModelCall {
                thread: "other".into(),
                turn: String::new(),
                request: json!({}),
                response: json!({}),
                started: None,
            },
            at(60),
        );
        assert_eq!(
            exporter.get_finished_spans().expect("spans").len(),
            spans.len()
        );
    }

    #[test]
    fn a_member_restart_is_a_span_from_down_to_back() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        book.member_restart("local-0", "generation 1 went away", at(0), at(900));
        let spans = exporter.get_finished_spans().expect("spans");
        let restart = named(&spans, "member restart");
        assert_eq!(restart.len(), 1, "{spans:#?}");
        assert_eq!(restart[0].start_time, at(0));
        assert_eq!(restart[0].end_time, at(900));
        assert_eq!(
            attribute(restart[0], attr::MEMBER).map(|value| value.as_str().into_owned()),
            Some("local-0".to_string())
        );
        assert_eq!(
            attribute(restart[0], attr::MEMBER_REASON).map(|value| value.as_str().into_owned()),
            Some("generation 1 went away".to_string())
        );
    }

    #[test]
    fn a_turn_span_takes_the_ids_passed_on_to_codex_under_the_clients_parent() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        let salt = super::super::context::Salt::draw();
        book.set_salt(salt);
        let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        book.message(4, Side::Client, &json!({"id": 9, "method": "turn/start", "trace": {"traceparent": client}, "params": {"threadId": "thr", "input": []}}), at(0));
        book.message(4, Side::Client, &json!({"id": "b", "method": "turn/start", "params": {"threadId": "other", "input": []}}), at(0));
        book.finish(at(10));
        let spans = exporter.get_finished_spans().expect("spans");
        let turns = named(&spans, "invoke_agent");
        assert_eq!(turns.len(), 2, "{spans:#?}");
        let under = turns
            .iter()
            .find(|span| span.parent_span_id != opentelemetry::trace::SpanId::INVALID)
            .expect("the turn under the client's span");
        let wire = clawbridge_codex::protocol::wire::W3cTraceContext {
            traceparent: Some(client.to_string()),
            tracestate: None,
        };
        let parent = super::super::context::parent_of(&wire).expect("parent");
        let ours = super::super::context::turn_context(&salt, 4, "9", Some(&parent));
        assert_eq!(under.span_context.trace_id(), parent.trace_id());
        assert_eq!(under.parent_span_id, parent.span_id());
        assert_eq!(under.span_context.span_id(), ours.span_id());
        let root = turns
            .iter()
            .find(|span| span.parent_span_id == opentelemetry::trace::SpanId::INVALID)
            .expect("the other turn is a root");
        let derived = super::super::context::turn_context(&salt, 4, "\"b\"", None);
        assert_eq!(root.span_context.trace_id(), derived.trace_id());
        assert_eq!(root.span_context.span_id(), derived.span_id());
    }

    #[test]
    fn threads_are_bounded_and_a_forgotten_turn_is_ended() {
        let (mut book, exporter, _provider) = new_book(ContentPolicy::Metadata, false);
        for index in 0..=MAX_THREADS {
            book.message(0, Side::Client, &json!({"id": index, "method": "turn/start", "params": {"threadId": format!("thr-{index}"), "input": []}}), at(index as u64));
        }
        assert_eq!(book.threads(), MAX_THREADS);
        let spans = exporter.get_finished_spans().expect("spans");
        assert_eq!(
            spans.len(),
            1,
            "the oldest turn ended as its thread was forgotten"
        );
        assert_eq!(
            attribute(&spans[0], "codex.turn.status").map(|v| v.as_str().into_owned()),
            Some("forgotten".into())
        );
        assert_eq!(
            attribute(&spans[0], "session.id").map(|v| v.as_str().into_owned()),
            Some("thr-0".into())
        );
        book.finish(at(5_000));
        let spans = exporter.get_finished_spans().expect("spans");
        assert_eq!(
            spans.len(),
            MAX_THREADS + 1,
            "every open turn ended at the finish"
        );
    }
}
