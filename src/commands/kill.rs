//! `tdd kill`: ask a leaf's supervisor to kill it.

use serde_json::json;
use tdd_supervisor::LeafStatus;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;
use crate::supervision;

/// Kill a leaf: SIGTERM to its process group, the grace period, then SIGKILL (with
/// --force, SIGKILL at once). It is recorded as `stopped`. Returns without waiting;
/// `tdd wait <id>` waits.
#[derive(Debug, clap::Args)]
pub struct KillArgs {
    /// The leaf id (see `tdd leaves`).
    id: String,
    /// SIGKILL now instead of SIGTERM first.
    #[arg(long)]
    force: bool,
}

/// Runs `tdd kill`.
pub fn cmd_kill(ctx: &Ctx, args: KillArgs) -> Result<Outcome, CommandError> {
    let mut leaf = supervision::supervisor(ctx)?.open(&args.id)?;
    if let LeafStatus::Finished(exit) = leaf.status()? {
        let data = json!({ "id": leaf.id(), "requested": false, "class": exit.class });
        return Ok(Outcome::new(
            data,
            format!("{} already ended: {}\n", leaf.id(), exit.class.words()),
        )
        .next(NextAction::terminal(
            Verb::Complete,
            "the leaf had already ended",
        )));
    }
    leaf.kill(if args.force {
        tdd_supervisor::Kill::Now
    } else {
        tdd_supervisor::Kill::Graceful
    })?;
    let data = json!({ "id": leaf.id(), "requested": true, "force": args.force, "class": null });
    Ok(
        Outcome::new(data, format!("kill requested for {}\n", leaf.id())).next(NextAction::new(
            Verb::Complete,
            format!("`tdd wait {}` waits until it is gone", leaf.id()),
        )),
    )
}
