//! Progress of long work (`bench`, `team dissolve` rounds; `fabric init|move|split`, one
//! long call whose size only the node knows): a bar or spinner redrawn in place when stderr
//! is a terminal, a plain line every few seconds otherwise (logs and CI stay readable).
//! Progress never goes to stdout, which carries the result (and the JSON with `--json`).

use std::future::Future;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::limits::{PROGRESS_LINE_MS, SPINNER_TICK_MS};

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

/// Await `work`, one call that may take a while (a fabric init of many cells, a range
/// move copying its rows), showing that it is under way: a spinner with the elapsed time on
/// a terminal, a plain `label: 5s elapsed` line every few seconds otherwise.
pub(crate) async fn awaiting<F: Future>(label: &str, work: F) -> F::Output {
    let started = Instant::now();
    let spinner = std::io::stderr().is_terminal().then(|| {
        let spinner = ProgressBar::new_spinner();
        if let Ok(style) =
            ProgressStyle::with_template(&format!("{{spinner}} {label} ({{elapsed}})"))
        {
            spinner.set_style(style);
        }
        spinner.enable_steady_tick(Duration::from_millis(SPINNER_TICK_MS));
        spinner
    });
    let mut lines = tokio::time::interval(Duration::from_millis(PROGRESS_LINE_MS));
    lines.tick().await;
    tokio::pin!(work);
    let output = loop {
        tokio::select! {
            output = &mut work => break output,
            _ = lines.tick(), if spinner.is_none() => {
                eprintln!("{label}: {}s elapsed", started.elapsed().as_secs());
            }
        }
    };
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    output
}
