//! The one door to a change of a run: [`RunTx`].
//!
//! Every change of a run (an event recorded against it, HEAD moved) is made through a
//! `RunTx`: its methods are the engine's mutations, and `Session::record_test` opens one
//! too. A `RunTx` exists only once the ledger passed verification (its hash chain, and
//! the run commits from HEAD down to the newest anchor: see
//! [`crate::integrity::ensure_intact`]) under the work tree's lock. So no command and no
//! conductor step can change a run whose ledger fails verification, whichever door it
//! came in by, and nothing but this process changes the ledger between the check and
//! the change. A change opened without the lock says so in its name
//! ([`Session::begin_unlocked`]); none is opened without the check. Each transaction is
//! used once: its methods take it by value, so the next change checks again. The one
//! ledger write outside a run, a verifier's test observation in a scratch worktree, is
//! `Session::record_outside_runs`. One append rests on the last check instead of a new
//! one: a hook's denial, made while the ledger's files are byte for byte those that
//! check passed (`Session::record_hook_denial`, in `glance.rs`); it changes no state.

use super::RunError;
use super::Session;
use super::state::RunState;
use crate::ledger::Ledger;

/// A change of the run in one work tree, in progress: the ledger verified and open for
/// writing, and (but for [`Session::begin_unlocked`]) the work tree's lock held until
/// the change returns.
#[derive(Debug)]
pub struct RunTx<'e> {
    pub(super) engine: &'e Session,
    pub(super) ledger: Ledger,
    _lock: Option<crate::worktree_lock::Guard>,
}

/// A read-only look at the run, after the same check a change passes.
#[derive(Debug)]
pub struct RunView<'e> {
    engine: &'e Session,
    ledger: Option<Ledger>,
}

impl Session {
    /// Opens a change of this work tree's run: takes the work tree's lock (a second
    /// change meanwhile is refused, naming the holder), then verifies the ledger and
    /// opens it. Refused with `RunError::Integrity` when the ledger fails verification.
    pub fn begin(&self) -> Result<RunTx<'_>, RunError> {
        self.open_change(Some("advance"))
    }

    /// [`Session::begin`] for a run's start: the lock names a baseline, so a second
    /// `tdd run start` meanwhile is refused as one in progress.
    pub fn begin_baseline(&self) -> Result<RunTx<'_>, RunError> {
        self.open_change(Some("baseline"))
    }

    /// [`Session::begin`] without the work tree's lock, for the changes that only append
    /// and must not wait behind a phase being judged: a `tdd test` observation, a plan
    /// contract. The ledger is verified all the same.
    pub fn begin_unlocked(&self) -> Result<RunTx<'_>, RunError> {
        self.open_change(None)
    }

    /// A read-only look at the run after the check a change passes (`tdd status`).
    pub fn view(&self) -> Result<RunView<'_>, RunError> {
        self.ensure_ledger_intact()?;
        Ok(RunView {
            engine: self,
            ledger: Ledger::open_read_only(&self.location.database)?,
        })
    }

    /// Appends `event` to the ledger attached to no run: the one write that is not a
    /// change of a run, so no run's check applies (a verifier's `tdd test` in its scratch
    /// worktree, where no run is active, records the runs its verdict cites).
    pub(super) fn record_outside_runs(&self, event: &super::RunEvent) -> Result<(), RunError> {
        Ledger::open(&self.location.database)?.record(None, event)?;
        Ok(())
    }

    /// Appends `event` to run `run_id` on the strength of the last check rather than a
    /// new one: only for a hook's denial, whose caller has just found the ledger's files
    /// unchanged since a check passed. The appended event: its id says whether anything
    /// else was written in between.
    pub(super) fn append_after_glance(
        &self,
        run_id: &str,
        event: &super::RunEvent,
    ) -> Result<crate::ledger::Event, RunError> {
        let mut ledger = Ledger::open(&self.location.database)?;
        // A hook answers within milliseconds, so it does not wait for the clock to
        // pass its write to keep the ledger's seal: the next check rehashes the chain.
        ledger.forgo_seal();
        Ok(ledger.record(Some(run_id), event)?)
    }

    fn open_change(&self, lock: Option<&str>) -> Result<RunTx<'_>, RunError> {
        let lock = lock.map(|what| self.lock(what)).transpose()?;
        self.ensure_ledger_intact()?;
        Ok(RunTx {
            engine: self,
            ledger: Ledger::open(&self.location.database)?,
            _lock: lock,
        })
    }
}

/// Takes a published chain into the ledger at `database` (creating it): the door of
/// [`crate::integrity`]'s adoption of a published ledger, the one write made before the
/// check passes. It appends only what continues the local chain with every event
/// hashing right ([`Ledger::import`]), and the check then runs again, whole.
pub(crate) fn import_published(
    database: &std::path::Path,
    events: &[crate::ledger::StoredEvent],
) -> Result<Result<crate::ledger::Imported, crate::ledger::ImportRefused>, crate::ledger::LedgerError>
{
    // A chain that would be refused creates no ledger: the next command on this machine
    // is still its first, and says again why the published ledger was not taken in.
    if !database.exists()
        && let Err(refused) = crate::ledger::check_chain(events)
    {
        return Ok(Err(refused));
    }
    Ledger::open(database)?.import(events)
}

/// Moves run `run_id` into `work_tree` (a canonical path) when it is active and belongs
/// to another work tree, recording `run_adopted`; `Ok(Some(from))` when it moved. Called
/// only after a published ledger was taken in and the check passed, for the run of the
/// newest run commit on the branch checked out here.
pub(crate) fn adopt_run(
    database: &std::path::Path,
    work_tree: &std::path::Path,
    run_id: &str,
    known: &crate::ledger::Kinds,
) -> Result<(Option<String>, Option<super::Projected>), crate::integrity::IntegrityError> {
    let mut ledger = Ledger::open(database)?;
    let events = ledger.events(Some(run_id))?;
    let Some(state) =
        RunState::project(&events, known).map_err(crate::ledger::LedgerError::from)?
    else {
        return Ok((None, None));
    };
    let here = work_tree.display().to_string();
    if state.status != super::RunStatus::Active || state.worktree == here {
        return Ok((None, None));
    }
    let head = crate::git::Git::new(work_tree).text(["rev-parse", "HEAD"])?;
    let recorded = ledger.record(
        Some(run_id),
        &super::RunEvent::RunAdopted(super::events::RunAdopted {
            worktree: here,
            from: state.worktree.clone(),
            head,
        }),
    )?;
    // The run as it stands now, for the command that took it in to read without
    // folding its events again.
    let mut now = state.clone();
    now.follow(&recorded, known)
        .map_err(crate::ledger::LedgerError::from)?;
    let projected = Some(super::Projected {
        anchor: ledger.anchor()?,
        state: now,
    });
    Ok((Some(state.worktree), projected))
}

impl RunTx<'_> {
    /// The active run, or `NoActiveRun`.
    pub(super) fn active(&self) -> Result<RunState, RunError> {
        self.engine
            .active_run(&self.ledger)?
            .ok_or(RunError::NoActiveRun)
    }
}

impl RunView<'_> {
    /// The run active in this work tree, if any.
    pub fn status(&self) -> Result<Option<RunState>, RunError> {
        match &self.ledger {
            Some(ledger) => self.engine.active_run(ledger),
            None => Ok(None),
        }
    }

    /// The active run with the locks of its open cycle at the cycle's phase: the same
    /// locks its next advance reverts by. `None` with no run active or no cycle open.
    pub fn locks(&self) -> Result<Option<(RunState, super::PhaseLocks)>, RunError> {
        let Some(state) = self.status()? else {
            return Ok(None);
        };
        let Some((cycle, planned)) = state.current_cycle() else {
            return Ok(None);
        };
        let locks = super::PhaseLocks::for_cycle(&self.engine.config, planned, cycle.phase)?;
        Ok(Some((state, locks)))
    }

    /// The id of the ledger's newest event (0 for an empty or absent ledger).
    pub(super) fn head(&self) -> Result<i64, RunError> {
        Ok(match &self.ledger {
            Some(ledger) => i64::try_from(ledger.count()?).unwrap_or(i64::MAX),
            None => 0,
        })
    }

    /// How many times in a row, since the open cycle's phase began, a hook kept the
    /// agent from ending its turn (`hook_denied` of the tool `Stop`), for `run_id`.
    pub fn stops_denied_in_phase(&self, run_id: &str) -> Result<u32, RunError> {
        let Some(ledger) = &self.ledger else {
            return Ok(0);
        };
        let events = ledger.typed::<super::RunEvent>(
            Some(run_id),
            &[
                "cycle_opened",
                "phase_changed",
                "rolled_back",
                "hook_denied",
                "note",
            ],
        )?;
        let mut denied = 0;
        for (_, event) in events.iter().rev() {
            match event {
                super::RunEvent::HookDenied(d) if d.tool == STOP_TOOL => denied += 1,
                super::RunEvent::HookDenied(_) => {}
                // A note ends the streak: the hook writes one when it lets a turn end.
                _ => break,
            }
        }
        Ok(denied)
    }
}

/// The tool name a denied end of turn is recorded under.
pub const STOP_TOOL: &str = "Stop";

#[cfg(test)]
mod tests {
    /// The engine's sources, but for this file, with their paths.
    fn sources(dir: &std::path::Path, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("engine/src is listable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                sources(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source is readable");
                found.push((path.display().to_string(), text));
            }
        }
    }

    #[test]
    fn nothing_in_the_engine_writes_the_ledger_but_through_this_door() {
        // A writable ledger comes only from `open_change` (after the check) or
        // `record_outside_runs` (no run): an engine method that opened one itself could
        // change a run whose ledger fails verification.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        sources(&root, &mut found);
        let doors: Vec<&str> = found
            .iter()
            .filter(|(path, _)| !path.ends_with("run/tx.rs"))
            .filter(|(path, _)| !path.ends_with("tests.rs") && !path.contains("/tests/"))
            .filter(|(_, text)| text.contains("Ledger::open("))
            .map(|(path, _)| path.as_str())
            .collect();
        assert!(
            doors.is_empty(),
            "the ledger is opened for writing in {doors:?}"
        );
    }
}
