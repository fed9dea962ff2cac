//! `tdd agent`'s provider: a person's interactive session of an agent CLI, started as
//! the person would start it (their arguments, no prompt, no headless flags), with the
//! CLI's state in the session's private home and, for Claude Code and Codex, the hooks
//! wired for this session only.

use crate::envelope::Capabilities;
use crate::envelope::Request;
use crate::home::CliState;
use crate::hook::Harness;
use crate::provider::Invocation;
use crate::provider::LeafFiles;
use crate::provider::LeafOutput;
use crate::provider::Parsed;
use crate::provider::Provider;
use crate::provider::ProviderError;

/// An interactive session of `program` with the person's own arguments.
#[derive(Debug, Clone)]
pub struct Interactive {
    program: String,
    args: Vec<String>,
    harness: Option<Harness>,
}

impl Interactive {
    /// `program` (found on the session's `PATH`, or a path) run with `args`. A program
    /// named `claude` or `codex` is that CLI: its credentials and settings are seeded
    /// into the private home as a developer leaf's are, and its hooks are wired.
    pub fn new(program: &str, args: Vec<String>) -> Interactive {
        let name = std::path::Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(program);
        let harness = match name {
            "claude" => Some(Harness::Claude),
            "codex" => Some(Harness::Codex),
            _ => None,
        };
        Interactive {
            program: program.to_string(),
            args,
            harness,
        }
    }

    /// The agent CLI it is, when tdd knows it (`claude`, `codex`).
    pub fn harness(&self) -> Option<Harness> {
        self.harness
    }
}

impl Provider for Interactive {
    fn name(&self) -> &str {
        "agent"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn program(&self) -> Option<&str> {
        self.harness.map(|_| self.program.as_str())
    }

    fn tested_versions(&self) -> &'static [&'static str] {
        match self.harness {
            Some(Harness::Claude) => super::claude::TESTED_VERSIONS,
            Some(Harness::Codex) => super::codex::TESTED_VERSIONS,
            _ => &[],
        }
    }

    fn cli_state(&self) -> CliState {
        match self.harness {
            Some(Harness::Claude) => super::claude::STATE,
            Some(Harness::Codex) => super::codex::STATE,
            _ => CliState::NONE,
        }
    }

    fn invocation(
        &self,
        _request: &Request,
        _files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        let mut argv = vec![self.program.clone()];
        argv.extend(self.args.iter().cloned());
        let pass_env: &[&str] = match self.harness {
            Some(Harness::Claude) => super::claude::CLAUDE_ENV,
            Some(Harness::Codex) => super::codex::CODEX_ENV,
            _ => &[],
        };
        // A terminal session needs to know its terminal.
        let mut pass_env: Vec<String> = pass_env.iter().map(|s| s.to_string()).collect();
        pass_env.extend(["TERM", "COLORTERM", "COLUMNS", "LINES"].map(String::from));
        Ok(Invocation {
            argv,
            pass_env,
            set_env: Vec::new(),
            prompt_on_stdin: false,
        })
    }

    /// Claude Code: `--settings` with `tdd hook claude`'s entries. Codex: `hooks.json`
    /// in the private `CODEX_HOME` and `--dangerously-bypass-hook-trust` (the home and
    /// its one hook file are tdd's). Both right after the program, before the person's
    /// own arguments. Any other program: nothing.
    fn wire_hooks(&self, invocation: &mut Invocation) -> Result<bool, ProviderError> {
        let Some(harness) = self.harness else {
            return Ok(false);
        };
        let flags = match harness {
            Harness::Codex => match super::codex::session_hooks(invocation)? {
                Some(flag) => vec![flag],
                None => return Ok(false),
            },
            _ => super::claude::session_hooks()?.to_vec(),
        };
        invocation.argv.splice(1..1, flags);
        Ok(true)
    }

    fn parse(&self, _output: &LeafOutput<'_>) -> Parsed {
        Parsed::default()
    }
}
