use super::*;
use crate::model::FailureKind;
use crate::model::Outcome;
use crate::model::RunnerCounts;

/// cargo-nextest 0.9.143 JUnit: one suite per binary id, the case's
/// classname is the binary id. nextest leaves ignored tests out of its
/// JUnit report; a test that aborts the process is a failure whose text
/// names the signal.
#[test]
fn recorded_nextest_junit() -> Result<(), ReportError> {
    let parsed = parse_nextest(include_bytes!(
        "../../../tests/fixtures/nextest-junit/junit.xml"
    ))?;
    let outcomes: Vec<(&str, Outcome, Option<FailureKind>)> = parsed
        .tests
        .iter()
        .map(|(id, r)| (id.as_str(), r.outcome, r.failure.as_ref().map(|f| f.kind)))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (
                "calc tests::panics",
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
            ("calc tests::passes", Outcome::Passed, None),
            (
                "calc tests::fails",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            (
                "calc::integ bare_assert",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            ("calc::integ works", Outcome::Passed, None),
            (
                "calc::crash aborts",
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
        ]
    );
    let aborts = parsed.tests.get(5).and_then(|(_, r)| r.failure.as_ref());
    assert_eq!(
        aborts.map(|f| f.message.as_str()),
        Some("process aborted with signal 6 (SIGABRT)")
    );
    // nextest's message repeats the first line of its text: it appears once.
    let fails = parsed.tests.get(2).and_then(|(_, r)| r.failure.as_ref());
    assert!(
        fails.is_some_and(|f| f.message.starts_with(
            "thread 'tests::fails' (32636) panicked at src/lib.rs:14:9:\nassertion `left == right` failed"
        )),
        "{fails:?}"
    );
    assert!(parsed.collection_errors.is_empty());
    assert_eq!(
        parsed.runner_counts,
        Some(RunnerCounts {
            tests: Some(6),
            passed: Some(2),
            failed: Some(4),
            skipped: Some(0),
            errors: Some(0),
        })
    );
    Ok(())
}
