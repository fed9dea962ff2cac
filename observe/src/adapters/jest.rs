//! jest, observed through `--json --outputFile --testLocationInResults`.
//!
//! Ids are `file > describe > title`. One test is selected with
//! `--runTestsByPath FILE -t '^describe title$'`. A suite that fails to run
//! (a missing module, a syntax error) is a collection error of its file.

use super::js::JsRunner;
use super::js::STUB_HINT;
use super::js::target_key;
use super::node_bin;
use crate::Adapter;
use crate::Project;
use crate::Selection;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::model::Collection;
use crate::model::Observation;
use crate::target::TargetKey;

/// The jest adapter.
#[derive(Debug)]
pub(crate) struct Jest;

const RUNNER: JsRunner = JsRunner {
    kind: AdapterKind::Jest,
    name: "jest",
    base: |project| {
        vec![
            node_bin(&project.root, "jest"),
            "--ci".to_string(),
            "--watchman=false".to_string(),
        ]
    },
    report_flags: |report| {
        vec![
            "--json".to_string(),
            format!("--outputFile={report}"),
            "--testLocationInResults".to_string(),
        ]
    },
    files_flag: Some("--runTestsByPath"),
};

impl Adapter for Jest {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Jest
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        RUNNER.collect(project)
    }

    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError> {
        RUNNER.run(project, selection)
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        RUNNER.selection_args(&[native_id.to_string()])
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        target_key(project, native_id)
    }

    fn stub_hint(&self) -> &'static str {
        STUB_HINT
    }

    fn version_command(&self, project: &Project) -> Vec<String> {
        vec![super::node_bin(&project.root, "jest"), "--version".into()]
    }
}
