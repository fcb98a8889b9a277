//! The `whip-executor/1` wire types (JSON over HTTP/1.1) and the pure checks of a request.
//!
//! Requests are strict (`deny_unknown_fields`): a field the protocol does not know is a
//! refusal, not something silently ignored. Every refusal carries a stable snake_case code
//! ([`Refusal::code`]), the same string a client sees as `{"error": code}`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::limits::{
    EXEC_ARGV_BYTES_MAX, EXEC_ARGV_COUNT_MAX, EXEC_CWD_BYTES_MAX, EXEC_ENV_BYTES_MAX,
    EXEC_ENV_ENTRIES_MAX, EXEC_TIMEOUT_MS_DEFAULT, EXEC_TIMEOUT_MS_MAX, EXECUTOR_ID_BYTES_MAX,
};

/// The protocol's name, answered by `GET /v1/health`.
pub const PROTOCOL: &str = "whip-executor/1";

/// `GET /v1/health`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Always [`PROTOCOL`].
    pub protocol: String,
}

/// `POST /v1/exec`: run `argv` (no shell) in the instance's workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// The instance: its workspace is `ROOT/<instance>/`.
    pub instance: String,
    /// The effect (recorded with the run, for the operator).
    pub effect: String,
    /// The run: at most one process ever runs per (instance, run).
    pub run: String,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// A directory inside the workspace (relative, no `..`); the workspace when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment on top of the fixed base (`PATH`, `HOME` = the workspace).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Kill the process group after this long ([`EXEC_TIMEOUT_MS_DEFAULT`] when absent).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl ExecRequest {
    /// The timeout this request runs under.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(EXEC_TIMEOUT_MS_DEFAULT)
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ExecAnswer {
    /// The process exited (by a signal: `exit_code` is 128 + the signal, and `signal` set).
    Exited {
        /// Its exit status.
        exit_code: i32,
        /// The signal that ended it, if one did.
        #[serde(default)]
        signal: Option<i32>,
        /// The tail of its stdout.
        stdout: String,
        /// The tail of its stderr.
        stderr: String,
        /// True when either output was cut to its tail.
        truncated: bool,
        /// From spawn to exit.
        duration_ms: u64,
    },
    /// The timeout passed: the whole process group was killed.
    TimedOut {
        /// The timeout that passed.
        timeout_ms: u64,
        /// The tail of its stdout.
        stdout: String,
        /// The tail of its stderr.
        stderr: String,
        /// True when either output was cut to its tail.
        truncated: bool,
        /// From spawn to the kill.
        duration_ms: u64,
    },
    /// The program could not be started (not found, not executable, …).
    SpawnFailed {
        /// Why, in the operating system's words.
        error: String,
    },
}

/// `GET /v1/runs/<instance>/<run>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunRecord {
    /// The run ended and its answer is durable.
    Finished {
        /// What the run answered.
        answer: ExecAnswer,
    },
    /// The run's process is alive in this executor.
    Running,
    /// The run started, but this executor has no live process for it and no answer: it
    /// restarted while the run was in flight. Whether the command's side effects happened
    /// is unknown.
    Lost,
}

/// `POST /v1/checkpoint` and `POST /v1/restore`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CutRequest {
    /// The instance whose workspace is copied.
    pub instance: String,
    /// The cut's id.
    pub cut: String,
}

/// The files of a workspace (or of a cut), and their digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceDigest {
    /// Regular files and symbolic links.
    pub files: u64,
    /// Bytes of the regular files.
    pub bytes: u64,
    /// blake3 (hex) over the sorted relative paths and contents ([`EMPTY_DIGEST`] for none).
    pub digest: String,
}

/// The body of every refusal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A stable snake_case code.
    pub error: String,
    /// Words for a person, when there are any to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The digest of a workspace without files: blake3 of nothing.
pub const EMPTY_DIGEST: &str = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";

/// Why the executor refuses a request, with its HTTP status and stable code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 403: the peer is not on the loopback interface (checked before anything else).
    NotLoopback,
    /// 401: no bearer token, or not the executor's.
    Unauthorized,
    /// 404: no such route.
    NotFound,
    /// 405: the route exists with another method.
    MethodNotAllowed,
    /// 413: the body is over [`crate::limits::EXECUTOR_BODY_BYTES_MAX`].
    BodyTooLarge,
    /// 400: the body is not the request's JSON shape.
    BadJson(String),
    /// 400: an instance, effect, run or cut id that is not a plain name.
    BadId(&'static str),
    /// 400: an empty argv, too many or too long arguments, or a NUL byte.
    BadArgv(String),
    /// 400: a cwd that is absolute, climbs out with `..`, or is too long.
    BadCwd,
    /// 400: an environment name or value the executor does not pass.
    BadEnv(String),
    /// 400: a timeout of 0 or over [`EXEC_TIMEOUT_MS_MAX`].
    BadTimeout,
    /// 409: the run is in flight.
    Running,
    /// 409: the run started in an earlier life of this executor and has no answer.
    Lost,
    /// 409: a checkpoint or restore of the instance is in progress, or a run of it is in
    /// flight during a checkpoint or restore.
    InstanceBusy,
    /// 429: [`crate::limits::EXEC_RUNS_CONCURRENT_MAX`] runs are in flight.
    Busy,
    /// 404: the run is not known.
    UnknownRun,
    /// 404: the cut is not known.
    UnknownCut,
    /// 413: the workspace is over the copy bounds.
    WorkspaceTooLarge,
    /// 500: the executor's own storage failed.
    Storage(String),
}

/// Declares [`RefusalCode`] with each code's wire string and HTTP status, once.
macro_rules! refusal_codes {
    ($($(#[$doc:meta])* $name:ident => $code:literal, $status:literal;)+) => {
        /// The stable codes of refusals, as clients see them (`{"error": code}`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum RefusalCode {
            $($(#[$doc])* $name,)+
        }

        impl RefusalCode {
            /// Every code.
            pub const ALL: &'static [RefusalCode] = &[$(RefusalCode::$name,)+];

            /// The code as sent.
            pub fn code(self) -> &'static str {
                match self {
                    $(RefusalCode::$name => $code,)+
                }
            }

            /// The HTTP status it is sent with.
            pub fn status(self) -> u16 {
                match self {
                    $(RefusalCode::$name => $status,)+
                }
            }
        }
    };
}

refusal_codes! {
    /// The peer is not on the loopback interface.
    NotLoopback => "not_loopback", 403;
    /// No bearer token, or not the executor's.
    Unauthorized => "unauthorized", 401;
    /// No such route.
    NotFound => "not_found", 404;
    /// The route exists with another method.
    MethodNotAllowed => "method_not_allowed", 405;
    /// The body is over the bound.
    BodyTooLarge => "body_too_large", 413;
    /// The body is not the request's JSON shape.
    BadJson => "bad_json", 400;
    /// An id that is not a plain name.
    BadId => "bad_id", 400;
    /// An argv the executor does not run.
    BadArgv => "bad_argv", 400;
    /// A cwd that leaves the workspace.
    BadCwd => "bad_cwd", 400;
    /// An environment the executor does not pass.
    BadEnv => "bad_env", 400;
    /// A timeout out of bounds.
    BadTimeout => "bad_timeout", 400;
    /// The run is in flight.
    Running => "running", 409;
    /// The run started in an earlier life of the executor and has no answer.
    Lost => "lost", 409;
    /// A checkpoint or restore of the instance (or a run of it, for those) is in progress.
    InstanceBusy => "instance_busy", 409;
    /// Too many runs are in flight.
    Busy => "busy", 429;
    /// The run is not known.
    UnknownRun => "unknown_run", 404;
    /// The cut is not known.
    UnknownCut => "unknown_cut", 404;
    /// The workspace is over the copy bounds.
    WorkspaceTooLarge => "workspace_too_large", 413;
    /// The executor's own storage failed.
    Storage => "storage", 500;
}

impl RefusalCode {
    /// The code a client read (`None`: not a code of this protocol).
    pub fn parse(code: &str) -> Option<RefusalCode> {
        RefusalCode::ALL.iter().copied().find(|c| c.code() == code)
    }
}

impl Refusal {
    /// Its stable code.
    pub fn kind(&self) -> RefusalCode {
        use RefusalCode as C;
        match self {
            Refusal::NotLoopback => C::NotLoopback,
            Refusal::Unauthorized => C::Unauthorized,
            Refusal::NotFound => C::NotFound,
            Refusal::MethodNotAllowed => C::MethodNotAllowed,
            Refusal::BodyTooLarge => C::BodyTooLarge,
            Refusal::BadJson(_) => C::BadJson,
            Refusal::BadId(_) => C::BadId,
            Refusal::BadArgv(_) => C::BadArgv,
            Refusal::BadCwd => C::BadCwd,
            Refusal::BadEnv(_) => C::BadEnv,
            Refusal::BadTimeout => C::BadTimeout,
            Refusal::Running => C::Running,
            Refusal::Lost => C::Lost,
            Refusal::InstanceBusy => C::InstanceBusy,
            Refusal::Busy => C::Busy,
            Refusal::UnknownRun => C::UnknownRun,
            Refusal::UnknownCut => C::UnknownCut,
            Refusal::WorkspaceTooLarge => C::WorkspaceTooLarge,
            Refusal::Storage(_) => C::Storage,
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.kind().status()
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// The body sent back (a detail only where it helps and never echoes a secret).
    pub fn body(&self) -> ErrorBody {
        let detail = match self {
            Refusal::BadJson(d) | Refusal::BadArgv(d) | Refusal::BadEnv(d) => Some(d.clone()),
            Refusal::BadId(field) => Some(format!("`{field}` must be a plain name")),
            Refusal::BadTimeout => Some(format!(
                "timeout_ms must be between 1 and {EXEC_TIMEOUT_MS_MAX}"
            )),
            Refusal::Storage(d) => Some(d.clone()),
            _ => None,
        };
        ErrorBody {
            error: self.code().to_string(),
            detail,
        }
    }
}

/// An id that names a directory of the executor: letters, digits, `_ - .`, not starting
/// with `.`, at most [`EXECUTOR_ID_BYTES_MAX`] bytes.
pub fn check_id(field: &'static str, id: &str) -> Result<(), Refusal> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let ok = !id.is_empty()
        && id.len() <= EXECUTOR_ID_BYTES_MAX
        && !id.starts_with('.')
        && id.chars().all(plain);
    if ok {
        Ok(())
    } else {
        Err(Refusal::BadId(field))
    }
}

/// The relative directory a `cwd` names inside the workspace (empty for the workspace).
pub fn check_cwd(cwd: Option<&str>) -> Result<PathBuf, Refusal> {
    let Some(cwd) = cwd else {
        return Ok(PathBuf::new());
    };
    if cwd.len() > EXEC_CWD_BYTES_MAX || cwd.contains('\0') {
        return Err(Refusal::BadCwd);
    }
    let mut out = PathBuf::new();
    for part in Path::new(cwd).components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Refusal::BadCwd);
            }
        }
    }
    Ok(out)
}

/// Every bound and shape rule of an exec request (ids, argv, cwd, env, timeout).
pub fn check_exec(request: &ExecRequest) -> Result<PathBuf, Refusal> {
    check_id("instance", &request.instance)?;
    check_id("effect", &request.effect)?;
    check_id("run", &request.run)?;
    let argv = &request.argv;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(Refusal::BadArgv("argv names no program".into()));
    }
    if argv.len() > EXEC_ARGV_COUNT_MAX {
        let msg = format!(
            "{} arguments, the most is {EXEC_ARGV_COUNT_MAX}",
            argv.len()
        );
        return Err(Refusal::BadArgv(msg));
    }
    let bytes: usize = argv.iter().map(String::len).sum();
    if bytes > EXEC_ARGV_BYTES_MAX {
        let msg = format!("{bytes} bytes of arguments, the most is {EXEC_ARGV_BYTES_MAX}");
        return Err(Refusal::BadArgv(msg));
    }
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(Refusal::BadArgv("an argument holds a NUL byte".into()));
    }
    check_env(&request.env)?;
    let timeout = request.timeout_ms();
    if timeout == 0 || timeout > EXEC_TIMEOUT_MS_MAX {
        return Err(Refusal::BadTimeout);
    }
    check_cwd(request.cwd.as_deref())
}

/// Environment names are identifiers (`[A-Za-z_][A-Za-z0-9_]*`); values hold no NUL.
pub fn check_env(env: &BTreeMap<String, String>) -> Result<(), Refusal> {
    if env.len() > EXEC_ENV_ENTRIES_MAX {
        let msg = format!("{} entries, the most is {EXEC_ENV_ENTRIES_MAX}", env.len());
        return Err(Refusal::BadEnv(msg));
    }
    let bytes: usize = env.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > EXEC_ENV_BYTES_MAX {
        let msg = format!("{bytes} bytes, the most is {EXEC_ENV_BYTES_MAX}");
        return Err(Refusal::BadEnv(msg));
    }
    for (name, value) in env {
        if !is_env_name(name) {
            return Err(Refusal::BadEnv(format!("`{name}` is not a variable name")));
        }
        if value.contains('\0') {
            return Err(Refusal::BadEnv(format!(
                "the value of `{name}` holds a NUL"
            )));
        }
    }
    Ok(())
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ExecRequest {
        ExecRequest {
            instance: "ins_1".into(),
            effect: "x000001".into(),
            run: "r000001".into(),
            argv: vec!["true".into()],
            cwd: None,
            env: BTreeMap::new(),
            timeout_ms: None,
        }
    }

    #[test]
    fn a_cwd_stays_inside_the_workspace() {
        assert_eq!(check_cwd(None).unwrap(), PathBuf::new());
        assert_eq!(check_cwd(Some("a/./b")).unwrap(), PathBuf::from("a/b"));
        for bad in ["/etc", "../x", "a/../../b", "a/..", "a\0b"] {
            assert_eq!(check_cwd(Some(bad)), Err(Refusal::BadCwd), "{bad}");
        }
    }

    #[test]
    fn ids_are_plain_names_and_requests_are_bounded() {
        for bad in ["", ".", "..", ".hidden", "a/b", "a b", &"x".repeat(129)] {
            assert!(check_id("run", bad).is_err(), "{bad}");
        }
        assert!(check_exec(&request()).is_ok());
        let mut r = request();
        r.argv.clear();
        assert_eq!(check_exec(&r).unwrap_err().code(), "bad_argv");
        let mut r = request();
        r.timeout_ms = Some(EXEC_TIMEOUT_MS_MAX + 1);
        assert_eq!(check_exec(&r).unwrap_err().code(), "bad_timeout");
        let mut r = request();
        r.env.insert("1X".into(), "v".into());
        assert_eq!(check_exec(&r).unwrap_err().code(), "bad_env");
        let mut r = request();
        r.run = "../r".into();
        assert_eq!(check_exec(&r).unwrap_err(), Refusal::BadId("run"));
    }

    #[test]
    fn answers_keep_their_wire_shape() {
        let answer = ExecAnswer::Exited {
            exit_code: 0,
            signal: None,
            stdout: "hi\n".into(),
            stderr: String::new(),
            truncated: false,
            duration_ms: 3,
        };
        let text = serde_json::to_string(&answer).unwrap();
        assert!(
            text.starts_with(r#"{"outcome":"exited","exit_code":0"#),
            "{text}"
        );
        let record = RunRecord::Finished { answer };
        let text = serde_json::to_string(&record).unwrap();
        assert!(
            text.starts_with(r#"{"state":"finished","answer":{"outcome""#),
            "{text}"
        );
        assert_eq!(blake3::hash(b"").to_hex().as_str(), EMPTY_DIGEST);
    }
}
