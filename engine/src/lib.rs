//! The `tdd` engine: everything that decides progress from observed facts.
//!
//! The engine knows nothing of agents, prompts or forges. It owns the
//! configuration (`tdd.toml`), runs, plans, phase gates, git and the work-tree
//! locks. Observing a test suite is `tdd-observe`'s and the append-only ledger is
//! `tdd-ledger`'s; both are re-exported here as [`observe`] and [`ledger`], so the
//! rest of the workspace reaches everything the engine decides with through one crate.

pub mod config;
pub mod failpoint;
pub mod git;
pub mod integrity;
pub mod plan;
pub mod published;
pub mod read;
pub mod repo_path;
pub mod run;
pub mod worktree_lock;

/// The ledger: one append-only, hash-chained SQLite database per repository
/// (the `tdd-ledger` crate).
pub use tdd_ledger as ledger;
/// Observation of test suites: adapters, report parsers, the process runner
/// (the `tdd-observe` crate).
pub use tdd_observe as observe;
