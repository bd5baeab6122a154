/* test_join.c - joining, splitting and constructors through the public API: concatenate,
 * stack, split, zeros, ones, full, alloc, arange, eye, tril, triu, shape, size. Values
 * and dtypes are checked against NumPy 1.24 results (with
 * np._set_promotion_state("weak")) pasted below as literals; error cases check the
 * status and the message, at build time and at run time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "ops/ops.h"

/* ---- helpers ---- */

/* Compiles g with the given outputs and calls it; returns the call's status. */
static tg_status run(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                     tg_tensor **res) {
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, NULL, &f);
    if (st != TG_OK) print_message("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, in, nin, res, nout);
    tg_fn_free(f);
    return st;
}

static void expect_shape(const tg_tensor *t, int ndim, const int64_t *shape) {
    assert_int_equal(tg_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(tg_tensor_shape(t)[i], shape[i]);
}

/* Checks dtype, shape and values (exactly when tol == 0; NaN matches NaN). */
static void expect(const tg_tensor *t, tg_dtype dt, int ndim, const int64_t *shape,
                   const double *vals, double tol) {
    assert_non_null(t);
    assert_int_equal(tg_tensor_dtype(t), dt);
    expect_shape(t, ndim, shape);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        double a = tg_tensor_get_f64(t, i), b = vals[i];
        bool ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= tol * fmax(1.0, fabs(b));
        if (!ok) print_message("element %lld: got %.17g, expected %.17g\n", (long long)i, a, b);
        assert_true(ok);
    }
}

static void expect_var(const tg_var *v, tg_dtype dt, int ndim, const int64_t *shape) {
    assert_non_null(v);
    assert_int_equal(tg_var_dtype(v), dt);
    assert_int_equal(tg_var_ndim(v), ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(tg_var_dim(v, i), shape[i]);
}

static void expect_error(tg_graph *g, tg_status st, const char *msg) {
    assert_int_equal(tg_graph_status(g), st);
    if (!strstr(tg_graph_error(g), msg)) print_message("error was: %s\n", tg_graph_error(g));
    assert_non_null(strstr(tg_graph_error(g), msg));
}

static void expect_last_error(tg_status got, tg_status st, const char *msg) {
    assert_int_equal(got, st);
    if (!strstr(tg_last_error(), msg)) print_message("error was: %s\n", tg_last_error());
    assert_non_null(strstr(tg_last_error(), msg));
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...)  ((const double[]){__VA_ARGS__})

static tg_tensor *tensor(tg_dtype dt, int ndim, const int64_t *shape, const void *data) {
    tg_tensor *t = tg_tensor_from_data(NULL, dt, ndim, shape, data);
    assert_non_null(t);
    return t;
}

/* ---- concatenate ---- */

static void test_concatenate_mixed_dtypes(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *a = tg_input(g, "a", TG_DT_I32, 2, SHAPE(2, 2));
    tg_var *b = tg_input(g, "b", TG_DT_F32, 2, SHAPE(2, 1));
    tg_attr ax = TG_A_INT("axis", -1);
    tg_var *c = tg_apply(g, "concatenate", (tg_var *[]){a, b}, 2, &ax, 1);
    /* np.concatenate((i32 [[1,2],[3,4]], f32 [[0.5],[-1.5]]), axis=-1): float64 */
    expect_var(c, TG_DT_F64, 2, SHAPE(2, 3));
    /* u8 with i8 promotes to i16, as np.concatenate does */
    tg_var *u = tg_input(g, "u", TG_DT_U8, 1, SHAPE(1));
    tg_var *s = tg_input(g, "s", TG_DT_I8, 1, SHAPE(1));
    expect_var(tg_apply(g, "concatenate", (tg_var *[]){u, s}, 2, NULL, 0), TG_DT_I16, 1, SHAPE(2));
    tg_tensor *in[4] = {
        tensor(TG_DT_I32, 2, SHAPE(2, 2), (int32_t[]){1, 2, 3, 4}),
        tensor(TG_DT_F32, 2, SHAPE(2, 1), (float[]){0.5f, -1.5f}),
        tensor(TG_DT_U8, 1, SHAPE(1), (uint8_t[]){1}),
        tensor(TG_DT_I8, 1, SHAPE(1), (int8_t[]){-1}),
    };
    tg_tensor *out = NULL;
    assert_int_equal(run(g, &c, 1, in, 4, &out), TG_OK);
    expect(out, TG_DT_F64, 2, SHAPE(2, 3), VALS(1, 2, 0.5, 3, 4, -1.5), 0);
    tg_tensor_free(out);
    for (int i = 0; i < 4; i++) tg_tensor_free(in[i]);
    tg_graph_free(g);
}

static void test_concatenate_unknown_and_empty(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *a = tg_input(g, "a", TG_DT_F32, 2, SHAPE(-1, 3));
    tg_var *b = tg_input(g, "b", TG_DT_F32, 2, SHAPE(0, 3));
    tg_var *c = tg_input(g, "c", TG_DT_F32, 2, SHAPE(2, -1));
    tg_var *y = tg_apply(g, "concatenate", (tg_var *[]){a, b, c}, 3, NULL, 0);
    expect_var(y, TG_DT_F32, 2, SHAPE(-1, 3));
    tg_var *w = tg_apply(g, "concatenate", (tg_var *[]){b, b}, 2, NULL, 0);
    expect_var(w, TG_DT_F32, 2, SHAPE(0, 3));
    /* a is read through a reversed view (negative strides) of [[1,2,3],[4,5,6]] */
    tg_tensor *base = tensor(TG_DT_F32, 2, SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    tg_tensor *ra = tg_tensor_view(base, 2, SHAPE(2, 3), SHAPE(-3, -1), 5);
    assert_non_null(ra);
    tg_tensor *in[3] = {ra, tg_tensor_new(NULL, TG_DT_F32, 2, SHAPE(0, 3)),
                        tensor(TG_DT_F32, 2, SHAPE(2, 3), (float[]){7, 8, 9, 10, 11, 12})};
    tg_tensor *out[2] = {0};
    assert_int_equal(run(g, (tg_var *[]){y, w}, 2, in, 3, out), TG_OK);
    /* np.concatenate((base[::-1, ::-1], empty, c)) */
    expect(out[0], TG_DT_F32, 2, SHAPE(4, 3), VALS(6, 5, 4, 3, 2, 1, 7, 8, 9, 10, 11, 12), 0);
    expect(out[1], TG_DT_F32, 2, SHAPE(0, 3), NULL, 0);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    /* a run-time extent that disagrees: c is [2,4] while a says 3 */
    tg_tensor_free(in[2]);
    in[2] = tg_tensor_new(NULL, TG_DT_F32, 2, SHAPE(2, 4));
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    expect_last_error(tg_fn_call(f, in, 3, out, 2), TG_ESHAPE,
                      "input 2 (f32[2,4]) does not match input 0 (f32[2,3]) on axis 1");
    tg_fn_free(f);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_tensor_free(base);
    tg_graph_free(g);
}

static void test_concatenate_errors(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *a = tg_input(g, "a", TG_DT_F32, 2, SHAPE(2, 3));
    tg_var *b = tg_input(g, "b", TG_DT_F32, 2, SHAPE(2, 4));
    assert_null(tg_apply(g, "concatenate", (tg_var *[]){a, b}, 2, NULL, 0));
    expect_error(g, TG_ESHAPE,
                 "concatenate: input 1 (f32[2,4]) does not match input 0 (f32[2,3]) on axis 1");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    a = tg_input(g, "a", TG_DT_F32, 2, SHAPE(2, 3));
    b = tg_input(g, "b", TG_DT_F32, 1, SHAPE(3));
    assert_null(tg_apply(g, "concatenate", (tg_var *[]){a, b}, 2, NULL, 0));
    expect_error(g, TG_ESHAPE, "input 1 (f32[3]) has rank 1, input 0 (f32[2,3]) has rank 2");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    a = tg_input(g, "a", TG_DT_F32, 2, SHAPE(2, 3));
    tg_attr ax = TG_A_INT("axis", 2);
    assert_null(tg_apply(g, "concatenate", (tg_var *[]){a, a}, 2, &ax, 1));
    expect_error(g, TG_EINVAL, "axis 2 is out of bounds for an array of dimension 2");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    a = tg_input(g, "a", TG_DT_F32, 0, NULL);
    assert_null(tg_apply(g, "concatenate", (tg_var *[]){a, a}, 2, NULL, 0));
    expect_error(g, TG_ESHAPE, "zero-dimensional arrays cannot be concatenated");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    assert_null(tg_apply(g, "concatenate", NULL, 0, NULL, 0));
    expect_error(g, TG_EINVAL, "concatenate: expects at least 1 inputs, got 0");
    tg_graph_free(g);
}

/* ---- stack ---- */

static void test_stack(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *a = tg_input(g, "a", TG_DT_I16, 1, SHAPE(2));
    tg_var *b = tg_input(g, "b", TG_DT_U8, 1, SHAPE(-1));
    tg_attr ax = TG_A_INT("axis", -1);
    tg_var *y = tg_apply(g, "stack", (tg_var *[]){a, b}, 2, &ax, 1);
    /* np.stack((i16 [1,2], u8 [3,250]), axis=-1) -> int16 [[1,3],[2,250]] */
    expect_var(y, TG_DT_I16, 2, SHAPE(2, 2));
    tg_var *z = tg_apply(g, "stack", (tg_var *[]){a, a, a}, 3, NULL, 0);
    expect_var(z, TG_DT_I16, 2, SHAPE(3, 2));
    tg_tensor *in[2] = {tensor(TG_DT_I16, 1, SHAPE(2), (int16_t[]){1, 2}),
                        tensor(TG_DT_U8, 1, SHAPE(2), (uint8_t[]){3, 250})};
    tg_tensor *out[2] = {0};
    assert_int_equal(run(g, (tg_var *[]){y, z}, 2, in, 2, out), TG_OK);
    expect(out[0], TG_DT_I16, 2, SHAPE(2, 2), VALS(1, 3, 2, 250), 0);
    expect(out[1], TG_DT_I16, 2, SHAPE(3, 2), VALS(1, 2, 1, 2, 1, 2), 0);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    /* b's '?' turns out to be 3: the run-time inference rejects it */
    tg_tensor_free(in[1]);
    in[1] = tg_tensor_new(NULL, TG_DT_U8, 1, SHAPE(3));
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    expect_last_error(tg_fn_call(f, in, 2, out, 2), TG_ESHAPE, "does not match");
    tg_fn_free(f);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    a = tg_input(g, "a", TG_DT_F32, 2, SHAPE(2, 3));
    b = tg_input(g, "b", TG_DT_F32, 2, SHAPE(3, 2));
    assert_null(tg_apply(g, "stack", (tg_var *[]){a, b}, 2, NULL, 0));
    expect_error(g, TG_ESHAPE, "stack: input 1 (f32[3,2]) does not match input 0 (f32[2,3])");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    a = tg_input(g, "a", TG_DT_F32, 2, SHAPE(2, 3));
    ax = TG_A_INT("axis", -4);
    assert_null(tg_apply(g, "stack", (tg_var *[]){a, a}, 2, &ax, 1));
    expect_error(g, TG_EINVAL, "axis -4 is out of bounds for an array of dimension 3");
    tg_graph_free(g);
}

/* ---- split ---- */

static void test_split_sections(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 6));
    tg_attr at[2] = {TG_A_INT("sections", 3), TG_A_INT("axis", -1)};
    tg_var *outs[TG_MAX_OUTS];
    int n = TG_MAX_OUTS;
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, at, 2, outs, &n), TG_OK);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++) expect_var(outs[i], TG_DT_F64, 2, SHAPE(2, 2));
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = i;
    tg_tensor *in = tensor(TG_DT_F64, 2, SHAPE(2, 6), xv);
    tg_tensor *res[3] = {0};
    assert_int_equal(run(g, outs, 3, &in, 1, res), TG_OK);
    /* np.split(np.arange(12.).reshape(2, 6), 3, axis=-1) */
    expect(res[0], TG_DT_F64, 2, SHAPE(2, 2), VALS(0, 1, 6, 7), 0);
    expect(res[1], TG_DT_F64, 2, SHAPE(2, 2), VALS(2, 3, 8, 9), 0);
    expect(res[2], TG_DT_F64, 2, SHAPE(2, 2), VALS(4, 5, 10, 11), 0);
    for (int i = 0; i < 3; i++) tg_tensor_free(res[i]);
    tg_tensor_free(in);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(10));
    at[0] = TG_A_INT("sections", 3);
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, at, 1, outs, &n), TG_ESHAPE);
    expect_error(g, TG_ESHAPE, "split: 10 is not divisible into 3 sections");
    tg_graph_free(g);

    /* a '?' extent: checked when the function runs */
    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(-1));
    n = TG_MAX_OUTS;
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, at, 1, outs, &n), TG_OK);
    assert_int_equal(n, 3);
    expect_var(outs[2], TG_DT_F32, 1, SHAPE(-1));
    assert_int_equal(tg_graph_set_outputs(g, outs, 3), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    in = tg_tensor_new(NULL, TG_DT_F32, 1, SHAPE(10));
    expect_last_error(tg_fn_call(f, &in, 1, res, 3), TG_ESHAPE,
                      "(split): 10 is not divisible into 3 sections");
    tg_tensor_free(in);
    in = tg_tensor_new(NULL, TG_DT_F32, 1, SHAPE(0));
    assert_int_equal(tg_fn_call(f, &in, 1, res, 3), TG_OK);
    for (int i = 0; i < 3; i++) {
        expect(res[i], TG_DT_F32, 1, SHAPE(0), NULL, 0);
        tg_tensor_free(res[i]);
    }
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_graph_free(g);
}

static void test_split_indices(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_I64, 1, SHAPE(10));
    const int64_t ind[] = {3, -2, 20, 1};
    tg_attr at = TG_A_INTS("indices", ind, 4);
    tg_var *outs[TG_MAX_OUTS];
    int n = TG_MAX_OUTS;
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, &at, 1, outs, &n), TG_OK);
    /* np.split(np.arange(10), [3, -2, 20, 1]): lengths 3, 5, 2, 0, 9 */
    assert_int_equal(n, 5);
    const int64_t lens[] = {3, 5, 2, 0, 9};
    for (int i = 0; i < 5; i++) expect_var(outs[i], TG_DT_I64, 1, &lens[i]);
    int64_t xv[10];
    for (int i = 0; i < 10; i++) xv[i] = i;
    tg_tensor *in = tensor(TG_DT_I64, 1, SHAPE(10), xv);
    tg_tensor *res[5] = {0};
    assert_int_equal(run(g, outs, 5, &in, 1, res), TG_OK);
    expect(res[0], TG_DT_I64, 1, SHAPE(3), VALS(0, 1, 2), 0);
    expect(res[1], TG_DT_I64, 1, SHAPE(5), VALS(3, 4, 5, 6, 7), 0);
    expect(res[2], TG_DT_I64, 1, SHAPE(2), VALS(8, 9), 0);
    expect(res[3], TG_DT_I64, 1, SHAPE(0), NULL, 0);
    expect(res[4], TG_DT_I64, 1, SHAPE(9), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9), 0);
    for (int i = 0; i < 5; i++) tg_tensor_free(res[i]);
    tg_tensor_free(in);
    tg_graph_free(g);

    /* unknown extent: only a piece whose bounds are non-negative and out of order is
     * known (empty); at run time a reversed view is split along axis 0 */
    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(-1, 2));
    const int64_t ind2[] = {2, 1};
    tg_attr at2[2] = {TG_A_INTS("indices", ind2, 2), TG_A_INT("axis", 0)};
    n = TG_MAX_OUTS;
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, at2, 2, outs, &n), TG_OK);
    assert_int_equal(n, 3);
    expect_var(outs[0], TG_DT_F32, 2, SHAPE(-1, 2));
    expect_var(outs[1], TG_DT_F32, 2, SHAPE(0, 2));
    expect_var(outs[2], TG_DT_F32, 2, SHAPE(-1, 2));
    tg_tensor *base = tensor(TG_DT_F32, 2, SHAPE(3, 2), (float[]){0, 1, 2, 3, 4, 5});
    in = tg_tensor_view(base, 2, SHAPE(3, 2), SHAPE(-2, 1), 4);
    assert_int_equal(run(g, outs, 3, &in, 1, res), TG_OK);
    /* np.split(base[::-1], [2, 1]) */
    expect(res[0], TG_DT_F32, 2, SHAPE(2, 2), VALS(4, 5, 2, 3), 0);
    expect(res[1], TG_DT_F32, 2, SHAPE(0, 2), NULL, 0);
    expect(res[2], TG_DT_F32, 2, SHAPE(2, 2), VALS(2, 3, 0, 1), 0);
    for (int i = 0; i < 3; i++) tg_tensor_free(res[i]);
    tg_tensor_free(in);
    tg_tensor_free(base);
    tg_graph_free(g);
}

static void test_split_errors(void **state) {
    (void)state;
    tg_var *outs[TG_MAX_OUTS];
    int n = TG_MAX_OUTS;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(4));
    assert_int_not_equal(tg_apply_multi(g, "split", &x, 1, NULL, 0, outs, &n), TG_OK);
    expect_error(g, TG_EINVAL, "split: give exactly one of 'sections' and 'indices'");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(4));
    const int64_t ind[] = {1};
    tg_attr both[2] = {TG_A_INT("sections", 2), TG_A_INTS("indices", ind, 1)};
    assert_int_not_equal(tg_apply_multi(g, "split", &x, 1, both, 2, outs, &n), TG_OK);
    expect_error(g, TG_EINVAL, "give exactly one of 'sections' and 'indices'");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(4));
    tg_attr zero = TG_A_INT("sections", 0);
    assert_int_not_equal(tg_apply_multi(g, "split", &x, 1, &zero, 1, outs, &n), TG_OK);
    expect_error(g, TG_EINVAL, "number of sections must be larger than 0");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(-1));
    tg_attr many = TG_A_INT("sections", TG_MAX_OUTS + 1);
    assert_int_not_equal(tg_apply_multi(g, "split", &x, 1, &many, 1, outs, &n), TG_OK);
    expect_error(g, TG_ELIMIT, "65 sections are more than the 64 outputs");
    tg_graph_free(g);
}

/* ---- zeros, ones, full ---- */

static void test_zeros_ones_full(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_attr z[1] = {TG_A_INTS("shape", SHAPE(2, 3), 2)};
    tg_var *zv = tg_apply(g, "zeros", NULL, 0, z, 1);
    expect_var(zv, TG_DT_F64, 2, SHAPE(2, 3));
    tg_attr o[2] = {TG_A_INTS("shape", SHAPE(3), 1), TG_A_STR("dtype", "i32")};
    tg_var *ov = tg_apply(g, "ones", NULL, 0, o, 2);
    expect_var(ov, TG_DT_I32, 1, SHAPE(3));
    tg_attr e[1] = {TG_A_INTS("shape", NULL, 0)};
    tg_var *ev = tg_apply(g, "ones", NULL, 0, e, 1);
    expect_var(ev, TG_DT_F64, 0, NULL);
    /* np.full(2, 7) -> int64; np.full(2, 2.5) -> float64 */
    tg_attr s2 = TG_A_INTS("shape", SHAPE(2), 1);
    tg_var *f1 = tg_apply(g, "full", (tg_var *[]){tg_literal_int(g, 7)}, 1, &s2, 1);
    expect_var(f1, TG_DT_I64, 1, SHAPE(2));
    tg_var *f2 = tg_apply(g, "full", (tg_var *[]){tg_literal_float(g, 2.5)}, 1, &s2, 1);
    expect_var(f2, TG_DT_F64, 1, SHAPE(2));
    /* np.full(2, 2.7, dtype=np.int32) -> [2, 2] */
    tg_attr s2i[2] = {TG_A_INTS("shape", SHAPE(2), 1), TG_A_STR("dtype", "i32")};
    tg_var *f3 = tg_apply(g, "full", (tg_var *[]){tg_literal_float(g, 2.7)}, 1, s2i, 2);
    expect_var(f3, TG_DT_I32, 1, SHAPE(2));
    /* np.full((2,3), np.array([1,2,3], np.int8), dtype=np.float64) */
    tg_var *v = tg_input(g, "v", TG_DT_I8, 1, SHAPE(3));
    tg_attr s23[2] = {TG_A_INTS("shape", SHAPE(2, 3), 2), TG_A_STR("dtype", "f64")};
    tg_var *f4 = tg_apply(g, "full", &v, 1, s23, 2);
    expect_var(f4, TG_DT_F64, 2, SHAPE(2, 3));
    /* a typed 0-d value keeps its dtype */
    tg_var *sv = tg_input(g, "s", TG_DT_F32, 0, NULL);
    tg_var *f5 = tg_apply(g, "full", &sv, 1, z, 1);
    expect_var(f5, TG_DT_F32, 2, SHAPE(2, 3));
    tg_tensor *in[2] = {tensor(TG_DT_I8, 1, SHAPE(3), (int8_t[]){1, 2, 3}),
                        tensor(TG_DT_F32, 0, NULL, (float[]){-0.25f})};
    tg_tensor *out[8] = {0};
    assert_int_equal(run(g, (tg_var *[]){zv, ov, ev, f1, f2, f3, f4, f5}, 8, in, 2, out), TG_OK);
    expect(out[0], TG_DT_F64, 2, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0), 0);
    expect(out[1], TG_DT_I32, 1, SHAPE(3), VALS(1, 1, 1), 0);
    expect(out[2], TG_DT_F64, 0, NULL, VALS(1), 0);
    expect(out[3], TG_DT_I64, 1, SHAPE(2), VALS(7, 7), 0);
    expect(out[4], TG_DT_F64, 1, SHAPE(2), VALS(2.5, 2.5), 0);
    expect(out[5], TG_DT_I32, 1, SHAPE(2), VALS(2, 2), 0);
    expect(out[6], TG_DT_F64, 2, SHAPE(2, 3), VALS(1, 2, 3, 1, 2, 3), 0);
    expect(out[7], TG_DT_F32, 2, SHAPE(2, 3), VALS(-0.25, -0.25, -0.25, -0.25, -0.25, -0.25), 0);
    for (int i = 0; i < 8; i++) tg_tensor_free(out[i]);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_graph_free(g);
}

static void test_constructor_errors(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_attr z = TG_A_INTS("shape", SHAPE(2, -1), 2);
    assert_null(tg_apply(g, "zeros", NULL, 0, &z, 1));
    expect_error(g, TG_EINVAL, "zeros: negative dimensions are not allowed (shape [2,-1])");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    assert_null(tg_apply(g, "ones", NULL, 0, NULL, 0));
    expect_error(g, TG_EINVAL, "ones: missing attribute 'shape'");
    tg_graph_free(g);

    /* NEP 50: an integer literal must fit the dtype asked for */
    g = tg_graph_new(NULL, "f");
    tg_attr fa[2] = {TG_A_INTS("shape", SHAPE(2), 1), TG_A_STR("dtype", "u8")};
    assert_null(tg_apply(g, "full", (tg_var *[]){tg_literal_int(g, 300)}, 1, fa, 2));
    expect_error(g, TG_ETYPE, "integer literal 300 is out of range for u8");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    tg_var *v = tg_input(g, "v", TG_DT_F32, 1, SHAPE(4));
    tg_attr s = TG_A_INTS("shape", SHAPE(2, 3), 2);
    assert_null(tg_apply(g, "full", &v, 1, &s, 1));
    expect_error(g, TG_ESHAPE, "full: cannot broadcast a value of type f32[4] to f32[2,3]");
    tg_graph_free(g);

    /* a value whose '?' is 1 at run time does not broadcast */
    g = tg_graph_new(NULL, "f");
    v = tg_input(g, "v", TG_DT_F32, 1, SHAPE(-1));
    tg_var *y = tg_apply(g, "full", &v, 1, &s, 1);
    expect_var(y, TG_DT_F32, 2, SHAPE(2, 3));
    tg_tensor *in = tensor(TG_DT_F32, 1, SHAPE(1), (float[]){1});
    tg_tensor *out = NULL;
    expect_last_error(run(g, &y, 1, &in, 1, &out), TG_ESHAPE, "declare the dimension as 1");
    tg_tensor_free(in);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    tg_attr e[2] = {TG_A_INT("n", -1), TG_A_INT("m", 2)};
    assert_null(tg_apply(g, "eye", NULL, 0, e, 2));
    expect_error(g, TG_EINVAL, "eye: negative dimensions are not allowed");
    tg_graph_free(g);
}

/* ---- alloc ---- */

static void test_alloc(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *v = tg_input(g, "v", TG_DT_F32, 1, SHAPE(3));
    tg_var *n = tg_input(g, "n", TG_DT_I64, 0, NULL);
    tg_var *m = tg_input(g, "m", TG_DT_I32, 0, NULL);
    /* alloc(v, n, 3): a literal gives a static extent, an input a '?' */
    tg_var *y = tg_apply(g, "alloc", (tg_var *[]){v, n, tg_literal_int(g, 3)}, 3, NULL, 0);
    expect_var(y, TG_DT_F32, 2, SHAPE(-1, 3));
    /* alloc(v, m): the value's static 3 fixes the '?' */
    tg_var *y2 = tg_apply(g, "alloc", (tg_var *[]){v, m}, 2, NULL, 0);
    expect_var(y2, TG_DT_F32, 1, SHAPE(3));
    /* alloc(0.5, 2, n): a weak float literal gives f64 */
    tg_var *y3 = tg_apply(
        g, "alloc", (tg_var *[]){tg_literal_float(g, 0.5), tg_literal_int(g, 2), n}, 3, NULL, 0);
    expect_var(y3, TG_DT_F64, 2, SHAPE(2, -1));
    tg_tensor *in[3] = {tensor(TG_DT_F32, 1, SHAPE(3), (float[]){1, 2, 3}),
                        tensor(TG_DT_I64, 0, NULL, (int64_t[]){2}),
                        tensor(TG_DT_I32, 0, NULL, (int32_t[]){3})};
    tg_tensor *out[3] = {0};
    assert_int_equal(run(g, (tg_var *[]){y, y2, y3}, 3, in, 3, out), TG_OK);
    /* np.broadcast_to(v, (2, 3)), v, np.full((2, 2), 0.5) */
    expect(out[0], TG_DT_F32, 2, SHAPE(2, 3), VALS(1, 2, 3, 1, 2, 3), 0);
    expect(out[1], TG_DT_F32, 1, SHAPE(3), VALS(1, 2, 3), 0);
    expect(out[2], TG_DT_F64, 2, SHAPE(2, 2), VALS(0.5, 0.5, 0.5, 0.5), 0);
    for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
    /* n = 0: empty; m = 4 does not fit v's 3; a negative n is an error */
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor_free(in[1]);
    in[1] = tensor(TG_DT_I64, 0, NULL, (int64_t[]){0});
    assert_int_equal(tg_fn_call(f, in, 3, out, 3), TG_OK);
    expect(out[0], TG_DT_F32, 2, SHAPE(0, 3), NULL, 0);
    expect(out[2], TG_DT_F64, 2, SHAPE(2, 0), NULL, 0);
    for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
    tg_tensor_free(in[2]);
    in[2] = tensor(TG_DT_I32, 0, NULL, (int32_t[]){4});
    expect_last_error(tg_fn_call(f, in, 3, out, 3), TG_ESHAPE,
                      "cannot broadcast a value with extent 3 on axis 0 to shape [4]");
    tg_tensor_free(in[1]);
    in[1] = tensor(TG_DT_I64, 0, NULL, (int64_t[]){-1});
    expect_last_error(tg_fn_call(f, in, 3, out, 3), TG_EINVAL,
                      "negative dimensions are not allowed (dimension 0 is -1)");
    tg_fn_free(f);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_graph_free(g);
}

static void test_alloc_errors(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *v = tg_input(g, "v", TG_DT_F32, 1, SHAPE(3));
    assert_null(tg_apply(g, "alloc", (tg_var *[]){v, tg_literal_int(g, 4)}, 2, NULL, 0));
    expect_error(g, TG_ESHAPE, "alloc: cannot broadcast a value of type f32[3] to f32[4]");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    v = tg_input(g, "v", TG_DT_F32, 0, NULL);
    assert_null(tg_apply(g, "alloc", (tg_var *[]){v, tg_literal_int(g, -2)}, 2, NULL, 0));
    expect_error(g, TG_EINVAL, "alloc: negative dimensions are not allowed (dimension 0 is -2)");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    v = tg_input(g, "v", TG_DT_F32, 0, NULL);
    tg_var *d = tg_input(g, "d", TG_DT_F32, 0, NULL);
    assert_null(tg_apply(g, "alloc", (tg_var *[]){v, d}, 2, NULL, 0));
    expect_error(g, TG_ETYPE, "alloc: dimension 0 must be a 0-d integer, got f32[]");
    tg_graph_free(g);

    /* a value whose '?' is 1 at run time does not broadcast against 3 */
    g = tg_graph_new(NULL, "f");
    v = tg_input(g, "v", TG_DT_F32, 1, SHAPE(-1));
    tg_var *y = tg_apply(g, "alloc", (tg_var *[]){v, tg_literal_int(g, 3)}, 2, NULL, 0);
    tg_tensor *in = tensor(TG_DT_F32, 1, SHAPE(1), (float[]){1});
    tg_tensor *out = NULL;
    expect_last_error(run(g, &y, 1, &in, 1, &out), TG_ESHAPE, "declare the dimension as 1");
    tg_tensor_free(in);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    v = tg_input(g, "v", TG_DT_F32, 2, SHAPE(2, 2));
    assert_null(tg_apply(g, "alloc", (tg_var *[]){v, tg_literal_int(g, 2)}, 2, NULL, 0));
    expect_error(g, TG_ESHAPE, "cannot broadcast a value of type f32[2,2]");
    tg_graph_free(g);
}

/* ---- arange ---- */

/* Builds arange with the given attributes and returns its value (NULL on a build error). */
static tg_tensor *arange(const tg_attr *at, int na, tg_graph **gout) {
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *y = tg_apply(g, "arange", NULL, 0, at, na);
    if (!y) {
        *gout = g;
        return NULL;
    }
    tg_tensor *out = NULL;
    assert_int_equal(run(g, &y, 1, NULL, 0, &out), TG_OK);
    tg_graph_free(g);
    *gout = NULL;
    return out;
}

static void test_arange(void **state) {
    (void)state;
    tg_graph *g;
    /* np.arange(0, 1, 0.1).tolist() */
    tg_tensor *t = arange(
        (tg_attr[]){TG_A_INT("start", 0), TG_A_INT("stop", 1), TG_A_FLOAT("step", 0.1)}, 3, &g);
    expect(t, TG_DT_F64, 1, SHAPE(10),
           VALS(0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001,
                0.7000000000000001, 0.8, 0.9),
           0);
    tg_tensor_free(t);
    /* np.arange(1, 0, -0.1).tolist() */
    t = arange((tg_attr[]){TG_A_INT("start", 1), TG_A_INT("stop", 0), TG_A_FLOAT("step", -0.1)}, 3,
               &g);
    expect(t, TG_DT_F64, 1, SHAPE(10),
           VALS(1.0, 0.9, 0.8, 0.7000000000000001, 0.6000000000000001, 0.5000000000000001,
                0.40000000000000013, 0.30000000000000016, 0.20000000000000018, 0.1000000000000002),
           0);
    tg_tensor_free(t);
    /* np.arange(0.1, 2.0, 0.3, dtype=np.float32).tolist() (computed in float32) */
    t = arange((tg_attr[]){TG_A_FLOAT("start", 0.1), TG_A_FLOAT("stop", 2.0),
                           TG_A_FLOAT("step", 0.3), TG_A_STR("dtype", "f32")},
               4, &g);
    expect(t, TG_DT_F32, 1, SHAPE(7),
           VALS(0.10000000149011612, 0.4000000059604645, 0.7000000476837158, 1.0,
                1.3000000715255737, 1.600000023841858, 1.9000000953674316),
           0);
    tg_tensor_free(t);
    /* np.arange(2, -7, -2.5, dtype=np.float32).tolist() */
    t = arange((tg_attr[]){TG_A_INT("start", 2), TG_A_INT("stop", -7), TG_A_FLOAT("step", -2.5),
                           TG_A_STR("dtype", "f32")},
               4, &g);
    expect(t, TG_DT_F32, 1, SHAPE(4), VALS(2.0, -0.5, -3.0, -5.5), 0);
    tg_tensor_free(t);
    /* np.arange(10, 0, -3) -> int64 [10, 7, 4, 1]; np.arange(stop=5) */
    t = arange((tg_attr[]){TG_A_INT("start", 10), TG_A_INT("stop", 0), TG_A_INT("step", -3)}, 3,
               &g);
    expect(t, TG_DT_I64, 1, SHAPE(4), VALS(10, 7, 4, 1), 0);
    tg_tensor_free(t);
    t = arange((tg_attr[]){TG_A_INT("stop", 5)}, 1, &g);
    expect(t, TG_DT_I64, 1, SHAPE(5), VALS(0, 1, 2, 3, 4), 0);
    tg_tensor_free(t);
    /* empty results: np.arange(5, 1), np.arange(-3.0, -3.0, 0.5) */
    t = arange((tg_attr[]){TG_A_INT("start", 5), TG_A_INT("stop", 1)}, 2, &g);
    expect(t, TG_DT_I64, 1, SHAPE(0), NULL, 0);
    tg_tensor_free(t);
    t = arange(
        (tg_attr[]){TG_A_FLOAT("start", -3), TG_A_FLOAT("stop", -3), TG_A_FLOAT("step", 0.5)}, 3,
        &g);
    expect(t, TG_DT_F64, 1, SHAPE(0), NULL, 0);
    tg_tensor_free(t);
    /* np.arange(-3, 3, 2.5).tolist() -> [-3.0, -0.5, 2.0] */
    t = arange((tg_attr[]){TG_A_INT("start", -3), TG_A_INT("stop", 3), TG_A_FLOAT("step", 2.5)}, 3,
               &g);
    expect(t, TG_DT_F64, 1, SHAPE(3), VALS(-3.0, -0.5, 2.0), 0);
    tg_tensor_free(t);
    /* np.arange(0, 300, 100, dtype=np.int8) -> [0, 100, -56] (wraps) */
    t = arange((tg_attr[]){TG_A_INT("stop", 300), TG_A_INT("step", 100), TG_A_STR("dtype", "i8")},
               3, &g);
    expect(t, TG_DT_I8, 1, SHAPE(3), VALS(0, 100, -56), 0);
    tg_tensor_free(t);
    /* np.arange(0.5, 5, 1.5, dtype=np.int64) -> [0, 2, 4] */
    t = arange((tg_attr[]){TG_A_FLOAT("start", 0.5), TG_A_INT("stop", 5), TG_A_FLOAT("step", 1.5),
                           TG_A_STR("dtype", "i64")},
               4, &g);
    expect(t, TG_DT_I64, 1, SHAPE(3), VALS(0, 2, 4), 0);
    tg_tensor_free(t);
    /* np.arange(0, 1e-300, 1e300) -> [0.] (the quotient underflows to 0) */
    t = arange(
        (tg_attr[]){TG_A_INT("start", 0), TG_A_FLOAT("stop", 1e-300), TG_A_FLOAT("step", 1e300)}, 3,
        &g);
    expect(t, TG_DT_F64, 1, SHAPE(1), VALS(0), 0);
    tg_tensor_free(t);
}

static void test_arange_errors(void **state) {
    (void)state;
    tg_graph *g;
    assert_null(arange((tg_attr[]){TG_A_INT("stop", 3), TG_A_INT("step", 0)}, 2, &g));
    expect_error(g, TG_EINVAL, "arange: step must not be zero");
    tg_graph_free(g);
    assert_null(arange((tg_attr[]){TG_A_FLOAT("stop", NAN)}, 1, &g));
    expect_error(g, TG_EINVAL, "arange: cannot compute length");
    tg_graph_free(g);
    assert_null(arange((tg_attr[]){TG_A_FLOAT("stop", INFINITY)}, 1, &g));
    expect_error(g, TG_ELIMIT, "arange: maximum allowed size exceeded");
    tg_graph_free(g);
    assert_null(
        arange((tg_attr[]){TG_A_INT("start", INT64_MIN), TG_A_INT("stop", INT64_MAX)}, 2, &g));
    expect_error(g, TG_ELIMIT, "arange: maximum allowed size exceeded");
    tg_graph_free(g);
    assert_null(arange((tg_attr[]){TG_A_INT("stop", 3), TG_A_STR("dtype", "bool")}, 2, &g));
    expect_error(g, TG_ETYPE, "arange: a bool result has at most 2 elements");
    tg_graph_free(g);
    assert_null(arange((tg_attr[]){TG_A_INT("start", 3)}, 1, &g));
    expect_error(g, TG_EINVAL, "arange: missing attribute 'stop'");
    tg_graph_free(g);
    /* np.arange(0, 2, dtype=bool) -> [False, True] */
    tg_tensor *t = arange((tg_attr[]){TG_A_INT("stop", 2), TG_A_STR("dtype", "bool")}, 2, &g);
    expect(t, TG_DT_BOOL, 1, SHAPE(2), VALS(0, 1), 0);
    tg_tensor_free(t);
}

/* ---- eye, tril, triu ---- */

static void test_eye(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *a = tg_apply(g, "eye", NULL, 0,
                         (tg_attr[]){TG_A_INT("n", 3), TG_A_INT("m", 4), TG_A_INT("k", -1)}, 3);
    expect_var(a, TG_DT_F64, 2, SHAPE(3, 4));
    tg_var *b =
        tg_apply(g, "eye", NULL, 0, (tg_attr[]){TG_A_INT("n", 2), TG_A_STR("dtype", "i32")}, 2);
    expect_var(b, TG_DT_I32, 2, SHAPE(2, 2));
    tg_var *c = tg_apply(g, "eye", NULL, 0,
                         (tg_attr[]){TG_A_INT("n", 2), TG_A_INT("m", 3), TG_A_INT("k", 5)}, 3);
    tg_var *d =
        tg_apply(g, "eye", NULL, 0, (tg_attr[]){TG_A_INT("n", 2), TG_A_INT("k", INT64_MAX)}, 2);
    tg_tensor *out[4] = {0};
    assert_int_equal(run(g, (tg_var *[]){a, b, c, d}, 4, NULL, 0, out), TG_OK);
    /* np.eye(3, 4, k=-1); np.eye(2, dtype=np.int32); np.eye(2, 3, k=5) */
    expect(out[0], TG_DT_F64, 2, SHAPE(3, 4), VALS(0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0), 0);
    expect(out[1], TG_DT_I32, 2, SHAPE(2, 2), VALS(1, 0, 0, 1), 0);
    expect(out[2], TG_DT_F64, 2, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0), 0);
    expect(out[3], TG_DT_F64, 2, SHAPE(2, 2), VALS(0, 0, 0, 0), 0);
    for (int i = 0; i < 4; i++) tg_tensor_free(out[i]);
    tg_graph_free(g);
}

static void test_tril_triu(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_I64, 2, SHAPE(3, 4));
    tg_var *bx = tg_input(g, "b", TG_DT_BOOL, 3, SHAPE(2, 3, -1));
    tg_attr km1 = TG_A_INT("k", -1), k1 = TG_A_INT("k", 1);
    tg_var *lo = tg_apply(g, "tril", &x, 1, &km1, 1);
    tg_var *up = tg_apply(g, "triu", &x, 1, &km1, 1);
    tg_var *bu = tg_apply(g, "triu", &bx, 1, &k1, 1);
    expect_var(bu, TG_DT_BOOL, 3, SHAPE(2, 3, -1));
    int64_t xv[12];
    for (int i = 0; i < 12; i++) xv[i] = i;
    bool bv[18];
    for (int i = 0; i < 18; i++) bv[i] = true;
    tg_tensor *in[2] = {tensor(TG_DT_I64, 2, SHAPE(3, 4), xv),
                        tensor(TG_DT_BOOL, 3, SHAPE(2, 3, 3), bv)};
    tg_tensor *out[3] = {0};
    assert_int_equal(run(g, (tg_var *[]){lo, up, bu}, 3, in, 2, out), TG_OK);
    /* np.tril(np.arange(12).reshape(3, 4), -1); np.triu(..., -1) */
    expect(out[0], TG_DT_I64, 2, SHAPE(3, 4), VALS(0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0), 0);
    expect(out[1], TG_DT_I64, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11), 0);
    /* np.triu(np.ones((2, 3, 3), dtype=bool), 1) */
    expect(out[2], TG_DT_BOOL, 3, SHAPE(2, 3, 3),
           VALS(0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0), 0);
    for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(3));
    assert_null(tg_apply(g, "tril", &x, 1, NULL, 0));
    expect_error(g, TG_ESHAPE, "tril: input must be at least 2-d, got f32[3]");
    tg_graph_free(g);
}

/* ---- shape, size ---- */

static void test_shape_size(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 3, SHAPE(-1, 3, -1));
    tg_var *s = tg_input(g, "s", TG_DT_U8, 0, NULL);
    tg_var *sh = tg_apply(g, "shape", &x, 1, NULL, 0);
    tg_var *sz = tg_apply(g, "size", &x, 1, NULL, 0);
    tg_var *ssh = tg_apply(g, "shape", &s, 1, NULL, 0);
    tg_var *ssz = tg_apply(g, "size", &s, 1, NULL, 0);
    expect_var(sh, TG_DT_I64, 1, SHAPE(3));
    expect_var(sz, TG_DT_I64, 0, NULL);
    expect_var(ssh, TG_DT_I64, 1, SHAPE(0));
    tg_tensor *in[2] = {tg_tensor_new(NULL, TG_DT_F32, 3, SHAPE(2, 3, 5)),
                        tensor(TG_DT_U8, 0, NULL, (uint8_t[]){9})};
    tg_tensor *out[4] = {0};
    assert_int_equal(run(g, (tg_var *[]){sh, sz, ssh, ssz}, 4, in, 2, out), TG_OK);
    expect(out[0], TG_DT_I64, 1, SHAPE(3), VALS(2, 3, 5), 0);
    expect(out[1], TG_DT_I64, 0, NULL, VALS(30), 0);
    expect(out[2], TG_DT_I64, 1, SHAPE(0), NULL, 0);
    expect(out[3], TG_DT_I64, 0, NULL, VALS(1), 0);
    for (int i = 0; i < 4; i++) tg_tensor_free(out[i]);
    /* a 0-size run-time shape */
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor_free(in[0]);
    in[0] = tg_tensor_new(NULL, TG_DT_F32, 3, SHAPE(0, 3, 7));
    assert_int_equal(tg_fn_call(f, in, 2, out, 4), TG_OK);
    expect(out[0], TG_DT_I64, 1, SHAPE(3), VALS(0, 3, 7), 0);
    expect(out[1], TG_DT_I64, 0, NULL, VALS(0), 0);
    for (int i = 0; i < 4; i++) tg_tensor_free(out[i]);
    tg_fn_free(f);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_graph_free(g);
}

/* Clone and verify rebuild every node through inference: the types must come back equal
 * (alloc's static extents from constants included). */
static void test_clone_and_verify(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *v = tg_input(g, "v", TG_DT_F32, 1, SHAPE(3));
    tg_var *n = tg_input(g, "n", TG_DT_I64, 0, NULL);
    tg_var *y = tg_apply(g, "alloc", (tg_var *[]){v, n, tg_literal_int(g, 2), tg_literal_int(g, 3)},
                         4, NULL, 0);
    tg_var *outs[TG_MAX_OUTS];
    int k = TG_MAX_OUTS;
    tg_attr at[2] = {TG_A_INT("sections", 2), TG_A_INT("axis", 1)};
    assert_int_equal(tg_apply_multi(g, "split", &y, 1, at, 2, outs, &k), TG_OK);
    tg_var *c = tg_apply(g, "concatenate", (tg_var *[]){outs[1], outs[0]}, 2, NULL, 0);
    expect_var(c, TG_DT_F32, 3, SHAPE(-1, 1, 3));
    assert_int_equal(tg_graph_set_outputs(g, &c, 1), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph *h = tg_graph_clone(g);
    assert_non_null(h);
    expect_var(tg_graph_output(h, 0), TG_DT_F32, 3, SHAPE(-1, 1, 3));
    tg_graph_free(h);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concatenate_mixed_dtypes),
        cmocka_unit_test(test_concatenate_unknown_and_empty),
        cmocka_unit_test(test_concatenate_errors),
        cmocka_unit_test(test_stack),
        cmocka_unit_test(test_split_sections),
        cmocka_unit_test(test_split_indices),
        cmocka_unit_test(test_split_errors),
        cmocka_unit_test(test_zeros_ones_full),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_alloc),
        cmocka_unit_test(test_alloc_errors),
        cmocka_unit_test(test_arange),
        cmocka_unit_test(test_arange_errors),
        cmocka_unit_test(test_eye),
        cmocka_unit_test(test_tril_triu),
        cmocka_unit_test(test_shape_size),
        cmocka_unit_test(test_clone_and_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
