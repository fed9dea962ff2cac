//! `plan register`: a committed plan, validated against the configuration, recorded in
//! the ledger as a contract (once per git blob).

use std::path::Path;

use serde::Serialize;

use super::RunError;
use super::RunEvent;
use super::Session;
use super::tx::RunTx;
use crate::ledger::Ledger;
use crate::plan::Contract;
use crate::plan::CycleKind;
use crate::plan::read_committed;

/// What `plan register` recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Registration {
    /// The validated contract.
    #[serde(flatten)]
    pub contract: Contract,
    /// How many cycles of each kind the plan has.
    pub kinds: CycleKinds,
    /// Whether the same blob was registered before (nothing was appended).
    pub reused: bool,
}

/// The count of a plan's cycles per kind.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CycleKinds {
    /// Test first, then implementation, then refactor.
    pub standard: usize,
    /// A contract test against an existing interface.
    pub contract: usize,
    /// A characterisation (pin) of existing behaviour.
    pub pin: usize,
    /// Restructuring under a green suite.
    pub refactor: usize,
}

impl CycleKinds {
    fn of(contract: &Contract) -> CycleKinds {
        let count = |k: CycleKind| contract.plan.cycles.iter().filter(|c| c.kind == k).count();
        CycleKinds {
            standard: count(CycleKind::Standard),
            contract: count(CycleKind::Contract),
            pin: count(CycleKind::Pin),
            refactor: count(CycleKind::Refactor),
        }
    }
}

impl Session {
    /// The committed plan at `plan_path`, validated: it parses, names only declared
    /// projects, and every target lies where the test locks see it.
    pub(super) fn validated_contract(&self, plan_path: &Path) -> Result<Contract, RunError> {
        let known: Vec<String> = self.config.project.keys().cloned().collect();
        let contract = read_committed(&self.work_tree, plan_path, Some(&known))?;
        let outside = super::locks::targets_outside_tests(&self.config, &contract.plan);
        if !outside.is_empty() {
            return Err(crate::plan::PlanError::Invalid {
                path: plan_path.to_path_buf(),
                message: outside.join("; "),
            }
            .into());
        }
        Ok(contract)
    }

    /// The body of [`RunTx::register_plan`], on the ledger the transaction verified.
    fn register_plan_in(
        &self,
        ledger: &mut Ledger,
        plan_path: &Path,
    ) -> Result<Registration, RunError> {
        let contract = self.validated_contract(plan_path)?;
        let reused = ledger
            .typed::<RunEvent>(None, &["plan_registered"])?
            .iter()
            .any(|(_, event)| {
                matches!(event, RunEvent::PlanRegistered(earlier) if earlier.blob == contract.blob)
            });
        if !reused {
            record_contract(ledger, &contract)?;
        }
        Ok(Registration {
            kinds: CycleKinds::of(&contract),
            contract,
            reused,
        })
    }
}

/// Appends `plan_registered` for `contract`.
pub(super) fn record_contract(ledger: &mut Ledger, contract: &Contract) -> Result<(), RunError> {
    ledger.record(None, &super::RunEvent::PlanRegistered(contract.clone()))?;
    Ok(())
}

impl RunTx<'_> {
    /// Validates the committed plan at `plan_path` and records it as a contract, unless
    /// the same blob was recorded before. Takes no lock of its own to wait on: open it
    /// with [`Session::begin_unlocked`] where a phase may be being judged.
    pub fn register_plan(mut self, plan_path: &Path) -> Result<Registration, RunError> {
        self.engine.register_plan_in(&mut self.ledger, plan_path)
    }
}
