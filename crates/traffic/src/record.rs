//! What the model-traffic plane records: a model-bound request as it was sent, and the order of
//! requests and answers the forwarder saw. Shared by the stub, the forwarder and the capture
//! writer, so none of them imports another for its types.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// A model-bound request as the stub received it.
#[derive(Clone, Debug, Serialize)]
pub struct CapturedRequest {
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Value,
    /// When the request reached the forwarder or the stub (a trace's model call starts here;
    /// never written: captures carry no timestamps).
    #[serde(skip)]
    pub at: Option<std::time::SystemTime>,
}

/// What the forwarder records, in the order it happens.
#[derive(Debug)]
pub enum Recorded {
    Request { id: u64, request: CapturedRequest },
    Response { id: u64, response: Value },
}

impl CapturedRequest {
    /// A request from its headers and body bytes (a body that is not JSON is kept as null).
    pub fn from_parts(headers: BTreeMap<String, String>, body: &[u8]) -> Self {
        CapturedRequest {
            // The secret segment is left out: captures are shared, the secret is not.
            path: "/v1/responses".to_string(),
            headers,
            body: serde_json::from_slice(body).unwrap_or(Value::Null),
            at: Some(std::time::SystemTime::now()),
        }
    }
}

/// The files of a transcript folder that are not a thread's (`connection.jsonl`,
/// `conformance.jsonl`, `audit.jsonl` of `app-server --audit`, the `model-requests/` folder):
/// the writer never names a thread's file so, and the readers skip them.
pub const RESERVED_NAMES: [&str; 4] = ["connection", "conformance", "audit", "model-requests"];
