//! Goal: lease ownership and child workflows behave as LANGUAGE.md §2 and §3 say: two
//! workflows declaring the same lease name contend only when it is `shared`, and a child
//! started by `invoke` resolves the parent's effect with its terminal.
//! Method: `whip run --root W` processes on one embedded store.

use std::path::Path;

use crate::{ok, whip};

fn data(dir: &Path, name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/data");
    std::fs::copy(src.join(name), dir.join(name)).unwrap();
}

#[test]
fn same_lease_name_contends_only_when_shared() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    data(d, "slots.whip");
    // Alpha holds its local `slot` and the shared `pool` until their TTL.
    let alpha = ok(&whip(d, None, &["run", "--root", "Alpha", "slots.whip"]));
    assert!(alpha.contains("status running"), "{alpha}");
    let beta = ok(&whip(d, None, &["run", "--root", "Beta", "slots.whip"]));
    assert!(
        beta.ends_with("result {\"note\":\"beta: slot held\"}\n"),
        "{beta}"
    );
    let gamma = ok(&whip(d, None, &["run", "--root", "Gamma", "slots.whip"]));
    assert!(
        gamma.ends_with("result {\"note\":\"gamma: pool contended\"}\n"),
        "{gamma}"
    );
    let leases = ok(&whip(d, None, &["leases"]));
    assert!(
        leases.contains("local/Alpha::slot/k held by ins_"),
        "{leases}"
    );
    assert!(leases.contains("shared::pool/k held by ins_"), "{leases}");
    assert!(
        !leases.contains("local/Beta"),
        "Beta released its own slot: {leases}"
    );
}

#[test]
fn a_child_terminal_resolves_the_parents_invoke() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    data(d, "invoke.whip");
    let out = ok(&whip(d, None, &["run", "--root", "Parent", "invoke.whip"]));
    assert!(out.contains("status completed"), "{out}");
    assert!(
        out.ends_with("result {\"note\":\"parent saw: child did build\"}\n"),
        "{out}"
    );
    let instances = ok(&whip(d, None, &["instances"]));
    assert_eq!(
        instances.lines().count(),
        2,
        "parent and child: {instances}"
    );
    assert!(
        instances.lines().all(|l| l.contains(" completed ")),
        "{instances}"
    );
}
