//! `tdd note`: record a note against the current cycle.

use crate::commands::cycle::non_empty;
use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Record a note against the current cycle (friction, a decision, a question).
#[derive(Debug, clap::Args)]
pub struct NoteArgs {
    /// The note.
    text: String,
}

/// Runs `tdd note`.
pub fn cmd_note(ctx: &Ctx, args: NoteArgs) -> Result<Outcome, CommandError> {
    let state = ctx
        .engine()?
        .begin()?
        .note(non_empty(&args.text, "the note")?)?;
    let (data, text, next) = describe(&state);
    Ok(Outcome::new(data, format!("note recorded\n{text}")).next(next))
}
