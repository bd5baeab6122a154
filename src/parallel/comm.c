/* comm.c - collectives between the threads of one process (comm.h has the contract).
 *
 * Epochs and slots. Each rank counts the collectives it has started (its epoch; all ranks
 * call the same ones, so they agree on it) and publishes each one in its slot, one of two
 * per rank chosen by the epoch's parity: a header (what it calls, its buffers) and, on the
 * staged path, a copy of its send buffer. A rank writes a slot again two collectives
 * later, after a synchronisation that every rank reached only once done reading it.
 *
 * Two paths, chosen by the bytes a rank sends (the same on every rank):
 *  - Staged (at most small_max bytes): a rank copies its send buffer into its slot, then
 *    stores the epoch in the slot's flag `seq`, waits until every rank's flag of this
 *    parity shows the epoch, reads every copy and writes its own result. One exchange of
 *    cache lines per pair of ranks, no shared counter, no second barrier (nobody reads the
 *    caller's buffers); a copy of up to 16 bytes shares the flag's cache line. A barrier is
 *    a staged collective of 0 bytes.
 *  - Direct: the ranks read each other's buffers in place, between two barriers on a
 *    shared counter (below): the entry, after which every rank's buffers are published,
 *    and the exit, after which nobody reads them any more. An all-reduce splits the
 *    elements into n slices (cache-line aligned); the rank owning a slice reduces it over
 *    every rank's send buffer and writes the result into every rank's recv buffer: one
 *    pass over the data and two barriers, where reducing into one's own buffer and then
 *    copying the other slices would take a second pass and a third barrier. In place is
 *    safe: element i of any buffer is read and written only by the owner of i's slice,
 *    which reads all the sources of a block before writing it anywhere.
 * Between 2 threads the staged path is faster up to TG_COMM_SMALL_DEFAULT bytes
 * (bench/comm.c, docs/devices.md).
 *
 * The counter barrier. One 64-bit word holds the generation (high bits), the abort bit
 * and the number of ranks arrived (low bits). A rank arrives with a compare-and-swap; the
 * last one clears the count and advances the generation in the same swap, and the others
 * wait for the generation to move.
 *
 * Waiting, on flags or on the generation, spins (tg_spin_wait), then sleeps on one
 * condition variable with the pool's handshake: a sleeper announces itself, then checks
 * under the mutex; whoever makes a wait end (a flag, the last arrival, an abort) stores,
 * then reads the announcement and broadcasts.
 *
 * Aborting sets the bit in the counter's word. A direct collective's entry refuses
 * arrivals once it is set, and its waiters give up when they see it: an arrival and the
 * abort are ordered on one word, so either every rank gets past the entry or none does,
 * and the exit ignores the bit (every rank is inside, none can fail), so no rank returns
 * while another reads its buffers. A staged collective checks the bit before it publishes
 * and gives up waiting when it sees it with a flag still missing: racing with an abort,
 * some ranks may complete it and others not (they read only copies), and no rank can be
 * more than one collective ahead of another.
 *
 * Determinism: both paths reduce element i as ((x_0 op x_1) op x_2) ... in the dtype, so
 * every rank gets the same bits whatever the path and the timing.
 */
#include "comm.h"

#include "parallel.h"

#include <pthread.h>
#include <stdio.h>

#define COUNT_MASK ((uint64_t)0xFFFFF) /* arrived ranks, bits 0-19 */
#define ABORT_BIT  ((uint64_t)1 << 20)
#define GEN_SHIFT  21
#define GEN_ONE    ((uint64_t)1 << GEN_SHIFT)
#define LINE       64
#define BLOCK      512 /* elements reduced at a time through a buffer on the stack */

typedef enum { K_BARRIER, K_ALL_REDUCE, K_EXTREME, K_REDUCE_SCATTER, K_ALL_GATHER, K_PERMUTE } kind;

/* A rank's slot of one parity; its staged copy follows the header, in the same line. */
typedef struct slot {
    _Atomic uint64_t seq; /* the epoch whose copy the slot holds (staged path) */
    size_t count;         /* elements or bytes (checked builds compare across ranks) */
    int32_t kind;         /* the collective (idem) */
    int16_t dtype;        /* idem */
    int16_t op;           /* idem */
    const void *send;     /* the rank's buffers (direct path) */
    void *recv;
    int32_t *holders; /* all_reduce_extreme */
} slot;
#define STAGE_AT 48 /* the copy: 16-byte aligned, its first 16 bytes in the flag's line */
_Static_assert(sizeof(slot) <= STAGE_AT, "the slot's header fits before its copy");

/* A rank's own line: nothing else writes it or reads it. */
typedef struct home {
    _Alignas(LINE) uint64_t epoch; /* collectives started */
} home;

struct tg_comm {
    tg_ctx *ctx;        /* allocator of this object */
    int n;              /* ranks */
    size_t small_max;   /* staged path up to this many bytes per rank */
    size_t stride;      /* bytes between two slots, whole lines */
    unsigned char *mem; /* homes and slots as allocated */
    size_t mem_size;
    home *homes;          /* n, LINE-aligned */
    unsigned char *slots; /* 2 * n slots: parity * n + rank */
    pthread_mutex_t mu;   /* guards sleeping on cv */
    pthread_cond_t cv;
    _Alignas(LINE) _Atomic uint64_t state; /* generation << GEN_SHIFT | abort | arrived */
    _Alignas(LINE) atomic_int sleepers;    /* ranks asleep on cv */
    atomic_int abort_claimed;              /* the first abort writes why and why_msg */
    tg_status why;
    char why_msg[TG_ERRMSG_MAX];
    tg_xcomm *x;            /* spanning processes: the two-level collectives of mpi.c, and nothing
                               above but n, abort_claimed, why and why_msg is used */
    tg_comm_queue **queues; /* per rank: its started all-reduces (async.c), made on first use */
};

/* ---- kernels: d = a op b, and d op= b, per dtype and op; holders ---- */

/* d = a op b, and the same into d2 unless it is NULL */
typedef void (*first_fn)(void *restrict d, void *restrict d2, const void *restrict a,
                         const void *restrict b, size_t n);
/* d op= b, and d2 = d unless it is NULL */
typedef void (*acc_fn)(void *restrict d, void *restrict d2, const void *restrict b, size_t n);
/* cnt[i] += (x[i] equals m[i]), NaN equal to NaN */
typedef void (*hold_fn)(int32_t *restrict cnt, const void *restrict m, const void *restrict x,
                        size_t n);

typedef struct kern {
    first_fn first;
    acc_fn acc;
} kern;

/* a op b for elements of type T; U is the type sums are computed in (unsigned for integers,
 * so that they wrap); ISNAN(v) is 0 for integers */
#define SUM_EXPR(T, U, ISNAN) (T)((U)a + (U)b)
#define MAX_EXPR(T, U, ISNAN) (b > a || ISNAN(b)) ? b : a
#define MIN_EXPR(T, U, ISNAN) (b < a || ISNAN(b)) ? b : a

/* Each loop twice, with one destination and with two, so that both vectorize. */
#define DEF_KERN(sfx, T, U, ISNAN, op, EXPR)                                                       \
    static void first_##op##_##sfx(void *restrict dv, void *restrict d2v, const void *restrict av, \
                                   const void *restrict bv, size_t n) {                            \
        T *restrict d = dv, *restrict d2 = d2v;                                                    \
        const T *restrict x = av, *restrict y = bv;                                                \
        if (d2)                                                                                    \
            for (size_t i = 0; i < n; i++) {                                                       \
                T a = x[i], b = y[i];                                                              \
                d[i] = d2[i] = EXPR(T, U, ISNAN);                                                  \
            }                                                                                      \
        else                                                                                       \
            for (size_t i = 0; i < n; i++) {                                                       \
                T a = x[i], b = y[i];                                                              \
                d[i] = EXPR(T, U, ISNAN);                                                          \
            }                                                                                      \
    }                                                                                              \
    static void acc_##op##_##sfx(void *restrict dv, void *restrict d2v, const void *restrict bv,   \
                                 size_t n) {                                                       \
        T *restrict d = dv, *restrict d2 = d2v;                                                    \
        const T *restrict y = bv;                                                                  \
        if (d2)                                                                                    \
            for (size_t i = 0; i < n; i++) {                                                       \
                T a = d[i], b = y[i];                                                              \
                d[i] = d2[i] = EXPR(T, U, ISNAN);                                                  \
            }                                                                                      \
        else                                                                                       \
            for (size_t i = 0; i < n; i++) {                                                       \
                T a = d[i], b = y[i];                                                              \
                d[i] = EXPR(T, U, ISNAN);                                                          \
            }                                                                                      \
    }

#define DEF_HOLD(sfx, T, ISNAN)                                                                    \
    static void hold_##sfx(int32_t *restrict cnt, const void *restrict mv,                         \
                           const void *restrict xv, size_t n) {                                    \
        const T *restrict m = mv, *restrict x = xv;                                                \
        for (size_t i = 0; i < n; i++) cnt[i] += x[i] == m[i] || (ISNAN(x[i]) && ISNAN(m[i]));     \
    }

#define NO_NAN(v)  0
#define FLT_NAN(v) ((v) != (v))
#define DEF_TYPE(sfx, T, U, ISNAN)                                                                 \
    DEF_KERN(sfx, T, U, ISNAN, max, MAX_EXPR)                                                      \
    DEF_KERN(sfx, T, U, ISNAN, min, MIN_EXPR)                                                      \
    DEF_HOLD(sfx, T, ISNAN)
#define DEF_SUM(sfx, T, U, ISNAN) DEF_KERN(sfx, T, U, ISNAN, sum, SUM_EXPR)

DEF_TYPE(u8, uint8_t, uint8_t, NO_NAN) /* bool too: max is or, min is and */
DEF_TYPE(i8, int8_t, uint8_t, NO_NAN)
DEF_TYPE(i16, int16_t, uint16_t, NO_NAN)
DEF_TYPE(i32, int32_t, uint32_t, NO_NAN)
DEF_TYPE(i64, int64_t, uint64_t, NO_NAN)
DEF_TYPE(f32, float, float, FLT_NAN)
DEF_TYPE(f64, double, double, FLT_NAN)
DEF_SUM(u8, uint8_t, uint8_t, NO_NAN)
DEF_SUM(i8, int8_t, uint8_t, NO_NAN)
DEF_SUM(i16, int16_t, uint16_t, NO_NAN)
DEF_SUM(i32, int32_t, uint32_t, NO_NAN)
DEF_SUM(i64, int64_t, uint64_t, NO_NAN)
DEF_SUM(f32, float, float, FLT_NAN)
DEF_SUM(f64, double, double, FLT_NAN)

#define KERN(op, sfx)                                                                              \
    { first_##op##_##sfx, acc_##op##_##sfx }
#define K3(sfx)                                                                                    \
    { KERN(sum, sfx), KERN(max, sfx), KERN(min, sfx) }
static const kern kernels[TG_DT_COUNT][3] = {
    [TG_DT_BOOL] = {{NULL, NULL}, KERN(max, u8), KERN(min, u8)},
    [TG_DT_I8] = K3(i8),
    [TG_DT_I16] = K3(i16),
    [TG_DT_I32] = K3(i32),
    [TG_DT_I64] = K3(i64),
    [TG_DT_U8] = K3(u8),
    [TG_DT_F32] = K3(f32),
    [TG_DT_F64] = K3(f64),
};
static const hold_fn holds[TG_DT_COUNT] = {
    [TG_DT_BOOL] = hold_u8, [TG_DT_I8] = hold_i8, [TG_DT_I16] = hold_i16, [TG_DT_I32] = hold_i32,
    [TG_DT_I64] = hold_i64, [TG_DT_U8] = hold_u8, [TG_DT_F32] = hold_f32, [TG_DT_F64] = hold_f64,
};

void tg_comm_combine(tg_comm_op op, tg_dtype dt, void *acc, const void *src, size_t count) {
    TG_ASSERT((unsigned)dt < TG_DT_COUNT && (unsigned)op < 3 && kernels[dt][op].acc);
    kernels[dt][op].acc(acc, NULL, src, count);
}

bool tg_comm_supports(tg_comm_op op, tg_dtype dt) {
    return (unsigned)dt < TG_DT_COUNT && (unsigned)op < 3 && kernels[dt][op].acc;
}

void tg_comm_count_equal(tg_dtype dt, int32_t *cnt, const void *m, const void *x, size_t count) {
    TG_ASSERT((unsigned)dt < TG_DT_COUNT && holds[dt]);
    holds[dt](cnt, m, x, count);
}

/* ---- the communicator ---- */

tg_comm *tg_comm_new(tg_ctx *ctx, int n) {
    if (!ctx) ctx = tg_ctx_default();
    if (n < 1 || n > TG_COMM_MAX_RANKS) {
        tg_set_error(n < 1 ? TG_EINVAL : TG_ELIMIT, "communicator: %d ranks, expected 1 to %d", n,
                     TG_COMM_MAX_RANKS);
        return NULL;
    }
    tg_comm *c = tg_mem_calloc(ctx, sizeof *c);
    if (!c) return NULL;
    c->ctx = ctx;
    c->n = n;
    c->small_max = TG_COMM_SMALL_DEFAULT;
    c->stride = (STAGE_AT + TG_COMM_STAGE_MAX + LINE - 1) / LINE * LINE;
    c->mem_size = LINE + (size_t)n * sizeof(home) + 2 * (size_t)n * c->stride;
    c->mem = tg_mem_calloc(ctx, c->mem_size);
    c->queues = c->mem ? tg_mem_calloc(ctx, sizeof *c->queues * (size_t)n) : NULL;
    if (!c->queues) {
        tg_mem_free(ctx, c->mem, c->mem_size);
        tg_mem_free(ctx, c, sizeof *c);
        return NULL;
    }
    c->homes = (home *)(c->mem + (LINE - (uintptr_t)c->mem % LINE) % LINE);
    c->slots = (unsigned char *)(c->homes + n);
    atomic_init(&c->state, 0);
    atomic_init(&c->sleepers, 0);
    atomic_init(&c->abort_claimed, 0);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

tg_status tg_comm_new_spanning(tg_ctx *ctx, int n, int nlocal, int base, tg_comm **out) {
    if (!ctx) ctx = tg_ctx_default();
    *out = NULL;
    tg_comm *c = tg_mem_calloc(ctx, sizeof *c);
    if (!c) return tg_set_error(TG_ENOMEM, "out of memory: a communicator of %d ranks", n);
    c->ctx = ctx;
    c->n = n;
    atomic_init(&c->state, 0);
    atomic_init(&c->abort_claimed, 0);
    if (!(c->queues = tg_mem_calloc(ctx, sizeof *c->queues * (size_t)n))) {
        tg_mem_free(ctx, c, sizeof *c);
        return tg_set_error(TG_ENOMEM, "out of memory: a communicator of %d ranks", n);
    }
#ifdef TG_HAVE_MPI
    tg_status st = tg_xcomm_new(ctx, n, nlocal, base, &c->x);
#else
    (void)nlocal, (void)base;
    tg_status st = tg_set_error(TG_EUNSUPPORTED, "this build of tgraph has no MPI");
#endif
    if (st != TG_OK) {
        tg_mem_free(ctx, c->queues, sizeof *c->queues * (size_t)n);
        tg_mem_free(ctx, c, sizeof *c);
        return st;
    }
    *out = c;
    return TG_OK;
}

void tg_comm_free(tg_comm *c) {
    if (!c) return;
    for (int r = 0; r < c->n; r++) tg_comm_queue_free(c->queues[r]); /* before the engine */
    tg_mem_free(c->ctx, c->queues, sizeof *c->queues * (size_t)c->n);
#ifdef TG_HAVE_MPI
    if (c->x) {
        tg_xcomm_free(c->x);
        tg_mem_free(c->ctx, c, sizeof *c);
        return;
    }
#endif
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    tg_mem_free(c->ctx, c->mem, c->mem_size);
    tg_mem_free(c->ctx, c, sizeof *c);
}

int tg_comm_size(const tg_comm *c) { return c->n; }

tg_comm_queue **tg_comm_queues(tg_comm *c) { return c->queues; }

tg_ctx *tg_comm_ctx(const tg_comm *c) { return c->ctx; }

void tg_comm_set_small_max(tg_comm *c, size_t bytes) {
    c->small_max = bytes < TG_COMM_STAGE_MAX ? bytes : TG_COMM_STAGE_MAX;
}

static inline slot *slot_at(const tg_comm *c, uint64_t epoch, int rank) {
    return (slot *)(c->slots + ((size_t)(epoch & 1) * (size_t)c->n + (size_t)rank) * c->stride);
}

static inline unsigned char *stage(slot *s) { return (unsigned char *)s + STAGE_AT; }

static void wake_all(tg_comm *c) {
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void tg_comm_abort(tg_comm *c, tg_status why) {
    TG_ASSERT(why != TG_OK);
    int expected = 0;
    if (atomic_compare_exchange_strong(&c->abort_claimed, &expected, 1)) {
        c->why = why;
        snprintf(c->why_msg, sizeof c->why_msg, "%s", tg_last_error());
        atomic_fetch_or(&c->state, ABORT_BIT); /* publishes why and why_msg */
    }
#ifdef TG_HAVE_MPI
    if (c->x) {
        tg_xcomm_abort(c->x, why);
        return;
    }
#endif
    wake_all(c);
}

void tg_comm_reset(tg_comm *c) {
#ifdef TG_HAVE_MPI
    if (c->x) { /* the processes stay out of step: mpi.c refuses further collectives */
        atomic_store(&c->abort_claimed, 0);
        return;
    }
#endif
    uint64_t s = atomic_load(&c->state);
    atomic_store(&c->state, s & ~(COUNT_MASK | ABORT_BIT));
    for (int r = 0; r < c->n; r++) {
        c->homes[r].epoch = 0;
        atomic_store(&slot_at(c, 0, r)->seq, 0);
        atomic_store(&slot_at(c, 1, r)->seq, 0);
    }
    atomic_store(&c->abort_claimed, 0);
}

static bool is_aborted(tg_comm *c) {
    return atomic_load_explicit(&c->state, memory_order_acquire) & ABORT_BIT;
}

static tg_status aborted(tg_comm *c) {
    if (c->why_msg[0]) return tg_set_error(c->why, "collective aborted: %s", c->why_msg);
    return tg_set_error(c->why, "collective aborted (%s)", tg_status_str(c->why));
}

tg_status tg_comm_check(tg_comm *c) { return is_aborted(c) ? aborted(c) : TG_OK; }

/* ---- waiting ---- */

/* Waits until done(arg): spinning, then asleep until whoever changes what done() reads
 * calls wake_all after storing it (with seq_cst, as the announcement is read). */
static void wait_for(tg_comm *c, bool (*done)(void *arg), void *arg) {
    if (done(arg) || tg_spin_wait(done, arg)) return;
    pthread_mutex_lock(&c->mu);
    atomic_fetch_add(&c->sleepers, 1);
    while (!done(arg)) pthread_cond_wait(&c->cv, &c->mu);
    atomic_fetch_sub(&c->sleepers, 1);
    pthread_mutex_unlock(&c->mu);
}

typedef struct flag_wait {
    tg_comm *c;
    uint64_t epoch;
    int next; /* ranks below it have published */
} flag_wait;

static bool flags_done(void *arg) {
    flag_wait *w = arg;
    while (w->next < w->c->n && atomic_load_explicit(&slot_at(w->c, w->epoch, w->next)->seq,
                                                     memory_order_acquire) == w->epoch)
        w->next++;
    return w->next == w->c->n || is_aborted(w->c);
}

/* The staged path's synchronisation: publishes this rank's slot and waits for every
 * rank's, or for an abort. */
static tg_status exchange(tg_comm *c, slot *me, uint64_t epoch) {
    atomic_store(&me->seq, epoch);
    if (atomic_load(&c->sleepers) > 0) wake_all(c);
    flag_wait w = {c, epoch, 0};
    wait_for(c, flags_done, &w);
    return w.next == c->n ? TG_OK : aborted(c);
}

typedef struct gen_wait {
    tg_comm *c;
    uint64_t gen;   /* the generation waited out */
    bool abortable; /* an abort also ends the wait */
} gen_wait;

static bool gen_done(void *arg) {
    const gen_wait *w = arg;
    uint64_t s = atomic_load_explicit(&w->c->state, memory_order_acquire);
    return s >> GEN_SHIFT != w->gen || (w->abortable && (s & ABORT_BIT));
}

/* The counter barrier: arrives and waits for every rank. An entry (abortable) refuses to
 * arrive, or stops waiting, once the communicator is aborted. */
static tg_status arrive(tg_comm *c, bool abortable) {
    uint64_t s = atomic_load_explicit(&c->state, memory_order_acquire), next;
    do {
        if (abortable && (s & ABORT_BIT)) return aborted(c);
        next = s + 1;
        if ((next & COUNT_MASK) == (uint64_t)c->n) next = (next & ~COUNT_MASK) + GEN_ONE;
    } while (!atomic_compare_exchange_weak(&c->state, &s, next));
    if (next >> GEN_SHIFT != s >> GEN_SHIFT) { /* the last one */
        if (atomic_load(&c->sleepers) > 0) wake_all(c);
        return TG_OK;
    }
    gen_wait w = {c, s >> GEN_SHIFT, abortable};
    wait_for(c, gen_done, &w);
    if (atomic_load_explicit(&c->state, memory_order_acquire) >> GEN_SHIFT != w.gen) return TG_OK;
    return aborted(c);
}

/* ---- starting and ending a collective ---- */

/* A collective in flight on one rank. */
typedef struct call {
    tg_comm *c;
    uint64_t epoch;
    slot *me;    /* this rank's slot */
    bool staged; /* the path */
} call;

/* Starts a collective: publishes hdr (seq aside) and, when `bytes` take the staged path,
 * a copy of them from send; then waits for every rank to have started it. */
static tg_status begin(call *k, tg_comm *c, int rank, const slot *hdr, const void *send,
                       size_t bytes) {
    TG_ASSERT(rank >= 0 && rank < c->n);
    if (is_aborted(c)) return aborted(c);
    k->c = c;
    k->epoch = ++c->homes[rank].epoch;
    k->me = slot_at(c, k->epoch, rank);
    k->me->count = hdr->count;
    k->me->kind = hdr->kind;
    k->me->dtype = hdr->dtype;
    k->me->op = hdr->op;
    k->me->send = hdr->send;
    k->me->recv = hdr->recv;
    k->me->holders = hdr->holders;
    k->staged = bytes == 0 || bytes <= c->small_max; /* a barrier reads no setting */
    tg_status st;
    if (k->staged) {
        if (bytes) memcpy(stage(k->me), send, bytes);
        st = exchange(c, k->me, k->epoch);
    } else {
        st = arrive(c, true);
    }
#ifndef NDEBUG
    if (st == TG_OK) { /* every rank called the same collective with the same arguments */
        const slot *r0 = slot_at(c, k->epoch, 0);
        TG_ASSERT(r0->kind == hdr->kind && r0->count == hdr->count && r0->dtype == hdr->dtype &&
                  r0->op == hdr->op);
    }
#endif
    return st;
}

/* Ends it: on the direct path, once no rank reads another's buffers any more. */
static tg_status end(call *k) { return k->staged ? TG_OK : arrive(k->c, false); }

/* ---- reductions ---- */

typedef struct job {
    const call *k;
    const kern *kn;
    hold_fn hold; /* the extreme's holders, or NULL */
    size_t es;    /* element size */
    size_t off;   /* elements skipped at the start of every source */
    bool to_all;  /* results go to every rank's recv, else to `recv` only */
    void *recv;
    int32_t *holders;
} job;

static inline const unsigned char *source(const job *j, int r) {
    slot *s = slot_at(j->k->c, j->k->epoch, r);
    return (j->k->staged ? stage(s) : (const unsigned char *)s->send) + j->off * j->es;
}

static inline unsigned char *dest(const job *j, int r) {
    return j->to_all ? slot_at(j->k->c, j->k->epoch, r)->recv : j->recv;
}

static inline bool overlap(const unsigned char *a, const unsigned char *b, size_t n) {
    return a < b + n && b < a + n;
}

/* Elements [lo, hi) reduced over the ranks in rank order, written to the destinations at
 * lo (relative to `off`), a block at a time. A block is reduced straight into the first
 * destination when the sources stay intact: it overlaps none of them, or it is source 0
 * itself (in place) and no count of holders reads the sources afterwards; else into a
 * buffer on the stack. The last operation also writes the second destination when that
 * overlaps no source either (one pass over the data for two ranks, as a loop written for
 * them would do). The other destinations get a copy once every source of the block has
 * been read. */
static void reduce_range(const job *j, size_t lo, size_t hi) {
    _Alignas(LINE) unsigned char tmp[BLOCK * 8];
    int32_t cnt[BLOCK];
    const int n = j->k->c->n, ndst = j->to_all ? n : 1;
    const size_t es = j->es;
    for (size_t b = lo; b < hi; b += BLOCK) {
        const size_t m = hi - b < BLOCK ? hi - b : BLOCK, bytes = m * es;
        const unsigned char *s0 = source(j, 0) + b * es;
        unsigned char *acc = dest(j, 0) + b * es, *two = ndst > 1 ? dest(j, 1) + b * es : NULL;
        for (int r = acc == s0 && !j->hold ? 1 : 0; r < n && acc != tmp; r++)
            if (overlap(acc, source(j, r) + b * es, bytes)) acc = tmp;
        for (int r = 0; r < n && two; r++)
            if (acc == tmp || acc == s0 || overlap(two, source(j, r) + b * es, bytes)) two = NULL;
        if (acc == s0) { /* in place: s0 op= s1, ... */
            for (int r = 1; r < n; r++) j->kn->acc(acc, NULL, source(j, r) + b * es, m);
        } else if (n == 1) {
            memcpy(acc, s0, bytes);
        } else {
            j->kn->first(acc, n == 2 ? two : NULL, s0, source(j, 1) + b * es, m);
            for (int r = 2; r < n; r++)
                j->kn->acc(acc, r == n - 1 ? two : NULL, source(j, r) + b * es, m);
        }
        if (j->hold) {
            memset(cnt, 0, m * sizeof cnt[0]);
            for (int r = 0; r < n; r++) j->hold(cnt, acc, source(j, r) + b * es, m);
        }
        for (int r = 0; r < ndst; r++) {
            unsigned char *d = dest(j, r) + b * es;
            if (d != acc && d != two) memcpy(d, acc, bytes);
            if (j->hold) {
                int32_t *h = j->to_all ? slot_at(j->k->c, j->k->epoch, r)->holders : j->holders;
                memcpy(h + b, cnt, m * sizeof cnt[0]);
            }
        }
    }
}

static tg_status unsupported(const char *what, tg_comm_op op, tg_dtype dt) {
    static const char *const names[] = {"sum", "max", "min"};
    return tg_set_error(TG_EUNSUPPORTED, "%s: %s of %s is not supported", what, names[op],
                        tg_dtype_name(dt));
}

/* all_reduce and all_reduce_extreme */
static tg_status all_reduce(tg_comm *c, int rank, kind kd, tg_comm_op op, tg_dtype dt,
                            const void *send, void *recv, int32_t *holders, size_t count) {
    TG_ASSERT((unsigned)dt < TG_DT_COUNT && (unsigned)op < 3);
    if (!kernels[dt][op].first)
        return unsupported(kd == K_EXTREME ? "all_reduce_extreme" : "all_reduce", op, dt);
    const size_t es = tg_dtype_size(dt);
    slot hdr = {.count = count,
                .kind = kd,
                .dtype = (int16_t)dt,
                .op = (int16_t)op,
                .send = send,
                .recv = recv,
                .holders = holders};
    call k;
    tg_status st = begin(&k, c, rank, &hdr, send, count * es);
    if (st != TG_OK) return st;
    job j = {.k = &k,
             .kn = &kernels[dt][op],
             .hold = holders ? holds[dt] : NULL,
             .es = es,
             .recv = recv,
             .holders = holders};
    if (k.staged) {
        reduce_range(&j, 0, count);
        return TG_OK;
    }
    int64_t lo, hi; /* this rank's slice, whole cache lines */
    tg_pool_share((int64_t)count, rank, c->n, (int64_t)(LINE / es), &lo, &hi);
    j.to_all = true;
    reduce_range(&j, (size_t)lo, (size_t)hi);
    return end(&k);
}

tg_status tg_comm_all_reduce(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                             void *recv, size_t count) {
#ifdef TG_HAVE_MPI
    if (c->x) return tg_xcomm_all_reduce(c->x, rank, op, dt, send, recv, count);
#endif
    return all_reduce(c, rank, K_ALL_REDUCE, op, dt, send, recv, NULL, count);
}

tg_status tg_comm_all_reduce_extreme(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt,
                                     const void *send, void *recv, int32_t *holders, size_t count) {
#ifdef TG_HAVE_MPI
    if (c->x) return tg_xcomm_all_reduce_extreme(c->x, rank, op, dt, send, recv, holders, count);
#endif
    TG_ASSERT(op == TG_COMM_MAX || op == TG_COMM_MIN);
    TG_ASSERT(holders || count == 0);
    return all_reduce(c, rank, K_EXTREME, op, dt, send, recv, holders, count);
}

tg_status tg_comm_reduce_scatter(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                                 void *recv, size_t block) {
#ifdef TG_HAVE_MPI
    if (c->x) return tg_xcomm_reduce_scatter(c->x, rank, op, dt, send, recv, block);
#endif
    TG_ASSERT((unsigned)dt < TG_DT_COUNT && (unsigned)op < 3);
    if (!kernels[dt][op].first) return unsupported("reduce_scatter", op, dt);
    const size_t es = tg_dtype_size(dt);
    slot hdr = {.count = block,
                .kind = K_REDUCE_SCATTER,
                .dtype = (int16_t)dt,
                .op = (int16_t)op,
                .send = send,
                .recv = recv};
    call k;
    tg_status st = begin(&k, c, rank, &hdr, send, (size_t)c->n * block * es);
    if (st != TG_OK) return st;
    job j = {.k = &k, .kn = &kernels[dt][op], .es = es, .off = (size_t)rank * block, .recv = recv};
    reduce_range(&j, 0, block);
    return end(&k);
}

/* ---- moves ---- */

tg_status tg_comm_all_gather(tg_comm *c, int rank, const void *send, void *recv, size_t bytes) {
#ifdef TG_HAVE_MPI
    if (c->x) return tg_xcomm_all_gather(c->x, rank, send, recv, bytes);
#endif
    slot hdr = {.count = bytes, .kind = K_ALL_GATHER, .send = send, .recv = recv};
    call k;
    tg_status st = begin(&k, c, rank, &hdr, send, bytes);
    if (st != TG_OK) return st;
    for (int r = 0; r < c->n; r++) {
        slot *s = slot_at(c, k.epoch, r);
        const void *from = k.staged ? stage(s) : s->send;
        unsigned char *to = (unsigned char *)recv + (size_t)r * bytes;
        if (from != to) memcpy(to, from, bytes);
    }
    return end(&k);
}

tg_status tg_comm_permute(tg_comm *c, int rank, const int *src, const int *dst, int npairs,
                          const void *send, void *recv, size_t bytes) {
#ifdef TG_HAVE_MPI
    if (c->x) return tg_xcomm_permute(c->x, rank, src, dst, npairs, send, recv, bytes);
#endif
    TG_ASSERT(npairs >= 0 && (npairs == 0 || (src && dst)));
    int from = -1; /* the rank this one receives from */
    for (int p = 0; p < npairs; p++) {
        TG_ASSERT(src[p] >= 0 && src[p] < c->n && dst[p] >= 0 && dst[p] < c->n);
        if (dst[p] == rank) {
            TG_ASSERT(from < 0); /* one sender per destination */
            from = src[p];
        }
    }
    slot hdr = {.count = bytes, .kind = K_PERMUTE, .send = send, .recv = recv};
    call k;
    tg_status st = begin(&k, c, rank, &hdr, send, bytes);
    if (st != TG_OK) return st;
    if (from < 0) {
        memset(recv, 0, bytes);
    } else {
        slot *s = slot_at(c, k.epoch, from);
        memcpy(recv, k.staged ? stage(s) : s->send, bytes);
    }
    return end(&k);
}

tg_status tg_comm_barrier(tg_comm *c, int rank) {
#ifdef TG_HAVE_MPI
    if (c->x) return tg_xcomm_barrier(c->x, rank);
#endif
    slot hdr = {.kind = K_BARRIER};
    call k;
    return begin(&k, c, rank, &hdr, NULL, 0);
}
