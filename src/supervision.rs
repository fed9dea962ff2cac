//! Glue between the CLI and `tdd-supervisor`: where this repository's leaves live,
//! how the supervisor process is started, and how its events reach the ledger.

use std::path::PathBuf;
use std::time::Duration;

use tdd_supervisor::Supervisor;

use crate::context::Ctx;
use crate::error::CommandError;

/// The hidden subcommand that runs a supervisor process: `tdd __supervise`.
pub const SUPERVISE_COMMAND: &str = tdd_leaves::runtime::SUPERVISE_COMMAND;

/// The variable that carries a leaf's own id into its environment; `tdd test` records
/// its observations against it.
pub const LEAF_ID_ENV: &str = "TDD_LEAF_ID";

/// Variables every leaf started by `tdd exec` receives when they are set; anything
/// else must be named with `--env`. Tokens and keys are never on this list.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    "TMPDIR",
];

/// This very binary: the supervisor process and the `tdd` on every leaf's `PATH`.
pub fn tdd_exe() -> Result<PathBuf, CommandError> {
    std::env::current_exe().map_err(|e| {
        CommandError::internal(
            "supervisor_failed",
            format!("cannot find the tdd executable to run the supervisor: {e}"),
        )
    })
}

/// The supervisor of this repository's leaves: state under the ledger's directory,
/// the supervisor process is this very binary (`tdd __supervise --ledger DB DIR`).
pub fn supervisor(ctx: &Ctx) -> Result<Supervisor, CommandError> {
    let location = ctx.ledger_location()?;
    let exe = tdd_exe()?;
    Ok(tdd_leaves::Leaves::repository_supervisor(&location, &exe))
}

/// Parses a number of seconds (fractions allowed) for `--timeout` and friends.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{text:?} is not a non-negative number of seconds"))
}

/// A duration as seconds with one decimal, for text output.
pub fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}
