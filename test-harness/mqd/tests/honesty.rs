//! Verdicts a user can trust: each confident wrong answer `mqd` once gave, reproduced on
//! fixture jobs (real processes) or synthetic ones, with the answer it gives now; and the
//! command-line conventions around them (exit codes, signals, numbers, pipes).

mod support;

use mqd_fixtures::{self as fixtures, JobOptions, default_signal_actions, spawn_job, spawn_rank};
use mqd_model::{Certainty, FindingKind, MqsError, Queue, Verdict};
use mqd_synthetic::{Layout, RequestSpec};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::*;

fn mqd_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(args);
    default_signal_actions(&mut cmd);
    cmd
}

fn mqd(args: &[&str]) -> Output {
    mqd_command(args)
        .stdin(Stdio::null())
        .output()
        .expect("run mqd")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(out), stderr(out)))
}

/// Waits for `child` at most `limit`; kills it past that.
fn wait_for(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mqd did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process is gone (or a zombie nobody waits for yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// Its tracer, from `/proc/PID/status` (0: none).
fn tracer(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn verdict_code(v: Verdict) -> Option<i32> {
    Some(i32::from(mqd::verdict_exit_code(v)))
}

// ------------------------------------------------------------------ wrong answers

/// 1. A proctable entry on another host named a local process by its pid: it was
///    attached and diagnosed as if it were that rank.
#[test]
fn a_rank_on_another_host_is_reported_not_attached() {
    let mut options = JobOptions::new(2, Layout::Debugq5, "compute");
    let whole = spawn_job(&options).expect("start the job");
    let out = mqd(&["job", &whole.starter_pid().to_string()]);
    assert_eq!(
        out.status.code(),
        verdict_code(Verdict::NoDeadlock),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).ends_with("Verdict: no deadlock (every rank seen, every wait followed).\n")
    );
    drop(whole);

    options.remote_host = Some("node99".into());
    let job = spawn_job(&options).expect("start the job");
    let remote_pid = job.rank_pids()[1];
    // Asked to stay on this host, mqd says where the rank is and how to reach it.
    let out = mqd(&[
        "job",
        "--local-only",
        "--json",
        &job.starter_pid().to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        verdict_code(Verdict::Undetermined),
        "{}",
        stderr(&out)
    );
    let doc = json(&out);
    let rank1 = &doc["ranks"][1];
    assert_eq!(rank1["rank"], 1);
    assert_eq!(rank1["pid"], remote_pid);
    assert_eq!(rank1["host"], "node99");
    let error = rank1["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("on host node99, not this one"), "{error}");
    assert_eq!(doc["diagnosis"]["verdict"], "undetermined");
    assert_eq!(
        doc["diagnosis"]["doubts"][0]["doubt"]["failed"]["ranks"],
        "1"
    );
    // Never attached.
    assert_eq!(tracer(remote_pid), Some(0));
    let text = stdout(&mqd(&[
        "job",
        "--local-only",
        &job.starter_pid().to_string(),
    ]));
    assert!(!text.contains("No point-to-point deadlock"), "{text}");
    assert!(
        text.ends_with("Verdict: undetermined: rank 1 not dumped (see above).\n"),
        "{text}"
    );
    // By default an agent is started there; a host that cannot be reached is a rank not
    // dumped, never a local process taken for it.
    let out = mqd(&[
        "job",
        "--rsh",
        "false",
        "--json",
        &job.starter_pid().to_string(),
    ]);
    assert_eq!(out.status.code(), verdict_code(Verdict::Undetermined));
    let error = json(&out)["ranks"][1]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.starts_with(
            "on host node99 (through false): no agent answered (false: exit status 1)"
        ),
        "{error}"
    );
    assert_eq!(tracer(remote_pid), Some(0));
}

/// 2. A rank whose queues cannot be read was called idle ("busy computing").
#[test]
fn a_rank_whose_queues_cannot_be_read_is_not_idle() {
    let mut specs: Vec<_> = (0..2).map(|r| base(Layout::Debugq5, 2, r)).collect();
    specs[0].posted = vec![RequestSpec::recv(0, 1, 4, 0x7000_0000, 1)];
    let mut job = job(&specs);
    let gone = MqsError {
        code: 102,
        text: "target memory could not be read".into(),
        message: None,
    };
    if let Ok(comms) = &mut job.ranks[1].outcome {
        for c in comms {
            c.pending_receives = Queue::Error(gone.clone());
        }
    }
    let d = diagnose(&job);
    let text = d.to_text();
    assert!(
        d.of_kind(FindingKind::IdleTarget).next().is_none(),
        "{text}"
    );
    assert!(
        d.of_kind(FindingKind::UnreadableQueues).next().is_some(),
        "{text}"
    );
    assert!(
        text.contains(
            "rank 1 could not be dumped (its queues could not all be read), yet rank 0 waits for it"
        ),
        "{text}"
    );
    assert_eq!(d.verdict, Verdict::Undetermined);
    assert!(
        text.ends_with("Verdict: undetermined: queues of rank 1 could not all be read; ranks 0,1 have no stack: any of them may be blocked in a call their queues do not show (a collective, a blocking receive); stacks are taken unless --no-stacks.\n"),
        "{text}"
    );
}

/// 3. `mqd watch` dropped ranks it could not dump and said "no deadlock".
#[test]
fn a_rank_killed_during_a_watch_leaves_it_undetermined() {
    let job = spawn_job(&JobOptions::new(2, Layout::Debugq5, "compute")).expect("start");
    let pids: Vec<String> = job.rank_pids().iter().map(i32::to_string).collect();
    let mut args = vec!["watch", "--json", "--samples", "3", "--interval", "2"];
    args.extend(pids.iter().map(String::as_str));
    let mut watch = mqd_command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mqd watch");
    // After the first sample, rank 1 dies.
    std::thread::sleep(Duration::from_secs(1));
    fixtures::send_signal(job.rank_pids()[1], "KILL").expect("kill rank 1");
    let status = wait_for(&mut watch, Duration::from_secs(60));
    let out = watch.wait_with_output().expect("output");
    assert_eq!(
        status.code(),
        verdict_code(Verdict::Undetermined),
        "{}",
        stderr(&out)
    );
    let doc = json(&out);
    assert_eq!(doc["persistent"]["verdict"], "undetermined");
    // Given by pid, the dead process has no rank: rank 1 of the job is missing.
    assert_eq!(
        doc["persistent"]["doubts"][0]["doubt"]["missing"]["ranks"],
        "1"
    );
}

/// 3. Ctrl-C during a watch threw away every sample taken.
#[test]
fn ctrl_c_during_a_watch_reports_the_samples_taken() {
    let job = spawn_job(&JobOptions::new(2, Layout::Debugq5, "compute")).expect("start");
    let pids: Vec<String> = job.rank_pids().iter().map(i32::to_string).collect();
    let mut args = vec!["watch", "--samples", "1000", "--interval", "0.2"];
    args.extend(pids.iter().map(String::as_str));
    let mut watch = mqd_command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mqd watch");
    // Its first sample under way (mqd, or its helper, traces the ranks), then samples
    // for 1.5 s more.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while tracer(job.rank_pids()[0]).is_none_or(|t| t == 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "mqd watch did not take a sample in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(1500));
    fixtures::send_signal(watch.id() as i32, "INT").expect("interrupt mqd");
    let status = wait_for(&mut watch, Duration::from_secs(30));
    let out = watch.wait_with_output().expect("output");
    let text = stdout(&out);
    assert_eq!(
        status.code(),
        verdict_code(Verdict::NoDeadlock),
        "{text}{}",
        stderr(&out)
    );
    let taken: usize = text
        .strip_prefix("Across the ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((1..1000).contains(&taken), "{text}");
    assert!(stderr(&out).contains(&format!("watch stopped after {taken} of 1000 samples")));
    for &pid in job.rank_pids() {
        assert_eq!(tracer(pid), Some(0), "rank pid {pid} left traced");
    }
}

/// 4. "No point-to-point deadlock" for a job of which one rank was dumped.
#[test]
fn one_rank_of_a_job_is_not_the_job() {
    let rank = spawn_rank(fixtures::DEBUGQ5, "compute", 0, 4).expect("start a rank");
    let out = mqd(&["dump", &rank.pid().to_string()]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        verdict_code(Verdict::Undetermined),
        "{text}"
    );
    assert!(!text.contains("no point-to-point deadlock"), "{text}");
    assert!(
        text.ends_with("Verdict: undetermined: ranks 1-3 of the job not in the dump.\n"),
        "{text}"
    );
}

/// 5. 100,000 pre-posted receives were "Deadlock: ranks 0 -> 0"; the text listed them
///    all.
#[test]
fn pre_posted_receives_are_at_most_a_possible_deadlock_in_bounded_output() {
    let job = spawn_job(&JobOptions::new(2, Layout::Debugq5, "big")).expect("start");
    let starter = job.starter_pid().to_string();
    // The stacks show both ranks computing: they hold nobody, whatever they posted.
    let out = mqd(&["job", &starter]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        verdict_code(Verdict::NoDeadlock),
        "{text}{}",
        stderr(&out)
    );
    assert!(!text.contains("Deadlock"), "{text}");
    assert!(text.lines().count() < 200, "{} lines", text.lines().count());
    // The queues alone: at most possible, in bounded words.
    let out = mqd(&["job", "--no-stacks", &starter]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        verdict_code(Verdict::Undetermined),
        "{}",
        stderr(&out)
    );
    assert!(!text.contains("\nDeadlock"), "{text}");
    assert!(text.contains("Possible deadlock"), "{text}");
    assert!(!text.contains("each blocked in"), "{text}");
    assert!(text.lines().count() < 200, "{} lines", text.lines().count());
    assert!(
        text.lines().all(|l| l.len() < 1200),
        "a line too long in\n{text}"
    );
    assert!(
        text.contains("; in all 100000 receives (tags 0-99999)"),
        "{text}"
    );
    // The graph bundles parallel arrows: a few, whatever the queues hold.
    let dot = stdout(&mqd(&["job", "--no-stacks", "-f", "dot", &starter]));
    assert!(dot.len() < 8192, "{} bytes of DOT:\n{dot}", dot.len());
    assert!(dot.contains("\u{d7}"), "{dot}");
    // JSON stays proportional to the dump: the operations and a few lines of words
    // per finding.
    let out = mqd(&["job", "--no-stacks", "--json", &starter]);
    let operations = 2 * fixtures::BIG_COUNT;
    let bytes = out.stdout.len();
    assert!(
        bytes < 1200 * operations,
        "{bytes} bytes for {operations} operations"
    );
    let doc = json(&out);
    let diagnosis = serde_json::to_string(&doc["diagnosis"]).unwrap().len();
    assert!(diagnosis < 600 * operations, "diagnosis: {diagnosis} bytes");
    for f in doc["diagnosis"]["findings"].as_array().unwrap() {
        assert_ne!(f["certainty"], "definite", "{}", f["text"]);
        assert!(
            f["evidence"].as_array().unwrap().len() <= 32,
            "{}",
            f["text"]
        );
    }
}

/// 5. Many ranks each waiting for themselves were one finding each.
#[test]
fn self_receives_of_many_ranks_are_one_possible_finding() {
    let specs: Vec<_> = (0..64)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 64, r);
            spec.posted = vec![RequestSpec::recv(0, r, 1, 0x7000_0000, 1)];
            spec
        })
        .collect();
    let d = diagnose(&job(&specs));
    assert_eq!(kinds(&d), [FindingKind::DeadlockCycle], "{}", d.to_text());
    let f = &d.findings[0];
    assert_eq!(f.certainty, Certainty::Possible);
    assert_eq!(f.ranks.to_string(), "0-63");
    assert!(
        f.text.starts_with("Possible deadlock: ranks 0-63 each have a receive from themselves pending on \"MPI_COMM_WORLD\", tag 1"),
        "{}",
        f.text
    );
}

/// Noise: overlapping cycles among 4 ranks were 5 cycles and a knot.
#[test]
fn overlapping_cycles_are_one_finding() {
    let specs: Vec<_> = (0..4)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 4, r);
            spec.posted = (0..4)
                .filter(|&p| p != r)
                .map(|p| RequestSpec::recv(0, p, 1, 0x7000_0000, 1))
                .collect();
            spec
        })
        .collect();
    let d = diagnose(&job(&specs));
    let text = d.to_text();
    assert_eq!(kinds(&d), [FindingKind::DeadlockKnot], "{text}");
    assert_eq!(
        d.findings[0].text,
        "Possible deadlock (knot): ranks 0-3 wait only for each other, so none could proceed if their pending operations are blocking calls (a queue cannot tell MPI_Recv from MPI_Irecv): ranks 0-3 each wait for all the others (a receive on \"MPI_COMM_WORLD\", tag 1)."
    );
}

/// 6. The same pid twice blamed "another debugger"; pids of two jobs made one job.
#[test]
fn the_same_pid_twice_and_two_jobs_are_told_apart() {
    let rank = spawn_rank(fixtures::DEBUGQ5, "compute", 0, 1).expect("start a rank");
    let pid = rank.pid().to_string();
    let out = mqd(&["dump", "--json", &pid, &pid]);
    assert_eq!(
        out.status.code(),
        verdict_code(Verdict::NoDeadlock),
        "{}",
        stderr(&out)
    );
    let doc = json(&out);
    let errors: Vec<&str> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["error"].as_str())
        .collect();
    assert_eq!(errors.len(), 1, "{doc:#}");
    assert!(errors[0].contains("is listed twice"), "{errors:?}");
    assert!(!errors[0].contains("debugger"), "{errors:?}");

    let two = spawn_job(&JobOptions::new(2, Layout::Debugq5, "compute")).expect("start");
    let three = spawn_job(&JobOptions::new(3, Layout::Debugq5, "compute")).expect("start");
    let pids: Vec<String> = two
        .rank_pids()
        .iter()
        .chain(three.rank_pids())
        .map(i32::to_string)
        .collect();
    let mut args = vec!["dump", "--json"];
    args.extend(pids.iter().map(String::as_str));
    let out = mqd(&args);
    assert_eq!(out.status.code(), verdict_code(Verdict::Undetermined));
    let doc = json(&out);
    let odd: Vec<&Value> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["error"]
                .as_str()
                .is_some_and(|e| e.contains("a job of 2 ranks, not of 3"))
        })
        .collect();
    assert_eq!(odd.len(), 2, "{doc:#}");
}

/// 6. `mqd core --exe WRONG` printed garbage and "no deadlock".
#[test]
fn a_core_with_the_wrong_executable_is_refused() {
    let scratch = Scratch::new("honesty-core");
    let dir = scratch.path().to_owned();
    let rank = spawn_rank(fixtures::DEBUGQ5, "ring", 0, 1).expect("start a rank");
    let core = dir.join("core");
    let gcore = Command::new("gcore")
        .arg("-o")
        .arg(&core)
        .arg(rank.pid().to_string())
        .output()
        .expect("run gcore");
    assert!(
        gcore.status.success(),
        "{}",
        String::from_utf8_lossy(&gcore.stderr)
    );
    let core = dir.join(format!("core.{}", rank.pid()));
    let wrong = fixtures::fixture(fixtures::CH3);
    let out = mqd(&[
        "core",
        "--exe",
        wrong.to_str().unwrap(),
        core.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(
        mqd::verdict_of_exit_code(out.status.code()).is_none() && stdout(&out).is_empty(),
        "{}\n{err}",
        stdout(&out)
    );
    assert!(err.contains("it is not the program the core ran"), "{err}");
    // The same core twice: dumped once.
    let c = core.to_str().unwrap();
    let out = mqd(&["core", "--json", c, c]);
    let doc = json(&out);
    let twice = doc["ranks"].as_array().unwrap();
    assert_eq!(twice.len(), 2);
    assert!(
        twice[1]["duplicate"] == true
            && twice[1]["error"].as_str().unwrap().contains("given twice")
    );
    assert_eq!(
        doc["diagnosis"]["doubts"].as_array().unwrap().len(),
        1,
        "{:#}",
        doc["diagnosis"]
    );
}

/// 7. Intercommunicator peers were worded relative to the rank ("from itself").
#[test]
fn intercommunicator_peers_are_named_by_rank() {
    let job = spawn_job(&JobOptions::new(4, Layout::Ch3, "comms")).expect("start");
    let text = stdout(&mqd(&[
        "job",
        "--limit",
        "0",
        &job.starter_pid().to_string(),
    ]));
    // What each rank set says of "inter", up to the next communicator.
    let inter: Vec<&str> = text
        .split("\"inter\" ")
        .skip(1)
        .map(|rest| rest.split("; \"").next().unwrap_or(rest))
        .collect();
    assert!(!inter.is_empty(), "{text}");
    for part in inter {
        assert!(part.contains("rank "), "{part}");
        assert!(
            !part.contains("itself")
                && !part.contains("neighbour")
                && !part.contains("the other rank"),
            "{part}"
        );
    }
}

/// 7. Collapsed graphs said "recv to left".
#[test]
fn collapsed_graphs_say_receive_from() {
    let specs: Vec<_> = (0..40)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 40, r);
            spec.posted = vec![RequestSpec::recv(0, (r + 39) % 40, 1, 0x7000_0000, 1)];
            spec
        })
        .collect();
    let job = job(&specs);
    let d = mqd_analysis::diagnose(&job);
    let dot = mqd::render::dot::to_dot(&job, &d, &Default::default());
    assert!(dot.contains("recv from left"), "{dot}");
    assert!(!dot.contains("recv to"), "{dot}");
}

// ------------------------------------------------------------------ the command

#[test]
fn exit_codes_tell_the_three_verdicts_apart() {
    assert_eq!(mqd::verdict_exit_code(Verdict::NoDeadlock), 0);
    assert_eq!(mqd::verdict_exit_code(Verdict::Deadlock), 8);
    assert_eq!(mqd::verdict_exit_code(Verdict::Undetermined), 9);
    // The demo deadlocks, proven; a closed pipe ends it quietly with the same code.
    let mut demo = mqd_command(&["demo"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mqd demo");
    drop(demo.stdout.take());
    let status = wait_for(&mut demo, Duration::from_secs(60));
    let out = demo.wait_with_output().expect("output");
    assert_eq!(status.code(), Some(8), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn bad_numbers_and_options_are_usage_errors() {
    for args in [
        &["launch", "--delay", "nan", "--", "true"][..],
        &["launch", "--delay", "-1", "--", "true"],
        &["launch", "--delay", "inf", "--", "true"],
        &["watch", "--interval", "nan", "1"],
        &["watch", "--samples", "0", "1"],
        &["watch", "--samples", "18446744073709551615", "1"],
        &["watch", "--format", "dot", "1"],
        &["watch", "--svg", "x.svg", "1"],
        &["watch", "--png", "x.png", "1"],
        &["watch", "--stacks", "--no-stacks", "1"],
        &["watch", "--ranks", "0", "1"],
        &["watch", "--tag", "3", "1"],
        &["watch", "--limit", "5", "1"],
        &["dump", "--depth", "3", "--no-stacks", "1"],
        &["watch"],
        &["watch", "--job", "1", "2"],
        &["dump", "--json", "--format", "dot", "1"],
        &["dump", "abc"],
        &["dump", "0"],
        &["dump"],
        &["attach"],
    ] {
        let out = mqd(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}");
        assert!(
            stderr(&out).starts_with("error: "),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn help_describes_the_tool_in_one_voice() {
    let short = stdout(&mqd(&["-h"]));
    let long = stdout(&mqd(&["--help"]));
    // The same first sentence (clap drops the final full stop of the short one).
    let first = |text: &str| {
        text.lines()
            .next()
            .unwrap_or_default()
            .trim_end_matches('.')
            .to_owned()
    };
    assert_eq!(first(&short), first(&long));
    assert!(
        first(&short).starts_with("Why does my MPI job hang?"),
        "{short}"
    );
    assert!(
        long.contains("dump    ") && long.contains("[alias: attach]"),
        "{long}"
    );
    // Each command in one line that scans; its detail in `mqd help COMMAND`.
    let listed: Vec<&str> = long
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(listed.len() >= 8, "{long}");
    for line in &listed {
        assert!(line.len() <= 100, "not one short line: {line:?}");
    }
    for command in ["demo", "job", "dump", "watch", "launch", "core", "run"] {
        let help = stdout(&mqd(&["help", command]));
        let summary = listed
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(command))
            .unwrap_or_else(|| panic!("{command} not listed: {long}"))
            .trim()
            .trim_end_matches(" [alias: attach]");
        assert!(help.starts_with(summary), "{command}: {help}");
        assert!(help.lines().count() > 8, "{command}'s detail: {help}");
        assert!(
            !help.to_lowercase().contains("fixture"),
            "{command}: {help}"
        );
    }
}

#[test]
fn short_options_write_where_asked() {
    let rank = spawn_rank(fixtures::DEBUGQ5, "compute", 0, 1).expect("start a rank");
    let file = std::env::temp_dir().join(format!("mqd-honesty-{}.json", std::process::id()));
    let out = mqd(&[
        "attach",
        "-p",
        &rank.pid().to_string(),
        "-f",
        "json",
        "-o",
        file.to_str().unwrap(),
    ]);
    let written = std::fs::read(&file);
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let doc: Value = serde_json::from_slice(&written.expect("the file")).expect("JSON");
    assert_eq!(doc["ranks"][0]["pid"], rank.pid());
}

#[test]
fn the_text_names_the_library_and_the_abort() {
    let starter = fixtures::fixture(fixtures::STARTER);
    let out = mqd(&[
        "launch",
        "--delay",
        "0.5",
        "--",
        starter.to_str().unwrap(),
        "-n",
        "2",
        "--abort",
        "--",
        "compute",
    ]);
    let text = stdout(&out);
    assert!(
        text.starts_with("Queues read by mqd message queue support for MPICH"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "The job is aborting (MPI_Abort): {}",
            fixtures::ABORT_MESSAGE
        )),
        "{text}\n{}",
        stderr(&out)
    );
}

#[test]
fn a_library_missing_on_this_host_falls_back_to_ours() {
    let mut cmd = Command::new(fixtures::fixture(fixtures::DEBUGQ5));
    cmd.args(["--scenario", "compute", "--rank", "0", "--size", "1"])
        .env("MQD_FIXTURE_DLL_NAME", "/nonexistent/lib/libtvmpich.so");
    let mut rank = fixtures::spawn_command(cmd).expect("start a rank");
    rank.wait_ready(Duration::from_secs(30)).expect("ready");
    // MPICH's job: read with ours, whatever it names.
    let out = mqd(&["dump", &rank.pid().to_string()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("Note: the job names the message queue library /nonexistent/lib/libtvmpich.so (MPIR_dll_name); mqd reads MPICH jobs with its own, which lists what MPICH's misses (--dll job for the job's)."),
        "{text}"
    );
    // The job's own, asked for, is not on this host: ours, and why.
    let out = mqd(&["dump", "--dll", "job", &rank.pid().to_string()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("Note: the job names the message queue library /nonexistent/lib/libtvmpich.so (MPIR_dll_name), which is not on this host: read with the one that goes with mqd instead."),
        "{text}"
    );
}

/// Launch and demo: a stop request ends the job they started (or, with `--keep`, says
/// where it goes on).
#[test]
fn a_stopped_launch_ends_its_job() {
    let starter = fixtures::fixture(fixtures::STARTER);
    for keep in [false, true] {
        let mut args = vec!["launch", "--delay", "60"];
        if keep {
            args.push("--keep");
        }
        args.extend(["--", starter.to_str().unwrap(), "-n", "2", "--", "compute"]);
        let mut launch = mqd_command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mqd launch");
        // The job's output comes through mqd's stderr: each rank's READY with its pid.
        let (tx, lines) = mpsc::channel();
        let err = launch.stderr.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut pids: Vec<i32> = Vec::new();
        let mut ready = 0;
        let mut log = Vec::new();
        while ready < 2 {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no READY from the job: {log:#?}"));
            // "READY <pid>" from each rank (their pids also come in the starter's PIDS
            // line, but the ranks share the stream and a line may come spliced).
            if let Some(pid) = line
                .strip_prefix("READY ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|p| p.parse::<i32>().ok())
                .filter(|&p| p > 1)
            {
                pids.push(pid);
                ready += 1;
            }
            log.push(line);
        }
        fixtures::send_signal(launch.id() as i32, "TERM").expect("stop mqd");
        let status = wait_for(&mut launch, Duration::from_secs(30));
        assert_eq!(status.code(), Some(128 + 15), "keep {keep}: {log:#?}");
        // What mqd said last may still be on its way through the reader thread (the pipe
        // stays open while ranks that inherited it live): read up to its note.
        let note = if keep {
            "mqd: the job goes on: its starter is pid "
        } else {
            "the job it started is ended"
        };
        let mut said: Vec<String> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !said.iter().any(|l| l.contains(note)) {
            match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => said.push(line),
                Err(_) => break,
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pids.iter().all(|&p| gone(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if keep {
            let line = said
                .iter()
                .find(|l| l.starts_with(note))
                .unwrap_or_else(|| panic!("{said:#?}"));
            let starter: i32 = line.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(
                pids.iter().all(|&p| !gone(p)),
                "the job was ended: {said:#?}"
            );
            fixtures::send_signal(starter, "TERM").expect("end the kept job");
            let deadline = Instant::now() + Duration::from_secs(10);
            while !pids.iter().all(|&p| gone(p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        } else {
            assert!(said.iter().any(|l| l.contains(note)), "{said:#?}");
        }
        assert!(
            pids.iter().all(|&p| gone(p)),
            "keep {keep}: ranks {pids:?} left running"
        );
    }
}
