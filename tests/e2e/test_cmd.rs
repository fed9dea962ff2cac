//! `tdd test` against real pytest: every outcome, exit codes, and recording in a run.

use std::path::Path;

use crate::conduct::files_under;
use crate::support::Env;

const TESTS: &str = r#"
import pytest
from calc import add

def test_passes():
    assert add(1, 1) == 2

def test_assertion():
    assert add(1, 1) == 3

def test_exception():
    raise RuntimeError("boom from the code under test")

@pytest.mark.skip(reason="later")
def test_skipped():
    pass
"#;

fn pytest_project() -> Env {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    env.write("calc.py", "def add(a, b):\n    return a + b\n");
    env.write("tests/test_calc.py", TESTS);
    env.write(
        "tests/test_broken.py",
        "from calc import missing_name\n\ndef test_never():\n    pass\n",
    );
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.commit_all("calc");
    env
}

fn status_of(value: &serde_json::Value) -> String {
    value["data"]["targets"][0]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn each_target_outcome_is_reported_with_exit_0() {
    let env = pytest_project();
    for (target, expected) in [
        ("tests/test_calc.py::test_passes", "passed"),
        ("tests/test_calc.py::test_assertion", "failed_assertion"),
        ("py::tests/test_calc.py::test_exception", "failed_error"),
        ("tests/test_calc.py::test_skipped", "not_run"),
        ("tests/test_calc.py::test_nope", "not_found"),
        ("tests/test_broken.py::test_never", "failed_error"),
    ] {
        let (exit, value) = env.json(&["test", target]);
        assert_eq!(exit, 0, "{target}: {value}");
        assert_eq!(status_of(&value), expected, "{target}: {value}");
    }
}

#[test]
fn the_whole_suite_lists_failures_with_excerpts_on_a_terminal() {
    let env = pytest_project();
    let (exit, text) = env.on_terminal(&["test", "--all"]);
    assert_eq!(exit, 0, "{text}");
    assert!(
        text.contains("FAIL  py::tests/test_calc.py::test_assertion"),
        "{text}"
    );
    assert!(text.contains("boom from the code under test"), "{text}");
    assert!(text.contains("test_broken.py"), "{text}");
}

#[test]
fn a_missing_runner_is_exit_1_and_bad_arguments_exit_2() {
    let env = pytest_project();
    let (exit, value) = env.json(&["test", "--project", "nope"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "unknown_project");
    // An id that begins with `-` would reach the runner as an option (`-p` loads a
    // plugin): it is refused before any runner starts.
    for id in ["--rootdir=/", "py::-p", "-k"] {
        let (exit, value) = env.json(&["test", "--", id]);
        assert_eq!(exit, 2, "{id}: {value}");
        assert_eq!(value["error"]["reason"], "target_invalid", "{value}");
        assert!(
            value["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("begins with `-`")),
            "{value}"
        );
    }
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"junit\"\ntest_command = \"no-such-runner-anywhere {report}\"\n",
    );
    let (exit, value) = env.json(&["test", "--all"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "runner_error");
    // doctor would call this runner healthy enough to start: the hint points at
    // the runner's own output instead.
    let hint = value["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("runner's own output") && !hint.contains("doctor"),
        "{value}"
    );
    let (exit, text) = env.on_terminal(&["test", "--all"]);
    assert_eq!(exit, 1, "{text}");
    assert!(text.contains("no-such-runner-anywhere"), "{text}");
}

#[test]
fn observations_are_recorded_against_the_active_cycle() {
    let env = pytest_project();
    env.write(".tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: t\n    test: tests/test_calc.py::test_new\n---\n");
    env.write("tests/test_broken.py", "def test_fine():\n    pass\n");
    env.write(
        "tests/test_calc.py",
        "from calc import add\n\ndef test_passes():\n    assert add(1, 1) == 2\n",
    );
    env.commit_all("plan");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = env.json(&["test", "tests/test_calc.py::test_passes"]);
    assert_eq!(exit, 0, "{value}");
    assert!(
        value["data"]["recorded_in_run"]
            .as_str()
            .is_some_and(|r| r.starts_with("run-")),
        "{value}"
    );
}

/// Runs `tdd <args>` with extra variables; gives stderr.
fn stderr_of(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> String {
    let mut cmd = env.tdd_std();
    cmd.args(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("tdd runs");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn diagnostics_show_the_suite_run_with_v_or_tdd_log_and_nothing_without() {
    let env = pytest_project();
    let target = ["--json", "test", "tests/test_calc.py::test_passes"];
    let quiet = stderr_of(&env, &[], &target);
    assert!(!quiet.contains("suite_run"), "{quiet}");
    let verbose = stderr_of(&env, &[], &["-v", target[0], target[1], target[2]]);
    assert!(
        verbose.contains("suite_run{project=\"py\"") && verbose.contains("runner ended"),
        "{verbose}"
    );
    assert!(
        !verbose.contains("runner started"),
        "debug is -vv: {verbose}"
    );
    let filtered = stderr_of(&env, &[("TDD_LOG", "tdd_observe=debug")], &target);
    assert!(filtered.contains("runner started"), "{filtered}");
    let bad = stderr_of(&env, &[("TDD_LOG", "tdd_engine=[")], &target);
    assert!(bad.contains("ignoring TDD_LOG"), "{bad}");
}

/// A pytest project whose second test is the long part of the run.
fn slow_suite(env: Env) -> Env {
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    env.write(
        "tests/test_slow.py",
        "import time\n\ndef test_quick():\n    pass\n\ndef test_slow():\n    time.sleep(3)\n",
    );
    env.commit_all("a slow suite");
    env
}

#[test]
fn a_long_run_reports_heartbeats_with_the_tests_finished_so_far() {
    let env = slow_suite(Env::new());
    let stderr = stderr_of(
        &env,
        &[("TDD_HEARTBEAT_SECS", "0.2")],
        &["--json", "test", "--all"],
    );
    let beats: Vec<serde_json::Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "heartbeat")
        .collect();
    assert!(!beats.is_empty(), "{stderr}");
    assert!(
        beats
            .iter()
            .all(|b| b["project"] == "py" && b["label"] == "run")
    );
    assert!(
        beats.iter().any(|b| b["tests_seen"] == 1),
        "test_quick finished while test_slow ran: {stderr}"
    );
    // With an interval longer than the run, there is none.
    let quiet = stderr_of(&env, &[], &["--json", "test", "--all"]);
    assert!(!quiet.contains("heartbeat"), "{quiet}");

    // On a terminal, one line rewritten in place, cleared before the result.
    let env = slow_suite(Env::new().with_env("TDD_HEARTBEAT_SECS", "0.2"));
    let (exit, text) = env.on_terminal(&["test", "--all"]);
    assert_eq!(exit, 0, "{text}");
    assert!(text.contains("\r  py (run): running for "), "{text:?}");
    assert!(text.contains("1 test finished"), "{text:?}");
    assert!(
        text.contains("\r\u{1b}[K"),
        "cleared before the result: {text:?}"
    );
}

/// A file target stands for the tests in it: the verdict lists them, in the
/// envelope and on a terminal.
#[test]
fn a_file_target_says_which_tests_it_matched() {
    let env = pytest_project();
    let (exit, value) = env.json(&["test", "tests/test_calc.py"]);
    assert_eq!(exit, 0, "{value}");
    let matched = value["data"]["targets"][0]["matched"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        matched.contains(&serde_json::json!("py::tests/test_calc.py::test_passes")),
        "{value}"
    );
    let (exit, text) = env.on_terminal(&["test", "tests/test_calc.py"]);
    assert_eq!(exit, 0, "{text}");
    assert!(
        text.contains("matched: ") && text.contains("py::tests/test_calc.py::test_passes"),
        "{text}"
    );
}

#[test]
fn a_target_that_does_not_load_shows_its_error_once_and_says_why_the_runner_stopped() {
    let env = pytest_project();
    let (exit, text) = env.on_terminal(&["test", "tests/test_broken.py::test_never"]);
    assert_eq!(exit, 0, "{text}");
    assert_eq!(
        text.matches("cannot import name 'missing_name'").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("tests/test_broken.py does not load (the error is below)"),
        "{text}"
    );
    assert!(
        text.contains("the load error above stopped the runner"),
        "{text}"
    );
    assert!(!text.contains("--junitxml"), "{text}");
}

/// A test that reads the user's git credentials and writes into `.git` and the home
/// directory, and fails with what each attempt got.
const PRYING: &str = r#"
import os
import socket

def test_pries():
    home = os.environ["HOME"]
    seen = []
    try:
        seen.append(open(os.path.join(home, ".git-credentials")).read())
    except OSError as e:
        seen.append("denied")
    for path in [".git/planted", os.path.join(home, "planted")]:
        try:
            open(path, "w").write("x")
            seen.append("wrote " + path)
        except OSError:
            seen.append("denied")
    try:
        socket.create_connection(("127.0.0.1", int(os.environ["PRY_PORT"])), 5).close()
        seen.append("reached")
    except OSError:
        seen.append("denied")
    # Its own servers on loopback still work.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    socket.create_connection(server.getsockname(), 5).close()
    # A key it found on disk, in its failure message.
    seen.append(open(os.path.join(home, ".config/model-key")).read())
    # Spelled in two parts so that only the message, not its source line, reads SEEN:.
    raise AssertionError("SEE" + "N:" + "|".join(seen) + ":E" + "ND")
"#;

/// A model API key, in the caller's environment and in a file the test code reads.
const MODEL_KEY: &str = "sk-planted-model-key-0123";

/// `tdd test` by hand in a project whose `[sandbox]` table is `sandbox`: what the
/// prying test printed, and the level its runner got.
fn pry(sandbox: &str) -> (String, Option<String>, Env) {
    let env = Env::new().with_env("OPENAI_API_KEY", MODEL_KEY);
    let outside = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = outside.local_addr().expect("port").port();
    env.write(
        "tdd.toml",
        &format!(
            "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\nenv = {{ PRY_PORT = \"{port}\" }}\n{sandbox}"
        ),
    );
    std::fs::create_dir_all(env.home.path().join(".config")).expect("config");
    std::fs::write(env.home.path().join(".config/model-key"), MODEL_KEY).expect("key");
    env.write("tests/test_pry.py", PRYING);
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.commit_all("a prying test");
    std::fs::write(
        env.home.path().join(".git-credentials"),
        "s3cret-credential",
    )
    .expect("plant");
    let (code, value) = env.json(&["test"]);
    assert_eq!(code, 0, "{value}");
    let invocation = &value["data"]["observations"][0]["invocations"][0];
    let text = value.to_string();
    let seen = text
        .split("SEEN:")
        .filter_map(|rest| rest.split_once(":END"))
        .map(|(seen, _)| seen)
        .find(|seen| !seen.contains('"'))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("the test said nothing: {value}"));
    let level = invocation["sandbox"].as_str().map(str::to_string);
    (seen, level, env)
}

#[test]
fn test_code_run_by_hand_reads_no_credential_and_writes_neither_git_nor_home() {
    let (seen, level, env) = pry("");
    if !tdd_sandbox::probe().confines() {
        // A kernel without Landlock: the runner's record says it was not confined.
        assert_eq!(level.as_deref(), Some("none"), "{seen}");
        return;
    }
    // The credential file, `.git`, the home directory and a port outside its own network
    // are out of reach; the model key it read elsewhere on disk is stored nowhere.
    assert_eq!(seen, format!("denied|denied|denied|denied|{MODEL_KEY}"));
    assert!(level.is_some_and(|l| l.starts_with("landlock-v")));
    assert!(!env.root().join(".git/planted").exists());
    assert!(!env.home.path().join("planted").exists());
    for (path, text) in files_under(env.ledger_home.path()) {
        assert!(
            !text.contains(MODEL_KEY),
            "the key reached {}",
            path.display()
        );
    }
    // With confinement turned off, the same test gets through: the rule is what stops it.
    let (seen, level, _env) = pry("\n[sandbox]\nenabled = false\n");
    assert!(seen.starts_with("s3cret-credential|wrote"), "{seen}");
    assert!(seen.contains("|reached|"), "{seen}");
    assert_eq!(level, None);
}

/// Test code that fills its `TMPDIR` and takes a large allocation: each passes only if
/// the machine let it.
const GREEDY: &str = r#"
import os, tempfile

def test_fills_tmp():
    with open(os.path.join(tempfile.gettempdir(), "fill"), "wb") as f:
        f.write(b"x" * (16 << 20))

def test_allocates():
    assert len(bytearray(512 << 20)) == 512 << 20
"#;

/// The outcome of each greedy test under the `[sandbox]` table `sandbox`.
fn greedy(sandbox: &str) -> (String, String) {
    let env = Env::new();
    env.write(
        "tdd.toml",
        &format!("[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n{sandbox}"),
    );
    env.write("tests/test_greedy.py", GREEDY);
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.commit_all("greedy tests");
    let outcome = |target: &str| {
        let (code, value) = env.json(&["test", &format!("tests/test_greedy.py::{target}")]);
        assert_eq!(code, 0, "{value}");
        let status = status_of(&value);
        (status, value.to_string())
    };
    let (tmp, tmp_text) = outcome("test_fills_tmp");
    let (memory, memory_text) = outcome("test_allocates");
    (
        format!("{tmp}: {tmp_text}"),
        format!("{memory}: {memory_text}"),
    )
}

#[test]
fn test_code_gets_no_more_tmp_or_memory_than_sandbox_allows() {
    if !tdd_sandbox::probe().confines() || !tdd_sandbox::namespaces().mounts {
        return;
    }
    let (tmp, memory) = greedy("\n[sandbox]\ntmp_mb = 4\nmemory_mb = 256\n");
    assert!(
        tmp.starts_with("failed_error") && tmp.contains("No space left"),
        "{tmp}"
    );
    assert!(
        memory.starts_with("failed_error") && memory.contains("MemoryError"),
        "{memory}"
    );
    // Unbounded, the same tests pass: the bounds are what stop them.
    let (tmp, memory) = greedy("\n[sandbox]\ntmp_mb = 0\nmemory_mb = 0\n");
    assert!(tmp.starts_with("passed"), "{tmp}");
    assert!(memory.starts_with("passed"), "{memory}");
}

/// A test that spreads work over a `multiprocessing` pool (POSIX semaphores in
/// `/dev/shm`) and leaves a file in shared memory for whatever runs next.
const POOLED: &str = r#"
import multiprocessing

def square(x):
    return x * x

def test_pool_squares():
    with multiprocessing.Pool(2) as pool:
        assert pool.map(square, [1, 2, 3]) == [1, 4, 9]
    with open("/dev/shm/LEFT_NAME", "w") as f:
        f.write("planted")
"#;

#[test]
fn a_suite_that_uses_shared_memory_runs_and_leaves_nothing_in_the_machines() {
    if !tdd_sandbox::probe().confines()
        || !tdd_sandbox::namespaces().mounts
        || !Path::new("/dev/shm").is_dir()
    {
        return;
    }
    let left = format!("tdd-e2e-left-{}", std::process::id());
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    env.write("tests/test_pool.py", &POOLED.replace("LEFT_NAME", &left));
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.commit_all("a pooled test");
    let (code, value) = env.json(&["test", "tests/test_pool.py::test_pool_squares"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(status_of(&value), "passed", "{value}");
    // The run had a shared-memory directory of its own: nothing it left there is the
    // machine's, for a later run (or a gate) to read.
    assert!(!Path::new("/dev/shm").join(&left).exists());
}

/// A failing test whose module rewrites pytest's report at exit to say it passed.
const FORGING: &str = r#"
import atexit, sys

def _forge():
    for arg in sys.argv:
        if arg.startswith("--junitxml="):
            with open(arg.split("=", 1)[1], "w") as report:
                report.write('<testsuite><testcase classname="tests.test_forge" name="test_fails" file="tests/test_forge.py"/></testsuite>')

atexit.register(_forge)

def test_fails():
    assert False
"#;

#[test]
fn a_report_rewritten_after_pytest_wrote_it_is_not_counted() {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    env.write("tests/test_forge.py", FORGING);
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.commit_all("a forging test");
    let (code, value) = env.json(&["test", "tests/test_forge.py::test_fails"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "runner_error", "{value}");
    assert_eq!(status_of(&value), "runner_error", "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("exited 1") && message.contains("report"),
        "{value}"
    );
}

#[test]
fn test_code_never_builds_into_the_users_shared_build_directories() {
    // A CARGO_TARGET_DIR or GOCACHE the user shares between projects is where a test
    // could plant compiled objects a later run trusts: runs build into a directory of
    // their work tree's own, and the user's stay untouched.
    let env = Env::new();
    let shared = tempfile::tempdir().expect("shared");
    let target = shared.path().join("cargo-target");
    let gocache = shared.path().join("go-build");
    let env = env
        .with_env("CARGO_TARGET_DIR", target.to_str().expect("utf-8"))
        .with_env("GOCACHE", gocache.to_str().expect("utf-8"));
    env.write(
        "rs/Cargo.toml",
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    env.write(
        "rs/src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    );
    env.write(
        "rs/tests/add.rs",
        "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
    );
    env.write("go/go.mod", "module example.com/calc\n\ngo 1.18\n");
    env.write(
        "go/calc.go",
        "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    );
    env.write(
        "go/calc_test.go",
        "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
    );
    env.write(".gitignore", "target/\nCargo.lock\n");
    env.write(
        "tdd.toml",
        "[project.rs]\nadapter = \"cargo\"\nroot = \"rs\"\n\n[project.go]\nadapter = \"go\"\nroot = \"go\"\n",
    );
    env.commit_all("two projects");
    let (exit, value) = env.json(&["test", "--all"]);
    assert_eq!(exit, 0, "{value}");
    let passed: Vec<&str> = value["data"]["observations"]
        .as_array()
        .expect("observations")
        .iter()
        .flat_map(|o| o["tests"].as_object().into_iter().flatten())
        .filter(|(_, t)| t["outcome"] == "passed")
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(passed.len(), 2, "{value}");
    let written: Vec<_> = [&target, &gocache]
        .iter()
        .flat_map(|dir| files_under(dir))
        .map(|(path, _)| path)
        .collect();
    assert!(
        written.is_empty(),
        "written into the user's build directories: {written:?}"
    );
}

/// A test that hands its process id to whoever reads the named pipe `pipe`, then runs
/// for five minutes.
fn waiting_test(pipe: &Path) -> String {
    format!(
        "import os, time\n\ndef test_waits():\n    with open({pipe:?}, \"w\") as f:\n        f.write(str(os.getpid()))\n    time.sleep(300)\n",
        pipe = pipe.display().to_string()
    )
}

#[test]
fn an_unconfined_runner_ends_with_a_tdd_killed_while_it_runs() {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[sandbox]\nenabled = false\n",
    );
    let outside = tempfile::tempdir().expect("temp dir");
    let pipe = outside.path().join("pid");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
    env.write("tests/test_wait.py", &waiting_test(&pipe));
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.commit_all("a test that waits");
    let mut tdd = env
        .tdd_std()
        .args(["--json", "test", "tests/test_wait.py::test_waits"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tdd starts");
    // The runner says who it is through the pipe: reading it waits for the test to run.
    let (sender, receiver) = std::sync::mpsc::channel();
    let reading = pipe.clone();
    std::thread::spawn(move || {
        let _ = sender.send(std::fs::read_to_string(&reading));
    });
    let said = receiver.recv_timeout(std::time::Duration::from_secs(300));
    let Ok(Ok(said)) = said else {
        let _ = tdd.kill();
        panic!("the test never said who it was: {said:?}");
    };
    let pid: i64 = said.trim().parse().expect("a process id");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the runner's record");
    let start: u64 = stat[stat.rfind(')').expect("a name") + 1..]
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .expect("a start time");
    assert!(tdd_testutil::alive(pid, start), "the runner is running");
    tdd.kill().expect("SIGKILL to tdd");
    let _ = tdd.wait();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while tdd_testutil::alive(pid, start) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let outlived = tdd_testutil::alive(pid, start);
    if outlived {
        let raw = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid"));
        let _ = nix::sys::signal::kill(raw, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(!outlived, "the runner outlived the tdd that started it");
}

/// A repository whose git directory lies in the work tree under another name
/// (`git init --separate-git-dir=<tree>/.gitdata`, `.git` a file naming it): test code
/// run there writes it no more than it writes `.git`.
#[test]
fn test_code_writes_no_git_directory_the_work_tree_holds_under_another_name() {
    if !tdd_sandbox::probe().confines() {
        return;
    }
    let env = Env::new();
    std::fs::rename(env.root().join(".git"), env.root().join(".gitdata")).expect("move");
    std::fs::write(env.root().join(".git"), "gitdir: .gitdata\n").expect("a .git file");
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    let hook = env.root().join(".gitdata/hooks/pre-commit");
    env.write(
        "tests/test_plant.py",
        &format!(
            "def test_plants_a_hook():\n    with open({hook:?}, \"w\") as f:\n        f.write(\"#!/bin/sh\\n\")\n",
            hook = hook.display().to_string()
        ),
    );
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n.gitdata/\n");
    env.commit_all("a test that plants a hook");
    let (code, value) = env.json(&["test", "tests/test_plant.py::test_plants_a_hook"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(status_of(&value), "failed_error", "{value}");
    assert!(!hook.exists(), "the test wrote git's hooks");
}
