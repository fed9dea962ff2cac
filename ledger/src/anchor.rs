//! Anchors: the chain head as a phase commit records it, and what the ledger says
//! about the commits that carry one.
//!
//! A phase commit carries `TDD-Ledger: <count>:<hash>`, the number of events in the
//! chain and the hash of the last of them when the commit was made. Because every
//! event's hash covers the one before it, an anchor that still matches the chain
//! vouches for every event up to it: removing, editing or reordering any of them, even
//! with the chain recomputed afterwards, changes the hash of the event it names.

use std::collections::BTreeSet;
use std::fmt;

use rusqlite::OptionalExtension;

use super::Ledger;
use super::LedgerError;
use super::sql_err;

/// The trailer that carries an anchor in a phase commit.
pub const LEDGER_TRAILER: &str = "TDD-Ledger";

/// The event kinds whose payload names a commit the engine made (`commit`, and for a
/// phase change also the `head` it left).
pub const COMMIT_EVENT_KINDS: &[&str] = &["phase_changed", "artifact_regenerated"];

/// The kind of the event appended right before an anchored commit is made, so the
/// commit's anchor is that event.
pub const COMMIT_STARTED: &str = "commit_started";

/// The chain as of one moment: how many events it held and the hash of the last.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Anchor {
    /// The number of events in the chain, which is also the id of the last one (ids
    /// count from 1, and the append-only chain never leaves a gap).
    pub count: u64,
    /// The hash of event `count`, or the genesis hash when `count` is 0.
    pub hash: String,
}

/// Why a `TDD-Ledger` trailer value could not be read as an anchor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not `<event count>:<64 hex digit hash>`")]
pub struct AnchorParseError {
    /// The trailer value as found.
    pub value: String,
}

impl Anchor {
    /// Reads a trailer value written by [`Anchor`]'s `Display`; surrounding whitespace
    /// is ignored, anything else that deviates is refused.
    pub fn parse(value: &str) -> Result<Anchor, AnchorParseError> {
        let error = || AnchorParseError {
            value: value.to_string(),
        };
        let (count, hash) = value.trim().split_once(':').ok_or_else(error)?;
        let digits = !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit());
        let count: u64 = if digits {
            count.parse().map_err(|_| error())?
        } else {
            return Err(error());
        };
        let hex = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !hex {
            return Err(error());
        }
        Ok(Anchor {
            count,
            hash: hash.to_string(),
        })
    }
}

impl fmt::Display for Anchor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.count, self.hash)
    }
}

/// The most names [`Ledger::recorded_among_after`] looks up one by one; beyond it, reading
/// every event once costs less than reading them once per name.
const LOOKED_UP_ONE_BY_ONE: usize = 16;

impl Ledger {
    /// The chain head as recorded in the head row: what a commit made now anchors.
    pub fn anchor(&self) -> Result<Anchor, LedgerError> {
        let (count, hash): (i64, String) = self
            .conn
            .query_row("SELECT count, hash FROM chain_head WHERE id = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(sql_err(&self.path))?;
        Ok(Anchor {
            count: u64::try_from(count).unwrap_or(0),
            hash,
        })
    }

    /// The hash of event `position` (the event with that id: ids count from 1 and an
    /// honest chain has no gaps), or `None` when there is none; position 0 is the genesis
    /// hash. A lookup by id, so its cost does not grow with the ledger.
    pub fn hash_at(&self, position: u64) -> Result<Option<String>, LedgerError> {
        if position == 0 {
            return Ok(Some(super::GENESIS_HASH.to_string()));
        }
        let id = i64::try_from(position).unwrap_or(i64::MAX);
        self.conn
            .query_row("SELECT hash FROM events WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(sql_err(&self.path))
    }

    /// The run id and kind of event `position` (by id, as [`Ledger::hash_at`]), or `None`
    /// when there is none.
    pub fn kind_at(&self, position: u64) -> Result<Option<(Option<String>, String)>, LedgerError> {
        let id = i64::try_from(position).unwrap_or(i64::MAX);
        self.conn
            .query_row("SELECT run_id, kind FROM events WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(sql_err(&self.path))
    }

    /// Every commit an event after position `after` names as made by the engine (see
    /// [`COMMIT_EVENT_KINDS`]: its `commit`, and for a phase change also the `head` it
    /// left); `after = 0` reads the whole ledger. The events are found through the
    /// primary key, so a short tail costs what it holds, not what the ledger holds.
    pub fn recorded_commits_after(&self, after: u64) -> Result<BTreeSet<String>, LedgerError> {
        let sql = "SELECT json_extract(payload, '$.commit'), \
                   CASE kind WHEN 'phase_changed' THEN json_extract(payload, '$.head') END \
                   FROM events WHERE id > ?1 AND kind IN ('phase_changed', 'artifact_regenerated')";
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare(sql).map_err(sql_err(&self.path))?;
        let rows = stmt
            .query_map([after], |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?,
                    r.get::<_, Option<String>>(1)?,
                ))
            })
            .map_err(sql_err(&self.path))?;
        let mut commits = BTreeSet::new();
        for row in rows {
            let (commit, head) = row.map_err(sql_err(&self.path))?;
            commits.extend(commit.into_iter().chain(head));
        }
        Ok(commits)
    }

    /// Those of `among` that an event after position `after` names as made by the engine,
    /// as [`Ledger::recorded_commits_after`] would find them. For a few names (the check
    /// every command makes walks a handful of commits) only the events whose text holds
    /// one of them are read as JSON, one look for each name, so a check after many
    /// rolled-back phases does not parse each phase's observations (tens of kilobytes
    /// each). For more names than `LOOKED_UP_ONE_BY_ONE` (a whole branch walked), one
    /// pass over every event answers for all of them, as a look for each would read the
    /// events once per name.
    pub fn recorded_among_after(
        &self,
        after: u64,
        among: &[&str],
    ) -> Result<BTreeSet<String>, LedgerError> {
        if among.len() > LOOKED_UP_ONE_BY_ONE {
            let recorded = self.recorded_commits_after(after)?;
            return Ok(among
                .iter()
                .filter(|sha| recorded.contains(**sha))
                .map(|sha| (*sha).to_string())
                .collect());
        }
        // CASE evaluates in order: the JSON is parsed only where the text holds the name.
        let sql = "SELECT EXISTS (SELECT 1 FROM events WHERE id > ?1 \
                   AND kind IN ('phase_changed', 'artifact_regenerated') \
                   AND CASE WHEN instr(payload, ?2) = 0 THEN 0 \
                   ELSE json_extract(payload, '$.commit') IS ?2 \
                   OR (kind = 'phase_changed' AND json_extract(payload, '$.head') IS ?2) END)";
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare(sql).map_err(sql_err(&self.path))?;
        let mut found = BTreeSet::new();
        for sha in among {
            if sha.is_empty() {
                continue;
            }
            let named: bool = stmt
                .query_row(rusqlite::params![after, sha], |r| r.get(0))
                .map_err(sql_err(&self.path))?;
            if named {
                found.insert((*sha).to_string());
            }
        }
        Ok(found)
    }

    /// Whether run `run_id` has a `run_started` event (through the run index).
    pub fn has_started_run(&self, run_id: &str) -> Result<bool, LedgerError> {
        let sql = "SELECT EXISTS (SELECT 1 FROM events WHERE run_id = ?1 AND kind = 'run_started')";
        self.conn
            .query_row(sql, [run_id], |r| r.get(0))
            .map_err(sql_err(&self.path))
    }

    /// Whether run `run_id` recorded a commit (an event of [`COMMIT_EVENT_KINDS`]) after
    /// event `position` (through the run index).
    pub fn run_records_commits_after(
        &self,
        run_id: &str,
        position: u64,
    ) -> Result<bool, LedgerError> {
        let id = i64::try_from(position).unwrap_or(i64::MAX);
        let sql = "SELECT EXISTS (SELECT 1 FROM events WHERE run_id = ?1 AND id > ?2 \
                   AND kind IN ('phase_changed', 'artifact_regenerated'))";
        self.conn
            .query_row(sql, rusqlite::params![run_id, id], |r| r.get(0))
            .map_err(sql_err(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn an_anchor_reads_back_what_it_writes() {
        let anchor = Anchor {
            count: 42,
            hash: HASH.to_string(),
        };
        let text = anchor.to_string();
        assert_eq!(text, format!("42:{HASH}"));
        assert_eq!(Anchor::parse(&text), Ok(anchor.clone()));
        assert_eq!(Anchor::parse(&format!("  {text}\n")), Ok(anchor));
    }

    #[test]
    fn malformed_anchors_are_refused() {
        for bad in [
            "",
            "42",
            HASH,
            &format!(":{HASH}"),
            &format!("-1:{HASH}"),
            &format!("4 2:{HASH}"),
            &format!("42:{}", &HASH[1..]),
            &format!("42:{}", HASH.to_uppercase()),
            &format!("42:{HASH}0"),
            &format!("99999999999999999999999:{HASH}"),
        ] {
            assert!(Anchor::parse(bad).is_err(), "{bad:?} was read as an anchor");
        }
    }

    #[test]
    fn the_head_anchor_and_positions_follow_the_chain() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ledger = Ledger::open(&dir.path().join("l.sqlite3")).expect("open");
        assert_eq!(ledger.anchor().expect("anchor").count, 0);
        let first = ledger
            .append(Some("r"), "note", &serde_json::json!({}))
            .expect("append");
        let second = ledger
            .append(None, "note", &serde_json::json!({}))
            .expect("append");
        let head = ledger.anchor().expect("anchor");
        assert_eq!(
            head,
            Anchor {
                count: 2,
                hash: second.hash.clone()
            }
        );
        assert_eq!(ledger.hash_at(1).expect("hash"), Some(first.hash));
        assert_eq!(ledger.hash_at(2).expect("hash"), Some(second.hash));
        assert_eq!(ledger.hash_at(3).expect("hash"), None);
        assert_eq!(
            ledger.kind_at(1).expect("kind"),
            Some((Some("r".to_string()), "note".to_string()))
        );
        assert_eq!(ledger.kind_at(3).expect("kind"), None);
        assert!(!ledger.run_records_commits_after("r", 0).expect("query"));
        ledger
            .append(Some("r"), "phase_changed", &serde_json::json!({}))
            .expect("append");
        assert!(ledger.run_records_commits_after("r", 2).expect("query"));
        assert!(!ledger.run_records_commits_after("r", 3).expect("query"));
    }

    #[test]
    fn commits_named_by_phase_changes_and_artifacts_are_recorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ledger = Ledger::open(&dir.path().join("l.sqlite3")).expect("open");
        ledger
            .append(Some("r"), "run_started", &serde_json::json!({}))
            .expect("append");
        ledger
            .append(
                Some("r"),
                "phase_changed",
                &serde_json::json!({ "commit": "c1", "head": "c1" }),
            )
            .expect("append");
        ledger
            .append(
                Some("r"),
                "phase_changed",
                &serde_json::json!({ "commit": null, "head": "c0" }),
            )
            .expect("append");
        ledger
            .append(
                Some("r"),
                "artifact_regenerated",
                &serde_json::json!({ "commit": "c2" }),
            )
            .expect("append");
        ledger
            .append(
                Some("r"),
                "cycle_opened",
                &serde_json::json!({ "head": "c3" }),
            )
            .expect("append");
        let after = |n| -> Vec<String> {
            ledger
                .recorded_commits_after(n)
                .expect("commits")
                .into_iter()
                .collect()
        };
        assert_eq!(after(0), vec!["c0", "c1", "c2"]);
        assert_eq!(after(2), vec!["c0", "c2"]);
        assert_eq!(after(3), vec!["c2"]);
        assert!(after(4).is_empty());
        // Asked for some names: the same answer, whatever else their text holds.
        ledger
            .append(
                Some("r"),
                "phase_changed",
                &serde_json::json!({ "commit": null, "head": "c5", "undone_from": "c4", "files": ["c6"] }),
            )
            .expect("append");
        ledger
            .append(
                Some("r"),
                "artifact_regenerated",
                &serde_json::json!({ "commit": "c7", "head": "c8" }),
            )
            .expect("append");
        let among = |n| -> Vec<String> {
            ledger
                .recorded_among_after(
                    n,
                    &["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", ""],
                )
                .expect("commits")
                .into_iter()
                .collect()
        };
        assert_eq!(among(0), vec!["c0", "c1", "c2", "c5", "c7"]);
        assert_eq!(among(2), vec!["c0", "c2", "c5", "c7"]);
        assert_eq!(among(5), vec!["c5", "c7"]);
        assert_eq!(among(6), vec!["c7"]);
        assert!(among(7).is_empty());
        assert!(ledger.has_started_run("r").expect("query"));
        assert!(!ledger.has_started_run("other").expect("query"));
    }

    #[test]
    fn many_names_asked_at_once_get_the_answer_a_few_at_a_time_get() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ledger = Ledger::open(&dir.path().join("l.sqlite3")).expect("open");
        for i in 0..30 {
            let payload = serde_json::json!({ "commit": format!("c{i}"), "head": format!("h{i}"), "undone_from": format!("u{i}") });
            ledger
                .append(Some("r"), "phase_changed", &payload)
                .expect("append");
        }
        let names: Vec<String> = (0..30)
            .flat_map(|i| [format!("c{i}"), format!("h{i}"), format!("u{i}")])
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert!(names.len() > LOOKED_UP_ONE_BY_ONE);
        for after in [0, 10, 29, 30] {
            let few: BTreeSet<String> = names
                .chunks(LOOKED_UP_ONE_BY_ONE)
                .flat_map(|chunk| ledger.recorded_among_after(after, chunk).expect("few"))
                .collect();
            let many = ledger.recorded_among_after(after, &names).expect("many");
            assert_eq!(many, few, "after {after}");
            assert_eq!(many.len(), 2 * (30 - after as usize), "after {after}");
        }
    }
}
