//! `tdd run start`: open a run of a committed plan.

use std::path::PathBuf;

use serde_json::json;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;

/// Start or end runs.
#[derive(Debug, clap::Subcommand)]
pub enum RunCommand {
    /// Refuse a dirty tree, take a baseline of every project the plan reaches, and open
    /// cycle 1 of the committed plan.
    Start {
        /// The plan file, relative to the current directory.
        #[arg(long)]
        plan: PathBuf,
    },
    /// End the active run as abandoned, with a reason.
    Abandon {
        /// Why the run is abandoned (recorded).
        #[arg(long)]
        reason: String,
    },
}

impl RunCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            RunCommand::Start { .. } => "run start",
            RunCommand::Abandon { .. } => "run abandon",
        }
    }
}

/// Runs `tdd run ...`.
pub fn cmd_run(ctx: &Ctx, cmd: RunCommand) -> Result<Outcome, CommandError> {
    match cmd {
        RunCommand::Start { plan } => {
            let engine = ctx.suite_engine()?;
            let outcome = engine
                .begin_baseline()?
                .start(&ctx.cwd.join(plan), &ctx.out)?;
            let verb = outcome.phase.verb();
            let mut text = format!(
                "run {} started on {} (cycle {}, {})\n",
                outcome.run_id, outcome.contract.path, outcome.cycle, outcome.phase
            );
            if !outcome.path_dropped.is_empty() {
                let named: Vec<String> = outcome
                    .path_dropped
                    .iter()
                    .map(|e| {
                        if e.is_empty() {
                            "an empty entry".into()
                        } else {
                            format!("`{e}`")
                        }
                    })
                    .collect();
                text.push_str(&format!(
                    "PATH: the run's test runners will not search {} (an entry that is not absolute names another directory wherever a runner starts, so nothing found there can be pinned); put an absolute path in PATH to use it\n",
                    named.join(", ")
                ));
            }
            let push = carry_on_push(ctx, &mut text);
            let detail = format!(
                "cycle {} is at {}: run `tdd status` for the assignment",
                outcome.cycle, outcome.phase
            );
            let mut data = json!(outcome);
            data["push_configured"] = json!(push);
            Ok(Outcome::new(data, text).next(NextAction::new(verb, detail)))
        }
        RunCommand::Abandon { reason } => {
            let reason = crate::commands::cycle::non_empty(&reason, "--reason")?;
            let state = ctx.engine()?.begin()?.abandon(reason)?;
            let (data, text, next) = crate::commands::status::describe(&state);
            Ok(Outcome::new(data, text).next(next))
        }
    }
}

/// Sets the branch's remote up so that a plain `git push` carries the published ledger
/// ([`tdd_engine::published::carry_on_push`]), and says so in `text`. A failure to change
/// git's configuration is said too, with the push that works without it; the command
/// itself has done its work and does not fail for it.
pub(crate) fn carry_on_push(
    ctx: &Ctx,
    text: &mut String,
) -> Option<tdd_engine::published::PushSetUp> {
    let work_tree = ctx.work_tree().ok()?;
    match tdd_engine::published::carry_on_push(&work_tree) {
        Ok(Some(set_up)) => {
            text.push_str(&set_up.describe());
            text.push('\n');
            Some(set_up)
        }
        Ok(None) => None,
        Err(e) => {
            text.push_str(&format!(
                "could not set `git push` up to carry the ledger ({e}); push it with the branch by hand: `tdd ledger publish` says how\n"
            ));
            None
        }
    }
}
