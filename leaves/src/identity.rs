//! Leaf identity: the claim a process inside a leaf makes (`TDD_LEAF_ID`,
//! `TDD_LEAF_TOKEN`) and its check against the leaf's record in the ledger.
//!
//! The ledger keeps only the token's SHA-256, so reading the ledger does not give
//! a token away; the token itself exists only in the leaf's environment.

use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_prompts::Role;

use crate::events::LeafStarted;
use crate::events::LeavesEvent;
use crate::runtime::token_sha256;

/// What a process says about itself through its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// `TDD_LEAF_ID`.
    pub leaf_id: String,
    /// `TDD_LEAF_TOKEN`.
    pub token: String,
}

impl Claimed {
    /// The claim in this process's environment, if both variables are set.
    pub fn from_env() -> Option<Claimed> {
        Claimed::from_lookup(|key| std::env::var(key).ok())
    }

    /// The claim from `lookup` standing in for the environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Claimed> {
        let leaf_id = lookup("TDD_LEAF_ID").filter(|v| !v.is_empty())?;
        let token = lookup("TDD_LEAF_TOKEN").unwrap_or_default();
        Some(Claimed { leaf_id, token })
    }
}

/// The prompt as recorded with its leaf.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptRecord {
    /// The top-level template.
    pub template: String,
    /// The text, exactly as the leaf received it.
    pub text: String,
    /// Its SHA-256.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
    /// Bytes from compiled-in templates.
    pub fixed_bytes: u64,
    /// Bytes from the issue, plan and repository.
    pub variable_bytes: u64,
}

/// A leaf as its `leaf_prepared` event records it: the event's payload, plus (when read
/// back) the event's id and run, which the payload itself never carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafRecord {
    /// The ledger event that records the leaf (0 before it is recorded).
    #[serde(default, skip_serializing_if = "is_unrecorded")]
    pub event_id: i64,
    /// The run it worked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The leaf id.
    pub leaf_id: String,
    /// Its role.
    pub role: Role,
    /// The provider that ran it.
    pub provider: String,
    /// The issue.
    pub issue: u64,
    /// The step.
    pub step: u32,
    /// The phase name (`red`, ..., `plan`).
    pub phase: String,
    /// The attempt.
    pub attempt: u32,
    /// The prompt.
    pub prompt: PromptRecord,
    /// The assignment `tdd status` shows inside the leaf.
    pub assignment: serde_json::Value,
    /// SHA-256 of the token.
    pub token_sha256: String,
    /// The argument vector.
    #[serde(default)]
    pub argv: Vec<String>,
    /// Names of the variables the leaf received from the caller.
    #[serde(default)]
    pub env: Vec<String>,
    /// Where it works.
    #[serde(default)]
    pub workdir: PathBuf,
    /// Its files' directory.
    #[serde(default)]
    pub files: PathBuf,
}

fn is_unrecorded(event_id: &i64) -> bool {
    *event_id == 0
}

/// Why a claim was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No leaf with that id is recorded.
    #[error("no leaf {leaf_id} is recorded in this repository's ledger")]
    UnknownLeaf {
        /// The claimed id.
        leaf_id: String,
    },
    /// The token does not match the recorded one.
    #[error("the token does not belong to leaf {leaf_id}")]
    BadToken {
        /// The claimed id.
        leaf_id: String,
    },
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Every `leaf_started` of the ledger, oldest first, read through its type.
fn starts(ledger: &Ledger) -> Result<Vec<LeafStarted>, LedgerError> {
    Ok(ledger
        .typed::<LeavesEvent>(None, &["leaf_started"])?
        .into_iter()
        .filter_map(|(_, event)| match event {
            LeavesEvent::LeafStarted(started) => Some(started),
            _ => None,
        })
        .collect())
}

/// The leaf recorded under `id`, which may be the leaf id or the supervisor's id: its
/// newest `leaf_prepared`, with the event's position and run. Read through the events'
/// types, so a renamed field fails to compile rather than to match.
pub fn find_leaf(ledger: &Ledger, id: &str) -> Result<Option<LeafRecord>, LedgerError> {
    let leaf_id = starts(ledger)?
        .into_iter()
        .find(|started| started.supervisor_id == id)
        .map_or_else(|| id.to_string(), |started| started.leaf_id);
    Ok(ledger
        .typed::<LeavesEvent>(None, &["leaf_prepared"])?
        .into_iter()
        .rev()
        .find_map(|(event, typed)| match typed {
            LeavesEvent::LeafPrepared(record) if record.leaf_id == leaf_id => {
                let mut record = *record;
                record.event_id = event.id;
                record.run_id = event.run_id;
                Some(record)
            }
            _ => None,
        }))
}

/// The supervisor's id of the process the leaf `leaf_id` last ran as (its newest
/// `leaf_started`); `None` when it never started.
pub fn supervisor_id_of(ledger: &Ledger, leaf_id: &str) -> Result<Option<String>, LedgerError> {
    Ok(starts(ledger)?
        .into_iter()
        .rev()
        .find(|started| started.leaf_id == leaf_id)
        .map(|started| started.supervisor_id))
}

/// Checks a claim: the leaf is recorded and the token's hash matches.
pub fn authenticate(ledger: &Ledger, claimed: &Claimed) -> Result<LeafRecord, AuthError> {
    let record = find_leaf(ledger, &claimed.leaf_id)?
        .filter(|r| r.leaf_id == claimed.leaf_id)
        .ok_or_else(|| AuthError::UnknownLeaf {
            leaf_id: claimed.leaf_id.clone(),
        })?;
    if claimed.token.is_empty() || token_sha256(&claimed.token) != record.token_sha256 {
        return Err(AuthError::BadToken {
            leaf_id: claimed.leaf_id.clone(),
        });
    }
    Ok(record)
}
