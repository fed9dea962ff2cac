use super::*;

#[test]
fn pytest_report_parses_every_case_and_counts() -> Result<(), ReportError> {
    let report = parse(include_bytes!("../../tests/fixtures/pytest-junit.xml"))?;
    assert_eq!(report.cases.len(), 10);
    let collection = &report.cases[0];
    assert_eq!(collection.outcome, Outcome::Error);
    assert_eq!(collection.message, "collection failure");
    assert!(collection.text.contains("ModuleNotFoundError"));
    let failing = &report.cases[2];
    assert_eq!(failing.name, "test_fail");
    assert_eq!(failing.outcome, Outcome::Failed);
    assert!(
        failing.text.contains("> "),
        "entities are decoded: {}",
        failing.text
    );
    let counts = report.counts.ok_or(ReportError("no counts".into()))?;
    assert_eq!(counts.tests, Some(10));
    assert_eq!(counts.failed, Some(3));
    Ok(())
}

#[test]
fn node_report_reads_nested_suites_and_summary_comments() -> Result<(), ReportError> {
    let report = parse(include_bytes!("../../tests/fixtures/node-test-junit.xml"))?;
    let names: Vec<(&[String], &str)> = report
        .cases
        .iter()
        .map(|c| (c.suites.as_slice(), c.name.as_str()))
        .collect();
    assert!(names.contains(&(&["math".to_string()][..], "fails")));
    assert!(names.contains(&(&[][..], "top level")));
    let counts = report.counts.ok_or(ReportError("no counts".into()))?;
    assert_eq!(counts.tests, Some(6));
    assert_eq!(counts.failed, Some(3));
    Ok(())
}

#[test]
fn bare_testsuite_root_and_empty_elements() -> Result<(), ReportError> {
    let xml = br#"<testsuite name="s" tests="3"><testcase name="a"/><testcase name="b"><failure/></testcase><testcase name="c"><skipped/></testcase></testsuite>"#;
    let report = parse(xml)?;
    let outcomes: Vec<Outcome> = report.cases.iter().map(|c| c.outcome).collect();
    assert_eq!(
        outcomes,
        vec![Outcome::Passed, Outcome::Failed, Outcome::Skipped]
    );
    Ok(())
}

#[test]
fn cdata_and_character_references_are_kept() -> Result<(), ReportError> {
    let xml = br#"<testsuites><testcase name="a"><failure message="x &#233; y"><![CDATA[left <> right]]> &amp; more</failure></testcase></testsuites>"#;
    let report = parse(xml)?;
    assert_eq!(report.cases[0].message, "x \u{e9} y");
    assert_eq!(report.cases[0].text, "left <> right & more");
    Ok(())
}

#[test]
fn garbage_empty_and_truncated_input_are_errors() {
    for input in [
        &b""[..],
        b"not xml at all",
        b"<html></html>",
        b"\xff\xfe<testsuites>",
    ] {
        let err = parse(input).err();
        assert!(err.is_some_and(|e| !e.0.is_empty()), "{input:?} must fail");
    }
    assert!(parse(b"<testsuites><testcase name=\"a\"></testsuites>").is_err());
}
