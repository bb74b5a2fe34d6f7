//! The service core both servers stand on (`serve`, the app-server endpoint): what they keep
//! across restarts and share in how they run.
//!
//! Layout: [`store`] the durable state (an embedded SQLite database in the state dir, written
//! off the request path), [`directory`] the one record of each thread (account, member, owner,
//! session, rollout, a fencing epoch), [`lock`] one process per state.

pub mod directory;
pub mod lock;
pub mod store;
