//! A streaming JUnit XML reader shared by the pytest, node:test, cargo
//! (nextest) and generic junit adapters.
//!
//! It accepts the dialects those runners write: `<testsuites>` or a bare
//! `<testsuite>` root, nested suites (node:test), test cases outside any
//! suite, `<failure>`/`<error>`/`<skipped>` as start or empty elements, and
//! node:test's `<!-- tests N -->` summary comments. Any input either parses
//! or yields a [`ReportError`]; it never panics.

use quick_xml::Reader;
use quick_xml::events::BytesStart;
use quick_xml::events::Event;

use super::error::ReportError;
use super::model::Outcome;
use super::model::RunnerCounts;

/// Bytes of failure text kept per test case.
const TEXT_KEEP: usize = 16 * 1024;

/// One `<testcase>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JunitCase {
    /// Names of the enclosing `<testsuite>` elements, outermost first.
    pub suites: Vec<String>,
    /// The `classname` attribute.
    pub classname: String,
    /// The `name` attribute.
    pub name: String,
    /// The `file` attribute, when present (pytest's xunit1 family).
    pub file: Option<String>,
    /// Passed unless a failure, error or skipped child says otherwise.
    pub outcome: Outcome,
    /// The `message` attribute of the failure, error or skipped child.
    pub message: String,
    /// The `type` attribute of the failure or error child.
    pub failure_type: Option<String>,
    /// The text of the failure or error child, clipped.
    pub text: String,
}

/// A parsed JUnit document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JunitReport {
    /// Every test case in document order.
    pub cases: Vec<JunitCase>,
    /// Counts from the root element's attributes or node's summary comments.
    pub counts: Option<RunnerCounts>,
}

/// Parses a JUnit XML document.
pub(crate) fn parse(bytes: &[u8]) -> Result<JunitReport, ReportError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ReportError::new("JUnit XML", e))?;
    if text.trim().is_empty() {
        return Err(ReportError::new("JUnit XML", "the report is empty"));
    }
    let mut reader = Reader::from_str(text);
    let mut state = State::default();
    loop {
        let event = reader.read_event().map_err(|e| {
            let at = reader.error_position();
            ReportError::new("JUnit XML", format!("{e} at byte {at}"))
        })?;
        match event {
            Event::Start(element) => state.open(&element, false)?,
            Event::Empty(element) => state.open(&element, true)?,
            Event::End(element) => state.close(element.name().as_ref()),
            Event::Text(text) => state.text(&text.xml10_content()),
            Event::CData(data) => state.text(&data.xml10_content()),
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => predefined_entity(&reference).to_string(),
                };
                state.text(&resolved);
            }
            Event::Comment(comment) => state.comment(&comment),
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if !state.saw_root {
        return Err(ReportError::new(
            "JUnit XML",
            "no <testsuites>, <testsuite> or <testcase> element",
        ));
    }
    let counts = state
        .root_counts
        .or(state.comment_counts)
        .or(state.suite_counts);
    Ok(JunitReport {
        cases: state.cases,
        counts,
    })
}

fn predefined_entity(name: &str) -> &'static str {
    match name {
        "lt" => "<",
        "gt" => ">",
        "amp" => "&",
        "apos" => "'",
        "quot" => "\"",
        _ => "\u{fffd}",
    }
}

#[derive(Debug, Default)]
struct State {
    suites: Vec<String>,
    current: Option<JunitCase>,
    capturing: bool,
    cases: Vec<JunitCase>,
    saw_root: bool,
    root_counts: Option<RunnerCounts>,
    comment_counts: Option<RunnerCounts>,
    suite_counts: Option<RunnerCounts>,
}

impl State {
    fn open(&mut self, element: &BytesStart<'_>, empty: bool) -> Result<(), ReportError> {
        match element.name().as_ref() {
            "testsuites" => {
                self.saw_root = true;
                self.root_counts = counts_of(element)?;
            }
            "testsuite" => {
                self.saw_root = true;
                if self.suites.is_empty()
                    && let Some(counts) = counts_of(element)?
                {
                    let sum = self.suite_counts.get_or_insert_with(RunnerCounts::default);
                    add_into(sum, counts);
                }
                if !empty {
                    self.suites.push(attr(element, "name")?.unwrap_or_default());
                }
            }
            "testcase" => {
                self.saw_root = true;
                self.current = Some(JunitCase {
                    suites: self.suites.clone(),
                    classname: attr(element, "classname")?.unwrap_or_default(),
                    name: attr(element, "name")?.unwrap_or_default(),
                    file: attr(element, "file")?,
                    outcome: Outcome::Passed,
                    message: String::new(),
                    failure_type: None,
                    text: String::new(),
                });
                if empty {
                    self.close("testcase");
                }
            }
            name @ ("failure" | "error" | "skipped") => {
                let outcome = match name {
                    "failure" => Outcome::Failed,
                    "error" => Outcome::Error,
                    _ => Outcome::Skipped,
                };
                let message = attr(element, "message")?.unwrap_or_default();
                let failure_type = attr(element, "type")?;
                if let Some(case) = self.current.as_mut() {
                    // The first verdict wins; an error after a failure (pytest
                    // teardown) keeps the error, which is the worse outcome.
                    if case.outcome == Outcome::Passed || outcome == Outcome::Error {
                        case.outcome = outcome;
                        case.message = message;
                        case.failure_type = failure_type;
                    }
                    self.capturing = !empty && outcome != Outcome::Skipped;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn close(&mut self, name: &str) {
        match name {
            "testcase" => {
                if let Some(case) = self.current.take() {
                    self.cases.push(case);
                }
                self.capturing = false;
            }
            "testsuite" => {
                self.suites.pop();
            }
            "failure" | "error" => self.capturing = false,
            _ => {}
        }
    }

    fn text(&mut self, text: &str) {
        if !self.capturing {
            return;
        }
        if let Some(case) = self.current.as_mut()
            && case.text.len() < TEXT_KEEP
        {
            case.text.push_str(text);
        }
    }

    fn comment(&mut self, comment: &str) {
        let mut words = comment.split_whitespace();
        let (Some(key), Some(value), None) = (words.next(), words.next(), words.next()) else {
            return;
        };
        let Ok(value) = value.parse::<u64>() else {
            return;
        };
        let counts = self
            .comment_counts
            .get_or_insert_with(RunnerCounts::default);
        match key {
            "tests" => counts.tests = Some(value),
            "pass" => counts.passed = Some(value),
            "fail" => counts.failed = Some(value),
            "skipped" => counts.skipped = Some(value),
            "cancelled" => counts.errors = Some(value),
            _ => {}
        }
    }
}

fn attr(element: &BytesStart<'_>, key: &str) -> Result<Option<String>, ReportError> {
    for attribute in element.attributes() {
        let attribute = attribute.map_err(|e| ReportError::new("JUnit XML", e))?;
        if attribute.key.as_ref() == key {
            let value = attribute
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|e| ReportError::new("JUnit XML", e))?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

fn add_into(sum: &mut RunnerCounts, next: RunnerCounts) {
    let add = |a: Option<u64>, b: Option<u64>| Some(a.unwrap_or(0) + b.unwrap_or(0));
    sum.tests = add(sum.tests, next.tests);
    sum.passed = add(sum.passed, next.passed);
    sum.failed = add(sum.failed, next.failed);
    sum.skipped = add(sum.skipped, next.skipped);
    sum.errors = add(sum.errors, next.errors);
}

fn counts_of(element: &BytesStart<'_>) -> Result<Option<RunnerCounts>, ReportError> {
    let number = |key: &str| -> Result<Option<u64>, ReportError> {
        Ok(attr(element, key)?.and_then(|v| v.trim().parse::<u64>().ok()))
    };
    let tests = number("tests")?;
    if tests.is_none() {
        return Ok(None);
    }
    let failed = number("failures")?;
    let errors = number("errors")?;
    let skipped = number("skipped")?;
    let passed = tests.map(|t| {
        t.saturating_sub(failed.unwrap_or(0) + errors.unwrap_or(0) + skipped.unwrap_or(0))
    });
    Ok(Some(RunnerCounts {
        tests,
        passed,
        failed,
        skipped,
        errors,
    }))
}

#[cfg(test)]
mod tests;
