//! `tdd cycle skip`: end the current cycle without delivering it, with a reason.

use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Act on the current cycle.
#[derive(Debug, clap::Subcommand)]
pub enum CycleCommand {
    /// Mark the current cycle SKIPPED and open the next one.
    Skip {
        /// Why the cycle is skipped (recorded).
        #[arg(long)]
        reason: String,
    },
}

impl CycleCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            CycleCommand::Skip { .. } => "cycle skip",
        }
    }
}

/// Runs `tdd cycle ...`.
pub fn cmd_cycle(ctx: &Ctx, cmd: CycleCommand) -> Result<Outcome, CommandError> {
    match cmd {
        CycleCommand::Skip { reason } => {
            let reason = non_empty(&reason, "--reason")?;
            let state = ctx.engine()?.begin()?.skip_cycle(reason)?;
            let (data, text, next) = describe(&state);
            Ok(Outcome::new(data, text).next(next))
        }
    }
}

/// Refuses an empty or blank text argument, naming the flag.
pub fn non_empty<'a>(text: &'a str, flag: &str) -> Result<&'a str, CommandError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(
            CommandError::bad_input("empty_argument", format!("{flag} must not be empty"))
                .hint(format!("give {flag} a short sentence")),
        );
    }
    Ok(trimmed)
}
