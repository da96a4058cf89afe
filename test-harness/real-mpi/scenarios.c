/*
 * Real MPI programs for mqd's end-to-end tests against a real MPICH
 * (test-harness/tests/real_mpich.rs), built with that MPICH's `mpicc -g -O0` and run
 * with its `mpiexec -n N ./scenarios --scenario NAME`.
 *
 * Each scenario builds known message queues, drives MPICH's progress engine until
 * every message it expects has arrived (MPI_Iprobe, which leaves a message in the
 * unexpected queue), then prints, flushed, one line
 *
 *     READY <rank> <pid> [state=<n>] <key>=0x<address> ...
 *
 * with the address of every user buffer it queued, and waits outside MPI
 * (`while (usr1 < n) usleep(...)`: nothing progresses while it waits) for SIGUSR1.
 * On SIGUSR1 it cleans up (receives, cancels and completes every request, frees its
 * communicators), calls MPI_Finalize and prints `DONE <rank>`; `freed` first moves to
 * its second state (and prints READY again), then waits for a second SIGUSR1. `ring`
 * never gets there: every rank is blocked inside MPI_Ssend; the test kills the job.
 *
 * Ordering: messages from different peers arrive in any order, so a scenario whose
 * receiver holds several unexpected messages on one communicator sends them in steps
 * separated by MPI_Barrier: a peer sends the message of step k+1 only after every
 * rank has seen the messages of step k.
 *
 * Scenarios (left = (rank + N - 1) % N, right = (rank + 1) % N; counts in MPI_INTs):
 *   wildcards  (N=4) posted receives on COMM_WORLD: (ANY_SOURCE, ANY_TAG, w0, 1),
 *              (ANY_SOURCE, 7, w1, 10), (left, ANY_TAG, w2, 20), (left, 42, w3, 30); on
 *              COMM_SELF (0, 3, w4, 4).
 *   unexpected (N=4) posted receive (left, 200, u0, 5); unexpected, in this order:
 *              left's MPI_Send (tag 100, 10 ints: eager), right's MPI_Isend (tag 101,
 *              262144 ints = 1 MiB: rendezvous, only the request-to-send arrived), its own
 *              MPI_Isend on COMM_SELF (tag 102, 2 ints), left's MPI_Send (tag 103, 0 ints).
 *              Pending sends: the 1 MiB MPI_Isend to left (u2, tag 101) and the
 *              COMM_SELF MPI_Isend (u3, tag 102).
 *   sends      (N=4) MPI_Isend (s1, 10 ints, right, tag 2: eager, completed and not
 *              waited), MPI_Issend (s2, 20 ints, left, tag 3), MPI_Isend (s3, 262144
 *              ints, right, tag 4: rendezvous), MPI_Issend on COMM_SELF (s4, 1 int, 0,
 *              tag 6); the matching unexpected messages: left's tag 2, right's tag 3,
 *              left's tag 4, its own tag 6.
 *   ring       (N=4) MPI_Comm_dup named "ring"; every rank MPI_Ssend(r0, 1000 ints,
 *              right, tag 5, ring): deadlock. READY is printed just before MPI_Ssend.
 *   comms      (N=5) "dup of world" = dup(COMM_WORLD): posted (ANY_SOURCE, 19, c0, 10);
 *              "split even"/"split odd" = split(COMM_WORLD, rank % 2): MPI_Isend (c4, 2
 *              ints, to split rank +1, tag 8), unexpected from split rank -1, tag 8;
 *              "created" = MPI_Comm_create(COMM_WORLD, world ranks {4, 1, 0}) (world
 *              ranks 2 and 3 are not members): posted (created rank +1 mod 3, 21, c5, 4);
 *              "inter" = MPI_Intercomm_create of the two split halves (even: 3 ranks,
 *              odd: 2): local ranks 0 and 1 MPI_Isend (c3, 3 ints, remote rank = own local
 *              rank, tag 9) and hold the remote's as unexpected; everyone posts
 *              (remote rank (local rank + 1) % remote size, 11, c1, 3);
 *              a 127-character name (byte i = 'a' + i % 26) on a dup: posted (0, 1, c2, 1);
 *              "freed" = a dup freed before READY.
 *   freed      (N=2) state 1: "kept" = dup: posted (0, 6, f0, 2); "to be freed" = dup:
 *              posted (ANY_SOURCE, 5, f1, 1). SIGUSR1 -> state 2: that receive cancelled,
 *              "to be freed" freed, "after free" = dup: posted (1, 8, f2, 3).
 *   big        (N=2) 10,000 posted receives on COMM_WORLD: receive i from ANY_SOURCE when
 *              i % 10 == 9, else from rank i % N, tag i, 1 + i % 4 ints at big + 16 * i
 *              bytes (key big = base address).
 */
#define _DEFAULT_SOURCE /* usleep */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG_COUNT 10000
#define RNDV_INTS 262144 /* 1 MiB: above nemesis' shared-memory eager limit */

static volatile sig_atomic_t usr1;
static int rank, size, left, right;
static char ready_line[4096];
static size_t ready_used;

static void on_usr1(int sig)
{
    (void) sig;
    usr1++;
}

static void fail(const char *what)
{
    fprintf(stderr, "scenarios: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Adds `key=0x<address>` to the next READY line. */
static void note(const char *key, const void *addr)
{
    ready_used += (size_t) snprintf(ready_line + ready_used, sizeof ready_line - ready_used,
                                    " %s=0x%lx", key, (unsigned long) (uintptr_t) addr);
}

static void ready(int state)
{
    char st[32] = "";
    if (state)
        snprintf(st, sizeof st, " state=%d", state);
    /* One write of one line: hydra forwards it whole. */
    printf("READY %d %d%s%s\n", rank, (int) getpid(), st, ready_line);
    fflush(stdout);
    ready_used = 0;
    ready_line[0] = 0;
}

/* Waits outside MPI (no progress) for the n-th SIGUSR1. */
static void wait_usr1(int n)
{
    while (usr1 < n)
        usleep(10000);
}

/* Drives progress until a message (source, tag) on comm sits in the unexpected queue. */
static void arrived(int source, int tag, MPI_Comm comm)
{
    int flag = 0;
    while (!flag)
        MPI_Iprobe(source, tag, comm, &flag, MPI_STATUS_IGNORE);
}

static void wait_all(int n, MPI_Request *reqs)
{
    for (int i = 0; i < n; i++)
        MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
}

static void cancel_all(int n, MPI_Request *reqs)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL)
            MPI_Cancel(&reqs[i]);
    wait_all(n, reqs);
}

static MPI_Comm named_dup(MPI_Comm of, const char *name)
{
    MPI_Comm c;
    MPI_Comm_dup(of, &c);
    MPI_Comm_set_name(c, name);
    return c;
}

/* ------------------------------------------------------------------------------ */

static int w0[1], w1[10], w2[20], w3[30], w4[4];

static void wildcards(void)
{
    MPI_Request r[5];
    MPI_Irecv(w0, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(w1, 10, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &r[1]);
    MPI_Irecv(w2, 20, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &r[2]);
    MPI_Irecv(w3, 30, MPI_INT, left, 42, MPI_COMM_WORLD, &r[3]);
    MPI_Irecv(w4, 4, MPI_INT, 0, 3, MPI_COMM_SELF, &r[4]);
    note("w0", w0);
    note("w1", w1);
    note("w2", w2);
    note("w3", w3);
    note("w4", w4);
    ready(0);
    wait_usr1(1);
    cancel_all(5, r);
}

static int u0[5], u1[10], u3[2];
static int *u2;

static void unexpected(void)
{
    MPI_Request posted, big, self;
    int in100[10], in102[2];
    int *in101 = malloc(RNDV_INTS * sizeof(int));
    u2 = calloc(RNDV_INTS, sizeof(int));
    if (!u2 || !in101)
        fail("out of memory");
    MPI_Irecv(u0, 5, MPI_INT, left, 200, MPI_COMM_WORLD, &posted);
    /* Step 1: eager, from left. */
    MPI_Send(u1, 10, MPI_INT, right, 100, MPI_COMM_WORLD);
    arrived(left, 100, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Step 2: rendezvous, from right. */
    MPI_Isend(u2, RNDV_INTS, MPI_INT, left, 101, MPI_COMM_WORLD, &big);
    arrived(right, 101, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Step 3: to itself. */
    MPI_Isend(u3, 2, MPI_INT, 0, 102, MPI_COMM_SELF, &self);
    arrived(0, 102, MPI_COMM_SELF);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Step 4: empty, from left. */
    MPI_Send(NULL, 0, MPI_INT, right, 103, MPI_COMM_WORLD);
    arrived(left, 103, MPI_COMM_WORLD);
    note("u0", u0);
    note("u1", u1);
    note("u2", u2);
    note("u3", u3);
    ready(0);
    wait_usr1(1);
    MPI_Recv(in100, 10, MPI_INT, left, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(in101, RNDV_INTS, MPI_INT, right, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(in102, 2, MPI_INT, 0, 102, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Recv(NULL, 0, MPI_INT, left, 103, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    cancel_all(1, &posted);
    MPI_Wait(&big, MPI_STATUS_IGNORE);
    MPI_Wait(&self, MPI_STATUS_IGNORE);
    free(in101);
    free(u2);
}

static int s1[10], s2[20], s4[1];
static int *s3;

static void sends(void)
{
    MPI_Request r[4];
    int in2[10], in3[20], in6[1];
    int *in4 = malloc(RNDV_INTS * sizeof(int));
    s3 = calloc(RNDV_INTS, sizeof(int));
    if (!s3 || !in4)
        fail("out of memory");
    MPI_Isend(s1, 10, MPI_INT, right, 2, MPI_COMM_WORLD, &r[0]);
    arrived(left, 2, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Issend(s2, 20, MPI_INT, left, 3, MPI_COMM_WORLD, &r[1]);
    arrived(right, 3, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Isend(s3, RNDV_INTS, MPI_INT, right, 4, MPI_COMM_WORLD, &r[2]);
    arrived(left, 4, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Issend(s4, 1, MPI_INT, 0, 6, MPI_COMM_SELF, &r[3]);
    arrived(0, 6, MPI_COMM_SELF);
    note("s1", s1);
    note("s2", s2);
    note("s3", s3);
    note("s4", s4);
    ready(0);
    wait_usr1(1);
    MPI_Recv(in2, 10, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(in3, 20, MPI_INT, right, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(in4, RNDV_INTS, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(in6, 1, MPI_INT, 0, 6, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    wait_all(4, r);
    free(in4);
    free(s3);
}

static int r0[1000];

static void ring(void)
{
    MPI_Comm ring = named_dup(MPI_COMM_WORLD, "ring");
    note("r0", r0);
    ready(0);
    /* Every rank sends first: nobody ever receives. */
    MPI_Ssend(r0, 1000, MPI_INT, right, 5, ring);
    fail("MPI_Ssend of the ring returned");
}

static int c0[10], c1[3], c2[1], c3[3], c4[2], c5[4];

static void comms(void)
{
    char name127[128];
    MPI_Comm dup, split, created, inter, longc, freed;
    MPI_Group world_group, created_group;
    MPI_Request r[6];
    int nr = 0;
    int even = rank % 2 == 0;
    int srank, ssize, lrank, rsize, in3[3], in4[2];
    const int members[3] = { 4, 1, 0 };

    if (size != 5)
        fail("comms needs 5 ranks");
    for (int i = 0; i < 127; i++)
        name127[i] = (char) ('a' + i % 26);
    name127[127] = 0;

    dup = named_dup(MPI_COMM_WORLD, "dup of world");
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    MPI_Comm_set_name(split, even ? "split even" : "split odd");
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, 3, members, &created_group);
    MPI_Comm_create(MPI_COMM_WORLD, created_group, &created);
    if (created != MPI_COMM_NULL)
        MPI_Comm_set_name(created, "created");
    MPI_Intercomm_create(split, 0, MPI_COMM_WORLD, even ? 1 : 0, 99, &inter);
    MPI_Comm_set_name(inter, "inter");
    longc = named_dup(MPI_COMM_WORLD, name127);
    freed = named_dup(MPI_COMM_WORLD, "freed");
    MPI_Comm_free(&freed);
    MPI_Group_free(&created_group);
    MPI_Group_free(&world_group);

    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_remote_size(inter, &rsize);

    MPI_Irecv(c0, 10, MPI_INT, MPI_ANY_SOURCE, 19, dup, &r[nr++]);
    MPI_Irecv(c1, 3, MPI_INT, (lrank + 1) % rsize, 11, inter, &r[nr++]);
    MPI_Irecv(c2, 1, MPI_INT, 0, 1, longc, &r[nr++]);
    if (created != MPI_COMM_NULL) {
        int crank;
        MPI_Comm_rank(created, &crank);
        MPI_Irecv(c5, 4, MPI_INT, (crank + 1) % 3, 21, created, &r[nr++]);
    }
    int posted = nr;
    if (lrank < 2)
        MPI_Isend(c3, 3, MPI_INT, lrank, 9, inter, &r[nr++]);
    MPI_Isend(c4, 2, MPI_INT, (srank + 1) % ssize, 8, split, &r[nr++]);
    if (lrank < 2)
        arrived(lrank, 9, inter);
    arrived((srank + ssize - 1) % ssize, 8, split);

    note("c0", c0);
    note("c1", c1);
    note("c2", c2);
    note("c3", c3);
    note("c4", c4);
    note("c5", c5);
    ready(0);
    wait_usr1(1);

    if (lrank < 2)
        MPI_Recv(in3, 3, MPI_INT, lrank, 9, inter, MPI_STATUS_IGNORE);
    MPI_Recv(in4, 2, MPI_INT, (srank + ssize - 1) % ssize, 8, split, MPI_STATUS_IGNORE);
    cancel_all(posted, r);
    wait_all(nr - posted, r + posted);
    MPI_Comm_free(&inter);
    if (created != MPI_COMM_NULL)
        MPI_Comm_free(&created);
    MPI_Comm_free(&longc);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
}

static int f0[2], f1[1], f2[3];

static void freed(void)
{
    MPI_Request p0, p1, p2;
    MPI_Comm kept = named_dup(MPI_COMM_WORLD, "kept");
    MPI_Comm gone = named_dup(MPI_COMM_WORLD, "to be freed");
    MPI_Irecv(f0, 2, MPI_INT, 0, 6, kept, &p0);
    MPI_Irecv(f1, 1, MPI_INT, MPI_ANY_SOURCE, 5, gone, &p1);
    note("f0", f0);
    note("f1", f1);
    ready(1);
    wait_usr1(1);

    cancel_all(1, &p1);
    MPI_Comm_free(&gone);
    MPI_Comm after = named_dup(MPI_COMM_WORLD, "after free");
    MPI_Irecv(f2, 3, MPI_INT, 1 % size, 8, after, &p2);
    note("f0", f0);
    note("f2", f2);
    ready(2);
    wait_usr1(2);

    cancel_all(1, &p0);
    cancel_all(1, &p2);
    MPI_Comm_free(&after);
    MPI_Comm_free(&kept);
}

static int big_buffer[BIG_COUNT * 4];

static void big(void)
{
    static MPI_Request r[BIG_COUNT];
    for (int i = 0; i < BIG_COUNT; i++) {
        int source = i % 10 == 9 ? MPI_ANY_SOURCE : i % size;
        MPI_Irecv(big_buffer + 4 * i, 1 + i % 4, MPI_INT, source, i, MPI_COMM_WORLD, &r[i]);
    }
    note("big", big_buffer);
    ready(0);
    wait_usr1(1);
    cancel_all(BIG_COUNT, r);
}


/* ------------------------------------------------------------------------------ */
/* Diagnosis scenarios (test-harness/tests/real_diagnosis.rs): each rank prints READY, then
 * blocks inside MPI or "computes" (sleeps outside MPI) forever; the test kills the job.
 * `completes` exchanges messages for about 2.5 s and finishes normally. */

static int d0[4];

/* Computes forever: sleeps outside MPI (no progress). */
static void compute_forever(void)
{
    for (;;)
        usleep(10000);
}

static void need_size(int n)
{
    if (size != n)
        fail("wrong number of ranks for this scenario");
}

/* headtohead (N=2): each rank MPI_Recv(other, tag 1): both block. */
static void headtohead(void)
{
    need_size(2);
    MPI_Barrier(MPI_COMM_WORLD);
    note("d0", d0);
    ready(0);
    MPI_Recv(d0, 1, MPI_INT, 1 - rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fail("MPI_Recv of headtohead returned");
}

/* tagmismatch (N=2): rank 1 MPI_Send (eager, tag 5) to rank 0; rank 0 MPI_Recv(1, tag 6). */
static void tagmismatch(void)
{
    need_size(2);
    if (rank == 1)
        MPI_Send(d0, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
    else
        arrived(1, 5, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    note("d0", d0);
    ready(0);
    if (rank == 0) {
        MPI_Recv(d0, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fail("MPI_Recv of tagmismatch returned");
    }
    compute_forever();
}

/* sourcemismatch (N=3): rank 2 MPI_Send (tag 5) to rank 0; rank 0 MPI_Recv(1, tag 5); ranks
 * 1 and 2 compute. */
static void sourcemismatch(void)
{
    need_size(3);
    if (rank == 2)
        MPI_Send(d0, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
    else if (rank == 0)
        arrived(2, 5, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    note("d0", d0);
    ready(0);
    if (rank == 0) {
        MPI_Recv(d0, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fail("MPI_Recv of sourcemismatch returned");
    }
    compute_forever();
}

/* anysource (N=2): rank 0 MPI_Recv(ANY_SOURCE, tag 3); rank 1 computes. */
static void anysource(void)
{
    need_size(2);
    MPI_Barrier(MPI_COMM_WORLD);
    note("d0", d0);
    ready(0);
    if (rank == 0) {
        MPI_Recv(d0, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fail("MPI_Recv of anysource returned");
    }
    compute_forever();
}

/* compute (N=3): ranks 1 and 2 MPI_Recv(0, tag 4); rank 0 computes. */
static void compute(void)
{
    need_size(3);
    MPI_Barrier(MPI_COMM_WORLD);
    note("d0", d0);
    ready(0);
    if (rank != 0) {
        MPI_Recv(d0, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fail("MPI_Recv of compute returned");
    }
    compute_forever();
}

/* completes (N=2): 25 exchanges 100 ms apart (about 2.5 s), then a normal finish. */
static void completes(void)
{
    int out[4] = { rank, 0, 0, 0 }, in[4];
    need_size(2);
    MPI_Barrier(MPI_COMM_WORLD);
    note("d0", d0);
    ready(0);
    for (int i = 0; i < 25; i++) {
        out[1] = i;
        MPI_Sendrecv(out, 4, MPI_INT, 1 - rank, 7, in, 4, MPI_INT, 1 - rank, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        usleep(100000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *scenario = NULL;
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--scenario") == 0)
            scenario = argv[i + 1];
    if (!scenario) {
        /* Run as a link named after the scenario: `mpiexec -n 4 ./ring`. */
        const char *slash = strrchr(argv[0], '/');
        scenario = slash ? slash + 1 : argv[0];
    }

    if (strcmp(scenario, "wildcards") == 0)
        wildcards();
    else if (strcmp(scenario, "unexpected") == 0)
        unexpected();
    else if (strcmp(scenario, "sends") == 0)
        sends();
    else if (strcmp(scenario, "ring") == 0)
        ring();
    else if (strcmp(scenario, "comms") == 0)
        comms();
    else if (strcmp(scenario, "freed") == 0)
        freed();
    else if (strcmp(scenario, "big") == 0)
        big();
    else if (strcmp(scenario, "headtohead") == 0)
        headtohead();
    else if (strcmp(scenario, "tagmismatch") == 0)
        tagmismatch();
    else if (strcmp(scenario, "sourcemismatch") == 0)
        sourcemismatch();
    else if (strcmp(scenario, "anysource") == 0)
        anysource();
    else if (strcmp(scenario, "compute") == 0)
        compute();
    else if (strcmp(scenario, "completes") == 0)
        completes();
    else
        fail("unknown scenario: use --scenario wildcards|unexpected|sends|ring|comms|freed|big"
             "|headtohead|tagmismatch|sourcemismatch|anysource|compute|completes");

    MPI_Finalize();
    printf("DONE %d\n", rank);
    fflush(stdout);
    return 0;
}
