//! Goal: no enum of the board reaches a store with serde's positional variant numbers.
//! Method: find every enum in `board/src` that derives `Serialize`, and check that it is
//! pinned (`#[serde(remote = "Self")]` and a `stable_codes!` block, see `src/codes.rs`) and
//! that the golden file (`testdata/encoding/golden.txt`) holds its variants' bytes.

use std::path::Path;

/// `(file, enum name, pinned)` of every enum deriving `Serialize` in `text`.
fn serde_enums(file: &str, text: &str) -> Vec<(String, String, bool)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.split("enum ").nth(1).filter(|_| is_enum(line)) else {
            continue;
        };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
        let attributes = &lines[i.saturating_sub(4)..i];
        let derived = attributes
            .iter()
            .any(|a| a.starts_with("#[derive(") && a.contains("Serialize"));
        if derived {
            let remote = attributes.contains(&"#[serde(remote = \"Self\")]");
            let block = format!("crate::codes::stable_codes! {{\n    {name} {{");
            out.push((file.to_string(), name, remote && text.contains(&block)));
        }
    }
    out
}

fn is_enum(line: &str) -> bool {
    ["enum ", "pub enum ", "pub(crate) enum "]
        .iter()
        .any(|p| line.starts_with(p))
}

#[test]
fn every_serde_enum_of_the_board_has_pinned_codes_and_golden_bytes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden = std::fs::read_to_string(root.join("testdata/encoding/golden.txt"))
        .expect("golden file is readable");
    let mut found = Vec::new();
    let mut dirs = vec![root.join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source is readable");
                found.extend(serde_enums(&path.display().to_string(), &text));
            }
        }
    }
    assert!(found.len() >= 46, "found only {} serde enums", found.len());
    for (file, name, pinned) in &found {
        assert!(
            *pinned,
            "{file}: enum {name} derives Serialize without pinned codes: add \
             #[serde(remote = \"Self\")] and a crate::codes::stable_codes! block"
        );
        assert!(
            golden.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{file}: enum {name} has no golden lines: add it to stored_enums! in src/golden.rs"
        );
    }
}
