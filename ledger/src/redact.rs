//! Redaction of known secrets from what is stored: the values of this process's
//! variables that name a secret (API keys, tokens, passwords, the forge tokens) never
//! reach the ledger, whatever text carries them (a runner's output, a failure message,
//! a reason).

use std::borrow::Cow;

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not looked for: too many honest strings would match.
const MIN_SECRET_LEN: usize = 8;

/// Whether a variable's name says its value is a secret.
pub fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE_KEY",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
    ]
    .iter()
    .any(|word| name.contains(word))
        || name.ends_with("_KEY")
}

/// The secrets of `vars`: the values, long enough to look for, of the variables whose
/// names say they are secret; longest first, so that one secret inside another is
/// replaced as part of the longer.
pub fn secrets_of(vars: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    let mut secrets: Vec<String> = vars
        .into_iter()
        .filter(|(name, value)| names_a_secret(name) && value.len() >= MIN_SECRET_LEN)
        .map(|(_, value)| value)
        .collect();
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    secrets
}

/// The secrets of this process's environment, read once.
pub fn known_secrets() -> &'static [String] {
    static SECRETS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SECRETS.get_or_init(|| secrets_of(std::env::vars()))
}

/// `text` with every one of `secrets` replaced by [`REDACTED`].
pub fn redact_text<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    if !secrets.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    Cow::Owned(out)
}

/// `value` with every string in it redacted of `secrets`; `None` when none holds one
/// (the common case: nothing is copied).
pub fn redact_value(value: &serde_json::Value, secrets: &[String]) -> Option<serde_json::Value> {
    if secrets.is_empty() || !holds_secret(value, secrets) {
        return None;
    }
    let mut value = value.clone();
    redact_in_place(&mut value, secrets);
    Some(value)
}

fn holds_secret(value: &serde_json::Value, secrets: &[String]) -> bool {
    match value {
        serde_json::Value::String(s) => secrets.iter().any(|x| s.contains(x.as_str())),
        serde_json::Value::Array(items) => items.iter().any(|v| holds_secret(v, secrets)),
        serde_json::Value::Object(map) => map.values().any(|v| holds_secret(v, secrets)),
        _ => false,
    }
}

fn redact_in_place(value: &mut serde_json::Value, secrets: &[String]) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(redacted) = redact_text(s, secrets) {
                *s = redacted;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                redact_in_place(item, secrets);
            }
        }
        serde_json::Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                redact_in_place(item, secrets);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secret_variables_are_found_by_name_and_length() {
        let secrets = secrets_of(vars(&[
            ("ANTHROPIC_API_KEY", "sk-ant-0123456789"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret-value"),
            ("GITHUB_TOKEN", "gho_abcdefgh"),
            ("DB_PASSWORD", "short"),
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/someone"),
        ]));
        assert_eq!(
            secrets,
            ["sk-ant-0123456789", "aws-secret-value", "gho_abcdefgh"]
        );
    }

    #[test]
    fn every_string_of_a_payload_is_redacted_and_clean_ones_are_not_copied() {
        let secrets = secrets_of(vars(&[("OPENAI_API_KEY", "sk-planted-secret")]));
        let payload = serde_json::json!({
            "observations": [{"stdout": "key=sk-planted-secret!", "tests": {"t": {"message": "x sk-planted-secret"}}}],
            "n": 1
        });
        let redacted = redact_value(&payload, &secrets).expect("holds a secret");
        let text = redacted.to_string();
        assert!(!text.contains("sk-planted-secret"), "{text}");
        assert_eq!(redacted["observations"][0]["stdout"], "key=[redacted]!");
        assert!(redact_value(&serde_json::json!({"a": "clean"}), &secrets).is_none());
    }
}
