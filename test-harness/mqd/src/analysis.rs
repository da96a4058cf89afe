//! The diagnosis `mqd` prints, and a record of which analysis gave it.
//!
//! The class analysis answers for every rank it follows; the per-rank rules answer the
//! rest until it follows every state. `MQD_CLASS_COVERAGE=FILE` appends one line per
//! diagnosis to FILE: `classes` (and `differs` where the per-rank rules disagree), or
//! `per-rank` with the states not followed, so the test suites measure what is left.

use mqd_model::{Diagnosis, JobDump};
use std::io::Write;

/// The diagnosis of `job`.
pub fn diagnose(job: &JobDump) -> Diagnosis {
    let (d, not_followed) = mqd_analysis::analysed(job);
    if let Some(path) = std::env::var_os("MQD_CLASS_COVERAGE") {
        let line = if not_followed.is_empty() {
            let same = mqd_analysis::per_rank(job) == d;
            format!("classes {}\n", if same { "same" } else { "differs" })
        } else {
            let why: Vec<String> = not_followed
                .iter()
                .map(|(ranks, why)| format!("{ranks}: {why}"))
                .collect();
            format!("per-rank {}\n", why.join("; "))
        };
        // One write per line: runs in parallel append whole lines.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        let _ = file.and_then(|mut f| f.write_all(line.as_bytes()));
    }
    d
}
