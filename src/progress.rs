//! Progress reporting: an indicatif bar on a terminal, plain lines otherwise (CI logs, pipes).
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub enum Progress {
    Bar(ProgressBar),
    Lines,
}

impl Progress {
    pub fn new() -> Self {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed}] {bar:30} {pos}/{len} {msg}")
                    .expect("valid template"),
            );
            Progress::Bar(bar)
        } else {
            Progress::Lines
        }
    }

    pub fn set_total(&self, n: u64) {
        if let Progress::Bar(b) = self {
            b.set_length(n);
        }
    }

    /// One unit of work done.
    pub fn step(&self, msg: &str) {
        match self {
            Progress::Bar(b) => {
                b.set_message(msg.to_string());
                b.inc(1);
            }
            Progress::Lines => eprintln!("{msg}"),
        }
    }

    /// `n` units of work done at once (a line per call without a terminal, not one per unit).
    pub fn advance(&self, n: u64, msg: &str) {
        match self {
            Progress::Bar(b) => {
                b.set_message(msg.to_string());
                b.inc(n);
            }
            Progress::Lines => eprintln!("{msg}"),
        }
    }

    /// A message that is not a unit of work.
    pub fn note(&self, msg: &str) {
        match self {
            Progress::Bar(b) => b.suspend(|| eprintln!("{msg}")),
            Progress::Lines => eprintln!("{msg}"),
        }
    }

    pub fn finish(&self) {
        if let Progress::Bar(b) = self {
            b.finish_and_clear();
        }
    }
}
