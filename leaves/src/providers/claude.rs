//! `claude`: Claude Code in print mode with its stream-json events.
//!
//! `claude -p --output-format stream-json --verbose --session-id <uuid>
//! --permission-mode <mode> --append-system-prompt <text> [--max-turns N] [--model M]
//! --strict-mcp-config --tools <available> --allowedTools ... [--disallowedTools ...]`,
//! the prompt on stdin. `--tools` is the whole set of tools the session has: a
//! verifier gets Read, Glob, Grep and Bash, with Bash allowed only for `tdd` and
//! read-only git commands in the `dontAsk` mode, so it is read-only by construction.
//! The `result` event carries `subtype`, `is_error`, `num_turns`, `total_cost_usd`,
//! `modelUsage` (every model the session called, subagents included) and
//! `errors[]`; a stream without it is a crash.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::json;
use tdd_engine::config::ProviderConfig;

use super::Cli;
use tdd_prompts::Role;

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
use crate::runtime::random_hex;

/// Variables Claude Code reads for its credentials and configuration.
pub const CLAUDE_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "AWS_REGION",
    "AWS_PROFILE",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLAUDE_CODE_MAX_RETRIES",
    "API_TIMEOUT_MS",
    "DISABLE_TELEMETRY",
    "DISABLE_AUTOUPDATER",
    "DISABLE_ERROR_REPORTING",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
];

/// Claude Code's state in a leaf's private home: the credentials as they are, the
/// global file cut to who is logged in, and the user's settings cut to the model. No
/// `CLAUDE.md`, no hooks, no MCP server, no `env`, no `apiKeyHelper` command.
pub const STATE: CliState = CliState {
    var: Some("CLAUDE_CONFIG_DIR"),
    dir: ".claude",
    seed: &[
        Seed {
            file: ".credentials.json",
            in_home_by_default: false,
            keep: Keep::Whole,
        },
        Seed {
            file: ".claude.json",
            in_home_by_default: true,
            keep: Keep::JsonKeys {
                keys: &[
                    "hasCompletedOnboarding",
                    "lastOnboardingVersion",
                    "oauthAccount",
                    "userID",
                    "primaryApiKey",
                    "customApiKeyResponses",
                ],
                writable: true,
            },
        },
        Seed {
            file: "settings.json",
            in_home_by_default: false,
            keep: Keep::JsonKeys {
                keys: &["model", "forceLoginMethod", "forceLoginOrgUUID"],
                writable: false,
            },
        },
    ],
};

/// Claude Code versions (`major.minor`) whose stream and flags this provider was
/// tested with.
pub const TESTED_VERSIONS: &[&str] = &["2.1"];

/// How many times Claude Code may retry a failing API call before it gives up, unless
/// the caller sets `CLAUDE_CODE_MAX_RETRIES`. Its default (10, with backoff) keeps a
/// leaf with a refused key or an unreachable API busy for about three minutes.
pub const MAX_RETRIES: &str = "2";

const SYSTEM: &str = "You are a leaf of `tdd`. Run `tdd status` for your assignment. \
Run tests only with `tdd test`. Never touch `.tdd/`, the ledger or tdd.toml, and never commit.";

/// The tools a verifier's session has at all (`--tools`): none of them writes a file
/// except through Bash, which is allowed only for [`VERIFIER_ALLOWED`] commands.
pub const VERIFIER_TOOLS: &[&str] = &["Read", "Glob", "Grep", "Bash"];

/// The verifier's permission rules: everything else is denied (`dontAsk`).
pub const VERIFIER_ALLOWED: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "Bash(tdd:*)",
    "Bash(git diff:*)",
    "Bash(git show:*)",
    "Bash(git log:*)",
];

/// The tools a developer's or planner's session has.
pub const DEVELOPER_TOOLS: &[&str] = &["Read", "Glob", "Grep", "Edit", "Write", "Bash"];

/// The developer's permission rules (in `acceptEdits`, edits in the work tree pass).
pub const DEVELOPER_ALLOWED: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "Edit",
    "Write",
    "Bash(tdd:*)",
    "Bash(git status:*)",
    "Bash(git diff:*)",
];

/// Commands a developer may never run.
pub const DEVELOPER_DENIED: &[&str] = &[
    "Bash(git commit:*)",
    "Bash(git push:*)",
    "Bash(git reset:*)",
    "Bash(git checkout:*)",
];

/// The Claude Code provider.
#[derive(Debug, Clone)]
pub struct Claude {
    cli: Cli,
}

impl Claude {
    /// `claude` on the leaf's `PATH`, adjusted by a `[provider.claude]` table.
    pub fn new(config: Option<&ProviderConfig>) -> Claude {
        Claude {
            cli: Cli::new("claude", config),
        }
    }
}

/// `--settings` and the settings (JSON) holding `tdd hook claude`'s entries: Claude
/// Code adds them to the hooks of the settings it reads, for that session only. What a
/// conducted leaf, `tdd agent` and the hook self-test all pass.
pub fn session_hooks() -> Result<[String; 2], ProviderError> {
    let (settings, _) = crate::hook_config::wire(crate::hook::Harness::Claude, None)
        .map_err(|e| ProviderError::Config(e.to_string()))?;
    Ok(["--settings".to_string(), settings])
}

/// A random (version 4) UUID, for `--session-id`.
pub(crate) fn uuid_v4() -> Result<String, ProviderError> {
    let hex = random_hex(16).map_err(|e| ProviderError::Config(e.to_string()))?;
    let mut bytes: Vec<char> = hex.chars().collect();
    bytes[12] = '4';
    bytes[16] = ['8', '9', 'a', 'b'][bytes[16].to_digit(16).unwrap_or(0) as usize % 4];
    let s: String = bytes.into_iter().collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &s[0..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    ))
}

impl Provider for Claude {
    fn name(&self) -> &str {
        "claude"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streaming: true,
            session_resume: true,
            cost_reporting: true,
            usage_reporting: true,
            tool_restriction: true,
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
        _files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        let (mode, tools, allowed, denied): (&str, &[&str], &[&str], &[&str]) = match request.role()
        {
            Role::Verifier => ("dontAsk", VERIFIER_TOOLS, VERIFIER_ALLOWED, &[]),
            Role::Developer | Role::Planner => (
                "acceptEdits",
                DEVELOPER_TOOLS,
                DEVELOPER_ALLOWED,
                DEVELOPER_DENIED,
            ),
        };
        let mut argv = vec![
            self.cli.command.clone(),
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--session-id".into(),
            uuid_v4()?,
            "--permission-mode".into(),
            mode.into(),
            "--append-system-prompt".into(),
            SYSTEM.into(),
            // No MCP server from the user's configuration: its tools are outside the
            // `--tools` set this leaf is limited to.
            "--strict-mcp-config".into(),
        ];
        if request.role() == Role::Verifier {
            // The user's settings only: the checkout being judged may carry a
            // `.claude/settings.json` (hooks, permission rules) the developer wrote.
            argv.extend(["--setting-sources".into(), "user".into()]);
        }
        if let Some(turns) = request.max_turns {
            argv.extend(["--max-turns".into(), turns.to_string()]);
        }
        if let Some(model) = &self.cli.model {
            argv.extend(["--model".into(), model.clone()]);
        }
        argv.extend(self.cli.args.iter().cloned());
        // `--tools` takes one comma-separated value; the two rule lists take several
        // values, so they come last: nothing after them can be read as a rule.
        argv.extend(["--tools".into(), tools.join(",")]);
        argv.push("--allowedTools".into());
        argv.extend(allowed.iter().map(|t| t.to_string()));
        if !denied.is_empty() {
            argv.push("--disallowedTools".into());
            argv.extend(denied.iter().map(|t| t.to_string()));
        }
        let mut pass_env: Vec<String> = CLAUDE_ENV.iter().map(|s| s.to_string()).collect();
        pass_env.extend(self.cli.env.iter().cloned());
        Ok(Invocation {
            argv,
            pass_env,
            set_env: Vec::new(),
            prompt_on_stdin: true,
        })
    }

    fn adapt(&self, invocation: &mut Invocation, caller: &BTreeMap<String, String>) {
        if !caller.contains_key("CLAUDE_CODE_MAX_RETRIES") {
            invocation
                .set_env
                .push(("CLAUDE_CODE_MAX_RETRIES".into(), MAX_RETRIES.into()));
        }
    }

    /// `--settings` with `tdd hook claude`'s entries, before the tool lists (which take
    /// every value after them): Claude Code adds them to the hooks of the settings it
    /// reads, for this session only.
    fn wire_hooks(&self, invocation: &mut Invocation) -> Result<bool, ProviderError> {
        let at = invocation
            .argv
            .iter()
            .position(|a| a == "--tools")
            .unwrap_or(invocation.argv.len());
        invocation.argv.splice(at..at, session_hooks()?);
        Ok(true)
    }

    fn parse(&self, output: &LeafOutput<'_>) -> Parsed {
        parse_stream(output.stdout)
    }
}

fn u64_of(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// The session's tokens and cost: the sum of `modelUsage` over every model it called
/// (the main loop and its subagents), else the main loop's `usage`.
fn result_usage(event: &Value) -> (Option<Usage>, Option<f64>) {
    let reported_cost = event["total_cost_usd"]
        .as_f64()
        .or_else(|| event["cost_usd"].as_f64());
    if let Some(models) = event["modelUsage"].as_object()
        && !models.is_empty()
    {
        let mut usage = Usage::default();
        let mut cost = 0.0;
        for model in models.values() {
            usage.input_tokens += u64_of(&model["inputTokens"]);
            usage.output_tokens += u64_of(&model["outputTokens"]);
            usage.cache_read_tokens += u64_of(&model["cacheReadInputTokens"]);
            usage.cache_write_tokens += u64_of(&model["cacheCreationInputTokens"]);
            cost += model["costUSD"].as_f64().unwrap_or(0.0);
        }
        return (Some(usage), reported_cost.or(Some(cost)));
    }
    let usage = &event["usage"];
    let usage = usage.is_object().then(|| Usage {
        input_tokens: u64_of(&usage["input_tokens"]),
        output_tokens: u64_of(&usage["output_tokens"]),
        cache_read_tokens: u64_of(&usage["cache_read_input_tokens"]),
        cache_write_tokens: u64_of(&usage["cache_creation_input_tokens"]),
        ..Usage::default()
    });
    (usage, reported_cost)
}

/// True when a failed result says the API could not be used at all: refused
/// credentials, or retries that never got an answer.
fn unavailable(event: &Value, retries: &[Value]) -> bool {
    match event["api_error_status"].as_u64() {
        Some(401 | 403 | 407) => true,
        Some(status) => status >= 500 && !retries.is_empty(),
        None => !retries.is_empty(),
    }
}

/// Reads a stream-json transcript.
pub fn parse_stream(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut last_text = String::new();
    let (mut assistant, mut tool_results, mut unparsed) = (0u64, 0u64, 0u64);
    let mut retries: Vec<Value> = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            unparsed += 1;
            continue;
        };
        match event["type"].as_str() {
            Some("system") if event["subtype"] == "init" => {
                parsed.session_id = event["session_id"].as_str().map(str::to_string);
                for key in [
                    "model",
                    "permissionMode",
                    "cwd",
                    "claude_code_version",
                    "tools",
                ] {
                    if !event[key].is_null() {
                        parsed.meta.insert(key.into(), event[key].clone());
                    }
                }
            }
            Some("system") if event["subtype"] == "api_retry" => {
                retries.push(json!({
                    "attempt": event["attempt"],
                    "error_status": event["error_status"],
                    "error": event["error"],
                }));
            }
            Some("assistant") => {
                assistant += 1;
                if let Some(content) = event["message"]["content"].as_array() {
                    let text: Vec<&str> = content
                        .iter()
                        .filter(|c| c["type"] == "text")
                        .filter_map(|c| c["text"].as_str())
                        .collect();
                    if !text.is_empty() {
                        last_text = text.join("\n");
                    }
                }
            }
            Some("user") => {
                if let Some(content) = event["message"]["content"].as_array() {
                    tool_results += content
                        .iter()
                        .filter(|c| c["type"] == "tool_result")
                        .count() as u64;
                }
            }
            Some("result") => read_result(&event, &retries, &mut parsed, &mut last_text),
            _ => {}
        }
    }
    parsed.text = last_text;
    parsed
        .meta
        .insert("assistant_messages".into(), json!(assistant));
    parsed
        .meta
        .insert("tool_results".into(), json!(tool_results));
    parsed.meta.insert("api_retries".into(), json!(retries));
    parsed.meta.insert("unparsed_lines".into(), json!(unparsed));
    parsed
}

/// Reads the terminal `result` event into `parsed`.
fn read_result(event: &Value, retries: &[Value], parsed: &mut Parsed, last_text: &mut String) {
    parsed.terminal = true;
    let subtype = event["subtype"].as_str().unwrap_or("unknown").to_string();
    let is_error = event["is_error"].as_bool().unwrap_or(false);
    let result = event["result"].as_str().unwrap_or_default().to_string();
    let errors: Vec<&str> = event["errors"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if is_error || subtype != "success" {
        let mut detail: Vec<String> = Vec::new();
        if let Some(status) = event["api_error_status"].as_u64() {
            detail.push(format!("API status {status}"));
        }
        detail.extend(errors.iter().map(|e| e.to_string()));
        if !result.is_empty() && !errors.contains(&result.as_str()) {
            detail.push(result.clone());
        }
        parsed.error = Some(if detail.is_empty() {
            subtype.clone()
        } else {
            format!("{subtype}: {}", detail.join("; "))
        });
        parsed.unavailable = unavailable(event, retries);
    }
    if !result.is_empty() {
        *last_text = result;
    }
    if let Some(id) = event["session_id"].as_str() {
        parsed.session_id = Some(id.to_string());
    }
    parsed.turns = event["num_turns"].as_u64().map(|n| n as u32);
    (parsed.usage, parsed.cost_usd) = result_usage(event);
    parsed.meta.insert("subtype".into(), json!(subtype));
    for key in [
        "duration_ms",
        "stop_reason",
        "terminal_reason",
        "api_error_status",
        "permission_denials",
        "errors",
    ] {
        if !event[key].is_null() {
            parsed.meta.insert(key.into(), event[key].clone());
        }
    }
}

#[cfg(test)]
#[path = "claude_tests.rs"]
mod tests;
