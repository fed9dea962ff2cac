//! Typed prompt inputs and the templates that render them.
//!
//! Each leaf role has an input type and a compiled-in markdown template
//! (`templates/`). The verifier's input, [`VerifierInput`], can only be built from
//! engine facts whose types have no constructor from text ([`TestId`],
//! [`BehaviourSpec`], [`CommitSha`]): a verifier is blind to the developer by type.
//! The renderer ([`render`]) fills `{{name}}` holes and executes nothing.

pub mod input;
pub mod prompt;
pub mod provenance;
pub mod render;

pub use input::DeveloperInput;
pub use input::PlannerInput;
pub use input::RepoFacts;
pub use input::Role;
pub use input::Step;
pub use input::VerifierInput;
pub use prompt::Prompt;
pub use prompt::PromptError;
pub use prompt::phase_name;
pub use provenance::BehaviourSpec;
pub use provenance::CommitSha;
pub use provenance::Issue;
pub use provenance::ShaError;
pub use provenance::SpecError;
pub use provenance::TestId;

#[cfg(test)]
mod tests;
