//! Runs and cycles: the phase machine, driven only by `advance` and computed
//! only from observed suite runs.
//!
//! Every decision is an event in the ledger with the observations it rests
//! on, and the run's state is a projection of those events ([`RunState`]).

mod actions;
mod advance;
mod artifacts;
mod beneath;
mod candidate;
mod cleanroom;
mod commit;
mod confine;
mod deciding;
mod enforce;
pub mod events;
mod gates;
mod glance;
mod green;
mod links;
mod locks;
mod memo;
mod phase;
mod red;
mod register;
mod rollback;
mod safe_fs;
pub(crate) mod scan;
mod sensitivity;
mod snapshot;
mod stamp;
mod start;
mod state;
mod testdefs;
mod testing;
mod tests_seen;
mod tx;

use std::path::Path;
use std::path::PathBuf;

pub use crate::worktree_lock::Holder;
pub use actions::Blocker;
pub use advance::AdvanceOutcome;
pub use advance::Unchanged;
pub use cleanroom::CleanRoom;
pub use cleanroom::CleanRoomError;
pub use events::RunEvent;
pub use gates::RedDecision;
pub use gates::Refused;
pub use gates::green_gate;
pub use gates::red_gate;
pub use locks::GlobError;
pub use locks::Lock;
pub use locks::LockRules;
pub use locks::PathSet;
pub use locks::PhaseLocks;
pub use locks::targets_outside_tests;
pub use phase::Phase;
pub use phase::Verb;
pub use register::CycleKinds;
pub use register::Registration;
pub use rollback::RollbackTo;
pub use scan::FlaggedPath;
pub use scan::clear_index_flags;
pub use snapshot::LockReport;
pub use snapshot::Snapshot;
pub use start::StartOutcome;
pub use state::Baseline;
pub use state::CycleState;
pub use state::RunState;
pub use state::RunStatus;
pub use testing::TestReport;
pub use testing::TestRequest;
pub use tx::RunTx;
pub use tx::RunView;
pub use tx::STOP_TOOL;
pub(crate) use tx::adopt_run;
pub(crate) use tx::import_published;

use crate::config::Config;
use crate::ledger::Kinds;
use crate::ledger::Ledger;
use crate::ledger::LedgerError;
use crate::ledger::LedgerLocation;

/// Why a run command failed (as opposed to a gate refusing, which is an outcome).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The ledger could not be checked against the branch, or fails that check.
    #[error(transparent)]
    Integrity(#[from] crate::integrity::IntegrityError),
    /// git failed.
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// A runner could not be started or read.
    #[error(transparent)]
    Observe(#[from] crate::observe::ObserveError),
    /// A lock glob does not compile.
    #[error(transparent)]
    Glob(#[from] GlobError),
    /// A `known_failures` entry does not compile.
    #[error(transparent)]
    KnownFailures(#[from] crate::config::KnownFailureError),
    /// No run is active in this work tree.
    #[error("no active run in this work tree")]
    NoActiveRun,
    /// A run is already active.
    #[error("run {run_id} is already active in this work tree")]
    RunActive {
        /// The active run.
        run_id: String,
    },
    /// The work tree has uncommitted changes.
    #[error("the work tree has uncommitted changes: {}", files.join(", "))]
    DirtyTree {
        /// The changed paths.
        files: Vec<String>,
    },
    /// Another baseline or advance holds the work tree.
    #[error("another {} (pid {}) holds this work tree", holder.what, holder.pid)]
    Busy {
        /// Who holds it.
        holder: Holder,
    },
    /// The committed plan changed since the run registered it.
    #[error("the plan {path} changed since the run started (blob {registered} is now {now})")]
    PlanChanged {
        /// The plan path.
        path: String,
        /// The blob the run follows.
        registered: String,
        /// The blob at HEAD.
        now: String,
    },
    /// The named target is not a test that is new in this cycle.
    #[error("{id} is not a test that is new in this cycle (new tests: {})", if candidates.is_empty() { "none".to_string() } else { candidates.join(", ") })]
    TargetNotNew {
        /// The qualified id that was named.
        id: String,
        /// The tests that are new in this cycle.
        candidates: Vec<String>,
    },
    /// The plan names a project that `tdd.toml` no longer declares.
    #[error("the run's plan names project `{name}`, which tdd.toml no longer declares")]
    UnknownProject {
        /// The project name.
        name: String,
    },
    /// A project name that tdd.toml does not declare.
    #[error("no project `{name}` in tdd.toml")]
    NoSuchProject {
        /// The name given.
        name: String,
        /// The declared name nearest to it, if any is near.
        nearest: Option<String>,
        /// Every declared project.
        declared: Vec<String>,
    },
    /// A test id that names no project, while tdd.toml declares several.
    #[error("`{target}` does not name its project and tdd.toml declares several")]
    AmbiguousTarget {
        /// The id.
        target: String,
    },
    /// tdd.toml declares no project at all.
    #[error("tdd.toml declares no project")]
    NoProjects,
    /// There is no earlier phase in this cycle to roll back to.
    #[error("cycle {n} has no earlier phase than {phase} to roll back to")]
    NoPreviousPhase {
        /// The cycle.
        n: u32,
        /// Its current phase.
        phase: Phase,
    },
    /// A blocker is open; only `resume --unblock` moves the run again.
    #[error("the run is blocked: {detail}")]
    Blocked {
        /// The blocker as recorded.
        detail: String,
    },
    /// The clean room could not be prepared.
    #[error(transparent)]
    CleanRoom(#[from] CleanRoomError),
    /// A runner pinned at run start is no longer the same program.
    #[error("the test runner changed since the run started")]
    RunnerChanged(#[from] crate::observe::hermetic::RunnerChanged),
    /// tdd.toml is not the file the run started with.
    #[error("tdd.toml changed since the run started (sha256 {recorded:.12} is now {now:.12})")]
    ConfigChanged {
        /// The SHA-256 recorded at run start.
        recorded: String,
        /// The SHA-256 of the file now.
        now: String,
    },
    /// A toolchain asked at `run start` what it loads did not answer in time: what it
    /// loads could not be pinned, so no deciding run could be trusted.
    #[error("what the toolchain loads cannot be pinned")]
    ToolchainUnanswered(#[from] crate::observe::hermetic::Unanswered),
    /// A runner configuration file a runner would read (in a directory above the clean
    /// room, or the user's Go, npm or cargo configuration) is a named pipe, a socket or
    /// a device: a toolchain or a runner opening it would wait for ever.
    #[error(
        "{} is {found}, not a file: a runner reading its configuration there would wait for ever",
        path.display()
    )]
    RunnerConfigNotRegular {
        /// The path.
        path: std::path::PathBuf,
        /// What stands there, in words (`a named pipe`).
        found: &'static str,
    },
    /// A relative `pythonpath` entry of a pytest configuration file leads out of the
    /// repository: a deciding run resolves it from the clean room's checkout, where it
    /// leads somewhere else than it does from the work tree, and nothing there is pinned.
    #[error(
        "{}:{line}: the pythonpath entry `{entry}` leads out of the repository (to {}); deciding runs check out the commit alone, where it would lead somewhere else",
        file.display(),
        leads.display()
    )]
    PythonpathOutside {
        /// The configuration file.
        file: std::path::PathBuf,
        /// The line that names the entry (1 when it cannot be found).
        line: usize,
        /// The entry as written.
        entry: String,
        /// Where it leads from the work tree.
        leads: std::path::PathBuf,
    },
    /// A file or directory of tdd's own state is not what tdd made (a file where a
    /// directory belongs, a link, a pipe): nothing is written through it.
    #[error("{} is not {expected}: tdd's own state there was replaced ({found})", path.display())]
    StateDamaged {
        /// The path.
        path: std::path::PathBuf,
        /// What tdd keeps there, in words (`a directory`).
        expected: &'static str,
        /// What stands there instead, in words.
        found: String,
    },
    /// An I/O failure on the engine's own files.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl From<crate::ledger::EventError> for RunError {
    fn from(err: crate::ledger::EventError) -> RunError {
        RunError::Ledger(err.into())
    }
}

/// Receives progress while long work (baselines, suites) runs.
pub trait Progress {
    /// One heartbeat: a snake_case event, its facts, and a line for people.
    fn event(&self, event: &str, fields: serde_json::Value, text: &str);
}

/// One work tree as the engine acts on it, resolved once: its canonical path, its
/// ledger's location, its configuration and that file's hash. The one door to a change
/// of its run is [`Session::begin`] (a [`RunTx`], after the ledger check), and to a
/// look at it [`Session::view`] (after the same check).
#[derive(Debug)]
pub struct Session {
    work_tree: PathBuf,
    config: Config,
    config_sha: String,
    location: LedgerLocation,
    /// Every domain's event kinds, handed in by the top of the program: the run's fold
    /// passes over another domain's events and refuses a kind no domain declares.
    kinds: Kinds,
    adopted: std::sync::OnceLock<crate::integrity::Adopted>,
    /// The run the adoption of a published ledger projected, at the chain head it left:
    /// a read at that same head is that run, not a second fold of its events.
    projected: std::sync::OnceLock<Projected>,
}

impl Session {
    /// The session of `work_tree` with its parsed config and the config file's text,
    /// for a caller that read them already, and the registry of every domain's event
    /// kinds (the run's among them) that the run's events are read with.
    pub fn new(
        work_tree: &Path,
        config: Config,
        config_text: &str,
        kinds: Kinds,
    ) -> Result<Session, RunError> {
        let work_tree = work_tree
            .canonicalize()
            .unwrap_or_else(|_| work_tree.to_path_buf());
        let location = LedgerLocation::resolve(&work_tree, &crate::git::GitProbe)?;
        Ok(Session {
            work_tree,
            config,
            config_sha: Config::text_sha256(config_text),
            location,
            kinds,
            adopted: std::sync::OnceLock::new(),
            projected: std::sync::OnceLock::new(),
        })
    }

    /// The registry of event kinds the run's events are read with.
    pub fn kinds(&self) -> &Kinds {
        &self.kinds
    }

    /// The work tree.
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// Refuses to go on (`RunError::Integrity` holding `Tampered`) when the ledger fails
    /// verification: its hash chain, and the run commits from HEAD down to the newest
    /// anchor (see [`crate::integrity::ensure_intact`]). Every change of a run passes it
    /// on the way in ([`Session::begin`], the one door to a [`RunTx`]), and so does a
    /// read-only [`Session::view`].
    pub fn ensure_ledger_intact(&self) -> Result<(), RunError> {
        let found =
            crate::integrity::ensure_intact(&self.location.database, &self.work_tree, &self.kinds)?;
        if let Some(adopted) = found.adopted {
            let _ = self.adopted.set(adopted);
        }
        if let Some(projected) = found.projected {
            let _ = self.projected.set(projected);
        }
        Ok(())
    }

    /// The published ledger this engine's check took in (a clone's first command), if it
    /// took one in: for the command to say so.
    pub fn adopted(&self) -> Option<&crate::integrity::Adopted> {
        self.adopted.get()
    }

    /// Publishes the ledger under `refs/tdd/ledger/<branch>` of the branch checked out
    /// here, with the snapshot trees of the run active here
    /// ([`crate::published::publish`]). `Ok(None)` with HEAD detached or no ledger.
    pub fn publish_ledger(
        &self,
    ) -> Result<Option<crate::published::Published>, crate::published::PublishError> {
        let snapshots = match self.status() {
            Ok(Some(state)) => crate::published::snapshot_trees(&self.work_tree, &state.run_id)?,
            _ => Vec::new(),
        };
        crate::published::publish(&self.location.database, &self.work_tree, &snapshots)
    }

    /// Checkpoints `ledger` ([`Ledger::checkpoint`]) and publishes it
    /// ([`Session::publish_ledger`]) after a change was recorded and committed, with the
    /// snapshot trees of `active`, the run the change left active here (known to the
    /// caller, so the ledger is not projected again). The publication reads the ledger
    /// first, then writes its git objects and ref on a thread of its own while the
    /// checkpoint waits on the disk. A failed publication does not undo the change (the
    /// next change, `tdd ledger publish` or the forge's push publishes again), so it is
    /// logged, not returned.
    pub(crate) fn checkpoint_and_publish(&self, ledger: &mut Ledger, active: Option<&str>) {
        let gathered = crate::published::gather(ledger, &self.work_tree);
        let write = move || {
            let snapshots = self.snapshots_of(active);
            let gathered = gathered?;
            let snapshots = snapshots?;
            gathered.map(|g| g.write(&snapshots)).transpose()
        };
        let published = std::thread::scope(|scope| {
            match std::thread::Builder::new()
                .name("ledger publication".to_string())
                .spawn_scoped(scope, write)
            {
                Ok(writing) => {
                    ledger.checkpoint();
                    writing.join().unwrap_or_else(|_| {
                        Err(crate::git::GitError::Failed {
                            args: "publish".into(),
                            stderr: "the publishing thread panicked".into(),
                        }
                        .into())
                    })
                }
                // Where no thread can be made, one after the other.
                Err(_) => {
                    ledger.checkpoint();
                    self.snapshots_of(active).and_then(|snapshots| {
                        crate::published::publish_from(ledger, &self.work_tree, &snapshots)
                    })
                }
            }
        });
        if let Err(e) = published {
            tracing::warn!(error = %e, "the ledger could not be published in git");
        }
    }

    /// The snapshot trees of run `active` ([`crate::published::snapshot_trees`]), none
    /// without one.
    fn snapshots_of(
        &self,
        active: Option<&str>,
    ) -> Result<Vec<String>, crate::published::PublishError> {
        Ok(match active {
            Some(run_id) => crate::published::snapshot_trees(&self.work_tree, run_id)?,
            None => Vec::new(),
        })
    }

    /// The run active in this work tree, projected read-only from the ledger.
    pub fn status(&self) -> Result<Option<RunState>, RunError> {
        let Some(ledger) = Ledger::open_read_only(&self.location.database)? else {
            return Ok(None);
        };
        self.active_run(&ledger)
    }

    /// The phase commits the ledger recorded for the run active here that HEAD does not
    /// contain (reset away, amended, rebased), oldest first, as (cycle, phase, commit).
    /// Empty with no active run: a finished branch may be squashed or rebased freely.
    pub fn phase_commits_off_branch(&self) -> Result<Vec<(u32, String, String)>, RunError> {
        let Some(state) = self.status()? else {
            return Ok(Vec::new());
        };
        let git = crate::git::Git::new(&self.work_tree);
        // git must answer in this repository at all (its configuration readable, HEAD
        // a commit) before a commit it cannot place is said to be off the branch: a
        // git that fails or stalls here is that failure, not a rewritten history.
        git.output(["rev-parse", "--verify", "HEAD^{commit}"])?;
        Ok(state
            .cycles
            .iter()
            .flat_map(|c| c.commits.iter().map(move |(phase, sha)| (c.n, phase, sha)))
            .filter(|(_, _, sha)| {
                git.output(["merge-base", "--is-ancestor", sha.as_str(), "HEAD"])
                    .is_err()
            })
            .map(|(n, phase, sha)| (n, phase.clone(), sha.clone()))
            .collect())
    }

    fn active_run(&self, ledger: &Ledger) -> Result<Option<RunState>, RunError> {
        Ok(self
            .latest_run(ledger)?
            .filter(|s| s.status == RunStatus::Active))
    }

    /// The last run started in this work tree, whatever its status.
    fn latest_run(&self, ledger: &Ledger) -> Result<Option<RunState>, RunError> {
        let worktree = self.work_tree.display().to_string();
        if let Some(projected) = self.projected.get()
            && projected.state.worktree == worktree
            && ledger.anchor()? == projected.anchor
        {
            return Ok(Some(projected.state.clone()));
        }
        if let Some(state) = self.remembered_run(ledger, &worktree)? {
            return Ok(Some(state));
        }
        // A run belongs to the work tree it started in, or the one it was adopted into last.
        let started = ledger.typed::<RunEvent>(None, &["run_started", "run_adopted"])?;
        let Some(start) = started.iter().rev().find_map(|(event, typed)| match typed {
            RunEvent::RunStarted(run) if run.worktree == worktree => Some(event),
            RunEvent::RunAdopted(run) if run.worktree == worktree => Some(event),
            _ => None,
        }) else {
            return Ok(None);
        };
        let events = ledger.events(start.run_id.as_deref())?;
        let state = RunState::project(&events, &self.kinds)?;
        if let (Some(state), Some(last), Ok(from), Some(_)) = (
            &state,
            events.last(),
            u64::try_from(start.id),
            &start.run_id,
        ) {
            memo::remember(ledger, &worktree, last, from, state);
        }
        Ok(state)
    }

    /// Opens the cycle after `after` (the first when `None`), or completes the run when none
    /// is left. Returns the opened cycle's number and phase.
    fn open_next(
        &self,
        ledger: &mut Ledger,
        run_id: &str,
        plan: &crate::plan::Plan,
        after: Option<u32>,
    ) -> Result<Option<(u32, Phase)>, RunError> {
        let next = plan.cycles.iter().find(|c| after.is_none_or(|n| c.n > n));
        let Some(cycle) = next else {
            ledger.record(Some(run_id), &RunEvent::RunCompleted(events::Empty {}))?;
            return Ok(None);
        };
        let phase = Phase::initial(cycle.kind);
        let snapshot = Snapshot::take(&self.work_tree, &format!("{run_id}/cycle-{}", cycle.n))?;
        let head = crate::git::Git::new(&self.work_tree).text(["rev-parse", "HEAD"])?;
        let event = RunEvent::CycleOpened(events::CycleOpened {
            n: cycle.n,
            phase,
            snapshot: snapshot.tree,
            head,
        });
        ledger.record(Some(run_id), &event)?;
        Ok(Some((cycle.n, phase)))
    }

    /// The observation view of project `name`, or `UnknownProject` if tdd.toml lost it.
    pub(crate) fn project(&self, name: &str) -> Result<crate::observe::Project, RunError> {
        let config =
            self.config
                .project
                .get(name)
                .cloned()
                .ok_or_else(|| RunError::UnknownProject {
                    name: name.to_string(),
                })?;
        let project = crate::observe::Project::new(&self.work_tree, name, config)?;
        Ok(self.confine(project, confine::RunsIn::Live))
    }

    /// Project `name` for a step of the run in the live work tree (RED's targets, a
    /// sensitivity check): its runners see only the run's pinned environment, as deciding
    /// runs do, never the caller's secrets.
    pub(crate) fn run_project(
        &self,
        name: &str,
        pinned: Option<&std::sync::Arc<crate::observe::hermetic::PinnedEnv>>,
    ) -> Result<crate::observe::Project, RunError> {
        let project = self.project(name)?;
        Ok(match pinned {
            Some(env) => project.hermetic(std::sync::Arc::clone(env)),
            None => project,
        })
    }

    /// Takes the work tree's advance lock (`<state dir>/locks/<key>.lock`), which
    /// serialises baselines and advances, or names who holds it.
    fn lock(&self, what: &str) -> Result<crate::worktree_lock::Guard, RunError> {
        let dir = self.location.dir.join("locks");
        for at in [&self.location.dir, &dir] {
            match std::fs::symlink_metadata(at) {
                Ok(meta) if !meta.is_dir() => {
                    return Err(RunError::StateDamaged {
                        path: at.clone(),
                        expected: "a directory",
                        found: kind_in_words(&meta),
                    });
                }
                _ => {}
            }
        }
        let path = dir.join(format!(
            "{}.lock",
            crate::worktree_lock::key(&self.work_tree)
        ));
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.is_file() => {
                return Err(RunError::StateDamaged {
                    path,
                    expected: "a regular file",
                    found: kind_in_words(&meta),
                });
            }
            _ => {}
        }
        match crate::worktree_lock::acquire(&path, what) {
            Ok(Ok(guard)) => Ok(guard),
            Ok(Err(holder)) => Err(RunError::Busy { holder }),
            Err(source) => {
                // A directory on the way that is something else now (the ledger home or
                // its `repos` made a file): damaged state, named, never a crash.
                let not_a_dir = path.ancestors().skip(1).find_map(|dir| {
                    std::fs::metadata(dir)
                        .ok()
                        .filter(|meta| !meta.is_dir())
                        .map(|meta| (dir.to_path_buf(), meta))
                });
                Err(match not_a_dir {
                    Some((dir, meta)) => RunError::StateDamaged {
                        path: dir,
                        expected: "a directory",
                        found: kind_in_words(&meta),
                    },
                    None => RunError::Io {
                        what: "taking the work-tree lock".into(),
                        source,
                    },
                })
            }
        }
    }
}

/// What kind of entry `meta` describes, in words.
pub(crate) fn kind_in_words(meta: &std::fs::Metadata) -> String {
    crate::observe::kind_in_words(meta.file_type()).to_string()
}

/// A run's state as projected at one chain head, kept so that a read at that same head
/// reuses it; equal when projected at the same head.
#[derive(Debug, Clone)]
pub struct Projected {
    /// The chain head the state was projected at.
    pub(crate) anchor: crate::ledger::Anchor,
    /// The run as its events said at that head.
    pub(crate) state: RunState,
}

impl PartialEq for Projected {
    fn eq(&self, other: &Projected) -> bool {
        self.anchor == other.anchor && self.state.run_id == other.state.run_id
    }
}

impl Eq for Projected {}

#[cfg(test)]
mod tests;
