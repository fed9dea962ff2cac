//! `claude`: Claude Code in print mode with its stream-json events.
//!
//! `claude -p --output-format stream-json --verbose --session-id <uuid>
//! --permission-mode <mode> --allowedTools ... --disallowedTools ...
//! --append-system-prompt <text> [--max-turns N] [--model M]`, the prompt on stdin.
//! A verifier gets no Write, Edit, MultiEdit or NotebookEdit and runs in the
//! `default` permission mode, where anything not allowed is denied. The `result`
//! event carries `subtype`, `is_error`, `num_turns`, `total_cost_usd` and `usage`;
//! a stream without it is a crash.

use serde_json::Value;
use serde_json::json;
use tdd_engine::config::ProviderConfig;
use tdd_prompts::Role;

use crate::envelope::Capabilities;
use crate::envelope::Request;
use crate::envelope::Usage;
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
];

const SYSTEM: &str = "You are a leaf of `tdd`. Run `tdd status` for your assignment. \
Run tests only with `tdd test`. Never touch `.tdd/`, the ledger or tdd.toml, and never commit.";

/// Tools no verifier may have: they change files.
pub const VERIFIER_DENIED: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// The Claude Code provider.
#[derive(Debug, Clone)]
pub struct Claude {
    command: String,
    args: Vec<String>,
    env: Vec<String>,
    model: Option<String>,
}

impl Claude {
    /// `claude` on the leaf's `PATH`, adjusted by a `[provider.claude]` table.
    pub fn new(config: Option<&ProviderConfig>) -> Claude {
        Claude {
            command: config.map_or_else(|| "claude".into(), |c| c.command.clone()),
            args: config.map(|c| c.args.clone()).unwrap_or_default(),
            env: config.map(|c| c.env.clone()).unwrap_or_default(),
            model: config.and_then(|c| c.model.clone()),
        }
    }
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

    fn invocation(
        &self,
        request: &Request,
        _files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        let (mode, allowed, denied): (&str, &[&str], &[&str]) = match request.role() {
            Role::Verifier => (
                "default",
                &[
                    "Read",
                    "Glob",
                    "Grep",
                    "LS",
                    "Bash(tdd:*)",
                    "Bash(git diff:*)",
                    "Bash(git show:*)",
                    "Bash(git log:*)",
                ],
                &[
                    "Write",
                    "Edit",
                    "MultiEdit",
                    "NotebookEdit",
                    "WebFetch",
                    "WebSearch",
                ],
            ),
            Role::Developer | Role::Planner => (
                "acceptEdits",
                &[
                    "Read",
                    "Glob",
                    "Grep",
                    "LS",
                    "Write",
                    "Edit",
                    "MultiEdit",
                    "Bash(tdd:*)",
                    "Bash(git status:*)",
                    "Bash(git diff:*)",
                ],
                &[
                    "Bash(git commit:*)",
                    "Bash(git push:*)",
                    "Bash(git reset:*)",
                    "Bash(git checkout:*)",
                    "WebFetch",
                    "WebSearch",
                ],
            ),
        };
        let mut argv = vec![
            self.command.clone(),
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
        ];
        if let Some(turns) = request.max_turns {
            argv.extend(["--max-turns".into(), turns.to_string()]);
        }
        if let Some(model) = &self.model {
            argv.extend(["--model".into(), model.clone()]);
        }
        argv.extend(self.args.iter().cloned());
        // Both lists take several values, so they come last: nothing after them can be
        // read as a tool name.
        argv.push("--allowedTools".into());
        argv.extend(allowed.iter().map(|t| t.to_string()));
        argv.push("--disallowedTools".into());
        argv.extend(denied.iter().map(|t| t.to_string()));
        let mut pass_env: Vec<String> = CLAUDE_ENV.iter().map(|s| s.to_string()).collect();
        pass_env.extend(self.env.iter().cloned());
        Ok(Invocation {
            argv,
            pass_env,
            set_env: Vec::new(),
            prompt_on_stdin: true,
        })
    }

    fn parse(&self, output: &LeafOutput<'_>) -> Parsed {
        parse_stream(output.stdout)
    }
}

fn u64_of(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// Reads a stream-json transcript.
pub fn parse_stream(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut last_text = String::new();
    let (mut assistant, mut tool_results, mut unparsed) = (0u64, 0u64, 0u64);
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            unparsed += 1;
            continue;
        };
        match event["type"].as_str() {
            Some("system") if event["subtype"] == "init" => {
                parsed.session_id = event["session_id"].as_str().map(str::to_string);
                for key in ["model", "permissionMode", "cwd", "claude_code_version"] {
                    if !event[key].is_null() {
                        parsed.meta.insert(key.into(), event[key].clone());
                    }
                }
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
            Some("result") => {
                parsed.terminal = true;
                let subtype = event["subtype"].as_str().unwrap_or("unknown").to_string();
                let is_error = event["is_error"].as_bool().unwrap_or(false);
                let result = event["result"].as_str().unwrap_or_default().to_string();
                if is_error || subtype != "success" {
                    parsed.error = Some(if result.is_empty() {
                        subtype.clone()
                    } else {
                        format!("{subtype}: {result}")
                    });
                }
                if !result.is_empty() {
                    last_text = result;
                }
                if let Some(id) = event["session_id"].as_str() {
                    parsed.session_id = Some(id.to_string());
                }
                parsed.turns = event["num_turns"].as_u64().map(|n| n as u32);
                parsed.cost_usd = event["total_cost_usd"]
                    .as_f64()
                    .or_else(|| event["cost_usd"].as_f64());
                let usage = &event["usage"];
                if usage.is_object() {
                    parsed.usage = Some(Usage {
                        input_tokens: u64_of(&usage["input_tokens"]),
                        output_tokens: u64_of(&usage["output_tokens"]),
                        cache_read_tokens: u64_of(&usage["cache_read_input_tokens"]),
                        cache_write_tokens: u64_of(&usage["cache_creation_input_tokens"]),
                    });
                }
                parsed.meta.insert("subtype".into(), json!(subtype));
                for key in ["duration_ms", "stop_reason", "permission_denials"] {
                    if !event[key].is_null() {
                        parsed.meta.insert(key.into(), event[key].clone());
                    }
                }
            }
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
    parsed.meta.insert("unparsed_lines".into(), json!(unparsed));
    parsed
}
