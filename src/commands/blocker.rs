//! `tdd blocker`: stop the run, visibly, until a human resumes it.

use crate::commands::cycle::non_empty;
use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Raise a typed blocker: the run stays visible as blocked and `advance` refuses until
/// `tdd resume --unblock`.
#[derive(Debug, clap::Args)]
pub struct BlockerArgs {
    /// What kind of blocker (for example `needs_user`, `environment`, `plan_defect`).
    #[arg(long)]
    kind: String,
    /// What is blocking, written so that a human can act on it.
    #[arg(long)]
    detail: String,
}

/// Runs `tdd blocker`.
pub fn cmd_blocker(ctx: &Ctx, args: BlockerArgs) -> Result<Outcome, CommandError> {
    let kind = non_empty(&args.kind, "--kind")?;
    let detail = non_empty(&args.detail, "--detail")?;
    let state = ctx.engine()?.begin()?.raise_blocker(kind, detail)?;
    let (data, text, next) = describe(&state);
    Ok(Outcome::new(data, text).next(next))
}
