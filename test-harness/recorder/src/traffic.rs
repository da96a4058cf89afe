//! Message accounting and the request table. Each message this rank sends is counted
//! when the call that sends it is entered, by the peer's `MPI_COMM_WORLD` rank and the
//! tag; each it receives when the call that receives it has returned, from the status
//! the MPI wrote (the wrapper gives the MPI a status of its own where the program ignores
//! it). Sent counts must never fall short: a send that cannot be counted sets the
//! overflow bit. Received counts may (a completion not seen): that only hides a proof.
//! A nonblocking receive is known by its request, kept from the call that makes it to
//! the one that completes it; every call that returns a request forgets what that handle
//! was, so a reused handle never carries an old receive.

use crate::region::{
    ABI_POINTERS, ABI_STANDARD, REQUEST_SLOTS, REQUESTS, RequestSlot, TRAFFIC, TRAFFIC_SLOTS,
    TrafficSlot, handle_at, held, mqd_recorder_region, wide,
};
use crate::{Binding, Status, Traffic, Word, comms};
use mqd_recording::{
    ABSENT, OVERFLOW_REQUESTS, OVERFLOW_TRAFFIC, REQUEST_ACTIVE, REQUEST_CANCELLED,
    REQUEST_COLLECTIVE, REQUEST_PERSISTENT, REQUEST_RECEIVE, REQUEST_SEND, REQUEST_SYNCHRONOUS,
    REQUEST_TOMBSTONE, RequestField, TrafficField, traffic_claim, traffic_key,
};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// A call's communicator, ranks and tags, as the envelope keeps them.
#[derive(Clone, Copy)]
pub(crate) struct Envelope {
    pub(crate) comm: u64,
    pub(crate) peers: [u64; 2],
    pub(crate) tags: [u64; 2],
}

/// Slots probed before a table counts as full: a bounded cost per call.
const PROBES: usize = 64;
/// Requests of one completing call followed; a call with more completes them unseen.
const FOLLOWED: usize = 64;

fn hash(x: u64) -> usize {
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize
}

fn overflow(bit: u64) {
    mqd_recorder_region
        .overflow
        .fetch_or(bit, Ordering::Relaxed);
}

/// The counts of `peer` and `tag` on communicators of `lineage`: their slot, claimed
/// if new (its key and lineage written after the claim: a reader that finds them not
/// yet written knows the slot is torn).
fn counts(peer: i32, tag: i32, lineage: u64) -> Option<&'static TrafficSlot> {
    let key = traffic_key(peer, tag);
    let claim = traffic_claim(key, lineage);
    let start = hash(claim);
    for i in 0..PROBES {
        let slot = &TRAFFIC[(start + i) % TRAFFIC_SLOTS];
        let field = &slot.0[TrafficField::Claim as usize];
        // Read first: a triple seen before costs no locked instruction.
        match field.load(Ordering::Acquire) {
            c if c == claim => return Some(slot),
            0 => match field.compare_exchange(0, claim, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    slot.0[TrafficField::Key as usize].store(key, Ordering::Relaxed);
                    slot.0[TrafficField::Lineage as usize].store(lineage, Ordering::Release);
                    return Some(slot);
                }
                Err(c) if c == claim => return Some(slot),
                Err(_) => {}
            },
            _ => {}
        }
    }
    None
}

/// A rank or tag as the envelope keeps it (sign-extended), if it is one.
fn int(v: u64) -> Option<i32> {
    (v != ABSENT).then_some(v as i64 as i32)
}

/// Counts a message sent on `comm` to rank `dest` with `tag`; one that cannot be counted
/// leaves the sent counts incomplete, and says so.
fn sent(comm: u64, dest: u64, tag: u64) {
    let (Some(dest), Some(tag)) = (int(dest), int(tag)) else {
        overflow(OVERFLOW_TRAFFIC);
        return;
    };
    if dest < 0 {
        // MPI_PROC_NULL: no message.
        return;
    }
    let slot = comms::peer_of(comm as Word, dest).and_then(|(peer, l)| counts(peer, tag, l));
    match slot {
        Some(s) => {
            s.0[TrafficField::Sent as usize].fetch_add(1, Ordering::Relaxed);
        }
        None => overflow(OVERFLOW_TRAFFIC),
    }
}

/// Counts a message received on `comm` from rank `source` with `tag` (uncounted where
/// it cannot be: a received count that falls short proves less, never more).
fn received(comm: u64, source: i32, tag: i32) {
    if source < 0 {
        return;
    }
    if let Some(s) = comms::peer_of(comm as Word, source).and_then(|(p, l)| counts(p, tag, l)) {
        s.0[TrafficField::Received as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// What the MPI wrote in a status: source, tag, and whether it says cancelled.
#[derive(Clone, Copy)]
struct Written {
    source: i32,
    tag: i32,
    cancelled: bool,
}

/// The status at `at` as `abi` lays it out (MPICH's: count words first; Open MPI's and
/// the standard ABI's: source first, where only the MPI knows where the standard ABI's
/// says cancelled); `None` for `MPI_STATUS_IGNORE` (0 or 1 in every MPI).
fn written(at: Word, abi: u64) -> Option<Written> {
    if at <= 1 {
        return None;
    }
    let word = |offset: usize| {
        // SAFETY: a status the MPI just wrote (the program's, or the wrapper's own),
        // at least 20 bytes long in every ABI.
        unsafe { std::ptr::read_unaligned((at + offset) as *const i32) }
    };
    Some(match abi {
        ABI_POINTERS => Written {
            source: word(0),
            tag: word(4),
            cancelled: word(12) != 0,
        },
        ABI_STANDARD => Written {
            source: word(0),
            tag: word(4),
            // Not known: taken as cancelled, so never counted received.
            cancelled: comms::ask(comms::TEST_CANCELLED, c"PMPI_Test_cancelled", at)
                .is_none_or(|flag| flag as u32 != 0),
        },
        _ => Written {
            source: word(8),
            tag: word(12),
            cancelled: word(4) & 1 != 0,
        },
    })
}

/// The size of one status in `abi`.
fn status_size(abi: u64) -> usize {
    match abi {
        ABI_POINTERS => 24,
        ABI_STANDARD => 32,
        _ => 20,
    }
}

impl RequestSlot {
    fn field(&self, f: RequestField) -> &AtomicU64 {
        &self.0[f as usize]
    }

    fn get(&self, f: RequestField) -> u64 {
        self.field(f).load(Ordering::Relaxed)
    }

    fn set(&self, f: RequestField, v: u64) {
        self.field(f).store(v, Ordering::Relaxed);
    }

    /// Runs `fill` with the slot held; `false` when it could not be.
    fn write(&self, fill: impl FnOnce(&Self)) -> bool {
        held(self.field(RequestField::Sequence), || fill(self))
    }
}

/// A request as kept: what [`find`] returns.
#[derive(Clone, Copy, Default)]
struct Kept {
    handle: u64,
    kind: u64,
    comm: u64,
    peer: u64,
    tag: u64,
    /// A nonblocking collective's procedure (number from 1) and which collective on
    /// its communicator it is.
    call: u64,
    collective: u64,
}

/// The slot that keeps `handle`.
fn find(handle: u64) -> Option<&'static RequestSlot> {
    if handle == 0 || handle == REQUEST_TOMBSTONE {
        return None;
    }
    let start = hash(handle);
    for i in 0..PROBES {
        let slot = &REQUESTS[(start + i) % REQUEST_SLOTS];
        match slot.field(RequestField::Handle).load(Ordering::Acquire) {
            0 => return None,
            h if h == handle => return Some(slot),
            _ => {}
        }
    }
    None
}

fn kept(handle: u64) -> Option<Kept> {
    let slot = find(handle)?;
    Some(Kept {
        handle,
        kind: slot.get(RequestField::Kind),
        comm: slot.get(RequestField::Comm),
        peer: slot.get(RequestField::Peer),
        tag: slot.get(RequestField::Tag),
        call: slot.get(RequestField::Call),
        collective: slot.get(RequestField::Collective),
    })
}

/// Forgets `handle` (freed, completed, or now another request).
fn forget(handle: u64) {
    if let Some(slot) = find(handle) {
        slot.write(|s| s.set(RequestField::Handle, REQUEST_TOMBSTONE));
    }
}

/// Keeps the request `r` (its handle forgotten first); `false` when no slot was free.
fn keep(r: Kept) -> bool {
    forget(r.handle);
    let start = hash(r.handle);
    for i in 0..PROBES {
        let slot = &REQUESTS[(start + i) % REQUEST_SLOTS];
        let h = slot.get(RequestField::Handle);
        if h != 0 && h != REQUEST_TOMBSTONE {
            continue;
        }
        let mut taken = false;
        slot.write(|s| {
            let h = s.get(RequestField::Handle);
            if h == 0 || h == REQUEST_TOMBSTONE {
                s.set(RequestField::Kind, r.kind);
                s.set(RequestField::Comm, r.comm);
                s.set(RequestField::Peer, r.peer);
                s.set(RequestField::Tag, r.tag);
                s.set(RequestField::Call, r.call);
                s.set(RequestField::Collective, r.collective);
                s.field(RequestField::Handle)
                    .store(r.handle, Ordering::Release);
                taken = true;
            }
        });
        if taken {
            return true;
        }
    }
    overflow(OVERFLOW_REQUESTS);
    false
}

fn set_kind(handle: u64, kind: u64) {
    if let Some(slot) = find(handle) {
        slot.write(|s| s.set(RequestField::Kind, kind));
    }
}

/// What a completing call's entry saw, for its leaving: the requests it names as they
/// were kept (the MPI overwrites a completed one's handle), a message's communicator,
/// and statuses of the wrapper's own where the program ignores them.
struct Followed {
    requests: [Kept; FOLLOWED],
    count: usize,
    /// Whether every request of the call is in `requests`.
    all: bool,
    message_comm: Option<u64>,
    statuses: [Status; FOLLOWED],
}

thread_local! {
    static FOLLOWED_NOW: RefCell<Followed> = const {
        RefCell::new(Followed {
            requests: [Kept { handle: 0, kind: 0, comm: 0, peer: 0, tag: 0, call: 0, collective: 0 };
                FOLLOWED],
            count: 0,
            all: false,
            message_comm: None,
            statuses: [const { Status([0; 4]) }; FOLLOWED],
        })
    };
    /// Messages matched by `MPI_Mprobe` and not yet received: handle and communicator.
    static MATCHED: RefCell<[(u64, u64); 8]> = const { RefCell::new([(0, 0); 8]) };
}

fn int_at(at: Word) -> Option<i32> {
    // SAFETY: a pointer to an `int` the MPI wrote.
    (at > 1).then(|| unsafe { std::ptr::read_unaligned(at as *const i32) })
}

/// The requests a call names: the array and its length, or the one handle.
fn requests_of(binding: &Binding, args: &[Word]) -> (Word, usize) {
    match (
        binding.at::<b'A'>(),
        binding.at::<b'L'>(),
        binding.at::<b'Q'>(),
    ) {
        (Some(a), Some(l), _) => (args[a], usize::try_from(args[l] as i32).unwrap_or(0)),
        (_, _, Some(q)) => (args[q], 1),
        _ => (0, 0),
    }
}

/// On entering a call of `binding` (the outermost): sends counted, completions followed,
/// statuses of the wrapper's own given where the program ignores them.
#[inline(always)]
pub(crate) fn enter(
    binding: &Binding,
    args: &mut [Word],
    envelope: Envelope,
    own: Option<&mut Status>,
    abi: u64,
) {
    let Envelope { comm, peers, tags } = envelope;
    if let (Some(status), Some(s)) = (own, binding.at::<b's'>())
        && args[s] <= 1
    {
        args[s] = std::ptr::from_mut(status) as Word;
    }
    match binding.traffic {
        Traffic::Send | Traffic::SendReceive | Traffic::Isendrecv => sent(comm, peers[0], tags[0]),
        Traffic::Untracked => overflow(OVERFLOW_TRAFFIC),
        Traffic::Start => {
            let (array, n) = requests_of(binding, args);
            let step = if wide(abi) { 8 } else { 4 };
            for i in 0..n {
                let Some(handle) = handle_at(array + i * step, abi) else {
                    continue;
                };
                let Some(r) = kept(handle) else { continue };
                if r.kind & REQUEST_SEND != 0 {
                    sent(r.comm, r.peer, r.tag);
                }
                set_kind(handle, r.kind | REQUEST_ACTIVE);
            }
        }
        t if t.completes() => follow(binding, args, abi),
        Traffic::Mrecv => {
            let message = binding.at::<b'M'>().and_then(|m| handle_at(args[m], abi));
            let comm = message.and_then(|m| {
                MATCHED
                    .try_with(|matched| {
                        let mut matched = matched.borrow_mut();
                        let found = matched.iter_mut().find(|(h, _)| *h == m)?;
                        found.0 = 0;
                        Some(found.1)
                    })
                    .ok()
                    .flatten()
            });
            let _ = FOLLOWED_NOW.try_with(|f| f.borrow_mut().message_comm = comm);
        }
        Traffic::Cancel => {
            // MPI_Cancel's one parameter points at the handle.
            if let Some(handle) = handle_at(args[0], abi)
                && let Some(r) = kept(handle)
            {
                set_kind(handle, r.kind | REQUEST_CANCELLED);
            }
        }
        Traffic::Free => {
            if let Some(handle) = handle_at(requests_of(binding, args).0, abi) {
                forget(handle);
            }
        }
        _ => {}
    }
}

/// Notes the requests a completing call names, as kept now, and gives it statuses of
/// the wrapper's own where the program ignores them.
fn follow(binding: &Binding, args: &mut [Word], abi: u64) {
    let (array, n) = requests_of(binding, args);
    let step = if wide(abi) { 8 } else { 4 };
    let single = binding.at::<b'A'>().is_none();
    let _ = FOLLOWED_NOW.try_with(|f| {
        let mut f = f.borrow_mut();
        f.count = 0;
        f.all = n <= FOLLOWED;
        for i in 0..n.min(FOLLOWED) {
            let at = if single { array } else { array + i * step };
            let kept = handle_at(at, abi).and_then(kept).unwrap_or_default();
            f.requests[i] = kept;
        }
        f.count = n.min(FOLLOWED);
        if let Some(s) = binding.at::<b'S'>()
            && args[s] <= 1
            && n <= FOLLOWED
        {
            args[s] = f.statuses.as_mut_ptr() as Word;
        }
    });
}

/// On leaving a call of `binding` that returned `status`: receives counted, requests
/// kept or forgotten. `collective`: a collective's procedure number and which on its
/// communicator it is.
#[inline(always)]
pub(crate) fn leave(
    binding: &Binding,
    status: Word,
    args: &[Word],
    (envelope, collective): (Envelope, Option<(usize, u64)>),
    abi: u64,
) {
    if status != 0 {
        return;
    }
    let comm = envelope.comm;
    match binding.traffic {
        Traffic::Receive | Traffic::SendReceive => {
            if let Some(w) = binding.at::<b's'>().and_then(|s| written(args[s], abi)) {
                received(comm, w.source, w.tag);
            }
        }
        t if t.completes() => completed(binding, args, abi),
        Traffic::Probe => {
            let flagged = binding
                .at::<b'f'>()
                .is_none_or(|f| int_at(args[f]).is_some_and(|v| v != 0));
            let message = binding.at::<b'm'>().and_then(|m| handle_at(args[m], abi));
            if let Some(m) = message.filter(|_| flagged) {
                let _ = MATCHED.try_with(|matched| {
                    let mut matched = matched.borrow_mut();
                    let free = matched.iter().position(|(h, _)| *h == 0).unwrap_or(0);
                    matched[free] = (m, comm);
                });
            }
        }
        Traffic::Mrecv => {
            let comm = FOLLOWED_NOW
                .try_with(|f| f.borrow_mut().message_comm.take())
                .ok()
                .flatten();
            if let Some(comm) = comm {
                if let Some(s) = binding.at::<b's'>() {
                    if let Some(w) = written(args[s], abi) {
                        received(comm, w.source, w.tag);
                    }
                } else if let Some(handle) =
                    binding.at::<b'q'>().and_then(|q| handle_at(args[q], abi))
                {
                    keep(Kept {
                        handle,
                        kind: REQUEST_RECEIVE | REQUEST_ACTIVE,
                        comm,
                        peer: ABSENT,
                        tag: ABSENT,
                        call: 0,
                        collective: ABSENT,
                    });
                }
                return;
            }
        }
        _ => {}
    }
    if binding.makes_request
        && let Some(handle) = binding.at::<b'q'>().and_then(|q| handle_at(args[q], abi))
    {
        made(binding, handle, envelope, collective);
    }
}

/// Keeps the request `handle` a call just made, or forgets what it was.
fn made(binding: &Binding, handle: u64, envelope: Envelope, collective: Option<(usize, u64)>) {
    // MPI_Issend and MPI_Ssend_init (and their _c forms): kept as synchronous sends.
    let name = binding.name.to_bytes();
    let synchronous = if name.starts_with(b"MPI_Issend") || name.starts_with(b"MPI_Ssend_init") {
        REQUEST_SEND | REQUEST_SYNCHRONOUS
    } else {
        0
    };
    // A nonblocking collective (not a persistent one's `_init`, which starts nothing).
    if let Some((id, k)) = collective.filter(|_| name.starts_with(b"MPI_I")) {
        keep(Kept {
            handle,
            kind: REQUEST_COLLECTIVE | REQUEST_ACTIVE,
            comm: envelope.comm,
            peer: envelope.peers[0],
            tag: ABSENT,
            call: id as u64 + 1,
            collective: k,
        });
        return;
    }
    let kind = match binding.traffic {
        Traffic::Irecv => REQUEST_RECEIVE | REQUEST_ACTIVE,
        Traffic::Isendrecv => REQUEST_RECEIVE | REQUEST_ACTIVE,
        Traffic::ReceiveInit => REQUEST_RECEIVE | REQUEST_PERSISTENT,
        Traffic::SendInit => REQUEST_SEND | REQUEST_PERSISTENT | synchronous,
        Traffic::Send if synchronous != 0 => synchronous | REQUEST_ACTIVE,
        Traffic::Mrecv => return,
        _ => {
            forget(handle);
            return;
        }
    };
    // An Isendrecv's receive half is its second rank and tag.
    let half = usize::from(binding.traffic == Traffic::Isendrecv);
    let r = Kept {
        handle,
        kind,
        comm: envelope.comm,
        peer: envelope.peers[half],
        tag: envelope.tags[half],
        call: 0,
        collective: ABSENT,
    };
    if !keep(r) && kind & REQUEST_PERSISTENT != 0 && kind & REQUEST_SEND != 0 {
        // Its starts would send uncounted.
        overflow(OVERFLOW_TRAFFIC);
    }
}

/// Counts the receives a completing call completed and forgets the requests it ended.
fn completed(binding: &Binding, args: &[Word], abi: u64) {
    let flag = binding.at::<b'f'>().and_then(|f| int_at(args[f]));
    if flag == Some(0) {
        return;
    }
    let index = binding.at::<b'i'>().and_then(|i| int_at(args[i]));
    let single_status = binding.at::<b's'>().map(|s| args[s]);
    let statuses = binding.at::<b'S'>().map_or(0, |s| args[s]);
    let size = status_size(abi);
    let _ = FOLLOWED_NOW.try_with(|f| {
        let f = f.borrow();
        let done = |i: usize, status: Option<Written>| {
            let Some(r) = f.requests.get(i).filter(|_| i < f.count).copied() else {
                return;
            };
            if r.handle == 0 {
                return;
            }
            let active = r.kind & REQUEST_ACTIVE != 0;
            if r.kind & REQUEST_RECEIVE != 0 && active && r.kind & REQUEST_CANCELLED == 0 {
                match status {
                    Some(w) if !w.cancelled => received(r.comm, w.source, w.tag),
                    Some(_) => {}
                    None => {
                        if let (Some(p), Some(t)) = (int(r.peer), int(r.tag))
                            && p >= 0
                            && t >= 0
                        {
                            received(r.comm, p, t);
                        }
                    }
                }
            }
            if r.kind & REQUEST_PERSISTENT != 0 {
                set_kind(r.handle, r.kind & !(REQUEST_ACTIVE | REQUEST_CANCELLED));
            } else {
                forget(r.handle);
            }
        };
        match binding.traffic {
            Traffic::Wait | Traffic::Test => done(0, single_status.and_then(|s| written(s, abi))),
            Traffic::Waitall | Traffic::Testall if f.all => {
                for i in 0..f.count {
                    let s = (statuses > 1).then(|| statuses + i * size);
                    done(i, s.and_then(|s| written(s, abi)));
                }
            }
            Traffic::Waitany | Traffic::Testany => {
                if let Some(i) = index.and_then(|i| usize::try_from(i).ok()) {
                    done(i, single_status.and_then(|s| written(s, abi)));
                }
            }
            Traffic::Waitsome | Traffic::Testsome => {
                let out = binding
                    .at::<b'o'>()
                    .and_then(|o| int_at(args[o]))
                    .unwrap_or(0);
                let indices = binding.at::<b'I'>().map_or(0, |i| args[i]);
                if indices <= 1 {
                    return;
                }
                for k in 0..usize::try_from(out).unwrap_or(0).min(FOLLOWED) {
                    let Some(i) = int_at(indices + k * 4).and_then(|i| usize::try_from(i).ok())
                    else {
                        continue;
                    };
                    let s = (statuses > 1).then(|| statuses + k * size);
                    done(i, s.and_then(|s| written(s, abi)));
                }
            }
            _ => {}
        }
    });
}
