//! `command`: any agent CLI, through an argument template.
//!
//! `[provider.NAME] command = "my-agent"`, `args = ["--prompt-file",
//! "{prompt_file}"]`. Placeholders: `{prompt_file}`, `{role}`, `{phase}`, `{step}`,
//! `{workdir}` (and `{issue}`, `{attempt}`, `{model}`). Any other `{...}` is refused
//! when the leaf is prepared; nothing goes through a shell. The final text is the
//! command's stdout; an exit other than 0 is a crash.

use tdd_engine::config::ProviderConfig;
use tdd_supervisor::ExitClass;

use crate::envelope::Capabilities;
use crate::envelope::Request;
use crate::provider::Invocation;
use crate::provider::LeafFiles;
use crate::provider::LeafOutput;
use crate::provider::Parsed;
use crate::provider::Provider;
use crate::provider::ProviderError;
use crate::provider::tail;

/// A provider that runs any command.
#[derive(Debug, Clone)]
pub struct CommandProvider {
    name: String,
    config: ProviderConfig,
}

impl CommandProvider {
    /// The provider `name` configured by `config`.
    pub fn new(name: impl Into<String>, config: ProviderConfig) -> CommandProvider {
        CommandProvider {
            name: name.into(),
            config,
        }
    }
}

fn expand(arg: &str, values: &[(&str, String)]) -> Result<String, ProviderError> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return Ok(out);
        };
        let name = &after[..close];
        let Some((_, value)) = values.iter().find(|(key, _)| *key == name) else {
            return Err(ProviderError::Placeholder {
                arg: arg.to_string(),
                placeholder: name.to_string(),
            });
        };
        out.push_str(value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Provider for CommandProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn invocation(
        &self,
        request: &Request,
        files: &LeafFiles,
    ) -> Result<Invocation, ProviderError> {
        let values = [
            ("prompt_file", files.prompt.display().to_string()),
            ("role", request.role().to_string()),
            ("phase", request.phase_name().to_string()),
            ("step", request.step.to_string()),
            ("workdir", request.workdir.display().to_string()),
            ("issue", request.issue.to_string()),
            ("attempt", request.attempt.to_string()),
            ("model", self.config.model.clone().unwrap_or_default()),
        ];
        let command = self.config.command.as_deref().unwrap_or(self.name.as_str());
        let mut argv = vec![expand(command, &values)?];
        for arg in &self.config.args {
            argv.push(expand(arg, &values)?);
        }
        Ok(Invocation {
            argv,
            pass_env: self.config.env.clone(),
            set_env: Vec::new(),
            prompt_on_stdin: false,
        })
    }

    fn parse(&self, output: &LeafOutput<'_>) -> Parsed {
        Parsed {
            terminal: output.exit.class == ExitClass::Exited { code: 0 },
            text: tail(output.stdout, 64 * 1024),
            ..Parsed::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand_and_unknown_ones_are_refused() {
        let values = [("role", "verifier".to_string())];
        assert_eq!(
            expand("--as={role}", &values).expect("expands"),
            "--as=verifier"
        );
        assert!(matches!(
            expand("{rm -rf}", &values),
            Err(ProviderError::Placeholder { .. })
        ));
    }
}
