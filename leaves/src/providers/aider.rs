//! `aider`: aider's one-shot message mode. It prints text, not events.
//!
//! `aider --message-file <prompt> --yes-always --no-auto-commits --no-stream
//! --no-pretty --no-check-update --no-analytics --no-show-release-notes
//! --no-gitignore --map-tokens 0 --chat-history-file <leaf dir>/...
//! --input-history-file <leaf dir>/... [--model M] [--read <locked file>]...`.
//! Nothing aider keeps for itself lands in the work tree (a phase commit would take
//! it): no `.gitignore` edit, its histories in the leaf's directory, no repository
//! map (whose tags cache is a directory in the work tree). `--no-analytics` turns
//! analytics off for this run only; `--analytics-disable` would edit the user's
//! `~/.aider/analytics.json` for good. Files locked in the phase are passed with
//! `--read`, which makes them read-only in aider's edit model. Aider cannot be made
//! read-only (its edits and shell commands are not sandboxed), so it is never a
//! verifier: the configuration refuses `verifier_provider = "aider"`. Usage and cost come from aider's last
//! `Tokens: ... Cost: ...` line when it printed one; an exit other than 0 is a crash,
//! since aider has no final event.

use serde_json::json;
use tdd_engine::config::ProviderConfig;

use super::Cli;
use tdd_supervisor::ExitClass;

use crate::envelope::Capabilities;
use crate::envelope::Request;
use crate::envelope::Usage;
use crate::provider::Invocation;
use crate::provider::LeafFiles;
use crate::provider::LeafOutput;
use crate::provider::Parsed;
use crate::provider::Provider;
use crate::provider::ProviderError;
use crate::provider::tail;

/// Variables aider reads for the models it is commonly used with.
pub const AIDER_ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "DEEPSEEK_API_KEY",
    "AIDER_MODEL",
];

/// Aider versions (`major.minor`) whose output and flags this provider was tested with.
pub const TESTED_VERSIONS: &[&str] = &["0.86"];

/// The aider provider.
#[derive(Debug, Clone)]
pub struct Aider {
    cli: Cli,
}

impl Aider {
    /// `aider` on the leaf's `PATH`, adjusted by a `[provider.aider]` table.
    pub fn new(config: Option<&ProviderConfig>) -> Aider {
        Aider {
            cli: Cli::new("aider", config),
        }
    }
}

impl Provider for Aider {
    fn name(&self) -> &str {
        "aider"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streaming: false,
            session_resume: false,
            cost_reporting: true,
            usage_reporting: true,
            tool_restriction: false,
            read_only_mode: false,
        }
    }

    fn program(&self) -> Option<&str> {
        Some(&self.cli.command)
    }

    fn tested_versions(&self) -> &'static [&'static str] {
        TESTED_VERSIONS
    }

    fn cli_state(&self) -> crate::home::CliState {
        // aider reads its keys from the variables of `AIDER_ENV`; its home files
        // (`.aider.conf.yml`, `.env`) can name files to read and commands to run, so
        // none is seeded.
        crate::home::CliState::NONE
    }

    fn invocation(
        &self,
        request: &Request,
        files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        if request.role() == tdd_prompts::Role::Verifier {
            return Err(ProviderError::Config(
                "aider cannot be a verifier: it has no read-only mode; set [conductor] verifier_provider to claude or codex".into(),
            ));
        }
        let mut argv = vec![
            self.cli.command.clone(),
            "--message-file".into(),
            files.prompt.display().to_string(),
            "--yes-always".into(),
            "--no-auto-commits".into(),
            "--no-stream".into(),
            "--no-pretty".into(),
            "--no-check-update".into(),
            "--no-analytics".into(),
            "--no-show-release-notes".into(),
            "--no-show-model-warnings".into(),
            // tdd makes every commit; aider touching git (its config, `git add`, the
            // .gitignore) would write where a confined leaf may not, and stage files
            // behind the engine.
            "--no-git".into(),
            "--no-gitignore".into(),
            "--map-tokens".into(),
            "0".into(),
            "--chat-history-file".into(),
            files
                .dir
                .join("aider.chat.history.md")
                .display()
                .to_string(),
            "--input-history-file".into(),
            files.dir.join("aider.input.history").display().to_string(),
        ];
        if let Some(model) = &self.cli.model {
            argv.extend(["--model".into(), model.clone()]);
        }
        for locked in &request.locked_files {
            argv.extend(["--read".into(), locked.clone()]);
        }
        argv.extend(self.cli.args.iter().cloned());
        let mut pass_env: Vec<String> = AIDER_ENV.iter().map(|s| s.to_string()).collect();
        pass_env.extend(self.cli.env.iter().cloned());
        Ok(Invocation {
            argv,
            pass_env,
            set_env: Vec::new(),
            prompt_on_stdin: false,
        })
    }

    fn parse(&self, output: &LeafOutput<'_>) -> Parsed {
        let mut parsed = Parsed {
            terminal: output.exit.class == ExitClass::Exited { code: 0 },
            text: tail(output.stdout, 64 * 1024),
            ..Parsed::default()
        };
        if let Some((usage, cost)) = output.stdout.lines().rev().find_map(cost_line) {
            parsed.usage = Some(usage);
            parsed.cost_usd = cost;
            parsed.meta.insert("cost_line".into(), json!(true));
        }
        parsed
    }
}

/// A token count as aider prints it: `512`, `2.3k`, `1.1M`.
fn count(text: &str) -> Option<u64> {
    let text = text.trim().replace(',', "");
    let (number, scale) = match text.chars().last()? {
        'k' | 'K' => (&text[..text.len() - 1], 1e3),
        'M' | 'm' => (&text[..text.len() - 1], 1e6),
        _ => (text.as_str(), 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|n| (n * scale).round() as u64)
}

/// Reads `Tokens: 2.3k sent, 1k cache hit, 512 received. Cost: $0.01 message, $0.02
/// session.` The cost is the session's: one leaf is one aider session.
pub fn cost_line(line: &str) -> Option<(Usage, Option<f64>)> {
    let rest = line.trim().strip_prefix("Tokens:")?;
    let (tokens, cost) = match rest.split_once("Cost:") {
        Some((tokens, cost)) => (tokens, Some(cost)),
        None => (rest, None),
    };
    let mut usage = Usage::default();
    for part in tokens.trim().trim_end_matches('.').split(',') {
        let part = part.trim();
        let (number, label) = part.split_once(' ')?;
        let n = count(number)?;
        match label.trim() {
            "sent" => usage.input_tokens = n,
            "received" => usage.output_tokens = n,
            "cache hit" => usage.cache_read_tokens = n,
            "cache write" => usage.cache_write_tokens = n,
            _ => {}
        }
    }
    let cost = cost.and_then(|cost| {
        cost.split(',')
            .find(|p| p.contains("session"))
            .or_else(|| cost.split(',').next())
            .and_then(|p| p.trim().trim_start_matches('$').split(' ').next())
            .and_then(|n| n.trim_start_matches('$').parse::<f64>().ok())
    });
    Some((usage, cost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_line_gives_usage_and_the_session_cost() {
        let (usage, cost) = cost_line(
            "Tokens: 2.3k sent, 1.5k cache write, 3k cache hit, 512 received. Cost: $0.01 message, $0.02 session.",
        )
        .expect("parses");
        assert_eq!(
            usage,
            Usage {
                input_tokens: 2300,
                output_tokens: 512,
                cache_read_tokens: 3000,
                cache_write_tokens: 1500,
                reasoning_tokens: 0,
            }
        );
        assert_eq!(cost, Some(0.02));
        assert!(cost_line("Applied edit to app.py").is_none());
    }
}
