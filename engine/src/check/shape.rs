//! A resolved type as self-contained data ([`Shape`]): what a run-time value is checked
//! against where the program's model is not at hand (a typed `exec` result, checked by the
//! worker that settles the run).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::check::model::Model;
use crate::check::types::Ty;
use crate::limits::RESULT_SHAPE_DEPTH_MAX;

/// A type with its classes and enums written out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// Anything (also a class nested deeper than [`RESULT_SHAPE_DEPTH_MAX`]).
    Any,
    /// A string.
    String,
    /// An ISO-8601 instant (`time`), as a string.
    Time,
    /// An integer (also `duration`, in seconds).
    Int,
    /// A number.
    Float,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
    /// One string.
    Literal {
        /// The string.
        value: String,
    },
    /// One of an enum's variants.
    Enum {
        /// The enum's name.
        name: String,
        /// Its variants.
        variants: Vec<String>,
    },
    /// `T[]`
    Array {
        /// The items' shape.
        item: Box<Shape>,
    },
    /// `map<T>`
    Map {
        /// The values' shape.
        value: Box<Shape>,
    },
    /// `T?`
    Optional {
        /// The shape when present.
        inner: Box<Shape>,
    },
    /// `A | B`
    Union {
        /// The members.
        members: Vec<Shape>,
    },
    /// A class: an object with these fields.
    Object {
        /// The class's name.
        name: String,
        /// Each field's name and shape.
        fields: Vec<(String, Shape)>,
    },
}

impl Shape {
    /// The shape of `ty` in `m`.
    pub fn of(m: &Model, ty: &Ty) -> Shape {
        shape_at(m, ty, 0)
    }

    /// `Ok` when `v` has this shape; else what is wrong, at which path (`$.items[0].id`).
    pub fn fits(&self, v: &Value) -> Result<(), String> {
        self.fits_at(v, "$")
    }

    fn fits_at(&self, v: &Value, at: &str) -> Result<(), String> {
        let ok = match (self, v) {
            (Shape::Any, _) | (Shape::Null, Value::Null) => true,
            (Shape::Optional { .. }, Value::Null) => true,
            (Shape::Optional { inner }, v) => return inner.fits_at(v, at),
            (Shape::String, Value::String(_)) | (Shape::Bool, Value::Bool(_)) => true,
            (Shape::Time, Value::String(s)) => crate::check::instant::parse_ms(s).is_some(),
            (Shape::Int, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Shape::Float, Value::Number(_)) => true,
            (Shape::Literal { value }, Value::String(s)) => s == value,
            (Shape::Enum { variants, .. }, Value::String(s)) => variants.contains(s),
            (Shape::Array { item }, Value::Array(items)) => {
                for (i, x) in items.iter().enumerate() {
                    item.fits_at(x, &format!("{at}[{i}]"))?;
                }
                true
            }
            (Shape::Map { value }, Value::Object(entries)) => {
                for (k, x) in entries {
                    value.fits_at(x, &format!("{at}.{k}"))?;
                }
                true
            }
            (Shape::Union { members }, v) => members.iter().any(|m| m.fits_at(v, at).is_ok()),
            (Shape::Object { fields, .. }, Value::Object(entries)) => {
                for (name, shape) in fields {
                    let x = entries.get(name).unwrap_or(&Value::Null);
                    shape.fits_at(x, &format!("{at}.{name}"))?;
                }
                true
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{at} is {}, not {}", json_kind(v), self.describe()))
        }
    }

    /// The shape as a user wrote its type, roughly.
    fn describe(&self) -> String {
        match self {
            Shape::Any => "any value".into(),
            Shape::String => "a string".into(),
            Shape::Time => "an ISO-8601 instant".into(),
            Shape::Int => "an int".into(),
            Shape::Float => "a number".into(),
            Shape::Bool => "a bool".into(),
            Shape::Null => "null".into(),
            Shape::Literal { value } => format!("{value:?}"),
            Shape::Enum { name, .. } => format!("a variant of `{name}`"),
            Shape::Array { .. } => "an array".into(),
            Shape::Map { .. } => "a map".into(),
            Shape::Object { name, .. } => format!("a `{name}` object"),
            Shape::Optional { inner } => format!("{} or null", inner.describe()),
            Shape::Union { .. } => "one of the union's members".into(),
        }
    }
}

impl Shape {
    /// The JSON Schema of this shape (what `{{ ctx.output_format }}` shows a model).
    pub fn json_schema(&self) -> Value {
        use serde_json::json;
        match self {
            Shape::Any => json!({}),
            Shape::String => json!({"type": "string"}),
            Shape::Time => json!({"type": "string", "format": "date-time"}),
            Shape::Int => json!({"type": "integer"}),
            Shape::Float => json!({"type": "number"}),
            Shape::Bool => json!({"type": "boolean"}),
            Shape::Null => json!({"type": "null"}),
            Shape::Literal { value } => json!({"const": value}),
            Shape::Enum { variants, .. } => json!({"type": "string", "enum": variants}),
            Shape::Array { item } => json!({"type": "array", "items": item.json_schema()}),
            Shape::Map { value } => {
                json!({"type": "object", "additionalProperties": value.json_schema()})
            }
            Shape::Optional { inner } => json!({"anyOf": [inner.json_schema(), {"type": "null"}]}),
            Shape::Union { members } => {
                let members: Vec<Value> = members.iter().map(Shape::json_schema).collect();
                json!({ "anyOf": members })
            }
            Shape::Object { fields, .. } => {
                let mut properties = serde_json::Map::new();
                let mut required = Vec::new();
                for (name, shape) in fields {
                    properties.insert(name.clone(), shape.json_schema());
                    if !matches!(shape, Shape::Optional { .. } | Shape::Any | Shape::Null) {
                        required.push(name.clone());
                    }
                }
                json!({"type": "object", "properties": properties, "required": required,
                    "additionalProperties": false})
            }
        }
    }
}

fn shape_at(m: &Model, ty: &Ty, depth: usize) -> Shape {
    let boxed = |t: &Ty| Box::new(shape_at(m, t, depth));
    match ty {
        Ty::Any | Ty::Query(_) => Shape::Any,
        Ty::String => Shape::String,
        Ty::Time => Shape::Time,
        Ty::AgentRef(agents) => Shape::Enum {
            name: "AgentRef".into(),
            variants: agents.clone(),
        },
        Ty::Int | Ty::Duration => Shape::Int,
        Ty::Float => Shape::Float,
        Ty::Bool => Shape::Bool,
        Ty::Null => Shape::Null,
        Ty::Lit(s) => Shape::Literal { value: s.clone() },
        // A name the model lacks was reported by the checker; nothing narrower is known.
        Ty::Enum(e) => match m.enums.get(e) {
            Some(variants) => Shape::Enum {
                name: e.clone(),
                variants: variants.clone(),
            },
            None => Shape::Any,
        },
        Ty::Array(t) => Shape::Array { item: boxed(t) },
        Ty::Map(t) => Shape::Map { value: boxed(t) },
        Ty::Optional(t) => Shape::Optional { inner: boxed(t) },
        Ty::Union(ms) => Shape::Union {
            members: ms.iter().map(|t| shape_at(m, t, depth)).collect(),
        },
        Ty::Class(_) if depth >= RESULT_SHAPE_DEPTH_MAX => Shape::Any,
        Ty::Class(c) => match m.classes.get(c) {
            Some(k) => Shape::Object {
                name: crate::check::types::display_class(c).to_string(),
                fields: k
                    .fields
                    .iter()
                    .map(|(n, t)| (n.clone(), shape_at(m, t, depth + 1)))
                    .collect(),
            },
            None => Shape::Any,
        },
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
