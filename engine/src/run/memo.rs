//! The latest run of a work tree, kept between commands: each command's first look at
//! the run starts from the state the last one projected and follows only the run's
//! events recorded since, rather than decoding every event of the run again (a GREEN's
//! event carries the observations of its runs, kilobytes each).
//!
//! The memo is the ledger's ([`crate::ledger::Ledger::memo`]): given back only while the
//! chain holds the point it was projected at. It also names the start it followed from
//! (the newest `run_started` or `run_adopted` of the work tree), and is used only while
//! that start is still the newest, so a run started or adopted here since is projected
//! from its events. A memo that does not read, or was written by another release of
//! tdd, is no memo. Whatever it holds, the state it gives is the one projecting every
//! event would give: the engine's tests check the two agree.

use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;

use super::RunError;
use super::Session;
use super::state::Keep;
use super::state::Kept;
use super::state::RunState;
use crate::ledger::Anchor;
use crate::ledger::Event;
use crate::ledger::Ledger;

/// What a memo was written by: its layout and the release, whose projection it holds.
const FORMAT: &str = concat!("run-state-1 tdd-", env!("CARGO_PKG_VERSION"));

/// A memo as written.
#[derive(Serialize)]
struct Out<'s> {
    format: &'static str,
    start: u64,
    kept: Keep<'s>,
}

/// A memo as read.
#[derive(Deserialize)]
struct In {
    format: String,
    start: u64,
    kept: Kept,
}

impl Session {
    /// The latest run of `worktree` from its memo and the run's events since, when a
    /// memo holds it; `None` sends the caller to project it from the events.
    pub(super) fn remembered_run(
        &self,
        ledger: &Ledger,
        worktree: &str,
    ) -> Result<Option<RunState>, RunError> {
        let name = memo_name(worktree);
        let Some((at, body)) = ledger.memo(&name)? else {
            return Ok(None);
        };
        let Ok(memo) = serde_json::from_slice::<In>(&body) else {
            return Ok(None);
        };
        // A start that cannot be looked up (a payload that is not JSON) is left to the
        // projection, which names it.
        if memo.format != FORMAT
            || ledger.newest_start_in(worktree).ok().flatten() != Some(memo.start)
        {
            return Ok(None);
        }
        let mut state = RunState::from_kept(memo.kept);
        let since = ledger.run_events_after(&state.run_id, at.count)?;
        for event in &since {
            state.follow(event, &self.kinds)?;
        }
        if let Some(last) = since.last() {
            remember(ledger, worktree, last, memo.start, &state);
        }
        Ok(Some(state))
    }
}

/// Keeps `state`, the latest run of `worktree`, projected from its events up to `last`
/// (the run's last event read) and following from start event `start`.
pub(super) fn remember(
    ledger: &Ledger,
    worktree: &str,
    last: &Event,
    start: u64,
    state: &RunState,
) {
    let Ok(count) = u64::try_from(last.id) else {
        return;
    };
    let at = Anchor {
        count,
        hash: last.hash.clone(),
    };
    let memo = Out {
        format: FORMAT,
        start,
        kept: state.keep(),
    };
    if let Ok(body) = serde_json::to_vec(&memo) {
        ledger.keep_memo(&memo_name(worktree), &at, &body);
    }
}

/// The memo's name for `worktree`: work trees of one repository share a ledger, and
/// each has a latest run of its own.
fn memo_name(worktree: &str) -> String {
    let digest = sha2::Sha256::digest(worktree.as_bytes());
    format!("run-{}", &hex::encode(digest)[..16])
}
