//! What the endpoint tells the tools operators already run: `/healthz` (the process serves),
//! `/readyz` (it can take a turn: every identity that has app-servers has a healthy one, and it
//! is not draining) and `/metrics` (the Prometheus text format, through the Prometheus project's
//! own client crate). The probes carry no data beyond yes or no and need no token; `/metrics`
//! is the operator's, as `/status` is.
//!
//! The metrics are read from one status snapshot at each scrape, so they cost nothing between
//! scrapes and can never disagree with `app-server status`.

use std::collections::BTreeMap;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::status::EndpointStatus;
use crate::codex::client::pool::MemberState;

type Labels = Vec<(String, String)>;

/// A member that can take work (or be started for it).
fn healthy(state: MemberState) -> bool {
    !matches!(state, MemberState::Restarting | MemberState::Dead)
}

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

/// The Prometheus text of `status`, with the turns ended by status and whether it is ready.
pub(super) fn prometheus_text(
    status: &EndpointStatus,
    turns_ended: &BTreeMap<&'static str, u64>,
    ready: bool,
) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix("clawbridge");
    let gauge = |value: i64| {
        let gauge = Gauge::<i64>::default();
        gauge.set(value);
        gauge
    };
    let count = |value: usize| i64::try_from(value).unwrap_or(i64::MAX);
    registry.register(
        "ready",
        "1 when the endpoint can take a turn (what /readyz answers)",
        gauge(i64::from(ready)),
    );
    registry.register(
        "connections",
        "Open client connections",
        gauge(count(status.connections.len())),
    );
    registry.register(
        "threads",
        "Threads the endpoint knows (followed or resumable)",
        gauge(count(status.known_threads)),
    );
    let turns = Family::<Labels, Counter>::default();
    for (state, ended) in turns_ended {
        turns
            .get_or_create(&vec![("status".to_string(), (*state).to_string())])
            .inc_by(*ended);
    }
    registry.register("turns", "Turns Codex ended, by status", turns);
    let stalls = Family::<Labels, Counter>::default();
    for (kind, seen) in &status.stalls {
        stalls
            .get_or_create(&vec![("kind".to_string(), kind.clone())])
            .inc_by(u64::try_from(*seen).unwrap_or(u64::MAX));
    }
    registry.register("stalls", "Stalls seen, by kind", stalls);
    let recovered = Counter::<u64>::default();
    recovered.inc_by(u64::try_from(status.recovered_turns).unwrap_or(u64::MAX));
    registry.register(
        "recovered_turns",
        "Turns whose missing turn/completed the endpoint supplied",
        recovered,
    );
    let members = Family::<Labels, Gauge<i64>>::default();
    let restarts = Family::<Labels, Counter>::default();
    let active = Family::<Labels, Gauge<i64>>::default();
    for member in &status.members {
        let state = format!("{:?}", member.state).to_lowercase();
        members
            .get_or_create(&vec![("state".to_string(), state)])
            .inc();
        let name = vec![("member".to_string(), member.name.clone())];
        restarts
            .get_or_create(&name)
            .inc_by(u64::try_from(member.restarts).unwrap_or(u64::MAX));
        active
            .get_or_create(&name)
            .set(count(member.active_threads));
    }
    registry.register("members", "App-servers, by state", members);
    registry.register("member_restarts", "Restarts of each app-server", restarts);
    registry.register(
        "member_active_threads",
        "Threads each app-server is running",
        active,
    );
    let mut text = String::new();
    encode(&mut text, &registry)?;
    Ok(text)
}
