//! `tdd wait`: wait for a leaf and exit with a code saying how it ended.

use std::time::Duration;

use serde_json::json;
use tdd_supervisor::ExitClass;
use tdd_supervisor::WaitOutcome;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::exit::Exit;
use crate::logtext;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;
use crate::supervision;

/// How much of a finished leaf's stdout is read for the envelope that ends it.
const RESULT_BYTES: u64 = 256 * 1024;

/// Wait for a leaf to finish. Exit 0 when it exited 0, 1 when it exited non-zero, 2
/// when it was killed (kill_stuck, killed_external, stopped), its supervisor was lost
/// or it never started, 3 when it is still running after --max.
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// The leaf id (see `tdd leaves`).
    id: String,
    /// Give up after S seconds (exit 3); the leaf runs on.
    #[arg(long, value_name = "S", value_parser = supervision::parse_seconds)]
    max: Option<Duration>,
}

/// The exit code of `tdd wait` for a class.
pub fn wait_code(class: &ExitClass) -> u8 {
    match class {
        ExitClass::Exited { code: 0 } => 0,
        ExitClass::Exited { .. } => 1,
        ExitClass::KillStuck { .. }
        | ExitClass::KilledExternal { .. }
        | ExitClass::SupervisorLost
        | ExitClass::Stopped
        | ExitClass::SpawnFailed { .. } => 2,
    }
}

/// Runs `tdd wait`.
pub fn cmd_wait(ctx: &Ctx, args: WaitArgs) -> Result<Outcome, CommandError> {
    let mut leaf = supervision::supervisor(ctx)?.open(&args.id)?;
    match leaf.wait(args.max)? {
        WaitOutcome::Finished(exit) => {
            let code = wait_code(&exit.class);
            // A `tdd` leaf (a detached conductor) ends its stdout with its envelope:
            // that says why it ended, which its exit code alone does not.
            let result = tdd_supervisor::tail_bytes(leaf.stdout_path(), RESULT_BYTES)
                .ok()
                .and_then(|bytes| logtext::last_envelope(&bytes));
            let data = json!({
                "id": leaf.id(), "finished": true, "class": exit.class, "code": code,
                "exit": exit, "result": result,
            });
            let mut text = format!("{}: {}\n", leaf.id(), exit.class.words());
            if let Some(why) = result.as_ref().and_then(logtext::envelope_text) {
                text.push_str(&why);
            }
            Ok(Outcome::new(data, text)
                .next(NextAction::terminal(
                    Verb::Complete,
                    format!("the leaf {}", exit.class.words()),
                ))
                .exit(Exit::Leaf(code)))
        }
        WaitOutcome::StillRunning => {
            let data = json!({ "id": leaf.id(), "finished": false, "class": null, "code": 3 });
            Ok(
                Outcome::new(data, format!("{}: still running\n", leaf.id()))
                    .next(NextAction::new(
                        Verb::Complete,
                        format!(
                            "the leaf is still running; `tdd wait {}` again to keep waiting",
                            leaf.id()
                        ),
                    ))
                    .exit(Exit::StillRunning),
            )
        }
    }
}
