//! `tdd.toml`: the project registry, locks, conductor and provider settings.
//!
//! Loading either yields a fully typed [`Config`] or a [`ConfigError`] that
//! names the file, the line and column, the offending snippet and, for an
//! unknown key, the nearest valid one. The `[project.*]` and `[artifact.*]`
//! tables written for tdd-cli load unchanged.
//!
//! The `[project.*]` tables (`ProjectConfig`, `AdapterKind`, ...) are defined by
//! `tdd_observe::config`, because an observation reads them, and re-exported here so the
//! whole file reads as one module.

pub mod declared;
pub mod detect;
mod diagnostic;
mod known;
mod layout;
mod schema;

use std::path::Path;
use std::path::PathBuf;

pub use diagnostic::ConfigError;
pub use known::DeclaredSplit;
pub use known::KnownFailureError;
pub use known::KnownFailures;
pub use schema::ArtifactConfig;
pub use schema::ConductorConfig;
pub use schema::Config;
pub use schema::ProviderConfig;
pub use schema::SandboxConfig;
pub use tdd_observe::config::AdapterKind;
pub use tdd_observe::config::LockConfig;
pub use tdd_observe::config::ProjectConfig;
pub use tdd_observe::config::ProjectOverride;

/// The candidate closest to `word`, when it is close enough to be a likely typo.
pub fn nearest_key(word: &str, candidates: &[String]) -> Option<String> {
    diagnostic::nearest(word, candidates.iter().map(String::as_str))
}

/// The file name of the configuration at a work-tree root.
pub const CONFIG_FILE: &str = "tdd.toml";

impl Config {
    /// Parses `text` as the contents of `path`; `path` only labels errors.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|err| ConfigError::from_toml(path, text, &err))?;
        config.validate(path, text)?;
        Ok(config)
    }

    /// Reads and parses the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with_text(path).map(|(config, _)| config)
    }

    /// Reads the file at `path` once and parses it, returning the text as well: what a
    /// run records the hash of is exactly what was parsed.
    pub fn load_with_text(path: &Path) -> Result<(Config, String), ConfigError> {
        let text = crate::read::regular_text(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(path, &text).map(|config| (config, text))
    }

    /// Loads `tdd.toml` from a work-tree root; `Ok(None)` when there is none.
    pub fn load_from_root(root: &Path) -> Result<Option<(PathBuf, Config)>, ConfigError> {
        Ok(Config::load_text_from_root(root)?.map(|(path, config, _)| (path, config)))
    }

    /// [`Config::load_from_root`] with the text that was parsed.
    pub fn load_text_from_root(
        root: &Path,
    ) -> Result<Option<(PathBuf, Config, String)>, ConfigError> {
        let path = root.join(CONFIG_FILE);
        if !path.exists() {
            return Ok(None);
        }
        Config::load_with_text(&path).map(|(config, text)| Some((path, config, text)))
    }

    /// The compiled `known_failures` of project `name` (empty for an unknown project).
    ///
    /// Guarantees: never fails for a configuration that [`Config::parse`] accepted, because
    /// parsing compiles every entry.
    pub fn known_failures(&self, name: &str) -> Result<KnownFailures, KnownFailureError> {
        let entries = self
            .project
            .get(name)
            .map(|p| p.known_failures.as_slice())
            .unwrap_or_default();
        KnownFailures::new(name, entries)
    }

    /// Checks what serde cannot inside project tables: every `known_failures` entry
    /// compiles.
    fn validate_projects(&self, path: &Path, text: &str) -> Result<(), ConfigError> {
        for (name, project) in &self.project {
            if !plain_name(name) {
                return Err(ConfigError::at_key(
                    path,
                    text,
                    &format!("project.{name}"),
                    "adapter",
                    format!(
                        "project name `{name}` is not a plain name: tdd names directories \
                         after it, so it is letters, digits, `.`, `_` and `-`, not \
                         starting with `.` (for example `[project.core]`)"
                    ),
                ));
            }
            for entry in &project.known_failures {
                if let Err(err) = known::compile_entry(entry) {
                    return Err(ConfigError::entry(
                        path,
                        text,
                        &format!("project.{name}"),
                        "known_failures",
                        entry,
                        err.to_string(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the cross-references serde cannot: artifact edges and provider names.
    fn validate(&self, path: &Path, text: &str) -> Result<(), ConfigError> {
        self.validate_projects(path, text)?;
        for (name, artifact) in &self.artifact {
            let mut refs: Vec<(&str, &str)> = Vec::new();
            if let Some(producer) = &artifact.produced_by {
                refs.push(("produced_by", producer.as_str()));
            }
            refs.extend(
                artifact
                    .consumed_by
                    .iter()
                    .map(|c| ("consumed_by", c.as_str())),
            );
            for (key, target) in refs {
                let known = match target.strip_prefix("artifact.") {
                    Some(other) => self.artifact.contains_key(other),
                    None => self.project.contains_key(target),
                };
                if !known {
                    let mut candidates: Vec<String> = self.project.keys().cloned().collect();
                    candidates.extend(self.artifact.keys().map(|a| format!("artifact.{a}")));
                    return Err(ConfigError::reference(
                        path,
                        text,
                        &format!("artifact.{name}"),
                        key,
                        target,
                        &candidates,
                    ));
                }
            }
        }
        let providers = [
            ("provider", self.conductor.provider.as_deref()),
            (
                "verifier_provider",
                self.conductor.verifier_provider.as_deref(),
            ),
        ];
        for (name, table) in &self.provider {
            if table.command.is_none() && !schema::BUILTIN_PROVIDERS.contains(&name.as_str()) {
                return Err(ConfigError::at_key(
                    path,
                    text,
                    &format!("provider.{name}"),
                    "command",
                    format!(
                        "missing key `command`: `{name}` is not a built-in provider ({}), so its table must name the executable",
                        schema::BUILTIN_PROVIDERS.join(", ")
                    ),
                ));
            }
        }
        // The verifier is `verifier_provider`, else `provider`.
        let verifier = match self.conductor.verifier_provider.as_deref() {
            Some(verifier) => Some(("verifier_provider", verifier)),
            None => self.conductor.provider.as_deref().map(|p| ("provider", p)),
        };
        if let Some((key, verifier)) = verifier
            && schema::NOT_VERIFIERS.contains(&verifier)
        {
            return Err(ConfigError::at_key(
                path,
                text,
                "conductor",
                key,
                format!(
                    "`{verifier}` cannot be a verifier: it has no read-only mode, so a verifier could change the code it judges; set `verifier_provider` to claude or codex"
                ),
            ));
        }
        for (key, value) in providers {
            let Some(value) = value else { continue };
            if !schema::BUILTIN_PROVIDERS.contains(&value) && !self.provider.contains_key(value) {
                let mut candidates: Vec<String> = schema::BUILTIN_PROVIDERS
                    .iter()
                    .map(|p| p.to_string())
                    .collect();
                candidates.extend(self.provider.keys().cloned());
                return Err(ConfigError::reference(
                    path,
                    text,
                    "conductor",
                    key,
                    value,
                    &candidates,
                ));
            }
        }
        Ok(())
    }

    /// The SHA-256 of the configuration text, so runs can pin the config they started with.
    pub fn text_sha256(text: &str) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(text.as_bytes()))
    }
}

/// Whether `name` can name a directory as it is: letters, digits, `.`, `_` and `-`, not
/// starting with `.` (so never `..`, a separator or an absolute path).
fn plain_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c != '.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests;
