//! Where an issue comes from and where progress goes: the `Forge` trait, the local
//! forge (markdown files) and the GitHub forge.

use std::path::Path;
use std::path::PathBuf;

use tdd_prompts::Issue;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::issue::IssueError;
use crate::journal::Journal;

pub mod github;
mod local;

pub use github::GitHubForge;
pub use github::GitHubSpec;
pub use local::LocalForge;

/// Why the forge could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The issue could not be read.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// A forge file could not be written.
    #[error("failed to write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The ledger that keeps comment ids failed.
    #[error(transparent)]
    Ledger(#[from] tdd_engine::ledger::LedgerError),
    /// A GitHub API call failed for good (after its retries).
    #[error(transparent)]
    Api(#[from] github::ApiError),
    /// The work branch could not be pushed.
    #[error(transparent)]
    Push(#[from] github::PushError),
}

impl ForgeError {
    /// The bail this failure is: `forge_denied` when GitHub refused the token (401, 403,
    /// 404), else `forge_unreachable`; `None` for the ledger's own failures.
    pub fn bail(&self) -> Option<Bail> {
        let status = match self {
            ForgeError::Ledger(_) => return None,
            ForgeError::Api(api) => api.status(),
            _ => None,
        };
        let detail = match std::error::Error::source(self) {
            Some(source) if !matches!(self, ForgeError::Api(_)) => {
                format!("the forge could not be written: {self}: {source}")
            }
            _ => format!("the forge could not be used: {self}"),
        };
        let (cause, action) = match (self, status) {
            (ForgeError::Api(github::ApiError::Denied { .. }), Some(401)) => (
                BailCause::ForgeDenied,
                "GitHub refused the token (HTTP 401): set a valid GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`, then run `tdd conduct` again",
            ),
            (ForgeError::Api(github::ApiError::Denied { .. }), Some(403)) => (
                BailCause::ForgeDenied,
                "the token lacks a permission (HTTP 403): a classic token needs the `repo` scope; a fine-grained one Issues, Pull requests, Commit statuses and Contents read and write; `tdd doctor` names what is missing",
            ),
            (ForgeError::Api(github::ApiError::Denied { .. }), _) => (
                BailCause::ForgeDenied,
                "the repository or issue is not visible to this token (HTTP 404): check --repo, the issue number and the token's repository access",
            ),
            (ForgeError::Issue(_) | ForgeError::Write { .. }, _) => (
                BailCause::ForgeUnreachable,
                "make the forge reachable (for the local forge: the ledger home writable), then run `tdd conduct` again",
            ),
            _ => (
                BailCause::ForgeUnreachable,
                "GitHub could not be reached or refused the request: nothing local is lost; run `tdd conduct` again when it can be reached",
            ),
        };
        Some(Bail::new(cause, detail, action))
    }
}

/// The state of a phase commit, as a commit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusState {
    /// Accepted by the engine and the verifier.
    Success,
    /// Accepted by the engine, not judged by the verifier yet.
    Pending,
    /// Rejected.
    Failure,
}

impl StatusState {
    /// The name GitHub uses.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusState::Success => "success",
            StatusState::Pending => "pending",
            StatusState::Failure => "failure",
        }
    }
}

/// A status of one phase commit: `tdd/red`, `tdd/green` or `tdd/refactor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// The commit.
    pub sha: String,
    /// `tdd/<phase>`.
    pub context: String,
    /// Its state.
    pub state: StatusState,
    /// One line for people.
    pub description: String,
}

/// Where a conduct run stands, for the issue's state label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMark {
    /// Under way (`tdd:running`).
    Running,
    /// Bailed (`tdd:bailed`).
    Bailed,
    /// Every step done (`tdd:done`).
    Done,
}

impl RunMark {
    /// The label.
    pub fn label(self) -> &'static str {
        match self {
            RunMark::Running => "tdd:running",
            RunMark::Bailed => "tdd:bailed",
            RunMark::Done => "tdd:done",
        }
    }
}

/// An issue tracker with comments and draft pull requests.
pub trait Forge {
    /// The issue being conducted.
    fn issue(&self) -> Result<Issue, ForgeError>;

    /// Creates or edits in place the one comment under `key`; returns its id. The id is
    /// kept in the ledger, so a resumed run edits the comment instead of posting again.
    fn comment(&self, key: &str, body: &str) -> Result<String, ForgeError>;

    /// Opens the draft PR of `branch`, or updates its title and body; returns where it is.
    fn open_or_update_draft_pr(
        &self,
        branch: &str,
        title: &str,
        body: &str,
    ) -> Result<String, ForgeError>;

    /// Publishes `branch` of `work_tree` and the statuses of its phase commits, before
    /// the PR is written. The local forge has nothing to publish.
    fn push(
        &self,
        _work_tree: &Path,
        _branch: &str,
        _statuses: &[CommitStatus],
    ) -> Result<(), ForgeError> {
        Ok(())
    }

    /// Marks the issue with the run's state, when the forge keeps such marks.
    fn mark(&self, _mark: RunMark) -> Result<(), ForgeError> {
        Ok(())
    }

    /// Where the draft PR is: a file or a URL (empty before it exists).
    fn pr_location(&self) -> String;

    /// Whether a PR needs a branch with commits on it (a PR on GitHub does; the local
    /// forge's file does not).
    fn needs_commits(&self) -> bool {
        false
    }
}

/// Where the issue comes from.
#[derive(Debug, Clone)]
pub enum ForgeSpec {
    /// A local markdown issue file.
    Local(PathBuf),
    /// A GitHub issue.
    GitHub(GitHubSpec),
}

impl ForgeSpec {
    /// The issue's number, known before it is read.
    pub fn number(&self) -> u64 {
        match self {
            ForgeSpec::Local(path) => crate::issue::number_from_path(path),
            ForgeSpec::GitHub(spec) => spec.number,
        }
    }

    /// What the run records as the issue's source: the file, or the issue's URL.
    pub fn describe(&self) -> String {
        match self {
            ForgeSpec::Local(path) => path.display().to_string(),
            ForgeSpec::GitHub(spec) => spec.describe(),
        }
    }
}

/// A forge connected and its issue read, waiting for the run's journal.
pub(crate) enum Connected {
    /// The local forge.
    Local(PathBuf),
    /// The GitHub forge.
    GitHub(Box<github::Connection>),
}

/// Connects to the forge of `spec` and reads the issue.
pub(crate) fn connect(spec: &ForgeSpec) -> Result<(Issue, Connected), ForgeError> {
    match spec {
        ForgeSpec::Local(path) => Ok((
            crate::issue::read_local(path)?,
            Connected::Local(path.clone()),
        )),
        ForgeSpec::GitHub(spec) => {
            let mut connection = github::Connection::open(spec)?;
            let issue = connection.read_issue()?;
            Ok((issue, Connected::GitHub(Box::new(connection))))
        }
    }
}

impl Connected {
    /// The forge, recording its ids in `journal` and its files in `dir`.
    pub(crate) fn into_forge(self, dir: &Path, journal: Journal) -> Box<dyn Forge> {
        match self {
            Connected::Local(path) => Box::new(LocalForge::new(&path, dir, journal)),
            Connected::GitHub(connection) => Box::new(connection.into_forge(journal)),
        }
    }
}
