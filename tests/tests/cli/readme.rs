//! The README's quickstarts run as written, and so does `scripts/demo.sh`.
//!
//! Method: every code block the README marks `<!-- run: NAME -->` joins script NAME, in
//! README order. A script runs in bash in a fresh directory where `target/release/whip`
//! is this build's `whip`, `engine` is the checkout's and `cargo` does nothing; its `/tmp/`
//! paths move into that directory and its ports `7xxx` to a free range `2Kxxx` (one script
//! at a time on the machine holds the range, by a lock file), so it neither meets another
//! run nor a user's servers. Each line must exit 0, or 1 where its comment says `exit 1`;
//! the blocks wait for their servers by polling (`until …`), and the script as a whole has
//! a deadline. Its output must show what the README's comments promise, and its stderr
//! no colour.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use whip_tests::whip_binary;

/// The scripts the README marks, each with what its output must contain.
const SCRIPTS: &[(&str, &[&str])] = &[
    (
        "dev-cell",
        &["held fence=", "contended: held by alice", "member 3 ("],
    ),
    (
        "fabric",
        &[
            "fabric initialized: 3 nodes",
            r#""outcome":"held""#,
            r#"{"outcome":"posted","task_id":"web-1","tier":"local"}"#,
            r#""outcome":"claimed""#,
            "completed web-1",
            r#"{"cell_ready":0,"claimed":0,"dead":0,"done":1,"ready":0,"tier":"local"}"#,
        ],
    ),
    (
        "seed",
        &[
            "local/Decisions::decisions#2 [deploys] by ins_",
            "local/Ship::deploy_slot/prod held by ins_",
            r#"result {"note":"skipped: deploy slot busy"}"#,
            "local/Budget::tokens/core consumed=60 period=",
        ],
    ),
    (
        "voting",
        &[
            r#""outcome":"accepted","seq":1"#,
            r#""reason":"not_eligible""#,
            r#""winner":"ship""#,
        ],
    ),
    ("config", &["fabric initialized: 1 nodes"]),
];

/// How long one script may run (a cold debug `whip` on a loaded two-core machine).
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::read_to_string(path).expect("README.md")
}

/// The marked blocks as (script name, block text), in README order.
fn marked_blocks(readme: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- run: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or("");
        assert!(
            fence.starts_with("```"),
            "`{line}` is not right above a block"
        );
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        blocks.push((name.to_string(), body.join("\n")));
    }
    blocks
}

/// A block's commands: a line, with its `\` continuations or its here-document.
fn commands(block: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut lines = block.lines();
    while let Some(line) = lines.next() {
        let mut command = line.to_string();
        while command.ends_with('\\') {
            command = format!("{command}\n{}", lines.next().unwrap_or(""));
        }
        if let Some(at) = command.find("<<'") {
            let end = &command[at + 3..];
            let word = end[..end.find('\'').expect("a closing quote")].to_string();
            for body in lines.by_ref() {
                command = format!("{command}\n{body}");
                if body == word {
                    break;
                }
            }
        }
        if !command.trim().is_empty() {
            out.push(command);
        }
    }
    out
}

/// Script `name` as bash runs it: every command followed by a check of its exit status.
fn script(name: &str, blocks: &[(String, String)], tmp: &Path, range: u16) -> String {
    let mut text = String::from("set -o pipefail\ncargo() { :; }\n");
    for (_, block) in blocks.iter().filter(|(n, _)| n == name) {
        let block = block
            .replace("/tmp/", &format!("{}/", tmp.display()))
            .replace("127.0.0.1:7", &format!("127.0.0.1:{range}"))
            .replace("--base-port 7", &format!("--base-port {range}"));
        for command in commands(&block) {
            let expected = if command.contains("exit 1") { 1 } else { 0 };
            let first = command.lines().next().unwrap_or("").replace('\'', "");
            text.push_str(&format!(
                "{command}\nrc=$?; if [ $rc -ne {expected} ]; then \
                 echo 'README {name}: exit '$rc' (not {expected}): {first}' >&2; exit 97; fi\n"
            ));
        }
    }
    text
}

/// Holds the lock that gives one script at a time a port range.
struct RangeLock {
    _file: std::fs::File,
}

impl RangeLock {
    fn take() -> RangeLock {
        let path = std::env::temp_dir().join("whip-readme-ports.lock");
        let file = std::fs::File::create(path).expect("the lock file");
        // SAFETY: flock on a descriptor this value owns; released when it closes.
        let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) };
        assert_eq!(locked, 0, "flock");
        RangeLock { _file: file }
    }
}

/// A range `2K` (ports 2K000..=2K999, below the ephemeral ones) whose ports the scripts
/// use (2K001..=2K299) are all free now.
fn free_range() -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    (20..30)
        .find(|range| (1..300).all(|port| free(range * 1000 + port)))
        .expect("a free port range 2K001..2K299")
}

/// Run script `name` and check it against `shows`.
fn run_script(name: &str, shows: &[&str]) {
    let blocks = marked_blocks(&readme());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for sub in ["tmp", "home", "config", "target/release"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::os::unix::fs::symlink(whip_binary(), root.join("target/release/whip")).unwrap();
    let engine = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine");
    std::os::unix::fs::symlink(engine, root.join("engine")).unwrap();
    let _lock = RangeLock::take();
    let text = script(name, &blocks, &root.join("tmp"), free_range());
    std::fs::File::create(root.join("script.sh"))
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
    let (stdout, stderr) = run_bash(root, &root.join("script.sh"), |command| {
        command
            .env("HOME", root.join("home"))
            .env("WHIP_CONFIG_DIR", root.join("config"));
    });
    for shown in shows {
        assert!(
            stdout.contains(shown),
            "README {name} did not print {shown:?}:\n{stdout}"
        );
    }
    // (Whether stopping logs errors is `newcomer.rs`'s: on a loaded machine a running cell
    // may log a replication timeout, which is not the README's to answer for.)
    assert!(!stderr.contains('\u{1b}'), "colour on stderr: {stderr:?}");
}

/// Run `script` with bash in `root` without this process's whip settings, with `adjust`
/// applied to the command (its own process group, killed at the end: a failed script may
/// leave servers behind); its stdout and stderr, once it exited 0.
fn run_bash(root: &Path, script: &Path, adjust: impl FnOnce(&mut Command)) -> (String, String) {
    let (out, err) = (root.join("stdout"), root.join("stderr"));
    let mut command = Command::new("bash");
    command
        .args(["--noprofile", "--norc"])
        .arg(script)
        .current_dir(root)
        .env("USER", "readme")
        .env("TMPDIR", root.join("tmp"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0);
    for (name, _) in std::env::vars() {
        if name.starts_with("WHIP") {
            command.env_remove(name);
        }
    }
    adjust(&mut command);
    let mut child = command.spawn().expect("bash");
    let deadline = Instant::now() + SCRIPT_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: a signal to the process group this test made.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let (stdout, stderr) = (read(&out), read(&err));
    match status {
        Some(s) if s.success() => (stdout, stderr),
        Some(s) => panic!("{s:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"),
        None => panic!("still running after {SCRIPT_DEADLINE:?}\n{stdout}\n{stderr}"),
    }
}

#[test]
fn every_marked_block_belongs_to_a_script_this_test_runs() {
    let blocks = marked_blocks(&readme());
    for (name, _) in &blocks {
        assert!(
            SCRIPTS.iter().any(|(known, _)| known == name),
            "README marks `{name}`, which no test runs"
        );
    }
    for (name, _) in SCRIPTS {
        assert!(
            blocks.iter().any(|(n, _)| n == name),
            "no README block is `{name}`"
        );
    }
}

fn shows(name: &str) -> &'static [&'static str] {
    SCRIPTS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a script")
        .1
}

#[test]
fn readme_dev_cell_quickstart_runs_as_written() {
    run_script("dev-cell", shows("dev-cell"));
}

#[test]
fn readme_fabric_and_board_quickstarts_run_as_written() {
    run_script("fabric", shows("fabric"));
}

#[test]
fn readme_seed_quickstart_runs_as_written() {
    run_script("seed", shows("seed"));
}

#[test]
fn readme_voting_block_runs_as_written() {
    run_script("voting", shows("voting"));
}

#[test]
fn readme_config_block_runs_as_written() {
    run_script("config", shows("config"));
}

/// Run the repository script `script` (a path from the workspace root) on this build's
/// `whip`, as a user with a fresh home would, with settings a quickstart may have left
/// exported (`WHIP_CELL`, `WHIPPLESCRIPT_STORE`) that the script must not follow. Its
/// stdout and stderr; the home and the stale store are checked untouched.
fn run_demo(script: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(script);
    let out = run_bash(root, &demo, |command| {
        command
            .env("WHIP_BIN", whip_binary())
            .env("HOME", &home)
            .env("WHIP_CELL", "127.0.0.1:1")
            .env("WHIPPLESCRIPT_STORE", root.join("stale-store"));
    });
    assert!(
        !home.join(".config").exists(),
        "{script} wrote into ~/.config"
    );
    assert!(
        !root.join("stale-store").exists(),
        "{script} used an exported store"
    );
    out
}

/// `scripts/demo.sh` on this build's `whip`: it runs to the end and leaves the user's whip
/// config alone (its store, tokens and config live in its own temporary directory).
#[test]
fn the_demo_runs_and_leaves_the_users_config_alone() {
    let (stdout, _) = run_demo("scripts/demo.sh");
    assert!(
        stdout.contains("shared::audit#1"),
        "whip ledger list audit: {stdout}"
    );
}

/// `examples/agents/demo.sh` on this build's `whip`: the review team's tasks are worked and
/// judged through the model broker, the council votes, the key reaches only the stub model
/// and the engine's store holds none of it; the user's whip config is left alone.
#[test]
fn the_agents_demo_runs_and_keeps_the_key_out_of_the_engine() {
    let (stdout, stderr) = run_demo("examples/agents/demo.sh");
    assert!(
        stdout.contains(r#"result {"release":"ship","verdict":"merge"}"#),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(r#"result {"reviewed":2,"verdict":"merge"}"#),
        "{stdout}"
    );
    assert_eq!(stdout.matches("conformance=ok").count(), 2, "{stdout}");
    assert!(
        stdout.contains("the key reached the model (through the broker)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the key is nowhere in the engine's store"),
        "{stdout}"
    );
}

/// `scripts/test.sh` (through `scripts/clean-env.sh`, which it sources before anything
/// else) forgets the whip settings a quickstart left exported, but not `WHIP_LOG` or
/// `WHIP_CONFIG_DIR`.
#[test]
fn test_sh_forgets_exported_whip_settings() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    let test_sh = std::fs::read_to_string(scripts.join("test.sh")).unwrap();
    let sourced = test_sh
        .find("source scripts/clean-env.sh")
        .expect("test.sh sources it");
    assert!(
        sourced < test_sh.find("cargo ").unwrap(),
        "before any cargo command"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {}/clean-env.sh; env", scripts.display()))
        .env("WHIP_CELL", "127.0.0.1:7001")
        .env("WHIPPLESCRIPT_STORE", "/tmp/elsewhere")
        .env("WHIP_AGENT", "someone")
        .env("WHIP_LOG", "debug")
        .env("WHIP_CONFIG_DIR", "/tmp/config")
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&out.stdout);
    for gone in ["WHIP_CELL=", "WHIPPLESCRIPT_STORE=", "WHIP_AGENT="] {
        assert!(!env.lines().any(|l| l.starts_with(gone)), "{gone} kept");
    }
    for kept in ["WHIP_LOG=debug", "WHIP_CONFIG_DIR=/tmp/config"] {
        assert!(env.lines().any(|l| l == kept), "{kept} lost");
    }
}
