//! End to end: `mqd dump --json` attached to live fixture ranks, for every layout (the
//! `mqd-fixture-{ch3,ch4,debugq4,debugq5}` binaries, which lay out MPICH's real structures) and
//! every scenario of `mqd/demo-job/scenario.c`, against a model of what scenario.c builds.
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

mod expect;
mod model;

#[allow(unused_imports)]
use expect::*;
#[allow(unused_imports)]
use model::*;

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
            mqd::verdict_of_exit_code(output.status.code()).is_some(),
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
    let lines = extra
        .as_array()
        .unwrap_or_else(|| panic!("{ctx}: extra_text is {extra}"));
    // Decoded from the notes: the request they name, and the remote-group mark.
    let decoded = fields.as_object_mut().expect("an object");
    assert_eq!(
        decoded.remove("request"),
        Some(Value::from(request_address(lines, ctx))),
        "{ctx}: request"
    );
    let remote = lines
        .iter()
        .any(|l| l == "peer rank is in the remote group");
    assert_eq!(
        decoded.remove("remote_group"),
        Some(Value::Bool(remote)),
        "{ctx}: remote_group"
    );
    assert_eq!(
        fields, want.fields,
        "{ctx}: fields (left: mqd, right: model)"
    );
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
    assert_eq!(doc["schema"], json!("mqd/3"), "{ctx}: schema");
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

// `big` first: libtest starts tests in name order, and these are the long ones.
mqd_fixtures::every_layout!(big, comms, compute, ring, sends, unexpected, wildcards);

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
