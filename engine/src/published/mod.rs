//! The ledger published in git, so that it travels with the branch.
//!
//! The ledger lives outside every work tree, one per repository on one machine. A clone
//! has none, yet its branch carries run commits whose `TDD-Ledger` anchors name events
//! it does not hold. So the engine publishes the chain in git itself: after every phase
//! commit it records, the whole chain (every run of the repository, as the anchors count
//! events of the whole chain) is written as a commit under `refs/tdd/ledger/<branch>`
//! ([`publish`]; format in [`export`]), each export the child of the one before, with the
//! snapshot trees of the active run, which a resume restores from.
//!
//! In a clone, the check every command runs finds run commits its ledger does not
//! account for, and [`adopt`] takes the published chain in: from the local ref, else
//! fetched from the branch's remote (which is then set to fetch the ledger refs with
//! every `git fetch`). It is appended only if it continues the local chain and every
//! event hashes right ([`crate::ledger::Ledger::import`]), and the check then runs
//! again, whole, against the branch's anchors. A forged export can therefore not
//! replace any event an anchor on the branch vouches for; what it can do, as anyone who
//! writes the ledger by hand can, is add events after the newest anchor, or pair a forged
//! chain with forged commits, which the forge's thread and commit statuses witness.

mod export;
mod fetch;
mod publication;

use std::path::Path;

use gix_hash::ObjectId;

use crate::git::Git;
use crate::git::GitError;
use crate::ledger::ImportRefused;
use crate::ledger::Ledger;
use crate::ledger::LedgerError;
use crate::run::scan::HeadRef;
use crate::run::scan::Located;
use crate::run::scan::RefRead;

pub(crate) use publication::gather;

/// Where the ledgers are published: `refs/tdd/ledger/<branch>`.
pub const LEDGER_REF_PREFIX: &str = "refs/tdd/ledger/";

/// The refspec that makes `git fetch` bring every published ledger (never forced: a
/// ledger ref here that went another way is not overwritten).
pub const FETCH_REFSPEC: &str = "refs/tdd/ledger/*:refs/tdd/ledger/*";

/// The ref the ledger of `branch` is published under.
pub fn ledger_ref(branch: &str) -> String {
    format!("{LEDGER_REF_PREFIX}{branch}")
}

/// Why the ledger could not be published or taken in.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The ledger could not be read or written.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// git failed, or an object is missing or damaged.
    #[error(transparent)]
    Git(#[from] GitError),
    /// An event could not be encoded.
    #[error("failed to encode the ledger for publishing: {0}")]
    Encode(String),
    /// The published ledger is not as tdd writes it.
    #[error("the published ledger {reference} is not one tdd wrote: {what}")]
    Malformed {
        /// The ref.
        reference: String,
        /// What is wrong.
        what: String,
    },
    /// The ledger ref exists but names no commit (a blob, a tree, an object the
    /// repository lacks): nothing is published over it or taken in from it.
    #[error("the published ledger {reference} names no commit: {what}")]
    NotACommit {
        /// The ref.
        reference: String,
        /// What it names instead.
        what: String,
    },
    /// The published chain does not continue this ledger, or is broken.
    #[error("the published ledger {reference} was not taken in: {refused}")]
    Refused {
        /// The ref.
        reference: String,
        /// Why.
        refused: ImportRefused,
    },
}

/// An export written (or found current) under a ledger ref.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Published {
    /// The ref, `refs/tdd/ledger/<branch>`.
    pub reference: String,
    /// The export commit the ref names.
    pub commit: String,
    /// Events the export holds.
    pub events: u64,
    /// False when the ref already held this chain head.
    pub written: bool,
}

/// The branch checked out in `work_tree` (its name under `refs/heads/`, whatever tag
/// shares it), or `None` when HEAD is detached: read from HEAD's file where the refs
/// are files, else asked of git.
pub fn current_branch(work_tree: &Path) -> Result<Option<String>, GitError> {
    if let Ok(located) = crate::run::scan::locate(work_tree)
        && let Some(head) = located.head_ref()
    {
        return Ok(match head {
            HeadRef::Branch(branch) => Some(branch),
            HeadRef::Detached(_) => None,
        });
    }
    match Git::new(work_tree).text(["symbolic-ref", "-q", "HEAD"]) {
        Ok(name) => Ok(name
            .strip_prefix("refs/heads/")
            .filter(|branch| !branch.is_empty())
            .map(str::to_string)),
        Err(GitError::Failed { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The commit `reference` names, if it exists: read from the ref files where it can
/// be, else asked of git. A ref that exists but names no commit here (a blob, a tree,
/// an object the repository lacks) is [`PublishError::NotACommit`]: what tdd wrote
/// there is gone, and nothing is published over it or taken in from it.
fn resolve(
    located: &Located,
    git: &Git,
    reference: &str,
) -> Result<Option<ObjectId>, PublishError> {
    let not_a_commit = |what: String| PublishError::NotACommit {
        reference: reference.to_string(),
        what,
    };
    match located.read_ref(reference) {
        RefRead::Found(id) => {
            let checked = located.objects().handle()?;
            let mut buf = Vec::new();
            return match checked.find(&id, &mut buf) {
                Ok(data) if data.kind == gix_object::Kind::Commit => Ok(Some(id)),
                Ok(data) => Err(not_a_commit(format!("it names {id}, a {}", data.kind))),
                Err(GitError::ObjectMissing { .. }) => Err(not_a_commit(format!(
                    "it names {id}, which the repository does not hold"
                ))),
                Err(e) => Err(e.into()),
            };
        }
        RefRead::Absent => return Ok(None),
        RefRead::Unread => {}
    }
    let verify = |rev: &str| git.text(["rev-parse", "-q", "--verify", rev]);
    match verify(&format!("{reference}^{{commit}}")) {
        Ok(id) => Ok(ObjectId::from_hex(id.as_bytes()).ok()),
        Err(GitError::Failed { .. }) => match verify(reference) {
            Ok(id) => Err(not_a_commit(format!("it names {id}, which is no commit"))),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Publishes the ledger at `database` under the ledger ref of the branch checked out in
/// `work_tree`, keeping the trees `snapshots` reachable with it. `Ok(None)` with HEAD
/// detached or no ledger yet. The ref moves only from the value it was read at (a
/// concurrent publisher makes this one fail, never lose the other's export), and only
/// when the chain head differs from the one it holds.
pub fn publish(
    database: &Path,
    work_tree: &Path,
    snapshots: &[String],
) -> Result<Option<Published>, PublishError> {
    let Some(ledger) = Ledger::open_read_only(database)? else {
        return Ok(None);
    };
    publish_from(&ledger, work_tree, snapshots)
}

/// [`publish`] from a ledger already open: a change publishes through the connection
/// it wrote with, so no second connection touches the ledger's files while it holds
/// their seal ([`crate::ledger::seal`]).
pub(crate) fn publish_from(
    ledger: &Ledger,
    work_tree: &Path,
    snapshots: &[String],
) -> Result<Option<Published>, PublishError> {
    match publication::gather(ledger, work_tree)? {
        Some(gathered) => gathered.write(snapshots).map(Some),
        None => Ok(None),
    }
}

/// The trees of run `run_id`'s snapshots (`refs/tdd/<run id>/...`), which a resume
/// restores from and a clone would otherwise lack: read from the ref files where they
/// can be, else asked of git.
pub fn snapshot_trees(work_tree: &Path, run_id: &str) -> Result<Vec<String>, GitError> {
    let prefix = format!("refs/tdd/{run_id}/");
    let located = crate::run::scan::locate(work_tree)?;
    if let Some(refs) = located.refs_under(&prefix) {
        let objects = located.objects();
        // A ref that names no commit has no tree, as git's `%(tree)` gives none for it.
        return Ok(refs
            .iter()
            .filter_map(|(_, id)| objects.tree_of_commit(id).ok())
            .map(|tree| tree.to_string())
            .collect());
    }
    let refs = Git::new(work_tree).text(["for-each-ref", "--format=%(tree)", &prefix])?;
    Ok(refs
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// What [`adopt`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adoption {
    /// The published chain was taken in.
    Imported {
        /// The ref it came from.
        reference: String,
        /// Events appended to the local ledger.
        appended: u64,
        /// The remote it was fetched from, when it was not here already.
        fetched_from: Option<String>,
        /// Whether the remote was set to fetch the ledger refs with every `git fetch`.
        configured: bool,
        /// What a plain `git push` to that remote was set to carry, if it changed.
        push: Option<PushSetUp>,
    },
    /// No published ledger was found for the branch.
    Unpublished {
        /// The branch checked out, `None` with HEAD detached.
        branch: Option<String>,
        /// The remote that was asked, if any.
        remote: Option<String>,
    },
}

/// Takes in the ledger published for the branch checked out in `work_tree`: the local
/// ledger ref, else (with `fetch`) the one on the branch's remote. `write` appends the
/// checked chain to the ledger (the engine's door for it). Refused, changing nothing,
/// when the published chain is malformed, broken, or does not continue the local one.
pub fn adopt(
    work_tree: &Path,
    fetch: bool,
    write: impl FnOnce(
        &[crate::ledger::StoredEvent],
    ) -> Result<Result<crate::ledger::Imported, ImportRefused>, LedgerError>,
) -> Result<Adoption, PublishError> {
    let Some(branch) = current_branch(work_tree)? else {
        return Ok(Adoption::Unpublished {
            branch: None,
            remote: None,
        });
    };
    let reference = ledger_ref(&branch);
    let git = Git::new(work_tree);
    let located = crate::run::scan::locate(work_tree)?;
    let mut fetched_from = None;
    let mut configured = false;
    let mut push = None;
    let commit = match resolve(&located, &git, &reference)? {
        Some(commit) => commit,
        None => {
            let remote = remote_of(&git, &branch)?;
            let found = match (&remote, fetch) {
                (Some(remote), true) => fetch::fetch_ledger(
                    &git,
                    &located.common_dir,
                    located.objects().kind(),
                    remote,
                    &reference,
                )?,
                _ => false,
            };
            let commit = if found {
                resolve(&located, &git, &reference)?
            } else {
                None
            };
            let Some(commit) = commit else {
                return Ok(Adoption::Unpublished {
                    branch: Some(branch),
                    remote,
                });
            };
            if let Some(remote) = &remote {
                configured = configure_fetch(&git, remote)?;
                push = configure_push(&git, remote)?;
            }
            fetched_from = remote;
            commit
        }
    };
    let located = crate::run::scan::locate(work_tree)?;
    let objects = located.objects();
    let checked = objects.handle()?;
    let tree = objects.tree_of_commit(&commit)?;
    let refused = |err: export::ReadError| match err {
        export::ReadError::Git(err) => PublishError::Git(err),
        export::ReadError::Malformed(what) => PublishError::Malformed {
            reference: reference.clone(),
            what,
        },
    };
    let export = export::read_tree(&checked, &tree).map_err(refused)?;
    let events = export::read_events(&checked, &export).map_err(refused)?;
    let imported = write(&events)?.map_err(|refused| PublishError::Refused {
        reference: reference.clone(),
        refused,
    })?;
    Ok(Adoption::Imported {
        reference,
        appended: imported.appended,
        fetched_from,
        configured,
        push,
    })
}

/// The remote `branch` tracks, else the repository's only remote.
fn remote_of(git: &Git, branch: &str) -> Result<Option<String>, GitError> {
    // A name that starts with `-` would be read as an option: it names no remote.
    if let Ok(remote) = git.text(["config", "--get", &format!("branch.{branch}.remote")])
        && !remote.is_empty()
        && remote != "."
        && !remote.starts_with('-')
    {
        return Ok(Some(remote));
    }
    let remotes = git.text(["remote"])?;
    let mut names = remotes
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('-'));
    Ok(match (names.next(), names.next()) {
        (Some(only), None) => Some(only.to_string()),
        _ => None,
    })
}

/// The refspecs a plain `git push` to a remote is given so that it carries the published
/// ledgers: the branch checked out (`HEAD`, to the same name: a configured push refspec
/// replaces `push.default`, so without it `git push` would push no branch), and every
/// ledger ref (never forced: a remote's ledger that went another way is refused, not
/// overwritten). `HEAD` is added only to a remote with no push refspec of its own.
pub const PUSH_REFSPECS: [&str; 2] = ["HEAD", FETCH_REFSPEC];

/// What [`carry_on_push`] set up: the remote and the push refspecs it added.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PushSetUp {
    /// The remote whose `remote.<name>.push` was extended.
    pub remote: String,
    /// The refspecs added, in order.
    pub added: Vec<String>,
}

impl PushSetUp {
    /// One line for a person: what a plain `git push` now does, and how to undo it.
    pub fn describe(&self) -> String {
        let remote = &self.remote;
        format!(
            "`git push` to {remote} now carries the ledger with the branch (remote.{remote}.push += {}; undo: git config --unset-all remote.{remote}.push)",
            self.added.join(", ")
        )
    }
}

/// Sets up the remote of the branch checked out in `work_tree` so that a plain
/// `git push` carries the published ledgers ([`PUSH_REFSPECS`]). `Ok(None)` when nothing
/// changed: HEAD detached, no remote to push to, or the refspecs already there.
pub fn carry_on_push(work_tree: &Path) -> Result<Option<PushSetUp>, GitError> {
    let Some(branch) = current_branch(work_tree)? else {
        return Ok(None);
    };
    let git = Git::new(work_tree);
    let Some(remote) = remote_of(&git, &branch)? else {
        return Ok(None);
    };
    configure_push(&git, &remote)
}

/// Adds what [`PUSH_REFSPECS`] lacks to `remote`'s push refspecs.
fn configure_push(git: &Git, remote: &str) -> Result<Option<PushSetUp>, GitError> {
    let key = format!("remote.{remote}.push");
    let present: Vec<String> = git
        .text(["config", "--get-all", &key])
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if present.iter().any(|l| l == FETCH_REFSPEC) {
        return Ok(None);
    }
    let wanted: &[&str] = if present.is_empty() {
        &PUSH_REFSPECS
    } else {
        &PUSH_REFSPECS[1..]
    };
    for spec in wanted {
        git.output(["config", "--add", &key, spec])?;
    }
    Ok(Some(PushSetUp {
        remote: remote.to_string(),
        added: wanted.iter().map(|s| s.to_string()).collect(),
    }))
}

/// Adds [`FETCH_REFSPEC`] to `remote`'s fetch refspecs unless it is there; whether it
/// was added.
fn configure_fetch(git: &Git, remote: &str) -> Result<bool, GitError> {
    let key = format!("remote.{remote}.fetch");
    let present = git
        .text(["config", "--get-all", &key])
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim() == FETCH_REFSPEC);
    if present {
        return Ok(false);
    }
    git.output(["config", "--add", &key, FETCH_REFSPEC])?;
    Ok(true)
}

#[cfg(test)]
mod tests;
