//! Files other people review: the happy-path prompt snapshots and the pinned Codex fixtures.
//!
//! Layout: [`snapshots`] renders and drift-checks the snapshot scenarios; [`model_fixture`]
//! syncs the pinned gpt-5.5 model prompt from Codex's catalogs with provenance and verifies
//! every pinned fixture.

pub mod model_fixture;
pub mod snapshots;
