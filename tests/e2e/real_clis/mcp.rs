//! Claude Code itself with `tdd mcp` as its MCP server (`--mcp-config`), in headless
//! mode against the loopback Messages API: the model's call of the `status` tool is
//! answered by the engine, and the answer reaches the model in its next request.

use serde_json::json;

use super::bin_dir;
use super::clis_dir;
use super::hooks::claude_p;
use super::tool_outputs;
use crate::model_api::Api;
use crate::model_api::FakeApi;
use crate::model_api::Step;

#[test]
fn claude_code_asks_tdd_mcp_where_the_run_stands() {
    let Some(clis) = clis_dir("claude_code_asks_tdd_mcp_where_the_run_stands") else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = crate::hook::in_green();
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let config = env.home.path().join("mcp.json");
    let servers = json!({ "mcpServers": { "tdd": {
        "command": tdd.display().to_string(),
        "args": ["mcp"],
        "env": { "TDD_LEDGER_HOME": env.ledger_home.path().display().to_string() },
    }}});
    std::fs::write(&config, servers.to_string()).expect("MCP config");
    let settings = env.home.path().join("settings.json");
    std::fs::write(&settings, "{}").expect("settings");
    let api = FakeApi::start(
        Api::Anthropic,
        vec![
            Step::Tool("mcp__tdd__status", json!({})),
            Step::text("The run is in GREEN."),
        ],
    );
    let stream = claude_p(
        &bin,
        &env,
        &api,
        &settings,
        &["mcp__tdd__status"],
        Some(&config),
    );
    assert_eq!(api.served().scripted, 2, "{stream}");
    // The engine answered the call: the phase and the target reached the model.
    let told = tool_outputs(&api);
    assert!(
        told.contains("AWAITING_IMPL") && told.contains("tests/test_sub.py::test_sub"),
        "{told}\n{stream}"
    );
}
