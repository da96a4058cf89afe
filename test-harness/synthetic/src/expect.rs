//! What a correct MQD library must report for a synthetic process, modelled independently
//! of any library, and the library under test loaded once per test binary.

use crate::{
    Arch, BuildOptions, CommKind, CommSpec, Layout, MPI_ANY_SOURCE, MPI_ANY_TAG, ProcessSpec,
    QueueKind, RequestSpec, SyntheticTarget,
};
use mqd_library_host::library::MqsLibrary;
use mqd_library_host::session::{Debugger, Display, SessionOptions};
use mqd_model::{Communicator, Operation, OperationStatus, SenderState};
use mqd_target::Target;
use std::sync::{Arc, OnceLock};

/// The built `libmqd_mpich.so`, loaded once per test binary.
pub fn library() -> Arc<MqsLibrary> {
    static LIB: OnceLock<Arc<MqsLibrary>> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = mqd_library_host::library::bundled_library()
            .expect("libmqd_mpich.so not found: build it with `cargo build -p mqd-mpich`");
        Arc::new(MqsLibrary::load(&path).unwrap_or_else(|e| panic!("{e}")))
    })
    .clone()
}

/// A session over [`library`] that poisons the structs the library fills, so that a
/// field it forgets shows.
pub fn debugger() -> Debugger {
    Debugger::new(
        library(),
        SessionOptions {
            poison_outputs: true,
            ..SessionOptions::default()
        },
    )
}

/// Every layout, and the three ABIs the tests cover.
pub const LAYOUTS: [Layout; 4] = [Layout::Ch3, Layout::Ch4Am, Layout::Debugq4, Layout::Debugq5];
/// LP64 and ILP32 little-endian, LP64 big-endian.
pub const ARCHES: [Arch; 3] = [Arch::LP64_LE, Arch::ILP32_LE, Arch::LP64_BE];

/// How much of MPICH's type information the debugger gives the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knowledge {
    /// Every type, field and symbol of the image.
    Full,
    /// Only what MPICH's own library asks for (MPICH's dbgstub, a partial DWARF reader):
    /// no `local_size` (sizes are `remote_size`), no `comm_kind`, no group or device
    /// tables (groups only for COMM_WORLD and single-process communicators), no
    /// `MPI_Status` (no matched source and tag), no CH3 or CH4 message state (no sender notes).
    MpichMinimal,
}

/// What the process can tell about a communicator's local group.
fn known_group(knowledge: Knowledge, c: &CommSpec, world_rank: i32) -> Option<Vec<i32>> {
    // Every layout keeps the group somewhere: MPIR_Group, or with lazy groups
    // the device's tables (ch3 VC tables, ch4 rank maps).
    let stored = c.local_group.clone();
    if stored.is_some() && knowledge == Knowledge::Full {
        return stored;
    }
    if c.kind == CommKind::Intra && c.context_id == 0 && c.recvcontext_id == 0 {
        return Some((0..c.local_size).collect());
    }
    if c.kind == CommKind::Intra && c.local_size == 1 {
        return Some(vec![world_rank]);
    }
    None
}

fn known_remote_group(knowledge: Knowledge, c: &CommSpec) -> Option<Vec<i32>> {
    match knowledge {
        Knowledge::Full => c.remote_group.clone(),
        Knowledge::MpichMinimal => None,
    }
}

/// Truncation of a target value to the target's `MPI_Aint` / pointer width.
fn aint(spec: &ProcessSpec, value: i64) -> i64 {
    if spec.arch.pointer_size == 4 {
        value as i32 as i64
    } else {
        value
    }
}
fn address(spec: &ProcessSpec, value: u64) -> u64 {
    if spec.arch.pointer_size == 4 {
        value & 0xffff_ffff
    } else {
        value
    }
}

/// A 16-bit context id as the target stores it, read back signed.
fn stored_context(layout: Layout, ctx: i32) -> i64 {
    if layout.context_id_size() == 2 {
        i64::from(ctx as u16)
    } else {
        i64::from(ctx)
    }
}

/// The display a correct library must produce for `spec` built into `target`.
pub fn expected_display(
    spec: &ProcessSpec,
    options: &BuildOptions,
    target: &SyntheticTarget,
    world_rank: i32,
) -> Vec<ExpectedComm> {
    // Every build option keeps the groups somewhere the library reads.
    let _ = options;
    expected_display_knowing(spec, target, world_rank, Knowledge::Full)
}

/// The display a correct library must produce for `spec` built into `target` when the
/// debugger gives it `knowledge` of the image's types.
pub fn expected_display_knowing(
    spec: &ProcessSpec,
    target: &SyntheticTarget,
    world_rank: i32,
    knowledge: Knowledge,
) -> Vec<ExpectedComm> {
    let layout = spec.layout;
    let mut comms: Vec<&CommSpec> = spec.comms.iter().collect();
    comms.sort_by_key(|c| {
        (
            stored_context(layout, c.recvcontext_id),
            target.comm_address(c.slot),
        )
    });
    let exact = |ctx: i64, send: bool| -> Option<usize> {
        comms
            .iter()
            .position(|c| stored_context(layout, c.recvcontext_id) == ctx)
            .or_else(|| {
                send.then(|| {
                    comms
                        .iter()
                        .position(|c| stored_context(layout, c.context_id) == ctx)
                })
                .flatten()
            })
    };
    // MPICH's collectives use the communicator's context id with its lowest bit set.
    let owner = |ctx: i32, send: bool| -> Option<(usize, bool)> {
        let ctx = i64::from(ctx);
        exact(ctx, send).map(|c| (c, false)).or_else(|| {
            (ctx & 1 == 1)
                .then(|| exact(ctx & !1, send))
                .flatten()
                .map(|c| (c, true))
        })
    };
    let mut out: Vec<ExpectedComm> = comms
        .iter()
        .map(|c| ExpectedComm {
            unique_id: target.comm_address(c.slot),
            name: c.name.bytes().take(63).map(char::from).collect(),
            local_rank: i64::from(c.rank),
            size: i64::from(match knowledge {
                Knowledge::Full => c.local_size,
                Knowledge::MpichMinimal => c.remote_size,
            }),
            group: known_group(knowledge, c, world_rank),
            receives: Vec::new(),
            unexpected: Vec::new(),
            sends: Vec::new(),
        })
        .collect();
    let newest_first = matches!(layout, Layout::Debugq4 | Layout::Debugq5);
    for (kind, entries) in [
        (QueueKind::Posted, &spec.posted),
        (QueueKind::Unexpected, &spec.unexpected),
        (QueueKind::Sends, &spec.sends),
    ] {
        let mut order: Vec<usize> = (0..entries.len()).collect();
        if newest_first || kind == QueueKind::Sends {
            order.reverse();
        }
        for i in order {
            let r = &entries[i];
            let Some((ci, collective)) = owner(r.context_id, kind == QueueKind::Sends) else {
                continue;
            };
            let c = comms[ci];
            let peers = if c.kind == CommKind::Inter {
                known_remote_group(knowledge, c)
            } else {
                known_group(knowledge, c, world_rank)
            };
            let world = |rank: i32| -> i64 {
                peers
                    .as_ref()
                    .and_then(|g| usize::try_from(rank).ok().and_then(|r| g.get(r)))
                    .map_or(-1, |&w| i64::from(w))
            };
            let request = target
                .request_address(kind, i)
                .expect("entry has a request");
            // ch4 keeps a single-process communicator's receives and unreceived sends in
            // its self queues, with no source and no message state.
            let single = layout == Layout::Ch4Am
                && kind != QueueKind::Sends
                && spec.single_process_context(r.context_id);
            let mut op = expected_operation(spec, kind, r, &world, request, knowledge, single);
            if collective {
                op.op.collective = true;
                op.must_mention.retain(|m| m != "posted receive");
                op.must_mention.push("collective-internal".into());
            }
            // The library marks peers in an intercommunicator's remote group; without
            // comm_kind it knows one by its two context ids.
            op.op.remote_group = match knowledge {
                Knowledge::Full => c.kind == CommKind::Inter,
                Knowledge::MpichMinimal => c.context_id != c.recvcontext_id,
            };
            let slot = &mut out[ci];
            match kind {
                QueueKind::Posted => slot.receives.push(op),
                QueueKind::Unexpected => slot.unexpected.push(op),
                QueueKind::Sends => slot.sends.push(op),
            }
        }
    }
    out
}

fn expected_operation(
    spec: &ProcessSpec,
    kind: QueueKind,
    r: &RequestSpec,
    world: &dyn Fn(i32) -> i64,
    request: u64,
    knowledge: Knowledge,
    single_process: bool,
) -> ExpectedOp {
    let full = knowledge == Knowledge::Full;
    let count = aint(spec, r.count);
    let status = if r.complete && kind != QueueKind::Unexpected {
        OperationStatus::Complete
    } else {
        OperationStatus::Pending
    };
    let mut op = Operation {
        collective: false,
        status,
        desired_local_rank: i64::from(r.rank),
        desired_global_rank: world(r.rank),
        tag_wild: false,
        desired_tag: i64::from(r.tag),
        desired_length: count,
        system_buffer: false,
        buffer: address(spec, r.buffer),
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: 0,
        extra_text: Vec::new(),
        sender: None,
        request: Some(request),
        remote_group: false,
    };
    let mut must_mention = vec![format!("request {request:#x}")];
    match kind {
        QueueKind::Posted => {
            if r.rank == MPI_ANY_SOURCE {
                op.desired_local_rank = -1;
                op.desired_global_rank = -1;
                must_mention.push("MPI_ANY_SOURCE".into());
            }
            if r.tag == MPI_ANY_TAG {
                op.tag_wild = true;
                must_mention.push("MPI_ANY_TAG".into());
            }
            if r.complete && full {
                op.actual_local_rank = i64::from(r.status_source);
                op.actual_global_rank = world(r.status_source);
                op.actual_tag = i64::from(r.status_tag);
                op.actual_length = count;
            }
            if single_process {
                // The self queue records no source: rank 0, the only one.
                op.desired_local_rank = 0;
                op.desired_global_rank = world(0);
                must_mention.push("on a single-process communicator".into());
            }
            must_mention.push("posted receive".into());
        }
        QueueKind::Unexpected => {
            op.system_buffer = true;
            op.actual_local_rank = op.desired_local_rank;
            op.actual_global_rank = op.desired_global_rank;
            op.actual_tag = op.desired_tag;
            op.actual_length = count;
            // CH3 and CH4 record the send's kind: the library's notes say whether the sender
            // waits (synchronous) or has gone on (eager, complete), and the debugger
            // decodes them.
            if single_process {
                must_mention.push("sent to itself".into());
            } else if matches!(spec.layout, Layout::Ch3 | Layout::Ch4Am) && full {
                // A rendezvous (data still at the sender) waits for the match too.
                op.sender = if r.synchronous || !r.complete {
                    Some(SenderState::Waits)
                } else {
                    Some(SenderState::GoneOn)
                };
            }
            must_mention.push("unexpected message".into());
        }
        QueueKind::Sends => {
            op.actual_local_rank = op.desired_local_rank;
            op.actual_global_rank = op.desired_global_rank;
            op.actual_tag = op.desired_tag;
            op.actual_length = count;
            must_mention.push(
                match spec.layout {
                    Layout::Ch3 | Layout::Ch4Am => "non-blocking send",
                    _ => "send (blocking or non-blocking)",
                }
                .into(),
            );
        }
    }
    let completed = r.complete && kind != QueueKind::Unexpected;
    ExpectedOp {
        op,
        must_mention,
        completed,
    }
}

/// A communicator as a correct library reports it.
#[derive(Debug)]
pub struct ExpectedComm {
    /// Its unique id (its address).
    pub unique_id: u64,
    /// Its name, cut to 63 bytes.
    pub name: String,
    /// The process's rank in it.
    pub local_rank: i64,
    /// Its size.
    pub size: i64,
    /// COMM_WORLD ranks of its local group, when the process holds them.
    pub group: Option<Vec<i32>>,
    /// Posted receives, oldest first.
    pub receives: Vec<ExpectedOp>,
    /// Unexpected messages, in arrival order.
    pub unexpected: Vec<ExpectedOp>,
    /// Sends, in call order.
    pub sends: Vec<ExpectedOp>,
}

/// An operation as a correct library reports it.
#[derive(Debug)]
pub struct ExpectedOp {
    /// Every field but `extra_text`, which is checked through `must_mention`.
    pub op: Operation,
    /// Words some line of `extra_text` must contain.
    pub must_mention: Vec<String>,
    /// `extra_text` says "completed, not yet waited".
    pub completed: bool,
}

/// Asserts every field of every communicator and operation.
pub fn assert_display(what: &str, got: &Display, want: &[ExpectedComm]) {
    let names: Vec<&str> = got.communicators.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        got.communicators.len(),
        want.len(),
        "{what}: communicators {names:?}"
    );
    for (g, w) in got.communicators.iter().zip(want) {
        let ctx = format!("{what}, communicator {:?}", w.name);
        assert_eq!(g.unique_id, w.unique_id, "{ctx}: unique_id");
        assert_eq!(g.name, w.name, "{ctx}: name");
        assert_eq!(g.local_rank, w.local_rank, "{ctx}: local_rank");
        assert_eq!(g.size, w.size, "{ctx}: size");
        assert_eq!(g.group, w.group, "{ctx}: group");
        assert!(
            g.group_error.is_none(),
            "{ctx}: group error {:?}",
            g.group_error
        );
        assert_queue(&ctx, "receives", g.pending_receives.ops(), &w.receives, g);
        assert_queue(
            &ctx,
            "unexpected",
            g.unexpected_messages.ops(),
            &w.unexpected,
            g,
        );
        assert_queue(&ctx, "sends", g.pending_sends.ops(), &w.sends, g);
    }
}

fn assert_queue(
    ctx: &str,
    queue: &str,
    got: &[Operation],
    want: &[ExpectedOp],
    comm: &Communicator,
) {
    for q in [
        &comm.pending_receives,
        &comm.unexpected_messages,
        &comm.pending_sends,
    ] {
        assert!(q.error().is_none(), "{ctx}: queue error {:?}", q.error());
    }
    assert_eq!(got.len(), want.len(), "{ctx}: {queue}: {got:#?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let mut fields = g.clone();
        fields.extra_text.clear();
        assert_eq!(fields, w.op, "{ctx}: {queue}[{i}]");
        for needle in &w.must_mention {
            assert!(
                g.extra_text.iter().any(|l| l.contains(needle.as_str())),
                "{ctx}: {queue}[{i}] extra_text {:?} lacks {needle:?}",
                g.extra_text
            );
        }
        let says_completed = g
            .extra_text
            .iter()
            .any(|l| l.contains("completed, not yet waited"));
        assert_eq!(
            says_completed, w.completed,
            "{ctx}: {queue}[{i}] extra_text {:?}",
            g.extra_text
        );
        assert!(
            g.extra_text
                .iter()
                .all(|l| !l.is_empty() && l.len() <= 63 && l.is_ascii())
        );
    }
}

/// Adds `target` to a fresh debugger as COMM_WORLD rank `rank` and displays it once.
pub fn display_once(target: SyntheticTarget, rank: i32) -> (Debugger, Display) {
    let mut dbg = debugger();
    let name = target.name();
    let p = dbg
        .add_process(Box::new(target), rank)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let display = dbg.display(p).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    (dbg, display)
}
