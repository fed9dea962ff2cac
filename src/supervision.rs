//! Glue between the CLI and `tdd-supervisor`: where this repository's leaves live,
//! how the supervisor process is started, and how its events reach the ledger.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use tdd_engine::ledger::Ledger;
use tdd_supervisor::LeafEvent;
use tdd_supervisor::ReportError;
use tdd_supervisor::Reporter;
use tdd_supervisor::Supervisor;

use crate::context::Ctx;
use crate::error::CommandError;

/// The hidden subcommand that runs a supervisor process: `tdd __supervise`.
pub const SUPERVISE_COMMAND: &str = "__supervise";

/// The variable that carries a leaf's own id into its environment; `tdd test` records
/// its observations against it.
pub const LEAF_ID_ENV: &str = "TDD_LEAF_ID";

/// Variables every leaf started by `tdd exec` receives when they are set; anything
/// else must be named with `--env`. Tokens and keys are never on this list.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    "TMPDIR",
];

/// Records supervision events in the repository's ledger. The database is opened at
/// the first event and kept open: closing a SQLite WAL database checkpoints it, which
/// would put a checkpoint between a leaf's launch and its supervision.
#[derive(Debug)]
pub struct LedgerReporter {
    database: PathBuf,
    ledger: Mutex<Option<Ledger>>,
}

impl LedgerReporter {
    /// A reporter appending to the ledger database at `database`.
    pub fn new(database: &Path) -> LedgerReporter {
        LedgerReporter {
            database: database.to_path_buf(),
            ledger: Mutex::new(None),
        }
    }
}

impl Reporter for LedgerReporter {
    fn report(&self, event: &LeafEvent) -> Result<(), ReportError> {
        let kind = match event {
            LeafEvent::Launched { .. } => "leaf_launched",
            LeafEvent::Signalled { .. } => "leaf_signalled",
            LeafEvent::Exited { .. } => "leaf_exited",
        };
        let payload = serde_json::to_value(event).map_err(ReportError::new)?;
        let mut guard = self
            .ledger
            .lock()
            .map_err(|_| ReportError::new("the ledger connection was poisoned by a panic"))?;
        let ledger = match guard.as_mut() {
            Some(ledger) => ledger,
            None => guard.insert(Ledger::open(&self.database).map_err(ReportError::new)?),
        };
        ledger
            .append(None, kind, &payload)
            .map_err(ReportError::new)?;
        Ok(())
    }
}

/// The supervisor of this repository's leaves: state under the ledger's directory,
/// the supervisor process is this very binary (`tdd __supervise --ledger DB DIR`).
pub fn supervisor(ctx: &Ctx) -> Result<Supervisor, CommandError> {
    let location = ctx.ledger_location()?;
    let exe = std::env::current_exe().map_err(|e| {
        CommandError::internal(
            "supervisor_failed",
            format!("cannot find the tdd executable to run the supervisor: {e}"),
        )
    })?;
    let args = [
        SUPERVISE_COMMAND.into(),
        "--ledger".into(),
        location.database.clone().into_os_string(),
    ];
    Ok(Supervisor::new(location.dir, exe, args)
        .reporter(Arc::new(LedgerReporter::new(&location.database))))
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
