//! Goal: every diagnostic that LANGUAGE.md lists word for word (§1, the §4 list and the
//! appendix "diagnostics users know") has a golden program that triggers it with those words,
//! and so do the LANGUAGE-AGENTS.md §5 lines of the front-end pieces this engine runs.
//!
//! Method: [`TABLE`] is the mapping. Each row holds one diagnostic in the language page's
//! words, with `⟨…⟩` for a placeholder (any non-empty text), and the golden under
//! `tests/check/` whose `.expected` must contain it as a whole `error: ` or `warning: ` line.
//! `tests/check.rs` pins each golden's full output against `whip check`; this test pins the
//! mapping, so a reworded message, a lost golden or a row without a golden fails here. A new
//! line of the language page gets a row and, where none triggers it yet, a golden. [`QUIET`]
//! lists the goldens that show the page's exemptions (`until ttl`, `@service`, timers, `then`
//! steps, a trigger kept by a rule with effects): they must check without any diagnostic.
//!
//! Each "likewise" variant of the page is a row of its own (`exists`/`empty` arity, the counter
//! and ledger unknown field, `consume`/`renew` requiring `as`, the `assertion` subject). §4's
//! bare letters (`R`, `B`, `C`) are written as placeholders here. Every line of the page is
//! triggerable with its grammar; none is marked impossible.

use std::path::Path;

/// Whether the line is an error (exit 1) or a warning (exit 0).
#[derive(Clone, Copy)]
enum Severity {
    Error,
    Warning,
}

impl Severity {
    fn prefix(self) -> &'static str {
        match self {
            Severity::Error => "error: ",
            Severity::Warning => "warning: ",
        }
    }
}

/// One diagnostic of the language page and the golden that triggers it.
struct Row {
    severity: Severity,
    /// The page's words; `⟨…⟩` is a placeholder.
    words: &'static str,
    /// `invalid/NAME` or `valid/NAME` under `tests/check/`.
    golden: &'static str,
}

const fn error(words: &'static str, golden: &'static str) -> Row {
    Row {
        severity: Severity::Error,
        words,
        golden,
    }
}

const fn warning(words: &'static str, golden: &'static str) -> Row {
    Row {
        severity: Severity::Warning,
        words,
        golden,
    }
}

/// The mapping, in the page's order: §1, §4 (with the checks the public tool misses), the
/// appendix's front end and types, its coordination list, its warnings.
const TABLE: &[Row] = &[
    // §1 Lexical.
    error("invalid duration `⟨d⟩`", "invalid/invalid_duration_zero"),
    error(
        "invalid duration `⟨d⟩`",
        "invalid/invalid_duration_fraction",
    ),
    error(
        "invalid duration `⟨d⟩`",
        "invalid/invalid_duration_plain_int",
    ),
    // §4 Static checks.
    error(
        "rule `⟨R⟩` does not handle the `contended` outcome of lease `⟨B⟩`",
        "invalid/lease_contended_unhandled",
    ),
    error(
        "rule `⟨R⟩` does not handle the `held` outcome of lease `⟨B⟩`",
        "invalid/lease_held_unhandled",
    ),
    error(
        "rule `⟨R⟩` can hold lease `⟨B⟩` forever: the `held` branch neither releases it nor \
         reaches a workflow terminal",
        "invalid/lease_held_forever",
    ),
    // "`renew` does not count as a release."
    error(
        "rule `⟨R⟩` can hold lease `⟨B⟩` forever: the `held` branch neither releases it nor \
         reaches a workflow terminal",
        "invalid/lease_renew_not_release",
    ),
    error(
        "rule `⟨R⟩` acquires more than one lease in a single progression",
        "invalid/lease_second_acquire",
    ),
    error(
        "rule `⟨R⟩` does not handle the `over` outcome of counter consume `⟨B⟩`",
        "invalid/counter_over_unhandled",
    ),
    error(
        "rule `⟨R⟩` does not handle the `ok` outcome of counter consume `⟨B⟩`",
        "invalid/counter_ok_unhandled",
    ),
    error(
        "rule `⟨R⟩` observes acquire `⟨B⟩` with `succeeds`, which also matches a Contended \
         outcome (the acquire op completes either way)",
        "invalid/lease_succeeds",
    ),
    warning(
        "counter `⟨C⟩` declares no `timezone`; its `daily` reset boundary anchors to UTC",
        "valid/counter_no_timezone",
    ),
    warning(
        "counter `⟨C⟩` declares no `timezone`; its `⟨period⟩` reset boundary anchors to UTC",
        "valid/warnings_only",
    ),
    error(
        "lease `⟨L⟩` must declare a `key` type and a `ttl` backstop",
        "invalid/lease_incomplete",
    ),
    error(
        "counter `⟨C⟩` must declare `key`, `cap`, and `reset`",
        "invalid/counter_incomplete",
    ),
    error(
        "ledger `⟨L⟩` must declare `entry`, `partition by`, and `retain`",
        "invalid/ledger_incomplete",
    ),
    error(
        "rule `⟨R⟩` acquires undeclared lease `⟨L⟩`",
        "invalid/lease_undeclared",
    ),
    error(
        "rule `⟨R⟩` consumes undeclared counter `⟨C⟩`",
        "invalid/counter_undeclared",
    ),
    error(
        "rule `⟨R⟩` appends to undeclared ledger `⟨L⟩`",
        "invalid/ledger_undeclared",
    ),
    error(
        "rule `⟨R⟩` renews unbound coordination binding `⟨B⟩`",
        "invalid/renew_unbound",
    ),
    error(
        "rule `⟨R⟩` releases unbound coordination item `⟨B⟩`",
        "invalid/release_unbound",
    ),
    error(
        "workflow `⟨W⟩` has no rule that reaches `complete` or `fail`",
        "invalid/no_terminal",
    ),
    error(
        "rule `⟨R⟩` can never fire: nothing produces `⟨C⟩`",
        "invalid/never_fires",
    ),
    error(
        "rule `⟨R⟩` has `after` block for unknown effect binding `⟨B⟩`",
        "invalid/after_unknown_binding",
    ),
    error(
        "rule `⟨R⟩` has unsupported `after` predicate `⟨P⟩`",
        "invalid/after_unknown_predicate",
    ),
    error(
        "rule `⟨R⟩` uses effect output `⟨B⟩` outside a matching `after ⟨B⟩ ...` block",
        "invalid/effect_output_outside_after",
    ),
    error(
        "rule `⟨R⟩` records unknown class `⟨C⟩`",
        "invalid/record_unknown_class",
    ),
    error(
        "rule `⟨R⟩` completes unknown workflow terminal `⟨N⟩`",
        "invalid/complete_unknown_terminal",
    ),
    error(
        "rule `⟨R⟩` has invalid field path `⟨p⟩`: schema `⟨C⟩` has no field `⟨f⟩`",
        "invalid/invalid_field_path",
    ),
    error("program declares no `workflow`", "invalid/no_workflow"),
    error(
        "multiple workflow declarations require an explicit root",
        "invalid/multiple_workflows",
    ),
    // §4 "what the public tool misses": our words, pinned all the same.
    error(
        "rule `⟨r⟩` uses undeclared tracker `⟨t⟩`",
        "invalid/tracker_undeclared",
    ),
    error(
        "rule `⟨r⟩` finishes unbound claim `⟨b⟩`",
        "invalid/finish_unbound",
    ),
    error(
        "ledger `⟨l⟩` partitions by `⟨f⟩`, but entry class `⟨C⟩` has no field `⟨f⟩`",
        "invalid/ledger_partition_field",
    ),
    error(
        "counter `⟨c⟩` declares unknown time zone `⟨z⟩`",
        "invalid/counter_unknown_timezone",
    ),
    // Appendix: front end and types.
    error(
        "unknown schema reference `⟨T⟩`",
        "invalid/unknown_schema_reference",
    ),
    error(
        "class `⟨C⟩` has no field `⟨f⟩`",
        "invalid/class_has_no_field",
    ),
    error(
        "field `⟨C.f⟩` expects `⟨type⟩`",
        "invalid/field_expects_type",
    ),
    error(
        "field `⟨C.f⟩` cannot be `⟨value⟩`",
        "invalid/field_cannot_be",
    ),
    error("enum `⟨E⟩` has no variant `⟨V⟩`", "invalid/enum_no_variant"),
    error(
        "enum `⟨E⟩` has no variant `⟨V⟩`",
        "invalid/enum_no_variant_record",
    ),
    error(
        "enum `⟨E⟩` has no variant `⟨V⟩`",
        "invalid/enum_no_variant_table",
    ),
    error(
        "workflow terminal `⟨name⟩` is missing required field `⟨C.f⟩`",
        "invalid/terminal_missing_field",
    ),
    error(
        "rule `⟨r⟩` compares finite-domain value to unknown `⟨v⟩`",
        "invalid/finite_domain_unknown",
    ),
    error(
        "rule `⟨r⟩` compares finite-domain value to unknown `⟨v⟩`",
        "invalid/finite_domain_enum_unknown",
    ),
    error(
        "rule `⟨r⟩` has statically unsatisfiable finite-domain equality",
        "invalid/unsatisfiable_equality",
    ),
    error(
        "rule `⟨r⟩` has statically unsatisfiable finite-domain exclusion",
        "invalid/unsatisfiable_exclusion",
    ),
    error(
        "rule `⟨r⟩` has statically unsatisfiable finite-domain equality",
        "invalid/unsatisfiable_enum_equality",
    ),
    error(
        "rule `⟨r⟩` has statically unsatisfiable finite-domain equality",
        "invalid/unsatisfiable_in_not_in",
    ),
    error(
        "assertion has statically unsatisfiable finite-domain equality",
        "invalid/unsatisfiable_query_equality",
    ),
    error(
        "rule `⟨r⟩` has statically unsatisfiable finite-domain exclusion",
        "invalid/unsatisfiable_enum_exclusion",
    ),
    error(
        "rule `⟨r⟩` compares incompatible expression types",
        "invalid/incompatible_types",
    ),
    error(
        "rule `⟨r⟩` orders non-orderable expression values",
        "invalid/non_orderable",
    ),
    error(
        "rule `⟨r⟩` calls `count` with ⟨n⟩ arguments, expected 1",
        "invalid/count_arity",
    ),
    error(
        "rule `⟨r⟩` calls `exists` with ⟨n⟩ arguments, expected 1",
        "invalid/exists_arity",
    ),
    error(
        "rule `⟨r⟩` calls `empty` with ⟨n⟩ arguments, expected 1",
        "invalid/empty_arity",
    ),
    error(
        "assertion calls `count` with ⟨n⟩ arguments, expected 1",
        "invalid/assertion_subject",
    ),
    error(
        "rule `⟨r⟩` calls `empty` with unsupported argument type `⟨t⟩`",
        "invalid/empty_unsupported",
    ),
    error(
        "assertion calls `empty` with unsupported argument type `⟨t⟩`",
        "invalid/assertion_subject",
    ),
    error(
        "rule `⟨r⟩` calls `empty` with unsupported optional argument type `⟨t?⟩`",
        "invalid/empty_unsupported_optional",
    ),
    error(
        "rule `⟨r⟩` calls `empty` with unsupported optional argument type `object?`",
        "invalid/optional_class_object",
    ),
    error(
        "rule `⟨r⟩` calls `count` with unsupported argument type `string`",
        "invalid/count_string",
    ),
    error(
        "rule `⟨r⟩` queries unknown fact schema `⟨C⟩`",
        "invalid/query_unknown_schema_bare",
    ),
    error(
        "rule `⟨r⟩` queries unknown fact schema `⟨C⟩`",
        "invalid/query_unknown_schema",
    ),
    error(
        "assertion queries unknown fact schema `⟨C⟩`",
        "invalid/assertion_subject",
    ),
    error(
        "rule `⟨r⟩` fact query `⟨C⟩` has unknown field `⟨f⟩`",
        "invalid/query_unknown_field",
    ),
    error(
        "assertion fact query `⟨C⟩` has unknown field `⟨f⟩`",
        "invalid/assertion_subject",
    ),
    error(
        "rule `⟨r⟩` fact query `⟨C⟩` has non-boolean `where` expression",
        "invalid/query_non_boolean",
    ),
    error(
        "assertion fact query `⟨C⟩` has non-boolean `where` expression",
        "invalid/assertion_subject",
    ),
    error(
        "rule `⟨r⟩` consumes unknown fact binding `⟨b⟩`",
        "invalid/done_unknown_binding",
    ),
    error(
        "rule `⟨r⟩` fails unknown workflow terminal `⟨n⟩`",
        "invalid/fail_unknown_terminal",
    ),
    error(
        "rule `⟨r⟩` has unsupported `after` dependency predicate",
        "invalid/after_predicate_mismatch",
    ),
    error(
        "effectful rule `⟨r⟩` preserves trigger fact `schema:⟨C⟩`",
        "invalid/preserves_trigger",
    ),
    error(
        "rule `⟨r⟩` matches evidence-only fact `⟨name⟩`: in-turn observations are evidence, \
         not rule-matchable facts",
        "invalid/evidence_only_fact",
    ),
    error(
        "recursive workflow invocation is not allowed \
         (graph.unbounded_workflow_invocation_recursion): invocation cycle A -> B -> A",
        "invalid/recursion",
    ),
    error(
        "expected a rule body statement",
        "invalid/expected_statement",
    ),
    error(
        "unknown rule body statement `⟨w⟩`",
        "invalid/unknown_statement",
    ),
    // Appendix: coordination (besides §4).
    error(
        "rule `⟨r⟩` observes counter consume `⟨b⟩` with `succeeds`, which also matches an Over \
         outcome (the consume op completes either way)",
        "invalid/counter_succeeds",
    ),
    error(
        "rule `⟨r⟩` appends unknown entry class `⟨C⟩`",
        "invalid/ledger_unknown_entry_class",
    ),
    error(
        "unknown reset period `⟨p⟩`",
        "invalid/counter_unknown_reset",
    ),
    error("unknown lease field `⟨f⟩`", "invalid/lease_unknown_field"),
    error(
        "unknown counter field `⟨f⟩`",
        "invalid/counter_unknown_field",
    ),
    error("unknown ledger field `⟨f⟩`", "invalid/ledger_unknown_field"),
    error(
        "lease `⟨n⟩` keys on undeclared type `⟨T⟩`",
        "invalid/lease_undeclared_key_type",
    ),
    error(
        "ledger `⟨n⟩` records undeclared entry type `⟨T⟩`",
        "invalid/ledger_undeclared_entry",
    ),
    error(
        "`acquire` requires an `as` binding",
        "invalid/acquire_requires_as",
    ),
    error(
        "`consume` requires an `as` binding",
        "invalid/consume_requires_as",
    ),
    error(
        "`renew` requires an `as` binding",
        "invalid/renew_requires_as",
    ),
    error(
        "tracker `⟨t⟩` uses unavailable provider `⟨p⟩`",
        "invalid/tracker_provider",
    ),
    // LANGUAGE-AGENTS.md §5, the front-end pieces this engine runs (issue 36).
    error(
        "description cannot be attached to ⟨kind⟩",
        "invalid/description_misplaced",
    ),
    error(
        "description is not attached to a declaration",
        "invalid/description_misplaced",
    ),
    error("invalid time literal `⟨v⟩`", "invalid/timer_until_errors"),
    error(
        "rule `⟨r⟩` uses non-time operand `⟨p⟩` in `timer until`",
        "invalid/timer_until_errors",
    ),
    error(
        "rule `⟨r⟩` has invalid `timer until` operand `⟨p⟩`: schema `⟨C⟩` has no field `⟨f⟩`",
        "invalid/timer_until_errors",
    ),
    error(
        "`timer` requires an `as` binding",
        "invalid/timer_until_errors",
    ),
    error(
        "rule `⟨r⟩` cancels unknown effect binding `⟨b⟩`",
        "invalid/cancel_unknown_binding",
    ),
    error(
        "workflow `⟨W⟩` is both `@tool` and `@service`; a `@tool` workflow must terminate",
        "invalid/tool_workflow",
    ),
    error(
        "`@tool` workflow `⟨W⟩` invokes a sub-workflow; v1 `@tool` workflows must be leaves",
        "invalid/tool_workflow",
    ),
    error(
        "`@tool` workflow `⟨W⟩` rule `⟨r⟩` is `@external`; a `@tool` workflow may not depend \
         on external arrival",
        "invalid/tool_workflow",
    ),
    error(
        "`@tool` workflow `⟨W⟩` rule `⟨r⟩` awaits an inbound message; a `@tool` workflow may \
         not consume external signals",
        "invalid/tool_workflow",
    ),
    error("rule `⟨r⟩` tells unknown agent `⟨a⟩`", "invalid/agent_tell"),
    error(
        "rule `⟨r⟩` uses a string literal as a tell target",
        "invalid/agent_tell",
    ),
    error(
        "rule `⟨r⟩` uses non-AgentRef dynamic tell target `⟨p⟩`",
        "invalid/agent_tell",
    ),
    error(
        "rule `⟨r⟩` has unknown binding `⟨b⟩` in tell target `⟨p⟩`",
        "invalid/agent_tell",
    ),
    error(
        "rule `⟨r⟩` checks unknown agent `⟨a⟩`",
        "invalid/agent_tell",
    ),
    error(
        "rule `⟨r⟩` checks availability for non-AgentRef `⟨p⟩`",
        "invalid/agent_tell",
    ),
    error(
        "rule `⟨r⟩` tells agent `⟨a⟩` requiring undeclared capability `⟨c⟩`",
        "invalid/agent_tell",
    ),
    error(
        "unknown agent field `⟨f⟩` on agent `⟨a⟩`",
        "invalid/agent_unknown_field",
    ),
    error(
        "agent `⟨a⟩` declares provider more than once",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` capacity must be greater than zero",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` attaches skill `⟨s⟩` more than once",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` declares capability `⟨c⟩` more than once",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` grants tool `⟨w⟩` more than once",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` uses unknown provider kind `⟨k⟩`: no known package manifest contributes \
         it (missing package)",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` is granted `⟨w⟩`: `⟨w⟩` is not a workflow in this program",
        "invalid/agent_declarations",
    ),
    error(
        "agent `⟨a⟩` is granted `⟨w⟩`: `⟨w⟩` is not tagged `@tool`",
        "invalid/agent_declarations",
    ),
    error(
        "rule `⟨r⟩` can never fire: no rule creates an agent turn",
        "invalid/agent_never_fires",
    ),
    error(
        "AgentRef references unknown agent `⟨a⟩`",
        "invalid/agent_declarations",
    ),
    error(
        "AgentRef lists agent `⟨a⟩` more than once",
        "invalid/agent_declarations",
    ),
    error(
        "field `⟨C.f⟩` expects an AgentRef value, not string `⟨v⟩`",
        "invalid/agent_declarations",
    ),
    error(
        "field `⟨C.f⟩` cannot reference agent `⟨v⟩`",
        "invalid/agent_declarations",
    ),
    error("AgentRef has no agent `⟨v⟩`", "invalid/agent_declarations"),
    error("unknown schema reference `⟨T⟩`", "invalid/coerce_errors"),
    error(
        "unknown coerce field `⟨f⟩` on coerce `⟨n⟩`",
        "invalid/coerce_unknown_field",
    ),
    error(
        "coerce `⟨n⟩` declares parameter `⟨p⟩` more than once",
        "invalid/coerce_errors",
    ),
    error(
        "rule `⟨r⟩` calls unknown coerce function `⟨n⟩`",
        "invalid/coerce_errors",
    ),
    error(
        "rule `⟨r⟩` calls coerce `⟨n⟩` with ⟨k⟩ argument(s), expected ⟨m⟩",
        "invalid/coerce_errors",
    ),
    error(
        "rule `⟨r⟩` has unknown binding `⟨b⟩` in coerce `⟨n⟩` argument",
        "invalid/coerce_errors",
    ),
    error(
        "field `coerce `⟨n⟩`.⟨p⟩` expects `⟨type⟩`",
        "invalid/coerce_errors",
    ),
    error(
        "rule `⟨r⟩` has non-exhaustive case; missing ⟨v⟩",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` case pattern cannot be `⟨v⟩`",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` cannot pattern-match this scrutinee type",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` has case scrutinee `⟨s⟩` that is not a typed path",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` has duplicate unguarded case pattern `⟨p⟩`",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` has malformed terminal-output case pattern `⟨p⟩`",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` terminal-output case pattern cannot be `⟨t⟩`",
        "invalid/case_errors",
    ),
    error(
        "rule `⟨r⟩` has non-exhaustive terminal-output case; missing ⟨tags⟩",
        "invalid/case_errors",
    ),
    error(
        "`⟨X⟩` is outside the whip fabric subset",
        "invalid/outside_subset",
    ),
    // Appendix: warnings.
    warning(
        "effect `⟨b⟩`'s failure is unhandled in rule `⟨r⟩`; if it fails or times out, the \
         instance will auto-fail with a generic reason",
        "valid/warnings_only",
    ),
];

/// Goldens that show an exemption of the page by checking with no diagnostic at all.
const QUIET: &[(&str, &str)] = &[
    (
        "valid/appendix_exemptions",
        "`acquire … until ttl` needs no outcome branch; timers, coordination outcomes and \
         `then` steps need no failure branch; an effectful rule may keep its trigger",
    ),
    (
        "valid/timer_keeps_trigger",
        "an effectful rule that neither records its trigger's class nor consumes it is valid",
    ),
    (
        "valid/service_quiet",
        "a `@service` workflow needs no terminal and raises no failure warning",
    ),
];

/// The literal pieces of `words` around its `⟨…⟩` placeholders.
fn pieces(words: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = words;
    while let Some(open) = rest.find('⟨') {
        out.push(&rest[..open]);
        let close = rest[open..]
            .find('⟩')
            .unwrap_or_else(|| panic!("unclosed placeholder in {words:?}"));
        rest = &rest[open + close + '⟩'.len_utf8()..];
    }
    out.push(rest);
    out
}

/// Whether `line` is `words` with each placeholder filled by non-empty text.
///
/// Taking each middle piece at its leftmost place (after at least one character) is exact for
/// patterns whose wildcards all match any non-empty text: it leaves the longest rest.
fn matches(words: &str, line: &str) -> bool {
    let pieces = pieces(words);
    let [first, middle @ .., last] = pieces.as_slice() else {
        return line == words;
    };
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    for piece in middle {
        let Some(skip) = rest.chars().next().map(char::len_utf8) else {
            return false;
        };
        let Some(at) = rest[skip..].find(piece) else {
            return false;
        };
        rest = &rest[skip + at + piece.len()..];
    }
    rest.len() > last.len() && rest.ends_with(last)
}

/// The `error: ` and `warning: ` lines of a golden's expectation, or why there are none.
fn diagnostic_lines(golden: &str) -> Result<Vec<String>, String> {
    let path = Path::new("tests/check").join(format!("{golden}.expected"));
    let whip = path.with_extension("whip");
    if !whip.is_file() {
        return Err(format!("{}: the golden program is missing", whip.display()));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("error: ") || l.starts_with("warning: "))
        .map(str::to_string)
        .collect())
}

#[test]
fn every_listed_diagnostic_has_a_golden_with_its_exact_words() {
    let mut missing = Vec::new();
    for row in TABLE {
        let wanted = format!("{}{}", row.severity.prefix(), row.words);
        match diagnostic_lines(row.golden) {
            Err(why) => missing.push(why),
            Ok(lines) if !lines.iter().any(|l| matches(&wanted, l)) => missing.push(format!(
                "{}: no line matches\n  {wanted}\n  its diagnostics:\n    {}",
                row.golden,
                lines.join("\n    ")
            )),
            Ok(_) => {}
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_listed_exemption_checks_without_a_diagnostic() {
    let mut loud = Vec::new();
    for (golden, shows) in QUIET {
        match diagnostic_lines(golden) {
            Err(why) => loud.push(why),
            Ok(lines) if !lines.is_empty() => loud.push(format!(
                "{golden} should show that {shows}, but reports:\n    {}",
                lines.join("\n    ")
            )),
            Ok(_) => {}
        }
    }
    assert!(loud.is_empty(), "{}", loud.join("\n"));
}

#[test]
fn a_placeholder_stands_for_non_empty_text_and_nothing_else_is_loose() {
    let words = "rule `⟨r⟩` calls `count` with ⟨n⟩ arguments, expected 1";
    assert!(matches(
        words,
        "rule `r` calls `count` with 2 arguments, expected 1"
    ));
    assert!(!matches(
        words,
        "rule `` calls `count` with 2 arguments, expected 1"
    ));
    assert!(!matches(
        words,
        "rule `r` calls `count` with 2 argument, expected 1"
    ));
    assert!(!matches(
        words,
        "rule `r` calls `count` with 2 arguments, expected 1."
    ));
    assert!(!matches(
        words,
        "a rule `r` calls `count` with 2 arguments, expected 1"
    ));
    assert!(matches(
        "program declares no `workflow`",
        "program declares no `workflow`"
    ));
    assert!(!matches(
        "program declares no `workflow`",
        "program declares no workflow"
    ));
}
