//! `mqd` SIGKILLed at any point of a dump, from before it attaches to after it lets the
//! ranks go, leaves every rank and the starter running and untraced: the kernel detaches
//! a dead tracer's tracees, and mqd never stops a process any other way. The job starts
//! here and is killed at the end, also when the test fails.

use mqd_fixtures::{self as fixtures, JobOptions};
use mqd_synthetic::Layout;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every process runs or sleeps, untraced, within 5 s; the ones that do not.
fn settled(pids: &[i32]) -> Vec<(i32, Option<(char, i32)>)> {
    fixtures::unsettled(pids, Duration::from_secs(5))
}

/// Longest one `mqd job` of the job may take: a net against a hang, not a measure.
const LIMIT: Duration = Duration::from_secs(600);

/// Runs `command` to its end within [`LIMIT`]: its exit and its output.
fn finished(mut command: Command) -> (std::process::ExitStatus, Vec<u8>) {
    let mut child = command.stdout(Stdio::piped()).spawn().expect("run mqd");
    let out = fixtures::real_mpich::read_all(child.stdout.take().expect("piped"));
    let status = fixtures::real_mpich::wait_child(&mut child, LIMIT)
        .unwrap_or_else(|| panic!("mqd job did not end within {LIMIT:?}"));
    (status, out.join().expect("its output"))
}

fn mqd_job(starter: i32) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command
        .args(["job", "--json", &starter.to_string()])
        .env("MQD_CACHE_DIR", "")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

#[test]
fn mqd_killed_at_any_point_leaves_every_rank_running_and_untraced() {
    // 2 ranks of 100,000 posted receives each: the displays take most of a run.
    let job = fixtures::spawn_job(&JobOptions::new(2, Layout::Ch3, "big")).expect("start a job");
    let mut pids = job.rank_pids().to_vec();
    pids.push(job.starter_pid());
    let started = Instant::now();
    let (whole, _) = finished(mqd_job(job.starter_pid()));
    let run = started.elapsed();
    // What the schedule below is made of, for a run that overruns the runner's limit.
    eprintln!("a whole run of mqd job took {run:?}");
    assert!(
        whole.code().is_some(),
        "a whole run ended by a signal: {whole}"
    );
    assert!(settled(&pids).is_empty());
    // Kills early (while attaching), spread over the run (displays), and late (letting
    // the ranks go).
    let mut delays: Vec<Duration> = [0, 1, 2, 4, 8, 16, 32]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    delays.extend((1..=8).map(|i| run * i / 8));
    delays.extend([
        run.saturating_sub(Duration::from_millis(5)),
        run + Duration::from_millis(5),
    ]);
    for delay in delays {
        let mut mqd = mqd_job(job.starter_pid()).spawn().expect("start mqd");
        std::thread::sleep(delay);
        let _ = mqd.kill();
        let _ = mqd.wait();
        let stuck = settled(&pids);
        assert!(
            stuck.is_empty(),
            "mqd killed after {delay:?} (a whole run takes {run:?}) left these stopped or traced \
             (pid, state, tracer): {stuck:?}"
        );
    }
    // Still the same job, whole: the next mqd dumps every rank.
    let (_, after) = finished(mqd_job(job.starter_pid()));
    let doc: serde_json::Value = serde_json::from_slice(&after).expect("JSON");
    let ranks = doc["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2);
    assert!(ranks.iter().all(|r| r["error"].is_null()), "{ranks:?}");
}
