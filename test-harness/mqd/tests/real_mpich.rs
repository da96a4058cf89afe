//! End to end against a real MPICH: 4.0.2 built with `--enable-debuginfo` for ch3:nemesis
//! (layout A) by `scripts/real-mpich ch3`, into a cache outside the work tree (built on first
//! use: minutes; a failed build fails these tests with its output).
//!
//! The programs are `real-mpi/scenarios.c`, compiled with that MPICH's `mpicc -g -O0` and run
//! with its `mpiexec` (hydra). Each scenario is run twice:
//!
//! - through MPIR: `mqd launch --keep -- mpiexec -n N scenarios --scenario S` (breakpoint on
//!   hydra's `MPIR_Breakpoint`, `MPIR_proctable`), then `mqd job STARTER_PID` once the job
//!   was resumed; the job's output (on mqd's stderr) must show every rank's READY line before
//!   the dump;
//! - by pid: plain `mpiexec`, ranks' pids from their READY lines, `mqd dump PID...` twice.
//!
//! Every dump is checked against a model written here, rank by rank, from what the program
//! does (buffers from its READY lines): every field of every queue entry, communicator names,
//! sizes, local ranks and COMM_WORLD ranks. MPICH's internal communicators (`MPI_ICOMM_WORLD`
//! and the unnamed node-level sub-communicators) are checked to be plausibly internal.
//! Failures are collected and reported together, so one run names every wrong field.
//!
//! The by-pid dumps are also taken through MPICH's own `libtvmpich.so`: every entry it
//! reports must be in ours, each differing field explained (and ours right, by the model);
//! the differences and the `fetch_data` costs of both libraries are printed and written to
//! `target/real-mpich-diff.md`. A crash or hang of a library is caught (mqd runs under a
//! timeout) and reported.

use mqd_fixtures::real_mpich::{
    self, Job, Mpich, Ready, Run, forward_lines, parse_ready, proc_state, read_all, signal, tracer,
    wait_child,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ANY_SOURCE: i32 = -2;
const ANY_TAG: i32 = -1;
/// The rendezvous messages of `unexpected` and `sends`: 262144 ints.
const RNDV_BYTES: i64 = 262_144 * 4;
const RNDV_INTS: i64 = 262_144;
const BIG_COUNT: usize = 10_000;
/// Longest an mqd run may take before it counts as hung.
const MQD_TIMEOUT: Duration = Duration::from_secs(60);
/// `mqd launch --delay`: the ranks reach their READY point well within it.
const LAUNCH_DELAY: Duration = Duration::from_secs(3);

const SCENARIOS: [&str; 7] = [
    "big",
    "comms",
    "freed",
    "ring",
    "sends",
    "unexpected",
    "wildcards",
];

fn size_of(scenario: &str) -> i32 {
    match scenario {
        "wildcards" | "unexpected" | "sends" | "ring" => 4,
        "comms" => 5,
        "freed" | "big" => 2,
        other => panic!("unknown scenario {other}"),
    }
}

// ----------------------------------------------------------------------- MPICH and programs

fn ours() -> PathBuf {
    mqd_debugger::bundled_library().expect("libmqd_mpich.so is built with the tests")
}

/// The cached MPICH and the scenario programs (see [`real_mpich::mpich`]).
fn mpich() -> &'static Mpich {
    static SUBREAPER: std::sync::Once = std::sync::Once::new();
    SUBREAPER.call_once(|| {
        // `mqd launch --keep` leaves mpiexec running when mqd exits: it becomes our child,
        // so that it is reaped (and its pid not reused) only when we say so.
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    });
    real_mpich::mpich()
}

/// Every rank alive, not stopped, not traced: as a dump must leave it.
fn check_running(checks: &mut Checks, ctx: &str, pids: &[i32]) {
    for &pid in pids {
        // Detaching restarts an interrupted sleep: allow a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        let (state, traced) = loop {
            let s = proc_state(pid);
            let t = tracer(pid);
            if (matches!(s, Some('S' | 'R')) && t == Some(0)) || Instant::now() >= deadline {
                break (s, t);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        checks.that(matches!(state, Some('S' | 'R')), || {
            format!("{ctx}: pid {pid} is in state {state:?} after the dump")
        });
        checks.that(traced == Some(0), || {
            format!("{ctx}: pid {pid} is still traced ({traced:?}) after the dump")
        });
    }
}

// ------------------------------------------------------------------------------ running mqd

fn mqd_command(args: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs mqd to its end, or kills it after [`MQD_TIMEOUT`].
fn run_mqd(args: &[String]) -> Run {
    real_mpich::run(mqd_command(args), MQD_TIMEOUT)
}

/// What a run of mqd gave.
trait Outcome {
    fn failure(&self) -> Option<String>;
    fn json(&self) -> Result<Value, String>;
    fn stats(&self) -> Vec<Value>;
}

impl Outcome for Run {
    /// Why the run is not a dump: a hang, a crash, or mqd's own failure.
    fn failure(&self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt as _;
        match self.status {
            None => Some(format!("hung: killed after {}s", MQD_TIMEOUT.as_secs())),
            Some(s) if s.signal().is_some() => Some(format!(
                "crashed: killed by signal {} ({})",
                s.signal().unwrap_or(0),
                self.stderr.lines().last().unwrap_or("")
            )),
            Some(s) if !s.success() => Some(format!("failed ({s}): {}", self.stderr.trim())),
            Some(_) => None,
        }
    }

    /// The document; a rank the library could not dump is in it with its error (mqd exits
    /// with 5 then), a hang or a crash is an error.
    fn json(&self) -> Result<Value, String> {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(f) = self
            .failure()
            .filter(|_| self.status.is_none_or(|s| s.signal().is_some()))
        {
            return Err(format!("{}: {f}", self.what));
        }
        serde_json::from_slice(&self.stdout).map_err(|e| {
            format!(
                "{}: no JSON document ({e}); {}",
                self.what,
                self.failure().unwrap_or_default()
            )
        })
    }

    /// The per-process costs of `--stats`.
    fn stats(&self) -> Vec<Value> {
        self.stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v["mqd_stats"]["processes"].as_array().cloned())
            .unwrap_or_default()
    }
}

fn args(list: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<String> {
    list.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect()
}

/// `mqd dump --json --stats --dll DLL PID...`.
fn dump(dll: &Path, pids: &[i32]) -> Run {
    let mut a = args(&[&"dump", &"--json", &"--stats", &"--dll", &dll]);
    a.extend(pids.iter().map(i32::to_string));
    run_mqd(&a)
}

// ------------------------------------------------------------------------------- checking

/// Failures collected over a whole scenario, reported together.
#[derive(Default)]
struct Checks {
    failures: Vec<String>,
    more: usize,
}

impl Checks {
    fn fail(&mut self, message: String) {
        if self.failures.len() < 80 {
            self.failures.push(message);
        } else {
            self.more += 1;
        }
    }

    fn that(&mut self, ok: bool, message: impl FnOnce() -> String) -> bool {
        if !ok {
            self.fail(message());
        }
        ok
    }

    fn eq(&mut self, ctx: &str, got: &Value, want: &Value) -> bool {
        self.that(got == want, || format!("{ctx}: got {got}, want {want}"))
    }

    fn finish(self, scenario: &str) {
        if !self.failures.is_empty() {
            let mut text = String::new();
            for f in &self.failures {
                let _ = writeln!(text, "- {f}");
            }
            if self.more > 0 {
                let _ = writeln!(text, "- ... and {} more", self.more);
            }
            panic!(
                "real MPICH, scenario {scenario}: {} failure(s):\n{text}",
                self.failures.len() + self.more
            );
        }
    }
}

// ----------------------------------------------------------------------------------- model

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Receive,
    Unexpected,
    Send,
}

impl Kind {
    fn queue(self) -> &'static str {
        match self {
            Kind::Receive => "pending_receives",
            Kind::Unexpected => "unexpected_messages",
            Kind::Send => "pending_sends",
        }
    }
}

const QUEUES: [Kind; 3] = [Kind::Receive, Kind::Unexpected, Kind::Send];

/// One queue entry the program created.
#[derive(Debug, Clone)]
struct OpModel {
    kind: Kind,
    /// Source (ANY_SOURCE kept) or destination: a rank of the communicator (of the remote
    /// group for an intercommunicator).
    peer: i32,
    tag: i32,
    /// Elements (receives, sends) or bytes (unexpected messages).
    count: i64,
    buffer: u64,
    /// Sends: the request completed (eager) and was not waited. Unexpected: an eager
    /// message whose data all arrived (a rendezvous request-to-send or a message to itself
    /// has no data buffered).
    complete: bool,
    /// Unexpected: sent by a synchronous send (`MPI_Ssend`, `MPI_Issend`).
    synchronous: bool,
}

/// A user communicator on one rank, with its entries in queue order (receives in post
/// order, unexpected messages in arrival order, sends in call order).
#[derive(Debug, Clone)]
struct CommModel {
    name: String,
    /// COMM_WORLD ranks of the local group.
    local: Vec<i32>,
    remote: Option<Vec<i32>>,
    rank: i32,
    ops: Vec<OpModel>,
}

fn position(group: &[i32], world_rank: i32) -> i32 {
    group.iter().position(|&r| r == world_rank).expect("member") as i32
}

impl CommModel {
    fn intra(name: &str, local: Vec<i32>, world_rank: i32) -> CommModel {
        let rank = position(&local, world_rank);
        CommModel {
            name: name.into(),
            local,
            remote: None,
            rank,
            ops: Vec::new(),
        }
    }

    fn inter(name: &str, local: Vec<i32>, remote: Vec<i32>, world_rank: i32) -> CommModel {
        CommModel {
            remote: Some(remote),
            ..CommModel::intra(name, local, world_rank)
        }
    }

    fn op(
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
        });
        self
    }

    /// The last entry came from a synchronous send.
    fn synchronous(&mut self) -> &mut Self {
        if let Some(op) = self.ops.last_mut() {
            op.synchronous = true;
        }
        self
    }

    fn recv(&mut self, source: i32, tag: i32, buffer: u64, count: i64) -> &mut Self {
        self.op(Kind::Receive, source, tag, count, buffer, false)
    }

    fn unexpected(&mut self, source: i32, tag: i32, bytes: i64, arrived: bool) -> &mut Self {
        self.op(Kind::Unexpected, source, tag, bytes, 0, arrived)
    }

    fn send(&mut self, dest: i32, tag: i32, buffer: u64, count: i64, complete: bool) -> &mut Self {
        self.op(Kind::Send, dest, tag, count, buffer, complete)
    }

    /// The COMM_WORLD rank of a peer rank.
    fn world(&self, peer: i32) -> i64 {
        let group = self.remote.as_ref().unwrap_or(&self.local);
        usize::try_from(peer)
            .ok()
            .and_then(|p| group.get(p))
            .map_or(-1, |&w| i64::from(w))
    }

    /// The name as the dump shows it: at most 63 bytes.
    fn shown_name(&self) -> String {
        self.name.chars().take(63).collect()
    }
}

#[derive(Debug, Clone)]
struct RankModel {
    rank: i32,
    comms: Vec<CommModel>,
    /// Names that must not be listed (freed communicators).
    gone: Vec<&'static str>,
}

/// The 127-character name of `comms`: byte i = 'a' + i % 26.
fn name127() -> String {
    (0..127).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

/// What rank `r` of `n` holds in `scenario`, from its READY line.
fn model(scenario: &str, n: i32, ready: &Ready) -> RankModel {
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
                .send(0, 6, a("s4"), 1, false);
        }
        "ring" => {
            // The blocking MPI_Ssend to the right is not listed: ch3 records non-blocking
            // sends only. The left neighbour's arrived (eager, synchronous) as unexpected.
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
        rank: r,
        comms,
        gone,
    }
}

// ------------------------------------------------------------------- expected dump content

/// Every field but `extra_text`, as our library must show the entry (layout A).
fn expected_fields(c: &CommModel, op: &OpModel) -> Value {
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
        // CH3 says whether the sender waits (synchronous send) or has gone on (eager
        // standard send); a rendezvous or self message of a standard send says neither.
        Kind::Unexpected => json!({
            "sender": if op.synchronous {
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
            "desired_length": op.count,
            "system_buffer": true,
            "buffer": 0,
            "actual_local_rank": op.peer,
            "actual_global_rank": world(op.peer),
            "actual_tag": op.tag,
            "actual_length": op.count,
        }),
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

const COMPLETED: &str = "completed, not yet waited or freed";
const ARRIVED: &str = "all data arrived";
const REMOTE: &str = "peer rank is in the remote group";

/// Lines `extra_text` must hold and lines it must not (besides one "request 0x..." line).
fn expected_lines(c: &CommModel, op: &OpModel) -> (Vec<String>, Vec<String>) {
    let mut has = Vec::new();
    let mut not = Vec::new();
    match op.kind {
        Kind::Receive => {
            has.push("posted receive (MPI_Recv/MPI_Irecv)".to_owned());
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
            if op.complete {
                has.push(ARRIVED.into());
                has.push(format!("{} bytes buffered by MPICH", op.count));
            } else {
                not.push(ARRIVED.into());
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
enum Found<'a> {
    Attach,
    Mpir {
        starter: i32,
        host: &'a str,
        executable: &'a str,
    },
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

fn check_dump(
    checks: &mut Checks,
    ctx: &str,
    doc: &Value,
    models: &[RankModel],
    ready: &[Ready],
    found: &Found,
    n: i32,
) {
    checks.eq(&format!("{ctx}: schema"), &doc["schema"], &json!("mqd/1"));
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

fn check_rank(
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
    let message = got["message"].as_str().unwrap_or_default();
    checks.that(message.contains("has MPICH ch3 device queues"), || {
        format!("{ctx}: message {message:?}")
    });
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
                let want_fields = expected_fields(c, w);
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
                let (has, not) = expected_lines(c, w);
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
                if checks.that(req.len() == 1, || {
                    format!("{octx}: one request line in {lines:?}")
                }) && let Some(other) = requests.insert(req[0].to_owned(), octx.clone())
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
fn key_of(op: &Value) -> String {
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
fn comm_named<'a>(rank: &'a Value, name: &str) -> Option<&'a Value> {
    rank["communicators"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == json!(name))
}

// ------------------------------------------------------------------- comparison with MPICH's

/// One kind of difference between MPICH's DLL and ours.
struct DiffRow {
    theirs: String,
    ours: String,
    count: usize,
}

/// A scenario's section of `target/real-mpich-diff.md`.
struct Section {
    scenario: &'static str,
    n: i32,
    notes: Vec<String>,
    /// (what, why) -> example and count.
    rows: BTreeMap<(String, String), DiffRow>,
}

impl Section {
    fn new(scenario: &'static str, n: i32) -> Section {
        Section {
            scenario,
            n,
            notes: Vec::new(),
            rows: BTreeMap::new(),
        }
    }

    fn record(&mut self, what: &str, why: &str, theirs: &Value, ours: &Value) {
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

    fn render(&self) -> String {
        let mut s = format!("## {} ({} ranks)\n\n", self.scenario, self.n);
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
/// scenario order each time one is added.
fn publish(section: &Section) {
    static SECTIONS: Mutex<BTreeMap<&'static str, String>> = Mutex::new(BTreeMap::new());
    let text = section.render();
    eprintln!("\n{text}");
    let mut all = SECTIONS.lock().unwrap_or_else(|p| p.into_inner());
    all.insert(section.scenario, text);
    let mut doc = String::from(
        "# Real MPICH 4.0.2 (ch3:nemesis): MPICH's libtvmpich.so vs libmqd_mpich.so\n\n\
         Written by `cargo test -p mqd-harness --test real_mpich`: the same processes dumped\n\
         through both libraries by `mqd dump --json --stats`; each row is a field where they\n\
         differ (ours matching what the program did), with an example and why.\n\n",
    );
    for s in SCENARIOS {
        if let Some(t) = all.get(s) {
            doc.push_str(t);
        }
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("real-mpich-diff.md");
    if let Err(e) = std::fs::write(&path, doc) {
        eprintln!("cannot write {}: {e}", path.display());
    }
}

/// Why MPICH's DLL shows `theirs` where ours shows `ours` (ours being right by the model).
fn why(
    kind: Option<Kind>,
    field: &str,
    theirs: &Value,
    ours: &Value,
    inter: bool,
) -> Option<&'static str> {
    let t = theirs.as_i64();
    Some(match (kind, field) {
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
        (Some(_), "extra_text") => {
            "MPICH's DLL: nothing, or \"Non-blocking send\"; ours: the kind of entry, wildcards, completion, request address, remote group"
        }
        _ => return None,
    })
}

/// Entries in MPICH's DLL's dump must be in ours with equal or better-defined values.
fn compare_with_mpich(
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
                match why(None, field, t, o, inter) {
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
                for t_op in t_ops {
                    let octx = format!("{cctx}, {q} entry ({})", key_of(t_op));
                    let same = |o: &Value| {
                        ["desired_tag", "buffer"].iter().all(|k| o[*k] == t_op[*k])
                            && (o["desired_local_rank"] == t_op["desired_local_rank"]
                                || (o["desired_local_rank"] == json!(-1)
                                    && t_op["desired_local_rank"].as_i64().is_some_and(|r| r < 0)))
                    };
                    let Some(i) = (0..o_ops.len()).find(|&i| !used[i] && same(&o_ops[i])) else {
                        checks.fail(format!("{octx}: MPICH's DLL lists it, ours does not"));
                        continue;
                    };
                    used[i] = true;
                    order.push(i);
                    let o_op = &o_ops[i];
                    // What the program did: our entry i is model entry i of this queue.
                    let truth = want
                        .get(i)
                        .map(|w| expected_fields(cm.expect("model comm"), w));
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
                        match why(Some(kind), field, t, o, inter) {
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
fn cost(run: &Run) -> (u64, u64, Vec<(i64, u64, u64)>) {
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

// ------------------------------------------------------------------------------ scenarios

/// MPIR: `mqd launch --keep` (first dump), `mqd job` after the job ran on (second dump).
fn launch_path(m: &Mpich, scenario: &'static str, n: i32, checks: &mut Checks) {
    let ours = ours();
    let program = m.program.display().to_string();
    let a = args(&[
        &"launch",
        &"--json",
        &"--keep",
        &"--delay",
        &LAUNCH_DELAY.as_secs_f64().to_string(),
        &"--dll",
        &ours,
        &"--",
        &m.mpiexec(),
        &"-n",
        &n.to_string(),
        &program,
        &"--scenario",
        &scenario,
    ]);
    let what = format!("mqd {}", a.join(" "));
    let started = Instant::now();
    let mut mqd = mqd_command(&a).spawn().expect("start mqd launch");
    let stdout = read_all(mqd.stdout.take().expect("piped"));
    let (tx, lines) = mpsc::channel();
    // The job's output goes to mqd's stderr; it stays open after mqd exits (--keep).
    forward_lines(mqd.stderr.take().expect("piped"), tx);
    let status = wait_child(&mut mqd, MQD_TIMEOUT);
    let doc: Value =
        serde_json::from_slice(&stdout.join().unwrap_or_default()).unwrap_or(Value::Null);
    let starter = doc["starter_pid"].as_i64().unwrap_or(0) as i32;
    let mut job = Job::adopt(format!("{what} (mpiexec pid {starter})"), n, starter, lines);
    checks.that(status.is_some_and(|s| s.success()), || {
        format!("{what}: exit status {status:?}")
    });
    if starter <= 0 {
        // Whatever it printed says why; READY lines (if any) let the job be killed.
        let deadline = Instant::now() + Duration::from_secs(2);
        while let Ok((at, line)) = job
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if let Some(r) = parse_ready(at, &line) {
                job.ready.push(r);
            }
            job.log.push(line);
        }
        panic!("{}: {status:?}, no dump: {:#?}", job.what, job.log);
    }
    let first_state = if scenario == "freed" { 1 } else { 0 };
    let ready = job.wait_ready(first_state);
    let ctx = format!("{scenario} through MPIR (mqd launch)");
    // The dump started LAUNCH_DELAY after mqd did, at the earliest: the ranks were there.
    let margin = if scenario == "ring" {
        Duration::from_millis(500)
    } else {
        Duration::ZERO
    };
    for r in &ready {
        let at = r.at.duration_since(started);
        checks.that(at + margin <= LAUNCH_DELAY, || {
            format!("{ctx}: rank {} printed READY {at:?} after the start, too late for a dump after {LAUNCH_DELAY:?}: raise LAUNCH_DELAY", r.rank)
        });
    }
    let pids: Vec<i32> = ready.iter().map(|r| r.pid).collect();
    let host = hostname();
    let found = Found::Mpir {
        starter,
        host: &host,
        executable: &program,
    };
    let models: Vec<RankModel> = ready.iter().map(|r| model(scenario, n, r)).collect();
    check_dump(checks, &ctx, &doc, &models, &ready, &found, n);
    check_running(checks, &ctx, &pids);

    // The job ran on; `mqd job` finds it again through the proctable.
    let job_args = args(&[&"job", &"--json", &"--dll", &ours, &starter.to_string()]);
    let again = run_mqd(&job_args).json().unwrap_or_else(|e| panic!("{e}"));
    let ctx2 = format!("{scenario} through MPIR (mqd job, after the job ran on)");
    check_dump(checks, &ctx2, &again, &models, &ready, &found, n);
    checks.that(again == doc, || {
        format!("{ctx2}: differs from the first dump")
    });
    check_running(checks, &ctx2, &pids);
    if scenario == "ring" {
        // What the user sees: `mqd job` in text.
        let text = run_mqd(&args(&[&"job", &"--dll", &ours, &starter.to_string()]));
        eprintln!(
            "mqd job {starter} (ours) on the ring:\n{}",
            String::from_utf8_lossy(&text.stdout)
        );
    }
    if scenario == "freed" {
        for r in &ready {
            signal(r.pid, libc::SIGUSR1);
        }
        let ready2 = job.wait_ready(2);
        let models2: Vec<RankModel> = ready2.iter().map(|r| model(scenario, n, r)).collect();
        let third = run_mqd(&job_args).json().unwrap_or_else(|e| panic!("{e}"));
        let ctx3 = format!("{scenario} state 2 through MPIR (mqd job)");
        check_dump(checks, &ctx3, &third, &models2, &ready2, &found, n);
        check_running(checks, &ctx3, &pids);
    }
    if scenario == "ring" {
        job.terminate();
    } else {
        if let Err(e) = job.finish() {
            checks.fail(e);
        }
    }
}

/// Every rank shows its left neighbour's message (it arrives just after READY).
fn ring_settled(doc: &Value, n: i32) -> bool {
    doc["ranks"].as_array().is_some_and(|ranks| {
        ranks.len() == n as usize
            && ranks.iter().all(|r| {
                comm_named(r, "ring").is_some_and(|c| {
                    c["unexpected_messages"]["operations"]
                        .as_array()
                        .is_some_and(|o| !o.is_empty())
                })
            })
    })
}

/// By pid: plain mpiexec, `mqd dump` twice with ours, once with MPICH's; for `freed` again
/// after SIGUSR1.
fn plain_path(
    m: &Mpich,
    scenario: &'static str,
    n: i32,
    checks: &mut Checks,
    section: &mut Section,
) {
    let ours = ours();
    let theirs = m.tvmpich();
    let mut job = Job::spawn(m, scenario, n);
    let states: &[u32] = if scenario == "freed" { &[1, 2] } else { &[0] };
    let mut kept_ids: Vec<Vec<Value>> = Vec::new();
    for (k, &state) in states.iter().enumerate() {
        if k > 0 {
            for pid in job.pids() {
                signal(pid, libc::SIGUSR1);
            }
        }
        let ready = job.wait_ready(state);
        let pids = job.pids();
        let models: Vec<RankModel> = ready.iter().map(|r| model(scenario, n, r)).collect();
        let label = if state == 0 {
            scenario.to_owned()
        } else {
            format!("{scenario} state {state}")
        };
        if scenario == "ring" {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !dump(&ours, &pids).json().is_ok_and(|d| ring_settled(&d, n))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let first = dump(&ours, &pids);
        let doc = first.json().unwrap_or_else(|e| panic!("{e}"));
        let ctx = format!("{label} by pid (mqd dump)");
        check_dump(checks, &ctx, &doc, &models, &ready, &Found::Attach, n);
        check_running(checks, &ctx, &pids);
        let second = dump(&ours, &pids);
        let doc2 = second.json().unwrap_or_else(|e| panic!("{e}"));
        checks.that(doc2 == doc, || {
            format!("{ctx}: the second dump differs from the first")
        });
        check_running(checks, &format!("{ctx}, second dump"), &pids);
        kept_ids.push(
            doc["ranks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| comm_named(r, "kept").map_or(Value::Null, |c| c["unique_id"].clone()))
                .collect(),
        );

        // The same processes through MPICH's own library.
        let mpich_run = dump(&theirs, &pids);
        let (of, ob, oper) = cost(&first);
        section.notes.push(format!(
            "{label}: our dump took {:.2?}, MPICH's DLL's {:.2?}",
            first.elapsed, mpich_run.elapsed
        ));
        match mpich_run.json() {
            Err(e) => {
                section
                    .notes
                    .push(format!("{label}: **MPICH's DLL failed**: {e}"));
                // Whatever it did to them, the ranks must be running on.
                for pid in &pids {
                    signal(*pid, libc::SIGCONT);
                }
            }
            Ok(their_doc) => {
                let (tf, tb, tper) = cost(&mpich_run);
                section.notes.push(format!(
                    "{label}: fetch_data calls (bytes) for one display of all {n} ranks: MPICH's DLL {tf} ({tb}), ours {of} ({ob})"
                ));
                if scenario == "big" {
                    for ((r, tf, tb), (_, f, b)) in tper.iter().zip(&oper) {
                        section.notes.push(format!(
                            "big, rank {r} ({BIG_COUNT} posted receives): MPICH's DLL {tf} fetch_data calls, {tb} bytes; ours {f} calls, {b} bytes"
                        ));
                    }
                    // One read per target object: about one per queue element.
                    for (r, f, _) in &oper {
                        checks.that(*f <= BIG_COUNT as u64 + 500, || {
                            format!("big, rank {r}: {f} fetch_data calls for {BIG_COUNT} receives")
                        });
                    }
                    checks.that(of < tf, || {
                        format!("big: ours {of} fetch_data calls, MPICH's DLL {tf}")
                    });
                }
                compare_with_mpich(checks, section, &label, &doc, &their_doc, &models);
            }
        }
        check_running(checks, &format!("{ctx}, after MPICH's DLL"), &pids);
        if scenario == "ring" {
            eprintln!(
                "mqd dump (ours) of the ring:\n{}",
                String::from_utf8_lossy(
                    &run_mqd(&{
                        let mut a = args(&[&"dump", &"--dll", &ours]);
                        a.extend(pids.iter().map(i32::to_string));
                        a
                    })
                    .stdout
                )
            );
        }
    }
    if scenario == "freed" {
        checks.that(
            kept_ids[0] == kept_ids[1] && kept_ids[0].iter().all(|v| !v.is_null()),
            || format!("freed: unique_id of \"kept\" moved: {:?}", kept_ids),
        );
    }
    if scenario == "ring" {
        job.terminate();
    } else {
        if let Err(e) = job.finish() {
            checks.fail(e);
        }
    }
}

fn run(scenario: &'static str) {
    let m = mpich();
    let n = size_of(scenario);
    let mut checks = Checks::default();
    let mut section = Section::new(scenario, n);
    launch_path(m, scenario, n, &mut checks);
    plain_path(m, scenario, n, &mut checks, &mut section);
    publish(&section);
    checks.finish(scenario);
}

// `big` first: libtest starts tests in name order, and it is the longest.
#[test]
fn big() {
    run("big");
}

#[test]
fn comms() {
    run("comms");
}

#[test]
fn freed() {
    run("freed");
}

#[test]
fn ring() {
    run("ring");
}

#[test]
fn sends() {
    run("sends");
}

#[test]
fn unexpected() {
    run("unexpected");
}

#[test]
fn wildcards() {
    run("wildcards");
}

/// Acceptance: `mqd launch -- mpiexec -n 4 ./ring` shows the ring on every rank: the
/// unexpected message from the left neighbour (ch3 does not record the blocking MPI_Ssend
/// itself). Run as a user would, in text, with the library the job names (MPIR_dll_name:
/// MPICH's libtvmpich.so) and with ours.
#[test]
fn ring_as_a_user_sees_it() {
    let m = mpich();
    for dll in [None, Some(ours())] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
        cmd.arg("launch")
            .arg("--per-rank")
            .args(["--delay", &LAUNCH_DELAY.as_secs_f64().to_string()]);
        if let Some(dll) = &dll {
            cmd.arg("--dll").arg(dll);
        }
        cmd.arg("--")
            .arg(m.mpiexec())
            .args(["-n", "4", "./ring"])
            .current_dir(&m.dir);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start mqd launch");
        let out = read_all(child.stdout.take().expect("piped"));
        let err = read_all(child.stderr.take().expect("piped"));
        let status = wait_child(&mut child, MQD_TIMEOUT);
        let text = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
        let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
        let which = dll.as_ref().map_or(
            "the job's MPIR_dll_name (MPICH's libtvmpich.so)".to_owned(),
            |d| d.display().to_string(),
        );
        eprintln!("mqd launch -- mpiexec -n 4 ./ring, library {which}:\n{text}");
        assert!(
            status.is_some_and(|s| s.success()),
            "mqd launch ({which}): {status:?}\n{stderr}"
        );
        let blocks: Vec<&str> = text.split("\nrank ").collect();
        assert_eq!(blocks.len(), 4, "{which}: four ranks in\n{text}");
        for (r, block) in blocks.iter().enumerate() {
            let left = (r + 3) % 4;
            let block = block.strip_prefix("rank ").unwrap_or(block);
            assert!(
                block.starts_with(&format!("{r} (pid ")),
                "{which}: rank {r} block:\n{block}"
            );
            let ring = block
                .split("\n  \"")
                .find(|c| c.starts_with("ring\""))
                .unwrap_or_else(|| panic!("{which}: rank {r} has no \"ring\":\n{block}"));
            assert!(
                ring.starts_with(&format!("ring\": rank {r} of 4")),
                "{which}: rank {r}: {ring}"
            );
            let entries: Vec<&str> = ring
                .lines()
                .skip(1)
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            assert_eq!(
                entries.len(),
                1,
                "{which}: rank {r}: one entry on \"ring\" (no send: ch3 does not record a blocking MPI_Ssend): {entries:?}"
            );
            assert!(
                entries[0].starts_with(&format!("unexpected from {left} tag 5 count ")),
                "{which}: rank {r}: {entries:?}"
            );
            if dll.is_some() {
                assert_eq!(
                    entries[0],
                    format!("unexpected from {left} tag 5 count 4000 buf 0x0"),
                    "{which}: rank {r}"
                );
            }
        }
    }
}
