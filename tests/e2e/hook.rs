//! `tdd hook`: an agent CLI's PreToolUse hook answered from the run's locks, driven as
//! Claude Code and Codex drive it (the event on stdin, the decision on stdout, exit 2
//! a block).

use serde_json::Value;
use serde_json::json;

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n";
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n---\n";
const TEST: &str = "from calc import sub\n\ndef test_sub():\n    assert sub(5, 2) == 3\n";

/// A pytest project whose run is in RED (no test for the cycle yet; `sub` a stub).
pub(crate) fn in_red() -> Env {
    let env = Env::new();
    env.pytest_calc(crate::engine_green_runs::LOCKS, PLAN);
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    raise NotImplementedError\n"),
    );
    env.commit_all("calc");
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env
}

/// A pytest project whose run is in GREEN (the failing test committed).
pub(crate) fn in_green() -> Env {
    let env = in_red();
    env.write("tests/test_sub.py", TEST);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    env
}

/// Runs `tdd hook HARNESS pre-tool-use` with `event` on stdin: the exit code, stdout
/// and stderr.
fn hook(env: &Env, harness: &str, event: &Value) -> (i32, String, String) {
    hook_on(env, harness, "pre-tool-use", event)
}

/// Runs `tdd hook HARNESS post-tool-use` with `event` on stdin.
fn after(env: &Env, harness: &str, event: &Value) -> (i32, String, String) {
    hook_on(env, harness, "post-tool-use", event)
}

/// Runs `tdd hook HARNESS HOOK_EVENT` with `event` on stdin: the exit code, stdout and
/// stderr.
fn hook_on(env: &Env, harness: &str, hook_event: &str, event: &Value) -> (i32, String, String) {
    let out = env
        .tdd()
        .args(["hook", harness, hook_event])
        .write_stdin(event.to_string())
        .output()
        .expect("tdd runs");
    (
        crate::support::code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tool(env: &Env, name: &str, input: Value) -> Value {
    json!({
        "session_id": "s", "hook_event_name": "PreToolUse", "tool_name": name,
        "tool_input": input, "cwd": env.root(),
    })
}

/// The reason of a denial, or `None` when the answer lets the call run.
fn denied(answer: &(i32, String, String)) -> Option<String> {
    assert_eq!(answer.0, 0, "a decision exits 0: {answer:?}");
    if answer.1.trim().is_empty() {
        return None;
    }
    let value: Value = serde_json::from_str(&answer.1).expect("the answer is JSON");
    assert_eq!(value["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(value["hookSpecificOutput"]["permissionDecision"], "deny");
    value["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .map(str::to_string)
}

/// Claude Code's answer to a `Write` of `path`: the denial's reason, or `None`.
fn write(env: &Env, path: impl serde::Serialize) -> Option<String> {
    let input = json!({ "file_path": path, "content": "x" });
    denied(&hook(env, "claude", &tool(env, "Write", input)))
}

#[test]
fn in_green_a_write_to_the_locked_test_is_denied_with_the_lock_and_what_to_do() {
    let env = in_green();
    let test = env.root().join("tests/test_sub.py");
    let reason = write(&env, &test).expect("denied");
    assert!(reason.contains("tests/test_sub.py"), "{reason}");
    assert!(reason.contains("a test file"), "{reason}");
    assert!(reason.contains("GREEN"), "{reason}");
    assert!(reason.contains("make the target pass"), "{reason}");
    // The implementation is GREEN's to write.
    let lib = env.root().join("calc.py");
    assert_eq!(
        denied(&hook(
            &env,
            "claude",
            &tool(
                &env,
                "Edit",
                json!({ "file_path": lib, "old_string": "a", "new_string": "b" })
            )
        )),
        None
    );
    // A relative path, taken from the event's cwd.
    assert!(write(&env, "tests/../tests/test_sub.py").is_some());
    // Through a link to the tests' directory, it is still the test.
    std::os::unix::fs::symlink(env.root().join("tests"), env.root().join("tlink")).expect("link");
    assert!(write(&env, "tlink/test_sub.py").is_some());
    // A harness file is locked in every phase.
    assert!(write(&env, "pytest.ini").is_some());
    // Reads write nothing.
    assert_eq!(
        denied(&hook(
            &env,
            "claude",
            &tool(&env, "Read", json!({ "file_path": test }))
        )),
        None
    );
    // Nothing was written by any of this.
    assert_eq!(std::fs::read_to_string(&test).expect("test"), TEST);
    // Each denial is in the ledger, on the cycle, and the run report shows them.
    let (_, export) = env.json(&["ledger", "export"]);
    let denials: Vec<&Value> = export["data"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "hook_denied")
        .collect();
    assert_eq!(denials.len(), 4, "{export}");
    assert_eq!(denials[0]["payload"]["n"], 1);
    assert_eq!(denials[0]["payload"]["harness"], "claude");
    assert_eq!(denials[0]["payload"]["tool"], "Write");
    assert_eq!(denials[0]["payload"]["paths"], json!(["tests/test_sub.py"]));
    let (code, report) = env.json(&["report"]);
    assert_eq!(code, 0, "{report}");
    let marks = report["data"]["report"]["marks"].to_string();
    assert_eq!(marks.matches("hook_denied").count(), 4, "{report}");
}

#[test]
fn shell_writes_and_patches_to_a_locked_test_are_denied() {
    let env = in_green();
    for line in [
        "sed -i 's/3/2/' tests/test_sub.py",
        "echo 'def test_sub(): pass' > tests/test_sub.py",
        "bash -c 'cat /dev/null | tee tests/test_sub.py'",
        "python3 -c \"open('tests/test_sub.py','w').write('')\"",
        "node -e \"require('fs').writeFileSync('tests/test_sub.py','')\"",
        "dd if=/dev/null of=tests/test_sub.py",
        "cp /dev/null tests/test_sub.py",
        "(sleep 1; rm tests/test_sub.py) &",
    ] {
        let answer = hook(
            &env,
            "claude",
            &tool(&env, "Bash", json!({ "command": line })),
        );
        assert!(denied(&answer).is_some(), "{line}: {answer:?}");
    }
    let answer = hook(
        &env,
        "claude",
        &tool(&env, "Bash", json!({ "command": "python3 -m pytest -q" })),
    );
    assert_eq!(denied(&answer), None);
    // Codex: every file of a patch is checked, one locked file is enough.
    let patch = "*** Begin Patch\n*** Update File: calc.py\n@@\n-a\n+b\n*** Update File: tests/test_sub.py\n@@\n-3\n+2\n*** End Patch\n";
    let answer = hook(
        &env,
        "codex",
        &tool(&env, "apply_patch", json!({ "command": patch })),
    );
    assert!(
        denied(&answer)
            .expect("denied")
            .contains("tests/test_sub.py")
    );
}

#[test]
fn git_internals_and_the_agents_settings_are_never_written() {
    let env = in_green();
    for path in [".git/hooks/pre-commit", ".claude/settings.json"] {
        assert!(write(&env, path).is_some(), "{path}");
    }
}

#[test]
fn the_hook_fails_closed_when_it_cannot_tell() {
    let env = in_green();
    // Not an event: blocked (exit 2), with the reason on stderr.
    let out = env
        .tdd()
        .args(["hook", "claude", "pre-tool-use"])
        .write_stdin("not json")
        .output()
        .expect("tdd runs");
    assert_eq!(crate::support::code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("blocked"), "{stderr}");
    // A ledger that fails verification: blocked, not let through.
    let (code, value) = env.json(&["ledger", "path"]);
    assert_eq!(code, 0, "{value}");
    let database = value["data"]["database"]
        .as_str()
        .expect("path")
        .to_string();
    let conn = rusqlite::Connection::open(&database).expect("open");
    conn.execute_batch(
        "DROP TRIGGER events_no_update; UPDATE events SET payload = '{}' WHERE id = 2;",
    )
    .expect("tamper");
    let lib = env.root().join("calc.py");
    let answer = hook(
        &env,
        "claude",
        &tool(&env, "Write", json!({ "file_path": lib, "content": "x" })),
    );
    assert_eq!(answer.0, 2, "{answer:?}");
    assert!(answer.2.contains("ledger"), "{answer:?}");
    // A harness it does not know is a usage error, which blocks too.
    let answer = hook(
        &env,
        "clude",
        &tool(&env, "Write", json!({ "file_path": lib })),
    );
    assert_eq!(answer.0, 2, "{answer:?}");
}

#[test]
fn with_no_run_nothing_is_locked_but_git_internals() {
    let env = Env::new();
    env.pytest_calc(crate::engine_green_runs::LOCKS, PLAN);
    env.commit_all("calc");
    assert_eq!(write(&env, env.root().join("tests/test_sub.py")), None);
    assert!(write(&env, ".git/config").is_some());
    // After a shell command with no run there is nothing to restore, and nothing said.
    let shell = tool(
        &env,
        "Bash",
        json!({ "command": "echo x > tests/test_sub.py" }),
    );
    let (code, stdout, stderr) = after(&env, "claude", &shell);
    assert_eq!((code, stdout.trim()), (0, ""), "{stderr}");
}

/// Runs `tdd hook HARNESS session-start` with a start event: exit code and stdout.
fn session_start(env: &Env, harness: &str) -> (i32, String) {
    let out = env
        .tdd()
        .args(["hook", harness, "session-start"])
        .write_stdin(r#"{"session_id":"s1","hook_event_name":"SessionStart","source":"startup"}"#)
        .output()
        .expect("tdd runs");
    (
        crate::support::code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_session_that_starts_in_green_is_told_the_cycle_its_target_and_what_is_locked() {
    let env = Env::new();
    // No run: nothing to say.
    assert_eq!(session_start(&env, "claude"), (0, String::new()));
    let env = in_green();
    for harness in ["claude", "codex"] {
        let (code, stdout) = session_start(&env, harness);
        assert_eq!(code, 0, "{stdout}");
        let answer: Value = serde_json::from_str(&stdout).expect("json");
        assert_eq!(
            answer["hookSpecificOutput"]["hookEventName"],
            "SessionStart"
        );
        let context = answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .expect("context");
        for said in [
            "cycle 1 of",
            "is in GREEN",
            "tests/test_sub.py::test_sub",
            "test files",
            "tdd test ",
            "tdd advance",
        ] {
            assert!(context.contains(said), "{said} not in: {context}");
        }
    }
}

#[test]
fn a_shell_command_that_changed_a_locked_test_is_undone_right_after_and_the_agent_told() {
    let env = in_green();
    let test = env.root().join("tests/test_sub.py");
    // A write no reader of the command line could see ahead: the bytes come from a
    // variable, the name from a glob. It ran; then the hook's second half.
    std::fs::write(&test, "def test_sub():\n    assert True\n").expect("weakened");
    std::fs::write(
        env.root().join("tests/test_extra.py"),
        "def test_x():\n    pass\n",
    )
    .expect("planted");
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a - b\n"),
    );
    let event = json!({
        "session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": { "command": "python3 gen.py" }, "tool_use_id": "t1",
        "tool_response": { "stdout": "" }, "cwd": env.root(),
    });
    let (code, stdout, stderr) = after(&env, "claude", &event);
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).expect("the answer is JSON");
    assert_eq!(answer["decision"], "block", "{answer}");
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    let reason = answer["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("restored tests/test_sub.py")
            && reason.contains("removed tests/test_extra.py"),
        "{reason}"
    );
    // The locked test is the committed one again, the planted one gone, and the
    // implementation (GREEN's to write) kept.
    assert_eq!(std::fs::read_to_string(&test).expect("test"), TEST);
    assert!(!env.root().join("tests/test_extra.py").exists());
    assert!(
        std::fs::read_to_string(env.root().join("calc.py"))
            .expect("calc.py")
            .contains("return a - b")
    );
    // Recorded for the report: the run's log shows the hook's revert.
    let (_, report) = env.json(&["report"]);
    assert!(
        report
            .to_string()
            .contains("the hook restored them right after it ran"),
        "{report}"
    );
    // Nothing changed: nothing said. A tool that is no shell is left to its pre-check.
    let (code, stdout, _) = after(&env, "claude", &event);
    assert_eq!((code, stdout.trim()), (0, ""));
    let write = json!({
        "session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Write",
        "tool_input": { "file_path": test, "content": "x" }, "cwd": env.root(),
    });
    std::fs::write(&test, "x").expect("write");
    let (code, stdout, _) = after(&env, "claude", &write);
    assert_eq!((code, stdout.trim()), (0, ""));
}

/// `tdd hook HARNESS stop` as the CLI sends it: the parsed answer, or `None` when the
/// turn may end.
fn stop(env: &Env, harness: &str) -> Option<Value> {
    let event = json!({
        "session_id": "s", "hook_event_name": "Stop", "stop_hook_active": false,
        "cwd": env.root(),
    });
    let (code, stdout, stderr) = hook_on(env, harness, "stop", &event);
    assert_eq!(code, 0, "{stderr}");
    (!stdout.trim().is_empty()).then(|| serde_json::from_str(&stdout).expect("JSON"))
}

#[test]
fn in_green_the_turn_does_not_end_while_the_target_fails_and_never_more_than_three_times() {
    let env = in_green();
    // The target runs now and fails: the turn goes on, told what the gate wants.
    let kept = stop(&env, "claude").expect("kept going");
    assert_eq!(kept["decision"], "block", "{kept}");
    let reason = kept["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("tests/test_sub.py::test_sub")
            && reason.contains("GREEN wants it to pass")
            && reason.contains("tdd advance"),
        "{reason}"
    );
    assert!(stop(&env, "codex").is_some());
    assert!(stop(&env, "claude").is_some());
    // Three in a row: the fourth ends the turn, and the run says so.
    assert_eq!(stop(&env, "claude"), None);
    let (_, log) = env.json(&["log", "render"]);
    assert!(
        log.to_string()
            .contains("refusing it 3 times in a row in GREEN"),
        "{log}"
    );
    // The count starts again after that.
    assert!(stop(&env, "claude").is_some());
    // With the behaviour implemented the target passes: the turn may end.
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a - b\n"),
    );
    assert_eq!(stop(&env, "claude"), None);
}

#[test]
fn in_red_the_turn_does_not_end_before_the_target_fails_on_an_assertion() {
    let env = in_red();
    // No test yet: the target is not found.
    let kept = stop(&env, "claude").expect("kept going");
    let reason = kept["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("is not_found") && reason.contains("RED wants it to fail on an assertion"),
        "{reason}"
    );
    // The failing test written, with the stub in place: the gate would accept RED.
    env.write("tests/test_sub.py", TEST);
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return 0\n"),
    );
    assert_eq!(stop(&env, "claude"), None);
}

/// Gemini CLI and Copilot CLI are answered in their own formats: a locked write denied
/// before it runs (Gemini's `write_file` and shell; Copilot's `edit` with its arguments
/// as a string of JSON, and its shell), the end of a turn in GREEN refused, a session
/// told its assignment; `tdd init --hooks` wires both, and doctor says so.
#[test]
fn gemini_and_copilot_are_denied_a_locked_write_and_kept_going_in_their_own_formats() {
    let env = in_green();
    let test = env.root().join("tests/test_sub.py");
    let answer = |harness: &str, hook_event: &str, event: Value| -> Value {
        let (code, stdout, stderr) = hook_on(&env, harness, hook_event, &event);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str(&stdout).unwrap_or(Value::Null)
    };
    // Gemini CLI: `decision: deny` with the reason.
    let gemini = |name: &str, input: Value| {
        json!({ "session_id": "s", "hook_event_name": "BeforeTool", "tool_name": name,
                "tool_input": input, "cwd": env.root() })
    };
    let denied = answer(
        "gemini",
        "pre-tool-use",
        gemini("write_file", json!({ "file_path": test, "content": "x" })),
    );
    assert_eq!(denied["decision"], "deny", "{denied}");
    assert!(
        denied["reason"]
            .as_str()
            .is_some_and(|r| r.contains("tests/test_sub.py") && r.contains("GREEN")),
        "{denied}"
    );
    let shell = gemini(
        "run_shell_command",
        json!({ "command": "sed -i s/3/4/ tests/test_sub.py" }),
    );
    assert_eq!(answer("gemini", "pre-tool-use", shell)["decision"], "deny");
    // The implementation is GREEN's to write: nothing is said.
    let lib = gemini(
        "replace",
        json!({ "file_path": env.root().join("calc.py"), "old_string": "a", "new_string": "b" }),
    );
    assert_eq!(answer("gemini", "pre-tool-use", lib), Value::Null);
    // Copilot CLI: `toolName`, `toolArgs` as a string of JSON; `permissionDecision`.
    let copilot = |name: &str, args: Value| {
        json!({ "timestamp": 1_704_614_600_000_u64, "cwd": env.root(), "toolName": name,
                "toolArgs": args.to_string() })
    };
    let denied = answer(
        "copilot",
        "pre-tool-use",
        copilot(
            "edit",
            json!({ "path": test, "old_str": "3", "new_str": "4" }),
        ),
    );
    assert_eq!(denied["permissionDecision"], "deny", "{denied}");
    assert!(
        denied["permissionDecisionReason"]
            .as_str()
            .is_some_and(|r| r.contains("tests/test_sub.py")),
        "{denied}"
    );
    let shell = copilot("bash", json!({ "command": "echo x > tests/test_sub.py" }));
    assert_eq!(
        answer("copilot", "pre-tool-use", shell)["permissionDecision"],
        "deny"
    );
    // Arguments that are not JSON: it cannot tell, so it blocks (exit 2).
    let (code, _, stderr) = hook_on(
        &env,
        "copilot",
        "pre-tool-use",
        &json!({ "cwd": env.root(), "toolName": "edit", "toolArgs": "{not json" }),
    );
    assert_eq!(code, 2, "{stderr}");
    // Nothing was written by any of this, and each denial is in the ledger by harness.
    assert_eq!(std::fs::read_to_string(&test).expect("test"), TEST);
    let (_, export) = env.json(&["ledger", "export"]);
    let harnesses: Vec<&str> = export["data"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "hook_denied")
        .filter_map(|e| e["payload"]["harness"].as_str())
        .collect();
    assert_eq!(harnesses, ["gemini", "gemini", "copilot", "copilot"]);
    // The end of a turn in GREEN with the target failing: Gemini's `AfterAgent` is
    // denied (the agent goes on), Copilot's `agentStop` blocked with the next prompt.
    let stop = json!({ "cwd": env.root(), "stop_hook_active": false });
    assert_eq!(answer("gemini", "stop", stop.clone())["decision"], "deny");
    let kept = answer("copilot", "stop", stop);
    assert_eq!(kept["decision"], "block", "{kept}");
    assert!(
        kept["reason"]
            .as_str()
            .is_some_and(|r| r.contains("tdd advance"))
    );
    // A session is told its assignment.
    let start = json!({ "cwd": env.root(), "source": "new" });
    let told = answer("copilot", "session-start", start.clone());
    assert!(
        told["additionalContext"]
            .as_str()
            .is_some_and(|c| c.contains("GREEN")),
        "{told}"
    );
    let told = answer("gemini", "session-start", start);
    assert!(
        told["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .is_some_and(|c| c.contains("GREEN")),
        "{told}"
    );
}

#[test]
fn init_hooks_wires_gemini_and_copilot_and_their_files_are_protected() {
    let env = crate::init::cargo_app();
    let (code, value) = env.json(&["init", "--hooks", "gemini,copilot"]);
    assert_eq!(code, 0, "{value}");
    let read = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(env.root().join(path)).expect(path))
            .expect("json")
    };
    let gemini = read(".gemini/settings.json");
    for (event, command) in [
        ("BeforeTool", "tdd hook gemini pre-tool-use"),
        ("AfterTool", "tdd hook gemini post-tool-use"),
        ("AfterAgent", "tdd hook gemini stop"),
        ("SessionStart", "tdd hook gemini session-start"),
    ] {
        assert_eq!(
            gemini["hooks"][event][0]["hooks"][0]["command"], command,
            "{gemini}"
        );
    }
    assert_eq!(
        gemini["hooks"]["BeforeTool"][0]["matcher"],
        "^(write_file|replace|run_shell_command)$"
    );
    let copilot = read(".github/hooks/tdd.json");
    assert_eq!(copilot["version"], 1, "{copilot}");
    for (event, command) in [
        ("preToolUse", "tdd hook copilot pre-tool-use"),
        ("postToolUse", "tdd hook copilot post-tool-use"),
        ("agentStop", "tdd hook copilot stop"),
        ("sessionStart", "tdd hook copilot session-start"),
    ] {
        assert_eq!(copilot["hooks"][event][0]["bash"], command, "{copilot}");
        assert_eq!(copilot["hooks"][event][0]["type"], "command");
    }
    // Once: a second run changes nothing.
    let (code, value) = env.json(&["init", "--hooks", "gemini,copilot"]);
    assert_eq!(code, 0, "{value}");
    assert!(
        value["data"]["hooks"]
            .as_array()
            .expect("hooks")
            .iter()
            .all(|h| h["changed"] == false),
        "{value}"
    );
    let (_, doctor) = env.json(&["doctor"]);
    let checks = doctor["data"]["checks"].to_string();
    assert!(
        checks.contains("hooks.gemini") && checks.contains("hooks.copilot"),
        "{doctor}"
    );
    // No agent rewrites the hooks that guard it, whatever the phase.
    for path in [".gemini/settings.json", ".github/hooks/tdd.json"] {
        let (code, stdout, stderr) = hook_on(
            &env,
            "gemini",
            "pre-tool-use",
            &json!({ "tool_name": "write_file", "tool_input": { "file_path": path, "content": "{}" },
                     "cwd": env.root() }),
        );
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("\"decision\":\"deny\""), "{path}: {stdout}");
    }
}

/// `tdd hook <harness> selftest` runs the command each harness's settings wire, as the
/// harness would, fed a write to git's internals: blocked in every harness's format by
/// the real `tdd` on `PATH`, and a failure when the `tdd` there lets it through.
#[test]
fn the_selftest_proves_the_wired_hook_blocks_and_fails_when_it_does_not() {
    let env = crate::init::cargo_app();
    let (code, value) = env.json(&["init", "--hooks", "claude,codex,gemini,copilot"]);
    assert_eq!(code, 0, "{value}");
    let bin = assert_cmd::cargo::cargo_bin("tdd");
    let path_with = |dir: &std::path::Path| {
        format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    };
    let real = path_with(bin.parent().expect("bin dir"));
    let selftest = |harness: &str, path: &str| {
        let out = env
            .tdd()
            .env("PATH", path)
            .args(["hook", harness, "selftest", "--json"])
            .output()
            .expect("tdd runs");
        (crate::support::code(&out), crate::support::envelope(&out))
    };
    for harness in ["claude", "codex", "gemini", "copilot"] {
        let (code, value) = selftest(harness, &real);
        assert_eq!(code, 0, "{harness}: {value}");
        assert_eq!(value["data"]["blocked"], true, "{value}");
        assert!(
            value["data"]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("git's own state")),
            "{value}"
        );
    }
    // The user's ledger is not touched: the self-test runs in a scratch repository.
    assert!(
        std::fs::read_dir(env.ledger_home.path())
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
    // doctor runs it for each wired harness.
    let out = env
        .tdd()
        .env("PATH", &real)
        .args(["doctor", "--json"])
        .output()
        .expect("doctor");
    let checks = crate::support::envelope(&out)["data"]["checks"].clone();
    for harness in ["claude", "codex", "gemini", "copilot"] {
        let check = checks
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["check"] == format!("hooks.{harness}"))
            .unwrap_or_else(|| panic!("hooks.{harness}: {checks}"));
        assert_eq!(check["ok"], true, "{check}");
    }
    // A `tdd` on the harness's PATH that answers nothing: the self-test fails.
    let fake = env.home.path().join("fake-bin");
    std::fs::create_dir_all(&fake).expect("dir");
    let script = fake.join("tdd");
    std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\nexit 0\n").expect("script");
    let mut perms = std::fs::metadata(&script).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    let (code, value) = selftest("claude", &path_with(&fake));
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "hook_selftest_failed", "{value}");
    // A wired line with more than tdd's own in it is reported, never run: the settings
    // are the repository's.
    let marker = env.home.path().join("ran");
    let settings = json!({ "hooks": { "PreToolUse": [{ "matcher": "Write", "hooks": [{
        "type": "command",
        "command": format!("tdd hook claude pre-tool-use; touch {}", marker.display()),
    }]}]}});
    env.write(".claude/settings.json", &settings.to_string());
    let (code, value) = selftest("claude", &real);
    assert_eq!(code, 1, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not run")),
        "{value}"
    );
    assert!(!marker.exists());
}

/// The self-test's second half runs the harness's own CLI, found on `PATH`, against a
/// scripted model on loopback: a CLI that lets the scripted write into `.git` through,
/// or never tells the model it was blocked, fails the self-test naming it, though the
/// wiring passed. (The real Claude Code and Codex pass it: `real_clis::hooks`.)
#[test]
fn a_harness_cli_that_does_not_heed_the_hook_fails_the_selftest() {
    let env = crate::init::cargo_app();
    let (code, value) = env.json(&["init", "--hooks", "claude"]);
    assert_eq!(code, 0, "{value}");
    let bin = assert_cmd::cargo::cargo_bin("tdd");
    let stand_ins = tempfile::tempdir().expect("stand-ins");
    for (body, says) in [
        (
            "echo x > .git/tdd-selftest",
            "let its Write tool write .git/tdd-selftest",
        ),
        (":", "never told the model of a blocked write"),
    ] {
        let claude = stand_ins.path().join("claude");
        std::fs::write(
            &claude,
            format!("#!/bin/sh\nif [ \"$1\" = --version ]; then echo '9.9.9 (stand-in)'; exit 0; fi\n{body}\n"),
        )
        .expect("stand-in");
        std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("executable");
        let path = format!(
            "{}:{}:{}",
            stand_ins.path().display(),
            bin.parent().expect("bin dir").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = env
            .tdd()
            .env("PATH", &path)
            .args(["hook", "claude", "selftest", "--json"])
            .output()
            .expect("tdd runs");
        let value = crate::support::envelope(&out);
        assert_eq!(crate::support::code(&out), 1, "{value}");
        assert_eq!(value["error"]["reason"], "hook_selftest_failed", "{value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("9.9.9 (stand-in)") && message.contains(says),
            "{value}"
        );
        assert_eq!(value["data"]["blocked"], true, "the wiring passed: {value}");
        assert_eq!(value["data"]["cli"]["blocked"], false, "{value}");
        // doctor runs it too, and fails the harness's check.
        let out = env
            .tdd()
            .env("PATH", &path)
            .args(["doctor", "--json"])
            .output()
            .expect("doctor");
        let checks = crate::support::envelope(&out)["data"]["checks"].clone();
        let check = checks
            .as_array()
            .and_then(|c| c.iter().find(|c| c["check"] == "hooks.claude"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(check["ok"], false, "{checks}");
        assert!(check.to_string().contains(says), "{check}");
    }
}

/// The hook reads the open cycle from its last check while the ledger is unchanged:
/// a phase that moved, or a ledger edited in place with its size and times put back,
/// is checked again (the change time is the kernel's), so the answer follows the
/// ledger and a tampered one still blocks.
#[test]
fn the_hooks_last_check_is_used_only_while_the_ledger_is_unchanged() {
    let env = in_red();
    let lib = env.root().join("calc.py");
    let write_lib = || {
        hook(
            &env,
            "claude",
            &tool(&env, "Write", json!({ "file_path": lib, "content": "x" })),
        )
    };
    let test = env.root().join("tests/test_sub.py");
    let write_test = || {
        hook(
            &env,
            "claude",
            &tool(&env, "Write", json!({ "file_path": test, "content": "x" })),
        )
    };
    // RED: the test is the agent's to write.
    assert_eq!(denied(&write_test()), None);
    env.write("tests/test_sub.py", TEST);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    // GREEN: it is locked, and the implementation is not; asking again says the same.
    assert!(denied(&write_test()).is_some());
    assert_eq!(denied(&write_lib()), None);
    // A call on a ledger nothing wrote since the last reads what that call kept: the
    // kept file is not written again (a check made again would replace it).
    let (_, value) = env.json(&["ledger", "path"]);
    let database = std::path::PathBuf::from(value["data"]["database"].as_str().expect("path"));
    let kept = database.with_file_name("hook-glance.json");
    let inode = |path: &std::path::Path| {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).expect("kept"))
    };
    let first = inode(&kept);
    assert_eq!(denied(&write_lib()), None);
    assert_eq!(inode(&kept), first, "the last check was made again");
    // The database edited in place, byte for byte the same length, its times put back.
    let before = std::fs::metadata(&database).expect("database");
    let mut bytes = std::fs::read(&database).expect("read");
    let title = b"subtraction";
    let mut edited = 0;
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(title.len()).position(|w| w == title) {
        let end = at + found + title.len();
        bytes[end - 1] = b'X';
        at = end;
        edited += 1;
    }
    assert!(edited > 0, "the plan's title is in the ledger");
    std::fs::write(&database, &bytes).expect("edit in place");
    let mtime = format!(
        "@{}.{:09}",
        std::os::unix::fs::MetadataExt::mtime(&before),
        std::os::unix::fs::MetadataExt::mtime_nsec(&before)
    );
    let touched = std::process::Command::new("touch")
        .args(["-m", "-d", &mtime])
        .arg(&database)
        .status()
        .expect("touch");
    assert!(touched.success());
    let after = std::fs::metadata(&database).expect("database");
    assert_eq!(
        (after.len(), after.modified().ok()),
        (before.len(), before.modified().ok())
    );
    let answer = write_lib();
    assert_eq!(answer.0, 2, "{answer:?}");
    assert!(answer.2.contains("ledger"), "{answer:?}");
}

/// The `hook_denied` events of `env`'s ledger: (cycle, phase) of each.
fn denials(env: &Env) -> Vec<(Value, Value)> {
    let (_, value) = env.json(&["ledger", "path"]);
    let database = std::path::PathBuf::from(value["data"]["database"].as_str().expect("path"));
    let ledger = tdd_engine::ledger::Ledger::open_read_only(&database)
        .expect("ledger")
        .expect("a ledger");
    ledger
        .events_of_kind(None, "hook_denied")
        .expect("events")
        .into_iter()
        .map(|e| (e.payload["n"].clone(), e.payload["phase"].clone()))
        .collect()
}

#[test]
fn denials_in_a_row_are_recorded_on_the_checked_chain_and_a_ledger_written_meanwhile_is_checked_again()
 {
    let env = in_green();
    let test = env.root().join("tests/test_sub.py");
    let write_test = || {
        hook(
            &env,
            "claude",
            &tool(&env, "Write", json!({ "file_path": test, "content": "x" })),
        )
    };
    for _ in 0..3 {
        assert!(denied(&write_test()).is_some());
    }
    // Another write to the ledger between two denials: the next one checks again.
    let (code, value) = env.json(&["note", "between two denials"]);
    assert_eq!(code, 0, "{value}");
    assert!(denied(&write_test()).is_some());
    assert_eq!(denials(&env), vec![(json!(1), json!("green")); 4]);
    let (code, value) = env.json(&["ledger", "verify"]);
    assert_eq!(code, 0, "{value}");
}

/// The CLI the self-test runs gets nothing of the caller's environment but `PATH`: no
/// token, no relay address, not the caller's home; its key is a placeholder for the
/// loopback model.
#[test]
fn the_selftests_cli_sees_no_token_relay_or_home_of_the_caller() {
    let env = crate::init::cargo_app();
    let (code, value) = env.json(&["init", "--hooks", "claude"]);
    assert_eq!(code, 0, "{value}");
    let bin = assert_cmd::cargo::cargo_bin("tdd");
    let stand_ins = tempfile::tempdir().expect("stand-ins");
    let seen = stand_ins.path().join("seen-env");
    let claude = stand_ins.path().join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '9.9.9 (stand-in)'; exit 0; fi\nenv > '{}'\n",
            seen.display()
        ),
    )
    .expect("stand-in");
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("executable");
    let path = format!(
        "{}:{}:{}",
        stand_ins.path().display(),
        bin.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = env
        .tdd()
        .env("PATH", &path)
        .env("GITHUB_TOKEN", "probe-forge-token")
        .env("ANTHROPIC_API_KEY", "probe-model-key")
        .env("TDD_RELAY", "/probe/relay.sock")
        .args(["hook", "claude", "selftest", "--json"])
        .output()
        .expect("tdd runs");
    assert_eq!(crate::support::code(&out), 1, "the stand-in heeds nothing");
    let seen = std::fs::read_to_string(&seen).expect("the stand-in ran");
    for probe in [
        "probe-forge-token",
        "probe-model-key",
        "/probe/relay.sock",
        "TDD_RELAY",
    ] {
        assert!(!seen.contains(probe), "{probe} reached the CLI:\n{seen}");
    }
    let home = seen
        .lines()
        .find_map(|l| l.strip_prefix("HOME="))
        .expect("a home");
    assert!(home.contains("tdd-hook-cli-selftest-"), "{home}");
    assert!(
        seen.contains("ANTHROPIC_API_KEY=sk-ant-tdd-selftest"),
        "{seen}"
    );
}
