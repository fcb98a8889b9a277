//! `whip check FILE… [--root W] [--json] [--explain]`, as a function the `whip` binary calls.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::diag::{Diag, Severity, SourceMap, Span};
use crate::limits;
use crate::syntax::ast::{File, ItemKind};

/// Options of `whip check`.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The programs to check, each on its own.
    pub files: Vec<PathBuf>,
    /// `--root W`: the workflow `whip` starts when a file declares several.
    pub root: Option<String>,
    /// `--json`: a machine report on `out` instead of text diagnostics.
    pub json: bool,
    /// `--explain` / `--ir`: print the lowered program of each file that checks clean.
    pub explain: bool,
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileReport {
    /// The root file and its includes.
    pub sources: SourceMap,
    /// Diagnostics, sorted by position.
    pub diags: Vec<Diag>,
    /// The lowered program, when the file checked clean.
    pub ir: Option<crate::ir::Program>,
}

impl FileReport {
    /// Number of errors.
    pub fn errors(&self) -> usize {
        self.diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }
}

/// Runs `whip check`; writes the report to `out` / diagnostics to `err`; returns the exit
/// code (0 ok, 1 errors, 2 usage).
///
/// ```
/// use whip_engine::cli::{check, CheckOptions};
/// let opts = CheckOptions::default();
/// let (mut out, mut err) = (Vec::new(), Vec::new());
/// assert_eq!(check(&opts, &mut out, &mut err), 2); // no files: a usage error
/// ```
pub fn check(opts: &CheckOptions, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    if opts.files.is_empty() {
        let _ = writeln!(err, "error: `whip check` needs at least one FILE");
        let _ = writeln!(
            err,
            "usage: whip check FILE... [--root WORKFLOW] [--json] [--explain]"
        );
        return 2;
    }
    if opts.root.as_deref().is_some_and(|r| r.trim().is_empty()) {
        let _ = writeln!(err, "error: `--root` needs a workflow name");
        return 2;
    }
    let mut failed = false;
    let mut json_files = Vec::new();
    for path in &opts.files {
        let report = check_path(path, opts.root.as_deref());
        failed |= report.errors() > 0;
        if opts.json {
            json_files.push(json_file(path, &report, opts.explain));
        } else {
            write_text(path, &report, opts.explain, out, err);
        }
    }
    if opts.json {
        let errors: usize = json_files
            .iter()
            .map(|f| f["errors"].as_u64().unwrap_or(0) as usize)
            .sum();
        let warnings: usize = json_files
            .iter()
            .map(|f| f["warnings"].as_u64().unwrap_or(0) as usize)
            .sum();
        let report = serde_json::json!({
            "version": 1,
            "ok": !failed,
            "errors": errors,
            "warnings": warnings,
            "files": json_files,
        });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    }
    i32::from(failed)
}

fn write_text(
    path: &Path,
    r: &FileReport,
    explain: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) {
    for d in &r.diags {
        let _ = write!(err, "{}", r.sources.render(d));
    }
    if r.errors() == 0 {
        let _ = writeln!(out, "== {}", path.display());
        if explain && let Some(ir) = &r.ir {
            let _ = write!(out, "{}", ir.explain());
        }
    }
}

fn json_file(path: &Path, r: &FileReport, explain: bool) -> serde_json::Value {
    let diags: Vec<serde_json::Value> = r.diags.iter().map(|d| r.sources.to_json(d)).collect();
    let errors = r.errors();
    let mut v = serde_json::json!({
        "path": path.display().to_string(),
        "ok": errors == 0,
        "errors": errors,
        "warnings": r.diags.len() - errors,
        "diagnostics": diags,
    });
    if explain && let Some(ir) = &r.ir {
        v["ir"] = serde_json::to_value(ir).unwrap_or_default();
    }
    v
}

/// Reads, parses and checks one program file with its includes.
pub fn check_path(path: &Path, root: Option<&str>) -> FileReport {
    let mut sources = SourceMap::default();
    let mut diags = Vec::new();
    let display = path.display().to_string();
    let Some(text) = read_source(path, &display, &mut sources, &mut diags, None) else {
        return FileReport {
            sources,
            diags,
            ir: None,
        };
    };
    check_loaded(sources, diags, text, path, root)
}

/// Parses and checks `src` as if read from `path` (includes resolve next to `path`).
pub fn check_source(path: &str, src: &str, root: Option<&str>) -> FileReport {
    let mut sources = SourceMap::default();
    sources.add(path, src.to_string());
    check_loaded(sources, Vec::new(), 0, Path::new(path), root)
}

/// Parses and checks `src` as if read from `path` and returns the checked model (rules
/// desugared) with its diagnostics: what the runtime executes.
pub fn check_model(
    path: &str,
    src: &str,
    root: Option<&str>,
) -> (crate::check::CheckedModel, Vec<Diag>) {
    let mut sources = SourceMap::default();
    sources.add(path, src.to_string());
    let mut diags = Vec::new();
    let (file, parse_diags) = crate::syntax::parse_file(sources.text(0), 0);
    diags.extend(parse_diags);
    let mut files = vec![file];
    load_includes(Path::new(path), &mut files, &mut sources, &mut diags);
    let (model, check_diags) = crate::check::check(&files, root);
    diags.extend(check_diags);
    (model, diags)
}

fn check_loaded(
    mut sources: SourceMap,
    mut diags: Vec<Diag>,
    root_file: u32,
    path: &Path,
    root: Option<&str>,
) -> FileReport {
    let (file, parse_diags) = crate::syntax::parse_file(sources.text(root_file), root_file);
    diags.extend(parse_diags);
    let mut files = vec![file];
    load_includes(path, &mut files, &mut sources, &mut diags);
    let (model, check_diags) = crate::check::check(&files, root);
    diags.extend(check_diags);
    cap(&mut diags);
    let clean = !diags.iter().any(|d| d.severity == Severity::Error);
    let ir = clean.then(|| crate::ir::lower(&model));
    FileReport { sources, diags, ir }
}

fn cap(diags: &mut Vec<Diag>) {
    diags.sort_by_key(|d| (d.span.file, d.span.start));
    if diags.len() > limits::DIAGNOSTICS_PER_FILE_MAX {
        diags.truncate(limits::DIAGNOSTICS_PER_FILE_MAX);
        let last = diags[diags.len() - 1].span;
        let msg = format!(
            "too many diagnostics; stopped after {}",
            limits::DIAGNOSTICS_PER_FILE_MAX
        );
        diags.push(Diag::error("check.too_many", last, msg).help("fix the errors above first"));
    }
}

/// Reads a source file; a file that cannot be used yields one diagnostic and `None`.
fn read_source(
    path: &Path,
    display: &str,
    sources: &mut SourceMap,
    diags: &mut Vec<Diag>,
    at: Option<Span>,
) -> Option<u32> {
    let fail = |sources: &mut SourceMap, diags: &mut Vec<Diag>, msg: String, help: &str| {
        let span = at.unwrap_or_else(|| Span::new(sources.add(display, String::new()), 0, 0));
        diags.push(Diag::error("source.unreadable", span, msg).help(help));
        None
    };
    let bytes = match read_bounded(path, at.is_some()) {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("cannot read `{display}`: {e}");
            return fail(
                sources,
                diags,
                msg,
                "check the path and the file's permissions",
            );
        }
    };
    if bytes.len() > limits::SOURCE_BYTES_MAX {
        let msg = format!(
            "`{display}` has more than the {} bytes a program may have",
            limits::SOURCE_BYTES_MAX
        );
        return fail(sources, diags, msg, "split the program with `include`");
    }
    if bytes.iter().take(8192).any(|b| *b == 0) {
        let msg = format!("`{display}` is a binary file, not WhippleScript source");
        return fail(sources, diags, msg, "pass a `.whip` text file");
    }
    match String::from_utf8(bytes) {
        Ok(text) => Some(sources.add(display, text)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(&e.into_bytes()[..valid]).into_owned();
            let file = sources.add(display, text);
            let msg = format!("`{display}` is not valid UTF-8 text");
            let span = at.unwrap_or(Span::new(file, valid, valid));
            diags.push(Diag::error("source.encoding", span, msg).help("save the file as UTF-8"));
            None
        }
    }
}

/// Reads at most one byte more than a program may have, so a huge or endless file (a pipe,
/// `/dev/zero`) costs no more than that. An include must name a regular file: opening a FIFO
/// would block, and a device never ends.
fn read_bounded(path: &Path, regular_only: bool) -> std::io::Result<Vec<u8>> {
    if regular_only && !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path)?;
    file.take(limits::SOURCE_BYTES_MAX as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Loads `include`d files (relative to their includer), transitively and once each.
fn load_includes(
    root: &Path,
    files: &mut Vec<File>,
    sources: &mut SourceMap,
    diags: &mut Vec<Diag>,
) {
    let mut seen = vec![root.to_path_buf()];
    let mut next = 0;
    let mut dirs = vec![root.parent().map(Path::to_path_buf).unwrap_or_default()];
    while next < files.len() {
        let includes: Vec<(String, Span)> = files[next]
            .items
            .iter()
            .filter_map(|i| match &i.kind {
                ItemKind::Include(lit, span) => Some((lit.value.clone(), *span)),
                _ => None,
            })
            .collect();
        let dir = dirs[next].clone();
        next += 1;
        for (rel, span) in includes {
            let path = dir.join(&rel);
            if seen.contains(&path) {
                continue;
            }
            if seen.len() > limits::INCLUDED_FILES_MAX {
                let msg = format!("more than {} included files", limits::INCLUDED_FILES_MAX);
                diags.push(Diag::error("source.includes", span, msg).help("flatten the includes"));
                return;
            }
            seen.push(path.clone());
            let display = path.display().to_string();
            if let Some(id) = read_source(&path, &display, sources, diags, Some(span)) {
                let (file, d) = crate::syntax::parse_file(sources.text(id), id);
                diags.extend(d);
                files.push(file);
                dirs.push(path.parent().map(Path::to_path_buf).unwrap_or_default());
            }
        }
    }
}
