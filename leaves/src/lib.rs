//! Agent providers behind one contract, always run under the supervisor.
//!
//! A [`Provider`] says what an agent CLI can do ([`Capabilities`]), how to start
//! it for a [`Request`] ([`Invocation`]) and how to read what it printed
//! ([`Parsed`]). [`Leaves`] does the rest the same way for every provider: leaf
//! identity and one-time token, the leaf's record in the ledger (with the exact
//! prompt), an allow-listed environment, launch under the supervisor, idempotent
//! abort, and the provider-neutral [`Response`].
//!
//! [`verdict`] accepts a verifier's verdict only from the verifier leaf of the
//! phase, and an ACCEPT only with the verifier's own test runs as evidence.

pub mod env;
pub mod envelope;
pub mod events;
pub mod harness;
pub mod home;
pub mod hook;
pub mod hook_config;
pub mod identity;
pub mod provider;
pub mod providers;
pub mod report;
pub mod runtime;
pub mod stops;
pub mod verdict;
pub mod versions;

pub use envelope::AbortOutcome;
pub use envelope::Capabilities;
pub use envelope::Completion;
pub use envelope::Request;
pub use envelope::Response;
pub use envelope::Usage;
pub use provider::Invocation;
pub use provider::LeafFiles;
pub use provider::LeafOutput;
pub use provider::Parsed;
pub use provider::Provider;
pub use provider::ProviderError;
pub use providers::scripted::Scripted;
pub use report::LedgerReporter;
pub use runtime::LeafError;
pub use runtime::LeafRun;
pub use runtime::Leaves;
pub use stops::StopFailed;
pub use verdict::Decision;
pub use verdict::VerifierVerdict;
