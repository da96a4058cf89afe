//! A real Slurm: Debian's `slurm-wlm` and `munge`, started by the test on this machine as a
//! one-node cluster whose node is named `node1` (not this host's name, as on a cluster whose
//! front end is not a compute node). `srun -n 4 -O --mpi=pmi2` runs the real MPICH's ring;
//! `mqd job --slurm JOBID` finds the step's srun and dumps the ranks through an agent started
//! by `srun --overlap --jobid`, and so does `mqd job SRUN_PID`.
//!
//! Everything (munge key and socket, Slurm's configuration, state and logs) lives in a
//! scratch directory; teardown cancels the job and ends the daemons, also when a test fails.

mod support;

use mqd_fixtures::default_signal_actions;
use mqd_fixtures::real_mpich::{self, Device, Job, mpich};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::Scratch;

const LIMIT: Duration = Duration::from_secs(90);

/// munged, slurmctld and slurmd of a one-node cluster.
struct Cluster {
    dir: Scratch,
    daemons: Vec<Child>,
    /// One cluster on this machine at a time: they listen on the same ports. Dropped last.
    _one: mqd_fixtures::Exclusive,
}

/// The `mqd agent` processes Slurm started (their environment has a job id), with their
/// command lines: other tests of this machine may run agents of their own meanwhile.
fn slurm_agents() -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    support::processes(|pid| pid != me)
        .into_iter()
        .filter_map(|pid| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            (line.contains("mqd agent")
                && String::from_utf8_lossy(&environ).contains("SLURM_JOB_ID="))
            .then_some((pid, line))
        })
        .collect()
}

impl Cluster {
    fn start() -> Cluster {
        let one = mqd_fixtures::exclusive("slurm-cluster");
        let dir = Scratch::new("slurm");
        let d = dir.path().to_path_buf();
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(d.join(sub)).expect("directories");
        }
        let key = d.join("munge.key");
        let made = Command::new("mungekey")
            .args(["-c", "-k"])
            .arg(&key)
            .output()
            .expect("mungekey (munge) is needed");
        assert!(made.status.success(), "mungekey: {made:?}");
        std::os::unix::fs::PermissionsExt::set_mode(
            &mut std::fs::metadata(&key).expect("key").permissions(),
            0o600,
        );
        let host = mqd_job::identity::this_host().expect("a host name");
        let socket = d.join("munge.socket");
        std::fs::write(
            d.join("slurm.conf"),
            format!(
                "ClusterName=mqdtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n\
                 AuthType=auth/munge\nAuthInfo=socket={socket}\nCredType=cred/munge\n\
                 SlurmctldPort=16817\nSlurmdPort=16818\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
                 SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
                 SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
                 MpiDefault=none\nReturnToService=2\nSlurmdParameters=config_overrides\n\
                 NodeName=node1 NodeHostname={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
                 PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
                socket = socket.display(),
                d = d.display()
            ),
        )
        .expect("slurm.conf");
        let mut cluster = Cluster {
            dir,
            daemons: Vec::new(),
            _one: one,
        };
        let munged = cluster
            .command("munged")
            .args(["-F", "--force"])
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", d.join("munged.pid").display()))
            .arg(format!("--log-file={}", d.join("munged.log").display()))
            .arg(format!("--seed-file={}", d.join("munge.seed").display()))
            .spawn()
            .expect("munged");
        cluster.daemons.push(munged);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "munged did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let conf = cluster.conf();
        let ctld = cluster
            .command("slurmctld")
            .args(["-D", "-i", "-f"])
            .arg(&conf)
            .spawn()
            .expect("slurmctld (slurm-wlm) is needed");
        cluster.daemons.push(ctld);
        let slurmd = cluster
            .command("slurmd")
            .args(["-D", "-N", "node1", "-f"])
            .arg(&conf)
            .spawn()
            .expect("slurmd");
        cluster.daemons.push(slurmd);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = cluster
                .command("sinfo")
                .args(["-h", "-N", "-o", "%N %T"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .expect("sinfo");
            if String::from_utf8_lossy(&out.stdout).trim() == "node1 idle" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node1 does not become idle: sinfo says {:?} ({}, {})\nslurmctld: {}\nslurmd: {}",
                String::from_utf8_lossy(&out.stdout),
                out.status,
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(d.join("slurmctld.log")).unwrap_or_default(),
                std::fs::read_to_string(d.join("slurmd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    fn conf(&self) -> PathBuf {
        self.dir.file("slurm.conf")
    }

    /// A command that talks to this cluster, quiet unless asked.
    fn command(&self, program: impl AsRef<Path>) -> Command {
        let mut command = Command::new(program.as_ref());
        default_signal_actions(&mut command)
            .env("SLURM_CONF", self.conf())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    /// `srun -n N -O --mpi=pmi2 scenarios --scenario S`, every rank READY.
    fn srun(&self, scenario: &str, n: i32) -> Job {
        let m = mpich(Device::Ch3);
        let mut command = Command::new("srun");
        command
            .env("SLURM_CONF", self.conf())
            .args(["-n", &n.to_string(), "-O", "--mpi=pmi2"])
            .arg(&m.program)
            .args(["--scenario", scenario]);
        let mut job = Job::start(
            command,
            format!("srun -n {n} scenarios --scenario {scenario}"),
            n,
        );
        job.wait_ready(0);
        job
    }

    /// The running job's id.
    fn job_id(&self) -> String {
        let out = self
            .command("squeue")
            .args(["-h", "-t", "R", "-o", "%A"])
            .stdout(Stdio::piped())
            .output()
            .expect("squeue");
        let ids = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            !ids.is_empty() && !ids.contains('\n'),
            "running jobs: {ids:?}"
        );
        ids
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Every job ended (its steps' ranks with it), then the daemons.
        let _ = self
            .command("scancel")
            .args(["--full", "--partition=debug"])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let out = self
                .command("squeue")
                .args(["-h"])
                .stdout(Stdio::piped())
                .output();
            if out.is_ok_and(|o| o.stdout.is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for daemon in self.daemons.iter_mut().rev() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

fn run_mqd(cluster: &Cluster, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    default_signal_actions(&mut command)
        .env("SLURM_CONF", cluster.conf())
        .args(args);
    let run = real_mpich::run(command, LIMIT);
    eprintln!("{}: {:?} in {:.2?}", run.what, run.status, run.elapsed);
    let doc = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&run.stdout),
            run.stderr
        )
    });
    (run.status.and_then(|s| s.code()), doc, run.stderr)
}

#[test]
fn a_slurm_step_is_dumped_through_srun_overlap() {
    let cluster = Cluster::start();
    let mut job = cluster.srun("ring", 4);
    std::thread::sleep(Duration::from_millis(500));
    let id = cluster.job_id();
    let ours = mqd_library_host::library::bundled_library().expect("libmqd_mpich.so");
    let ours = ours.to_str().expect("UTF-8");
    let srun = job.starter.to_string();
    for by in [
        vec!["--slurm", id.as_str()],
        vec![srun.as_str(), "--launcher", "srun"],
    ] {
        let mut args = vec!["job"];
        args.extend(&by);
        args.extend(["--dll", ours, "--json"]);
        let (code, doc, err) = run_mqd(&cluster, &args);
        assert_eq!(code, Some(8), "{by:?}: {doc}\n{err}");
        assert_eq!(doc["diagnosis"]["verdict"], "deadlock");
        for (r, rank) in doc["ranks"].as_array().expect("ranks").iter().enumerate() {
            assert_eq!(rank["error"], Value::Null, "{by:?} rank {r}: {rank}");
            assert_eq!(rank["host"], "node1", "rank {r}");
            assert_eq!(rank["pid"], job.ready[r].pid, "rank {r}");
        }
    }
    // The ranks run on, untraced; no agent is left.
    for r in &job.ready {
        assert_eq!(real_mpich::tracer(r.pid), Some(0), "pid {}", r.pid);
        assert!(
            matches!(real_mpich::proc_state(r.pid), Some('S' | 'R')),
            "pid {}",
            r.pid
        );
    }
    let agents = slurm_agents();
    assert!(agents.is_empty(), "agents left: {agents:?}");
    // A job id Slurm does not know is an error that says so.
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    default_signal_actions(&mut command)
        .env("SLURM_CONF", cluster.conf())
        .args(["job", "--slurm", "999999"]);
    let run = real_mpich::run(command, LIMIT);
    assert_eq!(run.status.and_then(|s| s.code()), Some(3), "{}", run.stderr);
    assert!(
        run.stderr.contains("Slurm knows no job 999999"),
        "{}",
        run.stderr
    );
    job.terminate();
}

/// `mqd run -- srun ...` in a batch script (`sbatch`): the step's deadlock is reported
/// into the report directory and the step ended. The ranks run on node1 (not this host's
/// name), reached through agents where their calls cannot be counted: the report comes
/// from `--timeout`.
#[test]
fn mqd_run_in_a_batch_script_writes_its_report() {
    let cluster = Cluster::start();
    let m = mpich(Device::Ch3);
    let program = cluster.dir.file("watchdog");
    support::build_watchdog(&m.prefix.join("bin/mpicc"), &program);
    let report = cluster.dir.file("report");
    let status = cluster.dir.file("mqd-status");
    let script = cluster.dir.file("job.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n\
             {mqd} run --hang-after 5s --interval 1s --timeout 60s --report {report} -- \
             srun -n 4 -O --mpi=pmi2 {program} late_deadlock 2\n\
             echo $? > {status}\n",
            mqd = env!("CARGO_BIN_EXE_mqd"),
            report = report.display(),
            program = program.display(),
            status = status.display(),
        ),
    )
    .expect("batch script");
    let submitted = cluster
        .command("sbatch")
        .args(["-n", "4", "-O", "-o"])
        .arg(cluster.dir.file("job.out"))
        .arg(&script)
        .stdout(Stdio::piped())
        .output()
        .expect("sbatch");
    assert!(submitted.status.success(), "sbatch: {submitted:?}");
    let deadline = Instant::now() + LIMIT;
    while !status.exists() {
        assert!(
            Instant::now() < deadline,
            "the batch job did not finish: {}",
            std::fs::read_to_string(cluster.dir.file("job.out")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = std::fs::read_to_string(cluster.dir.file("job.out")).unwrap_or_default();
    assert_eq!(
        std::fs::read_to_string(&status).unwrap_or_default().trim(),
        "8",
        "{out}"
    );
    for file in ["report.txt", "report.json", "stacks.txt", "junit.xml"] {
        assert!(report.join(file).is_file(), "{file} missing: {out}");
    }
    let doc: Value =
        serde_json::from_slice(&std::fs::read(report.join("report.json")).expect("report.json"))
            .expect("JSON");
    assert_eq!(doc["diagnosis"]["verdict"], "deadlock", "{out}");
    let text = std::fs::read_to_string(report.join("report.txt")).unwrap_or_default();
    // The ranks are on Slurm's node1, reached through `srun --overlap`: the hang rule
    // counts their calls there, before the --timeout.
    assert!(text.contains("no rank made progress for"), "{text}");
    let junit = std::fs::read_to_string(report.join("junit.xml")).unwrap_or_default();
    assert!(junit.contains("name=\"MPI job hung\""), "{junit}");
}
