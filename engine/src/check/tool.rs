//! `@tool` workflows (LANGUAGE-AGENTS.md §1, §5): a typed tool for agent turns must be a
//! leaf that terminates and depends on nothing from outside. Agent turns do not call tools
//! yet in this engine; the tag and its checks are accepted so tool workflows check and run
//! (`--root`) as they do with the public tool.

use crate::check::model::Wf;
use crate::diag::{Diag, Span};
use crate::syntax::ast::WhenKind;

/// The checks of a `@tool` workflow `wf`, given the invocations its rules make.
pub(crate) fn check(wf: &Wf, invokes: &[(String, Span)], diags: &mut Vec<Diag>) {
    if !wf.has_tag("tool") {
        return;
    }
    let name = &wf.name.name;
    if wf.has_tag("service") {
        let msg = format!(
            "workflow `{name}` is both `@tool` and `@service`; a `@tool` workflow must terminate"
        );
        let help = "drop `@service`: a tool answers its caller with a terminal";
        diags.push(Diag::error("tool.service", wf.name.span, msg).help(help));
    }
    if let Some((_, span)) = invokes.first() {
        let msg = format!(
            "`@tool` workflow `{name}` invokes a sub-workflow; v1 `@tool` workflows must be leaves"
        );
        let help = "do the child's work in the tool itself, or make the caller invoke both";
        diags.push(Diag::error("tool.invokes", *span, msg).help(help));
    }
    for (tags, rule, _) in &wf.rules {
        let r = &rule.name.name;
        if tags.iter().any(|t| t == "external") {
            let msg = format!(
                "`@tool` workflow `{name}` rule `{r}` is `@external`; a `@tool` workflow may \
                 not depend on external arrival"
            );
            let help = "give the tool what it needs as inputs";
            diags.push(Diag::error("tool.external", rule.name.span, msg).help(help));
        }
        for w in rule
            .whens
            .iter()
            .filter(|w| matches!(w.kind, WhenKind::Message(_)))
        {
            let msg = format!(
                "`@tool` workflow `{name}` rule `{r}` awaits an inbound message; a `@tool` \
                 workflow may not consume external signals"
            );
            let help = "give the tool what it needs as inputs";
            diags.push(Diag::error("tool.message", w.span, msg).help(help));
        }
    }
}
