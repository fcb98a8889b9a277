//! Diagnostics on stderr: `WHIP_LOG` (an `EnvFilter`, default `warn,openraft=error`), in
//! colour only when stderr is a terminal, so a log file or a pipe gets plain text.
//!
//! A stop signal (SIGINT, SIGTERM) silences openraft at once: while a process's Raft
//! members stop, openraft reports requests cut short and peers that no longer answer as
//! errors, which they are not when the stop was asked for. A `WHIP_LOG` the user set is
//! left as it is.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The filter when `WHIP_LOG` is not set.
const DEFAULT_FILTER: &str = "warn,openraft=error";
/// The default filter once an orderly stop began.
const STOPPING_FILTER: &str = "warn,openraft=off";

/// The default filter's handle (`None` when `WHIP_LOG` chose the filter).
static DEFAULT: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Install the process's subscriber (once, before any work).
pub(crate) fn init() {
    let chosen = EnvFilter::try_from_env("WHIP_LOG").ok();
    let user_chose = chosen.is_some();
    let (filter, handle) =
        reload::Layer::new(chosen.unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER)));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .init();
    if !user_chose {
        let _ = DEFAULT.set(handle);
    }
}

/// A stop was asked for: from now on openraft's reports are left out (see the module).
pub(crate) fn stopping() {
    if let Some(handle) = DEFAULT.get() {
        let _ = handle.reload(EnvFilter::new(STOPPING_FILTER));
    }
}
