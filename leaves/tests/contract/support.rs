//! Sandboxes for contract tests: a git repository, a state directory, a directory of
//! fake CLIs first on `PATH`, and prompts built from real inputs.

use std::path::PathBuf;
use std::time::Duration;

use tdd_engine::git::Git;
use tdd_engine::plan::CycleKind;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_leaves::Leaves;
use tdd_leaves::Request;
use tdd_prompts::CommitSha;
use tdd_prompts::DeveloperInput;
use tdd_prompts::Issue;
use tdd_prompts::Prompt;
use tdd_prompts::RepoFacts;
use tdd_prompts::Step;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;
use tdd_supervisor::Supervisor;

/// What a scripted or fake leaf should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Work, report, exit 0.
    Ok,
    /// Start, then die before the final event.
    Crash,
    /// Start, then block forever.
    Hang,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Ok => "ok",
            Scenario::Crash => "crash",
            Scenario::Hang => "hang",
        }
    }
}

/// A temporary world for one test.
pub struct Sandbox {
    _root: tempfile::TempDir,
    pub dir: PathBuf,
    pub repo: PathBuf,
    pub state: PathBuf,
    pub bin: PathBuf,
    pub home: PathBuf,
}

pub fn fail<T>(what: &str, error: impl std::fmt::Debug) -> Result<T, String> {
    Err(format!("{what}: {error:?}"))
}

impl Sandbox {
    pub fn new() -> Result<Sandbox, String> {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let dir = root.path().canonicalize().map_err(|e| e.to_string())?;
        let sandbox = Sandbox {
            repo: dir.join("repo"),
            state: dir.join("state"),
            bin: dir.join("bin"),
            home: dir.join("home"),
            dir,
            _root: root,
        };
        for path in [&sandbox.repo, &sandbox.state, &sandbox.bin, &sandbox.home] {
            std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        }
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["commit", "-q", "--allow-empty", "-m", "base"][..],
        ] {
            let out = Git::new(&sandbox.repo)
                .command(args)
                .env("HOME", &sandbox.home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_AUTHOR_NAME", "T")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "T")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return fail("git", out);
            }
        }
        Ok(sandbox)
    }

    /// The leaves runtime: this test binary is the supervisor; the caller's
    /// environment holds forge tokens and an unlisted secret that must not leak.
    pub fn leaves(&self) -> Result<Leaves, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let supervisor = Supervisor::new(&self.state, exe, ["__supervise"]);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env = [
            ("PATH", path.as_str()),
            ("HOME", &self.home.display().to_string()),
            ("LANG", "C.UTF-8"),
            ("GITHUB_TOKEN", "ghp_must_never_reach_a_leaf"),
            ("GH_TOKEN", "gho_must_never_reach_a_leaf"),
            ("UNLISTED_SECRET", "not on any allow-list"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        Ok(Leaves::new(
            supervisor,
            self.state.join("ledger.sqlite3"),
            self.state.join("leaf-files"),
        )
        .caller_env(env))
    }

    /// Puts `name` first on `PATH`: a script that re-executes this test binary as a
    /// fake CLI replaying the scenario's recorded stream.
    pub fn fake(&self, name: &str, scenario: Scenario) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let script = format!(
            "#!/bin/sh\nexec '{}' __fake-cli '{name}' '{}' '{}' \"$@\"\n",
            exe.display(),
            scenario.name(),
            self.dir.display()
        );
        let path = self.bin.join(name);
        std::fs::write(&path, script).map_err(|e| e.to_string())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())
    }

    /// A developer request for the RED phase of a small issue.
    pub fn developer_request(&self) -> Result<Request, String> {
        let prompt = Prompt::developer(&developer_input()).map_err(|e| e.to_string())?;
        let mut request = Request::new(prompt, 12, 2, &self.repo);
        request.wall_timeout = Duration::from_secs(120);
        request.locked_files = vec!["app/duration.py".into()];
        Ok(request)
    }

    /// A verifier request for the same step.
    pub fn verifier_request(&self) -> Result<Request, String> {
        let git = Git::new(&self.repo);
        let cycle = cycle();
        let input = VerifierInput::new(
            TestId::planned(&cycle),
            issue().spec_for(&cycle).map_err(|e| e.to_string())?,
            CommitSha::resolve(&git, "HEAD").map_err(|e| e.to_string())?,
            None,
            Phase::AwaitingTest,
        );
        let prompt = Prompt::verifier(&input).map_err(|e| e.to_string())?;
        let mut request = Request::new(prompt, 12, 2, &self.repo);
        request.wall_timeout = Duration::from_secs(120);
        Ok(request)
    }

    /// The environment a leaf recorded in `env.txt`, as `KEY=VALUE` lines.
    pub fn leaf_env(&self) -> Result<Vec<(String, String)>, String> {
        let text = std::fs::read_to_string(self.dir.join("env.txt")).map_err(|e| e.to_string())?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }
}

pub fn issue() -> Issue {
    Issue::from_markdown(
        12,
        "Parse durations".into(),
        "- [ ] `parse_duration(\"90s\")` returns 90\n- [ ] `parse_duration(\"1h30m\")` returns 5400\n"
            .into(),
    )
}

pub fn cycle() -> PlannedCycle {
    PlannedCycle {
        n: 2,
        title: "Compound durations".into(),
        kind: CycleKind::Standard,
        projects: vec!["app".into()],
        tests: vec!["tests/test_duration.py::test_compound_duration".into()],
        files: vec!["app/duration.py".into()],
        stub_expected: vec![],
        modifies_tests: vec![],
        harness: vec![],
        changes_dependencies: false,
        commit_red: None,
        commit_green: None,
        commit_refactor: None,
        commit_pin: None,
        criterion: Some("2".into()),
        meta: serde_json::Value::Null,
    }
}

fn developer_input() -> DeveloperInput {
    let cycle = cycle();
    DeveloperInput {
        issue: issue(),
        targets: TestId::planned(&cycle),
        step: Step {
            criterion: Some("`parse_duration(\"1h30m\")` returns 5400".into()),
            cycle,
        },
        phase: Phase::AwaitingTest,
        repo: RepoFacts::default(),
        findings: vec![],
    }
}
