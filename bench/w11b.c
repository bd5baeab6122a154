/* w11b.c - W11b: psum across the processes of an MPI job (docs/mpi.md), from 8 B to 16 MiB
 * of f64 per rank, beside a raw MPI_Allreduce (MPI_SUM of MPI_DOUBLE, out of place) of the
 * same bytes in the same run. The tgraph side is one call of a compiled function: a pmap
 * over P ranks, one per process (in_axes=0 on a [P, n] input: each rank a view of its
 * row), whose body returns psum(x) with out_axes=none, so the call is the pmap's overhead
 * plus the psum's MPI_Iallreduce and nothing gathered. The two are interleaved batch by
 * batch, each batch started by an MPI_Barrier, so that a busy machine slows them alike;
 * each figure is rank 0's median over batches of the mean time of one call in a batch.
 * Target: the psum within 1.2x of MPI_Allreduce from 64 KiB up. A third figure, the
 * non-blocking MPI_Iallreduce polled with MPI_Test until done (what tgraph calls, so that
 * it can watch for failures meanwhile: docs/mpi.md), separates tgraph's own cost from
 * that of Open MPI's non-blocking collectives (libnbc).
 * usage: mpirun -np 2 bench_w11b [--quick]     (rank 0 prints)
 */
#include "tgraph.h"
#include "bench_util.h"

#include <mpi.h>

typedef struct sizes_t {
    size_t bytes;
    int calls, batches;
} sizes_t;

static const sizes_t sizes[] = {
    {8, 400, 21},    {64, 400, 21},    {512, 400, 21},   {4096, 200, 21}, {32768, 100, 21},
    {65536, 50, 21}, {262144, 20, 15}, {1048576, 8, 11}, {4194304, 3, 9}, {16777216, 1, 9},
};

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int procs = tg_world_size(), rank = tg_world_rank();
    if (procs < 2) {
        fprintf(stderr, "bench_w11b: run it with mpirun -np 2 (or more)\n");
        return tg_world_finish(2, "not under mpirun");
    }
    if (rank == 0)
        printf("W11b: psum across %d MPI processes (1 rank each) vs MPI_Allreduce, f64 sum\n",
               procs);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s].bytes / sizeof(double);
        int calls = sizes[s].calls, batches = quick ? 3 : sizes[s].batches;
        char src[512];
        snprintf(src, sizeof src,
                 "func main(xs: f64[%d,%zu]) {\n"
                 "  s = pmap(@body, xs, out_axes=[none], axis_name=\"i\")\n"
                 "  return s\n"
                 "}\n"
                 "func body(x: f64[%zu]) {\n"
                 "  return psum(x, axis_name=\"i\")\n"
                 "}\n",
                 procs, n, n);
        tg_module *m = NULL;
        tg_fn *f = NULL;
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1);
        if (tg_module_parse(NULL, src, strlen(src), "w11b.tg", &m) != TG_OK ||
            tg_graph_compile(tg_module_find(m, "main"), &o, &f) != TG_OK) {
            fprintf(stderr, "bench_w11b: %s\n", tg_last_error());
            return tg_world_finish(1, NULL);
        }
        int64_t shape[2] = {procs, (int64_t)n};
        tg_tensor *xs = tg_tensor_new(NULL, TG_DT_F64, 2, shape), *y = NULL;
        double *send = malloc(n * sizeof *send), *recv = malloc(n * sizeof *recv);
        if (!xs || !send || !recv) {
            fprintf(stderr, "bench_w11b: out of memory\n");
            return tg_world_finish(1, "out of memory");
        }
        double *x = tg_tensor_data(xs);
        for (size_t i = 0; i < (size_t)procs * n; i++) x[i] = (double)(i % 101) * 0.25;
        for (size_t i = 0; i < n; i++) send[i] = (double)(i % 101) * 0.25;
        if (tg_fn_call(f, &xs, 1, &y, 1) != TG_OK) { /* warm: plans, communicators */
            fprintf(stderr, "bench_w11b: %s\n", tg_last_error());
            return tg_world_finish(1, NULL);
        }
        MPI_Allreduce(send, recv, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double tt[64], tm[64], tn[64];
        for (int b = 0; b < batches; b++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = bench_now();
            for (int c = 0; c < calls; c++)
                if (tg_fn_call_into(f, &xs, 1, &y, 1) != TG_OK) {
                    fprintf(stderr, "bench_w11b: %s\n", tg_last_error());
                    return tg_world_finish(1, NULL);
                }
            tt[b] = (bench_now() - t0) / calls;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
            for (int c = 0; c < calls; c++)
                MPI_Allreduce(send, recv, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            tm[b] = (bench_now() - t0) / calls;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
            for (int c = 0; c < calls; c++) {
                MPI_Request req;
                int done = 0;
                MPI_Iallreduce(send, recv, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
                while (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            }
            tn[b] = (bench_now() - t0) / calls;
        }
        double a = bench_median(tt, batches), r = bench_median(tm, batches),
               nb = bench_median(tn, batches);
        if (rank == 0) {
            printf("w11b psum bytes=%zu: tgraph median %.2f us, MPI_Allreduce median %.2f us, "
                   "ratio %.2f; MPI_Iallreduce+MPI_Test median %.2f us (%d batches of %d)\n",
                   sizes[s].bytes, a * 1e6, r * 1e6, a / r, nb * 1e6, batches, calls);
            fflush(stdout);
        }
        free(send);
        free(recv);
        tg_tensor_free(y);
        tg_tensor_free(xs);
        tg_fn_free(f);
        tg_module_free(m);
    }
    return tg_world_finish(0, NULL);
}
