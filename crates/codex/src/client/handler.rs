//! The default answers to Codex's server requests.
//!
//! Dynamic tool calls go to an external tool handler command (`--tool-handler CMD`): it gets
//! `{tool, namespace, arguments, callId, threadId, turnId}` as JSON on stdin and prints
//! `{"text": ...}` or `{"contentItems": [...]}` plus `"success"` on stdout. Without a handler,
//! or when it fails, the answer is `success: false` with a text that says why: Codex drops the
//! message of a JSON-RPC error and tells the model only "dynamic tool request failed"
//! (docs/codex-wire.md §6), so tool failures are never reported as RPC errors. Approvals are declined
//! unless approving was asked for; unknown methods get a JSON-RPC error.

use crate::protocol::table::name as method;
use std::time::Duration;

use serde_json::Value;

use super::session::{HandlerFuture, HandlerResult, ServerRequest, ServerRequestHandler};
use crate::protocol::answers::{self, DynamicToolCallResponse};
use crate::protocol::inbound::{DynamicToolCall, RequestKind};
use crate::protocol::wire::{RpcError, METHOD_NOT_FOUND};

/// Largest tool handler output read.
const MAX_TOOL_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// A tool handler without a configured timeout still ends (the CLI passes `--idle-timeout`).
const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(300);

/// Tool handler command plus the approval policy.
#[derive(Clone, Debug, Default)]
pub struct DefaultHandler {
    /// Shell command run for each dynamic tool call.
    pub tool_command: Option<String>,
    /// Approve approval requests instead of declining them.
    pub approve: bool,
    pub tool_timeout: Option<Duration>,
}

fn tool_failure(text: String) -> Value {
    answers::to_value(&DynamicToolCallResponse::text(text, false))
}

/// Why a tool answer (a tool handler's stdout, or a client's `bridge.toolResult`) is unusable.
/// The messages name no source; the caller says whose answer it was.
#[derive(Debug, thiserror::Error)]
pub enum ToolAnswerError {
    #[error("is not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("has no boolean `success`")]
    NoSuccess,
    #[error("needs `text` (a string) or `contentItems` (an array)")]
    NoContent,
}

/// Turn `{text | contentItems, success}` into Codex's `{contentItems, success}`.
pub fn tool_answer(value: &Value) -> Result<Value, ToolAnswerError> {
    let success = value
        .get("success")
        .and_then(Value::as_bool)
        .ok_or(ToolAnswerError::NoSuccess)?;
    let answer = match (value.get("contentItems"), value.get("text")) {
        (Some(Value::Array(items)), _) => DynamicToolCallResponse {
            content_items: items.clone(),
            success,
        },
        (None, Some(Value::String(text))) => DynamicToolCallResponse::text(text.as_str(), success),
        _ => return Err(ToolAnswerError::NoContent),
    };
    Ok(answers::to_value(&answer))
}

/// [`tool_answer`] of a tool handler's stdout.
pub fn tool_answer_from_output(output: &[u8]) -> Result<Value, ToolAnswerError> {
    tool_answer(&serde_json::from_slice(output)?)
}

/// What a `--tool-handler` command reads on stdin: the call as Codex named it, with its thread
/// and turn (the fields in the order the bytes have always had: sorted).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCommandInput<'a> {
    arguments: &'a Value,
    call_id: &'a Value,
    namespace: &'a Value,
    thread_id: Option<&'a str>,
    tool: &'a str,
    turn_id: Option<&'a str>,
}

impl DefaultHandler {
    async fn tool_call(&self, request: &ServerRequest) -> Value {
        let fallback = DynamicToolCall::default();
        let call = match &request.kind {
            RequestKind::DynamicToolCall(call) => call,
            _ => &fallback,
        };
        let tool = match call.tool.as_str() {
            "" => "<unnamed>".to_string(),
            named => named.to_string(),
        };
        let Some(command) = &self.tool_command else {
            return tool_failure(format!(
                "The tool `{tool}` is not available in this clawbridge run (no --tool-handler was configured)."
            ));
        };
        let scope = request.scope();
        let input = ToolCommandInput {
            arguments: &call.arguments,
            call_id: &call.call_id,
            namespace: &call.namespace,
            thread_id: scope.thread_id.as_deref(),
            tool: &tool,
            turn_id: scope.turn_id.as_deref(),
        };
        match self.run_tool_command(command, &input).await {
            Ok(answer) => answer,
            Err(why) => {
                tracing::warn!("tool handler for `{tool}`: {why}");
                tool_failure(format!("The tool `{tool}` failed: {why}"))
            }
        }
    }

    async fn run_tool_command(
        &self,
        command: &str,
        input: &ToolCommandInput<'_>,
    ) -> Result<Value, String> {
        let bytes = serde_json::to_vec(input).map_err(|error| error.to_string())?;
        let timeout = self.tool_timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT);
        let owned = command.to_string();
        // One deadline for the stdin write, the output and the exit; output capped as it is read.
        let output = tokio::task::spawn_blocking(move || {
            clawbridge_support::process::run_shell_bounded(
                &owned,
                &bytes,
                timeout,
                MAX_TOOL_OUTPUT_BYTES,
            )
        })
        .await
        .map_err(|error| format!("`{command}`: {error}"))?
        .map_err(|error| format!("`{command}` {error}"))?;
        if !output.status.success() {
            return Err(format!("`{command}` exited with {}", output.status));
        }
        tool_answer_from_output(&output.stdout)
            .map_err(|why| format!("the tool handler's answer {why}"))
    }
}

impl ServerRequestHandler for DefaultHandler {
    fn handle<'a>(&'a self, request: &'a ServerRequest) -> HandlerFuture<'a> {
        Box::pin(async move {
            let approve = self.approve;
            if let RequestKind::Approval(kind) = request.kind {
                tracing::info!(
                    "{} {}",
                    if approve { "approved" } else { "declined" },
                    request.method
                );
                return Ok(kind.answer(approve));
            }
            let answer: HandlerResult = match request.method.as_str() {
                method::ITEM_TOOL_CALL => Ok(self.tool_call(request).await),
                method::ITEM_TOOL_REQUEST_USER_INPUT => Ok(answers::to_value(
                    &answers::ToolRequestUserInputResponse::default(),
                )),
                method::MCP_SERVER_ELICITATION_REQUEST => {
                    Ok(answers::to_value(&answers::McpServerElicitationResponse {
                        action: answers::ElicitationAction::Decline,
                    }))
                }
                method::CURRENT_TIME_READ => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|elapsed| elapsed.as_secs())
                        .unwrap_or(0);
                    Ok(answers::to_value(&answers::CurrentTimeReadResponse {
                        current_time_at: now,
                    }))
                }
                other => Err(RpcError {
                    code: METHOD_NOT_FOUND,
                    message: format!("clawbridge does not handle `{other}`"),
                    data: None,
                }),
            };
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_output_shapes() {
        assert_eq!(
            tool_answer_from_output(br#"{"text": "sunny", "success": true}"#).expect("ok"),
            json!({"contentItems": [{"type": "inputText", "text": "sunny"}], "success": true})
        );
        let items = json!({"contentItems": [{"type": "inputImage", "imageUrl": "data:x"}], "success": false});
        assert_eq!(
            tool_answer_from_output(items.to_string().as_bytes()).expect("ok"),
            items
        );
        assert!(tool_answer_from_output(b"{\"text\": \"x\"}").is_err());
        assert!(tool_answer_from_output(b"not json").is_err());
    }

    #[tokio::test]
    async fn without_a_handler_the_tool_fails_softly() {
        let handler = DefaultHandler::default();
        let id = crate::protocol::wire::RequestId::Integer(0);
        let request = ServerRequest::new(
            id.clone(),
            "item/tool/call".into(),
            json!({"tool": "lookup_weather", "arguments": {}}),
        );
        let answer = handler.handle(&request).await.expect("answer");
        assert_eq!(answer["success"], false);
        assert!(answer["contentItems"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("lookup_weather"));
        let unknown = ServerRequest::new(id.clone(), "attestation/generate".into(), json!({}));
        assert_eq!(
            handler.handle(&unknown).await.expect_err("error").code,
            METHOD_NOT_FOUND
        );
        let approval = ServerRequest::new(
            id,
            "item/commandExecution/requestApproval".into(),
            json!({}),
        );
        assert_eq!(
            handler.handle(&approval).await.expect("answer")["decision"],
            "decline"
        );
    }
}
