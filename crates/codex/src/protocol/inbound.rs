//! Typed inbound messages: what Codex sends that clawbridge acts on, parsed once.
//!
//! A framed [`Incoming`] carries its params as raw JSON text. A notification (nearly every
//! message of a turn: the deltas) keeps that text as it is, and is what observers and clients
//! receive; the framing pass ([`super::scan`]) has already peeked the few fields clawbridge reads,
//! so [`Inbound::from_incoming`] only decodes those: the thread and turn the message belongs to
//! ([`Scope`]) and, for the methods clawbridge acts on, a typed kind ([`NotificationKind`]). A
//! server request (rare, and answered from its fields) is parsed once into a `Value`, and typed
//! from that ([`RequestKind`]). Every other method is kept as it came, with `Other` as its kind,
//! and logged by the consumer; nothing is dropped.
//!
//! Method names and shapes are Codex CLI 0.169.0's (docs/codex-wire.md).

use crate::protocol::table::name as method;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::scan::{Detail, Peek, Text};
use super::wire::{Incoming, Method, RawParams, RequestId};

/// The thread and turn a message names (`threadId`/`turnId`, or `thread.id`/`turn.id`),
/// borrowed from the message: typing a delta allocates nothing for them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope<'a> {
    pub thread_id: Option<Cow<'a, str>>,
    pub turn_id: Option<Cow<'a, str>>,
}

impl Scope<'_> {
    /// True when the message belongs to this thread and turn.
    pub fn is_turn(&self, thread_id: &str, turn_id: &str) -> bool {
        self.thread_id.as_deref() == Some(thread_id) && self.turn_id.as_deref() == Some(turn_id)
    }
}

/// A server request's scope, read once from its parsed params.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct OwnedScope {
    thread_id: Option<String>,
    turn_id: Option<String>,
}

impl OwnedScope {
    fn of(params: &Value) -> OwnedScope {
        let text = |value: &Value| value.as_str().map(str::to_string);
        OwnedScope {
            thread_id: text(&params["threadId"]).or_else(|| text(&params["thread"]["id"])),
            turn_id: text(&params["turnId"]).or_else(|| text(&params["turn"]["id"])),
        }
    }
}

/// What clawbridge reads of Codex's answer to `thread/start`, `thread/resume` or `thread/fork`:
/// the thread's id and rollout path, its model and workspace. Lenient: every other field (and a
/// field of another type) is skipped, never built into a value; the answer goes on as Codex
/// wrote it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ThreadOpenedAnswer {
    pub thread: ThreadRef,
    #[serde(deserialize_with = "lenient_text")]
    pub model: Option<String>,
    #[serde(deserialize_with = "lenient_text")]
    pub cwd: Option<String>,
}

/// A thread as an answer names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ThreadRef {
    #[serde(deserialize_with = "lenient_text")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient_text")]
    pub path: Option<String>,
}

/// What clawbridge reads of Codex's answer to `turn/start`: the turn's id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TurnStartedAnswer {
    pub turn: TurnRef,
}

/// A turn as an answer names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TurnRef {
    #[serde(deserialize_with = "lenient_text")]
    pub id: Option<String>,
}

/// What clawbridge reads of Codex's answer to `review/start`: a detached review's new thread.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReviewStartedAnswer {
    #[serde(deserialize_with = "lenient_text")]
    pub review_thread_id: Option<String>,
}

/// A lenient view of one of Codex's answers.
pub trait AnswerView: serde::de::DeserializeOwned + Default {
    /// The answer's view, or an empty one when it is not an object (what Codex wrote still
    /// goes on; clawbridge only learns nothing from it).
    fn read(raw: &str) -> Self {
        serde_json::from_str(raw).unwrap_or_default()
    }
}

impl AnswerView for ThreadOpenedAnswer {}
impl AnswerView for TurnStartedAnswer {}
impl AnswerView for ReviewStartedAnswer {}

/// A string field read leniently: a string is kept, anything else (null, a number, an object)
/// reads as absent instead of failing the whole answer's view.
fn lenient_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Lenient {
        Text(String),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Lenient::deserialize(deserializer)? {
        Lenient::Text(text) => Some(text),
        Lenient::Other(_) => None,
    })
}

/// How Codex says a turn ended (`turn/completed.turn.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnState {
    Completed,
    Interrupted,
    Failed,
    InProgress,
}

impl TurnState {
    /// Codex's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Completed => "completed",
            TurnState::Interrupted => "interrupted",
            TurnState::Failed => "failed",
            TurnState::InProgress => "inProgress",
        }
    }

    fn from_wire(text: &str) -> Option<TurnState> {
        Some(match text {
            "completed" => TurnState::Completed,
            "interrupted" => TurnState::Interrupted,
            "failed" => TurnState::Failed,
            "inProgress" => TurnState::InProgress,
            _ => return None,
        })
    }
}

/// The notifications clawbridge acts on.
#[derive(Clone, Debug, PartialEq)]
pub enum NotificationKind {
    /// `turn/started`.
    TurnStarted,
    /// `turn/completed`: the end of a turn, with Codex's status and error message.
    TurnCompleted {
        state: Option<TurnState>,
        error: Option<String>,
    },
    /// `item/completed` of an `agentMessage`: the text of one agent message.
    AgentMessage { text: String },
    /// `error`: a turn error (the turn may still retry).
    Error { message: Option<String> },
    /// Any other method, kept raw.
    Other,
}

/// The server requests clawbridge acts on.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestKind {
    /// `item/tool/call`: a dynamic tool call.
    DynamicToolCall(DynamicToolCall),
    /// An approval request, in one of Codex's forms.
    Approval(ApprovalKind),
    /// Any other method: answered "method not found" by the handler.
    Other,
}

/// The approval requests of Codex 0.169.0 (v2 item approvals and the legacy v1 forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalKind {
    /// `item/commandExecution/requestApproval`: answered `{decision: accept|decline}`.
    CommandExecution,
    /// `item/fileChange/requestApproval`: answered `{decision: accept|decline}`.
    FileChange,
    /// `execCommandApproval` (v1): answered `{decision: approved|denied}`.
    LegacyExecCommand,
    /// `applyPatchApproval` (v1): answered `{decision: approved|denied}`.
    LegacyApplyPatch,
}

impl ApprovalKind {
    fn from_method(method: &str) -> Option<Self> {
        Some(match method {
            method::ITEM_COMMAND_EXECUTION_REQUEST_APPROVAL => ApprovalKind::CommandExecution,
            method::ITEM_FILE_CHANGE_REQUEST_APPROVAL => ApprovalKind::FileChange,
            method::EXEC_COMMAND_APPROVAL => ApprovalKind::LegacyExecCommand,
            method::APPLY_PATCH_APPROVAL => ApprovalKind::LegacyApplyPatch,
            _ => return None,
        })
    }

    /// The answer Codex expects for an approval of this kind.
    pub fn answer(self, approve: bool) -> Value {
        let decision = match (self, approve) {
            (ApprovalKind::LegacyExecCommand | ApprovalKind::LegacyApplyPatch, true) => "approved",
            (ApprovalKind::LegacyExecCommand | ApprovalKind::LegacyApplyPatch, false) => "denied",
            (_, true) => "accept",
            (_, false) => "decline",
        };
        super::answers::to_value(&super::answers::ApprovalResponse { decision })
    }
}

/// `item/tool/call` params (DynamicToolCallParams).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCall {
    #[serde(default)]
    pub call_id: Value,
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub namespace: Value,
    #[serde(default)]
    pub arguments: Value,
}

/// A notification: method, params (raw, as Codex sent them) and what it means to clawbridge.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub method: Method,
    pub params: RawParams,
    /// Where the thread and turn ids are in `params` ([`Notification::scope`] reads them).
    peek: Peek,
    pub kind: NotificationKind,
}

/// A server request: it must be answered with exactly `id`.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    pub params: Value,
    scope: OwnedScope,
    pub kind: RequestKind,
}

impl Request {
    /// The thread and turn the request names.
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            thread_id: self.scope.thread_id.as_deref().map(Cow::Borrowed),
            turn_id: self.scope.turn_id.as_deref().map(Cow::Borrowed),
        }
    }
}

/// An inbound message in typed form.
#[derive(Clone, Debug, PartialEq)]
pub enum Inbound {
    Notification(Notification),
    Request(Request),
    /// A response nobody was waiting for (the peer routes awaited ones itself).
    Response(RequestId),
}

impl Inbound {
    /// Parse a framed message once.
    pub fn from_incoming(message: Incoming) -> Inbound {
        match message {
            Incoming::Notification {
                method,
                params,
                peek,
            } => Inbound::Notification(Notification::from_peek(method, params, peek)),
            Incoming::Request { id, method, params } => {
                Inbound::Request(Request::new(id, method.to_string(), parse(params.get())))
            }
            Incoming::Response { id, .. } => Inbound::Response(id),
        }
    }

    /// The thread and turn the message names.
    pub fn scope(&self) -> Option<Scope<'_>> {
        match self {
            Inbound::Notification(notification) => Some(notification.scope()),
            Inbound::Request(request) => Some(request.scope()),
            Inbound::Response(_) => None,
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Inbound::Notification(notification) => Some(&notification.method),
            Inbound::Request(request) => Some(&request.method),
            Inbound::Response(_) => None,
        }
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| {
        tracing::warn!("codex app-server sent params that are not JSON ({error}); kept as null");
        Value::Null
    })
}

impl Notification {
    /// Type a notification from its raw params (built by clawbridge, or from a test): one
    /// pass over them finds what [`Notification::from_peek`] reads.
    pub fn from_raw(method: impl Into<Method>, params: RawParams) -> Notification {
        let method = method.into();
        let peek = super::scan::peek(params.get()).unwrap_or_else(|error| {
            tracing::warn!("{method} params read as empty ({error})");
            Peek::default()
        });
        Notification::from_peek(method, params, peek)
    }

    /// The thread and turn the notification names, borrowed from its params.
    pub fn scope(&self) -> Scope<'_> {
        let source = self.params.get();
        Scope {
            thread_id: self.peek.thread.map(|text| text.read(source)),
            turn_id: self.peek.turn.map(|text| text.read(source)),
        }
    }

    /// Type a notification from what the framing pass peeked in its params (ranges into them).
    pub fn from_peek(method: Method, params: RawParams, peek: Peek) -> Notification {
        let source = params.get();
        let detail = peek.detail.as_deref();
        let fact = |pick: fn(&Detail) -> &Option<Text>| detail.and_then(|d| pick(d).as_ref());
        let kind = match method.as_str() {
            method::TURN_STARTED => NotificationKind::TurnStarted,
            method::TURN_COMPLETED => NotificationKind::TurnCompleted {
                state: fact(|d| &d.turn_status)
                    .and_then(|status| TurnState::from_wire(&status.read(source))),
                error: fact(|d| &d.turn_error_message).map(|text| text.read(source).into_owned()),
            },
            method::ITEM_COMPLETED => match (fact(|d| &d.item_type), fact(|d| &d.item_text)) {
                (Some(kind), Some(text)) if kind.read(source) == "agentMessage" => {
                    NotificationKind::AgentMessage {
                        text: text.read(source).into_owned(),
                    }
                }
                _ => NotificationKind::Other,
            },
            method::ERROR => NotificationKind::Error {
                message: fact(|d| &d.error_message).map(|text| text.read(source).into_owned()),
            },
            _ => NotificationKind::Other,
        };
        Notification {
            method,
            params,
            peek,
            kind,
        }
    }

    /// Type a notification whose params are already parsed.
    pub fn new(method: impl Into<Method>, params: Value) -> Notification {
        Notification::from_raw(method, RawParams::from_value(&params))
    }
}

impl Request {
    /// Type a server request whose params are already parsed.
    pub fn new(id: RequestId, method: String, params: Value) -> Request {
        let scope = OwnedScope::of(&params);
        let kind = if method == method::ITEM_TOOL_CALL {
            DynamicToolCall::deserialize(&params)
                .map(RequestKind::DynamicToolCall)
                .unwrap_or(RequestKind::Other)
        } else {
            ApprovalKind::from_method(&method)
                .map(RequestKind::Approval)
                .unwrap_or(RequestKind::Other)
        };
        Request {
            id,
            method,
            params,
            scope,
            kind,
        }
    }
}

/// One breakdown of `thread/tokenUsage/updated`'s `tokenUsage` (`last` model call or `total`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct TokenBreakdown {
    pub total_tokens: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

/// `thread/tokenUsage/updated`'s `tokenUsage`: the last model call's tokens, the thread's, and
/// the model's context window when Codex knows it. Read leniently: a missing field is zero.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct TokenUsage {
    pub last: TokenBreakdown,
    pub total: TokenBreakdown,
    pub model_context_window: Option<u64>,
}

impl TokenUsage {
    /// The usage in a `thread/tokenUsage/updated` notification's params (their `tokenUsage`);
    /// `None` when they are not that shape.
    pub fn of_params(params: &str) -> Option<TokenUsage> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Updated {
            token_usage: TokenUsage,
        }
        serde_json::from_str::<Updated>(params)
            .ok()
            .map(|updated| updated.token_usage)
    }

    /// Whether the last model call's input filled the model's context window (at or past it):
    /// what repeated compactions should have prevented. False when no window is told.
    pub fn input_fills_window(&self) -> bool {
        self.model_context_window
            .is_some_and(|window| window > 0 && self.last.input_tokens >= window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_leniently() {
        let opened = ThreadOpenedAnswer::read(
            r#"{"thread":{"id":"thr","path":"/r.jsonl","turns":[]},"model":"gpt-5.5","cwd":"/w","approvalPolicy":"never"}"#,
        );
        assert_eq!(opened.thread.id.as_deref(), Some("thr"));
        assert_eq!(opened.thread.path.as_deref(), Some("/r.jsonl"));
        assert_eq!(opened.model.as_deref(), Some("gpt-5.5"));
        assert_eq!(opened.cwd.as_deref(), Some("/w"));
        // A field of another type reads as absent; the rest of the answer is still read.
        let odd = ThreadOpenedAnswer::read(r#"{"thread":{"id":"thr","path":null},"model":5}"#);
        assert_eq!(odd.thread.id.as_deref(), Some("thr"));
        assert_eq!((odd.thread.path, odd.model), (None, None));
        // Not an object at all: nothing learnt, nothing failed.
        assert_eq!(
            ThreadOpenedAnswer::read("[1]"),
            ThreadOpenedAnswer::default()
        );
        assert_eq!(
            TurnStartedAnswer::read(r#"{"turn":{"id":"t1","items":[]}}"#)
                .turn
                .id
                .as_deref(),
            Some("t1")
        );
        assert_eq!(
            ReviewStartedAnswer::read(r#"{"reviewThreadId":"r1","turn":{}}"#)
                .review_thread_id
                .as_deref(),
            Some("r1")
        );
    }
    use serde_json::json;

    #[test]
    fn notifications_are_typed_from_one_parse() {
        let done = Notification::new(
            "turn/completed",
            json!({"threadId": "t", "turn": {"id": "u", "status": "interrupted", "error": {"message": "stop"}}}),
        );
        assert_eq!(
            done.kind,
            NotificationKind::TurnCompleted {
                state: Some(TurnState::Interrupted),
                error: Some("stop".into())
            }
        );
        assert!(done.scope().is_turn("t", "u"));
        let message = Notification::new(
            "item/completed",
            json!({"threadId": "t", "turnId": "u", "item": {"type": "agentMessage", "text": "hi"}}),
        );
        assert_eq!(
            message.kind,
            NotificationKind::AgentMessage { text: "hi".into() }
        );
        let other = Notification::new("thread/tokenUsage/updated", json!({"threadId": "t"}));
        assert_eq!(other.kind, NotificationKind::Other);
        assert_eq!(other.scope().thread_id.as_deref(), Some("t"));
    }

    #[test]
    fn one_lenient_pass_reads_every_shape() {
        use NotificationKind as K;
        let agent = |text: &str| K::AgentMessage {
            text: text.to_string(),
        };
        // (method, params, thread, turn, kind)
        type Case<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>, K);
        let cases: [Case<'_>; 14] = [
            (
                "turn/started",
                r#"{"threadId":"t","turn":{"id":"u","items":[]}}"#,
                Some("t"),
                Some("u"),
                K::TurnStarted,
            ),
            (
                "turn/completed",
                r#"{"threadId":"t","turn":{"id":"u","status":"failed","error":{"message":"quota \"hit\""}}}"#,
                Some("t"),
                Some("u"),
                K::TurnCompleted {
                    state: Some(TurnState::Failed),
                    error: Some("quota \"hit\"".into()),
                },
            ),
            (
                "turn/completed",
                r#"{"threadId":"t","turn":{"id":"u","status":"someNewState","error":null}}"#,
                Some("t"),
                Some("u"),
                K::TurnCompleted {
                    state: None,
                    error: None,
                },
            ),
            (
                "item/completed",
                r#"{"threadId":"t","turnId":"u","item":{"type":"agentMessage","id":"m","text":"h\u00e9"}}"#,
                Some("t"),
                Some("u"),
                agent("h\u{e9}"),
            ),
            (
                "item/completed",
                r#"{"threadId":"t","turnId":"u","item":{"type":"reasoning","text":"x"}}"#,
                Some("t"),
                Some("u"),
                K::Other,
            ),
            (
                "item/completed",
                r#"{"threadId":"t","turnId":"u","item":{"type":"agentMessage","text":["not","text"]}}"#,
                Some("t"),
                Some("u"),
                K::Other,
            ),
            (
                "item/agentMessage/delta",
                r#"{"threadId":"t","turnId":"u","itemId":"m","delta":"d"}"#,
                Some("t"),
                Some("u"),
                K::Other,
            ),
            (
                "error",
                r#"{"threadId":"t","turnId":"u","error":{"message":"boom"},"willRetry":true}"#,
                Some("t"),
                Some("u"),
                K::Error {
                    message: Some("boom".into()),
                },
            ),
            // Fields of another type read as absent, never as a failure of the whole pass.
            (
                "thread/started",
                r#"{"thread":{"id":"t"},"threadId":7}"#,
                Some("t"),
                None,
                K::Other,
            ),
            ("thread/started", r#"{"thread":"t"}"#, None, None, K::Other),
            (
                "turn/completed",
                r#"{"threadId":"t","turn":["u"],"turnId":{"id":"u"}}"#,
                Some("t"),
                None,
                K::TurnCompleted {
                    state: None,
                    error: None,
                },
            ),
            (
                "error",
                r#"{"threadId":"t","error":"boom"}"#,
                Some("t"),
                None,
                K::Error { message: None },
            ),
            ("weird", r#"[1,2]"#, None, None, K::Other),
            ("weird", r#"{}"#, None, None, K::Other),
        ];
        for (method, text, thread, turn, kind) in cases {
            let raw = RawParams::from_value(&serde_json::from_str(text).expect("json"));
            let typed = Notification::from_raw(method, raw);
            assert_eq!(
                typed.scope().thread_id.as_deref(),
                thread,
                "{method} {text}"
            );
            assert_eq!(typed.scope().turn_id.as_deref(), turn, "{method} {text}");
            assert_eq!(typed.kind, kind, "{method} {text}");
        }
        // A duplicated key (never sent by Codex) reads as empty, without a panic.
        let Ok(notification) = crate::protocol::wire::decode(
            r#"{"method":"item/agentMessage/delta","params":{"threadId":"t","threadId":"dup"}}"#
                .to_string(),
        ) else {
            panic!("a notification")
        };
        let Inbound::Notification(typed) = Inbound::from_incoming(notification) else {
            panic!("a notification")
        };
        assert_eq!(typed.scope(), Scope::default());
        // The params are kept byte for byte, whatever their key order.
        let text = r#"{"turnId":"u","threadId":"t"}"#;
        let Ok(notification) = crate::protocol::wire::decode(format!(
            r#"{{"method":"turn/started","params":{text}}}"#
        )) else {
            panic!("a notification")
        };
        let Inbound::Notification(typed) = Inbound::from_incoming(notification) else {
            panic!("a notification")
        };
        assert_eq!(typed.params.get(), text);
        assert!(typed.scope().is_turn("t", "u"));
    }

    #[test]
    fn approvals_and_tool_calls_are_types_not_name_patterns() {
        let id = RequestId::Integer(1);
        let call = Request::new(
            id.clone(),
            "item/tool/call".into(),
            json!({"threadId": "t", "turnId": "u", "callId": "c", "tool": "message", "arguments": {}}),
        );
        assert!(matches!(call.kind, RequestKind::DynamicToolCall(ref c) if c.tool == "message"));
        let legacy = Request::new(id.clone(), "execCommandApproval".into(), json!({}));
        assert_eq!(
            legacy.kind,
            RequestKind::Approval(ApprovalKind::LegacyExecCommand)
        );
        assert_eq!(
            ApprovalKind::LegacyExecCommand.answer(true),
            json!({"decision": "approved"})
        );
        assert_eq!(
            ApprovalKind::FileChange.answer(false),
            json!({"decision": "decline"})
        );
        // A method that merely ends like an approval is not one.
        let unknown = Request::new(id, "account/someApproval".into(), json!({}));
        assert_eq!(unknown.kind, RequestKind::Other);
    }

    #[test]
    fn the_context_alarm_is_an_input_at_or_past_the_window() {
        let usage = |input: u64, window: u64| {
            TokenUsage::of_params(
                &json!({"threadId": "t", "turnId": "u", "tokenUsage": {"last": {"inputTokens": input}, "total": {}, "modelContextWindow": window}})
                    .to_string(),
            )
            .expect("usage")
        };
        assert!(usage(258_400, 258_400).input_fills_window());
        assert!(usage(300_000, 258_400).input_fills_window());
        assert!(!usage(200_000, 258_400).input_fills_window());
        assert!(
            !usage(10, 0).input_fills_window(),
            "no window told: no alarm"
        );
        assert!(!TokenUsage::default().input_fills_window());
        assert_eq!(TokenUsage::of_params("{}"), None);
    }
}
