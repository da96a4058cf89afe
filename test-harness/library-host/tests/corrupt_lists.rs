//! Corrupt lists, table by table: cycles in the communicator list and in each queue,
//! next pointers into unmapped memory, billion-rank communicators, garbage request
//! pointers. Each damage gives its error code, with a clear text, within a bounded number
//! of reads, without a crash, a bad free or a leak; every layout on three ABIs (LP64 and
//! ILP32 little-endian, LP64 big-endian).

mod support;

use mqd_mpich::error::Error;
use mqd_synthetic::{ProcessSpec, QueueKind, SyntheticTarget};
use support::*;

/// What a damage writes.
#[derive(Debug, Clone, Copy)]
enum Write {
    Pointer(u64),
    Int(i32),
}

/// One damage to an image: where, what, and the error it must give.
#[derive(Debug, Clone)]
struct Damage {
    what: String,
    at: u64,
    write: Write,
    /// The error of every display (communicator list damages), or of the damaged queue
    /// alone (queue damages); `None`: any answer, but bounded and clean.
    expect: Option<Error>,
}

impl Damage {
    fn new(what: impl Into<String>, at: u64, write: Write, expect: Option<Error>) -> Damage {
        Damage {
            what: what.into(),
            at,
            write,
            expect,
        }
    }

    fn applied(&self, clean: &SyntheticTarget) -> SyntheticTarget {
        let mut t = clean.clone();
        match self.write {
            Write::Pointer(value) => t.write_pointer(self.at, value),
            Write::Int(value) => t.write_i32(self.at, value),
        }
        .unwrap();
        t
    }
}

/// Damages to the communicator list: cycles (to the head, the middle, onto itself), links
/// and the list head into unmapped memory, the NULL page and the top of memory, sizes no
/// real job has, and the head into mapped garbage.
fn communicator_list_damages(spec: &ProcessSpec, t: &SyntheticTarget) -> Vec<Damage> {
    let slot = |i: usize| spec.comms[i].slot;
    let last = spec.comms.len() - 1;
    let next = |i: usize| comm_next(t, slot(i));
    let comm = |i: usize| t.comm_address(slot(i));
    let head = comm_list_head(t);
    let unmapped = t.unmapped_address();
    let local_size = t.offset_of("MPIR_Comm", "local_size");
    let remote_size = t.offset_of("MPIR_Comm", "remote_size");
    let (cycle, unreadable, implausible) = (
        Some(Error::ListCycle),
        Some(Error::ReadFailed),
        Some(Error::ImplausibleValue),
    );
    use Write::{Int, Pointer};
    vec![
        Damage::new(
            "last comm_next -> first communicator",
            next(last),
            Pointer(comm(0)),
            cycle,
        ),
        Damage::new(
            "last comm_next -> a middle communicator",
            next(last),
            Pointer(comm(2)),
            cycle,
        ),
        Damage::new(
            "first comm_next -> itself",
            next(0),
            Pointer(comm(0)),
            cycle,
        ),
        Damage::new(
            "second comm_next -> first",
            next(1),
            Pointer(comm(0)),
            cycle,
        ),
        Damage::new(
            "second comm_next -> unmapped",
            next(1),
            Pointer(unmapped),
            unreadable,
        ),
        Damage::new(
            "last comm_next -> unmapped",
            next(4),
            Pointer(unmapped),
            unreadable,
        ),
        Damage::new(
            "MPIR_All_communicators.head -> unmapped",
            head,
            Pointer(unmapped),
            unreadable,
        ),
        Damage::new(
            "MPIR_All_communicators.head -> 0x10",
            head,
            Pointer(0x10),
            unreadable,
        ),
        Damage::new(
            "MPIR_All_communicators.head -> top of memory",
            head,
            Pointer(u64::MAX - 7),
            unreadable,
        ),
        Damage::new(
            "dup: local_size = 1e9",
            comm(2) + local_size,
            Int(BILLION),
            implausible,
        ),
        Damage::new(
            "COMM_WORLD: local_size = 1e9",
            comm(4) + local_size,
            Int(BILLION),
            implausible,
        ),
        // Slot 0 is the intercommunicator "inter".
        Damage::new(
            "inter: remote_size = 1e9",
            comm(0) + remote_size,
            Int(BILLION),
            implausible,
        ),
        Damage::new(
            "split: local_size = -5",
            comm(1) + local_size,
            Int(-5),
            implausible,
        ),
        Damage::new(
            "COMM_SELF: local_size = i32::MAX",
            comm(3) + local_size,
            Int(i32::MAX),
            implausible,
        ),
        // Garbage that is mapped: anything may come back, but bounded and clean.
        Damage::new(
            "head -> misaligned communicator",
            head,
            Pointer(comm(0) + 3),
            None,
        ),
        Damage::new(
            "head -> MPIR_All_communicators itself",
            head,
            Pointer(head),
            None,
        ),
        Damage::new(
            "head -> a request",
            head,
            Pointer(t.request_address(QueueKind::Posted, 0).unwrap()),
            None,
        ),
    ]
}

/// A damaged communicator list fails every display with its error (a cycle "loops"), in a
/// bounded number of reads, and a size no job has is not allocated or read for.
#[test]
fn damaged_communicator_lists_fail_every_display_with_their_error() {
    for (spec, clean, _) in images() {
        for damage in communicator_list_damages(&spec, &clean) {
            let run = run(damage.applied(&clean), damage.what.clone());
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            let Some(expected) = damage.expect else {
                continue;
            };
            assert_display_fails(&run, expected);
            if expected == Error::ListCycle {
                assert!(run.display_error().text.contains("loops"), "{}", run.what);
            }
            if expected == Error::ImplausibleValue {
                assert!(
                    run.counters.fetch_bytes < 1 << 20,
                    "{}: {} bytes read",
                    run.what,
                    run.counters.fetch_bytes
                );
            }
        }
    }
}

/// Damages to one queue: cycles (last -> first, -> itself, -> second; first -> itself),
/// links and the head into unmapped memory, the NULL page and the top of memory, and the
/// request pointers of its first and last nodes into garbage.
fn queue_damages(spec: &ProcessSpec, t: &SyntheticTarget, kind: QueueKind) -> Vec<Damage> {
    let n = queue_len(spec, kind);
    assert!(n >= 2, "the example has at least two {kind:?}");
    let link = |i: usize| node(t, kind, i) + next_link(t, kind);
    let node_at = |i: usize| node(t, kind, i);
    let unmapped = t.unmapped_address();
    let (cycle, unreadable) = (Some(Error::ListCycle), Some(Error::ReadFailed));
    use Write::Pointer;
    let mut damages = vec![
        Damage::new(
            "last next -> first",
            link(n - 1),
            Pointer(node_at(0)),
            cycle,
        ),
        Damage::new(
            "last next -> itself",
            link(n - 1),
            Pointer(node_at(n - 1)),
            cycle,
        ),
        Damage::new("first next -> itself", link(0), Pointer(node_at(0)), cycle),
        Damage::new(
            "first next -> unmapped",
            link(0),
            Pointer(unmapped),
            unreadable,
        ),
        Damage::new(
            "last next -> unmapped",
            link(n - 1),
            Pointer(unmapped),
            unreadable,
        ),
        Damage::new("last next -> 0x8", link(n - 1), Pointer(0x8), unreadable),
        Damage::new(
            "head -> unmapped",
            queue_head(t, kind),
            Pointer(unmapped),
            unreadable,
        ),
        Damage::new(
            "head -> top of memory",
            queue_head(t, kind),
            Pointer(u64::MAX - 3),
            unreadable,
        ),
    ];
    if n >= 3 {
        damages.push(Damage::new(
            "last next -> second",
            link(n - 1),
            Pointer(node_at(1)),
            cycle,
        ));
    }
    if let Some(req) = request_link(t, kind) {
        for (what, value) in [
            ("0x8", 0x8u64),
            ("unmapped", unmapped),
            ("top of memory", u64::MAX - 15),
        ] {
            for index in [0, n - 1] {
                // Unexpected entries are described from the node alone: any answer.
                let expect = (kind != QueueKind::Unexpected).then_some(Error::ReadFailed);
                damages.push(Damage::new(
                    format!("node {index}'s request -> {what}"),
                    node_at(index) + req,
                    Pointer(value),
                    expect,
                ));
            }
        }
    }
    damages
}

/// A damaged queue is an error of that queue for every communicator; the other queues
/// stay as the clean image shows them.
#[test]
fn damaged_queues_fail_that_queue_only() {
    for (spec, clean, clean_display) in images() {
        for kind in QUEUES {
            for damage in queue_damages(&spec, &clean, kind) {
                let run = run(damage.applied(&clean), format!("{kind:?}: {}", damage.what));
                assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                match damage.expect {
                    Some(expected) => assert_only_queue_fails(&run, &clean_display, kind, expected),
                    None => {
                        run.display();
                    }
                }
            }
        }
    }
}
