//! Jobs run with the hang recorder preloaded (`libmqd_recorder.so`): `mqd job` takes each
//! blocked call's envelope from the records in the ranks' memory, exact in a program
//! built `-O2` without `-g` on an MPI without debug information (Debian's MPICH), where
//! the frames alone cannot say a destination a helper computed; live and from cores.

use mqd_fixtures::default_signal_actions;
use mqd_fixtures::gcore_one_snapshot;
use mqd_fixtures::stock::{StockMpi, debian, debian_open_mpi, pypi_standard_abi};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `libmqd_recorder.so`, built with the workspace beside `mqd`.
fn recorder() -> PathBuf {
    let mqd = Path::new(env!("CARGO_BIN_EXE_mqd"));
    let lib = mqd.with_file_name("libmqd_recorder.so");
    assert!(
        lib.exists(),
        "{} is not built: build the workspace (scripts/test does)",
        lib.display()
    );
    lib
}

/// A launcher and its ranks, killed on drop; its scratch directory removed.
struct Job {
    mpiexec: Child,
    ranks: Vec<i32>,
    dir: PathBuf,
}

impl Drop for Job {
    fn drop(&mut self) {
        mqd_fixtures::real_mpich::end_launcher(&mut self.mpiexec, &self.ranks);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A ring as users write it: each rank sends to its right neighbour, which a helper of
/// another file names, synchronously, and nobody receives. The helper's result reaches
/// `MPI_Ssend` in a register the call does not preserve: from the frames alone the
/// destination is unknown.
const SSEND_RING: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int right_of(int rank, int size);
int main(int argc, char **argv) {
    int rank, size, x[4] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    MPI_Ssend(x, 4, MPI_INT, right_of(rank, size), 9, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"#;
/// A ring in Fortran as users write it: each rank receives from its left neighbour,
/// which nobody sends to.
const FORTRAN_RING: &str = "
program ring
  use mpi
  implicit none
  integer :: rank, nprocs, ierr, left
  double precision :: cells(16)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  left = mod(rank + nprocs - 1, nprocs)
  print '(A,I0,A,I0)', 'READY ', rank, ' ', getpid()
  flush(6)
  call MPI_Recv(cells, 16, MPI_DOUBLE_PRECISION, left, 7, MPI_COMM_WORLD, &
                MPI_STATUS_IGNORE, ierr)
  call MPI_Finalize(ierr)
end program
";
/// The ring made rows of two by a split: each rank sends to its row's other rank.
const ROWS_FROM: &str = "    MPI_Ssend(x, 4, MPI_INT, right_of(rank, size), 9, MPI_COMM_WORLD);";
const ROWS_TO: &str = "    MPI_Comm row;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &row);
    MPI_Ssend(x, 4, MPI_INT, right_of(rank % 2, 2), 9, row);";
/// The ring's send as a standard `MPI_Send` of 1 MiB, which no MPI here buffers.
const SEND_TO: &str = "    static double cells[1 << 17];
    MPI_Send(cells, 1 << 17, MPI_DOUBLE, right_of(rank, size), 9, MPI_COMM_WORLD);";
/// Rank 0 receives what nobody sends; the others wait in a barrier for it.
/// The ring's send as `MPI_Issend` and `MPI_Wait`.
const ISSEND_TO: &str = "    MPI_Request r;
    MPI_Issend(x, 4, MPI_INT, right_of(rank, size), 9, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);";
const BARRIER_TO: &str = "    if (rank) MPI_Barrier(MPI_COMM_WORLD);
    else MPI_Recv(x, 4, MPI_INT, right_of(rank, size), 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);";
const NEIGHBOURS: &str = "int right_of(int rank, int size) { return (rank + 1) % size; }
int left_of(int rank, int size) { return (rank + size - 1) % size; }\n";
/// Every way a message is sent and received between two ranks, each counted once: rank 0
/// sends tags 1 (twice, blocking), 2 (`MPI_Isend`), 3 (a persistent send started twice)
/// and 4 (`MPI_Ssend`); rank 1 receives them by `MPI_Recv` (a source and any), an
/// `MPI_Irecv` completed by `MPI_Waitall` with the statuses ignored, a persistent receive
/// from any source, and `MPI_Mprobe` with `MPI_Mrecv`; a receive it cancels is not
/// counted. Then both receive tag 9 from each other.
const EVERY_WAY: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, x[4] = {0};
    MPI_Request r[2];
    MPI_Status st;
    MPI_Message m;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        for (int i = 0; i < 2; i++)
            MPI_Send(x, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        MPI_Isend(x, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &r[0]);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        MPI_Send_init(x, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &r[1]);
        for (int i = 0; i < 2; i++) {
            MPI_Start(&r[1]);
            MPI_Wait(&r[1], MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&r[1]);
        MPI_Ssend(x, 1, MPI_INT, 1, 4, MPI_COMM_WORLD);
    } else {
        MPI_Recv(x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Irecv(x, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(x + 1, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &r[1]);
        MPI_Cancel(&r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        MPI_Recv_init(x, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &r[0]);
        for (int i = 0; i < 2; i++) {
            MPI_Start(&r[0]);
            int index;
            MPI_Waitany(1, r, &index, MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&r[0]);
        MPI_Mprobe(0, 4, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE);
        MPI_Mrecv(x, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    MPI_Recv(x, 1, MPI_INT, 1 - rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
"#;

/// Rings that trade messages, then each rank receives from its left neighbour what
/// nobody sends: after three rounds of tag 5 (`counted-ring`; `wait-ring` by
/// `MPI_Irecv` and `MPI_Wait`), or after leaving one message of tag 8 unreceived at its
/// right neighbour (`tag-left-behind`). Or after the rounds, by requests: a halo
/// exchange whose sends and receives name different tags, in `MPI_Waitall`
/// (`halo-waitall`); receives from both neighbours in `MPI_Waitany`
/// (`neighbours-waitany`; with rank 0 computing, `partner-computes-waitany`); every rank
/// but the last in an `MPI_Ibarrier`, the last receiving from rank 0, each in `MPI_Wait`
/// (`ibarrier-vs-irecv`); on an intercommunicator between the even and the odd ranks,
/// after an exchange there, each receiving from its partner in the other group
/// (`groups-exchange`), or from the other group's first, which computes
/// (`remote-computes`).
const TRADING_RING: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int right_of(int rank, int size);
int left_of(int rank, int size);
static void trade(int rank, int size, int rounds, int *x) {
    for (int i = 0; i < rounds; i++) {
        MPI_Send(x, 4, MPI_INT, right_of(rank, size), 5, MPI_COMM_WORLD);
        MPI_Recv(x, 4, MPI_INT, left_of(rank, size), 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}
static volatile double work;
static void compute(void) {
    for (;;)
        work += 1e-9;
}
static void halo(int rank, int size, int *x) {
    static int in[2][4];
    MPI_Request r[4];
    MPI_Irecv(in[0], 4, MPI_INT, left_of(rank, size), 7, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(in[1], 4, MPI_INT, right_of(rank, size), 7, MPI_COMM_WORLD, &r[1]);
    MPI_Isend(x, 4, MPI_INT, right_of(rank, size), 6, MPI_COMM_WORLD, &r[2]);
    MPI_Isend(x, 4, MPI_INT, left_of(rank, size), 6, MPI_COMM_WORLD, &r[3]);
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
}
static MPI_Comm across(int rank) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 11, &inter);
    return inter;
}
static void either(int rank, int size) {
    static int in[2][4];
    MPI_Request r[2];
    int index;
    MPI_Irecv(in[0], 4, MPI_INT, left_of(rank, size), 7, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(in[1], 4, MPI_INT, right_of(rank, size), 7, MPI_COMM_WORLD, &r[1]);
    MPI_Waitany(2, r, &index, MPI_STATUS_IGNORE);
}
int main(int argc, char **argv) {
    int rank, size, x[4] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char how = argc > 2 ? argv[2][0] : 'c';
    MPI_Comm inter = MPI_COMM_NULL;
    int partner = 0;
    if (how == 't')
        MPI_Send(x, 1, MPI_INT, right_of(rank, size), 8, MPI_COMM_WORLD);
    else
        trade(rank, size, 3, x);
    if (how == 'g' || how == 'r') {
        inter = across(rank);
        MPI_Comm_rank(inter, &partner);
        MPI_Sendrecv_replace(x, 4, MPI_INT, partner, 5, partner, 5, inter, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    if (how == 'w') {
        MPI_Request r;
        MPI_Irecv(x, 4, MPI_INT, left_of(rank, size), 7, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (how == 'h')
        halo(rank, size, x);
    else if (how == 'n' || (how == 'p' && rank != 0))
        either(rank, size);
    else if (how == 'p')
        compute();
    else if (how == 'i') {
        MPI_Request r;
        if (rank == size - 1)
            MPI_Irecv(x, 4, MPI_INT, 0, 7, MPI_COMM_WORLD, &r);
        else
            MPI_Ibarrier(MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (how == 'g')
        MPI_Recv(x, 4, MPI_INT, partner, 7, inter, MPI_STATUS_IGNORE);
    else if (how == 'r' && rank == 1)
        compute();
    else if (how == 'r')
        MPI_Recv(x, 4, MPI_INT, 0, 7, inter, MPI_STATUS_IGNORE);
    else
        MPI_Recv(x, 4, MPI_INT, left_of(rank, size), 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
"#;

/// Collectives as solvers call them (a helper's reduction after a broadcast and a split
/// into rows of two), then one branch per scenario, from a table of patterns: `a` the
/// last rank waits for a message while the others reduce on the world; `r` each row's
/// second member waits for world rank 0 while the first reduces on the row; `f` the last
/// rank finalizes early while the others reduce; `g` every rank waits for the last,
/// which finalized; `l` the last rank computes while the others reduce (no deadlock);
/// `d` each rank sends to its right on one duplicate of the world and receives from its
/// left on another; after making a window over the world, the last rank waits for a
/// message from rank 0 while the others fence (`w`), free the window (`v`) or fence
/// with `MPI_MODE_NOPRECEDE` (`n`), or computes while they fence (`c`); on a periodic
/// ring made by `MPI_Cart_create`, every rank but the last gathers from its neighbours
/// while the last waits in a barrier on the world (`k`) or computes (`j`); the even and
/// the odd ranks make an intercommunicator bridged by the world (`x`) or by a duplicate
/// of it (`z`) while the last rank waits for a message from rank 0, or computes (`y`).
const COLLECTIVE_SKIPS: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
static double residual(double local, MPI_Comm comm) {
    double global;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, comm);
    return global;
}
static volatile double work;
static void compute(void) {
    for (;;)
        work += 1e-9;
}
static MPI_Win window_of(MPI_Comm comm) {
    static double cells[16];
    MPI_Win win;
    MPI_Win_create(cells, sizeof cells, sizeof(double), MPI_INFO_NULL, comm, &win);
    return win;
}
int main(int argc, char **argv) {
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char how = argc > 2 ? argv[2][0] : 'a';
    int last = size - 1;
    double r = residual(rank, MPI_COMM_WORLD);
    MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm row;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &row);
    r = residual(r, row);
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    if (how == 'a' && rank == last)
        MPI_Recv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (how == 'r' && rank % 2)
        MPI_Recv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (how == 'r')
        r = residual(r, row);
    else if ((how == 'f' || how == 'g') && rank == last) {
        MPI_Finalize();
        compute();
    } else if (how == 'g')
        MPI_Recv(&x, 1, MPI_INT, last, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (how == 'l' && rank == last)
        compute();
    else if (how == 'k' || how == 'j') {
        MPI_Comm ring;
        int dims[1] = {size}, periods[1] = {1}, from[2];
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
        if (rank == last && how == 'j')
            compute();
        else if (rank == last)
            MPI_Barrier(MPI_COMM_WORLD);
        else
            MPI_Neighbor_allgather(&x, 1, MPI_INT, from, 1, MPI_INT, ring);
    } else if (how == 'w' || how == 'v' || how == 'n' || how == 'c') {
        MPI_Win win = window_of(MPI_COMM_WORLD);
        if (rank == last && how == 'c')
            compute();
        else if (rank == last)
            MPI_Recv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else if (how == 'v')
            MPI_Win_free(&win);
        else
            MPI_Win_fence(how == 'n' ? MPI_MODE_NOPRECEDE : 0, win);
    } else if (how == 'x' || how == 'y' || how == 'z') {
        MPI_Comm half, inter, bridge = MPI_COMM_WORLD;
        if (how == 'z')
            MPI_Comm_dup(MPI_COMM_WORLD, &bridge);
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        if (rank == last && how == 'y')
            compute();
        else if (rank == last)
            MPI_Recv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Intercomm_create(half, 0, bridge, rank % 2 == 0 ? 1 : 0, 12, &inter);
    } else if (how == 'd') {
        MPI_Comm sends, receives;
        MPI_Comm_dup(MPI_COMM_WORLD, &sends);
        MPI_Comm_dup(MPI_COMM_WORLD, &receives);
        MPI_Send(&x, 1, MPI_INT, (rank + 1) % size, 1, sends);
        MPI_Recv(&x, 1, MPI_INT, (rank + size - 1) % size, 1, receives, MPI_STATUS_IGNORE);
    }
    else
        r = residual(r, MPI_COMM_WORLD);
    printf("%d %g\n", x, r);
    MPI_Finalize();
    return 0;
}
"#;

/// `scenario` of the real-MPI scenarios (or `ssend-ring`, [`SSEND_RING`], or `probe`,
/// [`PROBE`]) built `-O2` without `-g` into `dir`.
fn build(mpi: &StockMpi, scenario: &str, dir: &Path) -> PathBuf {
    let program = dir.join("scenarios");
    if scenario == "fortran-ring" {
        let path = dir.join("ring.f90");
        std::fs::write(&path, FORTRAN_RING).unwrap();
        let compiler = mpi
            .mpifort
            .as_ref()
            .expect("the MPI's Fortran compiler wrapper");
        let fc = Command::new(compiler)
            .args(["-O2", "-o"])
            .arg(&program)
            .arg(&path)
            .output()
            .expect("the MPI's Fortran compiler wrapper");
        assert!(
            fc.status.success(),
            "{}",
            String::from_utf8_lossy(&fc.stderr)
        );
        return program;
    }
    let source = match scenario {
        "probe" => {
            let path = dir.join("probe.c");
            std::fs::write(&path, PROBE).unwrap();
            path
        }
        "every-way" => {
            let path = dir.join("every-way.c");
            std::fs::write(&path, EVERY_WAY).unwrap();
            path
        }
        "skip-world"
        | "skip-row"
        | "finalized-early"
        | "wait-finalized"
        | "computes"
        | "wrong-duplicate"
        | "fence-vs-recv"
        | "free-vs-recv"
        | "noprecede-fence"
        | "fence-computes"
        | "neighbours-vs-barrier"
        | "neighbour-computes"
        | "intercomm-skip"
        | "intercomm-skip-bridged"
        | "intercomm-computes" => {
            let path = dir.join("skips.c");
            std::fs::write(&path, COLLECTIVE_SKIPS).unwrap();
            path
        }
        "ssend-ring"
        | "send-ring"
        | "ssend-rows"
        | "barrier"
        | "barrier-fortran"
        | "counted-ring"
        | "tag-left-behind"
        | "wait-ring"
        | "issend-ring"
        | "halo-waitall"
        | "neighbours-waitany"
        | "partner-computes-waitany"
        | "ibarrier-vs-irecv"
        | "groups-exchange"
        | "remote-computes" => {
            std::fs::write(dir.join("neighbours.c"), NEIGHBOURS).unwrap();
            let path = dir.join("ring.c");
            let text = match scenario {
                "ssend-ring" => SSEND_RING.to_owned(),
                "ssend-rows" => SSEND_RING.replace(ROWS_FROM, ROWS_TO),
                "issend-ring" => SSEND_RING.replace(ROWS_FROM, ISSEND_TO),
                "send-ring" => SSEND_RING.replace(ROWS_FROM, SEND_TO),
                "barrier" | "barrier-fortran" => SSEND_RING.replace(ROWS_FROM, BARRIER_TO),
                _ => TRADING_RING.to_owned(),
            };
            std::fs::write(&path, text).unwrap();
            path
        }
        _ => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/real-mpi/scenarios.c"
        )),
    };
    let cc = Command::new(&mpi.mpicc)
        .args(["-O2", "-o"])
        .arg(&program)
        .arg(&source)
        .args(
            dir.join("neighbours.c")
                .exists()
                .then(|| dir.join("neighbours.c")),
        )
        .args((scenario == "barrier-fortran").then_some("-Wl,--no-as-needed,-lmpi_mpifh"))
        .output()
        .expect("the MPI's compiler wrapper");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    program
}

/// `program` on `n` ranks of `mpi`, `preload` in the ranks' environment (hydra's -genv,
/// Open MPI's -x: not the launcher's), its stdout piped.
fn launcher(mpi: &StockMpi, preload: Option<&Path>, n: usize, program: &Path) -> Command {
    let mut cmd = Command::new(&mpi.mpiexec);
    cmd.args(mpi.launcher_args);
    if let Some(lib) = preload {
        match mpi.slug.contains("openmpi") {
            true => cmd.arg("-x").arg(format!("LD_PRELOAD={}", lib.display())),
            false => cmd.args(["-genv", "LD_PRELOAD"]).arg(lib),
        };
    }
    cmd.args(["-n", &n.to_string()])
        .arg(program)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    default_signal_actions(&mut cmd);
    cmd
}

/// `scenario` of the real-MPI scenarios (or `ssend-ring`, [`SSEND_RING`]), built `-O2`
/// without `-g`, on `n` ranks, with the recorder preloaded or not; returned once every
/// rank said READY.
fn start(mpi: &StockMpi, scenario: &str, n: usize, preload: Option<&Path>) -> Job {
    start_with(mpi, scenario, n, preload, scenario)
}

/// [`start`] of a program told `--scenario how` (a pattern of its own table).
fn start_with(mpi: &StockMpi, scenario: &str, n: usize, preload: Option<&Path>, how: &str) -> Job {
    let dir = std::env::temp_dir().join(format!(
        "mqd-recorded-{}-{scenario}-{}-{}",
        mpi.slug,
        preload.is_some(),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let program = build(mpi, scenario, &dir);
    let mut cmd = launcher(mpi, preload, n, &program);
    cmd.args(["--scenario", how]);
    let mut mpiexec = cmd.spawn().expect("the MPI's launcher");
    let lines = mqd_fixtures::stock::output_lines(&mut mpiexec);
    let mut job = Job {
        mpiexec,
        ranks: vec![0; n],
        dir,
    };
    if let Err(e) = mqd_fixtures::stock::wait_ready(&lines, &mut job.ranks, Duration::from_secs(60))
    {
        // Where each process of the job was (a loaded run once saw none of 3 ready).
        let tree = mqd_fixtures::real_mpich::process_tree(job.mpiexec.id() as i32);
        panic!("{scenario}: the job did not get ready: {e}; its processes:\n{tree}");
    }
    job
}

/// `mqd job --json --per-rank` of the job: its exit code and document.
fn job_json(job: &Job) -> (Option<i32>, serde_json::Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(["job", "--json", "--per-rank", &job.mpiexec.id().to_string()])
        .stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    let out = cmd.output().expect("mqd");
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), doc)
}

/// `mqd job --json` of the job, once each rank's main thread is in `call` (a rank says
/// READY just before its blocking call).
fn dump_in(job: &Job, call: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, doc) = job_json(job);
        let all_in = doc["ranks"].as_array().is_some_and(|ranks| {
            ranks.iter().all(|r| {
                r["threads"][0]["frames"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f["function"] == call))
            })
        });
        if all_in {
            return doc;
        }
        assert!(Instant::now() < deadline, "never all in {call}: {doc:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each rank's main-thread call in `doc`.
fn calls(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["threads"][0]["call"].clone())
        .collect()
}

#[test]
fn records_give_each_blocked_calls_envelope_on_debians_mpich() {
    head_to_head(&debian());
}

/// Open MPI passes handles as pointers: `MPI_COMM_WORLD` is the program's copy of
/// `ompi_mpi_comm_world` (copy-relocated into the executable), not the library's.
#[test]
fn records_give_each_blocked_calls_envelope_on_debians_open_mpi() {
    head_to_head(&debian_open_mpi());
}

fn head_to_head(mpi: &StockMpi) {
    let lib = recorder();
    // headtohead: ranks 0 and 1 each MPI_Recv(1 int, from 1 - rank, tag 1, WORLD).
    let job = start(mpi, "headtohead", 2, Some(&lib));
    let doc = dump_in(&job, "MPI_Recv");
    for (rank, r) in doc["ranks"].as_array().unwrap().iter().enumerate() {
        let call = &r["threads"][0]["call"];
        let what = format!("rank {rank}: {call:#}");
        assert_eq!(call["function"], "MPI_Recv", "{what}");
        assert_eq!(call["peer"], 1 - rank as i64, "{what}");
        assert_eq!(call["tag"], 1, "{what}");
        assert_eq!(call["predefined"], "MPI_COMM_WORLD", "{what}");
        assert_eq!(call["bytes"], 4, "{what}: one MPI_INT");
        for field in ["peer", "tag", "comm", "bytes"] {
            assert_eq!(call["sources"][field], "the hang recorder", "{what}");
        }
        // The recorder's wrapper is the MPI's interface: its frame is MPI's, not the
        // program's.
        let frames = r["threads"][0]["frames"].as_array().unwrap();
        let wrapper = frames
            .iter()
            .find(|f| {
                f["object"]
                    .as_str()
                    .is_some_and(|o| o.ends_with("libmqd_recorder.so"))
            })
            .unwrap_or_else(|| panic!("{what}: no frame of the recorder"));
        assert_eq!(wrapper["mpi"], true, "{what}");
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("the hang recorder's records read: 1 thread(s) in an MPI call"),
            "{rank}: {notes}"
        );
    }
    let recorded = calls(&doc);

    // The same records from gdb's cores of the ranks, taken at one moment.
    let cores = gcore_one_snapshot(&job.ranks, &job.dir.join("core")).expect("gcore");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(["core", "--one-snapshot", "--json", "--per-rank"])
        .args(&cores)
        .stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    let out = cmd.output().expect("mqd core");
    let from_cores: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    for (call, live) in calls(&from_cores).iter().zip(&recorded) {
        for field in ["function", "peer", "tag", "bytes", "predefined", "sources"] {
            assert_eq!(call[field], live[field], "{field} from a core: {call:#}");
        }
    }
    drop(job);

    // The same job without the recorder: the caller's code gives the same envelope (the
    // records agree with it), and nothing is said of records.
    let job = start(mpi, "headtohead", 2, None);
    let doc = dump_in(&job, "MPI_Recv");
    for (r, (read, recorded)) in doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(calls(&doc).iter().zip(&recorded))
    {
        for field in ["peer", "tag", "bytes", "predefined"] {
            assert_eq!(read[field], recorded[field], "{field}: {read:#}");
        }
        assert_ne!(read["sources"]["peer"], "the hang recorder");
        assert!(!r["notes"].to_string().contains("hang recorder"), "{r:#}");
    }
}

#[test]
fn records_know_a_destination_a_helper_computed() {
    let mpi = debian();
    let lib = recorder();
    let n = 3;
    let job = start(&mpi, "ssend-ring", n, Some(&lib));
    let doc = dump_in(&job, "MPI_Ssend");
    for (rank, call) in calls(&doc).iter().enumerate() {
        assert_eq!(
            call["peer"],
            ((rank + 1) % n) as i64,
            "rank {rank}: {call:#}"
        );
        assert_eq!(call["tag"], 9, "rank {rank}: {call:#}");
        assert_eq!(call["bytes"], 16, "rank {rank}: {call:#}");
        assert_eq!(
            call["sources"]["peer"], "the hang recorder",
            "rank {rank}: {call:#}"
        );
    }
    drop(job);
    // Without it, the destination is not known from the frames.
    let job = start(&mpi, "ssend-ring", n, None);
    let doc = dump_in(&job, "MPI_Ssend");
    for call in calls(&doc) {
        assert!(call["peer"].is_null(), "{call:#}");
        assert!(call["unknown"]["dest"].is_string(), "{call:#}");
    }
}

/// A program that asks its dynamic linker, as mpi4py and libraries with weak references
/// do, whether its MPI has a procedure of the MPI 5 ABI (MPICH 4 and Open MPI 4 have
/// none) and one of MPI 4.0 (Open MPI 4 has none), and which library `MPI_Send` is in.
const PROBE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
static void probe(const char *name) {
    Dl_info info;
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p && dladdr(p, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        printf("%s %s\n", name, slash ? slash + 1 : info.dli_fname);
    } else {
        printf("%s absent\n", name);
    }
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    probe("MPI_Abi_get_version");
    probe("MPI_Isendrecv");
    probe("MPI_Send");
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
"#;

/// The probe's answers, one rank of `mpi`, with `preload` in its environment.
fn probed(mpi: &StockMpi, dir: &Path, program: &Path, preload: &Path) -> Vec<String> {
    let mut cmd = launcher(mpi, Some(preload), 1, program);
    cmd.current_dir(dir);
    let mut child = cmd.spawn().expect("the MPI's launcher");
    let lines = mqd_fixtures::stock::output_lines(&mut child);
    let out: Vec<String> = (0..3)
        .map_while(|_| lines.recv_timeout(Duration::from_secs(60)).ok())
        .collect();
    // Ended by now, unless it hung: then ended here.
    mqd_fixtures::real_mpich::end_launcher(&mut child, &[]);
    out
}

/// A directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The ranks of `mqd run` load the recorder fitted to their MPI: a procedure the MPI
/// lacks is not found in it (mpi4py 4 asks for `MPI_Abi_get_version` and takes an error
/// from it for a failed MPI), a procedure it has is the recorder's. The whole library
/// answers both probes with itself: what the fitting is for.
#[test]
fn the_recorder_hides_what_the_jobs_mpi_lacks() {
    for (mpi, hidden) in [
        (debian(), &["MPI_Abi_get_version"][..]),
        (
            debian_open_mpi(),
            &["MPI_Abi_get_version", "MPI_Isendrecv"][..],
        ),
    ] {
        let dir =
            std::env::temp_dir().join(format!("mqd-fitted-{}-{}", mpi.slug, std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _scratch = Scratch(dir.clone());
        let program = build(&mpi, "probe", &dir);

        // The MPI library: the one the program links, and the launcher's for a program
        // that links none (an interpreter).
        let launcher = mqd::recording::launcher_of(mpi.mpiexec.as_os_str());
        let words = |program: &Path| {
            vec![
                mpi.mpiexec.clone().into_os_string(),
                "-n".into(),
                "1".into(),
                program.into(),
            ]
        };
        let linked = mqd::recording::exports::mpi_library(&words(&program), launcher)
            .expect("the program's MPI library");
        let beside = mqd::recording::exports::mpi_library(&words(Path::new("python3")), launcher)
            .expect("the launcher's MPI library");
        assert_eq!(
            linked.canonicalize().unwrap(),
            beside.canonicalize().unwrap(),
            "{}",
            mpi.name
        );

        let full = recorder();
        let (fitted, _) = mqd::recording::for_job(&words(&program), launcher, &full)
            .unwrap_or_else(|e| panic!("{}: {e}", mpi.name));
        assert_ne!(fitted, full, "{}: nothing hidden", mpi.name);
        let answers = probed(&mpi, &dir, &program, &fitted);
        for name in hidden {
            assert!(
                answers.contains(&format!("{name} absent")),
                "{}: {answers:?}",
                mpi.name
            );
        }
        let copy = fitted.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            answers.contains(&format!("MPI_Send {copy}")),
            "{}: {answers:?}",
            mpi.name
        );
        let whole = probed(&mpi, &dir, &program, &full);
        assert!(
            whole.contains(&"MPI_Abi_get_version libmqd_recorder.so".to_owned()),
            "{}: {whole:?}",
            mpi.name
        );
        // Asked again, the same copy.
        let (again, _) = mqd::recording::for_job(&words(&program), launcher, &full).unwrap();
        assert_eq!(again, fitted);
    }
}

/// `mqd run` preloads the recorder into the job it starts, and the report gives each
/// blocked call's destination, which a helper computed (unknown from the frames);
/// `--no-record` runs the job as it is, and the destination is unknown again.
#[test]
fn mqd_run_records_unless_told_not_to() {
    let mpi = debian();
    let dir = std::env::temp_dir().join(format!("mqd-run-recorded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _scratch = Scratch(dir.clone());
    let program = build(&mpi, "ssend-ring", &dir);
    let n = 3;
    for record in [true, false] {
        let report = dir.join(format!("report-{record}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
        cmd.args(["run", "--hang-after", "3s", "--interval", "1s", "--report"])
            .arg(&report);
        if !record {
            cmd.arg("--no-record");
        }
        cmd.arg("--")
            .arg(&mpi.mpiexec)
            .args(["-n", &n.to_string()])
            .arg(&program)
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        default_signal_actions(&mut cmd);
        cmd.process_group(0);
        let mut child = cmd.spawn().expect("mqd run");
        let status = mqd_fixtures::real_mpich::wait_child(&mut child, Duration::from_secs(180));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(8),
            "record {record}: a deadlock"
        );
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap();
        let calls = calls(&doc);
        assert_eq!(calls.len(), n, "{doc:#}");
        for (rank, call) in calls.iter().enumerate() {
            if record {
                assert_eq!(call["peer"], ((rank + 1) % n) as i64, "{call:#}");
                assert_eq!(call["sources"]["peer"], "the hang recorder", "{call:#}");
            } else {
                assert!(call["peer"].is_null(), "{call:#}");
            }
        }
    }
}

/// The word at `at` in `pid`, after writing `value` there if given.
fn word_at(pid: i32, at: u64, value: Option<u64>) -> u64 {
    let mut word = value.unwrap_or(0).to_le_bytes();
    let local = libc::iovec {
        iov_base: word.as_mut_ptr().cast(),
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: one local buffer of 8 bytes.
    let n = unsafe {
        match value {
            Some(_) => libc::process_vm_writev(pid, &local, 1, &remote, 1, 0),
            None => libc::process_vm_readv(pid, &local, 1, &remote, 1, 0),
        }
    };
    assert_eq!(n, 8, "{at:#x} in {pid}");
    u64::from_le_bytes(word)
}

fn peek(pid: i32, at: u64) -> u64 {
    word_at(pid, at, None)
}

fn poke(pid: i32, at: u64, value: u64) {
    word_at(pid, at, Some(value));
}

/// A recorder region damaged in a live rank, four ways (its magic, its names' address, a
/// field count beyond reason, its main thread's slot left mid-write): `mqd job` says so
/// in each rank's notes, reads that rank's call from its frames, and its verdict is the
/// one of the job without records (the ring deadlocked, proven by the hold), never "no
/// deadlock".
#[test]
fn a_damaged_region_is_unknown_never_a_fact() {
    use mqd_recording::HeaderWord;
    let mpi = debian();
    let lib = recorder();
    let n = 4;
    let job = start(&mpi, "ssend-ring", n, Some(&lib));
    let _ = dump_in(&job, "MPI_Ssend");
    for (rank, &pid) in job.ranks.iter().enumerate() {
        let header = mqd_fixtures::recorder::region_address(pid, &lib);
        let word = |w: HeaderWord| header + 8 * w as u64;
        match rank {
            0 => poke(pid, word(HeaderWord::Magic), 0x0bad_0bad_0bad_0bad),
            1 => poke(pid, word(HeaderWord::Names), 0xdead_beef_0000),
            2 => poke(pid, word(HeaderWord::ThreadFieldCount), 1 << 40),
            _ => {
                // The main thread's slot (its thread id is the pid), its sequence odd.
                let (slots, size) = (
                    peek(pid, word(HeaderWord::Threads)),
                    peek(pid, word(HeaderWord::ThreadSlotSize)),
                );
                let slot = (0..256)
                    .map(|i| slots + i * size)
                    .find(|&s| peek(pid, s + 8) == pid as u64)
                    .expect("the main thread's slot");
                poke(pid, slot, peek(pid, slot) | 1);
            }
        }
    }
    let (code, doc) = job_json(&job);
    for (rank, r) in doc["ranks"].as_array().unwrap().iter().enumerate() {
        let notes = r["notes"].to_string();
        let said = if rank < 3 {
            "the hang recorder is loaded but its records cannot be read"
        } else {
            "stopped while the hang recorder wrote its record"
        };
        assert!(notes.contains(said), "rank {rank}: {notes}");
        let call = &r["threads"][0]["call"];
        assert!(
            !call["sources"].to_string().contains("the hang recorder"),
            "rank {rank}: {call:#}"
        );
    }
    assert_eq!(
        doc["diagnosis"]["verdict"], "deadlock",
        "{:#}",
        doc["diagnosis"]
    );
    assert_eq!(code, Some(8));
}

/// A gfortran program: on MPICH, whose Fortran routines call its C `MPI_` procedures, the
/// recorder sees the calls, and each rank's blocked `MPI_Recv` has its envelope from the
/// records; Open MPI's Fortran routines call `PMPI_` directly: each rank's notes say its
/// call was not seen, and the envelope is read from the frames (Fortran passes every
/// argument by reference, in the caller's memory).
#[test]
fn a_gfortran_job_is_recorded_where_its_mpi_routes_fortran_through_c() {
    for (mpi, seen) in [(debian(), true), (debian_open_mpi(), false)] {
        let n = 3;
        let job = start(&mpi, "fortran-ring", n, Some(&recorder()));
        let doc = dump_in(&job, "MPI_Recv");
        for (rank, call) in calls(&doc).iter().enumerate() {
            let what = format!("{}, rank {rank}: {call:#}", mpi.name);
            assert_eq!(call["peer"], ((rank + n - 1) % n) as i64, "{what}");
            assert_eq!(call["tag"], 7, "{what}");
            let source = call["sources"]["peer"].as_str().unwrap_or("");
            assert_eq!(source == "the hang recorder", seen, "{what}");
            let notes = doc["ranks"][rank]["notes"].to_string();
            assert_eq!(
                notes.contains("in the Fortran binding pmpi_recv_"),
                !seen,
                "{what}: {notes}"
            );
            // Both MPIs' Fortran libraries call some PMPI_ procedures themselves (MPICH's
            // PMPI_Bsend, Open MPI's all): sends may go uncounted.
            let fortran = if seen { "libmpichfort" } else { "libmpi_mpifh" };
            assert!(
                notes.contains("message counts prove nothing") && notes.contains(fortran),
                "{what}: {notes}"
            );
            assert_ne!(
                doc["ranks"][rank]["traffic"]["sends_complete"], true,
                "{what}"
            );
        }
        // So the ring is not proven from one snapshot by the counts.
        let (verdict, doc) = verdict_at_once(&job);
        assert_ne!(verdict, "deadlock", "{}: {:#}", mpi.name, doc["diagnosis"]);
    }
}

/// A split's rows on Open MPI: each blocked call's communicator has its members from the
/// records (world ranks, asked of the MPI when the split returned it), and the rows are
/// proven deadlocked.
#[test]
fn a_splits_members_come_from_the_records() {
    let mpi = debian_open_mpi();
    let n = 4;
    let job = start(&mpi, "ssend-rows", n, Some(&recorder()));
    let doc = dump_in(&job, "MPI_Ssend");
    for (rank, call) in calls(&doc).iter().enumerate() {
        let first = (rank - rank % 2) as i64;
        assert_eq!(
            call["members"],
            serde_json::json!([first, first + 1]),
            "{call:#}"
        );
        assert_eq!(call["sources"]["members"], "the hang recorder", "{call:#}");
        assert_eq!(call["peer"], ((rank + 1) % 2) as i64, "{call:#}");
    }
    assert_eq!(
        doc["diagnosis"]["verdict"], "deadlock",
        "{:#}",
        doc["diagnosis"]
    );
}

/// Open MPI's Fortran bindings loaded (a C program linked with them) bypass the recorder,
/// so its collective counts may be short: mqd does not use them, and says so; without
/// them loaded, the same barrier has its count.
#[test]
fn collective_counts_are_not_used_where_fortran_bypasses_the_recorder() {
    let mpi = debian_open_mpi();
    for (scenario, counted) in [("barrier", true), ("barrier-fortran", false)] {
        let job = start(&mpi, scenario, 3, Some(&recorder()));
        let deadline = Instant::now() + Duration::from_secs(60);
        let (call, notes) = loop {
            let (_, doc) = job_json(&job);
            let call = doc["ranks"][1]["threads"][0]["call"].clone();
            if call["called"] == "MPI_Barrier" {
                break (call, doc["ranks"][1]["notes"].to_string());
            }
            assert!(Instant::now() < deadline, "{scenario}: {doc:#}");
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(
            call["collective"].as_u64().is_some(),
            counted,
            "{scenario}: {call:#}"
        );
        assert_eq!(
            notes.contains("collective counts are not used"),
            !counted,
            "{scenario}: {notes}"
        );
    }
}

/// `mqd job --no-hold --json --per-rank` of the job: its verdict from one snapshot.
fn verdict_at_once(job: &Job) -> (String, serde_json::Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(["job", "--no-hold", "--json", "--per-rank"])
        .arg(job.mpiexec.id().to_string())
        .stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    let out = cmd.output().expect("mqd");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let verdict = doc["diagnosis"]["verdict"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    (verdict, doc)
}

/// The recorder's message counts prove a ring of blocked receives (and one of
/// synchronous sends, waits on several requests and on a nonblocking collective, by the
/// request table too; one on an intercommunicator) deadlocked from one snapshot, without
/// a hold, after the ranks traded messages (the counts must balance)
/// and after one of another tag was left unreceived (it cannot match); where a rank
/// computes and may still send, they prove nothing. On both ABIs, live and from cores.
#[test]
fn message_counts_prove_a_ring_of_receives_from_one_snapshot() {
    let lib = recorder();
    // (scenario, ranks, the main thread's call once blocked, proven deadlocked)
    let table: [(&str, usize, &str, bool); 13] = [
        ("counted-ring", 4, "MPI_Recv", true),
        // Receives on an intercommunicator, its peers in the remote group: counted on
        // both sides alike.
        ("groups-exchange", 4, "MPI_Recv", true),
        // World rank 1 computes: the receives from it, and rank 3's from rank 0, which
        // waits for it, may all complete.
        ("remote-computes", 4, "", false),
        // Waits on several requests and on a nonblocking collective, by the request
        // table: MPI_Waitall for its first receive, MPI_Waitany for receives alike.
        ("halo-waitall", 4, "MPI_Waitall", true),
        ("neighbours-waitany", 3, "MPI_Waitany", true),
        ("ibarrier-vs-irecv", 3, "MPI_Wait", true),
        // Rank 0 computes: its neighbours' MPI_Waitany may yet complete.
        ("partner-computes-waitany", 3, "", false),
        // Synchronous sends no receive of their destination can take, blocking or
        // waited for (the request table keeps the MPI_Issend's envelope).
        ("ssend-ring", 4, "MPI_Ssend", true),
        ("issend-ring", 3, "MPI_Wait", true),
        // The receive each MPI_Wait waits for, from the recorder's request table.
        ("wait-ring", 3, "MPI_Wait", true),
        ("tag-left-behind", 3, "MPI_Recv", true),
        ("headtohead", 2, "MPI_Recv", true),
        // Ranks 1 and 2 wait for rank 0, which computes: it may send yet.
        ("compute", 3, "", false),
    ];
    for mpi in [debian(), debian_open_mpi()] {
        for (scenario, n, call, proven) in table {
            let what = format!("{} {scenario}", mpi.slug);
            let job = start(&mpi, scenario, n, Some(&lib));
            if !call.is_empty() {
                dump_in(&job, call);
            }
            let (verdict, doc) = verdict_at_once(&job);
            let counted = doc["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["traffic"]["sends_complete"] == true)
                .count();
            if proven {
                assert_eq!(counted, n, "{what}: every rank's counts read: {doc:#}");
                assert_eq!(verdict, "deadlock", "{what}: {:#}", doc["diagnosis"]);
            } else {
                assert_ne!(verdict, "deadlock", "{what}: {:#}", doc["diagnosis"]);
            }
            if scenario == "counted-ring" {
                // Three messages of tag 5 each way, all received.
                let r0 = &doc["ranks"][0]["traffic"]["counts"];
                let to_right = r0
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["peer"] == 1 && c["tag"] == 5)
                    .unwrap_or_else(|| panic!("{what}: {r0:#}"));
                assert_eq!(to_right["sent"], 3, "{what}: {r0:#}");
                // The same proof from gdb's cores of the ranks, taken at one moment.
                let cores = gcore_one_snapshot(&job.ranks, &job.dir.join("core")).expect("gcore");
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
                cmd.args(["core", "--one-snapshot", "--json"])
                    .args(&cores)
                    .stdin(Stdio::null());
                default_signal_actions(&mut cmd);
                let out = cmd.output().expect("mqd core");
                let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
                assert_eq!(
                    doc["diagnosis"]["verdict"], "deadlock",
                    "{what} from cores: {:#}",
                    doc["diagnosis"]
                );
            }
        }
    }
}

/// A ring of standard sends that no receive can take: one snapshot proves each rank
/// deadlocked unless the MPI buffers its send (the standard lets it, so the verdict stays
/// undetermined, and nothing is left merely unproven); the hold proves the deadlock.
#[test]
fn a_ring_of_standard_sends_is_deadlocked_unless_the_mpi_buffers() {
    let lib = recorder();
    for mpi in [debian(), debian_open_mpi()] {
        let job = start(&mpi, "send-ring", 4, Some(&lib));
        dump_in(&job, "MPI_Send");
        let (verdict, doc) = verdict_at_once(&job);
        let doubts = &doc["diagnosis"]["doubts"];
        assert_eq!(verdict, "undetermined", "{}: {doubts:#}", mpi.slug);
        let kinds: Vec<&serde_json::Value> = doubts
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["doubt"])
            .collect();
        assert!(
            kinds.iter().any(|d| d["buffering"]["ranks"] == "0-3"),
            "{}: {doubts:#}",
            mpi.slug
        );
        assert!(
            kinds.iter().all(|d| d.get("unproven").is_none()),
            "{}: {doubts:#}",
            mpi.slug
        );
        let (code, doc) = job_json(&job);
        assert_eq!(
            (code, &doc["diagnosis"]["verdict"]),
            (Some(8), &serde_json::json!("deadlock")),
            "{} held: {:#}",
            mpi.slug,
            doc["diagnosis"]
        );
    }
}

/// Each way of sending and receiving is counted once, on both ABIs: rank 0's sends and
/// rank 1's receives balance tag by tag, the cancelled receive is not counted, and the
/// pair blocked on tag 9 is proven deadlocked from one snapshot.
#[test]
fn every_way_of_sending_and_receiving_is_counted_once() {
    for mpi in [debian(), debian_open_mpi()] {
        every_way_counted_once(&mpi);
    }
}

fn every_way_counted_once(mpi: &StockMpi) {
    let job = start(mpi, "every-way", 2, Some(&recorder()));
    dump_in(&job, "MPI_Recv");
    let (verdict, doc) = verdict_at_once(&job);
    let counts = |rank: usize| -> Vec<(i64, i64, i64, i64)> {
        let t = &doc["ranks"][rank]["traffic"];
        assert_eq!(t["sends_complete"], true, "{}: {t:#}", mpi.name);
        t["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let n = |k: &str| c[k].as_i64().unwrap();
                (n("peer"), n("tag"), n("sent"), n("received"))
            })
            .collect()
    };
    let sent: Vec<_> = [(1, 1, 2, 0), (1, 2, 1, 0), (1, 3, 2, 0), (1, 4, 1, 0)].into();
    let received: Vec<_> = [(0, 1, 0, 2), (0, 2, 0, 1), (0, 3, 0, 2), (0, 4, 0, 1)].into();
    assert_eq!(counts(0), sent, "{}: rank 0", mpi.name);
    assert_eq!(counts(1), received, "{}: rank 1", mpi.name);
    assert_eq!(verdict, "deadlock", "{}: {:#}", mpi.name, doc["diagnosis"]);
}

/// The MPI 5 standard ABI (PyPI's mpich's `libmpi_abi.so`: pointer-sized handles, the
/// standard's constants and status) is told apart at load and recorded as the others
/// are: each blocked call's envelope, live and from cores; every way of sending and
/// receiving counted once (a cancelled receive asked of the MPI); a skipped collective
/// and a skipped `MPI_Intercomm_create` proven from one snapshot, a computing member not.
#[test]
fn the_standard_abi_is_recorded_where_a_library_offers_it() {
    let mpi = pypi_standard_abi();
    head_to_head(&mpi);
    every_way_counted_once(&mpi);
    let table = [
        ("skip-world", 'a', true),
        ("intercomm-skip", 'x', true),
        ("computes", 'l', false),
    ];
    skips_proven(&mpi, &table);
}

/// The recorder's collective counts and its record of `MPI_Finalize` prove from one
/// snapshot, without a hold, what only a hold proved before: a collective some member
/// skipped to wait for a message (on the world, on a split's rows), a collective or
/// a receive that waits for a rank that finalized; and, by the message counts kept by
/// communicator, a receive on another duplicate of the world than the send's; a
/// window's fence or free some member skipped. A member that computes instead is no
/// deadlock. On both ABIs.
#[test]
fn collective_counts_prove_a_skipped_collective_from_one_snapshot() {
    // (scenario, the pattern's letter, proven deadlocked)
    let table = [
        ("skip-world", 'a', true),
        ("skip-row", 'r', true),
        ("finalized-early", 'f', true),
        ("wait-finalized", 'g', true),
        ("computes", 'l', false),
        // Counted by communicator: the message on the first duplicate is on its way,
        // nothing is on the second.
        ("wrong-duplicate", 'd', true),
        // A window's fence and free wait for every member of its group (counted on
        // the window); a fence that may not synchronise proves nothing, nor one whose
        // missing member computes.
        ("fence-vs-recv", 'w', true),
        ("free-vs-recv", 'v', true),
        ("noprecede-fence", 'n', false),
        ("fence-computes", 'c', false),
        // A neighbourhood collective waits for its topology's neighbours.
        ("neighbours-vs-barrier", 'k', true),
        ("neighbour-computes", 'j', false),
        // MPI_Intercomm_create waits for both groups: the remote one is the remote
        // leader's, which the local leader's record names.
        ("intercomm-skip", 'x', true),
        ("intercomm-skip-bridged", 'z', true),
        ("intercomm-computes", 'y', false),
    ];
    for mpi in [debian(), debian_open_mpi()] {
        skips_proven(&mpi, &table);
    }
}

/// Each scenario of `table` (its name, the pattern's letter, whether proven deadlocked)
/// on 4 ranks of `mpi` under the recorder, judged from single snapshots.
fn skips_proven(mpi: &StockMpi, table: &[(&str, char, bool)]) {
    let lib = recorder();
    for &(scenario, how, proven) in table {
        let what = format!("{} {scenario}", mpi.slug);
        let job = start_with(mpi, scenario, 4, Some(&lib), &how.to_string());
        // Once every rank reached its call: a deadlock is proven at the first
        // snapshot that shows it, a moving job never is.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut tries = 0;
        let (verdict, doc) = loop {
            std::thread::sleep(Duration::from_millis(300));
            let (verdict, doc) = verdict_at_once(&job);
            tries += 1;
            if (proven && verdict == "deadlock") || (!proven && tries == 4) {
                break (verdict, doc);
            }
            assert_ne!(verdict, "deadlock", "{what}: {:#}", doc["diagnosis"]);
            assert!(
                Instant::now() < deadline,
                "{what}: never proven: {:#}",
                doc["diagnosis"]
            );
        };
        if !proven {
            assert_ne!(verdict, "deadlock", "{what}: {:#}", doc["diagnosis"]);
            continue;
        }
        // Every rank's counts complete, the world's collectives counted alike.
        for r in doc["ranks"].as_array().unwrap() {
            let t = &r["traffic"];
            assert_eq!(t["collectives_complete"], true, "{what}: {t:#}");
            let world = t["comms"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["lineage"] == 1))
                .unwrap_or_else(|| panic!("{what}: no world: {t:#}"));
            assert!(world["entered"].as_u64() >= Some(2), "{what}: {world:#}");
        }
        let text = doc["diagnosis"].to_string();
        assert!(!text.contains("held"), "{what}: no hold: {text}");
    }
}
