//! What each scenario of the demo runtime holds, rank by rank, transcribed from scenario.c.

use crate::*;

// ------------------------------------------------------------------------------------ model

/// A communicator as scenario.c builds it on one rank.
#[derive(Debug, Clone)]
pub(crate) struct CommModel {
    pub(crate) name: String,
    pub(crate) context_id: i32,
    pub(crate) recvcontext_id: i32,
    /// Rank in the local group.
    pub(crate) rank: i32,
    /// COMM_WORLD ranks of the local group.
    pub(crate) local: Vec<i32>,
    /// COMM_WORLD ranks of the remote group (intercommunicators).
    pub(crate) remote: Option<Vec<i32>>,
    /// Made by `MPI_Comm_dup`: `MPIR_Comm.local_group` is NULL except in debugq5.
    pub(crate) dup: bool,
    /// Freed (`MPI_Comm_free`): no longer listed.
    pub(crate) freed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Receive,
    Unexpected,
    Send { blocking: bool },
}

/// One queue entry: a posted receive, an unexpected message or a send.
#[derive(Debug, Clone)]
pub(crate) struct EntryModel {
    pub(crate) kind: Kind,
    /// Index of its communicator in `RankModel::comms`.
    pub(crate) comm: usize,
    /// Source (receives, unexpected; `ANY_SOURCE` kept) or destination (sends), a rank of
    /// the communicator (of the remote group for an intercommunicator).
    pub(crate) peer: i32,
    pub(crate) tag: i32,
    pub(crate) buffer: u64,
    /// Element count (receives and sends) or message size in bytes (unexpected messages).
    pub(crate) count: i64,
    /// Receives and sends: the request completed (cc 0) and was not waited for. Unexpected
    /// messages: an eager one (all data arrived).
    pub(crate) complete: bool,
    /// Cancelled and freed: gone from every queue.
    pub(crate) freed: bool,
}

/// What one rank holds.
#[derive(Debug, Clone)]
pub(crate) struct RankModel {
    pub(crate) world_rank: i32,
    pub(crate) comms: Vec<CommModel>,
    pub(crate) entries: Vec<EntryModel>,
}

pub(crate) const WORLD: usize = 0;
pub(crate) const SELF: usize = 1;

impl RankModel {
    /// MPI_COMM_WORLD (context 0) and MPI_COMM_SELF (context 16) of rank `r` of `n`.
    pub(crate) fn new(r: i32, n: i32) -> RankModel {
        let comm = |name: &str, ctx, rank, local| CommModel {
            name: name.into(),
            context_id: ctx,
            recvcontext_id: ctx,
            rank,
            local,
            remote: None,
            dup: false,
            freed: false,
        };
        RankModel {
            world_rank: r,
            comms: vec![
                comm("MPI_COMM_WORLD", 0, r, (0..n).collect()),
                comm("MPI_COMM_SELF", 16, 0, vec![r]),
            ],
            entries: Vec::new(),
        }
    }

    pub(crate) fn add_comm(&mut self, c: CommModel) -> usize {
        self.comms.push(c);
        self.comms.len() - 1
    }

    /// `MPI_Comm_dup(MPI_COMM_WORLD)` with context `ctx`, named `name`.
    pub(crate) fn dup_world(&mut self, name: &str, ctx: i32) -> usize {
        let world = self.comms[WORLD].clone();
        self.add_comm(CommModel {
            name: name.into(),
            context_id: ctx,
            recvcontext_id: ctx,
            dup: true,
            ..world
        })
    }

    /// An intracommunicator of the COMM_WORLD ranks `members` (with its group).
    pub(crate) fn intra(&mut self, name: &str, ctx: i32, members: Vec<i32>) -> usize {
        let rank = position(&members, self.world_rank);
        self.add_comm(CommModel {
            name: name.into(),
            context_id: ctx,
            recvcontext_id: ctx,
            rank,
            local: members,
            remote: None,
            dup: false,
            freed: false,
        })
    }

    pub(crate) fn inter(
        &mut self,
        name: &str,
        recvcontext_id: i32,
        context_id: i32,
        local: Vec<i32>,
        remote: Vec<i32>,
    ) -> usize {
        let rank = position(&local, self.world_rank);
        self.add_comm(CommModel {
            name: name.into(),
            context_id,
            recvcontext_id,
            rank,
            local,
            remote: Some(remote),
            dup: false,
            freed: false,
        })
    }

    pub(crate) fn push(&mut self, e: EntryModel) -> usize {
        self.entries.push(e);
        self.entries.len() - 1
    }

    /// `MPI_Irecv`, pending.
    pub(crate) fn irecv(
        &mut self,
        comm: usize,
        source: i32,
        tag: i32,
        buffer: u64,
        count: i64,
    ) -> usize {
        self.push(EntryModel {
            kind: Kind::Receive,
            comm,
            peer: source,
            tag,
            buffer,
            count,
            complete: false,
            freed: false,
        })
    }

    /// An unexpected message of `bytes` bytes; `eager`: all data arrived.
    pub(crate) fn unexpected(
        &mut self,
        comm: usize,
        source: i32,
        tag: i32,
        bytes: i64,
        eager: bool,
    ) {
        let kind = Kind::Unexpected;
        self.push(EntryModel {
            kind,
            comm,
            peer: source,
            tag,
            buffer: 0,
            count: bytes,
            complete: eager,
            freed: false,
        });
    }

    /// A send the rank made with `how`.
    pub(crate) fn send(
        &mut self,
        how: SendCall,
        comm: usize,
        dest: i32,
        tag: i32,
        buffer: u64,
        count: i64,
    ) {
        let kind = Kind::Send {
            blocking: how == SendCall::Send,
        };
        let complete = how == SendCall::IsendCompleted;
        self.push(EntryModel {
            kind,
            comm,
            peer: dest,
            tag,
            buffer,
            count,
            complete,
            freed: false,
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendCall {
    /// `MPI_Isend` or `MPI_Issend`, pending.
    Isend,
    /// `MPI_Isend` whose request completed and was not waited for.
    IsendCompleted,
    /// `MPI_Send`: the rank is inside it.
    Send,
}

pub(crate) fn position(ranks: &[i32], r: i32) -> i32 {
    ranks
        .iter()
        .position(|&x| x == r)
        .expect("the rank is in the group") as i32
}

/// The 127-byte name of the `comms` scenario: byte i = 'a' + i % 26.
pub(crate) fn name127() -> String {
    (0..127).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

/// What rank `r` of `n` holds in `scenario` (state 2 of `freed` when `second_state`).
pub(crate) fn scenario_model(scenario: &str, r: i32, n: i32, second_state: bool) -> RankModel {
    let left = (r + n - 1) % n;
    let right = (r + 1) % n;
    let buf = fixtures::buffer;
    let mut m = RankModel::new(r, n);
    match scenario {
        "compute" => {}
        "wildcards" => {
            m.irecv(WORLD, ANY_SOURCE, ANY_TAG, buf(0), 1);
            m.irecv(WORLD, ANY_SOURCE, 7, buf(1), 10);
            m.irecv(WORLD, left, ANY_TAG, buf(2), 20);
            m.irecv(WORLD, left, 42, buf(3), 30);
            m.irecv(SELF, 0, 3, buf(4), 4);
        }
        "unexpected" => {
            m.irecv(WORLD, left, 200, buf(0), 5);
            m.unexpected(WORLD, left, 100, 40, true);
            m.unexpected(WORLD, right, 101, 1_048_576, false);
            m.unexpected(SELF, 0, 102, 8, true);
            m.unexpected(WORLD, left, 103, 0, true);
        }
        "sends" => {
            m.send(SendCall::Isend, WORLD, right, 2, buf(1), 10);
            m.send(SendCall::IsendCompleted, WORLD, left, 3, buf(2), 20);
            m.send(SendCall::Isend, SELF, 0, 4, buf(3), 1); // MPI_Issend
            m.send(SendCall::Send, WORLD, right, 1, buf(0), 100);
        }
        "comms" => {
            assert!(n >= 2, "comms needs 2 ranks or more");
            let dup = m.dup_world("dup of world", 48);
            let even = r % 2 == 0;
            let own: Vec<i32> = (0..n).filter(|q| q % 2 == r % 2).collect();
            let other: Vec<i32> = (0..n).filter(|q| q % 2 != r % 2).collect();
            let split = m.intra(
                if even { "split even" } else { "split odd" },
                64,
                own.clone(),
            );
            let (recvctx, ctx) = if even { (80, 96) } else { (96, 80) };
            let inter = m.inter("inter", recvctx, ctx, own.clone(), other);
            let long = m.dup_world(&name127(), 112);
            let freed = m.dup_world("freed", 128);
            m.comms[freed].freed = true;
            m.irecv(dup, ANY_SOURCE, 19, buf(0), 10);
            m.irecv(inter, 0, 9, buf(1), 3);
            m.irecv(long, 0, 1, buf(2), 1);
            m.unexpected(split, 0, 7, 16, true);
            m.send(SendCall::Isend, inter, 0, 9, buf(3), 3);
            let split_rank = m.comms[split].rank;
            m.send(
                SendCall::Isend,
                split,
                (split_rank + 1) % own.len() as i32,
                8,
                buf(4),
                2,
            );
        }
        "freed" => {
            let kept = m.dup_world("kept", 48);
            let gone = m.dup_world("to be freed", 64);
            m.irecv(kept, 0, 6, buf(0), 2);
            let p2 = m.irecv(gone, ANY_SOURCE, 5, buf(1), 1);
            if second_state {
                m.entries[p2].freed = true;
                m.comms[gone].freed = true;
                let after = m.dup_world("after free", 64);
                m.irecv(after, 1 % n, 8, buf(2), 3);
            }
        }
        "big" => {
            for i in 0..fixtures::BIG_COUNT as i32 {
                let source = if i % 10 == 9 { ANY_SOURCE } else { i % n };
                m.irecv(
                    WORLD,
                    source,
                    i,
                    fixtures::big_buffer(i as u64),
                    1 + i64::from(i % 4),
                );
            }
        }
        "ring" => {
            let ring = m.dup_world("ring", 48);
            m.send(SendCall::Isend, ring, right, 5, buf(0), 1000); // MPI_Issend
            m.unexpected(ring, left, 5, 4000, true);
        }
        other => panic!("no model for scenario {other}"),
    }
    m
}
