//! What the endpoint tells the tools operators already run: `/healthz` (the process serves),
//! `/readyz` (it can take a turn: every identity that has app-servers has a healthy one, and it
//! is not draining) and `/metrics` (OpenMetrics, `app::metrics`). The probes carry no data
//! beyond yes or no and need no token; `/metrics` is the operator's, as `/status` is.

use std::collections::BTreeMap;

use super::status::EndpointStatus;
use crate::app::metrics::{healthy, Metrics};

/// Ready: not draining, and every identity with app-servers has a healthy one (an identity
/// whose members all failed would refuse its turns).
pub(super) fn ready(status: &EndpointStatus, draining: bool) -> bool {
    !draining
        && status.identities.iter().all(|identity| {
            identity.members.is_empty()
                || identity.members.iter().any(|member| healthy(member.state))
        })
        && (status.members.is_empty() || status.members.iter().any(|member| healthy(member.state)))
}

/// The OpenMetrics text of `status`, with the turns ended by status and whether it is ready.
pub(super) fn prometheus_text(
    status: &EndpointStatus,
    turns_ended: &BTreeMap<&'static str, u64>,
    tokens: &BTreeMap<(String, &'static str), u64>,
    calls: &BTreeMap<String, u64>,
    spans: Option<(u64, u64, u64, u64)>,
    ready: bool,
) -> Result<String, std::fmt::Error> {
    let mut metrics = Metrics::default();
    metrics.gauge(
        "ready",
        "1 when the endpoint can take a turn (what /readyz answers)",
        usize::from(ready),
    );
    metrics.gauge(
        "connections",
        "Open client connections",
        status.connections.len(),
    );
    metrics.gauge(
        "threads",
        "Threads the endpoint knows (followed or resumable)",
        status.known_threads,
    );
    metrics.counters(
        "turns",
        "Turns Codex ended, by status",
        "status",
        turns_ended.iter().map(|(state, ended)| (*state, *ended)),
    );
    metrics.counters(
        "stalls",
        "Stalls seen, by kind",
        "kind",
        status
            .stalls
            .iter()
            .map(|(kind, seen)| (kind.as_str(), u64::try_from(*seen).unwrap_or(u64::MAX))),
    );
    metrics.counter(
        "recovered_turns",
        "Turns whose missing turn/completed the endpoint supplied",
        u64::try_from(status.recovered_turns).unwrap_or(u64::MAX),
    );
    metrics.labelled_counters(
        "tokens",
        "Tokens Codex reported (thread/tokenUsage/updated), by model and kind",
        tokens.iter().map(|((model, kind), count)| {
            (
                vec![
                    ("model".to_string(), model.clone()),
                    ("kind".to_string(), (*kind).to_string()),
                ],
                *count,
            )
        }),
    );
    metrics.counters(
        "model_calls",
        "Model calls Codex reported (one thread/tokenUsage/updated each), by model",
        "model",
        calls.iter().map(|(model, count)| (model.as_str(), *count)),
    );
    if let Some((ended, exported, failed, dropped)) = spans {
        metrics.counters(
            "spans",
            "Trace spans (--otel-endpoint), by what became of them",
            "outcome",
            [
                ("ended", ended),
                ("exported", exported),
                ("failed", failed),
                ("dropped", dropped),
            ],
        );
    }
    metrics.members(&status.members);
    metrics.text()
}
