//! The built-in providers and the registry that picks one by name.

pub mod aider;
pub mod claude;
pub mod codex;
pub mod command;
pub mod interactive;
pub mod scripted;
mod scripted_hooks;
#[cfg(test)]
mod test_support;

use std::ffi::OsString;
use std::path::PathBuf;

use tdd_engine::config::Config;
use tdd_engine::config::ProviderConfig;

use crate::provider::Provider;
use crate::provider::ProviderError;

/// A built-in CLI provider's settings: its executable and what a `[provider.NAME]`
/// table adds to it. Without a table, the executable is the CLI's own name on the
/// leaf's `PATH`, with no extra arguments, variables or model.
#[derive(Debug, Clone)]
pub(crate) struct Cli {
    /// The executable.
    pub(crate) command: String,
    /// Arguments after the provider's own.
    pub(crate) args: Vec<String>,
    /// Variables of the caller's environment passed to the leaf.
    pub(crate) env: Vec<String>,
    /// The model to ask the CLI for.
    pub(crate) model: Option<String>,
}

impl Cli {
    /// `name` on the leaf's `PATH`, adjusted by `config`.
    pub(crate) fn new(name: &str, config: Option<&ProviderConfig>) -> Cli {
        Cli {
            command: config
                .and_then(|c| c.command.clone())
                .unwrap_or_else(|| name.into()),
            args: config.map(|c| c.args.clone()).unwrap_or_default(),
            env: config.map(|c| c.env.clone()).unwrap_or_default(),
            model: config.and_then(|c| c.model.clone()),
        }
    }
}

/// How to re-execute the running binary as a scripted leaf.
#[derive(Debug, Clone)]
pub struct SelfExe {
    /// The program.
    pub program: PathBuf,
    /// Its arguments before the leaf's own (`["__scripted-leaf"]`).
    pub args: Vec<OsString>,
}

impl SelfExe {
    /// The running executable as `<exe> __scripted-leaf`.
    pub fn current() -> std::io::Result<SelfExe> {
        Ok(SelfExe {
            program: std::env::current_exe()?,
            args: vec![scripted::SCRIPTED_LEAF_COMMAND.into()],
        })
    }
}

/// The provider named `name` in `config`: a built-in (`scripted`, `claude`, `codex`,
/// `aider`), adjusted by its `[provider.NAME]` table when there is one, or the
/// `command` provider for any other table. `scripted` reads its fixture path from
/// `[provider.scripted] args[0]`.
pub fn build(
    name: &str,
    config: &Config,
    this: &SelfExe,
) -> Result<Box<dyn Provider>, ProviderError> {
    let table = config.provider.get(name);
    Ok(match name {
        "claude" => Box::new(claude::Claude::new(table)),
        "codex" => Box::new(codex::Codex::new(table)),
        "aider" => Box::new(aider::Aider::new(table)),
        "scripted" => {
            let fixture = table.and_then(|t| t.args.first()).ok_or_else(|| {
                ProviderError::Config(
                    "the scripted provider needs a fixture: [provider.scripted] args = [\"path/to/fixture.toml\"]".into(),
                )
            })?;
            Box::new(scripted::Scripted::new(
                fixture,
                &this.program,
                this.args.clone(),
            ))
        }
        other => match table {
            Some(table) => Box::new(command::CommandProvider::new(other, table.clone())),
            None => {
                return Err(ProviderError::Config(format!(
                    "no provider `{other}`: add a [provider.{other}] table with a command"
                )));
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use tdd_engine::config::ProviderConfig;

    use super::*;

    #[test]
    fn names_resolve_to_builtins_tables_or_an_error() {
        let mut config = Config::default();
        let this = SelfExe {
            program: "/bin/tdd".into(),
            args: vec![],
        };
        for name in ["claude", "codex", "aider"] {
            assert_eq!(build(name, &config, &this).expect(name).name(), name);
        }
        assert!(build("scripted", &config, &this).is_err());
        assert!(build("local-agent", &config, &this).is_err());
        let table = |command: &str, args: &[&str]| ProviderConfig {
            command: Some(command.into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            model: None,
        };
        config
            .provider
            .insert("scripted".into(), table("unused", &["fixture.toml"]));
        config
            .provider
            .insert("local-agent".into(), table("my-agent", &["{prompt_file}"]));
        assert_eq!(
            build("scripted", &config, &this).expect("scripted").name(),
            "scripted"
        );
        assert_eq!(
            build("local-agent", &config, &this)
                .expect("command")
                .name(),
            "local-agent"
        );
    }
}
