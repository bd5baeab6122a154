/* comm.c - collectives between the threads of one process (comm.h has the contract).
 *
 * The barrier. One 64-bit word holds the generation (high bits), an abort bit and the
 * number of ranks arrived (low bits). A rank arrives with a compare-and-swap; the last one
 * clears the count and advances the generation in the same swap, and the others wait for
 * the generation to move: spinning (tg_spin_wait), then asleep on a condition variable
 * (the pool's handshake: a sleeper announces itself, then checks under the mutex; the
 * last arrival swaps, then reads the announcement). No rank keeps local state: a rank
 * reads the generation before it arrives, and it cannot move without that rank.
 *
 * Aborting. The first barrier of a collective (the entry) refuses arrivals once the abort
 * bit is set, and its waiters give up when they see it; since an arrival and the abort are
 * ordered on one word, either every rank got past the entry or none will. The barriers
 * after the entry ignore the bit: every rank is already inside and none can fail, so the
 * collective completes and no rank returns while another still reads its buffers.
 *
 * Two paths. Every rank publishes its buffers in its slot, one of two per rank chosen by
 * the parity of the entry's generation.
 *  - Staged (at most small_max bytes per rank): a rank copies its send buffer into its
 *    slot, arrives at the entry, then reads every rank's copy and writes its own result.
 *    One barrier: the next collective writes the other slot, and the one after can write
 *    this slot again only once the barrier between them shows that every reader is done.
 *  - Direct: the entry, then each rank reads the others' buffers in place, then a second
 *    barrier (the exit) before anyone returns. An all-reduce splits the elements into n
 *    slices (cache-line aligned); the rank owning a slice reduces it over every rank's
 *    send buffer and writes the result into every rank's recv buffer: one pass over the
 *    data and two barriers, where reducing into one's own buffer and then copying the
 *    other slices would take a second pass and a third barrier. In place is safe: element
 *    i of any buffer is read and written only by the owner of i's slice, which reads all
 *    the sources of a block before writing it anywhere.
 * Measured between 2 threads (bench/comm.c, docs/devices.md) the staged path is faster up
 * to 2 KiB per rank (TG_COMM_SMALL_DEFAULT).
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

/* What a rank publishes for one collective; its staged copy follows, at LINE. */
typedef struct slot {
    const void *send; /* the rank's buffers */
    void *recv;
    int32_t *holders; /* all_reduce_extreme */
    size_t count;     /* elements or bytes (checked builds compare across ranks) */
    int kind;         /* the collective (idem) */
    int dtype;        /* idem */
    int op;           /* idem */
} slot;

struct tg_comm {
    tg_ctx *ctx;        /* allocator of this object */
    int n;              /* ranks */
    size_t small_max;   /* staged path up to this many bytes per rank */
    size_t stride;      /* bytes between two slots */
    unsigned char *mem; /* the slots as allocated */
    size_t mem_size;
    unsigned char *slots; /* 2 * n slots, LINE-aligned: parity * n + rank */
    pthread_mutex_t mu;   /* guards sleeping on cv */
    pthread_cond_t cv;
    _Alignas(LINE) _Atomic uint64_t state; /* generation << GEN_SHIFT | abort | arrived */
    _Alignas(LINE) atomic_int sleepers;    /* ranks asleep on cv */
    atomic_int abort_claimed;              /* the first abort writes why and why_msg */
    tg_status why;
    char why_msg[TG_ERRMSG_MAX];
};

/* ---- kernels: d = a op b, and d op= b, per dtype and op; holders ---- */

typedef void (*first_fn)(void *restrict d, const void *restrict a, const void *restrict b,
                         size_t n);
typedef void (*acc_fn)(void *restrict d, const void *restrict b, size_t n);
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

#define DEF_KERN(sfx, T, U, ISNAN, op, EXPR)                                                       \
    static void first_##op##_##sfx(void *restrict dv, const void *restrict av,                     \
                                   const void *restrict bv, size_t n) {                            \
        T *restrict d = dv;                                                                        \
        const T *restrict x = av, *restrict y = bv;                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            T a = x[i], b = y[i];                                                                  \
            d[i] = EXPR(T, U, ISNAN);                                                              \
        }                                                                                          \
    }                                                                                              \
    static void acc_##op##_##sfx(void *restrict dv, const void *restrict bv, size_t n) {           \
        T *restrict d = dv;                                                                        \
        const T *restrict y = bv;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            T a = d[i], b = y[i];                                                                  \
            d[i] = EXPR(T, U, ISNAN);                                                              \
        }                                                                                          \
    }

#define DEF_HOLD(sfx, T, ISNAN)                                                                    \
    static void hold_##sfx(int32_t *restrict cnt, const void *restrict mv,                         \
                           const void *restrict xv, size_t n) {                                    \
        const T *restrict m = mv, *restrict x = xv;                                                \
        for (size_t i = 0; i < n; i++) cnt[i] += x[i] == m[i] || (ISNAN(x[i]) && ISNAN(m[i]));     \
    }

#define NO_NAN(v)    0
#define FLT_NAN(v)   ((v) != (v))
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

#define K3(sfx)                                                                                    \
    {{first_sum_##sfx, acc_sum_##sfx}, {first_max_##sfx, acc_max_##sfx},                           \
     {first_min_##sfx, acc_min_##sfx}}
static const kern kernels[TG_DT_COUNT][3] = {
    [TG_DT_BOOL] = {{NULL, NULL}, {first_max_u8, acc_max_u8}, {first_min_u8, acc_min_u8}},
    [TG_DT_I8] = K3(i8),
    [TG_DT_I16] = K3(i16),
    [TG_DT_I32] = K3(i32),
    [TG_DT_I64] = K3(i64),
    [TG_DT_U8] = K3(u8),
    [TG_DT_F32] = K3(f32),
    [TG_DT_F64] = K3(f64),
};
static const hold_fn holds[TG_DT_COUNT] = {
    [TG_DT_BOOL] = hold_u8, [TG_DT_I8] = hold_i8,   [TG_DT_I16] = hold_i16, [TG_DT_I32] = hold_i32,
    [TG_DT_I64] = hold_i64, [TG_DT_U8] = hold_u8,   [TG_DT_F32] = hold_f32, [TG_DT_F64] = hold_f64,
};

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
    c->stride = LINE + TG_COMM_STAGE_MAX;
    c->mem_size = 2 * (size_t)n * c->stride + LINE;
    c->mem = tg_mem_alloc(ctx, c->mem_size);
    if (!c->mem) {
        tg_mem_free(ctx, c, sizeof *c);
        return NULL;
    }
    c->slots = c->mem + (LINE - (uintptr_t)c->mem % LINE) % LINE;
    atomic_init(&c->state, 0);
    atomic_init(&c->sleepers, 0);
    atomic_init(&c->abort_claimed, 0);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

void tg_comm_free(tg_comm *c) {
    if (!c) return;
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    tg_mem_free(c->ctx, c->mem, c->mem_size);
    tg_mem_free(c->ctx, c, sizeof *c);
}

int tg_comm_size(const tg_comm *c) { return c->n; }

void tg_comm_set_small_max(tg_comm *c, size_t bytes) {
    c->small_max = bytes < TG_COMM_STAGE_MAX ? bytes : TG_COMM_STAGE_MAX;
}

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
    wake_all(c);
}

void tg_comm_reset(tg_comm *c) {
    uint64_t s = atomic_load(&c->state);
    atomic_store(&c->state, s & ~(COUNT_MASK | ABORT_BIT));
    atomic_store(&c->abort_claimed, 0);
}

static tg_status aborted(tg_comm *c) {
    if (c->why_msg[0]) return tg_set_error(c->why, "collective aborted: %s", c->why_msg);
    return tg_set_error(c->why, "collective aborted (%s)", tg_status_str(c->why));
}

/* ---- the barrier ---- */

typedef struct gen_wait {
    _Atomic uint64_t *state;
    uint64_t gen;   /* the generation waited out */
    bool abortable; /* an abort also ends the wait */
} gen_wait;

static bool gen_done(void *arg) {
    const gen_wait *w = arg;
    uint64_t s = atomic_load_explicit(w->state, memory_order_acquire);
    return s >> GEN_SHIFT != w->gen || (w->abortable && (s & ABORT_BIT));
}

/* Arrives at the barrier of generation `gen` and waits for every rank. An entry
 * (abortable) refuses to arrive, or stops waiting, once the communicator is aborted. */
static tg_status arrive(tg_comm *c, uint64_t gen, bool abortable) {
    uint64_t s = atomic_load_explicit(&c->state, memory_order_relaxed), next;
    do {
        if (abortable && (s & ABORT_BIT)) return aborted(c);
        TG_ASSERT(s >> GEN_SHIFT == gen);
        next = s + 1;
        if ((next & COUNT_MASK) == (uint64_t)c->n) next = (next & ~COUNT_MASK) + GEN_ONE;
    } while (!atomic_compare_exchange_weak(&c->state, &s, next));
    if (next >> GEN_SHIFT != gen) { /* the last one */
        if (atomic_load(&c->sleepers) > 0) wake_all(c);
        return TG_OK;
    }
    gen_wait w = {&c->state, gen, abortable};
    if (!tg_spin_wait(gen_done, &w)) {
        pthread_mutex_lock(&c->mu);
        atomic_fetch_add(&c->sleepers, 1);
        while (!gen_done(&w)) pthread_cond_wait(&c->cv, &c->mu);
        atomic_fetch_sub(&c->sleepers, 1);
        pthread_mutex_unlock(&c->mu);
    }
    if (atomic_load_explicit(&c->state, memory_order_acquire) >> GEN_SHIFT != gen) return TG_OK;
    return aborted(c);
}

/* ---- slots ---- */

static inline slot *slot_at(const tg_comm *c, uint64_t gen, int rank) {
    return (slot *)(c->slots + ((size_t)(gen & 1) * (size_t)c->n + (size_t)rank) * c->stride);
}

static inline unsigned char *stage(slot *s) { return (unsigned char *)s + LINE; }

/* Starts a collective: the generation of its entry (NULL slot and the abort's status when
 * aborted) and this rank's slot, filled in. */
static slot *publish(tg_comm *c, int rank, kind k, const void *send, void *recv, size_t count,
                     int dtype, int op, uint64_t *gen) {
    TG_ASSERT(rank >= 0 && rank < c->n);
    uint64_t s = atomic_load_explicit(&c->state, memory_order_acquire);
    if (s & ABORT_BIT) return NULL;
    *gen = s >> GEN_SHIFT;
    slot *me = slot_at(c, *gen, rank);
    *me = (slot){.send = send, .recv = recv, .count = count, .kind = k, .dtype = dtype, .op = op};
    return me;
}

/* Checked builds: every rank called the same collective with the same arguments. */
static void check_same(const tg_comm *c, uint64_t gen, const slot *me) {
#ifndef NDEBUG
    const slot *r0 = slot_at(c, gen, 0);
    TG_ASSERT(r0->kind == me->kind && r0->count == me->count && r0->dtype == me->dtype &&
              r0->op == me->op);
#else
    (void)c, (void)gen, (void)me;
#endif
}

/* ---- reductions ---- */

typedef struct job {
    const tg_comm *c;
    uint64_t gen;
    const kern *k;
    hold_fn hold; /* the extreme's holders, or NULL */
    size_t es;    /* element size */
    bool staged;  /* the sources are the staged copies, else the send buffers */
    size_t off;   /* elements skipped at the start of every source */
    bool to_all;  /* results go to every rank's recv, else to `recv` only */
    void *recv;
    int32_t *holders;
} job;

static inline const unsigned char *source(const job *j, int k) {
    slot *s = slot_at(j->c, j->gen, k);
    return (j->staged ? stage(s) : (const unsigned char *)s->send) + j->off * j->es;
}

/* Elements [lo, hi) reduced over the ranks in rank order, written to the destinations at
 * lo (relative to `off`). Each block is read from every source before it is written. */
static void reduce_range(const job *j, size_t lo, size_t hi) {
    _Alignas(LINE) unsigned char tmp[BLOCK * 8];
    int32_t cnt[BLOCK];
    const int n = j->c->n;
    const size_t es = j->es;
    for (size_t b = lo; b < hi; b += BLOCK) {
        size_t m = hi - b < BLOCK ? hi - b : BLOCK;
        if (n == 1)
            memcpy(tmp, source(j, 0) + b * es, m * es);
        else
            j->k->first(tmp, source(j, 0) + b * es, source(j, 1) + b * es, m);
        for (int k = 2; k < n; k++) j->k->acc(tmp, source(j, k) + b * es, m);
        if (j->hold) {
            memset(cnt, 0, m * sizeof cnt[0]);
            for (int k = 0; k < n; k++) j->hold(cnt, tmp, source(j, k) + b * es, m);
        }
        for (int k = 0; k < (j->to_all ? n : 1); k++) {
            const slot *s = slot_at(j->c, j->gen, k);
            unsigned char *d = j->to_all ? s->recv : j->recv;
            memcpy(d + b * es, tmp, m * es);
            if (j->hold) memcpy((j->to_all ? s->holders : j->holders) + b, cnt, m * sizeof cnt[0]);
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
    const char *what = kd == K_EXTREME ? "all_reduce_extreme" : "all_reduce";
    TG_ASSERT((unsigned)dt < TG_DT_COUNT && (unsigned)op < 3);
    if (!kernels[dt][op].first) return unsupported(what, op, dt);
    uint64_t gen;
    slot *me = publish(c, rank, kd, send, recv, count, dt, op, &gen);
    if (!me) return aborted(c);
    me->holders = holders;
    job j = {.c = c, .gen = gen, .k = &kernels[dt][op], .hold = holders ? holds[dt] : NULL,
             .es = tg_dtype_size(dt), .recv = recv, .holders = holders};
    size_t bytes = count * j.es;
    j.staged = bytes <= c->small_max;
    if (j.staged) memcpy(stage(me), send, bytes);
    tg_status st = arrive(c, gen, true);
    if (st != TG_OK) return st;
    check_same(c, gen, me);
    if (j.staged) {
        reduce_range(&j, 0, count);
        return TG_OK;
    }
    int64_t lo, hi; /* this rank's slice, whole cache lines */
    tg_pool_share((int64_t)count, rank, c->n, (int64_t)(LINE / j.es), &lo, &hi);
    j.to_all = true;
    reduce_range(&j, (size_t)lo, (size_t)hi);
    return arrive(c, gen + 1, false);
}

tg_status tg_comm_all_reduce(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, const void *send,
                             void *recv, size_t count) {
    return all_reduce(c, rank, K_ALL_REDUCE, op, dt, send, recv, NULL, count);
}

tg_status tg_comm_all_reduce_extreme(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt,
                                     const void *send, void *recv, int32_t *holders,
                                     size_t count) {
    TG_ASSERT(op == TG_COMM_MAX || op == TG_COMM_MIN);
    TG_ASSERT(holders || count == 0);
    return all_reduce(c, rank, K_EXTREME, op, dt, send, recv, holders, count);
}

tg_status tg_comm_reduce_scatter(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt,
                                 const void *send, void *recv, size_t block) {
    TG_ASSERT((unsigned)dt < TG_DT_COUNT && (unsigned)op < 3);
    if (!kernels[dt][op].first) return unsupported("reduce_scatter", op, dt);
    uint64_t gen;
    slot *me = publish(c, rank, K_REDUCE_SCATTER, send, recv, block, dt, op, &gen);
    if (!me) return aborted(c);
    job j = {.c = c, .gen = gen, .k = &kernels[dt][op], .es = tg_dtype_size(dt),
             .off = (size_t)rank * block, .recv = recv};
    size_t bytes = (size_t)c->n * block * j.es;
    j.staged = bytes <= c->small_max;
    if (j.staged) memcpy(stage(me), send, bytes);
    tg_status st = arrive(c, gen, true);
    if (st != TG_OK) return st;
    check_same(c, gen, me);
    reduce_range(&j, 0, block);
    return j.staged ? TG_OK : arrive(c, gen + 1, false);
}

/* ---- moves ---- */

tg_status tg_comm_all_gather(tg_comm *c, int rank, const void *send, void *recv, size_t bytes) {
    uint64_t gen;
    slot *me = publish(c, rank, K_ALL_GATHER, send, recv, bytes, 0, 0, &gen);
    if (!me) return aborted(c);
    bool staged = bytes <= c->small_max;
    if (staged) memcpy(stage(me), send, bytes);
    tg_status st = arrive(c, gen, true);
    if (st != TG_OK) return st;
    check_same(c, gen, me);
    for (int k = 0; k < c->n; k++) {
        slot *s = slot_at(c, gen, k);
        const void *from = staged ? stage(s) : s->send;
        unsigned char *to = (unsigned char *)recv + (size_t)k * bytes;
        if (from != to) memcpy(to, from, bytes);
    }
    return staged ? TG_OK : arrive(c, gen + 1, false);
}

tg_status tg_comm_permute(tg_comm *c, int rank, const int *src, const int *dst, int npairs,
                          const void *send, void *recv, size_t bytes) {
    TG_ASSERT(npairs >= 0 && (npairs == 0 || (src && dst)));
    int from = -1; /* the rank this one receives from */
    for (int p = 0; p < npairs; p++) {
        TG_ASSERT(src[p] >= 0 && src[p] < c->n && dst[p] >= 0 && dst[p] < c->n);
        if (dst[p] == rank) {
            TG_ASSERT(from < 0); /* one sender per destination */
            from = src[p];
        }
    }
    uint64_t gen;
    slot *me = publish(c, rank, K_PERMUTE, send, recv, bytes, npairs, 0, &gen);
    if (!me) return aborted(c);
    bool staged = bytes <= c->small_max;
    if (staged) memcpy(stage(me), send, bytes);
    tg_status st = arrive(c, gen, true);
    if (st != TG_OK) return st;
    check_same(c, gen, me);
    if (from < 0)
        memset(recv, 0, bytes);
    else {
        slot *s = slot_at(c, gen, from);
        memcpy(recv, staged ? stage(s) : s->send, bytes);
    }
    return staged ? TG_OK : arrive(c, gen + 1, false);
}

tg_status tg_comm_barrier(tg_comm *c, int rank) {
    uint64_t gen;
    slot *me = publish(c, rank, K_BARRIER, NULL, NULL, 0, 0, 0, &gen);
    if (!me) return aborted(c);
    tg_status st = arrive(c, gen, true);
    if (st == TG_OK) check_same(c, gen, me);
    return st;
}
