//! Aggregation by rank sets, deadlock and mismatch diagnosis, watch persistence and DOT
//! pictures: on jobs of synthetic MPICH processes displayed through the real library (fast),
//! and on real fixture jobs dumped with ptrace.

mod common;

use mqd_harness::analysis::{
    self, Diagnosis, FindingKind, WaitKind, WaitTarget, aggregate, aggregate_json, aggregate_text,
    diagnose, persistent, persistent_dumps,
};
use mqd_harness::dump::{JobContext, ProcessRef, dump_processes};
use mqd_harness::fixtures::{self, JobOptions, spawn_job, spawn_rank};
use mqd_harness::graph::{self, Collapse, DotOptions};
use mqd_harness::ranks::RankSet;
use mqd_harness::report::{JobDump, RankDump};
use mqd_harness::synthetic::{
    Arch, CommSpec, Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec, SyntheticTarget,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

// ------------------------------------------------------------------ synthetic jobs

/// Context id of the "ring" duplicate of COMM_WORLD.
const RING: i32 = 48;

/// A process of an `n`-rank job at world rank `r`: COMM_SELF and COMM_WORLD, no queues.
fn base(layout: Layout, n: i32, r: i32) -> ProcessSpec {
    let mut spec = ProcessSpec::new(layout, Arch::LP64_LE);
    spec.sequence_number = 2;
    spec.comms = vec![CommSpec::self_comm(r), CommSpec::world(n, r)];
    spec
}

/// [`base`] plus the "ring" duplicate of COMM_WORLD.
fn with_ring(layout: Layout, n: i32, r: i32) -> ProcessSpec {
    let mut spec = base(layout, n, r);
    spec.sequence_number = 3;
    spec.comms
        .insert(0, CommSpec::intra(2, "ring", RING, r, (0..n).collect()));
    spec
}

/// Displays every process through the library, as a job (rank i = `specs[i]`).
fn job(specs: &[ProcessSpec]) -> JobDump {
    let mut dbg = common::debugger();
    let ranks = specs
        .iter()
        .enumerate()
        .map(|(r, spec)| {
            let p = dbg
                .add_process(Box::new(SyntheticTarget::build(spec)), r as i32)
                .unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let display = dbg.display(p).unwrap_or_else(|e| panic!("rank {r}: {e}"));
            RankDump {
                rank: r as i32,
                pid: Some(1000 + r as i32),
                host: Some("synthetic".into()),
                executable: None,
                message: None,
                outcome: Ok(display),
            }
        })
        .collect();
    let lib = common::library();
    JobDump {
        dll: lib.path().display().to_string(),
        dll_version: lib.version_string().to_owned(),
        acquired_by: "synthetic".into(),
        starter_pid: None,
        abort_message: None,
        ranks,
    }
}

/// An `n`-rank ring blocked in `MPI_Ssend` to the right neighbour on "ring", tag 5: each
/// send pending (listed when `listed`), each message waiting unexpected at the destination
/// (eager when `listed`, a rendezvous announcement otherwise: what ch3 shows of a blocking
/// MPI_Ssend, which it does not list).
fn ssend_ring(layout: Layout, n: i32, listed: bool) -> JobDump {
    let specs: Vec<ProcessSpec> = (0..n)
        .map(|r| {
            let (left, right) = ((r + n - 1) % n, (r + 1) % n);
            let mut spec = with_ring(layout, n, r);
            if listed {
                spec.sends = vec![RequestSpec::send(RING, right, 5, 0x7000_0000, 1000)];
                spec.unexpected =
                    vec![RequestSpec::unexpected(RING, left, 5, 0).completed(left, 5).synchronous()];
            } else {
                spec.unexpected = vec![RequestSpec::unexpected(RING, left, 5, 0).synchronous()];
            }
            spec
        })
        .collect();
    job(&specs)
}

fn kinds(d: &Diagnosis) -> Vec<FindingKind> {
    d.findings.iter().map(|f| f.kind).collect()
}

fn json_kinds(d: &Diagnosis) -> Vec<String> {
    d.to_json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn only(d: &Diagnosis, kind: FindingKind) -> &analysis::Finding {
    let found: Vec<_> = d.of_kind(kind).collect();
    assert_eq!(found.len(), 1, "one {kind:?} in\n{}", d.to_text());
    found[0]
}

/// The JSON finding of `kind` (the first).
fn json_finding(d: &Diagnosis, kind: &str) -> Value {
    d.to_json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:#}", d.to_json()))
        .clone()
}

// ------------------------------------------------------------------ diagnosis: synthetic

#[test]
fn ssend_ring_is_a_deadlock_cycle() {
    for layout in Layout::ALL {
        let job = ssend_ring(layout, 4, true);
        let d = diagnose(&job);
        let text = d.to_text();
        assert_eq!(
            kinds(&d),
            [FindingKind::DeadlockCycle],
            "{layout:?}:\n{text}"
        );
        let f = &d.findings[0];
        assert_eq!(
            f.text,
            "Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in a send to its right neighbour on \"ring\", tag 5; no receive is posted on any of them."
        );
        assert_eq!(f.cycle.as_deref(), Some(&[0, 1, 2, 3][..]));
        assert_eq!(f.edges, [(0, 1), (1, 2), (2, 3), (3, 0)]);
        assert_eq!(f.ranks.to_string(), "0-3");
        for r in 0..4 {
            let right = (r + 1) % 4;
            let send = format!(
                "rank {r} is blocked in a send to rank {right} on \"ring\", tag 5, count 1000"
            );
            let copy = format!(
                "rank {right} holds an unexpected message from rank {r} on \"ring\", tag 5 [unexpected message: no receive posted yet"
            );
            assert!(
                f.evidence.iter().any(|e| e.starts_with(&send)),
                "{layout:?}: {send}\n{text}"
            );
            assert!(
                f.evidence.iter().any(|e| e.starts_with(&copy)),
                "{layout:?}: {copy}\n{text}"
            );
            // The library's notes (the request address) come along as proof.
            assert!(
                f.evidence.iter().all(|e| e.contains("request 0x")),
                "{text}"
            );
        }
        // A send and its unexpected copy are one wait.
        assert_eq!(d.waits.len(), 4);
        assert!(
            d.waits
                .iter()
                .all(|w| w.kind == WaitKind::Send && w.tag == Some(5))
        );
        assert_eq!(d.deadlocked.to_string(), "0-3");
        // The verdict keeps the demo's wording.
        let verdict = analysis::verdict(&job);
        assert!(verdict.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"));
        assert!(verdict.contains("rank 3 is blocked in a send to rank 0 on \"ring\", tag 5"));

        let json = d.to_json();
        assert_eq!(json["deadlock"], true);
        assert_eq!(json["deadlocked"], "0-3");
        assert_eq!(json_kinds(&d), ["deadlock_cycle"]);
        let f = &json["findings"][0];
        assert_eq!(f["cycle"], serde_json::json!([0, 1, 2, 3]));
        assert_eq!(f["ranks"], "0-3");
        assert_eq!(f["evidence"].as_array().unwrap().len(), 8);
        assert_eq!(json["waits"][0]["relation"], "right");
        assert_eq!(json["waits"][0]["communicator"]["name"], "ring");
    }
}

#[test]
fn unlisted_blocking_ssend_ring_is_seen_through_its_messages() {
    // ch3 lists no blocking sends: only the rendezvous announcements at the destinations.
    let d = diagnose(&ssend_ring(Layout::Ch3, 4, false));
    assert_eq!(kinds(&d), [FindingKind::DeadlockCycle], "{}", d.to_text());
    let f = &d.findings[0];
    assert!(
        f.text.starts_with("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in a send to its right neighbour on \"ring\", tag 5 (seen as their messages waiting unexpected at the destinations); no receive is posted on any of them."),
        "{}",
        f.text
    );
    assert!(
        f.text
            .contains("Ranks 0-3 have no pending operation of their own"),
        "{}",
        f.text
    );
    assert!(f.evidence[0].starts_with("rank 1 holds an unexpected message from rank 0 on \"ring\", tag 5 [unexpected message: no receive posted yet"), "{:?}", f.evidence);
    assert!(d.waits.iter().all(|w| w.kind == WaitKind::Unexpected));
    assert_eq!(json_kinds(&d), ["deadlock_cycle"]);
}

#[test]
fn head_to_head_receives_deadlock() {
    let specs: Vec<ProcessSpec> = (0..2)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 2, r);
            spec.posted = vec![RequestSpec::recv(0, 1 - r, 0, 0x7000_0000, 1)];
            spec
        })
        .collect();
    let d = diagnose(&job(&specs));
    assert_eq!(kinds(&d), [FindingKind::DeadlockCycle], "{}", d.to_text());
    let f = &d.findings[0];
    assert_eq!(
        f.text,
        "Deadlock: ranks 0 -> 1 -> 0 each blocked in a receive from the other rank on \"MPI_COMM_WORLD\", tag 0; none of them has a send pending."
    );
    assert!(f.evidence[0].starts_with(
        "rank 0 is blocked in a receive from rank 1 on \"MPI_COMM_WORLD\", tag 0, count 1"
    ));
    assert!(f.evidence[1].starts_with("rank 1 is blocked in a receive from rank 0"));
    let json = d.to_json();
    assert_eq!(json["findings"][0]["kind"], "deadlock_cycle");
    assert_eq!(
        json["findings"][0]["edges"],
        serde_json::json!([[0, 1], [1, 0]])
    );
    assert_eq!(json["waits"][0]["kind"], "receive");
    assert_eq!(json["waits"][0]["relation"], "other");
}

/// Rank 0 computes; rank 1 sends to rank 2 (tag 5); rank 2 waits for `recv_tag` from
/// `recv_source`.
fn mismatch_job(recv_source: i32, recv_tag: i32) -> JobDump {
    let mut specs: Vec<ProcessSpec> = (0..3).map(|r| base(Layout::Debugq5, 3, r)).collect();
    specs[1].sends = vec![RequestSpec::send(0, 2, 5, 0x7000_0000, 1)];
    specs[2].posted = vec![RequestSpec::recv(0, recv_source, recv_tag, 0x7000_1000, 1)];
    specs[2].unexpected = vec![RequestSpec::unexpected(0, 1, 5, 0).completed(1, 5)];
    job(&specs)
}

#[test]
fn tag_mismatch() {
    let d = diagnose(&mismatch_job(1, 6));
    let text = d.to_text();
    let f = only(&d, FindingKind::TagMismatch);
    assert_eq!(
        f.text,
        "Tag mismatch: rank 2 waits for tag 6 from rank 1 on \"MPI_COMM_WORLD\"; rank 1's message with tag 5 waits unexpected at rank 2"
    );
    assert_eq!(f.ranks.to_string(), "2");
    assert!(
        f.evidence[0]
            .starts_with("rank 2 is blocked in a receive from rank 1 on \"MPI_COMM_WORLD\", tag 6")
    );
    assert!(f.evidence.iter().any(|e| {
        e.starts_with("rank 1 is blocked in a send to rank 2 on \"MPI_COMM_WORLD\", tag 5")
    }));
    assert!(f.evidence.iter().any(|e| e.starts_with(
        "rank 2 holds an unexpected message from rank 1 on \"MPI_COMM_WORLD\", tag 5"
    )));
    // Rank 1 waits in its send for rank 2, which waits for rank 1: a deadlock too.
    let cycle = only(&d, FindingKind::DeadlockCycle);
    assert_eq!(
        cycle.text,
        "Deadlock: ranks 1 -> 2 -> 1 wait for each other: rank 1 waits for rank 2 (a send on \"MPI_COMM_WORLD\", tag 5), rank 2 waits for rank 1 (a receive on \"MPI_COMM_WORLD\", tag 6).",
        "{text}"
    );
    assert_eq!(
        kinds(&d),
        [FindingKind::DeadlockCycle, FindingKind::TagMismatch],
        "{text}"
    );
    assert_eq!(json_kinds(&d), ["deadlock_cycle", "tag_mismatch"]);
    assert_eq!(
        json_finding(&d, "tag_mismatch")["rank_list"],
        serde_json::json!([2])
    );
}

#[test]
fn source_mismatch() {
    let d = diagnose(&mismatch_job(0, 5));
    let text = d.to_text();
    let f = only(&d, FindingKind::SourceMismatch);
    assert_eq!(
        f.text,
        "Source mismatch: rank 2 waits for tag 5 from rank 0 on \"MPI_COMM_WORLD\"; rank 1's message with tag 5 waits unexpected at rank 2"
    );
    // Rank 0, which rank 2 waits for, does nothing: no deadlock, but an idle rank.
    let idle = only(&d, FindingKind::IdleTarget);
    assert_eq!(
        idle.text,
        "rank 0 has no pending point-to-point communication, yet rank 2 waits for it: it is busy computing, or blocked outside point-to-point (a collective, I/O, a lock)."
    );
    assert!(!d.has_deadlock(), "{text}");
    assert_eq!(
        kinds(&d),
        [
            FindingKind::SourceMismatch,
            FindingKind::IdleTarget,
            FindingKind::NoDeadlock
        ],
        "{text}"
    );
    assert_eq!(
        json_kinds(&d),
        ["source_mismatch", "idle_target", "no_deadlock"]
    );
    assert_eq!(d.to_json()["deadlock"], false);
}

#[test]
fn communicator_mismatch() {
    // Rank 1's message is on COMM_WORLD; rank 2 waits for it on "ring".
    let mut specs: Vec<ProcessSpec> = (0..3).map(|r| with_ring(Layout::Debugq5, 3, r)).collect();
    specs[2].posted = vec![RequestSpec::recv(RING, 1, 5, 0x7000_1000, 1)];
    specs[2].unexpected = vec![RequestSpec::unexpected(0, 1, 5, 0)];
    let d = diagnose(&job(&specs));
    let f = only(&d, FindingKind::CommunicatorMismatch);
    assert_eq!(
        f.text,
        "Communicator mismatch: rank 2 waits on \"ring\" for tag 5 from rank 1; rank 1's message with tag 5 on \"MPI_COMM_WORLD\" waits unexpected at rank 2"
    );
    assert_eq!(json_finding(&d, "communicator_mismatch")["ranks"], "2");
}

/// Rank 0 waits for anyone (tag 1); ranks 1 and 2 wait for rank 0 (tag 2).
fn knot_job() -> JobDump {
    let specs: Vec<ProcessSpec> = (0..3)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 3, r);
            spec.posted = vec![if r == 0 {
                RequestSpec::recv(0, MPI_ANY_SOURCE, 1, 0x7000_0000, 1)
            } else {
                RequestSpec::recv(0, 0, 2, 0x7000_0000, 1)
            }];
            spec
        })
        .collect();
    job(&specs)
}

#[test]
fn any_source_receive_nobody_sends_to_is_a_knot() {
    let d = diagnose(&knot_job());
    let text = d.to_text();
    assert_eq!(kinds(&d), [FindingKind::DeadlockKnot], "{text}");
    let f = &d.findings[0];
    assert!(
        f.text.starts_with(
            "Deadlock (knot): ranks 0-2 are all blocked and every rank they wait for is among them, so none can proceed: rank 0 waits for a message from any of ranks 0-2 on \"MPI_COMM_WORLD\", tag 1 and nobody sends to it; rank 1 waits for rank 0"
        ),
        "{text}"
    );
    assert!(f.evidence[0].starts_with("rank 0 is blocked in a receive from any source (ranks 0-2) on \"MPI_COMM_WORLD\", tag 1, count 1 [posted receive"), "{text}");
    assert!(
        matches!(&d.waits.iter().find(|w| w.from == 0).unwrap().target, WaitTarget::AnyOf(s) if s.to_string() == "0-2")
    );
    let json = d.to_json();
    assert_eq!(json_kinds(&d), ["deadlock_knot"]);
    assert_eq!(json["deadlocked"], "0-2");
    assert_eq!(json["waits"][0]["to_any"], "0-2");
    assert_eq!(json["waits"][0]["relation"], "any");
}

#[test]
fn any_source_receive_while_everyone_else_computes() {
    let mut specs: Vec<ProcessSpec> = (0..4).map(|r| base(Layout::Ch4Am, 4, r)).collect();
    specs[0].posted = vec![RequestSpec::recv(0, MPI_ANY_SOURCE, 1, 0x7000_0000, 1)];
    let d = diagnose(&job(&specs));
    let text = d.to_text();
    assert_eq!(
        kinds(&d),
        [FindingKind::IdleTarget, FindingKind::NoDeadlock],
        "{text}"
    );
    assert_eq!(
        d.findings[0].text,
        "ranks 1-3 have no pending point-to-point communication, yet rank 0 waits for them (in receives from any source): they are busy computing, or blocked outside point-to-point (a collective, I/O, a lock)."
    );
    assert_eq!(json_kinds(&d), ["idle_target", "no_deadlock"]);
}

#[test]
fn any_source_receive_on_a_communicator_of_unknown_group() {
    // ch3 creates a duplicate's group lazily: the library cannot name its members.
    let specs: Vec<ProcessSpec> = (0..2)
        .map(|r| {
            let mut spec = base(Layout::Ch3, 2, r);
            let mut dup = CommSpec::intra(2, "dup", RING, r, vec![0, 1]);
            dup.local_group = None;
            spec.comms.insert(0, dup);
            spec.posted = vec![RequestSpec::recv(RING, MPI_ANY_SOURCE, 3, 0x7000_0000, 1)];
            spec
        })
        .collect();
    let job = job(&specs);
    let d = diagnose(&job);
    let f = only(&d, FindingKind::UnknownPeer);
    assert_eq!(
        f.text,
        "ranks 0,1 each wait for a message from any member of \"dup\", tag 3, whose COMM_WORLD ranks are unknown (the library reports no group): the analysis cannot follow these waits."
    );
    assert!(!d.has_deadlock());
    assert_eq!(d.waits[0].target, WaitTarget::AnyUnknown);
    assert_eq!(d.to_json()["waits"][0]["to_any"], "unknown");
}

#[test]
fn one_rank_computes_while_the_others_wait_on_it() {
    let specs: Vec<ProcessSpec> = (0..4)
        .map(|r| {
            let mut spec = base(Layout::Debugq4, 4, r);
            if r > 0 {
                spec.posted = vec![RequestSpec::recv(0, 0, 7, 0x7000_0000, 1)];
            }
            spec
        })
        .collect();
    let job = job(&specs);
    let d = diagnose(&job);
    let text = d.to_text();
    assert_eq!(
        kinds(&d),
        [FindingKind::IdleTarget, FindingKind::NoDeadlock],
        "{text}"
    );
    let f = &d.findings[0];
    assert_eq!(
        f.text,
        "rank 0 has no pending point-to-point communication, yet ranks 1-3 wait for it: it is busy computing, or blocked outside point-to-point (a collective, I/O, a lock)."
    );
    assert_eq!(f.ranks.to_string(), "0");
    assert_eq!(f.evidence.len(), 3);
    assert_eq!(f.edges, [(1, 0), (2, 0), (3, 0)]);
    assert!(
        d.findings[1]
            .text
            .starts_with("No point-to-point deadlock: 3 operations wait")
    );
    let json = d.to_json();
    assert_eq!(json_kinds(&d), ["idle_target", "no_deadlock"]);
    assert_eq!(json["findings"][0]["ranks"], "0");
    assert_eq!(json["deadlock"], false);
    // Aggregated: the receive from rank 0 stays absolute (three ranks share it).
    let groups = aggregate(&job);
    let text = aggregate_text(&groups);
    assert_eq!(
        text,
        "rank 0: no pending operations\nranks 1-3: \"MPI_COMM_WORLD\" receive from rank 0 tag 7 count 1\n"
    );
}

#[test]
fn clean_job() {
    let specs: Vec<ProcessSpec> = (0..4).map(|r| base(Layout::Debugq5, 4, r)).collect();
    let job = job(&specs);
    let d = diagnose(&job);
    assert_eq!(kinds(&d), [FindingKind::Clean]);
    assert_eq!(
        d.findings[0].text,
        "No rank waits for another: no point-to-point deadlock."
    );
    assert_eq!(d.findings[0].ranks.to_string(), "0-3");
    assert_eq!(json_kinds(&d), ["clean"]);
    assert!(d.waits.is_empty());
    assert_eq!(
        aggregate_text(&aggregate(&job)),
        "ranks 0-3: no pending operations\n"
    );
}

#[test]
fn a_send_matched_by_a_posted_receive_is_in_transit() {
    let mut specs: Vec<ProcessSpec> = (0..2).map(|r| base(Layout::Debugq5, 2, r)).collect();
    specs[0].sends = vec![RequestSpec::send(0, 1, 3, 0x7000_0000, 8)];
    specs[1].posted = vec![RequestSpec::recv(0, 0, 3, 0x7000_0000, 8)];
    let d = diagnose(&job(&specs));
    assert_eq!(
        kinds(&d),
        [FindingKind::InTransit, FindingKind::Clean],
        "{}",
        d.to_text()
    );
    assert!(d.waits.is_empty());
    assert_eq!(
        d.findings[1].text,
        "No rank waits for another: only messages in transit, no point-to-point deadlock."
    );
}

#[test]
fn completed_operations_wait_for_nothing() {
    let mut specs: Vec<ProcessSpec> = (0..2).map(|r| base(Layout::Debugq5, 2, r)).collect();
    specs[0].sends = vec![RequestSpec::send(0, 1, 3, 0x7000_0000, 8).completed(1, 3)];
    specs[1].posted = vec![RequestSpec::recv(0, 0, 4, 0x7000_0000, 8).completed(0, 4)];
    let d = diagnose(&job(&specs));
    assert_eq!(kinds(&d), [FindingKind::Clean], "{}", d.to_text());
}

#[test]
fn a_chain_into_a_cycle_is_blocked_behind_the_deadlock() {
    // Ranks 0 and 1 receive from each other; ranks 2 and 3 receive from rank 0.
    let specs: Vec<ProcessSpec> = (0..4)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 4, r);
            let source = match r {
                0 => 1,
                _ => 0,
            };
            spec.posted = vec![RequestSpec::recv(0, source, 9, 0x7000_0000, 1)];
            spec
        })
        .collect();
    let d = diagnose(&job(&specs));
    let text = d.to_text();
    assert_eq!(
        kinds(&d),
        [FindingKind::DeadlockCycle, FindingKind::BlockedByDeadlock],
        "{text}"
    );
    assert_eq!(
        d.findings[1].text,
        "ranks 2,3 are blocked behind the deadlock: each waits for deadlocked ranks."
    );
    assert_eq!(d.deadlocked.to_string(), "0-3");
}

#[test]
fn strong_evidence_comes_first_and_weak_evidence_is_qualified() {
    // Ranks 0 and 1 receive from each other; each also holds an eager message from the
    // other (another tag) and one it sent itself; rank 2's synchronous message waits at
    // rank 0.
    let specs: Vec<ProcessSpec> = (0..3)
        .map(|r| {
            let mut spec = base(Layout::Ch3, 3, r);
            if r < 2 {
                spec.posted = vec![RequestSpec::recv(0, 1 - r, 1, 0x7000_0000, 1)];
                spec.unexpected = vec![
                    RequestSpec::unexpected(0, 1 - r, 9, 4).completed(1 - r, 9),
                    RequestSpec::unexpected(16, 0, 3, 4).completed(0, 3),
                ];
            }
            if r == 0 {
                // A synchronous send: rank 2 waits for rank 0 to take it.
                spec.unexpected
                    .push(RequestSpec::unexpected(0, 2, 4, 4).completed(2, 4).synchronous());
            }
            spec
        })
        .collect();
    let d = diagnose(&job(&specs));
    let text = d.to_text();
    assert_eq!(
        kinds(&d),
        [
            FindingKind::DeadlockCycle,
            FindingKind::BlockedByDeadlock,
            FindingKind::TagMismatch,
            FindingKind::TagMismatch
        ],
        "{text}"
    );
    assert!(
        d.findings[0]
            .text
            .starts_with("Deadlock: ranks 0 -> 1 -> 0 each blocked in a receive from "),
        "{text}"
    );
    assert_eq!(
        d.findings[1].text,
        "rank 2 may be blocked behind the deadlock: its messages wait unexpected at rank 0, deadlocked (if they were sent eagerly, rank 2 has moved on)."
    );
    // A message a rank sent itself alone is no deadlock.
    let mut lone = base(Layout::Ch3, 1, 0);
    lone.unexpected = vec![RequestSpec::unexpected(16, 0, 3, 4).completed(0, 3)];
    let d = diagnose(&job(&[lone]));
    assert!(!d.has_deadlock(), "{}", d.to_text());
    // A standard eager send: its sender went on, so nothing waits at all.
    assert_eq!(kinds(&d), [FindingKind::Clean]);
}

#[test]
fn failed_and_missing_ranks_are_reported() {
    // Rank 0 waits for rank 1, which could not be dumped, and for rank 5, not in the job.
    let mut specs: Vec<ProcessSpec> = (0..2).map(|r| base(Layout::Debugq5, 6, r)).collect();
    specs[0].posted = vec![
        RequestSpec::recv(0, 1, 1, 0x7000_0000, 1),
        RequestSpec::recv(0, 5, 1, 0x7000_0000, 1),
    ];
    let mut job = job(&specs);
    job.ranks[1].outcome = Err("ptrace: Operation not permitted".into());
    let d = diagnose(&job);
    let text = d.to_text();
    assert_eq!(
        kinds(&d),
        [
            FindingKind::UndumpedTarget,
            FindingKind::UndumpedTarget,
            FindingKind::DumpFailed,
            FindingKind::NoDeadlock
        ],
        "{text}"
    );
    assert!(text.contains("rank 1 could not be dumped (ptrace: Operation not permitted), yet rank 0 waits for it: its state is unknown."), "{text}");
    assert!(
        text.contains("rank 5 is not in the dump, yet rank 0 waits for it: its state is unknown."),
        "{text}"
    );
    assert!(
        text.contains("rank 1 could not be dumped: ptrace: Operation not permitted"),
        "{text}"
    );
    assert!(
        text.contains("No point-to-point deadlock (rank 1 could not be dumped)"),
        "{text}"
    );
}

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
        "Deadlock: ranks 0 -> 1 -> 2 -> ... -> 62 -> 63 -> 0 (64 ranks) each blocked in a send to its right neighbour on \"ring\", tag 5"
    ));
    assert_eq!(d.findings[0].cycle.as_ref().unwrap().len(), 64);
    assert_eq!(d.deadlocked, RankSet::full(64));
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
    assert_eq!(job.to_json()["ranks"].as_array().unwrap().len(), 8);
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
    let job = ssend_ring(Layout::Debugq5, 4, true);
    let p = persistent_dumps(&[job.clone(), job.clone(), job]);
    assert!(p.has_deadlock());
    assert_eq!(p.samples, 3);
    assert_eq!(p.waits.len(), 4);
    assert_eq!(p.deadlocked.to_string(), "0-3");
    assert!(p.dissolved.is_empty());
    assert!(p.findings[0].text.starts_with(
        "Persisted over 3 samples: Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in a send to its right neighbour"
    ));
    let json = p.to_json();
    assert_eq!(json["deadlock"], true);
    assert_eq!(json["findings"][0]["kind"], "deadlock_cycle");
    assert!(
        p.to_text()
            .starts_with("Over 3 samples, 4 waits persisted.\n")
    );
}

#[test]
fn a_knot_that_persists_is_a_deadlock() {
    let knot = knot_job();
    let p = persistent_dumps(&[knot.clone(), knot]);
    assert!(p.has_deadlock(), "{}", p.to_text());
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
    assert_eq!(
        p.findings[0].text,
        "2 waits persisted across the 2 samples, but no cycle or knot of blocked ranks: no deadlock."
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
        job(&specs)
    };
    let samples = [exchange(Some(1)), exchange(None), exchange(Some(2))];
    let d: Vec<Diagnosis> = samples.iter().map(diagnose).collect();
    assert!(d[0].has_deadlock() && !d[1].has_deadlock() && d[2].has_deadlock());
    let p = persistent(&d);
    assert!(!p.has_deadlock(), "{}", p.to_text());
    assert!(p.waits.is_empty());
    assert_eq!(
        p.findings[0].text,
        "No wait persisted across the 3 samples: no deadlock."
    );
    assert_eq!(p.dissolved.len(), 1, "{}", p.to_text());
    assert!(
        p.dissolved[0]
            .text
            .starts_with("sample 1: Deadlock: ranks 0 -> 1 -> 0")
    );
    assert_eq!(p.to_json()["dissolved"][0]["kind"], "deadlock_cycle");
    // A job that completes between samples gives no deadlock either.
    let p = persistent(&d[..2]);
    assert!(!p.has_deadlock());
    // Nor does a different cycle each time (tags 1 then 2).
    let p = persistent(&[d[0].clone(), d[2].clone()]);
    assert!(!p.has_deadlock());
    // The same ranks waiting for each other again count once.
    assert_eq!(p.dissolved.len(), 1, "{}", p.to_text());
}

// ------------------------------------------------------------------ pictures

/// A DOT document in the one-statement-per-line form `to_dot` writes.
#[derive(Debug, Default)]
struct Dot {
    nodes: BTreeMap<String, String>,
    edges: Vec<(String, String, String)>,
}

fn parse_dot(text: &str) -> Dot {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("digraph mqd {"), "{text}");
    assert_eq!(text.lines().last(), Some("}"), "{text}");
    assert_eq!(text.matches('{').count(), text.matches('}').count());
    let mut dot = Dot::default();
    for line in lines {
        let line = line.trim();
        if line == "}" || line.is_empty() {
            continue;
        }
        assert!(line.ends_with("];"), "statement: {line}");
        let (head, attrs) = line.split_once(" [").expect("attributes");
        // Quotes balance (escaped quotes do not count).
        assert_eq!(
            attrs.replace("\\\"", "").matches('"').count() % 2,
            0,
            "{line}"
        );
        match head.split_once(" -> ") {
            Some((a, b)) => dot.edges.push((a.into(), b.into(), attrs.into())),
            None if ["graph", "node", "edge"].contains(&head) => {}
            None => {
                assert!(
                    head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "node id {head}"
                );
                assert!(
                    dot.nodes.insert(head.into(), attrs.into()).is_none(),
                    "{head} twice"
                );
            }
        }
    }
    for (a, b, _) in &dot.edges {
        assert!(
            dot.nodes.contains_key(a) && dot.nodes.contains_key(b),
            "{a} -> {b} undeclared:\n{text}"
        );
    }
    dot
}

#[test]
fn dot_of_the_ring_highlights_the_cycle() {
    let job = ssend_ring(Layout::Debugq5, 4, true);
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    assert_eq!(
        dot.nodes.keys().collect::<Vec<_>>(),
        ["r0", "r1", "r2", "r3"]
    );
    assert!(
        dot.nodes["r0"].contains("label=\"rank 0\\npid 1000\\nsynthetic\""),
        "{text}"
    );
    assert!(
        dot.nodes["r0"].contains("color=\"red\""),
        "deadlocked node: {text}"
    );
    let pairs: BTreeSet<(String, String)> = dot
        .edges
        .iter()
        .map(|(a, b, _)| (a.clone(), b.clone()))
        .collect();
    let want: BTreeSet<(String, String)> = (0..4)
        .map(|r| (format!("r{r}"), format!("r{}", (r + 1) % 4)))
        .collect();
    assert_eq!(pairs, want);
    for (_, _, attrs) in &dot.edges {
        assert!(attrs.contains("label=\"send tag 5\\nring\""), "{attrs}");
        assert!(
            attrs.contains("color=\"red\"") && attrs.contains("bold"),
            "{attrs}"
        );
    }
    assert!(text.contains("deadlock: ranks 0-3"), "{text}");
}

#[test]
fn dot_colours_kinds_and_marks_idle_and_any_source() {
    // Rank 0 computes, rank 1 receives from rank 0, rank 2 from any source, rank 3 has a
    // message waiting unexpected at rank 1.
    let mut specs: Vec<ProcessSpec> = (0..4).map(|r| base(Layout::Debugq5, 4, r)).collect();
    specs[1].posted = vec![RequestSpec::recv(0, 0, 7, 0x7000_0000, 1)];
    specs[1].unexpected = vec![RequestSpec::unexpected(0, 3, 8, 0)];
    specs[2].posted = vec![RequestSpec::recv(0, MPI_ANY_SOURCE, 7, 0x7000_0000, 1)];
    let job = job(&specs);
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    let edge = |a: &str, b: &str| {
        dot.edges
            .iter()
            .find(|(x, y, _)| x == a && y == b)
            .unwrap_or_else(|| panic!("{a} -> {b}:\n{text}"))
            .2
            .clone()
    };
    assert!(edge("r1", "r0").contains(&format!(
        "color=\"{}\"",
        graph::kind_colour(WaitKind::Receive)
    )));
    assert!(edge("r1", "r0").contains("label=\"recv tag 7\\nMPI_COMM_WORLD\""));
    assert!(edge("r3", "r1").contains(&format!(
        "color=\"{}\"",
        graph::kind_colour(WaitKind::Unexpected)
    )));
    assert!(edge("r3", "r1").contains("label=\"unexpected tag 8\\nMPI_COMM_WORLD\""));
    // The any-source receive goes to an "any of" node, which points at every member.
    let any = edge("r2", "p0");
    assert!(any.contains("dashed"), "{any}");
    assert!(
        dot.nodes["p0"].contains("any of ranks 0-3\\non MPI_COMM_WORLD"),
        "{text}"
    );
    for r in 0..4 {
        edge("p0", &format!("r{r}"));
    }
    assert!(
        dot.nodes["r0"].contains("no pending p2p") && dot.nodes["r0"].contains("#fff2b3"),
        "{text}"
    );
    assert!(
        !text.contains("color=\"red\""),
        "no deadlock, nothing red:\n{text}"
    );
}

#[test]
fn dot_of_a_knot_highlights_the_any_source_wait() {
    let job = knot_job();
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    let attrs = |a: &str, b: &str| {
        dot.edges
            .iter()
            .find(|(x, y, _)| x == a && y == b)
            .unwrap_or_else(|| panic!("{a} -> {b}:\n{text}"))
            .2
            .clone()
    };
    assert!(attrs("r0", "p0").contains("color=\"red\""), "{text}");
    assert!(attrs("r0", "p0").contains("dashed,bold"), "{text}");
    for r in 0..3 {
        assert!(
            attrs("p0", &format!("r{r}")).contains("color=\"red\""),
            "{text}"
        );
    }
    assert!(attrs("r1", "r0").contains("color=\"red\""), "{text}");
    graph::render(&text, "svg", &scratch("knot.svg")).unwrap();
}

#[test]
fn dot_collapses_large_jobs_into_rank_set_nodes() {
    let job = ssend_ring(Layout::Debugq5, 64, true);
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    assert_eq!(dot.nodes.keys().collect::<Vec<_>>(), ["g0"], "{text}");
    assert!(dot.nodes["g0"].contains("ranks 0-63 (64)"), "{text}");
    assert_eq!(dot.edges.len(), 1, "{text}");
    let (a, b, attrs) = &dot.edges[0];
    assert_eq!((a.as_str(), b.as_str()), ("g0", "g0"));
    assert!(
        attrs.contains("send to right tag 5\\nring\\n\u{d7}64"),
        "{attrs}"
    );
    assert!(attrs.contains("color=\"red\""), "{attrs}");
    // Small jobs collapse on request; large ones can be drawn whole.
    let small = ssend_ring(Layout::Debugq5, 4, true);
    let collapsed = graph::to_dot(
        &small,
        &diagnose(&small),
        &DotOptions {
            collapse: Collapse::Always,
            ..DotOptions::default()
        },
    );
    assert_eq!(parse_dot(&collapsed).nodes.len(), 1);
    let whole = graph::to_dot(
        &job,
        &d,
        &DotOptions {
            collapse: Collapse::Never,
            ..DotOptions::default()
        },
    );
    let whole = parse_dot(&whole);
    assert_eq!((whole.nodes.len(), whole.edges.len()), (64, 64));
}

/// This test binary's own scratch directory (under the target directory, never `/tmp`
/// itself).
fn scratch_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mqd-diagnosis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn scratch(name: &str) -> PathBuf {
    assert!(
        !name.is_empty() && !name.contains('/'),
        "a file name: {name:?}"
    );
    scratch_dir().join(name)
}

#[test]
fn graphviz_renders_the_dot_text() {
    // Graphviz is part of the project's setup (.ci/run installs it): no silent skip.
    let version = std::process::Command::new("dot").arg("-V").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "Graphviz's dot is missing: {}",
        graph::INSTALL_HINT
    );
    let job = ssend_ring(Layout::Debugq5, 4, true);
    let d = diagnose(&job);
    let dot = graph::to_dot(&job, &d, &DotOptions::default());
    let svg = scratch("ring.svg");
    graph::render(&dot, "svg", &svg).unwrap();
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("<svg"), "{svg_text}");
    for r in 0..4 {
        assert!(
            svg_text.contains(&format!("<title>r{r}</title>")),
            "{svg_text}"
        );
    }
    assert!(
        svg_text.contains("<title>r3&#45;&gt;r0</title>"),
        "{svg_text}"
    );
    assert!(svg_text.contains("stroke=\"red\""), "cycle drawn red");
    let png = scratch("ring.png");
    graph::render(&dot, "png", &png).unwrap();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    // Large (collapsed) graphs and names that need escaping render too.
    let big = ssend_ring(Layout::Debugq5, 64, true);
    let big_dot = graph::to_dot(&big, &diagnose(&big), &DotOptions::default());
    graph::render(&big_dot, "svg", &scratch("big.svg")).unwrap();
    let mut odd = ssend_ring(Layout::Debugq5, 2, true);
    for r in &mut odd.ranks {
        r.host = Some("a \"quoted\" \\ host".into());
    }
    let odd_dot = graph::to_dot(&odd, &diagnose(&odd), &DotOptions::default());
    parse_dot(&odd_dot);
    graph::render(&odd_dot, "svg", &scratch("odd.svg")).unwrap();
    // Errors say what to do.
    let err = graph::render(&dot, "gif", &scratch("x.gif")).unwrap_err();
    assert!(err.contains("svg and png"), "{err}");
    let err = graph::render("digraph {", "svg", &scratch("bad.svg")).unwrap_err();
    assert!(err.contains("failed"), "{err}");
}

#[test]
fn a_missing_graphviz_says_how_to_install_it() {
    let err = graph::render_with(
        "/nonexistent/mqd-test/dot",
        "digraph {}",
        "svg",
        &scratch("none.svg"),
    )
    .unwrap_err();
    assert!(
        err.contains("is not installed") && err.contains("apt-get install graphviz"),
        "{err}"
    );
}

// ------------------------------------------------------------------ real fixture jobs

fn dump_job(job: &fixtures::Job) -> JobDump {
    let processes: Vec<ProcessRef> = job
        .rank_pids()
        .iter()
        .enumerate()
        .map(|(r, &pid)| ProcessRef {
            rank: Some(r as i32),
            pid,
            host: None,
            executable: None,
        })
        .collect();
    dump_ranks(&processes)
}

fn dump_ranks(processes: &[ProcessRef]) -> JobDump {
    let dll = mqd_harness::bundled_library().expect("libmqd_mpich.so is built");
    let context = JobContext {
        acquired_by: "mpir".into(),
        ..JobContext::default()
    };
    dump_processes(processes, Some(&dll), &context).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn real_fixture_ring_job_is_diagnosed() {
    for layout in [Layout::Debugq5, Layout::Ch3] {
        let job = spawn_job(&JobOptions::new(4, layout, "ring")).unwrap();
        let dump = dump_job(&job);
        drop(job);
        let d = diagnose(&dump);
        let text = d.to_text();
        assert_eq!(
            kinds(&d),
            [FindingKind::DeadlockCycle],
            "{layout:?}:\n{text}"
        );
        assert_eq!(
            d.findings[0].text,
            "Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in a send to its right neighbour on \"ring\", tag 5; no receive is posted on any of them.",
            "{layout:?}"
        );
        for r in 0..4 {
            assert!(
                text.contains(&format!(
                    "rank {r} is blocked in a send to rank {} on \"ring\", tag 5, count 1000",
                    (r + 1) % 4
                )),
                "{layout:?}:\n{text}"
            );
        }
        assert_eq!(json_kinds(&d), ["deadlock_cycle"]);
        assert_eq!(d.to_json()["deadlocked"], "0-3");
        let groups = aggregate(&dump);
        assert_eq!(groups.len(), 1, "{}", aggregate_text(&groups));
        assert!(
            groups[0]
                .summary
                .starts_with("\"ring\" send to right neighbour tag 5 count 1000; unexpected from left neighbour tag 5"),
            "{}",
            groups[0].summary
        );
        let dot = graph::to_dot(&dump, &d, &DotOptions::default());
        assert_eq!(parse_dot(&dot).edges.len(), 4);
        graph::render(
            &dot,
            "svg",
            &scratch(&format!("real-ring-{}.svg", layout.name())),
        )
        .unwrap();
    }
}

#[test]
fn real_fixture_tag_mismatch_job_is_diagnosed() {
    // Every rank waits for tag 200 from its left neighbour, whose messages (tags 100, 103)
    // wait unexpected; each also holds a rendezvous message from its right neighbour.
    let job = spawn_job(&JobOptions::new(4, Layout::Debugq5, "unexpected")).unwrap();
    let dump = dump_job(&job);
    drop(job);
    let d = diagnose(&dump);
    let text = d.to_text();
    let mismatches: Vec<&str> = d
        .of_kind(FindingKind::TagMismatch)
        .map(|f| f.text.as_str())
        .collect();
    for tag in [103, 100] {
        let want = format!(
            "Tag mismatch: ranks 0-3 each wait for tag 200 from their left neighbour on \"MPI_COMM_WORLD\"; the message from their left neighbour has tag {tag} and waits unexpected at them"
        );
        assert!(mismatches.contains(&want.as_str()), "{want}\n{text}");
    }
    // The receives make the deadlock; the messages waiting unexpected (weaker evidence)
    // add no cycle of their own, and the messages each rank sent itself none either.
    assert_eq!(
        kinds(&d),
        [
            FindingKind::DeadlockCycle,
            FindingKind::TagMismatch,
            FindingKind::TagMismatch
        ],
        "{text}"
    );
    assert_eq!(
        d.findings[0].text,
        "Deadlock: ranks 0 -> 3 -> 2 -> 1 -> 0 each blocked in a receive from its left neighbour on \"MPI_COMM_WORLD\", tag 200; none of them has a send pending."
    );
    let json = d.to_json();
    let tags: Vec<&Value> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "tag_mismatch")
        .collect();
    assert_eq!(tags.len(), 2);
    assert_eq!(tags[0]["ranks"], "0-3");
}

#[test]
fn real_fixture_rank_computing_while_others_wait() {
    // Rank 0 computes; ranks 1-3 ("freed" scenario) wait for rank 0 on "kept" (tag 6) and
    // for anyone on "to be freed" (tag 5).
    let mut ranks = Vec::new();
    for r in 0..4 {
        let scenario = if r == 0 { "compute" } else { "freed" };
        ranks.push(spawn_rank(fixtures::DEBUGQ5, scenario, r, 4).unwrap());
    }
    let processes: Vec<ProcessRef> = ranks
        .iter()
        .enumerate()
        .map(|(r, p)| ProcessRef {
            rank: Some(r as i32),
            pid: p.pid(),
            host: None,
            executable: None,
        })
        .collect();
    let dump = dump_ranks(&processes);
    drop(ranks);
    let d = diagnose(&dump);
    let text = d.to_text();
    assert!(!d.has_deadlock(), "{text}");
    let idle = only(&d, FindingKind::IdleTarget);
    assert_eq!(
        idle.text,
        "rank 0 has no pending point-to-point communication, yet ranks 1-3 wait for it: it is busy computing, or blocked outside point-to-point (a collective, I/O, a lock).",
        "{text}"
    );
    assert!(idle.evidence.iter().any(|e| e.starts_with("rank 2 is blocked in a receive from rank 0 on \"kept\", tag 6")), "{text}");
    assert_eq!(json_kinds(&d), ["idle_target", "no_deadlock"]);
    let groups = aggregate(&dump);
    assert_eq!(groups.len(), 2, "{}", aggregate_text(&groups));
    assert_eq!(groups[1].ranks.to_string(), "1-3");
    assert!(
        groups[1]
            .lines
            .contains(&"\"kept\" receive from rank 0 tag 6 count 2".to_string()),
        "{:?}",
        groups[1].lines
    );
    assert!(
        groups[1]
            .lines
            .contains(&"\"to be freed\" receive from any source tag 5 count 1".to_string()),
        "{:?}",
        groups[1].lines
    );
}

#[test]
fn real_fixture_compute_job_gets_a_clean_bill() {
    let job = spawn_job(&JobOptions::new(3, Layout::Ch4Am, "compute")).unwrap();
    let dump = dump_job(&job);
    drop(job);
    let d = diagnose(&dump);
    assert_eq!(kinds(&d), [FindingKind::Clean], "{}", d.to_text());
    assert_eq!(d.to_json()["findings"][0]["kind"], "clean");
    assert_eq!(
        aggregate_text(&aggregate(&dump)),
        "ranks 0-2: no pending operations\n"
    );
}
