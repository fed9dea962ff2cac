//! Provider-specific promises about how each CLI is started, one row per promise.
//!
//! A row names a provider, the role it is started in and the caller's environment,
//! then what the launch must hold: runs of arguments, arguments it must never name,
//! the variables it sets, or the refusal that role gets. Adding a promise adds a row.

use tdd_leaves::Provider;
use tdd_leaves::Request;
use tdd_leaves::providers::aider::Aider;
use tdd_leaves::providers::claude;
use tdd_leaves::providers::claude::Claude;
use tdd_leaves::providers::codex::Codex;

use crate::support::Sandbox;
use crate::support::fail;

/// The request a row starts its provider with.
#[derive(Debug, Clone, Copy)]
pub enum Role {
    Developer,
    Verifier,
}

/// A check on a launch's argument vector.
type ArgvCheck = fn(&[String]) -> Result<(), String>;

/// One promise about a provider's launch.
pub struct Launch {
    /// The trial's name, after the provider's.
    pub name: &'static str,
    pub provider: fn() -> Box<dyn Provider>,
    pub role: Role,
    /// The variables of the process that launches the leaf.
    pub caller: &'static [(&'static str, &'static str)],
    /// Runs of consecutive arguments, split on spaces, that the argv must hold. A
    /// last word ending in `*` matches any argument it begins.
    pub holds: &'static [&'static str],
    /// Arguments the argv must never hold.
    pub never: &'static [&'static str],
    /// The variables adapting the launch to the caller adds, exactly; `None` leaves
    /// them unchecked.
    pub sets: Option<&'static [(&'static str, &'static str)]>,
    /// The argument that must come last.
    pub last: Option<&'static str>,
    /// Text the refusal to start this role must hold; the launch must then fail.
    pub refused: Option<&'static str>,
    /// A further check on the argv.
    pub also: Option<ArgvCheck>,
}

/// A row with nothing promised yet, for `..` in the table.
const NONE: Launch = Launch {
    name: "",
    provider: claude_provider,
    role: Role::Developer,
    caller: &[],
    holds: &[],
    never: &[],
    sets: None,
    last: None,
    refused: None,
    also: None,
};

fn claude_provider() -> Box<dyn Provider> {
    Box::new(Claude::new(None))
}

fn codex_provider() -> Box<dyn Provider> {
    Box::new(Codex::new(None))
}

fn aider_provider() -> Box<dyn Provider> {
    Box::new(Aider::new(None))
}

/// Tools Claude Code 2.1 no longer has: naming one makes it print a warning.
const CLAUDE_GONE: &[&str] = &["LS", "MultiEdit", "WebFetch", "WebSearch"];

/// What codex needs so that `tdd` runs inside its sandbox and writes its ledger.
const CODEX_SANDBOX: &[&str] = &[
    "--sandbox workspace-write",
    "-c allow_login_shell=false",
    "-c sandbox_workspace_write.writable_roots=[\"/ledger\"]",
    "-c sandbox_workspace_write.exclude_slash_tmp=true",
    "-c sandbox_workspace_write.exclude_tmpdir_env_var=true",
];

/// Every launch promise.
pub const LAUNCHES: &[Launch] = &[
    Launch {
        // No tool that writes but Bash, and Bash only for tdd and git reads; no
        // settings from the checkout it judges (hooks, permission rules the developer
        // may have committed), the user's own only.
        name: "a_verifier_cannot_write",
        role: Role::Verifier,
        holds: &[
            "--tools Read,Glob,Grep,Bash",
            "--permission-mode dontAsk",
            "--strict-mcp-config",
            "--setting-sources user",
        ],
        never: CLAUDE_GONE,
        also: Some(claude_rules_only_read),
        ..NONE
    },
    Launch {
        name: "a_developer_gets_a_session_and_the_system_prompt",
        holds: &[
            "-p",
            "--verbose",
            "--session-id *",
            "--permission-mode *",
            "--append-system-prompt *",
        ],
        never: CLAUDE_GONE,
        ..NONE
    },
    Launch {
        name: "retries_are_capped",
        sets: Some(&[("CLAUDE_CODE_MAX_RETRIES", claude::MAX_RETRIES)]),
        ..NONE
    },
    Launch {
        name: "the_callers_retry_cap_is_kept",
        caller: &[("CLAUDE_CODE_MAX_RETRIES", "9")],
        sets: Some(&[]),
        ..NONE
    },
    Launch {
        name: "the_sandbox_lets_a_verifier_write_its_ledger",
        provider: codex_provider,
        role: Role::Verifier,
        holds: CODEX_SANDBOX,
        ..NONE
    },
    Launch {
        name: "the_sandbox_lets_a_developer_write_its_ledger",
        provider: codex_provider,
        holds: CODEX_SANDBOX,
        ..NONE
    },
    Launch {
        name: "the_endpoint_and_key_come_from_the_environment",
        provider: codex_provider,
        caller: &[
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("OPENAI_API_KEY", "sk-test"),
        ],
        holds: &[
            "-c model_provider=\"tdd_openai\"",
            "-c model_providers.tdd_openai.base_url=\"http://127.0.0.1:9/v1\"",
            "-c model_providers.tdd_openai.env_key=\"CODEX_API_KEY\"",
            "-c model_providers.tdd_openai.supports_websockets=false",
        ],
        sets: Some(&[("CODEX_API_KEY", "sk-test")]),
        last: Some("-"),
        ..NONE
    },
    Launch {
        // `--analytics-disable` would edit the user's settings for good.
        name: "nothing_is_left_in_the_work_tree",
        provider: aider_provider,
        holds: &[
            "--message-file /leaf/prompt.md",
            "--yes-always",
            "--no-auto-commits",
            "--no-stream",
            "--no-pretty",
            "--read app/duration.py",
            "--no-analytics",
            "--no-git",
            "--no-gitignore",
            "--map-tokens 0",
            "--chat-history-file /leaf/*",
            "--input-history-file /leaf/*",
        ],
        never: &["--analytics-disable"],
        ..NONE
    },
    Launch {
        name: "is_refused_as_a_verifier",
        provider: aider_provider,
        role: Role::Verifier,
        refused: Some("cannot be a verifier"),
        ..NONE
    },
];

/// Every `--allowedTools` rule of a claude verifier only reads.
fn claude_rules_only_read(argv: &[String]) -> Result<(), String> {
    let rules_at = argv
        .iter()
        .position(|a| a == "--allowedTools")
        .ok_or("no allow list")?;
    let broad = argv[rules_at + 1..].iter().find(|rule| {
        !(["Read", "Glob", "Grep"].contains(&rule.as_str())
            || rule.starts_with("Bash(tdd:")
            || rule.starts_with("Bash(git diff:")
            || rule.starts_with("Bash(git show:")
            || rule.starts_with("Bash(git log:"))
    });
    match broad {
        Some(rule) => fail("a verifier rule allows more than reading", rule),
        None => Ok(()),
    }
}

/// Whether `argv` holds the run of arguments `words` somewhere, consecutively.
fn holds_run(argv: &[String], words: &[&str]) -> bool {
    argv.windows(words.len()).any(|window| {
        window
            .iter()
            .zip(words)
            .all(|(arg, word)| match word.strip_suffix('*') {
                Some(prefix) => arg.starts_with(prefix),
                None => arg == word,
            })
    })
}

/// Checks one row.
pub fn check(launch: &Launch) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let request: Request = match launch.role {
        Role::Developer => sandbox.developer_request()?,
        Role::Verifier => sandbox.verifier_request()?,
    };
    let files = tdd_leaves::LeafFiles {
        dir: "/leaf".into(),
        prompt: "/leaf/prompt.md".into(),
        result: "/leaf/result.json".into(),
        ledger_dir: "/ledger".into(),
    };
    let provider = (launch.provider)();
    let invocation = provider.invocation(&request, &files);
    let mut invocation = match (invocation, launch.refused) {
        (Err(error), Some(expected)) if error.to_string().contains(expected) => return Ok(()),
        (Ok(invocation), None) => invocation,
        (other, _) => return fail("the launch", other.map(|i| i.argv)),
    };
    let caller = launch
        .caller
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let before = invocation.set_env.len();
    provider.adapt(&mut invocation, &caller);
    let added = invocation.set_env.get(before..).unwrap_or_default();
    let argv = &invocation.argv;
    for hold in launch.holds {
        let words: Vec<&str> = hold.split(' ').collect();
        if !holds_run(argv, &words) {
            return fail("missing", (hold, argv));
        }
    }
    if let Some(named) = argv.iter().find(|a| launch.never.contains(&a.as_str())) {
        return fail("names what it must not", (named, argv));
    }
    if let Some(sets) = launch.sets {
        let expected: Vec<(String, String)> = sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if added != expected {
            return fail("set_env", &invocation.set_env);
        }
    }
    if let Some(last) = launch.last
        && argv.last().map(String::as_str) != Some(last)
    {
        return fail("the last argument", argv);
    }
    launch.also.map_or(Ok(()), |also| also(argv))
}
