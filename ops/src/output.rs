//! Printing, parsing of durations and errors: one shape for every command.
//!
//! Human output follows three conventions: a point in time is RFC 3339 in UTC with
//! milliseconds ([`time_text`]), a listing is a [`Table`] (a header row, columns aligned),
//! and progress goes to stderr (`progress.rs`). `--json` output is never a table.

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

/// Milliseconds since the epoch as RFC 3339 UTC (`2026-12-02T01:02:03.456Z`): the one
/// way every command prints a point in time.
pub(crate) fn time_text(ms: u64) -> String {
    whip_board::time_text(ms)
}

/// A time in a table cell: `-` where 0 means "none" (no deadline, never started).
pub(crate) fn time_cell(ms: u64) -> String {
    match ms {
        0 => "-".to_string(),
        ms => time_text(ms),
    }
}

/// Columns between two cells of a [`Table`] row.
const TABLE_GAP: &str = "  ";

/// A listing for people: a header row, then one row per item, every column padded to its
/// widest cell so that each column starts at the same offset on every line. The last
/// column is not padded (no trailing blanks); an empty cell prints as `-`, and control
/// characters in cells (a newline in a message) print as spaces so that one item stays one
/// line.
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names (printed upper-case, like `ps` and `kubectl`).
    pub(crate) fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_uppercase()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row; it has as many cells as the header.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.header.len(),
            "a row has one cell per column"
        );
        let clean = |cell: String| match cell.chars().any(char::is_control) {
            _ if cell.is_empty() => "-".to_string(),
            true => cell
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
            false => cell,
        };
        self.rows.push(cells.into_iter().map(clean).collect());
    }

    /// The printed lines: the header and the rows, or `empty` alone when there are no rows.
    pub(crate) fn lines_or(&self, empty: &str) -> Vec<String> {
        if self.rows.is_empty() {
            return vec![empty.to_string()];
        }
        let header = &self.header;
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        std::iter::once(header)
            .chain(&self.rows)
            .map(|row| render(row, &widths))
            .collect()
    }

    /// Print the table on stdout, or `empty` when it has no rows.
    pub(crate) fn print_or(&self, empty: &str) {
        for text in self.lines_or(empty) {
            line(&text);
        }
    }
}

fn render(row: &[String], widths: &[usize]) -> String {
    let mut text = String::new();
    for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
        if i + 1 == row.len() {
            text.push_str(cell);
        } else {
            let pad = width - cell.chars().count();
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', pad));
            text.push_str(TABLE_GAP);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{Table, time_text};

    #[test]
    fn columns_start_at_one_offset_and_the_last_is_not_padded() {
        let mut table = Table::new(&["lease", "holder", "expires"]);
        table.row(vec!["a::x/k".into(), "w1".into(), time_text(1_000)]);
        table.row(vec![
            "shared::long/key".into(),
            "worker-22".into(),
            "-".into(),
        ]);
        let lines = table.lines_or("none");
        assert_eq!(lines[0], "LEASE             HOLDER     EXPIRES");
        assert_eq!(
            lines[1],
            "a::x/k            w1         1970-01-01T00:00:01.000Z"
        );
        assert_eq!(lines[2], "shared::long/key  worker-22  -");
        assert_eq!(Table::new(&["a"]).lines_or("no rows"), vec!["no rows"]);
    }

    #[test]
    fn a_newline_in_a_cell_keeps_the_row_on_one_line() {
        let mut table = Table::new(&["id", "text"]);
        table.row(vec!["m1".into(), "two\nlines".into()]);
        assert_eq!(table.lines_or("")[1], "m1  two lines");
    }

    #[test]
    fn times_are_rfc3339_with_milliseconds_in_utc() {
        assert_eq!(time_text(1_796_173_323_456), "2026-12-02T01:02:03.456Z");
        assert!(time_text(u64::MAX).contains("out of range"));
    }
}
