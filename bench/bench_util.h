/* bench_util.h - timing helpers shared by the benchmark programs: a monotonic clock,
 * the median of a sample, and the one result line every benchmark prints:
 *   NAME: median <t> <unit>, min <t> <unit> (<n> runs)
 * which bench/run.sh parses. Header-only (static functions). */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all its threads), in seconds. */
static inline double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts t[0..n) and returns its median (the mean of the middle two for even n). */
static inline double bench_median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, bench_cmp);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Sorts t[0..n) and prints the result line (seconds in, milliseconds out). */
static inline void bench_report(const char *name, double *t, int n) {
    double med = bench_median(t, n);
    printf("%s: median %.3f ms, min %.3f ms (%d runs)\n", name, med * 1e3, t[0] * 1e3, n);
    fflush(stdout);
}

#endif
