//! How far a run is, on stderr while the workload and faults run: a bar of elapsed time
//! against `--duration` with the operations completed so far when stderr is a terminal, a
//! plain `whip chaos: 20s of 60s, 1234 operations` line every few seconds otherwise. stdout
//! carries only the verdict (the table, or JSON with `--json`).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::history::Recorder;

/// How often the bar redraws.
const REDRAW_MS: u64 = 500;
/// How often a plain line is printed when stderr is not a terminal.
const LINE_MS: u64 = 5_000;

/// Show progress until the run's `duration` from `start` is over, then clear the bar.
pub async fn show(recorder: Recorder, start: Instant, duration: Duration) {
    let total_s = duration.as_secs().max(1);
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total_s);
        let template = "whip chaos [{bar:30}] {pos}/{len} s, {msg} operations";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let every = Duration::from_millis(if bar.is_some() { REDRAW_MS } else { LINE_MS });
    loop {
        let left = duration.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(every.min(left)).await;
        let (elapsed, done) = (start.elapsed().as_secs().min(total_s), recorder.completed());
        match &bar {
            Some(bar) => {
                bar.set_position(elapsed);
                bar.set_message(done.to_string());
            }
            None => eprintln!("whip chaos: {elapsed}s of {total_s}s, {done} operations"),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}
