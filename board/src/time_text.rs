//! How every face of whip prints a point in time: RFC 3339 in UTC with milliseconds
//! (`2026-12-02T01:02:03.456Z`). Formatting only: nothing here reads a clock.

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
///
/// ```
/// assert_eq!(whip_board::time_text(1_796_173_323_456), "2026-12-02T01:02:03.456Z");
/// ```
pub fn time_text(ms: u64) -> String {
    let utc = i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis);
    match utc {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        // Past chrono's range (year 262143): say so rather than print a bare number.
        None => format!("(out of range: {ms} ms since the epoch)"),
    }
}

#[cfg(test)]
mod tests {
    use super::time_text;

    #[test]
    fn times_are_rfc3339_with_milliseconds_in_utc() {
        assert_eq!(time_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(time_text(1_796_173_323_456), "2026-12-02T01:02:03.456Z");
        assert!(time_text(u64::MAX).contains("out of range"));
    }
}
