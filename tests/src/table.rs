//! Reading the human tables `whip` prints (a header row of upper-case column names, then
//! one row per item, every column starting at its header's offset), so that tests check
//! cells by column rather than grep a line shape.

use std::collections::BTreeMap;

/// One row: column name (as in the header, upper-case) → the cell, trimmed.
pub type Row = BTreeMap<String, String>;

/// The rows of the table `text` starts with (it ends at the first blank line), each cell
/// cut at its header's offset. Panics, naming the line, when a row does not line up: a
/// cell that starts before its column, or a column offset that falls inside a cell.
pub fn rows(text: &str) -> Vec<Row> {
    let mut lines = text.lines().take_while(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let columns = columns(header);
    lines.map(|line| row(&columns, line)).collect()
}

/// Each column's name and the character offset where it starts.
pub fn columns(header: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = header.chars().collect();
    let mut out = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        if !c.is_whitespace() && (i == 0 || chars[i - 1].is_whitespace()) {
            let name: String = chars[i..]
                .iter()
                .take_while(|c| !c.is_whitespace())
                .collect();
            out.push((name, i));
        }
    }
    out
}

fn row(columns: &[(String, usize)], line: &str) -> Row {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Row::new();
    for (k, (name, start)) in columns.iter().enumerate() {
        let end = columns
            .get(k + 1)
            .map_or(chars.len(), |(_, s)| (*s).min(chars.len()));
        let start = (*start).min(chars.len());
        assert!(
            start == 0 || start >= chars.len() || chars[start - 1] == ' ',
            "column {name} does not start at its header's offset {start}: {line:?}"
        );
        let cell: String = chars[start..end.max(start)].iter().collect();
        let cell = cell.trim().to_string();
        if k + 1 < columns.len() {
            assert!(
                !cell.is_empty() && end <= chars.len() && (end == 0 || chars[end - 1] == ' '),
                "column {name} is not aligned: {line:?}"
            );
        }
        out.insert(name.clone(), cell);
    }
    out
}
