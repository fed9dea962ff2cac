use super::*;

fn outcome(stream: &GoStream, id: &str) -> Option<(Outcome, Option<FailureKind>)> {
    stream
        .parsed
        .tests
        .iter()
        .find(|(test, _)| test == id)
        .map(|(_, r)| (r.outcome, r.failure.as_ref().map(|f| f.kind)))
}

#[test]
fn recorded_go_1_19_stream_with_stderr_build_errors() -> Result<(), ReportError> {
    let stream = parse(
        include_bytes!("../../tests/fixtures/go-test-1.19.jsonl"),
        include_bytes!("../../tests/fixtures/go-test-1.19.stderr"),
    )?;
    let calc = "example.com/gt/calc";
    assert_eq!(
        outcome(&stream, &format!("{calc}::TestAdd")),
        Some((Outcome::Passed, None))
    );
    assert_eq!(
        outcome(&stream, &format!("{calc}::TestFail")),
        Some((Outcome::Failed, Some(FailureKind::Assertion)))
    );
    assert_eq!(
        outcome(&stream, &format!("{calc}::TestPanic")),
        Some((Outcome::Failed, Some(FailureKind::Exception)))
    );
    let errors = &stream.parsed.collection_errors;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].scope, "example.com/gt/broken");
    assert_eq!(errors[0].kind, FailureKind::Compile);
    assert!(errors[0].message.contains("undefined: undefinedThing"));
    Ok(())
}

#[test]
fn go_1_24_build_events_are_compile_errors() -> Result<(), ReportError> {
    let stdout = br##"{"ImportPath":"m/pkg [m/pkg.test]","Action":"build-output","Output":"# m/pkg [m/pkg.test]\n"}
{"ImportPath":"m/pkg [m/pkg.test]","Action":"build-output","Output":"pkg/a_test.go:3:11: undefined: y\n"}
{"ImportPath":"m/pkg [m/pkg.test]","Action":"build-fail"}
{"Action":"start","Package":"m/pkg"}
{"Action":"output","Package":"m/pkg","Output":"FAIL\tm/pkg [build failed]\n"}
{"Action":"fail","Package":"m/pkg","Elapsed":0,"FailedBuild":"m/pkg [m/pkg.test]"}
"##;
    let stream = parse(stdout, b"")?;
    assert_eq!(stream.parsed.collection_errors.len(), 1);
    assert!(
        stream.parsed.collection_errors[0]
            .message
            .contains("undefined: y")
    );
    Ok(())
}

#[test]
fn subtests_skips_and_unfinished_tests() -> Result<(), ReportError> {
    let stdout = br#"{"Action":"run","Package":"m","Test":"TestA"}
{"Action":"run","Package":"m","Test":"TestA/case_one"}
{"Action":"pass","Package":"m","Test":"TestA/case_one"}
{"Action":"pass","Package":"m","Test":"TestA"}
{"Action":"run","Package":"m","Test":"TestS"}
{"Action":"skip","Package":"m","Test":"TestS"}
{"Action":"run","Package":"m","Test":"TestHang"}
{"Action":"output","Package":"m","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"m"}
"#;
    let stream = parse(stdout, b"")?;
    assert_eq!(
        outcome(&stream, "m::TestA/case_one"),
        Some((Outcome::Passed, None))
    );
    assert_eq!(outcome(&stream, "m::TestS"), Some((Outcome::Skipped, None)));
    assert_eq!(
        outcome(&stream, "m::TestHang"),
        Some((Outcome::Error, Some(FailureKind::Timeout)))
    );
    Ok(())
}

#[test]
fn list_output_is_read() -> Result<(), ReportError> {
    let stdout = br#"{"Action":"output","Package":"m","Output":"TestA\n"}
{"Action":"output","Package":"m","Output":"ok  \tm\t0.001s\n"}
"#;
    assert_eq!(parse(stdout, b"")?.listed, vec!["m::TestA".to_string()]);
    Ok(())
}

#[test]
fn text_without_events_is_an_error() {
    assert!(parse(b"hello\nworld\n", b"").is_err());
    assert!(parse(b"", b"").is_err());
}

/// go 1.19.8 `go test -json -count=1` over a table test whose second case
/// fails: the parent's message names the failing subtest and quotes it, and
/// test2json's `=== RUN` lines are left out.
#[test]
fn a_parent_names_its_failing_subtest() -> Result<(), ReportError> {
    let stream = parse(
        include_bytes!("../../tests/fixtures/go-test-subtests.jsonl"),
        b"",
    )?;
    let message = |id: &str| {
        stream
            .parsed
            .tests
            .iter()
            .find(|(test, _)| test == id)
            .and_then(|(_, r)| r.failure.as_ref())
            .map(|f| f.message.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        message("example.com/gt/sub::TestTable"),
        "failing subtests: TestTable/off_by_one\nTestTable/off_by_one:\n\
         sub_test.go:7: expected 3, got 2\n    --- FAIL: TestTable/off_by_one (0.00s)\n\
         --- FAIL: TestTable (0.00s)"
    );
    assert_eq!(
        message("example.com/gt/sub::TestTable/off_by_one"),
        "sub_test.go:7: expected 3, got 2\n    --- FAIL: TestTable/off_by_one (0.00s)"
    );
    Ok(())
}
