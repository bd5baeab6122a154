/* mpi.c - the processes of an MPI job (world.h, include/tgraph.h "processes") and the
 * collectives of communicators that span them (comm.h, "communicators spanning
 * processes"); built only when CMake finds MPI. docs/mpi.md says what users see.
 *
 * Two levels. A spanning communicator of n ranks has nlocal of them on each process, and a
 * collective runs first between those threads, through the engine of comm.c (`local`),
 * then as one MPI call per process, made by the process's first rank (the leader) on the
 * axis's own MPI communicator (a duplicate of W.world, tgraph's copy of MPI_COMM_WORLD made
 * when the process joins the job, so that nothing a program sends or calls on
 * MPI_COMM_WORLD matches tgraph's messages). The other threads publish their buffers in `send` /
 * `recv` before a local barrier; the leader makes the MPI call and writes their results into them;
 * a second barrier lets them return. A leader that fails aborts the local communicator instead, so
 * its threads return too. With one rank per process there is no local level: the rank
 * calls MPI on its own buffers.
 *
 * Order and determinism. Every process runs the same compiled program, so its leaders call
 * the same collectives in the same order; pmap calls that span processes run one at a time
 * per process (tg_world_lock), and the MPI communicators are duplicated in that order.
 * Sums of f32 and f64 use MPI_SUM; the other reductions (integers, which wrap; max and min,
 * where a NaN wins; the extreme with its count of holders) use operations made here from
 * comm.c's kernels. Open MPI picks its algorithm from P and the size alone, so results are
 * the same run to run for a given P.
 *
 * Waiting and failures. Every MPI operation is started non-blocking and waited for by
 * polling (spin, yield, then sleep 100 us), which also watches three things: a failure
 * note from another process (a message with tag TAG_FAULT on W.world, received into a
 * request posted when the job is joined), an abort of the local communicator, and
 * the timeout TGRAPH_MPI_TIMEOUT (seconds, default 300; 0: none). A process that fails
 * sends its note to every other one in tg_world_finish, waits up to TGRAPH_MPI_GRACE
 * seconds (default 5) for their acknowledgements, and calls MPI_Abort; a process that gets
 * a note acknowledges it and fails with "MPI rank R failed: <its message>". A process that
 * dies (a crash, a kill) is mpirun's to report: it ends the job and names the rank.
 */
#include "comm.h"
#include "world.h"

#include <mpi.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TAG_FAULT 7301
#define TAG_ACK   7302

/* The job, as this process sees it (see world.h on why it is process-wide). */
static struct {
    pthread_once_t once;
    int rank, size;
    bool joined;    /* tgraph called MPI_Init_thread, so it finalizes */
    MPI_Comm world; /* tgraph's duplicate of MPI_COMM_WORLD (a program's own messages and
                       collectives on MPI_COMM_WORLD never match tgraph's) */
    double timeout, grace;
    MPI_Request fault_req; /* the posted receive of a failure note */
    char fault_buf[TG_ERRMSG_MAX];
    pthread_mutex_t poll_mu; /* one thread tests fault_req at a time */
    atomic_int failed;       /* the rank whose note arrived, -1 */
    char failed_msg[TG_ERRMSG_MAX];
    atomic_bool finished;
    pthread_mutex_t call_mu;                           /* tg_world_lock */
    MPI_Datatype type[TG_DT_COUNT], pair[TG_DT_COUNT]; /* elements; (element, int32) */
    MPI_Op op[3], extreme[3];                          /* by tg_comm_op */
} W = {.once = PTHREAD_ONCE_INIT,
       .size = 1,
       .failed = -1,
       .poll_mu = PTHREAD_MUTEX_INITIALIZER,
       .call_mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- the reductions MPI does not have ---- */

static tg_dtype dtype_of(const MPI_Datatype *t, const MPI_Datatype *table) {
    for (int d = 0; d < TG_DT_COUNT; d++)
        if (table[d] != MPI_DATATYPE_NULL && table[d] == *t) return (tg_dtype)d;
    TG_ASSERT(!"an MPI datatype made by mpi.c");
    return TG_DT_F32;
}

#define DEF_OP(name, OP)                                                                           \
    static void name(void *in, void *inout, int *len, MPI_Datatype *t) {                           \
        tg_comm_combine(OP, dtype_of(t, W.type), inout, in, (size_t)*len);                         \
    }
DEF_OP(op_sum, TG_COMM_SUM)
DEF_OP(op_max, TG_COMM_MAX)
DEF_OP(op_min, TG_COMM_MIN)

/* (value, holders) pairs: the extreme of the values, and the holders of whichever side
 * holds it added up */
static void extreme(tg_comm_op op, void *in, void *inout, int len, MPI_Datatype *t) {
    tg_dtype dt = dtype_of(t, W.pair);
    size_t es = tg_dtype_size(dt);
    unsigned char *a = in, *b = inout, m[8];
    for (int i = 0; i < len; i++, a += es + 4, b += es + 4) {
        int32_t ha, hb, ea = 0, eb = 0;
        memcpy(m, b, es);
        tg_comm_combine(op, dt, m, a, 1);
        tg_comm_count_equal(dt, &ea, m, a, 1);
        tg_comm_count_equal(dt, &eb, m, b, 1);
        memcpy(&ha, a + es, 4);
        memcpy(&hb, b + es, 4);
        hb = (ea ? ha : 0) + (eb ? hb : 0);
        memcpy(b, m, es);
        memcpy(b + es, &hb, 4);
    }
}
static void op_ext_max(void *in, void *inout, int *len, MPI_Datatype *t) {
    extreme(TG_COMM_MAX, in, inout, *len, t);
}
static void op_ext_min(void *in, void *inout, int *len, MPI_Datatype *t) {
    extreme(TG_COMM_MIN, in, inout, *len, t);
}

/* ---- joining the job ---- */

static double env_seconds(const char *name, double dflt) {
    const char *v = getenv(name);
    char *end;
    double s = v && *v ? strtod(v, &end) : dflt;
    return v && *v && *end == '\0' && s >= 0 ? s : dflt;
}

static void at_exit(void) { tg_world_finish(0, NULL); }

static void join(void) {
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_SIZE")) return;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* Below 4 processes Open MPI's non-blocking all-reduce (libnbc) always reduces up a
         * binomial tree and broadcasts down it, moving the whole buffer twice in sequence; its
         * ring moves half of it each way with both processes busy. At 2 processes the ring
         * took 0.6x the tree's time from 64 KiB to 1 MiB (bench_w11b, docs/mpi.md) and was no
         * slower below. Every process makes the same choice, so results stay the same from
         * run to run; a value already in the environment wins (one in an MCA parameter
         * file does not: the environment overrides those). 3 processes keep libnbc's choice: the
         * ring was neither measured nor tested there. */
        const char *procs = getenv("OMPI_COMM_WORLD_SIZE");
        if (procs && strcmp(procs, "2") == 0)
            setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
        MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        W.joined = true;
    } else {
        MPI_Query_thread(&provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &W.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &W.size);
    if (W.size > 1 && provided < MPI_THREAD_SERIALIZED) {
        fprintf(stderr,
                "tgraph: MPI rank %d: this MPI gives no thread support beyond "
                "MPI_THREAD_FUNNELED, and tgraph calls it from the pmap's threads\n",
                W.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &W.world) != MPI_SUCCESS) {
        fprintf(stderr, "tgraph: MPI rank %d: could not duplicate MPI_COMM_WORLD\n", W.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_set_errhandler(W.world, MPI_ERRORS_RETURN);
    W.timeout = env_seconds("TGRAPH_MPI_TIMEOUT", 300);
    W.grace = env_seconds("TGRAPH_MPI_GRACE", 5);
    for (int d = 0; d < TG_DT_COUNT; d++) W.type[d] = W.pair[d] = MPI_DATATYPE_NULL;
    for (int d = 0; d < TG_DT_COUNT; d++) {
        if (!tg_comm_supports(TG_COMM_MAX, (tg_dtype)d)) continue;
        int es = (int)tg_dtype_size((tg_dtype)d);
        MPI_Type_contiguous(es, MPI_BYTE, &W.type[d]);
        MPI_Type_commit(&W.type[d]);
        MPI_Type_contiguous(es + 4, MPI_BYTE, &W.pair[d]);
        MPI_Type_commit(&W.pair[d]);
    }
    MPI_Op_create(op_sum, 1, &W.op[TG_COMM_SUM]);
    MPI_Op_create(op_max, 1, &W.op[TG_COMM_MAX]);
    MPI_Op_create(op_min, 1, &W.op[TG_COMM_MIN]);
    MPI_Op_create(op_ext_max, 1, &W.extreme[TG_COMM_MAX]);
    MPI_Op_create(op_ext_min, 1, &W.extreme[TG_COMM_MIN]);
    MPI_Irecv(W.fault_buf, sizeof W.fault_buf, MPI_CHAR, MPI_ANY_SOURCE, TAG_FAULT, W.world,
              &W.fault_req);
    atexit(at_exit);
}

int tg_world_rank(void) {
    pthread_once(&W.once, join);
    return W.rank;
}

int tg_world_size(void) {
    pthread_once(&W.once, join);
    return W.size;
}

void tg_world_lock(void) { pthread_mutex_lock(&W.call_mu); }

void tg_world_unlock(void) { pthread_mutex_unlock(&W.call_mu); }

/* ---- waiting ---- */

/* Whether another process's failure note has arrived (acknowledged on arrival). */
static bool fault_seen(void) {
    if (atomic_load(&W.failed) >= 0) return true;
    if (W.size <= 1 || pthread_mutex_trylock(&W.poll_mu) != 0) return false;
    int flag = 0;
    MPI_Status s;
    if (W.fault_req != MPI_REQUEST_NULL && MPI_Test(&W.fault_req, &flag, &s) == MPI_SUCCESS &&
        flag) {
        snprintf(W.failed_msg, sizeof W.failed_msg, "%s", W.fault_buf);
        MPI_Send(NULL, 0, MPI_CHAR, s.MPI_SOURCE, TAG_ACK, W.world);
        atomic_store(&W.failed, s.MPI_SOURCE);
    }
    pthread_mutex_unlock(&W.poll_mu);
    return flag;
}

static tg_status remote_failure(const char *what) {
    return tg_set_error(TG_EIO, "%s: MPI rank %d failed: %s", what, atomic_load(&W.failed),
                        W.failed_msg);
}

static void backoff(unsigned *spins) {
    if (++*spins < 256) return;
    if (*spins < 4096) {
        sched_yield();
        return;
    }
    nanosleep(&(struct timespec){0, 100000}, NULL);
}

/* Waits for the requests, or until another process fails, `local` (may be NULL) is
 * aborted, or the timeout passes. `what` names the operation in messages. */
static tg_status wait_all(MPI_Request *req, int nreq, tg_comm *local, const char *what) {
    double t0 = MPI_Wtime();
    unsigned spins = 0;
    for (;;) {
        int done = 0;
        if (MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return tg_set_error(TG_EIO, "%s: MPI failed", what);
        if (done) return TG_OK;
        if (fault_seen()) return remote_failure(what);
        tg_status st = local ? tg_comm_check(local) : TG_OK;
        if (st != TG_OK) return st;
        if (W.timeout > 0 && MPI_Wtime() - t0 > W.timeout)
            return tg_set_error(TG_EIO,
                                "%s: no answer from the other MPI ranks after %g s "
                                "(TGRAPH_MPI_TIMEOUT)",
                                what, W.timeout);
        backoff(&spins);
    }
}

/* Starts an MPI operation (its return code rc) and waits for it. */
static tg_status finish_op(int rc, MPI_Request *req, tg_comm *local, const char *what) {
    if (rc != MPI_SUCCESS) return tg_set_error(TG_EIO, "%s: MPI failed to start it", what);
    return wait_all(req, 1, local, what);
}

tg_status tg_world_all_gather(void *buf, size_t bytes) {
    if (W.size <= 1) return TG_OK;
    if (bytes > INT_MAX)
        return tg_set_error(TG_ELIMIT, "pmap: %zu bytes of results per process: at most %d", bytes,
                            INT_MAX);
    MPI_Request req;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)bytes, MPI_BYTE, W.world,
                            &req);
    return finish_op(rc, &req, NULL, "pmap: gathering the results of the processes");
}

/* ---- ending ---- */

/* The failure of this process, told to the others; their acknowledgements awaited up to
 * the grace period. */
static void tell_failure(const char *why) {
    int n = W.size - 1, k = 0;
    MPI_Request *req = calloc((size_t)(2 * n), sizeof *req);
    if (!req) return;
    size_t len = strlen(why) + 1 < TG_ERRMSG_MAX ? strlen(why) + 1 : TG_ERRMSG_MAX;
    char *msg = malloc(len);
    if (msg) {
        memcpy(msg, why, len - 1);
        msg[len - 1] = '\0';
        for (int r = 0; r < W.size; r++) {
            if (r == W.rank) continue;
            MPI_Isend(msg, (int)len, MPI_CHAR, r, TAG_FAULT, W.world, &req[k]);
            MPI_Irecv(NULL, 0, MPI_CHAR, r, TAG_ACK, W.world, &req[n + k]);
            k++;
        }
        double t0 = MPI_Wtime();
        unsigned spins = 0;
        int done = 0;
        while (!done && MPI_Wtime() - t0 < W.grace) {
            MPI_Testall(2 * n, req, &done, MPI_STATUSES_IGNORE);
            fault_seen(); /* another failing process waits for this one's acknowledgement */
            backoff(&spins);
        }
    }
    free(msg);
    free(req);
}

int tg_world_finish(int status, const char *why) {
    pthread_once(&W.once, join);
    if (W.size <= 1 && !W.joined) return status;
    int finalized = 0; /* by a program that initialised MPI itself (at exit, after it) */
    MPI_Finalized(&finalized);
    if (finalized) return status;
    if (atomic_exchange(&W.finished, true)) return status;
    if (status == 0 && W.size > 1) {
        MPI_Request req;
        int rc = MPI_Ibarrier(W.world, &req);
        if (finish_op(rc, &req, NULL, "at the end") != TG_OK) return 1; /* the job ends */
    }
    if (status == 0) {
        if (W.fault_req != MPI_REQUEST_NULL) {
            MPI_Cancel(&W.fault_req);
            MPI_Wait(&W.fault_req, MPI_STATUS_IGNORE);
        }
        if (W.joined) MPI_Finalize();
        return 0;
    }
    if (W.size > 1 && !fault_seen()) { /* this process's own failure */
        const char *m = why ? why : tg_last_error();
        tell_failure(m && *m ? m : "failed");
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    return status; /* another's failure: exiting without MPI_Finalize ends the job */
}

/* ---- the communicators ---- */

struct tg_xcomm {
    tg_ctx *ctx;
    int n, nlocal, base, procs;
    MPI_Comm comm;     /* the axis's */
    tg_comm *local;    /* the engine between this process's nlocal ranks (nlocal > 1) */
    const void **send; /* per local rank, published before the first local barrier */
    void **recv;
    int32_t **holders;
    unsigned char *scratch; /* the leader's */
    size_t scratch_size;
    atomic_bool broken; /* an abort happened: refuse everything (comm.h) */
};

tg_status tg_xcomm_new(tg_ctx *ctx, int n, int nlocal, int base, tg_xcomm **out) {
    *out = NULL;
    TG_ASSERT(W.size > 1 && n == nlocal * W.size && base == W.rank * nlocal);
    tg_xcomm *x = tg_mem_calloc(ctx, sizeof *x);
    if (!x) return tg_set_error(TG_ENOMEM, "out of memory: a communicator of %d ranks", n);
    size_t L = (size_t)nlocal;
    x->ctx = ctx;
    x->n = n;
    x->nlocal = nlocal;
    x->base = base;
    x->procs = W.size;
    x->comm = MPI_COMM_NULL;
    atomic_init(&x->broken, false);
    x->send = tg_mem_calloc(ctx, sizeof *x->send * L);
    x->recv = tg_mem_calloc(ctx, sizeof *x->recv * L);
    x->holders = tg_mem_calloc(ctx, sizeof *x->holders * L);
    if (!x->send || !x->recv || !x->holders ||
        (nlocal > 1 && !(x->local = tg_comm_new(ctx, nlocal)))) {
        tg_xcomm_free(x);
        return tg_set_error(TG_ENOMEM, "out of memory: a communicator of %d ranks", n);
    }
    MPI_Request req;
    MPI_Comm comm;
    int rc = MPI_Comm_idup(W.world, &comm, &req);
    tg_status st = finish_op(rc, &req, NULL, "pmap: making the communicator of an axis");
    if (st != TG_OK) {
        tg_xcomm_free(x);
        return st;
    }
    x->comm = comm;
    MPI_Comm_set_errhandler(x->comm, MPI_ERRORS_RETURN);
    *out = x;
    return TG_OK;
}

void tg_xcomm_free(tg_xcomm *x) {
    if (!x) return;
    size_t L = (size_t)x->nlocal;
    /* after a failure the job ends, and freeing a communicator with an operation in flight
     * would wait for it; after MPI_Finalize (a function freed after tg_world_finish) MPI
     * has released it already */
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (x->comm != MPI_COMM_NULL && !atomic_load(&x->broken) && !finalized) MPI_Comm_free(&x->comm);
    tg_comm_free(x->local);
    if (x->send) tg_mem_free(x->ctx, x->send, sizeof *x->send * L);
    if (x->recv) tg_mem_free(x->ctx, x->recv, sizeof *x->recv * L);
    if (x->holders) tg_mem_free(x->ctx, x->holders, sizeof *x->holders * L);
    if (x->scratch) tg_mem_free(x->ctx, x->scratch, x->scratch_size);
    tg_mem_free(x->ctx, x, sizeof *x);
}

void tg_xcomm_abort(tg_xcomm *x, tg_status why) {
    atomic_store(&x->broken, true);
    if (x->local) tg_comm_abort(x->local, why);
}

/* The start of a collective on rank l (local): refused after an abort; with several local
 * ranks, their buffers published and every one of them arrived. */
static tg_status enter(tg_xcomm *x, int l, const void *send, void *recv, int32_t *holders) {
    if (atomic_load(&x->broken))
        return tg_set_error(TG_EIO, "collective aborted: an earlier failure left the MPI "
                                    "ranks out of step");
    if (x->nlocal == 1) return TG_OK;
    x->send[l] = send;
    x->recv[l] = recv;
    x->holders[l] = holders;
    return tg_comm_barrier(x->local, l);
}

/* The end: the leader's outcome st reaches every local rank (an abort of the local
 * communicator when it failed), and none returns while the leader still writes into its
 * buffers. */
static tg_status leave(tg_xcomm *x, int l, tg_status st) {
    if (st != TG_OK) {
        atomic_store(&x->broken, true);
        if (x->local) tg_comm_abort(x->local, st);
        return st;
    }
    return x->nlocal == 1 ? TG_OK : tg_comm_barrier(x->local, l);
}

/* The leader's scratch of at least `bytes`; NULL with the error set. */
static unsigned char *scratch(tg_xcomm *x, size_t bytes) {
    if (bytes <= x->scratch_size) return x->scratch;
    unsigned char *p = tg_mem_realloc(x->ctx, x->scratch, x->scratch_size, bytes);
    if (!p) {
        tg_set_error(TG_ENOMEM, "out of memory: %zu bytes for a collective across processes",
                     bytes);
        return NULL;
    }
    x->scratch = p;
    x->scratch_size = bytes;
    return p;
}

static tg_status too_large(size_t count) {
    return tg_set_error(TG_ELIMIT, "a collective of %zu elements across processes: at most %d",
                        count, INT_MAX);
}

/* The MPI datatype and operation of a reduction. */
static void mpi_op(tg_comm_op op, tg_dtype dt, MPI_Datatype *t, MPI_Op *o) {
    if (op == TG_COMM_SUM && (dt == TG_DT_F32 || dt == TG_DT_F64)) {
        *t = dt == TG_DT_F32 ? MPI_FLOAT : MPI_DOUBLE;
        *o = MPI_SUM;
    } else {
        *t = W.type[dt];
        *o = W.op[op];
    }
}

/* The leader's result (recv of `bytes`) copied into the other local ranks' recv. */
static void spread(tg_xcomm *x, const void *from, size_t bytes) {
    for (int r = 1; r < x->nlocal; r++)
        if (x->recv[r] != from) memcpy(x->recv[r], from, bytes);
}

static tg_status unsupported(const char *what, tg_comm_op op, tg_dtype dt) {
    static const char *const names[] = {"sum", "max", "min"};
    return tg_set_error(TG_EUNSUPPORTED, "%s: %s of %s is not supported", what, names[op],
                        tg_dtype_name(dt));
}

tg_status tg_xcomm_all_reduce(tg_xcomm *x, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                              void *recv, size_t count) {
    if (!tg_comm_supports(op, dt)) return unsupported("all_reduce", op, dt);
    if (count > INT_MAX) return too_large(count);
    int l = rank - x->base;
    tg_status st = TG_OK;
    if (x->nlocal > 1 && (st = tg_comm_all_reduce(x->local, l, op, dt, send, recv, count)) != TG_OK)
        return st;
    if (x->nlocal > 1) send = recv; /* this process's part, reduced in place from here */
    if ((st = enter(x, l, send, recv, NULL)) != TG_OK || l != 0) return l ? leave(x, l, st) : st;
    MPI_Datatype t;
    MPI_Op o;
    mpi_op(op, dt, &t, &o);
    MPI_Request req;
    int rc =
        MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, t, o, x->comm, &req);
    st = finish_op(rc, &req, x->local, "all_reduce across processes");
    if (st == TG_OK) spread(x, recv, count * tg_dtype_size(dt));
    return leave(x, l, st);
}

tg_status tg_xcomm_all_reduce_extreme(tg_xcomm *x, int rank, tg_comm_op op, tg_dtype dt,
                                      const void *send, void *recv, int32_t *holders,
                                      size_t count) {
    if (!tg_comm_supports(op, dt)) return unsupported("all_reduce_extreme", op, dt);
    if (count > INT_MAX) return too_large(count);
    int l = rank - x->base;
    tg_status st = TG_OK;
    size_t es = tg_dtype_size(dt);
    if (x->nlocal > 1) {
        st = tg_comm_all_reduce_extreme(x->local, l, op, dt, send, recv, holders, count);
        if (st != TG_OK) return st;
    } else {
        if (recv != send) memcpy(recv, send, count * es);
        for (size_t i = 0; i < count; i++) holders[i] = 1;
    }
    if ((st = enter(x, l, send, recv, holders)) != TG_OK || l != 0) return l ? leave(x, l, st) : st;
    unsigned char *pairs = scratch(x, count * (es + 4));
    if (!pairs) return leave(x, l, TG_ENOMEM);
    for (size_t i = 0; i < count; i++) {
        memcpy(pairs + i * (es + 4), (unsigned char *)recv + i * es, es);
        memcpy(pairs + i * (es + 4) + es, &holders[i], 4);
    }
    MPI_Request req;
    int rc =
        MPI_Iallreduce(MPI_IN_PLACE, pairs, (int)count, W.pair[dt], W.extreme[op], x->comm, &req);
    st = finish_op(rc, &req, x->local, "all_reduce_extreme across processes");
    for (int r = 0; st == TG_OK && r < x->nlocal; r++) {
        unsigned char *v = r ? x->recv[r] : recv;
        int32_t *h = r ? x->holders[r] : holders;
        for (size_t i = 0; i < count; i++) {
            memcpy(v + i * es, pairs + i * (es + 4), es);
            memcpy(&h[i], pairs + i * (es + 4) + es, 4);
        }
    }
    return leave(x, l, st);
}

tg_status tg_xcomm_reduce_scatter(tg_xcomm *x, int rank, tg_comm_op op, tg_dtype dt,
                                  const void *send, void *recv, size_t block) {
    if (!tg_comm_supports(op, dt)) return unsupported("reduce_scatter", op, dt);
    size_t es = tg_dtype_size(dt), all = (size_t)x->n * block, mine = (size_t)x->nlocal * block;
    if (mine > INT_MAX) return too_large(mine);
    int l = rank - x->base;
    tg_status st = enter(x, l, send, recv, NULL);
    if (st != TG_OK || l != 0) return l ? leave(x, l, st) : st;
    /* this process's sum of the whole buffer, in local rank order, then its blocks */
    unsigned char *sum = scratch(x, (all + mine) * es);
    if (!sum) return leave(x, l, TG_ENOMEM);
    unsigned char *part = sum + all * es;
    memcpy(sum, send, all * es);
    for (int r = 1; r < x->nlocal; r++) tg_comm_combine(op, dt, sum, x->send[r], all);
    MPI_Datatype t;
    MPI_Op o;
    mpi_op(op, dt, &t, &o);
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(sum, part, (int)mine, t, o, x->comm, &req);
    st = finish_op(rc, &req, x->local, "reduce_scatter across processes");
    for (int r = 0; st == TG_OK && r < x->nlocal; r++)
        memcpy(r ? x->recv[r] : recv, part + (size_t)r * block * es, block * es);
    return leave(x, l, st);
}

tg_status tg_xcomm_all_gather(tg_xcomm *x, int rank, const void *send, void *recv, size_t bytes) {
    size_t mine = (size_t)x->nlocal * bytes;
    if (mine > INT_MAX) return too_large(mine);
    int l = rank - x->base;
    unsigned char *own = (unsigned char *)recv + (size_t)x->base * bytes; /* this process's */
    tg_status st = TG_OK;
    if (x->nlocal > 1) {
        if ((st = tg_comm_all_gather(x->local, l, send, own, bytes)) != TG_OK) return st;
    } else if (send != own) {
        memcpy(own, send, bytes);
    }
    if ((st = enter(x, l, send, recv, NULL)) != TG_OK || l != 0) return l ? leave(x, l, st) : st;
    MPI_Request req;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)mine, MPI_BYTE, x->comm,
                            &req);
    st = finish_op(rc, &req, x->local, "all_gather across processes");
    if (st == TG_OK) spread(x, recv, (size_t)x->n * bytes);
    return leave(x, l, st);
}

tg_status tg_xcomm_permute(tg_xcomm *x, int rank, const int *src, const int *dst, int npairs,
                           const void *send, void *recv, size_t bytes) {
    if (bytes > INT_MAX) return too_large(bytes);
    int l = rank - x->base;
    tg_status st = enter(x, l, send, recv, NULL);
    if (st != TG_OK || l != 0) return l ? leave(x, l, st) : st;
    x->send[0] = send;
    x->recv[0] = recv;
    MPI_Request *req = tg_mem_alloc(x->ctx, sizeof *req * (size_t)(npairs ? npairs : 1));
    if (!req) {
        tg_set_error(TG_ENOMEM, "out of memory: a ppermute across processes");
        return leave(x, l, TG_ENOMEM);
    }
    bool *got = tg_mem_calloc(x->ctx, sizeof *got * (size_t)x->nlocal);
    int nreq = 0, rc = got ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int p = 0; p < npairs && rc == MPI_SUCCESS; p++) {
        int s = src[p] - x->base, d = dst[p] - x->base;
        bool s_here = s >= 0 && s < x->nlocal, d_here = d >= 0 && d < x->nlocal;
        if (d_here) got[d] = true;
        if (s_here && d_here)
            memcpy(x->recv[d], x->send[s], bytes);
        else if (s_here)
            rc = MPI_Isend(x->send[s], (int)bytes, MPI_BYTE, dst[p] / x->nlocal, p, x->comm,
                           &req[nreq++]);
        else if (d_here)
            rc = MPI_Irecv(x->recv[d], (int)bytes, MPI_BYTE, src[p] / x->nlocal, p, x->comm,
                           &req[nreq++]);
    }
    st = rc == MPI_SUCCESS ? wait_all(req, nreq, x->local, "ppermute across processes")
         : got             ? tg_set_error(TG_EIO, "ppermute across processes: MPI failed")
                           : tg_set_error(TG_ENOMEM, "out of memory: a ppermute across processes");
    for (int r = 0; st == TG_OK && r < x->nlocal; r++)
        if (!got[r]) memset(x->recv[r], 0, bytes);
    if (got) tg_mem_free(x->ctx, got, sizeof *got * (size_t)x->nlocal);
    tg_mem_free(x->ctx, req, sizeof *req * (size_t)(npairs ? npairs : 1));
    return leave(x, l, st);
}

tg_status tg_xcomm_barrier(tg_xcomm *x, int rank) {
    int l = rank - x->base;
    tg_status st = enter(x, l, NULL, NULL, NULL);
    if (st != TG_OK || l != 0) return l ? leave(x, l, st) : st;
    MPI_Request req;
    int rc = MPI_Ibarrier(x->comm, &req);
    return leave(x, l, finish_op(rc, &req, x->local, "barrier across processes"));
}
