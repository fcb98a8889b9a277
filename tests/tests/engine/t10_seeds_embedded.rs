//! Goal: the seed scenarios give the book's results and exact lines on the embedded store.
//! Method: each command is its own `whip` process on one `.whipplescript/` directory.

#[test]
fn seed_scenarios_on_the_embedded_store() {
    let dir = crate::workdir();
    crate::seed_scenarios(dir.path(), None);
    assert!(dir.path().join(".whipplescript").is_dir());
}
