/* vectorize_testutil.h - the oracle of the vectorize tests (test_vectorize.c,
 * test_vectorize_core.c): the loop over the examples. check_loop vectorizes a function over
 * given tensors, runs the batched graph in reference and VM modes, and compares each result
 * with the function itself called on each slice. Include after <cmocka.h>; set `ctx` first.
 */
#ifndef TG_VECTORIZE_TESTUTIL_H
#define TG_VECTORIZE_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgraph.h"

#define N TG_AXIS_NONE

static tg_ctx *ctx;

static tg_tensor *rnd(int nd, const int64_t *shape, unsigned seed) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = ((double)((seed >> 8) % 20001) - 10000.0) / 7000.0;
    }
    tg_tensor *t = tg_tensor_from_data(ctx, TG_DT_F64, nd, shape, v);
    free(v);
    return t;
}

/* Slice b of t along axis (a view). */
static tg_tensor *slice_at(const tg_tensor *t, int axis, int64_t b) {
    int nd = tg_tensor_ndim(t);
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    for (int d = 0, o = 0; d < nd; d++) {
        if (d == axis) continue;
        shape[o] = tg_tensor_shape(t)[d];
        strides[o++] = tg_tensor_strides(t)[d];
    }
    return tg_tensor_view(t, nd - 1, shape, strides,
                          tg_tensor_offset(t) + b * tg_tensor_strides(t)[axis]);
}

static void expect_close(const tg_tensor *got, const tg_tensor *want, double tol) {
    assert_int_equal(tg_tensor_ndim(got), tg_tensor_ndim(want));
    for (int d = 0; d < tg_tensor_ndim(got); d++)
        assert_int_equal(tg_tensor_shape(got)[d], tg_tensor_shape(want)[d]);
    for (int64_t i = 0; i < tg_tensor_size(got); i++) {
        double a = tg_tensor_get_f64(got, i), b = tg_tensor_get_f64(want, i);
        if (fabs(a - b) > tol * (1 + fabs(b))) {
            print_error("element %lld: %g, expected %g\n", (long long)i, a, b);
            fail();
        }
    }
}

static tg_tensor **call(tg_graph *g, tg_mode mode, tg_tensor *const *in, int nin) {
    tg_fn *fn = NULL;
    tg_status st = tg_graph_compile(g, &TG_COMPILE_OPTS(.mode = mode, .nthreads = 1), &fn);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    int nout = tg_graph_output_count(g);
    tg_tensor **out = calloc((size_t)nout + 1, sizeof *out);
    st = tg_fn_call(fn, in, nin, out, nout);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_fn_free(fn);
    return out;
}

/* Vectorizes f over the tensors in (in_axes, out_axes; NULL: 0) in a new graph, runs it in
 * reference and VM modes, and compares each result with f called on each slice. Returns the
 * batched graph (the caller frees it). */
static tg_graph *check_loop_as(tg_graph *f, tg_tensor *const *in, int nin, const int *in_axes,
                               const int *out_axes, bool unknown) {
    tg_graph *g = tg_graph_new(ctx, "main");
    tg_var *args[16], *outs[16];
    for (int i = 0; i < nin; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "a%d", i);
        int64_t shape[TG_MAX_DIMS];
        int nd = tg_tensor_ndim(in[i]), ax = in_axes ? in_axes[i] : 0;
        for (int d = 0; d < nd; d++) shape[d] = tg_tensor_shape(in[i])[d];
        if (unknown && ax != N) shape[ax < 0 ? ax + nd : ax] = TG_DIM_UNKNOWN;
        args[i] = tg_input(g, nm, tg_tensor_dtype(in[i]), nd, shape);
    }
    int nouts = 16;
    tg_status st = tg_vectorize(g, f, args, nin, in_axes, out_axes, outs, &nouts);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    assert_int_equal(nouts, tg_graph_output_count(f));
    assert_int_equal(tg_graph_set_outputs(g, outs, nouts), TG_OK);
    int64_t B = -1;
    for (int i = 0; i < nin; i++) {
        int ax = in_axes ? in_axes[i] : 0;
        if (ax == N) continue;
        if (ax < 0) ax += tg_tensor_ndim(in[i]);
        B = tg_tensor_shape(in[i])[ax];
    }
    tg_mode modes[2] = {TG_MODE_REFERENCE, TG_MODE_VM};
    for (int m = 0; m < 2; m++) {
        tg_tensor **got = call(g, modes[m], in, nin);
        for (int64_t b = 0; b < B; b++) {
            tg_tensor *sl[16];
            for (int i = 0; i < nin; i++) {
                int ax = in_axes ? in_axes[i] : 0;
                if (ax != N && ax < 0) ax += tg_tensor_ndim(in[i]);
                sl[i] = ax == N ? tg_tensor_dup(in[i]) : slice_at(in[i], ax, b);
            }
            tg_tensor **want = call(f, TG_MODE_REFERENCE, sl, nin);
            for (int k = 0; k < nouts; k++) {
                int ax = out_axes ? out_axes[k] : 0;
                if (ax != N && ax < 0) ax += tg_tensor_ndim(got[k]);
                tg_tensor *gk = ax == N ? tg_tensor_dup(got[k]) : slice_at(got[k], ax, b);
                expect_close(gk, want[k], 1e-10);
                tg_tensor_free(gk);
                tg_tensor_free(want[k]);
            }
            free(want);
            for (int i = 0; i < nin; i++) tg_tensor_free(sl[i]);
        }
        for (int k = 0; k < nouts; k++) tg_tensor_free(got[k]);
        free(got);
    }
    return g;
}

static tg_graph *check_loop(tg_graph *f, tg_tensor *const *in, int nin, const int *in_axes,
                            const int *out_axes) {
    return check_loop_as(f, in, nin, in_axes, out_axes, false);
}

#define SH(...)                                                                                    \
    (const int64_t[]) { __VA_ARGS__ }

#endif
