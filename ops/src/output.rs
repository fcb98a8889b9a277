//! Printing, parsing of durations and errors: one shape for every command.

use std::io::Write;
use std::process::ExitCode;

use crate::Global;

/// Parse a duration `30s`, `10m`, `2h`, `90d` or `250ms` into milliseconds.
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("invalid duration `{text}`: expected e.g. 30s, 10m, 2h, 90d"))?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "invalid duration `{text}`: unit must be ms, s, m, h or d"
            ));
        }
    };
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("invalid duration `{text}`: too large"))
}

/// Print a JSON value on stdout (quietly stop on a closed pipe).
pub(crate) fn json(value: &serde_json::Value) {
    line(&value.to_string());
}

/// Print one line on stdout; a broken pipe ends the process quietly.
pub(crate) fn line(text: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").is_err() {
        std::process::exit(0);
    }
}

/// Report a failure (JSON on stdout with --json, text on stderr) and return exit code 1.
pub(crate) fn fail(global: &Global, err: &anyhow::Error) -> ExitCode {
    if global.json {
        json(&serde_json::json!({ "error": format!("{err:#}") }));
    }
    // Diagnostics rendered by the checker already start with `error: `.
    let text = format!("{err:#}");
    match text.starts_with("error: ") {
        true => eprintln!("{text}"),
        false => eprintln!("error: {text}"),
    }
    ExitCode::from(1)
}

/// Milliseconds since the epoch as RFC 3339 UTC.
pub(crate) fn time_text(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}
