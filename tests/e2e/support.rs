//! A hermetic environment for running the real binary against temporary repositories.

use std::path::Path;
use std::path::PathBuf;
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

/// A temporary HOME, ledger home and git repository with one commit.
pub struct Env {
    pub home: tempfile::TempDir,
    pub ledger_home: tempfile::TempDir,
    pub repo: tempfile::TempDir,
    extra: Vec<(String, String)>,
}

impl Env {
    /// A fresh repository with one empty commit.
    pub fn new() -> Env {
        let env = Env::bare();
        env.git(&["init", "-q", "-b", "main"]);
        env.git(&["commit", "-q", "--allow-empty", "-m", "init"]);
        env
    }

    /// Temporary directories only: the "repository" is not a git repository.
    pub fn bare() -> Env {
        Env {
            home: tempfile::tempdir().expect("home"),
            ledger_home: tempfile::tempdir().expect("ledger home"),
            repo: tempfile::tempdir().expect("repo"),
            extra: Vec::new(),
        }
    }

    /// Sets an extra environment variable for every `tdd` run.
    pub fn with_env(mut self, key: &str, value: &str) -> Env {
        self.extra.push((key.to_string(), value.to_string()));
        self
    }

    pub fn root(&self) -> &Path {
        self.repo.path()
    }

    /// The core lease directory every `tdd` of this environment counts (`TDD_LEASE_DIR`).
    pub fn lease_dir(&self) -> PathBuf {
        self.home.path().join("leases")
    }

    /// `tdd` with a cleared environment, run in the repository.
    pub fn tdd(&self) -> assert_cmd::Command {
        self.tdd_at(&assert_cmd::cargo::cargo_bin("tdd"))
    }

    /// The `tdd` program at `program` (a copy of the binary, say), hermetic like `tdd()`.
    pub fn tdd_at(&self, program: &Path) -> assert_cmd::Command {
        assert_cmd::Command::from_std(self.std_at(program))
    }

    /// `tdd` as a plain `std::process::Command`, for tests that spawn it and signal it.
    pub fn tdd_std(&self) -> std::process::Command {
        self.std_at(&assert_cmd::cargo::cargo_bin("tdd"))
    }

    fn std_at(&self, program: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("TDD_LEDGER_HOME", self.ledger_home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .env("LANG", "C.UTF-8")
            // No runner heartbeat unless a test asks for one: how loaded the machine is
            // must not change what a test sees.
            .env("TDD_HEARTBEAT_SECS", "86400")
            // Core leases of this test's own: no other test's conductors (nor a real one
            // on this machine) change its `{workers}` or what `tdd status` says.
            .env("TDD_LEASE_DIR", self.lease_dir())
            .current_dir(self.repo.path());
        for (k, v) in toolchain_env() {
            cmd.env(k, v);
        }
        for (k, v) in &self.extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs git in the repository with a pinned identity, failing the test on error.
    pub fn git(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.repo.path())
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes a file under the repository, creating directories.
    pub fn write(&self, path: &str, contents: &str) -> PathBuf {
        let full = self.repo.path().join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&full, contents).expect("write");
        full
    }

    /// The calculator project most engine tests start from: `calc.py` with `add`, pytest
    /// finding it from the root, bytecode ignored, `tdd_toml` and the plan `plan`.
    pub fn pytest_calc(&self, tdd_toml: &str, plan: &str) {
        self.write("calc.py", "def add(a, b):\n    return a + b\n");
        self.write("pytest.ini", "[pytest]\npythonpath = .\n");
        self.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
        self.write("tdd.toml", tdd_toml);
        self.write(".tdd/plan.md", plan);
    }

    /// Commits everything in the work tree.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// Runs `tdd ARGS --json` and returns the exit code and the validated envelope.
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        let out = self
            .tdd()
            .args(args)
            .arg("--json")
            .output()
            .expect("tdd runs");
        (code(&out), envelope(&out))
    }
}

impl Env {
    /// Runs `tdd ARGS` on a real pseudo-terminal (util-linux `script`), returning what a
    /// person would see (stdout and stderr interleaved) and the exit code.
    pub fn on_terminal(&self, args: &[&str]) -> (i32, String) {
        let bin = assert_cmd::cargo::cargo_bin("tdd");
        let mut line = shell_quote(&bin.display().to_string());
        for arg in args {
            line.push(' ');
            line.push_str(&shell_quote(arg));
        }
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qefc", &line, "/dev/null"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("TDD_LEDGER_HOME", self.ledger_home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .env("NO_COLOR", "1")
            .env("TERM", "dumb")
            .env("TDD_HEARTBEAT_SECS", "86400")
            .env("TDD_LEASE_DIR", self.lease_dir())
            .current_dir(self.repo.path());
        for (k, v) in toolchain_env().into_iter().chain(self.extra.clone()) {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("script runs");
        let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        (code(&out), text)
    }
}

/// rustup and cargo find their toolchain through these; a temporary HOME would hide it.
pub fn toolchain_env() -> Vec<(String, String)> {
    let home = std::env::var("HOME").unwrap_or_default();
    let mut vars = Vec::new();
    for (key, default) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
        match std::env::var(key) {
            Ok(value) => vars.push((key.to_string(), value)),
            Err(_) if !home.is_empty() => vars.push((key.to_string(), format!("{home}/{default}"))),
            Err(_) => {}
        }
    }
    if let Ok(toolchain) = std::env::var("RUSTUP_TOOLCHAIN") {
        vars.push(("RUSTUP_TOOLCHAIN".to_string(), toolchain));
    }
    vars
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The exit code, failing the test on death by signal.
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("tdd exited normally")
}

fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/envelope.schema.json");
        let text = std::fs::read_to_string(path).expect("schema file");
        let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
        jsonschema::validator_for(&schema).expect("schema compiles")
    })
}

/// Parses stdout as exactly one JSON line and validates it against docs/envelope.schema.json.
pub fn envelope(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one envelope line on stdout, got: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: Value = serde_json::from_str(lines[0]).expect("stdout is JSON");
    let errors: Vec<String> = schema()
        .iter_errors(&value)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "envelope does not match the schema: {errors:?}\n{value}"
    );
    value
}

/// A version-manager shim for `name` in a directory of its own: it runs whatever
/// program the returned file names, first `leads_to`. Gives the directory, that file
/// and a `PATH` with the directory first.
pub fn switchable_shim(name: &str, leads_to: &str) -> (tempfile::TempDir, PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let shims = tempfile::tempdir().expect("shims");
    let target = shims.path().join("version");
    std::fs::write(&target, leads_to.trim()).expect("version");
    let shim = shims.path().join(name);
    std::fs::write(
        &shim,
        format!("#!/bin/sh\nexec \"$(cat {})\" \"$@\"\n", target.display()),
    )
    .expect("shim");
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        shims.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (shims, target, path)
}
