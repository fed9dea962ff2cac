//! What a reviewer reads of a run, computed from the ledger alone: the header figures,
//! a timeline, every leaf, the test deltas and the honesty panel, as data
//! ([`RunReport`]) and as one self-contained HTML page ([`html::page`]).
//!
//! Nothing here is written by an agent: the figures come from the engine's, the
//! leaves' and the conductor's events, read from the ledger opened read-only.

mod build;
mod compute;
pub mod fleet;
pub mod friction;
mod honesty;
pub mod html;
pub mod metrics;
pub mod model;
pub mod pr;
mod timeline;

use std::path::PathBuf;

pub use build::AsOf;
pub use build::all_runs;
pub use build::build;
pub use build::build_as_of;
pub use model::RunReport;

/// Which run to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// The last conducted in the work tree, else the last started there.
    Latest,
    /// A conduct id (`conduct-…`) or an engine run id (`run-…`).
    Id(String),
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The repository has no ledger.
    #[error("this repository has no ledger yet at {}", database.display())]
    NoLedger {
        /// Where it would be.
        database: PathBuf,
    },
    /// No run was ever started or conducted in this work tree.
    #[error("no run was started or conducted in this work tree")]
    NoRun,
    /// The id names no run of the ledger.
    #[error("no run {id} is recorded in this repository's ledger")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A ledger could not be read (the thread reading it failed).
    #[error("the ledger {} could not be read", path.display())]
    Unreadable {
        /// The ledger's database.
        path: PathBuf,
    },
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] tdd_engine::ledger::LedgerError),
    /// An event of the run does not parse.
    #[error(transparent)]
    Event(#[from] tdd_engine::ledger::EventError),
}
