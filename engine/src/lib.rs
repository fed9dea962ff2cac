//! The `tdd` engine: everything that decides progress from observed facts.
//!
//! The engine knows nothing of agents, prompts or forges. It owns the
//! configuration (`tdd.toml`), the append-only ledger and the phase gates
//! computed from observed test suites. Observing a suite is `tdd-observe`'s; it is
//! re-exported here as [`observe`], so the rest of the workspace reaches it through
//! the engine.

pub mod config;
pub mod failpoint;
pub mod git;
pub mod integrity;
pub mod ledger;
pub mod plan;
pub mod repo_path;
pub mod run;

/// Observation of test suites: adapters, report parsers, the process runner
/// (the `tdd-observe` crate).
pub use tdd_observe as observe;
