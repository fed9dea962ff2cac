//! Any runner, through a `test_command` that writes JUnit XML to `{report}`.
//!
//! Ids are `classname.name` (the Java convention; just `name` when the
//! classname is empty). `<failure>` is an assertion failure and `<error>` an
//! exception, as JUnit defines them. Collection runs `collect_command` when
//! set (its report may list tests as skipped), else the whole suite.

use super::exit_code;
use crate::Adapter;
use crate::Project;
use crate::Selection;
use crate::build::Builder;
use crate::build::ParsedReport;
use crate::clip::MESSAGE_KEEP;
use crate::clip::clip;
use crate::command::Substitutions;
use crate::command::user_command;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::error::ReportError;
use crate::exec::Job;
use crate::exec::ReportAt;
use crate::exec::Scratch;
use crate::exec::execute;
use crate::junit;
use crate::model::Collection;
use crate::model::Failure;
use crate::model::FailureKind;
use crate::model::Observation;
use crate::model::Outcome;
use crate::model::TestResult;
use crate::target::TargetKey;

/// The generic JUnit adapter.
#[derive(Debug)]
pub(crate) struct JunitCommand;

/// Parses a generic JUnit report into `classname.name` ids.
pub(crate) fn parse_report(bytes: &[u8]) -> Result<ParsedReport, ReportError> {
    let report = junit::parse(bytes)?;
    let mut parsed = ParsedReport {
        runner_counts: report.counts,
        ..ParsedReport::default()
    };
    for case in report.cases {
        // An errored case without a classname is a module or suite that
        // failed to load (pytest's and surefire's convention).
        if case.classname.is_empty() && case.outcome == Outcome::Error {
            parsed
                .collection_errors
                .push(crate::model::CollectionError {
                    scope: case.name.clone(),
                    kind: FailureKind::Collection,
                    message: clip(
                        &format!("{}\n{}", case.message, case.text.trim()),
                        MESSAGE_KEEP,
                    ),
                });
            continue;
        }
        let id = if case.classname.is_empty() {
            case.name.clone()
        } else {
            format!("{}.{}", case.classname, case.name)
        };
        let failure = matches!(case.outcome, Outcome::Failed | Outcome::Error).then(|| {
            let message = format!("{}\n{}", case.message, case.text.trim());
            Failure {
                kind: classify(case.outcome, &case.message, case.failure_type.as_deref()),
                message: clip(message.trim(), MESSAGE_KEEP),
            }
        });
        parsed.tests.push((
            id,
            TestResult {
                outcome: case.outcome,
                failure,
            },
        ));
    }
    Ok(parsed)
}

/// `<error>` is an exception. A `<failure>` is an assertion unless its
/// `type` (or the `Name:` that starts its message) names an exception class
/// that is not an assertion error, as pytest and many JUnit writers put a
/// test's uncaught exception in `<failure>`.
fn classify(outcome: Outcome, message: &str, failure_type: Option<&str>) -> FailureKind {
    let lowered = format!("{message} {}", failure_type.unwrap_or("")).to_lowercase();
    if lowered.contains("timeout") || lowered.contains("timed out") {
        return FailureKind::Timeout;
    }
    if outcome == Outcome::Error {
        return FailureKind::Exception;
    }
    let prefix = message
        .split_once(':')
        .map(|(head, _)| head)
        .filter(|h| !h.contains(' '));
    let head = failure_type.or(prefix).unwrap_or("");
    let assertion = ["Assert", "ComparisonFailure", "ExpectationFailed"];
    if assertion.iter().any(|a| head.contains(a)) {
        FailureKind::Assertion
    } else if head.ends_with("Error") || head.ends_with("Exception") {
        FailureKind::Exception
    } else {
        FailureKind::Assertion
    }
}

impl JunitCommand {
    fn observe(
        &self,
        project: &Project,
        template: Option<&str>,
        target: &[String],
    ) -> Result<Builder, ObserveError> {
        let mut builder = Builder::new(project, self.kind());
        let Some(template) = template else {
            builder
                .fail("the junit adapter needs a test_command that writes JUnit XML to {report}");
            return Ok(builder);
        };
        let scratch = Scratch::new()?;
        let report = scratch.path("report.xml");
        let argv = user_command(
            template,
            &Substitutions {
                target,
                report_flags: &[],
                report: &report,
            },
        );
        let ran = execute(
            project,
            &scratch,
            Job {
                label: "run",
                argv,
                cwd: None,
                report: ReportAt::File(report),
                env: Vec::new(),
            },
        );
        match ran.report.as_deref() {
            Some(bytes) => match parse_report(bytes) {
                Ok(parsed) => builder.merge(parsed),
                Err(err) => builder.fail(err.0),
            },
            None => {
                let code = exit_code(&ran).map_or(String::new(), |c| format!(" (exit {c})"));
                builder.fail(format!(
                    "test_command wrote no JUnit report to {{report}}{code}{}",
                    super::last_line_suffix(&ran.stderr)
                ));
            }
        }
        builder.invocation(ran.invocation);
        Ok(builder)
    }
}

impl Adapter for JunitCommand {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Junit
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let template = project
            .config
            .collect_command
            .as_deref()
            .or(project.config.test_command.as_deref());
        let observation = self
            .observe(project, template, &[])?
            .finish(&Selection::All);
        Ok(Collection {
            ids: observation.tests.keys().cloned().collect(),
            errors: observation.collection_errors,
            runner_error: observation
                .runner_error
                .filter(|e| !e.starts_with("no tests ran")),
            invocations: observation.invocations,
        })
    }

    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError> {
        let target = match selection {
            Selection::All | Selection::AllExcept(_) => Vec::new(),
            Selection::Tests(ids) => ids.clone(),
        };
        Ok(self
            .observe(project, project.config.test_command.as_deref(), &target)?
            .finish(selection))
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        vec![native_id.to_string()]
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        let id = format!("{}::{native_id}", project.name);
        let scope = native_id
            .rsplit_once('.')
            .map_or(native_id, |(class, _)| class)
            .to_string();
        TargetKey::exact(id, vec![scope])
    }

    fn stub_hint(&self) -> &'static str {
        "a body that throws an explicit \"not implemented yet\" error, e.g. throw new UnsupportedOperationException(\"not implemented yet\");"
    }

    /// The first word of `test_command`, looked up as the shell would run it.
    fn version_command(&self, project: &Project) -> Vec<String> {
        let first = project
            .config
            .test_command
            .as_deref()
            .and_then(|c| c.split_whitespace().next())
            .unwrap_or_default();
        let script = if first.is_empty() {
            "echo 'the junit adapter needs a test_command' >&2; exit 1"
        } else {
            "command -v \"$1\" || { echo \"$1 is not on PATH\" >&2; exit 1; }"
        };
        vec![
            "sh".into(),
            "-c".into(),
            script.into(),
            "sh".into(),
            first.into(),
        ]
    }
}
