//! Supervision events (launch, signal, exit, a lost supervisor) recorded in the
//! repository's ledger.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;

use tdd_engine::ledger::Ledger;
use tdd_supervisor::LeafEvent;
use tdd_supervisor::ReportError;
use tdd_supervisor::Reporter;

/// The kinds supervision events are recorded as (the supervisor's domain, which this
/// crate records for it): one per [`LeafEvent`], [`kind_of`] says which.
pub const SUPERVISION_KINDS: &[&str] = &["leaf_launched", "leaf_signalled", "leaf_exited"];

/// The kind `event` is recorded as, one of [`SUPERVISION_KINDS`].
pub fn kind_of(event: &LeafEvent) -> &'static str {
    match event {
        LeafEvent::Launched { .. } => SUPERVISION_KINDS[0],
        LeafEvent::Signalled { .. } => SUPERVISION_KINDS[1],
        LeafEvent::Exited { .. } => SUPERVISION_KINDS[2],
    }
}

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
        let kind = kind_of(event);
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
