//! What the endpoint tells the tools operators already run: `/healthz` (the process serves),
//! `/readyz` (it can take a turn: every identity that has app-servers has a healthy one, and it
//! is not draining) and `/metrics` (OpenMetrics, `service::metrics`). The probes carry no data
//! beyond yes or no and need no token; `/metrics` is the operator's, as `/status` is.

use std::collections::BTreeMap;

use super::status::EndpointStatus;
use crate::service::metrics::{healthy, Metrics};

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

/// What the taps saw: trace spans by outcome, copies the checker skipped, schema problems by
/// method, time to first token by model.
#[derive(Debug, Default)]
pub(super) struct Taps {
    pub spans: Option<(u64, u64, u64, u64)>,
    pub skipped: u64,
    pub problems: BTreeMap<String, u64>,
    pub first_tokens: BTreeMap<String, (u64, u64)>,
}

/// The OpenMetrics text of `status`, with the turns ended by status and whether it is ready.
pub(super) fn prometheus_text(
    status: &EndpointStatus,
    turns_ended: &BTreeMap<&'static str, u64>,
    tokens: &BTreeMap<(String, &'static str), u64>,
    calls: &BTreeMap<String, u64>,
    taps: &Taps,
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
    metrics.gauge(
        "app_server_places_held",
        "Local app-servers holding a place (running, starting, draining, being stopped)",
        status.app_servers.held,
    );
    metrics.gauge(
        "app_server_places",
        "Local app-servers at most (--app-servers)",
        status.app_servers.bound,
    );
    metrics.gauge(
        "requests_waiting_for_a_member",
        "Client requests waiting for a place among their member's requests in flight",
        status
            .members
            .iter()
            .map(|member| member.waiting_requests)
            .sum(),
    );
    metrics.counter(
        "account_homes_removed",
        "Account Codex homes removed past --home-retention-days",
        u64::try_from(status.account_homes.removed).unwrap_or(u64::MAX),
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
    metrics.counter(
        "context_alarms",
        "Turns that compacted twice or more and still filled the model's context window",
        u64::try_from(status.context_alarms).unwrap_or(u64::MAX),
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
    metrics.counters(
        "dropped_copies",
        "Copies of messages a tap had no room for (the message was forwarded all the same), by tap",
        "tap",
        [("checker", taps.skipped)],
    );
    metrics.counters(
        "schema_problems",
        "Messages that did not conform to the running Codex's schema, by method",
        "method",
        taps.problems
            .iter()
            .map(|(method, count)| (method.as_str(), *count)),
    );
    metrics.counters(
        "first_tokens",
        "Model calls timed to their first token (from the capture), by model",
        "model",
        taps.first_tokens
            .iter()
            .map(|(model, (count, _))| (model.as_str(), *count)),
    );
    metrics.counters(
        "first_token_milliseconds",
        "Milliseconds to the first token of the timed model calls, summed, by model (divided by clawbridge_first_tokens_total: the mean)",
        "model",
        taps.first_tokens.iter().map(|(model, (_, sum))| (model.as_str(), *sum)),
    );
    if let Some((ended, exported, failed, dropped)) = taps.spans {
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
    // Per account (bounded: the fleet keeps at most MAX_IDENTITIES), with the name the
    // operator gave it, so a dashboard shows agents' spend by name.
    metrics.labelled_gauges(
        "account_tokens_today",
        "Tokens each account used today (UTC), what --budget-tokens counts, by account and its name",
        status.identities.iter().map(|identity| {
            (
                vec![
                    ("account".to_string(), identity.identity.clone()),
                    (
                        "name".to_string(),
                        identity.name.clone().unwrap_or_default(),
                    ),
                ],
                identity.tokens_today,
            )
        }),
    );
    metrics.members(&status.members);
    metrics.text()
}
