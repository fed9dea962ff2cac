//! Target lookup: the single status of one test in one observation.
//!
//! The order of the checks is the contract. An untrustworthy collection or
//! run can never yield `passed` or a red; a file that failed to compile
//! yields `compile_error` for every test in it, a file that failed to
//! import yields `failed_error`; a test absent from the collected set is
//! `not_found` even if the runner choked on the unknown id.
//!
//! A target may also be partial (see [`Partial`]): a pytest file or class
//! stands for every test under it, a Go name without its package or a cargo
//! test path without its binary stands for the one test it names. The
//! verdict then says which tests the target matched.

use super::model::Collection;
use super::model::CollectionError;
use super::model::FailureKind;
use super::model::Observation;
use super::model::Outcome;
use super::model::TargetStatus;
use super::model::TargetVerdict;
use super::model::TestResult;

/// How an adapter relates a target to collection scopes.
#[derive(Debug, Clone)]
pub struct TargetKey {
    /// The project-qualified id of the target.
    pub id: String,
    /// The project-qualified id the collection lists for it (a Go subtest
    /// is collected as its top-level test).
    pub collected_as: String,
    /// Scopes (file, package, binary, crate) whose failure covers the target. One that
    /// starts with `::` covers every scope that ends with it (`::f1` covers the binary
    /// `calc::f1`, of whichever package).
    pub scopes: Vec<String>,
    /// How a target that is not itself a test id resolves to tests.
    pub partial: Option<Partial>,
}

impl TargetKey {
    /// The key of a target that is exactly one test id, collected under that id.
    pub fn exact(id: String, scopes: Vec<String>) -> TargetKey {
        TargetKey {
            collected_as: id.clone(),
            id,
            scopes,
            partial: None,
        }
    }
}

/// How a partial target id resolves to the tests it stands for. Each
/// pattern is on project-qualified ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partial {
    /// Every test whose id starts with one of these prefixes (a pytest file
    /// `tests/test_x.py` or class `tests/test_x.py::TestC`). The verdict is
    /// the worst status among them.
    Group(Vec<String>),
    /// The one test whose id ends with `run` (a Go test name without its
    /// package, a cargo test path without its binary); `collected` is the
    /// suffix of its collected id. Matching two or more tests is ambiguous
    /// and reads `not_found`, naming the candidates.
    Unique {
        /// Suffix of the test's id in an observation.
        run: String,
        /// Suffix of the id the collection lists for it.
        collected: String,
    },
}

impl Partial {
    fn matches_run(&self, id: &str) -> bool {
        match self {
            Partial::Group(prefixes) => prefixes.iter().any(|p| id.starts_with(p.as_str())),
            Partial::Unique { run, .. } => id.ends_with(run.as_str()),
        }
    }

    fn matches_collected(&self, id: &str) -> bool {
        match self {
            Partial::Group(prefixes) => prefixes.iter().any(|p| id.starts_with(p.as_str())),
            Partial::Unique { collected, .. } => id.ends_with(collected.as_str()),
        }
    }
}

/// Answers exactly one [`TargetStatus`] for `key` in `observation`.
///
/// Without a collection, a target absent from the run is `not_found`.
pub fn lookup(
    observation: &Observation,
    collection: Option<&Collection>,
    key: &TargetKey,
) -> TargetVerdict {
    // A partial target resolves to other tests only when it is not itself a
    // test the run or the collection knows.
    if let Some(partial) = &key.partial
        && !observation.tests.contains_key(&key.id)
        && !collection.is_some_and(|c| c.ids.contains(&key.collected_as))
    {
        return lookup_partial(observation, collection, key, partial);
    }
    let verdict = |status: TargetStatus, detail: Option<String>| TargetVerdict {
        id: key.id.clone(),
        status,
        detail,
        matched: Vec::new(),
    };
    if let Some((status, detail)) = broken(observation, collection, key) {
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
    let (status, detail) = status_of(result);
    verdict(status, detail)
}

/// The status and detail of one observed test.
fn status_of(result: &TestResult) -> (TargetStatus, Option<String>) {
    let detail = result.failure.as_ref().map(|f| f.message.clone());
    let kind = result.failure.as_ref().map(|f| f.kind);
    let status = match (result.outcome, kind) {
        (Outcome::Passed, _) => TargetStatus::Passed,
        (Outcome::Skipped, _) => TargetStatus::NotRun,
        (_, Some(FailureKind::Compile)) => TargetStatus::CompileError,
        (Outcome::Failed, Some(FailureKind::Assertion)) => TargetStatus::FailedAssertion,
        (Outcome::Failed | Outcome::Error, _) => TargetStatus::FailedError,
    };
    (status, detail)
}

/// How bad a status is when several tests answer for one target: a failure
/// outweighs a test that did not run, which outweighs a pass. A target passes only
/// when every test it stands for passed: a case skipped beside one that passed (a
/// parametrised test whose implementation skips the cases it cannot do) is not run.
fn weight(status: TargetStatus) -> u8 {
    match status {
        TargetStatus::Passed => 0,
        TargetStatus::NotRun => 1,
        TargetStatus::FailedAssertion => 2,
        TargetStatus::FailedError => 3,
        TargetStatus::CompileError => 4,
        TargetStatus::NotFound => 5,
        TargetStatus::RunnerError => 6,
    }
}

fn lookup_partial(
    observation: &Observation,
    collection: Option<&Collection>,
    key: &TargetKey,
    partial: &Partial,
) -> TargetVerdict {
    let verdict =
        |status: TargetStatus, detail: Option<String>, matched: Vec<String>| TargetVerdict {
            id: key.id.clone(),
            status,
            detail,
            matched,
        };
    if let Some((status, detail)) = broken(observation, collection, key) {
        return verdict(status, Some(detail), Vec::new());
    }
    let matched: Vec<(&String, &TestResult)> = observation
        .tests
        .iter()
        .filter(|(id, _)| partial.matches_run(id))
        .collect();
    let names: Vec<String> = matched.iter().map(|(id, _)| (*id).clone()).collect();
    if matches!(partial, Partial::Unique { .. }) && matched.len() > 1 {
        let detail = format!(
            "`{}` is ambiguous: it matches {}; give one of these ids",
            key.id,
            names.join(", ")
        );
        return verdict(TargetStatus::NotFound, Some(detail), names);
    }
    if matched.is_empty() {
        let collected = collection.map(|c| c.ids.iter().any(|id| partial.matches_collected(id)));
        if let Some(error) = &observation.runner_error
            && collected != Some(false)
        {
            return verdict(TargetStatus::RunnerError, Some(error.clone()), Vec::new());
        }
        let status = match collected {
            Some(true) => TargetStatus::NotRun,
            _ => TargetStatus::NotFound,
        };
        return verdict(status, None, Vec::new());
    }
    if let Some(error) = &observation.runner_error {
        return verdict(TargetStatus::RunnerError, Some(error.clone()), names);
    }
    let (status, detail) = worst(&matched, partial);
    verdict(status, detail, names)
}

/// The status of an untrusted collection, or of a collection error covering
/// the target's scopes, if either applies.
fn broken(
    observation: &Observation,
    collection: Option<&Collection>,
    key: &TargetKey,
) -> Option<(TargetStatus, String)> {
    if let Some(error) = collection.and_then(|c| c.runner_error.clone()) {
        return Some((TargetStatus::RunnerError, error));
    }
    let errors = observation
        .collection_errors
        .iter()
        .chain(collection.iter().flat_map(|c| c.errors.iter()));
    let error = covering_error(errors, &key.scopes)?;
    let status = match error.kind {
        FailureKind::Compile => TargetStatus::CompileError,
        _ => TargetStatus::FailedError,
    };
    Some((status, format!("{}: {}", error.scope, error.message)))
}

/// The worst status among the tests a partial target matched; for a group
/// the detail names the test it comes from.
fn worst(matched: &[(&String, &TestResult)], partial: &Partial) -> (TargetStatus, Option<String>) {
    matched
        .iter()
        .map(|(id, result)| {
            let (status, detail) = status_of(result);
            let detail = detail.map(|d| match partial {
                Partial::Group(_) => format!("{id}: {d}"),
                Partial::Unique { .. } => d,
            });
            (status, detail)
        })
        .max_by_key(|(status, _)| weight(*status))
        .unwrap_or((TargetStatus::NotFound, None))
}

fn covering_error<'a>(
    mut errors: impl Iterator<Item = &'a CollectionError>,
    scopes: &[String],
) -> Option<&'a CollectionError> {
    errors.find(|error| {
        scopes.iter().any(|scope| {
            *scope == error.scope || (scope.starts_with("::") && error.scope.ends_with(scope))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AdapterKind;
    use crate::model::Totals;

    /// A test the collection lists under the exact id is that test, even
    /// when its key could also be read as partial: a run that timed out
    /// before reporting it is a runner error, never `not_found`.
    #[test]
    fn an_exact_collected_id_is_not_resolved_as_partial() {
        let observation = Observation {
            project: "app".into(),
            adapter: AdapterKind::Pytest,
            invocations: Vec::new(),
            wall_ms: 0,
            tests: Default::default(),
            collection_errors: Vec::new(),
            totals: Totals::default(),
            runner_counts: None,
            runner_error: Some("the runner timed out".into()),
            diagnostics: Vec::new(),
        };
        let id = "app::test_hang.py::test_hang".to_string();
        let collection = Collection {
            ids: [id.clone()].into(),
            ..Collection::default()
        };
        let key = TargetKey {
            partial: Some(Partial::Group(vec![format!("{id}::"), format!("{id}[")])),
            ..TargetKey::exact(id, vec!["test_hang.py".into()])
        };
        let verdict = lookup(&observation, Some(&collection), &key);
        assert_eq!(verdict.status, TargetStatus::RunnerError, "{verdict:?}");
    }

    /// A target that stands for several tests (a parametrised test) passes only when
    /// each passed: one case skipped beside one that passed is not run, and one failed
    /// beside one skipped is failed.
    #[test]
    fn a_group_passes_only_when_every_test_in_it_passed() {
        let id = "app::tests/test_sub.py::test_sub".to_string();
        let case = |n: u32| format!("{id}[{n}]");
        let result = |outcome: Outcome| TestResult {
            outcome,
            failure: (outcome == Outcome::Failed).then(|| crate::model::Failure {
                kind: FailureKind::Assertion,
                message: "boom".into(),
            }),
        };
        let verdict_of = |outcomes: [Outcome; 2]| {
            let observation = Observation {
                project: "app".into(),
                adapter: AdapterKind::Pytest,
                invocations: Vec::new(),
                wall_ms: 0,
                tests: [
                    (case(0), result(outcomes[0])),
                    (case(1), result(outcomes[1])),
                ]
                .into(),
                collection_errors: Vec::new(),
                totals: Totals::default(),
                runner_counts: None,
                runner_error: None,
                diagnostics: Vec::new(),
            };
            let key = TargetKey {
                partial: Some(Partial::Group(vec![format!("{id}::"), format!("{id}[")])),
                ..TargetKey::exact(id.clone(), vec!["tests/test_sub.py".into()])
            };
            lookup(&observation, None, &key).status
        };
        use Outcome::{Failed, Passed, Skipped};
        assert_eq!(verdict_of([Passed, Passed]), TargetStatus::Passed);
        assert_eq!(verdict_of([Passed, Skipped]), TargetStatus::NotRun);
        assert_eq!(verdict_of([Skipped, Passed]), TargetStatus::NotRun);
        assert_eq!(verdict_of([Failed, Skipped]), TargetStatus::FailedAssertion);
    }
}
