//! clawbridge's answers to Codex's server requests, typed: what goes back on the wire for a
//! dynamic tool call, a request for user input, an MCP elicitation and a clock read (Codex
//! 0.169.0's generated schema: `DynamicToolCallResponse`, `ToolRequestUserInputResponse`,
//! `McpServerElicitationRequestResponse`). Approvals are answered by
//! [`super::inbound::ApprovalKind::answer`].

use serde::Serialize;
use serde_json::Value;

/// `item/tool/call`'s answer: the tool's content for the model, and whether it worked. A
/// failure is an answer too (Codex tells the model only "dynamic tool request failed" for a
/// JSON-RPC error, docs/codex-wire.md §6).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallResponse {
    /// Content items as Codex takes them (`{type: "inputText", text}`, `{type: "inputImage",
    /// imageUrl}`); a client's items pass as given.
    pub content_items: Vec<Value>,
    pub success: bool,
}

impl DynamicToolCallResponse {
    /// One text item.
    pub fn text(text: impl Into<String>, success: bool) -> Self {
        /// Codex's `inputText` content item.
        #[derive(Serialize)]
        struct InputText {
            #[serde(rename = "type")]
            kind: &'static str,
            text: String,
        }
        let item = InputText {
            kind: "inputText",
            text: text.into(),
        };
        DynamicToolCallResponse {
            content_items: vec![to_value(&item)],
            success,
        }
    }
}

/// An approval's answer: Codex's decision word for the request's form (`accept`/`decline`,
/// or the legacy `approved`/`denied`; [`super::inbound::ApprovalKind::answer`] picks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalResponse {
    pub decision: &'static str,
}

/// `item/tool/requestUserInput`'s answer: no answers (nobody is asked).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ToolRequestUserInputResponse {
    pub answers: serde_json::Map<String, Value>,
}

/// `mcpServer/elicitation/request`'s answer: clawbridge declines (nobody is asked; Codex also
/// knows `accept` and `cancel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ElicitationAction {
    Decline,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct McpServerElicitationResponse {
    pub action: ElicitationAction,
}

/// `currentTime/read`'s answer: seconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentTimeReadResponse {
    pub current_time_at: u64,
}

/// An answer as the JSON the peer sends.
pub fn to_value(answer: &impl Serialize) -> Value {
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_have_codex_s_shapes() {
        assert_eq!(
            to_value(&DynamicToolCallResponse::text("why", false)),
            serde_json::json!({"contentItems": [{"type": "inputText", "text": "why"}], "success": false})
        );
        assert_eq!(
            to_value(&ToolRequestUserInputResponse::default()),
            serde_json::json!({"answers": {}})
        );
        assert_eq!(
            to_value(&McpServerElicitationResponse {
                action: ElicitationAction::Decline
            }),
            serde_json::json!({"action": "decline"})
        );
        assert_eq!(
            to_value(&CurrentTimeReadResponse { current_time_at: 7 }),
            serde_json::json!({"currentTimeAt": 7})
        );
    }
}
