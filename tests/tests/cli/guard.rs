//! Issue 31's path reservations and `whip guard`, as two agents meet them in a scratch git
//! repository against a real 3-voter dev cell. Agent A reserves `src/a.rs` exclusively;
//! the hooks `whip guard install` wrote refuse B's commit of a change to it (naming A and
//! the expiry), take B's commit of another file, and take B's commit of `src/a.rs` once A
//! released it. `whip guard check` exits 1 for B and 0 for A on the same path. The hook
//! runs the installing binary by its absolute path, with the connection settings of the
//! environment the commit runs in.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use super::{DevCli, json_of};

fn git(repo: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .expect("run git")
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `git commit` as `agent`: the hook finds the cell, the agent and the credentials in the
/// environment.
fn commit_as(cli: &DevCli, repo: &Path, agent: &str, file: &str, text: &str) -> Output {
    std::fs::write(repo.join(file), text).unwrap();
    ok(git(repo, &["add", file]));
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["commit", "-q", "-m", text])
        .env("WHIP_CELL", &cli.cell)
        .env("WHIP_AGENT", agent)
        .env("WHIP_CREDENTIALS", cli.dir.join("credentials.json"))
        .output()
        .expect("run git commit")
}

/// `whip guard check` of `src/a.rs` as `agent`.
fn guard_check(cli: &DevCli, repo: &str, agent: &str) -> Output {
    let args = [
        "guard", "check", "--repo", repo, "--paths", "src/a.rs", "--agent", agent,
    ];
    cli.run(&[&args[..], &["--json"]].concat())
}

fn scratch_repo(cli: &DevCli) -> std::path::PathBuf {
    let repo = cli.dir.join("scratch");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    ok(git(&repo, &["init", "-q"]));
    for (key, value) in [("user.name", "t"), ("user.email", "t@example.invalid")] {
        ok(git(&repo, &["config", key, value]));
    }
    ok(git(&repo, &["config", "whip.repo", "demo"]));
    std::fs::write(repo.join("src/a.rs"), "fn a() {}\n").unwrap();
    ok(git(&repo, &["add", "."]));
    ok(git(&repo, &["commit", "-q", "-m", "start"]));
    repo
}

#[test]
fn the_guard_refuses_a_commit_on_another_agents_exclusive_path_until_released() {
    let cli = DevCli::start();
    let repo = scratch_repo(&cli);
    let r = repo.to_str().unwrap();
    for agent in ["alice", "bob"] {
        json_of(&cli.run(&["agent", "register", "--agent", agent, "--json"]));
    }
    let reserve = ["paths", "reserve", "src/a.rs", "--repo", r, "--ttl", "10m"];
    let held = json_of(&cli.run(&[&reserve[..], &["--agent", "alice", "--json"]].concat()));
    assert_eq!(held["granted"][0]["path"], "src/a.rs", "{held}");
    let fence = held["granted"][0]["fence"].as_u64().unwrap();
    let installed = json_of(&cli.run(&["guard", "install", "--repo", r, "--json"]));
    assert_eq!(installed["repo"], "demo", "{installed}");
    let hook = std::fs::read_to_string(repo.join(".git/hooks/pre-commit")).unwrap();
    assert!(
        hook.contains(whip_tests::whip_binary().to_str().unwrap()),
        "{hook}"
    );

    // B's reserve conflicts and names A; B's commit is refused naming A.
    let conflict = cli.run(&[&reserve[..], &["--agent", "bob", "--json"]].concat());
    assert_eq!(conflict.status.code(), Some(1));
    let conflict: Value = serde_json::from_slice(&conflict.stdout).unwrap();
    assert_eq!(conflict["conflicts"][0]["holder"], "alice", "{conflict}");
    let refused = commit_as(&cli, &repo, "bob", "src/a.rs", "fn a() { b() }\n");
    assert_eq!(refused.status.code(), Some(1), "the commit went through");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("src/a.rs") && said.contains("alice"),
        "{said}"
    );
    assert!(said.contains("until 20"), "names the expiry: {said}");
    ok(git(&repo, &["reset", "-q", "HEAD", "src/a.rs"]));
    ok(git(&repo, &["checkout", "-q", "src/a.rs"]));

    // Another file goes through; A's own commit of its path goes through.
    ok(commit_as(&cli, &repo, "bob", "src/b.rs", "fn b() {}\n"));
    let check = |agent: &str| guard_check(&cli, r, agent);
    let blocked = check("bob");
    assert_eq!(blocked.status.code(), Some(1));
    let blocked: Value = serde_json::from_slice(&blocked.stdout).unwrap();
    assert_eq!(blocked["blocked"][0]["holder"], "alice", "{blocked}");
    assert_eq!(check("alice").status.code(), Some(0));

    // B cannot release A's path; A can, with its fence; then B's commit goes through.
    let release = ["paths", "release", "src/a.rs", "--repo", r];
    let stolen = cli.run(&[&release[..], &["--agent", "bob", "--json"]].concat());
    assert_eq!(stolen.status.code(), Some(1));
    let stolen: Value = serde_json::from_slice(&stolen.stdout).unwrap();
    assert_eq!(stolen["refusal"], "not_holder", "{stolen}");
    let fence = fence.to_string();
    let mine = [
        &release[..],
        &["--fence", fence.as_str(), "--agent", "alice", "--json"],
    ];
    let released = json_of(&cli.run(&mine.concat()));
    assert_eq!(released["released"][0], "src/a.rs", "{released}");
    assert_eq!(check("bob").status.code(), Some(0));
    ok(commit_as(
        &cli,
        &repo,
        "bob",
        "src/a.rs",
        "fn a() { b() }\n",
    ));
    let listed = json_of(&cli.run(&["paths", "list", "--repo", r, "--agent", "bob", "--json"]));
    assert_eq!(listed["reservations"], serde_json::json!([]), "{listed}");
}
