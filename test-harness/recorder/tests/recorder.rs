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

/// `mpiexec` in a process group of its own, ended with all its ranks on drop.
struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        let group = self.0.id() as i32;
        mqd_fixtures::real_mpich::end_launcher(&mut self.0, &[]);
        // SAFETY: kill on the group this test made.
        unsafe { libc::kill(-group, libc::SIGKILL) };
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

/* Rows of two: two barriers on the row, an allreduce on the world; then the first of
 * each row waits in a third barrier on the row, the second in a receive from it. */
static void rows(int rank) {
    MPI_Comm row;
    int x = 1, sum = 0;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &row);
    MPI_Barrier(row);
    MPI_Barrier(row);
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    if (rank % 2 == 0)
        MPI_Barrier(row);
    else
        MPI_Recv(&x, 1, MPI_INT, 0, 9, row, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "hang") == 0)
        hang(rank, size);
    else if (argc > 1 && strcmp(argv[1], "rows") == 0)
        rows(rank);
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

/// The communicators the recorder in `pid` noted.
fn comms_of(pid: i32, lib: &Path) -> Vec<mqd_recording::CommRecord> {
    let at = mqd_fixtures::recorder::region_address(pid, lib);
    let header = decode_header(&read(pid, at, 8 * mqd_recording::HEADER_WORDS).unwrap()).unwrap();
    let bytes = |(at, len): (u64, usize)| read(pid, at, len).unwrap();
    mqd_recording::decode_comms(
        &header,
        &bytes(header.comm_field_offsets()),
        &bytes(header.names()),
        &bytes(header.comm_table()),
        &bytes(header.members()),
    )
    .unwrap()
}

/// The header and thread records of the recorder in `pid` (loaded from `lib`).
fn records_of(pid: i32, lib: &Path) -> (mqd_recording::Header, Vec<ThreadRecord>) {
    let at = mqd_fixtures::recorder::region_address(pid, lib);
    let header_bytes = read(pid, at, 8 * mqd_recording::HEADER_WORDS).unwrap();
    let header = decode_header(&header_bytes).unwrap();
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
    (header, threads)
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

/// The job `cmd` starts, and its ranks' pids (by rank) once each said READY.
fn started(mut cmd: Command, ranks: usize) -> (Job, Vec<i32>) {
    let mut job = Job(cmd.spawn().expect("mpiexec"));
    let lines = mqd_fixtures::stock::output_lines(&mut job.0);
    let mut pids = vec![0; ranks];
    mqd_fixtures::stock::wait_ready(&lines, &mut pids, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    (job, pids)
}

#[test]
fn each_hung_rank_shows_its_blocked_call_and_envelope() {
    let scratch = Scratch::new("hang");
    let exe = build(&scratch.0);
    let lib = recorder();
    let ranks = 3;
    let pids = started(mpiexec(&exe, ranks, "hang", Some(&lib)), ranks);
    for (rank, &pid) in pids.1.iter().enumerate() {
        let rank = rank as i32;
        // The rank reaches MPI_Recv just after saying it is ready.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (header, threads) = records_of(pid, &lib);
            assert_eq!(header.abi, 1, "MPICH passes integer handles");
            assert_eq!(header.world_rank, Some(i64::from(rank)));
            assert_eq!(header.world_size, Some(ranks as i64));
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

// ------------------------------------------------------------------------ fault tests

/// What a program may do that a recorder must not change: error handlers that return,
/// threads calling MPI at once, `fork`, `MPI_Pcontrol`'s variadic call, and sends another
/// PMPI tool counts.
const FAULTS: &str = r#"
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 8
static int rank_, size_;
static int right(int r, int n) { return (r + 1) % n; }
static int left(int r, int n) { return (r + n - 1) % n; }

static int handled = 0;
static void on_error(MPI_Comm *comm, int *code, ...) { (void)comm; (void)code; handled++; }

static void errors(void) {
    int x = 1, class_ = -1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Send(&x, 1, MPI_INT, size_ + 5, 0, MPI_COMM_WORLD);
    MPI_Error_class(rc, &class_);
    MPI_Errhandler mine;
    MPI_Comm_create_errhandler(on_error, &mine);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine);
    int rc2 = MPI_Send(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD);
    MPI_Errhandler_free(&mine);
    printf("rank %d send to no rank: %s class %s, handler called %d time(s)\n", rank_,
           rc == MPI_SUCCESS ? "success" : "error", class_ == MPI_ERR_RANK ? "MPI_ERR_RANK" : "other",
           handled + (rc2 == MPI_SUCCESS ? 100 : 0));
}

static MPI_Comm comms[THREADS];
static int hang_ = 0;
static void *worker(void *arg) {
    int t = (int)(long)arg, sum = 0;
    if (hang_) {
        int x;
        MPI_Recv(&x, 1, MPI_INT, rank_, 100 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return 0;
    }
    for (int i = 0; i < 50; i++) {
        int out = i + t, in = -1, total = 0;
        MPI_Sendrecv(&out, 1, MPI_INT, right(rank_, size_), t, &in, 1, MPI_INT,
                     left(rank_, size_), t, comms[t], MPI_STATUS_IGNORE);
        MPI_Allreduce(&in, &total, 1, MPI_INT, MPI_SUM, comms[t]);
        sum += total;
    }
    return (void *)(long)sum;
}

static void threads(int hang) {
    pthread_t th[THREADS];
    hang_ = hang;
    for (int t = 0; t < THREADS; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], 0, worker, (void *)(long)t);
    if (hang) {
        printf("READY %d %d\n", rank_, (int)getpid());
        fflush(stdout);
    }
    long total = 0;
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        total += (long)r;
    }
    for (int t = 0; t < THREADS; t++) MPI_Comm_free(&comms[t]);
    printf("rank %d threads total %ld\n", rank_, total);
}

static void forked(void) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        int flag = 0;
        MPI_Initialized(&flag);
        printf("rank %d child initialized %d wtime %d\n", rank_, flag, MPI_Wtime() > 0.0);
        fflush(stdout);
        _exit(0);
    }
    int status = -1;
    waitpid(child, &status, 0);
    int x = rank_, y = -1;
    MPI_Sendrecv(&x, 1, MPI_INT, right(rank_, size_), 1, &y, 1, MPI_INT, left(rank_, size_), 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d child status %d got %d\n", rank_, status, y);
}

static void sends(void) {
    int x[5] = {0}, y[5];
    MPI_Request r[5];
    for (int i = 0; i < 5; i++) MPI_Irecv(&y[i], 1, MPI_INT, left(rank_, size_), i, MPI_COMM_WORLD, &r[i]);
    for (int i = 0; i < 5; i++) MPI_Send(&x[i], 1, MPI_INT, right(rank_, size_), i, MPI_COMM_WORLD);
    MPI_Waitall(5, r, MPI_STATUSES_IGNORE);
    printf("rank %d pcontrol %d %d\n", rank_, MPI_Pcontrol(1), MPI_Pcontrol(0, "level", 3));
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "errors") == 0) errors();
    else if (strcmp(mode, "threads") == 0 && provided == MPI_THREAD_MULTIPLE) threads(0);
    else if (strcmp(mode, "threads-hang") == 0 && provided == MPI_THREAD_MULTIPLE) threads(1);
    else if (strcmp(mode, "fork") == 0) forked();
    else if (strcmp(mode, "sends") == 0) sends();
    else printf("rank %d: mode %s not run (thread level %d)\n", rank_, mode, provided);
    MPI_Finalize();
    return 0;
}
"#;

/// Another PMPI tool: counts the sends it sees, says so at `MPI_Finalize`.
const TOOL: &str = r#"
#include <mpi.h>
#include <stdio.h>
static int sends = 0;
int MPI_Send(const void *b, int n, MPI_Datatype d, int dest, int tag, MPI_Comm c) {
    sends++;
    return PMPI_Send(b, n, d, dest, tag, c);
}
int MPI_Finalize(void) {
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("tool: rank %d sent %d\n", rank, sends);
    return PMPI_Finalize();
}
"#;

/// The fault program and the tool library, built with Debian's MPICH.
fn build_faults(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::write(dir.join("faults.c"), FAULTS).unwrap();
    std::fs::write(dir.join("tool.c"), TOOL).unwrap();
    let (exe, tool) = (dir.join("faults"), dir.join("libtool.so"));
    for args in [
        vec!["-O2", "-pthread", "-o", "faults", "faults.c"],
        vec!["-O2", "-shared", "-fPIC", "-o", "libtool.so", "tool.c"],
    ] {
        let out = Command::new("mpicc.mpich")
            .args(&args)
            .current_dir(dir)
            .output()
            .expect("mpicc.mpich");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (exe, tool)
}

/// Each fault mode's output is the same with the recorder as without, and says it ran.
#[test]
fn error_handlers_threads_fork_and_pcontrol_run_as_without_the_recorder() {
    let scratch = Scratch::new("faults");
    let (exe, _) = build_faults(&scratch.0);
    for (mode, says) in [
        (
            "errors",
            "send to no rank: error class MPI_ERR_RANK, handler called 1 time(s)",
        ),
        ("threads", "threads total"),
        ("fork", "child status 0 got"),
        ("sends", "pcontrol 0 0"),
    ] {
        let (plain_ok, plain) = run_to_end(mpiexec(&exe, 3, mode, None));
        let (recorded_ok, recorded) = run_to_end(mpiexec(&exe, 3, mode, Some(&recorder())));
        assert!(plain_ok && recorded_ok, "{mode}: {plain:?} {recorded:?}");
        assert_eq!(
            plain.iter().filter(|l| l.contains(says)).count(),
            3,
            "{mode}: {plain:?}"
        );
        assert_eq!(plain, recorded, "{mode}");
    }
}

/// A second PMPI tool preloaded after the recorder sees every call the recorder passes
/// on (its count of sends is the program's), and the job's output is the tool's alone.
#[test]
fn another_pmpi_tool_preloaded_after_it_sees_every_call() {
    let scratch = Scratch::new("tool");
    let (exe, tool) = build_faults(&scratch.0);
    let both = std::env::join_paths([recorder(), tool.clone()]).unwrap();
    let (tool_ok, alone) = run_to_end(mpiexec(&exe, 3, "sends", Some(&tool)));
    let (both_ok, with) = run_to_end(mpiexec(&exe, 3, "sends", Some(Path::new(&both))));
    assert!(tool_ok && both_ok);
    assert_eq!(
        alone.iter().filter(|l| l.ends_with("sent 5")).count(),
        3,
        "{alone:?}"
    );
    assert_eq!(alone, with);
}

/// Eight threads of each rank blocked in `MPI_Recv` at once: each has its own record,
/// with its own tag.
#[test]
fn eight_threads_in_calls_at_once_each_have_their_record() {
    let scratch = Scratch::new("threads");
    let (exe, _) = build_faults(&scratch.0);
    let lib = recorder();
    let ranks = 2;
    let pids = started(mpiexec(&exe, ranks, "threads-hang", Some(&lib)), ranks);
    for (rank, &pid) in pids.1.iter().enumerate() {
        let rank = rank as i32;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, threads) = records_of(pid, &lib);
            let mut tags: Vec<i64> = threads
                .iter()
                .filter_map(|t| match t {
                    ThreadRecord::Whole { call: Some(c), .. } if c.name == "MPI_Recv" => {
                        assert_eq!(c.peer, Some(i64::from(rank)), "{c:?}");
                        c.tag
                    }
                    _ => None,
                })
                .collect();
            tags.sort();
            if tags == (100..108).collect::<Vec<i64>>() {
                break;
            }
            assert!(Instant::now() < deadline, "rank {rank}: {threads:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Each rank's communicators as the recorder noted them: the world in world order, its
/// own, its row of a split with its members as world ranks, and the collectives entered
/// on each, in order; the first of each row waits in its row's third barrier, and its
/// thread's record says which.
#[test]
fn communicators_are_noted_with_members_and_collectives_counted() {
    let scratch = Scratch::new("rows");
    let exe = build(&scratch.0);
    let lib = recorder();
    let ranks = 4;
    let (_job, pids) = started(mpiexec(&exe, ranks, "rows", Some(&lib)), ranks);
    for (rank, &pid) in pids.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let first = rank % 2 == 0;
        let call = if first { "MPI_Barrier" } else { "MPI_Recv" };
        // Until the rank is in its last call.
        let collective = loop {
            let (_, threads) = records_of(pid, &lib);
            let found = threads.iter().find_map(|t| match t {
                ThreadRecord::Whole { call: Some(c), .. } if c.name == call => Some(c.collective),
                _ => None,
            });
            if let Some(found) = found {
                break found;
            }
            assert!(Instant::now() < deadline, "rank {rank}: {threads:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(collective, first.then_some(3), "rank {rank}");
        let comms = comms_of(pid, &lib);
        let whole: Vec<_> = comms
            .iter()
            .filter_map(|c| match c {
                mqd_recording::CommRecord::Whole {
                    handle,
                    members,
                    collectives,
                    last,
                    freed: false,
                    ..
                } => Some((*handle, members.clone(), *collectives, last.clone())),
                _ => None,
            })
            .collect();
        let world = whole
            .iter()
            .find(|c| c.0 == 0x4400_0000)
            .expect("the world");
        assert_eq!(world.1, Some((0..ranks as i32).collect()), "rank {rank}");
        assert_eq!(
            (world.2, world.3.as_ref().map(|l| l.0.as_str())),
            (2, Some("MPI_Allreduce")),
            "rank {rank}: the split and the allreduce"
        );
        let own = whole.iter().find(|c| c.0 == 0x4400_0001).expect("self");
        assert_eq!(own.1, Some(vec![rank as i32]));
        let row_start = (rank - rank % 2) as i32;
        let row = whole
            .iter()
            .find(|c| c.1 == Some(vec![row_start, row_start + 1]))
            .unwrap_or_else(|| panic!("rank {rank}: no row in {comms:?}"));
        let row_collectives = if first { 3 } else { 2 };
        assert_eq!(
            (row.2, row.3.as_ref().map(|l| l.0.as_str())),
            (row_collectives, Some("MPI_Barrier")),
            "rank {rank}"
        );
    }
}
