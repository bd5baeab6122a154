/* comm.c - W11a: psum between two threads (src/parallel/comm.c, tg_comm_all_reduce of
 * f64 sums, out of place) from 8 B to 16 MiB per rank, beside two floors measured in the
 * same run:
 *  (a) memcpy of the same bytes on one thread;
 *  (b) the same sum written by hand for two threads: each thread adds its half of the two
 *      shared input buffers and stores the sum into both output buffers, then a plain
 *      spin barrier (an atomic counter and a generation, no sleeping). Its inputs never
 *      change and no thread reads its output, so below a few KiB no data moves between the
 *      threads: it is then a bare barrier.
 * The two threads are pinned to two CPUs, and the three measures interleaved batch by
 * batch, so that a busy machine slows them alike. Each figure is the median over batches
 * of the mean time of one call in a batch; the ratios divide medians. Targets: 8 B under
 * 2 us, 16 MiB within 1.5x of (a), every size within 1.2x of (b).
 * Then the engine's two paths side by side at small sizes (staged: copies and flags;
 * direct: in place, two counter barriers), with the buffers as above and with fresh ones
 * (each thread writes its input before each call and reads its result after, as the ops
 * around a psum do): where the threshold TG_COMM_SMALL_DEFAULT comes from.
 * Uses the parallel layer's private header.
 * usage: bench_comm [--quick]
 */
#include "parallel/comm.h"
#include "bench_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#define RELAX() __builtin_ia32_pause()
#else
#define RELAX() ((void)0)
#endif

typedef struct sizes_t {
    size_t bytes;
    int calls;   /* per batch */
    int batches; /* median over these */
} sizes_t;

static const sizes_t sizes[] = {
    {8, 4000, 41},    {64, 4000, 41},    {1024, 2000, 41},
    {65536, 200, 41}, {1 << 20, 16, 31}, {16 << 20, 2, 15},
};

typedef struct bench {
    size_t count; /* doubles per rank */
    int calls;    /* per batch */
    int batches;
    double *in[2]; /* each rank's input */
    double *out[2];
    double t0, t1;  /* rank 0: the batch's start, then its time per call */
    bool fresh;     /* psum: each rank writes its input before a call and reads its result */
    double seen[2]; /* what they read */
    tg_comm *comm;
    /* the hand-written floor's barrier */
    _Alignas(64) atomic_uint arrived;
    _Alignas(64) atomic_uint gen;
} bench;

typedef void (*rank_fn)(bench *b, int rank);
typedef struct rank_arg {
    bench *b;
    rank_fn fn;
} rank_arg;

static void *rank1_main(void *p) {
    rank_arg *a = p;
    a->fn(a->b, 1);
    return NULL;
}

static int cpus[2] = {-1, -1}; /* where the two threads run */

/* Pins this thread to the first CPU it may run on, and later rank 1 to the second: left
 * to the scheduler, two threads that sleep and wake (the engine's waits) can end up taking
 * turns on one CPU of a busy machine, a switch per call, while the floor's threads, which
 * never sleep, stay apart. Two CPUs are what the measure is about. */
static void pin_main(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &set)) cpus[k++] = c;
    if (cpus[1] < 0) return; /* one CPU: nothing to choose */
    CPU_ZERO(&set);
    CPU_SET(cpus[0], &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* fn(b, 0) on this thread and fn(b, 1) on another, at once */
static void run2(bench *b, rank_fn fn) {
    pthread_t t;
    rank_arg a = {b, fn};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (cpus[1] >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[1], &set);
        pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    int rc = pthread_create(&t, &attr, rank1_main, &a);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        fprintf(stderr, "bench_comm: cannot start a thread\n");
        exit(1);
    }
    fn(b, 0);
    pthread_join(t, NULL);
}

static void spin_barrier(bench *b) {
    unsigned g = atomic_load_explicit(&b->gen, memory_order_relaxed);
    if (atomic_fetch_add(&b->arrived, 1) == 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&b->gen, g + 1, memory_order_release);
    } else {
        while (atomic_load_explicit(&b->gen, memory_order_acquire) == g) RELAX();
    }
}

/* one batch of psum calls, after two to warm up; rank 0 keeps the time per call */
static void psum_rank(bench *b, int rank) {
    double *in = b->in[rank], *out = b->out[rank], seen = 0;
    for (int i = -2; i < b->calls; i++) {
        if (i == 0) {
            tg_comm_barrier(b->comm, rank);
            b->t0 = bench_now();
        }
        if (b->fresh)
            for (size_t e = 0; e < b->count; e++) in[e] = (double)(i + (int)e);
        if (tg_comm_all_reduce(b->comm, rank, TG_COMM_SUM, TG_DT_F64, in, out, b->count) != TG_OK) {
            fprintf(stderr, "bench_comm: %s\n", tg_last_error());
            exit(1);
        }
        if (b->fresh)
            for (size_t e = 0; e < b->count; e++) seen += out[e];
    }
    if (rank == 0) b->t1 = (bench_now() - b->t0) / b->calls;
    b->seen[rank] = seen;
}

/* floor (b): this thread's half, summed and stored into both outputs, then the barrier */
static void half_sum(bench *b, int rank) {
    size_t half = (b->count + 1) / 2, lo = rank ? half : 0, hi = rank ? b->count : half;
    const double *restrict x = b->in[0] + lo, *restrict y = b->in[1] + lo;
    double *restrict o0 = b->out[0] + lo, *restrict o1 = b->out[1] + lo;
    for (size_t i = 0; i < hi - lo; i++) {
        double s = x[i] + y[i];
        o0[i] = s;
        o1[i] = s;
    }
    spin_barrier(b);
}

static void floor_rank(bench *b, int rank) {
    for (int i = -2; i < b->calls; i++) {
        if (i == 0) {
            spin_barrier(b);
            b->t0 = bench_now();
        }
        half_sum(b, rank);
    }
    if (rank == 0) b->t1 = (bench_now() - b->t0) / b->calls;
}

static double time_memcpy(bench *b) {
    size_t bytes = b->count * sizeof(double);
    memcpy(b->out[0], b->in[0], bytes);
    double t0 = bench_now();
    for (int i = 0; i < b->calls; i++) {
        memcpy(b->out[0], b->in[0], bytes);
        __asm__ __volatile__("" ::"r"(b->out[0]) : "memory"); /* keep every copy */
    }
    return (bench_now() - t0) / b->calls;
}

static double time_psum(bench *b, size_t small_max) {
    tg_comm_set_small_max(b->comm, small_max);
    run2(b, psum_rank);
    return b->t1;
}

static double time_floor(bench *b) {
    run2(b, floor_rank);
    return b->t1;
}

static const char *human(size_t bytes, char *buf, size_t n) {
    if (bytes >= 1 << 20)
        snprintf(buf, n, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024)
        snprintf(buf, n, "%zu KiB", bytes >> 10);
    else
        snprintf(buf, n, "%zu B", bytes);
    return buf;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    pin_main();
    size_t max_count = (16 << 20) / sizeof(double);
    bench *b = aligned_alloc(64, sizeof *b);
    memset(b, 0, sizeof *b);
    b->comm = tg_comm_new(NULL, 2);
    for (int k = 0; k < 2; k++) {
        b->in[k] = aligned_alloc(64, max_count * sizeof(double));
        b->out[k] = aligned_alloc(64, max_count * sizeof(double));
        for (size_t i = 0; i < max_count; i++) {
            b->in[k][i] = (double)(i % 1000) * 0.25 + k;
            b->out[k][i] = 0;
        }
    }
    if (!b->comm) {
        fprintf(stderr, "bench_comm: %s\n", tg_last_error());
        return 1;
    }
    printf("W11a psum (all-reduce sum of f64, out of place) between 2 threads, per call; "
           "medians over batches\n");
    printf("%8s %12s %12s %12s %10s %10s  %s\n", "size", "psum us", "memcpy us", "floor(b) us",
           "/memcpy", "/floor(b)", "targets");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        char name[32];
        b->count = sizes[s].bytes / sizeof(double);
        b->calls = sizes[s].calls;
        b->batches = quick ? 5 : sizes[s].batches;
        double tm_b[64], tf_b[64], tp_b[64];
        for (int r = 0; r < b->batches; r++) { /* interleaved: the load changes for all three */
            tm_b[r] = time_memcpy(b);
            tf_b[r] = time_floor(b);
            tp_b[r] = time_psum(b, TG_COMM_SMALL_DEFAULT);
        }
        double tm = bench_median(tm_b, b->batches), tf = bench_median(tf_b, b->batches);
        double tp = bench_median(tp_b, b->batches);
        char target[96] = "";
        if (sizes[s].bytes == 8)
            snprintf(target, sizeof target, "< 2 us: %s; ", tp < 2e-6 ? "yes" : "NO");
        if (sizes[s].bytes == 16 << 20)
            snprintf(target, sizeof target, "<= 1.5x memcpy: %s; ", tp <= 1.5 * tm ? "yes" : "NO");
        size_t k = strlen(target);
        snprintf(target + k, sizeof target - k, "<= 1.2x floor(b): %s",
                 tp <= 1.2 * tf ? "yes" : "NO");
        printf("%8s %12.3f %12.3f %12.3f %10.2f %10.2f  %s\n",
               human(sizes[s].bytes, name, sizeof name), tp * 1e6, tm * 1e6, tf * 1e6, tp / tm,
               tp / tf, target);
    }
    printf("the two paths, psum per call (staged: copies and flags; direct: in place, two "
           "barriers); the default stages up to %d B\n",
           TG_COMM_SMALL_DEFAULT);
    printf("%8s %12s %12s %14s %14s\n", "size", "staged us", "direct us", "fresh staged",
           "fresh direct");
    for (size_t bytes = 64; bytes <= TG_COMM_STAGE_MAX; bytes *= 2) {
        char name[32];
        b->count = bytes / sizeof(double);
        b->calls = 2000;
        b->batches = quick ? 5 : 21;
        double t[4][64];
        for (int r = 0; r < b->batches; r++)
            for (int m = 0; m < 4; m++) {
                b->fresh = m >= 2;
                t[m][r] = time_psum(b, m % 2 ? 0 : TG_COMM_STAGE_MAX);
            }
        b->fresh = false;
        printf("%8s %12.3f %12.3f %14.3f %14.3f\n", human(bytes, name, sizeof name),
               bench_median(t[0], b->batches) * 1e6, bench_median(t[1], b->batches) * 1e6,
               bench_median(t[2], b->batches) * 1e6, bench_median(t[3], b->batches) * 1e6);
    }
    tg_comm_free(b->comm);
    for (int k = 0; k < 2; k++) {
        free(b->in[k]);
        free(b->out[k]);
    }
    free(b);
    return 0;
}
