//! Wall-clock timestamps for records: UTC RFC 3339 text, as every tdd format uses.
//!
//! Deadlines inside the supervisor use `Instant` (monotonic); only what is written
//! to disk, and ages computed from it, go through this module.
//!
//! This is deliberately not `tdd-ledger`'s clock, which the rest of `tdd` shares: this
//! crate depends on no crate of the workspace, and ages (idle time, leaf age) are
//! computed from these stamps, so `TDD_NOW`, which pins the ledger's clock for
//! reproducible tests, must never pin them.

use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The current time as UTC RFC 3339 text with sub-second precision.
pub(crate) fn now_rfc3339() -> String {
    format(OffsetDateTime::now_utc())
}

/// Formats a time as UTC RFC 3339 text.
pub(crate) fn format(at: OffsetDateTime) -> String {
    // Formatting only fails for years outside 0..=9999, which a clock reading
    // cannot produce; the epoch keeps the record parseable if it ever does.
    at.format(&Rfc3339)
        .unwrap_or_else(|_| String::from("1970-01-01T00:00:00Z"))
}

/// How long ago an RFC 3339 timestamp was; `None` when it does not parse.
///
/// A timestamp in the future (clock stepped back) yields zero, never a panic.
pub(crate) fn age(timestamp: &str) -> Option<Duration> {
    let then = OffsetDateTime::parse(timestamp, &Rfc3339).ok()?;
    let elapsed = OffsetDateTime::now_utc() - then;
    Some(elapsed.try_into().unwrap_or(Duration::ZERO))
}

/// Milliseconds in a duration, saturating instead of overflowing.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_of_now_is_small_and_garbage_is_none() {
        let now = now_rfc3339();
        let age = age(&now).expect("own timestamps parse");
        assert!(age < Duration::from_secs(60));
        assert_eq!(super::age("yesterday"), None);
    }

    #[test]
    fn future_timestamps_have_zero_age() {
        let future = format(OffsetDateTime::now_utc() + time::Duration::hours(1));
        assert_eq!(age(&future), Some(Duration::ZERO));
    }
}
