//! Placeholder of the screen's interface (replaced by the real rule set).

use serde::{Deserialize, Serialize};

/// Version of the built-in rule set; stored with each verdict.
pub const SCREEN_RULES_VERSION: u32 = 0;

/// How a screened message may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing found.
    Clean,
    /// Delivered with findings.
    Flagged,
    /// Kept, not delivered into a run.
    Quarantined,
}

impl Verdict {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::Flagged => "flagged",
            Verdict::Quarantined => "quarantined",
        }
    }
}

/// What a rule found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// An instruction-override phrase.
    InstructionOverride,
}

impl FindingKind {
    /// A stable code.
    pub fn code(self) -> &'static str {
        "instruction_override"
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Its kind.
    pub kind: FindingKind,
    /// Where.
    pub detail: String,
}

/// A verdict with its findings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Screen {
    /// The verdict.
    pub verdict: Verdict,
    /// The findings.
    pub findings: Vec<Finding>,
    /// The rule set's version.
    pub rules_version: u32,
}

/// Screen one message.
pub fn screen(text: &str, _payload: Option<&str>) -> Screen {
    let hit = text.to_lowercase().contains("ignore previous instructions");
    Screen {
        verdict: if hit {
            Verdict::Quarantined
        } else {
            Verdict::Clean
        },
        findings: Vec::new(),
        rules_version: SCREEN_RULES_VERSION,
    }
}
