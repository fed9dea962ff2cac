//! What the leaves runtime, verdicts and stop requests record: one enum, one payload
//! type per kind (see `tdd_engine::ledger::TypedEvent`).

use serde::Deserialize;
use serde::Serialize;
use tdd_supervisor::ExitClass;
use tdd_supervisor::StopRequest;

use crate::envelope::AbortOutcome;
use crate::envelope::Completion;
use crate::envelope::Usage;
use crate::identity::LeafRecord;
use crate::verdict::Decision;
use crate::verdict::VerifierVerdict;

tdd_engine::ledger::typed_events! {
    /// Everything the leaves runtime records.
    pub enum LeavesEvent in Leaves {
        /// A leaf's identity, prompt and launch spec, before it starts.
        "leaf_prepared" => LeafPrepared(Box<LeafRecord>),
        /// The supervisor launched the leaf.
        "leaf_started" => LeafStarted(LeafStarted),
        /// The leaf was aborted (or found over).
        "leaf_aborted" => LeafAborted(LeafAborted),
        /// The leaf ended and its response was read.
        "leaf_finished" => LeafFinished(LeafFinished),
        /// A verifier's verdict, accepted with its evidence.
        "verdict_recorded" => VerdictRecorded(VerifierVerdict),
        /// A verdict that was refused.
        "verdict_refused" => VerdictRefused(VerdictRefused),
        /// A stop was requested.
        "stop_requested" => StopRequested(StopRequest),
        /// The pending stop request was cleared.
        "stop_cleared" => StopCleared(StopCleared),
    }
}

/// The payload of `leaf_started`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeafStarted {
    /// The leaf.
    pub leaf_id: String,
    /// The supervisor's id of its process.
    pub supervisor_id: String,
    /// The confinement it ran under (`landlock-v7`, `none`, `disabled`); absent when
    /// none was asked for, and in events written before confinement existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// The version its CLI printed (`x.y.z`); absent for a provider that runs no
    /// versioned CLI, when the CLI would not say, and in events written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_version: Option<String>,
}

/// The payload of `leaf_aborted`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeafAborted {
    /// The leaf.
    pub leaf_id: String,
    /// What aborting did.
    pub outcome: AbortOutcome,
}

/// The payload of `leaf_finished`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeafFinished {
    /// The leaf.
    pub leaf_id: String,
    /// The supervisor's exit class.
    pub exit: ExitClass,
    /// How the leaf ended.
    pub completion: Completion,
    /// The CLI's session id.
    pub session_id: Option<String>,
    /// Turns taken.
    pub turns: Option<u32>,
    /// Tokens used.
    pub usage: Option<Usage>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
    /// Wall time, when the supervisor measured it.
    pub duration_ms: Option<u64>,
    /// The files of its work directory whose bytes differ between its start and its
    /// end (added, changed, removed or changed in kind), as the engine's scan of the
    /// bytes on disk sees them, before any revert; absent when a scan failed and in
    /// events written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touched: Option<Vec<String>>,
}

/// The payload of `verdict_refused`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerdictRefused {
    /// The leaf that claimed it.
    pub leaf_id: String,
    /// Why it was refused.
    pub reason: String,
    /// The decision claimed.
    pub decision: Decision,
}

/// The payload of `stop_cleared`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StopCleared {}

#[cfg(test)]
mod tests {
    use super::LeavesEvent;

    /// Every leaves event of a ledger the last release wrote reads as its type.
    #[test]
    fn a_ledger_written_by_the_last_release_reads_as_leaves_events() {
        let (_dir, copy) = tdd_testutil::demo_ledger();
        let ledger = tdd_engine::ledger::Ledger::open_read_only(&copy)
            .expect("opens")
            .expect("a ledger");
        let mut read = 0;
        for event in ledger.events(None).expect("events") {
            let typed =
                tdd_engine::ledger::decode_own::<LeavesEvent>(&event).expect("reads as its type");
            read += usize::from(typed.is_some());
        }
        // 21 leaves prepared, started and finished, 10 verdicts.
        assert_eq!(read, 21 * 3 + 10);
    }
}
