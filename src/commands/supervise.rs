//! `tdd __supervise`: the supervisor process of one leaf (hidden, started by tdd).

use std::path::PathBuf;

use serde_json::json;
use tdd_leaves::LedgerReporter;
use tdd_supervisor::NoopReporter;
use tdd_supervisor::Reporter;

use crate::error::CommandError;
use crate::output::Outcome;

/// Internal: supervise the leaf whose directory is given. `tdd exec` and the
/// conductor start this; it is not meant to be run by hand.
#[derive(Debug, clap::Args)]
pub struct SuperviseArgs {
    /// The ledger database that receives launch, signal and exit events.
    #[arg(long, value_name = "DB")]
    ledger: Option<PathBuf>,
    /// The leaf directory holding `job.json`.
    leaf_dir: PathBuf,
}

/// Runs the supervisor until the leaf has ended and its exit is recorded. Nothing
/// else may happen in this process: it leads a session and reaps every child.
pub fn cmd_supervise(args: SuperviseArgs) -> Result<Outcome, CommandError> {
    let reporter: Box<dyn Reporter> = match &args.ledger {
        Some(database) => Box::new(LedgerReporter::new(database)),
        None => Box::new(NoopReporter),
    };
    match tdd_supervisor::run_supervisor(&args.leaf_dir, reporter.as_ref()) {
        0 => Ok(Outcome::new(json!({ "leaf_dir": args.leaf_dir }), "")),
        _ => Err(CommandError::internal(
            "supervisor_failed",
            format!(
                "the supervisor could not record the exit of {}; see supervisor.log there",
                args.leaf_dir.display()
            ),
        )),
    }
}
