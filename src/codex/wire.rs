//! The JSON-RPC wire as `codex app-server` speaks it (codex-wire.md §2).
//!
//! Codex never sends a `"jsonrpc"` field, and ids are integers or strings whose JSON type must be
//! echoed exactly (`53` is not `"53"`). Inbound messages are routed on their envelope alone
//! (`id`, `method`, `result`/`error`); `params` and `result` stay raw JSON until a consumer asks
//! for them, so a long stream of deltas is never fully parsed by the transport.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

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

/// One inbound message.
#[derive(Debug)]
pub enum Incoming {
    /// A server-initiated request: must be answered with exactly this id.
    Request {
        id: RequestId,
        method: String,
        params: Box<RawValue>,
    },
    Notification {
        method: String,
        params: Box<RawValue>,
    },
    Response {
        id: RequestId,
        result: Result<Box<RawValue>, RpcError>,
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

/// Only the envelope is looked at; everything else stays raw.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// A raw JSON literal we know to be valid.
fn raw_literal(json: &'static str) -> Box<RawValue> {
    RawValue::from_string(json.to_string()).expect("static JSON literal is valid")
}

/// Why a line is not a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a JSON-RPC message (no method and no id)")]
    NotAMessage,
}

/// Decode one frame.
pub fn decode(frame: &str) -> Result<Incoming, DecodeError> {
    let envelope: Envelope = serde_json::from_str(frame)?;
    match (envelope.id, envelope.method) {
        (Some(id), Some(method)) => Ok(Incoming::Request {
            id,
            method,
            params: envelope.params.unwrap_or_else(|| raw_literal("{}")),
        }),
        (None, Some(method)) => Ok(Incoming::Notification {
            method,
            params: envelope.params.unwrap_or_else(|| raw_literal("{}")),
        }),
        (Some(id), None) => {
            let result = match envelope.error {
                Some(error) => Err(error),
                None => Ok(envelope.result.unwrap_or_else(|| raw_literal("null"))),
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
    Request {
        id: RequestId,
        method: String,
        params: serde_json::Value,
    },
    Notification {
        method: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<serde_json::Value>,
    },
    Response {
        id: RequestId,
        result: serde_json::Value,
    },
    Error {
        id: RequestId,
        error: RpcError,
    },
}

/// Serialize one message as a line (escapes keep raw newlines out of the frame).
pub fn encode(message: &Outgoing) -> Result<String, serde_json::Error> {
    let mut line = serde_json::to_string(message)?;
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
            result: serde_json::json!({}),
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
