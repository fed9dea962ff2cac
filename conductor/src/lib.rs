//! The issue loop: a local issue in, a plan, every step driven through RED, GREEN and
//! REFACTOR by developer leaves with a blind verifier after each phase, progress on a
//! forge; out comes a draft PR, a classified bail, or a stop. See README.md.

pub mod bail;
pub mod conductor;
mod cursor;
mod decide;
mod denied;
pub mod error;
pub mod events;
mod finish;
pub mod forge;
pub mod issue;
pub mod journal;
mod leaf;
pub mod lock;
mod open;
pub mod plan;
mod recover;
pub mod relay;
pub mod report;
mod revise;
pub mod sandbox;
pub mod session;
mod step;
mod verify;
pub mod worktree;

pub use bail::Bail;
pub use bail::BailCause;
pub use bail::BailClass;
pub use conductor::Conductor;
pub use conductor::Finish;
pub use conductor::NewBinary;
pub use conductor::Options;
pub use conductor::Place;
pub use conductor::Summary;
pub use error::Cause;
pub use error::ConductError;
pub use events::ConductorEvent;
pub use events::EVENT_KINDS;
pub use forge::Forge;
pub use forge::ForgeSpec;
pub use forge::GitHubForge;
pub use forge::GitHubSpec;
pub use forge::LocalForge;
pub use lock::Position;
pub use lock::read_position;
pub use report::Figures;
pub use report::ReportPlace;
pub use report::artifact_name;
