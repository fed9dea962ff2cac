//! What an agent CLI's hook asks before a tool runs, and how to answer it.
//!
//! Claude Code and Codex send a `PreToolUse` event as JSON on stdin (`tool_name`,
//! `tool_input`, `cwd`, ...) and read a decision from stdout
//! (`hookSpecificOutput.permissionDecision`), or treat exit 2 as a block with stderr
//! as the reason. This module turns such an event into the paths the tool would
//! write ([`ToolCall::writes`]) and renders a denial. Which of those paths are locked
//! is the engine's question, not this module's.
//!
//! Hooks are guidance: the engine's gates revert a locked change whatever a hook said.
//! The shell analysis is best effort (redirections, `tee`, `sed -i`, `cp`, `mv`, `dd`,
//! `bash -c`, inline `python -c`/`node -e` code); what it misses, the gate catches.

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;

pub use crate::harness::Harness;

/// A hook event that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// Stdin is not the JSON object the harness sends.
    #[error("the hook's input is not a JSON object: {0}")]
    NotJson(String),
    /// A field the event must have is missing or of the wrong type.
    #[error("the hook's input has no `{0}`")]
    Missing(&'static str),
}

/// One tool call a harness is about to make.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool's name as the harness calls it (`Write`, `Bash`, `apply_patch`).
    pub tool: String,
    /// Its input.
    pub input: Value,
    /// The directory the agent runs in, which relative paths are taken from.
    pub cwd: Option<PathBuf>,
}

impl ToolCall {
    /// Reads a `PreToolUse` event in the format Claude Code, Codex and Gemini CLI share
    /// (`tool_name`, `tool_input`, `cwd`).
    pub fn parse(text: &str) -> Result<ToolCall, HookError> {
        ToolCall::parse_from(Harness::Claude, text)
    }

    /// Reads a tool event as `harness` sends it: Copilot CLI names the tool `toolName`
    /// and gives its arguments as `toolArgs`, a JSON object or a string of one; the
    /// others send `tool_name` and `tool_input`.
    pub fn parse_from(harness: Harness, text: &str) -> Result<ToolCall, HookError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| HookError::NotJson(e.to_string()))?;
        if !value.is_object() {
            return Err(HookError::NotJson("not an object".into()));
        }
        let (name, args) = match harness {
            Harness::Copilot => ("toolName", "toolArgs"),
            Harness::Claude | Harness::Codex | Harness::Gemini => ("tool_name", "tool_input"),
        };
        let tool = value
            .get(name)
            .or_else(|| value.get("tool_name"))
            .and_then(Value::as_str)
            .ok_or(HookError::Missing(name))?
            .to_string();
        let input = match value.get(args).or_else(|| value.get("tool_input")) {
            // Arguments given as a string of JSON are read as the object they hold.
            Some(Value::String(text)) => serde_json::from_str(text)
                .map_err(|e| HookError::NotJson(format!("`{args}`: {e}")))?,
            Some(other) => other.clone(),
            None => Value::Null,
        };
        let cwd = value.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        Ok(ToolCall { tool, input, cwd })
    }

    /// Whether the tool runs a shell command: what a hook can read only best effort
    /// ahead, so the command is bracketed (locked files checked right after it ran).
    pub fn is_shell(&self) -> bool {
        matches!(
            self.tool.as_str(),
            "Bash" | "shell" | "exec_command" | "local_shell" | "run_shell_command" | "bash"
        )
    }

    /// The paths this call would write, as written (relative to [`ToolCall::cwd`] or
    /// absolute). Tools that write nothing give none.
    pub fn writes(&self) -> Vec<String> {
        let field = |name: &str| self.input.get(name).and_then(Value::as_str);
        match self.tool.as_str() {
            // Claude Code and Codex; Gemini CLI's `write_file` and `replace`; Copilot
            // CLI's `create` and `edit`.
            "Write" | "Edit" | "MultiEdit" | "edit" | "write" | "write_file" | "replace"
            | "create" => field("file_path")
                .or(field("path"))
                .map(str::to_string)
                .into_iter()
                .collect(),
            "NotebookEdit" => field("notebook_path")
                .map(str::to_string)
                .into_iter()
                .collect(),
            "apply_patch" => field("command")
                .or(field("patch"))
                .or(field("input"))
                .map(patch_paths)
                .unwrap_or_default(),
            "Bash" | "shell" | "exec_command" | "local_shell" | "run_shell_command" | "bash" => {
                match &self.input.get("command") {
                    Some(Value::String(line)) => shell_writes(line),
                    // Codex sends argv arrays for its shell tool.
                    Some(Value::Array(argv)) => {
                        let words: Vec<String> = argv
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect();
                        command_writes(&words)
                    }
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }
}

/// Every file an `apply_patch` body adds, updates, deletes or moves to.
pub fn patch_paths(patch: &str) -> Vec<String> {
    const MARKERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    patch
        .lines()
        .filter_map(|line| {
            MARKERS
                .iter()
                .find_map(|m| line.trim_start().strip_prefix(m))
                .map(|p| p.trim().to_string())
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// The paths a shell command line would obviously write. Best effort: a command the
/// words cannot be split of is read word by word on white space.
pub fn shell_writes(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    // Each simple command of a list or pipeline on its own.
    for part in split_commands(line) {
        let words: Vec<String> = shlex::split(&part)
            .unwrap_or_else(|| part.split_whitespace().map(str::to_string).collect())
            .into_iter()
            // A subshell's or a group's brackets are not part of a word.
            .map(|w| {
                w.trim_start_matches(['(', '{'])
                    .trim_end_matches([')', '}'])
                    .to_string()
            })
            .filter(|w| !w.is_empty())
            .collect();
        found.extend(command_writes(&words));
    }
    found.sort();
    found.dedup();
    found
}

/// Splits a command line at `;`, `&&`, `||`, `|`, `&` and newlines outside quotes.
fn split_commands(line: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (None, '\\') => {
                current.push(c);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            (None, ';' | '\n' | '|') => parts.push(std::mem::take(&mut current)),
            // `&>` and `>&` are redirections, not a background `&`.
            (None, '&') if chars.peek() == Some(&'>') || current.ends_with('>') => current.push(c),
            (None, '&') => parts.push(std::mem::take(&mut current)),
            (None, c) => current.push(c),
        }
    }
    parts.push(current);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The paths one simple command (already split into words) would write.
fn command_writes(words: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut args: Vec<&str> = Vec::new();
    let mut iter = words.iter().map(String::as_str).peekable();
    while let Some(word) = iter.next() {
        // `x>>f`: a word and its redirection written together.
        let word = match word.find('>') {
            Some(at)
                if at > 0
                    && !word.contains(char::is_whitespace)
                    && !word[..at].chars().all(|c| c.is_ascii_digit() || c == '&') =>
            {
                args.push(&word[..at]);
                &word[at..]
            }
            _ => word,
        };
        // Redirections: `> f`, `>> f`, `>f`, `2> f`, `&> f`, `1>>f`.
        let stripped = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        if let Some(rest) = stripped.strip_prefix('>') {
            let rest = rest.trim_start_matches(['>', '|']);
            if rest.starts_with('&') {
                continue; // `2>&1`: a descriptor, not a file.
            }
            match rest {
                "" => found.extend(iter.next().map(str::to_string)),
                path => found.push(path.to_string()),
            }
            continue;
        }
        args.push(word);
    }
    // Environment assignments and wrappers before the program.
    let mut start = 0;
    while start < args.len()
        && (args[start].contains('=') && !args[start].starts_with('-')
            || matches!(
                args[start],
                "sudo" | "env" | "command" | "exec" | "nohup" | "time"
            ))
    {
        start += 1;
    }
    let args = &args[start..];
    let Some((program, rest)) = args.split_first() else {
        return found;
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    let operands: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    match program {
        "tee" | "touch" | "truncate" | "rm" | "unlink" | "shred" => {
            found.extend(operands.iter().map(|s| s.to_string()));
        }
        "sed" | "perl"
            if rest
                .iter()
                .any(|a| a.starts_with("-i") || *a == "--in-place") =>
        {
            // The script is the first operand unless given with -e.
            let skip = usize::from(!rest.contains(&"-e"));
            found.extend(operands.iter().skip(skip).map(|s| s.to_string()));
        }
        "cp" | "mv" | "install" | "ln" | "rsync" => {
            found.extend(operands.last().map(|s| s.to_string()));
        }
        "dd" => found.extend(
            rest.iter()
                .filter_map(|a| a.strip_prefix("of="))
                .map(str::to_string),
        ),
        "git" => {
            // `git checkout -- f`, `git restore f`: they rewrite files in place.
            if matches!(operands.first(), Some(&"checkout" | &"restore")) {
                found.extend(operands.iter().skip(1).map(|s| s.to_string()));
            }
        }
        "bash" | "sh" | "zsh" | "dash" => {
            if let Some(i) = rest.iter().position(|a| *a == "-c")
                && let Some(script) = rest.get(i + 1)
            {
                found.extend(shell_writes(script));
            }
        }
        _ if is_interpreter(program) => {
            // Inline code (`python -c`, `node -e`): every string in it that names a
            // file is taken as one it may write.
            if let Some(i) = rest
                .iter()
                .position(|a| matches!(*a, "-c" | "-e" | "--eval"))
                && let Some(code) = rest.get(i + 1)
            {
                found.extend(path_like(code));
            }
        }
        _ => {}
    }
    found
}

fn is_interpreter(program: &str) -> bool {
    ["python", "python3", "node", "ruby", "perl", "deno", "bun"]
        .iter()
        .any(|p| program == *p || program.starts_with(&format!("{p}.")))
}

/// The quoted strings of `code` that look like relative or absolute file paths.
fn path_like(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for quote in ['\'', '"', '`'] {
        let mut parts = code.split(quote);
        parts.next();
        while let Some(inside) = parts.next() {
            let looks = !inside.is_empty()
                && !inside.contains(char::is_whitespace)
                && (inside.contains('/') || inside.contains('.'));
            if looks {
                found.push(inside.to_string());
            }
            parts.next();
        }
    }
    found
}

/// `path` as a work-tree-relative path with `/` separators, when it lies inside
/// `work_tree`: taken from `cwd` when relative, `.` and `..` resolved by their names
/// (no link is followed; the gate judges what is really on disk).
pub fn relative_to(work_tree: &Path, cwd: &Path, path: &str) -> Option<String> {
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let mut normal: Vec<&std::ffi::OsStr> = Vec::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::Normal(name) => normal.push(name),
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
        }
    }
    let absolute: PathBuf = std::iter::once(std::ffi::OsStr::new("/"))
        .chain(normal)
        .collect();
    let inside = absolute.strip_prefix(work_tree).ok()?;
    let text = inside.to_str()?.to_string();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(line: &str) -> Vec<String> {
        shell_writes(line)
    }

    #[test]
    fn the_shell_writes_peers_were_bypassed_by_are_seen() {
        for (line, path) in [
            ("echo x > tests/a.rs", "tests/a.rs"),
            ("echo x>>tests/a.rs", "tests/a.rs"),
            ("cat y | tee -a tests/a.rs", "tests/a.rs"),
            ("sed -i 's/a/b/' tests/a.rs", "tests/a.rs"),
            ("sed -i.bak -e 's/a/b/' tests/a.rs", "tests/a.rs"),
            ("cp /tmp/x tests/a.rs", "tests/a.rs"),
            ("mv tests/b.rs tests/a.rs", "tests/a.rs"),
            ("dd if=/dev/zero of=tests/a.rs count=1", "tests/a.rs"),
            ("bash -c 'echo x > tests/a.rs'", "tests/a.rs"),
            ("sh -c \"printf x | tee tests/a.rs\"", "tests/a.rs"),
            (
                "python3 -c \"open('tests/a.rs','w').write('x')\"",
                "tests/a.rs",
            ),
            (
                "node -e \"require('fs').writeFileSync('tests/a.rs','x')\"",
                "tests/a.rs",
            ),
            ("true && rm tests/a.rs", "tests/a.rs"),
            ("(sleep 1; echo x > tests/a.rs) &", "tests/a.rs"),
            ("FOO=1 env tee tests/a.rs < /dev/null", "tests/a.rs"),
            ("git checkout -- tests/a.rs", "tests/a.rs"),
            ("ln -sf /tmp/x tests/a.rs", "tests/a.rs"),
        ] {
            assert!(
                writes(line).iter().any(|p| p == path),
                "{line}: {:?}",
                writes(line)
            );
        }
    }

    #[test]
    fn reads_and_descriptors_are_not_writes() {
        for line in [
            "cat tests/a.rs",
            "cargo test 2>&1",
            "grep -r foo src > /dev/null",
            "sed 's/a/b/' tests/a.rs",
        ] {
            assert!(
                !writes(line).iter().any(|p| p.starts_with("tests/")),
                "{line}: {:?}",
                writes(line)
            );
        }
    }

    #[test]
    fn every_file_of_a_patch_is_named() {
        let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: tests/a.rs\n+x\n*** Update File: src/old.rs\n*** Move to: tests/b.rs\n*** Delete File: tests/c.rs\n*** End Patch\n";
        assert_eq!(
            patch_paths(patch),
            [
                "src/lib.rs",
                "tests/a.rs",
                "src/old.rs",
                "tests/b.rs",
                "tests/c.rs"
            ]
        );
    }

    #[test]
    fn paths_are_taken_relative_to_the_work_tree_by_name() {
        let tree = Path::new("/w/repo");
        let cwd = Path::new("/w/repo/src");
        assert_eq!(
            relative_to(tree, cwd, "../tests/a.rs").as_deref(),
            Some("tests/a.rs")
        );
        assert_eq!(
            relative_to(tree, cwd, "/w/repo/tests/a.rs").as_deref(),
            Some("tests/a.rs")
        );
        assert_eq!(
            relative_to(tree, cwd, "./x/../lib.rs").as_deref(),
            Some("src/lib.rs")
        );
        assert_eq!(relative_to(tree, cwd, "../../other/a.rs"), None);
        assert_eq!(relative_to(tree, cwd, "/tmp/a.rs"), None);
    }

    #[test]
    fn a_tool_call_names_what_it_writes() {
        let call = ToolCall::parse(
            r#"{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/w/tests/a.rs","content":"x"},"cwd":"/w"}"#,
        )
        .expect("parses");
        assert_eq!(call.writes(), ["/w/tests/a.rs"]);
        let call = ToolCall::parse(r#"{"tool_name":"Read","tool_input":{"file_path":"a"}}"#)
            .expect("parses");
        assert!(call.writes().is_empty());
        assert!(ToolCall::parse("[]").is_err());
        assert!(ToolCall::parse("{}").is_err());
    }
}
