//! The `tdd` engine: everything that decides progress from observed facts.
//!
//! The engine knows nothing of agents, prompts or forges. It owns the
//! configuration (`tdd.toml`), the append-only ledger, the observation of
//! test suites and the phase gates computed from them.

pub mod config;
pub mod failpoint;
pub mod git;
pub mod integrity;
pub mod ledger;
pub mod observe;
pub mod plan;
pub mod repo_path;
pub mod run;
