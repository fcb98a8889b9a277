//! ISO-8601 instants as `timer until` takes them: RFC 3339 date-times
//! (`2026-01-01T09:30:00Z`, `2026-01-01T09:30:00.250+02:00`). A pure parser, so the checker
//! can refuse a bad literal and the stepper can read a `time` value the same way.

/// Milliseconds since the Unix epoch of `text`, or `None` when it is no RFC 3339 instant.
pub fn parse_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let digits = text.get(from..to)?;
        digits
            .bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| digits.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse::<i64>().ok()?;
        rest = &fraction[digits..];
    }
    let offset_s = offset_seconds(rest)?;
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_s;
    Some(seconds * 1_000 + millis)
}

/// `Z` or `±HH:MM`, in seconds east of UTC.
fn offset_seconds(rest: &str) -> Option<i64> {
    if rest == "Z" || rest == "z" {
        return Some(0);
    }
    let b = rest.as_bytes();
    if b.len() != 6 || b[3] != b':' {
        return None;
    }
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let hours: i64 = rest.get(1..3)?.parse().ok()?;
    let minutes: i64 = rest.get(4..6)?.parse().ok()?;
    (hours <= 23 && minutes <= 59).then_some(sign * (hours * 3_600 + minutes * 60))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn rfc3339_instants_parse_and_others_do_not() {
        assert_eq!(parse_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ms("2026-01-01T00:00:00Z"), Some(1_767_225_600_000));
        assert_eq!(
            parse_ms("2026-01-01T02:00:00.5+02:00"),
            Some(1_767_225_600_500)
        );
        assert_eq!(parse_ms("2024-02-29T12:00:00Z"), Some(1_709_208_000_000));
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-01-01",
            "tomorrow",
            "2026-01-01T00:00:00",
        ] {
            assert_eq!(parse_ms(bad), None, "{bad}");
        }
    }
}
