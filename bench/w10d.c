/* w10d.c - W10d: the data-parallel training step of the Fashion-MNIST example
 * (examples/mlp_step.h: MLP 784-256-10, relu, softmax cross-entropy, Adam, batch 512,
 * synthetic data) across the 2 processes of an MPI job (docs/mpi.md) against 1 process.
 *
 *  - "procs=1 threads=1": build_step(512) in rank 0 alone, one thread, while rank 1 waits
 *    asleep (a polled barrier, so that it takes no core);
 *  - "procs=1 threads=2": the same with both threads splitting each kernel;
 *  - "procs=2 threads=1 buckets=off": build_step_pmap(512, 2) in both processes, one
 *    thread each: the pmap over 2 ranks spans them, each rank 256 rows, the gradient of
 *    each replicated parameter summed over the processes with a psum (an MPI_Allreduce
 *    per parameter, in turn), compiled with TGRAPH_BUCKET_BYTES=0;
 *  - "... buckets=25M": the same compiled with the default bucket size: the 4 gradients
 *    (800 KB) in one bucket, started once the last exists;
 *  - "... buckets=8K": three buckets: W2's gradient (10 KB), started while the backward
 *    pass computes W1's; W1's with b2's; b1's (docs/mpi.md, "Speed");
 *  - "procs=2 threads=1 pmean buckets=off", "... pmean buckets=25M": the step whose ranks
 *    differentiate their own rows' loss and average the gradients with pmean
 *    (build_step_pmap_as(512, 2, true)), unbucketed and in one bucket.
 * Before timing, the 2-process steps and the 1-process step start from the same weights
 * and must give the same losses (to float rounding; the 2-process steps of one kind the
 * same bits) for 3 steps. The 2-process steps are timed in turn, run after run, so that
 * the machine's load falls on them alike. Each figure is rank 0's median over runs of
 * one step.
 * usage: mpirun -np 2 bench_w10d [-n RUNS]     (rank 0 prints)
 */
#include "tgraph.h"
#include "bench_util.h"
#include "mlp_step.h"

#include <math.h>
#include <mpi.h>

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* bucket: TGRAPH_BUCKET_BYTES while it compiles (NULL: as set) */
static tg_fn *compile_step(tg_graph *g, int threads, const char *bucket) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = threads);
    tg_fn *f = NULL;
    if (bucket) setenv("TGRAPH_BUCKET_BYTES", bucket, 1);
    tg_status st = g ? tg_graph_compile(g, &o, &f) : TG_EINVAL;
    if (bucket) unsetenv("TGRAPH_BUCKET_BYTES");
    if (st != TG_OK || init_params(f, 1) != TG_OK) {
        fprintf(stderr, "w10d: %s\n", tg_last_error());
        exit(tg_world_finish(1, NULL));
    }
    return f;
}

static double step(tg_fn *f, tg_tensor **in, tg_tensor *loss) {
    if (tg_fn_call_into(f, in, 3, &loss, 1) != TG_OK) {
        fprintf(stderr, "w10d: %s\n", tg_last_error());
        exit(tg_world_finish(1, NULL));
    }
    return tg_tensor_get_f64(loss, 0);
}

/* A barrier that sleeps while it waits (MPI_Barrier spins, taking a core). */
static void sleepy_barrier(void) {
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

int main(int argc, char **argv) {
    int runs = 30;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: mpirun -np 2 bench_w10d [-n RUNS]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 10000) return 2;
    int procs = tg_world_size(), rank = tg_world_rank();
    if (procs != 2) {
        fprintf(stderr, "bench_w10d: run it with mpirun -np 2\n");
        return tg_world_finish(2, "not 2 processes");
    }
    enum { B = 512 };
    tg_tensor *in[3] = {tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){B, NIN}),
                        tg_tensor_new(NULL, TG_DT_I64, 1, (int64_t[]){B}),
                        tg_tensor_new(NULL, TG_DT_F32, 0, NULL)};
    tg_tensor *loss = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    if (!in[0] || !in[1] || !in[2] || !loss) return tg_world_finish(1, "out of memory");
    uint64_t s = 42;
    uint8_t *xd = tg_tensor_data(in[0]);
    int64_t *yd = tg_tensor_data(in[1]);
    for (int64_t i = 0; i < (int64_t)B * NIN; i++) xd[i] = (uint8_t)(rng_next(&s) >> 56);
    for (int64_t i = 0; i < B; i++) yd[i] = (int64_t)(rng_next(&s) % 10);
    *(float *)tg_tensor_data(in[2]) = 1e-3f;

    tg_graph *g1 = build_step(B),
             *g2[2] = {build_step_pmap(B, procs), build_step_pmap_as(B, procs, true)};
    enum { NTWO = 5 };
    static const char *const bucket[NTWO] = {"0", "25M", "8K", "0", "25M"};
    static const int kind[NTWO] = {0, 0, 0, 1, 1};  /* g2[kind]: gradients summed, averaged */
    static const int first[NTWO] = {0, 0, 0, 3, 3}; /* the unbucketed step of the kind */
    tg_fn *one[2] = {compile_step(g1, 1, NULL), compile_step(g1, 2, NULL)}, *two[NTWO];
    for (int b = 0; b < NTWO; b++) two[b] = compile_step(g2[kind[b]], 1, bucket[b]);

    /* the same losses, step after step (also warms plans, pools and communicators) */
    for (int k = 0; k < 3; k++) {
        double l1 = step(one[0], in, loss), l2[NTWO];
        for (int b = 0; b < NTWO; b++) l2[b] = step(two[b], in, loss);
        for (int b = 0; b < NTWO; b++)
            if (!(fabs(l2[b] - l1) <= 1e-5 * fabs(l1)) || l2[b] != l2[first[b]]) {
                fprintf(stderr,
                        "w10d: step %d: loss %.9g across 2 processes (TGRAPH_BUCKET_BYTES=%s, "
                        "gradients %s), %.9g unbucketed, %.9g in one process\n",
                        k, l2[b], bucket[b], kind[b] ? "averaged" : "summed", l2[first[b]], l1);
                return tg_world_finish(1, "the losses differ");
            }
    }
    step(one[1], in, loss);

    double *t = malloc(sizeof *t * (size_t)runs * NTWO), med[2 + NTWO];
    if (!t) return tg_world_finish(1, "out of memory");
    static const char *const conf[2 + NTWO] = {"procs=1 threads=1",
                                               "procs=1 threads=2",
                                               "procs=2 threads=1 buckets=off",
                                               "procs=2 threads=1 buckets=25M",
                                               "procs=2 threads=1 buckets=8K",
                                               "procs=2 threads=1 pmean buckets=off",
                                               "procs=2 threads=1 pmean buckets=25M"};
    for (int c = 0; c < 2; c++) {
        sleepy_barrier();
        if (rank != 0) {
            sleepy_barrier(); /* rank 0 alone */
            continue;
        }
        for (int r = 0; r < runs; r++) {
            double t0 = bench_now();
            step(one[c], in, loss);
            t[r] = bench_now() - t0;
        }
        sleepy_barrier();
        qsort(t, (size_t)runs, sizeof *t, bench_cmp);
        med[c] = t[runs / 2];
        if (rank == 0) {
            char name[64];
            snprintf(name, sizeof name, "w10d vm %s", conf[c]);
            bench_report(name, t, runs);
        }
    }
    sleepy_barrier();
    for (int r = 0; r < runs; r++)
        for (int b = 0; b < NTWO; b++) {
            double t0 = bench_now();
            step(two[b], in, loss);
            t[b * runs + r] = bench_now() - t0;
        }
    for (int b = 0; b < NTWO; b++) {
        qsort(t + b * runs, (size_t)runs, sizeof *t, bench_cmp);
        med[2 + b] = t[b * runs + runs / 2];
        if (rank == 0) {
            char name[64];
            snprintf(name, sizeof name, "w10d vm %s", conf[2 + b]);
            bench_report(name, t + b * runs, runs);
        }
    }
    if (rank == 0)
        printf("w10d: 2 processes %.2fx faster than 1 process on 1 thread, %.2fx than 1 "
               "process on 2 threads; bucketed %.2fx (25M), %.2fx (8K) the unbucketed time; "
               "gradients averaged with pmean: %.2fx the summed ones' unbucketed time, "
               "bucketed %.2fx (25M) its own\n",
               med[0] / med[2], med[1] / med[2], med[3] / med[2], med[4] / med[2], med[5] / med[2],
               med[6] / med[5]);
    free(t);
    for (int b = 0; b < NTWO; b++) tg_fn_free(two[b]);
    tg_fn_free(one[0]);
    tg_fn_free(one[1]);
    tg_graph_free(g1);
    tg_graph_free(g2[0]);
    tg_graph_free(g2[1]);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_tensor_free(loss);
    return tg_world_finish(0, NULL);
}
