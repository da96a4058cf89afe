//! The diagnosis of real fixture jobs (processes laying out MPICH's structures), dumped
//! with ptrace.

mod support;

use mqd::render::dot::{self as graph, DotOptions};
use mqd_fixtures::{self as fixtures, JobOptions, spawn_job, spawn_rank};
use mqd_job::dump::{self, JobContext, ProcessRef};
use mqd_model::{Acquisition, Certainty, FindingKind, JobDump, Verdict};
use mqd_synthetic::Layout;
use serde_json::Value;
use support::*;

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
    dump_ranks_with(processes, true)
}

fn dump_ranks_with(processes: &[ProcessRef], stacks: bool) -> JobDump {
    let dll = mqd_library_host::library::bundled_library().expect("libmqd_mpich.so is built");
    let context = JobContext {
        stacks,
        ..JobContext::new(Acquisition::Mpir)
    };
    dump::dump_processes(processes, Some(&dll), &context, &dump::Quiet)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The job's queues only (`--no-stacks`).
fn dump_job_without_stacks(job: &fixtures::Job) -> JobDump {
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
    dump_ranks_with(&processes, false)
}

/// Blocking MPI_Ssends prove the deadlock where the library lists only non-blocking sends
/// and records synchronous messages (ch3, ch4); the debug queues can only suggest it.
#[test]
fn real_fixture_blocking_ssend_ring_is_a_proven_deadlock() {
    // Every rank's stack shows it in MPI_Ssend to its right neighbour, whose unexpected
    // queue holds the message: proven on every layout.
    for (layout, verdict) in [
        (Layout::Ch3, Verdict::Deadlock),
        (Layout::Ch4Am, Verdict::Deadlock),
        (Layout::Debugq5, Verdict::Deadlock),
    ] {
        let job = spawn_job(&JobOptions::new(4, layout, "ssend-ring")).unwrap();
        let dump = dump_job(&job);
        drop(job);
        let d = diagnose(&dump);
        let text = d.to_text();
        assert_eq!(d.verdict, verdict, "{layout:?}:\n{text}");
        assert_eq!(
            kinds(&d),
            [FindingKind::DeadlockCycle],
            "{layout:?}:\n{text}"
        );
        let certainty = if verdict == Verdict::Deadlock {
            Certainty::Definite
        } else {
            Certainty::Possible
        };
        assert_eq!(d.findings[0].certainty, certainty, "{layout:?}:\n{text}");
        assert_eq!(d.findings[0].cycle.as_deref(), Some(&[0, 1, 2, 3][..]));
    }
}

#[test]
fn real_fixture_ring_job_is_diagnosed() {
    let scratch = Scratch::new("real-fixture-ring-job-is");
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
        // Each rank waits in MPI_Wait for its MPI_Issend, whose message the fixture lays
        // out as an eager one: nothing says that its sender waits for the match.
        let (certainty, verdict, head) = (
            Certainty::Possible,
            Verdict::Undetermined,
            "Possible deadlock",
        );
        assert!(
            d.findings[0].text.starts_with(&format!(
                "{head}: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Wait for a send to its right neighbour on \"ring\", tag 5; no receive is posted on any of them."
            )),
            "{layout:?}: {}",
            d.findings[0].text
        );
        assert_eq!(d.findings[0].certainty, certainty, "{layout:?}");
        assert_eq!(d.verdict, verdict, "{layout:?}");
        for r in 0..4 {
            assert!(
                text.contains(&format!(
                    "rank {r} has a pending send to rank {} on \"ring\", tag 5, count 1000",
                    (r + 1) % 4
                )),
                "{layout:?}:\n{text}"
            );
        }
        assert_eq!(json_kinds(&d), ["deadlock_cycle"]);
        assert_eq!(d.to_json()["possibly_deadlocked"], "0-3");
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
            &scratch.file(&format!("real-ring-{}.svg", layout.name())),
        )
        .unwrap();
    }
}

#[test]
fn real_fixture_tag_mismatch_job_is_diagnosed() {
    // Every rank waits for tag 200 from its left neighbour, whose messages (tags 100, 103)
    // wait unexpected; each also holds a rendezvous message from its right neighbour.
    let job = spawn_job(&JobOptions::new(4, Layout::Debugq5, "unexpected")).unwrap();
    // The queues alone: their stacks show the ranks outside MPI, which holds nobody.
    let dump = dump_job_without_stacks(&job);
    let with_stacks = diagnose(&dump_job(&job));
    assert_eq!(
        with_stacks.verdict,
        Verdict::NoDeadlock,
        "{}",
        with_stacks.to_text()
    );
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
        "Possible deadlock: ranks 0 -> 3 -> 2 -> 1 -> 0 each have a receive from its left neighbour on \"MPI_COMM_WORLD\", tag 200 pending; none of them has a send pending. They are deadlocked if they are blocked in these calls (a queue cannot tell MPI_Recv from MPI_Irecv)."
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
    assert!(
        idle.evidence
            .iter()
            .any(|e| e.starts_with("rank 2 has a pending receive from rank 0 on \"kept\", tag 6")),
        "{text}"
    );
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
