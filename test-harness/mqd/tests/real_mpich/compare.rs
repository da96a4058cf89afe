//! The same processes through MPICH's own libtvmpich.so: every entry it reports must be in ours, each differing field explained.

use crate::*;
use std::collections::{HashMap, VecDeque};

// ------------------------------------------------------------------- comparison with MPICH's

/// One kind of difference between MPICH's DLL and ours.
pub(crate) struct DiffRow {
    pub(crate) theirs: String,
    pub(crate) ours: String,
    pub(crate) count: usize,
}

/// A scenario's section of `target/real-mpich-diff.md`.
pub(crate) struct Section {
    pub(crate) device: Device,
    pub(crate) scenario: &'static str,
    pub(crate) n: i32,
    pub(crate) notes: Vec<String>,
    /// (what, why) -> example and count.
    pub(crate) rows: BTreeMap<(String, String), DiffRow>,
}

impl Section {
    pub(crate) fn new(device: Device, scenario: &'static str, n: i32) -> Section {
        Section {
            device,
            scenario,
            n,
            notes: Vec::new(),
            rows: BTreeMap::new(),
        }
    }

    pub(crate) fn record(&mut self, what: &str, why: &str, theirs: &Value, ours: &Value) {
        let show = |v: &Value| {
            let s = v.to_string();
            if s.len() > 70 {
                format!("{}...", &s[..67])
            } else {
                s
            }
        };
        self.rows
            .entry((what.to_owned(), why.to_owned()))
            .or_insert_with(|| DiffRow {
                theirs: show(theirs),
                ours: show(ours),
                count: 0,
            })
            .count += 1;
    }

    pub(crate) fn render(&self) -> String {
        let mut s = format!(
            "## {} on {} ({} ranks)\n\n",
            self.scenario,
            self.device.name(),
            self.n
        );
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        if !self.rows.is_empty() {
            s.push_str("\n| field | MPICH's libtvmpich.so (example) | ours (example) | times | why |\n|---|---|---|---|---|\n");
            for ((what, why), row) in &self.rows {
                let cell = |t: &str| t.replace('|', "\\|");
                let _ = writeln!(
                    s,
                    "| {what} | {} | {} | {} | {} |",
                    cell(&row.theirs),
                    cell(&row.ours),
                    row.count,
                    cell(why)
                );
            }
        }
        s.push('\n');
        s
    }
}

/// The sections of every scenario run so far, written to `target/real-mpich-diff.md` in
/// scenario order each time one is added. Each test may run in a process of its own: a
/// section is kept in a file of its own and the document made from them all, under a lock.
pub(crate) fn publish(section: &Section) {
    let text = section.render();
    eprintln!("\n{text}");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir");
    let sections = target.join("real-mpich-diff");
    let _one = mqd_fixtures::exclusive_in(&sections, "publish");
    let file =
        |device: Device, scenario: &str| sections.join(format!("{}-{scenario}.md", device.name()));
    if let Err(e) = std::fs::write(file(section.device, section.scenario), &text) {
        eprintln!("cannot keep the section: {e}");
    }
    let mut doc = String::from(
        "# Real MPICH 4.0.2 (ch3:nemesis and ch4:ofi): MPICH's libtvmpich.so vs libmqd_mpich.so\n\n\
         Written by `cargo test -p mqd --test real_mpich`: the same processes dumped\n\
         through both libraries by `mqd dump --json --stats`; each row is a field where they\n\
         differ (ours matching what the program did), with an example and why.\n\n",
    );
    for device in DEVICES {
        for s in SCENARIOS {
            if let Ok(t) = std::fs::read_to_string(file(device, s)) {
                doc.push_str(&t);
            }
        }
    }
    let path = target.join("real-mpich-diff.md");
    if let Err(e) = std::fs::write(&path, doc) {
        eprintln!("cannot write {}: {e}", path.display());
    }
}

/// Why MPICH's DLL shows `theirs` where ours shows `ours` (ours being right by the model).
pub(crate) fn why(
    device: Device,
    kind: Option<Kind>,
    field: &str,
    theirs: &Value,
    ours: &Value,
    inter: bool,
) -> Option<&'static str> {
    let t = theirs.as_i64();
    Some(match (kind, field) {
        (Some(Kind::Send), "buffer" | "desired_length" | "actual_length")
            if device == Device::Ch4 =>
        {
            MISREAD_AM_SEND
        }
        (None, "name") if theirs == "--unnamed--" && ours == "" => {
            "an unnamed (internal) communicator: MPICH's DLL invents \"--unnamed--\"; ours gives the empty name MPI_Comm_get_name gives"
        }
        (None, "name")
            if theirs
                .as_str()
                .zip(ours.as_str())
                .is_some_and(|(t, o)| t.len() == 64 && o.len() == 63 && t.starts_with(o)) =>
        {
            "name longer than 63 bytes: MPICH's DLL copies 64 bytes without a NUL into the 64-byte field; ours cuts at 63 + NUL"
        }
        (None, "size") if inter => {
            "intercommunicator: MPICH's DLL reports remote_size; ours local_size (MPI_Comm_size)"
        }
        (None, "group") if theirs.is_null() => "MPICH's DLL has no mqs_get_comm_group",
        (Some(_), "desired_global_rank" | "actual_global_rank") if t == Some(-1) => {
            "MPICH's DLL never translates to COMM_WORLD ranks (its translate() returns -1)"
        }
        (Some(Kind::Receive), "actual_local_rank" | "actual_tag" | "actual_length") => {
            "not matched yet: MPICH's DLL copies the desired source (raw -2 for MPI_ANY_SOURCE), tag and -1; ours the interface's -1/-1/-1/0"
        }
        (Some(Kind::Unexpected), "status") if theirs == "complete" => {
            "eager message, data all in (cc 0): MPICH's DLL says complete; ours pending (nothing received it) + \"all data arrived\""
        }
        (Some(Kind::Unexpected), "system_buffer") => {
            "MPICH's DLL never sets system_buffer; an unexpected message is in MPICH's buffer"
        }
        (Some(Kind::Unexpected), "desired_length") => {
            "MPICH's DLL reads dev.user_count, never set in an unexpected request (stale from a recycled one); ours the size in bytes"
        }
        (Some(Kind::Unexpected), "actual_length") if t == Some(-1) => {
            "MPICH's DLL leaves actual_length -1; ours the size in bytes"
        }
        (Some(Kind::Unexpected), "sender") if theirs.is_null() => {
            "MPICH's DLL does not say whether the sender waits; ours decodes CH3's dev.state (synchronous send, eager data)"
        }
        (Some(_), "request") if theirs.is_null() => {
            "decoded from our library's \"request 0x...\" note; MPICH's DLL names no request"
        }
        (Some(_), "remote_group") if theirs == false => {
            "decoded from our library's remote-group note; MPICH's DLL does not mark intercommunicator peers"
        }
        (Some(_), "extra_text") => {
            "MPICH's DLL: nothing, or \"Non-blocking send\"; ours: the kind of entry, wildcards, completion, request address, remote group"
        }
        _ => return None,
    })
}

/// Why MPICH's DLL shows ch4 receive-queue entries nobody posted.
const MISREAD_AM: &str = "MPICH's DLL asks MPIDI_Devreq_t for am and MPIDIG_req_t for rank, tag and \
     context_id, names only its stub debugger knows (a real debugger has ch4.am and u.recv.*): it \
     gets -1 and reads all three from one wrong place (rank = context id = the tag's low 16 bits)";

/// Why MPICH's DLL shows ch4 sends with a wrong buffer and count.
const MISREAD_AM_SEND: &str = "MPICH's DLL asks MPIDI_Devreq_t for am, a name only its stub debugger \
     knows (a real debugger has ch4.am): it gets -1 and reads the send's buffer and count at a \
     wrong offset";

/// The mark of that misread: the rank MPICH's DLL shows (its raw `actual_local_rank`) is
/// the low 16 bits of the tag it shows (its raw `actual_tag`), both read from one place.
fn misread_am_fields(op: &Value) -> bool {
    match (op["actual_local_rank"].as_i64(), op["actual_tag"].as_i64()) {
        (Some(rank), Some(tag)) => rank == i64::from(tag as i16),
        _ => false,
    }
}

/// Entries in MPICH's DLL's dump must be in ours with equal or better-defined values.
pub(crate) fn compare_with_mpich(
    checks: &mut Checks,
    section: &mut Section,
    ctx: &str,
    ours: &Value,
    theirs: &Value,
    models: &[RankModel],
) {
    let empty = Vec::new();
    let their_ranks = theirs["ranks"].as_array().unwrap_or(&empty);
    let our_ranks = ours["ranks"].as_array().unwrap_or(&empty);
    let (mut their_ops, mut our_ops, mut their_comms, mut our_comms) = (0, 0, 0, 0);
    for t_rank in their_ranks {
        let rctx = format!("{ctx}, rank {} (pid {})", t_rank["rank"], t_rank["pid"]);
        if !t_rank["error"].is_null() {
            section.notes.push(format!(
                "{rctx}: MPICH's DLL could not dump it: {}",
                t_rank["error"]
            ));
            continue;
        }
        let Some(o_rank) = our_ranks.iter().find(|r| r["pid"] == t_rank["pid"]) else {
            checks.fail(format!("{rctx}: not in our dump"));
            continue;
        };
        let m = models.iter().find(|m| json!(m.rank) == o_rank["rank"]);
        let o_comms = o_rank["communicators"].as_array().unwrap_or(&empty);
        our_comms += o_comms.len();
        our_ops += o_comms
            .iter()
            .map(|c| {
                QUEUES
                    .iter()
                    .map(|k| c[k.queue()]["operations"].as_array().map_or(0, Vec::len))
                    .sum::<usize>()
            })
            .sum::<usize>();
        for t_comm in t_rank["communicators"].as_array().unwrap_or(&empty) {
            their_comms += 1;
            let cctx = format!(
                "{rctx}, communicator {} {}",
                t_comm["unique_id"], t_comm["name"]
            );
            let Some(o_comm) = o_comms
                .iter()
                .find(|c| c["unique_id"] == t_comm["unique_id"])
            else {
                checks.fail(format!("{cctx}: MPICH's DLL lists it, ours does not"));
                continue;
            };
            let cm = m.and_then(|m| {
                m.comms
                    .iter()
                    .find(|c| json!(c.shown_name()) == o_comm["name"])
            });
            let inter = cm.is_some_and(|c| c.remote.is_some());
            for field in ["name", "size", "local_rank", "group"] {
                let (t, o) = (&t_comm[field], &o_comm[field]);
                if t == o {
                    continue;
                }
                match why(section.device, None, field, t, o, inter) {
                    Some(reason) => section.record(&format!("communicator.{field}"), reason, t, o),
                    None => checks.fail(format!(
                        "{cctx}: {field}: MPICH's DLL {t}, ours {o}: unexplained"
                    )),
                }
            }
            for kind in QUEUES {
                let q = kind.queue();
                let t_ops = t_comm[q]["operations"].as_array().unwrap_or(&empty);
                let o_ops = o_comm[q]["operations"].as_array().unwrap_or(&empty);
                their_ops += t_ops.len();
                let want: Vec<&OpModel> = cm
                    .map(|c| c.ops.iter().filter(|o| o.kind == kind).collect())
                    .unwrap_or_default();
                let mut used = vec![false; o_ops.len()];
                let mut order = Vec::new();
                // Ours by what matches them (queues of 100,000 entries: no search per
                // entry), each list in our order.
                let send_keys = section.device == Device::Ch4 && kind == Kind::Send;
                let match_key = |op: &Value, rank: &Value| {
                    let buffer = if send_keys {
                        Value::Null
                    } else {
                        op["buffer"].clone()
                    };
                    format!("{} {buffer} {rank}", op["desired_tag"])
                };
                let mut by_key: HashMap<String, VecDeque<usize>> = HashMap::new();
                for (i, o) in o_ops.iter().enumerate() {
                    by_key
                        .entry(match_key(o, &o["desired_local_rank"]))
                        .or_default()
                        .push_back(i);
                }
                for t_op in t_ops {
                    let octx = format!("{cctx}, {q} entry ({})", key_of(t_op));
                    // The first of ours not yet matched with the same tag and buffer (ch4:
                    // MPICH's DLL misreads a send's buffer, see MISREAD_AM_SEND) and the
                    // same source, or any source (-1) where MPICH's DLL shows a negative one.
                    let t_rank = &t_op["desired_local_rank"];
                    let mut keys = vec![match_key(t_op, t_rank)];
                    if t_rank.as_i64().is_some_and(|r| r < 0) && *t_rank != json!(-1) {
                        keys.push(match_key(t_op, &json!(-1)));
                    }
                    let first = keys
                        .iter()
                        .filter_map(|k| Some((by_key.get(k)?.front().copied()?, k.clone())))
                        .min();
                    let Some(i) = first.map(|(i, k)| {
                        by_key.get_mut(&k).and_then(VecDeque::pop_front);
                        i
                    }) else {
                        if section.device == Device::Ch4
                            && kind != Kind::Send
                            && misread_am_fields(t_op)
                        {
                            section.record(
                                &format!("{q} entry only MPICH's DLL lists"),
                                MISREAD_AM,
                                &json!(key_of(t_op)),
                                &Value::Null,
                            );
                        } else {
                            checks.fail(format!("{octx}: MPICH's DLL lists it, ours does not"));
                        }
                        continue;
                    };
                    used[i] = true;
                    order.push(i);
                    let o_op = &o_ops[i];
                    // What the program did: our entry i is model entry i of this queue.
                    let truth = want.get(i).map(|w| {
                        let mut v = expected_fields(section.device, cm.expect("model comm"), w);
                        resolve_nonzero(&mut v, o_op);
                        v
                    });
                    for (field, t) in t_op.as_object().into_iter().flatten() {
                        let o = &o_op[field.as_str()];
                        if t == o {
                            continue;
                        }
                        let real = truth
                            .as_ref()
                            .map(|v| &v[field.as_str()])
                            .filter(|v| !v.is_null());
                        if field != "extra_text"
                            && let Some(real) = real
                            && o != real
                        {
                            if t == real {
                                checks.fail(format!(
                                    "{octx}: {field}: MPICH's DLL is right ({t}), ours is not ({o})"
                                ));
                            } else {
                                section.record(
                                    &format!("{q}.{field}"),
                                    "both differ from what the program did (see the failures)",
                                    t,
                                    o,
                                );
                            }
                            continue;
                        }
                        match why(section.device, Some(kind), field, t, o, inter) {
                            Some(reason) => section.record(&format!("{q}.{field}"), reason, t, o),
                            None => checks.fail(format!(
                                "{octx}: {field}: MPICH's DLL {t}, ours {o}: unexplained"
                            )),
                        }
                    }
                }
                if order.windows(2).any(|w| w[0] > w[1]) {
                    let reason = if kind == Kind::Send {
                        "MPICH's DLL lists sends newest first (MPIR_Sendq is pushed at its head); ours in call order"
                    } else {
                        "different order"
                    };
                    let theirs_order: Vec<usize> = order.clone();
                    section.record(
                        &format!("{q} order"),
                        reason,
                        &json!(theirs_order),
                        &json!((0..order.len()).collect::<Vec<_>>()),
                    );
                }
                for o_op in o_ops
                    .iter()
                    .zip(&used)
                    .filter(|(_, u)| !**u)
                    .map(|(o, _)| o)
                {
                    section.record(
                        &format!("{q} entry only ours lists"),
                        "MPICH's DLL does not list it",
                        &Value::Null,
                        &json!(key_of(o_op)),
                    );
                }
            }
        }
    }
    section.notes.push(format!(
        "{ctx}: entries listed: MPICH's DLL {their_ops}, ours {our_ops}; communicators: {their_comms} / {our_comms}"
    ));
}

/// `fetch_data` calls and bytes of a `--stats` run, summed over its processes.
pub(crate) fn cost(run: &Run) -> (u64, u64, Vec<(i64, u64, u64)>) {
    let per: Vec<(i64, u64, u64)> = run
        .stats()
        .iter()
        .map(|p| {
            (
                p["rank"].as_i64().unwrap_or(-1),
                p["fetches"].as_u64().unwrap_or(0),
                p["fetch_bytes"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    (
        per.iter().map(|p| p.1).sum(),
        per.iter().map(|p| p.2).sum(),
        per,
    )
}
