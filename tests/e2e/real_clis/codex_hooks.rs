//! Codex itself, with `tdd hook codex pre-tool-use` as its PreToolUse hook in
//! `codex exec` (as `tdd conduct` runs it), against the loopback Responses API: a shell
//! command that writes the test GREEN locks is denied before it runs, and the model is
//! told why in its next request.

use std::io::Write;
use std::process::Command;
use std::process::Stdio;

use serde_json::json;

use super::bin_dir;
use super::clis_dir;
use super::tool_outputs;
use crate::model_api::Api;
use crate::model_api::FakeApi;
use crate::model_api::Step;

#[test]
fn codex_is_denied_a_locked_write_before_it_happens_and_told_why() {
    let Some(clis) = clis_dir("codex_is_denied_a_locked_write_before_it_happens_and_told_why")
    else {
        return;
    };
    let bin = bin_dir(&clis, "codex");
    let env = crate::hook::in_green();
    let test = env.root().join("tests/test_sub.py");
    let before = std::fs::read(&test).expect("the test");
    let codex_home = env.home.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).expect("codex home");
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let seen = env.home.path().join("seen.jsonl");
    let hooks = json!({ "hooks": { "PreToolUse": [{
        "matcher": "^(Bash|shell|exec_command|local_shell|apply_patch|Edit|Write)$",
        "hooks": [{ "type": "command", "command": format!("tee -a '{}' | '{}' hook codex pre-tool-use", seen.display(), tdd.display()) }],
    }]}});
    std::fs::write(codex_home.join("hooks.json"), hooks.to_string()).expect("hooks");
    let api = FakeApi::start(
        Api::Responses,
        vec![
            Step::Tool(
                "exec_command",
                json!({ "cmd": "echo x > tests/test_sub.py" }),
            ),
            Step::text("Done."),
        ],
    );
    let url = format!("{}/v1", api.url);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(bin.join("codex"))
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
        ])
        .arg("--dangerously-bypass-hook-trust")
        .arg("-C")
        .arg(env.root())
        .args(["-m", "gpt-5-codex"])
        .args(["-c", "model_provider=\"tdd_openai\""])
        .args(["-c", "model_providers.tdd_openai.name=\"tdd_openai\""])
        .args([
            "-c",
            &format!("model_providers.tdd_openai.base_url=\"{url}\""),
        ])
        .args(["-c", "model_providers.tdd_openai.env_key=\"CODEX_API_KEY\""])
        .args(["-c", "model_providers.tdd_openai.wire_api=\"responses\""])
        .args(["-c", "model_providers.tdd_openai.supports_websockets=false"])
        .arg("-")
        .current_dir(env.root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.home.path())
        .env("LANG", "C.UTF-8")
        .env("TDD_LEDGER_HOME", env.ledger_home.path())
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_API_KEY", "sk-fake")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("codex runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"Make the target pass.")
        .expect("prompt");
    let out = child.wait_with_output().expect("codex ends");
    let stream = String::from_utf8_lossy(&out.stdout).into_owned();
    let seen_events = std::fs::read_to_string(&seen).unwrap_or_default();
    assert!(
        out.status.success(),
        "{stream}\n{}\nseen: {seen_events}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(api.served().scripted, 2, "{stream}\nseen: {seen_events}");
    // The write did not happen, and the model was told which lock and what to do.
    assert_eq!(
        std::fs::read(&test).expect("the test"),
        before,
        "{stream}\nseen: {seen_events}"
    );
    let told = tool_outputs(&api);
    assert!(
        told.contains("make the target pass"),
        "{told}\n{stream}\nseen: {seen_events}"
    );
}
