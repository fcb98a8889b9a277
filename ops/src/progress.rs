//! Progress of long work (`bench`, `team dissolve` rounds; `fabric init|move|split`, one
//! long call whose size only the node knows): a bar or spinner redrawn in place when stderr
//! is a terminal, a plain line every few seconds otherwise (logs and CI stay readable).
//! Progress never goes to stdout, which carries the result (and the JSON with `--json`).

use std::future::Future;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::limits::{PROGRESS_LINE_MS, PROGRESS_POLL_MS, SPINNER_TICK_MS};

/// One piece of long work: `label`, `pos` of `total` `unit`s.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    unit: &'static str,
    total: u64,
    last_line: Option<Instant>,
}

impl Progress {
    /// Start showing progress of `total` `unit`s (silent with `--json` on a terminal too:
    /// a script reading stdout still gets plain stderr lines only when it is not a tty).
    pub(crate) fn new(label: &str, total: u64, unit: &'static str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let template = format!("{label} [{{bar:30}}] {{pos}}/{{len}} {unit} ({{elapsed}})");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Progress {
            bar,
            label: label.to_string(),
            unit,
            total,
            last_line: None,
        }
    }

    /// Now at `pos`.
    pub(crate) fn set(&mut self, pos: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(pos.min(self.total));
            return;
        }
        let due = self
            .last_line
            .is_none_or(|at| at.elapsed() >= Duration::from_millis(PROGRESS_LINE_MS));
        if due {
            eprintln!("{}: {pos} of {} {}", self.label, self.total, self.unit);
            self.last_line = Some(Instant::now());
        }
    }
}

impl Drop for Progress {
    /// Done (or abandoned): the bar leaves the screen.
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Await `work`, one call that may take a while (a fabric init of many cells), showing
/// that it is under way: a spinner with the elapsed time on a terminal, a plain
/// `label: 5s elapsed` line every few seconds otherwise.
pub(crate) async fn awaiting<F: Future>(label: &str, work: F) -> F::Output {
    awaiting_with(label, work, || std::future::ready(None)).await
}

/// [`awaiting`], also asking `detail` every [`PROGRESS_POLL_MS`] how far the work is (a
/// range move's phase and rows copied, which only the node knows) and showing its latest
/// answer beside the elapsed time. A `detail` that fails answers None and shows nothing.
pub(crate) async fn awaiting_with<F, D, Fut>(label: &str, work: F, mut detail: D) -> F::Output
where
    F: Future,
    D: FnMut() -> Fut,
    Fut: Future<Output = Option<String>>,
{
    let started = Instant::now();
    let spinner = std::io::stderr().is_terminal().then(|| {
        let spinner = ProgressBar::new_spinner();
        let template = format!("{{spinner}} {label} ({{elapsed}}) {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            spinner.set_style(style);
        }
        spinner.enable_steady_tick(Duration::from_millis(SPINNER_TICK_MS));
        spinner
    });
    let mut lines = tokio::time::interval(Duration::from_millis(PROGRESS_LINE_MS));
    lines.tick().await;
    let mut polls = tokio::time::interval(Duration::from_millis(PROGRESS_POLL_MS));
    let mut latest: Option<String> = None;
    tokio::pin!(work);
    let output = loop {
        tokio::select! {
            output = &mut work => break output,
            _ = polls.tick() => {
                if let Some(now) = detail().await {
                    if let Some(spinner) = &spinner {
                        spinner.set_message(now.clone());
                    }
                    latest = Some(now);
                }
            }
            _ = lines.tick(), if spinner.is_none() => {
                let elapsed = started.elapsed().as_secs();
                match &latest {
                    Some(now) => eprintln!("{label}: {elapsed}s elapsed, {now}"),
                    None => eprintln!("{label}: {elapsed}s elapsed"),
                }
            }
        }
    };
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    output
}
