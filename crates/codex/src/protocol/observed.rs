//! What the observers (the span book of traces, the audits) read of a conversation's messages,
//! as lenient typed views: the envelope once ([`Observed::of`]), and the fields of params and
//! answers they act on ([`ObservedParams`], the answer views of [`super::inbound`]).
//!
//! The observers see what the client and Codex actually sent, which the schema does not
//! promise: a field that is missing, or of another JSON type than Codex's schema gives it, reads
//! as absent (and a list's odd element is skipped), never fails the view, so one odd message
//! loses only what it got wrong. Content the observers only carry on (a tool's arguments, its
//! output, an answer's result) stays a JSON value, clipped and redacted where it is used.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::inbound::AnswerView;
use super::wire::W3cTraceContext;

/// One message's envelope, borrowed from its parsed JSON: its method, its id (`null` reads as
/// none), its params and result (`null` when absent), its error and the trace context a client
/// sent with it.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    pub method: Option<&'a str>,
    pub id: Option<&'a Value>,
    pub params: &'a Value,
    pub result: &'a Value,
    error: Option<&'a Value>,
    trace: Option<&'a Value>,
}

impl<'a> Observed<'a> {
    /// The envelope of `message` (anything that is not an object reads as an empty one).
    pub fn of(message: &'a Value) -> Observed<'a> {
        let field = |key: &str| message.get(key).filter(|value| !value.is_null());
        Observed {
            method: field("method").and_then(Value::as_str),
            id: field("id"),
            params: field("params").unwrap_or(&Value::Null),
            result: field("result").unwrap_or(&Value::Null),
            error: field("error"),
            trace: field("trace"),
        }
    }

    /// The thread the params name (`threadId`), borrowed: the cheap read for the paths that
    /// need nothing else of the params.
    pub fn thread_id(&self) -> Option<&'a str> {
        text_at(self.params, &["threadId"])
    }

    /// The thread a message is about, wherever it names it: its params' `threadId`, `thread.id`
    /// or `conversationId`, or the thread a `thread/start` answer opened (`result.thread.id`).
    pub fn thread(&self) -> Option<&'a str> {
        self.thread_id()
            .or_else(|| text_at(self.params, &["thread", "id"]))
            .or_else(|| self.opened_thread())
            .or_else(|| text_at(self.params, &["conversationId"]))
    }

    /// The thread an answer to `thread/start`, `thread/resume` or `thread/fork` opened.
    pub fn opened_thread(&self) -> Option<&'a str> {
        text_at(self.result, &["thread", "id"])
    }

    /// The folder the params name (`cwd`).
    pub fn cwd(&self) -> Option<&'a str> {
        text_at(self.params, &["cwd"])
    }

    /// The `userAgent` of an `initialize` answer.
    pub fn user_agent(&self) -> Option<&'a str> {
        text_at(self.result, &["userAgent"])
    }

    /// A view of params alone (params a client sent earlier, kept whole).
    pub fn params_of(params: &'a Value) -> Observed<'a> {
        Observed {
            method: None,
            id: None,
            params,
            result: &Value::Null,
            error: None,
            trace: None,
        }
    }

    /// The params as the observers read them.
    pub fn params(&self) -> ObservedParams {
        read_or_default(self.params)
    }

    /// The answer's error, if it is one: its message (`null` when it gave none).
    pub fn error(&self) -> Option<ObservedError> {
        self.error.map(read_or_default)
    }

    /// The trace context a client sent beside its request (`trace`), if it reads as one.
    pub fn trace(&self) -> Option<W3cTraceContext> {
        self.trace
            .and_then(|trace| W3cTraceContext::deserialize(trace).ok())
    }

    /// The result read through one of the answer views (empty when it is not an object).
    pub fn answer<A: AnswerView>(&self) -> A {
        read_or_default(self.result)
    }
}

/// A JSON-RPC error as the observers read it: its message, as Codex or the client wrote it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ObservedError {
    pub message: Option<Value>,
}

/// What the observers read of a message's params, whatever its method: one view, since each
/// field means the same in every message that has it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObservedParams {
    #[serde(deserialize_with = "lenient")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub turn_id: Option<String>,
    /// `initialize`: who the client says it is.
    #[serde(deserialize_with = "lenient_or_default")]
    pub client_info: ClientInfoView,
    /// `turn/start`, `turn/steer`: the user's input items.
    #[serde(deserialize_with = "lenient_list")]
    pub input: Vec<InputView>,
    /// `turn/start`, `thread/start`: the model and folder the client asks for.
    #[serde(deserialize_with = "lenient")]
    pub model: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub cwd: Option<String>,
    /// `thread/start`, `thread/resume`, `thread/fork`: the thread's developer instructions.
    #[serde(deserialize_with = "lenient")]
    pub developer_instructions: Option<String>,
    /// `turn/start`: the keys of the context the client adds to the turn.
    #[serde(deserialize_with = "lenient_or_default")]
    pub additional_context: serde_json::Map<String, Value>,
    /// `thread/inject_items`: the items a client puts into a thread.
    #[serde(deserialize_with = "lenient_list")]
    pub items: Vec<InjectedItem>,
    /// `turn/started`, `turn/completed`.
    #[serde(deserialize_with = "lenient")]
    pub turn: Option<ObservedTurn>,
    /// `item/started`, `item/completed`.
    #[serde(deserialize_with = "lenient")]
    pub item: Option<ObservedItem>,
    /// `thread/tokenUsage/updated`.
    #[serde(deserialize_with = "lenient_or_default")]
    pub token_usage: TokenUsageView,
    /// `item/tool/call`: the call, the tool and its arguments.
    #[serde(deserialize_with = "lenient")]
    pub call_id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub tool: Option<String>,
    pub arguments: Value,
}

impl ObservedParams {
    /// The texts of the user's input items, joined by newlines.
    pub fn input_text(&self) -> String {
        self.input
            .iter()
            .filter_map(|item| item.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `initialize`'s `clientInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ClientInfoView {
    #[serde(deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub version: Option<String>,
}

/// An item a client injects into a thread: a message whose content parts carry texts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct InjectedItem {
    #[serde(deserialize_with = "lenient_list")]
    pub content: Vec<InputView>,
}

impl ObservedParams {
    /// The texts of the injected items' content, in order.
    pub fn injected_texts(&self) -> impl Iterator<Item = &str> {
        self.items
            .iter()
            .flat_map(|item| &item.content)
            .filter_map(|part| part.text.as_deref())
    }
}

/// A user input item or a content part (`{type: text, text}`); only its text is read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct InputView {
    #[serde(deserialize_with = "lenient")]
    pub text: Option<String>,
}

/// A turn as `turn/started` and `turn/completed` give it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ObservedTurn {
    #[serde(deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub status: Option<String>,
    /// Present when the turn failed (an object; its message may be anything).
    #[serde(deserialize_with = "lenient")]
    pub error: Option<ObservedError>,
    #[serde(deserialize_with = "lenient_list")]
    pub items: Vec<ObservedItem>,
}

/// A thread item as `item/started`, `item/completed` and a turn's `items` give it: what it is,
/// and for a tool call what it was asked and what it gave back (content, kept as sent).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObservedItem {
    #[serde(rename = "type", deserialize_with = "lenient")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub status: Option<String>,
    /// An agent message's text.
    #[serde(deserialize_with = "lenient")]
    pub text: Option<String>,
    /// An MCP call's server, an MCP or dynamic call's tool.
    #[serde(deserialize_with = "lenient")]
    pub server: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub tool: Option<String>,
    /// What a tool item was asked to do, by kind (`null` reads as absent).
    pub command: Option<Value>,
    pub arguments: Option<Value>,
    pub query: Option<Value>,
    pub changes: Option<Value>,
    /// What a tool item gave back, by kind (`null` reads as absent).
    pub aggregated_output: Option<Value>,
    pub result: Option<Value>,
    pub content_items: Option<Value>,
    pub error: Option<Value>,
}

impl ObservedItem {
    /// True for an `agentMessage` item.
    pub fn is_agent_message(&self) -> bool {
        self.kind.as_deref() == Some("agentMessage")
    }

    /// What a tool item was asked to do: the first of its command, arguments, query or changes.
    pub fn tool_input(&self) -> Option<&Value> {
        [&self.command, &self.arguments, &self.query, &self.changes]
            .into_iter()
            .find_map(Option::as_ref)
    }

    /// What a tool item gave back: the first of its output, result, content items or error.
    pub fn tool_output(&self) -> Option<&Value> {
        [
            &self.aggregated_output,
            &self.result,
            &self.content_items,
            &self.error,
        ]
        .into_iter()
        .find_map(Option::as_ref)
    }
}

/// `thread/tokenUsage/updated`'s `tokenUsage`: the last model call's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TokenUsageView {
    #[serde(deserialize_with = "lenient_or_default")]
    pub last: TokenCounts,
}

/// One model call's token counts (a count that is not an integer reads as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TokenCounts {
    #[serde(deserialize_with = "lenient_or_default")]
    pub input_tokens: i64,
    #[serde(deserialize_with = "lenient_or_default")]
    pub cached_input_tokens: i64,
    #[serde(deserialize_with = "lenient_or_default")]
    pub output_tokens: i64,
    #[serde(deserialize_with = "lenient_or_default")]
    pub reasoning_output_tokens: i64,
}

/// A client's answer to an approval or a tool call, as the observers read it: the decision
/// (`{"decision": "accept"}`, or an object whose one key names it), else a tool call's
/// `success`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ClientAnswerView {
    pub decision: Value,
    #[serde(deserialize_with = "lenient")]
    pub success: Option<bool>,
}

impl AnswerView for ClientAnswerView {}

impl ClientAnswerView {
    /// The decision in words: `accept`, `decline`, …, `success`/`failure` for a tool call, else
    /// `answered`.
    pub fn decision(&self) -> String {
        match &self.decision {
            Value::String(text) => text.clone(),
            Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
            _ => match self.success {
                Some(true) => "success".to_string(),
                Some(false) => "failure".to_string(),
                None => "answered".to_string(),
            },
        }
    }
}

/// The string at `path` inside `value`, if there is one.
fn text_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(value, |value, key| value.get(key))
        .and_then(Value::as_str)
}

/// A view of `value`, or the empty view when it does not read as one.
fn read_or_default<T: DeserializeOwned + Default>(value: &Value) -> T {
    T::deserialize(value).unwrap_or_default()
}

/// A field read leniently: kept when it reads as `T`, absent otherwise.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}

/// A field read leniently, its type's default when it does not read as `T`.
fn lenient_or_default<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(lenient(deserializer)?.unwrap_or_default())
}

/// A list read leniently: its elements that read as `T`; nothing when it is not a list.
fn lenient_list<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|item| T::deserialize(item).ok())
            .collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_reads_null_as_absent() {
        let message = json!({"id": null, "method": "turn/started", "params": null, "error": null});
        let observed = Observed::of(&message);
        assert_eq!(observed.method, Some("turn/started"));
        assert!(observed.id.is_none());
        assert!(observed.error().is_none());
        assert_eq!(observed.params(), ObservedParams::default());
        let odd = json!(["not", "a", "message"]);
        assert!(Observed::of(&odd).method.is_none());
    }

    #[test]
    fn a_message_names_its_thread_wherever_it_is() {
        let thread = |message: Value| Observed::of(&message).thread().map(str::to_string);
        assert_eq!(
            thread(json!({"params": {"threadId": "a", "thread": {"id": "b"}}})).as_deref(),
            Some("a")
        );
        assert_eq!(
            thread(json!({"params": {"threadId": 1, "thread": {"id": "b"}}})).as_deref(),
            Some("b")
        );
        assert_eq!(
            thread(json!({"id": 1, "result": {"thread": {"id": "c"}}})).as_deref(),
            Some("c")
        );
        assert_eq!(
            thread(json!({"params": {"conversationId": "d"}})).as_deref(),
            Some("d")
        );
        assert_eq!(thread(json!({"params": {"cwd": "/w"}})), None);
        let answer = json!({"id": 0, "result": {"userAgent": "codex/0.169.0"}});
        assert_eq!(Observed::of(&answer).user_agent(), Some("codex/0.169.0"));
        let start = json!({"method": "thread/start", "params": {"cwd": "/w"}});
        assert_eq!(Observed::of(&start).cwd(), Some("/w"));
    }

    #[test]
    fn a_field_of_another_type_reads_as_absent_and_the_rest_is_read() {
        let params = json!({
            "threadId": 7,
            "turnId": "u",
            "clientInfo": "me",
            "input": [{"type": "text", "text": "a"}, 5, {"text": null}, {"text": "b"}],
            "turn": {"id": "u", "status": 3, "error": "boom", "items": [
                {"type": "agentMessage", "text": "hi"}, "odd", {"type": 1}
            ]},
            "tokenUsage": {"last": {"inputTokens": 10, "cachedInputTokens": "x", "outputTokens": 2.5}},
        });
        let read: ObservedParams = read_or_default(&params);
        assert_eq!(read.thread_id, None);
        assert_eq!(read.turn_id.as_deref(), Some("u"));
        assert_eq!(read.client_info, ClientInfoView::default());
        assert_eq!(read.input_text(), "a\nb");
        let turn = read.turn.expect("turn");
        assert_eq!(turn.status, None);
        assert_eq!(turn.error, None);
        assert_eq!(turn.items.len(), 2);
        assert!(turn.items[0].is_agent_message());
        assert_eq!(read.token_usage.last.input_tokens, 10);
        assert_eq!(read.token_usage.last.cached_input_tokens, 0);
        assert_eq!(read.token_usage.last.output_tokens, 0);
    }

    #[test]
    fn a_tool_item_gives_its_first_input_and_output() {
        let item: ObservedItem = read_or_default(&json!({
            "type": "commandExecution", "id": "c", "command": null, "arguments": {"a": 1},
            "query": "q", "aggregatedOutput": null, "result": "r", "error": "e"
        }));
        assert_eq!(item.tool_input(), Some(&json!({"a": 1})));
        assert_eq!(item.tool_output(), Some(&json!("r")));
        assert_eq!(ObservedItem::default().tool_input(), None);
    }

    #[test]
    fn a_client_answer_names_its_decision() {
        let decision = |result: Value| ClientAnswerView::read(&result.to_string()).decision();
        assert_eq!(decision(json!({"decision": "accept"})), "accept");
        assert_eq!(
            decision(json!({"decision": {"acceptWithExecpolicyAmendment": {}}})),
            "acceptWithExecpolicyAmendment"
        );
        assert_eq!(
            decision(json!({"success": false, "contentItems": []})),
            "failure"
        );
        assert_eq!(decision(json!({"contentItems": []})), "answered");
        assert_eq!(decision(json!("odd")), "answered");
    }
}
