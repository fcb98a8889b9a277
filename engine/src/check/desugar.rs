//! `then` chains: `then y <- EFFECT` followed by the rest of the block becomes
//! `EFFECT as y` and `after y succeeds as y { rest }`.

use crate::syntax::ast::*;

/// Desugars every `then` step of `block`, recursively.
pub fn block(b: &Block) -> Block {
    Block {
        stmts: stmts(&b.stmts),
        span: b.span,
    }
}

fn stmts(list: &[Stmt]) -> Vec<Stmt> {
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        match &s.kind {
            StmtKind::Then(name, effect) => {
                let mut effect = (**effect).clone();
                set_binding(&mut effect.kind, name.clone());
                out.push(effect);
                let rest = stmts(&list[i + 1..]);
                let end = list.last().map_or(s.span, |l| l.span);
                let body = Block {
                    stmts: rest,
                    span: s.span.to(end),
                };
                let after = After {
                    target: name.clone(),
                    predicate: Ident {
                        name: "succeeds".into(),
                        span: s.span,
                    },
                    binding: Some(name.clone()),
                    body,
                    from_then: true,
                };
                out.push(Stmt {
                    kind: StmtKind::After(after),
                    span: s.span,
                });
                return out;
            }
            StmtKind::After(a) => {
                let mut a = a.clone();
                a.body = block(&a.body);
                out.push(Stmt {
                    kind: StmtKind::After(a),
                    span: s.span,
                });
            }
            StmtKind::Case(c) => {
                let mut c = c.clone();
                for arm in &mut c.arms {
                    arm.body = block(&arm.body);
                }
                out.push(Stmt {
                    kind: StmtKind::Case(c),
                    span: s.span,
                });
            }
            _ => out.push(s.clone()),
        }
    }
    out
}

fn set_binding(kind: &mut StmtKind, name: Ident) {
    if let Some(slot) = kind.effect_binding_mut() {
        *slot = Some(name);
    }
}

/// A bare agent name written as a value (`owner bob` in a row of a class whose `owner` is an
/// `AgentRef`) becomes the string `"bob"`, which is what the value is at run time. Done after
/// the checks, which read the bare name (and report a name that is no agent of the type).
pub fn agent_values(b: &mut Block, agents: &dyn Fn(&str) -> bool) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Record(_, o) | StmtKind::Done(_, Some((_, o))) => object_values(o, agents),
            StmtKind::Invoke(_, o, _) => object_values(o, agents),
            StmtKind::Complete(_, e) | StmtKind::Fail(_, e) => expr_values(e, agents),
            StmtKind::After(a) => agent_values(&mut a.body, agents),
            StmtKind::Case(c) => {
                for arm in &mut c.arms {
                    agent_values(&mut arm.body, agents);
                }
            }
            _ => {}
        }
    }
}

/// [`agent_values`] in the fields of one object literal (a table row, a record).
pub fn object_values(o: &mut ObjectLit, agents: &dyn Fn(&str) -> bool) {
    for (_, v) in &mut o.fields {
        expr_values(v, agents);
    }
}

fn expr_values(e: &mut Expr, agents: &dyn Fn(&str) -> bool) {
    match &mut e.kind {
        ExprKind::Path(segs) if segs.len() == 1 && agents(&segs[0].name) => {
            let name = segs[0].name.clone();
            e.kind = ExprKind::Str(StrLit {
                value: name.clone(),
                parts: vec![StrPart::Lit(name)],
                content_type: None,
            });
        }
        ExprKind::Object(o) => object_values(o, agents),
        ExprKind::Array(items) => items.iter_mut().for_each(|i| expr_values(i, agents)),
        _ => {}
    }
}

/// `invoke Child { input { order o } }` becomes `invoke Child { order o }`: the arguments of
/// an invocation are keyed by the child's declared inputs (the public form), and LANGUAGE.md
/// still shows the older `input { … }` wrapper, so both are accepted and lowered alike. An
/// object is the wrapper only when its one field is `input`, holding an object literal, and
/// the child declares no input named `input` (`wraps` says whether it does not).
pub fn invoke_inputs(b: &mut Block, wraps: &dyn Fn(&str) -> bool) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Invoke(w, obj, _) if wraps(&w.name) => {
                if let [(key, value)] = obj.fields.as_slice()
                    && key.name == "input"
                    && let ExprKind::Object(inner) = &value.kind
                {
                    *obj = inner.clone();
                }
            }
            StmtKind::After(a) => invoke_inputs(&mut a.body, wraps),
            StmtKind::Case(c) => {
                for arm in &mut c.arms {
                    invoke_inputs(&mut arm.body, wraps);
                }
            }
            _ => {}
        }
    }
}
