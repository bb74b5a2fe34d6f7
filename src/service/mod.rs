//! The service core both servers stand on (`serve`, the app-server endpoint): what they keep
//! across restarts and share in how they run.
//!
//! Layout: [`store`] the durable state (an embedded SQLite database in the state dir, written
//! off the request path), [`directory`] the one record of each thread (account, member, owner,
//! session, rollout, a fencing epoch), [`lock`] one process per state; what every listener
//! shares: the bearer token ([`token`]: its rule, its file read and made one way), named
//! clients and their grants ([`clients`]), the HTTP guard ([`guard`]: Host, Origin, token, the
//! caller), the Prometheus text ([`metrics`]); and the private view both services give their
//! app-servers, checked at start ([`isolation`]); the accept loop both servers run ([`listener`]).

pub mod accounts;
pub mod clients;
pub mod directory;
pub mod files;
pub mod guard;
pub mod isolation;
pub mod listener;
pub mod lock;
pub mod metrics;
pub mod store;
pub mod token;
