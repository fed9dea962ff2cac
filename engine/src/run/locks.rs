//! Phase file locks: which paths a phase may not change.
//!
//! RED locks implementation files (except declared stubs); GREEN and
//! REFACTOR lock test files. Harness files, the ones that decide how tests run
//! (tdd.toml, runner configs and plugins, manifests and build scripts), are
//! locked in every phase unless the cycle declares them. Globs with a leading
//! `!` carve out exclusions.

use globset::Glob;
use globset::GlobSet;
use globset::GlobSetBuilder;

use crate::config::AdapterKind;
use crate::config::Config;
use crate::config::LockConfig;

/// A set of repository-relative paths given by include and `!`-exclude globs.
#[derive(Debug, Clone)]
pub struct PathSet {
    include: GlobSet,
    exclude: GlobSet,
    extra: Vec<String>,
    empty: bool,
}

/// A glob that does not compile.
#[derive(Debug, thiserror::Error)]
#[error("invalid lock glob `{glob}`: {message}")]
pub struct GlobError {
    /// The glob as written.
    pub glob: String,
    /// Why it does not compile.
    pub message: String,
}

impl PathSet {
    /// Builds a set from globs relative to `prefix` (a directory, `""` for the root).
    pub fn new(prefix: &str, globs: &[String]) -> Result<PathSet, GlobError> {
        let mut include = GlobSetBuilder::new();
        let mut exclude = GlobSetBuilder::new();
        let mut empty = true;
        for raw in globs {
            let (negated, pattern) = match raw.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, raw.as_str()),
            };
            let mut pattern = pattern.trim_start_matches("./").to_string();
            if pattern.ends_with('/') {
                pattern.push_str("**");
            }
            let full = join(prefix, &pattern);
            let glob = Glob::new(&full).map_err(|e| GlobError {
                glob: raw.clone(),
                message: e.to_string(),
            })?;
            if negated {
                exclude.add(glob);
            } else {
                include.add(glob);
                empty = false;
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build().map_err(|e| GlobError {
                glob: globs.join(", "),
                message: e.to_string(),
            })
        };
        Ok(PathSet {
            include: build(include)?,
            exclude: build(exclude)?,
            extra: Vec::new(),
            empty,
        })
    }

    /// Adds exact paths to the set (declared stubs, the plan file).
    pub fn with_paths(mut self, paths: impl IntoIterator<Item = String>) -> PathSet {
        self.extra.extend(paths);
        self
    }

    /// Whether the set names `path` (repository-relative, `/`-separated).
    pub fn matches(&self, path: &str) -> bool {
        if self.extra.iter().any(|p| p == path) {
            return true;
        }
        !self.empty && self.include.is_match(path) && !self.exclude.is_match(path)
    }
}

fn join(prefix: &str, pattern: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() || prefix == "." {
        pattern.to_string()
    } else {
        format!("{prefix}/{pattern}")
    }
}

/// The test and implementation sets of one project.
#[derive(Debug, Clone)]
pub struct LockRules {
    /// Test files: locked in GREEN and REFACTOR, committed in RED.
    pub test: PathSet,
    /// Implementation files: locked in RED, committed in GREEN.
    pub implementation: PathSet,
    /// Everything inside the project root.
    pub root: PathSet,
    /// Files that decide how tests run, relative to the work-tree root: locked in every
    /// phase of a cycle that does not declare them.
    pub harness: PathSet,
}

/// Where `adapter` finds tests when a project declares neither `test_paths` nor test
/// lock globs.
pub fn default_tests(adapter: AdapterKind) -> &'static [&'static str] {
    match adapter {
        AdapterKind::Pytest => &["**/test_*.py", "**/*_test.py", "**/conftest.py"],
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => &[
            "**/*.test.*",
            "**/*.spec.*",
            "**/__tests__/**",
            "test/**",
            "tests/**",
        ],
        AdapterKind::Go => &["**/*_test.go", "**/testdata/**"],
        AdapterKind::Cargo => &["tests/**", "**/tests/**", "benches/**"],
        AdapterKind::Junit => &[],
    }
}

/// Files every run locks whatever the adapter: the configuration itself.
///
/// Version-manager files (`.tool-versions`, pyenv's `.python-version`, `.nvmrc`,
/// `.node-version`) choose which interpreter a pinned shim starts, so they are harness
/// for every adapter.
const ALWAYS_HARNESS: &[&str] = &[
    "tdd.toml",
    "**/.tool-versions",
    "**/.python-version",
    "**/.nvmrc",
    "**/.node-version",
];

/// The files that decide how `adapter` runs tests, anywhere in the work tree: its
/// configuration, plugins and what the interpreter loads before any test (Python's
/// `conftest.py`, `sitecustomize`, `.pth` files and modules shadowing the runner), the
/// package manifests and lock files that pick dependencies, and build scripts.
pub fn default_harness(adapter: AdapterKind) -> &'static [&'static str] {
    match adapter {
        AdapterKind::Pytest => &[
            "**/conftest.py",
            "**/pytest.toml",
            "**/.pytest.toml",
            "**/pytest.ini",
            "**/.pytest.ini",
            "**/pyproject.toml",
            "**/setup.cfg",
            "**/tox.ini",
            "**/sitecustomize.py",
            "**/usercustomize.py",
            "**/*.pth",
            "**/pytest.py",
            "**/pytest/**",
            "**/_pytest/**",
            "**/pluggy/**",
            "**/uv.lock",
            "**/poetry.lock",
            "**/pdm.lock",
        ],
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => &[
            "**/package.json",
            "**/package-lock.json",
            "**/vitest.config.*",
            "**/vitest.workspace.*",
            "**/vite.config.*",
            "**/jest.config.*",
            "**/.mocharc*",
            "**/babel.config.*",
            "**/.babelrc*",
            "**/tsconfig*.json",
            "**/.npmrc",
        ],
        AdapterKind::Cargo => &[
            "**/Cargo.toml",
            "**/Cargo.lock",
            "**/build.rs",
            "**/.cargo/config",
            "**/.cargo/config.toml",
            "**/.config/nextest.toml",
            "**/rust-toolchain",
            "**/rust-toolchain.toml",
        ],
        AdapterKind::Go => &["**/go.mod", "**/go.sum", "**/go.work", "**/go.work.sum"],
        AdapterKind::Junit => &[],
    }
}

impl LockRules {
    /// The rules of `project`: its own `locks`, else `[locks]`, else its `test_paths` with
    /// everything else under its root as implementation.
    pub fn for_project(config: &Config, project: &str) -> Result<LockRules, GlobError> {
        let Some(p) = config.project.get(project) else {
            return Err(GlobError {
                glob: String::new(),
                message: format!("unknown project `{project}`"),
            });
        };
        let root = PathSet::new(&p.root, &["**".to_string()])?;
        let (prefix, locks): (&str, LockConfig) = match &p.locks {
            Some(own) => (&p.root, own.clone()),
            None => ("", config.locks.clone()),
        };
        let test_globs = if !locks.test_globs.is_empty() {
            (prefix, locks.test_globs)
        } else if !p.test_paths.is_empty() {
            (p.root.as_str(), p.test_paths.clone())
        } else {
            // Nothing declared: the files the adapter discovers tests in, so tests are
            // never left unlocked for want of a glob.
            let defaults = default_tests(p.adapter).iter().map(|g| g.to_string());
            (p.root.as_str(), defaults.collect())
        };
        let test = PathSet::new(test_globs.0, &test_globs.1)?;
        let implementation = if locks.impl_globs.is_empty() {
            // No implementation globs: everything under the root that is not a test.
            let mut globs = vec!["**".to_string()];
            globs.extend(
                test_globs
                    .1
                    .iter()
                    .filter(|g| !g.starts_with('!'))
                    .map(|g| format!("!{g}")),
            );
            PathSet::new(test_globs.0, &globs)?
        } else {
            PathSet::new(prefix, &locks.impl_globs)?
        };
        let harness = match p
            .locks
            .as_ref()
            .and_then(|l| l.harness_globs.clone())
            .or_else(|| config.locks.harness_globs.clone())
        {
            Some(globs) => globs,
            None => default_harness(p.adapter)
                .iter()
                .map(|g| g.to_string())
                .collect(),
        };
        let mut harness_globs: Vec<String> = ALWAYS_HARNESS.iter().map(|g| g.to_string()).collect();
        harness_globs.extend(harness);
        Ok(LockRules {
            test,
            implementation,
            root,
            harness: PathSet::new("", &harness_globs)?,
        })
    }
}

/// Which lock keeps a path from changing in a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lock {
    /// A file that decides how tests run, which the cycle does not declare: locked in
    /// every phase.
    Harness,
    /// A test file: locked once RED is committed (GREEN, REFACTOR, a sensitivity check).
    Test,
    /// An implementation file: locked in RED (and while a pin test is written).
    Implementation,
}

impl Lock {
    /// The lock in words, for a reason a person or an agent reads.
    pub fn words(self) -> &'static str {
        match self {
            Lock::Harness => {
                "a file that decides how tests run, locked in every phase unless the cycle declares it"
            }
            Lock::Test => "a test file, locked once the failing test is committed",
            Lock::Implementation => {
                "an implementation file, locked until the failing test is committed"
            }
        }
    }
}

/// The locks of one cycle in one phase: the one answer to "may this path change now?",
/// which the gates revert by and which a hook asks before a tool writes.
#[derive(Debug, Clone)]
pub struct PhaseLocks {
    rules: Vec<LockRules>,
    phase: super::Phase,
    stubs: Vec<String>,
    declared_harness: Vec<String>,
}

impl PhaseLocks {
    /// The locks of `planned` at `phase`, from each of its projects' rules.
    pub fn for_cycle(
        config: &Config,
        planned: &crate::plan::PlannedCycle,
        phase: super::Phase,
    ) -> Result<PhaseLocks, GlobError> {
        let rules = planned
            .projects
            .iter()
            .map(|p| LockRules::for_project(config, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PhaseLocks {
            rules,
            phase,
            stubs: planned.stub_expected.clone(),
            declared_harness: planned.harness.clone(),
        })
    }

    /// The phase these locks are for.
    pub fn phase(&self) -> super::Phase {
        self.phase
    }

    /// Whether `path` is a test file (a declared stub counts as one while RED is open).
    pub fn is_test(&self, path: &str) -> bool {
        self.rules.iter().any(|r| r.test.matches(path))
            || self.phase == super::Phase::AwaitingTest && self.stubs.iter().any(|s| s == path)
    }

    /// Whether `path` is a harness file this cycle does not declare.
    pub fn is_harness(&self, path: &str) -> bool {
        self.rules.iter().any(|r| r.harness.matches(path))
            && !self.declared_harness.iter().any(|h| h == path)
    }

    /// Whether `path` is an implementation file.
    pub fn is_impl(&self, path: &str) -> bool {
        self.rules.iter().any(|r| r.implementation.matches(path))
    }

    /// Whether `path` is inside one of the cycle's projects.
    pub fn in_roots(&self, path: &str) -> bool {
        self.rules.iter().any(|r| r.root.matches(path))
    }

    /// The lock that keeps `path` (relative to the work tree) from changing in this
    /// phase, or `None` when the phase may change it.
    pub fn lock_of(&self, path: &str) -> Option<Lock> {
        use super::Phase;
        if self.is_harness(path) {
            return Some(Lock::Harness);
        }
        match self.phase {
            Phase::AwaitingTest | Phase::AwaitingPin => {
                (self.is_impl(path) && !self.is_test(path)).then_some(Lock::Implementation)
            }
            Phase::AwaitingImpl | Phase::AwaitingRefactor | Phase::SensitivityRequired => {
                self.is_test(path).then_some(Lock::Test)
            }
            Phase::Closed | Phase::Skipped => None,
        }
    }
}

/// The plan's targets that name a file outside their project's test files, each as a
/// sentence saying which cycle, which file and how to fix it. Only adapters whose ids
/// start with the file (pytest, vitest, jest, mocha, node-test) are checked.
pub fn targets_outside_tests(config: &Config, plan: &crate::plan::Plan) -> Vec<String> {
    let mut found = Vec::new();
    for cycle in &plan.cycles {
        for test in &cycle.tests {
            let name = cycle
                .projects
                .iter()
                .find(|p| test.starts_with(&format!("{p}::")))
                .or(cycle.projects.first());
            let Some(name) = name else { continue };
            let Some(project) = config.project.get(name) else {
                continue;
            };
            let native = test.strip_prefix(&format!("{name}::")).unwrap_or(test);
            let Some(file) = super::testdefs::target_file(project.adapter, native) else {
                continue;
            };
            let Ok(rules) = LockRules::for_project(config, name) else {
                continue;
            };
            let full = join(&project.root, &file);
            if !rules.test.matches(&full) {
                found.push(format!(
                    "cycle {}: target `{test}` is in {full}, outside the test files of project `{name}`; move the test under its test paths, or add the file to the project's `[locks] test` globs in tdd.toml",
                    cycle.n
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(prefix: &str, globs: &[&str]) -> PathSet {
        PathSet::new(
            prefix,
            &globs.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .expect("globs")
    }

    #[test]
    fn exclusions_carve_out_of_inclusions() {
        let s = set("", &["src/**", "!src/**/tests.rs"]);
        assert!(s.matches("src/lib.rs"));
        assert!(!s.matches("src/calc/tests.rs"));
        assert!(!s.matches("tests/it.rs"));
    }

    #[test]
    fn prefixes_and_directory_globs_apply() {
        let s = set("backend", &["tests/"]);
        assert!(s.matches("backend/tests/test_a.py"));
        assert!(!s.matches("tests/test_a.py"));
    }

    #[test]
    fn an_empty_set_matches_only_extra_paths() {
        let s = set("", &[]).with_paths(["src/stub.rs".to_string()]);
        assert!(s.matches("src/stub.rs"));
        assert!(!s.matches("src/lib.rs"));
    }

    #[test]
    fn a_conftest_anywhere_is_harness_for_pytest() {
        let globs: Vec<String> = default_harness(AdapterKind::Pytest)
            .iter()
            .map(|g| g.to_string())
            .collect();
        let s = PathSet::new("", &globs).expect("globs");
        assert!(s.matches("conftest.py"));
        assert!(s.matches("pkg/tests/conftest.py"));
        assert!(s.matches("pytest.py"));
        assert!(s.matches("lib/site.pth"));
        assert!(!s.matches("calc.py"));
        assert!(!s.matches("tests/test_calc.py"));
        assert!(s.matches("pytest.toml") && s.matches("sub/.pytest.toml"));
    }

    /// nextest reads the workspace's `.config/nextest.toml` over the profile tdd gives
    /// it (a wrapper script there runs every test as `true`): harness for cargo.
    #[test]
    fn nextests_repository_config_is_harness_for_cargo() {
        let globs: Vec<String> = default_harness(AdapterKind::Cargo)
            .iter()
            .map(|g| g.to_string())
            .collect();
        let s = PathSet::new("", &globs).expect("globs");
        assert!(s.matches(".config/nextest.toml"));
        assert!(s.matches("crates/app/.config/nextest.toml"));
        assert!(!s.matches("src/lib.rs"));
    }

    proptest::proptest! {
        #[test]
        fn an_excluded_path_never_matches(name in "[a-z]{1,8}") {
            let s = set("", &["**", "!**/*.secret"]);
            let path = format!("dir/{name}.secret");
            proptest::prop_assert!(!s.matches(&path));
        }
    }
}
