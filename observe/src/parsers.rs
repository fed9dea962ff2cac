//! Every report parser behind one entry point, for the fuzz tests and the
//! benchmarks. Not a stable API.

use std::path::Path;

use super::Project;
use super::Selection;
use super::adapters;
use super::build::Builder;
use super::build::ParsedReport;
use super::cargo_messages;
use super::error::ReportError;
use super::gostream;
use super::jsonreport;
use super::junit;
use super::model::Observation;
use crate::config::AdapterKind;

/// The report formats the engine reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain JUnit XML (the shared reader).
    Junit,
    /// pytest's JUnit XML.
    PytestJunit,
    /// pytest collection plugin JSON.
    PytestCollection,
    /// Jest-compatible JSON (jest, vitest).
    JestJson,
    /// mocha's JSON reporter.
    MochaJson,
    /// node:test JUnit for one file.
    NodeJunit,
    /// `go test -json`.
    GoJson,
    /// cargo's build messages.
    CargoMessages,
    /// libtest JSON events.
    Libtest,
    /// nextest's JUnit.
    NextestJunit,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 10] = [
        Format::Junit,
        Format::PytestJunit,
        Format::PytestCollection,
        Format::JestJson,
        Format::MochaJson,
        Format::NodeJunit,
        Format::GoJson,
        Format::CargoMessages,
        Format::Libtest,
        Format::NextestJunit,
    ];
}

/// Parses `bytes` as `format`; returns the number of test cases read.
pub fn parse(format: Format, bytes: &[u8]) -> Result<usize, ReportError> {
    Ok(parse_report(format, bytes)?.tests.len())
}

fn parse_report(format: Format, bytes: &[u8]) -> Result<ParsedReport, ReportError> {
    let root = Path::new("/nonexistent-root");
    match format {
        Format::Junit => Ok(ParsedReport {
            tests: junit::parse(bytes)?
                .cases
                .into_iter()
                .map(|c| {
                    (
                        c.name,
                        super::model::TestResult {
                            outcome: c.outcome,
                            failure: None,
                        },
                    )
                })
                .collect(),
            ..ParsedReport::default()
        }),
        Format::PytestJunit => adapters::pytest::parse_report(bytes, root),
        Format::PytestCollection => {
            adapters::pytest::parse_collection(bytes).map(|(ids, errors)| ParsedReport {
                tests: ids.into_iter().map(|id| (id, passed())).collect(),
                collection_errors: errors,
                ..ParsedReport::default()
            })
        }
        Format::JestJson => jsonreport::parse(bytes, root),
        Format::MochaJson => adapters::mocha::parse_report(bytes, root),
        Format::NodeJunit => adapters::node_test::parse_report(bytes, "a.test.js", root),
        Format::GoJson => gostream::parse(bytes, b"").map(|s| s.parsed),
        Format::CargoMessages => cargo_messages::parse_build(bytes).map(|b| ParsedReport {
            collection_errors: b.errors,
            ..ParsedReport::default()
        }),
        Format::Libtest => cargo_messages::parse_libtest(bytes, "bin"),
        Format::NextestJunit => adapters::cargo::parse_nextest(bytes),
    }
}

fn passed() -> super::model::TestResult {
    super::model::TestResult {
        outcome: super::model::Outcome::Passed,
        failure: None,
    }
}

/// Builds the observation the engine would make from `bytes` as a report
/// of `format`: a parse failure or an empty report is a `runner_error`.
pub fn observe_bytes(format: Format, bytes: &[u8]) -> Observation {
    let project = Project {
        name: "p".to_string(),
        root: Path::new("/").to_path_buf(),
        config: crate::config::ProjectConfig::bare(AdapterKind::Junit),
        hermetic: None,
        confinement: None,
    };
    let mut builder = Builder::new(&project, AdapterKind::Junit);
    match parse_report(format, bytes) {
        Ok(parsed) => builder.merge(parsed),
        Err(err) => builder.fail(err.0),
    }
    builder.finish(&Selection::All)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Arbitrary bytes never panic any parser, and an observation made
        /// from them either holds tests or collection errors, or is a
        /// runner error with a message.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            for format in Format::ALL {
                let observation = observe_bytes(format, &bytes);
                let observed = observation.totals.total > 0 || !observation.collection_errors.is_empty();
                let error = observation.runner_error.as_deref().unwrap_or("");
                prop_assert!(observed || !error.is_empty(), "{format:?}: {observation:?}");
            }
        }

        /// Near-valid documents (real prefixes with arbitrary tails) too.
        #[test]
        fn mangled_reports_never_panic(cut in 0usize..4096, tail in proptest::collection::vec(any::<u8>(), 0..64)) {
            let samples: [(Format, &[u8]); 10] = [
                (Format::PytestJunit, include_bytes!("../tests/fixtures/pytest-junit.xml")),
                (Format::NodeJunit, include_bytes!("../tests/fixtures/node-test-junit.xml")),
                (Format::GoJson, include_bytes!("../tests/fixtures/go-test-1.19.jsonl")),
                (Format::Junit, include_bytes!("../tests/fixtures/pytest-junit.xml")),
                (Format::JestJson, include_bytes!("../tests/fixtures/vitest-json/report.json")),
                (Format::JestJson, include_bytes!("../tests/fixtures/jest-json/report.json")),
                (Format::MochaJson, include_bytes!("../tests/fixtures/mocha-json/calc.spec.json")),
                (Format::CargoMessages, include_bytes!("../tests/fixtures/cargo-json/test-compile-error.jsonl")),
                (Format::Libtest, include_bytes!("../tests/fixtures/libtest-json/calc.jsonl")),
                (Format::NextestJunit, include_bytes!("../tests/fixtures/nextest-junit/junit.xml")),
            ];
            for (format, sample) in samples {
                let mut bytes = sample[..cut.min(sample.len())].to_vec();
                bytes.extend(&tail);
                let observation = observe_bytes(format, &bytes);
                let observed = observation.totals.total > 0 || !observation.collection_errors.is_empty();
                prop_assert!(observed || observation.runner_error.is_some());
            }
        }
    }

    #[test]
    fn empty_input_is_a_runner_error_for_every_format() {
        for format in Format::ALL {
            let observation = observe_bytes(format, b"");
            assert!(
                observation.runner_error.is_some_and(|e| !e.is_empty()),
                "{format:?}"
            );
        }
    }
}
