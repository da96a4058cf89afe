//! The recorder under a real MPI (Debian's MPICH, started by its `mpiexec`): every C
//! binding of the standard is exported, a job runs as it does without it, and a hung
//! job's ranks each show, in their own memory, the call they are blocked in and its
//! envelope.

use mqd_recording::{ThreadRecord, decode_header, decode_threads};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `libmqd_recorder.so`, built beside this test.
fn recorder() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let lib = dir.join("libmqd_recorder.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

/// A scratch directory removed however the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("mqd-recorder-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `mpiexec` in a process group of its own, killed with all its ranks on drop.
struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: kill on the group this test made.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The rank program: neighbours by modulo, a helper per pattern, as users write MPI.
const PROGRAM: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int left(int r, int n) { return (r + n - 1) % n; }
static int right(int r, int n) { return (r + 1) % n; }

static int ring(int rank, int size) {
    int token = rank * 10, got = -1, sum = 0;
    MPI_Sendrecv(&token, 1, MPI_INT, right(rank, size), 3, &got, 1, MPI_INT,
                 left(rank, size), 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Allreduce(&got, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

static void hang(int rank, int size) {
    double cells[16];
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    MPI_Recv(cells, 16, MPI_DOUBLE, left(rank, size), 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "hang") == 0)
        hang(rank, size);
    else
        printf("rank %d sum %d wtime %d\n", rank, ring(rank, size), MPI_Wtime() > 0.0);
    MPI_Finalize();
    return 0;
}
"#;

fn build(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("ranks.c"), PROGRAM).unwrap();
    let exe = dir.join("ranks");
    let out = Command::new("mpicc.mpich")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(dir.join("ranks.c"))
        .output()
        .expect("mpicc.mpich (Debian's MPICH: scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn mpiexec(exe: &Path, ranks: usize, arg: &str, preload: Option<&Path>) -> Command {
    let mut cmd = Command::new("mpiexec.mpich");
    cmd.args(["-n", &ranks.to_string()]).arg(exe).arg(arg);
    cmd.env_remove("LD_PRELOAD");
    if let Some(lib) = preload {
        cmd.env("LD_PRELOAD", lib);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.process_group(0);
    cmd
}

/// The job's sorted output lines, within a deadline.
fn run_to_end(mut cmd: Command) -> (bool, Vec<String>) {
    let job = Job(cmd.spawn().expect("mpiexec.mpich"));
    let stdout = BufReader::new(job.0.stdout.as_ref().map(|s| s.try_clone_fd()).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let lines: Vec<String> = stdout.lines().map_while(Result::ok).collect();
        let _ = tx.send(lines);
    });
    let mut lines = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the job ended within 120 s");
    let mut job = job;
    let status = job.0.wait().unwrap();
    lines.sort();
    (status.success(), lines)
}

trait TryCloneFd {
    fn try_clone_fd(&self) -> std::fs::File;
}

impl TryCloneFd for std::process::ChildStdout {
    fn try_clone_fd(&self) -> std::fs::File {
        use std::os::fd::AsFd;
        std::fs::File::from(self.as_fd().try_clone_to_owned().unwrap())
    }
}

/// Reads `len` bytes at `at` in process `pid`.
fn read(pid: i32, at: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: one local buffer of `len` bytes.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
}

/// The region's address in `pid`: the library's load address plus its symbol's value.
fn region_address(pid: i32, lib: &Path) -> u64 {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(lib).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let symbol = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(mqd_recording::SYMBOL))
        .expect("the region's symbol is exported");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let name = lib.file_name().unwrap().to_str().unwrap();
    let base = maps
        .lines()
        .filter(|l| l.ends_with(name))
        .find(|l| l.split_whitespace().nth(2) == Some("00000000"))
        .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .expect("the recorder is mapped");
    base + symbol.address()
}

#[test]
fn every_c_procedure_of_the_standard_is_exported() {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(recorder()).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let exported: std::collections::BTreeSet<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| n.starts_with("MPI_"))
        .collect();
    // The standard's list as mqd's table of calls has it (scripts/mpi-calls, in Python):
    // each procedure, and its large-count form where it has one.
    let table = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/data/mpi-standard.tsv"),
    )
    .unwrap();
    let mut expected = std::collections::BTreeSet::new();
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let mut fields = line.split('\t');
        let name = fields.next().unwrap();
        expected.insert(name.to_owned());
        if fields.next() == Some("c") {
            expected.insert(format!("{name}_c"));
        }
    }
    for must in [
        "MPI_Send",
        "MPI_Send_c",
        "MPI_Recv",
        "MPI_Waitall",
        "MPI_Pcontrol",
        "MPI_Wtime",
    ] {
        assert!(exported.contains(must), "{must} not exported");
    }
    assert_eq!(exported, expected);
    assert_eq!(
        exported.len(),
        690,
        "C bindings wrapped (531 procedures, 159 _c forms)"
    );
}

#[test]
fn a_job_runs_as_without_the_recorder() {
    let scratch = Scratch::new("same");
    let exe = build(&scratch.0);
    let (plain_ok, plain) = run_to_end(mpiexec(&exe, 3, "ring", None));
    let (recorded_ok, recorded) = run_to_end(mpiexec(&exe, 3, "ring", Some(&recorder())));
    assert!(plain_ok && recorded_ok);
    assert_eq!(plain.len(), 3, "{plain:?}");
    assert_eq!(plain, recorded);
}

#[test]
fn each_hung_rank_shows_its_blocked_call_and_envelope() {
    let scratch = Scratch::new("hang");
    let exe = build(&scratch.0);
    let lib = recorder();
    let ranks = 3;
    let mut job = Job(mpiexec(&exe, ranks, "hang", Some(&lib))
        .spawn()
        .expect("mpiexec"));
    let stdout = BufReader::new(job.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut pids = Vec::new();
    while pids.len() < ranks {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("every rank ready within 120 s");
        if let Some(rest) = line.strip_prefix("READY ") {
            let mut f = rest.split_whitespace().map(|w| w.parse::<i32>().unwrap());
            pids.push((f.next().unwrap(), f.next().unwrap()));
        }
    }
    for (rank, pid) in pids {
        // The rank reaches MPI_Recv just after saying it is ready.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let at = region_address(pid, &lib);
            let header_bytes = read(pid, at, 8 * mqd_recording::HEADER_WORDS).unwrap();
            let header = decode_header(&header_bytes).unwrap();
            assert_eq!(header.abi, 1, "MPICH passes integer handles");
            assert_eq!(header.world_rank, Some(i64::from(rank)));
            assert_eq!(header.world_size, Some(ranks as i64));
            let (names_at, names_len) = header.names();
            let (fields_at, fields_len) = header.field_offsets();
            let (table_at, table_len) = header.thread_table();
            let threads = decode_threads(
                &header,
                &read(pid, fields_at, fields_len).unwrap(),
                &read(pid, names_at, names_len).unwrap(),
                &read(pid, table_at, table_len).unwrap(),
            )
            .unwrap();
            let call = threads.iter().find_map(|t| match t {
                ThreadRecord::Whole {
                    call: Some(c),
                    calls,
                    ..
                } if c.name == "MPI_Recv" => Some((c.clone(), *calls)),
                _ => None,
            });
            if let Some((call, calls)) = call {
                let n = ranks as i64;
                let rank = i64::from(rank);
                assert_eq!(
                    call.peer,
                    Some((rank + n - 1) % n),
                    "source: the left neighbour"
                );
                assert_eq!(call.tag, Some(7));
                assert_eq!(call.count, Some(16));
                assert_eq!(call.comm, Some(0x4400_0000), "MPI_COMM_WORLD");
                assert_eq!(call.datatype, Some(0x4c00_080b), "MPI_DOUBLE");
                assert_eq!((call.peer2, call.tag2, call.requests), (None, None, None));
                // MPI_Init, MPI_Comm_rank, MPI_Comm_size, MPI_Recv.
                assert_eq!(calls, 4);
                break;
            }
            assert!(Instant::now() < deadline, "rank {rank}: {threads:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
