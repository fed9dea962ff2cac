//! `tdd resume`: clear a blocker and go on.

use tdd_engine::run::Blocker;

use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Resume a run: with --unblock, clear its blocker; --note records what the human did.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// Clear the open blocker.
    #[arg(long)]
    unblock: bool,
    /// What was done about it (recorded).
    #[arg(long)]
    note: Option<String>,
}

/// Runs `tdd resume`.
pub fn cmd_resume(ctx: &Ctx, args: ResumeArgs) -> Result<Outcome, CommandError> {
    let blocker = if args.unblock {
        Blocker::Clear
    } else {
        Blocker::Keep
    };
    let state = ctx
        .engine()?
        .begin()?
        .resume(blocker, args.note.as_deref())?;
    let (data, text, next) = describe(&state);
    Ok(Outcome::new(data, text).next(next))
}
