//! Goal: `whip completions bash|zsh|fish` prints scripts a shell loads, and bash completes
//! `whip bo` to `board`. Method: source the generated bash script in a real `bash`, set
//! COMP_WORDS and COMP_CWORD as readline would, call the function the script registered for
//! `whip` (read back with `complete -p whip`), and print COMPREPLY.

use std::process::Command;

use super::whip;

#[test]
fn bash_completes_bo_to_board() {
    let dir = tempfile::tempdir().unwrap();
    let out = whip(dir.path(), &["completions", "bash"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = dir.path().join("whip.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let driver = r#"
source "$1" || exit 3
func=$(complete -p whip | sed -n 's/.*-F \([^ ]*\).*/\1/p')
[ -n "$func" ] || exit 4
COMP_WORDS=(whip bo); COMP_CWORD=1; COMP_LINE="whip bo"; COMP_POINT=${#COMP_LINE}
"$func" whip bo whip
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let run = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", driver, "driver"])
        .arg(&script)
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "bash failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let words: Vec<&str> = stdout.lines().collect();
    assert_eq!(words, ["board"], "completions of `whip bo`");
}

#[test]
fn zsh_and_fish_scripts_name_whip() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [("zsh", "#compdef whip"), ("fish", "complete -c whip")] {
        let out = whip(dir.path(), &["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell} script lacks {marker:?}");
        assert!(
            script.contains("board"),
            "{shell} script lacks the board command"
        );
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = whip(dir.path(), &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}
