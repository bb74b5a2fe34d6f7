//! The run events a client sees, one type for both faces: `clawbridge run --json` prints them as
//! JSON lines, `bridge.subscribeRun` sends them as `bridge.runEvent` notifications.
//!
//! Every event is an object with an `event` tag. clawbridge's own keys come out sorted
//! ([`RunEvent::to_raw`], [`RunEvent::write_json_line`]); a notification's `params` are Codex's
//! bytes, passed through as Codex sent them (parsing and re-sorting every delta would cost more
//! than the rest of the bridge together, and would change nothing a JSON reader sees).

use serde::Serialize;
use serde_json::Value;

use crate::codex::client::session::{HandlerResult, TurnEvent, TurnOutcome, TurnStatus};
use crate::codex::protocol::wire::RawParams;

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum RunEvent {
    /// The thread the run uses (service only).
    #[serde(rename_all = "camelCase")]
    Thread { thread_id: String, resumed: bool },
    /// A Codex notification, its params byte for byte as Codex sent them.
    Notification { method: String, params: RawParams },
    /// A Codex server request (CLI only; the service turns them into the two events below).
    ServerRequest {
        id: Value,
        method: String,
        params: Value,
    },
    /// The answer clawbridge gave a server request (CLI only).
    Answer {
        id: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    },
    /// A dynamic tool call waiting for `bridge.toolResult` (service only). `callId` is a random
    /// handle to answer with; `codexCallId` is Codex's own id.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        call_id: String,
        codex_call_id: Value,
        tool: String,
        namespace: Value,
        arguments: Value,
    },
    /// An approval waiting for `bridge.approval` (service only).
    #[serde(rename_all = "camelCase")]
    ApprovalRequest {
        approval_id: String,
        method: String,
        params: Value,
    },
    /// An approval clawbridge declined itself, without asking the client: accepting it could run
    /// something outside the operator's sandbox ceiling (service only).
    ApprovalDeclined {
        method: String,
        params: Value,
        reason: String,
    },
    /// A late subscriber missed this many events: the run's log keeps a bounded number of bytes.
    EventsDropped { count: usize },
    /// The last event of every run.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        status: TurnStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        thread_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        error: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent_messages: Option<Vec<String>>,
        /// Set when the end was inferred, not told: `missing turn/completed` (the turn's last
        /// agent message came and its `turn/completed` did not within `--completion-grace`).
        #[serde(skip_serializing_if = "Option::is_none")]
        recovered: Option<String>,
        /// With status `appServerLost`: whether the turn may have run (its `turn/start` was sent
        /// before the app-server went away), so a retry could repeat what it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        may_have_run: Option<bool>,
        /// `run --json` only: the Codex version and how many model requests the stub saw.
        #[serde(flatten)]
        pairing: Option<PairingFacts>,
    },
}

/// What `run --json` adds to its `turnEnd`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PairingFacts {
    pub codex_version: Option<String>,
    pub model_requests: usize,
}

impl RunEvent {
    /// The event as a JSON value (every key sorted, a notification's params included).
    pub fn to_value(&self) -> Value {
        // Through `Value` (a sorted map) rather than the derive's field order.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The event as JSON text: clawbridge's keys sorted, a notification's params as Codex sent
    /// them. What `bridge.runEvent` carries and `run --json` prints.
    pub fn to_raw(&self) -> Option<Box<serde_json::value::RawValue>> {
        /// The notification event in sorted key order, params written as they are.
        #[derive(Serialize)]
        struct Sorted<'a> {
            event: &'static str,
            method: &'a str,
            params: &'a RawParams,
        }
        match self {
            RunEvent::Notification { method, params } => serde_json::value::to_raw_value(&Sorted {
                event: "notification",
                method,
                params,
            }),
            other => serde_json::value::to_raw_value(&other.to_value()),
        }
        .ok()
    }

    /// Append the `run --json` line of a turn event to `out`: the text of
    /// `from_turn_event(event).to_raw()` and a newline. A notification (nearly every event of a
    /// turn) is written straight from the borrowed params, without copying them into an event
    /// first; its keys (`event`, `method`, `params`) are in sorted order.
    pub fn write_json_line(event: &TurnEvent<'_>, out: &mut Vec<u8>) {
        match event {
            TurnEvent::Notification { method, params, .. } => {
                write_notification(method, params, out)
            }
            other => {
                let _ =
                    serde_json::to_writer(&mut *out, &RunEvent::from_turn_event(other).to_value());
            }
        }
        out.push(b'\n');
    }

    /// A Codex notification or, for the CLI, a server request or its answer.
    pub fn from_turn_event(event: &TurnEvent<'_>) -> RunEvent {
        match event {
            TurnEvent::Notification { method, params, .. } => RunEvent::Notification {
                method: method.to_string(),
                params: (*params).clone(),
            },
            TurnEvent::ServerRequest { request } => RunEvent::ServerRequest {
                id: serde_json::to_value(&request.id).unwrap_or(Value::Null),
                method: request.method.clone(),
                params: request.params.clone(),
            },
            TurnEvent::Answered { id, answer } => answer_event(id, answer),
        }
    }

    /// The `turnEnd` of a finished turn.
    pub fn turn_end(outcome: &TurnOutcome) -> RunEvent {
        RunEvent::TurnEnd {
            status: outcome.status,
            thread_id: Some(outcome.thread_id.clone()),
            turn_id: Some(outcome.turn_id.clone()),
            error: outcome.error.clone(),
            agent_messages: Some(outcome.agent_messages.clone()),
            recovered: outcome.recovered.map(str::to_string),
            may_have_run: None,
            pairing: None,
        }
    }

    /// The `turnEnd` of a run that failed before or outside a turn.
    pub fn failed(thread_id: Option<String>, error: impl Into<String>) -> RunEvent {
        RunEvent::TurnEnd {
            status: TurnStatus::Failed,
            thread_id,
            turn_id: None,
            error: Some(error.into()),
            agent_messages: None,
            recovered: None,
            may_have_run: None,
            pairing: None,
        }
    }

    /// The `turnEnd` of a run whose app-server went away (crashed, killed, or its connection
    /// dropped): `mayHaveRun` says whether its `turn/start` had been sent.
    pub fn app_server_lost(
        thread_id: Option<String>,
        may_have_run: bool,
        error: impl Into<String>,
    ) -> RunEvent {
        RunEvent::TurnEnd {
            status: TurnStatus::AppServerLost,
            thread_id,
            turn_id: None,
            error: Some(error.into()),
            agent_messages: None,
            recovered: None,
            may_have_run: Some(may_have_run),
            pairing: None,
        }
    }
}

/// `{"event":"notification","method":...,"params":...}` with the params' own bytes.
fn write_notification(method: &str, params: &RawParams, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"event":"notification","method":"#);
    let _ = serde_json::to_writer(&mut *out, method);
    out.extend_from_slice(br#","params":"#);
    out.extend_from_slice(params.get().as_bytes());
    out.push(b'}');
}

fn answer_event(id: &crate::codex::protocol::wire::RequestId, answer: &HandlerResult) -> RunEvent {
    let id = serde_json::to_value(id).unwrap_or(Value::Null);
    match answer {
        Ok(result) => RunEvent::Answer {
            id,
            result: Some(result.clone()),
            error: None,
        },
        Err(error) => RunEvent::Answer {
            id,
            result: None,
            error: Some(serde_json::to_value(error).unwrap_or(Value::Null)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_line_carries_codex_s_own_bytes() {
        // Codex's key order (not sorted), an escape and a nested object, as they came.
        let codex = r#"{"threadId":"t","turnId":"u","delta":"a \"quoted\" \n line \u00e9","z":[1,{"b":2,"a":1}]}"#;
        let Ok(crate::codex::protocol::wire::Incoming::Notification { params, .. }) =
            crate::codex::protocol::wire::decode(format!(
                r#"{{"method":"item/agentMessage/delta","params":{codex}}}"#
            ))
        else {
            panic!("a notification")
        };
        let event = TurnEvent::Notification {
            method: "item/agentMessage/delta",
            params: &params,
            kind: &crate::codex::protocol::inbound::NotificationKind::Other,
            turn_id: Some("u"),
        };
        let mut line = Vec::new();
        RunEvent::write_json_line(&event, &mut line);
        let line = String::from_utf8(line).expect("utf-8");
        assert_eq!(
            line,
            format!(
                "{{\"event\":\"notification\",\"method\":\"item/agentMessage/delta\",\"params\":{codex}}}\n"
            )
        );
        // The same text as the event's `to_raw`, and the same JSON as its sorted value.
        let owned = RunEvent::from_turn_event(&event);
        assert_eq!(
            owned.to_raw().expect("raw").get(),
            line.trim_end_matches('\n')
        );
        let parsed: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(parsed, owned.to_value());
    }
    use serde_json::json;

    #[test]
    fn events_keep_their_wire_shapes() {
        let end = RunEvent::TurnEnd {
            status: TurnStatus::Completed,
            thread_id: Some("t".into()),
            turn_id: Some("u".into()),
            error: None,
            agent_messages: Some(vec!["hi".into()]),
            recovered: None,
            may_have_run: None,
            pairing: Some(PairingFacts {
                codex_version: Some("0.169.0".into()),
                model_requests: 1,
            }),
        };
        assert_eq!(
            end.to_value().to_string(),
            r#"{"agentMessages":["hi"],"codexVersion":"0.169.0","error":null,"event":"turnEnd","modelRequests":1,"status":"completed","threadId":"t","turnId":"u"}"#
        );
        assert_eq!(
            RunEvent::failed(None, "boom").to_value(),
            json!({"event": "turnEnd", "status": "failed", "error": "boom"})
        );
        assert_eq!(
            RunEvent::Thread {
                thread_id: "t".into(),
                resumed: true
            }
            .to_value(),
            json!({"event": "thread", "threadId": "t", "resumed": true})
        );
    }
}
