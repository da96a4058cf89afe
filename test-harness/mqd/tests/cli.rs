//! The `mqd` command on real processes: job acquisition through MPIR and MPI2DD,
//! `mqd job` on a running starter, and the errors users meet. Every test starts
//! the processes it needs and kills them when done.

use mqd_fixtures::{self as fixtures, JobOptions};
use mqd_synthetic::Layout;
use serde_json::Value;
use std::process::{Command, Output};

fn mqd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mqd"))
        .args(args)
        .output()
        .expect("run mqd")
}

fn json(out: &Output) -> Value {
    assert!(
        mqd::verdict_of_exit_code(out.status.code()).is_some(),
        "mqd failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Every rank of a 4-rank ring: its send to the right neighbour and the
/// unexpected message from its left, with COMM_WORLD ranks.
fn assert_ring(doc: &Value, size: i64) {
    let ranks = doc["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len() as i64, size, "{doc:#}");
    for (i, r) in ranks.iter().enumerate() {
        let rank = i as i64;
        assert_eq!(r["rank"], rank);
        assert!(r["error"].is_null(), "rank {rank}: {}", r["error"]);
        let ring = r["communicators"]
            .as_array()
            .expect("communicators")
            .iter()
            .find(|c| c["name"] == "ring")
            .unwrap_or_else(|| panic!("rank {rank} has no \"ring\": {r:#}"));
        assert_eq!(ring["size"], size);
        assert_eq!(ring["local_rank"], rank);
        let sends = ring["pending_sends"]["operations"]
            .as_array()
            .expect("sends");
        assert_eq!(sends.len(), 1, "rank {rank}: {sends:?}");
        assert_eq!(sends[0]["desired_local_rank"], (rank + 1) % size);
        assert_eq!(sends[0]["desired_tag"], 5);
        let unexpected = ring["unexpected_messages"]["operations"]
            .as_array()
            .expect("unexpected");
        assert_eq!(unexpected.len(), 1, "rank {rank}: {unexpected:?}");
        assert_eq!(
            unexpected[0]["desired_local_rank"],
            (rank + size - 1) % size
        );
        assert_eq!(unexpected[0]["desired_tag"], 5);
    }
}

#[test]
fn launch_acquires_a_job_through_mpir_in_every_layout() {
    let starter = fixtures::fixture(fixtures::STARTER);
    for layout in [Layout::Ch3, Layout::Ch4Am, Layout::Debugq4, Layout::Debugq5] {
        let out = mqd(&[
            "launch",
            "--json",
            "--delay",
            "1",
            "--",
            starter.to_str().unwrap(),
            "-n",
            "4",
            "--layout",
            fixtures::layout_arg(layout),
            "ring",
        ]);
        let doc = json(&out);
        assert_eq!(doc["schema"], "mqd/3");
        assert_eq!(doc["acquired_by"], "mpir", "{}", layout.name());
        assert_ring(&doc, 4);
        // Global ranks through the groups wherever the layout keeps them.
        if layout != Layout::Debugq4 {
            for (i, r) in doc["ranks"].as_array().unwrap().iter().enumerate() {
                let ring = r["communicators"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["name"] == "ring")
                    .unwrap();
                assert_eq!(
                    ring["pending_sends"]["operations"][0]["desired_global_rank"],
                    ((i + 1) % 4) as i64
                );
            }
        }
    }
}

#[test]
fn launch_acquires_a_job_through_mpi2dd() {
    let starter = fixtures::fixture(fixtures::STARTER_MPI2DD);
    let out = mqd(&[
        "launch",
        "--json",
        "--delay",
        "1",
        "--",
        starter.to_str().unwrap(),
        "-n",
        "4",
        "--layout",
        "debugq5",
        "ring",
    ]);
    let doc = json(&out);
    assert_eq!(doc["acquired_by"], "mpi2dd");
    assert_ring(&doc, 4);
}

#[test]
fn job_dumps_a_running_starter_and_leaves_it_running() {
    let mut options = JobOptions::new(4, Layout::Ch3, "ring");
    options.mpi2dd = false;
    let job = fixtures::spawn_job(&options).expect("start the fixture job");
    // Running (R or S) or stopped (T): what attach and detach must preserve.
    let running = |pid: i32| state(pid).map(|s| matches!(s, 'R' | 'S'));
    let before: Vec<Option<bool>> = job.rank_pids().iter().map(|&p| running(p)).collect();
    let out = mqd(&["job", "--json", &job.starter_pid().to_string()]);
    let doc = json(&out);
    assert_eq!(doc["starter_pid"], job.starter_pid());
    assert_ring(&doc, 4);
    let pids: Vec<i64> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(
        pids,
        job.rank_pids()
            .iter()
            .map(|&p| i64::from(p))
            .collect::<Vec<_>>()
    );
    let after: Vec<Option<bool>> = job.rank_pids().iter().map(|&p| running(p)).collect();
    assert_eq!(before, after, "attach and detach changed the ranks' states");
    assert!(after.iter().all(|&r| r == Some(true)), "{after:?}");
    assert_eq!(
        state(job.starter_pid()).map(|s| s == 'S' || s == 'R'),
        Some(true)
    );
}

#[test]
fn text_view_and_demo_show_the_deadlock() {
    let out = mqd(&["demo"]);
    assert!(
        mqd::verdict_of_exit_code(out.status.code()) == Some(mqd_model::Verdict::Deadlock),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "{text}"
    );
    // Blocking MPI_Ssends: unlisted at their senders, synchronous at their destinations.
    for rank in 0..4 {
        assert!(
            text.contains(&format!(
                "rank {} holds an unexpected message from rank {rank} on \"ring\", tag 5",
                (rank + 1) % 4
            )),
            "{text}"
        );
    }
    assert!(
        text.ends_with("Verdict: deadlock (ranks 0-3 proven blocked).\n"),
        "{text}"
    );
}

fn assert_failure(out: &Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line of cause: {stderr}");
    assert!(
        stderr.starts_with("mqd: ") && stderr.contains(needle),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn errors_say_what_is_wrong_and_leave_the_target_running() {
    assert_failure(&mqd(&["dump", "999999999"]), 3, "no such process");

    let mut plain =
        fixtures::spawn_command(Command::new(fixtures::fixture(fixtures::PLAIN))).expect("plain");
    plain
        .wait_ready(std::time::Duration::from_secs(30))
        .expect("READY");
    let pid = plain.pid().to_string();
    // Without stacks there is nothing to show but why; with them, where it is.
    assert_failure(
        &mqd(&["dump", "--no-stacks", &pid]),
        5,
        "is not an MPI process",
    );
    assert!(plain.is_running());

    let mut stripped = fixtures::spawn_command({
        let mut c = Command::new(fixtures::fixture(fixtures::STRIPPED_DEBUG));
        c.args(["--scenario", "ring"]);
        c
    })
    .expect("stripped");
    stripped
        .wait_ready(std::time::Duration::from_secs(30))
        .expect("READY");
    let pid = stripped.pid().to_string();
    assert_failure(
        &mqd(&["dump", "--no-stacks", &pid]),
        6,
        "--enable-debuginfo",
    );
    assert_failure(
        &mqd(&[
            "dump",
            "--dll",
            "/nonexistent/libtvmpich.so",
            "--no-stacks",
            &pid,
        ]),
        7,
        "no such MQD library",
    );
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("libm is installed");
    assert_failure(
        &mqd(&["dump", "--dll", libm, "--no-stacks", &pid]),
        7,
        "not an MQD library",
    );
    assert!(stripped.is_running());
    assert!(matches!(state(stripped.pid()), Some('S' | 'R')));
}

#[test]
fn a_failed_write_is_an_error_not_a_silent_success() {
    let mut rank = fixtures::spawn_rank(fixtures::DEBUGQ5, "ring", 0, 1).expect("rank");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    for json in [true, false] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
        cmd.arg("dump");
        if json {
            cmd.arg("--json");
        }
        let out = cmd
            .arg(rank.pid().to_string())
            .stdout(full.try_clone().unwrap())
            .output()
            .expect("run mqd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "json {json}: {stderr}");
        assert!(
            stderr.starts_with("mqd: cannot write the dump") && stderr.lines().count() == 1,
            "{stderr}"
        );
    }
    assert!(rank.is_running());
}

/// A 64-rank job: every rank dumped (attached in parallel), aggregated into one rank
/// set, and the 64-rank cycle diagnosed.
#[test]
fn a_64_rank_job_is_dumped_aggregated_and_diagnosed() {
    let job =
        fixtures::spawn_job(&JobOptions::new(64, Layout::Debugq5, "ring")).expect("start 64 ranks");
    let started = std::time::Instant::now();
    let out = mqd(&["job", "--json", &job.starter_pid().to_string()]);
    eprintln!("mqd job on 64 ranks: {:?}", started.elapsed());
    let doc = json(&out);
    assert_ring(&doc, 64);
    let groups = doc["aggregated"]["groups"]
        .as_array()
        .expect("aggregated view");
    assert_eq!(groups.len(), 1, "{groups:#?}");
    assert_eq!(groups[0]["ranks"], "0-63");
    let findings = doc["diagnosis"]["findings"].as_array().expect("findings");
    let cycle = findings
        .iter()
        .find(|f| f["kind"] == "deadlock_cycle")
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!(cycle["ranks"], "0-63");
    assert_eq!(cycle["rank_list"].as_array().unwrap().len(), 64);
    let text = mqd(&["job", &job.starter_pid().to_string()]);
    let text = String::from_utf8_lossy(&text.stdout);
    let (header, listing) = text.split_once("\n\n").unwrap_or_default();
    assert!(
        header.starts_with("Queues read by mqd message queue support for MPICH")
            && header.ends_with(": MPICH 5.x debug queues."),
        "{text}"
    );
    assert!(
        listing.starts_with("ranks 0-63: \"ring\" send to right neighbour tag 5"),
        "{text}"
    );
    // Listed MPI_Issends: a possible deadlock, so undetermined (exit 9).
    assert_eq!(out.status.code(), Some(9));
    assert_eq!(doc["diagnosis"]["verdict"], "undetermined");
}

/// `mqd job NAME`: the one process of this host running a program of that name is the
/// starter; none, or several, is an error that lists them and asks for a pid.
#[test]
fn a_starter_by_name() {
    struct Killed(Vec<std::process::Child>, std::path::PathBuf);
    impl Drop for Killed {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let name = format!("mqd-starter-by-name-{}", std::process::id());
    let dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join(&name);
    std::os::unix::fs::symlink("/bin/sleep", &program).unwrap();
    let start = || {
        let mut cmd = Command::new(&program);
        cmd.arg("60");
        fixtures::default_signal_actions(&mut cmd)
            .spawn()
            .expect("start a stand-in starter")
    };
    let mut processes = Killed(Vec::new(), dir.clone());
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let out = mqd(&["job", &name]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "no process of this host runs a program named \"{name}\""
        )),
        "{}",
        stderr(&out)
    );

    processes.0.push(start());
    let one = processes.0[0].id();
    // Found by name: then refused as no MPI starter, by its pid.
    let out = mqd(&["job", &name]);
    assert!(
        stderr(&out).contains(&format!("pid {one} "))
            && stderr(&out).contains("is not an MPI starter"),
        "{}",
        stderr(&out)
    );

    processes.0.push(start());
    let two = processes.0[1].id();
    let out = mqd(&["job", &name]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains(&format!("2 processes run a program named \"{name}\""))
            && text.contains(&format!("{one} ("))
            && text.contains(&format!("{two} ("))
            && text.contains("give the starter's pid"),
        "{text}"
    );
}
