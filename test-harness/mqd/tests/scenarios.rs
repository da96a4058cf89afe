//! End to end: `mqd dump --json` attached to live fixture ranks, for every layout (the
//! `mqd-fixture-{ch3,ch4,debugq4,debugq5}` binaries, which lay out MPICH's real structures) and
//! every scenario of `fixtures/scenario.c`, against a model of what scenario.c builds.
//!
//! Each scenario is written down as data, rank by rank (communicators and queue entries in
//! creation order, transcribed from the comment at the top of scenario.c). What a correct dump
//! must show is derived from that per layout, from what the process holds:
//!
//! - communicators: every live one, sorted by `recvcontext_id`; names cut to 63 bytes; the group
//!   (COMM_WORLD ranks of the local group) when the process holds it somewhere: an `MPIR_Group`
//!   (all but dups, and dups too in debugq5), ch3's VC tables or ch4's rank maps (every
//!   communicator), or it needs no table (COMM_WORLD, one-process communicators);
//! - queues, oldest first: posted receives in post order (a completed one has left the ch3/ch4
//!   queue), unexpected messages in arrival order, sends in call order (blocking ones only in
//!   the debug queues); each entry attributed through the context id the layout records (the
//!   receiver's `recvcontext_id`; for ch3/ch4 sends the `context_id`);
//! - every field of every operation, and the key lines of `extra_text`.
//!
//! Each dump also checks that the ranks keep running as they were: alive, same state letter
//! in `/proc/PID/stat`, no tracer left.

use mqd_fixtures::{self as fixtures, Rank};
use mqd_synthetic::Layout;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

const ANY_SOURCE: i32 = -2;
const ANY_TAG: i32 = -1;

/// Ranks of the `big` scenario's job: two, so that sources alternate between ranks 0 and 1.
const BIG_SIZE: i32 = 2;

/// Queues longer than this are checked entry by entry on a few fields, and in full on a sample.
const FULL_CHECK_LIMIT: usize = 1000;

// ------------------------------------------------------------------------------------ model

/// A communicator as scenario.c builds it on one rank.
#[derive(Debug, Clone)]
struct CommModel {
    name: String,
    context_id: i32,
    recvcontext_id: i32,
    /// Rank in the local group.
    rank: i32,
    /// COMM_WORLD ranks of the local group.
    local: Vec<i32>,
    /// COMM_WORLD ranks of the remote group (intercommunicators).
    remote: Option<Vec<i32>>,
    /// Made by `MPI_Comm_dup`: `MPIR_Comm.local_group` is NULL except in debugq5.
    dup: bool,
    /// Freed (`MPI_Comm_free`): no longer listed.
    freed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Receive,
    Unexpected,
    Send { blocking: bool },
}

/// One queue entry: a posted receive, an unexpected message or a send.
#[derive(Debug, Clone)]
struct EntryModel {
    kind: Kind,
    /// Index of its communicator in `RankModel::comms`.
    comm: usize,
    /// Source (receives, unexpected; `ANY_SOURCE` kept) or destination (sends), a rank of
    /// the communicator (of the remote group for an intercommunicator).
    peer: i32,
    tag: i32,
    buffer: u64,
    /// Element count (receives and sends) or message size in bytes (unexpected messages).
    count: i64,
    /// Receives and sends: the request completed (cc 0) and was not waited for. Unexpected
    /// messages: an eager one (all data arrived).
    complete: bool,
    /// Cancelled and freed: gone from every queue.
    freed: bool,
}

/// What one rank holds.
#[derive(Debug, Clone)]
struct RankModel {
    world_rank: i32,
    comms: Vec<CommModel>,
    entries: Vec<EntryModel>,
}

const WORLD: usize = 0;
const SELF: usize = 1;

impl RankModel {
    /// MPI_COMM_WORLD (context 0) and MPI_COMM_SELF (context 16) of rank `r` of `n`.
    fn new(r: i32, n: i32) -> RankModel {
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

    fn add_comm(&mut self, c: CommModel) -> usize {
        self.comms.push(c);
        self.comms.len() - 1
    }

    /// `MPI_Comm_dup(MPI_COMM_WORLD)` with context `ctx`, named `name`.
    fn dup_world(&mut self, name: &str, ctx: i32) -> usize {
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
    fn intra(&mut self, name: &str, ctx: i32, members: Vec<i32>) -> usize {
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

    fn inter(
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

    fn push(&mut self, e: EntryModel) -> usize {
        self.entries.push(e);
        self.entries.len() - 1
    }

    /// `MPI_Irecv`, pending.
    fn irecv(&mut self, comm: usize, source: i32, tag: i32, buffer: u64, count: i64) -> usize {
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
    fn unexpected(&mut self, comm: usize, source: i32, tag: i32, bytes: i64, eager: bool) {
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
    fn send(&mut self, how: SendCall, comm: usize, dest: i32, tag: i32, buffer: u64, count: i64) {
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
enum SendCall {
    /// `MPI_Isend` or `MPI_Issend`, pending.
    Isend,
    /// `MPI_Isend` whose request completed and was not waited for.
    IsendCompleted,
    /// `MPI_Send`: the rank is inside it.
    Send,
}

fn position(ranks: &[i32], r: i32) -> i32 {
    ranks
        .iter()
        .position(|&x| x == r)
        .expect("the rank is in the group") as i32
}

/// The 127-byte name of the `comms` scenario: byte i = 'a' + i % 26.
fn name127() -> String {
    (0..127).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

/// What rank `r` of `n` holds in `scenario` (state 2 of `freed` when `second_state`).
fn scenario_model(scenario: &str, r: i32, n: i32, second_state: bool) -> RankModel {
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

// ------------------------------------------------------------------ derived expectations

fn is_debugq(layout: Layout) -> bool {
    matches!(layout, Layout::Debugq4 | Layout::Debugq5)
}

/// The DLL's has-queues message names the layout.
fn flavour_text(layout: Layout) -> &'static str {
    match layout {
        Layout::Ch3 => "MPICH ch3 device queues",
        Layout::Ch4Am => "MPICH ch4 active-message queues",
        Layout::Debugq4 => "MPICH 4.x debug queues",
        Layout::Debugq5 => "MPICH 5.x debug queues",
    }
}

/// The local group as the process lets a debugger know it.
fn visible_group(layout: Layout, c: &CommModel, world_size: usize) -> Option<Vec<i32>> {
    let inter = c.remote.is_some();
    let has_group_object = !c.dup || layout == Layout::Debugq5;
    // ch3: MPIR_Comm.dev.vcrt / local_vcrt; ch4: dev.ch4.map / local_map; for every
    // communicator, dups included.
    let device_tables = matches!(layout, Layout::Ch3 | Layout::Ch4Am);
    // COMM_WORLD is 0..N-1 and a one-process intracommunicator holds this rank alone.
    let needs_no_table = !inter
        && ((c.context_id == 0 && c.recvcontext_id == 0 && c.local.len() == world_size)
            || c.local.len() == 1);
    (has_group_object || device_tables || needs_no_table).then(|| c.local.clone())
}

/// The group an entry's peer rank is a rank of.
fn peer_group(layout: Layout, c: &CommModel, world_size: usize) -> Option<Vec<i32>> {
    match &c.remote {
        // Intercommunicators always have their remote MPIR_Group.
        Some(remote) => Some(remote.clone()),
        None => visible_group(layout, c, world_size),
    }
}

/// Whether the layout's queues list the entry at all.
fn listed(layout: Layout, e: &EntryModel) -> bool {
    if e.freed {
        return false;
    }
    match e.kind {
        // ch3/ch4: a matched receive leaves the posted queue; the debug queue keeps it.
        Kind::Receive => !e.complete || is_debugq(layout),
        Kind::Unexpected => true,
        // ch3/ch4 MPIR_Sendq: non-blocking sends only.
        Kind::Send { blocking } => !blocking || is_debugq(layout),
    }
}

/// The context id the layout records in a queue entry on `c`.
fn recorded_context(layout: Layout, kind: Kind, c: &CommModel) -> i32 {
    match kind {
        Kind::Send { .. } if !is_debugq(layout) => c.context_id,
        _ => c.recvcontext_id,
    }
}

/// The communicator a recorded context id belongs to: the one receiving on it; for a send
/// (the send context before MPICH 4.1) else the one sending on it.
fn owner(comms: &[CommModel], context: i32, send: bool) -> Option<usize> {
    let alive = |i: &usize| !comms[*i].freed;
    (0..comms.len())
        .filter(alive)
        .find(|&i| comms[i].recvcontext_id == context)
        .or_else(|| {
            if send {
                (0..comms.len())
                    .filter(alive)
                    .find(|&i| comms[i].context_id == context)
            } else {
                None
            }
        })
}

/// An operation as the dump must show it.
#[derive(Debug)]
struct ExpectedOp {
    /// Every field but `extra_text`.
    fields: Value,
    /// Lines `extra_text` must hold.
    lines: Vec<String>,
    /// Lines it must not hold.
    absent: Vec<String>,
}

#[derive(Debug)]
struct ExpectedComm {
    name: String,
    size: i64,
    local_rank: i64,
    group: Option<Vec<i32>>,
    /// Indices into `RankModel::entries`, oldest first, per queue.
    receives: Vec<usize>,
    unexpected: Vec<usize>,
    sends: Vec<usize>,
}

const COMPLETED: &str = "completed, not yet waited or freed";
const REMOTE_GROUP: &str = "peer rank is in the remote group";
const ALL_DATA_ARRIVED: &str = "all data arrived";

fn expected_comms(layout: Layout, m: &RankModel, world_size: usize) -> Vec<ExpectedComm> {
    let mut order: Vec<usize> = (0..m.comms.len()).filter(|&i| !m.comms[i].freed).collect();
    order.sort_by_key(|&i| m.comms[i].recvcontext_id);
    let contexts: HashSet<i32> = order.iter().map(|&i| m.comms[i].recvcontext_id).collect();
    assert_eq!(
        contexts.len(),
        order.len(),
        "model: live communicators have distinct recvcontext_ids"
    );
    let mut out: Vec<ExpectedComm> = order
        .iter()
        .map(|&i| {
            let c = &m.comms[i];
            ExpectedComm {
                name: c.name.bytes().take(63).map(char::from).collect(),
                size: c.local.len() as i64,
                local_rank: i64::from(c.rank),
                group: visible_group(layout, c, world_size),
                receives: Vec::new(),
                unexpected: Vec::new(),
                sends: Vec::new(),
            }
        })
        .collect();
    // Entries in creation order: the order the dump lists them in, for every layout.
    for (i, e) in m.entries.iter().enumerate() {
        if !listed(layout, e) {
            continue;
        }
        let send = matches!(e.kind, Kind::Send { .. });
        let context = recorded_context(layout, e.kind, &m.comms[e.comm]);
        let owner = owner(&m.comms, context, send);
        // scenario.c's context ids never make an entry look like another communicator's.
        assert_eq!(
            owner,
            Some(e.comm),
            "model: context {context} of entry {e:?} is its communicator's"
        );
        let slot = order
            .iter()
            .position(|&c| c == e.comm)
            .expect("live communicator");
        match e.kind {
            Kind::Receive => out[slot].receives.push(i),
            Kind::Unexpected => out[slot].unexpected.push(i),
            Kind::Send { .. } => out[slot].sends.push(i),
        }
    }
    out
}

fn expected_op(layout: Layout, m: &RankModel, e: &EntryModel, world_size: usize) -> ExpectedOp {
    let c = &m.comms[e.comm];
    let group = peer_group(layout, c, world_size);
    let world = |rank: i32| -> i64 {
        group
            .as_ref()
            .and_then(|g| usize::try_from(rank).ok().and_then(|r| g.get(r)))
            .map_or(-1, |&w| i64::from(w))
    };
    let mut lines = Vec::new();
    let mut absent = Vec::new();
    let status = if e.complete && e.kind != Kind::Unexpected {
        "complete"
    } else {
        "pending"
    };
    let fields = match e.kind {
        Kind::Receive => {
            assert!(!e.complete, "model: no scenario leaves a completed receive");
            let any_source = e.peer == ANY_SOURCE;
            let any_tag = e.tag == ANY_TAG;
            lines.push("posted receive (MPI_Recv/MPI_Irecv)".to_owned());
            match (any_source, any_tag) {
                (true, true) => lines.push("from MPI_ANY_SOURCE, tag MPI_ANY_TAG".into()),
                (true, false) => lines.push("from MPI_ANY_SOURCE".into()),
                (false, true) => lines.push("tag MPI_ANY_TAG".into()),
                (false, false) => {}
            }
            json!({
                "status": status,
                "desired_local_rank": if any_source { -1 } else { i64::from(e.peer) },
                "desired_global_rank": if any_source { -1 } else { world(e.peer) },
                "tag_wild": any_tag,
                "desired_tag": e.tag,
                "desired_length": e.count,
                "system_buffer": false,
                "buffer": e.buffer,
                "actual_local_rank": -1,
                "actual_global_rank": -1,
                "actual_tag": -1,
                "actual_length": 0,
                "sender": null,
            })
        }
        Kind::Unexpected => {
            // ch3: dev.recv_data_sz; ch4: am.count in bytes; the debug queues record no size.
            let length = if is_debugq(layout) { 0 } else { e.count };
            lines.push("unexpected message: no receive posted yet".into());
            lines.push(match layout {
                // CH3's dev.state says eager (data buffered) or rendezvous (data at the sender).
                Layout::Ch3 if e.complete => format!("{} bytes buffered by MPICH", e.count),
                Layout::Ch3 => format!("rendezvous: {} bytes still at the sender", e.count),
                Layout::Ch4Am => "length in bytes".into(),
                Layout::Debugq4 | Layout::Debugq5 => "length not recorded by this MPICH".into(),
            });
            if !is_debugq(layout) {
                if e.complete {
                    lines.push(ALL_DATA_ARRIVED.into())
                } else {
                    absent.push(ALL_DATA_ARRIVED.into())
                }
            }
            json!({
                "status": "pending",
                "desired_local_rank": e.peer,
                "desired_global_rank": world(e.peer),
                "tag_wild": false,
                "desired_tag": e.tag,
                "desired_length": length,
                "system_buffer": true,
                "buffer": 0,
                "actual_local_rank": e.peer,
                "actual_global_rank": world(e.peer),
                "actual_tag": e.tag,
                "actual_length": length,
                // The fixtures' ch3 state says eager (its sender has gone on) or
                // rendezvous, never a synchronous send.
                "sender": if layout == Layout::Ch3 && e.complete { json!("gone_on") } else { Value::Null },
            })
        }
        Kind::Send { .. } => {
            lines.push(
                if is_debugq(layout) {
                    "send (blocking or non-blocking)"
                } else {
                    "non-blocking send (MPI_Isend family)"
                }
                .into(),
            );
            json!({
                "status": status,
                "desired_local_rank": e.peer,
                "desired_global_rank": world(e.peer),
                "tag_wild": false,
                "desired_tag": e.tag,
                "desired_length": e.count,
                "system_buffer": false,
                "buffer": e.buffer,
                "actual_local_rank": e.peer,
                "actual_global_rank": world(e.peer),
                "actual_tag": e.tag,
                "actual_length": e.count,
                "sender": null,
            })
        }
    };
    if e.complete && e.kind != Kind::Unexpected {
        lines.push(COMPLETED.into());
    } else {
        absent.push(COMPLETED.into());
    }
    if c.remote.is_some() {
        lines.push(REMOTE_GROUP.into());
    } else {
        absent.push(REMOTE_GROUP.into());
    }
    ExpectedOp {
        fields,
        lines,
        absent,
    }
}

// ------------------------------------------------------------------------------ running mqd

/// The state letter of /proc/PID/stat.
fn proc_state(pid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/stat: {e}"));
    let after_comm = &stat[stat.rfind(')').expect("comm in parentheses") + 1..];
    after_comm
        .trim_start()
        .chars()
        .next()
        .expect("state letter")
}

fn tracer_pid(pid: i32) -> i32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("TracerPid line")
}

/// Polls the state letter for up to `timeout` until `want` accepts it; the last one read.
fn state_until(pid: i32, timeout: Duration, want: impl Fn(char) -> bool) -> char {
    let deadline = Instant::now() + timeout;
    loop {
        let s = proc_state(pid);
        if want(s) || Instant::now() >= deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The running ranks of one job of a layout.
struct Job {
    layout: Layout,
    scenario: &'static str,
    size: i32,
    ranks: Vec<Rank>,
}

impl Job {
    fn spawn(layout: Layout, scenario: &'static str, size: i32) -> Job {
        let binary = fixtures::layout_binary(layout);
        let ranks = (0..size)
            .map(|r| {
                fixtures::spawn_rank(binary, scenario, r, size).unwrap_or_else(|e| {
                    panic!("{binary} --scenario {scenario} --rank {r} --size {size}: {e}")
                })
            })
            .collect();
        Job {
            layout,
            scenario,
            size,
            ranks,
        }
    }

    fn binary(&self) -> &'static str {
        fixtures::layout_binary(self.layout)
    }

    fn what(&self) -> String {
        format!("{} {} (N={})", self.binary(), self.scenario, self.size)
    }

    /// Runs `mqd dump --json` on every rank at once; checks that the ranks run on as before.
    fn dump(&mut self) -> Dump {
        let what = self.what();
        let pids: Vec<i32> = self.ranks.iter().map(Rank::pid).collect();
        // A rank sleeps in sigsuspend once it printed READY: wait for it to get there.
        let before: Vec<char> = pids
            .iter()
            .map(|&p| state_until(p, Duration::from_secs(2), |s| s == 'S'))
            .collect();
        for (&pid, &s) in pids.iter().zip(&before) {
            assert!(
                matches!(s, 'S' | 'R'),
                "{what}: pid {pid} is in state {s} before the dump"
            );
        }
        let start = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_mqd"))
            .args(["dump", "--json"])
            .args(pids.iter().map(i32::to_string))
            .output()
            .expect("run mqd");
        let elapsed = start.elapsed();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "{what}: mqd dump --json {pids:?} failed ({}); stderr:\n{stderr}",
            output.status
        );
        let doc: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("{what}: mqd printed no JSON document ({e}); stderr:\n{stderr}")
        });
        for ((rank, &pid), &was) in self.ranks.iter_mut().zip(&pids).zip(&before) {
            assert!(
                rank.is_running(),
                "{what}: pid {pid} exited after the dump; mqd stderr:\n{stderr}"
            );
            let first = proc_state(pid);
            assert!(
                !matches!(first, 't' | 'T'),
                "{what}: pid {pid} left stopped ({first}); mqd stderr:\n{stderr}"
            );
            // Detaching restarts the interrupted sigsuspend: allow it a moment in R.
            let now = state_until(pid, Duration::from_secs(2), |s| s == was);
            assert_eq!(
                now, was,
                "{what}: pid {pid} state {was} before the dump, {first} then {now} after; mqd stderr:\n{stderr}"
            );
            assert_eq!(
                tracer_pid(pid),
                0,
                "{what}: pid {pid} still traced after the dump"
            );
        }
        let context = if stderr.trim().is_empty() {
            what
        } else {
            format!("{what} [mqd stderr: {}]", stderr.trim())
        };
        Dump {
            doc,
            elapsed,
            context,
            pids,
            json_bytes: output.stdout.len(),
        }
    }

    fn signal_all(&self, signal: &str) {
        for r in &self.ranks {
            r.signal(signal)
                .unwrap_or_else(|e| panic!("{}: kill -s {signal} {}: {e}", self.what(), r.pid()));
        }
    }

    fn wait_ready_all(&mut self) {
        let what = self.what();
        for r in &mut self.ranks {
            let pid = r.pid();
            r.wait_ready(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("{what}: pid {pid}: {e}"));
        }
    }
}

struct Dump {
    doc: Value,
    elapsed: Duration,
    /// What was dumped, with mqd's stderr when it said anything: prefix of every assertion.
    context: String,
    pids: Vec<i32>,
    /// Size of the document mqd printed.
    json_bytes: usize,
}

impl Dump {
    fn ranks(&self) -> &[Value] {
        self.doc["ranks"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no ranks array", self.context))
    }
}

fn as_i64(v: &Value, ctx: &str, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{ctx}: {key} is {:?}", v[key]))
}

/// The hex request address of an `extra_text`'s "request 0x..." line.
fn request_address(lines: &[Value], ctx: &str) -> u64 {
    let found: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.as_str()?.strip_prefix("request 0x"))
        .map(|hex| {
            u64::from_str_radix(hex, 16)
                .unwrap_or_else(|e| panic!("{ctx}: request line 0x{hex}: {e}"))
        })
        .collect();
    assert_eq!(found.len(), 1, "{ctx}: one request line in {lines:?}");
    assert_ne!(found[0], 0, "{ctx}: request 0x0");
    found[0]
}

/// Asserts one operation against its expectation; returns its request address.
fn assert_op(ctx: &str, got: &Value, want: &ExpectedOp) -> u64 {
    let mut fields = got.clone();
    let extra = fields
        .as_object_mut()
        .unwrap_or_else(|| panic!("{ctx}: operation is {got}"))
        .remove("extra_text")
        .unwrap_or_else(|| panic!("{ctx}: no extra_text in {got}"));
    assert_eq!(
        fields, want.fields,
        "{ctx}: fields (left: mqd, right: model)"
    );
    let lines = extra
        .as_array()
        .unwrap_or_else(|| panic!("{ctx}: extra_text is {extra}"));
    assert!(
        lines.len() <= 5,
        "{ctx}: more than 5 extra_text lines: {lines:?}"
    );
    for l in lines {
        let s = l
            .as_str()
            .unwrap_or_else(|| panic!("{ctx}: extra_text line {l}"));
        assert!(
            !s.is_empty() && s.len() <= 63 && s.is_ascii(),
            "{ctx}: extra_text line {s:?}"
        );
    }
    // A line may go on after "; " (e.g. "all data arrived; its sender has gone on").
    let has = |want: &str| {
        lines.iter().filter_map(|l| l.as_str()).any(|l| {
            l == want
                || l.strip_prefix(want)
                    .is_some_and(|rest| rest.starts_with("; "))
        })
    };
    for l in &want.lines {
        assert!(has(l), "{ctx}: extra_text {lines:?} lacks {l:?}");
    }
    for l in &want.absent {
        assert!(!has(l), "{ctx}: extra_text {lines:?} has {l:?}");
    }
    request_address(lines, ctx)
}

/// The few fields that tell the entries of a long queue apart.
fn key_fields(v: &Value) -> [Value; 5] {
    [
        "status",
        "desired_local_rank",
        "desired_tag",
        "desired_length",
        "buffer",
    ]
    .map(|k| v[k].clone())
}

/// Checks one rank's dump against its model; returns its communicators by name (unique ids)
/// and the request address of every listed entry (by index into `m.entries`).
fn check_rank(
    ctx: &str,
    layout: Layout,
    m: &RankModel,
    n: usize,
    pid: i32,
    got: &Value,
) -> RankSeen {
    let ctx = format!("{ctx}, rank {}", m.world_rank);
    assert_eq!(got["rank"], json!(m.world_rank), "{ctx}: rank");
    assert_eq!(got["pid"], json!(pid), "{ctx}: pid");
    assert_eq!(got["error"], Value::Null, "{ctx}: error");
    assert_eq!(got["host"], Value::Null, "{ctx}: host");
    let exe = got["executable"].as_str().unwrap_or_default();
    assert!(
        exe.ends_with(&format!("/{}", fixtures::layout_binary(layout))),
        "{ctx}: executable {exe:?}"
    );
    let message = got["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(flavour_text(layout)),
        "{ctx}: message {message:?}"
    );

    let want = expected_comms(layout, m, n);
    let comms = got["communicators"]
        .as_array()
        .unwrap_or_else(|| panic!("{ctx}: communicators {}", got["communicators"]));
    let names: Vec<&str> = comms
        .iter()
        .map(|c| c["name"].as_str().unwrap_or("?"))
        .collect();
    let want_names: Vec<&str> = want.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names, want_names,
        "{ctx}: communicators, in recvcontext_id order"
    );

    let mut seen = RankSeen::default();
    let mut requests: HashMap<u64, String> = HashMap::new();
    for (g, w) in comms.iter().zip(&want) {
        let ctx = format!("{ctx}, communicator {:?}", w.name);
        let id = g["unique_id"]
            .as_u64()
            .unwrap_or_else(|| panic!("{ctx}: unique_id {}", g["unique_id"]));
        assert_ne!(id, 0, "{ctx}: unique_id");
        assert!(
            seen.comm_ids.insert(w.name.clone(), id).is_none(),
            "{ctx}: name listed twice"
        );
        assert_eq!(as_i64(g, &ctx, "size"), w.size, "{ctx}: size");
        assert_eq!(
            as_i64(g, &ctx, "local_rank"),
            w.local_rank,
            "{ctx}: local_rank"
        );
        assert_eq!(
            g["group"],
            json!(w.group),
            "{ctx}: group (left: mqd, right: model)"
        );
        assert_eq!(g["group_error"], Value::Null, "{ctx}: group_error");
        for (queue, entries) in [
            ("pending_receives", &w.receives),
            ("unexpected_messages", &w.unexpected),
            ("pending_sends", &w.sends),
        ] {
            let q = &g[queue];
            let qctx = format!("{ctx}, {queue}");
            assert_eq!(q["available"], json!(true), "{qctx}: available ({q})");
            assert_eq!(q["error"], Value::Null, "{qctx}: error");
            let ops = q["operations"]
                .as_array()
                .unwrap_or_else(|| panic!("{qctx}: operations {}", q["operations"]));
            let summary = || {
                let mut s = String::new();
                for op in ops.iter().take(20) {
                    let _ = write!(s, "\n  {}", json!(key_fields(op)));
                }
                s
            };
            assert_eq!(
                ops.len(),
                entries.len(),
                "{qctx}: number of operations; got (first 20):{}",
                summary()
            );
            let full = entries.len() <= FULL_CHECK_LIMIT;
            let sample = sample_indices(entries.len());
            for (i, (op, &e)) in ops.iter().zip(entries).enumerate() {
                let octx = format!("{qctx}[{i}] (model entry {e})");
                if full || sample.contains(&i) {
                    let want = expected_op(layout, m, &m.entries[e], n);
                    let request = assert_op(&octx, op, &want);
                    if let Some(other) = requests.insert(request, octx.clone()) {
                        panic!("{octx}: request {request:#x} also listed as {other}");
                    }
                    seen.requests.insert(e, request);
                } else {
                    // Cheap: the fields that tell entries apart, from the model entry itself
                    // (long queues are the pending receives of `big`).
                    let me = &m.entries[e];
                    assert!(
                        me.kind == Kind::Receive && !me.complete,
                        "model: long queues hold pending receives"
                    );
                    let any = me.peer == ANY_SOURCE;
                    let want = [
                        json!("pending"),
                        json!(if any { -1 } else { i64::from(me.peer) }),
                        json!(me.tag),
                        json!(me.count),
                        json!(me.buffer),
                    ];
                    assert_eq!(
                        key_fields(op),
                        want,
                        "{octx}: status, desired rank, tag, length, buffer"
                    );
                }
            }
        }
    }
    seen
}

/// First 10, last 10 and every 997th index of a long queue.
fn sample_indices(len: usize) -> HashSet<usize> {
    (0..len.min(10))
        .chain(len.saturating_sub(10)..len)
        .chain((0..len).step_by(997))
        .collect()
}

#[derive(Debug, Default)]
struct RankSeen {
    /// unique_id by (shown) name.
    comm_ids: HashMap<String, u64>,
    /// Request address by model entry index (fully checked entries).
    requests: HashMap<usize, u64>,
}

/// Checks a whole dump against the models of its ranks.
fn check_dump(job: &Job, dump: &Dump, models: &[RankModel]) -> Vec<RankSeen> {
    let ctx = &dump.context;
    let doc = &dump.doc;
    assert_eq!(doc["schema"], json!("mqd/1"), "{ctx}: schema");
    assert_eq!(doc["acquired_by"], json!("attach"), "{ctx}: acquired_by");
    assert_eq!(doc["starter_pid"], Value::Null, "{ctx}: starter_pid");
    assert_eq!(doc["abort_message"], Value::Null, "{ctx}: abort_message");
    // The ranks name the DLL in MPIR_dll_name.
    assert_eq!(doc["dll"]["path"], json!(fixtures::DLL_PATH), "{ctx}: dll");
    let ranks = dump.ranks();
    assert_eq!(ranks.len(), models.len(), "{ctx}: one document per rank");
    ranks
        .iter()
        .zip(models)
        .zip(&dump.pids)
        .map(|((got, m), &pid)| check_rank(ctx, job.layout, m, job.size as usize, pid, got))
        .collect()
}

// ------------------------------------------------------------------------------ scenarios

/// Sizes: 4 where left and right neighbours (or the split halves) must differ, 2 where the
/// scenario has nothing to tell apart.
fn size_of(scenario: &str) -> i32 {
    match scenario {
        "wildcards" | "unexpected" | "sends" | "comms" | "ring" => 4,
        "freed" | "compute" => 2,
        "big" => BIG_SIZE,
        other => panic!("unknown scenario {other}"),
    }
}

fn models(scenario: &str, n: i32, second_state: bool) -> Vec<RankModel> {
    (0..n)
        .map(|r| scenario_model(scenario, r, n, second_state))
        .collect()
}

/// Spawn, dump, check: the scenarios with one state.
fn run(layout: Layout, scenario: &'static str) {
    let n = size_of(scenario);
    let mut job = Job::spawn(layout, scenario, n);
    let dump = job.dump();
    if scenario == "big" {
        eprintln!(
            "{}: mqd dump --json of {} rank(s) x {} posted receives took {:.2?} ({} bytes of JSON)",
            dump.context,
            n,
            fixtures::BIG_COUNT,
            dump.elapsed,
            dump.json_bytes
        );
        for (r, rank) in dump.ranks().iter().enumerate() {
            let world = &rank["communicators"][0];
            assert_eq!(
                world["name"],
                json!("MPI_COMM_WORLD"),
                "{}: rank {r}",
                dump.context
            );
            let count = world["pending_receives"]["operations"]
                .as_array()
                .map_or(0, Vec::len);
            assert_eq!(
                count,
                fixtures::BIG_COUNT,
                "{}: rank {r}: posted receives on COMM_WORLD",
                dump.context
            );
        }
    }
    let seen = check_dump(&job, &dump, &models(scenario, n, false));
    match scenario {
        "compute" => {
            for (r, s) in seen.iter().enumerate() {
                assert!(
                    s.requests.is_empty(),
                    "{}: rank {r}: no queue entries",
                    dump.context
                );
            }
        }
        "ring" => {
            // Who waits for whom: rank r sends to r+1, and holds r-1's message unreceived.
            for (r, rank) in dump.ranks().iter().enumerate() {
                let ring = rank["communicators"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["name"] == json!("ring")))
                    .unwrap_or_else(|| panic!("{}: rank {r}: no ring communicator", dump.context));
                let send = &ring["pending_sends"]["operations"][0];
                let from = &ring["unexpected_messages"]["operations"][0];
                let r = r as i64;
                let n = i64::from(n);
                assert_eq!(
                    send["desired_local_rank"],
                    json!((r + 1) % n),
                    "{}: rank {r} sends right",
                    dump.context
                );
                assert_eq!(
                    from["actual_local_rank"],
                    json!((r + n - 1) % n),
                    "{}: rank {r} has left's message",
                    dump.context
                );
                // "ring" is a dup: debugq4 (MPICH 4.x) has no group for it, so no world ranks.
                let world = |rank: i64| if layout == Layout::Debugq4 { -1 } else { rank };
                assert_eq!(
                    send["desired_global_rank"],
                    json!(world((r + 1) % n)),
                    "{}: rank {r} sends right",
                    dump.context
                );
                assert_eq!(
                    from["actual_global_rank"],
                    json!(world((r + n - 1) % n)),
                    "{}: rank {r} has left's message",
                    dump.context
                );
            }
        }
        _ => {}
    }
}

/// `freed`: state 1, SIGUSR1, state 2.
fn run_freed(layout: Layout) {
    let n = size_of("freed");
    let mut job = Job::spawn(layout, "freed", n);
    let first = job.dump();
    let before = check_dump(&job, &first, &models("freed", n, false));
    job.signal_all("USR1");
    job.wait_ready_all();
    let second = job.dump();
    let after = check_dump(&job, &second, &models("freed", n, true));
    for (r, (b, a)) in before.iter().zip(&after).enumerate() {
        let ctx = format!("{}, rank {r}", second.context);
        assert!(
            b.comm_ids.contains_key("to be freed") && !a.comm_ids.contains_key("to be freed"),
            "{ctx}: to be freed is gone"
        );
        assert!(
            a.comm_ids.contains_key("after free"),
            "{ctx}: after free is there"
        );
        for kept in ["MPI_COMM_WORLD", "MPI_COMM_SELF", "kept"] {
            assert_eq!(
                a.comm_ids.get(kept),
                b.comm_ids.get(kept),
                "{ctx}: unique_id of {kept} is stable"
            );
        }
        // p1 (model entry 0) is the same request in both states.
        assert_eq!(
            a.requests.get(&0),
            b.requests.get(&0),
            "{ctx}: p1's request"
        );
        assert!(a.requests.contains_key(&0), "{ctx}: p1 listed");
    }
}

macro_rules! every_layout {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;
            #[test]
            fn ch3() {
                run(Layout::Ch3, stringify!($scenario));
            }
            #[test]
            fn ch4() {
                run(Layout::Ch4Am, stringify!($scenario));
            }
            #[test]
            fn debugq4() {
                run(Layout::Debugq4, stringify!($scenario));
            }
            #[test]
            fn debugq5() {
                run(Layout::Debugq5, stringify!($scenario));
            }
        }
    )*};
}

// `big` first: libtest starts tests in name order, and these are the long ones.
every_layout!(big, comms, compute, ring, sends, unexpected, wildcards);

mod freed {
    use super::*;
    #[test]
    fn ch3() {
        run_freed(Layout::Ch3);
    }
    #[test]
    fn ch4() {
        run_freed(Layout::Ch4Am);
    }
    #[test]
    fn debugq4() {
        run_freed(Layout::Debugq4);
    }
    #[test]
    fn debugq5() {
        run_freed(Layout::Debugq5);
    }
}

/// Every scenario and layout binary has its tests above.
#[test]
fn every_scenario_and_layout_is_covered() {
    let covered = [
        "big",
        "comms",
        "compute",
        "ring",
        "sends",
        "unexpected",
        "wildcards",
        "freed",
    ];
    for s in fixtures::SCENARIOS {
        assert!(covered.contains(&s), "scenario {s} has no test");
    }
    let binaries: Vec<&str> = Layout::ALL
        .iter()
        .map(|&l| fixtures::layout_binary(l))
        .collect();
    assert_eq!(binaries, fixtures::RANK_BINARIES);
    assert_eq!(
        fixtures::RANK_BINARIES,
        [
            fixtures::CH3,
            fixtures::CH4,
            fixtures::DEBUGQ4,
            fixtures::DEBUGQ5
        ]
    );
}
