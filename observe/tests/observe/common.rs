//! Temporary projects and assertions shared by the runner tests.

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use tdd_observe::Adapter;
use tdd_observe::Collection;
use tdd_observe::Observation;
use tdd_observe::Project;
use tdd_observe::Selection;
use tdd_observe::TargetStatus;
use tdd_observe::adapter_for;
use tdd_observe::config::AdapterKind;
use tdd_observe::config::ProjectConfig;
use tdd_observe::lookup;
use tdd_observe::observe_target;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Fails (never skips) when `program --version` cannot run.
pub fn require(program: &[&str], install: &str) {
    let ok = Command::new(program[0])
        .args(&program[1..])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "`{}` is not available: {install} (`cargo xtask test` installs it)",
        program.join(" ")
    );
}

/// The committed node fixture with vitest, jest and mocha installed.
pub fn node_modules() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node-fixture/node_modules");
    assert!(
        dir.join(".bin").is_dir(),
        "{} is missing: run `npm ci` in observe/tests/node-fixture (`cargo xtask test` does)",
        dir.display()
    );
    dir
}

/// A temporary project of `kind` holding `files`.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub project: Project,
    pub adapter: Box<dyn Adapter>,
}

impl Fixture {
    pub fn new(
        kind: AdapterKind,
        files: &[(&str, &str)],
    ) -> Result<Fixture, Box<dyn std::error::Error>> {
        Fixture::with_config(kind, files, |_| {})
    }

    pub fn with_config(
        kind: AdapterKind,
        files: &[(&str, &str)],
        edit: impl FnOnce(&mut ProjectConfig),
    ) -> Result<Fixture, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        for (path, text) in files {
            let path = dir.path().join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)?;
        }
        let mut config: ProjectConfig =
            toml::from_str(&format!("adapter = \"{}\"\ntimeout = 600", kind.as_str()))?;
        edit(&mut config);
        let project = Project::new(dir.path(), "app", config)?;
        Ok(Fixture {
            dir,
            project,
            adapter: adapter_for(kind),
        })
    }

    pub fn link_node_modules(&self) -> TestResult {
        std::os::unix::fs::symlink(node_modules(), self.dir.path().join("node_modules"))?;
        Ok(())
    }

    pub fn run_all(&self) -> Result<Observation, Box<dyn std::error::Error>> {
        Ok(self.adapter.run(&self.project, &Selection::All)?)
    }

    pub fn collect(&self) -> Result<Collection, Box<dyn std::error::Error>> {
        Ok(self.adapter.collect(&self.project)?)
    }

    /// Asserts the status of each `(native id, status)` in one observation.
    pub fn expect(
        &self,
        observation: &Observation,
        collection: &Collection,
        expected: &[(&str, TargetStatus)],
    ) {
        for (native, status) in expected {
            let key = self.adapter.target_key(&self.project, native);
            let verdict = lookup(observation, Some(collection), &key);
            assert_eq!(
                verdict.status,
                *status,
                "{native}: {verdict:?}\nobservation: {}",
                serde_json::to_string_pretty(observation).unwrap_or_default()
            );
        }
    }

    /// Runs `native` alone and asserts its status.
    pub fn expect_alone(&self, native: &str, status: TargetStatus) -> TestResult {
        let (observation, verdict) = observe_target(self.adapter.as_ref(), &self.project, native)?;
        assert_eq!(
            verdict.status,
            status,
            "{native}: {verdict:?}\nobservation: {}",
            serde_json::to_string_pretty(&observation)?
        );
        Ok(())
    }
}
