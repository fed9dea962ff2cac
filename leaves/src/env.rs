//! The environment a leaf gets: an allow-list, never the caller's whole environment.
//!
//! A leaf receives the base variables below when the caller has them, the variables
//! its provider names (its API keys, its config directory), the `tdd` identity
//! variables, and nothing else. Forge tokens are dropped even when a provider or a
//! `tdd.toml` names them: the conductor talks to the forge, a leaf never does.

use std::collections::BTreeMap;

/// Passed to every leaf when set: what a process needs to run at all, plus what
/// `tdd` inside the leaf needs to find this repository's ledger and to count the
/// machine's core leases as its conductor does (the lease directory and the budget).
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "TMPDIR",
    "NO_COLOR",
    "TDD_LEDGER_HOME",
    tdd_engine::observe::lease::LEASE_DIR_VAR,
    tdd_engine::observe::lease::CORE_BUDGET_VAR,
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
];

/// Never passed to a leaf, whoever asks: the forge tokens, which no runner gets either.
pub const FORBIDDEN_ENV: &[&str] = tdd_engine::observe::FORGE_TOKENS;

/// The identity variables `tdd` sets for each leaf; never copied from the caller.
pub const IDENTITY_ENV: &[&str] = &[
    "TDD_ROLE",
    "TDD_ISSUE",
    "TDD_STEP",
    "TDD_PHASE",
    "TDD_LEAF_ID",
    "TDD_LEAF_TOKEN",
];

/// The leaf's environment: `BASE_ENV` and `extra` taken from `caller` when set,
/// minus forbidden and identity names, then `set` applied on top.
pub fn leaf_env(
    caller: &BTreeMap<String, String>,
    extra: &[String],
    set: &[(String, String)],
) -> BTreeMap<String, String> {
    let allowed = |name: &str| {
        !FORBIDDEN_ENV.contains(&name) && !IDENTITY_ENV.contains(&name) && !name.is_empty()
    };
    let mut env = BTreeMap::new();
    for name in BASE_ENV
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
    {
        if allowed(name)
            && let Some(value) = caller.get(name)
        {
            env.insert(name.to_string(), value.clone());
        }
    }
    for (name, value) in set {
        if !FORBIDDEN_ENV.contains(&name.as_str()) {
            env.insert(name.clone(), value.clone());
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forge_tokens_never_pass_even_when_named() {
        let caller: BTreeMap<String, String> = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "secret"),
            ("GH_TOKEN", "secret"),
            ("ANTHROPIC_API_KEY", "key"),
            ("UNRELATED", "x"),
            ("TDD_LEAF_TOKEN", "someone else's"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let extra = ["ANTHROPIC_API_KEY".to_string(), "GITHUB_TOKEN".to_string()];
        let set = [("GH_TOKEN".to_string(), "x".to_string())];
        let env = leaf_env(&caller, &extra, &set);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["ANTHROPIC_API_KEY", "PATH"]);
    }

    #[test]
    fn a_leaf_counts_core_leases_where_its_conductor_does() {
        let caller: BTreeMap<String, String> = [
            ("TDD_LEASE_DIR", "/run/user/1000/tdd/leases"),
            ("TDD_CORE_BUDGET", "3"),
            ("TDD_OTHER", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let env = leaf_env(&caller, &[], &[]);
        assert_eq!(
            env.get("TDD_LEASE_DIR").map(String::as_str),
            Some("/run/user/1000/tdd/leases")
        );
        assert_eq!(env.get("TDD_CORE_BUDGET").map(String::as_str), Some("3"));
        assert!(!env.contains_key("TDD_OTHER"));
    }
}
