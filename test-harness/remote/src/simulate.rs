//! Simulated jobs, to measure the tree at scale on one machine: an agent given a
//! simulated host reads no process; it sends, for a share of a synthetic job's ranks,
//! the records a real agent would send for ranks in those states, through the same
//! launcher, relays and front end as a real job.
//!
//! The job of `ranks` ranks on `hosts` hosts (`sim0`...; consecutive ranks per host, pids
//! consecutive on each) has `states` distinct states: all but a few ranks are blocked in
//! `MPI_Allreduce` on `MPI_COMM_WORLD`, called from one of `states - 1` places
//! (`step_0`...), and three deviants (a quarter, half and three quarters of the way)
//! are blocked in `MPI_Recv` from their right neighbour, each waiting for a rank in the
//! collective that waits for them. With one state there are no deviants.
//!
//! A ring job (`RANKS,HOSTS,STATES,ring`) hangs otherwise: every rank is blocked in
//! `MPI_Ssend` to its right neighbour, called from one of the places, its message
//! listed pending at it and waiting unexpected at the destination, whose library says
//! its sender waits (as MPICH's ch3 queues show a synchronous send); the deviants send
//! from `exchange_halo`.

use crate::task::HostTask;
pub use crate::task::{Hang, SimulatedHost, Simulation};
use crate::wire::{Encoder, Record, StreamError};
use mqd_model::{
    CallArguments, CommGroup, Communicator, Operation, Queue, RankDump, RankSet, SenderState,
    ThreadStack,
};

/// MPICH's handle of `MPI_COMM_WORLD`, as a real rank's arguments hold it.
const COMM_WORLD_HANDLE: i64 = 0x4400_0000;
/// The first pid of each host.
const FIRST_PID: i32 = 10_000;

impl Simulation {
    /// `RANKS,HOSTS,STATES`, then `,ring` for a ring job.
    pub fn parse(text: &str) -> Result<Simulation, String> {
        let (text_numbers, hang) = match text.rsplit_once(',') {
            Some((head, "ring")) => (head, Hang::Ring),
            Some((head, "collective")) => (head, Hang::Collective),
            _ => (text, Hang::Collective),
        };
        let wrong = || {
            format!("{text:?} is not RANKS,HOSTS,STATES (three numbers), then ,ring or ,collective")
        };
        let numbers: Vec<u32> = text_numbers
            .split(',')
            .map(|n| n.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| wrong())?;
        let [ranks, hosts, states] = numbers[..] else {
            return Err(wrong());
        };
        if !(1..=(1 << 22)).contains(&ranks) || hosts == 0 || hosts > ranks || states == 0 {
            return Err(format!(
                "{text:?}: a simulated job has 1 to {} ranks, 1 to RANKS hosts and at least one state",
                1 << 22
            ));
        }
        if states > 1 && (states - 1) * 8 > ranks {
            return Err(format!(
                "{text:?}: too few ranks for {states} states (8 ranks a state at least)"
            ));
        }
        Ok(Simulation {
            ranks,
            hosts,
            states,
            hang,
        })
    }

    /// Its hosts, each with its share of the ranks.
    pub fn hosts(&self) -> Vec<HostTask> {
        (0..self.hosts)
            .map(|h| {
                let first = self.first_of(h);
                HostTask {
                    name: format!("sim{h}"),
                    ranks: Vec::new(),
                    simulated: Some(SimulatedHost {
                        job: *self,
                        first,
                        count: self.first_of(h + 1) - first,
                    }),
                }
            })
            .collect()
    }

    fn first_of(&self, host: u32) -> u32 {
        (u64::from(host) * u64::from(self.ranks) / u64::from(self.hosts)) as u32
    }

    /// The host a rank is on.
    pub fn host_of(&self, rank: u32) -> u32 {
        let mut h = (u64::from(rank) * u64::from(self.hosts) / u64::from(self.ranks)) as u32;
        while h + 1 < self.hosts && self.first_of(h + 1) <= rank {
            h += 1;
        }
        while h > 0 && self.first_of(h) > rank {
            h -= 1;
        }
        h
    }

    /// The deviants: ranks blocked in a receive while the others are in the collective.
    pub fn deviants(&self) -> RankSet {
        self.deviant_ranks().into_iter().flatten().collect()
    }

    fn deviant_ranks(&self) -> [Option<u32>; 3] {
        let n = u64::from(self.ranks);
        [n / 4, n / 2, 3 * n / 4].map(|r| (self.states >= 2).then_some(r as u32))
    }

    fn is_deviant(&self, r: u32) -> bool {
        self.deviant_ranks().contains(&Some(r))
    }

    /// The state of rank `r`: `states - 1` for a deviant, else its place's number.
    pub fn state_of(&self, r: u32) -> u32 {
        if self.is_deviant(r) {
            return self.states - 1;
        }
        let places = u64::from(self.states.saturating_sub(1).max(1));
        (u64::from(r) * places / u64::from(self.ranks)) as u32
    }

    /// The dump a real agent would send for rank `r` (its host left to the reader).
    pub fn rank(&self, r: u32) -> RankDump {
        self.rank_in(r, &(0..self.ranks as i32).collect())
    }

    /// [`Simulation::rank`] with `MPI_COMM_WORLD`'s group given (shared by every rank).
    fn rank_in(&self, r: u32, world: &CommGroup) -> RankDump {
        let rank = r as i32;
        let pid = FIRST_PID + (r - self.first_of(self.host_of(r))) as i32;
        let args = |function: &str, peer: Option<i64>| CallArguments {
            function: format!("P{function}"),
            comm: Some(COMM_WORLD_HANDLE),
            predefined: Some("MPI_COMM_WORLD".into()),
            peer,
            tag: peer.map(|_| 7),
            bytes: peer.is_none().then_some(8),
            ..CallArguments::default()
        };
        let right = i64::from((r + 1) % self.ranks);
        let left = i64::from((r + self.ranks - 1) % self.ranks);
        let place = if self.is_deviant(r) {
            "exchange_halo".to_owned()
        } else {
            format!("step_{}", self.state_of(r))
        };
        let thread = if self.hang == Hang::Ring {
            ThreadStack::named(
                pid,
                &["MPIDI_progress_wait", "MPI_Ssend", &place, "main"],
                Some(args("MPI_Ssend", Some(right))),
            )
        } else if self.is_deviant(r) {
            ThreadStack::named(
                pid,
                &["MPIDI_progress_wait", "MPI_Recv", "exchange_halo", "main"],
                Some(args("MPI_Recv", Some(right))),
            )
        } else {
            ThreadStack::named(
                pid,
                &["MPIDI_progress_wait", "MPI_Allreduce", &place, "main"],
                Some(args("MPI_Allreduce", None)),
            )
        };
        let comm = |name: &str, id: u64, local: i32, group: CommGroup| Communicator {
            unique_id: id,
            name: name.into(),
            size: group.len() as i64,
            local_rank: i64::from(local),
            context: None,
            group: Some(group),
            group_error: None,
            pending_receives: Queue::NoInformation,
            unexpected_messages: Queue::NoInformation,
            pending_sends: Queue::NoInformation,
        };
        let mut world = comm("MPI_COMM_WORLD", 0x5555_0000_2000, rank, world.clone());
        if self.hang == Hang::Ring {
            world.pending_receives = Queue::Operations(Vec::new());
            world.pending_sends = Queue::Operations(vec![Operation::pending(right, 7)]);
            world.unexpected_messages = Queue::Operations(vec![Operation {
                sender: Some(SenderState::Waits),
                ..Operation::pending(left, 7)
            }]);
        }
        RankDump {
            threads: vec![thread],
            outcome: Ok(vec![
                world,
                comm("MPI_COMM_SELF", 0x5555_0000_3000, 0, vec![rank].into()),
            ]),
            ..RankDump::unread(rank, Some(pid), Some("/sim/app".into()))
        }
    }
}

/// The records a real agent would send for `host`'s ranks: one template and one line per
/// state, from two of its ranks (the rest of the line follows from them).
pub fn records(host: &SimulatedHost) -> Result<Vec<Record>, StreamError> {
    let job = &host.job;
    let mut by_state: std::collections::BTreeMap<u32, RankSet> = Default::default();
    // Per state, ranks in runs: a host's ranks are consecutive, places in blocks.
    let end = host.first + host.count;
    let mut r = host.first;
    while r < end {
        let state = job.state_of(r);
        let mut stop = r + 1;
        while stop < end && job.state_of(stop) == state && !job.is_deviant(stop) {
            stop += 1;
        }
        by_state.entry(state).or_default().insert_range(r, stop);
        r = stop;
    }
    let mut out = Vec::new();
    let mut encoder = Encoder::new();
    let world = CommGroup::progression_of(0, 1, job.ranks.into()).expect("ranks are u32");
    for members in by_state.values() {
        let first = members.first().expect("a member");
        let last = members.last().expect("a member");
        let sample: Vec<RankDump> = if first == last {
            vec![job.rank_in(first, &world)]
        } else {
            vec![job.rank_in(first, &world), job.rank_in(last, &world)]
        };
        let records = encoder.encode(0, &sample)?;
        let lines = records
            .iter()
            .filter(|r| matches!(r, Record::Ranks(_)))
            .count();
        if lines != 1 {
            // The two did not make one line: every member is encoded.
            let all: Vec<RankDump> = members.iter().map(|m| job.rank_in(m, &world)).collect();
            out.extend(encoder.encode(0, &all)?);
            continue;
        }
        for record in records {
            match record {
                Record::Ranks(mut line) => {
                    // The line of the two stands for every member.
                    line.ranks = members.clone();
                    line.pids = members
                        .iter()
                        .map(|m| Some(FIRST_PID + (m - host.first) as i32))
                        .collect();
                    out.push(Record::Ranks(line));
                }
                other => out.push(other),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
