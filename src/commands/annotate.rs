//! `tdd annotate`: set an annotation on the current cycle.

use crate::commands::cycle::non_empty;
use crate::commands::status::describe;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Set an annotation on the current cycle; a plan's `annotation_keys` must all be set
/// before a cycle closes.
#[derive(Debug, clap::Args)]
pub struct AnnotateArgs {
    /// The annotation key.
    #[arg(long)]
    key: String,
    /// Its value.
    #[arg(long)]
    value: String,
}

/// Runs `tdd annotate`.
pub fn cmd_annotate(ctx: &Ctx, args: AnnotateArgs) -> Result<Outcome, CommandError> {
    let key = non_empty(&args.key, "--key")?;
    let state = ctx.engine()?.begin()?.annotate(key, &args.value)?;
    let (data, text, next) = describe(&state);
    Ok(Outcome::new(data, format!("annotation {key} recorded\n{text}")).next(next))
}
