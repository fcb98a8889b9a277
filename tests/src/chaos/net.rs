//! Network namespaces for the nodes: one namespace per node, joined by a veth pair to a
//! bridge the harness creates, with addresses in the benchmarking range 198.18.0.0/15 and no
//! route off the machine (TRAPS.md 17–19). A partition is a real cut of packets: the
//! node's host-side veth set down (isolation, also from clients), or blackhole routes in the
//! namespaces of both sides (a cut between nodes that clients still reach), or in one side's
//! only (a one-way cut).
//!
//! Every name embeds the harness's pid (`whipchaos-<pid>-<n>`, `wc<pid>br`, `wc<pid>h<n>`),
//! is recorded, and is removed on drop; names of a pid that no longer runs are stale leftovers
//! of a killed run and are removed at the next start, with any process still inside.

use std::collections::BTreeSet;
use std::process::Command;

/// Run `ip` with `args`; an error names the command and its stderr.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip (install iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip_output(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The namespaces, bridge and veths of one run.
pub struct Net {
    pid: u32,
    /// The /24 inside 198.18.0.0/15 this run uses (third octet).
    pub subnet: u8,
    /// Namespace names, index = node - 1.
    pub namespaces: Vec<String>,
    bridge: String,
    host_veths: Vec<String>,
    created_namespaces: Vec<String>,
    created_links: Vec<String>,
    blocked: BTreeSet<(usize, usize)>,
    /// One-way cuts as (from, to).
    one_way: BTreeSet<(usize, usize)>,
    down: BTreeSet<usize>,
}

impl Net {
    /// Remove what killed earlier runs left behind, then create `n` namespaces on a bridge.
    pub fn create(n: usize) -> Result<Net, String> {
        remove_stale();
        let pid = std::process::id();
        let subnet = free_subnet(pid)?;
        let mut net = Net {
            pid,
            subnet,
            namespaces: (1..=n).map(|i| format!("whipchaos-{pid}-{i}")).collect(),
            bridge: format!("wc{pid}br"),
            host_veths: (1..=n).map(|i| format!("wc{pid}h{i}")).collect(),
            created_namespaces: Vec::new(),
            created_links: Vec::new(),
            blocked: BTreeSet::new(),
            one_way: BTreeSet::new(),
            down: BTreeSet::new(),
        };
        net.build()?;
        Ok(net)
    }

    fn build(&mut self) -> Result<(), String> {
        let bridge = self.bridge.clone();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        self.created_links.push(bridge.clone());
        ip(&[
            "addr",
            "add",
            &format!("198.18.{}.254/24", self.subnet),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..self.namespaces.len() {
            let ns = self.namespaces[i].clone();
            let host = self.host_veths[i].clone();
            let inner = format!("wc{}n{}", self.pid, i + 1);
            ip(&["netns", "add", &ns])?;
            self.created_namespaces.push(ns.clone());
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])?;
            self.created_links.push(host.clone());
            ip(&["link", "set", &inner, "netns", &ns])?;
            let addr = format!("{}/24", self.addr(i + 1));
            ip(&[
                "netns", "exec", &ns, "ip", "addr", "add", &addr, "dev", &inner,
            ])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", &inner, "up"])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
            ip(&["link", "set", &host, "master", &bridge])?;
            ip(&["link", "set", &host, "up"])?;
        }
        Ok(())
    }

    /// The address of node `node` (1-based).
    pub fn addr(&self, node: usize) -> String {
        format!("198.18.{}.{}", self.subnet, node)
    }

    /// The namespace of node `node`.
    pub fn namespace(&self, node: usize) -> &str {
        &self.namespaces[node - 1]
    }

    /// Cut packets between `a` and `b` both ways (blackhole routes in both namespaces).
    pub fn block(&mut self, a: usize, b: usize) -> Result<(), String> {
        let pair = (a.min(b), a.max(b));
        if !self.blocked.insert(pair) {
            return Ok(());
        }
        for (from, to) in [(a, b), (b, a)] {
            if !self.one_way.contains(&(from, to)) {
                self.blackhole(from, to, "add")?;
            }
        }
        Ok(())
    }

    /// Cut packets from `from` to `to` only (a blackhole route in `from`'s namespace):
    /// `to` still sends to `from`, and `from` hears it, but nothing `from` sends reaches
    /// `to`, not even the acknowledgements of what it heard.
    pub fn block_one_way(&mut self, from: usize, to: usize) -> Result<(), String> {
        let pair = (from.min(to), from.max(to));
        if self.blocked.contains(&pair) || !self.one_way.insert((from, to)) {
            return Ok(());
        }
        self.blackhole(from, to, "add")
    }

    /// Add or delete (`action`) the blackhole route to `to` in `from`'s namespace.
    fn blackhole(&self, from: usize, to: usize, action: &str) -> Result<(), String> {
        let route = format!("{}/32", self.addr(to));
        let mut args = vec!["netns", "exec", self.namespace(from), "ip", "route", action];
        if action == "add" {
            args.push("blackhole");
        }
        args.push(&route);
        ip(&args)
    }

    /// Set node `node`'s host-side veth down: nothing reaches it, clients included.
    pub fn isolate(&mut self, node: usize) -> Result<(), String> {
        if self.down.insert(node) {
            ip(&["link", "set", &self.host_veths[node - 1], "down"])?;
        }
        Ok(())
    }

    /// Remove every cut.
    pub fn heal(&mut self) -> Result<(), String> {
        let mut first_error = Ok(());
        let mut routes: BTreeSet<(usize, usize)> = std::mem::take(&mut self.one_way);
        for (a, b) in std::mem::take(&mut self.blocked) {
            routes.extend([(a, b), (b, a)]);
        }
        for (from, to) in routes {
            first_error = first_error.and(self.blackhole(from, to, "del"));
        }
        for node in std::mem::take(&mut self.down) {
            first_error = first_error.and(ip(&["link", "set", &self.host_veths[node - 1], "up"]));
        }
        first_error
    }

    /// Is anything cut right now?
    pub fn is_cut(&self) -> bool {
        !self.blocked.is_empty() || !self.one_way.is_empty() || !self.down.is_empty()
    }

    /// The names this run created (for the record in the output directory).
    pub fn names(&self) -> Vec<String> {
        self.created_namespaces
            .iter()
            .chain(&self.created_links)
            .cloned()
            .collect()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.created_namespaces.drain(..).rev() {
            kill_inside(&ns);
            let _ = ip(&["netns", "del", &ns]);
        }
        for link in self.created_links.drain(..).rev() {
            let _ = ip(&["link", "del", &link]);
        }
    }
}

/// SIGKILL every process inside namespace `ns`.
fn kill_inside(ns: &str) {
    for pid in ip_output(&["netns", "pids", ns]).split_whitespace() {
        if let Ok(pid) = pid.parse::<i32>() {
            // SAFETY: kill(2) with a pid read from the kernel; no memory is shared.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Remove namespaces and links named by a harness pid that no longer runs.
fn remove_stale() {
    for line in ip_output(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("whipchaos-") else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !pid_alive(p)) {
            eprintln!("removing stale namespace {name}");
            kill_inside(name);
            let _ = ip(&["netns", "del", name]);
        }
    }
    for line in ip_output(&["-o", "link", "show"]).lines() {
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or("");
        let Some(rest) = name.strip_prefix("wc") else {
            continue;
        };
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let tail = &rest[digits.len()..];
        let ours = tail == "br" || tail.starts_with('h');
        if ours && digits.parse::<u32>().is_ok_and(|p| !pid_alive(p)) {
            eprintln!("removing stale link {name}");
            let _ = ip(&["link", "del", name]);
        }
    }
}

/// A /24 of 198.18.0.0/16 that no interface on this machine uses yet.
fn free_subnet(pid: u32) -> Result<u8, String> {
    let used = ip_output(&["-4", "-o", "addr", "show"]);
    (0..200u32)
        .map(|k| ((pid + k) % 200 + 20) as u8)
        .find(|s| !used.contains(&format!("198.18.{s}.")))
        .ok_or_else(|| "no free /24 in 198.18.0.0/16".to_string())
}
