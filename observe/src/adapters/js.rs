//! What the vitest and jest adapters share: both write the Jest-compatible
//! JSON report, select tests by file plus an anchored `-t` name pattern,
//! and collect by running with a pattern that matches no test name (the
//! files load, so load errors show per file, but no test body runs).

use std::collections::BTreeSet;

use super::file_of;
use super::name_alternatives;
use super::record_missing_report;
use super::titles_of;
use crate::Project;
use crate::Selection;
use crate::build::Builder;
use crate::command::Substitutions;
use crate::command::user_command;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::exec::Job;
use crate::exec::ReportAt;
use crate::exec::Scratch;
use crate::exec::execute;
use crate::jsonreport;
use crate::model::Collection;
use crate::model::Observation;
use crate::model::Outcome;
use crate::target::TargetKey;

/// A JavaScript regular expression that matches no string at all.
pub(crate) const MATCH_NOTHING: &str = "(?!)";

/// How one JSON-reporting runner is invoked.
#[derive(Debug)]
pub(crate) struct JsRunner {
    /// The adapter kind.
    pub kind: AdapterKind,
    /// The runner's display name in messages.
    pub name: &'static str,
    /// Program and fixed arguments, before report flags and selection.
    pub base: fn(&Project) -> Vec<String>,
    /// The report flags for a report path.
    pub report_flags: fn(&str) -> Vec<String>,
    /// The flag that precedes test files in a selection, if any.
    pub files_flag: Option<&'static str>,
}

impl JsRunner {
    /// Arguments selecting `ids`: their files, then one anchored `-t`.
    pub(crate) fn selection_args(&self, ids: &[String]) -> Vec<String> {
        let files: BTreeSet<String> = ids.iter().map(|id| file_of(id)).collect();
        let names: Vec<String> = ids
            .iter()
            .map(|id| name_alternatives(&titles_of(id).join(" ")))
            .collect();
        let mut args: Vec<String> = self.files_flag.iter().map(|f| f.to_string()).collect();
        args.extend(files);
        args.push("-t".to_string());
        args.push(format!("^(?:{})$", names.join("|")));
        args
    }

    /// Runs the runner with `selection_args` and observes its report.
    pub(crate) fn observe(
        &self,
        project: &Project,
        selection_args: Vec<String>,
    ) -> Result<Builder, ObserveError> {
        let scratch = Scratch::new()?;
        let report = scratch.path("report.json");
        let report_flags = (self.report_flags)(&report.to_string_lossy());
        let argv = match &project.config.test_command {
            Some(template) => user_command(
                template,
                &Substitutions {
                    target: &selection_args,
                    report_flags: &report_flags,
                    report: &report,
                },
            ),
            None => {
                let mut argv = (self.base)(project);
                argv.extend(report_flags);
                argv.extend(selection_args);
                argv
            }
        };
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
        let mut builder = Builder::new(project, self.kind);
        record_missing_report(&mut builder, &ran, self.name);
        if let Some(bytes) = ran.report.as_deref().filter(|b| !b.is_empty()) {
            match jsonreport::parse(bytes, &project.root) {
                Ok(parsed) => super::merge_agreeing(&mut builder, &ran, parsed, self.name),
                Err(err) => builder.fail(err.0),
            }
        }
        builder.invocation(ran.invocation);
        Ok(builder)
    }

    /// Runs `selection` and observes it.
    pub(crate) fn run(
        &self,
        project: &Project,
        selection: &Selection,
    ) -> Result<Observation, ObserveError> {
        let args = match selection {
            // The js runners deselect by name pattern only, which could drop same-named
            // tests elsewhere: the rest of the suite runs whole.
            Selection::All | Selection::AllExcept(_) => Vec::new(),
            Selection::Tests(ids) => self.selection_args(ids),
        };
        Ok(self.observe(project, args)?.finish(selection))
    }

    /// Loads every test file without running a test body.
    pub(crate) fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let args = vec!["-t".to_string(), MATCH_NOTHING.to_string()];
        let observation = self.observe(project, args)?.finish(&Selection::All);
        let skipped_only = observation
            .tests
            .values()
            .all(|r| r.outcome == Outcome::Skipped);
        Ok(Collection {
            ids: observation.tests.keys().cloned().collect(),
            errors: observation.collection_errors,
            runner_error: observation
                .runner_error
                .filter(|e| !e.starts_with("no tests ran"))
                .or_else(|| {
                    (!skipped_only).then(|| format!("{} ran tests while collecting", self.name))
                }),
            invocations: observation.invocations,
        })
    }
}

/// The target key of a `file > describe > title` id.
pub(crate) fn target_key(project: &Project, native_id: &str) -> TargetKey {
    let id = format!("{}::{native_id}", project.name);
    TargetKey::exact(id, vec![file_of(native_id)])
}

/// The stub idiom for JavaScript and TypeScript.
pub(crate) const STUB_HINT: &str =
    "export function name(...args) {\n  throw new Error(\"name is not implemented yet\");\n}";
