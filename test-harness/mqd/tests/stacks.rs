//! Stacks of live ranks: unwound from their registers, named from their objects' symbols
//! (and separate debug files), merged across ranks, and the same as gdb's.

mod support;

use mqd_fixtures::{JobOptions, default_signal_actions, spawn_job};
use mqd_synthetic::Layout;
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use support::{Scratch, gdb_stacks, normal};

fn run(program: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

/// Whether a line of the merged stacks is `function` of the program with its source
/// line: `main (fixture.c:88)`.
fn at_a_line(line: &str, function: &str) -> bool {
    let line = line.split_once(": ").map_or(line, |(_, f)| f);
    line.strip_prefix(function)
        .and_then(|rest| rest.strip_prefix(" ("))
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|at| at.rsplit_once(':'))
        .is_some_and(|(file, n)| file.ends_with(".c") && n.parse::<u32>().is_ok_and(|n| n > 0))
}

fn mqd(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_mqd"), args)
}

/// gcore of every pid into `dir`: the cores' paths, in the pids' order.
fn gcore_all(pids: &[i32], dir: &std::path::Path) -> Vec<String> {
    support::gcores(pids, dir, "stacks")
        .iter()
        .map(|c| c.display().to_string())
        .collect()
}

#[test]
fn stacks_merge_across_ranks_and_agree_with_gdb() {
    let job = spawn_job(&JobOptions::new(4, Layout::Ch3, "ssend-ring")).expect("start the job");
    let starter = job.starter_pid().to_string();

    // Merged: one tree for the four ranks, each blocked in the runtime's wait.
    let out = mqd(&["job", "--stacks", &starter]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(8), "{text}");
    let tree = text
        .split("Stacks (the main thread of each rank, outermost frame first):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no stacks in\n{text}"));
    let tree: Vec<&str> = tree.lines().take_while(|l| !l.is_empty()).collect();
    assert!(tree[0].starts_with("ranks 0-3: "), "{tree:#?}");
    // The program's own frames with their source lines.
    assert!(
        tree.iter().any(|l| at_a_line(l, "main")),
        "main with its file and line: {tree:#?}"
    );
    // The tree ends at the MPI call the program made.
    assert_eq!(
        tree.last().map(|l| normal(l)),
        Some("MPI_Ssend".into()),
        "{tree:#?}"
    );

    // In the JSON, every thread of every rank, compared with gdb's backtrace.
    let doc: Value = serde_json::from_slice(&mqd(&["job", "--json", "--stacks", &starter]).stdout)
        .expect("JSON");
    for (r, &pid) in job.rank_pids().iter().enumerate() {
        let threads = doc["ranks"][r]["threads"].as_array().expect("threads");
        assert_eq!(threads.len(), 1, "rank {r}: {threads:#?}");
        assert_eq!(threads[0]["tid"], pid);
        assert_eq!(threads[0]["truncated"], Value::Null, "rank {r}");
        let ours: Vec<String> = threads[0]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| normal(f["function"].as_str().unwrap_or("??")))
            .collect();
        let upto_main = ours.iter().position(|n| n == "main").expect("main") + 1;
        let gdb = gdb_stacks(pid);
        assert_eq!(gdb.len(), 1, "rank {r}: gdb sees {gdb:?}");
        assert_eq!(gdb[0].0, pid);
        let gdb: Vec<String> = gdb[0].1.iter().map(|n| normal(n)).collect();
        assert_eq!(
            ours[..upto_main],
            gdb[..],
            "rank {r} (pid {pid}): ours, gdb's"
        );
        // Below main, the C runtime down to _start.
        assert_eq!(ours.last().map(String::as_str), Some("start"), "{ours:?}");
    }

    // From gcore's cores: the same stacks, from the registers the cores recorded.
    let dir = Scratch::new("stacks");
    let cores = gcore_all(job.rank_pids(), dir.path());
    let mut args = vec!["core", "--json", "--stacks"];
    args.extend(cores.iter().map(String::as_str));
    let from_cores: Value = serde_json::from_slice(&mqd(&args).stdout).expect("JSON");
    let names = |doc: &Value, r: usize| -> Vec<String> {
        doc["ranks"][r]["threads"][0]["frames"]
            .as_array()
            .unwrap_or_else(|| panic!("rank {r}: {:#}", doc["ranks"][r]))
            .iter()
            .map(|f| f["function"].as_str().unwrap_or("??").to_owned())
            .collect()
    };
    for r in 0..4 {
        assert_eq!(
            names(&from_cores, r),
            names(&doc, r),
            "rank {r}: core, live"
        );
    }
}

/// What the stacks add to the verdict, live and from gcore's cores: a receive ring a stack
/// proves, pre-posted receives of ranks that compute, a collective waiting for a rank
/// that computes.
#[test]
fn stacks_decide_what_queues_cannot() {
    let dir = Scratch::new("stack-verdicts");
    // Without stacks nothing is decided (9); a receive ring is a deadlock unless a
    // message is on its way, which one snapshot cannot tell.
    for (scenario, without, with, words) in [
        (
            "recv-ring",
            9,
            9,
            "Possible deadlock: ranks 0 -> 3 -> 2 -> 1 -> 0 each blocked in MPI_Recv from its left neighbour on \"MPI_COMM_WORLD\", tag 7; none of them has a send pending. Deadlocked unless a message is already on its way",
        ),
        (
            "preposted",
            9,
            0,
            "No deadlock: 8 operations are pending, but the stacks show ranks 0-3 running (not blocked in MPI): they can still complete them.",
        ),
        (
            "finalize",
            9,
            9,
            "rank 3 is in or past MPI_Finalize, yet ranks 0-2 wait for messages from it: unless those messages are already on their way, the waits never end.",
        ),
        (
            "allreduce",
            9,
            0,
            "ranks 0-2 are in MPI_Allreduce on \"MPI_COMM_WORLD\"; rank 3 is not in MPI (in solve at scenario.c:",
        ),
    ] {
        let job = spawn_job(&JobOptions::new(4, Layout::Ch3, scenario)).expect("start the job");
        let starter = job.starter_pid().to_string();
        let queues = mqd(&["job", "--no-stacks", &starter]);
        assert_eq!(
            queues.status.code(),
            Some(without),
            "{scenario}: queues only"
        );
        let out = mqd(&["job", "--stacks", &starter]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(with), "{scenario}:\n{text}");
        assert!(text.contains(words), "{scenario}:\n{text}");
        // The same from cores.
        let sub = dir.path().join(scenario);
        std::fs::create_dir_all(&sub).unwrap();
        let cores = gcore_all(job.rank_pids(), &sub);
        // Cores of the four ranks, taken one by one: not one snapshot, so never "no
        // deadlock"; with --one-snapshot (nothing moves in these ranks) the same answer.
        let mut args = vec!["core", "--one-snapshot"];
        args.extend(cores.iter().map(String::as_str));
        let out = mqd(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(with), "{scenario}, cores:\n{text}");
        assert!(text.contains(words), "{scenario}, cores:\n{text}");
    }
}

/// A process with no message queues (no MPI debugger support) still has its stacks, and
/// the output says why its queues are missing.
#[test]
fn a_process_without_queues_still_has_stacks() {
    let mut rank =
        mqd_fixtures::spawn_command(Command::new(mqd_fixtures::fixture(mqd_fixtures::PLAIN)))
            .expect("start the plain program");
    rank.wait_ready(std::time::Duration::from_secs(30))
        .expect("ready");
    let pid = rank.pid().to_string();
    // Without stacks there is nothing to show: an error.
    assert_eq!(mqd(&["dump", "--no-stacks", &pid]).status.code(), Some(5));
    let out = mqd(&["dump", "--stacks", &pid]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(9), "{text}");
    assert!(
        text.contains(&format!("pid {pid} (rank unknown), thread {pid}:\n")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| at_a_line(l.trim(), "main")),
        "main with its file and line: {text}"
    );
    assert!(text.contains("is not an MPI process"), "{text}");
}

/// The tree stops at the MPI call the program made, unless asked for MPI's insides.
#[test]
fn the_tree_ends_at_the_mpi_call_unless_asked() {
    let job = spawn_job(&JobOptions::new(4, Layout::Ch3, "recv-ring")).expect("start the job");
    let starter = job.starter_pid().to_string();
    let tree = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["job", "--stacks"];
        args.extend(extra);
        args.push(&starter);
        let text = String::from_utf8_lossy(&mqd(&args).stdout).into_owned();
        text.split("outermost frame first):\n")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .take_while(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let short = tree(&[]);
    assert_eq!(
        short.last().map(String::as_str),
        Some("MPI_Recv"),
        "{short:#?}"
    );
    let long = tree(&["--mpi-internals"]);
    assert_eq!(long.len(), short.len() + 1, "{long:#?}");
    assert_eq!(normal(long.last().unwrap()), "sigsuspend", "{long:#?}");
    let shallow = tree(&["--depth", "2"]);
    assert_eq!(shallow.len(), 2, "{shallow:#?}");
    // The same tree in JSON: one chain from _start to MPI_Recv, for ranks 0-3.
    let doc: Value = serde_json::from_slice(&mqd(&["job", "--json", "--stacks", &starter]).stdout)
        .expect("JSON");
    let mut node = &doc["stacks"][0];
    let mut chain = Vec::new();
    loop {
        assert_eq!(node["ranks"], "0-3", "{node:#}");
        chain.push(node["frame"].as_str().unwrap().to_owned());
        match node["children"].as_array().map(Vec::as_slice) {
            Some([only]) => node = only,
            Some([]) => break,
            _ => panic!("a branch in {doc:#}"),
        }
    }
    let text: Vec<&str> = short
        .iter()
        .map(|l| l.strip_prefix("ranks 0-3: ").unwrap_or(l))
        .collect();
    assert_eq!(chain, text, "JSON and text trees");
    // And as Graphviz DOT: a node per frame, a chain of arrows.
    let dot = String::from_utf8_lossy(&mqd(&["job", "-f", "dot", "--stacks", &starter]).stdout)
        .into_owned();
    assert!(dot.starts_with("digraph stacks {"), "{dot}");
    assert!(dot.contains("[label=\"MPI_Recv\\nranks 0-3\"]"), "{dot}");
    assert_eq!(dot.matches(" -> ").count(), chain.len() - 1, "{dot}");
}

/// Every thread of every rank, worker threads included, frame by frame as gdb sees it.
#[test]
fn every_thread_agrees_with_gdb() {
    let job = spawn_job(&JobOptions::new(2, Layout::Ch3, "threads")).expect("start the job");
    let starter = job.starter_pid().to_string();
    let doc: Value = serde_json::from_slice(&mqd(&["job", "--json", "--stacks", &starter]).stdout)
        .expect("JSON");
    for (r, &pid) in job.rank_pids().iter().enumerate() {
        let ours = doc["ranks"][r]["threads"].as_array().expect("threads");
        let gdb = gdb_stacks(pid);
        assert_eq!(ours.len(), 4, "rank {r}: {ours:#?}");
        assert_eq!(gdb.len(), 4, "rank {r}: {gdb:#?}");
        for thread in ours {
            let tid = thread["tid"].as_i64().unwrap() as i32;
            let names: Vec<String> = thread["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| normal(f["function"].as_str().unwrap_or("??")))
                .collect();
            let (_, theirs) = gdb
                .iter()
                .find(|(lwp, _)| *lwp == tid)
                .unwrap_or_else(|| panic!("rank {r}: gdb has no thread {tid}: {gdb:#?}"));
            let theirs: Vec<String> = theirs.iter().map(|n| normal(n)).collect();
            assert!(
                names.len() >= theirs.len(),
                "rank {r}, thread {tid}: {names:?} {theirs:?}"
            );
            assert_eq!(
                names[..theirs.len()],
                theirs[..],
                "rank {r}, thread {tid}: ours, gdb's"
            );
        }
    }
    // Merged with --all-threads: the workers once for both ranks, counted.
    let text =
        String::from_utf8_lossy(&mqd(&["job", "--stacks", "--all-threads", &starter]).stdout)
            .into_owned();
    assert!(text.contains("ranks 0,1: clone3 (6 threads)"), "{text}");
    assert!(
        text.lines().any(|l| l
            .trim()
            .strip_suffix(" (6 threads)")
            .is_some_and(|f| at_a_line(f, "worker"))),
        "{text}"
    );
}
