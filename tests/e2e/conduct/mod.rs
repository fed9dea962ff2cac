//! `tdd conduct` and `tdd demo` end to end: real scripted leaves under the supervisor,
//! a real cargo suite, the local forge.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;

use crate::calc::IMPL;
use crate::calc::ISSUE_ONE;
use crate::calc::LIB;
use crate::calc::PLAN_ONE;
use crate::calc::STUB;
use crate::calc::TEST;
use crate::support::Env;

mod actions;
mod bails;
mod clone;
mod fleet;
mod github;
mod leases;
mod resume;
mod sandbox;
mod texts;
mod worktree;

const MARKER: &str = "DEVELOPER-LEAF-MARKER-3f9c";

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn subjects(dir: &Path) -> Vec<String> {
    git_in(dir, &["log", "--format=%s", "--reverse"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The commits the subtraction issue's one step lands, its plan first.
const STEP_ONE: [&str; 4] = [
    "plan: issue #1 Subtraction",
    "test: subtraction",
    "feat: subtraction",
    "refactor: subtraction",
];

/// Asserts that the run ended with the plan and step 1's three commits on top of the
/// project's own two, a clean tree, and src/lib.rs holding the demo's `LIB` + `body`.
fn assert_step_one_landed(env: &Env, body: &str) {
    let log = subjects(env.root());
    assert_eq!(log, [&["init", "calc"][..], &STEP_ONE].concat(), "{log:?}");
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{body}"));
}

fn read(path: &Value) -> String {
    std::fs::read_to_string(path.as_str().expect("a path")).expect("readable")
}

/// Every file named `name` in the directories of `dir` whose names contain `part`.
fn files_of(dir: &Path, part: &str, name: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(part))
        .filter_map(|e| std::fs::read_to_string(e.path().join(name)).ok())
        .collect()
}

/// The ledger directory behind a conduct envelope (`data.dir`, or `data.run.dir` on a
/// bail).
fn ledger_dir(value: &Value) -> PathBuf {
    let dir = value["data"]["dir"]
        .as_str()
        .or_else(|| value["data"]["run"]["dir"].as_str())
        .expect("dir");
    PathBuf::from(dir).join("../..")
}

/// The prompts of the leaves of `value`'s run whose ids contain `part`.
fn prompts(value: &Value, part: &str) -> Vec<String> {
    files_of(&ledger_dir(value).join("leaf-files"), part, "prompt.md")
}

#[test]
fn the_demo_completes_with_every_step_ticked_and_blind_verifiers() {
    let env = Env::bare();
    let dir = env.home.path().join("demo");
    let (code, value) = env.json(&["demo", "--keep", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{value}");
    let pr = read(&value["data"]["pr"]);
    for n in 1..=3 {
        assert!(pr.contains(&format!("- [x] Step {n}:")), "{pr}");
    }
    assert!(!pr.contains("- [ ] Step"), "{pr}");
    assert!(pr.contains("RED REJECT"), "{pr}");
    assert!(pr.contains("the engine reverted tests/mul.rs"), "{pr}");
    assert!(pr.contains(value["data"]["run_id"].as_str().expect("run id")));
    let log = subjects(&dir.join("calc"));
    let expected: Vec<String> = ["subtraction", "multiplication", "clamping"]
        .iter()
        .flat_map(|t| {
            [
                format!("test: {t}"),
                format!("feat: {t}"),
                format!("refactor: {t}"),
            ]
        })
        .collect();
    assert_eq!(log[2..], expected[..], "{log:?}");
    assert!(log[1].starts_with("plan: issue #1"), "{log:?}");
    // In the finished repository, `tdd status` says the issue is done.
    let out = env
        .tdd()
        .current_dir(dir.join("calc"))
        .args(["status", "--json"])
        .output()
        .expect("status");
    let status = crate::support::envelope(&out);
    assert_eq!(status["next_action"]["verb"], "complete", "{status}");
    assert!(
        status["next_action"]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("issue #1 is done")),
        "{status}"
    );
    // The cheat did not survive: the committed test is the strict one.
    let test = git_in(&dir.join("calc"), &["show", "HEAD:tests/mul.rs"]);
    assert!(test.contains("assert_eq!(calc::mul(3, 4), 12)"), "{test}");
    // Blindness: every developer leaf printed the marker; no verifier was told it.
    let ledger_dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"))
        .join("../..")
        .canonicalize()
        .expect("ledger dir");
    let developers = files_of(&ledger_dir.join("leaves"), "-developer-", "stdout.log");
    assert!(developers.len() >= 9, "{}", developers.len());
    assert!(developers.iter().all(|out| out.contains(MARKER)));
    let prompts = prompts(&value, "verifier-");
    assert!(prompts.len() >= 10, "{}", prompts.len());
    assert!(prompts.iter().all(|p| !p.contains(MARKER)));
    let thread = std::fs::read_to_string(
        PathBuf::from(value["data"]["dir"].as_str().expect("dir")).join("thread.md"),
    )
    .expect("thread");
    // The run comment, then one per step.
    assert_eq!(thread.matches("<!-- comment ").count(), 4, "{thread}");
    // Each step's comment names the chain head its last commit anchors.
    let anchors = git_in(
        &dir.join("calc"),
        &["log", "--format=%(trailers:key=TDD-Ledger,valueonly)"],
    );
    let heads: Vec<&str> = thread
        .lines()
        .filter_map(|l| l.strip_prefix("Ledger chain head at "))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    assert_eq!(heads.len(), 3, "{thread}");
    assert!(
        heads.iter().all(|h| anchors.lines().any(|a| a == *h)),
        "{heads:?} {anchors}"
    );
    assert_traced(&value);
}

#[test]
fn with_hooks_the_demos_locked_edit_is_denied_when_tried_not_reverted_at_the_gate() {
    // The same scripted developers, asking `tdd hook claude` before each write as
    // Claude Code would, from inside their confined leaves (through the relay).
    let env = Env::bare();
    let dir = env.home.path().join("demo");
    let (code, value) = env.json(&["demo", "--hooks", "--keep", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{value}");
    let pr = read(&value["data"]["pr"]);
    assert!(
        pr.contains(
            "- GREEN: the hook denied a write to tests/mul.rs before it happened (claude Write)"
        ),
        "{pr}"
    );
    assert!(!pr.contains("the engine reverted"), "{pr}");
    let ledger_dir = ledger_dir(&value);
    let green = files_of(
        &ledger_dir.join("leaves"),
        "-developer-i1-s2-green-",
        "stdout.log",
    );
    assert_eq!(green.len(), 1, "{green:?}");
    assert!(
        green[0].contains("the hook denied writing tests/mul.rs: `tests/mul.rs` is a test file"),
        "{}",
        green[0]
    );
    let test = git_in(&dir.join("calc"), &["show", "HEAD:tests/mul.rs"]);
    assert!(test.contains("assert_eq!(calc::mul(3, 4), 12)"), "{test}");
}

#[test]
fn the_demo_completes_in_a_real_users_environment() {
    // Not a cleared environment: a home with dotfiles, a shared cargo target directory
    // outside every repository (many Rust users set one), caches moved by XDG, and a
    // colour terminal. No leaf may be stopped by what these tell its tools to write.
    let env = Env::bare();
    let home = env.home.path().to_path_buf();
    let target = home.join("shared-target");
    let cache = home.join("xdg-cache");
    std::fs::create_dir_all(home.join(".config/git")).expect("config dir");
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = A User\n\temail = user@example.invalid\n[color]\n\tui = always\n[commit]\n\tverbose = true\n",
    )
    .expect("gitconfig");
    std::fs::write(home.join(".bashrc"), "export PS1='$ '\nalias ll='ls -l'\n").expect("bashrc");
    std::fs::write(home.join(".config/git/ignore"), "*.swp\n").expect("global ignore");
    let env = env
        .with_env("CARGO_TARGET_DIR", target.to_str().expect("utf-8"))
        .with_env("XDG_CACHE_HOME", cache.to_str().expect("utf-8"))
        .with_env("TERM", "xterm-256color")
        .with_env("COLORTERM", "truecolor")
        .with_env("CLICOLOR_FORCE", "1")
        .with_env("EDITOR", "vi");
    let dir = home.join("demo");
    let (code, value) = env.json(&["demo", "--keep", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["steps_done"], 3, "{value}");
    assert_eq!(value["data"]["steps"], 3, "{value}");
    // Every test a verifier ran itself ran for real: none was stopped by a build
    // directory its confinement does not grant.
    let out = env
        .tdd()
        .current_dir(dir.join("calc"))
        .args(["ledger", "export", "--json"])
        .output()
        .expect("export");
    let export = crate::support::envelope(&out);
    let verified: Vec<&Value> = export["data"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "test_observed")
        .filter(|e| {
            e["payload"]["leaf_id"]
                .as_str()
                .is_some_and(|l| l.starts_with("verifier-"))
        })
        .collect();
    assert!(!verified.is_empty(), "{export}");
    for event in verified {
        for target in event["payload"]["targets"].as_array().expect("targets") {
            let status = target["status"].as_str().unwrap_or_default();
            assert!(
                ["passed", "failed_assertion"].contains(&status),
                "a verifier's run did not run its target: {event}"
            );
        }
    }
    // The verifiers' scratch worktrees are gone, and so is the build output of their
    // runs: only the work tree the developers worked in keeps its own.
    let rooms = ledger_dir(&value).join("cleanroom");
    let kept: Vec<PathBuf> = std::fs::read_dir(&rooms)
        .expect("the clean rooms")
        .flatten()
        .map(|e| e.path().join("live-build"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
}

/// The run directory holds the trace as JSON lines, with a span for the conduct, each
/// step, phase, leaf, gate, verifier and suite run, tied to the ledger by the run id.
fn assert_traced(value: &Value) {
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let text = std::fs::read_to_string(dir.join("trace.jsonl")).expect("trace.jsonl");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let names: std::collections::BTreeSet<&str> = lines
        .iter()
        .flat_map(|l| l["spans"].as_array().into_iter().flatten())
        .filter_map(|s| s["name"].as_str())
        .collect();
    for name in [
        "conduct",
        "step",
        "phase",
        "leaf",
        "gate",
        "verify",
        "suite_run",
    ] {
        assert!(names.contains(name), "no {name} span in {names:?}");
    }
    let run_id = value["data"]["run_id"].as_str().expect("run id");
    let gates: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "gate decided")
        .collect();
    assert!(
        gates.len() >= 9,
        "one decision per phase at least: {}",
        gates.len()
    );
    assert!(
        gates.iter().all(|g| g["span"]["run_id"] == run_id),
        "{gates:?}"
    );
}

const CONFIG: &str = include_str!("../../../examples/demo/tdd.toml");

/// A one-criterion fixture: `planner` and `verifier` are the leaves' entries for those
/// roles; the developer's are fixed.
fn fixture(planner: &str, verifier: &str) -> String {
    format!(
        r#"version = 1
{planner}
[[leaf]]
role = "developer"
phase = "red"
[[leaf.do]]
action = "write"
path = "tests/sub.rs"
content = '''{TEST}'''
[[leaf.do]]
action = "write"
path = "src/lib.rs"
content = '''{LIB}{STUB}'''
[[leaf]]
role = "developer"
phase = "green"
[[leaf.do]]
action = "write"
path = "src/lib.rs"
content = '''{LIB}{IMPL}'''
[[leaf]]
role = "developer"
phase = "refactor"
[[leaf.do]]
action = "run"
argv = ["env", "-u", "TDD_LEAF_ID", "-u", "TDD_LEAF_TOKEN", "tdd", "status", "--json"]
{verifier}
"#
    )
}

fn good_planner(extra: &str) -> String {
    format!(
        "[[leaf]]\nrole = \"planner\"\n[[leaf.do]]\naction = \"write\"\npath = \".tdd/issue-1.md\"\ncontent = '''{PLAN_ONE}'''\n{extra}"
    )
}

const GOOD_VERIFIER: &str = r#"[[leaf]]
role = "verifier"
[[leaf.do]]
action = "run"
argv = ["tdd", "test", "app::calc::sub subtracts"]
[[leaf.do]]
action = "verdict"
decision = "accept"
reason = "ran it"
"#;

/// The calc crate with the demo's config pointing at `fixture`; returns the issue path.
fn project(env: &Env, fixture: &str) -> String {
    let fixture_path = env.home.path().join("fixture.toml");
    std::fs::write(&fixture_path, fixture).expect("fixture");
    let issue = env.home.path().join("issue-1.md");
    std::fs::write(&issue, ISSUE_ONE).expect("issue");
    crate::calc::write_crate(env);
    env.write(
        "tdd.toml",
        &CONFIG.replace("{fixture}", &fixture_path.display().to_string()),
    );
    env.commit_all("calc");
    issue.display().to_string()
}

/// Every file under `dir`, read as text (lossily).
pub(super) fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out
}

/// An environment whose leaves run as on a kernel without Landlock, for tests whose
/// leaf plays, on purpose, someone the sandbox would stop (a user starting a second
/// conductor, an outside process killing a supervisor, a verifier writing the real
/// tree): they check what catches such a leaf where no sandbox does.
fn unconfined_env() -> Env {
    Env::new().with_env("TDD_SANDBOX_NO_LANDLOCK", "1")
}

fn bail_of(value: &Value) -> (&str, &str) {
    (
        value["error"]["reason"].as_str().unwrap_or_default(),
        value["data"]["bail"]["class"].as_str().unwrap_or_default(),
    )
}

#[test]
fn a_verifier_that_writes_to_the_work_tree_halts_the_run() {
    let env = unconfined_env();
    let target = env.root().join("src/lib.rs").display().to_string();
    let verifier = format!(
        "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"write\"\npath = \"{target}\"\ncontent = \"tampered\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"x\"\n"
    );
    let issue = project(&env, &fixture(&good_planner(""), &verifier));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 4, "{value}");
    assert_eq!(bail_of(&value), ("verifier_modified_tree", "system"));
    assert_eq!(value["data"]["bail"]["step"], 1);
    // The half-done step is reset: only the plan is left on top of the base.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("plan: issue #1 Subtraction")
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let pr = read(&value["data"]["run"]["pr"]);
    assert!(pr.contains("verifier_modified_tree"), "{pr}");
}

#[test]
fn a_planner_that_writes_an_invalid_plan_twice_bails_plan_invalid() {
    let env = Env::new();
    let planner = "[[leaf]]\nrole = \"planner\"\n[[leaf.do]]\naction = \"write\"\npath = \".tdd/issue-1.md\"\ncontent = \"---\\ncycles:\\n  - n: 1\\n    title: no project\\n---\\n\"\n";
    let issue = project(&env, &fixture(planner, GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 4, "{value}");
    assert_eq!(bail_of(&value), ("plan_invalid", "process"));
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("calc")
    );
    assert!(!env.root().join(".tdd/issue-1.md").exists());
    // The second planner was told why the first plan was refused.
    let prompts = prompts(&value, "planner-i1-s0-plan-a2");
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0].contains("- ") && prompts[0].contains("project"),
        "{}",
        prompts[0]
    );
    assert!(!prompts[0].contains("(none: this is the first attempt)"));
    // Nothing of ours is left in the tree: a second conduct starts the issue anew (not
    // `dirty_tree`) and does not say it resumes what was never committed.
    let out = env
        .tdd()
        .args(["conduct", &issue, "--json"])
        .output()
        .expect("runs");
    let again: Value = serde_json::from_slice(&out.stdout).expect("envelope");
    assert_eq!(bail_of(&again), ("plan_invalid", "process"), "{again}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let started = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "conduct_started")
        .expect("a conduct_started event");
    assert_eq!(started["resumed"], false, "{started}");
    assert!(
        started["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("conducting issue #1")),
        "{started}"
    );
}

#[test]
fn a_stop_at_leaf_exits_5_and_a_second_conduct_finishes_the_issue() {
    stop_then_resume("at-leaf");
}

#[test]
fn a_stop_at_ledger_exits_5_and_a_second_conduct_finishes_the_issue() {
    stop_then_resume("at-ledger");
}

/// The planner requests a stop in `mode` (from inside the run, so no timing is
/// involved); the conductor stops before the next leaf, and a second `tdd conduct`
/// finishes the issue.
fn stop_then_resume(mode: &str) {
    let env = Env::new();
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"{mode}\"]\n"
    ));
    let issue = project(&env, &fixture(&planner, GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    assert_eq!(value["error"]["reason"], "stopped");
    assert_eq!(value["data"]["mode"], mode);
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["steps_done"], 1);
    let log = subjects(env.root());
    assert_eq!(log[2..], STEP_ONE);
    // While the REFACTOR leaf ran, `tdd status` (outside a leaf's identity) showed
    // the conductor's position.
    let ledger_dir = ledger_dir(&value);
    let out = files_of(
        &ledger_dir.join("leaves"),
        "-developer-i1-s1-refactor",
        "stdout.log",
    );
    let status: Value = serde_json::from_str(out[0].trim()).expect("an envelope");
    let conductor = &status["data"]["conductor"];
    assert_eq!(conductor["issue"], 1, "{status}");
    assert_eq!(conductor["step"], 1);
    assert_eq!(conductor["of"], 1);
    assert_eq!(conductor["phase"], "refactor");
    assert!(
        conductor["leaf"]
            .as_str()
            .is_some_and(|l| l.starts_with("developer-i1-s1-refactor"))
    );
    assert!(conductor["leaf_age_s"].is_u64());
}

#[test]
fn a_second_conductor_in_the_same_work_tree_is_refused_with_the_holders_pid() {
    let env = unconfined_env();
    let planner = good_planner(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"conduct\", \"--json\", \"ISSUE\"]\n",
    );
    let issue = project(&env, "");
    let fixture = fixture(&planner.replace("ISSUE", &issue), GOOD_VERIFIER);
    std::fs::write(env.home.path().join("fixture.toml"), fixture).expect("fixture");
    // The planner's own `tdd conduct` runs while the first conductor holds the lock.
    let (code, value) = env.json(&["conduct", &issue, "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    let ledger_dir = ledger_dir(&value);
    let out = files_of(&ledger_dir.join("leaves"), "-planner-", "stdout.log").join("\n");
    assert!(out.contains("conductor_running"), "{out}");
    assert!(out.contains("\"pid\":\""), "{out}");
}

#[test]
fn a_resume_with_another_binary_is_refused_unless_accepted() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue, "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    // The same program with one byte more is another binary.
    let other = env.home.path().join("other-bin").join("tdd");
    std::fs::create_dir_all(other.parent().expect("dir")).expect("mkdir");
    let mut bytes = std::fs::read(assert_cmd::cargo::cargo_bin("tdd")).expect("binary");
    bytes.push(b'\n');
    std::fs::write(&other, bytes).expect("copy");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let run = |extra: &[&str]| {
        let out = env
            .tdd_at(&other)
            .args(["conduct", &issue, "--json"])
            .args(extra)
            .output()
            .expect("runs");
        (crate::support::code(&out), crate::support::envelope(&out))
    };
    let (code, value) = run(&[]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "binary_changed");
    let (code, value) = run(&["--accept-new-binary"]);
    assert_eq!(code, 0, "{value}");
    let ledger = env.json(&["ledger", "path"]).1;
    let database = PathBuf::from(ledger["data"]["database"].as_str().expect("db"));
    let events = tdd_engine::ledger::Ledger::open_read_only(&database)
        .expect("open")
        .expect("exists")
        .events(None)
        .expect("events");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == "conduct_binary_accepted")
            .count(),
        1
    );
}

#[test]
fn a_detached_conductor_runs_on_under_its_supervisor_to_the_end() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue, "--detach"]);
    assert_eq!(code, 0, "{value}");
    let id = value["data"]["id"].as_str().expect("leaf id").to_string();
    let (code, waited) = env.json(&["wait", &id]);
    assert_eq!(code, 0, "the conductor did not finish cleanly: {waited}");
    let stdout =
        std::fs::read_to_string(value["data"]["stdout"].as_str().expect("stdout")).expect("log");
    let envelope: Value =
        serde_json::from_str(stdout.lines().last().expect("an envelope")).expect("json");
    assert_eq!(envelope["command"], "conduct");
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert!(
        subjects(env.root())
            .iter()
            .any(|s| s.starts_with("refactor:") || s.starts_with("feat:"))
    );
}

#[test]
fn a_detached_conductor_that_bails_says_why_in_words_to_wait_and_logs() {
    let env = Env::new();
    let planner = "[[leaf]]\nrole = \"planner\"\n[[leaf.do]]\naction = \"write\"\npath = \".tdd/issue-1.md\"\ncontent = \"---\\ncycles:\\n  - n: 1\\n    title: no project\\n---\\n\"\n";
    let issue = project(&env, &fixture(planner, GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue, "--detach"]);
    assert_eq!(code, 0, "{value}");
    let id = value["data"]["id"].as_str().expect("leaf id").to_string();
    // A machine gets the conductor's own envelope with the exit.
    let (code, waited) = env.json(&["wait", &id]);
    assert_eq!(code, 1, "{waited}");
    assert_eq!(waited["data"]["result"]["error"]["reason"], "plan_invalid");
    // A person gets how it ended and why, in words.
    let (code, text) = env.on_terminal(&["wait", &id]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(": exited with code 4\n"), "{text}");
    assert!(
        text.contains("`tdd conduct` failed: bailed (the agents could not do the work"),
        "{text}"
    );
    assert!(text.contains("hint: "), "{text}");
    // Its log reads as the conductor's lines of text, not NDJSON.
    let (code, text) = env.on_terminal(&["logs", &id]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("{\"event\""), "{text}");
    assert!(!text.contains("envelope_version"), "{text}");
    assert!(text.contains("conducting issue #1"), "{text}");
    assert!(text.contains("plan: invalid (attempt 1)"), "{text}");
    assert!(text.contains("`tdd conduct` failed: bailed"), "{text}");
    // The log itself keeps what the machine interface wrote.
    let stdout =
        std::fs::read_to_string(value["data"]["stdout"].as_str().expect("log")).expect("log");
    assert!(stdout.contains("envelope_version"), "{stdout}");
}

#[test]
fn a_detached_conductor_gets_every_option_it_was_given_global_ones_too() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let logs = |args: &[&str]| {
        let out = env
            .tdd()
            .current_dir(env.home.path())
            .args(args)
            .output()
            .expect("runs");
        let value: Value = serde_json::from_slice(&out.stdout).expect("envelope");
        assert_eq!(crate::support::code(&out), 0, "{value}");
        let id = value["data"]["id"].as_str().expect("leaf id").to_string();
        let (code, waited) = env.json(&["wait", &id]);
        assert_eq!(code, 0, "the conductor did not finish cleanly: {waited}");
        let read = |key: &str| {
            std::fs::read_to_string(value["data"][key].as_str().expect("log")).expect("log")
        };
        let stdout = read("stdout");
        let last: Value =
            serde_json::from_str(stdout.lines().last().expect("an envelope")).expect("json");
        (last, read("stderr"))
    };
    // Started elsewhere, with a relative `-C`, an issue path relative to it and a
    // global flag: each means in the background what it meant here.
    let name = |dir: &Path| {
        dir.file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned()
    };
    let repo = format!("../{}", name(env.root()));
    let relative = format!("../{}/{}", name(env.home.path()), name(Path::new(&issue)));
    let (envelope, stderr) = logs(&[
        "-C",
        &repo,
        "--quiet",
        "conduct",
        &relative,
        "--detach",
        "--max-steps",
        "0",
    ]);
    assert_eq!(envelope["command"], "conduct", "{envelope}");
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert_eq!(
        envelope["next_action"]["verb"], "resume_conduct",
        "{envelope}"
    );
    assert!(stderr.contains("conduct_started"), "{stderr}");
}

/// Starts `tdd conduct` with a planner that marks the file `.leaf-running` and then sleeps,
/// sends it `signals` SIGINTs once the planner runs, and returns its exit code and envelope.
fn interrupt(env: &Env, signals: usize) -> (i32, Value, String) {
    let marker = env.home.path().join("leaf-running");
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"write\"\npath = \"{}\"\ncontent = \"x\"\n\n[[leaf.do]]\naction = \"sleep\"\nms = 3000\n",
        marker.display()
    ));
    let issue = project(env, &fixture(&planner, GOOD_VERIFIER));
    let child = env
        .tdd_std()
        .args(["conduct", &issue, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("conductor starts");
    crate::leafsupport::wait_until("the planner leaf to run", || marker.exists());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let ledger_dir = PathBuf::from(
        env.json(&["ledger", "path"]).1["data"]["dir"]
            .as_str()
            .expect("dir"),
    );
    for n in 0..signals {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
        if n + 1 < signals {
            // Signals of one kind do not queue: wait until the first one was acted on.
            crate::leafsupport::wait_until("the first stop request", || {
                ledger_dir.join("stop.json").exists()
            });
        }
    }
    let out = child.wait_with_output().expect("conductor ends");
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), value, issue)
}

#[test]
fn ctrl_c_once_stops_at_leaf_and_twice_stops_now_then_resume_finishes() {
    for (signals, mode) in [(1, "at-leaf"), (2, "now")] {
        let env = unconfined_env();
        let (code, value, issue) = interrupt(&env, signals);
        assert_eq!(code, 5, "{signals} SIGINT: {value}");
        assert_eq!(value["data"]["mode"], mode, "{value}");
        let (code, value) = env.json(&["conduct", &issue]);
        assert_eq!(code, 0, "{value}");
        assert_eq!(value["data"]["steps_done"], 1);
    }
}

/// The conductor's own worktree of issue 1 beside `env`'s repository, removed when the
/// test ends (it lies outside every temporary directory the test owns).
struct Sibling(PathBuf);

impl Sibling {
    fn of(env: &Env) -> Sibling {
        let root = env.root().canonicalize().expect("canonical root");
        let name = root.file_name().expect("a name").to_string_lossy();
        Sibling(root.with_file_name(format!("{name}-tdd-issue-1")))
    }
}

impl Drop for Sibling {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `tdd conduct` and checks it bailed with `cause` of `class`, exit 4; returns
/// the envelope.
fn expect_bail(env: &Env, issue: &str, cause: &str, class: &str) -> Value {
    let (code, value) = env.json(&["conduct", issue]);
    assert_eq!(code, 4, "{value}");
    assert_eq!(bail_of(&value), (cause, class), "{value}");
    // The message says whose failure it is in words, not the class's name.
    let message = value["error"]["message"].as_str().unwrap_or_default();
    let words = if class == "process" {
        "the agents could not do the work"
    } else {
        "something outside the agents' work failed"
    };
    assert!(message.starts_with(&format!("bailed ({words}")), "{value}");
    assert!(
        !value["data"]["bail"]["action"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    value
}

#[test]
fn a_machinery_failure_says_what_the_conductor_was_doing() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    std::os::unix::fs::symlink("/etc/hostname", env.root().join("host")).expect("link");
    env.commit_all("a link out of the repository");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "link_outside_tree", "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        "while starting the engine run and its baseline: host is a symlink to /etc/hostname, \
         outside the repository",
    );
}
