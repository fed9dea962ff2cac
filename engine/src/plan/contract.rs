//! A plan read from its committed blob and identified by it.

use std::path::Path;

use serde::Serialize;
use sha2::Digest;

use super::Plan;
use super::PlanError;
use crate::git::Git;
use crate::git::GitError;

/// A plan as committed: the validated plan plus the identity of the exact bytes.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Contract {
    /// The plan's path relative to the work-tree root.
    pub path: String,
    /// The git blob id of the committed plan.
    pub blob: String,
    /// The commit the plan was read at.
    pub commit: String,
    /// SHA-256 of the committed bytes.
    pub sha256: String,
    /// The validated plan.
    pub plan: Plan,
}

/// Reads `plan_path` from HEAD, refusing an untracked plan or one that differs from HEAD.
pub fn read_committed(
    work_tree: &Path,
    plan_path: &Path,
    known_projects: Option<&[String]>,
) -> Result<Contract, PlanError> {
    let git = Git::new(work_tree);
    let absolute = if plan_path.is_absolute() {
        plan_path.to_path_buf()
    } else {
        work_tree.join(plan_path)
    };
    let rel = absolute
        .strip_prefix(work_tree)
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .map_err(|_| PlanError::Uncommitted {
            path: plan_path.to_path_buf(),
            why: "the plan is outside the work tree".into(),
        })?;
    let commit =
        git.text(["rev-parse", "--verify", "HEAD"])
            .map_err(|_| PlanError::Uncommitted {
                path: plan_path.to_path_buf(),
                why: "the repository has no commit yet; commit the plan first".into(),
            })?;
    let spec = format!("HEAD:{rel}");
    let blob = match git.text(["rev-parse", "--verify", "--quiet", &spec]) {
        Ok(blob) => blob,
        Err(GitError::Failed { .. }) => {
            return Err(PlanError::Uncommitted {
                path: plan_path.to_path_buf(),
                why: "the plan is not committed; commit it, then register it".into(),
            });
        }
        Err(other) => return Err(other.into()),
    };
    let dirty = git.dirty_paths()?;
    if dirty.iter().any(|p| p == &rel) {
        return Err(PlanError::Uncommitted {
            path: plan_path.to_path_buf(),
            why:
                "the plan has changes that are not committed; the committed version is the contract"
                    .into(),
        });
    }
    let bytes = git.output(["cat-file", "blob", &blob])?.stdout;
    let text = String::from_utf8(bytes.clone()).map_err(|_| PlanError::Invalid {
        path: plan_path.to_path_buf(),
        message: "the plan is not UTF-8".into(),
    })?;
    let plan = Plan::parse(Path::new(&rel), &text, known_projects)?;
    Ok(Contract {
        path: rel,
        blob,
        commit,
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        plan,
    })
}
