//! A glance at the open cycle's locks, for `tdd hook`: an agent CLI asks before every
//! tool call, so the answer must come in milliseconds, where checking the ledger's
//! whole chain and folding every event takes tens.
//!
//! The first call checks and folds as [`Session::view`] does, and keeps what the locks
//! need (the open cycle, its phase, its planned cycle) beside the ledger, keyed by what
//! `stat` says of the ledger's files when the check began, the key its seal is kept by
//! (`tdd_ledger::seal`): the device, inode, size, modification and change times of the
//! database, and of its write-ahead log the same but the change time, with the SHA-256
//! of its bytes instead. A later
//! call whose key is the same reads that instead. Any write to the ledger (an advance,
//! a record, an edit by hand, even with its times put back: the change time is the
//! kernel's) changes the key, and the next call checks again.
//!
//! What is kept is guidance, never a gate's input: the gates check the whole chain
//! every time. Someone who rewrites the kept file can make a hook allow a locked write,
//! which the next advance reverts; no more than removing the hook from the CLI's
//! settings would (docs/security.md).

use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;
use tdd_ledger::seal::FileKey;

use super::Phase;
use super::PhaseLocks;
use super::RunError;
use super::Session;
use crate::plan::PlannedCycle;

/// The file beside the ledger that keeps the last glance.
const GLANCE_FILE: &str = "hook-glance.json";

/// The open cycle, as the last checked fold found it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Open {
    /// The cycle's number.
    n: u32,
    /// Its phase.
    phase: Phase,
    /// Its planned cycle, from which the locks are computed with today's `tdd.toml`.
    planned: PlannedCycle,
}

/// What is kept: the key, the work tree it was taken for, the open cycle (none: no
/// run active, or no cycle open), the active run and the id of the ledger's newest
/// event as the check found them (absent in glances kept before they were).
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    key: Vec<FileKey>,
    work_tree: PathBuf,
    open: Option<Open>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    head: Option<i64>,
}

impl Session {
    /// The open cycle's number and the locks of its phase, as
    /// [`super::RunView::locks`] gives them (a ledger that fails verification is the
    /// same error), read from the last glance when the ledger has not changed since
    /// it was taken. `None` with no run active or no cycle open.
    pub fn glance_locks(&self) -> Result<Option<(u32, PhaseLocks)>, RunError> {
        let key = self.ledger_key();
        let kept_at = self.location.dir.join(GLANCE_FILE);
        let open = match read_kept(&kept_at)
            .filter(|kept| !key.is_empty() && kept.key == key && kept.work_tree == self.work_tree)
        {
            Some(kept) => kept.open,
            None => {
                let view = self.view()?;
                let head = view.head()?;
                let locked = view.locks()?;
                let run_id = locked.as_ref().map(|(state, _)| state.run_id.clone());
                let open = locked.and_then(|(state, _)| {
                    let (cycle, planned) = state.current_cycle()?;
                    Some(Open {
                        n: cycle.n,
                        phase: cycle.phase,
                        planned: planned.clone(),
                    })
                });
                // Keyed by the files as they were before the check: a write made
                // while it ran leaves a key no later call has.
                write_kept(
                    &kept_at,
                    &Kept {
                        key,
                        work_tree: self.work_tree.clone(),
                        open: open.clone(),
                        run_id,
                        head: Some(head),
                    },
                );
                open
            }
        };
        open.map(|open| {
            let locks = PhaseLocks::for_cycle(&self.config, &open.planned, open.phase)?;
            Ok((open.n, locks))
        })
        .transpose()
    }

    /// Records a hook's denial on the open cycle (`n` and `phase` filled in here) without
    /// checking the whole chain again, when the ledger's files are byte for byte those
    /// the last glance checked: the denial rests on that check, as the answer it records
    /// did. When nothing else was written in between (the event's id follows the
    /// checked head), the glance is kept for the ledger as it now is, so the next call
    /// is as quick. `false` when there is no such glance (the caller records it through
    /// a checked change instead).
    pub fn record_hook_denial(
        &self,
        mut denied: super::events::HookDenied,
    ) -> Result<bool, RunError> {
        let key = self.ledger_key();
        let kept_at = self.location.dir.join(GLANCE_FILE);
        let Some(kept) = read_kept(&kept_at)
            .filter(|kept| !key.is_empty() && kept.key == key && kept.work_tree == self.work_tree)
        else {
            return Ok(false);
        };
        let (Some(open), Some(run_id), Some(head)) = (&kept.open, &kept.run_id, kept.head) else {
            return Ok(false);
        };
        denied.n = Some(open.n);
        denied.phase = Some(open.phase.trailer().to_string());
        let event = self.append_after_glance(run_id, &super::RunEvent::HookDenied(denied))?;
        if event.id == head + 1 {
            write_kept(
                &kept_at,
                &Kept {
                    key: self.ledger_key(),
                    head: Some(event.id),
                    ..kept
                },
            );
        }
        Ok(true)
    }

    /// The key of the ledger's files as they are now (the seal's key:
    /// [`tdd_ledger::seal::files_key`]).
    fn ledger_key(&self) -> Vec<FileKey> {
        tdd_ledger::seal::files_key(&self.location.database)
    }
}

/// The kept glance, if `path` is a regular file holding one (never a link followed or
/// a pipe waited on).
fn read_kept(path: &Path) -> Option<Kept> {
    let bytes = crate::observe::read_regular_file(path)?;
    serde_json::from_slice(&bytes).ok()
}

/// Keeps `kept` at `path`, whole or not at all (a file beside it, renamed over it).
/// Best effort: a glance not kept is taken again next time.
fn write_kept(path: &Path, kept: &Kept) {
    let Ok(bytes) = serde_json::to_vec(kept) else {
        return;
    };
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    // A new file of its own (never through a link or a file left there).
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes));
    if written.is_err() || std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}
