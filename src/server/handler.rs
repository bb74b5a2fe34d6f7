//! Codex's server requests of a run, answered through the API clients: tool calls become
//! `toolCall` events, approvals `approvalRequest` events (or are declined under the ceiling).

use super::bridge::Bridge;
use super::errors::random_id;
use super::runs::PendingCall;
use super::runs::RunState;
use crate::app::events::RunEvent;
use crate::codex::client::handler::DefaultHandler;
use crate::codex::client::session::HandlerFuture;
use crate::codex::client::session::ServerRequest;
use crate::codex::client::session::ServerRequestHandler;
use crate::codex::client::session::TurnEvent;
use crate::codex::protocol::inbound::RequestKind;
use crate::support::sync::lock;
use serde_json::json;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Answers a run's server requests through the API clients.
pub(super) struct BridgeHandler {
    pub(super) bridge: Arc<Bridge>,
    pub(super) run: Arc<RunState>,
}

impl ServerRequestHandler for BridgeHandler {
    fn handle<'a>(&'a self, request: &'a ServerRequest) -> HandlerFuture<'a> {
        Box::pin(async move {
            let timeout = self.bridge.config.answer_timeout;
            match &request.kind {
                RequestKind::DynamicToolCall(call) => {
                    // The client answers with a random handle, not Codex's call id, so no other
                    // client can answer this run's calls.
                    let call_id = random_id("call");
                    let tool = if call.tool.is_empty() {
                        "<unnamed>".to_string()
                    } else {
                        call.tool.clone()
                    };
                    let (answer, receiver) = oneshot::channel();
                    lock(&self.bridge.registry.pending_tools).insert(
                        call_id.clone(),
                        PendingCall {
                            run_id: self.run.run_id.clone(),
                            answer,
                        },
                    );
                    self.run.push(RunEvent::ToolCall {
                        call_id: call_id.clone(),
                        codex_call_id: call.call_id.clone(),
                        tool: tool.clone(),
                        namespace: call.namespace.clone(),
                        arguments: call.arguments.clone(),
                    });
                    let result = match tokio::time::timeout(timeout, receiver).await {
                        Ok(Ok(answer)) => answer,
                        _ => {
                            lock(&self.bridge.registry.pending_tools).remove(&call_id);
                            json!({"contentItems": [{"type": "inputText", "text": format!("The tool `{tool}` got no answer from OpenClaw within {timeout:?}.")}], "success": false})
                        }
                    };
                    Ok(result)
                }
                RequestKind::Approval(kind) if self.bridge.approvals_bound() => {
                    // Under the ceiling Codex is told to raise no prompt that leaves the sandbox
                    // (`bind_approvals`); one that comes anyway is declined here, unasked.
                    let reason = format!(
                        "declined by clawbridge serve: an approved command or patch may run outside the sandbox, and this server's ceiling is {} (the operator raises it with --max-sandbox danger-full-access)",
                        self.bridge.config.max_sandbox.as_str()
                    );
                    tracing::warn!("run {}: {} {reason}", self.run.run_id, request.method);
                    self.run.push(RunEvent::ApprovalDeclined {
                        method: request.method.clone(),
                        params: request.params.clone(),
                        reason,
                    });
                    Ok(kind.answer(false))
                }
                RequestKind::Approval(kind) => {
                    let approval_id = random_id("approval");
                    let (answer, receiver) = oneshot::channel();
                    lock(&self.bridge.registry.pending_approvals)
                        .insert(approval_id.clone(), (self.run.run_id.clone(), answer));
                    self.run.push(RunEvent::ApprovalRequest {
                        approval_id: approval_id.clone(),
                        method: request.method.clone(),
                        params: request.params.clone(),
                    });
                    let approve = tokio::time::timeout(timeout, receiver)
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or(false);
                    lock(&self.bridge.registry.pending_approvals).remove(&approval_id);
                    Ok(kind.answer(approve))
                }
                RequestKind::Other => DefaultHandler::default().handle(request).await,
            }
        })
    }
}

/// The service logs Codex's notifications; server requests become `toolCall` and
/// `approvalRequest` events in [`BridgeHandler`].
pub(super) fn logged_event(event: &TurnEvent<'_>) -> Option<RunEvent> {
    matches!(event, TurnEvent::Notification { .. }).then(|| RunEvent::from_turn_event(event))
}
