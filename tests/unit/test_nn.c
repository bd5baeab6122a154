/* test_nn.c - softmax, log_softmax and logsumexp through the public API: stable values on
 * large inputs, rows with infinities and NaN, axes and keepdims, empty axes, dtype
 * promotion (a cast node for integer inputs), negative strides, and inference errors.
 * Expected values come from NumPy 1.24 pasted as literals, computed with scipy.special's
 * formulas written out in NumPy:
 *   softmax:     e = np.exp(x - x.max(axis, keepdims=True)); e / e.sum(axis, keepdims=True)
 *   log_softmax: m = np.amax(x, axis, keepdims=True); m[~np.isfinite(m)] = 0
 *                t = x - m; t - np.log(np.sum(np.exp(t), axis, keepdims=True))
 *   logsumexp:   the same m; np.log(np.sum(np.exp(x - m), axis, keepdims)) + m */
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

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...)  ((const double[]){__VA_ARGS__})

static tg_status run(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                     tg_tensor **res) {
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, NULL, &f);
    if (st != TG_OK) print_message("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, in, nin, res, nout);
    if (st != TG_OK) print_message("call: %s\n", tg_last_error());
    tg_fn_free(f);
    return st;
}

/* Checks dtype, shape and values within a relative tolerance (NaN matches NaN, an
 * infinity only itself). */
static void expect(const tg_tensor *t, tg_dtype dt, int ndim, const int64_t *shape,
                   const double *vals, double tol) {
    assert_non_null(t);
    assert_int_equal(tg_tensor_dtype(t), dt);
    assert_int_equal(tg_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(tg_tensor_shape(t)[i], shape[i]);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        double a = tg_tensor_get_f64(t, i), b = vals[i];
        bool ok = (isnan(a) && isnan(b)) || a == b ||
                  (isfinite(b) && fabs(a - b) <= tol * fmax(1.0, fabs(b)));
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

static tg_tensor *tensor(tg_dtype dt, int ndim, const int64_t *shape, const void *data) {
    tg_tensor *t = tg_tensor_from_data(NULL, dt, ndim, shape, data);
    assert_non_null(t);
    return t;
}

static void free_all(tg_tensor **t, int n) {
    for (int i = 0; i < n; i++) tg_tensor_free(t[i]);
}

static void test_large_inputs(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 3));
    tg_var *big = tg_input(g, "b", TG_DT_F64, 2, SHAPE(2, 2));
    tg_var *sm = tg_apply(g, "softmax", &x, 1, NULL, 0);
    tg_var *lsm = tg_apply(g, "log_softmax", &x, 1, NULL, 0);
    tg_attr ax1 = TG_A_INT("axis", 1);
    tg_var *lse = tg_apply(g, "logsumexp", &big, 1, &ax1, 1);
    expect_var(sm, TG_DT_F64, 2, SHAPE(2, 3));
    expect_var(lse, TG_DT_F64, 1, SHAPE(2));
    tg_tensor *in[2] = {tensor(TG_DT_F64, 2, SHAPE(2, 3), (double[]){1000, -1000, 0, 1, 2, 3}),
                        tensor(TG_DT_F64, 2, SHAPE(2, 2), (double[]){1000, 1000, -1000, -1000})};
    tg_tensor *out[3] = {0};
    assert_int_equal(run(g, (tg_var *[]){sm, lsm, lse}, 3, in, 2, out), TG_OK);
    expect(out[0], TG_DT_F64, 2, SHAPE(2, 3),
           VALS(1, 0, 0, 0.09003057317038043, 0.24472847105479767, 0.6652409557748218), 1e-15);
    expect(out[1], TG_DT_F64, 2, SHAPE(2, 3),
           VALS(0, -2000, -1000, -2.4076059644443806, -1.4076059644443804, -0.40760596444438035),
           1e-15);
    expect(out[2], TG_DT_F64, 1, SHAPE(2), VALS(1000.6931471805599, -999.3068528194401), 1e-15);
    free_all(out, 3);
    free_all(in, 2);
    tg_graph_free(g);
}

static void test_float32_large(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, SHAPE(2));
    tg_var *sm = tg_apply(g, "softmax", &x, 1, NULL, 0);
    tg_var *lse = tg_apply(g, "logsumexp", &x, 1, NULL, 0);
    expect_var(sm, TG_DT_F32, 1, SHAPE(2));
    expect_var(lse, TG_DT_F32, 0, NULL);
    tg_tensor *in = tensor(TG_DT_F32, 1, SHAPE(2), (float[]){1000, -1000});
    tg_tensor *out[2] = {0};
    assert_int_equal(run(g, (tg_var *[]){sm, lse}, 2, &in, 1, out), TG_OK);
    /* softmax(np.array([1000, -1000], np.float32)) -> [1., 0.] float32 */
    expect(out[0], TG_DT_F32, 1, SHAPE(2), VALS(1, 0), 0);
    expect(out[1], TG_DT_F32, 0, NULL, VALS(1000), 0);
    free_all(out, 2);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_infinities_and_nan(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(5, 3));
    tg_attr ax = TG_A_INT("axis", -1);
    tg_var *lse = tg_apply(g, "logsumexp", &x, 1, &ax, 1);
    tg_var *sm = tg_apply(g, "softmax", &x, 1, NULL, 0);
    tg_var *lsm = tg_apply(g, "log_softmax", &x, 1, NULL, 0);
    const double inf = INFINITY;
    tg_tensor *in =
        tensor(TG_DT_F64, 2, SHAPE(5, 3),
               (double[]){-inf, -inf, -inf, -inf, 0, 1, inf, 1, 2, NAN, 1, 2, inf, -inf, 0});
    tg_tensor *out[3] = {0};
    assert_int_equal(run(g, (tg_var *[]){lse, sm, lsm}, 3, &in, 1, out), TG_OK);
    expect(out[0], TG_DT_F64, 1, SHAPE(5), VALS(-inf, 1.3132616875182228, inf, NAN, inf), 1e-15);
    expect(out[1], TG_DT_F64, 2, SHAPE(5, 3),
           VALS(NAN, NAN, NAN, 0, 0.26894142136999516, 0.7310585786300049, NAN, NAN, NAN, NAN, NAN,
                NAN, NAN, NAN, NAN),
           1e-15);
    expect(out[2], TG_DT_F64, 2, SHAPE(5, 3),
           VALS(NAN, NAN, NAN, -inf, -1.3132616875182228, -0.3132616875182228, NAN, -inf, -inf, NAN,
                NAN, NAN, NAN, -inf, -inf),
           1e-15);
    free_all(out, 3);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_axes_and_keepdims(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 3, SHAPE(2, 3, -1));
    tg_var *all = tg_apply(g, "logsumexp", &x, 1, NULL, 0);
    const int64_t ax02[] = {0, -1};
    tg_attr a02[2] = {TG_A_INTS("axis", ax02, 2), TG_A_BOOL("keepdims", false)};
    tg_var *l02 = tg_apply(g, "logsumexp", &x, 1, a02, 2);
    a02[1] = TG_A_BOOL("keepdims", true);
    tg_var *k02 = tg_apply(g, "logsumexp", &x, 1, a02, 2);
    tg_attr a1 = TG_A_INT("axis", 1);
    tg_var *s1 = tg_apply(g, "softmax", &x, 1, &a1, 1);
    expect_var(all, TG_DT_F64, 0, NULL);
    expect_var(l02, TG_DT_F64, 1, SHAPE(3));
    expect_var(k02, TG_DT_F64, 3, SHAPE(1, 3, 1));
    expect_var(s1, TG_DT_F64, 3, SHAPE(2, 3, -1));
    /* x = np.arange(24.).reshape(2, 3, 4) / 7 - 1 */
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = i / 7.0 - 1;
    tg_tensor *in = tensor(TG_DT_F64, 3, SHAPE(2, 3, 4), xv);
    tg_tensor *out[4] = {0};
    assert_int_equal(run(g, (tg_var *[]){all, l02, k02, s1}, 4, &in, 1, out), TG_OK);
    expect(out[0], TG_DT_F64, 0, NULL, VALS(4.269231955831378), 1e-15);
    const double v02[] = {2.4931768714580413, 3.064605442886613, 3.636034014315184};
    expect(out[1], TG_DT_F64, 1, SHAPE(3), v02, 1e-15);
    expect(out[2], TG_DT_F64, 3, SHAPE(1, 3, 1), v02, 1e-15);
    const double p0 = 0.16930472446194098, p1 = 0.2998039515006298, p2 = 0.5308913240374292;
    expect(out[3], TG_DT_F64, 3, SHAPE(2, 3, 4),
           VALS(p0, p0, p0, p0, p1, p1, p1, p1, p2, p2, p2, p2, p0, p0, p0, p0, p1, p1, p1, p1, p2,
                p2, p2, p2),
           1e-15);
    free_all(out, 4);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_empty_axes(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, -1));
    tg_attr ax = TG_A_INT("axis", 1);
    tg_var *lse = tg_apply(g, "logsumexp", &x, 1, &ax, 1);
    tg_var *sm = tg_apply(g, "softmax", &x, 1, NULL, 0);
    tg_attr ax0 = TG_A_INT("axis", 0);
    tg_var *lse0 = tg_apply(g, "logsumexp", &x, 1, &ax0, 1);
    tg_tensor *in = tg_tensor_new(NULL, TG_DT_F32, 2, SHAPE(2, 0));
    tg_tensor *out[3] = {0};
    assert_int_equal(run(g, (tg_var *[]){lse, sm, lse0}, 3, &in, 1, out), TG_OK);
    /* log(sum(exp(x), axis=1)) of a (2, 0) array: [-inf, -inf]; the others are empty */
    expect(out[0], TG_DT_F32, 1, SHAPE(2), VALS(-INFINITY, -INFINITY), 0);
    expect(out[1], TG_DT_F32, 2, SHAPE(2, 0), NULL, 0);
    expect(out[2], TG_DT_F32, 1, SHAPE(0), NULL, 0);
    free_all(out, 3);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_dtype_promotion(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *i16 = tg_input(g, "a", TG_DT_I16, 1, SHAPE(3));
    tg_var *i32 = tg_input(g, "b", TG_DT_I32, 1, SHAPE(3));
    tg_var *bl = tg_input(g, "c", TG_DT_BOOL, 1, SHAPE(2));
    tg_var *u8 = tg_input(g, "d", TG_DT_U8, 1, SHAPE(2));
    /* np.exp's promotion: i16 -> f32 (NumPy), i32 -> f64; bool/u8 -> f16 in NumPy, f32 here */
    tg_var *s16 = tg_apply(g, "softmax", &i16, 1, NULL, 0);
    tg_var *s32 = tg_apply(g, "log_softmax", &i32, 1, NULL, 0);
    tg_var *sb = tg_apply(g, "logsumexp", &bl, 1, NULL, 0);
    tg_var *su = tg_apply(g, "softmax", &u8, 1, NULL, 0);
    expect_var(s16, TG_DT_F32, 1, SHAPE(3));
    expect_var(s32, TG_DT_F64, 1, SHAPE(3));
    expect_var(sb, TG_DT_F32, 0, NULL);
    expect_var(su, TG_DT_F32, 1, SHAPE(2));
    assert_int_equal(s16->node->in[0]->kind, TG_VAR_NODE);
    assert_int_equal(s16->node->in[0]->node->op, TG_OP_CAST);
    /* a weak int literal is i64 -> f64 */
    tg_var *sl = tg_apply(g, "logsumexp", (tg_var *[]){tg_literal_int(g, 2)}, 1, NULL, 0);
    expect_var(sl, TG_DT_F64, 0, NULL);
    tg_tensor *in[4] = {tensor(TG_DT_I16, 1, SHAPE(3), (int16_t[]){1, 2, 3}),
                        tensor(TG_DT_I32, 1, SHAPE(3), (int32_t[]){1, 2, 3}),
                        tensor(TG_DT_BOOL, 1, SHAPE(2), (bool[]){true, false}),
                        tensor(TG_DT_U8, 1, SHAPE(2), (uint8_t[]){255, 0})};
    tg_tensor *out[5] = {0};
    assert_int_equal(run(g, (tg_var *[]){s16, s32, sb, su, sl}, 5, in, 4, out), TG_OK);
    /* softmax(np.array([1, 2, 3], np.int16)) -> float32 [0.09003057, 0.24472846, 0.66524094] */
    expect(out[0], TG_DT_F32, 1, SHAPE(3), VALS(0.09003057, 0.24472846, 0.66524094), 1e-7);
    expect(out[1], TG_DT_F64, 1, SHAPE(3),
           VALS(-2.4076059644443806, -1.4076059644443804, -0.40760596444438035), 1e-15);
    /* logsumexp([1., 0.]) = log(1 + e) = 1.3132616875182228 */
    expect(out[2], TG_DT_F32, 0, NULL, VALS(1.3132616875182228), 1e-7);
    expect(out[3], TG_DT_F32, 1, SHAPE(2), VALS(1, 0), 0);
    expect(out[4], TG_DT_F64, 0, NULL, VALS(2), 0);
    free_all(out, 5);
    free_all(in, 4);
    tg_graph_free(g);
}

static void test_negative_strides(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 3));
    tg_attr ax = TG_A_INT("axis", 0);
    tg_var *sm = tg_apply(g, "softmax", &x, 1, &ax, 1);
    tg_var *lse = tg_apply(g, "logsumexp", &x, 1, &ax, 1);
    tg_tensor *base = tensor(TG_DT_F64, 2, SHAPE(2, 3), (double[]){1, 2, 3, 1000, -1000, 0});
    tg_tensor *in = tg_tensor_view(base, 2, SHAPE(2, 3), SHAPE(-3, -1), 5);
    assert_non_null(in);
    tg_tensor *out[2] = {0};
    assert_int_equal(run(g, (tg_var *[]){sm, lse}, 2, &in, 1, out), TG_OK);
    /* x = base[::-1, ::-1] = [[0, -1000, 1000], [3, 2, 1]]; softmax(x, axis=0) and
     * logsumexp(x, axis=0) */
    expect(out[0], TG_DT_F64, 2, SHAPE(2, 3),
           VALS(0.04742587317756678, 0, 1, 0.9525741268224334, 1, 0), 1e-15);
    expect(out[1], TG_DT_F64, 1, SHAPE(3), VALS(3.048587351573742, 2, 1000), 1e-15);
    free_all(out, 2);
    tg_tensor_free(in);
    tg_tensor_free(base);
    tg_graph_free(g);
}

static void test_axis_none_softmax(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 2));
    tg_attr none = TG_A_NONE("axis");
    tg_var *sm = tg_apply(g, "softmax", &x, 1, &none, 1);
    tg_tensor *in = tensor(TG_DT_F64, 2, SHAPE(2, 2), (double[]){0, 0, 0, 0});
    tg_tensor *out = NULL;
    assert_int_equal(run(g, &sm, 1, &in, 1, &out), TG_OK);
    /* scipy.special.softmax(np.zeros((2, 2))) (axis=None): 0.25 everywhere */
    expect(out, TG_DT_F64, 2, SHAPE(2, 2), VALS(0.25, 0.25, 0.25, 0.25), 0);
    tg_tensor_free(out);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_errors(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    tg_attr ax = TG_A_INT("axis", 2);
    assert_null(tg_apply(g, "softmax", &x, 1, &ax, 1));
    expect_error(g, TG_EINVAL, "softmax: axis 2 is out of bounds for an array of dimension 2");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 0, NULL);
    assert_null(tg_apply(g, "log_softmax", &x, 1, NULL, 0));
    expect_error(g, TG_EINVAL, "log_softmax: axis -1 is out of bounds for an array of dimension 0");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    const int64_t dup[] = {1, -1};
    tg_attr ad = TG_A_INTS("axis", dup, 2);
    assert_null(tg_apply(g, "logsumexp", &x, 1, &ad, 1));
    expect_error(g, TG_EINVAL, "logsumexp: duplicate value in 'axis' (-1)");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    tg_attr al = TG_A_INTS("axis", dup, 2);
    assert_null(tg_apply(g, "softmax", &x, 1, &al, 1));
    expect_error(g, TG_EINVAL, "softmax: attribute 'axis' expects an int");
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_inputs),
        cmocka_unit_test(test_float32_large),
        cmocka_unit_test(test_infinities_and_nan),
        cmocka_unit_test(test_axes_and_keepdims),
        cmocka_unit_test(test_empty_axes),
        cmocka_unit_test(test_dtype_promotion),
        cmocka_unit_test(test_negative_strides),
        cmocka_unit_test(test_axis_none_softmax),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
