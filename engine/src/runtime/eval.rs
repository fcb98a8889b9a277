//! Expression evaluation over JSON values: bindings, live-fact queries, effect queries.
//! No clocks and no I/O: the same state and bindings give the same value.

use serde_json::{Map, Value, json};

use super::state::{Env, State};
use crate::syntax::ast::{BinOp, Expr, ExprKind, Ident, ObjectLit, StrPart, UnOp};

/// What an expression may read.
pub(crate) struct Scope<'a> {
    pub(crate) env: &'a Env,
    pub(crate) state: &'a State,
}

impl Scope<'_> {
    pub(crate) fn lookup(&self, path: &[String]) -> Value {
        let Some(first) = path.first() else {
            return Value::Null;
        };
        let root = match self.env.values.get(first) {
            Some(v) => v.clone(),
            None => self.facts_of(first),
        };
        path[1..]
            .iter()
            .fold(root, |v, seg| v.get(seg).cloned().unwrap_or(Value::Null))
    }

    fn facts_of(&self, class: &str) -> Value {
        Value::Array(self.state.live(class).map(|f| f.value.clone()).collect())
    }

    /// `count(x)`, `exists(x)`, `empty(x)`.
    fn call(&self, name: &str, args: &[Expr]) -> Value {
        let arg = args.first().map(|a| self.eval(a)).unwrap_or(Value::Null);
        let n = size(&arg);
        match name {
            "count" => json!(n),
            "exists" => json!(!arg.is_null() && n > 0),
            "empty" => json!(n == 0),
            _ => Value::Null,
        }
    }

    /// Evaluate `e`.
    pub(crate) fn eval(&self, e: &Expr) -> Value {
        match &e.kind {
            ExprKind::Path(p) => {
                let names: Vec<String> = p.iter().map(|i| i.name.clone()).collect();
                self.lookup(&names)
            }
            ExprKind::Str(s) => Value::String(self.interpolate(&s.parts, &s.value)),
            ExprKind::Int(v) => json!(v),
            ExprKind::Float(v) => json!(v),
            ExprKind::Bool(v) => json!(v),
            ExprKind::Null => Value::Null,
            ExprKind::Duration(s) => json!(s),
            ExprKind::Array(items) => Value::Array(items.iter().map(|i| self.eval(i)).collect()),
            ExprKind::Object(o) => self.object(o),
            ExprKind::Unary(UnOp::Not, x) => json!(!truthy(&self.eval(x))),
            ExprKind::Unary(UnOp::Neg, x) => match self.eval(x) {
                Value::Number(n) if n.is_i64() => json!(-n.as_i64().unwrap_or(0)),
                Value::Number(n) => json!(-n.as_f64().unwrap_or(0.0)),
                _ => Value::Null,
            },
            ExprKind::Binary(op, l, r) => self.binary(*op, l, r),
            ExprKind::Call(f, args) => self.call(&f.name, args),
            ExprKind::Index(base, key) => match (self.eval(base), self.eval(key)) {
                (Value::Object(fields), Value::String(k)) => {
                    fields.get(&k).cloned().unwrap_or(Value::Null)
                }
                _ => Value::Null,
            },
            ExprKind::Query(c, guard) => {
                let rows = self.state.live(&c.name).filter(|f| match guard {
                    None => true,
                    Some(g) => {
                        let mut env = self.env.clone();
                        // Inside `Class where …` the fact's fields are readable bare.
                        if let Value::Object(fields) = &f.value {
                            for (k, v) in fields {
                                env.values.insert(k.clone(), v.clone());
                            }
                        }
                        env.values.insert(c.name.clone(), f.value.clone());
                        truthy(
                            &Scope {
                                env: &env,
                                state: self.state,
                            }
                            .eval(g),
                        )
                    }
                });
                Value::Array(rows.map(|f| f.value.clone()).collect())
            }
            ExprKind::EffectQuery(kind, path, guard) => {
                self.effect_rows(&kind.name, path, guard.as_deref())
            }
        }
    }

    /// `effect kind K [binding] [where …]`: the instance's effects of that kind as rows.
    fn effect_rows(&self, kind: &str, path: &[Ident], guard: Option<&Expr>) -> Value {
        let binding = path.first().map(|p| p.name.clone());
        // The checker refused unknown kind names; a name it did not know selects nothing
        // rather than some other kind's rows.
        let wanted = crate::ir::effect_kind_code(kind);
        let rows = self.state.effects.values().filter(|x| {
            Some(x.kind().code()) == wanted
                && binding
                    .as_ref()
                    .is_none_or(|b| x.binding.as_ref() == Some(b))
        });
        let rows: Vec<Value> = rows
            .map(|x| {
                json!({"kind": x.kind(), "status": x.state, "state": x.state,
                "output": x.output, "binding": x.binding})
            })
            .filter(|row| match guard {
                None => true,
                Some(g) => {
                    let mut env = self.env.clone();
                    // `where status == completed`: a bare state name is that state.
                    for state in super::effect::EffectState::ALL {
                        env.values.insert(state.code().into(), json!(state.code()));
                    }
                    if let Value::Object(fields) = row {
                        for (k, v) in fields {
                            env.values.insert(k.clone(), v.clone());
                        }
                    }
                    truthy(
                        &Scope {
                            env: &env,
                            state: self.state,
                        }
                        .eval(g),
                    )
                }
            })
            .collect();
        Value::Array(rows)
    }

    /// Evaluate an object literal into a JSON object.
    pub(crate) fn object(&self, o: &ObjectLit) -> Value {
        let mut map = Map::new();
        for (k, v) in &o.fields {
            map.insert(k.name.clone(), self.eval(v));
        }
        Value::Object(map)
    }

    fn interpolate(&self, parts: &[StrPart], plain: &str) -> String {
        if !parts.iter().any(|p| matches!(p, StrPart::Path(_))) {
            return plain.to_string();
        }
        let mut out = String::new();
        for p in parts {
            match p {
                StrPart::Lit(s) => out.push_str(s),
                StrPart::Path(path) => out.push_str(&text(&self.lookup(path))),
            }
        }
        out
    }

    fn binary(&self, op: BinOp, l: &Expr, r: &Expr) -> Value {
        match op {
            BinOp::And => return json!(truthy(&self.eval(l)) && truthy(&self.eval(r))),
            BinOp::Or => return json!(truthy(&self.eval(l)) || truthy(&self.eval(r))),
            _ => {}
        }
        let (a, b) = (self.eval(l), self.eval(r));
        match op {
            BinOp::Eq => json!(equal(&a, &b)),
            BinOp::Ne => json!(!equal(&a, &b)),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let ord = compare(&a, &b);
                json!(ord.is_some_and(|o| match op {
                    BinOp::Lt => o.is_lt(),
                    BinOp::Le => o.is_le(),
                    BinOp::Gt => o.is_gt(),
                    _ => o.is_ge(),
                }))
            }
            BinOp::In | BinOp::NotIn => {
                let found = match &b {
                    Value::Array(items) => items.iter().any(|i| equal(i, &a)),
                    Value::String(s) => a.as_str().is_some_and(|x| s.contains(x)),
                    Value::Object(m) => a.as_str().is_some_and(|x| m.contains_key(x)),
                    _ => false,
                };
                json!(found == (op == BinOp::In))
            }
            BinOp::Add => match (&a, &b) {
                (Value::String(x), _) => json!(format!("{x}{}", text(&b))),
                _ => arith(&a, &b, |x, y| x.checked_add(y), |x, y| x + y),
            },
            BinOp::Sub => arith(&a, &b, |x, y| x.checked_sub(y), |x, y| x - y),
            BinOp::Mul => arith(&a, &b, |x, y| x.checked_mul(y), |x, y| x * y),
            BinOp::Div => arith(&a, &b, |x, y| x.checked_div(y), |x, y| x / y),
            BinOp::And | BinOp::Or => unreachable!("handled above"),
        }
    }
}

fn arith(
    a: &Value,
    b: &Value,
    int: impl Fn(i64, i64) -> Option<i64>,
    float: impl Fn(f64, f64) -> f64,
) -> Value {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return int(x, y).map_or(Value::Null, |v| json!(v));
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => json!(float(x, y)),
        _ => Value::Null,
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn size(v: &Value) -> usize {
    match v {
        Value::Null => 0,
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        Value::String(s) => s.chars().count(),
        _ => 1,
    }
}

/// Truth of a value: false, null, 0, "" and empty collections are false.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(_) => true,
    }
}

/// A value as text (strings unquoted).
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
