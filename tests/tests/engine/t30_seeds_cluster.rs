//! Goal: the same seed scenarios against a 3-voter `whip cell dev`, every command through
//! `--cell` (any member). Method: start the dev cell, run the scenarios, stop it with SIGINT.

use std::process::{Command, Stdio};

#[test]
fn seed_scenarios_on_a_three_voter_cell() {
    let dir = crate::workdir();
    let base = whip_tests::free_addrs(1)[0].port().max(20_000);
    let mut dev = Command::new(crate::bin())
        .current_dir(dir.path())
        .args([
            "cell",
            "dev",
            "--voters",
            "3",
            "--base-port",
            &base.to_string(),
        ])
        .args(["--data", "dev"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(dev.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains("ready"), "{line}");
    let cell = format!("127.0.0.1:{},127.0.0.1:{}", base + 1, base + 2);
    crate::seed_scenarios(dir.path(), Some(&cell));
    let _ = Command::new("kill")
        .args(["-INT", &dev.id().to_string()])
        .status();
    let _ = dev.wait();
}
