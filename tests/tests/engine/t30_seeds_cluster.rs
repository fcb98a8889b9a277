//! Goal: the same seed scenarios against a 3-voter `whip cell dev`, every command through
//! `--cell` (any member). Method: start the dev cell, run the scenarios, stop it with SIGINT.

#[test]
fn seed_scenarios_on_a_three_voter_cell() {
    let dir = crate::workdir();
    let dev = whip_tests::DevCell::start(dir.path());
    let cell = format!("{},{}", dev.member(1), dev.member(2));
    crate::seed_scenarios(dir.path(), Some(&cell));
}
