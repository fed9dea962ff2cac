//! The agent CLIs whose hook protocol `tdd hook` speaks, and each one's way of saying
//! an answer: one internal answer (deny this call, tell the agent what was undone, keep
//! the turn going, add context at the start), a format per harness.
//!
//! - Claude Code and Codex: `hookSpecificOutput.permissionDecision`, `decision: block`,
//!   `hookSpecificOutput.additionalContext`.
//! - Gemini CLI: `decision: deny` with `reason` before a tool and at the end of a turn
//!   (`AfterAgent`, which makes the agent go on), `hookSpecificOutput.additionalContext`.
//! - Copilot CLI: `permissionDecision: deny` with `permissionDecisionReason`,
//!   `decision: block` at `agentStop` (the reason becomes the next prompt), and
//!   `additionalContext`.
//!
//! Every harness also takes exit 2 as a block, which is how `tdd hook` fails closed.

use serde_json::json;

/// The agent CLIs whose hook protocol is understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    /// Claude Code (`.claude/settings.json` hooks).
    Claude,
    /// Codex CLI (`.codex/hooks.json`), the same protocol with `apply_patch`.
    Codex,
    /// Gemini CLI (`.gemini/settings.json` hooks: `BeforeTool`, `AfterTool`,
    /// `AfterAgent`, `SessionStart`).
    Gemini,
    /// GitHub Copilot CLI (`.github/hooks/*.json`: `preToolUse`, `postToolUse`,
    /// `agentStop`, `sessionStart`).
    Copilot,
}

/// The four moments `tdd hook` answers, whatever each harness calls them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// Before a tool runs.
    PreToolUse,
    /// After a tool ran.
    PostToolUse,
    /// When the agent would end its turn.
    Stop,
    /// When a session starts.
    SessionStart,
}

impl HookEvent {
    /// Every event, in the order they are wired.
    pub const ALL: [HookEvent; 4] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SessionStart,
    ];

    /// The event as `tdd hook` takes it (`pre-tool-use`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "pre-tool-use",
            HookEvent::PostToolUse => "post-tool-use",
            HookEvent::Stop => "stop",
            HookEvent::SessionStart => "session-start",
        }
    }
}

impl Harness {
    /// Every harness, in the order `tdd doctor` lists them.
    pub const ALL: [Harness; 4] = [
        Harness::Claude,
        Harness::Codex,
        Harness::Gemini,
        Harness::Copilot,
    ];

    /// The harness named `name` (`claude`, `codex`, `gemini`, `copilot`).
    pub fn parse(name: &str) -> Option<Harness> {
        match name {
            "claude" | "claude-code" => Some(Harness::Claude),
            "codex" => Some(Harness::Codex),
            "gemini" | "gemini-cli" => Some(Harness::Gemini),
            "copilot" | "copilot-cli" => Some(Harness::Copilot),
            _ => None,
        }
    }

    /// Its name as `tdd hook` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
            Harness::Copilot => "copilot",
        }
    }

    /// What the harness calls `event` in its settings.
    pub fn event_name(self, event: HookEvent) -> &'static str {
        match (self, event) {
            (Harness::Claude | Harness::Codex, HookEvent::PreToolUse) => "PreToolUse",
            (Harness::Claude | Harness::Codex, HookEvent::PostToolUse) => "PostToolUse",
            (Harness::Claude | Harness::Codex, HookEvent::Stop) => "Stop",
            (Harness::Claude | Harness::Codex | Harness::Gemini, HookEvent::SessionStart) => {
                "SessionStart"
            }
            (Harness::Gemini, HookEvent::PreToolUse) => "BeforeTool",
            (Harness::Gemini, HookEvent::PostToolUse) => "AfterTool",
            (Harness::Gemini, HookEvent::Stop) => "AfterAgent",
            (Harness::Copilot, HookEvent::PreToolUse) => "preToolUse",
            (Harness::Copilot, HookEvent::PostToolUse) => "postToolUse",
            (Harness::Copilot, HookEvent::Stop) => "agentStop",
            (Harness::Copilot, HookEvent::SessionStart) => "sessionStart",
        }
    }

    /// The command that answers `event` for this harness.
    pub fn command(self, event: HookEvent) -> String {
        format!("tdd hook {} {}", self.as_str(), event.as_str())
    }

    /// The answer that denies a tool call, with `reason` shown to the agent.
    pub fn deny(self, reason: &str) -> String {
        line(match self {
            Harness::Claude | Harness::Codex => json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }),
            Harness::Gemini => json!({ "decision": "deny", "reason": reason }),
            Harness::Copilot => json!({
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }),
        })
    }

    /// The answer after a tool ran that tells the agent what tdd undid. For Claude Code
    /// and Codex, `decision: block` feeds `reason` back to the model at once (the tool
    /// has already run; nothing is blocked but the model's going on unaware), and the
    /// same words go in as added context; Gemini CLI and Copilot CLI take the context.
    pub fn after_tool(self, reason: &str) -> String {
        line(match self {
            Harness::Claude | Harness::Codex => json!({
                "decision": "block",
                "reason": reason,
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": reason,
                }
            }),
            Harness::Gemini => json!({
                "hookSpecificOutput": {
                    "hookEventName": "AfterTool",
                    "additionalContext": reason,
                }
            }),
            Harness::Copilot => json!({ "additionalContext": reason }),
        })
    }

    /// The answer that keeps the agent from ending its turn, with `reason` as what to do
    /// next.
    pub fn keep_going(self, reason: &str) -> String {
        line(match self {
            Harness::Claude | Harness::Codex | Harness::Copilot => {
                json!({ "decision": "block", "reason": reason })
            }
            Harness::Gemini => json!({ "decision": "deny", "reason": reason }),
        })
    }

    /// The answer that adds `context` to the agent's session at its start.
    pub fn session_context(self, context: &str) -> String {
        line(match self {
            Harness::Claude | Harness::Codex | Harness::Gemini => json!({
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": context,
                }
            }),
            Harness::Copilot => json!({ "additionalContext": context }),
        })
    }
}

/// `answer` as one line of stdout.
fn line(answer: serde_json::Value) -> String {
    format!("{answer}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_harness_is_answered_in_its_own_words() {
        let read = |text: String| -> serde_json::Value {
            serde_json::from_str(text.trim_end()).expect("one line of JSON")
        };
        assert_eq!(
            read(Harness::Claude.deny("no"))["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
        assert_eq!(
            read(Harness::Gemini.deny("no")),
            json!({ "decision": "deny", "reason": "no" })
        );
        assert_eq!(
            read(Harness::Copilot.deny("no")),
            json!({ "permissionDecision": "deny", "permissionDecisionReason": "no" })
        );
        assert_eq!(
            read(Harness::Copilot.keep_going("go on"))["decision"],
            "block"
        );
        assert_eq!(
            read(Harness::Gemini.keep_going("go on"))["decision"],
            "deny"
        );
        assert_eq!(
            read(Harness::Gemini.after_tool("undone"))["hookSpecificOutput"]["hookEventName"],
            "AfterTool"
        );
        assert_eq!(
            read(Harness::Copilot.session_context("c"))["additionalContext"],
            "c"
        );
        for harness in Harness::ALL {
            assert_eq!(Harness::parse(harness.as_str()), Some(harness));
        }
        assert_eq!(Harness::Gemini.event_name(HookEvent::Stop), "AfterAgent");
        assert_eq!(
            Harness::Copilot.event_name(HookEvent::PreToolUse),
            "preToolUse"
        );
    }
}
