//! Path patterns of reservations and whether two of them can name the same path.
//!
//! A pattern is a path relative to a repository's top directory, segments separated by
//! `/`. The syntax is deliberately small:
//!
//! - a segment that is exactly `**` matches zero or more whole segments (so `src/**`
//!   covers `src` itself and everything below it);
//! - `*` inside a segment matches any run of characters other than `/` (also none);
//! - `?` matches exactly one character other than `/`;
//! - every other character is itself: there are no character classes and no escapes, so
//!   `[id].tsx` is the literal file of that name.
//!
//! A pattern is refused when it is empty, starts or ends with `/`, has an empty, `.` or
//! `..` segment, holds a control character or a `\`, uses `**` inside a longer segment,
//! or passes the bounds of `crate::limits` (bytes, segments, wildcards): the bounds keep
//! the overlap check of one apply small.
//!
//! [`overlap`] decides whether some path matches both patterns: both patterns are
//! regular languages over segments, and the check walks their product (segments, then
//! characters inside a pair of segments), remembering the pairs of positions already
//! found to lead nowhere. It is symmetric, and a literal path overlaps a pattern exactly
//! when the pattern matches it.

use std::collections::BTreeSet;

use crate::limits::{
    PATH_PATTERN_BYTES_MAX, PATH_PATTERN_SEGMENTS_MAX, PATH_PATTERN_WILDCARDS_MAX,
};

/// One segment of a checked pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// `**`: zero or more whole segments.
    Any,
    /// A segment pattern, as characters (`*` and `?` are wildcards).
    Chars(Vec<char>),
}

impl Segment {
    fn literal(&self) -> Option<&[char]> {
        match self {
            Segment::Chars(chars) if !chars.iter().any(|c| *c == '*' || *c == '?') => Some(chars),
            _ => None,
        }
    }
}

/// Check `pattern` against the syntax and bounds above; `Err` says what is wrong.
pub fn check(pattern: &str) -> Result<(), String> {
    parse(pattern).map(|_| ())
}

/// Whether `pattern` holds a wildcard (`*`, `?` or a `**` segment).
pub fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

fn parse(pattern: &str) -> Result<Vec<Segment>, String> {
    let bad = |why: &str| Err(format!("path pattern {pattern:?} {why}"));
    if pattern.is_empty() {
        return bad("is empty");
    }
    if pattern.len() > PATH_PATTERN_BYTES_MAX {
        return bad(&format!("is longer than {PATH_PATTERN_BYTES_MAX} bytes"));
    }
    if pattern.starts_with('/') || pattern.ends_with('/') {
        return bad("must be relative to the repository's top and not end with /");
    }
    if pattern.chars().any(|c| c.is_control() || c == '\\') {
        return bad("holds a control character or a backslash");
    }
    let wildcards = pattern.matches(['*', '?']).count();
    if wildcards > PATH_PATTERN_WILDCARDS_MAX {
        return bad(&format!(
            "has {wildcards} wildcards, the limit is {PATH_PATTERN_WILDCARDS_MAX}"
        ));
    }
    let parts: Vec<&str> = pattern.split('/').collect();
    if parts.len() > PATH_PATTERN_SEGMENTS_MAX {
        return bad(&format!(
            "has {} segments, the limit is {PATH_PATTERN_SEGMENTS_MAX}",
            parts.len()
        ));
    }
    let mut segments = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            "" => return bad("has an empty segment"),
            "." | ".." => return bad("has a . or .. segment"),
            "**" => segments.push(Segment::Any),
            part if part.contains("**") => return bad("uses ** inside a segment"),
            part => segments.push(Segment::Chars(part.chars().collect())),
        }
    }
    Ok(segments)
}

/// Whether some path matches both `a` and `b`. `Err` when either is not a valid pattern.
pub fn overlap(a: &str, b: &str) -> Result<bool, String> {
    let (a, b) = (parse(a)?, parse(b)?);
    Ok(Walk::default().segments(&a, &b, 0, 0))
}

/// Whether `pattern` matches the file `path` (relative to the repository's top, segments
/// separated by `/`). The path is read as a path, not checked as a pattern: a file with a
/// deep or long name still matches `**`. `Err` when the pattern is not valid, or the path
/// is empty.
pub fn matches(pattern: &str, path: &str) -> Result<bool, String> {
    let pattern = parse(pattern)?;
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    let path: Vec<Segment> = (path.split('/'))
        .filter(|part| !part.is_empty())
        .map(|part| Segment::Chars(part.chars().collect()))
        .collect();
    Ok(Walk::default().segments(&pattern, &path, 0, 0))
}

/// The product walk, with the position pairs already known to lead nowhere.
#[derive(Default)]
struct Walk {
    dead_segments: BTreeSet<(usize, usize)>,
}

impl Walk {
    fn segments(&mut self, a: &[Segment], b: &[Segment], i: usize, j: usize) -> bool {
        if self.dead_segments.contains(&(i, j)) {
            return false;
        }
        let found = self.segments_step(a, b, i, j);
        if !found {
            self.dead_segments.insert((i, j));
        }
        found
    }

    fn segments_step(&mut self, a: &[Segment], b: &[Segment], i: usize, j: usize) -> bool {
        match (a.get(i), b.get(j)) {
            (None, None) => true,
            // `**` matches nothing, or takes one segment the other side makes and stays.
            (Some(Segment::Any), other) => {
                self.segments(a, b, i + 1, j) || (other.is_some() && self.segments(a, b, i, j + 1))
            }
            (other, Some(Segment::Any)) => {
                self.segments(a, b, i, j + 1) || (other.is_some() && self.segments(a, b, i + 1, j))
            }
            (Some(Segment::Chars(x)), Some(Segment::Chars(y))) => {
                segment_overlap(&a[i], &b[j], x, y) && self.segments(a, b, i + 1, j + 1)
            }
            // One side is out of segments while the other still needs one.
            (None, Some(_)) | (Some(_), None) => false,
        }
    }
}

/// Whether one segment matches both segment patterns.
fn segment_overlap(a: &Segment, b: &Segment, x: &[char], y: &[char]) -> bool {
    if let (Some(x), Some(y)) = (a.literal(), b.literal()) {
        return x == y;
    }
    chars(x, y, 0, 0, &mut BTreeSet::new())
}

fn chars(x: &[char], y: &[char], i: usize, j: usize, dead: &mut BTreeSet<(usize, usize)>) -> bool {
    if dead.contains(&(i, j)) {
        return false;
    }
    let found = match (x.get(i), y.get(j)) {
        (None, None) => true,
        // A star matches nothing, or eats a character the other side makes and stays.
        (Some('*'), other) => {
            chars(x, y, i + 1, j, dead) || (other.is_some() && chars(x, y, i, j + 1, dead))
        }
        (other, Some('*')) => {
            chars(x, y, i, j + 1, dead) || (other.is_some() && chars(x, y, i + 1, j, dead))
        }
        (Some(p), Some(q)) => (*p == '?' || *q == '?' || p == q) && chars(x, y, i + 1, j + 1, dead),
        (None, Some(_)) | (Some(_), None) => false,
    };
    if !found {
        dead.insert((i, j));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(a: &str, b: &str) -> bool {
        let forward = overlap(a, b).expect("valid patterns");
        let backward = overlap(b, a).expect("valid patterns");
        assert_eq!(
            forward, backward,
            "overlap is symmetric for {a:?} and {b:?}"
        );
        forward
    }

    #[test]
    fn literal_paths_overlap_only_when_equal() {
        assert!(both("src/a.rs", "src/a.rs"));
        assert!(!both("src/a.rs", "src/b.rs"));
        assert!(!both("src/a.rs", "src/a.rs.orig"));
        assert!(
            !both("src", "src/a.rs"),
            "a directory is not its files without **"
        );
        assert!(both("[id].tsx", "[id].tsx"), "brackets are literal");
        assert!(!both("[id].tsx", "i.tsx"));
    }

    #[test]
    fn a_star_stays_inside_its_segment() {
        assert!(both("src/*.rs", "src/a.rs"));
        assert!(both("src/*.rs", "src/.rs"), "a star may match nothing");
        assert!(!both("src/*.rs", "src/a/b.rs"));
        assert!(!both("src/*.rs", "src/a.toml"));
        assert!(both("src/a*", "src/*b"), "src/ab matches both");
        assert!(!both("src/a*", "src/b*"));
        assert!(both("*", "README.md"));
        assert!(!both("*", "docs/README.md"));
        assert!(both("src/*.rs", "src/*.rs"));
        assert!(both("src/*x*", "src/*y*"), "src/xy matches both");
        assert!(!both("src/x*.rs", "src/y*.rs"));
    }

    #[test]
    fn a_question_mark_is_one_character() {
        assert!(both("src/?.rs", "src/a.rs"));
        assert!(!both("src/?.rs", "src/ab.rs"));
        assert!(!both("src/?.rs", "src/.rs"));
        assert!(both("src/??.rs", "src/*.rs"));
        assert!(both("src/?é.rs", "src/xé.rs"), "characters, not bytes");
        assert!(!both("a?c", "a/c"), "? never matches /");
    }

    #[test]
    fn a_double_star_crosses_segments() {
        assert!(both("src/**", "src/x/y.rs"));
        assert!(both("src/**", "src"), "** may match no segment");
        assert!(both("src/**", "src/a.rs"));
        assert!(!both("src/**", "tests/a.rs"));
        assert!(!both("src/**", "srcx/a.rs"));
        assert!(both("**/*.rs", "deep/down/lib.rs"));
        assert!(both("**/*.rs", "lib.rs"));
        assert!(!both("**/*.rs", "lib.toml"));
        assert!(both("**", "anything/at/all"));
        assert!(both("src/**/mod.rs", "src/mod.rs"));
        assert!(both("src/**/mod.rs", "src/a/b/mod.rs"));
        assert!(!both("src/**/mod.rs", "src/a/b/lib.rs"));
        assert!(both("a/**/z", "**/m/**"), "a/m/z");
        assert!(!both("a/**/z", "b/**"));
        assert!(both("**/x/**", "**/y/**"), "x/y");
    }

    #[test]
    fn wildcards_on_both_sides() {
        assert!(both("a/*/c", "a/b/*"), "a/b/c matches both");
        assert!(!both("a/*/c", "a/b/*/d"));
        assert!(!both("a/*/c", "a/b"));
        assert!(both("a/*/c", "*/b/c"));
        assert!(!both("a/*/c", "x/*/c"));
        assert!(both("src/*.rs", "src/**"));
        assert!(both("docs/*.md", "*/README.*"));
        assert!(!both("docs/*.md", "src/**"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "/abs",
            "dir/",
            "a//b",
            "./a",
            "a/../b",
            "a/b**",
            "a\\b",
            "tab\there",
        ] {
            assert!(check(bad).is_err(), "{bad:?} should be refused");
        }
        let long = "a".repeat(PATH_PATTERN_BYTES_MAX + 1);
        assert!(check(&long).unwrap_err().contains("longer"));
        let deep = vec!["d"; PATH_PATTERN_SEGMENTS_MAX + 1].join("/");
        assert!(check(&deep).unwrap_err().contains("segments"));
        let wild = "*".repeat(PATH_PATTERN_WILDCARDS_MAX + 1);
        assert!(check(&wild).unwrap_err().contains("wildcards"));
        assert!(check("src/**/*.rs").is_ok());
        assert!(is_glob("src/*.rs") && !is_glob("src/a.rs"));
    }

    #[test]
    fn a_file_matches_as_a_path_whatever_its_length() {
        let deep = vec!["d"; PATH_PATTERN_SEGMENTS_MAX * 2].join("/");
        assert_eq!(matches("**", &deep), Ok(true));
        assert_eq!(matches("d/**/x", &deep), Ok(false));
        assert_eq!(matches("src/a.rs", "src/a.rs"), Ok(true));
        assert_eq!(matches("src/*.rs", "src/b/a.rs"), Ok(false));
        assert!(matches("src/*.rs", "").is_err());
        assert!(matches("/bad", "x").is_err());
    }

    /// The worst patterns the bounds allow still answer quickly (the memo keeps the walk
    /// polynomial: at most positions of one side times positions of the other).
    #[test]
    fn hostile_patterns_stay_cheap() {
        let star_run = |c: char| {
            let mut s = String::new();
            for _ in 0..PATH_PATTERN_WILDCARDS_MAX {
                s.push('*');
                s.extend(std::iter::repeat_n(c, 28));
            }
            s
        };
        assert!(!both(&star_run('a'), &star_run('b')));
        let deep = |tail: &str| {
            let mut parts = vec!["**"; 4];
            parts.extend(vec!["x"; PATH_PATTERN_SEGMENTS_MAX - 5]);
            parts.push(tail);
            parts.join("/")
        };
        assert!(!both(&deep("y"), &deep("z")));
    }
}
