//! `tdd target`: name the cycle's target among the tests that are new in this cycle.

use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Name the current cycle's target test when the plan's id was not found and several new
/// tests could be it. Only a test that is new since the cycle opened can be named.
#[derive(Debug, clap::Args)]
pub struct TargetArgs {
    /// The test id (`project::native-id` or the runner's native id).
    id: String,
}

/// Runs `tdd target`.
pub fn cmd_target(ctx: &Ctx, args: TargetArgs) -> Result<Outcome, CommandError> {
    let state = ctx.engine()?.begin()?.name_target(&args.id)?;
    let (data, text, next) = describe(&state);
    Ok(Outcome::new(data, format!("target named\n{text}")).next(next))
}
