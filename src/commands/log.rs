//! `tdd log render`: the friction log of a run, as markdown.

use serde_json::json;
use tdd_report::Which;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// The friction log.
#[derive(Debug, clap::Subcommand)]
pub enum LogCommand {
    /// Print a run's friction log as markdown: plan fidelity (declared, delivered,
    /// skipped, never reached), per step the target, what the engine ran, how RED
    /// failed, commits, verdicts with reasons, revise rounds, what the engine had to
    /// stop, notes; then a time and cost table. Computed from the ledger alone.
    Render(RenderArgs),
}

impl LogCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            LogCommand::Render(_) => "log render",
        }
    }
}

/// The options of `tdd log render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The run: a conduct id or an engine run id; by default the last one conducted,
    /// else started, in this work tree.
    #[arg(long)]
    run: Option<String>,
}

/// Runs `tdd log ...`.
pub fn cmd_log(ctx: &Ctx, cmd: LogCommand) -> Result<Outcome, CommandError> {
    let LogCommand::Render(args) = cmd;
    let location = ctx.ledger_location()?;
    let which = args.run.map_or(Which::Latest, Which::Id);
    let report = tdd_report::build(&location.database, &ctx.work_tree()?, &which)
        .map_err(crate::commands::report::report_error)?;
    let markdown = tdd_report::friction::render(&report);
    Ok(Outcome::new(json!({ "markdown": markdown }), markdown))
}
