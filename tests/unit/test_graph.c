/* test_graph.c - the graph IR and the reference interpreter through the public API:
 * sticky first errors, NEP 50 literals and cast insertion, attribute checking, clone,
 * replace, verify, toposort of long chains, input checking, and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fault_alloc.h"

#include <stdlib.h>

#include "ir/ir.h"
#include "ops/ops.h"

static tg_var *vec_input(tg_graph *g, const char *name, tg_dtype dt, int64_t n) {
    return tg_input(g, name, dt, 1, (int64_t[]){n});
}

static void test_sticky_first_error(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = vec_input(g, "x", TG_DT_F32, 3);
    tg_var *y = vec_input(g, "y", TG_DT_F32, 4);
    tg_var *bad = tg_add(g, x, y);
    assert_null(bad);
    assert_int_equal(tg_graph_status(g), TG_ESHAPE);
    assert_non_null(strstr(tg_graph_error(g), "add"));
    assert_non_null(strstr(tg_graph_error(g), "f32[3]"));
    assert_non_null(strstr(tg_graph_error(g), "f32[4]"));
    /* later builders return NULL and keep the first message */
    char first[512];
    snprintf(first, sizeof first, "%s", tg_graph_error(g));
    assert_null(tg_exp(g, bad));
    assert_null(tg_apply(g, "no_such_op", &x, 1, NULL, 0));
    assert_string_equal(tg_graph_error(g), first);
    tg_graph_free(g);
}

static void test_unknown_op_and_attrs(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = vec_input(g, "x", TG_DT_F32, 3);
    assert_null(tg_apply(g, "frobnicate", &x, 1, NULL, 0));
    assert_int_equal(tg_graph_status(g), TG_ENAME);
    assert_non_null(strstr(tg_graph_error(g), "unknown op 'frobnicate'"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = vec_input(g, "x", TG_DT_F32, 3);
    tg_attr a = TG_A_INT("axes", 0);
    assert_null(tg_apply(g, "sum", &x, 1, &a, 1));
    assert_non_null(strstr(tg_graph_error(g), "unknown attribute 'axes'"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = vec_input(g, "x", TG_DT_F32, 3);
    assert_null(tg_apply(g, "cast", &x, 1, NULL, 0));
    assert_non_null(strstr(tg_graph_error(g), "missing attribute 'dtype'"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = vec_input(g, "x", TG_DT_F32, 3);
    a = TG_A_STR("keepdims", "yes");
    assert_null(tg_apply(g, "sum", &x, 1, &a, 1));
    assert_non_null(strstr(tg_graph_error(g), "attribute 'keepdims' expects true or false"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = vec_input(g, "x", TG_DT_F32, 3);
    a = TG_A_STR("dtype", "f128");
    assert_null(tg_apply(g, "cast", &x, 1, &a, 1));
    assert_non_null(strstr(tg_graph_error(g), "unknown dtype"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = vec_input(g, "x", TG_DT_F32, 3);
    assert_null(tg_apply(g, "add", &x, 1, NULL, 0));
    assert_non_null(strstr(tg_graph_error(g), "add: expects 2 inputs, got 1"));
    tg_graph_free(g);
}

static void test_weak_literals(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = vec_input(g, "x", TG_DT_F32, 3);
    tg_var *i8 = vec_input(g, "i", TG_DT_I8, 3);
    tg_var *u8 = vec_input(g, "u", TG_DT_U8, 3);
    assert_int_equal(tg_var_dtype(tg_mul(g, x, tg_literal_int(g, 2))), TG_DT_F32);
    assert_int_equal(tg_var_dtype(tg_add(g, x, tg_literal_float(g, 0.5))), TG_DT_F32);
    assert_int_equal(tg_var_dtype(tg_add(g, i8, tg_literal_int(g, -128))), TG_DT_I8);
    assert_int_equal(tg_var_dtype(tg_add(g, i8, tg_literal_float(g, 1.5))), TG_DT_F64);
    assert_int_equal(tg_var_dtype(tg_add(g, tg_literal_int(g, 1), tg_literal_int(g, 2))),
                     TG_DT_I64);
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_null(tg_add(g, u8, tg_literal_int(g, 300)));
    assert_int_equal(tg_graph_status(g), TG_ETYPE);
    assert_non_null(strstr(tg_graph_error(g), "300 is out of range for u8"));
    tg_graph_free(g);
}

static void test_strong_promotion_inserts_cast(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = vec_input(g, "x", TG_DT_F32, 3);
    tg_var *s = tg_input(g, "s", TG_DT_F64, 0, NULL);
    tg_var *y = tg_mul(g, x, s); /* a typed 0-d input is strong: f32 x f64 -> f64 */
    assert_non_null(y);
    assert_int_equal(tg_var_dtype(y), TG_DT_F64);
    tg_node *n = y->node;
    assert_int_equal(n->op, TG_OP_MUL);
    assert_int_equal(n->in[0]->kind, TG_VAR_NODE);
    assert_int_equal(n->in[0]->node->op, TG_OP_CAST);
    assert_int_equal(n->in[0]->type.dtype, TG_DT_F64);
    assert_ptr_equal(n->in[1], s);
    tg_graph_free(g);
}

static tg_tensor *vec_f32(const float *v, int64_t n) {
    return tg_tensor_from_data(NULL, TG_DT_F32, 1, (int64_t[]){n}, v);
}

static void test_run_and_check_inputs(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *y = tg_add(g, tg_mul(g, x, tg_literal_int(g, 2)), tg_literal_float(g, 0.5));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor *in = vec_f32((float[]){1, 2, 3}, 3), *out = NULL;
    assert_int_equal(tg_fn_call(f, &in, 1, &out, 1), TG_OK);
    assert_int_equal(tg_tensor_dtype(out), TG_DT_F32);
    assert_int_equal(tg_tensor_shape(out)[0], 3);
    const float *o = tg_tensor_data(out);
    assert_true(o[0] == 2.5f && o[1] == 4.5f && o[2] == 6.5f);
    tg_tensor_free(out);
    /* wrong dtype and wrong rank are errors naming the input */
    tg_tensor *bad = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3});
    assert_int_equal(tg_fn_call(f, &bad, 1, &out, 1), TG_ETYPE);
    assert_non_null(strstr(tg_last_error(), "input 'x': expected f32[?], got f64[3]"));
    tg_tensor_free(bad);
    bad = tg_tensor_new(NULL, TG_DT_F32, 2, (int64_t[]){3, 1});
    assert_int_equal(tg_fn_call(f, &bad, 1, &out, 1), TG_ESHAPE);
    tg_tensor_free(bad);
    assert_int_equal(tg_fn_call(f, &in, 0, &out, 1), TG_EINVAL);
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_graph_free(g);
}

static void test_runtime_broadcast_of_unknown_one(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *y = tg_input(g, "y", TG_DT_F32, 1, (int64_t[]){3});
    tg_var *z = tg_add(g, x, y);
    assert_non_null(z);
    assert_int_equal(tg_var_dim(z, 0), 3);
    tg_graph_set_outputs(g, &z, 1);
    tg_fn *f;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor *in[2] = {vec_f32((float[]){1}, 1), vec_f32((float[]){1, 2, 3}, 3)};
    tg_tensor *out = NULL;
    assert_int_not_equal(tg_fn_call(f, in, 2, &out, 1), TG_OK);
    assert_null(out);
    assert_non_null(strstr(tg_last_error(), "declare the dimension as 1 to broadcast"));
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(f);
    tg_graph_free(g);
}

static void test_outputs_never_alias_inputs(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = vec_input(g, "x", TG_DT_F32, 3);
    tg_var *outs[2] = {x, tg_reshape(g, x, 2, (int64_t[]){1, 3})};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    tg_fn *f;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor *in = vec_f32((float[]){1, 2, 3}, 3), *out[2];
    assert_int_equal(tg_fn_call(f, &in, 1, out, 2), TG_OK);
    assert_ptr_not_equal(tg_tensor_data(out[0]), tg_tensor_data(in));
    assert_ptr_not_equal(tg_tensor_data(out[1]), tg_tensor_data(in));
    ((float *)tg_tensor_data(out[0]))[0] = 42;
    assert_true(((float *)tg_tensor_data(in))[0] == 1.0f);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_graph_free(g);
}

static void test_long_chain_is_iterative(void **state) {
    (void)state;
    const int n = 100000;
    tg_graph *g = tg_graph_new(NULL, "chain");
    tg_var *x = vec_input(g, "x", TG_DT_F64, 2);
    tg_var *v = x;
    for (int i = 0; i < n; i++) v = tg_neg(g, v);
    assert_non_null(v);
    tg_graph_set_outputs(g, &v, 1);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    int cnt;
    tg_node **order = tg_ir_toposort(g, &cnt);
    assert_int_equal(cnt, n);
    free(order); /* default context: malloc */
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(tg_graph_node_count(c), n);
    tg_fn *f;
    assert_int_equal(tg_graph_compile(c, NULL, &f), TG_OK);
    tg_tensor *in = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){2}, (double[]){1, -2});
    tg_tensor *out;
    assert_int_equal(tg_fn_call(f, &in, 1, &out, 1), TG_OK);
    assert_true(((double *)tg_tensor_data(out))[1] == -2.0); /* even count of negations */
    tg_tensor_free(in);
    tg_tensor_free(out);
    tg_fn_free(f);
    tg_graph_free(c);
    tg_graph_free(g);
}

static void test_replace_and_verify(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = vec_input(g, "x", TG_DT_F32, 3);
    tg_var *a = tg_exp(g, x), *b = tg_neg(g, a), *c = tg_sin(g, x);
    tg_graph_set_outputs(g, &b, 1);
    assert_int_equal(tg_ir_replace(g, a, c), TG_OK);
    assert_ptr_equal(b->node->in[0], c);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    /* a different type is refused */
    tg_var *d = tg_cast(g, x, TG_DT_F64);
    assert_int_equal(tg_ir_replace(g, c, d), TG_ETYPE);
    /* a cycle is refused: replace x's use by b, which depends on c which depends on x */
    assert_int_equal(tg_ir_replace(g, c, b), TG_EINVAL);
    tg_graph_free(g);
}

static void test_clone_keeps_structure(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, (int64_t[]){TG_DIM_UNKNOWN, 4});
    tg_var *s = tg_reduce(g, "sum", tg_mul(g, x, tg_literal_int(g, 3)), (int64_t[]){1}, 1, true);
    tg_graph_set_outputs(g, &s, 1);
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    tg_var *cs = tg_graph_output(c, 0);
    assert_true(tg_type_equal(&cs->type, &s->type));
    assert_int_equal(cs->node->op, TG_OP_SUM);
    assert_int_equal(cs->node->attrs[1].i, 1); /* keepdims */
    tg_graph_free(c);
    tg_graph_free(g);
}

/* A value used many times: as every output, and as every operand of a wide node. The
 * clone's scratch array was sized by the variable count and overflowed (heap corruption
 * in vm and c, which clone; reference does not). */
static void test_clone_repeated_values(void **state) {
    (void)state;
    const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C, TG_MODE_DEBUG};
    for (int w = 0; w < 2; w++) {
        tg_graph *g = tg_graph_new(NULL, "f");
        tg_var *x = vec_input(g, "x", TG_DT_F32, 2);
        tg_var *outs[9];
        int nout;
        if (w == 0) { /* return x, x, x, x, x, x, x, x, x */
            nout = 9;
            for (int i = 0; i < nout; i++) outs[i] = x;
        } else { /* concatenate(x, ... 70 times, axis=0), and it returned twice */
            tg_var *xs[70];
            for (int i = 0; i < 70; i++) xs[i] = x;
            nout = 2;
            outs[0] = outs[1] = tg_apply(g, "concatenate", xs, 70, &TG_A_INT("axis", 0), 1);
        }
        assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
        tg_graph *c = tg_graph_clone(g);
        assert_non_null(c);
        assert_int_equal(tg_graph_output_count(c), nout);
        tg_graph_free(c);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[m], .no_fallback = true);
            tg_fn *f = NULL;
            assert_int_equal(tg_graph_compile(g, &o, &f), TG_OK);
            tg_tensor *in = vec_f32((float[]){1.5f, -2}, 2), *out[9] = {0};
            tg_status st = tg_fn_call(f, &in, 1, out, nout);
            if (st != TG_OK) print_error("mode %d: %s\n", (int)modes[m], tg_last_error());
            assert_int_equal(st, TG_OK);
            for (int i = 0; i < nout; i++) {
                const float *d = tg_tensor_data(out[i]);
                int64_t n = tg_tensor_shape(out[i])[0];
                assert_int_equal(n, w == 0 ? 2 : 140);
                for (int64_t k = 0; k < n; k++) assert_true(d[k] == (k % 2 ? -2.0f : 1.5f));
                tg_tensor_free(out[i]);
            }
            tg_tensor_free(in);
            tg_fn_free(f);
        }
        tg_graph_free(g);
    }
}

/* ---- allocation failures: every failure is reported and nothing leaks ---- */
static tg_status build_and_run(tg_ctx *ctx) {
    tg_graph *g = tg_graph_new(ctx, "f");
    if (!g) return TG_ENOMEM;
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, (int64_t[]){2, 3});
    tg_var *y = tg_reduce(g, "sum", tg_exp(g, tg_mul(g, x, tg_literal_float(g, 0.5))),
                          (int64_t[]){0}, 1, false);
    tg_status st = tg_graph_set_outputs(g, &y, 1);
    tg_fn *f = NULL;
    if (st == TG_OK) st = tg_graph_compile(g, NULL, &f);
    tg_tensor *in = NULL, *out = NULL;
    if (st == TG_OK) {
        in = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){2, 3});
        st = in ? tg_fn_call(f, &in, 1, &out, 1) : TG_ENOMEM;
    }
    if (st == TG_OK) assert_true(((float *)tg_tensor_data(out))[0] == 2.0f);
    tg_tensor_free(out);
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_graph_free(g);
    return st;
}

static void test_allocation_failures(void **state) {
    (void)state;
    fail_alloc fa = {0, 0};
    tg_ctx *ctx = tg_ctx_new(failing_alloc, &fa);
    assert_int_equal(build_and_run(ctx), TG_OK);
    long total = fa.count;
    assert_true(total > 10);
    for (long k = 1; k <= total; k++) {
        fa.count = 0;
        fa.fail_at = k;
        tg_status st = build_and_run(ctx);
        if (st != TG_OK) assert_int_equal(st, TG_ENOMEM);
    }
    fa.fail_at = 0;
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sticky_first_error),
        cmocka_unit_test(test_unknown_op_and_attrs),
        cmocka_unit_test(test_weak_literals),
        cmocka_unit_test(test_strong_promotion_inserts_cast),
        cmocka_unit_test(test_run_and_check_inputs),
        cmocka_unit_test(test_runtime_broadcast_of_unknown_one),
        cmocka_unit_test(test_outputs_never_alias_inputs),
        cmocka_unit_test(test_long_chain_is_iterative),
        cmocka_unit_test(test_replace_and_verify),
        cmocka_unit_test(test_clone_keeps_structure),
        cmocka_unit_test(test_clone_repeated_values),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
