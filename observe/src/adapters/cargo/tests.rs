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

/// A project named `app` for target keys.
fn app() -> Project {
    Project {
        name: "app".to_string(),
        root: std::path::PathBuf::from("/"),
        config: crate::config::ProjectConfig::bare(AdapterKind::Cargo),
        hermetic: None,
        confinement: None,
    }
}

/// An observation of `app` holding `tests`, each passed, and `errors` as build errors.
fn observed(tests: &[&str], errors: &[&str]) -> crate::model::Observation {
    crate::model::Observation {
        project: "app".into(),
        adapter: AdapterKind::Cargo,
        invocations: Vec::new(),
        wall_ms: 0,
        tests: tests
            .iter()
            .map(|id| {
                (
                    id.to_string(),
                    crate::model::TestResult {
                        outcome: Outcome::Passed,
                        failure: None,
                    },
                )
            })
            .collect(),
        collection_errors: errors
            .iter()
            .map(|scope| crate::model::CollectionError {
                scope: scope.to_string(),
                kind: FailureKind::Compile,
                message: "error[E0425]".into(),
            })
            .collect(),
        totals: crate::model::Totals::default(),
        runner_counts: None,
        runner_error: None,
        diagnostics: Vec::new(),
    }
}

/// `f1 adds` for `tests/f1.rs` of crate `calc` (nextest's `calc::f1 adds`): nextest is
/// asked for the binary of that name in any package, and the lookup finds the test
/// there, so a gate, a verifier's `tdd test` and the lookup read one target alike.
#[test]
fn a_binary_named_without_its_package_is_found_in_the_package_that_holds_it() {
    use crate::model::TargetStatus;
    use crate::target::lookup;
    assert_eq!(
        filterset("f1 adds"),
        r"(binary_id(#{f1\,*::f1}) & test(=adds))"
    );
    assert_eq!(
        filterset("calc::f1 adds"),
        "(binary_id(=calc::f1) & test(=adds))"
    );
    let key = Cargo.target_key(&app(), "f1 adds");
    let verdict = lookup(&observed(&["app::calc::f1 adds"], &[]), None, &key);
    assert_eq!(verdict.status, TargetStatus::Passed, "{verdict:?}");
    assert_eq!(verdict.matched, vec!["app::calc::f1 adds".to_string()]);
    // A package's own unit test of that name is found as itself.
    let verdict = lookup(&observed(&["app::f1 adds"], &[]), None, &key);
    assert_eq!(verdict.status, TargetStatus::Passed, "{verdict:?}");
    // The same test path in two packages' binaries of that name is ambiguous.
    let verdict = lookup(
        &observed(&["app::calc::f1 adds", "app::other::f1 adds"], &[]),
        None,
        &key,
    );
    assert_eq!(verdict.status, TargetStatus::NotFound, "{verdict:?}");
    // A build failure of the binary covers it, in whichever package.
    let verdict = lookup(&observed(&[], &["calc::f1"]), None, &key);
    assert_eq!(verdict.status, TargetStatus::CompileError, "{verdict:?}");
    // A test of another binary whose name merely ends alike is not it.
    let verdict = lookup(&observed(&["app::calc::xf1 adds"], &[]), None, &key);
    assert_eq!(verdict.status, TargetStatus::NotFound, "{verdict:?}");
}
