//! What each scenario holds, rank by rank, written from what the program does.

use crate::*;

// ----------------------------------------------------------------------------------- model

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Receive,
    Unexpected,
    Send,
}

impl Kind {
    pub(crate) fn queue(self) -> &'static str {
        match self {
            Kind::Receive => "pending_receives",
            Kind::Unexpected => "unexpected_messages",
            Kind::Send => "pending_sends",
        }
    }
}

pub(crate) const QUEUES: [Kind; 3] = [Kind::Receive, Kind::Unexpected, Kind::Send];

/// One queue entry the program created.
#[derive(Debug, Clone)]
pub(crate) struct OpModel {
    pub(crate) kind: Kind,
    /// Source (ANY_SOURCE kept) or destination: a rank of the communicator (of the remote
    /// group for an intercommunicator).
    pub(crate) peer: i32,
    pub(crate) tag: i32,
    /// Elements (receives, sends) or bytes (unexpected messages).
    pub(crate) count: i64,
    pub(crate) buffer: u64,
    /// Sends: the request completed (eager) and was not waited. Unexpected: an eager
    /// message whose data all arrived (a rendezvous request-to-send or a message to itself
    /// has no data buffered).
    pub(crate) complete: bool,
    /// Unexpected: sent by a synchronous send (`MPI_Ssend`, `MPI_Issend`).
    pub(crate) synchronous: bool,
    /// Unexpected: a message the rank sent itself on a single-process communicator, with
    /// that send's element count and buffer (what ch4's self queue holds).
    pub(crate) from_self: Option<(i64, u64)>,
}

/// A user communicator on one rank, with its entries in queue order (receives in post
/// order, unexpected messages in arrival order, sends in call order).
#[derive(Debug, Clone)]
pub(crate) struct CommModel {
    pub(crate) name: String,
    /// COMM_WORLD ranks of the local group.
    pub(crate) local: Vec<i32>,
    pub(crate) remote: Option<Vec<i32>>,
    pub(crate) rank: i32,
    pub(crate) ops: Vec<OpModel>,
}

pub(crate) fn position(group: &[i32], world_rank: i32) -> i32 {
    group.iter().position(|&r| r == world_rank).expect("member") as i32
}

impl CommModel {
    pub(crate) fn intra(name: &str, local: Vec<i32>, world_rank: i32) -> CommModel {
        let rank = position(&local, world_rank);
        CommModel {
            name: name.into(),
            local,
            remote: None,
            rank,
            ops: Vec::new(),
        }
    }

    pub(crate) fn inter(
        name: &str,
        local: Vec<i32>,
        remote: Vec<i32>,
        world_rank: i32,
    ) -> CommModel {
        CommModel {
            remote: Some(remote),
            ..CommModel::intra(name, local, world_rank)
        }
    }

    pub(crate) fn op(
        &mut self,
        kind: Kind,
        peer: i32,
        tag: i32,
        count: i64,
        buffer: u64,
        complete: bool,
    ) -> &mut Self {
        self.ops.push(OpModel {
            kind,
            peer,
            tag,
            count,
            buffer,
            complete,
            synchronous: false,
            from_self: None,
        });
        self
    }

    /// The last entry is a message to itself, sent with `count` elements from `buffer`.
    pub(crate) fn sent_by_self(&mut self, count: i64, buffer: u64) -> &mut Self {
        if let Some(op) = self.ops.last_mut() {
            op.from_self = Some((count, buffer));
        }
        self
    }

    /// A communicator of one process, whose traffic ch4 keeps in its self queues.
    pub(crate) fn single_process(&self) -> bool {
        self.local.len() == 1 && self.remote.is_none()
    }

    /// The last entry came from a synchronous send.
    pub(crate) fn synchronous(&mut self) -> &mut Self {
        if let Some(op) = self.ops.last_mut() {
            op.synchronous = true;
        }
        self
    }

    pub(crate) fn recv(&mut self, source: i32, tag: i32, buffer: u64, count: i64) -> &mut Self {
        self.op(Kind::Receive, source, tag, count, buffer, false)
    }

    pub(crate) fn unexpected(
        &mut self,
        source: i32,
        tag: i32,
        bytes: i64,
        arrived: bool,
    ) -> &mut Self {
        self.op(Kind::Unexpected, source, tag, bytes, 0, arrived)
    }

    pub(crate) fn send(
        &mut self,
        dest: i32,
        tag: i32,
        buffer: u64,
        count: i64,
        complete: bool,
    ) -> &mut Self {
        self.op(Kind::Send, dest, tag, count, buffer, complete)
    }

    /// The COMM_WORLD rank of a peer rank.
    pub(crate) fn world(&self, peer: i32) -> i64 {
        let group = self.remote.as_ref().unwrap_or(&self.local);
        usize::try_from(peer)
            .ok()
            .and_then(|p| group.get(p))
            .map_or(-1, |&w| i64::from(w))
    }

    /// The name as the dump shows it: at most 63 bytes.
    pub(crate) fn shown_name(&self) -> String {
        self.name.chars().take(63).collect()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RankModel {
    /// The device the job ran on.
    pub(crate) device: Device,
    pub(crate) rank: i32,
    pub(crate) comms: Vec<CommModel>,
    /// Names that must not be listed (freed communicators).
    pub(crate) gone: Vec<&'static str>,
}

/// The 127-character name of `comms`: byte i = 'a' + i % 26.
pub(crate) fn name127() -> String {
    (0..127).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

/// What rank `r` of `n` holds in `scenario`, from its READY line.
pub(crate) fn model(device: Device, scenario: &str, n: i32, ready: &Ready) -> RankModel {
    let r = ready.rank;
    let a = |key: &str| ready.addr(key);
    let left = (r + n - 1) % n;
    let right = (r + 1) % n;
    let all: Vec<i32> = (0..n).collect();
    let mut world = CommModel::intra("MPI_COMM_WORLD", all.clone(), r);
    let mut self_ = CommModel::intra("MPI_COMM_SELF", vec![r], r);
    let mut extra = Vec::new();
    let mut gone = Vec::new();
    match scenario {
        "wildcards" => {
            world
                .recv(ANY_SOURCE, ANY_TAG, a("w0"), 1)
                .recv(ANY_SOURCE, 7, a("w1"), 10)
                .recv(left, ANY_TAG, a("w2"), 20)
                .recv(left, 42, a("w3"), 30);
            self_.recv(0, 3, a("w4"), 4);
        }
        "unexpected" => {
            world
                .recv(left, 200, a("u0"), 5)
                .unexpected(left, 100, 40, true)
                .unexpected(right, 101, RNDV_BYTES, false)
                .unexpected(left, 103, 0, true)
                .send(left, 101, a("u2"), RNDV_INTS, false);
            // A message to itself: MPICH keeps the sender's request, nothing is buffered.
            self_
                .unexpected(0, 102, 8, false)
                .sent_by_self(2, a("u3"))
                .send(0, 102, a("u3"), 2, false);
        }
        "sends" => {
            world
                .unexpected(left, 2, 40, true)
                .unexpected(right, 3, 80, true)
                .synchronous()
                .unexpected(left, 4, RNDV_BYTES, false)
                .send(right, 2, a("s1"), 10, true)
                .send(left, 3, a("s2"), 20, false)
                .send(right, 4, a("s3"), RNDV_INTS, false);
            // MPI_Issend to itself: MPICH keeps the sender's request and does not mark the
            // message synchronous, so nothing says whether the sender waits.
            self_
                .unexpected(0, 6, 4, false)
                .sent_by_self(1, a("s4"))
                .send(0, 6, a("s4"), 1, false);
        }
        "ring" => {
            // The blocking MPI_Ssend to the right is not listed: ch3 and ch4 record
            // non-blocking sends only. The left neighbour's arrived (eager, synchronous) as
            // unexpected.
            let mut ring = CommModel::intra("ring", all.clone(), r);
            ring.unexpected(left, 5, 4000, true).synchronous();
            extra.push(ring);
        }
        "comms" => {
            let even = r % 2 == 0;
            let own: Vec<i32> = (0..n).filter(|q| q % 2 == r % 2).collect();
            let other: Vec<i32> = (0..n).filter(|q| q % 2 != r % 2).collect();
            let mut dup = CommModel::intra("dup of world", all.clone(), r);
            dup.recv(ANY_SOURCE, 19, a("c0"), 10);
            let mut split = CommModel::intra(
                if even { "split even" } else { "split odd" },
                own.clone(),
                r,
            );
            let (srank, ssize) = (split.rank, own.len() as i32);
            split
                .unexpected((srank + ssize - 1) % ssize, 8, 8, true)
                .send((srank + 1) % ssize, 8, a("c4"), 2, true);
            let mut inter = CommModel::inter("inter", own.clone(), other.clone(), r);
            let lrank = inter.rank;
            inter.recv((lrank + 1) % other.len() as i32, 11, a("c1"), 3);
            if lrank < 2 {
                inter
                    .unexpected(lrank, 9, 12, true)
                    .send(lrank, 9, a("c3"), 3, true);
            }
            let mut long = CommModel::intra(&name127(), all.clone(), r);
            long.recv(0, 1, a("c2"), 1);
            extra.extend([dup, split, inter, long]);
            let members = vec![4, 1, 0];
            if members.contains(&r) {
                let mut created = CommModel::intra("created", members, r);
                let crank = created.rank;
                created.recv((crank + 1) % 3, 21, a("c5"), 4);
                extra.push(created);
            } else {
                gone.push("created");
            }
            gone.push("freed");
        }
        "freed" => {
            let mut kept = CommModel::intra("kept", all.clone(), r);
            kept.recv(0, 6, a("f0"), 2);
            extra.push(kept);
            if ready.state == 1 {
                let mut doomed = CommModel::intra("to be freed", all.clone(), r);
                doomed.recv(ANY_SOURCE, 5, a("f1"), 1);
                extra.push(doomed);
                gone.push("after free");
            } else {
                let mut after = CommModel::intra("after free", all.clone(), r);
                after.recv(1 % n, 8, a("f2"), 3);
                extra.push(after);
                gone.push("to be freed");
            }
        }
        "big" => {
            let base = a("big");
            for i in 0..BIG_COUNT as i32 {
                let source = if i % 10 == 9 { ANY_SOURCE } else { i % n };
                world.recv(source, i, base + 16 * i as u64, 1 + i64::from(i % 4));
            }
        }
        other => panic!("no model for {other}"),
    }
    let mut comms = vec![world, self_];
    comms.extend(extra);
    RankModel {
        device,
        rank: r,
        comms,
        gone,
    }
}
