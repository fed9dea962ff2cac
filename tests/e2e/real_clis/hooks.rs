//! Claude Code itself, with `tdd hook` as its PreToolUse and PostToolUse hooks in
//! headless mode (`-p`, as `tdd conduct` runs it), against the loopback Messages API: a write to the test
//! GREEN locks, by its Write tool and through the shell, is denied before it happens,
//! one no reader of the command line sees ahead is undone right after the command, and
//! the model is told in its next request.

use std::process::Command;
use std::process::Stdio;

use serde_json::json;

use super::bash;
use super::bin_dir;
use super::claude_env;
use super::clis_dir;
use super::tool_outputs;
use super::write;
use crate::model_api::Api;
use crate::model_api::FakeApi;
use crate::model_api::Step;

#[test]
fn claude_code_is_denied_a_locked_write_before_it_happens_and_told_why() {
    let name = "claude_code_is_denied_a_locked_write_before_it_happens_and_told_why";
    let Some(clis) = clis_dir(name) else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = crate::hook::in_green();
    let test = env.root().join("tests/test_sub.py");
    let before = std::fs::read(&test).expect("the test");
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let settings = env.home.path().join("hook-settings.json");
    let hooks = json!({ "hooks": { "PreToolUse": [{
        "matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit",
        "hooks": [{ "type": "command", "command": format!("'{}' hook claude pre-tool-use", tdd.display()) }],
    }]}});
    std::fs::write(&settings, hooks.to_string()).expect("settings");
    let api = FakeApi::start(
        Api::Anthropic,
        vec![
            // Claude Code writes only a file it has read.
            Step::Tool("Read", json!({ "file_path": test.display().to_string() })),
            write(&test, "def test_sub():\n    pass\n"),
            bash("sed -i 's/== 3/== 0/' tests/test_sub.py", "weaken the test"),
            Step::text("Done."),
        ],
    );
    let stream = claude_p(
        &bin,
        &env,
        &api,
        &settings,
        &["Write", "Edit", "Bash(sed:*)"],
        None,
    );
    assert_eq!(api.served().scripted, 4, "{stream}");
    // Neither write happened: the bytes are the committed test's.
    assert_eq!(std::fs::read(&test).expect("the test"), before, "{stream}");
    // The model was told, for each, which lock and what to do instead.
    let told = tool_outputs(&api);
    assert_eq!(
        told.matches("a test file, locked once the failing test is committed")
            .count(),
        2,
        "{told}"
    );
    assert!(told.contains("make the target pass"), "{told}");
}

#[test]
fn claude_code_is_told_when_a_shell_command_it_ran_changed_a_locked_test_and_it_is_undone() {
    let name =
        "claude_code_is_told_when_a_shell_command_it_ran_changed_a_locked_test_and_it_is_undone";
    let Some(clis) = clis_dir(name) else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = crate::hook::in_green();
    let test = env.root().join("tests/test_sub.py");
    let before = std::fs::read(&test).expect("the test");
    // A script outside the work tree that weakens the test: no reader of the command
    // line `python3 <script>` can see the write ahead, so the command runs.
    let script = env.home.path().join("weaken.py");
    std::fs::write(
        &script,
        format!(
            "open({:?}, 'w').write('def test_sub():\\n    pass\\n')\n",
            test.display().to_string()
        ),
    )
    .expect("script");
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let settings = env.home.path().join("hook-settings.json");
    let command = |event: &str| format!("'{}' hook claude {event}", tdd.display());
    let hooks = json!({ "hooks": {
        "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": command("pre-tool-use") }] }],
        "PostToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": command("post-tool-use") }] }],
    }});
    std::fs::write(&settings, hooks.to_string()).expect("settings");
    let api = FakeApi::start(
        Api::Anthropic,
        vec![
            bash(&format!("python3 {}", script.display()), "tidy the test"),
            Step::text("Done."),
        ],
    );
    let stream = claude_p(&bin, &env, &api, &settings, &["Bash(python3:*)"], None);
    // The command ran, and the hook after it put the committed test back.
    assert_eq!(std::fs::read(&test).expect("the test"), before, "{stream}");
    // The model's next request carries what tdd undid.
    let served = api.served();
    let last = served
        .requests
        .last()
        .map(|(_, _, body)| body.to_string())
        .unwrap_or_default();
    assert!(
        last.contains("tdd undid it") && last.contains("tests/test_sub.py"),
        "{last}"
    );
}

/// `claude -p` in `env`'s work tree against `api`, with the hooks of `settings`, the
/// tools `allowed` and no MCP server but those of `mcp` (an `--mcp-config` file); its
/// stream, once it has succeeded.
pub(super) fn claude_p(
    bin: &std::path::Path,
    env: &crate::support::Env,
    api: &FakeApi,
    settings: &std::path::Path,
    allowed: &[&str],
    mcp: Option<&std::path::Path>,
) -> String {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut claude = Command::new(bin.join("claude"));
    if let Some(config) = mcp {
        claude.arg("--mcp-config").arg(config);
    }
    let out = claude
        .args([
            "-p",
            "Make the target pass.",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(["--permission-mode", "acceptEdits", "--strict-mcp-config"])
        .arg("--settings")
        .arg(settings)
        .arg("--allowedTools")
        .args(allowed)
        .current_dir(env.root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.home.path())
        .env("LANG", "C.UTF-8")
        .env("TDD_LEDGER_HOME", env.ledger_home.path())
        .envs(claude_env(api))
        .stdin(Stdio::null())
        .output()
        .expect("claude runs");
    let stream = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stream}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stream
}

#[test]
fn claude_code_is_kept_from_ending_its_turn_in_red_before_the_target_fails() {
    let name = "claude_code_is_kept_from_ending_its_turn_in_red_before_the_target_fails";
    let Some(clis) = clis_dir(name) else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = crate::hook::in_red();
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let settings = env.home.path().join("hook-settings.json");
    let hooks = json!({ "hooks": { "Stop": [{ "hooks": [{
        "type": "command", "command": format!("'{}' hook claude stop", tdd.display()),
    }] }] }});
    std::fs::write(&settings, hooks.to_string()).expect("settings");
    // The model says it is done at once, every time it is asked.
    let api = FakeApi::start(
        Api::Anthropic,
        (0..4).map(|_| Step::text("Done.")).collect(),
    );
    let stream = claude_p(&bin, &env, &api, &settings, &["Read"], None);
    let served = api.served();
    // The first end of the turn was refused, and the model was told why.
    assert!(served.scripted >= 2, "{stream}");
    let told = served
        .requests
        .iter()
        .map(|(_, _, body)| body.to_string())
        .find(|body| body.contains("not done yet"))
        .unwrap_or_default();
    assert!(told.contains("RED wants it to fail"), "{stream}");
    // Never more than three refusals in a row: the session ended.
    assert!(served.scripted <= 4, "{stream}");
}

/// `tdd hook <harness> selftest` drives the real Claude Code and Codex, found on
/// `PATH`, against its own scripted model: each runs the wired hook before its tool,
/// the write into `.git` is blocked, and the model is told why.
#[test]
fn the_hook_selftest_drives_the_real_claude_code_and_codex() {
    let Some(clis) = clis_dir("the_hook_selftest_drives_the_real_claude_code_and_codex") else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    bin_dir(&clis, "codex");
    let env = crate::init::cargo_app();
    let (code, value) = env.json(&["init", "--hooks", "claude,codex"]);
    assert_eq!(code, 0, "{value}");
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let path = format!(
        "{}:{}:{}",
        tdd.parent().expect("tdd's directory").display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (harness, version) in [("claude", "Claude Code"), ("codex", "codex")] {
        let out = env
            .tdd()
            .env("PATH", &path)
            .args(["hook", harness, "selftest", "--json"])
            .output()
            .expect("tdd runs");
        let value = crate::support::envelope(&out);
        assert_eq!(crate::support::code(&out), 0, "{harness}: {value}");
        let cli = &value["data"]["cli"];
        assert_eq!(cli["blocked"], true, "{harness}: {value}");
        assert!(
            cli["version"].as_str().is_some_and(|v| v.contains(version)),
            "{harness}: {value}"
        );
        assert!(
            cli["detail"]
                .as_str()
                .is_some_and(|d| d.contains("model told why")),
            "{harness}: {value}"
        );
    }
    // doctor runs the same for each wired harness.
    let out = env
        .tdd()
        .env("PATH", &path)
        .args(["doctor", "--json"])
        .output()
        .expect("doctor");
    let checks = crate::support::envelope(&out)["data"]["checks"].clone();
    for harness in ["claude", "codex"] {
        let check = checks
            .as_array()
            .and_then(|c| c.iter().find(|c| c["check"] == format!("hooks.{harness}")))
            .cloned()
            .unwrap_or_default();
        assert_eq!(check["ok"], true, "{checks}");
        assert!(check.to_string().contains("model told why"), "{check}");
    }
}
