//! Stop requests: handed to the supervisor (which refuses new leaves, and for `now`
//! kills running ones) and recorded in the ledger, so a run's record says who stopped
//! it and when.

use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_supervisor::StopError;
use tdd_supervisor::StopMode;
use tdd_supervisor::StopRequest;

use crate::events::LeavesEvent;
use crate::events::StopCleared;
use crate::runtime::Leaves;

/// Why a stop could not be requested or cleared.
#[derive(Debug, thiserror::Error)]
pub enum StopFailed {
    /// The supervisor's stop file could not be written or removed.
    #[error(transparent)]
    Supervisor(#[from] StopError),
    /// The request was made but could not be recorded.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl Leaves {
    /// Requests a stop in `mode` and records it (`stop_requested`). The latest request
    /// wins.
    pub fn request_stop(&self, mode: StopMode) -> Result<StopRequest, StopFailed> {
        let request = self.supervisor().request_stop(mode)?;
        let event = LeavesEvent::StopRequested(request.clone());
        Ledger::open(self.database())?.record(None, &event)?;
        Ok(request)
    }

    /// Removes a pending stop request, so leaves may start again; records it
    /// (`stop_cleared`) when there was one. `false` when none was pending.
    pub fn clear_stop(&self) -> Result<bool, StopFailed> {
        let cleared = self.supervisor().clear_stop()?;
        if cleared {
            let event = LeavesEvent::StopCleared(StopCleared {});
            Ledger::open(self.database())?.record(None, &event)?;
        }
        Ok(cleared)
    }
}
