//! The analysis's rules, each on the smallest job that shows it: waits from blocked
//! calls, mismatches of the calls ranks are blocked in, and collectives.

/// Waits read from the calls ranks are blocked in, and what leaves them unknown.
mod calls {
    use mqd_analysis::diagnose;
    use mqd_model::{
        CallArguments, Communicator, ContextIds, Doubt, JobDump, MpiPhase, MpiState, Operation,
        Queue, RankDump, ThreadLevel, ThreadStack, Verdict,
    };

    const WORLD: u64 = 0x1000;

    fn comm(unique_id: u64, name: &str, context: i64, rank: i32, n: i32) -> Communicator {
        Communicator {
            unique_id,
            name: name.into(),
            size: i64::from(n),
            local_rank: i64::from(rank),
            context: Some(ContextIds {
                context_id: context,
                recv_context_id: context,
            }),
            group: Some((0..n).collect()),
            group_error: None,
            pending_receives: Queue::Operations(Vec::new()),
            unexpected_messages: Queue::Operations(Vec::new()),
            pending_sends: Queue::Operations(Vec::new()),
        }
    }

    fn op(peer: i64, tag: i64) -> Operation {
        Operation::pending(peer, tag)
    }

    fn thread(tid: i32, frames: &[&str], call: Option<CallArguments>) -> ThreadStack {
        ThreadStack::named(tid, frames, call)
    }

    /// Blocked in `call` on COMM_WORLD with `peer` and `tag`.
    fn blocked(tid: i32, call: &str, peer: i64, tag: i64) -> ThreadStack {
        thread(
            tid,
            &["poll", call, "main"],
            Some(CallArguments {
                function: format!("P{call}"),
                comm_address: Some(WORLD),
                peer: Some(peer),
                tag: Some(tag),
                ..CallArguments::default()
            }),
        )
    }

    fn rank(r: i32, n: i32, threads: Vec<ThreadStack>) -> RankDump {
        RankDump {
            pid: Some(100 + r),
            threads,
            outcome: Ok(vec![comm(WORLD, "MPI_COMM_WORLD", 0, r, n)]),
            ..RankDump::unread(r, Some(100 + r), None)
        }
    }

    fn job(ranks: Vec<RankDump>) -> JobDump {
        JobDump::of_ranks(ranks)
    }

    /// Ranks 0 and 1 blocked in MPI_Recv from each other (receives ch3's debug queues
    /// never list: the waits come from the calls).
    fn recv_pair() -> JobDump {
        job((0..2)
            .map(|r| {
                rank(
                    r,
                    2,
                    vec![blocked(100 + r, "MPI_Recv", i64::from(1 - r), 7)],
                )
            })
            .collect())
    }

    #[test]
    fn unlisted_blocking_receives_wait_as_their_calls_say() {
        let d = diagnose(&recv_pair());
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert_eq!(d.possibly_deadlocked.to_string(), "0,1");
        assert!(
            d.waits
                .iter()
                .all(|w| w.call.as_deref() == Some("MPI_Recv"))
        );
        // A message on its way to rank 0 (its sender lists it) frees it, and so rank 1.
        let mut j = recv_pair();
        if let Ok(comms) = &mut j.ranks[1].outcome {
            comms[0].pending_sends = Queue::Operations(vec![op(0, 7)]);
        }
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.findings);
    }

    #[test]
    fn an_unknown_call_leaves_its_rank_unknown() {
        let j = job(vec![
            rank(
                0,
                2,
                vec![thread(100, &["poll", "MPI_Frobnicate", "main"], None)],
            ),
            rank(1, 2, vec![thread(101, &["solve", "main"], None)]),
        ]);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert!(
            d.doubts.iter().any(
                |x| matches!(x, Doubt::UnknownPlaces { example, .. } if example == "MPI_Frobnicate")
            ),
            "{:?}",
            d.doubts
        );
    }

    #[test]
    fn communicators_are_told_apart_by_their_context_ids() {
        // Two duplicates of COMM_WORLD, both unnamed and of size 2: rank 1's message on
        // the first waits unexpected at rank 0, which receives on the second.
        let dups = |r: i32| {
            let mut a = comm(0x2000, "", 48, r, 2);
            let mut b = comm(0x3000, "", 64, r, 2);
            if r == 0 {
                let mut m = op(1, 5);
                m.system_buffer = true;
                a.unexpected_messages = Queue::Operations(vec![m]);
                b.pending_receives = Queue::Operations(vec![op(1, 5)]);
            }
            vec![comm(WORLD, "MPI_COMM_WORLD", 0, r, 2), a, b]
        };
        let mut j = job((0..2).map(|r| rank(r, 2, Vec::new())).collect());
        for r in &mut j.ranks {
            r.outcome = Ok(dups(r.rank));
        }
        let d = diagnose(&j);
        let kinds: Vec<_> = d.findings.iter().map(|f| f.kind).collect();
        assert!(
            kinds.contains(&mqd_model::FindingKind::CommunicatorMismatch),
            "{kinds:?}"
        );
        assert!(
            !kinds.contains(&mqd_model::FindingKind::InTransit),
            "{kinds:?}"
        );
    }

    #[test]
    fn only_threads_that_may_call_mpi_move_their_rank() {
        // Main threads in MPI_Recv on each other; each rank has a worker computing.
        let with_worker = |level: Option<ThreadLevel>| {
            let mut j = recv_pair();
            for r in &mut j.ranks {
                r.threads.push(thread(
                    900 + r.rank,
                    &["compute", "worker", "start_thread"],
                    None,
                ));
                r.mpi = MpiState {
                    phase: Some(MpiPhase::Initialized),
                    thread_level: level,
                };
            }
            j
        };
        // MPI_THREAD_MULTIPLE: the workers may send: no deadlock.
        let d = diagnose(&with_worker(Some(ThreadLevel::Multiple)));
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.findings);
        // FUNNELED: they may not; unknown: they may or may not.
        for level in [Some(ThreadLevel::Funneled), None] {
            let d = diagnose(&with_worker(level));
            assert_eq!(d.verdict, Verdict::Undetermined, "{level:?}");
            assert_eq!(d.possibly_deadlocked.to_string(), "0,1", "{level:?}");
        }
        // A main thread waiting for its own workers, which are blocked in MPI: not
        // running.
        let mut j = recv_pair();
        for r in &mut j.ranks {
            let worker = r.threads.remove(0);
            r.threads = vec![
                thread(
                    r.pid.unwrap_or(0),
                    &["futex_wait", "___pthread_cond_wait", "main"],
                    None,
                ),
                worker,
            ];
        }
        let d = diagnose(&j);
        assert_eq!(d.possibly_deadlocked.to_string(), "0,1");
        assert!(
            d.findings
                .iter()
                .all(|f| !matches!(f.subject, mqd_model::Subject::NoDeadlock { .. }))
        );
    }

    #[test]
    fn a_receive_from_a_finalized_rank_never_completes() {
        let mut j = job(vec![
            rank(0, 2, vec![blocked(100, "MPI_Recv", 1, 7)]),
            rank(1, 2, vec![thread(101, &["nanosleep", "main"], None)]),
        ]);
        j.ranks[1].mpi.phase = Some(MpiPhase::Finalized);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.findings);
        assert_eq!(d.deadlocked.to_string(), "0");
        // Inside MPI_Finalize, not past it: its messages may be on their way.
        j.ranks[1].mpi.phase = Some(MpiPhase::Initialized);
        j.ranks[1].threads = vec![thread(101, &["poll", "MPI_Finalize", "main"], None)];
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
    }

    #[test]
    fn a_collectives_own_messages_show_the_collective() {
        // No stacks: rank 0 lists a collective's receive from rank 1.
        let mut j = job((0..2).map(|r| rank(r, 2, Vec::new())).collect());
        if let Ok(comms) = &mut j.ranks[0].outcome {
            let mut internal = op(1, -10);
            internal.collective = true;
            comms[0].pending_receives = Queue::Operations(vec![internal]);
        }
        let d = diagnose(&j);
        assert!(
            d.waits
                .iter()
                .any(|w| w.kind == mqd_model::WaitKind::Collective && w.from == 0),
            "{:?}",
            d.waits
        );
        // It is no point-to-point receive.
        assert!(
            d.waits
                .iter()
                .all(|w| w.kind != mqd_model::WaitKind::Receive)
        );
    }

    /// Rank 0 in `MPI_Sendrecv` whose source was not read (or is no rank of the job),
    /// rank 1 in `MPI_Recv` from it: rank 0 may wait for anything, so both may be
    /// deadlocked, nothing proven, every rank followed.
    #[test]
    fn a_sendrecv_with_a_half_not_known_may_wait_for_anything() {
        for source in [None, Some(7)] {
            let mut exchange = blocked(100, "MPI_Sendrecv", 1, 7);
            if let Some(call) = &mut exchange.call {
                call.recv_peer = source;
                call.recv_tag = Some(7);
            }
            let j = job(vec![
                rank(0, 2, vec![exchange]),
                rank(1, 2, vec![blocked(101, "MPI_Recv", 0, 8)]),
            ]);
            let d = diagnose(&j);
            assert!(
                !d.doubts
                    .iter()
                    .any(|x| matches!(x, Doubt::NotFollowed { .. })),
                "{source:?}: {:?}",
                d.doubts
            );
            assert_eq!(d.verdict, Verdict::Undetermined, "{source:?}");
            assert_eq!(d.possibly_deadlocked.to_string(), "0,1", "{source:?}");
            assert!(d.deadlocked.is_empty());
            // Its send is still a wait of the graph.
            assert!(
                d.waits
                    .iter()
                    .any(|w| w.from == 0 && w.kind == mqd_model::WaitKind::Send),
                "{:?}",
                d.waits
            );
        }
    }

    /// A stock MPI's rank (no queues): one thread as given.
    fn stock(r: i32, thread: ThreadStack) -> RankDump {
        RankDump {
            threads: vec![thread],
            ..RankDump::unread(r, Some(100 + r), None)
        }
    }

    /// Ranks 0 and 1 in MPI_Barrier on their columns {0, 2} and {1, 3} (one split: one
    /// context id), their members read from the library's objects; ranks 2 and 3 as
    /// `other` says.
    fn columns(other: impl Fn(i32) -> ThreadStack) -> JobDump {
        columns_in("MPI_Barrier", other)
    }

    /// [`columns`], ranks 0 and 1 in `call` on their columns.
    fn columns_in(call: &str, other: impl Fn(i32) -> ThreadStack) -> JobDump {
        let barrier = |r: i32| {
            let members = vec![r, r + 2];
            thread(
                100 + r,
                &["poll", call, "main"],
                Some(CallArguments {
                    function: format!("{call} (the caller's call)"),
                    comm: Some(0x8400_0001),
                    context_id: Some(480),
                    members: Some(members),
                    bytes: Some(0),
                    ..CallArguments::default()
                }),
            )
        };
        let mut j = job(vec![
            stock(0, barrier(0)),
            stock(1, barrier(1)),
            stock(2, other(2)),
            stock(3, other(3)),
        ]);
        j.job_size = Some(4);
        j
    }

    /// Rank `r`'s thread in MPI_Recv on COMM_WORLD from `peer`, tag 1.
    fn receive_on_world(r: i32, peer: i32) -> ThreadStack {
        thread(
            100 + r,
            &["poll", "MPI_Recv", "main"],
            Some(CallArguments {
                function: "MPI_Recv (the caller's call)".into(),
                comm: Some(mqd_scale::shared::COMM_WORLD_HANDLE),
                peer: Some(i64::from(peer)),
                tag: Some(1),
                bytes: Some(4),
                ..CallArguments::default()
            }),
        )
    }

    /// Each wait's rank and target, sorted.
    fn wait_targets(d: &mqd_model::Diagnosis) -> Vec<(i32, String)> {
        let mut waits: Vec<(i32, String)> = d
            .waits
            .iter()
            .map(|w| (w.from, format!("{:?}", w.target)))
            .collect();
        waits.sort();
        waits
    }

    #[test]
    fn a_collective_on_a_communicator_known_by_its_members_waits_for_those_not_in_it() {
        let d = diagnose(&columns(|r| {
            thread(100 + r, &["nanosleep", "compute", "main"], None)
        }));
        let waits = wait_targets(&d);
        assert_eq!(
            waits,
            vec![(0, "Rank(2)".to_owned()), (1, "Rank(3)".to_owned())],
            "{:?}",
            d.waits
        );
        // The two columns share a context id and are still two communicators.
        assert_ne!(d.waits[0].comm, d.waits[1].comm);
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.findings);
        // Their other members waiting for them on COMM_WORLD: a possible deadlock.
        let d = diagnose(&columns(|r| receive_on_world(r, r - 2)));
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
        assert_eq!(d.possibly_deadlocked.to_string(), "0-3");
        // A member list without this rank names nothing.
        let mut j = columns(|r| thread(100 + r, &["nanosleep", "compute", "main"], None));
        if let Some(call) = &mut j.ranks[0].threads[0].call {
            call.members = Some(vec![1, 3]);
        }
        assert_eq!(diagnose(&j).verdict, Verdict::Undetermined);
    }

    /// Two groups, ranks 0,2 and 1,3, joined by an intercommunicator whose queues (ch3's,
    /// through mqd's library) list each rank's receive from the remote group's `r / 2`-th
    /// member, by its `MPI_COMM_WORLD` rank too; the hang recorder's note of the call's
    /// communicator (`members`, `remote`) names the peers of the call, and its counts say
    /// no message was sent.
    fn intercomm_receives(members: impl Fn(i32) -> Vec<i32>, remote: bool) -> JobDump {
        const INTER: u64 = 0x2000;
        job((0..4)
            .map(|r| {
                let local: Vec<i32> = (0..4).filter(|m| m % 2 == r % 2).collect();
                let far: Vec<i32> = (0..4).filter(|m| m % 2 != r % 2).collect();
                let peer = i64::from(r / 2);
                let mut ic = comm(INTER, "", 480, r / 2, 2);
                ic.group = Some(local.iter().copied().collect());
                let mut op = op(peer, 1);
                op.desired_global_rank = i64::from(far[r as usize / 2]);
                op.remote_group = true;
                ic.pending_receives = Queue::Operations(vec![op]);
                let call = CallArguments {
                    function: "MPI_Recv".into(),
                    comm_address: Some(INTER),
                    peer: Some(peer),
                    tag: Some(1),
                    members: Some(members(r)),
                    remote: remote.then_some(far),
                    lineage: Some(0x1a7e),
                    ..CallArguments::default()
                };
                // Every send counted, none made: nothing is on its way.
                let traffic = mqd_model::Traffic {
                    rank: r,
                    sends_complete: true,
                    collectives_complete: true,
                    requests_complete: true,
                    ..mqd_model::Traffic::default()
                };
                RankDump {
                    outcome: Ok(vec![comm(WORLD, "MPI_COMM_WORLD", 0, r, 4), ic]),
                    traffic: Some(traffic),
                    ..rank(
                        r,
                        4,
                        vec![thread(100 + r, &["poll", "MPI_Recv", "main"], Some(call))],
                    )
                }
            })
            .collect())
    }

    #[test]
    fn receives_on_an_intercommunicator_in_the_queues_wait_for_the_remote_group_the_records_name() {
        let local = |r: i32| (0..4).filter(|m| m % 2 == r % 2).collect::<Vec<i32>>();
        let d = diagnose(&intercomm_receives(local, true));
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.doubts);
        let waits = wait_targets(&d);
        assert_eq!(
            waits,
            [
                (0, "Rank(1)"),
                (1, "Rank(0)"),
                (2, "Rank(3)"),
                (3, "Rank(2)")
            ]
            .map(|(r, t)| (r, t.to_owned()))
        );
        // Without the remote group, or with records of another local group than the
        // queues show, the peers are unknown: no proof.
        let d = diagnose(&intercomm_receives(local, false));
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
        let d = diagnose(&intercomm_receives(|r| vec![r, (r + 1) % 4], true));
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
    }

    /// A ring of `n` stock ranks (no queues), rank `r` in `call(r)` to its right
    /// neighbour with tag 1, its records saying it sent that neighbour one message and
    /// received `received(r)` from its left one.
    fn recorded_ring(
        n: i32,
        call: impl Fn(i32) -> &'static str,
        received: impl Fn(i32) -> u64,
    ) -> JobDump {
        let mut j = job((0..n)
            .map(|r| {
                let (right, left) = ((r + 1) % n, (r + n - 1) % n);
                let args = CallArguments {
                    function: call(r).into(),
                    called: Some(call(r).into()),
                    comm: Some(mqd_scale::shared::COMM_WORLD_HANDLE),
                    peer: Some(i64::from(right)),
                    tag: Some(1),
                    bytes: Some(1 << 20),
                    ..CallArguments::default()
                };
                let count = |peer, sent, received| mqd_model::TrafficCount {
                    peer,
                    tag: 1,
                    lineage: 1,
                    sent,
                    received,
                };
                let traffic = mqd_model::Traffic {
                    rank: r,
                    sends_complete: true,
                    collectives_complete: true,
                    requests_complete: true,
                    counts: vec![count(right, 1, 0), count(left, 0, received(r))],
                    comms: vec![mqd_model::CommCount {
                        handle: mqd_scale::shared::COMM_WORLD_HANDLE,
                        lineage: 1,
                        members: None,
                        size: n as u64,
                        entered: 0,
                        last: None,
                        sources: None,
                    }],
                    ..mqd_model::Traffic::default()
                };
                RankDump {
                    traffic: Some(traffic),
                    ..stock(r, thread(100 + r, &["poll", call(r), "main"], Some(args)))
                }
            })
            .collect());
        j.job_size = Some(n as u32);
        j
    }

    fn buffering(d: &mqd_model::Diagnosis) -> Option<String> {
        d.doubts.iter().find_map(|x| match x {
            Doubt::Buffering { ranks } => Some(ranks.to_string()),
            _ => None,
        })
    }

    /// A ring of standard sends the records show no receive can take is deadlocked
    /// unless the MPI buffers them: said so, not called a deadlock (an MPI may buffer
    /// 1 MiB), nor left as a bare "unproven".
    #[test]
    fn a_ring_of_standard_sends_no_receive_can_take_relies_on_buffering() {
        let d = diagnose(&recorded_ring(4, |_| "MPI_Send", |_| 0));
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
        assert_eq!(buffering(&d).as_deref(), Some("0-3"), "{:?}", d.doubts);
        assert!(
            !d.doubts.iter().any(|x| matches!(x, Doubt::Unproven { .. })),
            "{:?}",
            d.doubts
        );
        // Synchronous sends wait for good: a deadlock, nothing left to buffering.
        let d = diagnose(&recorded_ring(4, |_| "MPI_Ssend", |_| 0));
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.doubts);
        assert_eq!(buffering(&d), None);
        // One standard send in a ring of synchronous ones: the whole ring hangs on it.
        let one = |r| if r == 2 { "MPI_Send" } else { "MPI_Ssend" };
        let d = diagnose(&recorded_ring(4, one, |_| 0));
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
        assert_eq!(buffering(&d).as_deref(), Some("0-3"), "{:?}", d.doubts);
        // Rank 2 received rank 1's message (rank 1 is about to return): no proof of it,
        // and so of none.
        let d = diagnose(&recorded_ring(4, |_| "MPI_Send", |r| u64::from(r == 2)));
        assert_eq!(buffering(&d), None, "{:?}", d.doubts);
        assert_eq!(d.verdict, Verdict::Undetermined);
        // Rank 2 started a receive that may take it: likewise.
        let mut j = recorded_ring(4, |_| "MPI_Send", |_| 0);
        if let Some(t) = &mut j.ranks[2].traffic {
            t.posted = vec![mqd_model::PostedReceive {
                lineage: 1,
                source: None,
                tag: None,
            }];
        }
        assert_eq!(buffering(&diagnose(&j)), None);
        // Without records, nothing shows that no receive takes them: unproven only.
        let mut j = recorded_ring(4, |_| "MPI_Send", |_| 0);
        j.ranks.iter_mut().for_each(|r| r.traffic = None);
        let d = diagnose(&j);
        assert_eq!(buffering(&d), None);
        assert!(d.doubts.iter().any(|x| matches!(x, Doubt::Unproven { .. })));
    }

    /// A constructor whose group is not its communicator's members: every member of its
    /// communicator in it does not make it complete.
    #[test]
    fn an_intercommunicator_made_from_complete_local_groups_may_still_wait() {
        let receive = |r: i32| receive_on_world(r, 0);
        for call in [
            "MPI_Intercomm_create",
            "MPI_Intercomm_merge",
            "MPI_Comm_create_group",
        ] {
            // Rank 2 in it with rank 0, their column complete; rank 3 waits for rank 0,
            // and rank 0's call may wait for rank 3 (the remote group): no proof
            // either way.
            let mut j = columns_in(call, receive);
            j.ranks[2] = stock(2, columns_in(call, receive).ranks[0].threads[0].clone());
            if let Some(c) = &mut j.ranks[2].threads[0].call {
                c.members = Some(vec![0, 2]);
            }
            let d = diagnose(&j);
            assert_eq!(d.verdict, Verdict::Undetermined, "{call}: {:?}", d.findings);
        }
    }
}

/// A blocked call and the call its peer is blocked in that cannot match it.
mod call_mismatches {
    use mqd_analysis::diagnose;
    use mqd_model::diagnosis::Subject;
    use mqd_model::{CallArguments, Finding, FindingKind, Frame, JobDump, ThreadStack};
    use mqd_scale::shared::{ANY_TAG, COMM_WORLD_HANDLE};

    /// A thread blocked in `call` on `comm` (a handle) with `peer`, `tag` and `root`, made
    /// at `line` of prog.c.
    fn blocked(
        call: &str,
        comm: i64,
        peer: Option<i64>,
        tag: Option<i64>,
        line: u32,
    ) -> ThreadStack {
        let mut t = ThreadStack::named(
            1,
            &["poll", call, "main"],
            Some(CallArguments {
                function: call.into(),
                comm: Some(comm),
                peer,
                tag,
                ..CallArguments::default()
            }),
        );
        t.frames[2] = Frame {
            function: Some("main".into()),
            file: Some("/src/prog.c".into()),
            line: Some(line),
            ..Frame::default()
        };
        t
    }

    fn job(threads: Vec<ThreadStack>) -> JobDump {
        JobDump::of_threads(threads)
    }

    fn only(j: &JobDump, kind: FindingKind) -> Finding {
        let d = diagnose(j);
        let mut of: Vec<Finding> = d.of_kind(kind).cloned().collect();
        assert_eq!(of.len(), 1, "{kind:?}: {:?}", d.findings);
        of.remove(0)
    }

    #[test]
    fn a_receive_and_the_send_its_peer_is_blocked_in_mismatch_by_tag_or_communicator() {
        let w = COMM_WORLD_HANDLE;
        let j = job(vec![
            blocked("MPI_Ssend", w, Some(1), Some(1), 23),
            blocked("MPI_Recv", w, Some(0), Some(2), 27),
        ]);
        let f = only(&j, FindingKind::TagMismatch);
        let Subject::CallMismatch { receive, other, .. } = &f.subject else {
            panic!("{f:?}")
        };
        assert_eq!((receive.tag, other.tag), (Some(2), Some(1)));
        assert_eq!(receive.at.as_deref(), Some("prog.c:27"));
        assert_eq!(other.at.as_deref(), Some("prog.c:23"));
        assert_eq!(f.ranks.to_string(), "0,1");
        // Any tag takes it: no mismatch.
        let j = job(vec![
            blocked("MPI_Ssend", w, Some(1), Some(1), 23),
            blocked("MPI_Recv", w, Some(0), Some(ANY_TAG), 27),
        ]);
        assert!(
            diagnose(&j)
                .of_kind(FindingKind::TagMismatch)
                .next()
                .is_none()
        );
        // The same tag on a duplicate of COMM_WORLD (known by its members and context).
        let mut send = blocked("MPI_Ssend", 0x8400_0001, Some(1), Some(1), 23);
        if let Some(c) = &mut send.call {
            c.context_id = Some(16);
            c.members = Some(vec![0, 1]);
        }
        let j = job(vec![send, blocked("MPI_Recv", w, Some(0), Some(1), 27)]);
        let f = only(&j, FindingKind::CommunicatorMismatch);
        let Subject::CallMismatch { receive, other, .. } = &f.subject else {
            panic!("{f:?}")
        };
        assert_ne!(receive.comm, other.comm);
    }

    #[test]
    fn a_receive_from_one_rank_while_another_sends_is_a_source_mismatch() {
        let w = COMM_WORLD_HANDLE;
        let j = job(vec![
            blocked("MPI_Ssend", w, Some(1), Some(5), 10),
            blocked("MPI_Recv", w, Some(2), Some(5), 12),
            blocked("MPI_Barrier", w, None, None, 14),
        ]);
        let f = only(&j, FindingKind::SourceMismatch);
        assert_eq!(f.edges, [(1, 0)]);
    }

    #[test]
    fn a_receive_from_a_rank_in_a_collective_is_unmatched() {
        let w = COMM_WORLD_HANDLE;
        let j = job(vec![
            blocked("MPI_Barrier", w, None, None, 31),
            blocked("MPI_Recv", w, Some(0), Some(3), 27),
        ]);
        let f = only(&j, FindingKind::UnmatchedReceive);
        let Subject::CallMismatch { other, .. } = &f.subject else {
            panic!("{f:?}")
        };
        assert_eq!(other.call, "MPI_Barrier");
        assert_eq!(other.at.as_deref(), Some("prog.c:31"));
        // A rank blocked in a receive is a hop of a cycle, not an unmatched send.
        let j = job(vec![
            blocked("MPI_Recv", w, Some(1), Some(3), 27),
            blocked("MPI_Recv", w, Some(0), Some(3), 27),
        ]);
        assert!(
            diagnose(&j)
                .of_kind(FindingKind::UnmatchedReceive)
                .next()
                .is_none()
        );
    }

    #[test]
    fn a_rooted_collective_with_two_roots_is_a_root_mismatch() {
        let w = COMM_WORLD_HANDLE;
        let root = |r: i64, line: u32| {
            let mut t = blocked("MPI_Bcast", w, None, None, line);
            if let Some(c) = &mut t.call {
                c.root = Some(r);
            }
            t
        };
        let j = job(vec![root(0, 40), root(0, 40), root(1, 41)]);
        let f = only(&j, FindingKind::RootMismatch);
        let Subject::RootMismatch { roots, .. } = &f.subject else {
            panic!("{f:?}")
        };
        let said: Vec<(i64, String)> = roots.iter().map(|(r, s, _)| (*r, s.to_string())).collect();
        assert_eq!(said, [(0, "0,1".to_owned()), (1, "2".to_owned())]);
    }
}

/// Collectives: who a collective waits for, and collectives that do not match.
mod collectives {
    use mqd_analysis::diagnose;
    use mqd_model::{
        CallArguments, Certainty, Communicator, Diagnosis, Doubt, FindingKind, JobDump, Queue,
        RankDump, RankSet, Subject, ThreadStack, Wait, WaitKind, WaitTarget,
    };
    use mqd_scale::shared::COMM_WORLD_HANDLE;

    const WORLD_AT: u64 = 0x1000;

    /// A rank whose main thread is in `call` (or computing when `None`), with COMM_WORLD
    /// of `n` ranks at `WORLD_AT` when `queues`.
    fn rank(r: i32, n: i32, call: Option<&str>, queues: bool) -> RankDump {
        let frames = match call {
            Some(c) => vec!["poll", c, "main"],
            None => vec!["solve", "main"],
        };
        RankDump {
            mpi: mqd_model::MpiState::default(),
            rank: r,
            pid: Some(100 + r),
            host: None,
            executable: None,
            message: None,
            lists_blocking_sends: None,
            signal: None,
            duplicate: false,
            threads: vec![ThreadStack::named(
                100 + r,
                &frames,
                call.map(|c| CallArguments {
                    function: c.into(),
                    comm: Some(COMM_WORLD_HANDLE),
                    comm_address: Some(WORLD_AT),
                    context_id: Some(0),
                    // A rooted collective's instance needs its root.
                    root: (c == "MPI_Bcast").then_some(0),
                    ..CallArguments::default()
                }),
            )],
            outcome: if queues {
                Ok(vec![Communicator {
                    context: None,
                    unique_id: WORLD_AT,
                    local_rank: i64::from(r),
                    size: i64::from(n),
                    name: "MPI_COMM_WORLD".into(),
                    group: Some((0..n).collect()),
                    group_error: None,
                    pending_receives: Queue::Operations(Vec::new()),
                    unexpected_messages: Queue::Operations(Vec::new()),
                    pending_sends: Queue::Operations(Vec::new()),
                }])
            } else {
                Err("no queues".into())
            },
            notes: Vec::new(),
            traffic: None,
        }
    }

    fn job(ranks: Vec<RankDump>, size: Option<u32>) -> JobDump {
        JobDump {
            job_size: size,
            ..JobDump::of_ranks(ranks)
        }
    }

    fn run(job: &JobDump) -> Diagnosis {
        diagnose(job)
    }

    /// The collectives' waits, by waiting rank.
    fn waits(d: &Diagnosis) -> Vec<Wait> {
        let mut all: Vec<Wait> = d
            .waits
            .iter()
            .filter(|w| w.kind == WaitKind::Collective)
            .cloned()
            .collect();
        all.sort_by_key(|w| (w.from, w.target.clone()));
        all
    }

    /// The ranks whose collectives' communicators or instances are not known.
    fn unknown(d: &Diagnosis) -> RankSet {
        let mut ranks = RankSet::new();
        for x in &d.doubts {
            if let Doubt::UnknownCommunicators { ranks: r } | Doubt::Collectives { ranks: r } = x {
                ranks.union_with(r);
            }
        }
        ranks
    }

    /// The findings of the collectives: their waits and mismatches.
    fn collective_findings(d: &Diagnosis) -> Vec<&mqd_model::Finding> {
        d.findings
            .iter()
            .filter(|f| {
                matches!(
                    f.kind,
                    FindingKind::CollectiveWait | FindingKind::CollectiveMismatch
                )
            })
            .collect()
    }

    #[test]
    fn members_outside_the_collective_are_waited_for() {
        let j = job(
            (0..4)
                .map(|r| rank(r, 4, (r < 3).then_some("MPI_Allreduce"), true))
                .collect(),
            None,
        );
        let c = run(&j);
        assert!(unknown(&c).is_empty(), "{:?}", c.doubts);
        let edges: Vec<(i32, WaitTarget)> = waits(&c)
            .iter()
            .map(|w| (w.from, w.target.clone()))
            .collect();
        assert_eq!(
            edges,
            (0..3).map(|r| (r, WaitTarget::Rank(3))).collect::<Vec<_>>()
        );
        assert!(
            waits(&c)
                .iter()
                .all(|w| !w.blocked && w.kind == WaitKind::Collective)
        );
        let Subject::Collective { comm, others, .. } = &collective_findings(&c)[0].subject else {
            panic!("{:?}", c.findings);
        };
        assert_eq!(comm.as_ref().map(|k| &*k.name), Some("MPI_COMM_WORLD"));
        assert_eq!(others[0].1, "not in MPI (in solve)");
    }

    #[test]
    fn a_rooted_collective_whose_root_is_unknown_is_no_known_instance() {
        let mut j = job(
            (0..4)
                .map(|r| rank(r, 4, Some("MPI_Bcast"), true))
                .collect(),
            None,
        );
        for r in &mut j.ranks {
            r.threads[0].call.as_mut().unwrap().root = None;
        }
        let c = run(&j);
        assert_eq!(
            unknown(&c),
            RankSet::full(4),
            "the same call, maybe not the same instance: {:?}",
            c.doubts
        );
        assert!(waits(&c).is_empty());
    }

    #[test]
    fn members_of_one_collective_with_different_sizes_are_a_mismatch() {
        let mut j = job(
            (0..4)
                .map(|r| rank(r, 4, Some("MPI_Allreduce"), true))
                .collect(),
            None,
        );
        for r in &mut j.ranks {
            r.threads[0].call.as_mut().unwrap().bytes = Some(if r.rank == 0 { 8 } else { 4 });
        }
        let c = run(&j);
        let found = collective_findings(&c);
        let kinds: Vec<FindingKind> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::CollectiveMismatch]);
        let Subject::CollectiveMismatch { calls, .. } = &found[0].subject else {
            panic!("{:?}", c.findings);
        };
        let names: Vec<&str> = calls.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            names,
            ["MPI_Allreduce (4 bytes)", "MPI_Allreduce (8 bytes)"]
        );
    }

    #[test]
    fn different_collectives_on_one_communicator_are_a_mismatch() {
        let j = job(
            (0..4)
                .map(|r| {
                    let call = if r == 0 { "MPI_Barrier" } else { "MPI_Bcast" };
                    rank(r, 4, Some(call), true)
                })
                .collect(),
            None,
        );
        let c = run(&j);
        let found = collective_findings(&c);
        let kinds: Vec<FindingKind> = found.iter().map(|f| f.kind).collect();
        // Everyone is in a collective: the mismatch says it all.
        assert_eq!(kinds, [FindingKind::CollectiveMismatch]);
        assert_eq!(found[0].certainty, Certainty::Possible);
        // Rank 0 waits for 1-3, and each of them for rank 0.
        assert_eq!(waits(&c).len(), 6);
    }

    /// With the hang recorder's counts: the same point of the communicator's collectives
    /// in every rank is a mismatch for certain; different points are ranks behind (said
    /// so, `mqd-render`'s words tests).
    #[test]
    fn counted_collectives_tell_a_mismatch_from_ranks_behind() {
        for (counts, certainty) in [([5, 5], Certainty::Definite), ([4, 5], Certainty::Possible)] {
            let mut j = job(
                (0..4)
                    .map(|r| {
                        let call = if r == 0 { "MPI_Bcast" } else { "MPI_Barrier" };
                        rank(r, 4, Some(call), true)
                    })
                    .collect(),
                None,
            );
            for r in &mut j.ranks {
                let n = if r.rank == 0 { counts[0] } else { counts[1] };
                r.threads[0].call.as_mut().unwrap().collective = Some(n);
            }
            let c = run(&j);
            let found = collective_findings(&c);
            assert_eq!(found.len(), 1, "{:?}", c.findings);
            assert_eq!(found[0].certainty, certainty, "{counts:?}");
            let Subject::CollectiveMismatch { calls, counted, .. } = &found[0].subject else {
                panic!("{:?}", c.findings);
            };
            // Calls by name: MPI_Barrier (ranks 1-3), then MPI_Bcast (rank 0).
            assert_eq!(calls[0].0, "MPI_Barrier");
            assert_eq!(counted, &[Some(counts[1]), Some(counts[0])]);
            // Not a proof of a hang either way: the hold decides.
            assert_ne!(c.verdict, mqd_model::diagnosis::Verdict::NoDeadlock);
        }
    }

    #[test]
    fn without_queues_only_comm_world_is_known_by_its_handle() {
        // The job's size says who COMM_WORLD's members are.
        let j = job(
            (0..3)
                .map(|r| rank(r, 3, (r < 2).then_some("MPI_Allreduce"), false))
                .collect(),
            Some(3),
        );
        let c = run(&j);
        assert!(unknown(&c).is_empty(), "{:?}", c.doubts);
        assert_eq!(waits(&c).len(), 2);
        // Without the size, the communicator's members are unknown.
        let j = job(
            (0..3)
                .map(|r| rank(r, 3, (r < 2).then_some("MPI_Allreduce"), false))
                .collect(),
            None,
        );
        let c = run(&j);
        assert_eq!(
            unknown(&c),
            RankSet::from_i32s([0, 1]),
            "{:?} {:?} {:?} {:?}",
            c.verdict,
            c.doubts,
            c.findings,
            c.waits
        );
        assert!(waits(&c).is_empty());
        let Subject::Collective { comm: None, .. } = &collective_findings(&c)[0].subject else {
            panic!("{:?}", c.findings);
        };
    }
}
