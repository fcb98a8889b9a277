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
            _ => out.push(s.clone()),
        }
    }
    out
}

fn set_binding(kind: &mut StmtKind, name: Ident) {
    let slot = match kind {
        StmtKind::Timer(_, b) | StmtKind::Invoke(_, _, b) | StmtKind::Renew(_, _, b) => b,
        StmtKind::TimerUntil(_, b) => b,
        StmtKind::Append(_, _, _, b) | StmtKind::FileIssue(_, _, b) => b,
        StmtKind::Claim(_, _, b) | StmtKind::Finish(_, _, b) => b,
        StmtKind::Acquire(a) => &mut a.binding,
        StmtKind::Consume(c) => &mut c.binding,
        StmtKind::Exec(x) => &mut x.binding,
        StmtKind::Vote(v) => &mut v.binding,
        _ => return,
    };
    *slot = Some(name);
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
            _ => {}
        }
    }
}
