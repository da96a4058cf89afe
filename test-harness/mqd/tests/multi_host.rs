//! A real multi-host job on one machine, as a front-end node sees one: each host is a PID +
//! UTS + mount namespace (`unshare --pid --uts --fork --mount-proc`) with its own host name
//! and /etc/hosts, running Debian's real `sshd` on a loopback address of its own; the real
//! MPICH's hydra (`mpiexec -launcher ssh -launcher-exec SSH -hosts h1,h2`) starts the ranks
//! inside them, so their pids exist only there. `mqd job STARTER`, run outside, dumps every
//! rank on every host through agents started over that ssh (through the job's own mpiexec,
//! or `--rsh`). Keys, configurations and the hosts file are the test's own.
//!
//! Teardown (also when a test fails): the job's mpiexec, then each namespace's `unshare`
//! killed, which kills (`--kill-child`) the namespace's first process and with it every
//! process in the namespace: its sshd, hydra's proxy, the ranks, any agent.

mod support;

use mqd_fixtures::default_signal_actions;
use mqd_fixtures::real_mpich::{self, Device, Job, mpich};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::Scratch;

/// Longest an mqd or ssh run may take.
const LIMIT: Duration = Duration::from_secs(90);

/// Hosts `h1`, `h2`, ... in namespaces, each with an sshd on `127.0.0.<base + i>`.
struct Hosts {
    dir: Scratch,
    names: Vec<String>,
    /// Each namespace's `unshare`.
    namespaces: Vec<Child>,
}

impl Hosts {
    fn start(test: &str, base: u8, n: usize) -> Hosts {
        let dir = Scratch::new(test);
        let d = dir.path().to_path_buf();
        for key in ["host_key", "user_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .stdin(Stdio::null())
                .output()
                .expect("ssh-keygen (openssh-client) is needed");
            assert!(out.status.success(), "ssh-keygen: {out:?}");
        }
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).expect("keys");
        // sshd's privilege separation directory.
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let names: Vec<String> = (1..=n).map(|i| format!("h{i}")).collect();
        let address = |i: usize| format!("127.0.0.{}", usize::from(base) + i + 1);
        let mut hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let mut config = String::new();
        for (i, name) in names.iter().enumerate() {
            hosts.push_str(&format!("{} {name}\n", address(i)));
            config.push_str(&format!("Host {name}\n  HostName {}\n", address(i)));
        }
        config.push_str(&format!(
            "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n  ConnectTimeout 10\n  LogLevel ERROR\n",
            d.join("user_key").display()
        ));
        std::fs::write(d.join("hosts"), hosts).expect("hosts");
        std::fs::write(d.join("ssh_config"), config).expect("ssh_config");
        write_script(
            &d.join("ssh"),
            &format!("exec ssh -F {} \"$@\"", d.join("ssh_config").display()),
        );
        let mut namespaces = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let sshd_config = d.join(format!("sshd_{name}"));
            std::fs::write(
                &sshd_config,
                format!(
                    "ListenAddress {}:22\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\nLogLevel ERROR\n",
                    address(i),
                    d.join("host_key").display(),
                    d.join("authorized_keys").display()
                ),
            )
            .expect("sshd_config");
            let mut unshare = Command::new("unshare");
            default_signal_actions(&mut unshare)
                .args(["--pid", "--uts", "--fork", "--mount-proc", "--kill-child", "sh", "-c"])
                .arg(format!(
                    "mount --bind {} /etc/hosts && hostname {name} && exec /usr/sbin/sshd -D -e -f {}",
                    d.join("hosts").display(),
                    sshd_config.display()
                ))
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            namespaces.push(unshare.spawn().expect("unshare (util-linux) is needed"));
        }
        let hosts = Hosts {
            dir,
            names,
            namespaces,
        };
        // Each sshd answers, or the test says why not.
        for name in &hosts.names {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let (ok, said) = hosts.ssh(name, "hostname");
                if ok && said.trim() == name {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the sshd of {name} does not answer: {said}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        hosts
    }

    fn ssh_path(&self) -> PathBuf {
        self.dir.file("ssh")
    }

    /// Runs `command` on `host`: whether it succeeded, and what it printed.
    fn ssh(&self, host: &str, command: &str) -> (bool, String) {
        let mut ssh = Command::new(self.ssh_path());
        ssh.args([host, command]);
        let run = real_mpich::run(ssh, LIMIT);
        let out = String::from_utf8_lossy(&run.stdout).into_owned();
        (
            run.status.is_some_and(|s| s.success()),
            format!("{out}{}", run.stderr),
        )
    }

    /// A rank's state letter and tracer, read in its namespace.
    fn rank_state(&self, host: &str, pid: i32) -> (String, String) {
        let (ok, status) = self.ssh(host, &format!("cat /proc/{pid}/status"));
        assert!(ok, "pid {pid} on {host}: {status}");
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default()
        };
        (field("State:"), field("TracerPid:"))
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for unshare in &mut self.namespaces {
            // unshare ignores SIGTERM while it waits; SIGKILL takes the namespace with it.
            let _ = unshare.kill();
            let _ = unshare.wait();
        }
    }
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write a script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The real MPICH's `scenarios` started by hydra over the hosts' ssh, `n` ranks spread
/// over `hosts` in turn, with every rank's READY line in.
fn hydra_job(hosts: &Hosts, scenario: &str, n: i32) -> Job {
    let m = mpich(Device::Ch3);
    let mut command = Command::new(m.mpiexec());
    command
        .arg("-launcher")
        .arg("ssh")
        .arg("-launcher-exec")
        .arg(hosts.ssh_path())
        .args(["-hosts", &hosts.names.join(","), "-n", &n.to_string()])
        .arg(&m.program)
        .args(["--scenario", scenario]);
    let mut job = Job::start(
        command,
        format!("mpiexec -launcher ssh -hosts ... -n {n} scenarios --scenario {scenario}"),
        n,
    );
    job.wait_ready(0);
    job
}

/// Ends a job whose pids belong to other namespaces: mpiexec only (hydra ends its proxies
/// and ranks); never a signal to those pids from here, where they name other processes.
fn end(mut job: Job) {
    job.ready.clear();
    job.terminate();
}

fn run_mqd(args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    default_signal_actions(&mut command).args(args);
    let run = real_mpich::run(command, LIMIT);
    eprintln!("{}: {:?} in {:.2?}", run.what, run.status, run.elapsed);
    (
        run.status.and_then(|s| s.code()),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        run.stderr,
    )
}

/// Every rank runs on, untraced, as its own host sees it.
fn assert_left_running(hosts: &Hosts, job: &Job, on: &[String]) {
    for (r, ready) in job.ready.iter().enumerate() {
        let (state, tracer) = hosts.rank_state(&on[r], ready.pid);
        assert!(
            state.starts_with('R') || state.starts_with('S'),
            "rank {r}: {state}"
        );
        assert_eq!(tracer, "0", "rank {r}");
    }
}

/// Where hydra put each rank, as each host's own processes say: the `scenarios`
/// processes of its namespace and their `PMI_RANK` (pids alone repeat across namespaces).
fn placement(hosts: &Hosts, job: &Job) -> Vec<String> {
    let mut on = vec![String::new(); job.ready.len()];
    for h in &hosts.names {
        let (_, said) = hosts.ssh(
            h,
            "for p in $(pgrep -x scenarios); do tr '\\0' '\\n' < /proc/$p/environ | grep '^PMI_RANK='; done",
        );
        for line in said.lines() {
            if let Some(rank) = line
                .strip_prefix("PMI_RANK=")
                .and_then(|r| r.parse::<usize>().ok())
                && rank < on.len()
            {
                on[rank] = h.clone();
            }
        }
    }
    for (r, h) in on.iter().enumerate() {
        assert!(!h.is_empty(), "rank {r} runs on no host");
    }
    on
}

#[test]
fn a_job_across_hosts_is_dumped_through_its_own_launcher() {
    let hosts = Hosts::start("multi-host", 10, 2);
    let job = hydra_job(&hosts, "ring", 4);
    std::thread::sleep(Duration::from_millis(500));
    let on = placement(&hosts, &job);
    let starter = job.starter.to_string();
    let ours = mqd_library_host::library::bundled_library()
        .expect("libmqd_mpich.so is built with the tests");
    let ours = ours.to_str().expect("UTF-8");

    // What a user types, no options: through the job's own mpiexec (it names its
    // launcher), our library, stacks, one snapshot cut across both hosts.
    let (code, text, err) = run_mqd(&["job", &starter]);
    assert_eq!(code, Some(8), "{text}\n{err}");
    assert!(
        text.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "{text}"
    );
    assert!(text.contains("MPI_Ssend"), "{text}");
    let (code, out, err) = run_mqd(&["job", &starter, "--json"]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert_eq!(code, Some(8), "{err}");
    assert_eq!(doc["diagnosis"]["verdict"], "deadlock");
    assert_eq!(doc["snapshot"], "one", "{doc:#}");
    for (r, rank) in doc["ranks"].as_array().expect("ranks").iter().enumerate() {
        assert_eq!(rank["error"], Value::Null, "rank {r}: {rank}");
        assert_eq!(rank["host"], on[r].as_str(), "rank {r}");
        assert_eq!(rank["pid"], job.ready[r].pid, "rank {r}");
        let ring = rank["communicators"]
            .as_array()
            .expect("communicators")
            .iter()
            .find(|c| c["name"] == "ring")
            .expect("the ring communicator");
        assert_eq!(ring["local_rank"], r, "rank {r}");
    }

    // Through ssh itself (--rsh), with the library the job names and the stacks.
    let ssh = hosts.ssh_path();
    let (code, text, err) = run_mqd(&[
        "job",
        &starter,
        "--rsh",
        ssh.to_str().expect("UTF-8"),
        "--dll",
        ours,
        "--stacks",
    ]);
    assert_eq!(code, Some(8), "{text}\n{err}");
    let mut by_host: Vec<(String, Vec<usize>)> = Vec::new();
    for (r, h) in on.iter().enumerate() {
        match by_host.iter_mut().find(|(name, _)| name == h) {
            Some((_, ranks)) => ranks.push(r),
            None => by_host.push((h.clone(), vec![r])),
        }
    }
    let listed: Vec<String> = by_host
        .iter()
        .map(|(h, ranks)| {
            let ranks: Vec<String> = ranks.iter().map(usize::to_string).collect();
            format!("{h} ({})", ranks.join(","))
        })
        .collect();
    assert!(
        text.contains(&format!("Ranks on 2 hosts: {}.\n", listed.join(", "))),
        "{text}"
    );
    assert!(
        text.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "{text}"
    );
    assert!(text.contains("PMPI_Ssend"), "{text}");

    // Every rank runs on, untraced, and no agent is left on any host.
    assert_left_running(&hosts, &job, &on);
    for h in &hosts.names {
        let (found, said) = hosts.ssh(h, "pgrep -af '[m]qd agent'");
        assert!(!found, "an agent is left on {h}: {said}");
    }
    end(job);
}

#[test]
fn a_host_whose_sshd_is_gone_is_reported_and_the_others_dumped() {
    let hosts = Hosts::start("multi-host-unreachable", 20, 2);
    let job = hydra_job(&hosts, "ring", 4);
    let on = placement(&hosts, &job);
    // An ssh that finds h2 where no sshd listens: the host is unreachable.
    let broken = hosts.dir.file("broken-ssh");
    let config = std::fs::read_to_string(hosts.dir.file("ssh_config"))
        .expect("ssh_config")
        .replace("HostName 127.0.0.22", "HostName 127.0.0.99");
    std::fs::write(hosts.dir.file("broken_config"), config).expect("config");
    write_script(
        &broken,
        &format!(
            "exec ssh -F {} \"$@\"",
            hosts.dir.file("broken_config").display()
        ),
    );
    let ours = mqd_library_host::library::bundled_library().expect("libmqd_mpich.so");
    let (code, out, err) = run_mqd(&[
        "job",
        &job.starter.to_string(),
        "--rsh",
        broken.to_str().expect("UTF-8"),
        "--dll",
        ours.to_str().expect("UTF-8"),
        "--json",
    ]);
    assert_eq!(code, Some(9), "undetermined: {out}\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["diagnosis"]["verdict"], "undetermined");
    for (r, rank) in doc["ranks"].as_array().expect("ranks").iter().enumerate() {
        if on[r] == "h2" {
            let error = rank["error"].as_str().expect("h2's ranks are not dumped");
            assert!(
                error.starts_with("on host h2 (through broken-ssh): no agent answered (broken-ssh: exit status 255): ssh: connect to host 127.0.0.99 port 22: Connection refused"),
                "{error}"
            );
        } else {
            assert_eq!(rank["error"], Value::Null, "rank {r}");
        }
    }
    assert_left_running(&hosts, &job, &on);
    end(job);
}

/// `mqd run` across hosts: with the hang recorder, each sample reads the ranks' records
/// on h1 and h2 through `mqd agent --counters` there while they run; without it, the
/// ranks are dumped through agents at each sample and their blocked calls counted by
/// the agent on each host (a counter lives in the process that opened it). Either way a
/// deadlock there is declared a hang by the rule, not by `--timeout`, and held there to
/// prove what no snapshot does; the job is ended on every host, and no agent stays.
#[test]
fn mqd_run_declares_a_hang_across_hosts_through_agents_that_keep_its_counters() {
    let hosts = Hosts::start("multi-host-run", 30, 2);
    let m = mpich(Device::Ch3);
    let program = hosts.dir.file("watchdog-ch3");
    support::build_watchdog(&m.prefix.join("bin/mpicc"), &program);
    let report = hosts.dir.file("report");
    let mqd_run_with = |flags: &[&str], job: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
        default_signal_actions(&mut command)
            .args(["run", "--hang-after", "5s", "--interval", "1s", "--report"])
            .arg(&report)
            .args(flags)
            .arg("--")
            .arg(m.mpiexec())
            .args(["-launcher", "ssh", "-launcher-exec"])
            .arg(hosts.ssh_path())
            .args(["-hosts", &hosts.names.join(","), "-n", "4"])
            .arg(&program)
            .args(job);
        real_mpich::run(command, LIMIT)
    };
    let mqd_run = |job: &[&str]| mqd_run_with(&[], job);
    let left = |what: &str| {
        for h in &hosts.names {
            let (found, said) = hosts.ssh(h, "pgrep -af '[w]atchdog-ch3|[m]qd agent'");
            assert!(!found, "{what}: left on {h}: {said}");
        }
    };

    let run = mqd_run(&["late_deadlock", "2"]);
    let code = run.status.and_then(|s| s.code());
    assert_eq!(code, Some(8), "{}", run.stderr);
    assert!(
        run.stderr.contains("no rank made progress for"),
        "the hang rule, not --timeout: {}",
        run.stderr
    );
    assert!(run.stderr.contains("Verdict: deadlock"), "{}", run.stderr);
    // Recorded (mqd run's default): every sample read the records on each host by the
    // agent there while the ranks ran; the job was stopped for the report only.
    assert!(
        run.stderr
            .contains("the job is watched through its ranks' records, read while they run"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("each holding the job"),
        "no sample stopped the job: {}",
        run.stderr
    );
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json")).expect("report.json"),
    )
    .expect("JSON");
    let mut on: Vec<&str> = doc["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| r["host"].as_str().expect("a host"))
        .collect();
    on.sort_unstable();
    on.dedup();
    assert_eq!(on, ["h1", "h2"], "{doc:#}");
    left("after a hang");

    // A ring of MPI_Recv across the hosts, without the hang recorder: no snapshot
    // proves it, the hold does, its counters and measurements taken on each host by the
    // agents there.
    let run = mqd_run_with(&["--no-record"], &["late_recv_ring", "2"]);
    assert_eq!(run.status.and_then(|s| s.code()), Some(8), "{}", run.stderr);
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json")).expect("report.json"),
    )
    .expect("JSON");
    let hold = &doc["diagnosis"]["hold"];
    assert_eq!(hold["proven"], "0-3", "{hold:#}");
    assert!(
        doc["diagnosis"]["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["kind"] == "held")),
        "{doc:#}"
    );
    left("after a held hang");

    // The same ring recorded (mqd run's default): each rank's message counts, read on
    // its host by the agent there, prove it from the one snapshot, no hold needed.
    let run = mqd_run(&["late_recv_ring", "2"]);
    assert_eq!(run.status.and_then(|s| s.code()), Some(8), "{}", run.stderr);
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json")).expect("report.json"),
    )
    .expect("JSON");
    assert!(doc["diagnosis"]["hold"].is_null(), "{:#}", doc["diagnosis"]);
    let counted = doc["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .filter(|r| r["traffic"]["sends_complete"] == true)
        .count();
    assert_eq!(counted, 4, "every rank's counts, from both hosts: {doc:#}");
    left("after a counted hang");

    // A rank computing on h1 while the others wait in a barrier is no hang: its CPU
    // time and stack, read on h1, are progress; the job ends by itself.
    let run = mqd_run(&["compute", "12"]);
    let code = run.status.and_then(|s| s.code());
    assert_eq!(code, Some(0), "{}", run.stderr);
    assert!(
        !run.stderr.contains("no rank made progress"),
        "{}",
        run.stderr
    );
    left("after the job ended");
}
