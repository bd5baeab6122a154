/* pool.c - benchmark of the thread pool's dispatch: the time of tg_pool_run with an
 * empty task, with workers hot (runs back to back) and after they fell asleep (a pause of
 * a few milliseconds before each run). It uses the pool's private header (src/parallel).
 * usage: bench_pool [--threads T]   (default 2)
 */
#include "parallel/parallel.h"
#include "bench_util.h"

static void empty_task(void *arg, int ith, int nth) {
    (void)arg;
    (void)ith;
    (void)nth;
}

int main(int argc, char **argv) {
    int nt = 2;
    if (argc == 3 && strcmp(argv[1], "--threads") == 0) nt = atoi(argv[2]);
    if (nt < 1) return 2;
    tg_pool *p = tg_pool_new(NULL, nt);
    if (!p) {
        fprintf(stderr, "bench_pool: %s\n", tg_last_error());
        return 1;
    }
    enum { BATCH = 10000, REPS = 11, COLD = 50 };
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < BATCH; i++) tg_pool_run(p, empty_task, NULL);
        t[r] = (bench_now() - t0) / BATCH;
    }
    qsort(t, REPS, sizeof t[0], bench_cmp);
    printf("pool dispatch hot, %d threads: median %.3f us, min %.3f us (%d batches of %d)\n", nt,
           t[REPS / 2] * 1e6, t[0] * 1e6, REPS, BATCH);
    double c[COLD];
    for (int r = 0; r < COLD; r++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        double t0 = bench_now();
        tg_pool_run(p, empty_task, NULL);
        c[r] = bench_now() - t0;
    }
    qsort(c, COLD, sizeof c[0], bench_cmp);
    printf("pool dispatch after 5 ms asleep, %d threads: median %.3f us, min %.3f us (%d runs)\n",
           nt, c[COLD / 2] * 1e6, c[0] * 1e6, COLD);
    tg_pool_free(p);
    return 0;
}
