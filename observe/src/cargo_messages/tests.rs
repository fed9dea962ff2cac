use super::*;
use crate::model::RunnerCounts;

type Outcomes<'a> = Vec<(&'a str, Outcome, Option<FailureKind>)>;

fn outcomes(parsed: &ParsedReport) -> Outcomes<'_> {
    parsed
        .tests
        .iter()
        .map(|(id, r)| (id.as_str(), r.outcome, r.failure.as_ref().map(|f| f.kind)))
        .collect()
}

fn binary(id: &str, executable: &str) -> TestBinary {
    TestBinary {
        binary_id: id.to_string(),
        package: "calc".to_string(),
        executable: PathBuf::from(executable),
        package_dir: Some(PathBuf::from("/fixture")),
    }
}

/// cargo 1.95 `test --no-run --message-format json` (warm target dir) with
/// an integration test that does not compile: the binaries that built are
/// listed, the broken one is a compile error of its own binary id only,
/// and the `failure-note` diagnostic is not an error.
#[test]
fn recorded_build_with_a_test_compile_error() -> Result<(), ReportError> {
    let build = parse_build(include_bytes!(
        "../../tests/fixtures/cargo-json/test-compile-error.jsonl"
    ))?;
    assert_eq!(
        build.binaries,
        vec![
            binary(
                "calc::crash",
                "/fixture/target/debug/deps/crash-44df16188b3a9474"
            ),
            binary(
                "calc::integ",
                "/fixture/target/debug/deps/integ-c20bf4959c1c6dfd"
            ),
            binary("calc", "/fixture/target/debug/deps/calc-c6626fb655a8d231"),
        ]
    );
    assert_eq!(
        build.errors,
        vec![CollectionError {
            scope: "calc::broken".to_string(),
            kind: FailureKind::Compile,
            message: concat!(
                "error[E0308]: mismatched types\n",
                " --> tests/broken.rs:3:18\n",
                "  |\n",
                "3 |     let x: i32 = \"s\";\n",
                "  |            ---   ^^^ expected `i32`, found `&str`\n",
                "  |            |\n",
                "  |            expected due to this\n\n",
            )
            .to_string(),
        }]
    );
    Ok(())
}

/// A library that does not compile breaks every test binary of its
/// package: no binary is built and the error's scope is the package. cargo
/// reports the error once for the library and once for its test harness;
/// the message keeps it once.
#[test]
fn recorded_build_with_a_library_compile_error() -> Result<(), ReportError> {
    let build = parse_build(include_bytes!(
        "../../tests/fixtures/cargo-json/lib-compile-error.jsonl"
    ))?;
    assert!(build.binaries.is_empty());
    assert_eq!(
        build.errors,
        vec![CollectionError {
            scope: "calc".to_string(),
            kind: FailureKind::Compile,
            message: concat!(
                "error[E0308]: mismatched types\n",
                "  --> src/lib.rs:29:5\n",
                "   |\n",
                "28 | pub fn bad() -> i32 {\n",
                "   |                 --- expected `i32` because of return type\n",
                "29 |     \"s\"\n",
                "   |     ^^^ expected `i32`, found `&str`\n\n",
            )
            .to_string(),
        }]
    );
    Ok(())
}

/// rustc 1.95 libtest `-Z unstable-options --format json`, one stream per
/// test binary of the same crate.
#[test]
fn recorded_libtest_streams_of_several_binaries() -> Result<(), ReportError> {
    let unit = parse_libtest(
        include_bytes!("../../tests/fixtures/libtest-json/calc.jsonl"),
        "calc",
    )?;
    assert_eq!(
        outcomes(&unit),
        vec![
            (
                "calc tests::fails",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            (
                "calc tests::panics",
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
            ("calc tests::skipped", Outcome::Skipped, None),
            ("calc tests::passes", Outcome::Passed, None),
        ]
    );
    let panics = unit.tests.get(1).and_then(|(_, r)| r.failure.as_ref());
    assert!(panics.is_some_and(|f| f.message.starts_with(
        "thread 'tests::panics' (32553) panicked at src/lib.rs:20:39:\nno fourth element"
    )));
    assert_eq!(
        unit.runner_counts,
        Some(RunnerCounts {
            tests: Some(4),
            passed: Some(1),
            failed: Some(2),
            skipped: Some(1),
            errors: None,
        })
    );

    let integration = parse_libtest(
        include_bytes!("../../tests/fixtures/libtest-json/integ.jsonl"),
        "calc::integ",
    )?;
    assert_eq!(
        outcomes(&integration),
        vec![
            (
                "calc::integ bare_assert",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            ("calc::integ works", Outcome::Passed, None),
        ]
    );
    assert_eq!(
        integration.runner_counts,
        Some(RunnerCounts {
            tests: Some(2),
            passed: Some(1),
            failed: Some(1),
            skipped: Some(0),
            errors: None,
        })
    );

    // `std::process::abort()` kills the binary after `started`: no verdict,
    // no suite event.
    let crash = parse_libtest(
        include_bytes!("../../tests/fixtures/libtest-json/crash.jsonl"),
        "calc::crash",
    )?;
    assert_eq!(
        outcomes(&crash),
        vec![(
            "calc::crash aborts",
            Outcome::Error,
            Some(FailureKind::Exception)
        )]
    );
    assert_eq!(crash.runner_counts, None);
    Ok(())
}
