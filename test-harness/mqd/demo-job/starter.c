/*
 * The fixture job starter, an `mpiexec` for the fixture ranks, with MPIR (the default
 * build, mqd-fixture-starter) or MPI2DD (built with -DMQD_STARTER_MPI2DD,
 * mqd-fixture-starter-mpi2dd) process acquisition.
 *
 *   mqd-fixture-starter [-n N] [--layout ch3|ch4|debugq4|debugq5] [--abort] [--mpi2dd]
 *                       [--remote-host HOST] [--simulated-hosts K]
 *                       [--] SCENARIO [RANK ARGS...]
 *
 * It forks N ranks running mqd-fixture-LAYOUT (from the starter's own directory; default
 * layout debugq5) with MQD_RANK, MQD_SIZE and `--scenario SCENARIO [RANK ARGS...]`, then,
 * once every pid is known:
 *   MPIR:   fills MPIR_proctable / MPIR_proctable_size, sets MPIR_debug_state = 1
 *           (MPIR_DEBUG_SPAWNED) and calls MPIR_Breakpoint through a volatile function
 *           pointer. If MPIR_being_debugged was non-zero when the starter began to spawn
 *           (a debugger writes it at the exec stop), the ranks get MQD_WAIT_FOR_GATE=1 and
 *           hold in MPII_Wait_for_debugger until their MPIR_debug_gate is set to 1.
 *   MPI2DD: fills MPI2DD_info (proctable of MPI2DD_PROCDESC, dll_name_64, debug_state
 *           MPI2DD_DEBUG_START) and calls MPI2DD_breakpoint. Ranks are not gated.
 * It prints one line `PIDS <pid of rank 0> ... <pid of rank N-1>` on stderr before that
 * breakpoint. --remote-host lists the last rank on HOST (as if it ran on another node).
 * --simulated-hosts K lists the ranks, in blocks of consecutive ranks, on K hosts named
 * sim0, sim1, ... (a multi-node job whose "nodes" are all this machine).
 * With --abort it then sets the abort string "rank 1 called
 * MPI_Abort(MPI_COMM_WORLD, 3)" and state 2 (MPIR_DEBUG_ABORTING; MPI2DD: 8) and calls the
 * breakpoint again; the ranks keep running.
 * Then it waits for the ranks, forwarding SIGTERM, SIGINT and SIGHUP to them (the ranks also
 * get SIGTERM if the starter dies). Exit status: 3 with --abort, else 0 if every rank exited
 * with 0, else 1; 2 on a usage error.
 * The MPIR build re-executes mqd-fixture-starter-mpi2dd when given --mpi2dd (a debugger
 * that launches the job should start mqd-fixture-starter-mpi2dd directly).
 */
#define _GNU_SOURCE
#include "mqd_mpir.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MQD_DLL_PATH
#error "build with -DMQD_DLL_PATH=\"/abs/path/libmqd_mpich.so\""
#endif

/* The ranks are RANK_PREFIX<layout> beside the starter (the demo of mqd names them apart). */
#ifndef MQD_RANK_PREFIX
#define MQD_RANK_PREFIX "mqd-fixture-"
#endif

#define ABORT_MESSAGE "rank 1 called MPI_Abort(MPI_COMM_WORLD, 3)"

#if defined(MQD_STARTER_MPI2DD)
/* ---------------------------------------------------------------- MPI2DD */

static char mqd_dll_name_64[] = MQD_DLL_PATH;
static char mqd_abort_message[] = ABORT_MESSAGE;

struct MPI2DD_INFO MPI2DD_info = {
    .magic = {'M', 'P', 'I', '2', 0x7f},
    .version = 1,
    .variant = 1,
    .debug_state = 0,
    .debugger_flags = 0,
    .mpi_flags = MPI2DD_MPIFLAG_I_AM_STARTER | MPI2DD_MPIFLAG_I_AM_DIR,
};

/* Keeps the debug information of the descriptor types. */
struct MPI2DD_SPAWNDESC *mqd_mpi2dd_spawndesc_anchor __attribute__((used));
struct MPI2DD_DIRECTORYENTRY *mqd_mpi2dd_directory_anchor __attribute__((used));

__attribute__((noinline, used)) void MPI2DD_breakpoint(void)
{
    __asm__ volatile("" ::: "memory");
}

static void (*volatile breakpoint_fn)(void) = MPI2DD_breakpoint;
#else
/* ---------------------------------------------------------------- MPIR */

MPIR_PROCDESC *MPIR_proctable = 0;
int MPIR_proctable_size = 0;
volatile int MPIR_debug_state = MPIR_NULL;
volatile int MPIR_being_debugged = 0;
char *MPIR_debug_abort_string = 0;
int MPIR_i_am_starter = 1;
int MPIR_partial_attach_ok = 1;

__attribute__((noinline, used)) void MPIR_Breakpoint(void)
{
    __asm__ volatile("" ::: "memory");
}

/* As hydra's MPIR_breakpointFn: a call through a pointer is never inlined. */
void (*volatile MPIR_breakpointFn)(void) = MPIR_Breakpoint;
#endif

static pid_t *children = 0;
static volatile sig_atomic_t n_children = 0;

static void forward(int sig)
{
    (void)sig;
    for (int i = 0; i < n_children; i++) {
        if (children[i] > 0) {
            kill(children[i], SIGTERM);
        }
    }
}

static void usage(FILE *to)
{
    fprintf(to, "usage: mqd-fixture-starter%s [-n N] [--layout ch3|ch4|debugq4|debugq5] "
                "[--abort] [--mpi2dd] [--remote-host HOST] [--simulated-hosts K] [--] SCENARIO "
                "[RANK ARGS...]\n",
#if defined(MQD_STARTER_MPI2DD)
            "-mpi2dd"
#else
            ""
#endif
    );
}

static char *self_dir(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        perror("mqd-fixture-starter: /proc/self/exe");
        exit(1);
    }
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (slash) {
        *slash = 0;
    }
    return path;
}

static void breakpoint(void)
{
#if defined(MQD_STARTER_MPI2DD)
    breakpoint_fn();
#else
    MPIR_breakpointFn();
#endif
}

int main(int argc, char **argv)
{
    int n = 1;
    const char *layout = "debugq5";
    int abort_job = 0;
    int mpi2dd = 0;
    const char *remote_host = 0; /* the last rank is listed on this host */
    long simulated = 0;           /* ranks listed on sim0..sim<K-1> */
    int first = -1; /* index of SCENARIO in argv */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end = 0;
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 1 || v > 4096) {
                fprintf(stderr, "mqd-fixture-starter: bad -n '%s'\n", argv[i]);
                return 2;
            }
            n = (int)v;
        } else if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) {
            layout = argv[++i];
        } else if (strcmp(argv[i], "--abort") == 0) {
            abort_job = 1;
        } else if (strcmp(argv[i], "--mpi2dd") == 0) {
            mpi2dd = 1;
        } else if (strcmp(argv[i], "--remote-host") == 0 && i + 1 < argc) {
            remote_host = argv[++i];
        } else if (strcmp(argv[i], "--simulated-hosts") == 0 && i + 1 < argc) {
            char *end = 0;
            simulated = strtol(argv[++i], &end, 10);
            if (!end || *end || simulated < 1 || simulated > 4096) {
                fprintf(stderr, "mqd-fixture-starter: bad --simulated-hosts '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--") == 0) {
            first = i + 1 < argc ? i + 1 : -1;
            break;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "mqd-fixture-starter: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (first < 0) {
        fprintf(stderr, "mqd-fixture-starter: no scenario given\n");
        usage(stderr);
        return 2;
    }
    if (strcmp(layout, "ch3") && strcmp(layout, "ch4") && strcmp(layout, "debugq4") &&
        strcmp(layout, "debugq5")) {
        fprintf(stderr, "mqd-fixture-starter: unknown layout '%s'\n", layout);
        return 2;
    }
    char *dir = self_dir();

#if !defined(MQD_STARTER_MPI2DD)
    if (mpi2dd) {
        char exe[PATH_MAX];
        snprintf(exe, sizeof exe, "%s/mqd-fixture-starter-mpi2dd", dir);
        char **args = calloc((size_t)argc + 1, sizeof *args);
        int k = 0;
        args[k++] = exe;
        for (int i = 1; i < argc; i++) {
            if (i >= first || strcmp(argv[i], "--mpi2dd") != 0) {
                args[k++] = argv[i];
            }
        }
        execv(exe, args);
        fprintf(stderr, "mqd-fixture-starter: cannot run %s: %s\n", exe, strerror(errno));
        return 1;
    }
#else
    (void)mpi2dd;
#endif

    static char rank_exe[PATH_MAX];
    snprintf(rank_exe, sizeof rank_exe, "%s/" MQD_RANK_PREFIX "%s", dir, layout);
    if (access(rank_exe, X_OK) != 0) {
        fprintf(stderr, "mqd-fixture-starter: cannot run %s: %s\n", rank_exe, strerror(errno));
        return 1;
    }
    static char host[256];
    if (gethostname(host, sizeof host - 1) != 0) {
        strcpy(host, "localhost");
    }

#if defined(MQD_STARTER_MPI2DD)
    int gate = 0;
#else
    int gate = MPIR_being_debugged != 0;
#endif

    children = calloc((size_t)n, sizeof *children);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, 0);
    sigaction(SIGINT, &sa, 0);
    sigaction(SIGHUP, &sa, 0);

    /* Rank argv: RANK_EXE --scenario SCENARIO [RANK ARGS...] */
    int extra = argc - first - 1;
    char **rank_argv = calloc((size_t)extra + 4, sizeof *rank_argv);
    rank_argv[0] = rank_exe;
    rank_argv[1] = "--scenario";
    rank_argv[2] = argv[first];
    for (int i = 0; i < extra; i++) {
        rank_argv[3 + i] = argv[first + 1 + i];
    }

    pid_t me = getpid();
    sigset_t all, old;
    sigfillset(&all);
    for (int r = 0; r < n; r++) {
        sigprocmask(SIG_BLOCK, &all, &old);
        pid_t pid = fork();
        if (pid < 0) {
            perror("mqd-fixture-starter: fork");
            forward(SIGTERM);
            return 1;
        }
        if (pid == 0) {
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            sigprocmask(SIG_SETMASK, &old, 0);
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != me) {
                _exit(1);
            }
            char value[32];
            snprintf(value, sizeof value, "%d", r);
            setenv("MQD_RANK", value, 1);
            snprintf(value, sizeof value, "%d", n);
            setenv("MQD_SIZE", value, 1);
            if (gate) {
                setenv("MQD_WAIT_FOR_GATE", "1", 1);
            } else {
                unsetenv("MQD_WAIT_FOR_GATE");
            }
            execv(rank_exe, rank_argv);
            fprintf(stderr, "mqd-fixture-starter: cannot run %s: %s\n", rank_exe,
                    strerror(errno));
            _exit(127);
        }
        children[r] = pid;
        n_children = r + 1;
        sigprocmask(SIG_SETMASK, &old, 0);
    }

    /* Every pid is known: publish the job. */
    fprintf(stderr, "PIDS");
    for (int r = 0; r < n; r++) {
        fprintf(stderr, " %d", (int)children[r]);
    }
    fprintf(stderr, "\n");
    fflush(stderr);

    /* Each rank's host name. */
    char **hosts = calloc((size_t)n, sizeof *hosts);
    for (int r = 0; r < n; r++) {
        hosts[r] = host;
        if (remote_host && r == n - 1) {
            hosts[r] = (char *)remote_host;
        } else if (simulated > 0) {
            hosts[r] = malloc(32);
            snprintf(hosts[r], 32, "sim%ld", (long)r * (simulated < n ? simulated : n) / n);
        }
    }

#if defined(MQD_STARTER_MPI2DD)
    static char world_id[64];
    snprintf(world_id, sizeof world_id, "mqd-fixture-job-%d", (int)me);
    struct MPI2DD_PROCDESC *table = calloc((size_t)n, sizeof *table);
    for (int r = 0; r < n; r++) {
        table[r].host_name = (MPI2DD_ADDR_T)(uintptr_t)hosts[r];
        table[r].executable_name = (MPI2DD_ADDR_T)(uintptr_t)rank_exe;
        table[r].spawn_desc = 0;
        table[r].comm_world_id = (MPI2DD_ADDR_T)(uintptr_t)world_id;
        table[r].pid = (MPI2DD_INT32_T)children[r];
        table[r].rank = r;
    }
    MPI2DD_info.dll_name_32 = 0;
    MPI2DD_info.dll_name_64 = (MPI2DD_ADDR_T)(uintptr_t)mqd_dll_name_64;
    MPI2DD_info.proctable = (MPI2DD_ADDR_T)(uintptr_t)table;
    MPI2DD_info.proctable_size = n;
    MPI2DD_info.debug_state = MPI2DD_DEBUG_START;
#else
    MPIR_PROCDESC *table = calloc((size_t)n, sizeof *table);
    for (int r = 0; r < n; r++) {
        table[r].host_name = hosts[r];
        table[r].executable_name = rank_exe;
        table[r].pid = (int)children[r];
    }
    MPIR_proctable = table;
    MPIR_proctable_size = n;
    MPIR_debug_state = MPIR_DEBUG_SPAWNED;
#endif
    breakpoint();

    if (abort_job) {
#if defined(MQD_STARTER_MPI2DD)
        MPI2DD_info.abort_string = (MPI2DD_ADDR_T)(uintptr_t)mqd_abort_message;
        MPI2DD_info.debug_state = MPI2DD_DEBUG_ABORT;
#else
        MPIR_debug_abort_string = ABORT_MESSAGE;
        MPIR_debug_state = MPIR_DEBUG_ABORTING;
#endif
        breakpoint();
    }

    int failed = 0;
    int left = n;
    while (left > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        for (int r = 0; r < n; r++) {
            if (children[r] == pid) {
                children[r] = -1;
                left--;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    failed = 1;
                }
            }
        }
    }
    if (abort_job) {
        return 3;
    }
    return failed ? 1 : 0;
}
