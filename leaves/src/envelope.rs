//! The provider-neutral envelope: what a leaf is asked (`Request`) and what it
//! answered (`Response`), plus what a provider can do (`Capabilities`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tdd_engine::run::Phase;
use tdd_prompts::Prompt;
use tdd_prompts::Role;

/// What a provider can do. The conductor degrades by these, never by provider name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// The CLI streams events while it works, so an idle timeout is meaningful.
    pub streaming: bool,
    /// A session can be resumed by id.
    pub session_resume: bool,
    /// The CLI reports its cost in USD.
    pub cost_reporting: bool,
    /// The CLI reports token usage.
    pub usage_reporting: bool,
    /// Tools can be allowed and denied per leaf.
    pub tool_restriction: bool,
    /// The CLI has a mode that cannot write files (used for verifiers).
    pub read_only_mode: bool,
}

impl Capabilities {
    /// None of them: a CLI tdd knows nothing of but how to start it.
    pub const NONE: Capabilities = Capabilities {
        streaming: false,
        session_resume: false,
        cost_reporting: false,
        usage_reporting: false,
        tool_restriction: false,
        read_only_mode: false,
    };
}

/// One leaf to run: the prompt (which carries role and phase), where, and limits.
#[derive(Debug, Clone)]
pub struct Request {
    /// The rendered prompt.
    pub prompt: Prompt,
    /// The issue number (`TDD_ISSUE`).
    pub issue: u64,
    /// The plan cycle, 0 for a planner (`TDD_STEP`).
    pub step: u32,
    /// 1 for the first attempt at this role, step and phase; more for revisions.
    pub attempt: u32,
    /// The run the leaf works for, when one is active; its events go with the run.
    pub run_id: Option<String>,
    /// The work tree the leaf runs in.
    pub workdir: PathBuf,
    /// Paths the leaf must not change in this phase (passed to CLIs that can lock
    /// files, such as aider's `--read`).
    pub locked_files: Vec<String>,
    /// The most turns the CLI may take, where it has such a limit.
    pub max_turns: Option<u32>,
    /// Wall-clock limit.
    pub wall_timeout: Duration,
    /// Silence limit.
    pub idle_timeout: Option<Duration>,
    /// How the leaf is confined. A confined leaf also gets a private temporary
    /// directory (`TMPDIR`) that its policy lets it write.
    pub sandbox: tdd_supervisor::Sandbox,
    /// Variables set for this leaf on top of the provider's (the engine relay's socket).
    pub set_env: Vec<(String, String)>,
    /// The agent CLI runs `tdd hook` (the `tdd` first on the leaf's `PATH`) before and
    /// after its tools, for this leaf's session only, where its provider can wire that
    /// ([`crate::Provider::wire_hooks`]). Guidance: the gate judges either way.
    pub hooks: bool,
}

impl Request {
    /// A request with a 30-minute wall limit, a 5-minute idle limit, attempt 1.
    pub fn new(prompt: Prompt, issue: u64, step: u32, workdir: impl Into<PathBuf>) -> Request {
        Request {
            prompt,
            issue,
            step,
            attempt: 1,
            run_id: None,
            workdir: workdir.into(),
            locked_files: Vec::new(),
            max_turns: None,
            wall_timeout: Duration::from_secs(1800),
            idle_timeout: Some(Duration::from_secs(300)),
            sandbox: tdd_supervisor::Sandbox::Off,
            set_env: Vec::new(),
            hooks: false,
        }
    }

    /// The role, from the prompt.
    pub fn role(&self) -> Role {
        self.prompt.role()
    }

    /// The phase, from the prompt (`None` for a planner).
    pub fn phase(&self) -> Option<Phase> {
        self.prompt.phase()
    }

    /// The phase as named in `TDD_PHASE` and fixtures: `red`, `green`, `refactor`,
    /// `pin`, or `plan` for a planner.
    pub fn phase_name(&self) -> &'static str {
        self.phase()
            .and_then(|phase| tdd_prompts::phase_name(phase).ok())
            .unwrap_or("plan")
    }
}

/// Tokens a leaf used, normalised across CLIs: `input_tokens` never counts cached
/// tokens (Codex reports them inside its input count; they are taken out), and every
/// figure covers the whole leaf, subagents included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Input tokens (not counting cache reads).
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from a prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to a prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Output tokens spent on reasoning, when the CLI reports them apart (they are
    /// part of `output_tokens` too, as the model bills them).
    #[serde(default)]
    pub reasoning_tokens: u64,
}

/// How a leaf ended, from the supervisor's exit class and the provider's stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Completion {
    /// The CLI finished its work and said so in its terminal event.
    Completed,
    /// The CLI finished but reported an error (a turn limit, an API failure).
    Failed {
        /// What it reported.
        reason: String,
    },
    /// The CLI ended without its terminal event, died of a signal, or never ran.
    Crashed {
        /// What is known.
        reason: String,
    },
    /// The supervisor killed it for a limit (wall, idle, output).
    KilledStuck {
        /// Which limit.
        reason: String,
    },
    /// Aborted on request.
    Aborted,
    /// The CLI could not reach its model: refused credentials, an unreachable or
    /// failing API. Retrying the same leaf will not help until that is fixed.
    ProviderUnavailable {
        /// What the CLI reported.
        reason: String,
    },
}

impl Completion {
    /// The snake-case tag.
    pub fn tag(&self) -> &'static str {
        match self {
            Completion::Completed => "completed",
            Completion::Failed { .. } => "failed",
            Completion::Crashed { .. } => "crashed",
            Completion::KilledStuck { .. } => "killed_stuck",
            Completion::Aborted => "aborted",
            Completion::ProviderUnavailable { .. } => "provider_unavailable",
        }
    }
}

/// What a leaf answered, whatever CLI ran it. The provider's name is in `meta` only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Response {
    /// The leaf id.
    pub leaf_id: String,
    /// How it ended.
    pub completion: Completion,
    /// The supervisor's exit class.
    pub exit: tdd_supervisor::ExitClass,
    /// The final text (the CLI's last message, or its output when it has no other).
    pub text: String,
    /// The CLI's session id, when it has one.
    pub session_id: Option<String>,
    /// Turns taken, when reported.
    pub turns: Option<u32>,
    /// Token usage, when reported.
    pub usage: Option<Usage>,
    /// Cost in USD, when reported.
    pub cost_usd: Option<f64>,
    /// Provider metadata (`provider`, model, CLI-specific facts).
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// What aborting a run did. Aborting is idempotent: every call succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortOutcome {
    /// The run had not started; it is marked aborted and will never start.
    NotStarted,
    /// The run was running; its supervisor was asked to kill it.
    Killed,
    /// The run had already ended (or been aborted); nothing was done.
    AlreadyOver,
}
