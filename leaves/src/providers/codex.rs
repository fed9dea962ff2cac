//! `codex`: the Codex CLI's `exec --json` mode.
//!
//! `codex exec --json --sandbox workspace-write --skip-git-repo-check -C <workdir>
//! -c allow_login_shell=false -c sandbox_workspace_write.writable_roots=[<ledger>]
//! -c sandbox_workspace_write.exclude_slash_tmp=true
//! -c sandbox_workspace_write.exclude_tmpdir_env_var=true [-m M] -`, the prompt on
//! stdin, `TMPDIR` the leaf's own directory. Every role runs in `workspace-write`:
//! only the work tree (a verifier's is a scratch worktree, never the real tree) and
//! the ledger's directory (which holds the leaf's temp dir) are writable, so
//! `tdd test` and `tdd verdict` work; `read-only` would refuse both. Commands run through `bash -c`, not a login
//! shell, so the `PATH` the leaf got (with `tdd` first) is the one they see.
//!
//! Events: `thread.started{thread_id}`, `turn.started`,
//! `item.started|updated|completed{item}` (the item's kind is `type`, or
//! `item_type` in older builds), `turn.completed{usage}`, `turn.failed{error}`,
//! `error` (also seen in runs that succeed: reconnections, fallbacks). A stream
//! that does not end with `turn.completed` or `turn.failed` is a crash. Codex
//! reports tokens, not dollars; its `input_tokens` include the cached ones.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::json;
use tdd_engine::config::ProviderConfig;

use super::Cli;

use crate::envelope::Capabilities;
use crate::envelope::Request;
use crate::envelope::Usage;
use crate::home::CliState;
use crate::home::Keep;
use crate::home::Seed;
use crate::provider::Invocation;
use crate::provider::LeafFiles;
use crate::provider::LeafOutput;
use crate::provider::Parsed;
use crate::provider::Provider;
use crate::provider::ProviderError;

/// Variables the Codex CLI reads for its credentials and configuration.
/// `CODEX_API_KEY` is the key `codex exec` sends; `OPENAI_API_KEY` alone is not sent,
/// so it is passed on as `CODEX_API_KEY` when that is unset.
pub const CODEX_ENV: &[&str] = &[
    "CODEX_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_HOME",
];

/// The codex state in a leaf's private home: the credentials as they are and the
/// user's `config.toml` cut to the model, its providers and the login settings. No
/// `AGENTS.md`, no MCP server, no `notify` command, no profile, no project trust.
pub const STATE: CliState = CliState {
    var: Some("CODEX_HOME"),
    dir: ".codex",
    seed: &[
        Seed {
            file: "auth.json",
            in_home_by_default: false,
            keep: Keep::Whole,
        },
        Seed {
            file: "config.toml",
            in_home_by_default: false,
            keep: Keep::TomlKeys(&[
                "model",
                "model_provider",
                "model_providers",
                "model_reasoning_effort",
                "model_reasoning_summary",
                "model_verbosity",
                "model_context_window",
                "model_max_output_tokens",
                "preferred_auth_method",
                "forced_login_method",
                "forced_chatgpt_workspace_id",
                "cli_auth_credentials_store",
                "disable_response_storage",
            ]),
        },
    ],
};

/// Codex CLI versions (`major.minor`) whose stream and flags this provider was tested
/// with.
pub const TESTED_VERSIONS: &[&str] = &["0.171"];

/// The model provider `tdd` defines when `OPENAI_BASE_URL` names another endpoint
/// (codex ignores the variable): the Responses API over HTTP only. Codex's built-in
/// provider first tries WebSockets, which such endpoints rarely serve, and spends
/// seconds failing before it falls back.
pub const CUSTOM_PROVIDER: &str = "tdd_openai";

/// Item kinds that are tool calls: each ends a model round trip.
const TOOL_ITEMS: &[&str] = &[
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "web_search",
    "collab_tool_call",
];

/// The Codex provider.
#[derive(Debug, Clone)]
pub struct Codex {
    cli: Cli,
}

impl Codex {
    /// `codex` on the leaf's `PATH`, adjusted by a `[provider.codex]` table.
    pub fn new(config: Option<&ProviderConfig>) -> Codex {
        Codex {
            cli: Cli::new("codex", config),
        }
    }
}

impl Provider for Codex {
    fn name(&self) -> &str {
        "codex"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streaming: true,
            session_resume: true,
            cost_reporting: false,
            usage_reporting: true,
            tool_restriction: false,
            read_only_mode: true,
        }
    }

    fn program(&self) -> Option<&str> {
        Some(&self.cli.command)
    }

    fn tested_versions(&self) -> &'static [&'static str] {
        TESTED_VERSIONS
    }

    fn cli_state(&self) -> CliState {
        STATE
    }

    fn invocation(
        &self,
        request: &Request,
        files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        let ledger = toml_string(&files.ledger_dir.display().to_string());
        // A leaf tdd confines with Landlock runs codex without codex's own sandbox:
        // bubblewrap cannot set up its namespaces inside Landlock, and tdd's rules are
        // the stricter (no ledger, no credentials).
        let confined_by_tdd = matches!(
            &request.sandbox,
            tdd_supervisor::Sandbox::Confined { policy, .. } if !policy.without_landlock
        ) && tdd_sandbox::probe().confines();
        let mode = if confined_by_tdd {
            "danger-full-access"
        } else {
            "workspace-write"
        };
        let mut argv = vec![
            self.cli.command.clone(),
            "exec".into(),
            "--json".into(),
            "--sandbox".into(),
            mode.into(),
            "--skip-git-repo-check".into(),
            "-C".into(),
            request.workdir.display().to_string(),
            "-c".into(),
            "allow_login_shell=false".into(),
            "-c".into(),
            format!("sandbox_workspace_write.writable_roots=[{ledger}]"),
            // `/tmp` and `$TMPDIR` would be writable too, and a repository may live
            // there; the leaf's temp dir is its own directory, under the ledger's.
            "-c".into(),
            "sandbox_workspace_write.exclude_slash_tmp=true".into(),
            "-c".into(),
            "sandbox_workspace_write.exclude_tmpdir_env_var=true".into(),
        ];
        if let Some(model) = &self.cli.model {
            argv.extend(["-m".into(), model.clone()]);
        }
        argv.extend(self.cli.args.iter().cloned());
        argv.push("-".into());
        let mut pass_env: Vec<String> = CODEX_ENV.iter().map(|s| s.to_string()).collect();
        pass_env.extend(self.cli.env.iter().cloned());
        Ok(Invocation {
            argv,
            pass_env,
            set_env: Vec::new(),
            prompt_on_stdin: true,
        })
    }

    fn adapt(&self, invocation: &mut Invocation, caller: &BTreeMap<String, String>) {
        if !caller.contains_key("CODEX_API_KEY")
            && let Some(key) = caller.get("OPENAI_API_KEY")
        {
            invocation
                .set_env
                .push(("CODEX_API_KEY".into(), key.clone()));
        }
        let Some(url) = caller.get("OPENAI_BASE_URL").filter(|u| !u.is_empty()) else {
            return;
        };
        let p = format!("model_providers.{CUSTOM_PROVIDER}");
        let settings = [
            format!("model_provider={}", toml_string(CUSTOM_PROVIDER)),
            format!("{p}.name={}", toml_string(CUSTOM_PROVIDER)),
            format!("{p}.base_url={}", toml_string(url)),
            format!("{p}.env_key={}", toml_string("CODEX_API_KEY")),
            format!("{p}.wire_api={}", toml_string("responses")),
            format!("{p}.supports_websockets=false"),
        ];
        // Before the final `-` (the prompt on stdin).
        let at = invocation.argv.len().saturating_sub(1);
        let args = settings.into_iter().flat_map(|s| ["-c".to_string(), s]);
        invocation.argv.splice(at..at, args);
    }

    /// `hooks.json` with `tdd hook codex`'s entries in the leaf's private `CODEX_HOME`,
    /// and `--dangerously-bypass-hook-trust`: Codex runs a hook only once a person
    /// trusted it, and this home, its one hook file and the leaf are tdd's own. The
    /// project's hooks stay off (the private home trusts no project).
    fn wire_hooks(&self, invocation: &mut Invocation) -> Result<bool, ProviderError> {
        let Some(flag) = session_hooks(invocation)? else {
            return Ok(false);
        };
        let at = invocation.argv.len().saturating_sub(1);
        invocation.argv.insert(at, flag);
        Ok(true)
    }

    fn parse(&self, output: &LeafOutput<'_>) -> Parsed {
        parse_stream(output.stdout)
    }
}

/// Writes `tdd hook codex`'s entries as `hooks.json` in the private `CODEX_HOME` the
/// invocation sets, and gives the flag that has Codex run them without a person's review
/// (that home and its one hook file are tdd's own). `None` when the invocation sets no
/// `CODEX_HOME`.
pub(crate) fn session_hooks(invocation: &Invocation) -> Result<Option<String>, ProviderError> {
    let Some((_, home)) = invocation.set_env.iter().find(|(k, _)| k == "CODEX_HOME") else {
        return Ok(None);
    };
    wire_session_hooks(std::path::Path::new(home)).map(Some)
}

/// Writes `tdd hook codex`'s entries as `hooks.json` in `codex_home`, a `CODEX_HOME`
/// that is tdd's own, and gives the flag that has Codex run them without a person's
/// review. What a conducted leaf, `tdd agent` and the hook self-test all use.
pub fn wire_session_hooks(codex_home: &std::path::Path) -> Result<String, ProviderError> {
    let (hooks, _) = crate::hook_config::wire(crate::hook::Harness::Codex, None)
        .map_err(|e| ProviderError::Config(e.to_string()))?;
    let path = codex_home.join("hooks.json");
    std::fs::write(&path, hooks).map_err(|source| ProviderError::Write { path, source })?;
    Ok("--dangerously-bypass-hook-trust".to_string())
}

/// `text` as a TOML basic string (a JSON string is one).
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
}

/// True when a failure message says the API refused the credentials or could not be
/// reached.
fn unavailable(message: &str) -> bool {
    const SIGNS: &[&str] = &[
        "401 Unauthorized",
        "403 Forbidden",
        "error sending request",
        "Connection refused",
        "connection refused",
        "dns error",
        "stream disconnected before completion",
    ];
    SIGNS.iter().any(|sign| message.contains(sign))
}

/// Reads an `exec --json` transcript. `turns` counts model round trips: one per tool
/// call, plus one for the answer that ends the turn (calls made in parallel in one
/// response are counted apart).
pub fn parse_stream(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut usage = Usage::default();
    let mut saw_usage = false;
    let (mut round_trips, mut commands, mut unparsed) = (0u32, 0u64, 0u64);
    let mut answered_since_tool = false;
    let mut changed: Vec<Value> = Vec::new();
    let mut errors: Vec<Value> = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            unparsed += 1;
            continue;
        };
        match event["type"].as_str().unwrap_or_default() {
            "thread.started" => {
                parsed.session_id = event["thread_id"].as_str().map(str::to_string);
            }
            "turn.started" => parsed.terminal = false,
            "item.completed" => {
                let item = &event["item"];
                let kind = item["type"]
                    .as_str()
                    .or_else(|| item["item_type"].as_str())
                    .unwrap_or_default();
                if TOOL_ITEMS.contains(&kind) {
                    round_trips += 1;
                    answered_since_tool = false;
                }
                match kind {
                    "agent_message" | "assistant_message" => {
                        answered_since_tool = true;
                        if let Some(text) = item["text"].as_str() {
                            parsed.text = text.to_string();
                        }
                    }
                    "command_execution" => commands += 1,
                    "file_change" => {
                        if let Some(list) = item["changes"].as_array() {
                            changed.extend(list.iter().map(|c| c["path"].clone()));
                        }
                    }
                    "error" => errors.push(item["message"].clone()),
                    _ => {}
                }
            }
            "turn.completed" => {
                parsed.terminal = true;
                if answered_since_tool {
                    round_trips += 1;
                    answered_since_tool = false;
                }
                let u = &event["usage"];
                if u.is_object() {
                    saw_usage = true;
                    let n = |key: &str| u[key].as_u64().unwrap_or(0);
                    let cached = n("cached_input_tokens");
                    usage.input_tokens += n("input_tokens").saturating_sub(cached);
                    usage.cache_read_tokens += cached;
                    usage.cache_write_tokens += n("cache_write_input_tokens");
                    usage.output_tokens += n("output_tokens");
                    usage.reasoning_tokens += n("reasoning_output_tokens");
                }
            }
            "turn.failed" => {
                parsed.terminal = true;
                let message = event["error"]["message"]
                    .as_str()
                    .unwrap_or("the turn failed")
                    .to_string();
                parsed.unavailable = unavailable(&message);
                parsed.error = Some(message);
            }
            "error" => errors.push(event["message"].clone()),
            _ => {}
        }
    }
    parsed.turns = Some(round_trips);
    parsed.usage = saw_usage.then_some(usage);
    parsed.meta.insert("commands".into(), json!(commands));
    parsed.meta.insert("changed_paths".into(), json!(changed));
    parsed.meta.insert("errors".into(), json!(errors));
    parsed.meta.insert("unparsed_lines".into(), json!(unparsed));
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support::fixture;

    /// The developer leaf `cargo xtask capture` recorded: three requests to the fake
    /// Responses API, each reporting 1000 input tokens (400 of them cached), 50
    /// output and 10 reasoning tokens.
    #[test]
    fn tokens_are_normalised_and_round_trips_counted() {
        let parsed = parse_stream(&fixture("codex/ok.jsonl"));
        assert!(parsed.terminal && parsed.error.is_none(), "{parsed:?}");
        assert_eq!(
            parsed.usage,
            Some(Usage {
                input_tokens: 1800,
                output_tokens: 150,
                cache_read_tokens: 1200,
                cache_write_tokens: 0,
                reasoning_tokens: 30,
            })
        );
        // Two commands, each a round trip, then the answer.
        assert_eq!(parsed.turns, Some(3));
        assert_eq!(parsed.text, "Wrote notes.txt.");
        // A warning item is reported, not a failure.
        assert_eq!(parsed.meta["errors"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn reconnections_are_errors_of_a_run_that_succeeds() {
        let parsed = parse_stream(&fixture("codex/websocket-fallback.jsonl"));
        assert!(parsed.terminal && parsed.error.is_none(), "{parsed:?}");
        assert_eq!(parsed.meta["errors"].as_array().map(Vec::len), Some(6));
        assert_eq!(parsed.usage.map(|u| u.input_tokens), Some(900));
    }

    #[test]
    fn refused_credentials_make_the_provider_unavailable() {
        let parsed = parse_stream(&fixture("codex/api-401.jsonl"));
        assert!(parsed.unavailable, "{parsed:?}");
        assert!(parsed.error.expect("an error").contains("401 Unauthorized"));
        let failed = parse_stream(
            "{\"type\":\"turn.started\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"context window exceeded\"}}\n",
        );
        assert!(!failed.unavailable && failed.error.is_some());
    }
}
