/* test_api_null.c - every function of include/tgraph.h given bad arguments: NULL handles,
 * NULL arrays with positive counts, negative counts and ranks, out-of-range enums, NULL
 * names. Each must fail cleanly (a status, or NULL / -1 with tg_last_error set) with a
 * message naming the function, never crash (docs/c-api.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tgraph.h"

/* The last error names `fn` (the function, or for op builders the op). */
#define NAMES(fn)                                                                                  \
    do {                                                                                           \
        if (!strstr(tg_last_error(), (fn)))                                                        \
            fail_msg("%s:%d: the message '%s' does not name %s", __FILE__, __LINE__,               \
                     tg_last_error(), (fn));                                                       \
    } while (0)
#define STATUS(call, want, fn)                                                                     \
    do {                                                                                           \
        clear_error();                                                                             \
        assert_int_equal((call), (want));                                                          \
        NAMES(fn);                                                                                 \
    } while (0)
#define NULLRET(call, fn)                                                                          \
    do {                                                                                           \
        clear_error();                                                                             \
        assert_null((call));                                                                       \
        NAMES(fn);                                                                                 \
    } while (0)
#define VALUE(call, want, fn)                                                                      \
    do {                                                                                           \
        clear_error();                                                                             \
        assert_true((call) == (want));                                                             \
        NAMES(fn);                                                                                 \
    } while (0)

/* Replaces the previous message by one that names none of the functions checked. */
static void clear_error(void) {
    tg_tensor *t = NULL;
    assert_int_not_equal(tg_npy_load_mem(NULL, "?", 1, &t), TG_OK); /* "<memory>: ..." */
    assert_null(strstr(tg_last_error(), "tg_"));
}

static const int64_t shp3[1] = {3};

/* A graph with one input x: f32[3], and its sticky status checked after each failure. */
static tg_graph *graph_x(tg_var **x) {
    tg_graph *g = tg_graph_new(NULL, "g");
    assert_non_null(g);
    *x = tg_input(g, "x", TG_DT_F32, 1, shp3);
    assert_non_null(*x);
    return g;
}

/* Builder call `expr` on a fresh graph g with input x: NULL, the graph's sticky error set
 * to `want` and naming fn. */
#define BUILDER(expr, want, fn)                                                                    \
    do {                                                                                           \
        tg_var *x;                                                                                 \
        tg_graph *g = graph_x(&x);                                                                 \
        (void)x;                                                                                   \
        clear_error();                                                                             \
        assert_null((expr));                                                                       \
        NAMES(fn);                                                                                 \
        assert_int_equal(tg_graph_status(g), (want));                                              \
        assert_non_null(strstr(tg_graph_error(g), (fn)));                                          \
        tg_graph_free(g);                                                                          \
    } while (0)
#define BUILDER_ST(expr, want, fn)                                                                 \
    do {                                                                                           \
        tg_var *x;                                                                                 \
        tg_graph *g = graph_x(&x);                                                                 \
        (void)x;                                                                                   \
        clear_error();                                                                             \
        assert_int_equal((expr), (want));                                                          \
        NAMES(fn);                                                                                 \
        assert_int_equal(tg_graph_status(g), (want));                                              \
        tg_graph_free(g);                                                                          \
    } while (0)

static void test_status_dtype_ctx(void **state) {
    (void)state;
    assert_string_equal(tg_status_str((tg_status)-1), "unknown status");
    assert_string_equal(tg_status_str(TG_STATUS_COUNT), "unknown status");
    assert_string_equal(tg_dtype_name((tg_dtype)-1), "?");
    assert_string_equal(tg_dtype_name(TG_DT_COUNT), "?");
    assert_int_equal(tg_dtype_size(TG_DT_COUNT), 0);
    tg_dtype dt;
    assert_false(tg_dtype_parse(NULL, &dt));
    assert_false(tg_dtype_is_float(TG_DT_COUNT));
    assert_false(tg_dtype_is_int((tg_dtype)-3));
    tg_ctx_free(NULL);
    STATUS(tg_ctx_set_mem_limit(NULL, 10), TG_EINVAL, "tg_ctx_set_mem_limit");
    assert_int_equal(tg_ctx_mem_used(NULL), 0);
    assert_int_equal(tg_ctx_mem_peak(NULL), 0);
}

static void test_tensors(void **state) {
    (void)state;
    int64_t neg[1] = {-1};
    NULLRET(tg_tensor_new(NULL, TG_DT_F32, 2, NULL), "tg_tensor_new");
    NULLRET(tg_tensor_new(NULL, TG_DT_F32, -1, shp3), "tg_tensor_new");
    NULLRET(tg_tensor_new(NULL, TG_DT_F32, TG_MAX_DIMS + 1, shp3), "tg_tensor_new");
    NULLRET(tg_tensor_new(NULL, TG_DT_COUNT, 1, shp3), "tg_tensor_new");
    NULLRET(tg_tensor_new(NULL, (tg_dtype)-1, 1, shp3), "tg_tensor_new");
    NULLRET(tg_tensor_new(NULL, TG_DT_F32, 1, neg), "tg_tensor_new");
    NULLRET(tg_tensor_from_data(NULL, TG_DT_F32, 1, shp3, NULL), "tg_tensor_from_data");
    NULLRET(tg_tensor_from_data(NULL, TG_DT_F32, 1, NULL, NULL), "tg_tensor_from_data");
    NULLRET(tg_tensor_view(NULL, 1, shp3, NULL, 0), "tg_tensor_view");
    NULLRET(tg_tensor_dup(NULL), "tg_tensor_dup");
    NULLRET(tg_tensor_from_dlpack(NULL, NULL), "tg_tensor_from_dlpack");
    NULLRET(tg_tensor_to_dlpack(NULL), "tg_tensor_to_dlpack");
    tg_tensor_free(NULL);
    VALUE(tg_tensor_dtype(NULL), TG_DT_COUNT, "tg_tensor_dtype");
    VALUE(tg_tensor_ndim(NULL), -1, "tg_tensor_ndim");
    NULLRET(tg_tensor_shape(NULL), "tg_tensor_shape");
    NULLRET(tg_tensor_strides(NULL), "tg_tensor_strides");
    VALUE(tg_tensor_offset(NULL), -1, "tg_tensor_offset");
    VALUE(tg_tensor_size(NULL), -1, "tg_tensor_size");
    NULLRET(tg_tensor_data(NULL), "tg_tensor_data");
    VALUE(tg_tensor_is_contiguous(NULL), false, "tg_tensor_is_contiguous");
    NULLRET(tg_tensor_ctx(NULL), "tg_tensor_ctx");
    clear_error();
    assert_true(tg_tensor_get_f64(NULL, 0) != tg_tensor_get_f64(NULL, 0)); /* NaN */
    NAMES("tg_tensor_get_f64");

    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F32, 1, shp3);
    assert_non_null(t);
    NULLRET(tg_tensor_view(t, 2, NULL, NULL, 0), "tg_tensor_view");
    NULLRET(tg_tensor_view(t, -2, shp3, NULL, 0), "tg_tensor_view");
    clear_error();
    assert_true(tg_tensor_get_f64(t, -1) != tg_tensor_get_f64(t, -1));
    NAMES("tg_tensor_get_f64");
    tg_tensor *o = t;
    STATUS(tg_npy_load(NULL, NULL, &o), TG_EINVAL, "tg_npy_load");
    assert_null(o);
    STATUS(tg_npy_load(NULL, "x.npy", NULL), TG_EINVAL, "tg_npy_load");
    STATUS(tg_npy_load_mem(NULL, NULL, 8, &o), TG_EINVAL, "tg_npy_load_mem");
    STATUS(tg_npy_load_mem(NULL, "", 0, NULL), TG_EINVAL, "tg_npy_load_mem");
    STATUS(tg_npy_save(NULL, t), TG_EINVAL, "tg_npy_save");
    STATUS(tg_npy_save("/nonexistent/x.npy", NULL), TG_EINVAL, "tg_npy_save");
    STATUS(tg_tensor_print(NULL, stdout), TG_EINVAL, "tg_tensor_print");
    STATUS(tg_tensor_print(t, NULL), TG_EINVAL, "tg_tensor_print");
    tg_tensor_free(t);
}

static void test_graph_handles(void **state) {
    (void)state;
    tg_graph_free(NULL);
    NULLRET(tg_graph_name(NULL), "tg_graph_name");
    STATUS(tg_graph_status(NULL), TG_EINVAL, "tg_graph_status");
    clear_error();
    assert_non_null(tg_graph_error(NULL));
    NAMES("tg_graph_error");
    STATUS(tg_graph_set_outputs(NULL, NULL, 0), TG_EINVAL, "tg_graph_set_outputs");
    VALUE(tg_graph_input_count(NULL), -1, "tg_graph_input_count");
    NULLRET(tg_graph_input(NULL, 0), "tg_graph_input");
    VALUE(tg_graph_output_count(NULL), -1, "tg_graph_output_count");
    NULLRET(tg_graph_output(NULL, 0), "tg_graph_output");
    NULLRET(tg_graph_output_name(NULL, 0), "tg_graph_output_name");
    STATUS(tg_graph_set_output_name(NULL, 0, "y"), TG_EINVAL, "tg_graph_set_output_name");
    VALUE(tg_graph_node_count(NULL), -1, "tg_graph_node_count");
    STATUS(tg_graph_verify(NULL), TG_EINVAL, "tg_graph_verify");
    NULLRET(tg_graph_clone(NULL), "tg_graph_clone");
    STATUS(tg_graph_print(NULL, stdout), TG_EINVAL, "tg_graph_print");
    STATUS(tg_graph_print_dot(NULL, stdout), TG_EINVAL, "tg_graph_print_dot");
    NULLRET(tg_var_name(NULL), "tg_var_name");
    VALUE(tg_var_dtype(NULL), TG_DT_COUNT, "tg_var_dtype");
    VALUE(tg_var_ndim(NULL), -1, "tg_var_ndim");
    VALUE(tg_var_dim(NULL, 0), -1, "tg_var_dim");
    assert_false(tg_var_is_state(NULL));

    /* the examples: NULL outputs, a negative count */
    BUILDER_ST(tg_graph_set_outputs(g, NULL, 1), TG_EINVAL, "tg_graph_set_outputs");
    BUILDER_ST(tg_graph_set_outputs(g, &x, -1), TG_EINVAL, "tg_graph_set_outputs");
    BUILDER_ST(tg_graph_set_outputs(g, (tg_var *[]){NULL}, 1), TG_EINVAL, "output 0");
    BUILDER_ST(tg_graph_set_output_name(g, 0, "y"), TG_EINDEX, "tg_graph_set_output_name");

    tg_var *x;
    tg_graph *g = graph_x(&x);
    NULLRET(tg_graph_input(g, 1), "tg_graph_input");
    NULLRET(tg_graph_input(g, -1), "tg_graph_input");
    NULLRET(tg_graph_output(g, 0), "tg_graph_output");
    NULLRET(tg_graph_output_name(g, 0), "tg_graph_output_name");
    STATUS(tg_graph_print(g, NULL), TG_EINVAL, "tg_graph_print");
    STATUS(tg_graph_print_dot(g, NULL), TG_EINVAL, "tg_graph_print_dot");
    assert_int_equal(tg_graph_status(g), TG_OK); /* the accessors leave the graph alone */
    tg_graph_free(g);
}

static void test_leaves(void **state) {
    (void)state;
    NULLRET(tg_input(NULL, "x", TG_DT_F32, 1, shp3), "tg_input");
    NULLRET(tg_state(NULL, "x", TG_DT_F32, 1, shp3), "tg_state");
    BUILDER(tg_input(g, "y", TG_DT_F32, 2, NULL), TG_EINVAL, "tg_input");
    BUILDER(tg_input(g, NULL, TG_DT_F32, 1, shp3), TG_EINVAL, "tg_input");
    BUILDER(tg_input(g, "", TG_DT_F32, 1, shp3), TG_EINVAL, "tg_input");
    BUILDER(tg_input(g, "y", TG_DT_F32, -1, shp3), TG_EINVAL, "tg_input");
    BUILDER(tg_input(g, "y", TG_DT_COUNT, 1, shp3), TG_EINVAL, "tg_input");
    BUILDER(tg_input(g, "y", (tg_dtype)-1, 1, shp3), TG_EINVAL, "tg_input");
    BUILDER(tg_state(g, "s", TG_DT_F32, 1, NULL), TG_EINVAL, "tg_state");
    BUILDER(tg_state(g, "s", (tg_dtype)99, 1, shp3), TG_EINVAL, "tg_state");

    STATUS(tg_update(NULL, NULL, NULL), TG_EINVAL, "tg_update");
    BUILDER_ST(tg_update(g, NULL, x), TG_EINVAL, "tg_update");
    BUILDER_ST(tg_update(g, x, NULL), TG_EINVAL, "tg_update");

    NULLRET(tg_constant(NULL, NULL), "tg_constant");
    BUILDER(tg_constant(g, NULL), TG_EINVAL, "tg_constant");
    NULLRET(tg_literal_int(NULL, 1), "tg_literal_int");
    NULLRET(tg_literal_float(NULL, 1), "tg_literal_float");
    NULLRET(tg_literal_bool(NULL, true), "tg_literal_bool");
}

static void test_builders(void **state) {
    (void)state;
    /* the example: a NULL input list with a positive count */
    NULLRET(tg_apply(NULL, "exp", NULL, 1, NULL, 0), "tg_apply");
    BUILDER(tg_apply(g, "exp", NULL, 1, NULL, 0), TG_EINVAL, "exp");
    BUILDER(tg_apply(g, "exp", &x, -1, NULL, 0), TG_EINVAL, "exp");
    BUILDER(tg_apply(g, "exp", (tg_var *[]){NULL}, 1, NULL, 0), TG_EINVAL, "exp");
    BUILDER(tg_apply(g, NULL, &x, 1, NULL, 0), TG_ENAME, "(null)");
    BUILDER(tg_apply(g, "exp", &x, 1, NULL, 1), TG_EINVAL, "exp");
    BUILDER(tg_apply(g, "exp", &x, 1, NULL, -1), TG_EINVAL, "exp");
    /* attributes: NULL names, strings and lists, negative lengths, unknown kinds */
    BUILDER(tg_apply(g, "sum", &x, 1, &TG_A_INT(NULL, 0), 1), TG_EINVAL, "sum");
    BUILDER(tg_apply(g, "cast", &x, 1, &TG_A_STR("dtype", NULL), 1), TG_EINVAL, "cast");
    BUILDER(tg_apply(g, "sum", &x, 1, &TG_A_INTS("axis", NULL, 1), 1), TG_EINVAL, "sum");
    BUILDER(tg_apply(g, "sum", &x, 1, &TG_A_INTS("axis", shp3, -1), 1), TG_EINVAL, "sum");
    BUILDER(tg_apply(g, "sum", &x, 1,
                     &(tg_attr){.name = "axis", .kind = TG_ATTR_FLOATS, .floats = NULL, .n = 2}, 1),
            TG_EINVAL, "sum");
    BUILDER(tg_apply(g, "sum", &x, 1, &(tg_attr){.name = "axis", .kind = (tg_attr_kind)77}, 1),
            TG_EINVAL, "sum");
    int nout = 1;
    STATUS(tg_apply_multi(NULL, "exp", NULL, 1, NULL, 0, NULL, &nout), TG_EINVAL, "tg_apply");
    BUILDER_ST(tg_apply_multi(g, "exp", NULL, 1, NULL, 0, NULL, &nout), TG_EINVAL, "exp");
    tg_var *outs[1];
    nout = -1;
    BUILDER_ST(tg_apply_multi(g, "exp", &x, 1, NULL, 0, outs, &nout), TG_EINVAL, "exp");
    /* calls: NULL graph, callee, arguments; a NULL FUNC attribute */
    nout = 1;
    STATUS(tg_call(NULL, NULL, NULL, 0, NULL, &nout), TG_EINVAL, "tg_call");
    BUILDER_ST(tg_call(g, NULL, &x, 1, outs, &nout), TG_EINVAL, "tg_call");
    BUILDER_ST(tg_call(g, g, NULL, 1, outs, &nout), TG_EINVAL, "call");
    BUILDER(tg_apply(g, "call", &x, 1, &TG_A_FUNC("fn", NULL), 1), TG_EINVAL, "call");
    /* vectorize: NULL graph, function, arguments, outputs; a negative count */
    nout = 1;
    STATUS(tg_vectorize(NULL, NULL, NULL, 0, NULL, NULL, outs, &nout), TG_EINVAL, "tg_vectorize");
    BUILDER_ST(tg_vectorize(g, NULL, &x, 1, NULL, NULL, outs, &nout), TG_EINVAL, "tg_vectorize");
    BUILDER_ST(tg_vectorize(g, g, NULL, 1, NULL, NULL, outs, &nout), TG_EINVAL, "tg_vectorize");
    BUILDER_ST(tg_vectorize(g, g, &x, -1, NULL, NULL, outs, &nout), TG_EINVAL, "tg_vectorize");
    BUILDER_ST(tg_vectorize(g, g, &x, 1, NULL, NULL, NULL, &nout), TG_EINVAL, "tg_vectorize");
    BUILDER_ST(tg_vectorize(g, g, &x, 1, NULL, NULL, outs, NULL), TG_EINVAL, "tg_vectorize");

    /* the typed shortcuts: NULL graph, NULL operands */
    NULLRET(tg_exp(NULL, NULL), "tg_apply");
    BUILDER(tg_exp(g, NULL), TG_EINVAL, "exp");
    BUILDER(tg_add(g, x, NULL), TG_EINVAL, "add");
    BUILDER(tg_where(g, NULL, x, x), TG_EINVAL, "where");
    BUILDER(tg_clip(g, x, NULL, x), TG_EINVAL, "clip");
    NULLRET(tg_cast(NULL, NULL, TG_DT_F64), "tg_cast");
    BUILDER(tg_cast(g, x, TG_DT_COUNT), TG_EINVAL, "cast");
    BUILDER(tg_cast(g, x, (tg_dtype)-1), TG_EINVAL, "cast");
    BUILDER(tg_cast(g, NULL, TG_DT_F64), TG_EINVAL, "cast");
    BUILDER(tg_reduce(g, NULL, x, NULL, -1, false), TG_ENAME, "(null)");
    BUILDER(tg_reduce(g, "sum", NULL, NULL, -1, false), TG_EINVAL, "sum");
    BUILDER(tg_reshape(g, x, 2, NULL), TG_EINVAL, "reshape");
    BUILDER(tg_reshape(g, x, -1, shp3), TG_EINVAL, "reshape");
    BUILDER(tg_reshape(g, NULL, 1, shp3), TG_EINVAL, "reshape");
    BUILDER(tg_transpose(g, NULL, NULL), TG_EINVAL, "transpose");
    BUILDER(tg_transpose(g, NULL, shp3), TG_EINVAL, "transpose");
    NULLRET(tg_slice_apply(NULL, NULL, NULL, 0), "tg_slice_apply");
    BUILDER(tg_slice_apply(g, NULL, NULL, 0), TG_EINVAL, "tg_slice_apply");
    BUILDER(tg_slice_apply(g, x, NULL, 1), TG_EINVAL, "tg_slice_apply");
    BUILDER(tg_slice_apply(g, x, &(tg_slice){0, 1, 1, false, 0}, -1), TG_EINVAL, "tg_slice_apply");
    /* after a failure every builder returns NULL and the first message stays */
    tg_var *x;
    tg_graph *g = graph_x(&x);
    assert_null(tg_exp(g, NULL));
    const char *first = tg_graph_error(g);
    assert_null(tg_neg(g, x));
    assert_string_equal(tg_graph_error(g), first);
    tg_graph_free(g);
}

static void test_grad(void **state) {
    (void)state;
    tg_var *out[1], *one;
    STATUS(tg_grad(NULL, NULL, NULL, 0, TG_DISCONNECTED_ERROR, NULL), TG_EINVAL, "tg_grad");
    BUILDER_ST(tg_grad(g, NULL, &x, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_grad");
    BUILDER_ST(
        tg_grad(g, tg_reduce(g, "sum", x, NULL, -1, false), NULL, 1, TG_DISCONNECTED_ERROR, out),
        TG_EINVAL, "tg_grad");
    BUILDER_ST(
        tg_grad(g, tg_reduce(g, "sum", x, NULL, -1, false), &x, 1, TG_DISCONNECTED_ERROR, NULL),
        TG_EINVAL, "tg_grad");
    BUILDER_ST(
        tg_grad(g, tg_reduce(g, "sum", x, NULL, -1, false), &x, -1, TG_DISCONNECTED_ERROR, out),
        TG_EINVAL, "tg_grad");
    BUILDER_ST(tg_grad(g, tg_reduce(g, "sum", x, NULL, -1, false), &x, 1, (tg_disconnected)5, out),
               TG_EINVAL, "tg_grad");
    STATUS(tg_vjp(NULL, NULL, NULL, 1, NULL, 0, TG_DISCONNECTED_ERROR, NULL), TG_EINVAL, "tg_vjp");
    BUILDER_ST(tg_vjp(g, NULL, NULL, 1, &x, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_vjp");
    BUILDER_ST(tg_vjp(g, &x, &x, -1, &x, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_vjp");
    BUILDER_ST(tg_vjp(g, &x, &x, 1, NULL, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_vjp");
    BUILDER_ST(tg_vjp(g, &x, &x, 1, &x, 1, (tg_disconnected)-1, out), TG_EINVAL, "tg_vjp");
    STATUS(tg_jacobian(NULL, NULL, NULL, 0, TG_DISCONNECTED_ERROR, NULL), TG_EINVAL, "tg_jacobian");
    BUILDER_ST(tg_jacobian(g, NULL, &x, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_jacobian");
    BUILDER_ST(tg_jacobian(g, x, NULL, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_jacobian");
    BUILDER_ST(tg_jacobian(g, x, &x, 1, TG_DISCONNECTED_ERROR, NULL), TG_EINVAL, "tg_jacobian");
    BUILDER_ST(tg_jacobian(g, x, &x, -1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_jacobian");
    BUILDER_ST(tg_jacobian(g, x, (tg_var *[]){NULL}, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL,
               "tg_jacobian");
    BUILDER_ST(tg_jacobian(g, x, &x, 1, (tg_disconnected)2, out), TG_EINVAL, "tg_jacobian");
    STATUS(tg_hessian(NULL, NULL, NULL, 0, TG_DISCONNECTED_ERROR, NULL), TG_EINVAL, "tg_hessian");
    BUILDER_ST(tg_hessian(g, NULL, &x, 1, TG_DISCONNECTED_ERROR, out), TG_EINVAL, "tg_hessian");
    BUILDER_ST(
        tg_hessian(g, tg_reduce(g, "sum", x, NULL, -1, false), NULL, 1, TG_DISCONNECTED_ERROR, out),
        TG_EINVAL, "tg_hessian");
    BUILDER_ST(
        tg_hessian(g, tg_reduce(g, "sum", x, NULL, -1, false), &x, 1, TG_DISCONNECTED_ERROR, NULL),
        TG_EINVAL, "tg_hessian");
    BUILDER_ST(
        tg_hessian(g, tg_reduce(g, "sum", x, NULL, -1, false), &x, -1, TG_DISCONNECTED_ERROR, out),
        TG_EINVAL, "tg_hessian");
    BUILDER_ST(
        tg_hessian(g, tg_reduce(g, "sum", x, NULL, -1, false), &x, 1, (tg_disconnected)7, out),
        TG_EINVAL, "tg_hessian");
    (void)one;
    STATUS(tg_grad_check(NULL, NULL, 0, NULL, NULL), TG_EINVAL, "tg_grad_check");
    tg_var *x;
    tg_graph *g = graph_x(&x);
    tg_var *y = tg_reduce(g, "sum", tg_exp(g, x), NULL, -1, false);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    STATUS(tg_grad_check(g, NULL, 1, NULL, NULL), TG_EINVAL, "tg_grad_check");
    STATUS(tg_grad_check(g, (tg_tensor *[]){NULL}, 1, NULL, NULL), TG_EINVAL, "tg_grad_check");
    STATUS(tg_grad_check(g, NULL, -1, NULL, NULL), TG_EINVAL, "tg_grad_check");
    tg_graph_free(g);
}

static void test_modules_and_optimize(void **state) {
    (void)state;
    tg_module *m = NULL;
    STATUS(tg_module_parse(NULL, NULL, 4, "f.tg", &m), TG_EINVAL, "tg_module_parse");
    STATUS(tg_module_parse(NULL, "", 0, "f.tg", NULL), TG_EINVAL, "tg_module_parse");
    STATUS(tg_module_load(NULL, NULL, &m), TG_EINVAL, "tg_module_load");
    STATUS(tg_module_load(NULL, "f.tg", NULL), TG_EINVAL, "tg_module_load");
    STATUS(tg_module_read(NULL, NULL, "f.tg", &m), TG_EINVAL, "tg_module_read");
    STATUS(tg_module_read(NULL, stdin, "f.tg", NULL), TG_EINVAL, "tg_module_read");
    tg_module_free(NULL);
    VALUE(tg_module_func_count(NULL), -1, "tg_module_func_count");
    NULLRET(tg_module_func(NULL, 0), "tg_module_func");
    NULLRET(tg_module_find(NULL, "main"), "tg_module_find");
    STATUS(tg_module_print(NULL, stdout), TG_EINVAL, "tg_module_print");
    const char src[] = "func main(x: f32[3]) {\n  return exp(x)\n}\n";
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), NULL, &m), TG_OK);
    NULLRET(tg_module_func(m, 1), "tg_module_func");
    NULLRET(tg_module_func(m, -1), "tg_module_func");
    NULLRET(tg_module_find(m, NULL), "tg_module_find");
    NULLRET(tg_module_find(m, "other"), "tg_module_find");
    STATUS(tg_module_print(m, NULL), TG_EINVAL, "tg_module_print");
    tg_graph *opt = NULL;
    STATUS(tg_graph_optimize(NULL, NULL, &opt), TG_EINVAL, "tg_graph_optimize");
    STATUS(tg_graph_optimize(tg_module_func(m, 0), NULL, NULL), TG_EINVAL, "tg_graph_optimize");
    assert_null(tg_pass_name(-1));
    assert_null(tg_pass_name(1000));
    tg_module_free(m);
}

static void test_functions(void **state) {
    (void)state;
    tg_pool_free(NULL);
    NULLRET(tg_pool_new(NULL, 1 << 20), "thread pool");
    tg_fn *f = NULL;
    STATUS(tg_graph_compile(NULL, NULL, &f), TG_EINVAL, "tg_graph_compile");
    tg_var *x;
    tg_graph *g = graph_x(&x);
    tg_var *s = tg_state(g, "s", TG_DT_F32, 1, shp3);
    tg_var *y = tg_exp(g, x);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    assert_int_equal(tg_update(g, s, y), TG_OK);
    STATUS(tg_graph_compile(g, NULL, NULL), TG_EINVAL, "tg_graph_compile");
    STATUS(tg_graph_compile(g, &TG_COMPILE_OPTS(.mode = (tg_mode)9), &f), TG_EINVAL,
           "tg_graph_compile");
    STATUS(tg_graph_compile(g, &TG_COMPILE_OPTS(.mode = (tg_mode)-1), &f), TG_EINVAL,
           "tg_graph_compile");
    STATUS(tg_graph_compile(g, &TG_COMPILE_OPTS(.debug_backend = (tg_mode)7), &f), TG_EINVAL,
           "tg_graph_compile");
    assert_null(f);

    tg_tensor *out[1] = {NULL};
    STATUS(tg_fn_call(NULL, NULL, 0, out, 1), TG_EINVAL, "tg_fn_call");
    STATUS(tg_fn_call_into(NULL, NULL, 0, out, 1), TG_EINVAL, "tg_fn_call_into");
    STATUS(tg_fn_profile_print(NULL, stdout), TG_EINVAL, "tg_fn_profile_print");
    tg_fn_profile_reset(NULL);
    VALUE(tg_fn_state_count(NULL), -1, "tg_fn_state_count");
    NULLRET(tg_fn_state_name(NULL, 0), "tg_fn_state_name");
    VALUE(tg_fn_state_find(NULL, "s"), -1, "tg_fn_state_find");
    NULLRET(tg_fn_state(NULL, 0), "tg_fn_state");
    STATUS(tg_fn_state_set(NULL, 0, NULL), TG_EINVAL, "tg_fn_state_set");
    tg_fn_free(NULL);

    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F32, 1, shp3);
    STATUS(tg_fn_call(f, NULL, 1, out, 1), TG_EINVAL, "input 0");
    STATUS(tg_fn_call(f, &t, -1, out, 1), TG_EINVAL, "tg_fn_call");
    STATUS(tg_fn_call(f, &t, 1, out, -1), TG_EINVAL, "tg_fn_call");
    STATUS(tg_fn_call(f, &t, 1, NULL, 1), TG_EINVAL, "tg_fn_call");
    STATUS(tg_fn_call_into(f, &t, 1, NULL, 1), TG_EINVAL, "tg_fn_call_into");
    STATUS(tg_fn_profile_print(f, NULL), TG_EINVAL, "tg_fn_profile_print");
    NULLRET(tg_fn_state_name(f, 1), "tg_fn_state_name");
    NULLRET(tg_fn_state_name(f, -1), "tg_fn_state_name");
    VALUE(tg_fn_state_find(f, NULL), -1, "tg_fn_state_find");
    NULLRET(tg_fn_state(f, 1), "tg_fn_state");
    NULLRET(tg_fn_state(f, -1), "tg_fn_state");
    STATUS(tg_fn_state_set(f, 0, NULL), TG_EINVAL, "tg_fn_state_set");
    assert_int_equal(tg_fn_call(f, &t, 1, out, 1), TG_OK); /* still works */
    tg_tensor_free(out[0]);
    tg_tensor_free(t);
    tg_fn_free(f);
    tg_graph_free(g);

    STATUS(tg_cache_list(NULL), TG_EINVAL, "cache");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_dtype_ctx),
        cmocka_unit_test(test_tensors),
        cmocka_unit_test(test_graph_handles),
        cmocka_unit_test(test_leaves),
        cmocka_unit_test(test_builders),
        cmocka_unit_test(test_grad),
        cmocka_unit_test(test_modules_and_optimize),
        cmocka_unit_test(test_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
