//! A progress line on stderr while attaching to a large job, only on a terminal.

use mqd_job::dump::AttachProgress;
use std::io::IsTerminal;

/// Draws `mqd: attaching [#####     ] 12/64` for jobs of [`ProgressLine::MIN_RANKS`] or
/// more processes when stderr is a terminal.
#[derive(Debug, Clone, Copy)]
pub struct ProgressLine {
    shown: bool,
}

impl ProgressLine {
    /// Jobs smaller than this attach too fast for a progress line to help.
    pub const MIN_RANKS: usize = 16;

    /// A progress line for a job of `total` processes.
    pub fn new(total: usize) -> ProgressLine {
        ProgressLine {
            shown: total >= Self::MIN_RANKS && std::io::stderr().is_terminal(),
        }
    }
}

impl AttachProgress for ProgressLine {
    fn attached(&self, done: usize, total: usize) {
        if self.shown {
            let width = 30;
            let filled = done * width / total.max(1);
            eprint!(
                "\rmqd: attaching [{}{}] {done}/{total}",
                "#".repeat(filled),
                " ".repeat(width - filled)
            );
        }
    }

    fn finished(&self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}
