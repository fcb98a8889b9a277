//! Types of the subset: resolution of type expressions, display, compatibility.

use std::fmt;

/// A resolved type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Unknown or dynamic: compatible with everything (also used after an error).
    Any,
    /// `string`
    String,
    /// `int`
    Int,
    /// `float`
    Float,
    /// `bool`
    Bool,
    /// `time`
    Time,
    /// `duration`
    Duration,
    /// `null`
    Null,
    /// A string literal type (or the type of a string literal expression).
    Lit(String),
    /// A class, by its key in the model.
    Class(String),
    /// An enum.
    Enum(String),
    /// `T[]`
    Array(Box<Ty>),
    /// `T?`
    Optional(Box<Ty>),
    /// `map<T>`
    Map(Box<Ty>),
    /// `A | B`
    Union(Vec<Ty>),
    /// A query over live facts of a class (or over effects).
    Query(String),
    /// `AgentRef<a | b>`: the name of one of these agents (a finite domain).
    AgentRef(Vec<String>),
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Any => write!(f, "any"),
            Ty::String => write!(f, "string"),
            Ty::Int => write!(f, "int"),
            Ty::Float => write!(f, "float"),
            Ty::Bool => write!(f, "bool"),
            Ty::Time => write!(f, "time"),
            Ty::Duration => write!(f, "duration"),
            Ty::Null => write!(f, "null"),
            Ty::Lit(s) => write!(f, "{s:?}"),
            Ty::Class(c) => write!(f, "{}", display_class(c)),
            Ty::Enum(e) => write!(f, "{e}"),
            Ty::Array(t) => write!(f, "{t}[]"),
            // The public wording prints an optional class as `object?`, whatever the class.
            Ty::Optional(t) if matches!(**t, Ty::Class(_)) => write!(f, "object?"),
            Ty::Optional(t) => write!(f, "{t}?"),
            Ty::Map(t) => write!(f, "map<{t}>"),
            Ty::Union(ms) => {
                let parts: Vec<String> = ms.iter().map(|m| m.to_string()).collect();
                write!(f, "{}", parts.join(" | "))
            }
            Ty::Query(c) => write!(f, "query {}", display_class(c)),
            Ty::AgentRef(agents) => write!(f, "AgentRef<{}>", agents.join(" | ")),
        }
    }
}

/// The user-facing name of a class key (`Wf::result` for inline contract shapes).
pub fn display_class(key: &str) -> &str {
    key.rsplit("::").next().unwrap_or(key)
}

/// The primitive named `name`, if any.
pub fn primitive(name: &str) -> Option<Ty> {
    Some(match name {
        "string" => Ty::String,
        "int" => Ty::Int,
        "float" => Ty::Float,
        "bool" => Ty::Bool,
        "time" => Ty::Time,
        "duration" => Ty::Duration,
        "null" => Ty::Null,
        _ => return None,
    })
}

/// Primitive type names, for suggestions.
pub const PRIMITIVES: &[&str] = &["string", "int", "float", "bool", "time", "duration", "null"];

impl Ty {
    /// True when a value may be absent (so a record may leave the field out).
    pub fn is_optional(&self) -> bool {
        match self {
            Ty::Optional(_) | Ty::Null | Ty::Any => true,
            Ty::Union(ms) => ms.iter().any(Ty::is_optional),
            _ => false,
        }
    }

    fn is_stringish(&self) -> bool {
        matches!(
            self,
            Ty::String | Ty::Lit(_) | Ty::Enum(_) | Ty::AgentRef(_)
        )
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    /// True for types `<`, `<=`, `>`, `>=` accept.
    pub fn is_orderable(&self) -> bool {
        match self {
            Ty::Any | Ty::Int | Ty::Float | Ty::Time | Ty::Duration | Ty::String | Ty::Lit(_) => {
                true
            }
            Ty::Optional(t) => t.is_orderable(),
            _ => false,
        }
    }

    /// True when `==` between the two types can ever hold.
    pub fn comparable(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Any, _) | (_, Ty::Any) => true,
            (Ty::Optional(x), y) | (y, Ty::Optional(x)) => *y == Ty::Null || x.comparable(y),
            (Ty::Union(ms), y) | (y, Ty::Union(ms)) => ms.iter().any(|m| m.comparable(y)),
            (Ty::Enum(a), Ty::Enum(b)) => a == b,
            (a, b) if a.is_stringish() && b.is_stringish() => true,
            (a, b) if a.is_numeric() && b.is_numeric() => true,
            (Ty::Array(a), Ty::Array(b)) | (Ty::Map(a), Ty::Map(b)) => a.comparable(b),
            (a, b) => a == b,
        }
    }

    /// True when a value of type `self` may be stored in a slot of type `slot`.
    pub fn assignable_to(&self, slot: &Ty) -> bool {
        match (self, slot) {
            (Ty::Any, _) | (_, Ty::Any) => true,
            (Ty::Optional(v), Ty::Optional(t)) => v.assignable_to(t),
            (v, Ty::Optional(t)) => *v == Ty::Null || v.assignable_to(t),
            (Ty::Optional(_), _) => false,
            (v, Ty::Union(ms)) => ms.iter().any(|m| v.assignable_to(m)),
            (Ty::Union(vs), s) => vs.iter().all(|v| v.assignable_to(s)),
            (Ty::Int, Ty::Float) => true,
            (Ty::Lit(_) | Ty::Enum(_), Ty::String) => true,
            (Ty::String, Ty::Lit(_) | Ty::Enum(_)) => true,
            (Ty::Lit(v), Ty::Lit(s)) => v == s,
            (Ty::Lit(_), Ty::Enum(_)) => true,
            (Ty::Lit(_) | Ty::String, Ty::Time) => true,
            (Ty::Lit(v), Ty::AgentRef(agents)) => agents.contains(v),
            (Ty::String, Ty::AgentRef(_)) => true,
            (Ty::AgentRef(v), Ty::AgentRef(s)) => v.iter().all(|a| s.contains(a)),
            (Ty::AgentRef(_), Ty::String) => true,
            (Ty::Array(v), Ty::Array(s)) | (Ty::Map(v), Ty::Map(s)) => v.assignable_to(s),
            (v, s) => v == s,
        }
    }
}
