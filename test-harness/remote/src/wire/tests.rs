use super::*;
use mqd_model::{Communicator, Frame, Operation, OperationStatus, Queue, ThreadStack};
use proptest::prelude::*;

fn operation(peer: i64, tag: i64, buffer: u64) -> Operation {
    Operation {
        collective: false,
        status: OperationStatus::Pending,
        desired_local_rank: peer,
        desired_global_rank: peer,
        tag_wild: false,
        desired_tag: tag,
        desired_length: 400,
        system_buffer: false,
        buffer,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: vec!["MPI_Ssend".into()],
        sender: None,
        request: Some(buffer + 0x40),
        remote_group: false,
    }
}

fn comm(
    name: &str,
    id: u64,
    local_rank: i64,
    group: Vec<i32>,
    sends: Vec<Operation>,
) -> Communicator {
    Communicator {
        context: None,
        unique_id: id,
        name: name.into(),
        size: group.len() as i64,
        local_rank,
        group: Some(group.into()),
        group_error: None,
        pending_receives: Queue::Operations(Vec::new()),
        unexpected_messages: Queue::NoInformation,
        pending_sends: Queue::Operations(sends),
    }
}

/// A rank of an `n`-rank job: in a ring of MPI_Ssend when `ring`, else in a collective;
/// `slide` moves every address (ASLR).
pub(crate) fn rank(n: i32, r: i32, ring: bool, slide: u64) -> RankDump {
    let pid = 4000 + 3 * r;
    let sends = if ring {
        vec![operation(i64::from((r + 1) % n), 5, 0x7000_0000 + slide)]
    } else {
        Vec::new()
    };
    let frame = |address: u64, function: &str| Frame {
        mpi: false,
        address: address + slide,
        function: Some(function.into()),
        object: Some("/usr/lib/libmpi.so.12".into()),
        offset: 0x24,
        file: Some("src/mpi/pt2pt/send.c".into()),
        line: Some(88),
        inlined: false,
        language: None,
    };
    RankDump {
        mpi: mqd_model::MpiState::default(),
        rank: r,
        pid: Some(pid),
        host: Some("node7".into()),
        executable: Some("/home/u/ring".into()),
        message: None,
        signal: None,
        duplicate: false,
        threads: vec![
            ThreadStack {
                openmp: None,
                tid: pid,
                frames: vec![
                    frame(0x7f00_0000_1000, "MPI_Ssend"),
                    frame(0x5555_0000_0100, "main"),
                ],
                truncated: None,
                call: None,
            },
            ThreadStack {
                openmp: None,
                tid: pid + 1,
                frames: vec![Frame {
                    address: 0xffff_ffff_ff60_0000,
                    ..Frame::default()
                }],
                truncated: Some("an address outside every object".into()),
                call: None,
            },
        ],
        lists_blocking_sends: Some(true),
        outcome: Ok(vec![
            comm(
                "MPI_COMM_WORLD",
                0x5555_0000_2000 + slide,
                i64::from(r),
                (0..n).collect(),
                sends,
            ),
            comm(
                "MPI_COMM_SELF",
                0x5555_0000_3000 + slide,
                0,
                vec![r],
                Vec::new(),
            ),
        ]),
        notes: Vec::new(),
        traffic: None,
    }
}

fn round_trip(dumps: &[RankDump]) -> (Vec<Record>, Vec<RankDump>) {
    let records = Encoder::new().encode(3, dumps).expect("encode");
    // Through the text of the stream, as an agent writes it.
    let lines: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).expect("a line"))
        .collect();
    let mut decoder = Decoder::new();
    let mut back = Vec::new();
    for line in &lines {
        match serde_json::from_str::<Record>(line).expect("a record") {
            Record::State(s) => decoder.add_state(s),
            Record::Ranks(r) => {
                assert_eq!(r.host, 3);
                back.extend(decoder.ranks(&r, |_| "node7".into()).expect("ranks"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    back.sort_by_key(|d| (d.rank < 0, d.rank, d.pid));
    (records, back)
}

fn sorted(mut dumps: Vec<RankDump>) -> Vec<RankDump> {
    dumps.sort_by_key(|d| (d.rank < 0, d.rank, d.pid));
    dumps
}

fn count(records: &[Record], state: bool) -> usize {
    records
        .iter()
        .filter(|r| {
            matches!(
                (r, state),
                (Record::State(_), true) | (Record::Ranks(_), false)
            )
        })
        .count()
}

#[test]
fn identical_ranks_are_one_template_and_one_line() {
    let dumps: Vec<RankDump> = (0..64).map(|r| rank(64, r, false, 0)).collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, dumps);
    assert_eq!((count(&records, true), count(&records, false)), (1, 1));
    let Record::Ranks(line) = &records[1] else {
        panic!("{records:?}")
    };
    assert_eq!(line.ranks.to_string(), "0-63");
    // The rank's own numbers (its WORLD rank, the SELF group, thread ids) are tokens.
    assert!(
        line.delta.iter().any(|(t, _)| *t == Token::Wrap),
        "{line:?}"
    );
    assert!(line.delta.iter().any(|(t, _)| *t == Token::Pid), "{line:?}");
}

#[test]
fn a_ring_is_one_line_neighbours_wrapping_around() {
    let dumps: Vec<RankDump> = (0..16).map(|r| rank(16, r, true, 0)).collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, dumps);
    assert_eq!((count(&records, true), count(&records, false)), (1, 1));
}

#[test]
fn slid_addresses_and_failures_and_unknown_ranks_come_back() {
    let mut dumps: Vec<RankDump> = (0..8)
        .map(|r| rank(8, r, true, u64::try_from(r).unwrap() << 24))
        .collect();
    dumps[2].outcome = Err("rank 2 (pid 4006): its memory could not be read".into());
    dumps[5].rank = -1;
    let mut twice = dumps[4].clone();
    twice.duplicate = true;
    dumps.push(twice);
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, sorted(dumps));
    // Moved addresses are the rank's slides: one template for the ranks dumped (and
    // one each for the failed one and the duplicate, of other shapes).
    assert_eq!(count(&records, true), 3, "{records:?}");
    for r in &records {
        if let Record::Ranks(line) = r {
            assert!(
                line.delta.iter().any(|(t, _)| *t == Token::Slide(0)) || line.slides.is_empty(),
                "{line:?}"
            );
        }
    }
}

#[test]
fn a_corrupt_line_is_an_error_not_a_rank() {
    let dumps: Vec<RankDump> = (0..4).map(|r| rank(4, r, true, 0)).collect();
    let records = Encoder::new().encode(0, &dumps).expect("encode");
    let mut decoder = Decoder::new();
    for r in &records {
        match r {
            Record::State(s) => decoder.add_state(s.clone()),
            Record::Ranks(line) if !line.delta.is_empty() => {
                let mut short = line.clone();
                short.delta.pop();
                assert!(decoder.ranks(&short, |_| "h".into()).is_err());
                let mut long = line.clone();
                long.delta.push((Token::By(1), 3));
                assert!(decoder.ranks(&long, |_| "h".into()).is_err());
                let mut pids = line.clone();
                let n = pids.pids.len();
                pids.pids = pids.pids.iter().take(n - 1).collect();
                assert!(decoder.ranks(&pids, |_| "h".into()).is_err());
                let mut slid = line.clone();
                slid.delta[0].0 = Token::Slide(3);
                slid.slides = vec![vec![1 << 20]; line.pids.len()];
                assert!(decoder.ranks(&slid, |_| "h".into()).is_err());
            }
            _ => {}
        }
    }
    let orphan = RanksRecord {
        host: 0,
        state: 99,
        ranks: RankSet::single(0),
        pids: [Some(1)].into_iter().collect(),
        hosts: HostRuns::default(),
        delta: Vec::new(),
        slides: Vec::new(),
    };
    assert!(decoder.ranks(&orphan, |_| "h".into()).is_err());
}

proptest! {
    #[test]
    fn any_numbers_come_back(
        values in proptest::collection::vec((any::<i64>(), any::<u64>(), -1i32..5000), 1..12)
    ) {
        let dumps: Vec<RankDump> = values
            .iter()
            .enumerate()
            .map(|(i, &(signed, unsigned, r))| {
                let mut d = rank(4, i as i32, true, 0);
                d.rank = r;
                d.pid = Some(i as i32 * 7);
                if let Ok(comms) = &mut d.outcome {
                    comms[0].local_rank = signed;
                    comms[0].unique_id = unsigned;
                }
                d.threads[0].frames[0].address = unsigned.rotate_left(7);
                d
            })
            .collect();
        let (_, back) = round_trip(&dumps);
        prop_assert_eq!(back, sorted(dumps));
    }
}

#[test]
fn numbers_inside_strings_are_numbers() {
    for text in [
        "mqd: 'rank 12 (pid 4711, /usr/lib/mpich-4.0/x86_64/libmpi.so.12)' has queues",
        "request 0x55ab75e65710 and 0X12 and 0x0 and 0x00ff and 0xfffffffffffffffff",
        "007 and 10x and 5.x and -3 and \u{1}d and 123456789012345678901234",
        "",
        "\u{1}\u{1}x",
    ] {
        let (pattern, numbers) = split_text(text);
        assert_eq!(
            join_text(&pattern, &mut numbers.into_iter())
                .ok()
                .as_deref(),
            Some(text)
        );
    }
    let (pattern, numbers) = split_text("rank 3 (pid 4711): request 0x55ab75e65710");
    assert_eq!(numbers, vec![3, 4711, 0x55ab_75e6_5710]);
    assert_eq!(pattern, "rank \u{1}d (pid \u{1}d): request \u{1}x");
}

proptest! {
    #[test]
    fn any_string_comes_back(text in "[a-f0-9x \u{1}.:()-]{0,40}") {
        let (pattern, numbers) = split_text(&text);
        prop_assert_eq!(join_text(&pattern, &mut numbers.into_iter()).ok(), Some(text));
    }
}

#[test]
fn a_large_job_costs_no_more_per_template_than_a_small_one() {
    let size = |n: i32| -> usize {
        let dumps: Vec<RankDump> = (0..8).map(|r| rank(n, r, true, 0)).collect();
        let (records, back) = round_trip(&dumps);
        assert_eq!(back, dumps);
        records
            .iter()
            .map(|r| serde_json::to_string(r).expect("a line").len())
            .sum()
    };
    // COMM_WORLD's group 0..N is a range, whatever N: only the digits of N grow.
    let (small, large) = (size(16), size(1 << 20));
    assert!(
        large < small + 32,
        "{small} bytes for 16 ranks, {large} for 2^20"
    );
    for (list, text) in [
        (vec![3, 5, 7, 9], "{\"\\u0001range\":[3,2,4]}"),
        (vec![1, 2, 3], "[1,2,3]"),
        (vec![1, 2, 4, 5], "[1,2,4,5]"),
    ] {
        let value = compact(serde_json::json!(list));
        assert_eq!(value.to_string(), text);
        assert_eq!(expand(value).ok(), Some(serde_json::json!(list)));
    }
    assert!(expand(serde_json::json!({"\u{1}range": [0, 1, 1i64 << 40]})).is_err());
    assert!(expand(serde_json::json!({"\u{1}range": [i64::MAX, 1, 3]})).is_err());
}

/// How many classes the merge makes of one agent's `records`.
fn classes(records: Vec<Record>) -> usize {
    let mut merger = crate::merge::Merger::new();
    for record in records {
        match record {
            Record::State(s) => merger.add_state(0, s),
            Record::Ranks(line) => merger.add_line(0, line).expect("a line"),
            _ => {}
        }
    }
    count(&merger.records(0), false)
}

#[test]
fn ranks_whose_threads_the_kernel_numbered_otherwise_are_one_line() {
    // Processes started together: their threads' ids interleave, at no fixed distance
    // from their pids.
    let dumps: Vec<RankDump> = (0..16)
        .map(|r| {
            let mut d = rank(16, r, true, 0);
            d.threads[1].tid = 4000 + 3 * 16 + (r * 7) % 16 * 5;
            d
        })
        .collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, dumps);
    assert_eq!(count(&records, true), 1, "one template");
    // The template's own rank reads as itself; the merge finds its class.
    assert_eq!(classes(records), 1, "one class");
}

#[test]
fn ranks_whose_thread_ids_wrapped_around_are_one_line() {
    // pid_max reached while the ranks started their threads: some threads' ids (the
    // first rank's among them) are far below their pids, others not.
    let dumps: Vec<RankDump> = (0..16)
        .map(|r| {
            let mut d = rank(16, r, true, 0);
            d.pid = Some(32_700 + r);
            d.threads[0].tid = 32_700 + r;
            d.threads[1].tid = if r % 3 == 0 { 300 + 7 * r } else { 32_740 + r };
            d
        })
        .collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, dumps);
    assert_eq!(classes(records), 1, "one class");
}

/// Rank `r` of an `n`-rank job split into rows of four, each rank in `MPI_Ssend` to its
/// right neighbour in its row, on the row.
pub(crate) fn row_rank(n: i32, r: i32) -> RankDump {
    let mut d = rank(n, r, false, 0);
    let first = r - r % 4;
    let local = r % 4;
    let right = (local + 1) % 4;
    let mut send = operation(i64::from(first + right), 5, 0x7000_0000);
    send.desired_local_rank = i64::from(right);
    let row = comm(
        "",
        0x5555_0000_4000,
        i64::from(local),
        (first..first + 4).collect(),
        vec![send],
    );
    if let Ok(comms) = &mut d.outcome {
        comms.push(row);
    }
    d
}

#[test]
fn a_splits_columns_are_one_line_each_whichever_rank_is_their_template() {
    // A host's ranks 50-99 of 300: its first rank, 50, is of the third column.
    let dumps: Vec<RankDump> = (50..100).map(|r| row_rank(300, r)).collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, sorted(dumps));
    // One template, and one line per column.
    assert_eq!(count(&records, true), 1);
    assert_eq!(count(&records, false), 4);
    // Pids that wrapped around (pid_max 32768) to near the ranks' local ranks: a local
    // rank that moves as the pid does within the first row is no pid.
    let dumps: Vec<RankDump> = (2624..2688)
        .map(|r| {
            let mut d = row_rank(4096, r);
            let pid = 300 + r - 2624;
            d.pid = Some(pid);
            d.threads[0].tid = pid;
            d.threads[1].tid = pid + 10_000;
            d
        })
        .collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, sorted(dumps));
    assert_eq!(count(&records, false), 4);
}

proptest! {
    /// Ranks whose numbers are values, distances from their own ranks, pids or anything
    /// (rows of any width, pids near the ranks or far, numbers at random) rebuild exactly
    /// whatever each number is written as.
    #[test]
    fn numbers_tied_to_ranks_or_not_come_back(
        width in 1i32..6,
        pid_base in prop_oneof![Just(0i32), Just(3000), 0..5000],
        ranks in proptest::collection::btree_set(0i32..200, 1..40),
        noise in proptest::collection::vec(any::<i16>(), 40),
    ) {
        let dumps: Vec<RankDump> = ranks
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let mut d = row_rank(200, r);
                let pid = pid_base + r;
                d.pid = Some(pid);
                d.threads[0].tid = pid;
                if let Ok(comms) = &mut d.outcome {
                    let row = &mut comms[2];
                    let first = r - r % width;
                    row.group = Some((first..first + width).collect());
                    row.size = i64::from(width);
                    row.local_rank = if noise[i] % 3 == 0 {
                        i64::from(noise[i])
                    } else {
                        i64::from(r % width)
                    };
                }
                d
            })
            .collect();
        let (_, back) = round_trip(&dumps);
        prop_assert_eq!(back, sorted(dumps));
    }
}

/// The hang recorder's counts come back whole; a ring's (each rank's to its right and
/// from its left neighbour) stays one line, its peers coded as the rank's neighbours.
#[test]
fn a_rings_message_counts_come_back_and_stay_one_line() {
    let n = 16;
    let dumps: Vec<RankDump> = (0..n)
        .map(|r| {
            let mut d = rank(n, r, true, 0);
            let count = |peer: i32, sent, received| mqd_model::TrafficCount {
                peer,
                tag: 5,
                lineage: 1,
                sent,
                received,
            };
            // As mqd-job lists them: by distance to the right.
            let counts = vec![count((r + 1) % n, 3, 0), count((r + n - 1) % n, 0, 3)];
            // Two barriers entered on the world: alike in every rank.
            let world = mqd_model::CommCount {
                handle: 0x4400_0000,
                lineage: 1,
                members: None,
                size: n as u64,
                entered: 2,
                last: Some(("MPI_Barrier".into(), None)),
                sources: None,
            };
            d.traffic = Some(mqd_model::Traffic {
                rank: r,
                sends_complete: true,
                counts,
                collectives_complete: true,
                comms: vec![world],
                ..mqd_model::Traffic::default()
            });
            d
        })
        .collect();
    let (records, back) = round_trip(&dumps);
    assert_eq!(back, dumps);
    assert_eq!(classes(records), 1);
}
