//! Rank sets (aggregation) and watch persistence, on synthetic jobs.

mod support;

use mqd_model::{Doubt, FindingKind, RankSet, Verdict};
use mqd_synthetic::{Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec};
use serde_json::Value;
use support::*;

// ------------------------------------------------------------------ aggregation

#[test]
fn a_64_rank_ring_aggregates_into_one_group() {
    let job = ssend_ring(Layout::Debugq5, 64, true);
    let groups = aggregate(&job);
    assert_eq!(groups.len(), 1, "{}", aggregate_text(&groups));
    let g = &groups[0];
    assert_eq!(g.ranks, RankSet::full(64));
    assert_eq!(
        g.summary,
        "\"ring\" send to right neighbour tag 5 count 1000; unexpected from left neighbour tag 5"
    );
    assert_eq!(
        g.lines,
        [
            "\"ring\" send to right neighbour tag 5 count 1000",
            "\"ring\" unexpected from left neighbour tag 5"
        ]
    );
    assert_eq!(
        aggregate_text(&groups),
        "ranks 0-63: \"ring\" send to right neighbour tag 5 count 1000; unexpected from left neighbour tag 5\n"
    );
    let json = aggregate_json(&groups);
    let g = &json["groups"][0];
    assert_eq!(g["ranks"], "0-63");
    assert_eq!(g["rank_list"].as_array().unwrap().len(), 64);
    assert_eq!(g["error"], Value::Null);
    let ring = &g["communicators"][0];
    assert_eq!(ring["name"], "ring");
    assert_eq!(ring["size"], 64);
    assert_eq!(
        ring["pending_sends"]["operations"][0]["peer"]["relation"],
        "right"
    );
    assert_eq!(ring["pending_sends"]["operations"][0]["tag"], 5);
    assert_eq!(ring["pending_sends"]["operations"][0]["count"], 1000);
    assert_eq!(
        ring["unexpected_messages"]["operations"][0]["peer"]["relation"],
        "left"
    );
    assert_eq!(
        ring["pending_receives"]["operations"],
        serde_json::json!([])
    );

    // And one cycle through all 64.
    let d = diagnose(&job);
    assert_eq!(kinds(&d), [FindingKind::DeadlockCycle]);
    assert!(d.findings[0].text.starts_with(
        "Possible deadlock: ranks 0 -> 1 -> 2 -> ... -> 62 -> 63 -> 0 (64 ranks) each have a send to its right neighbour on \"ring\", tag 5 pending"
    ));
    assert_eq!(d.findings[0].cycle.as_ref().unwrap().len(), 64);
    assert_eq!(d.possibly_deadlocked, RankSet::full(64));
}

#[test]
fn aggregation_splits_different_states_and_keeps_the_per_rank_view() {
    // Ranks 0-5 and 7 in the ring; rank 6 sends with another tag.
    let n = 8;
    let specs: Vec<ProcessSpec> = (0..n)
        .map(|r| {
            let mut spec = with_ring(Layout::Debugq5, n, r);
            let tag = if r == 6 { 9 } else { 5 };
            spec.sends = vec![RequestSpec::send(RING, (r + 1) % n, tag, 0x7000_0000, 1000)];
            spec
        })
        .collect();
    let job = job(&specs);
    let groups = aggregate(&job);
    let text = aggregate_text(&groups);
    assert_eq!(
        text,
        "ranks 0-5,7: \"ring\" send to right neighbour tag 5 count 1000\nrank 6: \"ring\" send to right neighbour tag 9 count 1000\n"
    );
    assert_eq!(groups[0].ranks.to_string(), "0-5,7");
    // The per-rank view is untouched.
    assert_eq!(
        serde_json::to_value(&job).unwrap()["ranks"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
}

#[test]
fn aggregation_of_failed_ranks_and_pairs() {
    let specs: Vec<ProcessSpec> = (0..3)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 3, r);
            spec.posted = vec![RequestSpec::recv(0, MPI_ANY_SOURCE, -1, 0x7000_0000, 2)];
            spec
        })
        .collect();
    let mut job = job(&specs);
    job.ranks[2].outcome = Err("gone".into());
    job.ranks[1].rank = -1;
    let groups = aggregate(&job);
    assert_eq!(
        aggregate_text(&groups),
        "rank 0 and a process of unknown rank (pid 1001): \"MPI_COMM_WORLD\" receive from any source tag any count 2\nrank 2: no message queues: gone\n"
    );
    let json = aggregate_json(&groups);
    assert_eq!(
        json["groups"][0]["unranked_pids"],
        serde_json::json!([1001])
    );
    assert_eq!(json["groups"][1]["error"], "gone");
}

#[test]
fn rank_sets_parse_and_print() {
    let a: RankSet = "0-5,7".parse().unwrap();
    assert_eq!(a.to_string(), "0-5,7");
    assert_eq!(a.len(), 7);
    let b: RankSet = [6, 7, 8].into_iter().collect();
    assert_eq!(a.union(&b).to_string(), "0-8");
    assert_eq!(a.intersection(&b).to_string(), "7");
    assert_eq!((&a - &b).iter().max(), Some(5));
    assert!("3-1".parse::<RankSet>().is_err());
}

// ------------------------------------------------------------------ watch

#[test]
fn a_deadlock_that_persists_across_samples_is_reported() {
    // Proven (every rank's stack in MPI_Ssend, its message waiting at the destination):
    // a deadlock.
    let job = blocked_ssend_ring(Layout::Ch3);
    let p = persistent_dumps(&[job.clone(), job.clone(), job]);
    assert!(p.has_deadlock(), "{}", p.to_text());
    assert_eq!(p.verdict, Verdict::Deadlock);
    assert_eq!(p.deadlocked.to_string(), "0-3");
    assert!(p.findings[0].text.starts_with(
        "Persisted over 3 samples: Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Ssend to its right neighbour"
    ));
    // Listed sends: possible, however long it lasts.
    let job = ssend_ring(Layout::Debugq5, 4, true);
    let p = persistent_dumps(&[job.clone(), job.clone(), job]);
    assert!(!p.has_deadlock());
    assert_eq!(p.verdict, Verdict::Undetermined);
    assert_eq!(p.samples, 3);
    assert_eq!(p.waits.len(), 4);
    assert_eq!(p.possibly_deadlocked.to_string(), "0-3");
    assert!(p.dissolved.is_empty() && p.new.is_empty());
    assert!(p.findings[0].text.starts_with(
        "Persisted over 3 samples: Possible deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each have a send to its right neighbour"
    ));
    let json = p.to_json();
    assert_eq!(json["deadlock"], false);
    assert_eq!(json["verdict"], "undetermined");
    assert_eq!(json["findings"][0]["kind"], "deadlock_cycle");
    assert!(
        p.to_text()
            .starts_with("Across the 3 samples, 4 waits were in every one.\n")
    );
}

#[test]
fn a_knot_that_persists_is_a_deadlock() {
    let knot = knot_job();
    let p = persistent_dumps(&[knot.clone(), knot]);
    assert_eq!(p.possibly_deadlocked.to_string(), "0-2", "{}", p.to_text());
    assert_eq!(p.findings[0].kind, FindingKind::DeadlockKnot);
    assert!(p.dissolved.is_empty(), "{}", p.to_text());
    // Followed by a sample where rank 0 got its message: the knot dissolves.
    let specs: Vec<ProcessSpec> = (0..3)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 3, r);
            if r > 0 {
                spec.posted = vec![RequestSpec::recv(0, 0, 2, 0x7000_0000, 1)];
            }
            spec
        })
        .collect();
    let p = persistent_dumps(&[knot_job(), job(&specs)]);
    assert!(!p.has_deadlock(), "{}", p.to_text());
    assert_eq!(p.waits.len(), 2);
    // Without stacks nothing is said of what the queues do not show.
    assert_eq!(
        p.findings[0].text,
        "2 waits lasted through all 2 samples, but no cycle or knot of ranks waiting for each other."
    );
    assert_eq!(p.dissolved[0].kind, FindingKind::DeadlockKnot);
}

#[test]
fn a_cycle_that_dissolves_is_traffic() {
    // Sample 1: ranks 0 and 1 receive from each other (tag 1); sample 2: done; sample 3:
    // the same ranks wait for each other again, with tag 2.
    let exchange = |tag: Option<i32>| {
        let specs: Vec<ProcessSpec> = (0..2)
            .map(|r| {
                let mut spec = base(Layout::Debugq5, 2, r);
                if let Some(tag) = tag {
                    spec.posted = vec![RequestSpec::recv(0, 1 - r, tag, 0x7000_0000, 1)];
                }
                spec
            })
            .collect();
        let mut job = job(&specs);
        // Blocked in MPI_Recv on each other, or computing once done.
        match tag {
            Some(tag) => blocked_in(
                &mut job,
                "MPI_Recv",
                "MPI_COMM_WORLD",
                |r| Some(i64::from(1 - r)),
                Some(i64::from(tag)),
            ),
            None => computing(&mut job, &[0, 1]),
        }
        job
    };
    let samples = [exchange(Some(1)), exchange(None), exchange(Some(2))];
    let d: Vec<Rendered> = samples.iter().map(diagnose).collect();
    let possible = |d: &Rendered| !d.possibly_deadlocked.is_empty();
    assert!(possible(&d[0]) && !possible(&d[1]) && possible(&d[2]));
    let p = persistent(&d);
    // The tag-2 cycle of the last sample is too recent to call traffic or deadlock.
    assert_eq!(p.verdict, Verdict::Undetermined, "{}", p.to_text());
    assert!(p.waits.is_empty());
    assert_eq!(p.findings[0].text, "No wait lasted through all 3 samples.");
    assert_eq!(p.new.len(), 1, "{}", p.to_text());
    assert!(
        p.new[0]
            .text
            .starts_with("sample 3: Possible deadlock: ranks 0 -> 1 -> 0"),
        "{}",
        p.to_text()
    );
    assert!(
        p.doubts
            .iter()
            .any(|d| matches!(d, Doubt::Recent { ranks } if ranks.to_string() == "0,1")),
        "{:?}",
        p.doubts
    );
    assert!(
        p.new[0]
            .text
            .contains("each blocked in MPI_Recv from the other rank"),
        "{}",
        p.to_text()
    );
    assert_eq!(p.to_json()["new"][0]["kind"], "deadlock_cycle");
    // A job that completes between samples: the cycle dissolved, no deadlock.
    let p = persistent(&d[..2]);
    assert_eq!(p.verdict, Verdict::NoDeadlock, "{}", p.to_text());
    assert_eq!(p.dissolved.len(), 1, "{}", p.to_text());
    assert!(
        p.dissolved[0]
            .text
            .starts_with("sample 1: Possible deadlock: ranks 0 -> 1 -> 0")
    );
    assert_eq!(p.to_json()["dissolved"][0]["kind"], "deadlock_cycle");
    // A different cycle each time (tags 1 then 2): nothing persisted, the last is new.
    let p = persistent(&[d[0].clone(), d[2].clone()]);
    assert_eq!(p.verdict, Verdict::Undetermined);
    assert_eq!(p.new.len(), 1, "{}", p.to_text());
}

#[test]
fn a_watch_that_lost_a_rank_is_undetermined() {
    // Rank 1 could not be dumped in the second sample (killed, or traced by another
    // debugger): nothing is said of it, so "no deadlock" cannot be either.
    let quiet = || {
        let mut job = job(&[base(Layout::Debugq5, 2, 0), base(Layout::Debugq5, 2, 1)]);
        computing(&mut job, &[0, 1]);
        job
    };
    let mut lost = quiet();
    lost.ranks[1].outcome = Err("no such process".into());
    lost.ranks[1].threads.clear();
    let d: Vec<Rendered> = [quiet(), lost, quiet()].iter().map(diagnose).collect();
    let p = persistent(&d);
    assert_eq!(p.verdict, Verdict::Undetermined, "{}", p.to_text());
    assert!(
        p.doubts
            .iter()
            .any(|d| matches!(d, Doubt::Failed { ranks } if ranks.to_string() == "1")),
        "{:?}",
        p.doubts
    );
    // Every sample whole: no deadlock.
    let d: Vec<Rendered> = [quiet(), quiet()].iter().map(diagnose).collect();
    assert_eq!(persistent(&d).verdict, Verdict::NoDeadlock);
}

#[test]
fn waits_persist_only_on_the_same_requests() {
    // Ranks 0 and 1 receive from each other; in the second sample rank 0's receive is
    // another request (completed and posted again): that wait did not persist.
    let specs: Vec<ProcessSpec> = (0..2)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 2, r);
            spec.posted = vec![RequestSpec::recv(0, 1 - r, 1, 0x7000_0000, 1)];
            spec
        })
        .collect();
    let first = job(&specs);
    let same = persistent_dumps(&[first.clone(), first.clone()]);
    assert_eq!(same.waits.len(), 2, "{}", same.to_text());
    let mut reposted = first.clone();
    if let Ok(comms) = &mut reposted.ranks[0].outcome {
        for c in comms {
            if let mqd_model::Queue::Operations(ops) = &mut c.pending_receives {
                for op in ops {
                    op.request = op.request.map(|r| r + 0x1000);
                }
            }
        }
    }
    let p = persistent_dumps(&[first, reposted]);
    assert_eq!(p.waits.len(), 1, "{}", p.to_text());
    assert_eq!(p.waits[0].from, 1);
    // The cycle is back in the last sample only: too recent to judge.
    assert_eq!(p.verdict, Verdict::Undetermined);
    assert_eq!(p.new.len(), 1, "{}", p.to_text());
}
