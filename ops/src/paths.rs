//! `whip paths reserve|release|list` and `whip guard install|check`: path reservations of a
//! repository for the CLI's agent (`--agent`), and the git hooks that refuse a commit or a
//! push touching a path another agent holds exclusively.
//!
//! A repository's name is its `git config whip.repo` when set, else the base name of its
//! top directory; paths are relative to that top directory. The board decides grants,
//! conflicts, fences and what blocks a commit (`whip_board::reservation`); this file reads
//! git, translates and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use whip_cell::{CellClient, paths_wire};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::output::{self, Table, parse_duration_ms, time_text};

/// The marker line every hook `whip guard install` writes carries.
const HOOK_MARKER: &str = "# whip guard: installed by `whip guard install`";

#[derive(Subcommand, Debug)]
pub(crate) enum PathsCommand {
    /// Reserve paths or globs (`*`, `?`, `**` segments) for the CLI's agent; exit 1 unless
    /// every path was granted (conflicts name their holder and expiry).
    Reserve {
        /// Paths or globs, relative to the repository's top directory.
        #[arg(required = true)]
        paths: Vec<String>,
        /// The repository (default: the git repository of the current directory).
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// Shared instead of exclusive.
        #[arg(long)]
        shared: bool,
        /// How long the reservation lives unless renewed (`30m`, `2h`).
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Renew: every path must be yours at exactly this fence.
        #[arg(long)]
        fence: Option<u64>,
    },
    /// Release your reservations of PATHS (all of yours in the repository when none).
    Release {
        paths: Vec<String>,
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// Only reservations granted at this fence.
        #[arg(long)]
        fence: Option<u64>,
    },
    /// The repository's live reservations (`--mine`: only yours, in every repository).
    List {
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        #[arg(long)]
        mine: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum GuardCommand {
    /// Write git pre-commit and pre-push hooks that run `whip guard check` with this
    /// binary, with the connection settings of the environment the hook runs in.
    Install {
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// Replace hooks that `whip guard install` did not write.
        #[arg(long)]
        force: bool,
    },
    /// Exit 1, naming holder and expiry, when another agent holds an exclusive reservation
    /// on one of the paths; exit 0 otherwise.
    Check {
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// Paths relative to the repository's top directory.
        #[arg(long, num_args = 1..)]
        paths: Vec<String>,
        /// Also the paths staged for the next commit.
        #[arg(long)]
        staged: bool,
        /// Also the paths changed by the refs a push sends (git's pre-push lines on stdin).
        #[arg(long)]
        pushed: bool,
    },
}

/// Run `git -C DIR ARGS`; its trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .context("run git")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// A repository's top directory and its name in reservations.
fn repository(dir: &Path) -> Result<(PathBuf, String)> {
    let top = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    let configured = git(&top, &["config", "--get", "whip.repo"]).unwrap_or_default();
    let name = match configured.trim() {
        "" => (top.file_name())
            .and_then(|n| n.to_str())
            .ok_or_else(|| anyhow!("{} has no name", top.display()))?
            .to_string(),
        name => name.to_string(),
    };
    Ok((top, name))
}

/// A grant, conflict or reservation as the CLI and the MCP tools print it.
pub(crate) fn grant_json(g: &pb::PathGrant) -> Value {
    json!({"path": g.path, "exclusive": g.exclusive, "fence": g.fence, "renewed": g.renewed,
        "expires_at": time_text(g.expires_at_ms), "expires_at_ms": g.expires_at_ms})
}

pub(crate) fn conflict_json(c: &pb::PathConflict) -> Value {
    json!({"path": c.path, "holder": c.holder, "held": c.held, "exclusive": c.exclusive,
        "expires_at": time_text(c.expires_at_ms), "expires_at_ms": c.expires_at_ms})
}

pub(crate) fn reservation_json(r: &pb::PathReservation) -> Value {
    json!({"repo": r.repo, "path": r.path, "holder": r.holder, "exclusive": r.exclusive,
        "fence": r.fence, "expires_at": time_text(r.expires_at_ms),
        "expires_at_ms": r.expires_at_ms})
}

/// A reserve's or release's answer as JSON (a refusal too: `outcome: refused`).
pub(crate) fn response_json(r: &pb::PathsResponse) -> Value {
    match r.code() {
        Code::PathsReserved => json!({"outcome": "reserved",
            "granted": r.granted.iter().map(grant_json).collect::<Vec<_>>(),
            "conflicts": r.conflicts.iter().map(conflict_json).collect::<Vec<_>>()}),
        Code::PathsReleased => json!({"outcome": "released", "released": r.released,
            "not_held": r.not_held}),
        _ => json!({"outcome": r.outcome, "refusal": r.refusal, "message": r.message}),
    }
}

pub(crate) async fn paths(global: &Global, cmd: PathsCommand) -> Result<ExitCode> {
    let session = crate::connect::session(global).await?;
    let session = crate::agent::authenticate(global, session).await?;
    let result = paths_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn paths_on(global: &Global, c: &CellClient, cmd: PathsCommand) -> Result<ExitCode> {
    let r = match cmd {
        PathsCommand::List { repo, mine } => return list(global, c, &repo, mine).await,
        PathsCommand::Reserve {
            paths,
            repo,
            shared,
            ttl,
            fence,
        } => {
            let request = pb::PathsReserveRequest {
                repo: repository(&repo)?.1,
                paths,
                exclusive: !shared,
                ttl_ms: parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?,
                fence,
                idempotency_key: String::new(),
            };
            c.paths_reserve(request).await?
        }
        PathsCommand::Release { paths, repo, fence } => {
            let request = pb::PathsReleaseRequest {
                repo: repository(&repo)?.1,
                paths,
                fence,
                idempotency_key: String::new(),
            };
            c.paths_release(request).await?
        }
    };
    show_response(global, &r)
}

fn show_response(global: &Global, r: &pb::PathsResponse) -> Result<ExitCode> {
    let refused = r.code() == Code::PathsRefused;
    let ok = !refused && r.conflicts.is_empty();
    if global.json {
        output::json(&response_json(r));
    } else if refused {
        eprintln!("refused ({}): {}", r.refusal, r.message);
    } else {
        for g in &r.granted {
            let mode = if g.exclusive { "exclusive" } else { "shared" };
            let until = time_text(g.expires_at_ms);
            output::line(&format!(
                "granted {} {mode} fence {} until {until}",
                g.path, g.fence
            ));
        }
        for c in &r.conflicts {
            let until = time_text(c.expires_at_ms);
            output::line(&format!(
                "conflict {} held by {} ({}) until {until}",
                c.path, c.holder, c.held
            ));
        }
        for p in &r.released {
            output::line(&format!("released {p}"));
        }
    }
    Ok(ExitCode::from(if ok { 0 } else { 1 }))
}

async fn list(global: &Global, c: &CellClient, repo: &Path, mine: bool) -> Result<ExitCode> {
    let request = pb::PathsListRequest {
        repo: if mine {
            String::new()
        } else {
            repository(repo)?.1
        },
        mine,
        limit: 0,
    };
    let rows = c.paths_list(request).await?.reservations;
    if global.json {
        let rows: Vec<Value> = rows.iter().map(reservation_json).collect();
        output::json(&json!({"reservations": rows}));
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&["REPO", "PATH", "HOLDER", "MODE", "FENCE", "EXPIRES"]);
    for r in &rows {
        let mode = if r.exclusive { "exclusive" } else { "shared" };
        let cells = [&r.repo, &r.path, &r.holder].map(|s| s.to_string());
        let mut cells = cells.to_vec();
        cells.extend([mode.into(), r.fence.to_string(), time_text(r.expires_at_ms)]);
        table.row(cells);
    }
    table.print_or("no reservations");
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn guard(global: &Global, cmd: GuardCommand) -> Result<ExitCode> {
    match cmd {
        GuardCommand::Install { repo, force } => install(global, &repo, force),
        GuardCommand::Check {
            repo,
            paths,
            staged,
            pushed,
        } => {
            let (top, name) = repository(&repo)?;
            let mut all = paths;
            if staged {
                all.extend(lines(&git(&top, &["diff", "--cached", "--name-only"])?));
            }
            if pushed {
                all.extend(pushed_paths(&top)?);
            }
            all.sort();
            all.dedup();
            check(global, &name, &all).await
        }
    }
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The paths the refs of a push change, from git's pre-push lines on stdin (`local-ref
/// local-sha remote-ref remote-sha`): against the remote's sha, or, for a new ref, the
/// commits no remote has yet. A deleted ref changes no path.
fn pushed_paths(top: &Path) -> Result<Vec<String>> {
    let zero = |sha: &str| sha.chars().all(|c| c == '0');
    let mut out = Vec::new();
    for line in std::io::stdin().lines() {
        let line = line.context("read the pushed refs")?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, local, _, remote] = fields[..] else {
            continue;
        };
        let names = match (zero(local), zero(remote)) {
            (true, _) => continue,
            (false, true) => git(
                top,
                &[
                    "log",
                    "--name-only",
                    "--format=",
                    local,
                    "--not",
                    "--remotes",
                ],
            )?,
            (false, false) => git(top, &["diff", "--name-only", remote, local])?,
        };
        out.extend(lines(&names));
    }
    Ok(out)
}

/// Read the repository's reservations as the CLI's agent and refuse (exit 1) when another
/// agent's exclusive reservation covers a path.
async fn check(global: &Global, repo: &str, paths: &[String]) -> Result<ExitCode> {
    let session = crate::connect::session(global).await?;
    let session = crate::agent::authenticate(global, session).await?;
    let me = crate::agent::agent_name(global);
    let request = pb::PathsListRequest {
        repo: repo.to_string(),
        mine: false,
        limit: 0,
    };
    let listed = session.client.paths_list(request).await;
    session.close().await;
    let views: Vec<_> = (listed?.reservations.into_iter())
        .map(paths_wire::reservation_view)
        .collect();
    let blocked =
        whip_board::reservation::blocking(&views, &me, paths).map_err(anyhow::Error::msg)?;
    let rows: Vec<Value> = (blocked.iter())
        .map(|(path, v)| {
            json!({"path": path, "holder": v.holder, "held": v.path,
            "fence": v.fence, "expires_at": time_text(v.expires_at_ms),
            "expires_at_ms": v.expires_at_ms})
        })
        .collect();
    if global.json {
        output::json(&json!({"repo": repo, "ok": rows.is_empty(), "blocked": rows}));
    }
    if blocked.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !global.json {
        for (path, v) in &blocked {
            let until = time_text(v.expires_at_ms);
            eprintln!(
                "whip guard: {path} is reserved exclusively by {} ({}) until {until}",
                v.holder, v.path
            );
        }
    }
    Ok(ExitCode::from(1))
}

/// The hook script: this binary, by its absolute path, on the paths git hands the hook.
fn hook_script(whip: &Path, what: &str) -> String {
    let quoted = format!("'{}'", whip.display().to_string().replace('\'', r"'\''"));
    format!(
        "#!/bin/sh\n{HOOK_MARKER}\n# Refuses the {what} when another agent holds an exclusive \
         reservation on a path it\n# touches. Connection settings (WHIP_CELL, WHIP_AGENT, \
         WHIP_CREDENTIALS, ...) come from\n# the environment the hook runs in.\n\
         top=\"$(git rev-parse --show-toplevel)\" || exit 1\n\
         exec {quoted} guard check --repo \"$top\" --{flag}\n",
        flag = if what == "commit" { "staged" } else { "pushed" }
    )
}

fn install(global: &Global, repo: &Path, force: bool) -> Result<ExitCode> {
    let (top, name) = repository(repo)?;
    let hooks = PathBuf::from(git(&top, &["rev-parse", "--git-path", "hooks"])?);
    let hooks = if hooks.is_absolute() {
        hooks
    } else {
        top.join(hooks)
    };
    std::fs::create_dir_all(&hooks).with_context(|| format!("create {}", hooks.display()))?;
    let whip = std::env::current_exe().context("find this whip binary")?;
    let mut written = Vec::new();
    for (hook, what) in [("pre-commit", "commit"), ("pre-push", "push")] {
        let path = hooks.join(hook);
        let existing = std::fs::read_to_string(&path).unwrap_or_default();
        if !existing.is_empty() && !existing.contains(HOOK_MARKER) && !force {
            bail!(
                "{} exists and is not whip's; pass --force to replace it",
                path.display()
            );
        }
        std::fs::write(&path, hook_script(&whip, what))
            .with_context(|| format!("write {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        written.push(path.display().to_string());
    }
    match global.json {
        true => output::json(&json!({"repo": name, "hooks": written})),
        false => output::line(&format!(
            "installed {} for repository {name}",
            written.join(", ")
        )),
    }
    Ok(ExitCode::SUCCESS)
}
