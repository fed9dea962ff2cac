//! `tdd stop`: request a stop (at-ledger, at-leaf, now), or clear it.

use serde_json::json;
use tdd_leaves::Leaves;
use tdd_supervisor::LeafState;
use tdd_supervisor::StopMode;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;
use crate::supervision;

/// Request a stop, recorded in the ledger. `at-ledger`: the conductor stops at its
/// next checkpoint; `at-leaf`: running leaves finish, new ones are refused; `now`: new
/// leaves are refused and running ones are killed (class `stopped`). The latest
/// request wins; --clear removes it.
#[derive(Debug, clap::Args)]
pub struct StopArgs {
    /// How soon to stop.
    #[arg(long, value_name = "MODE", default_value = "at-leaf", value_parser = parse_mode)]
    mode: StopMode,
    /// Remove the pending stop request instead, so leaves may start again.
    #[arg(long, conflicts_with = "mode")]
    clear: bool,
}

fn parse_mode(text: &str) -> Result<StopMode, String> {
    text.parse()
}

/// Runs `tdd stop`.
pub fn cmd_stop(ctx: &Ctx, args: StopArgs) -> Result<Outcome, CommandError> {
    let leaves = Leaves::for_repository(&ctx.ledger_location()?, &supervision::tdd_exe()?);
    if args.clear {
        let cleared = leaves.clear_stop()?;
        let text = if cleared {
            "stop request cleared\n"
        } else {
            "no stop request was pending\n"
        };
        return Ok(
            Outcome::new(json!({ "cleared": cleared }), text).next(NextAction::terminal(
                Verb::Complete,
                "leaves may start again",
            )),
        );
    }
    let request = leaves.request_stop(args.mode)?;
    let running = leaves
        .supervisor()
        .list()?
        .iter()
        .filter(|leaf| leaf.state == LeafState::Running)
        .count();
    let text = format!(
        "stop requested: {} (running leaves: {running})\n",
        args.mode
    );
    let data =
        json!({ "mode": args.mode, "requested_at": request.requested_at, "running": running });
    Ok(Outcome::new(data, text).next(NextAction::terminal(
        Verb::Complete,
        format!("stop {} recorded; `tdd stop --clear` lifts it", args.mode),
    )))
}
