//! vitest, observed through `vitest run --no-cache --reporter=json --outputFile`.
//!
//! Ids are `file > describe > title`. One test is selected by its file and
//! an anchored `-t '^describe title$'`; tests the pattern filters out are
//! reported by vitest as skipped and dropped from the observation.

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

/// The vitest adapter.
#[derive(Debug)]
pub(crate) struct Vitest;

const RUNNER: JsRunner = JsRunner {
    kind: AdapterKind::Vitest,
    name: "vitest",
    // `--no-cache`: vitest would write its results cache into `node_modules/.vite`,
    // the dependency directory a deciding run links read-only and tdd fingerprints.
    base: |project| {
        vec![
            node_bin(&project.root, "vitest"),
            "run".to_string(),
            "--no-cache".to_string(),
        ]
    },
    report_flags: |report| {
        vec![
            "--reporter=json".to_string(),
            format!("--outputFile={report}"),
        ]
    },
    files_flag: None,
};

impl Adapter for Vitest {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Vitest
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
        vec![super::node_bin(&project.root, "vitest"), "--version".into()]
    }
}
