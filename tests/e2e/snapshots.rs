//! Snapshots of the text a person reads on a terminal: `status`, `doctor`, `test`, an
//! `advance` refusal and the demo's per-phase progress lines. A change to any of them
//! shows up as a reviewable diff of the `.snap` files under `snapshots/`.
//!
//! Everything that differs between machines or runs (temporary directories, run and
//! leaf ids, commit ids, times, durations, tool versions, pids) is replaced by a
//! placeholder, so a snapshot fails only when the wording or layout changes.

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n";
const STUB: &str = "\ndef sub(a, b):\n    raise NotImplementedError(\"sub\")\n";
const TEST: &str = "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 2) == 3\n";
const TESTS: &str = "from calc import add\n\n\ndef test_adds():\n    assert add(2, 3) == 5\n\n\ndef test_adds_wrongly():\n    assert add(2, 2) == 5\n";
const LOCKS: &str = "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n";

/// Escapes `text` for use as a literal in a filter's regular expression.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Insta settings whose filters hide what changes between machines and runs.
///
/// The environment's own directories are replaced first and by name, so a snapshot says
/// which one a path is in; the later, general filters catch whatever is left. Order
/// matters: a run id holds a time stamp and hex digits that later filters would split.
pub(crate) fn settings(env: &Env, extra: &[(&std::path::Path, &str)]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let mut dirs: Vec<(String, &str)> = extra
        .iter()
        .map(|(path, name)| (path.display().to_string(), *name))
        .collect();
    dirs.push((env.root().display().to_string(), "[REPO]"));
    dirs.push((
        env.ledger_home.path().display().to_string(),
        "[LEDGER_HOME]",
    ));
    dirs.push((env.home.path().display().to_string(), "[HOME]"));
    // The longest first, so a directory inside another keeps its own name.
    dirs.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    for (path, name) in dirs {
        // The canonical form too: a temporary directory may sit behind a symlink.
        if let Ok(canonical) = std::fs::canonicalize(&path) {
            let canonical = canonical.display().to_string();
            if canonical != path {
                settings.add_filter(&literal(&canonical), name);
            }
        }
        settings.add_filter(&literal(&path), name);
    }
    for (pattern, replacement) in [
        (r"/tmp/[^\s:'`)]*", "[TMP]"),
        (r"run-\d{8}T\d{6}-[0-9a-f]{6}", "[RUN_ID]"),
        (r"conduct-i(\d+)-\d+-[0-9a-f]+\b", "conduct-i${1}-[ID]"),
        (
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            "[TIME]",
        ),
        (r"\b[0-9a-f]{40}\b", "[SHA]"),
        (r"\b[0-9a-f]{7,12}\b", "[SHORT_SHA]"),
        (r"\b\d+(\.\d+)? ?(ms|s|seconds?)\b", "[DURATION]"),
        (r"git version \S+", "git version [VERSION]"),
        (r"\bgit \d+\.\d+\S*( \([^)]*\))?", "git [VERSION]"),
        // The ledger's directory per repository: the temporary directory's name and a hash.
        (r"repos/[^/\s]+", "repos/[REPO_KEY]"),
        // A leaf id ends in a random suffix; its role, issue, step, phase and attempt stay.
        (
            r"\b((?:planner|developer|verifier)-i\d+-s\d+-[a-z]+-a\d+)-[0-9a-f]{6}\b",
            "${1}-[ID]",
        ),
        (r"pytest \d+\.\d+\S*", "pytest [VERSION]"),
        (r"cargo \d+\.\d+\S*( \([^)]*\))?", "cargo [VERSION]"),
        (r"rustc \d+\.\d+\S*( \([^)]*\))?", "rustc [VERSION]"),
        (r"[Pp]ython \d+\.\d+\S*", "Python [VERSION]"),
        (r"pid \d+", "pid [PID]"),
    ] {
        settings.add_filter(pattern, replacement);
    }
    settings
}

/// Adds to `settings` the filters for a run's figures, which differ from run to run: a
/// panic's thread id, token counts, the engine's share of the time, and the work tree's
/// temporary directory name where a title names the repository.
pub(crate) fn run_figures(settings: &mut insta::Settings, env: &Env) {
    if let Some(name) = env.root().file_name().and_then(|n| n.to_str()) {
        settings.add_filter(&literal(name), "[REPO_NAME]");
    }
    for (pattern, replacement) in [
        (r"thread '(\w+)' \(\d+\)", "thread '$1' ([TID])"),
        (r"tokens \d+ in / \d+ out", "tokens [IN] in / [OUT] out"),
        (r"\(\d+% engine\)", "([SHARE] engine)"),
        (
            r"\d+ input, \d+ cache read, \d+ cache write, \d+ output",
            "[TOKENS]",
        ),
    ] {
        settings.add_filter(pattern, replacement);
    }
}

/// The output with trailing blanks trimmed per line: a terminal does not show them.
pub(crate) fn shown(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    format!("{}\n", lines.join("\n").trim_end())
}

/// A committed pytest project with `plan`, and a run started on it.
fn pytest_run() -> Env {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    );
    env.write("tdd.toml", LOCKS);
    env.write(
        ".tdd/plan.md",
        "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n  - n: 2\n    project: py\n    title: negation\n    test: tests/test_neg.py::test_neg\n    stub_expected: [calc.py]\n---\n",
    );
    env.commit_all("calc");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env
}

/// The pytest run with its first RED accepted: the target fails on the stub.
fn pytest_at_green() -> Env {
    let env = pytest_run();
    env.write("tests/test_sub.py", TEST);
    env.write("calc.py", &format!("{CALC}{STUB}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    env
}

#[test]
fn status_of_a_run_at_green() {
    let env = pytest_at_green();
    let (exit, text) = env.on_terminal(&["status"]);
    assert_eq!(exit, 0, "{text}");
    settings(&env, &[]).bind(|| insta::assert_snapshot!("status_at_green", shown(&text)));
}

/// `PATH` without the directories that hold an agent CLI, so the doctor's agent checks
/// read the same on a machine that has one installed.
pub(crate) fn path_without_agents() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<std::path::PathBuf> = std::env::split_paths(&path)
        .filter(|dir| {
            ["claude", "codex", "aider"]
                .iter()
                .all(|agent| !dir.join(agent).exists())
        })
        .collect();
    std::env::join_paths(kept)
        .expect("PATH joins")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn doctor_on_a_healthy_cargo_project() {
    // The sandbox check reads the same whatever this kernel's Landlock.
    let env = Env::new()
        .with_env("PATH", &path_without_agents())
        .with_env("TDD_SANDBOX_NO_LANDLOCK", "1");
    env.write("tdd.toml", "[project.app]\nadapter = \"cargo\"\n");
    let (exit, text) = env.on_terminal(&["doctor"]);
    assert_eq!(exit, 0, "{text}");
    settings(&env, &[]).bind(|| insta::assert_snapshot!("doctor_healthy_cargo", shown(&text)));
}

#[test]
fn doctor_with_a_scripted_provider_and_tdd_toml_not_committed() {
    let env = Env::new()
        .with_env("PATH", &path_without_agents())
        .with_env("TDD_SANDBOX_NO_LANDLOCK", "1");
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"cargo\"\n\n[conductor]\nprovider = \"scripted\"\n\n[provider.scripted]\nargs = [\"fixture.toml\"]\n",
    );
    let (exit, text) = env.on_terminal(&["doctor"]);
    assert_eq!(exit, 0, "{text}");
    settings(&env, &[])
        .bind(|| insta::assert_snapshot!("doctor_scripted_uncommitted", shown(&text)));
}

#[test]
fn test_of_a_target_whose_file_cannot_be_imported() {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tests/test_sub.py", TEST);
    env.write("tdd.toml", LOCKS);
    env.commit_all("calc");
    // Observed, so exit 0; the target's status says it did not load.
    let (exit, text) = env.on_terminal(&["test", "py::tests/test_sub.py::test_sub"]);
    assert_eq!(exit, 0, "{text}");
    // The interpreter's own frames differ between Python versions.
    let text: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.contains("importlib")
                && !l.contains("_bootstrap")
                && !l.trim().chars().all(|c| c == '^')
        })
        .collect();
    let text = text.join("\n");
    assert_eq!(
        text.matches("ImportError: cannot import").count(),
        1,
        "{text}"
    );
    settings(&env, &[]).bind(|| insta::assert_snapshot!("test_import_error", shown(&text)));
}

#[test]
fn test_of_a_failing_and_a_passing_pytest_target() {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tests/test_calc.py", TESTS);
    env.commit_all("calc");
    let settings = settings(&env, &[]);
    let (exit, text) = env.on_terminal(&["test", "tests/test_calc.py::test_adds_wrongly"]);
    assert_eq!(exit, 0, "{text}");
    settings.bind(|| insta::assert_snapshot!("test_failing_target", shown(&text)));
    let (exit, text) = env.on_terminal(&["test", "tests/test_calc.py::test_adds"]);
    assert_eq!(exit, 0, "{text}");
    settings.bind(|| insta::assert_snapshot!("test_passing_target", shown(&text)));
}

#[test]
fn advance_refused_while_the_target_still_fails() {
    let env = pytest_at_green();
    let (exit, text) = env.on_terminal(&["advance"]);
    assert_eq!(exit, 1, "{text}");
    settings(&env, &[])
        .bind(|| insta::assert_snapshot!("advance_refused_target_failing", shown(&text)));
}

#[test]
fn the_demo_reports_each_phase_on_one_line() {
    let env = Env::bare();
    let dir = env.home.path().join("demo");
    let (exit, text) = env.on_terminal(&["demo", "--keep", dir.to_str().expect("utf-8")]);
    assert_eq!(exit, 0, "{text}");
    let phases: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|line| line.starts_with("step "))
        .collect();
    assert!(!phases.is_empty(), "{text}");
    let phases = format!("{}\n", phases.join("\n"));
    settings(&env, &[(&dir, "[DEMO]")])
        .bind(|| insta::assert_snapshot!("demo_phase_lines", phases));
}

#[test]
fn advances_that_close_a_cycle_and_complete_the_run() {
    let env = pytest_at_green();
    let settings = settings(&env, &[]);
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a - b\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, text) = env.on_terminal(&["advance"]);
    assert_eq!(exit, 0, "{text}");
    settings.bind(|| insta::assert_snapshot!("advance_closes_a_cycle", shown(&text)));
    env.write(
        "tests/test_neg.py",
        "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n",
    );
    let done = format!("{CALC}\ndef sub(a, b):\n    return a - b\n");
    env.write(
        "calc.py",
        &format!("{done}\n\ndef neg(a):\n    raise NotImplementedError(\"neg\")\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(
        (exit, &value["data"]["to"]),
        (0, &"AWAITING_IMPL".into()),
        "{value}"
    );
    env.write(
        "calc.py",
        &format!("{done}\n\ndef neg(a):\n    return -a\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, text) = env.on_terminal(&["advance"]);
    assert_eq!(exit, 0, "{text}");
    settings.bind(|| insta::assert_snapshot!("advance_completes_the_run", shown(&text)));
}
