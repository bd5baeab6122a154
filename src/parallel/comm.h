/* comm.h - private header of src/parallel: collectives between the threads of one process
 * (the engine under pmap's psum, pmean, pmax, pmin, all_gather, psum_scatter and ppermute;
 * docs/devices.md, "Collectives between host threads").
 *
 * A communicator of n ranks is shared by n threads, one per rank, each calling the
 * collectives with its rank. Contract:
 *  - Every rank calls the same collectives in the same order with the same counts, dtype,
 *    operation and pairs (fixed when a program is compiled: nothing is negotiated at run
 *    time). A mismatch is a bug of the caller; checked builds (NDEBUG unset) catch the
 *    kind, count, dtype and operation with TG_ASSERT.
 *  - A call returns once this rank's result is complete and no other rank will touch its
 *    buffers any more: the caller may then reuse them.
 *  - Results are bit-identical run to run and on every rank: an element is reduced over
 *    the ranks in rank order 0, 1, ..., n-1 ((x0 + x1) + x2 ...) in the dtype itself,
 *    whatever the timing, the buffer size or the path taken.
 *  - Buffers are contiguous. `recv` may be `send` where the function says so (in place);
 *    otherwise a rank's buffers do not overlap each other or any other rank's.
 *  - Abort: a rank that fails calls tg_comm_abort(c, why) instead of its next collective
 *    (any other thread may call it too, at any time). A rank waiting for one that will
 *    not come, and every collective started afterwards, returns `why` with the message
 *    "collective aborted: <the aborting thread's last error>" instead of waiting. Racing
 *    with an abort, a collective may complete on some ranks and return `why` on others,
 *    but no rank gets more than one collective ahead of another, and no rank returns
 *    while another still reads its buffers (a collective that reads them in place
 *    completes on every rank or on none). The communicator stays aborted until
 *    tg_comm_reset, which must run while no rank is inside a collective.
 *  - Nothing is allocated after tg_comm_new; waits spin (tg_spin_wait), then sleep, so
 *    more ranks than cores make progress.
 */
#ifndef TG_COMM_H
#define TG_COMM_H

#include "../core/core.h"

typedef struct tg_comm tg_comm;

typedef enum {
    TG_COMM_SUM, /* wraps for integers */
    TG_COMM_MAX, /* floats: NaN wins (a NaN of any rank makes the result NaN) */
    TG_COMM_MIN,
} tg_comm_op;

/* At most this many ranks. */
#define TG_COMM_MAX_RANKS 1024

/* A communicator of n ranks (1 <= n <= TG_COMM_MAX_RANKS); NULL with the error set. */
tg_comm *tg_comm_new(tg_ctx *ctx, int n);
/* No rank may be inside a collective. NULL is a no-op. */
void tg_comm_free(tg_comm *c);
int tg_comm_size(const tg_comm *c);

/* recv[i] = send_0[i] op send_1[i] op ... op send_{n-1}[i] for i < count, on every rank.
 * recv may be send (in place). Sum: every dtype but bool; max and min: every dtype (bool:
 * or, and). TG_EUNSUPPORTED for sum of bool. */
tg_status tg_comm_all_reduce(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                             void *recv, size_t count);

/* The all-reduce of max or min (op), and, per element, how many ranks hold that extreme
 * value: holders[i] = #{k : send_k[i] == recv[i]}, a NaN counting as equal to a NaN. What
 * the gradient of pmax / pmin needs: rank k's share of the cotangent of element i is
 * 1 / holders[i] when send_k[i] equals recv[i] (the same equality), else 0. recv may be
 * send. */
tg_status tg_comm_all_reduce_extreme(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt,
                                     const void *send, void *recv, int32_t *holders, size_t count);

/* send holds n blocks of `block` elements; recv (one block) gets block `rank` reduced over
 * the ranks: recv[i] = op over k of send_k[rank * block + i]. recv may be
 * send + rank * block (in place). Dtypes and ops as tg_comm_all_reduce. */
tg_status tg_comm_reduce_scatter(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                                 void *recv, size_t block);

/* recv (n blocks of `bytes`) gets the send buffer of rank k at block k. send may be
 * recv + rank * bytes (in place). */
tg_status tg_comm_all_gather(tg_comm *c, int rank, const void *send, void *recv, size_t bytes);

/* For each pair p < npairs, rank src[p] sends its buffer to rank dst[p]: a rank that is some
 * dst[p] gets send of src[p] in recv, any other rank gets zeros. Ranks are in [0, n), no
 * rank is the destination of two pairs (a rank may send to several). send and recv do not
 * overlap. */
tg_status tg_comm_permute(tg_comm *c, int rank, const int *src, const int *dst, int npairs,
                          const void *send, void *recv, size_t bytes);

/* Returns once every rank has called it. */
tg_status tg_comm_barrier(tg_comm *c, int rank);

/* Makes the waits of every rank return `why` (not TG_OK), as the contract above says; the
 * message carries this thread's last error. The first abort wins; later ones only wake. */
void tg_comm_abort(tg_comm *c, tg_status why);
/* Clears an abort, so that the ranks can start again. No rank may be inside a collective. */
void tg_comm_reset(tg_comm *c);

/* TG_OK, or the abort's status with its message once the communicator is aborted. */
tg_status tg_comm_check(tg_comm *c);

/* The reduction kernels, for the level above the threads (mpi.c): acc[i] = acc[i] op src[i]
 * for i < count (the dtypes and ops tg_comm_all_reduce takes, tg_comm_supports says which),
 * and cnt[i] += (x[i] equals m[i]), a NaN equal to a NaN. */
bool tg_comm_supports(tg_comm_op op, tg_dtype dt);
void tg_comm_combine(tg_comm_op op, tg_dtype dt, void *acc, const void *src, size_t count);
void tg_comm_count_equal(tg_dtype dt, int32_t *cnt, const void *m, const void *x, size_t count);

/* Collectives of at most this many bytes per rank (the whole send buffer) copy it into the
 * communicator and exchange flags instead of two barriers (comm.c, "Two paths"); at most
 * TG_COMM_STAGE_MAX, 0 for never. For tests and the benchmark; the default is
 * TG_COMM_SMALL_DEFAULT. Only while no rank is inside a collective other than a barrier
 * (e.g. between two tg_comm_barrier calls of every rank). */
void tg_comm_set_small_max(tg_comm *c, size_t bytes);
#define TG_COMM_STAGE_MAX     4096
#define TG_COMM_SMALL_DEFAULT 512

/* ---- started collectives (async.c) ----
 * An all-reduce in place in `buf`, started now on a thread of the rank's own and waited
 * for later, so that the rank computes meanwhile (psum_start / psum_wait). Every rank
 * starts the same ones in the same order; the queue thread runs them one at a time, in
 * that order, with the contract above. While a rank has started all-reduces that are not
 * finished it must not make another collective of the communicator: tg_comm_drain
 * first. */
typedef struct tg_comm_queue tg_comm_queue;
typedef struct tg_comm_timing {
    double flight; /* seconds from the start to the end of the all-reduce */
    double run;    /* of which the all-reduce itself ran (after the ones started before) */
    double waited; /* seconds the waiting thread spent in tg_comm_wait */
} tg_comm_timing;
/* hold (may be NULL): the buffer that holds buf, referenced until the all-reduce is done,
 * so that a rank whose call failed and let go of its values leaves it alive */
tg_status tg_comm_start_all_reduce(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, void *buf,
                                   size_t count, tg_buffer *hold);
/* Waits for the all-reduce started on buf; its status and message (the collective's own,
 * e.g. "collective aborted: ..."). t (may be NULL) gets its times. */
tg_status tg_comm_wait(tg_comm *c, int rank, const void *buf, tg_comm_timing *t);
/* Returns once every all-reduce the rank started is finished; with forget, those not
 * waited for are dropped too (a rank that failed before its waits). */
void tg_comm_drain(tg_comm *c, int rank, bool forget);
/* comm.c's side: the rank's queue slots (made on first start), the allocator. */
tg_comm_queue **tg_comm_queues(tg_comm *c);
tg_ctx *tg_comm_ctx(const tg_comm *c);
void tg_comm_queue_free(tg_comm_queue *q);

/* ---- communicators spanning processes (mpi.c, in builds with MPI; docs/mpi.md) ----
 * A communicator of n ranks spread over the P processes of an MPI job, nlocal = n / P of
 * them on each, process p holding ranks base = p * nlocal .. base + nlocal - 1. The calls
 * above take the global rank and keep their contract, but for the reduction order: a sum
 * is reduced over this process's ranks in rank order, then over the processes by MPI, so
 * results are the same run to run for a given P (bit-identical on every rank) rather than
 * for any split. Every process makes its spanning communicators in the same order (MPI
 * duplicates a communicator collectively). An abort is final: an MPI collective in flight
 * cannot be taken back, so after one the communicator refuses every collective, reset or
 * not. */
typedef struct tg_xcomm tg_xcomm;
tg_status tg_comm_new_spanning(tg_ctx *ctx, int n, int nlocal, int base, tg_comm **out);
tg_status tg_xcomm_new(tg_ctx *ctx, int n, int nlocal, int base, tg_xcomm **out);
void tg_xcomm_free(tg_xcomm *x);
void tg_xcomm_abort(tg_xcomm *x, tg_status why);
tg_status tg_xcomm_all_reduce(tg_xcomm *x, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                              void *recv, size_t count);
tg_status tg_xcomm_all_reduce_extreme(tg_xcomm *x, int rank, tg_comm_op op, tg_dtype dt,
                                      const void *send, void *recv, int32_t *holders, size_t count);
tg_status tg_xcomm_reduce_scatter(tg_xcomm *x, int rank, tg_comm_op op, tg_dtype dt,
                                  const void *send, void *recv, size_t block);
tg_status tg_xcomm_all_gather(tg_xcomm *x, int rank, const void *send, void *recv, size_t bytes);
tg_status tg_xcomm_permute(tg_xcomm *x, int rank, const int *src, const int *dst, int npairs,
                           const void *send, void *recv, size_t bytes);
tg_status tg_xcomm_barrier(tg_xcomm *x, int rank);

/* ---- the communicators of one pmap call ----
 * A pmap call of n ranks hangs one set on its ranks' SPMD frames (op.h, `shared`): the
 * communicator of its n ranks, and one more per position of the ranks of pmaps nested in
 * its body that name its axis: there rank r of the call, running inner rank j, meets
 * inner rank j of every other rank of the call (JAX's meaning of a collective over an
 * outer axis). A position is the key: the ranks of the frames between the caller's and
 * the set's, innermost first; the call's own ranks have the empty key. Communicators are
 * made on first use, found without a lock afterwards, and kept for the set's next calls.
 * An abort reaches every communicator of the set, and tg_comm_set_get refuses to hand
 * out any until tg_comm_set_reset. */
typedef struct tg_comm_set tg_comm_set;

/* Longest key: pmaps nested inside the set's call. */
#define TG_COMM_SET_MAX_KEY 32

/* A set for a pmap call of n >= 1 ranks (more than TG_COMM_MAX_RANKS only for calls that run
 * no collective: tg_comm_set_get refuses them); NULL with the error set. */
tg_comm_set *tg_comm_set_new(tg_ctx *ctx, int n);
/* A set whose call spans the processes of an MPI job, nlocal of its n ranks on this one from
 * `base` on (tg_comm_new_spanning): only the call's own communicator (the empty key) can be
 * had; a collective over its axis from a pmap nested in its body is refused. */
tg_comm_set *tg_comm_set_new_spanning(tg_ctx *ctx, int n, int nlocal, int base);
/* No rank may be inside a collective of the set. NULL is a no-op. */
void tg_comm_set_free(tg_comm_set *s);
/* The communicator of position key (nkey <= TG_COMM_SET_MAX_KEY ints), made when first
 * asked for. Once the set is aborted: the abort's status, with the message
 * "collective aborted: <the first aborting thread's last error>". */
tg_status tg_comm_set_get(tg_comm_set *s, const int *key, int nkey, tg_comm **out);
/* Aborts every communicator of the set (tg_comm_abort, with this thread's last error) and
 * makes tg_comm_set_get fail. */
void tg_comm_set_abort(tg_comm_set *s, tg_status why);
bool tg_comm_set_aborted(tg_comm_set *s);
/* Notes that rank `rank` of the set's call failed only because of an abort: a collective
 * of its returned aborted, or a pmap it ran failed only so. Only the thread running that
 * rank notes it; read once every rank has returned. */
void tg_comm_set_note_interrupted(tg_comm_set *s, int rank);
bool tg_comm_set_interrupted(const tg_comm_set *s, int rank);
/* Clears an abort and the notes on the set and its communicators. No rank may be inside a
 * collective. */
void tg_comm_set_reset(tg_comm_set *s);
/* Waits for the all-reduces rank `rank` started on the set's communicators and drops those
 * not waited for (tg_comm_drain): called by the rank's thread when its body has returned. */
void tg_comm_set_drain(tg_comm_set *s, int rank);

#endif
