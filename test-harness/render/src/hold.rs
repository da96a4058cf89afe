//! The words of a hold: what it proved and what that rests on, what dissolved, and why
//! ranks it watched prove nothing (they worked, or could not be watched).

use super::phrases::describe;
use mqd_model::RankSet;
use mqd_model::hold::{Busy, Moved};

/// "2.0 s".
pub fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// "512 kB", "3.1 MB", "4.2 GB" (decimal units).
pub fn amount(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{bytes} bytes")
    }
}

fn plural(ranks: &RankSet) -> bool {
    ranks.len() != 1
}

/// The proof of a hold, as a finding says it.
pub fn held_text(ranks: &RankSet, window_ms: u64, touched_kb: Option<u64>, queues: bool) -> String {
    let (their, they) = if plural(ranks) {
        ("their", "they")
    } else {
        ("its", "it")
    };
    let queue = if queues {
        format!(", {their} message queues did not change")
    } else {
        String::new()
    };
    let touched = touched_kb.map_or_else(String::new, |kb| {
        format!(
            " (at most {} of memory touched{})",
            amount(kb * 1024),
            if plural(ranks) { " each" } else { "" }
        )
    });
    format!(
        "Proven by holding the job for {}: {} stayed inside these very calls ({their} return addresses, counted by hardware breakpoints, never ran){queue}, and moved no data{touched}. What {they} wait for can only come from ranks held with {}, and a message already on its way would have arrived while {they} drove MPI's progress engine: {they} can never move again.",
        seconds(window_ms),
        describe(ranks),
        if plural(ranks) { "them" } else { "it" },
    )
}

/// Blocked ranks that wait only for each other, some waits unknown.
pub fn closed_text(
    ranks: &RankSet,
    calls: &[(String, RankSet)],
    at: &[Option<String>],
    unknown: &[(RankSet, String)],
    finalized: &RankSet,
) -> String {
    let line = |i: usize| {
        at.get(i)
            .and_then(Option::as_ref)
            .map_or_else(String::new, |l| format!(" ({l})"))
    };
    let places: Vec<String> = match calls {
        [(call, _)] => vec![format!("{call}{}", line(0))],
        _ => calls
            .iter()
            .enumerate()
            .map(|(i, (call, set))| format!("{} in {call}{}", describe(set), line(i)))
            .collect(),
    };
    let place = match calls {
        [_] => format!("in {}", places[0]),
        _ => format!("in MPI ({})", places.join("; ")),
    };
    let mut text = format!(
        "Deadlock: {} {} blocked {place}, and every rank {} may wait for is held in this deadlock too{}: none can proceed.",
        describe(ranks),
        if plural(ranks) { "are all" } else { "is" },
        if plural(ranks) { "they" } else { "it" },
        if finalized.is_empty() {
            String::new()
        } else {
            format!(" or past MPI_Finalize ({})", describe(finalized))
        },
    );
    if !unknown.is_empty() {
        // The same reason at each rank's own addresses is one reason.
        let mut merged: Vec<(RankSet, String)> = Vec::new();
        for (set, what) in unknown {
            let what = super::stacks::without_addresses(what);
            match merged.iter_mut().find(|(_, w)| *w == what) {
                Some((all, _)) => all.union_with(set),
                None => merged.push((set.clone(), what)),
            }
        }
        let parts: Vec<String> = merged
            .iter()
            .map(|(set, what)| format!("{}: {what}", describe(set)))
            .collect();
        text.push_str(&format!(
            " Whom they wait for is not all known, and need not be (any rank of the job is held): {}.",
            parts.join("; ")
        ));
    }
    text
}

/// How ranks moved, as a clause: "returned from their calls".
fn moved_words(how: &Moved, several: bool) -> &'static str {
    match (how, several) {
        (Moved::Returned, true) => "returned from their calls",
        (Moved::Returned, false) => "returned from its call",
        (Moved::OtherCall, true) => "were in other calls at its end",
        (Moved::OtherCall, false) => "was in another call at its end",
        (Moved::Threads, true) => "started or ended threads",
        (Moved::Threads, false) => "started or ended threads",
        (Moved::Outside, true) => "ran outside MPI",
        (Moved::Outside, false) => "ran outside MPI",
    }
}

/// Ranks of possible deadlocks that moved during the hold.
pub fn dissolved_text(ranks: &RankSet, moved: &[(RankSet, Moved)], window_ms: u64) -> String {
    let parts: Vec<String> = moved
        .iter()
        .map(|(set, how)| format!("{} {}", describe(set), moved_words(how, plural(set))))
        .collect();
    format!(
        "Traffic, not a deadlock: during a {} hold {}; a deadlocked rank never moves again, so {} {} not deadlocked when the snapshot was taken.",
        seconds(window_ms),
        parts.join(", "),
        describe(ranks),
        if plural(ranks) { "were" } else { "was" }
    )
}

/// What a busy rank did, as a clause.
pub fn busy_words(busy: &Busy) -> String {
    match busy {
        Busy::Memory { kb } => format!(
            "touched {} of memory: a large message, a reduction or I/O in progress",
            amount(kb * 1024)
        ),
        Busy::Io { bytes } => format!(
            "read or wrote {} through the kernel: a transfer or I/O in progress",
            amount(*bytes)
        ),
        Busy::File(io) => match (&io.syscall, &io.file) {
            (Some(call), Some(file)) => {
                format!("thread {} was in {call} on {file}: I/O in progress", io.tid)
            }
            (Some(call), None) => format!("thread {} was in {call}: I/O in progress", io.tid),
            (None, _) => format!(
                "thread {} was waiting for a device (uninterruptible sleep): I/O in progress",
                io.tid
            ),
        },
        Busy::Rdma { bytes } => format!(
            "its host's RDMA ports moved {}: a transfer may be in progress",
            amount(*bytes)
        ),
        Busy::Queues => "its message queues changed".into(),
        Busy::Changed(Moved::OtherCall) => {
            "a thread's call read differently at the window's end".into()
        }
        Busy::Changed(Moved::Threads) => "its threads came or went".into(),
        Busy::Changed(_) => "a thread outside MPI ran".into(),
        Busy::Stopped => {
            "it was stopped by a signal (SIGSTOP, job control): MPI is not what holds it".into()
        }
        Busy::Starved(s) => format!(
            "thread {} waited {} for a CPU and ran {}: the host is overloaded, and a rank that cannot run proves nothing by staying",
            s.tid,
            seconds(s.waited_ms),
            seconds(s.ran_ms)
        ),
        Busy::Throttled { ms } => format!(
            "its cgroup's CPU quota kept it from running for {}: a message between throttled ranks can crawl",
            seconds(*ms)
        ),
        Busy::Polling { call } => {
            format!("it kept polling in {call}, whose returns prove no progress")
        }
        Busy::Unmeasured => "what it did could not be measured".into(),
    }
}

/// A doubt: ranks that stayed but worked.
pub fn busy_text(ranks: &RankSet, busy: &Busy, window_ms: u64) -> String {
    if *busy == Busy::Stopped {
        return format!(
            "{} {} stopped by a signal during the {} hold (SIGSTOP, job control): MPI is not what holds {}, and no deadlock is proven of a stopped rank",
            describe(ranks),
            if plural(ranks) { "were" } else { "was" },
            seconds(window_ms),
            if plural(ranks) { "them" } else { "it" },
        );
    }
    let held_back = match busy {
        Busy::Throttled { .. } => Some((
            "could not run freely",
            "held back by its CPU quota (hold longer, or raise the job's quota)",
        )),
        Busy::Starved(_) => Some((
            "could hardly run",
            "that could not run (hold again when the host is less loaded, or hold longer)",
        )),
        _ => None,
    };
    if let Some((could, rank_that)) = held_back {
        return format!(
            "{} {could} during the {} hold ({}{}): no deadlock is proven of a rank {rank_that}",
            describe(ranks),
            seconds(window_ms),
            if plural(ranks) { "the first: " } else { "" },
            busy_words(busy)
        );
    }
    format!(
        "{} stayed in {} calls during the {} hold but worked ({}{}): no deadlock is proven while work goes on (a longer --hold tells whether it ends)",
        describe(ranks),
        if plural(ranks) { "their" } else { "its" },
        seconds(window_ms),
        if plural(ranks) { "the first " } else { "" },
        busy_words(busy)
    )
}

/// A doubt: ranks that could not be held.
pub fn unheld_text(ranks: &RankSet, why: &str) -> String {
    format!(
        "{} could not be held ({why}): no deadlock of {} can be proven by holding",
        describe(ranks),
        if plural(ranks) { "theirs" } else { "its" }
    )
}

/// What the proof of a hold rests on, for the verdict line.
pub fn basis(window_ms: u64, queues: bool) -> String {
    let queue = if queues { ", no queue changed" } else { "" };
    format!(
        "held for {}: none returned from its call{queue}, none moved data",
        seconds(window_ms)
    )
}
