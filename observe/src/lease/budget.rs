//! The core budget the conductors of one machine share, and each holder's share of it.

use std::ffi::OsStr;

use serde::Serialize;

use super::CORE_BUDGET_VAR;
use super::LeaseError;

/// Where the core budget came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetSource {
    /// [`CORE_BUDGET_VAR`].
    Variable,
    /// The machine's available parallelism.
    Machine,
}

/// The cores the conductors of this machine share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// 1 or more.
    pub cores: usize,
    /// Where the number came from.
    pub from: BudgetSource,
}

impl Budget {
    /// The budget this process's environment sets: [`CORE_BUDGET_VAR`] when set and not
    /// empty, else the machine's available parallelism. A value that is not a whole
    /// number of 1 or more is [`LeaseError::BadBudget`], never silently replaced.
    pub fn from_env() -> Result<Budget, LeaseError> {
        Budget::parse(
            std::env::var_os(CORE_BUDGET_VAR).as_deref(),
            machine_cores(),
        )
    }

    /// The budget `value` (the variable's value, if set) gives on a machine of `machine`
    /// cores.
    pub(super) fn parse(value: Option<&OsStr>, machine: usize) -> Result<Budget, LeaseError> {
        let machine = Budget {
            cores: machine.max(1),
            from: BudgetSource::Machine,
        };
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(machine);
        };
        match value.to_str().and_then(|v| v.parse::<usize>().ok()) {
            Some(cores) if cores >= 1 => Ok(Budget {
                cores,
                from: BudgetSource::Variable,
            }),
            _ => Err(LeaseError::BadBudget {
                value: value.to_string_lossy().into_owned(),
            }),
        }
    }
}

/// The machine's available parallelism (1 when it cannot be read).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The workers one holder may start when `live` leases share `budget` cores: the budget
/// divided by the leases, rounded down, and never 0. With no lease (a `tdd test` by hand
/// on a machine where no conductor works) it is the whole budget. Whenever there are no
/// more leases than cores, the shares of all holders together fit in the budget.
pub fn share(budget: usize, live: usize) -> usize {
    (budget / live.max(1)).max(1)
}
