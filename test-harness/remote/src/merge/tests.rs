use super::*;
use crate::wire::tests::rank;
use crate::wire::{Decoder, Encoder};
use mqd_model::RankDump;

/// The records of `hosts` hosts of `per_host` ranks each, each host its own stream (its
/// own templates), merged; with their ranks rebuilt from the merged records.
fn merged(dumps: &[RankDump], per_host: usize) -> (Vec<Record>, Vec<RankDump>) {
    let mut merger = Merger::new();
    for (host, share) in dumps.chunks(per_host).enumerate() {
        let mut share = share.to_vec();
        for d in &mut share {
            d.host = Some(format!("node{host}"));
        }
        for record in Encoder::new().encode(host as u32, &share).expect("encode") {
            // Through the text of the stream, as a relay reads it.
            let line = serde_json::to_string(&record).expect("a line");
            match serde_json::from_str::<Record>(&line).expect("a record") {
                Record::State(s) => merger.add_state(host, s),
                Record::Ranks(r) => merger.add_line(host, r).expect("merged"),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let records = merger.records(0);
    let mut decoder = Decoder::new();
    let mut back = Vec::new();
    for record in &records {
        match record {
            Record::State(s) => decoder.add_state(s.clone()),
            Record::Ranks(r) => {
                back.extend(decoder.ranks(r, |h| format!("node{h}")).expect("ranks"))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    back.sort_by_key(|d| (d.rank < 0, d.rank, d.pid));
    (records, back)
}

fn with_hosts(mut dumps: Vec<RankDump>, per_host: usize) -> Vec<RankDump> {
    for (i, d) in dumps.iter_mut().enumerate() {
        d.host = Some(format!("node{}", i / per_host));
    }
    dumps
}

fn lines(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, Record::Ranks(_)))
        .count()
}

#[test]
fn a_ring_on_many_hosts_is_one_class() {
    let (n, per_host) = (256, 16);
    let dumps: Vec<RankDump> = (0..n).map(|r| rank(n, r, true, 0)).collect();
    let (records, back) = merged(&dumps, per_host as usize);
    assert_eq!(back, with_hosts(dumps, per_host as usize));
    assert_eq!(lines(&records), 1, "{records:?}");
    let Some(Record::Ranks(line)) = records.iter().find(|r| matches!(r, Record::Ranks(_))) else {
        unreachable!()
    };
    // The pids (4000 + 3r) are no run of consecutive numbers; the hosts are 16 runs.
    assert_eq!(line.hosts.len(), n as usize);
    assert_eq!(
        serde_json::to_value(&line.hosts)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        16
    );
}

#[test]
fn deviants_slides_and_duplicates_keep_their_own_lines() {
    let (n, per_host) = (64, 8);
    let mut dumps: Vec<RankDump> = (0..n)
        // Each process placed by the layout on its own.
        .map(|r| rank(n, r, r != 37 && r != 38, (r as u64 * 7919 % 61) << 24))
        .collect();
    // A process that claims rank 5 too, and one of unknown rank.
    let mut twin = rank(n, 5, true, 0);
    twin.pid = Some(99_999);
    twin.duplicate = true;
    dumps.insert(6, twin);
    let mut unknown = rank(n, 0, false, 0);
    unknown.rank = -1;
    unknown.pid = Some(77_777);
    dumps.push(unknown);
    let (records, back) = merged(&dumps, per_host);
    let mut expected = with_hosts(dumps, per_host);
    expected.sort_by_key(|d| (d.rank < 0, d.rank, d.pid));
    assert_eq!(back, expected);
    // The ring's class (slides differ by host), the two in a collective, the twin, the
    // process of unknown rank.
    assert_eq!(lines(&records), 4, "{records:#?}");
}

#[test]
fn pids_started_one_after_another_are_one_run() {
    let pids: PidRuns = [Some(10), Some(11), Some(12), None, None, Some(40), Some(41)]
        .into_iter()
        .collect();
    assert_eq!(
        serde_json::to_string(&pids).unwrap(),
        "[[10,3],[null,2],[40,2]]"
    );
    assert_eq!(pids.len(), 7);
    assert_eq!(
        pids.iter().collect::<Vec<_>>(),
        [Some(10), Some(11), Some(12), None, None, Some(40), Some(41)]
    );
}

#[test]
fn a_line_of_an_unknown_state_or_wrong_lengths_is_refused() {
    let mut merger = Merger::new();
    let dumps: Vec<RankDump> = (0..4).map(|r| rank(4, r, true, 0)).collect();
    let records = Encoder::new().encode(0, &dumps).expect("encode");
    let mut line = None;
    for r in records {
        match r {
            Record::State(s) => merger.add_state(0, s),
            Record::Ranks(r) => line = Some(r),
            _ => {}
        }
    }
    let line = line.expect("a line");
    assert!(matches!(
        merger.add_line(1, line.clone()),
        Err(StreamError::UnknownState(_))
    ));
    let mut short = line.clone();
    short.pids = line.pids.iter().skip(1).collect();
    assert!(matches!(
        merger.add_line(0, short),
        Err(StreamError::Lengths { what: "pids", .. })
    ));
    let mut hosts = line.clone();
    hosts.hosts.push(3);
    assert!(matches!(
        merger.add_line(0, hosts),
        Err(StreamError::Lengths { what: "hosts", .. })
    ));
    assert!(merger.add_line(0, line).is_ok());
    assert_eq!(merger.classes(), 1);
}

proptest::proptest! {
    /// Whatever the states, layouts and hosts, the merged stream rebuilds every rank.
    #[test]
    fn every_rank_comes_back_merged(
        n in 1..40i32,
        per_host in 1..9usize,
        ring in proptest::collection::vec(proptest::bool::ANY, 40),
        slide in proptest::collection::vec(0..4u64, 40),
    ) {
        let dumps: Vec<RankDump> = (0..n)
            .map(|r| rank(n, r, ring[r as usize], slide[r as usize] << 30))
            .collect();
        let (_, back) = merged(&dumps, per_host);
        proptest::prop_assert_eq!(back, with_hosts(dumps, per_host));
    }
}

#[test]
fn a_splits_columns_are_one_class_each_across_hosts() {
    // Hosts of 50 ranks: the first rank of every other host is of the third column.
    let (n, per_host) = (300, 50);
    let dumps: Vec<RankDump> = (0..n).map(|r| crate::wire::tests::row_rank(n, r)).collect();
    let (records, back) = merged(&dumps, per_host as usize);
    assert_eq!(back, with_hosts(dumps, per_host as usize));
    // One class per column, whichever column each host's template is of.
    assert_eq!(lines(&records), 4);
}

proptest::proptest! {
    /// Rows of any width on hosts of any size, pids near the ranks or far: every rank
    /// rebuilds exactly after the hosts' lines are merged by class.
    #[test]
    fn rows_on_any_hosts_come_back(
        width in 1i32..6,
        n in 8i32..120,
        per_host in 3usize..40,
        pid_base in proptest::prop_oneof![proptest::strategy::Just(0i32), 0..5000],
    ) {
        let dumps: Vec<RankDump> = (0..n)
            .map(|r| {
                let mut d = crate::wire::tests::row_rank(n, r);
                let pid = pid_base + r;
                d.pid = Some(pid);
                d.threads[0].tid = pid;
                if let Ok(comms) = &mut d.outcome {
                    let first = r - r % width;
                    comms[2].group = Some((first..first + width).collect());
                    comms[2].size = i64::from(width);
                    comms[2].local_rank = i64::from(r % width);
                }
                d
            })
            .collect();
        let (_, back) = merged(&dumps, per_host);
        proptest::prop_assert_eq!(back, with_hosts(dumps, per_host));
    }
}
