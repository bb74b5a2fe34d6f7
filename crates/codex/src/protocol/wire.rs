//! The JSON-RPC wire as `codex app-server` speaks it (docs/codex-wire.md §2).
//!
//! Codex never sends a `"jsonrpc"` field, and ids are integers or strings whose JSON type must be
//! echoed exactly (`53` is not `"53"`). Inbound messages are routed on their envelope alone
//! (`id`, `method`, `result`/`error`); `params` and `result` stay raw JSON until a consumer asks
//! for them, so a long stream of deltas is never fully parsed by the transport. One pass over each
//! line ([`super::scan`]) validates it, finds the envelope and peeks the few params fields the
//! driver reads; params and results are ranges of the line, never copied out of it.

use super::table::{CodexMethod, Flow};
use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::scan::{scan_line, Peek, ScanError};

/// A copy of each line a peer sends (`in`: to Codex) and receives (`out`), without its newline.
/// Called on the peer's own tasks: it must not wait (a queue that skips when full).
pub type LineTap = std::sync::Arc<dyn Fn(Direction, &[u8]) + Send + Sync>;

/// Makes the tap of each new connection (each app-server incarnation gets its own, so a
/// transcript files each connection's request ids apart); `None` taps nothing.
#[derive(Clone)]
pub struct TapMaker(pub std::sync::Arc<dyn Fn() -> Option<LineTap> + Send + Sync>);

impl std::fmt::Debug for TapMaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TapMaker")
    }
}

/// The version token of a `userAgent` (`<name>/<version> (...)`), as `initialize` answers it.
pub fn version_from_user_agent(user_agent: &str) -> Option<String> {
    let (_, rest) = user_agent.split_once('/')?;
    let token: String = rest.chars().take_while(|ch| !ch.is_whitespace()).collect();
    (!token.is_empty()).then_some(token)
}

/// Which way a line went between a client and Codex: `in` from the client to Codex (what
/// clawbridge sends when it is the client), `out` from Codex. The transcripts and the taps
/// name both ends this way, whichever face carried the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to Codex.
    In,
    /// From Codex to the client.
    Out,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// A request id, kept with its JSON type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Integer(id) => write!(f, "{id}"),
            RequestId::String(id) => write!(f, "{id:?}"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// JSON-RPC "method not found" (what we answer to server requests we do not handle).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "internal error".
pub const INTERNAL_ERROR: i64 = -32603;

/// The text of one frame, shared by the parts borrowed from it. Ordinary lines are copied once
/// out of the read buffer into an `Arc<str>`; a huge line is moved in without a copy.
#[derive(Clone, Debug)]
enum Line {
    Shared(std::sync::Arc<str>),
    Moved(std::sync::Arc<String>),
}

impl Line {
    fn as_str(&self) -> &str {
        match self {
            Line::Shared(text) => text,
            Line::Moved(text) => text,
        }
    }
}

/// A slice of a frame's text: raw JSON (`params`, `result`) or a string's contents (`method`),
/// kept without parsing or copying until a consumer asks for it.
#[derive(Clone, Debug)]
pub struct RawJson {
    line: Line,
    start: usize,
    end: usize,
}

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.line.as_str()[self.start..self.end]
    }

    /// Parse it.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    fn literal(json: &'static str) -> Self {
        RawJson {
            line: Line::Shared(std::sync::Arc::from(json)),
            start: 0,
            end: json.len(),
        }
    }

    fn span(line: &Line, range: std::ops::Range<usize>) -> Self {
        RawJson {
            line: line.clone(),
            start: range.start,
            end: range.end,
        }
    }

    fn owned(text: String) -> Self {
        let end = text.len();
        RawJson {
            line: Line::Moved(std::sync::Arc::new(text)),
            start: 0,
            end,
        }
    }
}

/// The params of a request or notification, exactly as Codex sent them: a range of the line,
/// validated by the one pass that framed it and never parsed again unless a consumer asks.
/// Absent (or `null`) params read as `{}`. Serialized, they are written byte for byte.
#[derive(Clone, Debug, Default)]
pub struct RawParams(Option<RawJson>);

impl RawParams {
    /// The JSON text (`{}` when the message had no params).
    pub fn get(&self) -> &str {
        self.0.as_ref().map_or("{}", RawJson::get)
    }

    /// Parse them.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    /// Params from a value (tests, and events built by clawbridge itself).
    pub fn from_value(value: &serde_json::Value) -> Self {
        RawParams(Some(RawJson::owned(value.to_string())))
    }
}

impl PartialEq for RawParams {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl schemars::JsonSchema for RawParams {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NotificationParams".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A Codex notification's params, exactly as Codex sent them (Codex's own schema: `codex app-server generate-json-schema`).",
            "type": "object"
        })
    }
}

impl Serialize for RawParams {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            // Checked JSON already; serde_json writes a `RawValue` as it is.
            Some(raw) => serde_json::from_str::<&RawValue>(raw.get())
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
            None => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// A method name (borrowed from the frame when it needs no unescaping).
#[derive(Clone, Debug)]
pub struct Method(MethodText);

#[derive(Clone, Debug)]
enum MethodText {
    /// One of the methods Codex sends often: no allocation, no reference to the line.
    Known(&'static str),
    Slice(RawJson),
    Owned(String),
}

impl Method {
    pub fn as_str(&self) -> &str {
        match &self.0 {
            MethodText::Known(text) => text,
            MethodText::Slice(raw) => raw.get(),
            MethodText::Owned(text) => text,
        }
    }

    fn of_line(line: &Line, range: std::ops::Range<usize>) -> Method {
        let text = line.as_str().get(range.clone()).unwrap_or_default();
        // The notifications a turn streams are named without holding the line.
        match CodexMethod::from_name(text).filter(|method| method.flow() == Flow::Notification) {
            Some(known) => Method(MethodText::Known(known.name())),
            None => Method(MethodText::Slice(RawJson::span(line, range))),
        }
    }
}

impl PartialEq for Method {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<String> for Method {
    fn from(text: String) -> Self {
        Method(MethodText::Owned(text))
    }
}

impl std::ops::Deref for Method {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Method {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl From<&str> for Method {
    fn from(text: &str) -> Self {
        Method(MethodText::Owned(text.to_string()))
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One inbound message.
#[derive(Debug)]
pub enum Incoming {
    /// A server-initiated request: must be answered with exactly this id.
    Request {
        id: RequestId,
        method: Method,
        params: RawParams,
    },
    Notification {
        method: Method,
        params: RawParams,
        /// What the framing pass read of the params (ranges into `params`).
        peek: Peek,
    },
    Response {
        id: RequestId,
        result: Result<RawJson, RpcError>,
    },
}

impl Incoming {
    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Incoming::Request { method, .. } | Incoming::Notification { method, .. } => {
                Some(method)
            }
            Incoming::Response { .. } => None,
        }
    }

    /// Parse the params of a request or notification.
    pub fn params<T: DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        match self {
            Incoming::Request { params, .. } | Incoming::Notification { params, .. } => {
                Some(serde_json::from_str(params.get()))
            }
            Incoming::Response { .. } => None,
        }
    }
}

/// Why a line is not a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("invalid JSON: {0}")]
    Json(#[from] ScanError),
    #[error("not a JSON-RPC message (no method and no id)")]
    NotAMessage,
}

impl DecodeError {
    /// The line ended inside a string: a raw newline may have split the message.
    pub fn is_unterminated_string(&self) -> bool {
        matches!(self, DecodeError::Json(ScanError::UnterminatedString))
    }
}

/// Decode one frame (taking the line, which the message keeps).
pub fn decode(frame: impl Into<String>) -> Result<Incoming, DecodeError> {
    decode_line(Line::Moved(std::sync::Arc::new(frame.into())))
}

/// Decode a frame borrowed from a read buffer: the text is copied exactly once.
pub fn decode_slice(frame: &str) -> Result<Incoming, DecodeError> {
    decode_line(Line::Shared(std::sync::Arc::from(frame)))
}

fn decode_line(line: Line) -> Result<Incoming, DecodeError> {
    let envelope = scan_line(line.as_str())?;
    let method = envelope.method.map(|text| {
        if text.is_plain() {
            Method::of_line(&line, text.range())
        } else {
            Method(MethodText::Owned(text.read(line.as_str()).into_owned()))
        }
    });
    let (params, peek) = match envelope.params {
        Some((range, peek)) => (RawParams(Some(RawJson::span(&line, range))), peek),
        None => (RawParams(None), Peek::default()),
    };
    match (envelope.id, method) {
        (Some(id), Some(method)) => Ok(Incoming::Request { id, method, params }),
        (None, Some(method)) => Ok(Incoming::Notification {
            method,
            params,
            peek,
        }),
        (Some(id), None) => {
            let result = match envelope.error {
                Some(error) => Err(error),
                None => Ok(envelope.result.map_or_else(
                    || RawJson::literal("null"),
                    |range| RawJson::span(&line, range),
                )),
            };
            Ok(Incoming::Response { id, result })
        }
        (None, None) => Err(DecodeError::NotAMessage),
    }
}

/// Outbound messages (strict: typed, no `jsonrpc` field).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Outgoing {
    /// `params` go out as their bytes: clawbridge's own are serialized once (keys sorted, as a
    /// `Value` writes them), a client's pass as the client wrote them.
    Request {
        id: RequestId,
        method: String,
        params: Box<serde_json::value::RawValue>,
        /// W3C trace context, so Codex's own spans of the request join the caller's trace.
        #[serde(skip_serializing_if = "Option::is_none")]
        trace: Option<W3cTraceContext>,
    },
    Notification {
        method: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<Box<serde_json::value::RawValue>>,
    },
    Response {
        id: RequestId,
        result: Box<serde_json::value::RawValue>,
    },
    Error {
        id: RequestId,
        error: RpcError,
    },
}

/// The W3C Trace Context a request may carry (Codex's `JSONRPCRequest.trace`: its spans of the
/// request become children of `traceparent`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct W3cTraceContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

/// clawbridge's own params or answer as the bytes that go out: serialized through a `Value`,
/// so their keys are sorted (the order they always had on the wire).
pub fn own_json<T: Serialize + ?Sized>(
    value: &T,
) -> Result<Box<serde_json::value::RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(&serde_json::to_value(value)?)
}

/// Serialize one message as a line (escapes keep raw newlines out of the frame). Raw params
/// were validated JSON when they were made; a raw newline inside them would be whitespace
/// between tokens, and is replaced by a space so the frame stays one line.
pub fn encode(message: &Outgoing) -> Result<String, serde_json::Error> {
    let mut line = serde_json::to_string(message)?;
    if line.contains(['\n', '\r']) {
        line = line.replace(['\n', '\r'], " ");
    }
    line.push('\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_json_type() {
        let Incoming::Response { id, .. } = decode(r#"{"id":53,"result":{}}"#).expect("decode")
        else {
            panic!("response expected")
        };
        assert_eq!(id, RequestId::Integer(53));
        let Incoming::Request { id, .. } =
            decode(r#"{"id":"53","method":"item/tool/call","params":{}}"#).expect("decode")
        else {
            panic!("request expected")
        };
        assert_eq!(id, RequestId::String("53".to_string()));
        let answer = encode(&Outgoing::Response {
            id,
            result: own_json(&serde_json::json!({})).expect("json"),
        })
        .expect("encode");
        assert_eq!(answer, "{\"id\":\"53\",\"result\":{}}\n");
    }

    #[test]
    fn messages_without_jsonrpc_field_and_errors() {
        assert!(matches!(
            decode(r#"{"method":"turn/started","params":{"x":1}}"#),
            Ok(Incoming::Notification { .. })
        ));
        let Incoming::Response { result, .. } =
            decode(r#"{"id":1,"error":{"code":-32600,"message":"Not initialized"}}"#)
                .expect("decode")
        else {
            panic!("response expected")
        };
        assert_eq!(result.expect_err("error").message, "Not initialized");
        assert!(matches!(decode("{}"), Err(DecodeError::NotAMessage)));
        let line = encode(&Outgoing::Notification {
            method: "initialized".into(),
            params: None,
        })
        .expect("encode");
        assert_eq!(line, "{\"method\":\"initialized\"}\n");
    }
}
