use tdd_observe::FailureKind;
use tdd_observe::TargetStatus::*;
use tdd_observe::config::AdapterKind;

use crate::common::Fixture;
use crate::common::TestResult;
use crate::common::require;
use tdd_observe::Outcome;
use tdd_observe::observe_target;

const LIB: &str = r#"
/// ```
/// assert_eq!(calc::add(1, 1), 2);
/// ```
///
/// ```
/// assert_eq!(calc::add(1, 1), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn passes() {
        assert_eq!(super::add(1, 1), 2);
    }

    #[test]
    fn fails() {
        assert_eq!(super::add(1, 1), 3);
    }

    #[test]
    fn panics() {
        let empty: Vec<i32> = Vec::new();
        let _ = empty.get(3).copied().expect("no fourth element");
    }

    #[test]
    #[ignore]
    fn skipped() {}
}
"#;

const MANIFEST: &str =
    "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

fn fixture(with_broken: bool) -> Result<Fixture, Box<dyn std::error::Error>> {
    require(&["cargo", "--version"], "install Rust with rustup");
    let mut files = vec![
        ("Cargo.toml", MANIFEST),
        ("src/lib.rs", LIB),
        (
            "tests/integ.rs",
            "#[test]\nfn works() {\n    assert!(calc::add(2, 2) == 4);\n}\n",
        ),
    ];
    if with_broken {
        files.push((
            "tests/broken.rs",
            "#[test]\nfn t() {\n    let x: i32 = \"s\";\n}\n",
        ));
    }
    Fixture::new(AdapterKind::Cargo, &files)
}

fn expected_outcomes(fx: &Fixture) -> TestResult {
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None, "{observation:?}");
    assert!(
        collection.ids.contains("app::calc tests::skipped"),
        "{collection:?}"
    );
    fx.expect(
        &observation,
        &collection,
        &[
            ("calc tests::passes", Passed),
            ("calc::integ works", Passed),
            ("calc tests::fails", FailedAssertion),
            ("calc tests::panics", FailedError),
            ("calc tests::skipped", NotRun),
            ("calc tests::nope", NotFound),
        ],
    );
    fx.expect_alone("calc tests::passes", Passed)?;
    fx.expect_alone("calc tests::fails", FailedAssertion)?;
    fx.expect_alone("calc tests::nope", NotFound)?;
    // An ignored test is reported skipped by a whole run, not left out.
    let skipped = observation.tests.get("app::calc tests::skipped");
    assert_eq!(
        skipped.map(|r| r.outcome),
        Some(Outcome::Skipped),
        "{observation:?}"
    );
    // Doctests run and are reported under the library's `doc/lib` binary id.
    fx.expect(
        &observation,
        &collection,
        &[
            (DOC_PASSES, Passed),
            (DOC_FAILS, FailedAssertion),
            ("calc::doc/lib src/lib.rs - add (line 99)", NotFound),
        ],
    );
    fx.expect_alone(DOC_FAILS, FailedAssertion)?;
    fx.expect_alone(DOC_PASSES, Passed)?;
    // A test path without its binary finds the one test of that path.
    fx.expect_alone("tests::passes", Passed)?;
    fx.expect_alone("tests::fails", FailedAssertion)?;
    fx.expect_alone("tests::nope", NotFound)?;
    let (_, verdict) = observe_target(fx.adapter.as_ref(), &fx.project, "works")?;
    assert_eq!(verdict.matched, vec!["app::calc::integ works"]);
    Ok(())
}

const DOC_PASSES: &str = "calc::doc/lib src/lib.rs - add (line 2)";
const DOC_FAILS: &str = "calc::doc/lib src/lib.rs - add (line 6)";

/// A test binary that does not compile forces the per-binary libtest path
/// and reads `compile_error` for its tests while the others still run.
#[test]
fn cargo_outcomes_with_a_compile_error() -> TestResult {
    let fx = fixture(true)?;
    let observation = fx.run_all()?;
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    assert_eq!(observation.collection_errors[0].scope, "calc::broken");
    assert_eq!(observation.collection_errors[0].kind, FailureKind::Compile);
    let collection = fx.collect()?;
    fx.expect(
        &observation,
        &collection,
        &[("calc::broken t", CompileError)],
    );
    fx.expect_alone("calc::broken t", CompileError)?;
    expected_outcomes(&fx)
}

/// A project that compiles runs through cargo-nextest's JUnit report.
#[test]
fn cargo_outcomes_through_nextest() -> TestResult {
    require(
        &["cargo", "nextest", "--version"],
        "cargo install cargo-nextest --locked",
    );
    let fx = fixture(false)?;
    let observation = fx.run_all()?;
    let nextest_ran = observation
        .invocations
        .iter()
        .any(|i| i.argv.get(1).is_some_and(|a| a == "nextest"));
    assert!(nextest_ran, "{observation:?}");
    expected_outcomes(&fx)
}
