//! Program versions: the checked source of a `.whip` file, stored in the fabric under
//! `p/<version>` so any process (any node) can step an instance of it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::check::model::{Model, Wf};
use crate::diag::Severity;
use crate::syntax::ast::{Stmt, StmtKind};

/// What is stored for one program version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Path the program was read from (includes resolve next to it).
    pub path: String,
    /// The root file's text.
    pub text: String,
    /// `--root`, when given.
    pub root: Option<String>,
}

/// A checked program ready to execute.
#[derive(Debug)]
pub struct Program {
    /// `pv_<hash>`
    pub version: String,
    /// The stored source.
    pub source: Source,
    /// The checked model (rules desugared).
    pub model: Model,
    /// Per workflow and rule: statement span start → effect number (`rule/eN`).
    numbers: BTreeMap<(String, usize), BTreeMap<usize, usize>>,
}

/// A program's version: `pv_` and 128 bits of blake3 over its source, `--root` and path.
/// Collision resistant, so a stored `p/<version>` row is checked against the version it is
/// read for and nobody can store another program under a version someone will run.
pub fn version_of(source: &Source) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in [
        source.text.as_str(),
        source.root.as_deref().unwrap_or(""),
        source.path.as_str(),
    ] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let hex = hasher.finalize().to_hex();
    format!("pv_{}", &hex[..32])
}

/// FNV-1a, 64 bits: a stable content hash (the same on every machine and release).
pub fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in *part {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

impl Program {
    /// Check `source`; errors come back as rendered diagnostics.
    pub fn check(source: Source) -> Result<Program, String> {
        let root = source.root.as_deref();
        let report = crate::cli::check_source(&source.path, &source.text, root);
        if report.errors() > 0 {
            let text: String = report
                .diags
                .iter()
                .filter(|d| d.severity == Severity::Error)
                .map(|d| report.sources.render(d))
                .collect();
            return Err(text.trim_end().to_string());
        }
        let (model, _) = crate::cli::check_model(&source.path, &source.text, root);
        let version = version_of(&source);
        let mut numbers = BTreeMap::new();
        for wf in &model.workflows {
            for (i, (_, rule, _)) in wf.rules.iter().enumerate() {
                let mut map = BTreeMap::new();
                let mut counter = 0;
                number(&rule.body.stmts, &mut counter, &mut map);
                numbers.insert((wf.name.name.clone(), i), map);
            }
        }
        Ok(Program {
            version,
            source,
            model,
            numbers,
        })
    }

    /// Read and check a file.
    pub fn load(path: &Path, root: Option<&str>) -> Result<Program, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        Program::check(Source {
            path: path.display().to_string(),
            text,
            root: root.map(str::to_string),
        })
    }

    /// The root workflow (`--root`, or the only one).
    pub fn root(&self) -> Result<&Wf, String> {
        match self.model.root {
            Some(i) => Ok(&self.model.workflows[i]),
            None if self.model.workflows.len() == 1 => Ok(&self.model.workflows[0]),
            None => Err("multiple workflow declarations require an explicit root".into()),
        }
    }

    /// A workflow by name.
    pub fn workflow(&self, name: &str) -> Result<&Wf, String> {
        self.model
            .workflow(name)
            .ok_or_else(|| format!("program has no workflow `{name}`"))
    }

    /// The `eN` number of the effect statement starting at `span_start` in rule `rule`.
    pub fn effect_number(&self, wf: &str, rule: usize, span_start: usize) -> usize {
        self.numbers
            .get(&(wf.to_string(), rule))
            .and_then(|m| m.get(&span_start))
            .copied()
            .unwrap_or(0)
    }
}

/// Number effects the way the lowering does: a block's own effects first, then nested
/// `after` blocks in order.
fn number(stmts: &[Stmt], counter: &mut usize, out: &mut BTreeMap<usize, usize>) {
    for s in stmts {
        if is_effect(&s.kind) {
            *counter += 1;
            out.insert(s.span.start as usize, *counter);
        }
    }
    for s in stmts {
        for b in s.kind.child_blocks() {
            number(&b.stmts, counter, out);
        }
    }
}

/// True for statements that request an effect.
pub(crate) fn is_effect(kind: &StmtKind) -> bool {
    matches!(
        kind,
        StmtKind::Timer(..)
            | StmtKind::TimerUntil(..)
            | StmtKind::Invoke(..)
            | StmtKind::Acquire(..)
            | StmtKind::Release(..)
            | StmtKind::Renew(..)
            | StmtKind::Consume(..)
            | StmtKind::Append(..)
            | StmtKind::FileIssue(..)
            | StmtKind::Claim(..)
            | StmtKind::Finish(..)
            | StmtKind::Send(..)
            | StmtKind::Exec(..)
            | StmtKind::Vote(..)
            | StmtKind::Tell(..)
            | StmtKind::Coerce(..)
    )
}
