//! The one output handle: a JSON envelope for machines, readable text for people.
//!
//! Data goes to stdout, exactly one envelope per command in JSON mode.
//! Progress, heartbeats and logs go to stderr (NDJSON lines in JSON mode).

use std::io::IsTerminal;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use serde::Serialize;
use serde_json::Value;

use tdd_engine::observe::progress::Beat;

use crate::error::CommandError;
use crate::exit::Exit;

/// Whether a heartbeat line is on the terminal, to be cleared before the next line.
static HEARTBEAT_SHOWN: AtomicBool = AtomicBool::new(false);

/// How often a running test runner reports, unless `TDD_HEARTBEAT_SECS` says otherwise.
pub const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The envelope format version; bumped on any incompatible change.
pub const ENVELOPE_VERSION: u32 = 1;

/// What an agent or a script should do next: the engine's one closed set of verbs,
/// listed in docs/cli.md.
pub use tdd_engine::run::Verb;

impl tdd_engine::run::Progress for Output {
    fn event(&self, event: &str, fields: Value, text: &str) {
        self.progress(event, fields, text);
    }
}

/// The `next_action` of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextAction {
    /// The one thing to do next.
    pub verb: Verb,
    /// The same, as a sentence for a person.
    pub detail: String,
    /// Whether the command's job is finished, so nothing follows.
    pub terminal: bool,
}

impl NextAction {
    /// A next action that continues work.
    pub fn new(verb: Verb, detail: impl Into<String>) -> NextAction {
        NextAction {
            verb,
            detail: detail.into(),
            terminal: false,
        }
    }

    /// A next action that ends the job.
    pub fn terminal(verb: Verb, detail: impl Into<String>) -> NextAction {
        NextAction {
            verb,
            detail: detail.into(),
            terminal: true,
        }
    }
}

/// What a successful command hands to the output.
#[derive(Debug)]
pub struct Outcome {
    /// The envelope's `data`.
    pub data: Value,
    /// The text shown on a terminal.
    pub text: String,
    /// The envelope's `next_action`.
    pub next_action: Option<NextAction>,
    /// The exit status (`Exit::Ok` unless a command derives it from a leaf).
    pub exit: Exit,
    /// Printed exactly as given in every mode, in place of the envelope or the text: an
    /// agent CLI's hook protocol, which reads its own JSON and no envelope.
    pub raw: Option<Raw>,
}

/// What a command speaking another program's protocol prints.
#[derive(Debug, Default)]
pub struct Raw {
    /// Written to stdout as is.
    pub stdout: String,
    /// Written to stderr as is.
    pub stderr: String,
}

impl Outcome {
    /// An outcome with data and its human rendering.
    pub fn new(data: impl Serialize, text: impl Into<String>) -> Outcome {
        Outcome {
            data: serde_json::to_value(data).unwrap_or(Value::Null),
            text: text.into(),
            next_action: None,
            exit: Exit::Ok,
            raw: None,
        }
    }

    /// An outcome printed exactly as `raw` says, in every mode, with `exit`.
    pub fn raw(raw: Raw, exit: Exit) -> Outcome {
        Outcome {
            data: Value::Null,
            text: String::new(),
            next_action: None,
            exit,
            raw: Some(raw),
        }
    }

    /// Sets the next action.
    pub fn next(mut self, action: NextAction) -> Outcome {
        self.next_action = Some(action);
        self
    }

    /// Sets the exit status of a command that succeeded (the envelope stays `ok`).
    pub fn exit(mut self, exit: Exit) -> Outcome {
        self.exit = exit;
        self
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    envelope_version: u32,
    ok: bool,
    command: &'a str,
    data: &'a Value,
    next_action: Option<&'a NextAction>,
    error: Option<ErrorBody<'a>>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    reason: &'a str,
    message: &'a str,
    hint: Option<&'a str>,
}

/// Renders results and progress in the mode chosen once at startup.
#[derive(Debug, Clone)]
pub struct Output {
    json: bool,
    color: bool,
    quiet: bool,
    verbose: u8,
}

/// What the global flags ask of the output.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    /// `--json`: the envelope, even on a terminal.
    pub json: bool,
    /// `--quiet`: no progress lines.
    pub quiet: bool,
    /// `-v` given this many times.
    pub verbose: u8,
}

impl Output {
    /// JSON when asked or when stdout is not a terminal; colour only on a terminal without
    /// `NO_COLOR`.
    pub fn new(asked: Asked) -> Output {
        let terminal = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Output {
            json: asked.json || !terminal,
            color: terminal && !no_color && std::io::stderr().is_terminal(),
            quiet: asked.quiet,
            verbose: asked.verbose,
        }
    }

    /// Whether the envelope is printed instead of text.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// A detail line on stderr, shown only with `-v`.
    pub fn debug(&self, text: &str) {
        if self.verbose > 0 {
            write_err(&format!("{} {text}\n", self.paint("debug:", "2")));
        }
    }

    /// Prints a command's result and returns its exit status.
    pub fn finish(&self, command: &str, result: Result<Outcome, CommandError>) -> Exit {
        match result {
            Ok(Outcome {
                raw: Some(raw),
                exit,
                ..
            }) => {
                write_out(&raw.stdout);
                write_err(&raw.stderr);
                exit
            }
            Ok(outcome) => {
                if self.json {
                    self.envelope(
                        command,
                        true,
                        &outcome.data,
                        outcome.next_action.as_ref(),
                        None,
                    );
                } else {
                    let mut text = outcome.text;
                    if let Some(next) = &outcome.next_action
                        && !next.terminal
                    {
                        text.push_str(&format!("\nnext: {}\n", next.detail));
                    }
                    write_out(&text);
                }
                outcome.exit
            }
            Err(err) => {
                if self.json {
                    let body = ErrorBody {
                        reason: err.reason,
                        message: &err.message,
                        hint: err.hint.as_deref(),
                    };
                    self.envelope(
                        command,
                        false,
                        &err.data,
                        Some(&err.next_action),
                        Some(body),
                    );
                } else {
                    if let Some(text) = &err.text {
                        write_out(text);
                    }
                    self.error_text(&err);
                }
                err.exit
            }
        }
    }

    fn envelope(
        &self,
        command: &str,
        ok: bool,
        data: &Value,
        next_action: Option<&NextAction>,
        error: Option<ErrorBody<'_>>,
    ) {
        let empty = Value::Object(serde_json::Map::new());
        let data = if data.is_null() { &empty } else { data };
        let envelope = Envelope {
            envelope_version: ENVELOPE_VERSION,
            ok,
            command,
            data,
            next_action,
            error,
        };
        let line = serde_json::to_string(&envelope).unwrap_or_else(|_| "{}".to_string());
        write_out(&format!("{line}\n"));
    }

    fn error_text(&self, err: &CommandError) {
        clear_heartbeat();
        let label = self.paint("error:", "1;31");
        let mut text = format!(
            "{label} {}\n",
            err.detail.as_deref().unwrap_or(&err.message)
        );
        if let Some(hint) = &err.hint {
            text.push_str(&format!("\n{} {hint}\n", self.paint("hint:", "1;36")));
        }
        write_err(&text);
    }

    /// A progress event on stderr: an NDJSON line in JSON mode (with the line of text as
    /// `text`), a line of text otherwise (unless `-q`).
    pub fn progress(&self, event: &str, fields: Value, text: &str) {
        clear_heartbeat();
        if self.json {
            let mut object = serde_json::Map::new();
            object.insert("event".into(), Value::String(event.to_string()));
            object.insert(
                "at".into(),
                Value::String(tdd_engine::ledger::clock::now_rfc3339()),
            );
            if let Value::Object(map) = fields {
                object.extend(map);
            }
            // The line a terminal would have shown, so a captured log (a detached
            // conductor's) reads as text again (`tdd logs`).
            object
                .entry("text")
                .or_insert_with(|| Value::String(text.to_string()));
            write_err(&format!("{}\n", Value::Object(object)));
        } else if !self.quiet {
            write_err(&format!("{text}\n"));
        }
    }

    /// A runner's heartbeat on stderr: an NDJSON `heartbeat` event in JSON mode; on a
    /// terminal one line rewritten in place, cleared by the next progress line; else a
    /// line of text (none with `-q`).
    pub fn heartbeat(&self, beat: &Beat<'_>) {
        let seconds = beat.elapsed.as_secs();
        let seen = beat
            .tests_seen
            .map(|n| format!(", {n} {} finished", if n == 1 { "test" } else { "tests" }))
            .unwrap_or_default();
        let text = format!(
            "  {} ({}): running for {seconds} s{seen}",
            beat.project, beat.label
        );
        if !self.json && !self.quiet && std::io::stderr().is_terminal() {
            HEARTBEAT_SHOWN.store(true, Ordering::Relaxed);
            write_err(&format!("\r{text}\x1b[K"));
            return;
        }
        let mut fields = serde_json::json!({
            "project": beat.project,
            "label": beat.label,
            "elapsed_s": seconds,
        });
        if let Some(n) = beat.tests_seen {
            fields["tests_seen"] = n.into();
        }
        self.progress("heartbeat", fields, &text);
    }

    /// Wraps `text` in an ANSI style when colour is on.
    pub fn paint(&self, text: &str, style: &str) -> String {
        if self.color {
            format!("\x1b[{style}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// Clears a heartbeat line left on the terminal, so the next text starts a line.
fn clear_heartbeat() {
    if HEARTBEAT_SHOWN.swap(false, Ordering::Relaxed) {
        write_err("\r\x1b[K");
    }
}

/// Writes to stdout, ignoring a closed pipe (a reader that went away is not our error).
pub fn write_out(text: &str) {
    clear_heartbeat();
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes to stderr, ignoring a closed pipe.
pub fn write_err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}
