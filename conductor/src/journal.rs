//! The conductor's own ledger events, all tagged with the conduct id.
//!
//! They are filed under the conduct id (not an engine run id: a conduct run begins,
//! with its branch and plan, before the engine run exists), and every payload also
//! carries it as `conduct`.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;

/// Where a payload names its conduct run; events recorded before the journal filed
/// them under the conduct id are found by it.
const TAG: &str = "$.conduct";

/// Appends and reads one conduct run's events.
#[derive(Debug, Clone)]
pub struct Journal {
    database: PathBuf,
    conduct: String,
}

impl Journal {
    /// The journal of conduct run `conduct` in the ledger at `database`.
    pub fn new(database: &Path, conduct: &str) -> Journal {
        Journal {
            database: database.to_path_buf(),
            conduct: conduct.to_string(),
        }
    }

    /// The conduct id.
    pub fn conduct(&self) -> &str {
        &self.conduct
    }

    /// The ledger database.
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// Appends `kind` with `payload` (an object) plus the conduct id.
    pub fn record(&self, kind: &str, payload: Value) -> Result<(), LedgerError> {
        let mut payload = match payload {
            Value::Object(map) => Value::Object(map),
            other => serde_json::json!({ "value": other }),
        };
        payload["conduct"] = Value::String(self.conduct.clone());
        Ledger::open(&self.database)?.append(Some(&self.conduct), kind, &payload)?;
        Ok(())
    }

    /// This run's events as `(kind, payload)`, oldest first.
    pub fn events(&self) -> Result<Vec<(String, Value)>, LedgerError> {
        let ledger = Ledger::open(&self.database)?;
        Ok(ledger
            .events_filed(&self.conduct, TAG, None)?
            .into_iter()
            .map(|e| (e.kind, e.payload))
            .collect())
    }

    /// The payloads of this run's events of `kind`, oldest first.
    pub fn of_kind(&self, kind: &str) -> Result<Vec<Value>, LedgerError> {
        let ledger = Ledger::open(&self.database)?;
        Ok(ledger
            .events_filed(&self.conduct, TAG, Some(kind))?
            .into_iter()
            .map(|e| e.payload)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_recorded_before_filing_are_read_with_the_filed_ones_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("ledger.db");
        let journal = Journal::new(&database, "conduct-a");
        {
            let mut ledger = Ledger::open(&database).expect("ledger");
            let legacy = serde_json::json!({ "conduct": "conduct-a", "step": 1 });
            ledger
                .append(None, "conduct_started", &legacy)
                .expect("append");
            let other = serde_json::json!({ "conduct": "conduct-b" });
            ledger
                .append(None, "conduct_started", &other)
                .expect("append");
        }
        journal
            .record("conduct_phase", serde_json::json!({ "step": 1 }))
            .expect("record");
        let kinds: Vec<String> = journal
            .events()
            .expect("events")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(kinds, ["conduct_started", "conduct_phase"]);
        assert_eq!(
            journal.of_kind("conduct_started").expect("of kind").len(),
            1
        );
    }
}
