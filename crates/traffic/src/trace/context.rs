//! W3C trace context for a turn: the ids of its `invoke_agent` span, passed on to Codex.
//!
//! Codex accepts a W3C Trace Context on any request (`JSONRPCRequest.trace`) and makes its own
//! spans of the request children of it. The endpoint puts the turn span's context on each
//! `turn/start` it forwards, so Codex's spans (with its own OpenTelemetry export on) sit under
//! clawbridge's turn in the same trace. A client that sent its own `trace` keeps its trace: the
//! turn span becomes a child of the client's span, and Codex's spans children of the turn.
//!
//! The forwarder and the span book must agree on the turn span's ids without waiting for each
//! other (the book reads its copy of the message off the forwarding path, maybe after the
//! request went out). So the ids are derived, not drawn: a hash of a salt drawn once per
//! process, the connection, and the client's request id. Only the holder of the salt (the live
//! trace) can derive them; ids stay unpredictable to clients.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator as _, RandomIdGenerator};
use sha2::{Digest as _, Sha256};

use clawbridge_codex::protocol::wire::W3cTraceContext;

/// The per-process secret the turn ids are derived from.
#[derive(Clone, Copy)]
pub struct Salt([u8; 16]);

impl std::fmt::Debug for Salt {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Salt(..)")
    }
}

impl Salt {
    /// A fresh salt (from the SDK's random id generator).
    pub fn draw() -> Self {
        Self(RandomIdGenerator::default().new_trace_id().to_bytes())
    }
}

/// The remote span a `trace` field names, when its `traceparent` is valid W3C.
pub fn parent_of(trace: &W3cTraceContext) -> Option<SpanContext> {
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_string(), trace.traceparent.clone()?);
    if let Some(state) = &trace.tracestate {
        carrier.insert("tracestate".to_string(), state.clone());
    }
    let context = TraceContextPropagator::new().extract(&carrier);
    let span = context.span().span_context().clone();
    span.is_valid().then_some(span)
}

/// The context of a turn started by request `request` (its id as JSON text, e.g. `7` or
/// `"a"`) on connection `stream`, under `parent` when the client sent one: the trace id is the
/// parent's, or derived; the span id is derived.
pub fn turn_context(
    salt: &Salt,
    stream: usize,
    request: &str,
    parent: Option<&SpanContext>,
) -> SpanContext {
    let mut hash = Sha256::new();
    hash.update(salt.0);
    hash.update((stream as u64).to_be_bytes());
    hash.update(request.as_bytes());
    let digest = hash.finalize();
    let mut trace = [0u8; 16];
    trace.copy_from_slice(&digest[..16]);
    let mut span = [0u8; 8];
    span.copy_from_slice(&digest[16..24]);
    // An all-zero id is invalid in W3C; a hash that gives one (never in practice) is nudged.
    if span == [0; 8] {
        span[7] = 1;
    }
    if trace == [0; 16] {
        trace[15] = 1;
    }
    let trace_id = parent.map_or(TraceId::from_bytes(trace), SpanContext::trace_id);
    let state = parent.map_or_else(TraceState::default, |parent| parent.trace_state().clone());
    SpanContext::new(
        trace_id,
        SpanId::from_bytes(span),
        TraceFlags::SAMPLED,
        false,
        state,
    )
}

/// `context` as the `trace` field of a request.
pub fn to_wire(context: &SpanContext) -> W3cTraceContext {
    let mut carrier = HashMap::new();
    let remote = Context::new().with_remote_span_context(context.clone());
    TraceContextPropagator::new().inject_context(&remote, &mut carrier);
    W3cTraceContext {
        traceparent: carrier.remove("traceparent"),
        tracestate: carrier
            .remove("tracestate")
            .filter(|state| !state.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_context_is_the_same_for_the_same_request_and_new_for_another() {
        let salt = Salt::draw();
        let one = turn_context(&salt, 1, "7", None);
        assert_eq!(one, turn_context(&salt, 1, "7", None));
        assert_ne!(one.span_id(), turn_context(&salt, 2, "7", None).span_id());
        assert_ne!(one.span_id(), turn_context(&salt, 1, "8", None).span_id());
        assert_ne!(
            one.span_id(),
            turn_context(&Salt::draw(), 1, "7", None).span_id()
        );
        assert!(one.is_valid());
    }

    #[test]
    fn a_clients_parent_keeps_its_trace_and_round_trips_the_wire() {
        let client = W3cTraceContext {
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
            tracestate: Some("vendor=x".into()),
        };
        let parent = parent_of(&client).expect("valid traceparent");
        assert_eq!(
            parent.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let turn = turn_context(&Salt::draw(), 1, "7", Some(&parent));
        assert_eq!(turn.trace_id(), parent.trace_id());
        assert_ne!(turn.span_id(), parent.span_id());
        let wire = to_wire(&turn);
        let traceparent = wire.traceparent.clone().expect("traceparent");
        assert_eq!(
            traceparent,
            format!("00-{}-{}-01", turn.trace_id(), turn.span_id())
        );
        assert_eq!(wire.tracestate.as_deref(), Some("vendor=x"));
        assert_eq!(
            parent_of(&wire).map(|back| back.span_id()),
            Some(turn.span_id())
        );
    }

    #[test]
    fn an_invalid_traceparent_is_no_parent() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736",
        ] {
            let trace = W3cTraceContext {
                traceparent: Some(bad.to_string()),
                tracestate: None,
            };
            assert!(parent_of(&trace).is_none(), "{bad}");
        }
    }
}
