//! The dump each scenario must give, field by field, and the checks of a whole dump.

use crate::*;

// ------------------------------------------------------------------- expected dump content

/// A value the model cannot predict but knows is not zero (an address MPICH chose).
pub(crate) const NONZERO: &str = "<nonzero>";

/// Every field but `extra_text`, as our library must show the entry on `device`.
pub(crate) fn expected_fields(device: Device, c: &CommModel, op: &OpModel) -> Value {
    let mut fields = expected_queue_fields(device, c, op);
    if let Some(o) = fields.as_object_mut() {
        // Decoded from the notes: the request (an address MPICH chose) and whether the
        // peer is in an intercommunicator's remote group.
        o.insert("request".into(), json!(NONZERO));
        o.insert("remote_group".into(), json!(c.remote.is_some()));
    }
    fields
}

fn expected_queue_fields(device: Device, c: &CommModel, op: &OpModel) -> Value {
    let world = |peer: i32| c.world(peer);
    match op.kind {
        Kind::Receive => {
            let any = op.peer == ANY_SOURCE;
            json!({
                "status": "pending",
                "desired_local_rank": if any { -1 } else { i64::from(op.peer) },
                "desired_global_rank": if any { -1 } else { world(op.peer) },
                "tag_wild": op.tag == ANY_TAG,
                "desired_tag": op.tag,
                "desired_length": op.count,
                "system_buffer": false,
                "buffer": op.buffer,
                "actual_local_rank": -1,
                "actual_global_rank": -1,
                "actual_tag": -1,
                "actual_length": 0,
                "sender": null,
            })
        }
        Kind::Unexpected => {
            // ch4 keeps a message to itself as the sender's request (its count and buffer),
            // and an eager message in a buffer of MPICH's; ch3 shows no buffer.
            let (length, buffer) = match (device, op.from_self) {
                (Device::Ch4, Some((count, buffer))) => (count, json!(buffer)),
                (Device::Ch4, None) if op.complete && op.count > 0 => (op.count, json!(NONZERO)),
                _ => (op.count, json!(0)),
            };
            json!({
                // The sender waits (synchronous send, or a rendezvous whose data is still
                // at the sender) or has gone on (eager standard send); a message to
                // itself says neither.
                "sender": if op.synchronous || (!op.complete && op.from_self.is_none()) {
                    json!("waits")
                } else if op.complete {
                    json!("gone_on")
                } else {
                    Value::Null
                },
                "status": "pending",
                "desired_local_rank": op.peer,
                "desired_global_rank": world(op.peer),
                "tag_wild": false,
                "desired_tag": op.tag,
                "desired_length": length,
                "system_buffer": true,
                "buffer": buffer,
                "actual_local_rank": op.peer,
                "actual_global_rank": world(op.peer),
                "actual_tag": op.tag,
                "actual_length": length,
            })
        }
        Kind::Send => json!({
            "sender": null,
            "status": if op.complete { "complete" } else { "pending" },
            "desired_local_rank": op.peer,
            "desired_global_rank": world(op.peer),
            "tag_wild": false,
            "desired_tag": op.tag,
            "desired_length": op.count,
            "system_buffer": false,
            "buffer": op.buffer,
            "actual_local_rank": op.peer,
            "actual_global_rank": world(op.peer),
            "actual_tag": op.tag,
            "actual_length": op.count,
        }),
    }
}

/// `want` with each [`NONZERO`] replaced by what `got` has there, when that is a
/// non-zero number (so that a zero or a missing value still differs).
pub(crate) fn resolve_nonzero(want: &mut Value, got: &Value) {
    if let Some(fields) = want.as_object_mut() {
        for (k, v) in fields.iter_mut() {
            if v == NONZERO && got[k.as_str()].as_u64().is_some_and(|n| n != 0) {
                *v = got[k.as_str()].clone();
            }
        }
    }
}

pub(crate) const COMPLETED: &str = "completed, not yet waited or freed";
pub(crate) const ARRIVED: &str = "all data arrived";
pub(crate) const REMOTE: &str = "peer rank is in the remote group";

/// Lines `extra_text` must hold and lines it must not (besides one "request 0x..." line).
pub(crate) fn expected_lines(
    device: Device,
    c: &CommModel,
    op: &OpModel,
) -> (Vec<String>, Vec<String>) {
    let mut has = Vec::new();
    let mut not = Vec::new();
    let ch4_self = device == Device::Ch4 && c.single_process();
    match op.kind {
        Kind::Receive => {
            has.push("posted receive (MPI_Recv/MPI_Irecv)".to_owned());
            if ch4_self {
                has.push("on a single-process communicator".into());
            }
            match (op.peer == ANY_SOURCE, op.tag == ANY_TAG) {
                (true, true) => has.push("from MPI_ANY_SOURCE, tag MPI_ANY_TAG".into()),
                (true, false) => has.push("from MPI_ANY_SOURCE".into()),
                (false, true) => has.push("tag MPI_ANY_TAG".into()),
                (false, false) => {}
            }
            not.push(COMPLETED.into());
        }
        Kind::Unexpected => {
            has.push("unexpected message: no receive posted yet".into());
            match (device, op.from_self) {
                (Device::Ch4, Some((count, _))) => {
                    has.push(format!("sent to itself: count {count} in its send buffer"));
                }
                // ch4's eager message: its request holds the length, not yet complete.
                (Device::Ch4, None) if op.complete => {
                    has.push("length in bytes".into());
                    not.push(ARRIVED.into());
                }
                (Device::Ch4, None) => {
                    has.push(format!(
                        "rendezvous: {} bytes still at the sender",
                        op.count
                    ));
                    not.push(ARRIVED.into());
                }
                (Device::Ch3, _) if op.complete => {
                    has.push(ARRIVED.into());
                    has.push(format!("{} bytes buffered by MPICH", op.count));
                }
                (Device::Ch3, _) => not.push(ARRIVED.into()),
            }
        }
        Kind::Send => {
            has.push("non-blocking send (MPI_Isend family)".into());
            if op.complete {
                has.push(COMPLETED.into())
            } else {
                not.push(COMPLETED.into())
            }
        }
    }
    if c.remote.is_some() {
        has.push(REMOTE.into())
    } else {
        not.push(REMOTE.into())
    }
    (has, not)
}

/// How the dump found the processes.
pub(crate) enum Found<'a> {
    Attach,
    Mpir {
        starter: i32,
        host: &'a str,
        executable: &'a str,
    },
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

pub(crate) fn check_dump(
    checks: &mut Checks,
    ctx: &str,
    doc: &Value,
    models: &[RankModel],
    ready: &[Ready],
    found: &Found,
    n: i32,
) {
    checks.eq(&format!("{ctx}: schema"), &doc["schema"], &json!("mqd/3"));
    checks.eq(
        &format!("{ctx}: dll"),
        &doc["dll"]["path"],
        &json!(ours().display().to_string()),
    );
    checks.eq(
        &format!("{ctx}: abort_message"),
        &doc["abort_message"],
        &Value::Null,
    );
    let (acquired, starter) = match found {
        Found::Attach => ("attach", Value::Null),
        Found::Mpir { starter, .. } => ("mpir", json!(starter)),
    };
    checks.eq(
        &format!("{ctx}: acquired_by"),
        &doc["acquired_by"],
        &json!(acquired),
    );
    checks.eq(
        &format!("{ctx}: starter_pid"),
        &doc["starter_pid"],
        &starter,
    );
    let Some(ranks) = doc["ranks"].as_array() else {
        checks.fail(format!("{ctx}: no ranks in {doc}"));
        return;
    };
    if !checks.that(ranks.len() == models.len(), || {
        format!("{ctx}: {} ranks, want {}", ranks.len(), models.len())
    }) {
        return;
    }
    for ((got, m), r) in ranks.iter().zip(models).zip(ready) {
        check_rank(
            checks,
            &format!("{ctx}, rank {}", m.rank),
            got,
            m,
            r.pid,
            found,
            n,
        );
    }
}

pub(crate) fn check_rank(
    checks: &mut Checks,
    ctx: &str,
    got: &Value,
    m: &RankModel,
    pid: i32,
    found: &Found,
    n: i32,
) {
    checks.eq(&format!("{ctx}: rank"), &got["rank"], &json!(m.rank));
    checks.eq(&format!("{ctx}: pid"), &got["pid"], &json!(pid));
    if !checks.eq(&format!("{ctx}: error"), &got["error"], &Value::Null) {
        return;
    }
    // Full debug information: the layout, and nothing it lacks.
    let message = got["message"].as_str().unwrap_or_default();
    let layout = match m.device {
        Device::Ch3 => "has MPICH ch3 device queues",
        Device::Ch4 => "has MPICH ch4 active-message queues",
    };
    // The only part after the layout says what the send queue lists.
    let parts: Vec<&str> = message.split("; ").collect();
    checks.that(
        message.contains(layout) && parts[1..] == ["sends listed: non-blocking only"],
        || format!("{ctx}: message {message:?}"),
    );
    match found {
        Found::Attach => {
            checks.eq(&format!("{ctx}: host"), &got["host"], &Value::Null);
            let exe = got["executable"].as_str().unwrap_or_default();
            checks.that(exe.ends_with("/scenarios"), || {
                format!("{ctx}: executable {exe:?}")
            });
        }
        Found::Mpir {
            host, executable, ..
        } => {
            checks.eq(&format!("{ctx}: host"), &got["host"], &json!(host));
            checks.eq(
                &format!("{ctx}: executable"),
                &got["executable"],
                &json!(executable),
            );
        }
    }
    let Some(comms) = got["communicators"].as_array() else {
        checks.fail(format!("{ctx}: no communicators"));
        return;
    };
    let mut requests: HashMap<String, String> = HashMap::new();
    let mut matched = HashSet::new();
    for c in &m.comms {
        let name = c.shown_name();
        let cctx = format!(
            "{ctx}, communicator {:?}",
            c.name.chars().take(20).collect::<String>()
        );
        let hits: Vec<usize> = (0..comms.len())
            .filter(|&i| comms[i]["name"] == json!(name))
            .collect();
        if !checks.that(hits.len() == 1, || {
            format!("{cctx}: listed {} times", hits.len())
        }) {
            continue;
        }
        matched.insert(hits[0]);
        let g = &comms[hits[0]];
        checks.eq(&format!("{cctx}: size"), &g["size"], &json!(c.local.len()));
        checks.eq(
            &format!("{cctx}: local_rank"),
            &g["local_rank"],
            &json!(c.rank),
        );
        checks.eq(
            &format!("{cctx}: group (COMM_WORLD ranks of the local group)"),
            &g["group"],
            &json!(c.local),
        );
        checks.eq(
            &format!("{cctx}: group_error"),
            &g["group_error"],
            &Value::Null,
        );
        for kind in QUEUES {
            let q = &g[kind.queue()];
            let qctx = format!("{cctx}, {}", kind.queue());
            checks.eq(&format!("{qctx}: available"), &q["available"], &json!(true));
            checks.eq(&format!("{qctx}: error"), &q["error"], &Value::Null);
            let ops = q["operations"].as_array().cloned().unwrap_or_default();
            let want: Vec<&OpModel> = c.ops.iter().filter(|o| o.kind == kind).collect();
            if !checks.that(ops.len() == want.len(), || {
                let shown: Vec<String> = ops.iter().take(8).map(key_of).collect();
                format!(
                    "{qctx}: {} entries, want {}; got {shown:?}",
                    ops.len(),
                    want.len()
                )
            }) {
                continue;
            }
            for (i, (op, w)) in ops.iter().zip(want).enumerate() {
                let octx = format!("{qctx}[{i}]");
                let mut fields = op.clone();
                let extra = fields
                    .as_object_mut()
                    .and_then(|o| o.remove("extra_text"))
                    .unwrap_or(Value::Null);
                let mut want_fields = expected_fields(m.device, c, w);
                resolve_nonzero(&mut want_fields, &fields);
                if fields != want_fields {
                    let diff: Vec<String> = want_fields
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(k, v)| fields.get(k.as_str()) != Some(v))
                        .map(|(k, v)| {
                            format!(
                                "{k}: got {}, want {v}",
                                fields.get(k.as_str()).unwrap_or(&Value::Null)
                            )
                        })
                        .chain(
                            fields
                                .as_object()
                                .into_iter()
                                .flatten()
                                .filter(|(k, _)| want_fields.get(k.as_str()).is_none())
                                .map(|(k, v)| format!("{k}: got {v}, not in the model")),
                        )
                        .collect();
                    checks.fail(format!("{octx} ({}): {}", key_of(op), diff.join("; ")));
                }
                let lines: Vec<&str> = extra
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let (has, not) = expected_lines(m.device, c, w);
                // A line may go on after "; " (e.g. "all data arrived; its sender has gone on").
                let present = |want: &str| {
                    lines.iter().any(|l| {
                        *l == want
                            || l.strip_prefix(want)
                                .is_some_and(|rest| rest.starts_with("; "))
                    })
                };
                for l in &has {
                    checks.that(present(l), || {
                        format!("{octx}: extra_text {lines:?} lacks {l:?}")
                    });
                }
                for l in &not {
                    checks.that(!present(l), || {
                        format!("{octx}: extra_text {lines:?} has {l:?}")
                    });
                }
                if w.kind == Kind::Unexpected && !w.complete {
                    // A rendezvous request-to-send or a message to itself: MPICH holds no data.
                    checks.that(!lines.iter().any(|l| l.ends_with(" bytes buffered by MPICH")), || {
                        format!("{octx}: extra_text {lines:?} says the data is buffered; MPICH holds none of it")
                    });
                }
                let req: Vec<&str> = lines
                    .iter()
                    .copied()
                    .filter(|l| l.starts_with("request 0x"))
                    .collect();
                // ch4's send to itself on a single-process communicator is also that
                // communicator's unexpected message: one request, listed twice.
                let shared = m.device == Device::Ch4 && c.single_process() && w.kind == Kind::Send;
                if let [line] = req.as_slice() {
                    let named = u64::from_str_radix(&line["request 0x".len()..], 16).ok();
                    checks.that(
                        named.map(Value::from) == Some(op["request"].clone()),
                        || {
                            format!(
                                "{octx}: request {} is not the one {line:?} names",
                                op["request"]
                            )
                        },
                    );
                }
                if checks.that(req.len() == 1, || {
                    format!("{octx}: one request line in {lines:?}")
                }) && !shared
                    && let Some(other) = requests.insert(req[0].to_owned(), octx.clone())
                {
                    checks.fail(format!("{octx}: {} also listed at {other}", req[0]));
                }
            }
        }
    }
    for name in &m.gone {
        checks.that(!comms.iter().any(|c| c["name"] == json!(name)), || {
            format!("{ctx}: {name:?} is listed")
        });
    }
    // The rest are MPICH's own: MPI_ICOMM_WORLD and the node-level sub-communicators.
    for (i, c) in comms
        .iter()
        .enumerate()
        .filter(|(i, _)| !matched.contains(i))
    {
        let ictx = format!("{ctx}, internal communicator #{i} {:?}", c["name"]);
        let name = c["name"].as_str().unwrap_or("?");
        checks.that(name.is_empty() || name == "MPI_ICOMM_WORLD", || {
            format!("{ictx}: not a name MPICH gives its own")
        });
        let size = c["size"].as_i64().unwrap_or(0);
        let local = c["local_rank"].as_i64().unwrap_or(-1);
        checks.that(
            (1..=i64::from(n)).contains(&size) && (0..size).contains(&local),
            || format!("{ictx}: rank {local} of {size}"),
        );
        if let Some(group) = c["group"].as_array() {
            let ranks: Vec<i64> = group.iter().filter_map(Value::as_i64).collect();
            let distinct: HashSet<i64> = ranks.iter().copied().collect();
            checks.that(
                ranks.len() as i64 == size
                    && distinct.len() == ranks.len()
                    && ranks.iter().all(|&w| (0..i64::from(n)).contains(&w))
                    && ranks.get(local as usize) == Some(&i64::from(m.rank)),
                || {
                    format!(
                        "{ictx}: group {ranks:?} (rank {local} of {size} on world rank {})",
                        m.rank
                    )
                },
            );
        }
        for kind in QUEUES {
            let q = &c[kind.queue()];
            checks.that(
                q["available"] == json!(true)
                    && q["error"].is_null()
                    && q["operations"].as_array().is_some_and(Vec::is_empty),
                || format!("{ictx}: {} is {q}", kind.queue()),
            );
        }
    }
}

/// The fields that tell entries apart, for messages.
pub(crate) fn key_of(op: &Value) -> String {
    format!(
        "{} from/to {} tag {} count {} buf {:#x}",
        op["status"].as_str().unwrap_or("?"),
        op["desired_local_rank"],
        op["desired_tag"],
        op["desired_length"],
        op["buffer"].as_u64().unwrap_or(0)
    )
}

/// The user communicator of a rank's dump, by name.
pub(crate) fn comm_named<'a>(rank: &'a Value, name: &str) -> Option<&'a Value> {
    rank["communicators"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == json!(name))
}
