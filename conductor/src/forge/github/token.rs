//! The GitHub token: where it comes from, and how it is kept out of every text.

/// A token; its `Debug` never shows it.
#[derive(Clone)]
pub struct Token {
    value: String,
    source: &'static str,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(from {}, value not shown)", self.source)
    }
}

impl Token {
    /// A token read from `source` (a variable's name, or `gh auth token`).
    pub fn new(value: impl Into<String>, source: &'static str) -> Token {
        Token {
            value: value.into().trim().to_string(),
            source,
        }
    }

    /// The secret itself: only for the `Authorization` header and git's credential
    /// helper environment.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// Where it came from (`GITHUB_TOKEN`, `GH_TOKEN`, `gh auth token`).
    pub fn source(&self) -> &'static str {
        self.source
    }
}

/// The variables a token is read from, in order.
pub const TOKEN_VARS: [&str; 2] = ["GITHUB_TOKEN", "GH_TOKEN"];

/// The token: `GITHUB_TOKEN`, else `GH_TOKEN`, else what `gh auth token` prints when `gh`
/// is installed and logged in; `None` when there is none.
pub fn resolve(env: impl Fn(&str) -> Option<String>) -> Option<Token> {
    for name in TOKEN_VARS {
        if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
            return Some(Token::new(value, name));
        }
    }
    let out = std::process::Command::new("gh")
        .args(["auth", "token"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let value = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !value.trim().is_empty()).then(|| Token::new(value, "gh auth token"))
}

/// Removes a token from texts.
#[derive(Clone)]
pub struct Redactor {
    secret: String,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor")
    }
}

/// What a token is replaced with.
pub const REDACTED: &str = "[redacted]";

impl Redactor {
    /// A redactor of `token`.
    pub fn new(token: &Token) -> Redactor {
        Redactor {
            secret: token.expose().to_string(),
        }
    }

    /// `text` with every occurrence of the token replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        if self.secret.len() < 4 {
            // Too short to tell from ordinary text; such a token is refused anyway.
            return text.to_string();
        }
        text.replace(&self.secret, REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_variable_set_wins_and_debug_hides_the_value() {
        let token = resolve(|name| (name == "GH_TOKEN").then(|| " ghp_abc123 \n".to_string()))
            .expect("a token");
        assert_eq!(token.expose(), "ghp_abc123");
        assert_eq!(token.source(), "GH_TOKEN");
        assert!(!format!("{token:?}").contains("abc123"));
        let both = resolve(|name| Some(format!("tok-{name}"))).expect("a token");
        assert_eq!(both.source(), "GITHUB_TOKEN");
    }

    #[test]
    fn redaction_removes_every_occurrence() {
        let r = Redactor::new(&Token::new("s3cr3t-token", "GITHUB_TOKEN"));
        assert_eq!(
            r.redact("a s3cr3t-token b s3cr3t-token"),
            "a [redacted] b [redacted]"
        );
    }
}
