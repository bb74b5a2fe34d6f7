//! The one integration-test crate: shared helpers in `util`, one module per area.

mod capture_live;
mod catalog;
mod cli;
mod doctor;
mod e2e;
mod endpoint;
mod endpoint_accounts;
mod endpoint_health;
mod endpoint_soak;
mod layers;
mod metrics;
mod peer;
mod pool;
mod prompt;
mod proxy;
mod real_openclaw;
mod routing;
mod schema;
mod serve;
mod serve_daemon;
mod serve_hardening;
mod serve_security;
mod skills;
mod snapshots;
mod untrusted;
mod util;
