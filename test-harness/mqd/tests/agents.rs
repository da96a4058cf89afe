//! Jobs on several hosts, simulated on this machine: fixture jobs whose process table lists
//! ranks on hosts sim0, sim1, ... (`--simulated-hosts`), reached through a local "remote
//! shell" that runs the agent's command here as ssh would run it there. The real-host
//! version (namespaces, sshd, hydra) is `multi_host.rs`; these cover the merge, relays,
//! and every fault of a host or an agent, quickly and on any machine.
//!
//! Every job is a Drop guard; every script lives in a scratch directory removed on drop.

mod support;

use mqd_fixtures::{JobOptions, default_signal_actions, spawn_job};
use mqd_synthetic::Layout;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::Scratch;

/// Longest any mqd run here may take: a net against a hang, not a measure (a launch of
/// 300 ranks took 104 s on a 2-core host loaded by `stress` and the rest of the suite).
const LIMIT: Duration = Duration::from_secs(300);

fn mqd_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(args).stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    cmd
}

/// Runs mqd to its end, within [`LIMIT`]; past it, mqd and what it started (its own
/// process group) are killed.
fn mqd(args: &[&str]) -> Output {
    let mut child = mqd_command(args)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mqd");
    let stdout = mqd_fixtures::real_mpich::read_all(child.stdout.take().expect("piped"));
    let stderr = mqd_fixtures::real_mpich::read_all(child.stderr.take().expect("piped"));
    let status = mqd_fixtures::real_mpich::wait_child(&mut child, LIMIT)
        .unwrap_or_else(|| panic!("mqd {args:?} did not finish within {LIMIT:?}"));
    Output {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}

/// `mqd job STARTER --rsh RSH MORE...` on a fixture job.
fn job_across(job: &mqd_fixtures::Job, rsh: &Path, more: &[&str]) -> Output {
    let starter = job.starter_pid().to_string();
    let mut args = vec![
        "job",
        &starter,
        "--rsh",
        rsh.to_str().expect("a UTF-8 path"),
    ];
    args.extend(more);
    mqd(&args)
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// An executable script in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write the script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// The local "remote shell": `rsh HOST COMMAND` runs COMMAND here with the shell, as
/// ssh runs it on HOST.
fn local_rsh(dir: &Path) -> PathBuf {
    script(dir, "rsh", "shift\nexec sh -c \"$*\"")
}

fn fixture_job(ranks: usize, hosts: usize, scenario: &str) -> mqd_fixtures::Job {
    let mut options = JobOptions::new(ranks, Layout::Debugq5, scenario);
    options.simulated_hosts = Some(hosts);
    spawn_job(&options).expect("start the fixture job")
}

fn proc_status(pid: i32, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_owned())
}

/// Every rank runs on, untraced: as it was before mqd.
fn assert_left_as_they_were(pids: &[i32]) {
    for &pid in pids {
        let state = proc_status(pid, "State:").unwrap_or_default();
        assert!(
            state.starts_with('S') || state.starts_with('R'),
            "pid {pid} is {state:?}"
        );
        assert_eq!(
            proc_status(pid, "TracerPid:").as_deref(),
            Some("0"),
            "pid {pid}"
        );
    }
}

/// Processes whose command line or environment mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let tagged = String::from_utf8_lossy(&environ).contains(needle);
            (tagged || line.contains(needle)).then_some((pid, line))
        })
        .collect()
}

/// The ranks of a document without their host, and without the library's message, which
/// names the process as the debugger did ("rank 3 (pid ...)" in a job, "pid ..." by pid).
fn ranks_without_hosts(doc: &Value) -> Vec<Value> {
    doc["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| {
            let mut r = r.clone();
            let fields = r.as_object_mut().expect("a rank");
            fields.remove("host");
            fields.remove("message");
            r
        })
        .collect()
}

#[test]
fn a_job_on_many_hosts_is_the_same_model_with_hosts_through_relays() {
    let scratch = Scratch::new("agents-same-model");
    let rsh = local_rsh(scratch.path());
    let job = fixture_job(24, 6, "sends");
    let pids: Vec<String> = job.rank_pids().iter().map(i32::to_string).collect();
    let starter = job.starter_pid().to_string();
    let rsh = rsh.to_str().expect("a UTF-8 path");
    // Six hosts, at most two streams per process: the front end reads two agents, each
    // of which relays for two more.
    let across = mqd(&[
        "job", &starter, "--rsh", rsh, "--fanout", "2", "--stacks", "--json",
    ]);
    let mut args = vec!["dump", "--stacks", "--json"];
    args.extend(pids.iter().map(String::as_str));
    let here = mqd(&args);
    assert_eq!(across.status.code(), here.status.code());
    let (across, here) = (json(&across), json(&here));
    let (a, h) = (ranks_without_hosts(&across), ranks_without_hosts(&here));
    assert_eq!(a.len(), h.len());
    for (a, h) in a.iter().zip(&h) {
        assert!(a == h, "across hosts:\n{a}\nhere:\n{h}");
    }
    assert_eq!(across["diagnosis"], here["diagnosis"]);
    assert_eq!(across["groups"], here["groups"]);
    for (r, rank) in across["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .enumerate()
    {
        assert_eq!(rank["host"], format!("sim{}", r / 4), "rank {r}");
        assert_eq!(rank["error"], Value::Null, "rank {r}");
        let message = rank["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("mqd: 'rank {r} (pid {}, ", job.rank_pids()[r])),
            "{message}"
        );
    }
    let text = mqd(&["job", &starter, "--rsh", rsh, "--fanout", "2"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "Ranks on 6 hosts: sim0 (0-3), sim1 (4-7), sim2 (8-11), sim3 (12-15), sim4 (16-19), sim5 (20-23).\n"
        ),
        "{text}"
    );
    // With --stats the agents still dump the ranks of other hosts (uncounted).
    let counted = mqd(&[
        "job", &starter, "--rsh", rsh, "--fanout", "2", "--stacks", "--json", "--stats",
    ]);
    let said = String::from_utf8_lossy(&counted.stderr);
    assert!(
        said.contains("dumped by their agents, not counted"),
        "{said}"
    );
    assert_eq!(json(&counted)["diagnosis"], across["diagnosis"]);
    assert_left_as_they_were(job.rank_pids());
}

#[test]
fn a_host_that_cannot_be_reached_leaves_its_ranks_undetermined() {
    let scratch = Scratch::new("agents-unreachable");
    let rsh = script(
        scratch.path(),
        "rsh",
        "case $1 in sim1) echo \"ssh: connect to host $1 port 22: Connection refused\" >&2; exit 255;; esac\nshift\nexec sh -c \"$*\"",
    );
    let job = fixture_job(6, 3, "compute");
    let out = job_across(&job, &rsh, &["--json"]);
    assert_eq!(out.status.code(), Some(9), "undetermined");
    let doc = json(&out);
    for (r, rank) in doc["ranks"].as_array().expect("ranks").iter().enumerate() {
        let error = rank["error"].as_str();
        if r / 2 == 1 {
            let error = error.expect("sim1's ranks failed");
            assert!(error.starts_with("on host sim1 (through rsh): no agent answered (rsh: exit status 255): ssh: connect to host sim1 port 22: Connection refused"), "{error}");
        } else {
            assert_eq!(error, None, "rank {r}");
        }
    }
    assert_eq!(doc["diagnosis"]["verdict"], "undetermined");
    assert_eq!(
        doc["diagnosis"]["doubts"][0]["doubt"]["failed"]["ranks"],
        "2,3"
    );
    assert_left_as_they_were(job.rank_pids());
}

#[test]
fn another_version_is_refused_at_the_handshake_on_both_sides() {
    let scratch = Scratch::new("agents-version");
    let rsh = local_rsh(scratch.path());
    let old = script(
        scratch.path(),
        "old-mqd",
        "echo '{\"hello\":{\"protocol\":1,\"mqd\":\"0.0.1\",\"host\":\"sim0\",\"pid\":1}}'\ncat >/dev/null",
    );
    let job = fixture_job(2, 2, "compute");
    let out = job_across(
        &job,
        &rsh,
        &["--agent", old.to_str().expect("UTF-8"), "--json"],
    );
    assert_eq!(out.status.code(), Some(9));
    let doc = json(&out);
    for rank in doc["ranks"].as_array().expect("ranks") {
        let error = rank["error"].as_str().expect("not dumped");
        assert!(
            error.contains(&format!(
                "the mqd on sim{} (sim0) is version 0.0.1 (agent protocol 1), this one is {}",
                rank["rank"],
                env!("CARGO_PKG_VERSION")
            )),
            "{error}"
        );
        assert!(error.contains("--agent PATH"), "{error}");
    }
    // The agent's side: a front end of another version gets a refusal, not a dump.
    let mut agent = mqd_command(&["agent"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mqd agent");
    use std::io::Write;
    agent
        .stdin
        .take()
        .expect("piped")
        .write_all(br#"{"protocol":1,"mqd":"9.9.9","hosts":[],"options":{"stacks":false,"dll":null,"dll_name":null,"job_size":null,"timeout":5.0,"fanout":2,"agent":"mqd"},"launcher":{"rsh":["ssh"]}}"#)
        .expect("write the task");
    let out = agent.wait_with_output().expect("mqd agent");
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["hello"]["mqd"], env!("CARGO_PKG_VERSION"));
    let why = lines[1]["refused"]["why"].as_str().expect("refused");
    assert!(why.contains("the front end's is 9.9.9"), "{why}");
}

/// `mqd job` through `rsh` with an agent that never answers (`exec MARKER`, the marker
/// then naming its processes), given up after 1 s.
fn job_with_mute_agents(
    scratch: &Scratch,
    job: &mqd_fixtures::Job,
    rsh: &Path,
    marker: &str,
) -> Output {
    let mute = script(scratch.path(), "mute-mqd", &format!("exec {marker}"));
    job_across(
        job,
        rsh,
        &[
            "--agent",
            mute.to_str().expect("UTF-8"),
            "--agent-timeout",
            "1",
            "--json",
        ],
    )
}

/// Waits (10 s at most) until no process mentions `marker`.
fn assert_gone(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(marker).is_empty() {
        if Instant::now() > deadline {
            let left: Vec<String> = processes_mentioning(marker)
                .into_iter()
                .map(|(pid, line)| {
                    let of = |key| proc_status(pid, key).unwrap_or_default();
                    format!(
                        "{pid} {line:?} (state {}, parent {})",
                        of("State:"),
                        of("PPid:")
                    )
                })
                .collect();
            panic!("left behind: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_that_does_not_finish_in_time_is_ended_and_reported() {
    let scratch = Scratch::new("agents-timeout");
    let rsh = local_rsh(scratch.path());
    let job = fixture_job(4, 2, "compute");
    let started = Instant::now();
    // A command line no other process has (another test's, or one left by an earlier
    // run): this test's own `sleep`, for 300 s and a fraction.
    let marker = format!("sleep 300.{}", std::process::id());
    let out = job_with_mute_agents(&scratch, &job, &rsh, &marker);
    assert_eq!(out.status.code(), Some(9));
    let doc = json(&out);
    for rank in doc["ranks"].as_array().expect("ranks") {
        let error = rank["error"].as_str().expect("not dumped");
        assert!(
            error.contains("its agent did not finish within 1 s (--agent-timeout): ended"),
            "{error}"
        );
    }
    eprintln!(
        "mqd gave up on the mute agents after {:.2?}",
        started.elapsed()
    );
    // The mute agents were ended with their launchers.
    assert_gone(&marker);
}

#[test]
fn an_agent_killed_mid_dump_leaves_its_ranks_running_and_is_reported() {
    let scratch = Scratch::new("agents-killed");
    let rsh = local_rsh(scratch.path());
    let marker = scratch.file("killed");
    // The real agent, killed (SIGKILL) as soon as it traces one of its ranks.
    let killer = script(
        scratch.path(),
        "killed-mqd",
        &format!(
            "exec 3<&0\n{mqd} agent <&3 & agent=$!\nwhile kill -0 $agent 2>/dev/null; do\n  if grep -qs 'TracerPid:[[:space:]]*[1-9]' /proc/[0-9]*/status; then kill -9 $agent; touch {marker}; break; fi\ndone\nwait $agent",
            mqd = env!("CARGO_BIN_EXE_mqd"),
            marker = marker.display()
        ),
    );
    // Many ranks per host and their stacks: a dump long enough to be caught in.
    let job = fixture_job(64, 2, "sends");
    let out = job_across(
        &job,
        &rsh,
        &[
            "--agent",
            killer.to_str().expect("UTF-8"),
            "--stacks",
            "--json",
        ],
    );
    let doc = json(&out);
    assert!(
        marker.exists(),
        "the agent was not caught tracing a rank: {doc}"
    );
    assert_eq!(out.status.code(), Some(9));
    for rank in doc["ranks"].as_array().expect("ranks") {
        let error = rank["error"].as_str().expect("not dumped");
        // Killed after its hello, while a rank was traced (the usual case), or before
        // it (another agent's tracing set the killer off first).
        assert!(
            error.contains(
                "its agent's output ended before every rank was reported (rsh: exit status 137)"
            ) || error.contains("no agent answered (rsh: exit status 137)"),
            "{error}"
        );
    }
    assert_left_as_they_were(job.rank_pids());
}

#[test]
fn the_front_end_killed_leaves_no_agent_and_every_rank_running() {
    let scratch = Scratch::new("agents-front-end-killed");
    let rsh = local_rsh(scratch.path());
    // The front end and everything it starts carry this in their environment.
    let tag = format!("MQD_TEST_FRONT_END={}", std::process::id());
    // Agents that are still starting when the front end dies.
    let slow = script(
        scratch.path(),
        "slow-mqd",
        &format!("sleep 1\nexec {} agent", env!("CARGO_BIN_EXE_mqd")),
    );
    let job = fixture_job(8, 4, "sends");
    let mut front = mqd_command(&[
        "job",
        &job.starter_pid().to_string(),
        "--rsh",
        rsh.to_str().expect("UTF-8"),
        "--agent",
        slow.to_str().expect("UTF-8"),
    ])
    .env("MQD_TEST_FRONT_END", std::process::id().to_string())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("run mqd");
    let deadline = Instant::now() + Duration::from_secs(10);
    // The front end and, for each of the four hosts, at least its launcher.
    while processes_mentioning(&tag).len() < 5 {
        assert!(Instant::now() < deadline, "the agents did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    front.kill().expect("kill the front end");
    front.wait().expect("reap the front end");
    // Every agent finds its output gone and exits; none is left, no rank stays stopped.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = processes_mentioning(&tag);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_left_as_they_were(job.rank_pids());
}

/// A launcher that leaves its agent behind and exits (as a remote shell that detaches
/// may): the agent, in the launcher's process group, is ended with it when mqd gives up
/// on it, although the launcher itself is already gone.
#[test]
fn an_agent_that_outlives_its_launcher_is_ended_with_its_group() {
    let scratch = Scratch::new("agents-detached");
    let detaching = script(scratch.path(), "rsh", "shift\nsh -c \"$*\" &\nexit 0");
    let job = fixture_job(2, 1, "compute");
    let marker = format!("sleep 301.{}", std::process::id());
    let out = job_with_mute_agents(&scratch, &job, &detaching, &marker);
    assert_eq!(out.status.code(), Some(9));
    assert_gone(&marker);
}

/// One consistent cut: an agent says when its host's ranks are stopped, and holds them
/// (traced, stopped) until its input closes, which the front end does once every host
/// has said so; only then are they let go and the stream ended.
#[test]
fn an_agent_holds_its_ranks_until_the_front_end_lets_them_go() {
    use mqd_remote::{AgentOptions, HostTask, Launcher, MQD_VERSION, RankTask, Task};
    use std::io::{BufRead, BufReader, Write};
    let job = fixture_job(2, 1, "compute");
    let pids = job.rank_pids().to_vec();
    let task = Task {
        protocol: mqd_remote::wire::PROTOCOL,
        mqd: MQD_VERSION.to_owned(),
        hosts: vec![HostTask {
            name: "sim0".into(),
            ranks: pids
                .iter()
                .enumerate()
                .map(|(r, &pid)| RankTask {
                    rank: r as i32,
                    pid,
                    executable: None,
                })
                .collect(),
            simulated: None,
        }],
        options: AgentOptions {
            stacks: true,
            python_frames: true,
            dll: None,
            dll_name: None,
            job_size: Some(2),
            timeout: 60.0,
            fanout: 32,
            agent: mqd_library_host::helper::Helper::new(env!("CARGO_BIN_EXE_mqd"), &["agent"]),
            no_cache: false,
            job_library: false,
            openmp: true,
            ompd: None,
        },
        launcher: Launcher::Rsh(vec!["false".into()]),
    };
    let mut agent = mqd_command(&["agent"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run mqd agent");
    let mut input = agent.stdin.take().expect("piped");
    writeln!(input, "{}", serde_json::to_string(&task).expect("a task")).expect("the task");
    input.flush().expect("the task");
    let (tx, lines) = std::sync::mpsc::channel();
    let out = agent.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = |what: &str| -> String {
        lines
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no {what} from the agent"))
    };
    // Hello, the host, then: stopped.
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("\"stopped\"")) {
        seen.push(next("stopped record"));
    }
    // Held: traced and stopped, and nothing more said but the dump, for as long as the
    // input stays open.
    let traced = |pid: i32| proc_status(pid, "TracerPid:").is_some_and(|t| t != "0");
    std::thread::sleep(Duration::from_millis(1500));
    for &pid in &pids {
        assert!(traced(pid), "pid {pid} let go before the release");
    }
    while let Ok(line) = lines.try_recv() {
        assert!(
            !line.contains("\"end\""),
            "the stream ended before the release"
        );
        seen.push(line);
    }
    // Released: the ranks go, the stream ends.
    drop(input);
    loop {
        let line = next("end of the stream");
        if line.contains("\"end\"") {
            break;
        }
    }
    let status = mqd_fixtures::real_mpich::wait_child(&mut agent, LIMIT).expect("the agent ends");
    assert!(status.success(), "{status:?}");
    assert_left_as_they_were(&pids);
}

// ---------------------------------------------------------------- simulated at scale

/// `mqd job --simulate SPEC --json` through `rsh`, undetermined.
fn simulated(spec: &str, rsh: &Path, more: &[&str]) -> Value {
    simulated_with(spec, rsh, more, 9)
}

/// `mqd job --simulate SPEC --json` through `rsh`, exiting `code`.
fn simulated_with(spec: &str, rsh: &Path, more: &[&str], code: i32) -> Value {
    let mut args = vec![
        "job",
        "--simulate",
        spec,
        "--rsh",
        rsh.to_str().expect("a UTF-8 path"),
        "--json",
    ];
    args.extend(more);
    let out = mqd(&args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

/// The deadlock parts of a class document's diagnosis, by kind and certainty.
fn parts_of_document(
    d: &Value,
) -> std::collections::BTreeMap<(mqd_model::FindingKind, mqd_model::Certainty), mqd_model::RankSet>
{
    let mut parts = std::collections::BTreeMap::new();
    for p in d["deadlocks"].as_array().expect("deadlocks worked out") {
        let kind = serde_json::from_value(p["kind"].clone()).expect("a kind");
        let certainty = serde_json::from_value(p["certainty"].clone()).expect("a certainty");
        let ranks: mqd_model::RankSet = p["ranks"].as_str().expect("ranks").parse().expect("a set");
        parts
            .entry((kind, certainty))
            .or_insert_with(mqd_model::RankSet::new)
            .union_with(&ranks);
    }
    parts
}

/// The deadlock findings of a per-rank diagnosis, by kind and certainty.
fn deadlock_parts(
    d: &mqd_model::Diagnosis,
) -> std::collections::BTreeMap<(mqd_model::FindingKind, mqd_model::Certainty), mqd_model::RankSet>
{
    mqd_scale::finding_ranks_of(
        d.findings.iter().filter(|f| {
            f.kind.is_deadlock() || f.kind == mqd_model::FindingKind::BlockedByDeadlock
        }),
    )
}

/// The analysis of the same simulated job, every rank built and a class of its own.
fn rank_by_rank(spec: &str) -> mqd_model::Diagnosis {
    let job = mqd_remote::simulate::Simulation::parse(spec).expect("a job");
    let ranks = (0..job.ranks)
        .map(|r| {
            let mut d = job.rank(r);
            d.host = Some(format!("sim{}", job.host_of(r)));
            d
        })
        .collect();
    let mut dump = mqd_model::JobDump::of_ranks(ranks);
    dump.job_size = Some(job.ranks);
    mqd_analysis::diagnose(&dump)
}

#[test]
fn a_simulated_job_is_diagnosed_by_classes_as_rank_by_rank() {
    let scratch = Scratch::new("simulated-job");
    let rsh = local_rsh(scratch.path());
    let spec = "4096,64,10";
    let doc = simulated(spec, &rsh, &["--fanout", "8"]);
    // Ten states: nine places of the collective, and the deviants, named.
    let classes = doc["classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 10, "{doc:#}");
    let deviants: Vec<&Value> = classes.iter().filter(|c| c["count"] == 3).collect();
    assert_eq!(deviants.len(), 1, "{doc:#}");
    assert_eq!(deviants[0]["ranks"], "1024,2048,3072");
    assert_eq!(
        deviants[0]["place"],
        "in MPI_Recv (from exchange_halo), with its right neighbour (rank + 1)"
    );
    let total: u64 = classes.iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(total, 4096);
    // The same verdict, reasons and worst reading as every rank analysed one by one.
    let expected = rank_by_rank(spec);
    let d = &doc["diagnosis"];
    assert_eq!(d["verdict"], expected.verdict.name());
    let doubts: Vec<mqd_model::Doubt> = d["doubts"]
        .as_array()
        .expect("doubts")
        .iter()
        .map(|x| serde_json::from_value(x["doubt"].clone()).expect("a doubt"))
        .collect();
    assert_eq!(doubts, expected.doubts);
    assert_eq!(
        d["possibly_deadlocked"],
        expected.possibly_deadlocked.to_string()
    );
    assert_eq!(d["possibly_deadlocked"], "0-4095");
    // Knots and ranks behind them, as rank by rank.
    assert_eq!(parts_of_document(d), deadlock_parts(&expected));
    // The collective's finding and the receives nothing is sent to (the deviants'
    // neighbours are in the collective), computed by class: the same facts as rank by
    // rank.
    let in_full: Vec<&mqd_model::Finding> = expected
        .findings
        .iter()
        .filter(|f| mqd_scale::in_full(f))
        .collect();
    let kinds: std::collections::BTreeSet<mqd_model::FindingKind> =
        in_full.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            mqd_model::FindingKind::CollectiveWait,
            mqd_model::FindingKind::UnmatchedReceive
        ]
        .into(),
    );
    let found = d["findings"].as_array().expect("findings");
    assert_eq!(found.len(), in_full.len(), "{doc:#}");
    for f in in_full {
        let same = found.iter().any(|x| {
            x["ranks"] == f.ranks.to_string()
                && serde_json::from_value::<mqd_model::Subject>(x["subject"].clone()).ok()
                    == Some(f.subject.clone())
        });
        assert!(
            same,
            "no {:?} finding of ranks {} in {doc:#}",
            f.kind, f.ranks
        );
    }
}

#[test]
fn a_simulated_ring_of_synchronous_sends_is_proven_deadlocked_by_classes() {
    let scratch = Scratch::new("simulated-ring");
    let rsh = local_rsh(scratch.path());
    let spec = "4096,64,10,ring";
    // Deadlock: exit code 8.
    let doc = simulated_with(spec, &rsh, &["--fanout", "8"], 8);
    let classes = doc["classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 10, "{doc:#}");
    let deviants: Vec<&Value> = classes.iter().filter(|c| c["count"] == 3).collect();
    assert_eq!(deviants.len(), 1, "{doc:#}");
    assert_eq!(
        deviants[0]["place"],
        "in MPI_Ssend (from exchange_halo), with its right neighbour (rank + 1)"
    );
    // Proven from the queues, as rank by rank: every rank, one cycle.
    let expected = rank_by_rank(spec);
    let d = &doc["diagnosis"];
    assert_eq!(d["verdict"], "deadlock");
    assert_eq!(d["verdict"], expected.verdict.name());
    assert_eq!(d["deadlocked"], expected.deadlocked.to_string());
    assert_eq!(d["deadlocked"], "0-4095");
    assert_eq!(d["possibly_deadlocked"], "0-4095");
    // One cycle of every rank, proven, as rank by rank.
    let parts = parts_of_document(d);
    assert_eq!(parts, deadlock_parts(&expected));
    assert_eq!(
        parts.keys().collect::<Vec<_>>(),
        [&(
            mqd_model::FindingKind::DeadlockCycle,
            mqd_model::Certainty::Definite
        )]
    );
    let doubts = d["doubts"].as_array().expect("doubts");
    assert!(doubts.is_empty(), "{doc:#}");
    assert!(expected.doubts.is_empty(), "{:?}", expected.doubts);
    // One class of the worst reading: each rank waiting for its right neighbour.
    let held = d["held"].as_array().expect("held");
    assert_eq!(held.len(), 1, "{doc:#}");
    assert_eq!(held[0]["count"], 4096);
    assert_eq!(
        held[0]["text"],
        "in MPI_Ssend, each waiting for its right neighbour (rank + 1)"
    );
    assert_eq!(
        doc["verdict"],
        "Verdict: deadlock (ranks 0-4095 proven blocked)."
    );
}

#[test]
fn a_simulated_host_that_cannot_be_reached_is_a_finding() {
    let scratch = Scratch::new("simulated-host-lost");
    // Host sim5 cannot be reached; the others can.
    let rsh = script(
        scratch.path(),
        "rsh",
        "host=$1\nshift\n[ \"$host\" = sim5 ] && { echo 'sim5: no route to host' >&2; exit 255; }\nexec sh -c \"$*\"",
    );
    let doc = simulated("512,16,3", &rsh, &["--fanout", "4"]);
    let failed = doc["failed"].as_array().expect("failed");
    assert_eq!(failed.len(), 1, "{doc:#}");
    assert_eq!(failed[0]["ranks"], "160-191");
    assert!(
        failed[0]["why"]
            .as_str()
            .unwrap()
            .starts_with("on host sim5:"),
        "{doc:#}"
    );
    let doubts = doc["diagnosis"]["doubts"].as_array().expect("doubts");
    assert!(
        doubts
            .iter()
            .any(|x| x["doubt"]["failed"]["ranks"] == "160-191"),
        "{doc:#}"
    );
    assert_eq!(doc["diagnosis"]["verdict"], "undetermined");
}

// ---------------------------------------------------------------- real jobs by classes

/// `mqd job --json` on a fixture job of `ranks` on `hosts` simulated hosts: its exit
/// code, document and the document's size.
fn job_document(
    ranks: usize,
    (layout, scenario): (Layout, &str),
    more: &[&str],
) -> (i32, Value, usize) {
    let scratch = Scratch::new("agents-by-classes");
    let rsh = local_rsh(scratch.path());
    let mut options = JobOptions::new(ranks, layout, scenario);
    options.simulated_hosts = Some(ranks.div_ceil(50));
    let job = spawn_job(&options).expect("start the fixture job");
    let mut args = vec!["--json", "--fanout", "4"];
    args.extend(more);
    let out = job_across(&job, &rsh, &args);
    assert_left_as_they_were(job.rank_pids());
    let code = out.status.code().expect("mqd exited");
    (code, json(&out), out.stdout.len())
}

/// A job of more ranks than are reported one by one (256) is reported by the classes its
/// agents merged its ranks into: the verdict of the same job of 8 ranks, every rank
/// counted once, a document that does not grow with the job; `--per-rank` reports each
/// rank, with the same verdict.
#[test]
fn a_large_job_across_hosts_is_reported_by_its_classes() {
    for (layout, scenario, verdict, more) in [
        (Layout::Ch3, "ssend-ring", "deadlock", &[][..]),
        (Layout::Debugq5, "compute", "no_deadlock", &[]),
        // Threads the kernel numbered apart in every rank: still one state.
        (Layout::Debugq5, "threads", "no_deadlock", &[]),
        // All but the last in MPI_Allreduce, the last computing: it is late, not stuck.
        (Layout::Debugq4, "allreduce", "no_deadlock", &[]),
        // A hold would be of ranks: without one the classes' own answer.
        (Layout::Debugq5, "ring", "undetermined", &["--no-hold"]),
    ] {
        let job = (layout, scenario);
        let (small_code, small, _) = job_document(8, job, more);
        assert_eq!(
            small["diagnosis"]["verdict"], verdict,
            "{scenario}, 8 ranks"
        );
        assert_eq!(small["ranks"].as_array().map(Vec::len), Some(8));
        let (code, doc, bytes) = job_document(300, job, more);
        assert_eq!(code, small_code, "{scenario}: {}", doc["verdict"]);
        assert_eq!(doc["schema"], "mqd/3-classes", "{scenario}");
        assert_eq!(doc["size"], 300);
        assert_eq!(doc["diagnosis"]["verdict"], verdict, "{scenario}");
        let classes = doc["classes"].as_array().expect("classes");
        let mut seen = mqd_model::RankSet::new();
        for c in classes {
            let ranks: mqd_model::RankSet = c["ranks"]
                .as_str()
                .expect("a rank set")
                .parse()
                .expect("ranks");
            assert_eq!(c["count"], ranks.len(), "{}", c["ranks"]);
            assert!(
                seen.intersection(&ranks).is_empty(),
                "a rank in two classes"
            );
            seen.union_with(&ranks);
        }
        assert_eq!(
            seen,
            mqd_model::RankSet::full(300),
            "{scenario}: every rank once"
        );
        assert!(
            classes.len() <= 4,
            "{scenario}: the ranks of one state are one class: {} classes\n{}",
            classes.len(),
            serde_json::to_string_pretty(&doc["classes"]).unwrap()
        );
        assert!(bytes < 64 << 10, "{scenario}: a {bytes}-byte document");
        assert_eq!(
            doc["diagnosis"]["deadlocked"],
            if verdict == "deadlock" { "0-299" } else { "" },
            "{scenario}"
        );
        if scenario == "ssend-ring" {
            let mut more = more.to_vec();
            more.push("--per-rank");
            let (code, each, _) = job_document(300, job, &more);
            assert_eq!(code, small_code);
            assert_eq!(each["schema"], "mqd/3");
            assert_eq!(each["ranks"].as_array().map(Vec::len), Some(300));
            assert_eq!(each["diagnosis"]["verdict"], verdict);
        }
    }
}

/// What the classes leave open, a hold of the job's ranks may decide, and the job is
/// still reported by its classes: the fixtures' ring, whose calls no hold can count (they
/// are in no MPI library), stays undetermined at 300 ranks as at 8, saying why, in a
/// document that does not grow with the job (a real MPI's hold by classes:
/// `real_diagnosis`).
#[test]
fn a_large_job_held_is_reported_by_its_classes() {
    let job = (Layout::Debugq5, "recv-ring");
    let (small_code, small, _) = job_document(8, job, &[]);
    assert_eq!(small["diagnosis"]["verdict"], "undetermined", "8 ranks");
    let (code, doc, bytes) = job_document(300, job, &[]);
    assert_eq!(code, small_code, "{:#}", doc["diagnosis"]);
    assert_eq!(doc["schema"], "mqd/3-classes");
    let d = &doc["diagnosis"];
    assert_eq!(d["verdict"], "undetermined", "{d:#}");
    assert_eq!(d["possibly_deadlocked"], "0-299", "{d:#}");
    assert_eq!(d["hold"]["unwatched"], "0-299", "{d:#}");
    let unheld = d["doubts"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|x| x["doubt"]["unheld"]["ranks"] == "0-299");
    assert!(unheld, "{d:#}");
    assert!(bytes < 64 << 10, "a {bytes}-byte document");
}

/// A split's rows, each a ring of `MPI_Ssend`: proven deadlocked at 300 ranks as at 8,
/// every rank; at 300 by classes, each of one column of the rows.
#[test]
fn a_splits_rows_deadlock_alike_at_any_size() {
    for n in [8, 300] {
        let (code, doc, _) = job_document(n, (Layout::Ch3, "rows"), &[]);
        assert_eq!(code, 8, "{n} ranks: {}", doc["verdict"]);
        assert_eq!(doc["diagnosis"]["verdict"], "deadlock");
        assert_eq!(doc["diagnosis"]["deadlocked"], format!("0-{}", n - 1));
        if n == 300 {
            // By classes, each of one column of the rows (its ranks equally apart by 4):
            // a few of many ranks per column at most, what the agents' templates made of
            // the hosts; beside them, ranks caught at another point of their calls are
            // classes of one.
            assert_eq!(doc["schema"], "mqd/3-classes");
            let classes = doc["classes"].as_array().expect("classes");
            let many = classes.iter().filter(|c| c["count"].as_u64() > Some(1));
            assert!(
                (4..=12).contains(&many.count()),
                "{} classes",
                classes.len()
            );
            let mut counted = 0;
            for c in classes {
                let ranks: mqd_model::RankSet = c["ranks"]
                    .as_str()
                    .and_then(|r| r.parse().ok())
                    .expect("a class's ranks");
                let column = ranks.first().map(|r| r % 4);
                assert!(ranks.iter().all(|r| Some(r % 4) == column), "{ranks}");
                counted += ranks.len();
                // The peer on the row by its COMM_WORLD rank, never its local rank: for
                // a class of many relative to each member, for one rank (a rank whose
                // state reads otherwise) that rank's.
                let peer = match (ranks.len(), column) {
                    (1, _) => {
                        let r = ranks.first().unwrap_or(0);
                        format!("with rank {}", r - r % 4 + (r % 4 + 1) % 4)
                    }
                    (_, Some(3)) => "with rank - 3 (mod 300)".into(),
                    _ => "with its right neighbour (rank + 1)".into(),
                };
                let place = c["place"].as_str().unwrap_or_default();
                assert!(place.contains(&peer), "{ranks}: {place}");
            }
            assert_eq!(counted, 300);
        }
    }
}

/// `mqd launch` of a job of more than 256 ranks (all on this host) reports it by classes
/// too: the proven deadlock of the ring, one class.
#[test]
fn a_large_job_launched_is_reported_by_its_classes() {
    // `mqd launch [--json]` of a 300-rank ring of MPI_Ssend on this host.
    let launch = |json: bool| {
        let starter = mqd_fixtures::fixture(mqd_fixtures::STARTER);
        let mut args = vec!["launch", "--delay", "1"];
        if json {
            args.push("--json");
        }
        let starter = starter.to_str().expect("a UTF-8 path").to_owned();
        args.extend(["--", &starter, "-n", "300", "--layout", "ch3", "ssend-ring"]);
        mqd(&args)
    };
    let out = launch(true);
    assert_eq!(
        out.status.code(),
        Some(8),
        "deadlock: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["schema"], "mqd/3-classes");
    assert_eq!(doc["diagnosis"]["deadlocked"], "0-299");
    let classes = doc["classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 1, "{}", doc["verdict"]);
    assert_eq!(classes[0]["count"], 300);
    // In text: the job, the library, one line per class, the proof and the verdict.
    let out = launch(false);
    let text = String::from_utf8_lossy(&out.stdout);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{text}{said}");
    for line in [
        " 300 ranks on 1 host, by classes (--per-rank for each rank).\nQueues read by mqd message queue support for MPICH",
        "\n300 ranks in 1 class:\n  ranks 0-299 (300): in MPI_Ssend (from main), with its right neighbour (rank + 1)\n",
        "\n  ranks 0-299 (300) are on cycles of waits, proven\n",
        "\nVerdict: deadlock (ranks 0-299 proven blocked).",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

/// `mqd watch` of a job across hosts by classes (`--by-classes`, as of any job past 256
/// ranks): what persisted by rank sets and the answering sample's classes, in text and
/// JSON, with the verdict and exit code of the same watch rank by rank (`--per-rank`).
#[test]
fn a_watch_by_classes_answers_as_the_watch_rank_by_rank() {
    let scratch = Scratch::new("agents-watch-by-classes");
    let rsh = local_rsh(scratch.path());
    let mut options = JobOptions::new(8, Layout::Ch3, "ssend-ring");
    options.simulated_hosts = Some(2);
    let job = spawn_job(&options).expect("start the fixture job");
    let starter = job.starter_pid().to_string();
    let watch = |more: &[&str]| {
        let mut args = vec!["watch", "--samples", "2", "--interval", "0.5"];
        args.extend(["--job", &starter, "--rsh", rsh.to_str().expect("UTF-8")]);
        args.extend(more);
        let out = mqd(&args);
        assert_left_as_they_were(job.rank_pids());
        out
    };
    let per_rank = watch(&["--per-rank", "--json"]);
    let classes = watch(&["--by-classes", "--json"]);
    let text = watch(&["--by-classes"]);
    assert_eq!(per_rank.status.code(), Some(8), "a proven deadlock");
    assert_eq!(classes.status.code(), per_rank.status.code());
    assert_eq!(text.status.code(), per_rank.status.code());

    let (per_rank, doc) = (json(&per_rank), json(&classes));
    assert_eq!(per_rank["schema"], "mqd/3");
    assert_eq!(doc["schema"], "mqd/3-classes");
    let persisted = &doc["watch"]["persistent"];
    for key in ["verdict", "deadlocked", "possibly_deadlocked"] {
        assert_eq!(persisted[key], per_rank["persistent"][key], "{key}");
    }
    assert_eq!(persisted["verdict"], "deadlock");
    assert_eq!(persisted["deadlocked"], "0-7");
    assert_eq!(doc["watch"]["samples"], 2);
    assert_eq!(doc["watch"]["diagnosis_sample"], 1);
    // The persisted cycles by kind, one entry whatever the ranks.
    let cycles: Vec<&Value> = (persisted["findings"].as_array().into_iter().flatten())
        .filter(|f| f["kind"] == "deadlock_cycle")
        .collect();
    assert_eq!(cycles.len(), 1, "{persisted:#}");
    assert_eq!(cycles[0]["ranks"], "0-7");
    assert_eq!(cycles[0]["certainty"], "definite");
    assert_eq!(
        doc["diagnosis"]["verdict"],
        per_rank["diagnosis"]["verdict"]
    );
    assert_eq!(doc["diagnosis"]["deadlocked"], "0-7");

    let text = String::from_utf8_lossy(&text.stdout);
    let waits = per_rank["persistent"]["waits"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(
        text.starts_with(&format!(
            "Across the 2 samples, {waits} waits were in every one, of ranks 0-7 (8).\n\
             Persisted over 2 samples: ranks 0-7 (8) are on cycles of waits, proven\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "\nThe job at sample 2:\nJob of starter pid {starter}: 8 ranks on 2 hosts, by classes (--per-rank for each rank).\n"
        )),
        "{text}"
    );
    assert!(
        text.ends_with("Verdict: deadlock (ranks 0-7 proven blocked).\n"),
        "{text}"
    );
}

/// A job past 256 ranks whose classes the analysis does not follow (each rank's receive
/// tagged with its left neighbour's rank: a number that differs across a class) is still
/// reported by classes, those split into their members, each a class of its own: the
/// verdict of the same job at 8 ranks, nothing left "not followed", a text report of a
/// screen (the 20 largest classes, the rest summed up).
#[test]
fn a_large_job_whose_classes_are_not_followed_is_reported_by_classes_of_one() {
    let job = (Layout::Debugq5, "tag-ring");
    let (small_code, small, _) = job_document(8, job, &["--no-hold"]);
    assert_eq!(small["diagnosis"]["verdict"], "undetermined", "8 ranks");
    let (code, doc, _) = job_document(300, job, &["--no-hold"]);
    assert_eq!(code, small_code, "{:#}", doc["diagnosis"]);
    assert_eq!(doc["schema"], "mqd/3-classes");
    let d = &doc["diagnosis"];
    assert_eq!(d["verdict"], "undetermined", "{d:#}");
    assert_eq!(d["possibly_deadlocked"], "0-299", "{d:#}");
    let doubts = d["doubts"].as_array().expect("doubts");
    assert!(
        !doubts
            .iter()
            .any(|x| x["doubt"].get("not_followed").is_some()),
        "{d:#}"
    );
    let classes = doc["classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 300, "each rank a class of its own");

    let scratch = Scratch::new("agents-split-text");
    let rsh = local_rsh(scratch.path());
    let mut options = JobOptions::new(300, Layout::Debugq5, "tag-ring");
    options.simulated_hosts = Some(6);
    let job = spawn_job(&options).expect("start the fixture job");
    let out = job_across(&job, &rsh, &["--no-hold", "--fanout", "4"]);
    assert_left_as_they_were(job.rank_pids());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("300 ranks in 300 classes:\n") && text.contains("\n  and 280 more classes, "),
        "{text}"
    );
    assert!(text.lines().count() < 80, "{text}");
}
