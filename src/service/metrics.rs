//! The Prometheus side of the listeners (`serve` and the `app-server` endpoint): readiness from
//! the app-servers' states, and the OpenMetrics text written with the Prometheus project's own
//! client crate from one snapshot per scrape (so a scrape costs nothing between scrapes and
//! never disagrees with the status views). docs/metrics.md lists every metric.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::codex::client::pool::{MemberState, MemberStatus};

type Labels = Vec<(String, String)>;

/// A member that can take work (or be started for it).
pub fn healthy(state: MemberState) -> bool {
    !matches!(state, MemberState::Restarting | MemberState::Dead)
}

/// One scrape's metrics, named `clawbridge_*`.
pub struct Metrics {
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            registry: Registry::with_prefix("clawbridge"),
        }
    }
}

fn saturating(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Metrics {
    /// A gauge.
    pub fn gauge(&mut self, name: &str, help: &str, value: usize) {
        let gauge = Gauge::<i64>::default();
        gauge.set(saturating(value));
        self.registry.register(name, help, gauge);
    }

    /// A counter (written `<name>_total`).
    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        let counter = Counter::<u64>::default();
        counter.inc_by(value);
        self.registry.register(name, help, counter);
    }

    /// A counter per value of one label.
    pub fn counters<'a>(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        values: impl IntoIterator<Item = (&'a str, u64)>,
    ) {
        let family = Family::<Labels, Counter>::default();
        for (value, count) in values {
            family
                .get_or_create(&vec![(label.to_string(), value.to_string())])
                .inc_by(count);
        }
        self.registry.register(name, help, family);
    }

    /// A counter per set of labels.
    pub fn labelled_counters(
        &mut self,
        name: &str,
        help: &str,
        values: impl IntoIterator<Item = (Vec<(String, String)>, u64)>,
    ) {
        let family = Family::<Labels, Counter>::default();
        for (labels, count) in values {
            family.get_or_create(&labels).inc_by(count);
        }
        self.registry.register(name, help, family);
    }

    /// A gauge per set of labels.
    pub fn labelled_gauges(
        &mut self,
        name: &str,
        help: &str,
        values: impl IntoIterator<Item = (Vec<(String, String)>, u64)>,
    ) {
        let family = Family::<Labels, Gauge<i64>>::default();
        for (labels, value) in values {
            family
                .get_or_create(&labels)
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        self.registry.register(name, help, family);
    }

    /// The app-servers: by state, each one's restarts and running threads.
    pub fn members(&mut self, members: &[MemberStatus]) {
        let by_state = Family::<Labels, Gauge<i64>>::default();
        let restarts = Family::<Labels, Counter>::default();
        let active = Family::<Labels, Gauge<i64>>::default();
        let rss = Family::<Labels, Gauge<i64>>::default();
        for member in members {
            let state = format!("{:?}", member.state).to_lowercase();
            by_state
                .get_or_create(&vec![("state".to_string(), state)])
                .inc();
            let name = vec![("member".to_string(), member.name.clone())];
            restarts
                .get_or_create(&name)
                .inc_by(u64::try_from(member.restarts).unwrap_or(u64::MAX));
            active
                .get_or_create(&name)
                .set(saturating(member.active_threads));
            if let Some(bytes) = member.rss_bytes {
                rss.get_or_create(&name)
                    .set(i64::try_from(bytes).unwrap_or(i64::MAX));
            }
        }
        self.registry
            .register("members", "App-servers, by state", by_state);
        self.registry
            .register("member_restarts", "Restarts of each app-server", restarts);
        self.registry.register(
            "member_active_threads",
            "Threads each app-server is running",
            active,
        );
        self.registry.register(
            "member_rss_bytes",
            "Resident memory of each running local app-server",
            rss,
        );
    }

    /// The OpenMetrics text.
    pub fn text(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// The content type of [`Metrics::text`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
