//! `scripted`: a provider that replays a fixture file. Zero network, zero keys.
//!
//! The leaf is a real process: the `tdd` binary re-executed in a hidden mode
//! (`tdd __scripted-leaf --fixture F --role R --step N --phase P --attempt A
//! --result FILE`), launched under the supervisor like every other CLI. It picks
//! the fixture entry for its role, step, phase and attempt and performs its
//! actions in order: write, patch, delete, run, print, garbage, verdict, usage,
//! sleep, hang, exit, crash. So a fixture can script honest agents and misbehaving
//! ones (cheats, hangs, crashes, garbage). The format is documented in
//! `docs/providers.md`.
//!
//! A leaf that performs all its actions writes its result record (`--result`) and
//! exits 0; `exit`, `crash` and `hang` end it without one, which reads as a crash,
//! exactly like a real CLI that dies before its final event.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use serde_json::json;

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

/// The fixture format version this build reads.
pub const FIXTURE_VERSION: u32 = 1;

/// The hidden subcommand that runs a scripted leaf.
pub const SCRIPTED_LEAF_COMMAND: &str = "__scripted-leaf";

/// A whole fixture file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Must be [`FIXTURE_VERSION`].
    pub version: u32,
    /// The scripted leaves.
    #[serde(default)]
    pub leaf: Vec<ScriptedLeaf>,
}

/// One scripted leaf: which runs it answers, and what it does.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedLeaf {
    /// `planner`, `developer` or `verifier`.
    pub role: String,
    /// The step; any step when absent.
    #[serde(default)]
    pub step: Option<u32>,
    /// `red`, `green`, `refactor`, `pin` or `plan`; any phase when absent.
    #[serde(default)]
    pub phase: Option<String>,
    /// The attempt; any attempt when absent.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// The actions, in order.
    #[serde(default, rename = "do")]
    pub actions: Vec<Action>,
}

/// Where `print` writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output (the leaf's final text).
    #[default]
    Stdout,
    /// Standard error.
    Stderr,
}

/// One action of a scripted leaf.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Writes a file (directories created), relative to the work tree or absolute.
    Write {
        /// The path.
        path: String,
        /// The whole content.
        content: String,
    },
    /// Applies a unified diff with `git apply`.
    Patch {
        /// The diff.
        diff: String,
    },
    /// Deletes a file.
    Delete {
        /// The path.
        path: String,
    },
    /// Runs a command (argv, found on the leaf's `PATH`) with the leaf's
    /// environment; its output goes to the leaf's output.
    Run {
        /// The argument vector.
        argv: Vec<String>,
        /// End the leaf (without a result) when the command fails.
        #[serde(default)]
        check: bool,
    },
    /// Prints text.
    Print {
        /// The text (printed as is; add `\n` yourself).
        text: String,
        /// Where.
        #[serde(default)]
        stream: Stream,
    },
    /// Prints bytes that are not text (invalid UTF-8, control bytes).
    Garbage {
        /// How many.
        bytes: u64,
    },
    /// Submits a verdict through `tdd verdict` on the leaf's `PATH`.
    Verdict {
        /// `accept` or `reject`.
        decision: String,
        /// The reason.
        reason: String,
        /// The findings.
        #[serde(default)]
        findings: Vec<String>,
    },
    /// Sets the usage and cost the leaf reports in its result.
    Usage {
        /// Input tokens.
        #[serde(default)]
        input_tokens: u64,
        /// Output tokens.
        #[serde(default)]
        output_tokens: u64,
        /// Cache-read tokens.
        #[serde(default)]
        cache_read_tokens: u64,
        /// Cost in USD.
        #[serde(default)]
        cost_usd: Option<f64>,
    },
    /// Sleeps (a slow agent; not for synchronisation).
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// Blocks forever, silently: a stuck agent.
    Hang,
    /// Exits at once with this code, without a result: an agent that died.
    Exit {
        /// The exit code.
        code: i32,
    },
    /// Kills itself with a signal (`SIGSEGV`, `SIGABRT`, `SIGKILL`, `SIGTERM`).
    Crash {
        /// The signal's name.
        signal: String,
    },
}

/// The record a scripted leaf writes when it completes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedResult {
    /// The format version.
    pub version: u32,
    /// Actions performed.
    pub turns: u32,
    /// Usage, as scripted (or estimated from bytes: 4 bytes a token).
    pub usage: Usage,
    /// Cost, as scripted.
    pub cost_usd: Option<f64>,
    /// The session id (the leaf id).
    pub session_id: String,
}

/// The scripted provider: a fixture, and how to re-execute `tdd` as a leaf.
#[derive(Debug, Clone)]
pub struct Scripted {
    fixture: PathBuf,
    program: PathBuf,
    args: Vec<OsString>,
}

impl Scripted {
    /// Replays `fixture`; each leaf is `program args... <leaf arguments>`, which must
    /// call [`run_leaf`] (the `tdd` binary: `current_exe()` and
    /// `["__scripted-leaf"]`).
    pub fn new<I, S>(fixture: impl Into<PathBuf>, program: impl Into<PathBuf>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Scripted {
            fixture: fixture.into(),
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// Reads and checks a fixture file.
    pub fn load(path: &Path) -> Result<Fixture, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProviderError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let fixture: Fixture = toml::from_str(&text)
            .map_err(|e| ProviderError::Config(format!("{}: {e}", path.display())))?;
        if fixture.version != FIXTURE_VERSION {
            return Err(ProviderError::Config(format!(
                "{}: fixture version {} is not the supported {FIXTURE_VERSION}",
                path.display(),
                fixture.version
            )));
        }
        Ok(fixture)
    }
}

fn lossy(value: &OsString) -> String {
    value.to_string_lossy().into_owned()
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
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

    fn invocation(
        &self,
        request: &Request,
        files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        // Fail at preparation, not inside the leaf, when the fixture is unreadable.
        Scripted::load(&self.fixture)?;
        let fixture = self
            .fixture
            .canonicalize()
            .unwrap_or_else(|_| self.fixture.clone());
        let mut argv = vec![self.program.display().to_string()];
        argv.extend(self.args.iter().map(lossy));
        argv.extend([
            "--fixture".to_string(),
            fixture.display().to_string(),
            "--role".into(),
            request.role().to_string(),
            "--step".into(),
            request.step.to_string(),
            "--phase".into(),
            request.phase_name().to_string(),
            "--attempt".into(),
            request.attempt.to_string(),
            "--result".into(),
            files.result.display().to_string(),
        ]);
        // A scripted leaf may run real suites (`tdd test`): it needs to find the
        // toolchain the caller uses. These name directories, never secrets.
        Ok(Invocation {
            argv,
            pass_env: ["RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"]
                .map(String::from)
                .to_vec(),
            ..Invocation::default()
        })
    }

    /// `--hooks`: the leaf asks `tdd hook claude` before each write and after each
    /// command, as Claude Code would (see `scripted_hooks`).
    fn wire_hooks(&self, invocation: &mut Invocation) -> Result<bool, ProviderError> {
        invocation
            .argv
            .push(super::scripted_hooks::HOOKS_FLAG.to_string());
        Ok(true)
    }

    fn parse(&self, output: &LeafOutput<'_>) -> Parsed {
        let result = crate::provider::read_regular(&output.files.result)
            .and_then(|bytes| serde_json::from_slice::<ScriptedResult>(&bytes).ok());
        let mut meta = serde_json::Map::new();
        meta.insert("fixture".into(), json!(self.fixture));
        match result {
            Some(result) => Parsed {
                terminal: true,
                error: None,
                text: tail(output.stdout, 64 * 1024),
                session_id: Some(result.session_id),
                turns: Some(result.turns),
                usage: Some(result.usage),
                cost_usd: result.cost_usd,
                meta,
                ..Parsed::default()
            },
            None => Parsed {
                text: tail(output.stdout, 64 * 1024),
                meta,
                ..Parsed::default()
            },
        }
    }
}

/// The arguments of a scripted leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeafArgs {
    fixture: PathBuf,
    role: String,
    step: u32,
    phase: String,
    attempt: u32,
    result: PathBuf,
    hooks: bool,
}

fn parse_args(args: &[String]) -> Result<LeafArgs, String> {
    let get = |name: &str| -> Result<String, String> {
        let position = args
            .iter()
            .position(|a| a == name)
            .ok_or_else(|| format!("missing {name}"))?;
        args.get(position + 1)
            .cloned()
            .ok_or_else(|| format!("{name} needs a value"))
    };
    let number = |text: String, name: &str| {
        text.parse::<u32>()
            .map_err(|_| format!("{name} must be a number, not {text:?}"))
    };
    Ok(LeafArgs {
        fixture: PathBuf::from(get("--fixture")?),
        role: get("--role")?,
        step: number(get("--step")?, "--step")?,
        phase: get("--phase")?,
        attempt: number(get("--attempt")?, "--attempt")?,
        result: PathBuf::from(get("--result")?),
        hooks: args.iter().any(|a| a == super::scripted_hooks::HOOKS_FLAG),
    })
}

/// The entry for a run: entries that match, the most specific first (each of step,
/// phase and attempt given counts), ties to the earliest in the file.
fn select<'a>(fixture: &'a Fixture, args: &LeafArgs) -> Option<&'a ScriptedLeaf> {
    fixture
        .leaf
        .iter()
        .filter(|leaf| {
            leaf.role == args.role
                && leaf.step.is_none_or(|s| s == args.step)
                && leaf.phase.as_deref().is_none_or(|p| p == args.phase)
                && leaf.attempt.is_none_or(|a| a == args.attempt)
        })
        .enumerate()
        .max_by_key(|(index, leaf)| {
            let specific = usize::from(leaf.step.is_some())
                + usize::from(leaf.phase.is_some())
                + usize::from(leaf.attempt.is_some());
            (specific, std::cmp::Reverse(*index))
        })
        .map(|(_, leaf)| leaf)
}

/// Runs a scripted leaf: `args` are the arguments after `__scripted-leaf`. Returns
/// the process exit code (or never returns, for `hang` and `crash`).
pub fn run_leaf(args: &[String]) -> i32 {
    let args = match parse_args(args) {
        Ok(args) => args,
        Err(message) => return fail(&format!("scripted leaf: {message}")),
    };
    let fixture = match Scripted::load(&args.fixture) {
        Ok(fixture) => fixture,
        Err(error) => return fail(&format!("scripted leaf: {error}")),
    };
    let Some(leaf) = select(&fixture, &args) else {
        return fail(&format!(
            "scripted leaf: {} has no leaf for role={} step={} phase={} attempt={}",
            args.fixture.display(),
            args.role,
            args.step,
            args.phase,
            args.attempt
        ));
    };
    let mut usage = None;
    let mut cost_usd = None;
    let mut printed: u64 = 0;
    for action in &leaf.actions {
        if args.hooks
            && let Some(reason) = super::scripted_hooks::denied(action)
        {
            let said = format!(
                "the hook denied writing {}: {reason}\n",
                super::scripted_hooks::target(action)
            );
            printed += said.len() as u64;
            out(Stream::Stdout, said.as_bytes());
            continue;
        }
        let step = perform(action, &mut printed);
        if args.hooks
            && let Some(reason) = super::scripted_hooks::undone(action)
        {
            let said = format!("the hook after the command: {reason}\n");
            printed += said.len() as u64;
            out(Stream::Stdout, said.as_bytes());
        }
        match step {
            Step::Next => {}
            Step::Usage(scripted, cost) => {
                usage = Some(scripted);
                cost_usd = cost;
            }
            Step::End(code) => return code,
        }
    }
    let prompt_bytes = std::env::var("TDD_LEAF_ID")
        .ok()
        .and_then(|_| std::fs::metadata(args.result.with_file_name("prompt.md")).ok())
        .map_or(0, |m| m.len());
    let result = ScriptedResult {
        version: FIXTURE_VERSION,
        turns: u32::try_from(leaf.actions.len()).unwrap_or(u32::MAX),
        usage: usage.unwrap_or(Usage {
            input_tokens: prompt_bytes.div_ceil(4),
            output_tokens: printed.div_ceil(4),
            ..Usage::default()
        }),
        cost_usd,
        session_id: std::env::var("TDD_LEAF_ID").unwrap_or_default(),
    };
    let text = serde_json::to_string(&result).unwrap_or_default();
    if let Err(error) = std::fs::write(&args.result, text) {
        return fail(&format!(
            "scripted leaf: failed to write {}: {error}",
            args.result.display()
        ));
    }
    0
}

enum Step {
    Next,
    Usage(Usage, Option<f64>),
    End(i32),
}

fn fail(message: &str) -> i32 {
    let _ = writeln!(std::io::stderr(), "{message}");
    64
}

fn out(stream: Stream, bytes: &[u8]) {
    let _ = match stream {
        Stream::Stdout => std::io::stdout()
            .write_all(bytes)
            .and_then(|()| std::io::stdout().flush()),
        Stream::Stderr => std::io::stderr().write_all(bytes),
    };
}

fn perform(action: &Action, printed: &mut u64) -> Step {
    match action {
        Action::Write { path, content } => {
            let path = Path::new(path);
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                let _ = std::fs::create_dir_all(parent);
            }
            if let Err(error) = std::fs::write(path, content) {
                return Step::End(fail(&format!(
                    "scripted leaf: write {}: {error}",
                    path.display()
                )));
            }
        }
        Action::Delete { path } => {
            if let Err(error) = std::fs::remove_file(path) {
                return Step::End(fail(&format!("scripted leaf: delete {path}: {error}")));
            }
        }
        Action::Patch { diff } => {
            let child = Command::new("git")
                .args(["apply", "--whitespace=nowarn", "-"])
                .stdin(Stdio::piped())
                .spawn();
            let status = child.and_then(|mut child| {
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(diff.as_bytes())?;
                }
                child.wait()
            });
            if !status.is_ok_and(|s| s.success()) {
                return Step::End(fail("scripted leaf: the patch does not apply"));
            }
        }
        Action::Run { argv, check } => {
            let Some((program, rest)) = argv.split_first() else {
                return Step::End(fail("scripted leaf: run needs an argv"));
            };
            let status = Command::new(program).args(rest).status();
            let ok = status.as_ref().is_ok_and(|s| s.success());
            if !ok {
                let _ = writeln!(std::io::stderr(), "scripted leaf: {argv:?}: {status:?}");
                if *check {
                    return Step::End(status.ok().and_then(|s| s.code()).unwrap_or(1).max(1));
                }
            }
        }
        Action::Print { text, stream } => {
            *printed += text.len() as u64;
            out(*stream, text.as_bytes());
        }
        Action::Garbage { bytes } => {
            let mut state: u32 = 0x9e37_79b9;
            let noise: Vec<u8> = (0..*bytes)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    (state >> 24) as u8 | 0x80
                })
                .collect();
            *printed += bytes;
            out(Stream::Stdout, &noise);
        }
        Action::Verdict {
            decision,
            reason,
            findings,
        } => {
            let mut command = Command::new("tdd");
            command.args(["verdict", decision, "--reason", reason]);
            for finding in findings {
                command.args(["--finding", finding]);
            }
            let _ = command.status();
        }
        Action::Usage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cost_usd,
        } => {
            let usage = Usage {
                input_tokens: *input_tokens,
                output_tokens: *output_tokens,
                cache_read_tokens: *cache_read_tokens,
                ..Usage::default()
            };
            return Step::Usage(usage, *cost_usd);
        }
        Action::Sleep { ms } => std::thread::sleep(Duration::from_millis(*ms)),
        Action::Hang => loop {
            std::thread::park();
        },
        Action::Exit { code } => return Step::End(*code),
        Action::Crash { signal } => {
            use nix::sys::signal::Signal;
            let signal = match signal.as_str() {
                "SIGSEGV" => Signal::SIGSEGV,
                "SIGABRT" => Signal::SIGABRT,
                "SIGKILL" => Signal::SIGKILL,
                "SIGTERM" => Signal::SIGTERM,
                other => return Step::End(fail(&format!("scripted leaf: unknown signal {other}"))),
            };
            let _ = nix::sys::signal::raise(signal);
            // A handled or blocked signal: die the hard way.
            let _ = nix::sys::signal::raise(Signal::SIGKILL);
            return Step::End(137);
        }
    }
    Step::Next
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = r#"
version = 1

[[leaf]]
role = "developer"

[[leaf.do]]
action = "print"
text = "any developer\n"

[[leaf]]
role = "developer"
step = 1
phase = "red"

[[leaf.do]]
action = "write"
path = "tests/test_a.py"
content = "def test_a():\n    assert False\n"

[[leaf.do]]
action = "hang"

[[leaf]]
role = "developer"
step = 1
phase = "red"
attempt = 2

[[leaf.do]]
action = "crash"
signal = "SIGSEGV"
"#;

    fn args(role: &str, step: u32, phase: &str, attempt: u32) -> LeafArgs {
        LeafArgs {
            fixture: PathBuf::new(),
            role: role.into(),
            step,
            phase: phase.into(),
            attempt,
            result: PathBuf::new(),
            hooks: false,
        }
    }

    #[test]
    fn the_most_specific_entry_wins() {
        let fixture: Fixture = toml::from_str(FIXTURE).expect("parses");
        let pick = |a: &LeafArgs| select(&fixture, a).map(|l| l.actions[0].clone());
        assert!(matches!(
            pick(&args("developer", 1, "red", 1)),
            Some(Action::Write { .. })
        ));
        assert!(matches!(
            pick(&args("developer", 1, "red", 2)),
            Some(Action::Crash { .. })
        ));
        assert!(matches!(
            pick(&args("developer", 3, "green", 1)),
            Some(Action::Print { .. })
        ));
        assert_eq!(pick(&args("verifier", 1, "red", 1)), None);
    }

    #[test]
    fn the_example_fixtures_load() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scripted");
        let mut loaded = 0;
        for entry in std::fs::read_dir(examples).expect("examples").flatten() {
            let fixture = Scripted::load(&entry.path()).expect("loads");
            assert!(!fixture.leaf.is_empty());
            loaded += 1;
        }
        assert!(loaded > 0);
    }

    #[test]
    fn unknown_actions_and_fields_are_refused() {
        let bad_action =
            "version = 1\n[[leaf]]\nrole = \"developer\"\n[[leaf.do]]\naction = \"teleport\"\n";
        assert!(toml::from_str::<Fixture>(bad_action).is_err());
        let bad_field = "version = 1\n[[leaf]]\nrole = \"developer\"\n[[leaf.do]]\naction = \"print\"\ntext = \"x\"\ncolour = \"red\"\n";
        assert!(toml::from_str::<Fixture>(bad_field).is_err());
    }
}
