//! The one wall clock of the records `tdd` writes: the ledger's events, the envelopes,
//! the work-tree lock records and the conductor's position.
//!
//! Times are stored as UTC RFC 3339 text ([`now_rfc3339`]); ages shown to a person are
//! computed from whole seconds since the Unix epoch ([`unix_seconds`]). Both read the
//! same clock. `TDD_NOW` pins the text form only, so tests reproduce events and
//! envelopes byte for byte; the seconds are never pinned, because an age computed from a
//! pinned clock would always be zero.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The text a record carries when the clock cannot be formatted.
const EPOCH: &str = "1970-01-01T00:00:00Z";

/// The current UTC time as RFC 3339 text (`TDD_NOW` pins it, for reproducible tests).
///
/// Guarantees: never fails and never panics; a time that cannot be formatted (a year
/// outside 0..=9999, which a clock reading cannot produce) reads as the Unix epoch.
pub fn now_rfc3339() -> String {
    if let Ok(fixed) = std::env::var("TDD_NOW")
        && !fixed.is_empty()
    {
        return fixed;
    }
    now().format(&Rfc3339).unwrap_or_else(|_| EPOCH.to_string())
}

/// Whole seconds since the Unix epoch, never pinned by `TDD_NOW`; 0 for a clock set
/// before 1970.
pub fn unix_seconds() -> u64 {
    u64::try_from(now().unix_timestamp()).unwrap_or(0)
}

/// The wall clock both forms read.
fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_read_the_same_clock() {
        let seconds = unix_seconds();
        let text = now().format(&Rfc3339).expect("formats");
        let parsed = OffsetDateTime::parse(&text, &Rfc3339).expect("parses");
        let parsed = u64::try_from(parsed.unix_timestamp()).expect("after 1970");
        assert!(parsed.abs_diff(seconds) <= 1, "{parsed} vs {seconds}");
    }
}
