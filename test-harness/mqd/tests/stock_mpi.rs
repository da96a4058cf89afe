//! MPIs without debugger support, as users have them: Debian's own MPICH (`mpich`,
//! `libmpich-dev`, 4.0.2, ch4, stripped, no `--enable-debuginfo`), which `scripts/test`
//! installs, and PyPI's `mpich` wheel (5.x), which the test puts in a virtual environment
//! under `~/.cache/mqd`. Their processes have no message queues; `mqd --stacks` still says
//! where each rank is (its rank from the launcher's environment) and what the stacks
//! prove, and says why the queues are missing: each scenario of the stacks issue, live
//! and from gcore's cores, in text and JSON.

mod support;

use mqd_fixtures::default_signal_actions;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn mqd(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(args).stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    cmd.output().expect("run mqd")
}

/// A job of Debian's MPICH, killed (with its ranks) on drop.
struct StockJob {
    mpiexec: Child,
    ranks: Vec<i32>,
    dir: std::path::PathBuf,
}

impl Drop for StockJob {
    fn drop(&mut self) {
        mqd_fixtures::real_mpich::end_launcher(&mut self.mpiexec, &self.ranks);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

use support::{StockMpi as Mpi, debian, pypi};

/// Builds the real-MPI scenarios with `mpi`'s compiler wrapper and runs `scenario` on `n`
/// ranks under its launcher, until every rank printed READY.
fn stock_job(mpi: &Mpi, scenario: &str, n: usize) -> StockJob {
    stock_job_with(mpi, scenario, n, &[])
}

/// The same, the program built with extra compiler flags (`-fopenmp`).
fn stock_job_with(mpi: &Mpi, scenario: &str, n: usize, cflags: &[&str]) -> StockJob {
    let dir = std::env::temp_dir().join(format!(
        "mqd-stock-{}-{scenario}-{}",
        mpi.slug,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("scenarios");
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/real-mpi/scenarios.c"
    );
    let cc = Command::new(&mpi.mpicc)
        .args(cflags)
        .args(["-g", "-O0", "-o"])
        .arg(&program)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("{}'s {}: {e}", mpi.name, mpi.mpicc.display()));
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let mut cmd = Command::new(&mpi.mpiexec);
    cmd.args(["-n", &n.to_string()])
        .arg(&program)
        .args(["--scenario", scenario])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    default_signal_actions(&mut cmd);
    let mut mpiexec = cmd.spawn().expect("start the launcher");
    let lines = mqd_fixtures::stock::output_lines(&mut mpiexec);
    let mut job = StockJob {
        mpiexec,
        ranks: vec![0; n],
        dir,
    };
    mqd_fixtures::stock::wait_ready(&lines, &mut job.ranks, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{scenario}: the job did not get ready: {e}"));
    // Let the blocked ranks reach their calls.
    std::thread::sleep(Duration::from_millis(500));
    job
}

#[test]
fn stacks_of_debians_mpich() {
    stacks_of_a_stock_mpi(&debian());
}

#[test]
fn stacks_of_pypis_mpich() {
    stacks_of_a_stock_mpi(&pypi());
}

fn stacks_of_a_stock_mpi(mpi: &Mpi) {
    let started = Instant::now();
    for scenario in &support::STACK_SCENARIOS {
        let what = format!("{}, {}", mpi.name, scenario.name);
        let job = stock_job(mpi, scenario.name, scenario.ranks);
        let pids: Vec<String> = job.ranks.iter().map(i32::to_string).collect();
        // Rank 1 of "finalize" ends its MPI's threads in MPI_Finalize: held then, it works.
        support::threads_settled(&job.ranks, std::time::Duration::from_millis(500));
        // Live, by pid.
        support::check_stack_scenario(&format!("{what}, live"), &scenario.stacks_only, |extra| {
            let mut args = vec!["dump", "--stacks"];
            args.extend(extra);
            args.extend(pids.iter().map(String::as_str));
            mqd(&args)
        });
        // By the launcher: Debian's mpiexec has no MPIR table, so its ranks are its
        // descendants with a launcher rank in their environment.
        let starter = job.mpiexec.id().to_string();
        support::check_stack_scenario(&format!("{what}, job"), &scenario.stacks_only, |extra| {
            let mut args = vec!["job", "--stacks"];
            args.extend(extra);
            args.push(&starter);
            mqd(&args)
        });
        if mpi.slug == "debian" {
            let out = mqd(&["job", "--json", "--stacks", &starter]);
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
            assert_eq!(doc["acquired_by"], "environment", "{what}: {doc:#}");
            assert_eq!(doc["job_size"], scenario.ranks, "{what}: {doc:#}");
        }
        // The ranks come from the launcher's environment, their queues are missing for a
        // reason the text gives.
        let out = mqd(&[
            &["dump", "--stacks"][..],
            &pids.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat());
        let text = String::from_utf8_lossy(&out.stdout);
        let all = if scenario.ranks == 2 {
            "0,1".to_owned()
        } else {
            format!("0-{}", scenario.ranks - 1)
        };
        assert!(
            text.contains(&format!("ranks {all}: _start")),
            "{what}:\n{text}"
        );
        assert!(
            text.contains(&format!(
                "ranks {all} have no message queues: its MPI keeps no message queues for debuggers"
            )),
            "{what}:\n{text}"
        );
        // The same from gcore's cores, their ranks from the environment in their memory.
        let scratch = support::Scratch::new(&format!("stock-{}-{}", mpi.slug, scenario.name));
        let cores: Vec<String> = support::gcores(&job.ranks, scratch.path(), &what)
            .iter()
            .map(|c| c.display().to_string())
            .collect();
        support::check_stack_scenario(
            &format!("{what}, cores"),
            &scenario.stacks_only_cores,
            |extra| {
                let mut args = vec!["core", "--one-snapshot"];
                args.extend(extra);
                args.extend(cores.iter().map(String::as_str));
                mqd(&args)
            },
        );
    }
    // One pid of a job that runs: the launcher's PMI_SIZE says a rank is missing, so no
    // "no deadlock".
    let job = stock_job(mpi, "preposted", 2);
    let out = mqd(&["dump", "--stacks", &job.ranks[0].to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(9), "{}: {text}", mpi.name);
    assert!(
        text.contains("Verdict: undetermined: rank 1 of the job not in the dump."),
        "{}: {text}",
        mpi.name
    );
    drop(job);
    // Without stacks there is nothing to say but why.
    let job = stock_job(mpi, "ring", 4);
    let mut args = vec!["dump".to_owned(), "--no-stacks".into()];
    args.extend(job.ranks.iter().map(i32::to_string));
    let out = mqd(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(5), "{}", mpi.name);
    assert!(String::from_utf8_lossy(&out.stderr).contains("keeps no message queues for debuggers"));
    eprintln!("{}: {:.2?}", mpi.name, started.elapsed());
}

/// A hybrid job: each rank's OpenMP workers wait at the parallel region's barrier while
/// its thread 0 is in MPI_Recv. With `--all-threads` the workers of both ranks are one
/// branch of the tree, counted ("6 threads"), under the runtime that runs them.
#[test]
fn openmp_workers_are_aggregated_across_ranks() {
    let mpi = debian();
    let job = stock_job_with(&mpi, "openmp", 2, &["-fopenmp"]);
    let mut args = vec!["dump".to_owned(), "--stacks".into(), "--all-threads".into()];
    args.extend(job.ranks.iter().map(i32::to_string));
    let out = mqd(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = String::from_utf8_lossy(&out.stdout);
    // The main threads receive from each other, the workers idle in libgomp (stripped:
    // its functions have no names) wait for them: the hold proves it.
    assert_eq!(out.status.code(), Some(8), "{text}");
    let tree = text
        .split("Stacks (every thread of each rank, outermost frame first):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no tree of every thread:\n{text}"));
    let tree: Vec<&str> = tree.lines().take_while(|l| !l.is_empty()).collect();
    // Thread 0 of each rank: in MPI_Recv inside the parallel region.
    let region = tree
        .iter()
        .position(|l| l.trim() == "GOMP_parallel")
        .unwrap_or_else(|| panic!("no parallel region: {tree:#?}"));
    assert!(
        tree[region..].iter().any(|l| l.trim() == "MPI_Recv"),
        "{tree:#?}"
    );
    // The 3 workers of each rank: one branch in libgomp, 6 threads.
    assert!(
        tree.iter()
            .any(|l| l.contains("libgomp") && l.contains("(6 threads)")),
        "the workers are not one branch of 6 threads: {tree:#?}"
    );
    // Only the main threads count for the diagnosis.
    assert!(
        text.contains("Deadlock: ranks 0 -> 1 -> 0 each blocked in MPI_Recv from the other rank"),
        "{text}"
    );
}
