//! Goal: the style guide's two measurable rules hold in every crate: functions stay within
//! 70 lines and lines within 100 columns. Method: walk every `.rs` file of the workspace,
//! find each `fn` and the brace that closes its body (strings, characters and comments
//! skipped), and compare. Functions that were longer before this check are listed in
//! `tests/tidy_grandfathered.txt` with their length; a listed function may shrink (the
//! list is then updated) but never grow, and a function that fits is taken off the list.
//! `TIDY_REWRITE=1` rewrites the list from the tree (for shrinking it; review the diff).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FUNCTION_LINES_MAX: usize = 70;
const LINE_COLUMNS_MAX: usize = 100;
const CRATES: [&str; 7] = ["proto", "board", "cell", "fabric", "engine", "ops", "tests"];
const GRANDFATHERED: &str = "tests/tidy_grandfathered.txt";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("board sits in the workspace")
        .to_path_buf()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.ends_with("target") {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of `line` with string and character literals blanked and comments removed;
/// `in_block` carries a `/* */` comment across lines.
fn code_of(line: &str, in_block: &mut bool) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        if *in_block {
            if c == '*' && next == Some('/') {
                *in_block = false;
                i += 1;
            }
        } else if c == '/' && next == Some('/') {
            break;
        } else if c == '/' && next == Some('*') {
            *in_block = true;
            i += 1;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 2;
        } else if c == '\'' && next == Some('\\') {
            while i + 1 < chars.len() && chars[i + 1] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// The name of the function a code line starts, if it starts one.
fn fn_name(code: &str) -> Option<String> {
    let words: Vec<&str> = code.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let modifiers = ["pub", "async", "const", "unsafe", "extern", "default"];
    let before_ok = words[..at]
        .iter()
        .all(|w| modifiers.contains(w) || w.starts_with("pub(") || w.starts_with('"'));
    let name = words.get(at + 1)?;
    let name: String = name
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (before_ok && !name.is_empty()).then_some(name)
}

/// Every function of `text` longer than the limit: (name, lines), and every long line.
fn measure(text: &str) -> (Vec<(String, usize)>, Vec<usize>) {
    let mut in_block = false;
    let codes: Vec<String> = text.lines().map(|l| code_of(l, &mut in_block)).collect();
    let long_lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.chars().count() > LINE_COLUMNS_MAX)
        .map(|(n, _)| n + 1)
        .collect();
    let mut long_fns = Vec::new();
    for (start, code) in codes.iter().enumerate() {
        let Some(name) = fn_name(code) else { continue };
        let (mut depth, mut opened) = (0i64, false);
        for (end, line) in codes.iter().enumerate().skip(start) {
            for c in line.chars() {
                match c {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    ';' if !opened && depth == 0 => break,
                    _ => {}
                }
            }
            if !opened && line.trim_end().ends_with(';') {
                break;
            }
            if opened && depth <= 0 {
                let lines = end - start + 1;
                if lines > FUNCTION_LINES_MAX {
                    long_fns.push((name.clone(), lines));
                }
                break;
            }
        }
    }
    (long_fns, long_lines)
}

#[test]
fn functions_and_lines_stay_within_the_style_guide() {
    let root = workspace();
    let mut files = Vec::new();
    for krate in CRATES {
        sources(&root.join(krate), &mut files);
    }
    files.sort();
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    let mut too_wide = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source is readable");
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        let (long_fns, long_lines) = measure(&text);
        for (name, lines) in long_fns {
            let entry = found.entry(format!("{rel}::{name}")).or_default();
            *entry = (*entry).max(lines);
        }
        too_wide.extend(long_lines.into_iter().map(|n| format!("{rel}:{n}")));
    }
    let list_path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GRANDFATHERED);
    if std::env::var_os("TIDY_REWRITE").is_some() {
        let text: String = found.iter().map(|(f, n)| format!("{f} {n}\n")).collect();
        std::fs::write(&list_path, text).expect("write the list");
    }
    let listed: BTreeMap<String, usize> = std::fs::read_to_string(&list_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(f, n)| (f.to_string(), n.parse().expect("a length")))
        .collect();
    let mut problems = Vec::new();
    for (function, lines) in &found {
        match listed.get(function) {
            None => problems.push(format!(
                "{function} is {lines} lines (max {FUNCTION_LINES_MAX})"
            )),
            Some(before) if lines > before => {
                problems.push(format!("{function} grew from {before} to {lines} lines"))
            }
            Some(_) => {}
        }
    }
    for (function, before) in &listed {
        if !found.contains_key(function) {
            problems.push(format!(
                "{function} (listed at {before} lines) now fits or is gone: \
                 take it off {GRANDFATHERED}"
            ));
        }
    }
    for place in &too_wide {
        problems.push(format!("{place} is over {LINE_COLUMNS_MAX} columns"));
    }
    assert!(problems.is_empty(), "tidy:\n{}", problems.join("\n"));
}

/// What `board/src/vocab` may name: other vocabulary and the leaf modules.
const VOCAB_MAY_NAME: [&str; 6] = ["vocab", "codes", "limits", "refusal", "screen", "tally"];

/// The planes' vocabulary (`board/src/vocab`) names no plane's module, `types` or `query`:
/// they compose it, so a name back would close the import cycle the split cut.
#[test]
fn the_vocabulary_names_no_plane() {
    let mut files = Vec::new();
    sources(&workspace().join("board/src/vocab"), &mut files);
    assert!(
        files.len() >= 10,
        "found only {} vocabulary files",
        files.len()
    );
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source is readable");
        let mut in_block = false;
        for (number, line) in text.lines().enumerate() {
            let code = code_of(line, &mut in_block);
            for (at, _) in code.match_indices("crate::") {
                let module: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !VOCAB_MAY_NAME.contains(&module.as_str()) {
                    found.push(format!(
                        "{}:{}: crate::{module}",
                        file.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "vocabulary names a plane:\n{}",
        found.join("\n")
    );
}

/// The widest import cycle `board/src` may hold: the planes' logic layered over
/// `access`, `route`, `range_row`, `team` and the vocabulary, with the few planes that
/// truly call each other (a key and its lease, mail and work entries) in small knots.
const BOARD_CYCLE_FILES_MAX: usize = 3;

/// A board module's code with comments, literals and `#[cfg(test)]` modules taken out.
fn module_code(text: &str) -> String {
    let mut out = String::new();
    let (mut in_block, mut test_attr, mut skip_depth) = (false, false, 0i64);
    for line in text.lines() {
        let code = code_of(line, &mut in_block);
        let trimmed = code.trim();
        if skip_depth > 0 {
            skip_depth += depth_change(&code);
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            test_attr = true;
            continue;
        }
        if test_attr && trimmed.contains("mod ") && trimmed.ends_with('{') {
            skip_depth = depth_change(&code);
            test_attr = false;
            continue;
        }
        test_attr = false;
        out.push_str(&code);
        out.push('\n');
    }
    out
}

fn depth_change(code: &str) -> i64 {
    code.matches('{').count() as i64 - code.matches('}').count() as i64
}

/// The first segment of every `crate::` path in `code`, `crate::{a, b::c}` groups included.
fn crate_modules(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + 7..];
        if !rest.starts_with('{') {
            found.push(ident(rest));
            continue;
        }
        let (mut depth, mut item_start) = (0, 1);
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 1 => {
                    found.push(ident(&rest[item_start..i]));
                    item_start = i + 1;
                }
                _ => {}
            }
            if depth == 0 {
                found.push(ident(&rest[item_start..i]));
                break;
            }
        }
    }
    found.retain(|m| !m.is_empty() && m != "self");
    found
}

/// The modules `lib.rs` declares under `#[cfg(test)]`.
fn test_only_modules(lib: &str) -> Vec<String> {
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == "#[cfg(test)]")
        .filter_map(|pair| pair[1].strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// Board's module graph: each top-level module (a `vocab/` file counts as `vocab`) and the
/// modules its code (not its tests) names.
fn board_imports() -> BTreeMap<String, Vec<String>> {
    let src = workspace().join("board/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs is readable");
    let test_only = test_only_modules(&lib);
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a path");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || test_only.contains(&module) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("source is readable");
        let names = graph.entry(module.clone()).or_default();
        for name in crate_modules(&module_code(&text)) {
            if name != module && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let modules: Vec<String> = graph.keys().cloned().collect();
    for names in graph.values_mut() {
        names.retain(|name| modules.contains(name));
    }
    graph
}

/// The strongly connected components of `graph` (Tarjan), each a sorted list of modules.
fn cycles(graph: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, Vec<String>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, at: &'a str) {
        let order = walk.index.len();
        walk.index.insert(at, (order, order));
        walk.stack.push(at);
        for next in &walk.graph[at] {
            let low = match walk.index.get(next.as_str()) {
                None => {
                    visit(walk, next);
                    walk.index[next.as_str()].1
                }
                Some(&(index, _)) if walk.stack.contains(&next.as_str()) => index,
                Some(_) => continue,
            };
            let entry = walk.index.get_mut(at).expect("visited");
            entry.1 = entry.1.min(low);
        }
        let (index, low) = walk.index[at];
        if index == low {
            let from = walk
                .stack
                .iter()
                .position(|m| *m == at)
                .expect("on the stack");
            let mut component: Vec<String> = walk.stack.drain(from..).map(str::to_string).collect();
            component.sort();
            walk.found.push(component);
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module.as_str()) {
            visit(&mut walk, module);
        }
    }
    walk.found.retain(|component| component.len() > 1);
    walk.found
}

/// No import cycle in `board/src` is wider than [`BOARD_CYCLE_FILES_MAX`] files: planes
/// sit above the names (`access`, `route`, `range_row`, `team`) they ask, and what looks
/// into every plane (`admit`, `point_of`, `range`, `team_purge`) sits above them all.
#[test]
fn no_board_import_cycle_is_wider_than_three_files() {
    let graph = board_imports();
    assert!(
        graph.len() >= 40,
        "found only {} board modules",
        graph.len()
    );
    assert!(
        graph["range"].contains(&"work".to_string()),
        "the import reader must see range's use of work: {:?}",
        graph["range"]
    );
    let wide: Vec<String> = cycles(&graph)
        .into_iter()
        .filter(|component| component.len() > BOARD_CYCLE_FILES_MAX)
        .map(|component| {
            let edges: Vec<String> = component
                .iter()
                .map(|m| format!("  {m} -> {:?}", graph[m]))
                .collect();
            format!(
                "{} files: {:?}\n{}",
                component.len(),
                component,
                edges.join("\n")
            )
        })
        .collect();
    assert!(wide.is_empty(), "wide import cycles:\n{}", wide.join("\n"));
}

/// The cycle finder finds a knot and leaves a chain out (so the check above can fail).
#[test]
fn the_cycle_finder_sees_a_knot_and_not_a_chain() {
    let graph: BTreeMap<String, Vec<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a", "d"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, names)| (m.to_string(), names.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
    let source = concat!(
        "use crate::{kv, x::{y, z}};\n",
        "#[cfg(test)]\nmod tests {\n    use crate::q;\n}\n",
    );
    let code = module_code(source);
    assert_eq!(crate_modules(&code), vec!["kv", "x"]);
}
