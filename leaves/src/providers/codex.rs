//! `codex`: the Codex CLI's `exec --json` mode.
//!
//! `codex exec --json --sandbox workspace-write|read-only --skip-git-repo-check -C
//! <workdir> [-m M] -`, the prompt on stdin. Developers and planners get
//! `workspace-write`, verifiers `read-only`. Events: `thread.started{thread_id}`,
//! `turn.started`, `item.started|updated|completed{item}` (the item's kind is
//! `type`, or `item_type` in older builds; `agent_message` or `assistant_message`),
//! `turn.completed{usage}`, `turn.failed{error}`, `error`. A stream that does not
//! end with `turn.completed` or `turn.failed` is a crash. Codex reports tokens, not
//! dollars.

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

/// Variables the Codex CLI reads for its credentials and configuration.
pub const CODEX_ENV: &[&str] = &["OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"];

/// The Codex provider.
#[derive(Debug, Clone)]
pub struct Codex {
    command: String,
    args: Vec<String>,
    env: Vec<String>,
    model: Option<String>,
}

impl Codex {
    /// `codex` on the leaf's `PATH`, adjusted by a `[provider.codex]` table.
    pub fn new(config: Option<&ProviderConfig>) -> Codex {
        Codex {
            command: config.map_or_else(|| "codex".into(), |c| c.command.clone()),
            args: config.map(|c| c.args.clone()).unwrap_or_default(),
            env: config.map(|c| c.env.clone()).unwrap_or_default(),
            model: config.and_then(|c| c.model.clone()),
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

    fn invocation(
        &self,
        request: &Request,
        _files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        let sandbox = match request.role() {
            Role::Verifier => "read-only",
            Role::Developer | Role::Planner => "workspace-write",
        };
        let mut argv = vec![
            self.command.clone(),
            "exec".into(),
            "--json".into(),
            "--sandbox".into(),
            sandbox.into(),
            "--skip-git-repo-check".into(),
            "-C".into(),
            request.workdir.display().to_string(),
        ];
        if let Some(model) = &self.model {
            argv.extend(["-m".into(), model.clone()]);
        }
        argv.extend(self.args.iter().cloned());
        argv.push("-".into());
        let mut pass_env: Vec<String> = CODEX_ENV.iter().map(|s| s.to_string()).collect();
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

/// Reads an `exec --json` transcript.
pub fn parse_stream(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut usage = Usage::default();
    let mut saw_usage = false;
    let (mut turns, mut commands, mut unparsed) = (0u32, 0u64, 0u64);
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
            "turn.started" => {
                turns += 1;
                parsed.terminal = false;
            }
            "item.completed" => {
                let item = &event["item"];
                let kind = item["type"].as_str().or_else(|| item["item_type"].as_str());
                match kind.unwrap_or_default() {
                    "agent_message" | "assistant_message" => {
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
                    _ => {}
                }
            }
            "turn.completed" => {
                parsed.terminal = true;
                let u = &event["usage"];
                if u.is_object() {
                    saw_usage = true;
                    usage.input_tokens += u["input_tokens"].as_u64().unwrap_or(0);
                    usage.cache_read_tokens += u["cached_input_tokens"].as_u64().unwrap_or(0);
                    usage.output_tokens += u["output_tokens"].as_u64().unwrap_or(0);
                }
            }
            "turn.failed" => {
                parsed.terminal = true;
                parsed.error = Some(
                    event["error"]["message"]
                        .as_str()
                        .unwrap_or("the turn failed")
                        .to_string(),
                );
            }
            "error" => errors.push(event["message"].clone()),
            _ => {}
        }
    }
    parsed.turns = Some(turns);
    parsed.usage = saw_usage.then_some(usage);
    parsed.meta.insert("commands".into(), json!(commands));
    parsed.meta.insert("changed_paths".into(), json!(changed));
    parsed.meta.insert("errors".into(), json!(errors));
    parsed.meta.insert("unparsed_lines".into(), json!(unparsed));
    parsed
}
