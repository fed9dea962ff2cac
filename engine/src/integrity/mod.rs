//! The anchored ledger: the hash chain checked against the branch that its runs built.
//!
//! The chain alone proves that the events agree with each other. Every phase commit
//! also carries the chain head as it stood when the commit was made (`TDD-Ledger`), so
//! git holds an anchor the ledger cannot rewrite: a chain recomputed after removing
//! events, an older copy of the database put back or a ledger removed altogether no
//! longer matches the commits reachable from HEAD. [`ensure_intact`] is the one check
//! run before anything acts on a run: every change of one is a method of a
//! [`crate::run::RunTx`], which [`crate::run::Session::begin`] makes only after it, and
//! read-only commands look through [`crate::run::Session::view`], which runs it too.

mod walk;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;

pub use walk::RUN_TRAILER;
pub use walk::RunCommit;
pub use walk::Scope;
pub use walk::run_commits;

use crate::git::GitError;
use crate::ledger::Anchor;
use crate::ledger::Break;
use crate::ledger::COMMIT_STARTED;
use crate::ledger::Kinds;
use crate::ledger::Ledger;
use crate::ledger::LedgerError;

/// What a person does about a ledger that does not match its branch.
pub const RESTORE_HINT: &str = "restore the ledger from a backup (`tdd ledger path` shows where it lives) and run `tdd ledger verify` again; until it verifies, the runs recorded in it cannot be trusted and no command acts on them";

/// Why the ledger could not be checked, or the finding that it fails the check.
#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    /// The ledger fails verification: the chain is broken or does not match the branch.
    #[error("the ledger fails verification: {}", .0.summary())]
    Tampered(Box<Integrity>),
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The branch could not be walked.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The branch has run commits the ledger here does not hold (a clone: this machine
    /// holds no ledger for the repository), and no ledger was published for it.
    #[error(
        "this branch has {commits} commits of tdd runs that the ledger here does not hold, and no ledger was published for {}{}",
        branch.as_deref().map_or_else(|| "a detached HEAD".to_string(), |b| format!("the branch {b}")),
        remote.as_deref().map_or_else(|| " (and the branch has no remote to fetch one from)".to_string(), |r| format!(" (none here, none on {r})"))
    )]
    Unpublished {
        /// The branch checked out, `None` with HEAD detached.
        branch: Option<String>,
        /// The remote asked, if any.
        remote: Option<String>,
        /// Run commits walked.
        commits: u64,
    },
    /// The published ledger could not be taken in.
    #[error(transparent)]
    Published(#[from] crate::published::PublishError),
}

/// What to do about a clone with run commits and no published ledger.
pub const UNPUBLISHED_HINT: &str = "the ledger travels as `refs/tdd/ledger/<branch>`: in the repository where the run was made, run `tdd ledger publish` and push it with `git push <remote> <branch> refs/tdd/ledger/<branch>` (the GitHub forge pushes it with every step), then run this command again here; to start over instead, check out a branch without run commits";

/// One way a commit and the ledger disagree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The commit concerned.
    pub commit: String,
    /// The run its `TDD-Run` trailer names.
    pub run_id: String,
    /// What does not match, as a sentence fragment.
    pub reason: String,
}

/// What the check of the chain and the branch found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Integrity {
    /// Whether a ledger database exists.
    pub ledger_exists: bool,
    /// Events in the chain.
    pub events: u64,
    /// The first point where the chain itself stops matching, if any.
    pub chain: Option<Break>,
    /// Run commits walked on the branch.
    pub run_commits: u64,
    /// Of those, the ones carrying an anchor.
    pub anchors: u64,
    /// Every commit that disagrees with the ledger, newest first.
    pub problems: Vec<Problem>,
    /// The published ledger taken in on the way, when this check took one in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adopted: Option<Adopted>,
    /// The run that moved here with it, as projected at the chain head left behind.
    #[serde(skip)]
    pub projected: Option<crate::run::Projected>,
}

/// A published ledger taken in because this machine held none for the repository.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Adopted {
    /// The ref it came from.
    pub reference: String,
    /// Events taken in.
    pub events: u64,
    /// The remote it was fetched from, when it was not here already.
    pub fetched_from: Option<String>,
    /// Whether that remote was set to fetch the ledger refs with every `git fetch`.
    pub fetch_configured: bool,
    /// What a plain `git push` to that remote was set to carry, if it changed.
    pub push_configured: Option<crate::published::PushSetUp>,
    /// The work tree the branch's active run moved from, if it moved here.
    pub run_moved_from: Option<String>,
}

impl Adopted {
    /// One line for a person: what was taken in, from where, and what changed.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "took in the published ledger {} ({} events",
            self.reference, self.events
        );
        if let Some(remote) = &self.fetched_from {
            line.push_str(&format!(", fetched from {remote}"));
        }
        line.push(')');
        if self.fetch_configured
            && let Some(remote) = &self.fetched_from
        {
            line.push_str(&format!(
                "; `git fetch {remote}` now brings the ledger refs too (remote.{remote}.fetch += {})",
                crate::published::FETCH_REFSPEC
            ));
        }
        if let Some(push) = &self.push_configured {
            line.push_str("; ");
            line.push_str(&push.describe());
        }
        if let Some(from) = &self.run_moved_from {
            line.push_str(&format!("; the run continues here (it was in {from})"));
        }
        line
    }
}

impl Integrity {
    /// True when the chain is intact and every commit walked agrees with it.
    pub fn is_intact(&self) -> bool {
        self.chain.is_none() && self.problems.is_empty()
    }

    /// The first finding in one line, with the number of others.
    pub fn summary(&self) -> String {
        if let Some(broken) = &self.chain {
            let at = broken
                .event_id
                .map_or_else(|| "the chain head".to_string(), |id| format!("event {id}"));
            return format!("ledger chain broken at {at}: {}", broken.reason);
        }
        let Some(first) = self.problems.first() else {
            return "the ledger is intact".to_string();
        };
        let more = match self.problems.len() - 1 {
            0 => String::new(),
            1 => " (and 1 more commit)".to_string(),
            n => format!(" (and {n} more commits)"),
        };
        format!("commit {}: {}{more}", short(&first.commit), first.reason)
    }
}

/// Verifies the chain of the ledger at `database`, then checks it against the run
/// commits reachable from HEAD in `work_tree` as far as `scope` goes: each must be named
/// by an event, and each anchor must match the chain at its position. To the newest
/// anchor, the chain is rehashed from the ledger's seal when its files are those the
/// seal was kept for; in full, every event is rehashed.
pub fn check(database: &Path, work_tree: &Path, scope: Scope) -> Result<Integrity, IntegrityError> {
    // The files' key is taken before they are opened: a seal is kept only for files
    // as they were before the look (`tdd_ledger::seal`). The whole scope reads none.
    let taken = (scope == Scope::ToNewestAnchor).then(|| tdd_ledger::seal::Taken::now(database));
    let ledger = Ledger::open_read_only(database)?;
    let mut integrity = Integrity {
        ledger_exists: ledger.is_some(),
        events: 0,
        chain: None,
        run_commits: 0,
        anchors: 0,
        problems: Vec::new(),
        adopted: None,
        projected: None,
    };
    if let Some(ledger) = &ledger {
        // What every command checks rehashes only what the seal does not cover;
        // `tdd ledger verify` (the whole scope) rehashes every event.
        let verification = match &taken {
            Some(taken) => ledger.verify_sealed(taken)?,
            None => ledger.verify()?,
        };
        integrity.events = verification.events;
        integrity.chain = verification.broken;
        if integrity.chain.is_some() {
            return Ok(integrity);
        }
    }
    let commits = run_commits(work_tree, scope)?;
    integrity.run_commits = commits.len() as u64;
    integrity.anchors = commits.iter().filter(|c| c.anchor.is_some()).count() as u64;
    integrity.problems = match &ledger {
        Some(ledger) => judge(ledger, &commits)?,
        None => commits
            .iter()
            .map(|c| problem(c, "the ledger does not exist, but the branch has this run's commits (the ledger was removed)".into()))
            .collect(),
    };
    Ok(integrity)
}

/// The check every command runs before acting on a run: the whole chain, and the branch
/// from HEAD down to its newest anchor. `Err(Tampered)` when anything fails.
///
/// On a machine that holds nothing for the repository (its ledger directory does not
/// exist: a clone), a branch whose run commits the empty ledger cannot account for has
/// its published ledger taken in first ([`crate::published::adopt`]), and the check is
/// made again, whole, and the run it moves here is read with `known`, the registry of
/// every domain's event kinds. Anywhere else a missing or older ledger stays a finding.
pub fn ensure_intact(
    database: &Path,
    work_tree: &Path,
    known: &Kinds,
) -> Result<Integrity, IntegrityError> {
    let integrity = check(database, work_tree, Scope::ToNewestAnchor)?;
    if integrity.is_intact() {
        return Ok(integrity);
    }
    let first_here = database.parent().is_some_and(|dir| !dir.exists());
    if integrity.chain.is_none() && first_here {
        return take_in_published(database, work_tree, known);
    }
    Err(IntegrityError::Tampered(Box::new(integrity)))
}

/// Takes in the ledger published for the branch checked out in `work_tree` (the local
/// ledger ref, else fetched from the branch's remote), checks the ledger against the
/// branch again, and moves the branch's active run here. What [`ensure_intact`] does by
/// itself on a machine new to the repository; `tdd ledger import` asks for it anywhere
/// (a ledger behind the published one, after a `git fetch`). Refused, changing nothing,
/// when the published chain does not continue the local one or is not as tdd writes it;
/// `Unpublished` when there is none. The run moved is read with `known`.
pub fn take_in_published(
    database: &Path,
    work_tree: &Path,
    known: &Kinds,
) -> Result<Integrity, IntegrityError> {
    use crate::published::Adoption;
    let adoption = crate::published::adopt(work_tree, true, |events| {
        crate::run::import_published(database, events)
    })?;
    let (reference, events, fetched_from, fetch_configured, push_configured) = match adoption {
        Adoption::Unpublished { branch, remote } => {
            let commits = run_commits(work_tree, Scope::ToNewestAnchor)?.len() as u64;
            return Err(IntegrityError::Unpublished {
                branch,
                remote,
                commits,
            });
        }
        Adoption::Imported {
            reference,
            appended,
            fetched_from,
            configured,
            push,
        } => (reference, appended, fetched_from, configured, push),
    };
    let mut integrity = check(database, work_tree, Scope::ToNewestAnchor)?;
    if !integrity.is_intact() {
        return Err(IntegrityError::Tampered(Box::new(integrity)));
    }
    let here = crate::git::Git::new(work_tree).toplevel()?;
    let here = here.canonicalize().unwrap_or(here);
    let newest = run_commits(work_tree, Scope::ToNewestAnchor)?;
    let (run_moved_from, projected) = match newest.first() {
        Some(commit) => crate::run::adopt_run(database, &here, &commit.run_id, known)?,
        None => (None, None),
    };
    integrity.projected = projected;
    integrity.adopted = Some(Adopted {
        reference,
        events,
        fetched_from,
        fetch_configured,
        push_configured,
        run_moved_from,
    });
    Ok(integrity)
}

/// The problems of `commits` against an existing ledger whose chain verified.
fn judge(ledger: &Ledger, commits: &[RunCommit]) -> Result<Vec<Problem>, LedgerError> {
    let head = ledger.anchor()?;
    // The records of the commits walked come after the oldest anchor among them: the
    // ledger is searched from there first (and whole only when that finds nothing), so
    // the check costs the same on a ledger of ten events or of a million.
    let after = commits
        .iter()
        .filter_map(|c| Anchor::parse(c.anchor.as_deref()?).ok())
        .map(|a| a.count)
        .min()
        .unwrap_or(0);
    let mut records = Records {
        recent: ledger.recorded_among_after(
            after,
            &commits.iter().map(|c| c.sha.as_str()).collect::<Vec<_>>(),
        )?,
        all: None,
        runs: BTreeMap::new(),
    };
    let mut problems = Vec::new();
    for commit in commits {
        let anchor = match commit.anchor.as_deref().map(Anchor::parse) {
            Some(Ok(anchor)) => Some(anchor),
            Some(Err(err)) => {
                problems.push(problem(commit, format!("its TDD-Ledger trailer {err}")));
                None
            }
            None => None,
        };
        let anchored = match &anchor {
            Some(anchor) => match anchor_mismatch(ledger, &head, anchor)? {
                Some(reason) => {
                    problems.push(problem(commit, reason));
                    false
                }
                None => true,
            },
            None => false,
        };
        if let Some(reason) = unrecorded(
            ledger,
            &mut records,
            commit,
            anchor.as_ref().filter(|_| anchored),
        )? {
            problems.push(problem(commit, reason));
        }
    }
    Ok(problems)
}

/// Why `anchor` does not match the chain, or `None` when the chain at its position has
/// exactly its hash.
fn anchor_mismatch(
    ledger: &Ledger,
    head: &Anchor,
    anchor: &Anchor,
) -> Result<Option<String>, LedgerError> {
    if anchor.count > head.count {
        return Ok(Some(format!(
            "it was made when the ledger held {} events, but the ledger holds {} (an older copy of the ledger was put back, or events were removed)",
            anchor.count, head.count
        )));
    }
    let found = ledger.hash_at(anchor.count)?.unwrap_or_default();
    if found != anchor.hash {
        return Ok(Some(format!(
            "it anchors event {} with hash {}, but the ledger has {} there (events up to it were removed or edited and the chain recomputed, or another ledger was put in its place)",
            anchor.count,
            short(&anchor.hash),
            short(&found)
        )));
    }
    Ok(None)
}

/// Why no event accounts for `commit`, or `None` when one does. A run's commit at HEAD
/// whose matching anchor is its run's `commit_started` event, with no commit of the run
/// recorded after it, is a process that ended between the commit and its record: the
/// anchor accounts for it. (An older copy of the ledger cannot pass for one, as it
/// lacks that event.)
fn unrecorded(
    ledger: &Ledger,
    records: &mut Records,
    commit: &RunCommit,
    matching_anchor: Option<&Anchor>,
) -> Result<Option<String>, LedgerError> {
    if records.names(ledger, &commit.sha)? {
        return Ok(None);
    }
    if !records.started(ledger, &commit.run_id)? {
        return Ok(Some(format!(
            "its run {} is not in the ledger (the ledger was replaced, emptied or its events removed)",
            commit.run_id
        )));
    }
    if let Some(anchor) = matching_anchor
        && commit.is_head
        && ledger.kind_at(anchor.count)?
            == Some((Some(commit.run_id.clone()), COMMIT_STARTED.to_string()))
        && !ledger.run_records_commits_after(&commit.run_id, anchor.count)?
    {
        return Ok(None);
    }
    Ok(Some(
        "no event of the ledger records this commit (its phase_changed event was removed)"
            .to_string(),
    ))
}

/// What the ledger records of the commits walked, read as it is needed: which of them
/// are recorded after the oldest anchor walked, the whole ledger's commits only when one
/// is not, and each run's start once.
struct Records {
    recent: BTreeSet<String>,
    all: Option<BTreeSet<String>>,
    runs: BTreeMap<String, bool>,
}

impl Records {
    /// Whether an event records `sha` as a commit the engine made.
    fn names(&mut self, ledger: &Ledger, sha: &str) -> Result<bool, LedgerError> {
        if self.recent.contains(sha) {
            return Ok(true);
        }
        if self.all.is_none() {
            self.all = Some(ledger.recorded_commits_after(0)?);
        }
        Ok(self.all.as_ref().is_some_and(|all| all.contains(sha)))
    }

    /// Whether run `run_id` has a `run_started` event.
    fn started(&mut self, ledger: &Ledger, run_id: &str) -> Result<bool, LedgerError> {
        if let Some(known) = self.runs.get(run_id) {
            return Ok(*known);
        }
        let started = ledger.has_started_run(run_id)?;
        self.runs.insert(run_id.to_string(), started);
        Ok(started)
    }
}

fn problem(commit: &RunCommit, reason: String) -> Problem {
    Problem {
        commit: commit.sha.clone(),
        run_id: commit.run_id.clone(),
        reason,
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests;
