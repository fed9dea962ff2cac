//! `tdd rollback`: put the work tree back exactly as the phase found it.

use tdd_engine::run::RollbackTo;

use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Restore the exact tree from the start of the current phase. With --to-previous, go back
/// to the start of the previous phase of this cycle, undoing the commit it made (the way
/// back to RED after `rollback_to_red`); at the start of a cycle that has not moved,
/// reopen the REFACTOR that closed the cycle before.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// Go back to the start of the previous phase instead of the current one.
    #[arg(long)]
    to_previous: bool,
}

/// Runs `tdd rollback`.
pub fn cmd_rollback(ctx: &Ctx, args: RollbackArgs) -> Result<Outcome, CommandError> {
    let to = if args.to_previous {
        RollbackTo::PreviousPhase
    } else {
        RollbackTo::PhaseStart
    };
    let state = ctx.engine()?.begin()?.rollback(to)?;
    let (data, text, next) = describe(&state);
    Ok(Outcome::new(data, format!("rolled back\n{text}")).next(next))
}
