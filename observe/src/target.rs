//! Target lookup: the single status of one test in one observation.
//!
//! The order of the checks is the contract. An untrustworthy collection or
//! run can never yield `passed` or a red; a file that failed to compile
//! yields `compile_error` for every test in it, a file that failed to
//! import yields `failed_error`; a test absent from the collected set is
//! `not_found` even if the runner choked on the unknown id.

use super::model::Collection;
use super::model::CollectionError;
use super::model::FailureKind;
use super::model::Observation;
use super::model::Outcome;
use super::model::TargetStatus;
use super::model::TargetVerdict;

/// How an adapter relates a target to collection scopes.
#[derive(Debug, Clone)]
pub struct TargetKey {
    /// The project-qualified id of the target.
    pub id: String,
    /// The project-qualified id the collection lists for it (a Go subtest
    /// is collected as its top-level test).
    pub collected_as: String,
    /// Scopes (file, package, binary, crate) whose failure covers the target.
    pub scopes: Vec<String>,
}

/// Answers exactly one [`TargetStatus`] for `key` in `observation`.
///
/// Without a collection, a target absent from the run is `not_found`.
pub fn lookup(
    observation: &Observation,
    collection: Option<&Collection>,
    key: &TargetKey,
) -> TargetVerdict {
    let verdict = |status: TargetStatus, detail: Option<String>| TargetVerdict {
        id: key.id.clone(),
        status,
        detail,
    };
    if let Some(error) = collection.and_then(|c| c.runner_error.clone()) {
        return verdict(TargetStatus::RunnerError, Some(error));
    }
    let errors = observation
        .collection_errors
        .iter()
        .chain(collection.iter().flat_map(|c| c.errors.iter()));
    if let Some(error) = covering_error(errors, &key.scopes) {
        let status = match error.kind {
            FailureKind::Compile => TargetStatus::CompileError,
            _ => TargetStatus::FailedError,
        };
        let detail = format!("{}: {}", error.scope, error.message);
        return verdict(status, Some(detail));
    }
    if let Some(collection) = collection
        && !collection.ids.contains(&key.collected_as)
        && !observation.tests.contains_key(&key.id)
    {
        return verdict(TargetStatus::NotFound, None);
    }
    if let Some(error) = &observation.runner_error {
        return verdict(TargetStatus::RunnerError, Some(error.clone()));
    }
    let Some(result) = observation.tests.get(&key.id) else {
        return match collection {
            Some(_) => verdict(TargetStatus::NotRun, None),
            None => verdict(TargetStatus::NotFound, None),
        };
    };
    let detail = result.failure.as_ref().map(|f| f.message.clone());
    let kind = result.failure.as_ref().map(|f| f.kind);
    let status = match (result.outcome, kind) {
        (Outcome::Passed, _) => TargetStatus::Passed,
        (Outcome::Skipped, _) => TargetStatus::NotRun,
        (_, Some(FailureKind::Compile)) => TargetStatus::CompileError,
        (Outcome::Failed, Some(FailureKind::Assertion)) => TargetStatus::FailedAssertion,
        (Outcome::Failed | Outcome::Error, _) => TargetStatus::FailedError,
    };
    verdict(status, detail)
}

fn covering_error<'a>(
    mut errors: impl Iterator<Item = &'a CollectionError>,
    scopes: &[String],
) -> Option<&'a CollectionError> {
    errors.find(|error| scopes.contains(&error.scope))
}
