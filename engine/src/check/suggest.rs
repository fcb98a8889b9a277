//! "Did you mean" suggestions by edit distance.

use crate::limits;

/// The candidate closest to `name`, if it is close enough to be a likely typo.
pub fn best<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() > limits::SUGGESTION_NAME_BYTES_MAX {
        return None;
    }
    let budget = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != name && c.len() <= limits::SUGGESTION_NAME_BYTES_MAX)
        .map(|c| (distance(&name.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// The help line for a misspelled name: a suggestion or `fallback`.
pub fn help<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    fallback: impl Into<String>,
) -> String {
    match best(name, candidates) {
        Some(s) => format!("did you mean `{s}`?"),
        None => fallback.into(),
    }
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let next = (row[j] + 1).min(row[j + 1] + 1).min(prev + cost);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            best("deploy_slt", ["deploy_slot", "tokens"]),
            Some("deploy_slot")
        );
        assert_eq!(best("xyz", ["deploy_slot"]), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
