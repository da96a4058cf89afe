//! The diagnosis of synthetic jobs (MPICH processes of every layout displayed through the
//! real library): deadlock cycles and knots, mismatches, idle and missing ranks, transit,
//! each with the words `mqd` prints.

mod support;

use mqd_model::{Certainty, FindingKind, JobDump, Verdict, WaitKind, WaitTarget};
use mqd_synthetic::{CommSpec, Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec};
use support::*;

#[test]
fn listed_ssend_ring_is_only_a_possible_deadlock() {
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
        // Every send is listed: MPI_Issend and MPI_Ssend look the same in a queue.
        assert_eq!(
            f.text,
            "Possible deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each have a send to its right neighbour on \"ring\", tag 5 pending; no receive is posted on any of them. They are deadlocked if they are blocked in these calls (a queue cannot tell a blocking send from MPI_Isend)."
        );
        assert_eq!(f.certainty, Certainty::Possible);
        assert_eq!(f.cycle.as_deref(), Some(&[0, 1, 2, 3][..]));
        assert_eq!(f.edges, [(0, 1), (1, 2), (2, 3), (3, 0)]);
        assert_eq!(f.ranks.to_string(), "0-3");
        for r in 0..4 {
            let right = (r + 1) % 4;
            let send = format!(
                "rank {r} has a pending send to rank {right} on \"ring\", tag 5, count 1000"
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
        assert_eq!(d.deadlocked.to_string(), "");
        assert_eq!(d.possibly_deadlocked.to_string(), "0-3");
        assert_eq!(d.verdict, Verdict::Undetermined);
        let verdict = verdict(&job);
        assert!(verdict.contains("Possible deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"));
        assert!(verdict.contains("rank 3 has a pending send to rank 0 on \"ring\", tag 5"));
        assert!(verdict.ends_with("Verdict: undetermined: ranks 0-3 may be deadlocked, but nothing proves them held for good (a pending operation may be non-blocking, a message may still be on its way: a hold of the live job tells); ranks 0-3 have no stack: any of them may be blocked in a call their queues do not show (a collective, a blocking receive); stacks are taken unless --no-stacks.\n"), "{verdict}");

        let json = d.to_json();
        assert_eq!(json["deadlock"], false);
        assert_eq!(json["verdict"], "undetermined");
        assert_eq!(json["possibly_deadlocked"], "0-3");
        assert_eq!(json["findings"][0]["certainty"], "possible");
        assert_eq!(json["doubts"][0]["doubt"]["unproven"]["ranks"], "0-3");
        assert_eq!(json_kinds(&d), ["deadlock_cycle"]);
        let f = &json["findings"][0];
        assert_eq!(f["cycle"], serde_json::json!([0, 1, 2, 3]));
        assert_eq!(f["ranks"], "0-3");
        assert_eq!(f["evidence"].as_array().unwrap().len(), 8);
        assert_eq!(json["waits"][0]["relation"], "right");
        assert_eq!(json["waits"][0]["communicator"]["name"], "ring");
        // The stacks tell MPI_Ssend from MPI_Isend: the same queues, proven.
        let mut job = job;
        blocked_in(
            &mut job,
            "MPI_Ssend",
            "ring",
            |r| Some(i64::from((r + 1) % 4)),
            Some(5),
        );
        let d = diagnose(&job);
        assert_eq!(d.verdict, Verdict::Deadlock, "{layout:?}: {}", d.to_text());
        assert!(d.findings[0].text.starts_with(
            "Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Ssend to its right neighbour"
        ));
    }
}

#[test]
fn blocking_ssend_ring_is_proven_by_its_stacks() {
    // Without stacks, a synchronous message its sender does not list proves nothing: it
    // may come from an MPI_Ssend_init or a freed MPI_Issend request, and its sender may
    // compute on.
    for layout in [Layout::Ch3, Layout::Ch4Am] {
        let d = diagnose(&ssend_ring(layout, 4, false));
        assert_eq!(kinds(&d), [FindingKind::DeadlockCycle], "{}", d.to_text());
        assert_eq!(d.findings[0].certainty, Certainty::Possible);
        assert_eq!(d.verdict, Verdict::Undetermined);
    }
    // Every rank's stack shows it in MPI_Ssend to its right neighbour, and its message
    // waits unexpected there: no receive took it, and none can be posted.
    for layout in Layout::ALL {
        let mut job = blocked_ssend_ring(layout);
        let d = diagnose(&job);
        assert_eq!(kinds(&d), [FindingKind::DeadlockCycle], "{}", d.to_text());
        let f = &d.findings[0];
        // Not listed by the library: seen at the destinations only.
        let seen = " (blocking synchronous sends, which the library does not list: seen as their messages waiting unexpected at the destinations)";
        assert_eq!(
            f.text,
            format!(
                "Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Ssend to its right neighbour on \"ring\", tag 5{seen}; no receive is posted on any of them."
            ),
            "{layout:?}"
        );
        assert_eq!(f.certainty, Certainty::Definite);
        assert!(f.evidence[0].starts_with("rank 1 holds an unexpected message from rank 0 on \"ring\", tag 5 [unexpected message: no receive posted yet"), "{:?}", f.evidence);
        assert!(d.waits.iter().all(|w| w.blocked), "{layout:?}");
        assert_eq!(d.verdict, Verdict::Deadlock);
        assert!(
            d.to_text()
                .ends_with("Verdict: deadlock (ranks 0-3 proven blocked).\n")
        );
        assert_eq!(json_kinds(&d), ["deadlock_cycle"]);
        // A rank whose stack shows it computing is not in a send: nothing is proven.
        computing(&mut job, &[2]);
        let d = diagnose(&job);
        assert_ne!(d.verdict, Verdict::Deadlock, "{layout:?}: {}", d.to_text());
    }
}

#[test]
fn a_rank_without_a_stack_is_in_no_proof() {
    // Rank 1's stack shows it in MPI_Ssend to rank 0, whose synchronous message waits
    // there; rank 0 has no stack: it may still receive it, so nothing is proven.
    let mut job = ssend_ring(Layout::Ch3, 2, false);
    blocked_in(
        &mut job,
        "MPI_Ssend",
        "ring",
        |r| (r == 1).then_some(0),
        Some(5),
    );
    let d = diagnose(&job);
    assert_eq!(d.verdict, Verdict::Undetermined, "{}", d.to_text());
    assert!(d.deadlocked.is_empty());
    assert!(
        d.to_text().contains("rank 0 has no stack"),
        "{}",
        d.to_text()
    );
    // With both stacks, both are held: each message waits at its destination, whose
    // rank is blocked in its own send.
    blocked_in(
        &mut job,
        "MPI_Ssend",
        "ring",
        |r| Some(i64::from(1 - r)),
        Some(5),
    );
    let d = diagnose(&job);
    assert_eq!(d.verdict, Verdict::Deadlock, "{}", d.to_text());
    assert!(
        d.waits
            .iter()
            .all(|w| w.blocked && w.kind == WaitKind::Unexpected)
    );
}

/// A rank in a call whose wait is not known (a window's fence, a connection, a buffer's
/// flush, a matched receive, a receive whose arguments could not be read) may wait for
/// anything: the ring through it is possible, never proven, and never clean.
#[test]
fn a_call_whose_wait_is_not_known_proves_nothing() {
    for call in [
        "MPI_Win_fence",
        "MPI_Comm_accept",
        "MPI_Buffer_detach",
        "MPI_Mrecv",
        "MPI_Recv",
    ] {
        let mut job = ssend_ring(Layout::Ch3, 4, false);
        blocked_in(
            &mut job,
            "MPI_Ssend",
            "ring",
            |r| (r != 3).then_some(i64::from((r + 1) % 4)),
            Some(5),
        );
        let last = job.ranks.iter_mut().find(|r| r.rank == 3).unwrap();
        last.threads = vec![stack(103, &["poll", call, "main", "_start"], None)];
        let d = diagnose(&job);
        let text = d.to_text();
        assert_eq!(d.verdict, Verdict::Undetermined, "{call}: {text}");
        assert!(d.deadlocked.is_empty(), "{call}: {text}");
        assert_eq!(d.possibly_deadlocked.to_string(), "0-3", "{call}");
    }
}

/// Ranks in `MPI_Barrier` whose arguments were not read: the barrier's own messages
/// (MPICH's collective context, the communicator's plus one) pending at them show its
/// communicator, and are the evidence of their waits for the rank outside it, which
/// receives from one of them. A rank without a stack is in a collective with the peers of
/// its collective messages. Collectives prove nothing: possible, undetermined.
#[test]
fn a_collectives_own_messages_show_its_communicator() {
    for without_stack in [None, Some(1)] {
        let mut job = world(
            Layout::Debugq5,
            4,
            |r| match r {
                3 => vec![RequestSpec::recv(0, 0, 7, 0x7000_0000, 1)],
                _ => vec![RequestSpec::recv(1, 3, 1, 0x7100_0000, 0)],
            },
            |_| vec![],
        );
        blocked_in(
            &mut job,
            "MPI_Recv",
            "MPI_COMM_WORLD",
            |r| (r == 3).then_some(0),
            Some(7),
        );
        for r in job.ranks.iter_mut().filter(|r| r.rank < 3) {
            r.threads = match without_stack {
                Some(s) if s == r.rank => Vec::new(),
                _ => vec![stack(100 + r.rank, &["poll", "MPI_Barrier", "main"], None)],
            };
        }
        let d = diagnose(&job);
        let text = d.to_text();
        assert_eq!(d.verdict, Verdict::Undetermined, "{text}");
        assert_eq!(d.possibly_deadlocked.to_string(), "0-3", "{text}");
        // Ranks 0 and 1 (with or without a stack) wait in the barrier for rank 3, each
        // with its barrier message from rank 3 as evidence.
        for r in [0, 1] {
            let to_3: Vec<_> = d
                .diagnosis
                .waits
                .iter()
                .filter(|w| w.from == r && w.target == WaitTarget::Rank(3))
                .collect();
            assert!(
                matches!(to_3[..], [w] if w.kind == WaitKind::Collective && w.evidence.len() == 1),
                "{without_stack:?}: {to_3:?}"
            );
        }
        assert!(text.contains("MPI_Barrier"), "{text}");
    }
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
        "Possible deadlock: ranks 0 -> 1 -> 0 each have a receive from the other rank on \"MPI_COMM_WORLD\", tag 0 pending; none of them has a send pending. They are deadlocked if they are blocked in these calls (a queue cannot tell MPI_Recv from MPI_Irecv)."
    );
    assert!(f.evidence[0].starts_with(
        "rank 0 has a pending receive from rank 1 on \"MPI_COMM_WORLD\", tag 0, count 1"
    ));
    assert!(f.evidence[1].starts_with("rank 1 has a pending receive from rank 0"));
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
            .starts_with("rank 2 has a pending receive from rank 1 on \"MPI_COMM_WORLD\", tag 6")
    );
    assert!(f.evidence.iter().any(|e| {
        e.starts_with("rank 1 has a pending send to rank 2 on \"MPI_COMM_WORLD\", tag 5")
    }));
    assert!(f.evidence.iter().any(|e| e.starts_with(
        "rank 2 holds an unexpected message from rank 1 on \"MPI_COMM_WORLD\", tag 5"
    )));
    // Rank 1 waits in its send for rank 2, which waits for rank 1: a deadlock too.
    let cycle = only(&d, FindingKind::DeadlockCycle);
    assert_eq!(
        cycle.text,
        "Possible deadlock: ranks 1 -> 2 -> 1 wait for each other if their pending operations are blocking calls: rank 1 waits for rank 2 (a send on \"MPI_COMM_WORLD\", tag 5), rank 2 waits for rank 1 (a receive on \"MPI_COMM_WORLD\", tag 6).",
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

#[test]
fn any_source_receive_nobody_sends_to_is_a_knot() {
    let d = diagnose(&knot_job());
    let text = d.to_text();
    assert_eq!(kinds(&d), [FindingKind::DeadlockKnot], "{text}");
    let f = &d.findings[0];
    assert!(
        f.text.starts_with(
            "Possible deadlock (knot): ranks 0-2 wait only for each other, so none could proceed if their pending operations are blocking calls (a queue cannot tell MPI_Recv from MPI_Irecv): rank 0 waits for a message from any of ranks 0-2 on \"MPI_COMM_WORLD\", tag 1 and nobody sends to it; ranks 1,2 each wait for rank 0"
        ),
        "{text}"
    );
    assert!(f.evidence[0].starts_with("rank 0 has a pending receive from any source (ranks 0-2) on \"MPI_COMM_WORLD\", tag 1, count 1 [posted receive"), "{text}");
    assert!(
        matches!(&d.waits.iter().find(|w| w.from == 0).unwrap().target, WaitTarget::AnyOf(s) if s.to_string() == "0-2")
    );
    let json = d.to_json();
    assert_eq!(json_kinds(&d), ["deadlock_knot"]);
    assert_eq!(json["deadlocked"], "");
    assert_eq!(json["possibly_deadlocked"], "0-2");
    assert_eq!(json["waits"][0]["to_any"], "0-2");
    assert_eq!(json["waits"][0]["relation"], "any");
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
                spec.unexpected.push(
                    RequestSpec::unexpected(0, 2, 4, 4)
                        .completed(2, 4)
                        .synchronous(),
                );
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
            .starts_with("Possible deadlock: ranks 0 -> 1 -> 0 each have a receive from "),
        "{text}"
    );
    assert_eq!(
        d.findings[1].text,
        "rank 2 waits for rank 0, possibly deadlocked: it is stuck too if they are."
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
        text.contains("No deadlock among the ranks seen (rank 1 could not be dumped)"),
        "{text}"
    );
    assert!(!text.contains("No point-to-point deadlock"), "{text}");
    assert_eq!(d.verdict, Verdict::Undetermined);
    assert!(
        text.ends_with("Verdict: undetermined: ranks 2-5 of the job not in the dump; rank 1 not dumped (see above); rank 0 has no stack: it may be blocked in a call its queues do not show (a collective, a blocking receive); stacks are taken unless --no-stacks.\n"),
        "{text}"
    );
}

#[test]
fn processes_without_a_rank_and_ranks_not_dumped_are_named_with_their_pids() {
    // Ranks 0-2: rank 0 waits for rank 1; rank 2 could not be dumped and has no stack.
    // Two more processes have no COMM_WORLD rank, one of them not dumped either.
    let mut specs: Vec<ProcessSpec> = (0..3).map(|r| base(Layout::Debugq5, 3, r)).collect();
    specs[0].posted = vec![RequestSpec::recv(0, 1, 1, 0x7000_0000, 1)];
    let mut job = job(&specs);
    job.ranks[2].outcome = Err("ptrace: Operation not permitted".into());
    job.ranks[2].threads.clear();
    for (pid, outcome) in [(4242, Ok(Vec::new())), (4343, Err("exited".to_string()))] {
        let mut unranked = job.ranks[1].clone();
        unranked.rank = -1;
        unranked.pid = Some(pid);
        unranked.outcome = outcome;
        job.ranks.push(unranked);
    }
    let d = diagnose(&job);
    let text = d.to_text();
    let failed: Vec<&str> = d
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::DumpFailed)
        .map(|f| f.text.as_str())
        .collect();
    assert_eq!(failed.len(), 3, "{text}");
    assert!(failed[0].contains("rank 2"), "{text}");
    assert!(
        failed[0].contains("ptrace: Operation not permitted"),
        "{text}"
    );
    assert!(
        failed
            .iter()
            .any(|t| t.contains("4242") && t.contains("no known COMM_WORLD rank")),
        "{text}"
    );
    assert!(
        failed
            .iter()
            .any(|t| t.contains("4343") && t.contains("exited")),
        "{text}"
    );
    assert!(
        d.doubts
            .iter()
            .any(|x| matches!(x, mqd_model::diagnosis::Doubt::NoWorldRank { processes: 2 })),
        "{text}"
    );
}

/// A synthetic job and what its diagnosis must say, with the words `mqd` prints.
struct Case {
    name: &'static str,
    job: fn() -> JobDump,
    kinds: &'static [FindingKind],
    /// `(finding index, its text)`.
    texts: &'static [(usize, &'static str)],
    /// `(finding index, its ranks)`.
    ranks: &'static [(usize, &'static str)],
    deadlocked: &'static str,
    /// Nothing waits for anything.
    no_waits: bool,
    /// The aggregated text view, when the case pins it.
    aggregated: Option<&'static str>,
}

/// `n` ranks of `layout` on COMM_WORLD; `posted(r)`, `sends(r)` are rank `r`'s queues.
fn world(
    layout: Layout,
    n: i32,
    posted: impl Fn(i32) -> Vec<RequestSpec>,
    sends: impl Fn(i32) -> Vec<RequestSpec>,
) -> JobDump {
    let specs: Vec<ProcessSpec> = (0..n)
        .map(|r| {
            let mut spec = base(layout, n, r);
            spec.posted = posted(r);
            spec.sends = sends(r);
            spec
        })
        .collect();
    job(&specs)
}

const CASES: &[Case] = &[
    Case {
        name: "a clean job",
        job: || world(Layout::Debugq5, 4, |_| vec![], |_| vec![]),
        kinds: &[FindingKind::Clean],
        texts: &[(0, "No rank waits for another: no point-to-point deadlock.")],
        ranks: &[(0, "0-3")],
        deadlocked: "",
        no_waits: true,
        aggregated: Some("ranks 0-3: no pending operations\n"),
    },
    Case {
        name: "a send matched by a posted receive is in transit",
        job: || {
            world(
                Layout::Debugq5,
                2,
                |r| match r {
                    1 => vec![RequestSpec::recv(0, 0, 3, 0x7000_0000, 8)],
                    _ => vec![],
                },
                |r| match r {
                    0 => vec![RequestSpec::send(0, 1, 3, 0x7000_0000, 8)],
                    _ => vec![],
                },
            )
        },
        kinds: &[FindingKind::InTransit, FindingKind::Clean],
        texts: &[(
            1,
            "No rank waits for another: only messages in transit, no point-to-point deadlock.",
        )],
        ranks: &[],
        deadlocked: "",
        no_waits: true,
        aggregated: None,
    },
    Case {
        name: "completed operations wait for nothing",
        job: || {
            world(
                Layout::Debugq5,
                2,
                |r| match r {
                    1 => vec![RequestSpec::recv(0, 0, 4, 0x7000_0000, 8).completed(0, 4)],
                    _ => vec![],
                },
                |r| match r {
                    0 => vec![RequestSpec::send(0, 1, 3, 0x7000_0000, 8).completed(1, 3)],
                    _ => vec![],
                },
            )
        },
        kinds: &[FindingKind::Clean],
        texts: &[],
        ranks: &[],
        deadlocked: "",
        no_waits: true,
        aggregated: None,
    },
    Case {
        // Ranks 0 and 1 receive from each other; ranks 2 and 3 receive from rank 0.
        name: "a chain into a cycle is blocked behind the deadlock",
        job: || {
            world(
                Layout::Debugq5,
                4,
                |r| {
                    vec![RequestSpec::recv(
                        0,
                        if r == 0 { 1 } else { 0 },
                        9,
                        0x7000_0000,
                        1,
                    )]
                },
                |_| vec![],
            )
        },
        kinds: &[FindingKind::DeadlockCycle, FindingKind::BlockedByDeadlock],
        texts: &[(
            1,
            "ranks 2,3 wait for possibly deadlocked ranks: they are stuck too if those are.",
        )],
        ranks: &[],
        deadlocked: "0-3",
        no_waits: false,
        aggregated: None,
    },
    Case {
        name: "an any-source receive while everyone else computes",
        job: || {
            world(
                Layout::Ch4Am,
                4,
                |r| match r {
                    0 => vec![RequestSpec::recv(0, MPI_ANY_SOURCE, 1, 0x7000_0000, 1)],
                    _ => vec![],
                },
                |_| vec![],
            )
        },
        kinds: &[FindingKind::IdleTarget, FindingKind::NoDeadlock],
        texts: &[(
            0,
            "ranks 1-3 have no pending point-to-point communication, yet rank 0 waits for them (in receives from any source): they are busy computing, or blocked outside point-to-point (a collective, I/O, a lock).",
        )],
        ranks: &[],
        deadlocked: "",
        no_waits: false,
        aggregated: None,
    },
];

#[test]
fn table_of_synthetic_jobs() {
    for case in CASES {
        let job = (case.job)();
        let d = diagnose(&job);
        let text = d.to_text();
        let what = case.name;
        assert_eq!(kinds(&d), case.kinds, "{what}:\n{text}");
        let names: Vec<&str> = case.kinds.iter().map(|k| k.name()).collect();
        assert_eq!(json_kinds(&d), names, "{what}");
        for &(i, want) in case.texts {
            assert_eq!(d.findings[i].text, want, "{what}");
        }
        for &(i, want) in case.ranks {
            assert_eq!(d.findings[i].ranks.to_string(), want, "{what}");
        }
        // Receives alone prove nothing: what would deadlock is only possible.
        assert_eq!(d.possibly_deadlocked.to_string(), case.deadlocked, "{what}");
        assert!(d.deadlocked.is_empty(), "{what}");
        assert_eq!(d.to_json()["deadlock"], false, "{what}");
        // Without stacks, any rank may be blocked in a call no queue shows.
        assert_eq!(d.verdict, Verdict::Undetermined, "{what}");
        assert!(
            text.contains(
                "have no stack: any of them may be blocked in a call their queues do not show"
            ),
            "{what}:\n{text}"
        );
        // With stacks that show every rank computing, nothing holds anyone.
        if case.deadlocked.is_empty() {
            let mut job = job.clone();
            let all: Vec<i32> = job.ranks.iter().map(|r| r.rank).collect();
            computing(&mut job, &all);
            let d = diagnose(&job);
            assert_eq!(d.verdict, Verdict::NoDeadlock, "{what}:\n{}", d.to_text());
        }
        if case.no_waits {
            assert!(d.waits.is_empty(), "{what}: {:?}", d.waits);
        }
        if let Some(want) = case.aggregated {
            assert_eq!(aggregate_text(&aggregate(&job)), want, "{what}");
        }
    }
}

/// A finding over many operations shows the evidence of its first 32 in text, as in
/// JSON, and says how many more there are: the same number in both.
#[test]
fn long_evidence_is_cut_alike_in_text_and_json() {
    let specs: Vec<ProcessSpec> = (0..2)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 2, r);
            spec.posted = (0..40)
                .map(|tag| RequestSpec::recv(0, 1 - r, tag, 0x7000_0000 + 64 * tag as u64, 1))
                .collect();
            spec
        })
        .collect();
    let d = diagnose(&job(&specs));
    let text = d.to_text();
    let json = d.to_json();
    let finding = &json["findings"][0];
    assert_eq!(finding["kind"], "deadlock_cycle", "{text}");
    assert_eq!(finding["evidence"].as_array().map(Vec::len), Some(32));
    assert_eq!(finding["evidence_omitted"], 80 - 32);
    let shown = text
        .lines()
        .filter(|l| l.starts_with("  rank ") && l.contains("pending receive"))
        .count();
    assert_eq!(shown, 32, "{text}");
    assert!(text.contains("  ... and 48 more (see --json)"), "{text}");
}
