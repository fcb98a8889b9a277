//! One run's process: spawned without a shell in its own process group, stdin null, a fixed
//! base environment, stdout and stderr each kept to a bounded tail, and the whole group
//! killed at the timeout (and once the leader exits, so nothing of a run outlives it).
//!
//! The leader is waited for with `waitid(WNOWAIT)`: it stays a zombie, so its pid, which is
//! also the group's id, cannot be reused while the group is killed. Only then is it reaped.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::protocol::ExecAnswer;
use crate::limits::{EXEC_BASE_PATH, EXEC_OUTPUT_BYTES_MAX, EXEC_PIPE_GRACE_MS};

/// What to run.
pub(crate) struct Launch {
    pub(crate) argv: Vec<String>,
    /// The directory it runs in (inside the workspace).
    pub(crate) dir: PathBuf,
    /// `HOME`: the workspace.
    pub(crate) home: PathBuf,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) timeout_ms: u64,
}

/// The last [`EXEC_OUTPUT_BYTES_MAX`] bytes of one output.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    dropped: bool,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > 2 * EXEC_OUTPUT_BYTES_MAX {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.bytes.len() > EXEC_OUTPUT_BYTES_MAX {
            let extra = self.bytes.len() - EXEC_OUTPUT_BYTES_MAX;
            self.bytes.drain(..extra);
            self.dropped = true;
        }
    }

    /// The tail as text (a character cut at the front is replaced, not an error).
    fn take(&mut self) -> (String, bool) {
        self.cut();
        (
            String::from_utf8_lossy(&self.bytes).into_owned(),
            self.dropped,
        )
    }
}

/// Read `pipe` into a shared tail on its own thread; `done` hears when the pipe closed.
fn drain(pipe: Option<impl Read + Send + 'static>, done: mpsc::Sender<()>) -> Arc<Mutex<Tail>> {
    let tail = Arc::new(Mutex::new(Tail::default()));
    let Some(mut pipe) = pipe else {
        let _ = done.send(());
        return tail;
    };
    let shared = Arc::clone(&tail);
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            shared.lock().expect("tail lock").push(&buf[..n]);
        }
        let _ = done.send(());
    });
    tail
}

/// Kill every process of group `pgid`.
fn kill_group(pgid: i32) {
    // SAFETY: kill(2) on a process group this run created; the leader is not reaped yet,
    // so the id cannot name anyone else's group.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Block until process `pid` exited, without reaping it.
fn wait_exited(pid: i32) {
    loop {
        // SAFETY: waitid(2) on our own child with a zeroed siginfo it fills in.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        let interrupted = std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        if rc == 0 || !interrupted {
            return;
        }
    }
}

fn command(launch: &Launch) -> Command {
    let mut cmd = Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..])
        .current_dir(&launch.dir)
        .env_clear()
        .env("PATH", EXEC_BASE_PATH)
        .env("HOME", &launch.home)
        .envs(&launch.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// Run `launch` to its end or its timeout (blocking: call it off the async runtime).
pub(crate) fn run(launch: Launch) -> ExecAnswer {
    let started = Instant::now();
    let mut child = match command(&launch).spawn() {
        Ok(child) => child,
        Err(e) => {
            return ExecAnswer::SpawnFailed {
                error: format!("cannot start `{}`: {e}", launch.argv[0]),
            };
        }
    };
    let pid = child.id() as i32;
    let (pipes_tx, pipes_rx) = mpsc::channel();
    let stdout = drain(child.stdout.take(), pipes_tx.clone());
    let stderr = drain(child.stderr.take(), pipes_tx);
    let (exit_tx, exit_rx) = mpsc::channel();
    std::thread::spawn(move || {
        wait_exited(pid);
        let _ = exit_tx.send(());
    });
    let timeout = Duration::from_millis(launch.timeout_ms);
    let timed_out = matches!(
        exit_rx.recv_timeout(timeout),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    if timed_out {
        kill_group(pid);
        let _ = exit_rx.recv();
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    // Whatever the run left behind in its group goes with it.
    kill_group(pid);
    let status = child.wait();
    let grace = Instant::now() + Duration::from_millis(EXEC_PIPE_GRACE_MS);
    for _ in 0..2 {
        let left = grace.saturating_duration_since(Instant::now());
        if pipes_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let (stdout, out_cut) = stdout.lock().expect("tail lock").take();
    let (stderr, err_cut) = stderr.lock().expect("tail lock").take();
    let truncated = out_cut || err_cut;
    if timed_out {
        return ExecAnswer::TimedOut {
            timeout_ms: launch.timeout_ms,
            stdout,
            stderr,
            truncated,
            duration_ms,
        };
    }
    let (exit_code, signal) = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => (code, None),
            (None, Some(sig)) => (128 + sig, Some(sig)),
            (None, None) => (-1, None),
        },
        Err(_) => (-1, None),
    };
    ExecAnswer::Exited {
        exit_code,
        signal,
        stdout,
        stderr,
        truncated,
        duration_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(argv: &[&str], timeout_ms: u64) -> Launch {
        let dir = std::env::temp_dir();
        Launch {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            dir: dir.clone(),
            home: dir,
            env: BTreeMap::from([("GREETING".to_string(), "hi".to_string())]),
            timeout_ms,
        }
    }

    #[test]
    fn a_run_exits_times_out_or_fails_to_spawn() {
        let ran = run(launch(
            &["sh", "-c", "echo $GREETING $HOME; echo oops >&2; exit 3"],
            5_000,
        ));
        let ExecAnswer::Exited {
            exit_code,
            stdout,
            stderr,
            truncated,
            ..
        } = ran
        else {
            panic!("{ran:?}");
        };
        assert_eq!(exit_code, 3);
        let home = std::env::temp_dir();
        assert_eq!(stdout, format!("hi {}\n", home.display()));
        assert_eq!((stderr.as_str(), truncated), ("oops\n", false));
        let slow = run(launch(&["sh", "-c", "sleep 30 & sleep 30"], 200));
        assert!(
            matches!(
                slow,
                ExecAnswer::TimedOut {
                    timeout_ms: 200,
                    ..
                }
            ),
            "{slow:?}"
        );
        let missing = run(launch(&["/nonexistent/program"], 1_000));
        assert!(
            matches!(missing, ExecAnswer::SpawnFailed { .. }),
            "{missing:?}"
        );
    }

    #[test]
    fn output_keeps_its_tail() {
        let script = format!(
            "head -c {} /dev/zero | tr '\\0' a; echo END",
            3 * EXEC_OUTPUT_BYTES_MAX
        );
        let ran = run(launch(&["sh", "-c", &script], 10_000));
        let ExecAnswer::Exited {
            stdout, truncated, ..
        } = ran
        else {
            panic!("{ran:?}");
        };
        assert!(truncated);
        assert_eq!(stdout.len(), EXEC_OUTPUT_BYTES_MAX);
        assert!(stdout.ends_with("aaaEND\n"));
    }
}
