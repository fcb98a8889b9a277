//! The closed set of refusal codes a client may act on.
//!
//! A refusal is the core's typed "no": each family keeps its own refusal enum with the
//! numbers and names that make its message ([`crate::BoardRefusal`],
//! [`crate::AgentRefusal`]), and each of those names its [`RefusalCode`]. The code is what
//! crosses the wire (a gRPC status detail, or the `refusal` field of an in-band answer) and
//! what a client matches on; the message is for people and is never parsed.
//!
//! Invariants:
//! - a code's text is stable: it is part of the wire contract, so a variant's text never
//!   changes and a retired code is never reused for another meaning;
//! - every family refusal maps to exactly one code (a `match`, so a new refusal without a
//!   code does not compile);
//! - [`RefusalCode::from_code`] is the only way back from text, and it answers `None` for
//!   a code this build does not know (a newer server's): the caller then treats the
//!   refusal by its gRPC status, never as some other code.

/// Declares [`RefusalCode`] with one `Variant => "code"` line per refusal.
macro_rules! refusal_codes {
    ($($(#[$doc:meta])* $variant:ident => $code:literal,)*) => {
        /// A refusal a client may act on, by its stable wire code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum RefusalCode {
            $($(#[$doc])* $variant,)*
        }

        impl RefusalCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [RefusalCode] = &[$(RefusalCode::$variant,)*];

            /// The stable snake_case text of the code (the wire's).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(RefusalCode::$variant => $code,)*
                }
            }

            /// The code `text` names, if this build knows it.
            pub fn from_code(text: &str) -> Option<RefusalCode> {
                match text {
                    $($code => Some(RefusalCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

refusal_codes! {
    /// The team does not exist here (or is dissolving).
    UnknownTeam => "unknown_team",
    /// Another agent created a team of that name.
    TeamExists => "team_exists",
    /// The agent is not a member of the team or of an ancestor team.
    NotMember => "not_member",
    /// Only the team's supervisor may do this.
    NotSupervisor => "not_supervisor",
    /// No such task on a board the command can reach.
    UnknownTask => "unknown_task",
    /// The task is not claimed.
    NotClaimed => "not_claimed",
    /// The presented fence is not the live claim's.
    StaleFence => "stale_fence",
    /// The claim's window passed.
    ClaimExpired => "claim_expired",
    /// The team's board is full.
    BoardFull => "board_full",
    /// A named claim found the task neither ready nor lapsed.
    NotReady => "not_ready",
    /// A named claim found another worker's live claim.
    Taken => "taken",
    /// Only a dead-lettered task may be redriven.
    NotDead => "not_dead",
    /// Tasks reach a fabric queue only by spilling.
    NotLocal => "not_local",
    /// Another identity holds the agent name.
    NameTaken => "name_taken",
    /// The name differs from an existing agent's only in ways people cannot see.
    ReservedName => "reserved_name",
    /// The enrolling agent used up its enrollments of the hour.
    EnrollmentsExhausted => "enrollments_exhausted",
}

/// Serialized as its text, never as a position: the text is the stable part.
impl serde::Serialize for RefusalCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for RefusalCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        RefusalCode::from_code(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown refusal code {text:?}")))
    }
}

impl std::fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::RefusalCode;

    #[test]
    fn every_code_reads_back_as_itself_and_no_two_share_a_text() {
        let mut seen = std::collections::BTreeSet::new();
        for code in RefusalCode::ALL {
            assert_eq!(RefusalCode::from_code(code.as_str()), Some(*code));
            assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
        }
        assert_eq!(RefusalCode::from_code("no_such_refusal"), None);
        assert_eq!(RefusalCode::from_code("Taken"), None, "codes are exact");
        let json = serde_json::to_string(&RefusalCode::NameTaken).expect("json");
        assert_eq!(json, "\"name_taken\"");
        let back: RefusalCode = serde_json::from_str(&json).expect("read back");
        assert_eq!(back, RefusalCode::NameTaken);
        assert!(serde_json::from_str::<RefusalCode>("\"no_such\"").is_err());
    }
}
