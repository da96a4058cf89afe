use super::*;
use crate::merge::Merger;
use crate::wire::Decoder;

/// Every rank of `job`, rebuilt from its hosts' records merged.
fn rebuilt(job: Simulation) -> (Vec<Record>, Vec<RankDump>) {
    let mut merger = Merger::new();
    for (h, host) in job.hosts().iter().enumerate() {
        let records = records(host.simulated.as_ref().expect("simulated")).expect("records");
        for record in records {
            match record {
                Record::State(s) => merger.add_state(h, s),
                Record::Ranks(mut line) => {
                    line.host = h as u32;
                    merger.add_line(h, line).expect("merged");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let records = merger.records(0);
    let mut decoder = Decoder::new();
    let mut ranks = Vec::new();
    for record in &records {
        match record {
            Record::State(s) => decoder.add_state(s.clone()),
            Record::Ranks(line) => {
                ranks.extend(decoder.ranks(line, |h| format!("sim{h}")).expect("ranks"))
            }
            _ => {}
        }
    }
    ranks.sort_by_key(|r| r.rank);
    (records, ranks)
}

#[test]
fn every_simulated_rank_reads_as_the_job_says() {
    for (ranks, hosts, states) in [(100, 7, 4), (64, 64, 2), (40, 3, 1), (1000, 10, 10)] {
        let job = Simulation::parse(&format!("{ranks},{hosts},{states}")).expect("a job");
        let (records, back) = rebuilt(job);
        let expected: Vec<RankDump> = (0..ranks)
            .map(|r| {
                let mut d = job.rank(r);
                d.host = Some(format!("sim{}", job.host_of(r)));
                d
            })
            .collect();
        assert_eq!(back, expected, "{ranks},{hosts},{states}");
        // One line per state, whatever the hosts.
        let lines = records
            .iter()
            .filter(|r| matches!(r, Record::Ranks(_)))
            .count();
        assert_eq!(lines as u32, states, "{ranks},{hosts},{states}");
    }
}

#[test]
fn hosts_share_the_ranks_and_deviants_are_named() {
    let job = Simulation::parse("1000000,1024,10").expect("a job");
    let hosts = job.hosts();
    assert_eq!(hosts.len(), 1024);
    let counts: u32 = hosts
        .iter()
        .map(|h| h.simulated.expect("simulated").count)
        .sum();
    assert_eq!(counts, 1_000_000);
    assert_eq!(job.deviants().to_string(), "250000,500000,750000");
    for r in [0, 976, 977, 500_000, 999_999] {
        let h = job.host_of(r);
        let host = hosts[h as usize].simulated.expect("simulated");
        assert!((host.first..host.first + host.count).contains(&r), "{r}");
    }
    for bad in ["1,2", "10,20,1", "0,1,1", "15,1,3", "x,1,1"] {
        assert!(Simulation::parse(bad).is_err(), "{bad}");
    }
}
