//! `tdd leaves`: the leaves of this repository, with state and ages.

use serde_json::json;
use tdd_supervisor::LeafState;
use tdd_supervisor::LeafSummary;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;
use crate::supervision;

/// List this repository's leaves, oldest first: state (or exit class), pid, age, and
/// how long ago each last wrote output. A leaf whose supervisor vanished is recorded
/// as supervisor_lost, and what is left of it is killed.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LeavesArgs {
    #[command(subcommand)]
    command: Option<LeavesCommand>,
}

/// `tdd leaves ...` subcommands.
#[derive(Debug, clap::Subcommand)]
enum LeavesCommand {
    /// Show one leaf's record, or with --prompt exactly what it was told.
    Show(crate::commands::leaf_show::ShowArgs),
}

impl LeavesArgs {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self.command {
            Some(LeavesCommand::Show(_)) => "leaves show",
            None => "leaves",
        }
    }
}

/// Runs `tdd leaves` (the list) or `tdd leaves show`.
pub fn cmd_leaves(ctx: &Ctx, args: LeavesArgs) -> Result<Outcome, CommandError> {
    if let Some(LeavesCommand::Show(show)) = args.command {
        return crate::commands::leaf_show::cmd_leaves_show(ctx, show);
    }
    let leaves = supervision::supervisor(ctx)?.list()?;
    let running = leaves
        .iter()
        .filter(|leaf| leaf.state == LeafState::Running)
        .count();
    let text = render(&leaves);
    Ok(Outcome::new(
        json!({ "leaves": leaves, "running": running }),
        text,
    ))
}

fn render(leaves: &[LeafSummary]) -> String {
    if leaves.is_empty() {
        return String::from("no leaves\n");
    }
    let mut text = format!(
        "{:<36} {:<28} {:>8} {:>9} {:>12}  command\n",
        "id", "state", "pid", "age", "last output"
    );
    for leaf in leaves {
        let state = match (&leaf.class, leaf.state) {
            (Some(class), _) => class.brief(),
            (None, LeafState::Starting) => String::from("starting"),
            (None, LeafState::Running) => String::from("running"),
            (None, LeafState::Finished) => String::from("finished"),
            (None, LeafState::Unreadable) => String::from("unreadable"),
        };
        let age = |ms: Option<u64>| ms.map_or_else(|| String::from("-"), supervision::seconds);
        let pid = leaf
            .pid
            .map_or_else(|| String::from("-"), |pid| pid.to_string());
        let command = match &leaf.problem {
            Some(problem) => problem.clone(),
            None => leaf.argv.join(" "),
        };
        text.push_str(&format!(
            "{:<36} {:<28} {:>8} {:>9} {:>12}  {}\n",
            leaf.id,
            state,
            pid,
            age(leaf.age_ms),
            age(leaf.last_output_age_ms),
            command
        ));
    }
    text
}
