use super::*;
use std::sync::mpsc;

/// The answers `serve_counters` gives to `requests`, one per line.
fn served(requests: &[Request]) -> Vec<Answer> {
    let mut input = String::new();
    for r in requests {
        input.push_str(&serde_json::to_string(r).unwrap());
        input.push('\n');
    }
    let mut out = Vec::new();
    serve_counters(input.as_bytes(), &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A thread of this process parked in `recv` until the sender is dropped.
fn parked() -> (i32, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tid_tx, tid_rx) = mpsc::channel();
    let (stop, wait) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        let _ = wait.recv();
    });
    (tid_rx.recv().unwrap(), stop, thread)
}

#[test]
fn an_agent_arms_counts_and_reads_cpu_time_and_refuses_stale_generations() {
    let (tid, stop, thread) = parked();
    let pid = std::process::id() as i32;
    // An address the parked thread never executes: its counter stays at zero.
    let never = parked as *const () as usize as u64;
    let answers = served(&[
        Request::Arm {
            points: vec![(tid, never), (-7, never)],
            pids: vec![pid],
        },
        Request::Counts { generation: 1 },
        Request::Arm {
            points: vec![],
            pids: vec![],
        },
        Request::Counts { generation: 1 },
        Request::Cpu {
            threads: vec![(pid, tid), (pid, -7)],
        },
    ]);
    drop(stop);
    thread.join().unwrap();
    let Answer::Hello(hello) = &answers[0] else {
        panic!("{answers:?}")
    };
    assert_eq!(hello.mqd, MQD_VERSION);
    let Answer::Armed {
        generation,
        refused,
    } = &answers[1]
    else {
        panic!("{answers:?}")
    };
    assert_eq!(*generation, 1);
    assert!(refused[1].as_deref().unwrap().contains("perf_event_open"));
    let Answer::Counts(readings) = &answers[2] else {
        panic!("{answers:?}")
    };
    match &refused[0] {
        // Where the kernel gives counters: the parked thread's is read, as zero.
        None => assert_eq!(readings.counts, &[Some(0), None]),
        Some(why) => assert!(why.contains("perf_event_open"), "{why}"),
    }
    // This process was measured: its threads' CPU time among what it did.
    let activity = readings.activity[0].as_ref().expect("measured");
    assert!(activity.cpu_ticks.contains_key(&tid), "{activity:?}");
    assert!(activity.touched_kb.is_some(), "{activity:?}");
    assert!(matches!(answers[3], Answer::Armed { generation: 2, .. }));
    let Answer::Failed { why } = &answers[4] else {
        panic!("{answers:?}")
    };
    assert!(why.contains("replaced"), "{why}");
    let Answer::Cpu { ticks } = &answers[5] else {
        panic!("{answers:?}")
    };
    assert!(ticks[0].is_some() && ticks[1].is_none(), "{ticks:?}");
}

#[test]
fn a_line_that_is_not_a_request_is_answered_and_the_agent_goes_on() {
    let mut out = Vec::new();
    serve_counters(&b"hello\n{\"cpu\":{\"threads\":[]}}\n"[..], &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].contains("not a request"), "{text}");
    assert_eq!(lines[2], r#"{"cpu":{"ticks":[]}}"#);
}

/// A launcher that runs the "remote" command here, through `sh -c`.
fn here() -> Launcher {
    Launcher::Rsh(vec![
        "sh".into(),
        "-c".into(),
        "exec sh -c \"$2\"".into(),
        "sh".into(),
    ])
}

#[test]
fn a_session_whose_agent_is_not_mqd_says_what_answered() {
    let options = RemoteOptions {
        launcher: here(),
        agent: Helper::new("echo", &["not-an-agent"]),
        fanout: 1,
        timeout: 5.0,
    };
    let counters = HostCounters::new(&options);
    let why = counters.cpu("h1", &[(1, 1)]).unwrap_err();
    assert!(
        why.contains("not an mqd agent") && why.contains("not-an-agent"),
        "{why}"
    );
    // Remembered, not started again at each request.
    let again = counters.cpu("h1", &[(1, 1)]).unwrap_err();
    assert_eq!(again, why);
}

#[test]
fn a_session_whose_agent_ends_says_so() {
    let options = RemoteOptions {
        launcher: here(),
        agent: Helper::new("true", &[]),
        fanout: 1,
        timeout: 5.0,
    };
    let why = HostCounters::new(&options).counts("h1", 1).unwrap_err();
    assert!(why.contains("ended without answering"), "{why}");
}

#[test]
fn a_session_whose_agent_is_silent_fails_within_its_timeout() {
    let options = RemoteOptions {
        launcher: here(),
        agent: Helper::new("sh", &["-c", "sleep 30", "sh"]),
        fanout: 1,
        timeout: 1.0,
    };
    let counters = HostCounters::new(&options);
    let start = Instant::now();
    let why = counters.arm("h1", &[(1, 1)], &[1]).unwrap_err();
    assert!(why.contains("no answer within 1 s"), "{why}");
    assert!(start.elapsed() < Duration::from_secs(10));
}
